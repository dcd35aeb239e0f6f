/* trainmodel-enc.c - the SVE encoder's training forward (the backend's ops in encoder.c's exact
 * order, activations kept per image and block) and its backward, all six variants, with the
 * paper's stop_grad on the predecessor's state (docs/MODEL.md §3). The activations are views
 * into one buffer, laid out before the forward runs (nn/grad.h's ClActArena). */
#include "train/trainmodel.h"

#include <math.h>
#include <string.h>

#include "model/encoder.h"
#include "nn/grad.h"

typedef enum { Y_PREV, Y_OWN, Y_NULL } YSource;

/* One block's saved activations (NULL where the variant has no such tensor). */
typedef struct {
    YSource ysrc;
    int K;          /* state tokens: N, or 1 for the null state */
    const float *y; /* the state read (the predecessor's x_in, own x_in, or sve.null) */
    float *x_in;    /* (N, D) block input: the state the next image reads */
    /* cross / cross_ffn / self_ffn */
    float *hs, *sq, *skv, *shy, *sca, *x1, *hf, *sf;
    /* adaln_zero: c pooled (before SiLU), SiLU(c), the modulation (6D) */
    float *c, *sc, *mod;
    /* the block */
    float *x_a;      /* (N, D) after the SVE module (== x_in without one) */
    float *h1, *h1m; /* LN1, modulated LN1 (adaln) */
    float *qkv;      /* (N, 3D) roped q|k|v; self_ext: q (N, D) */
    float *kv;       /* self_ext: (N + K, 2D) roped keys|values, own then state */
    float *hy;       /* self_ext: LN1(Y) (K, D) unless own */
    float *att, *pa, *x_b, *h2, *h2m, *f, *pm;
} BlockAct;

typedef struct {
    float *patches;
    BlockAct *blk;
    float *x_out, *mcat, *mf; /* the merger's input, unfolded LN, pre-GELU hidden */
    float *dstate;            /* (depth, N, D) gradient from the successor through the state */
    /* config.change_marker, images after the first: the change head's probabilities p (N),
     * each visual token's largest q (M) and the patch it came from (M); the backward's dq (M) */
    float *mark_p, *mark_q, *mark_dq;
    int *mark_at;
} ImageAct;

struct _ClTrainEnc {
    ClBackend *be;
    const ClModelConfig *cfg;
    int n_images, N, D, F, H, hd, G, M, E, Hm, cpp;
    float eps, scale;
    ClTrainEnc *states; /* fixed states (owned), or NULL */
    ImageAct *img;
    float *rope_cos, *rope_sin, *scratch;
    /* the forward's scratch: (N, D), (N, F) (the SVE module's output projection and GELU, a
     * block's GELU), the merger's LN (N, D) and GELU (M, Hm) */
    float *tmp_nd, *tmp_nf, *tmp_hm, *tmp_mg;
    float *ones; /* (N) ones: adaln_zero's mean over the state's tokens as a product */
    float *buf;  /* the one buffer every view lies in (cl_act_buffer_take), buf_n floats */
    size_t buf_n;
};

void cl_train_enc_free(ClTrainEnc *e)
{
    if (!e)
        return;
    cl_train_enc_free(e->states);
    cl_train_give(e->be, e->buf, e->buf_n);
    if (e->img)
        for (int t = 0; t < e->n_images; t++) {
            g_free(e->img[t].blk);
            g_free(e->img[t].mark_p), g_free(e->img[t].mark_q), g_free(e->img[t].mark_dq);
            g_free(e->img[t].mark_at);
        }
    g_free(e->img);
    g_free(e);
}

/* ---- forward ---------------------------------------------------------------------------------- */

static YSource ysource(const ClTrainEnc *e, int t)
{
    const ClModelConfig *cfg = e->cfg;
    if (cfg->sve_variant == CL_SVE_SELF_FFN)
        return Y_OWN;
    if (t > 0)
        return Y_PREV;
    return cfg->sve_first == CL_SVE_FIRST_OWN ? Y_OWN : Y_NULL;
}

