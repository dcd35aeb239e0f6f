/* test-cli-case.c - `changelens-cli case …` end to end, as a script would drive it: new prints
 * the id, add/describe/edit/accept record what they say, show/list/search --json report it,
 * export writes every format (the PDF rendered with pdftoppm), DICOM cases are de-identified by
 * default, moved files are reported and refused by describe, usage errors exit 2, a newer
 * database is refused and left untouched. */
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixtures.h"

typedef struct {
    int status;
    char *out, *err;
} Run;

static void run_clear(Run *r)
{
    g_free(r->out);
    g_free(r->err);
    memset(r, 0, sizeof *r);
}

static char *db_path;

/* changelens-cli ARGS… exactly as given (NULL-terminated), --db wherever the caller puts it */
static void run_args(Run *r, const char *const *args)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, (char *)g_getenv("CL_CLI"));
    for (const char *const *a = args; *a; a++)
        g_ptr_array_add(argv, (char *)*a);
    g_ptr_array_add(argv, NULL);
    g_autoptr(GError) error = NULL;
    int status = 0;
    g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                               &r->out, &r->err, &status, &error));
    g_assert_no_error(error);
    if (!WIFEXITED(status))
        g_error("changelens-cli died (status %d): %s", status, r->err);
    r->status = WEXITSTATUS(status);
}

/* changelens-cli case --db DB ARGS… (NULL-terminated) */
static void run_case(Run *r, ...)
{
    g_autoptr(GPtrArray) args = g_ptr_array_new();
    g_ptr_array_add(args, "case");
    g_ptr_array_add(args, "--db");
    g_ptr_array_add(args, db_path);
    va_list ap;
    va_start(ap, r);
    const char *a;
    while ((a = va_arg(ap, const char *)))
        g_ptr_array_add(args, (char *)a);
    va_end(ap);
    g_ptr_array_add(args, NULL);
    run_args(r, (const char *const *)args->pdata);
}

static void expect_ok(Run *r)
{
    if (r->status != 0)
        g_error("expected success, got exit %d: %s", r->status, r->err);
}

static JsonNode *parse_json(const char *text)
{
    g_autoptr(JsonParser) p = json_parser_new();
    g_autoptr(GError) error = NULL;
    if (!json_parser_load_from_data(p, text, -1, &error))
        g_error("not JSON (%s): %.300s", error->message, text);
    return json_node_copy(json_parser_get_root(p));
}

static JsonNode *show_json(const char *id)
{
    Run r = { 0 };
    run_case(&r, "show", id, "--json", NULL);
    expect_ok(&r);
    JsonNode *n = parse_json(r.out);
    run_clear(&r);
    return n;
}

static JsonArray *member_array(JsonNode *root, const char *name)
{
    return json_object_get_array_member(json_node_get_object(root), name);
}

static gboolean file_contains(const char *path, const char *needle)
{
    g_autofree char *data = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(path, &data, &len, NULL));
    return g_strstr_len(data, (gssize)len, needle) != NULL;
}

static char *tmp;

