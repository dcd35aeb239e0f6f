/* render.c - report pictures: display images, heatmap overlays and difference images, fitted to
 * the report's size limit, as RGB bytes, Cairo surfaces and PNG. */
#include "report/render.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/heatmap.h"
#include "model/preprocess.h"
#include "report/report.h"

void cl_rp_picture_clear(ClRpPicture *p)
{
    g_free(p->rgb);
    g_free(p->placeholder);
    memset(p, 0, sizeof *p);
}

void cl_rp_planes_clear(ClRpPlanes *p)
{
    g_free(p->planes);
    memset(p, 0, sizeof *p);
}

void cl_rp_fit(guint w, guint h, guint max_px, guint *out_w, guint *out_h)
{
    w = MAX(w, 1);
    h = MAX(h, 1);
    max_px = MAX(max_px, 1);
    if (w <= max_px && h <= max_px) {
        *out_w = w, *out_h = h;
        return;
    }
    double s = (double)max_px / MAX(w, h);
    *out_w = CLAMP((guint)lround(w * s), 1, max_px);
    *out_h = CLAMP((guint)lround(h * s), 1, max_px);
}

/* Resized copy of 3 planes (area average when shrinking, bilinear when growing). */
static float *resize3(const float *src, guint sw, guint sh, guint dw, guint dh)
{
    float *dst = g_try_malloc(sizeof(float) * 3 * (gsize)dw * dh);
    if (dst)
        cl_preprocess_resize(src, 3, (int)sw, (int)sh, dst, (int)dw, (int)dh);
    return dst;
}

static gboolean out_of_memory(guint w, guint h, GError **error)
{
    g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_RENDER,
                "not enough memory to render a %u × %u picture", w, h);
    return FALSE;
}

gboolean cl_rp_display(const ClImage *img, guint frame, const ClDisplaySettings *s, guint max_px,
                       ClRpPlanes *out, GError **error)
{
    memset(out, 0, sizeof *out);
    cl_rp_fit(img->width, img->height, max_px, &out->w, &out->h);
    /* resized on the way: a large image's full-size float planes are never made */
    out->planes = cl_preprocess_display_fit(img, frame, s, out->w, out->h, error);
    return out->planes != NULL;
}

static guint8 level(float v)
{
    if (!(v > 0))
        return 0;
    if (v >= 1)
        return 255;
    return (guint8)lrintf(v * 255.0f);
}

void cl_rp_planes_to_picture(const ClRpPlanes *p, ClRpPicture *out)
{
    memset(out, 0, sizeof *out);
    gsize n = (gsize)p->w * p->h;
    out->rgb = g_malloc(n * 3);
    out->width = p->w;
    out->height = p->h;
    for (gsize i = 0; i < n; i++)
        for (int c = 0; c < 3; c++)
            out->rgb[i * 3 + c] = level(p->planes[c * n + i]);
}

void cl_rp_difference(const ClRpPlanes *before, const ClRpPlanes *after, ClRpPicture *out,
                      double *max_out)
{
    memset(out, 0, sizeof *out);
    const guint w = after->w, h = after->h;
    const gsize n = (gsize)w * h;
    g_autofree float *b = NULL;
    const float *bp = before->planes;
    if (before->w != w || before->h != h) {
        b = resize3(before->planes, before->w, before->h, w, h);
        bp = b;
    }
    g_autofree float *diff = g_new(float, n);
    float mx = 0;
    for (gsize i = 0; i < n; i++) {
        float d = 0;
        for (int c = 0; c < 3; c++)
            d += fabsf(after->planes[c * n + i] - (bp ? bp[c * n + i] : 0.0f));
        d /= 3.0f;
        diff[i] = isfinite(d) ? d : 0.0f;
        mx = MAX(mx, diff[i]);
    }
    /* scaled to the largest difference so that small changes stay visible; the caption says
     * what white stands for */
    const float scale = MAX(mx, 1.0f / 255.0f);
    out->rgb = g_malloc(n * 3);
    out->width = w;
    out->height = h;
    for (gsize i = 0; i < n; i++)
        out->rgb[i * 3] = out->rgb[i * 3 + 1] = out->rgb[i * 3 + 2] = level(diff[i] / scale);
    *max_out = mx;
}

