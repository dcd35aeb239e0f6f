/* test-ui-window.c - ClWindow and ClImageView end to end under a display: generated images load
 * off the main thread, show at the right size and colour, linked views follow each other, newer
 * opens win, multi-frame and DICOM files, large images, the Open dialog, the preferences, the
 * shortcuts window. */
#include "ui-util.h"

#include <cairo.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cl-application.h"
#include "cl-description-panel.h"
#include "cl-preferences.h"
#include "fixtures.h"

/* ---- the viewport model alone ---- */

static void test_viewport_math(void)
{
    g_autoptr(ClViewport) vp = cl_viewport_new();
    g_assert_true(cl_viewport_get_fit(vp));

    cl_viewport_set(vp, 2.0, 100.0, 50.0);
    g_assert_false(cl_viewport_get_fit(vp));
    g_assert_cmpfloat(cl_viewport_get_zoom(vp), ==, 2.0);

    /* Zooming at an anchor keeps its screen offset from the centre: (a - c) * z is unchanged. */
    double ax = 140.0, ay = 30.0;
    double before_x = (ax - cl_viewport_get_center_x(vp)) * cl_viewport_get_zoom(vp);
    double before_y = (ay - cl_viewport_get_center_y(vp)) * cl_viewport_get_zoom(vp);
    cl_viewport_zoom_at(vp, 3.0, ax, ay);
    g_assert_cmpfloat_with_epsilon(cl_viewport_get_zoom(vp), 6.0, 1e-9);
    g_assert_cmpfloat_with_epsilon((ax - cl_viewport_get_center_x(vp)) * 6.0, before_x, 1e-9);
    g_assert_cmpfloat_with_epsilon((ay - cl_viewport_get_center_y(vp)) * 6.0, before_y, 1e-9);

    /* Panning by device pixels moves the centre by pixels / zoom, against the drag. */
    double cx = cl_viewport_get_center_x(vp), cy = cl_viewport_get_center_y(vp);
    cl_viewport_pan_by(vp, 12.0, -6.0);
    g_assert_cmpfloat_with_epsilon(cl_viewport_get_center_x(vp), cx - 2.0, 1e-9);
    g_assert_cmpfloat_with_epsilon(cl_viewport_get_center_y(vp), cy + 1.0, 1e-9);

    /* Zoom is clamped; nonsense is ignored. */
    cl_viewport_set_zoom(vp, 1e9);
    g_assert_cmpfloat(cl_viewport_get_zoom(vp), ==, CL_VIEWPORT_MAX_ZOOM);
    cl_viewport_zoom_at(vp, 0.0, 0.0, 0.0);
    cl_viewport_zoom_at(vp, NAN, 0.0, 0.0);
    g_assert_cmpfloat(cl_viewport_get_zoom(vp), ==, CL_VIEWPORT_MAX_ZOOM);

    /* Fit: the whole content in view, centred. */
    cl_viewport_set_content_size(vp, 400, 100);
    cl_viewport_fit_to(vp, 200.0, 200.0);
    g_assert_true(cl_viewport_get_fit(vp));
    g_assert_cmpfloat_with_epsilon(cl_viewport_get_zoom(vp), 0.5, 1e-9);
    g_assert_cmpfloat(cl_viewport_get_center_x(vp), ==, 200.0);
    g_assert_cmpfloat(cl_viewport_get_center_y(vp), ==, 50.0);
}

/* Templates in the GResource parse (the help overlay is otherwise only loaded by the app). */
static void test_resources(void)
{
    g_autoptr(GtkBuilder) builder = gtk_builder_new();
    g_autoptr(GError) error = NULL;
    gtk_builder_add_from_resource(builder, "/io/changelens/ChangeLens/gtk/help-overlay.ui", &error);
    g_assert_no_error(error);
    g_assert_true(GTK_IS_SHORTCUTS_WINDOW(gtk_builder_get_object(builder, "help_overlay")));
    gtk_window_destroy(GTK_WINDOW(gtk_builder_get_object(builder, "help_overlay")));
    g_assert_true(g_resources_get_info("/io/changelens/ChangeLens/style.css",
                                       G_RESOURCE_LOOKUP_FLAGS_NONE, NULL, NULL, NULL));
}

/* Whether the shortcuts window lists accel (a token of some entry's accelerator, compared as
 * parsed keys) or an entry of action. */
static gboolean overlay_lists(GtkBuilder *builder, const char *accel, const char *action)
{
    guint key, want_key;
    GdkModifierType mods, want_mods;
    g_assert_true(gtk_accelerator_parse(accel, &want_key, &want_mods));
    g_autoptr(GSList) objects = gtk_builder_get_objects(builder);
    for (GSList *l = objects; l; l = l->next) {
        if (!GTK_IS_SHORTCUTS_SHORTCUT(l->data))
            continue;
        g_autofree char *accelerator = NULL, *action_name = NULL;
        g_object_get(l->data, "accelerator", &accelerator, "action-name", &action_name, NULL);
        if (action && g_strcmp0(action_name, action) == 0)
            return TRUE;
        g_auto(GStrv) tokens = g_strsplit(accelerator ? accelerator : "", " ", -1);
        for (guint i = 0; tokens[i]; i++)
            if (*tokens[i] && gtk_accelerator_parse(tokens[i], &key, &mods) && key == want_key &&
                mods == want_mods)
                return TRUE;
    }
    return FALSE;
}

static gboolean overlay_has_title(GtkBuilder *builder, const char *title, const char *subtitle)
{
    g_autoptr(GSList) objects = gtk_builder_get_objects(builder);
    for (GSList *l = objects; l; l = l->next) {
        if (!GTK_IS_SHORTCUTS_SHORTCUT(l->data))
            continue;
        g_autofree char *t = NULL, *st = NULL;
        g_object_get(l->data, "title", &t, "subtitle", &st, NULL);
        if (g_strcmp0(t, title) == 0 && st && strstr(st, subtitle))
            return TRUE;
    }
    return FALSE;
}

/* The shortcuts window lists every application shortcut, the window's Alt+arrows and the
 * pointer's right-drag (window/level) and Shift+drag (ignore region). */
