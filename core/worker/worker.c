/* worker.c - ClWorker: one thread that owns the backend and the model, a GAsyncQueue of jobs,
 * and the delivery of their progress, text and results on the callers' main contexts. */
#include "worker/worker.h"

#include <glib/gi18n.h>
#include <string.h>
#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "nn/backend.h"
#include "cl-config.h"
#include "model/model.h"
#include "worker/sentences.h"

/* Progress at most every 100 ms, text at most every 33 ms (docs/DESIGN.md §3: coalesced updates). */
#define PROGRESS_INTERVAL_US (100 * 1000)
#define TEXT_INTERVAL_US (33 * 1000)
/* The worker's threads run at a lower priority than the UI's, so a busy engine never delays a
 * frame (Linux: per-thread nice value, inherited by the backend's pool threads). */
#define WORKER_NICE 5

typedef struct _Job Job;

/* What the thread shares with the GObject; refcounted so neither outlives the other's use. */
typedef struct {
    gint ref;
    char *device;
    GAsyncQueue *queue; /* Job*; `quit` ends the thread */
    GMutex lock;        /* guards live */
    GPtrArray *live;    /* Job*: queued or running, for cancel_all */
    /* the thread's own */
    ClBackend *be;
    ClBackend *cpu_be; /* the sentence maps' (they run on the CPU), when `be` is a GPU */
    char *be_notice;
    ClModel *model;
    char *model_key;
} State;

static Job quit_job; /* the sentinel */

struct _Job {
    gint ref;
    State *state;
    GMainContext *context;
    GTask *task;               /* main context only; NULL once returned */
    GCancellable *cancellable; /* the job's own; the caller's one is chained to it */
    GCancellable *caller_cancellable;
    gulong caller_handler;
    ClWorkerModel model;
    ClWorkerImage *images;
    guint n_images;
    ClDescribeOptions opts; /* strings owned (question, context, stop_strings) */
    char **stop_strings;
    char *question;
    char *prior_reports; /* opts.context's copy */
    ClWorkerCallbacks cb;

    /* streamed to the main context, under lock */
    GMutex lock;
    GString *text;
    char *stage;
    double fraction;
    gboolean stage_dirty, flush_scheduled, done;
    gint64 last_progress_us, last_text_us;
    gboolean progress_sent;

    /* the outcome, set by the thread before completion is scheduled */
    ClWorkerDescribeResult *result;
    GError *error;
};

struct _ClWorker {
    GObject parent_instance;
    State *state;
    GThread *thread;
    guint n_jobs;
};

G_DEFINE_FINAL_TYPE(ClWorker, cl_worker, G_TYPE_OBJECT)

enum { PROP_0, PROP_N_JOBS, N_PROPS };
static GParamSpec *properties[N_PROPS];

/* ---- state and jobs ------------------------------------------------------------------------ */

static State *state_ref(State *s)
{
    g_atomic_int_inc(&s->ref);
    return s;
}

static void state_unref(State *s)
{
    if (!g_atomic_int_dec_and_test(&s->ref))
        return;
    g_async_queue_unref(s->queue);
    g_mutex_clear(&s->lock);
    g_ptr_array_unref(s->live);
    if (s->model)
        cl_model_free(s->model);
    if (s->be)
        cl_backend_free(s->be);
    if (s->cpu_be)
        cl_backend_free(s->cpu_be);
    g_free(s->be_notice);
    g_free(s->model_key);
    g_free(s->device);
    g_free(s);
}

static void worker_model_clear(ClWorkerModel *m)
{
    g_clear_pointer(&m->path, g_free);
    g_clear_pointer(&m->random_preset, g_free);
    g_clear_pointer(&m->random_variant, g_free);
}

static Job *job_ref(Job *job)
{
    g_atomic_int_inc(&job->ref);
    return job;
}

static void release_images(Job *job)
{
    for (guint i = 0; i < job->n_images; i++) {
        if (job->images[i].owner_free && job->images[i].owner)
            job->images[i].owner_free(job->images[i].owner);
        g_free((gpointer)job->images[i].masks);
    }
    g_clear_pointer(&job->images, g_free);
    job->n_images = 0;
}

