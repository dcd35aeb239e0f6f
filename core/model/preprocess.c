/* preprocess.c - a ClImage frame -> the model input [C, S, S] (docs/MODEL.md §2): display
 * transform, channels, letterbox (area average down, bilinear up), normalisation. */
#include "model/preprocess.h"

#include <math.h>
#include <string.h>

#include "model/config.h"

void cl_letterbox_init(ClLetterbox *lb, guint width, guint height, int size)
{
    memset(lb, 0, sizeof *lb);
    lb->size = size;
    lb->src_width = MAX(width, 1u);
    lb->src_height = MAX(height, 1u);
    double s = MIN((double)size / lb->src_width, (double)size / lb->src_height);
    /* the longer side fills the input exactly; the other is rounded to whole pixels */
    lb->content_w = lb->src_width >= lb->src_height ? size : (int)lround(lb->src_width * s);
    lb->content_h = lb->src_height >= lb->src_width ? size : (int)lround(lb->src_height * s);
    lb->content_w = CLAMP(lb->content_w, 1, size);
    lb->content_h = CLAMP(lb->content_h, 1, size);
    lb->off_x = (size - lb->content_w) / 2;
    lb->off_y = (size - lb->content_h) / 2;
    lb->scale_x = (double)lb->content_w / lb->src_width;
    lb->scale_y = (double)lb->content_h / lb->src_height;
}

void cl_letterbox_image_to_model(const ClLetterbox *lb, double x, double y, double *mx, double *my)
{
    *mx = lb->off_x + x * lb->scale_x;
    *my = lb->off_y + y * lb->scale_y;
}

void cl_letterbox_model_to_image(const ClLetterbox *lb, double mx, double my, double *x, double *y)
{
    *x = (mx - lb->off_x) / lb->scale_x;
    *y = (my - lb->off_y) / lb->scale_y;
}

/* ---- separable resampling ------------------------------------------------------------------- */

/* One axis: output o reads n[o] consecutive sources from first[o] with weights w[o*stride ...]
 * (weights sum to 1). */
typedef struct {
    int *first, *n;
    float *w;
    int stride;
} Taps;

static void taps_clear(Taps *t)
{
    g_free(t->first);
    g_free(t->n);
    g_free(t->w);
}

static void taps_init(Taps *t, int n_in, int n_out)
{
    t->first = g_new(int, n_out);
    t->n = g_new0(int, n_out);
    if (n_out < n_in) {
        /* area average: output o covers [o * r, (o + 1) * r) in source pixels */
        double r = (double)n_in / n_out;
        t->stride = (int)ceil(r) + 1;
        t->w = g_new0(float, (gsize)n_out * t->stride);
        for (int o = 0; o < n_out; o++) {
            double a = o * r, b = MIN((o + 1) * r, (double)n_in);
            int i0 = (int)floor(a), i1 = MIN((int)ceil(b), n_in);
            t->first[o] = i0;
            double sum = 0;
            for (int i = i0; i < i1; i++) {
                double cover = MIN(b, i + 1.0) - MAX(a, (double)i);
                t->w[(gsize)o * t->stride + (i - i0)] = (float)MAX(cover, 0.0);
                sum += MAX(cover, 0.0);
            }
            t->n[o] = i1 - i0;
            for (int k = 0; k < t->n[o]; k++)
                t->w[(gsize)o * t->stride + k] = (float)(t->w[(gsize)o * t->stride + k] / sum);
        }
    } else {
        /* bilinear, half-pixel centres, clamped at the edges */
        t->stride = 2;
        t->w = g_new0(float, (gsize)n_out * 2);
        double r = (double)n_in / n_out;
        for (int o = 0; o < n_out; o++) {
            double s = (o + 0.5) * r - 0.5;
            if (s <= 0) {
                t->first[o] = 0, t->n[o] = 1, t->w[o * 2] = 1;
            } else if (s >= n_in - 1) {
                t->first[o] = n_in - 1, t->n[o] = 1, t->w[o * 2] = 1;
            } else {
                int i0 = (int)floor(s);
                float f = (float)(s - i0);
                t->first[o] = i0;
                t->n[o] = f > 0 ? 2 : 1;
                t->w[o * 2] = 1 - f;
                t->w[o * 2 + 1] = f;
            }
        }
    }
}

/* The vertical pass of a resize: rows of w values (the horizontal pass's) to h rows. */
static void vertical_pass(const float *src, const Taps *ty, int w, int h, float *dst)
{
    for (int y = 0; y < h; y++) {
        const float *wt = ty->w + (gsize)y * ty->stride;
        for (int x = 0; x < w; x++) {
            float acc = 0;
            for (int k = 0; k < ty->n[y]; k++)
                acc += wt[k] * src[(gsize)(ty->first[y] + k) * w + x];
            dst[(gsize)y * w + x] = acc;
        }
    }
}

