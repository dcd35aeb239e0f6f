/* changeeval.h - does the model find the change? Every heat-map source against a task's
 * per-patch change targets (AUROC, hottest cell on the change, next to a model-free blurred
 * difference), and the model's text against the sample's truth (docs/DESIGN.md §5.1). */
#pragma once

#include <gio/gio.h>
#include <glib.h>

#include "model/encoder.h"
#include "model/model.h"
#include "nn/backend.h"
#include "synth/synth.h"

G_BEGIN_DECLS

/* ---- the measures --------------------------------------------------------------------------- */

/* The area under the ROC curve of `scores` against `labels` (non-zero: positive), exactly: the
 * Mann–Whitney U of the positives' ranks, ties sharing their mean rank, over n_pos · n_neg. A
 * non-finite score ranks below every finite one. NaN when either class is empty. */
double cl_auroc(const float *scores, const guint8 *labels, gsize n);

/* ---- the text ------------------------------------------------------------------------------- */

typedef enum {
    CL_CHANGE_KIND_UNKNOWN = -1,
    CL_CHANGE_KIND_ADD,      /* added, add, new, appeared, pasted */
    CL_CHANGE_KIND_REMOVE,   /* removed, gone, missing, disappeared */
    CL_CHANGE_KIND_MOVE,     /* moved, shifted */
    CL_CHANGE_KIND_RECOLOUR, /* recoloured, colour, color */
    CL_CHANGE_KIND_RESIZE,   /* larger, smaller, bigger, resized */
    CL_CHANGE_N_KINDS
} ClChangeKind;

const char *cl_change_kind_name(ClChangeKind k); /* "add", …, "resize"; NULL for unknown */

/* What a text says about one change, read from its words (case and punctuation ignored). */
typedef struct {
    gboolean no_change; /* "no change", "nothing has changed", "unchanged", "no difference",
                         * "identical", "the same", or JSON's "change": false */
    ClChangeKind kind;  /* of the first kind word; UNKNOWN when there is none */
    int row, col;       /* the 3 × 3 cell of the first position phrase (0 top / left, 1 middle,
                         * 2 bottom / right; an axis the phrase leaves out is the middle), or of
                         * a later one when the first follows "from"; -1, -1 when the text
                         * names no position */
    int object;         /* 1: the text names `object` (a whole word or words, plural allowed),
                         * 0: it does not, -1: no object asked about */
} ClChangeText;

/* Reads `text` (NULL as ""). Kind words: added/add/new → add; removed/gone/missing → remove;
 * moved → move; recoloured/colour/color → recolour; larger/smaller/bigger → resize (and the
 * inflections listed with ClChangeKind). Position words: top/upper, middle/centre/center/
 * central, bottom/lower, left, right, in one phrase ("in the upper left area", "top-right",
 * "at the bottom"). */
void cl_change_text_parse(const char *text, const char *object, ClChangeText *out);

/* ---- heat-map sources ----------------------------------------------------------------------- */

/* One pair of a sample: image t - 1 and image t, t >= 1, on the targets' patch grid. */
typedef struct {
    const ClSynthSample *sample;
    int image;                  /* t */
    const ClEncoderOutput *enc; /* image t's encoder output; NULL when no model runs */
    int depth;                  /* the model's enc_depth (rows of enc->update_norm) */
    int grid_w, grid_h;         /* = the sample's grid = the model's patch grid */
} ClChangePair;

/* A heat-map source: adding one is one entry in cl_change_sources(). */
typedef struct {
    const char *name;     /* "update_norm", "delta", "change", "blurdiff" */
    const char *summary;  /* one line for the table's legend */
    gboolean from_model;  /* reads the encoder output (NULL model: unavailable) */
    gboolean needs_delta; /* the encoder must compute the Δ map (a second pass per image) */
    /* NULL when every model has it, else why this model cannot give it (a static string), NULL
     * when it can */
    const char *(*unavailable)(const ClModel *model);
    /* heat[grid_h * grid_w], row-major, larger = more change; FALSE + error on failure */
    gboolean (*heat)(const ClChangePair *pair, float *heat, GError **error);
} ClChangeSource;

/* The sources, in the order they are reported, ending with an entry whose name is NULL. */
const ClChangeSource *cl_change_sources(void);

/* The model-free baseline on its own: |b − a| per pixel averaged over the channels, blurred
 * with a Gaussian of sigma `sigma` pixels (edges clamped), averaged per patch of the sample's
 * grid. a and b must have the same size and channels. heat: grid_h × grid_w. */
