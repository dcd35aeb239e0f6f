/* casedb-private.h - what the casedb files share: the connection, the statement cache, the
 * transaction and error helpers. Not installed; include only from core/casedb. */
#pragma once

#include <libpq-fe.h>
#include <sqlite3.h>

#include "casedb/casedb.h"

/* The two engines behind casedb.h: an embedded SQLite file (the default) or a PostgreSQL server
 * (a postgresql:// location). Both are driven through one statement type, ClDbStmt, with
 * SQLite's result codes (SQLITE_ROW, SQLITE_DONE, SQLITE_BUSY, ...) as the common vocabulary: a
 * PostgreSQL failure is mapped to the SQLite code of the same meaning, its message kept. SQL is
 * written once with numbered parameters (?1, ?2, ...: $1, $2 for PostgreSQL) wherever the two
 * dialects agree; where they do not, CL_SQL(db, sqlite, postgresql) picks one. */
typedef struct _ClDbStmt ClDbStmt;

struct _ClCaseDb {
    sqlite3 *sql;        /* the SQLite connection, or NULL */
    PGconn *pg;          /* the PostgreSQL connection, or NULL */
    char *path;          /* as given (":memory:" for a private in-memory database) */
    char *shown;         /* how messages name it (a server's address without its password) */
    GThread *owner;      /* the only thread allowed to use the connection */
    gboolean read_only;  /* opened with CL_CASEDB_OPEN_READ_ONLY (or the file is read-only) */
    gboolean unwritable; /* read-only because the file, its folder or its mount is */
    char *actor;
    GHashTable *stmts; /* SQL text -> ClDbStmt*, prepared once, finalized at close */
    guint n_prepared;  /* PostgreSQL: names of prepared statements ("s1", "s2", ...) */
    guint generation;  /* PostgreSQL: connections made since the first (a lost one is made again:
                        * the statements are prepared again on the new one) */
    gint64 retry_at;   /* PostgreSQL: after a failed reconnection, no other before this time */
    char *pg_message;  /* PostgreSQL: the last failure's message (primary text) */
    char pg_state[6];  /* PostgreSQL: its SQLSTATE */
    GArray *dirty;     /* PostgreSQL: the cases the open write changed, reindexed at commit */
    char *engine;      /* cl_casedb_engine's text, made once */
};

#define CL_SQL(db, lite, postgres) ((db)->pg ? (postgres) : (lite))

/* The caller's thread must own the connection (G_DEBUG=fatal-criticals makes a slip fatal). */
#define CL_CASEDB_CHECK(db, val)                                                                   \
    g_return_val_if_fail((db) != NULL && (db)->owner == g_thread_self(), (val))

/* The cached statement for sql (a string literal: the cache keeps the pointer), reset and with
 * its bindings cleared. NULL with error when it does not compile. */
ClDbStmt *cl_casedb_stmt(ClCaseDb *db, const char *sql, GError **error);

/* Bindings (1-based, as in the SQL). Text is copied, as UTF-8 (invalid bytes replaced by
 * U+FFFD); NULL text binds NULL. A blob is copied. */
void cl_db_bind_int64(ClDbStmt *st, int idx, gint64 v);
void cl_db_bind_double(ClDbStmt *st, int idx, double v);
void cl_db_bind_text(ClDbStmt *st, int idx, const char *text);
void cl_db_bind_blob(ClDbStmt *st, int idx, const void *data, gsize n);
/* SQLITE_ROW (a row is there to read), SQLITE_DONE, or the failure's (SQLite) code. */
int cl_db_step(ClDbStmt *st);
/* Ends the statement's run (its result freed); its bindings stay until the next cl_casedb_stmt. */
void cl_db_reset(ClDbStmt *st);
/* The current row's columns (0-based). NULL reads as 0, "" or NULL as SQLite does; PostgreSQL's
 * booleans read as 1 and 0. Text and blobs stay valid until the next step or reset. */