static void test_workflow(void)
{
    Run r = { 0 };
    /* reading an absent database says so and creates nothing */
    run_case(&r, "list", NULL);
    g_assert_cmpint(r.status, ==, 1);
    g_assert_nonnull(strstr(r.err, "no case database"));
    g_assert_false(g_file_test(db_path, G_FILE_TEST_EXISTS));
    run_clear(&r);

    /* new prints the id and nothing else */
    const char *name = "Follow-up 'O''Brien' <b>\"quoted\"</b>; DROP TABLE cases;--";
    run_case(&r, "new", name, NULL);
    expect_ok(&r);
    g_assert_cmpstr(r.out, ==, "1\n");
    run_clear(&r);

    /* images: the demo pair plus a three-page TIFF (three images) */
    g_autofree char *demo = g_build_filename(tmp, "demo", NULL);
    const char *dargv[] = { g_getenv("CL_CLI"), "demo", "--out", demo, NULL };
    int st = 0;
    g_assert_true(g_spawn_sync(NULL, (char **)dargv, NULL,
                               G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL,
                               NULL, NULL, &st, NULL));
    g_autofree char *before = g_build_filename(demo, "before.png", NULL);
    g_autofree char *after = g_build_filename(demo, "after.png", NULL);
    g_autofree char *missing = g_build_filename(tmp, "nope.png", NULL);
    /* one bad file: nothing is added */
    run_case(&r, "add", "1", before, missing, NULL);
    g_assert_cmpint(r.status, ==, 1);
    g_assert_nonnull(strstr(r.err, "nothing was added"));
    run_clear(&r);
    run_case(&r, "add", "1", before, after, NULL);
    expect_ok(&r);
    run_clear(&r);
    g_autoptr(JsonNode) s1 = show_json("1");
    g_assert_cmpuint(json_array_get_length(member_array(s1, "images")), ==, 2);
    JsonObject *c1 = json_object_get_object_member(json_node_get_object(s1), "case");
    g_assert_cmpstr(json_object_get_string_member(c1, "name"), ==, name);

    /* describe records a run, version 1 by the model, and a heatmap for image 2 */
    run_case(&r, "describe", "1", "--random-init", "tiny", "--seed", "3", "--max-tokens", "6",
             "--device", "cpu", NULL);
    expect_ok(&r);
    g_assert_nonnull(strstr(r.err, "recorded run"));
    run_clear(&r);
    g_autoptr(JsonNode) s2 = show_json("1");
    g_assert_cmpuint(json_array_get_length(member_array(s2, "runs")), ==, 1);
    JsonArray *descs = member_array(s2, "descriptions");
    g_assert_cmpuint(json_array_get_length(descs), ==, 1);
    JsonObject *v1 = json_array_get_object_element(descs, 0);
    g_assert_cmpstr(json_object_get_string_member(v1, "author"), ==, "model");
    g_assert_cmpstr(json_object_get_string_member(v1, "status"), ==, "draft");
    /* the mean over the encoder's blocks (layer -1), then each block's map (tiny: 6 blocks) */
    JsonArray *heat = member_array(s2, "heatmaps");
    g_assert_cmpuint(json_array_get_length(heat), ==, 7);
    JsonObject *h = json_array_get_object_element(heat, 0);
    g_assert_cmpint(json_object_get_int_member(h, "layer"), ==, -1);
    for (guint l = 1; l < 7; l++)
        g_assert_cmpint(json_object_get_int_member(json_array_get_object_element(heat, l), "layer"),
                        ==, (gint64)l - 1);
    g_assert_cmpint(json_object_get_int_member(h, "grid_w"), ==, 10); /* tiny: 160 px / 16 */
    g_assert_cmpuint(json_array_get_length(json_object_get_array_member(h, "values")), ==, 100);
    JsonObject *run0 = json_array_get_object_element(member_array(s2, "runs"), 0);
    g_assert_true(
        g_str_has_prefix(json_object_get_string_member(run0, "model_name"), "random-init tiny"));

    /* edit, a stale edit refused (and the text kept), accept */
    run_case(&r, "edit", "1", "A new lamp appears on the left; the chair is unchanged.", NULL);
    expect_ok(&r);
    run_clear(&r);
    g_autofree char *stale =
        g_strdup_printf("%" G_GINT64_FORMAT, json_object_get_int_member(v1, "id"));
    run_case(&r, "edit", "1", "stale text", "--base", stale, NULL);
    g_assert_cmpint(r.status, ==, 1);
    g_assert_nonnull(strstr(r.err, "NOT saved"));
    run_clear(&r);
    /* a sign-off of the version read before the edit is refused too */
    run_case(&r, "accept", "1", "--base", stale, NULL);
    g_assert_cmpint(r.status, ==, 1);
    g_assert_nonnull(strstr(r.err, "since you read it"));
    run_clear(&r);
    run_case(&r, "accept", "1", "--reviewer", "Dr. Okafor", NULL);
    expect_ok(&r);
    run_clear(&r);
    g_autoptr(JsonNode) s3 = show_json("1");
    descs = member_array(s3, "descriptions");
    g_assert_cmpuint(json_array_get_length(descs), ==, 3);
    JsonObject *v3 = json_array_get_object_element(descs, 2);
    g_assert_cmpint(json_object_get_int_member(v3, "version"), ==, 3);
    g_assert_cmpstr(json_object_get_string_member(v3, "status"), ==, "accepted");
    g_assert_cmpstr(json_object_get_string_member(v3, "author"), ==, "Dr. Okafor");
    g_assert_cmpstr(json_object_get_string_member(v3, "text"), ==,
                    "A new lamp appears on the left; the chair is unchanged.");
    /* the generated text is still there, unchanged */
    g_assert_cmpstr(json_object_get_string_member(json_array_get_object_element(descs, 0), "text"),
                    ==, json_object_get_string_member(v1, "text"));

    /* search finds the edited words, hostile queries are harmless */
    run_case(&r, "search", "lamp", "--json", NULL);
    expect_ok(&r);
    g_autoptr(JsonNode) hits = parse_json(r.out);
    g_assert_cmpuint(json_array_get_length(json_node_get_array(hits)), ==, 1);
    g_assert_cmpint(json_object_get_int_member(
                        json_array_get_object_element(json_node_get_array(hits), 0), "id"),
                    ==, 1);
    run_clear(&r);
    run_case(&r, "search", "\"", "AND", "NEAR(", "*", "'; DROP TABLE cases; --", NULL);
    expect_ok(&r);
    run_clear(&r);
    run_case(&r, "list", "--json", NULL);
    expect_ok(&r);
    g_autoptr(JsonNode) list = parse_json(r.out);
    g_assert_cmpuint(json_array_get_length(json_node_get_array(list)), ==, 1);
    g_assert_cmpstr(json_object_get_string_member(
                        json_array_get_object_element(json_node_get_array(list), 0), "status"),
                    ==, "accepted");
    run_clear(&r);

    /* a third image: a three-page TIFF adds three */
    g_autoptr(GPtrArray) tifs = g_ptr_array_new_with_free_func((GDestroyNotify)cl_fixture_free);
    g_autofree char *fx = g_build_filename(tmp, "fx", NULL);
    g_assert_cmpint(g_mkdir_with_parents(fx, 0700), ==, 0);
    g_assert_true(cl_fixtures_tiff(fx, tifs, NULL));
    const ClFixture *pages = cl_fixture_find(tifs, "pages3-grey16.tif");
    g_assert_nonnull(pages);
    run_case(&r, "new", "Three pages", NULL);
    expect_ok(&r);
    g_assert_cmpstr(r.out, ==, "2\n");
    run_clear(&r);
    run_case(&r, "add", "2", pages->path, NULL);
    expect_ok(&r);
    run_clear(&r);
    run_case(&r, "describe", "2", "--random-init", "tiny", "--max-tokens", "4", "--device", "cpu",
             NULL);
    expect_ok(&r);
    run_clear(&r);
    g_autoptr(JsonNode) s4 = show_json("2");
    g_assert_cmpuint(json_array_get_length(member_array(s4, "images")), ==, 3);
    /* images 2 and 3: each the mean and 6 blocks */
    g_assert_cmpuint(json_array_get_length(member_array(s4, "heatmaps")), ==, 2 * 7);

    /* export every format */
    g_autofree char *pdf = g_build_filename(tmp, "case2.pdf", NULL);
    g_autofree char *html = g_build_filename(tmp, "case1.html", NULL);
    g_autofree char *json = g_build_filename(tmp, "case1.json", NULL);
    run_case(&r, "export", "2", "--format", "pdf", "--out", pdf, "--paper", "letter", NULL);
    expect_ok(&r);
    run_clear(&r);
    run_case(&r, "export", "1", "--format", "html", "--out", html, NULL);
    expect_ok(&r);
    run_clear(&r);
    g_assert_true(file_contains(html, "data:image/png;base64,"));
    g_assert_true(file_contains(html, "A new lamp appears on the left"));
    g_assert_false(file_contains(html, "<b>\"quoted\"</b>")); /* the name is escaped */
    run_case(&r, "export", "1", "--format", "json", "--out", json, NULL);
    expect_ok(&r);
    run_clear(&r);
    g_autofree char *jtext = NULL;
    g_assert_true(g_file_get_contents(json, &jtext, NULL, NULL));
    g_autoptr(JsonNode) jroot = parse_json(jtext);
    g_assert_false(json_object_get_boolean_member(json_node_get_object(jroot), "deidentified"));
    g_autofree char *pdftoppm = g_find_program_in_path("pdftoppm");
    if (pdftoppm) {
        g_autofree char *prefix = g_build_filename(tmp, "page", NULL);
        const char *pargv[] = { pdftoppm, "-r", "30", "-png", pdf, prefix, NULL };
        g_assert_true(g_spawn_sync(NULL, (char **)pargv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL,
                                   NULL, &st, NULL));
        g_assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        g_autoptr(GDir) d = g_dir_open(tmp, 0, NULL);
        int n_pages = 0;
        const char *e;
        while ((e = g_dir_read_name(d)))
            n_pages += g_str_has_prefix(e, "page") && g_str_has_suffix(e, ".png");
        g_test_message("the three-image case's PDF has %d pages", n_pages);
        g_assert_cmpint(n_pages, >=, 1);
    }

    /* a moved file: show reports it, describe refuses without recording anything */
    g_autofree char *moved = g_build_filename(demo, "moved.png", NULL);
    g_assert_cmpint(g_rename(after, moved), ==, 0);
    run_case(&r, "show", "1", NULL);
    expect_ok(&r);
    g_assert_nonnull(strstr(r.out, "missing (moved or deleted)"));
    run_clear(&r);
    run_case(&r, "describe", "1", "--random-init", "tiny", "--device", "cpu", NULL);
    g_assert_cmpint(r.status, ==, 1);
    g_assert_nonnull(strstr(r.err, "moved or deleted"));
    run_clear(&r);
    g_autoptr(JsonNode) s5 = show_json("1");
    g_assert_cmpuint(json_array_get_length(member_array(s5, "runs")), ==, 1);
    /* a changed file */
    g_assert_true(g_file_set_contents(after, "not the same image", -1, NULL));
    run_case(&r, "show", "1", NULL);
    g_assert_nonnull(strstr(r.out, "changed"));
    run_clear(&r);

    /* delete */
    run_case(&r, "delete", "2", NULL);
    expect_ok(&r);
    run_clear(&r);
    run_case(&r, "show", "2", NULL);
    g_assert_cmpint(r.status, ==, 1);
    run_clear(&r);
}

