/* test-ui.c - ClWindow and ClImageView end to end under a display: generated images load off the
 * main thread, show at the right size and colour, and linked views follow each other. */
#include <adwaita.h>
#include <json-glib/json-glib.h>
#include <cairo.h>
#include <glib/gstdio.h>
#include <tiffio.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "casedb/casedb.h"
#include "cl-application.h"
#include "cl-document.h"
#include "cl-preferences.h"
#include "cl-image-view.h"
#include "cl-viewport.h"
#include "cl-window.h"
#include "fixtures.h"

/* Generous: loading is quick, but CI machines under load and Xvfb's software rendering are not. */
#define WAIT_TIMEOUT_US (20 * G_USEC_PER_SEC)

static char *tmpdir;
static char *path_a, *path_b; /* 64 × 48 and 80 × 60 PNGs */

/* Solid background colour per image, and a marker rectangle, so pixels can be checked. */
static gboolean write_png(const char *path, int w, int h, double r, double g, double b)
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

typedef gboolean (*Condition)(gpointer data);

/* Runs the main loop until cond holds; FALSE on timeout. */
static gboolean wait_for(Condition cond, gpointer data)
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

static gboolean window_idle(gpointer data)
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

static void open_paths(ClWindow *win, const char *const *paths, guint n)
{
    g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_object_unref);
    for (guint i = 0; i < n; i++)
        g_ptr_array_add(files, g_file_new_for_path(paths[i]));
    cl_window_open_files(win, (GFile *const *)files->pdata, files->len);
}

static ClWindow *new_window_with(const char *const *paths, guint n)
{
    ClWindow *win = cl_window_new(NULL);
    gtk_window_set_default_size(GTK_WINDOW(win), 900, 600);
    gtk_window_present(GTK_WINDOW(win));
    open_paths(win, paths, n);
    g_assert_true(cl_window_get_busy(win));
    g_assert_true(wait_for(window_idle, win));
    return win;
}

static void assert_shows(ClImageView *view, const char *name, guint frame, int width, int height)
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
static guint32 texture_pixel(ClImageView *view, int x, int y)
{
    GdkTexture *tex = cl_image_view_get_texture(view);
    int w = gdk_texture_get_width(tex), h = gdk_texture_get_height(tex);
    g_autofree guint32 *buf = g_new(guint32, (gsize)w * h);
    /* gdk_texture_download gives premultiplied native-endian ARGB32 (cairo's layout). */
    gdk_texture_download(tex, (guchar *)buf, (gsize)w * 4);
    guint32 p = buf[(gsize)y * w + x];
    return ((p >> 16 & 0xff) << 24) | ((p >> 8 & 0xff) << 16) | ((p & 0xff) << 8) | (p >> 24);
}

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

/* ---- the window ---- */

