/* trainmodel.c - one sample's training step: checks, the encoder over the images, the decoder
 * over the expanded ids, the masked cross-entropy, and the backward through both
 * (trainmodel.h). */
#include "train/trainmodel.h"
#include "model/vist.h"

#include <math.h>
#include <string.h>

#include "model/decoder.h"
#include "nn/grad.h"

void cl_train_grad_options_init(ClTrainGradOptions *o)
{
    memset(o, 0, sizeof *o);
    o->stop_grad = TRUE;
}

/* ---- backend memory ------------------------------------------------------------------------ */

float *cl_train_take(ClBackend *be, size_t n, size_t *got)
{
    if (be->ops->host_memory)
        return cl_act_buffer_take(n, got);
    *got = MAX(n, 1);
    return be->ops->alloc(be, *got * sizeof(float));
}

void cl_train_give(ClBackend *be, float *p, size_t n)
{
    if (be->ops->host_memory)
        cl_act_buffer_give(p, n);
    else if (p)
        be->ops->release(be, p);
}

float *cl_train_try(ClBackend *be, size_t n)
{
    if (be->ops->host_memory)
        return g_try_new(float, MAX(n, 1));
    return be->ops->alloc(be, MAX(n, 1) * sizeof(float));
}

float *cl_train_scratch(ClBackend *be, size_t n)
{
    if (be->ops->host_memory)
        return g_new(float, MAX(n, 1));
    float *p = be->ops->alloc(be, MAX(n, 1) * sizeof(float));
    if (!p)
        g_error("Out of %s memory for the training step's scratch (%zu floats)", be->ops->name, n);
    return p;
}

float *cl_train_scratch0(ClBackend *be, size_t n)
{
    float *p = cl_train_scratch(be, n);
    cl_train_zero(be, p, n);
    return p;
}

void cl_train_scratch_free(ClBackend *be, float *p)
{
    if (!p)
        return;
    if (be->ops->host_memory)
        g_free(p);
    else
        be->ops->release(be, p);
}

void cl_train_zero(ClBackend *be, float *p, size_t n)
{
    if (n)
        be->ops->zero(be, p, n * sizeof(float));
}

void cl_train_copy(ClBackend *be, float *dst, const float *src, size_t n)
{
    if (n && dst != src)
        be->ops->copy(be, dst, src, n * sizeof(float));
}

float *cl_train_upload(ClBackend *be, const float *host, size_t n)
{
    float *p = cl_train_scratch(be, n);
    if (n)
        be->ops->upload(be, p, host, n * sizeof(float));
    return p;
}

/* ---- the auxiliary heads ------------------------------------------------------------------- */

const char *const cl_train_aux_head_names[4] = {
    "aux.objects.weight",
    "aux.objects.bias",
    "aux.changed.weight",
    "aux.changed.bias",
};

size_t cl_train_aux_head_len(int dim, int i)
{
    const size_t k = i < 2 ? CL_TRAIN_AUX_N_OBJECT_OUT : 1;
    return i % 2 == 0 ? k * (size_t)dim : k;
}

ClTrainAuxHeads *cl_train_aux_heads_new(int dim, GError **error)
{
    g_return_val_if_fail(dim > 0, NULL);
    ClTrainAuxHeads *h = g_new0(ClTrainAuxHeads, 1);
    h->dim = dim;
    h->n = 0;
    for (int i = 0; i < 4; i++)
        h->n += cl_train_aux_head_len(dim, i);
    h->data = g_try_new0(float, h->n);
    if (!h->data) {
        g_free(h);
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "Not enough memory for the auxiliary heads");
        return NULL;
    }
    h->objects_w = h->data;
    h->objects_b = h->objects_w + cl_train_aux_head_len(dim, 0);
    h->changed_w = h->objects_b + cl_train_aux_head_len(dim, 1);
    h->changed_b = h->changed_w + dim;
    return h;
}

void cl_train_aux_heads_zero(ClTrainAuxHeads *h)
{
    memset(h->data, 0, h->n * sizeof(float));
}

