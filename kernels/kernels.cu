/* kernels.cu - the CUDA backend's kernels and cuBLAS calls (kernels.h): one launcher per backend
 * op (core/nn/backend.h gives each op's exact meaning; the CPU backend is the oracle the cuda
 * test suite compares against). Row ops take one block per row; elementwise ops a grid-stride
 * loop; attention is flash-style (online softmax, the scores never stored), one warp per
 * (query, head) for head sizes up to 256 and one block per (query, head) beyond. */
#include "kernels.h"
#include "quant-layout.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

struct ClkCtx {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    int tf32;
    char name[256];
    char error[512]; /* the first failure since the last clk_take_error; "" when none */
    int32_t *ids;    /* device copy of embed's ids */
    int ids_cap;
};

/* ---- errors ---------------------------------------------------------------------------------- */

static void fail(ClkCtx *c, const char *what, const char *detail)
{
    if (c->error[0])
        return; /* keep the first */
    snprintf(c->error, sizeof c->error, "%s: %s", what, detail);
}

static int cuda_ok(ClkCtx *c, cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 1;
    fail(c, what, cudaGetErrorString(e));
    return 0;
}

static void launched(ClkCtx *c, const char *what)
{
    cuda_ok(c, cudaGetLastError(), what);
}

static int blas_ok(ClkCtx *c, cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return 1;
    char d[64];
    snprintf(d, sizeof d, "cuBLAS status %d", (int)s);
    fail(c, what, d);
    return 0;
}

/* ---- the context ----------------------------------------------------------------------------- */

extern "C" ClkCtx *clk_new(int index, char *err, size_t err_len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= index || index < 0) {
        cudaGetLastError(); /* clear the sticky "no driver" error */
        snprintf(err, err_len, "%s",
                 e != cudaSuccess ? "no CUDA device found (the driver reports none)"
                                  : "no CUDA device found");
        return NULL;
    }
    if ((e = cudaSetDevice(index)) != cudaSuccess) {
        snprintf(err, err_len, "cannot use CUDA device %d: %s", index, cudaGetErrorString(e));
        return NULL;
    }
    ClkCtx *c = (ClkCtx *)calloc(1, sizeof *c);
    c->device = index;
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, index) == cudaSuccess)
        snprintf(c->name, sizeof c->name, "%s", prop.name);
    if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        snprintf(err, err_len, "cannot create a CUDA stream: %s", cudaGetErrorString(e));
        free(c);
        return NULL;
    }
    cublasStatus_t s = cublasCreate(&c->blas);
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, err_len, "cannot start cuBLAS (status %d)", (int)s);
        cudaStreamDestroy(c->stream);
        free(c);
        return NULL;
    }
    cublasSetStream(c->blas, c->stream);
    cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH);
    return c;
}

extern "C" void clk_free(ClkCtx *c)
{
    if (!c)
        return;
    cudaStreamSynchronize(c->stream);
    if (c->ids)
        cudaFree(c->ids);
    cublasDestroy(c->blas);
    cudaStreamDestroy(c->stream);
    free(c);
}

extern "C" const char *clk_device_name(const ClkCtx *c)
{
    return c->name;
}

extern "C" void clk_set_tf32(ClkCtx *c, int on)
{
    c->tf32 = on != 0;
    blas_ok(c, cublasSetMathMode(c->blas, on ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
            "cublasSetMathMode");
}

extern "C" int clk_tf32(const ClkCtx *c)
{
    return c->tf32;
}

extern "C" int clk_take_error(ClkCtx *c, char *msg, size_t msg_len)
{
    cuda_ok(c, cudaStreamSynchronize(c->stream), "a GPU operation failed");
    if (!c->error[0])
        return 1;
    snprintf(msg, msg_len, "%s", c->error);
    c->error[0] = '\0';
    return 0;
}

/* ---- memory ---------------------------------------------------------------------------------- */

extern "C" void *clk_alloc(ClkCtx *c, size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError(); /* an out-of-memory is the caller's to report, not sticky */
        return NULL;
    }
    (void)c;
    return p;
}

