/* test-casedb.c - the case database (core/casedb): migrations step by step, every record type,
 * versions and conflicts, file checks, full-text search with hostile queries, escaping, read-only
 * and full-disk failures, a reader thread while another connection writes.
 *
 * The same tests run against both engines: SQLite files (the default), and with
 * CHANGELENS_TEST_ENGINE=postgresql databases on a PostgreSQL server the test starts on a
 * loopback port and stops (tests/fixtures/fixtures-postgresql.c; meson's `casedb-postgresql`).
 * What only one engine has is tested there alone: SQLite's WAL file, folders, page cap and
 * sync calls; PostgreSQL's server that does not answer and user without write rights. */
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utime.h>

#include "casedb/casedb.h"
#include "fixtures.h"

static char *tmpdir;        /* removed at the end */
static GPtrArray *fixtures; /* PNG + DICOM fixtures written into tmpdir/fixtures */
static const ClFixture *fx_png, *fx_ct, *fx_dx, *fx_multi;

static char *tmp_path(const char *name)
{
    return g_build_filename(tmpdir, name, NULL);
}

/* PostgreSQL: the server of this run (CHANGELENS_TEST_ENGINE=postgresql) */
static gboolean use_pg;
static ClFixturePostgres pg;

/* A new database for a test: a file in tmpdir (SQLite), or a new database on the server. */
static char *db_at(const char *name)
{
    return use_pg ? cl_fixture_postgres_new_database(&pg, name) : tmp_path(name);
}

/* How messages name a database: its path, or (PostgreSQL) its database name. */
static const char *shown_name(const char *location)
{
    return cl_casedb_is_server(location) ? strrchr(location, '/') + 1 : location;
}

/* Engine-specific SQL of the raw checks. */
#define ENGINE_SQL(lite, postgres) (use_pg ? (postgres) : (lite))
/* The tables of the database (SQLite's schema table; PostgreSQL's catalog of the schema). */
#define TABLES_WHERE(cond)                                                                         \
    ENGINE_SQL("SELECT count(*) FROM sqlite_schema WHERE TRUE" cond,                               \
               "SELECT count(*) FROM (SELECT c.relname AS name FROM pg_class c "                   \
               "  JOIN pg_namespace n ON n.oid = c.relnamespace "                                  \
               "  WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'v') "                 \
               "  AND c.relname <> 'changelens_schema') t WHERE TRUE" cond)

/* ---- raw SQLite on the same file: what the API does not show --------------------------------- */

static sqlite3 *raw_open(const char *path)
{
    sqlite3 *s = NULL;
    g_assert_cmpint(sqlite3_open_v2(path, &s, SQLITE_OPEN_READWRITE, NULL), ==, SQLITE_OK);
    sqlite3_busy_timeout(s, 5000);
    return s;
}

static PGconn *raw_connect(const char *uri)
{
    PGconn *c = PQconnectdb(uri);
    g_assert_cmpint(PQstatus(c), ==, CONNECTION_OK);
    return c;
}

/* Runs sql; returns SQLite's result code (SQLITE_OK or SQLITE_ERROR for a PostgreSQL database;
 * the message goes to *msg when asked). */
static int raw_exec(const char *path, const char *sql, char **msg)
{
    if (cl_casedb_is_server(path)) {
        PGconn *c = raw_connect(path);
        PGresult *r = PQexec(c, sql);
        gboolean ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
        if (msg)
            *msg = ok ? NULL : g_strdup(PQerrorMessage(c));
        PQclear(r);
        PQfinish(c);
        return ok ? SQLITE_OK : SQLITE_ERROR;
    }
    sqlite3 *s = raw_open(path);
    char *err = NULL;
    int rc = sqlite3_exec(s, sql, NULL, NULL, &err);
    if (msg)
        *msg = g_strdup(err);
    sqlite3_free(err), sqlite3_close(s);
    return rc;
}

/* The first column of each row of sql, as text. */
static GPtrArray *raw_strings(const char *path, const char *sql)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    if (cl_casedb_is_server(path)) {
        PGconn *c = raw_connect(path);
        PGresult *r = PQexec(c, sql);
        g_assert_cmpint(PQresultStatus(r), ==, PGRES_TUPLES_OK);
        for (int i = 0; i < PQntuples(r); i++)
            g_ptr_array_add(out, PQgetisnull(r, i, 0) ? NULL : g_strdup(PQgetvalue(r, i, 0)));
        PQclear(r);
        PQfinish(c);
        return out;
    }
    sqlite3 *s = raw_open(path);
    sqlite3_stmt *st = NULL;
    g_assert_cmpint(sqlite3_prepare_v2(s, sql, -1, &st, NULL), ==, SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW)
        g_ptr_array_add(out, g_strdup((const char *)sqlite3_column_text(st, 0)));
    sqlite3_finalize(st);
    sqlite3_close(s);
    return out;
}

static gint64 raw_int(const char *path, const char *sql)
{
    if (cl_casedb_is_server(path)) {
        g_autoptr(GPtrArray) rows = raw_strings(path, sql);
        g_assert_cmpuint(rows->len, >=, 1);
        return g_ascii_strtoll(g_ptr_array_index(rows, 0), NULL, 10);
    }
    sqlite3 *s = raw_open(path);
    sqlite3_stmt *st = NULL;
    g_assert_cmpint(sqlite3_prepare_v2(s, sql, -1, &st, NULL), ==, SQLITE_OK);
    g_assert_cmpint(sqlite3_step(st), ==, SQLITE_ROW);
    gint64 v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(s);
    return v;
}

/* ---- helpers --------------------------------------------------------------------------------- */

static ClCaseImage *image_from(const char *path, guint frame)
{
    ClCaseImage *img = g_new0(ClCaseImage, 1);
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_case_image_from_file(path, frame, img, &err));
    g_assert_no_error(err);
    return img;
}

static GPtrArray *images_new(void)
{
    return g_ptr_array_new_with_free_func((GDestroyNotify)cl_case_image_free);
}

static GArray *add_images(ClCaseDb *db, gint64 case_id, GPtrArray *imgs)
{
    GArray *ids = g_array_new(FALSE, FALSE, sizeof(gint64));
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_casedb_images_add(db, case_id, imgs, ids, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(ids->len, ==, imgs->len);
    return ids;
}

static gint64 new_case(ClCaseDb *db, const char *name)
{
    gint64 id = 0;
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_casedb_case_new(db, name, &id, &err));
    g_assert_no_error(err);
    g_assert_cmpint(id, >, 0);
    return id;
}

static gint64 edit(ClCaseDb *db, gint64 case_id, const char *text, gint64 base)
{
    gint64 v = 0;
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_casedb_description_edit(db, case_id, text, NULL, base, &v, &err));
    g_assert_no_error(err);
    return v;
}

static ClCase *get(ClCaseDb *db, gint64 case_id, ClCaseGetFlags flags)
{
    g_autoptr(GError) err = NULL;
    ClCase *c = cl_casedb_get_case(db, case_id, flags, &err);
    g_assert_no_error(err);
    g_assert_nonnull(c);
    return c;
}

static GPtrArray *search(ClCaseDb *db, const char *q)
{
    g_autoptr(GError) err = NULL;
    GPtrArray *hits = cl_casedb_search(db, q, 50, &err);
    g_assert_no_error(err);
    g_assert_nonnull(hits);
    return hits;
}

#define HIT(hits, i) ((ClCaseSearchHit *)g_ptr_array_index((hits), (i)))

/* The hit for case_id in a search for q, or NULL. */
static const ClCaseSearchHit *find_hit(GPtrArray *hits, gint64 case_id)
{
    for (guint i = 0; i < hits->len; i++) {
        const ClCaseSearchHit *h = g_ptr_array_index(hits, i);
        if (h->case_id == case_id)
            return h;
    }
    return NULL;
}

static gboolean finds(ClCaseDb *db, const char *q, gint64 case_id)
{
    g_autoptr(GPtrArray) hits = search(db, q);
    return find_hit(hits, case_id) != NULL;
}

static ClCaseDb *open_ok(const char *path)
{
    g_autoptr(GError) err = NULL;
    ClCaseDb *db = cl_casedb_open(path, CL_CASEDB_OPEN_DEFAULT, &err);
    g_assert_no_error(err);
    g_assert_nonnull(db);
    cl_casedb_set_actor(db, "dr.test");
    return db;
}

static void assert_integrity(ClCaseDb *db)
{
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_casedb_check_integrity(db, &err));
    g_assert_no_error(err);
}

/* ---- migrations ------------------------------------------------------------------------------ */

static void test_open_fresh(void)
{
    int schema = cl_casedb_schema_version();
    g_assert_cmpint(schema, >=, 2);
    if (use_pg) {
        /* an empty database gets the schema; a missing one is an error naming it */
        g_autofree char *uri = db_at("fresh");
        g_autoptr(ClCaseDb) db = open_ok(uri);
        g_assert_cmpint(cl_casedb_user_version(db), ==, schema);
        g_assert_cmpstr(cl_casedb_path(db), ==, uri);
        g_assert_cmpint(raw_int(uri, "SELECT version FROM changelens_schema"), ==, schema);
        g_autoptr(GError) err = NULL;
        g_autofree char *missing = cl_fixture_postgres_uri(&pg, "nowhere");
        for (int flags = 0; flags < 2; flags++) {
            g_assert_null(cl_casedb_open(missing, flags ? CL_CASEDB_OPEN_NO_CREATE : 0, &err));
            g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_OPEN);
            g_assert_nonnull(strstr(err->message, "nowhere"));
            g_clear_error(&err);
        }
        return;
    }
    g_autoptr(ClCaseDb) mem = open_ok(":memory:");
    g_assert_cmpint(cl_casedb_user_version(mem), ==, schema);
    g_assert_cmpstr(cl_casedb_path(mem), ==, ":memory:");
    g_assert_cmpstr(cl_casedb_get_actor(mem), ==, "dr.test");

    /* missing parent folders are made (0700); the file is in WAL mode */
    g_autofree char *path = tmp_path("fresh/a/b/cases.db");
    g_autoptr(ClCaseDb) db = open_ok(path);
    g_assert_cmpint(cl_casedb_user_version(db), ==, schema);
    g_autofree char *dir = g_path_get_dirname(path);
    GStatBuf sb;
    g_assert_cmpint(g_stat(dir, &sb), ==, 0);
    g_assert_cmpint(sb.st_mode & 0777, ==, 0700);
    sqlite3 *raw = raw_open(path);
    sqlite3_stmt *st = NULL;
    sqlite3_prepare_v2(raw, "PRAGMA journal_mode", -1, &st, NULL);
    g_assert_cmpint(sqlite3_step(st), ==, SQLITE_ROW);
    g_assert_cmpstr((const char *)sqlite3_column_text(st, 0), ==, "wal");
    sqlite3_finalize(st);
    sqlite3_close(raw);

    /* NO_CREATE on a missing file */
    g_autoptr(GError) err = NULL;
    g_autofree char *missing = tmp_path("nowhere/cases.db");
    g_assert_null(cl_casedb_open(missing, CL_CASEDB_OPEN_NO_CREATE, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_OPEN);
    g_assert_nonnull(strstr(err->message, missing));
    g_assert_false(g_file_test(missing, G_FILE_TEST_EXISTS));

    /* the default path */
    g_setenv("CHANGELENS_DB", "/somewhere/else.db", TRUE);
    g_autofree char *env_path = cl_casedb_default_path();
    g_assert_cmpstr(env_path, ==, "/somewhere/else.db");
    g_setenv("CHANGELENS_DB", "", TRUE);
    g_autofree char *def = cl_casedb_default_path();
    g_autofree char *want = g_build_filename(g_get_user_data_dir(), "changelens", "cases.db", NULL);
    g_assert_cmpstr(def, ==, want);
    g_unsetenv("CHANGELENS_DB");
}

