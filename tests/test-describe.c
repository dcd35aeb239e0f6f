/* test-describe.c - the describe pipeline: preprocessing (letterbox, resampling, display values),
 * heatmaps (grids, mapping back, colours, PNG), domain detection, and `changelens-cli describe`
 * end to end on PNG, DICOM and multi-page TIFF fixtures with a random-init model. */
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>

#include "model/describe.h"
#include "model/effnet.h"
#include "fixtures.h"
#include "model/heatmap.h"
#include "model/preprocess.h"

/* ---- helpers ------------------------------------------------------------------------------ */

/* An 8-bit (or 16-bit) image in memory with given channel values. */
static ClImage *mem_image(guint w, guint h, ClChannelLayout layout, guint channels, guint bits)
{
    ClImage *img = cl_image_new(CL_IMAGE_FORMAT_PNG);
    img->width = w;
    img->height = h;
    img->channels = channels;
    img->layout = layout;
    img->bits = bits;
    img->bits_allocated = bits;
    img->sample_format = CL_SAMPLE_UINT;
    g_autoptr(GError) error = NULL;
    g_assert_true(cl_image_alloc_frames(img, 1, &error));
    ClFrame *f = g_ptr_array_index(img->frames, 0);
    f->rescale_slope = 1;
    f->rescale_intercept = 0;
    return img;
}

#define S_EPS 1e-6f

/* ---- preprocess --------------------------------------------------------------------------- */

static void test_letterbox(void)
{
    ClLetterbox lb;
    cl_letterbox_init(&lb, 320, 160, 160);
    g_assert_cmpint(lb.content_w, ==, 160);
    g_assert_cmpint(lb.content_h, ==, 80);
    g_assert_cmpint(lb.off_x, ==, 0);
    g_assert_cmpint(lb.off_y, ==, 40);
    g_assert_cmpfloat(fabs(lb.scale_x - 0.5), <, 1e-12);

    cl_letterbox_init(&lb, 23, 37, 160); /* portrait, enlarged */
    g_assert_cmpint(lb.content_h, ==, 160);
    g_assert_cmpint(lb.content_w, ==, (int)lround(23 * 160.0 / 37));
    g_assert_cmpint(lb.off_x, ==, (160 - lb.content_w) / 2);
    g_assert_cmpint(lb.off_y, ==, 0);

    cl_letterbox_init(&lb, 257, 3, 160); /* extreme: 2 rows of content */
    g_assert_cmpint(lb.content_w, ==, 160);
    g_assert_cmpint(lb.content_h, >=, 1);
    double mx, my, x, y;
    cl_letterbox_image_to_model(&lb, 100.5, 1.5, &mx, &my);
    cl_letterbox_model_to_image(&lb, mx, my, &x, &y);
    g_assert_cmpfloat(fabs(x - 100.5), <, 1e-9);
    g_assert_cmpfloat(fabs(y - 1.5), <, 1e-9);
    cl_letterbox_image_to_model(&lb, 0, 0, &mx, &my);
    g_assert_cmpfloat(mx, ==, lb.off_x);
    g_assert_cmpfloat(my, ==, lb.off_y);
    cl_letterbox_image_to_model(&lb, 257, 3, &mx, &my);
    g_assert_cmpfloat(fabs(mx - (lb.off_x + lb.content_w)), <, 1e-9);
    g_assert_cmpfloat(fabs(my - (lb.off_y + lb.content_h)), <, 1e-9);
}

static void test_resize(void)
{
    /* enlarging 2 -> 4 is bilinear with half-pixel centres, edges clamped */
    const float src[2] = { 0, 1 };
    float dst[4];
    cl_preprocess_resize(src, 1, 2, 1, dst, 4, 1);
    const float want[4] = { 0, 0.25f, 0.75f, 1 };
    for (int i = 0; i < 4; i++)
        g_assert_cmpfloat(fabs(dst[i] - want[i]), <, S_EPS);

    /* shrinking 3 -> 2 is an area average: [0, 1.5) and [1.5, 3) */
    const float s3[3] = { 0, 3, 6 };
    float d2[2];
    cl_preprocess_resize(s3, 1, 3, 1, d2, 2, 1);
    g_assert_cmpfloat(fabs(d2[0] - (0 + 1.5f) / 1.5f), <, S_EPS); /* (0*1 + 3*0.5) / 1.5 */
    g_assert_cmpfloat(fabs(d2[1] - (1.5f + 6) / 1.5f), <, S_EPS); /* (3*0.5 + 6*1) / 1.5 */

    /* a 2 x 2 checkerboard averages to its mean when halved; identity keeps values */
    const float cb[8] = { 0, 1, 1, 0, /* plane 2: */ 4, 4, 4, 4 };
    float one[2];
    cl_preprocess_resize(cb, 2, 2, 2, one, 1, 1);
    g_assert_cmpfloat(fabs(one[0] - 0.5f), <, S_EPS);
    g_assert_cmpfloat(fabs(one[1] - 4), <, S_EPS);
    float same[8];
    cl_preprocess_resize(cb, 2, 2, 2, same, 2, 2);
    for (int i = 0; i < 8; i++)
        g_assert_cmpfloat(same[i], ==, cb[i]);
}

/* The fitted display values are the resized planes, bit for bit, for any size: a 16-bit grey
 * image with a percentile stretch (ranges resolved once for every stripe) and an RGB one, over
 * more rows than one stripe. */
