/* optim.c - AdamW as torch.optim.AdamW, the decay mask, warmup + cosine schedule, clipping and
 * accumulation (optim.h). The update is memory-bound (5 streams of n floats): a plain loop the
 * compiler vectorises; threads would not help on a machine whose bandwidth one core saturates. */
#include "train/optim.h"

#include <math.h>
#include <string.h>

#include "nn/grad.h"
#include "train/params.h"

G_DEFINE_QUARK(cl - optim - error - quark, cl_optim_error)

#define OPTIM_FAIL(code, ...) g_set_error(error, CL_OPTIM_ERROR, code, __VA_ARGS__)

void cl_adamw_options_init(ClAdamWOptions *o)
{
    g_return_if_fail(o != NULL);
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->weight_decay = 1e-2;
}

gboolean cl_adamw_options_validate(const ClAdamWOptions *o, GError **error)
{
    g_return_val_if_fail(o != NULL, FALSE);
    if (!isfinite(o->beta1) || o->beta1 < 0 || o->beta1 >= 1 || !isfinite(o->beta2) ||
        o->beta2 < 0 || o->beta2 >= 1) {
        OPTIM_FAIL(CL_OPTIM_ERROR_INPUT, "AdamW betas (%g, %g) must lie in [0, 1)", o->beta1,
                   o->beta2);
        return FALSE;
    }
    if (!isfinite(o->eps) || o->eps <= 0) {
        OPTIM_FAIL(CL_OPTIM_ERROR_INPUT, "AdamW eps (%g) must be positive", o->eps);
        return FALSE;
    }
    if (!isfinite(o->weight_decay) || o->weight_decay < 0) {
        OPTIM_FAIL(CL_OPTIM_ERROR_INPUT, "AdamW weight_decay (%g) must be 0 or more",
                   o->weight_decay);
        return FALSE;
    }
    return TRUE;
}

ClAdamW *cl_adamw_new(size_t n, const ClAdamWOptions *opt, GError **error)
{
    ClAdamWOptions defaults;
    if (!opt) {
        cl_adamw_options_init(&defaults);
        opt = &defaults;
    }
    if (!cl_adamw_options_validate(opt, error))
        return NULL;
    float *m = g_try_malloc0_n(MAX(n, 1), sizeof(float));
    float *v = m ? g_try_malloc0_n(MAX(n, 1), sizeof(float)) : NULL;
    if (!v) {
        g_free(m);
        OPTIM_FAIL(CL_OPTIM_ERROR_NO_MEMORY,
                   "out of memory for the AdamW moments of %zu parameters (%.0f MB)", n,
                   n * 8.0 / 1048576.0);
        return NULL;
    }
    ClAdamW *a = g_new0(ClAdamW, 1);
    a->opt = *opt;
    a->n = n;
    a->m = m;
    a->v = v;
    return a;
}

ClAdamW *cl_adamw_new_for_config(const ClModelConfig *cfg, const ClAdamWOptions *opt,
                                 GError **error)
{
    g_return_val_if_fail(cfg != NULL, NULL);
    g_autoptr(ClAdamW) a = cl_adamw_new(cl_model_n_params(cfg), opt, error);
    if (!a)
        return NULL;
    guint n_spans = 0;
    g_autofree ClOptimSpan *spans = cl_optim_decay_spans(cfg, &n_spans);
    if (!cl_adamw_set_spans(a, spans, n_spans, error))
        return NULL;
    return g_steal_pointer(&a);
}

void cl_adamw_free(ClAdamW *a)
{
    if (!a)
        return;
    g_free(a->m);
    g_free(a->v);
    g_free(a->spans);
    g_free(a);
}

