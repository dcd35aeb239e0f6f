/* cli-bench-train.c - `changelens-cli bench --train [--vs-torch]`: the trainer's optimiser step
 * (forward + backward over a batch of synthetic samples, clipping, AdamW) timed through the real
 * training loop, and optionally the PyTorch reference doing the same step on the same weights
 * and samples in the same run (tests/reference/bench_train_torch.py, all cores). */
#include <glib/gstdio.h>
#include "jsonnum.h"
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/blas.h"
#include "cl-config.h"
#include "cli.h"
#include "model/model.h"
#include "train/synthdata.h"
#include "train/trainer.h"

#define PROG CL_CLI_NAME " bench --train"

typedef struct {
    GArray *t; /* elapsed seconds after each step */
    GArray *loss;
} Steps;

static void on_step(const ClTrainerStatus *st, gpointer user_data)
{
    Steps *s = user_data;
    g_array_append_val(s->t, st->elapsed_s);
    g_array_append_val(s->loss, st->loss);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Writes the samples the trainer's steps take (sample i of the task's stream) for the peer:
 * JSON [{"ids", "mask", "n_images"}…] and the pixels back to back. Returns the mean decoder
 * positions per sample. */
static gboolean write_samples(const ClModel *model, const char *task, guint64 seed, int n,
                              const char *json_path, const char *pix_path, double *positions,
                              GError **error)
{
    ClSynthOptions so;
    cl_synth_options_for_model(&so, model);
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_array(b);
    FILE *f = fopen(pix_path, "wb");
    if (!f) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "cannot write %s", pix_path);
        return FALSE;
    }
    double pos = 0;
    gboolean ok = TRUE;
    for (int i = 0; ok && i < n; i++) {
        g_autoptr(ClSynthSample) s =
            cl_synth_generate(task, cl_synth_stream_seed(seed, (guint64)i), &so, error);
        g_autoptr(ClTrainSample) ts = s ? cl_train_sample_from_synth(model, s, FALSE, error) : NULL;
        if (!ts) {
            ok = FALSE;
            break;
        }
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "ids");
        json_builder_begin_array(b);
        for (int t = 0; t < ts->n_ids; t++)
            json_builder_add_int_value(b, ts->ids[t]);
        json_builder_end_array(b);
        json_builder_set_member_name(b, "mask");
        json_builder_begin_array(b);
        for (int t = 0; t < ts->n_ids; t++)
            json_builder_add_int_value(b, ts->mask[t]);
        json_builder_end_array(b);
        json_builder_set_member_name(b, "n_images");
        json_builder_add_int_value(b, ts->n_images);
        json_builder_end_object(b);
        gsize nf = (gsize)ts->n_images * ts->channels * ts->size * ts->size;
        ok = fwrite(ts->pixels, sizeof(float), nf, f) == nf;
        if (!ok)
            g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "cannot write %s", pix_path);
        pos += ts->n_ids;
    }
    if (fclose(f) != 0 && ok) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "cannot write %s", pix_path);
        ok = FALSE;
    }
    if (!ok)
        return FALSE;
    json_builder_end_array(b);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    *positions = pos / n;
    return json_generator_to_file(gen, json_path, error);
}

/* The median of n values (sorts them); NAN when any is NAN. */
static double median(double *v, int n)
{
    for (int i = 0; i < n; i++)
        if (isnan(v[i]))
            return NAN;
    g_autofree double *c = g_memdup2(v, sizeof(double) * (gsize)n);
    qsort(c, n, sizeof(double), cmp_double);
    return n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
}

static void rm_tree(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *p = g_build_filename(dir, name, NULL);
        if (g_file_test(p, G_FILE_TEST_IS_DIR))
            rm_tree(p);
        else
            g_unlink(p);
    }
    g_rmdir(dir);
}

/* One run of tests/reference/bench_train_torch.py on the written model and samples: its median
 * step (ms), first step's loss and torch version (out->version owned by the caller); FALSE with
 * error set (the peer's stderr in the message) when it fails. */
typedef struct {
    double step_ms, first_loss;
    char *version;
} PeerRun;