static void test_shortcuts_window(void)
{
    g_autoptr(GtkBuilder) builder = gtk_builder_new();
    g_autoptr(GError) error = NULL;
    gtk_builder_add_from_resource(builder, "/io/changelens/ChangeLens/gtk/help-overlay.ui", &error);
    g_assert_no_error(error);
    guint n;
    const ClShortcut *shortcuts = cl_application_get_shortcuts(&n);
    g_assert_cmpuint(n, >, 10);
    for (guint i = 0; i < n; i++) {
        if (!overlay_lists(builder, shortcuts[i].accels[0], shortcuts[i].action))
            g_error("the shortcuts window misses %s (%s)", shortcuts[i].accels[0],
                    shortcuts[i].action);
    }
    g_assert_true(overlay_lists(builder, "<Control>e", NULL));
    g_assert_true(overlay_lists(builder, "<Control>comma", NULL));
    g_assert_true(overlay_lists(builder, "c", NULL)); /* cine */
    g_assert_true(overlay_lists(builder, "i", NULL)); /* corner overlays */
    g_assert_true(overlay_lists(builder, "n", NULL)); /* a note */
    g_assert_true(overlay_lists(builder, "k", NULL)); /* a key image */
    const char *nudges[] = { "<Alt>Left", "<Alt>Right", "<Alt>Up", "<Alt>Down" };
    for (guint i = 0; i < G_N_ELEMENTS(nudges); i++)
        g_assert_true(overlay_lists(builder, nudges[i], NULL));
    g_assert_true(overlay_has_title(builder, "Window/level", "right button"));
    g_assert_true(overlay_has_title(builder, "Draw an ignore region", "Shift+drag"));
    g_assert_true(overlay_has_title(builder, "Measure a distance", "Ctrl+drag"));
    g_assert_true(overlay_has_title(builder, "Measure a region", "Ctrl+Shift+drag"));
    gtk_window_destroy(GTK_WINDOW(gtk_builder_get_object(builder, "help_overlay")));
}

/* ---- the window ---- */

static void test_load_two(void)
{
    const char *paths[] = { path_a, path_b };
    ClWindow *win = new_window_with(paths, 2);
    ClImageView *a = cl_window_get_view(win, 0), *b = cl_window_get_view(win, 1);
    assert_shows(a, "a.png", 0, 64, 48);
    assert_shows(b, "b.png", 0, 80, 60);

    /* 8-bit RGB goes through the display transform unchanged (full range). */
    g_assert_cmphex(texture_pixel(a, 0, 0), ==, 0xff0000ff);
    g_assert_cmphex(texture_pixel(a, 20, 15), ==, 0xffffffff);
    g_assert_cmphex(texture_pixel(b, 0, 0), ==, 0x0000ffff);

    /* Both views fitted on one shared viewport: the larger image fills its pane. */
    ClViewport *vp = cl_image_view_get_viewport(a);
    g_assert_true(vp == cl_image_view_get_viewport(b));
    g_assert_true(cl_viewport_get_fit(vp));
    g_assert_cmpfloat_with_epsilon(cl_viewport_get_center_x(vp), 40.0, 1e-9);
    g_assert_cmpfloat_with_epsilon(cl_viewport_get_center_y(vp), 30.0, 1e-9);
    gtk_window_destroy(GTK_WINDOW(win));
}

/* Measuring on a view: a distance and a rectangle's values, checked against the pixels of a.png
 * (64 × 48, red, a white square at [16, 32) × [12, 24)); a new image clears it. */
static void test_measure(void)
{
    const char *paths[] = { path_a, path_b };
    ClWindow *win = new_window_with(paths, 2);
    ClImageView *a = cl_window_get_view(win, 0);
    assert_shows(a, "a.png", 0, 64, 48);
    g_assert_null(cl_image_view_get_measurement(a));
    /* an 8-bit photograph shown as it is has no window to tell in its corner */
    g_autofree char *no_window = cl_image_view_get_overlay_text(a, CL_VIEW_BOTTOM_LEFT);
    g_assert_cmpstr(no_window, ==, "");
    cl_image_view_measure(a, CL_VIEW_MEASURE_LENGTH, 10, 10, 13, 14);
    g_assert_cmpstr(cl_image_view_get_measurement(a), ==, "5.00 px"); /* a PNG has no spacing */
    /* inside the square: white, (255 + 255 + 255) / 3 */
    cl_image_view_measure(a, CL_VIEW_MEASURE_REGION, 16, 12, 32, 24);
    g_assert_cmpstr(cl_image_view_get_measurement(a), ==, "mean 255, SD 0.000 over 192 px");
    /* half red (255 + 0 + 0) / 3 = 85, half white: mean 170, SD 85 */
    cl_image_view_measure(a, CL_VIEW_MEASURE_REGION, 32, 24, 0, 12);
    g_assert_cmpstr(cl_image_view_get_measurement(a), ==, "mean 170, SD 85.0 over 384 px");
    wait_for_paint(GTK_WIDGET(a));
    save_screenshot(win, "measure");
    cl_image_view_measure(a, CL_VIEW_MEASURE_REGION, 100, 100, 120, 120);
    g_assert_cmpstr(cl_image_view_get_measurement(a), ==, "no pixels");
    cl_image_view_clear_measurement(a);
    g_assert_null(cl_image_view_get_measurement(a));
    cl_image_view_measure(a, CL_VIEW_MEASURE_LENGTH, 0, 0, 64, 0);
    cl_image_view_set_image(a, cl_image_view_get_document(cl_window_get_view(win, 1)), 0);
    g_assert_null(cl_image_view_get_measurement(a));
    gtk_window_destroy(GTK_WINDOW(win));
}

/* Corner overlays on a DICOM: patient, study, the window in numbers (following a new window),
 * frame and zoom; hidden and shown again by win.overlays. */
