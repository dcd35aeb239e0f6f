/* ood.c - config.ood's statistics fitted on a task's images (ood.h). */
#include "train/ood.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "model/encoder.h"
#include "model/preprocess.h"
#include "nn/backend.h"
#include "synth/synth.h"
#include "train/synthdata.h"

/* One image's values per patch (N, cl_config_ood_channels): the stem's features, or the patch
 * embedding of the patches' pixels (patches: N × cl_config_patch_inputs scratch). */
static gboolean image_values(const ClModel *model, const float *pixels, float *patches,
                             float *values, GError **error)
{
    const ClModelConfig *cfg = &model->config;
    const int N = cl_config_n_patches(cfg);
    if (cfg->enc_stem_effnet) {
        if (!cl_encoder_stem_features(pixels, cfg->image_size, patches, N, error))
            return FALSE;
    } else {
        cl_patch_unfold(patches, pixels, cfg->channels, cfg->image_size, cfg->patch_size);
    }
    cl_encoder_ood_values(cfg, model->w.patch_w, model->w.patch_b, patches, N, values);
    return TRUE;
}

static gint compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The images of n samples of `task` written as files at `size` px into a new folder under tmp
 * and read back as describe reads them, into model input pixels (n_images × C × S × S, each
 * sample's images in order) with each image's sample in *sample_of. */
static float *file_pixels(const ClModel *model, const char *task, const char *photos, int n,
                          guint64 seed, int size, int offset, GArray *sample_of, guint *n_images,
                          GError **error)
{
    const ClModelConfig *cfg = &model->config;
    const int S = cfg->image_size, C = cfg->channels;
    g_autofree char *dir = g_dir_make_tmp("changelens-ood-XXXXXX", error);
    if (!dir)
        return NULL;
    ClSynthOptions so;
    cl_synth_options_init(&so);
    so.width = so.height = size;
    so.photos = photos;
    GArray *px = g_array_new(FALSE, FALSE, sizeof(float));
    gboolean ok = cl_synth_write_dataset(dir, task, seed, n, &so, TRUE, NULL, NULL, error);
    g_autofree char *images = g_build_filename(dir, "images", NULL);
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    GDir *d = ok ? g_dir_open(images, 0, error) : NULL;
    ok = ok && d;
    for (const char *name; d && (name = g_dir_read_name(d));)
        g_ptr_array_add(names, g_strdup(name));
    if (d)
        g_dir_close(d);
    g_ptr_array_sort(names, compare_names);
    g_autofree float *one = g_new(float, (size_t)C * S * S);
    for (guint i = 0; ok && i < names->len; i++) {
        const char *name = g_ptr_array_index(names, i);
        g_autofree char *path = g_build_filename(images, name, NULL);
        g_autoptr(ClImage) img = cl_image_load(path, NULL, error);
        ClLetterbox lb;
        ok = img && cl_preprocess_image(img, 0, NULL, S, C, one, &lb, error);
        if (ok) {
            g_array_append_vals(px, one, (guint)C * S * S);
            int sample = offset + (int)g_ascii_strtoll(name, NULL, 10); /* NNNNNN-K.ext */
            g_array_append_val(sample_of, sample);
        }
        g_unlink(path);
    }
    g_autofree char *jsonl = g_build_filename(dir, "data.jsonl", NULL);
    g_unlink(jsonl);
    g_rmdir(images);
    g_rmdir(dir);
    *n_images = px->len / ((guint)C * S * S);
    if (!ok) {
        g_array_unref(px);
        return NULL;
    }
    return (float *)(void *)g_array_free(px, FALSE);
}

/* One image into the arrays: its descriptor (with features) or its score, and its group. */
typedef struct {
    const ClModel *model;
    float *patches, *values, *desc;
    gboolean features;
    GArray *scores, *feats, *owner;
} Collect;

static gboolean collect_image(Collect *c, const float *pixels, int group, GError **error)
{
    const ClModelConfig *cfg = &c->model->config;
    const int N = cl_config_n_patches(cfg), C = cl_config_ood_channels(cfg);
    if (!image_values(c->model, pixels, c->patches, c->values, error))
        return FALSE;
    cl_encoder_ood_descriptor(c->values, N, C, c->desc);
    if (c->features)
        g_array_append_vals(c->feats, c->desc, 2 * C);
    const ClModelWeights *w = &c->model->w;
    double s = c->features ? 0
                           : cl_encoder_ood_score(w->ood_mean, w->ood_var, w->ood_bank,
                                                  w->ood_radius, cfg->ood, 2 * C, c->desc, 0, 0);
    g_array_append_val(c->scores, s);
    g_array_append_val(c->owner, group);
    return TRUE;
}

double *cl_ood_scores(const ClModel *model, const char *task, const char *photos, int n,
                      guint64 seed, int file_size, float **features, int **group_of, int *n_out,
                      GError **error)
{
    const ClModelConfig *cfg = &model->config;
    if (!features && !model->w.ood_bank) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "the model has no image statistics (fit them with `model fit-ood`)");
        return NULL;
    }
    const int N = cl_config_n_patches(cfg), C = cl_config_ood_channels(cfg);
    ClSynthOptions so;
    cl_synth_options_init(&so);
    so.width = so.height = cfg->image_size;
    so.patch = cfg->patch_size;
    so.photos = photos;
    g_autoptr(GArray) scores = g_array_new(FALSE, FALSE, sizeof(double));
    g_autoptr(GArray) feats = g_array_new(FALSE, FALSE, sizeof(float));
    g_autoptr(GArray) owner = g_array_new(FALSE, FALSE, sizeof(int));
    g_autofree float *patches = g_new(float, (size_t)N * cl_config_patch_inputs(cfg));
    g_autofree float *values = g_new(float, (size_t)N * C);
    g_autofree float *desc = g_new(float, 2 * C);
    Collect col = { model, patches, values, desc, features != NULL, scores, feats, owner };
    /* "a,b,c": the samples take the tasks in turn (a model trained on several) */
    g_auto(GStrv) tasks = g_strsplit(task, ",", -1);
    const int n_tasks = (int)g_strv_length(tasks);
    if (n_tasks == 0 || !*tasks[0]) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT, "no task to draw images from");
        return NULL;
    }
    if (file_size > 0) {
        /* as users give them: each task's share of the samples written as its files */
        const size_t img = (size_t)cfg->channels * cfg->image_size * cfg->image_size;
        for (int k = 0; k < n_tasks; k++) {
            const int nk = n / n_tasks + (k < n % n_tasks);
            g_autoptr(GArray) sample_of = g_array_new(FALSE, FALSE, sizeof(int));
            guint n_img = 0;
            g_autofree float *px =
                file_pixels(model, tasks[k], photos, nk, cl_synth_stream_seed(seed, (guint64)k),
                            file_size, k * (1 << 16), sample_of, &n_img, error);
            if (!px)
                return NULL;
            for (guint t = 0; t < n_img; t++)
                if (!collect_image(&col, px + t * img, (1 << 20) + g_array_index(sample_of, int, t),
                                   error))
                    return NULL;
        }
        n = 0; /* nothing more in memory */
    }
    for (int i = 0; i < n; i++) {
        g_autoptr(ClSynthSample) syn = cl_synth_generate(
            tasks[i % n_tasks], cl_synth_stream_seed(seed, (guint64)i), &so, error);
        if (!syn)
            return NULL;
        g_autoptr(ClTrainSample) ts = cl_train_sample_from_synth(model, syn, FALSE, error);
        if (!ts)
            return NULL;
        const size_t img = (size_t)cfg->channels * cfg->image_size * cfg->image_size;
        /* photo-edits: crops of one photograph are one group, not only one sample's pair */
        const int group = syn->source >= 0 ? syn->source : (1 << 20) + i;
        for (guint t = 0; t < ts->n_images; t++)
            if (!collect_image(&col, ts->pixels + t * img, group, error))
                return NULL;
    }
    *n_out = (int)scores->len;
    if (group_of)
        *group_of = (int *)(void *)g_array_free(g_steal_pointer(&owner), FALSE);
    if (features)
        *features = (float *)(void *)g_array_free(g_steal_pointer(&feats), FALSE);
    return (double *)(void *)g_array_free(g_steal_pointer(&scores), FALSE);
}

