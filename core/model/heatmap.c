/* heatmap.c - heat grids from the encoder (update norms or the Δ map), mapped back onto the image
 * through the letterbox, coloured with an inferno ramp, blended over the display image, PNG. */
#include "model/heatmap.h"

#include <math.h>
#include <png.h>
#include <string.h>

#include "model/config.h"
#include "model/preprocess.h"

const char *cl_heatmap_source_name(ClHeatmapSource s)
{
    return s == CL_HEATMAP_DELTA ? "delta" : s == CL_HEATMAP_CHANGE ? "change" : "update_norm";
}

gboolean cl_heatmap_source_from_name(const char *name, ClHeatmapSource *out)
{
    for (int s = CL_HEATMAP_UPDATE_NORM; s <= CL_HEATMAP_CHANGE; s++)
        if (g_strcmp0(name, cl_heatmap_source_name((ClHeatmapSource)s)) == 0) {
            *out = (ClHeatmapSource)s;
            return TRUE;
        }
    return FALSE;
}

static void update_max(ClHeatmap *hm)
{
    float mx = 0;
    for (int i = 0; i < hm->width * hm->height; i++)
        if (isfinite(hm->values[i]) && hm->values[i] > mx)
            mx = hm->values[i];
    hm->max = mx;
}

ClHeatmap *cl_heatmap_new_from_encoder(const ClEncoderOutput *enc, int depth,
                                       ClHeatmapSource source, int image_index, GError **error)
{
    g_return_val_if_fail(enc != NULL, NULL);
    const int G = enc->grid;
    if (G < 2 || enc->n_patches != G * G || depth < 1) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "the encoder output has no patch grid for a heatmap");
        return NULL;
    }
    ClHeatmap *hm = g_new0(ClHeatmap, 1);
    hm->source = source;
    hm->image_index = image_index;
    hm->layer = -1;
    if (source == CL_HEATMAP_CHANGE) {
        if (!enc->change_prob) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "image %d has no change probabilities (the model has no change head, "
                        "or it is a first image)",
                        image_index + 1);
            g_free(hm);
            return NULL;
        }
        hm->width = hm->height = G;
        hm->values = g_memdup2(enc->change_prob, sizeof(float) * (gsize)enc->n_patches);
        hm->max = 1; /* probabilities keep their scale: a pair without change stays dark */
        return hm;
    }
    if (source == CL_HEATMAP_DELTA) {
        if (!enc->delta) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "the Δ map of image %d was not computed", image_index + 1);
            g_free(hm);
            return NULL;
        }
        hm->width = hm->height = G / 2;
        hm->values = g_memdup2(enc->delta, sizeof(float) * (gsize)enc->n_visual);
    } else {
        if (!enc->update_norm) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "the update norms of image %d were not computed", image_index + 1);
            g_free(hm);
            return NULL;
        }
        /* mean over the blocks: every block carries the SVE module (docs/MODEL.md §3.3) */
        const int N = enc->n_patches;
        hm->width = hm->height = G;
        hm->values = g_new0(float, N);
        for (int l = 0; l < depth; l++)
            for (int n = 0; n < N; n++)
                hm->values[n] += enc->update_norm[(gsize)l * N + n];
        for (int n = 0; n < N; n++)
            hm->values[n] /= (float)depth;
    }
    update_max(hm);
    return hm;
}

ClHeatmap *cl_heatmap_new_from_encoder_layer(const ClEncoderOutput *enc, int depth, int layer,
                                             int image_index, GError **error)
{
    g_return_val_if_fail(enc != NULL, NULL);
    const int G = enc->grid, N = enc->n_patches;
    if (G < 2 || N != G * G || layer < 0 || layer >= depth || !enc->update_norm) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "no update norms of block %d for image %d", layer + 1, image_index + 1);
        return NULL;
    }
    ClHeatmap *hm = g_new0(ClHeatmap, 1);
    hm->source = CL_HEATMAP_UPDATE_NORM;
    hm->image_index = image_index;
    hm->layer = layer;
    hm->width = hm->height = G;
    hm->values = g_memdup2(enc->update_norm + (gsize)layer * N, sizeof(float) * (gsize)N);
    update_max(hm);
    return hm;
}

ClHeatmap *cl_heatmap_copy(const ClHeatmap *hm)
{
    ClHeatmap *c = g_memdup2(hm, sizeof *hm);
    c->values = g_memdup2(hm->values, sizeof(float) * (gsize)hm->width * hm->height);
    return c;
}

void cl_heatmap_free(ClHeatmap *hm)
{
    if (!hm)
        return;
    g_free(hm->values);
    g_free(hm);
}

