/* jsonl.h - ShareGPT-style JSONL training data (docs/DESIGN.md §5, the SVE paper's appendix B) and the
 * conversation -> ClTrainSample conversion (ids with visual positions expanded, loss mask,
 * preprocessed images) shared with the synthetic tasks.
 *
 * File format: one JSON object per line (blank lines are ignored):
 *   {"id": "optional", "messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...],
 *    "images": ["a.png", "b.dcm", "stack.tif#2"]}
 * The older ShareGPT schema {"from": "system"|"human"|"gpt", "value": "..."} is read too, and the
 * list may be called "conversations". The k-th `<image>` tag of the messages (in order) binds to
 * images[k]. Image paths are relative to the JSONL file's folder (absolute ones are kept); a
 * path ending in "#N" takes frame N of a multi-frame file (DICOM frame, TIFF page), counted from
 * 0 as in the ClImage API (the viewer's "frame N/M" labels count from 1); without it, frame 0.
 * A file whose name really ends in "#N" is taken as is when it exists.
 * Every line must end with an assistant turn (the answer trained on); the system turn, if any,
 * comes first. */
#pragma once

#include <glib.h>

#include "model/chat.h"
#include "image/image.h"
#include "model/model.h"
#include "train/sample.h"

G_BEGIN_DECLS

#define CL_DATASET_ERROR (cl_dataset_error_quark())
GQuark cl_dataset_error_quark(void);
typedef enum {
    CL_DATASET_ERROR_IO,       /* the file cannot be read */
    CL_DATASET_ERROR_LINE,     /* a malformed line (message: "file:line: what is wrong") */
    CL_DATASET_ERROR_TOO_LONG, /* a sample longer than the context (refused) */
    CL_DATASET_ERROR_EMPTY,    /* no usable sample in the file */
    CL_DATASET_ERROR_INDEX,    /* index out of range */
} ClDatasetError;

/* What happens to a sample over the length limit. */
typedef enum {
    CL_DATASET_LONG_REFUSE = 0, /* a bad line (fails the open, or skipped in skip_bad_lines mode) */
    CL_DATASET_LONG_TRUNCATE,   /* cut at the limit, dropping the end of the conversation; a
                                 * sample still refused when the cut would fall inside an image's
                                 * visual positions or leave no supervised token */
} ClDatasetLongPolicy;

typedef struct {
    gboolean all_turns; /* supervise every assistant turn (FALSE, the default: only the
                                * final answer and its <|im_end|>, the paper's mask_history) */
    int max_len;        /* positions per sample; 0 or more than the model's max_len: the
                                * model's max_len */
    ClDatasetLongPolicy long_policy; /* default CL_DATASET_LONG_REFUSE */
    gboolean skip_bad_lines; /* FALSE (default): the first bad line fails the open; TRUE: each
                                * bad line is warned about (g_warning is not used: see
                                * cl_dataset_problems) and counted */
    guint image_cache;       /* preprocessed images kept (LRU, by path and frame); 0 = none */
} ClDatasetOptions;

void cl_dataset_options_init(ClDatasetOptions *o);

/* Counts from the open. */
typedef struct {
    guint n_lines;        /* lines in the file, blank ones included */
    guint n_blank;        /* blank lines (ignored) */
    guint n_samples;      /* usable samples */
    guint n_bad;          /* lines skipped as malformed (skip mode), too-long ones not counted */
    guint n_too_long;     /* samples refused for length (skipped in skip mode) */
    guint n_truncated;    /* samples kept but cut at the limit (CL_DATASET_LONG_TRUNCATE) */
    guint n_images;       /* image references over the usable samples */
    guint64 n_positions;  /* decoder positions over the usable samples (after truncation) */
    guint64 n_supervised; /* supervised targets over the usable samples */
    int max_positions;    /* the longest usable sample */
} ClDatasetSummary;

typedef struct _ClDataset ClDataset;

/* Reads and validates the whole file up front: every line parsed, its roles, contents, image
 * tags and image files checked and its length (the decoder positions after expanding each
 * <image> into the model's visual positions) measured, and the byte offset of every usable line
 * kept, so samples are read back in any order without holding the file open. The model gives
 * the tokenizer and the sizes (it must outlive the dataset). o NULL: defaults. Fails with a
 * message naming "file:line" and the problem (CL_DATASET_ERROR_LINE / _TOO_LONG), or when the
 * file has no usable sample (CL_DATASET_ERROR_EMPTY). */
ClDataset *cl_dataset_open(const char *path, const ClModel *model, const ClDatasetOptions *o,
                           GError **error);
void cl_dataset_free(ClDataset *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClDataset, cl_dataset_free)

guint cl_dataset_count(const ClDataset *d);
const ClDatasetSummary *cl_dataset_summary(const ClDataset *d);
/* One line, newly allocated: "412 samples from 415 lines (2 bad lines skipped, 1 too long ...)" */
char *cl_dataset_summary_text(const ClDataset *d);
/* The messages about skipped lines (skip mode), "file:line: problem", in file order. */
const GPtrArray *cl_dataset_problems(const ClDataset *d);
/* The line number (from 1) of sample `index` in the file. */
guint cl_dataset_line(const ClDataset *d, guint index);

/* Loads sample `index` (0 .. count-1): re-reads its line, encodes it, loads and preprocesses its
 * images (cl_preprocess_image with the display defaults, as inference does). The sample's id is
 * the line's "id" (string or number) or "line N". Errors (an image that no longer loads, a frame
 * out of range) name "file:line". Safe to call from several threads at once. */
ClTrainSample *cl_dataset_get(ClDataset *d, guint index, GError **error);
/* Image cache hits / misses so far (0 when the cache is off). */
void cl_dataset_cache_stats(const ClDataset *d, guint64 *hits, guint64 *misses);

/* A conversation and its images -> a training sample, without files (core/synth). The turns'
 * `<image>` tags (n_images of them, else an error) bind to images[k] in order; frames (NULL: all
 * 0) picks each image's frame. Every tag becomes n_visual_per_image CL_DECODER_VISUAL ids and the
 * mask follows sample.h: mask[t] = 1 iff target ids[t + 1] is a supervised token (the final
 * answer and its <|im_end|>; every assistant turn's with all_turns). The last turn must be an
 * assistant turn; a sample longer than the model's max_len is refused. id is "synthetic". */
ClTrainSample *cl_train_sample_from_turns(const ClModel *model, const ClChatTurn *turns, gsize n,
                                          const ClImage *const *images, const guint *frames,
                                          guint n_images, gboolean all_turns, GError **error);

/* The same with a context (prior reports, case notes; NULL or "": none) read with the images
 * (cl_chat_with_context): a model with VIST2 gets it as pages (ClTrainSample.page_pixels, the
 * tail rule's text after them), another as text. */
ClTrainSample *cl_train_sample_from_turns_with_context(
    const ClModel *model, const ClChatTurn *turns, gsize n, const ClImage *const *images,
    const guint *frames, guint n_images, const char *context, gboolean all_turns, GError **error);

/* Deterministic shuffles (Fisher–Yates driven by splitmix64, unbiased): order[0 .. n) becomes a
 * permutation of 0 .. n-1 that depends only on (seed, n). cl_dataset_epoch_order gives each
 * epoch its own permutation from one seed. */
void cl_data_shuffle(guint *order, guint n, guint64 seed);
void cl_dataset_epoch_order(guint *order, guint n, guint64 seed, guint64 epoch);

G_END_DECLS
