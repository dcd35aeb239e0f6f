/* devicestep.c - a training run's state in a backend's memory (devicestep.h). */
#include "train/devicestep.h"

#include <math.h>
#include <string.h>

#include "train/params.h"

/* A ClAdamW's moments in the backend's memory. */
typedef struct {
    float *m, *v;
} Moments;

struct _ClTrainDevice {
    ClBackend *be;
    ClModel view;       /* the model's config and tensors, its weights the device's */
    ClParamBuf *params; /* views over p (device memory, not owned by the views) */
    ClParamBuf *grads;  /* views over g */
    float *p, *g;
    size_t n;
    Moments mo;
    /* the auxiliary heads (NULL when the losses are off): views of the device's copies */
    ClTrainAuxHeads heads, head_grads;
    float *hp, *hg;
    Moments hmo;
};

ClBackend *cl_train_device_backend(ClTrainDevice *d)
{
    return d->be;
}

static void release(ClBackend *be, float **p)
{
    if (*p)
        be->ops->release(be, *p);
    *p = NULL;
}

void cl_train_device_free(ClTrainDevice *d)
{
    if (!d)
        return;
    ClBackend *be = d->be;
    float **bufs[] = { &d->p, &d->g, &d->mo.m, &d->mo.v, &d->hp, &d->hg, &d->hmo.m, &d->hmo.v };
    for (size_t i = 0; i < G_N_ELEMENTS(bufs); i++)
        release(be, bufs[i]);
    cl_param_buf_free(d->params);
    cl_param_buf_free(d->grads);
    cl_backend_free(be);
    g_free(d);
}

/* n floats of the backend's memory, with `host`'s values (NULL: zeros); FALSE when short. */
static gboolean put(ClBackend *be, float **dst, const float *host, size_t n)
{
    *dst = be->ops->alloc(be, MAX(n, 1) * sizeof(float));
    if (!*dst)
        return FALSE;
    if (host)
        be->ops->upload(be, *dst, host, n * sizeof(float));
    else
        be->ops->zero(be, *dst, n * sizeof(float));
    return TRUE;
}

/* The heads' four tensors as views over data (cl_train_aux_heads_new's layout). */
static void head_views(ClTrainAuxHeads *h, int dim, size_t n, float *data)
{
    h->dim = dim, h->n = n, h->data = data;
    h->objects_w = data;
    h->objects_b = h->objects_w + cl_train_aux_head_len(dim, 0);
    h->changed_w = h->objects_b + cl_train_aux_head_len(dim, 1);
    h->changed_b = h->changed_w + dim;
}

ClTrainDevice *cl_train_device_new(ClBackend *be, const ClModel *model, const ClAdamW *opt,
                                   const ClTrainAuxHeads *heads, const ClAdamW *aux_opt,
                                   GError **error)
{
    g_return_val_if_fail(be != NULL && model != NULL && model->arena != NULL, NULL);
    if (!be->ops->train) {
        g_set_error(error, CL_BACKEND_ERROR, CL_BACKEND_ERROR_NO_DEVICE,
                    "The %s backend cannot train (it has no training ops)", be->ops->name);
        return NULL;
    }
    ClTrainDevice *d = g_new0(ClTrainDevice, 1);
    d->be = cl_backend_ref(be);
    d->n = model->n_params;
    gboolean ok = put(be, &d->p, model->arena, d->n) && put(be, &d->g, NULL, d->n) &&
                  put(be, &d->mo.m, opt ? opt->m : NULL, d->n) &&
                  put(be, &d->mo.v, opt ? opt->v : NULL, d->n);
    if (ok && heads) {
        ok = put(be, &d->hp, heads->data, heads->n) && put(be, &d->hg, NULL, heads->n) &&
             put(be, &d->hmo.m, aux_opt ? aux_opt->m : NULL, heads->n) &&
             put(be, &d->hmo.v, aux_opt ? aux_opt->v : NULL, heads->n);
        if (ok) {
            head_views(&d->heads, heads->dim, heads->n, d->hp);
            head_views(&d->head_grads, heads->dim, heads->n, d->hg);
        }
    }
    if (!ok) {
        g_set_error(error, CL_BACKEND_ERROR, CL_BACKEND_ERROR_DEVICE,
                    "Not enough %s memory for the training state (%zu parameters, %.0f MB with "
                    "their gradients and moments)",
                    be->ops->name, d->n, d->n * 16.0 / 1048576.0);
        cl_train_device_free(d);
        return NULL;
    }
    d->params = cl_param_buf_new_view(&model->config, d->p);
    d->grads = cl_param_buf_new_view(&model->config, d->g);
    g_assert(d->params->n == d->n);
    d->view = *model;
    d->view.w = d->params->w;
    if (!be->ops->finish(be, error)) {
        cl_train_device_free(d);
        return NULL;
    }
    return d;
}

void cl_train_device_zero_grads(ClTrainDevice *d)
{
    d->be->ops->zero(d->be, d->g, d->n * sizeof(float));
    if (d->hg)
        d->be->ops->zero(d->be, d->hg, d->heads.n * sizeof(float));
}

