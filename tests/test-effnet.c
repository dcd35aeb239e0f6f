/* test-effnet.c - EfficientNet-Lite0 (model/effnet.h) with the pretrained weights set-up fetches:
 * ImageNet top-5 of scikit-image's chelsea.png (a tabby cat) and coffee.png (a cup of espresso),
 * kept for independent checks (never trained or tuned on); malformed files refused; the feature
 * maps' shapes. Skipped, saying why, without the weights or the images. */
#include <gdk-pixbuf/gdk-pixbuf.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "model/config.h"
#include "model/effnet.h"
#include "model/model.h"
#include "model/safetensors.h"

#define SKIMAGE_DATA "/usr/lib/python3/dist-packages/skimage/data"

static ClEffnet *net;
static char *skip_reason;

/* size × size × 3 in [0, 1]: the image scaled to fill the square (bilinear), centre-cropped */
static float *load_rgb(const char *path, int size)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(GdkPixbuf) pb = gdk_pixbuf_new_from_file(path, &err);
    g_assert_no_error(err);
    int w = gdk_pixbuf_get_width(pb), h = gdk_pixbuf_get_height(pb);
    double s = (double)size / MIN(w, h);
    int sw = MAX(size, (int)lround(w * s)), sh = MAX(size, (int)lround(h * s));
    g_autoptr(GdkPixbuf) sc = gdk_pixbuf_scale_simple(pb, sw, sh, GDK_INTERP_BILINEAR);
    int x0 = (sw - size) / 2, y0 = (sh - size) / 2, n = gdk_pixbuf_get_n_channels(sc);
    int stride = gdk_pixbuf_get_rowstride(sc);
    const guint8 *px = gdk_pixbuf_read_pixels(sc);
    float *rgb = g_new(float, (size_t)size * size * 3);
    for (int y = 0; y < size; y++)
        for (int x = 0; x < size; x++)
            for (int c = 0; c < 3; c++)
                rgb[((size_t)y * size + x) * 3 + c] =
                    px[(size_t)(y + y0) * stride + (size_t)(x + x0) * n + c] / 255.0f;
    return rgb;
}

static void top5(const float *logits, int *out)
{
    for (int k = 0; k < 5; k++) {
        int best = -1;
        for (int i = 0; i < CL_EFFNET_CLASSES; i++) {
            gboolean taken = FALSE;
            for (int j = 0; j < k; j++)
                taken = taken || out[j] == i;
            if (!taken && (best < 0 || logits[i] > logits[best]))
                best = i;
        }
        out[k] = best;
    }
}

/* One of `want` (ImageNet class indices) among the top 5, and the first of them in the top 2. */
static void check_image(const char *file, const int *want, int n_want)
{
    if (skip_reason) {
        g_test_skip(skip_reason);
        return;
    }
    g_autofree char *path = g_build_filename(SKIMAGE_DATA, file, NULL);
    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        g_test_skip("scikit-image's sample images are not installed (python3-skimage)");
        return;
    }
    g_autofree float *rgb = load_rgb(path, 224);
    float logits[CL_EFFNET_CLASSES];
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_effnet_logits(net, rgb, 224, logits, &err));
    int t[5];
    top5(logits, t);
    g_test_message("%s: top-5 classes %d %d %d %d %d", file, t[0], t[1], t[2], t[3], t[4]);
    gboolean in_top2 = FALSE;
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < n_want; j++)
            in_top2 = in_top2 || t[k] == want[j];
    g_assert_true(in_top2);
}

static void test_chelsea(void)
{
    /* 281 tabby, 282 tiger cat, 285 Egyptian cat */
    check_image("chelsea.png", (const int[]){ 281, 282, 285 }, 3);
}

static void test_coffee(void)
{
    /* 967 espresso, 968 cup, 504 coffee mug */
    check_image("coffee.png", (const int[]){ 967, 968, 504 }, 3);
}

static void test_features(void)
{
    if (skip_reason) {
        g_test_skip(skip_reason);
        return;
    }
    g_autofree float *rgb = g_new0(float, 224 * 224 * 3);
    int n, c;
    g_autoptr(GError) err = NULL;
    g_autofree float *f16 = cl_effnet_features(net, rgb, 224, 16, &n, &c, &err);
    g_assert_no_error(err);
    g_assert_cmpint(n, ==, 14 * 14);
    g_assert_cmpint(c, ==, 112);
    g_autofree float *f32 = cl_effnet_features(net, rgb, 224, 32, &n, &c, &err);
    g_assert_cmpint(n, ==, 7 * 7);
    g_assert_cmpint(c, ==, 1280);
    g_assert_null(cl_effnet_features(net, rgb, 100, 16, &n, &c, &err));
    g_assert_error(err, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT);
}

/* A file that is not Lite0's: refused with the tensor named. */
static void test_malformed(void)
{
    g_autofree char *dir = g_dir_make_tmp("cl-effnet-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "bad.safetensors", NULL);
    const gint64 shape[4] = { 32, 3, 3, 3 };
    g_autofree float *w = g_new0(float, 32 * 27);
    ClSafetensorsEntry e = { "_conv_stem.weight", CL_DTYPE_F32, 4, shape, w };
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_safetensors_write(path, &e, 1, NULL, NULL, &err));
    g_assert_null(cl_effnet_load(path, &err));
    g_assert_error(err, CL_MODEL_ERROR, CL_MODEL_ERROR_FILE);
    g_assert_nonnull(strstr(err->message, "_bn0"));
    g_unlink(path);
    g_rmdir(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_autofree char *path = cl_pretrained_path(CL_EFFNET_FILE);
    g_autoptr(GError) err = NULL;
    if (!g_file_test(path, G_FILE_TEST_EXISTS))
        skip_reason = g_strdup_printf("%s is not there (set-up could not fetch it)", path);
    else if (!(net = cl_effnet_load(path, &err)))
        g_error("%s", err->message);
    g_test_add_func("/effnet/chelsea", test_chelsea);
    g_test_add_func("/effnet/coffee", test_coffee);
    g_test_add_func("/effnet/features", test_features);
    g_test_add_func("/effnet/malformed", test_malformed);
    int rc = g_test_run();
    cl_effnet_free(net);
    g_free(skip_reason);
    return rc;
}
