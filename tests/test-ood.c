/* test-ood.c - the unfamiliar-image statistics (config ood, docs/MODEL.md §3.11; core/train/ood.c):
 * fitted on one task's images, they keep one bank row per image and a threshold that most of the
 * task's other images stay under, while images of another kind (grey radiograph phantoms against
 * colour shapes scenes) score above it; the inference encoder's score is the fitting code's;
 * the statistics survive a save and load; photo-edits' images are grouped by photograph. */
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "model/describe.h"
#include "model/effnet.h"
#include "model/encoder.h"
#include "model/model.h"
#include "synth/synth.h"
#include "train/ood.h"
#include "train/synthdata.h"

static ClModel *tiny(void)
{
    ClModelConfig cfg;
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_model_config_preset(&cfg, "tiny", &err));
    cfg.image_size = 64; /* 4 × 4 patches of 16 px: quick */
    ClModel *m = cl_model_new_random(&cfg, 3, &err);
    g_assert_no_error(err);
    return m;
}

static double share_above(const ClModel *m, const char *task, int n, guint64 seed)
{
    g_autoptr(GError) err = NULL;
    int k = 0;
    g_autofree double *sc = cl_ood_scores(m, task, NULL, n, seed, 0, NULL, NULL, &k, &err);
    g_assert_no_error(err);
    int above = 0;
    for (int i = 0; i < k; i++)
        above += sc[i] > m->w.ood_threshold[0];
    return (double)above / k;
}

/* The model written to a temporary file and read back. */
static ClModel *saved_and_loaded(ClModel *f)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *dir = g_dir_make_tmp("cl-ood-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "m.safetensors", NULL);
    g_assert_true(cl_model_save(f, path, "f32", &err));
    ClModel *back = cl_model_load(path, &err);
    g_assert_no_error(err);
    g_unlink(path);
    g_rmdir(dir);
    return back;
}

static void test_fit_and_flag(void)
{
    g_autoptr(ClModel) m = tiny();
    g_autoptr(GError) err = NULL;
    g_assert_null(cl_ood_scores(m, "shapes", NULL, 2, 1, 0, NULL, NULL, &(int){ 0 }, &err));
    g_clear_error(&err); /* no statistics to score against */
    g_autoptr(ClModel) f = cl_ood_fit(m, "shapes", NULL, 40, 11, 0, 0.95, 0, 0, &err);
    g_assert_no_error(err);
    g_assert_cmpint(f->config.ood, ==, 80); /* two images a sample */
    g_assert_true(isfinite(f->w.ood_threshold[0]) && f->w.ood_threshold[0] > 0);
    double same = share_above(f, "shapes", 30, 999), other = share_above(f, "radiograph", 30, 5);
    g_test_message("flagged: shapes (not fitted on) %.0f %%, radiograph %.0f %%", 100 * same,
                   100 * other);
    g_assert_cmpfloat(same, <=, 0.2);
    g_assert_cmpfloat(other, >=, 0.8);

    /* the encoder's score of a radiograph image is the fitting code's, and above the threshold */
    ClSynthOptions so;
    cl_synth_options_init(&so);
    so.width = so.height = 64;
    g_autoptr(ClSynthSample) syn = cl_synth_generate("radiograph", 5, &so, &err);
    g_assert_no_error(err);
    g_autoptr(ClTrainSample) ts = cl_train_sample_from_synth(f, syn, FALSE, &err);
    g_assert_no_error(err);
    g_autoptr(ClBackend) be = cl_backend_cpu_new(1);
    g_autoptr(ClEncoderState) st = cl_encoder_state_new(f);
    ClEncoderOutput out = { 0 };
    g_assert_true(cl_encoder_forward(be, f, st, ts->pixels, 0, FALSE, NULL, NULL, &out, &err));
    g_assert_cmpfloat(out.ood_threshold, ==, f->w.ood_threshold[0]);
    int k = 0;
    g_autofree double *sc = cl_ood_scores(f, "radiograph", NULL, 1, 0, 0, NULL, NULL, &k, &err);
    g_assert_no_error(err);
    g_test_message("encoder score %.4f, threshold %.4f", out.ood_score, out.ood_threshold);
    g_assert_cmpfloat(out.ood_score, >, out.ood_threshold);
    cl_encoder_output_clear(&out);

    /* saved and loaded: the same statistics */
    g_autoptr(ClModel) back = saved_and_loaded(f);
    g_assert_cmpint(back->config.ood, ==, 80);
    g_assert_cmpfloat(back->w.ood_threshold[0], ==, f->w.ood_threshold[0]);
    const size_t c2 = 2 * (size_t)cl_config_ood_channels(&f->config);
    g_assert_cmpuint(c2, ==, 2 * (size_t)f->config.enc_dim); /* a patch stem: its embedding */
    g_assert_cmpmem(back->w.ood_bank, 80 * c2 * sizeof(float), f->w.ood_bank,
                    80 * c2 * sizeof(float));
    g_assert_cmpmem(back->w.ood_radius, 80 * sizeof(float), f->w.ood_radius, 80 * sizeof(float));
}