static void test_overlays(void)
{
    g_autoptr(GPtrArray) fixtures = g_ptr_array_new_with_free_func((GDestroyNotify)cl_fixture_free);
    g_autofree char *dir = g_build_filename(tmpdir, "overlay-fixtures", NULL);
    g_assert_cmpint(g_mkdir_with_parents(dir, 0700), ==, 0);
    g_autoptr(GError) error = NULL;
    if (!cl_fixtures_dicom(dir, fixtures, &error)) {
        g_test_skip("no DICOM fixtures in this build");
        return;
    }
    const ClFixture *f = cl_fixture_find(fixtures, "dicom-mono2-u16-le.dcm");
    g_assert_nonnull(f);
    const char *paths[] = { f->path, f->path };
    ClWindow *win = new_window_with(paths, 2);
    ClImageView *v = cl_window_get_view(win, 0);
    g_autofree char *name = g_path_get_basename(f->path);
    assert_shows(v, name, 0, (int)f->width, (int)f->height);
    g_assert_true(cl_image_view_get_overlays(v)); /* on by default */
    g_autofree char *tl = cl_image_view_get_overlay_text(v, CL_VIEW_TOP_LEFT);
    g_autofree char *tr = cl_image_view_get_overlay_text(v, CL_VIEW_TOP_RIGHT);
    g_autofree char *bl = cl_image_view_get_overlay_text(v, CL_VIEW_BOTTOM_LEFT);
    g_autofree char *br = cl_image_view_get_overlay_text(v, CL_VIEW_BOTTOM_RIGHT);
    g_assert_cmpstr(tl, ==, "M\xc3\xbcller J\xc3\xbcrgen\nID CL-0001");
    g_assert_true(g_str_has_prefix(tr, "2024-01-31 09:00\n"));
    g_assert_cmpstr(bl, ==, "W 65536 L 32768"); /* the file's first window */
    g_assert_true(g_str_has_suffix(br, "%"));
    /* a window set on the view: its numbers */
    ClDisplaySettings s;
    g_assert_true(cl_image_view_get_display(v, &s));
    s.mode = CL_DISPLAY_WINDOW, s.center = 1200, s.width = 800;
    cl_image_view_set_display(v, &s);
    g_autofree char *bl2 = cl_image_view_get_overlay_text(v, CL_VIEW_BOTTOM_LEFT);
    g_assert_cmpstr(bl2, ==, "W 800 L 1200");
    /* numbers typed: a preset "window:CENTRE:WIDTH" for both images, nonsense refused … */
    g_assert_true(
        gtk_widget_activate_action(GTK_WIDGET(win), "win.display-preset", "s", "window:40:400"));
    for (int i = 0; i < 2; i++) {
        g_autofree char *t =
            cl_image_view_get_overlay_text(cl_window_get_view(win, i), CL_VIEW_BOTTOM_LEFT);
        g_assert_cmpstr(t, ==, "W 400 L 40");
    }
    g_assert_true(
        gtk_widget_activate_action(GTK_WIDGET(win), "win.display-preset", "s", "window:4x:0"));
    g_autofree char *kept = cl_image_view_get_overlay_text(v, CL_VIEW_BOTTOM_LEFT);
    g_assert_cmpstr(kept, ==, "W 400 L 40");
    /* … and the Custom Window dialog, which starts from what is shown */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.custom-window", NULL));
    AdwMessageDialog *d = find_dialog(win);
    g_assert_nonnull(d);
    GtkSpinButton *centre = g_object_get_data(G_OBJECT(d), "centre");
    GtkSpinButton *width = g_object_get_data(G_OBJECT(d), "width");
    g_assert_cmpfloat(gtk_spin_button_get_value(centre), ==, 40);
    g_assert_cmpfloat(gtk_spin_button_get_value(width), ==, 400);
    gtk_spin_button_set_value(centre, 1200);
    gtk_spin_button_set_value(width, 800);
    answer_dialog(win, "apply");
    g_autofree char *typed = cl_image_view_get_overlay_text(v, CL_VIEW_BOTTOM_LEFT);
    g_assert_cmpstr(typed, ==, "W 800 L 1200");
    wait_for_paint(GTK_WIDGET(v));
    save_screenshot(win, "overlays");
    /* the i key's action hides them on both views, and shows them again */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.overlays", NULL));
    g_assert_false(cl_image_view_get_overlays(v));
    g_assert_false(cl_image_view_get_overlays(cl_window_get_view(win, 1)));
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.overlays", NULL));
    g_assert_true(cl_image_view_get_overlays(v));
    gtk_window_destroy(GTK_WINDOW(win));
}

static void assert_same_view(ClViewport *x, ClViewport *y)
{
    g_assert_cmpfloat_with_epsilon(cl_viewport_get_zoom(x), cl_viewport_get_zoom(y), 1e-12);
    g_assert_cmpfloat_with_epsilon(cl_viewport_get_center_x(x), cl_viewport_get_center_x(y), 1e-9);
    g_assert_cmpfloat_with_epsilon(cl_viewport_get_center_y(x), cl_viewport_get_center_y(y), 1e-9);
}

typedef struct {
    double zoom, cx, cy;
} State;

static State state_of(ClImageView *view)
{
    ClViewport *vp = cl_image_view_get_viewport(view);
    return (State){ cl_viewport_get_zoom(vp), cl_viewport_get_center_x(vp),
                    cl_viewport_get_center_y(vp) };
}

static void test_link_views(void)
{
    const char *paths[] = { path_a, path_b };
    ClWindow *win = new_window_with(paths, 2);
    ClImageView *a = cl_window_get_view(win, 0), *b = cl_window_get_view(win, 1);
    g_assert_true(cl_window_get_link_views(win));
    GtkWidget *toggle = find_actionable(GTK_WIDGET(win), "win.link-views");
    g_assert_true(GTK_IS_TOGGLE_BUTTON(toggle));
    g_assert_true(gtk_toggle_button_get_active(GTK_TOGGLE_BUTTON(toggle)));

    /* Linked: zoom at the pointer and drag in the left view; the right one follows. */
    State b0 = state_of(b);
    cl_image_view_zoom_at(a, 2.5, 30.0, 20.0);
    cl_image_view_pan_by(a, 15.0, -7.0);
    State b1 = state_of(b);
    g_assert_cmpfloat_with_epsilon(b1.zoom, b0.zoom * 2.5, 1e-9);
    g_assert_true(b1.cx != b0.cx && b1.cy != b0.cy);
    assert_same_view(cl_image_view_get_viewport(a), cl_image_view_get_viewport(b));

    /* The same the other way round, and through the window's zoom actions. */
    cl_image_view_zoom_at(b, 0.5, 10.0, 10.0);
    assert_same_view(cl_image_view_get_viewport(a), cl_image_view_get_viewport(b));
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.zoom-100", NULL));
    g_assert_cmpfloat(state_of(a).zoom, ==, 1.0);
    g_assert_cmpfloat(state_of(b).zoom, ==, 1.0);

    /* Unlink through the action (as the L key and the header toggle do): views stay where they
     * were, then move independently. */
    State a_before = state_of(a);
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.link-views", NULL));
    g_assert_false(cl_window_get_link_views(win));
    g_assert_false(gtk_toggle_button_get_active(GTK_TOGGLE_BUTTON(toggle)));
    g_autoptr(GSettings) settings = g_settings_new("io.changelens.ChangeLens");
    g_assert_false(g_settings_get_boolean(settings, "link-views")); /* remembered */
    g_assert_true(cl_image_view_get_viewport(a) != cl_image_view_get_viewport(b));
    assert_same_view(cl_image_view_get_viewport(a), cl_image_view_get_viewport(b));
    g_assert_cmpfloat(state_of(a).zoom, ==, a_before.zoom);

    State b2 = state_of(b);
    cl_image_view_zoom_at(a, 4.0, 50.0, 40.0);
    cl_image_view_pan_by(a, -20.0, 9.0);
    State a3 = state_of(a), b3 = state_of(b);
    g_assert_cmpfloat_with_epsilon(a3.zoom, b2.zoom * 4.0, 1e-9);
    g_assert_cmpfloat(b3.zoom, ==, b2.zoom);
    g_assert_cmpfloat(b3.cx, ==, b2.cx);
    g_assert_cmpfloat(b3.cy, ==, b2.cy);
    cl_image_view_pan_by(b, 5.0, 5.0);
    g_assert_cmpfloat(state_of(a).cx, ==, a3.cx);

    /* Zoom actions act on each view when unlinked. */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.zoom-in", NULL));
    g_assert_cmpfloat_with_epsilon(state_of(a).zoom, a3.zoom * G_SQRT2, 1e-9);
    g_assert_cmpfloat_with_epsilon(state_of(b).zoom, b3.zoom * G_SQRT2, 1e-9);

    /* Relinking adopts the left view's position. */
    State a4 = state_of(a);
    cl_window_set_link_views(win, TRUE);
    assert_same_view(cl_image_view_get_viewport(a), cl_image_view_get_viewport(b));
    g_assert_cmpfloat(state_of(b).zoom, ==, a4.zoom);
    g_assert_cmpfloat(state_of(b).cx, ==, a4.cx);

    /* Fit brings both back to the whole picture. */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.zoom-fit", NULL));
    g_assert_true(cl_viewport_get_fit(cl_image_view_get_viewport(a)));
    g_assert_cmpfloat_with_epsilon(state_of(b).cx, 40.0, 1e-9);

    /* Drawing zoomed far in (nearest-neighbour detail crops) and far out must work. */
    cl_image_view_zoom_at(a, 40.0, 20.0, 20.0);
    gtk_widget_queue_draw(GTK_WIDGET(a));
    for (int i = 0; i < 20; i++)
        g_main_context_iteration(NULL, FALSE);
    cl_viewport_set_zoom(cl_image_view_get_viewport(a), CL_VIEWPORT_MIN_ZOOM);
    for (int i = 0; i < 20; i++)
        g_main_context_iteration(NULL, FALSE);
    gtk_window_destroy(GTK_WINDOW(win));
}