static void test_dicom_deidentified(void)
{
    g_autoptr(GPtrArray) dcms = g_ptr_array_new_with_free_func((GDestroyNotify)cl_fixture_free);
    g_autofree char *fx = g_build_filename(tmp, "dcm", NULL);
    g_assert_cmpint(g_mkdir_with_parents(fx, 0700), ==, 0);
    g_assert_true(cl_fixtures_dicom(fx, dcms, NULL));
    const ClFixture *a = cl_fixture_find(dcms, "dicom-mono2-u16-le.dcm");
    const ClFixture *b = cl_fixture_find(dcms, "dicom-ct-s16-be.dcm");
    g_assert_nonnull(a);
    g_assert_nonnull(b);
    Run r = { 0 };
    run_case(&r, "new", "Chest", NULL);
    expect_ok(&r);
    g_autofree char *id = g_strstrip(g_strdup(r.out));
    run_clear(&r);
    run_case(&r, "add", id, a->path, b->path, NULL);
    expect_ok(&r);
    run_clear(&r);
    g_autoptr(JsonNode) s = show_json(id); /* show is for the user: not de-identified */
    JsonObject *img0 = json_array_get_object_element(member_array(s, "images"), 0);
    JsonObject *meta = json_object_get_object_member(img0, "metadata");
    g_assert_true(json_object_has_member(meta, "PatientID"));
    const char *pid = json_object_get_string_member(meta, "PatientID");
    g_assert_true(pid && *pid);
    g_autofree char *out = g_build_filename(tmp, "dicom.json", NULL);
    run_case(&r, "export", id, "--format", "json", "--out", out, NULL);
    expect_ok(&r);
    run_clear(&r);
    g_assert_false(file_contains(out, pid));
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(out, &text, NULL, NULL));
    g_autoptr(JsonNode) root = parse_json(text);
    g_assert_true(json_object_get_boolean_member(json_node_get_object(root), "deidentified"));
    run_case(&r, "export", id, "--format", "json", "--out", out, "--no-deidentify", NULL);
    expect_ok(&r);
    run_clear(&r);
    g_assert_true(file_contains(out, pid));
}

