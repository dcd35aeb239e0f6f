/* trainer.h - the training loop (docs/DESIGN.md §5): stage 1 (stateless pretraining from a random
 * config or a model file) and stage 2 (SVE insertion with the paper's clone / zero init, then
 * fine-tuning with stop_grad), from synthetic tasks generated on the fly or a ShareGPT JSONL
 * file, with AdamW + warmup/cosine + clipping, gradient accumulation, checkpoints that resume
 * exactly, a JSONL log and a progress line. `changelens-cli train` is a thin wrapper.
 *
 * Batch: one optimiser step takes `batch` samples; each sample's backward adds the gradient of
 * its own mean token loss, and the sum is scaled by 1/batch, so the step minimises the mean of
 * the per-sample means (every sample weighs the same, whatever its answer's length; the logged
 * loss is that same mean).
 *
 * Determinism: the same options (seed included) and the same number of workers give bit-equal
 * parameters and losses, and a resumed run continues the uninterrupted one bit-exactly. With 2
 * workers (data parallelism: each has its own CPU backend on one thread and its own gradient
 * buffer, taking the batch's samples j = w, w + 2, ...; the buffers are summed in worker order)
 * the floating-point sums differ from those of 1 worker, so the two agree to rounding only.
 * On a GPU (`device` "cuda": one worker, the run's state in its memory, train/devicestep.h) the
 * steps agree with the CPU's one worker to rounding, and a checkpoint resumes on either. */
#pragma once

#include <stdio.h>

#include <gio/gio.h>
#include <glib.h>

#include "train/mpi.h"

#include "model/model.h"

G_BEGIN_DECLS

#define CL_TRAINER_ERROR (cl_trainer_error_quark())
GQuark cl_trainer_error_quark(void);
typedef enum {
    CL_TRAINER_ERROR_OPTIONS,  /* a bad or contradictory option (the message names it) */
    CL_TRAINER_ERROR_MODEL,    /* the starting model does not fit the stage */
    CL_TRAINER_ERROR_RESUME,   /* no checkpoint to resume, or one made with other options */
    CL_TRAINER_ERROR_DIVERGED, /* too many steps in a row with non-finite gradients */
    CL_TRAINER_ERROR_SAMPLE,   /* a sample could not be made or does not fit the model */
} ClTrainerError;

typedef enum {
    CL_TRAINER_STAGE_PRETRAIN, /* stage 1: train the model as it is (stateless by default) */
    CL_TRAINER_STAGE_SVE,      /* stage 2: insert SVE modules into a stateless model, train */
} ClTrainerStage;

/* "pretrain" / "sve" */
const char *cl_trainer_stage_name(ClTrainerStage s);
gboolean cl_trainer_stage_from_name(const char *name, ClTrainerStage *out);

