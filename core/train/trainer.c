/* trainer.c - the training loop (trainer.h): the starting model of each stage, the data
 * source, data-parallel gradient accumulation, AdamW steps, checkpoints that resume exactly,
 * the log. */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "nn/backend.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "jsonnum.h"
#include "train/optim.h"
#include "train/params.h"
#include "model/safetensors.h"
#include "synth/synth.h"
#include "train/synthdata.h"
#include "train/trainer.h"

#include <malloc.h>
#include "train/trainlog.h"
#include "train/trainmodel.h"

/* Steps in a row whose gradient may be non-finite before the run is declared diverged. */
#define MAX_NONFINITE_IN_A_ROW 10

G_DEFINE_QUARK(cl-trainer-error-quark, cl_trainer_error)

#define FAIL(code, ...) g_set_error(error, CL_TRAINER_ERROR, CL_TRAINER_ERROR_##code, __VA_ARGS__)

/* The standard init of a weight matrix and the paper's "zero init" alternative's std. */
#define STANDARD_INIT_STD 0.02

const char *cl_trainer_stage_name(ClTrainerStage s)
{
    return s == CL_TRAINER_STAGE_SVE ? "sve" : "pretrain";
}

gboolean cl_trainer_stage_from_name(const char *name, ClTrainerStage *out)
{
    if (g_strcmp0(name, "pretrain") == 0)
        *out = CL_TRAINER_STAGE_PRETRAIN;
    else if (g_strcmp0(name, "sve") == 0)
        *out = CL_TRAINER_STAGE_SVE;
    else
        return FALSE;
    return TRUE;
}

void cl_trainer_options_init(ClTrainerOptions *o)
{
    memset(o, 0, sizeof(*o));
    o->variant = CL_SVE_CROSS_FFN;
    o->first = CL_SVE_FIRST_OWN;
    o->batch = 8;
    o->lr = 5e-4;
    o->min_lr = -1;
    o->warmup = -1;
    o->weight_decay = 0.01;
    o->clip = 1.0;
    o->checkpoint_every = 500;
    o->keep_checkpoints = 5;
    o->log_every = 1;
    o->aux_weight_objects = 1.0;
    o->aux_weight_changed = 1.0;
}

void cl_trainer_result_clear(ClTrainerResult *r)
{
    g_clear_pointer(&r->model_path, g_free);
    g_clear_pointer(&r->checkpoint_path, g_free);
}

/* --task "shapes,dots@2" -> {"shapes", "dots@2"}, every name a known task: *out the entries as
 * given (a mix's per-task losses keep "dots@2" apart), *images_out (may be NULL) each entry's
 * image count (K for dots@K, else 0: the task's own or --images). */
static gboolean parse_tasks(const char *spec, char ***out, int **images_out, GError **error)
{
    g_auto(GStrv) parts = g_strsplit(spec, ",", -1);
    g_autoptr(GPtrArray) tasks = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GArray) counts = g_array_new(FALSE, FALSE, sizeof(int));
    const char *const *known = cl_synth_tasks();
    for (char **p = parts; *p; p++) {
        char *t = g_strstrip(*p);
        if (!*t)
            continue;
        int images = 0;
        char *at = strchr(t, '@');
        if (at) {
            /* dots@K: the dots task with K images per sample, beside the mix's other entries */
            char *end = NULL;
            gint64 k = g_ascii_strtoll(at + 1, &end, 10);
            if (at - t != 4 || strncmp(t, "dots", 4) != 0 || !g_ascii_isdigit(at[1]) || *end ||
                k < 2 || k > 5) {
                FAIL(OPTIONS, "'%s': only the dots task takes @K, with K from 2 to 5 (dots@2)", t);
                return FALSE;
            }
            images = (int)k;
        }
        if (!images && !g_strv_contains(known, t)) {
            g_autofree char *list = g_strjoinv(", ", (char **)known);
            FAIL(OPTIONS, "unknown task '%s' (tasks: %s; dots@K for K images)", t, list);
            return FALSE;
        }
        g_ptr_array_add(tasks, g_strdup(t));
        g_array_append_val(counts, images);
    }
    if (tasks->len == 0) {
        FAIL(OPTIONS, "--task names no task");
        return FALSE;
    }
    g_ptr_array_add(tasks, NULL);
    *out = (char **)g_ptr_array_steal(tasks, NULL);
    if (images_out)
        *images_out = (int *)(void *)g_array_free(g_steal_pointer(&counts), FALSE);
    return TRUE;
}

static gboolean options_check(const ClTrainerOptions *o, GError **error)
{
    if (!o->out_dir || !*o->out_dir) {
        FAIL(OPTIONS, "no output folder (--out DIR)");
        return FALSE;
    }
    if (!o->config == !o->from) {
        FAIL(OPTIONS, o->config ? "give either a config (--preset / --config) or --from, not both"
                                : "no starting model: give --preset, --config or --from");
        return FALSE;
    }
    if (o->stage == CL_TRAINER_STAGE_SVE && !o->from) {
        FAIL(OPTIONS, "--stage sve starts from a stage-1 model: give --from MODEL_OR_CHECKPOINT");
        return FALSE;
    }
    if (!o->task == !o->data) {
        FAIL(OPTIONS, o->task ? "give either --task or --data, not both"
                              : "no training data: give --task T[,T…] or --data FILE.jsonl");
        return FALSE;
    }
    if (o->task) {
        g_auto(GStrv) tasks = NULL;
        if (!parse_tasks(o->task, &tasks, NULL, error))
            return FALSE;
    }
    if (o->steps < 0 || (o->steps == 0 && !(o->data && o->epochs > 0))) {
        FAIL(OPTIONS, o->data ? "--steps N (N > 0) or --epochs E is required"
                              : "--steps N (N > 0) is required");
        return FALSE;
    }
    if (o->epochs < 0 || !isfinite(o->epochs) || (o->epochs > 0 && o->task)) {
        FAIL(OPTIONS, "--epochs needs --data and a positive value");
        return FALSE;
    }
    if (o->batch < 1 || o->batch > 65536) {
        FAIL(OPTIONS, "--batch must be 1 to 65536, not %d", o->batch);
        return FALSE;
    }
    if (!(o->lr > 0) || !isfinite(o->lr) || (o->min_lr >= 0 && o->min_lr > o->lr) ||
        !isfinite(o->min_lr)) {
        FAIL(OPTIONS, "--lr must be positive and --min-lr between 0 and --lr");
        return FALSE;
    }
    if (!(o->clip >= 0) || !isfinite(o->clip) || !(o->weight_decay >= 0) ||
        !isfinite(o->weight_decay)) {
        FAIL(OPTIONS, "--clip and --weight-decay must be finite and >= 0");
        return FALSE;
    }
    if (!(o->sve_init_std >= 0) || !isfinite(o->sve_init_std)) {
        FAIL(OPTIONS, "--sve-init-std must be finite and >= 0");
        return FALSE;
    }
    if (!(o->aux_weight_objects >= 0) || !isfinite(o->aux_weight_objects) ||
        !(o->aux_weight_changed >= 0) || !isfinite(o->aux_weight_changed)) {
        FAIL(OPTIONS, "--aux-objects and --aux-changed must be finite and >= 0");
        return FALSE;
    }
    if (o->dot_scale != 0 && !(o->dot_scale >= 1 && o->dot_scale <= 4)) {
        FAIL(OPTIONS, "--dot-scale must be 1 to 4");
        return FALSE;
    }
    if (o->dot_images != 0 && (o->dot_images < 2 || o->dot_images > 5)) {
        FAIL(OPTIONS, "--images must be 2 to 5");
        return FALSE;
    }
    if (o->workers < 0 || o->workers > 2) {
        FAIL(OPTIONS, "--workers must be 1 or 2 (0: automatic)");
        return FALSE;
    }
    if (o->checkpoint_every < 0 || o->log_every < 1) {
        FAIL(OPTIONS, "--checkpoint-every must be >= 0 and --log-every >= 1");
        return FALSE;
    }
    ClDtype dt;
    if (o->dtype && !cl_dtype_from_name(o->dtype, &dt)) {
        FAIL(OPTIONS, "unknown --dtype '%s' (f32, f16 or bf16)", o->dtype);
        return FALSE;
    }
    return TRUE;
}

