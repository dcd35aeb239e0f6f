/* trainer.c - the training loop (trainer.h): the options and their checks, then the run in its
 * steps: set-up (the stage's model from stages.c, the data from source.c, a resume's state from
 * runstate.c), the step loop over the data-parallel workers (parallel.c), the log, the
 * checkpoints and the final model. */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include <glib/gstdio.h>

#include "nn/backend.h"
#include "train/checkpoint.h"
#include "train/devicestep.h"
#include "train/jsonl.h"
#include "train/optim.h"
#include "train/params.h"
#include "model/safetensors.h"
#include "train/trainer.h"

#include "train/trainlog.h"
#include "train/trainmodel.h"
#include "train/trainer-private.h"

/* Steps in a row whose gradient may be non-finite before the run is declared diverged. */
#define MAX_NONFINITE_IN_A_ROW 10

G_DEFINE_QUARK(cl - trainer - error - quark, cl_trainer_error)

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
        if (!cl_trainer_parse_tasks(o->task, &tasks, NULL, error))
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

static gboolean log_raw(ClTrainLog *log, GError **error, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static gboolean log_raw(ClTrainLog *log, GError **error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *line = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    return cl_trainlog_write_raw(log, line, error);
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
        g_string_append_printf(
            js, "%s\"%s\":%s", i ? "," : "", name,
            n[slot[i]] ? g_ascii_formatd(b, sizeof b, "%.6g", loss[slot[i]] / n[slot[i]]) : "null");
    }
    g_string_append(js, "}}");
    return log_raw(log, error, "%s", js->str);
}

/* ---- the run -------------------------------------------------------------------------------- */

/* The losses since the last log line, and each task's since the last per-task record. */
typedef struct {
    int n_tasks;       /* the source's task entries (synthetic tasks; 0 for a data file) */
    int n_slots;       /* distinct names among them */
    int *task_slot;    /* (n_tasks) each entry's slot: a task listed twice for weight shares one */
    double *task_loss; /* (n_tasks) by slot: the caption losses' sum */
    int *task_n;       /* (n_tasks) by slot: how many samples */
    double loss, aux[2];
    int n, aux_n[2];
} Window;

typedef struct {
    ClModel *model;
    ClAdamW *opt;
    ClTrainerAux aux;
    ClTrainerSource src;
    ClTrainerWorker workers[2];
    int n_workers;
    ClTrainLog *log;
    char *options_json;
    int blas_threads;    /* OpenBLAS's setting before the run (restored), -1: untouched */
    GArray *frozen;      /* ClOptimSpan: the parameter ranges --train-only leaves alone */
    ClTrainerOptions ro; /* the options resolved: steps, warmup, min_lr */
    ClLrSchedule sched;
    char *ck_dir, *log_path, *model_path;
    ClTrainGradOptions gopt;
    ClTrainerStepJob job;
    Window win;
    /* where the run stands */
    gint64 step;
    guint64 rng;      /* the task mix's draws */
    guint64 cursor;   /* the data stream's next sample */
    int nonfinite;    /* steps in a row skipped for a non-finite gradient */
    gint64 t0;        /* when the steps began (monotonic µs) */
    ClTrainComm comm; /* MPI rank and size (0 of 1: this process alone) */
} Run;

/* One optimiser step's numbers. */
typedef struct {
    double loss;   /* the batch's mean loss */
    double aux[2]; /* the auxiliary losses' means over the samples that ran them (NaN: none) */
    gint64 tokens;
    double lr, norm;
} StepStats;