void cl_preprocess_resize(const float *src, int c, int sw, int sh, float *dst, int dw, int dh)
{
    g_return_if_fail(src && dst && c > 0 && sw > 0 && sh > 0 && dw > 0 && dh > 0);
    Taps tx, ty;
    taps_init(&tx, sw, dw);
    taps_init(&ty, sh, dh);
    float *tmp = g_new(float, (gsize)sh *dw); /* one plane after the horizontal pass */
    for (int ch = 0; ch < c; ch++) {
        const float *p = src + (gsize)ch * sw * sh;
        for (int y = 0; y < sh; y++)
            for (int x = 0; x < dw; x++) {
                const float *row = p + (gsize)y * sw + tx.first[x];
                const float *w = tx.w + (gsize)x * tx.stride;
                float acc = 0;
                for (int k = 0; k < tx.n[x]; k++)
                    acc += w[k] * row[k];
                tmp[(gsize)y * dw + x] = acc;
            }
        vertical_pass(tmp, &ty, dw, dh, dst + (gsize)ch * dw * dh);
    }
    g_free(tmp);
    taps_clear(&tx);
    taps_clear(&ty);
}

/* ---- display values ------------------------------------------------------------------------- */

const ClDisplaySettings *cl_preprocess_settings(const ClImage *img, guint frame,
                                                const ClDisplaySettings *s,
                                                ClDisplaySettings *defaults, GError **error)
{
    g_return_val_if_fail(img != NULL && defaults != NULL, NULL);
    if (frame >= cl_image_n_frames(img)) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_INVALID,
                    "frame %u does not exist (the image has %u)", frame + 1,
                    cl_image_n_frames(img));
        return NULL;
    }
    if (s)
        return s;
    cl_display_settings_init(defaults, img, frame);
    return defaults;
}

static guint8 *render(const ClImage *img, guint frame, const ClDisplaySettings *s, GError **error)
{
    ClDisplaySettings def;
    if (!(s = cl_preprocess_settings(img, frame, s, &def, error)))
        return NULL;
    return cl_display_render_rgba(img, frame, s, error);
}

float *cl_preprocess_display(const ClImage *img, guint frame, const ClDisplaySettings *s,
                             GError **error)
{
    g_autofree guint8 *rgba = render(img, frame, s, error);
    if (!rgba)
        return NULL;
    gsize n = (gsize)img->width * img->height;
    float *out = g_try_malloc(n * 3 * sizeof(float));
    if (!out) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE,
                    "not enough memory for %u × %u display values", img->width, img->height);
        return NULL;
    }
    for (gsize i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            out[k * n + i] = rgba[i * 4 + k] / 255.0f;
    return out;
}

/* Rows of the display render at a time in cl_preprocess_display_fit */
#define FIT_STRIPE 128

float *cl_preprocess_display_fit(const ClImage *img, guint frame, const ClDisplaySettings *s,
                                 guint dw, guint dh, GError **error)
{
    g_return_val_if_fail(img != NULL && dw > 0 && dh > 0, NULL);
    if (dw == img->width && dh == img->height)
        return cl_preprocess_display(img, frame, s, error);
    ClDisplaySettings def;
    if (!(s = cl_preprocess_settings(img, frame, s, &def, error)))
        return NULL;
    ClDisplayRanges ranges; /* once, so that every stripe maps values alike */
    cl_display_resolve_ranges(img, frame, s, &ranges);
    const int W = (int)img->width, H = (int)img->height, w = (int)dw, h = (int)dh;
    float *tmp = g_try_malloc((gsize)H * w * 3 * sizeof(float));
    float *out = g_try_malloc((gsize)w * h * 3 * sizeof(float));
    if (!tmp || !out) {
        g_free(tmp);
        g_free(out);
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE,
                    "not enough memory to resize %d × %d display values", W, H);
        return NULL;
    }
    Taps tx, ty;
    taps_init(&tx, W, w);
    taps_init(&ty, H, h);
    /* the horizontal pass stripe by stripe from the 8-bit render, with the sums of
     * cl_preprocess_resize over the planes (value = level / 255.0f) */
    gboolean ok = TRUE;
    for (int y0 = 0; y0 < H && ok; y0 += FIT_STRIPE) {
        const int rows = MIN(FIT_STRIPE, H - y0);
        guint ow = 0, oh = 0;
        g_autofree guint8 *rgba = cl_display_render_rgba_region(
            img, frame, s, &ranges, 0, (guint)y0, (guint)W, (guint)rows, 1, &ow, &oh, NULL, error);
        if (!rgba) {
            ok = FALSE;
            break;
        }
        for (int c = 0; c < 3; c++)
            for (int r = 0; r < rows; r++) {
                const guint8 *row = rgba + (gsize)r * W * 4;
                for (int x = 0; x < w; x++) {
                    const float *wt = tx.w + (gsize)x * tx.stride;
                    float acc = 0;
                    for (int k = 0; k < tx.n[x]; k++)
                        acc += wt[k] * (row[(gsize)(tx.first[x] + k) * 4 + c] / 255.0f);
                    tmp[((gsize)c * H + y0 + r) * w + x] = acc;
                }
            }
    }
    for (int c = 0; c < 3 && ok; c++)
        vertical_pass(tmp + (gsize)c * H * w, &ty, w, h, out + (gsize)c * w * h);
    g_free(tmp);
    taps_clear(&tx);
    taps_clear(&ty);
    if (!ok)
        g_clear_pointer(&out, g_free);
    return out;
}

