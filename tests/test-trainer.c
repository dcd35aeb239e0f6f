/* test-trainer.c - the training loop (core/train/trainer.h) and `changelens-cli train` on a
 * micro model: the loss falls on the shapes task; an interrupted run and a run resumed from an
 * earlier checkpoint reproduce the uninterrupted one bit-exactly (log and parameters); the same
 * seed gives the same parameters and 1 or 2 workers the same to rounding; the SVE stage starts
 * exactly at the stage-1 model's logits and then moves the SVE weights; a JSONL data set
 * trains; bad options are refused with clear errors; the auxiliary losses fall, resume exactly
 * with their heads, and stay out of the final model. */
#include <math.h>
#include <string.h>
#include <sys/wait.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "train/checkpoint.h"
#include "fixtures.h"
#include "model/model.h"
#include "train/params.h"
#include "model/safetensors.h"
#include "synth/synth.h"
#include "train/synthdata.h"
#include "train/trainer.h"
#include "train/trainmodel.h"

static char *tmp;

/* tiny, shrunk: image 32 / patch 8 (M = 4 visual tokens per image), encoder 16 × 2, decoder
 * 32 × 2, byte vocabulary; max_len holds a shapes or dots conversation (up to ~900 byte
 * tokens) */
static void micro_config(ClModelConfig *cfg)
{
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_model_config_preset(cfg, "tiny", &err));
    cfg->image_size = 32;
    cfg->patch_size = 8;
    cfg->enc_dim = 16;
    cfg->enc_depth = 2;
    cfg->enc_heads = 2;
    cfg->enc_mlp = 32;
    cfg->merger_hidden = 32;
    cfg->dec_dim = 32;
    cfg->dec_depth = 2;
    cfg->dec_heads = 2;
    cfg->dec_kv_heads = 1;
    cfg->dec_mlp = 64;
    cfg->vocab_size = 300;
    cfg->max_len = 1024;
    g_assert_true(cl_model_config_validate(cfg, &err));
}

static ClModelConfig micro;

/* The options of the runs below: shapes, batch 4, a quick schedule. */
static void base_options(ClTrainerOptions *o, const char *out, gint64 steps)
{
    cl_trainer_options_init(o);
    o->config = &micro;
    o->task = "shapes";
    o->steps = steps;
    o->batch = 4;
    o->lr = 3e-3;
    o->warmup = 3;
    o->seed = 11;
    o->checkpoint_every = 10;
    o->keep_checkpoints = 0;
    o->out_dir = out;
    o->quiet = TRUE;
}

static char *out_dir(const char *name)
{
    return g_build_filename(tmp, name, NULL);
}

static void run_ok(const ClTrainerOptions *o, ClTrainerResult *res)
{
    g_autoptr(GError) err = NULL;
    gboolean ok = cl_trainer_run(o, NULL, NULL, NULL, res, &err);
    g_assert_no_error(err);
    g_assert_true(ok);
}

/* The train lines' losses of DIR/train.jsonl by step (index step - 1; NAN where absent), and
 * how many train lines there were. */
static GArray *logged_losses(const char *dir, guint *n_lines)
{
    g_autofree char *path = g_build_filename(dir, "train.jsonl", NULL);
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    GArray *losses = g_array_new(FALSE, FALSE, sizeof(double));
    *n_lines = 0;
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++) {
        if (!**l)
            continue;
        g_autoptr(JsonNode) node = json_from_string(*l, NULL);
        g_assert_nonnull(node);
        JsonObject *obj = json_node_get_object(node);
        if (g_strcmp0(json_object_get_string_member(obj, "type"), "train") != 0)
            continue;
        guint step = (guint)json_object_get_int_member(obj, "step");
        double nan = NAN;
        while (losses->len < step)
            g_array_append_val(losses, nan);
        g_array_index(losses, double, step - 1) = json_object_get_double_member(obj, "loss");
        (*n_lines)++;
    }
    return losses;
}

static ClModel *load_model(const char *dir)
{
    g_autofree char *path = g_build_filename(dir, "model.safetensors", NULL);
    g_autoptr(GError) err = NULL;
    ClModel *m = cl_model_load(path, &err);
    g_assert_no_error(err);
    g_assert_true(cl_model_make_trainable(m, &err));
    return m;
}

static gboolean same_params(const ClModel *a, const ClModel *b)
{
    return a->n_params == b->n_params &&
           memcmp(a->arena, b->arena, a->n_params * sizeof(float)) == 0;
}

/* ---- the loss falls ------------------------------------------------------------------------- */

