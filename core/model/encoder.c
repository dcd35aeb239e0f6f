/* encoder.c - the stateful visual encoder: patch embedding, SVE ViT blocks (all six variants),
 * 2×2 merger and the Δ map, exactly as docs/MODEL.md §3. */
#include "encoder.h"

#include <math.h>
#include <string.h>

/* The sizes the state and its workspace were made for (checked against the model on every
 * call, so a state cannot be used with another model's shapes). */
typedef struct {
    int depth, n, d, f, heads, hd, grid, m, e, hm, channels, patch, image;
    ClSveVariant variant;
} EncShape;

static gboolean same_shape(const EncShape *a, const EncShape *b)
{
    return a->depth == b->depth && a->n == b->n && a->d == b->d && a->f == b->f &&
           a->heads == b->heads && a->hd == b->hd && a->grid == b->grid && a->m == b->m &&
           a->e == b->e && a->hm == b->hm && a->channels == b->channels &&
           a->patch == b->patch && a->image == b->image && a->variant == b->variant;
}

struct _ClEncoderState {
    EncShape s;
    float *prev;        /* (depth, N, D) every block's X_in of the last image */
    gboolean has_prev;

    /* workspace: one allocation, made on the first forward for that backend */
    const struct cl_backend_ops *ops;
    size_t scratch_floats; /* attention scratch laid out (depends on the backend's threads) */
    double rope_base;   /* the base the RoPE tables hold */
    float *arena;
    float *patches;     /* (N, C·P·P) the image cut into patches */
    float *x;           /* (N, D) the stream */
    float *x_in;        /* (N, D) the block's input */
    float *h;           /* (N, D) the normalised stream */
    float *hy;          /* (N, D) the normalised state */
    float *qkv;         /* (N, 3D) self-attention q|k|v; the SVE query; the merger's (M, 4D) */
    float *kv;          /* (2N, 2D) keys|values of the state (self_ext: [own; state]) */
    float *att;         /* (N, D) attention output (before the out projection) */
    float *att_tail;    /* (N, D) self_ext: the state's share of it */
    float *proj;        /* (N, D) a projected output */
    float *upd;         /* (N, D) adaln_zero: the module's update */
    float *hid;         /* (max(N·F, M·Hm)) MLP hidden */
    float *scores;      /* attention scratch */
    float *rope_cos;    /* (N, hd/2) 2-D RoPE tables */
    float *rope_sin;
    float *mod;         /* (6D) adaln_zero modulation */
    float *cvec;        /* (D) adaln_zero pooled state */
    float *visual_own;  /* (M, E) the Δ pass's merger output */
    float *norms;       /* (M) */
    float *unorm_tmp;   /* (N) update norms nobody keeps (the Δ pass) */
};

static EncShape shape_of(const ClModelConfig *c)
{
    EncShape s = {
        .depth = c->enc_depth,
        .n = cl_config_n_patches(c),
        .d = c->enc_dim,
        .f = c->enc_mlp,
        .heads = c->enc_heads,
        .hd = c->enc_dim / c->enc_heads,
        .grid = cl_config_grid(c),
        .m = cl_config_n_visual(c),
        .e = c->dec_dim,
        .hm = c->merger_hidden,
        .channels = c->channels,
        .patch = c->patch_size,
        .image = c->image_size,
        .variant = c->sve_variant,
    };
    return s;
}

/* total += a·b floats, FALSE on overflow */
static gboolean add_floats(size_t *total, size_t a, size_t b)
{
    size_t p;
    if (!g_size_checked_mul(&p, a, b))
        return FALSE;
    p = (p + 15) & ~(size_t)15; /* keep every view 64-byte aligned */
    return g_size_checked_add(total, *total, p);
}

