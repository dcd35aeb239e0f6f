/* reads.c - the reads of casedb.h: the case list and a whole case (images, runs, description
 * versions, heatmaps, notes, key images, audit), optionally checking its image files. */
#include "casedb/casedb-private.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

/* One row per case. The current status is that of the latest version of the latest description;
 * modalities are the distinct DICOM modalities or formats in image order. */
#define SUMMARY_COLUMNS                                                                            \
    "SELECT c.id, c.name, c.created_at, c.updated_at, "                                            \
    "(SELECT count(*) FROM images i WHERE i.case_id = c.id), "                                     \
    "(SELECT v.status FROM description_versions v WHERE v.description_id = "                       \
    "   (SELECT max(d.id) FROM descriptions d WHERE d.case_id = c.id) "                            \
    " ORDER BY v.version DESC LIMIT 1), "
#define MODALITY "coalesce(nullif(i.modality, ''), i.format)"
#define SUMMARY_SELECT                                                                             \
    SUMMARY_COLUMNS                                                                                \
    "(SELECT group_concat(m, ', ') FROM "                                                          \
    "   (SELECT " MODALITY " AS m, min(i.position) AS p "                                          \
    "    FROM images i WHERE i.case_id = c.id GROUP BY m ORDER BY p) x) "                          \
    "FROM cases c "
/* PostgreSQL's string_agg keeps no order of its input's: it is given one */
#define SUMMARY_SELECT_PG                                                                          \
    SUMMARY_COLUMNS                                                                                \
    "(SELECT string_agg(m, ', ' ORDER BY p) FROM "                                                 \
    "   (SELECT " MODALITY " AS m, min(i.position) AS p "                                          \
    "    FROM images i WHERE i.case_id = c.id GROUP BY m) x) "                                     \
    "FROM cases c "

static void summary_fill(ClCaseSummary *s, ClDbStmt *st)
{
    s->id = cl_db_column_int64(st, 0);
    s->name = cl_casedb_column_dup(st, 1);
    s->created_at = cl_casedb_column_dup(st, 2);
    s->updated_at = cl_casedb_column_dup(st, 3);
    s->n_images = (guint)cl_db_column_int64(st, 4);
    s->has_description = !cl_db_column_is_null(st, 5);
    s->status = CL_DESC_DRAFT;
    if (s->has_description)
        cl_desc_status_parse(cl_db_column_text(st, 5), &s->status);
    s->modalities = cl_casedb_column_dup(st, 6);
    if (!s->modalities)
        s->modalities = g_strdup("");
}

static void set_modalities(ClCaseSummary *s, const char *modalities)
{
    g_free(s->modalities);
    s->modalities = g_strdup(modalities);
}

/* The list's modalities in one pass over all images (a per-case subquery sorts once per case,
 * which dominates the list of 10,000 cases). */
static gboolean fill_modalities(ClCaseDb *db, GPtrArray *list, GError **error)
{
    g_autoptr(GHashTable) by_id = g_hash_table_new(g_int64_hash, g_int64_equal);
    for (guint i = 0; i < list->len; i++) {
        ClCaseSummary *s = g_ptr_array_index(list, i);
        g_hash_table_insert(by_id, &s->id, s);
    }
    ClDbStmt *st = cl_casedb_stmt(
        db, "SELECT i.case_id, " MODALITY " FROM images i ORDER BY i.case_id, i.position", error);
    if (!st)
        return FALSE;
    ClCaseSummary *cur = NULL;
    GString *acc = g_string_new(NULL);
    int rc;
    while ((rc = cl_db_step(st)) == SQLITE_ROW) {
        gint64 id = cl_db_column_int64(st, 0);
        const char *m = cl_db_column_text(st, 1);
        if (!cur || cur->id != id) {
            if (cur)
                set_modalities(cur, acc->str);
            cur = g_hash_table_lookup(by_id, &id);
            g_string_truncate(acc, 0);
        }
        if (!cur || !m || !*m)
            continue;
        /* distinct, in image order: a case has a handful of kinds, a linear look is enough */
        gboolean dup = FALSE;
        for (const char *p = acc->str; *p && !dup;) {
            const char *end = strstr(p, ", ");
            gsize n = end ? (gsize)(end - p) : strlen(p);
            dup = n == strlen(m) && strncmp(p, m, n) == 0;
            p = end ? end + 2 : p + n;
        }
        if (!dup)
            g_string_append_printf(acc, "%s%s", acc->len ? ", " : "", m);
    }
    if (cur)
        set_modalities(cur, acc->str);
    g_string_free(acc, TRUE);
    cl_db_reset(st);
    if (rc != SQLITE_DONE) {
        cl_casedb_set_sqlite_error(db, rc, "listing the cases", error);
        return FALSE;
    }
    return TRUE;
}

