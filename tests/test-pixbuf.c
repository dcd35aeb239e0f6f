/* test-pixbuf.c - JPEG/WebP/BMP/GIF through gdk-pixbuf: every fixture value by value and under
 * corruption, limits before allocation, missing loaders, metadata. */
#include <gdk-pixbuf/gdk-pixbuf.h>
#include <math.h>
#include <string.h>

#include "fixtures.h"
#include "image/loaders.h"

static GPtrArray *fixtures; /* ClFixture*, written once into fixture_dir */
static char *fixture_dir;

static const ClFixture *find_fixture(const char *file)
{
    return cl_fixture_find(fixtures, file);
}

static const ClFixture *need_fixture(const char *file)
{
    const ClFixture *f = find_fixture(file);
    if (!f)
        g_error("no fixture %s", file);
    return f;
}

static void test_fixture(gconstpointer p)
{
    const ClFixture *f = p;
    g_autoptr(GError) err = NULL;
    if (!cl_fixture_load_and_check(f, &err))
        g_error("%s", err->message);
    guint n = cl_fixture_corruption_sweep(f);
    g_test_message("%s: %u corrupted versions handled", f->what, n);
}

static GBytes *read_fixture(const char *file)
{
    char *data = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(need_fixture(file)->path, &data, &len, NULL));
    return g_bytes_new_take(data, len);
}

/* A ClImage straight from a pixbuf, bypassing the loader's checks (to test the tolerance). */
static ClImage *image_from_pixbuf(GdkPixbuf *pb, ClImageFormat format)
{
    ClImage *img = cl_image_new(format);
    img->width = (guint)gdk_pixbuf_get_width(pb);
    img->height = (guint)gdk_pixbuf_get_height(pb);
    img->channels = (guint)gdk_pixbuf_get_n_channels(pb);
    img->layout = img->channels == 4 ? CL_LAYOUT_RGBA : CL_LAYOUT_RGB;
    img->bits = 8;
    img->sample_format = CL_SAMPLE_UINT;
    img->photometric = g_strdup(img->channels == 4 ? "rgba" : "rgb");
    g_assert_true(cl_image_alloc_frames(img, 1, NULL));
    const guint8 *px = gdk_pixbuf_read_pixels(pb);
    int stride = gdk_pixbuf_get_rowstride(pb);
    for (guint c = 0; c < img->channels; c++)
        for (guint y = 0; y < img->height; y++)
            for (guint x = 0; x < img->width; x++)
                cl_image_plane(img, 0, c)[(gsize)y * img->width + x] =
                    px[(gsize)y * stride + (gsize)x * img->channels + c];
    return img;
}

/* The lossy fixtures' tolerances: a correct decode is well inside them, and what gdk-pixbuf
 * makes of a truncated file (grey where the data stopped) is far outside. */
static void test_lossy_tolerance(void)
{
    guint lossy = 0;
    for (guint i = 0; i < fixtures->len; i++) {
        const ClFixture *f = g_ptr_array_index(fixtures, i);
        if (f->must_fail || f->tolerance <= 1)
            continue;
        lossy++;
        g_autoptr(GError) err = NULL;
        g_autoptr(ClImage) img = cl_image_load(f->path, NULL, &err);
        g_assert_no_error(err);
        gsize n = (gsize)f->width * f->height * f->channels;
        const float *got = cl_image_frame(img, 0)->data;
        double max_err = 0;
        for (gsize k = 0; k < n; k++)
            max_err = MAX(max_err, fabs((double)got[k] - f->values[k]));
        g_test_message("%s: max error %g, tolerance %g", f->what, max_err, f->tolerance);
        g_assert_cmpfloat(max_err, <=, f->tolerance);

        /* bottom half replaced by mid-grey must not pass */
        g_autoptr(ClImage) grey = cl_image_load(f->path, NULL, &err);
        for (guint c = 0; c < grey->channels; c++)
            for (gsize k = (gsize)grey->width * (grey->height / 2);
                 k < (gsize)grey->width * grey->height; k++)
                cl_image_plane(grey, 0, c)[k] = 128;
        g_assert_false(cl_fixture_check(f, grey, &err));
        g_clear_error(&err);

        /* a real partial decode: gdk-pixbuf given 60 % of the file */
        g_autofree char *data = NULL;
        gsize len = 0;
        g_assert_true(g_file_get_contents(f->path, &data, &len, NULL));
        gsize cut = len * 6 / 10;
        g_autoptr(GdkPixbufLoader) loader = gdk_pixbuf_loader_new();
        gboolean ok = gdk_pixbuf_loader_write(loader, (const guint8 *)data, cut, NULL);
        if (ok)
            ok = gdk_pixbuf_loader_close(loader, NULL);
        GdkPixbuf *pb = gdk_pixbuf_loader_get_pixbuf(loader);
        if (ok && pb) {
            g_autoptr(ClImage) partial = image_from_pixbuf(pb, f->format);
            g_assert_false(cl_fixture_check(f, partial, &err));
            g_test_message("%s: gdk-pixbuf decodes 60 %% of the file without an error; the "
                           "tolerance rejects it: %s",
                           f->what, err->message);
            g_clear_error(&err);
        }
        /* ... and our loader refuses it */
        g_assert_null(cl_image_load_data((const guint8 *)data, cut, "cut", NULL, &err));
        g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
    }
    g_assert_cmpuint(lossy, >=, 1);
}

