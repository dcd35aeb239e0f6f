/* cl-window-actions.c - ClWindow's win.* actions, their keys, and the dialogs they open (Open
 * Images, Export Report, Preferences). */
#include "cl-window-private.h"

#include <glib/gi18n.h>

#include "cl-pacs-dialog.h"
#include "cl-preferences.h"

/* One keyboard zoom step: two steps double the zoom, so 100 % → 200 % → 400 % stay on the grid. */
#define CL_ZOOM_STEP G_SQRT2

/* ---- zoom ---- */

static void action_zoom_in(GtkWidget *widget, const char *name, GVariant *param)
{
    cl_compare_view_zoom_by(CL_WINDOW(widget)->compare_view, CL_ZOOM_STEP);
}

static void action_zoom_out(GtkWidget *widget, const char *name, GVariant *param)
{
    cl_compare_view_zoom_by(CL_WINDOW(widget)->compare_view, 1.0 / CL_ZOOM_STEP);
}

static void action_zoom_100(GtkWidget *widget, const char *name, GVariant *param)
{
    cl_compare_view_zoom_100(CL_WINDOW(widget)->compare_view);
}

static void action_zoom_fit(GtkWidget *widget, const char *name, GVariant *param)
{
    cl_compare_view_fit(CL_WINDOW(widget)->compare_view);
}

/* ---- cine ---- */

/* frames a second while cine plays */
#define CL_CINE_RATE 4

/* Cine: the next item of the sequence as the later image (with its predecessor), back to the
 * second after the last. */
static gboolean cine_step(gpointer data)
{
    ClWindow *self = data;
    const guint n = self->sequence ? self->sequence->len : 0;
    if (n < 3) {
        self->cine_id = 0;
        return G_SOURCE_REMOVE;
    }
    cl_window_show_pair(self, self->pair_b + 1 < n ? self->pair_b + 1 : 1);
    return G_SOURCE_CONTINUE;
}

gboolean cl_window_get_cine(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    return self->cine_id != 0;
}

void cl_window_stop_cine(ClWindow *self)
{
    g_clear_handle_id(&self->cine_id, g_source_remove);
}

static void action_cine(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    if (self->cine_id) {
        cl_window_stop_cine(self);
        return;
    }
    if (!self->sequence || self->sequence->len < 3) {
        /* TRANSLATORS: cine asked for on a pair: there is nothing to step through */
        cl_window_toast(self, _("Cine steps through a sequence of three or more images"));
        return;
    }
    self->cine_id = g_timeout_add(1000 / CL_CINE_RATE, cine_step, self);
}

/* ---- notes and key images ---- */

static void on_note_response(AdwMessageDialog *d, const char *response, ClWindow *self)
{
    if (g_strcmp0(response, "add") != 0)
        return;
    GtkEditable *entry = g_object_get_data(G_OBJECT(d), "entry");
    cl_window_cases_add_note(self, gtk_editable_get_text(entry));
}

static void action_add_note(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    if (!self->db || !self->current_case) {
        cl_window_toast(self, _("Notes belong to a case: open or make one first"));
        return;
    }
    GtkWidget *d = adw_message_dialog_new(GTK_WINDOW(self), _("Add a Note"),
                                          _("A note on the case, kept with your name and the "
                                            "time; it goes into the reports"));
    GtkWidget *entry = gtk_entry_new();
    gtk_entry_set_activates_default(GTK_ENTRY(entry), TRUE);
    adw_message_dialog_set_extra_child(ADW_MESSAGE_DIALOG(d), entry);
    g_object_set_data(G_OBJECT(d), "entry", entry);
    adw_message_dialog_add_responses(ADW_MESSAGE_DIALOG(d), "cancel", _("_Cancel"), "add",
                                     _("_Add"), NULL);
    adw_message_dialog_set_response_appearance(ADW_MESSAGE_DIALOG(d), "add",
                                               ADW_RESPONSE_SUGGESTED);
    adw_message_dialog_set_default_response(ADW_MESSAGE_DIALOG(d), "add");
    adw_message_dialog_set_close_response(ADW_MESSAGE_DIALOG(d), "cancel");
    g_signal_connect(d, "response", G_CALLBACK(on_note_response), self);
    gtk_window_present(GTK_WINDOW(d));
    gtk_widget_grab_focus(entry);
}