static void test_loss_falls(void)
{
    g_autofree char *dir = out_dir("falls");
    ClTrainerOptions o;
    base_options(&o, dir, 30);
    g_auto(ClTrainerResult) res = { 0 };
    run_ok(&o, &res);
    g_assert_cmpint(res.steps, ==, 30);
    g_assert_cmpint(res.samples, ==, 120);
    g_assert_cmpfloat(res.samples_per_s, >, 0);
    g_assert_cmpfloat(res.tokens_per_s, >, res.samples_per_s);

    guint n = 0;
    g_autoptr(GArray) l = logged_losses(dir, &n);
    g_assert_cmpuint(n, ==, 30);
    double first = 0, last = 0;
    for (int i = 0; i < 3; i++) {
        first += g_array_index(l, double, i) / 3;
        last += g_array_index(l, double, 27 + i) / 3;
    }
    g_test_message("mean loss, steps 1-3: %.3f; steps 28-30: %.3f", first, last);
    /* from ~ln(300) = 5.7 a byte model learns the answers' template within 30 steps */
    g_assert_cmpfloat(last, <, 0.75 * first);

    /* the outputs: a loadable model and the checkpoints, the last at step 30 */
    g_autoptr(ClModel) m = load_model(dir);
    g_assert_cmpint(m->config.sve_variant, ==, CL_SVE_STATELESS);
    g_autofree char *ck10 = g_build_filename(dir, "checkpoints", NULL);
    g_autofree char *latest = cl_checkpoint_latest(ck10, "step", NULL);
    g_assert_nonnull(latest);
    g_assert_true(g_str_has_suffix(latest, "00000030.safetensors"));
}

/* ---- exact resume and determinism ---------------------------------------------------------- */

static void cancel_at_13(const ClTrainerStatus *st, gpointer data)
{
    if (st->step == 13)
        g_cancellable_cancel(data);
}

/* a task mix, so that the trainer's RNG (which draws each sample's task) matters too */
#define RESUME_TASKS "shapes,dots"

/* A mixed run's log ends with a per-task record at its last step: each task of the mix with
 * a positive mean loss, and a sample of every task drawn in 20 steps. */
static void check_task_record(const char *dir, gint64 step)
{
    g_autofree char *path = g_build_filename(dir, "train.jsonl", NULL);
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    gboolean found = FALSE;
    for (int i = 0; lines[i]; i++) {
        if (!*lines[i])
            continue;
        g_autoptr(JsonParser) p = json_parser_new();
        g_assert_true(json_parser_load_from_data(p, lines[i], -1, NULL));
        JsonObject *obj = json_node_get_object(json_parser_get_root(p));
        if (g_strcmp0(json_object_get_string_member(obj, "type"), "tasks") != 0 ||
            json_object_get_int_member(obj, "step") != step)
            continue;
        JsonObject *loss = json_object_get_object_member(obj, "loss");
        g_assert_cmpuint(json_object_get_size(loss), ==, 2);
        g_assert_cmpfloat(json_object_get_double_member(loss, "shapes"), >, 0);
        g_assert_cmpfloat(json_object_get_double_member(loss, "dots"), >, 0);
        found = TRUE;
    }
    g_assert_true(found);
}

static void test_resume(void)
{
    /* the uninterrupted run */
    g_autofree char *a = out_dir("resume-a");
    ClTrainerOptions o;
    base_options(&o, a, 20);
    o.task = RESUME_TASKS;
    g_auto(ClTrainerResult) ra = { 0 };
    run_ok(&o, &ra);
    guint na = 0;
    g_autoptr(GArray) la = logged_losses(a, &na);
    g_assert_cmpuint(na, ==, 20);
    g_autoptr(ClModel) ma = load_model(a);
    check_task_record(a, 20);

    /* resumed from A's step-10 checkpoint into another folder: steps 11..20 again */
    g_autofree char *b = out_dir("resume-b");
    g_autofree char *ck10 = g_build_filename(a, "checkpoints", "step-00000010.safetensors", NULL);
    g_assert_true(g_file_test(ck10, G_FILE_TEST_EXISTS));
    base_options(&o, b, 20);
    o.task = RESUME_TASKS;
    o.resume_from = ck10;
    g_auto(ClTrainerResult) rb = { 0 };
    run_ok(&o, &rb);
    g_assert_cmpint(rb.start_step, ==, 10);
    g_assert_cmpint(rb.steps, ==, 20);
    guint nb = 0;
    g_autoptr(GArray) lb = logged_losses(b, &nb);
    g_assert_cmpuint(nb, ==, 10);
    for (guint s = 10; s < 20; s++)
        g_assert_cmpfloat(g_array_index(lb, double, s), ==, g_array_index(la, double, s));
    g_autoptr(ClModel) mb = load_model(b);
    g_assert_true(same_params(ma, mb));

    /* interrupted at step 13 (as Ctrl-C does), then --resume in the same folder: the log is cut
     * back to the checkpoint and continued, one line per step, the parameters those of A */
    g_autofree char *c = out_dir("resume-c");
    base_options(&o, c, 20);
    o.task = RESUME_TASKS;
    g_autoptr(GCancellable) cancel = g_cancellable_new();
    g_auto(ClTrainerResult) rc = { 0 };
    g_autoptr(GError) err = NULL;
    g_assert_false(cl_trainer_run(&o, cancel_at_13, cancel, cancel, &rc, &err));
    g_assert_error(err, G_IO_ERROR, G_IO_ERROR_CANCELLED);
    g_assert_true(rc.cancelled);
    g_assert_true(g_str_has_suffix(rc.checkpoint_path, "step-00000013.safetensors"));
    g_autofree char *cmodel = g_build_filename(c, "model.safetensors", NULL);
    g_assert_false(g_file_test(cmodel, G_FILE_TEST_EXISTS));
    o.resume = TRUE;
    g_auto(ClTrainerResult) rc2 = { 0 };
    run_ok(&o, &rc2);
    g_assert_cmpint(rc2.start_step, ==, 13);
    guint nc = 0;
    g_autoptr(GArray) lc = logged_losses(c, &nc);
    g_assert_cmpuint(nc, ==, 20);
    for (guint s = 0; s < 20; s++)
        g_assert_cmpfloat(g_array_index(lc, double, s), ==, g_array_index(la, double, s));
    g_autoptr(ClModel) mc = load_model(c);
    g_assert_true(same_params(ma, mc));

    /* a resume with other options is refused, naming the option */
    base_options(&o, c, 20);
    o.task = RESUME_TASKS;
    o.lr = 1e-3;
    o.resume_from = ck10;
    g_clear_error(&err);
    g_assert_false(cl_trainer_run(&o, NULL, NULL, NULL, NULL, &err));
    g_assert_error(err, CL_TRAINER_ERROR, CL_TRAINER_ERROR_RESUME);
    g_assert_nonnull(strstr(err->message, "lr"));

    /* a checkpoint of another config is refused */
    ClModelConfig other = micro;
    other.dec_mlp = 48;
    base_options(&o, c, 20);
    o.task = RESUME_TASKS;
    o.config = &other;
    o.resume_from = ck10;
    g_clear_error(&err);
    g_assert_false(cl_trainer_run(&o, NULL, NULL, NULL, NULL, &err));
    g_assert_error(err, CL_CHECKPOINT_ERROR, CL_CHECKPOINT_ERROR_MISMATCH);
    g_assert_nonnull(strstr(err->message, "dec_mlp"));
}

