/* test-cli.c - `changelens-cli info` end to end: every fixture, its JSON keys, its per-frame stats
 * against the values the fixture was written with, and failures with non-zero exits. */
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>

#include "fixtures.h"

static const char *cli_path(void)
{
    const char *p = g_getenv("CL_CLI");
    g_assert_nonnull(p); /* set by tests/meson.build */
    return p;
}

/* Runs the CLI with args; returns its exit status and captures stdout/stderr. */
static int run_cli(GPtrArray *args, char **out, char **err)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, (char *)cli_path());
    for (guint i = 0; i < args->len; i++)
        g_ptr_array_add(argv, g_ptr_array_index(args, i));
    g_ptr_array_add(argv, NULL);
    int status = 0;
    g_autoptr(GError) error = NULL;
    gboolean ok = g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, out,
                               err, &status, &error);
    g_assert_no_error(error);
    g_assert_true(ok);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    g_error("changelens-cli died: status %d; stderr: %s", status, err ? *err : "");
    return -1;
}

static gboolean close_enough(double got, double want, double tol)
{
    return fabs(got - want) <= tol + 1e-9 * MAX(1.0, fabs(want));
}

static void test_info_all_fixtures(void)
{
    g_autofree char *dir = cl_fixture_tmpdir("cl-test-cli");
    g_autoptr(GPtrArray) all = g_ptr_array_new_with_free_func((GDestroyNotify)cl_fixture_free);
    g_autoptr(GError) error = NULL;
    g_assert_true(cl_fixtures_all(dir, all, &error));
    g_assert_no_error(error);
    g_test_message("%u fixtures", all->len);
    g_assert_cmpuint(all->len, >=, 40); /* every loader contributes its variants */

    g_autoptr(GPtrArray) args = g_ptr_array_new();
    g_ptr_array_add(args, "info");
    g_ptr_array_add(args, "--json");
    g_ptr_array_add(args, "--stats");
    gboolean any_fail = FALSE;
    for (guint i = 0; i < all->len; i++) {
        ClFixture *f = g_ptr_array_index(all, i);
        g_ptr_array_add(args, f->path);
        any_fail |= f->must_fail;
    }
    g_autofree char *out = NULL, *err = NULL;
    int rc = run_cli(args, &out, &err);
    g_assert_cmpint(rc, ==, any_fail ? 1 : 0);

    g_autoptr(JsonParser) parser = json_parser_new();
    g_assert_true(json_parser_load_from_data(parser, out, -1, &error));
    g_assert_no_error(error);
    JsonArray *arr = json_node_get_array(json_parser_get_root(parser));
    g_assert_cmpuint(json_array_get_length(arr), ==, all->len);

    for (guint i = 0; i < all->len; i++) {
        ClFixture *f = g_ptr_array_index(all, i);
        JsonObject *o = json_array_get_object_element(arr, i);
        g_assert_cmpstr(json_object_get_string_member(o, "path"), ==, f->path);
        if (f->must_fail) {
            const char *msg = json_object_get_string_member(o, "error");
            g_assert_nonnull(msg);
            if (f->fail_contains)
                g_assert_nonnull(strstr(msg, f->fail_contains));
            g_assert_nonnull(strstr(err, f->path)); /* stderr names the file */
            continue;
        }
        g_assert_false(json_object_has_member(o, "error"));
        static const char *keys[] = { "path",        "format",   "width",
                                      "height",      "frames",   "bits",
                                      "channels",    "modality", "transfer_syntax",
                                      "photometric", "stats" };
        for (guint k = 0; k < G_N_ELEMENTS(keys); k++)
            if (!json_object_has_member(o, keys[k]))
                g_error("%s: JSON lacks key %s", f->what, keys[k]);
        g_assert_cmpstr(json_object_get_string_member(o, "format"), ==,
                        cl_image_format_name(f->format));
        g_assert_cmpint(json_object_get_int_member(o, "width"), ==, f->width);
        g_assert_cmpint(json_object_get_int_member(o, "height"), ==, f->height);
        g_assert_cmpint(json_object_get_int_member(o, "frames"), ==, f->frames);
        g_assert_cmpint(json_object_get_int_member(o, "channels"), ==, f->channels);
        g_assert_cmpint(json_object_get_int_member(o, "bits"), ==, f->bits);
        if (f->modality)
            g_assert_cmpstr(json_object_get_string_member(o, "modality"), ==, f->modality);
        if (f->transfer_syntax)
            g_assert_nonnull(
                strstr(json_object_get_string_member(o, "transfer_syntax"), f->transfer_syntax));
        JsonArray *stats = json_object_get_array_member(o, "stats");
        g_assert_cmpuint(json_array_get_length(stats), ==, f->frames);
        /* stats are in modality units: a per-sample tolerance scales with the slope */
        double tol = f->tolerance * fabs(f->rescale_slope);
        for (guint fr = 0; fr < f->frames; fr++) {
            JsonObject *s = json_array_get_object_element(stats, fr);
            ClFrameStats want;
            cl_fixture_expected_stats(f, fr, &want);
            double got[3] = { json_object_get_double_member(s, "min"),
                              json_object_get_double_member(s, "max"),
                              json_object_get_double_member(s, "mean") };
            double exp[3] = { want.min, want.max, want.mean };
            const char *names[3] = { "min", "max", "mean" };
            for (int k = 0; k < 3; k++)
                if (!close_enough(got[k], exp[k], tol))
                    g_error("%s: frame %u %s is %.10g, expected %.10g", f->what, fr, names[k],
                            got[k], exp[k]);
        }
    }
    cl_fixture_rmdir(dir);
}

