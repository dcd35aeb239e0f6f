/* cli-eval.c - `changelens-cli eval`: a model on a synthetic task's held-out samples, scored
 * with the paper's metrics next to the task's trivial baseline (core/train/eval.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/backend.h"
#include "cli.h"
#include "jsonnum.h"
#include "train/checkpoint.h"
#include "train/eval.h"
#include "synth/synth.h"

#define PROG CL_CLI_NAME " eval"

static void progress(int done, int total, gpointer user_data)
{
    gint64 *last = user_data;
    gint64 now = g_get_monotonic_time();
    if (done == total || now - *last > 500000) {
        fprintf(stderr, "\r%s: %d of %d samples", PROG, done, total);
        if (done == total)
            fputc('\n', stderr);
        *last = now;
    }
}

static void print_row(const char *name, double a, double b, gboolean pct)
{
    if (!isfinite(a) && !isfinite(b))
        return;
    double k = pct ? 100 : 1;
    printf("  %-18s %10.2f %10.2f\n", name, isfinite(a) ? a * k : NAN, isfinite(b) ? b * k : NAN);
}

/* --answers: one JSON object per line and sample (its number as `synth --seed S` names it) */
static gboolean write_answers(const char *path, const ClEvalResult *r, GError **error)
{
    GString *out = g_string_new(NULL);
    for (guint i = 0; i < r->answers->len; i++) {
        const ClEvalAnswer *a = &g_array_index(r->answers, ClEvalAnswer, i);
        g_autoptr(JsonBuilder) b = json_builder_new();
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "sample");
        json_builder_add_int_value(b, (gint64)i + 1);
        json_builder_set_member_name(b, "reference");
        json_builder_add_string_value(b, a->reference);
        json_builder_set_member_name(b, "prediction");
        json_builder_add_string_value(b, a->prediction);
        json_builder_set_member_name(b, "exact");
        if (a->exact < 0)
            json_builder_add_null_value(b);
        else
            json_builder_add_boolean_value(b, a->exact == 1);
        json_builder_set_member_name(b, "logprob");
        json_builder_add_double_value(b, cl_json_double(a->logprob));
        json_builder_set_member_name(b, "n_scored");
        json_builder_add_int_value(b, a->n_scored);
        json_builder_end_object(b);
        g_autoptr(JsonGenerator) gen = json_generator_new();
        g_autoptr(JsonNode) root = json_builder_get_root(b);
        json_generator_set_root(gen, root);
        g_autofree char *line = json_generator_to_data(gen, NULL);
        g_string_append(out, line);
        g_string_append_c(out, '\n');
    }
    gboolean ok = g_file_set_contents(path, out->str, (gssize)out->len, error);
    g_string_free(out, TRUE);
    return ok;
}

typedef struct {
    char *model_path, *random_init, *task, *device, *answers_path, *stream;
    gint64 n, max_tokens, baseline_n, examples, images, seed, init_seed, sparse_topk;
    gboolean json, no_ppl, greedy_numbers, grounded;
    int sink, window;
} EvalArgs;