static void test_determinism(void)
{
    /* same seed, same workers: the same bits; another seed: other parameters; 1 worker vs 2:
     * the same run to rounding (the gradient sums are ordered differently) */
    ClModel *m[4];
    const int workers[4] = { 2, 2, 2, 1 };
    const guint64 seeds[4] = { 5, 5, 6, 5 };
    for (int i = 0; i < 4; i++) {
        g_autofree char *name = g_strdup_printf("det-%d", i);
        g_autofree char *dir = out_dir(name);
        ClTrainerOptions o;
        base_options(&o, dir, 4);
        o.seed = seeds[i];
        o.workers = workers[i];
        g_auto(ClTrainerResult) r = { 0 };
        run_ok(&o, &r);
        g_assert_cmpint(r.workers, ==, workers[i]);
        m[i] = load_model(dir);
    }
    g_assert_true(same_params(m[0], m[1]));
    g_assert_false(same_params(m[0], m[2]));
    double max_diff = 0, max_step = 0;
    ClModelConfig stateless = micro;
    stateless.sve_variant = CL_SVE_STATELESS; /* what the pretrain stage trains */
    g_autoptr(ClModel) init = cl_model_new_random(&stateless, 5, NULL);
    g_assert_cmpuint(init->n_params, ==, m[0]->n_params);
    for (size_t i = 0; i < m[0]->n_params; i++) {
        max_diff = MAX(max_diff, fabs((double)m[0]->arena[i] - m[3]->arena[i]));
        max_step = MAX(max_step, fabs((double)m[0]->arena[i] - init->arena[i]));
    }
    g_test_message("1 vs 2 workers: max |diff| %.3g; max |update| %.3g", max_diff, max_step);
    /* 4 Adam steps move parameters by up to ~4 lr = 1.2e-2; reordered float sums change a
     * gradient's last bits, which Adam's normalisation can turn into a few 1e-4 at most */
    g_assert_cmpfloat(max_step, >, 1e-3);
    g_assert_cmpfloat(max_diff, <, 1e-3);
    for (int i = 0; i < 4; i++)
        cl_model_free(m[i]);
}

/* ---- the auxiliary losses ------------------------------------------------------------------ */

/* The "aux" lines of DIR/train.jsonl: objects_loss, changed_loss per step (2 per step, from
 * the first logged step on). */
static GArray *logged_aux(const char *dir)
{
    g_autofree char *path = g_build_filename(dir, "train.jsonl", NULL);
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    GArray *out = g_array_new(FALSE, FALSE, sizeof(double));
    gint64 first = -1;
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++) {
        g_autoptr(JsonNode) node = **l ? json_from_string(*l, NULL) : NULL;
        if (!node)
            continue;
        JsonObject *obj = json_node_get_object(node);
        if (g_strcmp0(json_object_get_string_member(obj, "type"), "aux") != 0)
            continue;
        gint64 step = json_object_get_int_member(obj, "step");
        if (first < 0)
            first = step;
        g_assert_cmpint(step, ==, first + out->len / 2); /* one line per step */
        double v[2] = { json_object_get_double_member(obj, "objects_loss"),
                        json_object_get_double_member(obj, "changed_loss") };
        g_array_append_vals(out, v, 2);
    }
    return out;
}

