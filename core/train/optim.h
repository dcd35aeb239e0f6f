/* optim.h - AdamW (as torch.optim.AdamW), its weight-decay mask, the warmup + cosine learning
 * rate schedule, gradient clipping by global norm and gradient accumulation, over flat float
 * arrays (a ClParamBuf's data, or model->arena after cl_model_make_trainable). */
#pragma once

#include <glib.h>

#include "model/config.h"

G_BEGIN_DECLS

#define CL_OPTIM_ERROR (cl_optim_error_quark())
GQuark cl_optim_error_quark(void);
typedef enum {
    CL_OPTIM_ERROR_NONFINITE, /* a gradient is NaN or infinite: the step was skipped */
    CL_OPTIM_ERROR_INPUT,     /* bad options (negative lr, beta outside [0, 1), ...) */
    CL_OPTIM_ERROR_NO_MEMORY,
} ClOptimError;

/* torch.optim.AdamW's hyperparameters (the learning rate comes per step, from the schedule). */
typedef struct {
    double beta1, beta2; /* 0.9, 0.999 */
    double eps;          /* 1e-8 */
    double weight_decay; /* 0.01 (torch's default); applied only where the mask says */
} ClAdamWOptions;

/* torch's defaults: betas (0.9, 0.999), eps 1e-8, weight_decay 1e-2. */
void cl_adamw_options_init(ClAdamWOptions *o);
/* Every value finite, betas in [0, 1), eps > 0, weight_decay >= 0. */
gboolean cl_adamw_options_validate(const ClAdamWOptions *o, GError **error);

/* A contiguous range of parameters [begin, end) and whether weight decay applies to it. */
typedef struct {
    size_t begin, end;
    gboolean decay;
} ClOptimSpan;

/* AdamW state for n parameters. m and v are the first and second moments (torch's exp_avg and
 * exp_avg_sq), in the same flat order as the parameters; `step` counts the updates taken
 * (torch's state['step']: bias correction uses it). */
typedef struct {
    ClAdamWOptions opt;
    size_t n;
    float *m, *v; /* (n) owned */
    gint64 step;
    ClOptimSpan *spans; /* owned; cover [0, n) in order; without spans everything decays */
    guint n_spans;
} ClAdamW;

/* Zeroed moments, step 0, everything decays (as a single torch parameter group). NULL +
 * CL_OPTIM_ERROR_NO_MEMORY / _INPUT on failure. */
ClAdamW *cl_adamw_new(size_t n, const ClAdamWOptions *opt, GError **error);
/* For a model config: n = cl_model_n_params(cfg) and the mask of cl_optim_decay_spans(). */
ClAdamW *cl_adamw_new_for_config(const ClModelConfig *cfg, const ClAdamWOptions *opt,
                                 GError **error);
void cl_adamw_free(ClAdamW *a);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClAdamW, cl_adamw_free)
/* Copies `spans` (they must cover [0, a->n) in order, without gaps); FALSE + _INPUT otherwise. */
gboolean cl_adamw_set_spans(ClAdamW *a, const ClOptimSpan *spans, guint n_spans, GError **error);
/* Moments to zero and step to 0 (a fresh optimiser, the mask kept). */
void cl_adamw_reset(ClAdamW *a);

/* The weight-decay rule, one span per tensor in cl_param_specs() order: decay applies to
 * tensors of 2 or more dimensions (linear weights, the patch embedding, the token embedding
 * and lm_head, as nanoGPT and most LLM trainers do) but not to vectors (biases, LayerNorm and
 * RMSNorm weights) nor to the SVE learned null state "enc.N.sve.null" (stored (1, D): an
 * embedding of the first image's missing predecessor, not a matrix). Returns the spans (caller
 * g_free()s) and their count in *n_spans. */
ClOptimSpan *cl_optim_decay_spans(const ClModelConfig *cfg, guint *n_spans);
/* Whether the tensor named `name` with `ndim` dimensions decays under that rule. */
gboolean cl_optim_tensor_decays(const char *name, int ndim);

/* One AdamW update of params (n) with grads (n) at learning rate `lr`, exactly
 * torch.optim.AdamW's algorithm (amsgrad off, maximize off):
 *   t += 1
 *   p *= 1 - lr * wd                      (decaying spans only)
 *   m += (1 - b1) * (g - m)               (torch: exp_avg.lerp_(g, 1 - b1))
 *   v  = b2 * v + (1 - b2) * g * g
 *   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 * with the per-step scalars in double and the per-element arithmetic in float, as torch's CPU
 * kernels do (results agree to a few ulps: torch may fuse multiply-adds). Does not look at the
 * gradients' finiteness: use cl_optim_step() or cl_grad_clip() first. */
