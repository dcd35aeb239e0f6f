/* test-datadirs.c - where a program finds its data folders (the default model, the demo cases):
 * build folders inside and outside the source tree, installed and moved installs. */
#include "cl-config.h"

#include <glib/gstdio.h>
#include <string.h>

#include "model/model.h"

typedef struct {
    const char *exe, *source_root, *build_root;
    const char *want_source, *want_install;
} Layout;

static void check_layout(const Layout *l)
{
    g_autofree char *src = NULL, *inst = NULL;
    cl_data_dirs_for(l->exe, l->source_root, l->build_root, "/usr/local/bin", "/usr/local/share",
                     "models", &src, &inst);
    g_autofree char *src_c = g_canonicalize_filename(src, "/");
    g_autofree char *inst_c = g_canonicalize_filename(inst, "/");
    if (strcmp(src_c, l->want_source) != 0 || strcmp(inst_c, l->want_install) != 0)
        g_error("%s: data dirs %s and %s, expected %s and %s", l->exe, src_c, inst_c,
                l->want_source, l->want_install);
}

static void test_layouts(void)
{
    static const Layout layouts[] = {
        /* `meson setup ../b`: the build folder beside the tree, not in it */
        { "/home/u/b/app/changelens-cli", "/home/u/changelens", "/home/u/b",
          "/home/u/changelens/data/models", "/usr/local/share/changelens/models" },
        /* a build folder elsewhere, deeper */
        { "/tmp/builds/cl/release/app/changelens", "/home/u/changelens", "/tmp/builds/cl/release",
          "/home/u/changelens/data/models", "/usr/local/share/changelens/models" },
        /* build/ inside the tree (./run.sh), tests one level down */
        { "/home/u/changelens/build/tests/test-datadirs", "/home/u/changelens",
          "/home/u/changelens/build", "/home/u/changelens/data/models",
          "/usr/local/share/changelens/models" },
        /* installed to the configured prefix */
        { "/usr/local/bin/changelens", "/home/u/changelens", "/home/u/changelens/build",
          "/usr/local/bin/../../data/models", "/usr/local/share/changelens/models" },
        /* an install moved to another prefix */
        { "/opt/cl/bin/changelens", "/home/u/changelens", "/home/u/changelens/build",
          "/opt/data/models", "/opt/cl/share/changelens/models" },
        /* a build folder moved together with its tree */
        { "/srv/copy/build/app/changelens-cli", "/home/u/changelens", "/home/u/changelens/build",
          "/srv/copy/data/models", "/srv/copy/build/app/../share/changelens/models" },
        /* a sibling whose name only starts like the build folder is not inside it */
        { "/home/u/b2/app/changelens-cli", "/home/u/changelens", "/home/u/b", "/home/u/data/models",
          "/home/u/b2/share/changelens/models" },
    };
    for (guint i = 0; i < G_N_ELEMENTS(layouts); i++) {
        /* expected paths are compared canonical */
        Layout l = layouts[i];
        g_autofree char *ws = g_canonicalize_filename(l.want_source, "/");
        g_autofree char *wi = g_canonicalize_filename(l.want_install, "/");
        l.want_source = ws;
        l.want_install = wi;
        check_layout(&l);
    }
}

/* This very build: its data folders are the source tree's, which holds the default model and
 * the demo cases, and the default model is found there. */
static void test_this_build(void)
{
    const char *root = g_getenv("CL_SOURCE_ROOT");
    g_assert_nonnull(root);
    g_autofree char *models = NULL, *models_inst = NULL, *demo = NULL, *demo_inst = NULL;
    cl_data_dirs("models", &models, &models_inst);
    cl_data_dirs("demo", &demo, &demo_inst);
    g_autofree char *want_models = g_build_filename(root, "data", "models", NULL);
    g_autofree char *want_demo = g_build_filename(root, "data", "demo", NULL);
    g_autofree char *m = g_canonicalize_filename(models, "/");
    g_autofree char *wm = g_canonicalize_filename(want_models, "/");
    g_autofree char *d = g_canonicalize_filename(demo, "/");
    g_autofree char *wd = g_canonicalize_filename(want_demo, "/");
    g_assert_cmpstr(m, ==, wm);
    g_assert_cmpstr(d, ==, wd);
    g_autofree char *cases = g_build_filename(demo, "cases.json", NULL);
    g_assert_true(g_file_test(cases, G_FILE_TEST_IS_REGULAR));

    g_unsetenv("CHANGELENS_MODEL");
    g_autoptr(GError) err = NULL;
    g_autofree char *found = cl_model_find_default(&err);
    g_assert_no_error(err);
    g_autofree char *want = g_build_filename(wm, "changelens-default.safetensors", NULL);
    g_autofree char *found_c = g_canonicalize_filename(found, "/");
    g_assert_cmpstr(found_c, ==, want);

    /* by the images' domain: photographs get the photo model, radiographs and aerial tiles the
     * radiograph-and-aerial one, each only where set-up's EfficientNet-Lite0 is (an empty file
     * stands for it here); other domains, and every domain without it, the default model */
    g_autofree char *data = g_dir_make_tmp("cl-datadirs-XXXXXX", &err);
    g_assert_no_error(err);
    g_autofree char *pre = g_build_filename(data, "pretrained", NULL);
    g_autofree char *stem = g_build_filename(pre, "efficientnet-lite0.safetensors", NULL);
    g_setenv("CHANGELENS_DATA", data, TRUE);
    static const struct {
        ClChatDomain domain;
        const char *with_stem;
    } want_for[] = {
        { CL_CHAT_DOMAIN_EDITS, CL_MODEL_PHOTO_FILE },
        { CL_CHAT_DOMAIN_RADIOGRAPH, CL_MODEL_SCAN_FILE },
        { CL_CHAT_DOMAIN_AERIAL, CL_MODEL_SCAN_FILE },
        { CL_CHAT_DOMAIN_SHAPES, "changelens-default.safetensors" },
        { CL_CHAT_DOMAIN_GENERIC, "changelens-default.safetensors" },
    };
    for (int have_stem = 0; have_stem < 2; have_stem++) {
        if (have_stem) {
            g_assert_cmpint(g_mkdir_with_parents(pre, 0700), ==, 0);
            g_assert_true(g_file_set_contents(stem, "", 0, NULL));
        }
        for (guint i = 0; i < G_N_ELEMENTS(want_for); i++) {
            g_autofree char *f = cl_model_find_default_for(want_for[i].domain, &err);
            g_assert_no_error(err);
            g_autofree char *base = g_path_get_basename(f);
            g_assert_cmpstr(base, ==,
                            have_stem ? want_for[i].with_stem : "changelens-default.safetensors");
        }
    }
    g_unlink(stem);
    g_rmdir(pre);
    g_rmdir(data);
    g_unsetenv("CHANGELENS_DATA");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/datadirs/layouts", test_layouts);
    g_test_add_func("/datadirs/this-build", test_this_build);
    return g_test_run();
}
