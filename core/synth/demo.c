/* demo.c - the demo case rendered with Cairo: what `./run.sh` opens on a fresh checkout. */
#include "synth/demo.h"

#include <cairo.h>
#include <errno.h>
#include <glib/gstdio.h>
#include <math.h>

#define DEMO_SIZE 512

static void building(cairo_t *cr, double x, double y, double w, double h, double shade)
{
    cairo_set_source_rgb(cr, 0.25 * shade, 0.23 * shade, 0.22 * shade); /* shadow */
    cairo_rectangle(cr, x + 4, y + 4, w, h);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0.72 * shade, 0.42 * shade, 0.36 * shade); /* roof */
    cairo_rectangle(cr, x, y, w, h);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0.55 * shade, 0.30 * shade, 0.27 * shade); /* ridge */
    cairo_set_line_width(cr, 2);
    cairo_move_to(cr, x, y + h / 2);
    cairo_line_to(cr, x + w, y + h / 2);
    cairo_stroke(cr);
}

static void tree(cairo_t *cr, double x, double y, double r, double shade)
{
    cairo_set_source_rgb(cr, 0.08 * shade, 0.30 * shade, 0.10 * shade);
    cairo_arc(cr, x, y, r, 0, 2 * G_PI);
    cairo_fill(cr);
}

static void render(cairo_t *cr, gboolean after)
{
    /* "after" is acquired in slightly brighter light, shifted by (2, 1) pixels */
    double shade = after ? 1.08 : 1.0;
    if (after)
        cairo_translate(cr, 2, 1);

    GRand *rand = g_rand_new_with_seed(20261121);
    /* fields in a grid of slightly different crops */
    for (int j = -1; j < 5; j++)
        for (int i = -1; i < 5; i++) {
            double g = 0.45 + 0.2 * g_rand_double(rand);
            cairo_set_source_rgb(cr, (0.35 + 0.15 * g_rand_double(rand)) * shade, g * shade,
                                 0.22 * shade);
            cairo_rectangle(cr, i * 128, j * 128, 128, 128);
            cairo_fill(cr);
            /* furrows */
            cairo_set_source_rgba(cr, 0, 0, 0, 0.06);
            for (int k = 0; k < 128; k += 8) {
                cairo_rectangle(cr, i * 128, j * 128 + k, 128, 2);
                cairo_fill(cr);
            }
        }
    /* river */
    cairo_set_source_rgb(cr, 0.16 * shade, 0.32 * shade, 0.52 * shade);
    cairo_set_line_width(cr, 22);
    cairo_move_to(cr, -20, 420);
    cairo_curve_to(cr, 150, 360, 260, 500, 540, 430);
    cairo_stroke(cr);
    /* main road */
    cairo_set_source_rgb(cr, 0.62 * shade, 0.61 * shade, 0.58 * shade);
    cairo_set_line_width(cr, 14);
    cairo_move_to(cr, 250, -20);
    cairo_line_to(cr, 270, 540);
    cairo_stroke(cr);
    /* village */
    building(cr, 290, 60, 40, 28, shade);
    building(cr, 300, 110, 34, 34, shade);
    building(cr, 200, 80, 30, 40, shade);
    building(cr, 190, 150, 44, 26, shade);
    /* tree groups */
    for (int k = 0; k < 14; k++)
        tree(cr, 80 + g_rand_double_range(rand, -30, 30), 120 + g_rand_double_range(rand, -30, 30),
             7 + 4 * g_rand_double(rand), shade);
    double grove[12][3];
    for (int k = 0; k < 12; k++) {
        grove[k][0] = 400 + g_rand_double_range(rand, -35, 35);
        grove[k][1] = 250 + g_rand_double_range(rand, -25, 25);
        grove[k][2] = 6 + 4 * g_rand_double(rand);
    }
    if (!after) /* the eastern grove is cleared in the later tile */
        for (int k = 0; k < 12; k++)
            tree(cr, grove[k][0], grove[k][1], grove[k][2], shade);
    else {
        cairo_set_source_rgb(cr, 0.55 * shade, 0.45 * shade, 0.30 * shade); /* bare soil */
        cairo_rectangle(cr, 360, 222, 82, 58);
        cairo_fill(cr);
    }
    if (after) {
        /* a new building with its access road */
        cairo_set_source_rgb(cr, 0.62 * shade, 0.61 * shade, 0.58 * shade);
        cairo_set_line_width(cr, 8);
        cairo_move_to(cr, 264, 330);
        cairo_line_to(cr, 370, 320);
        cairo_stroke(cr);
        building(cr, 370, 296, 56, 44, shade);
    }
    g_rand_free(rand);
}

gboolean cl_synth_demo_pair(const char *dir, GError **error)
{
    if (g_mkdir_with_parents(dir, 0755) != 0) {
        int e = errno;
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(e), "cannot create %s: %s", dir,
                    g_strerror(e));
        return FALSE;
    }
    const char *names[2] = { "before.png", "after.png" };
    for (int k = 0; k < 2; k++) {
        cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, DEMO_SIZE, DEMO_SIZE);
        cairo_t *cr = cairo_create(s);
        render(cr, k == 1);
        cairo_destroy(cr);
        g_autofree char *path = g_build_filename(dir, names[k], NULL);
        cairo_status_t st = cairo_surface_write_to_png(s, path);
        cairo_surface_destroy(s);
        if (st != CAIRO_STATUS_SUCCESS) {
            g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "cannot write %s: %s", path,
                        cairo_status_to_string(st));
            return FALSE;
        }
    }
    return TRUE;
}