extern "C" void clk_release(ClkCtx *c, void *p)
{
    if (!p)
        return;
    cudaStreamSynchronize(c->stream); /* queued ops may still read it */
    cuda_ok(c, cudaFree(p), "cudaFree");
}

extern "C" void clk_upload(ClkCtx *c, void *dst, const void *src, size_t bytes)
{
    if (bytes)
        cuda_ok(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream),
                "copy to the GPU");
}

extern "C" void clk_download(ClkCtx *c, void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return;
    if (cuda_ok(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream),
                "copy from the GPU"))
        cuda_ok(c, cudaStreamSynchronize(c->stream), "copy from the GPU");
    else
        memset(dst, 0, bytes); /* never hand back uninitialised memory */
}

extern "C" void clk_copy(ClkCtx *c, void *dst, const void *src, size_t bytes)
{
    if (bytes)
        cuda_ok(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream),
                "copy on the GPU");
}

extern "C" void clk_zero(ClkCtx *c, void *dst, size_t bytes)
{
    if (bytes)
        cuda_ok(c, cudaMemsetAsync(dst, 0, bytes, c->stream), "cudaMemsetAsync");
}

/* ---- launch helpers -------------------------------------------------------------------------- */

static unsigned grid_for(size_t count, int threads)
{
    size_t b = (count + threads - 1) / threads;
    if (b > 65535u * 8u)
        b = 65535u * 8u; /* grid-stride loops cover the rest */
    return (unsigned)(b ? b : 1);
}

#define ROW_THREADS 256

template <typename T> __device__ __forceinline__ T warp_sum(T v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it. */
template <typename T> __device__ T block_sum(T v)
{
    __shared__ T part[32];
    __shared__ T total;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        T t = lane < (int)(blockDim.x >> 5) ? part[lane] : T(0);
        t = warp_sum(t);
        if (lane == 0)
            total = t;
    }
    __syncthreads();
    T r = total;
    __syncthreads(); /* part/total may be reused by the next call */
    return r;
}

/* ---- products (cuBLAS, column-major: a row-major [r, c] matrix is its transpose there) -------- */

__global__ void k_fill_rows(float *out, const float *bias, int m, int n)
{
    size_t total = (size_t)m * n;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = bias[i % n];
}

extern "C" void clk_linear(ClkCtx *c, float *out, const float *x, const float *w, const float *bias,
                           int m, int k, int n)
{
    if (m <= 0 || n <= 0)
        return;
    float one = 1.0f, beta = 0.0f;
    if (bias) {
        k_fill_rows<<<grid_for((size_t)m * n, 256), 256, 0, c->stream>>>(out, bias, m, n);
        launched(c, "linear bias");
        beta = 1.0f;
    }
    if (k <= 0) {
        if (!bias)
            clk_zero(c, out, (size_t)m * n * sizeof(float));
        return;
    }
    /* out^T (n×m) = W (n×k, stored as k×n column-major: transposed) · x^T (k×m) */
    blas_ok(
        c, cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w, k, x, k, &beta, out, n),
        "linear (cublasSgemm)");
}

extern "C" void clk_gemm(ClkCtx *c, int trans_a, int trans_b, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *cm,
                         int ldc)
{
    if (m <= 0 || n <= 0)
        return;
    /* C^T = op(B)^T · op(A)^T in column-major */
    blas_ok(c,
            cublasSgemm(c->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                        trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a, lda, &beta,
                        cm, ldc),
            "gemm (cublasSgemm)");
}

/* Milliseconds the stream takes for `reps` calls of f (after one warm-up), by CUDA events. */
template <typename F> static double stream_ms(ClkCtx *c, int reps, F f)
{
    f(); /* warm-up */
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaEventRecord(e0, c->stream);
    for (int r = 0; r < reps; r++)
        f();
    cudaEventRecord(e1, c->stream);
    cudaEventSynchronize(e1);
    float t = 0;
    double ms = cudaEventElapsedTime(&t, e0, e1) == cudaSuccess ? t : -1;
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return ms;
}

