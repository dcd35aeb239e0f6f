/* test-ui-cases.c - Cases in the window: the sidebar and the demo cases, runs recorded, the review
 * with versions and the report, the filmstrip's pairs and order, one import made into cases (and
 * two photos picked together into one), the keys and the focus after Accept, the questions before
 * an edit is kept or an accepted text reopened, the reviewer's name, each case's view kept; a
 * patient's studies found in a real Orthanc and opened as a case ("From PACS…"); another
 * reviewer's changes on a shared PostgreSQL database shown, and an edit that meets theirs kept. */
#include "ui-util.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "casedb/casedb.h"
#include "cl-application.h"
#include "cl-filmstrip.h"
#include "cl-pacs-dialog.h"
#include "fixtures.h"

typedef struct {
    ClWindow *win;
    gint64 id;
} CaseWait;

static gboolean case_is(gpointer data)
{
    CaseWait *w = data;
    return cl_window_get_case_id(w->win) == w->id;
}

/* Whether the window's action is enabled now, as its button in the panel shows it. */
static gboolean action_enabled(ClWindow *win, const char *action)
{
    GtkWidget *button = find_actionable(GTK_WIDGET(win), action);
    g_assert_nonnull(button);
    return gtk_widget_get_sensitive(button);
}

static void test_cases(void)
{
    g_autofree char *db_path = g_build_filename(tmpdir, "cases.db", NULL);
    g_autoptr(GError) error = NULL;
    ClCaseDb *db = cl_casedb_open(db_path, CL_CASEDB_OPEN_DEFAULT, &error);
    g_assert_no_error(error);
    const char *demo = g_getenv("CL_DEMO_DIR");
    g_assert_nonnull(demo);
    g_assert_true(cl_application_add_demo_cases(db, demo, &error));
    g_assert_no_error(error);
    g_autoptr(GPtrArray) cases = cl_casedb_list(db, &error);
    g_assert_cmpuint(cases->len, ==, 3);
    /* the first listed (most recent) is the first of cases.json: the radiograph */
    const ClCaseSummary *first = cases->pdata[0];
    g_assert_nonnull(strstr(first->name, "radiograph"));
    g_assert_cmpstr(first->modalities, !=, "");

    ClWindow *win = cl_window_new(NULL);
    gtk_window_set_default_size(GTK_WINDOW(win), 1200, 700);
    gtk_window_present(GTK_WINDOW(win));
    cl_window_set_case_db(win, db);
    cl_window_open_case(win, first->id);
    g_assert_cmpint(cl_window_get_case_id(win), ==, first->id);
    g_assert_true(wait_for(case_shown, win));
    g_assert_cmpstr(cl_document_get_name(cl_image_view_get_document(cl_window_get_view(win, 0))),
                    ==, "before.dcm");
    g_assert_cmpstr(cl_document_get_name(cl_image_view_get_document(cl_window_get_view(win, 1))),
                    ==, "after.dcm");

    /* a model run is recorded in the case: run, version 1 by the model, heat map */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.describe", NULL));
    g_assert_true(wait_for(not_describing, win));
    g_autoptr(ClCase) c = cl_casedb_get_case(db, first->id, CL_CASE_HEATMAP_DATA, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(c->runs->len, ==, 1);
    const ClCaseDescVersion *v = cl_case_current_description(c);
    g_assert_nonnull(v);
    g_assert_cmpuint(v->version, ==, 1);
    g_assert_cmpstr(v->author, ==, "model");
    g_autofree char *shown = cl_window_get_description(win);
    g_assert_cmpstr(shown, ==, v->text);
    /* the mean and each encoder block's map */
    g_assert_cmpuint(c->heatmaps->len, ==, 1 + cl_window_get_n_heat_layers(win));
    save_screenshot(win, "case-described");
    /* the demo note (the generator's ground truth) is not given to a model never trained to
     * read prior reports, and the panel says so */
    g_assert_nonnull(label_containing(GTK_WIDGET(win), "not trained to read prior reports"));

    /* the reviewer (named once: /ui/window/reviewer-name) edits and accepts: two new versions,
     * the text kept as typed */
    g_autoptr(GSettings) settings = g_settings_new("io.changelens.ChangeLens");
    g_settings_set_string(settings, "reviewer-name", "Test Reviewer");
    set_description_text(win, "Edited by the reviewer: new finding at the right base.");
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.accept-description", NULL));
    g_clear_pointer(&c, cl_case_free);
    c = cl_casedb_get_case(db, first->id, CL_CASE_GET_DEFAULT, &error);
    v = cl_case_current_description(c);
    g_assert_cmpuint(v->version, ==, 3);
    g_assert_cmpint(v->status, ==, CL_DESC_ACCEPTED);
    g_assert_cmpstr(v->text, ==, "Edited by the reviewer: new finding at the right base.");
    g_assert_cmpstr(v->author, ==, "Test Reviewer");

    /* the case's report, as the menu's Export Report writes it */
    g_autofree char *pdf = g_build_filename(tmpdir, "report.pdf", NULL);
    g_autoptr(GFile) pdf_file = g_file_new_for_path(pdf);
    cl_window_export_report(win, pdf_file);
    answer_dialog(win, "export"); /* de-identified: on by default for a DICOM case */
    /* written in a worker (it may be done by the time the dialog is gone) */
    g_assert_true(wait_for(not_exporting, win));
    g_assert_true(cl_window_get_last_export_ok(win));
    g_autofree char *bytes = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(pdf, &bytes, &len, NULL));
    g_assert_cmpuint(len, >, 10000);
    g_assert_true(memcmp(bytes, "%PDF-", 5) == 0);
    const char *shots = g_getenv("CL_SCREENSHOT_DIR");
    if (shots && *shots) {
        g_mkdir_with_parents(shots, 0755);
        g_autofree char *copy = g_build_filename(shots, "case-report.pdf", NULL);
        g_assert_true(g_file_set_contents(copy, bytes, (gssize)len, NULL));
    }

    /* the accepted text is changed after Edit (asked first); an edit left unsaved when another
     * case is opened is kept as a version when the reviewer says Save */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.edit-description", NULL));
    answer_dialog(win, "edit");
    set_description_text(win, "A later thought, never saved by hand.");
    const ClCaseSummary *second = cases->pdata[1];
    cl_window_open_case(win, second->id);
    g_assert_cmpint(cl_window_get_case_id(win), ==, first->id);
    answer_dialog(win, "save");
    g_assert_true(wait_for(case_shown, win));
    g_assert_cmpint(cl_window_get_case_id(win), ==, second->id);
    g_clear_pointer(&c, cl_case_free);
    c = cl_casedb_get_case(db, first->id, CL_CASE_GET_DEFAULT, &error);
    v = cl_case_current_description(c);
    g_assert_cmpuint(v->version, ==, 4);
    g_assert_cmpstr(v->text, ==, "A later thought, never saved by hand.");
    g_assert_cmpint(v->status, ==, CL_DESC_DRAFT);
    /* keyboard review: the next case in the list (the third), then back */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.next-case", NULL));
    CaseWait cw = { win, ((ClCaseSummary *)cases->pdata[2])->id };
    g_assert_true(wait_for(case_is, &cw)); /* opened from an idle, after the list's signal */
    g_assert_true(wait_for(case_shown, win));
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.previous-case", NULL));
    cw.id = second->id;
    g_assert_true(wait_for(case_is, &cw));
    g_assert_true(wait_for(case_shown, win));
    /* the second case has no description: the editor is empty */
    g_autofree char *empty = cl_window_get_description(win);
    g_assert_cmpstr(empty, ==, "");

    /* opened files become a new case */
    g_autofree char *before = g_build_filename(tmpdir, "scene-before.png", NULL);
    g_autofree char *after = g_build_filename(tmpdir, "scene-after.png", NULL);
    write_scene(before, FALSE);
    write_scene(after, TRUE);
    const char *paths[] = { before, after };
    open_paths(win, paths, 2);
    g_assert_true(wait_for(window_idle, win));
    g_autoptr(GPtrArray) now = cl_casedb_list(db, &error);
    g_assert_cmpuint(now->len, ==, 4);
    const ClCaseSummary *made = now->pdata[0];
    g_assert_cmpstr(made->name, ==, "scene-before.png and scene-after.png");
    g_assert_cmpuint(made->n_images, ==, 2);
    g_assert_cmpint(cl_window_get_case_id(win), ==, made->id);
    save_screenshot(win, "cases");
    g_settings_reset(settings, "reviewer-name");
    gtk_window_destroy(GTK_WINDOW(win));
    for (int i = 0; i < 10; i++)
        g_main_context_iteration(NULL, FALSE);
    cl_casedb_close(db);
}