static void test_usage_and_newer_db(void)
{
    Run r = { 0 };
    run_case(&r, "new", NULL);
    g_assert_cmpint(r.status, ==, 2);
    run_clear(&r);
    run_case(&r, "show", "abc", NULL);
    g_assert_cmpint(r.status, ==, 2);
    run_clear(&r);
    run_case(&r, "export", "1", NULL);
    g_assert_cmpint(r.status, ==, 2);
    run_clear(&r);
    run_case(&r, "frobnicate", NULL);
    g_assert_cmpint(r.status, ==, 2);
    run_clear(&r);
    run_case(&r, "show", "999", NULL);
    g_assert_cmpint(r.status, ==, 1);
    run_clear(&r);

    /* a database from a newer ChangeLens: refused, and its bytes are untouched */
    g_autofree char *newer = g_build_filename(tmp, "newer.db", NULL);
    sqlite3 *s = NULL;
    g_assert_cmpint(sqlite3_open(newer, &s), ==, SQLITE_OK);
    g_assert_cmpint(
        sqlite3_exec(s, "CREATE TABLE future(x); PRAGMA user_version = 999;", NULL, NULL, NULL), ==,
        SQLITE_OK);
    sqlite3_close(s);
    g_autofree char *before = NULL;
    gsize n_before = 0;
    g_assert_true(g_file_get_contents(newer, &before, &n_before, NULL));
    char *saved = db_path;
    db_path = newer;
    run_case(&r, "new", "x", NULL);
    db_path = saved;
    g_assert_cmpint(r.status, ==, 1);
    g_assert_nonnull(strstr(r.err, "newer"));
    run_clear(&r);
    g_autofree char *after = NULL;
    gsize n_after = 0;
    g_assert_true(g_file_get_contents(newer, &after, &n_after, NULL));
    g_assert_cmpmem(before, n_before, after, n_after);
}

