/* test-sequence.c - ordering (DICOM by date-time then instance number; others as given),
 * multi-frame expansion and the mixed-patient / mixed-size warnings. */
#include <cairo.h>
#include <string.h>

#include "fixtures.h"
#include "image/sequence.h"

static ClImage *fake(ClImageFormat fmt, const char *path, guint w, guint h, guint frames)
{
    ClImage *img = cl_image_new(fmt);
    img->path = g_strdup(path);
    img->width = w, img->height = h, img->channels = 1, img->bits = 8;
    g_assert_true(cl_image_alloc_frames(img, frames, NULL));
    return img;
}

static ClImage *fake_dicom(const char *path, const char *acq, const char *study, int instance,
                           const char *patient)
{
    ClImage *img = fake(CL_IMAGE_FORMAT_DICOM, path, 4, 4, 1);
    img->acquisition_datetime = g_strdup(acq);
    img->study_datetime = g_strdup(study);
    img->instance_number = instance;
    img->patient_id = g_strdup(patient);
    img->modality = g_strdup("CR");
    return img;
}

static GPtrArray *labels(const ClSequence *seq)
{
    GPtrArray *out = g_ptr_array_new();
    for (guint i = 0; i < cl_sequence_length(seq); i++)
        g_ptr_array_add(out, cl_sequence_item(seq, i)->label);
    return out;
}

static void test_dicom_order(void)
{
    ClImage *imgs[] = {
        fake_dicom("/s/c.dcm", "20240301101500", "20240301", 1, "P1"),
        fake_dicom("/s/a.dcm", "20230105080000", "20230105", 7, "P1"),
        fake_dicom("/s/b2.dcm", NULL, "20230601120000", 2, "P1"), /* study time only */
        fake_dicom("/s/b1.dcm", NULL, "20230601120000", 1, "P1"), /* same study, instance 1 */
        fake_dicom("/s/z.dcm", NULL, NULL, 3, "P1"),              /* no dates: last */
    };
    g_autoptr(ClSequence) seq = cl_sequence_new_from_images(imgs, G_N_ELEMENTS(imgs));
    g_autoptr(GPtrArray) l = labels(seq);
    const char *want[] = { "a.dcm", "b1.dcm", "b2.dcm", "c.dcm", "z.dcm" };
    g_assert_cmpuint(l->len, ==, G_N_ELEMENTS(want));
    for (guint i = 0; i < l->len; i++)
        g_assert_cmpstr(g_ptr_array_index(l, i), ==, want[i]);
    g_assert_cmpuint(seq->warnings->len, ==, 0);
}

static void test_mixed_patients_and_sizes(void)
{
    ClImage *imgs[] = {
        fake_dicom("/s/1.dcm", "20240101", NULL, 1, "P1"),
        fake_dicom("/s/2.dcm", "20240102", NULL, 1, "P2"),
    };
    g_autoptr(ClSequence) seq = cl_sequence_new_from_images(imgs, 2);
    g_assert_cmpuint(cl_sequence_length(seq), ==, 2); /* flagged, not refused */
    g_assert_cmpuint(seq->warnings->len, ==, 1);
    g_assert_nonnull(strstr(g_ptr_array_index(seq->warnings, 0), "mixes patients"));

    ClImage *imgs2[] = { fake(CL_IMAGE_FORMAT_PNG, "/p/x.png", 10, 10, 1),
                         fake(CL_IMAGE_FORMAT_PNG, "/p/y.png", 12, 10, 1) };
    g_autoptr(ClSequence) seq2 = cl_sequence_new_from_images(imgs2, 2);
    g_assert_cmpuint(seq2->warnings->len, ==, 1);
    g_assert_nonnull(strstr(g_ptr_array_index(seq2->warnings, 0), "mixes image sizes"));
}

static void test_given_order_and_frames(void)
{
    /* non-DICOM files keep the given order; DICOMs sort among the DICOM places */
    ClImage *imgs[] = {
        fake(CL_IMAGE_FORMAT_PNG, "/m/z.png", 4, 4, 1),
        fake_dicom("/m/late.dcm", "20240101", NULL, 1, "P"),
        fake(CL_IMAGE_FORMAT_TIFF, "/m/a.tif", 4, 4, 3),
        fake_dicom("/m/early.dcm", "20200101", NULL, 1, "P"),
    };
    g_autoptr(ClSequence) seq = cl_sequence_new_from_images(imgs, 4);
    g_autoptr(GPtrArray) l = labels(seq);
    const char *want[] = {
        "z.png",   "early.dcm", "a.tif [frame 1/3]", "a.tif [frame 2/3]", "a.tif [frame 3/3]",
        "late.dcm"
    };
    g_assert_cmpuint(l->len, ==, G_N_ELEMENTS(want));
    for (guint i = 0; i < l->len; i++)
        g_assert_cmpstr(g_ptr_array_index(l, i), ==, want[i]);
    g_assert_cmpuint(cl_sequence_item(seq, 3)->frame, ==, 1);
    g_assert_true(cl_sequence_item(seq, 2)->image == cl_sequence_item(seq, 4)->image);
}

