/* vist.c - VIST2 context compression: the renderer, the chunk plan, the render–encode–evict
 * step (docs/MODEL.md §4.6). */
#include "model/vist.h"

#include <gio/gio.h>
#include <pango/pangocairo.h>
#include <string.h>

#include "model/encoder.h"
#include "model/tokenizer.h"

/* ---- the renderer -------------------------------------------------------------------------- */

static PangoLayout *page_layout(cairo_t *cr, const char *text, int px, int width)
{
    PangoLayout *l = pango_cairo_create_layout(cr);
    /* fixed font options, whatever the desktop's: the model was trained on these pixels */
    cairo_font_options_t *fo = cairo_font_options_create();
    cairo_font_options_set_antialias(fo, CAIRO_ANTIALIAS_GRAY);
    cairo_font_options_set_hint_style(fo, CAIRO_HINT_STYLE_NONE);
    cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
    pango_cairo_context_set_font_options(pango_layout_get_context(l), fo);
    cairo_font_options_destroy(fo);
    PangoFontDescription *fd = pango_font_description_from_string("DejaVu Sans Mono, monospace");
    pango_font_description_set_absolute_size(fd, (double)px * PANGO_SCALE);
    pango_layout_set_font_description(l, fd);
    pango_font_description_free(fd);
    pango_layout_set_width(l, width * PANGO_SCALE);
    pango_layout_set_wrap(l, PANGO_WRAP_WORD_CHAR);
    pango_layout_set_text(l, text, -1);
    return l;
}

void cl_vist_render(const ClModelConfig *cfg, const char *text, guint8 *grey, int *font_px_used,
                    gboolean *cut)
{
    g_return_if_fail(cfg != NULL && grey != NULL);
    const int S = cfg->image_size, margin = MAX(2, S / 40), inner = S - 2 * margin;
    g_autofree char *valid = g_utf8_make_valid(text ? text : "", -1);
    cairo_surface_t *surf = cairo_image_surface_create(CAIRO_FORMAT_A8, S, S);
    cairo_t *cr = cairo_create(surf);
    int px = MAX(cfg->vist_font_px, 4);
    PangoLayout *l = page_layout(cr, valid, px, inner);
    int w = 0, h = 0;
    pango_layout_get_pixel_size(l, &w, &h);
    while (h > inner && px > 4) { /* smaller until it fits, down to 4 px */
        g_object_unref(l);
        l = page_layout(cr, valid, --px, inner);
        pango_layout_get_pixel_size(l, &w, &h);
    }
    if (font_px_used)
        *font_px_used = px;
    if (cut)
        *cut = h > inner;
    /* ink as alpha on a clear page, clipped to the margins */
    cairo_rectangle(cr, margin, margin, inner, inner);
    cairo_clip(cr);
    cairo_move_to(cr, margin, margin);
    pango_cairo_show_layout(cr, l);
    g_object_unref(l);
    cairo_destroy(cr);
    cairo_surface_flush(surf);
    const guint8 *a = cairo_image_surface_get_data(surf);
    const int stride = cairo_image_surface_get_stride(surf);
    for (int y = 0; y < S; y++)
        for (int x = 0; x < S; x++)
            grey[(size_t)y * S + x] = (guint8)(255 - a[(size_t)y * stride + x]);
    cairo_surface_destroy(surf);
}

gboolean cl_vist_write_page_png(const guint8 *grey, int size, const char *path, GError **error)
{
    g_return_val_if_fail(grey != NULL && size > 0 && path != NULL, FALSE);
    cairo_surface_t *surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, size, size);
    guint8 *d = cairo_image_surface_get_data(surf);
    const int stride = cairo_image_surface_get_stride(surf);
    for (int y = 0; y < size; y++) {
        guint32 *row = (guint32 *)(gpointer)(d + (size_t)y * stride);
        for (int x = 0; x < size; x++) {
            const guint32 g = grey[(size_t)y * size + x];
            row[x] = 0xff000000u | g << 16 | g << 8 | g;
        }
    }
    cairo_surface_mark_dirty(surf);
    cairo_status_t st = cairo_surface_write_to_png(surf, path);
    cairo_surface_destroy(surf);
    if (st != CAIRO_STATUS_SUCCESS) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "Cannot write %s: %s", path,
                    cairo_status_to_string(st));
        return FALSE;
    }
    return TRUE;
}

int cl_vist_plan(const ClModelConfig *cfg, int n_tokens, int *n_chunks)
{
    int chunks = 0, compressed = 0;
    if (cfg->vist_chunk > 0 && n_tokens > 0) {
        chunks = n_tokens / cfg->vist_chunk;
        compressed = chunks * cfg->vist_chunk;
        if (n_tokens - compressed > cfg->vist_tail) { /* the tail rule: m > β */
            chunks++;
            compressed = n_tokens;
        }
    }
    if (n_chunks)
        *n_chunks = chunks;
    return compressed;
}