/* The letterboxed, normalised model input from an 8-bit RGBA picture of W × H. */
static gboolean letterbox_rgba(const guint8 *rgba, int W, int H, gboolean grey, int size,
                               int channels, float *out, ClLetterbox *lb, GError **error)
{
    ClLetterbox box;
    cl_letterbox_init(&box, (guint)W, (guint)H, size);
    if (lb)
        *lb = box;
    const int cw = box.content_w, chh = box.content_h;

    /* Horizontal pass straight from the 8-bit render (a full-size float copy of a large image
     * would cost 12 bytes a pixel), then the vertical pass. */
    Taps tx, ty;
    taps_init(&tx, W, cw);
    taps_init(&ty, H, chh);
    float *tmp = g_try_malloc((gsize)H * cw * channels * sizeof(float));
    if (!tmp) {
        taps_clear(&tx);
        taps_clear(&ty);
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE,
                    "not enough memory to resize %d × %d pixels", W, H);
        return FALSE;
    }
    for (int y = 0; y < H; y++) {
        const guint8 *row = rgba + (gsize)y * W * 4;
        for (int x = 0; x < cw; x++) {
            const float *w = tx.w + (gsize)x * tx.stride;
            float acc[3] = { 0, 0, 0 };
            for (int k = 0; k < tx.n[x]; k++) {
                const guint8 *px = row + (gsize)(tx.first[x] + k) * 4;
                for (int c = 0; c < 3; c++)
                    acc[c] += w[k] * (px[c] / 255.0f);
            }
            if (channels == 3) {
                for (int c = 0; c < 3; c++)
                    tmp[((gsize)c * H + y) * cw + x] = acc[c];
            } else {
                tmp[(gsize)y * cw + x] =
                    grey ? acc[0] : 0.299f * acc[0] + 0.587f * acc[1] + 0.114f * acc[2];
            }
        }
    }
    /* padding is 0 after normalisation, i.e. mid grey */
    memset(out, 0, (gsize)channels * size * size * sizeof(float));
    for (int c = 0; c < channels; c++) {
        const float *p = tmp + (gsize)c * H * cw;
        float *q = out + (gsize)c * size * size;
        for (int y = 0; y < chh; y++) {
            const float *w = ty.w + (gsize)y * ty.stride;
            float *qrow = q + (gsize)(box.off_y + y) * size + box.off_x;
            for (int x = 0; x < cw; x++) {
                float acc = 0;
                for (int k = 0; k < ty.n[y]; k++)
                    acc += w[k] * p[(gsize)(ty.first[y] + k) * cw + x];
                qrow[x] = (acc - 0.5f) / 0.5f;
            }
        }
    }
    g_free(tmp);
    taps_clear(&tx);
    taps_clear(&ty);
    return TRUE;
}

static gboolean check_input(int size, int channels, GError **error)
{
    if (size < 1 || size > CL_CONFIG_MAX_IMAGE || (channels != 1 && channels != 3)) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "cannot make a %d-channel %d × %d model input", channels, size, size);
        return FALSE;
    }
    return TRUE;
}

gboolean cl_preprocess_image(const ClImage *img, guint frame, const ClDisplaySettings *s, int size,
                             int channels, float *out, ClLetterbox *lb, GError **error)
{
    g_return_val_if_fail(img != NULL && out != NULL, FALSE);
    if (!check_input(size, channels, error))
        return FALSE;
    g_autofree guint8 *rgba = render(img, frame, s, error);
    if (!rgba)
        return FALSE;
    const gboolean grey = img->layout == CL_LAYOUT_GREY || img->layout == CL_LAYOUT_GREY_ALPHA;
    return letterbox_rgba(rgba, (int)img->width, (int)img->height, grey, size, channels, out, lb,
                          error);
}

