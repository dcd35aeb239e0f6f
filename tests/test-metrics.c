/* test-metrics.c - the captioning metrics (core/train/metrics.h) against pycocoevalcap's answers
 * in tests/goldens/metrics.json (made by tests/reference/metrics_goldens.py), plus unit checks. */
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "train/metrics.h"

#define REL_TOL 1e-6
#define ABS_TOL 1e-9
/* METEOR: ours has no synonym/paraphrase modules and skips the jar's -norm re-tokenisation.
 * Measured on the goldens: corpus 0.36547 vs the jar's 0.39892 (-0.0334); 29/50 sentences equal
 * to 1e-4; the rest mostly lower (paraphrases such as "is" ~ "has been" reach up to -0.49). */
#define METEOR_CORPUS_TOL 0.04
#define METEOR_MIN_EXACT_FRACTION 0.5

static JsonObject *goldens;
static JsonParser *parser;

static gboolean close_to(double ours, double ref)
{
    return fabs(ours - ref) <= ABS_TOL || fabs(ours - ref) <= REL_TOL * fabs(ref);
}

static void load_goldens(void)
{
    const char *dir = g_getenv("CL_GOLDENS");
    g_autofree char *path = g_build_filename(dir ? dir : "tests/goldens", "metrics.json", NULL);
    g_autoptr(GError) error = NULL;
    parser = json_parser_new();
    if (!json_parser_load_from_file(parser, path, &error))
        g_error("cannot load %s: %s (set CL_GOLDENS to tests/goldens)", path, error->message);
    goldens = json_node_get_object(json_parser_get_root(parser));
}

/* Candidates and NULL-terminated reference lists from the goldens, as text or PTB tokens. */
typedef struct {
    guint n;
    const char **cand;
    const char ***refs;
} Set;

static Set load_set(gboolean tokens)
{
    JsonArray *items = json_object_get_array_member(goldens, "items");
    Set s = { .n = json_array_get_length(items) };
    s.cand = g_new0(const char *, s.n);
    s.refs = g_new0(const char **, s.n);
    for (guint i = 0; i < s.n; i++) {
        JsonObject *it = json_array_get_object_element(items, i);
        s.cand[i] = json_object_get_string_member(it, tokens ? "candidate_tokens" : "candidate");
        JsonArray *r = json_object_get_array_member(it, tokens ? "reference_tokens" : "references");
        guint nr = json_array_get_length(r);
        s.refs[i] = g_new0(const char *, nr + 1);
        for (guint k = 0; k < nr; k++)
            s.refs[i][k] = json_array_get_string_element(r, k);
    }
    return s;
}

static void free_set(Set *s)
{
    for (guint i = 0; i < s->n; i++)
        g_free(s->refs[i]);
    g_free(s->refs);
    g_free(s->cand);
}

static JsonObject *golden_scores(const char *metric)
{
    return json_object_get_object_member(json_object_get_object_member(goldens, "scores"), metric);
}

static void check_tokens(const char *text, const char *expected)
{
    g_autofree char *ours = cl_metrics_tokenize_join(text);
    if (strcmp(ours, expected))
        g_test_message("tokenize(\"%s\"): ours \"%s\", PTB \"%s\"", text, ours, expected);
    g_assert_cmpstr(ours, ==, expected);
}

static void test_tokenizer(void)
{
    JsonArray *probes = json_object_get_array_member(goldens, "probes");
    for (guint i = 0; i < json_array_get_length(probes); i++) {
        JsonObject *p = json_array_get_object_element(probes, i);
        check_tokens(json_object_get_string_member(p, "text"),
                     json_object_get_string_member(p, "tokens"));
    }
    Set text = load_set(FALSE), toks = load_set(TRUE);
    guint checked = 0;
    for (guint i = 0; i < text.n; i++) {
        check_tokens(text.cand[i], toks.cand[i]);
        checked++;
        for (guint k = 0; text.refs[i][k]; k++, checked++)
            check_tokens(text.refs[i][k], toks.refs[i][k]);
    }
    g_test_message("tokenizer: %u probes and %u captions identical to PTBTokenizer",
                   json_array_get_length(probes), checked);
    free_set(&text);
    free_set(&toks);
}