/* ---- the starting models -------------------------------------------------------------------- */

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

/* Every tensor of dst that src has by name gets src's values; the others (their names hold
 * `new_part`) keep their init. The shapes of shared names agree (the same config otherwise). */
static void copy_by_name(ClModel *dst, const ClModel *src, const char *new_part)
{
    g_autoptr(GPtrArray) sspecs =
        cl_model_weight_specs(&src->config, (ClModelWeights *)&src->w);
    g_autoptr(GHashTable) by_name = g_hash_table_new(g_str_hash, g_str_equal);
    for (guint i = 0; i < sspecs->len; i++) {
        ClWeightSpec *s = g_ptr_array_index(sspecs, i);
        g_hash_table_insert(by_name, s->name, s);
    }
    g_autoptr(GPtrArray) dspecs = cl_model_weight_specs(&dst->config, &dst->w);
    for (guint i = 0; i < dspecs->len; i++) {
        const ClWeightSpec *d = g_ptr_array_index(dspecs, i);
        const ClWeightSpec *s = g_hash_table_lookup(by_name, d->name);
        if (!s) {
            g_assert(strstr(d->name, new_part) != NULL);
            continue;
        }
        g_assert(cl_weight_spec_numel(s) == cl_weight_spec_numel(d));
        memcpy(*d->slot, *s->slot, (size_t)cl_weight_spec_numel(d) * sizeof(float));
    }
    cl_model_weights_changed(dst);
}

/* A random model of cfg (seeded) with src's tokenizer and every tensor of src by name; the new
 * ones (their names hold new_part) keep their init. */
