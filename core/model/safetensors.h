/* safetensors.h - strict reader and atomic writer of safetensors files (docs/MODEL.md §7). */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* The dtypes a model file may hold: the float ones (CL_N_DTYPES of them), and U8 for the blocks
 * of a quantized matrix (docs/MODEL.md §7), never a float tensor's dtype. Other safetensors
 * dtypes (F64, I64, BOOL, ...) are known but refused as unsupported. */
typedef enum {
    CL_DTYPE_F32,
    CL_DTYPE_F16,
    CL_DTYPE_BF16,
    CL_N_DTYPES,
    CL_DTYPE_U8 = CL_N_DTYPES
} ClDtype;

const char *cl_dtype_name(ClDtype dtype); /* "F32", "F16", "BF16", "U8" */
/* A float dtype by name, case-insensitive ("f16" works too); FALSE for anything else, U8
 * included. */
gboolean cl_dtype_from_name(const char *name, ClDtype *out);
gsize cl_dtype_size(ClDtype dtype); /* bytes per element */

#define CL_SAFETENSORS_MAX_HEADER ((guint64)100000000) /* 100 MB, as the reference library */
#define CL_SAFETENSORS_MAX_NDIM 8
#define CL_SAFETENSORS_ALIGN 64 /* the writer starts the data at a multiple of this */

typedef struct {
    char *name;
    ClDtype dtype;
    int ndim;
    gint64 shape[CL_SAFETENSORS_MAX_NDIM];
    guint64 numel;      /* product of shape (1 for a scalar) */
    guint64 begin, end; /* data_offsets: relative to the start of the data section */
    const guint8 *data; /* begin's address in the parsed buffer (any alignment) */
} ClSafeTensor;

typedef struct {
    GPtrArray *tensors;   /* ClSafeTensor *, in ascending data offset (= file) order */
    GHashTable *by_name;  /* name -> ClSafeTensor * (borrowed from tensors) */
    GHashTable *metadata; /* key -> value, both strings; empty when there is no __metadata__ */
    const guint8 *bytes;  /* the whole file */
    gsize size;
    gsize header_len;   /* the JSON header's length; data starts at 8 + header_len */
    const guint8 *data; /* the data section */
    gsize data_size;
    GMappedFile *mapping; /* owned when opened from a file (private, copy-on-write) */
} ClSafetensors;

/* Parses and validates a whole file held in memory. Nothing is copied: `bytes` must outlive the
 * result. Every problem is a CL_MODEL_ERROR_FILE naming the tensor or field at fault. */
ClSafetensors *cl_safetensors_parse(const guint8 *bytes, gsize size, GError **error);
/* Maps `path` (private, writable copy-on-write: tensors may be modified in memory) and parses
 * it; messages start with the file's name. */
ClSafetensors *cl_safetensors_open(const char *path, GError **error);
const ClSafeTensor *cl_safetensors_get(const ClSafetensors *st, const char *name);
/* NULL when absent. */
const char *cl_safetensors_metadata(const ClSafetensors *st, const char *key);
void cl_safetensors_free(ClSafetensors *st);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClSafetensors, cl_safetensors_free)

/* One tensor to write: f32 values converted to `dtype` on the way out, or (U8) bytes as they
 * are. */
typedef struct {
    const char *name;
    ClDtype dtype;
    int ndim; /* 0..CL_SAFETENSORS_MAX_NDIM */
    const gint64 *shape;
    const float *data;   /* product(shape) values (a float dtype) */
    const guint8 *bytes; /* product(shape) bytes (U8) */
} ClSafetensorsEntry;

/* Writes `entries` contiguously in the given order after a header padded with spaces so the
 * data starts CL_SAFETENSORS_ALIGN-aligned, with `metadata` (NULL or NULL-terminated
 * key, value, key, value, ..., NULL) as __metadata__. Atomic: a temporary file in the same
 * folder, flushed and renamed over `path`. `sha256` (may be NULL) receives the new file's
 * SHA-256 in hex (caller frees). */
gboolean cl_safetensors_write(const char *path, const ClSafetensorsEntry *entries, gsize n_entries,
                              const char *const *metadata, char **sha256, GError **error);

/* Strict JSON for untrusted text: no NUL (raw or \u0000), valid UTF-8, nesting depth <= 16,
 * integers of at most 18 digits (json-glib wraps larger ones silently), no duplicate keys
 * (json-glib keeps the last silently). Returns the root (caller frees) or NULL with a
 * CL_MODEL_ERROR `code` error. `len` may be -1 for NUL-terminated text. */
JsonNode *cl_json_parse_strict(const char *text, gssize len, int code, GError **error);

G_END_DECLS
