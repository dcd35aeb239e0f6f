/* records.c - the writes of casedb.h: cases, images, runs with their heatmaps, description
 * versions, notes, key images. Each public call is one transaction that also bumps the case's
 * updated_at and writes an audit entry; any failure rolls the whole call back. */
#include "casedb/casedb-private.h"

#include <json-glib/json-glib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------------------- */

static char *builder_to_json(JsonBuilder *b)
{
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return json_to_string(root, FALSE);
}

static JsonBuilder *detail_new(void)
{
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    return b;
}

static void detail_int(JsonBuilder *b, const char *key, gint64 v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_int_value(b, v);
}

static void detail_str(JsonBuilder *b, const char *key, const char *v)
{
    json_builder_set_member_name(b, key);
    if (!v) {
        json_builder_add_null_value(b);
        return;
    }
    /* JSON strings must be UTF-8, like what we store */
    g_autofree char *valid = g_utf8_make_valid(v, -1);
    json_builder_add_string_value(b, valid);
}

static gboolean audit_with(ClCaseDb *db, const char *now, const char *action, gint64 case_id,
                           JsonBuilder *b, GError **error)
{
    g_autofree char *json = builder_to_json(b);
    return cl_casedb_audit(db, now, action, case_id, json, error);
}

static gboolean check_name(const char *name, GError **error)
{
    g_autofree char *stripped = g_strstrip(g_strdup(name));
    if (!*stripped) {
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID,
                    "A case needs a name (it was empty)");
        return FALSE;
    }
    return TRUE;
}

/* The case's name (NULL out_name: just the check); NOT_FOUND when there is no such case. */
static gboolean find_case(ClCaseDb *db, gint64 case_id, char **out_name, GError **error)
{
    ClDbStmt *st = cl_casedb_stmt(db, "SELECT name FROM cases WHERE id = ?1", error);
    if (!st)
        return FALSE;
    cl_db_bind_int64(st, 1, case_id);
    int rc = cl_db_step(st);
    if (rc == SQLITE_ROW) {
        if (out_name)
            *out_name = cl_casedb_column_dup(st, 0);
        cl_db_reset(st);
        return TRUE;
    }
    if (rc == SQLITE_DONE)
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_NOT_FOUND,
                    "There is no case %" G_GINT64_FORMAT " (it may have been deleted)", case_id);
    else
        cl_casedb_set_sqlite_error(db, rc, "looking up the case", error);
    cl_db_reset(st);
    return FALSE;
}

/* INVALID unless image_id is an image of case_id. */
static gboolean check_image_in_case(ClCaseDb *db, gint64 case_id, gint64 image_id, GError **error)
{
    ClDbStmt *st = cl_casedb_stmt(db, "SELECT case_id FROM images WHERE id = ?1", error);
    if (!st)
        return FALSE;
    cl_db_bind_int64(st, 1, image_id);
    int rc = cl_db_step(st);
    gint64 owner = rc == SQLITE_ROW ? cl_db_column_int64(st, 0) : 0;
    cl_db_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        cl_casedb_set_sqlite_error(db, rc, "looking up the image", error);
        return FALSE;
    }
    if (owner != case_id) {
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID,
                    rc == SQLITE_ROW ? "Image %" G_GINT64_FORMAT " belongs to another case, not "
                                       "to case %" G_GINT64_FORMAT
                                     : "There is no image %" G_GINT64_FORMAT
                                       " (in case %" G_GINT64_FORMAT ")",
                    image_id, case_id);
        return FALSE;
    }
    return TRUE;
}

typedef struct {
    gint64 id, description_id;
    guint version;
    char *text;
    char *author;
    char *status;
} Current;

static void current_clear(Current *c)
{
    g_free(c->text);
    g_free(c->author);
    g_free(c->status);
    memset(c, 0, sizeof *c);
}

