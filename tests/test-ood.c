/* test-ood.c - the unfamiliar-image statistics (config ood, docs/MODEL.md §3.11; core/train/ood.c):
 * fitted on one task's images, they keep one bank row per image and a threshold that most of the
 * task's other images stay under, while images of another kind (grey radiograph phantoms against
 * colour shapes scenes) score above it; the inference encoder's score is the fitting code's;
 * the statistics survive a save and load; photo-edits' images are grouped by photograph. */
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "model/describe.h"
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

static void test_fit_and_flag(void)
{
    g_autoptr(ClModel) m = tiny();
    g_autoptr(GError) err = NULL;
    g_assert_null(cl_ood_scores(m, "shapes", NULL, 2, 1, 0, NULL, NULL, &(int){ 0 }, &err));
    g_clear_error(&err); /* no statistics to score against */
    g_autoptr(ClModel) f = cl_ood_fit(m, "shapes", NULL, 40, 11, 0, 0.95, &err);
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
    g_autofree char *dir = g_dir_make_tmp("cl-ood-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "m.safetensors", NULL);
    g_assert_true(cl_model_save(f, path, "f32", &err));
    g_autoptr(ClModel) back = cl_model_load(path, &err);
    g_assert_no_error(err);
    g_assert_cmpint(back->config.ood, ==, 80);
    g_assert_cmpfloat(back->w.ood_threshold[0], ==, f->w.ood_threshold[0]);
    const size_t c2 = 2 * (size_t)cl_config_ood_channels(&f->config);
    g_assert_cmpuint(c2, ==, 2 * (size_t)f->config.enc_dim); /* a patch stem: its embedding */
    g_assert_cmpmem(back->w.ood_bank, 80 * c2 * sizeof(float), f->w.ood_bank,
                    80 * c2 * sizeof(float));
    g_assert_cmpmem(back->w.ood_radius, 80 * sizeof(float), f->w.ood_radius, 80 * sizeof(float));
    g_unlink(path);
    g_rmdir(dir);
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
    g_autoptr(ClModel) fit = cl_ood_fit(m, "photo-edits", NULL, 40, 3, 0, 0.99, &err);
    g_assert_no_error(err);
    g_assert_true(isfinite(fit->w.ood_threshold[0]) && fit->w.ood_threshold[0] > 0);
}

/* The shipped default model carries the statistics: most held-out photographs (opencv-doc) get
 * describe's notice, few of its own synthetic radiographs do (its card gives the rates: 72 % of
 * held-out photographs; 0 % of radiograph images as training renders them, a few per cent of
 * pairs through describe). Skipped without opencv-doc's photographs. */
static int notices_of(ClBackend *be, const ClModel *m, const char *task, const char *photos, int n)
{
    ClSynthOptions so;
    cl_synth_options_init(&so);
    so.width = so.height = m->config.image_size;
    so.photos = photos;
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
        gboolean unlike = FALSE;
        for (guint k = 0; k < res.notices->len; k++)
            unlike |= strstr(g_ptr_array_index(res.notices, k), "unlike the images") != NULL;
        flagged += unlike;
        cl_describe_result_clear(&res);
        cl_image_free(imgs[0]);
        cl_image_free(imgs[1]);
    }
    return flagged;
}

static void test_default_model(void)
{
    const char *root = g_getenv("CL_SOURCE_ROOT");
    g_autofree char *path = g_build_filename(root ? root : ".", "data", "models",
                                             "changelens-default.safetensors", NULL);
    g_autoptr(GError) err = NULL;
    ClSynthOptions so;
    cl_synth_options_init(&so);
    so.photos = "heldout";
    g_autoptr(ClSynthSample) probe = cl_synth_generate("photo-edits", 1, &so, &err);
    if (!probe) { /* opencv-doc is not installed */
        g_test_skip(err->message);
        return;
    }
    g_autoptr(ClModel) m = cl_model_load(path, &err);
    g_assert_no_error(err);
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
    g_autoptr(ClModel) f = cl_ood_fit(m, "radiograph", NULL, 12, 3, 96, 0.95, &err);
    g_assert_no_error(err);
    g_assert_true(isfinite(f->w.ood_threshold[0]) && f->w.ood_threshold[0] > 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/ood/fit-and-flag", test_fit_and_flag);
    g_test_add_func("/ood/photo-groups", test_photo_groups);
    g_test_add_func("/ood/default-model", test_default_model);
    g_test_add_func("/ood/files", test_files);
    return g_test_run();
}