void cl_train_aux_heads_free(ClTrainAuxHeads *h)
{
    if (!h)
        return;
    g_free(h->data);
    g_free(h);
}

static gboolean aux_on(const ClTrainGradOptions *o)
{
    return o && (o->aux_objects_weight > 0 || o->aux_changed_weight > 0);
}

static const char *sample_name(const ClTrainSample *s)
{
    return s->id ? s->id : "(unnamed)";
}

/* Everything the forward relies on, so a bad sample is an error, never a crash. */
static gboolean check_sample(ClBackend *be, const ClModel *model, const ClTrainSample *s,
                             const ClTrainGradOptions *o, gboolean need_mask, GError **error)
{
    const ClModelConfig *cfg = &model->config;
    const int M = cl_config_n_visual(cfg);
    if (aux_on(o)) {
        if (!isfinite(o->aux_objects_weight) || !isfinite(o->aux_changed_weight) || !o->aux_heads ||
            o->aux_heads->dim != (o->aux_on_visual ? cfg->dec_dim : cfg->enc_dim)) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "The auxiliary losses need finite weights and heads of the width of the "
                        "tokens they read (%d)",
                        o->aux_on_visual ? cfg->dec_dim : cfg->enc_dim);
            return FALSE;
        }
        if ((s->aux_objects || s->aux_changed) && s->n_images > 0 &&
            s->grid != cl_config_grid(cfg)) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "Sample %s: its auxiliary targets are on a %dx%d grid but the model's "
                        "patch grid is %dx%d; make the masks at the model's patch size",
                        sample_name(s), s->grid, s->grid, cl_config_grid(cfg), cl_config_grid(cfg));
            return FALSE;
        }
    }
    if (!be->ops->train) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "The %s backend cannot train (it has no training ops); use --device cpu",
                    cl_backend_name(be));
        return FALSE;
    }

    if (s->n_images > 0 &&
        (!s->pixels || s->channels != cfg->channels || s->size != cfg->image_size)) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "Sample %s: images are %dx%d with %d channels but the model takes %dx%d "
                    "with %d; preprocess them for this model",
                    sample_name(s), s->size, s->size, s->channels, cfg->image_size, cfg->image_size,
                    cfg->channels);
        return FALSE;
    }
    if (s->n_ids < 2 || !s->ids || s->n_ids > cfg->max_len) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "Sample %s has %d positions; the model takes 2 to %d", sample_name(s), s->n_ids,
                    cfg->max_len);
        return FALSE;
    }
    gint64 n_vis = 0;
    for (int i = 0; i < s->n_ids; i++) {
        if (s->ids[i] == CL_DECODER_VISUAL)
            n_vis++;
        else if (s->ids[i] < 0 || s->ids[i] >= cfg->vocab_size) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "Sample %s: token id %d at position %d is outside the model's "
                        "vocabulary of %d",
                        sample_name(s), s->ids[i], i, cfg->vocab_size);
            return FALSE;
        }
    }
    if (n_vis != ((gint64)s->n_images + s->n_pages) * M ||
        (s->n_pages > 0 && (!s->page_pixels || cfg->vist_chunk <= 0 || cfg->vist_sees_text))) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "Sample %s has %" G_GINT64_FORMAT " visual positions for %u images and %d "
                    "VIST2 pages; the model gives %d tokens per image%s",
                    sample_name(s), n_vis, s->n_images, s->n_pages, M,
                    s->n_pages > 0 && cfg->vist_chunk <= 0 ? " and has no VIST2"
                    : s->n_pages > 0 && cfg->vist_sees_text
                        ? " (training takes VIST2's image mask only, not the paper's)"
                        : "");
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
                        "Sample %s supervises position %d, whose target is %s", sample_name(s), t,
                        t + 1 >= s->n_ids ? "past the end" : "a visual token");
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
                        const ClTrainGradOptions *o, const int *rows, int n_rows, ClTrainEnc **enc,
                        ClTrainDec **dec, float **visual, float **logits, GError **error)
{
    const ClModelConfig *cfg = &model->config;
    const size_t ME = (size_t)cl_config_n_visual(cfg) * cfg->dec_dim;
    if (!be->ops->host_memory && ((o && o->state_params) || s->n_pages > 0)) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "Fixed encoder states and VIST2's pages train on the CPU only, not on %s",
                    be->ops->name);
        return FALSE;
    }
    /* the images' visual rows, then (VIST2) the context pages' (backend memory) */
    *visual = cl_train_try(be, (s->n_images + s->n_pages) * ME);
    *logits = cl_train_try(be, (size_t)MAX(rows ? n_rows : s->n_ids, 1) * cfg->vocab_size);
    if (!*visual || !*logits) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "Not enough memory for the logits of %d positions", s->n_ids);
        return FALSE;
    }
    ClTrainEnc *fixed = NULL;
    if (o && o->state_params && s->n_images > 1) {
        float *vis = g_try_new(float, s->n_images *ME);
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
    /* VIST2's pages: each a first image through the inference encoder, frozen (no gradient
     * goes back to the encoder from them, as in VIST2's later stages) */
    if (s->n_pages > 0 && !cl_vist_encode_pages(be, model, s->page_pixels, s->n_pages,
                                                *visual + s->n_images * ME, error))
        return FALSE;
    *dec = cl_train_dec_forward(be, model, s->ids, s->n_ids, *visual, rows, n_rows, *logits, error);
    return *dec != NULL;
}