static void test_load_two(void)
{
    const char *paths[] = {path_a, path_b};
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

static void assert_same_view(ClViewport *x, ClViewport *y)
{
    g_assert_cmpfloat_with_epsilon(cl_viewport_get_zoom(x), cl_viewport_get_zoom(y), 1e-12);
    g_assert_cmpfloat_with_epsilon(cl_viewport_get_center_x(x), cl_viewport_get_center_x(y), 1e-9);
    g_assert_cmpfloat_with_epsilon(cl_viewport_get_center_y(x), cl_viewport_get_center_y(y), 1e-9);
}

/* The widget under root whose action is action_name (the header bar's link toggle, ...). */
static GtkWidget *find_actionable(GtkWidget *root, const char *action_name)
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

typedef struct {
    double zoom, cx, cy;
} State;

static State state_of(ClImageView *view)
{
    ClViewport *vp = cl_image_view_get_viewport(view);
    return (State){cl_viewport_get_zoom(vp), cl_viewport_get_center_x(vp),
                   cl_viewport_get_center_y(vp)};
}

static void test_link_views(void)
{
    const char *paths[] = {path_a, path_b};
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
    const char *first[] = {path_a, path_b};
    const char *second[] = {path_b, path_a};
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
    const char *paths[] = {path_a, path_b};
    ClWindow *win = new_window_with(paths, 2);
    g_autofree char *missing = g_build_filename(tmpdir, "missing.png", NULL);
    g_autofree char *not_image = g_build_filename(tmpdir, "notes.txt", NULL);
    g_assert_true(g_file_set_contents(not_image, "not an image\n", -1, NULL));
    const char *bad[] = {missing, not_image};
    open_paths(win, bad, 2);
    g_assert_true(wait_for(window_idle, win));
    assert_shows(cl_window_get_view(win, 0), "a.png", 0, 64, 48);
    assert_shows(cl_window_get_view(win, 1), "b.png", 0, 80, 60);

    /* One good file among bad ones is shown on its own. */
    const char *mixed[] = {missing, path_b};
    open_paths(win, mixed, 2);
    g_assert_true(wait_for(window_idle, win));
    assert_shows(cl_window_get_view(win, 0), "b.png", 0, 80, 60);
    g_assert_null(cl_image_view_get_texture(cl_window_get_view(win, 1)));
    g_assert_null(cl_image_view_get_document(cl_window_get_view(win, 1)));
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

/* DICOM files open in time order whatever order they were given in: the prior on the left. */
static void test_dicom_order(void)
{
    g_autoptr(GPtrArray) fixtures = g_ptr_array_new_with_free_func((GDestroyNotify)cl_fixture_free);
    g_autofree char *dir = g_build_filename(tmpdir, "fixtures-order", NULL);
    g_assert_cmpint(g_mkdir_with_parents(dir, 0700), ==, 0);
    g_assert_true(cl_fixtures_dicom(dir, fixtures, NULL));
    g_autofree char *later = g_build_filename(dir, "dicom-mono2-u16-le.dcm", NULL);        /* 2024 */
    g_autofree char *earlier = g_build_filename(dir, "dicom-mono1-12in16-implicit.dcm", NULL); /* 2023 */
    g_assert_true(g_file_test(later, G_FILE_TEST_EXISTS) && g_file_test(earlier, G_FILE_TEST_EXISTS));
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
    const char *paths[] = {path};
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

static void on_after_paint(GdkFrameClock *clock, gboolean *painted)
{
    *painted = TRUE;
}

static gboolean is_true(gpointer data)
{
    return *(gboolean *)data;
}

/* Waits until the window has painted a frame with everything queued so far. */
static void wait_for_paint(GtkWidget *widget)
{
    gboolean painted = FALSE;
    GdkFrameClock *clock = gtk_widget_get_frame_clock(widget);
    g_assert_nonnull(clock);
    gulong id = g_signal_connect(clock, "after-paint", G_CALLBACK(on_after_paint), &painted);
    gtk_widget_queue_draw(widget);
    g_assert_true(wait_for(is_true, &painted));
    g_signal_handler_disconnect(clock, id);
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

static void set_mode(ClWindow *win, const char *mode);

/* Zoomed in, the views draw only the texels of the overview in sight (a part sharing the
 * mip's pixels): every screen pixel still shows the image point under it, own and partner. */
static void test_mip_part(void)
{
    const int size = 4096; /* the overview: 2048, so 40 % zoom draws from it */
    g_autofree char *pa = g_build_filename(tmpdir, "gradient-a.png", NULL);
    g_autofree char *pb = g_build_filename(tmpdir, "gradient-b.png", NULL);
    write_gradient_png(pa, size, size, 0);
    write_gradient_png(pb, size, size, 1);
    const char *paths[] = {pa, pb};
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

    const char *paths[] = {path};
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

/* ---- compare modes and the model (issue 6) ---- */

/* Writes what the window shows to $CL_SCREENSHOT_DIR/name.png (test artefacts; skipped when the
 * variable is unset). */
static void save_screenshot(ClWindow *win, const char *name)
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
    GtkWidget *w = GTK_WIDGET(win);
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

static void set_mode(ClWindow *win, const char *mode)
{
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.compare-mode", "s", mode));
    g_assert_cmpstr(cl_window_get_compare_mode(win), ==, mode);
}

static gboolean diff_ready(gpointer data)
{
    return cl_image_view_get_changed_fraction(data) >= 0;
}

typedef struct {
    ClImageView *view;
    gboolean want;
} FlickerWait;

static gboolean flicker_shows(gpointer data)
{
    FlickerWait *f = data;
    return cl_image_view_get_showing_partner(f->view) == f->want;
}

/* Larger images with a shared scene and one change, for the compare modes and the model. */
static void write_scene_at(const char *path, gboolean changed, double dx, double dy)
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

static void write_scene(const char *path, gboolean changed)
{
    write_scene_at(path, changed, 0, 0);
}

static void test_compare_modes(void)
{
    const char *paths[] = {path_a, path_b};
    ClWindow *win = new_window_with(paths, 2);
    ClImageView *a = cl_window_get_view(win, 0), *b = cl_window_get_view(win, 1);
    g_assert_cmpstr(cl_window_get_compare_mode(win), ==, "side-by-side");
    g_assert_true(gtk_widget_is_visible(GTK_WIDGET(b)));

    /* swipe: one pane, the right one's image drawn into the left view */
    set_mode(win, "swipe");
    g_assert_cmpint(cl_image_view_get_compare_mode(a), ==, CL_COMPARE_SWIPE);
    g_assert_true(cl_image_view_get_partner(a) == b);
    g_assert_false(gtk_widget_is_visible(GTK_WIDGET(b)));
    cl_image_view_set_swipe_position(a, 0.3);
    g_assert_cmpfloat(cl_image_view_get_swipe_position(a), ==, 0.3);
    save_screenshot(win, "swipe");

    set_mode(win, "blend");
    g_assert_cmpint(cl_image_view_get_compare_mode(a), ==, CL_COMPARE_BLEND);

    /* flicker alternates the two images */
    set_mode(win, "flicker");
    cl_image_view_set_flicker_rate(a, CL_VIEW_MAX_FLICKER);
    FlickerWait fw = { a, TRUE };
    g_assert_true(wait_for(flicker_shows, &fw));
    fw.want = FALSE;
    g_assert_true(wait_for(flicker_shows, &fw));

    /* difference: red vs blue everywhere but the white squares, which line up once the larger
     * image is stretched onto the smaller (both at a quarter of the width and height) */
    set_mode(win, "difference");
    g_assert_true(wait_for(diff_ready, a));
    double f = cl_image_view_get_changed_fraction(a);
    g_assert_cmpfloat(f, >, 0.90);
    g_assert_cmpfloat(f, <, 0.97);
    save_screenshot(win, "difference");
    /* a tolerance above every difference leaves nothing changed */
    cl_image_view_set_tolerance(a, 255);
    g_assert_true(wait_for(diff_ready, a));
    g_assert_cmpfloat(cl_image_view_get_changed_fraction(a), ==, 0.0);

    set_mode(win, "side-by-side");
    g_assert_cmpint(cl_image_view_get_compare_mode(a), ==, CL_COMPARE_NONE);
    g_assert_null(cl_image_view_get_partner(a));
    g_assert_true(gtk_widget_is_visible(GTK_WIDGET(b)));
    gtk_window_destroy(GTK_WINDOW(win));
}

static gboolean not_describing(gpointer data)
{
    return !cl_window_get_describing(data);
}

/* The main loop's gaps, measured by a 5 ms timeout. For each gap it also reads what the main
 * thread did meanwhile (its CPU time, user and system, and its page faults): a long gap with
 * the thread on the CPU is the app's own work on the main thread; one with the thread off it is
 * waiting (the scheduler, the disk, a lock), which the log then says. */
typedef struct {
    gint64 last_us, start_us;
    gint64 last_cpu_ns;
    long last_majflt, last_minflt;
    double max_gap_ms;      /* wall clock */
    double max_gap_at_s;    /* when it ended, after start */
    double max_gap_cpu_ms;  /* the main thread's CPU time within that gap */
    long max_gap_majflt, max_gap_minflt;
    double max_cpu_ms;      /* the most CPU time the main thread spent within any one gap */
    guint ticks;
} Ticker;

static gint64 thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (gint64)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static gboolean tick(gpointer data)
{
    Ticker *t = data;
    gint64 now = g_get_monotonic_time(), cpu = thread_cpu_ns();
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    if (t->last_us) {
        double gap = (now - t->last_us) / 1000.0, gap_cpu = (cpu - t->last_cpu_ns) / 1e6;
        if (gap > t->max_gap_ms) {
            t->max_gap_ms = gap;
            t->max_gap_at_s = (now - t->start_us) / 1e6;
            t->max_gap_cpu_ms = gap_cpu;
            t->max_gap_majflt = ru.ru_majflt - t->last_majflt;
            t->max_gap_minflt = ru.ru_minflt - t->last_minflt;
        }
        t->max_cpu_ms = MAX(t->max_cpu_ms, gap_cpu);
        if (gap > 20 && g_getenv("CL_DEBUG_GAPS"))
            printf("# gap %.1f ms (main thread on CPU %.1f ms) at %.3f s\n", gap, gap_cpu,
                   now / 1e6);
    } else {
        t->start_us = now;
    }
    t->last_us = now;
    t->last_cpu_ns = cpu;
    t->last_majflt = ru.ru_majflt;
    t->last_minflt = ru.ru_minflt;
    t->ticks++;
    return G_SOURCE_CONTINUE;
}

/* The longest gap, and what the main thread did in it, for the log. */
static char *ticker_describe(const Ticker *t)
{
    return g_strdup_printf("%u main-loop ticks, longest gap %.1f ms (%.2f s in; main thread on "
                           "the CPU %.1f ms of it, %ld major and %ld minor page faults); most "
                           "main-thread CPU time in one gap %.1f ms",
                           t->ticks, t->max_gap_ms, t->max_gap_at_s, t->max_gap_cpu_ms,
                           t->max_gap_majflt, t->max_gap_minflt, t->max_cpu_ms);
}

static void test_describe(void)
{
    g_autofree char *before = g_build_filename(tmpdir, "scene-before.png", NULL);
    g_autofree char *after = g_build_filename(tmpdir, "scene-after.png", NULL);
    write_scene(before, FALSE);
    write_scene(after, TRUE);
    const char *paths[] = {before, after};
    ClWindow *win = new_window_with(paths, 2);
    ClImageView *b = cl_window_get_view(win, 1);
    g_assert_false(cl_window_get_describing(win));

    /* A first run shows the panel, its widgets and the heat map: with Xvfb's software GL the
     * first draw of each kind of node compiles shaders on the main thread (hundreds of ms, once
     * per process), which says nothing about the model run; the second run is measured. */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.describe", NULL));
    g_assert_true(wait_for(not_describing, win));
    save_screenshot(win, "warm-up");

    /* the window keeps drawing while the model runs: the main loop's longest gap is measured */
    Ticker t = { 0 };
    guint id = g_timeout_add(5, tick, &t);
    gint64 t0 = g_get_monotonic_time();
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.describe", NULL));
    g_assert_true(cl_window_get_describing(win));
    g_assert_true(wait_for(not_describing, win));
    double run_ms = (g_get_monotonic_time() - t0) / 1000.0;
    g_source_remove(id);
    g_autofree char *ticks = ticker_describe(&t);
    printf("# window: model run %.0f ms, %s (bounds: main-thread work under 50 ms and half "
           "the run, 250 ms in all)\n", run_ms, ticks);
    /* The model runs off the main thread, so the main thread's own work in any one gap stays
     * under 50 ms and under half the run (a run on the main thread would spend most of itself
     * within one gap, however fast the machine). The wall clock gets the wider bound of the
     * large pair's test below: a 50 ms wall bound here failed once with a training run sharing
     * the two cores, where the scheduler, not the app, holds the main loop up. */
    g_assert_cmpfloat(t.max_cpu_ms, <, MIN(50.0, run_ms / 2));
    g_assert_cmpfloat(t.max_gap_ms, <, 250.0);

    g_autofree char *text = cl_window_get_description(win);
    g_assert_cmpuint(strlen(text), >, 0);
    /* a sentence under the pointer: its own map over the later image; away: the run's again */
    g_assert_true(cl_window_highlight_sentence(win, 0));
    g_assert_cmpint(cl_window_get_highlighted_sentence(win), ==, 0);
    g_assert_true(cl_image_view_get_has_heatmap(cl_window_get_view(win, 1)));
    g_assert_false(cl_window_highlight_sentence(win, -1));
    g_assert_cmpint(cl_window_get_highlighted_sentence(win), ==, -1);
    g_assert_true(cl_window_get_show_heatmap(win));
    g_assert_true(cl_image_view_get_has_heatmap(b));
    /* every encoder block has its own map too */
    g_assert_cmpuint(cl_window_get_n_heat_layers(win), >=, 2);
    cl_window_set_heat_layer(win, 1);
    g_assert_true(cl_image_view_get_has_heatmap(b));
    cl_window_set_heat_layer(win, -1);
    save_screenshot(win, "describe-side-by-side");

    /* the heat map follows the later image into the overlaid modes */
    set_mode(win, "swipe");
    g_assert_true(cl_image_view_get_has_heatmap(cl_window_get_view(win, 0)));
    g_assert_false(cl_image_view_get_has_heatmap(b));
    save_screenshot(win, "describe-swipe");
    set_mode(win, "side-by-side");
    gtk_widget_activate_action(GTK_WIDGET(win), "win.show-heatmap", NULL); /* toggles off */
    g_assert_false(cl_window_get_show_heatmap(win));
    g_assert_false(cl_image_view_get_has_heatmap(b));

    /* stopping a run: it ends at once, the text so far stays editable */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.describe", NULL));
    g_assert_true(cl_window_get_describing(win));
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.stop-describe", NULL));
    g_assert_true(wait_for(not_describing, win));
    gtk_window_destroy(GTK_WINDOW(win));
}

/* ---- large images (issue 6: 10,000 × 10,000 16-bit, responsive, under 2 GB) ---- */

/* A 16-bit grey TIFF, tiled and deflated: a smooth gradient with fine texture, and with
 * `changed` a brighter block, so the difference has something to find. */
static void write_tiff16(const char *path, guint size, gboolean changed)
{
    TIFF *t = TIFFOpen(path, "w8");
    g_assert_nonnull(t);
    const guint tile = 512;
    TIFFSetField(t, TIFFTAG_IMAGEWIDTH, size);
    TIFFSetField(t, TIFFTAG_IMAGELENGTH, size);
    TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, 1);
    TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 16);
    TIFFSetField(t, TIFFTAG_SAMPLEFORMAT, SAMPLEFORMAT_UINT);
    TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(t, TIFFTAG_COMPRESSION, COMPRESSION_ADOBE_DEFLATE);
    TIFFSetField(t, TIFFTAG_ZIPQUALITY, 1);
    TIFFSetField(t, TIFFTAG_TILEWIDTH, tile);
    TIFFSetField(t, TIFFTAG_TILELENGTH, tile);
    g_autofree guint16 *buf = g_new(guint16, (gsize)tile * tile);
    for (guint ty = 0; ty < size; ty += tile)
        for (guint tx = 0; tx < size; tx += tile) {
            for (guint y = 0; y < tile; y++)
                for (guint x = 0; x < tile; x++) {
                    guint X = tx + x, Y = ty + y;
                    guint v = (X + Y) * 2 + ((X ^ Y) & 15);
                    if (changed && X >= size / 2 && X < size / 2 + size / 10 && Y >= size / 3 &&
                        Y < size / 3 + size / 10)
                        v += 20000;
                    buf[(gsize)y * tile + x] = (guint16)MIN(v, 65535u);
                }
            g_assert_cmpint(TIFFWriteTile(t, buf, tx, ty, 0, 0), >=, 0);
        }
    TIFFClose(t);
}

/* Peak resident memory of this process so far (VmHWM), in MiB. */
static double peak_rss_mib(void)
{
    g_autofree char *status = NULL;
    g_assert_true(g_file_get_contents("/proc/self/status", &status, NULL, NULL));
    const char *p = strstr(status, "VmHWM:");
    g_assert_nonnull(p);
    return g_ascii_strtod(p + 6, NULL) / 1024.0;
}

/* With CL_DEBUG_GAPS: frames that took over 8 ms, from the frame clock's before- to after-paint. */
static void frame_started(gint64 *t0)
{
    *t0 = g_get_monotonic_time();
}

static void frame_ended(gint64 *t0)
{
    gint64 now = g_get_monotonic_time();
    if (now - *t0 > 8000)
        printf("# frame %.1f ms ending %.3f\n", (now - *t0) / 1000.0, now / 1e6);
}

static void test_huge_pair(void)
{
    const guint size = 10000;
    g_autofree char *pa = g_build_filename(tmpdir, "huge-a.tif", NULL);
    g_autofree char *pb = g_build_filename(tmpdir, "huge-b.tif", NULL);
    gint64 t0 = g_get_monotonic_time();
    write_tiff16(pa, size, FALSE);
    write_tiff16(pb, size, TRUE);
    printf("# wrote two %u × %u 16-bit TIFFs in %.1f s\n", size, size,
           (g_get_monotonic_time() - t0) / 1e6);

    ClWindow *win = cl_window_new(NULL);
    gtk_window_set_default_size(GTK_WINDOW(win), 900, 600);
    gtk_window_present(GTK_WINDOW(win));
    for (int i = 0; i < 20; i++)
        g_main_context_iteration(NULL, FALSE);
    /* warm-up: a small pair through the same steps first, so that what a process does once
     * (the icon loaders and other modules it opens on first use, read from disk after the
     * large writes above) is not counted as the large pair's */
    {
        g_autofree char *sa = g_build_filename(tmpdir, "small-a.tif", NULL);
        g_autofree char *sb = g_build_filename(tmpdir, "small-b.tif", NULL);
        write_tiff16(sa, 512, FALSE);
        write_tiff16(sb, 512, TRUE);
        const char *small[] = {sa, sb};
        open_paths(win, small, 2);
        g_assert_true(wait_for(window_idle, win));
        set_mode(win, "difference");
        g_assert_true(wait_for(diff_ready, cl_window_get_view(win, 0)));
        set_mode(win, "side-by-side");
        for (int i = 0; i < 20; i++)
            g_main_context_iteration(NULL, FALSE);
        g_unlink(sa);
        g_unlink(sb);
    }

    static gint64 paint_t0;
    GdkFrameClock *fc = gtk_widget_get_frame_clock(GTK_WIDGET(win));
    if (g_getenv("CL_DEBUG_GAPS")) {
        g_signal_connect_swapped(fc, "before-paint", G_CALLBACK(frame_started), &paint_t0);
        g_signal_connect_swapped(fc, "after-paint", G_CALLBACK(frame_ended), &paint_t0);
    }
    /* the main loop's longest gap from the open to the difference and a full-resolution crop */
    Ticker t = { 0 };
    guint id = g_timeout_add(5, tick, &t);
    t0 = g_get_monotonic_time();
    const char *paths[] = {pa, pb};
    open_paths(win, paths, 2);
    g_assert_true(wait_for(window_idle, win));
    double open_s = (g_get_monotonic_time() - t0) / 1e6;
    if (g_getenv("CL_DEBUG_GAPS"))
        printf("# shown at %.3f s\n", g_get_monotonic_time() / 1e6);
    ClImageView *a = cl_window_get_view(win, 0);
    guint w, h;
    cl_image_view_get_image_size(a, &w, &h);
    g_assert_cmpuint(w, ==, size);
    g_assert_cmpuint(h, ==, size);
    /* the overview is bounded, whatever the image */
    GdkTexture *tex = cl_image_view_get_texture(a);
    g_assert_cmpint(gdk_texture_get_width(tex), <=, 2048);

    set_mode(win, "difference");
    g_assert_true(wait_for(diff_ready, a));
    if (g_getenv("CL_DEBUG_GAPS"))
        printf("# difference at %.3f s\n", g_get_monotonic_time() / 1e6);
    double f = cl_image_view_get_changed_fraction(a);
    g_assert_cmpfloat(f, >, 0.005); /* the changed block is 1 % of the area */
    g_assert_cmpfloat(f, <, 0.02);
    set_mode(win, "side-by-side");

    /* 100 % at the changed block: the crop is rendered off the main thread */
    cl_viewport_set(cl_image_view_get_viewport(a), 1.0, size * 0.55, size * 0.38);
    for (int i = 0; i < 200; i++) {
        g_main_context_iteration(NULL, FALSE);
        g_usleep(5000);
    }
    wait_for_paint(GTK_WIDGET(a));
    g_source_remove(id);
    double total_s = (g_get_monotonic_time() - t0) / 1e6;
    double peak = peak_rss_mib();
    g_autofree char *ticks = ticker_describe(&t);
    printf("# 10k × 10k 16-bit pair: shown in %.1f s; %.1f s with difference and 100 %% crop; "
           "%s; peak resident %.0f MiB (bounds: 50 ms of main-thread work, 250 ms in all, "
           "2048 MiB)\n",
           open_s, total_s, ticks, peak);
    g_assert_cmpfloat(peak, <, 2048.0);
    /* The app's own work on the main thread stays under 50 ms at a time. The wall clock gets a
     * wider bound: under Xvfb and the cairo renderer every frame makes round trips to the X
     * server, itself software-rendering on the same two cores, so while the pair's 400 MB are
     * decoded (and the disk is busy) a frame can wait on the server several times longer than
     * the app works. Measured: a CI run 139.6 ms; here, with a 3 GB write running alongside,
     * 54-76 ms gaps of which the main thread was on the CPU 3-5 ms, the rest waiting in poll()
     * for the server. 250 ms is still well short of a window that looks frozen. */
    g_assert_cmpfloat(t.max_cpu_ms, <, 50.0);
    g_assert_cmpfloat(t.max_gap_ms, <, 250.0);
    gtk_window_destroy(GTK_WINDOW(win));
    g_unlink(pa);
    g_unlink(pb);
}

/* ---- cases (issue 6: sidebar, demo cases, runs recorded, review with versions) ---- */

static gboolean not_exporting(gpointer data)
{
    return !cl_window_get_exporting(data);
}

typedef struct {
    ClWindow *win;
    gint64 id;
} CaseWait;

static gboolean case_is(gpointer data)
{
    CaseWait *w = data;
    return cl_window_get_case_id(w->win) == w->id;
}

static gboolean case_shown(gpointer data)
{
    ClWindow *win = data;
    return window_idle(win) && cl_image_view_get_document(cl_window_get_view(win, 0)) != NULL;
}

static void set_description_text(ClWindow *win, const char *text)
{
    /* the panel's editor, as a user types into it */
    GtkWidget *w = GTK_WIDGET(win);
    GtkTextView *tv = NULL;
    for (GtkWidget *c = w; c;) {
        if (GTK_IS_TEXT_VIEW(c)) {
            tv = GTK_TEXT_VIEW(c);
            break;
        }
        /* depth-first walk */
        GtkWidget *next = gtk_widget_get_first_child(c);
        while (!next && c && c != w) {
            next = gtk_widget_get_next_sibling(c);
            if (!next)
                c = gtk_widget_get_parent(c);
        }
        c = next;
    }
    g_assert_nonnull(tv);
    GtkTextBuffer *b = gtk_text_view_get_buffer(tv);
    gtk_text_buffer_set_text(b, text, -1);
    gtk_text_buffer_set_modified(b, TRUE);
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

    /* the reviewer edits and accepts: two new versions, the text kept as typed */
    set_description_text(win, "Edited by the reviewer: new finding at the right base.");
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.accept-description", NULL));
    g_clear_pointer(&c, cl_case_free);
    c = cl_casedb_get_case(db, first->id, CL_CASE_GET_DEFAULT, &error);
    v = cl_case_current_description(c);
    g_assert_cmpuint(v->version, ==, 3);
    g_assert_cmpint(v->status, ==, CL_DESC_ACCEPTED);
    g_assert_cmpstr(v->text, ==, "Edited by the reviewer: new finding at the right base.");

    /* the case's report, as the menu's Export Report writes it */
    g_autofree char *pdf = g_build_filename(tmpdir, "report.pdf", NULL);
    g_autoptr(GFile) pdf_file = g_file_new_for_path(pdf);
    cl_window_export_report(win, pdf_file);
    g_assert_true(cl_window_get_exporting(win));
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

    /* an edit left unsaved when another case is opened is kept, not lost */
    set_description_text(win, "A later thought, never saved by hand.");
    const ClCaseSummary *second = cases->pdata[1];
    cl_window_open_case(win, second->id);
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
    const char *paths[] = {before, after};
    open_paths(win, paths, 2);
    g_assert_true(wait_for(window_idle, win));
    g_autoptr(GPtrArray) now = cl_casedb_list(db, &error);
    g_assert_cmpuint(now->len, ==, 4);
    const ClCaseSummary *made = now->pdata[0];
    g_assert_cmpstr(made->name, ==, "scene-before.png and scene-after.png");
    g_assert_cmpuint(made->n_images, ==, 2);
    g_assert_cmpint(cl_window_get_case_id(win), ==, made->id);
    save_screenshot(win, "cases");
    gtk_window_destroy(GTK_WINDOW(win));
    for (int i = 0; i < 10; i++)
        g_main_context_iteration(NULL, FALSE);
    cl_casedb_close(db);
}

static gboolean views_idle(gpointer data)
{
    ClWindow *win = data;
    return !cl_image_view_get_loading(cl_window_get_view(win, 0)) &&
           !cl_image_view_get_loading(cl_window_get_view(win, 1)) && window_idle(win);
}

/* Bands of a multi-band image: any band to red, green and blue; one band alone in grey. */
static void test_bands(void)
{
    /* a 4-band 16-bit TIFF whose bands differ */
    g_autofree char *path = g_build_filename(tmpdir, "bands.tif", NULL);
    TIFF *t = TIFFOpen(path, "w");
    g_assert_nonnull(t);
    TIFFSetField(t, TIFFTAG_IMAGEWIDTH, 16);
    TIFFSetField(t, TIFFTAG_IMAGELENGTH, 16);
    TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, 4);
    TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 16);
    TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    guint16 extra = EXTRASAMPLE_UNSPECIFIED;
    guint16 extras[3] = { extra, extra, extra };
    TIFFSetField(t, TIFFTAG_EXTRASAMPLES, 3, extras);
    guint16 row[16 * 4];
    for (guint y = 0; y < 16; y++) {
        for (guint x = 0; x < 16; x++)
            for (guint b = 0; b < 4; b++)
                row[x * 4 + b] = (guint16)((b + 1) * 1000 + x * 100 * (b == 3 ? 1 : 0) + y * 10);
        g_assert_cmpint(TIFFWriteScanline(t, row, y, 0), ==, 1);
    }
    TIFFClose(t);
    const char *paths[] = {path, path};
    ClWindow *win = new_window_with(paths, 2);
    ClImageView *a = cl_window_get_view(win, 0);
    ClDisplaySettings s;
    g_assert_true(cl_image_view_get_display(a, &s));
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.display-preset", "s",
                                             "bands:4,3,2"));
    g_assert_true(wait_for(views_idle, win));
    g_assert_true(cl_image_view_get_display(a, &s));
    g_assert_cmpint(s.bands[0], ==, 3);
    g_assert_cmpint(s.bands[1], ==, 2);
    g_assert_cmpint(s.bands[2], ==, 1);
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.display-preset", "s",
                                             "bands:2"));
    g_assert_true(wait_for(views_idle, win));
    g_assert_true(cl_image_view_get_display(a, &s));
    g_assert_cmpint(s.bands[0], ==, 1);
    g_assert_cmpint(s.bands[2], ==, 1);
    /* a band the image does not have changes nothing */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.display-preset", "s",
                                             "bands:9"));
    g_assert_true(wait_for(views_idle, win));
    g_assert_true(cl_image_view_get_display(a, &s));
    g_assert_cmpint(s.bands[0], ==, 1);
    gtk_window_destroy(GTK_WINDOW(win));
}