/* The case's current description version; c->id stays 0 when it has none. */
static gboolean current_version(ClCaseDb *db, gint64 case_id, Current *c, GError **error)
{
    ClDbStmt *st = cl_casedb_stmt(
        db,
        "SELECT v.id, v.description_id, v.version, v.text, v.author, v.status "
        "FROM description_versions v "
        "WHERE v.description_id = (SELECT max(id) FROM descriptions WHERE case_id = ?1) "
        "ORDER BY v.version DESC LIMIT 1",
        error);
    if (!st)
        return FALSE;
    cl_db_bind_int64(st, 1, case_id);
    int rc = cl_db_step(st);
    if (rc == SQLITE_ROW) {
        c->id = cl_db_column_int64(st, 0);
        c->description_id = cl_db_column_int64(st, 1);
        c->version = (guint)cl_db_column_int64(st, 2);
        c->text = cl_casedb_column_dup(st, 3);
        c->author = cl_casedb_column_dup(st, 4);
        c->status = cl_casedb_column_dup(st, 5);
    }
    cl_db_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        cl_casedb_set_sqlite_error(db, rc, "reading the description", error);
        return FALSE;
    }
    return TRUE;
}

static gboolean insert_description(ClCaseDb *db, gint64 case_id, gint64 run_id, const char *now,
                                   gint64 *out_id, GError **error)
{
    ClDbStmt *st = cl_casedb_stmt(
        db,
        "INSERT INTO descriptions (case_id, run_id, created_at) VALUES (?1, ?2, ?3) RETURNING id",
        error);
    if (!st)
        return FALSE;
    cl_db_bind_int64(st, 1, case_id);
    if (run_id > 0)
        cl_db_bind_int64(st, 2, run_id);
    cl_db_bind_text(st, 3, now);
    return cl_casedb_insert_id(db, st, "saving the description", out_id, error);
}

static gboolean insert_version(ClCaseDb *db, gint64 description_id, guint version, const char *text,
                               ClDescStatus status, const char *author, const char *reviewer,
                               const char *now, gint64 *out_id, GError **error)
{
    ClDbStmt *st =
        cl_casedb_stmt(db,
                       "INSERT INTO description_versions "
                       "(description_id, version, text, status, author, reviewer, created_at) "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id",
                       error);
    if (!st)
        return FALSE;
    cl_db_bind_int64(st, 1, description_id);
    cl_db_bind_int64(st, 2, version);
    cl_db_bind_text(st, 3, text);
    cl_db_bind_text(st, 4, cl_desc_status_name(status));
    cl_db_bind_text(st, 5, author);
    cl_db_bind_text(st, 6, reviewer);
    cl_db_bind_text(st, 7, now);
    return cl_casedb_insert_id(db, st, "saving the description", out_id, error);
}

/* Ends a write: commit when ok, else roll back (the error is already set). */
static gboolean finish(ClCaseDb *db, gboolean ok, const char *what, GError **error)
{
    if (ok)
        return cl_casedb_commit(db, what, error);
    cl_casedb_rollback(db);
    return FALSE;
}

/* What a reviewer writes or decides (a description's edit, accept and reject; notes; key
 * images) must survive a power cut once the call has returned. The connection runs
 * synchronous=NORMAL, under which a WAL commit reaches the disk only at the next checkpoint;
 * these writes commit under synchronous=FULL, which syncs the WAL at the commit (and with it
 * every commit before). Bulk writes (images, runs with their heatmaps) keep NORMAL: a crash
 * loses at most what can be made again, and they stay fast. */
static gboolean begin_durable(ClCaseDb *db, GError **error)
{
    if (db->pg) /* a PostgreSQL commit is on disk when it returns (synchronous_commit) */
        return cl_casedb_begin(db, error);
    ClDbStmt *st = cl_casedb_stmt(db, "PRAGMA synchronous = FULL", error);
    if (!st || !cl_casedb_exec_stmt(db, st, "starting a change", error))
        return FALSE;
    if (cl_casedb_begin(db, error))
        return TRUE;
    sqlite3_exec(db->sql, "PRAGMA synchronous = NORMAL", NULL, NULL, NULL);
    return FALSE;
}

static gboolean finish_durable(ClCaseDb *db, gboolean ok, const char *what, GError **error)
{
    ok = finish(db, ok, what, error);
    /* outside the transaction again: back to the connection's setting */
    if (db->sql)
        sqlite3_exec(db->sql, "PRAGMA synchronous = NORMAL", NULL, NULL, NULL);
    return ok;
}

/* ---- cases ----------------------------------------------------------------------------------- */