static void put_le16(guint8 *p, guint v)
{
    p[0] = (guint8)v;
    p[1] = (guint8)(v >> 8);
}

static void put_le32(guint8 *p, guint32 v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (guint8)(v >> (8 * i));
}

static void expect_too_large(const guint8 *d, gsize len, const char *name,
                             const ClImageLimits *limits)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) img = cl_image_load_data(d, len, name, limits, &err);
    if (img)
        g_error("%s loaded over the budget", name);
    g_assert_nonnull(err);
    if (!g_error_matches(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE) ||
        !strstr(err->message, "pixel budget") || !strstr(err->message, name))
        g_error("%s: expected a pixel-budget refusal, got: %s", name, err->message);
}

/* Headers over the budget are refused from "size-prepared", before gdk-pixbuf allocates: a
 * 60000 × 60000 RGBA pixbuf would be 14 GB, and its failed allocation would read differently. */
static void test_limits(void)
{
    ClImageLimits tiny = { .max_pixels = 50, .max_frames = 1, .max_channels = 4 };
    for (guint i = 0; i < fixtures->len; i++) {
        const ClFixture *f = g_ptr_array_index(fixtures, i);
        if (f->must_fail)
            continue;
        g_autoptr(GBytes) b = read_fixture(strrchr(f->path, '/') + 1);
        expect_too_large(g_bytes_get_data(b, NULL), g_bytes_get_size(b), f->path, &tiny);
    }

    { /* GIF logical screen */
        g_autoptr(GBytes) b = read_fixture("gif-anim-37x23.gif");
        g_autofree guint8 *d = g_memdup2(g_bytes_get_data(b, NULL), g_bytes_get_size(b));
        put_le16(d + 6, 60000);
        put_le16(d + 8, 60000);
        expect_too_large(d, g_bytes_get_size(b), "huge.gif", NULL);
    }
    { /* BMP info header */
        g_autoptr(GBytes) b = read_fixture("bmp-rgb-37x23.bmp");
        g_autofree guint8 *d = g_memdup2(g_bytes_get_data(b, NULL), g_bytes_get_size(b));
        put_le32(d + 18, 60000);
        put_le32(d + 22, 60000);
        expect_too_large(d, g_bytes_get_size(b), "huge.bmp", NULL);
    }
    { /* JPEG SOF0 */
        g_autoptr(GBytes) b = read_fixture("jpeg-q100-64x48.jpg");
        gsize len = g_bytes_get_size(b);
        g_autofree guint8 *d = g_memdup2(g_bytes_get_data(b, NULL), len);
        guint8 *sof = memmem(d, len, "\xff\xc0", 2);
        g_assert_nonnull(sof);
        sof[5] = sof[7] = 60000 >> 8;
        sof[6] = sof[8] = 60000 & 0xFF;
        expect_too_large(d, len, "huge.jpg", NULL);
    }
    { /* WebP lossless: 14-bit sizes, so 16384 × 16384 against a caller's 2^20 budget */
        g_autoptr(GBytes) b = read_fixture("webp-lossless-rgb.webp");
        gsize len = g_bytes_get_size(b);
        g_autofree guint8 *d = g_memdup2(g_bytes_get_data(b, NULL), len);
        guint32 bits = d[21] | (d[22] << 8) | (d[23] << 16) | ((guint32)d[24] << 24);
        bits = (bits & ~0x0FFFFFFFu) | 16383u | (16383u << 14);
        put_le32(d + 21, bits);
        ClImageLimits mega = { .max_pixels = 1 << 20, .max_frames = 1, .max_channels = 4 };
        if (find_fixture("webp-lossless-rgb.webp")->must_fail)
            g_test_message("no WebP loader: the WebP size check is not exercised");
        else
            expect_too_large(d, len, "huge.webp", &mega);
    }
}