/* config.ood_head's score: the squared Mahalanobis distance over L, along the principal
 * directions by their variances and off them by the residual variance. */
static void test_gauss_score(void)
{
    const float mean[3] = { 1, 0, 0 }, var[3] = { 1, 1, 1 }, basis[3] = { 1, 0, 0 },
                lambda[1] = { 4 };
    const float at_mean[3] = { 1, 0, 0 }, x[3] = { 3, 3, 0 }, along[3] = { 5, 0, 0 };
    g_assert_cmpfloat(cl_encoder_ood_gauss_score(mean, var, basis, lambda, 1, 3, at_mean), ==, 0);
    /* (3 - 1)² / 4 along the direction, 3² / 1 off it, over 3 values */
    g_assert_cmpfloat_with_epsilon(cl_encoder_ood_gauss_score(mean, var, basis, lambda, 1, 3, x),
                                   10.0 / 3, 1e-6);
    /* far along a direction the training images vary in counts less than as far off it */
    const float off[3] = { 1, 4, 0 };
    g_assert_cmpfloat(cl_encoder_ood_gauss_score(mean, var, basis, lambda, 1, 3, along), <,
                      cl_encoder_ood_gauss_score(mean, var, basis, lambda, 1, 3, off));
}

/* config.ood_head's fit: on points drawn from a known Gaussian (three directions of variance
 * 16, 9 and 4 along the first axes, noise of variance 0.25 everywhere) it finds the mean, the
 * directions (orthonormal, along those axes), their variances and the residual; a training
 * point scores about 1. */
static void test_gauss_fit(void)
{
    enum { L = 12, R = 3, n = 600 };
    const double sd[R] = { 4, 3, 2 }, noise = 0.5;
    g_autofree float *x = g_new(float, (size_t)n * L);
    g_autofree int *rows = g_new(int, n);
    GRand *rng = g_rand_new_with_seed(7);
    for (int i = 0; i < n; i++) {
        rows[i] = i;
        for (int c = 0; c < L; c++) {
            const double z = g_rand_double_range(rng, -1, 1) * sqrt(3.0); /* unit variance */
            const double e = g_rand_double_range(rng, -1, 1) * sqrt(3.0);
            x[(size_t)i * L + c] = (float)(c + 1 + (c < R ? sd[c] * z : 0) + noise * e);
        }
    }
    g_rand_free(rng);
    float mean[L], var[L], basis[R * L], lambda[R];
    cl_ood_gauss_fit(x, rows, n, L, R, mean, var, basis, lambda);
    for (int c = 0; c < L; c++)
        g_assert_cmpfloat(fabs(mean[c] - (c + 1)), <, 0.35);
    for (int k = 0; k < R; k++) {
        const double want = sd[k] * sd[k] + noise * noise;
        g_test_message("direction %d: variance %.3f (want %.3f), along axis %d %.4f", k, lambda[k],
                       want, k, basis[k * L + k]);
        g_assert_cmpfloat(fabs(lambda[k] - want) / want, <, 0.15);
        g_assert_cmpfloat(fabs(basis[k * L + k]), >, 0.99);
        for (int j = 0; j < R; j++) {
            double d = 0;
            for (int c = 0; c < L; c++)
                d += (double)basis[k * L + c] * basis[j * L + c];
            g_assert_cmpfloat(fabs(d - (j == k)), <, 1e-4);
        }
    }
    g_test_message("residual variance %.4f (want %.4f)", var[0], noise * noise);
    g_assert_cmpfloat(fabs(var[0] - noise * noise) / (noise * noise), <, 0.15);
    for (int c = 1; c < L; c++)
        g_assert_cmpfloat(var[c], ==, var[0]);
    double s = 0;
    for (int i = 0; i < n; i++)
        s += cl_encoder_ood_gauss_score(mean, var, basis, lambda, R, L, x + (size_t)i * L);
    g_test_message("mean score of the fitting points %.3f", s / n);
    g_assert_cmpfloat(fabs(s / n - 1), <, 0.1);
}