static void test_info_text_and_errors(void)
{
    g_autofree char *dir = cl_fixture_tmpdir("cl-test-cli-err");
    g_autofree char *junk = g_build_filename(dir, "notes.txt", NULL);
    g_assert_true(g_file_set_contents(junk, "not an image\n", -1, NULL));
    g_autofree char *missing = g_build_filename(dir, "missing.png", NULL);

    g_autoptr(GPtrArray) args = g_ptr_array_new();
    g_ptr_array_add(args, "info");
    g_ptr_array_add(args, junk);
    g_ptr_array_add(args, missing);
    g_autofree char *out = NULL, *err = NULL;
    int rc = run_cli(args, &out, &err);
    g_assert_cmpint(rc, !=, 0);
    g_assert_nonnull(strstr(err, "notes.txt"));
    g_assert_nonnull(strstr(err, "not an image format"));
    g_assert_nonnull(strstr(err, "missing.png"));

    /* no files at all is a usage error */
    g_autoptr(GPtrArray) none = g_ptr_array_new();
    g_ptr_array_add(none, "info");
    g_autofree char *out2 = NULL, *err2 = NULL;
    g_assert_cmpint(run_cli(none, &out2, &err2), ==, 2);

    /* text mode on a real file prints its size and stats */
    g_autofree char *demo = g_build_filename(dir, "demo", NULL);
    g_autoptr(GPtrArray) dargs = g_ptr_array_new();
    g_ptr_array_add(dargs, "demo");
    g_ptr_array_add(dargs, "--out");
    g_ptr_array_add(dargs, demo);
    g_autofree char *out3 = NULL, *err3 = NULL;
    g_assert_cmpint(run_cli(dargs, &out3, &err3), ==, 0);
    g_autofree char *before = g_build_filename(demo, "before.png", NULL);
    g_autoptr(GPtrArray) targs = g_ptr_array_new();
    g_ptr_array_add(targs, "info");
    g_ptr_array_add(targs, "--stats");
    g_ptr_array_add(targs, before);
    g_autofree char *out4 = NULL, *err4 = NULL;
    g_assert_cmpint(run_cli(targs, &out4, &err4), ==, 0);
    g_assert_nonnull(strstr(out4, "512 × 512, 1 frame"));
    g_assert_nonnull(strstr(out4, "frame 1"));
    cl_fixture_rmdir(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/cli/info-all-fixtures", test_info_all_fixtures);
    g_test_add_func("/cli/info-text-and-errors", test_info_text_and_errors);
    return g_test_run();
}