/* cross / cross_ffn / self_ffn: x (== x_in on entry) becomes the module's output. */
static void fwd_cross(ClTrainEnc *e, const ClEncoderLayerWeights *L, BlockAct *b, float *x)
{
    ClBackend *be = e->be;
    const struct cl_backend_ops *op = be->ops;
    const int N = e->N, D = e->D, H = e->H, hd = e->hd, F = e->F, K = b->K;
    float *proj = e->tmp_nd, *g = e->tmp_nf;

    op->layernorm(be, b->hs, x, L->sve_ln_w, L->sve_ln_b, N, D, e->eps);
    op->linear(be, b->sq, b->hs, L->sve_q_w, L->sve_q_b, N, D, D);
    const float *hy = b->hs;
    if (b->ysrc != Y_OWN) {
        op->layernorm(be, b->shy, b->y, L->sve_ln_w, L->sve_ln_b, K, D, e->eps);
        hy = b->shy;
    }
    op->linear(be, b->skv, hy, L->sve_kv_w, L->sve_kv_b, K, D, 2 * D);
    if (e->cfg->sve_cross_pos) {
        op->rope(be, b->sq, e->rope_cos, e->rope_sin, N, D, H, hd, 2);
        if (b->ysrc != Y_NULL)
            op->rope(be, b->skv, e->rope_cos, e->rope_sin, K, 2 * D, H, hd, 2);
    }
    op->attention(be, b->sca, NULL, b->sq, b->skv, b->skv + D, N, K, D, 2 * D, 2 * D, D, H, H, hd,
                  e->scale, -1, 0, e->scratch);
    op->linear(be, proj, b->sca, L->sve_out_w, L->sve_out_b, N, D, D);
    op->residual(be, x, proj, NULL, N, D);
    cl_train_copy(be, b->x1, x, (size_t)N * D);
    if (cl_config_has_sve_ffn(e->cfg)) {
        op->layernorm(be, b->hf, x, L->sve_ffn_ln_w, L->sve_ffn_ln_b, N, D, e->eps);
        op->linear(be, b->sf, b->hf, L->sve_fc1_w, L->sve_fc1_b, N, D, F);
        op->gelu(be, g, b->sf, (size_t)N * F);
        op->linear(be, proj, g, L->sve_fc2_w, L->sve_fc2_b, N, F, D);
        op->residual(be, x, proj, NULL, N, D);
    }
}

static void fwd_adaln(ClTrainEnc *e, const ClEncoderLayerWeights *L, BlockAct *b)
{
    const int N = e->N, D = e->D;
    if (b->ysrc == Y_OWN)
        cl_train_zero(e->be, b->c, (size_t)D);
    else if (b->ysrc == Y_NULL)
        cl_train_copy(e->be, b->c, L->sve_null, (size_t)D);
    else /* as encoder.c: in double, token order */
        e->be->ops->col_mean(e->be, b->c, b->y, N, D);
    e->be->ops->silu(e->be, b->sc, b->c, (size_t)D);
    e->be->ops->linear(e->be, b->mod, b->sc, L->sve_ada_w, L->sve_ada_b, 1, D, 6 * D);
}

static void fwd_block(ClTrainEnc *e, const ClEncoderLayerWeights *L, BlockAct *b, float *x)
{
    ClBackend *be = e->be;
    const struct cl_backend_ops *op = be->ops;
    const int N = e->N, D = e->D, H = e->H, hd = e->hd, F = e->F, K = b->K;
    const ClSveVariant v = e->cfg->sve_variant;
    const gboolean self_ext = v == CL_SVE_SELF_EXT;
    const float *mod = b->mod;
    cl_train_copy(be, b->x_a, x, (size_t)N * D);

    op->layernorm(be, b->h1, x, L->ln1_w, L->ln1_b, N, D, e->eps);
    const float *h = b->h1;
    if (mod) {
        cl_train_copy(be, b->h1m, b->h1, (size_t)N * D);
        op->modulate(be, b->h1m, mod + D, mod, N, D);
        h = b->h1m;
    }
    if (!self_ext) {
        op->linear(be, b->qkv, h, L->qkv_w, L->qkv_b, N, D, 3 * D);
        op->rope(be, b->qkv, e->rope_cos, e->rope_sin, N, 3 * D, H, hd, 2);
        op->rope(be, b->qkv + D, e->rope_cos, e->rope_sin, N, 3 * D, H, hd, 2);
        op->attention(be, b->att, NULL, b->qkv, b->qkv + D, b->qkv + 2 * D, N, N, 3 * D, 3 * D,
                      3 * D, D, H, H, hd, e->scale, -1, 0, e->scratch);
    } else {
        float *kv_y = b->kv + (size_t)N * 2 * D;
        op->linear(be, b->qkv, h, L->qkv_w, L->qkv_b, N, D, D);
        op->linear(be, b->kv, h, L->qkv_w + (size_t)D * D, L->qkv_b + D, N, D, 2 * D);
        if (b->ysrc == Y_OWN) {
            cl_train_copy(be, kv_y, b->kv, (size_t)N * 2 * D);
        } else {
            op->layernorm(be, b->hy, b->y, L->ln1_w, L->ln1_b, K, D, e->eps);
            op->linear(be, kv_y, b->hy, L->qkv_w + (size_t)D * D, L->qkv_b + D, K, D, 2 * D);
        }
        op->rope(be, b->qkv, e->rope_cos, e->rope_sin, N, D, H, hd, 2);
        op->rope(be, b->kv, e->rope_cos, e->rope_sin, N, 2 * D, H, hd, 2);
        if (e->cfg->sve_cross_pos && b->ysrc != Y_NULL)
            op->rope(be, kv_y, e->rope_cos, e->rope_sin, K, 2 * D, H, hd, 2);
        op->attention(be, b->att, NULL, b->qkv, b->kv, b->kv + D, N, N + K, D, 2 * D, 2 * D, D, H,
                      H, hd, e->scale, -1, N, e->scratch);
    }
    op->linear(be, b->pa, b->att, L->attn_out_w, L->attn_out_b, N, D, D);
    op->residual(be, x, b->pa, mod ? mod + 2 * D : NULL, N, D);
    cl_train_copy(be, b->x_b, x, (size_t)N * D);

    op->layernorm(be, b->h2, x, L->ln2_w, L->ln2_b, N, D, e->eps);
    h = b->h2;
    if (mod) {
        cl_train_copy(be, b->h2m, b->h2, (size_t)N * D);
        op->modulate(be, b->h2m, mod + 4 * D, mod + 3 * D, N, D);
        h = b->h2m;
    }
    op->linear(be, b->f, h, L->fc1_w, L->fc1_b, N, D, F);
    float *g = e->tmp_nf; /* GELU(f), dropped after the product */
    op->gelu(be, g, b->f, (size_t)N * F);
    op->linear(be, b->pm, g, L->fc2_w, L->fc2_b, N, F, D);
    op->residual(be, x, b->pm, mod ? mod + 5 * D : NULL, N, D);
}

