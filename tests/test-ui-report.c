/* test-ui-report.c - The report from the window: made from the view on screen (window/level,
 * alignment, ignore regions, tolerance, compare mode, heat map) and recording it; the export's
 * de-identification choice, which shows the changes to the reviewer's text before anything is
 * written; an unsaved edit neither filed nor lost by Describe or Export without asking. */
#include "ui-util.h"

#include "cl-description-panel.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "casedb/casedb.h"

static ClWindow *window_on_case(ClCaseDb *db, gint64 id)
{
    ClWindow *win = cl_window_new(NULL);
    gtk_window_set_default_size(GTK_WINDOW(win), 1000, 700);
    gtk_window_present(GTK_WINDOW(win));
    cl_window_set_case_db(win, db);
    cl_window_open_case(win, id);
    g_assert_true(wait_for(case_shown, win));
    return win;
}

static void close_window(ClWindow *win, ClCaseDb *db)
{
    gtk_window_destroy(GTK_WINDOW(win));
    for (int i = 0; i < 10; i++)
        g_main_context_iteration(NULL, FALSE);
    cl_casedb_close(db);
}

/* Exports through the window as the menu does once the file is chosen: the options dialog
 * answered with Export (after the unsaved-edit question, when unsaved is its answer). */
static char *export_as(ClWindow *win, const char *name, const char *unsaved)
{
    char *path = g_build_filename(tmpdir, name, NULL);
    g_autoptr(GFile) file = g_file_new_for_path(path);
    cl_window_export_report(win, file);
    if (unsaved)
        answer_dialog(win, unsaved);
    answer_dialog(win, "export");
    g_assert_true(wait_for(not_exporting, win));
    g_assert_true(cl_window_get_last_export_ok(win));
    return path;
}

static JsonObject *read_json(const char *path, JsonParser *parser)
{
    g_autoptr(GError) error = NULL;
    g_assert_true(json_parser_load_from_file(parser, path, &error));
    g_assert_no_error(error);
    return json_node_get_object(json_parser_get_root(parser));
}

static char *read_text(const char *path)
{
    char *text = NULL;
    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    return text;
}

/* The report shows what the window shows: the window/level set on screen (not the file's
 * default), the later image aligned and the ignore region left out of its difference, whose
 * changed share is measured at the tolerance of the difference mode; the JSON and the HTML record
 * all of it. */
