/* cl-window-export.c - ClWindow's report of the case shown: the question about an unsaved edit,
 * the export's options (de-identification, with the changes it makes to what people wrote shown
 * before anything is written), the view on screen captured for the report (window/level,
 * alignment, ignore regions, compare mode, tolerance, heat map), and the worker that writes it. */
#include "cl-window-private.h"

#include <glib/gi18n.h>
#include <string.h>

#include "cl-config.h"
#include "report/report.h"
#include "worker/worker.h"

typedef struct {
    ClCase *c;
    char *path;
    ClReportFormat format;
    gboolean deidentify;
    gboolean burned_in_checked; /* the reviewer looked at the pixels that may show text */
    GPtrArray *warnings;
    gboolean has_view;
    ClReportView view; /* points into the fields below */
    char *align_status, *compare_mode, *heatmap_source;
    double *masks;
} ExportJob;

static void export_job_free(ExportJob *j)
{
    g_clear_pointer(&j->c, cl_case_free);
    g_free(j->path);
    g_clear_pointer(&j->warnings, g_ptr_array_unref);
    g_free(j->align_status);
    g_free(j->compare_mode);
    g_free(j->heatmap_source);
    g_free(j->masks);
    g_free(j);
}

static void export_thread(GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    cl_worker_thread_background();
    ExportJob *j = data;
    ClReportOptions o;
    cl_report_options_init(&o, j->c);
    o.format = j->format;
    o.deidentify = j->deidentify;
    o.burned_in_checked = j->burned_in_checked;
    o.generator = "ChangeLens " CL_VERSION;
    o.view = j->has_view ? &j->view : NULL;
    GError *error = NULL;
    if (cl_report_export(j->c, &o, j->path, j->warnings, &error))
        g_task_return_boolean(task, TRUE);
    else
        g_task_return_error(task, error);
}

static void export_done(GObject *source, GAsyncResult *result, gpointer user_data)
{
    GTask *task = G_TASK(result);
    /* the window went away while the report was written: nothing to tell */
    if (g_cancellable_is_cancelled(g_task_get_cancellable(task)))
        return;
    ClWindow *self = CL_WINDOW(source);
    ExportJob *j = g_task_get_task_data(task);
    g_autoptr(GError) error = NULL;
    gboolean ok = g_task_propagate_boolean(task, &error);
    g_clear_object(&self->export_cancellable);
    g_autofree char *name = g_path_get_basename(j->path);
    if (ok) {
        /* TRANSLATORS: a report was written; %s is its file name */
        g_autofree char *msg = j->warnings->len
                                   ? g_strdup_printf(_("Report saved as “%s” (%s)"), name,
                                                     (char *)j->warnings->pdata[0])
                                   : g_strdup_printf(_("Report saved as “%s”"), name);
        cl_window_toast(self, msg);
    } else {
        g_autofree char *msg = g_strdup_printf(_("The report was not saved: %s"), error->message);
        cl_window_toast(self, msg);
    }
    self->last_export_ok = ok;
    cl_window_update_actions(self);
    g_object_notify(G_OBJECT(self), "busy");
}

/* What the window shows now, for the report: the pair (when the sequence is the case's), each
 * image's display transform, the alignment, the ignore regions, the mode, the tolerance and the
 * heat map. */
