/* trainlog.c - JSONL training log and progress line (trainlog.h). Lines go through stdio
 * (fflush after each, so a crash loses at most the OS cache) and fsync at most every few
 * seconds: a sync per step would cost more than a small model's step. */
#include "train/trainlog.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>

struct ClTrainLog {
    ClTrainLogOptions opt;
    FILE *file;
    char *display; /* the file's name for messages */
    gint64 t0_us;
    gint64 last_sync_us;
    gint64 last_progress_us;
    gboolean progress_tty;
    gboolean progress_open; /* a redrawn line is on the terminal */
    gint64 samples, tokens; /* since open */
    GError *deferred;       /* the first write error, for close */
};

static gint64 now_us(const ClTrainLog *log)
{
    return log->opt.now_us ? log->opt.now_us(log->opt.now_data) : g_get_monotonic_time();
}

ClTrainLog *cl_trainlog_open(const char *path, const ClTrainLogOptions *opt, GError **error)
{
    ClTrainLog *log = g_new0(ClTrainLog, 1);
    if (opt)
        log->opt = *opt;
    if (log->opt.fsync_every_s <= 0)
        log->opt.fsync_every_s = 10.0;
    if (log->opt.progress_interval_s <= 0)
        log->opt.progress_interval_s = 0.5;
    if (log->opt.progress_every <= 0)
        log->opt.progress_every = 50;
    if (!log->opt.progress)
        log->opt.progress = stderr;
    if (path) {
        log->display = g_filename_display_name(path);
        log->file = g_fopen(path, log->opt.append ? "a" : "w");
        if (!log->file) {
            int e = errno;
            g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(e),
                        "cannot open training log %s: %s", log->display, g_strerror(e));
            g_free(log->display);
            g_free(log);
            return NULL;
        }
    }
    log->progress_tty = !log->opt.quiet && isatty(fileno(log->opt.progress));
    log->t0_us = now_us(log);
    log->last_sync_us = log->t0_us;
    log->last_progress_us = G_MININT64;
    return log;
}

double cl_trainlog_elapsed(const ClTrainLog *log)
{
    g_return_val_if_fail(log != NULL, 0);
    return log->opt.start_elapsed_s + (double)(now_us(log) - log->t0_us) / 1e6;
}

/* JSON has no NaN or infinity: those are null */
static const char *format_num(char *buf, gsize size, double v)
{
    return isfinite(v) ? g_ascii_formatd(buf, size, "%.9g", v) : "null";
}

static void append_num(GString *s, const char *key, double v)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    g_string_append_printf(s, ",\"%s\":%s", key, format_num(buf, sizeof buf, v));
}

static gboolean file_error(ClTrainLog *log, int e, const char *what, GError **error)
{
    GError *err = g_error_new(G_FILE_ERROR, g_file_error_from_errno(e),
                              "cannot %s training log %s: %s", what, log->display, g_strerror(e));
    if (!log->deferred) /* reported again at close, for callers that check only there */
        log->deferred = g_error_copy(err);
    g_propagate_error(error, err);
    return FALSE;
}

gboolean cl_trainlog_sync(ClTrainLog *log, GError **error)
{
    g_return_val_if_fail(log != NULL, FALSE);
    log->last_sync_us = now_us(log);
    if (!log->file)
        return TRUE;
    if (fflush(log->file) != 0)
        return file_error(log, errno, "write", error);
    if (fsync(fileno(log->file)) != 0 && errno != EINVAL) /* EINVAL: a pipe or /dev/null */
        return file_error(log, errno, "sync", error);
    return TRUE;
}

static gboolean write_line(ClTrainLog *log, const char *line, gboolean sync, GError **error)
{
    if (!log->file)
        return TRUE;
    if (fputs(line, log->file) == EOF || fputc('\n', log->file) == EOF || fflush(log->file) != 0)
        return file_error(log, errno, "write", error);
    if (sync || (double)(now_us(log) - log->last_sync_us) / 1e6 >= log->opt.fsync_every_s)
        return cl_trainlog_sync(log, error);
    return TRUE;
}

gboolean cl_trainlog_write_raw(ClTrainLog *log, const char *json_object, GError **error)
{
    g_return_val_if_fail(log != NULL && json_object != NULL, FALSE);
    if (json_object[0] != '{' || strchr(json_object, '\n')) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "a training log record must be one JSON object on one line");
        return FALSE;
    }
    return write_line(log, json_object, FALSE, error);
}

char *cl_trainlog_format_duration(double seconds)
{
    if (!isfinite(seconds) || seconds < 0)
        return g_strdup("?");
    guint64 s = (guint64)(seconds + 0.5);
    if (s >= 3600)
        return g_strdup_printf("%" G_GUINT64_FORMAT ":%02u:%02u", s / 3600, (unsigned)(s / 60 % 60),
                               (unsigned)(s % 60));
    return g_strdup_printf("%u:%02u", (unsigned)(s / 60), (unsigned)(s % 60));
}