static void job_unref(Job *job)
{
    if (!g_atomic_int_dec_and_test(&job->ref))
        return;
    /* a completion source destroyed undispatched (its context went away) leaves the task */
    g_clear_object(&job->task);
    release_images(job);
    worker_model_clear(&job->model);
    g_strfreev(job->stop_strings);
    g_free(job->question);
    g_free(job->prior_reports);
    if (job->caller_cancellable)
        g_cancellable_disconnect(job->caller_cancellable, job->caller_handler);
    g_clear_object(&job->caller_cancellable);
    g_clear_object(&job->cancellable);
    g_main_context_unref(job->context);
    g_mutex_clear(&job->lock);
    g_string_free(job->text, TRUE);
    g_free(job->stage);
    if (job->result)
        cl_worker_describe_result_free(job->result);
    g_clear_error(&job->error);
    state_unref(job->state);
    g_free(job);
}

/* ---- delivery on the main context ------------------------------------------------------------ */

static gboolean flush_cb(gpointer data);

/* Under job->lock: makes sure a flush runs when the earliest pending item is due. */
static void schedule_flush_locked(Job *job)
{
    if (job->flush_scheduled || job->done)
        return;
    gint64 now = g_get_monotonic_time(), due = G_MAXINT64;
    if (job->text->len > 0)
        due = MIN(due, job->last_text_us + TEXT_INTERVAL_US);
    if (job->stage_dirty)
        due = MIN(due, job->progress_sent ? job->last_progress_us + PROGRESS_INTERVAL_US : now);
    if (due == G_MAXINT64)
        return;
    guint delay_ms = due > now ? (guint)((due - now + 999) / 1000) : 0;
    GSource *src = delay_ms ? g_timeout_source_new(delay_ms) : g_idle_source_new();
    g_source_set_priority(src, G_PRIORITY_DEFAULT);
    g_source_set_callback(src, flush_cb, job_ref(job), (GDestroyNotify)job_unref);
    g_source_set_static_name(src, "cl-worker-flush");
    g_source_attach(src, job->context);
    g_source_unref(src);
    job->flush_scheduled = TRUE;
}

/* Delivers what is due (everything when `all`); main context. */
static void deliver(Job *job, gboolean all)
{
    g_mutex_lock(&job->lock);
    gint64 now = g_get_monotonic_time();
    char *text = NULL, *stage = NULL;
    double fraction = 0;
    if (job->text->len > 0 && (all || now >= job->last_text_us + TEXT_INTERVAL_US)) {
        text = g_strndup(job->text->str, job->text->len);
        g_string_truncate(job->text, 0);
        job->last_text_us = now;
    }
    if (job->stage_dirty &&
        (all || !job->progress_sent || now >= job->last_progress_us + PROGRESS_INTERVAL_US)) {
        stage = g_strdup(job->stage);
        fraction = job->fraction;
        job->stage_dirty = FALSE;
        job->progress_sent = TRUE;
        job->last_progress_us = now;
    }
    gboolean live = !job->done && !g_cancellable_is_cancelled(job->cancellable);
    if (!all)
        schedule_flush_locked(job);
    g_mutex_unlock(&job->lock);
    if (live && stage && job->cb.on_progress)
        job->cb.on_progress(stage, fraction, job->cb.user_data);
    if (live && text && job->cb.on_text)
        job->cb.on_text(text, job->cb.user_data);
    g_free(text);
    g_free(stage);
}

static gboolean flush_cb(gpointer data)
{
    Job *job = data;
    g_mutex_lock(&job->lock);
    job->flush_scheduled = FALSE;
    g_mutex_unlock(&job->lock);
    deliver(job, FALSE);
    return G_SOURCE_REMOVE;
}

/* The job's end on the main context: the last text and progress, then the result. */
static gboolean complete_cb(gpointer data)
{
    Job *job = data;
    deliver(job, TRUE);
    g_mutex_lock(&job->lock);
    job->done = TRUE;
    g_mutex_unlock(&job->lock);

    ClWorker *self = CL_WORKER(g_task_get_source_object(job->task));
    GTask *task = g_steal_pointer(&job->task);
    if (job->error)
        g_task_return_error(task, g_steal_pointer(&job->error));
    else if (g_cancellable_is_cancelled(job->cancellable))
        g_task_return_new_error(task, G_IO_ERROR, G_IO_ERROR_CANCELLED, _("Cancelled"));
    else
        g_task_return_pointer(task, g_steal_pointer(&job->result),
                              (GDestroyNotify)cl_worker_describe_result_free);
    if (job->cb.user_data_free)
        job->cb.user_data_free(job->cb.user_data);
    job->cb.user_data_free = NULL;
    g_assert(self->n_jobs > 0);
    self->n_jobs--;
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_N_JOBS]);
    g_object_unref(task);
    return G_SOURCE_REMOVE;
}