static gboolean run_peer(const char *model_path, const char *samples_path, const char *pixels_path,
                         int batch, int warmup, gboolean compile, const char *device,
                         gboolean quiet, PeerRun *out, GError **error)
{
    out->step_ms = out->first_loss = NAN;
    out->version = NULL;
    g_autofree char *py = cl_cli_torch_python();
    g_autofree char *script =
        g_build_filename(cl_cli_source_dir(), "tests", "reference", "bench_train_torch.py", NULL);
    g_autofree char *bs = g_strdup_printf("%d", batch), *ws = g_strdup_printf("%d", warmup);
    /* on the GPU, the products as ours: exact f32, TF32 or BF16 ($CHANGELENS_CUDA_MATH) */
    const char *math = g_getenv("CHANGELENS_CUDA_MATH");
    const gboolean gpu = device && strcmp(device, "cuda") == 0;
    const char *math_arg = !gpu || !math                           ? NULL
                           : g_ascii_strcasecmp(math, "tf32") == 0 ? "--tf32"
                           : g_ascii_strcasecmp(math, "bf16") == 0 ? "--bf16"
                                                                   : NULL;
    const char *const base[] = { py,          script,       "--model",  model_path,
                                 "--samples", samples_path, "--pixels", pixels_path,
                                 "--batch",   bs,           "--warmup", ws,
                                 "--lr",      "1e-3",       "--device", gpu ? "cuda" : "cpu" };
    g_autoptr(GPtrArray) args = g_ptr_array_new();
    for (gsize i = 0; i < G_N_ELEMENTS(base); i++)
        g_ptr_array_add(args, (gpointer)base[i]);
    if (compile)
        g_ptr_array_add(args, (gpointer) "--torch-compile");
    if (math_arg)
        g_ptr_array_add(args, (gpointer)math_arg);
    g_ptr_array_add(args, NULL);
    char **pargv = (char **)args->pdata;
    if (!quiet)
        fprintf(stderr, "%s: running the PyTorch peer%s (%s)…\n", PROG,
                compile ? " with torch.compile" : "", py);
    g_autofree char *peer_out = NULL, *peer_err = NULL;
    int status = 0;
    if (!g_spawn_sync(NULL, pargv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &peer_out, &peer_err, &status,
                      error))
        return FALSE;
    if (!g_spawn_check_wait_status(status, NULL)) {
        g_set_error(error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED, "the PyTorch peer%s failed:\n%s",
                    compile ? " (torch.compile)" : "", peer_err ? peer_err : "");
        return FALSE;
    }
    g_autoptr(JsonParser) p = json_parser_new();
    if (!json_parser_load_from_data(p, peer_out, -1, error))
        return FALSE;
    JsonNode *root = json_parser_get_root(p);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                    "the PyTorch peer printed no object");
        return FALSE;
    }
    JsonObject *po = json_node_get_object(root);
    out->step_ms = json_object_get_double_member_with_default(po, "step_ms", NAN);
    out->version = g_strdup(json_object_get_string_member_with_default(po, "torch_version", "?"));
    JsonArray *losses = json_object_get_array_member(po, "losses");
    if (losses && json_array_get_length(losses) > 0)
        out->first_loss = json_array_get_double_element(losses, 0);
    return TRUE;
}

/* ---- the command ---------------------------------------------------------------------------- */

typedef struct {
    gboolean vs_torch, torch_compile, json;
    char *preset, *task, *config, *from, *device;
    int batch, repeat, warmup, workers, rounds;
    ClModelConfig cfg;
    const char *what, *what_name; /* "preset" "tiny", "model" FILE, … for the messages */
} BenchTrainArgs;