/* Window/level: set on a view, followed by the linked one, presets on both. */
static void test_window_level(void)
{
    const char *demo = g_getenv("CL_DEMO_DIR");
    g_autofree char *pa = g_build_filename(demo, "radiograph", "before.dcm", NULL);
    g_autofree char *pb = g_build_filename(demo, "radiograph", "after.dcm", NULL);
    const char *paths[] = {pa, pb};
    ClWindow *win = new_window_with(paths, 2);
    ClImageView *a = cl_window_get_view(win, 0), *b = cl_window_get_view(win, 1);
    ClDisplaySettings s, sb;
    g_assert_true(cl_image_view_get_display(a, &s));
    guint32 before = texture_pixel(a, 160, 160);

    /* a narrow window, as a drag would set it: the picture changes, the other view follows */
    s.mode = CL_DISPLAY_WINDOW;
    double c0, w0;
    g_assert_true(cl_display_effective_window(
        cl_document_get_image(cl_image_view_get_document(a)), 0, &s, &c0, &w0));
    s.center = c0 + w0 / 4;
    s.width = w0 / 8;
    cl_image_view_set_display(a, &s);
    g_signal_emit_by_name(a, "display-changed");
    g_assert_true(wait_for(views_idle, win));
    ClDisplaySettings got;
    g_assert_true(cl_image_view_get_display(a, &got));
    g_assert_cmpint(got.mode, ==, CL_DISPLAY_WINDOW);
    g_assert_cmpfloat(got.width, ==, s.width);
    g_assert_true(texture_pixel(a, 160, 160) != before);
    g_assert_true(cl_image_view_get_display(b, &sb));
    g_assert_cmpint(sb.mode, ==, CL_DISPLAY_WINDOW);
    g_assert_cmpfloat(sb.center, ==, s.center);
    g_assert_cmpfloat(sb.width, ==, s.width);

    /* a preset goes to both views */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.display-preset", "s", "minmax"));
    g_assert_true(wait_for(views_idle, win));
    g_assert_true(cl_image_view_get_display(a, &got));
    g_assert_cmpint(got.mode, ==, CL_DISPLAY_MINMAX);
    g_assert_true(cl_image_view_get_display(b, &got));
    g_assert_cmpint(got.mode, ==, CL_DISPLAY_MINMAX);
    gtk_window_destroy(GTK_WINDOW(win));
}