/* ---- the thread ------------------------------------------------------------------------------ */

static void set_stage(Job *job, const char *stage, double fraction)
{
    g_mutex_lock(&job->lock);
    g_free(job->stage);
    job->stage = g_strdup(stage);
    job->fraction = fraction;
    job->stage_dirty = TRUE;
    schedule_flush_locked(job);
    g_mutex_unlock(&job->lock);
}

static void on_token(gint32 id, const char *text, gsize len, gpointer user_data)
{
    (void)id;
    Job *job = user_data;
    g_autofree char *valid = g_utf8_make_valid(text, (gssize)len);
    g_mutex_lock(&job->lock);
    g_string_append(job->text, valid);
    schedule_flush_locked(job);
    g_mutex_unlock(&job->lock);
}

static void on_progress(ClDescribeStage stage, guint image, guint n_images, gpointer user_data)
{
    Job *job = user_data;
    if (stage == CL_DESCRIBE_ENCODING) {
        /* TRANSLATORS: progress of a model run, "Encoding image 2 of 3" */
        g_autofree char *s = g_strdup_printf(_("Encoding image %u of %u"), image + 1, n_images);
        set_stage(job, s, 0.1 + 0.4 * image / MAX(n_images, 1));
    } else {
        set_stage(job, _("Describing"), 0.5);
    }
}

static char *model_key(const ClWorkerModel *m)
{
    if (m->path)
        return g_strconcat("file:", m->path, NULL);
    return g_strdup_printf("random:%s:%s:%" G_GUINT64_FORMAT,
                           m->random_preset ? m->random_preset : "tiny",
                           m->random_variant ? m->random_variant : "", m->random_seed);
}

static char *model_name(const ClWorkerModel *m)
{
    if (m->path)
        return g_path_get_basename(m->path);
    return g_strdup_printf("random-init %s seed %" G_GUINT64_FORMAT,
                           m->random_preset ? m->random_preset : "tiny", m->random_seed);
}

/* Makes the backend and the job's model current; FALSE + error. */
static gboolean prepare(State *s, Job *job, double *load_ms, GError **error)
{
    gint64 t0 = g_get_monotonic_time();
    if (!s->be) {
        s->be = cl_backend_new(s->device, &s->be_notice, error);
        if (!s->be)
            return FALSE;
    }
    g_autofree char *key = model_key(&job->model);
    if (s->model && g_strcmp0(key, s->model_key) == 0) {
        *load_ms = 0;
        return TRUE;
    }
    g_clear_pointer(&s->model, cl_model_free);
    g_clear_pointer(&s->model_key, g_free);
    set_stage(job, _("Loading the model"), 0.0);
    ClModel *model;
    if (job->model.path) {
        model = cl_model_load(job->model.path, error);
    } else {
        ClModelConfig cfg;
        if (!cl_model_config_preset(
                &cfg, job->model.random_preset ? job->model.random_preset : "tiny", error))
            return FALSE;
        if (job->model.random_variant &&
            !cl_sve_variant_from_name(job->model.random_variant, &cfg.sve_variant)) {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                        _("Unknown SVE variant “%s”"), job->model.random_variant);
            return FALSE;
        }
        model = cl_model_new_random(&cfg, job->model.random_seed, error);
    }
    if (!model)
        return FALSE;
    s->model = model;
    s->model_key = g_steal_pointer(&key);
    *load_ms = (g_get_monotonic_time() - t0) / 1000.0;
    return TRUE;
}

