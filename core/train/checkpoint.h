/* checkpoint.h - training checkpoints that resume exactly: one safetensors file with the
 * model (config, tokenizer, every parameter in f32), the AdamW moments and step, and the
 * trainer's own state (step, RNG words, data cursor, options), written atomically. */
#pragma once

#include <glib.h>

#include "model/model.h"
#include "train/optim.h"

G_BEGIN_DECLS

/* File layout (safetensors; docs in checkpoint.c):
 *   tensors   the model's own names and shapes (cl_model_weight_specs order, F32), then
 *             "adam.m" and "adam.v" (F32, shape (n_params))
 *   metadata  changelens.format "1", changelens.config, changelens.tokenizer (as a model file)
 *             changelens.checkpoint "1"
 *             train.step            decimal
 *             train.rng             the RNG words, 16 hex digits each, comma-separated
 *             train.cursor          the caller's JSON (data position)
 *             train.options         the caller's JSON (training options)
 *             adam.step, adam.options (JSON: beta1, beta2, eps, weight_decay)
 *             train.data_sha256     SHA-256 of the data section, so flipped bits are caught
 *             train.extra           (only with extra tensors) their names, comma-separated
 *   extra     the trainer's own F32 vectors after the moments (training-only parameters such
 *             as the auxiliary heads "aux.objects.weight", and their moments), in the listed
 *             order, covered by the checksum; any other tensor is still refused
 */

#define CL_CHECKPOINT_ERROR (cl_checkpoint_error_quark())
GQuark cl_checkpoint_error_quark(void);
typedef enum {
    CL_CHECKPOINT_ERROR_FILE,     /* not a checkpoint, malformed, or corrupted */
    CL_CHECKPOINT_ERROR_MISMATCH, /* a valid checkpoint for another config / optimiser */
    CL_CHECKPOINT_ERROR_INPUT,    /* bad arguments to save */
    CL_CHECKPOINT_ERROR_IO,
} ClCheckpointError;

/* One of the trainer's own vectors (not part of the model). */
typedef struct {
    char *name;  /* unique, not a model tensor's, no ',' */
    float *data; /* (n) */
    size_t n;
} ClCheckpointExtra;

/* Everything a trainer needs back, besides the model and the optimiser. */
typedef struct {
    gint64 step;  /* training steps completed */
    guint64 *rng; /* the trainer's RNG state(s), opaque words */
    size_t n_rng;
    char *cursor_json;        /* the data cursor; "null" when none was given */
    char *options_json;       /* the training options; "null" when none was given */
    ClCheckpointExtra *extra; /* n_extra tensors (loaded: owned, names and data too) */
    guint n_extra;
} ClCheckpointState;

/* The loaded extra tensor `name`, or NULL. */
const ClCheckpointExtra *cl_checkpoint_state_extra(const ClCheckpointState *s, const char *name);

void cl_checkpoint_state_clear(ClCheckpointState *s);

/* Writes model (all parameters, whatever the model was loaded as, saved as F32), the
 * optimiser (opt->n must equal model->n_params) and `state` (its JSON strings are checked to
 * parse; NULL ones are written as "null") to `path`, atomically (a temporary file in the same
 * folder, flushed and renamed over `path`: a crash leaves the old checkpoint or the new one). */
gboolean cl_checkpoint_save(const char *path, const ClModel *model, const ClAdamW *opt,
                            const ClCheckpointState *state, GError **error);

/* A loaded checkpoint; the caller owns all three parts (steal them, or cl_checkpoint_free). */
typedef struct {
    ClModel *model; /* trainable: parameters flat in model->arena; path/sha256 NULL */
    ClAdamW *opt;   /* options, moments, step, the decay mask of the config */
    ClCheckpointState state;
} ClCheckpoint;

/* Reads and validates everything: the header, the config, the tokenizer, every tensor with
 * its shape, the moments' size against the config, the metadata, and the data checksum.
 * Errors say what is wrong and start with the file name. */
ClCheckpoint *cl_checkpoint_load(const char *path, GError **error);
void cl_checkpoint_free(ClCheckpoint *ck);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClCheckpoint, cl_checkpoint_free)

/* The model of a model file or of a checkpoint (told apart by the header's metadata), trainable
 * (parameters flat in model->arena); a checkpoint's optimiser and state are dropped. */
ClModel *cl_checkpoint_load_model(const char *path, GError **error);
/* Whether path is a readable safetensors file that says it is a checkpoint. */
gboolean cl_checkpoint_file_is_checkpoint(const char *path);

/* FALSE + CL_CHECKPOINT_ERROR_MISMATCH naming the first config key that differs, for a trainer
 * that resumes with a config given on its command line. */
gboolean cl_checkpoint_check_config(const ClCheckpoint *ck, const ClModelConfig *cfg,
                                    GError **error);

/* The first member of the JSON object `a` (in a's order) that the JSON object `b` lacks or holds
 * with another value, for messages that name what a resume does not match: TRUE with its name
 * in *key and the two values as JSON in *va and *vb ("(absent)" where b lacks it); FALSE when
 * every member matches or either text is not a JSON object. */
gboolean cl_checkpoint_json_first_difference(const char *a, const char *b, char **key, char **va,
                                             char **vb);

/* Rotation: "<dir>/<prefix>-<step, 8+ digits>.safetensors". */
char *cl_checkpoint_path(const char *dir, const char *prefix, gint64 step);
/* Deletes all but the `keep` (>= 1) highest-step files of that pattern in dir; other files are
 * left alone. */
gboolean cl_checkpoint_rotate(const char *dir, const char *prefix, guint keep, GError **error);
/* The highest-step file of that pattern (NULL when there is none, without an error). */
char *cl_checkpoint_latest(const char *dir, const char *prefix, GError **error);

G_END_DECLS