gboolean cl_casedb_case_insert_locked(ClCaseDb *db, const char *name, const char *now,
                                      gint64 *out_id, GError **error)
{
    if (!check_name(name, error))
        return FALSE;
    gint64 id = 0;
    ClDbStmt *st = cl_casedb_stmt(
        db, "INSERT INTO cases (name, created_at, updated_at) VALUES (?1, ?2, ?2) RETURNING id",
        error);
    gboolean ok = st != NULL;
    if (ok) {
        cl_db_bind_text(st, 1, name);
        cl_db_bind_text(st, 2, now);
        ok = cl_casedb_insert_id(db, st, "creating the case", &id, error);
    }
    if (ok) {
        g_autoptr(JsonBuilder) b = detail_new();
        detail_str(b, "name", name);
        ok = audit_with(db, now, "case.new", id, b, error);
    }
    if (ok && out_id)
        *out_id = id;
    return ok;
}

gboolean cl_casedb_case_new(ClCaseDb *db, const char *name, gint64 *out_id, GError **error)
{
    CL_CASEDB_CHECK(db, FALSE);
    g_return_val_if_fail(name != NULL, FALSE);
    if (!check_name(name, error) || !cl_casedb_begin(db, error))
        return FALSE;
    g_autofree char *now = cl_casedb_now();
    gint64 id = 0;
    gboolean ok = cl_casedb_case_insert_locked(db, name, now, &id, error);
    if (!finish(db, ok, "creating the case", error))
        return FALSE;
    if (out_id)
        *out_id = id;
    return TRUE;
}

gboolean cl_casedb_case_rename(ClCaseDb *db, gint64 case_id, const char *name, GError **error)
{
    CL_CASEDB_CHECK(db, FALSE);
    g_return_val_if_fail(name != NULL, FALSE);
    if (!check_name(name, error) || !cl_casedb_begin(db, error))
        return FALSE;
    g_autofree char *now = cl_casedb_now();
    g_autofree char *old = NULL;
    gboolean ok = find_case(db, case_id, &old, error);
    if (ok) {
        ClDbStmt *st =
            cl_casedb_stmt(db, "UPDATE cases SET name = ?2, updated_at = ?3 WHERE id = ?1", error);
        ok = st != NULL;
        if (ok) {
            cl_db_bind_int64(st, 1, case_id);
            cl_db_bind_text(st, 2, name);
            cl_db_bind_text(st, 3, now);
            ok = cl_casedb_exec_stmt(db, st, "renaming the case", error);
        }
    }
    if (ok) {
        g_autoptr(JsonBuilder) b = detail_new();
        detail_str(b, "from", old);
        detail_str(b, "to", name);
        ok = audit_with(db, now, "case.rename", case_id, b, error);
    }
    return finish(db, ok, "renaming the case", error);
}

gboolean cl_casedb_case_delete(ClCaseDb *db, gint64 case_id, GError **error)
{
    CL_CASEDB_CHECK(db, FALSE);
    if (!cl_casedb_begin(db, error))
        return FALSE;
    g_autofree char *now = cl_casedb_now();
    g_autofree char *name = NULL;
    gboolean ok = find_case(db, case_id, &name, error);
    if (ok) {
        g_autoptr(JsonBuilder) b = detail_new();
        detail_str(b, "name", name);
        ok = audit_with(db, now, "case.delete", case_id, b, error);
    }
    if (ok) {
        /* everything in the case goes by ON DELETE CASCADE; the audit log stays */
        ClDbStmt *st = cl_casedb_stmt(db, "DELETE FROM cases WHERE id = ?1", error);
        ok = st != NULL;
        if (ok) {
            cl_db_bind_int64(st, 1, case_id);
            ok = cl_casedb_exec_stmt(db, st, "deleting the case", error);
        }
    }
    return finish(db, ok, "deleting the case", error);
}

/* ---- images ---------------------------------------------------------------------------------- */

