/* test-cuda.c - the CUDA backend against the CPU backend: every op, the whole model (logits,
 * update norms, Δ maps, identical greedy and beam decodes), in exact f32 and in TF32. Exits 77
 * (skipped) where no GPU is found or CUDA is not built in.
 *
 * Tolerances, and why:
 * - elementwise (GELU, SiLU, exp): one rounding of a function per element, with CUDA's erff and
 *   expf (≤ 2 ulp) against the CPU's vectorised polynomials (≤ 3e-7 relative): 2e-6 relative.
 * - reductions (norms, softmax, attention): the same sums in another order (tree reductions,
 *   online softmax) in f32: a few ulp of the row's magnitude, 1e-5 relative + 1e-6 absolute.
 * - products, f32: cuBLAS and OpenBLAS accumulate k terms in different orders; the error grows
 *   like √k·ulp: 1e-4 relative + 1e-5 absolute at k ≤ 576. TF32 keeps 10 mantissa bits of each
 *   input (relative rounding 2^-11 ≈ 5e-4 per factor), so a product's error is about
 *   5e-4·‖row‖·‖col‖/√k: 2e-2 absolute on these ±1 inputs, normalised squared error 1e-5.
 * - the whole model: each layer's error is carried through the next; 1e-3 relative + 1e-4
 *   absolute in f32, and the bound is the normalised squared error 1e-8 (f32) / 1e-4 (TF32).
 */
#include <glib.h>

#include "backend-check.h"

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_autoptr(GError) err = NULL;
    g_unsetenv("CHANGELENS_CUDA_MATH");
    ClBackend *f32 = cl_backend_cuda_new(0, &err);
    if (!f32) {
        g_printerr("skipped: %s\n", err->message);
        return 77;
    }
    g_setenv("CHANGELENS_CUDA_MATH", "tf32", TRUE);
    ClBackend *tf32 = cl_backend_cuda_new(0, &err);
    g_assert_no_error(err);
    g_printerr("CUDA device: %s\n", cl_backend_cuda_device_name(f32));

    const ClTolerances t_f32 = {
        .elementwise = { 2e-6, 1e-7, 1e-11 },
        .reduction = { 1e-5, 1e-6, 1e-10 },
        .product = { 1e-4, 1e-5, 1e-9 },
        .model = { 1e-3, 1e-4, 1e-8 },
    };
    const ClTolerances t_tf32 = {
        .elementwise = t_f32.elementwise,
        .reduction = t_f32.reduction,
        .product = { 2e-2, 2e-2, 1e-5 },
        .model = { 5e-2, 5e-2, 1e-4 },
    };
    cl_test_add_backend_checks("/cuda/f32", f32, &t_f32, TRUE);
    cl_test_add_backend_checks("/cuda/tf32", tf32, &t_tf32, TRUE);
    int rc = g_test_run();
    cl_backend_free(f32);
    cl_backend_free(tf32);
    return rc;
}