gboolean cl_casedb_last_change(ClCaseDb *db, gint64 *out_change, GError **error)
{
    CL_CASEDB_CHECK(db, FALSE);
    ClDbStmt *st = cl_casedb_stmt(db, "SELECT coalesce(max(id), 0) FROM audit", error);
    if (!st)
        return FALSE;
    int rc = cl_db_step(st);
    if (rc == SQLITE_ROW)
        *out_change = cl_db_column_int64(st, 0);
    cl_db_reset(st);
    if (rc != SQLITE_ROW) {
        cl_casedb_set_sqlite_error(db, rc, "looking for changes", error);
        return FALSE;
    }
    return TRUE;
}

GPtrArray *cl_casedb_list(ClCaseDb *db, GError **error)
{
    CL_CASEDB_CHECK(db, NULL);
    /* one read transaction: the cases and their modalities from the same snapshot */
    if (!cl_casedb_begin_read(db, "listing the cases", error))
        return NULL;
    g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func((GDestroyNotify)cl_case_summary_free);
    ClDbStmt *st = cl_casedb_stmt(
        db, SUMMARY_COLUMNS "NULL FROM cases c ORDER BY c.updated_at DESC, c.id DESC", error);
    int rc = SQLITE_ERROR;
    if (st) {
        while ((rc = cl_db_step(st)) == SQLITE_ROW) {
            ClCaseSummary *s = g_new0(ClCaseSummary, 1);
            summary_fill(s, st);
            g_ptr_array_add(out, s);
        }
        cl_db_reset(st);
        if (rc != SQLITE_DONE)
            cl_casedb_set_sqlite_error(db, rc, "listing the cases", error);
    }
    gboolean ok = rc == SQLITE_DONE && fill_modalities(db, out, error);
    cl_casedb_rollback(db); /* nothing written: this just ends the read transaction */
    return ok ? g_steal_pointer(&out) : NULL;
}

/* ---- one case -------------------------------------------------------------------------------- */

/* Steps a per-case query (?1 = case id), calling row() for each row. */
static gboolean each_row(ClCaseDb *db, const char *sql, gint64 case_id, gboolean flag,
                         void (*row)(ClCase *, ClDbStmt *, gboolean), ClCase *c, GError **error)
{
    ClDbStmt *st = cl_casedb_stmt(db, sql, error);
    if (!st)
        return FALSE;
    cl_db_bind_int64(st, 1, case_id);
    int rc;
    while ((rc = cl_db_step(st)) == SQLITE_ROW)
        row(c, st, flag);
    cl_db_reset(st);
    if (rc != SQLITE_DONE) {
        cl_casedb_set_sqlite_error(db, rc, "reading the case", error);
        return FALSE;
    }
    return TRUE;
}

