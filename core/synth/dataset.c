/* dataset.c - a synthetic task's samples written as a data set: the images in the task's file
 * format (radiographs as DICOM, aerial tiles as GeoTIFF, the others as PNG, so that the data sets
 * exercise the real loaders) and data.jsonl. Not in the engine-only programs: the writers need
 * DCMTK and libgeotiff. */
#include "synth/synth-private.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdio.h>

static gboolean write_image(const char *ext, const ClSynthSample *s, int k, const char *path,
                            GError **error)
{
    if (g_str_equal(ext, "dcm"))
        return cl_synth_radiograph_write(s, k, path, error);
    if (g_str_equal(ext, "tif"))
        return cl_synth_aerial_write(s, k, path, error);
    return cl_synth_image_write_png(&s->images[k], path, error);
}

static gboolean dir_is_empty(const char *dir, gboolean *exists, GError **error)
{
    *exists = g_file_test(dir, G_FILE_TEST_EXISTS);
    if (!*exists)
        return TRUE;
    if (!g_file_test(dir, G_FILE_TEST_IS_DIR)) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_EXISTS, "%s exists and is not a folder",
                    dir);
        return FALSE;
    }
    g_autoptr(GDir) d = g_dir_open(dir, 0, error);
    if (!d)
        return FALSE;
    return g_dir_read_name(d) == NULL;
}

static gboolean io_error(GError **error, const char *what, const char *path, int e)
{
    g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_IO, "cannot %s %s: %s", what, path,
                g_strerror(e));
    return FALSE;
}

gboolean cl_synth_write_dataset(const char *dir, const char *task, guint64 seed, int n,
                                const ClSynthOptions *opts, gboolean force,
                                ClSynthProgress progress, gpointer user_data, GError **error)
{
    g_return_val_if_fail(dir && task, FALSE);
    const char *ext = cl_synth_task_ext(task);
    if (!ext) /* before touching the disk */
        return cl_synth_generate(task, 0, opts, error) != NULL;
    if (n < 1) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS,
                    "synth: the number of samples must be at least 1, not %d", n);
        return FALSE;
    }
    gboolean exists;
    GError *local = NULL;
    if (!dir_is_empty(dir, &exists, &local)) {
        if (local) {
            g_propagate_error(error, local);
            return FALSE;
        }
        if (!force) {
            g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_EXISTS,
                        "%s is not empty; choose another folder or pass --force to write into "
                        "it",
                        dir);
            return FALSE;
        }
    }
    g_autofree char *images = g_build_filename(dir, "images", NULL);
    if (g_mkdir_with_parents(images, 0755) != 0)
        return io_error(error, "create", images, errno);

    g_autofree char *final_path = g_build_filename(dir, "data.jsonl", NULL);
    g_autofree char *tmp_path = g_build_filename(dir, "data.jsonl.tmp", NULL);
    FILE *f = g_fopen(tmp_path, "wb");
    if (!f)
        return io_error(error, "create", tmp_path, errno);
    gboolean ok = TRUE;
    for (int i = 0; ok && i < n; i++) {
        g_autoptr(ClSynthSample) s =
            cl_synth_generate(task, cl_synth_stream_seed(seed, i), opts, error);
        if (!s) {
            ok = FALSE;
            break;
        }
        g_autoptr(GPtrArray) rel = g_ptr_array_new_with_free_func(g_free);
        for (int k = 0; ok && k < s->n_images; k++) {
            char *r = g_strdup_printf("images/%06d-%d.%s", i + 1, k + 1, ext);
            g_ptr_array_add(rel, r);
            g_autofree char *path = g_build_filename(dir, r, NULL);
            ok = write_image(ext, s, k, path, error);
        }
        if (!ok)
            break;
        g_ptr_array_add(rel, NULL);
        g_autofree char *id = g_strdup_printf("%s-%06d", s->task, i + 1);
        g_autofree char *line = cl_synth_sample_to_jsonl(s, id, (const char *const *)rel->pdata);
        if (fputs(line, f) == EOF || fputc('\n', f) == EOF) {
            ok = io_error(error, "write", tmp_path, errno);
            break;
        }
        if (progress)
            progress(i + 1, n, user_data);
    }
    if (fclose(f) != 0 && ok)
        ok = io_error(error, "write", tmp_path, errno);
    if (ok && g_rename(tmp_path, final_path) != 0)
        ok = io_error(error, "rename to data.jsonl", tmp_path, errno);
    if (!ok)
        g_unlink(tmp_path);
    return ok;
}