gint64 cl_db_column_int64(ClDbStmt *st, int col);
double cl_db_column_double(ClDbStmt *st, int col);
const char *cl_db_column_text(ClDbStmt *st, int col);
gboolean cl_db_column_is_null(ClDbStmt *st, int col);
const void *cl_db_column_blob(ClDbStmt *st, int col, gsize *n);
/* Rows the statement's last run inserted, updated or deleted. */
gint64 cl_db_changes(ClDbStmt *st);

/* Sets error from the engine's last failure (rc, an SQLite code), mapping it to a ClCaseDbError
 * with a message a user can act on; `what` says what was being done ("saving the edit"). */
void cl_casedb_set_sqlite_error(ClCaseDb *db, int rc, const char *what, GError **error);

/* Steps a statement that returns no rows (or whose rows do not matter) to its end. */
gboolean cl_casedb_exec_stmt(ClCaseDb *db, ClDbStmt *st, const char *what, GError **error);
/* Steps an INSERT ... RETURNING id to its end: *out_id the new row's id. */
gboolean cl_casedb_insert_id(ClCaseDb *db, ClDbStmt *st, const char *what, gint64 *out_id,
                             GError **error);
/* Runs SQL text without parameters (several statements allowed): migrations, settings. */
gboolean cl_casedb_exec_sql(ClCaseDb *db, const char *sql, const char *what, GError **error);

/* Starts a write: takes the write lock now, so that a busy database fails here, before any work
 * (SQLite: BEGIN IMMEDIATE; PostgreSQL: BEGIN and the database's advisory write lock, which
 * every ChangeLens writer takes: writes are serialized as in SQLite, reads go on beside them).
 * Commit; rollback (ignores "no transaction": SQLite may already have rolled back). */
gboolean cl_casedb_begin(ClCaseDb *db, GError **error);
/* A read transaction: every read in it from one snapshot (end it with cl_casedb_rollback). */
gboolean cl_casedb_begin_read(ClCaseDb *db, const char *what, GError **error);
gboolean cl_casedb_commit(ClCaseDb *db, const char *what, GError **error);
void cl_casedb_rollback(ClCaseDb *db);

/* A column as a new string (NULL stays NULL). */
char *cl_casedb_column_dup(ClDbStmt *st, int col);

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

/* Registers the FTS5 helper functions search.c uses on this connection (at open; SQLite). */
gboolean cl_casedb_search_register(ClCaseDb *db, GError **error);

/* ---- the PostgreSQL engine (engine-pg.c) ---- */

/* Connects db->pg (and sets db->shown); FALSE with OPEN and libpq's reason. */
gboolean cl_casedb_pg_connect(ClCaseDb *db, const char *uri, GError **error);
/* Frees a statement (the statement cache does, at close). */
void cl_db_finalize(ClDbStmt *st);
/* The ClDbStmt of a PostgreSQL statement, prepared on the server. */
ClDbStmt *cl_casedb_pg_prepare(ClCaseDb *db, const char *sql, GError **error);
/* Runs text without parameters; FALSE (and db->pg_message) on failure; the SQLite code in *rc. */
gboolean cl_casedb_pg_exec(ClCaseDb *db, const char *sql, int *rc);
/* The search row of a case (search.c): its fields gathered and its words indexed as the SQLite
 * index's tokenizer splits them; the row goes when the case has gone. Every write reindexes the
 * cases it changed before it commits. */
gboolean cl_casedb_pg_reindex(ClCaseDb *db, gint64 case_id, GError **error);
/* Every case's search row (after the search migration). */
gboolean cl_casedb_pg_reindex_all(ClCaseDb *db, GError **error);

/* Inside a transaction the caller opened (records.c): a new case, with its audit line; images
 * appended to a case (ids: their new ids, may be NULL), audited and indexed. */
gboolean cl_casedb_case_insert_locked(ClCaseDb *db, const char *name, const char *now,
                                      gint64 *out_id, GError **error);
gboolean cl_casedb_images_insert_locked(ClCaseDb *db, gint64 case_id, GPtrArray *images,
                                        const char *now, GArray *ids, GError **error);
