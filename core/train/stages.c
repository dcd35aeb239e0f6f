/* stages.c - the starting model of each stage (trainer.h): a config's random init, or a model
 * file reshaped for the stage (CASA, PVM, VIST2 and the Gated DeltaNet hybrid inserted, SVE
 * modules for stage 2), and --train-only's frozen ranges. */
#include <math.h>
#include <string.h>

#include "train/trainer-private.h"

/* The standard init of a weight matrix and the paper's "zero init" alternative's std. */
#define STANDARD_INIT_STD 0.02

/* N(0, std²) by Box-Muller from a splitmix64 stream (for the no-clone ablation). */
static void fill_normal(float *dst, size_t n, double std, guint64 state)
{
    for (size_t i = 0; i < n; i += 2) {
        guint64 a = state += G_GUINT64_CONSTANT(0x9E3779B97F4A7C15), b;
        a = (a ^ (a >> 30)) * G_GUINT64_CONSTANT(0xBF58476D1CE4E5B9);
        a = (a ^ (a >> 27)) * G_GUINT64_CONSTANT(0x94D049BB133111EB);
        a ^= a >> 31;
        b = state += G_GUINT64_CONSTANT(0x9E3779B97F4A7C15);
        b = (b ^ (b >> 30)) * G_GUINT64_CONSTANT(0xBF58476D1CE4E5B9);
        b = (b ^ (b >> 27)) * G_GUINT64_CONSTANT(0x94D049BB133111EB);
        b ^= b >> 31;
        double u1 = (double)((a >> 11) + 1) * 0x1p-53, u2 = (double)(b >> 11) * 0x1p-53;
        double rad = std * sqrt(-2.0 * log(u1)), th = 2.0 * G_PI * u2;
        dst[i] = (float)(rad * cos(th));
        if (i + 1 < n)
            dst[i + 1] = (float)(rad * sin(th));
    }
}

static void fill_const(float *dst, size_t n, float v)
{
    for (size_t i = 0; i < n && dst; i++)
        dst[i] = v;
}

/* The no-clone ablation: what §3.7 clones from the block gets a standard init instead. */
static void sve_uncloned_init(ClModel *m, guint64 seed)
{
    const ClModelConfig *c = &m->config;
    const size_t D = (size_t)c->enc_dim, F = (size_t)c->enc_mlp;
    for (int l = 0; l < c->enc_depth; l++) {
        ClEncoderLayerWeights *L = &m->w.enc[l];
        guint64 s = seed ^ ((guint64)(l + 1) * G_GUINT64_CONSTANT(0xD1B54A32D192ED03));
        fill_const(L->sve_ln_w, D, 1.0f);
        fill_const(L->sve_ln_b, D, 0.0f);
        fill_const(L->sve_ffn_ln_w, D, 1.0f);
        fill_const(L->sve_ffn_ln_b, D, 0.0f);
        if (L->sve_q_w)
            fill_normal(L->sve_q_w, D * D, STANDARD_INIT_STD, s + 1);
        if (L->sve_kv_w)
            fill_normal(L->sve_kv_w, 2 * D * D, STANDARD_INIT_STD, s + 2);
        if (L->sve_fc1_w)
            fill_normal(L->sve_fc1_w, F * D, STANDARD_INIT_STD, s + 3);
        fill_const(L->sve_q_b, D, 0.0f);
        fill_const(L->sve_kv_b, 2 * D, 0.0f);
        fill_const(L->sve_fc1_b, F, 0.0f);
    }
}

/* The SVE switches of the options applied to a config. */
static void apply_sve_switches(ClModelConfig *cfg, const ClTrainerOptions *o)
{
    if (o->first_set)
        cfg->sve_first = o->first;
    cfg->sve_cross_pos = !o->no_cross_pos;
    cfg->sve_out_init_std = o->no_zero_init ? STANDARD_INIT_STD : o->sve_init_std;
}

/* `src` (token insertion) as a CASA model of o's variant: the same tensors and tokenizer, the
 * cross-attention cloned from each layer's self-attention (docs/MODEL.md §4.3). */