static void test_display_fit(void)
{
    const struct {
        ClChannelLayout layout;
        guint channels, bits, w, h, dw, dh;
    } cases[] = {
        { CL_LAYOUT_GREY, 1, 16, 97, 300, 40, 123 },
        { CL_LAYOUT_RGB, 3, 8, 301, 260, 150, 7 },
        { CL_LAYOUT_RGB, 3, 8, 64, 64, 64, 64 },
    };
    for (guint t = 0; t < G_N_ELEMENTS(cases); t++) {
        g_autoptr(ClImage) img =
            mem_image(cases[t].w, cases[t].h, cases[t].layout, cases[t].channels, cases[t].bits);
        ClFrame *f = g_ptr_array_index(img->frames, 0);
        const gsize n = (gsize)cases[t].w * cases[t].h * cases[t].channels;
        guint32 r = 12345 + t;
        for (gsize i = 0; i < n; i++) {
            r = r * 1664525u + 1013904223u;
            if (cases[t].bits == 16)
                ((guint16 *)f->data)[i] = (guint16)(r >> 16);
            else
                ((guint8 *)f->data)[i] = (guint8)(r >> 24);
        }
        g_autoptr(GError) error = NULL;
        g_autofree float *full = cl_preprocess_display(img, 0, NULL, &error);
        g_assert_no_error(error);
        const guint dw = cases[t].dw, dh = cases[t].dh;
        g_autofree float *want = g_new(float, 3 * (gsize)dw * dh);
        cl_preprocess_resize(full, 3, (int)cases[t].w, (int)cases[t].h, want, (int)dw, (int)dh);
        g_autofree float *got = cl_preprocess_display_fit(img, 0, NULL, dw, dh, &error);
        g_assert_no_error(error);
        g_assert_cmpmem(got, sizeof(float) * 3 * dw * dh, want, sizeof(float) * 3 * dw * dh);
        g_assert_null(cl_preprocess_display_fit(img, 3, NULL, dw, dh, &error));
        g_assert_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_INVALID);
    }
}

static void test_preprocess_values(void)
{
    g_autoptr(GError) error = NULL;
    const int S = 16;
    float *out = g_new(float, 3 * S * S);

    /* a 32 x 16 white grey image: content rows 4..11 are +1, the padding 0 */
    g_autoptr(ClImage) white = mem_image(32, 16, CL_LAYOUT_GREY, 1, 8);
    float *p = cl_image_plane(white, 0, 0);
    for (guint i = 0; i < 32 * 16; i++)
        p[i] = 255;
    ClLetterbox lb;
    g_assert_true(cl_preprocess_image(white, 0, NULL, S, 3, out, &lb, &error));
    g_assert_no_error(error);
    g_assert_cmpint(lb.off_y, ==, 4);
    g_assert_cmpint(lb.content_h, ==, 8);
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < S; y++)
            for (int x = 0; x < S; x++) {
                float v = out[(c * S + y) * S + x];
                g_assert_cmpfloat(v, ==, (y >= 4 && y < 12) ? 1.0f : 0.0f);
            }

    /* a 16-bit image at the input size: values are the display levels (2-98 % stretch) / 255,
     * normalised, exactly (no resampling at equal sizes) */
    g_autoptr(ClImage) g16 = mem_image(S, S, CL_LAYOUT_GREY, 1, 16);
    p = cl_image_plane(g16, 0, 0);
    for (int i = 0; i < S * S; i++)
        p[i] = (float)((i * 7919) % 65536);
    g_assert_true(cl_preprocess_image(g16, 0, NULL, S, 3, out, &lb, &error));
    ClDisplaySettings ds;
    cl_display_settings_init(&ds, g16, 0);
    g_autofree guint8 *rgba = cl_display_render_rgba(g16, 0, &ds, &error);
    g_assert_nonnull(rgba);
    for (int i = 0; i < S * S; i++)
        for (int c = 0; c < 3; c++)
            g_assert_cmpfloat(fabs(out[c * S * S + i] - (rgba[i * 4 + c] / 255.0f - 0.5f) / 0.5f),
                              <, S_EPS);

    /* RGB with alpha: alpha dropped, channels kept; 1 channel = BT.601 luma */
    g_autoptr(ClImage) rgba8 = mem_image(S, S, CL_LAYOUT_RGBA, 4, 8);
    const float col[4] = { 255, 0, 51, 0 }; /* fully transparent: alpha must not matter */
    for (int c = 0; c < 4; c++) {
        p = cl_image_plane(rgba8, 0, (guint)c);
        for (int i = 0; i < S * S; i++)
            p[i] = col[c];
    }
    g_assert_true(cl_preprocess_image(rgba8, 0, NULL, S, 3, out, NULL, &error));
    for (int c = 0; c < 3; c++)
        g_assert_cmpfloat(fabs(out[c * S * S + 37] - (col[c] / 255 - 0.5f) / 0.5f), <, S_EPS);
    g_assert_true(cl_preprocess_image(rgba8, 0, NULL, S, 1, out, NULL, &error));
    float luma = 0.299f * 1 + 0.587f * 0 + 0.114f * 0.2f;
    g_assert_cmpfloat(fabs(out[37] - (luma - 0.5f) / 0.5f), <, 1e-5);

    /* display values as planes */
    g_autofree float *dv = cl_preprocess_display(rgba8, 0, NULL, &error);
    g_assert_nonnull(dv);
    g_assert_cmpfloat(fabs(dv[0] - 1), <, S_EPS);
    g_assert_cmpfloat(fabs(dv[S * S] - 0), <, S_EPS);
    g_assert_cmpfloat(fabs(dv[2 * S * S] - 0.2f), <, S_EPS);

    /* errors */
    g_assert_false(cl_preprocess_image(white, 1, NULL, S, 3, out, NULL, &error));
    g_assert_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_INVALID);
    g_clear_error(&error);
    g_assert_false(cl_preprocess_image(white, 0, NULL, S, 2, out, NULL, &error));
    g_assert_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT);
    g_clear_error(&error);
    g_free(out);
}

/* ---- heatmaps ----------------------------------------------------------------------------- */