static void image_row(ClCase *c, ClDbStmt *st, gboolean unused)
{
    (void)unused;
    ClCaseImage *img = g_new0(ClCaseImage, 1);
    img->id = cl_db_column_int64(st, 0);
    img->position = (guint)cl_db_column_int64(st, 1);
    img->path = cl_casedb_path_from_text(cl_db_column_text(st, 2));
    img->frame = (guint)cl_db_column_int64(st, 3);
    img->sha256 = cl_casedb_column_dup(st, 4);
    img->file_size = cl_db_column_int64(st, 5);
    img->file_mtime = cl_db_column_int64(st, 6);
    img->format = cl_casedb_column_dup(st, 7);
    img->modality = cl_casedb_column_dup(st, 8);
    img->width = (guint)cl_db_column_int64(st, 9);
    img->height = (guint)cl_db_column_int64(st, 10);
    img->n_frames = (guint)cl_db_column_int64(st, 11);
    img->acquired_at = cl_casedb_column_dup(st, 12);
    img->metadata_json = cl_casedb_column_dup(st, 13);
    img->added_at = cl_casedb_column_dup(st, 14);
    img->file_state = CL_FILE_UNCHECKED;
    g_ptr_array_add(c->images, img);
}

static void run_row(ClCase *c, ClDbStmt *st, gboolean unused)
{
    (void)unused;
    ClCaseRun *r = g_new0(ClCaseRun, 1);
    r->id = cl_db_column_int64(st, 0);
    r->created_at = cl_casedb_column_dup(st, 1);
    r->model_name = cl_casedb_column_dup(st, 2);
    r->model_sha256 = cl_casedb_column_dup(st, 3);
    r->model_config_json = cl_casedb_column_dup(st, 4);
    r->device = cl_casedb_column_dup(st, 5);
    r->settings_json = cl_casedb_column_dup(st, 6);
    /* stored as decimal text: SQLite integers are signed */
    const char *seed = cl_db_column_text(st, 7);
    r->seed = seed ? g_ascii_strtoull(seed, NULL, 10) : 0;
    r->preprocess_ms = cl_db_column_double(st, 8);
    r->encode_ms = cl_db_column_double(st, 9);
    r->prefill_ms = cl_db_column_double(st, 10);
    r->decode_ms = cl_db_column_double(st, 11);
    r->total_ms = cl_db_column_double(st, 12);
    r->n_tokens = (guint)cl_db_column_int64(st, 13);
    g_ptr_array_add(c->runs, r);
}

static void version_row(ClCase *c, ClDbStmt *st, gboolean unused)
{
    (void)unused;
    ClCaseDescVersion *v = g_new0(ClCaseDescVersion, 1);
    v->id = cl_db_column_int64(st, 0);
    v->description_id = cl_db_column_int64(st, 1);
    v->run_id = cl_db_column_int64(st, 2); /* NULL reads as 0: hand-written */
    v->version = (guint)cl_db_column_int64(st, 3);
    v->text = cl_casedb_column_dup(st, 4);
    v->status = CL_DESC_DRAFT;
    cl_desc_status_parse(cl_db_column_text(st, 5), &v->status);
    v->author = cl_casedb_column_dup(st, 6);
    v->created_at = cl_casedb_column_dup(st, 7);
    g_ptr_array_add(c->descriptions, v);
}

static void heatmap_row(ClCase *c, ClDbStmt *st, gboolean with_data)
{
    ClCaseHeatmap *h = g_new0(ClCaseHeatmap, 1);
    h->id = cl_db_column_int64(st, 0);
    h->run_id = cl_db_column_int64(st, 1);
    h->image_id = cl_db_column_int64(st, 2);
    h->layer = (int)cl_db_column_int64(st, 3);
    h->kind = cl_casedb_column_dup(st, 4);
    h->input_size = (int)cl_db_column_int64(st, 5);
    h->grid_w = (guint)cl_db_column_int64(st, 6);
    h->grid_h = (guint)cl_db_column_int64(st, 7);
    if (with_data) {
        gsize n = 0;
        const void *blob = cl_db_column_blob(st, 8, &n);
        /* the table's CHECK keeps the size right; a mismatch would mean damage: no data then */
        if (blob && n == (size_t)h->grid_w * h->grid_h * sizeof(float))
            h->data = g_memdup2(blob, n);
    }
    g_ptr_array_add(c->heatmaps, h);
}