extern "C" double clk_time_gemm(ClkCtx *c, int m, int n, int k, int reps)
{
    float *a = (float *)clk_alloc(c, (size_t)m * k * 4),
          *b = (float *)clk_alloc(c, (size_t)n * k * 4),
          *o = (float *)clk_alloc(c, (size_t)m * n * 4);
    double ms = -1;
    if (a && b && o) {
        clk_zero(c, a, (size_t)m * k * 4);
        clk_zero(c, b, (size_t)n * k * 4);
        ms = stream_ms(c, reps, [&] { clk_linear(c, o, a, b, NULL, m, k, n); });
    }
    clk_release(c, a);
    clk_release(c, b);
    clk_release(c, o);
    return ms;
}

extern "C" double clk_time_copy(ClkCtx *c, size_t bytes, int reps)
{
    void *a = clk_alloc(c, bytes), *b = clk_alloc(c, bytes);
    double ms = -1;
    if (a && b) {
        clk_zero(c, a, bytes);
        ms = stream_ms(c, reps, [&] { clk_copy(c, b, a, bytes); });
    }
    clk_release(c, a);
    clk_release(c, b);
    return ms;
}

/* ---- norms ----------------------------------------------------------------------------------- */

__global__ void k_layernorm(float *out, const float *x, const float *w, const float *b, int n,
                            float eps)
{
    const float *xr = x + (size_t)blockIdx.x * n;
    float *yr = out + (size_t)blockIdx.x * n;
    float s = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        s += xr[i];
    float mean = block_sum(s) / n;
    float q = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float d = xr[i] - mean;
        q += d * d;
    }
    float var = block_sum(q) / n;
    float rstd = rsqrtf(var + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        yr[i] = (xr[i] - mean) * rstd * w[i] + b[i];
}

extern "C" void clk_layernorm(ClkCtx *c, float *out, const float *x, const float *w, const float *b,
                              int m, int n, float eps)
{
    if (m <= 0)
        return;
    k_layernorm<<<m, ROW_THREADS, 0, c->stream>>>(out, x, w, b, n, eps);
    launched(c, "layernorm");
}

__global__ void k_rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
    const float *xr = x + (size_t)blockIdx.x * n;
    float *yr = out + (size_t)blockIdx.x * n;
    float q = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        q += xr[i] * xr[i];
    float rs = rsqrtf(block_sum(q) / n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        yr[i] = xr[i] * rs * w[i];
}

extern "C" void clk_rmsnorm(ClkCtx *c, float *out, const float *x, const float *w, int m, int n,
                            float eps)
{
    if (m <= 0)
        return;
    k_rmsnorm<<<m, ROW_THREADS, 0, c->stream>>>(out, x, w, n, eps);
    launched(c, "rmsnorm");
}

/* ---- elementwise ----------------------------------------------------------------------------- */

#define GRID_STRIDE(i, count)                                                                      \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (count);                    \
         i += (size_t)gridDim.x * blockDim.x)

__global__ void k_modulate(float *x, const float *scale, const float *shift, int m, int n)
{
    GRID_STRIDE(i, (size_t)m * n)
    {
        int j = (int)(i % n);
        x[i] = x[i] * (1.0f + scale[j]) + shift[j];
    }
}

