/* display.c - the display transform: original values -> 8-bit RGBA, always from the stored values.
 *
 * Grey pipeline per channel (DICOM PS3.4 grayscale pipeline order):
 *   stored --modality LUT (rescale)--> modality value --VOI (window, VOI LUT or stretch)--> 0..1
 *   --MONOCHROME1 inversion (after VOI)--> 0..1 --> 8-bit. */
#include "image/display.h"

#include <gio/gio.h>
#include <math.h>
#include <string.h>

static gboolean is_dicom_grey(const ClImage *img)
{
    return img->format == CL_IMAGE_FORMAT_DICOM && img->channels == 1;
}

/* Value range an integer or float sample format can hold, in modality units. */
static void full_range(const ClImage *img, const ClFrame *f, double *lo, double *hi)
{
    double a, b;
    guint bits = img->bits ? MIN(img->bits, 32u) : 8;
    if (img->sample_format == CL_SAMPLE_FLOAT) {
        a = 0.0;
        b = 1.0;
    } else if (img->sample_format == CL_SAMPLE_INT) {
        a = -ldexp(1.0, (int)bits - 1);
        b = ldexp(1.0, (int)bits - 1) - 1.0;
    } else {
        a = 0.0;
        b = ldexp(1.0, (int)bits) - 1.0;
    }
    double s = f->rescale_slope, c = f->rescale_intercept;
    *lo = MIN(a * s + c, b * s + c);
    *hi = MAX(a * s + c, b * s + c);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Percentile of a channel over finite samples; large planes are subsampled on a regular stride
 * to at most ~4 M samples, which moves a 2 % point by far less than one display level. */
static void channel_percentiles(const float *p, gsize n, double lo_pct, double hi_pct, double *lo,
                                double *hi)
{
    const gsize cap = 4u << 20;
    gsize stride = n > cap ? (n + cap - 1) / cap : 1;
    gsize m = 0;
    float *tmp = g_new(float, n / stride + 1);
    for (gsize i = 0; i < n; i += stride)
        if (isfinite(p[i]))
            tmp[m++] = p[i];
    if (m == 0) {
        *lo = 0;
        *hi = 1;
        g_free(tmp);
        return;
    }
    qsort(tmp, m, sizeof(float), cmp_float);
    double a = CLAMP(lo_pct, 0.0, 100.0) / 100.0 * (double)(m - 1);
    double b = CLAMP(hi_pct, 0.0, 100.0) / 100.0 * (double)(m - 1);
    /* linear interpolation between order statistics (numpy's default) */
    gsize ia = (gsize)a, ib = (gsize)b;
    *lo = tmp[ia] + (a - (double)ia) * (tmp[MIN(ia + 1, m - 1)] - tmp[ia]);
    *hi = tmp[ib] + (b - (double)ib) * (tmp[MIN(ib + 1, m - 1)] - tmp[ib]);
    g_free(tmp);
}

static void channel_minmax(const float *p, gsize n, double *lo, double *hi)
{
    double a = INFINITY, b = -INFINITY;
    for (gsize i = 0; i < n; i++) {
        if (!isfinite(p[i]))
            continue;
        if (p[i] < a)
            a = p[i];
        if (p[i] > b)
            b = p[i];
    }
    if (a > b) {
        a = 0;
        b = 1;
    }
    *lo = a;
    *hi = b;
}

void cl_display_channel_range(const ClImage *img, guint frame, guint channel,
                              const ClDisplaySettings *s, double *lo, double *hi)
{
    const ClFrame *f = cl_image_frame(img, frame);
    const float *p = cl_image_plane(img, frame, MIN(channel, img->channels - 1));
    gsize n = (gsize)img->width * img->height;
    double a = 0, b = 1;
    switch (s->mode) {
    case CL_DISPLAY_PERCENTILE: channel_percentiles(p, n, s->low_pct, s->high_pct, &a, &b); break;
    case CL_DISPLAY_MINMAX: channel_minmax(p, n, &a, &b); break;
    case CL_DISPLAY_FULL_RANGE: full_range(img, f, lo, hi); return;
    case CL_DISPLAY_WINDOW:
        *lo = s->center - s->width / 2;
        *hi = s->center + s->width / 2;
        return;
    default: full_range(img, f, lo, hi); return;
    }
    /* stored -> modality units */
    double sl = f->rescale_slope, ic = f->rescale_intercept;
    *lo = MIN(a * sl + ic, b * sl + ic);
    *hi = MAX(a * sl + ic, b * sl + ic);
}

void cl_display_settings_init(ClDisplaySettings *s, const ClImage *img, guint frame)
{
    memset(s, 0, sizeof *s);
    s->low_pct = 2.0;
    s->high_pct = 98.0;
    frame = MIN(frame, cl_image_n_frames(img) - 1);

    switch (img->layout) {
    case CL_LAYOUT_RGB:
    case CL_LAYOUT_RGBA: s->bands[0] = 0, s->bands[1] = 1, s->bands[2] = 2; break;
    case CL_LAYOUT_BANDS:
        s->bands[0] = 0;
        s->bands[1] = img->channels > 1 ? 1 : 0;
        s->bands[2] = img->channels > 2 ? 2 : 0;
        s->per_band = TRUE; /* false-colour composites are stretched band by band */
        break;
    default: s->bands[0] = s->bands[1] = s->bands[2] = 0; break;
    }

    if (is_dicom_grey(img)) {
        s->invert = g_strcmp0(img->photometric, "MONOCHROME1") == 0;
        if (img->windows->len > 0) {
            const ClWindowPreset *w = &g_array_index(img->windows, ClWindowPreset, 0);
            s->mode = CL_DISPLAY_WINDOW;
            s->center = w->center;
            s->width = w->width;
            return;
        }
        if (img->voi_luts->len > 0) {
            s->mode = CL_DISPLAY_VOI_LUT;
            s->voi_lut = 0;
            return;
        }
        if (g_strcmp0(img->modality, "CT") == 0) {
            s->mode = CL_DISPLAY_WINDOW; /* soft-tissue window, the usual CT default */
            s->center = 40;
            s->width = 400;
            return;
        }
        /* no preset: a window spanning the frame's values */
        ClDisplaySettings mm = *s;
        mm.mode = CL_DISPLAY_MINMAX;
        double lo, hi;
        cl_display_channel_range(img, frame, 0, &mm, &lo, &hi);
        s->mode = CL_DISPLAY_WINDOW;
        s->center = (lo + hi) / 2 + 0.5;
        s->width = MAX(hi - lo + 1, 1.0);
        return;
    }
    if (img->sample_format != CL_SAMPLE_FLOAT && img->bits <= 8)
        s->mode = CL_DISPLAY_FULL_RANGE;
    else
        s->mode = CL_DISPLAY_PERCENTILE;
}

gboolean cl_display_effective_window(const ClImage *img, guint frame, const ClDisplaySettings *s,
                                     double *center, double *width)
{
    if (s->mode == CL_DISPLAY_VOI_LUT)
        return FALSE;
    if (s->mode == CL_DISPLAY_WINDOW) {
        *center = s->center;
        *width = s->width;
        return TRUE;
    }
    double lo, hi;
    cl_display_channel_range(img, frame, (guint)MAX(s->bands[0], 0), s, &lo, &hi);
    if (img->format == CL_IMAGE_FORMAT_DICOM) {
        *center = (lo + hi) / 2 + 0.5;
        *width = hi - lo + 1;
    } else {
        *center = (lo + hi) / 2;
        *width = hi - lo;
    }
    return TRUE;
}

/* DICOM PS3.3 C.11.2.1.2.1 linear window: the 0.5 and (w - 1) terms are the standard's. */
static inline double dicom_window(double x, double c, double w)
{
    if (w < 1)
        w = 1;
    double lo = c - 0.5 - (w - 1) / 2, hi = c - 0.5 + (w - 1) / 2;
    if (x <= lo)
        return 0.0;
    if (x > hi)
        return 1.0;
    return w > 1 ? (x - (c - 0.5)) / (w - 1) + 0.5 : 1.0;
}

static inline double linear(double x, double lo, double hi)
{
    if (!(hi > lo))
        return x >= hi ? 1.0 : 0.0;
    return CLAMP((x - lo) / (hi - lo), 0.0, 1.0);
}

static inline double voi_lut(const ClVoiLut *l, double x)
{
    double idx = floor(x - l->first_value);
    gsize i = idx <= 0 ? 0 : idx >= (double)(l->n_entries - 1) ? l->n_entries - 1 : (gsize)idx;
    double maxv = ldexp(1.0, (int)CLAMP(l->bits, 1u, 16u)) - 1;
    return CLAMP(l->data[i] / maxv, 0.0, 1.0);
}

double cl_display_map_value(const ClImage *img, const ClDisplaySettings *s, double m, double lo,
                            double hi)
{
    double y;
    if (s->mode == CL_DISPLAY_WINDOW) {
        y = img->format == CL_IMAGE_FORMAT_DICOM
                ? dicom_window(m, s->center, s->width)
                : linear(m, s->center - s->width / 2, s->center + s->width / 2);
    } else if (s->mode == CL_DISPLAY_VOI_LUT && s->voi_lut < img->voi_luts->len) {
        y = voi_lut(g_ptr_array_index(img->voi_luts, s->voi_lut), m);
    } else {
        y = linear(m, lo, hi);
    }
    return s->invert ? 1.0 - y : y;
}

static inline guint8 to8(double y)
{
    return (guint8)lround(CLAMP(y, 0.0, 1.0) * 255.0);
}

void cl_display_resolve_ranges(const ClImage *img, guint frame, const ClDisplaySettings *s,
                               ClDisplayRanges *r)
{
    for (int k = 0; k < 3; k++)
        r->lo[k] = 0, r->hi[k] = 1;
    gboolean needs_range = s->mode != CL_DISPLAY_WINDOW && s->mode != CL_DISPLAY_VOI_LUT;
    if (!needs_range || frame >= cl_image_n_frames(img))
        return;
    for (int k = 0; k < 3; k++) {
        if (s->bands[k] < 0 || s->bands[k] >= (int)img->channels)
            continue;
        gboolean done = FALSE;
        for (int j = 0; j < k && !done; j++)
            if (s->bands[j] == s->bands[k])
                r->lo[k] = r->lo[j], r->hi[k] = r->hi[j], done = TRUE;
        if (!done)
            cl_display_channel_range(img, frame, (guint)s->bands[k], s, &r->lo[k], &r->hi[k]);
    }
    if (!s->per_band && s->mode != CL_DISPLAY_FULL_RANGE) {
        /* one range over the shown bands keeps colour balance */
        double a = INFINITY, b = -INFINITY;
        for (int k = 0; k < 3; k++)
            if (s->bands[k] >= 0)
                a = MIN(a, r->lo[k]), b = MAX(b, r->hi[k]);
        for (int k = 0; k < 3; k++)
            r->lo[k] = a, r->hi[k] = b;
    }
}

/* Whether the image has every band s shows. */
static gboolean has_bands(const ClImage *img, const ClDisplaySettings *s)
{
    for (int k = 0; k < 3; k++)
        if (s->bands[k] >= (int)img->channels)
            return FALSE;
    return TRUE;
}

/* The stretch range of one band over the pooled modality values of several frames (each
 * subsampled so that the pool stays within the single-image cap). */
static void pooled_range(const ClImage *const *imgs, const guint *frames, guint n, guint band,
                         const ClDisplaySettings *s, double *lo, double *hi)
{
    const gsize cap = 4u << 20;
    gsize total = 0;
    for (guint i = 0; i < n; i++)
        total += (gsize)imgs[i]->width * imgs[i]->height;
    float *pool = g_new(float, MIN(total, cap) + n + 1);
    gsize m = 0;
    for (guint i = 0; i < n; i++) {
        const ClFrame *f = cl_image_frame(imgs[i], frames[i]);
        const float *p = cl_image_plane(imgs[i], frames[i], MIN(band, imgs[i]->channels - 1));
        gsize np = (gsize)imgs[i]->width * imgs[i]->height;
        gsize share = MAX(cap / n, 1);
        gsize stride = np > share ? (np + share - 1) / share : 1;
        for (gsize j = 0; j < np; j += stride)
            if (isfinite(p[j]))
                pool[m++] = (float)(p[j] * f->rescale_slope + f->rescale_intercept);
    }
    if (s->mode == CL_DISPLAY_PERCENTILE)
        channel_percentiles(pool, m, s->low_pct, s->high_pct, lo, hi);
    else
        channel_minmax(pool, m, lo, hi);
    g_free(pool);
}

void cl_display_resolve_ranges_shared(const ClImage *const *imgs, const guint *frames, guint n,
                                      const ClDisplaySettings *s, ClDisplayRanges *r)
{
    g_return_if_fail(imgs != NULL && frames != NULL && n > 0 && s != NULL && r != NULL);
    /* the images that can share: a frame that exists and the bands shown */
    g_autofree const ClImage **use = g_new(const ClImage *, n);
    g_autofree guint *use_frames = g_new(guint, n);
    guint k = 0;
    for (guint i = 0; i < n; i++)
        if (imgs[i] && frames[i] < cl_image_n_frames(imgs[i]) && has_bands(imgs[i], s))
            use[k] = imgs[i], use_frames[k++] = frames[i];
    gboolean stretch = s->mode == CL_DISPLAY_PERCENTILE || s->mode == CL_DISPLAY_MINMAX;
    if (!stretch || k <= 1) {
        cl_display_resolve_ranges(k ? use[0] : imgs[0], k ? use_frames[0] : frames[0], s, r);
        return;
    }
    for (int c = 0; c < 3; c++) {
        r->lo[c] = 0, r->hi[c] = 1;
        if (s->bands[c] < 0)
            continue;
        gboolean done = FALSE;
        for (int j = 0; j < c && !done; j++)
            if (s->bands[j] == s->bands[c])
                r->lo[c] = r->lo[j], r->hi[c] = r->hi[j], done = TRUE;
        if (!done)
            pooled_range(use, use_frames, k, (guint)s->bands[c], s, &r->lo[c], &r->hi[c]);
    }
    if (!s->per_band) {
        double a = INFINITY, b = -INFINITY;
        for (int c = 0; c < 3; c++)
            if (s->bands[c] >= 0)
                a = MIN(a, r->lo[c]), b = MAX(b, r->hi[c]);
        for (int c = 0; c < 3; c++)
            r->lo[c] = a, r->hi[c] = b;
    }
}

/* What every pixel of a render needs, resolved once. */
typedef struct {
    const ClImage *img;
    const ClDisplaySettings *s;
    const float *src[3], *alpha;
    gboolean grey;
    double sl, ic, alpha_max;
    double lo[3], hi[3];
} PixelMap;

static inline void map_pixel(const PixelMap *m, gsize i, guint8 *px)
{
    gboolean nodata = FALSE;
    if (m->grey) {
        float v = m->src[0][i];
        nodata = !isfinite(v);
        guint8 g =
            nodata ? 0
                   : to8(cl_display_map_value(m->img, m->s, v * m->sl + m->ic, m->lo[0], m->hi[0]));
        px[0] = px[1] = px[2] = g;
    } else {
        for (int k = 0; k < 3; k++) {
            if (!m->src[k]) {
                px[k] = 0;
                continue;
            }
            float v = m->src[k][i];
            if (!isfinite(v)) {
                nodata = TRUE;
                px[k] = 0;
                continue;
            }
            px[k] = to8(cl_display_map_value(m->img, m->s, v * m->sl + m->ic, m->lo[k], m->hi[k]));
        }
    }
    if (nodata)
        px[3] = 0; /* NaN/Inf (float nodata) shows as transparent */
    else if (m->alpha)
        px[3] = to8(m->alpha[i] / m->alpha_max);
    else
        px[3] = 255;
}

guint8 *cl_display_render_rgba_region(const ClImage *img, guint frame, const ClDisplaySettings *s,
                                      const ClDisplayRanges *ranges, guint x, guint y, guint w,
                                      guint h, guint step, guint *out_w, guint *out_h,
                                      GCancellable *cancellable, GError **error)
{
    g_return_val_if_fail(img != NULL && s != NULL, NULL);
    if (frame >= cl_image_n_frames(img)) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_INVALID,
                    "frame %u does not exist (the image has %u)", frame + 1,
                    cl_image_n_frames(img));
        return NULL;
    }
    for (int k = 0; k < 3; k++)
        if (s->bands[k] >= (int)img->channels) {
            g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_INVALID,
                        "band %d does not exist (the image has %u)", s->bands[k] + 1,
                        img->channels);
            return NULL;
        }
    if (s->mode == CL_DISPLAY_VOI_LUT && s->voi_lut >= img->voi_luts->len) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_INVALID,
                    "VOI LUT %u does not exist (the file has %u)", s->voi_lut + 1,
                    img->voi_luts->len);
        return NULL;
    }
    if (w == 0 || h == 0 || step == 0 || x >= img->width || y >= img->height ||
        w > img->width - x || h > img->height - y) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_INVALID,
                    "the region %u × %u at (%u, %u) in steps of %u is not inside the %u × %u image",
                    w, h, x, y, step, img->width, img->height);
        return NULL;
    }
    guint ow = (w + step - 1) / step, oh = (h + step - 1) / step;
    guint8 *out = g_try_malloc((gsize)ow * oh * 4);
    if (!out) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE,
                    "not enough memory to display %u × %u pixels", ow, oh);
        return NULL;
    }

    PixelMap m = { .img = img, .s = s };
    ClDisplayRanges own;
    if (!ranges) {
        cl_display_resolve_ranges(img, frame, s, &own);
        ranges = &own;
    }
    memcpy(m.lo, ranges->lo, sizeof m.lo);
    memcpy(m.hi, ranges->hi, sizeof m.hi);
    int alpha_ch = -1;
    if (img->layout == CL_LAYOUT_GREY_ALPHA)
        alpha_ch = 1;
    else if (img->layout == CL_LAYOUT_RGBA)
        alpha_ch = 3;
    m.alpha_max = 1.0;
    if (alpha_ch >= 0 && img->sample_format != CL_SAMPLE_FLOAT)
        m.alpha_max = ldexp(1.0, (int)MIN(img->bits ? img->bits : 8, 32u)) - 1;
    const ClFrame *f = cl_image_frame(img, frame);
    m.sl = f->rescale_slope, m.ic = f->rescale_intercept;
    for (int k = 0; k < 3; k++)
        m.src[k] = s->bands[k] >= 0 ? cl_image_plane(img, frame, (guint)s->bands[k]) : NULL;
    m.alpha = alpha_ch >= 0 ? cl_image_plane(img, frame, (guint)alpha_ch) : NULL;
    m.grey = m.src[0] == m.src[1] && m.src[1] == m.src[2] && m.src[0] != NULL;

    if (step == 1) {
        for (guint r = 0; r < h; r++) {
            if (g_cancellable_is_cancelled(cancellable))
                goto cancelled;
            gsize base = (gsize)(y + r) * img->width + x;
            guint8 *row = out + (gsize)r * ow * 4;
            for (guint c = 0; c < w; c++)
                map_pixel(&m, base + c, row + (gsize)c * 4);
        }
    } else {
        /* each output pixel: the mean of the displayed values of its step × step block */
        g_autofree guint32 *acc = g_new(guint32, (gsize)ow * 5);
        for (guint orow = 0; orow < oh; orow++) {
            if (g_cancellable_is_cancelled(cancellable))
                goto cancelled;
            memset(acc, 0, sizeof(guint32) * ow * 5);
            for (guint r = orow * step; r < MIN(h, (orow + 1) * step); r++) {
                gsize base = (gsize)(y + r) * img->width + x;
                for (guint c = 0; c < w; c++) {
                    guint8 px[4];
                    map_pixel(&m, base + c, px);
                    guint32 *a = acc + (c / step) * 5;
                    a[0] += px[0], a[1] += px[1], a[2] += px[2], a[3] += px[3], a[4]++;
                }
            }
            guint8 *row = out + (gsize)orow * ow * 4;
            for (guint oc = 0; oc < ow; oc++) {
                guint32 *a = acc + oc * 5;
                for (int k = 0; k < 4; k++)
                    row[oc * 4 + k] = (guint8)((a[k] + a[4] / 2) / a[4]);
            }
        }
    }
    *out_w = ow;
    *out_h = oh;
    return out;

