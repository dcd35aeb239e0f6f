/* cl-preferences.c - the Preferences window: where the model runs, which model, how images are
 * compared by default, what linked views share, the reviewer's name, where cases are kept. Every row is a GSettings key,
 * bound both ways. */
#include "cl-preferences.h"

#include <glib/gi18n.h>

#include "cl-config.h"

static const char *const devices[] = { "auto", "cpu", "cuda", NULL };
static const char *const modes[] = {
    "side-by-side", "swipe", "blend", "flicker", "difference", NULL
};
static const char *const sources[] = { "auto", "update-norm", "delta", NULL };
static const char *const colour_maps[] = { "inferno", "viridis", "reds", NULL };

static gboolean name_to_index(GValue *value, GVariant *variant, gpointer user_data)
{
    const char *const *names = user_data;
    const char *name = g_variant_get_string(variant, NULL);
    for (guint i = 0; names[i]; i++)
        if (g_str_equal(names[i], name)) {
            g_value_set_uint(value, i);
            return TRUE;
        }
    g_value_set_uint(value, 0);
    return TRUE;
}

static GVariant *index_to_name(const GValue *value, const GVariantType *type, gpointer user_data)
{
    const char *const *names = user_data;
    guint i = g_value_get_uint(value);
    guint n = g_strv_length((char **)names);
    return g_variant_new_string(names[i < n ? i : 0]);
}

static GtkWidget *combo_row(GSettings *settings, const char *key, const char *title,
                            const char *subtitle, const char *const *names,
                            const char *const *labels)
{
    AdwComboRow *row = ADW_COMBO_ROW(adw_combo_row_new());
    adw_preferences_row_set_title(ADW_PREFERENCES_ROW(row), title);
    adw_action_row_set_subtitle(ADW_ACTION_ROW(row), subtitle);
    GtkStringList *list = gtk_string_list_new(labels);
    adw_combo_row_set_model(row, G_LIST_MODEL(list));
    g_object_unref(list);
    g_settings_bind_with_mapping(settings, key, row, "selected", G_SETTINGS_BIND_DEFAULT,
                                 name_to_index, index_to_name, (gpointer)names, NULL);
    return GTK_WIDGET(row);
}

static GtkWidget *switch_row(GSettings *settings, const char *key, const char *title,
                             const char *subtitle)
{
    GtkWidget *row = adw_action_row_new();
    adw_preferences_row_set_title(ADW_PREFERENCES_ROW(row), title);
    adw_action_row_set_subtitle(ADW_ACTION_ROW(row), subtitle);
    GtkWidget *sw = gtk_switch_new();
    gtk_widget_set_valign(sw, GTK_ALIGN_CENTER);
    adw_action_row_add_suffix(ADW_ACTION_ROW(row), sw);
    adw_action_row_set_activatable_widget(ADW_ACTION_ROW(row), sw);
    g_settings_bind(settings, key, sw, "active", G_SETTINGS_BIND_DEFAULT);
    return row;
}

typedef struct {
    GSettings *settings;
    GtkWidget *row;
} ModelRow;

static void model_row_update(ModelRow *m)
{
    g_autofree char *path = g_settings_get_string(m->settings, "model-file");
    adw_action_row_set_subtitle(ADW_ACTION_ROW(m->row),
                                path && *path ? path : _("The model installed with ChangeLens"));
}

static void on_model_chosen(GtkNativeDialog *dialog, int response, ModelRow *m)
{
    if (response == GTK_RESPONSE_ACCEPT) {
        g_autoptr(GFile) file = gtk_file_chooser_get_file(GTK_FILE_CHOOSER(dialog));
        g_autofree char *path = file ? g_file_get_path(file) : NULL;
        if (path)
            g_settings_set_string(m->settings, "model-file", path);
    }
    gtk_native_dialog_destroy(dialog);
    g_object_unref(dialog);
}