static gboolean not_busy(gpointer data)
{
    return !cl_window_get_busy(data);
}

/* Align: a shifted later image is laid back over the earlier one; the difference shrinks to the
 * real change; Alt+arrow nudges move it by a pixel. */
static void test_align(void)
{
    g_autofree char *pa = g_build_filename(tmpdir, "align-a.png", NULL);
    g_autofree char *pb = g_build_filename(tmpdir, "align-b.png", NULL);
    write_scene_at(pa, FALSE, 0, 0);
    write_scene_at(pb, TRUE, 6, -4); /* the later shot is off by (6, -4) pixels */
    const char *paths[] = {pa, pb};
    ClWindow *win = new_window_with(paths, 2);
    ClImageView *a = cl_window_get_view(win, 0), *b = cl_window_get_view(win, 1);
    set_mode(win, "difference");
    g_assert_true(wait_for(diff_ready, a));
    double unaligned = cl_image_view_get_changed_fraction(a);

    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.align", NULL));
    g_assert_true(wait_for(not_busy, win));
    g_assert_true(cl_window_get_aligned(win));
    double m[6];
    g_assert_true(cl_image_view_get_alignment(b, m));
    g_test_message("alignment: shift (%.2f, %.2f), linear %.4f %.4f %.4f %.4f", m[0], m[3], m[1],
                   m[2], m[4], m[5]);
    g_assert_cmpfloat(fabs(m[0] - 6), <, 0.5);
    g_assert_cmpfloat(fabs(m[3] + 4), <, 0.5);
    g_assert_true(wait_for(diff_ready, a));
    double aligned = cl_image_view_get_changed_fraction(a);
    printf("# difference: %.1f %% of pixels changed unaligned, %.1f %% aligned (the real change "
           "is 6.4 %%)\n", unaligned * 100, aligned * 100);
    g_assert_cmpfloat(aligned, <, unaligned);
    g_assert_cmpfloat(aligned, <, 0.10);
    save_screenshot(win, "difference-aligned");

    /* the model reads the later image aligned (Preferences: on by default) */
    set_mode(win, "side-by-side");
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.describe", NULL));
    g_assert_true(wait_for(not_describing, win));
    g_assert_true(cl_image_view_get_has_heatmap(b));
    save_screenshot(win, "describe-aligned");
    set_mode(win, "difference");

    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.nudge", "(ii)", 1, 0));
    double n[6];
    g_assert_true(cl_image_view_get_alignment(b, n));
    g_assert_cmpfloat(fabs(n[0] - (m[0] - m[1])), <, 1e-9);

    /* off: the images as they are */
    set_mode(win, "side-by-side"); /* the mode is remembered for the next window */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.align", NULL));
    g_assert_false(cl_window_get_aligned(win));
    g_assert_false(cl_image_view_get_alignment(b, NULL));
    gtk_window_destroy(GTK_WINDOW(win));
}

