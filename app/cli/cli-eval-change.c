/* cli-eval-change.c - `changelens-cli eval-change`: do the model's heat maps find the change, and
 * does its text call the change right? (core/train/changeeval.h) */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "nn/backend.h"
#include "synth/synth.h"
#include "train/changeeval.h"
#include "train/checkpoint.h"

#define PROG CL_CLI_NAME " eval-change"

static const char summary_text[] =
    "Generates a two-image task's samples at the model's input size, with the patches that\n"
    "changed known, and measures each heat-map source against them over the pairs that change:\n"
    "  AUROC pooled     every cell of every changed pair ranked together (0.5: chance)\n"
    "  AUROC pair mean  the mean of each pair's own AUROC (pairs with unchanged cells too)\n"
    "  hottest %        pairs whose hottest cell is a changed one (chance: the changed share)\n"
    "Sources: update_norm (the SVE update norms), delta (the Δ map, each visual token's value on\n"
    "its 2 × 2 patches), change (the change head's probability, where the model has one) and\n"
    "blurdiff (model-free: the absolute difference of the images blurred, σ 2 px).\n"
    "With --describe the model also answers each sample's question (greedy) and the text is\n"
    "scored: change / no change called right, and where the task's structured answer has them,\n"
    "the kind (add, remove, move, recolour, resize), the 3 × 3 position and the object named.\n"
    "\n"
    "Without --model the default model is used (as describe finds it).\n"
    "Exit status: 0 done, 1 failure, 2 usage error.";

typedef struct {
    char *model_path, *task, *set, *json_path, *device;
    gint64 n, seed, nuisance, size, max_tokens;
    gboolean describe, no_grounding;
} Args;

static void args_clear(Args *a)
{
    cl_cli_free_all(&a->model_path, &a->task, &a->set, &a->json_path, &a->device, NULL);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Args, args_clear)

/* Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, Args *a)
{
    a->n = 200, a->seed = -1, a->nuisance = -1, a->max_tokens = 160;
    const ClCliIntOption ints[] = {
        { "n", 'n', 1, G_MAXINT, &a->n },
        { "seed", 's', 0, G_MAXINT64, &a->seed },
        { "nuisance", 0, 0, 2, &a->nuisance },
        { "size", 0, 32, 4096, &a->size },
        { "max-tokens", 0, 1, G_MAXINT, &a->max_tokens },
        { NULL },
    };
    GOptionEntry entries[] = {
        { "model", 'm', 0, G_OPTION_ARG_FILENAME, &a->model_path,
          "Model file or training checkpoint (default: the default model)", "FILE" },
        { "task", 't', 0, G_OPTION_ARG_STRING, &a->task,
          "A task of two or more images (edits, "
          "shapes, aerial, …)",
          "T" },
        CL_CLI_INT_ENTRY("n", 'n', "Samples (200)", "N"),
        CL_CLI_INT_ENTRY("seed", 's', "Data-set seed (default: the set's, 1000 held out, 0 train)",
                         "S"),
        { "set", 0, 0, G_OPTION_ARG_STRING, &a->set,
          "heldout (default) or train: the seed split, and photo-edits' photographs", "SET" },
        CL_CLI_INT_ENTRY("nuisance", 0,
                         "Acquisition nuisances: 0 none, 1 mild, 2 strong (default: the task's, 1)",
                         "L"),
        CL_CLI_INT_ENTRY("size", 0,
                         "Image side in pixels (default: the model's input size; a multiple of "
                         "its patch grid)",
                         "PX"),
        { "no-grounding", 0, 0, G_OPTION_ARG_NONE, &a->no_grounding,
          "With --describe: answers without grounding (docs/MODEL.md §3.13)", NULL },
        { "describe", 0, 0, G_OPTION_ARG_NONE, &a->describe,
          "Also generate each answer (greedy) and score its change calls", NULL },
        CL_CLI_INT_ENTRY("max-tokens", 0, "Longest answer with --describe (160 tokens)", "N"),
        { "device", 'd', 0, G_OPTION_ARG_STRING, &a->device, "cpu (default), cuda or auto", "DEV" },
        { "json", 0, 0, G_OPTION_ARG_FILENAME, &a->json_path,
          "Also write the results as one JSON object to OUT ('-': stdout instead of the table)",
          "OUT" },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx =
        g_option_context_new("- measure whether heat maps find the change and the text calls it");
    g_option_context_set_summary(ctx, summary_text);
    cl_cli_add_entries(ctx, entries, ints);
    if (!cl_cli_parse_options(ctx, PROG, &argc, &argv))
        return CL_CLI_EXIT_USAGE;
    if (argc > 1)
        return cl_cli_usage_error(PROG, "unexpected arguments");
    if (!a->task)
        return cl_cli_usage_error(PROG, "--task is required");
    gboolean known = FALSE;
    for (const char *const *t = cl_synth_tasks(); *t; t++)
        known |= strcmp(*t, a->task) == 0;
    if (!known) {
        g_autofree char *list = g_strjoinv(", ", (char **)cl_synth_tasks());
        return cl_cli_usage_error(PROG, "unknown task '%s' (known tasks: %s)", a->task, list);
    }
    if (a->set && strcmp(a->set, "heldout") != 0 && strcmp(a->set, "train") != 0)
        return cl_cli_usage_error(PROG, "--set must be heldout or train, not '%s'", a->set);
    return -1;
}

static int load_model(const Args *a, ClModel **model, ClBackend **be)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *path = a->model_path ? g_strdup(a->model_path) : cl_model_find_default(&err);
    if (path)
        *model = cl_checkpoint_file_is_checkpoint(path) ? cl_checkpoint_load_model(path, &err)
                                                        : cl_model_load(path, &err);
    if (!*model) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        return 1;
    }
    g_autofree char *notice = NULL;
    *be = cl_backend_new(a->device ? a->device : "cpu", &notice, &err);
    if (!*be) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        return 1;
    }
    if (notice)
        fprintf(stderr, "%s: note: %s\n", PROG, notice);
    return -1;
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

/* a share as a percentage, or "–" */
static void pct(char *buf, gsize len, double v, int digits)
{
    if (isfinite(v))
        g_snprintf(buf, len, "%.*f", digits, v * 100);
    else
        g_strlcpy(buf, "–", len);
}

