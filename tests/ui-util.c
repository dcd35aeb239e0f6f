/* ui-util.c - What the ui tests share (ui-util.h): the set-up of the process, main-loop waits,
 * windows opened on files, what views show, screenshots and generated scenes. */
#include "ui-util.h"

#include <string.h>
#include <cairo.h>
#include <glib/gstdio.h>

#include "casedb/casedb.h"
#include "fixtures.h"
#include "model/model.h"

#include <unistd.h>

char *tmpdir;
char *path_a, *path_b;

/* Solid background colour per image, and a marker rectangle, so pixels can be checked. */
gboolean write_png(const char *path, int w, int h, double r, double g, double b)
{
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    cairo_t *cr = cairo_create(s);
    cairo_set_source_rgb(cr, r, g, b);
    cairo_paint(cr);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_rectangle(cr, w / 4.0, h / 4.0, w / 4.0, h / 4.0);
    cairo_fill(cr);
    cairo_destroy(cr);
    gboolean ok = cairo_surface_write_to_png(s, path) == CAIRO_STATUS_SUCCESS;
    cairo_surface_destroy(s);
    return ok;
}

/* Runs the main loop until cond holds; FALSE on timeout. */
gboolean wait_for(Condition cond, gpointer data)
{
    gint64 deadline = g_get_monotonic_time() + WAIT_TIMEOUT_US;
    while (!cond(data)) {
        if (g_get_monotonic_time() > deadline)
            return FALSE;
        if (!g_main_context_iteration(NULL, FALSE))
            g_usleep(2000);
    }
    return TRUE;
}

gboolean window_idle(gpointer data)
{
    ClWindow *win = data;
    if (cl_window_get_busy(win))
        return FALSE;
    /* every shown view has been laid out (overlaid modes hide the second one) */
    for (guint i = 0; i < 2; i++) {
        GtkWidget *v = GTK_WIDGET(cl_window_get_view(win, i));
        if (gtk_widget_is_visible(v) && gtk_widget_get_width(v) <= 0)
            return FALSE;
    }
    return TRUE;
}

void open_paths(ClWindow *win, const char *const *paths, guint n)
{
    g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_object_unref);
    for (guint i = 0; i < n; i++)
        g_ptr_array_add(files, g_file_new_for_path(paths[i]));
    cl_window_open_files(win, (GFile *const *)files->pdata, files->len);
}

ClWindow *new_window_with(const char *const *paths, guint n)
{
    ClWindow *win = cl_window_new(NULL);
    gtk_window_set_default_size(GTK_WINDOW(win), 900, 600);
    gtk_window_present(GTK_WINDOW(win));
    open_paths(win, paths, n);
    g_assert_true(cl_window_get_busy(win));
    g_assert_true(wait_for(window_idle, win));
    return win;
}

void assert_shows(ClImageView *view, const char *name, guint frame, int width, int height)
{
    GdkTexture *tex = cl_image_view_get_texture(view);
    g_assert_nonnull(tex);
    g_assert_cmpint(gdk_texture_get_width(tex), ==, width);
    g_assert_cmpint(gdk_texture_get_height(tex), ==, height);
    guint w, h;
    cl_image_view_get_image_size(view, &w, &h);
    g_assert_cmpuint(w, ==, (guint)width);
    g_assert_cmpuint(h, ==, (guint)height);
    ClDocument *doc = cl_image_view_get_document(view);
    g_assert_nonnull(doc);
    g_assert_cmpstr(cl_document_get_name(doc), ==, name);
    g_assert_cmpuint(cl_image_view_get_frame(view), ==, frame);
}

