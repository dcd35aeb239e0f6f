/* test-measure.c - measurements in an image's own units (image/measure.h): lengths in mm from
 * DICOM pixel spacing, in m from a projected raster's pixel size, in px otherwise (a geographic
 * CRS's degrees too); a rectangle's pixels, values in modality units, area and its text. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "image/measure.h"

/* A 10 × 8 grey image whose pixel (x, y) stores x + 10 y, rescaled by value = 2 · stored − 10. */
static ClImage *ramp(void)
{
    ClImage *img = cl_image_new(CL_IMAGE_FORMAT_DICOM);
    img->width = 10, img->height = 8, img->channels = 1;
    img->layout = CL_LAYOUT_GREY;
    g_assert_true(cl_image_alloc_frames(img, 1, NULL));
    float *p = cl_image_plane(img, 0, 0);
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 10; x++)
            p[y * 10 + x] = (float)(x + 10 * y);
    ClFrame *f = (ClFrame *)cl_image_frame(img, 0);
    f->rescale_slope = 2, f->rescale_intercept = -10;
    return img;
}

static void test_length(void)
{
    g_autoptr(ClImage) img = ramp();
    double len = 0;
    /* no spacing: pixels */
    g_assert_cmpint(cl_measure_length(img, 0, 0, 3, 4, &len), ==, CL_MEASURE_PIXELS);
    g_assert_cmpfloat_with_epsilon(len, 5, 1e-12);
    /* DICOM PixelSpacing: 0.5 mm between rows, 0.25 mm between columns */
    img->has_pixel_spacing = TRUE;
    img->pixel_spacing[0] = 0.5, img->pixel_spacing[1] = 0.25;
    g_assert_cmpint(cl_measure_length(img, 0, 0, 8, 0, &len), ==, CL_MEASURE_MM);
    g_assert_cmpfloat_with_epsilon(len, 2.0, 1e-12); /* 8 columns × 0.25 */
    g_assert_cmpint(cl_measure_length(img, 0, 0, 0, 6, &len), ==, CL_MEASURE_MM);
    g_assert_cmpfloat_with_epsilon(len, 3.0, 1e-12); /* 6 rows × 0.5 */
    g_autofree char *t = cl_measure_length_text(CL_MEASURE_MM, 12.345);
    g_assert_cmpstr(t, ==, "12.3 mm");
    /* a projected raster of 10 m pixels; a geographic one's degrees are no length */
    img->has_pixel_spacing = FALSE;
    img->geo = g_new0(ClGeoInfo, 1);
    img->geo->epsg = 32633;
    img->geo->pixel_size[0] = img->geo->pixel_size[1] = 10;
    g_assert_cmpint(cl_measure_length(img, 0, 0, 3, 4, &len), ==, CL_MEASURE_M);
    g_assert_cmpfloat_with_epsilon(len, 50, 1e-9);
    img->geo->epsg = 4326;
    g_assert_cmpint(cl_measure_length(img, 0, 0, 3, 4, &len), ==, CL_MEASURE_PIXELS);
    g_assert_cmpfloat_with_epsilon(len, 5, 1e-12);
}

static void test_region(void)
{
    g_autoptr(ClImage) img = ramp();
    ClMeasureRegion r;
    /* columns 2-4 and rows 1-2 (centres 2.5 .. 4.5 and 1.5 .. 2.5 inside [2, 5) × [1, 3)) */
    g_assert_true(cl_measure_region(img, 0, 5, 3, 2, 1, &r));
    g_assert_cmpuint(r.n, ==, 6);
    /* stored 12 13 14 22 23 24 → 14 16 18 34 36 38 */
    g_assert_cmpfloat_with_epsilon(r.mean, 26, 1e-9);
    g_assert_cmpfloat_with_epsilon(r.min, 14, 1e-9);
    g_assert_cmpfloat_with_epsilon(r.max, 38, 1e-9);
    /* deviations from 26: -12 -10 -8 8 10 12 */
    g_assert_cmpfloat_with_epsilon(r.sd, sqrt((144 + 100 + 64 + 64 + 100 + 144) / 6.0), 1e-9);
    g_assert_cmpint(r.unit, ==, CL_MEASURE_PIXELS);
    g_assert_cmpfloat_with_epsilon(r.area, 6, 1e-12);
    /* with spacing the area is in mm² and the text says so, and the rescale type */
    img->has_pixel_spacing = TRUE;
    img->pixel_spacing[0] = 0.5, img->pixel_spacing[1] = 0.25;
    img->rescale_type = g_strdup("HU");
    g_assert_true(cl_measure_region(img, 0, 2, 1, 5, 3, &r));
    g_assert_cmpfloat_with_epsilon(r.area, 6 * 0.125, 1e-12);
    g_autofree char *t = cl_measure_region_text(img, &r);
    g_assert_cmpstr(t, ==, "mean 26.0, SD 10.1 HU over 6 px, 0.750 mm²");
    /* clamped to the image; outside it or empty: none */
    g_assert_true(cl_measure_region(img, 0, -5, -5, 100, 100, &r));
    g_assert_cmpuint(r.n, ==, 80);
    g_assert_false(cl_measure_region(img, 0, 20, 20, 30, 30, &r));
    g_assert_false(cl_measure_region(img, 0, 2.2, 1, 2.4, 3, &r)); /* no centre inside */
    g_assert_false(cl_measure_region(img, 1, 0, 0, 5, 5, &r));     /* no such frame */
    /* a projected raster: m² and ha */
    img->has_pixel_spacing = FALSE;
    img->geo = g_new0(ClGeoInfo, 1);
    img->geo->epsg = 32633;
    img->geo->pixel_size[0] = img->geo->pixel_size[1] = 10;
    g_assert_true(cl_measure_region(img, 0, 0, 0, 10, 8, &r));
    g_assert_cmpfloat_with_epsilon(r.area, 8000, 1e-9);
    g_free(img->rescale_type);
    img->rescale_type = NULL;
    g_assert_true(cl_measure_region(img, 0, 0, 0, 10, 8, &r));
    r.area = 25000; /* the text's hectares */
    g_autofree char *ha = cl_measure_region_text(img, &r);
    g_assert_nonnull(strstr(ha, "25000 m² (2.50 ha)"));
    /* areas alone: none in pixels, mm², m², hectares from 10,000 m²; the whole frame's */
    g_assert_null(cl_measure_area_text(CL_MEASURE_PIXELS, 5));
    g_autofree char *mm2 = cl_measure_area_text(CL_MEASURE_MM, 37.5);
    g_assert_cmpstr(mm2, ==, "37.5 mm²");
    g_autofree char *m2 = cl_measure_area_text(CL_MEASURE_M, 820);
    g_assert_cmpstr(m2, ==, "820 m²");
    double whole = 0;
    g_assert_cmpint(cl_measure_image_area(img, &whole), ==, CL_MEASURE_M);
    g_assert_cmpfloat_with_epsilon(whole, 10 * 8 * 100, 1e-9);
    /* a header-only image has no pixels to measure */
    ClFrame *f = (ClFrame *)cl_image_frame(img, 0);
    float *keep = f->data;
    f->data = NULL;
    g_assert_false(cl_measure_region(img, 0, 0, 0, 5, 5, &r));
    f->data = keep;
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/measure/length", test_length);
    g_test_add_func("/measure/region", test_region);
    return g_test_run();
}
