/* ood.h - fits config.ood's statistics (docs/MODEL.md §3.11): the per-channel mean and variance
 * of the training images' pooled stem features and a threshold at a quantile of their scores,
 * and measures how often the images of other sets score above it. */
#pragma once

#include <glib.h>

#include "model/model.h"

G_BEGIN_DECLS

/* The scores of every image of n samples of `task` ("a,b": the tasks in turn; synth options at
 * the model's input size; photos: photo-edits' set, NULL for the default) against the model's
 * statistics, or, when `features` is not NULL, the images' descriptors (n_images ×
 * cl_config_ood_len) into
 * *features instead of scoring, and (group_of not NULL) each image's group into *group_of:
 * photo-edits, the index of its photograph; other tasks, its sample's. *n_out: the number of
 * images. file_size > 0: the samples are written as the task's files at that size (DICOM,
 * GeoTIFF, PNG: `synth`'s) and read back as `describe` reads them (loader, default display,
 * letterbox), so that the statistics are those of the images users give; 0: in memory at the
 * model's input size. NULL + error when the task fails or the model has no statistics to score
 * against. */
double *cl_ood_scores(const ClModel *model, const char *task, const char *photos, int n,
                      guint64 seed, int file_size, float **features, int **group_of, int *n_out,
                      GError **error);

typedef enum {
    CL_OOD_FIT_HEAD = 1 << 0,   /* config.ood_head: pooled head features, a Gaussian of them */
    CL_OOD_FIT_COLOUR = 1 << 1, /* config.ood_min_colour: half the fitting images' least */
} ClOodFitFlags;

/* A copy of `model` with config.ood and statistics fitted on n samples of task/photos: the
 * threshold at `quantile` (0.5 to 1) of the fitting images' scores, each against the other
 * groups' images (cl_ood_scores' groups: a photograph's crops are scored as a new photograph).
 * With CL_OOD_FIT_HEAD: a Gaussian of the images' pooled head features with `rank` principal
 * directions (config.ood = rank), the threshold from each image scored against a fit without
 * its fold (five folds of groups). An image below the model's config.ood_min_colour scores
 * infinity in cl_ood_scores. */
ClModel *cl_ood_fit(const ClModel *model, const char *task, const char *photos, int n, guint64 seed,
                    int file_size, double quantile, ClOodFitFlags flags, int rank, GError **error);

/* The Gaussian of the n rows `rows` of x (row-major, L values a row): mean (L), its R principal
 * directions as the rows of basis (R × L, orthonormal) with their variances lambda (R, largest
 * first), and the variance left off them, the mean over the other L − R directions, in every
 * value of var (L) — config.ood_head's statistics (cl_encoder_ood_gauss_score reads them).
 * Subspace iteration on the centred rows, then the directions rotated to diagonalise the
 * covariance within them; deterministic. */
void cl_ood_gauss_fit(const float *x, const int *rows, int n, int L, int R, float *mean, float *var,
                      float *basis, float *lambda);

G_END_DECLS