__global__ void k_gelu(float *out, const float *x, size_t count)
{
    GRID_STRIDE(i, count)
    {
        float v = x[i];
        out[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}

__global__ void k_silu(float *out, const float *x, size_t count)
{
    GRID_STRIDE(i, count)
    {
        float v = x[i];
        out[i] = v / (1.0f + expf(-v));
    }
}

__global__ void k_silu_mul(float *out, const float *gate, const float *up, size_t count)
{
    GRID_STRIDE(i, count)
    {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

__global__ void k_add(float *out, const float *a, const float *b, size_t count)
{
    GRID_STRIDE(i, count) out[i] = a[i] + b[i];
}

__global__ void k_residual(float *x, const float *a, const float *gate, int m, int n)
{
    GRID_STRIDE(i, (size_t)m * n) x[i] += gate ? (1.0f + gate[i % n]) * a[i] : a[i];
}

__global__ void k_scale_cols(float *out, const float *a, const float *gate, int m, int n,
                             int accumulate)
{
    GRID_STRIDE(i, (size_t)m * n) out[i] = (accumulate ? out[i] : 0.0f) + gate[i % n] * a[i];
}

extern "C" void clk_modulate(ClkCtx *c, float *x, const float *scale, const float *shift, int m,
                             int n)
{
    k_modulate<<<grid_for((size_t)m * n, 256), 256, 0, c->stream>>>(x, scale, shift, m, n);
    launched(c, "modulate");
}

/* ---- stored weight formats to f32 (quant-layout.h) ------------------------------------------ */

__device__ static inline float half_le(const uint8_t *p)
{
    return __half2float(__ushort_as_half((unsigned short)(p[0] | p[1] << 8)));
}

__device__ static inline float bf16_le(const uint8_t *p)
{
    return __uint_as_float((unsigned)(p[0] | p[1] << 8) << 16);
}

/* One thread per value: value j of block b. */
__global__ void k_dequantize(float *out, const uint8_t *src, int type, size_t count)
{
    GRID_STRIDE(i, count)
    {
        size_t b = i / CLK_QUANT_BLOCK;
        int j = (int)(i % CLK_QUANT_BLOCK);
        if (type == CLK_Q8_0) {
            const uint8_t *q = src + b * CLK_Q8_0_BYTES;
            out[i] = half_le(q) * (float)(int8_t)q[2 + j];
        } else if (type == CLK_Q4_1) {
            const uint8_t *q = src + b * CLK_Q4_1_BYTES;
            int nib = j < 16 ? q[4 + j] & 15 : q[4 + j - 16] >> 4;
            out[i] = half_le(q) * (float)nib + half_le(q + 2);
        } else if (type == CLK_F16) {
            out[i] = half_le(src + 2 * i);
        } else {
            out[i] = bf16_le(src + 2 * i);
        }
    }
}

extern "C" void clk_dequantize(ClkCtx *c, int type, float *out, const void *src, size_t n_blocks)
{
    size_t count = n_blocks * CLK_QUANT_BLOCK;
    if (type < CLK_Q8_0 || type > CLK_BF16) {
        if (!c->error[0])
            snprintf(c->error, sizeof c->error, "dequantize: unknown type %d", type);
        return;
    }
    k_dequantize<<<grid_for(count, 256), 256, 0, c->stream>>>(out, (const uint8_t *)src, type,
                                                              count);
    launched(c, "dequantize");
}

extern "C" void clk_gelu(ClkCtx *c, float *out, const float *x, size_t count)
{
    k_gelu<<<grid_for(count, 256), 256, 0, c->stream>>>(out, x, count);
    launched(c, "gelu");
}

extern "C" void clk_silu(ClkCtx *c, float *out, const float *x, size_t count)
{
    k_silu<<<grid_for(count, 256), 256, 0, c->stream>>>(out, x, count);
    launched(c, "silu");
}

extern "C" void clk_silu_mul(ClkCtx *c, float *out, const float *gate, const float *up,
                             size_t count)
{
    k_silu_mul<<<grid_for(count, 256), 256, 0, c->stream>>>(out, gate, up, count);
    launched(c, "silu_mul");
}

extern "C" void clk_add(ClkCtx *c, float *out, const float *a, const float *b, size_t count)
{
    k_add<<<grid_for(count, 256), 256, 0, c->stream>>>(out, a, b, count);
    launched(c, "add");
}

extern "C" void clk_residual(ClkCtx *c, float *x, const float *a, const float *gate, int m, int n)
{
    k_residual<<<grid_for((size_t)m * n, 256), 256, 0, c->stream>>>(x, a, gate, m, n);
    launched(c, "residual");
}

extern "C" void clk_scale_cols(ClkCtx *c, float *out, const float *a, const float *gate, int m,
                               int n, int accumulate)
{
    k_scale_cols<<<grid_for((size_t)m * n, 256), 256, 0, c->stream>>>(out, a, gate, m, n,
                                                                      accumulate);
    launched(c, "scale_cols");
}

/* ---- RoPE: one thread per rotated pair ------------------------------------------------------- */

__global__ void k_rope(float *x, const float *cos_t, const float *sin_t, int n_tok, int ld,
                       int n_head, int head_dim, int n_sections)
{
    const int q = head_dim / n_sections, h2 = q / 2, half = head_dim / 2;
    const size_t per_tok = (size_t)n_head * n_sections * h2;
    GRID_STRIDE(idx, (size_t)n_tok * per_tok)
    {
        int t = (int)(idx / per_tok);
        int r = (int)(idx % per_tok);
        int h = r / (n_sections * h2);
        int s = (r / h2) % n_sections;
        int i = r % h2;
        float *xs = x + (size_t)t * ld + (size_t)h * head_dim + s * q;
        float cs = cos_t[(size_t)t * half + s * h2 + i], sn = sin_t[(size_t)t * half + s * h2 + i];
        float a = xs[i], b = xs[i + h2];
        xs[i] = a * cs - b * sn;
        xs[i + h2] = b * cs + a * sn;
    }
}

extern "C" void clk_rope(ClkCtx *c, float *x, const float *cos_t, const float *sin_t, int n_tok,
                         int ld, int n_head, int head_dim, int n_sections)
{
    size_t pairs = (size_t)n_tok * n_head * (head_dim / 2);
    if (!pairs)
        return;
    k_rope<<<grid_for(pairs, 256), 256, 0, c->stream>>>(x, cos_t, sin_t, n_tok, ld, n_head,
                                                        head_dim, n_sections);
    launched(c, "rope");
}

/* ---- softmax rows ---------------------------------------------------------------------------- */

__device__ float block_max(float v)
{
    __shared__ float part[32];
    __shared__ float total;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = lane < (int)(blockDim.x >> 5) ? part[lane] : -INFINITY;
        for (int o = 16; o > 0; o >>= 1)
            t = fmaxf(t, __shfl_xor_sync(0xffffffffu, t, o));
        if (lane == 0)
            total = t;
    }
    __syncthreads();
    float r = total;
    __syncthreads();
    return r;
}

__global__ void k_softmax(float *x, int n, int ld)
{
    float *row = x + (size_t)blockIdx.x * ld;
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        mx = fmaxf(mx, row[i]);
    mx = block_max(mx);
    float s = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float e = expf(row[i] - mx);
        row[i] = e;
        s += e;
    }
    float inv = 1.0f / block_sum(s);
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        row[i] *= inv;
}

extern "C" void clk_softmax(ClkCtx *c, float *x, int m, int n, int ld)
{
    if (m <= 0 || n <= 0)
        return;
    k_softmax<<<m, ROW_THREADS, 0, c->stream>>>(x, n, ld);
    launched(c, "softmax");
}

/* ---- attention ------------------------------------------------------------------------------- */

/* One warp per (query i, head h); lane l holds dims l, l+32, ... (NPL of them). Online softmax:
 * the running max m, the running sum l and the weighted values are rescaled as keys come. The
 * tail output shares m and l (it is the same softmax's sum over j >= tail_start). */
template <int NPL>
__global__ void k_attention_warp(float *out, float *out_tail, const float *q, const float *k,
                                 const float *v, int n_q, int n_kv, int ldq, int ldk, int ldv,
                                 int ldo, int n_head, int group, int hd, float scale, int causal,
                                 int tail_start)
{
    const int warps = blockDim.x >> 5;
    const int item = blockIdx.x * warps + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (item >= n_q * n_head)
        return;
    const int h = item / n_q, i = item % n_q, g = h / group;
    const int limit = causal < 0 ? n_kv : min(n_kv, causal + i + 1);
    float qr[NPL], acc[NPL], acct[NPL];
    const float *qp = q + (size_t)i * ldq + (size_t)h * hd;
#pragma unroll
    for (int e = 0; e < NPL; e++) {
        int d = lane + 32 * e;
        qr[e] = d < hd ? qp[d] * scale : 0.0f;
        acc[e] = 0.0f;
        acct[e] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const float *kg = k + (size_t)g * hd, *vg = v + (size_t)g * hd;
    for (int j = 0; j < limit; j++) {
        const float *kj = kg + (size_t)j * ldk;
        float s = 0.0f;
#pragma unroll
        for (int e = 0; e < NPL; e++) {
            int d = lane + 32 * e;
            if (d < hd)
                s += qr[e] * kj[d];
        }
        s = warp_sum(s);
        float m_new = fmaxf(m, s);
        float corr = __expf(m - m_new); /* 0 on the first key (m = -inf) */
        float p = __expf(s - m_new);
        l = l * corr + p;
        const float *vj = vg + (size_t)j * ldv;
        const int in_tail = out_tail && j >= tail_start;
#pragma unroll
        for (int e = 0; e < NPL; e++) {
            int d = lane + 32 * e;
            float vv = d < hd ? vj[d] : 0.0f;
            acc[e] = acc[e] * corr + p * vv;
            acct[e] = acct[e] * corr + (in_tail ? p * vv : 0.0f);
        }
        m = m_new;
    }
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    float *op = out + (size_t)i * ldo + (size_t)h * hd;
    float *ot = out_tail ? out_tail + (size_t)i * ldo + (size_t)h * hd : NULL;
#pragma unroll
    for (int e = 0; e < NPL; e++) {
        int d = lane + 32 * e;
        if (d < hd) {
            op[d] = acc[e] * inv;
            if (ot)
                ot[d] = acct[e] * inv;
        }
    }
}

/* Any head size: one block per (query, head); the query and the running sums in shared memory
 * (3·hd floats), each key's score by a block reduction. */
__global__ void k_attention_block(float *out, float *out_tail, const float *q, const float *k,
                                  const float *v, int n_q, int n_kv, int ldq, int ldk, int ldv,
                                  int ldo, int n_head, int group, int hd, float scale, int causal,
                                  int tail_start)
{
    extern __shared__ float sh[];
    float *qs = sh, *acc = sh + hd, *acct = sh + 2 * hd;
    const int item = blockIdx.x;
    const int h = item / n_q, i = item % n_q, g = h / group;
    const int limit = causal < 0 ? n_kv : min(n_kv, causal + i + 1);
    const float *qp = q + (size_t)i * ldq + (size_t)h * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        qs[d] = qp[d] * scale;
        acc[d] = 0.0f;
        acct[d] = 0.0f;
    }
    __syncthreads();
    float m = -INFINITY, l = 0.0f;
    const float *kg = k + (size_t)g * hd, *vg = v + (size_t)g * hd;
    for (int j = 0; j < limit; j++) {
        const float *kj = kg + (size_t)j * ldk;
        float s = 0.0f;
        for (int d = threadIdx.x; d < hd; d += blockDim.x)
            s += qs[d] * kj[d];
        s = block_sum(s);
        float m_new = fmaxf(m, s);
        float corr = __expf(m - m_new), p = __expf(s - m_new);
        l = l * corr + p;
        const float *vj = vg + (size_t)j * ldv;
        const int in_tail = out_tail && j >= tail_start;
        for (int d = threadIdx.x; d < hd; d += blockDim.x) {
            acc[d] = acc[d] * corr + p * vj[d];
            acct[d] = acct[d] * corr + (in_tail ? p * vj[d] : 0.0f);
        }
        m = m_new;
    }
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    float *op = out + (size_t)i * ldo + (size_t)h * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        op[d] = acc[d] * inv;
        if (out_tail)
            out_tail[(size_t)i * ldo + (size_t)h * hd + d] = acct[d] * inv;
    }
}

extern "C" void clk_attention(ClkCtx *c, float *out, float *out_tail, const float *q,
                              const float *k, const float *v, int n_q, int n_kv, int ldq, int ldk,
                              int ldv, int ldo, int n_head, int n_kv_head, int head_dim,
                              float scale, int causal, int tail_start)
{
    if (n_q <= 0 || n_head <= 0)
        return;
    const int group = n_head / n_kv_head;
    const int items = n_q * n_head;
    const int warps = 4; /* per block */
    const unsigned blocks = (unsigned)((items + warps - 1) / warps);
    if (tail_start < 0)
        tail_start = 0;
#define ATT_WARP(NPL)                                                                              \
    k_attention_warp<NPL><<<blocks, warps * 32, 0, c->stream>>>(                                   \
        out, out_tail, q, k, v, n_q, n_kv, ldq, ldk, ldv, ldo, n_head, group, head_dim, scale,     \
        causal, tail_start)
    if (head_dim <= 32)
        ATT_WARP(1);
    else if (head_dim <= 64)
        ATT_WARP(2);
    else if (head_dim <= 128)
        ATT_WARP(4);
    else if (head_dim <= 256)
        ATT_WARP(8);
    else {
        size_t shm = 3 * (size_t)head_dim * sizeof(float);
        if (shm > 48 * 1024)
            cudaFuncSetAttribute(k_attention_block, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)shm);
        k_attention_block<<<items, 128, shm, c->stream>>>(out, out_tail, q, k, v, n_q, n_kv, ldq,
                                                          ldk, ldv, ldo, n_head, group, head_dim,
                                                          scale, causal, tail_start);
    }
#undef ATT_WARP
    launched(c, "attention");
}