static void test_migrate_steps(void)
{
    g_autofree char *path = db_at("steps.db");
    g_autoptr(GError) err = NULL;
    ClCaseDb *db = cl_casedb_open_at_version(path, 0, &err);
    g_assert_no_error(err);
    g_assert_cmpint(cl_casedb_user_version(db), ==, 0);
    g_assert_cmpint(raw_int(path, TABLES_WHERE("")), ==, 0);

    g_assert_true(cl_casedb_migrate(db, 1, &err));
    g_assert_no_error(err);
    g_assert_cmpint(cl_casedb_user_version(db), ==, 1);
    g_assert_cmpint(raw_int(path, TABLES_WHERE(" AND name = 'cases'")), ==, 1);
    g_assert_cmpint(raw_int(path, TABLES_WHERE(" AND name = 'search'")), ==, 0);
    /* data written at version 1, by hand */
    g_assert_cmpint(
        raw_exec(
            path,
            "INSERT INTO cases VALUES (41, 'Legacy wrist series', 't0', 't0');"
            "INSERT INTO descriptions VALUES (7, 41, NULL, 't0');"
            "INSERT INTO description_versions VALUES "
            "  (70, 7, 1, 'old scaphoid wording', 'draft', 'a', NULL, 't0'),"
            "  (71, 7, 2, 'healed scaphoid fracture', 'accepted', 'b', 'b', 't1');"
            "INSERT INTO images (id, case_id, position, path, sha256, file_size, file_mtime, format, "
            "  width, height, n_frames, metadata, added_at) "
            "  VALUES (5, 41, 0, '/x.dcm', '', 1, 1, 'DICOM', 1, 1, 1, "
            "          '{\"StationName\":\"Radiograph7\"}', 't0');"
            "INSERT INTO notes VALUES (3, 41, NULL, 'a', 'compare with contralateral', 't0');",
            NULL),
        ==, SQLITE_OK);

    int schema = cl_casedb_schema_version();
    for (int v = 2; v <= schema; v++) {
        g_assert_true(cl_casedb_migrate(db, v, &err));
        g_assert_no_error(err);
        g_assert_cmpint(cl_casedb_user_version(db), ==, v);
    }
    /* migrating again, or beyond what we know */
    g_assert_true(cl_casedb_migrate(db, schema, &err));
    g_assert_false(cl_casedb_migrate(db, schema + 1, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID);
    g_clear_error(&err);

    /* the version-1 data is searchable: name, current description (not the older version),
     * note and metadata */
    g_assert_true(finds(db, "wrist", 41));
    g_assert_true(finds(db, "healed", 41));
    g_assert_false(finds(db, "wording", 41));
    g_assert_true(finds(db, "contralateral", 41));
    g_assert_true(finds(db, "Radiograph7", 41));
    g_autoptr(ClCase) c = get(db, 41, CL_CASE_GET_DEFAULT);
    g_assert_cmpstr(cl_case_current_description(c)->text, ==, "healed scaphoid fracture");
    g_assert_cmpint(c->summary.status, ==, CL_DESC_ACCEPTED);
    assert_integrity(db);
    cl_casedb_close(db);

    /* a plain open of the up-to-date file migrates nothing and keeps everything */
    g_autoptr(ClCaseDb) again = open_ok(path);
    g_assert_true(finds(again, "scaphoid", 41));
}

static void test_too_new(void)
{
    g_autofree char *path = db_at("too-new.db");
    cl_casedb_close(open_ok(path));
    int schema = cl_casedb_schema_version();
    g_autofree char *sql = g_strdup_printf(
        ENGINE_SQL("PRAGMA user_version = %d", "UPDATE changelens_schema SET version = %d"),
        schema + 5);
    g_assert_cmpint(raw_exec(path, sql, NULL), ==, SQLITE_OK);
    g_autofree char *newer = g_strdup_printf("%d", schema + 5);
    g_autofree char *ours = g_strdup_printf("%d", schema);
    for (int ro = 0; ro < 2; ro++) {
        g_autoptr(GError) err = NULL;
        g_assert_null(cl_casedb_open(path, ro ? CL_CASEDB_OPEN_READ_ONLY : 0, &err));
        g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_TOO_NEW);
        g_assert_nonnull(strstr(err->message, newer));
        g_assert_nonnull(strstr(err->message, ours));
        g_assert_nonnull(strstr(err->message, "newer"));
    }
    /* refused, not touched */
    g_assert_cmpint(
        raw_int(path, ENGINE_SQL("PRAGMA user_version", "SELECT version FROM changelens_schema")),
        ==, schema + 5);
}