static void record_document(ClImageView *view, GParamSpec *pspec, GString *log)
{
    ClDocument *doc = cl_image_view_get_document(view);
    g_string_append_printf(log, "%s;", doc ? cl_document_get_name(doc) : "-");
}

static void test_newer_open_wins(void)
{
    ClWindow *win = cl_window_new(NULL);
    gtk_window_present(GTK_WINDOW(win));
    g_autoptr(GString) shown = g_string_new(NULL);
    g_signal_connect(cl_window_get_view(win, 0), "notify::document", G_CALLBACK(record_document),
                     shown);
    const char *first[] = { path_a, path_b };
    const char *second[] = { path_b, path_a };
    open_paths(win, first, 2);
    open_paths(win, second, 2); /* cancels the first before its result can arrive */
    g_assert_true(wait_for(window_idle, win));
    /* The first result was dropped, not shown and then replaced. */
    g_assert_cmpstr(shown->str, ==, "b.png;");
    assert_shows(cl_window_get_view(win, 0), "b.png", 0, 80, 60);
    assert_shows(cl_window_get_view(win, 1), "a.png", 0, 64, 48);
    g_signal_handlers_disconnect_by_data(cl_window_get_view(win, 0), shown);
    gtk_window_destroy(GTK_WINDOW(win));
}

static void test_failed_open_keeps_images(void)
{
    const char *paths[] = { path_a, path_b };
    ClWindow *win = new_window_with(paths, 2);
    g_autofree char *missing = g_build_filename(tmpdir, "missing.png", NULL);
    g_autofree char *not_image = g_build_filename(tmpdir, "notes.txt", NULL);
    g_assert_true(g_file_set_contents(not_image, "not an image\n", -1, NULL));
    const char *bad[] = { missing, not_image };
    open_paths(win, bad, 2);
    g_assert_true(wait_for(window_idle, win));
    assert_shows(cl_window_get_view(win, 0), "a.png", 0, 64, 48);
    assert_shows(cl_window_get_view(win, 1), "b.png", 0, 80, 60);

    /* One good file among bad ones is shown on its own. */
    const char *mixed[] = { missing, path_b };
    open_paths(win, mixed, 2);
    g_assert_true(wait_for(window_idle, win));
    assert_shows(cl_window_get_view(win, 0), "b.png", 0, 80, 60);
    g_assert_null(cl_image_view_get_texture(cl_window_get_view(win, 1)));
    g_assert_null(cl_image_view_get_document(cl_window_get_view(win, 1)));
    gtk_window_destroy(GTK_WINDOW(win));
}

/* Three files that do not open, each for its own reason: one toast names them all, its Details
 * list each one's reason; what was shown stays. */
static void test_bad_files_one_toast(void)
{
    const char *paths[] = { path_a, path_b };
    ClWindow *win = new_window_with(paths, 2);
    g_autofree char *missing = g_build_filename(tmpdir, "gone.png", NULL);
    g_autofree char *text = g_build_filename(tmpdir, "readme.txt", NULL);
    g_autofree char *cut = g_build_filename(tmpdir, "cut.png", NULL);
    g_assert_true(g_file_set_contents(text, "not an image\n", -1, NULL));
    /* a PNG cut after its first 40 bytes */
    g_assert_true(write_png(cut, 64, 48, 0, 1, 0));
    g_autofree char *bytes = NULL;
    gsize len;
    g_assert_true(g_file_get_contents(cut, &bytes, &len, NULL));
    g_assert_true(g_file_set_contents(cut, bytes, MIN(len, 40), NULL));
    guint before = cl_window_get_n_toasts(win);
    const char *bad[] = { missing, text, cut };
    open_paths(win, bad, 3);
    g_assert_true(wait_for(window_idle, win));
    g_assert_cmpuint(cl_window_get_n_toasts(win), ==, before + 1);
    const char *toast = cl_window_get_last_toast(win);
    g_test_message("toast: %s", toast);
    g_assert_nonnull(strstr(toast, "3 files"));
    g_assert_nonnull(strstr(toast, "gone.png"));
    g_assert_nonnull(strstr(toast, "readme.txt"));
    g_assert_nonnull(strstr(toast, "cut.png"));
    /* the Details: a line per file, each with its own reason */
    const char *details = cl_window_get_load_errors(win);
    g_assert_nonnull(details);
    g_test_message("details:\n%s", details);
    g_auto(GStrv) lines = g_strsplit(details, "\n", -1);
    g_assert_cmpuint(g_strv_length(lines), ==, 3);
    const char *names[] = { "gone.png", "readme.txt", "cut.png" };
    for (guint i = 0; i < 3; i++) {
        g_assert_nonnull(strstr(lines[i], names[i]));
        /* a reason after the name */
        const char *reason = strstr(lines[i], ": ");
        g_assert_nonnull(reason);
        g_assert_cmpuint(strlen(reason), >, 4);
    }
    g_assert_nonnull(strstr(lines[0], "No such file"));
    g_assert_nonnull(strstr(lines[1], "not an image"));
    g_assert_nonnull(strstr(lines[2], "truncated"));
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.show-load-errors", NULL));
    AdwMessageDialog *d = find_dialog(win);
    g_assert_nonnull(d);
    g_assert_cmpstr(adw_message_dialog_get_body(d), ==, details);
    answer_dialog(win, "close");
    assert_shows(cl_window_get_view(win, 0), "a.png", 0, 64, 48);
    assert_shows(cl_window_get_view(win, 1), "b.png", 0, 80, 60);

    /* one bad file: one toast with its reason, as before */
    const char *one[] = { missing };
    open_paths(win, one, 1);
    g_assert_true(wait_for(window_idle, win));
    g_assert_cmpuint(cl_window_get_n_toasts(win), ==, before + 2);
    g_assert_true(g_str_has_prefix(cl_window_get_last_toast(win), "Could not open “gone.png”: "));
    g_assert_null(cl_window_get_load_errors(win));
    gtk_window_destroy(GTK_WINDOW(win));
}