/* ---- the compressor ------------------------------------------------------------------------ */

struct _ClVist {
    ClBackend *be;
    const ClModel *model;
    ClEncoderState *state;
    float *pixels;    /* [C, S, S] */
    GPtrArray *pages; /* guint8[S·S] */
    GPtrArray *texts; /* char* */
    int m, e;
};

ClVist *cl_vist_new(ClBackend *be, const ClModel *model, GError **error)
{
    g_return_val_if_fail(be != NULL && model != NULL, NULL);
    const ClModelConfig *cfg = &model->config;
    if (cfg->vist_chunk <= 0) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "The model has no VIST2 context compression (config vist)");
        return NULL;
    }
    ClVist *v = g_new0(ClVist, 1);
    v->be = be;
    v->model = model;
    v->state = cl_encoder_state_new(model);
    v->pixels = g_try_new(float, (size_t)cfg->channels * cfg->image_size * cfg->image_size);
    v->pages = g_ptr_array_new_with_free_func(g_free);
    v->texts = g_ptr_array_new_with_free_func(g_free);
    v->m = cl_config_n_visual(cfg);
    v->e = cfg->dec_dim;
    if (!v->state || !v->pixels) {
        cl_vist_free(v);
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "Not enough memory for the VIST2 encoder");
        return NULL;
    }
    return v;
}

void cl_vist_free(ClVist *v)
{
    if (!v)
        return;
    if (v->state)
        cl_encoder_state_free(v->state);
    g_free(v->pixels);
    g_ptr_array_unref(v->pages);
    g_ptr_array_unref(v->texts);
    g_free(v);
}

guint cl_vist_n_pages(const ClVist *v)
{
    return v ? v->pages->len : 0;
}

const guint8 *cl_vist_page(const ClVist *v, guint i, const char **text)
{
    g_return_val_if_fail(v != NULL && i < v->pages->len, NULL);
    if (text)
        *text = g_ptr_array_index(v->texts, i);
    return g_ptr_array_index(v->pages, i);
}

char *cl_vist_chunk_pixels(const ClModel *model, const gint32 *ids, int n, float *pixels,
                           guint8 *grey)
{
    const ClModelConfig *cfg = &model->config;
    const int S = cfg->image_size, C = cfg->channels;
    GString *text = g_string_new(NULL);
    cl_tokenizer_decode(model->tokenizer, ids, (gsize)MAX(n, 0), text);
    g_autofree guint8 *own = grey ? NULL : g_new(guint8, (size_t)S * S);
    guint8 *page = grey ? grey : own;
    cl_vist_render(cfg, text->str, page, NULL, NULL);
    /* §2's input: grey replicated to the channels, v' = (v − 0.5) / 0.5 */
    for (int c = 0; c < C; c++)
        for (size_t i = 0; i < (size_t)S * S; i++)
            pixels[(size_t)c * S * S + i] = (float)page[i] / 127.5f - 1.0f;
    return g_string_free(text, FALSE);
}

gboolean cl_vist_encode(ClVist *v, const gint32 *ids, int n, float *rows, GError **error)
{
    g_return_val_if_fail(v != NULL && (ids != NULL || n == 0) && rows != NULL, FALSE);
    const int S = v->model->config.image_size;
    guint8 *grey = g_new(guint8, (size_t)S * S);
    char *text = cl_vist_chunk_pixels(v->model, ids, n, v->pixels, grey);
    g_ptr_array_add(v->pages, grey);
    g_ptr_array_add(v->texts, text);
    /* every page is a first image: it owes nothing to the page or the image before it */
    cl_encoder_state_reset(v->state);
    ClEncoderOutput eo;
    memset(&eo, 0, sizeof eo);
    gboolean ok =
        cl_encoder_forward(v->be, v->model, v->state, v->pixels, 0, FALSE, NULL, NULL, &eo, error);
    if (ok)
        memcpy(rows, eo.visual, sizeof(float) * (size_t)v->m * v->e);
    cl_encoder_output_clear(&eo);
    return ok;
}