/* The auxiliary targets on the grid the heads read: the sample's own (patches), or pooled 2 × 2
 * onto the visual tokens' grid (a visual token has a label when any of its four patches has). */
typedef struct {
    const guint64 *objects;
    const guint32 *labels;
    const guint8 *changed;
    guint64 *own_objects; /* the pooled copies (NULL on the patch grid) */
    guint32 *own_labels;
    guint8 *own_changed;
} AuxTargets;

static void aux_targets_init(AuxTargets *a, const ClTrainSample *s, gboolean visual, int G)
{
    memset(a, 0, sizeof *a);
    if (!visual) {
        a->objects = s->aux_objects, a->labels = s->aux_labels, a->changed = s->aux_changed;
        return;
    }
    const int H = G / 2, n = (int)s->n_images;
    const size_t M = (size_t)H * H;
    if (s->aux_objects)
        a->objects = a->own_objects = g_new0(guint64, n * M);
    if (s->aux_labels)
        a->labels = a->own_labels = g_new0(guint32, n * M);
    if (s->aux_changed)
        a->changed = a->own_changed = g_new0(guint8, n * M);
    for (int t = 0; t < n; t++)
        for (int r = 0; r < G; r++)
            for (int c = 0; c < G; c++) {
                const size_t p = ((size_t)t * G + r) * G + c;
                const size_t m = (size_t)t * M + (size_t)(r / 2) * H + c / 2;
                if (a->own_objects)
                    a->own_objects[m] |= s->aux_objects[p];
                if (a->own_labels)
                    a->own_labels[m] |= s->aux_labels[p];
                if (a->own_changed)
                    a->own_changed[m] |= s->aux_changed[p];
            }
}

static void aux_targets_clear(AuxTargets *a)
{
    g_free(a->own_objects);
    g_free(a->own_labels);
    g_free(a->own_changed);
}

/* One auxiliary head over images [t0, n_images): per token, the sigmoid BCE of each of its K
 * logits z_k = w_k·x + b_k against its target (objects: k = 0 "an object", k >= 1 label k − 1
 * when the sample has labels, else only k = 0; changed: K = 1), summed over k and averaged
 * over the tokens. Image t's N tokens of width D are x[t] (backend memory, as the head). dx
 * (may be NULL; same layout) += weight · dBCE/dx, hw / hb (NULL with dx) += weight · dBCE/dw,
 * /db. NaN when there is no token to average. The targets are made on the host. */