static void fwd_image(ClTrainEnc *e, const ClModelWeights *w, const float *pixels, int t,
                      float *visual)
{
    ClBackend *be = e->be;
    const struct cl_backend_ops *op = be->ops;
    const ClModelConfig *cfg = e->cfg;
    const int N = e->N, D = e->D, S = cfg->image_size;
    ImageAct *im = &e->img[t];
    float *x = im->x_out;
    if (!cfg->enc_stem_effnet) /* else cl_train_enc_forward filled them with the stem's features */
        op->im2col(be, im->patches, pixels, cfg->channels, S, cfg->patch_size);
    op->linear(be, x, im->patches, w->patch_w, w->patch_b, N, e->cpp, D);
    if (w->enc_pos)
        op->add(be, x, x, w->enc_pos, (size_t)N * D);

    const ClTrainEnc *src = e->states ? e->states : e;
    for (int l = 0; l < cfg->enc_depth; l++) {
        const ClEncoderLayerWeights *L = &w->enc[l];
        BlockAct *b = &im->blk[l];
        cl_train_copy(be, b->x_in, x, (size_t)N * D);
        b->y = b->ysrc == Y_PREV  ? src->img[t - 1].blk[l].x_in
               : b->ysrc == Y_OWN ? b->x_in
                                  : L->sve_null;
        if (cfg->sve_variant == CL_SVE_ADALN_ZERO)
            fwd_adaln(e, L, b);
        if (cl_config_has_cross(cfg))
            fwd_cross(e, L, b, x);
        fwd_block(e, L, b, x);
    }
    /* the merger */
    const int G = e->G, M = e->M, Hm = e->Hm;
    float *hm = e->tmp_hm, *g = e->tmp_mg;
    op->layernorm(be, hm, x, w->merger_ln_w, w->merger_ln_b, N, D, e->eps);
    op->merge2x2(be, im->mcat, hm, G, D);
    op->linear(be, im->mf, im->mcat, w->merger_fc1_w, w->merger_fc1_b, M, 4 * D, Hm);
    op->gelu(be, g, im->mf, (size_t)M * Hm);
    op->linear(be, visual, g, w->merger_fc2_w, w->merger_fc2_b, M, Hm, e->E);
    if (cfg->visual_center)
        op->center_cols(be, visual, M, e->E);
    if (w->merger_pos)
        op->add(be, visual, visual, w->merger_pos, (size_t)M * e->E);
    if (t > 0 && w->merger_change && w->enc_change_w) {
        /* config.change_marker: as cl_encoder_forward, from the change head on x */
        im->mark_p = g_new(float, N), im->mark_q = g_new(float, M), im->mark_dq = g_new(float, M);
        im->mark_at = g_new(int, M);
        /* on the host, as inference computes it (a few hundred floats each way) */
        g_autofree float *tx = NULL, *tw = NULL, *tb = NULL, *tk = NULL, *tv = NULL;
        const float *hx = cl_backend_host_view(be, x, (size_t)N * D, &tx);
        const float *hw = cl_backend_host_view(be, w->enc_change_w, (size_t)D, &tw);
        const float *hb = cl_backend_host_view(be, w->enc_change_b, 1, &tb);
        for (int n = 0; n < N; n++) {
            double z = hb[0];
            for (int d = 0; d < D; d++)
                z += (double)hw[d] * hx[(size_t)n * D + d];
            im->mark_p[n] = (float)(1.0 / (1.0 + exp(-z)));
        }
        cl_change_marker_pool(im->mark_p, G, im->mark_q, im->mark_at);
        const size_t ME = (size_t)M * e->E;
        const float *hk = cl_backend_host_view(be, w->merger_change, (size_t)e->E, &tk);
        float *hv = (float *)cl_backend_host_view(be, visual, ME, &tv);
        cl_change_marker_add(hv, im->mark_q, hk, M, e->E);
        if (tv)
            op->upload(be, visual, hv, ME * sizeof(float));
    }
}