static gboolean check_image(const ClCaseImage *img, guint i, GError **error)
{
    if (!img || !img->path || !*img->path) {
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID,
                    "Image %u of the list has no path", i + 1);
        return FALSE;
    }
    if (img->metadata_json && *img->metadata_json) {
        g_autoptr(JsonParser) p = json_parser_new();
        g_autoptr(GError) err = NULL;
        if (!json_parser_load_from_data(p, img->metadata_json, -1, &err) ||
            !json_parser_get_root(p) || !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(p))) {
            g_autofree char *shown = g_filename_display_name(img->path);
            g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID,
                        "The metadata of %s is not a JSON object%s%s", shown, err ? ": " : "",
                        err ? err->message : "");
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean insert_image(ClCaseDb *db, gint64 case_id, guint position, const ClCaseImage *img,
                             const char *now, gint64 *out_id, GError **error)
{
    ClDbStmt *st = cl_casedb_stmt(
        db,
        "INSERT INTO images (case_id, position, path, frame, sha256, file_size, file_mtime, "
        "format, modality, width, height, n_frames, acquired_at, metadata, added_at) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15) RETURNING id",
        error);
    if (!st)
        return FALSE;
    cl_db_bind_int64(st, 1, case_id);
    cl_db_bind_int64(st, 2, position);
    g_autofree char *path = cl_casedb_path_to_text(img->path);
    cl_db_bind_text(st, 3, path);
    cl_db_bind_int64(st, 4, img->frame);
    cl_db_bind_text(st, 5, img->sha256 ? img->sha256 : "");
    cl_db_bind_int64(st, 6, img->file_size);
    cl_db_bind_int64(st, 7, img->file_mtime);
    cl_db_bind_text(st, 8, img->format ? img->format : "");
    cl_db_bind_text(st, 9, img->modality);
    cl_db_bind_int64(st, 10, img->width);
    cl_db_bind_int64(st, 11, img->height);
    cl_db_bind_int64(st, 12, img->n_frames);
    cl_db_bind_text(st, 13, img->acquired_at);
    cl_db_bind_text(st, 14, img->metadata_json && *img->metadata_json ? img->metadata_json : "{}");
    cl_db_bind_text(st, 15, now);
    return cl_casedb_insert_id(db, st, "adding the image", out_id, error);
}

gboolean cl_casedb_images_insert_locked(ClCaseDb *db, gint64 case_id, GPtrArray *images,
                                        const char *now, GArray *ids, GError **error)
{
    for (guint i = 0; i < images->len; i++)
        if (!check_image(g_ptr_array_index(images, i), i, error))
            return FALSE;
    gboolean ok = find_case(db, case_id, NULL, error);
    gint64 next = 0;
    if (ok) {
        ClDbStmt *st = cl_casedb_stmt(
            db, "SELECT coalesce(max(position) + 1, 0) FROM images WHERE case_id = ?1", error);
        ok = st != NULL;
        if (ok) {
            cl_db_bind_int64(st, 1, case_id);
            int rc = cl_db_step(st);
            next = rc == SQLITE_ROW ? cl_db_column_int64(st, 0) : 0;
            cl_db_reset(st);
            if (rc != SQLITE_ROW) {
                cl_casedb_set_sqlite_error(db, rc, "adding the images", error);
                ok = FALSE;
            }
        }
    }
    for (guint i = 0; ok && i < images->len; i++) {
        const ClCaseImage *img = g_ptr_array_index(images, i);
        gint64 id = 0;
        ok = insert_image(db, case_id, (guint)(next + i), img, now, &id, error);
        if (ok) {
            if (ids)
                g_array_append_val(ids, id);
            g_autoptr(JsonBuilder) b = detail_new();
            detail_int(b, "image_id", id);
            g_autofree char *path = cl_casedb_path_to_text(img->path);
            detail_str(b, "path", path);
            detail_int(b, "frame", img->frame);
            detail_str(b, "sha256", img->sha256);
            ok = audit_with(db, now, "image.add", case_id, b, error);
        }
    }
    if (ok && images->len && !db->pg) {
        /* the search index, once for all the images (002-search.sql; PostgreSQL's follows at
         * the commit) */
        ClDbStmt *st = cl_casedb_stmt(
            db,
            "UPDATE search SET metadata = (SELECT metadata FROM search_source WHERE case_id = ?1) "
            "WHERE rowid = ?1",
            error);
        ok = st != NULL;
        if (ok) {
            cl_db_bind_int64(st, 1, case_id);
            ok = cl_casedb_exec_stmt(db, st, "indexing the images", error);
        }
    }
    if (ok && images->len)
        ok = cl_casedb_touch_case(db, case_id, now, error);
    return ok;
}