gboolean cl_change_blurdiff(const ClSynthImage *a, const ClSynthImage *b, double sigma, int patch,
                            int grid_w, int grid_h, float *heat, GError **error);

/* ---- the evaluation ------------------------------------------------------------------------- */

/* seed: the set's own, 1000 for heldout (eval's held-out default), 0 for train (train's) */
#define CL_CHANGE_EVAL_SET_SEED G_MAXUINT64

typedef void (*ClChangeEvalProgress)(int done, int total, gpointer user_data);

typedef struct {
    const char *task;
    int n;                 /* samples (200) */
    guint64 seed;          /* their data-set seed; CL_CHANGE_EVAL_SET_SEED (default): the set's */
    const char *set;       /* "heldout" (default) or "train": the seed, and photo-edits' photos */
    int nuisance;          /* -1 the task's default (mild), 0 none, 1 mild, 2 strong */
    int size;              /* image side in pixels; 0: the model's input size */
    gboolean describe;     /* also generate (greedy) and score the text */
    int max_new_tokens;    /* 160 */
    gboolean no_grounding; /* the answers without describe's grounding (docs/MODEL.md §3.13) */
    ClChangeEvalProgress progress;
    gpointer user_data;
    GCancellable *cancellable;
} ClChangeEvalOptions;
void cl_change_eval_options_init(ClChangeEvalOptions *o);

typedef struct {
    const char *name, *summary;
    const char *unavailable; /* why it was not measured; NULL when it was */
    double auroc_pooled;     /* every cell of every changed pair in one ranking */
    double auroc_pair_mean;  /* the mean of the per-pair AUROCs */
    int n_auroc_pairs;       /* changed pairs with unchanged cells too (those the mean is over) */
    double hottest;          /* share of changed pairs whose hottest cell is changed (a tie at the
                              * top counts as the tied cells' changed share) */
    int n_pairs;             /* changed pairs measured */
    double ms;               /* mean time per pair making this source's map (model sources share
                              * the encoder: see ClChangeEvalResult.encode_ms) */
} ClChangeSourceScore;

typedef struct {
    int n;           /* samples described */
    double change;   /* share whose change / no-change call is right */
    double kind;     /* share with the right kind, of the n_kind whose truth names one */
    double position; /* the right 3 × 3 cell, of n_position */
    double object;   /* the object named, of n_object */
    int n_kind, n_position, n_object;
    int n_unchanged;        /* samples without a change */
    double unchanged_right; /* of the n_unchanged: the share called "no change" */
    double changed_right;   /* of the n - n_unchanged that change: the share called a change */
} ClChangeTextScore;

/* One described sample: its answer's log-probability and whether it was right throughout (the
 * change call, and for a change its kind, position and object where the truth names them). */
typedef struct {
    double logprob;
    gboolean right;
} ClChangeTextAnswer;

typedef struct {
    char *task, *set;
    guint64 seed;
    int nuisance;
    int n_samples, n_pairs, n_changed_pairs;
    int size, patch, grid_w, grid_h;
    double chance_hottest; /* the mean share of changed cells over the changed pairs */
    GArray *sources;       /* ClChangeSourceScore, in cl_change_sources() order */
    gboolean described;
    ClChangeTextScore text;
    GArray *answers;    /* ClChangeTextAnswer, each described sample's in order (NULL without) */
    double encode_ms;   /* mean per pair: both images through the encoder (Δ pass included) */
    double describe_ms; /* mean per sample: the whole describe pipeline */
    int n_unfamiliar;   /* described samples with an image the unfamiliar-image notice flags
                         * (config.ood); -1 when the model has no statistics */
    double seconds;
} ClChangeEvalResult;
void cl_change_eval_result_clear(ClChangeEvalResult *r);

/* Runs the evaluation on the task's samples cl_synth_stream_seed(seed, i), i < n, generated at
 * the model's input size (or o->size) with the targets on the model's patch grid. model may be
 * NULL: the model-free sources alone (size 0 then means 160). */
gboolean cl_change_eval_run(ClBackend *be, const ClModel *model, const ClChangeEvalOptions *o,
                            ClChangeEvalResult *out, GError **error);

/* The result as one JSON object (NaN as null). */
char *cl_change_eval_result_to_json(const ClChangeEvalResult *r);

G_END_DECLS
