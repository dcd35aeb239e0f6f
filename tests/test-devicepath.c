/* test-devicepath.c - the engine's device code paths on any machine: the whole model and every
 * op through a backend whose memory the host cannot touch (backend-check.h), which must give
 * the CPU's results bit for bit. A host read of device memory, a missing upload or download, or
 * a weight the device copy lacks fails here without a GPU. */
#include <glib.h>

#include "backend-check.h"
#include "train-step-check.h"

static ClBackend *walled;

/* The wall holds: a host read of the backend's memory faults (so the checks above mean
 * something), while upload and download reach it. */
static void test_wall(void)
{
    float *d = walled->ops->alloc(walled, 4 * sizeof(float));
    const float v[4] = { 1, 2, 3, 4 };
    float back[4] = { 0 };
    walled->ops->upload(walled, d, v, sizeof v);
    walled->ops->download(walled, back, d, sizeof back);
    g_assert_cmpmem(back, sizeof back, v, sizeof v);
    if (g_test_subprocess()) {
        volatile float x = d[2]; /* must fault */
        g_print("read %g\n", x);
        return;
    }
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_failed();
    g_test_trap_assert_stdout_unmatched("*read*");
    walled->ops->release(walled, d);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    walled = cl_test_walled_backend_new();
    g_test_add_func("/devicepath/wall", test_wall);
    /* the same CPU ops on the same values: exact */
    const ClTolerances exact = { { 0, 0, 0 }, { 0, 0, 0 }, { 0, 0, 0 }, { 0, 0, 0 } };
    cl_test_add_backend_checks("/devicepath", walled, &exact, TRUE);
    /* a whole training step (forward, backward, the update) in the backend's memory: the same
     * ops on the same values, so the same parameters to the bit */
    cl_test_add_train_step_checks("/devicepath", walled, 0, 0);
    int rc = g_test_run();
    cl_backend_free(walled);
    return rc;
}
