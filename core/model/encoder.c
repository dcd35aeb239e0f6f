/* encoder.c - the stateful visual encoder: patch embedding, SVE ViT blocks (all six variants),
 * 2×2 merger and the Δ map, exactly as docs/MODEL.md §3. */
#include "model/encoder.h"
#include "model/effnet.h"
#include "model/model.h"

#include <cblas.h>
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
           a->e == b->e && a->hm == b->hm && a->channels == b->channels && a->patch == b->patch &&
           a->image == b->image && a->variant == b->variant;
}

struct _ClEncoderState {
    EncShape s;
    ClBackend *be; /* a reference to the backend whose memory prev and arena are in */
    float *prev;   /* (depth, N, D) every block's X_in of the last image */
    gboolean has_prev;

    /* workspace: one allocation, made on the first forward for that backend */
    size_t scratch_floats; /* attention scratch laid out (depends on the backend's threads) */
    double rope_base;      /* the base the RoPE tables hold */
    float *arena;
    float *patches;  /* (N, C·P·P) the image cut into patches */
    float *x;        /* (N, D) the stream */
    float *x_in;     /* (N, D) the block's input */
    float *h;        /* (N, D) the normalised stream */
    float *hy;       /* (N, D) the normalised state */
    float *qkv;      /* (N, 3D) self-attention q|k|v; the SVE query; the merger's (M, 4D) */
    float *kv;       /* (2N, 2D) keys|values of the state (self_ext: [own; state]) */
    float *att;      /* (N, D) attention output (before the out projection) */
    float *att_tail; /* (N, D) self_ext: the state's share of it */
    float *proj;     /* (N, D) a projected output */
    float *upd;      /* (N, D) adaln_zero: the module's update */
    float *hid;      /* (max(N·F, M·Hm)) MLP hidden */
    float *scores;   /* attention scratch */
    float *rope_cos; /* (N, hd/2) 2-D RoPE tables */
    float *rope_sin;
    float *mod;        /* (6D) adaln_zero modulation */
    float *cvec;       /* (D) adaln_zero pooled state */
    float *visual_own; /* (M, E) the Δ pass's merger output */
    float *norms;      /* (M) */
    float *unorm_tmp;  /* (N) update norms nobody keeps (the Δ pass) */
    /* a device backend's copies of what the caller gets in host memory (size 0 on the CPU,
     * where the encoder writes straight into the caller's arrays) */
    float *pixels;    /* (C, S, S) */
    float *visual;    /* (M, E) */
    float *unorm_all; /* (depth, N) */
    float *host_rope; /* host memory: the RoPE tables before their upload (device only) */
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
        !g_size_checked_mul(&n, n, sizeof(float))) {
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

/* Gives prev and the arena back to their backend and drops the reference to it. */
static void release_buffers(ClEncoderState *st)
{
    if (!st->be)
        return;
    if (st->prev)
        st->be->ops->release(st->be, st->prev);
    if (st->arena)
        st->be->ops->release(st->be, st->arena);
    g_clear_pointer(&st->be, cl_backend_free);
    st->prev = NULL;
    st->arena = NULL;
}

void cl_encoder_state_free(ClEncoderState *state)
{
    if (!state)
        return;
    release_buffers(state);
    g_free(state->host_rope);
    g_free(state);
}

void cl_encoder_output_clear(ClEncoderOutput *out)
{
    if (!out)
        return;
    g_clear_pointer(&out->visual, g_free);
    g_clear_pointer(&out->update_norm, g_free);
    g_clear_pointer(&out->delta, g_free);
    g_clear_pointer(&out->change_prob, g_free);
    g_clear_pointer(&out->object_logits, g_free);
}

/* config.ood (docs/MODEL.md §3.11): an image's descriptor, the mean and the standard deviation
 * over its N patches of each of their C values (stem features or pixels). */
void cl_encoder_ood_descriptor(const float *patches, int N, int C, float *desc)
{
    for (int c = 0; c < C; c++) {
        double s = 0, s2 = 0;
        for (int n = 0; n < N; n++) {
            double v = patches[(size_t)n * C + c];
            s += v, s2 += v * v;
        }
        double m = s / N;
        desc[c] = (float)m;
        desc[C + c] = (float)sqrt(MAX(0, s2 / N - m * m));
    }
}

void cl_encoder_ood_values(const ClModelConfig *cfg, const float *patch_w, const float *patch_b,
                           const float *patches, int N, float *values)
{
    const int cpp = cl_config_patch_inputs(cfg), C = cl_config_ood_channels(cfg);
    if (cfg->enc_stem_effnet) {
        memcpy(values, patches, sizeof(float) * (size_t)N * C);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, C, cpp, 1.0f, patches, cpp, patch_w,
                cpp, 0.0f, values, C);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            values[(size_t)n * C + c] += patch_b[c];
}

double cl_encoder_ood_score(const float *mean, const float *var, const float *bank,
                            const float *radius, int K, int C2, const float *desc, int skip_from,
                            int skip_to)
{
    double best[CL_OOD_NEAREST];
    int row[CL_OOD_NEAREST];
    for (int i = 0; i < CL_OOD_NEAREST; i++)
        best[i] = G_MAXDOUBLE, row[i] = -1;
    for (int k = 0; k < K; k++) {
        if (k >= skip_from && k < skip_to)
            continue;
        const float *b = bank + (size_t)k * C2;
        double d = 0;
        for (int c = 0; c < C2; c++) {
            double z = (desc[c] - mean[c]) / sqrt(MAX(var[c], 1e-12)) - b[c];
            d += z * z;
        }
        for (int i = 0; i < CL_OOD_NEAREST; i++) /* insert into the sorted few nearest */
            if (d < best[i]) {
                for (int j = CL_OOD_NEAREST - 1; j > i; j--)
                    best[j] = best[j - 1], row[j] = row[j - 1];
                best[i] = d, row[i] = k;
                break;
            }
    }
    double s = 0;
    int n = 0;
    for (int i = 0; i < CL_OOD_NEAREST; i++)
        if (row[i] >= 0) {
            const double r = radius ? MAX(radius[row[i]], 1e-6) : 1.0;
            s += sqrt(best[i] / C2) / r, n++;
        }
    return n ? s / n : 0;
}

double cl_encoder_ood_gauss_score(const float *mean, const float *var, const float *basis,
                                  const float *lambda, int R, int L, const float *desc)
{
    g_autofree double *x = g_new(double, L);
    for (int c = 0; c < L; c++)
        x[c] = desc[c] - mean[c];
    double d = 0;
    g_autofree double *res = g_memdup2(x, sizeof(double) * L);
    for (int k = 0; k < R; k++) { /* along each principal direction, by its variance */
        const float *v = basis + (size_t)k * L;
        double p = 0;
        for (int c = 0; c < L; c++)
            p += v[c] * x[c];
        d += p * p / MAX(lambda[k], 1e-12);
        for (int c = 0; c < L; c++)
            res[c] -= p * v[c];
    }
    for (int c = 0; c < L; c++) /* the rest, by the residual variance */
        d += res[c] * res[c] / MAX(var[c], 1e-12);
    return d / L;
}

double cl_encoder_colourfulness(const float *pixels, int channels, int size)
{
    if (channels != 3 || size < CL_COLOUR_BLOCK)
        return 0;
    const size_t plane = (size_t)size * size;
    const int nb = size / CL_COLOUR_BLOCK;
    double srg = 0, srg2 = 0, syb = 0, syb2 = 0;
    for (int by = 0; by < nb; by++)
        for (int bx = 0; bx < nb; bx++) {
            double m[3] = { 0, 0, 0 };
            for (int y = by * CL_COLOUR_BLOCK; y < (by + 1) * CL_COLOUR_BLOCK; y++)
                for (int x = bx * CL_COLOUR_BLOCK; x < (bx + 1) * CL_COLOUR_BLOCK; x++)
                    for (int c = 0; c < 3; c++)
                        m[c] += pixels[c * plane + (size_t)y * size + x];
            for (int c = 0; c < 3; c++) /* the block's mean on the 0–255 scale */
                m[c] = 127.5 * (m[c] / (CL_COLOUR_BLOCK * CL_COLOUR_BLOCK) + 1);
            const double rg = m[0] - m[1], yb = 0.5 * (m[0] + m[1]) - m[2];
            srg += rg, srg2 += rg * rg, syb += yb, syb2 += yb * yb;
        }
    const double n = (double)nb * nb, mrg = srg / n, myb = syb / n;
    const double vrg = MAX(0, srg2 / n - mrg * mrg), vyb = MAX(0, syb2 / n - myb * myb);
    return sqrt(vrg + vyb) + 0.3 * sqrt(mrg * mrg + myb * myb);
}

double cl_encoder_ood_model_score(const ClModelConfig *cfg, const float *mean, const float *var,
                                  const float *bank, const float *radius, const float *desc)
{
    const int K = cfg->ood, L = cl_config_ood_len(cfg);
    return cfg->ood_head ? cl_encoder_ood_gauss_score(mean, var, bank, radius, K, L, desc)
                         : cl_encoder_ood_score(mean, var, bank, radius, K, L, desc, 0, 0);
}

static const ClEffnet *shared_effnet(GError **error);

static void ood_score(ClBackend *be, const ClModel *model, const ClModelWeights *w,
                      const float *patches, const float *pixels, int N, ClEncoderOutput *out)
{
    const ClModelConfig *cfg = &model->config;
    const int K = cfg->ood, cpp = cl_config_patch_inputs(cfg), D = cfg->enc_dim,
              L = cl_config_ood_len(cfg);
    g_autofree float *tp = NULL, *tm = NULL, *tv = NULL, *tb = NULL, *tt = NULL, *tpw = NULL,
                     *tpb = NULL;
    const float *hpatch = cl_backend_host_view(be, patches, (size_t)N * cpp, &tp);
    const float *hpw = cl_backend_host_view(be, w->patch_w, (size_t)D * cpp, &tpw);
    const float *hpb = cl_backend_host_view(be, w->patch_b, (size_t)D, &tpb);
    g_autofree float *desc = g_new(float, L);
    g_autoptr(GError) err = NULL;
    if (!cl_encoder_ood_describe(cfg, hpw, hpb, hpatch, N, desc, &err)) {
        /* the stem ran a moment ago, so the network is there: no score rather than a failure */
        g_warning("image statistics: %s", err ? err->message : "no descriptor");
        return;
    }
    const float *hm = cl_backend_host_view(be, w->ood_mean, (size_t)L, &tm);
    const float *hv = cl_backend_host_view(be, w->ood_var, (size_t)L, &tv);
    const float *hb = cl_backend_host_view(be, w->ood_bank, (size_t)K * L, &tb);
    const float *ht = cl_backend_host_view(be, w->ood_threshold, 1, &tt);
    g_autofree float *tr = NULL;
    const float *hr = cl_backend_host_view(be, w->ood_radius, (size_t)K, &tr);
    out->ood_score = cl_encoder_ood_model_score(cfg, hm, hv, hb, hr, desc);
    out->ood_threshold = ht[0];
    if (cfg->ood_min_colour > 0) {
        out->ood_colour = cl_encoder_colourfulness(pixels, cfg->channels, cfg->image_size);
        out->ood_grey = out->ood_colour < cfg->ood_min_colour;
    }
}

gboolean cl_encoder_ood_describe(const ClModelConfig *cfg, const float *patch_w,
                                 const float *patch_b, const float *patches, int N, float *desc,
                                 GError **error)
{
    if (cfg->ood_head) {
        const ClEffnet *net = shared_effnet(error);
        const int G = cfg->image_size / cfg->patch_size;
        if (!net)
            return FALSE;
        if (!cl_effnet_pooled_from16(net, patches, G, G, desc)) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "the pooled head features need a patch grid, not %d × %d", G, G);
            return FALSE;
        }
        return TRUE;
    }
    const int C = cl_config_ood_channels(cfg);
    g_autofree float *values = g_new(float, (size_t)N * C);
    cl_encoder_ood_values(cfg, patch_w, patch_b, patches, N, values);
    cl_encoder_ood_descriptor(values, N, C, desc);
    return TRUE;
}

