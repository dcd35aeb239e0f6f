/* train-step-check.c - a training step on a device against the CPU's (train-step-check.h). */
#include "train-step-check.h"

#include <math.h>
#include <string.h>

#include <glib.h>

#include "fixtures.h"
#include "model/config.h"
#include "model/model.h"
#include "train/devicestep.h"
#include "train/trainer.h"
#include "train/optim.h"
#include "train/params.h"
#include "train/trainmodel.h"

#define N_IMAGES 2
#define BATCH 2
#define STEPS 2
#define LR 1e-3
/* small enough that every step clips */
#define CLIP 0.05

typedef struct {
    ClBackend *dev;
    ClSveVariant variant;
    gboolean stop_grad;
    double atol, rtol;
} Case;

/* A model small enough for a test, with every encoder part the photo model trains: the change
 * head and marker, an object head, learned positions, centred visual tokens; GQA in the
 * decoder. Random norms and biases too, so that every gradient is exercised. */
static ClModel *small_model(ClSveVariant v)
{
    ClModelConfig cfg;
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_model_config_preset(&cfg, "tiny", &err));
    cfg.image_size = 32, cfg.patch_size = 8;
    cfg.enc_dim = 16, cfg.enc_depth = 2, cfg.enc_heads = 2, cfg.enc_mlp = 24;
    cfg.enc_rope_base = 100.0;
    cfg.merger_hidden = 20;
    cfg.dec_dim = 16, cfg.dec_depth = 2, cfg.dec_heads = 2, cfg.dec_kv_heads = 1;
    cfg.dec_mlp = 24, cfg.vocab_size = 300, cfg.max_len = 64;
    cfg.sve_variant = v;
    cfg.sve_out_init_std = 0.3;
    cfg.visual_pos = cfg.visual_center = cfg.enc_pos = TRUE;
    cfg.change_head = cfg.change_marker = TRUE;
    cfg.n_objects = 3;
    g_strlcpy(cfg.object_names[0], "cat", CL_CONFIG_OBJECT_NAME);
    g_strlcpy(cfg.object_names[1], "dog", CL_CONFIG_OBJECT_NAME);
    g_strlcpy(cfg.object_names[2], "top hat", CL_CONFIG_OBJECT_NAME);
    g_assert_true(cl_model_config_validate(&cfg, &err));
    ClModel *m = cl_model_new_random(&cfg, 40 + v, &err);
    g_assert_no_error(err);
    g_assert_true(cl_model_make_trainable(m, &err));
    GRand *r = g_rand_new_with_seed(41 + v);
    for (size_t i = 0; i < m->n_params; i++)
        m->arena[i] += (float)g_rand_double_range(r, -0.15, 0.15);
    g_rand_free(r);
    return m;
}

/* Two images with text between and after, every text position supervised, and dense targets
 * (objects, labels, changes) for the auxiliary losses. */
static ClTrainSample *small_sample(const ClModel *m, guint32 seed)
{
    const ClModelConfig *cfg = &m->config;
    const int M = cl_config_n_visual(cfg), S = cfg->image_size, C = cfg->channels;
    const int G = cl_config_grid(cfg);
    ClTrainSample *s = g_new0(ClTrainSample, 1);
    GRand *r = g_rand_new_with_seed(seed);
    s->n_images = N_IMAGES, s->channels = C, s->size = S, s->n_visual_per_image = M;
    const size_t np = (size_t)N_IMAGES * C * S * S;
    s->pixels = g_new(float, np);
    for (size_t i = 0; i < np; i++)
        s->pixels[i] = (float)g_rand_double_range(r, -1, 1);
    s->n_ids = N_IMAGES * (M + 2) + 6;
    s->ids = g_new(gint32, s->n_ids);
    int at = 0;
    for (int t = 0; t < N_IMAGES; t++) {
        s->ids[at++] = g_rand_int_range(r, 0, cfg->vocab_size);
        for (int j = 0; j < M; j++)
            s->ids[at++] = -1;
        s->ids[at++] = g_rand_int_range(r, 0, cfg->vocab_size);
    }
    while (at < s->n_ids)
        s->ids[at++] = g_rand_int_range(r, 0, cfg->vocab_size);
    s->mask = g_new0(guint8, s->n_ids);
    for (int t = 1; t + 1 < s->n_ids; t++)
        if (s->ids[t + 1] >= 0 && (s->mask[t] = 1))
            s->n_supervised++;
    const size_t n = (size_t)N_IMAGES * G * G;
    s->grid = G;
    s->aux_objects = g_new0(guint64, n);
    s->aux_changed = g_new0(guint8, n);
    s->aux_labels = g_new0(guint32, n);
    for (size_t i = 0; i < n; i++) {
        if (g_rand_boolean(r)) {
            s->aux_objects[i] = (guint64)1 << g_rand_int_range(r, 0, 64);
            s->aux_labels[i] = (guint32)g_rand_int_range(r, 1, 1 << CL_TRAIN_AUX_N_LABELS);
        }
        s->aux_changed[i] = i >= (size_t)G * G && g_rand_int_range(r, 0, 3) == 0;
    }
    s->id = g_strdup_printf("step-check-%u", seed);
    g_rand_free(r);
    return s;
}