static void test_heatmap_grid(void)
{
    const int G = 4, depth = 2, N = G * G;
    ClEncoderOutput eo;
    memset(&eo, 0, sizeof eo);
    eo.grid = G;
    eo.n_patches = N;
    eo.n_visual = N / 4;
    eo.update_norm = g_new0(float, depth *N);
    eo.update_norm[5] = 2;     /* block 0, patch 5 */
    eo.update_norm[N + 5] = 4; /* block 1, patch 5 */
    eo.update_norm[N + 0] = 1;
    g_autoptr(GError) error = NULL;
    g_autoptr(ClHeatmap) hm =
        cl_heatmap_new_from_encoder(&eo, depth, CL_HEATMAP_UPDATE_NORM, 1, &error);
    g_assert_no_error(error);
    g_assert_cmpint(hm->width, ==, G);
    g_assert_cmpfloat(hm->values[5], ==, 3);
    g_assert_cmpfloat(hm->values[0], ==, 0.5f);
    g_assert_cmpfloat(hm->max, ==, 3);
    g_assert_cmpint(hm->image_index, ==, 1);

    /* no Δ computed: an error, not a crash */
    g_assert_null(cl_heatmap_new_from_encoder(&eo, depth, CL_HEATMAP_DELTA, 1, &error));
    g_assert_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT);
    g_clear_error(&error);
    eo.delta = g_new0(float, N / 4);
    eo.delta[3] = 0.25f;
    g_autoptr(ClHeatmap) dm = cl_heatmap_new_from_encoder(&eo, depth, CL_HEATMAP_DELTA, 2, &error);
    g_assert_cmpint(dm->width, ==, G / 2);
    g_assert_cmpfloat(dm->max, ==, 0.25f);
    g_free(eo.update_norm);
    g_free(eo.delta);

    /* mapped back: a 32 x 32 image at S = 32 (identity letterbox), cells of 8 pixels; the centre
     * of cell (1, 1) carries the full heat, far cells none */
    ClLetterbox lb;
    cl_letterbox_init(&lb, 32, 32, 32);
    g_autofree float *heat = cl_heatmap_to_image(hm, &lb);
    /* pixel 11's centre 11.5 is grid 0.9375 on both axes: bilinear between cells 0 and 1
     * (row 0: 0.5, 0; row 1: 0, 3), over the max 3 */
    double top = 0.5 + 0.9375 * (0 - 0.5), bot = 0 + 0.9375 * 3;
    double want = (top + 0.9375 * (bot - top)) / 3;
    g_assert_cmpfloat(fabs(heat[11 * 32 + 11] - want), <, 1e-6);
    g_assert_cmpfloat(fabs(heat[12 * 32 + 12] - heat[11 * 32 + 11]), <, 0.05);
    g_assert_cmpfloat(heat[31 * 32 + 31], ==, 0);
    for (int i = 0; i < 32 * 32; i++)
        g_assert_true(heat[i] >= 0 && heat[i] <= 1);

    /* a letterboxed 64 x 16 image: its point (x, y) is model (x / 2, 12 + y / 2) */
    cl_letterbox_init(&lb, 64, 16, 32);
    g_autofree float *heat2 = cl_heatmap_to_image(hm, &lb);
    /* model (11.75, 12.25) is about 4 px from cell (1, 1)'s centre (12, 12): high heat */
    g_assert_cmpfloat(heat2[0 * 64 + 23], >, 0.8f);
    g_assert_cmpfloat(heat2[15 * 64 + 63], ==, 0.0f);
}

static void test_heatmap_colour_png(void)
{
    guint8 c[3], d[3];
    /* the other colour maps: their ends, and inferno is the default */
    cl_heatmap_colour_map(CL_HEATMAP_VIRIDIS, 0, c);
    g_assert_true(c[0] == 68 && c[1] == 1 && c[2] == 84);
    cl_heatmap_colour_map(CL_HEATMAP_REDS, 1, c);
    g_assert_true(c[0] == 255 && c[1] == 240 && c[2] == 80);
    for (double v = 0; v <= 1.0; v += 0.1) {
        cl_heatmap_colour_map(CL_HEATMAP_INFERNO, v, c);
        cl_heatmap_colour(v, d);
        g_assert_true(c[0] == d[0] && c[1] == d[1] && c[2] == d[2]);
    }
    cl_heatmap_colour(0, c);
    g_assert_cmpint(c[0], ==, 0);
    g_assert_cmpint(c[2], ==, 4);
    cl_heatmap_colour(1, c);
    g_assert_cmpint(c[0], ==, 252);
    g_assert_cmpint(c[1], ==, 255);
    cl_heatmap_colour(NAN, c);
    g_assert_cmpint(c[0], ==, 0);
    /* luminance increases along the ramp (perceptual maps are monotone in lightness) */
    double prev = -1;
    for (int i = 0; i <= 20; i++) {
        cl_heatmap_colour(i / 20.0, c);
        double l = 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
        g_assert_cmpfloat(l, >, prev);
        prev = l;
    }

    /* overlay of a 40 x 20 mid-grey image with heat in one corner only; written and read back */
    g_autoptr(ClImage) img = mem_image(40, 20, CL_LAYOUT_GREY, 1, 8);
    float *p = cl_image_plane(img, 0, 0);
    for (int i = 0; i < 40 * 20; i++)
        p[i] = 128;
    ClHeatmap hm = { CL_HEATMAP_UPDATE_NORM, 1, 2, 2, NULL, 0 };
    float vals[4] = { 1, 0, 0, 0 };
    hm.values = vals;
    hm.max = 1;
    ClLetterbox lb;
    cl_letterbox_init(&lb, 40, 20, 32);
    g_autofree char *dir = cl_fixture_tmpdir("cl-test-describe");
    g_autofree char *path = g_build_filename(dir, "overlay.png", NULL);
    g_autoptr(GError) error = NULL;
    g_assert_true(cl_heatmap_write_png(&hm, &lb, img, 0, NULL, 0.6, path, &error));
    g_assert_no_error(error);
    g_autoptr(ClImage) back = cl_image_load(path, NULL, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(back->width, ==, 40);
    g_assert_cmpuint(back->height, ==, 20);
    g_assert_cmpuint(back->channels, ==, 3);
    /* far corner: no heat, the grey image itself */
    for (guint c2 = 0; c2 < 3; c2++)
        g_assert_cmpfloat(cl_image_plane(back, 0, c2)[19 * 40 + 39], ==, 128);
    /* hot corner: blended towards the hot colour (yellow-white: red up, blue below red) */
    float r = cl_image_plane(back, 0, 0)[0], b = cl_image_plane(back, 0, 2)[0];
    g_assert_cmpfloat(r, >, 128);
    g_assert_cmpfloat(b, <, r);

    /* a size mismatch between letterbox and image is refused */
    cl_letterbox_init(&lb, 41, 20, 32);
    g_assert_false(cl_heatmap_write_png(&hm, &lb, img, 0, NULL, 0.6, path, &error));
    g_assert_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT);
    g_clear_error(&error);
    /* an unwritable path fails with a message naming it */
    g_autofree char *bad = g_build_filename(dir, "no-such-dir", "x.png", NULL);
    cl_letterbox_init(&lb, 40, 20, 32);
    g_assert_false(cl_heatmap_write_png(&hm, &lb, img, 0, NULL, 0.6, bad, &error));
    g_assert_nonnull(error);
    g_assert_nonnull(strstr(error->message, "no-such-dir"));
    g_clear_error(&error);
    cl_fixture_rmdir(dir);
}