gboolean cl_preprocess_image_aligned(const ClImage *img, guint frame, const ClDisplaySettings *s,
                                     const double m[6], guint frame_w, guint frame_h, int size,
                                     int channels, float *out, ClLetterbox *lb, GError **error)
{
    g_return_val_if_fail(img != NULL && out != NULL && m != NULL, FALSE);
    if (!check_input(size, channels, error))
        return FALSE;
    if (frame_w == 0 || frame_h == 0 || (guint64)frame_w * frame_h > ((guint64)1 << 28)) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT, "cannot align onto %u × %u pixels",
                    frame_w, frame_h);
        return FALSE;
    }
    g_autofree guint8 *rgba = render(img, frame, s, error);
    if (!rgba)
        return FALSE;
    /* the picture resampled onto the frame: frame pixel (x, y) shows the image at m(x, y),
     * bilinear; outside the image, mid grey (what the padding means) */
    const int W = (int)img->width, H = (int)img->height;
    guint8 *warped = g_try_malloc((gsize)frame_w * frame_h * 4);
    if (!warped) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE,
                    "not enough memory to align %u × %u pixels", frame_w, frame_h);
        return FALSE;
    }
    for (guint y = 0; y < frame_h; y++)
        for (guint x = 0; x < frame_w; x++) {
            double cx = x + 0.5, cy = y + 0.5;
            double fx = m[0] + m[1] * cx + m[2] * cy - 0.5, fy = m[3] + m[4] * cx + m[5] * cy - 0.5;
            guint8 *o = warped + ((gsize)y * frame_w + x) * 4;
            if (!(fx >= -0.5 && fy >= -0.5 && fx <= W - 0.5 && fy <= H - 0.5)) {
                o[0] = o[1] = o[2] = 128, o[3] = 255;
                continue;
            }
            fx = CLAMP(fx, 0.0, W - 1.0), fy = CLAMP(fy, 0.0, H - 1.0);
            int x0 = (int)fx, y0 = (int)fy, x1 = MIN(x0 + 1, W - 1), y1 = MIN(y0 + 1, H - 1);
            double ax = fx - x0, ay = fy - y0;
            for (int c = 0; c < 4; c++) {
                double v = (rgba[((gsize)y0 * W + x0) * 4 + c] * (1 - ax) +
                            rgba[((gsize)y0 * W + x1) * 4 + c] * ax) *
                               (1 - ay) +
                           (rgba[((gsize)y1 * W + x0) * 4 + c] * (1 - ax) +
                            rgba[((gsize)y1 * W + x1) * 4 + c] * ax) *
                               ay;
                o[c] = (guint8)lround(CLAMP(v, 0.0, 255.0));
            }
        }
    const gboolean grey = img->layout == CL_LAYOUT_GREY || img->layout == CL_LAYOUT_GREY_ALPHA;
    gboolean ok =
        letterbox_rgba(warped, (int)frame_w, (int)frame_h, grey, size, channels, out, lb, error);
    g_free(warped);
    return ok;
}

void cl_preprocess_apply_masks(float *pixels, int channels, const ClLetterbox *lb,
                               const double *rects, guint n)
{
    const int S = lb->size;
    for (guint r = 0; r < n; r++) {
        double x0 = CLAMP(rects[r * 4 + 0], 0.0, (double)lb->src_width);
        double y0 = CLAMP(rects[r * 4 + 1], 0.0, (double)lb->src_height);
        double x1 = CLAMP(rects[r * 4 + 2], 0.0, (double)lb->src_width);
        double y1 = CLAMP(rects[r * 4 + 3], 0.0, (double)lb->src_height);
        if (!(x1 > x0 && y1 > y0))
            continue;
        double mx0, my0, mx1, my1;
        cl_letterbox_image_to_model(lb, x0, y0, &mx0, &my0);
        cl_letterbox_image_to_model(lb, x1, y1, &mx1, &my1);
        /* every model pixel the rectangle touches */
        int i0 = CLAMP((int)floor(mx0), 0, S), j0 = CLAMP((int)floor(my0), 0, S);
        int i1 = CLAMP((int)ceil(mx1), 0, S), j1 = CLAMP((int)ceil(my1), 0, S);
        for (int c = 0; c < channels; c++)
            for (int j = j0; j < j1; j++)
                for (int i = i0; i < i1; i++)
                    pixels[((gsize)c * S + j) * S + i] = 0.0f;
    }
}
