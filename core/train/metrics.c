/* metrics.c - BLEU-1..4, ROUGE-L and CIDEr-D as pycocoevalcap computes them, and the corpus
 * driver (metrics.h). METEOR lives in meteor.c, the tokenizer in tokenize.c. */
#include "train/metrics.h"
#include "train/metrics-private.h"

#include <math.h>
#include <string.h>

G_DEFINE_QUARK(cl - metrics - error - quark, cl_metrics_error)

/* ---- sentences as interned word ids ---------------------------------------------------------- */

void cl_metrics_sent_from_text(ClMetricsSent *out, const char *text, ClMetricsFlags flags,
                               GHashTable *vocab)
{
    g_auto(GStrv) toks = NULL;
    if (flags & CL_METRICS_PRETOKENIZED) {
        g_autofree char *valid = g_utf8_make_valid(text ? text : "", -1);
        toks = g_strsplit_set(valid, " \t\n\r", -1);
    } else {
        toks = cl_metrics_tokenize(text);
    }
    GArray *ids = g_array_new(FALSE, FALSE, sizeof(guint32));
    GPtrArray *words = g_ptr_array_new();
    for (char **t = toks; *t; t++) {
        if (!**t)
            continue; /* str.split() drops empty fields */
        gpointer id;
        if (!g_hash_table_lookup_extended(vocab, *t, NULL, &id)) {
            id = GUINT_TO_POINTER(g_hash_table_size(vocab) + 1);
            g_hash_table_insert(vocab, g_strdup(*t), id);
        }
        guint32 v = GPOINTER_TO_UINT(id);
        g_array_append_val(ids, v);
        g_ptr_array_add(words, g_strdup(*t));
    }
    out->len = ids->len;
    out->ids = (guint32 *)g_array_free(ids, FALSE);
    g_ptr_array_add(words, NULL);
    out->words = (char **)g_ptr_array_free(words, FALSE);
}

void cl_metrics_sent_clear(ClMetricsSent *s)
{
    g_free(s->ids);
    g_strfreev(s->words);
    memset(s, 0, sizeof *s);
}

/* ---- n-gram counts ----------------------------------------------------------------------------- */

typedef struct {
    guint32 w[4];
    guint n;
} NGram;

static guint ngram_hash(gconstpointer p)
{
    const NGram *g = p;
    guint h = g->n * 2654435761u;
    for (guint i = 0; i < g->n; i++)
        h = (h ^ g->w[i]) * 16777619u;
    return h;
}

static gboolean ngram_equal(gconstpointer a, gconstpointer b)
{
    const NGram *x = a, *y = b;
    return x->n == y->n && !memcmp(x->w, y->w, x->n * sizeof(guint32));
}

/* n-gram -> count (as a pointer-sized integer), n = 1..4 */
static GHashTable *count_ngrams(const ClMetricsSent *s)
{
    GHashTable *t = g_hash_table_new_full(ngram_hash, ngram_equal, g_free, NULL);
    for (guint k = 1; k <= 4; k++) {
        for (guint i = 0; i + k <= s->len; i++) {
            NGram g = { .n = k };
            memcpy(g.w, s->ids + i, k * sizeof(guint32));
            gpointer old = g_hash_table_lookup(t, &g);
            if (old)
                g_hash_table_replace(t, g_memdup2(&g, sizeof g),
                                     GSIZE_TO_POINTER(GPOINTER_TO_SIZE(old) + 1));
            else
                g_hash_table_insert(t, g_memdup2(&g, sizeof g), GSIZE_TO_POINTER(1));
        }
    }
    return t;
}

static double count_of(GHashTable *t, const NGram *g)
{
    return (double)GPOINTER_TO_SIZE(g_hash_table_lookup(t, g));
}

/* ---- BLEU (pycocoevalcap bleu_scorer.py, option "closest") -------------------------------------- */

