/* ood.c - config.ood's statistics fitted on a task's images (ood.h). */
#include "train/ood.h"

#include <math.h>
#include <string.h>

#include "model/encoder.h"
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

double *cl_ood_scores(const ClModel *model, const char *task, const char *photos, int n,
                      guint64 seed, float **features, int **group_of, int *n_out, GError **error)
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
    /* "a,b,c": the samples take the tasks in turn (a model trained on several) */
    g_auto(GStrv) tasks = g_strsplit(task, ",", -1);
    const int n_tasks = (int)g_strv_length(tasks);
    if (n_tasks == 0 || !*tasks[0]) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT, "no task to draw images from");
        return NULL;
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
        for (guint t = 0; t < ts->n_images; t++) {
            if (!image_values(model, ts->pixels + t * img, patches, values, error))
                return NULL;
            cl_encoder_ood_descriptor(values, N, C, desc);
            if (features)
                g_array_append_vals(feats, desc, 2 * C);
            double s = features ? 0
                                : cl_encoder_ood_score(model->w.ood_mean, model->w.ood_var,
                                                       model->w.ood_bank, model->w.ood_radius,
                                                       cfg->ood, 2 * C, desc, 0, 0);
            g_array_append_val(scores, s);
            /* photo-edits: crops of one photograph are one group, not only one sample's pair */
            const int group = syn->source >= 0 ? syn->source : (1 << 20) + i;
            g_array_append_val(owner, group);
        }
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
                    double quantile, GError **error)
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
        cl_ood_scores(model, task, photos, n, seed, &feats, &owner, &m, error);
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
