/* test-ui-compare.c - The compare view under a display: the compare modes (swipe, blend, flicker,
 * difference), window/level and bands, alignment and its nudges, the ignore regions. */
#include "ui-util.h"

#include "fixtures.h"
#include "image/loaders.h"
#include "image/measure.h"
#include "model/effnet.h"
#include "model/model.h"
#include <gdal.h>

#include <math.h>
#include <stdio.h>
#include <tiffio.h>

typedef struct {
    ClImageView *view;
    gboolean want;
} FlickerWait;

static gboolean flicker_shows(gpointer data)
{
    FlickerWait *f = data;
    return cl_image_view_get_showing_partner(f->view) == f->want;
}

static void test_compare_modes(void)
{
    const char *paths[] = { path_a, path_b };
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
    const char *paths[] = { path, path };
    ClWindow *win = new_window_with(paths, 2);
    ClImageView *a = cl_window_get_view(win, 0);
    ClDisplaySettings s;
    g_assert_true(cl_image_view_get_display(a, &s));
    g_assert_true(
        gtk_widget_activate_action(GTK_WIDGET(win), "win.display-preset", "s", "bands:4,3,2"));
    g_assert_true(wait_for(views_idle, win));
    g_assert_true(cl_image_view_get_display(a, &s));
    g_assert_cmpint(s.bands[0], ==, 3);
    g_assert_cmpint(s.bands[1], ==, 2);
    g_assert_cmpint(s.bands[2], ==, 1);
    g_assert_true(
        gtk_widget_activate_action(GTK_WIDGET(win), "win.display-preset", "s", "bands:2"));
    g_assert_true(wait_for(views_idle, win));
    g_assert_true(cl_image_view_get_display(a, &s));
    g_assert_cmpint(s.bands[0], ==, 1);
    g_assert_cmpint(s.bands[2], ==, 1);
    /* a band the image does not have changes nothing */
    g_assert_true(
        gtk_widget_activate_action(GTK_WIDGET(win), "win.display-preset", "s", "bands:9"));
    g_assert_true(wait_for(views_idle, win));
    g_assert_true(cl_image_view_get_display(a, &s));
    g_assert_cmpint(s.bands[0], ==, 1);
    gtk_window_destroy(GTK_WINDOW(win));
}

/* A 32 × 32 4-band 16-bit raster: the left half "grass" (the same values in every date), the
 * right half a ramp from lo to hi, so that each date's own 2-98 % stretch differs. */
static void write_dated_raster(const char *path, guint16 lo, guint16 hi)
{
    TIFF *t = TIFFOpen(path, "w");
    g_assert_nonnull(t);
    TIFFSetField(t, TIFFTAG_IMAGEWIDTH, 32);
    TIFFSetField(t, TIFFTAG_IMAGELENGTH, 32);
    TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, 4);
    TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 16);
    TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    guint16 extra = EXTRASAMPLE_UNSPECIFIED;
    guint16 extras[3] = { extra, extra, extra };
    TIFFSetField(t, TIFFTAG_EXTRASAMPLES, 3, extras);
    const guint16 grass[4] = { 1200, 2400, 900, 1500 };
    guint16 row[32 * 4];
    for (guint y = 0; y < 32; y++) {
        for (guint x = 0; x < 32; x++)
            for (guint b = 0; b < 4; b++)
                row[x * 4 + b] =
                    x < 16
                        ? grass[b]
                        : (guint16)(lo + (hi - lo) * ((x - 16) * 32 + y + b * 7) / (16 * 32 + 21));
        g_assert_cmpint(TIFFWriteScanline(t, row, y, 0), ==, 1);
    }
    TIFFClose(t);
}

static gboolean diff_done(gpointer data)
{
    ClWindow *win = data;
    return views_idle(win) && diff_ready(cl_window_get_view(win, 0));
}

/* Two dates of a 16-bit multi-band raster with different value ranges: by default the stretch is
 * taken over both, so the identical grass shows the same colour in both views and the difference
 * leaves it out; each image stretched on its own (the old behaviour) it would not. */