gboolean cl_train_device_sample(ClTrainDevice *d, const ClTrainSample *s,
                                const ClTrainGradOptions *o, ClTrainStepStats *st, GError **error)
{
    ClTrainGradOptions od = *o;
    od.aux_heads = d->hp ? &d->heads : NULL;
    if (!cl_train_forward_backward_aux(d->be, &d->view, s, &od, d->grads,
                                       d->hg ? &d->head_grads : NULL, st, error))
        return FALSE;
    return d->be->ops->finish(d->be, error);
}

/* AdamW over n elements at p, g, mo (a's spans, at a's current step), gradients × gscale. */
static void adamw(ClBackend *be, const ClAdamW *a, float *p, float *g, const Moments *mo, size_t n,
                  double lr, float gscale)
{
    ClAdamWScalars k;
    cl_adamw_scalars(a, lr, &k);
    const struct cl_backend_train_ops *T = be->ops->train;
    if (!a->n_spans) {
        T->adamw(be, p, mo->m, mo->v, g, n, k.decay, k.w1, k.b2, k.w2, k.bc2_sqrt, k.eps,
                 k.step_size, gscale);
        return;
    }
    for (guint s = 0; s < a->n_spans; s++) {
        const size_t b = a->spans[s].begin, e = MIN(a->spans[s].end, n);
        if (b < e)
            T->adamw(be, p + b, mo->m + b, mo->v + b, g + b, e - b,
                     a->spans[s].decay ? k.decay : 1.0f, k.w1, k.b2, k.w2, k.bc2_sqrt, k.eps,
                     k.step_size, gscale);
    }
}

gboolean cl_train_device_update(ClTrainDevice *d, ClAdamW *opt, ClAdamW *aux_opt,
                                const GArray *frozen, int batch, double lr, double clip,
                                double *norm, GError **error)
{
    ClBackend *be = d->be;
    const struct cl_backend_train_ops *T = be->ops->train;
    for (guint f = 0; frozen && f < frozen->len; f++) { /* --train-only */
        const ClOptimSpan *sp = &g_array_index(frozen, ClOptimSpan, f);
        be->ops->zero(be, d->g + sp->begin, (sp->end - sp->begin) * sizeof(float));
    }
    /* the batch's mean, and its norm (parallel.c's reduction on one worker) */
    T->scale(be, d->g, (float)(1.0 / batch), d->n);
    const double total = sqrt(T->sumsq(be, d->g, d->n));
    *norm = total;
    double head_norm = 0;
    if (d->hg) {
        T->scale(be, d->hg, (float)(1.0 / batch), d->heads.n);
        head_norm = sqrt(T->sumsq(be, d->hg, d->heads.n));
    }
    if (!be->ops->finish(be, error))
        return FALSE;
    if (!isfinite(head_norm) || !isfinite(total)) {
        g_set_error(error, CL_OPTIM_ERROR, CL_OPTIM_ERROR_NONFINITE,
                    "%s gradient is not finite: step skipped (lower the learning rate, or look "
                    "for a bad sample)",
                    isfinite(total) ? "an auxiliary head's" : "the model's");
        return FALSE;
    }
    /* clip by the global norm, folded into the update (cl_optim_step's arithmetic) */
    cl_adamw_next_step(opt);
    adamw(be, opt, d->p, d->g, &d->mo, d->n, lr,
          clip > 0 && total > clip ? (float)(clip / total) : 1.0f);
    if (d->hg && aux_opt) { /* the heads by their own norm (cl_optim_step) */
        if (clip > 0 && head_norm > clip)
            T->scale(be, d->hg, (float)(clip / head_norm), d->heads.n);
        cl_adamw_next_step(aux_opt);
        adamw(be, aux_opt, d->hp, d->hg, &d->hmo, d->heads.n, lr, 1.0f);
    }
    return be->ops->finish(be, error);
}

gboolean cl_train_device_sync(ClTrainDevice *d, ClModel *model, ClAdamW *opt,
                              ClTrainAuxHeads *heads, ClAdamW *aux_opt, GError **error)
{
    ClBackend *be = d->be;
    g_return_val_if_fail(model != NULL && model->arena != NULL && model->n_params == d->n, FALSE);
    const size_t bytes = d->n * sizeof(float);
    be->ops->download(be, model->arena, d->p, bytes);
    if (opt) {
        be->ops->download(be, opt->m, d->mo.m, bytes);
        be->ops->download(be, opt->v, d->mo.v, bytes);
    }
    if (d->hp) {
        const size_t hb = d->heads.n * sizeof(float);
        if (heads)
            be->ops->download(be, heads->data, d->hp, hb);
        if (aux_opt) {
            be->ops->download(be, aux_opt->m, d->hmo.m, hb);
            be->ops->download(be, aux_opt->v, d->hmo.v, hb);
        }
    }
    return be->ops->finish(be, error);
}
