/* test-image.c - ClImage basics: limits, format detection, errors, frame statistics. */
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "fixtures.h"

static void test_limits(void)
{
    ClImageLimits lim;
    cl_image_limits_init(&lim);
    g_assert_cmpuint(lim.max_pixels, ==, (guint64)1 << 28);
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_image_check_limits(&lim, 16384, 16384, 1, 1, &err)); /* exactly 2^28 */
    g_assert_false(cl_image_check_limits(&lim, 16384, 16385, 1, 1, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE);
    g_assert_nonnull(strstr(err->message, "pixel budget"));
    g_clear_error(&err);
    /* huge sizes must not overflow into a pass */
    g_assert_false(cl_image_check_limits(&lim, G_MAXUINT32, G_MAXUINT32, G_MAXUINT32, 4, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE);
    g_clear_error(&err);
    g_assert_false(cl_image_check_limits(&lim, 100, 100, 5000, 1, &err));
    g_assert_nonnull(strstr(err->message, "frames"));
    g_clear_error(&err);
    g_assert_false(cl_image_check_limits(&lim, 0, 100, 1, 1, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
    g_clear_error(&err);
    ClImageLimits small = { .max_pixels = 1000, .max_frames = 2, .max_channels = 3 };
    g_assert_false(cl_image_check_limits(&small, 40, 40, 1, 1, &err));
    g_clear_error(&err);
    g_assert_false(cl_image_check_limits(&small, 10, 10, 1, 4, &err));
    g_assert_nonnull(strstr(err->message, "channels"));
    g_clear_error(&err);
    g_assert_true(cl_image_check_limits(NULL, 10, 10, 1, 3, &err));
}

static void test_detect(void)
{
    struct {
        const char *bytes;
        gsize len;
        ClImageFormat want;
    } cases[] = {
        { "\x89PNG\r\n\x1a\n", 8, CL_IMAGE_FORMAT_PNG },
        { "II*\0\x08\0\0\0", 8, CL_IMAGE_FORMAT_TIFF },
        { "MM\0*\0\0\0\x08", 8, CL_IMAGE_FORMAT_TIFF },
        { "II+\0\x08\0\0\0", 8, CL_IMAGE_FORMAT_TIFF }, /* BigTIFF */
        { "\xff\xd8\xff\xe0", 4, CL_IMAGE_FORMAT_JPEG },
        { "RIFF\0\0\0\0WEBPVP8 ", 16, CL_IMAGE_FORMAT_WEBP },
        { "BM\0\0", 4, CL_IMAGE_FORMAT_BMP },
        { "GIF89a", 6, CL_IMAGE_FORMAT_GIF },
        { "hello world", 11, CL_IMAGE_FORMAT_UNKNOWN },
    };
    for (guint i = 0; i < G_N_ELEMENTS(cases); i++)
        g_assert_cmpint(cl_image_detect_format((const guint8 *)cases[i].bytes, cases[i].len), ==,
                        cases[i].want);
    guint8 dicm[140] = { 0 };
    memcpy(dicm + 128, "DICM", 4);
    g_assert_cmpint(cl_image_detect_format(dicm, sizeof dicm), ==, CL_IMAGE_FORMAT_DICOM);
    /* dual-personality (PS3.10 §7.1): a TIFF header in the preamble, "DICM" at 128 wins */
    memcpy(dicm, "II*\0\x08\0\0\0", 8);
    g_assert_cmpint(cl_image_detect_format(dicm, sizeof dicm), ==, CL_IMAGE_FORMAT_DICOM);
    memcpy(dicm, "MM\0*\0\0\0\x08", 8);
    g_assert_cmpint(cl_image_detect_format(dicm, sizeof dicm), ==, CL_IMAGE_FORMAT_DICOM);
    /* a TIFF whose byte 128 is not "DICM" stays a TIFF */
    memcpy(dicm + 128, "DICX", 4);
    g_assert_cmpint(cl_image_detect_format(dicm, sizeof dicm), ==, CL_IMAGE_FORMAT_TIFF);
}

static void test_errors(void)
{
    g_autofree char *dir = cl_fixture_tmpdir("cl-test-image");
    g_autoptr(GError) err = NULL;

    g_autofree char *missing = g_build_filename(dir, "nope.png", NULL);
    g_assert_null(cl_image_load(missing, NULL, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_IO);
    g_assert_nonnull(strstr(err->message, "nope.png"));
    g_clear_error(&err);

    g_assert_null(cl_image_load(dir, NULL, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_IO);
    g_assert_nonnull(strstr(err->message, "folder"));
    g_clear_error(&err);

    g_autofree char *empty = g_build_filename(dir, "empty.tif", NULL);
    g_assert_true(g_file_set_contents(empty, "", 0, NULL));
    g_assert_null(cl_image_load(empty, NULL, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT);
    g_assert_nonnull(strstr(err->message, "empty"));
    g_clear_error(&err);

    g_autofree char *text = g_build_filename(dir, "report.dcm", NULL);
    g_assert_true(g_file_set_contents(text, "Findings: none.\n", -1, NULL));
    g_assert_null(cl_image_load(text, NULL, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNKNOWN_FORMAT);
    g_assert_nonnull(strstr(err->message, "report.dcm"));
    g_clear_error(&err);

    /* a pipe or a device is refused before it is read (a FIFO without a writer would block) */
    g_autofree char *fifo = g_build_filename(dir, "scan.png", NULL);
    g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
    const char *not_files[] = { fifo, "/dev/zero" };
    for (gsize i = 0; i < G_N_ELEMENTS(not_files); i++) {
        if (!g_file_test(not_files[i], G_FILE_TEST_EXISTS))
            continue;
        g_assert_null(cl_image_load(not_files[i], NULL, &err));
        g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_IO);
        g_assert_nonnull(strstr(err->message, "not a regular file"));
        g_clear_error(&err);
    }
    g_unlink(fifo);
    cl_fixture_rmdir(dir);
}

static void test_stats(void)
{
    g_autoptr(ClImage) img = cl_image_new(CL_IMAGE_FORMAT_DICOM);
    img->width = 3, img->height = 2, img->channels = 1;
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_image_alloc_frames(img, 2, &err));
    float *p = cl_image_plane(img, 0, 0);
    const float v[6] = { 0, 10, 20, 30, 40, 50 };
    memcpy(p, v, sizeof v);
    ClFrame *f0 = g_ptr_array_index(img->frames, 0);
    f0->rescale_slope = -1.5;
    f0->rescale_intercept = 100.25;
    ClFrameStats st;
    cl_image_frame_stats(img, 0, &st);
    /* modality values 100.25 .. 25.25: a negative slope swaps min and max */
    g_assert_cmpfloat_with_epsilon(st.min, 100.25 - 1.5 * 50, 1e-9);
    g_assert_cmpfloat_with_epsilon(st.max, 100.25, 1e-9);
    g_assert_cmpfloat_with_epsilon(st.mean, 100.25 - 1.5 * 25, 1e-9);

    float *q = cl_image_plane(img, 1, 0);
    q[0] = NAN, q[1] = 4, q[2] = INFINITY, q[3] = -2, q[4] = 0, q[5] = 4;
    cl_image_frame_stats(img, 1, &st);
    g_assert_cmpfloat(st.min, ==, -2);
    g_assert_cmpfloat(st.max, ==, 4);
    g_assert_cmpfloat_with_epsilon(st.mean, 1.5, 1e-12);
}

static void test_meta(void)
{
    g_autoptr(ClImage) img = cl_image_new(CL_IMAGE_FORMAT_PNG);
    cl_image_add_meta(img, "Comment", "caf\xc3\xa9");
    cl_image_add_meta(img, "Bad",
                      "a\xff\xfe"
                      "b"); /* invalid UTF-8 is made valid */
    g_assert_cmpstr(cl_image_get_meta(img, "Comment"), ==, "caf\xc3\xa9");
    g_assert_true(g_utf8_validate(cl_image_get_meta(img, "Bad"), -1, NULL));
    g_assert_null(cl_image_get_meta(img, "Missing"));

    /* a 1 MB text chunk is kept as its first 64 KiB, saying how long it was */
    gsize n = (gsize)1 << 20;
    g_autofree char *big = g_malloc(n + 1);
    memset(big, 'A', n);
    big[n] = '\0';
    cl_image_add_meta(img, "Comment", big);
    const char *kept =
        ((ClMetaEntry *)g_ptr_array_index(img->metadata, img->metadata->len - 1))->value;
    g_assert_cmpuint(strlen(kept), <=, CL_IMAGE_META_MAX + 64);
    g_assert_cmpuint(strlen(kept), >=, CL_IMAGE_META_MAX - 8);
    g_assert_true(g_str_has_suffix(kept, "… (cut: 1048576 bytes in the file)"));
    g_assert_true(g_utf8_validate(kept, -1, NULL));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/image/limits", test_limits);
    g_test_add_func("/image/detect", test_detect);
    g_test_add_func("/image/errors", test_errors);
    g_test_add_func("/image/stats", test_stats);
    g_test_add_func("/image/meta", test_meta);
    return g_test_run();
}
