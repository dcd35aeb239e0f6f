/* test-changeeval.c - the change evaluation: AUROC against a hand-computed example and a pairwise
 * count, the text parser's kinds, positions and objects, the blurred difference on a drawn
 * square, and `eval-change` over a few samples of the shipped model (structure, and a
 * blurred-difference baseline far above chance on nuisance-free pairs, a property of the data). */
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>

#include "model/model.h"
#include "nn/backend.h"
#include "train/changeeval.h"

/* ---- AUROC ---------------------------------------------------------------------------------- */

/* By hand: positives 0.35, 0.8, 0.4 against negatives 0.1, 0.4. Of the 6 (positive, negative)
 * pairs, 0.35 beats 0.1 only, 0.8 beats both, 0.4 beats 0.1 and ties 0.4 (a half): 4.5 / 6. */
static void test_auroc_hand(void)
{
    const float s[] = { 0.1f, 0.4f, 0.35f, 0.8f, 0.4f };
    const guint8 l[] = { 0, 0, 1, 1, 1 };
    g_assert_cmpfloat(cl_auroc(s, l, 5), ==, 0.75);
}

static void test_auroc_extremes(void)
{
    const float up[] = { 1, 2, 3, 4, 5, 6 }, flat[] = { 7, 7, 7, 7, 7, 7 };
    const guint8 l[] = { 0, 0, 0, 1, 1, 1 }, none[6] = { 0 };
    g_assert_cmpfloat(cl_auroc(up, l, 6), ==, 1.0); /* perfect */
    const guint8 inv[] = { 1, 1, 1, 0, 0, 0 };
    g_assert_cmpfloat(cl_auroc(up, inv, 6), ==, 0.0); /* inverted */
    g_assert_cmpfloat(cl_auroc(flat, l, 6), ==, 0.5); /* all equal: every pair a tie */
    g_assert_true(isnan(cl_auroc(up, none, 6)));      /* one class only */
    g_assert_true(isnan(cl_auroc(up, l, 0)));
    /* a NaN score ranks lowest: a positive at NaN loses to every negative */
    const float with_nan[] = { NAN, 1, 2 };
    const guint8 l3[] = { 1, 0, 1 };
    g_assert_cmpfloat(cl_auroc(with_nan, l3, 3), ==, 0.5);
}

/* Against the definition, on scores with many ties: P(pos > neg) + P(pos = neg) / 2 counted
 * over every pair. Both sums are of halves, exact in double. */
static void test_auroc_pairwise(void)
{
    enum { N = 301 };
    float s[N];
    guint8 l[N];
    GRand *rng = g_rand_new_with_seed(11);
    for (int i = 0; i < N; i++) {
        s[i] = (float)g_rand_int_range(rng, 0, 6);
        l[i] = g_rand_int_range(rng, 0, 3) == 0;
    }
    g_rand_free(rng);
    double wins = 0, pairs = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            if (l[i] && !l[j]) {
                wins += s[i] > s[j] ? 1 : s[i] == s[j] ? 0.5 : 0;
                pairs++;
            }
    g_assert_cmpfloat(cl_auroc(s, l, N), ==, wins / pairs);
}

/* ---- the text ------------------------------------------------------------------------------- */

typedef struct {
    const char *text, *object;
    gboolean no_change;
    ClChangeKind kind;
    int row, col, named;
} TextCase;

