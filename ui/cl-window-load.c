/* cl-window-load.c - ClWindow's loading: files decoded in a worker thread, ordered as a sequence
 * (DICOM priors by date; a case's images in the case's order), odd sequences flagged, and the
 * records a new case needs; failures told in toasts naming the files. */
#include "cl-window-private.h"

#include <glib/gi18n.h>
#include <string.h>

#include "image/sequence.h"
#include "worker/worker.h"

/* Why a file did not load. Loader messages start with "<path>: "; the toast names the file
 * already. */
static const char *error_reason(GFile *file, const GError *error)
{
    g_autofree char *path = g_file_get_path(file);
    if (!path)
        path = g_file_get_uri(file); /* what cl_document_load() names non-local files by */
    const char *message = error->message;
    gsize len = path ? strlen(path) : 0;
    if (len && g_str_has_prefix(message, path) && message[len] == ':' && message[len + 1] == ' ')
        message += len + 2;
    return message;
}

/* The files that did not load: one toast whatever their number; with more than one it names
 * them and its Details button lists each one's reason (win.show-load-errors). */
static void toast_errors(ClWindow *self, GPtrArray *files, GPtrArray *errors)
{
    g_clear_pointer(&self->load_errors, g_free);
    if (errors->len == 0)
        return;
    if (errors->len == 1) {
        g_autofree char *name = g_file_get_basename(files->pdata[0]);
        g_autofree char *text = g_strdup_printf(_("Could not open “%s”: %s"), name,
                                                error_reason(files->pdata[0], errors->pdata[0]));
        cl_window_toast(self, text);
        return;
    }
    GString *names = g_string_new(NULL), *details = g_string_new(NULL);
    for (guint i = 0; i < errors->len; i++) {
        g_autofree char *name = g_file_get_basename(files->pdata[i]);
        g_string_append_printf(names, "%s“%s”", i ? ", " : "", name);
        /* TRANSLATORS: one line of the list of files that could not be opened: name, reason */
        g_string_append_printf(details, "%s", i ? "\n" : "");
        g_string_append_printf(details, _("“%s”: %s"), name,
                               error_reason(files->pdata[i], errors->pdata[i]));
    }
    g_free(self->load_errors);
    self->load_errors = g_string_free(details, FALSE);
    /* TRANSLATORS: several files could not be opened; %u is how many, %s their names */
    g_autofree char *text = g_strdup_printf(
        ngettext("Could not open %u file: %s", "Could not open %u files: %s", errors->len),
        errors->len, names->str);
    g_string_free(names, TRUE);
    cl_window_toast_with_button(self, text, _("_Details"), "win.show-load-errors");
}

/* ---- loading (worker thread) ---- */

typedef struct {
    GPtrArray *files;     /* GFile*, input */
    GPtrArray *documents; /* ClDocument*, output */
    GPtrArray *errors;    /* GError*, output; errors->pdata[i] belongs to error_files[i] */
    GPtrArray *error_files;
    GPtrArray *warnings;       /* char*, output: mixed patients, sizes, ... */
    gboolean want_case_images; /* a new case will be made of the files: describe them */
    GPtrArray *case_images;    /* ClCaseImage*, output: the shown images' records (path,
                                * frame, sha256, metadata), NULL when not wanted or failed */
    gint64 case_id;            /* the case being opened (its images are its own), or 0 */
    GArray *frames;            /* guint, with case_id: the frame of each file (a case keeps a
                                * multi-frame file once per frame it holds) */
    GArray *doc_frames;        /* guint, output with frames: the frame of each document */
    guint *groups;             /* output with case_images: each image's group (cl_sequence_group) */
    guint n_groups;
} LoadJob;

static void load_job_free(LoadJob *job)
{
    g_clear_pointer(&job->files, g_ptr_array_unref);
    g_clear_pointer(&job->documents, g_ptr_array_unref);
    g_clear_pointer(&job->errors, g_ptr_array_unref);
    g_clear_pointer(&job->error_files, g_ptr_array_unref);
    g_clear_pointer(&job->warnings, g_ptr_array_unref);
    g_clear_pointer(&job->case_images, g_ptr_array_unref);
    g_clear_pointer(&job->frames, g_array_unref);
    g_clear_pointer(&job->doc_frames, g_array_unref);
    g_free(job->groups);
    g_free(job);
}

