/* test-optim.c - AdamW against torch.optim.AdamW (tests/goldens/optim.json, made by
 * tests/reference/optim_goldens.py), the warmup + cosine schedule, clipping, the decay mask,
 * gradient accumulation, checkpoints (bit-exact round trip, exact resume, refusal of corrupt or
 * mismatched files, rotation) and the JSONL training log. */
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <glib/gstdio.h>

#include "train/checkpoint.h"
#include "fixtures.h"
#include "train/optim.h"
#include "train/params.h"
#include "model/safetensors.h"
#include "train/trainlog.h"

static char *tmpdir;

static guint64 splitmix64(guint64 *s)
{
    guint64 z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static float uniform(guint64 *s)
{
    return (float)((double)(splitmix64(s) >> 11) / 4503599627370496.0 - 1.0);
}

/* A few-thousand-parameter model with every kind of tensor (SVE cross_ffn with a learned null
 * state, so the decay mask meets biases, norms, matrices, a 4-D patch kernel and sve.null). */
static void small_config(ClModelConfig *cfg)
{
    g_assert_true(cl_model_config_preset(cfg, "tiny", NULL));
    cfg->image_size = 32, cfg->patch_size = 16;
    cfg->enc_dim = 16, cfg->enc_depth = 2, cfg->enc_heads = 2, cfg->enc_mlp = 32;
    cfg->sve_first = CL_SVE_FIRST_NULL;
    cfg->merger_hidden = 32;
    cfg->dec_dim = 16, cfg->dec_depth = 1, cfg->dec_heads = 2, cfg->dec_kv_heads = 1;
    cfg->dec_mlp = 32, cfg->vocab_size = 300, cfg->max_len = 64;
    g_autoptr(GError) error = NULL;
    g_assert_true(cl_model_config_validate(cfg, &error));
}

static ClModel *small_model(guint64 seed)
{
    ClModelConfig cfg;
    small_config(&cfg);
    g_autoptr(GError) error = NULL;
    ClModel *model = cl_model_new_random(&cfg, seed, &error);
    g_assert_no_error(error);
    g_assert_true(cl_model_make_trainable(model, &error));
    g_assert_no_error(error);
    return model;
}

/* ---- AdamW vs torch ------------------------------------------------------------------------- */

static void fill_array(float *dst, JsonArray *a, guint n)
{
    g_assert_cmpuint(json_array_get_length(a), ==, n);
    for (guint i = 0; i < n; i++)
        dst[i] = (float)json_array_get_double_element(a, i);
}

/* Same per-element float arithmetic as torch except fused multiply-adds (torch's vectorised
 * lerp uses fmadd): measured 8.3e-7 relative at most over the 7 steps (~7 ulps); 1e-5 leaves
 * room for other compilers' contractions. The absolute floor covers values near zero. */
#define ADAM_RTOL 1e-5
#define ADAM_ATOL 1e-9

static double max_rel_err;

static void assert_close_array(const char *what, int step, const float *ours, JsonArray *ref,
                               guint n)
{
    for (guint i = 0; i < n; i++) {
        double r = json_array_get_double_element(ref, i);
        double d = fabs((double)ours[i] - r);
        if (r != 0)
            max_rel_err = MAX(max_rel_err, d / fabs(r));
        if (!isfinite(ours[i]) || d > ADAM_ATOL + ADAM_RTOL * fabs(r))
            g_error("step %d: %s[%u] = %.9g, torch.optim.AdamW gives %.9g", step, what, i, ours[i],
                    r);
    }
}

static void test_adamw_torch(void)
{
    const char *dir = g_getenv("CL_GOLDENS");
    g_autofree char *path = g_build_filename(dir ? dir : "tests/goldens", "optim.json", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    if (!json_parser_load_from_file(parser, path, &error))
        g_error("cannot load %s: %s (set CL_GOLDENS to tests/goldens)", path, error->message);
    JsonObject *g = json_node_get_object(json_parser_get_root(parser));
    guint nw = (guint)json_object_get_int_member(g, "n_weight");
    guint nb = (guint)json_object_get_int_member(g, "n_bias");
    guint n = nw + nb;
    JsonArray *betas = json_object_get_array_member(g, "betas");
    ClAdamWOptions o = {
        .beta1 = json_array_get_double_element(betas, 0),
        .beta2 = json_array_get_double_element(betas, 1),
        .eps = json_object_get_double_member(g, "eps"),
        .weight_decay = json_object_get_double_member(g, "weight_decay"),
    };
    g_autoptr(ClAdamW) a = cl_adamw_new(n, &o, &error);
    g_assert_no_error(error);
    /* the torch run has two groups: the "weight" decays, the "bias" does not */
    ClOptimSpan spans[2] = { { 0, nw, TRUE }, { nw, n, FALSE } };
    g_assert_true(cl_adamw_set_spans(a, spans, 2, &error));
    g_autofree float *p = g_new(float, n);
    g_autofree float *grad = g_new(float, n);
    fill_array(p, json_object_get_array_member(g, "init"), n);
    JsonArray *steps = json_object_get_array_member(g, "steps");
    g_assert_cmpuint(json_array_get_length(steps), >=, 5);
    for (guint s = 0; s < json_array_get_length(steps); s++) {
        JsonObject *st = json_array_get_object_element(steps, s);
        fill_array(grad, json_object_get_array_member(st, "grad"), n);
        cl_adamw_update(a, p, grad, json_object_get_double_member(st, "lr"));
        g_assert_cmpint(a->step, ==, s + 1);
        assert_close_array("param", s, p, json_object_get_array_member(st, "params"), n);
        assert_close_array("m", s, a->m, json_object_get_array_member(st, "m"), n);
        assert_close_array("v", s, a->v, json_object_get_array_member(st, "v"), n);
    }
    g_test_message("largest relative difference from torch: %.3g", max_rel_err);
    /* the goldens see the mask: with the bias decaying too, it ends off torch's values */
    g_autoptr(ClAdamW) all = cl_adamw_new(n, &o, &error);
    fill_array(p, json_object_get_array_member(g, "init"), n);
    JsonObject *st = NULL;
    for (guint s = 0; s < json_array_get_length(steps); s++) {
        st = json_array_get_object_element(steps, s);
        fill_array(grad, json_object_get_array_member(st, "grad"), n);
        cl_adamw_update(all, p, grad, json_object_get_double_member(st, "lr"));
    }
    double ref = json_array_get_double_element(json_object_get_array_member(st, "params"), nw);
    g_assert_cmpfloat(fabs(p[nw] - ref), >, 100 * (ADAM_ATOL + ADAM_RTOL * fabs(ref)));
}

/* ---- schedule ------------------------------------------------------------------------------- */

static void test_schedule(void)
{
    ClLrSchedule s = { .max_lr = 1e-3, .min_lr = 1e-5, .warmup = 10, .total = 110 };
    g_assert_true(cl_lr_schedule_validate(&s, NULL));
    g_assert_cmpfloat(cl_lr_schedule_at(&s, 0), ==, 0.0);
    g_assert_cmpfloat_with_epsilon(cl_lr_schedule_at(&s, 5), 5e-4, 1e-15);
    g_assert_cmpfloat_with_epsilon(cl_lr_schedule_at(&s, 10), 1e-3, 1e-15);
    g_assert_cmpfloat_with_epsilon(cl_lr_schedule_at(&s, 60), (1e-3 + 1e-5) / 2, 1e-15);
    /* a quarter into the decay: cos(pi/4) */
    g_assert_cmpfloat_with_epsilon(cl_lr_schedule_at(&s, 35),
                                   1e-5 + (1e-3 - 1e-5) * 0.5 * (1 + sqrt(0.5)), 1e-15);
    g_assert_cmpfloat_with_epsilon(cl_lr_schedule_at(&s, 110), 1e-5, 1e-15);
    g_assert_cmpfloat(cl_lr_schedule_at(&s, 500), ==, 1e-5);
    g_assert_cmpfloat(cl_lr_schedule_at(&s, -3), ==, 0.0);
    for (gint64 t = 1; t <= 110; t++) {
        double prev = cl_lr_schedule_at(&s, t - 1), cur = cl_lr_schedule_at(&s, t);
        if (t <= 10)
            g_assert_cmpfloat(cur, >, prev);
        else
            g_assert_cmpfloat(cur, <, prev);
        g_assert_cmpfloat(cur, >=, 1e-5 - 1e-18);
        g_assert_cmpfloat(cur, <=, 1e-3 + 1e-18);
    }
    /* no warmup: the first step runs at max_lr */
    ClLrSchedule s0 = { .max_lr = 2e-4, .min_lr = 0, .warmup = 0, .total = 4 };
    g_assert_cmpfloat(cl_lr_schedule_at(&s0, 0), ==, 2e-4);
    g_assert_cmpfloat_with_epsilon(cl_lr_schedule_at(&s0, 2), 1e-4, 1e-18);
    g_assert_cmpfloat_with_epsilon(cl_lr_schedule_at(&s0, 4), 0.0, 1e-18);
    /* bad schedules are refused with a message */
    ClLrSchedule bad[] = {
        { 1e-3, 2e-3, 0, 10 },
        { 1e-3, 0, 20, 10 },
        { 1e-3, 0, 0, 0 },
        { NAN, 0, 0, 10 },
    };
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;
        g_assert_false(cl_lr_schedule_validate(&bad[i], &error));
        g_assert_error(error, CL_OPTIM_ERROR, CL_OPTIM_ERROR_INPUT);
    }
}

/* ---- clipping ------------------------------------------------------------------------------- */

static void test_clip(void)
{
    const size_t n = 1001;
    g_autofree float *g = g_new(float, n);
    g_autofree float *orig = g_new(float, n);
    guint64 rng = 7;
    double ref = 0;
    for (size_t i = 0; i < n; i++) {
        g[i] = orig[i] = uniform(&rng) * 3.0f;
        ref += (double)g[i] * g[i];
    }
    ref = sqrt(ref);
    g_assert_cmpfloat(ref, >, 10); /* ~ 3 * sqrt(1001/3) */

    /* measure only, and under the limit: untouched bit for bit */
    double norm = 0;
    g_assert_true(cl_grad_clip(g, n, 0, &norm, NULL));
    g_assert_cmpfloat_with_epsilon(norm, ref, ref * 1e-12);
    g_assert_true(cl_grad_clip(g, n, ref * 2, &norm, NULL));
    g_assert_cmpmem(g, n * sizeof(float), orig, n * sizeof(float));

    /* over the limit: scaled to exactly max_norm (float rounding: 1e-6), direction kept */
    g_assert_true(cl_grad_clip(g, n, 1.0, &norm, NULL));
    g_assert_cmpfloat_with_epsilon(norm, ref, ref * 1e-12);
    g_assert_cmpfloat_with_epsilon(cl_grad_norm(g, n), 1.0, 1e-6);
    for (size_t i = 0; i < n; i++)
        g_assert_cmpfloat_with_epsilon(g[i], orig[i] / ref, 1e-7);

    /* NaN and infinity: an error naming the index, grads untouched, the step skipped */
    ClModelConfig cfg;
    small_config(&cfg);
    float bad_values[2] = { NAN, INFINITY };
    for (guint b = 0; b < 2; b++) {
        memcpy(g, orig, n * sizeof(float));
        g[517] = bad_values[b];
        g_autoptr(GError) error = NULL;
        g_assert_false(cl_grad_clip(g, n, 1.0, &norm, &error));
        g_assert_error(error, CL_OPTIM_ERROR, CL_OPTIM_ERROR_NONFINITE);
        g_assert_nonnull(strstr(error->message, "517"));
        g_assert_false(isfinite(norm));
        g_assert_cmpfloat(g[0], ==, orig[0]);
        g_assert_cmpfloat(g[n - 1], ==, orig[n - 1]);

        g_autoptr(ClAdamW) a = cl_adamw_new(n, NULL, NULL);
        g_autofree float *p = g_memdup2(orig, n * sizeof(float));
        g_autofree float *gg = g_memdup2(orig, n * sizeof(float));
        g_assert_true(cl_optim_step(a, p, gg, 1e-3, 1.0, &norm, NULL));
        g_autofree float *p1 = g_memdup2(p, n * sizeof(float));
        g_autofree float *m1 = g_memdup2(a->m, n * sizeof(float));
        g_autofree float *v1 = g_memdup2(a->v, n * sizeof(float));
        gg[3] = bad_values[b];
        g_clear_error(&error);
        g_assert_false(cl_optim_step(a, p, gg, 1e-3, 1.0, &norm, &error));
        g_assert_error(error, CL_OPTIM_ERROR, CL_OPTIM_ERROR_NONFINITE);
        g_assert_cmpint(a->step, ==, 1);
        g_assert_cmpmem(p, n * sizeof(float), p1, n * sizeof(float));
        g_assert_cmpmem(a->m, n * sizeof(float), m1, n * sizeof(float));
        g_assert_cmpmem(a->v, n * sizeof(float), v1, n * sizeof(float));
    }
}

/* ---- decay mask ----------------------------------------------------------------------------- */

static void test_decay_mask(void)
{
    g_autoptr(ClModel) model = small_model(3);
    const ClModelConfig *cfg = &model->config;
    ClAdamWOptions o;
    cl_adamw_options_init(&o);
    o.weight_decay = 0.5;
    g_autoptr(GError) error = NULL;
    g_autoptr(ClAdamW) a = cl_adamw_new_for_config(cfg, &o, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(a->n, ==, model->n_params);

    size_t n = model->n_params;
    g_autofree float *before = g_memdup2(model->arena, n * sizeof(float));
    g_autofree float *zero = g_new0(float, n);
    /* zero gradients: the Adam term is 0 / (0 + eps) = 0, so only decay moves a parameter */
    cl_adamw_update(a, model->arena, zero, 0.1);
    const float factor = (float)(1.0 - 0.1 * 0.5);

    g_autofree size_t *offsets = NULL;
    g_autoptr(GPtrArray) specs = cl_param_specs(cfg, &offsets);
    guint n_decay = 0, n_plain = 0, seen_null = 0, seen_embed = 0;
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        gboolean is_vector = s->ndim == 1;
        gboolean is_null = g_str_has_suffix(s->name, ".sve.null");
        gboolean expect = !is_vector && !is_null;
        g_assert_cmpint(cl_optim_tensor_decays(s->name, s->ndim), ==, expect);
        seen_null += is_null;
        seen_embed += strcmp(s->name, "dec.embed.weight") == 0;
        for (size_t k = offsets[i]; k < offsets[i + 1]; k++) {
            float want = expect ? before[k] * factor : before[k];
            if (model->arena[k] != want)
                g_error("%s[%zu]: %g, expected %g (%s)", s->name, k - offsets[i], model->arena[k],
                        want, expect ? "decayed" : "no decay");
        }
        expect ? n_decay++ : n_plain++;
        /* the names the rule is about */
        if (g_str_has_suffix(s->name, ".bias") || strstr(s->name, "ln") || strstr(s->name, "norm"))
            g_assert_false(expect);
    }
    g_assert_cmpuint(seen_null, ==, cfg->enc_depth);
    g_assert_cmpuint(seen_embed, ==, 1);
    g_assert_cmpuint(n_decay, >, 10);
    g_assert_cmpuint(n_plain, >, 10);

    /* spans that do not tile the parameters are refused */
    ClOptimSpan gap[2] = { { 0, 10, TRUE }, { 11, n, FALSE } };
    g_clear_error(&error);
    g_assert_false(cl_adamw_set_spans(a, gap, 2, &error));
    g_assert_error(error, CL_OPTIM_ERROR, CL_OPTIM_ERROR_INPUT);
}

/* The update in pieces (what the trainer's two threads run: ranges that cut through decaying
 * and plain spans, with the clip factor folded in) equals the whole update on gradients clipped
 * first, bit for bit; the split norm equals the whole one to rounding. */
static void test_update_ranges(void)
{
    g_autoptr(ClModel) model = small_model(4);
    const ClModelConfig *cfg = &model->config;
    ClAdamWOptions o;
    cl_adamw_options_init(&o);
    o.weight_decay = 0.1;
    g_autoptr(GError) error = NULL;
    g_autoptr(ClAdamW) whole = cl_adamw_new_for_config(cfg, &o, &error);
    g_autoptr(ClAdamW) parts = cl_adamw_new_for_config(cfg, &o, &error);
    g_assert_no_error(error);
    const size_t n = model->n_params;
    g_autofree float *p1 = g_memdup2(model->arena, n * sizeof(float));
    g_autofree float *p2 = g_memdup2(model->arena, n * sizeof(float));
    g_autofree float *g = g_new(float, n), *gc = g_new(float, n);
    g_autoptr(GRand) r = g_rand_new_with_seed(11);
    for (int step = 0; step < 3; step++) {
        for (size_t i = 0; i < n; i++)
            g[i] = (float)g_rand_double_range(r, -2, 2);
        memcpy(gc, g, n * sizeof(float));
        double norm = NAN;
        g_assert_true(cl_grad_clip(gc, n, 1.0, &norm, &error));
        cl_adamw_update(whole, p1, gc, 1e-2);
        const size_t cut[4] = { 0, n / 3 + 1, 2 * n / 3 + 5, n };
        double sumsq = 0;
        for (int k = 0; k < 3; k++)
            sumsq += cl_grad_sumsq(g, cut[k], cut[k + 1]);
        g_assert_cmpfloat_with_epsilon(sqrt(sumsq), norm, 1e-9 * norm);
        cl_adamw_next_step(parts);
        for (int k = 2; k >= 0; k--)
            cl_adamw_update_range(parts, p2, g, 1e-2, (float)(1.0 / norm), cut[k], cut[k + 1]);
        g_assert_cmpint(memcmp(p1, p2, n * sizeof(float)), ==, 0);
        g_assert_cmpint(memcmp(whole->m, parts->m, n * sizeof(float)), ==, 0);
        g_assert_cmpint(memcmp(whole->v, parts->v, n * sizeof(float)), ==, 0);
    }
    /* a non-finite norm names the first bad gradient */
    g[7] = NAN;
    g_assert_false(cl_grad_check_norm(g, n, cl_grad_norm(g, n), &error));
    g_assert_error(error, CL_OPTIM_ERROR, CL_OPTIM_ERROR_NONFINITE);
    g_assert_nonnull(strstr(error->message, "gradient 7 of"));
}

/* ---- accumulation --------------------------------------------------------------------------- */

/* Gradient of mean_b 0.5 (x_b . w - y_b)^2 over rows [r0, r1), written (not added) into g. */
static void lsq_grad(float *g, const float *x, const float *y, const float *w, int d, int r0,
                     int r1)
{
    memset(g, 0, d * sizeof(float));
    for (int r = r0; r < r1; r++) {
        float e = -y[r];
        for (int j = 0; j < d; j++)
            e += x[r * d + j] * w[j];
        for (int j = 0; j < d; j++)
            g[j] += e * x[r * d + j];
    }
    cl_grad_scale(g, d, 1.0 / (r1 - r0));
}

static void test_accumulate(void)
{
    enum { D = 8, B = 32, K = 4 };
    float x[B * D], y[B], w[D], big[D], acc[D], micro[D];
    guint64 rng = 11;
    for (int i = 0; i < B * D; i++)
        x[i] = uniform(&rng);
    for (int i = 0; i < B; i++)
        y[i] = uniform(&rng) * 2;
    for (int j = 0; j < D; j++)
        w[j] = uniform(&rng);
    lsq_grad(big, x, y, w, D, 0, B);
    memset(acc, 0, sizeof acc);
    for (int k = 0; k < K; k++) {
        lsq_grad(micro, x, y, w, D, k * (B / K), (k + 1) * (B / K));
        cl_grad_accumulate(acc, micro, D);
    }
    float summed = acc[0];
    cl_grad_scale(acc, D, 1.0 / K);
    g_assert_cmpfloat(acc[0], !=, summed); /* the average, not the sum */
    /* the same sums in another order: float rounding only (32 terms of size ~1) */
    for (int j = 0; j < D; j++)
        g_assert_cmpfloat_with_epsilon(acc[j], big[j], 1e-5 * (1 + fabsf(big[j])));
}

/* ---- checkpoints ---------------------------------------------------------------------------- */

/* Noisy gradient of 0.5 ||p - target||^2 with target_i = sin(i), noise from the trainer's RNG. */
static void toy_grads(float *g, const float *p, size_t n, guint64 *rng)
{
    for (size_t i = 0; i < n; i++)
        g[i] = p[i] - (float)sin((double)i) + 0.3f * uniform(rng);
}

static void toy_steps(ClModel *model, ClAdamW *a, guint64 *rng, gint64 from, gint64 to)
{
    ClLrSchedule sched = { .max_lr = 1e-2, .min_lr = 1e-3, .warmup = 3, .total = 20 };
    g_autofree float *g = g_new(float, model->n_params);
    for (gint64 s = from; s < to; s++) {
        toy_grads(g, model->arena, model->n_params, rng);
        double norm;
        g_autoptr(GError) error = NULL;
        /* max_norm 20 < the initial norm (~ sqrt(n / 2)): clipping is part of the path */
        g_assert_true(
            cl_optim_step(a, model->arena, g, cl_lr_schedule_at(&sched, s), 20.0, &norm, &error));
        g_assert_no_error(error);
    }
}

static ClAdamW *toy_optimiser(const ClModelConfig *cfg)
{
    ClAdamWOptions o = { .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1 };
    g_autoptr(GError) error = NULL;
    ClAdamW *a = cl_adamw_new_for_config(cfg, &o, &error);
    g_assert_no_error(error);
    return a;
}

static void test_checkpoint_roundtrip(void)
{
    g_autoptr(ClModel) model = small_model(5);
    g_autoptr(ClAdamW) a = toy_optimiser(&model->config);
    guint64 rng = 99;
    toy_steps(model, a, &rng, 0, 3);
    guint64 words[3] = { rng, 0xFFFFFFFFFFFFFFFFull, 0 };
    ClCheckpointState st = { .step = 3,
                             .rng = words,
                             .n_rng = 3,
                             .cursor_json = (char *)"{\"file\":\"train.jsonl\",\"offset\":12345}",
                             .options_json = (char *)"{\"lr\":0.01,\"batch\":32}" };
    g_autofree char *path = cl_checkpoint_path(tmpdir, "rt", 3);
    g_autoptr(GError) error = NULL;
    g_assert_true(cl_checkpoint_save(path, model, a, &st, &error));
    g_assert_no_error(error);

    g_autoptr(ClCheckpoint) ck = cl_checkpoint_load(path, &error);
    g_assert_no_error(error);
    size_t n = model->n_params;
    g_assert_cmpuint(ck->model->n_params, ==, n);
    g_assert_cmpmem(ck->model->arena, n * 4, model->arena, n * 4);
    g_assert_cmpmem(ck->opt->m, n * 4, a->m, n * 4);
    g_assert_cmpmem(ck->opt->v, n * 4, a->v, n * 4);
    g_assert_cmpint(ck->opt->step, ==, 3);
    g_assert_cmpmem(&ck->opt->opt, sizeof(ClAdamWOptions), &a->opt, sizeof(ClAdamWOptions));
    g_assert_cmpuint(ck->opt->n_spans, ==, a->n_spans);
    for (guint i = 0; i < a->n_spans; i++) {
        g_assert_cmpuint(ck->opt->spans[i].begin, ==, a->spans[i].begin);
        g_assert_cmpuint(ck->opt->spans[i].end, ==, a->spans[i].end);
        g_assert_cmpint(ck->opt->spans[i].decay, ==, a->spans[i].decay);
    }
    g_assert_cmpint(ck->state.step, ==, 3);
    g_assert_cmpuint(ck->state.n_rng, ==, 3);
    g_assert_cmpmem(ck->state.rng, sizeof words, words, sizeof words);
    g_assert_cmpstr(ck->state.cursor_json, ==, st.cursor_json);
    g_assert_cmpstr(ck->state.options_json, ==, st.options_json);
    g_assert_true(cl_checkpoint_check_config(ck, &model->config, &error));
    g_autofree char *tok_a = cl_tokenizer_to_json(model->tokenizer);
    g_autofree char *tok_b = cl_tokenizer_to_json(ck->model->tokenizer);
    g_assert_cmpstr(tok_a, ==, tok_b);
    /* the views are bound: a named tensor reads the same values */
    g_assert_cmpmem(ck->model->w.dec_norm, model->config.dec_dim * 4, model->w.dec_norm,
                    model->config.dec_dim * 4);

    /* no RNG words and no JSON given: both come back empty / null */
    ClCheckpointState bare = { .step = 0 };
    g_assert_true(cl_checkpoint_save(path, model, a, &bare, &error));
    g_autoptr(ClCheckpoint) ck2 = cl_checkpoint_load(path, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(ck2->state.n_rng, ==, 0);
    g_assert_cmpstr(ck2->state.cursor_json, ==, "null");

    /* invalid JSON is refused at save, and nothing is written */
    g_autofree char *other = cl_checkpoint_path(tmpdir, "badjson", 1);
    ClCheckpointState badjson = { .step = 1, .cursor_json = (char *)"{offset: 3" };
    g_assert_false(cl_checkpoint_save(other, model, a, &badjson, &error));
    g_assert_nonnull(error);
    g_assert_nonnull(strstr(error->message, "data cursor"));
    g_assert_false(g_file_test(other, G_FILE_TEST_EXISTS));
}

static void test_resume_exact(void)
{
    /* uninterrupted: 20 steps */
    g_autoptr(ClModel) straight = small_model(8);
    g_autoptr(ClAdamW) a = toy_optimiser(&straight->config);
    guint64 rng = 1234;
    toy_steps(straight, a, &rng, 0, 20);

    /* interrupted: 10 steps, save, drop everything, load, 10 more */
    g_autofree char *path = g_build_filename(tmpdir, "resume.safetensors", NULL);
    {
        g_autoptr(ClModel) m = small_model(8);
        g_autoptr(ClAdamW) b = toy_optimiser(&m->config);
        guint64 r = 1234;
        toy_steps(m, b, &r, 0, 10);
        g_autofree char *cursor = g_strdup_printf("{\"next\":%d}", 10);
        ClCheckpointState st = { .step = 10, .rng = &r, .n_rng = 1, .cursor_json = cursor };
        g_autoptr(GError) error = NULL;
        g_assert_true(cl_checkpoint_save(path, m, b, &st, &error));
        g_assert_no_error(error);
    }
    g_autoptr(GError) error = NULL;
    g_autoptr(ClCheckpoint) ck = cl_checkpoint_load(path, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(ck->state.n_rng, ==, 1);
    guint64 r = ck->state.rng[0];
    g_assert_cmpstr(ck->state.cursor_json, ==, "{\"next\":10}");
    toy_steps(ck->model, ck->opt, &r, ck->state.step, 20);

    size_t n = straight->n_params;
    g_assert_cmpint(ck->opt->step, ==, a->step);
    g_assert_cmpuint(r, ==, rng);
    g_assert_cmpmem(ck->model->arena, n * 4, straight->arena, n * 4);
    g_assert_cmpmem(ck->opt->m, n * 4, a->m, n * 4);
    g_assert_cmpmem(ck->opt->v, n * 4, a->v, n * 4);
    /* and the run did move: the comparison is not between two untouched models */
    g_autoptr(ClModel) init = small_model(8);
    g_assert_cmpint(memcmp(init->arena, straight->arena, n * 4), !=, 0);
}

static void assert_load_fails(const char *path, GQuark domain, int code, const char *fragment)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(ClCheckpoint) ck = cl_checkpoint_load(path, &error);
    g_assert_null(ck);
    g_assert_nonnull(error);
    if (domain)
        g_assert_error(error, domain, code);
    if (!strstr(error->message, fragment))
        g_error("expected '%s' in: %s", fragment, error->message);
    g_autofree char *base = g_path_get_basename(path);
    g_assert_nonnull(strstr(error->message, base)); /* names the file */
}

static void test_checkpoint_refused(void)
{
    g_autoptr(ClModel) model = small_model(9);
    g_autoptr(ClAdamW) a = toy_optimiser(&model->config);
    guint64 rng = 5;
    toy_steps(model, a, &rng, 0, 2);
    ClCheckpointState st = { .step = 2, .rng = &rng, .n_rng = 1 };
    g_autofree char *good = g_build_filename(tmpdir, "good.safetensors", NULL);
    g_autoptr(GError) error = NULL;
    g_assert_true(cl_checkpoint_save(good, model, a, &st, &error));
    g_autofree guint8 *bytes = NULL;
    gsize size = 0;
    g_assert_true(g_file_get_contents(good, (char **)&bytes, &size, NULL));

    /* one flipped bit in the last value of adam.v: the data checksum catches it */
    g_autofree char *flipped = g_build_filename(tmpdir, "flipped.safetensors", NULL);
    bytes[size - 2] ^= 0x10;
    g_assert_true(g_file_set_contents(flipped, (char *)bytes, size, NULL));
    bytes[size - 2] ^= 0x10;
    assert_load_fails(flipped, CL_CHECKPOINT_ERROR, CL_CHECKPOINT_ERROR_FILE, "corrupted");

    /* truncated (a crash mid-copy): the reader refuses the sizes */
    g_autofree char *cut = g_build_filename(tmpdir, "cut.safetensors", NULL);
    g_assert_true(g_file_set_contents(cut, (char *)bytes, size - 100, NULL));
    assert_load_fails(cut, 0, 0, "cut.safetensors");

    /* a model file is not a checkpoint */
    g_autofree char *model_path = g_build_filename(tmpdir, "model.safetensors", NULL);
    g_assert_true(cl_model_save(model, model_path, "F32", &error));
    assert_load_fails(model_path, CL_CHECKPOINT_ERROR, CL_CHECKPOINT_ERROR_FILE,
                      "not a training checkpoint");

    /* moments of the wrong size (a file put together from two runs), and a checkpoint for
     * another config than the trainer's */
    g_autoptr(ClSafetensors) sf = cl_safetensors_open(good, &error);
    g_assert_no_error(error);
    GPtrArray *meta = g_ptr_array_new();
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init(&it, sf->metadata);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        g_ptr_array_add(meta, k);
        g_ptr_array_add(meta, v);
    }
    g_ptr_array_add(meta, NULL);
    g_autofree ClSafetensorsEntry *entries = g_new0(ClSafetensorsEntry, sf->tensors->len);
    g_autofree gint64 *shapes = g_new0(gint64, sf->tensors->len * CL_SAFETENSORS_MAX_NDIM);
    g_autofree float *zeros = g_new0(float, model->n_params);
    for (guint i = 0; i < sf->tensors->len; i++) {
        const ClSafeTensor *t = g_ptr_array_index(sf->tensors, i);
        gint64 *shape = shapes + i * CL_SAFETENSORS_MAX_NDIM;
        memcpy(shape, t->shape, sizeof t->shape);
        if (strcmp(t->name, "adam.m") == 0)
            shape[0] -= 1;
        entries[i] = (ClSafetensorsEntry){ t->name, CL_DTYPE_F32, t->ndim, shape, zeros };
    }
    g_autofree char *short_m = g_build_filename(tmpdir, "short-m.safetensors", NULL);
    g_assert_true(cl_safetensors_write(short_m, entries, sf->tensors->len,
                                       (const char *const *)meta->pdata, NULL, &error));
    g_ptr_array_free(meta, TRUE);
    assert_load_fails(short_m, CL_CHECKPOINT_ERROR, CL_CHECKPOINT_ERROR_MISMATCH, "adam.m");

    g_autoptr(ClCheckpoint) ck = cl_checkpoint_load(good, &error);
    g_assert_no_error(error);
    ClModelConfig other = model->config;
    other.enc_dim = 32;
    g_assert_false(cl_checkpoint_check_config(ck, &other, &error));
    g_assert_error(error, CL_CHECKPOINT_ERROR, CL_CHECKPOINT_ERROR_MISMATCH);
    g_assert_nonnull(strstr(error->message, "enc_dim"));
    g_clear_error(&error);

    /* the optimiser must fit the model */
    g_autoptr(ClAdamW) small = cl_adamw_new(10, NULL, NULL);
    g_assert_false(cl_checkpoint_save(good, model, small, &st, &error));
    g_assert_error(error, CL_CHECKPOINT_ERROR, CL_CHECKPOINT_ERROR_INPUT);
    g_clear_error(&error);
    /* the failed save left the previous file as it was */
    g_autoptr(ClCheckpoint) again = cl_checkpoint_load(good, &error);
    g_assert_no_error(error);
}

static void test_rotation(void)
{
    g_autofree char *dir = g_build_filename(tmpdir, "rot", NULL);
    g_assert_cmpint(g_mkdir_with_parents(dir, 0700), ==, 0);
    g_autoptr(GError) error = NULL;
    g_autofree char *none = cl_checkpoint_latest(dir, "ckpt", &error);
    g_assert_no_error(error);
    g_assert_null(none);
    gint64 steps[] = { 100, 5, 2000, 40 };
    for (guint i = 0; i < G_N_ELEMENTS(steps); i++) {
        g_autofree char *p = cl_checkpoint_path(dir, "ckpt", steps[i]);
        g_assert_true(g_file_set_contents(p, "x", 1, NULL));
    }
    g_autofree char *keep_me = g_build_filename(dir, "ckpt-notes.txt", NULL);
    g_assert_true(g_file_set_contents(keep_me, "x", 1, NULL));
    g_assert_true(cl_checkpoint_rotate(dir, "ckpt", 2, &error));
    g_assert_no_error(error);
    for (guint i = 0; i < G_N_ELEMENTS(steps); i++) {
        g_autofree char *p = cl_checkpoint_path(dir, "ckpt", steps[i]);
        g_assert_cmpint(g_file_test(p, G_FILE_TEST_EXISTS), ==, steps[i] >= 100);
    }
    g_assert_true(g_file_test(keep_me, G_FILE_TEST_EXISTS));
    g_autofree char *latest = cl_checkpoint_latest(dir, "ckpt", &error);
    g_autofree char *want = cl_checkpoint_path(dir, "ckpt", 2000);
    g_assert_cmpstr(latest, ==, want);
    g_assert_false(cl_checkpoint_rotate(dir, "ckpt", 0, &error));
    g_assert_error(error, CL_CHECKPOINT_ERROR, CL_CHECKPOINT_ERROR_INPUT);
}

/* ---- training log --------------------------------------------------------------------------- */

static gint64 fake_us;
static gint64 fake_clock(gpointer data)
{
    (void)data;
    return fake_us;
}

static GPtrArray *read_jsonl(const char *path)
{
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    GPtrArray *rows = g_ptr_array_new_with_free_func((GDestroyNotify)json_node_unref);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (guint i = 0; lines[i]; i++) {
        if (!*lines[i]) {
            g_assert_null(lines[i + 1]); /* only the final newline leaves an empty piece */
            continue;
        }
        g_autoptr(GError) error = NULL;
        JsonNode *node = json_from_string(lines[i], &error);
        if (!node)
            g_error("log line %u is not JSON (%s): %s", i + 1, error->message, lines[i]);
        g_assert_true(JSON_NODE_HOLDS_OBJECT(node));
        g_ptr_array_add(rows, node);
    }
    return rows;
}

static void test_trainlog(void)
{
    g_autofree char *path = g_build_filename(tmpdir, "train.jsonl", NULL);
    g_autofree char *prog_path = g_build_filename(tmpdir, "progress.txt", NULL);
    FILE *prog = g_fopen(prog_path, "w");
    g_assert_nonnull(prog);
    ClTrainLogOptions o = {
        .total_steps = 10, .progress = prog, .progress_every = 4, .now_us = fake_clock
    };
    fake_us = 1000000;
    g_autoptr(GError) error = NULL;
    ClTrainLog *log = cl_trainlog_open(path, &o, &error);
    g_assert_no_error(error);
    for (gint64 s = 1; s <= 10; s++) {
        fake_us += 500000; /* 0.5 s a step */
        ClTrainLogStep r = { .step = s,
                             .loss = s == 7 ? NAN : 3.0 / s,
                             .lr = 1e-3 * s,
                             .grad_norm = 0.5,
                             .tokens = 100,
                             .samples = 8 };
        g_assert_true(cl_trainlog_step(log, &r, &error));
        if (s == 5) {
            const char *names[] = { "loss", "bleu\"4" };
            double values[] = { 1.25, 0.5 };
            g_assert_true(cl_trainlog_eval(log, s, names, values, 2, &error));
        }
    }
    g_assert_true(cl_trainlog_close(log, &error));
    g_assert_no_error(error);
    fclose(prog);

    g_autoptr(GPtrArray) rows = read_jsonl(path);
    g_assert_cmpuint(rows->len, ==, 11);
    guint train = 0;
    for (guint i = 0; i < rows->len; i++) {
        JsonObject *row = json_node_get_object(g_ptr_array_index(rows, i));
        const char *type = json_object_get_string_member(row, "type");
        if (strcmp(type, "eval") == 0) {
            g_assert_cmpint(json_object_get_int_member(row, "step"), ==, 5);
            JsonObject *m = json_object_get_object_member(row, "metrics");
            g_assert_cmpfloat(json_object_get_double_member(m, "loss"), ==, 1.25);
            g_assert_cmpfloat(json_object_get_double_member(m, "bleu\"4"), ==, 0.5);
            continue;
        }
        g_assert_cmpstr(type, ==, "train");
        gint64 s = ++train;
        g_assert_cmpint(json_object_get_int_member(row, "step"), ==, s);
        if (s == 7)
            g_assert_true(JSON_NODE_HOLDS_NULL(json_object_get_member(row, "loss")));
        else
            g_assert_cmpfloat_with_epsilon(json_object_get_double_member(row, "loss"), 3.0 / s,
                                           1e-8);
        g_assert_cmpfloat_with_epsilon(json_object_get_double_member(row, "lr"), 1e-3 * s, 1e-12);
        g_assert_cmpint(json_object_get_int_member(row, "tokens"), ==, 100);
        /* 8 samples per 0.5 s; ETA = steps left at 2 steps/s; elapsed = 0.5 s per step */
        g_assert_cmpfloat_with_epsilon(json_object_get_double_member(row, "samples_per_s"), 16,
                                       1e-6);
        g_assert_cmpfloat_with_epsilon(json_object_get_double_member(row, "tokens_per_s"), 200,
                                       1e-6);
        g_assert_cmpfloat_with_epsilon(json_object_get_double_member(row, "elapsed_s"), 0.5 * s,
                                       1e-9);
        g_assert_cmpfloat_with_epsilon(json_object_get_double_member(row, "eta_s"), (10 - s) / 2.0,
                                       1e-9);
    }
    g_assert_cmpuint(train, ==, 10);

    /* not a terminal: a plain line at steps 4, 8 and the last */
    g_autofree char *progress = NULL;
    g_assert_true(g_file_get_contents(prog_path, &progress, NULL, NULL));
    g_auto(GStrv) plines = g_strsplit(progress, "\n", -1);
    g_assert_cmpuint(g_strv_length(plines), ==, 4);
    g_assert_true(g_str_has_prefix(plines[0], "step 4/10"));
    g_assert_true(g_str_has_prefix(plines[2], "step 10/10"));
    g_assert_nonnull(strstr(plines[0], "16.0 samples/s"));
    g_assert_nonnull(strstr(plines[0], "eta 0:03"));
    g_assert_null(strchr(progress, '\r'));

    /* a resume appends, and counts elapsed time on from the earlier run's */
    ClTrainLogOptions r = { .total_steps = 12,
                            .start_step = 10,
                            .start_elapsed_s = 5.0,
                            .append = TRUE,
                            .quiet = TRUE,
                            .now_us = fake_clock };
    log = cl_trainlog_open(path, &r, &error);
    g_assert_no_error(error);
    fake_us += 1000000;
    ClTrainLogStep rec = {
        .step = 11, .loss = 0.1, .lr = 1e-4, .grad_norm = INFINITY, .tokens = 10, .samples = 2
    };
    g_assert_true(cl_trainlog_step(log, &rec, &error));
    g_assert_false(cl_trainlog_write_raw(log, "{\"a\":1}\n{\"b\":2}", &error));
    g_clear_error(&error);
    g_assert_true(cl_trainlog_write_raw(log, "{\"type\":\"skip\",\"step\":12}", &error));
    g_assert_true(cl_trainlog_close(log, &error));
    g_autoptr(GPtrArray) rows2 = read_jsonl(path);
    g_assert_cmpuint(rows2->len, ==, 13);
    JsonObject *last = json_node_get_object(g_ptr_array_index(rows2, 11));
    g_assert_cmpfloat_with_epsilon(json_object_get_double_member(last, "elapsed_s"), 6.0, 1e-9);
    g_assert_cmpfloat_with_epsilon(json_object_get_double_member(last, "eta_s"), 1.0, 1e-9);
    g_assert_true(JSON_NODE_HOLDS_NULL(json_object_get_member(last, "grad_norm")));

    /* an unwritable path is an error with the name in it */
    g_autofree char *bad = g_build_filename(tmpdir, "no-such-dir", "log.jsonl", NULL);
    g_assert_null(cl_trainlog_open(bad, NULL, &error));
    g_assert_nonnull(error);
    g_assert_nonnull(strstr(error->message, "log.jsonl"));

    g_autofree char *d1 = cl_trainlog_format_duration(3723);
    g_autofree char *d2 = cl_trainlog_format_duration(65);
    g_autofree char *d3 = cl_trainlog_format_duration(NAN);
    g_assert_cmpstr(d1, ==, "1:02:03");
    g_assert_cmpstr(d2, ==, "1:05");
    g_assert_cmpstr(d3, ==, "?");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    tmpdir = cl_fixture_tmpdir("test-optim");
    g_test_add_func("/optim/adamw-vs-torch", test_adamw_torch);
    g_test_add_func("/optim/schedule", test_schedule);
    g_test_add_func("/optim/clip", test_clip);
    g_test_add_func("/optim/decay-mask", test_decay_mask);
    g_test_add_func("/optim/accumulate", test_accumulate);
    g_test_add_func("/optim/update-ranges", test_update_ranges);
    g_test_add_func("/optim/checkpoint-roundtrip", test_checkpoint_roundtrip);
    g_test_add_func("/optim/resume-exact", test_resume_exact);
    g_test_add_func("/optim/checkpoint-refused", test_checkpoint_refused);
    g_test_add_func("/optim/checkpoint-rotation", test_rotation);
    g_test_add_func("/optim/trainlog", test_trainlog);
    int rc = g_test_run();
    cl_fixture_rmdir(tmpdir);
    g_free(tmpdir);
    return rc;
}