static void run_clear(Run *r)
{
    for (int w = 0; w < 2; w++) {
        g_clear_pointer(&r->workers[w].dev, cl_train_device_free);
        g_clear_pointer(&r->workers[w].be, cl_backend_free);
        g_clear_pointer(&r->workers[w].grads, cl_param_buf_free);
        g_clear_pointer(&r->workers[w].aux_grads, cl_train_aux_heads_free);
    }
    g_clear_pointer(&r->aux.heads, cl_train_aux_heads_free);
    g_clear_pointer(&r->aux.opt, cl_adamw_free);
    cl_trainer_source_clear(&r->src);
    g_clear_pointer(&r->log, cl_trainlog_free);
    g_clear_pointer(&r->opt, cl_adamw_free);
    if (r->frozen)
        g_array_free(g_steal_pointer(&r->frozen), TRUE);
    g_clear_pointer(&r->model, cl_model_free);
    g_free(r->options_json);
    if (r->blas_threads > 0)
        openblas_set_num_threads(r->blas_threads);
    g_free(r->ck_dir);
    g_free(r->log_path);
    g_free(r->model_path);
    cl_trainer_step_job_clear(&r->job);
    g_free(r->win.task_slot);
    g_free(r->win.task_loss);
    g_free(r->win.task_n);
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

/* The starting model and the output folders; for a resume, the checkpoint (*ck, from *ck_path),
 * whose model replaces the starting one (whose config it must have); then the data source,
 * which keeps the final model for its tokenizer and sizes. */
static gboolean run_open(Run *r, const ClTrainerOptions *o, ClCheckpoint **ck, char **ck_path,
                         GError **error)
{
    r->model = cl_trainer_initial_model(o, error);
    if (!r->model)
        return FALSE;

    r->ck_dir = g_build_filename(o->out_dir, "checkpoints", NULL);
    r->log_path = g_build_filename(o->out_dir, "train.jsonl", NULL);
    r->model_path = g_build_filename(o->out_dir, "model.safetensors", NULL);
    if (g_mkdir_with_parents(r->ck_dir, 0755) != 0) {
        int e = errno;
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e), "cannot create %s: %s", r->ck_dir,
                    g_strerror(e));
        return FALSE;
    }

    if (o->resume || o->resume_from) {
        *ck_path = resume_path(o, r->ck_dir, error);
        if (!*ck_path)
            return FALSE;
        *ck = cl_checkpoint_load(*ck_path, error);
        if (!*ck)
            return FALSE;
        if (!cl_checkpoint_check_config(*ck, &r->model->config, error)) {
            g_prefix_error(error, "--resume from %s: ", *ck_path);
            return FALSE;
        }
        cl_model_free(r->model);
        r->model = g_steal_pointer(&(*ck)->model);
    }
    return cl_trainer_source_open(&r->src, o, r->model, error);
}

/* r->ro (steps from epochs, warmup, min_lr), the workers, the options a checkpoint records, the
 * schedule, the optimiser's options (*aopt), and the auxiliary heads with their optimiser. */
static gboolean run_resolve(Run *r, const ClTrainerOptions *o, ClAdamWOptions *aopt, GError **error)
{
    ClTrainerOptions *ro = &r->ro;
    *ro = *o;
    if (r->model->quant) {
        g_set_error(error, CL_TRAINER_ERROR, CL_TRAINER_ERROR_MODEL,
                    "training a model with quantized decoder weights is not built yet "
                    "(convert it to f32 first)");
        return FALSE;
    }
    if (r->model->config.change_head && ro->aux_on_visual) {
        g_set_error(error, CL_TRAINER_ERROR, CL_TRAINER_ERROR_MODEL,
                    "the model's change head reads the patch tokens: it trains without "
                    "--aux-on-visual");
        return FALSE;
    }
    if (ro->steps <= 0) {
        guint n = cl_dataset_count(r->src.ds);
        ro->steps = (gint64)ceil(ro->epochs * n / ro->batch);
        ro->steps = MAX(ro->steps, 1);
    }
    if (ro->warmup < 0)
        ro->warmup = MIN(ro->steps / 20, 200);
    ro->min_lr = ro->min_lr < 0 ? ro->lr / 10 : ro->min_lr;
    r->n_workers = ro->workers > 0 ? ro->workers : cl_trainer_default_workers();
    r->n_workers = MIN(r->n_workers, MAX(ro->batch, 1));
    r->options_json = cl_trainer_options_to_json(ro);

    r->sched = (ClLrSchedule){ ro->lr, ro->min_lr, ro->warmup, ro->steps };
    if (!cl_lr_schedule_validate(&r->sched, error))
        return FALSE;
    cl_adamw_options_init(aopt);
    aopt->weight_decay = ro->weight_decay;
    if (!cl_adamw_options_validate(aopt, error))
        return FALSE;

    /* the auxiliary heads: zero-initialised (trainmodel.h), weights decay, biases do not */
    if (ro->aux_weight_objects > 0 || ro->aux_weight_changed > 0) {
        const int D = ro->aux_on_visual ? r->model->config.dec_dim : r->model->config.enc_dim;
        ClOptimSpan spans[4];
        for (size_t i = 0, at = 0; i < 4; i++) {
            const size_t n = cl_train_aux_head_len(D, (int)i);
            spans[i] = (ClOptimSpan){ at, at + n, i % 2 == 0 };
            at += n;
        }
        if (!(r->aux.heads = cl_train_aux_heads_new(D, error)) ||
            !(r->aux.opt = cl_adamw_new(r->aux.heads->n, aopt, error)) ||
            !cl_adamw_set_spans(r->aux.opt, spans, 4, error))
            return FALSE;
    }
    return TRUE;
}