/* Without its gdk-pixbuf loader a format is UNSUPPORTED, with the package to install. The child
 * process points gdk-pixbuf at an empty loader cache before its first use. */
static void test_missing_loader(void)
{
    if (g_test_subprocess()) {
        /* enough to be recognised; the loader is looked up before any data is read */
        static const guint8 webp[] = "RIFF\x1a\0\0\0WEBPVP8L\x0d\0\0\0\x2f\0\0\0\0\0\0"
                                     "\0\0\0\0\0\0\0";
        static const guint8 gif[] = "GIF89a\x01\0\x01\0\0\0\0,\0\0\0\0\x01\0\x01\0\0\x02\x02L"
                                    "\x01\0;";
        g_autoptr(GError) err = NULL;
        g_assert_null(cl_image_load_data(webp, sizeof webp - 1, "photo.webp", NULL, &err));
        g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNSUPPORTED);
        g_assert_nonnull(strstr(err->message, "photo.webp"));
        g_assert_nonnull(strstr(err->message, "webp-pixbuf-loader"));
        g_clear_error(&err);
        g_assert_null(cl_image_load_data(gif, sizeof gif - 1, "anim.gif", NULL, &err));
        g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNSUPPORTED);
        g_assert_nonnull(strstr(err->message, "anim.gif"));
        g_assert_nonnull(strstr(err->message, "libgdk-pixbuf-2.0-0"));
        return;
    }
    g_autofree char *cache = g_build_filename(fixture_dir, "empty-loaders.cache", NULL);
    g_assert_true(g_file_set_contents(cache, "", 0, NULL));
    g_setenv("GDK_PIXBUF_MODULE_FILE", cache, TRUE);
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
    g_unsetenv("GDK_PIXBUF_MODULE_FILE");
    g_test_trap_assert_passed();
}

