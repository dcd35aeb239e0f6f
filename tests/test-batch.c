/* test-batch.c - `changelens-cli batch describe|status`: a manifest described in shards that
 * write into one case database at the same time, one shard killed in the middle and run again —
 * every line described exactly once, nothing lost; a re-run of every shard describes nothing;
 * malformed manifests and shard values refused with the line or the reason. With
 * CHANGELENS_TEST_ENGINE=postgresql (meson's `batch-postgresql`) the shards write into a database
 * on a PostgreSQL server the test starts on a loopback port and stops. */
#include <gio/gio.h>
#include <glib/gstdio.h>

#include "casedb/casedb.h"
#include "fixtures.h"

static char *tmp, *manifest, *db;
static gboolean use_pg;
static ClFixturePostgres pg;

enum { N_LINES = 18, N_SHARDS = 3 };

static GSubprocess *start_shard(int k, GError **error)
{
    g_autofree char *shard = g_strdup_printf("%d/%d", k, N_SHARDS);
    const char *argv[] = { g_getenv("CL_CLI"), "batch",   "--db", db,  "describe",
                           manifest,           "--shard", shard,  NULL };
    return g_subprocess_newv(argv, G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE,
                             error);
}

/* The number of runs recorded and of distinct cases they belong to. */
static void count_runs(guint *runs, guint *cases)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(ClCaseDb) d = cl_casedb_open(db, CL_CASEDB_OPEN_DEFAULT, &err);
    g_assert_no_error(err);
    g_autoptr(GPtrArray) list = cl_casedb_list(d, &err);
    g_assert_no_error(err);
    *runs = 0, *cases = list->len;
    for (guint i = 0; i < list->len; i++) {
        const ClCaseSummary *s = g_ptr_array_index(list, i);
        g_autoptr(ClCase) c = cl_casedb_get_case(d, s->id, CL_CASE_GET_DEFAULT, &err);
        g_assert_no_error(err);
        g_assert_cmpuint(c->runs->len, <=, 1); /* never described twice */
        *runs += c->runs->len;
    }
}

static char *status_json(void)
{
    const char *args[] = { "batch", "--db", db, "status", manifest, "--json", NULL };
    g_autoptr(JsonNode) n = cl_fixture_cli_json(args);
    return json_to_string(n, FALSE);
}

