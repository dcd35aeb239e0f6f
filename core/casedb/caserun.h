/* caserun.h - what a describe run leaves in the case database (docs/DESIGN.md §6; docs/DESIGN.md §9
 * (table stake 16), reproducibility): the run row — model, its hash and config, device, timings, and the
 * settings with every image's path, frame, sha256 and letterbox — and its heatmaps on the case's
 * image ids. Shared by `changelens-cli case describe` and the app. */
#pragma once

#include <glib.h>

#include "casedb/casedb.h"
#include "model/describe.h"

G_BEGIN_DECLS

/* images: the case's images the run read (ClCaseImage*, in the order given to the model; at
 * least res->n_images of them). model_name, model_sha256, model_config_json, device: as the run
 * row stores them. load_ms: time spent loading the model (0 when reused). Returns the run (free
 * with cl_case_run_free) and *heatmaps (ClCaseHeatmap*, owned by the array), ready for
 * cl_casedb_run_record. */
ClCaseRun *cl_case_run_from_describe(GPtrArray *images, const ClDescribeOptions *opts,
                                     const ClDescribeResult *res, const char *model_name,
                                     const char *model_sha256, const char *model_config_json,
                                     int model_image_size, const char *device, guint64 seed,
                                     double load_ms, GPtrArray **heatmaps);

G_END_DECLS