/* The colour floor (config.ood_min_colour): fitted on colour images (the edits task), it flags an image without
 * colour (a grey radiograph) whatever its descriptor, in the fitting code and in the encoder
 * alike, and survives a save and load; the measure itself: 0 for grey, a known value for red. */
static void test_colour_floor(void)
{
    const int S = 32;
    g_autofree float *px = g_new(float, 3 * S * S);
    for (int i = 0; i < 3 * S * S; i++)
        px[i] = 0.25f; /* grey: the three planes alike */
    g_assert_cmpfloat(cl_encoder_colourfulness(px, 3, S), ==, 0);
    for (int i = 0; i < S * S; i++) /* pure red: rg = 255, yb = 127.5, no spread */
        px[i] = 1, px[S * S + i] = -1, px[2 * S * S + i] = -1;
    g_assert_cmpfloat_with_epsilon(cl_encoder_colourfulness(px, 3, S),
                                   0.3 * sqrt(255.0 * 255 + 127.5 * 127.5), 1e-3);
    g_assert_cmpfloat(cl_encoder_colourfulness(px, 1, S), ==, 0);

    g_autoptr(ClModel) m = tiny();
    g_autoptr(GError) err = NULL;
    g_assert_null(cl_ood_fit(m, "shapes", NULL, 20, 11, 0, 0.95, CL_OOD_FIT_HEAD, 16, &err));
    g_assert_error(err, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT); /* a patch stem has no head */
    g_clear_error(&err);
    g_autoptr(ClModel) f =
        cl_ood_fit(m, "edits", NULL, 20, 11, 0, 0.95, CL_OOD_FIT_COLOUR, 0, &err);
    g_assert_no_error(err);
    g_assert_cmpfloat(f->config.ood_min_colour, >, 1);
    int k = 0, finite = 0;
    g_autofree double *sr = cl_ood_scores(f, "radiograph", NULL, 6, 5, 0, NULL, NULL, &k, &err);
    g_assert_no_error(err);
    for (int i = 0; i < k; i++)
        g_assert_true(isinf(sr[i]) && sr[i] > 0);
    g_autofree double *ss = cl_ood_scores(f, "edits", NULL, 10, 999, 0, NULL, NULL, &k, &err);
    g_assert_no_error(err);
    for (int i = 0; i < k; i++)
        finite += isfinite(ss[i]);
    g_test_message("colour floor %.2f: %d of %d new edits images above it",
                   f->config.ood_min_colour, finite, k);
    g_assert_cmpint(finite, >=, k - 1);

    /* the encoder: a radiograph is grey, an edits scene is not */
    ClSynthOptions so;
    cl_synth_options_init(&so);
    so.width = so.height = 64;
    g_autoptr(ClBackend) be = cl_backend_cpu_new(1);
    const char *tasks[2] = { "radiograph", "edits" };
    for (int t = 0; t < 2; t++) {
        g_autoptr(ClSynthSample) syn = cl_synth_generate(tasks[t], 5, &so, &err);
        g_assert_no_error(err);
        g_autoptr(ClTrainSample) ts = cl_train_sample_from_synth(f, syn, FALSE, &err);
        g_assert_no_error(err);
        g_autoptr(ClEncoderState) st = cl_encoder_state_new(f);
        ClEncoderOutput out = { 0 };
        g_assert_true(cl_encoder_forward(be, f, st, ts->pixels, 0, FALSE, NULL, NULL, &out, &err));
        g_assert_cmpint(out.ood_grey, ==, t == 0);
        cl_encoder_output_clear(&out);
    }

    /* saved and loaded: the floor with it */
    g_autoptr(ClModel) back = saved_and_loaded(f);
    g_assert_cmpfloat(back->config.ood_min_colour, ==, f->config.ood_min_colour);
    g_assert_false(back->config.ood_head);
}

/* photo-edits: an image's group is its photograph (both images of a pair share it, and crops of
 * one photograph from different samples too), so that the threshold is a new photograph's */
