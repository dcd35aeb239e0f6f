/* model-quant.h - a model's decoder matrices kept block-quantized: made from f32, read from and
 * written to the model file (docs/MODEL.md §7). */
#pragma once

#include <glib.h>

#include "model/model.h"
#include "model/safetensors.h"

G_BEGIN_DECLS

/* "Q8_0" / "Q4_1" (any case) to the type; FALSE for anything else. */
gboolean cl_quant_type_from_name(const char *name, ClQuantType *out);

void cl_quant_weights_free(ClQuantWeights *qw);

/* For the model file's reader and writer (model.c): */

/* __metadata__ "changelens.quant" ({"dec.0.attn.q.weight": "Q8_0", ...}) checked against the
 * config: name (owned) -> ClQuantType + 1. NULL + a CL_MODEL_ERROR_FILE naming the entry. */
GHashTable *cl_model_quant_parse(const ClModelConfig *cfg, const char *json, GError **error);
/* A tensor listed in `types`: U8 of shape [rows, cols / 32, block bytes]; *numel the values of
 * the f32 matrix it stands for. */
gboolean cl_model_quant_check_tensor(const ClModelConfig *cfg, GHashTable *types,
                                     const ClSafeTensor *t, guint64 *numel, GError **error);
/* model->quant from the listed tensors: pointing into st's bytes (`in_place`: the caller keeps
 * them alive) or copied. */
gboolean cl_model_quant_bind(ClModel *model, const ClSafetensors *st, GHashTable *types,
                             gboolean in_place, GError **error);
/* The U8 entry of a matrix the model keeps quantized (`shape` holds its shape); FALSE when the
 * matrix is not quantized. */
gboolean cl_model_quant_entry(const ClModel *model, const char *name, gint64 shape[3],
                              ClSafetensorsEntry *e);
/* "changelens.quant"'s value for the model, or NULL when nothing is quantized. */
char *cl_model_quant_json(const ClModel *model);

G_END_DECLS