ClEncoderState *cl_encoder_state_new(const ClModel *model)
{
    g_return_val_if_fail(model != NULL, NULL);
    ClEncoderState *st = g_new0(ClEncoderState, 1);
    st->s = shape_of(&model->config);
    size_t n = 0;
    if (!add_floats(&n, (size_t)st->s.depth, (size_t)st->s.n * (size_t)st->s.d) ||
        !g_size_checked_mul(&n, n, sizeof(float)) || !(st->prev = g_try_malloc(n))) {
        g_free(st);
        return NULL;
    }
    return st;
}

void cl_encoder_state_reset(ClEncoderState *state)
{
    g_return_if_fail(state != NULL);
    state->has_prev = FALSE;
}

gboolean cl_encoder_state_has_prev(const ClEncoderState *state)
{
    g_return_val_if_fail(state != NULL, FALSE);
    return state->has_prev;
}

void cl_encoder_state_free(ClEncoderState *state)
{
    if (!state)
        return;
    g_free(state->prev);
    g_free(state->arena);
    g_free(state);
}

void cl_encoder_output_clear(ClEncoderOutput *out)
{
    if (!out)
        return;
    g_clear_pointer(&out->visual, g_free);
    g_clear_pointer(&out->update_norm, g_free);
    g_clear_pointer(&out->delta, g_free);
}

/* Lays out the workspace (arena == NULL: only counts). */
static gboolean layout(ClEncoderState *st, ClBackend *be, float *arena, size_t *total)
{
    const EncShape *s = &st->s;
    size_t N = s->n, D = s->d, cpp = (size_t)s->channels * s->patch * s->patch;
    size_t hid = MAX(N * (size_t)s->f, (size_t)s->m * s->hm);
    struct {
        float **view;
        size_t a, b;
    } parts[] = {
        { &st->patches, N, cpp },
        { &st->x, N, D },
        { &st->x_in, N, D },
        { &st->h, N, D },
        { &st->hy, N, D },
        { &st->qkv, N, 3 * D },
        { &st->kv, 2 * N, 2 * D },
        { &st->att, N, D },
        { &st->att_tail, N, D },
        { &st->proj, N, D },
        { &st->upd, N, D },
        { &st->hid, hid, 1 },
        { &st->scores, st->scratch_floats, 1 },
        { &st->rope_cos, N, (size_t)s->hd / 2 },
        { &st->rope_sin, N, (size_t)s->hd / 2 },
        { &st->mod, 6, D },
        { &st->cvec, 1, D },
        { &st->visual_own, (size_t)s->m, (size_t)s->e },
        { &st->norms, (size_t)s->m, 1 },
        { &st->unorm_tmp, N, 1 },
    };
    size_t at = 0;
    for (size_t i = 0; i < G_N_ELEMENTS(parts); i++) {
        size_t before = at;
        if (!add_floats(&at, parts[i].a, parts[i].b))
            return FALSE;
        if (arena)
            *parts[i].view = arena + before;
    }
    *total = at;
    return TRUE;
}

static gboolean ensure_workspace(ClEncoderState *st, ClBackend *be, double rope_base,
                                 GError **error)
{
    /* self_ext attends over 2N keys; the other attentions over N or 1 */
    size_t scratch = be->ops->attention_scratch(be, st->s.n, 2 * st->s.n, st->s.heads);
    if (st->arena && st->ops == be->ops && st->scratch_floats >= scratch &&
        st->rope_base == rope_base)
        return TRUE;
    g_clear_pointer(&st->arena, g_free);
    st->scratch_floats = scratch;
    size_t total = 0, bytes = 0;
    if (!layout(st, be, NULL, &total) || !g_size_checked_mul(&bytes, total, sizeof(float)) ||
        !(st->arena = g_try_malloc(bytes))) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "Not enough memory for the encoder's workspace");
        return FALSE;
    }
    layout(st, be, st->arena, &total);
    st->ops = be->ops;
    st->rope_base = rope_base;
    cl_rope_table_2d(st->rope_cos, st->rope_sin, st->s.grid, st->s.hd, rope_base);
    return TRUE;
}