static double aux_head(ClBackend *be, const float *const *x, int n_images, int t0,
                       const AuxTargets *tg, gboolean objects, const float *w, const float *b,
                       double weight, int N, int D, float *const *dx, float *hw, float *hb)
{
    const int n_img = n_images - t0;
    if (n_img <= 0)
        return NAN;
    const int K = !objects ? 1 : tg->labels ? CL_TRAIN_AUX_N_OBJECT_OUT : 1;
    const size_t NK = (size_t)N * K;
    const double count = (double)n_img * N;
    double loss = 0;
    g_autofree float *y = g_new(float, NK);
    float *yd = cl_train_scratch(be, NK), *z = cl_train_scratch(be, NK);
    float *dz = dx ? cl_train_scratch(be, NK) : NULL;
    for (int t = t0; t < n_images; t++) {
        for (int p = 0; p < N; p++) {
            const size_t at = (size_t)t * N + p;
            for (int k = 0; k < K; k++)
                y[(size_t)p * K + k] = !objects ? tg->changed[at] != 0
                                       : k == 0 ? tg->objects[at] != 0
                                                : (tg->labels[at] >> (k - 1)) & 1;
        }
        be->ops->upload(be, yd, y, NK * sizeof(float));
        be->ops->linear(be, z, x[t], w, b, N, D, K);
        loss += be->ops->train->bce(be, dz, z, yd, NK, (float)(weight / count));
        if (dx)
            be->ops->train->linear(be, dx[t], hw, hb, dz, x[t], w, N, D, K);
    }
    cl_train_scratch_free(be, yd);
    cl_train_scratch_free(be, z);
    cl_train_scratch_free(be, dz);
    return loss / count;
}

/* The auxiliary losses of a sample whose encoder ran, on the patch tokens or (aux_on_visual)
 * the visual tokens: fills st's aux fields and returns the weighted sum of the terms that ran
 * (0 when none). dtok (may be NULL): the gradient of the tokens read, (n_images, tokens, width);
 * hg as aux_head's. */
G_STATIC_ASSERT(CL_TRAIN_AUX_N_OBJECT_OUT == CL_CONFIG_OBJECT_OUT);

static double aux_losses(ClBackend *enc_be, const ClTrainEnc *enc, const float *visual,
                         const ClModel *model, const ClTrainSample *s, const ClTrainGradOptions *o,
                         float *dtok, ClTrainAuxHeads *hg, ClModelWeights *mg, double *l_objects,
                         double *l_changed)
{
    const ClModelConfig *cfg = &model->config;
    const gboolean vis = o->aux_on_visual;
    const int N = vis ? cl_config_n_visual(cfg) : cl_config_n_patches(cfg);
    const int D = vis ? cfg->dec_dim : cfg->enc_dim;
    const int n = (int)s->n_images;
    const ClTrainAuxHeads *h = o->aux_heads;
    g_autofree const float **x = g_new(const float *, n);
    g_autofree float **dx = dtok ? g_new(float *, n) : NULL;
    for (int t = 0; t < n; t++) {
        x[t] = vis ? visual + (size_t)t * N * D : cl_train_enc_tokens(enc, t);
        if (dx)
            dx[t] = dtok + (size_t)t * N * D;
    }
    AuxTargets tg;
    aux_targets_init(&tg, s, vis, cl_config_grid(cfg));
    double sum = 0;
    *l_objects = *l_changed = NAN;
    if (o->aux_objects_weight > 0 && tg.objects) {
        /* config.n_objects: the model's own object head (model tensors with their gradient),
         * else the training-only one */
        const gboolean own = model->w.enc_objects_w && !vis;
        const float *ow = own ? model->w.enc_objects_w : h->objects_w;
        const float *ob = own ? model->w.enc_objects_b : h->objects_b;
        float *gw = own ? (mg ? mg->enc_objects_w : NULL) : (hg ? hg->objects_w : NULL);
        float *gb = own ? (mg ? mg->enc_objects_b : NULL) : (hg ? hg->objects_b : NULL);
        *l_objects =
            aux_head(enc_be, x, n, 0, &tg, TRUE, ow, ob, o->aux_objects_weight, N, D, dx, gw, gb);
        sum += o->aux_objects_weight * *l_objects;
    }
    if (o->aux_changed_weight > 0 && tg.changed && n > 1) {
        /* config.change_head: the model's own head (a model tensor with its gradient), else
         * the training-only one */
        const gboolean own = model->w.enc_change_w && !vis;
        const float *cw = own ? model->w.enc_change_w : h->changed_w;
        const float *cb = own ? model->w.enc_change_b : h->changed_b;
        float *gw = own ? (mg ? mg->enc_change_w : NULL) : (hg ? hg->changed_w : NULL);
        float *gb = own ? (mg ? mg->enc_change_b : NULL) : (hg ? hg->changed_b : NULL);
        *l_changed = aux_head(enc_be, x, n, 1, &tg, FALSE, cw, cb, o->aux_changed_weight, N, D,
                              gw ? dx : NULL, gw, gb);
        sum += o->aux_changed_weight * *l_changed;
    }
    aux_targets_clear(&tg);
    return sum;
}

