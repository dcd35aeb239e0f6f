/* test-effnet.c - EfficientNet-Lite0 (model/effnet.h) with the pretrained weights set-up fetches:
 * ImageNet top-5 of scikit-image's chelsea.png (a tabby cat) and coffee.png (a cup of espresso),
 * kept for independent checks (never trained or tuned on); malformed files refused; the feature
 * maps' shapes; agreement with PyTorch (tests/reference/effnet_peer.py, the net written again from
 * the .pth state dict) on chelsea.png's logits and stride-16 map. Skipped, saying why, without the
 * weights, the images or torch. */
#include <gdk-pixbuf/gdk-pixbuf.h>
#include <json-glib/json-glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "model/config.h"
#include "model/effnet.h"
#include "model/model.h"
#include "model/safetensors.h"

#define SKIMAGE_DATA "/usr/lib/python3/dist-packages/skimage/data"
#define EFFNET_PTH "efficientnet-lite0-57934424.pth" /* what set-up converted (pretrained folder) */

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

/* The pooled head features from the stride-16 map (config.ood_head's descriptor) are the mean
 * of the stride-32 map the whole network gives. */
static void test_pooled_from16(void)
{
    if (skip_reason) {
        g_test_skip(skip_reason);
        return;
    }
    g_autofree float *rgb = g_new(float, 224 * 224 * 3);
    for (int i = 0; i < 224 * 224 * 3; i++) /* a colour ramp, not a flat image */
        rgb[i] = (float)((i * 7919) % 1000) / 1000.0f;
    int n, c;
    g_autoptr(GError) err = NULL;
    g_autofree float *f16 = cl_effnet_features(net, rgb, 224, 16, &n, &c, &err);
    g_assert_no_error(err);
    g_autofree float *f32 = cl_effnet_features(net, rgb, 224, 32, &n, &c, &err);
    g_assert_no_error(err);
    g_assert_cmpint(c, ==, CL_EFFNET_POOLED);
    float pooled[CL_EFFNET_POOLED];
    g_assert_true(cl_effnet_pooled_from16(net, f16, 14, 14, pooled));
    double worst = 0, size = 0;
    for (int k = 0; k < c; k++) {
        double m = 0;
        for (int i = 0; i < n; i++)
            m += f32[(size_t)i * c + k];
        m /= n;
        worst = MAX(worst, fabs(m - pooled[k]));
        size = MAX(size, fabs(m));
    }
    g_test_message("pooled: largest value %.4f, largest difference %.3g", size, worst);
    g_assert_cmpfloat(size, >, 0.1);
    g_assert_cmpfloat(worst, <, 1e-5);
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

/* ---- agreement with PyTorch (tests/reference/effnet_peer.py) ---- */

static gboolean imports_torch(const char *py)
{
    if (!g_file_test(py, G_FILE_TEST_IS_EXECUTABLE))
        return FALSE;
    const char *argv[] = { py, "-c", "import numpy, torch", NULL };
    int status = 0;
    return g_spawn_sync(NULL, (char **)argv, NULL,
                        G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, NULL,
                        NULL, &status, NULL) &&
           g_spawn_check_wait_status(status, NULL);
}

/* $CL_TORCH_PYTHON, else BUILD/venv/bin/python (CL_PEER_TORCH=1 tools/peer-venv.sh puts torch
 * there), else Debian's /usr/bin/python3 (python3-torch): the first that imports torch. */
static char *torch_python(void)
{
    const char *env = g_getenv("CL_TORCH_PYTHON"), *build = g_getenv("CL_BUILD_ROOT");
    if (env && *env)
        return imports_torch(env) ? g_strdup(env) : NULL;
    g_autofree char *venv = build ? g_build_filename(build, "venv", "bin", "python", NULL) : NULL;
    if (venv && imports_torch(venv))
        return g_steal_pointer(&venv);
    return imports_torch("/usr/bin/python3") ? g_strdup("/usr/bin/python3") : NULL;
}

/* The peer's JSON for these pixels, or NULL with the reason in *why (skipped). */
static JsonObject *run_torch(const float *rgb, int size, JsonParser *parser, char **why)
{
    g_autofree char *pth = cl_pretrained_path(EFFNET_PTH);
    const char *src = g_getenv("CL_SOURCE_ROOT");
    g_autofree char *py = NULL;
    if (!g_file_test(pth, G_FILE_TEST_EXISTS)) {
        *why = g_strdup_printf("%s is not there (set-up could not fetch it)", pth);
        return NULL;
    }
    if (!src || !(py = torch_python())) {
        *why = g_strdup("no python with torch (CL_PEER_TORCH=1 tools/peer-venv.sh installs it in "
                        "BUILD/venv; or Debian's python3-torch)");
        return NULL;
    }
    g_autoptr(GError) err = NULL;
    g_autofree char *dir = g_dir_make_tmp("cl-effnet-XXXXXX", &err);
    g_assert_no_error(err);
    g_autofree char *pixels = g_build_filename(dir, "rgb.f32", NULL);
    g_assert_true(g_file_set_contents(pixels, (const char *)rgb,
                                      (gssize)((size_t)size * size * 3 * sizeof(float)), NULL));
    g_autofree char *script = g_build_filename(src, "tests", "reference", "effnet_peer.py", NULL);
    g_autofree char *sz = g_strdup_printf("%d", size);
    const char *argv[] = { py,     script,   "--weights", pth,        "--pixels",
                           pixels, "--size", sz,          "--double", NULL };
    g_autofree char *out = NULL, *errout = NULL;
    int status = 0;
    gboolean ran = g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                                &errout, &status, &err);
    g_unlink(pixels);
    g_rmdir(dir);
    /* torch imported above, so a peer that fails now is a bug in it: fail, not skip */
    if (!ran || !g_spawn_check_wait_status(status, NULL))
        g_error("%s failed: %s", script, err ? err->message : errout);
    g_assert_true(json_parser_load_from_data(parser, out, -1, NULL));
    return json_node_get_object(json_parser_get_root(parser));
}