static void capture_view(ClWindow *self, ExportJob *j)
{
    const ClCaseImage *before = cl_window_cases_image_at(self, self->pair_a);
    const ClCaseImage *after = cl_window_cases_image_at(self, self->pair_b);
    if (!before || !after || before == after)
        return;
    ClReportView *v = &j->view;
    j->has_view = TRUE;
    v->before_image_id = before->id;
    v->after_image_id = after->id;
    for (guint i = 0; i < 2; i++)
        v->has_display[i] = cl_image_view_get_display(cl_window_get_view(self, i), &v->display[i]);
    /* an alignment still being computed is not on screen yet */
    v->aligned = self->aligned && !self->align_cancellable &&
                 cl_image_view_get_alignment(cl_window_get_view(self, 1), v->align_m);
    if (v->aligned)
        v->align_status = j->align_status =
            g_strdup(cl_compare_view_get_align_status(self->compare_view));
    guint n = 0;
    const double *masks = cl_compare_view_get_masks(self->compare_view, &n);
    if (n && masks) {
        v->masks = j->masks = g_memdup2(masks, sizeof(double) * 4 * n);
        v->n_masks = n;
    }
    v->compare_mode = j->compare_mode =
        g_strdup(cl_compare_view_get_compare_mode(self->compare_view));
    v->tolerance = cl_compare_view_get_tolerance(self->compare_view);
    v->changed_fraction = g_strcmp0(v->compare_mode, "difference") == 0
                              ? cl_image_view_get_changed_fraction(cl_window_get_view(self, 0))
                              : -1;
    v->heatmap_shown = cl_window_get_show_heatmap(self);
    /* the kind of the heat map shown: the latest run's mean map of the later image */
    const ClCaseRun *run = cl_case_latest_run(self->current_case);
    const ClCaseHeatmap *h =
        run ? cl_case_find_heatmap(self->current_case, run->id, after->id, -1) : NULL;
    if (h && h->kind)
        v->heatmap_source = j->heatmap_source = g_strdup(h->kind);
}

static void start_export(ClWindow *self, const char *path, gboolean deidentify,
                         gboolean burned_in_checked)
{
    if (!self->db || !self->current_case || self->export_cancellable)
        return;
    ExportJob *j = g_new0(ExportJob, 1);
    j->format = g_str_has_suffix(path, ".html") || g_str_has_suffix(path, ".htm") ? CL_REPORT_HTML
                : g_str_has_suffix(path, ".json")                                 ? CL_REPORT_JSON
                                                                                  : CL_REPORT_PDF;
    j->deidentify = deidentify;
    j->burned_in_checked = burned_in_checked;
    g_autoptr(GError) error = NULL;
    j->c = cl_casedb_get_case(self->db, self->current_case->summary.id,
                              CL_CASE_HEATMAP_DATA | CL_CASE_CHECK_FILES, &error);
    if (!j->c) {
        g_autofree char *msg = g_strdup_printf(_("The report was not saved: %s"), error->message);
        cl_window_toast(self, msg);
        export_job_free(j);
        return;
    }
    capture_view(self, j);
    j->path = g_strdup(path);
    j->warnings = g_ptr_array_new_with_free_func(g_free);
    self->export_cancellable = g_cancellable_new();
    self->last_export_ok = FALSE;
    g_autoptr(GTask) task = g_task_new(self, self->export_cancellable, export_done, NULL);
    g_task_set_task_data(task, j, (GDestroyNotify)export_job_free);
    g_task_run_in_thread(task, export_thread);
    cl_window_update_actions(self);
    g_object_notify(G_OBJECT(self), "busy");
}

/* ---- the options: de-identification, and what it changes in the reviewer's text ---- */