static void test_text_parse(void)
{
    static const TextCase cases[] = {
        { "There is no change.", NULL, TRUE, CL_CHANGE_KIND_UNKNOWN, -1, -1, -1 },
        { "Nothing has changed since the first image", NULL, TRUE, CL_CHANGE_KIND_UNKNOWN, -1, -1,
          -1 },
        { "{\"change\": false}", NULL, TRUE, CL_CHANGE_KIND_UNKNOWN, -1, -1, -1 },
        { "{\"change\": true, \"kind\": \"add\", \"position\": \"top left\"}", NULL, FALSE,
          CL_CHANGE_KIND_ADD, 0, 0, -1 },
        { "A new mug was added in the upper-right corner.", "mug", FALSE, CL_CHANGE_KIND_ADD, 0, 2,
          1 },
        { "The lamp is gone from the bottom of the picture.", "vase", FALSE, CL_CHANGE_KIND_REMOVE,
          2, 1, 0 },
        { "Remove the red cup positioned in the lower central area", "cup", FALSE,
          CL_CHANGE_KIND_REMOVE, 2, 1, 1 },
        { "The bottle moved to the left.", "bottle", FALSE, CL_CHANGE_KIND_MOVE, 1, 0, 1 },
        { "The car was recoloured; it is now blue, centre right.", "car", FALSE,
          CL_CHANGE_KIND_RECOLOUR, 1, 2, 1 },
        { "The chair changed color in the middle.", "chairs", FALSE, CL_CHANGE_KIND_RECOLOUR, 1, 1,
          0 },
        { "resize", NULL, FALSE, CL_CHANGE_KIND_RESIZE, -1, -1, -1 },
        { "Two books look bigger at the top", "book", FALSE, CL_CHANGE_KIND_RESIZE, 0, 1, 1 },
        { "The plant is smaller, in the central left area", "potted plant", FALSE,
          CL_CHANGE_KIND_RESIZE, 1, 0, 0 },
        { "A potted plant is missing", "potted plant", FALSE, CL_CHANGE_KIND_REMOVE, -1, -1, 1 },
        { "The pizza moved from the top left to the bottom right.", "pizza", FALSE,
          CL_CHANGE_KIND_MOVE, 2, 2, 1 },
        { "It came from the left", NULL, FALSE, CL_CHANGE_KIND_UNKNOWN, 1, 0, -1 },
        { "A bunch of grapes was added at the centre.", "bunch of grapes", FALSE,
          CL_CHANGE_KIND_ADD, 1, 1, 1 },
        { "Turn the blue ball into cyan", "ball", FALSE, CL_CHANGE_KIND_UNKNOWN, -1, -1, 1 },
        { "", "cup", FALSE, CL_CHANGE_KIND_UNKNOWN, -1, -1, 0 },
        { NULL, NULL, FALSE, CL_CHANGE_KIND_UNKNOWN, -1, -1, -1 },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        const TextCase *c = &cases[i];
        ClChangeText t;
        cl_change_text_parse(c->text, c->object, &t);
        g_test_message("'%s': no_change %d kind %s row %d col %d object %d",
                       c->text ? c->text : "(null)", t.no_change,
                       cl_change_kind_name(t.kind) ? cl_change_kind_name(t.kind) : "?", t.row,
                       t.col, t.object);
        g_assert_cmpint(t.no_change, ==, c->no_change);
        g_assert_cmpint(t.kind, ==, c->kind);
        g_assert_cmpint(t.row, ==, c->row);
        g_assert_cmpint(t.col, ==, c->col);
        g_assert_cmpint(t.object, ==, c->named);
    }
}

/* ---- the blurred difference ----------------------------------------------------------------- */

static void test_blurdiff(void)
{
    enum { W = 64, P = 16, G = W / P };
    guint8 a[W * W * 3], b[W * W * 3];
    memset(a, 100, sizeof a);
    memcpy(b, a, sizeof b);
    ClSynthImage ia = { W, W, 3, a, { 0 }, 1, 0, 0 }, ib = { W, W, 3, b, { 0 }, 1, 0, 0 };
    float heat[G * G];
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_change_blurdiff(&ia, &ib, 2.0, P, G, G, heat, &err));
    for (int i = 0; i < G * G; i++)
        g_assert_cmpfloat(heat[i], ==, 0);
    /* a 6 × 6 square in patch (row 2, col 1), one channel of three changed by 90: the mean over
     * the channels is 30 per pixel and the blur keeps the sum, so the patch holds nearly
     * 30 · 36 / 256 and every patch away from it nothing */
    for (int y = 37; y < 43; y++)
        for (int x = 21; x < 27; x++)
            b[(y * W + x) * 3 + 1] = 190;
    g_assert_true(cl_change_blurdiff(&ia, &ib, 2.0, P, G, G, heat, &err));
    g_assert_no_error(err);
    const float centre = heat[2 * G + 1];
    g_assert_cmpfloat(centre, >, 0.95 * 30 * 36 / 256);
    g_assert_cmpfloat(centre, <=, 30.0 * 36 / 256 + 1e-4);
    for (int i = 0; i < G * G; i++)
        if (i != 2 * G + 1)
            g_assert_cmpfloat(heat[i], <, 0.05 * centre);
    /* a pair that does not match is refused */
    ClSynthImage small = { W / 2, W, 3, b, { 0 }, 1, 0, 0 };
    g_assert_false(cl_change_blurdiff(&ia, &small, 2.0, P, G, G, heat, &err));
    g_assert_nonnull(err);
}

