/* cuda.c - the CUDA backend: the op table over kernels/kernels.h (our kernels and cuBLAS), on
 * one device with its own stream and cuBLAS handle per backend (so each worker thread has its
 * own stream and the UI thread never waits on the GPU). Built only when nvcc is found. */
#include "nn/backend.h"

#include "kernels.h"
#include "nn/quant.h"
#include "quant-layout.h"

/* the device's dequantization reads the host's formats byte for byte */
_Static_assert(CLK_QUANT_BLOCK == CL_QUANT_BLOCK, "block length");
_Static_assert(CLK_Q8_0_BYTES == CL_QUANT_Q8_0_BYTES, "Q8_0 block bytes");
_Static_assert(CLK_Q4_1_BYTES == CL_QUANT_Q4_1_BYTES, "Q4_1 block bytes");
_Static_assert(CLK_HALF_BLOCK_BYTES == CL_QUANT_HALF_BYTES, "F16/BF16 block bytes");
_Static_assert((int)CLK_Q8_0 == (int)CL_QUANT_Q8_0 && (int)CLK_Q4_1 == (int)CL_QUANT_Q4_1 &&
                   (int)CLK_F16 == (int)CL_QUANT_F16 && (int)CLK_BF16 == (int)CL_QUANT_BF16,
               "type numbers");

typedef struct {
    ClkCtx *k;
} CudaData;

static ClkCtx *K(ClBackend *be)
{
    return ((CudaData *)be->data)->k;
}

static void cu_destroy(ClBackend *be)
{
    CudaData *d = be->data;
    clk_free(d->k);
    g_free(d);
}

static void *cu_alloc(ClBackend *be, size_t bytes)
{
    return clk_alloc(K(be), bytes);
}

static void cu_release(ClBackend *be, void *p)
{
    clk_release(K(be), p);
}

static void cu_upload(ClBackend *be, void *dst, const void *src, size_t bytes)
{
    clk_upload(K(be), dst, src, bytes);
}

static void cu_download(ClBackend *be, void *dst, const void *src, size_t bytes)
{
    clk_download(K(be), dst, src, bytes);
}

static void cu_copy(ClBackend *be, void *dst, const void *src, size_t bytes)
{
    clk_copy(K(be), dst, src, bytes);
}

static void cu_zero(ClBackend *be, void *dst, size_t bytes)
{
    clk_zero(K(be), dst, bytes);
}

static gboolean cu_finish(ClBackend *be, GError **error)
{
    char msg[512];
    if (clk_take_error(K(be), msg, sizeof msg))
        return TRUE;
    g_set_error(error, CL_BACKEND_ERROR, CL_BACKEND_ERROR_DEVICE, "GPU error: %s", msg);
    return FALSE;
}

static void cu_linear(ClBackend *be, float *out, const float *x, const float *w, const float *bias,
                      int m, int k, int n)
{
    clk_linear(K(be), out, x, w, bias, m, k, n);
}

