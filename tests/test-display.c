/* test-display.c - the display transform: DICOM window formula, VOI LUT, MONOCHROME1 after VOI,
 * fractional/negative rescale, 16-bit and float stretches, band→RGB, nodata, defaults, errors. */
#include <math.h>
#include <string.h>

#include "image/display.h"
#include "fixtures.h"

/* A w×1 single-channel image of the given values. */
static ClImage *row_image(ClImageFormat fmt, const float *v, guint w, guint bits, ClSampleFormat sf)
{
    ClImage *img = cl_image_new(fmt);
    img->width = w, img->height = 1, img->channels = 1;
    img->bits = bits, img->bits_allocated = bits > 8 ? 16 : 8;
    img->sample_format = sf;
    img->layout = CL_LAYOUT_GREY;
    g_assert_true(cl_image_alloc_frames(img, 1, NULL));
    memcpy(cl_image_plane(img, 0, 0), v, w * sizeof(float));
    return img;
}

static guint8 *render(const ClImage *img, const ClDisplaySettings *s)
{
    g_autoptr(GError) err = NULL;
    guint8 *px = cl_display_render_rgba(img, 0, s, &err);
    g_assert_no_error(err);
    g_assert_nonnull(px);
    return px;
}

static void test_dicom_window(void)
{
    /* PS3.3 C.11.2.1.2.1, c = 40, w = 400: x <= -160 -> 0, x > 239 -> 255, else linear */
    const float v[] = { -1000, -160, -159, 39.5f, 239, 240, 3000 };
    g_autoptr(ClImage) img =
        row_image(CL_IMAGE_FORMAT_DICOM, v, G_N_ELEMENTS(v), 16, CL_SAMPLE_INT);
    img->photometric = g_strdup("MONOCHROME2");
    ClDisplaySettings s;
    cl_display_settings_init(&s, img, 0);
    s.mode = CL_DISPLAY_WINDOW, s.center = 40, s.width = 400;
    g_autofree guint8 *px = render(img, &s);
    double y_m159 = ((-159 - 39.5) / 399.0 + 0.5);
    double y_239 = ((239 - 39.5) / 399.0 + 0.5);
    const int want[] = { 0, 0, (int)lround(y_m159 * 255), 128, (int)lround(y_239 * 255), 255, 255 };
    for (guint i = 0; i < G_N_ELEMENTS(v); i++) {
        g_assert_cmpint(px[i * 4], ==, want[i]);
        g_assert_cmpint(px[i * 4 + 1], ==, want[i]);
        g_assert_cmpint(px[i * 4 + 3], ==, 255);
    }
}

static void test_rescale_then_window(void)
{
    /* stored -> modality with a fractional, negative slope, then the window in modality units */
    const float v[] = { 0, 100, 200 };
    g_autoptr(ClImage) img = row_image(CL_IMAGE_FORMAT_DICOM, v, 3, 12, CL_SAMPLE_UINT);
    img->photometric = g_strdup("MONOCHROME2");
    ClFrame *f = g_ptr_array_index(img->frames, 0);
    f->rescale_slope = -0.5;
    f->rescale_intercept = 50.25;                      /* modality values: 50.25, 0.25, -49.75 */
    cl_image_add_window(img, 0.25 + 0.5, 101, "test"); /* maps -49.75..50.25 onto 0..1 */
    ClDisplaySettings s;
    cl_display_settings_init(&s, img, 0);
    g_assert_cmpint(s.mode, ==, CL_DISPLAY_WINDOW);
    g_assert_cmpfloat(s.width, ==, 101);
    g_autofree guint8 *px = render(img, &s);
    g_assert_cmpint(px[0], ==, 255); /* stored 0 is the brightest after the negative slope */
    g_assert_cmpint(px[4], ==, 128);
    g_assert_cmpint(px[8], ==, 0);
}

static void test_monochrome1_after_voi(void)
{
    /* A non-linear VOI LUT: inversion after VOI (255 - LUT(x)) differs from LUT(inverted x). */
    const float v[] = { 0, 1, 2, 3 };
    g_autoptr(ClImage) img = row_image(CL_IMAGE_FORMAT_DICOM, v, 4, 8, CL_SAMPLE_UINT);
    img->photometric = g_strdup("MONOCHROME1");
    ClVoiLut *lut = g_new0(ClVoiLut, 1);
    lut->n_entries = 4, lut->first_value = 0, lut->bits = 8;
    lut->data = g_new(guint16, 4);
    const guint16 table[] = { 0, 10, 40, 255 };
    memcpy(lut->data, table, sizeof table);
    g_ptr_array_add(img->voi_luts, lut);
    ClDisplaySettings s;
    cl_display_settings_init(&s, img, 0);
    g_assert_cmpint(s.mode, ==, CL_DISPLAY_VOI_LUT);
    g_assert_true(s.invert);
    g_autofree guint8 *px = render(img, &s);
    for (int i = 0; i < 4; i++)
        g_assert_cmpint(px[i * 4], ==, 255 - table[i]);

    /* With a window preset the default is the window, still inverted */
    cl_image_add_window(img, 2, 4, NULL);
    cl_display_settings_init(&s, img, 0);
    g_assert_cmpint(s.mode, ==, CL_DISPLAY_WINDOW);
    g_autofree guint8 *px2 = render(img, &s);
    g_assert_cmpint(px2[0], ==, 255); /* lowest value white on MONOCHROME1 */
    g_assert_cmpint(px2[12], ==, 0);
}

