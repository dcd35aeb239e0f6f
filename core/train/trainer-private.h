/* trainer-private.h - what the training loop's files share: the stages' starting models
 * (stages.c), the data source (source.c), the data-parallel workers and the gradient reduction
 * (parallel.c), and the run's state in checkpoints and the log (runstate.c). */
#pragma once

#include "nn/backend.h"
#include "synth/synth.h"
#include "train/checkpoint.h"
#include "train/jsonl.h"
#include "train/optim.h"
#include "train/params.h"
#include "train/trainer.h"
#include "train/trainmodel.h"

/* A ClTrainerError into `error` (every caller names its GError ** `error`). */
#define FAIL(code, ...) g_set_error(error, CL_TRAINER_ERROR, CL_TRAINER_ERROR_##code, __VA_ARGS__)

/* ---- the starting models (stages.c) --------------------------------------------------------- */

/* The model the run starts from (before a resume replaces its parameters): o's config at its
 * random init, or o->from with the stage's surgery (CASA, PVM, VIST2, hybrid, SVE). */
ClModel *cl_trainer_initial_model(const ClTrainerOptions *o, GError **error);

/* --train-only: the parameter ranges (ClOptimSpan) of the tensors whose names hold none of the
 * comma-separated parts, their weight decay switched off in opt. NULL when no tensor matches. */
GArray *cl_trainer_freeze_others(const ClModel *model, ClAdamW *opt, const char *parts,
                                 GError **error);

/* ---- the data source (source.c) ------------------------------------------------------------- */

/* --task "shapes,dots@2" -> {"shapes", "dots@2"}, every name a known task: *out the entries as
 * given (a mix's per-task losses keep "dots@2" apart), *images_out (may be NULL) each entry's
 * image count (K for dots@K, else 0: the task's own or --images). */
gboolean cl_trainer_parse_tasks(const char *spec, char ***out, int **images_out, GError **error);

/* Which sample a batch slot takes: a synthetic (task, stream seed) or a data-set index. */
typedef struct {
    guint64 index; /* the sample's number in the stream (the cursor before it) */
    int task;      /* synthetic: index into tasks */
    guint64 seed;  /* synthetic: cl_synth_stream_seed(train seed, index) */
    guint item;    /* data file: sample index in the file */
} ClTrainerSampleRef;

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
} ClTrainerSource;

/* Opens o's task mix or data file (the data set keeps `model` for its tokenizer and sizes). */
gboolean cl_trainer_source_open(ClTrainerSource *s, const ClTrainerOptions *o, const ClModel *model,
                                GError **error);
void cl_trainer_source_clear(ClTrainerSource *s);
/* The next sample of the stream: advances *cursor (and *rng for a task mix). */
void cl_trainer_source_next(ClTrainerSource *s, guint64 *cursor, guint64 *rng,
                            ClTrainerSampleRef *ref);
/* The sample ref names, made (synthetic) or read (data file). */
ClTrainSample *cl_trainer_source_get(ClTrainerSource *s, const ClModel *model,
                                     const ClTrainerSampleRef *ref, gboolean all_turns,
                                     GError **error);

/* ---- data-parallel workers (parallel.c) ----------------------------------------------------- */

typedef struct {
    ClBackend *be;
    ClParamBuf *grads;
    ClTrainAuxHeads *aux_grads; /* NULL when the auxiliary losses are off */
    /* --device cuda: the run's parameters, gradients and moments in be's memory (grads and
     * aux_grads then unused), the only worker; NULL on the CPU */
    struct _ClTrainDevice *dev;
} ClTrainerWorker;

/* A batch sample's place in a step: which sample, the sample itself (between the phases), its
 * worker, and what its forward and backward passes gave. */
typedef struct {
    ClTrainerSampleRef ref; /* set by the caller */
    ClTrainSample *sample;  /* phase 1's output (freed by the end of the step) */
    int share;              /* phase 2: the worker that trains on it (-1: another MPI rank) */
    double loss;
    double aux[2]; /* objects, changed (NaN: not run) */
    gint64 tokens; /* decoder positions */
} ClTrainerSlot;

