/* safetensors.c - the model file container (docs/MODEL.md §7): a strict parser for untrusted
 * files (every offset, size and dtype checked before anything is read) and an atomic writer. */
#include "model/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/config.h" /* CL_MODEL_ERROR */
#include "nn/half.h"

#define FILE_FAIL(...) g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_FILE, __VA_ARGS__)

/* ---- dtypes --------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    gsize size;
} dtypes[CL_DTYPE_U8 + 1] = {
    [CL_DTYPE_F32] = { "F32", 4 },
    [CL_DTYPE_F16] = { "F16", 2 },
    [CL_DTYPE_BF16] = { "BF16", 2 },
    [CL_DTYPE_U8] = { "U8", 1 },
};

/* The other dtypes of the safetensors format: recognised, so the message can say "unsupported"
 * rather than "unknown". */
static const char *const other_dtypes[] = {
    "F64",     "I64",     "U64",     "I32",     "U32",     "I16", "U16", "I8",   "BOOL",
    "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4",  "C64", "C128",
};

const char *cl_dtype_name(ClDtype dtype)
{
    return (unsigned)dtype <= CL_DTYPE_U8 ? dtypes[dtype].name : "invalid";
}

gboolean cl_dtype_from_name(const char *name, ClDtype *out)
{
    for (int i = 0; i < CL_N_DTYPES && name; i++)
        if (g_ascii_strcasecmp(name, dtypes[i].name) == 0) {
            if (out)
                *out = (ClDtype)i;
            return TRUE;
        }
    return FALSE;
}

gsize cl_dtype_size(ClDtype dtype)
{
    return (unsigned)dtype <= CL_DTYPE_U8 ? dtypes[dtype].size : 0;
}

/* ---- strict JSON ---------------------------------------------------------------------------- */

#define JSON_MAX_DEPTH 16
#define JSON_MAX_INT_DIGITS 18 /* < 2^63: json-glib wraps longer integers without a word */

static gsize count_members(JsonNode *node)
{
    gsize n = 0;
    if (JSON_NODE_HOLDS_OBJECT(node)) {
        JsonObject *o = json_node_get_object(node);
        g_autoptr(GList) vals = json_object_get_values(o);
        n += json_object_get_size(o);
        for (GList *l = vals; l; l = l->next)
            n += count_members(l->data);
    } else if (JSON_NODE_HOLDS_ARRAY(node)) {
        JsonArray *a = json_node_get_array(node);
        for (guint i = 0; i < json_array_get_length(a); i++)
            n += count_members(json_array_get_element(a, i));
    }
    return n;
}

/* Four hex digits at text[at..at+4) into *cp. */
static gboolean json_hex4(const char *text, gsize n, gsize at, guint *cp)
{
    if (at + 4 > n)
        return FALSE;
    guint v = 0;
    for (gsize k = at; k < at + 4; k++) {
        int d = g_ascii_xdigit_value(text[k]);
        if (d < 0)
            return FALSE;
        v = v * 16 + (guint)d;
    }
    *cp = v;
    return TRUE;
}

