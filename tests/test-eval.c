/* test-eval.c - the held-out evaluation: perfect answers score perfectly and empty ones score
 * nothing on every task (so the per-task scoring is wired to the right metric), the baseline
 * is a real answer of the task (for dots, each question's own mean), and `changelens-cli eval
 * --json` prints every key scripts use. */
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "train/eval.h"
#include "train/taskmetrics.h"
#include "fixtures.h"
#include "synth/synth.h"

#define N 12

static ClSynthSample **make_samples(const char *task, guint64 seed)
{
    ClSynthOptions so;
    cl_synth_options_init(&so);
    ClSynthSample **s = g_new0(ClSynthSample *, N);
    for (int i = 0; i < N; i++) {
        g_autoptr(GError) err = NULL;
        s[i] = cl_synth_generate(task, cl_synth_stream_seed(seed, (guint64)i), &so, &err);
        g_assert_no_error(err);
    }
    return s;
}

/* Whether the sample's pair shows a change (its reference names one). */
static gboolean pair_changed(const char *task, const ClSynthSample *s)
{
    if (strcmp(task, "radiograph") == 0) {
        ClFindingLabels g;
        cl_findings_parse(s->answer, &g);
        return !cl_findings_empty(&g);
    }
    return s->changes && s->changes->len > 0;
}

static void free_samples(ClSynthSample **s)
{
    for (int i = 0; i < N; i++)
        cl_synth_sample_free(s[i]);
    g_free(s);
}