void cl_rp_difference_view(const ClRpPlanes *before, guint bw, guint bh, const ClRpPlanes *after,
                           guint aw, guint ah, const double *m, const double *masks, guint n_masks,
                           double tolerance, ClRpPicture *out, double *changed_fraction,
                           guint64 *compared_out)
{
    const guint w = before->w, h = before->h;
    const gsize nb = (gsize)w * h, na = (gsize)after->w * after->h;
    if (out) {
        memset(out, 0, sizeof *out);
        out->rgb = g_malloc(nb * 3);
        out->width = w;
        out->height = h;
    }
    /* picture pixel -> before's full-resolution pixels -> after's -> after's picture pixels */
    const double sx = (double)bw / w, sy = (double)bh / h;
    const double ax = (double)after->w / aw, ay = (double)after->h / ah;
    const double stretch[6] = { 0, (double)aw / bw, 0, 0, 0, (double)ah / bh };
    const double *t = m ? m : stretch;
    guint64 changed = 0, compared = 0;
    for (guint y = 0; y < h; y++) {
        const double uy = (y + 0.5) * sy;
        for (guint x = 0; x < w; x++) {
            const double ux = (x + 0.5) * sx;
            const gsize i = (gsize)y * w + x;
            int a8[3];
            for (int c = 0; c < 3; c++)
                a8[c] = level(before->planes[c * nb + i]);
            const int grey = (a8[0] * 77 + a8[1] * 150 + a8[2] * 29) >> 8;
            guint8 px[3];
            gboolean masked = FALSE;
            for (guint k = 0; k < n_masks && !masked; k++) {
                const double *r = masks + 4 * k;
                masked = ux >= MIN(r[0], r[2]) && ux < MAX(r[0], r[2]) && uy >= MIN(r[1], r[3]) &&
                         uy < MAX(r[1], r[3]);
            }
            const double mx = t[0] + t[1] * ux + t[2] * uy, my = t[3] + t[4] * ux + t[5] * uy;
            if (masked) { /* an ignore region: not compared */
                px[0] = px[1] = (guint8)(grey / 8), px[2] = (guint8)(40 + grey / 8);
            } else if (!(mx >= 0 && my >= 0 && mx < aw && my < ah)) {
                px[0] = px[1] = 36, px[2] = 56; /* no later pixel here: not compared */
            } else {
                const guint bx = MIN((guint)(mx * ax), after->w - 1),
                            by = MIN((guint)(my * ay), after->h - 1);
                const gsize j = (gsize)by * after->w + bx;
                int dmax = 0;
                for (int c = 0; c < 3; c++)
                    dmax = MAX(dmax, abs(a8[c] - (int)level(after->planes[c * na + j])));
                compared++;
                if (dmax > tolerance) {
                    changed++;
                    px[0] = (guint8)(128 + dmax / 2), px[1] = px[2] = 24;
                } else {
                    px[0] = px[1] = px[2] = (guint8)(grey * 3 / 10);
                }
            }
            if (out)
                memcpy(out->rgb + i * 3, px, 3);
        }
    }
    *changed_fraction = compared ? (double)changed / (double)compared : 0.0;
    if (compared_out)
        *compared_out = compared;
}