/* Where the run starts: fresh (a new optimiser), or the checkpoint's step, RNG, cursor,
 * optimiser and heads, its log cut back to the step (*start_elapsed: the time it had reached);
 * then --train-only's frozen ranges. */
static gboolean run_restore(Run *r, ClCheckpoint *ck, char **ck_path, const ClAdamWOptions *aopt,
                            double *start_elapsed, ClTrainerResult *result, GError **error)
{
    r->step = 0;
    r->rng = r->ro.seed ^ G_GUINT64_CONSTANT(0x5441534b4d4958); /* "TASKMIX" */
    r->cursor = 0;
    *start_elapsed = 0;
    if (ck) {
        if (!cl_trainer_options_match(ck->state.options_json, r->options_json, error)) {
            g_prefix_error(error, "--resume from %s: ", *ck_path);
            return FALSE;
        }
        if (ck->state.n_rng != 1 ||
            !cl_trainer_parse_cursor(ck->state.cursor_json, &r->cursor, error)) {
            g_clear_error(error);
            FAIL(RESUME, "--resume from %s: the checkpoint was not written by this trainer",
                 *ck_path);
            return FALSE;
        }
        r->step = ck->state.step;
        r->rng = ck->state.rng[0];
        if (r->aux.heads && !cl_trainer_aux_restore(&r->aux, ck, error)) {
            g_prefix_error(error, "--resume from %s: ", *ck_path);
            return FALSE;
        }
        r->opt = g_steal_pointer(&ck->opt);
        if (r->step > r->ro.steps) {
            FAIL(RESUME,
                 "--resume from %s: the checkpoint is at step %" G_GINT64_FORMAT
                 ", past --steps %" G_GINT64_FORMAT,
                 *ck_path, r->step, r->ro.steps);
            return FALSE;
        }
        if (!cl_trainer_log_truncate(r->log_path, r->step, start_elapsed, error))
            return FALSE;
        result->checkpoint_path = g_steal_pointer(ck_path);
    } else {
        r->opt = cl_adamw_new_for_config(&r->model->config, aopt, error);
        if (!r->opt)
            return FALSE;
    }
    const char *train_only = r->ro.train_only;
    if (train_only && *train_only &&
        !(r->frozen = cl_trainer_freeze_others(r->model, r->opt, train_only, error)))
        return FALSE;
    return TRUE;
}

static gboolean run_start_cpu_workers(Run *r, GError **error);
static gboolean step_skipped(Run *r, GError *err, GError **error);

/* The workers: one backend and one gradient buffer each (on a device: one, holding the run's
 * state). */
