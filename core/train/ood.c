/* ood.c - config.ood's statistics fitted on a task's images (ood.h). */
#include "train/ood.h"

#include <cblas.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "model/encoder.h"
#include "model/preprocess.h"
#include "nn/backend.h"
#include "synth/synth.h"
#include "train/synthdata.h"

/* One image's descriptor (cl_config_ood_len(dcfg) values) into desc: the stem's features or
 * the patches' pixels (patches: N × cl_config_patch_inputs scratch), described as dcfg says. */
static gboolean image_desc(const ClModel *model, const ClModelConfig *dcfg, const float *pixels,
                           float *patches, float *desc, GError **error)
{
    const ClModelConfig *cfg = &model->config;
    const int N = cl_config_n_patches(cfg);
    if (cfg->enc_stem_effnet) {
        if (!cl_encoder_stem_features(pixels, cfg->image_size, patches, N, error))
            return FALSE;
    } else {
        cl_patch_unfold(patches, pixels, cfg->channels, cfg->image_size, cfg->patch_size);
    }
    return cl_encoder_ood_describe(dcfg, model->w.patch_w, model->w.patch_b, patches, N, desc,
                                   error);
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

/* One image into the arrays: its descriptor (with features) or its score, its colourfulness
 * and its group. dcfg: how images are described (the model's config, or the one being fitted). */
typedef struct {
    const ClModel *model;
    const ClModelConfig *dcfg;
    float *patches, *desc;
    gboolean features;
    GArray *scores, *feats, *owner, *colours;
} Collect;

static gboolean collect_image(Collect *c, const float *pixels, int group, GError **error)
{
    const ClModelConfig *cfg = &c->model->config, *dcfg = c->dcfg;
    const int L = cl_config_ood_len(dcfg);
    if (!image_desc(c->model, dcfg, pixels, c->patches, c->desc, error))
        return FALSE;
    if (c->features)
        g_array_append_vals(c->feats, c->desc, L);
    const ClModelWeights *w = &c->model->w;
    const double colour = cl_encoder_colourfulness(pixels, cfg->channels, cfg->image_size);
    double s = c->features ? 0
                           : cl_encoder_ood_model_score(cfg, w->ood_mean, w->ood_var, w->ood_bank,
                                                        w->ood_radius, c->desc);
    if (!c->features && cfg->ood_min_colour > 0 && colour < cfg->ood_min_colour)
        s = INFINITY; /* without colour: unlike every training image, whatever its descriptor */
    g_array_append_val(c->scores, s);
    g_array_append_val(c->owner, group);
    g_array_append_val(c->colours, colour);
    return TRUE;
}

static double *scores_as(const ClModel *model, const ClModelConfig *dcfg, const char *task,
                         const char *photos, int n, guint64 seed, int file_size, float **features,
                         int **group_of, double **colours, int *n_out, GError **error)
{
    const ClModelConfig *cfg = &model->config;
    if (!features && !model->w.ood_bank) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "the model has no image statistics (fit them with `model fit-ood`)");
        return NULL;
    }
    const int N = cl_config_n_patches(cfg);
    ClSynthOptions so;
    cl_synth_options_init(&so);
    so.width = so.height = cfg->image_size;
    so.patch = cfg->patch_size;
    so.photos = photos;
    g_autoptr(GArray) scores = g_array_new(FALSE, FALSE, sizeof(double));
    g_autoptr(GArray) feats = g_array_new(FALSE, FALSE, sizeof(float));
    g_autoptr(GArray) owner = g_array_new(FALSE, FALSE, sizeof(int));
    g_autoptr(GArray) colour = g_array_new(FALSE, FALSE, sizeof(double));
    g_autofree float *patches = g_new(float, (size_t)N * cl_config_patch_inputs(cfg));
    g_autofree float *desc = g_new(float, cl_config_ood_len(dcfg));
    Collect col = { model, dcfg, patches, desc, features != NULL, scores, feats, owner, colour };
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
    if (colours)
        *colours = (double *)(void *)g_array_free(g_steal_pointer(&colour), FALSE);
    if (group_of)
        *group_of = (int *)(void *)g_array_free(g_steal_pointer(&owner), FALSE);
    if (features)
        *features = (float *)(void *)g_array_free(g_steal_pointer(&feats), FALSE);
    return (double *)(void *)g_array_free(g_steal_pointer(&scores), FALSE);
}