/* A lone multi-frame file shows its first two frames side by side. */
static void test_multi_frame(void)
{
    g_autoptr(GPtrArray) fixtures = g_ptr_array_new_with_free_func((GDestroyNotify)cl_fixture_free);
    g_autofree char *dir = g_build_filename(tmpdir, "fixtures", NULL);
    g_assert_cmpint(g_mkdir_with_parents(dir, 0700), ==, 0);
    cl_fixtures_dicom(dir, fixtures, NULL);
    cl_fixtures_tiff(dir, fixtures, NULL);
    const ClFixture *multi = NULL;
    for (guint i = 0; i < fixtures->len && !multi; i++) {
        const ClFixture *f = fixtures->pdata[i];
        if (f->frames >= 2 && !f->must_fail) {
            g_autoptr(ClImage) img = cl_image_load(f->path, NULL, NULL);
            if (img)
                multi = f;
        }
    }
    if (!multi) {
        g_test_skip("no multi-frame fixture loads in this build (DICOM and TIFF loaders missing)");
        return;
    }
    g_test_message("multi-frame fixture: %s", multi->what);
    ClWindow *win = new_window_with((const char *const *)&multi->path, 1);
    g_autofree char *name = g_path_get_basename(multi->path);
    assert_shows(cl_window_get_view(win, 0), name, 0, (int)multi->width, (int)multi->height);
    assert_shows(cl_window_get_view(win, 1), name, 1, (int)multi->width, (int)multi->height);
    g_assert_true(cl_image_view_get_document(cl_window_get_view(win, 0)) ==
                  cl_image_view_get_document(cl_window_get_view(win, 1)));
    gtk_window_destroy(GTK_WINDOW(win));
}

/* ---- the pointer never moves the zoom ---- */

/* The pointer entering and moving over view (as GTK delivers it to every motion controller on the
 * widget: the view's own and the compare view's readout). */
static void pointer_over(ClImageView *view, double x, double y)
{
    g_autoptr(GListModel) controllers = gtk_widget_observe_controllers(GTK_WIDGET(view));
    for (guint i = 0; i < g_list_model_get_n_items(controllers); i++) {
        g_autoptr(GObject) c = g_list_model_get_item(controllers, i);
        if (!GTK_IS_EVENT_CONTROLLER_MOTION(c))
            continue;
        g_signal_emit_by_name(c, "enter", x, y);
        g_signal_emit_by_name(c, "motion", x, y);
    }
}

static void pointer_away(ClImageView *view)
{
    g_autoptr(GListModel) controllers = gtk_widget_observe_controllers(GTK_WIDGET(view));
    for (guint i = 0; i < g_list_model_get_n_items(controllers); i++) {
        g_autoptr(GObject) c = g_list_model_get_item(controllers, i);
        if (GTK_IS_EVENT_CONTROLLER_MOTION(c))
            g_signal_emit_by_name(c, "leave");
    }
}

/* Pointer enter, motion over many places (each one a readout of its own length) and leave, in
 * side by side and mid-swipe, with the description panel closed and open: the fitted zoom and
 * the views' sizes stay as they were. */
static void test_pointer_keeps_zoom(void)
{
    g_autofree char *pa = g_build_filename(tmpdir, "zoom-a.png", NULL);
    g_autofree char *pb = g_build_filename(tmpdir, "zoom-b.png", NULL);
    write_scene(pa, FALSE);
    write_scene(pb, TRUE);
    const char *paths[] = { pa, pb };
    ClWindow *win = new_window_with(paths, 2);
    /* wider than the window's minimum: the layout has room to share out */
    gtk_window_set_default_size(GTK_WINDOW(win), 1500, 900);
    ClImageView *a = cl_window_get_view(win, 0), *b = cl_window_get_view(win, 1);
    GtkWidget *panel = find_widget_of_type(GTK_WIDGET(win), g_type_from_name("ClDescriptionPanel"));
    g_assert_nonnull(panel);
    GtkWidget *revealer = gtk_widget_get_ancestor(panel, GTK_TYPE_REVEALER);
    g_assert_nonnull(revealer);
    /* a description of some length: its natural width is the whole text on one line */
    g_autoptr(GString) text = g_string_new(NULL);
    for (int i = 0; i < 12; i++)
        g_string_append(text,
                        "A new pale rectangle appears in the lower right of the later image. ");
    cl_description_panel_set_text(CL_DESCRIPTION_PANEL(panel), text->str);
    cl_description_panel_set_stage(CL_DESCRIPTION_PANEL(panel), text->str);
    cl_description_panel_set_model(CL_DESCRIPTION_PANEL(panel), text->str);
    const char *modes[] = { "side-by-side", "swipe" };
    for (guint open = 0; open < 2; open++) {
        gtk_revealer_set_reveal_child(GTK_REVEALER(revealer), open);
        for (guint m = 0; m < G_N_ELEMENTS(modes); m++) {
            set_mode(win, modes[m]);
            g_assert_true(wait_for(window_idle, win));
            wait_for_paint(GTK_WIDGET(win));
            /* the revealer's slide (250 ms) and the layout it causes are over */
            for (int i = 0; i < 40; i++) {
                while (g_main_context_iteration(NULL, FALSE))
                    ;
                g_usleep(10000);
            }
            double zoom = cl_viewport_get_zoom(cl_image_view_get_viewport(a));
            int wa = gtk_widget_get_width(GTK_WIDGET(a)), ha = gtk_widget_get_height(GTK_WIDGET(a));
            g_assert_true(cl_viewport_get_fit(cl_image_view_get_viewport(a)));
            g_assert_cmpint(wa, >, 0);
            ClImageView *views[] = { a, b };
            for (guint v = 0; v < (m == 0 ? 2u : 1u); v++) {
                int w = gtk_widget_get_width(GTK_WIDGET(views[v]));
                int h = gtk_widget_get_height(GTK_WIDGET(views[v]));
                const double places[][2] = { { 1, 1 },     { w / 2.0, h / 2.0 },
                                             { w - 2, 3 }, { w / 3.0, h - 2 },
                                             { -5, -5 },   { 7, h / 2.0 } };
                for (guint k = 0; k < G_N_ELEMENTS(places); k++) {
                    pointer_over(views[v], places[k][0], places[k][1]);
                    wait_for_paint(GTK_WIDGET(win));
                    g_test_message(
                        "%s, panel %s, view %u at (%.0f, %.0f): zoom %.4f, %d × %d", modes[m],
                        open ? "open" : "closed", v, places[k][0], places[k][1],
                        cl_viewport_get_zoom(cl_image_view_get_viewport(a)),
                        gtk_widget_get_width(GTK_WIDGET(a)), gtk_widget_get_height(GTK_WIDGET(a)));
                    g_assert_cmpfloat(cl_viewport_get_zoom(cl_image_view_get_viewport(a)), ==,
                                      zoom);
                    g_assert_cmpint(gtk_widget_get_width(GTK_WIDGET(a)), ==, wa);
                    g_assert_cmpint(gtk_widget_get_height(GTK_WIDGET(a)), ==, ha);
                }
                pointer_away(views[v]);
                wait_for_paint(GTK_WIDGET(win));
                g_assert_cmpfloat(cl_viewport_get_zoom(cl_image_view_get_viewport(a)), ==, zoom);
            }
        }
    }
    set_mode(win, "side-by-side");
    gtk_window_destroy(GTK_WINDOW(win));
}