static void test_perfect_and_empty(gconstpointer data)
{
    const char *task = data;
    ClSynthSample **s = make_samples(task, 77);
    const char *perfect[N], *empty[N];
    for (int i = 0; i < N; i++) {
        perfect[i] = s[i]->answer;
        empty[i] = "";
    }
    ClEvalScores good, bad;
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_eval_score(task, s, perfect, N, &good, &err));
    g_assert_no_error(err);
    g_assert_true(cl_eval_score(task, s, empty, N, &bad, &err));
    g_assert_no_error(err);
    g_test_message("%s perfect: acc %.3f bleu4 %.3f meteor %.3f rougeL %.3f cider %.3f F1 %.3f "
                   "mae %.4f",
                   task, good.change_accuracy, good.bleu4, good.meteor, good.rouge_l, good.cider,
                   good.finding_f1_micro, good.mae);
    g_assert_true(isnan(good.ppl)); /* the scoring alone has no model */
    if (strcmp(task, "dots") == 0) {
        /* the answer is the value to 4 decimals: off by at most 0.00005 = 0.005 ×10⁻² */
        g_assert_cmpfloat(good.mae, <=, 0.005 + 1e-9);
        g_assert_cmpfloat(bad.mae, >, 1.0); /* no number: read as 0 */
        g_assert_true(isnan(good.bleu4));
        return free_samples(s);
    }
    g_assert_true(isnan(good.mae));
    g_assert_cmpfloat(fabs(good.bleu4 - 1.0), <, 1e-6);
    g_assert_cmpfloat(fabs(good.rouge_l - 1.0), <, 1e-6);
    g_assert_cmpfloat(bad.bleu4, <, 1e-6);
    if (strcmp(task, "shapes") == 0 || strcmp(task, "radiograph") == 0 ||
        strcmp(task, "aerial") == 0 || strcmp(task, "aerial-series") == 0 ||
        strcmp(task, "aerial-log") == 0) {
        g_assert_cmpfloat(good.change_accuracy, ==, 1.0);
        g_assert_cmpfloat(bad.change_accuracy, <, 1.0);
    } else {
        g_assert_true(isnan(good.change_accuracy));
    }
    /* answers entirely right: where a parser judges the whole answer */
    if (strcmp(task, "aerial-series") == 0 || strcmp(task, "aerial-log") == 0) {
        /* the image named wrong: neither the "when" nor the whole answer counts; spacing and
         * case do not matter */
        const char *off[N];
        g_autoptr(GPtrArray) keep = g_ptr_array_new_with_free_func(g_free);
        for (int i = 0; i < N; i++) {
            g_autofree char *k = g_strdup(strstr(s[i]->answer, "in image ") + 9);
            const int img = atoi(k);
            char *head =
                g_strndup(s[i]->answer, strstr(s[i]->answer, "in image ") + 9 - s[i]->answer);
            char *o = g_strdup_printf("%s%d%s", head, img + 1, strchr(k, ' '));
            g_free(head);
            g_ptr_array_add(keep, o);
            off[i] = o;
        }
        ClEvalScores wrong;
        g_assert_true(cl_eval_score(task, s, off, N, &wrong, &err));
        g_assert_cmpfloat(wrong.change_accuracy, ==, 0.0);
        g_assert_cmpfloat(wrong.exact, ==, 0.0);
        g_autofree char *spaced = g_strdup_printf("  %s ", s[0]->answer);
        spaced[2] = g_ascii_toupper(spaced[2]);
        g_assert_cmpint(cl_eval_answer_exact(task, s[0], spaced), ==, 1);
    }
    if (strcmp(task, "shapes") == 0 || strcmp(task, "radiograph") == 0 ||
        strcmp(task, "aerial") == 0 || strcmp(task, "aerial-series") == 0 ||
        strcmp(task, "aerial-log") == 0) {
        g_assert_cmpfloat(good.exact, ==, 1.0);
        g_assert_cmpfloat(bad.exact, <, 1.0);
        for (int i = 0; i < N; i++)
            g_assert_cmpint(cl_eval_answer_exact(task, s[i], s[i]->answer), ==, 1);
    } else {
        g_assert_true(isnan(good.exact));
        g_assert_cmpint(cl_eval_answer_exact(task, s[0], s[0]->answer), ==, -1);
    }
    /* exact, split by whether the pair changed: every right answer counts on its side; "No
     * change." for every pair is right on the unchanged ones alone */
    if (strcmp(task, "shapes") == 0 || strcmp(task, "radiograph") == 0 ||
        strcmp(task, "aerial") == 0) {
        int changed = 0, an_unchanged = -1;
        for (int i = 0; i < N; i++) {
            changed += pair_changed(task, s[i]);
            if (!pair_changed(task, s[i]) && an_unchanged < 0)
                an_unchanged = i;
        }
        g_assert_true(changed == 0 ? isnan(good.exact_changed) : good.exact_changed == 1.0);
        g_assert_true(changed == N ? isnan(good.exact_unchanged) : good.exact_unchanged == 1.0);
        if (changed > 0 && changed < N) {
            const char *same[N]; /* an unchanged pair's answer for every pair */
            for (int i = 0; i < N; i++)
                same[i] = s[an_unchanged]->answer;
            ClEvalScores flat;
            g_assert_true(cl_eval_score(task, s, same, N, &flat, &err));
            g_assert_cmpfloat(flat.exact_changed, ==, 0.0);
            g_assert_cmpfloat(flat.exact_unchanged, ==, 1.0);
        }
    }
    if (strcmp(task, "radiograph") == 0 && isfinite(good.finding_f1_micro)) {
        g_assert_cmpfloat(good.finding_f1_micro, ==, 1.0);
        g_assert_cmpfloat(good.finding_f1_macro, ==, 1.0);
    }
    free_samples(s);
}

static void test_shapes_order_invariant(void)
{
    ClSynthSample **s = make_samples("shapes", 5);
    /* each answer with its sentences reversed scores the same accuracy */
    char *rev[N];
    for (int i = 0; i < N; i++) {
        g_auto(GStrv) parts = g_strsplit(s[i]->answer, ". ", -1);
        guint n = g_strv_length(parts);
        GString *r = g_string_new(NULL);
        for (guint k = n; k-- > 0;) {
            g_string_append(r, parts[k]);
            if (!g_str_has_suffix(parts[k], "."))
                g_string_append_c(r, '.');
            if (k)
                g_string_append_c(r, ' ');
        }
        rev[i] = g_string_free(r, FALSE);
    }
    ClEvalScores sc;
    g_assert_true(cl_eval_score("shapes", s, (const char *const *)rev, N, &sc, NULL));
    g_assert_cmpfloat(sc.change_accuracy, ==, 1.0);
    g_assert_cmpfloat(sc.exact, ==, 1.0);
    /* one change too many makes an answer not exact, though its changes are all there */
    g_autofree char *more = g_strconcat(rev[0], " A new large red metal cube is visible.", NULL);
    char *keep = rev[0];
    rev[0] = more;
    g_assert_true(cl_eval_score("shapes", s, (const char *const *)rev, N, &sc, NULL));
    rev[0] = keep;
    g_assert_cmpfloat(fabs(sc.exact - (double)(N - 1) / N), <, 1e-12);
    g_assert_cmpfloat(sc.change_accuracy, <, 1.0);
    for (int i = 0; i < N; i++)
        g_free(rev[i]);
    free_samples(s);
}