static void action_key_image(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    if (!self->db || !self->current_case) {
        cl_window_toast(self, _("Key images belong to a case: open or make one first"));
        return;
    }
    cl_window_cases_mark_key_image(self);
}

/* ---- corner overlays ---- */

static void action_overlays(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    const gboolean shown = !cl_image_view_get_overlays(cl_window_get_view(self, 0));
    for (int i = 0; i < 2; i++) /* the setting follows through its binding */
        cl_image_view_set_overlays(cl_window_get_view(self, i), shown);
}

/* ---- Open dialog ---- */

static const char *const supported_mime_types[] = {
    "image/png",  "image/tiff", "application/dicom", "image/jpeg",
    "image/webp", "image/bmp",  "image/gif",         "image/jp2",
};
/* DICOM files often carry no MIME type the desktop knows: match their usual suffixes too. */
static const char *const supported_suffixes[] = {
    "png",
    "tif",
    "tiff",
    "dcm",
    "dicom",
    "jpg",
    "jpeg",
    "webp",
    "bmp",
    "gif",
    /* rasters the GDAL loader reads (core/image/gdal.c) */
    "jp2",
    "j2k",
    "ntf",
    "nitf",
    "vrt",
    "img",
    "nc",
    "h5",
    "hdf5",
};

static void on_chooser_response(GtkNativeDialog *dialog, int response, ClWindow *self)
{
    if (response == GTK_RESPONSE_ACCEPT) {
        g_autoptr(GListModel) list = gtk_file_chooser_get_files(GTK_FILE_CHOOSER(dialog));
        guint n = g_list_model_get_n_items(list);
        g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_object_unref);
        for (guint i = 0; i < n; i++)
            g_ptr_array_add(files, g_list_model_get_item(list, i));
        cl_window_open_files(self, (GFile *const *)files->pdata, files->len);
    }
    gtk_native_dialog_destroy(dialog);
    g_object_unref(dialog);
}

void cl_window_choose_files(ClWindow *self)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    GtkFileChooserNative *chooser = gtk_file_chooser_native_new(
        _("Open Images"), GTK_WINDOW(self), GTK_FILE_CHOOSER_ACTION_OPEN, _("_Open"), _("_Cancel"));
    GtkFileChooser *fc = GTK_FILE_CHOOSER(chooser);
    gtk_native_dialog_set_modal(GTK_NATIVE_DIALOG(chooser), TRUE);
    gtk_file_chooser_set_select_multiple(fc, TRUE);

    g_autoptr(GtkFileFilter) images = gtk_file_filter_new();
    gtk_file_filter_set_name(images, _("Supported images"));
    for (guint i = 0; i < G_N_ELEMENTS(supported_mime_types); i++)
        gtk_file_filter_add_mime_type(images, supported_mime_types[i]);
    for (guint i = 0; i < G_N_ELEMENTS(supported_suffixes); i++)
        gtk_file_filter_add_suffix(images, supported_suffixes[i]);
    gtk_file_chooser_add_filter(fc, images);

    g_autoptr(GtkFileFilter) dicom = gtk_file_filter_new();
    gtk_file_filter_set_name(dicom, _("DICOM files"));
    gtk_file_filter_add_mime_type(dicom, "application/dicom");
    gtk_file_filter_add_suffix(dicom, "dcm");
    gtk_file_filter_add_suffix(dicom, "dicom");
    gtk_file_chooser_add_filter(fc, dicom);

    g_autoptr(GtkFileFilter) all = gtk_file_filter_new();
    gtk_file_filter_set_name(all, _("All files"));
    gtk_file_filter_add_pattern(all, "*");
    gtk_file_chooser_add_filter(fc, all);
    gtk_file_chooser_set_filter(fc, images);

    g_signal_connect(chooser, "response", G_CALLBACK(on_chooser_response), self);
    gtk_native_dialog_show(GTK_NATIVE_DIALOG(chooser));
}

static void action_open(GtkWidget *widget, const char *name, GVariant *param)
{
    cl_window_choose_files(CL_WINDOW(widget));
}

/* ---- the model ---- */

static void action_describe(GtkWidget *widget, const char *name, GVariant *param)
{
    cl_window_describe(CL_WINDOW(widget));
}

static void action_stop_describe(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    if (self->describe_cancellable)
        g_cancellable_cancel(self->describe_cancellable);
}

static void action_close_panel(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    action_stop_describe(widget, name, param);
    gtk_revealer_set_reveal_child(self->panel_revealer, FALSE);
}

