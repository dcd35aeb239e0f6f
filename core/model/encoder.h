/* encoder.h - the stateful visual encoder (SVE ViT + 2x2 merger), docs/MODEL.md §3. */
#pragma once

#include <glib.h>

#include "nn/backend.h"
#include "model/model.h"

G_BEGIN_DECLS

/* Called with every named intermediate (docs/MODEL.md §8) when non-NULL; the data is only valid
 * during the call. Used by the parity tests and by `--dump`. */
typedef void (*ClTensorTap)(const char *name, const float *data, int ndim, const gint64 *shape,
                            gpointer user_data);

/* The encoder's state: every block's input X_in [N, D] of the last image encoded. */
typedef struct _ClEncoderState ClEncoderState;
/* NULL when memory is short. The state only serves models of this model's shapes; its
 * workspace is allocated by the first cl_encoder_forward(). */
ClEncoderState *cl_encoder_state_new(const ClModel *model);
/* Forget the previous image: the next one is a first image. */
void cl_encoder_state_reset(ClEncoderState *state);
gboolean cl_encoder_state_has_prev(const ClEncoderState *state);
void cl_encoder_state_free(ClEncoderState *state);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClEncoderState, cl_encoder_state_free)

typedef struct {
    float *visual;      /* (M, E) visual tokens for the decoder; owned */
    float *update_norm; /* (enc_depth, N) per-block per-token update norms (0 for stateless) */
    float *delta;       /* (M) the paper's Δ map, NULL unless asked for */
    double ood_score;   /* config.ood: how unlike the training images this one is (§3.11),
                         * above ood_threshold: unlike; both 0 without the statistics */
    double ood_threshold;
    gboolean ood_grey;    /* config.ood_min_colour: the image's colourfulness is below it */
    double ood_colour;    /* the image's colourfulness (with config.ood_min_colour), else 0 */
    float *change_prob;   /* (N) config.change_head: per patch, the probability that it changed
                         * from the previous image; NULL for a first image or without the head */
    float *object_logits; /* (N, CL_CONFIG_OBJECT_OUT) config.n_objects: the object head's
                           * logits per patch (every image); NULL without the head */
    int grid;             /* G: the patch grid is G x G */
    int n_patches;        /* N = G*G */
    int n_visual;         /* M = N/4, on a (G/2 x G/2) grid */
    double ms;            /* wall time of this call */
} ClEncoderOutput;

/* Encodes one image `pixels` [C, S, S] (preprocessed, docs/MODEL.md §2) reading the state's
 * previous image (if any), then makes this image the state. `image_index` names the taps
 * ("img{t}."). */
gboolean cl_encoder_forward(ClBackend *be, const ClModel *model, ClEncoderState *state,
                            const float *pixels, int image_index, gboolean want_delta,
                            ClTensorTap tap, gpointer tap_data, ClEncoderOutput *out,
                            GError **error);
void cl_encoder_output_clear(ClEncoderOutput *out);

/* config.enc_stem_effnet: the stride-16 EfficientNet-Lite0 features (N, 112) of one
 * preprocessed image [3, size, size] (docs/MODEL.md §3.1), the network read once per process
 * from the pretrained folder; FALSE + error when it is not there. Thread-safe (CPU). */
gboolean cl_encoder_stem_features(const float *pixels, int size, float *patches, int N,
                                  GError **error);

/* config.ood (docs/MODEL.md §3.11): desc (2C) = the mean and the standard deviation over the N
 * patches of each of their C values; its score = the mean over its CL_OOD_NEAREST nearest bank
 * rows (K, C2 = 2C; rows [skip_from, skip_to) left out) of the RMS distance, desc standardised
 * by mean/var first, each distance divided by its row's radius (NULL: not divided): a row from
 * a sparse part of the training images (a task whose images vary widely) counts as near from
 * further away than one from a dense part. */
#define CL_OOD_NEAREST 3
/* The C = cl_config_ood_channels values of each of N patches (N, cl_config_patch_inputs) into
 * values (N, C): the EfficientNet-Lite0 stem's features as they are; for a patch stem, the patch
 * embedding patch_w·p + patch_b (host memory; a patch stem's raw pixel positions all look alike
 * once averaged over the image, what the model's first layer makes of them does not). */
void cl_encoder_ood_values(const ClModelConfig *cfg, const float *patch_w, const float *patch_b,
                           const float *patches, int N, float *values);
void cl_encoder_ood_descriptor(const float *patches, int N, int C, float *desc);
double cl_encoder_ood_score(const float *mean, const float *var, const float *bank,
                            const float *radius, int K, int C2, const float *desc, int skip_from,
                            int skip_to);
/* config.ood_head's score: desc (L values) against a Gaussian of the training images' with
 * R principal directions, basis (R, L) orthonormal, with their variances lambda (R) and the
 * residual variance var (L) of each value off them: the squared Mahalanobis distance from mean,
 * divided by L (about 1 for a training image). */
double cl_encoder_ood_gauss_score(const float *mean, const float *var, const float *basis,
                                  const float *lambda, int R, int L, const float *desc);
/* An image's score against the model's statistics as config says (the Gaussian with ood_head,
 * else the nearest bank rows): ood.mean, ood.var, ood.bank and ood.radius in host memory. */
double cl_encoder_ood_model_score(const ClModelConfig *cfg, const float *mean, const float *var,
                                  const float *bank, const float *radius, const float *desc);
/* An image's config.ood descriptor (cl_config_ood_len values) from its N patches' inputs
 * (N, cl_config_patch_inputs; host memory): with ood_head, EfficientNet-Lite0's pooled head
 * features run on from the stem's map (the network as cl_encoder_stem_features reads it);
 * else cl_encoder_ood_values' mean and standard deviation. */
gboolean cl_encoder_ood_describe(const ClModelConfig *cfg, const float *patch_w,
                                 const float *patch_b, const float *patches, int N, float *desc,
                                 GError **error);
/* The colourfulness of a preprocessed image [3, size, size] (values in [−1, 1]), on the 0–255
 * scale: the spread of its red−green and yellow−blue opponent values plus 0.3 × their mean's
 * size (Hasler and Süsstrunk's measure), taken over the means of CL_COLOUR_BLOCK-pixel blocks
 * so that sensor noise, independent in each channel, does not count as colour; 0 for a grey
 * image, whatever its channels. */
#define CL_COLOUR_BLOCK 8
double cl_encoder_colourfulness(const float *pixels, int channels, int size);

/* config.visual_center: each of the E columns of v [M, E] minus its mean over the M rows. A
 * symmetric projection, so its backward is the same call on the gradient. */
void cl_visual_center(float *v, int m, int e);

/* config.change_marker (docs/MODEL.md §3.12): q[m], the largest of the change probabilities p
 * (the G × G patch grid) of visual token m's four patches (the merger's 2 × 2 order), and in
 * at[m] (may be NULL) the patch it came from. */
void cl_change_marker_pool(const float *p, int G, float *q, int *at);

/* visual (M, E) += q[m] · marker (E) for each token m */
void cl_change_marker_add(float *visual, const float *q, const float *marker, int M, int E);

G_END_DECLS
