/* batch.c - a manifest line's case for batch describe (casedb.h; 003-batch.sql). */
#include "casedb/casedb-private.h"

/* The line's case (0: none yet) and whether it has a run. */
static gboolean lookup(ClCaseDb *db, const char *manifest, const char *key, gint64 *case_id,
                       gboolean *has_run, GError **error)
{
    ClDbStmt *st = cl_casedb_stmt(
        db,
        "SELECT b.case_id, EXISTS (SELECT 1 FROM runs r WHERE r.case_id = b.case_id) "
        "FROM batch_items b WHERE b.manifest = ?1 AND b.key = ?2",
        error);
    if (!st)
        return FALSE;
    cl_db_bind_text(st, 1, manifest);
    cl_db_bind_text(st, 2, key);
    int rc = cl_db_step(st);
    *case_id = rc == SQLITE_ROW ? cl_db_column_int64(st, 0) : 0;
    *has_run = rc == SQLITE_ROW && (int)cl_db_column_int64(st, 1);
    cl_db_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        cl_casedb_set_sqlite_error(db, rc, "looking up a batch line", error);
        return FALSE;
    }
    return TRUE;
}

gboolean cl_casedb_batch_case(ClCaseDb *db, const char *manifest, const char *key, const char *name,
                              GPtrArray *images, gint64 *case_id, ClBatchState *state,
                              GError **error)
{
    CL_CASEDB_CHECK(db, FALSE);
    g_return_val_if_fail(manifest && *manifest && key && *key && name && images, FALSE);
    gboolean has_run = FALSE;
    if (!lookup(db, manifest, key, case_id, &has_run, error))
        return FALSE;
    if (*case_id) {
        *state = has_run ? CL_BATCH_DONE : CL_BATCH_PENDING;
        return TRUE;
    }
    if (!cl_casedb_begin(db, error))
        return FALSE;
    /* inside the write lock: another process may have made it since the look-up */
    gboolean ok = lookup(db, manifest, key, case_id, &has_run, error);
    if (ok && *case_id) {
        cl_casedb_rollback(db);
        *state = has_run ? CL_BATCH_DONE : CL_BATCH_PENDING;
        return TRUE;
    }
    g_autofree char *now = cl_casedb_now();
    gint64 id = 0;
    ok = ok && cl_casedb_case_insert_locked(db, name, now, &id, error) &&
         cl_casedb_images_insert_locked(db, id, images, now, NULL, error);
    if (ok) {
        ClDbStmt *st = cl_casedb_stmt(db,
                                      "INSERT INTO batch_items (manifest, key, case_id, "
                                      "added_at) VALUES (?1, ?2, ?3, ?4)",
                                      error);
        ok = st != NULL;
        if (ok) {
            cl_db_bind_text(st, 1, manifest);
            cl_db_bind_text(st, 2, key);
            cl_db_bind_int64(st, 3, id);
            cl_db_bind_text(st, 4, now);
            ok = cl_casedb_exec_stmt(db, st, "recording the batch line", error);
        }
    }
    if (!ok) {
        cl_casedb_rollback(db);
        return FALSE;
    }
    if (!cl_casedb_commit(db, "making the batch line's case", error))
        return FALSE;
    *case_id = id;
    *state = CL_BATCH_NEW;
    return TRUE;
}

gboolean cl_casedb_batch_counts(ClCaseDb *db, const char *manifest, gint64 *made, gint64 *described,
                                GError **error)
{
    CL_CASEDB_CHECK(db, FALSE);
    ClDbStmt *st =
        cl_casedb_stmt(db,
                       "SELECT count(*), coalesce(sum(CASE WHEN EXISTS (SELECT 1 FROM runs r "
                       "WHERE r.case_id = b.case_id) THEN 1 ELSE 0 END), 0) "
                       "FROM batch_items b WHERE b.manifest = ?1",
                       error);
    if (!st)
        return FALSE;
    cl_db_bind_text(st, 1, manifest);
    int rc = cl_db_step(st);
    if (rc == SQLITE_ROW) {
        *made = cl_db_column_int64(st, 0);
        *described = cl_db_column_int64(st, 1);
    }
    cl_db_reset(st);
    if (rc != SQLITE_ROW) {
        cl_casedb_set_sqlite_error(db, rc, "counting the batch's lines", error);
        return FALSE;
    }
    return TRUE;
}