static void bleu(ClMetricsSent *cand, ClMetricsSent **refs, guint *n_refs, guint n,
                 ClMetricsScores *out)
{
    const double small = 1e-9, tiny = 1e-15;
    double guess[4] = { 0 }, correct[4] = { 0 }, testlen_sum = 0, reflen_sum = 0;
    for (guint c = 0; c < n; c++) {
        /* max count of each n-gram over the references */
        GHashTable *maxc = g_hash_table_new_full(ngram_hash, ngram_equal, g_free, NULL);
        guint testlen = cand[c].len, reflen = 0, best_diff = G_MAXUINT;
        for (guint r = 0; r < n_refs[c]; r++) {
            guint rl = refs[c][r].len;
            guint diff = rl > testlen ? rl - testlen : testlen - rl;
            if (diff < best_diff || (diff == best_diff && rl < reflen)) {
                best_diff = diff;
                reflen = rl;
            }
            GHashTable *rc = count_ngrams(&refs[c][r]);
            GHashTableIter it;
            gpointer k, v;
            g_hash_table_iter_init(&it, rc);
            while (g_hash_table_iter_next(&it, &k, &v)) {
                if (GPOINTER_TO_SIZE(v) > GPOINTER_TO_SIZE(g_hash_table_lookup(maxc, k)))
                    g_hash_table_replace(maxc, g_memdup2(k, sizeof(NGram)), v);
            }
            g_hash_table_unref(rc);
        }
        double sg[4], sc[4] = { 0 };
        for (guint k = 0; k < 4; k++)
            sg[k] = testlen >= k + 1 ? testlen - k : 0;
        GHashTable *cc = count_ngrams(&cand[c]);
        GHashTableIter it;
        gpointer key, v;
        g_hash_table_iter_init(&it, cc);
        while (g_hash_table_iter_next(&it, &key, &v)) {
            const NGram *g = key;
            sc[g->n - 1] += MIN((double)GPOINTER_TO_SIZE(v), count_of(maxc, g));
        }
        g_hash_table_unref(cc);
        g_hash_table_unref(maxc);

        double b = 1.0;
        double ratio = (testlen + tiny) / (reflen + small);
        for (guint k = 0; k < 4; k++) {
            b *= (sc[k] + tiny) / (sg[k] + small);
            double s = pow(b, 1.0 / (k + 1));
            if (ratio < 1)
                s *= exp(1 - 1 / ratio);
            out->bleu_sentence[c * 4 + k] = s;
            guess[k] += sg[k];
            correct[k] += sc[k];
        }
        testlen_sum += testlen;
        reflen_sum += reflen;
    }
    double b = 1.0;
    double ratio = (testlen_sum + tiny) / (reflen_sum + small);
    for (guint k = 0; k < 4; k++) {
        b *= (correct[k] + tiny) / (guess[k] + small);
        out->bleu[k] = pow(b, 1.0 / (k + 1));
        if (ratio < 1)
            out->bleu[k] *= exp(1 - 1 / ratio);
    }
}

/* ---- ROUGE-L (pycocoevalcap rouge.py) ----------------------------------------------------------- */

/* pycocoevalcap splits on " ", so an empty sentence is one empty word. */
static guint rouge_len(const ClMetricsSent *s)
{
    return s->len ? s->len : 1;
}

static guint lcs(const ClMetricsSent *a, const ClMetricsSent *b)
{
    if (!a->len || !b->len)
        return !a->len && !b->len; /* [""] vs [""]: one common (empty) word */
    g_autofree guint *row = g_new0(guint, b->len + 1);
    for (guint i = 1; i <= a->len; i++) {
        guint diag = 0;
        for (guint j = 1; j <= b->len; j++) {
            guint up = row[j];
            row[j] = a->ids[i - 1] == b->ids[j - 1] ? diag + 1 : MAX(up, row[j - 1]);
            diag = up;
        }
    }
    return row[b->len];
}