static void test_shared_stretch(void)
{
    g_autofree char *p2023 = g_build_filename(tmpdir, "tile-2023.tif", NULL);
    g_autofree char *p2024 = g_build_filename(tmpdir, "tile-2024.tif", NULL);
    write_dated_raster(p2023, 100, 500);
    write_dated_raster(p2024, 3000, 9000);
    const char *paths[] = { p2023, p2024 };
    ClWindow *win = new_window_with(paths, 2);
    ClImageView *a = cl_window_get_view(win, 0), *b = cl_window_get_view(win, 1);
    g_assert_true(wait_for(views_idle, win));
    ClDisplaySettings s;
    g_assert_true(cl_image_view_get_display(a, &s));
    g_assert_cmpint(s.mode, ==, CL_DISPLAY_PERCENTILE);
    /* the grass: one colour in both views, at every pixel of it */
    for (int y = 0; y < 32; y += 5)
        for (int x = 0; x < 16; x += 3)
            g_assert_cmphex(texture_pixel(a, x, y), ==, texture_pixel(b, x, y));
    /* and not a flat grey or black: the shared stretch still spreads the values */
    guint32 g = texture_pixel(a, 2, 2);
    g_assert_cmphex(g, !=, texture_pixel(a, 20, 2));
    set_mode(win, "difference");
    g_assert_true(wait_for(diff_done, win));
    double shared_changed = cl_image_view_get_changed_fraction(a);
    g_test_message("shared stretch: grass %08x, %.1f %% changed", g, shared_changed * 100);
    /* the ramp half differs, the grass half does not */
    g_assert_cmpfloat(shared_changed, <=, 0.51);
    g_assert_cmpfloat(shared_changed, >=, 0.3);

    /* each image on its own: the grass differs between the dates (the defect) */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(a), "view.stretch", "s", "each"));
    g_assert_true(wait_for(diff_done, win));
    g_assert_cmphex(texture_pixel(a, 2, 2), !=, texture_pixel(b, 2, 2));
    double own_changed = cl_image_view_get_changed_fraction(a);
    g_test_message("each its own: %08x and %08x, %.1f %% changed", texture_pixel(a, 2, 2),
                   texture_pixel(b, 2, 2), own_changed * 100);
    g_assert_cmpfloat(own_changed, >, 0.9);
    g_autoptr(GSettings) settings = g_settings_new("io.changelens.ChangeLens");
    g_assert_cmpstr(g_settings_get_string(settings, "stretch"), ==, "each");

    /* a chosen reference: both views stretched as the later image, identical grass again */
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(a), "view.stretch", "s", "later"));
    g_assert_true(wait_for(diff_done, win));
    set_mode(win, "side-by-side");
    g_assert_true(wait_for(views_idle, win));
    g_assert_cmphex(texture_pixel(a, 2, 2), ==, texture_pixel(b, 2, 2));
    g_settings_reset(settings, "stretch");
    gtk_window_destroy(GTK_WINDOW(win));
}

/* The difference on a georeferenced pair (the demo's aerial tiles, 320 × 320 pixels of 0.25 m):
 * the changed share also as ground area. */
static void test_changed_area(void)
{
    const char *demo = g_getenv("CL_DEMO_DIR");
    g_autofree char *pa = g_build_filename(demo, "aerial", "before.tif", NULL);
    g_autofree char *pb = g_build_filename(demo, "aerial", "after.tif", NULL);
    const char *paths[] = { pa, pb };
    ClWindow *win = new_window_with(paths, 2);
    ClImageView *a = cl_window_get_view(win, 0);
    set_mode(win, "difference");
    g_assert_true(wait_for(diff_done, win));
    const double f = cl_image_view_get_changed_fraction(a);
    g_assert_cmpfloat(f, >, 0);
    const char *label = label_containing(GTK_WIDGET(win), "of pixels differ");
    g_assert_nonnull(label);
    g_autofree char *area = cl_measure_area_text(CL_MEASURE_M, f * 320 * 320 * 0.25 * 0.25);
    g_test_message("%s", label);
    g_assert_true(g_str_has_suffix(label, area));
    g_assert_nonnull(strstr(label, " m²"));
    gtk_window_destroy(GTK_WINDOW(win));
}