/* ---- taps ---- */

typedef struct {
    ClTensorTap fn;
    gpointer data;
    int image;
} Tap;

static void tap2(const Tap *t, const char *suffix, const float *x, gint64 rows, gint64 cols)
{
    if (!t || !t->fn)
        return;
    g_autofree char *name = g_strdup_printf("img%d.%s", t->image, suffix);
    gint64 shape[2] = { rows, cols };
    t->fn(name, x, cols > 0 ? 2 : 1, shape, t->data);
}

/* ---- the blocks ---- */

/* Where a block's state Y comes from. */
typedef enum {
    Y_PREV, /* the previous image's X_in at this block */
    Y_OWN,  /* the image's own X_in */
    Y_NULL, /* the learned null state (one token; adaln_zero: the vector c) */
} YSource;

typedef struct {
    ClBackend *be;
    const ClModelConfig *cfg;
    ClEncoderState *st;
    float eps, scale;
} Enc;

/* X += Attn(LN1(X)) with the block's own weights. adaln_zero (`mod` non-NULL): modulated LN1,
 * gate (1 + α1), and st->upd = α1 ⊙ A. self_ext: keys/values extended with the state Y, and the
 * update norm (the state's share through W_out) goes to `unorm`. */
static void block_attention(const Enc *E, const ClEncoderLayerWeights *L, const float *mod,
                            YSource ysrc, const float *y, float *unorm)
{
    ClBackend *be = E->be;
    const struct cl_backend_ops *op = be->ops;
    ClEncoderState *st = E->st;
    const int N = st->s.n, D = st->s.d, H = st->s.heads, hd = st->s.hd;

    op->layernorm(be, st->h, st->x, L->ln1_w, L->ln1_b, N, D, E->eps);
    if (mod) /* (1 + γ1) ⊙ LN1(X) + β1 */
        op->modulate(be, st->h, mod + D, mod, N, D);

    if (E->cfg->sve_variant != CL_SVE_SELF_EXT) {
        op->linear(be, st->qkv, st->h, L->qkv_w, L->qkv_b, N, D, 3 * D);
        op->rope(be, st->qkv, st->rope_cos, st->rope_sin, N, 3 * D, H, hd, 2);
        op->rope(be, st->qkv + D, st->rope_cos, st->rope_sin, N, 3 * D, H, hd, 2);
        op->attention(be, st->att, NULL, st->qkv, st->qkv + D, st->qkv + 2 * D, N, N, 3 * D,
                      3 * D, 3 * D, D, H, H, hd, E->scale, -1, 0, st->scores);
        op->linear(be, st->proj, st->att, L->attn_out_w, L->attn_out_b, N, D, D);
        op->residual(be, st->x, st->proj, mod ? mod + 2 * D : NULL, N, D);
        if (mod) /* the update: α1 ⊙ A */
            op->scale_cols(be, st->upd, st->proj, mod + 2 * D, N, D, FALSE);
        return;
    }

    /* self_ext: keys/values [k(LN1(X)); k(LN1(Y))], q from X only. */
    int K = ysrc == Y_NULL ? 1 : N;
    float *q = st->qkv; /* (N, D) */
    op->linear(be, q, st->h, L->qkv_w, L->qkv_b, N, D, D);
    op->linear(be, st->kv, st->h, L->qkv_w + (size_t)D * D, L->qkv_b + D, N, D, 2 * D);
    float *kv_y = st->kv + (size_t)N * 2 * D;
    if (ysrc == Y_OWN) {
        /* Y = X_in = X: the same rows (before RoPE) */
        memcpy(kv_y, st->kv, (size_t)N * 2 * D * sizeof(float));
    } else {
        op->layernorm(be, st->hy, y, L->ln1_w, L->ln1_b, K, D, E->eps);
        op->linear(be, kv_y, st->hy, L->qkv_w + (size_t)D * D, L->qkv_b + D, K, D, 2 * D);
    }
    op->rope(be, q, st->rope_cos, st->rope_sin, N, D, H, hd, 2);
    op->rope(be, st->kv, st->rope_cos, st->rope_sin, N, 2 * D, H, hd, 2);
    if (E->cfg->sve_cross_pos && ysrc != Y_NULL)
        op->rope(be, kv_y, st->rope_cos, st->rope_sin, K, 2 * D, H, hd, 2);
    op->attention(be, st->att, st->att_tail, q, st->kv, st->kv + D, N, N + K, D, 2 * D, 2 * D, D,
                  H, H, hd, E->scale, -1, N, st->scores);
    op->linear(be, st->proj, st->att, L->attn_out_w, L->attn_out_b, N, D, D);
    op->residual(be, st->x, st->proj, NULL, N, D);
    /* the update: the state's share through W_out, no bias */
    op->linear(be, st->upd, st->att_tail, L->attn_out_w, NULL, N, D, D);
    op->row_norms(be, unorm, st->upd, NULL, N, D, D);
}

