/* cli-eval.c - `changelens-cli eval`: a model on a synthetic task's held-out samples, scored
 * with the paper's metrics next to the task's trivial baseline (core/train/eval.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/backend.h"
#include "cli.h"
#include "train/checkpoint.h"
#include "train/eval.h"
#include "synth/synth.h"

#define PROG "changelens-cli eval"

static int usage(const char *msg)
{
    fprintf(stderr, "%s: %s (see '%s --help')\n", PROG, msg, PROG);
    return 2;
}

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

int cl_cli_eval(int argc, char **argv)
{
    g_autofree char *model_path = NULL, *random_init = NULL, *task = NULL, *device = NULL;
    g_autofree char *answers_path = NULL, *stream = NULL;
    int sparse_topk = -1;
    int n = 100, max_tokens = 160, baseline_n = 200, examples = 3, images = 0;
    gint64 seed = 1000, init_seed = 0;
    gboolean json = FALSE, no_ppl = FALSE, greedy_numbers = FALSE;
    GOptionEntry entries[] = {
        { "model", 'm', 0, G_OPTION_ARG_FILENAME, &model_path, "Model file", "FILE" },
        { "random-init", 0, 0, G_OPTION_ARG_STRING, &random_init,
          "An untrained model of this preset (a floor for the scores)", "PRESET" },
        { "init-seed", 0, 0, G_OPTION_ARG_INT64, &init_seed, "Seed of --random-init (0)", "N" },
        { "task", 't', 0, G_OPTION_ARG_STRING, &task, "shapes, dots, radiograph, aerial, edits",
          "T" },
        { "n", 'n', 0, G_OPTION_ARG_INT, &n, "Held-out samples (100)", "N" },
        { "seed", 's', 0, G_OPTION_ARG_INT64, &seed,
          "Seed of the held-out set (1000; training sets use other seeds)", "S" },
        { "max-tokens", 0, 0, G_OPTION_ARG_INT, &max_tokens, "Longest answer (160 tokens)", "N" },
        { "baseline-n", 0, 0, G_OPTION_ARG_INT, &baseline_n,
          "Training samples the baseline answer is drawn from (200)", "N" },
        { "examples", 0, 0, G_OPTION_ARG_INT, &examples,
          "(reference, prediction) pairs shown (3; the first ones)", "N" },
        { "images", 0, 0, G_OPTION_ARG_INT, &images,
          "dots: K images per sample, 2-5 (default: drawn per sample)", "K" },
        { "greedy-numbers", 0, 0, G_OPTION_ARG_NONE, &greedy_numbers,
          "dots: greedy digits instead of the median of the model's distribution over numbers",
          NULL },
        { "answers", 0, 0, G_OPTION_ARG_FILENAME, &answers_path,
          "Write every sample's answer to FILE (JSON lines: sample, as synth numbers it; "
          "reference; prediction; exact)", "FILE" },
        { "no-perplexity", 0, 0, G_OPTION_ARG_NONE, &no_ppl, "Skip the perplexity pass", NULL },
        { "stream", 0, 0, G_OPTION_ARG_STRING, &stream,
          "Answer with streaming KV caches: the first SINK positions and the last WINDOW ones "
          "(e.g. 64+256)", "SINK+WINDOW" },
        { "sparse-prefill", 0, 0, G_OPTION_ARG_INT, &sparse_topk,
          "Offline sparse prefill: per block of 32 prompt positions, the first block, the "
          "previous, its own and the K best others", "K" },
        { "device", 'd', 0, G_OPTION_ARG_STRING, &device, "cpu (default), cuda or auto", "DEV" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &json, "Print one JSON object", NULL },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx =
        g_option_context_new("- score a model on a task's held-out samples");
    g_option_context_set_summary(ctx,
        "Generates the task's held-out samples (seed S), asks the model each one's question\n"
        "(greedy), and scores the answers with the paper's metrics: change accuracy, BLEU-4,\n"
        "METEOR, ROUGE-L, CIDEr-D, perplexity under the training mask, finding-level F1\n"
        "(radiograph), MAE/RMSE ×10⁻² (dots) — next to the task's trivial baseline (the most\n"
        "frequent training answer; for dots the mean value of the question asked) on the same\n"
        "samples.");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) err = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        return 2;
    }
    if (argc > 1)
        return usage("unexpected arguments");
    if (!task)
        return usage("--task is required");
    gboolean known = FALSE;
    for (const char *const *t = cl_synth_tasks(); *t; t++)
        known |= strcmp(*t, task) == 0;
    if (!known) {
        g_autofree char *list = g_strjoinv(", ", (char **)cl_synth_tasks());
        g_autofree char *m = g_strdup_printf("unknown task '%s' (known tasks: %s)", task, list);
        return usage(m);
    }
    if (!model_path == !random_init)
        return usage("give --model FILE or --random-init PRESET");
    if (n < 1 || max_tokens < 1 || baseline_n < 1 || seed < 0 || init_seed < 0 || examples < 0)
        return usage("--n, --max-tokens and --baseline-n must be at least 1, seeds and --examples "
                     "not negative");

    gint64 sink = 0, window = 0;
    if (stream) {
        g_auto(GStrv) sw = g_strsplit(stream, "+", 2);
        if (!sw[0] || !sw[1] || !g_ascii_string_to_signed(sw[0], 10, 0, 1 << 20, &sink, NULL) ||
            !g_ascii_string_to_signed(sw[1], 10, 1, 1 << 20, &window, NULL))
            return usage("--stream takes SINK+WINDOW, e.g. 64+256");
    }
    if (images != 0 && (images < 2 || images > 5))
        return usage("--images must be 2 to 5");
    if (images != 0 && strcmp(task, "dots") != 0)
        return usage("--images applies to the dots task");

    g_autoptr(ClModel) model = NULL;
    if (random_init) {
        ClModelConfig cfg;
        if (!cl_model_config_preset(&cfg, random_init, &err))
            return usage(err->message);
        model = cl_model_new_random(&cfg, (guint64)init_seed, &err);
    } else {
        /* a training checkpoint evaluates as its model (a run in progress can be looked at) */
        model = cl_checkpoint_file_is_checkpoint(model_path)
                    ? cl_checkpoint_load_model(model_path, &err)
                    : cl_model_load(model_path, &err);
    }
    if (!model) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        return 1;
    }
    g_autofree char *notice = NULL;
    /* perplexity needs the CPU backward's forward: the CPU unless asked otherwise */
    g_autoptr(ClBackend) be = cl_backend_new(device ? device : "cpu", &notice, &err);
    if (!be) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        return 1;
    }
    if (notice)
        fprintf(stderr, "%s: note: %s\n", PROG, notice);

    ClEvalOptions o;
    cl_eval_options_init(&o);
    o.task = task;
    o.n = n;
    o.seed = (guint64)seed;
    o.max_new_tokens = max_tokens;
    o.baseline_n = baseline_n;
    o.dot_images = images;
    o.n_examples = examples;
    o.median_numbers = !greedy_numbers;
    o.stream_sink = (int)sink;
    o.stream_window = (int)window;
    if (sparse_topk >= 0) {
        o.sparse_block = 32;
        o.sparse_topk = sparse_topk;
    }
    o.perplexity = !no_ppl && strcmp(cl_backend_name(be), "cpu") == 0;
    gint64 last = 0;
    if (!json) {
        o.progress = progress;
        o.user_data = &last;
    }
    ClEvalResult r;
    if (!cl_eval_run(be, model, &o, &r, &err)) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        cl_eval_result_clear(&r);
        return 1;
    }
    if (answers_path && !write_answers(answers_path, &r, &err)) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        cl_eval_result_clear(&r);
        return 1;
    }
    if (json) {
        g_autofree char *out = cl_eval_result_to_json(&r);
        printf("%s\n", out);
    } else {
        printf("ChangeLens eval: %s, %d held-out samples (seed %" G_GINT64_FORMAT "), %s\n", task, n,
               seed, model_path ? model_path : random_init);
        printf("  %-18s %10s %10s\n", "", "model", "baseline");
        print_row("change accuracy %", r.model.change_accuracy, r.baseline.change_accuracy, TRUE);
        print_row("BLEU-4", r.model.bleu4 * 100, r.baseline.bleu4 * 100, FALSE);
        print_row("METEOR", r.model.meteor * 100, r.baseline.meteor * 100, FALSE);
        print_row("ROUGE-L", r.model.rouge_l * 100, r.baseline.rouge_l * 100, FALSE);
        print_row("CIDEr-D", r.model.cider * 100, r.baseline.cider * 100, FALSE);
        print_row("finding F1 micro", r.model.finding_f1_micro * 100,
                  r.baseline.finding_f1_micro * 100, FALSE);
        print_row("finding F1 macro", r.model.finding_f1_macro * 100,
                  r.baseline.finding_f1_macro * 100, FALSE);
        print_row("answers exact %", r.model.exact, r.baseline.exact, TRUE);
        print_row("MAE ×10⁻²", r.model.mae, r.baseline.mae, FALSE);
        print_row("RMSE ×10⁻²", r.model.rmse, r.baseline.rmse, FALSE);
        print_row("perplexity", r.model.ppl, r.baseline.ppl, FALSE);
        printf("  baseline answer: %s\n", r.baseline_text);
        for (guint i = 0; i + 1 < r.examples->len; i += 2)
            printf("  example %u\n    reference:  %s\n    prediction: %s\n", i / 2 + 1,
                   (const char *)g_ptr_array_index(r.examples, i),
                   (const char *)g_ptr_array_index(r.examples, i + 1));
        printf("  %.1f s\n", r.seconds);
    }
    cl_eval_result_clear(&r);
    return 0;
}