static void test_domain(void)
{
    g_autoptr(ClImage) rgb = mem_image(4, 4, CL_LAYOUT_RGB, 3, 8);
    g_assert_cmpint(cl_describe_detect_domain(rgb), ==, CL_CHAT_DOMAIN_EDITS);
    g_autoptr(ClImage) grey = mem_image(4, 4, CL_LAYOUT_GREY, 1, 16);
    g_assert_cmpint(cl_describe_detect_domain(grey), ==, CL_CHAT_DOMAIN_GENERIC);
    grey->format = CL_IMAGE_FORMAT_DICOM;
    grey->modality = g_strdup("DX");
    g_assert_cmpint(cl_describe_detect_domain(grey), ==, CL_CHAT_DOMAIN_RADIOGRAPH);
    g_free(grey->modality);
    grey->modality = g_strdup("CT");
    g_assert_cmpint(cl_describe_detect_domain(grey), ==, CL_CHAT_DOMAIN_GENERIC);
    rgb->format = CL_IMAGE_FORMAT_TIFF;
    rgb->geo = g_new0(ClGeoInfo, 1);
    g_assert_cmpint(cl_describe_detect_domain(rgb), ==, CL_CHAT_DOMAIN_AERIAL);
}

/* ---- the CLI ------------------------------------------------------------------------------ */

static const char *cli_path(void)
{
    const char *p = g_getenv("CL_CLI");
    g_assert_nonnull(p); /* set by tests/meson.build */
    return p;
}

/* Runs `changelens-cli describe ARGS…` (NULL-terminated) with env overrides (may be NULL). */
static int run_describe(const char *const *env_set, char **out, char **err, ...)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, (char *)cli_path());
    g_ptr_array_add(argv, "describe");
    va_list ap;
    va_start(ap, err);
    const char *a;
    while ((a = va_arg(ap, const char *)))
        g_ptr_array_add(argv, (char *)a);
    va_end(ap);
    g_ptr_array_add(argv, NULL);
    g_auto(GStrv) envp = g_get_environ();
    envp = g_environ_unsetenv(envp, "CHANGELENS_MODEL");
    for (int i = 0; env_set && env_set[i]; i += 2)
        envp = g_environ_setenv(envp, env_set[i], env_set[i + 1], TRUE);
    int status = 0;
    g_autoptr(GError) error = NULL;
    gint64 t0 = g_get_monotonic_time();
    gboolean ok = g_spawn_sync(NULL, (char **)argv->pdata, envp, G_SPAWN_DEFAULT, NULL, NULL, out,
                               err, &status, &error);
    g_assert_no_error(error);
    g_assert_true(ok);
    g_test_message("describe took %.2f s; stderr:\n%s", (g_get_monotonic_time() - t0) / 1e6,
                   err ? *err : "");
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    g_error("changelens-cli died: status %d; stderr: %s", status, err ? *err : "");
    return -1;
}

typedef struct {
    char *dir;
    GPtrArray *fixtures;
} Fx;

static Fx fx;

static const char *fixture(const char *suffix)
{
    const ClFixture *f = cl_fixture_find(fx.fixtures, suffix);
    g_assert_nonnull(f);
    return f->path;
}

/* Runs describe --json on the files and checks the report and the heatmap PNGs. */
static void check_describe(const char *name, guint n_images, const char *const *files,
                           guint n_files, const char *domain, gboolean delta)
{
    g_autofree char *prefix = g_build_filename(fx.dir, name, NULL);
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, (char *)cli_path());
    const char *fixed[] = { "describe", "--random-init", "tiny", "--seed",
                            "1",        "--max-tokens",  "6",    "--device",
                            "cpu",      "--heatmap",     prefix, "--json" };
    for (guint i = 0; i < G_N_ELEMENTS(fixed); i++)
        g_ptr_array_add(argv, (char *)fixed[i]);
    if (delta)
        g_ptr_array_add(argv, "--delta");
    for (guint i = 0; i < n_files; i++)
        g_ptr_array_add(argv, (char *)files[i]);
    g_ptr_array_add(argv, NULL);
    g_autofree char *out = NULL, *err = NULL;
    int status = 0;
    g_autoptr(GError) error = NULL;
    gint64 t0 = g_get_monotonic_time();
    g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                               &err, &status, &error));
    g_test_message("%s: %.2f s; stderr:\n%s", name, (g_get_monotonic_time() - t0) / 1e6, err);
    g_assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) != 0)
        g_error("%s: exit %d: %s", name, WEXITSTATUS(status), err);

    g_autoptr(JsonParser) parser = json_parser_new();
    g_assert_true(json_parser_load_from_data(parser, out, -1, &error));
    g_assert_no_error(error);
    JsonObject *o = json_node_get_object(json_parser_get_root(parser));
    g_assert_true(json_object_has_member(o, "text"));
    g_assert_nonnull(json_object_get_string_member(o, "text"));
    JsonArray *tokens = json_object_get_array_member(o, "tokens");
    g_assert_nonnull(tokens);
    g_assert_cmpuint(json_array_get_length(tokens), <=, 6);
    JsonObject *tm = json_object_get_object_member(o, "timings");
    g_assert_nonnull(tm);
    for (guint i = 0; i < 4; i++) {
        const char *k[] = { "load_ms", "preprocess_ms", "prefill_ms", "decode_ms" };
        g_assert_true(json_object_has_member(tm, k[i]));
        g_assert_cmpfloat(json_object_get_double_member(tm, k[i]), >=, 0);
    }
    g_assert_cmpuint(json_array_get_length(json_object_get_array_member(tm, "encode_ms")), ==,
                     n_images);
    JsonObject *model = json_object_get_object_member(o, "model");
    g_assert_cmpstr(json_object_get_string_member(model, "description"), ==,
                    "random-init tiny seed 1");
    g_assert_cmpstr(json_object_get_string_member(o, "device"), ==, "cpu");
    g_assert_cmpstr(json_object_get_string_member(o, "domain"), ==, domain);

    JsonArray *images = json_object_get_array_member(o, "images");
    g_assert_cmpuint(json_array_get_length(images), ==, n_images);
    JsonArray *hms = json_object_get_array_member(o, "heatmaps");
    g_assert_cmpuint(json_array_get_length(hms), ==, n_images - 1);
    for (guint i = 0; i + 1 < n_images; i++) {
        JsonObject *h = json_array_get_object_element(hms, i);
        g_assert_cmpint(json_object_get_int_member(h, "image"), ==, i + 2);
        gint64 w = json_object_get_int_member(h, "width"),
               hh = json_object_get_int_member(h, "height");
        /* tiny: a 160 / 16 = 10 patch grid, 5 x 5 after the merger (the Δ map) */
        g_assert_cmpint(w, ==, delta ? 5 : 10);
        g_assert_cmpint(hh, ==, delta ? 5 : 10);
        g_assert_cmpstr(json_object_get_string_member(h, "source"), ==,
                        delta ? "delta" : "update_norm");
        JsonArray *vals = json_object_get_array_member(h, "values");
        g_assert_cmpuint(json_array_get_length(vals), ==, (guint)(w * hh));
        /* the overlay: at the original image's size */
        g_autofree char *png = g_strdup_printf("%s-%u.png", prefix, i + 2);
        g_assert_cmpstr(json_object_get_string_member(h, "file"), ==, png);
        g_assert_true(g_file_test(png, G_FILE_TEST_IS_REGULAR));
        g_assert_nonnull(strstr(err, png)); /* said on stderr */
        JsonObject *im = json_array_get_object_element(images, i + 1);
        g_autoptr(ClImage) ov = cl_image_load(png, NULL, &error);
        g_assert_no_error(error);
        g_assert_cmpint(ov->width, ==, json_object_get_int_member(im, "width"));
        g_assert_cmpint(ov->height, ==, json_object_get_int_member(im, "height"));
        g_assert_cmpuint(ov->channels, ==, 3);
    }
    g_autofree char *extra = g_strdup_printf("%s-%u.png", prefix, n_images + 1);
    g_assert_false(g_file_test(extra, G_FILE_TEST_EXISTS));
    g_autofree char *first = g_strdup_printf("%s-1.png", prefix);
    g_assert_false(g_file_test(first, G_FILE_TEST_EXISTS));
}

