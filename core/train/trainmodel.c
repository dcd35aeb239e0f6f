/* trainmodel.c - one sample's training step: checks, the encoder over the images, the decoder
 * over the expanded ids, the masked cross-entropy, and the backward through both
 * (trainmodel.h). */
#include "trainmodel.h"

#include <string.h>

#include "decoder.h"
#include "grad.h"

void cl_train_grad_options_init(ClTrainGradOptions *o)
{
    memset(o, 0, sizeof *o);
    o->stop_grad = TRUE;
}

static const char *sample_name(const ClTrainSample *s)
{
    return s->id ? s->id : "(unnamed)";
}

/* Everything the forward relies on, so a bad sample is an error, never a crash. */
static gboolean check_sample(ClBackend *be, const ClModel *model, const ClTrainSample *s,
                             gboolean need_mask, GError **error)
{
    const ClModelConfig *cfg = &model->config;
    const int M = cl_config_n_visual(cfg);
    if (strcmp(cl_backend_name(be), "cpu") != 0) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "Training runs on the CPU backend only (got \"%s\"); use --device cpu",
                    cl_backend_name(be));
        return FALSE;
    }
    if (s->n_images > 0 && (!s->pixels || s->channels != cfg->channels ||
                            s->size != cfg->image_size)) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "Sample %s: images are %dx%d with %d channels but the model takes %dx%d "
                    "with %d; preprocess them for this model", sample_name(s), s->size, s->size,
                    s->channels, cfg->image_size, cfg->image_size, cfg->channels);
        return FALSE;
    }
    if (s->n_ids < 2 || !s->ids || s->n_ids > cfg->max_len) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "Sample %s has %d positions; the model takes 2 to %d", sample_name(s),
                    s->n_ids, cfg->max_len);
        return FALSE;
    }
    gint64 n_vis = 0;
    for (int i = 0; i < s->n_ids; i++) {
        if (s->ids[i] == CL_DECODER_VISUAL)
            n_vis++;
        else if (s->ids[i] < 0 || s->ids[i] >= cfg->vocab_size) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "Sample %s: token id %d at position %d is outside the model's "
                        "vocabulary of %d", sample_name(s), s->ids[i], i, cfg->vocab_size);
            return FALSE;
        }
    }
    if (n_vis != (gint64)s->n_images * M) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "Sample %s has %" G_GINT64_FORMAT " visual positions for %u images; the "
                    "model gives %d tokens per image", sample_name(s), n_vis, s->n_images, M);
        return FALSE;
    }
    if (!need_mask)
        return TRUE;
    int ns = 0;
    for (int t = 0; s->mask && t < s->n_ids; t++) {
        if (!s->mask[t])
            continue;
        if (t + 1 >= s->n_ids || s->ids[t + 1] < 0) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "Sample %s supervises position %d, whose target is %s", sample_name(s),
                        t, t + 1 >= s->n_ids ? "past the end" : "a visual token");
            return FALSE;
        }
        ns++;
    }
    if (ns == 0) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "Sample %s has no supervised position (empty answer?)", sample_name(s));
        return FALSE;
    }
    return TRUE;
}

/* The forward of the whole model; keeps what the backward needs in *enc and *dec. */
static gboolean forward(ClBackend *be, const ClModel *model, const ClTrainSample *s,
                        const ClTrainGradOptions *o, const int *rows, int n_rows,
                        ClTrainEnc **enc, ClTrainDec **dec, float **visual, float **logits,
                        GError **error)
{
    const ClModelConfig *cfg = &model->config;
    const size_t ME = (size_t)cl_config_n_visual(cfg) * cfg->dec_dim;
    *visual = g_try_new(float, MAX(s->n_images * ME, 1));
    *logits = g_try_new(float, (size_t)MAX(rows ? n_rows : s->n_ids, 1) * cfg->vocab_size);
    if (!*visual || !*logits) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "Not enough memory for the logits of %d positions", s->n_ids);
        return FALSE;
    }
    ClTrainEnc *fixed = NULL;
    if (o && o->state_params && s->n_images > 1) {
        float *vis = g_try_new(float, s->n_images * ME);
        fixed = vis ? cl_train_enc_forward(be, model, &o->state_params->w, s->pixels,
                                           (int)s->n_images, NULL, vis, error)
                    : NULL;
        g_free(vis);
        if (!fixed) {
            if (error && !*error)
                g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                            "Not enough memory for the fixed states");
            return FALSE;
        }
    }
    if (s->n_images > 0) {
        /* the encoder's activations own the fixed run (its block inputs are read again by
         * the backward) */
        *enc = cl_train_enc_forward(be, model, &model->w, s->pixels, (int)s->n_images, fixed,
                                    *visual, error);
        if (!*enc)
            return FALSE;
    }
    *dec = cl_train_dec_forward(be, model, s->ids, s->n_ids, *visual, rows, n_rows, *logits,
                                error);
    return *dec != NULL;
}