static double rouge_l(const ClMetricsSent *cand, const ClMetricsSent *refs, guint n_refs)
{
    const double beta = 1.2;
    double pmax = 0, rmax = 0;
    for (guint r = 0; r < n_refs; r++) {
        double l = lcs(&refs[r], cand);
        pmax = MAX(pmax, l / rouge_len(cand));
        rmax = MAX(rmax, l / rouge_len(&refs[r]));
    }
    if (pmax == 0 || rmax == 0)
        return 0.0;
    return (1 + beta * beta) * pmax * rmax / (rmax + beta * beta * pmax);
}

/* ---- CIDEr-D (pycocoevalcap cider_scorer.py) ---------------------------------------------------- */

typedef struct {
    GHashTable *tfidf; /* n-gram -> double* */
    double norm[4];
    double length; /* pycocoevalcap counts bigrams here ("if n == 1") */
} Vec;

static void vec_init(Vec *v, const ClMetricsSent *s, GHashTable *df, double ref_len)
{
    v->tfidf = g_hash_table_new_full(ngram_hash, ngram_equal, g_free, g_free);
    memset(v->norm, 0, sizeof v->norm);
    v->length = 0;
    GHashTable *counts = count_ngrams(s);
    GHashTableIter it;
    gpointer k, c;
    g_hash_table_iter_init(&it, counts);
    while (g_hash_table_iter_next(&it, &k, &c)) {
        const NGram *g = k;
        double tf = (double)GPOINTER_TO_SIZE(c);
        double d = log(MAX(1.0, count_of(df, g)));
        double *val = g_new(double, 1);
        *val = tf * (ref_len - d);
        v->norm[g->n - 1] += *val * *val;
        if (g->n == 2)
            v->length += tf;
        g_hash_table_insert(v->tfidf, g_memdup2(g, sizeof *g), val);
    }
    for (int n = 0; n < 4; n++)
        v->norm[n] = sqrt(v->norm[n]);
    g_hash_table_unref(counts);
}

static double cider_sim(const Vec *h, const Vec *r, double sigma)
{
    double val[4] = { 0 }, sum = 0;
    GHashTableIter it;
    gpointer k, p;
    g_hash_table_iter_init(&it, h->tfidf);
    while (g_hash_table_iter_next(&it, &k, &p)) {
        const NGram *g = k;
        double *rv = g_hash_table_lookup(r->tfidf, g);
        double vr = rv ? *rv : 0.0;
        val[g->n - 1] += MIN(*(double *)p, vr) * vr;
    }
    double delta = h->length - r->length;
    for (int n = 0; n < 4; n++) {
        if (h->norm[n] != 0 && r->norm[n] != 0)
            val[n] /= h->norm[n] * r->norm[n];
        val[n] *= exp(-(delta * delta) / (2 * sigma * sigma));
        sum += val[n];
    }
    return sum;
}

static void cider(ClMetricsSent *cand, ClMetricsSent **refs, guint *n_refs, guint n,
                  ClMetricsScores *out)
{
    /* document frequency: in how many items' reference sets each n-gram occurs */
    GHashTable *df = g_hash_table_new_full(ngram_hash, ngram_equal, g_free, NULL);
    for (guint c = 0; c < n; c++) {
        GHashTable *seen = g_hash_table_new(ngram_hash, ngram_equal);
        GPtrArray *keep = g_ptr_array_new_with_free_func((GDestroyNotify)g_hash_table_unref);
        for (guint r = 0; r < n_refs[c]; r++) {
            GHashTable *rc = count_ngrams(&refs[c][r]);
            g_ptr_array_add(keep, rc);
            GHashTableIter it;
            gpointer k;
            g_hash_table_iter_init(&it, rc);
            while (g_hash_table_iter_next(&it, &k, NULL)) {
                if (g_hash_table_add(seen, k))
                    g_hash_table_replace(
                        df, g_memdup2(k, sizeof(NGram)),
                        GSIZE_TO_POINTER(GPOINTER_TO_SIZE(g_hash_table_lookup(df, k)) + 1));
            }
        }
        g_hash_table_unref(seen);
        g_ptr_array_unref(keep);
    }
    double ref_len = log((double)n), total = 0;
    for (guint c = 0; c < n; c++) {
        Vec h;
        vec_init(&h, &cand[c], df, ref_len);
        double score = 0;
        for (guint r = 0; r < n_refs[c]; r++) {
            Vec rv;
            vec_init(&rv, &refs[c][r], df, ref_len);
            score += cider_sim(&h, &rv, 6.0);
            g_hash_table_unref(rv.tfidf);
        }
        g_hash_table_unref(h.tfidf);
        out->cider_sentence[c] = score / 4.0 / n_refs[c] * 10.0;
        total += out->cider_sentence[c];
    }
    out->cider = total / n;
    g_hash_table_unref(df);
}