static void run_describe(State *s, Job *job)
{
    GError *error = NULL;
    double load_ms = 0;
    if (g_cancellable_set_error_if_cancelled(job->cancellable, &error) ||
        !prepare(s, job, &load_ms, &error)) {
        job->error = error;
        return;
    }
    ClWorkerDescribeResult *r = g_new0(ClWorkerDescribeResult, 1);
    g_autofree ClDescribeImage *imgs = g_new0(ClDescribeImage, MAX(job->n_images, 1));
    for (guint i = 0; i < job->n_images; i++)
        imgs[i] = (ClDescribeImage){ job->images[i].image,
                                     job->images[i].frame,
                                     job->images[i].masks,
                                     job->images[i].n_masks,
                                     job->images[i].has_display ? &job->images[i].display : NULL,
                                     job->images[i].has_align ? job->images[i].align : NULL,
                                     job->images[i].frame_w,
                                     job->images[i].frame_h };
    ClDescribeOptions o = job->opts;
    o.on_token = on_token;
    o.on_progress = on_progress;
    o.user_data = job;
    o.cancellable = job->cancellable;
    gboolean ok = cl_describe_run(s->be, s->model, imgs, job->n_images, &o, &r->result, &error);
    r->result.load_ms = load_ms;
    r->load_ms = load_ms;
    r->model_name = model_name(&job->model);
    r->model_path = g_strdup(s->model->path);
    r->model_sha256 =
        s->model->sha256
            ? g_strdup(s->model->sha256)
            : g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)s->model->arena,
                                          s->model->n_params * sizeof(float));
    r->model_config_json = cl_model_config_to_json(&s->model->config);
    r->model_image_size = s->model->config.image_size;
    r->device = g_strdup(cl_backend_name(s->be));
    r->notice = g_strdup(s->be_notice);
    if (!ok) {
        cl_worker_describe_result_free(r);
        job->error = error;
        return;
    }
    /* which part of the later image each sentence rests on: the inference pass's attention map
     * (cl_decoder_forward_attention) on the CPU, a CPU backend of its own when the model ran on
     * a GPU */
    ClBackend *maps_be = s->be;
    if (!g_str_equal(cl_backend_name(s->be), "cpu")) {
        if (!s->cpu_be)
            s->cpu_be = cl_backend_cpu_new(0);
        maps_be = s->cpu_be;
    }
    if (r->result.n_images >= 2 && !g_cancellable_is_cancelled(job->cancellable))
        r->sentences =
            cl_sentence_maps(maps_be, s->model, &r->result, r->result.n_images - 1, NULL);
    set_stage(job, _("Done"), 1.0);
    job->result = r;
}

void cl_worker_thread_background(void)
{
#ifdef __linux__
    /* best effort: a failure leaves the normal priority */
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), WORKER_NICE);
#endif
}

static gpointer thread_main(gpointer data)
{
    State *s = data;
    cl_worker_thread_background();
    for (;;) {
        Job *job = g_async_queue_pop(s->queue);
        if (job == &quit_job)
            break;
        run_describe(s, job);
        /* the images are not needed any more: their owners go now, not with the result */
        release_images(job);
        g_mutex_lock(&s->lock);
        g_ptr_array_remove_fast(s->live, job);
        g_mutex_unlock(&s->lock);
        GSource *src = g_idle_source_new();
        g_source_set_priority(src, G_PRIORITY_DEFAULT);
        g_source_set_callback(src, complete_cb, job, (GDestroyNotify)job_unref);
        g_source_set_static_name(src, "cl-worker-complete");
        g_source_attach(src, job->context);
        g_source_unref(src); /* the source now holds the thread's job reference */
    }
    state_unref(s);
    return NULL;
}

/* ---- the object ------------------------------------------------------------------------------ */

static void cl_worker_dispose(GObject *object)
{
    ClWorker *self = CL_WORKER(object);
    if (self->thread) {
        cl_worker_cancel_all(self);
        g_async_queue_push(self->state->queue, &quit_job);
        g_thread_join(g_steal_pointer(&self->thread));
    }
    G_OBJECT_CLASS(cl_worker_parent_class)->dispose(object);
}

static void cl_worker_finalize(GObject *object)
{
    ClWorker *self = CL_WORKER(object);
    state_unref(self->state);
    G_OBJECT_CLASS(cl_worker_parent_class)->finalize(object);
}

static void cl_worker_get_property(GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
    ClWorker *self = CL_WORKER(object);
    switch (prop_id) {
    case PROP_N_JOBS: g_value_set_uint(value, self->n_jobs); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    }
}