static gboolean not_geo_exporting(gpointer data)
{
    return !cl_window_get_geo_exporting(CL_WINDOW(data));
}

/* The change map for GIS: after a model run on the georeferenced demo tiles, the heat map, its
 * mask and the changed regions on the later tile's own grid (GDAL reads back its size, CRS and
 * geotransform); nothing to export before a run, nor for an image without georeferencing. */
static void test_export_change_map(void)
{
    const char *demo = g_getenv("CL_DEMO_DIR");
    g_autofree char *pa = g_build_filename(demo, "aerial", "before.tif", NULL);
    g_autofree char *pb = g_build_filename(demo, "aerial", "after.tif", NULL);
    const char *paths[] = { pa, pb };
    ClWindow *win = new_window_with(paths, 2);
    g_assert_false(cl_window_can_export_change_map(win));
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.describe", NULL));
    g_assert_true(wait_for(not_describing, win));
    g_assert_true(cl_window_can_export_change_map(win));
    g_autofree char *dir = g_dir_make_tmp("cl-geoexport-XXXXXX", NULL);
    g_autofree char *out = g_build_filename(dir, "tile-change.tif", NULL);
    g_autoptr(GFile) file = g_file_new_for_path(out);
    cl_window_export_change_map(win, file);
    g_assert_true(wait_for(not_geo_exporting, win));
    g_assert_true(cl_window_get_last_geo_export_ok(win));
    g_assert_nonnull(label_containing(GTK_WIDGET(win), "Change map saved as tile-change.tif"));
    g_autofree char *mask = g_build_filename(dir, "tile-change-mask.tif", NULL);
    g_autofree char *gpkg = g_build_filename(dir, "tile-change-regions.gpkg", NULL);
    g_assert_true(g_file_test(gpkg, G_FILE_TEST_IS_REGULAR));
    cl_gdal_init();
    for (int k = 0; k < 2; k++) {
        GDALDatasetH a = GDALOpen(k ? mask : out, GA_ReadOnly), b = GDALOpen(pb, GA_ReadOnly);
        g_assert_nonnull(a);
        g_assert_nonnull(b);
        g_assert_cmpint(GDALGetRasterXSize(a), ==, GDALGetRasterXSize(b));
        g_assert_cmpint(GDALGetRasterYSize(a), ==, GDALGetRasterYSize(b));
        g_assert_cmpstr(GDALGetProjectionRef(a), ==, GDALGetProjectionRef(b));
        double ta[6], tb[6];
        g_assert_cmpint(GDALGetGeoTransform(a, ta), ==, CE_None);
        g_assert_cmpint(GDALGetGeoTransform(b, tb), ==, CE_None);
        for (int i = 0; i < 6; i++)
            g_assert_cmpfloat(ta[i], ==, tb[i]);
        g_assert_cmpint(GDALGetRasterDataType(GDALGetRasterBand(a, 1)), ==,
                        k ? GDT_Byte : GDT_Float32);
        GDALClose(a);
        GDALClose(b);
    }
    save_screenshot(win, "aerial-change-map");
    gtk_window_destroy(GTK_WINDOW(win));
    cl_fixture_rmdir(dir);

    /* radiographs have no map grid: nothing to export after a run either */
    g_autofree char *ra = g_build_filename(demo, "radiograph", "before.dcm", NULL);
    g_autofree char *rb = g_build_filename(demo, "radiograph", "after.dcm", NULL);
    const char *rpaths[] = { ra, rb };
    win = new_window_with(rpaths, 2);
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.describe", NULL));
    g_assert_true(wait_for(not_describing, win));
    g_assert_false(cl_window_can_export_change_map(win));
    gtk_window_destroy(GTK_WINDOW(win));
}

/* The three workflows as their users see them, each checked and saved as a screenshot
 * (docs/screenshots/workflow-*.png): a radiologist's aligned difference of the demo chest films
 * with a measurement and the corner overlays; an analyst's swipe between the demo tiles after a
 * model run (shared stretch, the heat map, the changed area in the difference's label); a
 * reviewer's difference of the demo photo and its edit with the heat map and the description. */