/* Pixel (x, y) of the view's texture as 0xRRGGBBAA. */
guint32 texture_pixel(ClImageView *view, int x, int y)
{
    GdkTexture *tex = cl_image_view_get_texture(view);
    int w = gdk_texture_get_width(tex), h = gdk_texture_get_height(tex);
    g_autofree guint32 *buf = g_new(guint32, (gsize)w * h);
    /* gdk_texture_download gives premultiplied native-endian ARGB32 (cairo's layout). */
    gdk_texture_download(tex, (guchar *)buf, (gsize)w * 4);
    guint32 p = buf[(gsize)y * w + x];
    return ((p >> 16 & 0xff) << 24) | ((p >> 8 & 0xff) << 16) | ((p & 0xff) << 8) | (p >> 24);
}

static void on_after_paint(GdkFrameClock *clock, gboolean *painted)
{
    *painted = TRUE;
}

static gboolean is_true(gpointer data)
{
    return *(gboolean *)data;
}

/* Waits until the window has painted a frame with everything queued so far. */
void wait_for_paint(GtkWidget *widget)
{
    gboolean painted = FALSE;
    GdkFrameClock *clock = gtk_widget_get_frame_clock(widget);
    g_assert_nonnull(clock);
    gulong id = g_signal_connect(clock, "after-paint", G_CALLBACK(on_after_paint), &painted);
    gtk_widget_queue_draw(widget);
    g_assert_true(wait_for(is_true, &painted));
    g_signal_handler_disconnect(clock, id);
}

/* Writes what the window shows to $CL_SCREENSHOT_DIR/name.png (test artefacts; skipped when the
 * variable is unset). */
void save_screenshot(ClWindow *win, const char *name)
{
    save_widget_screenshot(GTK_WIDGET(win), name);
}

void save_widget_screenshot(GtkWidget *w, const char *name)
{
    const char *dir = g_getenv("CL_SCREENSHOT_DIR");
    if (!dir || !*dir)
        return;
    g_mkdir_with_parents(dir, 0755);
    /* let pending frames, redraws and the page crossfade (200 ms) finish first */
    for (int i = 0; i < 60; i++) {
        while (g_main_context_iteration(NULL, FALSE))
            ;
        g_usleep(5000);
    }
    int width = gtk_widget_get_width(w), height = gtk_widget_get_height(w);
    g_autoptr(GdkPaintable) paintable = gtk_widget_paintable_new(w);
    GtkSnapshot *snapshot = gtk_snapshot_new();
    gdk_paintable_snapshot(paintable, snapshot, width, height);
    g_autoptr(GskRenderNode) node = gtk_snapshot_free_to_node(snapshot);
    g_assert_nonnull(node);
    GskRenderer *renderer = gtk_native_get_renderer(gtk_widget_get_native(w));
    g_autoptr(GdkTexture) tex = gsk_renderer_render_texture(
        renderer, node, &GRAPHENE_RECT_INIT(0, 0, (float)width, (float)height));
    g_autofree char *file = g_strconcat(name, ".png", NULL);
    g_autofree char *path = g_build_filename(dir, file, NULL);
    g_assert_true(gdk_texture_save_to_png(tex, path));
    g_test_message("screenshot %s", path);
}

AdwMessageDialog *find_dialog(ClWindow *win)
{
    AdwMessageDialog *found = NULL;
    GList *all = gtk_window_list_toplevels();
    for (GList *l = all; l && !found; l = l->next)
        if (ADW_IS_MESSAGE_DIALOG(l->data) && gtk_widget_get_visible(l->data) &&
            gtk_window_get_transient_for(l->data) == GTK_WINDOW(win))
            found = l->data;
    g_list_free(all);
    return found;
}

static gboolean has_dialog(gpointer win)
{
    return find_dialog(win) != NULL;
}

/* The button under root whose label is label, NULL when none. */
static GtkWidget *find_button(GtkWidget *root, const char *label)
{
    if (GTK_IS_BUTTON(root) && g_strcmp0(gtk_button_get_label(GTK_BUTTON(root)), label) == 0)
        return root;
    for (GtkWidget *c = gtk_widget_get_first_child(root); c; c = gtk_widget_get_next_sibling(c)) {
        GtkWidget *found = find_button(c, label);
        if (found)
            return found;
    }
    return NULL;
}