static char *write_png(const char *dir, const char *name, int w, int h)
{
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    cairo_t *cr = cairo_create(s);
    cairo_set_source_rgb(cr, 0.2, 0.4, 0.6);
    cairo_paint(cr);
    cairo_destroy(cr);
    char *path = g_build_filename(dir, name, NULL);
    g_assert_cmpint(cairo_surface_write_to_png(s, path), ==, CAIRO_STATUS_SUCCESS);
    cairo_surface_destroy(s);
    return path;
}

static void test_open_files(void)
{
    g_autofree char *dir = cl_fixture_tmpdir("cl-test-seq");
    g_autofree char *b = write_png(dir, "b.png", 16, 8);
    g_autofree char *a = write_png(dir, "a.png", 8, 8);
    const char *paths[] = { b, a };
    g_autoptr(GError) err = NULL;
    g_autoptr(ClSequence) seq = cl_sequence_open(paths, 2, NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(cl_sequence_length(seq), ==, 2);
    g_assert_cmpstr(cl_sequence_item(seq, 0)->label, ==, "b.png");
    g_assert_cmpuint(cl_sequence_item(seq, 0)->image->width, ==, 16);
    g_assert_cmpuint(seq->warnings->len, ==, 1);

    /* one missing file fails the whole call, naming the file */
    g_autofree char *missing = g_build_filename(dir, "gone.dcm", NULL);
    const char *paths2[] = { a, missing };
    g_assert_null(cl_sequence_open(paths2, 2, NULL, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_IO);
    g_assert_nonnull(strstr(err->message, "gone.dcm"));
    g_clear_error(&err);
    g_assert_null(cl_sequence_open(NULL, 0, NULL, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_INVALID);
    cl_fixture_rmdir(dir);
}

static void test_group(void)
{
    ClImage *imgs[] = {
        fake(CL_IMAGE_FORMAT_PNG, "/p/site-before.png", 8, 8, 1),
        fake_dicom("/d/1.dcm", "20240101", NULL, 1, "P1"),
        fake(CL_IMAGE_FORMAT_PNG, "/p/site_after.png", 8, 8, 1),
        fake_dicom("/d/2.dcm", "20240102", NULL, 1, "P2"),
        fake(CL_IMAGE_FORMAT_PNG, "/p/Site (2).png", 8, 8, 1),
        fake_dicom("/d/3.dcm", "20240103", NULL, 1, "P1"),
        fake(CL_IMAGE_FORMAT_PNG, "/p/other-v3.png", 8, 8, 1),
        fake(CL_IMAGE_FORMAT_TIFF, "/g/a.tif", 100, 100, 1),
        fake(CL_IMAGE_FORMAT_TIFF, "/g/b.tif", 100, 100, 1),
        fake(CL_IMAGE_FORMAT_TIFF, "/g/far.tif", 100, 100, 1),
    };
    const double t[3][6] = { { 500000, 10, 0, 4000000, 0, -10 },
                             { 500020, 10, 0, 3999980, 0, -10 }, /* shifted by 2 pixels */
                             { 600000, 10, 0, 4000000, 0, -10 } };
    for (int k = 0; k < 3; k++) {
        ClImage *g = imgs[7 + k];
        g->geo = g_new0(ClGeoInfo, 1);
        g->geo->has_transform = TRUE;
        g->geo->epsg = 32633;
        memcpy(g->geo->transform, t[k], sizeof t[k]);
    }
    guint group[G_N_ELEMENTS(imgs)];
    guint n = cl_sequence_group((const ClImage *const *)imgs, G_N_ELEMENTS(imgs), group);
    /* site×3, P1×2, P2, other, the two near tiles, the far one */
    g_assert_cmpuint(n, ==, 6);
    g_assert_cmpuint(group[0], ==, group[2]);
    g_assert_cmpuint(group[0], ==, group[4]);
    g_assert_cmpuint(group[1], ==, group[5]);
    g_assert_cmpuint(group[1], !=, group[3]);
    g_assert_cmpuint(group[6], !=, group[0]);
    g_assert_cmpuint(group[7], ==, group[8]);
    g_assert_cmpuint(group[9], !=, group[7]);
    g_assert_cmpuint(group[0], ==, 0);
    g_assert_cmpuint(group[1], ==, 1);
    for (guint i = 0; i < G_N_ELEMENTS(imgs); i++) {
        if (imgs[i]->geo)
            g_free(imgs[i]->geo), imgs[i]->geo = NULL;
        cl_image_free(imgs[i]);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/sequence/dicom-order", test_dicom_order);
    g_test_add_func("/sequence/mixed", test_mixed_patients_and_sizes);
    g_test_add_func("/sequence/given-order-and-frames", test_given_order_and_frames);
    g_test_add_func("/sequence/open-files", test_open_files);
    g_test_add_func("/sequence/group", test_group);
    return g_test_run();
}