static void test_report_view(void)
{
    g_autofree char *db_path = g_build_filename(tmpdir, "report-view.db", NULL);
    g_autoptr(GError) error = NULL;
    ClCaseDb *db = cl_casedb_open(db_path, CL_CASEDB_OPEN_DEFAULT, &error);
    g_assert_no_error(error);
    gint64 id = shifted_case(db, "Shifted", "report-view", 6);
    ClWindow *win = window_on_case(db, id);
    ClImageView *a = cl_window_get_view(win, 0), *b = cl_window_get_view(win, 1);

    /* a window chosen on screen, on both images */
    ClDisplaySettings s;
    g_assert_true(cl_image_view_get_display(a, &s));
    s.mode = CL_DISPLAY_WINDOW;
    s.center = 110;
    s.width = 140;
    cl_image_view_set_display(a, &s);
    cl_image_view_set_display(b, &s);
    /* aligned, a region ignored (the left part of the change), the difference mode */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.align", NULL));
    g_assert_true(wait_for(not_busy, win));
    g_assert_true(cl_window_get_aligned(win));
    double m[6];
    g_assert_true(cl_image_view_get_alignment(b, m));
    cl_window_add_mask(win, 195, 45, 235, 125);
    set_mode(win, "difference");
    g_assert_true(wait_for(window_idle, win));
    g_assert_true(wait_for(diff_ready, a));
    const double on_screen = cl_image_view_get_changed_fraction(a);
    g_assert_cmpfloat(on_screen, >, 0.01);
    g_assert_cmpfloat(on_screen, <, 0.10); /* aligned: the change alone (6.4 % unmasked) */

    g_autofree char *json = export_as(win, "report-view.json", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root = read_json(json, parser);
    g_assert_true(json_object_has_member(root, "view"));
    JsonObject *view = json_object_get_object_member(root, "view");
    g_assert_nonnull(view);
    g_assert_true(json_object_get_boolean_member(view, "aligned"));
    JsonArray *am = json_object_get_array_member(view, "alignment");
    g_assert_cmpuint(json_array_get_length(am), ==, 6);
    g_assert_cmpfloat(fabs(json_array_get_double_element(am, 0) - m[0]), <, 1e-9);
    g_assert_cmpfloat(fabs(json_array_get_double_element(am, 0) - 6), <, 0.5);
    g_assert_cmpuint(json_array_get_length(json_object_get_array_member(view, "ignore_regions")),
                     ==, 1);
    g_assert_cmpstr(json_object_get_string_member(view, "compare_mode"), ==, "difference");
    g_assert_cmpfloat(json_object_get_double_member(view, "tolerance"), ==, 16);
    const double reported = json_object_get_double_member(view, "changed_fraction");
    g_test_message("changed: %.4f on screen, %.4f in the report", on_screen, reported);
    /* the same pixels through the same display and map: nearest sampling of the same images */
    g_assert_cmpfloat(fabs(reported - on_screen), <, 0.005);
    g_assert_cmpfloat(json_object_get_double_member(view, "changed_fraction_on_screen"), ==,
                      on_screen);
    JsonArray *displays = json_object_get_array_member(view, "display");
    JsonObject *d0 = json_array_get_object_element(displays, 0);
    g_assert_cmpstr(json_object_get_string_member(d0, "mode"), ==, "window");
    g_assert_cmpfloat(json_object_get_double_member(d0, "window_center"), ==, 110);
    g_assert_cmpfloat(json_object_get_double_member(d0, "window_width"), ==, 140);
    /* each image drawn with it */
    JsonArray *images = json_object_get_array_member(root, "images");
    for (guint i = 0; i < 2; i++) {
        JsonObject *disp =
            json_object_get_object_member(json_array_get_object_element(images, i), "display");
        g_assert_cmpstr(json_object_get_string_member(disp, "source"), ==, "screen");
        g_assert_cmpfloat(json_object_get_double_member(disp, "window_width"), ==, 140);
    }
    JsonObject *cmp =
        json_array_get_object_element(json_object_get_array_member(root, "comparisons"), 0);
    g_assert_true(json_object_get_boolean_member(cmp, "on_screen"));
    g_assert_true(json_object_get_boolean_member(cmp, "aligned"));
    g_assert_cmpfloat(json_object_get_double_member(cmp, "changed_fraction"), ==, reported);

    /* the page says it in words */
    g_autofree char *html_path = export_as(win, "report-view.html", NULL);
    g_autofree char *html = read_text(html_path);
    g_assert_nonnull(strstr(html, "As on screen: image 1 → image 2, both shown with window width "
                                  "140, level 110"));
    g_assert_nonnull(strstr(html, "image 2 aligned onto image 1"));
    g_assert_nonnull(strstr(html, "difference tolerance 16/255"));
    g_assert_nonnull(strstr(html, "1 ignore region left out"));
    g_assert_nonnull(strstr(html, "Difference as on screen"));

    /* unaligned, the report's difference is unaligned too */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.align", NULL));
    g_assert_false(cl_window_get_aligned(win));
    g_assert_true(wait_for(diff_ready, a));
    const double unaligned = cl_image_view_get_changed_fraction(a);
    g_autofree char *json2 = export_as(win, "report-view-unaligned.json", NULL);
    g_autoptr(JsonParser) parser2 = json_parser_new();
    JsonObject *view2 = json_object_get_object_member(read_json(json2, parser2), "view");
    g_assert_false(json_object_get_boolean_member(view2, "aligned"));
    const double reported2 = json_object_get_double_member(view2, "changed_fraction");
    g_assert_cmpfloat(fabs(reported2 - unaligned), <, 0.005);
    g_assert_cmpfloat(reported2, >, reported + 0.05);
    set_mode(win, "side-by-side"); /* the mode is remembered for the next window */
    close_window(win, db);
}

/* The widget under root of this type (depth first), NULL when none. */
static GtkWidget *find_widget(GtkWidget *root, GType type, const char *name)
{
    if (G_TYPE_CHECK_INSTANCE_TYPE(root, type) &&
        (!name || g_strcmp0(gtk_widget_get_name(root), name) == 0))
        return root;
    for (GtkWidget *c = gtk_widget_get_first_child(root); c; c = gtk_widget_get_next_sibling(c)) {
        GtkWidget *found = find_widget(c, type, name);
        if (found)
            return found;
    }
    return NULL;
}

/* Ultrasound that does not say whether it has burned-in annotation may show text in its pixels, which
 * de-identification does not remove: the export dialog shows the "Pixels checked" row while
 * de-identification is on; exported without it the report is refused with the reason, with it
 * the de-identified report is written. (The demo radiographs, made US without the attribute.) */
static void test_burned_in_checked(void)
{
    const char *demo = g_getenv("CL_DEMO_DIR");
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) images =
        g_ptr_array_new_with_free_func((GDestroyNotify)cl_case_image_free);
    for (int i = 0; i < 2; i++) {
        g_autofree char *src =
            g_build_filename(demo, "radiograph", i ? "after.dcm" : "before.dcm", NULL);
        g_autofree char *bytes = NULL;
        gsize len = 0;
        g_assert_true(g_file_get_contents(src, &bytes, &len, NULL));
        /* (0008,0060) CS, 2 bytes, "DX" in the explicit little-endian data set */
        static const char modality[] = "\x08\x00\x60\x00"
                                       "CS\x02\x00"
                                       "DX";
        char *at = memmem(bytes, len, modality, 10);
        g_assert_nonnull(at);
        at[8] = 'U', at[9] = 'S';
        /* and no BurnedInAnnotation: (0028,0301) "NO" becomes (0028,0300), which it precedes */
        static const char burned[] = "\x28\x00\x01\x03"
                                     "CS\x02\x00"
                                     "NO";
        char *b = memmem(bytes, len, burned, 10);
        g_assert_nonnull(b);
        b[2] = 0x00;
        g_autofree char *name = g_strdup_printf("us-%d.dcm", i + 1);
        g_autofree char *path = g_build_filename(tmpdir, name, NULL);
        g_assert_true(g_file_set_contents(path, bytes, (gssize)len, NULL));
        ClCaseImage *ci = g_new0(ClCaseImage, 1);
        g_assert_true(cl_case_image_from_file(path, 0, ci, &error));
        g_ptr_array_add(images, ci);
    }
    g_autofree char *db_path = g_build_filename(tmpdir, "burned-in.db", NULL);
    ClCaseDb *db = cl_casedb_open(db_path, CL_CASEDB_OPEN_DEFAULT, &error);
    g_assert_no_error(error);
    gint64 id = 0;
    g_assert_true(cl_casedb_case_new(db, "Ultrasound", &id, &error));
    g_assert_true(cl_casedb_images_add(db, id, images, NULL, &error));
    ClWindow *win = window_on_case(db, id);
    set_description_text(win, "No change.");
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.save-description", NULL));

    for (int checked = 0; checked < 2; checked++) {
        g_autofree char *name = g_strdup_printf("us-%d.pdf", checked);
        g_autofree char *path = g_build_filename(tmpdir, name, NULL);
        g_autoptr(GFile) file = g_file_new_for_path(path);
        cl_window_export_report(win, file);
        AdwMessageDialog *d = find_dialog(win);
        g_assert_nonnull(d);
        GtkWidget *sw = find_widget(GTK_WIDGET(d), GTK_TYPE_SWITCH, NULL);
        g_assert_true(gtk_switch_get_active(GTK_SWITCH(sw))); /* DICOM: on by default */
        GtkWidget *row = find_widget(GTK_WIDGET(d), ADW_TYPE_ACTION_ROW, "burned-in-checked");
        g_assert_nonnull(row);
        g_assert_true(gtk_widget_is_visible(row));
        g_assert_nonnull(strstr(adw_action_row_get_subtitle(ADW_ACTION_ROW(row)),
                                "2 images may show text burned into their pixels"));
        gtk_switch_set_active(GTK_SWITCH(sw), FALSE); /* the row goes with de-identification */
        g_assert_false(gtk_widget_is_visible(row));
        gtk_switch_set_active(GTK_SWITCH(sw), TRUE);
        GtkWidget *bsw = find_widget(row, GTK_TYPE_SWITCH, NULL);
        g_assert_nonnull(bsw);
        gtk_switch_set_active(GTK_SWITCH(bsw), checked);
        answer_dialog(win, "export");
        g_assert_true(wait_for(not_exporting, win));
        g_assert_cmpint(cl_window_get_last_export_ok(win), ==, checked);
        g_assert_cmpint(g_file_test(path, G_FILE_TEST_EXISTS), ==, checked);
        if (!checked)
            g_assert_nonnull(label_containing(GTK_WIDGET(win), "burned"));
    }
    close_window(win, db);
}