double *cl_ood_scores(const ClModel *model, const char *task, const char *photos, int n,
                      guint64 seed, int file_size, float **features, int **group_of, int *n_out,
                      GError **error)
{
    return scores_as(model, &model->config, task, photos, n, seed, file_size, features, group_of,
                     NULL, n_out, error);
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

/* ---- config.ood_head: a Gaussian with a few principal directions ---- */

#define GAUSS_FOLDS 5 /* the threshold's scores: each image against a fit without its fold */
#define GAUSS_ITERATIONS 60

/* The eigenvalues (e) and eigenvectors (columns of v, n × n) of the symmetric a (n × n; a is
 * overwritten): cyclic Jacobi rotations. */
static void jacobi(double *a, int n, double *e, double *v)
{
    for (int i = 0; i < n * n; i++)
        v[i] = i % (n + 1) == 0;
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0, diag = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                *(i == j ? &diag : &off) += a[i * n + j] * a[i * n + j];
        if (off <= 1e-24 * MAX(diag, 1e-300))
            break;
        for (int p = 0; p < n; p++)
            for (int q = p + 1; q < n; q++) {
                if (a[p * n + q] == 0)
                    continue;
                const double th = (a[q * n + q] - a[p * n + p]) / (2 * a[p * n + q]);
                const double t = (th >= 0 ? 1 : -1) / (fabs(th) + sqrt(th * th + 1));
                const double c = 1 / sqrt(t * t + 1), sn = t * c;
                for (int k = 0; k < n; k++) { /* columns p, q */
                    const double kp = a[k * n + p], kq = a[k * n + q];
                    a[k * n + p] = c * kp - sn * kq, a[k * n + q] = sn * kp + c * kq;
                }
                for (int k = 0; k < n; k++) { /* rows p, q */
                    const double pk = a[p * n + k], qk = a[q * n + k];
                    a[p * n + k] = c * pk - sn * qk, a[q * n + k] = sn * pk + c * qk;
                }
                for (int k = 0; k < n; k++) {
                    const double kp = v[k * n + p], kq = v[k * n + q];
                    v[k * n + p] = c * kp - sn * kq, v[k * n + q] = sn * kp + c * kq;
                }
            }
    }
    for (int i = 0; i < n; i++)
        e[i] = a[i * n + i];
}

/* The columns of q (L × R, row-major) made orthonormal (modified Gram-Schmidt). */
static void orthonormalise(float *q, int L, int R)
{
    for (int k = 0; k < R; k++) {
        for (int j = 0; j < k; j++) {
            double d = 0;
            for (int c = 0; c < L; c++)
                d += (double)q[c * R + k] * q[c * R + j];
            for (int c = 0; c < L; c++)
                q[c * R + k] -= (float)(d * q[c * R + j]);
        }
        double nn = 0;
        for (int c = 0; c < L; c++)
            nn += (double)q[c * R + k] * q[c * R + k];
        const double inv = nn > 0 ? 1 / sqrt(nn) : 0;
        for (int c = 0; c < L; c++)
            q[c * R + k] = (float)(q[c * R + k] * inv);
    }
}

