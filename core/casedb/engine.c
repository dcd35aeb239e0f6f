/* engine.c - ClDbStmt (casedb-private.h): one statement type over the two engines, SQLite and
 * PostgreSQL (libpq). SQLite statements pass straight through. A PostgreSQL statement is prepared
 * once on the server (named "s1", "s2", ...), its parameters kept as text (a blob as binary) until
 * the first step runs it; the whole result then comes back at once (PGresult) and each step moves
 * to its next row. PostgreSQL's failures become SQLite's codes of the same meaning. */
#include "casedb/casedb-private.h"

#include <math.h>
#include <string.h>

struct _ClDbStmt {
    ClCaseDb *db;
    sqlite3_stmt *lite;
    /* PostgreSQL */
    char *name;       /* the prepared statement's name on the server */
    char *text;       /* its SQL ($N parameters), to prepare it again on a new connection */
    guint generation; /* the connection (ClCaseDb.generation) it is prepared on */
    int n_params;     /* the highest ?N in the SQL */
    char **values;    /* bound parameters (NULL: SQL NULL), text or binary */
    int *lengths;     /* binary parameters' lengths */
    int *formats;     /* 0 text, 1 binary */
    PGresult *res;    /* the run's result, NULL until the first step */
    int row;          /* the current row; -1 before the first */
    gint64 changes;   /* rows the run changed */
    guchar *blob;     /* the last blob column read (PQunescapeBytea), freed at the next read */
};

/* ---- PostgreSQL: errors ---------------------------------------------------------------------- */

/* SQLite's code for a PostgreSQL failure (SQLSTATE; NULL: no answer from the server). */
static int code_for_state(const char *state, gboolean connection_lost)
{
    if (connection_lost || !state || g_str_has_prefix(state, "08"))
        return SQLITE_CANTOPEN;
    if (strcmp(state, "53100") == 0 || strcmp(state, "53400") == 0) /* disk full, config limit */
        return SQLITE_FULL;
    if (strcmp(state, "25006") == 0 || strcmp(state, "42501") == 0) /* read-only, no privilege */
        return SQLITE_READONLY;
    if (strcmp(state, "55P03") == 0 || strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0)
        return SQLITE_BUSY; /* lock timeout, serialization failure, deadlock */
    if (g_str_has_prefix(state, "23") || strcmp(state, "P0001") == 0)
        return SQLITE_CONSTRAINT; /* a constraint, or one of our triggers refusing */
    if (g_str_has_prefix(state, "XX"))
        return SQLITE_CORRUPT;
    if (g_str_has_prefix(state, "57P") || g_str_has_prefix(state, "53"))
        return SQLITE_CANTOPEN; /* the server shutting down, out of connections or memory */
    return SQLITE_ERROR;
}

static char *libpq_reason(const PGconn *c);

/* Keeps the failure of res (or of the connection) in db; returns its SQLite code. */
static int keep_failure(ClCaseDb *db, const PGresult *res)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    g_free(db->pg_message);
    db->pg_message = primary ? g_strdup(primary) : libpq_reason(db->pg);
    g_strlcpy(db->pg_state, state ? state : "", sizeof db->pg_state);
    return code_for_state(state, PQstatus(db->pg) == CONNECTION_BAD);
}

static gboolean session_setup(ClCaseDb *db);

/* A connection lost (the server restarted, the network dropped) is made again before the next
 * statement, with the session's settings; the statements are prepared again as they are used.
 * What was in a transaction on the old one is gone with it (the call that met the loss failed,
 * its change not made). TRUE when the connection is usable. */
static gboolean ensure_connected(ClCaseDb *db)
{
    if (PQstatus(db->pg) == CONNECTION_OK)
        return TRUE;
    /* a server that stays away is asked again every 30 s, not at every call: the app's window
     * looks for changes every 2 s on its main thread, and a connection attempt can wait */
    if (g_get_monotonic_time() < db->retry_at)
        return FALSE;
    PQreset(db->pg);
    if (PQstatus(db->pg) != CONNECTION_OK || !session_setup(db)) {
        db->retry_at = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;
        return FALSE;
    }
    db->generation++;
    return TRUE;
}