/* The export asks whether to de-identify (a switch, off for a case without DICOM) and, while it is
 * on, lists what it changes in the reviewer's signed text before anything is written; the report
 * says the text was de-identified and the case keeps it as signed. */
static void test_report_deidentify(void)
{
    g_autofree char *db_path = g_build_filename(tmpdir, "report-deid.db", NULL);
    g_autoptr(GError) error = NULL;
    ClCaseDb *db = cl_casedb_open(db_path, CL_CASEDB_OPEN_DEFAULT, &error);
    g_assert_no_error(error);
    gint64 id = shifted_case(db, "Follow-up", "report-deid", 0);
    ClWindow *win = window_on_case(db, id);
    g_autoptr(GSettings) settings = g_settings_new("io.changelens.ChangeLens");
    g_settings_set_string(settings, "reviewer-name", "Dr Test");
    const char *signed_text = "Compared with the prior of 2024-03-12: a red square appeared.";
    set_description_text(win, signed_text);
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.accept-description", NULL));
    g_assert_cmpuint(n_versions(db, id), ==, 2); /* the edit, then its acceptance */

    g_autofree char *path = g_build_filename(tmpdir, "report-deid.json", NULL);
    g_autoptr(GFile) file = g_file_new_for_path(path);
    cl_window_export_report(win, file);
    g_assert_false(cl_window_get_exporting(win)); /* nothing is written before the answer */
    AdwMessageDialog *d = find_dialog(win);
    g_assert_nonnull(d);
    GtkWidget *sw = find_widget(GTK_WIDGET(d), GTK_TYPE_SWITCH, NULL);
    g_assert_nonnull(sw);
    g_assert_false(gtk_switch_get_active(GTK_SWITCH(sw))); /* photographs: off by default */
    GtkWidget *row = find_widget(GTK_WIDGET(d), ADW_TYPE_ACTION_ROW, "deid-change");
    g_assert_nonnull(row);
    g_assert_false(gtk_widget_is_visible(row));
    gtk_switch_set_active(GTK_SWITCH(sw), TRUE);
    g_assert_true(gtk_widget_is_visible(row));
    /* the signed sentence as written and as the report will have it */
    const char *sub = adw_action_row_get_subtitle(ADW_ACTION_ROW(row));
    g_test_message("%s", sub);
    g_assert_nonnull(strstr(sub, "As written: Compared with the prior of 2024-03-12"));
    const char *in_report = strstr(sub, "In the report: Compared with the prior of ");
    g_assert_nonnull(in_report);
    g_autofree char *shifted = g_strndup(in_report + strlen("In the report: Compared with the "
                                                            "prior of "),
                                         10);
    g_assert_cmpstr(shifted, !=, "2024-03-12");
    g_assert_true(g_regex_match_simple("^[0-9]{4}-[0-9]{2}-[0-9]{2}$", shifted, 0, 0));
    g_assert_nonnull(strstr(adw_preferences_row_get_title(ADW_PREFERENCES_ROW(row)),
                            "Description, version 2 (accepted, by Dr Test)"));
    answer_dialog(win, "export");
    g_assert_true(wait_for(not_exporting, win));
    g_assert_true(cl_window_get_last_export_ok(win));

    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root = read_json(path, parser);
    g_assert_true(json_object_get_boolean_member(root, "deidentified"));
    JsonObject *v =
        json_array_get_object_element(json_object_get_array_member(root, "descriptions"), 1);
    g_autofree char *expected =
        g_strdup_printf("Compared with the prior of %s: a red square appeared.", shifted);
    g_assert_cmpstr(json_object_get_string_member(v, "text"), ==, expected); /* as shown */
    g_assert_true(json_object_get_boolean_member(v, "deidentified_text"));
    /* the case keeps the text as signed */
    g_autoptr(ClCase) c = cl_casedb_get_case(db, id, CL_CASE_GET_DEFAULT, &error);
    g_assert_cmpstr(cl_case_current_description(c)->text, ==, signed_text);

    /* the page says so next to the text and the sign-off */
    g_autofree char *html_path = g_build_filename(tmpdir, "report-deid.html", NULL);
    g_autoptr(GFile) html_file = g_file_new_for_path(html_path);
    cl_window_export_report(win, html_file);
    d = find_dialog(win);
    g_assert_nonnull(d);
    sw = find_widget(GTK_WIDGET(d), GTK_TYPE_SWITCH, NULL);
    gtk_switch_set_active(GTK_SWITCH(sw), TRUE);
    answer_dialog(win, "export");
    g_assert_true(wait_for(not_exporting, win));
    g_autofree char *html = read_text(html_path);
    g_assert_nonnull(strstr(html, "De-identified copy of this text"));
    g_assert_nonnull(strstr(html, "moved back with every date of this de-identified report"));
    g_assert_null(strstr(html, "2024-03-12"));

    /* Cancel writes nothing */
    g_assert_true(g_unlink(path) == 0);
    cl_window_export_report(win, file);
    answer_dialog(win, "cancel");
    g_assert_false(cl_window_get_exporting(win));
    g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS));
    g_settings_reset(settings, "reviewer-name");
    close_window(win, db);
}