static void eval_args_clear(EvalArgs *a)
{
    cl_cli_free_all(&a->model_path, &a->random_init, &a->task, &a->device, &a->answers_path,
                    &a->stream, NULL);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(EvalArgs, eval_args_clear)

static int parse_eval_options(int argc, char **argv, EvalArgs *a)
{
    a->sparse_topk = -1, a->n = 100, a->max_tokens = 160, a->baseline_n = 200, a->examples = 3;
    a->seed = 1000;
    const ClCliIntOption ints[] = {
        { "init-seed", 0, 0, G_MAXINT64, &a->init_seed },
        { "n", 'n', 1, G_MAXINT, &a->n },
        { "seed", 's', 0, G_MAXINT64, &a->seed },
        { "max-tokens", 0, 1, G_MAXINT, &a->max_tokens },
        { "baseline-n", 0, 1, G_MAXINT, &a->baseline_n },
        { "examples", 0, 0, G_MAXINT, &a->examples },
        { "images", 0, 2, 5, &a->images },
        { "sparse-prefill", 0, 0, G_MAXINT, &a->sparse_topk },
        { NULL },
    };
    GOptionEntry entries[] = {
        { "model", 'm', 0, G_OPTION_ARG_FILENAME, &a->model_path, "Model file", "FILE" },
        { "random-init", 0, 0, G_OPTION_ARG_STRING, &a->random_init,
          "An untrained model of this preset (a floor for the scores)", "PRESET" },
        CL_CLI_INT_ENTRY("init-seed", 0, "Seed of --random-init (0)", "N"),
        { "task", 't', 0, G_OPTION_ARG_STRING, &a->task, "shapes, dots, radiograph, aerial, edits",
          "T" },
        CL_CLI_INT_ENTRY("n", 'n', "Held-out samples (100)", "N"),
        CL_CLI_INT_ENTRY("seed", 's',
                         "Seed of the held-out set (1000; training sets use other seeds)", "S"),
        CL_CLI_INT_ENTRY("max-tokens", 0, "Longest answer (160 tokens)", "N"),
        CL_CLI_INT_ENTRY("baseline-n", 0,
                         "Training samples the baseline answer is drawn from (200)", "N"),
        CL_CLI_INT_ENTRY("examples", 0, "(reference, prediction) pairs shown (3; the first ones)",
                         "N"),
        CL_CLI_INT_ENTRY("images", 0, "dots: K images per sample, 2-5 (default: drawn per sample)",
                         "K"),
        { "greedy-numbers", 0, 0, G_OPTION_ARG_NONE, &a->greedy_numbers,
          "dots: greedy digits instead of the median of the model's distribution over numbers",
          NULL },
        { "answers", 0, 0, G_OPTION_ARG_FILENAME, &a->answers_path,
          "Write every sample's answer to FILE (JSON lines: sample, as synth numbers it; "
          "reference; prediction; exact)",
          "FILE" },
        { "no-perplexity", 0, 0, G_OPTION_ARG_NONE, &a->no_ppl, "Skip the perplexity pass", NULL },
        { "grounded", 0, 0, G_OPTION_ARG_NONE, &a->grounded,
          "Answer as describe answers the task's files: in the task's domain (aerial tiles, "
          "radiographs), with the change gate and grounding (docs/MODEL.md §3.13); default: the "
          "decoder alone",
          NULL },
        { "stream", 0, 0, G_OPTION_ARG_STRING, &a->stream,
          "Answer with streaming KV caches: the first SINK positions and the last WINDOW ones "
          "(e.g. 64+256)",
          "SINK+WINDOW" },
        CL_CLI_INT_ENTRY(
            "sparse-prefill", 0,
            "Offline sparse prefill: per block of 32 prompt positions, the first block, the "
            "previous, its own and the K best others",
            "K"),
        { "device", 'd', 0, G_OPTION_ARG_STRING, &a->device, "cpu (default), cuda or auto", "DEV" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &a->json, "Print one JSON object", NULL },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx =
        g_option_context_new("- score a model on a task's held-out samples");
    g_option_context_set_summary(
        ctx,
        "Generates the task's held-out samples (seed S), asks the model each one's question\n"
        "(greedy), and scores the answers with the paper's metrics: change accuracy, BLEU-4,\n"
        "METEOR, ROUGE-L, CIDEr-D, perplexity under the training mask, finding-level F1\n"
        "(radiograph), MAE/RMSE ×10⁻² (dots) — next to the task's trivial baseline (the most\n"
        "frequent training answer; for dots the mean value of the question asked) on the same\n"
        "samples.");
    cl_cli_add_entries(ctx, entries, ints);
    if (!cl_cli_parse_options(ctx, PROG, &argc, &argv))
        return CL_CLI_EXIT_USAGE;
    if (argc > 1)
        return cl_cli_usage_error(PROG, "unexpected arguments");
    return -1;
}

/* Returns -1 to go on, else the exit status. */
static int parse_eval_args(int argc, char **argv, EvalArgs *a)
{
    int rc = parse_eval_options(argc, argv, a);
    if (rc >= 0)
        return rc;
    if (!a->task)
        return cl_cli_usage_error(PROG, "--task is required");
    gboolean known = FALSE;
    for (const char *const *t = cl_synth_tasks(); *t; t++)
        known |= strcmp(*t, a->task) == 0;
    if (!known) {
        g_autofree char *list = g_strjoinv(", ", (char **)cl_synth_tasks());
        return cl_cli_usage_error(PROG, "unknown task '%s' (known tasks: %s)", a->task, list);
    }
    if (!a->model_path == !a->random_init)
        return cl_cli_usage_error(PROG, "give --model FILE or --random-init PRESET");
    if (a->stream && !cl_cli_parse_stream(a->stream, &a->sink, &a->window))
        return cl_cli_usage_error(PROG, "--stream takes SINK+WINDOW, e.g. 64+256");
    if (a->images != 0 && strcmp(a->task, "dots") != 0)
        return cl_cli_usage_error(PROG, "--images applies to the dots task");
    return -1;
}

/* The model (a file, a training checkpoint or a random init) and the backend; returns -1 to
 * go on, else the exit status. */
static int load_eval_model(const EvalArgs *a, ClModel **model, ClBackend **be)
{
    g_autoptr(GError) err = NULL;
    if (a->random_init) {
        ClModelConfig cfg;
        if (!cl_model_config_preset(&cfg, a->random_init, &err))
            return cl_cli_usage_error(PROG, "%s", err->message);
        *model = cl_model_new_random(&cfg, (guint64)a->init_seed, &err);
    } else {
        /* a training checkpoint evaluates as its model (a run in progress can be looked at) */
        *model = cl_checkpoint_file_is_checkpoint(a->model_path)
                     ? cl_checkpoint_load_model(a->model_path, &err)
                     : cl_model_load(a->model_path, &err);
    }
    if (!*model) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        return 1;
    }
    g_autofree char *notice = NULL;
    /* perplexity needs the CPU backward's forward: the CPU unless asked otherwise */
    *be = cl_backend_new(a->device ? a->device : "cpu", &notice, &err);
    if (!*be) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        return 1;
    }
    if (notice)
        fprintf(stderr, "%s: note: %s\n", PROG, notice);
    return -1;
}

