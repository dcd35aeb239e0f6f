/* cl-pacs-dialog.c - the "From PACS…" window (cl-pacs-dialog.h). The widgets are built here in
 * code; the state lives in a PacsDialog kept on the window and in each running task, so that a
 * task finishing after the window closed touches nothing. */
#include "cl-pacs-dialog.h"

#include <adwaita.h>
#include <glib/gi18n.h>
#include <string.h>

#include "cl-window-private.h"
#include "pacs/pacs.h"

typedef struct {
    gint ref;
    GtkWindow *win; /* NULL once closed */
    ClWindow *parent;
    GSettings *settings; /* NULL without the schema */
    GtkWidget *protocol, *host, *port, *aec, *aet, *url, *patient, *accession;
    GtkWidget *find, *open, *results, *status, *spinner;
    GPtrArray *matches; /* ClPacsMatch*, oldest first */
    GPtrArray *checks;  /* GtkCheckButton* per match */
    gboolean busy;
} PacsDialog;

static PacsDialog *dialog_ref(PacsDialog *d)
{
    g_atomic_int_inc(&d->ref);
    return d;
}

static void dialog_unref(PacsDialog *d)
{
    if (!g_atomic_int_dec_and_test(&d->ref))
        return;
    g_clear_object(&d->settings);
    g_clear_pointer(&d->matches, g_ptr_array_unref);
    g_clear_pointer(&d->checks, g_ptr_array_unref);
    if (d->parent)
        g_object_remove_weak_pointer(G_OBJECT(d->parent), (gpointer *)&d->parent);
    g_free(d);
}

char *cl_pacs_dialog_folder(void)
{
    const char *env = g_getenv("CHANGELENS_DATA");
    if (env && *env)
        return g_build_filename(env, "pacs", NULL);
    return g_build_filename(g_get_user_data_dir(), "changelens", "pacs", NULL);
}

/* ---- the connection, copied for a thread ---- */

typedef struct {
    char *host, *aec, *aet, *url, *patient, *accession;
    guint16 port;
    ClPacsPeer peer;
    ClPacsQuery query;
    GPtrArray *uids;  /* open: the studies to retrieve, oldest first */
    GPtrArray *files; /* open: what came, in order */
    char *folder;
} Job;

static void job_free(Job *j)
{
    g_free(j->host);
    g_free(j->aec);
    g_free(j->aet);
    g_free(j->url);
    g_free(j->patient);
    g_free(j->accession);
    g_free(j->folder);
    if (j->uids)
        g_ptr_array_unref(j->uids);
    if (j->files)
        g_ptr_array_unref(j->files);
    g_free(j);
}

static char *entry_text(GtkWidget *w)
{
    return g_strstrip(g_strdup(gtk_editable_get_text(GTK_EDITABLE(w))));
}

static gboolean web_chosen(PacsDialog *d)
{
    return adw_combo_row_get_selected(ADW_COMBO_ROW(d->protocol)) == 1;
}

static void set_status(PacsDialog *d, const char *text, gboolean error)
{
    gtk_label_set_text(GTK_LABEL(d->status), text ? text : "");
    if (error)
        gtk_widget_add_css_class(d->status, "error");
    else
        gtk_widget_remove_css_class(d->status, "error");
}

static void set_busy(PacsDialog *d, gboolean busy)
{
    d->busy = busy;
    gtk_spinner_set_spinning(GTK_SPINNER(d->spinner), busy);
    gtk_widget_set_visible(d->spinner, busy);
    gtk_widget_set_sensitive(d->find, !busy);
    gtk_widget_set_sensitive(d->open, !busy && d->matches && d->matches->len > 0);
}

