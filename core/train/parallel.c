/* parallel.c - the trainer's data-parallel workers (trainer-private.h): each runs forward and
 * backward passes on its share of a batch on its own thread, backend and gradient buffer; then
 * the buffers are reduced in worker order and the AdamW update runs over both threads. */
#include <math.h>
#include <string.h>

#include "nn/grad.h"
#include "train/devicestep.h"
#include "train/trainer-private.h"

/* Worker w's part of a phase. */
typedef struct {
    ClTrainerStepJob *job;
    ClTrainerWorker *worker;
    int w;
} WorkerCall;

static void make_samples(WorkerCall *c)
{
    ClTrainerStepJob *j = c->job;
    if (c->worker->dev)
        cl_train_device_zero_grads(c->worker->dev);
    else
        cl_param_buf_zero(c->worker->grads);
    if (c->worker->aux_grads && !c->worker->dev)
        cl_train_aux_heads_zero(c->worker->aux_grads);
    for (int k = c->w; k < j->batch; k += j->n_workers) {
        if (g_cancellable_is_cancelled(j->cancellable))
            return;
        ClTrainerSlot *sl = &j->slots[k];
        if (k % j->ranks != j->rank)
            continue; /* another rank's */
        sl->sample =
            cl_trainer_source_get(j->src, j->model, &sl->ref, j->all_turns, &j->errors[c->w]);
        if (!sl->sample)
            return;
    }
}

static void train_share(WorkerCall *c)
{
    ClTrainerStepJob *j = c->job;
    for (int k = 0; k < j->batch; k++) {
        ClTrainerSlot *sl = &j->slots[k];
        if (sl->share != c->w)
            continue;
        if (g_cancellable_is_cancelled(j->cancellable))
            return;
        const ClTrainSample *s = sl->sample;
        ClTrainStepStats st;
        GError *err = NULL;
        gboolean ok =
            c->worker->dev
                ? cl_train_device_sample(c->worker->dev, s, j->gopt, &st, &err)
                : cl_train_forward_backward_aux(c->worker->be, j->model, s, j->gopt,
                                                c->worker->grads, c->worker->aux_grads, &st, &err);
        if (!ok) {
            g_set_error(&j->errors[c->w], CL_TRAINER_ERROR, CL_TRAINER_ERROR_SAMPLE,
                        "sample %s: %s", s->id ? s->id : "?", err->message);
            g_error_free(err);
            return;
        }
        sl->loss = st.loss;
        sl->aux[0] = st.aux_objects_loss;
        sl->aux[1] = st.aux_changed_loss;
        sl->tokens = st.n_positions;
    }
}

static gpointer worker_run(gpointer data)
{
    WorkerCall *c = data;
    if (c->job->compute)
        train_share(c);
    else
        make_samples(c);
    return NULL;
}

/* A sample's training cost in multiply-adds, roughly: the decoder's products and attention
 * over its positions, the encoder's over its images (forward and backward scale alike). */
static double sample_cost(const ClModelConfig *cfg, const ClTrainSample *s)
{
    const double E = cfg->dec_dim, F = cfg->dec_mlp, hd = E / MAX(cfg->dec_heads, 1);
    const double Q = cfg->dec_heads * hd, KV = cfg->dec_kv_heads * hd, n = s->n_ids;
    const double D = cfg->enc_dim, Fe = cfg->enc_mlp, P = cl_config_n_patches(cfg);
    const double dec = cfg->dec_depth * (n * (E * (Q + 2 * KV) + Q * E + 3 * E * F) + n * n * Q);
    const double enc = cfg->enc_depth * (P * (4 * D * D + 2 * D * Fe) + P * P * D) +
                       P * (double)cfg->channels * cfg->patch_size * cfg->patch_size * D;
    return dec + (double)s->n_images * enc;
}