/* Whether a failed statement should be sent again on a new connection: the connection was lost
 * and the statement was not inside a transaction (every write of casedb is: the statement is
 * then its BEGIN, or a read), so it did nothing. */
static gboolean retry_after_loss(ClCaseDb *db, gboolean was_idle)
{
    return was_idle && PQstatus(db->pg) == CONNECTION_BAD && ensure_connected(db);
}

gboolean cl_casedb_pg_exec(ClCaseDb *db, const char *sql, int *rc)
{
    ensure_connected(db);
    for (int attempt = 0;; attempt++) {
        gboolean was_idle = PQtransactionStatus(db->pg) == PQTRANS_IDLE;
        PGresult *res = PQexec(db->pg, sql);
        ExecStatusType s = PQresultStatus(res);
        gboolean ok = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
        *rc = ok ? SQLITE_OK : keep_failure(db, res);
        PQclear(res);
        if (ok || attempt > 0 || !retry_after_loss(db, was_idle))
            return ok;
    }
}

/* ---- PostgreSQL: connection ------------------------------------------------------------------ */

gboolean cl_casedb_is_server(const char *location)
{
    return location && (g_str_has_prefix(location, "postgresql://") ||
                        g_str_has_prefix(location, "postgres://"));
}

/* Notices ("relation already exists, skipping") are not for the user's terminal. */
static void quiet_notices(void *arg, const char *message)
{
    (void)arg, (void)message;
}

/* The location as messages show it: the address without a password or options. */
static char *shown_location(const char *uri)
{
    g_autoptr(GUri) u = g_uri_parse(uri, G_URI_FLAGS_HAS_PASSWORD | G_URI_FLAGS_ENCODED, NULL);
    if (!u)
        return g_strdup("the PostgreSQL database given");
    const char *host = g_uri_get_host(u), *path = g_uri_get_path(u);
    int port = g_uri_get_port(u);
    g_autofree char *db =
        path && path[0] == '/' && path[1] ? g_uri_unescape_string(path + 1, NULL) : NULL;
    g_autofree char *where =
        host && *host ? (port > 0 ? g_strdup_printf("%s:%d", host, port) : g_strdup(host))
                      : g_strdup("the local server");
    return g_strdup_printf("the PostgreSQL database %s on %s", db ? db : "(default)", where);
}

/* libpq's reason on one line, without a closing full stop (the message adds its own). */
static char *libpq_reason(const PGconn *c)
{
    if (!c)
        return g_strdup("out of memory");
    g_auto(GStrv) parts = g_strsplit_set(PQerrorMessage(c), "\n\t", -1);
    GString *out = g_string_new(NULL);
    for (guint i = 0; parts[i]; i++) {
        g_strstrip(parts[i]);
        if (!*parts[i])
            continue;
        if (out->len)
            g_string_append(out, out->str[out->len - 1] == '?' ? " " : "; ");
        g_string_append(out, parts[i]);
    }
    while (out->len && (out->str[out->len - 1] == '.' || out->str[out->len - 1] == ' '))
        g_string_truncate(out, out->len - 1);
    return g_string_free(out, FALSE);
}

gboolean cl_casedb_pg_connect(ClCaseDb *db, const char *uri, GError **error)
{
    db->shown = shown_location(uri);
    /* a server that does not answer must not freeze the app: 10 s to connect, unacknowledged
     * sends given up after 10 s and a silent peer found by keepalives within about 25 s, unless
     * the address says otherwise (its values come after these and win) */
    const char *const keys[] = { "connect_timeout",           "tcp_user_timeout",
                                 "keepalives_idle",           "keepalives_interval",
                                 "keepalives_count",          "dbname",
                                 "fallback_application_name", NULL };
    const char *const values[] = { "10", "10000", "10", "5", "3", uri, "ChangeLens", NULL };
    db->pg = PQconnectdbParams(keys, values, 1);
    if (!db->pg || PQstatus(db->pg) != CONNECTION_OK) {
        g_autofree char *why = libpq_reason(db->pg);
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_OPEN,
                    "Cannot connect to %s (%s). Check that the server runs, that the address, "
                    "user and password are right, and that this computer may connect.",
                    db->shown, why);
        return FALSE;
    }
    PQsetNoticeProcessor(db->pg, quiet_notices, NULL);
    if (!session_setup(db)) {
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_OPEN,
                    "Cannot set up the connection to %s: %s", db->shown,
                    db->pg_message ? db->pg_message : PQerrorMessage(db->pg));
        return FALSE;
    }
    return TRUE;
}