void cl_ood_gauss_fit(const float *x, const int *rows, int n, int L, int R, float *mean, float *var,
                      float *basis, float *lambda)
{
    g_autofree float *xc = g_new(float, (size_t)n * L);
    for (int c = 0; c < L; c++) {
        double s = 0;
        for (int i = 0; i < n; i++)
            s += x[(size_t)rows[i] * L + c];
        mean[c] = (float)(s / n);
    }
    double total = 0;
    for (int i = 0; i < n; i++)
        for (int c = 0; c < L; c++) {
            const float d = x[(size_t)rows[i] * L + c] - mean[c];
            xc[(size_t)i * L + c] = d;
            total += (double)d * d;
        }
    total /= MAX(n - 1, 1);
    g_autofree float *q = g_new(float, (size_t)L * R), *z = g_new(float, (size_t)L * R);
    g_autofree float *y = g_new(float, (size_t)n * R);
    GRand *rng = g_rand_new_with_seed(12345);
    for (size_t i = 0; i < (size_t)L * R; i++)
        q[i] = (float)g_rand_double_range(rng, -1, 1);
    g_rand_free(rng);
    orthonormalise(q, L, R);
    for (int it = 0; it < GAUSS_ITERATIONS; it++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, R, L, 1, xc, L, q, R, 0, y, R);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, L, R, n, 1, xc, L, y, R, 0, q, R);
        orthonormalise(q, L, R);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, R, L, 1, xc, L, q, R, 0, y, R);
    g_autofree double *b = g_new0(double, (size_t)R * R);
    g_autofree double *e = g_new(double, R);
    g_autofree double *v = g_new(double, (size_t)R * R);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < R; j++)
            for (int k = 0; k < R; k++)
                b[j * R + k] += (double)y[(size_t)i * R + j] * y[(size_t)i * R + k];
    jacobi(b, R, e, v);
    g_autofree int *by = g_new(int, R); /* the eigenvalues' order, largest first */
    for (int k = 0; k < R; k++)
        by[k] = k;
    for (int i = 1; i < R; i++)
        for (int j = i; j > 0 && e[by[j]] > e[by[j - 1]]; j--) {
            const int t = by[j];
            by[j] = by[j - 1], by[j - 1] = t;
        }
    double kept = 0;
    for (int k = 0; k < R; k++) {
        const int src = by[k];
        lambda[k] = (float)MAX(e[src] / MAX(n - 1, 1), 1e-12);
        kept += lambda[k];
        for (int c = 0; c < L; c++) {
            double s = 0;
            for (int j = 0; j < R; j++)
                s += q[c * R + j] * v[j * R + src];
            z[(size_t)k * L + c] = (float)s;
        }
    }
    memcpy(basis, z, sizeof(float) * (size_t)L * R);
    /* the residual: the variance left, shared by the L - R other directions (a floor keeps
     * a descriptor the training images filled from dividing by nothing) */
    const double psi = MAX((total - kept) / MAX(L - R, 1), 1e-6 * total / L + 1e-12);
    for (int c = 0; c < L; c++)
        var[c] = (float)psi;
}