static void test_metadata(void)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) jpg = cl_image_load(need_fixture("jpeg-q100-64x48.jpg")->path, NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpstr(cl_image_get_meta(jpg, "JPEGComponents"), ==, "3");
    g_assert_cmpstr(cl_image_get_meta(jpg, "JPEGProcess"), ==, "baseline");
    g_assert_null(cl_image_get_meta(jpg, "ColorSpace"));
    g_assert_cmpuint(jpg->bits_allocated, ==, 8);

    g_autoptr(ClImage) grey = cl_image_load(need_fixture("jpeg-grey-8x8.jpg")->path, NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpstr(cl_image_get_meta(grey, "JPEGComponents"), ==, "1");
    g_assert_nonnull(strstr(cl_image_get_meta(grey, "ColorSpace"), "grey"));
    g_assert_cmpuint(grey->channels, ==, 3);

    g_autoptr(ClImage) gif = cl_image_load(need_fixture("gif-anim-37x23.gif")->path, NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpstr(cl_image_get_meta(gif, "Frames"), ==, "2");
    g_assert_nonnull(cl_image_get_meta(gif, "Animated"));
    g_assert_cmpuint(cl_image_n_frames(gif), ==, 1);

    g_autoptr(ClImage) bmp = cl_image_load(need_fixture("bmp-rgb-37x23.bmp")->path, NULL, &err);
    g_assert_no_error(err);
    g_assert_null(cl_image_get_meta(bmp, "Frames"));
    g_assert_cmpint(bmp->format, ==, CL_IMAGE_FORMAT_BMP);
}

/* Garbage behind each signature, empty data, and truncation through each format. */
static void test_errors(void)
{
    static const struct {
        const char *bytes;
        gsize len;
        ClImageFormat fmt;
    } junk[] = {
        { "\xff\xd8\xff\xe0 this is not a JPEG at all, just text", 41, CL_IMAGE_FORMAT_JPEG },
        { "BM this is not a bitmap at all, just some text here", 51, CL_IMAGE_FORMAT_BMP },
        { "GIF89a this is not a GIF at all, just text", 42, CL_IMAGE_FORMAT_GIF },
        { "RIFF\x20\0\0\0WEBPVP8L not a WebP stream here!", 40, CL_IMAGE_FORMAT_WEBP },
    };
    for (guint i = 0; i < G_N_ELEMENTS(junk); i++) {
        g_autoptr(GError) err = NULL;
        const guint8 *d = (const guint8 *)junk[i].bytes;
        g_assert_cmpint(cl_image_detect_format(d, junk[i].len), ==, junk[i].fmt);
        g_assert_null(cl_image_load_data(d, junk[i].len, "junk.bin", NULL, &err));
        g_assert_nonnull(err);
        g_assert_true(err->domain == CL_IMAGE_ERROR);
        g_test_message("%s", err->message);
        /* text read as a header can claim a size over the budget: refusing that is right too */
        g_assert_true(err->code == CL_IMAGE_ERROR_CORRUPT || err->code == CL_IMAGE_ERROR_TOO_LARGE);
        g_assert_nonnull(strstr(err->message, "junk.bin"));
        g_clear_error(&err);
        g_assert_null(cl_image_load_pixbuf(d, 0, NULL, junk[i].fmt, NULL, &err));
        g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
        g_assert_true(g_str_has_prefix(err->message, "image: "));
    }
    g_autoptr(GError) err = NULL;
    g_assert_null(cl_image_load_data((const guint8 *)"hello", 5, "hello.txt", NULL, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNKNOWN_FORMAT);
    g_clear_error(&err);

    const char *files[] = { "jpeg-q100-64x48.jpg", "bmp-rgb-37x23.bmp", "gif-anim-37x23.gif",
                            "webp-lossless-rgb.webp" };
    for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
        if (need_fixture(files[i])->must_fail)
            continue;
        g_autoptr(GBytes) b = read_fixture(files[i]);
        g_assert_null(cl_image_load_data(g_bytes_get_data(b, NULL), g_bytes_get_size(b) / 2,
                                         files[i], NULL, &err));
        g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
        if (!strstr(err->message, "truncated") || !strstr(err->message, files[i]))
            g_error("%s cut in half: message '%s'", files[i], err->message);
        g_clear_error(&err);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    fixture_dir = cl_fixture_tmpdir("cl-test-pixbuf");
    fixtures = g_ptr_array_new_with_free_func((GDestroyNotify)cl_fixture_free);
    g_autoptr(GError) err = NULL;
    /* A subprocess (missing-loader test) must not touch gdk-pixbuf before it changes its
     * loader cache, so it writes no fixtures. */
    if (!g_test_subprocess() && !cl_fixtures_pixbuf(fixture_dir, fixtures, &err))
        g_error("writing fixtures: %s", err->message);
    cl_fixture_add_tests("pixbuf", fixtures, test_fixture);
    g_test_add_func("/pixbuf/lossy-tolerance", test_lossy_tolerance);
    g_test_add_func("/pixbuf/limits", test_limits);
    g_test_add_func("/pixbuf/missing-loader", test_missing_loader);
    g_test_add_func("/pixbuf/metadata", test_metadata);
    g_test_add_func("/pixbuf/errors", test_errors);
    int rc = g_test_run();
    g_ptr_array_unref(fixtures);
    cl_fixture_rmdir(fixture_dir);
    g_free(fixture_dir);
    return rc;
}