static gboolean pair_is(gpointer data, guint want)
{
    guint a, b;
    cl_window_get_pair(CL_WINDOW(data), &a, &b);
    return b == want && a == want - 1;
}

static gboolean pair_is_second(gpointer data)
{
    return pair_is(data, 1);
}

static gboolean pair_is_third(gpointer data)
{
    return pair_is(data, 2);
}

/* The filmstrip: a sequence of three, any pair shown, the order changed by a move, the case's
 * order in the database following. */
static void test_filmstrip(void)
{
    g_autofree char *db_path = g_build_filename(tmpdir, "film.db", NULL);
    g_autoptr(GError) error = NULL;
    ClCaseDb *db = cl_casedb_open(db_path, CL_CASEDB_OPEN_DEFAULT, &error);
    g_assert_no_error(error);
    g_autofree char *p1 = g_build_filename(tmpdir, "film-1.png", NULL);
    g_autofree char *p2 = g_build_filename(tmpdir, "film-2.png", NULL);
    g_autofree char *p3 = g_build_filename(tmpdir, "film-3.png", NULL);
    write_scene_at(p1, FALSE, 0, 0);
    write_scene_at(p2, FALSE, 3, 0);
    write_scene_at(p3, TRUE, 3, 0);
    ClWindow *win = cl_window_new(NULL);
    gtk_window_set_default_size(GTK_WINDOW(win), 1000, 700);
    gtk_window_present(GTK_WINDOW(win));
    cl_window_set_case_db(win, db);
    const char *paths[] = { p1, p2, p3 };
    open_paths(win, paths, 3);
    g_assert_true(wait_for(window_idle, win));
    g_assert_cmpuint(cl_window_get_n_sequence(win), ==, 3);
    guint a, b;
    cl_window_get_pair(win, &a, &b);
    g_assert_cmpuint(a, ==, 0);
    g_assert_cmpuint(b, ==, 1);
    /* the case holds all three */
    gint64 id = cl_window_get_case_id(win);
    g_autoptr(ClCase) c = cl_casedb_get_case(db, id, CL_CASE_GET_DEFAULT, &error);
    g_assert_cmpuint(c->images->len, ==, 3);
    g_assert_cmpstr(c->summary.name, ==, "film-1.png and 2 more");

    /* the third next to the second */
    cl_window_show_pair(win, 2);
    g_assert_true(wait_for(window_idle, win));
    cl_window_get_pair(win, &a, &b);
    g_assert_cmpuint(a, ==, 1);
    g_assert_cmpuint(b, ==, 2);
    g_assert_cmpstr(cl_document_get_name(cl_image_view_get_document(cl_window_get_view(win, 1))),
                    ==, "film-3.png");
    save_screenshot(win, "filmstrip");

    /* cine steps the later image on: 2 → 3 → 2 (after the last, the second again) */
    g_assert_false(cl_window_get_cine(win));
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.cine", NULL));
    g_assert_true(cl_window_get_cine(win));
    g_assert_true(wait_for(pair_is_second, win));
    g_assert_true(wait_for(pair_is_third, win));
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.cine", NULL));
    g_assert_false(cl_window_get_cine(win));
    cl_window_show_pair(win, 2);
    g_assert_true(wait_for(window_idle, win));

    /* the third becomes the first: in the window and in the case */
    cl_window_move_image(win, 2, 0);
    g_assert_true(wait_for(window_idle, win));
    g_clear_pointer(&c, cl_case_free);
    c = cl_casedb_get_case(db, id, CL_CASE_GET_DEFAULT, &error);
    g_assert_true(g_str_has_suffix(((ClCaseImage *)c->images->pdata[0])->path, "film-3.png"));
    g_assert_true(g_str_has_suffix(((ClCaseImage *)c->images->pdata[1])->path, "film-1.png"));
    g_assert_true(g_str_has_suffix(((ClCaseImage *)c->images->pdata[2])->path, "film-2.png"));

    /* a model run on the pair shown is recorded against those two images */
    cl_window_show_pair(win, 2);
    g_assert_true(wait_for(window_idle, win));
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.describe", NULL));
    g_assert_true(wait_for(not_describing, win));
    g_clear_pointer(&c, cl_case_free);
    c = cl_casedb_get_case(db, id, CL_CASE_HEATMAP_DATA, &error);
    g_assert_cmpuint(c->runs->len, ==, 1);
    for (guint i = 0; i < c->heatmaps->len; i++) {
        const ClCaseHeatmap *hm = g_ptr_array_index(c->heatmaps, i);
        g_assert_cmpint(hm->image_id, ==, ((ClCaseImage *)c->images->pdata[2])->id);
    }
    g_assert_cmpuint(cl_window_get_described_images(win), ==, 2);

    /* the long history: every image before the pair too, recorded in order */
    g_autoptr(GSettings) settings = g_settings_new("io.changelens.ChangeLens");
    g_settings_set_boolean(settings, "long-history", TRUE);
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.describe", NULL));
    g_assert_true(wait_for(not_describing, win));
    g_settings_reset(settings, "long-history");
    g_assert_cmpuint(cl_window_get_described_images(win), ==, 3);
    g_clear_pointer(&c, cl_case_free);
    c = cl_casedb_get_case(db, id, CL_CASE_HEATMAP_DATA, &error);
    g_assert_cmpuint(c->runs->len, ==, 2);
    const ClCaseRun *run = g_ptr_array_index(c->runs, 1);
    g_autoptr(JsonNode) settings_json = json_from_string(run->settings_json, &error);
    g_assert_no_error(error);
    JsonArray *read = json_object_get_array_member(json_node_get_object(settings_json), "images");
    g_assert_cmpuint(json_array_get_length(read), ==, 3);
    for (guint i = 0; i < 3; i++)
        g_assert_cmpint(
            json_object_get_int_member(json_array_get_object_element(read, i), "image_id"), ==,
            ((ClCaseImage *)c->images->pdata[i])->id);
    /* a map for each image after the first it read: the later two */
    guint later = 0;
    for (guint i = 0; i < c->heatmaps->len; i++) {
        const ClCaseHeatmap *hm = g_ptr_array_index(c->heatmaps, i);
        g_assert_true(hm->image_id == ((ClCaseImage *)c->images->pdata[1])->id ||
                      hm->image_id == ((ClCaseImage *)c->images->pdata[2])->id);
        later += hm->image_id == ((ClCaseImage *)c->images->pdata[2])->id;
    }
    g_assert_cmpuint(later, >, 0);
    gtk_window_destroy(GTK_WINDOW(win));
    for (int i = 0; i < 10; i++)
        g_main_context_iteration(NULL, FALSE);
    cl_casedb_close(db);
}