/* The records of the sequence's images (or the frames of a lone multi-frame file), for the case
 * the window makes of them: hashing reads each file once more, here and not on the main thread.
 * Files that belong to different studies, places or photos make different cases (groups). */
static void load_case_images(LoadJob *job, const ClImage **images, GCancellable *cancellable)
{
    GPtrArray *sorted = job->documents;
    guint n = sorted->len;
    job->case_images = g_ptr_array_new_with_free_func((GDestroyNotify)cl_case_image_free);
    guint items =
        n > 1 ? n : MIN(cl_document_get_n_frames(sorted->pdata[0]), (guint)MAX_OPEN_FILES);
    for (guint i = 0; i < items && job->case_images; i++) {
        ClDocument *doc = n > 1 ? sorted->pdata[i] : sorted->pdata[0];
        guint frame = n > 1 ? 0 : i;
        GFile *file = cl_document_get_file(doc);
        g_autofree char *path = file ? g_file_get_path(file) : NULL;
        if (!path || g_cancellable_is_cancelled(cancellable)) {
            g_clear_pointer(&job->case_images, g_ptr_array_unref);
            break;
        }
        ClCaseImage *ci = g_new0(ClCaseImage, 1);
        if (!cl_case_image_from_file(path, frame, ci, NULL)) {
            cl_case_image_free(ci);
            g_clear_pointer(&job->case_images, g_ptr_array_unref);
            break;
        }
        g_ptr_array_add(job->case_images, ci);
    }
    if (job->case_images && n > 1) {
        job->groups = g_new(guint, n);
        job->n_groups = cl_sequence_group(images, n, job->groups);
    }
}

static void load_thread(GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
    cl_worker_thread_background();
    LoadJob *job = task_data;
    /* Every file is loaded so the sequence can be ordered (DICOM priors by date); the first
     * two in that order are shown. A case's file that it holds several frames of is loaded once
     * and shown at each of those frames. */
    g_autoptr(GHashTable) loaded =
        g_hash_table_new_full(g_file_hash, (GEqualFunc)g_file_equal, NULL, g_object_unref);
    if (job->frames)
        job->doc_frames = g_array_new(FALSE, FALSE, sizeof(guint));
    for (guint i = 0; i < job->files->len && i < MAX_OPEN_FILES; i++) {
        if (g_task_return_error_if_cancelled(task))
            return;
        GFile *file = job->files->pdata[i];
        GError *error = NULL;
        ClDocument *doc = job->frames ? g_hash_table_lookup(loaded, file) : NULL;
        if (doc)
            g_object_ref(doc);
        else if ((doc = cl_document_load(file, NULL, cancellable, &error)) && job->frames)
            g_hash_table_insert(loaded, file, g_object_ref(doc)); /* file: held by the job */
        guint frame = job->frames ? g_array_index(job->frames, guint, i) : 0;
        if (doc && frame >= cl_document_get_n_frames(doc)) {
            /* TRANSLATORS: a case refers to a frame its file no longer has */
            error = g_error_new(CL_IMAGE_ERROR, CL_IMAGE_ERROR_INVALID,
                                _("the case shows frame %u, the file has %u"), frame + 1,
                                cl_document_get_n_frames(doc));
            g_clear_object(&doc);
        }
        if (doc) {
            g_ptr_array_add(job->documents, doc);
            if (job->doc_frames)
                g_array_append_val(job->doc_frames, frame);
        } else {
            g_ptr_array_add(job->errors, error);
            g_ptr_array_add(job->error_files, g_object_ref(file));
        }
    }
    if (g_task_return_error_if_cancelled(task))
        return;
    guint n = job->documents->len;
    g_autofree const ClImage **images = g_new(const ClImage *, n ? n : 1);
    for (guint i = 0; i < n; i++)
        images[i] = cl_document_get_image(job->documents->pdata[i]);
    g_autofree guint *order = g_new(guint, n ? n : 1);
    if (job->case_id) {
        /* a case's images come in the order the case keeps */
        for (guint i = 0; i < n; i++)
            order[i] = i;
    } else {
        cl_sequence_order(images, n, order);
    }
    GPtrArray *sorted = g_ptr_array_new_with_free_func(g_object_unref);
    for (guint i = 0; i < n; i++)
        g_ptr_array_add(sorted, g_object_ref(job->documents->pdata[order[i]]));
    for (guint i = 0; i < n; i++)
        images[i] = cl_document_get_image(sorted->pdata[i]);
    job->warnings = cl_sequence_warnings(images, n);
    g_ptr_array_unref(job->documents);
    job->documents = sorted;
    if (job->want_case_images && n > 0)
        load_case_images(job, images, cancellable);
    g_task_return_boolean(task, TRUE);
}