/* ---- row norms, embedding -------------------------------------------------------------------- */

__global__ void k_row_norms(float *out, const float *a, const float *b, int n, int ld)
{
    const float *ar = a + (size_t)blockIdx.x * ld;
    const float *br = b ? b + (size_t)blockIdx.x * ld : NULL;
    double s = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        double d = br ? (double)ar[i] - (double)br[i] : (double)ar[i];
        s += d * d;
    }
    s = block_sum(s);
    if (threadIdx.x == 0)
        out[blockIdx.x] = (float)sqrt(s);
}

extern "C" void clk_row_norms(ClkCtx *c, float *out, const float *a, const float *b, int m, int n,
                              int ld)
{
    if (m <= 0)
        return;
    k_row_norms<<<m, ROW_THREADS, 0, c->stream>>>(out, a, b, n, ld);
    launched(c, "row_norms");
}

__global__ void k_embed(float *out, const float *table, const int32_t *ids, int n, int dim)
{
    GRID_STRIDE(idx, (size_t)n * dim)
    {
        int i = (int)(idx / dim), j = (int)(idx % dim);
        int id = ids[i];
        if (id >= 0)
            out[idx] = table[(size_t)id * dim + j];
    }
}

extern "C" void clk_embed(ClkCtx *c, float *out, const float *table, const int32_t *host_ids, int n,
                          int dim)
{
    if (n <= 0)
        return;
    if (n > c->ids_cap) {
        if (c->ids) {
            clk_release(c, c->ids);
            c->ids = NULL;
        }
        c->ids_cap = 0;
        int cap = n < 256 ? 256 : n;
        if (!(c->ids = (int32_t *)clk_alloc(c, (size_t)cap * sizeof(int32_t)))) {
            fail(c, "embed", "out of GPU memory for the token ids");
            return;
        }
        c->ids_cap = cap;
    }
    clk_upload(c, c->ids, host_ids, (size_t)n * sizeof(int32_t));
    k_embed<<<grid_for((size_t)n * dim, 256), 256, 0, c->stream>>>(out, table, c->ids, n, dim);
    launched(c, "embed");
}

