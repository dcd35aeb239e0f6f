/* devicestep.h - a training run's state in a backend's memory (a GPU's): the parameters, their
 * gradients and AdamW moments, and the auxiliary heads', mirrored from the host's, so that each
 * sample's forward and backward (trainmodel.h) and the update run there, and the host's copies
 * are brought back only for checkpoints and the finished model. The arithmetic is the CPU
 * trainer's (parallel.c's reduction, optim.h's clip and AdamW), op for op through the backend's
 * training ops (nn/backend.h). */
#pragma once

#include <glib.h>

#include "nn/backend.h"
#include "train/optim.h"
#include "train/trainmodel.h"

G_BEGIN_DECLS

typedef struct _ClTrainDevice ClTrainDevice;

/* Uploads model's parameters (trainable: cl_model_make_trainable), opt's moments, and the heads
 * and aux_opt's moments (both may be NULL) into be's memory (a reference is taken). NULL + error
 * when be cannot train (no training ops) or its memory is short. */
ClTrainDevice *cl_train_device_new(ClBackend *be, const ClModel *model, const ClAdamW *opt,
                                   const ClTrainAuxHeads *heads, const ClAdamW *aux_opt,
                                   GError **error);
void cl_train_device_free(ClTrainDevice *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClTrainDevice, cl_train_device_free)

ClBackend *cl_train_device_backend(ClTrainDevice *d);

/* The gradients to zero (a step's start). */
void cl_train_device_zero_grads(ClTrainDevice *d);
/* One sample's forward and backward on the device: its gradients added to the device's (o's
 * aux_heads are replaced by the device's heads). As cl_train_forward_backward_aux. */
gboolean cl_train_device_sample(ClTrainDevice *d, const ClTrainSample *s,
                                const ClTrainGradOptions *o, ClTrainStepStats *st, GError **error);
/* The step's update, as the CPU trainer's: the gradients of `frozen` spans (may be NULL) zeroed,
 * the sum divided by `batch`, the global norm into *norm (pre-clip), clipped to `clip` (> 0)
 * and AdamW at lr (opt's step advanced, its spans' decay); the heads (when there are) by their
 * own norm and aux_opt. A non-finite gradient: FALSE + CL_OPTIM_ERROR_NONFINITE and nothing
 * changes (parameters, moments, the step counts). */
gboolean cl_train_device_update(ClTrainDevice *d, ClAdamW *opt, ClAdamW *aux_opt,
                                const GArray *frozen, int batch, double lr, double clip,
                                double *norm, GError **error);
/* Downloads the parameters into model's (trainable) arena, the moments into opt's and
 * aux_opt's, the heads into heads (any but model may be NULL). FALSE + error when an op on the
 * device failed since the last check. */
gboolean cl_train_device_sync(ClTrainDevice *d, ClModel *model, ClAdamW *opt,
                              ClTrainAuxHeads *heads, ClAdamW *aux_opt, GError **error);

G_END_DECLS
