/* cli-train.c - `changelens-cli train`: the SVE recipe's two stages as a command (core/train/
 * trainer.c does the work). The trainer runs on a thread so that Ctrl-C (SIGINT, via the main
 * loop) can cancel it: the unfinished step is dropped and a checkpoint written. */
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <glib-unix.h>
#include <glib.h>

#include "model/config.h"
#include "train/trainer.h"
#include "cli.h"

#define PROG CL_CLI_NAME " train"

/* exit status when interrupted (a checkpoint was written): the shell's 128 + SIGINT */
#define EXIT_INTERRUPTED 130

static const char usage_text[] =
    "Usage: " PROG " --stage pretrain|sve [--preset NAME | --config JSON | --from MODEL]\n"
    "       (--task T[,T…] | --data FILE.jsonl) --steps N --out DIR [OPTIONS…]\n"
    "\n"
    "Stage 1 (pretrain) trains a stateless model from a random init (--preset / --config) or a\n"
    "model file or checkpoint (--from). Stage 2 (sve) inserts SVE modules into a stage-1 model\n"
    "(--from), cloned from each block with zero-initialised outputs, and fine-tunes with\n"
    "stop_grad. Writes DIR/model.safetensors, DIR/checkpoints/step-N.safetensors, DIR/train.jsonl.\n"
    "\n"
    "Model:\n"
    "  --stage S            pretrain (default) or sve\n"
    "  --preset NAME        random init of a preset (tiny, base, large)\n"
    "  --config JSON        random init of a config (JSON text or a .json file)\n"
    "  --from FILE          start from a model file or a checkpoint\n"
    "  --variant V          sve: the SVE variant (default cross_ffn; stateless, cross, cross_ffn,\n"
    "                       self_ext, adaln_zero, self_ffn); pretrain: train V from scratch\n"
    "Data:\n"
    "  --task T[,T…]        synthetic tasks generated on the fly, mixed at random (synth --list);\n"
    "                       dots@K is the dots task with K images (2 to 5) beside the others;\n"
    "                       TASK~L the task with nuisances of level L (0 none, 1 mild, 2 strong)\n"
    "                       radiograph+changed, aerial+changed: the task without its unchanged\n"
    "                       pairs (aerial+changed~2 with strong nuisances)\n"
    "  --data FILE.jsonl    ShareGPT-style JSONL (shuffled per epoch)\n"
    "  --all-turns          supervise every assistant turn, not only the final answer\n"
    "  --objects N|MIN-MAX  shapes tasks: objects in a scene (default: 4-8 at 160 px, 30-40 at 768)\n"
    "  --dot-scale X        dots tasks: the red dot's radius times X, 1 to 4 (default 1); larger\n"
    "                       dots first, then smaller, teach a small model to find the dot\n"
    "  --images K           dots task: K images per sample, 2 to 5 (default: drawn per sample)\n"
    "Optimisation:\n"
    "  --steps N            optimiser steps (or --epochs E with --data)\n"
    "  --batch B            samples per step (gradient accumulation; default 8)\n"
    "  --lr X, --min-lr X   peak and final learning rate (default 5e-4 and lr/10)\n"
    "  --warmup N           linear warmup steps, then cosine (default steps/20, at most 200)\n"
    "  --weight-decay X     AdamW weight decay (default 0.01)\n"
    "  --clip X             gradient clipping by global norm (default 1; 0: off)\n"
    "  --seed S             init, data and task-mix seed (default 0)\n"
    "  --workers N          data-parallel workers, 1 or 2 (default: automatic)\n"
    "  --device D           cpu (default) or cuda: the steps on the GPU, the parameters,\n"
    "                       gradients and AdamW moments in its memory (one worker; the\n"
    "                       CPU's arithmetic to float rounding; checkpoints resume on either)\n"
    "  --mpi                data-parallel processes: run under `mpirun -np N`; --batch is the\n"
    "                       whole step's, each rank trains on every N-th sample and the\n"
    "                       gradients are summed across ranks (the one-process run's parameters\n"
    "                       up to float rounding; a checkpoint resumes with another N); rank 0\n"
    "                       writes the log, the checkpoints and the model\n"
    "Auxiliary losses (training-only heads on the encoder's patch tokens, not in the model):\n"
    "  --aux-objects W      weight of the per-patch 'contains an object' loss (default 1)\n"
    "  --aux-changed W      weight of the per-patch 'changed from the previous image' loss\n"
    "                       (default 1); both run on samples that carry targets (synthetic\n"
    "                       tasks), 0 switches one off\n"
    "  --no-aux             no auxiliary losses (--aux-objects 0 --aux-changed 0)\n"
    "  --aux-on-visual      the heads read the visual tokens (after the merger; targets pooled\n"
    "                       2 x 2) instead of the encoder's patch tokens\n"
    "  --change-marker      mark the visual tokens by the change head's probabilities (config\n"
    "                       change_marker; added to a --from model that has the head)\n"
    "SVE ablations (stage 2):\n"
    "  --no-clone           random CA/FFN input weights instead of cloning the block's\n"
    "  --no-zero-init       output weights with a standard init (std 0.02)\n"
    "  --sve-init-std X     output weights' std (default 0, as the paper's synthetic tasks)\n"
    "  --first null|own     first image: learned null state or its own features (default own)\n"
    "  --no-stop-grad       let gradients flow through the predecessor image\n"
    "  --no-cross-pos       no 2-D positions in the cross-attention\n"
    "Decoder options:\n"
    "  --pvm-every K        PVM (a gated cross-attention to the prompt's visual rows beside the\n"
    "                       FFN) in every K-th decoder layer from K; inserted into a --from\n"
    "                       model without it (gate 0: the model starts as it was)\n"
    "  --pvm-rank R         PVM's latent width (default 32; 4 heads of R/4)\n"
    "  --train-only PARTS   only the tensors whose names hold one of these comma-separated\n"
    "                       parts train (e.g. pvm. : PVM's branch alone, the paper's stage I)\n"
    "  --vist CHUNK         VIST2: text read with the images (a task's context, prior reports)\n"
    "                       is kept as pages rendered from CHUNK tokens each (0: 4 tokens per\n"
    "                       visual row of an image), read by the model's encoder, frozen for\n"
    "                       them; a config switch, no new tensors\n"
    "  --hybrid K           the Gated DeltaNet hybrid: attention kept in decoder layers\n"
    "                       l % K == 0, GDN layers in the others; converts a --from model (each\n"
    "                       GDN layer started from its attention's q, k, v, its output near 0)\n"
    "  --casa ca|ca_shared  CASA: images stay out of the sequence and the KV cache; every layer\n"
    "                       cross-attends to the current image's rows (ca: its own projections,\n"
    "                       cloned from the self-attention when inserted into a --from model;\n"
    "                       ca_shared: the self-attention's)\n"
    "  --casa-gist          with --casa: a gist token (<image>) after each image; it reads the\n"
    "                       image and stays in the text cache when the image's window is gone\n"
    "  --casa-tv            with --casa: CA_{t+v}, the cross-attention also reads the window's\n"
    "                       text so far (causal, RoPE; the image at the window's start)\n"
    "  --casa-replace N     with --casa: every N-th layer's self-attention is dropped, its\n"
    "                       cross-attention alone there (CA^#; no keys or values for it)\n"
    "Output:\n"
    "  --out DIR            output folder (required)\n"
    "  --resume             continue from the newest checkpoint in DIR/checkpoints\n"
    "  --resume-from FILE   continue from that checkpoint\n"
    "  --checkpoint-every N steps between checkpoints (default 500; 0: only at the end)\n"
    "  --keep-checkpoints N newest checkpoints kept (default 5; 0: all)\n"
    "  --log-every N        steps per log line (default 1)\n"
    "  --dtype D            final model dtype: f32 (default), f16, bf16\n"
    "  --quiet              no progress line\n"
    "\n"
    "Ctrl-C stops after the current sample and writes a checkpoint; --resume continues it and\n"
    "reproduces the uninterrupted run exactly.\n";