/* A block's views (what its variant keeps); its state source and size first. */
static void block_layout(ClTrainEnc *e, BlockAct *b, int t, ClActArena *a)
{
    const ClModelConfig *cfg = e->cfg;
    const size_t N = e->N, D = e->D, F = e->F;
    b->ysrc = ysource(e, t);
    b->K = b->ysrc == Y_NULL ? 1 : e->N;
    const size_t K = b->K;
    const gboolean self_ext = cfg->sve_variant == CL_SVE_SELF_EXT;
    b->x_in = cl_act_take(a, N * D);
    if (cfg->sve_variant == CL_SVE_ADALN_ZERO)
        b->c = cl_act_take(a, D), b->sc = cl_act_take(a, D), b->mod = cl_act_take(a, 6 * D);
    if (cl_config_has_cross(cfg)) {
        b->hs = cl_act_take(a, N * D), b->sq = cl_act_take(a, N * D);
        b->skv = cl_act_take(a, K * 2 * D), b->sca = cl_act_take(a, N * D);
        b->x1 = cl_act_take(a, N * D);
        if (b->ysrc != Y_OWN)
            b->shy = cl_act_take(a, K * D);
        if (cl_config_has_sve_ffn(cfg))
            b->hf = cl_act_take(a, N * D), b->sf = cl_act_take(a, N * F);
    }
    b->x_a = cl_act_take(a, N * D), b->h1 = cl_act_take(a, N * D);
    if (cfg->sve_variant == CL_SVE_ADALN_ZERO)
        b->h1m = cl_act_take(a, N * D), b->h2m = cl_act_take(a, N * D);
    b->qkv = cl_act_take(a, N * (self_ext ? D : 3 * D));
    if (self_ext) {
        b->kv = cl_act_take(a, (N + K) * 2 * D);
        if (b->ysrc != Y_OWN)
            b->hy = cl_act_take(a, K * D);
    }
    b->att = cl_act_take(a, N * D), b->x_b = cl_act_take(a, N * D);
    b->h2 = cl_act_take(a, N * D), b->f = cl_act_take(a, N * F);
    b->pa = cl_act_take(a, N * D), b->pm = cl_act_take(a, N * D);
}

/* Every view of the forward's activations and scratch: run once to count (a->base NULL), once
 * over the buffer to hand them out. */
static void layout(ClTrainEnc *e, ClActArena *a)
{
    const size_t N = e->N, D = e->D, F = e->F, M = e->M, Hm = e->Hm;
    e->rope_cos = cl_act_take(a, N * e->hd / 2), e->rope_sin = cl_act_take(a, N * e->hd / 2);
    e->scratch = cl_act_take(a, e->be->ops->attention_scratch(e->be, e->N, 2 * e->N, e->H));
    e->tmp_nd = cl_act_take(a, N * D), e->tmp_nf = cl_act_take(a, N * F);
    e->tmp_hm = cl_act_take(a, N * D), e->tmp_mg = cl_act_take(a, M * Hm);
    e->ones = cl_act_take(a, N);
    for (int t = 0; t < e->n_images; t++) {
        ImageAct *im = &e->img[t];
        im->patches = cl_act_take(a, N * e->cpp), im->x_out = cl_act_take(a, N * D);
        im->mcat = cl_act_take(a, M * 4 * D), im->mf = cl_act_take(a, M * Hm);
        for (int l = 0; l < e->cfg->enc_depth; l++)
            block_layout(e, &im->blk[l], t, a);
    }
}

ClTrainEnc *cl_train_enc_forward(ClBackend *be, const ClModel *model, const ClModelWeights *w,
                                 const float *pixels, int n_images, ClTrainEnc *states,
                                 float *visual, GError **error)
{
    const ClModelConfig *cfg = &model->config;
    ClTrainEnc *e = g_new0(ClTrainEnc, 1);
    e->be = be;
    e->cfg = cfg;
    e->n_images = n_images;
    e->N = cl_config_n_patches(cfg), e->D = cfg->enc_dim, e->F = cfg->enc_mlp;
    e->H = cfg->enc_heads, e->hd = cfg->enc_dim / cfg->enc_heads, e->G = cl_config_grid(cfg);
    e->M = cl_config_n_visual(cfg), e->E = cfg->dec_dim, e->Hm = cfg->merger_hidden;
    e->cpp = cl_config_patch_inputs(cfg);
    e->eps = (float)cfg->norm_eps;
    e->scale = (float)(1.0 / sqrt((double)e->hd));
    e->states = states;
    e->img = g_new0(ImageAct, n_images);
    for (int t = 0; t < n_images; t++)
        e->img[t].blk = g_new0(BlockAct, cfg->enc_depth);
    ClActArena a = { NULL, 0 };
    layout(e, &a);
    if (!(e->buf = cl_train_take(be, a.used, &e->buf_n))) {
        cl_train_enc_free(e);
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "Not enough memory for the encoder's training activations (%d images)",
                    n_images);
        return NULL;
    }
    a = (ClActArena){ e->buf, 0 };
    layout(e, &a);
    const size_t img_floats = (size_t)cfg->channels * cfg->image_size * cfg->image_size;
    const size_t half = (size_t)e->N * e->hd / 2;
    const gboolean host = be->ops->host_memory;
    /* the tables and constants are made on the host (pixels are the sample's: host memory) */
    g_autofree float *rope = g_new(float, 2 * half);
    cl_rope_table_2d(rope, rope + half, e->G, e->hd, cfg->enc_rope_base);
    be->ops->upload(be, e->rope_cos, rope, half * sizeof(float));
    be->ops->upload(be, e->rope_sin, rope + half, half * sizeof(float));
    g_autofree float *ones = g_new(float, e->N);
    for (int n = 0; n < e->N; n++)
        ones[n] = 1.0f;
    be->ops->upload(be, e->ones, ones, (size_t)e->N * sizeof(float));
    /* the frozen EfficientNet-Lite0 stem (on the host): its features stand for the patches'
     * pixels (the stem itself takes no gradient; enc.patch.weight does) */
    const size_t pf = (size_t)e->N * e->cpp;
    g_autofree float *feat = cfg->enc_stem_effnet && !host ? g_new(float, pf) : NULL;
    for (int t = 0; cfg->enc_stem_effnet && t < n_images; t++) {
        if (!cl_encoder_stem_features(pixels + t * img_floats, cfg->image_size,
                                      host ? e->img[t].patches : feat, e->N, error)) {
            cl_train_enc_free(e);
            return NULL;
        }
        if (!host)
            be->ops->upload(be, e->img[t].patches, feat, pf * sizeof(float));
    }
    float *px = !host && !cfg->enc_stem_effnet ? cl_train_scratch(be, img_floats) : NULL;
    for (int t = 0; t < n_images; t++) {
        const float *it = pixels + t * img_floats;
        if (px) {
            be->ops->upload(be, px, it, img_floats * sizeof(float));
            it = px;
        }
        fwd_image(e, w, it, t, visual + (size_t)t * e->M * e->E);
    }
    cl_train_scratch_free(be, px);
    return e;
}