static gboolean run_start_workers(Run *r, const ClTrainerOptions *o, GError **error)
{
    if (o->device_backend || (o->device && strcmp(o->device, "cpu") != 0)) {
        /* the run's state on the device (a resume's is on the host by now): one worker */
        if (r->comm.size > 1) {
            FAIL(OPTIONS, "--device %s and --mpi do not go together yet",
                 o->device ? o->device : "(a test's)");
            return FALSE;
        }
        ClTrainerWorker *wk = &r->workers[0];
        r->n_workers = 1;
        g_autofree char *notice = NULL;
        wk->be = o->device_backend ? cl_backend_ref(o->device_backend)
                                   : cl_backend_new(o->device, &notice, error);
        if (!wk->be)
            return FALSE;
        if (!o->device_backend && wk->be->ops->host_memory) { /* "auto" without a GPU */
            if (notice && !o->quiet)
                g_printerr("%s\n", notice);
            g_clear_pointer(&wk->be, cl_backend_free);
            r->n_workers = r->ro.workers > 0 ? r->ro.workers : cl_trainer_default_workers();
            r->n_workers = MIN(r->n_workers, MAX(r->ro.batch, 1));
            return run_start_cpu_workers(r, error);
        }
        wk->dev = cl_train_device_new(wk->be, r->model, r->opt, r->aux.heads, r->aux.opt, error);
        return wk->dev != NULL;
    }
    return run_start_cpu_workers(r, error);
}

static gboolean run_start_cpu_workers(Run *r, GError **error)
{
    if (r->n_workers > 1) {
        /* each worker's products single-threaded: both cores are busy with samples */
        r->blas_threads = openblas_get_num_threads();
        openblas_set_num_threads(1);
    }
    for (int w = 0; w < r->n_workers; w++) {
        ClTrainerWorker *wk = &r->workers[w];
        wk->be = cl_backend_cpu_new(r->n_workers > 1 ? 1 : 0);
        wk->grads = cl_param_buf_new(&r->model->config, error);
        if (!wk->grads)
            return FALSE;
        if (r->aux.heads && !(wk->aux_grads = cl_train_aux_heads_new(r->aux.heads->dim, error)))
            return FALSE;
    }
    g_assert(r->workers[0].grads->n == r->model->n_params);
    return TRUE;
}

/* The log (appended to on a resume) and its start line. */
static gboolean run_open_log(Run *r, const ClTrainerOptions *o, double start_elapsed,
                             GError **error)
{
    ClTrainLogOptions lopt = { 0 };
    lopt.total_steps = r->ro.steps;
    lopt.start_step = r->step;
    lopt.start_elapsed_s = start_elapsed;
    lopt.append = r->step > 0;
    lopt.progress = o->progress;
    lopt.quiet = o->quiet || r->comm.rank > 0;
    /* MPI: rank 0 writes the log; the others' lines would be the same */
    r->log = cl_trainlog_open(r->comm.rank == 0 ? r->log_path : NULL, &lopt, error);
    if (!r->log)
        return FALSE;
    return log_raw(r->log, error,
                   "{\"type\":\"start\",\"step\":%" G_GINT64_FORMAT ",\"stage\":\"%s\","
                   "\"variant\":\"%s\",\"params\":%zu,\"workers\":%d,\"ranks\":%d,"
                   "\"options\":%s}",
                   r->step, cl_trainer_stage_name(o->stage),
                   cl_sve_variant_name(r->model->config.sve_variant), r->model->n_params,
                   r->n_workers, r->comm.size, r->options_json);
}

/* The step job (the gradient options, the batch's buffers) and the loss windows. */
static void run_prepare_steps(Run *r, const ClTrainerOptions *o, GCancellable *cancellable)
{
    cl_train_grad_options_init(&r->gopt);
    r->gopt.stop_grad = !o->no_stop_grad;
    r->gopt.aux_objects_weight = r->ro.aux_weight_objects;
    r->gopt.aux_changed_weight = r->ro.aux_weight_changed;
    r->gopt.aux_on_visual = r->ro.aux_on_visual;
    r->gopt.aux_heads = r->aux.heads;
    cl_trainer_step_job_init(&r->job, r->model, &r->src, r->ro.batch, r->n_workers, &r->gopt,
                             o->all_turns, cancellable);
    r->job.rank = r->comm.rank;
    r->job.ranks = r->comm.size;

    Window *w = &r->win;
    w->n_tasks = r->src.tasks ? r->src.n_tasks : 0;
    w->task_slot = g_new0(int, MAX(w->n_tasks, 1));
    w->task_loss = g_new0(double, MAX(w->n_tasks, 1));
    w->task_n = g_new0(int, MAX(w->n_tasks, 1));
    for (int i = 0; i < w->n_tasks; i++) {
        int j = 0;
        while (j < i && strcmp(r->src.tasks[j], r->src.tasks[i]) != 0)
            j++;
        w->task_slot[i] = j < i ? w->task_slot[j] : w->n_slots++;
    }
}