static ClTrainAuxHeads *random_heads(int dim)
{
    g_autoptr(GError) err = NULL;
    ClTrainAuxHeads *h = cl_train_aux_heads_new(dim, &err);
    g_assert_no_error(err);
    GRand *r = g_rand_new_with_seed(43);
    for (size_t i = 0; i < h->n; i++)
        h->data[i] = (float)g_rand_double_range(r, -0.5, 0.5);
    g_rand_free(r);
    return h;
}

/* The largest |a − b| over n floats (NaN anywhere: +inf). */
static double max_diff(const float *a, const float *b, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - b[i]);
        if (isnan(d))
            return INFINITY;
        worst = MAX(worst, d);
    }
    return worst;
}

static void check(const char *what, const float *cpu, const float *dev, size_t n, double atol)
{
    const double d = max_diff(cpu, dev, n);
    if (d > atol)
        g_error("%s: the device's differ from the CPU's by up to %g (allowed %g)", what, d, atol);
}

static void test_step(gconstpointer data)
{
    const Case *c = data;
    g_autoptr(GError) err = NULL;
    g_autoptr(ClModel) cm = small_model(c->variant);
    g_autoptr(ClModel) dm = small_model(c->variant);
    const ClModelConfig *cfg = &cm->config;
    g_autoptr(ClTrainAuxHeads) ch = random_heads(cfg->enc_dim);
    g_autoptr(ClTrainAuxHeads) dh = random_heads(cfg->enc_dim);
    ClAdamWOptions ao;
    cl_adamw_options_init(&ao);
    g_autoptr(ClAdamW) copt = cl_adamw_new_for_config(cfg, &ao, &err);
    g_autoptr(ClAdamW) dopt = cl_adamw_new_for_config(cfg, &ao, &err);
    g_autoptr(ClAdamW) caux = cl_adamw_new(ch->n, &ao, &err);
    g_autoptr(ClAdamW) daux = cl_adamw_new(dh->n, &ao, &err);
    g_assert_no_error(err);
    ClTrainSample *samples[BATCH];
    for (int k = 0; k < BATCH; k++)
        samples[k] = small_sample(cm, 50 + k);
    ClTrainGradOptions o;
    cl_train_grad_options_init(&o);
    o.stop_grad = c->stop_grad;
    o.aux_objects_weight = 0.7, o.aux_changed_weight = 1.3;

    g_autoptr(ClBackend) cpu = cl_backend_cpu_new(1);
    g_autoptr(ClParamBuf) g = cl_param_buf_new(cfg, &err);
    g_autoptr(ClTrainAuxHeads) hg = cl_train_aux_heads_new(cfg->enc_dim, &err);
    g_assert_no_error(err);
    g_autoptr(ClTrainDevice) d = cl_train_device_new(c->dev, dm, dopt, dh, daux, &err);
    g_assert_no_error(err);

    for (int step = 0; step < STEPS; step++) {
        /* the CPU trainer's step on one worker (parallel.c, trainer.c's step_update) */
        cl_param_buf_zero(g);
        cl_train_aux_heads_zero(hg);
        o.aux_heads = ch;
        for (int k = 0; k < BATCH; k++) {
            ClTrainStepStats st;
            gboolean ok = cl_train_forward_backward_aux(cpu, cm, samples[k], &o, g, hg, &st, &err);
            g_assert_no_error(err);
            g_assert_true(ok);
        }
        cl_grad_scale(g->data, g->n, 1.0 / BATCH);
        cl_grad_scale(hg->data, hg->n, 1.0 / BATCH);
        const double norm = cl_grad_norm(g->data, g->n);
        g_assert_true(norm > CLIP);
        cl_adamw_next_step(copt);
        cl_adamw_update_range(copt, cm->arena, g->data, LR, (float)(CLIP / norm), 0, g->n);
        g_assert_true(cl_optim_step(caux, ch->data, hg->data, LR, CLIP, NULL, &err));

        /* the device's */
        cl_train_device_zero_grads(d);
        o.aux_heads = dh;
        for (int k = 0; k < BATCH; k++) {
            ClTrainStepStats st;
            gboolean ok = cl_train_device_sample(d, samples[k], &o, &st, &err);
            g_assert_no_error(err);
            g_assert_true(ok);
        }
        double dnorm = 0;
        g_assert_true(cl_train_device_update(d, dopt, daux, NULL, BATCH, LR, CLIP, &dnorm, &err));
        g_assert_no_error(err);
        if (fabs(dnorm - norm) > c->rtol * norm)
            g_error("step %d: gradient norm %.9g on the device, %.9g on the CPU", step, dnorm,
                    norm);
        g_assert_cmpint(dopt->step, ==, copt->step);
    }
    g_assert_true(cl_train_device_sync(d, dm, dopt, dh, daux, &err));
    g_assert_no_error(err);
    check("parameters", cm->arena, dm->arena, cm->n_params, c->atol);
    check("first moments", copt->m, dopt->m, cm->n_params, c->atol);
    check("second moments", copt->v, dopt->v, cm->n_params, c->atol);
    check("auxiliary heads", ch->data, dh->data, ch->n, c->atol);
    check("auxiliary heads' first moments", caux->m, daux->m, ch->n, c->atol);
    /* the steps moved the parameters: the comparison is not of two untouched copies */
    g_autoptr(ClModel) init = small_model(c->variant);
    g_assert_cmpfloat(max_diff(init->arena, dm->arena, dm->n_params), >, 0.5 * LR);
    for (int k = 0; k < BATCH; k++)
        cl_train_sample_free(samples[k]);
}