JsonNode *cl_json_parse_strict(const char *text, gssize len, int code, GError **error)
{
    g_return_val_if_fail(text != NULL || len == 0, NULL);
    gsize n = len < 0 ? strlen(text) : (gsize)len;
    if (memchr(text, 0, n)) {
        g_set_error(error, CL_MODEL_ERROR, code, "JSON contains a NUL byte");
        return NULL;
    }
    const char *bad = NULL;
    if (!g_utf8_validate(text, (gssize)n, &bad)) {
        g_set_error(error, CL_MODEL_ERROR, code,
                    "JSON is not valid UTF-8 (byte %" G_GSIZE_FORMAT ")", (gsize)(bad - text));
        return NULL;
    }
    /* One pass over the tokens: only strict JSON (json-glib also takes comments, single quotes
     * and hex numbers, which would let text hide from this scan), nesting depth, integer
     * lengths, and the number of members (one per ':'), compared with what json-glib keeps to
     * find duplicates. */
    int depth = 0;
    gsize members = 0;
    for (gsize i = 0; i < n; i++) {
        char c = text[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',') {
            continue;
        } else if (c == '"') {
            for (i++; i < n && text[i] != '"'; i++) {
                if ((guchar)text[i] < 0x20) {
                    g_set_error(error, CL_MODEL_ERROR, code,
                                "JSON string contains a raw control character");
                    return NULL;
                }
                if (text[i] != '\\')
                    continue;
                /* JSON's escapes only: json-glib also takes octal and other escapes that can
                 * smuggle bytes that are not UTF-8 into names and messages */
                char e = i + 1 < n ? text[i + 1] : 0;
                if (e && strchr("\"\\/bfnrt", e)) {
                    i++;
                    continue;
                }
                guint cp = 0;
                if (e != 'u' || !json_hex4(text, n, i + 2, &cp)) {
                    g_set_error(error, CL_MODEL_ERROR, code, "JSON string has an invalid escape");
                    return NULL;
                }
                if (cp == 0) {
                    g_set_error(error, CL_MODEL_ERROR, code, "JSON string contains \\u0000");
                    return NULL;
                }
                i += 5;
                if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    g_set_error(error, CL_MODEL_ERROR, code,
                                "JSON string has an unpaired surrogate escape");
                    return NULL;
                }
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    guint lo = 0;
                    if (i + 2 >= n || text[i + 1] != '\\' || text[i + 2] != 'u' ||
                        !json_hex4(text, n, i + 3, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                        g_set_error(error, CL_MODEL_ERROR, code,
                                    "JSON string has an unpaired surrogate escape");
                        return NULL;
                    }
                    i += 6;
                }
            }
        } else if (c == '{' || c == '[') {
            if (++depth > JSON_MAX_DEPTH) {
                g_set_error(error, CL_MODEL_ERROR, code, "JSON nested deeper than %d levels",
                            JSON_MAX_DEPTH);
                return NULL;
            }
        } else if (c == '}' || c == ']') {
            depth--;
        } else if (c == ':') {
            members++;
        } else if (c == '-' || g_ascii_isdigit(c)) {
            gsize start = i, digits = 0;
            gboolean integer = TRUE;
            for (i++; i < n && (g_ascii_isdigit(text[i]) || strchr(".eE+-", text[i])); i++)
                if (text[i] == '.' || text[i] == 'e' || text[i] == 'E')
                    integer = FALSE;
            for (gsize k = start; k < i; k++)
                digits += g_ascii_isdigit(text[k]) != 0;
            if (integer && digits > JSON_MAX_INT_DIGITS) {
                g_set_error(error, CL_MODEL_ERROR, code,
                            "JSON integer at byte %" G_GSIZE_FORMAT " is too large", start);
                return NULL;
            }
            i--;
        } else if (n - i >= 4 &&
                   (memcmp(text + i, "true", 4) == 0 || memcmp(text + i, "null", 4) == 0)) {
            i += 3;
        } else if (n - i >= 5 && memcmp(text + i, "false", 5) == 0) {
            i += 4;
        } else {
            g_set_error(error, CL_MODEL_ERROR, code,
                        "invalid JSON: unexpected character at byte %" G_GSIZE_FORMAT, i);
            return NULL;
        }
    }
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) jerr = NULL;
    if (!json_parser_load_from_data(parser, text, (gssize)n, &jerr)) {
        /* json-glib quotes the input near the error and may cut a UTF-8 sequence in half */
        g_autofree char *msg = g_utf8_make_valid(jerr->message, -1);
        g_set_error(error, CL_MODEL_ERROR, code, "invalid JSON: %s", msg);
        return NULL;
    }
    JsonNode *root = json_parser_steal_root(parser);
    if (!root) {
        g_set_error(error, CL_MODEL_ERROR, code, "empty JSON");
        return NULL;
    }
    if (count_members(root) != members) {
        json_node_unref(root);
        g_set_error(error, CL_MODEL_ERROR, code, "JSON has a duplicate key");
        return NULL;
    }
    return root;
}

/* ---- parsing -------------------------------------------------------------------------------- */