/* config.change_head: sigmoid(w·x_p + b) for each of the N final patch tokens x (N, D). */
static float *change_probabilities(ClBackend *be, const ClModelWeights *w, const float *x, int N,
                                   int D)
{
    g_autofree float *tmp = NULL, *tw = NULL, *tb = NULL;
    const float *hx = cl_backend_host_view(be, x, (size_t)N * D, &tmp);
    const float *hw = cl_backend_host_view(be, w->enc_change_w, (size_t)D, &tw);
    const float *hb = cl_backend_host_view(be, w->enc_change_b, 1, &tb);
    float *p = g_new(float, N);
    for (int n = 0; n < N; n++) {
        double z = hb[0];
        for (int d = 0; d < D; d++)
            z += (double)hw[d] * hx[(size_t)n * D + d];
        p[n] = (float)(1.0 / (1.0 + exp(-z)));
    }
    return p;
}

/* config.n_objects: the object head's logits w·x_p + b (N, CL_CONFIG_OBJECT_OUT) for the N final
 * patch tokens x (N, D). */
static float *object_logits(ClBackend *be, const ClModelWeights *w, const float *x, int N, int D)
{
    const int K = CL_CONFIG_OBJECT_OUT;
    g_autofree float *tmp = NULL, *tw = NULL, *tb = NULL;
    const float *hx = cl_backend_host_view(be, x, (size_t)N * D, &tmp);
    const float *hw = cl_backend_host_view(be, w->enc_objects_w, (size_t)K * D, &tw);
    const float *hb = cl_backend_host_view(be, w->enc_objects_b, (size_t)K, &tb);
    float *z = g_new(float, (size_t)N * K);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            double acc = hb[k];
            for (int d = 0; d < D; d++)
                acc += (double)hw[(size_t)k * D + d] * hx[(size_t)n * D + d];
            z[(size_t)n * K + k] = (float)acc;
        }
    return z;
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
        { &st->pixels, be->ops->host_memory ? 0 : (size_t)s->channels * s->image, s->image },
        { &st->visual, be->ops->host_memory ? 0 : (size_t)s->m, (size_t)s->e },
        { &st->unorm_all, be->ops->host_memory ? 0 : (size_t)s->depth, N },
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
    if (st->arena && st->be == be && st->scratch_floats >= scratch && st->rope_base == rope_base)
        return TRUE;
    if (st->be != be) {
        /* another backend: its memory is not this one's; the state starts over */
        release_buffers(st);
        st->has_prev = FALSE;
        st->be = cl_backend_ref(be);
        size_t n = (size_t)st->s.depth * st->s.n * st->s.d * sizeof(float); /* checked in new */
        if (!(st->prev = be->ops->alloc(be, n))) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                        "Not enough %s memory for the encoder's state", cl_backend_name(be));
            return FALSE;
        }
    }
    if (st->arena)
        be->ops->release(be, st->arena);
    st->arena = NULL;
    st->scratch_floats = scratch;
    size_t total = 0, bytes = 0;
    if (!layout(st, be, NULL, &total) || !g_size_checked_mul(&bytes, total, sizeof(float)) ||
        !(st->arena = be->ops->alloc(be, bytes))) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "Not enough %s memory for the encoder's workspace", cl_backend_name(be));
        return FALSE;
    }
    layout(st, be, st->arena, &total);
    st->rope_base = rope_base;
    if (be->ops->host_memory) {
        cl_rope_table_2d(st->rope_cos, st->rope_sin, st->s.grid, st->s.hd, rope_base);
    } else {
        size_t half = (size_t)st->s.n * (st->s.hd / 2);
        g_free(st->host_rope);
        st->host_rope = g_new(float, 2 * MAX(half, 1));
        cl_rope_table_2d(st->host_rope, st->host_rope + half, st->s.grid, st->s.hd, rope_base);
        be->ops->upload(be, st->rope_cos, st->host_rope, half * sizeof(float));
        be->ops->upload(be, st->rope_sin, st->host_rope + half, half * sizeof(float));
    }
    return TRUE;
}

