/* taskmetrics.h - the task-specific scores of the paper's appendix C and F, beside the caption
 * metrics of metrics.h:
 *  - finding-level micro/macro F1 and change accuracy for radiograph change descriptions
 *    (appendix F: 27 findings × {added, missing} parsed from the Medical-Diff-VQA template);
 *  - permutation-invariant per-change matching for multi-change descriptions (appendix C.3);
 *  - numeric answers (spatial aggregation): the first decimal number, MAE and RMSE. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* ---- radiology findings (appendix F) ---- */

#define CL_N_FINDINGS 27
/* The 27 categories of the paper's Table 18, in its order ("atelectasis", "lung opacity", …). */
const char *const *cl_findings(void);

/* The (finding, direction) labels of one text: added[i] / missing[i] for finding i. Parsed as the
 * paper does: "additional finding(s) of X, Y and Z" → added, "missing the finding(s) of …" →
 * missing, anything else (e.g. "nothing has changed", free text) → no labels. Findings inside a
 * list are matched by name, longest name first ("blunting of the costophrenic angle" before
 * anything shorter), case-insensitively. */
typedef struct {
    gboolean added[CL_N_FINDINGS];
    gboolean missing[CL_N_FINDINGS];
} ClFindingLabels;
void cl_findings_parse(const char *text, ClFindingLabels *out);
gboolean cl_findings_empty(const ClFindingLabels *l);
/* The same findings added and the same missing (an answer entirely right). */
gboolean cl_findings_equal(const ClFindingLabels *a, const ClFindingLabels *b);

/* Accumulates pairs (reference, prediction) and reports the paper's metrics: micro and macro F1
 * over the 54 labels, on the pairs whose reference names at least one change; change accuracy
 * over all pairs: whether "no change" in the reference ⇔ "no change" in the prediction. Macro F1
 * averages over the labels that occur (TP + FP + FN > 0); the paper averages over all 54, which
 * counts never-seen labels as 0 — both are reported. */
typedef struct {
    guint tp[2 * CL_N_FINDINGS], fp[2 * CL_N_FINDINGS], fn[2 * CL_N_FINDINGS];
    guint n_pairs, n_changed_pairs, n_change_correct;
    guint n_exact; /* pairs whose prediction names the same findings, added and missing */
} ClFindingScore;
void cl_finding_score_init(ClFindingScore *s);
void cl_finding_score_add(ClFindingScore *s, const char *reference, const char *prediction);
typedef struct {
    double micro_f1, macro_f1, macro_f1_all54, change_accuracy;
    guint n_pairs, n_changed_pairs, n_exact;
} ClFindingResult;
void cl_finding_score_result(const ClFindingScore *s, ClFindingResult *out);

/* ---- permutation-invariant per-change matching (appendix C.3) ---- */

/* Splits a description into its change sentences (at '.', '!' or '?' followed by space or the
 * end; at most 32), each trimmed; empty sentences are dropped. */
GPtrArray *cl_change_sentences(const char *text);
/* Normalised form used for comparisons: lowercase, punctuation removed, single spaces. */
char *cl_change_normalise(const char *sentence);

/* One reference change: the sentences that say it (any of them is right). */
typedef struct {
    const char *const *variants; /* NULL-terminated */
} ClRefChange;

typedef struct {
    guint n_ref;       /* reference changes */
    guint n_pred;      /* predicted sentences */
    guint n_exact;     /* reference changes whose matched sentence equals one of their variants */
    double similarity; /* sum over reference changes of the matched pair's similarity */
    int *assignment;   /* (n_ref) the predicted sentence matched to each change, -1 none */
    char **matched;    /* (n_ref) that sentence (NULL when none), owned */
} ClChangeMatch;
/* Similarity of a predicted sentence and a change: 1 for an exact (normalised) match with a
 * variant, else the best unigram F1 over its variants. The assignment maximises the total
 * similarity one-to-one (exhaustive for up to 4 changes × 12 sentences — the tasks have at
 * most 4 changes — and the best remaining pair first beyond). Clear with
 * cl_change_match_clear. */
void cl_change_match(const char *prediction, const ClRefChange *refs, guint n_refs,
                     ClChangeMatch *out);
void cl_change_match_clear(ClChangeMatch *m);
/* Change accuracy of one sample: exact matches over max(reference changes, predicted sentences),
 * so a missed change and an invented one both cost; 1 when both are empty. */
double cl_change_match_accuracy(const ClChangeMatch *m);

/* ---- numeric answers ---- */

/* The first decimal number in the text ("0.1234", "-3", ".5", "1e-3" is read as 1); FALSE when
 * there is none. */
gboolean cl_parse_first_number(const char *text, double *out);

typedef struct {
    guint n, n_unparsed;
    double sum_abs, sum_sq;
} ClNumericScore;
/* A prediction without a number counts with value 0 (and in n_unparsed). */
void cl_numeric_score_add(ClNumericScore *s, double reference, const char *prediction);
double cl_numeric_score_mae(const ClNumericScore *s);
double cl_numeric_score_rmse(const ClNumericScore *s);

G_END_DECLS