static void tensor_free(gpointer p)
{
    ClSafeTensor *t = p;
    g_free(t->name);
    g_free(t);
}

void cl_safetensors_free(ClSafetensors *st)
{
    if (!st)
        return;
    g_clear_pointer(&st->tensors, g_ptr_array_unref);
    g_clear_pointer(&st->by_name, g_hash_table_unref);
    g_clear_pointer(&st->metadata, g_hash_table_unref);
    g_clear_pointer(&st->mapping, g_mapped_file_unref);
    g_free(st);
}

static char *shape_str(const gint64 *shape, int ndim)
{
    GString *s = g_string_new("[");
    for (int d = 0; d < ndim; d++)
        g_string_append_printf(s, "%s%" G_GINT64_FORMAT, d ? ", " : "", shape[d]);
    g_string_append_c(s, ']');
    return g_string_free(s, FALSE);
}

/* A non-negative JSON integer; `what` names it in the message. */
static gboolean get_uint(JsonNode *node, const char *name, const char *what, gint64 *out,
                         GError **error)
{
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_INT64) {
        FILE_FAIL("tensor '%s': %s is not an integer", name, what);
        return FALSE;
    }
    *out = json_node_get_int(node);
    if (*out < 0) {
        FILE_FAIL("tensor '%s': %s is negative (%" G_GINT64_FORMAT ")", name, what, *out);
        return FALSE;
    }
    return TRUE;
}