static void load_done(GObject *source, GAsyncResult *result, gpointer user_data)
{
    GTask *task = G_TASK(result);
    /* Dropped when a newer open (or closing the window) cancelled it. */
    if (g_cancellable_is_cancelled(g_task_get_cancellable(task)))
        return;
    ClWindow *self = CL_WINDOW(source);
    g_clear_object(&self->load_cancellable);

    g_autoptr(GError) error = NULL;
    if (g_task_propagate_boolean(task, &error)) {
        LoadJob *job = g_task_get_task_data(task);
        toast_errors(self, job->error_files, job->errors);
        if (job->files->len > MAX_OPEN_FILES) {
            g_autofree char *text = g_strdup_printf(_("Only the first %u of %u files were opened"),
                                                    MAX_OPEN_FILES, job->files->len);
            cl_window_toast(self, text);
        }
        for (guint i = 0; job->warnings && i < job->warnings->len; i++) {
            /* flagged, not refused: the user decides whether the comparison makes sense */
            /* TRANSLATORS: the sequence was opened but looks odd (mixed patients, sizes, ...) */
            g_autofree char *text =
                g_strdup_printf(_("Warning: %s"), (char *)job->warnings->pdata[i]);
            cl_window_toast(self, text);
        }
        if (job->documents->len > 0) {
            if (!job->case_id)
                cl_window_cases_save_pending(self);
            cl_window_show_documents(
                self, job->documents,
                job->doc_frames ? (const guint *)(gpointer)job->doc_frames->data : NULL);
            cl_window_cases_loaded(self, job->documents, job->case_images, job->groups,
                                   job->n_groups);
        }
    }
    cl_window_update_busy(self);
}

static void open_now(ClWindow *self, gpointer data)
{
    GPtrArray *files = data;
    cl_window_load_files(self, (GFile *const *)files->pdata, NULL, files->len, 0);
}

void cl_window_open_files(ClWindow *self, GFile *const *files, guint n_files)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    g_return_if_fail(files != NULL || n_files == 0);
    if (n_files == 0)
        return;
    GPtrArray *list = g_ptr_array_new_with_free_func(g_object_unref);
    for (guint i = 0; i < n_files; i++)
        g_ptr_array_add(list, g_object_ref(files[i]));
    /* new files make a new case: an edit of the shown one is kept or dropped as asked */
    cl_window_cases_confirm_unsaved(self, open_now, list, (GDestroyNotify)g_ptr_array_unref);
}

void cl_window_load_files(ClWindow *self, GFile *const *files, const guint *frames, guint n_files,
                          gint64 case_id)
{
    g_return_if_fail(files != NULL || n_files == 0);
    if (n_files == 0)
        return;
    if (self->load_cancellable) {
        g_cancellable_cancel(self->load_cancellable);
        g_clear_object(&self->load_cancellable);
    }
    /* the case shown is left as it is: its window/level and alignment come back with it */
    cl_window_caseview_remember(self);
    LoadJob *job = g_new0(LoadJob, 1);
    job->files = g_ptr_array_new_with_free_func(g_object_unref);
    for (guint i = 0; i < n_files; i++)
        g_ptr_array_add(job->files, g_object_ref(files[i]));
    job->documents = g_ptr_array_new_with_free_func(g_object_unref);
    job->errors = g_ptr_array_new_with_free_func((GDestroyNotify)g_error_free);
    job->error_files = g_ptr_array_new_with_free_func(g_object_unref);
    job->case_id = case_id;
    if (frames && case_id) {
        job->frames = g_array_sized_new(FALSE, FALSE, sizeof(guint), n_files);
        g_array_append_vals(job->frames, frames, n_files);
    }
    job->want_case_images = self->db != NULL && case_id == 0;
    self->pending_case_id = case_id;

    self->load_cancellable = g_cancellable_new();
    g_autoptr(GTask) task = g_task_new(self, self->load_cancellable, load_done, NULL);
    g_task_set_source_tag(task, cl_window_open_files);
    g_task_set_task_data(task, job, (GDestroyNotify)load_job_free);
    g_task_run_in_thread(task, load_thread);
    cl_window_update_busy(self);
}