/* ---- the whole trainer on the device ---------------------------------------------------------- */

static ClModelConfig trainer_config(void)
{
    ClModelConfig cfg;
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_model_config_preset(&cfg, "tiny", &err));
    cfg.image_size = 64, cfg.patch_size = 8;
    cfg.enc_dim = 32, cfg.enc_depth = 2, cfg.enc_heads = 2, cfg.enc_mlp = 32;
    cfg.merger_hidden = 32;
    cfg.dec_dim = 32, cfg.dec_depth = 2, cfg.dec_heads = 2, cfg.dec_kv_heads = 1;
    cfg.dec_mlp = 64, cfg.vocab_size = 300, cfg.max_len = 1024;
    cfg.change_head = TRUE;
    g_assert_true(cl_model_config_validate(&cfg, &err));
    return cfg;
}

static void cancel_at_3(const ClTrainerStatus *st, gpointer data)
{
    if (st->step == 3)
        g_cancellable_cancel(data);
}

/* A run of 6 steps of the shapes task (both auxiliary losses on, a checkpoint every 3 steps) in
 * dir, on the CPU's one worker or on dev (NULL: the CPU); stop3: cancelled after step 3 (its
 * checkpoint written), NULL returned; resume: from dir's newest checkpoint. Returns the final
 * model. */
static ClModel *trainer_run(const char *dir, ClBackend *dev, gboolean stop3, gboolean resume)
{
    static ClModelConfig cfg;
    cfg = trainer_config();
    ClTrainerOptions o;
    cl_trainer_options_init(&o);
    o.config = &cfg;
    o.task = "shapes";
    o.steps = 6, o.batch = 2, o.lr = 3e-3, o.warmup = 2, o.seed = 5;
    o.checkpoint_every = 3, o.keep_checkpoints = 0;
    o.workers = 1;
    o.out_dir = dir;
    o.quiet = TRUE;
    o.resume = resume;
    o.device_backend = dev;
    g_autoptr(GError) err = NULL;
    g_autoptr(GCancellable) cancel = g_cancellable_new();
    ClTrainerResult res = { 0 };
    gboolean ok = cl_trainer_run(&o, stop3 ? cancel_at_3 : NULL, cancel, cancel, &res, &err);
    if (stop3) {
        g_assert_error(err, G_IO_ERROR, G_IO_ERROR_CANCELLED);
        g_assert_false(ok);
        cl_trainer_result_clear(&res);
        return NULL;
    }
    g_assert_no_error(err);
    g_assert_true(ok);
    ClModel *m = cl_model_load(res.model_path, &err);
    g_assert_no_error(err);
    g_assert_true(cl_model_make_trainable(m, &err)); /* (its parameters as one array) */
    cl_trainer_result_clear(&res);
    return m;
}