/* PostgreSQL: another program's tables in the database's schema; an older schema read-only. */
static void not_a_database_pg(void)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *other = db_at("other");
    g_assert_cmpint(raw_exec(other, "CREATE TABLE bookmarks (url TEXT)", NULL), ==, SQLITE_OK);
    g_assert_null(cl_casedb_open(other, CL_CASEDB_OPEN_DEFAULT, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_CORRUPT);
    g_assert_nonnull(strstr(err->message, "another program"));
    g_clear_error(&err);
    g_assert_cmpint(raw_int(other, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"),
                    ==, 1); /* left as it was */
    g_autofree char *old = db_at("old");
    cl_casedb_close(cl_casedb_open_at_version(old, 1, &err));
    g_assert_no_error(err);
    g_assert_null(cl_casedb_open(old, CL_CASEDB_OPEN_READ_ONLY, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_READ_ONLY);
    g_assert_cmpint(raw_int(old, "SELECT version FROM changelens_schema"), ==, 1);
}

static void test_not_a_database(void)
{
    if (use_pg) {
        not_a_database_pg();
        return;
    }
    g_autoptr(GError) err = NULL;
    g_autofree char *text = tmp_path("notes.txt");
    g_autofree char *body = g_strnfill(4096, 'x');
    g_assert_true(g_file_set_contents(text, body, -1, NULL));
    g_assert_null(cl_casedb_open(text, CL_CASEDB_OPEN_DEFAULT, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_CORRUPT);
    g_assert_nonnull(strstr(err->message, text));
    g_clear_error(&err);
    g_autofree char *after = NULL;
    g_assert_true(g_file_get_contents(text, &after, NULL, NULL));
    g_assert_cmpstr(after, ==, body); /* left as it was */

    /* another program's SQLite file is not taken over */
    g_autofree char *other = tmp_path("other.db");
    sqlite3 *s = NULL;
    g_assert_cmpint(sqlite3_open(other, &s), ==, SQLITE_OK);
    g_assert_cmpint(sqlite3_exec(s, "CREATE TABLE bookmarks (url TEXT)", NULL, NULL, NULL), ==,
                    SQLITE_OK);
    sqlite3_close(s);
    g_assert_null(cl_casedb_open(other, CL_CASEDB_OPEN_DEFAULT, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_CORRUPT);
    g_clear_error(&err);

    /* read-only cannot migrate an older schema */
    g_autofree char *old = tmp_path("old.db");
    cl_casedb_close(cl_casedb_open_at_version(old, 1, &err));
    g_assert_no_error(err);
    g_assert_null(cl_casedb_open(old, CL_CASEDB_OPEN_READ_ONLY, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_READ_ONLY);
    g_assert_cmpint(raw_int(old, "PRAGMA user_version"), ==, 1);
}

/* ---- records --------------------------------------------------------------------------------- */

static void test_records(void)
{
    g_autofree char *path = db_at("records.db");
    ClCaseDb *db = open_ok(path);
    g_autoptr(GError) err = NULL;
    gint64 id = new_case(db, "Chest follow-up");
    g_usleep(2000); /* so that updated_at moves past created_at */

    /* images from files: PNG, DICOM CT, frame 3 of a 5-frame DICOM */
    g_autoptr(GPtrArray) imgs = images_new();
    g_ptr_array_add(imgs, image_from(fx_png->path, 0));
    g_ptr_array_add(imgs, image_from(fx_ct->path, 0));
    g_ptr_array_add(imgs, image_from(fx_multi->path, 3));
    ClCaseImage *ct = g_ptr_array_index(imgs, 1);
    g_assert_true(g_path_is_absolute(ct->path));
    g_assert_cmpstr(ct->format, ==, "DICOM");
    g_assert_cmpstr(ct->modality, ==, fx_ct->modality);
    g_assert_cmpuint(ct->width, ==, fx_ct->width);
    g_assert_cmpuint(ct->height, ==, fx_ct->height);
    g_autofree char *bytes = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(fx_ct->path, &bytes, &len, NULL));
    g_autofree char *sha = g_compute_checksum_for_data(G_CHECKSUM_SHA256, (guchar *)bytes, len);
    g_assert_cmpstr(ct->sha256, ==, sha);
    g_assert_cmpint(ct->file_size, ==, (gint64)len);
    g_autoptr(JsonNode) meta = json_from_string(ct->metadata_json, &err);
    g_assert_no_error(err);
    g_assert_cmpstr(json_object_get_string_member(json_node_get_object(meta), "PatientName"), ==,
                    "Fixture^Patient");
    g_assert_cmpuint(((ClCaseImage *)g_ptr_array_index(imgs, 2))->n_frames, ==, fx_multi->frames);
    g_autoptr(GArray) ids = add_images(db, id, imgs);

    /* a run with heatmaps; odd float values must come back bit for bit */
    ClCaseRun run = { .model_name = "random-init tiny",
                      .model_sha256 = "ab12",
                      .model_config_json = "{\"preset\":\"tiny\"}",
                      .device = "cpu (2 threads)",
                      .settings_json = "{\"beam\":1}",
                      .seed = G_MAXUINT64 - 7,
                      .preprocess_ms = 1.5,
                      .encode_ms = 20.25,
                      .prefill_ms = 3,
                      .decode_ms = 40,
                      .total_ms = 64.75,
                      .n_tokens = 33 };
    g_autoptr(GPtrArray) hms = g_ptr_array_new_with_free_func((GDestroyNotify)cl_case_heatmap_free);
    for (guint i = 0; i < 2; i++) {
        ClCaseHeatmap *h = g_new0(ClCaseHeatmap, 1);
        h->image_id = g_array_index(ids, gint64, i);
        h->layer = i ? 3 : -1;
        h->kind = g_strdup(i ? "update_norm" : "delta");
        h->input_size = 160;
        h->grid_w = 7 + i, h->grid_h = 5;
        h->data = g_new(float, h->grid_w * h->grid_h);
        for (guint k = 0; k < h->grid_w * h->grid_h; k++)
            h->data[k] = (float)g_test_rand_double_range(-1e30, 1e30);
        h->data[0] = -0.0f, h->data[1] = 1e-45f, h->data[2] = G_MAXFLOAT;
        g_ptr_array_add(hms, h);
    }
    gint64 run_id = 0, v1 = 0;
    g_assert_true(cl_casedb_run_record(db, id, &run, "Small left apical pneumothorax.", hms,
                                       &run_id, &v1, &err));
    g_assert_no_error(err);

    /* edits: versions 2 and 3, then a stale edit is refused and changes nothing */
    gint64 v2 = edit(db, id, "Small left apical pneumothorax, unchanged.", v1);
    gint64 v3 = 0;
    g_assert_true(
        cl_casedb_description_edit(db, id, "Resolved pneumothorax.", "dr.other", v2, &v3, &err));
    g_assert_no_error(err);
    gint64 stale = 0;
    g_assert_false(cl_casedb_description_edit(db, id, "my stale text", NULL, v2, &stale, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_CONFLICT);
    g_assert_nonnull(strstr(err->message, "dr.other"));
    g_clear_error(&err);
    gint64 v4 = 0, v5 = 0;
    g_assert_true(cl_casedb_description_set_status(db, id, CL_DESC_ACCEPTED, NULL, 0, &v4, &err));
    g_assert_true(
        cl_casedb_description_set_status(db, id, CL_DESC_REJECTED, "dr.boss", 0, &v5, &err));
    g_assert_no_error(err);
    gint64 note1 = 0, note2 = 0, key = 0;
    g_assert_true(cl_casedb_note_add(db, id, 0, "Compare with the outside study.", &note1, &err));
    g_assert_true(cl_casedb_note_add(db, id, g_array_index(ids, gint64, 1), "Apex", &note2, &err));
    g_assert_true(
        cl_casedb_key_image_add(db, id, g_array_index(ids, gint64, 2), "best view", &key, &err));
    g_assert_no_error(err);

    g_autoptr(ClCase) c = get(db, id, CL_CASE_HEATMAP_DATA);
    g_assert_cmpstr(c->summary.name, ==, "Chest follow-up");
    g_assert_cmpuint(c->summary.n_images, ==, 3);
    g_assert_true(c->summary.has_description);
    g_assert_cmpint(c->summary.status, ==, CL_DESC_REJECTED);
    g_assert_nonnull(strstr(c->summary.modalities, "PNG"));
    g_assert_nonnull(strstr(c->summary.modalities, fx_ct->modality));
    g_assert_cmpstr(c->summary.created_at, <, c->summary.updated_at);
    g_assert_true(g_str_has_suffix(c->summary.created_at, "Z"));
    g_assert_cmpuint(strlen(c->summary.created_at), ==, strlen("2026-11-21T21:30:00.123Z"));
    for (guint i = 0; i < 3; i++) {
        const ClCaseImage *got = g_ptr_array_index(c->images, i);
        const ClCaseImage *want = g_ptr_array_index(imgs, i);
        g_assert_cmpint(got->id, ==, g_array_index(ids, gint64, i));
        g_assert_cmpuint(got->position, ==, i);
        g_assert_cmpstr(got->path, ==, want->path);
        g_assert_cmpuint(got->frame, ==, want->frame);
        g_assert_cmpstr(got->sha256, ==, want->sha256);
        g_assert_cmpstr(got->metadata_json, ==, want->metadata_json);
        g_assert_cmpstr(got->modality, ==, want->modality);
        g_assert_cmpint(got->file_state, ==, CL_FILE_UNCHECKED);
    }
    g_assert_true(cl_case_has_dicom(c));
    const ClCaseRun *r = cl_case_latest_run(c);
    g_assert_cmpint(r->id, ==, run_id);
    g_assert_cmpuint(r->seed, ==, G_MAXUINT64 - 7);
    g_assert_cmpstr(r->settings_json, ==, run.settings_json);
    g_assert_cmpfloat(r->total_ms, ==, 64.75);
    g_assert_cmpuint(r->n_tokens, ==, 33);
    g_assert_cmpuint(c->heatmaps->len, ==, 2);
    for (guint i = 0; i < 2; i++) {
        const ClCaseHeatmap *want = g_ptr_array_index(hms, i);
        const ClCaseHeatmap *got = cl_case_find_heatmap(c, run_id, want->image_id, want->layer);
        g_assert_nonnull(got);
        g_assert_cmpstr(got->kind, ==, want->kind);
        g_assert_cmpuint(got->grid_w, ==, want->grid_w);
        g_assert_cmpmem(got->data, got->grid_w * got->grid_h * sizeof(float), want->data,
                        want->grid_w * want->grid_h * sizeof(float));
    }
    /* the versions: 1..5, none overwritten */
    const gint64 vids[] = { v1, v2, v3, v4, v5 };
    const char *texts[] = { "Small left apical pneumothorax.",
                            "Small left apical pneumothorax, unchanged.", "Resolved pneumothorax.",
                            "Resolved pneumothorax.", "Resolved pneumothorax." };
    const char *authors[] = { "model", "dr.test", "dr.other", "dr.test", "dr.boss" };
    const ClDescStatus statuses[] = { CL_DESC_DRAFT, CL_DESC_DRAFT, CL_DESC_DRAFT, CL_DESC_ACCEPTED,
                                      CL_DESC_REJECTED };
    g_assert_cmpuint(c->descriptions->len, ==, 5);
    for (guint i = 0; i < 5; i++) {
        const ClCaseDescVersion *v = g_ptr_array_index(c->descriptions, i);
        g_assert_cmpint(v->id, ==, vids[i]);
        g_assert_cmpuint(v->version, ==, i + 1);
        g_assert_cmpstr(v->text, ==, texts[i]);
        g_assert_cmpstr(v->author, ==, authors[i]);
        g_assert_cmpint(v->status, ==, statuses[i]);
        g_assert_cmpint(v->run_id, ==, run_id);
    }
    g_assert_cmpint(cl_case_current_description(c)->id, ==, v5);
    g_assert_cmpint(cl_case_generated_version(c, cl_case_current_description(c))->id, ==, v1);
    g_assert_cmpuint(c->notes->len, ==, 2);
    g_assert_cmpstr(((ClCaseNote *)g_ptr_array_index(c->notes, 1))->text, ==, "Apex");
    g_assert_cmpint(((ClCaseNote *)g_ptr_array_index(c->notes, 0))->image_id, ==, 0);
    g_assert_cmpuint(c->key_images->len, ==, 1);
    const ClCaseKeyImage *k0 = g_ptr_array_index(c->key_images, 0);
    g_assert_cmpstr(k0->label, ==, "best view");
    const char *actions[] = { "case.new",         "image.add",          "image.add",
                              "image.add",        "run.record",         "description.edit",
                              "description.edit", "description.accept", "description.reject",
                              "note.add",         "note.add",           "key_image.add" };
    g_assert_cmpuint(c->audit->len, ==, G_N_ELEMENTS(actions));
    for (guint i = 0; i < G_N_ELEMENTS(actions); i++) {
        const ClCaseAudit *a = g_ptr_array_index(c->audit, i);
        g_assert_cmpstr(a->action, ==, actions[i]);
        g_assert_cmpstr(a->actor, ==, "dr.test");
        g_assert_cmpint(a->case_id, ==, id);
        g_autoptr(JsonNode) d = json_from_string(a->detail_json, &err);
        g_assert_no_error(err);
        g_assert_true(JSON_NODE_HOLDS_OBJECT(d));
    }
    /* without CL_CASE_HEATMAP_DATA the grids stay out */
    g_autoptr(ClCase) light = get(db, id, CL_CASE_GET_DEFAULT);
    g_assert_null(((ClCaseHeatmap *)g_ptr_array_index(light->heatmaps, 0))->data);

    /* versions cannot be changed or removed behind the API's back */
    g_autofree char *msg = NULL;
    g_assert_cmpint(raw_exec(path, "UPDATE description_versions SET text = 'x'", &msg), !=,
                    SQLITE_OK);
    g_assert_nonnull(strstr(msg, "never changed"));
    g_assert_cmpint(raw_exec(path, "DELETE FROM description_versions", NULL), !=, SQLITE_OK);

    /* bad arguments: nothing written */
    gint64 other = new_case(db, "Other");
    gint64 image0 = g_array_index(ids, gint64, 0);
    g_assert_false(cl_casedb_key_image_add(db, other, image0, "", NULL, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID);
    g_clear_error(&err);
    g_assert_false(cl_casedb_note_add(db, 999999, 0, "x", NULL, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_NOT_FOUND);
    g_clear_error(&err);
    g_assert_false(cl_casedb_case_new(db, "  ", NULL, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID);
    g_clear_error(&err);
    g_assert_false(
        cl_casedb_description_set_status(db, other, CL_DESC_ACCEPTED, NULL, 0, NULL, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID);
    g_clear_error(&err);
    /* a run whose second heatmap names another case's image: the run, its description and the
     * first heatmap are all rolled back */
    ClCaseHeatmap *bad = g_ptr_array_index(hms, 1);
    gint64 saved = bad->image_id;
    bad->image_id = 424242;
    g_assert_false(cl_casedb_run_record(db, id, &run, "rolled back", hms, NULL, NULL, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID);
    g_clear_error(&err);
    bad->image_id = saved;
    g_autoptr(ClCase) same = get(db, id, CL_CASE_GET_DEFAULT);
    g_assert_cmpuint(same->runs->len, ==, 1);
    g_assert_cmpuint(same->descriptions->len, ==, 5);
    g_assert_cmpuint(same->heatmaps->len, ==, 2);
    g_assert_cmpuint(same->audit->len, ==, G_N_ELEMENTS(actions));
    g_assert_false(cl_casedb_get_case(db, 999999, 0, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_NOT_FOUND);
    g_clear_error(&err);

    /* list: most recently updated first */
    g_usleep(2000);
    g_assert_true(cl_casedb_case_rename(db, id, "Chest follow-up (renamed)", &err));
    g_autoptr(GPtrArray) list = cl_casedb_list(db, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(list->len, ==, 2);
    g_assert_cmpint(((ClCaseSummary *)g_ptr_array_index(list, 0))->id, ==, id);
    /* the list gathers modalities its own way: same answer as the case's */
    g_assert_cmpstr(((ClCaseSummary *)g_ptr_array_index(list, 0))->modalities, ==,
                    c->summary.modalities);
    g_assert_nonnull(strchr(c->summary.modalities, ','));
    g_assert_cmpstr(((ClCaseSummary *)g_ptr_array_index(list, 1))->modalities, ==, "");

    /* delete: everything in the case goes, the audit log stays */
    assert_integrity(db);
    g_assert_true(cl_casedb_case_delete(db, id, &err));
    g_assert_no_error(err);
    g_assert_null(cl_casedb_get_case(db, id, 0, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_NOT_FOUND);
    g_clear_error(&err);
    const char *tables[] = { "images",   "runs",  "descriptions", "description_versions",
                             "heatmaps", "notes", "key_images" };
    for (guint i = 0; i < G_N_ELEMENTS(tables); i++) {
        g_autofree char *q = g_strdup_printf("SELECT count(*) FROM %s", tables[i]);
        g_assert_cmpint(raw_int(path, q), ==, 0);
    }
    g_autofree char *q =
        g_strdup_printf("SELECT count(*) FROM audit WHERE case_id = %" G_GINT64_FORMAT
                        " AND action = 'case.delete' "
                        "AND detail LIKE '%%renamed%%'",
                        id);
    g_assert_cmpint(raw_int(path, q), ==, 1);
    g_autofree char *q2 =
        g_strdup_printf("SELECT count(*) FROM audit WHERE case_id = %" G_GINT64_FORMAT, id);
    g_assert_cmpint(raw_int(path, q2), ==, G_N_ELEMENTS(actions) + 2);
    g_assert_false(finds(db, "pneumothorax", id));
    g_assert_false(finds(db, "Chest", id));
    assert_integrity(db);
    cl_casedb_close(db);
}

static void test_image_errors(void)
{
    ClCaseImage img = { 0 };
    g_autoptr(GError) err = NULL;
    g_autofree char *missing = tmp_path("no-such.png");
    g_assert_false(cl_case_image_from_file(missing, 0, &img, &err));
    g_assert_true(err->domain == CL_IMAGE_ERROR);
    g_clear_error(&err);
    g_autofree char *text = tmp_path("plain.txt");
    g_assert_true(g_file_set_contents(text, "not an image at all", -1, NULL));
    g_assert_false(cl_case_image_from_file(text, 0, &img, &err));
    g_assert_error(err, CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNKNOWN_FORMAT);
    g_clear_error(&err);
    g_assert_false(cl_case_image_from_file(fx_multi->path, fx_multi->frames, &img, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID);
    g_clear_error(&err);
    /* the last frame exists; a relative path comes back absolute */
    g_autofree char *cwd = g_get_current_dir();
    g_assert_cmpint(g_chdir(tmpdir), ==, 0);
    g_autofree char *base = g_path_get_basename(fx_png->path);
    g_autofree char *rel = g_build_filename("fixtures", base, NULL);
    g_assert_true(cl_case_image_from_file(rel, 0, &img, &err));
    g_assert_no_error(err);
    g_assert_true(g_path_is_absolute(img.path));
    g_autofree char *tail = g_build_filename("", "fixtures", base, NULL);
    g_assert_true(g_str_has_suffix(img.path, tail));
    cl_case_image_clear(&img);
    g_assert_cmpint(g_chdir(cwd), ==, 0);
    g_assert_true(cl_case_image_from_file(fx_multi->path, fx_multi->frames - 1, &img, &err));
    g_assert_cmpuint(img.frame, ==, fx_multi->frames - 1);
    cl_case_image_clear(&img);
}

/* ---- files ----------------------------------------------------------------------------------- */

static void test_files(void)
{
    g_autofree char *dir = tmp_path("files");
    g_assert_cmpint(g_mkdir(dir, 0700), ==, 0);
    g_autofree char *png = NULL;
    gsize len;
    g_assert_true(g_file_get_contents(fx_png->path, &png, &len, NULL));
    const char *names[] = { "moved.png", "modified.png", "same.png", "touched.png", "dir.png" };
    g_autoptr(GPtrArray) imgs = images_new();
    g_autoptr(GPtrArray) paths = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
        char *p = g_build_filename(dir, names[i], NULL);
        g_assert_true(g_file_set_contents(p, png, (gssize)len, NULL));
        g_ptr_array_add(paths, p);
        g_ptr_array_add(imgs, image_from(p, 0));
    }
    g_autofree char *location = db_at("files.db");
    g_autoptr(ClCaseDb) db = open_ok(location);
    gint64 id = new_case(db, "files");
    g_autoptr(GArray) ids = add_images(db, id, imgs);

    g_autofree char *moved_to = g_strconcat(g_ptr_array_index(paths, 0), ".elsewhere", NULL);
    g_assert_cmpint(g_rename(g_ptr_array_index(paths, 0), moved_to), ==, 0);
    g_autofree char *longer = g_malloc(len + 5); /* png is binary: its bytes, then 5 more */
    memcpy(longer, png, len);
    memcpy(longer + len, "extra", 5);
    g_assert_true(g_file_set_contents(g_ptr_array_index(paths, 1), longer, (gssize)len + 5, NULL));
    struct utimbuf times = { .actime = 1000000000, .modtime = 1000000000 };
    g_assert_cmpint(g_utime(g_ptr_array_index(paths, 3), &times), ==, 0);
    g_assert_cmpint(g_unlink(g_ptr_array_index(paths, 4)), ==, 0);
    g_assert_cmpint(g_mkdir(g_ptr_array_index(paths, 4), 0700), ==, 0);

    const ClFileState want[] = { CL_FILE_MISSING, CL_FILE_CHANGED, CL_FILE_OK, CL_FILE_OK,
                                 CL_FILE_UNREADABLE };
    g_autoptr(ClCase) c = get(db, id, CL_CASE_CHECK_FILES);
    for (guint i = 0; i < G_N_ELEMENTS(want); i++) {
        const ClCaseImage *img = g_ptr_array_index(c->images, i);
        if (img->file_state != want[i])
            g_error("%s: %s, expected %s", names[i], cl_file_state_name(img->file_state),
                    cl_file_state_name(want[i]));
    }
    /* moved back: OK again; unchecked without the flag */
    g_assert_cmpint(g_rename(moved_to, g_ptr_array_index(paths, 0)), ==, 0);
    g_autoptr(ClCase) c2 = get(db, id, CL_CASE_CHECK_FILES);
    g_assert_cmpint(((ClCaseImage *)g_ptr_array_index(c2->images, 0))->file_state, ==, CL_FILE_OK);
    g_autoptr(ClCase) c3 = get(db, id, 0);
    g_assert_cmpint(((ClCaseImage *)g_ptr_array_index(c3->images, 0))->file_state, ==,
                    CL_FILE_UNCHECKED);
}

/* A file name that is not UTF-8 (Latin-1 bytes from an old archive) is kept byte for byte: the
 * file is found again (not "missing"), and a UTF-8 path is still stored as readable text. */
static void test_non_utf8_path(void)
{
    g_autofree char *dir = tmp_path("encodings");
    g_assert_cmpint(g_mkdir(dir, 0700), ==, 0);
    g_autofree char *png = NULL;
    gsize len;
    g_assert_true(g_file_get_contents(fx_png->path, &png, &len, NULL));
    /* "Röntgen 50%.png" in Latin-1, and its UTF-8 twin */
    g_autofree char *latin1 = g_build_filename(dir, "R\xf6ntgen 50%.png", NULL);
    g_autofree char *utf8 = g_build_filename(dir, "R\xc3\xb6ntgen 50%.png", NULL);
    g_assert_false(g_utf8_validate(latin1, -1, NULL));
    g_assert_true(g_file_set_contents(latin1, png, (gssize)len, NULL));
    g_assert_true(g_file_set_contents(utf8, png, (gssize)len, NULL));
    g_autoptr(GPtrArray) imgs = images_new();
    g_ptr_array_add(imgs, image_from(latin1, 0));
    g_ptr_array_add(imgs, image_from(utf8, 0));
    g_autofree char *db_path = db_at("encodings.db");
    g_autoptr(ClCaseDb) db = open_ok(db_path);
    gint64 id = new_case(db, "encodings");
    g_autoptr(GArray) ids = add_images(db, id, imgs);
    g_autoptr(ClCase) c = get(db, id, CL_CASE_CHECK_FILES);
    g_assert_cmpuint(c->images->len, ==, 2);
    const ClCaseImage *a = g_ptr_array_index(c->images, 0), *b = g_ptr_array_index(c->images, 1);
    g_assert_cmpstr(a->path, ==, latin1);
    g_assert_cmpstr(b->path, ==, utf8);
    g_assert_cmpint(a->file_state, ==, CL_FILE_OK);
    g_assert_cmpint(b->file_state, ==, CL_FILE_OK);
    /* what the database holds is UTF-8 text either way; the UTF-8 path as it is */
    g_autoptr(GPtrArray) stored = raw_strings(db_path, "SELECT path FROM images ORDER BY position");
    g_assert_cmpuint(stored->len, ==, 2);
    g_assert_true(g_utf8_validate(g_ptr_array_index(stored, 0), -1, NULL));
    g_assert_true(g_str_has_prefix(g_ptr_array_index(stored, 0), "file://"));
    g_assert_cmpstr(g_ptr_array_index(stored, 1), ==, utf8);
    /* removed, it is missing: the state comes from the file, not from the name's encoding */
    g_assert_cmpint(g_unlink(latin1), ==, 0);
    g_autoptr(ClCase) c2 = get(db, id, CL_CASE_CHECK_FILES);
    g_assert_cmpint(((ClCaseImage *)g_ptr_array_index(c2->images, 0))->file_state, ==,
                    CL_FILE_MISSING);
}

/* ---- search ---------------------------------------------------------------------------------- */

static void test_search(void)
{
    g_autofree char *location = db_at("search.db");
    g_autoptr(ClCaseDb) db = open_ok(location);
    g_autoptr(GError) err = NULL;
    gint64 a = new_case(db, "Knee trauma");
    gint64 b = new_case(db, "Robert'); DROP TABLE cases;--");
    gint64 d = new_case(db, "Latin-1 patient");
    edit(db, a, "Small left apical Pneumothorax. AND NEAR( the \"quoted\" words; 🫁 lungs", 0);
    edit(db, b, "Moderate right pleural effusion", 0);
    g_assert_true(cl_casedb_note_add(db, b, 0, "Ask about anticoagulation * urgently", NULL, &err));
    g_autoptr(GPtrArray) imgs = images_new();
    g_ptr_array_add(imgs, image_from(fx_ct->path, 0));
    g_autoptr(GArray) ids_a = add_images(db, a, imgs);
    g_autoptr(GPtrArray) imgs_d = images_new();
    g_ptr_array_add(imgs_d, image_from(fx_dx->path, 0));
    g_autoptr(GArray) ids_d = add_images(db, d, imgs_d);

    /* description, note, name and metadata words; the field and a marked snippet */
    g_autoptr(GPtrArray) h1 = search(db, "pneumothorax");
    g_assert_cmpuint(h1->len, ==, 1);
    const ClCaseSearchHit *hit = g_ptr_array_index(h1, 0);
    g_assert_cmpint(hit->case_id, ==, a);
    g_assert_cmpstr(hit->case_name, ==, "Knee trauma");
    g_assert_cmpstr(hit->field, ==, "description");
    g_assert_nonnull(strstr(hit->snippet, "[Pneumothorax]"));
    g_autoptr(GPtrArray) h2 = search(db, "anticoagulation");
    g_assert_cmpuint(h2->len, ==, 1);
    g_assert_cmpstr(HIT(h2, 0)->field, ==, "note");
    g_assert_cmpint(HIT(h2, 0)->case_id, ==, b);
    g_autoptr(GPtrArray) h3 = search(db, "knee");
    g_assert_cmpstr(HIT(h3, 0)->field, ==, "name");
    g_autoptr(GPtrArray) h4 = search(db, "Fixture^Patient");
    g_assert_nonnull(find_hit(h4, a));
    g_assert_cmpstr(find_hit(h4, a)->field, ==, "metadata");
    g_assert_null(find_hit(h4, d));        /* that fixture names another patient */
    g_assert_true(finds(db, "muller", d)); /* Müller, diacritics folded */
    g_assert_true(finds(db, "Müller", d));
    /* the last word is a prefix, the others are whole words; all must match */
    g_assert_true(finds(db, "pneumo", a));
    g_assert_true(finds(db, "left apical pneumo", a));
    g_assert_false(finds(db, "pneumo apical", a));
    g_assert_false(finds(db, "left effusion", a));
    g_assert_true(finds(db, "knee pneumothorax", a)); /* words from two fields of one case */
    g_assert_true(finds(db, "pleural eff", b));
    /* empty queries */
    g_autoptr(GPtrArray) none = search(db, "   ");
    g_assert_cmpuint(none->len, ==, 0);

    /* hostile queries: never an error; literal words found where they are */
    const char *hostile[] = { "\"",    "AND",          "NEAR(",   "*",    "'; DROP TABLE cases; --",
                              "OR",    "NOT",          "(",       ")",    "a:b",
                              "^",     "\"unbalanced", "-",       "+",    "{col}: x",
                              "🫁",  "\xff\xfe",     "caf\xc3", "%",    "_",
                              "\\",    "NEAR(a b, 2)", "''",      "*\"*", "lungs\"",
                              "\"\"\"" };
    for (guint i = 0; i < G_N_ELEMENTS(hostile); i++) {
        g_autoptr(GPtrArray) h = cl_casedb_search(db, hostile[i], 10, &err);
        g_assert_no_error(err);
        g_assert_nonnull(h);
    }
    g_assert_true(finds(db, "AND", a));
    g_assert_true(finds(db, "NEAR(", a));
    g_assert_true(finds(db, "\"quoted\"", a));
    g_assert_true(finds(db, "🫁", a));
    g_assert_true(finds(db, "lungs\"", a));
    g_assert_true(finds(db, "'; DROP TABLE cases; --", b));
    g_assert_true(finds(db, "\"", a)); /* punctuation alone: a literal substring */
    g_assert_false(finds(db, "\"", b));
    g_assert_true(finds(db, "*", b));
    g_autoptr(GPtrArray) star = search(db, "*");
    g_assert_nonnull(strstr(find_hit(star, b)->snippet, "[*]"));
    g_autoptr(GPtrArray) list = cl_casedb_list(db, &err);
    g_assert_cmpuint(list->len, ==, 3);

    /* an edit replaces the searchable description */
    edit(db, a, "Findings resolved on follow-up", 0);
    g_assert_false(finds(db, "pneumothorax", a));
    g_assert_true(finds(db, "resolved", a));
    /* a new run's description becomes current */
    ClCaseRun run = { .model_name = "m" };
    g_assert_true(
        cl_casedb_run_record(db, a, &run, "Generated consolidation text", NULL, NULL, NULL, &err));
    g_assert_true(finds(db, "consolidation", a));
    g_assert_false(finds(db, "resolved", a));
    /* renames */
    g_assert_true(cl_casedb_case_rename(db, a, "Ankle", &err));
    g_assert_false(finds(db, "knee", a));
    g_assert_true(finds(db, "ankle", a));

    /* one hit per case (its best), at most limit */
    for (int i = 0; i < 6; i++) {
        g_autofree char *name = g_strdup_printf("Shared word %d", i);
        gint64 id = new_case(db, name);
        edit(db, id, "shared shared shared description", 0);
        g_assert_true(cl_casedb_note_add(db, id, 0, "shared note", NULL, &err));
    }
    g_autoptr(GPtrArray) shared = search(db, "shared");
    g_assert_cmpuint(shared->len, ==, 6);
    g_autoptr(GHashTable) seen = g_hash_table_new(g_int64_hash, g_int64_equal);
    for (guint i = 0; i < shared->len; i++) {
        ClCaseSearchHit *h = g_ptr_array_index(shared, i);
        g_assert_true(g_hash_table_add(seen, &h->case_id));
        if (i)
            g_assert_cmpfloat(h->rank, >=, HIT(shared, i - 1)->rank);
    }
    g_autoptr(GPtrArray) three = cl_casedb_search(db, "shared", 3, &err);
    g_assert_cmpuint(three->len, ==, 3);
    g_assert_cmpint(HIT(three, 0)->case_id, ==, HIT(shared, 0)->case_id);
}

/* ---- escaping -------------------------------------------------------------------------------- */

static void test_escaping(void)
{
    g_autofree char *path = db_at("escaping.db");
    g_autoptr(ClCaseDb) db = open_ok(path);
    g_autoptr(GError) err = NULL;
    GString *big = g_string_new(NULL);
    while (big->len < 100 * 1024)
        g_string_append_printf(big, "word%u 'q' \"dq\" ; -- ", g_test_rand_int_range(0, 100000));
    const char *texts[] = {
        "Robert'); DROP TABLE cases;--",
        "\"double\" and 'single' quotes, `backticks`",
        "<script>alert('x')</script> &amp; <b>bold</b>",
        "tab\there\nnewline\rreturn\a bell \x1b[31m escape \x01\x02\x7f",
        "%s %n %x %% format",
        "back\\slash \\\\ and $dollar ?1 ?2 :name @x",
        "ok\xff\xfe then \xc3( and \xe2\x82",
        "emoji 🫁🩻 and RTL \u202eevil\u202c and zero\u200bwidth",
        big->str,
    };
    gint64 ids[G_N_ELEMENTS(texts)];
    for (guint i = 0; i < G_N_ELEMENTS(texts); i++) {
        ids[i] = new_case(db, texts[i]);
        edit(db, ids[i], texts[i], 0);
        g_assert_true(cl_casedb_note_add(db, ids[i], 0, texts[i], NULL, &err));
        g_assert_no_error(err);
        cl_casedb_set_actor(db, texts[i]); /* the actor is text too */
    }
    for (guint i = 0; i < G_N_ELEMENTS(texts); i++) {
        g_autofree char *want = g_utf8_make_valid(texts[i], -1);
        g_autoptr(ClCase) c = get(db, ids[i], 0);
        g_assert_cmpstr(c->summary.name, ==, want);
        g_assert_cmpstr(cl_case_current_description(c)->text, ==, want);
        g_assert_cmpstr(((ClCaseNote *)g_ptr_array_index(c->notes, 0))->text, ==, want);
        g_assert_true(g_utf8_validate(c->summary.name, -1, NULL));
        if (!g_utf8_validate(texts[i], -1, NULL))
            g_assert_nonnull(strstr(c->summary.name, "\xef\xbf\xbd")); /* U+FFFD */
        else
            g_assert_cmpstr(c->summary.name, ==, texts[i]); /* as given, nothing stripped */
    }
    g_assert_cmpuint(strlen(big->str), ==, big->len);
    /* the invalid bytes are searchable by the same (replaced) text */
    g_assert_true(finds(db, "ok\xff\xfe", ids[6]));
    g_assert_true(finds(db, "Robert'); DROP TABLE cases;--", ids[0]));

    /* an image with a hostile path and metadata */
    ClCaseImage img = { .path = "/tmp/it's \"here\"; DROP TABLE images;--.png",
                        .sha256 = "00",
                        .format = "PNG",
                        .width = 1,
                        .height = 1,
                        .n_frames = 1,
                        .metadata_json = "{\"Note\":\"a'b\\\"c\",\"x\":\"</script>\"}" };
    g_autoptr(GPtrArray) imgs = g_ptr_array_new();
    g_ptr_array_add(imgs, &img);
    g_autoptr(GArray) iid = add_images(db, ids[0], imgs);
    g_autoptr(ClCase) c = get(db, ids[0], 0);
    const ClCaseImage *got = g_ptr_array_index(c->images, 0);
    g_assert_cmpstr(got->path, ==, img.path);
    g_assert_cmpstr(got->metadata_json, ==, img.metadata_json);
    /* metadata that is not a JSON object is refused */
    img.metadata_json = "{not json";
    g_assert_false(cl_casedb_images_add(db, ids[0], imgs, NULL, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID);
    g_clear_error(&err);

    g_autoptr(GPtrArray) list = cl_casedb_list(db, &err);
    g_assert_cmpuint(list->len, ==, G_N_ELEMENTS(texts));
    g_assert_cmpint(
        raw_int(path, TABLES_WHERE(" AND name IN ('cases', 'images', 'audit', 'search')")), ==, 4);
    assert_integrity(db);
    g_string_free(big, TRUE);
}

/* ---- durability ------------------------------------------------------------------------------- */

/* A VFS over the default one that counts xSync calls on WAL files: a commit is durable when the
 * WAL holding it has been synced before the call returns. */
typedef struct {
    sqlite3_file base;
    sqlite3_file *real; /* the default VFS's file, right after this struct */
    gboolean wal;
} CountingFile;

static sqlite3_vfs counting_vfs, *default_vfs;
static sqlite3_io_methods counting_io;
static gint wal_syncs;

#define REAL(f) (((CountingFile *)(f))->real)
static int c_close(sqlite3_file *f)
{
    return REAL(f)->pMethods->xClose(REAL(f));
}
static int c_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o)
{
    return REAL(f)->pMethods->xRead(REAL(f), b, n, o);
}
static int c_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o)
{
    return REAL(f)->pMethods->xWrite(REAL(f), b, n, o);
}
static int c_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    return REAL(f)->pMethods->xTruncate(REAL(f), size);
}
static int c_sync(sqlite3_file *f, int flags)
{
    if (((CountingFile *)f)->wal)
        g_atomic_int_inc(&wal_syncs);
    return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int c_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    return REAL(f)->pMethods->xFileSize(REAL(f), size);
}
static int c_lock(sqlite3_file *f, int l)
{
    return REAL(f)->pMethods->xLock(REAL(f), l);
}
static int c_unlock(sqlite3_file *f, int l)
{
    return REAL(f)->pMethods->xUnlock(REAL(f), l);
}
static int c_check_reserved(sqlite3_file *f, int *out)
{
    return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int c_file_control(sqlite3_file *f, int op, void *arg)
{
    return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int c_sector_size(sqlite3_file *f)
{
    return REAL(f)->pMethods->xSectorSize(REAL(f));
}
static int c_device(sqlite3_file *f)
{
    return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int c_shm_map(sqlite3_file *f, int pg, int size, int extend, void volatile **p)
{
    return REAL(f)->pMethods->xShmMap(REAL(f), pg, size, extend, p);
}
static int c_shm_lock(sqlite3_file *f, int offset, int n, int flags)
{
    return REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags);
}
static void c_shm_barrier(sqlite3_file *f)
{
    REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int c_shm_unmap(sqlite3_file *f, int del)
{
    return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}

static int c_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *out)
{
    (void)vfs;
    CountingFile *cf = (CountingFile *)f;
    cf->real = (sqlite3_file *)(cf + 1);
    cf->wal = (flags & SQLITE_OPEN_WAL) != 0;
    int rc = default_vfs->xOpen(default_vfs, name, cf->real, flags, out);
    /* the unix VFS needs no shm or mmap methods of ours beyond forwarding; version 2 of the
     * table is enough for WAL (no xFetch: memory mapping stays off) */
    f->pMethods = rc == SQLITE_OK && cf->real->pMethods ? &counting_io : NULL;
    return rc;
}

static void counting_vfs_install(void)
{
    default_vfs = sqlite3_vfs_find(NULL);
    counting_vfs = *default_vfs;
    counting_vfs.zName = "cl-counting";
    counting_vfs.szOsFile = (int)sizeof(CountingFile) + default_vfs->szOsFile;
    counting_vfs.xOpen = c_open;
    counting_io = (sqlite3_io_methods){
        .iVersion = 2,
        .xClose = c_close,
        .xRead = c_read,
        .xWrite = c_write,
        .xTruncate = c_truncate,
        .xSync = c_sync,
        .xFileSize = c_file_size,
        .xLock = c_lock,
        .xUnlock = c_unlock,
        .xCheckReservedLock = c_check_reserved,
        .xFileControl = c_file_control,
        .xSectorSize = c_sector_size,
        .xDeviceCharacteristics = c_device,
        .xShmMap = c_shm_map,
        .xShmLock = c_shm_lock,
        .xShmBarrier = c_shm_barrier,
        .xShmUnmap = c_shm_unmap,
    };
    g_assert_cmpint(sqlite3_vfs_register(&counting_vfs, 1), ==, SQLITE_OK);
}

static void counting_vfs_remove(void)
{
    sqlite3_vfs_unregister(&counting_vfs);
    sqlite3_vfs_register(default_vfs, 1);
}

/* Accept, reject, edit, note and key image reach the disk before they return (the WAL is
 * synced at their commit): a power cut right after a sign-off cannot take it back. Bulk writes
 * (a case, its images) are not synced one by one. */
static void test_durable(void)
{
    counting_vfs_install();
    g_autofree char *path = tmp_path("durable.db");
    ClCaseDb *db = open_ok(path);
    g_autoptr(GError) err = NULL;
    gint64 id = new_case(db, "Durable");
    g_autoptr(GPtrArray) imgs = images_new();
    g_ptr_array_add(imgs, image_from(fx_png->path, 0));

    g_atomic_int_set(&wal_syncs, 0);
    g_autoptr(GArray) ids = add_images(db, id, imgs);
    gint64 bulk_syncs = g_atomic_int_get(&wal_syncs);
    g_atomic_int_set(&wal_syncs, 0);
    gint64 v1 = edit(db, id, "Stable", 0);
    g_assert_cmpint(g_atomic_int_get(&wal_syncs), >=, 1);
    g_atomic_int_set(&wal_syncs, 0);
    g_assert_true(
        cl_casedb_description_set_status(db, id, CL_DESC_ACCEPTED, "Dr. Okafor", 0, NULL, &err));
    g_assert_no_error(err);
    g_assert_cmpint(g_atomic_int_get(&wal_syncs), >=, 1);
    g_atomic_int_set(&wal_syncs, 0);
    g_assert_true(
        cl_casedb_description_set_status(db, id, CL_DESC_REJECTED, "Dr. Ng", 0, NULL, &err));
    g_assert_cmpint(g_atomic_int_get(&wal_syncs), >=, 1);
    g_atomic_int_set(&wal_syncs, 0);
    g_assert_true(cl_casedb_note_add(db, id, 0, "Called the ward", NULL, &err));
    g_assert_cmpint(g_atomic_int_get(&wal_syncs), >=, 1);
    g_atomic_int_set(&wal_syncs, 0);
    g_assert_true(
        cl_casedb_key_image_add(db, id, g_array_index(ids, gint64, 0), "key", NULL, &err));
    g_assert_cmpint(g_atomic_int_get(&wal_syncs), >=, 1);
    /* the connection is back to NORMAL afterwards: the next bulk write syncs no more than the
     * first did */
    g_atomic_int_set(&wal_syncs, 0);
    g_autoptr(GPtrArray) more = images_new();
    g_ptr_array_add(more, image_from(fx_png->path, 0));
    g_autoptr(GArray) ids2 = add_images(db, id, more);
    g_assert_cmpint(g_atomic_int_get(&wal_syncs), ==, bulk_syncs);
    g_assert_cmpint(bulk_syncs, ==, 0);
    (void)v1;
    cl_casedb_close(db);
    counting_vfs_remove();
}

/* ---- read-only and full disk ----------------------------------------------------------------- */

static void test_read_only(void)
{
    g_autofree char *path = db_at("read-only.db");
    ClCaseDb *rw = open_ok(path);
    gint64 id = new_case(rw, "Kept as is");
    edit(rw, id, "Original words", 0);
    cl_casedb_close(rw);

    g_autoptr(GError) err = NULL;
    g_autoptr(ClCaseDb) ro = cl_casedb_open(path, CL_CASEDB_OPEN_READ_ONLY, &err);
    g_assert_no_error(err);
    g_autoptr(GPtrArray) list = cl_casedb_list(ro, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(list->len, ==, 1);
    g_autoptr(ClCase) c = get(ro, id, 0);
    g_assert_cmpstr(cl_case_current_description(c)->text, ==, "Original words");
    g_assert_true(finds(ro, "original", id));
    assert_integrity(ro);

    g_assert_false(cl_casedb_description_edit(ro, id, "changed", NULL, 0, NULL, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_READ_ONLY);
    g_assert_nonnull(strstr(err->message, "read-only"));
    g_assert_nonnull(strstr(err->message, shown_name(path)));
    g_clear_error(&err);
    g_assert_false(cl_casedb_case_new(ro, "new", NULL, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_READ_ONLY);
    g_clear_error(&err);
    /* still usable for reading after the refusals */
    g_autoptr(ClCase) again = get(ro, id, 0);
    g_assert_cmpuint(again->descriptions->len, ==, 1);
}

/* The child of test_read_only_folder, with file permissions applied: 77 when they cannot be. */
static int read_only_folder_child(const char *dir, const char *path, gint64 id)
{
    if (!cl_fixture_obey_permissions(dir))
        return 77;
    const ClCaseDbOpenFlags flags[] = { CL_CASEDB_OPEN_NO_CREATE, CL_CASEDB_OPEN_DEFAULT };
    for (guint i = 0; i < G_N_ELEMENTS(flags); i++) {
        g_autoptr(GError) err = NULL;
        g_autoptr(ClCaseDb) db = cl_casedb_open(path, flags[i], &err);
        g_assert_no_error(err);
        g_autoptr(GPtrArray) list = cl_casedb_list(db, &err);
        g_assert_no_error(err);
        g_assert_cmpuint(list->len, ==, 1);
        g_autoptr(ClCase) c = get(db, id, 0);
        g_assert_cmpstr(cl_case_current_description(c)->text, ==, "Stable nodule");
        g_assert_true(finds(db, "nodule", id));
        g_assert_false(cl_casedb_description_edit(db, id, "changed", NULL, 0, NULL, &err));
        g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_READ_ONLY);
        g_assert_nonnull(strstr(err->message, path));
        g_assert_nonnull(strstr(err->message, "can only be read"));
        g_clear_error(&err);
        g_assert_false(cl_casedb_case_new(db, "new", NULL, &err));
        g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_READ_ONLY);
    }
    return 0;
}

/* A database in a folder that cannot be written (a read-only mount, an archive): SQLite cannot
 * put the WAL index beside it, yet it is read; a write fails saying why. */
static void test_read_only_folder(void)
{
    g_autofree char *dir = tmp_path("read-only-folder");
    g_assert_cmpint(g_mkdir(dir, 0700), ==, 0);
    g_autofree char *path = g_build_filename(dir, "cases.db", NULL);
    ClCaseDb *rw = open_ok(path);
    gint64 id = new_case(rw, "Archived chest");
    edit(rw, id, "Stable nodule", 0);
    cl_casedb_close(rw);
    g_autofree char *shm = g_strconcat(path, "-shm", NULL);
    g_assert_false(g_file_test(shm, G_FILE_TEST_EXISTS)); /* closed: nothing beside it */
    g_assert_cmpint(g_chmod(dir, 0555), ==, 0);
    fflush(NULL);
    pid_t pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0)
        _exit(read_only_folder_child(dir, path, id));
    int status = 0;
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_cmpint(g_chmod(dir, 0700), ==, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
        g_test_skip("file permissions cannot be made to apply to this process");
        return;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        g_error("reading the database in a read-only folder failed (status %d)", status);
    g_assert_false(g_file_test(shm, G_FILE_TEST_EXISTS));
}

static void test_full(void)
{
    g_autofree char *path = tmp_path("full.db");
    g_autoptr(ClCaseDb) db = open_ok(path);
    g_autoptr(GError) err = NULL;
    gint64 id = new_case(db, "Full disk");
    gint64 v1 = edit(db, id, "First version survives", 0);
    gint64 pages = raw_int(path, "PRAGMA page_count");
    cl_casedb_set_max_pages(db, pages);

    GString *big = g_string_new(NULL);
    while (big->len < 2 * 1024 * 1024)
        g_string_append_printf(big, "token%d ", g_test_rand_int());
    g_assert_false(cl_casedb_description_edit(db, id, big->str, NULL, v1, NULL, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_FULL);
    g_assert_nonnull(strstr(err->message, "full"));
    g_assert_nonnull(strstr(err->message, "nothing was changed"));
    g_clear_error(&err);
    g_autoptr(ClCase) c = get(db, id, 0);
    g_assert_cmpuint(c->descriptions->len, ==, 1);
    g_assert_cmpstr(cl_case_current_description(c)->text, ==, "First version survives");
    g_assert_cmpuint(c->audit->len, ==, 2);
    g_assert_false(finds(db, "token", id));

    /* room again: the same edit goes through on the same connection */
    cl_casedb_set_max_pages(db, 0);
    gint64 v2 = edit(db, id, big->str, v1);
    g_autoptr(ClCase) c2 = get(db, id, 0);
    g_assert_cmpint(cl_case_current_description(c2)->id, ==, v2);
    g_assert_cmpstr(cl_case_current_description(c2)->text, ==, big->str);
    assert_integrity(db);
    g_string_free(big, TRUE);
}

/* ---- a reader thread while this thread writes ------------------------------------------------ */

typedef struct {
    const char *path;
    gint64 case_id;
    guint n_cases;
    gint done; /* atomic: the writer finished */
    guint reads, failures;
    char *first_failure;
} Reader;

static void reader_fail(Reader *r, char *msg)
{
    if (!r->first_failure)
        r->first_failure = msg;
    else
        g_free(msg);
    r->failures++;
}

static gpointer reader_thread(gpointer data)
{
    Reader *r = data;
    g_autoptr(GError) err = NULL;
    /* its own connection, owned by this thread */
    g_autoptr(ClCaseDb) db = cl_casedb_open(r->path, CL_CASEDB_OPEN_DEFAULT, &err);
    if (!db) {
        reader_fail(r, g_strdup(err->message));
        return NULL;
    }
    guint last_versions = 0;
    for (;;) {
        gboolean finished = g_atomic_int_get(&r->done);
        g_autoptr(GPtrArray) list = cl_casedb_list(db, &err);
        if (!list) {
            reader_fail(r, g_strdup(err->message));
            g_clear_error(&err);
        } else if (list->len != r->n_cases) {
            reader_fail(r, g_strdup_printf("saw %u cases, expected %u", list->len, r->n_cases));
        }
        g_autoptr(ClCase) c = cl_casedb_get_case(db, r->case_id, 0, &err);
        if (!c) {
            reader_fail(r, g_strdup(err->message));
            g_clear_error(&err);
        } else {
            /* a consistent snapshot: versions 1..n, each with its own text, never fewer */
            if (c->descriptions->len < last_versions)
                reader_fail(r, g_strdup("the number of versions went down"));
            last_versions = c->descriptions->len;
            for (guint i = 0; i < c->descriptions->len; i++) {
                const ClCaseDescVersion *v = g_ptr_array_index(c->descriptions, i);
                g_autofree char *want = g_strdup_printf("edit %u", i + 1);
                if (v->version != i + 1 || g_strcmp0(v->text, want) != 0)
                    reader_fail(r, g_strdup_printf("version %u reads '%s'", v->version, v->text));
            }
        }
        r->reads++;
        if (finished)
            break;
    }
    return NULL;
}

static void test_reader_while_writing(void)
{
    g_autofree char *path = db_at("concurrent.db");
    g_autoptr(ClCaseDb) db = open_ok(path);
    Reader r = { .path = path, .n_cases = 5 };
    for (guint i = 0; i < r.n_cases; i++)
        r.case_id = new_case(db, "concurrent");
    GThread *t = g_thread_new("reader", reader_thread, &r);
    gint64 base = 0;
    for (int i = 1; i <= 200; i++) {
        g_autofree char *text = g_strdup_printf("edit %d", i);
        base = edit(db, r.case_id, text, base);
    }
    g_atomic_int_set(&r.done, 1);
    g_thread_join(t);
    if (r.failures)
        g_error("reader: %u failures, first: %s", r.failures, r.first_failure);
    g_assert_cmpuint(r.reads, >, 1);
    g_test_message("reader read %u times while 200 edits were written", r.reads);
    g_autoptr(ClCase) c = get(db, r.case_id, 0);
    g_assert_cmpuint(c->descriptions->len, ==, 200);
    g_free(r.first_failure);
}

/* ---- the owner thread check ------------------------------------------------------------------ */

static gpointer list_from_thread(gpointer db)
{
    return cl_casedb_list(db, NULL);
}

static void test_wrong_thread(void)
{
    if (g_test_subprocess()) {
        ClCaseDb *db = cl_casedb_open(":memory:", 0, NULL);
        g_thread_join(g_thread_new("intruder", list_from_thread, db));
        return;
    }
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_stderr("*CRITICAL*g_thread_self*");
}

/* ---- a shared database: two connections (two workstations on one server, or two windows) ---- */

/* Two reviewers on two workstations (two connections): what one saves the other sees at once; an
 * edit based on a version the other has since replaced is refused, and neither text is lost. */
static void test_two_reviewers(void)
{
    g_autofree char *uri = db_at("two-reviewers");
    g_autoptr(ClCaseDb) a = open_ok(uri);
    g_autoptr(ClCaseDb) b = open_ok(uri);
    cl_casedb_set_actor(a, "dr.okafor");
    cl_casedb_set_actor(b, "dr.lindqvist");
    gint64 id = new_case(a, "Chest, shared");
    gint64 v1 = edit(a, id, "Small left effusion.", 0);

    /* b opens the case: a's version is there */
    g_autoptr(ClCase) seen = get(b, id, 0);
    g_assert_cmpint(cl_case_current_description(seen)->id, ==, v1);
    /* both start editing from v1; a saves first */
    gint64 v2 = edit(a, id, "Small left effusion, unchanged.", v1);
    g_autoptr(GError) err = NULL;
    gint64 none = 0;
    g_assert_false(
        cl_casedb_description_edit(b, id, "Left effusion has grown.", NULL, v1, &none, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_CONFLICT);
    g_assert_nonnull(strstr(err->message, "dr.okafor"));
    g_assert_nonnull(strstr(err->message, "not saved"));
    g_clear_error(&err);
    /* nothing of a's was lost, nothing of b's was written */
    g_autoptr(ClCase) now = get(b, id, 0);
    g_assert_cmpuint(now->descriptions->len, ==, 2);
    g_assert_cmpint(cl_case_current_description(now)->id, ==, v2);
    g_assert_cmpstr(cl_case_current_description(now)->text, ==, "Small left effusion, unchanged.");
    /* b reloads and applies the edit on the new version */
    gint64 v3 = edit(b, id, "Left effusion has grown.", v2);
    g_autoptr(ClCase) last = get(a, id, 0);
    g_assert_cmpint(cl_case_current_description(last)->id, ==, v3);
    g_assert_cmpstr(cl_case_current_description(last)->author, ==, "dr.lindqvist");
    /* a sign-off of the version one read, after the other changed it, is refused too */
    g_assert_false(cl_casedb_description_set_status(a, id, CL_DESC_ACCEPTED, NULL, v2, NULL, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_CONFLICT);
    g_assert_nonnull(strstr(err->message, "dr.lindqvist"));
    g_clear_error(&err);
    gint64 v4 = 0;
    g_assert_true(cl_casedb_description_set_status(a, id, CL_DESC_ACCEPTED, NULL, v3, &v4, &err));
    g_assert_no_error(err);
    g_assert_cmpint(v4, >, v3);
    /* the other reviewer's note is searchable from the first one's connection at once */
    g_assert_true(cl_casedb_note_add(b, id, 0, "Discussed at the tumour board", NULL, &err));
    g_assert_no_error(err);
    g_assert_true(finds(a, "tumour board", id));
    assert_integrity(a);
}

typedef struct {
    const char *uri;
    gint64 case_id;
    int edits;
    char *failure;
} Writer;

static gpointer writer_thread(gpointer data)
{
    Writer *w = data;
    g_autoptr(GError) err = NULL;
    g_autoptr(ClCaseDb) db = cl_casedb_open(w->uri, CL_CASEDB_OPEN_DEFAULT, &err);
    for (int i = 0; db && i < w->edits && !w->failure; i++) {
        g_autofree char *text = g_strdup_printf("%s edit %d", g_thread_self() ? "w" : "", i);
        if (!cl_casedb_description_edit(db, w->case_id, text, NULL, 0, NULL, &err))
            w->failure = g_strdup(err->message);
        if (!cl_casedb_note_add(db, w->case_id, 0, text, NULL, &err) && !w->failure)
            w->failure = g_strdup(err->message);
        g_clear_error(&err);
    }
    if (!db)
        w->failure = g_strdup(err->message);
    return NULL;
}

/* Four writers at once on four connections: every write lands, versions numbered 1..n without
 * a gap or a duplicate (the writers take turns, as SQLite's do). */
static void test_concurrent_writers(void)
{
    g_autofree char *uri = db_at("writers");
    g_autoptr(ClCaseDb) db = open_ok(uri);
    gint64 id = new_case(db, "Busy case");
    Writer w[4];
    GThread *t[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (Writer){ .uri = uri, .case_id = id, .edits = 25 };
        t[i] = g_thread_new("writer", writer_thread, &w[i]);
    }
    for (int i = 0; i < 4; i++) {
        g_thread_join(t[i]);
        if (w[i].failure)
            g_error("writer %d: %s", i, w[i].failure);
    }
    g_autoptr(ClCase) c = get(db, id, 0);
    g_assert_cmpuint(c->descriptions->len, ==, 100);
    g_assert_cmpuint(c->notes->len, ==, 100);
    for (guint i = 0; i < c->descriptions->len; i++)
        g_assert_cmpuint(((ClCaseDescVersion *)g_ptr_array_index(c->descriptions, i))->version, ==,
                         i + 1);
    assert_integrity(db);
}

/* A server that does not answer, and a password in the address: a clear error, soon, that does
 * not show the password. */
static void test_server_gone(void)
{
    g_autofree char *uri = g_strdup_printf(
        "postgresql://someone:s3cret@127.0.0.1:%d/cases?connect_timeout=3", cl_fixture_free_port());
    g_autoptr(GError) err = NULL;
    gint64 t0 = g_get_monotonic_time();
    g_assert_null(cl_casedb_open(uri, CL_CASEDB_OPEN_DEFAULT, &err));
    g_assert_cmpint(g_get_monotonic_time() - t0, <, 15 * G_USEC_PER_SEC);
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_OPEN);
    g_assert_nonnull(strstr(err->message, "127.0.0.1"));
    g_assert_nonnull(strstr(err->message, "cases"));
    g_assert_null(strstr(err->message, "s3cret"));
    g_clear_error(&err);
    /* not an address libpq can read */
    g_assert_null(cl_casedb_open("postgresql://[::1", CL_CASEDB_OPEN_DEFAULT, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_OPEN);
}

/* A database user who may only read: the reads work, a write fails saying why, nothing is
 * changed. */
static void test_no_write_rights(void)
{
    g_autofree char *uri = db_at("readers");
    g_autoptr(ClCaseDb) owner = open_ok(uri);
    gint64 id = new_case(owner, "Reference case");
    edit(owner, id, "Normal study", 0);
    g_assert_cmpint(raw_exec(uri,
                             "CREATE ROLE viewer LOGIN; "
                             "GRANT SELECT ON ALL TABLES IN SCHEMA public TO viewer",
                             NULL),
                    ==, SQLITE_OK);
    g_autofree char *as_viewer =
        g_strdup_printf("postgresql://viewer@127.0.0.1:%d/%s", pg.port, shown_name(uri));
    g_autoptr(GError) err = NULL;
    g_autoptr(ClCaseDb) v = cl_casedb_open(as_viewer, CL_CASEDB_OPEN_DEFAULT, &err);
    g_assert_no_error(err);
    g_autoptr(ClCase) c = get(v, id, 0);
    g_assert_cmpstr(cl_case_current_description(c)->text, ==, "Normal study");
    g_assert_true(finds(v, "normal", id));
    g_assert_false(cl_casedb_description_edit(v, id, "Changed", NULL, 0, NULL, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_READ_ONLY);
    g_assert_nonnull(strstr(err->message, "may not change"));
    g_clear_error(&err);
    g_autoptr(ClCase) after = get(owner, id, 0);
    g_assert_cmpuint(after->descriptions->len, ==, 1);
}

/* The server drops the connection (a restart, a network cut): the next call finds a new one and
 * goes on — reads, and writes with their statements prepared again — without the app's
 * reopening anything. */
static void test_reconnect(void)
{
    g_autofree char *uri = db_at("reconnect");
    g_autoptr(ClCaseDb) db = open_ok(uri);
    gint64 id = new_case(db, "Before the cut");
    gint64 v1 = edit(db, id, "Written before the cut", 0);
    for (int cut = 0; cut < 2; cut++) {
        g_assert_cmpint(raw_int(uri,
                                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                "WHERE application_name = 'ChangeLens'"),
                        ==, 1);
        g_autoptr(GError) err = NULL;
        if (cut == 0) { /* a read first */
            g_autoptr(GPtrArray) list = cl_casedb_list(db, &err);
            g_assert_no_error(err);
            g_assert_cmpuint(list->len, ==, 1);
        } else { /* a write first: its BEGIN meets the cut, and goes again */
            gint64 v2 = edit(db, id, "Written after the cut", v1);
            g_assert_cmpint(v2, >, v1);
        }
    }
    g_autoptr(ClCase) c = get(db, id, 0);
    g_assert_cmpstr(cl_case_current_description(c)->text, ==, "Written after the cut");
    g_assert_true(finds(db, "after cut", id));
    assert_integrity(db);
}

/* A note of 1.6 MB of distinct words (more than a tsvector holds): the write goes through, the
 * case stays searchable by its first words. */
static void test_huge_text(void)
{
    g_autofree char *uri = db_at("huge-text");
    g_autoptr(ClCaseDb) db = open_ok(uri);
    gint64 id = new_case(db, "Long report");
    GString *text = g_string_new("Opening remark about pneumothorax. ");
    for (int i = 0; text->len < 1600 * 1024; i++)
        g_string_append_printf(text, "w%07dx ", i);
    g_autoptr(GError) err = NULL;
    gboolean ok = cl_casedb_note_add(db, id, 0, text->str, NULL, &err);
    g_assert_no_error(err);
    g_assert_true(ok);
    g_assert_true(finds(db, "pneumothorax", id));
    g_assert_true(finds(db, "w0000001x", id));
    assert_integrity(db);
    g_string_free(text, TRUE);
}

/* `bench --casedb --postgresql`: the same cases and searches on both engines side by side, the
 * same hits on both, and the database made on the server dropped afterwards. */
static void test_bench_both(void)
{
    g_autofree char *admin = cl_fixture_postgres_uri(&pg, "postgres");
    const char *args[] = { "bench", "--casedb",     "--cases", "40",     "--queries",
                           "20",    "--postgresql", admin,     "--json", NULL };
    g_autoptr(JsonNode) root = cl_fixture_cli_json(args);
    JsonObject *lite = json_node_get_object(root);
    JsonObject *server = json_object_get_object_member(lite, "postgresql");
    g_assert_nonnull(server);
    g_assert_true(g_str_has_prefix(json_object_get_string_member(lite, "engine"), "SQLite"));
    g_assert_true(g_str_has_prefix(json_object_get_string_member(server, "engine"), "PostgreSQL"));
    JsonObject *both[2] = { lite, server };
    for (int i = 0; i < 2; i++) {
        g_assert_cmpint(json_object_get_int_member(both[i], "listed_cases"), ==, 40);
        g_assert_cmpfloat(json_object_get_double_member(both[i], "insert_cases_per_s"), >, 0);
        g_assert_cmpfloat(json_object_get_double_member(both[i], "search_p95_ms"), >, 0);
        g_assert_cmpfloat(json_object_get_double_member(both[i], "db_mb"), >, 0);
    }
    /* one search semantics: the same words find the same number of cases */
    g_assert_cmpint(json_object_get_int_member(lite, "search_queries_with_hits"), >=, 10);
    g_assert_cmpfloat(json_object_get_double_member(lite, "search_mean_hits"), ==,
                      json_object_get_double_member(server, "search_mean_hits"));
    g_assert_cmpint(raw_int(admin, "SELECT count(*) FROM pg_database "
                                   "WHERE datname LIKE 'changelens_bench_%'"),
                    ==, 0);
}

/* Reordering a case's images: a new order is kept, with the audit; anything but the case's own
 * images, each once, is refused and changes nothing. */
static void test_reorder(void)
{
    g_autofree char *location = db_at("reorder.db");
    g_autoptr(ClCaseDb) db = cl_casedb_open(location, CL_CASEDB_OPEN_DEFAULT, NULL);
    gint64 id = new_case(db, "priors");
    g_autoptr(GPtrArray) imgs = images_new();
    const ClFixture *fx[3] = { fx_png, fx_ct, fx_dx };
    for (guint i = 0; i < 3; i++)
        g_ptr_array_add(imgs, image_from(fx[i]->path, 0));
    g_autoptr(GArray) ids = add_images(db, id, imgs);
    gint64 *v = (gint64 *)(gpointer)ids->data;
    const gint64 order[3] = { v[2], v[0], v[1] };
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_casedb_images_reorder(db, id, order, 3, &err));
    g_assert_no_error(err);
    g_autoptr(ClCase) c = cl_casedb_get_case(db, id, CL_CASE_GET_DEFAULT, &err);
    for (guint i = 0; i < 3; i++) {
        const ClCaseImage *img = g_ptr_array_index(c->images, i);
        g_assert_cmpint(img->id, ==, order[i]);
        g_assert_cmpuint(img->position, ==, i);
    }
    const ClCaseAudit *last = g_ptr_array_index(c->audit, c->audit->len - 1);
    g_assert_cmpstr(last->action, ==, "image.reorder");

    const gint64 twice[3] = { v[0], v[0], v[1] };
    g_assert_false(cl_casedb_images_reorder(db, id, twice, 3, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID);
    g_clear_error(&err);
    const gint64 short_[2] = { v[0], v[1] };
    g_assert_false(cl_casedb_images_reorder(db, id, short_, 2, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID);
    g_clear_error(&err);
    gint64 other = new_case(db, "other");
    g_autoptr(GPtrArray) one = images_new();
    g_ptr_array_add(one, image_from(fx_png->path, 0));
    g_autoptr(GArray) oid = add_images(db, other, one);
    const gint64 foreign[3] = { v[0], v[1], g_array_index(oid, gint64, 0) };
    g_assert_false(cl_casedb_images_reorder(db, id, foreign, 3, &err));
    g_assert_error(err, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID);
    g_clear_error(&err);
    /* nothing changed */
    g_autoptr(ClCase) d = cl_casedb_get_case(db, id, CL_CASE_GET_DEFAULT, NULL);
    for (guint i = 0; i < 3; i++)
        g_assert_cmpint(((ClCaseImage *)g_ptr_array_index(d->images, i))->id, ==, order[i]);
    g_assert_true(cl_casedb_check_integrity(db, NULL));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    if (g_test_subprocess()) {
        /* the trapped child of /casedb/wrong-thread: no fixtures, nothing to clean up */
        g_test_add_func("/casedb/wrong-thread", test_wrong_thread);
        return g_test_run();
    }
    tmpdir = cl_fixture_tmpdir("casedb");
    g_autofree char *fixdir = g_build_filename(tmpdir, "fixtures", NULL);
    g_mkdir(fixdir, 0700);
    fixtures = g_ptr_array_new_with_free_func((GDestroyNotify)cl_fixture_free);
    g_autoptr(GError) err = NULL;
    if (!cl_fixtures_png(fixdir, fixtures, &err) || !cl_fixtures_dicom(fixdir, fixtures, &err))
        g_error("writing fixtures: %s", err->message);
    for (guint i = 0; i < fixtures->len && !fx_png; i++) {
        const ClFixture *f = g_ptr_array_index(fixtures, i);
        if (f->format == CL_IMAGE_FORMAT_PNG && !f->must_fail && f->frames == 1)
            fx_png = f;
    }
    fx_ct = cl_fixture_find(fixtures, "dicom-ct-s16-be.dcm");
    fx_dx = cl_fixture_find(fixtures, "dicom-mono2-u16-le.dcm");
    fx_multi = cl_fixture_find(fixtures, "dicom-multiframe5.dcm");
    g_assert_true(fx_png && fx_ct && fx_dx && fx_multi);

    use_pg = g_strcmp0(g_getenv("CHANGELENS_TEST_ENGINE"), "postgresql") == 0;
    if (use_pg) {
        g_autofree char *why = NULL;
        if (!cl_fixture_postgres_start(&pg, &why)) {
            g_printerr("SKIP: %s\n", why);
            cl_fixture_rmdir(tmpdir);
            return 77;
        }
        g_test_message("PostgreSQL on 127.0.0.1:%d", pg.port);
    }
    g_test_add_func("/casedb/migrations-fresh", test_open_fresh);
    g_test_add_func("/casedb/reorder", test_reorder);
    g_test_add_func("/casedb/migrations-step-by-step", test_migrate_steps);
    g_test_add_func("/casedb/migrations-too-new", test_too_new);
    g_test_add_func("/casedb/migrations-not-a-database", test_not_a_database);
    g_test_add_func("/casedb/records", test_records);
    g_test_add_func("/casedb/image-errors", test_image_errors);
    g_test_add_func("/casedb/files", test_files);
    g_test_add_func("/casedb/non-utf8-path", test_non_utf8_path);
    g_test_add_func("/casedb/search", test_search);
    g_test_add_func("/casedb/escaping", test_escaping);
    g_test_add_func("/casedb/read-only", test_read_only);
    g_test_add_func("/casedb/reader-while-writing", test_reader_while_writing);
    g_test_add_func("/casedb/wrong-thread", test_wrong_thread);
    g_test_add_func("/casedb/two-reviewers", test_two_reviewers);
    g_test_add_func("/casedb/concurrent-writers", test_concurrent_writers);
    if (use_pg) {
        g_test_add_func("/casedb/postgresql/server-gone", test_server_gone);
        g_test_add_func("/casedb/postgresql/no-write-rights", test_no_write_rights);
        g_test_add_func("/casedb/postgresql/bench", test_bench_both);
        g_test_add_func("/casedb/postgresql/reconnect", test_reconnect);
        g_test_add_func("/casedb/postgresql/huge-text", test_huge_text);
    } else {
        /* the file's own: its WAL syncs, a read-only folder, a cap on its pages */
        g_test_add_func("/casedb/durable", test_durable);
        g_test_add_func("/casedb/read-only-folder", test_read_only_folder);
        g_test_add_func("/casedb/full", test_full);
    }
    int rc = g_test_run();
    if (use_pg)
        cl_fixture_postgres_stop(&pg);
    g_ptr_array_unref(fixtures);
    cl_fixture_rmdir(tmpdir);
    g_free(tmpdir);
    return rc;
}