gboolean cl_cli_load_config(const char *arg, ClModelConfig *cfg, GError **error)
{
    g_autofree char *text = NULL;
    const char *json = arg;
    if (arg[0] != '{') {
        if (!g_file_get_contents(arg, &text, NULL, error))
            return FALSE;
        json = text;
    }
    return cl_model_config_from_json(cfg, json, error);
}

/* ---- running on a thread, Ctrl-C on the main loop ------------------------------------------- */

typedef struct {
    ClTrainerOptions *opts;
    GCancellable *cancellable;
    GMainLoop *loop;
    ClTrainerResult result;
    GError *error;
    gboolean ok;
    int interrupts;
} Job;

static gboolean on_done(gpointer data)
{
    g_main_loop_quit(((Job *)data)->loop);
    return G_SOURCE_REMOVE;
}

static gpointer train_thread(gpointer data)
{
    Job *j = data;
    j->ok = cl_trainer_run(j->opts, NULL, NULL, j->cancellable, &j->result, &j->error);
    g_idle_add(on_done, j);
    return NULL;
}

static gboolean on_signal(gpointer data)
{
    Job *j = data;
    if (j->interrupts++ == 0)
        fprintf(stderr, "\n" PROG ": interrupted; writing a checkpoint (Ctrl-C again: still "
                        "waiting for it)\n");
    g_cancellable_cancel(j->cancellable);
    return G_SOURCE_CONTINUE;
}