/* ---- taps ---- */

typedef struct {
    ClTensorTap fn;
    gpointer data;
    int image;
    ClBackend *be; /* x is in its memory (NULL: host memory) */
} Tap;

static void tap2(const Tap *t, const char *suffix, const float *x, gint64 rows, gint64 cols)
{
    if (!t || !t->fn)
        return;
    g_autofree char *name = g_strdup_printf("img%d.%s", t->image, suffix);
    gint64 shape[2] = { rows, cols };
    g_autofree float *tmp = NULL;
    if (t->be)
        x = cl_backend_host_view(t->be, x, (size_t)rows * MAX(cols, 1), &tmp);
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
        op->attention(be, st->att, NULL, st->qkv, st->qkv + D, st->qkv + 2 * D, N, N, 3 * D, 3 * D,
                      3 * D, D, H, H, hd, E->scale, -1, 0, st->scores);
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
        op->copy(be, kv_y, st->kv, (size_t)N * 2 * D * sizeof(float));
    } else {
        op->layernorm(be, st->hy, y, L->ln1_w, L->ln1_b, K, D, E->eps);
        op->linear(be, kv_y, st->hy, L->qkv_w + (size_t)D * D, L->qkv_b + D, K, D, 2 * D);
    }
    op->rope(be, q, st->rope_cos, st->rope_sin, N, D, H, hd, 2);
    op->rope(be, st->kv, st->rope_cos, st->rope_sin, N, 2 * D, H, hd, 2);
    if (E->cfg->sve_cross_pos && ysrc != Y_NULL)
        op->rope(be, kv_y, st->rope_cos, st->rope_sin, K, 2 * D, H, hd, 2);
    op->attention(be, st->att, st->att_tail, q, st->kv, st->kv + D, N, N + K, D, 2 * D, 2 * D, D, H,
                  H, hd, E->scale, -1, N, st->scores);
    op->linear(be, st->proj, st->att, L->attn_out_w, L->attn_out_b, N, D, D);
    op->residual(be, st->x, st->proj, NULL, N, D);
    /* the update: the state's share through W_out, no bias */
    op->linear(be, st->upd, st->att_tail, L->attn_out_w, NULL, N, D, D);
    op->row_norms(be, unorm, st->upd, NULL, N, D, D);
}