/* Pages' rows for the trainer: each page (C, S, S) encoded as a first image. */
gboolean cl_vist_encode_pages(ClBackend *be, const ClModel *model, const float *pixels, int n_pages,
                              float *rows, GError **error)
{
    if (n_pages <= 0)
        return TRUE;
    const ClModelConfig *cfg = &model->config;
    const size_t px = (size_t)cfg->channels * cfg->image_size * cfg->image_size;
    const size_t me = (size_t)cl_config_n_visual(cfg) * cfg->dec_dim;
    g_autoptr(ClEncoderState) st = cl_encoder_state_new(model);
    if (!st) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "Not enough memory for the VIST2 encoder");
        return FALSE;
    }
    for (int p = 0; p < n_pages; p++) {
        cl_encoder_state_reset(st);
        ClEncoderOutput eo;
        memset(&eo, 0, sizeof eo);
        gboolean ok =
            cl_encoder_forward(be, model, st, pixels + p * px, 0, FALSE, NULL, NULL, &eo, error);
        if (ok)
            memcpy(rows + p * me, eo.visual, sizeof(float) * me);
        cl_encoder_output_clear(&eo);
        if (!ok)
            return FALSE;
    }
    return TRUE;
}

/* The chunk's visual rows through the decoder (their ids: CL_DECODER_VISUAL), RoPE positions
 * shifted by `shift`. */
static gboolean run_rows(ClVist *v, ClKVCache *cache, const float *rows, int shift, float *logits,
                         GError **error)
{
    gint32 *ids = g_new(gint32, v->m);
    for (int i = 0; i < v->m; i++)
        ids[i] = CL_DECODER_VISUAL;
    cl_kv_cache_set_position_shift(cache, shift);
    gboolean ok = cl_decoder_forward(v->be, v->model, cache, ids, v->m, rows, logits, NULL, NULL,
                                     NULL, error);
    cl_kv_cache_set_position_shift(cache, 0);
    g_free(ids);
    return ok;
}

gboolean cl_vist_compress_rows(ClVist *v, ClKVCache *cache, int n, const float *rows, float *logits,
                               GError **error)
{
    g_return_val_if_fail(v != NULL && cache != NULL && rows != NULL, FALSE);
    const int len = cl_kv_cache_len(cache);
    if (n < 1 || n > len) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "A VIST2 chunk of %d positions is not in a cache of %d", n, len);
        return FALSE;
    }
    if (v->model->config.vist_sees_text) {
        /* the rows at slots len.. see the text; their positions are the chunk's: len − n + j */
        return run_rows(v, cache, rows, -n, logits, error) &&
               cl_kv_cache_remove(cache, len - n, n, error);
    }
    return cl_kv_cache_remove(cache, len - n, n, error) &&
           run_rows(v, cache, rows, 0, logits, error);
}

gboolean cl_vist_compress(ClVist *v, ClKVCache *cache, const gint32 *ids, int n, float *logits,
                          GError **error)
{
    g_return_val_if_fail(v != NULL && cache != NULL && ids != NULL, FALSE);
    if (n < 1 || n > cl_kv_cache_len(cache)) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "A VIST2 chunk of %d positions is not in a cache of %d", n,
                    cl_kv_cache_len(cache));
        return FALSE;
    }
    g_autofree float *rows = g_try_new(float, (size_t)v->m * v->e);
    if (!rows) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY, "Out of memory");
        return FALSE;
    }
    return cl_vist_encode(v, ids, n, rows, error) &&
           cl_vist_compress_rows(v, cache, n, rows, logits, error);
}

gboolean cl_vist_prefill(ClVist *v, ClKVCache *cache, const gint32 *ids, int n, float *logits,
                         int *added, GError **error)
{
    g_return_val_if_fail(v != NULL && cache != NULL && (ids != NULL || n == 0), FALSE);
    const ClModelConfig *cfg = &v->model->config;
    const int len0 = cl_kv_cache_len(cache);
    const int compressed = cl_vist_plan(cfg, n, NULL);
    g_autofree float *rows = g_try_new(float, (size_t)v->m * v->e);
    if (!rows) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY, "Out of memory");
        return FALSE;
    }
    gboolean ok = TRUE;
    for (int at = 0; ok && at < compressed; at += cfg->vist_chunk) {
        const int k = MIN(cfg->vist_chunk, compressed - at);
        const gboolean last = at + k == n;
        if (cfg->vist_sees_text) {
            /* the rows must see the text: it runs, then the step replaces it */
            ok = cl_decoder_forward(v->be, v->model, cache, ids + at, k, NULL, NULL, NULL, NULL,
                                    NULL, error) &&
                 cl_vist_compress(v, cache, ids + at, k, last ? logits : NULL, error);
        } else {
            /* nothing would ever read the text's keys: running it only to evict it is waste */
            ok = cl_vist_encode(v, ids + at, k, rows, error) &&
                 run_rows(v, cache, rows, 0, last ? logits : NULL, error);
        }
    }
    if (ok && compressed < n)
        ok = cl_decoder_forward(v->be, v->model, cache, ids + compressed, n - compressed, NULL,
                                logits, NULL, NULL, NULL, error);
    if (added)
        *added = cl_kv_cache_len(cache) - len0;
    return ok;
}