/* The final checkpoint's extra tensor `name`, copied (NULL when absent). */
static float *checkpoint_extra(const char *dir, gint64 step, const char *name, size_t *n)
{
    g_autofree char *ckdir = g_build_filename(dir, "checkpoints", NULL);
    g_autofree char *path = cl_checkpoint_path(ckdir, "step", step);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClCheckpoint) ck = cl_checkpoint_load(path, &err);
    g_assert_no_error(err);
    const ClCheckpointExtra *x = cl_checkpoint_state_extra(&ck->state, name);
    if (!x)
        return NULL;
    *n = x->n;
    return g_memdup2(x->data, x->n * sizeof(float));
}

static void test_aux(void)
{
    /* 20 steps with the auxiliary losses (on by default): both fall */
    g_autofree char *a = out_dir("aux-a");
    ClTrainerOptions o;
    base_options(&o, a, 20);
    g_assert_cmpfloat(o.aux_weight_objects, ==, 1.0);
    g_assert_cmpfloat(o.aux_weight_changed, ==, 1.0);
    /* the zero-initialised heads move by about lr per step (Adam): a higher rate than the
     * caption runs' so that 20 steps show it on a 16-wide encoder */
    o.lr = 1e-2;
    /* an 8 x 8 grid, where a change covers a minority of the patches (on 4 x 4 about half:
     * nothing for 20 steps to learn from) */
    ClModelConfig fine = micro;
    fine.image_size = 64;
    o.config = &fine;
    g_auto(ClTrainerResult) ra = { 0 };
    run_ok(&o, &ra);
    g_autoptr(GArray) la = logged_aux(a);
    g_assert_cmpuint(la->len, ==, 40);
    double first[2] = { 0, 0 }, last[2] = { 0, 0 };
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++) {
            first[k] += g_array_index(la, double, 2 * i + k) / 3;
            last[k] += g_array_index(la, double, 2 * (17 + i) + k) / 3;
        }
    g_test_message("aux losses, steps 1-3 → 18-20: objects %.4f → %.4f, changed %.4f → %.4f",
                   first[0], last[0], first[1], last[1]);
    /* zero heads start at ln 2 = 0.693 (p = 0.5) per logit: the objects head has one for
     * "an object" and one per attribute label (the synthetic samples carry labels) */
    g_assert_cmpfloat(fabs(g_array_index(la, double, 0) - CL_TRAIN_AUX_N_OBJECT_OUT * G_LN2), <,
                      1e-6);
    g_assert_cmpfloat(fabs(g_array_index(la, double, 1) - G_LN2), <, 1e-6);
    g_assert_cmpfloat(last[0], <, first[0] - 0.01);
    g_assert_cmpfloat(last[1], <, first[1] - 0.01);
    /* the log writes 9 significant digits */
    g_assert_cmpfloat_with_epsilon(ra.final_aux_objects_loss, g_array_index(la, double, 38), 1e-8);
    g_assert_cmpfloat_with_epsilon(ra.final_aux_changed_loss, g_array_index(la, double, 39), 1e-8);

    /* the checkpoints carry the heads and their moments; the model file has no aux tensor and
     * loads as a model */
    size_t n = 0;
    g_autofree float *ha = checkpoint_extra(a, 20, "aux.objects.weight", &n);
    g_assert_nonnull(ha);
    g_assert_cmpuint(n, ==, (guint)(CL_TRAIN_AUX_N_OBJECT_OUT * micro.enc_dim));
    g_autofree float *ma_m = checkpoint_extra(a, 20, "aux.adam.m", &n);
    g_assert_nonnull(ma_m);
    g_assert_cmpuint(n, ==, (guint)((CL_TRAIN_AUX_N_OBJECT_OUT + 1) * (micro.enc_dim + 1)));
    g_autofree char *model_path = g_build_filename(a, "model.safetensors", NULL);
    {
        g_autoptr(GError) err = NULL;
        g_autoptr(ClSafetensors) st = cl_safetensors_open(model_path, &err);
        g_assert_no_error(err);
        for (guint i = 0; i < st->tensors->len; i++) {
            const ClSafeTensor *t = g_ptr_array_index(st->tensors, i);
            g_assert_false(g_str_has_prefix(t->name, "aux."));
        }
    }
    g_autoptr(ClModel) ma = load_model(a);

    /* resumed from step 10 in another folder: the same caption and auxiliary losses, the same
     * model and the same heads, bit for bit */
    g_autofree char *b = out_dir("aux-b");
    g_autofree char *ck10 = g_build_filename(a, "checkpoints", "step-00000010.safetensors", NULL);
    base_options(&o, b, 20);
    o.lr = 1e-2;
    o.config = &fine;
    o.resume_from = ck10;
    g_auto(ClTrainerResult) rb = { 0 };
    run_ok(&o, &rb);
    g_assert_cmpint(rb.start_step, ==, 10);
    g_autoptr(GArray) lb = logged_aux(b);
    g_assert_cmpuint(lb->len, ==, 20);
    for (guint i = 0; i < 20; i++)
        g_assert_cmpfloat(g_array_index(lb, double, i), ==, g_array_index(la, double, 20 + i));
    g_autoptr(ClModel) mb = load_model(b);
    g_assert_true(same_params(ma, mb));
    for (int i = 0; i < 4; i++) {
        size_t n1 = 0, n2 = 0;
        g_autofree float *x1 = checkpoint_extra(a, 20, cl_train_aux_head_names[i], &n1);
        g_autofree float *x2 = checkpoint_extra(b, 20, cl_train_aux_head_names[i], &n2);
        g_assert_cmpmem(x1, n1 * sizeof(float), x2, n2 * sizeof(float));
    }

    /* --no-aux: no aux lines, no heads in the checkpoints, and a resume of an aux run with
     * other auxiliary weights is refused, naming them */
    g_autofree char *c = out_dir("aux-c");
    base_options(&o, c, 10);
    o.aux_weight_objects = o.aux_weight_changed = 0;
    g_auto(ClTrainerResult) rc = { 0 };
    run_ok(&o, &rc);
    g_assert_true(isnan(rc.final_aux_objects_loss) && isnan(rc.final_aux_changed_loss));
    g_autoptr(GArray) lc = logged_aux(c);
    g_assert_cmpuint(lc->len, ==, 0);
    g_assert_null(checkpoint_extra(c, 10, "aux.objects.weight", &n));
    base_options(&o, c, 20);
    o.lr = 1e-2;
    o.config = &fine;
    o.aux_weight_objects = 0;
    o.resume_from = ck10;
    g_autoptr(GError) err = NULL;
    g_assert_false(cl_trainer_run(&o, NULL, NULL, NULL, NULL, &err));
    g_assert_error(err, CL_TRAINER_ERROR, CL_TRAINER_ERROR_RESUME);
    g_assert_nonnull(strstr(err->message, "aux_weight_objects"));
    /* a negative weight is a bad option */
    base_options(&o, c, 20);
    o.aux_weight_changed = -1;
    g_clear_error(&err);
    g_assert_false(cl_trainer_run(&o, NULL, NULL, NULL, NULL, &err));
    g_assert_error(err, CL_TRAINER_ERROR, CL_TRAINER_ERROR_OPTIONS);
}