/* The session's settings (at connecting, and again on a connection made after a loss): the
 * server's text in the connection's encoding, ours UTF-8; waiting for another writer as long as
 * SQLite's busy timeout; numbers and blobs read back as we write them; read-only when opened so. */
static gboolean session_setup(ClCaseDb *db)
{
    if (PQsetClientEncoding(db->pg, "UTF8") != 0)
        return FALSE;
    g_autofree char *sql =
        g_strdup_printf("SET lock_timeout = '5s'; SET extra_float_digits = 3; "
                        "SET bytea_output = 'hex'; SET standard_conforming_strings = on%s",
                        db->read_only ? "; SET default_transaction_read_only = on" : "");
    PGresult *res = PQexec(db->pg, sql);
    gboolean ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    if (!ok)
        keep_failure(db, res);
    PQclear(res);
    return ok;
}

/* ?N -> $N outside quoted text and identifiers; the highest N in *n_params. */
static char *to_postgres(const char *sql, int *n_params)
{
    GString *out = g_string_sized_new(strlen(sql) + 16);
    char quote = 0;
    int highest = 0;
    for (const char *p = sql; *p; p++) {
        if (quote) {
            if (*p == quote)
                quote = 0;
        } else if (*p == '\'' || *p == '"') {
            quote = *p;
        } else if (*p == '?' && g_ascii_isdigit(p[1])) {
            int n = (int)g_ascii_strtoll(p + 1, NULL, 10);
            highest = MAX(highest, n);
            g_string_append_c(out, '$');
            continue;
        }
        g_string_append_c(out, *p);
    }
    *n_params = highest;
    return g_string_free(out, FALSE);
}

ClDbStmt *cl_casedb_pg_prepare(ClCaseDb *db, const char *sql, GError **error)
{
    int n_params = 0;
    g_autofree char *text = to_postgres(sql, &n_params);
    g_autofree char *name = g_strdup_printf("s%u", ++db->n_prepared);
    PGresult *res = PQprepare(db->pg, name, text, n_params, NULL);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        int rc = keep_failure(db, res);
        PQclear(res);
        cl_casedb_set_sqlite_error(db, rc, "preparing a query", error);
        return NULL;
    }
    PQclear(res);
    ClDbStmt *st = g_new0(ClDbStmt, 1);
    st->db = db;
    st->name = g_steal_pointer(&name);
    st->text = g_steal_pointer(&text);
    st->generation = db->generation;
    st->n_params = n_params;
    st->values = g_new0(char *, MAX(n_params, 1));
    st->lengths = g_new0(int, MAX(n_params, 1));
    st->formats = g_new0(int, MAX(n_params, 1));
    st->row = -1;
    return st;
}

/* ---- statements ------------------------------------------------------------------------------ */

static void clear_result(ClDbStmt *st)
{
    g_clear_pointer(&st->res, PQclear);
    g_clear_pointer(&st->blob, PQfreemem);
    st->row = -1;
}

static void clear_bindings(ClDbStmt *st)
{
    for (int i = 0; i < st->n_params; i++) {
        g_clear_pointer(&st->values[i], g_free);
        st->lengths[i] = st->formats[i] = 0;
    }
}