/* X += MLP(LN2(X)); adaln_zero: modulated, gated, and the update norm ‖α1⊙A + α2⊙B‖. */
static void block_mlp(const Enc *E, const ClEncoderLayerWeights *L, const float *mod,
                      float *unorm)
{
    ClBackend *be = E->be;
    const struct cl_backend_ops *op = be->ops;
    ClEncoderState *st = E->st;
    const int N = st->s.n, D = st->s.d, F = st->s.f;

    op->layernorm(be, st->h, st->x, L->ln2_w, L->ln2_b, N, D, E->eps);
    if (mod) /* (1 + γ2) ⊙ LN2(X) + β2 */
        op->modulate(be, st->h, mod + 4 * D, mod + 3 * D, N, D);
    op->linear(be, st->hid, st->h, L->fc1_w, L->fc1_b, N, D, F);
    op->gelu(be, st->hid, st->hid, (size_t)N * F);
    op->linear(be, st->proj, st->hid, L->fc2_w, L->fc2_b, N, F, D);
    op->residual(be, st->x, st->proj, mod ? mod + 5 * D : NULL, N, D);
    if (mod) { /* the update: α1 ⊙ A + α2 ⊙ B */
        op->scale_cols(be, st->upd, st->proj, mod + 5 * D, N, D, TRUE);
        op->row_norms(be, unorm, st->upd, NULL, N, D, D);
    }
}

/* cross / cross_ffn / self_ffn: X = X_in + CA(LN_s(X), LN_s(Y)) [+ FFN]. */
static void sve_cross(const Enc *E, const ClEncoderLayerWeights *L, YSource ysrc, const float *y,
                      float *unorm)
{
    ClBackend *be = E->be;
    const struct cl_backend_ops *op = be->ops;
    ClEncoderState *st = E->st;
    const int N = st->s.n, D = st->s.d, H = st->s.heads, hd = st->s.hd, F = st->s.f;
    const int K = ysrc == Y_NULL ? 1 : N;

    op->layernorm(be, st->h, st->x, L->sve_ln_w, L->sve_ln_b, N, D, E->eps);
    float *q = st->qkv; /* (N, D) */
    op->linear(be, q, st->h, L->sve_q_w, L->sve_q_b, N, D, D);
    const float *hy = st->h; /* Y_OWN: LN_s(Y) = LN_s(X_in) = LN_s(X) */
    if (ysrc != Y_OWN) {
        op->layernorm(be, st->hy, y, L->sve_ln_w, L->sve_ln_b, K, D, E->eps);
        hy = st->hy;
    }
    op->linear(be, st->kv, hy, L->sve_kv_w, L->sve_kv_b, K, D, 2 * D);
    if (E->cfg->sve_cross_pos) {
        op->rope(be, q, st->rope_cos, st->rope_sin, N, D, H, hd, 2);
        if (ysrc != Y_NULL) /* the null state has no position */
            op->rope(be, st->kv, st->rope_cos, st->rope_sin, K, 2 * D, H, hd, 2);
    }
    op->attention(be, st->att, NULL, q, st->kv, st->kv + D, N, K, D, 2 * D, 2 * D, D, H, H, hd,
                  E->scale, -1, 0, st->scores);
    op->linear(be, st->proj, st->att, L->sve_out_w, L->sve_out_b, N, D, D);
    op->residual(be, st->x, st->proj, NULL, N, D);
    if (cl_config_has_sve_ffn(E->cfg)) {
        op->layernorm(be, st->h, st->x, L->sve_ffn_ln_w, L->sve_ffn_ln_b, N, D, E->eps);
        op->linear(be, st->hid, st->h, L->sve_fc1_w, L->sve_fc1_b, N, D, F);
        op->gelu(be, st->hid, st->hid, (size_t)N * F);
        op->linear(be, st->proj, st->hid, L->sve_fc2_w, L->sve_fc2_b, N, F, D);
        op->residual(be, st->x, st->proj, NULL, N, D);
    }
    /* the update U = X − X_in */
    op->row_norms(be, unorm, st->x, st->x_in, N, D, D);
}