static gboolean parse_entry(ClSafetensors *st, const char *name, JsonNode *node, GError **error)
{
    if (!JSON_NODE_HOLDS_OBJECT(node)) {
        FILE_FAIL("tensor '%s': entry is not a JSON object", name);
        return FALSE;
    }
    JsonObject *o = json_node_get_object(node);
    JsonNode *dtype = NULL, *shape = NULL, *offsets = NULL;
    g_autoptr(GList) keys = json_object_get_members(o);
    for (GList *l = keys; l; l = l->next) {
        const char *k = l->data;
        JsonNode *v = json_object_get_member(o, k);
        if (strcmp(k, "dtype") == 0)
            dtype = v;
        else if (strcmp(k, "shape") == 0)
            shape = v;
        else if (strcmp(k, "data_offsets") == 0)
            offsets = v;
        else {
            FILE_FAIL("tensor '%s': unknown key '%s'", name, k);
            return FALSE;
        }
    }
    if (!dtype || !shape || !offsets) {
        FILE_FAIL("tensor '%s': no %s", name, !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
        return FALSE;
    }

    g_autofree ClSafeTensor *t = g_new0(ClSafeTensor, 1);
    if (!JSON_NODE_HOLDS_VALUE(dtype) || json_node_get_value_type(dtype) != G_TYPE_STRING) {
        FILE_FAIL("tensor '%s': dtype is not a string", name);
        return FALSE;
    }
    const char *dt = json_node_get_string(dtype);
    int found = -1;
    for (int i = 0; i <= CL_DTYPE_U8; i++)
        if (strcmp(dt, dtypes[i].name) == 0)
            found = i;
    if (found < 0) {
        for (gsize i = 0; i < G_N_ELEMENTS(other_dtypes); i++)
            if (strcmp(dt, other_dtypes[i]) == 0) {
                FILE_FAIL("unsupported dtype %s for tensor '%s' (F32, F16, BF16 or U8)", dt, name);
                return FALSE;
            }
        FILE_FAIL("unknown dtype '%s' for tensor '%s'", dt, name);
        return FALSE;
    }
    t->dtype = (ClDtype)found;

    if (!JSON_NODE_HOLDS_ARRAY(shape)) {
        FILE_FAIL("tensor '%s': shape is not an array", name);
        return FALSE;
    }
    JsonArray *sa = json_node_get_array(shape);
    guint ndim = json_array_get_length(sa);
    if (ndim > CL_SAFETENSORS_MAX_NDIM) {
        FILE_FAIL("tensor '%s': shape has %u dimensions (at most %d)", name, ndim,
                  CL_SAFETENSORS_MAX_NDIM);
        return FALSE;
    }
    t->ndim = (int)ndim;
    guint64 numel = 1;
    gboolean overflow = FALSE;
    for (guint d = 0; d < ndim; d++) {
        JsonNode *e = json_array_get_element(sa, d);
        if (!JSON_NODE_HOLDS_VALUE(e) || json_node_get_value_type(e) != G_TYPE_INT64) {
            FILE_FAIL("tensor '%s': shape entry %u is not an integer", name, d);
            return FALSE;
        }
        t->shape[d] = json_node_get_int(e);
        if (t->shape[d] < 0) {
            FILE_FAIL("tensor '%s': negative dimension %" G_GINT64_FORMAT " in shape", name,
                      t->shape[d]);
            return FALSE;
        }
        overflow = overflow || !g_uint64_checked_mul(&numel, numel, (guint64)t->shape[d]);
    }
    guint64 nbytes = 0;
    if (overflow || !g_uint64_checked_mul(&nbytes, numel, dtypes[t->dtype].size)) {
        g_autofree char *s = shape_str(t->shape, t->ndim);
        FILE_FAIL("tensor '%s': shape %s is too large (its size overflows)", name, s);
        return FALSE;
    }
    t->numel = numel;

    if (!JSON_NODE_HOLDS_ARRAY(offsets) ||
        json_array_get_length(json_node_get_array(offsets)) != 2) {
        FILE_FAIL("tensor '%s': data_offsets is not an array [begin, end]", name);
        return FALSE;
    }
    JsonArray *oa = json_node_get_array(offsets);
    gint64 begin, end;
    if (!get_uint(json_array_get_element(oa, 0), name, "data_offsets begin", &begin, error) ||
        !get_uint(json_array_get_element(oa, 1), name, "data_offsets end", &end, error))
        return FALSE;
    if (begin > end) {
        FILE_FAIL("tensor '%s': data_offsets [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                  "] end before they begin",
                  name, begin, end);
        return FALSE;
    }
    if ((guint64)end > st->data_size) {
        FILE_FAIL("tensor '%s': data_offsets [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                  "] run past the end of the data (%" G_GSIZE_FORMAT " bytes)",
                  name, begin, end, st->data_size);
        return FALSE;
    }
    if ((guint64)(end - begin) != nbytes) {
        g_autofree char *s = shape_str(t->shape, t->ndim);
        FILE_FAIL("tensor '%s': size mismatch: %s %s needs %" G_GUINT64_FORMAT
                  " bytes but data_offsets [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                  "] hold %" G_GINT64_FORMAT,
                  name, dt, s, nbytes, begin, end, end - begin);
        return FALSE;
    }
    t->begin = (guint64)begin;
    t->end = (guint64)end;
    t->data = st->data + begin;
    t->name = g_strdup(name);
    g_hash_table_insert(st->by_name, t->name, t);
    g_ptr_array_add(st->tensors, g_steal_pointer(&t));
    return TRUE;
}

static gboolean parse_metadata(ClSafetensors *st, JsonNode *node, GError **error)
{
    if (!JSON_NODE_HOLDS_OBJECT(node)) {
        FILE_FAIL("__metadata__ is not a JSON object");
        return FALSE;
    }
    JsonObject *o = json_node_get_object(node);
    g_autoptr(GList) keys = json_object_get_members(o);
    for (GList *l = keys; l; l = l->next) {
        JsonNode *v = json_object_get_member(o, l->data);
        if (!JSON_NODE_HOLDS_VALUE(v) || json_node_get_value_type(v) != G_TYPE_STRING) {
            FILE_FAIL("__metadata__ value of '%s' is not a string", (const char *)l->data);
            return FALSE;
        }
        g_hash_table_insert(st->metadata, g_strdup(l->data), g_strdup(json_node_get_string(v)));
    }
    return TRUE;
}