/* ---- the evaluation ------------------------------------------------------------------------- */

static char *shipped_model_path(void)
{
    const char *root = g_getenv("CL_SOURCE_ROOT");
    char *path = g_build_filename(root ? root : ".", "data", "models",
                                  "changelens-default.safetensors", NULL);
    if (g_file_test(path, G_FILE_TEST_EXISTS))
        return path;
    g_free(path);
    return NULL;
}

static const ClChangeSourceScore *source(const ClChangeEvalResult *r, const char *name)
{
    for (guint i = 0; i < r->sources->len; i++) {
        const ClChangeSourceScore *s = &g_array_index(r->sources, ClChangeSourceScore, i);
        if (strcmp(s->name, name) == 0)
            return s;
    }
    g_assert_not_reached();
}

/* Every source of the table is reported, in its order; the measured ones have shares in [0, 1]. */
static void check_structure(const ClChangeEvalResult *r, int n)
{
    g_assert_cmpint(r->n_samples, ==, n);
    g_assert_cmpint(r->n_changed_pairs, >, 0);
    g_assert_cmpint(r->n_changed_pairs, <=, r->n_pairs);
    g_assert_cmpfloat(r->chance_hottest, >, 0);
    g_assert_cmpfloat(r->chance_hottest, <, 1);
    const ClChangeSource *table = cl_change_sources();
    guint k = 0;
    for (; table[k].name; k++) {
        const ClChangeSourceScore *s = &g_array_index(r->sources, ClChangeSourceScore, k);
        g_assert_cmpstr(s->name, ==, table[k].name);
        if (s->unavailable)
            continue;
        g_assert_cmpint(s->n_pairs, ==, r->n_changed_pairs);
        g_assert_cmpfloat(s->auroc_pooled, >=, 0);
        g_assert_cmpfloat(s->auroc_pooled, <=, 1);
        g_assert_cmpfloat(s->auroc_pair_mean, >=, 0);
        g_assert_cmpfloat(s->auroc_pair_mean, <=, 1);
        g_assert_cmpfloat(s->hottest, >=, 0);
        g_assert_cmpfloat(s->hottest, <=, 1);
    }
    g_assert_cmpuint(k, ==, r->sources->len);
}

/* The edited object is the only difference between two nuisance-free images: its patches hold
 * the largest blurred differences. 0.9 leaves room for the blur spilling into a neighbouring
 * patch and for an edit whose pixels barely change (a recolour between close colours). */
#define BLURDIFF_FLOOR 0.9