/* X += MLP(LN2(X)); adaln_zero: modulated, gated, and the update norm ‖α1⊙A + α2⊙B‖. */
static void block_mlp(const Enc *E, const ClEncoderLayerWeights *L, const float *mod, float *unorm)
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
    ClBackend *be = E->be;
    const int N = st->s.n, D = st->s.d;
    float *c = st->cvec;
    if (ysrc == Y_OWN)
        be->ops->zero(be, c, (size_t)D * sizeof(float));
    else if (ysrc == Y_NULL)
        be->ops->copy(be, c, L->sve_null, (size_t)D * sizeof(float));
    else /* column means, summed in double in token order */
        be->ops->col_mean(be, c, y, N, D);
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
    ClBackend *be = E->be;
    const ClModelConfig *cfg = E->cfg;
    const int N = st->s.n, D = st->s.d;
    const size_t ND = (size_t)N * D;
    ClSveVariant v = cfg->sve_variant;

    for (int l = 0; l < st->s.depth; l++) {
        const ClEncoderLayerWeights *L = &w->enc[l];
        float *unorm = update_norm ? update_norm + (size_t)l * N : st->unorm_tmp;
        be->ops->copy(be, st->x_in, st->x, ND * sizeof(float));

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
        case CL_SVE_STATELESS: be->ops->zero(be, unorm, (size_t)N * sizeof(float)); break;
        case CL_SVE_SELF_EXT:
        case CL_SVE_N_VARIANTS: break;
        }
        block_attention(E, L, mod, ysrc, y, unorm);
        block_mlp(E, L, mod, unorm);

        if (state) /* this image's X_in becomes the state (Y, read above, is no longer needed) */
            be->ops->copy(be, state->prev + (size_t)l * ND, st->x_in, ND * sizeof(float));
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
    op->merge2x2(be, cat, st->h, G, D);
    op->linear(be, st->hid, cat, w->merger_fc1_w, w->merger_fc1_b, M, 4 * D, Hm);
    op->gelu(be, st->hid, st->hid, (size_t)M * Hm);
    op->linear(be, visual, st->hid, w->merger_fc2_w, w->merger_fc2_b, M, Hm, st->s.e);
    if (E->cfg->visual_center)
        op->center_cols(be, visual, M, st->s.e);
    if (w->merger_pos)
        op->add(be, visual, visual, w->merger_pos, (size_t)M * st->s.e);
}