static int by_offset(gconstpointer a, gconstpointer b)
{
    const ClSafeTensor *x = *(ClSafeTensor *const *)a, *y = *(ClSafeTensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

ClSafetensors *cl_safetensors_parse(const guint8 *bytes, gsize size, GError **error)
{
    g_return_val_if_fail(bytes != NULL || size == 0, NULL);
    if (size < 8) {
        FILE_FAIL("truncated file: %" G_GSIZE_FORMAT " bytes, too short for the 8-byte header "
                  "length",
                  size);
        return NULL;
    }
    guint64 hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | bytes[i];
    if (hlen > CL_SAFETENSORS_MAX_HEADER) {
        FILE_FAIL("header length %" G_GUINT64_FORMAT " is larger than the 100 MB limit", hlen);
        return NULL;
    }
    if (hlen > size - 8) {
        FILE_FAIL("truncated file: header length %" G_GUINT64_FORMAT " runs past the end of the "
                  "file (%" G_GSIZE_FORMAT " bytes)",
                  hlen, size);
        return NULL;
    }
    g_autoptr(ClSafetensors) st = g_new0(ClSafetensors, 1);
    st->tensors = g_ptr_array_new_with_free_func(tensor_free);
    st->by_name = g_hash_table_new(g_str_hash, g_str_equal);
    st->metadata = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    st->bytes = bytes;
    st->size = size;
    st->header_len = (gsize)hlen;
    st->data = bytes + 8 + hlen;
    st->data_size = size - 8 - (gsize)hlen;

    g_autoptr(JsonNode) root =
        cl_json_parse_strict((const char *)bytes + 8, (gssize)hlen, CL_MODEL_ERROR_FILE, error);
    if (!root) {
        g_prefix_error(error, "bad header: ");
        return NULL;
    }
    if (!JSON_NODE_HOLDS_OBJECT(root)) {
        FILE_FAIL("bad header: not a JSON object");
        return NULL;
    }
    JsonObject *o = json_node_get_object(root);
    g_autoptr(GList) keys = json_object_get_members(o);
    for (GList *l = keys; l; l = l->next) {
        const char *k = l->data;
        JsonNode *v = json_object_get_member(o, k);
        if (strcmp(k, "__metadata__") == 0 ? !parse_metadata(st, v, error)
                                           : !parse_entry(st, k, v, error))
            return NULL;
    }

    /* The data section is exactly the tensors, back to back (as the reference library
     * requires): no overlaps, no gaps, nothing after the last. */
    g_ptr_array_sort(st->tensors, by_offset);
    guint64 at = 0;
    for (guint i = 0; i < st->tensors->len; i++) {
        const ClSafeTensor *t = g_ptr_array_index(st->tensors, i);
        if (t->begin < at) {
            const ClSafeTensor *p = g_ptr_array_index(st->tensors, i - 1);
            FILE_FAIL("tensors '%s' [%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT
                      ") and '%s' [%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT ") overlap",
                      p->name, p->begin, p->end, t->name, t->begin, t->end);
            return NULL;
        }
        if (t->begin > at) {
            FILE_FAIL("gap in the data before tensor '%s': bytes [%" G_GUINT64_FORMAT
                      ", %" G_GUINT64_FORMAT ") belong to no tensor",
                      t->name, at, t->begin);
            return NULL;
        }
        at = t->end;
    }
    if (at != st->data_size) {
        FILE_FAIL("%" G_GUINT64_FORMAT " bytes after the last tensor belong to no tensor",
                  (guint64)st->data_size - at);
        return NULL;
    }
    return g_steal_pointer(&st);
}

ClSafetensors *cl_safetensors_open(const char *path, GError **error)
{
    g_return_val_if_fail(path != NULL, NULL);
    g_autofree char *display = g_filename_display_name(path);
    /* our own read-only descriptor: GLib would open the file read-write for a writable
     * mapping, and a private mapping needs no write access */
    int fd = g_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) {
        int e = errno;
        FILE_FAIL("%s: %s", display, g_strerror(e));
        return NULL;
    }
    GStatBuf sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        FILE_FAIL("%s: not a regular file", display);
        return NULL;
    }
    g_autoptr(GError) merr = NULL;
    GMappedFile *map = g_mapped_file_new_from_fd(fd, TRUE, &merr);
    close(fd);
    if (!map) {
        FILE_FAIL("%s: %s", display, merr->message);
        return NULL;
    }
    const guint8 *bytes = (const guint8 *)g_mapped_file_get_contents(map);
    gsize size = g_mapped_file_get_length(map);
    ClSafetensors *st = cl_safetensors_parse(bytes ? bytes : (const guint8 *)"", size, error);
    if (!st) {
        g_mapped_file_unref(map);
        g_prefix_error(error, "%s: ", display);
        return NULL;
    }
    st->mapping = map;
    return st;
}