static void cl_worker_class_init(ClWorkerClass *klass)
{
    GObjectClass *oc = G_OBJECT_CLASS(klass);
    oc->dispose = cl_worker_dispose;
    oc->finalize = cl_worker_finalize;
    oc->get_property = cl_worker_get_property;
    properties[PROP_N_JOBS] = g_param_spec_uint("n-jobs", NULL, NULL, 0, G_MAXUINT, 0,
                                                G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties(oc, N_PROPS, properties);
}

static void cl_worker_init(ClWorker *self)
{
    State *s = g_new0(State, 1);
    s->ref = 1;
    s->queue = g_async_queue_new();
    g_mutex_init(&s->lock);
    s->live = g_ptr_array_new();
    self->state = s;
}

ClWorker *cl_worker_new(const char *device)
{
    ClWorker *self = g_object_new(CL_TYPE_WORKER, NULL);
    self->state->device = g_strdup(device ? device : "auto");
    return self;
}

const char *cl_worker_get_device(ClWorker *self)
{
    g_return_val_if_fail(CL_IS_WORKER(self), NULL);
    return self->state->device;
}

guint cl_worker_get_n_jobs(ClWorker *self)
{
    g_return_val_if_fail(CL_IS_WORKER(self), 0);
    return self->n_jobs;
}

void cl_worker_cancel_all(ClWorker *self)
{
    g_return_if_fail(CL_IS_WORKER(self));
    State *s = self->state;
    g_autoptr(GPtrArray) jobs = g_ptr_array_new_with_free_func((GDestroyNotify)job_unref);
    g_mutex_lock(&s->lock);
    for (guint i = 0; i < s->live->len; i++)
        g_ptr_array_add(jobs, job_ref(g_ptr_array_index(s->live, i)));
    g_mutex_unlock(&s->lock);
    for (guint i = 0; i < jobs->len; i++)
        g_cancellable_cancel(((Job *)g_ptr_array_index(jobs, i))->cancellable);
}

static void caller_cancelled(GCancellable *caller, gpointer data)
{
    (void)caller;
    g_cancellable_cancel(G_CANCELLABLE(data));
}

void cl_worker_describe_async(ClWorker *self, const ClWorkerModel *model, ClWorkerImage *images,
                              guint n_images, const ClDescribeOptions *opts,
                              const ClWorkerCallbacks *callbacks, GCancellable *cancellable,
                              GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail(CL_IS_WORKER(self));
    g_return_if_fail(model != NULL && (images != NULL || n_images == 0));
    Job *job = g_new0(Job, 1);
    job->ref = 1;
    job->state = state_ref(self->state);
    job->context = g_main_context_ref_thread_default();
    job->task = g_task_new(self, cancellable, callback, user_data);
    g_task_set_source_tag(job->task, cl_worker_describe_async);
    job->cancellable = g_cancellable_new();
    if (cancellable) {
        job->caller_cancellable = g_object_ref(cancellable);
        job->caller_handler = g_cancellable_connect(cancellable, G_CALLBACK(caller_cancelled),
                                                    g_object_ref(job->cancellable), g_object_unref);
    }
    job->model.path = g_strdup(model->path);
    job->model.random_preset = g_strdup(model->random_preset);
    job->model.random_variant = g_strdup(model->random_variant);
    job->model.random_seed = model->random_seed;
    job->images = g_memdup2(images, sizeof(ClWorkerImage) * MAX(n_images, 1));
    job->n_images = n_images;
    for (guint i = 0; i < n_images; i++)
        job->images[i].masks =
            images[i].n_masks ? g_memdup2(images[i].masks, sizeof(double) * 4 * images[i].n_masks)
                              : NULL;
    if (opts)
        job->opts = *opts;
    else
        cl_describe_options_init(&job->opts);
    job->question = g_strdup(job->opts.question);
    job->opts.question = job->question;
    job->prior_reports = g_strdup(job->opts.context);
    job->opts.context = job->prior_reports;
    job->stop_strings = g_strdupv((char **)job->opts.stop_strings);
    job->opts.stop_strings = (const char *const *)job->stop_strings;
    job->opts.turns = NULL; /* a borrowed array cannot outlive this call */
    job->opts.n_turns = 0;
    if (callbacks)
        job->cb = *callbacks;
    g_mutex_init(&job->lock);
    job->text = g_string_new(NULL);
    set_stage(job, _("Waiting"), 0.0);

    self->n_jobs++;
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_N_JOBS]);
    if (!self->thread)
        self->thread = g_thread_new("cl-worker", thread_main, state_ref(self->state));
    g_mutex_lock(&self->state->lock);
    g_ptr_array_add(self->state->live, job);
    g_mutex_unlock(&self->state->lock);
    g_async_queue_push(self->state->queue, job);
}

ClWorkerDescribeResult *cl_worker_describe_finish(ClWorker *self, GAsyncResult *result,
                                                  GError **error)
{
    g_return_val_if_fail(g_task_is_valid(result, self), NULL);
    return g_task_propagate_pointer(G_TASK(result), error);
}

void cl_worker_describe_result_free(ClWorkerDescribeResult *r)
{
    if (!r)
        return;
    cl_describe_result_clear(&r->result);
    g_free(r->model_name);
    g_free(r->model_path);
    g_free(r->model_sha256);
    g_free(r->model_config_json);
    if (r->sentences)
        g_ptr_array_unref(r->sentences);
    g_free(r->device);
    g_free(r->notice);
    g_free(r);
}
