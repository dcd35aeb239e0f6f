/* casedb-private.h - what the casedb files share: the connection, the statement cache, the
 * transaction and error helpers. Not installed; include only from core/casedb. */
#pragma once

#include <sqlite3.h>

#include "casedb/casedb.h"

struct _ClCaseDb {
    sqlite3 *sql;
    char *path;          /* as given (":memory:" for a private in-memory database) */
    GThread *owner;      /* the only thread allowed to use the connection */
    gboolean read_only;  /* opened with CL_CASEDB_OPEN_READ_ONLY (or the file is read-only) */
    gboolean unwritable; /* read-only because the file, its folder or its mount is */
    char *actor;
    GHashTable *stmts; /* SQL text -> sqlite3_stmt*, prepared once, finalized at close */
};

/* The caller's thread must own the connection (G_DEBUG=fatal-criticals makes a slip fatal). */
#define CL_CASEDB_CHECK(db, val)                                                                   \
    g_return_val_if_fail((db) != NULL && (db)->owner == g_thread_self(), (val))

/* The cached statement for sql (a string literal: the cache keeps the pointer), reset and with
 * its bindings cleared. NULL with error when it does not compile. */
sqlite3_stmt *cl_casedb_stmt(ClCaseDb *db, const char *sql, GError **error);

/* Sets error from SQLite's last failure (rc), mapping it to a ClCaseDbError with a message a
 * user can act on; `what` says what was being done ("saving the edit"). */
void cl_casedb_set_sqlite_error(ClCaseDb *db, int rc, const char *what, GError **error);

/* Steps a statement that returns no rows (or whose rows do not matter) to its end. */
gboolean cl_casedb_exec_stmt(ClCaseDb *db, sqlite3_stmt *st, const char *what, GError **error);

/* BEGIN IMMEDIATE (takes the write lock now, so that a busy database fails here, before any
 * work); commit; rollback (ignores "no transaction": SQLite may already have rolled back). */
gboolean cl_casedb_begin(ClCaseDb *db, GError **error);
gboolean cl_casedb_commit(ClCaseDb *db, const char *what, GError **error);
void cl_casedb_rollback(ClCaseDb *db);

/* Binds text as UTF-8 (invalid bytes replaced by U+FFFD); NULL binds NULL. */
int cl_casedb_bind_text(sqlite3_stmt *st, int idx, const char *text);
/* A column as a new string (NULL stays NULL). */
char *cl_casedb_column_dup(sqlite3_stmt *st, int col);

/* An image's path as the database keeps it, and back: the file system's bytes need not be
 * UTF-8 (a name from another encoding), and a path made valid UTF-8 would name no file. */
char *cl_casedb_path_to_text(const char *path);
char *cl_casedb_path_from_text(const char *text);

/* Now as ISO 8601 UTC with milliseconds: "2026-11-21T21:30:00.123Z". */
char *cl_casedb_now(void);

/* Streams a file through SHA-256 (lowercase hex); FALSE with a G_FILE_ERROR on failure. */
gboolean cl_casedb_hash_file(const char *path, char **out_hex, GError **error);

/* A case's timestamp bump (inside the writing transaction) and an audit entry. detail_json is a
 * JSON object (NULL = "{}"). */
gboolean cl_casedb_touch_case(ClCaseDb *db, gint64 case_id, const char *now, GError **error);
gboolean cl_casedb_audit(ClCaseDb *db, const char *now, const char *action, gint64 case_id,
                         const char *detail_json, GError **error);

/* Registers the FTS5 helper functions search.c uses on this connection (at open). */
gboolean cl_casedb_search_register(ClCaseDb *db, GError **error);

/* Inside a transaction the caller opened (records.c): a new case, with its audit line; images
 * appended to a case (ids: their new ids, may be NULL), audited and indexed. */
gboolean cl_casedb_case_insert_locked(ClCaseDb *db, const char *name, const char *now,
                                      gint64 *out_id, GError **error);
gboolean cl_casedb_images_insert_locked(ClCaseDb *db, gint64 case_id, GPtrArray *images,
                                        const char *now, GArray *ids, GError **error);