static void test_cli_pngs(void)
{
    /* different sizes and aspect ratios: each overlay keeps its own image's size */
    const char *files[] = { fixture("/png-rgb8.png"), fixture("/png-grey16-257x3.png") };
    check_describe("pngs", 2, files, 2, "edits", FALSE);
}

static void test_cli_dicoms(void)
{
    const char *files[] = { fixture("/dicom-mono2-u16-le.dcm"),
                            fixture("/dicom-mono1-12in16-implicit.dcm") };
    /* both are projection radiographs (CR, DX): the radiograph conversation */
    check_describe("dicoms", 2, files, 2, "radiograph", FALSE);
}

/* The demo radiographs with the shipped radiograph-and-aerial model (the default for
 * radiographs with the pretrained stem): the JSON names the findings its object head sees added
 * and missing, and so does the summary line. Skipped without the stem. */
static void test_cli_radiograph_findings(void)
{
    g_autofree char *stem = cl_pretrained_path(CL_EFFNET_FILE);
    if (!g_file_test(stem, G_FILE_TEST_EXISTS)) {
        g_test_skip("the pretrained EfficientNet-Lite0 is not installed (./run.sh fetches it)");
        return;
    }
    const char *root = g_getenv("CL_SOURCE_ROOT");
    g_autofree char *a = g_build_filename(root, "data", "demo", "radiograph", "before.dcm", NULL);
    g_autofree char *b = g_build_filename(root, "data", "demo", "radiograph", "after.dcm", NULL);
    g_autofree char *out = NULL, *err = NULL;
    int rc = run_describe(NULL, &out, &err, "--device", "cpu", "--json", a, b, NULL);
    g_assert_cmpint(rc, ==, 0);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    g_assert_true(json_parser_load_from_data(parser, out, -1, &error));
    JsonObject *o = json_node_get_object(json_parser_get_root(parser));
    JsonArray *added = json_object_get_array_member(o, "findings_added");
    JsonArray *missing = json_object_get_array_member(o, "findings_missing");
    g_assert_nonnull(added);
    g_assert_nonnull(missing);
    g_assert_cmpuint(json_array_get_length(added), ==, 1);
    g_assert_cmpstr(json_array_get_string_element(added, 0), ==, "hernia");
    g_assert_cmpuint(json_array_get_length(missing), ==, 1);
    g_assert_cmpstr(json_array_get_string_element(missing, 0), ==, "edema");
    g_free(out), g_free(err);
    rc = run_describe(NULL, &out, &err, "--device", "cpu", a, b, NULL);
    g_assert_cmpint(rc, ==, 0);
    g_assert_nonnull(strstr(err, "findings seen added: hernia; missing: edema"));
}

static void test_cli_tiff_pages(void)
{
    const char *files[] = { fixture("/pages3-grey16.tif") };
    check_describe("tiff", 3, files, 1, "generic", FALSE);
    check_describe("tiff-delta", 3, files, 1, "generic", TRUE);
}

static void test_cli_stream_matches_json(void)
{
    /* the streamed text is the JSON's text (both deterministic for a seed), beam search runs */
    const char *a = fixture("/png-rgb8.png"), *b = fixture("/png-grey8.png");
    g_autofree char *out1 = NULL, *err1 = NULL, *out2 = NULL, *err2 = NULL;
    int rc = run_describe(NULL, &out1, &err1, "--random-init", "tiny", "--seed", "2", "--device",
                          "cpu", "--max-tokens", "8", "--beam", "2", a, b, NULL);
    g_assert_cmpint(rc, ==, 0);
    rc = run_describe(NULL, &out2, &err2, "--random-init", "tiny", "--seed", "2", "--device", "cpu",
                      "--max-tokens", "8", "--beam", "2", "--json", a, b, NULL);
    g_assert_cmpint(rc, ==, 0);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    g_assert_true(json_parser_load_from_data(parser, out2, -1, &error));
    JsonObject *o = json_node_get_object(json_parser_get_root(parser));
    const char *text = json_object_get_string_member(o, "text");
    g_autofree char *want = *text ? g_strdup_printf("%s\n", text) : g_strdup("");
    g_assert_cmpstr(out1, ==, want);
    g_assert_nonnull(strstr(err1, "untrained"));
}