gboolean cl_casedb_images_add(ClCaseDb *db, gint64 case_id, GPtrArray *images, GArray *out_ids,
                              GError **error)
{
    CL_CASEDB_CHECK(db, FALSE);
    g_return_val_if_fail(images != NULL, FALSE);
    g_return_val_if_fail(out_ids == NULL || g_array_get_element_size(out_ids) == sizeof(gint64),
                         FALSE);
    for (guint i = 0; i < images->len; i++)
        if (!check_image(g_ptr_array_index(images, i), i, error))
            return FALSE;
    if (!cl_casedb_begin(db, error))
        return FALSE;
    g_autofree char *now = cl_casedb_now();
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(gint64));
    gboolean ok = cl_casedb_images_insert_locked(db, case_id, images, now, ids, error);
    if (!finish(db, ok, "adding the images", error))
        return FALSE;
    if (out_ids)
        g_array_append_vals(out_ids, ids->data, ids->len);
    return TRUE;
}

gboolean cl_casedb_images_reorder(ClCaseDb *db, gint64 case_id, const gint64 *image_ids, guint n,
                                  GError **error)
{
    CL_CASEDB_CHECK(db, FALSE);
    g_return_val_if_fail(image_ids != NULL || n == 0, FALSE);
    if (!cl_casedb_begin(db, error))
        return FALSE;
    g_autofree char *now = cl_casedb_now();
    gboolean ok = find_case(db, case_id, NULL, error);
    /* the ids must be exactly the case's images, each once */
    gint64 count = -1;
    if (ok) {
        ClDbStmt *st = cl_casedb_stmt(db, "SELECT count(*) FROM images WHERE case_id = ?1", error);
        ok = st != NULL;
        if (ok) {
            cl_db_bind_int64(st, 1, case_id);
            int rc = cl_db_step(st);
            count = rc == SQLITE_ROW ? cl_db_column_int64(st, 0) : -1;
            cl_db_reset(st);
        }
    }
    if (ok && count != (gint64)n) {
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID,
                    "the new order names %u images but the case has %" G_GINT64_FORMAT, n, count);
        ok = FALSE;
    }
    for (guint i = 0; ok && i < n; i++)
        for (guint k = 0; k < i && ok; k++)
            if (image_ids[k] == image_ids[i]) {
                g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID,
                            "image %" G_GINT64_FORMAT " is named twice in the new order",
                            image_ids[i]);
                ok = FALSE;
            }
    /* two passes keep UNIQUE (case_id, position) true at every statement: first out of the
     * way (negative positions are refused by the CHECK, so past the end), then into place */
    for (int pass = 0; ok && pass < 2; pass++)
        for (guint i = 0; ok && i < n; i++) {
            ClDbStmt *st = cl_casedb_stmt(
                db, "UPDATE images SET position = ?1 WHERE id = ?2 AND case_id = ?3", error);
            ok = st != NULL;
            if (!ok)
                break;
            cl_db_bind_int64(st, 1, pass == 0 ? (gint64)n + i : (gint64)i);
            cl_db_bind_int64(st, 2, image_ids[i]);
            cl_db_bind_int64(st, 3, case_id);
            ok = cl_casedb_exec_stmt(db, st, "reordering the images", error);
            if (ok && cl_db_changes(st) != 1) {
                g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID,
                            "image %" G_GINT64_FORMAT " is not in case %" G_GINT64_FORMAT,
                            image_ids[i], case_id);
                ok = FALSE;
            }
        }
    if (ok) {
        g_autoptr(JsonBuilder) b = detail_new();
        json_builder_set_member_name(b, "order");
        json_builder_begin_array(b);
        for (guint i = 0; i < n; i++)
            json_builder_add_int_value(b, image_ids[i]);
        json_builder_end_array(b);
        ok = audit_with(db, now, "image.reorder", case_id, b, error);
    }
    if (ok)
        ok = cl_casedb_touch_case(db, case_id, now, error);
    return finish(db, ok, "reordering the images", error);
}

/* ---- runs ------------------------------------------------------------------------------------ */

static gboolean check_heatmap(const ClCaseHeatmap *hm, guint i, GError **error)
{
    const char *why = NULL;
    if (!hm)
        why = "is missing";
    else if (hm->grid_w == 0 || hm->grid_h == 0)
        why = "has an empty grid";
    else if ((guint64)hm->grid_w * hm->grid_h > (1u << 26))
        why = "has an implausibly large grid";
    else if (!hm->data)
        why = "has no data";
    if (why) {
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID, "Heatmap %u of the run %s",
                    i + 1, why);
        return FALSE;
    }
    return TRUE;
}