void cl_db_finalize(ClDbStmt *st)
{
    if (!st)
        return;
    if (st->lite) {
        sqlite3_finalize(st->lite);
    } else {
        clear_result(st);
        clear_bindings(st);
        /* the server forgets a connection's statements when it closes; one cache entry goes
         * only at close, so no DEALLOCATE is needed */
        g_free(st->values);
        g_free(st->lengths);
        g_free(st->formats);
        g_free(st->name);
        g_free(st->text);
    }
    g_free(st);
}

ClDbStmt *cl_casedb_stmt(ClCaseDb *db, const char *sql, GError **error)
{
    ClDbStmt *st = g_hash_table_lookup(db->stmts, sql);
    if (st) {
        cl_db_reset(st);
        if (st->lite)
            sqlite3_clear_bindings(st->lite);
        else
            clear_bindings(st);
        return st;
    }
    if (db->pg) {
        st = cl_casedb_pg_prepare(db, sql, error);
        if (!st)
            return NULL;
    } else {
        sqlite3_stmt *lite = NULL;
        int rc = sqlite3_prepare_v3(db->sql, sql, -1, SQLITE_PREPARE_PERSISTENT, &lite, NULL);
        if (rc != SQLITE_OK) {
            cl_casedb_set_sqlite_error(db, rc, "preparing a query", error);
            sqlite3_finalize(lite);
            return NULL;
        }
        st = g_new0(ClDbStmt, 1);
        st->db = db;
        st->lite = lite;
    }
    g_hash_table_insert(db->stmts, (gpointer)sql, st);
    return st;
}

static void bind_pg(ClDbStmt *st, int idx, char *value, int length, int format)
{
    if (idx < 1 || idx > st->n_params) {
        g_free(value);
        g_return_if_reached();
    }
    g_free(st->values[idx - 1]);
    st->values[idx - 1] = value;
    st->lengths[idx - 1] = length;
    st->formats[idx - 1] = format;
}

void cl_db_bind_int64(ClDbStmt *st, int idx, gint64 v)
{
    if (st->lite)
        sqlite3_bind_int64(st->lite, idx, v);
    else
        bind_pg(st, idx, g_strdup_printf("%" G_GINT64_FORMAT, v), 0, 0);
}

void cl_db_bind_double(ClDbStmt *st, int idx, double v)
{
    if (st->lite) {
        sqlite3_bind_double(st->lite, idx, v);
        return;
    }
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    if (isnan(v))
        bind_pg(st, idx, g_strdup("NaN"), 0, 0);
    else if (isinf(v))
        bind_pg(st, idx, g_strdup(v > 0 ? "Infinity" : "-Infinity"), 0, 0);
    else
        bind_pg(st, idx, g_strdup(g_ascii_dtostr(buf, sizeof buf, v)), 0, 0);
}

void cl_db_bind_text(ClDbStmt *st, int idx, const char *text)
{
    if (!text) {
        if (st->lite)
            sqlite3_bind_null(st->lite, idx);
        else
            bind_pg(st, idx, NULL, 0, 0);
        return;
    }
    char *valid = g_utf8_validate(text, -1, NULL) ? g_strdup(text) : g_utf8_make_valid(text, -1);
    if (st->lite)
        sqlite3_bind_text(st->lite, idx, valid, -1, g_free);
    else
        bind_pg(st, idx, valid, 0, 0);
}

void cl_db_bind_blob(ClDbStmt *st, int idx, const void *data, gsize n)
{
    g_return_if_fail(n <= G_MAXINT);
    if (st->lite)
        sqlite3_bind_blob(st->lite, idx, data, (int)n, SQLITE_TRANSIENT);
    else
        bind_pg(st, idx, g_memdup2(data, MAX(n, 1)), (int)n, 1);
}