static void test_cli_json(void)
{
    const char *args[] = { "eval", "--random-init", "tiny", "--task",       "shapes", "--n",
                           "2",    "--max-tokens",  "8",    "--baseline-n", "20",     "--json",
                           NULL };
    g_autoptr(JsonNode) root = cl_fixture_cli_json(args);
    JsonObject *o = json_node_get_object(root);
    const char *keys[] = { "task",
                           "n",
                           "change_accuracy",
                           "bleu4",
                           "meteor",
                           "rougeL",
                           "cider",
                           "ppl",
                           "finding_f1_micro",
                           "finding_f1_macro",
                           "mae",
                           "rmse",
                           "exact",
                           "baseline" };
    for (gsize i = 0; i < G_N_ELEMENTS(keys); i++)
        g_assert_true(json_object_has_member(o, keys[i]));
    g_assert_cmpstr(json_object_get_string_member(o, "task"), ==, "shapes");
    g_assert_cmpint(json_object_get_int_member(o, "n"), ==, 2);
    /* a random model's perplexity is finite and large; dots' metrics do not apply to shapes */
    double ppl = json_object_get_double_member(o, "ppl");
    g_assert_true(isfinite(ppl) && ppl > 2);
    g_assert_true(json_node_is_null(json_object_get_member(o, "mae")));
    JsonObject *b = json_object_get_object_member(o, "baseline");
    g_assert_true(json_object_has_member(b, "change_accuracy"));
    g_assert_true(json_node_is_null(json_object_get_member(b, "ppl")));
    g_assert_true(strlen(json_object_get_string_member(b, "answer")) > 10);

    /* --answers: a line per sample, numbered as synth numbers them, with its reference */
    g_autofree char *dir = cl_fixture_tmpdir("eval-answers");
    g_autofree char *path = g_build_filename(dir, "answers.jsonl", NULL);
    const char *aargs[] = { "eval",
                            "--random-init",
                            "tiny",
                            "--task",
                            "radiograph",
                            "--n",
                            "3",
                            "--seed",
                            "11",
                            "--max-tokens",
                            "4",
                            "--no-perplexity",
                            "--baseline-n",
                            "20",
                            "--answers",
                            path,
                            NULL };
    g_assert_cmpint(cl_fixture_run_cli(aargs, NULL), ==, 0);
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    g_auto(GStrv) lines = g_strsplit(g_strchomp(text), "\n", -1);
    g_assert_cmpuint(g_strv_length(lines), ==, 3);
    ClSynthOptions so;
    cl_synth_options_init(&so);
    for (int i = 0; i < 3; i++) {
        g_autoptr(JsonNode) line = json_from_string(lines[i], NULL);
        g_assert_nonnull(line);
        JsonObject *a = json_node_get_object(line);
        g_assert_cmpint(json_object_get_int_member(a, "sample"), ==, i + 1);
        g_autoptr(ClSynthSample) s =
            cl_synth_generate("radiograph", cl_synth_stream_seed(11, i), &so, NULL);
        g_assert_cmpstr(json_object_get_string_member(a, "reference"), ==, s->answer);
        g_assert_true(json_object_has_member(a, "prediction"));
        /* radiograph answers are judged whole: exact is true or false, never null */
        JsonNode *e = json_object_get_member(a, "exact");
        g_assert_true(JSON_NODE_HOLDS_VALUE(e));
        g_assert_cmpint(
            json_object_get_boolean_member(a, "exact"), ==,
            cl_eval_answer_exact("radiograph", s, json_object_get_string_member(a, "prediction")));
    }
    cl_fixture_rmdir(dir);

    /* usage errors exit 2 */
    const char *bad[] = {
        g_getenv("CL_CLI"), "eval", "--random-init", "tiny", "--task", "nope", NULL
    };
    g_autofree char *err = NULL;
    int status = 0;
    g_assert_true(g_spawn_sync(NULL, (char **)bad, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                               NULL, &err, &status, NULL));
    g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 2);
    g_assert_nonnull(strstr(err, "known tasks"));
}