/* ---- the SVE stage ------------------------------------------------------------------------- */

static void test_sve_stage(void)
{
    /* stage 1: a few steps of stateless pretraining */
    g_autofree char *s1 = out_dir("sve-stage1");
    ClTrainerOptions o;
    base_options(&o, s1, 6);
    g_auto(ClTrainerResult) r1 = { 0 };
    run_ok(&o, &r1);
    g_autoptr(ClModel) src = load_model(s1);

    /* the inserted model: the stage-1 parameters, cloned modules, zero outputs, same logits */
    base_options(&o, NULL, 1);
    o.stage = CL_TRAINER_STAGE_SVE;
    o.config = NULL;
    o.from = r1.model_path;
    g_autoptr(GError) err = NULL;
    g_autoptr(ClModel) sve = cl_trainer_make_sve_model(src, &o, &err);
    g_assert_no_error(err);
    g_assert_cmpint(sve->config.sve_variant, ==, CL_SVE_CROSS_FFN);
    g_assert_cmpuint(sve->n_params, >, src->n_params);
    const size_t D = (size_t)micro.enc_dim;
    for (int l = 0; l < micro.enc_depth; l++) {
        const ClEncoderLayerWeights *L = &sve->w.enc[l], *S = &src->w.enc[l];
        g_assert_true(memcmp(L->qkv_w, S->qkv_w, 3 * D * D * sizeof(float)) == 0);
        g_assert_true(memcmp(L->sve_q_w, S->qkv_w, D * D * sizeof(float)) == 0);
        g_assert_true(memcmp(L->sve_kv_w, S->qkv_w + D * D, 2 * D * D * sizeof(float)) == 0);
        for (size_t i = 0; i < D * D; i++)
            g_assert_cmpfloat(L->sve_out_w[i], ==, 0.0f);
    }
    ClSynthOptions so;
    cl_synth_options_for_model(&so, src);
    g_autoptr(ClSynthSample) syn = cl_synth_generate("shapes", 99, &so, &err);
    g_assert_no_error(err);
    g_autoptr(ClTrainSample) ts = cl_train_sample_from_synth(src, syn, FALSE, &err);
    g_assert_no_error(err);
    g_autoptr(ClBackend) be = cl_backend_cpu_new(1);
    g_autofree float *la = NULL, *lb = NULL;
    g_assert_true(cl_train_forward_outputs(be, src, ts, NULL, &la, &err));
    g_assert_true(cl_train_forward_outputs(be, sve, ts, NULL, &lb, &err));
    g_assert_true(memcmp(la, lb, (size_t)ts->n_ids * micro.vocab_size * sizeof(float)) == 0);

    /* the ablations change what they say */
    o.no_clone = TRUE;
    o.no_zero_init = TRUE;
    o.first_set = TRUE;
    o.first = CL_SVE_FIRST_NULL;
    o.no_cross_pos = TRUE;
    g_autoptr(ClModel) abl = cl_trainer_make_sve_model(src, &o, &err);
    g_assert_no_error(err);
    g_assert_false(memcmp(abl->w.enc[0].sve_q_w, src->w.enc[0].qkv_w, D * D * sizeof(float)) == 0);
    g_assert_cmpfloat(fabsf(abl->w.enc[0].sve_out_w[0]) + fabsf(abl->w.enc[0].sve_out_w[1]), >, 0);
    g_assert_nonnull(abl->w.enc[0].sve_null);
    g_assert_false(abl->config.sve_cross_pos);

    /* stage 2 trains: the zero-initialised outputs move */
    g_autofree char *s2 = out_dir("sve-stage2");
    base_options(&o, s2, 3);
    o.stage = CL_TRAINER_STAGE_SVE;
    o.config = NULL;
    o.from = r1.model_path;
    g_auto(ClTrainerResult) r2 = { 0 };
    run_ok(&o, &r2);
    g_autoptr(ClModel) m2 = load_model(s2);
    g_assert_cmpint(m2->config.sve_variant, ==, CL_SVE_CROSS_FFN);
    double moved = 0;
    for (int l = 0; l < micro.enc_depth; l++)
        for (size_t i = 0; i < D * D; i++)
            moved += fabs(m2->w.enc[l].sve_out_w[i]);
    g_assert_cmpfloat(moved, >, 0);

    /* a model that already has SVE modules is refused for stage 2 */
    g_autofree char *s3 = out_dir("sve-stage3");
    base_options(&o, s3, 1);
    o.stage = CL_TRAINER_STAGE_SVE;
    o.config = NULL;
    o.from = r2.model_path;
    g_clear_error(&err);
    g_assert_false(cl_trainer_run(&o, NULL, NULL, NULL, NULL, &err));
    g_assert_error(err, CL_TRAINER_ERROR, CL_TRAINER_ERROR_MODEL);
    g_assert_nonnull(strstr(err->message, "cross_ffn"));
}