static ClModel *reshaped(const ClModel *src, const ClModelConfig *cfg, guint64 seed,
                         const char *new_part, GError **error)
{
    g_autoptr(ClModel) m = cl_model_new_random(cfg, seed, error);
    if (!m)
        return NULL;
    g_autofree char *tok_json = cl_tokenizer_to_json(src->tokenizer);
    ClTokenizer *tok = cl_tokenizer_from_json(tok_json, error);
    if (!tok)
        return NULL;
    cl_tokenizer_free(m->tokenizer);
    m->tokenizer = tok;
    copy_by_name(m, src, new_part);
    return g_steal_pointer(&m);
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
    g_autoptr(ClModel) m = reshaped(src, &cfg, o->seed, ".casa.", error);
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
    g_autoptr(ClModel) m = reshaped(src, &cfg, seed, ".pvm.", error);
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
    g_autoptr(ClModel) m = reshaped(src, &cfg, seed, ".gdn.", error);
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

ClModel *cl_trainer_make_sve_model(const ClModel *src, const ClTrainerOptions *o,
                                   GError **error)
{
    g_return_val_if_fail(src != NULL && o != NULL, NULL);
    if (src->config.sve_variant != CL_SVE_STATELESS) {
        FAIL(MODEL, "--stage sve inserts SVE modules into a stateless (stage 1) model; this one "
             "is already '%s' (train it further with --stage pretrain --from)",
             cl_sve_variant_name(src->config.sve_variant));
        return NULL;
    }
    ClModelConfig cfg = src->config;
    cfg.sve_variant = o->variant_set ? o->variant : CL_SVE_CROSS_FFN;
    apply_sve_switches(&cfg, o);
    guint64 seed = o->seed ^ G_GUINT64_CONSTANT(0x5354414745325356); /* "STAGE2SV" */
    /* every stage-1 tensor by name (and its tokenizer); the new ones are the SVE modules' */
    g_autoptr(ClModel) m = reshaped(src, &cfg, seed, ".sve.", error);
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

/* The model the run starts from (before a resume replaces its parameters). */
static ClModel *initial_model(const ClTrainerOptions *o, GError **error)
{
    if (o->config) {
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
    g_autoptr(ClModel) src = load_model_or_checkpoint(o->from, error);
    if (!src)
        return NULL;
    if (o->casa != CL_CASA_OFF && src->config.casa != o->casa) {
        if (src->config.casa != CL_CASA_OFF) {
            FAIL(MODEL, "--from %s is a CASA '%s' model, not '%s'", o->from,
                 cl_casa_variant_name(src->config.casa), cl_casa_variant_name(o->casa));
            return NULL;
        }
        ClModel *with = insert_casa(src, o, error);
        if (!with)
            return NULL;
        cl_model_free(g_steal_pointer(&src));
        src = with;
    }
    if (o->pvm_every > 0) {
        if (src->config.pvm_n_layers > 0) {
            FAIL(MODEL, "--from %s already has PVM (layers from %d): leave out --pvm-every to "
                 "train it further",
                 o->from, src->config.pvm_layers[0]);
            return NULL;
        }
        ClModel *with = insert_pvm(src, o, error);
        if (!with)
            return NULL;
        cl_model_free(g_steal_pointer(&src));
        src = with;
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
            FAIL(MODEL, "--from %s is already a hybrid (attention every %d layers): leave out "
                 "--hybrid to train it further", o->from, src->config.hybrid_every);
            return NULL;
        }
        if (o->hybrid_every > src->config.dec_depth) {
            FAIL(OPTIONS, "--hybrid %d: the decoder has %d layers", o->hybrid_every,
                 src->config.dec_depth);
            return NULL;
        }
        ClModel *with = insert_hybrid(src, o, error);
        if (!with)
            return NULL;
        cl_model_free(g_steal_pointer(&src));
        src = with;
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

/* ---- the options a checkpoint records ------------------------------------------------------- */

/* The options that shape the loss curve (resolved: steps, warmup, min_lr), as JSON. */
static char *options_to_json(const ClTrainerOptions *o)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
#define S(k, v) (json_builder_set_member_name(b, k), json_builder_add_string_value(b, v))
#define INT(k, v) (json_builder_set_member_name(b, k), json_builder_add_int_value(b, v))
#define D(k, v)                                                                                    \
    (json_builder_set_member_name(b, k), json_builder_add_double_value(b, cl_json_double(v)))
#define BOOL(k, v) (json_builder_set_member_name(b, k), json_builder_add_boolean_value(b, v))
    S("stage", cl_trainer_stage_name(o->stage));
    S("from", o->from ? o->from : "");
    S("variant", o->variant_set ? cl_sve_variant_name(o->variant) : "");
    BOOL("no_clone", o->no_clone);
    BOOL("no_zero_init", o->no_zero_init);
    D("sve_init_std", o->sve_init_std);
    S("first", o->first_set ? cl_sve_first_name(o->first) : "");
    BOOL("no_cross_pos", o->no_cross_pos);
    BOOL("no_stop_grad", o->no_stop_grad);
    S("task", o->task ? o->task : "");
    S("data", o->data ? o->data : "");
    BOOL("all_turns", o->all_turns);
    INT("steps", o->steps);
    INT("batch", o->batch);
    D("lr", o->lr);
    D("min_lr", o->min_lr);
    INT("warmup", o->warmup);
    D("weight_decay", o->weight_decay);
    D("clip", o->clip);
    D("aux_weight_objects", o->aux_weight_objects);
    D("aux_weight_changed", o->aux_weight_changed);
    /* only when set, so that the checkpoints made before them still resume */
    if (o->min_objects || o->max_objects) {
        INT("min_objects", o->min_objects);
        INT("max_objects", o->max_objects);
    }
    /* only when not the default, so that the checkpoints made before it still resume */
    if (o->dot_scale > 0 && o->dot_scale != 1)
        D("dot_scale", o->dot_scale);
    /* only when set, so that the checkpoints made before it still resume */
    if (o->dot_images)
        INT("dot_images", o->dot_images);
    /* only when on, so that the checkpoints made before it still resume */
    if (o->aux_on_visual)
        BOOL("aux_on_visual", TRUE);
    if (o->casa != CL_CASA_OFF)
        S("casa", cl_casa_variant_name(o->casa));
    if (o->casa_replace > 0)
        INT("casa_replace", o->casa_replace);
    if (o->casa_gist)
        BOOL("casa_gist", TRUE);
    if (o->casa_tv)
        BOOL("casa_tv", TRUE);
    if (o->vist_chunk != 0)
        INT("vist_chunk", o->vist_chunk);
    if (o->train_only && *o->train_only)
        S("train_only", o->train_only);
    if (o->hybrid_every > 0)
        INT("hybrid_every", o->hybrid_every);
    if (o->pvm_every > 0) {
        INT("pvm_every", o->pvm_every);
        INT("pvm_rank", o->pvm_rank > 0 ? o->pvm_rank : 32);
    }
    /* a string: JSON integers are signed 64-bit */
    g_autofree char *seed = g_strdup_printf("%" G_GUINT64_FORMAT, o->seed);
    S("seed", seed);
#undef S
#undef INT
#undef D
#undef BOOL
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return json_to_string(root, FALSE);
}

/* FALSE + _RESUME naming the first option the checkpoint was trained with differently. */
static gboolean options_match(const char *saved, const char *now, GError **error)
{
    g_autoptr(JsonNode) a = json_from_string(saved, NULL);
    g_autoptr(JsonNode) b = json_from_string(now, NULL);
    if (!a || !b || !JSON_NODE_HOLDS_OBJECT(a)) {
        FAIL(RESUME, "the checkpoint has no trainer options (not written by `train`)");
        return FALSE;
    }
    JsonObject *oa = json_node_get_object(a), *ob = json_node_get_object(b);
    g_autoptr(GList) keys = json_object_get_members(ob);
    for (GList *k = keys; k; k = k->next) {
        JsonNode *va = json_object_get_member(oa, k->data);
        JsonNode *vb = json_object_get_member(ob, k->data);
        if (va && json_node_equal(va, vb))
            continue;
        g_autofree char *sa = va ? json_to_string(va, FALSE) : g_strdup("(absent)");
        g_autofree char *sb = json_to_string(vb, FALSE);
        FAIL(RESUME, "the checkpoint was trained with %s %s, this run asks for %s (resume with "
             "the options of the interrupted run)", (const char *)k->data, sa, sb);
        return FALSE;
    }
    return TRUE;
}

/* ---- the data source ------------------------------------------------------------------------ */

/* Which sample a batch slot takes: a synthetic (task, stream seed) or a data-set index. */
typedef struct {
    guint64 index; /* the sample's number in the stream (the cursor before it) */
    int task;      /* synthetic: index into tasks */
    guint64 seed;  /* synthetic: cl_synth_stream_seed(train seed, index) */
    guint item;    /* data file: sample index in the file */
} SampleRef;

typedef struct {
    /* synthetic */
    char **tasks;
    int *task_images; /* (n_tasks) dots@K's K, else 0 */
    int n_tasks;
    ClSynthOptions synth;
    /* data file */
    ClDataset *ds;
    guint *order;
    guint64 order_epoch; /* epoch whose permutation `order` holds; G_MAXUINT64: none yet */
    guint64 seed;
} Source;

static void source_clear(Source *s)
{
    g_strfreev(s->tasks);
    g_free(s->task_images);
    g_clear_pointer(&s->ds, cl_dataset_free);
    g_free(s->order);
    memset(s, 0, sizeof(*s));
}

static guint64 splitmix64(guint64 *state)
{
    guint64 z = (*state += G_GUINT64_CONSTANT(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* The next sample of the stream: advances *cursor (and *rng for a task mix). */
static void source_next(Source *s, guint64 *cursor, guint64 *rng, SampleRef *ref)
{
    ref->index = (*cursor)++;
    if (s->ds) {
        guint n = cl_dataset_count(s->ds);
        guint64 epoch = ref->index / n;
        if (epoch != s->order_epoch) {
            cl_dataset_epoch_order(s->order, n, s->seed, epoch);
            s->order_epoch = epoch;
        }
        ref->item = s->order[ref->index % n];
        return;
    }
    /* the task of each sample is drawn (always, so a mix of one behaves like any other) */
    guint64 r = splitmix64(rng) >> 11;
    ref->task = MIN((int)((double)r * 0x1p-53 * s->n_tasks), s->n_tasks - 1);
    ref->seed = cl_synth_stream_seed(s->seed, ref->index);
}

static ClTrainSample *source_get(Source *s, const ClModel *model, const SampleRef *ref,
                                 gboolean all_turns, GError **error)
{
    if (s->ds)
        return cl_dataset_get(s->ds, ref->item, error);
    g_autoptr(GError) err = NULL;
    const char *task = s->tasks[ref->task];
    ClSynthOptions so = s->synth;
    /* --images is the dots task's; the rest of a mix draws its own; dots@K has its own K */
    if (s->task_images[ref->task]) {
        so.n_images = s->task_images[ref->task];
        task = "dots";
    } else if (strcmp(task, "dots") != 0) {
        so.n_images = 0;
    }
    g_autoptr(ClSynthSample) syn = cl_synth_generate(task, ref->seed, &so, &err);
    ClTrainSample *ts = syn ? cl_train_sample_from_synth(model, syn, all_turns, &err) : NULL;
    if (!ts)
        g_set_error(error, CL_TRAINER_ERROR, CL_TRAINER_ERROR_SAMPLE,
                    "%s sample %" G_GUINT64_FORMAT " (seed %" G_GUINT64_FORMAT "): %s", task,
                    ref->index, ref->seed, err->message);
    return ts;
}

/* Opens the task mix or the data file; *count: samples in the file (synthetic: 0). */
static gboolean source_open(Source *s, const ClTrainerOptions *o, const ClModel *model,
                            GError **error)
{
    memset(s, 0, sizeof(*s));
    s->seed = o->seed;
    s->order_epoch = G_MAXUINT64;
    if (o->data) {
        ClDatasetOptions dopt;
        cl_dataset_options_init(&dopt);
        dopt.all_turns = o->all_turns;
        dopt.image_cache = 512;
        s->ds = cl_dataset_open(o->data, model, &dopt, error);
        if (!s->ds)
            return FALSE;
        s->order = g_new(guint, cl_dataset_count(s->ds));
        return TRUE;
    }
    if (!parse_tasks(o->task, &s->tasks, &s->task_images, error))
        return FALSE;
    s->n_tasks = (int)g_strv_length(s->tasks);
    cl_synth_options_for_model(&s->synth, model);
    s->synth.min_objects = o->min_objects;
    s->synth.max_objects = o->max_objects;
    if (o->dot_scale > 0)
        s->synth.dot_scale = o->dot_scale;
    s->synth.n_images = o->dot_images;
    return TRUE;
}

/* ---- data-parallel workers ------------------------------------------------------------------ */

typedef struct {
    ClBackend *be;
    ClParamBuf *grads;
    ClTrainAuxHeads *aux_grads; /* NULL when the auxiliary losses are off */
} Worker;

/* One step's work, shared by the workers, in two phases: worker w makes samples w,
 * w + n_workers, ... (generation and loading), then each works through its share of the batch.
 * The shares balance the samples' estimated cost (longest first onto the lighter worker; ties
 * by index), so a step waits less for its slower worker; they depend only on the samples, and
 * each worker accumulates its share in index order, so a step's gradient is the same on every
 * run. */
typedef struct {
    const ClModel *model;
    Source *src;
    const SampleRef *refs;
    int batch, n_workers;
    const ClTrainGradOptions *gopt;
    gboolean all_turns;
    GCancellable *cancellable;
    double *loss;     /* (batch) */
    double *aux;      /* (batch, 2) objects, changed (NaN: not run) */
    gint64 *tokens;   /* (batch) decoder positions */
    GError **errors;  /* (n_workers) first error of each */
    ClTrainSample **samples; /* (batch) phase 1's output */
    int *share;       /* (batch) phase 2: the samples' worker */
    gboolean compute; /* the phase: FALSE makes samples, TRUE trains on them */
} StepJob;

typedef struct {
    StepJob *job;
    Worker *worker;
    int w;
} WorkerCall;

static void make_samples(WorkerCall *c)
{
    StepJob *j = c->job;
    cl_param_buf_zero(c->worker->grads);
    if (c->worker->aux_grads)
        cl_train_aux_heads_zero(c->worker->aux_grads);
    for (int k = c->w; k < j->batch; k += j->n_workers) {
        if (g_cancellable_is_cancelled(j->cancellable))
            return;
        j->samples[k] = source_get(j->src, j->model, &j->refs[k], j->all_turns, &j->errors[c->w]);
        if (!j->samples[k])
            return;
    }
}

static void train_share(WorkerCall *c)
{
    StepJob *j = c->job;
    for (int k = 0; k < j->batch; k++) {
        if (j->share[k] != c->w)
            continue;
        if (g_cancellable_is_cancelled(j->cancellable))
            return;
        const ClTrainSample *s = j->samples[k];
        ClTrainStepStats st;
        GError *err = NULL;
        if (!cl_train_forward_backward_aux(c->worker->be, j->model, s, j->gopt,
                                           c->worker->grads, c->worker->aux_grads, &st, &err)) {
            g_set_error(&j->errors[c->w], CL_TRAINER_ERROR, CL_TRAINER_ERROR_SAMPLE,
                        "sample %s: %s", s->id ? s->id : "?", err->message);
            g_error_free(err);
            return;
        }
        j->loss[k] = st.loss;
        j->aux[2 * k] = st.aux_objects_loss;
        j->aux[2 * k + 1] = st.aux_changed_loss;
        j->tokens[k] = st.n_positions;
    }
}

static gpointer worker_run(gpointer data)
{
    WorkerCall *c = data;
    if (c->job->compute)
        train_share(c);
    else
        make_samples(c);
    return NULL;
}

/* A sample's training cost in multiply-adds, roughly: the decoder's products and attention
 * over its positions, the encoder's over its images (forward and backward scale alike). */
static double sample_cost(const ClModelConfig *cfg, const ClTrainSample *s)
{
    const double E = cfg->dec_dim, F = cfg->dec_mlp, hd = E / MAX(cfg->dec_heads, 1);
    const double Q = cfg->dec_heads * hd, KV = cfg->dec_kv_heads * hd, n = s->n_ids;
    const double D = cfg->enc_dim, Fe = cfg->enc_mlp, P = cl_config_n_patches(cfg);
    const double dec = cfg->dec_depth * (n * (E * (Q + 2 * KV) + Q * E + 3 * E * F) + n * n * Q);
    const double enc = cfg->enc_depth * (P * (4 * D * D + 2 * D * Fe) + P * P * D) +
                       P * (double)cfg->channels * cfg->patch_size * cfg->patch_size * D;
    return dec + (double)s->n_images * enc;
}

static void balance_shares(StepJob *j)
{
    const int B = j->batch;
    g_autofree int *order = g_new(int, (size_t)MAX(B, 1));
    g_autofree double *cost = g_new(double, (size_t)MAX(B, 1));
    for (int k = 0; k < B; k++) {
        order[k] = k;
        cost[k] = sample_cost(&j->model->config, j->samples[k]);
    }
    /* longest first (insertion sort: a batch is small), ties by index */
    for (int a = 1; a < B; a++) {
        int k = order[a], b = a;
        while (b > 0 && cost[order[b - 1]] < cost[k])
            order[b] = order[b - 1], b--;
        order[b] = k;
    }
    double load[2] = { 0, 0 };
    for (int a = 0; a < B; a++) {
        int w = j->n_workers > 1 && load[1] < load[0] ? 1 : 0;
        j->share[order[a]] = w;
        load[w] += cost[order[a]];
    }
}

/* Runs one phase over the workers (worker 0 on this thread). */
static void run_phase(StepJob *job, Worker *workers, gboolean compute)
{
    WorkerCall calls[2];
    GThread *threads[2] = { NULL, NULL };
    job->compute = compute;
    for (int w = 0; w < job->n_workers; w++)
        calls[w] = (WorkerCall){ job, &workers[w], w };
    for (int w = 1; w < job->n_workers; w++)
        threads[w] = g_thread_new("cl-train-worker", worker_run, &calls[w]);
    worker_run(&calls[0]);
    for (int w = 1; w < job->n_workers; w++)
        g_thread_join(threads[w]);
}

/* Runs the batch over the workers. FALSE: an error, or cancelled. */
static gboolean run_step(StepJob *job, Worker *workers, GError **error)
{
    for (int w = 0; w < job->n_workers; w++)
        job->errors[w] = NULL;
    memset(job->samples, 0, sizeof(*job->samples) * (size_t)job->batch);
    run_phase(job, workers, FALSE);
    gboolean made = TRUE;
    for (int k = 0; k < job->batch; k++)
        made = made && job->samples[k];
    if (made) {
        balance_shares(job);
        run_phase(job, workers, TRUE);
    }
    for (int k = 0; k < job->batch; k++)
        g_clear_pointer(&job->samples[k], cl_train_sample_free);
    gboolean ok = TRUE;
    for (int w = 0; w < job->n_workers; w++) {
        if (job->errors[w] && ok) {
            g_propagate_error(error, job->errors[w]);
            ok = FALSE;
        } else {
            g_clear_error(&job->errors[w]);
        }
    }
    if (ok && g_cancellable_set_error_if_cancelled(job->cancellable, error))
        ok = FALSE;
    if (ok && !made) { /* a sample went missing without an error: only a cancel does that */
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_CANCELLED, "cancelled");
        ok = FALSE;
    }
    return ok;
}

/* The batch's update over the workers' threads, each on its half of the parameters: first the
 * workers' gradients summed in worker order and divided by the batch (cl_grad_accumulate, then
 * cl_grad_scale) with the half's sum of squares, then (the global norm known) the clipped
 * AdamW update (cl_optim_step's arithmetic). */
typedef struct {
    float *g0, *params;
    const float *g1; /* NULL: one worker */
    const ClAdamW *opt;
    float inv_batch, gscale;
    double lr, sumsq;
    size_t begin, end;
    gboolean update;
} UpdateCall;

static gpointer update_run(gpointer data)
{
    UpdateCall *u = data;
    if (u->update) {
        cl_adamw_update_range(u->opt, u->params, u->g0, u->lr, u->gscale, u->begin, u->end);
        return NULL;
    }
    float *restrict g0 = u->g0;
    const float *restrict g1 = u->g1;
    for (size_t i = u->begin; i < u->end; i++)
        g0[i] = (g1 ? g0[i] + g1[i] : g0[i]) * u->inv_batch;
    u->sumsq = cl_grad_sumsq(g0, u->begin, u->end);
    return NULL;
}

static void update_phase(UpdateCall *uc, int n, gboolean update)
{
    GThread *t = NULL;
    for (int u = 0; u < n; u++)
        uc[u].update = update;
    if (n > 1)
        t = g_thread_new("cl-train-update", update_run, &uc[1]);
    update_run(&uc[0]);
    if (t)
        g_thread_join(t);
}

static int default_workers(void)
{
    /* measured on 2 cores, tiny preset, shapes, batch 8: 2 workers 5.98 samples/s, 1 worker
     * (backend pool of 2 + multi-threaded OpenBLAS in the backward) 3.96 samples/s: a sample
     * per core beats splitting each sample's products, whose OpenBLAS threads spin between
     * calls (a third of the 1-worker run's CPU time was system time) */
    return g_get_num_processors() >= 2 ? 2 : 1;
}

/* ---- the log -------------------------------------------------------------------------------- */

/* A resumed run's log: keeps the lines up to the checkpoint's step (a run that went on past its
 * last checkpoint logged steps the resumed run does again) and returns the elapsed time they
 * reached. */
static gboolean log_truncate(const char *path, gint64 step, double *elapsed, GError **error)
{
    *elapsed = 0;
    g_autofree char *text = NULL;
    gsize len = 0;
    if (!g_file_test(path, G_FILE_TEST_EXISTS))
        return TRUE;
    if (!g_file_get_contents(path, &text, &len, error))
        return FALSE;
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_autoptr(GString) kept = g_string_new(NULL);
    for (char **l = lines; *l; l++) {
        if (!**l)
            continue;
        g_autoptr(JsonParser) p = json_parser_new();
        if (!json_parser_load_from_data(p, *l, -1, NULL))
            continue; /* a line cut by a crash */
        JsonNode *root = json_parser_get_root(p);
        if (!JSON_NODE_HOLDS_OBJECT(root))
            continue;
        JsonObject *obj = json_node_get_object(root);
        if (json_object_has_member(obj, "step") &&
            json_object_get_int_member(obj, "step") > step)
            continue;
        if (json_object_has_member(obj, "elapsed_s") &&
            JSON_NODE_TYPE(json_object_get_member(obj, "elapsed_s")) == JSON_NODE_VALUE)
            *elapsed = json_object_get_double_member(obj, "elapsed_s");
        g_string_append(kept, *l);
        g_string_append_c(kept, '\n');
    }
    return g_file_set_contents(path, kept->str, (gssize)kept->len, error);
}

static gboolean log_raw(ClTrainLog *log, GError **error, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static gboolean log_raw(ClTrainLog *log, GError **error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *line = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    return cl_trainlog_write_raw(log, line, error);
}

/* ---- checkpoints ---------------------------------------------------------------------------- */

/* The auxiliary heads and their optimiser (both NULL when the losses are off). Their AdamW
 * steps with the model's (a skipped step skips both), so its step count is the model's. */
typedef struct {
    ClTrainAuxHeads *heads;
    ClAdamW *opt;
} Aux;

/* The checkpoint's extra tensors: the four heads, then the heads' moments. */
#define AUX_N_EXTRA 6
static const char *const aux_moment_names[2] = { "aux.adam.m", "aux.adam.v" };

static void aux_extras(const Aux *aux, ClCheckpointExtra *x)
{
    float *at = aux->heads->data;
    for (int i = 0; i < 4; i++) {
        size_t n = cl_train_aux_head_len(aux->heads->dim, i);
        x[i] = (ClCheckpointExtra){ (char *)cl_train_aux_head_names[i], at, n };
        at += n;
    }
    x[4] = (ClCheckpointExtra){ (char *)aux_moment_names[0], aux->opt->m, aux->opt->n };
    x[5] = (ClCheckpointExtra){ (char *)aux_moment_names[1], aux->opt->v, aux->opt->n };
}

/* A resume: the heads and moments back from the checkpoint. */
static gboolean aux_restore(Aux *aux, const ClCheckpoint *ck, GError **error)
{
    ClCheckpointExtra want[AUX_N_EXTRA];
    aux_extras(aux, want);
    for (int i = 0; i < AUX_N_EXTRA; i++) {
        const ClCheckpointExtra *x = cl_checkpoint_state_extra(&ck->state, want[i].name);
        if (!x || x->n != want[i].n) {
            g_set_error(error, CL_TRAINER_ERROR, CL_TRAINER_ERROR_RESUME,
                        "the checkpoint has no auxiliary head tensor '%s' of %zu values",
                        want[i].name, want[i].n);
            return FALSE;
        }
        memcpy(want[i].data, x->data, x->n * sizeof(float));
    }
    aux->opt->step = ck->opt->step;
    return TRUE;
}

/* Steps between the per-task loss records of the log. */
#define TASK_LOG_EVERY 50

/* {"type":"tasks","step":N,"loss":{"shapes":x,...}}: each task's mean caption loss since the
 * last record (null: none drawn). */
static gboolean log_task_losses(ClTrainLog *log, gint64 step, char **tasks, const int *slot,
                                int n_tasks, const double *loss, const int *n, GError **error)
{
    g_autoptr(GString) js = g_string_new(NULL);
    g_string_append_printf(js, "{\"type\":\"tasks\",\"step\":%" G_GINT64_FORMAT ",\"loss\":{",
                           step);
    int written = -1;
    for (int i = 0; i < n_tasks; i++) {
        if (slot[i] <= written)
            continue; /* a repeat of an earlier name */
        written = slot[i];
        char b[G_ASCII_DTOSTR_BUF_SIZE];
        g_autofree char *name = g_strescape(tasks[i], NULL);
        g_string_append_printf(js, "%s\"%s\":%s", i ? "," : "", name,
                               n[slot[i]] ? g_ascii_formatd(b, sizeof b, "%.6g",
                                                            loss[slot[i]] / n[slot[i]])
                                          : "null");
    }
    g_string_append(js, "}}");
    return log_raw(log, error, "%s", js->str);
}

static gboolean save_checkpoint(const char *dir, guint keep, const ClModel *model,
                                const ClAdamW *opt, const Aux *aux, gint64 step, guint64 rng,
                                guint64 cursor, const char *options_json, char **path_out,
                                GError **error)
{
    g_autofree char *path = cl_checkpoint_path(dir, "step", step);
    g_autofree char *cursor_json = g_strdup_printf("{\"next\":%" G_GUINT64_FORMAT "}", cursor);
    guint64 words[1] = { rng };
    ClCheckpointExtra extra[AUX_N_EXTRA];
    ClCheckpointState st = { step, words, 1, cursor_json, (char *)options_json, NULL, 0 };
    if (aux->heads) {
        aux_extras(aux, extra);
        st.extra = extra, st.n_extra = AUX_N_EXTRA;
    }
    if (!cl_checkpoint_save(path, model, opt, &st, error))
        return FALSE;
    if (keep > 0 && !cl_checkpoint_rotate(dir, "step", keep, error))
        return FALSE;
    g_free(*path_out);
    *path_out = g_steal_pointer(&path);
    return TRUE;
}

static gboolean parse_cursor(const char *json, guint64 *cursor, GError **error)
{
    g_autoptr(JsonParser) p = json_parser_new();
    if (json_parser_load_from_data(p, json, -1, NULL) &&
        JSON_NODE_HOLDS_OBJECT(json_parser_get_root(p))) {
        JsonObject *o = json_node_get_object(json_parser_get_root(p));
        if (json_object_has_member(o, "next")) {
            gint64 v = json_object_get_int_member(o, "next");
            if (v >= 0) {
                *cursor = (guint64)v;
                return TRUE;
            }
        }
    }
    g_set_error(error, CL_TRAINER_ERROR, CL_TRAINER_ERROR_RESUME,
                "the checkpoint's data cursor is not the trainer's (%s)", json);
    return FALSE;
}

/* ---- the run -------------------------------------------------------------------------------- */

typedef struct {
    ClModel *model;
    ClAdamW *opt;
    Aux aux;
    Source src;
    Worker workers[2];
    int n_workers;
    ClTrainLog *log;
    char *options_json;
    int blas_threads; /* OpenBLAS's setting before the run (restored), -1: untouched */
    GArray *frozen;   /* ClOptimSpan: the parameter ranges --train-only leaves alone */
} Run;

/* --train-only: the ranges of the tensors whose names hold none of the parts, and no weight
 * decay for them (zero gradients then leave them exactly as they are: AdamW's moments stay 0).
 * FALSE when no tensor matches. */
static gboolean freeze_others(Run *r, const char *parts, GError **error)
{
    g_auto(GStrv) want = g_strsplit(parts, ",", -1);
    g_autofree size_t *off = NULL;
    g_autoptr(GPtrArray) specs = cl_param_specs(&r->model->config, &off);
    r->frozen = g_array_new(FALSE, FALSE, sizeof(ClOptimSpan));
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
        g_array_append_val(r->frozen, f);
        if (i < r->opt->n_spans)
            r->opt->spans[i].decay = FALSE;
    }
    if (!matched) {
        FAIL(OPTIONS, "--train-only %s matches no tensor of this model", parts);
        return FALSE;
    }
    return TRUE;
}

/* The halves of the update (one per worker; split on a 16-float boundary). Returns how many. */
static int update_split(UpdateCall *uc, Run *r, int batch)
{
    const size_t n = r->workers[0].grads->n;
    const int parts = r->n_workers > 1 && n >= 1024 ? 2 : 1;
    const size_t mid = parts > 1 ? (n / 2) & ~(size_t)15 : n;
    for (int u = 0; u < parts; u++)
        uc[u] = (UpdateCall){ .g0 = r->workers[0].grads->data, .params = r->model->arena,
                              .g1 = r->n_workers > 1 ? r->workers[1].grads->data : NULL,
                              .opt = r->opt, .inv_batch = (float)(1.0 / batch), .gscale = 1.0f,
                              .begin = u ? mid : 0, .end = u || parts == 1 ? n : mid };
    return parts;
}

static void run_clear(Run *r)
{
    for (int w = 0; w < 2; w++) {
        g_clear_pointer(&r->workers[w].be, cl_backend_free);
        g_clear_pointer(&r->workers[w].grads, cl_param_buf_free);
        g_clear_pointer(&r->workers[w].aux_grads, cl_train_aux_heads_free);
    }
    g_clear_pointer(&r->aux.heads, cl_train_aux_heads_free);
    g_clear_pointer(&r->aux.opt, cl_adamw_free);
    source_clear(&r->src);
    g_clear_pointer(&r->log, cl_trainlog_free);
    g_clear_pointer(&r->opt, cl_adamw_free);
    if (r->frozen)
        g_array_free(g_steal_pointer(&r->frozen), TRUE);
    g_clear_pointer(&r->model, cl_model_free);
    g_free(r->options_json);
    if (r->blas_threads > 0)
        openblas_set_num_threads(r->blas_threads);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Run, run_clear)

static char *resume_path(const ClTrainerOptions *o, const char *ck_dir, GError **error)
{
    if (o->resume_from)
        return g_strdup(o->resume_from);
    g_autoptr(GError) err = NULL;
    char *p = cl_checkpoint_latest(ck_dir, "step", &err);
    if (!p)
        g_set_error(error, CL_TRAINER_ERROR, CL_TRAINER_ERROR_RESUME,
                    "--resume: no checkpoint in %s%s%s", ck_dir, err ? ": " : "",
                    err ? err->message : "");
    return p;
}

gboolean cl_trainer_run(const ClTrainerOptions *o, ClTrainerProgress cb, gpointer user_data,
                        GCancellable *cancellable, ClTrainerResult *result, GError **error)
{
    g_return_val_if_fail(o != NULL, FALSE);
    ClTrainerResult dummy;
    if (!result)
        result = &dummy;
    memset(result, 0, sizeof(*result));
    if (!options_check(o, error))
        return FALSE;

    g_auto(Run) r = { 0 };
    r.blas_threads = -1;
    r.model = initial_model(o, error);
    if (!r.model)
        return FALSE;

    /* output folders */
    g_autofree char *ck_dir = g_build_filename(o->out_dir, "checkpoints", NULL);
    g_autofree char *log_path = g_build_filename(o->out_dir, "train.jsonl", NULL);
    g_autofree char *model_path = g_build_filename(o->out_dir, "model.safetensors", NULL);
    if (g_mkdir_with_parents(ck_dir, 0755) != 0) {
        int e = errno;
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e), "cannot create %s: %s", ck_dir,
                    g_strerror(e));
        return FALSE;
    }

    /* a resume: the checkpoint must be of the model these options make */
    g_autoptr(ClCheckpoint) ck = NULL;
    g_autofree char *ck_path = NULL;
    if (o->resume || o->resume_from) {
        ck_path = resume_path(o, ck_dir, error);
        if (!ck_path)
            return FALSE;
        ck = cl_checkpoint_load(ck_path, error);
        if (!ck)
            return FALSE;
        if (!cl_checkpoint_check_config(ck, &r.model->config, error)) {
            g_prefix_error(error, "--resume from %s: ", ck_path);
            return FALSE;
        }
        cl_model_free(r.model);
        r.model = g_steal_pointer(&ck->model);
    }
    /* with the final model: the data set keeps it for its tokenizer and sizes */
    if (!source_open(&r.src, o, r.model, error))
        return FALSE;

    /* resolved options */
    ClTrainerOptions ro = *o;
    if (ro.steps <= 0) {
        guint n = cl_dataset_count(r.src.ds);
        ro.steps = (gint64)ceil(ro.epochs * n / ro.batch);
        ro.steps = MAX(ro.steps, 1);
    }
    if (ro.warmup < 0)
        ro.warmup = MIN(ro.steps / 20, 200);
    ro.min_lr = ro.min_lr < 0 ? ro.lr / 10 : ro.min_lr;
    r.n_workers = ro.workers > 0 ? ro.workers : default_workers();
    r.n_workers = MIN(r.n_workers, MAX(ro.batch, 1));
    r.options_json = options_to_json(&ro);

    ClLrSchedule sched = { ro.lr, ro.min_lr, ro.warmup, ro.steps };
    if (!cl_lr_schedule_validate(&sched, error))
        return FALSE;
    ClAdamWOptions aopt;
    cl_adamw_options_init(&aopt);
    aopt.weight_decay = ro.weight_decay;
    if (!cl_adamw_options_validate(&aopt, error))
        return FALSE;

    /* the auxiliary heads: zero-initialised (trainmodel.h), weights decay, biases do not */
    if (ro.aux_weight_objects > 0 || ro.aux_weight_changed > 0) {
        const int D = ro.aux_on_visual ? r.model->config.dec_dim : r.model->config.enc_dim;
        ClOptimSpan spans[4];
        for (size_t i = 0, at = 0; i < 4; i++) {
            const size_t n = cl_train_aux_head_len(D, (int)i);
            spans[i] = (ClOptimSpan){ at, at + n, i % 2 == 0 };
            at += n;
        }
        if (!(r.aux.heads = cl_train_aux_heads_new(D, error)) ||
            !(r.aux.opt = cl_adamw_new(r.aux.heads->n, &aopt, error)) ||
            !cl_adamw_set_spans(r.aux.opt, spans, 4, error))
            return FALSE;
    }

    /* fresh, or the checkpoint's state */
    gint64 step = 0;
    guint64 rng = ro.seed ^ G_GUINT64_CONSTANT(0x5441534b4d4958); /* "TASKMIX" */
    guint64 cursor = 0;
    double start_elapsed = 0;
    if (ck) {
        if (!options_match(ck->state.options_json, r.options_json, error)) {
            g_prefix_error(error, "--resume from %s: ", ck_path);
            return FALSE;
        }
        if (ck->state.n_rng != 1 || !parse_cursor(ck->state.cursor_json, &cursor, error)) {
            g_clear_error(error);
            g_set_error(error, CL_TRAINER_ERROR, CL_TRAINER_ERROR_RESUME,
                        "--resume from %s: the checkpoint was not written by this trainer",
                        ck_path);
            return FALSE;
        }
        step = ck->state.step;
        rng = ck->state.rng[0];
        if (r.aux.heads && !aux_restore(&r.aux, ck, error)) {
            g_prefix_error(error, "--resume from %s: ", ck_path);
            return FALSE;
        }
        r.opt = g_steal_pointer(&ck->opt);
        if (step > ro.steps) {
            g_set_error(error, CL_TRAINER_ERROR, CL_TRAINER_ERROR_RESUME,
                        "--resume from %s: the checkpoint is at step %" G_GINT64_FORMAT
                        ", past --steps %" G_GINT64_FORMAT, ck_path, step, ro.steps);
            return FALSE;
        }
        if (!log_truncate(log_path, step, &start_elapsed, error))
            return FALSE;
        result->checkpoint_path = g_steal_pointer(&ck_path);
    } else {
        r.opt = cl_adamw_new_for_config(&r.model->config, &aopt, error);
        if (!r.opt)
            return FALSE;
    }
    if (ro.train_only && *ro.train_only && !freeze_others(&r, ro.train_only, error))
        return FALSE;

    /* workers: one backend and one gradient buffer each */
    if (r.n_workers > 1) {
        /* each worker's products single-threaded: both cores are busy with samples */
        r.blas_threads = openblas_get_num_threads();
        openblas_set_num_threads(1);
    }
    for (int w = 0; w < r.n_workers; w++) {
        r.workers[w].be = cl_backend_cpu_new(r.n_workers > 1 ? 1 : 0);
        r.workers[w].grads = cl_param_buf_new(&r.model->config, error);
        if (!r.workers[w].grads)
            return FALSE;
        if (r.aux.heads && !(r.workers[w].aux_grads = cl_train_aux_heads_new(r.aux.heads->dim,
                                                                             error)))
            return FALSE;
    }
    g_assert(r.workers[0].grads->n == r.model->n_params);

    ClTrainLogOptions lopt = { 0 };
    lopt.total_steps = ro.steps;
    lopt.start_step = step;
    lopt.start_elapsed_s = start_elapsed;
    lopt.append = step > 0;
    lopt.progress = o->progress;
    lopt.quiet = o->quiet;
    r.log = cl_trainlog_open(log_path, &lopt, error);
    if (!r.log)
        return FALSE;
    if (!log_raw(r.log, error,
                 "{\"type\":\"start\",\"step\":%" G_GINT64_FORMAT ",\"stage\":\"%s\","
                 "\"variant\":\"%s\",\"params\":%zu,\"workers\":%d,\"options\":%s}",
                 step, cl_trainer_stage_name(o->stage),
                 cl_sve_variant_name(r.model->config.sve_variant), r.model->n_params,
                 r.n_workers, r.options_json))
        return FALSE;

    ClTrainGradOptions gopt;
    cl_train_grad_options_init(&gopt);
    gopt.stop_grad = !o->no_stop_grad;
    gopt.aux_objects_weight = ro.aux_weight_objects;
    gopt.aux_changed_weight = ro.aux_weight_changed;
    gopt.aux_on_visual = ro.aux_on_visual;
    gopt.aux_heads = r.aux.heads;
    const int B = ro.batch;
    g_autofree SampleRef *refs = g_new0(SampleRef, B);
    g_autofree double *losses = g_new0(double, B);
    g_autofree double *aux_losses = g_new0(double, 2 * (size_t)B);
    g_autofree gint64 *tokens = g_new0(gint64, B);
    GError *errors[2] = { NULL, NULL };
    g_autofree ClTrainSample **samples = g_new0(ClTrainSample *, B);
    g_autofree int *share = g_new0(int, B);
    StepJob job = { r.model, &r.src, refs, B, r.n_workers, &gopt, o->all_turns, cancellable,
                    losses, aux_losses, tokens, errors, samples, share, FALSE };

    result->start_step = step;
    result->workers = r.n_workers;
    /* each task's mean caption loss over the last TASK_LOG_EVERY steps (synthetic tasks; one
     * slot per distinct name, a task listed twice for weight shares it) */
    const int n_src_tasks = r.src.tasks ? r.src.n_tasks : 0;
    g_autofree int *task_slot = g_new0(int, MAX(n_src_tasks, 1));
    g_autofree double *task_loss = g_new0(double, MAX(n_src_tasks, 1));
    g_autofree int *task_n = g_new0(int, MAX(n_src_tasks, 1));
    int n_slots = 0;
    for (int i = 0; i < n_src_tasks; i++) {
        int j = 0;
        while (j < i && strcmp(r.src.tasks[j], r.src.tasks[i]) != 0)
            j++;
        task_slot[i] = j < i ? task_slot[j] : n_slots++;
    }
    double window_loss = 0, window_aux[2] = { 0, 0 };
    int window_n = 0, window_aux_n[2] = { 0, 0 }, nonfinite = 0;
    result->first_aux_objects_loss = result->first_aux_changed_loss = NAN;
    result->final_aux_objects_loss = result->final_aux_changed_loss = NAN;
    gint64 t0 = g_get_monotonic_time();
    gboolean cancelled = FALSE;
    while (step < ro.steps) {
        guint64 cursor0 = cursor, rng0 = rng;
        for (int k = 0; k < B; k++)
            source_next(&r.src, &cursor, &rng, &refs[k]);
        g_autoptr(GError) err = NULL;
        if (!run_step(&job, r.workers, &err)) {
            if (g_error_matches(err, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
                /* the unfinished step is dropped: the checkpoint takes its samples again */
                cursor = cursor0, rng = rng0;
                cancelled = TRUE;
                break;
            }
            g_propagate_prefixed_error(error, g_steal_pointer(&err),
                                       "step %" G_GINT64_FORMAT ": ", step + 1);
            return FALSE;
        }
        /* the batch's gradient: workers' sums in worker order, then the mean */
        ClParamBuf *g = r.workers[0].grads;
        for (guint f = 0; r.frozen && f < r.frozen->len; f++) { /* --train-only */
            const ClOptimSpan *sp = &g_array_index(r.frozen, ClOptimSpan, f);
            for (int w = 0; w < r.n_workers; w++)
                memset(r.workers[w].grads->data + sp->begin, 0,
                       (sp->end - sp->begin) * sizeof(float));
        }
        UpdateCall uc[2];
        const int n_up = update_split(uc, &r, B);
        update_phase(uc, n_up, FALSE);
        double norm = sqrt(n_up > 1 ? uc[0].sumsq + uc[1].sumsq : uc[0].sumsq);
        ClTrainAuxHeads *ag = r.workers[0].aux_grads;
        for (int w = 1; ag && w < r.n_workers; w++)
            cl_grad_accumulate(ag->data, r.workers[w].aux_grads->data, ag->n);
        if (ag)
            cl_grad_scale(ag->data, ag->n, 1.0 / B);
        double loss = 0, aux[2] = { 0, 0 };
        int aux_n[2] = { 0, 0 };
        gint64 step_tokens = 0;
        for (int k = 0; k < B; k++) {
            loss += losses[k], step_tokens += tokens[k];
            if (n_slots > 1)
                task_loss[task_slot[refs[k].task]] += losses[k], task_n[task_slot[refs[k].task]]++;
            for (int a = 0; a < 2; a++)
                if (isfinite(aux_losses[2 * k + a]))
                    aux[a] += aux_losses[2 * k + a], aux_n[a]++;
        }
        loss /= B;
        for (int a = 0; a < 2; a++) {
            window_aux[a] += aux[a], window_aux_n[a] += aux_n[a];
            aux[a] = aux_n[a] ? aux[a] / aux_n[a] : NAN;
        }

        double lr = cl_lr_schedule_at(&sched, step);
        /* the heads step with the model (clipped by their own norm), or neither does */
        if (ag && !isfinite(cl_grad_norm(ag->data, ag->n)))
            g_set_error(&err, CL_OPTIM_ERROR, CL_OPTIM_ERROR_NONFINITE,
                        "an auxiliary head's gradient is not finite");
        if (!err && cl_grad_check_norm(g->data, g->n, norm, &err)) {
            /* clip by the global norm, folded into the update (cl_optim_step's arithmetic) */
            for (int u = 0; u < n_up; u++) {
                uc[u].lr = lr;
                uc[u].gscale = ro.clip > 0 && norm > ro.clip ? (float)(ro.clip / norm) : 1.0f;
            }
            cl_adamw_next_step(r.opt);
            update_phase(uc, n_up, TRUE);
            nonfinite = 0;
            if (ag)
                cl_optim_step(r.aux.opt, r.aux.heads->data, ag->data, lr, ro.clip, NULL, NULL);
        } else {
            /* nothing moved; the step still counts (its samples were seen) */
            if (!log_raw(r.log, error,
                         "{\"type\":\"skip\",\"step\":%" G_GINT64_FORMAT ",\"reason\":\"%s\"}",
                         step + 1, "non-finite gradient"))
                return FALSE;
            if (++nonfinite >= MAX_NONFINITE_IN_A_ROW) {
                g_set_error(error, CL_TRAINER_ERROR, CL_TRAINER_ERROR_DIVERGED,
                            "training diverged: %d steps in a row up to step %" G_GINT64_FORMAT
                            " had non-finite gradients (%s); lower --lr or set --clip",
                            nonfinite, step + 1, err->message);
                return FALSE;
            }
        }
        step++;
        if (result->samples == 0) {
            result->first_loss = loss;
            result->first_aux_objects_loss = aux[0];
            result->first_aux_changed_loss = aux[1];
        }
        result->final_loss = loss;
        result->final_aux_objects_loss = aux[0];
        result->final_aux_changed_loss = aux[1];
        result->samples += B;
        result->tokens += step_tokens;

        window_loss += loss, window_n++;
        if (step % ro.log_every == 0 || step == ro.steps) {
            ClTrainLogStep rec = { step, window_loss / window_n, lr, norm, step_tokens, B };
            if (!cl_trainlog_step(r.log, &rec, error))
                return FALSE;
            /* the auxiliary losses, window means over the samples that ran them */
            if (r.aux.heads) {
                char b0[G_ASCII_DTOSTR_BUF_SIZE], b1[G_ASCII_DTOSTR_BUF_SIZE];
                const char *v[2];
                for (int a = 0; a < 2; a++)
                    v[a] = window_aux_n[a] ? g_ascii_formatd(a ? b1 : b0, sizeof b0, "%.9g",
                                                             window_aux[a] / window_aux_n[a])
                                           : "null";
                if (!log_raw(r.log, error,
                             "{\"type\":\"aux\",\"step\":%" G_GINT64_FORMAT
                             ",\"objects_loss\":%s,\"changed_loss\":%s}", step, v[0], v[1]))
                    return FALSE;
            }
            window_loss = 0, window_n = 0;
            window_aux[0] = window_aux[1] = 0, window_aux_n[0] = window_aux_n[1] = 0;
        }
        if (n_slots > 1 && (step % TASK_LOG_EVERY == 0 || step == ro.steps)) {
            if (!log_task_losses(r.log, step, r.src.tasks, task_slot, n_src_tasks, task_loss,
                                 task_n, error))
                return FALSE;
            memset(task_loss, 0, n_src_tasks * sizeof *task_loss);
            memset(task_n, 0, n_src_tasks * sizeof *task_n);
        }
        if (cb) {
            ClTrainerStatus st = { step, ro.steps, loss, aux[0], aux[1], lr, norm,
                                   result->samples, result->tokens,
                                   (g_get_monotonic_time() - t0) / 1e6 };
            cb(&st, user_data);
        }
        if (ro.checkpoint_every > 0 && step % ro.checkpoint_every == 0 && step < ro.steps &&
            !save_checkpoint(ck_dir, ro.keep_checkpoints, r.model, r.opt, &r.aux, step, rng, cursor,
                             r.options_json, &result->checkpoint_path, error))
            return FALSE;
    }
    result->steps = step;
    result->elapsed_s = (g_get_monotonic_time() - t0) / 1e6;
    if (result->elapsed_s > 0) {
        result->samples_per_s = result->samples / result->elapsed_s;
        result->tokens_per_s = result->tokens / result->elapsed_s;
    }

    /* the last checkpoint: where the run stopped (unless nothing ran since the loaded one) */
    if (step > result->start_step || !result->checkpoint_path) {
        if (!save_checkpoint(ck_dir, ro.keep_checkpoints, r.model, r.opt, &r.aux, step, rng, cursor,
                             r.options_json, &result->checkpoint_path, error))
            return FALSE;
    }
    if (!log_raw(r.log, error,
                 "{\"type\":\"end\",\"step\":%" G_GINT64_FORMAT ",\"cancelled\":%s,"
                 "\"samples\":%" G_GINT64_FORMAT ",\"tokens\":%" G_GINT64_FORMAT
                 ",\"run_s\":%.3f,\"samples_per_s\":%.3f,\"tokens_per_s\":%.1f,\"workers\":%d}",
                 step, cancelled ? "true" : "false", result->samples, result->tokens,
                 result->elapsed_s, result->samples_per_s, result->tokens_per_s, r.n_workers))
        return FALSE;
    if (!cl_trainlog_close(g_steal_pointer(&r.log), error))
        return FALSE;
    if (cancelled) {
        result->cancelled = TRUE;
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_CANCELLED,
                    "training interrupted at step %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT
                    "; resume with --resume (checkpoint %s)",
                    step, ro.steps, result->checkpoint_path);
        return FALSE;
    }
    const char *dtype = o->dtype ? o->dtype : "f32";
    if (!cl_model_save(r.model, model_path, dtype, error)) {
        g_prefix_error(error, "%s: ", model_path);
        return FALSE;
    }
    result->model_path = g_steal_pointer(&model_path);
    return TRUE;
}