/* adaln_zero: c = mean_n Y_n (own: 0; null: the learned vector), mod = SiLU(c) Wada^T + bada. */
static void adaln_modulation(const Enc *E, const ClEncoderLayerWeights *L, YSource ysrc,
                             const float *y)
{
    ClEncoderState *st = E->st;
    const int N = st->s.n, D = st->s.d;
    float *c = st->cvec;
    if (ysrc == Y_OWN) {
        memset(c, 0, (size_t)D * sizeof(float));
    } else if (ysrc == Y_NULL) {
        memcpy(c, L->sve_null, (size_t)D * sizeof(float));
    } else {
        /* column means, summed in double in token order */
        for (int j = 0; j < D; j++) {
            double acc = 0;
            for (int n = 0; n < N; n++)
                acc += y[(size_t)n * D + j];
            c[j] = (float)(acc / N);
        }
    }
    E->be->ops->silu(E->be, c, c, (size_t)D);
    E->be->ops->linear(E->be, st->mod, c, L->sve_ada_w, L->sve_ada_b, 1, D, 6 * D);
}

/* One pass of the blocks over st->x (the patch embedding). `state` NULL: the Δ pass (every
 * block reads Y = own, nothing is kept); else Y is the state's previous image (or the first
 * image's rule) and each block's X_in replaces it. update_norm: (depth, N) or NULL. */
static void encode_blocks(const Enc *E, const ClModelWeights *w, ClEncoderState *state,
                          float *update_norm, const Tap *tap)
{
    ClEncoderState *st = E->st;
    const ClModelConfig *cfg = E->cfg;
    const int N = st->s.n, D = st->s.d;
    const size_t ND = (size_t)N * D;
    ClSveVariant v = cfg->sve_variant;

    for (int l = 0; l < st->s.depth; l++) {
        const ClEncoderLayerWeights *L = &w->enc[l];
        float *unorm = update_norm ? update_norm + (size_t)l * N : st->unorm_tmp;
        memcpy(st->x_in, st->x, ND * sizeof(float));

        YSource ysrc;
        const float *y = st->x_in;
        if (v == CL_SVE_SELF_FFN || !state) {
            ysrc = Y_OWN;
        } else if (state->has_prev) {
            ysrc = Y_PREV;
            y = state->prev + (size_t)l * ND;
        } else if (cfg->sve_first == CL_SVE_FIRST_OWN) {
            ysrc = Y_OWN;
        } else {
            ysrc = Y_NULL;
            y = L->sve_null;
        }

        const float *mod = NULL;
        switch (v) {
        case CL_SVE_CROSS:
        case CL_SVE_CROSS_FFN:
        case CL_SVE_SELF_FFN: {
            sve_cross(E, L, ysrc, y, unorm);
            g_autofree char *name = g_strdup_printf("enc.%d.sve", l);
            tap2(tap, name, st->x, N, D);
            break;
        }
        case CL_SVE_ADALN_ZERO:
            adaln_modulation(E, L, ysrc, y);
            mod = st->mod;
            break;
        case CL_SVE_STATELESS:
            memset(unorm, 0, (size_t)N * sizeof(float));
            break;
        case CL_SVE_SELF_EXT:
        case CL_SVE_N_VARIANTS:
            break;
        }
        block_attention(E, L, mod, ysrc, y, unorm);
        block_mlp(E, L, mod, unorm);

        if (state) /* this image's X_in becomes the state (Y, read above, is no longer needed) */
            memcpy(state->prev + (size_t)l * ND, st->x_in, ND * sizeof(float));
        if (tap && tap->fn) {
            g_autofree char *un = g_strdup_printf("enc.%d.update_norm", l);
            g_autofree char *on = g_strdup_printf("enc.%d.out", l);
            tap2(tap, un, unorm, N, 0);
            tap2(tap, on, st->x, N, D);
        }
    }
}