/* ---- the encoder's layout ops ---------------------------------------------------------------- */

__global__ void k_im2col(float *patches, const float *pixels, int C, int S, int P)
{
    const int G = S / P, cpp = C * P * P;
    GRID_STRIDE(idx, (size_t)G * G * cpp)
    {
        int t = (int)(idx / cpp), r = (int)(idx % cpp);
        int row = t / G, col = t % G;
        int ch = r / (P * P), py = (r / P) % P, px = r % P;
        patches[idx] = pixels[((size_t)ch * S + (size_t)row * P + py) * S + (size_t)col * P + px];
    }
}

extern "C" void clk_im2col(ClkCtx *c, float *patches, const float *pixels, int channels, int size,
                           int patch)
{
    int G = size / patch;
    size_t total = (size_t)G * G * channels * patch * patch;
    if (!total)
        return;
    k_im2col<<<grid_for(total, 256), 256, 0, c->stream>>>(patches, pixels, channels, size, patch);
    launched(c, "im2col");
}

__global__ void k_merge2x2(float *out, const float *x, int G, int D)
{
    const int H = G / 2;
    GRID_STRIDE(idx, (size_t)H * H * 4 * D)
    {
        int t = (int)(idx / (4 * (size_t)D)), r = (int)(idx % (4 * (size_t)D));
        int qd = r / D, d = r % D;
        int i = t / H, j = t % H;
        int src = (2 * i + qd / 2) * G + 2 * j + (qd % 2);
        out[idx] = x[(size_t)src * D + d];
    }
}

