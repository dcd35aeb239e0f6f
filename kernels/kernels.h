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
/* 1: cuBLAS may use TF32 tensor cores for the products; 0: exact f32 (the default). */
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

/* Milliseconds the stream takes for `reps` products C[m, n] = A[m, k]·B[n, k]^T on scratch
 * buffers it allocates (for the bench's peak); < 0 on failure. */
double clk_time_gemm(ClkCtx *ctx, int m, int n, int k, int reps);
/* Milliseconds the stream takes for `reps` device-to-device copies of `bytes` (the bench's
 * memory bandwidth: 2·bytes·reps moved); < 0 on failure. */
double clk_time_copy(ClkCtx *ctx, size_t bytes, int reps);

#ifdef __cplusplus
}
#endif