/* Everything before the first step: the model, the data, the options resolved, a resume's
 * state, the workers, the log and the step job. */
static gboolean run_setup(Run *r, const ClTrainerOptions *o, GCancellable *cancellable,
                          ClTrainerResult *result, GError **error)
{
    g_autoptr(ClCheckpoint) ck = NULL;
    g_autofree char *ck_path = NULL;
    ClAdamWOptions aopt;
    double start_elapsed = 0;
    if (!run_open(r, o, &ck, &ck_path, error) || !run_resolve(r, o, &aopt, error) ||
        !run_restore(r, ck, &ck_path, &aopt, &start_elapsed, result, error) ||
        !run_start_workers(r, o, error) || !run_open_log(r, o, start_elapsed, error))
        return FALSE;
    run_prepare_steps(r, o, cancellable);
    result->start_step = r->step;
    result->workers = r->n_workers;
    return TRUE;
}

/* The batch's mean losses into *st (loss, aux, tokens), and into the windows. */
static void step_losses(Run *r, StepStats *st)
{
    const ClTrainerStepJob *j = &r->job;
    Window *w = &r->win;
    double aux[2] = { 0, 0 };
    int aux_n[2] = { 0, 0 };
    st->loss = 0;
    st->tokens = 0;
    for (int k = 0; k < j->batch; k++) {
        const ClTrainerSlot *sl = &j->slots[k];
        st->loss += sl->loss, st->tokens += sl->tokens;
        if (w->n_slots > 1) {
            const int slot = w->task_slot[sl->ref.task];
            w->task_loss[slot] += sl->loss, w->task_n[slot]++;
        }
        for (int a = 0; a < 2; a++)
            if (isfinite(sl->aux[a]))
                aux[a] += sl->aux[a], aux_n[a]++;
    }
    st->loss /= j->batch;
    for (int a = 0; a < 2; a++) {
        w->aux[a] += aux[a], w->aux_n[a] += aux_n[a];
        st->aux[a] = aux_n[a] ? aux[a] / aux_n[a] : NAN;
    }
}

/* MPI: each slot's numbers are on the rank that trained on it; every rank gets all of them. */
static void gather_slots(Run *r)
{
    if (r->comm.size <= 1)
        return;
    ClTrainerStepJob *j = &r->job;
    const int B = j->batch, F = 6; /* loss, tokens, two auxiliary losses and whether they ran */
    g_autofree double *v = g_new0(double, (size_t)B * F);
    for (int k = 0; k < B; k++) {
        const ClTrainerSlot *sl = &j->slots[k];
        if (sl->share < 0)
            continue;
        double *x = v + (size_t)k * F;
        x[0] = sl->loss, x[1] = (double)sl->tokens;
        for (int a = 0; a < 2; a++)
            if (isfinite(sl->aux[a]))
                x[2 + a] = sl->aux[a], x[4 + a] = 1;
    }
    cl_train_comm_sum_doubles(&r->comm, v, (size_t)B * F);
    for (int k = 0; k < B; k++) {
        ClTrainerSlot *sl = &j->slots[k];
        const double *x = v + (size_t)k * F;
        sl->loss = x[0], sl->tokens = (gint64)x[1];
        for (int a = 0; a < 2; a++)
            sl->aux[a] = x[4 + a] > 0 ? x[2 + a] : NAN;
    }
}