/* The 2×2 merger: LN each token, concatenate (2i,2j), (2i,2j+1), (2i+1,2j), (2i+1,2j+1), MLP. */
static void merger(const Enc *E, const ClModelWeights *w, float *visual)
{
    ClBackend *be = E->be;
    const struct cl_backend_ops *op = be->ops;
    ClEncoderState *st = E->st;
    const int N = st->s.n, D = st->s.d, G = st->s.grid, M = st->s.m, Hm = st->s.hm;
    op->layernorm(be, st->h, st->x, w->merger_ln_w, w->merger_ln_b, N, D, E->eps);
    float *cat = st->qkv; /* (M, 4D) */
    const size_t row = (size_t)D * sizeof(float);
    for (int i = 0; i < G / 2; i++)
        for (int j = 0; j < G / 2; j++) {
            float *dst = cat + ((size_t)i * (G / 2) + j) * 4 * D;
            memcpy(dst, st->h + ((size_t)(2 * i) * G + 2 * j) * D, row);
            memcpy(dst + D, st->h + ((size_t)(2 * i) * G + 2 * j + 1) * D, row);
            memcpy(dst + 2 * D, st->h + ((size_t)(2 * i + 1) * G + 2 * j) * D, row);
            memcpy(dst + 3 * D, st->h + ((size_t)(2 * i + 1) * G + 2 * j + 1) * D, row);
        }
    op->linear(be, st->hid, cat, w->merger_fc1_w, w->merger_fc1_b, M, 4 * D, Hm);
    op->gelu(be, st->hid, st->hid, (size_t)M * Hm);
    op->linear(be, visual, st->hid, w->merger_fc2_w, w->merger_fc2_b, M, Hm, st->s.e);
    if (E->cfg->visual_center)
        cl_visual_center(visual, M, st->s.e);
    if (w->merger_pos)
        op->add(be, visual, visual, w->merger_pos, (size_t)M * st->s.e);
}

void cl_visual_center(float *v, int m, int e)
{
    if (m <= 0 || e <= 0)
        return;
    double *mean = g_new0(double, (size_t)e);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < e; j++)
            mean[j] += v[(size_t)i * e + j];
    for (int j = 0; j < e; j++)
        mean[j] /= m;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < e; j++)
            v[(size_t)i * e + j] = (float)(v[(size_t)i * e + j] - mean[j]);
    g_free(mean);
}

/* x (N, D) = the patches' embedding, plus enc.pos when the model has it (config enc_pos). */
static void embed_patches(ClBackend *be, float *x, const float *patches,
                          const ClModelWeights *w, int N, int cpp, int D)
{
    be->ops->linear(be, x, patches, w->patch_w, w->patch_b, N, cpp, D);
    if (w->enc_pos)
        be->ops->add(be, x, x, w->enc_pos, (size_t)N * D);
}