int cl_db_step(ClDbStmt *st)
{
    if (st->lite)
        return sqlite3_step(st->lite);
    if (!st->res) {
        ClCaseDb *db = st->db;
        ensure_connected(db);
        for (int attempt = 0;; attempt++) {
            gboolean was_idle = PQtransactionStatus(db->pg) == PQTRANS_IDLE;
            if (st->generation != db->generation) { /* a new connection: prepare it there */
                PGresult *p = PQprepare(db->pg, st->name, st->text, st->n_params, NULL);
                gboolean prepared = PQresultStatus(p) == PGRES_COMMAND_OK;
                int rc = prepared ? SQLITE_OK : keep_failure(db, p);
                PQclear(p);
                if (!prepared)
                    return rc;
                st->generation = db->generation;
            }
            st->res = PQexecPrepared(db->pg, st->name, st->n_params,
                                     (const char *const *)st->values, st->lengths, st->formats, 0);
            ExecStatusType s = PQresultStatus(st->res);
            if (s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK)
                break;
            int rc = keep_failure(db, st->res);
            clear_result(st);
            if (attempt > 0 || !retry_after_loss(db, was_idle))
                return rc;
        }
        const char *n = PQcmdTuples(st->res);
        st->changes = n && *n ? g_ascii_strtoll(n, NULL, 10) : 0;
    }
    g_clear_pointer(&st->blob, PQfreemem);
    if (st->row + 1 < PQntuples(st->res)) {
        st->row++;
        return SQLITE_ROW;
    }
    st->row = PQntuples(st->res);
    return SQLITE_DONE;
}

void cl_db_reset(ClDbStmt *st)
{
    if (st->lite)
        sqlite3_reset(st->lite);
    else
        clear_result(st);
}

static const char *pg_value(ClDbStmt *st, int col)
{
    if (!st->res || st->row < 0 || st->row >= PQntuples(st->res) || col < 0 ||
        col >= PQnfields(st->res) || PQgetisnull(st->res, st->row, col))
        return NULL;
    return PQgetvalue(st->res, st->row, col);
}

gint64 cl_db_column_int64(ClDbStmt *st, int col)
{
    if (st->lite)
        return sqlite3_column_int64(st->lite, col);
    const char *v = pg_value(st, col);
    if (!v)
        return 0;
    if (strcmp(v, "t") == 0 || strcmp(v, "f") == 0) /* a boolean */
        return v[0] == 't';
    return g_ascii_strtoll(v, NULL, 10);
}

double cl_db_column_double(ClDbStmt *st, int col)
{
    if (st->lite)
        return sqlite3_column_double(st->lite, col);
    const char *v = pg_value(st, col);
    return v ? g_ascii_strtod(v, NULL) : 0.0;
}

const char *cl_db_column_text(ClDbStmt *st, int col)
{
    if (st->lite)
        return (const char *)sqlite3_column_text(st->lite, col);
    return pg_value(st, col);
}

gboolean cl_db_column_is_null(ClDbStmt *st, int col)
{
    if (st->lite)
        return sqlite3_column_type(st->lite, col) == SQLITE_NULL;
    return pg_value(st, col) == NULL;
}

const void *cl_db_column_blob(ClDbStmt *st, int col, gsize *n)
{
    *n = 0;
    if (st->lite) {
        const void *p = sqlite3_column_blob(st->lite, col);
        *n = (gsize)sqlite3_column_bytes(st->lite, col);
        return p;
    }
    const char *v = pg_value(st, col);
    if (!v)
        return NULL;
    g_clear_pointer(&st->blob, PQfreemem);
    size_t len = 0;
    st->blob = PQunescapeBytea((const unsigned char *)v, &len);
    *n = st->blob ? len : 0;
    return st->blob;
}

gint64 cl_db_changes(ClDbStmt *st)
{
    if (st->lite)
        return sqlite3_changes64(sqlite3_db_handle(st->lite));
    return st->changes;
}

/* ---- engines, sizes, databases on a server --------------------------------------------------- */

const char *cl_casedb_engine(ClCaseDb *db)
{
    CL_CASEDB_CHECK(db, NULL);
    if (!db->engine) {
        if (db->pg) {
            int v = PQserverVersion(db->pg);
            db->engine = g_strdup_printf("PostgreSQL %d.%d", v / 10000, v % 10000);
        } else {
            db->engine = g_strdup_printf("SQLite %s", sqlite3_libversion());
        }
    }
    return db->engine;
}