static void balance_shares(ClTrainerStepJob *j)
{
    g_autofree int *order = g_new(int, (size_t)MAX(j->batch, 1));
    g_autofree double *cost = g_new(double, (size_t)MAX(j->batch, 1));
    int B = 0; /* this rank's slots */
    for (int k = 0; k < j->batch; k++) {
        j->slots[k].share = -1;
        if (!j->slots[k].sample)
            continue;
        order[B] = k;
        cost[k] = sample_cost(&j->model->config, j->slots[k].sample);
        B++;
    }
    /* longest first (insertion sort: a batch is small), ties by index */
    for (int a = 1; a < B; a++) {
        int k = order[a], b = a;
        while (b > 0 && cost[order[b - 1]] < cost[k])
            order[b] = order[b - 1], b--;
        order[b] = k;
    }
    double load[2] = { 0, 0 };
    for (int a = 0; a < B; a++) {
        int w = j->n_workers > 1 && load[1] < load[0] ? 1 : 0;
        j->slots[order[a]].share = w;
        load[w] += cost[order[a]];
    }
}

/* Runs one phase over the workers (worker 0 on this thread). */
static void run_phase(ClTrainerStepJob *job, ClTrainerWorker *workers, gboolean compute)
{
    WorkerCall calls[2];
    GThread *threads[2] = { NULL, NULL };
    job->compute = compute;
    for (int w = 0; w < job->n_workers; w++)
        calls[w] = (WorkerCall){ job, &workers[w], w };
    for (int w = 1; w < job->n_workers; w++)
        threads[w] = g_thread_new("cl-train-worker", worker_run, &calls[w]);
    worker_run(&calls[0]);
    for (int w = 1; w < job->n_workers; w++)
        g_thread_join(threads[w]);
}

/* Runs the batch over the workers. FALSE: an error, or cancelled. */
gboolean cl_trainer_run_step(ClTrainerStepJob *job, ClTrainerWorker *workers, GError **error)
{
    for (int w = 0; w < job->n_workers; w++)
        job->errors[w] = NULL;
    for (int k = 0; k < job->batch; k++)
        job->slots[k].sample = NULL;
    run_phase(job, workers, FALSE);
    gboolean made = TRUE;
    for (int k = 0; k < job->batch; k++) {
        ClTrainerSlot *sl = &job->slots[k];
        sl->loss = 0, sl->tokens = 0, sl->aux[0] = sl->aux[1] = NAN;
        if (k % job->ranks == job->rank)
            made = made && sl->sample;
    }
    if (made) {
        balance_shares(job);
        run_phase(job, workers, TRUE);
    }
    for (int k = 0; k < job->batch; k++)
        g_clear_pointer(&job->slots[k].sample, cl_train_sample_free);
    gboolean ok = TRUE;
    for (int w = 0; w < job->n_workers; w++) {
        if (job->errors[w] && ok) {
            g_propagate_error(error, job->errors[w]);
            ok = FALSE;
        } else {
            g_clear_error(&job->errors[w]);
        }
    }
    if (ok && g_cancellable_set_error_if_cancelled(job->cancellable, error))
        ok = FALSE;
    if (ok && !made) { /* a sample went missing without an error: only a cancel does that */
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_CANCELLED, "cancelled");
        ok = FALSE;
    }
    return ok;
}

static gpointer update_run(gpointer data)
{
    ClTrainerUpdate *u = data;
    if (u->update) {
        cl_adamw_update_range(u->opt, u->params, u->g0, u->lr, u->gscale, u->begin, u->end);
        return NULL;
    }
    float *restrict g0 = u->g0;
    const float *restrict g1 = u->g1;
    for (size_t i = u->begin; i < u->end; i++)
        g0[i] = (g1 ? g0[i] + g1[i] : g0[i]) * u->inv_batch;
    u->sumsq = cl_grad_sumsq(g0, u->begin, u->end);
    return NULL;
}

static void update_phase(ClTrainerUpdate *uc, int n, gboolean update)
{
    GThread *t = NULL;
    for (int u = 0; u < n; u++)
        uc[u].update = update;
    if (n > 1)
        t = g_thread_new("cl-train-update", update_run, &uc[1]);
    update_run(&uc[0]);
    if (t)
        g_thread_join(t);
}