static gboolean insert_run(ClCaseDb *db, gint64 case_id, const ClCaseRun *run, const char *now,
                           gint64 *out_id, GError **error)
{
    ClDbStmt *st = cl_casedb_stmt(
        db,
        "INSERT INTO runs (case_id, created_at, model_name, model_sha256, model_config, device, "
        "settings, seed, preprocess_ms, encode_ms, prefill_ms, decode_ms, total_ms, n_tokens) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) RETURNING id",
        error);
    if (!st)
        return FALSE;
    char seed[32];
    g_snprintf(seed, sizeof seed, "%" G_GUINT64_FORMAT, run->seed);
    cl_db_bind_int64(st, 1, case_id);
    cl_db_bind_text(st, 2, now);
    cl_db_bind_text(st, 3, run->model_name ? run->model_name : "");
    cl_db_bind_text(st, 4, run->model_sha256 ? run->model_sha256 : "");
    cl_db_bind_text(st, 5, run->model_config_json ? run->model_config_json : "{}");
    cl_db_bind_text(st, 6, run->device ? run->device : "");
    cl_db_bind_text(st, 7, run->settings_json ? run->settings_json : "{}");
    cl_db_bind_text(st, 8, seed);
    cl_db_bind_double(st, 9, run->preprocess_ms);
    cl_db_bind_double(st, 10, run->encode_ms);
    cl_db_bind_double(st, 11, run->prefill_ms);
    cl_db_bind_double(st, 12, run->decode_ms);
    cl_db_bind_double(st, 13, run->total_ms);
    cl_db_bind_int64(st, 14, run->n_tokens);
    return cl_casedb_insert_id(db, st, "saving the run", out_id, error);
}