/* ---- a JSONL data set ---------------------------------------------------------------------- */

static void test_jsonl(void)
{
    g_autofree char *data_dir = out_dir("jsonl-data");
    ClSynthOptions so;
    cl_synth_options_init(&so);
    so.width = so.height = micro.image_size;
    so.patch = micro.patch_size;
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_synth_write_dataset(data_dir, "shapes", 3, 3, &so, FALSE, NULL, NULL, &err));
    g_assert_no_error(err);
    g_autofree char *jsonl = g_build_filename(data_dir, "data.jsonl", NULL);

    g_autofree char *dir = out_dir("jsonl-run");
    ClTrainerOptions o;
    base_options(&o, dir, 0);
    o.task = NULL;
    o.data = jsonl;
    o.epochs = 2; /* 3 samples, batch 2: ceil(6 / 2) = 3 steps */
    o.batch = 2;
    /* a value json-glib 1.6 would write as "1e-13.0" (jsonnum.h): the run's options must still
     * be valid JSON */
    o.min_lr = 1e-13;
    g_auto(ClTrainerResult) r = { 0 };
    run_ok(&o, &r);
    g_assert_cmpint(r.steps, ==, 3);
    g_assert_cmpint(r.samples, ==, 6);
    g_assert_true(isfinite(r.final_loss) && r.final_loss > 0);
}

/* ---- the CLI ------------------------------------------------------------------------------- */