static ClModel *insert_casa(const ClModel *src, const ClTrainerOptions *o, GError **error)
{
    ClModelConfig cfg = src->config;
    cfg.casa = o->casa;
    cfg.casa_replace = o->casa_replace;
    cfg.casa_gist = o->casa_gist;
    cfg.casa_tv = o->casa_tv;
    g_autoptr(ClModel) m = cl_model_reshaped(src, &cfg, o->seed, ".casa.", error);
    if (!m)
        return NULL;
    cl_model_weights_init_casa(m);
    if (!cl_model_make_trainable(m, error))
        return NULL;
    return g_steal_pointer(&m);
}

/* `src` with PVM inserted as o asks (pvm_every, pvm_rank): the same tensors and tokenizer, and
 * the branch's new tensors at their init (α = 0: the model computes what src does). */
static ClModel *insert_pvm(const ClModel *src, const ClTrainerOptions *o, GError **error)
{
    ClModelConfig cfg = src->config;
    if (!cl_config_set_pvm(&cfg, o->pvm_every, o->pvm_rank > 0 ? o->pvm_rank : 32)) {
        FAIL(OPTIONS, "--pvm-every %d puts PVM in more than %d layers", o->pvm_every,
             CL_CONFIG_MAX_PVM_LAYERS);
        return NULL;
    }
    guint64 seed = o->seed ^ G_GUINT64_CONSTANT(0x50564d494e534552); /* "PVMINSER" */
    g_autoptr(ClModel) m = cl_model_reshaped(src, &cfg, seed, ".pvm.", error);
    if (!m || !cl_model_make_trainable(m, error))
        return NULL;
    return g_steal_pointer(&m);
}

/* `src` (attention in every layer) as the Gated DeltaNet hybrid of o->hybrid_every: the same
 * tensors and tokenizer, each GDN layer's attention dropped and its GDN started from it where
 * the shapes allow (cl_config_set_hybrid: H = the decoder's heads, dk = its head size,
 * dv = 2 dk): q copied from the attention's q, k per head from its GQA group's key head, the
 * first dk of each head's dv value rows from that key head's values (the other dk at the random
 * init, std 0.02); the convolutions the identity (the current tap 1, the others 0); g, a, b at
 * std 0.02 (beta ~ 1/2); A_log and dt_bias at the reference init (A ~ U(0, 16), dt ~
 * logU(1e-3, 1e-1)); o_norm 1; the output o ~ N(0, 1e-3²): the layer starts near the identity
 * (its contribution ~1e-3 of the stream's) with every gradient alive. */
static ClModel *insert_hybrid(const ClModel *src, const ClTrainerOptions *o, GError **error)
{
    ClModelConfig cfg = src->config;
    cl_config_set_hybrid(&cfg, o->hybrid_every);
    guint64 seed = o->seed ^ G_GUINT64_CONSTANT(0x4859425249444e54); /* "HYBRIDNT" */
    g_autoptr(ClModel) m = cl_model_reshaped(src, &cfg, seed, ".gdn.", error);
    if (!m)
        return NULL;
    const size_t E = cfg.dec_dim, hd = E / cfg.dec_heads, H = cfg.gdn_heads;
    const size_t dk = cfg.gdn_dk, dv = cfg.gdn_dv, K = cfg.gdn_conv;
    const size_t group = cfg.dec_heads / cfg.dec_kv_heads;
    g_assert(H == (size_t)cfg.dec_heads && dk == hd && dv >= hd);
    for (int l = 0; l < cfg.dec_depth; l++) {
        if (!cl_config_is_gdn(&cfg, l))
            continue;
        const ClDecoderLayerWeights *A = &src->w.dec[l];
        ClDecoderLayerWeights *L = &m->w.dec[l];
        memcpy(L->gdn_q, A->q, H * dk * E * sizeof(float));
        for (size_t h = 0; h < H; h++) {
            memcpy(L->gdn_k + h * dk * E, A->k + (h / group) * hd * E, hd * E * sizeof(float));
            memcpy(L->gdn_v + h * dv * E, A->v + (h / group) * hd * E, hd * E * sizeof(float));
        }
        float *conv[3] = { L->gdn_conv_q, L->gdn_conv_k, L->gdn_conv_v };
        const size_t ch[3] = { H * dk, H * dk, H * dv };
        for (int i = 0; i < 3; i++)
            for (size_t c = 0; c < ch[i]; c++)
                for (size_t t = 0; t < K; t++)
                    conv[i][c * K + t] = t == K - 1;
        fill_normal(L->gdn_o, E * H * dv, 1e-3, seed + (guint64)l);
    }
    cl_model_weights_changed(m);
    if (!cl_model_make_trainable(m, error))
        return NULL;
    return g_steal_pointer(&m);
}

