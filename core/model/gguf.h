/* gguf.h - strict reader of GGUF v2/v3 files (llama.cpp's model container): metadata, tensor
 * table, and the block formats F32, F16, BF16, Q8_0, Q4_0, Q4_1 dequantized to f32. */
#pragma once

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/* GGUF metadata value types, numbered as in the file. */
typedef enum {
    CL_GGUF_U8 = 0,
    CL_GGUF_I8 = 1,
    CL_GGUF_U16 = 2,
    CL_GGUF_I16 = 3,
    CL_GGUF_U32 = 4,
    CL_GGUF_I32 = 5,
    CL_GGUF_F32 = 6,
    CL_GGUF_BOOL = 7,
    CL_GGUF_STRING = 8,
    CL_GGUF_ARRAY = 9,
    CL_GGUF_U64 = 10,
    CL_GGUF_I64 = 11,
    CL_GGUF_F64 = 12,
    CL_GGUF_N_VALUE_TYPES
} ClGgufValueType;

/* Tensor element types (ggml's numbering). Only these are accepted; any other type is refused
 * with its number and, where known, its name. */
typedef enum {
    CL_GGML_F32 = 0,
    CL_GGML_F16 = 1,
    CL_GGML_Q4_0 = 2,
    CL_GGML_Q4_1 = 3,
    CL_GGML_Q8_0 = 8,
    CL_GGML_BF16 = 30,
} ClGgmlType;

#define CL_GGUF_MAX_DIMS 4
#define CL_GGUF_MAX_NAME 64 /* bytes of a tensor name, as llama.cpp */
#define CL_GGUF_DEFAULT_ALIGNMENT 32
#define CL_GGUF_QK 32 /* elements per block of Q8_0, Q4_0, Q4_1 */

/* One metadata value. Scalars are widened into u/i/f; a string is NUL-terminated, copied and
 * valid UTF-8; an array holds `n` elements of `elem_type` (never ARRAY: nested arrays are
 * refused) — numbers widened into `nums_u`/`nums_i`/`nums_f` by kind, strings in `strs`. */
typedef struct {
    ClGgufValueType type;
    union {
        guint64 u; /* U8..U64, BOOL */
        gint64 i;  /* I8..I64 */
        double f;  /* F32, F64 */
    };
    char *str;                 /* STRING */
    ClGgufValueType elem_type; /* ARRAY */
    guint64 n;                 /* ARRAY: element count */
    guint64 *nums_u;           /* ARRAY of unsigned or BOOL */
    gint64 *nums_i;            /* ARRAY of signed */
    double *nums_f;            /* ARRAY of F32/F64 */
    char **strs;               /* ARRAY of STRING (n entries, each NUL-terminated UTF-8) */
} ClGgufValue;

typedef struct {
    char *name;
    ClGgmlType type;
    int n_dims;
    guint64 ne[CL_GGUF_MAX_DIMS]; /* ne[0] varies fastest (a row); unused dims are 1 */
    guint64 numel;
    guint64 offset; /* from the start of the data section */
    guint64 nbytes;
    const guint8 *data; /* in the parsed buffer */
} ClGgufTensor;

typedef struct {
    guint32 version;
    guint64 alignment;
    GPtrArray *tensors;  /* ClGgufTensor *, file order */
    GHashTable *by_name; /* name -> ClGgufTensor * */
    GPtrArray *keys;     /* char *, metadata keys in file order */
    GHashTable *kv;      /* key -> ClGgufValue * */
    const guint8 *bytes; /* the whole file */
    gsize size;
    gsize data_start;     /* offset of the data section in the file */
    GMappedFile *mapping; /* owned when opened from a path */
} ClGguf;

/* Parses and validates a GGUF file held in memory (nothing of the tensors is copied: `bytes`
 * must outlive the result). Every count, length, offset, alignment and type is checked before
 * it is used; tensors must lie inside the file, not overlap, and be aligned. Problems are
 * CL_MODEL_ERROR_FILE errors that name the field or tensor at fault. */
ClGguf *cl_gguf_parse(const guint8 *bytes, gsize size, GError **error);
/* Maps `path` read-only and parses it; messages start with the file's name. */
ClGguf *cl_gguf_open(const char *path, GError **error);
void cl_gguf_free(ClGguf *g);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClGguf, cl_gguf_free)

/* NULL when absent. */
const ClGgufValue *cl_gguf_get(const ClGguf *g, const char *key);
const ClGgufTensor *cl_gguf_tensor(const ClGguf *g, const char *name);
/* Typed look-ups: FALSE + error (naming the key) when absent or of another kind. Any integer
 * type fits get_uint/get_int when its value is in range; get_float takes floats and integers. */
gboolean cl_gguf_get_uint(const ClGguf *g, const char *key, guint64 *out, GError **error);
gboolean cl_gguf_get_float(const ClGguf *g, const char *key, double *out, GError **error);
const char *cl_gguf_get_string(const ClGguf *g, const char *key, GError **error);

const char *cl_ggml_type_name(guint32 type); /* "Q4_1", … or "unknown" */
const char *cl_gguf_value_type_name(guint32 type);
/* Bytes of `n` elements of `type` (n a multiple of the block size for quantized types); 0 for a
 * type this reader does not accept. */
guint64 cl_ggml_row_bytes(ClGgmlType type, guint64 n);
/* Dequantizes `n` elements (a multiple of CL_GGUF_QK for the block types) of `type` at `src`. */
void cl_ggml_dequantize(ClGgmlType type, const void *src, float *dst, size_t n);
/* The whole tensor as f32 (numel values, caller frees); NULL + error if it is too large. */
float *cl_gguf_tensor_to_f32(const ClGgufTensor *t, GError **error);

G_END_DECLS