/* ---- the images ---- */

/* win.nudge((dx, dy)): moves the later image by whole pixels of the earlier one, from where
 * the alignment (or the plain stretch) put it; the result stays until Align is turned off. */
static void action_nudge(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    if (!cl_image_view_get_document(cl_window_get_view(self, 0)) ||
        !cl_image_view_get_document(cl_window_get_view(self, 1)))
        return;
    int dx, dy;
    g_variant_get(param, "(ii)", &dx, &dy);
    if (self->align_cancellable)
        return; /* an automatic alignment is under way */
    cl_window_undo_record(self);
    cl_compare_view_nudge(self->compare_view, dx, dy);
    if (!self->aligned) {
        self->aligned = TRUE;
        g_object_notify(G_OBJECT(self), "aligned");
    }
    cl_compare_view_set_align_status(self->compare_view, _("Aligned by hand"));
}

static void action_clear_masks(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    if (cl_window_get_n_masks(self) > 0)
        cl_window_undo_record(self);
    cl_compare_view_clear_masks(self->compare_view);
}

static void action_undo(GtkWidget *widget, const char *name, GVariant *param)
{
    cl_window_undo(CL_WINDOW(widget));
}

static void action_redo(GtkWidget *widget, const char *name, GVariant *param)
{
    cl_window_redo(CL_WINDOW(widget));
}

/* win.display-preset("default" | "minmax" | "percentile" | "bands:…" | "file:N" | "ct:NAME") */
static void action_display_preset(GtkWidget *widget, const char *name, GVariant *param)
{
    cl_window_undo_record(CL_WINDOW(widget));
    cl_compare_view_apply_preset(CL_WINDOW(widget)->compare_view,
                                 g_variant_get_string(param, NULL));
}

/* Custom Window…: the window's centre and width typed, for both images (modality units),
 * starting from what the earlier image shows. */
static void on_custom_window_response(AdwMessageDialog *d, const char *response, ClWindow *self)
{
    if (g_strcmp0(response, "apply") != 0)
        return;
    GtkSpinButton *centre = g_object_get_data(G_OBJECT(d), "centre");
    GtkSpinButton *width = g_object_get_data(G_OBJECT(d), "width");
    char c[G_ASCII_DTOSTR_BUF_SIZE], w[G_ASCII_DTOSTR_BUF_SIZE];
    g_ascii_dtostr(c, sizeof c, gtk_spin_button_get_value(centre));
    g_ascii_dtostr(w, sizeof w, gtk_spin_button_get_value(width));
    g_autofree char *preset = g_strdup_printf("window:%s:%s", c, w);
    cl_window_undo_record(self);
    cl_compare_view_apply_preset(self->compare_view, preset);
}

static void action_custom_window(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    ClImageView *v = cl_window_get_view(self, 0);
    ClDisplaySettings s;
    double c = 40, w = 400;
    ClDocument *doc = cl_image_view_get_document(v);
    if (doc && cl_image_view_get_display(v, &s) &&
        !cl_display_effective_window(cl_document_get_image(doc), cl_image_view_get_frame(v), &s, &c,
                                     &w))
        c = 40, w = 400;
    GtkWidget *d = adw_message_dialog_new(GTK_WINDOW(self), _("Custom Window"),
                                          _("Centre and width in the image's values (HU for "
                                            "CT), for both images"));
    GtkWidget *grid = gtk_grid_new();
    gtk_grid_set_row_spacing(GTK_GRID(grid), 6);
    gtk_grid_set_column_spacing(GTK_GRID(grid), 12);
    GtkWidget *centre = gtk_spin_button_new_with_range(-1e7, 1e7, 1);
    GtkWidget *width = gtk_spin_button_new_with_range(1e-3, 2e7, 1);
    gtk_spin_button_set_digits(GTK_SPIN_BUTTON(centre), 1);
    gtk_spin_button_set_digits(GTK_SPIN_BUTTON(width), 1);
    gtk_spin_button_set_value(GTK_SPIN_BUTTON(centre), c);
    gtk_spin_button_set_value(GTK_SPIN_BUTTON(width), MAX(w, 1e-3));
    GtkWidget *lc = gtk_label_new_with_mnemonic(_("_Centre (level)"));
    GtkWidget *lw = gtk_label_new_with_mnemonic(_("_Width"));
    gtk_label_set_mnemonic_widget(GTK_LABEL(lc), centre);
    gtk_label_set_mnemonic_widget(GTK_LABEL(lw), width);
    gtk_widget_set_halign(lc, GTK_ALIGN_START);
    gtk_widget_set_halign(lw, GTK_ALIGN_START);
    gtk_grid_attach(GTK_GRID(grid), lc, 0, 0, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), centre, 1, 0, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), lw, 0, 1, 1, 1);
    gtk_grid_attach(GTK_GRID(grid), width, 1, 1, 1, 1);
    adw_message_dialog_set_extra_child(ADW_MESSAGE_DIALOG(d), grid);
    g_object_set_data(G_OBJECT(d), "centre", centre);
    g_object_set_data(G_OBJECT(d), "width", width);
    adw_message_dialog_add_responses(ADW_MESSAGE_DIALOG(d), "cancel", _("_Cancel"), "apply",
                                     _("_Apply"), NULL);
    adw_message_dialog_set_response_appearance(ADW_MESSAGE_DIALOG(d), "apply",
                                               ADW_RESPONSE_SUGGESTED);
    adw_message_dialog_set_default_response(ADW_MESSAGE_DIALOG(d), "apply");
    adw_message_dialog_set_close_response(ADW_MESSAGE_DIALOG(d), "cancel");
    g_signal_connect(d, "response", G_CALLBACK(on_custom_window_response), self);
    gtk_window_present(GTK_WINDOW(d));
}