static void test_workflows(void)
{
    const char *demo = g_getenv("CL_DEMO_DIR");
    /* radiology */
    g_autofree char *ra = g_build_filename(demo, "radiograph", "before.dcm", NULL);
    g_autofree char *rb = g_build_filename(demo, "radiograph", "after.dcm", NULL);
    const char *rpaths[] = { ra, rb };
    ClWindow *win = new_window_with(rpaths, 2);
    gtk_window_set_default_size(GTK_WINDOW(win), 1200, 760);
    ClImageView *a = cl_window_get_view(win, 0);
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.align", NULL));
    g_assert_true(wait_for(not_busy, win));
    g_assert_true(cl_window_get_aligned(win));
    set_mode(win, "difference");
    g_assert_true(wait_for(diff_done, win));
    cl_image_view_measure(a, CL_VIEW_MEASURE_LENGTH, 110, 150, 210, 150);
    g_assert_nonnull(strstr(cl_image_view_get_measurement(a), " mm"));
    g_autofree char *patient = cl_image_view_get_overlay_text(a, CL_VIEW_TOP_LEFT);
    g_assert_nonnull(strstr(patient, "SYNTH"));
    wait_for_paint(GTK_WIDGET(a));
    save_screenshot(win, "workflow-radiology");
    /* the model on the demo films (with the pretrained stem: the radiograph-and-aerial model):
     * the sentence its note names, and the findings its object head sees in the panel */
    g_autofree char *stem = cl_pretrained_path(CL_EFFNET_FILE);
    if (g_file_test(stem, G_FILE_TEST_EXISTS)) {
        g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.describe", NULL));
        g_assert_true(wait_for(not_describing, win));
        g_autofree char *said = cl_window_get_description(win);
        g_assert_cmpstr(said, ==,
                        "the main image has an additional finding of hernia than the reference "
                        "image. the main image is missing the finding of edema than the reference "
                        "image.");
        g_assert_nonnull(
            label_containing(GTK_WIDGET(win), "Findings seen added: hernia; missing: edema"));
    }
    gtk_window_destroy(GTK_WINDOW(win));

    /* remote sensing */
    g_autofree char *pa = g_build_filename(demo, "aerial", "before.tif", NULL);
    g_autofree char *pb = g_build_filename(demo, "aerial", "after.tif", NULL);
    const char *apaths[] = { pa, pb };
    win = new_window_with(apaths, 2);
    gtk_window_set_default_size(GTK_WINDOW(win), 1200, 760);
    set_mode(win, "difference");
    g_assert_true(wait_for(diff_done, win));
    g_assert_nonnull(label_containing(GTK_WIDGET(win), " m²"));
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.describe", NULL));
    g_assert_true(wait_for(not_describing, win));
    set_mode(win, "swipe");
    g_assert_true(wait_for(views_idle, win));
    g_assert_true(cl_window_can_export_change_map(win));
    save_screenshot(win, "workflow-remote-sensing");
    gtk_window_destroy(GTK_WINDOW(win));

    /* the same tiles on a 2.5 m grid (GDAL copies with the pixel size ten times the demo's): the
     * difference's changed area in square metres and hectares */
    cl_gdal_init();
    g_autofree char *dir = g_dir_make_tmp("cl-workflow-XXXXXX", NULL);
    const char *src[2] = { pa, pb };
    char *big[2];
    for (int k = 0; k < 2; k++) {
        big[k] = g_build_filename(dir, k ? "after-2.5m.tif" : "before-2.5m.tif", NULL);
        GDALDatasetH in = GDALOpen(src[k], GA_ReadOnly);
        g_assert_nonnull(in);
        GDALDatasetH out =
            GDALCreateCopy(GDALGetDriverByName("GTiff"), big[k], in, FALSE, NULL, NULL, NULL);
        g_assert_nonnull(out);
        double t[6];
        g_assert_cmpint(GDALGetGeoTransform(in, t), ==, CE_None);
        t[1] *= 10, t[5] *= 10;
        GDALSetGeoTransform(out, t);
        GDALClose(out);
        GDALClose(in);
    }
    const char *bpaths[] = { big[0], big[1] };
    win = new_window_with(bpaths, 2);
    gtk_window_set_default_size(GTK_WINDOW(win), 1200, 760);
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.align", NULL));
    g_assert_true(wait_for(not_busy, win));
    set_mode(win, "difference");
    g_assert_true(wait_for(diff_done, win));
    g_assert_nonnull(label_containing(GTK_WIDGET(win), " ha)"));
    save_screenshot(win, "workflow-remote-sensing-area");
    gtk_window_destroy(GTK_WINDOW(win));
    for (int k = 0; k < 2; k++)
        g_free(big[k]);
    cl_fixture_rmdir(dir);

    /* photo edit */
    g_autofree char *ea = g_build_filename(demo, "edits", "before.png", NULL);
    g_autofree char *eb = g_build_filename(demo, "edits", "after.png", NULL);
    const char *epaths[] = { ea, eb };
    win = new_window_with(epaths, 2);
    gtk_window_set_default_size(GTK_WINDOW(win), 1200, 760);
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.describe", NULL));
    g_assert_true(wait_for(not_describing, win));
    g_autofree char *text = cl_window_get_description(win);
    g_assert_cmpstr(text, !=, "");
    set_mode(win, "difference");
    g_assert_true(wait_for(diff_done, win));
    g_assert_true(cl_window_get_show_heatmap(win));
    save_screenshot(win, "workflow-photo-edit");
    gtk_window_destroy(GTK_WINDOW(win));
}

