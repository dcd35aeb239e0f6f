/* describe.h - the whole describe pipeline for an image sequence: preprocess, stateful encoding,
 * the domain's chat conversation, prefill with the visual tokens, generation, heatmaps. */
#pragma once

#include <gio/gio.h>
#include <glib.h>

#include "nn/backend.h"
#include "model/chat.h"
#include "model/generate.h"
#include "model/grounding.h"
#include "model/heatmap.h"
#include "image/image.h"
#include "model/model.h"
#include "model/preprocess.h"

G_BEGIN_DECLS

/* One image of the sequence: a frame of a loaded image (borrowed for the call). */
typedef struct {
    const ClImage *image;
    guint frame;
    /* ignore regions of this image (cl_preprocess_apply_masks): n_masks × (x0, y0, x1, y1) in
     * its pixels; NULL / 0 for none */
    const double *masks;
    guint n_masks;
    /* the display transform the model's input goes through (docs/DESIGN.md §9: the model sees what the
     * user sees: the same window/level); NULL: the frame's defaults */
    const ClDisplaySettings *display;
    /* the image aligned onto another (cl_preprocess_image_aligned): the model reads it in that
     * image's frame of frame_w × frame_h pixels; NULL: as it is. Its masks are then in the
     * frame's pixels, and so are its letterbox and heat maps. */
    const double *align;
    guint frame_w, frame_h;
} ClDescribeImage;

/* What the pipeline is doing, for progress reports. */
typedef enum {
    CL_DESCRIBE_ENCODING,   /* image `image` (0-based) of `n_images`: preprocess + encoder */
    CL_DESCRIBE_GENERATING, /* the prompt through the decoder, then the generated tokens */
} ClDescribeStage;
typedef void (*ClDescribeProgress)(ClDescribeStage stage, guint image, guint n_images,
                                   gpointer user_data);

typedef struct {
    gboolean auto_domain; /* pick the conversation with cl_describe_detect_domain (default) */
    ClChatDomain domain;  /* used when auto_domain is FALSE */
    const char *question; /* replaces the domain's final question; NULL or "" = the domain's */
    /* A whole conversation to use instead of the domain's (evaluation: a data set's own turns up
     * to the answer); it must hold one <image> tag per image and end with a user turn. NULL =
     * the domain's (default). `domain` and `question` are ignored when it is set. */
    const ClChatTurn *turns;
    gsize n_turns;
    int max_new_tokens;             /* see ClGenerateOptions (default 256) */
    int beam_size;                  /* 1 = greedy (default) */
    int stream_sink, stream_window; /* streaming KV caches (ClGenerateOptions); 0: off */
    int sparse_block, sparse_topk;  /* the offline sparse prefill (ClGenerateOptions); 0: off */
    /* Earlier reports and notes of the case (plain text), read with the images: the last user
     * turn gets "Prior reports: {context}\n" after its image. A model with VIST2 keeps the text
     * as rendered pages' visual rows (vist.h), another as text. NULL or "": none. */
    const char *context;
    /* TRUE: the context goes only to a model with VIST2 (config vist, the models trained to
     * read prior reports); another gets none, and a notice says so (the app's case notes: a
     * model never trained with them answers them with nonsense). Default FALSE: any model. */
    gboolean context_vist_only;
    double length_penalty;           /* 1.0 */
    gboolean median_numbers;         /* numbers as the median of the model's distribution, see
                              * ClGenerateOptions (default FALSE) */
    const char *const *stop_strings; /* besides the end tokens and the texts <|im_start|>,
                                      * <|im_end|>, <|endoftext|> (always stops); NULL-terminated,
                                      * may be NULL */
    gboolean heatmaps;               /* heat grids for every image after the first (default TRUE) */
    gboolean delta; /* heat grids from the Δ map (a second encoder pass per image) instead
                     * of the update norms (the same as heatmap_source "delta") */
    /* NULL or "auto": the change head's probabilities when the model has the head (config
     * change_head), else the update norms; or "update_norm", "delta", "change" */
    const char *heatmap_source;
    /* config.change_head: the head decides whether the last image changed (its largest patch
     * probability at least the model's change_threshold) and the answer is steered to agree: away from "No change." when
     * it did, towards it when it did not (greedy; default TRUE; no effect without the head;
     * photographs, whose "No change." one first token tells from a change; not radiographs
     * nor aerial tiles, describe.c says why) */
    gboolean change_gate;
    /* with change_gate: steer also when `turns` are given (the caller's turns ask the domain's
     * question, as an evaluation's samples do); FALSE (default): only for the domain's own */
    gboolean change_gate_turns;
    /* config.change_head, greedy: when the head calls a change, a position phrase of the
     * answer ("at the top left"; aerial tiles: the place phrase with its preposition, "in the
     * centre") is held to the cells of the changed regions it found, and with config.n_objects
     * the object the answer names (after its opening "A", "An" or "The"; with object_task
     * aerial, on aerial tiles: the object opening each clause, "the trees", "a new house") to
     * the one the object head sees there (grounding.h, docs/MODEL.md §3.13); as change_gate
     * with `turns`. Positions not for radiographs, whose left and right are the patient's
     * (default TRUE) */
    gboolean grounding;
    ClTokenCallback on_token;       /* streaming, see generate.h; may be NULL */
    ClDescribeProgress on_progress; /* before each image's encoding and before the generation;
                                     * may be NULL */
    gpointer user_data;             /* for on_token and on_progress */
    GCancellable *cancellable;      /* checked between images and at every decoder step */
} ClDescribeOptions;