static void test_cli_errors(void)
{
    g_autofree char *missing = g_build_filename(fx.dir, "does-not-exist.png", NULL);
    const char *a = fixture("/png-rgb8.png");
    g_autofree char *out = NULL, *err = NULL;

    /* a bad image path: failure, naming the path */
    int rc =
        run_describe(NULL, &out, &err, "--random-init", "tiny", "--seed", "1", a, missing, NULL);
    g_assert_cmpint(rc, ==, 1);
    g_assert_nonnull(strstr(err, missing));
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);

    /* usage errors */
    rc = run_describe(NULL, &out, &err, "--random-init", "tiny", NULL);
    g_assert_cmpint(rc, ==, 2);
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);
    rc = run_describe(NULL, &out, &err, "--random-init", "tiny", a, NULL); /* one image */
    g_assert_cmpint(rc, ==, 2);
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);
    rc = run_describe(NULL, &out, &err, "--random-init", "tiny", "--variant", "bogus", a, a, NULL);
    g_assert_cmpint(rc, ==, 2);
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);
    rc = run_describe(NULL, &out, &err, "--random-init", "huge", a, a, NULL);
    g_assert_cmpint(rc, ==, 2);
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);
    rc = run_describe(NULL, &out, &err, "--model", "x.safetensors", "--random-init", "tiny", a, a,
                      NULL);
    g_assert_cmpint(rc, ==, 2);
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);

    /* no model: a clear message pointing at --random-init */
    const char *env[] = { "CHANGELENS_MODEL", missing, NULL };
    rc = run_describe(env, &out, &err, a, a, NULL);
    g_assert_cmpint(rc, ==, 1);
    g_assert_nonnull(strstr(err, "--random-init"));
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);

    /* a model file that is not one: failure */
    rc = run_describe(NULL, &out, &err, "--model", a, a, a, NULL);
    g_assert_cmpint(rc, ==, 1);
}

/* --model FILE and the default model ($CHANGELENS_MODEL): the JSON names the file and its sha256,
 * and a file model gives the same description as the same weights built in memory. */
static void test_cli_model_file(void)
{
    ClModelConfig cfg;
    g_autoptr(GError) error = NULL;
    g_assert_true(cl_model_config_preset(&cfg, "tiny", &error));
    cfg.image_size = 64; /* small and quick: 4 x 4 patches, 2 x 2 visual tokens per image */
    cfg.enc_dim = 32;
    cfg.enc_depth = 2;
    cfg.enc_heads = 2;
    cfg.enc_mlp = 64;
    cfg.merger_hidden = 64;
    cfg.dec_dim = 64;
    cfg.dec_depth = 2;
    cfg.dec_heads = 2;
    cfg.dec_kv_heads = 1;
    cfg.dec_mlp = 128;
    cfg.vocab_size = 512;
    g_autoptr(ClModel) m = cl_model_new_random(&cfg, 7, &error);
    g_assert_no_error(error);
    g_autofree char *path = g_build_filename(fx.dir, "small.safetensors", NULL);
    g_assert_true(cl_model_save(m, path, "F32", &error));
    g_assert_no_error(error);
    g_assert_nonnull(m->sha256);

    const char *a = fixture("/png-rgb8.png"), *b = fixture("/png-rgba8.png");
    g_autofree char *out = NULL, *err = NULL;
    int rc = run_describe(NULL, &out, &err, "--model", path, "--device", "cpu", "--max-tokens", "5",
                          "--json", a, b, NULL);
    g_assert_cmpint(rc, ==, 0);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_assert_true(json_parser_load_from_data(parser, out, -1, &error));
    JsonObject *o = json_node_get_object(json_parser_get_root(parser));
    JsonObject *model = json_object_get_object_member(o, "model");
    g_assert_cmpstr(json_object_get_string_member(model, "path"), ==, path);
    g_assert_cmpstr(json_object_get_string_member(model, "sha256"), ==, m->sha256);
    JsonArray *hms = json_object_get_array_member(o, "heatmaps");
    JsonObject *h = json_array_get_object_element(hms, 0);
    g_assert_cmpint(json_object_get_int_member(h, "width"), ==, 4);
    g_autofree char *text = g_strdup(json_object_get_string_member(o, "text"));

    /* the same weights in memory, through the core call */
    g_autoptr(ClImage) ia = cl_image_load(a, NULL, &error);
    g_autoptr(ClImage) ib = cl_image_load(b, NULL, &error);
    g_assert_no_error(error);
    g_autoptr(ClBackend) be = cl_backend_cpu_new(1);
    ClDescribeImage imgs[2] = { { ia, 0 }, { ib, 0 } };
    ClDescribeOptions opts;
    cl_describe_options_init(&opts);
    opts.max_new_tokens = 5;
    ClDescribeResult r;
    g_assert_true(cl_describe_run(be, m, imgs, 2, &opts, &r, &error));
    g_assert_no_error(error);
    g_autofree char *valid = g_utf8_make_valid(r.text, -1);
    g_assert_cmpstr(valid, ==, text);
    g_assert_cmpint(r.domain, ==, CL_CHAT_DOMAIN_EDITS);
    g_assert_cmpuint(r.heatmaps->len, ==, 1);
    g_assert_cmpint(((ClHeatmap *)g_ptr_array_index(r.heatmaps, 0))->image_index, ==, 1);
    g_assert_cmpint(r.n_prompt, >, 2 * r.n_visual_per_image);
    g_assert_nonnull(strstr(r.prompt_text, "<image>"));
    g_assert_false(r.unsure); /* no sure_logprob: never said */
    double logprob = r.logprob;
    g_assert_cmpfloat(logprob, <, 0);
    cl_describe_result_clear(&r);

    /* config.sure_logprob: a text below it comes with a notice, one at or above it without */
    for (int below = 0; below < 2; below++) {
        ClModelConfig scfg = cfg;
        scfg.sure_logprob = below ? logprob / 2 : logprob * 2; /* both negative */
        g_autoptr(ClModel) sm = cl_model_new_random(&scfg, 7, &error);
        g_assert_no_error(error);
        g_assert_true(cl_describe_run(be, sm, imgs, 2, &opts, &r, &error));
        g_assert_cmpfloat(r.logprob, ==, logprob); /* the same weights, the same text */
        g_assert_cmpint(r.unsure, ==, below);
        gboolean told = FALSE;
        for (guint i = 0; i < r.notices->len; i++)
            told = told || strstr(g_ptr_array_index(r.notices, i), "not sure") != NULL;
        g_assert_cmpint(told, ==, below);
        cl_describe_result_clear(&r);
    }
    ClModelConfig bad = cfg;
    bad.sure_logprob = 0.5;
    g_assert_false(cl_model_config_validate(&bad, &error));
    g_assert_nonnull(strstr(error->message, "sure_logprob"));
    g_clear_error(&error);

    /* a prompt longer than the context fails before any encoding, with a clear message */
    ClModelConfig short_cfg = cfg;
    short_cfg.max_len = 64;
    g_autoptr(ClModel) short_m = cl_model_new_random(&short_cfg, 7, &error);
    g_assert_no_error(error);
    g_assert_false(cl_describe_run(be, short_m, imgs, 2, &opts, &r, &error));
    g_assert_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT);
    g_assert_nonnull(strstr(error->message, "context"));
    g_clear_error(&error);
    cl_describe_result_clear(&r);
    /* … unless a streaming cache reads it (the app's "every prior image"): 24 images of 16
     * visual rows each are six times this context */
    ClDescribeImage many[24];
    for (int i = 0; i < 24; i++)
        many[i] = imgs[i % 2];
    ClDescribeOptions sopts = opts;
    sopts.stream_sink = 8;
    sopts.stream_window = 32;
    g_assert_true(cl_describe_run(be, short_m, many, 24, &sopts, &r, &error));
    g_assert_no_error(error);
    g_assert_cmpint(r.n_prompt, >, short_cfg.max_len);
    g_assert_cmpuint(r.heatmaps->len, ==, 23);
    g_assert_cmpuint(r.ids->len, >, 0);
    cl_describe_result_clear(&r);
    /* the app's case notes reach only a model trained to read prior reports (VIST2): this one
     * has none, so it reads nothing and says so; asked plainly, it reads them as text */
    ClDescribeOptions copts = opts;
    copts.context = "Prior finding: a small nodule in the left upper lobe.";
    g_assert_true(cl_describe_run(be, m, imgs, 2, &copts, &r, &error));
    g_assert_cmpint(r.context_tokens, >, 0);
    cl_describe_result_clear(&r);
    copts.context_vist_only = TRUE;
    g_assert_true(cl_describe_run(be, m, imgs, 2, &copts, &r, &error));
    g_assert_cmpint(r.context_tokens, ==, 0);
    g_assert_null(strstr(r.prompt_text, "nodule"));
    gboolean said = FALSE;
    for (guint i = 0; i < r.notices->len; i++)
        said = said || strstr(g_ptr_array_index(r.notices, i), "not trained to read") != NULL;
    g_assert_true(said);
    cl_describe_result_clear(&r);
    /* one image is not a sequence */
    g_assert_false(cl_describe_run(be, m, imgs, 1, &opts, &r, &error));
    g_assert_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT);
    g_clear_error(&error);
    cl_describe_result_clear(&r);
    /* cancelled before it starts */
    g_autoptr(GCancellable) cancel = g_cancellable_new();
    g_cancellable_cancel(cancel);
    opts.cancellable = cancel;
    g_assert_false(cl_describe_run(be, m, imgs, 2, &opts, &r, &error));
    g_assert_error(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
    g_clear_error(&error);
    cl_describe_result_clear(&r);

    /* the default model from the environment */
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);
    const char *env[] = { "CHANGELENS_MODEL", path, NULL };
    rc =
        run_describe(env, &out, &err, "--device", "cpu", "--max-tokens", "5", "--json", a, b, NULL);
    g_assert_cmpint(rc, ==, 0);
    g_assert_nonnull(strstr(out, m->sha256));

    /* a question that breaks the template is refused, not silently used */
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);
    rc = run_describe(NULL, &out, &err, "--model", path, "--device", "cpu", "--prompt",
                      "compare <image> please", a, b, NULL);
    g_assert_cmpint(rc, ==, 1);
    g_assert_nonnull(strstr(err, "<image>"));
}