/* ---- the corpus driver ------------------------------------------------------------------------ */

gboolean cl_metrics_score(const char *const *candidates, const char *const *const *references,
                          guint n, ClMetricsFlags flags, ClMetricsScores *out, GError **error)
{
    g_return_val_if_fail(out != NULL, FALSE);
    memset(out, 0, sizeof *out);
    if (n == 0 || !candidates || !references) {
        g_set_error(error, CL_METRICS_ERROR, CL_METRICS_ERROR_INVALID,
                    "metrics: nothing to score (no candidate captions given)");
        return FALSE;
    }
    for (guint c = 0; c < n; c++) {
        if (!candidates[c] || !references[c] || !references[c][0]) {
            g_set_error(error, CL_METRICS_ERROR, CL_METRICS_ERROR_INVALID,
                        "metrics: caption %u has %s; every candidate needs a caption and at "
                        "least one reference",
                        c + 1, !candidates[c] ? "no candidate text" : "no reference");
            return FALSE;
        }
    }
    GHashTable *vocab = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    ClMetricsSent *cand = g_new0(ClMetricsSent, n);
    ClMetricsSent **refs = g_new0(ClMetricsSent *, n);
    guint *n_refs = g_new0(guint, n);
    for (guint c = 0; c < n; c++) {
        cl_metrics_sent_from_text(&cand[c], candidates[c], flags, vocab);
        n_refs[c] = g_strv_length((char **)references[c]);
        refs[c] = g_new0(ClMetricsSent, n_refs[c]);
        for (guint r = 0; r < n_refs[c]; r++)
            cl_metrics_sent_from_text(&refs[c][r], references[c][r], flags, vocab);
    }

    out->n = n;
    out->bleu_sentence = g_new0(double, (gsize)n * 4);
    out->meteor_sentence = g_new0(double, n);
    out->rouge_l_sentence = g_new0(double, n);
    out->cider_sentence = g_new0(double, n);

    bleu(cand, refs, n_refs, n, out);
    double rsum = 0;
    for (guint c = 0; c < n; c++) {
        out->rouge_l_sentence[c] = rouge_l(&cand[c], refs[c], n_refs[c]);
        rsum += out->rouge_l_sentence[c];
    }
    out->rouge_l = rsum / n;
    cider(cand, refs, n_refs, n, out);
    out->meteor = cl_metrics_meteor_corpus(cand, refs, n_refs, n, out->meteor_sentence);

    for (guint c = 0; c < n; c++) {
        cl_metrics_sent_clear(&cand[c]);
        for (guint r = 0; r < n_refs[c]; r++)
            cl_metrics_sent_clear(&refs[c][r]);
        g_free(refs[c]);
    }
    g_free(cand);
    g_free(refs);
    g_free(n_refs);
    g_hash_table_unref(vocab);
    return TRUE;
}

void cl_metrics_scores_clear(ClMetricsScores *s)
{
    if (!s)
        return;
    g_free(s->bleu_sentence);
    g_free(s->meteor_sentence);
    g_free(s->rouge_l_sentence);
    g_free(s->cider_sentence);
    memset(s, 0, sizeof *s);
}