/* Describe and Export with an unsaved edit ask first: Cancel runs nothing and files nothing;
 * Export the Saved Version writes the saved one and leaves the edit in the editor, unsaved;
 * Save keeps the edit as a draft version before the model's text replaces it. */
static void test_unsaved_edit(void)
{
    g_autofree char *db_path = g_build_filename(tmpdir, "report-unsaved.db", NULL);
    g_autoptr(GError) error = NULL;
    ClCaseDb *db = cl_casedb_open(db_path, CL_CASEDB_OPEN_DEFAULT, &error);
    g_assert_no_error(error);
    gint64 id = shifted_case(db, "Unsaved", "report-unsaved", 0);
    ClWindow *win = window_on_case(db, id);
    g_autoptr(GSettings) settings = g_settings_new("io.changelens.ChangeLens");
    g_settings_set_string(settings, "reviewer-name", "Dr Test");
    const char *edit = "My own words, not yet saved.";
    set_description_text(win, edit);
    GtkTextBuffer *buf = gtk_text_view_get_buffer(find_text_view(win));

    /* Describe asks; Cancel: no run, nothing filed, the edit still there */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.describe", NULL));
    g_assert_nonnull(find_dialog(win));
    g_assert_false(cl_window_get_describing(win));
    g_assert_cmpuint(n_versions(db, id), ==, 0);
    answer_dialog(win, "cancel");
    g_assert_false(cl_window_get_describing(win));
    g_assert_cmpuint(n_versions(db, id), ==, 0);
    g_autofree char *still = cl_window_get_description(win);
    g_assert_cmpstr(still, ==, edit);
    g_assert_true(gtk_text_buffer_get_modified(buf));

    /* Export asks; the saved version (none) is reported, the edit is kept in the editor */
    g_autofree char *json = export_as(win, "report-unsaved.json", "keep");
    g_assert_cmpuint(n_versions(db, id), ==, 0);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root = read_json(json, parser);
    g_assert_cmpuint(json_array_get_length(json_object_get_array_member(root, "descriptions")), ==,
                     0);
    g_autofree char *kept = cl_window_get_description(win);
    g_assert_cmpstr(kept, ==, edit);
    g_assert_true(gtk_text_buffer_get_modified(buf));

    /* Save and Export: filed as a draft by the reviewer, then reported */
    g_autofree char *json2 = export_as(win, "report-unsaved-saved.json", "save");
    g_assert_cmpuint(n_versions(db, id), ==, 1);
    g_autoptr(JsonParser) parser2 = json_parser_new();
    JsonObject *v = json_array_get_object_element(
        json_object_get_array_member(read_json(json2, parser2), "descriptions"), 0);
    g_assert_cmpstr(json_object_get_string_member(v, "text"), ==, edit);
    g_assert_cmpstr(json_object_get_string_member(v, "status"), ==, "draft");

    /* a new edit, then Describe → Save: the edit is a version before the model's text */
    set_description_text(win, "A second thought.");
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.describe", NULL));
    answer_dialog(win, "save");
    g_assert_cmpuint(n_versions(db, id), >=, 2);
    g_assert_true(wait_for(not_describing, win));
    g_autoptr(ClCase) c = cl_casedb_get_case(db, id, CL_CASE_GET_DEFAULT, &error);
    gboolean found = FALSE;
    for (guint i = 0; i < c->descriptions->len; i++) {
        const ClCaseDescVersion *dv = c->descriptions->pdata[i];
        found |= g_strcmp0(dv->text, "A second thought.") == 0 &&
                 g_strcmp0(dv->author, "Dr Test") == 0 && dv->status == CL_DESC_DRAFT;
    }
    g_assert_true(found);

    /* browsing to an older version with an edit in the editor asks first (it used to file the
     * edit as a new version unasked): Cancel keeps the edit and files nothing */
    const guint before = n_versions(db, id);
    const char *third = "Third thought, unsaved.";
    set_description_text(win, third);
    GtkWidget *panel = find_widget_of_type(GTK_WIDGET(win), g_type_from_name("ClDescriptionPanel"));
    g_assert_nonnull(panel);
    g_signal_emit_by_name(panel, "version-selected", 0u);
    g_assert_nonnull(find_dialog(win));
    answer_dialog(win, "cancel");
    g_assert_cmpuint(n_versions(db, id), ==, before);
    g_autofree char *kept2 = cl_window_get_description(win);
    g_assert_cmpstr(kept2, ==, third);
    /* Discard: the older version shows, nothing filed */
    g_signal_emit_by_name(panel, "version-selected", 0u);
    answer_dialog(win, "discard");
    g_assert_cmpuint(n_versions(db, id), ==, before);
    g_autofree char *oldest = cl_window_get_description(win);
    g_assert_cmpstr(oldest, !=, third);
    g_assert_false(gtk_text_buffer_get_modified(buf));
    gboolean filed = FALSE; /* the text shown is a filed version's */
    g_autoptr(ClCase) c2 = cl_casedb_get_case(db, id, CL_CASE_GET_DEFAULT, &error);
    for (guint i = 0; i < c2->descriptions->len; i++)
        filed |= g_strcmp0(((ClCaseDescVersion *)c2->descriptions->pdata[i])->text, oldest) == 0;
    g_assert_true(filed);
    g_settings_reset(settings, "reviewer-name");
    close_window(win, db);
}