static void settle(ClWindow *win)
{
    wait_for_paint(GTK_WIDGET(win));
    for (int i = 0; i < 5; i++) {
        while (g_main_context_iteration(NULL, FALSE))
            ;
        g_usleep(10000);
    }
    wait_for_paint(GTK_WIDGET(win));
}

/* After the divider is moved by hand, GTK 4.8 may draw a frame that meets a box of the window
 * before its new allocation and warns "Trying to snapshot GtkBox … without a current allocation"
 * (on a loaded two-core machine in 3 of 4 runs of this test, with this window's code as it was
 * before and after the shared-database work; never under a debugger). The later frames are
 * drawn and allocated right, and every width the test measures is as asserted. That one
 * warning is not fatal here (ui_snapshot_warning_tolerated); any other is.
 *
 * The description panel sits behind a divider: its width is the default or the one dragged to
 * (remembered for the next window), not what its text would like; closed, the images get its
 * width back. */
static void test_panel_divider(void)
{
    ui_snapshot_warning_tolerated = TRUE;
    g_autoptr(GSettings) settings = g_settings_new("io.changelens.ChangeLens");
    g_settings_reset(settings, "panel-width");
    const char *paths[] = { path_a, path_b };
    for (int round = 0; round < 2; round++) {
        ClWindow *win = new_window_with(paths, 2);
        gtk_window_set_default_size(GTK_WINDOW(win), 1400, 800);
        ClImageView *a = cl_window_get_view(win, 0);
        GtkWidget *panel =
            find_widget_of_type(GTK_WIDGET(win), g_type_from_name("ClDescriptionPanel"));
        GtkWidget *revealer = gtk_widget_get_ancestor(panel, GTK_TYPE_REVEALER);
        GtkPaned *paned = GTK_PANED(gtk_widget_get_ancestor(panel, GTK_TYPE_PANED));
        g_assert_nonnull(paned);
        settle(win);
        /* closed: the panes have the whole width, no blank column */
        int full = gtk_widget_get_width(GTK_WIDGET(paned));
        int closed_a = gtk_widget_get_width(GTK_WIDGET(a));
        g_assert_cmpint(full, >=, 1390);
        g_assert_cmpint(closed_a, >=, full / 2 - 4);

        /* open, with a long text: the remembered width */
        g_autoptr(GString) text = g_string_new(NULL);
        for (int i = 0; i < 20; i++)
            g_string_append(text, "The lower right shows a new rectangle that was not there. ");
        cl_description_panel_set_text(CL_DESCRIPTION_PANEL(panel), text->str);
        cl_description_panel_set_model(CL_DESCRIPTION_PANEL(panel), text->str);
        gtk_revealer_set_reveal_child(GTK_REVEALER(revealer), TRUE);
        settle(win);
        int want = round == 0 ? 380 : 500;
        g_assert_cmpint(g_settings_get_int(settings, "panel-width"), ==, want);
        int side = full - gtk_paned_get_position(paned);
        g_test_message("round %d: panes %d wide, panel %d (%d), view %d", round, full, side,
                       gtk_widget_get_width(panel), gtk_widget_get_width(GTK_WIDGET(a)));
        g_assert_cmpint(side, ==, want);
        g_assert_cmpint(gtk_widget_get_width(panel), <=, want);
        g_assert_cmpint(gtk_widget_get_width(panel), >=, want - 30);

        if (round == 0) {
            /* a drag of the divider (what it sets) is remembered */
            gtk_paned_set_position(paned, full - 500);
            settle(win);
            g_assert_cmpint(g_settings_get_int(settings, "panel-width"), ==, 500);
            /* the window growing keeps the panel's width */
            gtk_window_set_default_size(GTK_WINDOW(win), 1500, 800);
            settle(win);
            int wider = gtk_widget_get_width(GTK_WIDGET(paned));
            g_assert_cmpint(wider - gtk_paned_get_position(paned), ==, 500);
            g_assert_cmpint(g_settings_get_int(settings, "panel-width"), ==, 500);
            gtk_window_set_default_size(GTK_WINDOW(win), 1400, 800);
            settle(win);
        }
        /* closed again: the images get the panel's width back */
        gtk_revealer_set_reveal_child(GTK_REVEALER(revealer), FALSE);
        settle(win);
        g_assert_false(gtk_widget_get_visible(gtk_paned_get_end_child(paned)));
        g_assert_cmpint(gtk_widget_get_width(GTK_WIDGET(a)), ==, closed_a);
        gtk_window_destroy(GTK_WINDOW(win));
    }
    g_settings_reset(settings, "panel-width");
    ui_snapshot_warning_tolerated = FALSE;
}

/* DICOM files open in time order whatever order they were given in: the prior on the left. */
static void test_dicom_order(void)
{
    g_autoptr(GPtrArray) fixtures = g_ptr_array_new_with_free_func((GDestroyNotify)cl_fixture_free);
    g_autofree char *dir = g_build_filename(tmpdir, "fixtures-order", NULL);
    g_assert_cmpint(g_mkdir_with_parents(dir, 0700), ==, 0);
    g_assert_true(cl_fixtures_dicom(dir, fixtures, NULL));
    g_autofree char *later = g_build_filename(dir, "dicom-mono2-u16-le.dcm", NULL); /* 2024 */
    g_autofree char *earlier =
        g_build_filename(dir, "dicom-mono1-12in16-implicit.dcm", NULL); /* 2023 */
    g_assert_true(g_file_test(later, G_FILE_TEST_EXISTS) &&
                  g_file_test(earlier, G_FILE_TEST_EXISTS));
    const char *paths[] = { later, earlier };
    ClWindow *win = new_window_with(paths, 2);
    assert_shows(cl_window_get_view(win, 0), "dicom-mono1-12in16-implicit.dcm", 0, 40, 30);
    assert_shows(cl_window_get_view(win, 1), "dicom-mono2-u16-le.dcm", 0, 37, 23);
    gtk_window_destroy(GTK_WINDOW(win));
}