/* ---- backward --------------------------------------------------------------------------------- */

/* Scratch for the backward of one block (sized for the largest use). */
typedef struct {
    float *dh, *dh2, *dp, *datt, *dq, *dkv, *df, *dg, *g, *dhy, *dmod, *dsc, *dc;
    float *dvc; /* (M, E) the centred visual gradient (visual_center), else NULL */
} Scratch;

/* Where the gradient of the state Y goes: the null parameter, the predecessor's dstate (no
 * stop_grad, states from this run), or nowhere. */
static float *dy_target(ClTrainEnc *e, int t, int l, const BlockAct *b, gboolean stop_grad,
                        ClEncoderLayerWeights *G)
{
    if (b->ysrc == Y_NULL)
        return G->sve_null;
    if (b->ysrc == Y_PREV && !stop_grad && !e->states && e->img[t - 1].dstate)
        return e->img[t - 1].dstate + (size_t)l * e->N * e->D;
    return NULL;
}

/* dx: in d(block output), out d(block input's stream before the block, after the module). */
static void bwd_block(ClTrainEnc *e, const ClEncoderLayerWeights *L, ClEncoderLayerWeights *G,
                      BlockAct *b, float *dx, Scratch *s, float *dyt)
{
    ClBackend *be = e->be;
    const struct cl_backend_train_ops *T = be->ops->train;
    const int N = e->N, D = e->D, H = e->H, hd = e->hd, F = e->F, K = b->K;
    const size_t ND = (size_t)N * D;
    const float *mod = b->mod;
    float *dmod = mod ? s->dmod : NULL;
    const gboolean self_ext = e->cfg->sve_variant == CL_SVE_SELF_EXT;

    /* MLP */
    cl_train_zero(be, s->dp, ND);
    T->residual(be, s->dp, dmod ? dmod + 5 * D : NULL, dx, b->pm, mod ? mod + 5 * D : NULL, N, D);
    be->ops->gelu(be, s->g, b->f, (size_t)N * F);
    cl_train_zero(be, s->dg, (size_t)N * F);
    T->linear(be, s->dg, G->fc2_w, G->fc2_b, s->dp, s->g, L->fc2_w, N, F, D);
    cl_train_zero(be, s->df, (size_t)N * F);
    T->gelu(be, s->df, s->dg, b->f, (size_t)N * F);
    cl_train_zero(be, s->dh, ND);
    T->linear(be, s->dh, G->fc1_w, G->fc1_b, s->df, mod ? b->h2m : b->h2, L->fc1_w, N, D, F);
    const float *dhn = s->dh;
    if (mod) {
        cl_train_zero(be, s->dh2, ND);
        T->modulate(be, s->dh2, dmod + 4 * D, dmod + 3 * D, s->dh, b->h2, mod + 4 * D, N, D);
        dhn = s->dh2;
    }
    T->layernorm(be, dx, G->ln2_w, G->ln2_b, dhn, b->x_b, L->ln2_w, N, D, e->eps);

    /* attention */
    cl_train_zero(be, s->dp, ND);
    T->residual(be, s->dp, dmod ? dmod + 2 * D : NULL, dx, b->pa, mod ? mod + 2 * D : NULL, N, D);
    cl_train_zero(be, s->datt, ND);
    T->linear(be, s->datt, G->attn_out_w, G->attn_out_b, s->dp, b->att, L->attn_out_w, N, D, D);
    cl_train_zero(be, s->dh, ND);
    if (!self_ext) {
        cl_train_zero(be, s->dq, ND * 3);
        T->attention(be, s->dq, s->dq + D, s->dq + 2 * D, s->datt, b->qkv, b->qkv + D,
                     b->qkv + 2 * D, N, N, 3 * D, 3 * D, 3 * D, D, H, H, hd, e->scale, -1);
        T->rope(be, s->dq, e->rope_cos, e->rope_sin, N, 3 * D, H, hd, 2);
        T->rope(be, s->dq + D, e->rope_cos, e->rope_sin, N, 3 * D, H, hd, 2);
        T->linear(be, s->dh, G->qkv_w, G->qkv_b, s->dq, mod ? b->h1m : b->h1, L->qkv_w, N, D,
                  3 * D);
    } else {
        const size_t kvw = (size_t)D * D;
        float *dkv_y = s->dkv + ND * 2;
        cl_train_zero(be, s->dq, ND);
        cl_train_zero(be, s->dkv, (size_t)(N + K) * 2 * D);
        T->attention(be, s->dq, s->dkv, s->dkv + D, s->datt, b->qkv, b->kv, b->kv + D, N, N + K, D,
                     2 * D, 2 * D, D, H, H, hd, e->scale, -1);
        T->rope(be, s->dq, e->rope_cos, e->rope_sin, N, D, H, hd, 2);
        T->rope(be, s->dkv, e->rope_cos, e->rope_sin, N, 2 * D, H, hd, 2);
        if (e->cfg->sve_cross_pos && b->ysrc != Y_NULL)
            T->rope(be, dkv_y, e->rope_cos, e->rope_sin, K, 2 * D, H, hd, 2);
        if (b->ysrc == Y_OWN) /* the state's keys/values were a copy of the own ones */
            be->ops->add(be, s->dkv, s->dkv, dkv_y, ND * 2);
        T->linear(be, s->dh, G->qkv_w, G->qkv_b, s->dq, b->h1, L->qkv_w, N, D, D);
        T->linear(be, s->dh, G->qkv_w + kvw, G->qkv_b + D, s->dkv, b->h1, L->qkv_w + kvw, N, D,
                  2 * D);
        if (b->ysrc != Y_OWN) {
            cl_train_zero(be, s->dhy, (size_t)K * D);
            T->linear(be, s->dhy, G->qkv_w + kvw, G->qkv_b + D, dkv_y, b->hy, L->qkv_w + kvw, K, D,
                      2 * D);
            T->layernorm(be, dyt, G->ln1_w, G->ln1_b, s->dhy, b->y, L->ln1_w, K, D, e->eps);
        }
    }
    dhn = s->dh;
    if (mod) {
        cl_train_zero(be, s->dh2, ND);
        T->modulate(be, s->dh2, dmod + D, dmod, s->dh, b->h1, mod + D, N, D);
        dhn = s->dh2;
    }
    T->layernorm(be, dx, G->ln1_w, G->ln1_b, dhn, b->x_a, L->ln1_w, N, D, e->eps);
}

