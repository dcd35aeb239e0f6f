/* gguf.c - the GGUF container for untrusted files: a cursor that checks every read against the
 * end of the buffer, metadata and tensor table validated before use, and the block formats'
 * dequantization (scalar reference; docs/MODEL.md §7). */
#include "model/gguf.h"

#include <string.h>

#include "model/config.h" /* CL_MODEL_ERROR */
#include "nn/half.h"
#include "nn/quant.h"

#define FAIL(...) g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_FILE, __VA_ARGS__)

/* Bounds that no real model reaches and that keep a hostile header from asking for absurd
 * allocations before the bytes that would back them are even checked. */
#define MAX_KEY_LEN 65536u
#define MAX_STRING_LEN (64u << 20)

/* ---- types ---------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    guint32 block; /* elements per block */
    guint32 bytes; /* bytes per block */
} ggml_types[] = {
    [CL_GGML_F32] = { "F32", 1, 4 },     [CL_GGML_F16] = { "F16", 1, 2 },
    [CL_GGML_Q4_0] = { "Q4_0", 32, 18 }, [CL_GGML_Q4_1] = { "Q4_1", 32, 20 },
    [CL_GGML_Q8_0] = { "Q8_0", 32, 34 }, [CL_GGML_BF16] = { "BF16", 1, 2 },
};

/* ggml's other type numbers, so a refusal can name what the file holds. */
static const char *const other_ggml_types[] = {
    [6] = "Q5_0",    [7] = "Q5_1",     [9] = "Q8_1",   [10] = "Q2_K",   [11] = "Q3_K",
    [12] = "Q4_K",   [13] = "Q5_K",    [14] = "Q6_K",  [15] = "Q8_K",   [16] = "IQ2_XXS",
    [17] = "IQ2_XS", [18] = "IQ3_XXS", [19] = "IQ1_S", [20] = "IQ4_NL", [21] = "IQ3_S",
    [22] = "IQ2_S",  [23] = "IQ4_XS",  [24] = "I8",    [25] = "I16",    [26] = "I32",
    [27] = "I64",    [28] = "F64",     [29] = "IQ1_M", [34] = "TQ1_0",  [35] = "TQ2_0",
};

static gboolean type_known(guint32 t)
{
    return t < G_N_ELEMENTS(ggml_types) && ggml_types[t].name != NULL;
}

const char *cl_ggml_type_name(guint32 t)
{
    if (type_known(t))
        return ggml_types[t].name;
    if (t < G_N_ELEMENTS(other_ggml_types) && other_ggml_types[t])
        return other_ggml_types[t];
    return "unknown";
}