/* Undo beyond the text: an ignore region, a nudge, a window/level drag and a preset undone one by
 * one back to the view as it was opened, redone again; a new edit after an undo drops the redo;
 * another pair starts with nothing to undo. */
static void test_undo(void)
{
    const char *demo = g_getenv("CL_DEMO_DIR");
    g_autofree char *ra = g_build_filename(demo, "radiograph", "before.dcm", NULL);
    g_autofree char *rb = g_build_filename(demo, "radiograph", "after.dcm", NULL);
    const char *paths[] = { ra, rb };
    ClWindow *win = new_window_with(paths, 2);
    ClImageView *a = cl_window_get_view(win, 0), *b = cl_window_get_view(win, 1);
    g_assert_false(cl_window_can_undo(win));
    ClDisplaySettings d0, d1, d2, now;
    g_assert_true(cl_image_view_get_display(a, &d0));
    double m[6];

    g_signal_emit_by_name(a, "mask-drawn", 10.0, 10.0, 60.0, 50.0);
    g_assert_cmpuint(cl_window_get_n_masks(win), ==, 1);
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.nudge", "(ii)", 3, -2));
    g_assert_true(cl_image_view_get_alignment(b, m));
    g_assert_cmpfloat(fabs(m[0] + 3), <, 1e-9);
    g_signal_emit_by_name(a, "window-level-begin");
    d1 = d0;
    d1.mode = CL_DISPLAY_WINDOW, d1.center = 1500, d1.width = 700;
    cl_image_view_set_display(a, &d1);
    g_signal_emit_by_name(a, "display-changed");
    g_assert_true(
        gtk_widget_activate_action(GTK_WIDGET(win), "win.display-preset", "s", "window:40:400"));
    g_assert_true(cl_image_view_get_display(a, &d2));
    g_assert_cmpfloat(d2.width, ==, 400);

    /* back, step by step */
    g_assert_true(cl_window_undo(win)); /* the preset */
    g_assert_true(cl_image_view_get_display(a, &now));
    g_assert_cmpfloat(now.center, ==, 1500);
    g_assert_cmpfloat(now.width, ==, 700);
    g_assert_true(cl_window_undo(win)); /* the drag */
    g_assert_true(cl_image_view_get_display(a, &now));
    g_assert_cmpint(now.mode, ==, d0.mode);
    g_assert_cmpfloat(now.width, ==, d0.width);
    g_assert_true(cl_image_view_get_alignment(b, m)); /* the nudge is still there */
    g_assert_true(cl_window_undo(win));               /* the nudge */
    g_assert_false(cl_image_view_get_alignment(b, m) && fabs(m[0]) > 1e-9);
    g_assert_false(cl_window_get_aligned(win));
    g_assert_cmpuint(cl_window_get_n_masks(win), ==, 1);
    g_assert_true(cl_window_undo(win)); /* the region */
    g_assert_cmpuint(cl_window_get_n_masks(win), ==, 0);
    g_assert_false(cl_window_can_undo(win));
    g_assert_false(cl_window_undo(win));

    /* and forward again */
    g_assert_true(cl_window_can_redo(win));
    for (int i = 0; i < 4; i++)
        g_assert_true(cl_window_redo(win));
    g_assert_false(cl_window_redo(win));
    g_assert_cmpuint(cl_window_get_n_masks(win), ==, 1);
    g_assert_true(cl_image_view_get_alignment(b, m));
    g_assert_cmpfloat(fabs(m[0] + 3), <, 1e-9);
    g_assert_true(cl_window_get_aligned(win));
    g_assert_true(cl_image_view_get_display(a, &now));
    g_assert_cmpfloat(now.width, ==, 400);

    /* a new edit after an undo: nothing to redo */
    g_assert_true(cl_window_undo(win));
    g_assert_true(gtk_widget_activate_action(GTK_WIDGET(win), "win.clear-masks", NULL));
    g_assert_false(cl_window_can_redo(win));
    g_assert_true(cl_window_undo(win));
    g_assert_cmpuint(cl_window_get_n_masks(win), ==, 1);
    gtk_window_destroy(GTK_WINDOW(win));
}