static void bench_train_args_clear(BenchTrainArgs *a)
{
    cl_cli_free_all(&a->preset, &a->task, &a->config, &a->from, &a->device, NULL);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(BenchTrainArgs, bench_train_args_clear)

/* What the rounds measured: per round the median step (ms) of ours, the peer's, the compiled
 * peer's, and the peer's / ours; then the medians over the rounds. */
typedef struct {
    int rounds;
    double *ours, *eager, *comp, *ratios;
    double step_ms, torch_ms, torchc_ms, speedup;
    double positions, first_loss, torch_first, torchc_first;
    int used_workers;
    char *torch_version;
} Measured;

static void measured_clear(Measured *m)
{
    cl_cli_free_all(&m->ours, &m->eager, &m->comp, &m->ratios, &m->torch_version, NULL);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Measured, measured_clear)

/* The scratch folder's files: the model both sides read, the trainer's run folders, the
 * samples and pixels for the peer. */
typedef struct {
    char *tmp, *model_path, *run_dir, *samples_path, *pixels_path;
} Scratch;

static void scratch_clear(Scratch *s)
{
    if (s->tmp)
        rm_tree(s->tmp);
    cl_cli_free_all(&s->tmp, &s->model_path, &s->run_dir, &s->samples_path, &s->pixels_path, NULL);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Scratch, scratch_clear)

/* Parses and checks argv; returns -1 to go on, else the exit status. *model: the --model file,
 * loaded (its config in a->cfg). */
static int parse_bench_train_args(int argc, char **argv, BenchTrainArgs *a, ClModel **model)
{
    gboolean train = FALSE;
    gint64 batch = 8, repeat = 3, warmup = 1, workers = 0, rounds = 1;
    const ClCliIntOption ints[] = {
        { "batch", 'b', 1, 1024, &batch },     { "repeat", 'r', 1, 100, &repeat },
        { "warmup", 0, 0, G_MAXINT, &warmup }, { "workers", 0, 0, 2, &workers },
        { "rounds", 0, 1, 20, &rounds },       { NULL },
    };
    GOptionEntry entries[] = {
        { "train", 0, 0, G_OPTION_ARG_NONE, &train, "Benchmark a training step", NULL },
        { "preset", 'p', 0, G_OPTION_ARG_STRING, &a->preset, "Model size: tiny (default) or base",
          "NAME" },
        { "config", 0, 0, G_OPTION_ARG_STRING, &a->config,
          "A model config instead (JSON text or a .json file, as train --config)", "JSON" },
        { "model", 'm', 0, G_OPTION_ARG_FILENAME, &a->from,
          "Start from this model file (its weights, config and tokenizer) instead", "FILE" },
        { "task", 0, 0, G_OPTION_ARG_STRING, &a->task, "Synthetic task of the samples (shapes)",
          "T" },
        { "device", 'd', 0, G_OPTION_ARG_STRING, &a->device,
          "cpu (default) or cuda: the trainer's steps (train --device) and the peer's", "DEV" },
        CL_CLI_INT_ENTRY("batch", 'b', "Samples per step (8)", "N"),
        CL_CLI_INT_ENTRY("repeat", 'r', "Timed steps (3; median)", "N"),
        CL_CLI_INT_ENTRY("warmup", 0, "Untimed steps first (1)", "N"),
        CL_CLI_INT_ENTRY("workers", 0, "Trainer workers (0: its choice)", "N"),
        CL_CLI_INT_ENTRY(
            "rounds", 0,
            "Rounds of ChangeLens then the peer, alternating (1); the medians over the rounds "
            "(a shared machine's speed drifts between runs)",
            "N"),
        { "vs-torch", 0, 0, G_OPTION_ARG_NONE, &a->vs_torch,
          "Run the PyTorch reference's step on the same weights and samples", NULL },
        { "torch-compile", 0, 0, G_OPTION_ARG_NONE, &a->torch_compile,
          "With --vs-torch: also the peer with torch.compile (give it --warmup 3 or more: it "
          "compiles in the untimed steps)",
          NULL },
        { "json", 0, 0, G_OPTION_ARG_NONE, &a->json, "Print one JSON object", NULL },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("- training step speed");
    cl_cli_add_entries(ctx, entries, ints);
    if (!cl_cli_parse_options(ctx, PROG, &argc, &argv))
        return CL_CLI_EXIT_USAGE;
    if (argc > 1)
        return cl_cli_usage_error(PROG, "unexpected argument '%s'", argv[1]);
    a->batch = (int)batch, a->repeat = (int)repeat, a->warmup = (int)warmup;
    a->workers = (int)workers, a->rounds = (int)rounds;
    if (!!a->preset + !!a->config + !!a->from > 1)
        return cl_cli_usage_error(PROG, "give one of --preset, --config and --model");
    g_autoptr(GError) err = NULL;
    if (a->from) {
        *model = cl_model_load(a->from, &err);
        if (!*model)
            return cl_cli_usage_error(PROG, "--model: %s", err->message);
        a->cfg = (*model)->config;
    } else if (a->config ? !cl_cli_load_config(a->config, &a->cfg, &err)
                         : !cl_model_config_preset(&a->cfg, a->preset ? a->preset : "tiny", &err)) {
        return cl_cli_usage_error(PROG, "%s%s", a->config ? "--config: " : "", err->message);
    }
    a->what = a->from ? "model" : a->config ? "config" : "preset";
    a->what_name = a->from ? a->from : a->config ? a->config : a->preset ? a->preset : "tiny";
    if (!a->task)
        a->task = g_strdup("shapes");
    return -1;
}

/* The options of the trainer's runs: the model file, pretraining at a fixed lr, no
 * checkpoints */
static void bench_trainer_options(const BenchTrainArgs *a, const Scratch *sc, guint64 seed,
                                  ClTrainerOptions *o)
{
    cl_trainer_options_init(o);
    o->stage = CL_TRAINER_STAGE_PRETRAIN;
    o->from = sc->model_path;
    o->task = a->task;
    o->steps = a->warmup + a->repeat;
    o->batch = a->batch;
    o->lr = 1e-3;
    o->warmup = 0;
    o->seed = seed;
    o->workers = a->workers;
    o->device = a->device;
    o->out_dir = sc->run_dir;
    o->checkpoint_every = 0;
    o->quiet = TRUE;
    /* the peer's step: the caption loss alone (the auxiliary heads are a training option the
     * peer does not have) */
    o->aux_weight_objects = 0;
    o->aux_weight_changed = 0;
}

/* Round r: the trainer's steps, then the peer's (and the compiled peer's) right after. */
static gboolean run_round(const BenchTrainArgs *a, const Scratch *sc, ClTrainerOptions *o, int r,
                          Steps *st, double *dt, Measured *m, GError **error)
{
    g_autofree char *run_r = g_strdup_printf("%s-%d", sc->run_dir, r);
    o->out_dir = run_r;
    g_array_set_size(st->t, 0);
    g_array_set_size(st->loss, 0);
    ClTrainerResult res = { 0 };
    gboolean ok = cl_trainer_run(o, on_step, st, NULL, &res, error);
    m->used_workers = res.workers;
    cl_trainer_result_clear(&res);
    if (!ok)
        return FALSE;
    for (int k = 0; k < a->repeat; k++) {
        int s = a->warmup + k;
        double prev = s > 0 ? g_array_index(st->t, double, s - 1) : 0;
        dt[k] = (g_array_index(st->t, double, s) - prev) * 1e3;
    }
    m->ours[r] = median(dt, a->repeat);
    m->first_loss = g_array_index(st->loss, double, 0);
    m->eager[r] = m->comp[r] = m->ratios[r] = NAN;
    if (a->vs_torch || a->torch_compile) {
        PeerRun pe = { NAN, NAN, NULL };
        if (!run_peer(sc->model_path, sc->samples_path, sc->pixels_path, a->batch, a->warmup, FALSE,
                      a->device, a->json, &pe, error))
            return FALSE;
        m->eager[r] = pe.step_ms, m->torch_first = pe.first_loss;
        m->ratios[r] = m->eager[r] / m->ours[r];
        g_free(m->torch_version);
        m->torch_version = pe.version;
    }
    if (a->torch_compile) {
        PeerRun pc = { NAN, NAN, NULL };
        if (!run_peer(sc->model_path, sc->samples_path, sc->pixels_path, a->batch, a->warmup, TRUE,
                      a->device, a->json, &pc, error))
            return FALSE;
        m->comp[r] = pc.step_ms, m->torchc_first = pc.first_loss;
        g_free(pc.version);
    }
    return TRUE;
}

/* Writes the shared model (and the peer's samples), then runs the rounds. */
static gboolean measure(const BenchTrainArgs *a, ClModel **model, const Scratch *sc, Measured *m,
                        GError **error)
{
    const guint64 seed = 7;
    const int steps = a->warmup + a->repeat;
    /* the same weights for both, written once in f32: the random init, or the given model's
     * weights (an f16 file's values are exact in f32) */
    if (!*model)
        *model = cl_model_new_random(&a->cfg, seed, error);
    if (!*model || !cl_model_save(*model, sc->model_path, "F32", error))
        return FALSE;
    if (!a->json)
        fprintf(stderr, "%s: %d round%s of %d steps of %d %s samples on the %s %s…\n", PROG,
                a->rounds, a->rounds == 1 ? "" : "s", steps, a->batch, a->task, a->what,
                a->what_name);
    if ((a->vs_torch || a->torch_compile) &&
        !write_samples(*model, a->task, seed, steps * a->batch, sc->samples_path, sc->pixels_path,
                       &m->positions, error))
        return FALSE;

    ClTrainerOptions o;
    bench_trainer_options(a, sc, seed, &o);
    Steps st = { g_array_new(FALSE, FALSE, sizeof(double)),
                 g_array_new(FALSE, FALSE, sizeof(double)) };
    g_autofree double *dt = g_new(double, a->repeat);
    gboolean ok = TRUE;
    for (int r = 0; ok && r < a->rounds; r++)
        ok = run_round(a, sc, &o, r, &st, dt, m, error);
    g_array_unref(st.t);
    g_array_unref(st.loss);
    if (!ok)
        return FALSE;
    m->step_ms = median(m->ours, a->rounds);
    m->torch_ms = median(m->eager, a->rounds);
    m->torchc_ms = median(m->comp, a->rounds);
    /* the speed-up: each round's pair (ours, then the peer's right after) is one measurement;
     * their median follows a drifting machine better than the ratio of the two medians */
    m->speedup = median(m->ratios, a->rounds);
    return TRUE;
}

static void print_bench_train_json(const BenchTrainArgs *a, const Measured *m)
{
    const int rounds = a->rounds;
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
#define JD(k, v)                                                                                   \
    (json_builder_set_member_name(b, k), isfinite(v)                                               \
                                             ? json_builder_add_double_value(b, cl_json_double(v)) \
                                             : json_builder_add_null_value(b))
    json_builder_set_member_name(b, "preset");
    if (a->config || a->from)
        json_builder_add_null_value(b);
    else
        json_builder_add_string_value(b, a->preset ? a->preset : "tiny");
    json_builder_set_member_name(b, "model");
    if (a->from)
        json_builder_add_string_value(b, a->from);
    else
        json_builder_add_null_value(b);
    json_builder_set_member_name(b, "rounds");
    json_builder_add_int_value(b, rounds);
    json_builder_set_member_name(b, "round_train_step_ms");
    json_builder_begin_array(b);
    for (int r = 0; r < rounds; r++)
        json_builder_add_double_value(b, cl_json_double(m->ours[r]));
    json_builder_end_array(b);
    json_builder_set_member_name(b, "round_speedups_vs_torch");
    json_builder_begin_array(b);
    for (int r = 0; r < rounds; r++)
        if (isfinite(m->ratios[r]))
            json_builder_add_double_value(b, cl_json_double(m->ratios[r]));
        else
            json_builder_add_null_value(b);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "config");
    g_autofree char *cfg_json = cl_model_config_to_json(&a->cfg);
    json_builder_add_value(b, json_from_string(cfg_json, NULL));
    json_builder_set_member_name(b, "task");
    json_builder_add_string_value(b, a->task);
    json_builder_set_member_name(b, "batch");
    json_builder_add_int_value(b, a->batch);
    json_builder_set_member_name(b, "device");
    json_builder_add_string_value(b, a->device ? a->device : "cpu");
    json_builder_set_member_name(b, "workers");
    json_builder_add_int_value(b, m->used_workers);
    json_builder_set_member_name(b, "blas_kernels");
    json_builder_add_string_value(b, cl_blas_kernels());
    const struct {
        const char *key;
        double value;
    } figures[] = {
        { "train_step_ms", m->step_ms },
        { "train_samples_per_s", a->batch / (m->step_ms / 1e3) },
        { "first_loss", m->first_loss },
        { "torch_train_step_ms", m->torch_ms },
        { "torch_first_loss", m->torch_first },
        { "train_speedup_vs_torch", m->speedup },
        { "torch_compile_train_step_ms", m->torchc_ms },
        { "torch_compile_first_loss", m->torchc_first },
        { "train_speedup_vs_torch_compile", m->torchc_ms / m->step_ms },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(figures); i++)
        JD(figures[i].key, figures[i].value);
#undef JD
    json_builder_end_object(b);
    cl_cli_print_json(b);
}

static void print_bench_train_text(const BenchTrainArgs *a, const Measured *m)
{
    const int batch = a->batch, rounds = a->rounds;
    if (rounds > 1)
        printf("ChangeLens bench: training step, %s %s, %s, batch %d (median of %d rounds' "
               "medians of %d steps)\n",
               a->what, a->what_name, a->task, batch, rounds, a->repeat);
    else
        printf("ChangeLens bench: training step, %s %s, %s, batch %d (median of %d steps)\n",
               a->what, a->what_name, a->task, batch, a->repeat);
    if (a->vs_torch || a->torch_compile) {
        printf("                               ChangeLens      PyTorch      ratio\n");
        printf("  step ms                    %12.1f %12.1f %9.2fx%s\n", m->step_ms, m->torch_ms,
               m->speedup, rounds > 1 ? " (the rounds' median)" : "");
        printf("  samples / s                %12.2f %12.2f\n", batch / (m->step_ms / 1e3),
               batch / (m->torch_ms / 1e3));
        printf("  first step's loss          %12.5f %12.5f   (same weights, same samples)\n",
               m->first_loss, m->torch_first);
        if (rounds > 1) {
            printf("  each round's ratio        ");
            for (int r = 0; r < rounds; r++)
                printf(" %.2fx", m->ratios[r]);
            printf("\n");
        }
    } else { /* no peer: no columns of NaN */
        printf("                               ChangeLens\n");
        printf("  step ms                    %12.1f\n", m->step_ms);
        printf("  samples / s                %12.2f\n", batch / (m->step_ms / 1e3));
        printf("  first step's loss          %12.5f\n", m->first_loss);
    }
    if (a->torch_compile) {
        printf("  torch.compile step ms      %12s %12.1f %9.2fx\n", "", m->torchc_ms,
               m->torchc_ms / m->step_ms);
        printf("  torch.compile first loss   %12s %12.5f\n", "", m->torchc_first);
    }
    printf("  ChangeLens: %d worker%s, OpenBLAS %s kernels%s", m->used_workers,
           m->used_workers == 1 ? "" : "s", cl_blas_kernels(),
           cl_blas_kernels_rechosen() ? " (re-chosen: the library fell back to Prescott)" : "");
    if (m->torch_version)
        printf("; PyTorch %s", m->torch_version);
    if (m->positions > 0)
        printf("; %.0f decoder positions per sample", m->positions);
    printf("\n");
}

int cl_cli_bench_train(int argc, char **argv)
{
    g_auto(BenchTrainArgs) a = { 0 };
    g_autoptr(ClModel) model = NULL;
    int rc = parse_bench_train_args(argc, argv, &a, &model);
    if (rc >= 0)
        return rc;

    g_autoptr(GError) err = NULL;
    g_auto(Scratch) sc = { 0 };
    sc.tmp = g_dir_make_tmp("changelens-bench-train-XXXXXX", &err);
    if (!sc.tmp) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        return 1;
    }
    sc.model_path = g_build_filename(sc.tmp, "model.safetensors", NULL);
    sc.run_dir = g_build_filename(sc.tmp, "run", NULL);
    sc.samples_path = g_build_filename(sc.tmp, "samples.json", NULL);
    sc.pixels_path = g_build_filename(sc.tmp, "pixels.f32", NULL);
    g_auto(Measured) m = {
        .ours = g_new(double, a.rounds),
            .eager = g_new(double, a.rounds),
                           .comp = g_new(double, a.rounds),
                                         .ratios = g_new(double, a.rounds), .first_loss = NAN,
                                                         .torch_first = NAN, .torchc_first = NAN,
                                         };
    if (!measure(&a, &model, &sc, &m, &err)) {
        fprintf(stderr, "%s: %s\n", PROG, err ? err->message : "failed");
        return 1;
    }
    if (a.json)
        print_bench_train_json(&a, &m);
    else
        print_bench_train_text(&a, &m);
    return 0;
}