static gboolean insert_heatmap(ClCaseDb *db, gint64 run_id, const ClCaseHeatmap *hm, GError **error)
{
    ClDbStmt *st = cl_casedb_stmt(
        db,
        "INSERT INTO heatmaps (run_id, image_id, layer, kind, input_size, grid_w, grid_h, data) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        error);
    if (!st)
        return FALSE;
    cl_db_bind_int64(st, 1, run_id);
    cl_db_bind_int64(st, 2, hm->image_id);
    cl_db_bind_int64(st, 3, hm->layer);
    cl_db_bind_text(st, 4, hm->kind ? hm->kind : "");
    cl_db_bind_int64(st, 5, hm->input_size);
    cl_db_bind_int64(st, 6, hm->grid_w);
    cl_db_bind_int64(st, 7, hm->grid_h);
    cl_db_bind_blob(st, 8, hm->data, (gsize)hm->grid_w * hm->grid_h * sizeof(float));
    return cl_casedb_exec_stmt(db, st, "saving the heatmaps", error);
}

gboolean cl_casedb_run_record(ClCaseDb *db, gint64 case_id, const ClCaseRun *run,
                              const char *generated_text, GPtrArray *heatmaps, gint64 *out_run_id,
                              gint64 *out_version_id, GError **error)
{
    CL_CASEDB_CHECK(db, FALSE);
    g_return_val_if_fail(run != NULL, FALSE);
    for (guint i = 0; heatmaps && i < heatmaps->len; i++)
        if (!check_heatmap(g_ptr_array_index(heatmaps, i), i, error))
            return FALSE;
    if (!cl_casedb_begin(db, error))
        return FALSE;
    g_autofree char *now = cl_casedb_now();
    gint64 run_id = 0, description_id = 0, version_id = 0;
    gboolean ok = find_case(db, case_id, NULL, error) &&
                  insert_run(db, case_id, run, now, &run_id, error) &&
                  insert_description(db, case_id, run_id, now, &description_id, error) &&
                  insert_version(db, description_id, 1, generated_text ? generated_text : "",
                                 CL_DESC_DRAFT, "model", NULL, now, &version_id, error);
    for (guint i = 0; ok && heatmaps && i < heatmaps->len; i++) {
        const ClCaseHeatmap *hm = g_ptr_array_index(heatmaps, i);
        ok = check_image_in_case(db, case_id, hm->image_id, error) &&
             insert_heatmap(db, run_id, hm, error);
    }
    if (ok) {
        g_autoptr(JsonBuilder) b = detail_new();
        detail_int(b, "run_id", run_id);
        detail_str(b, "model", run->model_name);
        detail_str(b, "model_sha256", run->model_sha256);
        detail_int(b, "description_id", description_id);
        detail_int(b, "version_id", version_id);
        detail_int(b, "heatmaps", heatmaps ? heatmaps->len : 0);
        ok = audit_with(db, now, "run.record", case_id, b, error) &&
             cl_casedb_touch_case(db, case_id, now, error);
    }
    if (!finish(db, ok, "saving the run", error))
        return FALSE;
    if (out_run_id)
        *out_run_id = run_id;
    if (out_version_id)
        *out_version_id = version_id;
    return TRUE;
}

/* ---- descriptions ---------------------------------------------------------------------------- */

gboolean cl_casedb_description_edit(ClCaseDb *db, gint64 case_id, const char *text,
                                    const char *author, gint64 base_version_id,
                                    gint64 *out_version_id, GError **error)
{
    CL_CASEDB_CHECK(db, FALSE);
    g_return_val_if_fail(text != NULL, FALSE);
    if (!begin_durable(db, error))
        return FALSE;
    g_autofree char *now = cl_casedb_now();
    Current cur = { 0 };
    gint64 description_id = 0, version_id = 0;
    guint version = 1;
    gboolean ok = find_case(db, case_id, NULL, error) && current_version(db, case_id, &cur, error);
    if (ok && base_version_id != 0 && base_version_id != cur.id) {
        /* someone else saved in between: writing now would silently drop their version */
        if (cur.id)
            g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_CONFLICT,
                        "The description of case %" G_GINT64_FORMAT " was changed by %s (now "
                        "version %u) after you started editing; your text was not saved. Copy "
                        "it, reload the case and apply your edit again.",
                        case_id, cur.author, cur.version);
        else
            g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_CONFLICT,
                        "Case %" G_GINT64_FORMAT " has no description version %" G_GINT64_FORMAT
                        "; your text was not saved. Copy it, reload the case and edit again.",
                        case_id, base_version_id);
        ok = FALSE;
    }
    if (ok) {
        if (cur.id) {
            description_id = cur.description_id;
            version = cur.version + 1;
        } else {
            ok = insert_description(db, case_id, 0, now, &description_id, error);
        }
    }
    const char *who = author && *author ? author : db->actor;
    ok = ok && insert_version(db, description_id, version, text, CL_DESC_DRAFT, who, NULL, now,
                              &version_id, error);
    if (ok) {
        g_autoptr(JsonBuilder) b = detail_new();
        detail_int(b, "description_id", description_id);
        detail_int(b, "version_id", version_id);
        detail_int(b, "version", version);
        detail_int(b, "base_version_id", base_version_id);
        detail_int(b, "bytes", (gint64)strlen(text));
        ok = audit_with(db, now, "description.edit", case_id, b, error) &&
             cl_casedb_touch_case(db, case_id, now, error);
    }
    current_clear(&cur);
    if (!finish_durable(db, ok, "saving the description", error))
        return FALSE;
    if (out_version_id)
        *out_version_id = version_id;
    return TRUE;
}

gboolean cl_casedb_description_set_status(ClCaseDb *db, gint64 case_id, ClDescStatus status,
                                          const char *reviewer, gint64 base_version_id,
                                          gint64 *out_version_id, GError **error)
{
    CL_CASEDB_CHECK(db, FALSE);
    g_return_val_if_fail(
        status == CL_DESC_DRAFT || status == CL_DESC_ACCEPTED || status == CL_DESC_REJECTED, FALSE);
    if (!begin_durable(db, error))
        return FALSE;
    g_autofree char *now = cl_casedb_now();
    Current cur = { 0 };
    gint64 version_id = 0;
    gboolean ok = find_case(db, case_id, NULL, error) && current_version(db, case_id, &cur, error);
    if (ok && !cur.id) {
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID,
                    "Case %" G_GINT64_FORMAT " has no description to mark %s yet", case_id,
                    cl_desc_status_name(status));
        ok = FALSE;
    }
    if (ok && base_version_id != 0 && base_version_id != cur.id) {
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_CONFLICT,
                    "The description of case %" G_GINT64_FORMAT " was changed by %s (now "
                    "version %u) since you read it; it was not marked %s. Read the new version "
                    "first.",
                    case_id, cur.author, cur.version, cl_desc_status_name(status));
        ok = FALSE;
    }
    const char *who = reviewer && *reviewer ? reviewer : db->actor;
    ok = ok && insert_version(db, cur.description_id, cur.version + 1, cur.text, status, who, who,
                              now, &version_id, error);
    if (ok) {
        static const char *const actions[] = { "description.draft", "description.accept",
                                               "description.reject" };
        g_autoptr(JsonBuilder) b = detail_new();
        detail_int(b, "description_id", cur.description_id);
        detail_int(b, "version_id", version_id);
        detail_int(b, "version", cur.version + 1);
        detail_str(b, "from", cur.status);
        detail_str(b, "to", cl_desc_status_name(status));
        ok = audit_with(db, now, actions[status], case_id, b, error) &&
             cl_casedb_touch_case(db, case_id, now, error);
    }
    current_clear(&cur);
    if (!finish_durable(db, ok, "changing the description's status", error))
        return FALSE;
    if (out_version_id)
        *out_version_id = version_id;
    return TRUE;
}

