/* kernels.h - the CUDA side of the CUDA backend (core/nn/cuda.c): a context (device, stream,
 * cuBLAS handle) and one launcher per backend op, with the semantics of core/nn/backend.h.
 * Plain C, no GLib; built only when nvcc is found.
 *
 * Every pointer an op takes is device memory from clk_alloc (or a view into it), except where a
 * comment says host. Ops are queued on the context's own stream and return at once; a failure
 * (a bad launch, a cuBLAS error) is kept as the context's error until clk_take_error. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ClkCtx ClkCtx;

/* A context on device `index` with its own stream and cuBLAS handle; NULL with a message in
 * err (err_len bytes) when the device cannot be used. */
ClkCtx *clk_new(int index, char *err, size_t err_len);
void clk_free(ClkCtx *ctx);
/* The device's name ("NVIDIA H100 80GB HBM3"). */
const char *clk_device_name(const ClkCtx *ctx);
/* How cuBLAS runs every product (forward and training ops alike): exact f32 (the default), TF32
 * tensor cores, or BF16 tensor cores with f32 accumulation (CUBLAS_COMPUTE_32F_FAST_16BF; the
 * matrices stay f32 in memory). */
enum { CLK_MATH_F32 = 0, CLK_MATH_TF32 = 1, CLK_MATH_BF16 = 2 };
void clk_set_math(ClkCtx *ctx, int mode);
int clk_math(const ClkCtx *ctx);
/* clk_set_math(ctx, on ? CLK_MATH_TF32 : CLK_MATH_F32); clk_tf32: 1 when the mode is TF32. */
void clk_set_tf32(ClkCtx *ctx, int on);
int clk_tf32(const ClkCtx *ctx);

/* Waits for the stream; returns 0 and copies the first error since the last call into msg
 * (and clears it), or 1 when there was none. */
int clk_take_error(ClkCtx *ctx, char *msg, size_t msg_len);

void *clk_alloc(ClkCtx *ctx, size_t bytes);
void clk_release(ClkCtx *ctx, void *p);
void clk_upload(ClkCtx *ctx, void *dst, const void *host_src, size_t bytes);
void clk_download(ClkCtx *ctx, void *host_dst, const void *src, size_t bytes);
void clk_copy(ClkCtx *ctx, void *dst, const void *src, size_t bytes);
void clk_zero(ClkCtx *ctx, void *dst, size_t bytes);

void clk_linear(ClkCtx *ctx, float *out, const float *x, const float *w, const float *bias, int m,
                int k, int n);