typedef struct {
    ClBackend *dev;
    double atol;
} TrainerCase;

/* The trainer with its steps on the device gives the CPU run's model; a device run's checkpoint
 * resumes on the CPU and a CPU run's on the device. */
static void test_trainer(gconstpointer data)
{
    const TrainerCase *c = data;
    g_autoptr(GError) err = NULL;
    g_autofree char *tmp = cl_fixture_tmpdir("train-device");
    g_autofree char *d_cpu = g_build_filename(tmp, "cpu", NULL);
    g_autofree char *d_dev = g_build_filename(tmp, "device", NULL);
    g_autofree char *d_mix = g_build_filename(tmp, "device-then-cpu", NULL);
    g_autofree char *d_mix2 = g_build_filename(tmp, "cpu-then-device", NULL);
    g_autoptr(ClModel) cpu = trainer_run(d_cpu, NULL, FALSE, FALSE);
    g_autoptr(ClModel) dev = trainer_run(d_dev, c->dev, FALSE, FALSE);
    check("trained on the device", cpu->arena, dev->arena, cpu->n_params, c->atol);
    g_assert_null(trainer_run(d_mix, c->dev, TRUE, FALSE));
    g_autoptr(ClModel) mix = trainer_run(d_mix, NULL, FALSE, TRUE);
    check("resumed on the CPU", cpu->arena, mix->arena, cpu->n_params, c->atol);
    g_assert_null(trainer_run(d_mix2, NULL, TRUE, FALSE));
    g_autoptr(ClModel) mix2 = trainer_run(d_mix2, c->dev, FALSE, TRUE);
    check("resumed on the device", cpu->arena, mix2->arena, cpu->n_params, c->atol);
    /* the steps moved the parameters: against the untrained model */
    ClModelConfig cfg = trainer_config();
    g_autoptr(ClModel) init = cl_model_new_random(&cfg, 5, &err);
    g_assert_no_error(err);
    g_assert_true(cl_model_make_trainable(init, &err));
    g_assert_cmpfloat(max_diff(init->arena, cpu->arena, cpu->n_params), >, 1e-3);
    cl_fixture_rmdir(tmp);
}

void cl_test_add_train_step_checks(const char *prefix, ClBackend *dev, double atol, double rtol)
{
    TrainerCase *tc = g_new0(TrainerCase, 1); /* (kept for the run's lifetime) */
    /* its run is longer (6 steps at 3e-3 against 2 at 1e-3): an update's sign may flip on a
     * gradient near 0 at each step */
    tc->dev = dev, tc->atol = 10 * atol;
    g_autofree char *tpath = g_strdup_printf("%s/train-step/trainer", prefix);
    g_test_add_data_func(tpath, tc, test_trainer);

    static const struct {
        ClSveVariant v;
        const char *name;
    } variants[] = {
        { CL_SVE_STATELESS, "stateless" },   { CL_SVE_CROSS, "cross" },
        { CL_SVE_CROSS_FFN, "cross_ffn" },   { CL_SVE_SELF_EXT, "self_ext" },
        { CL_SVE_ADALN_ZERO, "adaln_zero" }, { CL_SVE_SELF_FFN, "self_ffn" },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(variants) + 1; i++) {
        Case *c = g_new0(Case, 1); /* (kept for the run's lifetime) */
        c->dev = dev, c->atol = atol, c->rtol = rtol;
        c->variant = i < G_N_ELEMENTS(variants) ? variants[i].v : CL_SVE_CROSS_FFN;
        c->stop_grad = i < G_N_ELEMENTS(variants);
        g_autofree char *path = g_strdup_printf(
            "%s/train-step/%s", prefix,
            i < G_N_ELEMENTS(variants) ? variants[i].name : "cross_ffn-no-stop-grad");
        g_test_add_data_func(path, c, test_step);
    }
}