static void test_photo_groups(void)
{
    g_autoptr(ClModel) m = tiny();
    g_autoptr(GError) err = NULL;
    float *feats = NULL;
    int *group = NULL, k = 0;
    g_autofree double *sc =
        cl_ood_scores(m, "photo-edits", NULL, 40, 3, 0, &feats, &group, &k, &err);
    if (!sc) { /* the wallpaper packages are not installed */
        g_test_skip(err->message);
        return;
    }
    g_autofree float *f = feats;
    g_autofree int *g = group;
    g_assert_cmpint(k, ==, 80);
    int shared = 0;
    for (int i = 0; i < k; i += 2) {
        g_assert_cmpint(g[i], ==, g[i + 1]);
        g_assert_cmpint(g[i], >=, 0);
        for (int j = 0; j < i; j += 2)
            if (g[j] == g[i]) {
                shared++;
                break;
            }
    }
    /* 40 draws from some 80 photographs: some photograph comes twice (the birthday bound) */
    g_test_message("%d of 40 samples reuse a photograph", shared);
    g_assert_cmpint(shared, >, 0);
    g_autoptr(ClModel) fit = cl_ood_fit(m, "photo-edits", NULL, 40, 3, 0, 0.99, 0, 0, &err);
    g_assert_no_error(err);
    g_assert_true(isfinite(fit->w.ood_threshold[0]) && fit->w.ood_threshold[0] > 0);
}

/* The shipped default model carries the statistics: most held-out photographs (opencv-doc) get
 * describe's notice, few of its own synthetic radiographs do (its card gives the rates: 72 % of
 * held-out photographs; 0 % of radiograph images as training renders them, a few per cent of
 * pairs through describe). Skipped without opencv-doc's photographs. */
static int notices_of_as(ClBackend *be, const ClModel *m, const char *task, const char *photos,
                         int n, gboolean nuisance, const char *must_say)
{
    ClSynthOptions so;
    cl_synth_options_init(&so);
    so.width = so.height = m->config.image_size;
    so.photos = photos;
    so.nuisance = nuisance;
    int flagged = 0;
    for (int i = 0; i < n; i++) {
        g_autoptr(GError) err = NULL;
        g_autoptr(ClSynthSample) s = cl_synth_generate(task, 5000 + (guint64)i, &so, &err);
        g_assert_no_error(err);
        ClImage *imgs[2] = { cl_synth_image_to_image(&s->images[0]),
                             cl_synth_image_to_image(&s->images[1]) };
        ClDescribeImage di[2] = { { .image = imgs[0] }, { .image = imgs[1] } };
        ClDescribeOptions d;
        cl_describe_options_init(&d);
        d.max_new_tokens = 2;
        d.heatmaps = FALSE;
        ClDescribeResult res;
        g_assert_true(cl_describe_run(be, m, di, 2, &d, &res, &err));
        g_assert_no_error(err);
        gboolean unlike = FALSE, any = FALSE;
        for (guint k = 0; k < res.notices->len; k++) {
            const char *text = g_ptr_array_index(res.notices, k);
            any |= strstr(text, "unlike the images") != NULL;
            unlike |= strstr(text, "unlike the images") != NULL &&
                      (!must_say || strstr(text, must_say) != NULL);
        }
        g_assert_cmpint(res.n_unfamiliar > 0, ==, any); /* what eval-change counts */
        flagged += unlike;
        cl_describe_result_clear(&res);
        cl_image_free(imgs[0]);
        cl_image_free(imgs[1]);
    }
    return flagged;
}

static int notices_of(ClBackend *be, const ClModel *m, const char *task, const char *photos, int n)
{
    return notices_of_as(be, m, task, photos, n, TRUE, NULL);
}

/* A shipped model file of data/models, or NULL (the test skipped) when opencv-doc's photographs
 * are not installed. */
static ClModel *shipped_model(const char *file)
{
    const char *root = g_getenv("CL_SOURCE_ROOT");
    g_autofree char *path = g_build_filename(root ? root : ".", "data", "models", file, NULL);
    g_autoptr(GError) err = NULL;
    ClSynthOptions so;
    cl_synth_options_init(&so);
    so.photos = "heldout";
    g_autoptr(ClSynthSample) probe = cl_synth_generate("photo-edits", 1, &so, &err);
    if (!probe) { /* opencv-doc is not installed */
        g_test_skip(err->message);
        return NULL;
    }
    ClModel *m = cl_model_load(path, &err);
    g_assert_no_error(err);
    return m;
}