ClModel *cl_trainer_make_sve_model(const ClModel *src, const ClTrainerOptions *o, GError **error)
{
    g_return_val_if_fail(src != NULL && o != NULL, NULL);
    if (src->config.sve_variant != CL_SVE_STATELESS) {
        FAIL(MODEL,
             "--stage sve inserts SVE modules into a stateless (stage 1) model; this one "
             "is already '%s' (train it further with --stage pretrain --from)",
             cl_sve_variant_name(src->config.sve_variant));
        return NULL;
    }
    ClModelConfig cfg = src->config;
    cfg.sve_variant = o->variant_set ? o->variant : CL_SVE_CROSS_FFN;
    apply_sve_switches(&cfg, o);
    guint64 seed = o->seed ^ G_GUINT64_CONSTANT(0x5354414745325356); /* "STAGE2SV" */
    /* every stage-1 tensor by name (and its tokenizer); the new ones are the SVE modules' */
    g_autoptr(ClModel) m = cl_model_reshaped(src, &cfg, seed, ".sve.", error);
    if (!m)
        return NULL;
    /* §3.7 from the copied blocks: clone Q/K/V and W1 (and norms), W_O / W_2 at the std */
    cl_model_weights_insert_sve(m, seed);
    if (o->no_clone)
        sve_uncloned_init(m, seed ^ G_GUINT64_CONSTANT(0x4e4f434c4f4e45)); /* "NOCLONE" */
    if (!cl_model_make_trainable(m, error))
        return NULL;
    return g_steal_pointer(&m);
}

/* A model file or a checkpoint (its model; the optimiser is not carried over). */
static ClModel *load_model_or_checkpoint(const char *path, GError **error)
{
    ClModel *m = cl_checkpoint_load_model(path, error);
    if (!m)
        g_prefix_error(error, "--from %s: ", path);
    return m;
}

/* The random init of o->config with the options' variant, CASA, VIST2, PVM and hybrid. */
static ClModel *config_model(const ClTrainerOptions *o, GError **error)
{
    ClModelConfig cfg = *o->config;
    cfg.sve_variant = o->variant_set ? o->variant : CL_SVE_STATELESS;
    if (cfg.sve_variant != CL_SVE_STATELESS)
        apply_sve_switches(&cfg, o);
    if (o->casa != CL_CASA_OFF)
        cfg.casa = o->casa;
    if (o->casa_replace > 0)
        cfg.casa_replace = o->casa_replace;
    if (o->casa_gist)
        cfg.casa_gist = TRUE;
    if (o->casa_tv)
        cfg.casa_tv = TRUE;
    if (o->change_marker)
        cfg.change_marker = TRUE;
    if (o->vist_chunk != 0)
        cl_config_set_vist(&cfg, MAX(o->vist_chunk, 0));
    if (o->pvm_every > 0 &&
        !cl_config_set_pvm(&cfg, o->pvm_every, o->pvm_rank > 0 ? o->pvm_rank : 32)) {
        FAIL(OPTIONS, "--pvm-every %d puts PVM in more than %d layers", o->pvm_every,
             CL_CONFIG_MAX_PVM_LAYERS);
        return NULL;
    }
    if (o->hybrid_every > 0)
        cl_config_set_hybrid(&cfg, o->hybrid_every);
    ClModel *m = cl_model_new_random(&cfg, o->seed, error);
    if (m && !cl_model_make_trainable(m, error))
        g_clear_pointer(&m, cl_model_free);
    return m;
}

/* *src replaced by `with`, the stage's surgery on it; FALSE (with NULL: its error) keeps *src
 * for its owner to free. */
static gboolean replace_model(ClModel **src, ClModel *with)
{
    if (!with)
        return FALSE;
    cl_model_free(*src);
    *src = with;
    return TRUE;
}