static gboolean step(ClBackend *be, const ClModel *model, const ClTrainSample *s,
                     const ClTrainGradOptions *o, ClParamBuf *grads, ClTrainAuxHeads *aux_grads,
                     ClTrainStepStats *st, GError **error)
{
    g_return_val_if_fail(be != NULL && model != NULL && s != NULL, FALSE);
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    gint64 t0 = g_get_monotonic_time();
    if (!check_sample(be, model, s, o, TRUE, error))
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
    /* the auxiliary terms while the encoder's tokens are at hand; their token gradients join
     * the merger's in the encoder's backward */
    float *dtokens = NULL;
    double aux_sum = 0, l_objects = NAN, l_changed = NAN;
    if (ok && enc && aux_on(o)) {
        const size_t NDi = (size_t)s->n_images *
                           (o->aux_on_visual ? (size_t)cl_config_n_visual(cfg) * cfg->dec_dim
                                             : (size_t)cl_config_n_patches(cfg) * cfg->enc_dim);
        if (grads && (dtokens = cl_train_try(be, NDi)) == NULL) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                        "Not enough memory for the auxiliary losses' gradient");
            ok = FALSE;
        } else {
            if (dtokens)
                cl_train_zero(be, dtokens, NDi);
            aux_sum = aux_losses(be, enc, visual, model, s, o, dtokens, grads ? aux_grads : NULL,
                                 grads ? &grads->w : NULL, &l_objects, &l_changed);
        }
    }
    if (ok) {
        g_autofree gint32 *tgt = g_new(gint32, MAX(n_rows, 1));
        g_autofree guint8 *ones = g_new(guint8, MAX(n_rows, 1));
        for (int r = 0; r < n_rows; r++) {
            tgt[r] = s->ids[rows[r] + 1];
            ones[r] = 1;
        }
        int ns = 0;
        float *dlogits = grads ? cl_train_try(be, (size_t)MAX(n_rows, 1) * cfg->vocab_size) : NULL;
        if (grads && !dlogits) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                        "Not enough memory for the logits' gradient");
            ok = FALSE;
        } else {
            double loss = be->ops->train->cross_entropy(be, dlogits, logits, tgt, ones, n_rows,
                                                        cfg->vocab_size, 1.0f, &ns);
            if (st) {
                st->loss = loss;
                st->n_supervised = ns;
                st->n_positions = s->n_ids;
                st->aux_objects_loss = l_objects;
                st->aux_changed_loss = l_changed;
                st->total_loss = loss + aux_sum;
            }
        }
        if (ok && grads) {
            /* the pages' share (after the images') is dropped: their encoder is frozen */
            float *dvisual = cl_train_scratch0(be, (size_t)(s->n_images + s->n_pages) *
                                                       cl_config_n_visual(cfg) * cfg->dec_dim);
            cl_train_scratch_free(be, logits);
            logits = NULL;
            cl_train_dec_backward(dec, &model->w, dlogits, dvisual, &grads->w);
            cl_train_dec_free(dec);
            dec = NULL;
            /* heads on the visual tokens: their gradient joins the decoder's */
            if (dtokens && o->aux_on_visual) {
                const size_t nv = (size_t)s->n_images * cl_config_n_visual(cfg) * cfg->dec_dim;
                be->ops->add(be, dvisual, dvisual, dtokens, nv);
                cl_train_scratch_free(be, dtokens);
                dtokens = NULL;
            }
            if (enc)
                cl_train_enc_backward(enc, &model->w, dvisual, dtokens, o ? o->stop_grad : TRUE,
                                      &grads->w);
            cl_train_scratch_free(be, dvisual);
        }
        cl_train_scratch_free(be, dlogits);
    }
    cl_train_enc_free(enc);
    cl_train_dec_free(dec);
    cl_train_scratch_free(be, visual);
    cl_train_scratch_free(be, logits);
    cl_train_scratch_free(be, dtokens);
    if (ok && st)
        st->ms = (g_get_monotonic_time() - t0) / 1000.0;
    return ok;
}