void clk_gemm(ClkCtx *ctx, int trans_a, int trans_b, int m, int n, int k, float alpha,
              const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
void clk_layernorm(ClkCtx *ctx, float *out, const float *x, const float *w, const float *b, int m,
                   int n, float eps);
void clk_rmsnorm(ClkCtx *ctx, float *out, const float *x, const float *w, int m, int n, float eps);
void clk_modulate(ClkCtx *ctx, float *x, const float *scale, const float *shift, int m, int n);
void clk_gelu(ClkCtx *ctx, float *out, const float *x, size_t count);
void clk_silu(ClkCtx *ctx, float *out, const float *x, size_t count);
void clk_silu_mul(ClkCtx *ctx, float *out, const float *gate, const float *up, size_t count);
void clk_add(ClkCtx *ctx, float *out, const float *a, const float *b, size_t count);
void clk_residual(ClkCtx *ctx, float *x, const float *a, const float *gate, int m, int n);
void clk_scale_cols(ClkCtx *ctx, float *out, const float *a, const float *gate, int m, int n,
                    int accumulate);
void clk_rope(ClkCtx *ctx, float *x, const float *cos_t, const float *sin_t, int n_tok, int ld,
              int n_head, int head_dim, int n_sections);
void clk_softmax(ClkCtx *ctx, float *x, int m, int n, int ld);
void clk_attention(ClkCtx *ctx, float *out, float *out_tail, const float *q, const float *k,
                   const float *v, int n_q, int n_kv, int ldq, int ldk, int ldv, int ldo,
                   int n_head, int n_kv_head, int head_dim, float scale, int causal,
                   int tail_start);
void clk_row_norms(ClkCtx *ctx, float *out, const float *a, const float *b, int m, int n, int ld);
/* ids: host memory (n of them); rows with ids[i] < 0 are left alone. */
void clk_embed(ClkCtx *ctx, float *out, const float *table, const int32_t *host_ids, int n,
               int dim);
void clk_im2col(ClkCtx *ctx, float *patches, const float *pixels, int channels, int size,
                int patch);
void clk_merge2x2(ClkCtx *ctx, float *out, const float *x, int grid, int d);
void clk_col_mean(ClkCtx *ctx, float *out, const float *x, int m, int n);
void clk_center_cols(ClkCtx *ctx, float *x, int m, int n);
/* x[i] *= s[0] (s: one float in device memory). */
void clk_scale_by(ClkCtx *ctx, float *x, const float *s, size_t count);

/* out (n_blocks·32 values, f32) = the stored rows `src` (device memory, n_blocks blocks of
 * `type`: quant-layout.h's CLK_Q8_0 .. CLK_BF16) widened to f32, as cl_dequantize_rows does on
 * the host: a quantized decoder's matrices dequantized once at upload or per use. */
void clk_dequantize(ClkCtx *ctx, int type, float *out, const void *src, size_t n_blocks);

/* ---- training: backend.h's struct cl_backend_train_ops, each with the semantics of its CPU
 * function in core/nn/grad.h: clk_grad_X is cl_grad_X, except attention_keep
 * (cl_train_attention), merge2x2 (cl_grad_merger_unfold), cross_entropy (cl_cross_entropy),
 * bce (cl_bce_logits), sumsq (cl_sumsq), adamw (cl_adamw_elements) and scale (x *= s). Every
 * gradient output ACCUMULATES (+=) and a NULL one is skipped, unless a comment says SET. The
 * results equal the CPU's within float rounding (summation orders differ); sums over rows and
 * elements run in double in an order fixed by the shapes, so they repeat bit for bit, except
 * the embedding's (atomics). */
void clk_grad_linear(ClkCtx *ctx, float *dx, float *dw, float *db, const float *dy, const float *x,
                     const float *w, int m, int k, int n);
void clk_grad_layernorm(ClkCtx *ctx, float *dx, float *dw, float *db, const float *dy,
                        const float *x, const float *w, int m, int n, float eps);
void clk_grad_rmsnorm(ClkCtx *ctx, float *dx, float *dw, const float *dy, const float *x,
                      const float *w, int m, int n, float eps);
void clk_grad_modulate(ClkCtx *ctx, float *dx, float *dscale, float *dshift, const float *dy,
                       const float *x, const float *scale, int m, int n);
void clk_grad_gelu(ClkCtx *ctx, float *dx, const float *dy, const float *x, size_t count);
void clk_grad_silu(ClkCtx *ctx, float *dx, const float *dy, const float *x, size_t count);
void clk_grad_silu_mul(ClkCtx *ctx, float *dgate, float *dup, const float *dy, const float *gate,
                       const float *up, size_t count);
void clk_grad_residual(ClkCtx *ctx, float *da, float *dgate, const float *dy, const float *a,
                       const float *gate, int m, int n);
void clk_grad_scale_cols(ClkCtx *ctx, float *da, float *dgate, const float *dy, const float *a,
                         const float *gate, int m, int n);
/* In place on dx: the rotation by −angle. */
void clk_grad_rope(ClkCtx *ctx, float *dx, const float *cos_t, const float *sin_t, int n_tok,
                   int ld, int n_head, int head_dim, int n_sections);
void clk_grad_softmax(ClkCtx *ctx, float *dx, const float *dy, const float *y, int m, int n,
                      int ld);
/* cl_grad_attention: the probabilities recomputed into a workspace the context keeps (up to
 * 256 MB, more when one head's [n_q, n_kv] needs it). */
void clk_grad_attention(ClkCtx *ctx, float *dq, float *dk, float *dv, const float *dout,
                        const float *q, const float *k, const float *v, int n_q, int n_kv, int ldq,
                        int ldk, int ldv, int ldo, int n_head, int n_kv_head, int head_dim,
                        float scale, int causal);
/* cl_train_attention: out SET, probs (n_head, n_q, n_kv) SET, the causally masked entries 0. */
void clk_grad_attention_keep(ClkCtx *ctx, float *out, float *probs, const float *q, const float *k,
                             const float *v, int n_q, int n_kv, int ldq, int ldk, int ldv, int ldo,
                             int n_head, int n_kv_head, int head_dim, float scale, int causal);
/* cl_grad_attention_probs: reads only the entries of probs a query sees. */
void clk_grad_attention_probs(ClkCtx *ctx, float *dq, float *dk, float *dv, const float *dout,
                              const float *q, const float *k, const float *v, const float *probs,
                              int n_q, int n_kv, int ldq, int ldk, int ldv, int ldo, int n_head,
                              int n_kv_head, int head_dim, float scale, int causal);
void clk_grad_row_norms(ClkCtx *ctx, float *da, const float *dout, const float *a, const float *out,
                        int m, int n);
/* ids: host memory (n of them); repeats add up (atomics: in no fixed order). */
void clk_grad_embed(ClkCtx *ctx, float *dtable, const float *dy, const int32_t *host_ids, int n,
                    int dim);
/* cl_grad_merger_unfold: dx += dcat put back. */
void clk_grad_merge2x2(ClkCtx *ctx, float *dx, const float *dcat, int grid, int dim);
/* cl_cross_entropy: targets and mask host (mask NULL: every row); dlogits (may be NULL) SET.
 * Returns the mean loss over the supervised rows (waits for the stream); NAN when the context
 * holds an error. */
double clk_grad_cross_entropy(ClkCtx *ctx, float *dlogits, const float *logits,
                              const int32_t *host_targets, const uint8_t *host_mask, int n,
                              int vocab, float scale, int *n_supervised);
/* cl_bce_logits: dz (may be NULL) SET; returns the summed loss (waits; NAN on an error). */
double clk_grad_bce(ClkCtx *ctx, float *dz, const float *z, const float *y, size_t count,
                    float scale);
/* Σ x[0, n)² in double (waits; NAN on an error). */
double clk_grad_sumsq(ClkCtx *ctx, const float *x, size_t n);
/* x *= s (s host). */
void clk_grad_scale(ClkCtx *ctx, float *x, float s, size_t n);
/* cl_adamw_elements over [0, n), with the CPU's float operations in its order: the same bits. */
void clk_grad_adamw(ClkCtx *ctx, float *p, float *m, float *v, const float *g, size_t n,
                    float decay, float w1, float b2, float w2, float bc2_sqrt, float eps,
                    float step_size, float gscale);

/* Milliseconds the stream takes for `reps` products C[m, n] = A[m, k]·B[n, k]^T on scratch
 * buffers it allocates (for the bench's peak); < 0 on failure. */
double clk_time_gemm(ClkCtx *ctx, int m, int n, int k, int reps);
/* Milliseconds the stream takes for `reps` device-to-device copies of `bytes` (the bench's
 * memory bandwidth: 2·bytes·reps moved); < 0 on failure. */
double clk_time_copy(ClkCtx *ctx, size_t bytes, int reps);

#ifdef __cplusplus
}
#endif