static void note_row(ClCase *c, ClDbStmt *st, gboolean unused)
{
    (void)unused;
    ClCaseNote *n = g_new0(ClCaseNote, 1);
    n->id = cl_db_column_int64(st, 0);
    n->image_id = cl_db_column_int64(st, 1);
    n->author = cl_casedb_column_dup(st, 2);
    n->text = cl_casedb_column_dup(st, 3);
    n->created_at = cl_casedb_column_dup(st, 4);
    g_ptr_array_add(c->notes, n);
}

static void key_image_row(ClCase *c, ClDbStmt *st, gboolean unused)
{
    (void)unused;
    ClCaseKeyImage *k = g_new0(ClCaseKeyImage, 1);
    k->id = cl_db_column_int64(st, 0);
    k->image_id = cl_db_column_int64(st, 1);
    k->label = cl_casedb_column_dup(st, 2);
    k->created_at = cl_casedb_column_dup(st, 3);
    g_ptr_array_add(c->key_images, k);
}

static void audit_row(ClCase *c, ClDbStmt *st, gboolean unused)
{
    (void)unused;
    ClCaseAudit *a = g_new0(ClCaseAudit, 1);
    a->id = cl_db_column_int64(st, 0);
    a->at = cl_casedb_column_dup(st, 1);
    a->actor = cl_casedb_column_dup(st, 2);
    a->action = cl_casedb_column_dup(st, 3);
    a->case_id = cl_db_column_int64(st, 4);
    a->detail_json = cl_casedb_column_dup(st, 5);
    g_ptr_array_add(c->audit, a);
}

static gboolean load_case(ClCaseDb *db, gint64 case_id, gboolean with_data, ClCase *c,
                          GError **error)
{
    ClDbStmt *st = cl_casedb_stmt(
        db, CL_SQL(db, SUMMARY_SELECT "WHERE c.id = ?1", SUMMARY_SELECT_PG "WHERE c.id = ?1"),
        error);
    if (!st)
        return FALSE;
    cl_db_bind_int64(st, 1, case_id);
    int rc = cl_db_step(st);
    if (rc == SQLITE_ROW)
        summary_fill(&c->summary, st);
    cl_db_reset(st);
    if (rc == SQLITE_DONE) {
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_NOT_FOUND,
                    "There is no case %" G_GINT64_FORMAT " (it may have been deleted)", case_id);
        return FALSE;
    }
    if (rc != SQLITE_ROW) {
        cl_casedb_set_sqlite_error(db, rc, "reading the case", error);
        return FALSE;
    }
    return each_row(db,
                    "SELECT id, position, path, frame, sha256, file_size, file_mtime, format, "
                    "modality, width, height, n_frames, acquired_at, metadata, added_at "
                    "FROM images WHERE case_id = ?1 ORDER BY position",
                    case_id, FALSE, image_row, c, error) &&
           each_row(
               db,
               "SELECT id, created_at, model_name, model_sha256, model_config, device, settings, "
               "seed, preprocess_ms, encode_ms, prefill_ms, decode_ms, total_ms, n_tokens "
               "FROM runs WHERE case_id = ?1 ORDER BY id",
               case_id, FALSE, run_row, c, error) &&
           each_row(
               db,
               "SELECT v.id, v.description_id, d.run_id, v.version, v.text, v.status, v.author, "
               "v.created_at FROM descriptions d "
               "JOIN description_versions v ON v.description_id = d.id "
               "WHERE d.case_id = ?1 ORDER BY d.id, v.version",
               case_id, FALSE, version_row, c, error) &&
           (with_data
                ? each_row(db,
                           "SELECT h.id, h.run_id, h.image_id, h.layer, h.kind, h.input_size, "
                           "h.grid_w, h.grid_h, h.data FROM runs r "
                           "JOIN heatmaps h ON h.run_id = r.id JOIN images i ON i.id = h.image_id "
                           "WHERE r.case_id = ?1 ORDER BY h.run_id, i.position, h.layer, h.kind",
                           case_id, TRUE, heatmap_row, c, error)
                : each_row(db,
                           "SELECT h.id, h.run_id, h.image_id, h.layer, h.kind, h.input_size, "
                           "h.grid_w, h.grid_h FROM runs r "
                           "JOIN heatmaps h ON h.run_id = r.id JOIN images i ON i.id = h.image_id "
                           "WHERE r.case_id = ?1 ORDER BY h.run_id, i.position, h.layer, h.kind",
                           case_id, FALSE, heatmap_row, c, error)) &&
           each_row(db,
                    "SELECT id, image_id, author, text, created_at FROM notes WHERE case_id = ?1 "
                    "ORDER BY id",
                    case_id, FALSE, note_row, c, error) &&
           each_row(db,
                    "SELECT id, image_id, label, created_at FROM key_images WHERE case_id = ?1 "
                    "ORDER BY id",
                    case_id, FALSE, key_image_row, c, error) &&
           each_row(db,
                    "SELECT id, at, actor, action, case_id, detail FROM audit WHERE case_id = ?1 "
                    "ORDER BY id",
                    case_id, FALSE, audit_row, c, error);
}