gboolean cl_adamw_set_spans(ClAdamW *a, const ClOptimSpan *spans, guint n_spans, GError **error)
{
    g_return_val_if_fail(a != NULL && (spans != NULL || n_spans == 0), FALSE);
    size_t at = 0;
    for (guint i = 0; i < n_spans; i++) {
        if (spans[i].begin != at || spans[i].end < spans[i].begin) {
            OPTIM_FAIL(CL_OPTIM_ERROR_INPUT,
                       "weight-decay span %u [%zu, %zu) does not follow the previous one (at %zu)",
                       i, spans[i].begin, spans[i].end, at);
            return FALSE;
        }
        at = spans[i].end;
    }
    if (n_spans && at != a->n) {
        OPTIM_FAIL(CL_OPTIM_ERROR_INPUT,
                   "weight-decay spans cover %zu parameters, the optimiser has %zu", at, a->n);
        return FALSE;
    }
    g_free(a->spans);
    a->spans = n_spans ? g_memdup2(spans, n_spans * sizeof(ClOptimSpan)) : NULL;
    a->n_spans = n_spans;
    return TRUE;
}

void cl_adamw_reset(ClAdamW *a)
{
    g_return_if_fail(a != NULL);
    memset(a->m, 0, a->n * sizeof(float));
    memset(a->v, 0, a->n * sizeof(float));
    a->step = 0;
}

gboolean cl_optim_tensor_decays(const char *name, int ndim)
{
    g_return_val_if_fail(name != NULL, FALSE);
    if (ndim < 2)
        return FALSE;
    /* the null state is an embedding of "no predecessor", shaped (1, D) only for broadcasting */
    return !g_str_has_suffix(name, ".sve.null");
}

ClOptimSpan *cl_optim_decay_spans(const ClModelConfig *cfg, guint *n_spans)
{
    g_return_val_if_fail(cfg != NULL && n_spans != NULL, NULL);
    g_autofree size_t *offsets = NULL;
    g_autoptr(GPtrArray) specs = cl_param_specs(cfg, &offsets);
    ClOptimSpan *spans = g_new(ClOptimSpan, MAX(specs->len, 1));
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        spans[i] =
            (ClOptimSpan){ offsets[i], offsets[i + 1], cl_optim_tensor_decays(s->name, s->ndim) };
    }
    *n_spans = specs->len;
    return spans;
}

void cl_adamw_next_step(ClAdamW *a)
{
    g_return_if_fail(a != NULL);
    a->step++;
}

void cl_adamw_scalars(const ClAdamW *a, double lr, ClAdamWScalars *out)
{
    const ClAdamWOptions *o = &a->opt;
    double t = (double)a->step;
    double bc1 = 1.0 - pow(o->beta1, t);
    double bc2 = 1.0 - pow(o->beta2, t);
    out->w1 = (float)(1.0 - o->beta1);
    out->b2 = (float)o->beta2;
    out->w2 = (float)(1.0 - o->beta2);
    out->bc2_sqrt = (float)sqrt(bc2);
    out->eps = (float)o->eps;
    out->step_size = (float)(-(lr / bc1));
    out->decay = (float)(1.0 - lr * o->weight_decay);
}

void cl_adamw_update_range(const ClAdamW *a, float *params, const float *grads, double lr,
                           float gscale, size_t begin, size_t end)
{
    g_return_if_fail(a != NULL && a->step > 0 && begin <= end && end <= a->n);
    if (begin == end)
        return;
    ClAdamWScalars k;
    cl_adamw_scalars(a, lr, &k);
    if (!a->n_spans) {
        cl_adamw_elements(params, a->m, a->v, grads, begin, end, k.decay, k.w1, k.b2, k.w2,
                          k.bc2_sqrt, k.eps, k.step_size, gscale);
        return;
    }
    for (guint s = 0; s < a->n_spans; s++) {
        size_t b = MAX(begin, a->spans[s].begin), e = MIN(end, a->spans[s].end);
        if (b < e)
            cl_adamw_elements(params, a->m, a->v, grads, b, e, a->spans[s].decay ? k.decay : 1.0f,
                              k.w1, k.b2, k.w2, k.bc2_sqrt, k.eps, k.step_size, gscale);
    }
}

void cl_adamw_update(ClAdamW *a, float *params, const float *grads, double lr)
{
    g_return_if_fail(a != NULL && (a->n == 0 || (params != NULL && grads != NULL)));
    cl_adamw_next_step(a);
    cl_adamw_update_range(a, params, grads, lr, 1.0f, 0, a->n);
}

/* ---- gradients ------------------------------------------------------------------------------ */