static int run_cli(const char *const *args, char **err_out)
{
    const char *cli = g_getenv("CL_CLI");
    g_assert_nonnull(cli);
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer)cli);
    g_ptr_array_add(argv, "train");
    for (const char *const *a = args; *a; a++)
        g_ptr_array_add(argv, (gpointer)*a);
    g_ptr_array_add(argv, NULL);
    int status = 0;
    g_autoptr(GError) err = NULL;
    g_autofree char *out = NULL;
    g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                               err_out, &status, &err));
    g_assert_no_error(err);
    g_assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void test_cli(void)
{
    g_autofree char *cfg = cl_model_config_to_json(&micro);
    g_autofree char *dir = out_dir("cli");
    g_autofree char *e = NULL;

    /* a short run: model, checkpoint, log, the throughput line */
    const char *ok[] = { "--config", cfg, "--task",  "shapes,dots", "--steps", "2", "--batch", "2",
                         "--out",    dir, "--dtype", "f16",         "--quiet", NULL };
    int rc = run_cli(ok, &e);
    g_assert_cmpint(rc, ==, 0);
    g_assert_nonnull(strstr(e, "samples/s"));
    g_autofree char *model = g_build_filename(dir, "model.safetensors", NULL);
    g_autofree char *ck = g_build_filename(dir, "checkpoints", "step-00000002.safetensors", NULL);
    g_assert_true(g_file_test(model, G_FILE_TEST_EXISTS));
    g_assert_true(g_file_test(ck, G_FILE_TEST_EXISTS));
    g_autoptr(GError) err = NULL;
    g_autoptr(ClModel) m = cl_model_load(model, &err);
    g_assert_no_error(err);

    /* usage errors: exit 2 and a message naming the problem */
    struct {
        const char *args[12];
        const char *says;
    } bad[] = {
        { { "--config", cfg, "--task", "shapes", "--steps", "2", NULL }, "--out" },
        { { "--config", cfg, "--task", "shapes,bogus", "--steps", "2", "--out", dir, NULL },
          "unknown task 'bogus'" },
        { { "--config", cfg, "--task", "shapes+changed", "--steps", "2", "--out", dir, NULL },
          "+changed is for the tasks with unchanged pairs" },
        { { "--config", cfg, "--task", "aerial+changedx", "--steps", "2", "--out", dir, NULL },
          "+changed is for" },
        { { "--config", cfg, "--task", "shapes", "--out", dir, NULL }, "--steps" },
        { { "--config", cfg, "--task", "shapes", "--steps", "2", "--batch", "0", "--out", dir,
            NULL },
          "--batch" },
        { { "--stage", "sve", "--config", cfg, "--task", "shapes", "--steps", "2", "--out", dir,
            NULL },
          "--from" },
        { { "--preset", "huge", "--task", "shapes", "--steps", "2", "--out", dir, NULL }, "huge" },
        { { "--config", cfg, "--steps", "2", "--out", dir, NULL }, "--task" },
        { { "--config", cfg, "--task", "shapes", "--steps", "2", "--variant", "wide", "--out", dir,
            NULL },
          "wide" },
        { { "--config", cfg, "--task", "dots", "--steps", "2", "--dot-scale", "0.5", "--out", dir,
            NULL },
          "--dot-scale must be 1 to 4" },
        { { "--config", cfg, "--task", "dots", "--steps", "2", "--dot-scale", "0", "--out", dir,
            NULL },
          "--dot-scale must be 1 to 4" },
        { { "--config", cfg, "--task", "dots", "--steps", "2", "--dot-scale", "5", "--out", dir,
            NULL },
          "--dot-scale must be 1 to 4" },
        { { "--config", cfg, "--data", "x.jsonl", "--steps", "2", "--dot-scale", "2", "--out", dir,
            NULL },
          "--dot-scale applies to synthetic tasks" },
        { { "--config", cfg, "--task", "dots", "--steps", "2", "--images", "1", "--out", dir,
            NULL },
          "--images must be 2 to 5" },
        { { "--config", cfg, "--task", "dots", "--steps", "2", "--images", "6", "--out", dir,
            NULL },
          "--images must be 2 to 5" },
        { { "--config", cfg, "--data", "x.jsonl", "--steps", "2", "--images", "2", "--out", dir,
            NULL },
          "--images applies to synthetic tasks" },
        { { "--config", cfg, "--task", "shapes,dots@1", "--steps", "2", "--out", dir, NULL },
          "only the dots task takes @K" },
        { { "--config", cfg, "--task", "dots@6", "--steps", "2", "--out", dir, NULL },
          "only the dots task takes @K" },
        { { "--config", cfg, "--task", "shapes@2", "--steps", "2", "--out", dir, NULL },
          "only the dots task takes @K" },
        { { "--config", cfg, "--task", "dots@2x", "--steps", "2", "--out", dir, NULL },
          "only the dots task takes @K" },
        { { "--config", cfg, "--task", "dots@", "--steps", "2", "--out", dir, NULL },
          "only the dots task takes @K" },
        { { "--config", cfg, "--task", "dots@+3", "--steps", "2", "--out", dir, NULL },
          "only the dots task takes @K" },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_clear_pointer(&e, g_free);
        rc = run_cli(bad[i].args, &e);
        g_test_message("case %zu: %s", i, e);
        g_assert_cmpint(rc, ==, 2);
        g_assert_nonnull(strstr(e, bad[i].says));
    }

    /* a checkpoint from another config: refused (exit 1), saying which key differs */
    ClModelConfig other = micro;
    other.dec_depth = 3;
    g_autofree char *cfg2 = cl_model_config_to_json(&other);
    const char *mismatch[] = { "--config", cfg2,      "--task", "shapes,dots", "--steps",
                               "2",        "--batch", "2",      "--out",       dir,
                               "--resume", "--quiet", NULL };
    g_clear_pointer(&e, g_free);
    rc = run_cli(mismatch, &e);
    g_assert_cmpint(rc, ==, 1);
    g_assert_nonnull(strstr(e, "dec_depth"));
}

/* One step of 4 samples of a synthetic task, with a shapes scene size, a dots scale and a dots
 * image count (0: the defaults); fills r. */
