/* test-register.c - core/align/register: known shifts, rotations, affine maps, exposure changes,
 * noise and a resolution change are recovered to under half a pixel; unrelated images are not
 * "aligned"; cancellation. */
#include <math.h>
#include <string.h>

#include "fixtures.h"
#include "align/register.h"

#define W 300
#define H 240

/* A textured scene: a gradient, blobs and stripes, smooth enough to interpolate. */
static double scene(double x, double y)
{
    double v = 0.2 + 0.3 * x / W + 0.1 * y / H;
    static const double blobs[][4] = { { 60, 50, 18, 0.5 },    { 210, 70, 25, -0.3 },
                                       { 130, 170, 30, 0.4 },  { 250, 200, 15, 0.35 },
                                       { 40, 190, 22, -0.25 }, { 150, 90, 12, 0.3 } };
    for (guint i = 0; i < G_N_ELEMENTS(blobs); i++) {
        double dx = x - blobs[i][0], dy = y - blobs[i][1];
        v += blobs[i][3] * exp(-(dx * dx + dy * dy) / (2 * blobs[i][2] * blobs[i][2]));
    }
    v += 0.05 * sin(x / 7.0) * cos(y / 9.0);
    return v;
}

/* An 8-bit grey image w × h whose pixel (i, j) shows the scene at T^-1 of its centre, where
 * T maps scene (fixed) points to this image's points: t = {t0, a, b, t3, c, d}. */
static ClImage *render(guint w, guint h, const double t[6], double gain, double bias, double noise,
                       guint32 seed)
{
    ClImage *img = cl_image_new(CL_IMAGE_FORMAT_PNG);
    img->width = w, img->height = h, img->channels = 1;
    img->bits = img->bits_allocated = 8;
    img->sample_format = CL_SAMPLE_UINT;
    img->layout = CL_LAYOUT_GREY;
    g_assert_true(cl_image_alloc_frames(img, 1, NULL));
    ClFrame *f = g_ptr_array_index(img->frames, 0);
    f->rescale_slope = 1;
    float *p = cl_image_plane(img, 0, 0);
    double det = t[1] * t[5] - t[2] * t[4];
    GRand *rng = g_rand_new_with_seed(seed);
    for (guint j = 0; j < h; j++)
        for (guint i = 0; i < w; i++) {
            double mx = i + 0.5 - t[0], my = j + 0.5 - t[3];
            double x = (t[5] * mx - t[2] * my) / det, y = (-t[4] * mx + t[1] * my) / det;
            double v = gain * scene(x, y) + bias + noise * (g_rand_double(rng) - 0.5);
            p[(gsize)j * w + i] = (float)CLAMP(round(v * 255), 0, 255);
        }
    g_rand_free(rng);
    return img;
}

static const double identity[6] = { 0, 1, 0, 0, 0, 1 };

/* The largest distance between the found and the true map over a grid of fixed points. */
static double map_error(const ClRegistration *r, const double t[6])
{
    double worst = 0;
    for (double y = 30; y < H - 30; y += 30)
        for (double x = 30; x < W - 30; x += 30) {
            double mx, my;
            cl_registration_apply(r, x, y, &mx, &my);
            double ex = mx - (t[0] + t[1] * x + t[2] * y), ey = my - (t[3] + t[4] * x + t[5] * y);
            worst = MAX(worst, hypot(ex, ey));
        }
    return worst;
}

static void check(const char *what, const double t[6], ClRegisterModel model, double gain,
                  double bias, double noise, guint mw, guint mh)
{
    g_autoptr(ClImage) fixed = render(W, H, identity, 1, 0, 0, 1);
    g_autoptr(ClImage) moving = render(mw, mh, t, gain, bias, noise, 2);
    ClRegistration r;
    g_autoptr(GError) error = NULL;
    g_assert_true(cl_register_images(fixed, 0, moving, 0, model, &r, NULL, &error));
    g_assert_no_error(error);
    double err = map_error(&r, t);
    g_test_message("%s: error %.3f px, quality %.3f (before %.3f), overlap %.2f", what, err,
                   r.quality, r.before, r.overlap);
    g_assert_true(r.improved);
    g_assert_cmpfloat(err, <, 0.5);
    g_assert_cmpfloat(r.quality, >, 0.9);
    g_assert_cmpfloat(r.quality, >, r.before);
}

static void test_translation(void)
{
    const double t[6] = { 7.3, 1, 0, -4.6, 0, 1 };
    check("translation", t, CL_REGISTER_TRANSLATION, 1, 0, 0, W, H);
}

static void test_rigid_with_exposure_and_noise(void)
{
    double th = 3.0 * G_PI / 180;
    const double t[6] = { 9, cos(th), -sin(th), -6, sin(th), cos(th) };
    check("rigid", t, CL_REGISTER_RIGID, 0.8, 0.1, 0.04, W, H);
}

static void test_affine(void)
{
    const double t[6] = { -5, 1.03, 0.02, 4, -0.015, 0.97 };
    check("affine", t, CL_REGISTER_AFFINE, 1, 0, 0.02, W, H);
}

static void test_resolution(void)
{
    /* the moving image has twice the pixels, and is shifted */
    const double t[6] = { 12, 2, 0, 8, 0, 2 };
    check("resolution", t, CL_REGISTER_RIGID, 1, 0, 0, 2 * W, 2 * H);
}

static void test_unrelated(void)
{
    g_autoptr(ClImage) fixed = render(W, H, identity, 1, 0, 0, 1);
    /* noise only: nothing to align to */
    g_autoptr(ClImage) noise = render(W, H, identity, 0, 0.5, 1.0, 3);
    ClRegistration r;
    g_assert_true(cl_register_images(fixed, 0, noise, 0, CL_REGISTER_AFFINE, &r, NULL, NULL));
    g_test_message("unrelated: quality %.3f, improved %d", r.quality, r.improved);
    g_assert_cmpfloat(fabs(r.quality), <, 0.3);
}

static void test_cancel_and_errors(void)
{
    g_autoptr(ClImage) a = render(W, H, identity, 1, 0, 0, 1);
    g_autoptr(GCancellable) c = g_cancellable_new();
    g_cancellable_cancel(c);
    ClRegistration r;
    g_autoptr(GError) error = NULL;
    g_assert_false(cl_register_images(a, 0, a, 0, CL_REGISTER_AFFINE, &r, c, &error));
    g_assert_error(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
    g_clear_error(&error);
    g_assert_false(cl_register_images(a, 3, a, 0, CL_REGISTER_AFFINE, &r, NULL, &error));
    g_assert_nonnull(error);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/register/translation", test_translation);
    g_test_add_func("/register/rigid-exposure-noise", test_rigid_with_exposure_and_noise);
    g_test_add_func("/register/affine", test_affine);
    g_test_add_func("/register/resolution", test_resolution);
    g_test_add_func("/register/unrelated", test_unrelated);
    g_test_add_func("/register/cancel-and-errors", test_cancel_and_errors);
    return g_test_run();
}