/* The fields as a job; NULL with the reason in the status line when one is missing or wrong. */
static Job *job_from_fields(PacsDialog *d, gboolean need_query)
{
    Job *j = g_new0(Job, 1);
    j->host = entry_text(d->host);
    j->aec = entry_text(d->aec);
    j->aet = entry_text(d->aet);
    j->url = entry_text(d->url);
    j->patient = entry_text(d->patient);
    j->accession = entry_text(d->accession);
    g_autofree char *port = entry_text(d->port);
    guint64 p = 0;
    const char *problem = NULL;
    if (web_chosen(d)) {
        if (!*j->url)
            problem = _("Enter the PACS's DICOMweb address (http://host:port/dicom-web).");
    } else if (!*j->host) {
        problem = _("Enter the PACS's host name or address.");
    } else if (!g_ascii_string_to_unsigned(port, 10, 1, 65535, &p, NULL)) {
        problem = _("The port must be a number from 1 to 65535.");
    }
    if (!problem && need_query && !*j->patient && !*j->accession)
        problem = _("Enter a patient ID or an accession number.");
    if (problem) {
        set_status(d, problem, TRUE);
        job_free(j);
        return NULL;
    }
    j->port = (guint16)p;
    j->peer.host = j->host;
    j->peer.port = j->port;
    j->peer.called_aet = *j->aec ? j->aec : "ANY-SCP";
    j->peer.our_aet = *j->aet ? j->aet : "CHANGELENS";
    j->peer.dicomweb = web_chosen(d) ? j->url : NULL;
    j->query.patient_id = *j->patient ? j->patient : NULL;
    j->query.accession = *j->accession ? j->accession : NULL;
    return j;
}

static void remember(PacsDialog *d, const Job *j)
{
    if (!d->settings)
        return;
    g_settings_set_string(d->settings, "pacs-protocol", j->peer.dicomweb ? "dicomweb" : "dimse");
    if (j->peer.dicomweb) {
        g_settings_set_string(d->settings, "pacs-dicomweb", j->url);
        return;
    }
    g_settings_set_string(d->settings, "pacs-host", j->host);
    g_settings_set_int(d->settings, "pacs-port", j->port);
    g_settings_set_string(d->settings, "pacs-aec", j->aec);
    g_settings_set_string(d->settings, "pacs-aet", j->aet);
}

/* ---- find ---- */

static void find_thread(GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    Job *j = data;
    GError *error = NULL;
    GPtrArray *m = cl_pacs_find(&j->peer, CL_PACS_LEVEL_STUDY, &j->query, &error);
    if (m)
        g_task_return_pointer(task, m, (GDestroyNotify)g_ptr_array_unref);
    else
        g_task_return_error(task, error);
}

static char *show_date(const char *da)
{
    if (da && strlen(da) == 8)
        return g_strdup_printf("%.4s-%.2s-%.2s", da, da + 4, da + 6);
    return g_strdup(da && *da ? da : _("(no date)"));
}

static void clear_results(PacsDialog *d)
{
    GtkWidget *row;
    while ((row = gtk_widget_get_first_child(d->results)))
        gtk_list_box_remove(GTK_LIST_BOX(d->results), row);
    g_clear_pointer(&d->matches, g_ptr_array_unref);
    g_ptr_array_set_size(d->checks, 0);
}

static void show_results(PacsDialog *d, GPtrArray *m)
{
    clear_results(d);
    d->matches = g_ptr_array_ref(m);
    for (guint i = 0; i < m->len; i++) {
        const ClPacsMatch *x = g_ptr_array_index(m, i);
        g_autofree char *date = show_date(x->study_date);
        g_autofree char *title = g_markup_printf_escaped(
            "%s — %s", date, *x->study_description ? x->study_description : _("(no description)"));
        g_autofree char *series =
            x->n_series >= 0 ? g_strdup_printf("%d", x->n_series) : g_strdup("?");
        g_autofree char *inst =
            x->n_instances >= 0 ? g_strdup_printf("%d", x->n_instances) : g_strdup("?");
        /* TRANSLATORS: patient name (patient ID) · modalities · accession · series, instances */
        g_autofree char *subtitle = g_markup_printf_escaped(
            _("%s (ID %s) · %s · accession %s · %s series, %s instances"), x->patient_name,
            x->patient_id, *x->modalities ? x->modalities : "?", *x->accession ? x->accession : "-",
            series, inst);
        GtkWidget *row = adw_action_row_new();
        adw_preferences_row_set_title(ADW_PREFERENCES_ROW(row), title);
        adw_action_row_set_subtitle(ADW_ACTION_ROW(row), subtitle);
        GtkWidget *check = gtk_check_button_new();
        gtk_check_button_set_active(GTK_CHECK_BUTTON(check), TRUE);
        gtk_widget_set_valign(check, GTK_ALIGN_CENTER);
        gtk_accessible_update_property(GTK_ACCESSIBLE(check), GTK_ACCESSIBLE_PROPERTY_LABEL, title,
                                       -1);
        adw_action_row_add_prefix(ADW_ACTION_ROW(row), check);
        adw_action_row_set_activatable_widget(ADW_ACTION_ROW(row), check);
        gtk_list_box_append(GTK_LIST_BOX(d->results), row);
        g_ptr_array_add(d->checks, check);
    }
}