static void one_synth_step(const char *name, const char *task, int lo, int hi, double dot_scale,
                           int dot_images, ClTrainerResult *r)
{
    g_autofree char *dir = out_dir(name);
    ClTrainerOptions o;
    base_options(&o, dir, 1);
    o.task = task;
    o.checkpoint_every = 0;
    o.warmup = 0;
    o.min_objects = lo, o.max_objects = hi;
    o.dot_scale = dot_scale;
    o.dot_images = dot_images;
    run_ok(&o, r);
}

/* --objects: the shapes scenes hold that many objects (the grounded task lists each one, so the
 * answers of 1-object scenes are far shorter than those of 12-object ones, same seeds) */
static gint64 tokens_with_objects(const char *name, int lo, int hi)
{
    g_auto(ClTrainerResult) r = { 0 };
    one_synth_step(name, "shapes-ground", lo, hi, 0, 0, &r);
    return r.tokens;
}

static void test_objects(void)
{
    gint64 one = tokens_with_objects("objects-1", 1, 1);
    gint64 many = tokens_with_objects("objects-12", 12, 12);
    gint64 dflt = tokens_with_objects("objects-default", 0, 0);
    g_test_message("tokens in a step of 4 samples: 1 object %" G_GINT64_FORMAT
                   ", 12 objects %" G_GINT64_FORMAT ", default %" G_GINT64_FORMAT,
                   one, many, dflt);
    g_assert_cmpint(one, <, many - 4 * 8 * 10);
    g_assert_cmpint(one, <, dflt);
}

/* --dot-scale reaches the dots tasks' samples: 1 is the default's data, 3 other data */
static double first_loss_with_dot_scale(const char *name, double scale)
{
    g_auto(ClTrainerResult) r = { 0 };
    one_synth_step(name, "dots-ground", 0, 0, scale, 0, &r);
    return r.first_loss;
}

static void test_dot_scale(void)
{
    double dflt = first_loss_with_dot_scale("dots-default", 0);
    double one = first_loss_with_dot_scale("dots-1", 1);
    double three = first_loss_with_dot_scale("dots-3", 3);
    g_test_message("first loss: default %.6f, scale 1 %.6f, scale 3 %.6f", dflt, one, three);
    g_assert_cmpfloat(one, ==, dflt);
    g_assert_cmpfloat(three, !=, dflt);
}

/* --images reaches the dots task's samples: each image adds a user and an assistant turn and the
 * image's tokens, so 4 samples of 5 images hold far more tokens than 4 of 2 */
static gint64 tokens_with_images(const char *name, const char *task, int images)
{
    g_auto(ClTrainerResult) r = { 0 };
    one_synth_step(name, task, 0, 0, 0, images, &r);
    return r.tokens;
}

static void test_dot_images(void)
{
    gint64 two = tokens_with_images("images-2", "dots", 2);
    gint64 five = tokens_with_images("images-5", "dots", 5);
    gint64 dflt = tokens_with_images("images-default", "dots", 0);
    /* in a mix, the other tasks draw their own: the grounded one keeps its one image */
    g_assert_cmpint(tokens_with_images("images-mix", "dots,dots-ground,shapes", 3), >, 0);
    g_test_message("tokens in a step of 4 samples: 2 images %" G_GINT64_FORMAT
                   ", 5 images %" G_GINT64_FORMAT ", drawn per sample %" G_GINT64_FORMAT,
                   two, five, dflt);
    g_assert_cmpint(five, >, two + 4 * 3 * 16);
    g_assert_cmpint(two, <=, dflt);
    g_assert_cmpint(dflt, <=, five);
    /* dots@K in the task list: the same samples as --images K (same seeds, one task); in a mix
     * beside the whole task each entry keeps its own count */
    g_assert_cmpint(tokens_with_images("at-2", "dots@2", 0), ==, two);
    g_assert_cmpint(tokens_with_images("at-5", "dots@5", 0), ==, five);
    gint64 both = tokens_with_images("at-mix", "dots@2,dots@5", 0);
    g_test_message("dots@2,dots@5: %" G_GINT64_FORMAT, both);
    g_assert_cmpint(both, >, two);
    g_assert_cmpint(both, <, five);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    micro_config(&micro);
    tmp = cl_fixture_tmpdir("trainer");
    g_test_add_func("/trainer/loss-falls", test_loss_falls);
    g_test_add_func("/trainer/resume", test_resume);
    g_test_add_func("/trainer/determinism", test_determinism);
    g_test_add_func("/trainer/sve-stage", test_sve_stage);
    g_test_add_func("/trainer/jsonl", test_jsonl);
    g_test_add_func("/trainer/cli", test_cli);
    g_test_add_func("/trainer/aux", test_aux);
    g_test_add_func("/trainer/objects", test_objects);
    g_test_add_func("/trainer/dot-scale", test_dot_scale);
    g_test_add_func("/trainer/dot-images", test_dot_images);
    int rc = g_test_run();
    cl_fixture_rmdir(tmp);
    return rc;
}