static void cu_gemm(ClBackend *be, gboolean trans_a, gboolean trans_b, int m, int n, int k,
                    float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                    float *c, int ldc)
{
    clk_gemm(K(be), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void cu_layernorm(ClBackend *be, float *out, const float *x, const float *w, const float *b,
                         int m, int n, float eps)
{
    clk_layernorm(K(be), out, x, w, b, m, n, eps);
}

static void cu_rmsnorm(ClBackend *be, float *out, const float *x, const float *w, int m, int n,
                       float eps)
{
    clk_rmsnorm(K(be), out, x, w, m, n, eps);
}

static void cu_modulate(ClBackend *be, float *x, const float *scale, const float *shift, int m,
                        int n)
{
    clk_modulate(K(be), x, scale, shift, m, n);
}

static void cu_gelu(ClBackend *be, float *out, const float *x, size_t count)
{
    clk_gelu(K(be), out, x, count);
}

static void cu_silu(ClBackend *be, float *out, const float *x, size_t count)
{
    clk_silu(K(be), out, x, count);
}

static void cu_silu_mul(ClBackend *be, float *out, const float *gate, const float *up, size_t count)
{
    clk_silu_mul(K(be), out, gate, up, count);
}

static void cu_add(ClBackend *be, float *out, const float *a, const float *b, size_t count)
{
    clk_add(K(be), out, a, b, count);
}

static void cu_residual(ClBackend *be, float *x, const float *a, const float *gate, int m, int n)
{
    clk_residual(K(be), x, a, gate, m, n);
}

static void cu_scale_cols(ClBackend *be, float *out, const float *a, const float *gate, int m,
                          int n, gboolean accumulate)
{
    clk_scale_cols(K(be), out, a, gate, m, n, accumulate);
}

static void cu_rope(ClBackend *be, float *x, const float *cos_t, const float *sin_t, int n_tok,
                    int ld, int n_head, int head_dim, int n_sections)
{
    clk_rope(K(be), x, cos_t, sin_t, n_tok, ld, n_head, head_dim, n_sections);
}

static void cu_softmax(ClBackend *be, float *x, int m, int n, int ld)
{
    clk_softmax(K(be), x, m, n, ld);
}

static void cu_attention(ClBackend *be, float *out, float *out_tail, const float *q, const float *k,
                         const float *v, int n_q, int n_kv, int ldq, int ldk, int ldv, int ldo,
                         int n_head, int n_kv_head, int head_dim, float scale, int causal,
                         int tail_start, float *scratch)
{
    (void)scratch; /* flash-style: the scores are never stored */
    clk_attention(K(be), out, out_tail, q, k, v, n_q, n_kv, ldq, ldk, ldv, ldo, n_head, n_kv_head,
                  head_dim, scale, causal, tail_start);
}

static size_t cu_attention_scratch(ClBackend *be, int n_q, int n_kv, int n_head)
{
    (void)be, (void)n_q, (void)n_kv, (void)n_head;
    return 0;
}

static void cu_row_norms(ClBackend *be, float *out, const float *a, const float *b, int m, int n,
                         int ld)
{
    clk_row_norms(K(be), out, a, b, m, n, ld);
}

static void cu_embed(ClBackend *be, float *out, const float *table, const gint32 *ids, int n,
                     int dim)
{
    clk_embed(K(be), out, table, (const int32_t *)ids, n, dim);
}

static void cu_im2col(ClBackend *be, float *patches, const float *pixels, int channels, int size,
                      int patch)
{
    clk_im2col(K(be), patches, pixels, channels, size, patch);
}

static void cu_merge2x2(ClBackend *be, float *out, const float *x, int grid, int d)
{
    clk_merge2x2(K(be), out, x, grid, d);
}

static void cu_col_mean(ClBackend *be, float *out, const float *x, int m, int n)
{
    clk_col_mean(K(be), out, x, m, n);
}

static void cu_center_cols(ClBackend *be, float *x, int m, int n)
{
    clk_center_cols(K(be), x, m, n);
}

static void cu_scale_by(ClBackend *be, float *x, const float *s, size_t count)
{
    clk_scale_by(K(be), x, s, count);
}

/* ---- training ops: backend.h's struct cl_backend_train_ops over kernels.h's clk_grad_* */

static void cu_train_linear(ClBackend *be, float *dx, float *dw, float *db, const float *dy,
                            const float *x, const float *w, int m, int k, int n)
{
    clk_grad_linear(K(be), dx, dw, db, dy, x, w, m, k, n);
}

static void cu_train_layernorm(ClBackend *be, float *dx, float *dw, float *db, const float *dy,
                               const float *x, const float *w, int m, int n, float eps)
{
    clk_grad_layernorm(K(be), dx, dw, db, dy, x, w, m, n, eps);
}

static void cu_train_rmsnorm(ClBackend *be, float *dx, float *dw, const float *dy, const float *x,
                             const float *w, int m, int n, float eps)
{
    clk_grad_rmsnorm(K(be), dx, dw, dy, x, w, m, n, eps);
}

static void cu_train_modulate(ClBackend *be, float *dx, float *dscale, float *dshift,
                              const float *dy, const float *x, const float *scale, int m, int n)
{
    clk_grad_modulate(K(be), dx, dscale, dshift, dy, x, scale, m, n);
}

static void cu_train_gelu(ClBackend *be, float *dx, const float *dy, const float *x, size_t count)
{
    clk_grad_gelu(K(be), dx, dy, x, count);
}

static void cu_train_silu(ClBackend *be, float *dx, const float *dy, const float *x, size_t count)
{
    clk_grad_silu(K(be), dx, dy, x, count);
}

static void cu_train_silu_mul(ClBackend *be, float *dgate, float *dup, const float *dy,
                              const float *gate, const float *up, size_t count)
{
    clk_grad_silu_mul(K(be), dgate, dup, dy, gate, up, count);
}

static void cu_train_residual(ClBackend *be, float *da, float *dgate, const float *dy,
                              const float *a, const float *gate, int m, int n)
{
    clk_grad_residual(K(be), da, dgate, dy, a, gate, m, n);
}

static void cu_train_scale_cols(ClBackend *be, float *da, float *dgate, const float *dy,
                                const float *a, const float *gate, int m, int n)
{
    clk_grad_scale_cols(K(be), da, dgate, dy, a, gate, m, n);
}

static void cu_train_rope(ClBackend *be, float *dx, const float *cos_t, const float *sin_t,
                          int n_tok, int ld, int n_head, int head_dim, int n_sections)
{
    clk_grad_rope(K(be), dx, cos_t, sin_t, n_tok, ld, n_head, head_dim, n_sections);
}

static void cu_train_softmax(ClBackend *be, float *dx, const float *dy, const float *y, int m,
                             int n, int ld)
{
    clk_grad_softmax(K(be), dx, dy, y, m, n, ld);
}

static void cu_train_attention(ClBackend *be, float *dq, float *dk, float *dv, const float *dout,
                               const float *q, const float *k, const float *v, int n_q, int n_kv,
                               int ldq, int ldk, int ldv, int ldo, int n_head, int n_kv_head,
                               int head_dim, float scale, int causal)
{
    clk_grad_attention(K(be), dq, dk, dv, dout, q, k, v, n_q, n_kv, ldq, ldk, ldv, ldo, n_head,
                       n_kv_head, head_dim, scale, causal);
}

static void cu_train_attention_keep(ClBackend *be, float *out, float *probs, const float *q,
                                    const float *k, const float *v, int n_q, int n_kv, int ldq,
                                    int ldk, int ldv, int ldo, int n_head, int n_kv_head,
                                    int head_dim, float scale, int causal)
{
    clk_grad_attention_keep(K(be), out, probs, q, k, v, n_q, n_kv, ldq, ldk, ldv, ldo, n_head,
                            n_kv_head, head_dim, scale, causal);
}

static void cu_train_attention_probs(ClBackend *be, float *dq, float *dk, float *dv,
                                     const float *dout, const float *q, const float *k,
                                     const float *v, const float *probs, int n_q, int n_kv, int ldq,
                                     int ldk, int ldv, int ldo, int n_head, int n_kv_head,
                                     int head_dim, float scale, int causal)
{
    clk_grad_attention_probs(K(be), dq, dk, dv, dout, q, k, v, probs, n_q, n_kv, ldq, ldk, ldv, ldo,
                             n_head, n_kv_head, head_dim, scale, causal);
}

static void cu_train_row_norms(ClBackend *be, float *da, const float *dout, const float *a,
                               const float *out, int m, int n)
{
    clk_grad_row_norms(K(be), da, dout, a, out, m, n);
}

static void cu_train_embed(ClBackend *be, float *dtable, const float *dy, const gint32 *ids, int n,
                           int dim)
{
    clk_grad_embed(K(be), dtable, dy, (const int32_t *)ids, n, dim);
}

static void cu_train_merge2x2(ClBackend *be, float *dx, const float *dcat, int grid, int dim)
{
    clk_grad_merge2x2(K(be), dx, dcat, grid, dim);
}

static double cu_train_cross_entropy(ClBackend *be, float *dlogits, const float *logits,
                                     const gint32 *targets, const guint8 *mask, int n, int vocab,
                                     float scale, int *n_supervised)
{
    return clk_grad_cross_entropy(K(be), dlogits, logits, (const int32_t *)targets,
                                  (const uint8_t *)mask, n, vocab, scale, n_supervised);
}

static double cu_train_bce(ClBackend *be, float *dz, const float *z, const float *y, size_t count,
                           float scale)
{
    return clk_grad_bce(K(be), dz, z, y, count, scale);
}

static double cu_train_sumsq(ClBackend *be, const float *x, size_t n)
{
    return clk_grad_sumsq(K(be), x, n);
}

static void cu_train_scale(ClBackend *be, float *x, float s, size_t n)
{
    clk_grad_scale(K(be), x, s, n);
}

static void cu_train_adamw(ClBackend *be, float *p, float *m, float *v, const float *g, size_t n,
                           float decay, float w1, float b2, float w2, float bc2_sqrt, float eps,
                           float step_size, float gscale)
{
    clk_grad_adamw(K(be), p, m, v, g, n, decay, w1, b2, w2, bc2_sqrt, eps, step_size, gscale);
}

static const struct cl_backend_train_ops cuda_train_ops = {
    .linear = cu_train_linear,
    .layernorm = cu_train_layernorm,
    .rmsnorm = cu_train_rmsnorm,
    .modulate = cu_train_modulate,
    .gelu = cu_train_gelu,
    .silu = cu_train_silu,
    .silu_mul = cu_train_silu_mul,
    .residual = cu_train_residual,
    .scale_cols = cu_train_scale_cols,
    .rope = cu_train_rope,
    .softmax = cu_train_softmax,
    .attention = cu_train_attention,
    .attention_keep = cu_train_attention_keep,
    .attention_probs = cu_train_attention_probs,
    .row_norms = cu_train_row_norms,
    .embed = cu_train_embed,
    .merge2x2 = cu_train_merge2x2,
    .cross_entropy = cu_train_cross_entropy,
    .bce = cu_train_bce,
    .sumsq = cu_train_sumsq,
    .scale = cu_train_scale,
    .adamw = cu_train_adamw,
};

static const struct cl_backend_ops cuda_ops = {
    .name = "cuda",
    .destroy = cu_destroy,
    .host_memory = FALSE,
    .alloc = cu_alloc,
    .release = cu_release,
    .upload = cu_upload,
    .download = cu_download,
    .copy = cu_copy,
    .zero = cu_zero,
    .finish = cu_finish,
    .linear = cu_linear,
    .gemm = cu_gemm,
    .layernorm = cu_layernorm,
    .rmsnorm = cu_rmsnorm,
    .modulate = cu_modulate,
    .gelu = cu_gelu,
    .silu = cu_silu,
    .silu_mul = cu_silu_mul,
    .add = cu_add,
    .residual = cu_residual,
    .scale_cols = cu_scale_cols,
    .rope = cu_rope,
    .softmax = cu_softmax,
    .attention = cu_attention,
    .attention_scratch = cu_attention_scratch,
    .row_norms = cu_row_norms,
    .embed = cu_embed,
    .im2col = cu_im2col,
    .merge2x2 = cu_merge2x2,
    .col_mean = cu_col_mean,
    .center_cols = cu_center_cols,
    .scale_by = cu_scale_by,
    .train = &cuda_train_ops,
};

ClBackend *cl_backend_cuda_new(int index, GError **error)
{
    char msg[512] = "";
    ClkCtx *k = clk_new(index, msg, sizeof msg);
    if (!k) {
        g_set_error(error, CL_BACKEND_ERROR, CL_BACKEND_ERROR_NO_DEVICE, "%s", msg);
        return NULL;
    }
    /* anything else (unset, "f32") keeps exact f32 */
    const char *math = g_getenv("CHANGELENS_CUDA_MATH");
    if (math && g_ascii_strcasecmp(math, "tf32") == 0)
        clk_set_math(k, CLK_MATH_TF32);
    else if (math && g_ascii_strcasecmp(math, "bf16") == 0)
        clk_set_math(k, CLK_MATH_BF16);
    CudaData *d = g_new0(CudaData, 1);
    d->k = k;
    ClBackend *be = g_new0(ClBackend, 1);
    be->ops = &cuda_ops;
    be->data = d;
    return be;
}

const char *cl_backend_cuda_device_name(ClBackend *be)
{
    g_return_val_if_fail(be != NULL, NULL);
    return be->ops == &cuda_ops ? clk_device_name(K(be)) : NULL;
}

double cl_backend_cuda_time_gemm(ClBackend *be, int m, int n, int k, int reps)
{
    g_return_val_if_fail(be != NULL, -1);
    return be->ops == &cuda_ops ? clk_time_gemm(K(be), m, n, k, reps) : -1;
}

double cl_backend_cuda_time_copy(ClBackend *be, size_t bytes, int reps)
{
    g_return_val_if_fail(be != NULL, -1);
    return be->ops == &cuda_ops ? clk_time_copy(K(be), bytes, reps) : -1;
}

gboolean cl_backend_cuda_tf32(ClBackend *be)
{
    g_return_val_if_fail(be != NULL, FALSE);
    return be->ops == &cuda_ops && clk_tf32(K(be));
}

gboolean cl_backend_cuda_dequantize(ClBackend *be, int type, float *out, const void *src, int n,
                                    int k)
{
    g_return_val_if_fail(be != NULL && k % CL_QUANT_BLOCK == 0, FALSE);
    if (be->ops != &cuda_ops || (unsigned)type >= CL_QUANT_N_TYPES)
        return FALSE;
    clk_dequantize(K(be), type, out, src, (size_t)n * (size_t)(k / CL_QUANT_BLOCK));
    return TRUE;
}