/* ---- options ------------------------------------------------------------------------------ */

/* What the command line holds: the trainer's options, the texts they point into (owned here)
 * and the starting model's source. */
typedef struct {
    ClTrainerOptions o;
    char *stage, *preset, *config, *from, *train_only, *casa, *variant, *first;
    char *task, *data, *objects, *out, *resume_from, *dtype, *device;
    ClModelConfig cfg;
    gboolean mpi;
} TrainArgs;

static void train_args_clear(TrainArgs *a)
{
    cl_cli_free_all(&a->stage, &a->preset, &a->config, &a->from, &a->train_only, &a->casa,
                    &a->variant, &a->first, &a->task, &a->data, &a->objects, &a->out,
                    &a->resume_from, &a->dtype, &a->device, NULL);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(TrainArgs, train_args_clear)

typedef enum { FIELD_INT, FIELD_INT64, FIELD_UINT, FIELD_DOUBLE } FieldKind;

/* A numeric option: its range and where in ClTrainerOptions it goes. A double's hi of
 * G_MAXINT64 means no upper bound. */
typedef struct {
    const char *name; /* as GOption hands it to the callback */
    FieldKind kind;
    gint64 lo, hi;
    gsize offset;
} NumberOption;

#define OPT(f) offsetof(ClTrainerOptions, f)
static const NumberOption number_options[] = {
    { "--vist", FIELD_INT, 0, 4096, OPT(vist_chunk) },
    { "--casa-replace", FIELD_INT, 2, 64, OPT(casa_replace) },
    { "--pvm-every", FIELD_INT, 1, 4096, OPT(pvm_every) },
    { "--pvm-rank", FIELD_INT, 1, 4096, OPT(pvm_rank) },
    { "--hybrid", FIELD_INT, 2, 4096, OPT(hybrid_every) },
    { "--images", FIELD_INT, 2, 5, OPT(dot_images) },
    { "--steps", FIELD_INT64, 1, G_MAXINT64, OPT(steps) },
    { "--batch", FIELD_INT, 1, 65536, OPT(batch) },
    { "--warmup", FIELD_INT64, 0, G_MAXINT64, OPT(warmup) },
    { "--checkpoint-every", FIELD_INT64, 0, G_MAXINT64, OPT(checkpoint_every) },
    { "--keep-checkpoints", FIELD_UINT, 0, G_MAXUINT32, OPT(keep_checkpoints) },
    { "--log-every", FIELD_INT64, 1, G_MAXINT64, OPT(log_every) },
    { "--workers", FIELD_INT, 1, 2, OPT(workers) },
    { "--epochs", FIELD_DOUBLE, 0, G_MAXINT64, OPT(epochs) },
    { "--lr", FIELD_DOUBLE, 0, G_MAXINT64, OPT(lr) },
    { "--min-lr", FIELD_DOUBLE, 0, G_MAXINT64, OPT(min_lr) },
    { "--weight-decay", FIELD_DOUBLE, 0, G_MAXINT64, OPT(weight_decay) },
    { "--clip", FIELD_DOUBLE, 0, G_MAXINT64, OPT(clip) },
    { "--sve-init-std", FIELD_DOUBLE, 0, G_MAXINT64, OPT(sve_init_std) },
    { "--aux-objects", FIELD_DOUBLE, 0, G_MAXINT64, OPT(aux_weight_objects) },
    { "--aux-changed", FIELD_DOUBLE, 0, G_MAXINT64, OPT(aux_weight_changed) },
    { "--dot-scale", FIELD_DOUBLE, 1, 4, OPT(dot_scale) },
};
#undef OPT

/* Numbers are set as they come, so that --no-aux and --aux-objects act in the order given. */
static gboolean on_number(const char *name, const char *value, gpointer data, GError **error)
{
    ClTrainerOptions *o = &((TrainArgs *)data)->o;
    const NumberOption *n = NULL;
    for (gsize i = 0; !n && i < G_N_ELEMENTS(number_options); i++)
        if (strcmp(name, number_options[i].name) == 0)
            n = &number_options[i];
    g_return_val_if_fail(n != NULL, FALSE);
    void *field = (char *)o + n->offset;
    gint64 k = 0;
    double x = 0;
    if (n->kind == FIELD_DOUBLE) {
        if (!cl_cli_parse_double(name, value, (double)n->lo,
                                 n->hi == G_MAXINT64 ? INFINITY : (double)n->hi, &x, error))
            return FALSE;
        *(double *)field = x;
        return TRUE;
    }
    if (!cl_cli_parse_int(name, value, n->lo, n->hi, &k, error))
        return FALSE;
    if (n->kind == FIELD_INT64)
        *(gint64 *)field = k;
    else if (n->kind == FIELD_UINT)
        *(guint *)field = (guint)k;
    else
        *(int *)field = (int)k;
    if (field == &o->vist_chunk && k == 0)
        o->vist_chunk = -1; /* the model's default chunk */
    return TRUE;
}

static gboolean on_seed(const char *name, const char *value, gpointer data, GError **error)
{
    return cl_cli_parse_uint64(name, value, &((TrainArgs *)data)->o.seed, error);
}

static gboolean on_no_aux(const char *name, const char *value, gpointer data, GError **error)
{
    (void)name, (void)value, (void)error;
    ClTrainerOptions *o = &((TrainArgs *)data)->o;
    o->aux_weight_objects = o->aux_weight_changed = 0;
    return TRUE;
}

/* Parses argv into a; returns -1 to go on, else the exit status. */
static int parse_train_args(int argc, char **argv, TrainArgs *a)
{
    ClTrainerOptions *o = &a->o;
#define NUMBER(name) { name, 0, 0, G_OPTION_ARG_CALLBACK, (gpointer)on_number, NULL, NULL }
#define TEXT(name, field)                                                                          \
    {                                                                                              \
        name, 0, 0, G_OPTION_ARG_FILENAME, &a->field, NULL, NULL                                   \
    }
#define FLAG(name, field)                                                                          \
    {                                                                                              \
        name, 0, 0, G_OPTION_ARG_NONE, &o->field, NULL, NULL                                       \
    }
    GOptionEntry entries[] = {
        TEXT("stage", stage),
        TEXT("preset", preset),
        TEXT("config", config),
        TEXT("from", from),
        TEXT("train-only", train_only),
        TEXT("casa", casa),
        TEXT("variant", variant),
        TEXT("first", first),
        TEXT("task", task),
        TEXT("data", data),
        TEXT("objects", objects),
        TEXT("out", out),
        TEXT("resume-from", resume_from),
        TEXT("dtype", dtype),
        TEXT("device", device),
        FLAG("resume", resume),
        FLAG("all-turns", all_turns),
        FLAG("no-clone", no_clone),
        FLAG("no-zero-init", no_zero_init),
        FLAG("no-stop-grad", no_stop_grad),
        FLAG("no-cross-pos", no_cross_pos),
        FLAG("aux-on-visual", aux_on_visual),
        FLAG("quiet", quiet),
        FLAG("casa-gist", casa_gist),
        FLAG("casa-tv", casa_tv),
        FLAG("change-marker", change_marker),
        { "mpi", 0, 0, G_OPTION_ARG_NONE, &a->mpi, NULL, NULL },
        { "no-aux", 0, G_OPTION_FLAG_NO_ARG, G_OPTION_ARG_CALLBACK, (gpointer)on_no_aux, NULL,
          NULL },
        { "seed", 0, 0, G_OPTION_ARG_CALLBACK, (gpointer)on_seed, NULL, NULL },
        NUMBER("vist"),
        NUMBER("casa-replace"),
        NUMBER("pvm-every"),
        NUMBER("pvm-rank"),
        NUMBER("hybrid"),
        NUMBER("images"),
        NUMBER("steps"),
        NUMBER("batch"),
        NUMBER("warmup"),
        NUMBER("checkpoint-every"),
        NUMBER("keep-checkpoints"),
        NUMBER("log-every"),
        NUMBER("workers"),
        NUMBER("epochs"),
        NUMBER("lr"),
        NUMBER("min-lr"),
        NUMBER("weight-decay"),
        NUMBER("clip"),
        NUMBER("sve-init-std"),
        NUMBER("aux-objects"),
        NUMBER("aux-changed"),
        NUMBER("dot-scale"),
        { NULL },
    };
#undef NUMBER
#undef TEXT
#undef FLAG
    return cl_cli_parse_own_help(PROG, usage_text, entries, a, argc, argv);
}

/* The named values and the text options into a->o; returns -1 to go on, else the exit status. */
static int resolve_train_names(TrainArgs *a)
{
    ClTrainerOptions *o = &a->o;
    if (a->stage && !cl_trainer_stage_from_name(a->stage, &o->stage))
        return cl_cli_usage_error(PROG, "unknown --stage '%s' (pretrain or sve)", a->stage);
    if (a->casa && (!cl_casa_variant_from_name(a->casa, &o->casa) || o->casa == CL_CASA_OFF))
        return cl_cli_usage_error(PROG, "unknown --casa '%s' (ca or ca_shared)", a->casa);
    if (a->variant && !cl_sve_variant_from_name(a->variant, &o->variant))
        return cl_cli_usage_error(PROG,
                                  "unknown --variant '%s' (stateless, cross, cross_ffn, "
                                  "self_ext, adaln_zero, self_ffn)",
                                  a->variant);
    o->variant_set = a->variant != NULL;
    if (a->first && !cl_sve_first_from_name(a->first, &o->first))
        return cl_cli_usage_error(PROG, "unknown --first '%s' (own or null)", a->first);
    o->first_set = a->first != NULL;
    if (a->objects &&
        (!cl_cli_parse_range(a->objects, &o->min_objects, &o->max_objects) || o->min_objects < 1 ||
         o->max_objects > 64 || o->min_objects > o->max_objects))
        return cl_cli_usage_error(PROG, "--objects takes N or MIN-MAX from 1 to 64, not '%s'",
                                  a->objects);
    o->from = a->from;
    o->train_only = a->train_only;
    o->task = a->task;
    o->data = a->data;
    o->out_dir = a->out;
    o->resume_from = a->resume_from;
    o->dtype = a->dtype;
    o->device = a->device;
    return -1;
}

/* Options that only go together, and the starting model; returns -1 to go on, else the exit
 * status. */
static int validate_train_args(TrainArgs *a)
{
    ClTrainerOptions *o = &a->o;
    g_autoptr(GError) err = NULL;
    if (!o->out_dir)
        return cl_cli_usage_error(PROG, "--out DIR is required");
    if ((o->casa_replace > 0 || o->casa_gist || o->casa_tv) && o->casa == CL_CASA_OFF)
        return cl_cli_usage_error(PROG,
                                  "--casa-replace, --casa-gist and --casa-tv apply with --casa");
    if (o->data && o->max_objects)
        return cl_cli_usage_error(PROG,
                                  "--objects applies to synthetic tasks (--task), not to --data");
    if (o->data && o->dot_images)
        return cl_cli_usage_error(PROG,
                                  "--images applies to synthetic tasks (--task), not to --data");
    if (o->data && o->dot_scale > 0)
        return cl_cli_usage_error(PROG,
                                  "--dot-scale applies to synthetic tasks (--task), not to --data");
    if (!!a->preset + !!a->config + !!o->from > 1)
        return cl_cli_usage_error(PROG, "give one of --preset, --config and --from");
    if (a->preset && !cl_model_config_preset(&a->cfg, a->preset, &err))
        return cl_cli_usage_error(PROG, "%s", err->message);
    if (a->config && !cl_cli_load_config(a->config, &a->cfg, &err))
        return cl_cli_usage_error(PROG, "--config: %s", err->message);
    gboolean have_cfg = a->preset || a->config;
    if (o->stage == CL_TRAINER_STAGE_PRETRAIN && !have_cfg && !o->from)
        return cl_cli_usage_error(PROG, "no starting model: give --preset, --config or --from");
    o->config = have_cfg ? &a->cfg : NULL;
    return -1;
}

/* ---- the command ---------------------------------------------------------------------------- */

/* The run's summary on stderr (even with --quiet, which silences the progress line only) and
 * the model's path on stdout. */
static void print_train_result(const ClTrainerResult *r, int ranks)
{
    g_autofree char *rk =
        ranks > 1 ? g_strdup_printf(" in each of %d MPI ranks", ranks) : g_strdup("");
    if (r->steps == r->start_step) {
        fprintf(stderr,
                "nothing to train: the checkpoint is at step %" G_GINT64_FORMAT
                " of %" G_GINT64_FORMAT "; wrote the model\n",
                r->steps, r->steps);
    } else {
        fprintf(stderr,
                "trained steps %" G_GINT64_FORMAT "..%" G_GINT64_FORMAT ": loss %.4f -> %.4f\n",
                r->start_step + 1, r->steps, r->first_loss, r->final_loss);
        if (isfinite(r->final_aux_objects_loss) || isfinite(r->final_aux_changed_loss))
            fprintf(stderr, "auxiliary losses: objects %.4f -> %.4f, changed %.4f -> %.4f\n",
                    r->first_aux_objects_loss, r->final_aux_objects_loss, r->first_aux_changed_loss,
                    r->final_aux_changed_loss);
        fprintf(stderr,
                "throughput: %.2f samples/s, %.0f tokens/s (%" G_GINT64_FORMAT
                " samples, %" G_GINT64_FORMAT " tokens in %.1f s, %d worker%s%s)\n",
                r->samples_per_s, r->tokens_per_s, r->samples, r->tokens, r->elapsed_s, r->workers,
                r->workers == 1 ? "" : "s", rk);
    }
    printf("%s\n", r->model_path);
}

int cl_cli_train(int argc, char **argv)
{
    g_auto(TrainArgs) a = { 0 };
    cl_trainer_options_init(&a.o);
    int rc = parse_train_args(argc, argv, &a);
    if (rc < 0)
        rc = resolve_train_names(&a);
    if (rc < 0)
        rc = validate_train_args(&a);
    if (rc >= 0)
        return rc;
    ClTrainComm comm = { 0, 1 };
    if (a.mpi) {
        g_autoptr(GError) err = NULL;
        if (!cl_train_mpi_init(&comm, &err))
            return cl_cli_usage_error(PROG, "%s", err->message);
        a.o.comm = &comm;
    }
    g_autoptr(GCancellable) cancellable = g_cancellable_new();
    g_autoptr(GMainLoop) loop = g_main_loop_new(NULL, FALSE);
    Job job = { &a.o, cancellable, loop, { 0 }, NULL, FALSE, 0 };
    guint sig_int = g_unix_signal_add(SIGINT, on_signal, &job);
    guint sig_term = g_unix_signal_add(SIGTERM, on_signal, &job);
    GThread *t = g_thread_new("cl-train", train_thread, &job);
    g_main_loop_run(loop);
    g_thread_join(t);
    g_source_remove(sig_int);
    g_source_remove(sig_term);

    rc = 0;
    if (!job.ok) {
        gboolean usage =
            job.error->domain == CL_TRAINER_ERROR && (job.error->code == CL_TRAINER_ERROR_OPTIONS ||
                                                      job.error->code == CL_TRAINER_ERROR_MODEL);
        rc = job.result.cancelled ? EXIT_INTERRUPTED : usage ? CL_CLI_EXIT_USAGE : 1;
        if (comm.rank == 0 || !job.result.cancelled) /* rank 0 says where to resume */
            fprintf(stderr, PROG "%s: %s\n", comm.size > 1 ? " (MPI rank)" : "",
                    job.error->message);
        if (comm.size > 1 && !job.result.cancelled) /* the others may be waiting in a sum */
            cl_train_mpi_abort(rc);
    } else if (comm.rank == 0) {
        print_train_result(&job.result, comm.size);
    }
    g_clear_error(&job.error);
    cl_trainer_result_clear(&job.result);
    if (a.mpi)
        cl_train_mpi_finalize();
    return rc;
}