static void test_dicom_defaults(void)
{
    const float v[] = { -1024, 0, 40, 3000 };
    g_autoptr(ClImage) ct = row_image(CL_IMAGE_FORMAT_DICOM, v, 4, 16, CL_SAMPLE_INT);
    ct->modality = g_strdup("CT");
    ct->photometric = g_strdup("MONOCHROME2");
    ClDisplaySettings s;
    cl_display_settings_init(&s, ct, 0);
    g_assert_cmpint(s.mode, ==, CL_DISPLAY_WINDOW);
    g_assert_cmpfloat(s.center, ==, 40);
    g_assert_cmpfloat(s.width, ==, 400);
    g_assert_false(s.invert);

    g_autoptr(ClImage) cr = row_image(CL_IMAGE_FORMAT_DICOM, v, 4, 16, CL_SAMPLE_INT);
    cr->modality = g_strdup("CR");
    cl_display_settings_init(&s, cr, 0);
    g_autofree guint8 *px = render(cr, &s);
    g_assert_cmpint(px[0], ==, 0); /* no preset: the frame's full range */
    g_assert_cmpint(px[12], ==, 255);
}

static void test_16bit_percentile(void)
{
    /* 0..9999 uniformly: the 2–98 % stretch maps <= 199.98 to 0 and >= 9799.02 to 255, and
     * neighbouring 16-bit values inside a narrow window stay distinct (no 8-bit truncation). */
    guint n = 10000;
    float *v = g_new(float, n);
    for (guint i = 0; i < n; i++)
        v[i] = (float)i;
    g_autoptr(ClImage) img = row_image(CL_IMAGE_FORMAT_PNG, v, n, 16, CL_SAMPLE_UINT);
    g_free(v);
    ClDisplaySettings s;
    cl_display_settings_init(&s, img, 0);
    g_assert_cmpint(s.mode, ==, CL_DISPLAY_PERCENTILE);
    double lo, hi;
    cl_display_channel_range(img, 0, 0, &s, &lo, &hi);
    g_assert_cmpfloat_with_epsilon(lo, 199.98, 1e-6);
    g_assert_cmpfloat_with_epsilon(hi, 9799.02, 1e-6);
    g_autofree guint8 *px = render(img, &s);
    g_assert_cmpint(px[150 * 4], ==, 0);
    g_assert_cmpint(px[9900 * 4], ==, 255);
    g_assert_cmpint(px[5000 * 4], ==, (int)lround((5000 - lo) / (hi - lo) * 255));

    s.mode = CL_DISPLAY_WINDOW, s.center = 1000.5, s.width = 1; /* 1000 -> 0, 1001 -> 255 */
    g_autofree guint8 *px2 = render(img, &s);
    g_assert_cmpint(px2[1000 * 4], ==, 0);
    g_assert_cmpint(px2[1001 * 4], ==, 255);

    s.mode = CL_DISPLAY_MINMAX;
    g_autofree guint8 *px3 = render(img, &s);
    g_assert_cmpint(px3[0], ==, 0);
    g_assert_cmpint(px3[9999 * 4], ==, 255);
}

static void test_float_and_nodata(void)
{
    const float v[] = { -0.5f, NAN, 0.25f, 1.5f, INFINITY };
    g_autoptr(ClImage) img = row_image(CL_IMAGE_FORMAT_TIFF, v, 5, 32, CL_SAMPLE_FLOAT);
    ClDisplaySettings s;
    cl_display_settings_init(&s, img, 0);
    s.mode = CL_DISPLAY_MINMAX;
    g_autofree guint8 *px = render(img, &s);
    g_assert_cmpint(px[0], ==, 0);
    g_assert_cmpint(px[3], ==, 255);
    g_assert_cmpint(px[4 + 3], ==, 0); /* NaN is transparent */
    g_assert_cmpint(px[8], ==, 96);    /* (0.25 + 0.5) / (1.5 + 0.5) * 255 */
    g_assert_cmpint(px[12], ==, 255);
    g_assert_cmpint(px[16 + 3], ==, 0); /* Inf too */
}

