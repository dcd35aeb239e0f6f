/* model.h - one model = config + weights + tokenizer, loaded from / saved to a safetensors file. */
#pragma once

#include <glib.h>

#include "config.h"
#include "tokenizer.h"
#include "weights.h"

G_BEGIN_DECLS

typedef struct {
    ClModelConfig config;
    ClModelWeights w;       /* f32 views into `arena` (or straight into the mapping for F32) */
    ClTokenizer *tokenizer; /* owned */
    float *arena;           /* owned; all converted / initialised parameters */
    size_t n_params;        /* number of parameters (floats) */
    GMappedFile *mapping;   /* owned; the model file when loaded from disk */
    char *path;             /* NULL for a random-init model */
    char *sha256;           /* of the file (hex); NULL for a random-init model until saved */
} ClModel;

/* Loads and validates a model file: header, config, tokenizer, every tensor present with the
 * config's shape and a known dtype. F16/BF16 are converted to f32. */
ClModel *cl_model_load(const char *path, GError **error);
/* Seeded random weights (normal std 0.02, norms 1, biases 0; SVE modules initialised per
 * docs/MODEL.md §3.7) and a small built-in byte-level tokenizer. Deterministic for a seed on
 * every machine. */
ClModel *cl_model_new_random(const ClModelConfig *cfg, guint64 seed, GError **error);
/* Writes the model as safetensors (dtype "F32", "F16" or "BF16"), atomically. */
gboolean cl_model_save(ClModel *model, const char *path, const char *dtype, GError **error);
void cl_model_free(ClModel *model);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClModel, cl_model_free)

/* docs/MODEL.md §3.7: (re)initialises every SVE tensor from its block (clone + out_init_std). */
void cl_model_weights_insert_sve(ClModel *model, guint64 seed);

G_END_DECLS