/* One step's work, shared by the workers, in two phases: worker w makes samples w,
 * w + n_workers, ... (generation and loading), then each works through its share of the batch.
 * The shares balance the samples' estimated cost (longest first onto the lighter worker; ties
 * by index), so a step waits less for its slower worker; they depend only on the samples, and
 * each worker accumulates its share in index order, so a step's gradient is the same on every
 * run. */
typedef struct {
    const ClModel *model;
    ClTrainerSource *src;
    int batch, n_workers;
    const ClTrainGradOptions *gopt;
    gboolean all_turns;
    GCancellable *cancellable;
    ClTrainerSlot *slots; /* (batch) the job's own (cl_trainer_step_job_init) */
    int rank, ranks;      /* MPI: this process makes and trains on slots k ≡ rank (mod ranks) */
    GError *errors[2];    /* (n_workers) first error of each */
    gboolean compute;     /* the phase: FALSE makes samples, TRUE trains on them */
} ClTrainerStepJob;

void cl_trainer_step_job_init(ClTrainerStepJob *job, const ClModel *model, ClTrainerSource *src,
                              int batch, int n_workers, const ClTrainGradOptions *gopt,
                              gboolean all_turns, GCancellable *cancellable);
void cl_trainer_step_job_clear(ClTrainerStepJob *job);

/* Runs the batch over the workers: each worker's gradient buffers hold the sum of its share's.
 * FALSE: an error, or cancelled (G_IO_ERROR_CANCELLED). */
gboolean cl_trainer_run_step(ClTrainerStepJob *job, ClTrainerWorker *workers, GError **error);

/* The workers a run takes when the options leave it open. */
int cl_trainer_default_workers(void);

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
} ClTrainerUpdate;

/* The batch's gradient into workers[0]: the --train-only ranges (`frozen`, may be NULL) zeroed,
 * the workers' buffers (and auxiliary heads' gradients) summed in worker order and divided by
 * the batch, then summed across the MPI ranks (comm may be NULL). uc: the halves of the update
 * (returns how many); *norm: the global norm. */
int cl_trainer_reduce(ClTrainerUpdate *uc, ClTrainerWorker *workers, int n_workers,
                      const GArray *frozen, ClModel *model, const ClAdamW *opt, int batch,
                      const ClTrainComm *comm, double *norm);
/* The AdamW update of the reduced gradient, at lr, the gradient scaled by gscale (the clip). */
void cl_trainer_update(ClTrainerUpdate *uc, int n, double lr, float gscale);

/* ---- the run's state in checkpoints and the log (runstate.c) -------------------------------- */

/* The options that shape the loss curve (resolved: steps, warmup, min_lr), as JSON. */
char *cl_trainer_options_to_json(const ClTrainerOptions *o);
/* FALSE + _RESUME naming the first option the checkpoint was trained with differently. */
gboolean cl_trainer_options_match(const char *saved, const char *now, GError **error);

/* The auxiliary heads and their optimiser (both NULL when the losses are off). Their AdamW
 * steps with the model's (a skipped step skips both), so its step count is the model's. */
typedef struct {
    ClTrainAuxHeads *heads;
    ClAdamW *opt;
} ClTrainerAux;

/* A resume: the heads and moments back from the checkpoint. */
gboolean cl_trainer_aux_restore(ClTrainerAux *aux, const ClCheckpoint *ck, GError **error);

/* DIR/step-NNNNNNNN.safetensors of the run at `step` (older ones rotated out past `keep`);
 * *path_out: its path. */
gboolean cl_trainer_save_checkpoint(const char *dir, guint keep, const ClModel *model,
                                    const ClAdamW *opt, const ClTrainerAux *aux, gint64 step,
                                    guint64 rng, guint64 cursor, const char *options_json,
                                    char **path_out, GError **error);
/* The data cursor of a checkpoint's state. */
gboolean cl_trainer_parse_cursor(const char *json, guint64 *cursor, GError **error);

/* A resumed run's log: keeps the lines up to the checkpoint's step (a run that went on past its
 * last checkpoint logged steps the resumed run does again) and returns the elapsed time they
 * reached. */
gboolean cl_trainer_log_truncate(const char *path, gint64 step, double *elapsed, GError **error);
