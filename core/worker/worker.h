/* worker.h - ClWorker: the background thread between the UI and the engine (docs/DESIGN.md §3). It
 * owns the backend and the loaded model; jobs wait in a queue and run one at a time; every job
 * is cancellable, reports progress and streams its text, and its result arrives on the main
 * context of the thread that queued it. The caller's thread never waits on model work. */
#pragma once

#include <gio/gio.h>

#include "model/describe.h"
#include "image/image.h"

G_BEGIN_DECLS

#define CL_TYPE_WORKER (cl_worker_get_type())
G_DECLARE_FINAL_TYPE(ClWorker, cl_worker, CL, WORKER, GObject)

/* A worker for device "auto", "cpu" or "cuda" (NULL = "auto"). The thread starts with the first
 * job; the backend and the model are made there (a device that is absent fails that job). */
ClWorker *cl_worker_new(const char *device);
const char *cl_worker_get_device(ClWorker *self);
/* Jobs queued or running (main context view: decremented when a result is delivered). */
guint cl_worker_get_n_jobs(ClWorker *self);

/* The model a job runs: a file, or seeded random weights of a preset (an untrained model whose
 * text is noise; what the app runs when no model is installed). The worker keeps the last model
 * it loaded and reuses it while the jobs ask for the same one. */
typedef struct {
    char *path;           /* a model file; NULL = random init */
    char *random_preset;  /* "tiny", "base", ... when path is NULL (NULL = "tiny") */
    char *random_variant; /* SVE variant of the random model, NULL = the preset's */
    guint64 random_seed;
} ClWorkerModel;

/* One image of a job: a frame of an immutable image, and whatever keeps it alive. The worker
 * calls owner_free(owner) when the job is done with it (on the worker thread or, if the job
 * never ran, where it was dropped). */
typedef struct {
    const ClImage *image;
    guint frame;
    gpointer owner;
    GDestroyNotify owner_free;
    const double *masks; /* ignore regions (ClDescribeImage.masks), copied; may be NULL */
    guint n_masks;
    gboolean has_display; /* display: the window/level the user sees (copied), else defaults */
    ClDisplaySettings display;
    gboolean has_align; /* read aligned onto a frame (ClDescribeImage.align) */
    double align[6];
    guint frame_w, frame_h;
} ClWorkerImage;

/* Progress of a job, on the caller's main context, at most ~10 times a second (the first and
 * the last always): `stage` is text for people ("Loading the model", "Encoding image 2 of 3",
 * "Describing"), fraction in [0, 1] or < 0 when unknown. */
typedef void (*ClWorkerProgress)(const char *stage, double fraction, gpointer user_data);
/* Generated text as it is decoded, on the caller's main context: each call appends `text`
 * (valid UTF-8; invalid bytes are shown as U+FFFD), coalesced to at most ~30 calls a second.
 * Nothing arrives after the job was cancelled. */
typedef void (*ClWorkerText)(const char *text, gpointer user_data);

typedef struct {
    ClWorkerProgress on_progress; /* may be NULL */
    ClWorkerText on_text;         /* may be NULL */
    gpointer user_data;
    GDestroyNotify user_data_free; /* called on the main context after the last callback */
} ClWorkerCallbacks;

/* Describes the change across n_images (>= 2) in sequence order with `model` (copied), the
 * describe options `opts` (copied: its strings, not its turns; on_token, on_progress and
 * cancellable are the worker's own — pass the cancellable here). Takes the images (their owners
 * are freed when the job is done). The result, on this thread's main context: callback, then
 * cl_worker_describe_finish. */
void cl_worker_describe_async(ClWorker *self, const ClWorkerModel *model, ClWorkerImage *images,
                              guint n_images, const ClDescribeOptions *opts,
                              const ClWorkerCallbacks *callbacks, GCancellable *cancellable,
                              GAsyncReadyCallback callback, gpointer user_data);

/* The result of a describe job (free with cl_worker_describe_result_free) or NULL + error
 * (G_IO_ERROR_CANCELLED for a cancelled job). */
typedef struct {
    ClDescribeResult result; /* as cl_describe_run fills it */
    char *model_name;        /* the model file's name, or "random-init tiny seed 0" */
    char *model_path;        /* NULL for random init */
    char *model_sha256;      /* of the file, or of the weights for random init */
    char *model_config_json; /* the model's config */
    int model_image_size;    /* its input size S */
    char *device;            /* the backend that ran it: "cpu", "cuda" */
    char *notice;            /* a device fallback notice, or NULL */
    double load_ms;          /* model (and backend) loading, 0 when reused */
    GPtrArray *sentences;    /* ClSentenceMap* (sentences.h) over the last image, or NULL when
                              * they could not be computed */
} ClWorkerDescribeResult;

ClWorkerDescribeResult *cl_worker_describe_finish(ClWorker *self, GAsyncResult *result,
                                                  GError **error);
void cl_worker_describe_result_free(ClWorkerDescribeResult *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClWorkerDescribeResult, cl_worker_describe_result_free)

/* Cancels every queued and running job (their callbacks get G_IO_ERROR_CANCELLED). */
void cl_worker_cancel_all(ClWorker *self);

/* Marks the calling thread as background work: on Linux a lower priority (nice +5, inherited by
 * threads it starts), so that it never takes the CPU from the thread that draws the window.
 * The worker's thread does it; so do the UI's loading and rendering threads. */
void cl_worker_thread_background(void);

G_END_DECLS