/* The model the run starts from: see trainer-private.h. */
ClModel *cl_trainer_initial_model(const ClTrainerOptions *o, GError **error)
{
    if (o->config)
        return config_model(o, error);
    g_autoptr(ClModel) src = load_model_or_checkpoint(o->from, error);
    if (!src)
        return NULL;
    if (src->config.ood > 0) { /* image statistics are fitted after training, not trained */
        ClModelConfig cfg = src->config;
        cfg.ood = 0, cfg.ood_head = FALSE, cfg.ood_min_colour = 0;
        if (!replace_model(&src, cl_model_reshaped(src, &cfg, o->seed, "ood.", error)))
            return NULL;
    }
    if (o->change_marker && !src->config.change_marker) {
        if (!src->config.change_head) {
            FAIL(MODEL, "--change-marker: --from %s has no change head (config change_head)",
                 o->from);
            return NULL;
        }
        ClModelConfig cfg = src->config;
        cfg.change_marker = TRUE;
        if (!replace_model(&src, cl_model_reshaped(src, &cfg, o->seed, "merger.change", error)))
            return NULL;
        if (!cl_model_make_trainable(src, error))
            return NULL;
    }
    if (o->casa != CL_CASA_OFF && src->config.casa != o->casa) {
        if (src->config.casa != CL_CASA_OFF) {
            FAIL(MODEL, "--from %s is a CASA '%s' model, not '%s'", o->from,
                 cl_casa_variant_name(src->config.casa), cl_casa_variant_name(o->casa));
            return NULL;
        }
        if (!replace_model(&src, insert_casa(src, o, error)))
            return NULL;
    }
    if (o->pvm_every > 0) {
        if (src->config.pvm_n_layers > 0) {
            FAIL(MODEL,
                 "--from %s already has PVM (layers from %d): leave out --pvm-every to "
                 "train it further",
                 o->from, src->config.pvm_layers[0]);
            return NULL;
        }
        if (!replace_model(&src, insert_pvm(src, o, error)))
            return NULL;
    }
    if (o->vist_chunk != 0) { /* a config switch: the weights serve as they are */
        ClModelConfig cfg = src->config;
        cl_config_set_vist(&cfg, MAX(o->vist_chunk, 0));
        if (!cl_model_config_validate(&cfg, error)) {
            g_prefix_error(error, "--vist: ");
            return NULL;
        }
        src->config = cfg;
    }
    if (o->hybrid_every > 0) {
        if (src->config.hybrid_every > 0) {
            FAIL(MODEL,
                 "--from %s is already a hybrid (attention every %d layers): leave out "
                 "--hybrid to train it further",
                 o->from, src->config.hybrid_every);
            return NULL;
        }
        if (o->hybrid_every > src->config.dec_depth) {
            FAIL(OPTIONS, "--hybrid %d: the decoder has %d layers", o->hybrid_every,
                 src->config.dec_depth);
            return NULL;
        }
        if (!replace_model(&src, insert_hybrid(src, o, error)))
            return NULL;
    }
    if (o->stage == CL_TRAINER_STAGE_SVE)
        return cl_trainer_make_sve_model(src, o, error);
    if (o->variant_set && o->variant != src->config.sve_variant) {
        FAIL(MODEL, "--from %s is a '%s' model, not '%s' (insert modules with --stage sve)",
             o->from, cl_sve_variant_name(src->config.sve_variant),
             cl_sve_variant_name(o->variant));
        return NULL;
    }
    return g_steal_pointer(&src);
}

/* Zero gradients in the frozen ranges then leave those tensors exactly as they are (AdamW's
 * moments stay 0, and they get no weight decay). */
GArray *cl_trainer_freeze_others(const ClModel *model, ClAdamW *opt, const char *parts,
                                 GError **error)
{
    g_auto(GStrv) want = g_strsplit(parts, ",", -1);
    g_autofree size_t *off = NULL;
    g_autoptr(GPtrArray) specs = cl_param_specs(&model->config, &off);
    g_autoptr(GArray) frozen = g_array_new(FALSE, FALSE, sizeof(ClOptimSpan));
    guint matched = 0;
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        gboolean train = FALSE;
        for (int k = 0; want[k]; k++)
            train |= *want[k] && strstr(s->name, want[k]) != NULL;
        matched += train;
        if (train)
            continue;
        ClOptimSpan f = { off[i], off[i + 1], FALSE };
        g_array_append_val(frozen, f);
        if (i < opt->n_spans)
            opt->spans[i].decay = FALSE;
    }
    if (!matched) {
        FAIL(OPTIONS, "--train-only %s matches no tensor of this model", parts);
        return NULL;
    }
    return g_steal_pointer(&frozen);
}