/* Wider than the texture limit: an overview at half resolution, full size kept for detail. */
static void test_large_image(void)
{
    g_autofree char *path = g_build_filename(tmpdir, "wide.png", NULL);
    g_assert_true(write_png(path, 5000, 20, 0, 1, 0));
    const char *paths[] = { path };
    ClWindow *win = new_window_with(paths, 1);
    ClImageView *view = cl_window_get_view(win, 0);
    GdkTexture *tex = cl_image_view_get_texture(view);
    g_assert_nonnull(tex);
    /* the overview: halved until within 2048 a side, box averages */
    g_assert_cmpint(gdk_texture_get_width(tex), ==, 1250);
    g_assert_cmpint(gdk_texture_get_height(tex), ==, 5);
    guint w, h;
    cl_image_view_get_image_size(view, &w, &h);
    g_assert_cmpuint(w, ==, 5000);
    g_assert_cmpuint(h, ==, 20);
    g_assert_cmphex(texture_pixel(view, 1200, 2), ==, 0x00ff00ff); /* box average of green */
    /* Zoomed in, the view draws from the full-resolution pixels. */
    cl_viewport_set(cl_image_view_get_viewport(view), 3.0, 4000.0, 10.0);
    gtk_widget_queue_draw(GTK_WIDGET(view));
    for (int i = 0; i < 20; i++)
        g_main_context_iteration(NULL, FALSE);
    gtk_window_destroy(GTK_WINDOW(win));
}

/* A w × h gradient: red rises with x, green with y, blue as given; each level spans w/256
 * pixels, so a colour read off the screen says where in the image it came from. */
static void write_gradient_png(const char *path, int w, int h, double blue)
{
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    guint8 *d = cairo_image_surface_get_data(s);
    int stride = cairo_image_surface_get_stride(s);
    guint b = (guint)(blue * 255);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            ((guint32 *)(d + (gsize)y * stride))[x] =
                (guint32)(x * 255 / (w - 1)) << 16 | (guint32)(y * 255 / (h - 1)) << 8 | b;
    cairo_surface_mark_dirty(s);
    g_assert_cmpint(cairo_surface_write_to_png(s, path), ==, CAIRO_STATUS_SUCCESS);
    cairo_surface_destroy(s);
}

/* Renders view as the screen would show it; returns its pixels (ARGB32, stride width*4). */
static guint32 *render_view(ClImageView *view, int *width, int *height)
{
    int w = gtk_widget_get_width(GTK_WIDGET(view)), h = gtk_widget_get_height(GTK_WIDGET(view));
    g_autoptr(GdkPaintable) paintable = gtk_widget_paintable_new(GTK_WIDGET(view));
    GtkSnapshot *snapshot = gtk_snapshot_new();
    gdk_paintable_snapshot(paintable, snapshot, w, h);
    g_autoptr(GskRenderNode) node = gtk_snapshot_free_to_node(snapshot);
    g_assert_nonnull(node);
    GskRenderer *renderer = gtk_native_get_renderer(gtk_widget_get_native(GTK_WIDGET(view)));
    g_autoptr(GdkTexture) tex =
        gsk_renderer_render_texture(renderer, node, &GRAPHENE_RECT_INIT(0, 0, w, h));
    guint32 *pixels = g_new(guint32, (gsize)w * h);
    gdk_texture_download(tex, (guchar *)pixels, (gsize)w * 4);
    *width = w;
    *height = h;
    return pixels;
}

/* Zoomed in, the views draw only the texels of the overview in sight (a part sharing the
 * mip's pixels): every screen pixel still shows the image point under it, own and partner. */
static void test_mip_part(void)
{
    const int size = 4096; /* the overview: 2048, so 40 % zoom draws from it */
    g_autofree char *pa = g_build_filename(tmpdir, "gradient-a.png", NULL);
    g_autofree char *pb = g_build_filename(tmpdir, "gradient-b.png", NULL);
    write_gradient_png(pa, size, size, 0);
    write_gradient_png(pb, size, size, 1);
    const char *paths[] = { pa, pb };
    ClWindow *win = new_window_with(paths, 2);
    ClImageView *a = cl_window_get_view(win, 0);
    GdkTexture *tex = cl_image_view_get_texture(a);
    g_assert_cmpint(gdk_texture_get_width(tex), ==, 2048);
    set_mode(win, "swipe");
    cl_image_view_set_swipe_position(a, 0.5);
    const double zoom = 0.4, cx = 3000, cy = 1000;
    cl_viewport_set(cl_image_view_get_viewport(a), zoom, cx, cy);
    wait_for_paint(GTK_WIDGET(a));
    int w, h;
    g_autofree guint32 *px = render_view(a, &w, &h);
    g_assert_cmpint(w, >, 100);
    int checked = 0;
    for (int sy = h / 8; sy < h; sy += h / 4)
        for (int sx = w / 16; sx < w; sx += w / 8) {
            if (abs(sx - w / 2) < 4)
                continue; /* the divider */
            double ix = cx + (sx + 0.5 - w / 2.0) / zoom, iy = cy + (sy + 0.5 - h / 2.0) / zoom;
            if (ix < 0 || iy < 0 || ix >= size || iy >= size)
                continue;
            guint32 p = px[(gsize)sy * w + sx];
            int r = (p >> 16) & 255, g = (p >> 8) & 255, b = p & 255;
            int er = (int)(ix * 255 / (size - 1)), eg = (int)(iy * 255 / (size - 1));
            /* left of the divider this image (blue 0), right of it the partner (blue 255) */
            g_assert_cmpint(b, ==, sx < w / 2 ? 0 : 255);
            g_assert_cmpint(abs(r - er), <=, 3);
            g_assert_cmpint(abs(g - eg), <=, 3);
            checked++;
        }
    g_assert_cmpint(checked, >=, 16);
    set_mode(win, "side-by-side"); /* the mode is a preference: the next tests start from it */
    gtk_window_destroy(GTK_WINDOW(win));
}

/* Zoomed in past 2×, image pixels are sharp squares: a 1-pixel checkerboard at 8× shows only
 * black and white, never the greys that linear filtering would mix in. */
static void test_nearest_when_zoomed(void)
{
    g_autofree char *path = g_build_filename(tmpdir, "checker.png", NULL);
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 16, 16);
    cairo_t *cr = cairo_create(s);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_paint(cr);
    cairo_set_source_rgb(cr, 1, 1, 1);
    for (int y = 0; y < 16; y++)
        for (int x = (y & 1); x < 16; x += 2)
            cairo_rectangle(cr, x, y, 1, 1);
    cairo_fill(cr);
    cairo_destroy(cr);
    g_assert_cmpint(cairo_surface_write_to_png(s, path), ==, CAIRO_STATUS_SUCCESS);
    cairo_surface_destroy(s);

    const char *paths[] = { path };
    ClWindow *win = new_window_with(paths, 1);
    ClImageView *view = cl_window_get_view(win, 0);
    cl_viewport_set(cl_image_view_get_viewport(view), 8.0, 8.0, 8.0);
    wait_for_paint(GTK_WIDGET(view));

    int w, h;
    g_autofree guint32 *px = render_view(view, &w, &h);
    /* The 128 × 128 image sits in the middle of the view (minus a margin for the centring). */
    guint mixed = 0, black = 0, white = 0;
    for (int y = h / 2 - 56; y < h / 2 + 56; y++) {
        for (int x = w / 2 - 56; x < w / 2 + 56; x++) {
            guint32 p = px[(gsize)y * w + x] & 0xffffff;
            if (p == 0)
                black++;
            else if (p == 0xffffff)
                white++;
            else
                mixed++;
        }
    }
    g_test_message("zoom 8: %u black, %u white, %u mixed pixels", black, white, mixed);
    g_assert_cmpuint(mixed, ==, 0);
    g_assert_cmpuint(black, >, 4000);
    g_assert_cmpuint(white, >, 4000);
    gtk_window_destroy(GTK_WINDOW(win));
}

