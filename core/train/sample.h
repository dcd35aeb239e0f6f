/* sample.h - one training example as the trainer consumes it: preprocessed images, the decoder's
 * input ids with the visual positions expanded, the loss mask, and optional auxiliary per-token
 * targets. Made by jsonl.c (ShareGPT JSONL) or from core/synth samples; read by trainmodel.c. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
    /* images, in sequence order: n_images × (channels, size, size) floats, preprocessed exactly
     * as inference does (cl_preprocess_image: display transform, letterbox, (v - 0.5) / 0.5) */
    guint n_images;
    int channels, size;
    float *pixels;

    /* decoder input: ids[0 .. n_ids), every <image> tag replaced by n_visual_per_image entries
     * of CL_DECODER_VISUAL (-1), consumed in order by the images' visual tokens, as
     * cl_describe_run does */
    int n_ids;
    gint32 *ids;
    int n_visual_per_image;
    /* loss: position t predicts ids[t + 1]; mask[t] = 1 when that prediction is supervised
     * (target = ids[t + 1], never a visual position). Built from cl_chat_encode's mask (the
     * final answer and its <|im_end|>, unless every assistant turn is asked for). */
    guint8 *mask;
    int n_supervised;

    /* optional dense auxiliary targets on each image's patch grid (grid × grid), NULL when
     * absent: grounding (image t, patch p: bitmask of the objects it contains, up to 64) and
     * change (image t >= 1, patch p: 1 when the patch changed from image t - 1) */
    int grid;
    guint64 *aux_objects; /* n_images × grid × grid */
    /* what the objects on a patch are (NULL: only whether there is one): bit j of patch p is
     * attribute label j of any object overlapping it, j < CL_TRAIN_AUX_N_LABELS (core/synth's
     * shape, colour, size and material indices: 4 + 8 + 2 + 2 bits, cl_train_aux_label) */
    guint32 *aux_labels; /* n_images × grid × grid */
    guint8 *aux_changed; /* n_images × grid × grid (image 0's rows are 0) */

    /* VIST2 (docs/MODEL.md §4.6): the context's pages, n_pages × (channels, size, size) model
     * inputs; their visual rows follow the images' in the ids (n_pages × n_visual_per_image more
     * CL_DECODER_VISUAL entries), encoded each as a first image with the encoder frozen */
    int n_pages;
    float *page_pixels;

    char *id; /* the example's id (JSONL "id" or "line N"), for messages */
} ClTrainSample;

#define CL_TRAIN_AUX_N_LABELS 16

void cl_train_sample_free(ClTrainSample *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClTrainSample, cl_train_sample_free)

G_END_DECLS