void cl_visual_center(float *v, int m, int e)
{
    cl_center_columns(v, m, e);
}

void cl_change_marker_pool(const float *p, int G, float *q, int *at)
{
    const int H = G / 2;
    for (int i = 0; i < H; i++)
        for (int j = 0; j < H; j++) {
            const int m = i * H + j;
            int best = (2 * i) * G + 2 * j;
            for (int di = 0; di < 2; di++)
                for (int dj = 0; dj < 2; dj++) {
                    const int n = (2 * i + di) * G + 2 * j + dj;
                    if (p[n] > p[best])
                        best = n;
                }
            q[m] = p[best];
            if (at)
                at[m] = best;
        }
}

void cl_change_marker_add(float *visual, const float *q, const float *marker, int M, int E)
{
    for (int m = 0; m < M; m++)
        for (int e = 0; e < E; e++)
            visual[(size_t)m * E + e] += q[m] * marker[e];
}

/* The pretrained EfficientNet-Lite0, loaded once for the process from the pretrained folder. */
static const ClEffnet *shared_effnet(GError **error)
{
    static GMutex lock;
    static ClEffnet *net;
    g_mutex_lock(&lock);
    if (!net) {
        g_autofree char *path = cl_pretrained_path(CL_EFFNET_FILE);
        net = cl_effnet_load(path, error);
        if (!net)
            g_prefix_error(error, "The model's stem is EfficientNet-Lite0, which set-up fetches "
                                  "(./run.sh): ");
    }
    g_mutex_unlock(&lock);
    return net;
}