const ClSafeTensor *cl_safetensors_get(const ClSafetensors *st, const char *name)
{
    g_return_val_if_fail(st != NULL && name != NULL, NULL);
    return g_hash_table_lookup(st->by_name, name);
}

const char *cl_safetensors_metadata(const ClSafetensors *st, const char *key)
{
    g_return_val_if_fail(st != NULL && key != NULL, NULL);
    return g_hash_table_lookup(st->metadata, key);
}

/* ---- writing -------------------------------------------------------------------------------- */

static void append_json_string(GString *s, const char *str)
{
    g_string_append_c(s, '"');
    for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
        if (*p == '"' || *p == '\\')
            g_string_append_printf(s, "\\%c", *p);
        else if (*p < 0x20)
            g_string_append_printf(s, "\\u%04x", *p);
        else
            g_string_append_c(s, (char)*p);
    }
    g_string_append_c(s, '"');
}

typedef struct {
    FILE *f;
    GChecksum *sum;
} Sink;

static gboolean sink_write(Sink *k, const void *p, gsize n)
{
    if (n == 0)
        return TRUE; /* an empty tensor may have no data pointer */
    g_checksum_update(k->sum, p, n);
    return fwrite(p, 1, n, k->f) == n;
}

static gboolean write_tensor(Sink *k, const ClSafetensorsEntry *e, guint64 numel)
{
    if (e->dtype == CL_DTYPE_U8)
        return sink_write(k, e->bytes, numel);
    if (e->dtype == CL_DTYPE_F32 && G_BYTE_ORDER == G_LITTLE_ENDIAN)
        return sink_write(k, e->data, numel * 4);
    enum { CHUNK = 16384 };
    guint8 buf[CHUNK * 4];
    for (guint64 i = 0; i < numel; i += CHUNK) {
        gsize n = (gsize)MIN((guint64)CHUNK, numel - i);
        const float *src = e->data + i;
        gsize bytes;
        if (e->dtype == CL_DTYPE_F32) {
            for (gsize j = 0; j < n; j++) {
                guint32 v;
                memcpy(&v, &src[j], 4);
                v = GUINT32_TO_LE(v);
                memcpy(buf + 4 * j, &v, 4);
            }
            bytes = n * 4;
        } else {
            guint16 *h = (guint16 *)buf;
            if (e->dtype == CL_DTYPE_F16)
                cl_f32_to_f16_array(h, src, n);
            else
                cl_f32_to_bf16_array(h, src, n);
            for (gsize j = 0; j < n; j++)
                h[j] = GUINT16_TO_LE(h[j]);
            bytes = n * 2;
        }
        if (!sink_write(k, buf, bytes))
            return FALSE;
    }
    return TRUE;
}

