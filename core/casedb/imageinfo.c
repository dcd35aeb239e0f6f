/* imageinfo.c - cl_case_image_from_file: what the case database records about an image file
 * (format, size, frames, metadata, acquisition time, content hash), read with core/image. */
#include "casedb/casedb-private.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "image/image.h"

/* True when s[0..n) are all ASCII digits. */
static gboolean digits(const char *s, gsize n)
{
    for (gsize i = 0; i < n; i++)
        if (!g_ascii_isdigit(s[i]))
            return FALSE;
    return TRUE;
}

/* DICOM "YYYYMMDD[HHMM[SS[.f]]]" and TIFF "YYYY:MM:DD HH:MM:SS" -> ISO 8601 local time
 * ("2024-03-01T09:30:15"); anything else is kept as the file says it. */
static char *normalize_datetime(const char *s)
{
    gsize n = strlen(s);
    if (n == 19 && digits(s, 4) && s[4] == ':' && digits(s + 5, 2) && s[7] == ':' &&
        digits(s + 8, 2) && s[10] == ' ' && digits(s + 11, 2) && s[13] == ':' &&
        digits(s + 14, 2) && s[16] == ':' && digits(s + 17, 2))
        return g_strdup_printf("%.4s-%.2s-%.2sT%.2s:%.2s:%.2s", s, s + 5, s + 8, s + 11, s + 14,
                               s + 17);
    if (n >= 8 && digits(s, 8)) {
        GString *out = g_string_new(NULL);
        g_string_append_printf(out, "%.4s-%.2s-%.2s", s, s + 4, s + 6);
        if (n >= 12 && digits(s + 8, 4)) {
            g_string_append_printf(out, "T%.2s:%.2s", s + 8, s + 10);
            if (n >= 14 && digits(s + 12, 2)) {
                g_string_append_printf(out, ":%.2s", s + 12);
                if (s[14] == '.' && n > 15)
                    g_string_append(out, s + 14); /* fraction and any UTC offset */
            }
            return g_string_free(out, FALSE);
        }
        if (n == 8)
            return g_string_free(out, FALSE);
        g_string_free(out, TRUE);
    }
    return g_strdup(s);
}

static char *metadata_to_json(const ClImage *img)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    /* a key repeated in the file keeps its first value (JSON objects have unique keys) */
    g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
    for (guint i = 0; img->metadata && i < img->metadata->len; i++) {
        const ClMetaEntry *e = g_ptr_array_index(img->metadata, i);
        if (!e->key || !e->value || !g_hash_table_add(seen, e->key))
            continue;
        g_autofree char *key = g_utf8_make_valid(e->key, -1);
        g_autofree char *value = g_utf8_make_valid(e->value, -1);
        json_builder_set_member_name(b, key);
        json_builder_add_string_value(b, value);
    }
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return json_to_string(root, FALSE);
}

static const char *find_meta(const ClImage *img, const char *key)
{
    for (guint i = 0; img->metadata && i < img->metadata->len; i++) {
        const ClMetaEntry *e = g_ptr_array_index(img->metadata, i);
        if (g_strcmp0(e->key, key) == 0 && e->value && *e->value)
            return e->value;
    }
    return NULL;
}

gboolean cl_case_image_from_file(const char *path, guint frame, ClCaseImage *out, GError **error)
{
    g_return_val_if_fail(path != NULL, FALSE);
    g_return_val_if_fail(out != NULL, FALSE);
    g_autofree char *abs = g_canonicalize_filename(path, NULL);

    /* the loader's own error (missing file, unknown format, ...) goes to the caller as is */
    ClImage *img = cl_image_load(abs, NULL, error);
    if (!img)
        return FALSE;
    guint n_frames = img->frames ? img->frames->len : 0;
    if (frame >= n_frames) {
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID,
                    "%s has %u frame%s; there is no frame %u (frames count from 0)", abs, n_frames,
                    n_frames == 1 ? "" : "s", frame);
        cl_image_free(img);
        return FALSE;
    }
    /* stat before hashing: a file that changes in between then shows as changed later,
     * never as unchanged with a stale hash */
    GStatBuf sb;
    g_autofree char *sha = NULL;
    g_autoptr(GError) hash_err = NULL;
    if (g_stat(abs, &sb) != 0) {
        int e = errno;
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_IO, "Cannot read %s: %s", abs,
                    g_strerror(e));
        cl_image_free(img);
        return FALSE;
    }
    if (!cl_casedb_hash_file(abs, &sha, &hash_err)) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_IO, "%s", hash_err->message);
        cl_image_free(img);
        return FALSE;
    }

    const char *when = img->acquisition_datetime && *img->acquisition_datetime
                           ? img->acquisition_datetime
                       : img->study_datetime && *img->study_datetime ? img->study_datetime
                                                                     : find_meta(img, "DateTime");
    memset(out, 0, sizeof *out);
    out->path = g_steal_pointer(&abs);
    out->frame = frame;
    out->sha256 = g_steal_pointer(&sha);
    out->file_size = (gint64)sb.st_size;
    out->file_mtime = (gint64)sb.st_mtime;
    out->format = g_strdup(cl_image_format_name(img->format));
    out->modality = img->modality && *img->modality ? g_utf8_make_valid(img->modality, -1) : NULL;
    out->width = img->width;
    out->height = img->height;
    out->n_frames = n_frames;
    out->acquired_at = when ? normalize_datetime(when) : NULL;
    out->metadata_json = metadata_to_json(img);
    out->file_state = CL_FILE_UNCHECKED;
    cl_image_free(img);
    return TRUE;
}