static void test_shards(void)
{
    g_autoptr(GError) err = NULL;
    /* shard 1 is killed once it has described its first line (and, perhaps, is inside its
     * second); shards 2 and 3 run beside it to the end */
    g_autoptr(GSubprocess) victim = start_shard(1, &err);
    g_assert_no_error(err);
    g_autoptr(GSubprocess) s2 = start_shard(2, &err);
    g_autoptr(GSubprocess) s3 = start_shard(3, &err);
    g_assert_no_error(err);
    g_autoptr(GDataInputStream) in = g_data_input_stream_new(g_subprocess_get_stderr_pipe(victim));
    gboolean progressed = FALSE;
    char *line;
    while (!progressed && (line = g_data_input_stream_read_line(in, NULL, NULL, &err))) {
        progressed = strstr(line, "described now") != NULL;
        g_free(line);
    }
    g_assert_true(progressed);
    g_subprocess_force_exit(victim);
    g_assert_true(g_subprocess_wait(victim, NULL, &err));
    g_assert_false(g_subprocess_get_successful(victim));
    GSubprocess *others[] = { s2, s3 };
    for (int i = 0; i < 2; i++) {
        g_autofree char *o = NULL, *e = NULL;
        g_assert_true(g_subprocess_communicate_utf8(others[i], NULL, NULL, &o, &e, &err));
        if (!g_subprocess_get_successful(others[i]))
            g_error("shard %d failed: %s%s", i + 2, o, e);
    }

    g_autofree char *mid = status_json();
    g_test_message("after the kill: %s", mid);
    g_assert_null(strstr(mid, "\"not_started\":0,")); /* shard 1 had lines left */

    /* shard 1 again: it redoes what it had not recorded, and only that */
    g_autoptr(GSubprocess) again = start_shard(1, &err);
    g_autofree char *out = NULL;
    g_assert_true(g_subprocess_communicate_utf8(again, NULL, NULL, &out, NULL, &err));
    g_assert_no_error(err);
    g_assert_true(g_subprocess_get_successful(again));
    g_assert_nonnull(strstr(out, "described before"));

    g_autofree char *end = status_json();
    g_autofree char *want = g_strdup_printf("{\"batch\":\"manifest\",\"lines\":%d,\"described\":%d,"
                                            "\"made_not_described\":0,\"not_started\":0}",
                                            N_LINES, N_LINES);
    g_assert_cmpstr(end, ==, want);
    guint runs, cases;
    count_runs(&runs, &cases);
    g_assert_cmpuint(runs, ==, N_LINES);
    g_assert_cmpuint(cases, ==, N_LINES);

    /* every shard once more: nothing left to do */
    for (int k = 1; k <= N_SHARDS; k++) {
        g_autoptr(GSubprocess) p = start_shard(k, &err);
        g_autofree char *o = NULL;
        g_assert_true(g_subprocess_communicate_utf8(p, NULL, NULL, &o, NULL, &err));
        g_assert_true(g_subprocess_get_successful(p));
        g_assert_nonnull(strstr(o, " 0 described now, 6 described before, 0 failed"));
    }
    count_runs(&runs, &cases);
    g_assert_cmpuint(runs, ==, N_LINES);

    /* a batch name is the user's text: quotes and backslashes stay valid JSON */
    const char *name = "the \"quoted\" \\ batch";
    const char *args[] = {
        "batch", "--db", db, "status", manifest, "--name", name, "--json", NULL
    };
    g_autoptr(JsonNode) st = cl_fixture_cli_json(args);
    JsonObject *o = json_node_get_object(st);
    g_assert_cmpstr(json_object_get_string_member(o, "batch"), ==, name);
    g_assert_cmpint(json_object_get_int_member(o, "not_started"), ==, N_LINES);
}

/* Several connections creating the same new database at once (a job array's first tasks): each
 * waits for the others instead of failing — switching a new file to write-ahead logging needs
 * it alone, and SQLite answers "busy" at once there rather than wait. Threads released together
 * from a barrier, each with its own connection, as processes would have. */
typedef struct {
    const char *path;
    gint *go;
    GError *error;
} Opener;

static gpointer open_new(gpointer data)
{
    Opener *o = data;
    while (!g_atomic_int_get(o->go))
        ;
    ClCaseDb *d = cl_casedb_open(o->path, CL_CASEDB_OPEN_DEFAULT, &o->error);
    gint64 id = 0;
    if (d && cl_casedb_case_new(d, "a case", &id, &o->error))
        g_assert_cmpint(id, >, 0);
    if (d)
        cl_casedb_close(d);
    return NULL;
}

static void test_new_database_at_once(void)
{
    enum { ROUNDS = 40, AT_ONCE = 6 };
    for (int r = 0; r < (use_pg ? ROUNDS / 4 : ROUNDS); r++) {
        g_autofree char *name = g_strdup_printf("new-%d.db", r);
        g_autofree char *path = use_pg ? cl_fixture_postgres_new_database(&pg, name)
                                       : g_build_filename(tmp, name, NULL);
        gint go = 0;
        Opener o[AT_ONCE];
        GThread *t[AT_ONCE];
        for (int i = 0; i < AT_ONCE; i++) {
            o[i] = (Opener){ path, &go, NULL };
            t[i] = g_thread_new("opener", open_new, &o[i]);
        }
        g_atomic_int_set(&go, 1);
        for (int i = 0; i < AT_ONCE; i++) {
            g_thread_join(t[i]);
            if (o[i].error)
                g_error("round %d, connection %d: %s", r, i, o[i].error->message);
        }
        g_autoptr(GError) err = NULL;
        g_autoptr(ClCaseDb) d = cl_casedb_open(path, CL_CASEDB_OPEN_DEFAULT, &err);
        g_assert_no_error(err);
        g_autoptr(GPtrArray) list = cl_casedb_list(d, &err);
        g_assert_cmpuint(list->len, ==, AT_ONCE);
        g_assert_cmpint(cl_casedb_user_version(d), ==, cl_casedb_schema_version());
    }
}