/* dx: in d(module output x_a), out d(x_in). */
static void bwd_cross(ClTrainEnc *e, const ClEncoderLayerWeights *L, ClEncoderLayerWeights *G,
                      BlockAct *b, float *dx, Scratch *s, float *dyt)
{
    ClBackend *be = e->be;
    const struct cl_backend_train_ops *T = be->ops->train;
    const int N = e->N, D = e->D, H = e->H, hd = e->hd, F = e->F, K = b->K;
    const size_t ND = (size_t)N * D;
    if (cl_config_has_sve_ffn(e->cfg)) {
        be->ops->gelu(be, s->g, b->sf, (size_t)N * F);
        cl_train_zero(be, s->dg, (size_t)N * F);
        T->linear(be, s->dg, G->sve_fc2_w, G->sve_fc2_b, dx, s->g, L->sve_fc2_w, N, F, D);
        cl_train_zero(be, s->df, (size_t)N * F);
        T->gelu(be, s->df, s->dg, b->sf, (size_t)N * F);
        cl_train_zero(be, s->dh, ND);
        T->linear(be, s->dh, G->sve_fc1_w, G->sve_fc1_b, s->df, b->hf, L->sve_fc1_w, N, D, F);
        T->layernorm(be, dx, G->sve_ffn_ln_w, G->sve_ffn_ln_b, s->dh, b->x1, L->sve_ffn_ln_w, N, D,
                     e->eps);
    }
    cl_train_zero(be, s->datt, ND);
    T->linear(be, s->datt, G->sve_out_w, G->sve_out_b, dx, b->sca, L->sve_out_w, N, D, D);
    cl_train_zero(be, s->dq, ND);
    cl_train_zero(be, s->dkv, (size_t)K * 2 * D);
    T->attention(be, s->dq, s->dkv, s->dkv + D, s->datt, b->sq, b->skv, b->skv + D, N, K, D, 2 * D,
                 2 * D, D, H, H, hd, e->scale, -1);
    if (e->cfg->sve_cross_pos) {
        T->rope(be, s->dq, e->rope_cos, e->rope_sin, N, D, H, hd, 2);
        if (b->ysrc != Y_NULL)
            T->rope(be, s->dkv, e->rope_cos, e->rope_sin, K, 2 * D, H, hd, 2);
    }
    cl_train_zero(be, s->dh, ND);
    T->linear(be, s->dh, G->sve_q_w, G->sve_q_b, s->dq, b->hs, L->sve_q_w, N, D, D);
    if (b->ysrc == Y_OWN) {
        T->linear(be, s->dh, G->sve_kv_w, G->sve_kv_b, s->dkv, b->hs, L->sve_kv_w, N, D, 2 * D);
    } else {
        cl_train_zero(be, s->dhy, (size_t)K * D);
        T->linear(be, s->dhy, G->sve_kv_w, G->sve_kv_b, s->dkv, b->shy, L->sve_kv_w, K, D, 2 * D);
        T->layernorm(be, dyt, G->sve_ln_w, G->sve_ln_b, s->dhy, b->y, L->sve_ln_w, K, D, e->eps);
    }
    T->layernorm(be, dx, G->sve_ln_w, G->sve_ln_b, s->dh, b->x_in, L->sve_ln_w, N, D, e->eps);
}