/* Window/level: set on a view, followed by the linked one, presets on both. */
static void test_window_level(void)
{
    const char *demo = g_getenv("CL_DEMO_DIR");
    g_autofree char *pa = g_build_filename(demo, "radiograph", "before.dcm", NULL);
    g_autofree char *pb = g_build_filename(demo, "radiograph", "after.dcm", NULL);
    const char *paths[] = { pa, pb };
    ClWindow *win = new_window_with(paths, 2);
    ClImageView *a = cl_window_get_view(win, 0), *b = cl_window_get_view(win, 1);
    ClDisplaySettings s, sb;
    g_assert_true(cl_image_view_get_display(a, &s));
    guint32 before = texture_pixel(a, 160, 160);

    /* a narrow window, as a drag would set it: the picture changes, the other view follows */
    s.mode = CL_DISPLAY_WINDOW;
    double c0, w0;
    g_assert_true(cl_display_effective_window(cl_document_get_image(cl_image_view_get_document(a)),
                                              0, &s, &c0, &w0));
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

/* Align: a shifted later image is laid back over the earlier one; the difference shrinks to the
 * real change; Alt+arrow nudges move it by a pixel. */
static void test_align(void)
{
    g_autofree char *pa = g_build_filename(tmpdir, "align-a.png", NULL);
    g_autofree char *pb = g_build_filename(tmpdir, "align-b.png", NULL);
    write_scene_at(pa, FALSE, 0, 0);
    write_scene_at(pb, TRUE, 6, -4); /* the later shot is off by (6, -4) pixels */
    const char *paths[] = { pa, pb };
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
           "is 6.4 %%)\n",
           unaligned * 100, aligned * 100);
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
    const char *paths[] = { pa, pb };
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

void test_ui_compare_register(void)
{
    g_test_add_func("/ui/window/compare-modes", test_compare_modes);
    g_test_add_func("/ui/window/window-level", test_window_level);
    g_test_add_func("/ui/window/bands", test_bands);
    g_test_add_func("/ui/window/shared-stretch", test_shared_stretch);
    g_test_add_func("/ui/window/changed-area", test_changed_area);
    g_test_add_func("/ui/window/export-change-map", test_export_change_map);
    g_test_add_func("/ui/window/workflows", test_workflows);
    g_test_add_func("/ui/window/undo", test_undo);
    g_test_add_func("/ui/window/align", test_align);
    g_test_add_func("/ui/window/masks", test_masks);
}