const char *cl_gguf_value_type_name(guint32 t)
{
    static const char *const names[] = { "u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                         "bool", "string", "array", "u64", "i64", "f64" };
    return t < G_N_ELEMENTS(names) ? names[t] : "unknown";
}

guint64 cl_ggml_row_bytes(ClGgmlType type, guint64 n)
{
    if (!type_known(type) || n % ggml_types[type].block)
        return 0;
    return n / ggml_types[type].block * ggml_types[type].bytes;
}

/* ---- the cursor ----------------------------------------------------------------------------- */

typedef struct {
    const guint8 *p;
    gsize size, pos;
    GError **error;
} Cursor;

static gboolean take(Cursor *c, gsize n, const void **out, const char *what)
{
    if (n > c->size - c->pos) {
        g_set_error(c->error, CL_MODEL_ERROR, CL_MODEL_ERROR_FILE,
                    "truncated at byte %zu: %s needs %zu bytes, %zu left", c->pos, what, n,
                    c->size - c->pos);
        return FALSE;
    }
    *out = c->p + c->pos;
    c->pos += n;
    return TRUE;
}

#define READ_LE(bits)                                                                              \
    static gboolean read_u##bits(Cursor *c, guint##bits *out, const char *what)                    \
    {                                                                                              \
        const void *p;                                                                             \
        if (!take(c, sizeof *out, &p, what))                                                       \
            return FALSE;                                                                          \
        guint##bits v;                                                                             \
        memcpy(&v, p, sizeof v);                                                                   \
        *out = GUINT##bits##_FROM_LE(v);                                                           \
        return TRUE;                                                                               \
    }
READ_LE(16)
READ_LE(32)
READ_LE(64)

static gboolean read_u8(Cursor *c, guint8 *out, const char *what)
{
    const void *p;
    if (!take(c, 1, &p, what))
        return FALSE;
    *out = *(const guint8 *)p;
    return TRUE;
}

/* A GGUF string: u64 length, then the bytes (no NUL). Returns a NUL-terminated copy after
 * checking the length against the bytes left and `max`, that it holds no NUL and is UTF-8. */
static char *read_string(Cursor *c, guint64 max, const char *what)
{
    guint64 len;
    const void *p;
    if (!read_u64(c, &len, what))
        return NULL;
    if (len > max) {
        g_set_error(c->error, CL_MODEL_ERROR, CL_MODEL_ERROR_FILE,
                    "%s: length %" G_GUINT64_FORMAT " exceeds the limit of %" G_GUINT64_FORMAT,
                    what, len, max);
        return NULL;
    }
    if (!take(c, (gsize)len, &p, what))
        return NULL;
    if (memchr(p, 0, (gsize)len) || !g_utf8_validate(p, (gssize)len, NULL)) {
        g_set_error(c->error, CL_MODEL_ERROR, CL_MODEL_ERROR_FILE,
                    "%s at byte %zu is not valid UTF-8 text", what, c->pos - (gsize)len);
        return NULL;
    }
    return g_strndup(p, (gsize)len);
}

/* ---- metadata values ------------------------------------------------------------------------ */

static void value_free(gpointer data)
{
    ClGgufValue *v = data;
    if (!v)
        return;
    g_free(v->str);
    g_free(v->nums_u);
    g_free(v->nums_i);
    g_free(v->nums_f);
    if (v->strs) {
        for (guint64 i = 0; i < v->n; i++)
            g_free(v->strs[i]);
        g_free(v->strs);
    }
    g_free(v);
}

static gsize scalar_size(guint32 t)
{
    switch (t) {
    case CL_GGUF_U8:
    case CL_GGUF_I8:
    case CL_GGUF_BOOL: return 1;
    case CL_GGUF_U16:
    case CL_GGUF_I16: return 2;
    case CL_GGUF_U32:
    case CL_GGUF_I32:
    case CL_GGUF_F32: return 4;
    case CL_GGUF_U64:
    case CL_GGUF_I64:
    case CL_GGUF_F64: return 8;
    default: return 0;
    }
}

static gboolean is_signed(guint32 t)
{
    return t == CL_GGUF_I8 || t == CL_GGUF_I16 || t == CL_GGUF_I32 || t == CL_GGUF_I64;
}

static gboolean is_float(guint32 t)
{
    return t == CL_GGUF_F32 || t == CL_GGUF_F64;
}

/* One scalar of type t into u / i / f by kind. */
static gboolean read_scalar(Cursor *c, guint32 t, guint64 *u, gint64 *i, double *f,
                            const char *what)
{
    guint8 b8 = 0;
    guint16 b16 = 0;
    guint32 b32 = 0;
    guint64 b64 = 0;
    switch (scalar_size(t)) {
    case 1:
        if (!read_u8(c, &b8, what))
            return FALSE;
        b64 = b8;
        break;
    case 2:
        if (!read_u16(c, &b16, what))
            return FALSE;
        b64 = b16;
        break;
    case 4:
        if (!read_u32(c, &b32, what))
            return FALSE;
        b64 = b32;
        break;
    default:
        if (!read_u64(c, &b64, what))
            return FALSE;
        break;
    }
    if (t == CL_GGUF_BOOL && b8 > 1) {
        g_set_error(c->error, CL_MODEL_ERROR, CL_MODEL_ERROR_FILE, "%s: bool value %u", what, b8);
        return FALSE;
    }
    if (t == CL_GGUF_F32) {
        float v;
        memcpy(&v, &b32, 4);
        *f = v;
    } else if (t == CL_GGUF_F64) {
        memcpy(f, &b64, 8);
    } else if (is_signed(t)) {
        switch (t) {
        case CL_GGUF_I8: *i = (gint8)b8; break;
        case CL_GGUF_I16: *i = (gint16)b16; break;
        case CL_GGUF_I32: *i = (gint32)b32; break;
        default: *i = (gint64)b64; break;
        }
    } else {
        *u = b64;
    }
    return TRUE;
}

static gboolean read_array(Cursor *c, ClGgufValue *v, const char *key)
{
    guint32 et;
    if (!read_u32(c, &et, key) || !read_u64(c, &v->n, key))
        return FALSE;
    if (et == CL_GGUF_ARRAY || et >= CL_GGUF_N_VALUE_TYPES) {
        g_set_error(c->error, CL_MODEL_ERROR, CL_MODEL_ERROR_FILE,
                    "metadata '%s': arrays of %s (type %u) are not supported", key,
                    cl_gguf_value_type_name(et), et);
        return FALSE;
    }
    v->elem_type = et;
    /* Every element takes at least one byte (a string its 8-byte length): a count larger than
     * what is left cannot be real, and must not size an allocation. */
    gsize min_elem = et == CL_GGUF_STRING ? 8 : scalar_size(et);
    if (v->n > (c->size - c->pos) / min_elem) {
        g_set_error(c->error, CL_MODEL_ERROR, CL_MODEL_ERROR_FILE,
                    "metadata '%s': %" G_GUINT64_FORMAT " array elements cannot fit in the %zu "
                    "bytes left",
                    key, v->n, c->size - c->pos);
        return FALSE;
    }
    if (et == CL_GGUF_STRING) {
        v->strs = g_new0(char *, v->n + 1);
        for (guint64 k = 0; k < v->n; k++)
            if (!(v->strs[k] = read_string(c, MAX_STRING_LEN, key)))
                return FALSE;
        return TRUE;
    }
    if (is_float(et))
        v->nums_f = g_new(double, v->n ? v->n : 1);
    else if (is_signed(et))
        v->nums_i = g_new(gint64, v->n ? v->n : 1);
    else
        v->nums_u = g_new(guint64, v->n ? v->n : 1);
    for (guint64 k = 0; k < v->n; k++) {
        guint64 u = 0;
        gint64 i = 0;
        double f = 0;
        if (!read_scalar(c, et, &u, &i, &f, key))
            return FALSE;
        if (v->nums_f)
            v->nums_f[k] = f;
        else if (v->nums_i)
            v->nums_i[k] = i;
        else
            v->nums_u[k] = u;
    }
    return TRUE;
}

static ClGgufValue *read_value(Cursor *c, const char *key)
{
    guint32 t;
    if (!read_u32(c, &t, key))
        return NULL;
    if (t >= CL_GGUF_N_VALUE_TYPES) {
        g_set_error(c->error, CL_MODEL_ERROR, CL_MODEL_ERROR_FILE,
                    "metadata '%s': unknown value type %u", key, t);
        return NULL;
    }
    ClGgufValue *v = g_new0(ClGgufValue, 1);
    v->type = t;
    gboolean ok;
    if (t == CL_GGUF_STRING)
        ok = (v->str = read_string(c, MAX_STRING_LEN, key)) != NULL;
    else if (t == CL_GGUF_ARRAY)
        ok = read_array(c, v, key);
    else
        ok = read_scalar(c, t, &v->u, &v->i, &v->f, key);
    if (!ok) {
        value_free(v);
        return NULL;
    }
    return v;
}

/* ---- the file ------------------------------------------------------------------------------- */

static void tensor_free(gpointer data)
{
    ClGgufTensor *t = data;
    if (t) {
        g_free(t->name);
        g_free(t);
    }
}

void cl_gguf_free(ClGguf *g)
{
    if (!g)
        return;
    g_clear_pointer(&g->by_name, g_hash_table_unref);
    g_clear_pointer(&g->tensors, g_ptr_array_unref);
    g_clear_pointer(&g->kv, g_hash_table_unref);
    g_clear_pointer(&g->keys, g_ptr_array_unref);
    g_clear_pointer(&g->mapping, g_mapped_file_unref);
    g_free(g);
}

static gboolean read_header(Cursor *c, ClGguf *g, guint64 *n_tensors, guint64 *n_kv)
{
    const void *magic;
    GError **error = c->error;
    if (!take(c, 4, &magic, "the magic") || memcmp(magic, "GGUF", 4) != 0) {
        if (error && !*error)
            FAIL("not a GGUF file (no 'GGUF' magic)");
        return FALSE;
    }
    if (!read_u32(c, &g->version, "the version"))
        return FALSE;
    if (g->version != 2 && g->version != 3) {
        FAIL("GGUF version %u is not supported (2 and 3 are)", g->version);
        return FALSE;
    }
    if (!read_u64(c, n_tensors, "the tensor count") || !read_u64(c, n_kv, "the metadata count"))
        return FALSE;
    /* a metadata entry takes at least 8 + 4 + 1 bytes, a tensor entry 8 + 4 + 8 + 4 + 8 */
    if (*n_kv > c->size / 13 || *n_tensors > c->size / 32) {
        FAIL("%" G_GUINT64_FORMAT " tensors and %" G_GUINT64_FORMAT " metadata entries cannot "
             "fit in a file of %zu bytes",
             *n_tensors, *n_kv, c->size);
        return FALSE;
    }
    return TRUE;
}

static gboolean read_metadata(Cursor *c, ClGguf *g, guint64 n_kv)
{
    GError **error = c->error;
    for (guint64 k = 0; k < n_kv; k++) {
        g_autofree char *key = read_string(c, MAX_KEY_LEN, "a metadata key");
        if (!key)
            return FALSE;
        if (g_hash_table_contains(g->kv, key)) {
            FAIL("metadata key '%s' appears twice", key);
            return FALSE;
        }
        ClGgufValue *v = read_value(c, key);
        if (!v)
            return FALSE;
        g_ptr_array_add(g->keys, g_strdup(key));
        g_hash_table_insert(g->kv, g_steal_pointer(&key), v);
    }
    const ClGgufValue *al = cl_gguf_get(g, "general.alignment");
    g->alignment = CL_GGUF_DEFAULT_ALIGNMENT;
    if (al) {
        if (al->type != CL_GGUF_U32 || al->u == 0 || (al->u & (al->u - 1)) || al->u > 65536) {
            FAIL("general.alignment must be a u32 power of two up to 65536");
            return FALSE;
        }
        g->alignment = al->u;
    }
    return TRUE;
}

static gboolean read_tensor_info(Cursor *c, ClGguf *g, ClGgufTensor *t)
{
    GError **error = c->error;
    guint32 nd, type;
    if (!(t->name = read_string(c, CL_GGUF_MAX_NAME, "a tensor name")))
        return FALSE;
    if (!read_u32(c, &nd, t->name))
        return FALSE;
    if (nd < 1 || nd > CL_GGUF_MAX_DIMS) {
        FAIL("tensor '%s': %u dimensions (1 to %d allowed)", t->name, nd, CL_GGUF_MAX_DIMS);
        return FALSE;
    }
    t->n_dims = (int)nd;
    t->numel = 1;
    for (int d = 0; d < CL_GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (guint32 d = 0; d < nd; d++) {
        if (!read_u64(c, &t->ne[d], t->name))
            return FALSE;
        if (t->ne[d] == 0 || t->ne[d] > G_MAXINT64 / t->numel) {
            FAIL("tensor '%s': dimension %u is %" G_GUINT64_FORMAT " (empty or too large)", t->name,
                 d, t->ne[d]);
            return FALSE;
        }
        t->numel *= t->ne[d];
    }
    if (!read_u32(c, &type, t->name) || !read_u64(c, &t->offset, t->name))
        return FALSE;
    if (!type_known(type)) {
        FAIL("tensor '%s': type %s (%u) is not supported (F32, F16, BF16, Q8_0, Q4_0, Q4_1 are)",
             t->name, cl_ggml_type_name(type), type);
        return FALSE;
    }
    t->type = type;
    t->nbytes = cl_ggml_row_bytes(t->type, t->ne[0]);
    if (t->nbytes == 0) {
        FAIL("tensor '%s': a row of %" G_GUINT64_FORMAT " is not a whole number of %s blocks",
             t->name, t->ne[0], cl_ggml_type_name(type));
        return FALSE;
    }
    if (t->offset % g->alignment) {
        FAIL("tensor '%s': offset %" G_GUINT64_FORMAT
             " is not a multiple of the alignment %" G_GUINT64_FORMAT,
             t->name, t->offset, g->alignment);
        return FALSE;
    }
    t->nbytes *= t->numel / t->ne[0]; /* no overflow: numel <= G_MAXINT64, bytes/elem <= 4 */
    return TRUE;
}

static gint by_offset(gconstpointer a, gconstpointer b)
{
    const ClGgufTensor *x = *(ClGgufTensor *const *)a, *y = *(ClGgufTensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Every tensor inside the data section, none overlapping another. */
static gboolean place_tensors(ClGguf *g, GError **error)
{
    gsize data_size = g->size - g->data_start;
    g_autoptr(GPtrArray) sorted = g_ptr_array_sized_new(g->tensors->len); /* borrows */
    for (guint k = 0; k < g->tensors->len; k++)
        g_ptr_array_add(sorted, g->tensors->pdata[k]);
    g_ptr_array_sort(sorted, by_offset);
    guint64 end = 0;
    for (guint k = 0; k < sorted->len; k++) {
        ClGgufTensor *t = sorted->pdata[k];
        if (t->offset > data_size || t->nbytes > data_size - t->offset) {
            FAIL("tensor '%s': bytes %" G_GUINT64_FORMAT "..%" G_GUINT64_FORMAT " of the data "
                 "section lie past its end (%zu bytes)",
                 t->name, t->offset, t->offset + t->nbytes, data_size);
            return FALSE;
        }
        if (t->offset < end) {
            FAIL("tensor '%s' overlaps the tensor before it", t->name);
            return FALSE;
        }
        end = t->offset + t->nbytes;
        t->data = g->bytes + g->data_start + t->offset;
    }
    return TRUE;
}

ClGguf *cl_gguf_parse(const guint8 *bytes, gsize size, GError **error)
{
    g_return_val_if_fail(bytes != NULL || size == 0, NULL);
    g_autoptr(ClGguf) g = g_new0(ClGguf, 1);
    g->bytes = bytes;
    g->size = size;
    g->tensors = g_ptr_array_new_with_free_func(tensor_free);
    g->by_name = g_hash_table_new(g_str_hash, g_str_equal);
    g->keys = g_ptr_array_new_with_free_func(g_free);
    g->kv = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, value_free);
    Cursor c = { bytes, size, 0, error };
    guint64 n_tensors, n_kv;
    if (!read_header(&c, g, &n_tensors, &n_kv) || !read_metadata(&c, g, n_kv))
        return NULL;
    for (guint64 k = 0; k < n_tensors; k++) {
        ClGgufTensor *t = g_new0(ClGgufTensor, 1);
        g_ptr_array_add(g->tensors, t);
        if (!read_tensor_info(&c, g, t))
            return NULL;
        if (g_hash_table_contains(g->by_name, t->name)) {
            FAIL("tensor '%s' appears twice", t->name);
            return NULL;
        }
        g_hash_table_insert(g->by_name, t->name, t);
    }
    guint64 start = (c.pos + g->alignment - 1) / g->alignment * g->alignment;
    if (start > size && n_tensors > 0) {
        FAIL("truncated: the data section would start at byte %" G_GUINT64_FORMAT
             " of a %zu-byte file",
             start, size);
        return NULL;
    }
    g->data_start = start > size ? size : (gsize)start;
    if (!place_tensors(g, error))
        return NULL;
    return g_steal_pointer(&g);
}

ClGguf *cl_gguf_open(const char *path, GError **error)
{
    GError *err = NULL;
    GMappedFile *map = g_mapped_file_new(path, FALSE, &err);
    if (!map) {
        g_propagate_prefixed_error(error, err, "%s: ", path);
        return NULL;
    }
    ClGguf *g = cl_gguf_parse((const guint8 *)g_mapped_file_get_contents(map),
                              g_mapped_file_get_length(map), &err);
    if (!g) {
        g_mapped_file_unref(map);
        g_propagate_prefixed_error(error, err, "%s: ", path);
        return NULL;
    }
    g->mapping = map;
    return g;
}

/* ---- look-ups ------------------------------------------------------------------------------- */

const ClGgufValue *cl_gguf_get(const ClGguf *g, const char *key)
{
    g_return_val_if_fail(g && key, NULL);
    return g_hash_table_lookup(g->kv, key);
}

const ClGgufTensor *cl_gguf_tensor(const ClGguf *g, const char *name)
{
    g_return_val_if_fail(g && name, NULL);
    return g_hash_table_lookup(g->by_name, name);
}

static const ClGgufValue *need(const ClGguf *g, const char *key, GError **error)
{
    const ClGgufValue *v = cl_gguf_get(g, key);
    if (!v)
        FAIL("metadata '%s' is missing", key);
    return v;
}

gboolean cl_gguf_get_uint(const ClGguf *g, const char *key, guint64 *out, GError **error)
{
    const ClGgufValue *v = need(g, key, error);
    if (!v)
        return FALSE;
    if (is_signed(v->type) && v->i >= 0) {
        *out = (guint64)v->i;
        return TRUE;
    }
    if (scalar_size(v->type) && !is_signed(v->type) && !is_float(v->type) &&
        v->type != CL_GGUF_BOOL) {
        *out = v->u;
        return TRUE;
    }
    FAIL("metadata '%s' is a %s, not a non-negative integer", key,
         cl_gguf_value_type_name(v->type));
    return FALSE;
}

gboolean cl_gguf_get_float(const ClGguf *g, const char *key, double *out, GError **error)
{
    const ClGgufValue *v = need(g, key, error);
    if (!v)
        return FALSE;
    if (is_float(v->type))
        *out = v->f;
    else if (is_signed(v->type))
        *out = (double)v->i;
    else if (scalar_size(v->type) && v->type != CL_GGUF_BOOL)
        *out = (double)v->u;
    else {
        FAIL("metadata '%s' is a %s, not a number", key, cl_gguf_value_type_name(v->type));
        return FALSE;
    }
    return TRUE;
}

const char *cl_gguf_get_string(const ClGguf *g, const char *key, GError **error)
{
    const ClGgufValue *v = need(g, key, error);
    if (v && v->type != CL_GGUF_STRING) {
        FAIL("metadata '%s' is a %s, not a string", key, cl_gguf_value_type_name(v->type));
        return NULL;
    }
    return v ? v->str : NULL;
}

/* ---- dequantization ------------------------------------------------------------------------- */

static float le_f16(const guint8 *p)
{
    return cl_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

/* Q4_0 block: f16 d, 16 bytes; element j is the low nibble of byte j, element j+16 its high
 * nibble; x = d·(q − 8). (Q8_0 and Q4_1 are nn/quant.c's.) */
static void deq_q4_0(const guint8 *b, float *y)
{
    float d = le_f16(b);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((b[2 + j] & 15) - 8);
        y[j + 16] = d * (float)((b[2 + j] >> 4) - 8);
    }
}

void cl_ggml_dequantize(ClGgmlType type, const void *src, float *dst, size_t n)
{
    const guint8 *s = src;
    switch (type) {
    case CL_GGML_F32: memcpy(dst, s, n * 4); break;
    case CL_GGML_F16:
        for (size_t k = 0; k < n; k++)
            dst[k] = le_f16(s + 2 * k);
        break;
    case CL_GGML_BF16:
        for (size_t k = 0; k < n; k++)
            dst[k] = cl_bf16_to_f32((uint16_t)(s[2 * k] | s[2 * k + 1] << 8));
        break;
    case CL_GGML_Q8_0:
    case CL_GGML_Q4_1:
        /* as one row of n: the blocks follow each other whatever the row length */
        for (size_t done = 0; done < n;) {
            size_t part = MIN(n - done, (size_t)1 << 30);
            cl_dequantize_rows(type == CL_GGML_Q8_0 ? CL_QUANT_Q8_0 : CL_QUANT_Q4_1,
                               s + done / 32 * ggml_types[type].bytes, dst + done, 1, (int)part);
            done += part;
        }
        break;
    case CL_GGML_Q4_0:
        for (size_t k = 0; k < n / 32; k++)
            deq_q4_0(s + 18 * k, dst + 32 * k);
        break;
    default: g_return_if_reached();
    }
}

float *cl_gguf_tensor_to_f32(const ClGgufTensor *t, GError **error)
{
    g_return_val_if_fail(t != NULL, NULL);
    if (t->numel > G_MAXSIZE / sizeof(float)) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "tensor '%s' is too large to convert", t->name);
        return NULL;
    }
    float *out = g_try_new(float, t->numel);
    if (!out) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "no memory for tensor '%s' (%" G_GUINT64_FORMAT " values)", t->name, t->numel);
        return NULL;
    }
    cl_ggml_dequantize(t->type, t->data, out, t->numel);
    return out;
}