static void on_choose_model(GtkButton *button, ModelRow *m)
{
    GtkFileChooserNative *chooser = gtk_file_chooser_native_new(
        _("Choose a Model"), GTK_WINDOW(gtk_widget_get_root(GTK_WIDGET(button))),
        GTK_FILE_CHOOSER_ACTION_OPEN, _("_Choose"), _("_Cancel"));
    g_autoptr(GtkFileFilter) f = gtk_file_filter_new();
    gtk_file_filter_set_name(f, _("Models (safetensors)"));
    gtk_file_filter_add_suffix(f, "safetensors");
    gtk_file_chooser_add_filter(GTK_FILE_CHOOSER(chooser), f);
    gtk_native_dialog_set_modal(GTK_NATIVE_DIALOG(chooser), TRUE);
    g_signal_connect(chooser, "response", G_CALLBACK(on_model_chosen), m);
    gtk_native_dialog_show(GTK_NATIVE_DIALOG(chooser));
}

static void on_reset_model(GtkButton *button, ModelRow *m)
{
    g_settings_reset(m->settings, "model-file");
}

static void model_row_free(gpointer data)
{
    ModelRow *m = data;
    g_object_unref(m->settings);
    g_free(m);
}

static void on_database_apply(AdwEntryRow *row, GSettings *settings)
{
    g_autofree char *text = g_strstrip(g_strdup(gtk_editable_get_text(GTK_EDITABLE(row))));
    g_settings_set_string(settings, "case-database", text);
}