/* The stem's tokens for the model input `pixels` (3 planes of size², normalised to [−1, 1]):
 * the stride-16 feature map, N × CL_CONFIG_EFFNET_CHANNELS, into `patches`. */
gboolean cl_encoder_stem_features(const float *pixels, int size, float *patches, int N,
                                  GError **error)
{
    const ClEffnet *net = shared_effnet(error);
    if (!net)
        return FALSE;
    const size_t plane = (size_t)size * size;
    g_autofree float *rgb = g_new(float, plane * 3);
    for (size_t i = 0; i < plane; i++)
        for (int c = 0; c < 3; c++)
            rgb[i * 3 + c] = pixels[c * plane + i] * 0.5f + 0.5f;
    int n, ch;
    g_autofree float *f = cl_effnet_features(net, rgb, size, 16, &n, &ch, error);
    if (!f)
        return FALSE;
    g_assert(n == N && ch == CL_CONFIG_EFFNET_CHANNELS);
    memcpy(patches, f, (size_t)N * ch * sizeof(float));
    return TRUE;
}

/* x (N, D) = the patches' embedding, plus enc.pos when the model has it (config enc_pos). */
static void embed_patches(ClBackend *be, float *x, const float *patches, const ClModelWeights *w,
                          int N, int cpp, int D)
{
    be->ops->linear(be, x, patches, w->patch_w, w->patch_b, N, cpp, D);
    if (w->enc_pos)
        be->ops->add(be, x, x, w->enc_pos, (size_t)N * D);
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
    out->visual = g_try_new(float, (size_t)M *E);
    out->update_norm = g_try_new(float, (size_t)s.depth *N);
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
    const gboolean host = be->ops->host_memory;
    Tap t = { tap, tap_data, image_index, host ? NULL : be };
    const ClModelWeights *w = cl_model_weights_on(model, be, error);
    if (!w) {
        cl_encoder_output_clear(out);
        return FALSE;
    }
    const size_t cpp = (size_t)cl_config_patch_inputs(cfg);
    /* on a device, the results are made in its memory and downloaded at the end */
    float *visual = host ? out->visual : state->visual;
    float *update_norm = host ? out->update_norm : state->unorm_all;

    if (cfg->enc_stem_effnet) {
        /* the frozen stem runs on the host (core/model/effnet.c); on a device its features are
         * uploaded, as the trainer does */
        g_autofree float *feat = host ? NULL : g_try_new(float, (size_t)N *cpp);
        if (!host && !feat) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                        "Not enough memory for the stem's features");
            cl_encoder_output_clear(out);
            return FALSE;
        }
        if (!cl_encoder_stem_features(pixels, s.image, host ? state->patches : feat, N, error)) {
            cl_encoder_output_clear(out);
            return FALSE;
        }
        if (!host)
            be->ops->upload(be, state->patches, feat, (size_t)N * cpp * sizeof(float));
    } else {
        const float *px = pixels;
        if (!host) {
            be->ops->upload(be, state->pixels, pixels,
                            (size_t)s.channels * s.image * s.image * sizeof(float));
            px = state->pixels;
        }
        be->ops->im2col(be, state->patches, px, s.channels, s.image, s.patch);
    }
    if (w->ood_bank)
        ood_score(be, model, w, state->patches, pixels, N, out);
    embed_patches(be, state->x, state->patches, w, N, (int)cpp, D);
    tap2(&t, "patch", state->x, N, D);

    gboolean had_prev = state->has_prev;
    encode_blocks(&enc, w, state, update_norm, &t);
    if (had_prev && w->enc_change_w)
        out->change_prob = change_probabilities(be, w, state->x, N, D);
    if (w->enc_objects_w)
        out->object_logits = object_logits(be, w, state->x, N, D);
    state->has_prev = TRUE;
    merger(&enc, w, visual);
    tap2(&t, "visual", visual, M, E);

    if (want_delta) {
        /* Δ_m = ‖V(Y = previous) − V(Y = own)‖² / E: 0 by construction for a first image and
         * for the variants whose output never reads the predecessor */
        if (had_prev && s.variant != CL_SVE_STATELESS && s.variant != CL_SVE_SELF_FFN) {
            embed_patches(be, state->x, state->patches, w, N, (int)cpp, D);
            encode_blocks(&enc, w, NULL, NULL, NULL);
            merger(&enc, w, state->visual_own);
            be->ops->row_norms(be, state->norms, visual, state->visual_own, M, E, E);
            g_autofree float *tmp = NULL;
            const float *norms = cl_backend_host_view(be, state->norms, (size_t)M, &tmp);
            for (int m = 0; m < M; m++)
                out->delta[m] = (float)((double)norms[m] * norms[m] / E);
        }
        Tap host_tap = t;
        host_tap.be = NULL; /* delta is in host memory */
        tap2(&host_tap, "delta", out->delta, M, 0);
    }
    if (!host) {
        be->ops->download(be, out->visual, visual, (size_t)M * E * sizeof(float));
        be->ops->download(be, out->update_norm, update_norm, (size_t)s.depth * N * sizeof(float));
    }
    if (!be->ops->finish(be, error)) {
        /* the state's contents are unknown after a failed op: start over */
        state->has_prev = FALSE;
        cl_encoder_output_clear(out);
        return FALSE;
    }
    if (out->change_prob && w->merger_change) {
        /* config.change_marker: after the Δ pass, which compares the merger's outputs alone */
        g_autofree float *tmk = NULL;
        const float *mk = cl_backend_host_view(be, w->merger_change, (size_t)E, &tmk);
        g_autofree float *q = g_new(float, M);
        cl_change_marker_pool(out->change_prob, s.grid, q, NULL);
        cl_change_marker_add(out->visual, q, mk, M, E);
    }
    out->ms = (g_get_monotonic_time() - t0) / 1000.0;
    return TRUE;
}