static void test_bands(void)
{
    /* 5 bands, band b holds value 100*b + x; show bands 4, 2, 0 as R, G, B, each stretched */
    ClImage *img = cl_image_new(CL_IMAGE_FORMAT_TIFF);
    img->width = 3, img->height = 1, img->channels = 5, img->bits = 16, img->bits_allocated = 16;
    img->layout = CL_LAYOUT_BANDS;
    g_assert_true(cl_image_alloc_frames(img, 1, NULL));
    for (guint b = 0; b < 5; b++)
        for (guint x = 0; x < 3; x++)
            cl_image_plane(img, 0, b)[x] = (float)(100 * b + x * (b + 1));
    ClDisplaySettings s;
    cl_display_settings_init(&s, img, 0);
    g_assert_true(s.per_band);
    g_assert_cmpint(s.bands[0], ==, 0);
    g_assert_cmpint(s.bands[2], ==, 2);
    s.mode = CL_DISPLAY_MINMAX;
    s.bands[0] = 4, s.bands[1] = 2, s.bands[2] = 0;
    g_autofree guint8 *px = render(img, &s);
    for (guint x = 0; x < 3; x++) {
        guint8 want = (guint8)lround(x / 2.0 * 255);
        g_assert_cmpint(px[x * 4 + 0], ==, want);
        g_assert_cmpint(px[x * 4 + 1], ==, want);
        g_assert_cmpint(px[x * 4 + 2], ==, want);
    }
    /* one shared range over the three shown bands: band 4 (400..410) is brighter than band 0 */
    s.per_band = FALSE;
    g_autofree guint8 *px2 = render(img, &s);
    g_assert_cmpint(px2[0], >, px2[2]);
    /* a band that does not exist is an error, not a crash */
    s.bands[1] = 5;
    g_autoptr(GError) err = NULL;
    g_assert_null(cl_display_render_rgba(img, 0, &s, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_INVALID);
    g_clear_error(&err);
    s.bands[1] = 1;
    g_assert_null(cl_display_render_rgba(img, 1, &s, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_INVALID);
    cl_image_free(img);
}

static void test_8bit_rgba(void)
{
    ClImage *img = cl_image_new(CL_IMAGE_FORMAT_PNG);
    img->width = 2, img->height = 1, img->channels = 4, img->bits = 8, img->bits_allocated = 8;
    img->layout = CL_LAYOUT_RGBA;
    g_assert_true(cl_image_alloc_frames(img, 1, NULL));
    const float rgba[4][2] = { { 10, 200 }, { 20, 100 }, { 30, 0 }, { 255, 51 } };
    for (int c = 0; c < 4; c++)
        memcpy(cl_image_plane(img, 0, (guint)c), rgba[c], sizeof rgba[c]);
    ClDisplaySettings s;
    cl_display_settings_init(&s, img, 0);
    g_assert_cmpint(s.mode, ==, CL_DISPLAY_FULL_RANGE);
    g_autofree guint8 *px = render(img, &s);
    const guint8 want[8] = { 10, 20, 30, 255, 200, 100, 0, 51 };
    g_assert_cmpmem(px, 8, want, 8);
    double c, w;
    g_assert_true(cl_display_effective_window(img, 0, &s, &c, &w));
    g_assert_cmpfloat(c, ==, 127.5);
    g_assert_cmpfloat(w, ==, 255);
    cl_image_free(img);
}

/* Regions: step 1 is the crop of the whole render, larger steps its block means; every render
 * of a 16-bit stretch uses the same resolved range; rectangles outside the image are errors. */
static void test_regions(void)
{
    const guint W = 37, H = 23; /* odd sizes: partial blocks at the edges */
    g_autoptr(ClImage) img = cl_image_new(CL_IMAGE_FORMAT_TIFF);
    img->width = W, img->height = H, img->channels = 1;
    img->bits = 16, img->bits_allocated = 16;
    img->sample_format = CL_SAMPLE_UINT;
    img->layout = CL_LAYOUT_GREY;
    g_assert_true(cl_image_alloc_frames(img, 1, NULL));
    float *p = cl_image_plane(img, 0, 0);
    for (guint i = 0; i < W * H; i++)
        p[i] = (float)((i * 7919u) % 60000u);
    ClDisplaySettings s;
    cl_display_settings_init(&s, img, 0);
    g_assert_cmpint(s.mode, ==, CL_DISPLAY_PERCENTILE);
    g_autofree guint8 *full = render(img, &s);
    ClDisplayRanges r;
    cl_display_resolve_ranges(img, 0, &s, &r);

    g_autoptr(GError) err = NULL;
    guint ow, oh;
    g_autofree guint8 *crop =
        cl_display_render_rgba_region(img, 0, &s, &r, 5, 3, 20, 11, 1, &ow, &oh, NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(ow, ==, 20);
    g_assert_cmpuint(oh, ==, 11);
    for (guint y = 0; y < 11; y++)
        g_assert_cmpmem(crop + (gsize)y * 20 * 4, 20 * 4, full + ((gsize)(y + 3) * W + 5) * 4,
                        20 * 4);

    g_autofree guint8 *half =
        cl_display_render_rgba_region(img, 0, &s, NULL, 0, 0, W, H, 4, &ow, &oh, NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(ow, ==, 10); /* ceil(37 / 4) */
    g_assert_cmpuint(oh, ==, 6);
    for (guint oy = 0; oy < oh; oy++)
        for (guint ox = 0; ox < ow; ox++) {
            guint sum = 0, n = 0;
            for (guint y = oy * 4; y < MIN(H, oy * 4 + 4); y++)
                for (guint x = ox * 4; x < MIN(W, ox * 4 + 4); x++)
                    sum += full[((gsize)y * W + x) * 4], n++;
            g_assert_cmpuint(half[((gsize)oy * ow + ox) * 4], ==, (sum + n / 2) / n);
        }

    g_assert_null(
        cl_display_render_rgba_region(img, 0, &s, &r, 30, 0, 10, 5, 1, &ow, &oh, NULL, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_INVALID);
    g_clear_error(&err);
    g_assert_null(
        cl_display_render_rgba_region(img, 0, &s, &r, 0, 0, 0, 5, 1, &ow, &oh, NULL, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_INVALID);
    g_clear_error(&err);
    g_autoptr(GCancellable) c = g_cancellable_new();
    g_cancellable_cancel(c);
    g_assert_null(cl_display_render_rgba_region(img, 0, &s, &r, 0, 0, W, H, 1, &ow, &oh, c, &err));
    g_assert_error(err, G_IO_ERROR, G_IO_ERROR_CANCELLED);
}

static void test_readout(void)
{
    const float v[] = { 100, 2000, -5 };
    g_autoptr(ClImage) img = row_image(CL_IMAGE_FORMAT_DICOM, v, 3, 12, CL_SAMPLE_INT);
    ClFrame *f = g_ptr_array_index(img->frames, 0);
    f->rescale_slope = 1, f->rescale_intercept = -1024;
    img->rescale_type = g_strdup("HU");
    img->has_pixel_spacing = TRUE;
    img->pixel_spacing[0] = 0.5, img->pixel_spacing[1] = 0.25;
    g_autofree char *r = cl_display_pixel_readout(img, 0, 1.7, 0.2);
    g_assert_cmpstr(r, ==, "x 1 y 0 (0.2, 0.0 mm) · 976 HU");
    g_assert_null(cl_display_pixel_readout(img, 0, 3.0, 0));
    g_assert_null(cl_display_pixel_readout(img, 0, -0.5, 0));
    g_assert_null(cl_display_pixel_readout(img, 1, 0, 0));

    g_autoptr(ClImage) geo = row_image(CL_IMAGE_FORMAT_TIFF, v, 3, 16, CL_SAMPLE_UINT);
    geo->geo = g_new0(ClGeoInfo, 1);
    geo->geo->has_transform = TRUE;
    geo->geo->epsg = 32633;
    const double t[6] = { 500000, 0.5, 0, 4000000, 0, -0.5 };
    memcpy(geo->geo->transform, t, sizeof t);
    g_autofree char *g = cl_display_pixel_readout(geo, 0, 2.5, 0.5);
    g_assert_cmpstr(g, ==, "x 2 y 0 (500001.25, 3999999.75 EPSG:32633) · -5");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/display/dicom-window", test_dicom_window);
    g_test_add_func("/display/rescale-then-window", test_rescale_then_window);
    g_test_add_func("/display/monochrome1-after-voi", test_monochrome1_after_voi);
    g_test_add_func("/display/dicom-defaults", test_dicom_defaults);
    g_test_add_func("/display/16bit-percentile", test_16bit_percentile);
    g_test_add_func("/display/float-nodata", test_float_and_nodata);
    g_test_add_func("/display/bands", test_bands);
    g_test_add_func("/display/8bit-rgba", test_8bit_rgba);
    g_test_add_func("/display/regions", test_regions);
    g_test_add_func("/display/readout", test_readout);
    return g_test_run();
}