extern "C" void clk_merge2x2(ClkCtx *c, float *out, const float *x, int grid, int d)
{
    size_t total = (size_t)(grid / 2) * (grid / 2) * 4 * d;
    if (!total)
        return;
    k_merge2x2<<<grid_for(total, 256), 256, 0, c->stream>>>(out, x, grid, d);
    launched(c, "merge2x2");
}

/* one thread per column: the rows in order, in double, as the CPU does */
__global__ void k_col_mean(float *out, const float *x, int m, int n)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n)
        return;
    double acc = 0;
    for (int i = 0; i < m; i++)
        acc += x[(size_t)i * n + j];
    out[j] = (float)(acc / m);
}

__global__ void k_center_cols(float *x, int m, int n)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n)
        return;
    double acc = 0;
    for (int i = 0; i < m; i++)
        acc += x[(size_t)i * n + j];
    double mean = acc / m;
    for (int i = 0; i < m; i++)
        x[(size_t)i * n + j] = (float)(x[(size_t)i * n + j] - mean);
}

extern "C" void clk_col_mean(ClkCtx *c, float *out, const float *x, int m, int n)
{
    if (m <= 0 || n <= 0)
        return;
    k_col_mean<<<(n + 127) / 128, 128, 0, c->stream>>>(out, x, m, n);
    launched(c, "col_mean");
}

extern "C" void clk_center_cols(ClkCtx *c, float *x, int m, int n)
{
    if (m <= 0 || n <= 0)
        return;
    k_center_cols<<<(n + 127) / 128, 128, 0, c->stream>>>(x, m, n);
    launched(c, "center_cols");
}

__global__ void k_scale_by(float *x, const float *s, size_t count)
{
    const float a = s[0];
    GRID_STRIDE(i, count) x[i] *= a;
}

extern "C" void clk_scale_by(ClkCtx *c, float *x, const float *s, size_t count)
{
    if (!count)
        return;
    k_scale_by<<<grid_for(count, 256), 256, 0, c->stream>>>(x, s, count);
    launched(c, "scale_by");
}