gint64 cl_casedb_size(ClCaseDb *db)
{
    CL_CASEDB_CHECK(db, -1);
    const char *sql = CL_SQL(db,
                             "SELECT (SELECT page_count FROM pragma_page_count) * "
                             "(SELECT page_size FROM pragma_page_size)",
                             "SELECT pg_database_size(current_database())");
    ClDbStmt *st = cl_casedb_stmt(db, sql, NULL);
    if (!st)
        return -1;
    gint64 size = cl_db_step(st) == SQLITE_ROW ? cl_db_column_int64(st, 0) : -1;
    cl_db_reset(st);
    return size;
}

/* A connection to the server of a postgresql:// address (its own database). */
static PGconn *admin_connect(const char *server, GError **error)
{
    const char *const keys[] = { "connect_timeout", "dbname", "fallback_application_name", NULL };
    const char *const values[] = { "10", server, "ChangeLens", NULL };
    PGconn *c = PQconnectdbParams(keys, values, 1);
    if (!c || PQstatus(c) != CONNECTION_OK) {
        g_autofree char *shown = shown_location(server);
        g_autofree char *why = libpq_reason(c);
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_OPEN, "Cannot connect to %s (%s)",
                    shown, why);
        PQfinish(c);
        return NULL;
    }
    PQsetNoticeProcessor(c, quiet_notices, NULL);
    return c;
}

static gboolean admin_exec(PGconn *c, const char *sql, const char *what, GError **error)
{
    PGresult *r = PQexec(c, sql);
    gboolean ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok)
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_FAILED, "%s: %s", what,
                    g_strstrip(PQerrorMessage(c)));
    PQclear(r);
    return ok;
}

/* Runs `before` + the quoted database name + `after` on the server ("CREATE DATABASE " …). */
static gboolean admin_on_database(const char *server, const char *before, const char *name,
                                  const char *after, const char *what, GError **error)
{
    PGconn *c = admin_connect(server, error);
    if (!c)
        return FALSE;
    char *quoted = PQescapeIdentifier(c, name, strlen(name));
    g_autofree char *sql = g_strconcat(before, quoted ? quoted : "\"\"", after, NULL);
    g_autofree char *message = g_strdup_printf("%s %s", what, name);
    PQfreemem(quoted);
    gboolean ok = admin_exec(c, sql, message, error);
    PQfinish(c);
    return ok;
}

gboolean cl_casedb_server_create_database(const char *server, const char *name, char **out_location,
                                          GError **error)
{
    g_return_val_if_fail(cl_casedb_is_server(server) && name && *name, FALSE);
    g_autoptr(GUri) u =
        g_uri_parse(server, G_URI_FLAGS_HAS_PASSWORD | G_URI_FLAGS_ENCODED_PATH, error);
    if (!u || !admin_on_database(server, "CREATE DATABASE ", name, "", "Cannot create the database",
                                 error))
        return FALSE;
    g_autofree char *escaped = g_uri_escape_string(name, NULL, FALSE);
    g_autofree char *path = g_strconcat("/", escaped, NULL);
    g_autoptr(GUri) made =
        g_uri_build_with_user(G_URI_FLAGS_HAS_PASSWORD | G_URI_FLAGS_ENCODED_PATH,
                              g_uri_get_scheme(u), g_uri_get_user(u), g_uri_get_password(u), NULL,
                              g_uri_get_host(u), g_uri_get_port(u), path, g_uri_get_query(u), NULL);
    *out_location = g_uri_to_string(made);
    return TRUE;
}

gboolean cl_casedb_server_drop_database(const char *server, const char *name, GError **error)
{
    g_return_val_if_fail(cl_casedb_is_server(server) && name && *name, FALSE);
    return admin_on_database(server, "DROP DATABASE IF EXISTS ", name, " WITH (FORCE)",
                             "Cannot drop the database", error);
}