gboolean cl_safetensors_write(const char *path, const ClSafetensorsEntry *entries, gsize n_entries,
                              const char *const *metadata, char **sha256, GError **error)
{
    g_return_val_if_fail(path != NULL && (entries != NULL || n_entries == 0), FALSE);
    g_autofree char *display = g_filename_display_name(path);

    /* header */
    g_autoptr(GHashTable) names = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GString) h = g_string_new("{");
    if (metadata && metadata[0]) {
        g_string_append(h, "\"__metadata__\":{");
        for (gsize i = 0; metadata[i]; i += 2) {
            if (!metadata[i + 1] || !g_utf8_validate(metadata[i], -1, NULL) ||
                !g_utf8_validate(metadata[i + 1], -1, NULL)) {
                FILE_FAIL("%s: metadata '%s' has no value or is not UTF-8", display, metadata[i]);
                return FALSE;
            }
            if (i)
                g_string_append_c(h, ',');
            append_json_string(h, metadata[i]);
            g_string_append_c(h, ':');
            append_json_string(h, metadata[i + 1]);
        }
        g_string_append(h, "}");
    }
    g_autofree guint64 *numel = g_new(guint64, n_entries + 1);
    guint64 at = 0;
    for (gsize i = 0; i < n_entries; i++) {
        const ClSafetensorsEntry *e = &entries[i];
        guint64 n = 1, bytes = 0;
        gboolean ok = e->name && g_utf8_validate(e->name, -1, NULL) &&
                      strcmp(e->name, "__metadata__") != 0 && (unsigned)e->dtype <= CL_DTYPE_U8 &&
                      e->ndim >= 0 && e->ndim <= CL_SAFETENSORS_MAX_NDIM &&
                      (e->shape || e->ndim == 0);
        for (int d = 0; ok && d < e->ndim; d++)
            ok = e->shape[d] >= 0 && g_uint64_checked_mul(&n, n, (guint64)e->shape[d]);
        ok = ok && g_uint64_checked_mul(&bytes, n, dtypes[e->dtype].size) &&
             ((e->dtype == CL_DTYPE_U8 ? (const void *)e->bytes : (const void *)e->data) || n == 0);
        if (!ok || !g_hash_table_add(names, (gpointer)e->name)) {
            FILE_FAIL("%s: cannot write tensor '%s': %s", display, e->name ? e->name : "(null)",
                      ok ? "duplicate name" : "bad name, dtype, shape or data");
            return FALSE;
        }
        numel[i] = n;
        if (h->len > 1)
            g_string_append_c(h, ',');
        append_json_string(h, e->name);
        g_string_append_printf(h, ":{\"dtype\":\"%s\",\"shape\":[", dtypes[e->dtype].name);
        for (int d = 0; d < e->ndim; d++)
            g_string_append_printf(h, "%s%" G_GINT64_FORMAT, d ? "," : "", e->shape[d]);
        g_string_append_printf(
            h, "],\"data_offsets\":[%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT "]}", at, at + bytes);
        at += bytes;
    }
    g_string_append_c(h, '}');
    while ((8 + h->len) % CL_SAFETENSORS_ALIGN)
        g_string_append_c(h, ' ');
    if (h->len > CL_SAFETENSORS_MAX_HEADER) {
        FILE_FAIL("%s: header of %" G_GSIZE_FORMAT " bytes is larger than 100 MB", display, h->len);
        return FALSE;
    }

    /* a temporary file next to the target, renamed over it once complete and flushed */
    g_autofree char *tmp = g_strdup_printf("%s.tmp-XXXXXX", path);
    int fd = g_mkstemp_full(tmp, O_RDWR | O_CLOEXEC, 0666);
    if (fd < 0) {
        int e = errno;
        FILE_FAIL("%s: cannot create a temporary file: %s", display, g_strerror(e));
        return FALSE;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        close(fd);
        g_unlink(tmp);
        FILE_FAIL("%s: %s", display, g_strerror(e));
        return FALSE;
    }
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    Sink k = { f, g_checksum_new(G_CHECKSUM_SHA256) };
    guint8 len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (guint8)(((guint64)h->len >> (8 * i)) & 0xff);
    gboolean ok = sink_write(&k, len8, 8) && sink_write(&k, h->str, h->len);
    for (gsize i = 0; ok && i < n_entries; i++)
        ok = write_tensor(&k, &entries[i], numel[i]);
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e = ok ? 0 : errno;
    if (fclose(f) != 0 && ok) {
        e = errno;
        ok = FALSE;
    }
    if (ok && g_rename(tmp, path) != 0) {
        e = errno;
        ok = FALSE;
    }
    if (!ok) {
        g_unlink(tmp);
        g_checksum_free(k.sum);
        FILE_FAIL("%s: write failed: %s", display, e ? g_strerror(e) : "I/O error");
        return FALSE;
    }
    if (sha256)
        *sha256 = g_strdup(g_checksum_get_string(k.sum));
    g_checksum_free(k.sum);
    return TRUE;
}