static void test_eval_model(gconstpointer data)
{
    const char *task = data;
    g_autofree char *path = shipped_model_path();
    if (!path) {
        g_test_skip("no shipped model in this tree");
        return;
    }
    g_autoptr(GError) err = NULL;
    if (strcmp(task, "photo-edits") == 0) { /* its held-out photographs are a package */
        ClSynthOptions so;
        cl_synth_options_init(&so);
        so.photos = "heldout";
        g_autoptr(ClSynthSample) s = cl_synth_generate(task, 1, &so, &err);
        if (!s) {
            g_test_skip(err->message);
            return;
        }
    }
    g_autoptr(ClModel) model = cl_model_load(path, &err);
    g_assert_no_error(err);
    g_autoptr(ClBackend) be = cl_backend_new("cpu", NULL, &err);
    g_assert_no_error(err);
    ClChangeEvalOptions o;
    cl_change_eval_options_init(&o);
    o.task = task;
    o.n = 8;
    o.nuisance = 0;
    o.describe = TRUE;
    o.max_new_tokens = 40;
    ClChangeEvalResult r;
    g_assert_true(cl_change_eval_run(be, model, &o, &r, &err));
    g_assert_no_error(err);
    check_structure(&r, 8);
    g_assert_cmpuint(r.seed, ==, 1000); /* the held-out set's */
    g_assert_cmpint(r.grid_w, ==, cl_config_grid(&model->config));
    g_assert_cmpint(r.size, ==, model->config.image_size);
    /* the shipped model is stateful: its maps are measured; the change head where it has one */
    g_assert_null(source(&r, "update_norm")->unavailable);
    g_assert_null(source(&r, "delta")->unavailable);
    g_assert_cmpstr(source(&r, "change")->unavailable, ==,
                    model->config.change_head ? NULL : "the model has no change head");
    const ClChangeSourceScore *base = source(&r, "blurdiff");
    g_test_message("%s: blurdiff AUROC %.3f (pair mean %.3f), hottest %.2f; delta %.3f", task,
                   base->auroc_pooled, base->auroc_pair_mean, base->hottest,
                   source(&r, "delta")->auroc_pooled);
    g_assert_cmpfloat(base->auroc_pooled, >, BLURDIFF_FLOOR);
    g_assert_true(r.described);
    g_assert_cmpint(r.text.n, ==, 8);
    g_assert_cmpfloat(r.text.change, >=, 0);
    g_assert_cmpfloat(r.text.change, <=, 1);
    if (strcmp(task, "shapes") == 0) { /* a list of changes: no single kind, object or position */
        g_assert_cmpint(r.text.n_kind + r.text.n_position + r.text.n_object, ==, 0);
    } else { /* the answer names the object and where it is; photo-edits the kind of every one */
        g_assert_cmpint(r.text.n_object, >, 0);
        g_assert_cmpint(r.text.n_position, >, 0);
    }
    if (strcmp(task, "photo-edits") == 0)
        g_assert_cmpint(r.text.n_kind, ==, r.text.n - r.text.n_unchanged);
    /* each answer: a log-probability, and right throughout no more often than its change call */
    g_assert_nonnull(r.answers);
    g_assert_cmpuint(r.answers->len, ==, 8);
    int right = 0;
    for (guint i = 0; i < r.answers->len; i++) {
        const ClChangeTextAnswer *a = &g_array_index(r.answers, ClChangeTextAnswer, i);
        g_assert_cmpfloat(a->logprob, <=, 0);
        right += a->right;
    }
    g_assert_cmpfloat(right, <=, r.text.change * r.text.n + 1e-9);
    g_autofree char *json = cl_change_eval_result_to_json(&r);
    g_autoptr(JsonNode) root = json_from_string(json, &err);
    g_assert_no_error(err);
    cl_change_eval_result_clear(&r);
}

/* Without a model the model-free baseline is measured alone; the model's sources say why not. */
static void test_eval_no_model(void)
{
    ClChangeEvalOptions o;
    cl_change_eval_options_init(&o);
    o.task = "shapes";
    o.n = 10;
    o.nuisance = 0;
    o.set = "train";
    ClChangeEvalResult r;
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_change_eval_run(NULL, NULL, &o, &r, &err));
    g_assert_no_error(err);
    check_structure(&r, 10);
    g_assert_cmpuint(r.seed, ==, 0); /* the training set's */
    g_assert_cmpstr(source(&r, "update_norm")->unavailable, ==, "no model");
    g_assert_cmpfloat(source(&r, "blurdiff")->auroc_pooled, >, BLURDIFF_FLOOR);
    cl_change_eval_result_clear(&r);
    /* a set that is not one is refused */
    o.set = "test";
    g_assert_false(cl_change_eval_run(NULL, NULL, &o, &r, &err));
    g_assert_nonnull(err);
    cl_change_eval_result_clear(&r);
}