static void compare_scores(const ClMetricsScores *s)
{
    JsonObject *b = golden_scores("bleu");
    JsonArray *bc = json_object_get_array_member(b, "corpus");
    JsonArray *bs = json_object_get_array_member(b, "sentence");
    double worst = 0;
    for (guint k = 0; k < 4; k++) {
        double ref = json_array_get_double_element(bc, k);
        g_test_message("BLEU-%u: ours %.12f pycocoevalcap %.12f", k + 1, s->bleu[k], ref);
        g_assert_true(close_to(s->bleu[k], ref));
        for (guint i = 0; i < s->n; i++) {
            double r = json_array_get_double_element(json_array_get_array_element(bs, i), k);
            g_assert_true(close_to(s->bleu_sentence[i * 4 + k], r));
            worst = MAX(worst, fabs(s->bleu_sentence[i * 4 + k] - r));
        }
    }
    struct {
        const char *name;
        double corpus;
        const double *sentence;
    } m[] = { { "rouge_l", s->rouge_l, s->rouge_l_sentence },
              { "cider", s->cider, s->cider_sentence } };
    for (guint j = 0; j < G_N_ELEMENTS(m); j++) {
        JsonObject *g = golden_scores(m[j].name);
        double ref = json_object_get_double_member(g, "corpus");
        g_test_message("%s: ours %.12f pycocoevalcap %.12f", m[j].name, m[j].corpus, ref);
        g_assert_true(close_to(m[j].corpus, ref));
        JsonArray *per = json_object_get_array_member(g, "sentence");
        g_assert_cmpuint(json_array_get_length(per), ==, s->n);
        for (guint i = 0; i < s->n; i++) {
            double r = json_array_get_double_element(per, i);
            if (!close_to(m[j].sentence[i], r))
                g_test_message("%s sentence %u: ours %.12f ref %.12f", m[j].name, i,
                               m[j].sentence[i], r);
            g_assert_true(close_to(m[j].sentence[i], r));
            worst = MAX(worst, fabs(m[j].sentence[i] - r));
        }
    }
    g_test_message("largest per-sentence |ours - pycocoevalcap| (BLEU, ROUGE-L, CIDEr): %.3g",
                   worst);
}

/* BLEU, ROUGE-L, CIDEr-D on pycocoevalcap's own tokens, then on raw text through our tokenizer. */
static void test_against_pycocoevalcap(void)
{
    for (int raw = 0; raw < 2; raw++) {
        Set set = load_set(!raw);
        ClMetricsScores s;
        g_autoptr(GError) error = NULL;
        g_assert_true(cl_metrics_score(set.cand, (const char *const *const *)set.refs, set.n,
                                       raw ? CL_METRICS_NONE : CL_METRICS_PRETOKENIZED, &s,
                                       &error));
        g_assert_no_error(error);
        g_assert_cmpuint(s.n, ==, set.n);
        compare_scores(&s);
        cl_metrics_scores_clear(&s);
        free_set(&set);
    }
}