/* adaln_zero: s->dmod (accumulated by bwd_block) back to the weights and the state. */
static void bwd_adaln(ClTrainEnc *e, const ClEncoderLayerWeights *L, ClEncoderLayerWeights *G,
                      BlockAct *b, Scratch *s, float *dyt)
{
    ClBackend *be = e->be;
    const struct cl_backend_train_ops *T = be->ops->train;
    const int N = e->N, D = e->D;
    cl_train_zero(be, s->dsc, D);
    T->linear(be, s->dsc, G->sve_ada_w, G->sve_ada_b, s->dmod, b->sc, L->sve_ada_w, 1, D, 6 * D);
    cl_train_zero(be, s->dc, D);
    T->silu(be, s->dc, s->dsc, b->c, (size_t)D);
    if (!dyt || b->ysrc == Y_OWN) /* own: c = 0, a constant */
        return;
    if (b->ysrc == Y_NULL) {
        be->ops->add(be, dyt, dyt, s->dc, (size_t)D);
        return;
    }
    /* c = mean_n Y_n: dY_n += dc / N for every token n, as the product ones (N, 1) · dc (1, D) */
    be->ops->gemm(be, FALSE, FALSE, N, D, 1, 1.0f / N, e->ones, 1, s->dc, D, 1.0f, dyt, D);
}

const float *cl_train_enc_tokens(const ClTrainEnc *e, int t)
{
    g_return_val_if_fail(e != NULL && t >= 0 && t < e->n_images, NULL);
    return e->img[t].x_out;
}

/* config.change_marker, the marker term v_m += q_m · k with q_m = p_{at(m)} = sigmoid(z): dk +=
 * Σ_m q_m dv_m, dq_m = k·dv_m, then dz = dq · p(1 − p) into the change head and the patch token
 * it read. On the host, as the forward's marker (a few hundred floats each way); the change
 * head's share goes back as one product, d z (N, 1) against the head (1, D). */
static void marker_backward(ClTrainEnc *e, ImageAct *im, const ClModelWeights *w, ClModelWeights *g,
                            const float *dvis, float *dx)
{
    ClBackend *be = e->be;
    const int M = e->M, E = e->E, N = e->N, D = e->D;
    g_autofree float *tv = NULL, *tk = NULL;
    const float *hv = cl_backend_host_view(be, dvis, (size_t)M * E, &tv);
    const float *hk = cl_backend_host_view(be, w->merger_change, (size_t)E, &tk);
    g_autofree float *dk = g_new0(float, E);
    g_autofree float *dz = g_new0(float, N);
    for (int m = 0; m < M; m++) {
        const float *dv = hv + (size_t)m * E;
        double dq = 0;
        for (int j = 0; j < E; j++) {
            dk[j] += im->mark_q[m] * dv[j];
            dq += (double)hk[j] * dv[j];
        }
        const double p = im->mark_p[im->mark_at[m]];
        dz[im->mark_at[m]] += (float)(dq * p * (1 - p));
    }
    if (g->merger_change) {
        float *d = cl_train_upload(be, dk, (size_t)E);
        be->ops->add(be, g->merger_change, g->merger_change, d, (size_t)E);
        cl_train_scratch_free(be, d);
    }
    float *d = cl_train_upload(be, dz, (size_t)N);
    be->ops->train->linear(be, dx, g->enc_change_w, g->enc_change_b, d, im->x_out, w->enc_change_w,
                           N, D, 1);
    cl_train_scratch_free(be, d);
}

