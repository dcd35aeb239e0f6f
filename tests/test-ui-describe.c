/* test-ui-describe.c - The model in the window: a run streams into the description panel with the
 * main loop kept responsive, sentences tie to regions, heat maps per encoder block; and a pair of
 * 10,000 × 10,000 16-bit images shown responsively in under 2 GB. */
#include "ui-util.h"

#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <tiffio.h>
#include <time.h>

/* The main loop's gaps, measured by a 5 ms timeout. For each gap it also reads what the main
 * thread did meanwhile (its CPU time, user and system, and its page faults): a long gap with
 * the thread on the CPU is the app's own work on the main thread; one with the thread off it is
 * waiting (the scheduler, the disk, a lock), which the log then says. */
typedef struct {
    gint64 last_us, start_us;
    gint64 last_cpu_ns;
    long last_majflt, last_minflt;
    double max_gap_ms;     /* wall clock */
    double max_gap_at_s;   /* when it ended, after start */
    double max_gap_cpu_ms; /* the main thread's CPU time within that gap */
    long max_gap_majflt, max_gap_minflt;
    double max_cpu_ms; /* the most CPU time the main thread spent within any one gap */
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
    const char *paths[] = { before, after };
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
           "the run, 250 ms in all)\n",
           run_ms, ticks);
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
    /* the update norms' map has one per encoder block too (a change head's is one map: the
     * photo model's, which a user's app picks for these photographs, has no layers) */
    if (cl_window_get_n_heat_layers(win) == 0) {
        g_autoptr(GSettings) settings = g_settings_new("io.changelens.ChangeLens");
        g_settings_set_string(settings, "heatmap-source", "update-norm");
        g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.describe", NULL));
        g_assert_true(wait_for(not_describing, win));
        g_settings_reset(settings, "heatmap-source");
    }
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
        const char *small[] = { sa, sb };
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
    const char *paths[] = { pa, pb };
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

void test_ui_describe_register(void)
{
    g_test_add_func("/ui/window/describe", test_describe);
    g_test_add_func("/ui/window/huge-pair", test_huge_pair);
}
