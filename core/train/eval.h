/* eval.h - evaluating a model on a synthetic task's held-out samples with the paper's metrics
 * (appendix C, F), next to the task's trivial baseline scored on the same samples.
 *
 * Per task (NaN where a metric does not apply):
 *  - shapes: permutation-invariant per-change scoring (C.3): change accuracy, and BLEU-4,
 *    METEOR, ROUGE-L, CIDEr-D over the matched (sentence, change) pairs, every wording of a
 *    change a reference;
 *  - dots: MAE and RMSE of the first number in the answer, ×10⁻² as the paper reports them
 *    (0.0123 off → 1.23);
 *  - radiograph: caption metrics on the whole answer, finding-level micro/macro F1 and change
 *    accuracy (appendix F);
 *  - aerial: caption metrics, change accuracy = agreement on "changed" vs "no change";
 *  - edits: caption metrics.
 * Perplexity (C.2: token-weighted under the training mask) for every task.
 * Baseline: the most frequent answer of the task's training distribution (baseline_n samples
 * from another seed) — for dots the mean value of the same question (quantity and number of
 * images) — as every prediction. */
#pragma once

#include <gio/gio.h>
#include <glib.h>

#include "nn/backend.h"
#include "model/model.h"
#include "synth/synth.h"

G_BEGIN_DECLS

typedef struct {
    double change_accuracy, bleu4, meteor, rouge_l, cider, ppl;
    double finding_f1_micro, finding_f1_macro, mae, rmse;
    /* the share of answers entirely right (0-1): shapes, every change matched exactly (one of
     * its phrasings) and nothing else said; radiograph, the same findings added and missing;
     * aerial, the generator's sentence itself (normalised); NaN for the tasks whose answers have
     * no parser (edits) and for dots */
    double exact;
    /* the same share over the pairs whose reference names a change, and over those that show
     * none: a task of many unchanged pairs can score well on them alone (NaN: no such pair) */
    double exact_changed, exact_unchanged;
} ClEvalScores;

/* Called after each evaluated sample. */
typedef void (*ClEvalProgress)(int done, int total, gpointer user_data);

typedef struct {
    const char *task;
    int n;                 /* held-out samples */
    guint64 seed;          /* their data-set seed (cl_synth_stream_seed(seed, i)) */
    int max_new_tokens;    /* 160 */
    int baseline_n;        /* training samples the baseline is drawn from (200) */
    int dot_images;        /* dots: images per sample, 2-5 (0: drawn per sample) */
    guint64 baseline_seed; /* 0 = derived from seed */
    gboolean perplexity;   /* TRUE: needs the CPU backend */
    int n_examples;        /* (reference, prediction) pairs kept for the report (3) */
    /* dots: decode each answer's digits as the median of the model's distribution over numbers
     * (ClGenerateOptions.median_numbers, the answer with the least expected absolute error)
     * rather than greedily (TRUE by default); the other tasks ignore it */
    gboolean median_numbers;
    /* answer as describe answers the task's files (radiograph: DICOM, aerial: GeoTIFF): in the
     * task's domain, with the change gate and grounding (docs/MODEL.md §3.10, §3.13); FALSE
     * (default): the decoder alone, in the domain the rendered image is detected as */
    gboolean grounded;
    /* streaming KV caches of sink + window positions (ClGenerateOptions); 0: ordinary */
    int stream_sink, stream_window;
    /* the offline sparse prefill (ClGenerateOptions): blocks of sparse_block, sparse_topk
     * chosen; 0: dense */
    int sparse_block, sparse_topk;
    ClEvalProgress progress;
    gpointer user_data;
    GCancellable *cancellable;
} ClEvalOptions;
void cl_eval_options_init(ClEvalOptions *o);

/* One held-out sample's answer (ClEvalResult.answers). */
typedef struct {
    char *reference, *prediction;
    int exact;      /* 1: entirely right, 0: not, -1: the task's answers are not judged whole */
    double logprob; /* the answer's log-probability under the model (its end token included) */
    int n_scored;   /* the tokens it sums over */
} ClEvalAnswer;

typedef struct {
    char *task;
    int n;
    ClEvalScores model, baseline;
    GArray *answers;     /* ClEvalAnswer, every sample's, in order */
    char *baseline_text; /* what the baseline answers ("nothing has changed.", "0.2000", …) */
    GPtrArray *examples; /* char*: reference, prediction, reference, prediction, … */
    double seconds;
} ClEvalResult;
void cl_eval_result_clear(ClEvalResult *r);

/* Runs the model (greedy) on the task's n held-out samples, each prompted with its own
 * conversation up to the answer, and scores it and the baseline. */
gboolean cl_eval_run(ClBackend *be, const ClModel *model, const ClEvalOptions *o, ClEvalResult *out,
                     GError **error);

/* The scoring alone: predictions[i] for samples[i] (n of them) of `task`. ppl is left NaN. */
gboolean cl_eval_score(const char *task, ClSynthSample *const *samples,
                       const char *const *predictions, int n, ClEvalScores *out, GError **error);

/* Whether `prediction` answers sample `s` of `task` entirely right (ClEvalScores.exact): 1 or 0,
 * or -1 where the task's answers are not judged whole (dots, aerial, edits). */
int cl_eval_answer_exact(const char *task, const ClSynthSample *s, const char *prediction);

/* The scores as JSON members (task's n/a as null): change_accuracy, bleu4, meteor, rougeL,
 * cider, ppl, finding_f1_micro, finding_f1_macro, mae, rmse, exact. */
char *cl_eval_result_to_json(const ClEvalResult *r);

G_END_DECLS