static int compare_doubles(gconstpointer a, gconstpointer b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* stable: ties keep the images' order */
static int compare_groups(gconstpointer a, gconstpointer b, gpointer owner)
{
    const int *own = owner, i = *(const int *)a, j = *(const int *)b;
    return own[i] != own[j] ? (own[i] > own[j]) - (own[i] < own[j]) : (i > j) - (i < j);
}

ClModel *cl_ood_fit(const ClModel *model, const char *task, const char *photos, int n, guint64 seed,
                    int file_size, double quantile, GError **error)
{
    if (!(quantile >= 0.5 && quantile <= 1) || n < 10) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "fitting image statistics needs at least 10 samples and a quantile of 0.5 "
                    "to 1");
        return NULL;
    }
    const int C2 = 2 * cl_config_ood_channels(&model->config);
    float *feats = NULL;
    int m = 0, *owner = NULL;
    g_autofree double *unused =
        cl_ood_scores(model, task, photos, n, seed, file_size, &feats, &owner, &m, error);
    if (!unused)
        return NULL;
    /* the images in group order, so that a group's bank rows are one run [lo, hi) */
    g_autofree int *order = g_new(int, m);
    for (int i = 0; i < m; i++)
        order[i] = i;
    g_qsort_with_data(order, m, sizeof(int), compare_groups, owner);
    g_autofree float *f = g_new(float, (size_t)m * C2);
    g_autofree int *own = g_new(int, m);
    for (int i = 0; i < m; i++) {
        memcpy(f + (size_t)i * C2, feats + (size_t)order[i] * C2, sizeof(float) * C2);
        own[i] = owner[order[i]];
    }
    g_free(feats);
    g_free(owner);
    ClModelConfig cfg = model->config;
    cfg.ood = m;
    g_autoptr(ClModel) out = cl_model_reshaped(model, &cfg, 0, "ood.", error);
    if (!out)
        return NULL;
    ClModelWeights *w = &out->w;
    for (int c = 0; c < C2; c++) {
        double s = 0, s2 = 0;
        for (int i = 0; i < m; i++)
            s += f[(size_t)i * C2 + c];
        double mean = s / m;
        for (int i = 0; i < m; i++)
            s2 += (f[(size_t)i * C2 + c] - mean) * (f[(size_t)i * C2 + c] - mean);
        w->ood_mean[c] = (float)mean;
        /* a floor keeps a value that never varied from deciding alone */
        w->ood_var[c] = (float)MAX(s2 / MAX(m - 1, 1), 1e-6);
        for (int i = 0; i < m; i++)
            w->ood_bank[(size_t)i * C2 + c] =
                (float)((f[(size_t)i * C2 + c] - mean) / sqrt(w->ood_var[c]));
    }
    /* each fitting image scored against the other groups' rows (not its own sample's images,
     * the same scene; for photo-edits, not any crop of its own photograph). Scoring a crop
     * against other crops of its photograph would put the threshold where an image seen in
     * training lies, and flag most new photographs. First unscaled: each row's radius, how far
     * the training images nearest to it lie; then scaled by those radii: the threshold at the
     * quantile. */
    g_autofree double *sc = g_new(double, m);
    g_autofree int *lo_of = g_new(int, m), *hi_of = g_new(int, m);
    for (int i = 0, lo = 0; i < m; i++) {
        while (own[lo] != own[i])
            lo++;
        int hi = i;
        while (hi < m && own[hi] == own[i])
            hi++;
        lo_of[i] = lo, hi_of[i] = hi;
        w->ood_radius[i] = (float)cl_encoder_ood_score(w->ood_mean, w->ood_var, w->ood_bank, NULL,
                                                       m, C2, f + (size_t)i * C2, lo, hi);
    }
    for (int i = 0; i < m; i++)
        sc[i] = cl_encoder_ood_score(w->ood_mean, w->ood_var, w->ood_bank, w->ood_radius, m, C2,
                                     f + (size_t)i * C2, lo_of[i], hi_of[i]);
    qsort(sc, (size_t)m, sizeof(double), compare_doubles);
    w->ood_threshold[0] = (float)sc[MIN(m - 1, (int)floor(quantile * (m - 1) + 0.5))];
    cl_model_weights_changed(out);
    return g_steal_pointer(&out);
}