/* The Open action brings up a multi-select file chooser (GTK's own dialog without a portal). */
static void test_open_dialog(void)
{
    ClWindow *win = cl_window_new(NULL);
    gtk_window_present(GTK_WINDOW(win));
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.open", NULL));
    GtkFileChooser *chooser = NULL;
    gint64 deadline = g_get_monotonic_time() + WAIT_TIMEOUT_US;
    while (!chooser && g_get_monotonic_time() < deadline) {
        g_main_context_iteration(NULL, FALSE);
        g_autoptr(GListModel) toplevels = G_LIST_MODEL(g_object_ref(gtk_window_get_toplevels()));
        for (guint i = 0; i < g_list_model_get_n_items(toplevels) && !chooser; i++) {
            g_autoptr(GObject) w = g_list_model_get_item(toplevels, i);
            if (GTK_IS_FILE_CHOOSER_DIALOG(w))
                chooser = GTK_FILE_CHOOSER(w);
        }
    }
    g_assert_nonnull(chooser);
    g_assert_true(gtk_file_chooser_get_select_multiple(chooser));
    g_assert_cmpint(gtk_file_chooser_get_action(chooser), ==, GTK_FILE_CHOOSER_ACTION_OPEN);
    g_autoptr(GListModel) filters = gtk_file_chooser_get_filters(chooser);
    g_assert_cmpuint(g_list_model_get_n_items(filters), ==, 3);
    /* Cancelling is handled like a user would: nothing opens, the window stays empty. */
    gtk_dialog_response(GTK_DIALOG(chooser), GTK_RESPONSE_CANCEL);
    for (int i = 0; i < 20; i++)
        g_main_context_iteration(NULL, FALSE);
    g_assert_false(cl_window_get_busy(win));
    g_assert_null(cl_image_view_get_document(cl_window_get_view(win, 0)));
    gtk_window_destroy(GTK_WINDOW(win));
}

/* Preferences: every row is a setting; the compare mode is remembered for new windows. */
static void test_preferences(void)
{
    g_autoptr(GSettings) settings = g_settings_new("io.changelens.ChangeLens");
    GtkWidget *prefs = cl_preferences_new(NULL, settings);
    g_assert_true(ADW_IS_PREFERENCES_WINDOW(prefs));
    gtk_window_present(GTK_WINDOW(prefs));
    for (int i = 0; i < 10; i++)
        g_main_context_iteration(NULL, FALSE);
    gtk_window_destroy(GTK_WINDOW(prefs));

    g_settings_set_string(settings, "compare-mode", "flicker");
    ClWindow *win = cl_window_new(NULL);
    g_assert_cmpstr(cl_window_get_compare_mode(win), ==, "flicker");
    cl_window_set_compare_mode(win, "swipe");
    g_autofree char *kept = g_settings_get_string(settings, "compare-mode");
    g_assert_cmpstr(kept, ==, "swipe");
    g_settings_reset(settings, "compare-mode");
    g_assert_cmpstr(cl_window_get_compare_mode(win), ==, "side-by-side");
    gtk_window_destroy(GTK_WINDOW(win));
}

/* Without a D-Bus session (dconf cannot write) the compare mode buttons still switch the mode and
 * the choice is kept: run in a child whose settings backend is the default one. */
static void test_settings_without_dbus(void)
{
    if (g_test_subprocess()) {
        ClWindow *win = cl_window_new(NULL);
        gtk_window_present(GTK_WINDOW(win));
        set_mode(win, "difference");
        /* dconf tells of a failed write a moment later, undoing it */
        gint64 until = g_get_monotonic_time() + G_USEC_PER_SEC / 2;
        while (g_get_monotonic_time() < until)
            if (!g_main_context_iteration(NULL, FALSE))
                g_usleep(2000);
        g_assert_cmpstr(cl_window_get_compare_mode(win), ==, "difference");
        /* kept: a new window opens in it */
        ClWindow *next = cl_window_new(NULL);
        g_assert_cmpstr(cl_window_get_compare_mode(next), ==, "difference");
        gtk_window_destroy(GTK_WINDOW(next));
        gtk_window_destroy(GTK_WINDOW(win));
        return;
    }
    g_autofree char *backend = g_strdup(g_getenv("GSETTINGS_BACKEND"));
    g_autofree char *bus = g_strdup(g_getenv("DBUS_SESSION_BUS_ADDRESS"));
    g_unsetenv("GSETTINGS_BACKEND");
    g_setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/changelens-test-bus", TRUE);
    g_test_trap_subprocess(NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_INHERIT_STDERR);
    if (backend)
        g_setenv("GSETTINGS_BACKEND", backend, TRUE);
    if (bus)
        g_setenv("DBUS_SESSION_BUS_ADDRESS", bus, TRUE);
    else
        g_unsetenv("DBUS_SESSION_BUS_ADDRESS");
    g_test_trap_assert_passed();
}

void test_ui_window_register(void)
{
    g_test_add_func("/ui/viewport/math", test_viewport_math);
    g_test_add_func("/ui/resources", test_resources);
    g_test_add_func("/ui/shortcuts-window", test_shortcuts_window);
    g_test_add_func("/ui/window/load-two", test_load_two);
    g_test_add_func("/ui/window/measure", test_measure);
    g_test_add_func("/ui/window/overlays", test_overlays);
    g_test_add_func("/ui/window/link-views", test_link_views);
    g_test_add_func("/ui/window/newer-open-wins", test_newer_open_wins);
    g_test_add_func("/ui/window/failed-open-keeps-images", test_failed_open_keeps_images);
    g_test_add_func("/ui/window/bad-files-one-toast", test_bad_files_one_toast);
    g_test_add_func("/ui/window/multi-frame", test_multi_frame);
    g_test_add_func("/ui/window/pointer-keeps-zoom", test_pointer_keeps_zoom);
    g_test_add_func("/ui/window/panel-divider", test_panel_divider);
    g_test_add_func("/ui/window/dicom-order", test_dicom_order);
    g_test_add_func("/ui/window/large-image", test_large_image);
    g_test_add_func("/ui/window/mip-part", test_mip_part);
    g_test_add_func("/ui/view/nearest-when-zoomed", test_nearest_when_zoomed);
    g_test_add_func("/ui/window/open-dialog", test_open_dialog);
    g_test_add_func("/ui/preferences", test_preferences);
    g_test_add_func("/ui/settings/without-dbus", test_settings_without_dbus);
}