/* The step's update from the workers' gradients: AdamW at the schedule's rate, clipped by the
 * global norm (the heads step with the model, clipped by their own norm, or neither does). A
 * non-finite gradient moves nothing, yet the step still counts (its samples were seen), until
 * MAX_NONFINITE_IN_A_ROW of them in a row end the run. */
static gboolean step_update(Run *r, StepStats *st, GError **error)
{
    if (r->workers[0].dev) {
        gather_slots(r);
        step_losses(r, st);
        st->lr = cl_lr_schedule_at(&r->sched, r->step);
        g_autoptr(GError) err = NULL;
        if (cl_train_device_update(r->workers[0].dev, r->opt, r->aux.opt, r->frozen, r->ro.batch,
                                   st->lr, r->ro.clip, &st->norm, &err)) {
            r->nonfinite = 0;
            return TRUE;
        }
        if (!g_error_matches(err, CL_OPTIM_ERROR, CL_OPTIM_ERROR_NONFINITE)) {
            g_propagate_error(error, g_steal_pointer(&err));
            return FALSE;
        }
        return step_skipped(r, err, error);
    }
    ClTrainerUpdate uc[2];
    const int n_up = cl_trainer_reduce(uc, r->workers, r->n_workers, r->frozen, r->model, r->opt,
                                       r->ro.batch, &r->comm, &st->norm);
    gather_slots(r);
    step_losses(r, st);
    const ClParamBuf *g = r->workers[0].grads;
    const ClTrainAuxHeads *ag = r->workers[0].aux_grads;
    const double clip = r->ro.clip, norm = st->norm;
    g_autoptr(GError) err = NULL;
    st->lr = cl_lr_schedule_at(&r->sched, r->step);
    if (ag && !isfinite(cl_grad_norm(ag->data, ag->n)))
        g_set_error(&err, CL_OPTIM_ERROR, CL_OPTIM_ERROR_NONFINITE,
                    "an auxiliary head's gradient is not finite");
    if (!err && cl_grad_check_norm(g->data, g->n, norm, &err)) {
        /* clip by the global norm, folded into the update (cl_optim_step's arithmetic) */
        cl_adamw_next_step(r->opt);
        cl_trainer_update(uc, n_up, st->lr, clip > 0 && norm > clip ? (float)(clip / norm) : 1.0f);
        r->nonfinite = 0;
        if (ag)
            cl_optim_step(r->aux.opt, r->aux.heads->data, ag->data, st->lr, clip, NULL, NULL);
        return TRUE;
    }
    return step_skipped(r, err, error);
}

/* A step whose gradient was not finite (err says which): logged, counted; too many in a row end
 * the run. */
static gboolean step_skipped(Run *r, GError *err, GError **error)
{
    if (!log_raw(r->log, error,
                 "{\"type\":\"skip\",\"step\":%" G_GINT64_FORMAT ",\"reason\":\"%s\"}", r->step + 1,
                 "non-finite gradient"))
        return FALSE;
    if (++r->nonfinite >= MAX_NONFINITE_IN_A_ROW) {
        FAIL(DIVERGED,
             "training diverged: %d steps in a row up to step %" G_GINT64_FORMAT
             " had non-finite gradients (%s); lower --lr or set --clip",
             r->nonfinite, r->step + 1, err->message);
        return FALSE;
    }
    return TRUE;
}

/* The finished step's log lines: every log_every steps (and at the last) the window's mean loss
 * and the auxiliary losses' window means over the samples that ran them; every TASK_LOG_EVERY
 * steps (and at the last) a task mix's per-task losses. */