/* ours against the peer's: max |diff|, nmse, and every element within atol + rtol·|ref| */
static void compare(const char *what, const float *ours, JsonArray *ref, guint n, double atol,
                    double rtol, double max_nmse)
{
    g_assert_cmpuint(json_array_get_length(ref), ==, n);
    double e = 0, s = 0, worst = 0, worst_ratio = 0, peak = 0;
    for (guint i = 0; i < n; i++) {
        double r = json_array_get_double_element(ref, i), d = fabs(ours[i] - r);
        g_assert_true(isfinite(ours[i]) && isfinite(r));
        e += d * d, s += r * r;
        worst = MAX(worst, d);
        peak = MAX(peak, fabs(r));
        worst_ratio = MAX(worst_ratio, d / (atol + rtol * fabs(r)));
    }
    g_test_message("%s: %u values (max |ref| %.3g), max |diff| %.3g, nmse %.3g, worst diff / "
                   "tolerance %.3f",
                   what, n, peak, worst, e / s, worst_ratio);
    g_assert_cmpfloat(worst_ratio, <=, 1.0);
    g_assert_cmpfloat(e / s, <, max_nmse);
}

/* Tolerances. The peer runs in float64, so the difference is our float32 rounding alone (and
 * its own at 1e-16): measured on chelsea.png, logits max |diff| 4.4e-6 (of values up to ~10),
 * nmse 9e-13; stride-16 map max |diff| 9.9e-5 (of values up to ~56), nmse 3.3e-12 — the same
 * size as PyTorch's own float32 against its float64 (6e-6 and 2.9e-5 on a random image). The
 * bounds leave ~10× (per element) and ~100× (nmse) of room for another BLAS or vector width;
 * the bugs they are there for are far above them: BatchNorm's eps 1e-5 instead of 1e-3 moves
 * the logits by nmse 3e-2, "same" padding put at the wrong end by 0.26. */
#define LOGITS_ATOL 5e-5
#define LOGITS_RTOL 1e-5
#define LOGITS_NMSE 1e-10
#define F16_ATOL 1e-3
#define F16_RTOL 1e-5
#define F16_NMSE 1e-10

/* chelsea.png, preprocessed once here (load_rgb), through both: the same logits and stride-16
 * map up to our float32 rounding (BatchNorm folded into the weights here, applied after each
 * convolution there; sgemm and direct loops against PyTorch's float64 convolutions), and the
 * same top class. */
static void test_pytorch(void)
{
    if (skip_reason) {
        g_test_skip(skip_reason);
        return;
    }
    g_autofree char *path = g_build_filename(SKIMAGE_DATA, "chelsea.png", NULL);
    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        g_test_skip("scikit-image's sample images are not installed (python3-skimage)");
        return;
    }
    const int size = 224;
    g_autofree float *rgb = load_rgb(path, size);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autofree char *why = NULL;
    JsonObject *peer = run_torch(rgb, size, parser, &why);
    if (!peer) {
        g_test_skip(why);
        return;
    }
    g_test_message("peer: torch %s, %s", json_object_get_string_member(peer, "torch_version"),
                   json_object_get_string_member(peer, "dtype"));
    float logits[CL_EFFNET_CLASSES];
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_effnet_logits(net, rgb, size, logits, &err));
    JsonArray *pl = json_object_get_array_member(peer, "logits");
    compare("logits", logits, pl, CL_EFFNET_CLASSES, LOGITS_ATOL, LOGITS_RTOL, LOGITS_NMSE);
    float theirs[CL_EFFNET_CLASSES];
    for (int i = 0; i < CL_EFFNET_CLASSES; i++)
        theirs[i] = (float)json_array_get_double_element(pl, (guint)i);
    int t_ours[5], t_theirs[5];
    top5(logits, t_ours);
    top5(theirs, t_theirs);
    g_test_message("top-5 ours %d %d %d %d %d, PyTorch's %d %d %d %d %d", t_ours[0], t_ours[1],
                   t_ours[2], t_ours[3], t_ours[4], t_theirs[0], t_theirs[1], t_theirs[2],
                   t_theirs[3], t_theirs[4]);
    g_assert_cmpint(t_ours[0], ==, t_theirs[0]);

    int n, c;
    g_autofree float *f16 = cl_effnet_features(net, rgb, size, 16, &n, &c, &err);
    g_assert_no_error(err);
    JsonObject *pf = json_object_get_object_member(peer, "features16");
    JsonArray *shape = json_object_get_array_member(pf, "shape");
    g_assert_cmpint(json_array_get_int_element(shape, 0) * json_array_get_int_element(shape, 1), ==,
                    n);
    g_assert_cmpint(json_array_get_int_element(shape, 2), ==, c);
    compare("stride-16 map", f16, json_object_get_array_member(pf, "values"), (guint)(n * c),
            F16_ATOL, F16_RTOL, F16_NMSE);
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
    g_test_add_func("/effnet/pooled-from16", test_pooled_from16);
    g_test_add_func("/effnet/malformed", test_malformed);
    g_test_add_func("/effnet/pytorch", test_pytorch);
    int rc = g_test_run();
    cl_effnet_free(net);
    g_free(skip_reason);
    return rc;
}