/* "Model reads every prior image" on a sequence of 24: the streaming cache takes a prompt
 * longer than the model's context, so the run reads all 24 (it used to stop at the context). */
static void test_long_history_24(void)
{
    g_autofree char *db_path = g_build_filename(tmpdir, "long.db", NULL);
    g_autoptr(GError) error = NULL;
    ClCaseDb *db = cl_casedb_open(db_path, CL_CASEDB_OPEN_DEFAULT, &error);
    g_assert_no_error(error);
    char *paths[24];
    for (int i = 0; i < 24; i++) {
        paths[i] = g_strdup_printf("%s/long-%02d.png", tmpdir, i);
        write_scene_at(paths[i], i == 23, i % 4, i % 3);
    }
    ClWindow *win = cl_window_new(NULL);
    gtk_window_set_default_size(GTK_WINDOW(win), 1000, 700);
    gtk_window_present(GTK_WINDOW(win));
    cl_window_set_case_db(win, db);
    open_paths(win, (const char *const *)paths, 24);
    g_assert_true(wait_for(window_idle, win));
    g_assert_cmpuint(cl_window_get_n_sequence(win), ==, 24);
    cl_window_show_pair(win, 23);
    g_assert_true(wait_for(window_idle, win));
    g_autoptr(GSettings) settings = g_settings_new("io.changelens.ChangeLens");
    g_settings_set_boolean(settings, "long-history", TRUE);
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.describe", NULL));
    g_assert_true(wait_for(not_describing, win));
    g_settings_reset(settings, "long-history");
    g_assert_cmpuint(cl_window_get_described_images(win), ==, 24);
    gint64 id = cl_window_get_case_id(win);
    g_autoptr(ClCase) c = cl_casedb_get_case(db, id, CL_CASE_GET_DEFAULT, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(c->runs->len, ==, 1);
    gtk_window_destroy(GTK_WINDOW(win));
    for (int i = 0; i < 10; i++)
        g_main_context_iteration(NULL, FALSE);
    for (int i = 0; i < 24; i++)
        g_free(paths[i]);
    cl_casedb_close(db);
}

/* The texts of the labels under root that name a frame ("name [k]"), in order. */
static void collect_frame_labels(GtkWidget *root, GString *out)
{
    if (GTK_IS_LABEL(root) && strchr(gtk_label_get_label(GTK_LABEL(root)), '['))
        g_string_append_printf(out, "%s;", strrchr(gtk_label_get_label(GTK_LABEL(root)), '['));
    for (GtkWidget *c = gtk_widget_get_first_child(root); c; c = gtk_widget_get_next_sibling(c))
        collect_frame_labels(c, out);
}

static GtkWidget *find_filmstrip(GtkWidget *root)
{
    if (CL_IS_FILMSTRIP(root))
        return root;
    for (GtkWidget *c = gtk_widget_get_first_child(root); c; c = gtk_widget_get_next_sibling(c)) {
        GtkWidget *found = find_filmstrip(c);
        if (found)
            return found;
    }
    return NULL;
}

static gboolean same_pixels(GdkTexture *x, GdkTexture *y)
{
    int w = gdk_texture_get_width(x), h = gdk_texture_get_height(x);
    if (w != gdk_texture_get_width(y) || h != gdk_texture_get_height(y))
        return FALSE;
    g_autofree guchar *bx = g_malloc((gsize)w * h * 4), *by = g_malloc((gsize)w * h * 4);
    gdk_texture_download(x, bx, (gsize)w * 4);
    gdk_texture_download(y, by, (gsize)w * 4);
    return memcmp(bx, by, (gsize)w * h * 4) == 0;
}

/* A case made of a multi-frame file's frames reopens at those frames: the filmstrip says [1],
 * [2], [3], ..., and the pair compared is the frames chosen, not the first one twice. */
static void test_case_frames(void)
{
    g_autoptr(GPtrArray) fixtures = g_ptr_array_new_with_free_func((GDestroyNotify)cl_fixture_free);
    g_autofree char *dir = g_build_filename(tmpdir, "frame-fixtures", NULL);
    g_assert_cmpint(g_mkdir_with_parents(dir, 0700), ==, 0);
    cl_fixtures_dicom(dir, fixtures, NULL);
    cl_fixtures_tiff(dir, fixtures, NULL);
    const ClFixture *multi = NULL;
    for (guint i = 0; i < fixtures->len && !multi; i++) {
        const ClFixture *f = fixtures->pdata[i];
        if (f->frames >= 3 && f->frames <= 8 && !f->must_fail) {
            g_autoptr(ClImage) img = cl_image_load(f->path, NULL, NULL);
            if (img)
                multi = f;
        }
    }
    if (!multi) {
        g_test_skip("no fixture of three or more frames loads in this build");
        return;
    }
    g_test_message("multi-frame fixture: %s (%u frames)", multi->what, multi->frames);
    g_autofree char *db_path = g_build_filename(tmpdir, "frames.db", NULL);
    g_autoptr(GError) error = NULL;
    ClCaseDb *db = cl_casedb_open(db_path, CL_CASEDB_OPEN_DEFAULT, &error);
    g_assert_no_error(error);
    ClWindow *win = cl_window_new(NULL);
    gtk_window_set_default_size(GTK_WINDOW(win), 1000, 700);
    gtk_window_present(GTK_WINDOW(win));
    cl_window_set_case_db(win, db);
    open_paths(win, (const char *const *)&multi->path, 1);
    g_assert_true(wait_for(window_idle, win));
    guint n = multi->frames;
    g_assert_cmpuint(cl_window_get_n_sequence(win), ==, n);
    gint64 id = cl_window_get_case_id(win);
    g_assert_cmpint(id, >, 0);
    g_autoptr(ClCase) c = cl_casedb_get_case(db, id, CL_CASE_GET_DEFAULT, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(c->images->len, ==, n);
    for (guint i = 0; i < n; i++)
        g_assert_cmpuint(((ClCaseImage *)c->images->pdata[i])->frame, ==, i);

    /* other images, then the case again */
    const char *others[] = { path_a, path_b };
    open_paths(win, others, 2);
    g_assert_true(wait_for(window_idle, win));
    g_assert_cmpint(cl_window_get_case_id(win), !=, id);
    cl_window_open_case(win, id);
    CaseWait cw = { win, id };
    g_assert_true(wait_for(case_is, &cw));
    g_assert_true(wait_for(case_shown, win));
    g_assert_true(wait_for(window_idle, win));
    g_assert_cmpuint(cl_window_get_n_sequence(win), ==, n);

    /* the filmstrip names each frame */
    g_autoptr(GString) labels = g_string_new(NULL), want = g_string_new(NULL);
    collect_frame_labels(find_filmstrip(GTK_WIDGET(win)), labels);
    for (guint i = 0; i < n; i++)
        g_string_append_printf(want, "[%u];", i + 1);
    g_assert_cmpstr(labels->str, ==, want->str);

    /* the first two frames, then the last two: each view at its frame, their pictures differ */
    ClImageView *va = cl_window_get_view(win, 0), *vb = cl_window_get_view(win, 1);
    for (guint later = 1; later < n; later += n - 2) {
        cl_window_show_pair(win, later);
        g_assert_true(wait_for(window_idle, win));
        g_assert_cmpuint(cl_image_view_get_frame(va), ==, later - 1);
        g_assert_cmpuint(cl_image_view_get_frame(vb), ==, later);
        g_assert_true(cl_image_view_get_document(va) == cl_image_view_get_document(vb));
        g_assert_nonnull(cl_image_view_get_texture(va));
        g_assert_nonnull(cl_image_view_get_texture(vb));
        g_assert_false(same_pixels(cl_image_view_get_texture(va), cl_image_view_get_texture(vb)));
        if (n == 2)
            break;
    }
    gtk_window_destroy(GTK_WINDOW(win));
    for (int i = 0; i < 10; i++)
        g_main_context_iteration(NULL, FALSE);
    cl_casedb_close(db);
}

/* One import of two photo pairs makes two cases (same file stem, version words dropped); a fifth
 * file that matches neither is named in the toast. */
static void test_import_pairs(void)
{
    g_autofree char *db_path = g_build_filename(tmpdir, "pairs.db", NULL);
    g_autoptr(GError) error = NULL;
    ClCaseDb *db = cl_casedb_open(db_path, CL_CASEDB_OPEN_DEFAULT, &error);
    g_assert_no_error(error);
    /* and one that matches neither pair */
    const char *names[] = { "harbour-before.png", "garden-before.png", "harbour-after.png",
                            "garden-after.png", "lighthouse.png" };
    char *paths[5];
    for (int i = 0; i < 5; i++) {
        paths[i] = g_build_filename(tmpdir, names[i], NULL);
        write_scene_at(paths[i], i >= 2, 0, 0);
    }
    ClWindow *win = cl_window_new(NULL);
    gtk_window_present(GTK_WINDOW(win));
    cl_window_set_case_db(win, db);
    open_paths(win, (const char *const *)paths, 5);
    g_assert_true(wait_for(window_idle, win));
    g_assert_true(wait_for(case_shown, win));
    g_autoptr(GPtrArray) list = cl_casedb_list(db, &error);
    g_assert_cmpuint(list->len, ==, 2);
    for (guint i = 0; i < 2; i++) {
        const ClCaseSummary *cs = list->pdata[i];
        g_assert_cmpuint(cs->n_images, ==, 2);
        g_assert_true(g_str_has_suffix(cs->name, "-after.png"));
    }
    /* the toast counts the cases made and names the file in none */
    g_test_message("toast: %s", cl_window_get_last_toast(win));
    g_assert_true(g_str_has_prefix(cl_window_get_last_toast(win), "The files make 2 cases"));
    g_assert_nonnull(strstr(cl_window_get_last_toast(win), "lighthouse.png"));
    /* the first pair is the one shown, as its own case */
    g_assert_cmpuint(cl_window_get_n_sequence(win), ==, 2);
    g_assert_cmpstr(cl_document_get_name(cl_image_view_get_document(cl_window_get_view(win, 0))),
                    ==, "harbour-before.png");
    gtk_window_destroy(GTK_WINDOW(win));
    for (int i = 0; i < 10; i++)
        g_main_context_iteration(NULL, FALSE);
    cl_casedb_close(db);
    for (int i = 0; i < 5; i++)
        g_free(paths[i]);
}

/* Two photos picked together whose names share no stem (an image and its edit) make one case of
 * the two, shown with an empty description (not the previous case's), ready to review. */
static void test_import_two_photos(void)
{
    g_autofree char *db_path = g_build_filename(tmpdir, "two-photos.db", NULL);
    g_autoptr(GError) error = NULL;
    ClCaseDb *db = cl_casedb_open(db_path, CL_CASEDB_OPEN_DEFAULT, &error);
    g_assert_no_error(error);
    /* a previous case with a description, shown first */
    g_autofree char *p0 = g_build_filename(tmpdir, "harbour-1.png", NULL);
    g_autofree char *p1 = g_build_filename(tmpdir, "harbour-2.png", NULL);
    write_scene_at(p0, FALSE, 0, 0);
    write_scene_at(p1, TRUE, 0, 0);
    ClWindow *win = cl_window_new(NULL);
    gtk_window_set_default_size(GTK_WINDOW(win), 1000, 700);
    gtk_window_present(GTK_WINDOW(win));
    cl_window_set_case_db(win, db);
    const char *prev[] = { p0, p1 };
    open_paths(win, prev, 2);
    g_assert_true(wait_for(window_idle, win));
    gint64 prev_id = cl_window_get_case_id(win);
    g_assert_cmpint(prev_id, >, 0);
    set_description_text(win, "The previous case's text.");
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.save-description", NULL));

    /* the photo and its edit, same size, picked together in that order */
    g_autofree char *a = g_build_filename(tmpdir, "astronaut.png", NULL);
    g_autofree char *b = g_build_filename(tmpdir, "astronaut_paste.png", NULL);
    write_scene_at(a, FALSE, 0, 0);
    write_scene_at(b, TRUE, 0, 0);
    const char *paths[] = { a, b };
    open_paths(win, paths, 2);
    g_assert_true(wait_for(window_idle, win));
    g_assert_true(wait_for(case_shown, win));
    g_autoptr(GPtrArray) list = cl_casedb_list(db, &error);
    g_assert_cmpuint(list->len, ==, 2);
    const ClCaseSummary *made = list->pdata[0];
    g_assert_cmpint(made->id, !=, prev_id);
    g_assert_cmpuint(made->n_images, ==, 2);
    g_assert_cmpstr(made->name, ==, "astronaut.png and astronaut_paste.png");
    /* the window shows the new case, in the order picked */
    g_assert_cmpint(cl_window_get_case_id(win), ==, made->id);
    g_autoptr(ClCase) c = cl_casedb_get_case(db, made->id, CL_CASE_GET_DEFAULT, &error);
    g_assert_true(g_str_has_suffix(((ClCaseImage *)c->images->pdata[0])->path, "astronaut.png"));
    g_assert_true(
        g_str_has_suffix(((ClCaseImage *)c->images->pdata[1])->path, "astronaut_paste.png"));
    g_assert_cmpstr(cl_document_get_name(cl_image_view_get_document(cl_window_get_view(win, 0))),
                    ==, "astronaut.png");
    g_assert_cmpstr(cl_document_get_name(cl_image_view_get_document(cl_window_get_view(win, 1))),
                    ==, "astronaut_paste.png");
    /* the panel is the new case's: no text of the previous one; Save, Accept and Export on */
    g_autofree char *shown = cl_window_get_description(win);
    g_assert_cmpstr(shown, ==, "");
    g_assert_true(action_enabled(win, "win.save-description"));
    g_assert_true(action_enabled(win, "win.accept-description"));
    set_description_text(win, "A bicycle was added at the right.");
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.save-description", NULL));
    g_clear_pointer(&c, cl_case_free);
    c = cl_casedb_get_case(db, made->id, CL_CASE_GET_DEFAULT, &error);
    g_assert_cmpstr(cl_case_current_description(c)->text, ==, "A bicycle was added at the right.");
    g_autofree char *json = g_build_filename(tmpdir, "two-photos.json", NULL);
    g_autoptr(GFile) json_file = g_file_new_for_path(json);
    cl_window_export_report(win, json_file);
    answer_dialog(win, "export");
    /* written in a worker (it may be done by the time the dialog is gone) */
    g_assert_true(wait_for(not_exporting, win));
    g_assert_true(cl_window_get_last_export_ok(win));
    gtk_window_destroy(GTK_WINDOW(win));
    for (int i = 0; i < 10; i++)
        g_main_context_iteration(NULL, FALSE);
    cl_casedb_close(db);
}

static gint64 scene_case(ClCaseDb *db, const char *name, const char *stem)
{
    return shifted_case(db, name, stem, 0);
}

static ClDescStatus current_status(ClCaseDb *db, gint64 id)
{
    g_autoptr(ClCase) c = cl_casedb_get_case(db, id, CL_CASE_GET_DEFAULT, NULL);
    return cl_case_current_description(c)->status;
}

/* After Accept the keys are the images' (the accepted text takes no typing, the focus is back on
 * the view), a click on an image takes the focus, switching case neither makes a version nor
 * changes the status, and reopening the accepted text for edits asks first. */
static void test_review_after_accept(void)
{
    g_autofree char *db_path = g_build_filename(tmpdir, "accept.db", NULL);
    g_autoptr(GError) error = NULL;
    ClCaseDb *db = cl_casedb_open(db_path, CL_CASEDB_OPEN_DEFAULT, &error);
    g_assert_no_error(error);
    gint64 first = scene_case(db, "First", "accept-a");
    gint64 second = scene_case(db, "Second", "accept-b");
    ClWindow *win = cl_window_new(NULL);
    gtk_window_set_default_size(GTK_WINDOW(win), 1000, 700);
    gtk_window_present(GTK_WINDOW(win));
    cl_window_set_case_db(win, db);
    cl_window_open_case(win, first);
    g_assert_true(wait_for(case_shown, win));
    GtkTextView *tv = find_text_view(win);
    GtkTextBuffer *buf = gtk_text_view_get_buffer(tv);
    g_autoptr(GSettings) settings = g_settings_new("io.changelens.ChangeLens");
    g_settings_set_string(settings, "reviewer-name", "Test Reviewer");

    /* typed, then accepted from the editor (Ctrl+Return) */
    gtk_widget_grab_focus(GTK_WIDGET(tv));
    set_description_text(win, "A red square appeared at the upper right.");
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.accept-description", NULL));
    guint accepted_versions = n_versions(db, first);
    g_assert_cmpint(current_status(db, first), ==, CL_DESC_ACCEPTED);
    /* the focus is the image's, the text takes no key: "0" typed as the editor would insert it */
    GtkWidget *focus = gtk_window_get_focus(GTK_WINDOW(win));
    g_assert_true(focus == GTK_WIDGET(cl_window_get_view(win, 0)));
    g_assert_false(gtk_text_view_get_editable(tv));
    gtk_text_buffer_insert_interactive_at_cursor(buf, "0", 1, gtk_text_view_get_editable(tv));
    g_autofree char *text = cl_window_get_description(win);
    g_assert_cmpstr(text, ==, "A red square appeared at the upper right.");
    g_assert_false(gtk_text_buffer_get_modified(buf));
    g_assert_false(action_enabled(win, "win.save-description"));
    g_assert_false(action_enabled(win, "win.accept-description"));
    g_assert_true(action_enabled(win, "win.edit-description"));

    /* a click on the later image takes the focus from the text */
    gtk_widget_grab_focus(GTK_WIDGET(tv));
    g_assert_true(gtk_window_get_focus(GTK_WINDOW(win)) == GTK_WIDGET(tv));
    press_view(cl_window_get_view(win, 1), 20, 20);
    g_assert_true(gtk_window_get_focus(GTK_WINDOW(win)) == GTK_WIDGET(cl_window_get_view(win, 1)));

    /* to the other case and back: no question, no version, still accepted and read-only */
    cl_window_open_case(win, second);
    g_assert_null(find_dialog(win));
    g_assert_cmpint(cl_window_get_case_id(win), ==, second);
    g_assert_true(wait_for(case_shown, win));
    g_assert_true(gtk_text_view_get_editable(tv)); /* a case not described yet: editable */
    cl_window_open_case(win, first);
    g_assert_true(wait_for(case_shown, win));
    g_assert_cmpuint(n_versions(db, first), ==, accepted_versions);
    g_assert_cmpint(current_status(db, first), ==, CL_DESC_ACCEPTED);
    g_assert_false(gtk_text_view_get_editable(tv));

    /* Edit asks first; Cancel leaves it accepted and read-only */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.edit-description", NULL));
    answer_dialog(win, "cancel");
    g_assert_false(gtk_text_view_get_editable(tv));
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.edit-description", NULL));
    answer_dialog(win, "edit");
    g_assert_true(gtk_text_view_get_editable(tv));
    g_assert_true(gtk_window_get_focus(GTK_WINDOW(win)) == GTK_WIDGET(tv));
    g_assert_true(action_enabled(win, "win.accept-description"));
    /* still accepted in the case until the edit is saved */
    g_assert_cmpint(current_status(db, first), ==, CL_DESC_ACCEPTED);
    GtkTextIter end;
    gtk_text_buffer_get_end_iter(buf, &end);
    gtk_text_buffer_place_cursor(buf, &end);
    g_assert_true(gtk_text_buffer_insert_interactive_at_cursor(buf, " It is 70 px wide.", -1,
                                                               gtk_text_view_get_editable(tv)));
    /* switching with the edit asks: Cancel stays on the case, nothing recorded */
    cl_window_open_case(win, second);
    g_assert_cmpint(cl_window_get_case_id(win), ==, first);
    answer_dialog(win, "cancel");
    g_assert_cmpint(cl_window_get_case_id(win), ==, first);
    g_assert_cmpuint(n_versions(db, first), ==, accepted_versions);
    /* Discard: the other case opens, the accepted version is still the current one */
    cl_window_open_case(win, second);
    answer_dialog(win, "discard");
    g_assert_cmpint(cl_window_get_case_id(win), ==, second);
    g_assert_true(wait_for(case_shown, win));
    g_assert_cmpuint(n_versions(db, first), ==, accepted_versions);
    g_assert_cmpint(current_status(db, first), ==, CL_DESC_ACCEPTED);
    g_settings_reset(settings, "reviewer-name");
    gtk_window_destroy(GTK_WINDOW(win));
    for (int i = 0; i < 10; i++)
        g_main_context_iteration(NULL, FALSE);
    cl_casedb_close(db);
}

/* The reviewer's name is asked at the first sign-off (not the OS login), kept in the
 * reviewer-name setting, recorded with the accepted version and the later edits, and not asked
 * again. */
static void test_reviewer_name(void)
{
    g_autofree char *db_path = g_build_filename(tmpdir, "reviewer.db", NULL);
    g_autoptr(GError) error = NULL;
    ClCaseDb *db = cl_casedb_open(db_path, CL_CASEDB_OPEN_DEFAULT, &error);
    g_assert_no_error(error);
    gint64 first = scene_case(db, "First", "reviewer-a");
    gint64 second = scene_case(db, "Second", "reviewer-b");
    g_autoptr(GSettings) settings = g_settings_new("io.changelens.ChangeLens");
    g_settings_reset(settings, "reviewer-name");
    ClWindow *win = cl_window_new(NULL);
    gtk_window_present(GTK_WINDOW(win));
    cl_window_set_case_db(win, db);
    cl_window_open_case(win, first);
    g_assert_true(wait_for(case_shown, win));
    set_description_text(win, "A red square appeared.");
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.accept-description", NULL));
    /* asked: nothing signed yet; Cancel signs nothing */
    answer_dialog(win, "cancel");
    g_autoptr(ClCase) c = cl_casedb_get_case(db, first, CL_CASE_GET_DEFAULT, &error);
    g_assert_null(cl_case_current_description(c));
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.accept-description", NULL));
    AdwMessageDialog *d = find_dialog(win);
    g_assert_nonnull(d);
    GtkWidget *entry = adw_message_dialog_get_extra_child(d);
    g_assert_true(GTK_IS_EDITABLE(entry));
    /* no name, no sign-off */
    gtk_editable_set_text(GTK_EDITABLE(entry), "  ");
    g_assert_false(adw_message_dialog_get_response_enabled(d, "sign"));
    gtk_editable_set_text(GTK_EDITABLE(entry), " Dr. Ada Quill ");
    g_assert_true(adw_message_dialog_get_response_enabled(d, "sign"));
    answer_dialog(win, "sign");
    g_autofree char *kept = g_settings_get_string(settings, "reviewer-name");
    g_assert_cmpstr(kept, ==, "Dr. Ada Quill");
    g_clear_pointer(&c, cl_case_free);
    c = cl_casedb_get_case(db, first, CL_CASE_GET_DEFAULT, &error);
    const ClCaseDescVersion *v = cl_case_current_description(c);
    g_assert_cmpint(v->status, ==, CL_DESC_ACCEPTED);
    g_assert_cmpstr(v->author, ==, "Dr. Ada Quill");
    g_assert_cmpstr(v->author, !=, g_get_user_name());
    /* the edit saved before it was accepted is hers too */
    const ClCaseDescVersion *edit = g_ptr_array_index(c->descriptions, 0);
    g_assert_cmpstr(edit->text, ==, "A red square appeared.");

    /* the next sign-off asks nothing */
    cl_window_open_case(win, second);
    g_assert_true(wait_for(case_shown, win));
    set_description_text(win, "Nothing changed.");
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.reject-description", NULL));
    g_assert_null(find_dialog(win));
    g_clear_pointer(&c, cl_case_free);
    c = cl_casedb_get_case(db, second, CL_CASE_GET_DEFAULT, &error);
    v = cl_case_current_description(c);
    g_assert_cmpint(v->status, ==, CL_DESC_REJECTED);
    g_assert_cmpstr(v->author, ==, "Dr. Ada Quill");
    for (guint i = 0; i < c->descriptions->len; i++)
        g_assert_cmpstr(((ClCaseDescVersion *)c->descriptions->pdata[i])->author, ==,
                        "Dr. Ada Quill");
    g_settings_reset(settings, "reviewer-name");
    gtk_window_destroy(GTK_WINDOW(win));
    for (int i = 0; i < 10; i++)
        g_main_context_iteration(NULL, FALSE);
    cl_casedb_close(db);
}

static gboolean views_idle(gpointer data)
{
    ClWindow *win = data;
    return !cl_image_view_get_loading(cl_window_get_view(win, 0)) &&
           !cl_image_view_get_loading(cl_window_get_view(win, 1)) && case_shown(win);
}

/* A case's window/level and alignment are as the reviewer left them when it is opened again
 * (another case in between starts from its own defaults). */
static void test_case_view_kept(void)
{
    g_autofree char *db_path = g_build_filename(tmpdir, "caseview.db", NULL);
    g_autoptr(GError) error = NULL;
    ClCaseDb *db = cl_casedb_open(db_path, CL_CASEDB_OPEN_DEFAULT, &error);
    g_assert_no_error(error);
    gint64 first = shifted_case(db, "Shifted", "caseview-a", 6);
    gint64 second = scene_case(db, "Other", "caseview-b");
    ClWindow *win = cl_window_new(NULL);
    gtk_window_set_default_size(GTK_WINDOW(win), 1000, 700);
    gtk_window_present(GTK_WINDOW(win));
    cl_window_set_case_db(win, db);
    cl_window_open_case(win, first);
    g_assert_true(wait_for(views_idle, win));
    ClImageView *a = cl_window_get_view(win, 0), *b = cl_window_get_view(win, 1);
    ClDisplaySettings defaults, s;
    g_assert_true(cl_image_view_get_display(a, &defaults));
    g_assert_cmpint(defaults.mode, !=, CL_DISPLAY_WINDOW);

    /* a window/level dragged on the earlier image (the later one follows), then Align */
    s = defaults;
    s.mode = CL_DISPLAY_WINDOW;
    s.center = 100;
    s.width = 60;
    cl_image_view_set_display(a, &s);
    g_signal_emit_by_name(a, "display-changed");
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.align", NULL));
    g_assert_true(wait_for(views_idle, win));
    g_assert_true(cl_window_get_aligned(win));
    double m[6];
    g_assert_true(cl_image_view_get_alignment(b, m));
    g_assert_cmpfloat(fabs(m[0] - 6), <, 0.5);

    /* the other case: its own defaults, nothing aligned */
    cl_window_open_case(win, second);
    g_assert_true(wait_for(views_idle, win));
    ClDisplaySettings got;
    g_assert_true(cl_image_view_get_display(a, &got));
    g_assert_cmpint(got.mode, ==, defaults.mode);
    g_assert_false(cl_window_get_aligned(win));
    g_assert_false(cl_image_view_get_alignment(b, m));

    /* back: the window/level and the alignment as they were left */
    cl_window_open_case(win, first);
    g_assert_true(wait_for(views_idle, win));
    for (guint i = 0; i < 2; i++) {
        g_assert_true(cl_image_view_get_display(cl_window_get_view(win, i), &got));
        g_assert_cmpint(got.mode, ==, CL_DISPLAY_WINDOW);
        g_assert_cmpfloat(got.center, ==, 100);
        g_assert_cmpfloat(got.width, ==, 60);
    }
    g_assert_true(cl_window_get_aligned(win));
    double back[6];
    g_assert_true(cl_image_view_get_alignment(b, back));
    for (int k = 0; k < 6; k++)
        g_assert_cmpfloat(back[k], ==, m[k]);
    /* turning Align off shows the images as they are */
    cl_window_set_aligned(win, FALSE);
    g_assert_false(cl_image_view_get_alignment(b, back));
    gtk_window_destroy(GTK_WINDOW(win));
    for (int i = 0; i < 10; i++)
        g_main_context_iteration(NULL, FALSE);
    cl_casedb_close(db);
}

/* ---- From PACS… ---- */

static GtkWidget *named(GtkWidget *root, const char *name)
{
    if (g_strcmp0(gtk_widget_get_name(root), name) == 0)
        return root;
    for (GtkWidget *c = gtk_widget_get_first_child(root); c; c = gtk_widget_get_next_sibling(c)) {
        GtkWidget *w = named(c, name);
        if (w)
            return w;
    }
    return NULL;
}

static GtkWidget *pacs_window(void)
{
    GListModel *tops = gtk_window_get_toplevels();
    for (guint i = 0; i < g_list_model_get_n_items(tops); i++) {
        g_autoptr(GtkWidget) w = g_list_model_get_item(tops, i);
        if (g_strcmp0(gtk_widget_get_name(w), "pacs-dialog") == 0 && gtk_widget_get_visible(w))
            return w;
    }
    return NULL;
}

static gboolean no_pacs_window(gpointer data)
{
    return pacs_window() == NULL;
}

static guint n_rows(GtkWidget *list)
{
    guint n = 0;
    for (GtkWidget *c = gtk_widget_get_first_child(list); c; c = gtk_widget_get_next_sibling(c))
        n++;
    return n;
}

typedef struct {
    GtkWidget *dialog;
    guint rows;
} PacsWait;

/* the dialog is idle again (its Find button sensitive), with this many studies listed */
static gboolean pacs_found(gpointer data)
{
    PacsWait *w = data;
    return gtk_widget_get_sensitive(named(w->dialog, "pacs-find")) &&
           n_rows(named(w->dialog, "pacs-results")) == w->rows;
}

static void set_field(GtkWidget *dialog, const char *name, const char *text)
{
    GtkWidget *w = named(dialog, name);
    g_assert_nonnull(w);
    gtk_editable_set_text(GTK_EDITABLE(w), text);
}

static void test_from_pacs(void)
{
    g_autofree char *dir = g_build_filename(tmpdir, "pacs", NULL);
    g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
    ClFixtureOrthanc orthanc;
    g_autofree char *why = NULL;
    if (!cl_fixture_orthanc_start(dir, &orthanc, &why)) {
        g_test_skip(why);
        return;
    }
    /* a patient's prior and current study, in the PACS */
    g_autofree char *synth = g_build_filename(dir, "synth", NULL);
    const char *make[] = { "synth",  "--task", "radiograph", "--n", "1",
                           "--seed", "21",     "--out",      synth, NULL };
    g_assert_cmpint(cl_fixture_run_cli(make, NULL), ==, 0);
    g_autofree char *f1 = g_build_filename(synth, "images", "000001-1.dcm", NULL);
    g_autofree char *f2 = g_build_filename(synth, "images", "000001-2.dcm", NULL);
    g_autofree char *port = g_strdup_printf("%d", orthanc.dicom_port);
    const char *store[] = { "pacs",  "store",  "--host", "127.0.0.1", "--port", port,
                            "--aec", "CLTEST", f1,       f2,          NULL };
    g_assert_cmpint(cl_fixture_run_cli(store, NULL), ==, 0);
    g_autoptr(GError) error = NULL;
    g_autoptr(ClImage) current = cl_image_load(f2, NULL, &error);
    g_assert_no_error(error);
    g_autoptr(ClImage) prior = cl_image_load(f1, NULL, &error);
    g_assert_no_error(error);

    g_autofree char *db_path = g_build_filename(tmpdir, "from-pacs.db", NULL);
    ClCaseDb *db = cl_casedb_open(db_path, CL_CASEDB_OPEN_DEFAULT, &error);
    g_assert_no_error(error);
    ClWindow *win = cl_window_new(NULL);
    gtk_window_set_default_size(GTK_WINDOW(win), 1000, 700);
    gtk_window_present(GTK_WINDOW(win));
    cl_window_set_case_db(win, db);
    for (int i = 0; i < 10; i++)
        g_main_context_iteration(NULL, FALSE);

    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.from-pacs", NULL));
    GtkWidget *dialog = pacs_window();
    g_assert_nonnull(dialog);
    /* nothing asked yet: the reason, not a query */
    set_field(dialog, "pacs-host", "127.0.0.1");
    set_field(dialog, "pacs-port", "0");
    set_field(dialog, "pacs-aec", "CLTEST");
    set_field(dialog, "pacs-patient", current->patient_id);
    g_signal_emit_by_name(named(dialog, "pacs-find"), "clicked");
    g_assert_nonnull(label_containing(dialog, "The port must be a number from 1 to 65535"));
    /* a port nothing listens on: the error in words, the window still usable */
    g_autofree char *closed = g_strdup_printf("%d", cl_fixture_free_port());
    set_field(dialog, "pacs-port", closed);
    g_signal_emit_by_name(named(dialog, "pacs-find"), "clicked");
    PacsWait none = { dialog, 0 };
    g_assert_true(wait_for(pacs_found, &none));
    g_assert_nonnull(label_containing(dialog, "connection refused"));
    /* the PACS: the two studies, oldest first, both checked */
    set_field(dialog, "pacs-port", port);
    g_signal_emit_by_name(named(dialog, "pacs-find"), "clicked");
    PacsWait two = { dialog, 2 };
    g_assert_true(wait_for(pacs_found, &two));
    g_assert_nonnull(label_containing(dialog, "2 studies found"));
    save_widget_screenshot(dialog, "from-pacs");
    g_signal_emit_by_name(named(dialog, "pacs-open"), "clicked");
    g_assert_true(wait_for(no_pacs_window, NULL));
    g_assert_true(wait_for(case_shown, win));
    /* one case of the two studies' images, the prior first, retrieved into the PACS folder */
    g_autoptr(GPtrArray) list = cl_casedb_list(db, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(list->len, ==, 1);
    const ClCaseSummary *made = list->pdata[0];
    g_assert_cmpuint(made->n_images, ==, 2);
    g_autoptr(ClCase) c = cl_casedb_get_case(db, made->id, CL_CASE_GET_DEFAULT, &error);
    g_autofree char *folder = cl_pacs_dialog_folder();
    const char *uids[2] = { prior->study_uid, current->study_uid };
    for (guint k = 0; k < 2; k++) {
        const char *path = ((ClCaseImage *)c->images->pdata[k])->path;
        g_assert_true(g_str_has_prefix(path, folder));
        g_assert_nonnull(strstr(path, uids[k]));
    }
    /* the connection is remembered; over DICOMweb the same studies are found */
    if (orthanc.dicomweb) {
        g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.from-pacs", NULL));
        dialog = pacs_window();
        g_assert_nonnull(dialog);
        g_assert_cmpstr(gtk_editable_get_text(GTK_EDITABLE(named(dialog, "pacs-host"))), ==,
                        "127.0.0.1");
        adw_combo_row_set_selected(ADW_COMBO_ROW(named(dialog, "pacs-protocol")), 1);
        g_assert_false(gtk_widget_get_visible(named(dialog, "pacs-host")));
        g_autofree char *url = g_strdup_printf("http://127.0.0.1:%d/dicom-web", orthanc.http_port);
        set_field(dialog, "pacs-dicomweb", url);
        set_field(dialog, "pacs-patient", current->patient_id);
        g_signal_emit_by_name(named(dialog, "pacs-find"), "clicked");
        PacsWait web = { dialog, 2 };
        g_assert_true(wait_for(pacs_found, &web));
        g_assert_nonnull(label_containing(dialog, "2 studies found"));
        gtk_window_destroy(GTK_WINDOW(dialog));
    }
    cl_fixture_orthanc_stop(&orthanc);
    gtk_window_destroy(GTK_WINDOW(win));
    for (int i = 0; i < 10; i++)
        g_main_context_iteration(NULL, FALSE);
    cl_casedb_close(db);
}

typedef struct {
    ClWindow *win;
    const char *text;
} TextWait;

static gboolean description_is(gpointer data)
{
    TextWait *w = data;
    g_autofree char *t = cl_window_get_description(w->win);
    return g_strcmp0(t, w->text) == 0;
}

static char *current_text(ClCaseDb *db, gint64 id)
{
    g_autoptr(ClCase) c = cl_casedb_get_case(db, id, CL_CASE_GET_DEFAULT, NULL);
    const ClCaseDescVersion *v = cl_case_current_description(c);
    return g_strdup(v ? v->text : NULL);
}

/* Two reviewers on one shared database (a PostgreSQL server the test starts; two connections to
 * one SQLite file where there is none): what the other writes appears in the window by itself;
 * while this reviewer types, their text is never replaced; saving it over the other's newer
 * version is refused once (theirs shown, the typed text kept), and saving again makes it the
 * next version. */
static void test_other_reviewer(void)
{
    ClFixturePostgres pg;
    g_autofree char *why = NULL;
    gboolean server = cl_fixture_postgres_start(&pg, &why);
    g_autofree char *location = server ? cl_fixture_postgres_new_database(&pg, "shared")
                                       : g_build_filename(tmpdir, "shared.db", NULL);
    if (!server)
        g_test_message("no PostgreSQL server (%s): two connections to one SQLite file", why);
    g_autoptr(GError) error = NULL;
    ClCaseDb *db = cl_casedb_open(location, CL_CASEDB_OPEN_DEFAULT, &error);
    g_assert_no_error(error);
    ClCaseDb *other = cl_casedb_open(location, CL_CASEDB_OPEN_DEFAULT, &error);
    g_assert_no_error(error);
    cl_casedb_set_actor(other, "dr.lindqvist");
    gint64 id = scene_case(db, "Shared chest", "shared-a");
    ClWindow *win = cl_window_new(NULL);
    gtk_window_set_default_size(GTK_WINDOW(win), 1000, 700);
    gtk_window_present(GTK_WINDOW(win));
    cl_window_set_case_db(win, db);
    cl_window_open_case(win, id);
    g_assert_true(wait_for(case_shown, win));

    /* the other reviewer writes: it appears here without anything done */
    gint64 v1 = 0, v2 = 0;
    g_assert_true(cl_casedb_description_edit(other, id, "Written on another workstation.", NULL, 0,
                                             &v1, &error));
    TextWait theirs = { win, "Written on another workstation." };
    g_assert_true(wait_for(description_is, &theirs));

    /* this reviewer types; the other saves again: the typed text stays */
    set_description_text(win, "My own reading of it.");
    g_assert_true(
        cl_casedb_description_edit(other, id, "Second thoughts from afar.", NULL, v1, &v2, &error));
    gint64 until = g_get_monotonic_time() + 5 * G_USEC_PER_SEC; /* past two looks */
    while (g_get_monotonic_time() < until)
        if (!g_main_context_iteration(NULL, FALSE))
            g_usleep(10000);
    g_autofree char *kept = cl_window_get_description(win);
    g_assert_cmpstr(kept, ==, "My own reading of it.");

    /* saving meets their newer version: refused, theirs stays current, the text stays typed */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.save-description", NULL));
    g_autofree char *now = current_text(other, id);
    g_assert_cmpstr(now, ==, "Second thoughts from afar.");
    g_autofree char *still = cl_window_get_description(win);
    g_assert_cmpstr(still, ==, "My own reading of it.");
    g_assert_true(gtk_text_buffer_get_modified(gtk_text_view_get_buffer(find_text_view(win))));
    /* saved again, seeing theirs: the next version */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.save-description", NULL));
    g_autofree char *last = current_text(other, id);
    g_assert_cmpstr(last, ==, "My own reading of it.");
    g_assert_cmpuint(n_versions(other, id), ==, 3);

    gtk_window_destroy(GTK_WINDOW(win));
    for (int i = 0; i < 10; i++)
        g_main_context_iteration(NULL, FALSE);
    cl_casedb_close(other);
    cl_casedb_close(db);
    if (server)
        cl_fixture_postgres_stop(&pg);
}

void test_ui_cases_register(void)
{
    g_test_add_func("/ui/window/cases", test_cases);
    g_test_add_func("/ui/window/filmstrip", test_filmstrip);
    g_test_add_func("/ui/window/case-frames", test_case_frames);
    g_test_add_func("/ui/window/long-history-24", test_long_history_24);
    g_test_add_func("/ui/window/import-pairs", test_import_pairs);
    g_test_add_func("/ui/window/import-two-photos", test_import_two_photos);
    g_test_add_func("/ui/window/review-after-accept", test_review_after_accept);
    g_test_add_func("/ui/window/reviewer-name", test_reviewer_name);
    g_test_add_func("/ui/window/case-view-kept", test_case_view_kept);
    g_test_add_func("/ui/window/from-pacs", test_from_pacs);
    g_test_add_func("/ui/window/other-reviewer", test_other_reviewer);
}