cancelled:
    g_free(out);
    g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_CANCELLED, "Cancelled");
    return NULL;
}

guint8 *cl_display_render_rgba(const ClImage *img, guint frame, const ClDisplaySettings *s,
                               GError **error)
{
    g_return_val_if_fail(img != NULL && s != NULL, NULL);
    guint w, h;
    return cl_display_render_rgba_region(img, frame, s, NULL, 0, 0, img->width, img->height, 1, &w,
                                         &h, NULL, error);
}

char *cl_display_pixel_readout(const ClImage *img, guint frame, double x, double y)
{
    g_return_val_if_fail(img != NULL, NULL);
    if (frame >= cl_image_n_frames(img) || !(x >= 0) || !(y >= 0) || x >= img->width ||
        y >= img->height)
        return NULL;
    guint px = (guint)x, py = (guint)y;
    const ClFrame *f = cl_image_frame(img, frame);
    gsize i = (gsize)py * img->width + px;
    GString *s = g_string_new(NULL);
    g_string_append_printf(s, "x %u y %u", px, py);
    /* where, in the world: millimetres from the top-left pixel's centre, or map coordinates */
    if (img->has_pixel_spacing && img->pixel_spacing[0] > 0 && img->pixel_spacing[1] > 0) {
        g_string_append_printf(s, " (%.1f, %.1f mm)", px * img->pixel_spacing[1],
                               py * img->pixel_spacing[0]);
    } else if (img->geo && img->geo->has_transform) {
        const double *t = img->geo->transform;
        double cx = px + 0.5, cy = py + 0.5; /* the pixel's centre (PixelIsArea) */
        double gx = t[0] + cx * t[1] + cy * t[2], gy = t[3] + cx * t[4] + cy * t[5];
        if (img->geo->epsg > 0)
            g_string_append_printf(s, " (%.2f, %.2f EPSG:%d)", gx, gy, img->geo->epsg);
        else
            g_string_append_printf(s, " (%.2f, %.2f)", gx, gy);
    }
    g_string_append(s, " · ");
    /* what: the values in modality units (rescale applied; 16-bit stays 16-bit) */
    guint n = MIN(img->channels, 4u);
    for (guint c = 0; c < n; c++) {
        float v = cl_image_plane(img, frame, c)[i];
        double m = v * f->rescale_slope + f->rescale_intercept;
        if (c)
            g_string_append_c(s, ' ');
        if (!isfinite(v))
            g_string_append(s, "nodata");
        else if (img->sample_format == CL_SAMPLE_FLOAT ||
                 f->rescale_slope != floor(f->rescale_slope))
            g_string_append_printf(s, "%.4g", m);
        else
            g_string_append_printf(s, "%.0f", m);
    }
    if (img->channels > n)
        g_string_append(s, " …");
    if (img->rescale_type && *img->rescale_type && img->channels == 1)
        g_string_append_printf(s, " %s", img->rescale_type);
    return g_string_free(s, FALSE);
}