double cl_grad_sumsq(const float *grads, size_t begin, size_t end)
{
    g_return_val_if_fail(grads != NULL || begin >= end, NAN);
    return cl_sumsq(grads, begin, end);
}

double cl_grad_norm(const float *grads, size_t n)
{
    g_return_val_if_fail(grads != NULL || n == 0, NAN);
    return sqrt(cl_grad_sumsq(grads, 0, n));
}

gboolean cl_grad_check_norm(const float *grads, size_t n, double norm, GError **error)
{
    if (isfinite(norm))
        return TRUE;
    size_t bad = 0;
    while (bad < n && isfinite(grads[bad]))
        bad++;
    if (bad < n)
        OPTIM_FAIL(CL_OPTIM_ERROR_NONFINITE,
                   "gradient %zu of %zu is %s: step skipped (lower the learning rate, or look "
                   "for a bad sample)",
                   bad, n, isnan(grads[bad]) ? "NaN" : "infinite");
    else
        OPTIM_FAIL(CL_OPTIM_ERROR_NONFINITE, "the gradient norm overflows: step skipped");
    return FALSE;
}

gboolean cl_grad_clip(float *grads, size_t n, double max_norm, double *norm, GError **error)
{
    g_return_val_if_fail(grads != NULL || n == 0, FALSE);
    double total = cl_grad_norm(grads, n);
    if (norm)
        *norm = total;
    if (!cl_grad_check_norm(grads, n, total, error))
        return FALSE;
    if (max_norm > 0 && total > max_norm)
        cl_grad_scale(grads, n, max_norm / total);
    return TRUE;
}

void cl_grad_scale(float *grads, size_t n, double s)
{
    g_return_if_fail(grads != NULL || n == 0);
    float f = (float)s;
    for (size_t i = 0; i < n; i++)
        grads[i] *= f;
}

void cl_grad_accumulate(float *acc, const float *g, size_t n)
{
    g_return_if_fail((acc != NULL && g != NULL) || n == 0);
    for (size_t i = 0; i < n; i++)
        acc[i] += g[i];
}

gboolean cl_optim_step(ClAdamW *a, float *params, float *grads, double lr, double max_norm,
                       double *norm, GError **error)
{
    g_return_val_if_fail(a != NULL, FALSE);
    if (!isfinite(lr) || lr < 0) {
        OPTIM_FAIL(CL_OPTIM_ERROR_INPUT, "learning rate %g must be finite and 0 or more", lr);
        return FALSE;
    }
    if (!cl_grad_clip(grads, a->n, max_norm, norm, error))
        return FALSE;
    cl_adamw_update(a, params, grads, lr);
    return TRUE;
}

/* ---- learning-rate schedule ----------------------------------------------------------------- */

double cl_lr_schedule_at(const ClLrSchedule *s, gint64 step)
{
    g_return_val_if_fail(s != NULL, 0);
    if (step < 0)
        step = 0;
    if (step < s->warmup)
        return s->max_lr * (double)step / (double)s->warmup;
    if (step > s->total)
        return s->min_lr;
    double p =
        s->total > s->warmup ? (double)(step - s->warmup) / (double)(s->total - s->warmup) : 1.0;
    return s->min_lr + (s->max_lr - s->min_lr) * 0.5 * (1.0 + cos(G_PI * p));
}

gboolean cl_lr_schedule_validate(const ClLrSchedule *s, GError **error)
{
    g_return_val_if_fail(s != NULL, FALSE);
    if (!isfinite(s->max_lr) || !isfinite(s->min_lr) || s->min_lr < 0 || s->min_lr > s->max_lr) {
        OPTIM_FAIL(CL_OPTIM_ERROR_INPUT, "learning rates must satisfy 0 <= min_lr (%g) <= lr (%g)",
                   s->min_lr, s->max_lr);
        return FALSE;
    }
    if (s->total <= 0 || s->warmup < 0 || s->warmup > s->total) {
        OPTIM_FAIL(CL_OPTIM_ERROR_INPUT,
                   "schedule needs 0 <= warmup (%" G_GINT64_FORMAT
                   ") <= total steps (%" G_GINT64_FORMAT ") and total > 0",
                   s->warmup, s->total);
        return FALSE;
    }
    return TRUE;
}