gboolean cl_train_forward_backward(ClBackend *be, const ClModel *model, const ClTrainSample *s,
                                   const ClTrainGradOptions *o, ClParamBuf *grads,
                                   ClTrainStepStats *st, GError **error)
{
    g_return_val_if_fail(grads != NULL && grads->n == model->n_params, FALSE);
    return step(be, model, s, o, grads, NULL, st, error);
}

gboolean cl_train_forward_backward_aux(ClBackend *be, const ClModel *model, const ClTrainSample *s,
                                       const ClTrainGradOptions *o, ClParamBuf *grads,
                                       ClTrainAuxHeads *aux_grads, ClTrainStepStats *st,
                                       GError **error)
{
    g_return_val_if_fail(grads != NULL && grads->n == model->n_params, FALSE);
    g_return_val_if_fail(aux_grads == NULL ||
                             aux_grads->dim == (o && o->aux_on_visual ? model->config.dec_dim
                                                                      : model->config.enc_dim),
                         FALSE);
    return step(be, model, s, o, grads, aux_grads, st, error);
}

gboolean cl_train_loss(ClBackend *be, const ClModel *model, const ClTrainSample *s,
                       const ClTrainGradOptions *o, ClTrainStepStats *st, GError **error)
{
    return step(be, model, s, o, NULL, NULL, st, error);
}

gboolean cl_train_forward_outputs(ClBackend *be, const ClModel *model, const ClTrainSample *s,
                                  float **visual, float **logits, GError **error)
{
    g_return_val_if_fail(be != NULL && model != NULL && s != NULL, FALSE);
    if (!check_sample(be, model, s, NULL, FALSE, error))
        return FALSE;
    ClTrainEnc *enc = NULL;
    ClTrainDec *dec = NULL;
    float *vis = NULL, *lg = NULL;
    gboolean ok = forward(be, model, s, NULL, NULL, 0, &enc, &dec, &vis, &lg, error);
    cl_train_enc_free(enc);
    cl_train_dec_free(dec);
    const ClModelConfig *cfg = &model->config;
    const size_t nv = (size_t)(s->n_images + s->n_pages) * cl_config_n_visual(cfg) * cfg->dec_dim;
    const size_t nl = (size_t)s->n_ids * cfg->vocab_size;
    /* host memory: the buffers themselves (cl_train_try's are g_free's); else copies */
    const gboolean host = be->ops->host_memory;
    if (ok && visual) {
        *visual = host ? g_steal_pointer(&vis) : g_new(float, MAX(nv, 1));
        if (!host)
            be->ops->download(be, *visual, vis, nv * sizeof(float));
    }
    if (ok && logits) {
        *logits = host ? g_steal_pointer(&lg) : g_new(float, MAX(nl, 1));
        if (!host)
            be->ops->download(be, *logits, lg, nl * sizeof(float));
    }
    cl_train_scratch_free(be, vis);
    cl_train_scratch_free(be, lg);
    return ok;
}