/* --db is taken out of the arguments wherever it stands, and what is left is exactly the
 * command's: a plain `search WORD` once became "WORD search WORD" (the removed --db PATH left
 * the last arguments twice), which matched nothing. */
static void test_db_option(void)
{
    g_autofree char *db = g_build_filename(tmp, "db-option.db", NULL);
    g_autofree char *db_eq = g_strconcat("--db=", db, NULL);
    Run r = { 0 };
    const char *const new1[] = { "case", "--db", db, "new", "Chest film of Okafor", NULL };
    run_args(&r, new1);
    expect_ok(&r);
    run_clear(&r);
    const char *const new2[] = { "case", "new", "Abdomen", "--db", db, NULL };
    run_args(&r, new2);
    expect_ok(&r);
    g_assert_cmpstr(r.out, ==, "2\n");
    run_clear(&r);
    const char *const *const finds_one[] = {
        (const char *const[]){ "case", "--db", db, "search", "chest", NULL },
        (const char *const[]){ "case", "--db", db, "search", "chest", "okafor", NULL },
        (const char *const[]){ "case", db_eq, "search", "film", NULL },
        (const char *const[]){ "case", "search", "--db", db, "chest", NULL },
        (const char *const[]){ "case", "search", "chest", "--db", db, NULL },
        (const char *const[]){ "case", "--db", db, "search", "-n", "5", "okafor", NULL },
    };
    for (guint i = 0; i < G_N_ELEMENTS(finds_one); i++) {
        run_args(&r, finds_one[i]);
        expect_ok(&r);
        if (!strstr(r.out, "Chest film of Okafor") || strstr(r.out, "Abdomen"))
            g_error("search %u found the wrong cases: %s", i, r.out);
        run_clear(&r);
    }
    /* the words left are the query's, no more: "search" itself is not searched for */
    const char *const none[] = { "case", "--db", db, "search", "abdomen", "chest", NULL };
    run_args(&r, none);
    expect_ok(&r);
    g_assert_null(strstr(r.out, "Abdomen"));
    g_assert_null(strstr(r.out, "Chest"));
    run_clear(&r);
    /* and a command's own arguments are as given: show takes exactly one id */
    const char *const show[] = { "case", "--db", db, "show", "2", NULL };
    run_args(&r, show);
    expect_ok(&r);
    g_assert_nonnull(strstr(r.out, "Abdomen"));
    run_clear(&r);
    const char *const no_path[] = { "case", "search", "chest", "--db", NULL };
    run_args(&r, no_path);
    g_assert_cmpint(r.status, ==, 2);
    g_assert_nonnull(strstr(r.err, "--db"));
    run_clear(&r);
}

/* An image whose file name is not UTF-8 is found again after `case add`: show says "ok". */
static void test_non_utf8_name(void)
{
    g_autofree char *dir = g_build_filename(tmp, "latin1", NULL);
    g_autofree char *db = g_build_filename(tmp, "latin1.db", NULL);
    Run r = { 0 };
    const char *const demo[] = { "demo", "--out", dir, NULL };
    run_args(&r, demo);
    expect_ok(&r);
    run_clear(&r);
    g_autofree char *before = g_build_filename(dir, "before.png", NULL);
    g_autofree char *after = g_build_filename(dir, "after.png", NULL);
    g_autofree char *latin1 = g_build_filename(dir, "Vorh\xe4r.png", NULL); /* Latin-1 ä */
    g_assert_cmpint(g_rename(before, latin1), ==, 0);
    const char *const new_case[] = { "case", "--db", db, "new", "Latin-1", NULL };
    run_args(&r, new_case);
    expect_ok(&r);
    run_clear(&r);
    const char *const add[] = { "case", "--db", db, "add", "1", latin1, after, NULL };
    run_args(&r, add);
    expect_ok(&r);
    run_clear(&r);
    const char *const show[] = { "case", "--db", db, "show", "1", "--json", NULL };
    run_args(&r, show);
    expect_ok(&r);
    g_autoptr(JsonNode) root = parse_json(r.out);
    run_clear(&r);
    JsonArray *images = member_array(root, "images");
    g_assert_cmpuint(json_array_get_length(images), ==, 2);
    for (guint i = 0; i < 2; i++)
        g_assert_cmpstr(
            json_object_get_string_member(json_array_get_object_element(images, i), "file_state"),
            ==, "ok");
}