/* ---- notes and key images -------------------------------------------------------------------- */

gboolean cl_casedb_note_add(ClCaseDb *db, gint64 case_id, gint64 image_id, const char *text,
                            gint64 *out_id, GError **error)
{
    CL_CASEDB_CHECK(db, FALSE);
    g_return_val_if_fail(text != NULL, FALSE);
    g_autofree char *stripped = g_strstrip(g_strdup(text));
    if (!*stripped) {
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID, "A note needs some text");
        return FALSE;
    }
    if (!begin_durable(db, error))
        return FALSE;
    g_autofree char *now = cl_casedb_now();
    gint64 id = 0;
    gboolean ok = find_case(db, case_id, NULL, error) &&
                  (image_id == 0 || check_image_in_case(db, case_id, image_id, error));
    if (ok) {
        ClDbStmt *st =
            cl_casedb_stmt(db,
                           "INSERT INTO notes (case_id, image_id, author, text, created_at) "
                           "VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id",
                           error);
        ok = st != NULL;
        if (ok) {
            cl_db_bind_int64(st, 1, case_id);
            if (image_id)
                cl_db_bind_int64(st, 2, image_id);
            cl_db_bind_text(st, 3, db->actor);
            cl_db_bind_text(st, 4, text);
            cl_db_bind_text(st, 5, now);
            ok = cl_casedb_insert_id(db, st, "saving the note", &id, error);
        }
    }
    if (ok) {
        g_autoptr(JsonBuilder) b = detail_new();
        detail_int(b, "note_id", id);
        detail_int(b, "image_id", image_id);
        ok = audit_with(db, now, "note.add", case_id, b, error) &&
             cl_casedb_touch_case(db, case_id, now, error);
    }
    if (!finish_durable(db, ok, "saving the note", error))
        return FALSE;
    if (out_id)
        *out_id = id;
    return TRUE;
}

gboolean cl_casedb_key_image_add(ClCaseDb *db, gint64 case_id, gint64 image_id, const char *label,
                                 gint64 *out_id, GError **error)
{
    CL_CASEDB_CHECK(db, FALSE);
    if (!begin_durable(db, error))
        return FALSE;
    g_autofree char *now = cl_casedb_now();
    gint64 id = 0;
    gboolean ok =
        find_case(db, case_id, NULL, error) && check_image_in_case(db, case_id, image_id, error);
    if (ok) {
        ClDbStmt *st =
            cl_casedb_stmt(db,
                           "INSERT INTO key_images (case_id, image_id, label, created_at) "
                           "VALUES (?1, ?2, ?3, ?4) RETURNING id",
                           error);
        ok = st != NULL;
        if (ok) {
            cl_db_bind_int64(st, 1, case_id);
            cl_db_bind_int64(st, 2, image_id);
            cl_db_bind_text(st, 3, label ? label : "");
            cl_db_bind_text(st, 4, now);
            ok = cl_casedb_insert_id(db, st, "marking the key image", &id, error);
        }
    }
    if (ok) {
        g_autoptr(JsonBuilder) b = detail_new();
        detail_int(b, "key_image_id", id);
        detail_int(b, "image_id", image_id);
        detail_str(b, "label", label ? label : "");
        ok = audit_with(db, now, "key_image.add", case_id, b, error) &&
             cl_casedb_touch_case(db, case_id, now, error);
    }
    if (!finish_durable(db, ok, "marking the key image", error))
        return FALSE;
    if (out_id)
        *out_id = id;
    return TRUE;
}
