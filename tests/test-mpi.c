/* test-mpi.c - data-parallel training over MPI: `mpirun -np 2 changelens-cli train --mpi` (Open
 * MPI on this machine, shared memory only) gives the one-process run's parameters within float
 * rounding, writes one log, one set of checkpoints and one model, and its checkpoint resumes in
 * one process. Skipped (77) without MPI in the build or without mpirun. */
#include <glib/gstdio.h>
#include <math.h>

#include "fixtures.h"
#include "model/model.h"
#include "train/params.h"
#include "train/mpi.h"

static char *tmp;

/* mpirun's own options: this machine only (no ssh needed), shared memory only, root allowed (CI
 * runs as root), more ranks than cores allowed */
static const char *const mpirun_opts[] = {
    "--allow-run-as-root", "--oversubscribe", "--mca", "plm", "isolated", "--mca", "btl",
    "self,vader"
};

/* The train command's arguments for a run of `steps` into dir (NULL-terminated, static). */
static void train_args(const char **argv, int *n, const char *dir, const char *steps)
{
    const char *a[] = { "train",
                        "--preset",
                        "tiny",
                        "--task",
                        "shapes",
                        "--steps",
                        steps,
                        "--batch",
                        "4",
                        "--seed",
                        "3",
                        "--workers",
                        "1",
                        "--quiet",
                        "--out",
                        dir,
                        "--checkpoint-every",
                        "2" };
    for (guint i = 0; i < G_N_ELEMENTS(a); i++)
        argv[(*n)++] = a[i];
}

/* Runs the CLI under mpirun with `ranks` ranks (0: without mpirun); extra: more arguments. */
static void run_train(int ranks, const char *dir, const char *steps, const char *extra)
{
    const char *argv[64];
    int n = 0;
    g_autofree char *np = g_strdup_printf("%d", ranks);
    if (ranks > 0) {
        argv[n++] = "mpirun";
        for (guint i = 0; i < G_N_ELEMENTS(mpirun_opts); i++)
            argv[n++] = mpirun_opts[i];
        argv[n++] = "-np";
        argv[n++] = np;
    }
    argv[n++] = g_getenv("CL_CLI");
    train_args(argv, &n, dir, steps);
    if (ranks > 0)
        argv[n++] = "--mpi";
    if (extra)
        argv[n++] = extra;
    argv[n] = NULL;
    g_autofree char *out = NULL, *err = NULL;
    int status = 0;
    g_autoptr(GError) e = NULL;
    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out,
                               &err, &status, &e));
    if (!g_spawn_check_wait_status(status, NULL))
        g_error("train (%d ranks) failed: %s", ranks, err);
    /* the model's path once, from rank 0 */
    g_autofree char *want = g_build_filename(dir, "model.safetensors", NULL);
    g_autofree char *want_line = g_strconcat(want, "\n", NULL);
    g_assert_cmpstr(out, ==, want_line);
}

/* The largest difference between two models' parameters, relative to the largest parameter. */
static double model_gap(const char *dir_a, const char *dir_b)
{
    g_autofree char *pa = g_build_filename(dir_a, "model.safetensors", NULL);
    g_autofree char *pb = g_build_filename(dir_b, "model.safetensors", NULL);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClModel) a = cl_model_load(pa, &err);
    g_assert_no_error(err);
    g_autoptr(ClModel) b = cl_model_load(pb, &err);
    g_assert_no_error(err);
    /* every parameter in the arena, in spec order */
    g_assert_true(cl_model_make_trainable(a, NULL) && cl_model_make_trainable(b, NULL));
    g_assert_cmpuint(a->n_params, ==, b->n_params);
    double gap = 0, top = 0;
    for (size_t i = 0; i < a->n_params; i++) {
        gap = MAX(gap, fabs((double)a->arena[i] - b->arena[i]));
        top = MAX(top, fabs((double)a->arena[i]));
    }
    return gap / top;
}

static guint count_files(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    guint n = 0;
    while (d && g_dir_read_name(d))
        n++;
    return n;
}

static void test_parity(void)
{
    g_autofree char *one = g_build_filename(tmp, "one", NULL);
    g_autofree char *two = g_build_filename(tmp, "two", NULL);
    run_train(0, one, "4", NULL);
    run_train(2, two, "4", NULL);
    double gap = model_gap(one, two);
    /* the same samples and the same mean gradient, summed in another order: f32 rounding,
     * carried through four AdamW steps */
    g_test_message("2 ranks against 1 process after 4 steps: largest difference %.2e of the "
                   "largest parameter",
                   gap);
    g_assert_cmpfloat(gap, <, 1e-4);
    g_assert_cmpfloat(gap, >=, 0);
    /* rank 0 alone wrote: the same files as the one-process run's */
    g_autofree char *ck_one = g_build_filename(one, "checkpoints", NULL);
    g_autofree char *ck_two = g_build_filename(two, "checkpoints", NULL);
    g_assert_cmpuint(count_files(two), ==, count_files(one));
    g_assert_cmpuint(count_files(ck_two), ==, count_files(ck_one));
    /* one log, every step once */
    g_autofree char *log = g_build_filename(two, "train.jsonl", NULL), *text = NULL;
    g_assert_true(g_file_get_contents(log, &text, NULL, NULL));
    for (int s = 1; s <= 4; s++) {
        g_autofree char *rec = g_strdup_printf("\"type\":\"train\",\"step\":%d,", s);
        const char *at = strstr(text, rec);
        g_assert_nonnull(at);
        g_assert_null(strstr(at + 1, rec));
    }
}

/* The two-rank run's checkpoint at step 2, resumed by one process to step 4 (and the
 * one-process run's, by two ranks): the one-process run's parameters again. */
static void test_resume_other_count(void)
{
    g_autofree char *one = g_build_filename(tmp, "one", NULL);
    g_autofree char *two = g_build_filename(tmp, "two", NULL);
    g_autofree char *mixed = g_build_filename(tmp, "mixed", NULL);
    g_autofree char *mixed2 = g_build_filename(tmp, "mixed2", NULL);
    g_autofree char *ck_two =
        g_build_filename(two, "checkpoints", "step-00000002.safetensors", NULL);
    g_autofree char *ck_one =
        g_build_filename(one, "checkpoints", "step-00000002.safetensors", NULL);
    g_autofree char *from_two = g_strconcat("--resume-from=", ck_two, NULL);
    g_autofree char *from_one = g_strconcat("--resume-from=", ck_one, NULL);
    run_train(0, mixed, "4", from_two);
    double gap = model_gap(one, mixed);
    g_test_message("2 ranks to step 2, then 1 process to step 4, against 1 process: %.2e", gap);
    g_assert_cmpfloat(gap, <, 1e-4);
    run_train(2, mixed2, "4", from_one);
    gap = model_gap(one, mixed2);
    g_test_message("1 process to step 2, then 2 ranks to step 4, against 1 process: %.2e", gap);
    g_assert_cmpfloat(gap, <, 1e-4);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    if (!cl_train_mpi_available()) {
        g_print("1..0 # SKIP this build has no MPI\n");
        return 77;
    }
    g_autofree char *mpirun = g_find_program_in_path("mpirun");
    if (!mpirun) {
        g_print("1..0 # SKIP mpirun not found (Debian: openmpi-bin)\n");
        return 77;
    }
    tmp = cl_fixture_tmpdir("changelens-mpi");
    g_test_add_func("/mpi/parity", test_parity);
    g_test_add_func("/mpi/resume-other-count", test_resume_other_count);
    int rc = g_test_run();
    cl_fixture_rmdir(tmp);
    g_free(tmp);
    return rc;
}