/* Per output coordinate along one axis: the two grid cells to blend and the weight of the
 * second. Pixel centre p (image units) -> model -> grid units with cell centres on integers. */
static void axis_taps(int n_out, double off, double scale, double cell, int n_grid, int *i0,
                      float *f)
{
    for (int p = 0; p < n_out; p++) {
        double m = off + (p + 0.5) * scale;
        double gpos = m / cell - 0.5;
        if (gpos <= 0) {
            i0[p] = 0, f[p] = 0;
        } else if (gpos >= n_grid - 1) {
            i0[p] = n_grid - 1, f[p] = 0;
        } else {
            i0[p] = (int)floor(gpos);
            f[p] = (float)(gpos - i0[p]);
        }
    }
}

float *cl_heatmap_to_image(const ClHeatmap *hm, const ClLetterbox *lb)
{
    g_return_val_if_fail(hm != NULL && lb != NULL, NULL);
    const int W = (int)lb->src_width, H = (int)lb->src_height;
    float *out = g_try_malloc((gsize)W * H * sizeof(float));
    if (!out)
        return NULL;
    int *cx = g_new(int, W), *cy = g_new(int, H);
    float *fx = g_new(float, W), *fy = g_new(float, H);
    axis_taps(W, lb->off_x, lb->scale_x, (double)lb->size / hm->width, hm->width, cx, fx);
    axis_taps(H, lb->off_y, lb->scale_y, (double)lb->size / hm->height, hm->height, cy, fy);
    const float inv = hm->max > 0 ? 1.0f / hm->max : 0.0f;
    for (int y = 0; y < H; y++) {
        const float *r0 = hm->values + (gsize)cy[y] * hm->width;
        const float *r1 = hm->values + (gsize)MIN(cy[y] + 1, hm->height - 1) * hm->width;
        for (int x = 0; x < W; x++) {
            int a = cx[x], b = MIN(cx[x] + 1, hm->width - 1);
            float top = r0[a] + fx[x] * (r0[b] - r0[a]);
            float bot = r1[a] + fx[x] * (r1[b] - r1[a]);
            float v = (top + fy[y] * (bot - top)) * inv;
            out[(gsize)y * W + x] = isfinite(v) ? CLAMP(v, 0.0f, 1.0f) : 0.0f;
        }
    }
    g_free(cx);
    g_free(cy);
    g_free(fx);
    g_free(fy);
    return out;
}

/* matplotlib's "inferno" (CC0) at 0, 1/7, ..., 1 */
static const guint8 inferno[8][3] = {
    { 0, 0, 4 },     { 40, 11, 84 },   { 101, 21, 110 }, { 159, 42, 99 },
    { 212, 72, 66 }, { 245, 125, 21 }, { 250, 193, 39 }, { 252, 255, 164 },
};

/* matplotlib's "viridis" (CC0) at the same stops; and a ramp from dark red through red to
 * yellow, which stays readable over grey radiographs */
static const guint8 viridis[8][3] = {
    { 68, 1, 84 },    { 70, 50, 126 },  { 54, 92, 141 },  { 39, 127, 142 },
    { 31, 161, 135 }, { 74, 193, 109 }, { 160, 218, 57 }, { 253, 231, 37 },
};
static const guint8 reds[8][3] = {
    { 60, 0, 0 },   { 110, 0, 0 },   { 160, 10, 0 },  { 205, 30, 0 },
    { 235, 70, 0 }, { 250, 120, 0 }, { 255, 180, 0 }, { 255, 240, 80 },
};

void cl_heatmap_colour_map(ClHeatmapColours map, double v, guint8 rgb[3])
{
    const guint8(*stops)[3] = map == CL_HEATMAP_VIRIDIS ? viridis
                              : map == CL_HEATMAP_REDS  ? reds
                                                        : inferno;
    if (!(v > 0))
        v = 0;
    if (v > 1)
        v = 1;
    double t = v * 7;
    int i = MIN((int)t, 6);
    double f = t - i;
    for (int k = 0; k < 3; k++)
        rgb[k] = (guint8)lround(stops[i][k] + f * (stops[i + 1][k] - stops[i][k]));
}

void cl_heatmap_colour(double v, guint8 rgb[3])
{
    cl_heatmap_colour_map(CL_HEATMAP_INFERNO, v, rgb);
}