static void num(char *buf, gsize len, double v)
{
    if (isfinite(v))
        g_snprintf(buf, len, "%.3f", v);
    else
        g_strlcpy(buf, "–", len);
}

static void print_text_row(const char *name, double v, int n)
{
    char b[32];
    pct(b, sizeof b, v, 1);
    printf("  %-24s %7s%s  (%d samples)\n", name, b, isfinite(v) ? " %" : "  ", n);
}

static void print_table(const char *model, const ClChangeEvalResult *r)
{
    g_autofree char *nuis =
        r->nuisance >= 0 ? g_strdup_printf("%d", r->nuisance) : g_strdup("task default");
    printf("ChangeLens eval-change: %s, %d samples (%s set, seed %" G_GUINT64_FORMAT
           ", nuisance %s), %s\n",
           r->task, r->n_samples, r->set, r->seed, nuis, model);
    printf("  %d × %d px, patch grid %d × %d; %d pairs, %d with a change\n", r->size, r->size,
           r->grid_w, r->grid_h, r->n_pairs, r->n_changed_pairs);
    printf("\n  %-12s %12s %15s %11s %7s\n", "source", "AUROC pooled", "AUROC pair mean",
           "hottest %", "pairs");
    for (guint i = 0; i < r->sources->len; i++) {
        const ClChangeSourceScore *s = &g_array_index(r->sources, ClChangeSourceScore, i);
        if (s->unavailable) {
            printf("  %-12s unavailable: %s\n", s->name, s->unavailable);
            continue;
        }
        char a[32], m[32], h[32];
        num(a, sizeof a, s->auroc_pooled);
        num(m, sizeof m, s->auroc_pair_mean);
        pct(h, sizeof h, s->hottest, 1);
        printf("  %-12s %12s %15s %11s %7d\n", s->name, a, m, h, s->n_pairs);
    }
    char h[32];
    pct(h, sizeof h, r->chance_hottest, 1);
    printf("  %-12s %12s %15s %11s\n", "chance", "0.500", "0.500", h);
    if (r->described) {
        printf("\n  text (greedy answers to each sample's question)\n");
        print_text_row("change / no change", r->text.change, r->text.n);
        print_text_row("  on unchanged pairs", r->text.unchanged_right, r->text.n_unchanged);
        print_text_row("  on changed pairs", r->text.changed_right,
                       r->text.n - r->text.n_unchanged);
        print_text_row("kind", r->text.kind, r->text.n_kind);
        print_text_row("position (3 × 3)", r->text.position, r->text.n_position);
        print_text_row("object named", r->text.object, r->text.n_object);
        if (r->n_unfamiliar >= 0) /* the model's statistics (config.ood) flag an image */
            print_text_row("unfamiliar-image notice", (double)r->n_unfamiliar / MAX(r->text.n, 1),
                           r->text.n);
    }
    printf("\n  per pair: %.1f ms encoding (Δ pass included)", r->encode_ms);
    for (guint i = 0; i < r->sources->len; i++) {
        const ClChangeSourceScore *s = &g_array_index(r->sources, ClChangeSourceScore, i);
        if (!s->unavailable && !strcmp(s->name, "blurdiff"))
            printf(", %.2f ms blurdiff", s->ms);
    }
    if (r->described)
        printf("; per sample: %.1f ms describe", r->describe_ms);
    printf("; %.1f s in all\n", r->seconds);
}

int cl_cli_eval_change(int argc, char **argv)
{
    g_auto(Args) a = { 0 };
    g_autoptr(ClModel) model = NULL;
    g_autoptr(ClBackend) be = NULL;
    int rc = parse_args(argc, argv, &a);
    if (rc < 0)
        rc = load_model(&a, &model, &be);
    if (rc >= 0)
        return rc;

    ClChangeEvalOptions o;
    cl_change_eval_options_init(&o);
    o.task = a.task;
    o.n = (int)a.n;
    if (a.seed >= 0)
        o.seed = (guint64)a.seed;
    if (a.set)
        o.set = a.set;
    o.nuisance = (int)a.nuisance;
    o.size = (int)a.size;
    o.describe = a.describe;
    o.no_grounding = a.no_grounding;
    o.max_new_tokens = (int)a.max_tokens;
    gint64 last = 0;
    o.progress = progress;
    o.user_data = &last;
    g_autoptr(GError) err = NULL;
    ClChangeEvalResult r;
    if (!cl_change_eval_run(be, model, &o, &r, &err)) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        cl_change_eval_result_clear(&r);
        return 1;
    }
    g_autofree char *json = cl_change_eval_result_to_json(&r);
    const gboolean json_stdout = a.json_path && strcmp(a.json_path, "-") == 0;
    if (json_stdout)
        printf("%s\n", json);
    else
        print_table(a.model_path ? a.model_path : "the default model", &r);
    cl_change_eval_result_clear(&r);
    if (a.json_path && !json_stdout) {
        g_autofree char *text = g_strconcat(json, "\n", NULL);
        if (!g_file_set_contents(a.json_path, text, -1, &err)) {
            fprintf(stderr, "%s: %s\n", PROG, err->message);
            return 1;
        }
    }
    return 0;
}