static void eval_options(const EvalArgs *a, const ClBackend *be, ClEvalOptions *o)
{
    cl_eval_options_init(o);
    o->task = a->task;
    o->n = (int)a->n;
    o->seed = (guint64)a->seed;
    o->max_new_tokens = (int)a->max_tokens;
    o->baseline_n = (int)a->baseline_n;
    o->dot_images = (int)a->images;
    o->n_examples = (int)a->examples;
    o->median_numbers = !a->greedy_numbers;
    o->grounded = a->grounded;
    o->stream_sink = a->sink;
    o->stream_window = a->window;
    if (a->sparse_topk >= 0) {
        o->sparse_block = 32;
        o->sparse_topk = (int)a->sparse_topk;
    }
    o->perplexity = !a->no_ppl && strcmp(cl_backend_name(be), "cpu") == 0;
}

static void print_eval_text(const EvalArgs *a, const ClEvalResult *r)
{
    printf("ChangeLens eval: %s, %d held-out samples (seed %" G_GINT64_FORMAT "), %s\n", a->task,
           (int)a->n, a->seed, a->model_path ? a->model_path : a->random_init);
    printf("  %-18s %10s %10s\n", "", "model", "baseline");
    print_row("change accuracy %", r->model.change_accuracy, r->baseline.change_accuracy, TRUE);
    print_row("BLEU-4", r->model.bleu4 * 100, r->baseline.bleu4 * 100, FALSE);
    print_row("METEOR", r->model.meteor * 100, r->baseline.meteor * 100, FALSE);
    print_row("ROUGE-L", r->model.rouge_l * 100, r->baseline.rouge_l * 100, FALSE);
    print_row("CIDEr-D", r->model.cider * 100, r->baseline.cider * 100, FALSE);
    print_row("finding F1 micro", r->model.finding_f1_micro * 100,
              r->baseline.finding_f1_micro * 100, FALSE);
    print_row("finding F1 macro", r->model.finding_f1_macro * 100,
              r->baseline.finding_f1_macro * 100, FALSE);
    print_row("answers exact %", r->model.exact, r->baseline.exact, TRUE);
    print_row("  of changed pairs", r->model.exact_changed, r->baseline.exact_changed, TRUE);
    print_row("  of unchanged", r->model.exact_unchanged, r->baseline.exact_unchanged, TRUE);
    print_row("MAE ×10⁻²", r->model.mae, r->baseline.mae, FALSE);
    print_row("RMSE ×10⁻²", r->model.rmse, r->baseline.rmse, FALSE);
    print_row("perplexity", r->model.ppl, r->baseline.ppl, FALSE);
    printf("  baseline answer: %s\n", r->baseline_text);
    for (guint i = 0; i + 1 < r->examples->len; i += 2)
        printf("  example %u\n    reference:  %s\n    prediction: %s\n", i / 2 + 1,
               (const char *)g_ptr_array_index(r->examples, i),
               (const char *)g_ptr_array_index(r->examples, i + 1));
    printf("  %.1f s\n", r->seconds);
}

int cl_cli_eval(int argc, char **argv)
{
    g_auto(EvalArgs) a = { 0 };
    g_autoptr(ClModel) model = NULL;
    g_autoptr(ClBackend) be = NULL;
    int rc = parse_eval_args(argc, argv, &a);
    if (rc < 0)
        rc = load_eval_model(&a, &model, &be);
    if (rc >= 0)
        return rc;

    ClEvalOptions o;
    eval_options(&a, be, &o);
    gint64 last = 0;
    if (!a.json) {
        o.progress = progress;
        o.user_data = &last;
    }
    g_autoptr(GError) err = NULL;
    ClEvalResult r;
    if (!cl_eval_run(be, model, &o, &r, &err)) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        cl_eval_result_clear(&r);
        return 1;
    }
    if (a.answers_path && !write_answers(a.answers_path, &r, &err)) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        cl_eval_result_clear(&r);
        return 1;
    }
    if (a.json) {
        g_autofree char *out = cl_eval_result_to_json(&r);
        printf("%s\n", out);
    } else {
        print_eval_text(&a, &r);
    }
    cl_eval_result_clear(&r);
    return 0;
}