/* The rows saying what de-identification changes in what people wrote (shown while it is on). */
static GtkWidget *changes_group(ClWindow *self)
{
    ClReportOptions o;
    cl_report_options_init(&o, self->current_case);
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) changes = cl_report_deid_text_changes(self->current_case, &o, &error);
    GtkWidget *group = adw_preferences_group_new();
    adw_preferences_group_set_title(ADW_PREFERENCES_GROUP(group), _("Changes to Your Text"));
    if (!changes) {
        /* TRANSLATORS: the de-identification key could not be read; %s says why */
        g_autofree char *why =
            g_strdup_printf(_("De-identification cannot be prepared: %s"), error->message);
        adw_preferences_group_set_description(ADW_PREFERENCES_GROUP(group), why);
        return group;
    }
    if (changes->len == 0) {
        adw_preferences_group_set_description(
            ADW_PREFERENCES_GROUP(group),
            _("De-identification changes nothing in the descriptions, notes and labels written "
              "for this case."));
        return group;
    }
    adw_preferences_group_set_description(
        ADW_PREFERENCES_GROUP(group),
        _("In the report only: the case keeps every text as written and signed."));
    for (guint i = 0; i < changes->len; i++) {
        const ClReportTextChange *t = changes->pdata[i];
        GtkWidget *row = adw_action_row_new();
        g_autofree char *where = g_markup_escape_text(t->where, -1);
        adw_preferences_row_set_title(ADW_PREFERENCES_ROW(row), where);
        /* TRANSLATORS: a text as written, then as the de-identified report will show it */
        g_autofree char *sub =
            g_markup_printf_escaped(_("As written: %s\nIn the report: %s"), t->before, t->after);
        adw_action_row_set_subtitle(ADW_ACTION_ROW(row), sub);
        adw_action_row_set_subtitle_lines(ADW_ACTION_ROW(row), 0);
        gtk_widget_set_name(row, "deid-change");
        adw_preferences_group_add(ADW_PREFERENCES_GROUP(group), row);
    }
    return group;
}

static void on_export_options_response(AdwMessageDialog *dialog, const char *response,
                                       ClWindow *self)
{
    if (self->export_dialog) {
        g_object_remove_weak_pointer(G_OBJECT(self->export_dialog),
                                     (gpointer *)&self->export_dialog);
        self->export_dialog = NULL;
    }
    if (!g_str_equal(response, "export"))
        return;
    GtkSwitch *sw = g_object_get_data(G_OBJECT(dialog), "cl-deidentify");
    GtkSwitch *checked = g_object_get_data(G_OBJECT(dialog), "cl-burned-in-checked");
    const char *path = g_object_get_data(G_OBJECT(dialog), "cl-path");
    start_export(self, path, gtk_switch_get_active(sw), checked && gtk_switch_get_active(checked));
}