/* The Details of the toast about files that did not open: each one and why. */
static void action_show_load_errors(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    if (!self->load_errors)
        return;
    GtkWidget *d =
        adw_message_dialog_new(GTK_WINDOW(self), _("Files Not Opened"), self->load_errors);
    adw_message_dialog_add_response(ADW_MESSAGE_DIALOG(d), "close", _("_Close"));
    gtk_window_present(GTK_WINDOW(d));
}

/* win.from-pacs: studies found in a PACS and retrieved as a case (cl-pacs-dialog.h) */
static void action_from_pacs(GtkWidget *widget, const char *name, GVariant *param)
{
    gtk_window_present(cl_pacs_dialog_new(CL_WINDOW(widget)));
}

static void action_preferences(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    if (!self->settings) {
        cl_window_toast(self, _("Preferences need the installed settings schema"));
        return;
    }
    gtk_window_present(GTK_WINDOW(cl_preferences_new(GTK_WINDOW(self), self->settings)));
}

/* ---- cases ---- */

static void action_save(GtkWidget *widget, const char *name, GVariant *param)
{
    cl_window_cases_save(CL_WINDOW(widget));
}

static void action_accept(GtkWidget *widget, const char *name, GVariant *param)
{
    cl_window_cases_set_status(CL_WINDOW(widget), CL_DESC_ACCEPTED);
}

static void action_reject(GtkWidget *widget, const char *name, GVariant *param)
{
    cl_window_cases_set_status(CL_WINDOW(widget), CL_DESC_REJECTED);
}

static void action_edit(GtkWidget *widget, const char *name, GVariant *param)
{
    cl_window_cases_edit_accepted(CL_WINDOW(widget));
}

/* Keyboard review: the next or previous case of the list, as the list is sorted or filtered. */
static void action_next_case(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    if (self->db)
        cl_case_sidebar_step(self->case_sidebar, 1);
}

static void action_previous_case(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    if (self->db)
        cl_case_sidebar_step(self->case_sidebar, -1);
}

static void action_toggle_sidebar(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    if (gtk_widget_get_visible(GTK_WIDGET(self->sidebar_button)))
        gtk_toggle_button_set_active(self->sidebar_button,
                                     !gtk_toggle_button_get_active(self->sidebar_button));
}

static void on_export_response(GtkNativeDialog *dialog, int response, ClWindow *self)
{
    if (response == GTK_RESPONSE_ACCEPT) {
        g_autoptr(GFile) file = gtk_file_chooser_get_file(GTK_FILE_CHOOSER(dialog));
        if (file)
            cl_window_export_report(self, file);
    }
    gtk_native_dialog_destroy(dialog);
    g_object_unref(dialog);
}