static void find_done(GObject *source, GAsyncResult *result, gpointer user_data)
{
    PacsDialog *d = user_data;
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) m = g_task_propagate_pointer(G_TASK(result), &error);
    if (d->win) {
        set_busy(d, FALSE);
        if (!m) {
            set_status(d, error->message, TRUE);
        } else {
            show_results(d, m);
            g_autofree char *text =
                m->len == 0 ? g_strdup(_("No study matches."))
                            : g_strdup_printf(g_dngettext(NULL,
                                                          "%u study found: check the ones "
                                                          "to open (the priors too).",
                                                          "%u studies found: check the ones to "
                                                          "open (the priors too).",
                                                          m->len),
                                              m->len);
            set_status(d, text, FALSE);
            set_busy(d, FALSE);
        }
    }
    dialog_unref(d);
}

static void on_find(GtkButton *button, PacsDialog *d)
{
    if (d->busy)
        return;
    Job *j = job_from_fields(d, TRUE);
    if (!j)
        return;
    remember(d, j);
    clear_results(d);
    set_status(d, _("Looking for studies…"), FALSE);
    set_busy(d, TRUE);
    g_autoptr(GTask) task = g_task_new(NULL, NULL, find_done, dialog_ref(d));
    g_task_set_task_data(task, j, (GDestroyNotify)job_free);
    g_task_run_in_thread(task, find_thread);
}

static void on_entry_activated(AdwEntryRow *row, PacsDialog *d)
{
    on_find(NULL, d);
}

/* ---- open ---- */

static gint compare_paths(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void open_thread(GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    Job *j = data;
    for (guint i = 0; i < j->uids->len; i++) {
        const char *uid = g_ptr_array_index(j->uids, i);
        g_autofree char *dir = g_build_filename(j->folder, uid, NULL);
        g_autoptr(GPtrArray) got = g_ptr_array_new_with_free_func(g_free);
        GError *error = NULL;
        if (!cl_pacs_get_study(&j->peer, uid, dir, got, &error)) {
            g_task_return_error(task, error);
            return;
        }
        /* within a study, by file name (the SOP instance UIDs), as the CLI prints them */
        g_ptr_array_sort(got, compare_paths);
        for (guint k = 0; k < got->len; k++)
            g_ptr_array_add(j->files, g_strdup(g_ptr_array_index(got, k)));
    }
    g_task_return_boolean(task, TRUE);
}

static void open_done(GObject *source, GAsyncResult *result, gpointer user_data)
{
    PacsDialog *d = user_data;
    g_autoptr(GError) error = NULL;
    Job *j = g_task_get_task_data(G_TASK(result));
    if (!g_task_propagate_boolean(G_TASK(result), &error)) {
        if (d->win) {
            set_busy(d, FALSE);
            set_status(d, error->message, TRUE);
        }
    } else if (d->parent) {
        g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_object_unref);
        for (guint i = 0; i < j->files->len; i++)
            g_ptr_array_add(files, g_file_new_for_path(g_ptr_array_index(j->files, i)));
        cl_window_open_files(d->parent, (GFile *const *)files->pdata, files->len);
        if (d->win)
            gtk_window_destroy(d->win);
    }
    dialog_unref(d);
}

static void on_open(GtkButton *button, PacsDialog *d)
{
    if (d->busy || !d->matches)
        return;
    Job *j = job_from_fields(d, FALSE);
    if (!j)
        return;
    j->uids = g_ptr_array_new_with_free_func(g_free);
    j->files = g_ptr_array_new_with_free_func(g_free);
    j->folder = cl_pacs_dialog_folder();
    for (guint i = 0; i < d->matches->len; i++)
        if (gtk_check_button_get_active(GTK_CHECK_BUTTON(g_ptr_array_index(d->checks, i))))
            g_ptr_array_add(j->uids,
                            g_strdup(((ClPacsMatch *)g_ptr_array_index(d->matches, i))->study_uid));
    if (j->uids->len == 0) {
        set_status(d, _("Check at least one study to open."), TRUE);
        job_free(j);
        return;
    }
    g_autofree char *text = g_strdup_printf(
        g_dngettext(NULL, "Retrieving %u study…", "Retrieving %u studies…", j->uids->len),
        j->uids->len);
    set_status(d, text, FALSE);
    set_busy(d, TRUE);
    g_autoptr(GTask) task = g_task_new(NULL, NULL, open_done, dialog_ref(d));
    g_task_set_task_data(task, j, (GDestroyNotify)job_free);
    g_task_run_in_thread(task, open_thread);
}