static void obey_permissions(gpointer dir)
{
    cl_fixture_obey_permissions(dir);
}

/* A database in a folder that cannot be written: the reading commands work, a writing one
 * fails saying why. File permissions are made to apply even to root (the test's child). */
static void test_read_only_folder(void)
{
    g_autofree char *dir = g_build_filename(tmp, "read-only", NULL);
    g_autofree char *db = g_build_filename(dir, "cases.db", NULL);
    Run r = { 0 };
    const char *const new_case[] = { "case", "--db", db, "new", "Archived chest", NULL };
    run_args(&r, new_case);
    expect_ok(&r);
    run_clear(&r);
    const char *const edit[] = { "case", "--db", db, "edit", "1", "Stable nodule", NULL };
    run_args(&r, edit);
    expect_ok(&r);
    run_clear(&r);
    g_assert_cmpint(g_chmod(dir, 0555), ==, 0);
    pid_t probe = fork();
    g_assert_cmpint(probe, >=, 0);
    if (probe == 0)
        _exit(cl_fixture_obey_permissions(dir) ? 0 : 77);
    int status = 0;
    g_assert_cmpint(waitpid(probe, &status, 0), ==, probe);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        g_assert_cmpint(g_chmod(dir, 0700), ==, 0);
        g_test_skip("file permissions cannot be made to apply to this process");
        return;
    }
    const char *const *const reads[] = {
        (const char *const[]){ "case", "--db", db, "list", NULL },
        (const char *const[]){ "case", "--db", db, "show", "1", NULL },
        (const char *const[]){ "case", "--db", db, "search", "nodule", NULL },
        (const char *const[]){ "case", "--db", db, "new", "Another", NULL },
    };
    for (guint i = 0; i < G_N_ELEMENTS(reads); i++) {
        g_autoptr(GPtrArray) argv = g_ptr_array_new();
        g_ptr_array_add(argv, (char *)g_getenv("CL_CLI"));
        for (const char *const *a = reads[i]; *a; a++)
            g_ptr_array_add(argv, (char *)*a);
        g_ptr_array_add(argv, NULL);
        g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT,
                                   obey_permissions, dir, &r.out, &r.err, &status, NULL));
        g_assert_true(WIFEXITED(status));
        r.status = WEXITSTATUS(status);
        if (i < 3) {
            expect_ok(&r);
            g_assert_nonnull(strstr(r.out, "Archived chest"));
        } else { /* the write is refused, saying why */
            g_assert_cmpint(r.status, ==, 1);
            g_assert_nonnull(strstr(r.err, "can only be read"));
            g_assert_nonnull(strstr(r.err, "read-only"));
        }
        run_clear(&r);
    }
    g_assert_cmpint(g_chmod(dir, 0700), ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    tmp = cl_fixture_tmpdir("cl-cli-case");
    db_path = g_build_filename(tmp, "cases.db", NULL);
    /* the de-identification secret lives in the config dir: keep it out of the user's */
    g_autofree char *cfg = g_build_filename(tmp, "config", NULL);
    g_setenv("XDG_CONFIG_HOME", cfg, TRUE);
    g_test_add_func("/cli-case/workflow", test_workflow);
    g_test_add_func("/cli-case/dicom-deidentified", test_dicom_deidentified);
    g_test_add_func("/cli-case/usage-and-newer-db", test_usage_and_newer_db);
    g_test_add_func("/cli-case/db-option", test_db_option);
    g_test_add_func("/cli-case/non-utf8-name", test_non_utf8_name);
    g_test_add_func("/cli-case/read-only-folder", test_read_only_folder);
    int rc = g_test_run();
    cl_fixture_rmdir(tmp);
    g_free(db_path);
    return rc;
}