static ClSynthSample *dots_sample(guint64 seed, int i)
{
    ClSynthOptions so;
    cl_synth_options_init(&so); /* the tiny preset's 160 px: the same samples as eval's */
    g_autoptr(GError) err = NULL;
    ClSynthSample *s = cl_synth_generate("dots", cl_synth_stream_seed(seed, (guint64)i), &so, &err);
    g_assert_no_error(err);
    return s;
}

/* The dots baseline answers each question's own mean (the question names the quantity and the
 * number of images), the mean over its training draw (--baseline-n samples of the seed eval
 * derives from the held-out one), not one mean per quantity: the area's mean grows with the
 * number of dots. */
static void test_dots_baseline_per_question(void)
{
    enum { M = 40, B = 100 };
    const char *args[] = { "eval",
                           "--random-init",
                           "tiny",
                           "--task",
                           "dots",
                           "--n",
                           "40",
                           "--seed",
                           "5",
                           "--max-tokens",
                           "1",
                           "--no-perplexity",
                           "--baseline-n",
                           "100",
                           "--json",
                           NULL };
    g_autoptr(JsonNode) root = cl_fixture_cli_json(args);
    JsonObject *b = json_object_get_object_member(json_node_get_object(root), "baseline");
    double base_mae = json_object_get_double_member(b, "mae");

    /* the question's means over the training draw, and one mean per quantity */
    double sum[2][6] = { { 0 } }, cnt[2][6] = { { 0 } };
    for (int i = 0; i < B; i++) {
        g_autoptr(ClSynthSample) s = dots_sample(5 ^ G_GUINT64_CONSTANT(0x5eedba5e1ee7), i);
        int q = s->quantity == CL_SYNTH_QUANTITY_DISTANCE ? 0 : 1;
        g_assert_true(s->n_images >= 2 && s->n_images <= 5);
        sum[q][s->n_images] += s->value, cnt[q][s->n_images]++;
        sum[q][0] += s->value, cnt[q][0]++;
    }
    double per_question = 0, per_quantity = 0;
    for (int i = 0; i < M; i++) {
        g_autoptr(ClSynthSample) s = dots_sample(5, i);
        int q = s->quantity == CL_SYNTH_QUANTITY_DISTANCE ? 0 : 1;
        g_assert_cmpfloat(cnt[q][s->n_images], >, 0);
        /* the baseline answers to 4 decimals, as the model must */
        double mq = round(sum[q][s->n_images] / cnt[q][s->n_images] * 1e4) / 1e4;
        double m1 = round(sum[q][0] / cnt[q][0] * 1e4) / 1e4;
        per_question += fabs(s->value - mq) * 100 / M;
        per_quantity += fabs(s->value - m1) * 100 / M;
    }
    g_test_message("dots baseline MAE %.4f; each question's mean %.4f, each quantity's %.4f",
                   base_mae, per_question, per_quantity);
    g_assert_cmpfloat(fabs(base_mae - per_question), <, 1e-6);
    g_assert_cmpfloat(per_question, <, per_quantity);

    /* --images is checked */
    const char *bad[][9] = {
        { g_getenv("CL_CLI"), "eval", "--random-init", "tiny", "--task", "dots", "--images", "6",
          NULL },
        { g_getenv("CL_CLI"), "eval", "--random-init", "tiny", "--task", "shapes", "--images", "2",
          NULL },
    };
    for (gsize k = 0; k < G_N_ELEMENTS(bad); k++) {
        g_autofree char *err = NULL;
        int status = 0;
        g_assert_true(g_spawn_sync(NULL, (char **)bad[k], NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
                                   NULL, NULL, &err, &status, NULL));
        g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 2);
        g_assert_nonnull(strstr(err, "--images"));
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    for (const char *const *t = cl_synth_tasks(); *t; t++) {
        if (!cl_fixture_task_available(*t))
            continue;
        g_autofree char *path = g_strdup_printf("/eval/score/%s", *t);
        g_test_add_data_func(path, *t, test_perfect_and_empty);
    }
    g_test_add_func("/eval/shapes-order-invariant", test_shapes_order_invariant);
    g_test_add_func("/eval/cli-json", test_cli_json);
    g_test_add_func("/eval/dots-baseline-per-question", test_dots_baseline_per_question);
    return g_test_run();
}