static void action_export(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    if (!self->current_case)
        return;
    GtkFileChooserNative *chooser =
        gtk_file_chooser_native_new(_("Export Report"), GTK_WINDOW(self),
                                    GTK_FILE_CHOOSER_ACTION_SAVE, _("_Export"), _("_Cancel"));
    GtkFileChooser *fc = GTK_FILE_CHOOSER(chooser);
    gtk_native_dialog_set_modal(GTK_NATIVE_DIALOG(chooser), TRUE);
    static const struct {
        const char *name, *pattern;
    } kinds[] = { { N_("PDF document"), "*.pdf" },
                  { N_("Web page (HTML)"), "*.html" },
                  { N_("JSON for machines"), "*.json" } };
    for (guint i = 0; i < G_N_ELEMENTS(kinds); i++) {
        g_autoptr(GtkFileFilter) f = gtk_file_filter_new();
        gtk_file_filter_set_name(f, _(kinds[i].name));
        gtk_file_filter_add_pattern(f, kinds[i].pattern);
        gtk_file_chooser_add_filter(fc, f);
    }
    g_autofree char *base = g_strdup(self->current_case->summary.name);
    g_strdelimit(base, "/\\:", '-');
    g_autofree char *suggested = g_strconcat(base, ".pdf", NULL);
    gtk_file_chooser_set_current_name(fc, suggested);
    g_signal_connect(chooser, "response", G_CALLBACK(on_export_response), self);
    gtk_native_dialog_show(GTK_NATIVE_DIALOG(chooser));
}

static void on_change_map_response(GtkNativeDialog *dialog, int response, ClWindow *self)
{
    if (response == GTK_RESPONSE_ACCEPT) {
        g_autoptr(GFile) file = gtk_file_chooser_get_file(GTK_FILE_CHOOSER(dialog));
        if (file)
            cl_window_export_change_map(self, file);
    }
    gtk_native_dialog_destroy(dialog);
    g_object_unref(dialog);
}

/* win.export-change-map: where the change map's GeoTIFFs go (cl_window_export_change_map) */
static void action_export_change_map(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    if (!cl_window_can_export_change_map(self))
        return;
    GtkFileChooserNative *chooser =
        gtk_file_chooser_native_new(_("Export Change Map"), GTK_WINDOW(self),
                                    GTK_FILE_CHOOSER_ACTION_SAVE, _("_Export"), _("_Cancel"));
    GtkFileChooser *fc = GTK_FILE_CHOOSER(chooser);
    gtk_native_dialog_set_modal(GTK_NATIVE_DIALOG(chooser), TRUE);
    g_autoptr(GtkFileFilter) f = gtk_file_filter_new();
    gtk_file_filter_set_name(f, _("GeoTIFF (with its mask and a GeoPackage of the regions)"));
    gtk_file_filter_add_pattern(f, "*.tif");
    gtk_file_chooser_add_filter(fc, f);
    g_autofree char *base =
        g_strdup(self->current_case ? self->current_case->summary.name : _("change map"));
    g_strdelimit(base, "/\\:", '-');
    g_autofree char *suggested = g_strconcat(base, "-change.tif", NULL);
    gtk_file_chooser_set_current_name(fc, suggested);
    g_signal_connect(chooser, "response", G_CALLBACK(on_change_map_response), self);
    gtk_native_dialog_show(GTK_NATIVE_DIALOG(chooser));
}

/* ---- installing them ---- */