/* Aligned input: the identity map gives the plain input; a shifted image read through its shift
 * gives the unshifted image's input (away from the borders the shift uncovers). */
static void test_aligned_input(void)
{
    g_autoptr(ClImage) a = mem_image(64, 48, CL_LAYOUT_GREY, 1, 8);
    g_autoptr(ClImage) b = mem_image(64, 48, CL_LAYOUT_GREY, 1, 8);
    float *pa = cl_image_plane(a, 0, 0), *pb = cl_image_plane(b, 0, 0);
    for (int y = 0; y < 48; y++)
        for (int x = 0; x < 64; x++) {
            pa[y * 64 + x] = (float)((x * 7 + y * 13) % 256);
            int sx = x - 5, sy = y - 3; /* b shows a moved by (5, 3) */
            pb[y * 64 + x] = sx >= 0 && sy >= 0 ? (float)((sx * 7 + sy * 13) % 256) : 0;
        }
    ClDisplaySettings ds;
    cl_display_settings_init(&ds, a, 0);
    ds.mode = CL_DISPLAY_FULL_RANGE;
    const int S = 64;
    g_autofree float *plain = g_new(float, S * S), *same = g_new(float, S * S);
    g_autofree float *shifted = g_new(float, S * S);
    ClLetterbox lb1, lb2;
    g_assert_true(cl_preprocess_image(a, 0, &ds, S, 1, plain, &lb1, NULL));
    const double id[6] = { 0, 1, 0, 0, 0, 1 };
    g_assert_true(cl_preprocess_image_aligned(a, 0, &ds, id, 64, 48, S, 1, same, &lb2, NULL));
    for (int i = 0; i < S * S; i++)
        g_assert_cmpfloat(fabsf(plain[i] - same[i]), <, 1e-6f);
    const double shift[6] = { 5, 1, 0, 3, 0, 1 }; /* frame (x, y) -> b's (x + 5, y + 3) */
    g_assert_true(cl_preprocess_image_aligned(b, 0, &ds, shift, 64, 48, S, 1, shifted, NULL, NULL));
    /* the frame's right and bottom edges fall outside b; compare the rest */
    for (int y = lb1.off_y; y < lb1.off_y + lb1.content_h - 4; y++)
        for (int x = 0; x < 56; x++)
            g_assert_cmpfloat(fabsf(plain[y * S + x] - shifted[y * S + x]), <, 1e-5f);
    g_autoptr(GError) error = NULL;
    g_assert_false(
        cl_preprocess_image_aligned(b, 0, &ds, shift, 0, 48, S, 1, shifted, NULL, &error));
    g_assert_nonnull(error);
}

/* Masks: the model pixels a rectangle touches are zeroed (the padding), nothing else; a change
 * inside a masked region does not reach the model at all. */
