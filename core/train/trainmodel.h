/* trainmodel.h - the whole model's training forward and backward pass over one sample: the SVE
 * encoder over the sample's image sequence, the 2×2 merger, the decoder over the expanded ids,
 * and the masked next-token cross-entropy (docs/MODEL.md §3-4, docs/DESIGN.md §5).
 *
 * The training forward runs the backend's own ops in the inference order, so its logits and
 * visual tokens are those of cl_encoder_forward / cl_decoder_forward; it keeps the activations
 * the backward needs (per image, per block; attention probabilities are recomputed one head at
 * a time). The backward runs through the backend's training ops (nn/backend.h's struct
 * cl_backend_train_ops; on the CPU nn/grad.h's passes), in the backend's memory: the model's
 * weights, the gradients and the auxiliary heads given here must be in it (train/devicestep.h
 * keeps a run's there); the sample is host memory. */
#pragma once

#include <glib.h>

#include "nn/backend.h"
#include "model/model.h"
#include "train/params.h"
#include "train/sample.h"

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
    /* The dense auxiliary losses (docs/DESIGN.md §5), training-only heads on the encoder's final
     * patch tokens (ClTrainAuxHeads): weight · mean sigmoid BCE per patch token of
     *   objects: every image, target aux_objects != 0 (the patch overlaps an object), and
     *            when the sample has aux_labels, one more BCE term per attribute label
     *            (aux_labels bit j: an object on the patch has label j), summed per token;
     *   changed: every image t >= 1, target aux_changed (the patch changed from t − 1).
     * 0 (the default) switches a loss off; its gradient reaches the encoder where the
     * merger's does (the last block's output), stop_grad as above. A sample without targets
     * (NULL) skips them. aux_heads: the heads' parameters, needed when a weight is > 0. */
    double aux_objects_weight;
    double aux_changed_weight;
    /* TRUE: the heads read the visual tokens (the merger's output, width dec_dim) against the
     * targets pooled 2 × 2 (a visual token has a label when any of its patches has), and their
     * gradient joins the decoder's; FALSE (default): the encoder's patch tokens. */
    gboolean aux_on_visual;
    const struct _ClTrainAuxHeads *aux_heads;
} ClTrainGradOptions;

/* stop_grad TRUE, nothing else. */
void cl_train_grad_options_init(ClTrainGradOptions *o);

/* The auxiliary losses' heads: linear maps from a final patch token (D = enc_dim) to logits:
 * objects D → 1 + CL_TRAIN_AUX_N_LABELS (logit 0 "an object", logit 1 + j "label j"), changed
 * D → 1. Training-only: not part of the model file (the trainer checkpoints them beside the
 * model as "aux.objects.weight" ...). Zero-initialised (weights and biases): the first steps
 * then send no gradient into the encoder (d token = d logit · w = 0) and the heads learn a
 * linear read-out of the tokens first; a logit of 0 is the uninformed p = 0.5. */
typedef struct _ClTrainAuxHeads {
    int dim;          /* D */
    size_t n;         /* K·D + K + D + 1, K = CL_TRAIN_AUX_N_OBJECT_OUT */
    float *data;      /* (n) owned: the four tensors below, in this order */
    float *objects_w; /* (K, D) row-major */
    float *objects_b; /* (K) */
    float *changed_w; /* (D) */
    float *changed_b; /* (1) */
} ClTrainAuxHeads;

#define CL_TRAIN_AUX_N_OBJECT_OUT (1 + CL_TRAIN_AUX_N_LABELS)

/* Zero-filled heads for tokens of width dim; NULL + CL_MODEL_ERROR_NO_MEMORY. */
ClTrainAuxHeads *cl_train_aux_heads_new(int dim, GError **error);
void cl_train_aux_heads_zero(ClTrainAuxHeads *h);
void cl_train_aux_heads_free(ClTrainAuxHeads *h);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClTrainAuxHeads, cl_train_aux_heads_free)
/* The checkpoint names of the four tensors, in data order ("aux.objects.weight", ...), and
 * their lengths for dim D. */
extern const char *const cl_train_aux_head_names[4];
size_t cl_train_aux_head_len(int dim, int i);

typedef struct {
    double loss;      /* mean masked next-token cross-entropy of the sample (nats) */
    int n_supervised; /* positions it averages over */
    int n_positions;  /* decoder positions run */
    double ms;        /* wall time of the call */
    /* the auxiliary losses (mean BCE, unweighted; NaN when off or the sample has no targets)
     * and the sample's whole loss: loss + the weighted auxiliary terms that ran */
    double aux_objects_loss;
    double aux_changed_loss;
    double total_loss;
} ClTrainStepStats;

/* Forward + backward for one sample: grads += d loss / d params (the loss is the sample's mean
 * over its supervised positions; a batch's caller scales). FALSE + error (grads untouched) on a
 * sample that does not fit the model (image size or channels, visual positions, ids out of
 * range, too long, nothing supervised) or when memory is short. */
gboolean cl_train_forward_backward(ClBackend *be, const ClModel *model, const ClTrainSample *s,
                                   const ClTrainGradOptions *o, ClParamBuf *grads,
                                   ClTrainStepStats *st, GError **error);

/* The same, with the auxiliary heads' gradients: aux_grads (a ClTrainAuxHeads of the heads'
 * dim; may be NULL) += d loss / d heads. cl_train_forward_backward is this with NULL. */