static void test_default_model(void)
{
    g_autoptr(ClModel) m = shipped_model("changelens-default.safetensors");
    if (!m)
        return;
    g_autoptr(GError) err = NULL;
    g_assert_cmpint(m->config.ood, >, 0);
    g_assert_nonnull(m->w.ood_radius);
    g_autoptr(ClBackend) be = cl_backend_new("cpu", NULL, &err);
    g_assert_no_error(err);
    const int photos = notices_of(be, m, "photo-edits", "heldout", 12),
              radiographs = notices_of(be, m, "radiograph", NULL, 12);
    g_test_message("notices: %d of 12 held-out photograph pairs, %d of 12 radiograph pairs", photos,
                   radiographs);
    g_assert_cmpint(photos, >=, 6);
    g_assert_cmpint(radiographs, <=, 3);
}

/* The shipped photo model carries statistics of the whole network's pooled features and a colour
 * floor (its card gives the rates): few held-out photograph pairs get the notice, most aerial
 * renders do, and every grey pair, with the reason said. Skipped without the pretrained stem or
 * opencv-doc's photographs. */
static void test_photo_model(void)
{
    g_autofree char *stem = cl_pretrained_path(CL_EFFNET_FILE);
    if (!g_file_test(stem, G_FILE_TEST_EXISTS)) {
        g_test_skip("the pretrained EfficientNet-Lite0 is not there (set-up fetches it)");
        return;
    }
    g_autoptr(ClModel) m = shipped_model(CL_MODEL_PHOTO_FILE);
    if (!m)
        return;
    g_autoptr(GError) err = NULL;
    g_assert_true(m->config.ood_head);
    g_assert_cmpint(m->config.ood, ==, 8);
    g_assert_cmpfloat(m->config.ood_min_colour, >, 0);
    g_autoptr(ClBackend) be = cl_backend_new("cpu", NULL, &err);
    g_assert_no_error(err);
    const int photos = notices_of(be, m, "photo-edits", "heldout", 12),
              aerial = notices_of(be, m, "aerial", NULL, 12),
              grey = notices_of_as(be, m, "radiograph", NULL, 6, FALSE, "without colour");
    g_test_message("notices: %d of 12 held-out photograph pairs, %d of 12 aerial pairs, %d of 6 "
                   "grey radiograph pairs",
                   photos, aerial, grey);
    g_assert_cmpint(photos, <=, 2);
    g_assert_cmpint(aerial, >=, 6);
    g_assert_cmpint(grey, ==, 6);
}

/* As users give them: the samples written as the task's files (radiograph: DICOM) and read back
 * as describe reads them give every image (two a sample, in order, grouped by sample) and
 * descriptors of their own (not those of the in-memory images); a fit on files works. */
static void test_files(void)
{
    g_autoptr(ClModel) m = tiny();
    g_autoptr(GError) err = NULL;
    int k = 0, km = 0;
    float *feats = NULL, *mem = NULL;
    int *group = NULL;
    g_autofree double *sc =
        cl_ood_scores(m, "radiograph", NULL, 3, 5, 96, &feats, &group, &k, &err);
    g_assert_no_error(err);
    g_assert_cmpint(k, ==, 6);
    for (int i = 0; i < k; i += 2)
        g_assert_cmpint(group[i], ==, group[i + 1]);
    g_assert_cmpint(group[0], !=, group[2]);
    g_autofree double *sm = cl_ood_scores(m, "radiograph", NULL, 3, 5, 0, &mem, NULL, &km, &err);
    g_assert_no_error(err);
    g_assert_cmpint(km, ==, 6);
    const int C2 = 2 * cl_config_ood_channels(&m->config);
    gboolean differ = FALSE;
    for (int i = 0; i < C2 && !differ; i++)
        differ = feats[i] != mem[i];
    g_assert_true(differ);
    g_free(feats);
    g_free(mem);
    g_free(group);
    g_autoptr(ClModel) f = cl_ood_fit(m, "radiograph", NULL, 12, 3, 96, 0.95, 0, 0, &err);
    g_assert_no_error(err);
    g_assert_true(isfinite(f->w.ood_threshold[0]) && f->w.ood_threshold[0] > 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/ood/fit-and-flag", test_fit_and_flag);
    g_test_add_func("/ood/photo-groups", test_photo_groups);
    g_test_add_func("/ood/colour-floor", test_colour_floor);
    g_test_add_func("/ood/gauss-score", test_gauss_score);
    g_test_add_func("/ood/gauss-fit", test_gauss_fit);
    g_test_add_func("/ood/default-model", test_default_model);
    g_test_add_func("/ood/photo-model", test_photo_model);
    g_test_add_func("/ood/files", test_files);
    return g_test_run();
}