static gboolean step_log(Run *r, const StepStats *st, GError **error)
{
    const ClTrainerOptions *ro = &r->ro;
    const gint64 step = r->step;
    Window *w = &r->win;
    w->loss += st->loss, w->n++;
    if (step % ro->log_every == 0 || step == ro->steps) {
        ClTrainLogStep rec = { step, w->loss / w->n, st->lr, st->norm, st->tokens, ro->batch };
        if (!cl_trainlog_step(r->log, &rec, error))
            return FALSE;
        if (r->aux.heads) {
            char b0[G_ASCII_DTOSTR_BUF_SIZE], b1[G_ASCII_DTOSTR_BUF_SIZE];
            const char *v[2];
            for (int a = 0; a < 2; a++)
                v[a] = w->aux_n[a] ? g_ascii_formatd(a ? b1 : b0, sizeof b0, "%.9g",
                                                     w->aux[a] / w->aux_n[a])
                                   : "null";
            if (!log_raw(r->log, error,
                         "{\"type\":\"aux\",\"step\":%" G_GINT64_FORMAT
                         ",\"objects_loss\":%s,\"changed_loss\":%s}",
                         step, v[0], v[1]))
                return FALSE;
        }
        w->loss = 0, w->n = 0;
        w->aux[0] = w->aux[1] = 0, w->aux_n[0] = w->aux_n[1] = 0;
    }
    if (w->n_slots > 1 && (step % TASK_LOG_EVERY == 0 || step == ro->steps)) {
        if (!log_task_losses(r->log, step, r->src.tasks, w->task_slot, w->n_tasks, w->task_loss,
                             w->task_n, error))
            return FALSE;
        memset(w->task_loss, 0, w->n_tasks * sizeof *w->task_loss);
        memset(w->task_n, 0, w->n_tasks * sizeof *w->task_n);
    }
    return TRUE;
}

/* A checkpoint of where the run stands (result->checkpoint_path: the newest). */
static gboolean run_checkpoint(Run *r, ClTrainerResult *result, GError **error)
{
    if (r->comm.rank > 0)
        return TRUE; /* MPI: rank 0 writes it (every rank holds the same state) */
    if (r->workers[0].dev &&
        !cl_train_device_sync(r->workers[0].dev, r->model, r->opt, r->aux.heads, r->aux.opt, error))
        return FALSE;
    return cl_trainer_save_checkpoint(r->ck_dir, r->ro.keep_checkpoints, r->model, r->opt, &r->aux,
                                      r->step, r->rng, r->cursor, r->options_json,
                                      &result->checkpoint_path, error);
}

/* The step loop, from r->step to the last step or a cancel (*cancelled: the unfinished step is
 * dropped, the cursor and RNG put back so that the checkpoint takes its samples again). Each
 * step: the batch drawn and run over the workers, the update, the result's numbers, the log,
 * the callback, and every checkpoint_every steps a checkpoint. */