int cl_trainer_default_workers(void)
{
    /* measured on 2 cores, tiny preset, shapes, batch 8: 2 workers 5.98 samples/s, 1 worker
     * (backend pool of 2 + multi-threaded OpenBLAS in the backward) 3.96 samples/s: a sample
     * per core beats splitting each sample's products, whose OpenBLAS threads spin between
     * calls (a third of the 1-worker run's CPU time was system time) */
    return g_get_num_processors() >= 2 ? 2 : 1;
}

void cl_trainer_step_job_init(ClTrainerStepJob *job, const ClModel *model, ClTrainerSource *src,
                              int batch, int n_workers, const ClTrainGradOptions *gopt,
                              gboolean all_turns, GCancellable *cancellable)
{
    *job = (ClTrainerStepJob){ .model = model,
                               .src = src,
                               .batch = batch,
                               .n_workers = n_workers,
                               .gopt = gopt,
                               .all_turns = all_turns,
                               .cancellable = cancellable,
                               .rank = 0,
                               .ranks = 1 };
    job->slots = g_new0(ClTrainerSlot, batch);
}

void cl_trainer_step_job_clear(ClTrainerStepJob *job)
{
    g_clear_pointer(&job->slots, g_free);
}

/* The halves of the update (one per worker; split on a 16-float boundary). Returns how many. */
static int update_split(ClTrainerUpdate *uc, ClTrainerWorker *workers, int n_workers,
                        ClModel *model, const ClAdamW *opt, int batch)
{
    const size_t n = workers[0].grads->n;
    const int parts = n_workers > 1 && n >= 1024 ? 2 : 1;
    const size_t mid = parts > 1 ? (n / 2) & ~(size_t)15 : n;
    for (int u = 0; u < parts; u++)
        uc[u] = (ClTrainerUpdate){ .g0 = workers[0].grads->data,
                                   .params = model->arena,
                                   .g1 = n_workers > 1 ? workers[1].grads->data : NULL,
                                   .opt = opt,
                                   .inv_batch = (float)(1.0 / batch),
                                   .gscale = 1.0f,
                                   .begin = u ? mid : 0,
                                   .end = u || parts == 1 ? n : mid };
    return parts;
}

int cl_trainer_reduce(ClTrainerUpdate *uc, ClTrainerWorker *workers, int n_workers,
                      const GArray *frozen, ClModel *model, const ClAdamW *opt, int batch,
                      const ClTrainComm *comm, double *norm)
{
    for (guint f = 0; frozen && f < frozen->len; f++) { /* --train-only */
        const ClOptimSpan *sp = &g_array_index(frozen, ClOptimSpan, f);
        for (int w = 0; w < n_workers; w++)
            memset(workers[w].grads->data + sp->begin, 0, (sp->end - sp->begin) * sizeof(float));
    }
    const int n_up = update_split(uc, workers, n_workers, model, opt, batch);
    update_phase(uc, n_up, FALSE);
    *norm = sqrt(n_up > 1 ? uc[0].sumsq + uc[1].sumsq : uc[0].sumsq);
    ClTrainAuxHeads *ag = workers[0].aux_grads;
    for (int w = 1; ag && w < n_workers; w++)
        cl_grad_accumulate(ag->data, workers[w].aux_grads->data, ag->n);
    if (ag)
        cl_grad_scale(ag->data, ag->n, 1.0 / batch);
    if (comm && comm->size > 1) {
        /* each rank holds its samples' part of the mean: the sum across ranks is the batch's */
        const ClParamBuf *g = workers[0].grads;
        cl_train_comm_sum_floats(comm, g->data, g->n);
        *norm = sqrt(cl_grad_sumsq(g->data, 0, g->n));
        if (ag)
            cl_train_comm_sum_floats(comm, ag->data, ag->n);
    }
    return n_up;
}

void cl_trainer_update(ClTrainerUpdate *uc, int n, double lr, float gscale)
{
    for (int u = 0; u < n; u++) {
        uc[u].lr = lr;
        uc[u].gscale = gscale;
    }
    update_phase(uc, n, TRUE);
}