static ClModel *gauss_model(const ClModel *model, ClModelConfig *cfg, const float *f,
                            const int *owner, int m, int R, double quantile, GError **error)
{
    const int L = cl_config_ood_len(cfg);
    if (R < 1 || R > 256 || m < 4 * R || m < 2 * GAUSS_FOLDS) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "a Gaussian of %d principal directions needs at least %d images (%d here)", R,
                    MAX(4 * R, 2 * GAUSS_FOLDS), m);
        return NULL;
    }
    cfg->ood = R;
    g_autoptr(ClModel) out = cl_model_reshaped(model, cfg, 0, "ood.", error);
    if (!out)
        return NULL;
    /* the threshold: each image scored against a fit without its fold, the folds drawn by
     * group (a photograph's crops in one fold, so that they are scored as a new photograph) */
    g_autoptr(GHashTable) fold_of = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_autofree int *fold = g_new(int, m), *in = g_new(int, m);
    for (int i = 0; i < m; i++) {
        gpointer key = GINT_TO_POINTER(owner[i]), val;
        if (!g_hash_table_lookup_extended(fold_of, key, NULL, &val)) {
            val = GINT_TO_POINTER(g_hash_table_size(fold_of) % GAUSS_FOLDS);
            g_hash_table_insert(fold_of, key, val);
        }
        fold[i] = GPOINTER_TO_INT(val);
    }
    /* each fold's fit must see a Gaussian's worth of images: enough groups, none too large */
    int fold_n[GAUSS_FOLDS] = { 0 };
    for (int i = 0; i < m; i++)
        fold_n[fold[i]]++;
    for (int k = 0; k < GAUSS_FOLDS; k++)
        if (g_hash_table_size(fold_of) < GAUSS_FOLDS || m - fold_n[k] < 4 * R) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "the threshold needs images of at least %d groups (photographs, or "
                        "samples), %d without any one fold's: %u groups here",
                        GAUSS_FOLDS, 4 * R, g_hash_table_size(fold_of));
            return NULL;
        }
    g_autofree float *mean = g_new(float, L);
    g_autofree float *var = g_new(float, L);
    g_autofree float *basis = g_new(float, (size_t)R * L);
    g_autofree float *lambda = g_new(float, R);
    g_autofree double *sc = g_new(double, m);
    for (int k = 0; k < GAUSS_FOLDS; k++) {
        int n = 0;
        for (int i = 0; i < m; i++)
            if (fold[i] != k)
                in[n++] = i;
        cl_ood_gauss_fit(f, in, n, L, R, mean, var, basis, lambda);
        for (int i = 0; i < m; i++)
            if (fold[i] == k)
                sc[i] =
                    cl_encoder_ood_gauss_score(mean, var, basis, lambda, R, L, f + (size_t)i * L);
    }
    for (int i = 0; i < m; i++)
        in[i] = i;
    ClModelWeights *w = &out->w;
    cl_ood_gauss_fit(f, in, m, L, R, w->ood_mean, w->ood_var, w->ood_bank, w->ood_radius);
    qsort(sc, (size_t)m, sizeof(double), compare_doubles);
    w->ood_threshold[0] = (float)sc[MIN(m - 1, (int)floor(quantile * (m - 1) + 0.5))];
    cl_model_weights_changed(out);
    return g_steal_pointer(&out);
}

ClModel *cl_ood_fit(const ClModel *model, const char *task, const char *photos, int n, guint64 seed,
                    int file_size, double quantile, ClOodFitFlags flags, int rank, GError **error)
{
    if (!(quantile >= 0.5 && quantile <= 1) || n < 10) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "fitting image statistics needs at least 10 samples and a quantile of 0.5 "
                    "to 1");
        return NULL;
    }
    ClModelConfig cfg = model->config;
    cfg.ood_head = (flags & CL_OOD_FIT_HEAD) != 0;
    cfg.ood_min_colour = 0;
    if ((cfg.ood_head && !cfg.enc_stem_effnet) ||
        ((flags & CL_OOD_FIT_COLOUR) && cfg.channels != 3)) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT, "%s",
                    cfg.ood_head && !cfg.enc_stem_effnet
                        ? "pooled head features need a model with the EfficientNet-Lite0 stem"
                        : "a colour floor needs a model of colour images");
        return NULL;
    }
    const int C2 = cl_config_ood_len(&cfg);
    float *feats = NULL;
    int m = 0, *owner = NULL;
    g_autofree double *colours = NULL;
    g_autofree double *unused = scores_as(model, &cfg, task, photos, n, seed, file_size, &feats,
                                          &owner, &colours, &m, error);
    if (!unused)
        return NULL;
    if (flags & CL_OOD_FIT_COLOUR) {
        /* half the least colourful fitting image's: below it, an image has less colour than any
         * the model was trained on by a wide margin (grey images score 0) */
        double least = G_MAXDOUBLE;
        for (int i = 0; i < m; i++)
            least = MIN(least, colours[i]);
        cfg.ood_min_colour = m > 0 ? 0.5 * least : 0;
    }
    if (cfg.ood_head) {
        ClModel *g = gauss_model(model, &cfg, feats, owner, m, rank, quantile, error);
        g_free(feats);
        g_free(owner);
        return g;
    }
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
