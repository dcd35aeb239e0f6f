/* cli-train.c - `changelens-cli train`: the SVE recipe's two stages as a command (core/train/
 * trainer.c does the work). The trainer runs on a thread so that Ctrl-C (SIGINT, via the main
 * loop) can cancel it: the unfinished step is dropped and a checkpoint written. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <glib-unix.h>
#include <glib.h>

#include "model/config.h"
#include "train/trainer.h"
#include "cli.h"

#define PROG "changelens-cli train"

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
    "                       dots@K is the dots task with K images (2 to 5) beside the others\n"
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
    "Auxiliary losses (training-only heads on the encoder's patch tokens, not in the model):\n"
    "  --aux-objects W      weight of the per-patch 'contains an object' loss (default 1)\n"
    "  --aux-changed W      weight of the per-patch 'changed from the previous image' loss\n"
    "                       (default 1); both run on samples that carry targets (synthetic\n"
    "                       tasks), 0 switches one off\n"
    "  --no-aux             no auxiliary losses (--aux-objects 0 --aux-changed 0)\n"
    "  --aux-on-visual      the heads read the visual tokens (after the merger; targets pooled\n"
    "                       2 x 2) instead of the encoder's patch tokens\n"
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

static int usage_error(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    fprintf(stderr, PROG ": %s\n(see '" PROG " --help')\n", msg);
    return 2;
}

static gboolean parse_int(const char *s, gint64 lo, gint64 hi, gint64 *out)
{
    return s && g_ascii_string_to_signed(s, 10, lo, hi, out, NULL);
}

static gboolean parse_double(const char *s, double *out)
{
    if (!s || !*s)
        return FALSE;
    char *end = NULL;
    errno = 0;
    double v = g_ascii_strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return FALSE;
    *out = v;
    return TRUE;
}

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

int cl_cli_train(int argc, char **argv)
{
    ClTrainerOptions o;
    cl_trainer_options_init(&o);
    ClModelConfig cfg;
    gboolean have_cfg = FALSE;
    const char *preset = NULL, *config = NULL;
    g_autoptr(GError) err = NULL;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        gint64 n;
        double x;
        /* options without a value */
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            return 0;
        } else if (!strcmp(a, "--resume")) {
            o.resume = TRUE;
            continue;
        } else if (!strcmp(a, "--all-turns")) {
            o.all_turns = TRUE;
            continue;
        } else if (!strcmp(a, "--no-clone")) {
            o.no_clone = TRUE;
            continue;
        } else if (!strcmp(a, "--no-zero-init")) {
            o.no_zero_init = TRUE;
            continue;
        } else if (!strcmp(a, "--no-stop-grad")) {
            o.no_stop_grad = TRUE;
            continue;
        } else if (!strcmp(a, "--no-cross-pos")) {
            o.no_cross_pos = TRUE;
            continue;
        } else if (!strcmp(a, "--aux-on-visual")) {
            o.aux_on_visual = TRUE;
            continue;
        } else if (!strcmp(a, "--no-aux")) {
            o.aux_weight_objects = o.aux_weight_changed = 0;
            continue;
        } else if (!strcmp(a, "--quiet")) {
            o.quiet = TRUE;
            continue;
        } else if (!strcmp(a, "--casa-gist")) {
            o.casa_gist = TRUE;
            continue;
        } else if (!strcmp(a, "--casa-tv")) {
            o.casa_tv = TRUE;
            continue;
        }
        if (!g_str_has_prefix(a, "--"))
            return usage_error("unexpected argument '%s'", a);
        if (!v)
            return usage_error("%s needs a value", a);
        i++;
        if (!strcmp(a, "--stage")) {
            if (!cl_trainer_stage_from_name(v, &o.stage))
                return usage_error("unknown --stage '%s' (pretrain or sve)", v);
        } else if (!strcmp(a, "--preset")) {
            preset = v;
        } else if (!strcmp(a, "--config")) {
            config = v;
        } else if (!strcmp(a, "--from")) {
            o.from = v;
        } else if (!strcmp(a, "--train-only")) {
            o.train_only = v;
        } else if (!strcmp(a, "--vist")) {
            gint64 k;
            if (!parse_int(v, 0, 4096, &k))
                return usage_error("--vist takes a chunk length in tokens, 0 for the default "
                                   "(got '%s')", v);
            o.vist_chunk = k > 0 ? (int)k : -1; /* -1: the model's default */
        } else if (!strcmp(a, "--casa-replace")) {
            gint64 k;
            if (!parse_int(v, 2, 64, &k))
                return usage_error("--casa-replace takes 2 or more (got '%s')", v);
            o.casa_replace = (int)k;
        } else if (!strcmp(a, "--casa")) {
            if (!cl_casa_variant_from_name(v, &o.casa) || o.casa == CL_CASA_OFF)
                return usage_error("unknown --casa '%s' (ca or ca_shared)", v);
        } else if (!strcmp(a, "--pvm-every") || !strcmp(a, "--pvm-rank")) {
            gint64 k;
            if (!parse_int(v, 1, 4096, &k))
                return usage_error("%s takes a whole number from 1 (got '%s')", a, v);
            if (a[6] == 'e')
                o.pvm_every = (int)k;
            else
                o.pvm_rank = (int)k;
        } else if (!strcmp(a, "--hybrid")) {
            gint64 k;
            if (!parse_int(v, 2, 4096, &k))
                return usage_error("--hybrid takes a whole number from 2 (got '%s')", v);
            o.hybrid_every = (int)k;
        } else if (!strcmp(a, "--variant")) {
            if (!cl_sve_variant_from_name(v, &o.variant))
                return usage_error("unknown --variant '%s' (stateless, cross, cross_ffn, "
                                   "self_ext, adaln_zero, self_ffn)", v);
            o.variant_set = TRUE;
        } else if (!strcmp(a, "--first")) {
            if (!cl_sve_first_from_name(v, &o.first))
                return usage_error("unknown --first '%s' (own or null)", v);
            o.first_set = TRUE;
        } else if (!strcmp(a, "--task")) {
            o.task = v;
        } else if (!strcmp(a, "--data")) {
            o.data = v;
        } else if (!strcmp(a, "--images")) {
            if (!parse_int(v, 2, 5, &n))
                return usage_error("--images must be 2 to 5, not '%s'", v);
            o.dot_images = (int)n;
        } else if (!strcmp(a, "--objects")) {
            if (!cl_cli_parse_range(v, &o.min_objects, &o.max_objects) || o.min_objects < 1 ||
                o.max_objects > 64 || o.min_objects > o.max_objects)
                return usage_error("--objects takes N or MIN-MAX from 1 to 64, not '%s'", v);
        } else if (!strcmp(a, "--out")) {
            o.out_dir = v;
        } else if (!strcmp(a, "--resume-from")) {
            o.resume_from = v;
        } else if (!strcmp(a, "--dtype")) {
            o.dtype = v;
        } else if (!strcmp(a, "--steps")) {
            if (!parse_int(v, 1, G_MAXINT64, &o.steps))
                return usage_error("--steps needs a positive integer, not '%s'", v);
        } else if (!strcmp(a, "--batch")) {
            if (!parse_int(v, 1, 65536, &n))
                return usage_error("--batch needs an integer from 1 to 65536, not '%s'", v);
            o.batch = (int)n;
        } else if (!strcmp(a, "--warmup")) {
            if (!parse_int(v, 0, G_MAXINT64, &o.warmup))
                return usage_error("--warmup needs an integer >= 0, not '%s'", v);
        } else if (!strcmp(a, "--checkpoint-every")) {
            if (!parse_int(v, 0, G_MAXINT64, &o.checkpoint_every))
                return usage_error("--checkpoint-every needs an integer >= 0, not '%s'", v);
        } else if (!strcmp(a, "--keep-checkpoints")) {
            if (!parse_int(v, 0, G_MAXUINT32, &n))
                return usage_error("--keep-checkpoints needs an integer >= 0, not '%s'", v);
            o.keep_checkpoints = (guint)n;
        } else if (!strcmp(a, "--log-every")) {
            if (!parse_int(v, 1, G_MAXINT64, &o.log_every))
                return usage_error("--log-every needs a positive integer, not '%s'", v);
        } else if (!strcmp(a, "--workers")) {
            if (!parse_int(v, 1, 2, &n))
                return usage_error("--workers must be 1 or 2, not '%s'", v);
            o.workers = (int)n;
        } else if (!strcmp(a, "--seed")) {
            if (!g_ascii_string_to_unsigned(v, 10, 0, G_MAXUINT64, &o.seed, NULL))
                return usage_error("--seed needs an unsigned integer, not '%s'", v);
        } else if (!strcmp(a, "--epochs") || !strcmp(a, "--lr") || !strcmp(a, "--min-lr") ||
                   !strcmp(a, "--weight-decay") || !strcmp(a, "--clip") ||
                   !strcmp(a, "--sve-init-std") || !strcmp(a, "--aux-objects") ||
                   !strcmp(a, "--aux-changed") || !strcmp(a, "--dot-scale")) {
            if (!parse_double(v, &x) || x < 0)
                return usage_error("%s needs a number >= 0, not '%s'", a, v);
            if (!strcmp(a, "--epochs"))
                o.epochs = x;
            else if (!strcmp(a, "--lr"))
                o.lr = x;
            else if (!strcmp(a, "--min-lr"))
                o.min_lr = x;
            else if (!strcmp(a, "--weight-decay"))
                o.weight_decay = x;
            else if (!strcmp(a, "--clip"))
                o.clip = x;
            else if (!strcmp(a, "--aux-objects"))
                o.aux_weight_objects = x;
            else if (!strcmp(a, "--aux-changed"))
                o.aux_weight_changed = x;
            else if (!strcmp(a, "--dot-scale") && x < 1)
                return usage_error("--dot-scale must be 1 to 4, not '%s'", v);
            else if (!strcmp(a, "--dot-scale"))
                o.dot_scale = x;
            else
                o.sve_init_std = x;
        } else {
            return usage_error("unknown option '%s'", a);
        }
    }

    if (!o.out_dir)
        return usage_error("--out DIR is required");
    if ((o.casa_replace > 0 || o.casa_gist || o.casa_tv) && o.casa == CL_CASA_OFF)
        return usage_error("--casa-replace, --casa-gist and --casa-tv apply with --casa");
    if (o.data && o.max_objects)
        return usage_error("--objects applies to synthetic tasks (--task), not to --data");
    if (o.data && o.dot_images)
        return usage_error("--images applies to synthetic tasks (--task), not to --data");
    if (o.data && o.dot_scale > 0)
        return usage_error("--dot-scale applies to synthetic tasks (--task), not to --data");
    if (!!preset + !!config + !!o.from > 1)
        return usage_error("give one of --preset, --config and --from");
    if (preset && !cl_model_config_preset(&cfg, preset, &err))
        return usage_error("%s", err->message);
    if (config && !cl_cli_load_config(config, &cfg, &err))
        return usage_error("--config: %s", err->message);
    have_cfg = preset || config;
    if (o.stage == CL_TRAINER_STAGE_PRETRAIN && !have_cfg && !o.from)
        return usage_error("no starting model: give --preset, --config or --from");
    o.config = have_cfg ? &cfg : NULL;

    g_autoptr(GCancellable) cancellable = g_cancellable_new();
    g_autoptr(GMainLoop) loop = g_main_loop_new(NULL, FALSE);
    Job job = { &o, cancellable, loop, { 0 }, NULL, FALSE, 0 };
    guint sig_int = g_unix_signal_add(SIGINT, on_signal, &job);
    guint sig_term = g_unix_signal_add(SIGTERM, on_signal, &job);
    GThread *t = g_thread_new("cl-train", train_thread, &job);
    g_main_loop_run(loop);
    g_thread_join(t);
    g_source_remove(sig_int);
    g_source_remove(sig_term);

    int rc = 0;
    if (!job.ok) {
        gboolean usage = job.error->domain == CL_TRAINER_ERROR &&
                         (job.error->code == CL_TRAINER_ERROR_OPTIONS ||
                          job.error->code == CL_TRAINER_ERROR_MODEL);
        fprintf(stderr, PROG ": %s\n", job.error->message);
        rc = job.result.cancelled ? EXIT_INTERRUPTED : usage ? 2 : 1;
    } else {
        /* the summary even with --quiet (which silences the progress line only) */
        ClTrainerResult *r = &job.result;
        if (r->steps == r->start_step) {
            fprintf(stderr, "nothing to train: the checkpoint is at step %" G_GINT64_FORMAT
                            " of %" G_GINT64_FORMAT "; wrote the model\n", r->steps, r->steps);
        } else {
            fprintf(stderr, "trained steps %" G_GINT64_FORMAT "..%" G_GINT64_FORMAT
                            ": loss %.4f -> %.4f\n",
                    r->start_step + 1, r->steps, r->first_loss, r->final_loss);
            if (isfinite(r->final_aux_objects_loss) || isfinite(r->final_aux_changed_loss))
                fprintf(stderr, "auxiliary losses: objects %.4f -> %.4f, changed %.4f -> %.4f\n",
                        r->first_aux_objects_loss, r->final_aux_objects_loss,
                        r->first_aux_changed_loss, r->final_aux_changed_loss);
            fprintf(stderr,
                    "throughput: %.2f samples/s, %.0f tokens/s (%" G_GINT64_FORMAT " samples, %"
                    G_GINT64_FORMAT " tokens in %.1f s, %d worker%s)\n",
                    r->samples_per_s, r->tokens_per_s, r->samples, r->tokens, r->elapsed_s,
                    r->workers, r->workers == 1 ? "" : "s");
        }
        printf("%s\n", r->model_path);
    }
    g_clear_error(&job.error);
    cl_trainer_result_clear(&job.result);
    return rc;
}