/* Ignore regions: left out of the difference, shown on both views, cleared by the action. */
static void test_masks(void)
{
    g_autofree char *pa = g_build_filename(tmpdir, "mask-a.png", NULL);
    g_autofree char *pb = g_build_filename(tmpdir, "mask-b.png", NULL);
    write_scene(pa, FALSE);
    write_scene(pb, TRUE); /* the change: a 70 × 70 square at (200, 50) */
    const char *paths[] = {pa, pb};
    ClWindow *win = new_window_with(paths, 2);
    ClImageView *a = cl_window_get_view(win, 0), *b = cl_window_get_view(win, 1);
    set_mode(win, "difference");
    g_assert_true(wait_for(diff_ready, a));
    double before = cl_image_view_get_changed_fraction(a);
    g_assert_cmpfloat(before, >, 0.05);

    cl_window_add_mask(win, 195, 45, 275, 125);
    g_assert_cmpuint(cl_window_get_n_masks(win), ==, 1);
    g_assert_cmpuint(cl_image_view_get_n_masks(a), ==, 1);
    g_assert_cmpuint(cl_image_view_get_n_masks(b), ==, 1);
    g_assert_true(wait_for(diff_ready, a));
    double after = cl_image_view_get_changed_fraction(a);
    printf("# difference: %.2f %% changed, %.2f %% with the change masked\n", before * 100,
           after * 100);
    g_assert_cmpfloat(after, <, 0.002);
    save_screenshot(win, "difference-masked");

    /* the model runs with them (its input masked: tests/test-describe.c /masks) */
    set_mode(win, "side-by-side");
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.describe", NULL));
    g_assert_true(wait_for(not_describing, win));

    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.clear-masks", NULL));
    g_assert_cmpuint(cl_window_get_n_masks(win), ==, 0);
    g_assert_cmpuint(cl_image_view_get_n_masks(b), ==, 0);
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
    const char *paths[] = {p1, p2, p3};
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

/* One import of two photo pairs makes two cases (same file stem, version words dropped). */
static void test_import_pairs(void)
{
    g_autofree char *db_path = g_build_filename(tmpdir, "pairs.db", NULL);
    g_autoptr(GError) error = NULL;
    ClCaseDb *db = cl_casedb_open(db_path, CL_CASEDB_OPEN_DEFAULT, &error);
    g_assert_no_error(error);
    const char *names[] = { "harbour-before.png", "garden-before.png", "harbour-after.png",
                            "garden-after.png" };
    char *paths[4];
    for (int i = 0; i < 4; i++) {
        paths[i] = g_build_filename(tmpdir, names[i], NULL);
        write_scene_at(paths[i], i >= 2, 0, 0);
    }
    ClWindow *win = cl_window_new(NULL);
    gtk_window_present(GTK_WINDOW(win));
    cl_window_set_case_db(win, db);
    open_paths(win, (const char *const *)paths, 4);
    g_assert_true(wait_for(window_idle, win));
    g_assert_true(wait_for(case_shown, win));
    g_autoptr(GPtrArray) list = cl_casedb_list(db, &error);
    g_assert_cmpuint(list->len, ==, 2);
    for (guint i = 0; i < 2; i++) {
        const ClCaseSummary *cs = list->pdata[i];
        g_assert_cmpuint(cs->n_images, ==, 2);
        g_assert_true(g_str_has_suffix(cs->name, "-after.png"));
    }
    /* the first pair is the one shown, as its own case */
    g_assert_cmpuint(cl_window_get_n_sequence(win), ==, 2);
    g_assert_cmpstr(cl_document_get_name(cl_image_view_get_document(cl_window_get_view(win, 0))),
                    ==, "harbour-before.png");
    gtk_window_destroy(GTK_WINDOW(win));
    for (int i = 0; i < 10; i++)
        g_main_context_iteration(NULL, FALSE);
    cl_casedb_close(db);
    for (int i = 0; i < 4; i++)
        g_free(paths[i]);
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

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    tmpdir = cl_fixture_tmpdir("cl-test-ui");

    /* Isolate the per-user dirs (settings, recent files, caches) but keep the system data dirs:
     * without shared-mime-info and the icon themes GTK cannot even load its own SVG icons. */
    const char *user_dirs[] = {"HOME",           "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                               "XDG_CACHE_HOME", "XDG_STATE_HOME",  "XDG_RUNTIME_DIR"};
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
    g_autoptr(GtkCssProvider) css = gtk_css_provider_new();
    gtk_css_provider_load_from_resource(css, "/io/changelens/ChangeLens/style.css");
    gtk_style_context_add_provider_for_display(gdk_display_get_default(), GTK_STYLE_PROVIDER(css),
                                               GTK_STYLE_PROVIDER_PRIORITY_APPLICATION);

    path_a = g_build_filename(tmpdir, "a.png", NULL);
    path_b = g_build_filename(tmpdir, "b.png", NULL);
    if (!write_png(path_a, 64, 48, 1, 0, 0) || !write_png(path_b, 80, 60, 0, 0, 1)) {
        g_printerr("cannot write test images into %s\n", tmpdir);
        return 1;
    }

    g_test_add_func("/ui/viewport/math", test_viewport_math);
    g_test_add_func("/ui/resources", test_resources);
    g_test_add_func("/ui/window/load-two", test_load_two);
    g_test_add_func("/ui/window/link-views", test_link_views);
    g_test_add_func("/ui/window/newer-open-wins", test_newer_open_wins);
    g_test_add_func("/ui/window/failed-open-keeps-images", test_failed_open_keeps_images);
    g_test_add_func("/ui/window/multi-frame", test_multi_frame);
    g_test_add_func("/ui/window/dicom-order", test_dicom_order);
    g_test_add_func("/ui/window/large-image", test_large_image);
    g_test_add_func("/ui/window/mip-part", test_mip_part);
    g_test_add_func("/ui/view/nearest-when-zoomed", test_nearest_when_zoomed);
    g_test_add_func("/ui/window/open-dialog", test_open_dialog);
    g_test_add_func("/ui/window/compare-modes", test_compare_modes);
    g_test_add_func("/ui/window/describe", test_describe);
    g_test_add_func("/ui/window/huge-pair", test_huge_pair);
    g_test_add_func("/ui/window/cases", test_cases);
    g_test_add_func("/ui/window/window-level", test_window_level);
    g_test_add_func("/ui/window/bands", test_bands);
    g_test_add_func("/ui/window/align", test_align);
    g_test_add_func("/ui/window/masks", test_masks);
    g_test_add_func("/ui/preferences", test_preferences);
    g_test_add_func("/ui/window/filmstrip", test_filmstrip);
    g_test_add_func("/ui/window/import-pairs", test_import_pairs);
    int rc = g_test_run();

    cl_fixture_rmdir(tmpdir);
    g_free(tmpdir);
    g_free(path_a);
    g_free(path_b);
    return rc;
}