static void expect_refused(const char *text, const char *shard, const char *what)
{
    g_autofree char *bad = g_build_filename(tmp, "bad.jsonl", NULL);
    g_assert_true(g_file_set_contents(bad, text, -1, NULL));
    const char *args[] = { "batch", "--db", db, "describe", bad, shard ? "--shard" : NULL,
                           shard,   NULL };
    g_autofree char *err = NULL;
    int rc = cl_fixture_run_cli(args, &err);
    g_assert_cmpint(rc, !=, 0);
    if (!strstr(err, what))
        g_error("expected '%s' in: %s", what, err);
}

static void test_refusals(void)
{
    expect_refused("{\"images\": [\"a.png\", \"b.png\"]}\n{\"images\": [\"a.png\"]\n", NULL,
                   "bad.jsonl line 2:");
    expect_refused("{\"images\": [\"a.png\"]}\n", NULL, "at least two images");
    expect_refused("[1, 2]\n", NULL, "not an object with an \"images\" list");
    expect_refused("{\"key\": \"x\", \"images\": [\"a\", \"b\"]}\n"
                   "{\"key\": \"x\", \"images\": [\"a\", \"b\"]}\n",
                   NULL, "key \"x\" is used twice");
    expect_refused("{\"images\": [\"a.png\", 7]}\n", NULL, "image 2 is not a file name");
    g_autofree char *deep = g_strnfill(100000, '[');
    expect_refused(deep, NULL, "nested too deeply");
    expect_refused("{\"images\": [\"a\", \"b\"]}\n", "4/3", "--shard is K/N");
    expect_refused("{\"images\": [\"a\", \"b\"]}\n", "0/3", "--shard is K/N");
    /* an image that is not there: the line fails, the run says so and goes on */
    expect_refused("{\"images\": [\"missing-1.png\", \"missing-2.png\"]}\n", NULL, "missing-1.png");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    tmp = cl_fixture_tmpdir("changelens-batch");
    g_autofree char *set = g_build_filename(tmp, "set", NULL);
    g_autofree char *n = g_strdup_printf("%d", N_LINES);
    const char *synth[] = {
        "synth", "--task", "edits", "--n", n, "--seed", "11", "--out", set, NULL
    };
    g_assert_cmpint(cl_fixture_run_cli(synth, NULL), ==, 0);
    /* the set's data.jsonl is a manifest (its lines' "images"; the rest is ignored) */
    g_autofree char *data = g_build_filename(set, "data.jsonl", NULL);
    manifest = g_build_filename(set, "manifest.jsonl", NULL);
    g_assert_cmpint(g_rename(data, manifest), ==, 0);
    use_pg = g_strcmp0(g_getenv("CHANGELENS_TEST_ENGINE"), "postgresql") == 0;
    if (use_pg) {
        g_autofree char *why = NULL;
        if (!cl_fixture_postgres_start(&pg, &why)) {
            g_printerr("SKIP: %s\n", why);
            cl_fixture_rmdir(tmp);
            return 77;
        }
        db = cl_fixture_postgres_new_database(&pg, "cases");
    } else {
        db = g_build_filename(tmp, "cases.db", NULL);
    }
    g_test_add_func("/batch/shards", test_shards);
    g_test_add_func("/batch/refusals", test_refusals);
    g_test_add_func("/batch/new-database-at-once", test_new_database_at_once);
    int rc = g_test_run();
    if (use_pg)
        cl_fixture_postgres_stop(&pg);
    cl_fixture_rmdir(tmp);
    return rc;
}