static gboolean run_steps(Run *r, ClTrainerProgress cb, gpointer user_data, ClTrainerResult *result,
                          gboolean *cancelled, GError **error)
{
    const ClTrainerOptions *ro = &r->ro;
    result->first_aux_objects_loss = result->first_aux_changed_loss = NAN;
    result->final_aux_objects_loss = result->final_aux_changed_loss = NAN;
    r->t0 = g_get_monotonic_time();
    while (r->step < ro->steps) {
        guint64 cursor0 = r->cursor, rng0 = r->rng;
        for (int k = 0; k < ro->batch; k++)
            cl_trainer_source_next(&r->src, &r->cursor, &r->rng, &r->job.slots[k].ref);
        g_autoptr(GError) err = NULL;
        gboolean stepped = cl_trainer_run_step(&r->job, r->workers, &err);
        if (r->comm.size > 1) {
            /* MPI: every rank goes on, stops or fails together (a rank left alone in the sums
             * would wait for ever): 0 went on, 1 cancelled, 2 failed */
            int mine = stepped ? 0 : g_error_matches(err, G_IO_ERROR, G_IO_ERROR_CANCELLED) ? 1 : 2;
            int all = cl_train_comm_max_int(&r->comm, mine);
            if (all > mine) {
                g_clear_error(&err);
                if (all == 1)
                    g_set_error_literal(&err, G_IO_ERROR, G_IO_ERROR_CANCELLED, "cancelled");
                else
                    g_set_error_literal(&err, CL_TRAINER_ERROR, CL_TRAINER_ERROR_SAMPLE,
                                        "another MPI rank failed (its own message says why)");
                stepped = FALSE;
            }
        }
        if (!stepped) {
            if (g_error_matches(err, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
                r->cursor = cursor0, r->rng = rng0;
                *cancelled = TRUE;
                break;
            }
            g_propagate_prefixed_error(error, g_steal_pointer(&err), "step %" G_GINT64_FORMAT ": ",
                                       r->step + 1);
            return FALSE;
        }
        StepStats st;
        if (!step_update(r, &st, error))
            return FALSE;
        r->step++;
        if (result->samples == 0) {
            result->first_loss = st.loss;
            result->first_aux_objects_loss = st.aux[0];
            result->first_aux_changed_loss = st.aux[1];
        }
        result->final_loss = st.loss;
        result->final_aux_objects_loss = st.aux[0];
        result->final_aux_changed_loss = st.aux[1];
        result->samples += ro->batch;
        result->tokens += st.tokens;
        if (!step_log(r, &st, error))
            return FALSE;
        if (cb) {
            ClTrainerStatus s = { r->step,        ro->steps,
                                  st.loss,        st.aux[0],
                                  st.aux[1],      st.lr,
                                  st.norm,        result->samples,
                                  result->tokens, (g_get_monotonic_time() - r->t0) / 1e6 };
            cb(&s, user_data);
        }
        if (ro->checkpoint_every > 0 && r->step % ro->checkpoint_every == 0 &&
            r->step < ro->steps && !run_checkpoint(r, result, error))
            return FALSE;
    }
    return TRUE;
}

/* After the loop: the throughput, the last checkpoint (where the run stopped, unless nothing ran
 * since the loaded one), the log's end line, and the final model; a cancelled run instead ends
 * with the error that says how to resume. */
static gboolean run_finish(Run *r, const ClTrainerOptions *o, gboolean cancelled,
                           ClTrainerResult *result, GError **error)
{
    result->steps = r->step;
    result->elapsed_s = (g_get_monotonic_time() - r->t0) / 1e6;
    if (result->elapsed_s > 0) {
        result->samples_per_s = result->samples / result->elapsed_s;
        result->tokens_per_s = result->tokens / result->elapsed_s;
    }
    if ((r->step > result->start_step || !result->checkpoint_path) &&
        !run_checkpoint(r, result, error))
        return FALSE;
    if (!log_raw(r->log, error,
                 "{\"type\":\"end\",\"step\":%" G_GINT64_FORMAT ",\"cancelled\":%s,"
                 "\"samples\":%" G_GINT64_FORMAT ",\"tokens\":%" G_GINT64_FORMAT
                 ",\"run_s\":%.3f,\"samples_per_s\":%.3f,\"tokens_per_s\":%.1f,\"workers\":%d}",
                 r->step, cancelled ? "true" : "false", result->samples, result->tokens,
                 result->elapsed_s, result->samples_per_s, result->tokens_per_s, r->n_workers))
        return FALSE;
    if (!cl_trainlog_close(g_steal_pointer(&r->log), error))
        return FALSE;
    if (cancelled) {
        result->cancelled = TRUE;
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_CANCELLED,
                    "training interrupted at step %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT
                    "; resume with --resume (checkpoint %s)",
                    r->step, r->ro.steps, result->checkpoint_path);
        return FALSE;
    }
    if (r->comm.rank > 0)
        return TRUE; /* MPI: rank 0 writes the model (result->model_path stays NULL here) */
    const char *dtype = o->dtype ? o->dtype : "f32";
    if (!cl_model_save(r->model, r->model_path, dtype, error)) {
        g_prefix_error(error, "%s: ", r->model_path);
        return FALSE;
    }
    result->model_path = g_steal_pointer(&r->model_path);
    return TRUE;
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
    r.comm = o->comm && o->comm->size > 1 ? *o->comm : (ClTrainComm){ 0, 1 };
    if (!run_setup(&r, o, cancellable, result, error))
        return FALSE;
    gboolean cancelled = FALSE;
    if (!run_steps(&r, cb, user_data, result, &cancelled, error))
        return FALSE;
    return run_finish(&r, o, cancelled, result, error);
}