static void test_meteor(void)
{
    Set set = load_set(TRUE);
    ClMetricsScores s;
    g_assert_true(cl_metrics_score(set.cand, (const char *const *const *)set.refs, set.n,
                                   CL_METRICS_PRETOKENIZED, &s, NULL));
    JsonObject *g = golden_scores("meteor");
    JsonArray *per = json_object_get_array_member(g, "sentence");
    double jar = json_object_get_double_member(g, "corpus"), worst = 0, sum = 0;
    guint exact = 0, identical = 0;
    for (guint i = 0; i < set.n; i++) {
        double r = json_array_get_double_element(per, i), d = s.meteor_sentence[i] - r;
        g_test_message("METEOR %2u: ours %.6f jar %.6f (%+.6f)  \"%s\"", i, s.meteor_sentence[i], r,
                       d, set.cand[i]);
        worst = MAX(worst, fabs(d));
        sum += fabs(d);
        exact += fabs(d) < 1e-4;
        gboolean same = FALSE;
        for (guint k = 0; set.refs[i][k]; k++)
            same |= *set.cand[i] && !strcmp(set.cand[i], set.refs[i][k]);
        if (same) { /* a candidate equal to a reference: 1.0 from both */
            identical++;
            g_assert_cmpfloat(fabs(s.meteor_sentence[i] - 1.0), <, 1e-12);
            g_assert_cmpfloat(fabs(r - 1.0), <, 1e-6);
        }
    }
    g_test_message("METEOR corpus: ours %.6f jar %.6f (%+.6f); per sentence: %u/%u within 1e-4, "
                   "mean |d| %.4f, max |d| %.4f; %u identical pairs score 1.0",
                   s.meteor, jar, s.meteor - jar, exact, set.n, sum / set.n, worst, identical);
    g_assert_cmpuint(identical, >, 0);
    g_assert_cmpfloat(exact, >=, METEOR_MIN_EXACT_FRACTION * set.n);
    g_assert_cmpfloat(fabs(s.meteor - jar), <=, METEOR_CORPUS_TOL);
    cl_metrics_scores_clear(&s);
    free_set(&set);
}

/* ---- unit checks ----------------------------------------------------------------------------- */

static void test_identical(void)
{
    const char *cand[] = { "the small red metal cube was moved", "there is no difference" };
    const char *r0[] = { "The small red metal cube was moved.", NULL };
    const char *r1[] = { "there is no difference .", "nothing changed", NULL };
    const char *const *refs[] = { r0, r1 };
    ClMetricsScores s;
    g_assert_true(cl_metrics_score(cand, refs, 2, CL_METRICS_NONE, &s, NULL));
    for (int k = 0; k < 4; k++)
        g_assert_cmpfloat(fabs(s.bleu[k] - 1.0), <, 1e-9);
    g_assert_cmpfloat(fabs(s.rouge_l - 1.0), <, 1e-12);
    /* per sentence 1.0; the corpus aggregate is not (its summed chunks are 2, as in the jar) */
    g_assert_cmpfloat(s.meteor_sentence[0], ==, 1.0);
    g_assert_cmpfloat(s.meteor_sentence[1], ==, 1.0);
    g_assert_cmpfloat(s.meteor, <, 1.0);
    g_assert_cmpfloat(s.cider, >, 0.0);
    cl_metrics_scores_clear(&s);
}

/* CIDEr's idf comes from the evaluated set: the same pair scores differently in another corpus. */
static void test_cider_depends_on_corpus(void)
{
    const char *cand[] = { "a road is built along the river", "a road is built",
                           "a road is built near trees" };
    const char *r0[] = { "a road is built along the houses", NULL };
    const char *r1[] = { "a road is built near the river", NULL };
    const char *r2[] = { "a road is built near trees", NULL };
    const char *const *refs[] = { r0, r1, r2 };
    ClMetricsScores one, three;
    g_assert_true(cl_metrics_score(cand, refs, 2, CL_METRICS_NONE, &one, NULL));
    g_assert_true(cl_metrics_score(cand, refs, 3, CL_METRICS_NONE, &three, NULL));
    g_test_message("CIDEr of item 0: %.6f in a set of 2, %.6f in a set of 3", one.cider_sentence[0],
                   three.cider_sentence[0]);
    g_assert_cmpfloat(fabs(one.cider_sentence[0] - three.cider_sentence[0]), >, 1e-3);
    /* but BLEU/ROUGE/METEOR of an item do not depend on the others */
    g_assert_cmpfloat(one.rouge_l_sentence[0], ==, three.rouge_l_sentence[0]);
    g_assert_cmpfloat(one.meteor_sentence[0], ==, three.meteor_sentence[0]);
    cl_metrics_scores_clear(&one);
    cl_metrics_scores_clear(&three);
}