void cl_describe_options_init(ClDescribeOptions *opts);

typedef struct {
    char *text;  /* the description (UTF-8 as generated; may be invalid if the model
                  * produced invalid bytes) */
    GArray *ids; /* gint32: the generated tokens (see ClGenerateResult) */
    ClStopReason stop_reason;
    double logprob, score;
    /* config.sure_logprob: the text's log-probability is below it (a notice says so) */
    gboolean unsure;
    ClChatDomain domain;    /* the conversation used */
    char *prompt_text;      /* the prompt as ChatML text, <image> tags included */
    int n_prompt;           /* decoder positions of the prompt (visual tokens included; with
                             * VIST2 pages, their rows in place of the text they hold) */
    int n_visual_per_image; /* M */
    guint n_images;
    ClLetterbox *letterbox;    /* (n_images): how each image sits in the model input */
    GPtrArray *heatmaps;       /* ClHeatmap*, one per image after the first, in order
                             * (image_index 1, 2, ...); empty when not asked for */
    GPtrArray *layer_heatmaps; /* ClHeatmap*: with update-norm heat maps, each image's per
                                * block too (image 1 blocks 0..depth-1, image 2 ...) */
    /* timings, milliseconds */
    double load_ms;       /* not measured here: for the caller (model + images) */
    double preprocess_ms; /* all images */
    /* config.change_head: the largest change probability over the last image's patches (the
     * change call is change_max >= change_threshold, cl_config_change_threshold); -1 without
     * the head */
    double change_max, change_threshold;
    ClChangeRegions regions; /* config.change_head: the last image's changed regions (none when
                              * no change is called) */
    /* config.n_objects: the class the object head sees in them (config.object_names), -1
     * when none; its share of the classes' probability. With object_task aerial (aerial tiles
     * only): the first region's, and region_objects[i] each region's (-1 when none) */
    int object;
    double object_share;
    int region_objects[CL_GROUNDING_MAX_REGIONS];
    char *object_name; /* its name (config.object_names), NULL when none */
    /* radiographs with the model's findings (cl_config_findings): those the object head sees
     * added in the main image and missing from it (cl_grounding_findings), n_findings flags
     * each; n_findings 0 when not looked at */
    int n_findings;
    gboolean finding_added[CL_CONFIG_MAX_FINDINGS], finding_missing[CL_CONFIG_MAX_FINDINGS];
    /* ... and those a list of several may name (cl_grounding_findings_several) */
    gboolean finding_added_several[CL_CONFIG_MAX_FINDINGS],
        finding_missing_several[CL_CONFIG_MAX_FINDINGS];
    /* the names of the findings seen added and missing (char*, the model's radiograph table);
     * NULL when the findings were not looked at */
    GPtrArray *findings_added, *findings_missing;
    guint n_unfamiliar;  /* images the model's statistics (config.ood) flag as unlike its training
                         * images: the notice's */
    double *encode_ms;   /* (n_images) each image's encoder pass(es) */
    double prefill_ms;   /* the prompt through the decoder */
    double decode_ms;    /* generation after the prefill */
    double tokens_per_s; /* generated tokens / decode time (0 when none) */
    GPtrArray *notices;  /* char*: one-line notes for the user (device fallback, upscaled
                           * images, ...); the caller may add its own */
    GArray *prompt_ids;  /* gint32: the decoder's prompt (CL_DECODER_VISUAL where the visual
                           * tokens go; a context as its text even when VIST2 read pages) */
    float *visual;       /* (n_images, M, dec_dim): the visual tokens the decoder read */
    /* the context (options.context): its tokens, and with VIST2 the pages they became, the
     * tokens the pages hold and the pages' grey pixels (image_size² bytes each, thumbnails) */
    int context_tokens, context_compressed, context_pages;
    GPtrArray *context_page_pixels;
} ClDescribeResult;

void cl_describe_result_clear(ClDescribeResult *r);

/* The conversation for a sequence, from its first image: RADIOGRAPH for a DICOM whose modality
 * is a projection radiograph (CR, DX, DR, RG, or the modality text says "radiograph"); AERIAL for
 * a GeoTIFF or an image with GPS/geo metadata; EDITS for 8-bit colour photos (PNG, JPEG, WebP,
 * BMP, GIF, TIFF without geo tags) — the edited-photo use case; GENERIC otherwise. */
ClChatDomain cl_describe_detect_domain(const ClImage *first);

/* Runs the pipeline on n_images (>= 2) frames in sequence order. `out` is initialised by the
 * call (clear it after either outcome; on failure it holds what was done). FALSE + error when an
 * image cannot be preprocessed, the prompt does not fit the model's context, the decoder fails,
 * or the cancellable fires (G_IO_ERROR_CANCELLED). */
/* The heat-map source opts asks for on this model (opts->heatmap_source, opts->delta);
 * FALSE + CL_MODEL_ERROR_INPUT for an unknown name or "change" on a model without the head. */
gboolean cl_describe_heatmap_source(const ClModel *model, const ClDescribeOptions *opts,
                                    ClHeatmapSource *source, GError **error);

gboolean cl_describe_run(ClBackend *be, const ClModel *model, const ClDescribeImage *images,
                         guint n_images, const ClDescribeOptions *opts, ClDescribeResult *out,
                         GError **error);

G_END_DECLS