/* ---- file checks ----------------------------------------------------------------------------- */

static ClFileState check_file(const ClCaseImage *img)
{
    GStatBuf sb;
    if (g_stat(img->path, &sb) != 0)
        return errno == ENOENT || errno == ENOTDIR ? CL_FILE_MISSING : CL_FILE_UNREADABLE;
    if (g_access(img->path, R_OK) != 0)
        return CL_FILE_UNREADABLE;
    if ((gint64)sb.st_size == img->file_size && (gint64)sb.st_mtime == img->file_mtime &&
        S_ISREG(sb.st_mode))
        return CL_FILE_OK;
    /* size or time differ: only the content decides (a copy back in place is still the file) */
    g_autofree char *sha = NULL;
    g_autoptr(GError) err = NULL;
    if (!cl_casedb_hash_file(img->path, &sha, &err))
        return g_error_matches(err, G_FILE_ERROR, G_FILE_ERROR_NOENT) ? CL_FILE_MISSING
                                                                      : CL_FILE_UNREADABLE;
    return g_ascii_strcasecmp(sha, img->sha256 ? img->sha256 : "") == 0 ? CL_FILE_OK
                                                                        : CL_FILE_CHANGED;
}

static void check_files(ClCase *c)
{
    /* frames of one file share its state: check each path once */
    g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
    for (guint i = 0; i < c->images->len; i++) {
        ClCaseImage *img = g_ptr_array_index(c->images, i);
        gpointer state;
        if (g_hash_table_lookup_extended(seen, img->path, NULL, &state) &&
            g_strcmp0(((ClCaseImage *)state)->sha256, img->sha256) == 0) {
            img->file_state = ((ClCaseImage *)state)->file_state;
            continue;
        }
        img->file_state = check_file(img);
        g_hash_table_insert(seen, img->path, img);
    }
}

ClCase *cl_casedb_get_case(ClCaseDb *db, gint64 case_id, ClCaseGetFlags flags, GError **error)
{
    CL_CASEDB_CHECK(db, NULL);
    /* one read transaction: every part of the case from the same snapshot, even while another
     * connection writes */
    if (!cl_casedb_begin_read(db, "reading the case", error))
        return NULL;
    g_autoptr(ClCase) c = cl_case_new_empty();
    gboolean ok = load_case(db, case_id, (flags & CL_CASE_HEATMAP_DATA) != 0, c, error);
    cl_casedb_rollback(db); /* nothing written: ending the read transaction is all it does */
    if (!ok)
        return NULL;
    /* after the transaction: hashing may take a while and must not hold the snapshot */
    if (flags & CL_CASE_CHECK_FILES)
        check_files(c);
    return g_steal_pointer(&c);
}