typedef struct {
    ClTrainerStage stage;

    /* The starting model: exactly one of `config` (random init, seeded by `seed`; the pretrain
     * stage, where sve_variant is taken from `variant` when variant_set, else stateless) and
     * `from` (a model file or a checkpoint; for the sve stage a stateless one). */
    const ClModelConfig *config;
    const char *from;

    /* Stage 2 (and the pretrain stage's variant). */
    gboolean variant_set;
    ClSveVariant variant;  /* default cross_ffn (sve) */
    gboolean no_clone;     /* CA Q/K/V, FFN W1 and their norms random (N(0, 0.02²), ones)
                                * instead of cloned from the block (the ablation) */
    gboolean no_zero_init; /* W_O / W_2 / adaLN ~ N(0, 0.02²) instead of sve_init_std */
    double sve_init_std;   /* W_O / W_2 std; default 0 (paper table 16: synthetic tasks);
                                * 1e-4 for real-world data */
    gboolean first_set;
    ClSveFirst first;      /* own (default) or null */
    gboolean no_cross_pos; /* no 2-D positions in the CA (the ablation) */
    gboolean no_stop_grad; /* gradients through the predecessor path (the ablation) */

    /* PVM (docs/MODEL.md §4.2) beside the FFN of every pvm_every-th decoder layer from
     * pvm_every, latent width pvm_rank (default 32): set in a random-init config, or inserted
     * into a --from model without PVM (its tensors copied, the branch new with α = 0). */
    int pvm_every;
    int pvm_rank;
    /* CASA (docs/MODEL.md §4.3): set in a random-init config, or inserted into a --from
     * token-insertion model (its tensors copied, the cross-attention cloned from each layer's
     * self-attention, the window norm's gain 1). CL_CASA_OFF: as the model is. */
    ClCasaVariant casa;
    /* CASA's CA^#: the self-attention of every casa_replace-th layer dropped (its cross-attention
     * alone there); 0: none. With casa, at insertion or random init. */
    int casa_replace;
    /* CASA's gist token after each image (config casa_gist) */
    gboolean casa_gist;
    /* CASA's CA_{t+v} (config casa_tv) */
    gboolean casa_tv;
    /* config change_marker (docs/MODEL.md §3.12): set in a random-init config, or added to a
     * --from model with the change head (merger.change new, std 0.02) */
    gboolean change_marker;
    /* The Gated DeltaNet hybrid (docs/MODEL.md §4.5): attention kept in
     * decoder layers l % hybrid_every == 0, GDN layers in the others; set in a random-init
     * config, or converted from a --from model without it (each GDN layer started from its
     * attention, see insert_hybrid in stages.c). 0: as the model is. */
    int hybrid_every;
    /* VIST2 (docs/MODEL.md §4.6): vist_chunk > 0 switches it on with chunks of that many tokens,
     * -1 with the default (cl_config_set_vist; no new tensors: the model's own encoder reads the
     * pages), in a random-init config or a --from model; 0: as the model is. */
    int vist_chunk;
    /* Comma-separated parts of tensor names ("pvm.", "casa."): only the tensors whose names
     * hold one train (the others get no update and no weight decay), as PVM's stage I trains
     * the branch alone. NULL: every tensor trains. */
    const char *train_only;

    /* Data: exactly one of `task` (a synthetic task or a comma-separated mix; sample i is
     * cl_synth_stream_seed(seed, i), its task drawn from the trainer's RNG) and `data` (a
     * ShareGPT JSONL file; one seeded permutation per epoch). */
    const char *task;
    const char *data;
    gboolean all_turns;           /* supervise every assistant turn, not only the final answer */
    int min_objects, max_objects; /* shapes scenes' object count (0: from the image size) */
    double dot_scale;             /* dots tasks' dot radius as a multiple of the default, 1..4
                                * (0: the default, 1) */
    int dot_images;               /* dots: images per sample, 2..5 (0: drawn per sample) */

    /* Optimisation. steps: optimiser steps (> 0), or 0 with `epochs` > 0 for a data file. */
    gint64 steps;
    double epochs;
    int batch;                 /* samples per step (default 8) */
    double lr, min_lr;         /* peak and final learning rate (default 5e-4, lr / 10) */
    gint64 warmup;             /* warmup steps (default -1: steps / 20, at most 200) */
    double weight_decay;       /* AdamW (default 0.01; not on norms, biases, sve.null) */
    double clip;               /* global gradient-norm clip (default 1; 0: off) */
    guint64 seed;              /* init, data order, task mix, SVE init (default 0) */
    int workers;               /* 1 or 2 data-parallel workers; 0 (default): the faster for
                                * this machine (2 when there are at least 2 cores) */
    const char *device;        /* where the steps run: "cpu" (default, NULL) or "cuda" (one worker,
                          * the run's state in the GPU's memory: train/devicestep.h) */
    ClBackend *device_backend; /* tests: the steps on this backend as on a device (overrides
                                * device; a reference is taken) */

    /* The dense auxiliary losses (docs/DESIGN.md §5, trainmodel.h): weights of the per-patch
     * objectness and changed BCE terms on training-only heads (default 1 each; 0 switches one
     * off). They run on the samples that carry targets (the synthetic tasks whose grid is the
     * model's patch grid) and are skipped on the others. The heads are checkpointed with the
     * run and left out of the final model. */
    double aux_weight_objects;
    double aux_weight_changed;
    gboolean aux_on_visual; /* the heads read the visual tokens (after the merger), not the
                                * patch tokens (trainmodel.h) */

    /* Output: DIR/model.safetensors, DIR/checkpoints/step-NNNNNNNN.safetensors, DIR/train.jsonl */
    const char *out_dir;
    gboolean resume;         /* continue from the newest checkpoint in DIR/checkpoints */
    const char *resume_from; /* ... or from this checkpoint file */
    gint64 checkpoint_every; /* steps between checkpoints (default 500; 0: only at the end) */
    guint keep_checkpoints;  /* newest kept (default 5; 0: all) */
    gint64 log_every;        /* steps per log line (default 1); loss averaged over them */
    const char *dtype;       /* final model: "f32" (default), "f16" or "bf16" */

    FILE *progress; /* progress line (NULL: stderr) */
    gboolean quiet; /* no progress line */

    /* Data-parallel processes (train/mpi.h; NULL or size 1: this process alone). `batch` is the
     * step's whole batch: rank r makes and trains on its samples r, r + size, …; gradients and
     * losses are summed across the ranks, so N steps of any rank count give the one-process
     * run's parameters up to float rounding, and a checkpoint resumes with another rank count.
     * Rank 0 alone writes the log, the checkpoints and the model. Not part of the options a
     * checkpoint records. */
    const ClTrainComm *comm;
} ClTrainerOptions;

