/* test-cuda.c - the CUDA backend against the CPU backend: every op, the whole model (logits,
 * update norms, Δ maps, identical greedy and beam decodes), in exact f32 and in TF32. Exits 77
 * (skipped) where no GPU is found or CUDA is not built in.
 *
 * Tolerances, and why (values here are O(1), inputs within ±8):
 * - elementwise (GELU, SiLU, exp): the CPU's vectorised erf/exp are within 2e-7·(1 + |x|) of
 *   the true function (core/nn/backend.h), CUDA's erff/expf within 2 ulp; at |x| ≤ 8 that is
 *   2e-6 absolute, and 2e-6 relative for large outputs.
 * - reductions (norms, softmax, attention): the same sums in another order (tree reductions,
 *   online softmax with __expf, whose error grows to ~25 ulp at arguments near −20): 1e-4
 *   relative + 1e-5 absolute, normalised squared error 1e-9.
 * - products, f32: cuBLAS and OpenBLAS add k terms in different orders; the difference grows
 *   like √k·ulp(partial sums): at k ≤ 576 and sums near 3, about 6e-6: 1e-4 relative + 1e-4
 *   absolute, normalised squared error 1e-9. TF32 keeps 10 mantissa bits of each factor
 *   (rounding 2^-11 ≈ 5e-4 relative), so a sum of k products is off by about
 *   5e-4·|term|·√k: 2e-2 relative + 2e-2 absolute, normalised squared error 1e-5.
 * - the whole model: each layer's error is carried into the next: 1e-3 relative + 1e-3 absolute
 *   and 1e-8 normalised in f32; 5e-2, 5e-2 and 1e-4 in TF32. Greedy and beam decodes must be
 *   the CPU's token for token in both (the CUDA backend's bar; a near-tie between two logits would
 *   show up here as a failure to look at, not be hidden by a tolerance).
 */
#include <glib.h>
#include <string.h>

#include "backend-check.h"
#include "train-step-check.h"
#include "nn/quant.h"

/* The device's dequantization (kernels/kernels.cu) against cl_dequantize_rows: the same f32
 * values bit for bit (one product d·q (+ m) of the same floats, or a widening). */
static void check_dequantize(ClBackend *be)
{
    enum { n = 37, k = 576 };
    g_autofree float *w = g_new(float, (size_t)n * k), *host = g_new(float, (size_t)n * k);
    g_autofree float *dev = g_new(float, (size_t)n * k);
    GRand *r = g_rand_new_with_seed(5);
    for (size_t i = 0; i < (size_t)n * k; i++)
        w[i] = (float)g_rand_double_range(r, -2, 2);
    g_rand_free(r);
    for (int t = 0; t < CL_QUANT_N_TYPES; t++) {
        size_t bytes = cl_quant_row_bytes(t, k) * n;
        g_autofree guint8 *q = g_malloc(bytes);
        cl_quantize_rows(t, w, q, n, k);
        cl_dequantize_rows(t, q, host, n, k);
        void *dq = be->ops->alloc(be, bytes);
        float *dout = be->ops->alloc(be, (size_t)n * k * sizeof(float));
        g_assert_true(dq && dout);
        be->ops->upload(be, dq, q, bytes);
        g_assert_true(cl_backend_cuda_dequantize(be, t, dout, dq, n, k));
        be->ops->download(be, dev, dout, (size_t)n * k * sizeof(float));
        g_autoptr(GError) err = NULL;
        g_assert_true(be->ops->finish(be, &err));
        g_assert_cmpmem(dev, (size_t)n * k * sizeof(float), host, (size_t)n * k * sizeof(float));
        be->ops->release(be, dq);
        be->ops->release(be, dout);
        g_printerr("dequantize %s on the device: %d × %d values equal to the CPU's\n",
                   cl_quant_type_name(t), n, k);
    }
}

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
    g_setenv("CHANGELENS_CUDA_MATH", "bf16", TRUE);
    ClBackend *bf16 = cl_backend_cuda_new(0, &err);
    g_assert_no_error(err);
    g_printerr("CUDA device: %s\n", cl_backend_cuda_device_name(f32));
    check_dequantize(f32);

    const ClTolerances t_f32 = {
        .elementwise = { 2e-6, 2e-6, 1e-10 },
        .reduction = { 1e-4, 1e-5, 1e-9 },
        .product = { 1e-4, 1e-4, 1e-9 },
        .model = { 1e-3, 1e-3, 1e-8 },
    };
    const ClTolerances t_tf32 = {
        .elementwise = t_f32.elementwise,
        .reduction = t_f32.reduction,
        .product = { 2e-2, 2e-2, 1e-5 },
        .model = { 5e-2, 5e-2, 1e-4 },
    };
    /* BF16 products keep 8 bits of mantissa (f32 accumulation) */
    const ClTolerances t_bf16 = {
        .elementwise = t_f32.elementwise,
        .reduction = t_f32.reduction,
        .product = { 5e-2, 5e-2, 1e-4 },
        .model = { 1e-1, 1e-1, 1e-3 },
    };
    cl_test_add_backend_checks("/cuda/f32", f32, &t_f32, TRUE);
    cl_test_add_backend_checks("/cuda/tf32", tf32, &t_tf32, TRUE);
    cl_test_add_backend_checks("/cuda/bf16", bf16, &t_bf16, FALSE);
    /* training steps: an AdamW update is about ±lr whatever the gradient's size, so a gradient
     * near 0 may flip an update's sign (2 steps at lr 1e-3: at most about 4e-3 apart) */
    cl_test_add_train_step_checks("/cuda/f32", f32, 5e-3, 1e-4);
    cl_test_add_train_step_checks("/cuda/bf16", bf16, 5e-3, 3e-2);
    int rc = g_test_run();
    cl_backend_free(f32);
    cl_backend_free(tf32);
    cl_backend_free(bf16);
    return rc;
}