static gboolean dialog_gone(gpointer d)
{
    return !gtk_widget_get_visible(d);
}

void answer_dialog(ClWindow *win, const char *response)
{
    g_assert_true(wait_for(has_dialog, win));
    AdwMessageDialog *d = find_dialog(win);
    g_assert_true(adw_message_dialog_has_response(d, response));
    /* a click on the response's button, as the user's */
    GtkWidget *button =
        find_button(GTK_WIDGET(d), adw_message_dialog_get_response_label(d, response));
    g_assert_nonnull(button);
    g_object_ref(d);
    g_signal_emit_by_name(button, "clicked");
    g_assert_true(wait_for(dialog_gone, d));
    g_object_unref(d);
    for (int i = 0; i < 10; i++)
        g_main_context_iteration(NULL, FALSE);
}

void press_view(ClImageView *view, double x, double y)
{
    g_autoptr(GListModel) controllers = gtk_widget_observe_controllers(GTK_WIDGET(view));
    for (guint i = 0; i < g_list_model_get_n_items(controllers); i++) {
        g_autoptr(GObject) c = g_list_model_get_item(controllers, i);
        if (GTK_IS_GESTURE_DRAG(c) &&
            gtk_gesture_single_get_button(GTK_GESTURE_SINGLE(c)) == GDK_BUTTON_PRIMARY) {
            g_signal_emit_by_name(c, "drag-begin", x, y);
            g_signal_emit_by_name(c, "drag-end", 0.0, 0.0);
            return;
        }
    }
    g_assert_not_reached();
}

GtkTextView *find_text_view(ClWindow *win)
{
    GtkWidget *w = GTK_WIDGET(win);
    for (GtkWidget *c = w; c;) {
        if (GTK_IS_TEXT_VIEW(c))
            return GTK_TEXT_VIEW(c);
        /* depth-first walk */
        GtkWidget *next = gtk_widget_get_first_child(c);
        while (!next && c && c != w) {
            next = gtk_widget_get_next_sibling(c);
            if (!next)
                c = gtk_widget_get_parent(c);
        }
        c = next;
    }
    return NULL;
}

void set_mode(ClWindow *win, const char *mode)
{
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.compare-mode", "s", mode));
    g_assert_cmpstr(cl_window_get_compare_mode(win), ==, mode);
}

gboolean diff_ready(gpointer data)
{
    return cl_image_view_get_changed_fraction(data) >= 0;
}

/* Larger images with a shared scene and one change, for the compare modes and the model. */
void write_scene_at(const char *path, gboolean changed, double dx, double dy)
{
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 320, 240);
    cairo_t *cr = cairo_create(s);
    cairo_translate(cr, dx, dy);
    cairo_set_source_rgb(cr, 0.45, 0.55, 0.4);
    cairo_paint(cr);
    /* texture to align on */
    for (int i = 0; i < 40; i++) {
        cairo_set_source_rgb(cr, 0.3 + 0.012 * i, 0.5, 0.35 + 0.01 * (i % 7));
        cairo_arc(cr, (i * 73) % 320, (i * 41) % 240, 4 + i % 6, 0, 2 * G_PI);
        cairo_fill(cr);
    }
    cairo_set_source_rgb(cr, 0.8, 0.8, 0.75);
    cairo_rectangle(cr, 40, 40, 80, 60);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0.3, 0.3, 0.35);
    cairo_rectangle(cr, 0, 150, 320, 20);
    cairo_fill(cr);
    if (changed) {
        cairo_set_source_rgb(cr, 0.7, 0.2, 0.15);
        cairo_rectangle(cr, 200, 50, 70, 70);
        cairo_fill(cr);
    }
    cairo_destroy(cr);
    g_assert_true(cairo_surface_write_to_png(s, path) == CAIRO_STATUS_SUCCESS);
    cairo_surface_destroy(s);
}