static void test_masks(void)
{
    ClLetterbox lb;
    cl_letterbox_init(&lb, 320, 160, 160); /* content 160 × 80 at y 40 */
    float px[3 * 160 * 160];
    for (gsize i = 0; i < G_N_ELEMENTS(px); i++)
        px[i] = 0.25f;
    const double rect[4] = { 0, 0, 160, 160 }; /* the left half of the image */
    cl_preprocess_apply_masks(px, 3, &lb, rect, 1);
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < 160; y++)
            for (int x = 0; x < 160; x++) {
                float v = px[((gsize)c * 160 + y) * 160 + x];
                gboolean in = x < 80 && y >= 40 && y < 120;
                g_assert_cmpfloat(v, ==, in ? 0.0f : 0.25f);
            }

    /* end to end: B differs from A only inside the masked square */
    g_autoptr(ClImage) a = mem_image(96, 96, CL_LAYOUT_RGB, 3, 8);
    g_autoptr(ClImage) b = mem_image(96, 96, CL_LAYOUT_RGB, 3, 8);
    for (guint c = 0; c < 3; c++) {
        float *pa = cl_image_plane(a, 0, c), *pb = cl_image_plane(b, 0, c);
        for (guint i = 0; i < 96 * 96; i++)
            pa[i] = pb[i] = (float)((i * 37 + c * 11) % 200);
        for (guint y = 40; y < 60; y++)
            for (guint x = 40; x < 60; x++)
                pb[y * 96 + x] = 255; /* the change */
    }
    const double mask[4] = { 30, 30, 70, 70 };
    ClModelConfig cfg;
    g_assert_true(cl_model_config_preset(&cfg, "tiny", NULL));
    g_autoptr(ClModel) model = cl_model_new_random(&cfg, 5, NULL);
    g_autoptr(ClBackend) be = cl_backend_cpu_new(0);
    ClDescribeOptions o;
    cl_describe_options_init(&o);
    o.max_new_tokens = 12;
    char *text[3];
    double heat_sum[3];
    const ClImage *second[3] = { b, a, b };
    for (int k = 0; k < 3; k++) {
        /* k 0: masked change; k 1: no change, same mask; k 2: the change unmasked */
        ClDescribeImage di[2] = { { a, 0, k < 2 ? mask : NULL, k < 2 ? 1 : 0 },
                                  { second[k], 0, k < 2 ? mask : NULL, k < 2 ? 1 : 0 } };
        ClDescribeResult r;
        g_autoptr(GError) error = NULL;
        g_assert_true(cl_describe_run(be, model, di, 2, &o, &r, &error));
        text[k] = g_strdup(r.text);
        const ClHeatmap *hm = g_ptr_array_index(r.heatmaps, 0);
        heat_sum[k] = 0;
        for (int i = 0; i < hm->width * hm->height; i++)
            heat_sum[k] += hm->values[i];
        cl_describe_result_clear(&r);
    }
    /* masked: the model's input, hence everything it computes, is that of an unchanged pair */
    g_assert_cmpstr(text[0], ==, text[1]);
    g_assert_cmpfloat(heat_sum[0], ==, heat_sum[1]);
    /* unmasked, the change reaches the encoder */
    g_assert_cmpfloat(heat_sum[2], !=, heat_sum[1]);

    /* the display transform on screen is what the model reads: the defaults given explicitly
     * change nothing, an inverted one changes the input */
    ClDisplaySettings defaults, inverted;
    cl_display_settings_init(&defaults, b, 0);
    inverted = defaults;
    inverted.invert = TRUE;
    double sums[3];
    const ClDisplaySettings *shown[3] = { NULL, &defaults, &inverted };
    for (int k = 0; k < 3; k++) {
        ClDescribeImage di[2] = { { a, 0, NULL, 0, shown[k] }, { b, 0, NULL, 0, shown[k] } };
        ClDescribeResult r;
        g_assert_true(cl_describe_run(be, model, di, 2, &o, &r, NULL));
        const ClHeatmap *hm = g_ptr_array_index(r.heatmaps, 0);
        sums[k] = 0;
        for (int i = 0; i < hm->width * hm->height; i++)
            sums[k] += hm->values[i];
        cl_describe_result_clear(&r);
    }
    g_assert_cmpfloat(sums[0], ==, sums[1]);
    g_assert_cmpfloat(sums[2], !=, sums[0]);
    for (int k = 0; k < 3; k++)
        g_free(text[k]);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/describe/preprocess/letterbox", test_letterbox);
    g_test_add_func("/describe/preprocess/resize", test_resize);
    g_test_add_func("/describe/preprocess/values", test_preprocess_values);
    g_test_add_func("/describe/preprocess/display-fit", test_display_fit);
    g_test_add_func("/describe/preprocess/masks", test_masks);
    g_test_add_func("/describe/preprocess/aligned", test_aligned_input);
    g_test_add_func("/describe/heatmap/grid", test_heatmap_grid);
    g_test_add_func("/describe/heatmap/colour-png", test_heatmap_colour_png);
    g_test_add_func("/describe/domain", test_domain);

    fx.dir = cl_fixture_tmpdir("cl-test-describe");
    fx.fixtures = g_ptr_array_new_with_free_func((GDestroyNotify)cl_fixture_free);
    g_autoptr(GError) error = NULL;
    if (!cl_fixtures_png(fx.dir, fx.fixtures, &error) ||
        !cl_fixtures_dicom(fx.dir, fx.fixtures, &error) ||
        !cl_fixtures_tiff(fx.dir, fx.fixtures, &error))
        g_error("writing fixtures: %s", error->message);
    g_test_add_func("/describe/cli/pngs", test_cli_pngs);
    g_test_add_func("/describe/cli/dicoms", test_cli_dicoms);
    g_test_add_func("/describe/cli/tiff-pages", test_cli_tiff_pages);
    g_test_add_func("/describe/cli/radiograph-findings", test_cli_radiograph_findings);
    g_test_add_func("/describe/cli/stream-matches-json", test_cli_stream_matches_json);
    g_test_add_func("/describe/cli/errors", test_cli_errors);
    g_test_add_func("/describe/cli/model-file", test_cli_model_file);
    int rc = g_test_run();
    cl_fixture_rmdir(fx.dir);
    g_free(fx.dir);
    g_ptr_array_unref(fx.fixtures);
    return rc;
}