GtkWidget *cl_preferences_new(GtkWindow *parent, GSettings *settings)
{
    g_return_val_if_fail(G_IS_SETTINGS(settings), NULL);
    AdwPreferencesWindow *win = ADW_PREFERENCES_WINDOW(adw_preferences_window_new());
    gtk_window_set_transient_for(GTK_WINDOW(win), parent);
    gtk_window_set_modal(GTK_WINDOW(win), TRUE);
    adw_preferences_window_set_search_enabled(win, FALSE);

    AdwPreferencesPage *page = ADW_PREFERENCES_PAGE(adw_preferences_page_new());
    AdwPreferencesGroup *model = ADW_PREFERENCES_GROUP(adw_preferences_group_new());
    adw_preferences_group_set_title(model, _("Model"));
    const char *device_labels[] = { _("Automatic: the GPU when there is one"), _("CPU"),
                                    _("GPU (CUDA)"), NULL };
    adw_preferences_group_add(model,
                              combo_row(settings, "device", _("Device"),
                                        _("Used from the next model run"), devices, device_labels));
    ModelRow *m = g_new0(ModelRow, 1);
    m->settings = g_object_ref(settings);
    m->row = adw_action_row_new();
    adw_preferences_row_set_title(ADW_PREFERENCES_ROW(m->row), _("Model file"));
    GtkWidget *choose = gtk_button_new_with_mnemonic(_("_Choose…"));
    gtk_widget_set_valign(choose, GTK_ALIGN_CENTER);
    GtkWidget *reset = gtk_button_new_from_icon_name("edit-undo-symbolic");
    gtk_widget_set_tooltip_text(reset, _("Use the installed model"));
    gtk_widget_set_valign(reset, GTK_ALIGN_CENTER);
    adw_action_row_add_suffix(ADW_ACTION_ROW(m->row), choose);
    adw_action_row_add_suffix(ADW_ACTION_ROW(m->row), reset);
    g_signal_connect(choose, "clicked", G_CALLBACK(on_choose_model), m);
    g_signal_connect(reset, "clicked", G_CALLBACK(on_reset_model), m);
    g_signal_connect_swapped(settings, "changed::model-file", G_CALLBACK(model_row_update), m);
    g_object_set_data_full(G_OBJECT(m->row), "cl-model-row", m, model_row_free);
    model_row_update(m);
    adw_preferences_group_add(model, m->row);
    const char *source_labels[] = { _("Automatic (change probability where the model has it)"),
                                    _("Encoder updates"), _("Change map (Δ, slower)"), NULL };
    adw_preferences_group_add(model,
                              combo_row(settings, "heatmap-source", _("Heat maps"),
                                        _("The model's change probability per patch, how much "
                                          "the stateful encoder rewrote each patch, or the "
                                          "paper's change map from a second encoder pass"),
                                        sources, source_labels));
    adw_preferences_group_add(model, switch_row(settings, "align-model-input",
                                                _("Model reads aligned images"),
                                                _("When Align is on, the model reads the later "
                                                  "image aligned too")));
    adw_preferences_group_add(model, switch_row(settings, "long-history",
                                                _("Model reads every prior image"),
                                                _("The whole sequence up to the later image, in "
                                                  "order, with a streaming cache")));
    adw_preferences_group_add(model, switch_row(settings, "read-case-notes",
                                                _("Model reads the case's notes"),
                                                _("As prior reports, with the images, by a "
                                                  "model trained to read them (VIST2)")));
    adw_preferences_page_add(page, model);

    AdwPreferencesGroup *view = ADW_PREFERENCES_GROUP(adw_preferences_group_new());
    adw_preferences_group_set_title(view, _("Comparing"));
    const char *mode_labels[] = { _("Side by side"), _("Swipe"),      _("Blend"),
                                  _("Flicker"),      _("Difference"), NULL };
    adw_preferences_group_add(view, combo_row(settings, "compare-mode", _("Compare mode"),
                                              _("How a pair is shown when it opens"), modes,
                                              mode_labels));
    adw_preferences_group_add(view, switch_row(settings, "link-views", _("Link views"),
                                               _("Zoom and pan both views together")));
    adw_preferences_group_add(view,
                              switch_row(settings, "sync-window-level", _("Link window/level"),
                                         _("A window/level set on one linked view is set "
                                           "on the other")));
    const char *colour_labels[] = { _("Inferno"), _("Viridis"), _("Dark red to yellow"), NULL };
    adw_preferences_group_add(view, combo_row(settings, "heatmap-colours", _("Heat map colours"),
                                              _("The colour map of the heat maps"), colour_maps,
                                              colour_labels));
    adw_preferences_page_add(page, view);

    AdwPreferencesGroup *review = ADW_PREFERENCES_GROUP(adw_preferences_group_new());
    adw_preferences_group_set_title(review, _("Review"));
    adw_preferences_group_set_description(
        review, _("Recorded with the descriptions you edit, accept or reject"));
    GtkWidget *name = adw_entry_row_new();
    adw_preferences_row_set_title(ADW_PREFERENCES_ROW(name), _("Reviewer's name"));
    g_settings_bind(settings, "reviewer-name", name, "text", G_SETTINGS_BIND_DEFAULT);
    adw_preferences_group_add(review, name);
    GtkWidget *database = adw_entry_row_new();
    adw_preferences_row_set_title(ADW_PREFERENCES_ROW(database), _("Case database"));
    gtk_widget_set_tooltip_text(
        database, _("Empty: the file in your data folder. Another SQLite file's path, or "
                    "postgresql://user@host:port/database for a database several reviewers "
                    "share (keep its password in ~/.pgpass, not here). Used from the next "
                    "start; $CHANGELENS_DB comes first."));
    adw_entry_row_set_show_apply_button(ADW_ENTRY_ROW(database), TRUE);
    /* kept when applied (Enter or the tick), not at every key */
    g_settings_bind(settings, "case-database", database, "text", G_SETTINGS_BIND_GET);
    g_signal_connect_data(database, "apply", G_CALLBACK(on_database_apply), g_object_ref(settings),
                          (GClosureNotify)(void (*)(void))g_object_unref, 0);
    adw_preferences_page_add(page, review);
    AdwPreferencesGroup *cases = ADW_PREFERENCES_GROUP(adw_preferences_group_new());
    adw_preferences_group_set_title(cases, _("Cases"));
    adw_preferences_group_set_description(
        cases, _("Where cases, descriptions and reviews are kept. Used from the next start"));
    adw_preferences_group_add(cases, database);
    adw_preferences_page_add(page, cases);
    adw_preferences_window_add(win, page);
    return GTK_WIDGET(win);
}