void write_scene(const char *path, gboolean changed)
{
    write_scene_at(path, changed, 0, 0);
}

gboolean not_describing(gpointer data)
{
    return !cl_window_get_describing(data);
}

gboolean ui_snapshot_warning_tolerated;

/* GTK logs through the structured API, whose default writer makes a warning fatal in a test
 * (g_test_log_set_fatal_handler is not asked there): this writer lets the one tolerated warning
 * through as written text, and hands everything else to the default writer. */
static GLogWriterOutput ui_log_writer(GLogLevelFlags level, const GLogField *fields, gsize n,
                                      gpointer data)
{
    if (ui_snapshot_warning_tolerated && (level & G_LOG_LEVEL_WARNING)) {
        const char *domain = NULL, *message = NULL;
        for (gsize i = 0; i < n; i++) {
            if (g_str_equal(fields[i].key, "GLIB_DOMAIN"))
                domain = fields[i].value;
            else if (g_str_equal(fields[i].key, "MESSAGE"))
                message = fields[i].value;
        }
        if (g_strcmp0(domain, "Gtk") == 0 && message &&
            g_str_has_prefix(message, "Trying to snapshot") &&
            strstr(message, "without a current allocation"))
            return g_log_writer_standard_streams(level & ~G_LOG_FLAG_FATAL, fields, n, data);
    }
    return g_log_writer_default(level, fields, n, data);
}

int ui_util_init(int *argc, char ***argv)
{
    g_test_init(argc, argv, NULL);
    g_log_set_writer_func(ui_log_writer, NULL, NULL);
    tmpdir = cl_fixture_tmpdir("cl-test-ui");

    /* The pretrained parts set-up fetched stay visible (the windows pick the models a user's
     * would), through a data folder of the test's own (retrieved PACS studies go there). */
    g_autofree char *pretrained = cl_pretrained_path(NULL);
    if (g_file_test(pretrained, G_FILE_TEST_IS_DIR)) {
        g_autofree char *data = g_build_filename(tmpdir, "changelens-data", NULL);
        g_autofree char *link = g_build_filename(data, "pretrained", NULL);
        g_mkdir_with_parents(data, 0700);
        if (symlink(pretrained, link) == 0)
            g_setenv("CHANGELENS_DATA", data, TRUE);
    }

    /* Isolate the per-user dirs (settings, recent files, caches) but keep the system data dirs:
     * without shared-mime-info and the icon themes GTK cannot even load its own SVG icons. */
    const char *user_dirs[] = { "HOME",           "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                                "XDG_CACHE_HOME", "XDG_STATE_HOME",  "XDG_RUNTIME_DIR" };
    for (guint i = 0; i < G_N_ELEMENTS(user_dirs); i++) {
        g_autofree char *dir = g_build_filename(tmpdir, user_dirs[i], NULL);
        g_mkdir_with_parents(dir, 0700);
        g_setenv(user_dirs[i], dir, TRUE);
    }

    if (!gtk_init_check()) {
        g_print("SKIP: no display for GTK; the ui suite runs under xvfb-run (./run.sh test)\n");
        cl_fixture_rmdir(tmpdir);
        return 77;
    }
    adw_init();
    /* the app's stylesheet (AdwApplication loads it; these windows have no application) */
    GtkCssProvider *css = gtk_css_provider_new();
    gtk_css_provider_load_from_resource(css, "/io/changelens/ChangeLens/style.css");
    gtk_style_context_add_provider_for_display(gdk_display_get_default(), GTK_STYLE_PROVIDER(css),
                                               GTK_STYLE_PROVIDER_PRIORITY_APPLICATION);
    g_object_unref(css); /* the display keeps it */

    path_a = g_build_filename(tmpdir, "a.png", NULL);
    path_b = g_build_filename(tmpdir, "b.png", NULL);
    if (!write_png(path_a, 64, 48, 1, 0, 0) || !write_png(path_b, 80, 60, 0, 0, 1)) {
        g_printerr("cannot write test images into %s\n", tmpdir);
        return 1;
    }
    return 0;
}

void ui_util_cleanup(void)
{
    cl_fixture_rmdir(tmpdir);
    g_free(tmpdir);
    g_free(path_a);
    g_free(path_b);
}

/* A case of two generated scenes in db, named name, the later one shifted by (dx, 0); its id. */
gint64 shifted_case(ClCaseDb *db, const char *name, const char *stem, double dx)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) images =
        g_ptr_array_new_with_free_func((GDestroyNotify)cl_case_image_free);
    for (int i = 0; i < 2; i++) {
        g_autofree char *file = g_strdup_printf("%s-%d.png", stem, i + 1);
        g_autofree char *path = g_build_filename(tmpdir, file, NULL);
        write_scene_at(path, i == 1, i == 1 ? dx : 0, 0);
        ClCaseImage *ci = g_new0(ClCaseImage, 1);
        g_assert_true(cl_case_image_from_file(path, 0, ci, &error));
        g_ptr_array_add(images, ci);
    }
    gint64 id = 0;
    g_assert_true(cl_casedb_case_new(db, name, &id, &error));
    g_assert_true(cl_casedb_images_add(db, id, images, NULL, &error));
    g_assert_no_error(error);
    return id;
}