/* ---- the window ---- */

static void on_protocol(GObject *row, GParamSpec *pspec, PacsDialog *d)
{
    const gboolean web = web_chosen(d);
    gtk_widget_set_visible(d->url, web);
    gtk_widget_set_visible(d->host, !web);
    gtk_widget_set_visible(d->port, !web);
    gtk_widget_set_visible(d->aec, !web);
    gtk_widget_set_visible(d->aet, !web);
}

static void on_destroy(GtkWidget *win, PacsDialog *d)
{
    d->win = NULL;
    dialog_unref(d);
}

static GtkWidget *entry_row(const char *title, const char *name, GtkWidget *group)
{
    GtkWidget *row = adw_entry_row_new();
    adw_preferences_row_set_title(ADW_PREFERENCES_ROW(row), title);
    adw_preferences_row_set_use_underline(ADW_PREFERENCES_ROW(row), TRUE);
    gtk_widget_set_name(row, name);
    adw_preferences_group_add(ADW_PREFERENCES_GROUP(group), row);
    return row;
}

static void fill_from_settings(PacsDialog *d)
{
    gtk_editable_set_text(GTK_EDITABLE(d->port), "104");
    gtk_editable_set_text(GTK_EDITABLE(d->aet), "CHANGELENS");
    if (!d->settings)
        return;
    g_autofree char *proto = g_settings_get_string(d->settings, "pacs-protocol");
    g_autofree char *host = g_settings_get_string(d->settings, "pacs-host");
    g_autofree char *aec = g_settings_get_string(d->settings, "pacs-aec");
    g_autofree char *aet = g_settings_get_string(d->settings, "pacs-aet");
    g_autofree char *url = g_settings_get_string(d->settings, "pacs-dicomweb");
    g_autofree char *port = g_strdup_printf("%d", g_settings_get_int(d->settings, "pacs-port"));
    adw_combo_row_set_selected(ADW_COMBO_ROW(d->protocol), g_str_equal(proto, "dicomweb"));
    gtk_editable_set_text(GTK_EDITABLE(d->host), host);
    gtk_editable_set_text(GTK_EDITABLE(d->port), port);
    gtk_editable_set_text(GTK_EDITABLE(d->aec), aec);
    gtk_editable_set_text(GTK_EDITABLE(d->aet), *aet ? aet : "CHANGELENS");
    gtk_editable_set_text(GTK_EDITABLE(d->url), url);
}