gboolean cl_rp_overlay(const ClCaseHeatmap *hm, guint image_index, const ClImage *img, guint frame,
                       const ClDisplaySettings *s, double opacity, guint max_px, ClRpPicture *out,
                       GError **error)
{
    memset(out, 0, sizeof *out);
    if (!hm->data) {
        g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_RENDER,
                    "the heatmap's values were not loaded");
        return FALSE;
    }
    if (hm->grid_w < 1 || hm->grid_h < 1 || hm->grid_w > 4096 || hm->grid_h > 4096 ||
        hm->input_size < 1 || hm->input_size > 65536) {
        g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_RENDER,
                    "the heatmap has an unusable grid (%u × %u over an input of %d)", hm->grid_w,
                    hm->grid_h, hm->input_size);
        return FALSE;
    }
    ClHeatmapSource source = CL_HEATMAP_UPDATE_NORM;
    if (!cl_heatmap_source_from_name(hm->kind, &source))
        source = CL_HEATMAP_UPDATE_NORM;
    ClHeatmap grid = {
        .source = source,
        .image_index = (int)image_index,
        .width = (int)hm->grid_w,
        .height = (int)hm->grid_h,
        .values = hm->data,
        .max = 0,
    };
    for (gsize i = 0; i < (gsize)hm->grid_w * hm->grid_h; i++)
        if (isfinite(hm->data[i]) && hm->data[i] > grid.max)
            grid.max = hm->data[i];
    if (source == CL_HEATMAP_CHANGE) /* probabilities on their own scale */
        grid.max = 1;
    ClLetterbox lb;
    cl_letterbox_init(&lb, img->width, img->height, hm->input_size);
    g_autofree guint8 *rgb = cl_heatmap_render_overlay(&grid, &lb, img, frame, s, opacity, error);
    if (!rgb)
        return FALSE;
    guint w, h;
    cl_rp_fit(img->width, img->height, max_px, &w, &h);
    if (w == img->width && h == img->height) {
        out->rgb = g_steal_pointer(&rgb);
        out->width = w;
        out->height = h;
        return TRUE;
    }
    const gsize n = (gsize)img->width * img->height;
    g_autofree float *planes = g_try_malloc(sizeof(float) * 3 * n);
    if (!planes)
        return out_of_memory(img->width, img->height, error);
    for (gsize i = 0; i < n; i++)
        for (int c = 0; c < 3; c++)
            planes[c * n + i] = rgb[i * 3 + c] / 255.0f;
    g_clear_pointer(&rgb, g_free);
    ClRpPlanes small = { resize3(planes, img->width, img->height, w, h), w, h };
    if (!small.planes)
        return out_of_memory(w, h, error);
    cl_rp_planes_to_picture(&small, out);
    cl_rp_planes_clear(&small);
    return TRUE;
}

cairo_surface_t *cl_rp_picture_surface(const ClRpPicture *p)
{
    if (!p->rgb || p->width == 0 || p->height == 0)
        return NULL;
    cairo_surface_t *s =
        cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)p->width, (int)p->height);
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(s);
        return NULL;
    }
    cairo_surface_flush(s);
    guint8 *data = cairo_image_surface_get_data(s);
    const int stride = cairo_image_surface_get_stride(s);
    for (guint y = 0; y < p->height; y++) {
        guint32 *row = (guint32 *)(gpointer)(data + (gsize)y * stride);
        const guint8 *src = p->rgb + (gsize)y * p->width * 3;
        for (guint x = 0; x < p->width; x++)
            row[x] = 0xff000000u | ((guint32)src[x * 3] << 16) | ((guint32)src[x * 3 + 1] << 8) |
                     src[x * 3 + 2];
    }
    cairo_surface_mark_dirty(s);
    return s;
}

static cairo_status_t png_append(void *closure, const unsigned char *data, unsigned int length)
{
    g_byte_array_append(closure, data, length);
    return CAIRO_STATUS_SUCCESS;
}

GBytes *cl_rp_picture_png(const ClRpPicture *p)
{
    cairo_surface_t *s = cl_rp_picture_surface(p);
    if (!s)
        return NULL;
    GByteArray *buf = g_byte_array_new();
    cairo_status_t st = cairo_surface_write_to_png_stream(s, png_append, buf);
    cairo_surface_destroy(s);
    if (st != CAIRO_STATUS_SUCCESS) {
        g_byte_array_unref(buf);
        return NULL;
    }
    return g_byte_array_free_to_bytes(buf);
}
