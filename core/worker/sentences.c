/* sentences.c - sentence-level attention maps over the visual tokens. */
#include "worker/sentences.h"

#include <math.h>
#include <string.h>

#include "model/decoder.h"

void cl_sentence_map_free(ClSentenceMap *s)
{
    if (!s)
        return;
    cl_heatmap_free(s->map);
    g_free(s);
}

GPtrArray *cl_sentence_maps(ClBackend *be, const ClModel *model, const ClDescribeResult *res,
                            guint image, GError **error)
{
    GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)cl_sentence_map_free);
    if (!res->ids || res->ids->len == 0 || !res->prompt_ids || !res->visual)
        return out;
    if (model->config.casa != CL_CASA_OFF) {
        /* the maps read the text's attention to the visual positions, which CASA has none of */
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "no sentence maps for a CASA model (its images are not in the sequence)");
        g_ptr_array_unref(out);
        return NULL;
    }
    if (res->context_pages > 0) {
        /* the maps replay the prompt, which holds the reports as text, not as the pages read */
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "no sentence maps for a run that read prior reports as VIST2 pages");
        g_ptr_array_unref(out);
        return NULL;
    }
    const int M = res->n_visual_per_image, np = (int)res->prompt_ids->len;
    const int ng = (int)res->ids->len, n = np + ng;
    if (image >= res->n_images || M <= 0 || n > model->config.max_len) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "no attention map: image %u of %u, %d positions", image + 1, res->n_images, n);
        g_ptr_array_unref(out);
        return NULL;
    }
    /* where image `image`'s visual tokens sit in the prompt: its block of M visual ids */
    int vis0 = -1, block = -1;
    const gint32 *p = (const gint32 *)(gpointer)res->prompt_ids->data;
    for (int i = 0; i < np && vis0 < 0; i++)
        if (p[i] == CL_DECODER_VISUAL && (i == 0 || p[i - 1] != CL_DECODER_VISUAL) &&
            ++block == (int)image && i + M <= np)
            vis0 = i;
    if (vis0 < 0) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT, "no visual tokens for image %u",
                    image + 1);
        g_ptr_array_unref(out);
        return NULL;
    }
    g_autofree gint32 *ids = g_new(gint32, n);
    memcpy(ids, res->prompt_ids->data, sizeof(gint32) * np);
    memcpy(ids + np, res->ids->data, sizeof(gint32) * ng);
    /* the attention of the positions that predicted each generated token: position np - 1 + k
     * produced token k */
    g_autoptr(ClKVCache) cache = cl_kv_cache_new(model, n);
    g_autofree float *att = g_try_new(float, (gsize)(ng + 1) * n); /* rows np - 1 .. n - 1 */
    if (!cache || !att) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY, "no memory for attention");
        g_ptr_array_unref(out);
        return NULL;
    }
    if (!cl_decoder_forward_attention(be, model, cache, ids, n, res->visual, NULL, -1, np - 1, att,
                                      error)) {
        g_ptr_array_unref(out);
        return NULL;
    }

    /* sentences over the generated tokens' bytes; offsets in the text made valid UTF-8 (what
     * people are shown), measured on each sentence's end: the prefix up to a '.' made valid */
    const int G = (int)lround(sqrt((double)M));
    g_autoptr(GString) raw = g_string_new(NULL);
    g_autofree char *full = g_utf8_make_valid(res->text ? res->text : "", -1);
    gsize full_len = strlen(full), start = 0, pos = 0;
    int first = 0;
    for (int k = 0; k < ng; k++) {
        gsize len = 0;
        const char *b =
            cl_tokenizer_token_bytes(model->tokenizer, g_array_index(res->ids, gint32, k), &len);
        gboolean ends = FALSE;
        for (gsize i = 0; b && i < len; i++)
            ends |= b[i] == '.' || b[i] == '!' || b[i] == '?' || b[i] == '\n';
        if (b)
            g_string_append_len(raw, b, (gssize)len);
        if (!ends && k < ng - 1)
            continue;
        g_autofree char *valid = g_utf8_make_valid(raw->str, (gssize)raw->len);
        pos = k == ng - 1 ? full_len : MIN(strlen(valid), full_len);
        /* tokens first..k make a sentence; its map is their mean attention over the image */
        ClSentenceMap *sm = g_new0(ClSentenceMap, 1);
        sm->start = start;
        sm->end = MAX(pos, start);
        ClHeatmap *hm = g_new0(ClHeatmap, 1);
        hm->source = CL_HEATMAP_UPDATE_NORM;
        hm->image_index = (int)image;
        hm->width = hm->height = G;
        hm->values = g_new0(float, (gsize)G * G);
        for (int t = first; t <= k; t++) {
            /* the row of the position that emitted token t: np - 1 + t, i.e. row t */
            const float *row = att + (gsize)t * n + vis0;
            for (int m = 0; m < M && m < G * G; m++)
                hm->values[m] += row[m] / (float)(k - first + 1);
        }
        for (int m = 0; m < G * G; m++)
            hm->max = MAX(hm->max, hm->values[m]);
        sm->map = hm;
        if (sm->end > sm->start)
            g_ptr_array_add(out, sm);
        else
            cl_sentence_map_free(sm);
        first = k + 1;
        start = pos;
    }
    return out;
}