GtkWindow *cl_pacs_dialog_new(ClWindow *parent)
{
    g_return_val_if_fail(CL_IS_WINDOW(parent), NULL);
    PacsDialog *d = g_new0(PacsDialog, 1);
    d->ref = 1;
    d->parent = parent;
    g_object_add_weak_pointer(G_OBJECT(parent), (gpointer *)&d->parent);
    if (parent->settings)
        d->settings = g_object_ref(parent->settings);
    d->checks = g_ptr_array_new();

    GtkWidget *win = adw_window_new();
    d->win = GTK_WINDOW(win);
    gtk_window_set_title(d->win, _("From PACS"));
    gtk_window_set_transient_for(d->win, GTK_WINDOW(parent));
    gtk_window_set_modal(d->win, TRUE);
    gtk_window_set_default_size(d->win, 560, 720);
    gtk_widget_set_name(win, "pacs-dialog");

    GtkWidget *box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 0);
    GtkWidget *header = adw_header_bar_new();
    gtk_box_append(GTK_BOX(box), header);
    GtkWidget *scroll = gtk_scrolled_window_new();
    gtk_scrolled_window_set_policy(GTK_SCROLLED_WINDOW(scroll), GTK_POLICY_NEVER,
                                   GTK_POLICY_AUTOMATIC);
    gtk_widget_set_vexpand(scroll, TRUE);
    GtkWidget *clamp = adw_clamp_new();
    GtkWidget *content = gtk_box_new(GTK_ORIENTATION_VERTICAL, 18);
    gtk_widget_set_margin_top(content, 18);
    gtk_widget_set_margin_bottom(content, 18);
    gtk_widget_set_margin_start(content, 12);
    gtk_widget_set_margin_end(content, 12);

    GtkWidget *where = adw_preferences_group_new();
    adw_preferences_group_set_title(ADW_PREFERENCES_GROUP(where), _("PACS"));
    d->protocol = adw_combo_row_new();
    adw_preferences_row_set_title(ADW_PREFERENCES_ROW(d->protocol), _("Protocol"));
    const char *protocols[] = { _("DICOM (C-FIND, C-GET)"), _("DICOMweb (QIDO-RS, WADO-RS)"),
                                NULL };
    g_autoptr(GtkStringList) list = gtk_string_list_new(protocols);
    adw_combo_row_set_model(ADW_COMBO_ROW(d->protocol), G_LIST_MODEL(list));
    gtk_widget_set_name(d->protocol, "pacs-protocol");
    adw_preferences_group_add(ADW_PREFERENCES_GROUP(where), d->protocol);
    d->host = entry_row(_("_Host"), "pacs-host", where);
    d->port = entry_row(_("_Port"), "pacs-port", where);
    d->aec = entry_row(_("The PACS's AE _title"), "pacs-aec", where);
    d->aet = entry_row(_("_Our AE title"), "pacs-aet", where);
    d->url = entry_row(_("DICOMweb _address"), "pacs-dicomweb", where);
    gtk_box_append(GTK_BOX(content), where);

    GtkWidget *what = adw_preferences_group_new();
    adw_preferences_group_set_title(ADW_PREFERENCES_GROUP(what), _("Patient"));
    adw_preferences_group_set_description(ADW_PREFERENCES_GROUP(what),
                                          _("A patient ID or an accession number"));
    d->patient = entry_row(_("Patient _ID"), "pacs-patient", what);
    d->accession = entry_row(_("_Accession number"), "pacs-accession", what);
    d->find = gtk_button_new_with_mnemonic(_("_Find Studies"));
    gtk_widget_set_name(d->find, "pacs-find");
    gtk_widget_set_halign(d->find, GTK_ALIGN_END);
    gtk_widget_set_margin_top(d->find, 12);
    gtk_box_append(GTK_BOX(content), what);
    gtk_box_append(GTK_BOX(content), d->find);

    GtkWidget *status_box = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 8);
    d->spinner = gtk_spinner_new();
    gtk_widget_set_visible(d->spinner, FALSE);
    d->status = gtk_label_new(NULL);
    gtk_label_set_wrap(GTK_LABEL(d->status), TRUE);
    gtk_label_set_xalign(GTK_LABEL(d->status), 0);
    gtk_label_set_selectable(GTK_LABEL(d->status), TRUE);
    gtk_widget_set_name(d->status, "pacs-status");
    gtk_box_append(GTK_BOX(status_box), d->spinner);
    gtk_box_append(GTK_BOX(status_box), d->status);
    gtk_box_append(GTK_BOX(content), status_box);

    d->results = gtk_list_box_new();
    gtk_list_box_set_selection_mode(GTK_LIST_BOX(d->results), GTK_SELECTION_NONE);
    gtk_widget_add_css_class(d->results, "boxed-list");
    gtk_widget_set_name(d->results, "pacs-results");
    gtk_box_append(GTK_BOX(content), d->results);

    d->open = gtk_button_new_with_mnemonic(_("_Open as Case"));
    gtk_widget_set_name(d->open, "pacs-open");
    gtk_widget_add_css_class(d->open, "suggested-action");
    gtk_widget_add_css_class(d->open, "pill");
    gtk_widget_set_halign(d->open, GTK_ALIGN_CENTER);
    gtk_box_append(GTK_BOX(content), d->open);

    adw_clamp_set_child(ADW_CLAMP(clamp), content);
    gtk_scrolled_window_set_child(GTK_SCROLLED_WINDOW(scroll), clamp);
    gtk_box_append(GTK_BOX(box), scroll);
    adw_window_set_content(ADW_WINDOW(win), box);

    fill_from_settings(d);
    on_protocol(NULL, NULL, d);
    set_busy(d, FALSE);
    g_signal_connect(d->protocol, "notify::selected", G_CALLBACK(on_protocol), d);
    g_signal_connect(d->find, "clicked", G_CALLBACK(on_find), d);
    g_signal_connect(d->open, "clicked", G_CALLBACK(on_open), d);
    /* Enter in a patient field finds */
    g_signal_connect(d->patient, "entry-activated", G_CALLBACK(on_entry_activated), d);
    g_signal_connect(d->accession, "entry-activated", G_CALLBACK(on_entry_activated), d);
    g_signal_connect(win, "destroy", G_CALLBACK(on_destroy), d);
    return d->win;
}