static void progress(ClTrainLog *log, const ClTrainLogStep *r, double sps, double elapsed,
                     double eta, gint64 t_us)
{
    if (log->opt.quiet)
        return;
    gboolean last = log->opt.total_steps > 0 && r->step >= log->opt.total_steps;
    if (log->progress_tty) {
        if (!last && t_us - log->last_progress_us < (gint64)(log->opt.progress_interval_s * 1e6))
            return;
    } else if (!last && r->step % log->opt.progress_every != 0) {
        return;
    }
    log->last_progress_us = t_us;
    g_autofree char *el = cl_trainlog_format_duration(elapsed);
    g_autofree char *et = cl_trainlog_format_duration(eta);
    GString *line = g_string_new(NULL);
    if (log->opt.total_steps > 0)
        g_string_append_printf(line, "step %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT, r->step,
                               log->opt.total_steps);
    else
        g_string_append_printf(line, "step %" G_GINT64_FORMAT, r->step);
    g_string_append_printf(line, "  loss %.4f  lr %.2e  |g| %.3g  %.1f samples/s  %s elapsed",
                           r->loss, r->lr, r->grad_norm, sps, el);
    if (log->opt.total_steps > 0)
        g_string_append_printf(line, "  eta %s", et);
    /* \r + erase-to-end redraws one line in place on a terminal */
    if (log->progress_tty)
        fprintf(log->opt.progress, "\r\033[K%s", line->str);
    else
        fprintf(log->opt.progress, "%s\n", line->str);
    fflush(log->opt.progress);
    log->progress_open = log->progress_tty;
    g_string_free(line, TRUE);
}

gboolean cl_trainlog_step(ClTrainLog *log, const ClTrainLogStep *r, GError **error)
{
    g_return_val_if_fail(log != NULL && r != NULL, FALSE);
    gint64 t = now_us(log);
    double run_s = (double)(t - log->t0_us) / 1e6;
    double elapsed = log->opt.start_elapsed_s + run_s;
    log->samples += r->samples;
    log->tokens += r->tokens;
    gint64 done = r->step - log->opt.start_step;
    double sps = run_s > 0 ? (double)log->samples / run_s : NAN;
    double tps = run_s > 0 ? (double)log->tokens / run_s : NAN;
    double steps_ps = run_s > 0 && done > 0 ? (double)done / run_s : NAN;
    double eta = log->opt.total_steps > 0 && isfinite(steps_ps)
                     ? (double)MAX(log->opt.total_steps - r->step, 0) / steps_ps
                     : NAN;

    GString *s = g_string_new(NULL);
    g_string_append_printf(s, "{\"type\":\"train\",\"step\":%" G_GINT64_FORMAT, r->step);
    append_num(s, "loss", r->loss);
    append_num(s, "lr", r->lr);
    append_num(s, "grad_norm", r->grad_norm);
    g_string_append_printf(s, ",\"tokens\":%" G_GINT64_FORMAT ",\"samples\":%" G_GINT64_FORMAT,
                           r->tokens, r->samples);
    append_num(s, "samples_per_s", sps);
    append_num(s, "tokens_per_s", tps);
    append_num(s, "elapsed_s", elapsed);
    append_num(s, "eta_s", eta);
    g_string_append_c(s, '}');
    gboolean ok = write_line(log, s->str, FALSE, error);
    g_string_free(s, TRUE);
    progress(log, r, isfinite(sps) ? sps : 0, elapsed, eta, t);
    return ok;
}

gboolean cl_trainlog_eval(ClTrainLog *log, gint64 step, const char *const *names,
                          const double *values, guint n, GError **error)
{
    g_return_val_if_fail(log != NULL && (n == 0 || (names != NULL && values != NULL)), FALSE);
    GString *s = g_string_new(NULL);
    g_string_append_printf(s, "{\"type\":\"eval\",\"step\":%" G_GINT64_FORMAT, step);
    append_num(s, "elapsed_s", cl_trainlog_elapsed(log));
    g_string_append(s, ",\"metrics\":{");
    for (guint i = 0; i < n; i++) {
        /* names are the caller's: escape them as JSON strings */
        GString *key = g_string_new(NULL);
        for (const char *c = names[i]; *c; c++) {
            if (*c == '"' || *c == '\\')
                g_string_append_printf(key, "\\%c", *c);
            else if ((guchar)*c < 0x20)
                g_string_append_printf(key, "\\u%04x", (guchar)*c);
            else
                g_string_append_c(key, *c);
        }
        char buf[G_ASCII_DTOSTR_BUF_SIZE];
        g_string_append_printf(s, "%s\"%s\":%s", i ? "," : "", key->str,
                               format_num(buf, sizeof buf, values[i]));
        g_string_free(key, TRUE);
    }
    g_string_append(s, "}}");
    gboolean ok = write_line(log, s->str, TRUE, error);
    g_string_free(s, TRUE);
    return ok;
}

gboolean cl_trainlog_close(ClTrainLog *log, GError **error)
{
    if (!log)
        return TRUE;
    GError *local = NULL;
    if (log->file)
        cl_trainlog_sync(log, &local);
    if (log->file && fclose(log->file) != 0 && !local) {
        int e = errno;
        g_set_error(&local, G_FILE_ERROR, g_file_error_from_errno(e),
                    "cannot close training log %s: %s", log->display, g_strerror(e));
    }
    if (log->progress_open) {
        fputc('\n', log->opt.progress);
        fflush(log->opt.progress);
    }
    if (log->deferred && !local)
        local = g_steal_pointer(&log->deferred);
    g_clear_error(&log->deferred);
    g_free(log->display);
    g_free(log);
    if (local) {
        g_propagate_error(error, local);
        return FALSE;
    }
    return TRUE;
}

void cl_trainlog_free(ClTrainLog *log)
{
    cl_trainlog_close(log, NULL);
}