void cl_trainer_options_init(ClTrainerOptions *o);

/* Where a run stands, for the callback (after every optimiser step). */
typedef struct {
    gint64 step, total_steps;
    double loss;             /* this step's mean loss */
    double aux_objects_loss; /* this step's mean auxiliary losses over the samples that */
    double aux_changed_loss; /* ran them (unweighted BCE; NaN: none did) */
    double lr, grad_norm;
    gint64 samples, tokens; /* since this run started (not counting a resumed run's) */
    double elapsed_s;       /* of this run */
} ClTrainerStatus;

typedef void (*ClTrainerProgress)(const ClTrainerStatus *st, gpointer user_data);

/* Results of a run. */
typedef struct {
    gint64 start_step, steps;                              /* resumed from, and reached */
    double final_loss;                                     /* mean loss of the last step */
    double first_loss;                                     /* of this run's first step */
    double first_aux_objects_loss, first_aux_changed_loss; /* of its first and last steps */
    double final_aux_objects_loss, final_aux_changed_loss; /* (NaN: not run) */
    gint64 samples, tokens;                                /* this run's */
    double elapsed_s;
    double samples_per_s, tokens_per_s;
    int workers;
    gboolean cancelled;    /* stopped by the cancellable: a checkpoint was written */
    char *model_path;      /* the final model (NULL when cancelled) */
    char *checkpoint_path; /* the last checkpoint written */
} ClTrainerResult;

void cl_trainer_result_clear(ClTrainerResult *r);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(ClTrainerResult, cl_trainer_result_clear)

/* Runs the training the options describe. Cancelling `cancellable` stops after the current
 * sample: the unfinished step is dropped, a checkpoint of the last finished step is written,
 * and the call returns FALSE with G_IO_ERROR_CANCELLED (result->cancelled set). result may be
 * NULL. */
gboolean cl_trainer_run(const ClTrainerOptions *o, ClTrainerProgress cb, gpointer user_data,
                        GCancellable *cancellable, ClTrainerResult *result, GError **error);

/* The stage-2 starting model without training: `src` (stateless) with o's variant and SVE
 * switches, its parameters copied by name, SVE modules initialised as the options say
 * (docs/MODEL.md §3.7 unless no_clone / no_zero_init). For tests and `model` tools. */
ClModel *cl_trainer_make_sve_model(const ClModel *src, const ClTrainerOptions *o, GError **error);

G_END_DECLS
