/* metrics.h - captioning metrics as the paper reports them (appendix C.2, docs/DESIGN.md §5): the
 * COCO-caption tokenizer and BLEU-1..4, METEOR, ROUGE-L and CIDEr-D, matching pycocoevalcap
 * (checked against it by tests/test-metrics.c on tests/goldens/metrics.json).
 *
 * Agreement with pycocoevalcap, fed the same tokens:
 *   BLEU-1..4  exact (its corpus formula, "closest" reference length, tiny=1e-15/small=1e-9).
 *   ROUGE-L    exact (per-sentence LCS F-measure, beta 1.2, precision and recall each maximised
 *              over the references, then averaged).
 *   CIDEr-D    exact (n 4, sigma 6, document frequency from the evaluated set's references, log(N)
 *              as the reference length, candidate tf-idf clipped by the reference's, the Gaussian
 *              length penalty on the number of *bigrams* as pycocoevalcap computes it, x10).
 *   METEOR     METEOR 1.5's scoring (English "rank" parameters alpha 0.85, beta 0.2, gamma 0.6,
 *              delta 0.75; the jar's English function-word list) with its exact and stem
 *              (Snowball English, as in the jar) matching modules only: the WordNet synonym and
 *              paraphrase modules are not included, so our score is mostly a lower bound of the
 *              jar's (on tests/goldens/metrics.json: corpus 0.3655 vs 0.3989, 29/50 sentences
 *              equal; a few are higher: the jar sometimes takes no stem match where we do,
 *              e.g. "changed" ~ "change", not understood yet). The alignment maximises matched words, then minimises chunks (exhaustive
 *              search with a node limit; the jar uses a beam). Per segment the best reference wins;
 *              the corpus score aggregates the chosen segments' statistics as the jar's EVAL does.
 *              The jar's own "-norm" re-tokenisation is not applied (it only differs for tokens
 *              with inner punctuation such as "2-3" or "1/2").
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define CL_METRICS_ERROR (cl_metrics_error_quark())
GQuark cl_metrics_error_quark(void);

typedef enum {
    CL_METRICS_ERROR_INVALID, /* bad arguments: no candidates, a candidate without references */
} ClMetricsError;

/* The tokenizer of the COCO caption evaluation: Stanford PTBTokenizer (CoreNLP 3.4.1,
 * -preserveLines -lowerCase) followed by pycocoevalcap's removal of its PUNCTUATIONS list.
 * Lower-cases, separates punctuation, splits the clitics n't 's 're 've 'll 'm 'd (and cannot,
 * gonna, wanna, gotta), keeps numbers ("0.1234", "1,000", "-5"), acronyms and common
 * abbreviations ("u.s.", "e.g.", "mr."), hyphenated words and "a/b" whole. Brackets come out as
 * "-lrb-" "-rrb-" "-lsb-" "-rsb-" "-lcb-" "-rcb-" and are *kept*, as in pycocoevalcap (its list
 * has them upper-case but the tokenizer lower-cased them). Quotes, . , ; : ! ? - -- ... are
 * dropped. Invalid UTF-8 is replaced by U+FFFD, which separates tokens and is dropped (as PTB does
 * with untokenizable characters).
 * Known differences on exotic input: PTB's SGML-tag ("<c>") and e-mail/URL rules, leading
 * apostrophes ("'tis" -> "'t is"), runs like "a..b", number+unit splits ("3.5mm" -> "3.5 mm"),
 * and its full abbreviation list (we know the common ones) are not reproduced. */
char **cl_metrics_tokenize(const char *text);     /* NULL-terminated token list (g_strfreev) */
char *cl_metrics_tokenize_join(const char *text); /* the same, joined by single spaces */

/* The Snowball English (Porter2) stemmer, as METEOR 1.5's stem module uses it. Expects a
 * lower-case word; returns a newly allocated stem. */
char *cl_metrics_stem(const char *word);

typedef enum {
    CL_METRICS_NONE = 0,
    /* Candidates and references are already tokenized (space separated): skip the tokenizer,
     * e.g. to score pycocoevalcap's own PTB output. */
    CL_METRICS_PRETOKENIZED = 1 << 0,
} ClMetricsFlags;

typedef struct {
    guint n;        /* candidates scored */
    double bleu[4]; /* corpus BLEU-1..4 */
    double meteor;  /* corpus METEOR (aggregated statistics) */
    double rouge_l; /* mean of per-sentence ROUGE-L */
    double cider;   /* mean of per-sentence CIDEr-D */
    /* per candidate, [n] each (bleu_sentence is [n][4]) */
    double *bleu_sentence;
    double *meteor_sentence;
    double *rouge_l_sentence;
    double *cider_sentence;
} ClMetricsScores;

/* Scores n candidates, candidate i against references[i] (a NULL-terminated list of >= 1
 * strings). CIDEr's document frequencies come from this call's references, so CIDEr depends on the
 * whole set (as in pycocoevalcap). Fills *out (clear it with cl_metrics_scores_clear). */
gboolean cl_metrics_score(const char *const *candidates, const char *const *const *references,
                          guint n, ClMetricsFlags flags, ClMetricsScores *out, GError **error);
void cl_metrics_scores_clear(ClMetricsScores *scores);

/* METEOR of one candidate against its references (best reference), for quick checks. */
double cl_metrics_meteor_sentence(const char *candidate, const char *const *references,
                                  ClMetricsFlags flags);

G_END_DECLS
