/* meteor.c - METEOR 1.5's scoring (metrics.h) with its exact and stem matching modules: the
 * alignment, the statistics the jar exchanges ("SCORE"/"EVAL") and its formula. */
#include "train/metrics-private.h"

#include <math.h>
#include <string.h>

/* The jar's English "rank" parameters and module weights (exact, stem). */
#define ALPHA 0.85
#define BETA 0.20
#define GAMMA 0.60
#define DELTA 0.75
static const double module_weight[2] = { 1.0, 0.6 };

#define SEARCH_NODE_LIMIT 200000 /* beyond this the best alignment found so far is used */

/* METEOR 1.5's function/english.words (lower-cased tokens that weigh 1 - delta). */
static const char *const function_words[] = { "the",
                                              ",",
                                              ".",
                                              "to",
                                              "of",
                                              "and",
                                              "a",
                                              "in",
                                              "that",
                                              "for",
                                              "\"",
                                              "is",
                                              "on",
                                              "'s",
                                              "it",
                                              "with",
                                              "was",
                                              "as",
                                              "said",
                                              "at",
                                              "he",
                                              "by",
                                              "be",
                                              "from",
                                              "have",
                                              "has",
                                              "are",
                                              "his",
                                              "but",
                                              "an",
                                              "this",
                                              "not",
                                              "i",
                                              "will",
                                              "\xe2\x80\x99",
                                              "they",
                                              ")",
                                              "-rrb-",
                                              "(",
                                              "-lrb-",
                                              "who",
                                              "their",
                                              "had",
                                              "we",
                                              "which",
                                              "were",
                                              "been",
                                              "more",
                                              "or",
                                              "s",
                                              "its",
                                              "would",
                                              "about",
                                              "new",
                                              "one",
                                              "after",
                                              "you",
                                              ":",
                                              "also",
                                              "up",
                                              "when",
                                              "there",
                                              "than",
                                              "$",
                                              "all",
                                              "out",
                                              "her",
                                              "people",
                                              "she",
                                              "year",
                                              "two",
                                              "-",
                                              "can",
                                              "if",
                                              "last",
                                              "first",
                                              "\xe2\x80\x9c",
                                              "over",
                                              "other",
                                              "\xe2\x80\x9d",
                                              "into",
                                              "some",
                                              "what",
                                              "so",
                                              "--",
                                              "no",
                                              "time",
                                              "years",
                                              "could",
                                              "?",
                                              "'t",
                                              "\xe2\x80\x94",
                                              "'",
                                              NULL };

typedef struct {
    double test_len, ref_len, test_fn, ref_fn;
    double test_content[2], test_function[2], ref_content[2], ref_function[2];
    double test_matches, ref_matches, chunks;
    double score;
} Stats;

static gboolean is_function_word(const char *w)
{
    for (int i = 0; function_words[i]; i++)
        if (!strcmp(function_words[i], w))
            return TRUE;
    return FALSE;
}

static void compute(Stats *s)
{
    double tw = 0, rw = 0;
    for (int m = 0; m < 2; m++) {
        tw += module_weight[m] * (DELTA * s->test_content[m] + (1 - DELTA) * s->test_function[m]);
        rw += module_weight[m] * (DELTA * s->ref_content[m] + (1 - DELTA) * s->ref_function[m]);
    }
    double tl = DELTA * (s->test_len - s->test_fn) + (1 - DELTA) * s->test_fn;
    double rl = DELTA * (s->ref_len - s->ref_fn) + (1 - DELTA) * s->ref_fn;
    double p = tw / tl, r = rw / rl;
    double fmean = p * r / (ALPHA * p + (1 - ALPHA) * r);
    double frag;
    if (s->test_matches == s->test_len && s->ref_matches == s->ref_len && s->chunks == 1)
        frag = 0;
    else
        frag = s->chunks / ((s->test_matches + s->ref_matches) / 2);
    s->score = fmean * (1 - GAMMA * pow(frag, BETA));
    if (isnan(s->score))
        s->score = 0;
    s->score = MAX(s->score, 0);
}

/* ---- alignment: most matched words, then fewest chunks, then least displacement ------------- */

typedef struct {
    guint m, n;      /* test and reference lengths */
    int *cand;       /* [m * n]: -1 none, 0 exact, 1 stem */
    guint *rem;      /* [m + 1]: test positions >= j with any candidate */
    int *cur, *best; /* [m]: matched reference position or -1 */
    gboolean *used;  /* [n] */
    guint target;    /* the maximum number of matches */
    guint best_chunks, best_dist;
    gboolean have_best;
    gulong nodes;
} Search;

static gboolean kuhn(Search *s, guint j, gboolean *seen, int *owner)
{
    for (guint i = 0; i < s->n; i++) {
        if (s->cand[j * s->n + i] < 0 || seen[i])
            continue;
        seen[i] = TRUE;
        if (owner[i] < 0 || kuhn(s, (guint)owner[i], seen, owner)) {
            owner[i] = (int)j;
            return TRUE;
        }
    }
    return FALSE;
}