static void test_empty_and_invalid(void)
{
    const char *cand[] = { "", "...", "a \xff\xfe road \xc3 is built\xe2\x80", "x" };
    const char *r0[] = { "a road is built", NULL };
    const char *r1[] = { "", NULL };
    const char *r2[] = { "a road \xff is built", "\xc0\xaf", NULL };
    const char *r3[] = { "x", NULL };
    const char *const *refs[] = { r0, r1, r2, r3 };
    ClMetricsScores s;
    g_assert_true(cl_metrics_score(cand, refs, 4, CL_METRICS_NONE, &s, NULL));
    g_assert_cmpfloat(s.bleu_sentence[0 * 4 + 3], <, 1e-6);
    g_assert_cmpfloat(s.rouge_l_sentence[0], ==, 0.0);
    g_assert_cmpfloat(s.meteor_sentence[0], ==, 0.0);
    g_assert_cmpfloat(s.cider_sentence[0], ==, 0.0);
    g_assert_cmpfloat(s.rouge_l_sentence[2], ==, 1.0); /* bad bytes only separate words */
    for (guint i = 0; i < 4; i++)
        g_assert_true(isfinite(s.cider_sentence[i]) && isfinite(s.meteor_sentence[i]));
    cl_metrics_scores_clear(&s);

    g_auto(GStrv) t = cl_metrics_tokenize("caf\xc3\xa9\xff!");
    g_assert_cmpuint(g_strv_length(t), ==, 1);
    g_assert_true(g_utf8_validate(t[0], -1, NULL));
    g_assert_cmpstr(t[0], ==, "caf\xc3\xa9");

    /* bad arguments are errors, not crashes */
    g_autoptr(GError) error = NULL;
    const char *const *no_refs[] = { (const char *[]){ NULL } };
    g_assert_false(cl_metrics_score(cand, no_refs, 1, CL_METRICS_NONE, &s, &error));
    g_assert_error(error, CL_METRICS_ERROR, CL_METRICS_ERROR_INVALID);
    g_clear_error(&error);
    g_assert_false(cl_metrics_score(cand, refs, 0, CL_METRICS_NONE, &s, &error));
    g_assert_error(error, CL_METRICS_ERROR, CL_METRICS_ERROR_INVALID);
}

/* Stem matches count 0.6; METEOR rewards order (chunks). */
static void test_meteor_units(void)
{
    const char *ref[] = { "the houses were built along the roads", NULL };
    double exact = cl_metrics_meteor_sentence("the houses were built along the roads", ref, 0);
    double stem = cl_metrics_meteor_sentence("the house was build along the road", ref, 0);
    double shuffled = cl_metrics_meteor_sentence("roads the along built were houses the", ref, 0);
    g_assert_cmpfloat(exact, ==, 1.0);
    double unrelated = cl_metrics_meteor_sentence("the tree was cut along the river", ref, 0);
    g_assert_cmpfloat(stem, >, unrelated + 0.1); /* house~houses, road~roads by stem */
    g_assert_cmpfloat(stem, <, exact);
    g_assert_cmpfloat(shuffled, <, exact);
    g_assert_cmpfloat(shuffled, >, 0.0);

    static const char *const pairs[][2] = {
        { "houses", "hous" },
        { "moved", "move" },
        { "moving", "move" },
        { "built", "built" },
        { "constructed", "construct" },
        { "differences", "differ" },
        { "replaced", "replac" },
        { "running", "run" },
        { "cities", "citi" },
        { "generously", "generous" },
        { "skies", "sky" },
        { "effusion", "effus" },
        { "additional", "addit" },
        { "identical", "ident" },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(pairs); i++) {
        g_autofree char *st = cl_metrics_stem(pairs[i][0]);
        g_assert_cmpstr(st, ==, pairs[i][1]);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    load_goldens();
    g_test_add_func("/metrics/tokenizer-vs-ptb", test_tokenizer);
    g_test_add_func("/metrics/bleu-rouge-cider-vs-pycocoevalcap", test_against_pycocoevalcap);
    g_test_add_func("/metrics/meteor-vs-jar", test_meteor);
    g_test_add_func("/metrics/identical", test_identical);
    g_test_add_func("/metrics/cider-depends-on-corpus", test_cider_depends_on_corpus);
    g_test_add_func("/metrics/empty-and-invalid", test_empty_and_invalid);
    g_test_add_func("/metrics/meteor-units", test_meteor_units);
    int rc = g_test_run();
    g_object_unref(parser);
    return rc;
}