gboolean not_busy(gpointer data)
{
    return !cl_window_get_busy(data);
}

gboolean not_exporting(gpointer data)
{
    return !cl_window_get_exporting(data);
}

gboolean case_shown(gpointer data)
{
    ClWindow *win = data;
    return window_idle(win) && cl_image_view_get_document(cl_window_get_view(win, 0)) != NULL;
}

void set_description_text(ClWindow *win, const char *text)
{
    /* the panel's editor, as a user types into it */
    GtkTextView *tv = find_text_view(win);
    g_assert_nonnull(tv);
    GtkTextBuffer *b = gtk_text_view_get_buffer(tv);
    gtk_text_buffer_set_text(b, text, -1);
    gtk_text_buffer_set_modified(b, TRUE);
}

guint n_versions(ClCaseDb *db, gint64 id)
{
    g_autoptr(ClCase) c = cl_casedb_get_case(db, id, CL_CASE_GET_DEFAULT, NULL);
    return c->descriptions->len;
}

/* The widget under root whose action is action_name (the header bar's link toggle, ...). */
GtkWidget *find_actionable(GtkWidget *root, const char *action_name)
{
    if (GTK_IS_ACTIONABLE(root) &&
        g_strcmp0(gtk_actionable_get_action_name(GTK_ACTIONABLE(root)), action_name) == 0)
        return root;
    for (GtkWidget *c = gtk_widget_get_first_child(root); c; c = gtk_widget_get_next_sibling(c)) {
        GtkWidget *found = find_actionable(c, action_name);
        if (found)
            return found;
    }
    return NULL;
}

GtkWidget *find_widget_of_type(GtkWidget *root, GType type)
{
    if (G_TYPE_CHECK_INSTANCE_TYPE(root, type))
        return root;
    for (GtkWidget *c = gtk_widget_get_first_child(root); c; c = gtk_widget_get_next_sibling(c)) {
        GtkWidget *found = find_widget_of_type(c, type);
        if (found)
            return found;
    }
    return NULL;
}

const char *label_containing(GtkWidget *root, const char *needle)
{
    if (GTK_IS_LABEL(root) && strstr(gtk_label_get_label(GTK_LABEL(root)), needle))
        return gtk_label_get_label(GTK_LABEL(root));
    for (GtkWidget *c = gtk_widget_get_first_child(root); c; c = gtk_widget_get_next_sibling(c)) {
        const char *t = label_containing(c, needle);
        if (t)
            return t;
    }
    return NULL;
}
