/* trainlog.h - the training log: one JSON object per line (JSONL) per logged step and per
 * evaluation, appended and fsync'd periodically, and a progress line with rate and ETA. */
#pragma once

#include <stdio.h>

#include <glib.h>

G_BEGIN_DECLS

/* Lines written (numbers that are NaN or infinite are written as null):
 *   {"type":"train","step":120,"loss":2.345,"lr":0.0003,"grad_norm":1.2,"tokens":4096,
 *    "samples":32,"samples_per_s":45.1,"tokens_per_s":5772.8,"elapsed_s":72.4,"eta_s":631.2}
 *   {"type":"eval","step":500,"elapsed_s":301.0,"metrics":{"loss":2.1,"bleu4":0.31}}
 * step: steps completed (1 after the first update). tokens / samples: of this step. Rates are
 * averaged since the log was opened (so a resume does not count the earlier run's time);
 * elapsed_s adds the elapsed time given at open (the earlier run's). eta_s: steps left /
 * steps per second, null until a rate is known. */
typedef struct ClTrainLog ClTrainLog;

typedef struct {
    gint64 total_steps;     /* for the ETA and "step/total"; 0: unknown */
    gint64 start_step;      /* steps already done (a resume); rates count from here */
    double start_elapsed_s; /* time already spent (a resume, from the last log line) */
    gboolean append;        /* append to an existing log (a resume) instead of truncating */
    double fsync_every_s;   /* fsync at most this often (and at eval and close); 0: 10 s */
    /* progress: to `progress` (NULL: stderr; set quiet to have none). On a terminal one
     * self-erasing line redrawn at most every progress_interval_s (0: 0.5 s); elsewhere a plain
     * line every progress_every steps (0: 50) and at the last step. */
    FILE *progress;
    gboolean quiet;
    double progress_interval_s;
    gint64 progress_every;
    /* clock in microseconds (NULL: g_get_monotonic_time), for tests */
    gint64 (*now_us)(gpointer data);
    gpointer now_data;
} ClTrainLogOptions;

/* Opens (creates, or appends to with opt->append) `path`; NULL path: no file, progress only.
 * opt may be NULL (defaults). */
ClTrainLog *cl_trainlog_open(const char *path, const ClTrainLogOptions *opt, GError **error);

typedef struct {
    gint64 step;
    double loss, lr, grad_norm;
    gint64 tokens, samples;
} ClTrainLogStep;

/* Appends a train line (buffered; fsync'd when fsync_every_s has passed) and updates progress. */
gboolean cl_trainlog_step(ClTrainLog *log, const ClTrainLogStep *rec, GError **error);
/* Appends an eval line with metrics names[i] = values[i] and fsyncs. */
gboolean cl_trainlog_eval(ClTrainLog *log, gint64 step, const char *const *names,
                          const double *values, guint n, GError **error);
/* Any JSON object line of the caller's (e.g. {"type":"skip", ...}); must be one line. */
gboolean cl_trainlog_write_raw(ClTrainLog *log, const char *json_object, GError **error);
/* fflush + fsync now. */
gboolean cl_trainlog_sync(ClTrainLog *log, GError **error);
/* Seconds since open plus start_elapsed_s. */
double cl_trainlog_elapsed(const ClTrainLog *log);
/* Syncs, ends the progress line, closes; the first error (write, fsync, close) in *error. */
gboolean cl_trainlog_close(ClTrainLog *log, GError **error);
/* Close ignoring errors (for g_autoptr). */
void cl_trainlog_free(ClTrainLog *log);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClTrainLog, cl_trainlog_free)

/* "1:02:03" / "2:03" for a duration in seconds; "?" for a negative or non-finite one. */
char *cl_trainlog_format_duration(double seconds);

G_END_DECLS