/* Cut [C, S, S] into patches [N, C·P·P], each flattened in (c, py, px) order. */
static void im2col(float *patches, const float *pixels, const EncShape *s)
{
    const int C = s->channels, P = s->patch, S = s->image, G = s->grid;
    for (int r = 0; r < G; r++)
        for (int cc = 0; cc < G; cc++) {
            float *dst = patches + ((size_t)r * G + cc) * C * P * P;
            for (int c = 0; c < C; c++)
                for (int py = 0; py < P; py++)
                    memcpy(dst + ((size_t)c * P + py) * P,
                           pixels + ((size_t)c * S + (size_t)r * P + py) * S + (size_t)cc * P,
                           (size_t)P * sizeof(float));
        }
}

gboolean cl_encoder_forward(ClBackend *be, const ClModel *model, ClEncoderState *state,
                            const float *pixels, int image_index, gboolean want_delta,
                            ClTensorTap tap, gpointer tap_data, ClEncoderOutput *out,
                            GError **error)
{
    g_return_val_if_fail(be != NULL && model != NULL && state != NULL, FALSE);
    g_return_val_if_fail(pixels != NULL && out != NULL, FALSE);
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    memset(out, 0, sizeof *out);

    const ClModelConfig *cfg = &model->config;
    EncShape s = shape_of(cfg);
    if (!same_shape(&s, &state->s)) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "The encoder state was made for a model of another shape");
        return FALSE;
    }
    if (!ensure_workspace(state, be, cfg->enc_rope_base, error))
        return FALSE;
    gint64 t0 = g_get_monotonic_time();

    const int N = s.n, D = s.d, M = s.m, E = s.e;
    out->visual = g_try_new(float, (size_t)M * E);
    out->update_norm = g_try_new(float, (size_t)s.depth * N);
    if (want_delta)
        out->delta = g_try_new0(float, (size_t)M);
    if (!out->visual || !out->update_norm || (want_delta && !out->delta)) {
        cl_encoder_output_clear(out);
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "Not enough memory for the encoder's output");
        return FALSE;
    }
    out->grid = s.grid;
    out->n_patches = N;
    out->n_visual = M;

    Enc enc = {
        .be = be,
        .cfg = cfg,
        .st = state,
        .eps = (float)cfg->norm_eps,
        .scale = (float)(1.0 / sqrt((double)s.hd)),
    };
    Tap t = { tap, tap_data, image_index };
    const ClModelWeights *w = &model->w;
    const size_t cpp = (size_t)s.channels * s.patch * s.patch;

    im2col(state->patches, pixels, &s);
    embed_patches(be, state->x, state->patches, w, N, (int)cpp, D);
    tap2(&t, "patch", state->x, N, D);

    gboolean had_prev = state->has_prev;
    encode_blocks(&enc, w, state, out->update_norm, &t);
    state->has_prev = TRUE;
    merger(&enc, w, out->visual);
    tap2(&t, "visual", out->visual, M, E);

    if (want_delta) {
        /* Δ_m = ‖V(Y = previous) − V(Y = own)‖² / E: 0 by construction for a first image and
         * for the variants whose output never reads the predecessor */
        if (had_prev && s.variant != CL_SVE_STATELESS && s.variant != CL_SVE_SELF_FFN) {
            embed_patches(be, state->x, state->patches, w, N, (int)cpp, D);
            encode_blocks(&enc, w, NULL, NULL, NULL);
            merger(&enc, w, state->visual_own);
            be->ops->row_norms(be, state->norms, out->visual, state->visual_own, M, E, E);
            for (int m = 0; m < M; m++)
                out->delta[m] = (float)((double)state->norms[m] * state->norms[m] / E);
        }
        tap2(&t, "delta", out->delta, M, 0);
    }
    out->ms = (g_get_monotonic_time() - t0) / 1000.0;
    return TRUE;
}