static void dfs(Search *s, guint j, guint matches, guint chunks, guint dist)
{
    if (++s->nodes > SEARCH_NODE_LIMIT && s->have_best)
        return;
    guint free_refs = s->n - matches;
    if (matches + MIN(s->rem[j], free_refs) < s->target)
        return;
    if (s->have_best &&
        (chunks > s->best_chunks || (chunks == s->best_chunks && dist >= s->best_dist)))
        return;
    if (j == s->m) {
        s->best_chunks = chunks;
        s->best_dist = dist;
        s->have_best = TRUE;
        memcpy(s->best, s->cur, s->m * sizeof(int));
        return;
    }
    /* try continuing the previous chunk first, then exact, then stem matches */
    int prev = j > 0 ? s->cur[j - 1] : -1;
    for (int pass = 0; pass < 3; pass++) {
        for (guint i = 0; i < s->n; i++) {
            int c = s->cand[j * s->n + i];
            if (c < 0 || s->used[i])
                continue;
            gboolean cont = prev >= 0 && (guint)prev + 1 == i;
            if ((pass == 0) != cont || (pass > 0 && c != pass - 1))
                continue;
            s->used[i] = TRUE;
            s->cur[j] = (int)i;
            dfs(s, j + 1, matches + 1, chunks + (cont ? 0 : 1), dist + (i > j ? i - j : j - i));
            s->used[i] = FALSE;
            s->cur[j] = -1;
        }
    }
    dfs(s, j + 1, matches, chunks, dist);
}

static Stats segment_stats(const ClMetricsSent *t, const ClMetricsSent *r, char **t_stem,
                           char **r_stem)
{
    Stats st = { 0 };
    st.test_len = t->len;
    st.ref_len = r->len;
    for (guint j = 0; j < t->len; j++)
        st.test_fn += is_function_word(t->words[j]);
    for (guint i = 0; i < r->len; i++)
        st.ref_fn += is_function_word(r->words[i]);

    Search s = { .m = t->len, .n = r->len };
    s.cand = g_new(int, (gsize)s.m * s.n + 1);
    s.rem = g_new0(guint, s.m + 1);
    s.cur = g_new(int, s.m + 1);
    s.best = g_new(int, s.m + 1);
    s.used = g_new0(gboolean, s.n + 1);
    for (guint j = 0; j < s.m; j++) {
        s.cur[j] = s.best[j] = -1;
        for (guint i = 0; i < s.n; i++) {
            int c = -1;
            if (t->ids[j] == r->ids[i])
                c = 0;
            else if (!strcmp(t_stem[j], r_stem[i]))
                c = 1; /* the stem module only adds pairs the exact one did not */
            s.cand[j * s.n + i] = c;
        }
    }
    for (guint j = s.m; j-- > 0;) {
        gboolean any = FALSE;
        for (guint i = 0; i < s.n; i++)
            any |= s.cand[j * s.n + i] >= 0;
        s.rem[j] = s.rem[j + 1] + any;
    }
    int *owner = g_new(int, s.n + 1);
    gboolean *seen = g_new(gboolean, s.n + 1);
    for (guint i = 0; i < s.n; i++)
        owner[i] = -1;
    for (guint j = 0; j < s.m; j++) {
        memset(seen, 0, (s.n + 1) * sizeof(gboolean));
        s.target += kuhn(&s, j, seen, owner);
    }
    g_free(owner);
    g_free(seen);
    if (s.target > 0)
        dfs(&s, 0, 0, 0, 0);

    int prev = -2;
    for (guint j = 0; j < s.m; j++) {
        int i = s.best[j];
        if (i < 0) {
            prev = -2;
            continue;
        }
        int m = s.cand[j * s.n + (guint)i];
        if (is_function_word(t->words[j]))
            st.test_function[m]++;
        else
            st.test_content[m]++;
        if (is_function_word(r->words[i]))
            st.ref_function[m]++;
        else
            st.ref_content[m]++;
        st.test_matches++;
        st.ref_matches++;
        if (prev + 1 != i)
            st.chunks++;
        prev = i;
    }
    g_free(s.cand);
    g_free(s.rem);
    g_free(s.cur);
    g_free(s.best);
    g_free(s.used);
    compute(&st);
    return st;
}

static char **stems_of(const ClMetricsSent *s)
{
    char **out = g_new0(char *, s->len + 1);
    for (guint i = 0; i < s->len; i++)
        out[i] = cl_metrics_stem(s->words[i]);
    return out;
}

/* The best reference's statistics (the first of equals, as the jar keeps). */
static Stats best_stats(const ClMetricsSent *t, const ClMetricsSent *refs, guint n_refs)
{
    g_auto(GStrv) ts = stems_of(t);
    Stats best = { 0 };
    for (guint r = 0; r < n_refs; r++) {
        g_auto(GStrv) rs = stems_of(&refs[r]);
        Stats st = segment_stats(t, &refs[r], ts, rs);
        if (r == 0 || st.score > best.score)
            best = st;
    }
    return best;
}

double cl_metrics_meteor_corpus(ClMetricsSent *cand, ClMetricsSent **refs, const guint *n_refs,
                                guint n, double *sentence)
{
    Stats sum = { 0 };
    for (guint c = 0; c < n; c++) {
        Stats st = best_stats(&cand[c], refs[c], n_refs[c]);
        sentence[c] = st.score;
        double *a = &sum.test_len, *b = &st.test_len;
        for (gsize k = 0; k < G_STRUCT_OFFSET(Stats, score) / sizeof(double); k++)
            a[k] += b[k];
    }
    compute(&sum);
    return sum.score;
}

double cl_metrics_meteor_sentence(const char *candidate, const char *const *references,
                                  ClMetricsFlags flags)
{
    if (!candidate || !references || !references[0])
        return 0.0;
    GHashTable *vocab = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    ClMetricsSent t;
    guint n = g_strv_length((char **)references);
    ClMetricsSent *r = g_new0(ClMetricsSent, n);
    cl_metrics_sent_from_text(&t, candidate, flags, vocab);
    for (guint i = 0; i < n; i++)
        cl_metrics_sent_from_text(&r[i], references[i], flags, vocab);
    double score = best_stats(&t, r, n).score;
    cl_metrics_sent_clear(&t);
    for (guint i = 0; i < n; i++)
        cl_metrics_sent_clear(&r[i]);
    g_free(r);
    g_hash_table_unref(vocab);
    return score;
}
