/* trainmodel.h - the whole model's training forward and backward pass over one sample: the SVE
 * encoder over the sample's image sequence, the 2×2 merger, the decoder over the expanded ids,
 * and the masked next-token cross-entropy (docs/MODEL.md §3-4, DESIGN.md §5).
 *
 * The training forward runs the backend's own ops in the inference order, so its logits and
 * visual tokens are those of cl_encoder_forward / cl_decoder_forward; it keeps the activations
 * the backward needs (per image, per block; attention probabilities are recomputed one head at
 * a time). The backward is CPU f32 (core/train/grad.h): the backend must be the CPU backend. */
#pragma once

#include <glib.h>

#include "backend.h"
#include "model.h"
#include "params.h"
#include "sample.h"

G_BEGIN_DECLS

typedef struct {
    /* The paper's stop_grad (§3.4, default TRUE): image t reads image t−1's block inputs as a
     * constant, so no gradient flows into image t−1 through the state (its K/V projections'
     * weights still learn from image t, and image t−1 still learns through its own visual
     * tokens). FALSE: gradients flow through the state too (the ablation). A first image's own
     * features (sve.first = own) are not a predecessor: they always carry gradient, and so does
     * the learned null state. */
    gboolean stop_grad;
    /* Finite-difference counterpart of stop_grad (tests): when non-NULL, every image's state is
     * taken from a forward of the whole sequence with these parameters instead of the model's,
     * i.e. held fixed while the model's parameters move. NULL in training. */
    const ClParamBuf *state_params;
    /* TODO(aux): weights of the dense auxiliary losses (grounding, changed) once the model has
     * their heads (DESIGN.md §5); ClTrainSample already carries their targets. */
} ClTrainGradOptions;

/* stop_grad TRUE, nothing else. */
void cl_train_grad_options_init(ClTrainGradOptions *o);

typedef struct {
    double loss;       /* mean masked next-token cross-entropy of the sample (nats) */
    int n_supervised;  /* positions it averages over */
    int n_positions;   /* decoder positions run */
    double ms;         /* wall time of the call */
} ClTrainStepStats;

/* Forward + backward for one sample: grads += d loss / d params (the loss is the sample's mean
 * over its supervised positions; a batch's caller scales). FALSE + error (grads untouched) on a
 * sample that does not fit the model (image size or channels, visual positions, ids out of
 * range, too long, nothing supervised) or when memory is short. */
gboolean cl_train_forward_backward(ClBackend *be, const ClModel *model, const ClTrainSample *s,
                                   const ClTrainGradOptions *o, ClParamBuf *grads,
                                   ClTrainStepStats *st, GError **error);

/* The same forward, loss only (finite differences, evaluation perplexity). o may be NULL. */
gboolean cl_train_loss(ClBackend *be, const ClModel *model, const ClTrainSample *s,
                       const ClTrainGradOptions *o, ClTrainStepStats *st, GError **error);

/* The training forward's outputs, for parity checks against the inference path: *visual
 * (n_images, M, E) and *logits (n_ids, V), newly allocated (either pointer may be NULL). */
gboolean cl_train_forward_outputs(ClBackend *be, const ClModel *model, const ClTrainSample *s,
                                  float **visual, float **logits, GError **error);


/* ---- internal: shared by core/train/trainmodel*.c only ------------------------------------ */

/* The encoder's saved activations over a sequence of images. */
typedef struct _ClTrainEnc ClTrainEnc;
/* Runs the encoder over n_images images [C, S, S] with the weights `w` (model->config's
 * shapes), writing visual (n_images, M, E). Image t reads image t−1's block inputs from
 * `states` when non-NULL (a run kept fixed; the result owns it, and frees it on failure too),
 * else from this run. */
ClTrainEnc *cl_train_enc_forward(ClBackend *be, const ClModel *model, const ClModelWeights *w,
                                 const float *pixels, int n_images, ClTrainEnc *states,
                                 float *visual, GError **error);
/* g += the gradients for d loss / d visual = dvisual (n_images, M, E). */
void cl_train_enc_backward(ClTrainEnc *enc, const ClModelWeights *w, const float *dvisual,
                           gboolean stop_grad, ClModelWeights *g);
void cl_train_enc_free(ClTrainEnc *enc);

/* The decoder's saved activations over one whole sequence (no cache). */
typedef struct _ClTrainDec ClTrainDec;
/* ids as cl_decoder_forward takes them (checked by the caller). logits (n_rows, V) for the
 * positions rows[0 .. n_rows) (ascending), or for every position (n, V) when rows is NULL: the
 * loss only needs the supervised positions, and the LM head over a 4k-32k vocabulary is the
 * largest product of a step when it runs on all of them. */
ClTrainDec *cl_train_dec_forward(ClBackend *be, const ClModel *model, const gint32 *ids, int n,
                                 const float *visual, const int *rows, int n_rows, float *logits,
                                 GError **error);
/* g += gradients for dlogits (the forward's logit rows); dvisual (rows in visual order) is SET. */
void cl_train_dec_backward(ClTrainDec *dec, const ClModelWeights *w, const float *dlogits,
                           float *dvisual, ClModelWeights *g);
void cl_train_dec_free(ClTrainDec *dec);

G_END_DECLS