static void ask_options(ClWindow *self, gpointer data)
{
    const char *path = data;
    if (!self->db || !self->current_case || self->export_cancellable)
        return;
    if (self->export_dialog) {
        gtk_window_present(self->export_dialog);
        return;
    }
    g_autofree char *name = g_path_get_basename(path);
    /* TRANSLATORS: the export's options, after the file was chosen */
    GtkWidget *d = adw_message_dialog_new(GTK_WINDOW(self), _("Export Report"), NULL);
    adw_message_dialog_format_body(ADW_MESSAGE_DIALOG(d), _("The report of “%s” goes to “%s”."),
                                   self->current_case->summary.name, name);
    GtkWidget *box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 12);
    GtkWidget *main_group = adw_preferences_group_new();
    GtkWidget *row = adw_action_row_new();
    adw_preferences_row_set_title(ADW_PREFERENCES_ROW(row), _("_De-identify"));
    adw_preferences_row_set_use_underline(ADW_PREFERENCES_ROW(row), TRUE);
    adw_action_row_set_subtitle(
        ADW_ACTION_ROW(row),
        _("Removes the patient's names and IDs, replaces UIDs and file names, and moves every "
          "date back by the same number of days, sign-off dates and dates in your text included "
          "(DICOM PS3.15 basic profile)"));
    adw_action_row_set_subtitle_lines(ADW_ACTION_ROW(row), 0);
    GtkWidget *sw = gtk_switch_new();
    gtk_widget_set_valign(sw, GTK_ALIGN_CENTER);
    /* on by default for DICOM cases, as the command line does */
    ClReportOptions o;
    cl_report_options_init(&o, self->current_case);
    gtk_switch_set_active(GTK_SWITCH(sw), o.deidentify);
    adw_action_row_add_suffix(ADW_ACTION_ROW(row), sw);
    adw_action_row_set_activatable_widget(ADW_ACTION_ROW(row), sw);
    adw_preferences_group_add(ADW_PREFERENCES_GROUP(main_group), row);
    gtk_box_append(GTK_BOX(box), main_group);
    /* de-identification changes metadata and text, never pixels: where they may show text, the
     * reviewer says they looked (else the export is refused with the reason) */
    const guint burned = cl_report_burned_in_images(self->current_case);
    if (burned > 0) {
        GtkWidget *brow = adw_action_row_new();
        adw_preferences_row_set_title(ADW_PREFERENCES_ROW(brow), _("_Pixels checked"));
        adw_preferences_row_set_use_underline(ADW_PREFERENCES_ROW(brow), TRUE);
        g_autofree char *sub = g_strdup_printf(
            ngettext("%u image may show text burned into its pixels (burned-in annotation, "
                     "or ultrasound), which de-identification does not remove: switch this on "
                     "once you have looked and found no name, ID or date there",
                     "%u images may show text burned into their pixels (burned-in "
                     "annotation, or ultrasound), which de-identification does not remove: "
                     "switch this on once you have looked and found no name, ID or date there",
                     burned),
            burned);
        adw_action_row_set_subtitle(ADW_ACTION_ROW(brow), sub);
        adw_action_row_set_subtitle_lines(ADW_ACTION_ROW(brow), 0);
        GtkWidget *bsw = gtk_switch_new();
        gtk_widget_set_valign(bsw, GTK_ALIGN_CENTER);
        adw_action_row_add_suffix(ADW_ACTION_ROW(brow), bsw);
        adw_action_row_set_activatable_widget(ADW_ACTION_ROW(brow), bsw);
        gtk_widget_set_name(brow, "burned-in-checked");
        adw_preferences_group_add(ADW_PREFERENCES_GROUP(main_group), brow);
        g_object_bind_property(sw, "active", brow, "visible", G_BINDING_SYNC_CREATE);
        g_object_set_data(G_OBJECT(d), "cl-burned-in-checked", bsw);
    }
    GtkWidget *changes = changes_group(self);
    g_object_bind_property(sw, "active", changes, "visible", G_BINDING_SYNC_CREATE);
    gtk_box_append(GTK_BOX(box), changes);
    adw_message_dialog_set_extra_child(ADW_MESSAGE_DIALOG(d), box);
    adw_message_dialog_add_responses(ADW_MESSAGE_DIALOG(d), "cancel", _("_Cancel"), "export",
                                     _("_Export"), NULL);
    adw_message_dialog_set_response_appearance(ADW_MESSAGE_DIALOG(d), "export",
                                               ADW_RESPONSE_SUGGESTED);
    adw_message_dialog_set_default_response(ADW_MESSAGE_DIALOG(d), "export");
    adw_message_dialog_set_close_response(ADW_MESSAGE_DIALOG(d), "cancel");
    gtk_window_set_destroy_with_parent(GTK_WINDOW(d), TRUE);
    g_object_set_data(G_OBJECT(d), "cl-deidentify", sw);
    g_object_set_data_full(G_OBJECT(d), "cl-path", g_strdup(path), g_free);
    g_signal_connect_object(d, "response", G_CALLBACK(on_export_options_response), self, 0);
    self->export_dialog = GTK_WINDOW(d);
    g_object_add_weak_pointer(G_OBJECT(d), (gpointer *)&self->export_dialog);
    gtk_window_present(GTK_WINDOW(d));
}

void cl_window_export_report(ClWindow *self, GFile *file)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    g_return_if_fail(G_IS_FILE(file));
    if (!self->db || !self->current_case || self->export_cancellable)
        return;
    g_autofree char *path = g_file_get_path(file);
    if (!path) {
        cl_window_toast(self, _("Reports are saved to local files only"));
        return;
    }
    /* an unsaved edit is neither filed nor lost without asking: the report shows what is saved */
    cl_window_cases_confirm_unsaved_for(self, CL_UNSAVED_EXPORT, ask_options,
                                        g_steal_pointer(&path), g_free);
}

gboolean cl_window_get_exporting(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    return self->export_cancellable != NULL;
}

gboolean cl_window_get_last_export_ok(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    return self->last_export_ok;
}
