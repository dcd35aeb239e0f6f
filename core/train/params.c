/* params.c - flat parameter buffers in cl_model_weight_specs() order (params.h). */
#include "train/params.h"

#include <string.h>

static void bind_views(const ClModelConfig *cfg, ClModelWeights *w, float *data)
{
    g_autoptr(GPtrArray) specs = cl_model_weight_specs(cfg, w);
    float *at = data;
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        *s->slot = at;
        at += cl_weight_spec_numel(s);
    }
    if (cfg->tie_embeddings)
        w->lm_head = w->embed;
}

static size_t count_params(const ClModelConfig *cfg)
{
    g_autoptr(GPtrArray) specs = cl_model_weight_specs(cfg, NULL);
    size_t n = 0;
    for (guint i = 0; i < specs->len; i++)
        n += (size_t)cl_weight_spec_numel(g_ptr_array_index(specs, i));
    return n;
}

ClParamBuf *cl_param_buf_new(const ClModelConfig *cfg, GError **error)
{
    size_t n = count_params(cfg);
    float *data = g_try_malloc0_n(MAX(n, 1), sizeof(float));
    if (!data) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "out of memory for a buffer of %zu parameters (%.0f MB)", n,
                    n * 4.0 / 1048576.0);
        return NULL;
    }
    ClParamBuf *b = g_new0(ClParamBuf, 1);
    b->data = data;
    b->n = n;
    bind_views(cfg, &b->w, data);
    return b;
}

ClParamBuf *cl_param_buf_new_view(const ClModelConfig *cfg, float *data)
{
    ClParamBuf *b = g_new0(ClParamBuf, 1);
    b->data = data;
    b->n = count_params(cfg);
    b->borrowed = TRUE;
    bind_views(cfg, &b->w, data);
    return b;
}

void cl_param_buf_zero(ClParamBuf *b)
{
    memset(b->data, 0, b->n * sizeof(float));
}

void cl_param_buf_free(ClParamBuf *b)
{
    if (!b)
        return;
    cl_model_weights_clear(&b->w);
    if (!b->borrowed)
        g_free(b->data);
    g_free(b);
}

gboolean cl_model_make_trainable(ClModel *model, GError **error)
{
    const ClModelConfig *cfg = &model->config;
    size_t n = count_params(cfg);
    g_autoptr(GPtrArray) specs = cl_model_weight_specs(cfg, &model->w);
    /* already flat and in order? */
    gboolean flat = model->arena != NULL;
    float *at = model->arena;
    for (guint i = 0; flat && i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        flat = *s->slot == at;
        at += cl_weight_spec_numel(s);
    }
    if (!flat) {
        float *arena = g_try_malloc_n(MAX(n, 1), sizeof(float));
        if (!arena) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                        "out of memory for the %zu trainable parameters", n);
            return FALSE;
        }
        at = arena;
        for (guint i = 0; i < specs->len; i++) {
            const ClWeightSpec *s = g_ptr_array_index(specs, i);
            gint64 numel = cl_weight_spec_numel(s);
            memcpy(at, *s->slot, (size_t)numel * sizeof(float));
            *s->slot = at;
            at += numel;
        }
        /* the file mapping (if any) stays: nothing points into it any more, but the model
         * owns it until it is freed */
        g_free(model->arena);
        model->arena = arena;
    }
    if (cfg->tie_embeddings)
        model->w.lm_head = model->w.embed;
    model->n_params = n;
    g_clear_pointer(&model->sha256, g_free);
    cl_model_weights_changed(model);
    return TRUE;
}

GPtrArray *cl_param_specs(const ClModelConfig *cfg, size_t **offsets)
{
    GPtrArray *specs = cl_model_weight_specs(cfg, NULL);
    if (offsets) {
        *offsets = g_new(size_t, specs->len + 1);
        size_t at = 0;
        for (guint i = 0; i < specs->len; i++) {
            (*offsets)[i] = at;
            at += (size_t)cl_weight_spec_numel(g_ptr_array_index(specs, i));
        }
        (*offsets)[specs->len] = at;
    }
    return specs;
}

/* ClTrainSample (sample.h) is plain data; its free lives here with the other shared records. */
#include "train/sample.h"

void cl_train_sample_free(ClTrainSample *s)
{
    if (!s)
        return;
    g_free(s->pixels);
    g_free(s->ids);
    g_free(s->mask);
    g_free(s->aux_objects);
    g_free(s->aux_labels);
    g_free(s->aux_changed);
    g_free(s->page_pixels);
    g_free(s->id);
    g_free(s);
}