guint8 *cl_heatmap_render_overlay(const ClHeatmap *hm, const ClLetterbox *lb, const ClImage *img,
                                  guint frame, const ClDisplaySettings *s, double opacity,
                                  GError **error)
{
    g_return_val_if_fail(hm != NULL && lb != NULL && img != NULL, NULL);
    if (lb->src_width != img->width || lb->src_height != img->height) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "the heatmap's letterbox is for %u × %u pixels, the image has %u × %u",
                    lb->src_width, lb->src_height, img->width, img->height);
        return NULL;
    }
    ClDisplaySettings def;
    if (!(s = cl_preprocess_settings(img, frame, s, &def, error)))
        return NULL;
    g_autofree guint8 *rgba = cl_display_render_rgba(img, frame, s, error);
    if (!rgba)
        return NULL;
    g_autofree float *heat = cl_heatmap_to_image(hm, lb);
    gsize n = (gsize)img->width * img->height;
    guint8 *out = heat ? g_try_malloc(n * 3) : NULL;
    if (!out) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE,
                    "not enough memory for a %u × %u heatmap", img->width, img->height);
        return NULL;
    }
    opacity = CLAMP(opacity, 0.0, 1.0);
    /* one colour per 1/256 of heat: the LUT is piecewise linear, this is exact to a level */
    guint8 lut[256][3];
    for (int i = 0; i < 256; i++)
        cl_heatmap_colour(i / 255.0, lut[i]);
    for (gsize i = 0; i < n; i++) {
        const guint8 *px = rgba + i * 4;
        float h = heat[i];
        const guint8 *c = lut[(int)lroundf(h * 255.0f)];
        float a = (float)opacity * h;
        for (int k = 0; k < 3; k++) {
            float base = px[k] * (px[3] / 255.0f); /* over black */
            out[i * 3 + k] = (guint8)lroundf(base + a * (c[k] - base));
        }
    }
    return out;
}

/* ---- PNG ---------------------------------------------------------------------------------- */

typedef struct {
    GByteArray *buf;
    char msg[256];
} PngSink;

static void png_sink_write(png_structp png, png_bytep data, png_size_t len)
{
    PngSink *s = png_get_io_ptr(png);
    g_byte_array_append(s->buf, data, (guint)len);
}

static void png_sink_flush(png_structp png)
{
    (void)png;
}

static void png_sink_error(png_structp png, png_const_charp msg)
{
    PngSink *s = png_get_error_ptr(png);
    g_strlcpy(s->msg, msg ? msg : "unknown libpng error", sizeof s->msg);
    png_longjmp(png, 1);
}

static void png_sink_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

/* Encodes into sink->buf; FALSE with sink->msg set on a libpng error. Kept apart from the
 * caller so that no local of the caller lives across setjmp. */
static gboolean png_encode(PngSink *sink, const guint8 *rgb, guint width, guint height)
{
    png_structp png =
        png_create_write_struct(PNG_LIBPNG_VER_STRING, sink, png_sink_error, png_sink_warning);
    if (!png) {
        g_strlcpy(sink->msg, "libpng could not start", sizeof sink->msg);
        return FALSE;
    }
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        g_strlcpy(sink->msg, "libpng could not start", sizeof sink->msg);
        return FALSE;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return FALSE;
    }
    png_set_write_fn(png, sink, png_sink_write, png_sink_flush);
    png_set_IHDR(png, info, width, height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_compression_level(png, 6);
    png_write_info(png, info);
    for (guint y = 0; y < height; y++)
        png_write_row(png, (png_const_bytep)(rgb + (gsize)y * width * 3));
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    return TRUE;
}

gboolean cl_png_write_rgb(const char *path, const guint8 *rgb, guint width, guint height,
                          GError **error)
{
    g_return_val_if_fail(path != NULL && rgb != NULL, FALSE);
    if (width == 0 || height == 0 || width > PNG_USER_WIDTH_MAX || height > PNG_USER_HEIGHT_MAX) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "cannot write a %u × %u PNG to %s",
                    width, height, path);
        return FALSE;
    }
    PngSink sink = { g_byte_array_new(), "" };
    gboolean ok = png_encode(&sink, rgb, width, height);
    if (!ok)
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "could not encode %s as PNG: %s",
                    path, sink.msg);
    else
        ok = g_file_set_contents(path, (const char *)sink.buf->data, (gssize)sink.buf->len, error);
    g_byte_array_unref(sink.buf);
    return ok;
}

gboolean cl_heatmap_write_png(const ClHeatmap *hm, const ClLetterbox *lb, const ClImage *img,
                              guint frame, const ClDisplaySettings *s, double opacity,
                              const char *path, GError **error)
{
    g_autofree guint8 *rgb = cl_heatmap_render_overlay(hm, lb, img, frame, s, opacity, error);
    if (!rgb)
        return FALSE;
    return cl_png_write_rgb(path, rgb, img->width, img->height, error);
}