void cl_train_enc_backward(ClTrainEnc *e, const ClModelWeights *w, const float *dvisual,
                           const float *dtokens, gboolean stop_grad, ClModelWeights *g)
{
    const ClModelConfig *cfg = e->cfg;
    const int N = e->N, D = e->D, F = e->F, M = e->M, Hm = e->Hm, E = e->E;
    const size_t ND = (size_t)N * D;
    const gboolean flow = !stop_grad && !e->states && cfg->sve_variant != CL_SVE_STATELESS &&
                          cfg->sve_variant != CL_SVE_SELF_FFN;
    ClBackend *be = e->be;
    const struct cl_backend_train_ops *T = be->ops->train;
    Scratch s;
    size_t big = MAX((size_t)N * F, (size_t)M * Hm);
    float *dx = cl_train_scratch0(be, ND);
    s.dh = cl_train_scratch(be, MAX(ND, (size_t)M * 4 * D)), s.dh2 = cl_train_scratch(be, ND);
    s.dp = cl_train_scratch(be, ND), s.datt = cl_train_scratch(be, ND);
    s.dq = cl_train_scratch(be, 3 * ND), s.dkv = cl_train_scratch(be, 4 * ND);
    s.df = cl_train_scratch(be, big), s.dg = cl_train_scratch(be, big);
    s.g = cl_train_scratch(be, big);
    s.dhy = cl_train_scratch(be, ND), s.dmod = cl_train_scratch(be, 6 * (size_t)D);
    s.dsc = cl_train_scratch(be, D), s.dc = cl_train_scratch(be, D);
    s.dvc = cfg->visual_center ? cl_train_scratch(be, (size_t)M * E) : NULL;
    if (flow)
        for (int t = 0; t < e->n_images; t++)
            e->img[t].dstate = cl_train_scratch0(be, (size_t)cfg->enc_depth * ND);

    for (int t = e->n_images - 1; t >= 0; t--) {
        ImageAct *im = &e->img[t];
        /* the merger */
        const float *dvis = dvisual + (size_t)t * M * E;
        const float *dvis_in = dvis;
        if (g->merger_pos)
            be->ops->add(be, g->merger_pos, g->merger_pos, dvis, (size_t)M * E);
        if (s.dvc) { /* visual_center: the centring is its own adjoint */
            cl_train_copy(be, s.dvc, dvis, (size_t)M * E);
            be->ops->center_cols(be, s.dvc, M, E);
            dvis = s.dvc;
        }
        be->ops->gelu(be, s.g, im->mf, (size_t)M * Hm);
        cl_train_zero(be, s.dg, (size_t)M * Hm);
        T->linear(be, s.dg, g->merger_fc2_w, g->merger_fc2_b, dvis, s.g, w->merger_fc2_w, M, Hm, E);
        cl_train_zero(be, s.df, (size_t)M * Hm);
        T->gelu(be, s.df, s.dg, im->mf, (size_t)M * Hm);
        cl_train_zero(be, s.dh, (size_t)M * 4 * D);
        T->linear(be, s.dh, g->merger_fc1_w, g->merger_fc1_b, s.df, im->mcat, w->merger_fc1_w, M,
                  4 * D, Hm);
        cl_train_zero(be, s.dh2, ND);
        T->merge2x2(be, s.dh2, s.dh, e->G, D);
        cl_train_zero(be, dx, ND);
        T->layernorm(be, dx, g->merger_ln_w, g->merger_ln_b, s.dh2, im->x_out, w->merger_ln_w, N, D,
                     e->eps);
        if (dtokens) /* the auxiliary heads read the merger's input too */
            be->ops->add(be, dx, dx, dtokens + (size_t)t * ND, ND);
        if (im->mark_q) /* config.change_marker: q_m · marker, q_m through the change head */
            marker_backward(e, im, w, g, dvis_in, dx);

        for (int l = cfg->enc_depth - 1; l >= 0; l--) {
            const ClEncoderLayerWeights *L = &w->enc[l];
            ClEncoderLayerWeights *G = &g->enc[l];
            BlockAct *b = &im->blk[l];
            float *dyt = dy_target(e, t, l, b, stop_grad, G);
            if (b->mod)
                cl_train_zero(be, s.dmod, 6 * (size_t)D);
            bwd_block(e, L, G, b, dx, &s, dyt);
            if (cl_config_has_cross(cfg))
                bwd_cross(e, L, G, b, dx, &s, dyt);
            if (b->mod)
                bwd_adaln(e, L, G, b, &s, dyt);
            if (im->dstate) /* the successor's reading of this block input */
                be->ops->add(be, dx, dx, im->dstate + (size_t)l * ND, ND);
        }
        if (g->enc_pos)
            be->ops->add(be, g->enc_pos, g->enc_pos, dx, ND);
        T->linear(be, NULL, g->patch_w, g->patch_b, dx, im->patches, w->patch_w, N, e->cpp, D);
    }
    for (int t = 0; t < e->n_images; t++) {
        cl_train_scratch_free(be, e->img[t].dstate);
        e->img[t].dstate = NULL;
    }
    float *const bufs[] = { dx,   s.dh, s.dh2, s.dp,   s.datt, s.dq, s.dkv, s.df,
                            s.dg, s.g,  s.dhy, s.dmod, s.dsc,  s.dc, s.dvc };
    for (size_t i = 0; i < G_N_ELEMENTS(bufs); i++)
        cl_train_scratch_free(be, bufs[i]);
}