void cl_adamw_update(ClAdamW *a, float *params, const float *grads, double lr);
/* The same update in pieces, for threads: cl_adamw_next_step() advances t once, then
 * cl_adamw_update_range() on disjoint [begin, end) ranges (any order, any thread) updates those
 * elements at that t with every gradient multiplied by gscale first (as cl_grad_scale would:
 * gscale = 1 changes nothing). The pieces together equal cl_adamw_update on grads · gscale. */
void cl_adamw_next_step(ClAdamW *a);
/* The per-step scalars cl_adamw_update_range computes at a's step and lr (computed in double,
 * rounded to float), for an update that runs elsewhere (a device's AdamW op). */
typedef struct {
    float decay, w1, b2, w2, bc2_sqrt, eps, step_size;
} ClAdamWScalars;
void cl_adamw_scalars(const ClAdamW *a, double lr, ClAdamWScalars *out);
void cl_adamw_update_range(const ClAdamW *a, float *params, const float *grads, double lr,
                           float gscale, size_t begin, size_t end);

/* ---- gradients ------------------------------------------------------------------------------ */

/* Global L2 norm of grads (n), accumulated in double; NaN when any value is NaN, +inf when one
 * is infinite (or the sum overflows double, which needs values past 1e150: not float). */
double cl_grad_norm(const float *grads, size_t n);
/* Clips by global norm: computes the norm into *norm (pre-clip; may be NULL) and, when it
 * exceeds max_norm > 0, scales every gradient by max_norm / norm so the new norm is max_norm
 * (to float rounding; torch divides by norm + 1e-6 instead, a relative 1e-6 below). max_norm
 * <= 0: measure only. A NaN/inf gradient: FALSE + CL_OPTIM_ERROR_NONFINITE naming the first
 * bad index, grads untouched. */
gboolean cl_grad_clip(float *grads, size_t n, double max_norm, double *norm, GError **error);
/* cl_grad_clip's check on its own: TRUE when norm (of grads) is finite, else FALSE and its
 * CL_OPTIM_ERROR_NONFINITE naming the first bad index. */
gboolean cl_grad_check_norm(const float *grads, size_t n, double norm, GError **error);
/* The sum of squares of grads[begin, end) as cl_grad_norm accumulates it (its square when the
 * range is the whole vector). */
double cl_grad_sumsq(const float *grads, size_t begin, size_t end);
/* grads *= s. For accumulation: the backward passes of k micro-batches add into one buffer
 * (each micro-batch loss a mean over its samples), then cl_grad_scale(g, n, 1.0 / k) gives the
 * mean over all samples when the micro-batches are the same size. */
void cl_grad_scale(float *grads, size_t n, double s);
/* acc += g: for backward passes that write (not add) their gradients. */
void cl_grad_accumulate(float *acc, const float *g, size_t n);

/* The trainer's step: clip (cl_grad_clip with max_norm) then cl_adamw_update at lr. On a
 * non-finite gradient: FALSE + CL_OPTIM_ERROR_NONFINITE and nothing changes (params, moments,
 * step), so the caller may log it, zero the gradients and go on with the next batch. *norm
 * (may be NULL) receives the pre-clip norm either way. */
gboolean cl_optim_step(ClAdamW *a, float *params, float *grads, double lr, double max_norm,
                       double *norm, GError **error);

/* ---- learning-rate schedule ----------------------------------------------------------------- */

/* Linear warmup then cosine decay to min_lr, the schedule of HF transformers'
 * get_cosine_with_min_lr_schedule_with_warmup (the paper's LlamaFactory runs use it). For the
 * update number s = 0, 1, ..., total - 1 (the step counter before the update), W = warmup:
 *   s <  W:        lr = max_lr * s / W                       (lr(0) = 0 when W > 0)
 *   W <= s <= T:   p = (s - W) / (T - W)   (p = 1 when T <= W)
 *                  lr = min_lr + (max_lr - min_lr) * 0.5 * (1 + cos(pi * p))
 *   s >  T:        lr = min_lr
 * So lr(W) = max_lr, lr((W + T) / 2) = (max_lr + min_lr) / 2, lr(T) = min_lr; non-decreasing on
 * [0, W], non-increasing on [W, T]. Negative s reads as 0. */
typedef struct {
    double max_lr, min_lr;
    gint64 warmup, total;
} ClLrSchedule;

double cl_lr_schedule_at(const ClLrSchedule *s, gint64 step);
/* 0 <= min_lr <= max_lr, finite, 0 <= warmup, 0 < total. */
gboolean cl_lr_schedule_validate(const ClLrSchedule *s, GError **error);

G_END_DECLS