/* Notes and key images from the window: the n key's dialog files a note by the reviewer, the k
 * key marks the later image; both are in the case and listed in the panel. */
static void test_notes_key_images(void)
{
    g_autofree char *db_path = g_build_filename(tmpdir, "report-notes.db", NULL);
    g_autoptr(GError) error = NULL;
    ClCaseDb *db = cl_casedb_open(db_path, CL_CASEDB_OPEN_DEFAULT, &error);
    g_assert_no_error(error);
    gint64 id = shifted_case(db, "Notes", "report-notes", 0);
    ClWindow *win = window_on_case(db, id);
    g_autoptr(GSettings) settings = g_settings_new("io.changelens.ChangeLens");
    g_settings_set_string(settings, "reviewer-name", "Dr Test");
    GtkWidget *panel = find_widget_of_type(GTK_WIDGET(win), g_type_from_name("ClDescriptionPanel"));
    g_assert_nonnull(panel);
    g_assert_cmpstr(cl_description_panel_get_notes(CL_DESCRIPTION_PANEL(panel)), ==, "");

    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.add-note", NULL));
    AdwMessageDialog *d = find_dialog(win);
    g_assert_nonnull(d);
    gtk_editable_set_text(GTK_EDITABLE(g_object_get_data(G_OBJECT(d), "entry")),
                          "  Compare with the 2023 film.  ");
    answer_dialog(win, "add");
    g_autoptr(ClCase) c = cl_casedb_get_case(db, id, CL_CASE_GET_DEFAULT, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(c->notes->len, ==, 1);
    const ClCaseNote *n = c->notes->pdata[0];
    g_assert_cmpstr(n->text, ==, "Compare with the 2023 film.");
    g_assert_cmpstr(n->author, ==, "Dr Test");
    g_assert_nonnull(strstr(cl_description_panel_get_notes(CL_DESCRIPTION_PANEL(panel)),
                            "Dr Test: Compare with the 2023 film."));
    /* an empty note is not filed */
    g_assert_false(cl_window_cases_add_note(win, "   "));

    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.key-image", NULL));
    g_clear_pointer(&c, cl_case_free);
    c = cl_casedb_get_case(db, id, CL_CASE_GET_DEFAULT, &error);
    g_assert_cmpuint(c->key_images->len, ==, 1);
    guint a, b;
    cl_window_get_pair(win, &a, &b);
    const ClCaseKeyImage *k = c->key_images->pdata[0];
    g_assert_cmpint(k->image_id, ==, ((ClCaseImage *)c->images->pdata[b])->id);
    g_assert_nonnull(
        strstr(cl_description_panel_get_notes(CL_DESCRIPTION_PANEL(panel)), "Key image: "));
    g_settings_reset(settings, "reviewer-name");
    close_window(win, db);
}

void test_ui_report_register(void)
{
    g_test_add_func("/ui/report/notes-key-images", test_notes_key_images);
    g_test_add_func("/ui/report/view", test_report_view);
    g_test_add_func("/ui/report/deidentify", test_report_deidentify);
    g_test_add_func("/ui/report/burned-in-checked", test_burned_in_checked);
    g_test_add_func("/ui/report/unsaved-edit", test_unsaved_edit);
}