/* A model with the change head: its probabilities are measured like the other maps (a random
 * head, so only that they are there and are shares). */
static void test_eval_change_head(void)
{
    ClModelConfig cfg;
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_model_config_preset(&cfg, "tiny", &err));
    cfg.change_head = TRUE;
    g_autoptr(ClModel) model = cl_model_new_random(&cfg, 5, &err);
    g_assert_no_error(err);
    g_autoptr(ClBackend) be = cl_backend_new("cpu", NULL, &err);
    g_assert_no_error(err);
    ClChangeEvalOptions o;
    cl_change_eval_options_init(&o);
    o.task = "edits";
    o.n = 3;
    ClChangeEvalResult r;
    g_assert_true(cl_change_eval_run(be, model, &o, &r, &err));
    g_assert_no_error(err);
    check_structure(&r, 3);
    const ClChangeSourceScore *c = source(&r, "change");
    g_assert_null(c->unavailable);
    g_assert_cmpint(c->n_pairs, ==, r.n_changed_pairs);
    cl_change_eval_result_clear(&r);
}

/* `changelens-cli eval-change --json -` prints every key scripts read. */
static void test_cli_json(void)
{
    g_autofree char *path = shipped_model_path();
    if (!path) {
        g_test_skip("no shipped model in this tree");
        return;
    }
    const char *argv[] = {
        g_getenv("CL_CLI"), "eval-change", "--model", path, "--task", "edits", "--n", "3",
        "--nuisance",       "0",           "--json",  "-",  NULL
    };
    g_autofree char *out = NULL, *errout = NULL;
    int status = 0;
    g_autoptr(GError) err = NULL;
    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                               &errout, &status, &err));
    g_assert_no_error(err);
    g_assert_true(g_spawn_check_wait_status(status, &err));
    g_autoptr(JsonNode) root = json_from_string(out, &err);
    g_assert_no_error(err);
    JsonObject *o = json_node_get_object(root);
    static const char *const keys[] = { "task",  "set",           "seed", "nuisance", "samples",
                                        "pairs", "changed_pairs", "grid", "chance",   "sources",
                                        "text",  "timing_ms",     NULL };
    for (int i = 0; keys[i]; i++)
        g_assert_true(json_object_has_member(o, keys[i]));
    g_assert_cmpint(json_object_get_int_member(o, "samples"), ==, 3);
    g_assert_true(json_object_get_null_member(o, "text")); /* no --describe */
    JsonArray *src = json_object_get_array_member(o, "sources");
    g_assert_cmpuint(json_array_get_length(src), ==, 4);
    JsonObject *last = json_array_get_object_element(src, 3);
    g_assert_cmpstr(json_object_get_string_member(last, "name"), ==, "blurdiff");
    g_assert_cmpfloat(json_object_get_double_member(last, "auroc_pooled"), >, BLURDIFF_FLOOR);
    /* a usage error exits 2 */
    const char *bad[] = { g_getenv("CL_CLI"), "eval-change", "--task", "edits",
                          "--nuisance",       "3",           NULL };
    g_assert_true(g_spawn_sync(NULL, (char **)bad, NULL,
                               G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL,
                               NULL, NULL, &status, NULL));
    g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 2);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/changeeval/auroc/hand", test_auroc_hand);
    g_test_add_func("/changeeval/auroc/extremes", test_auroc_extremes);
    g_test_add_func("/changeeval/auroc/pairwise", test_auroc_pairwise);
    g_test_add_func("/changeeval/text", test_text_parse);
    g_test_add_func("/changeeval/blurdiff", test_blurdiff);
    g_test_add_data_func("/changeeval/model/edits", "edits", test_eval_model);
    g_test_add_data_func("/changeeval/model/shapes", "shapes", test_eval_model);
    g_test_add_data_func("/changeeval/model/photo-edits", "photo-edits", test_eval_model);
    g_test_add_func("/changeeval/no-model", test_eval_no_model);
    g_test_add_func("/changeeval/change-head", test_eval_change_head);
    g_test_add_func("/changeeval/cli-json", test_cli_json);
    return g_test_run();
}