gboolean cl_train_forward_backward_aux(ClBackend *be, const ClModel *model, const ClTrainSample *s,
                                       const ClTrainGradOptions *o, ClParamBuf *grads,
                                       ClTrainAuxHeads *aux_grads, ClTrainStepStats *st,
                                       GError **error);

/* The same forward, loss only (finite differences, evaluation perplexity). o may be NULL. */
gboolean cl_train_loss(ClBackend *be, const ClModel *model, const ClTrainSample *s,
                       const ClTrainGradOptions *o, ClTrainStepStats *st, GError **error);

/* The training forward's outputs, for parity checks against the inference path: *visual
 * (n_images, M, E) and *logits (n_ids, V), newly allocated (either pointer may be NULL). */
gboolean cl_train_forward_outputs(ClBackend *be, const ClModel *model, const ClTrainSample *s,
                                  float **visual, float **logits, GError **error);

/* ---- internal: shared by core/train/trainmodel*.c only ------------------------------------ */

/* Backend memory for the passes (n floats, 64-byte aligned, uninitialised): on the CPU backend a
 * buffer reused sample after sample (cl_act_buffer_take), elsewhere the backend's own; NULL
 * when memory is short. *got: its size for cl_train_give. */
float *cl_train_take(ClBackend *be, size_t n, size_t *got);
void cl_train_give(ClBackend *be, float *p, size_t n);
/* Scratch of the backward passes (n floats; zeroed with cl_train_scratch0): on a device whose
 * memory runs out mid-step the process stops with a message (the forward's activations, the
 * larger part, are checked and refused cleanly before). */
float *cl_train_scratch(ClBackend *be, size_t n);
/* n floats of backend memory, or NULL when memory is short (free with cl_train_scratch_free). */
float *cl_train_try(ClBackend *be, size_t n);
float *cl_train_scratch0(ClBackend *be, size_t n);
void cl_train_scratch_free(ClBackend *be, float *p);
/* p[0, n) = 0 in backend memory. */
void cl_train_zero(ClBackend *be, float *p, size_t n);
/* dst[0, n) = src[0, n), both backend memory. */
void cl_train_copy(ClBackend *be, float *dst, const float *src, size_t n);
/* Host floats into a new backend buffer (free with cl_train_scratch_free). */
float *cl_train_upload(ClBackend *be, const float *host, size_t n);

/* The encoder's saved activations over a sequence of images. */
typedef struct _ClTrainEnc ClTrainEnc;
/* Runs the encoder over n_images images [C, S, S] with the weights `w` (model->config's
 * shapes), writing visual (n_images, M, E). Image t reads image t−1's block inputs from
 * `states` when non-NULL (a run kept fixed; the result owns it, and frees it on failure too),
 * else from this run. */
ClTrainEnc *cl_train_enc_forward(ClBackend *be, const ClModel *model, const ClModelWeights *w,
                                 const float *pixels, int n_images, ClTrainEnc *states,
                                 float *visual, GError **error);
/* Image t's final patch tokens (N, D): the last block's output, the merger's input. */
const float *cl_train_enc_tokens(const ClTrainEnc *enc, int t);
/* g += the gradients for d loss / d visual = dvisual (n_images, M, E) and, when dtokens is not
 * NULL, d loss / d (the final patch tokens) = dtokens (n_images, N, D). */
void cl_train_enc_backward(ClTrainEnc *enc, const ClModelWeights *w, const float *dvisual,
                           const float *dtokens, gboolean stop_grad, ClModelWeights *g);
void cl_train_enc_free(ClTrainEnc *enc);

/* The decoder's saved activations over one whole sequence (no cache); its fields are in
 * model/decoder-train.h, shared with the decoder options' own training forward and backward. */
typedef struct _ClTrainDec ClTrainDec;
/* ids as cl_decoder_forward takes them (checked by the caller). logits (n_rows, V) for the
 * positions rows[0 .. n_rows) (ascending), or for every position (n, V) when rows is NULL: the
 * loss only needs the supervised positions, and the LM head over a 4k-32k vocabulary is the
 * largest product of a step when it runs on all of them. With rows, the last layer runs its
 * attention, projections and MLP from the first listed row on only (it still makes every
 * position's keys and values): an answer at the end of a long sequence spares most of a layer. */
ClTrainDec *cl_train_dec_forward(ClBackend *be, const ClModel *model, const gint32 *ids, int n,
                                 const float *visual, const int *rows, int n_rows, float *logits,
                                 GError **error);
/* g += gradients for dlogits (the forward's logit rows); dvisual (rows in visual order) is SET. */
void cl_train_dec_backward(ClTrainDec *dec, const ClModelWeights *w, const float *dlogits,
                           float *dvisual, ClModelWeights *g);
void cl_train_dec_free(ClTrainDec *dec);
/* The attention of each position in [q0, n) over every position at decoder block `layer` (< 0:
 * counted from the end), averaged over the heads, from the forward's saved queries and keys:
 * out (n - q0, n) row-major, each row a distribution over positions <= its own (0 after it).
 * FALSE for a bad layer or q0. */
gboolean cl_train_dec_attention(const ClTrainDec *dec, int layer, int q0, float *out);

G_END_DECLS