static gboolean step(ClBackend *be, const ClModel *model, const ClTrainSample *s,
                     const ClTrainGradOptions *o, ClParamBuf *grads, ClTrainStepStats *st,
                     GError **error)
{
    g_return_val_if_fail(be != NULL && model != NULL && s != NULL, FALSE);
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    gint64 t0 = g_get_monotonic_time();
    if (!check_sample(be, model, s, TRUE, error))
        return FALSE;
    const ClModelConfig *cfg = &model->config;
    ClTrainEnc *enc = NULL;
    ClTrainDec *dec = NULL;
    float *visual = NULL, *logits = NULL;
    /* the logits are only needed where the loss looks: the supervised positions */
    g_autofree int *rows = g_new(int, MAX(s->n_ids, 1));
    int n_rows = 0;
    for (int t = 0; t + 1 < s->n_ids; t++)
        if (s->mask && s->mask[t])
            rows[n_rows++] = t;
    gboolean ok = forward(be, model, s, o, rows, n_rows, &enc, &dec, &visual, &logits, error);
    if (ok) {
        g_autofree gint32 *tgt = g_new(gint32, MAX(n_rows, 1));
        g_autofree guint8 *ones = g_new(guint8, MAX(n_rows, 1));
        for (int r = 0; r < n_rows; r++) {
            tgt[r] = s->ids[rows[r] + 1];
            ones[r] = 1;
        }
        int ns = 0;
        float *dlogits = grads ? g_try_new(float, (size_t)MAX(n_rows, 1) * cfg->vocab_size) : NULL;
        if (grads && !dlogits) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                        "Not enough memory for the logits' gradient");
            ok = FALSE;
        } else {
            double loss = cl_cross_entropy(dlogits, logits, tgt, ones, n_rows, cfg->vocab_size,
                                           1.0f, &ns);
            if (st) {
                st->loss = loss;
                st->n_supervised = ns;
                st->n_positions = s->n_ids;
            }
        }
        if (ok && grads) {
            float *dvisual = g_new0(float, MAX((size_t)s->n_images * cl_config_n_visual(cfg) *
                                                   cfg->dec_dim, 1));
            g_clear_pointer(&logits, g_free);
            cl_train_dec_backward(dec, &model->w, dlogits, dvisual, &grads->w);
            cl_train_dec_free(dec);
            dec = NULL;
            if (enc)
                cl_train_enc_backward(enc, &model->w, dvisual, o ? o->stop_grad : TRUE,
                                      &grads->w);
            g_free(dvisual);
        }
        g_free(dlogits);
    }
    cl_train_enc_free(enc);
    cl_train_dec_free(dec);
    g_free(visual);
    g_free(logits);
    if (ok && st)
        st->ms = (g_get_monotonic_time() - t0) / 1000.0;
    return ok;
}

gboolean cl_train_forward_backward(ClBackend *be, const ClModel *model, const ClTrainSample *s,
                                   const ClTrainGradOptions *o, ClParamBuf *grads,
                                   ClTrainStepStats *st, GError **error)
{
    g_return_val_if_fail(grads != NULL && grads->n == model->n_params, FALSE);
    return step(be, model, s, o, grads, st, error);
}

gboolean cl_train_loss(ClBackend *be, const ClModel *model, const ClTrainSample *s,
                       const ClTrainGradOptions *o, ClTrainStepStats *st, GError **error)
{
    return step(be, model, s, o, NULL, st, error);
}

gboolean cl_train_forward_outputs(ClBackend *be, const ClModel *model, const ClTrainSample *s,
                                  float **visual, float **logits, GError **error)
{
    g_return_val_if_fail(be != NULL && model != NULL && s != NULL, FALSE);
    if (!check_sample(be, model, s, FALSE, error))
        return FALSE;
    ClTrainEnc *enc = NULL;
    ClTrainDec *dec = NULL;
    float *vis = NULL, *lg = NULL;
    gboolean ok = forward(be, model, s, NULL, NULL, 0, &enc, &dec, &vis, &lg, error);
    cl_train_enc_free(enc);
    cl_train_dec_free(dec);
    if (ok && visual)
        *visual = g_steal_pointer(&vis);
    if (ok && logits)
        *logits = g_steal_pointer(&lg);
    g_free(vis);
    g_free(lg);
    return ok;
}
