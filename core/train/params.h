/* params.h - a model's parameters as one flat array, and buffers of the same shape (gradients,
 * Adam moments). Everything in training addresses parameters through these: tensor i of
 * cl_model_weight_specs() order lives at the same offset in the model, its gradient buffer and
 * its optimiser state. */
#pragma once

#include <glib.h>

#include "model/model.h"
#include "model/weights.h"

G_BEGIN_DECLS

/* n floats shaped like the config's parameters; `w` holds views into `data` (spec order, so
 * w.lm_head == w.embed when embeddings are tied: the tied tensor is stored once). */
typedef struct {
    ClModelWeights w;
    float *data;
    size_t n;
    gboolean borrowed; /* data is not the buffer's own (cl_param_buf_new_view) */
} ClParamBuf;

/* Zero-filled; NULL + CL_MODEL_ERROR_NO_MEMORY when there is no room. */
ClParamBuf *cl_param_buf_new(const ClModelConfig *cfg, GError **error);
void cl_param_buf_zero(ClParamBuf *b);
/* Views over `data` (cl_model_n_params(cfg) floats, in any backend's memory: only pointer
 * arithmetic is done on it), not owned: a device's copy of the parameters or gradients. */
ClParamBuf *cl_param_buf_new_view(const ClModelConfig *cfg, float *data);
void cl_param_buf_free(ClParamBuf *b);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClParamBuf, cl_param_buf_free)

/* Makes the model trainable: every parameter in model->arena, contiguous in spec order (F32
 * tensors used in place from a file mapping are copied in), so model->arena[0 .. n_params) is the
 * flat parameter vector aligned with any ClParamBuf of its config. Clears model->sha256 (the
 * weights will change). Idempotent. */
gboolean cl_model_make_trainable(ClModel *model, GError **error);

/* The flat offset of each tensor (spec order): offsets[i] for spec i, and the spec names;
 * for logs, checkpoints and weight-decay masks. Returns the specs (ClWeightSpec*, no slots). */
GPtrArray *cl_param_specs(const ClModelConfig *cfg, size_t **offsets);

G_END_DECLS