void cl_window_actions_class_init(GtkWidgetClass *widget_class)
{
    gtk_widget_class_install_action(widget_class, "win.open", NULL, action_open);
    gtk_widget_class_install_action(widget_class, "win.zoom-in", NULL, action_zoom_in);
    gtk_widget_class_install_action(widget_class, "win.zoom-out", NULL, action_zoom_out);
    gtk_widget_class_install_action(widget_class, "win.zoom-100", NULL, action_zoom_100);
    gtk_widget_class_install_action(widget_class, "win.zoom-fit", NULL, action_zoom_fit);
    gtk_widget_class_install_property_action(widget_class, "win.link-views", "link-views");
    gtk_widget_class_install_property_action(widget_class, "win.compare-mode", "compare-mode");
    gtk_widget_class_install_property_action(widget_class, "win.show-heatmap", "show-heatmap");
    gtk_widget_class_install_action(widget_class, "win.describe", NULL, action_describe);
    gtk_widget_class_install_action(widget_class, "win.cine", NULL, action_cine);
    gtk_widget_class_install_action(widget_class, "win.overlays", NULL, action_overlays);
    gtk_widget_class_install_action(widget_class, "win.add-note", NULL, action_add_note);
    gtk_widget_class_install_action(widget_class, "win.key-image", NULL, action_key_image);
    gtk_widget_class_install_action(widget_class, "win.stop-describe", NULL, action_stop_describe);
    gtk_widget_class_install_action(widget_class, "win.close-panel", NULL, action_close_panel);
    gtk_widget_class_install_action(widget_class, "win.save-description", NULL, action_save);
    gtk_widget_class_install_action(widget_class, "win.accept-description", NULL, action_accept);
    gtk_widget_class_install_action(widget_class, "win.reject-description", NULL, action_reject);
    gtk_widget_class_install_action(widget_class, "win.edit-description", NULL, action_edit);
    gtk_widget_class_install_action(widget_class, "win.toggle-sidebar", NULL,
                                    action_toggle_sidebar);
    gtk_widget_class_install_action(widget_class, "win.export-report", NULL, action_export);
    gtk_widget_class_install_action(widget_class, "win.next-case", NULL, action_next_case);
    gtk_widget_class_install_action(widget_class, "win.previous-case", NULL, action_previous_case);
    gtk_widget_class_install_action(widget_class, "win.clear-masks", NULL, action_clear_masks);
    gtk_widget_class_install_action(widget_class, "win.preferences", NULL, action_preferences);
    gtk_widget_class_install_action(widget_class, "win.from-pacs", NULL, action_from_pacs);
    gtk_widget_class_install_action(widget_class, "win.export-change-map", NULL,
                                    action_export_change_map);
    gtk_widget_class_install_action(widget_class, "win.show-load-errors", NULL,
                                    action_show_load_errors);
    gtk_widget_class_install_property_action(widget_class, "win.align", "aligned");
    gtk_widget_class_install_action(widget_class, "win.nudge", "(ii)", action_nudge);
    gtk_widget_class_install_action(widget_class, "win.undo", NULL, action_undo);
    gtk_widget_class_install_action(widget_class, "win.redo", NULL, action_redo);
    /* the window's bindings (bubble phase): the description's editor undoes its own text first */
    gtk_widget_class_add_binding_action(widget_class, GDK_KEY_z, GDK_CONTROL_MASK, "win.undo",
                                        NULL);
    gtk_widget_class_add_binding_action(widget_class, GDK_KEY_z, GDK_CONTROL_MASK | GDK_SHIFT_MASK,
                                        "win.redo", NULL);
    gtk_widget_class_add_binding_action(widget_class, GDK_KEY_Z, GDK_CONTROL_MASK | GDK_SHIFT_MASK,
                                        "win.redo", NULL);
    static const struct {
        guint key;
        int dx, dy;
    } nudges[] = { { GDK_KEY_Left, -1, 0 },
                   { GDK_KEY_Right, 1, 0 },
                   { GDK_KEY_Up, 0, -1 },
                   { GDK_KEY_Down, 0, 1 } };
    for (guint i = 0; i < G_N_ELEMENTS(nudges); i++)
        gtk_widget_class_add_binding_action(widget_class, nudges[i].key, GDK_ALT_MASK, "win.nudge",
                                            "(ii)", nudges[i].dx, nudges[i].dy);
    gtk_widget_class_install_action(widget_class, "win.display-preset", "s", action_display_preset);
    gtk_widget_class_install_action(widget_class, "win.custom-window", NULL, action_custom_window);

    /* Plain keys as the window's bindings (bubble phase): a focused text field types them. */
    static const struct {
        guint key;
        const char *action;
    } keys[] = {
        { GDK_KEY_0, "win.zoom-fit" },
        { GDK_KEY_KP_0, "win.zoom-fit" },
        { GDK_KEY_1, "win.zoom-100" },
        { GDK_KEY_KP_1, "win.zoom-100" },
        { GDK_KEY_plus, "win.zoom-in" },
        { GDK_KEY_equal, "win.zoom-in" },
        { GDK_KEY_KP_Add, "win.zoom-in" },
        { GDK_KEY_minus, "win.zoom-out" },
        { GDK_KEY_KP_Subtract, "win.zoom-out" },
        { GDK_KEY_l, "win.link-views" },
        { GDK_KEY_h, "win.show-heatmap" },
        { GDK_KEY_Escape, "win.stop-describe" },
        { GDK_KEY_c, "win.cine" },
        { GDK_KEY_i, "win.overlays" },
    };
    for (guint i = 0; i < G_N_ELEMENTS(keys); i++)
        gtk_widget_class_add_binding_action(widget_class, keys[i].key, 0, keys[i].action, NULL);
}
