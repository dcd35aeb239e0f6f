/* kernels.cu - the CUDA backend's kernels and cuBLAS calls (kernels.h): one launcher per backend
 * op (core/nn/backend.h gives each op's exact meaning; the CPU backend is the oracle the cuda
 * test suite compares against). Row ops take one block per row; elementwise ops a grid-stride
 * loop; attention is flash-style (online softmax, the scores never stored), one warp per
 * (query, head) for head sizes up to 256 and one block per (query, head) beyond. The training
 * ops (the clk_grad_* launchers, at the end) follow core/nn/grad.c. */
#include "kernels.h"
#include "quant-layout.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* A device buffer a context keeps between calls, grown on demand (see grow()). */
typedef struct {
    void *p;
    size_t bytes;
} Scratch;

struct ClkCtx {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    int math; /* CLK_MATH_F32, _TF32 or _BF16: how the products run */
    char name[256];
    char error[512]; /* the first failure since the last clk_take_error; "" when none */
    Scratch ids;     /* device copy of host ids: embed's, its backward's, cross-entropy's targets */
    Scratch red;     /* doubles: per-row losses, reduction partials and their total */
    Scratch stats;   /* doubles: per-row statistics of the norms' backward passes */
    Scratch attn;    /* floats: the attention backward's probabilities and their gradients */
    int32_t *host_targets; /* cross-entropy's targets merged with its mask, before upload */
    size_t host_targets_n;
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
    Scratch *bufs[] = { &c->ids, &c->red, &c->stats, &c->attn };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]->p)
            cudaFree(bufs[i]->p);
    free(c->host_targets);
    cublasDestroy(c->blas);
    cudaStreamDestroy(c->stream);
    free(c);
}

extern "C" const char *clk_device_name(const ClkCtx *c)
{
    return c->name;
}

extern "C" void clk_set_math(ClkCtx *c, int mode)
{
    if (mode != CLK_MATH_TF32 && mode != CLK_MATH_BF16)
        mode = CLK_MATH_F32;
    c->math = mode;
    /* TF32 is the handle's math mode, which cublasSgemm* follow; BF16 has no math mode of its
     * own: gemm_cm() asks for it per call (cublasGemm*Ex's compute type), on a default handle */
    blas_ok(c,
            cublasSetMathMode(c->blas, mode == CLK_MATH_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                             : CUBLAS_DEFAULT_MATH),
            "cublasSetMathMode");
}

extern "C" int clk_math(const ClkCtx *c)
{
    return c->math;
}

extern "C" void clk_set_tf32(ClkCtx *c, int on)
{
    clk_set_math(c, on ? CLK_MATH_TF32 : CLK_MATH_F32);
}

extern "C" int clk_tf32(const ClkCtx *c)
{
    return c->math == CLK_MATH_TF32;
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

/* A context buffer of at least `bytes`, grown on demand and kept for the next call (the old one
 * released after the stream has drained: queued ops may still read it). NULL with the context's
 * error set when the GPU is out of memory. */
static void *grow(ClkCtx *c, Scratch *s, size_t bytes, const char *what)
{
    if (bytes <= s->bytes)
        return s->p;
    clk_release(c, s->p);
    s->p = NULL;
    s->bytes = 0;
    if (!(s->p = clk_alloc(c, bytes))) {
        fail(c, what, "out of GPU memory for its workspace");
        return NULL;
    }
    s->bytes = bytes;
    return s->p;
}

/* n host ids copied to the context's device buffer; NULL with the error set. The copy from
 * pageable memory has left the host array when cudaMemcpyAsync returns, so the caller may
 * reuse it at once. */
static const int32_t *device_ids(ClkCtx *c, const int32_t *host_ids, int n, const char *what)
{
    int32_t *d = (int32_t *)grow(c, &c->ids, (size_t)(n < 256 ? 256 : n) * sizeof(int32_t), what);
    if (d)
        clk_upload(c, d, host_ids, (size_t)n * sizeof(int32_t));
    return d;
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

/* Every product goes through here: column-major C = alpha·op(A)·op(B) + beta·C, `batch` of them
 * with the strides s* (in floats) between one and the next (batch 1: a plain product). f32 and
 * TF32 take cublasSgemm* (the handle's math mode picks); BF16 takes cublasGemm*Ex with
 * CUBLAS_COMPUTE_32F_FAST_16BF: the inputs rounded to bf16 for the tensor cores, the products
 * accumulated in f32, the matrices in memory still f32. */
static void gemm_cm(ClkCtx *c, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                    float alpha, const float *a, int lda, long long sa, const float *b, int ldb,
                    long long sb, float beta, float *cm, int ldc, long long sc, int batch,
                    const char *what)
{
    cublasStatus_t s;
    if (c->math == CLK_MATH_BF16 && batch == 1)
        s = cublasGemmEx(c->blas, ta, tb, m, n, k, &alpha, a, CUDA_R_32F, lda, b, CUDA_R_32F, ldb,
                         &beta, cm, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F_FAST_16BF,
                         CUBLAS_GEMM_DEFAULT);
    else if (c->math == CLK_MATH_BF16)
        s = cublasGemmStridedBatchedEx(c->blas, ta, tb, m, n, k, &alpha, a, CUDA_R_32F, lda, sa, b,
                                       CUDA_R_32F, ldb, sb, &beta, cm, CUDA_R_32F, ldc, sc, batch,
                                       CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT);
    else if (batch == 1)
        s = cublasSgemm(c->blas, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, cm, ldc);
    else
        s = cublasSgemmStridedBatched(c->blas, ta, tb, m, n, k, &alpha, a, lda, sa, b, ldb, sb,
                                      &beta, cm, ldc, sc, batch);
    blas_ok(c, s, what);
}

/* Row-major C[m, n] = alpha·op(A)·op(B) + beta·C (cblas_sgemm's meaning, so a CPU call reads
 * the same here), batched as gemm_cm: column-major that is C^T = op(B)^T·op(A)^T. */
static void gemm_rm(ClkCtx *c, int trans_a, int trans_b, int m, int n, int k, float alpha,
                    const float *a, int lda, long long sa, const float *b, int ldb, long long sb,
                    float beta, float *cm, int ldc, long long sc, int batch, const char *what)
{
    gemm_cm(c, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
            alpha, b, ldb, sb, a, lda, sa, beta, cm, ldc, sc, batch, what);
}

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
    gemm_cm(c, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, one, w, k, 0, x, k, 0, beta, out, n, 0, 1,
            "linear (cuBLAS)");
}

extern "C" void clk_gemm(ClkCtx *c, int trans_a, int trans_b, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *cm,
                         int ldc)
{
    if (m <= 0 || n <= 0)
        return;
    gemm_rm(c, trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, cm, ldc, 0, 1,
            "gemm (cuBLAS)");
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

/* sin_sign −1 rotates by −angle: the backward (the rotation's transpose). */
__global__ void k_rope(float *x, const float *cos_t, const float *sin_t, int n_tok, int ld,
                       int n_head, int head_dim, int n_sections, float sin_sign)
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
        float cs = cos_t[(size_t)t * half + s * h2 + i];
        float sn = sin_sign * sin_t[(size_t)t * half + s * h2 + i];
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
                                                        head_dim, n_sections, 1.0f);
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
    const int32_t *ids = device_ids(c, host_ids, n, "embed (the token ids)");
    if (!ids)
        return;
    k_embed<<<grid_for((size_t)n * dim, 256), 256, 0, c->stream>>>(out, table, ids, n, dim);
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

/* ---- training ------------------------------------------------------------------------------
 *
 * The backward passes, losses and AdamW of backend.h's struct cl_backend_train_ops, after their
 * CPU references in core/nn/grad.c: every gradient output accumulates (+=) and a NULL one is
 * skipped, unless a comment says SET. Sums over rows or elements run in double in an order fixed
 * by the shapes alone (block partials, then their total in one block; no atomics), so a result
 * is the same from run to run; only the embedding's backward adds with atomics (repeated ids
 * meet in one row). */

/* Row kernels loop over their rows (one block per row at a time): the grid stays in bounds
 * whatever m is. */
static unsigned row_grid(size_t rows)
{
    return rows > 65535u * 8u ? 65535u * 8u : rows ? (unsigned)rows : 1u;
}

#define ROW_LOOP(r, m) for (int r = blockIdx.x; r < (m); r += gridDim.x)

/* Column sums: dst[j] += Σ_i f(i·n + j, i) over m rows. A block takes 32 columns (a warp reads a
 * row's 32 consecutive floats) and COL_LANES row lanes, each lane its rows in order in double,
 * then the lanes in order: the CPU's col_sums_add up to the summation order. */
#define COL_TILE 32
#define COL_LANES 16
#define COL_THREADS (COL_TILE * COL_LANES)

template <typename F>
__global__ void __launch_bounds__(COL_THREADS) k_col_sums(float *dst, int m, int n, F f)
{
    __shared__ double part[COL_LANES][COL_TILE];
    const int j = blockIdx.x * COL_TILE + threadIdx.x;
    double s = 0;
    if (j < n)
        for (int i = threadIdx.y; i < m; i += COL_LANES)
            s += f((size_t)i * n + j, i);
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && j < n) {
        double t = 0;
        for (int l = 0; l < COL_LANES; l++)
            t += part[l][threadIdx.x];
        dst[j] += (float)t;
    }
}

template <typename F>
static void col_sums(ClkCtx *c, float *dst, int m, int n, F f, const char *what)
{
    if (!dst || m <= 0 || n <= 0)
        return;
    k_col_sums<<<(unsigned)((n + COL_TILE - 1) / COL_TILE), dim3(COL_TILE, COL_LANES), 0,
                 c->stream>>>(dst, m, n, f);
    launched(c, what);
}

/* the terms the column sums add up */
struct ColOf { /* a */
    const float *a;
    __device__ double operator()(size_t idx, int) const { return a[idx]; }
};
struct ColProduct { /* a ⊙ b, the product in double as the CPU's */
    const float *a, *b;
    __device__ double operator()(size_t idx, int) const { return (double)a[idx] * b[idx]; }
};
struct ColLayerNorm { /* dy ⊙ x̂, x̂ = (x − mean)·rstd from the row's statistics */
    const float *dy, *x;
    const double *stats; /* (mean, rstd) per row */
    __device__ double operator()(size_t idx, int i) const
    {
        return (double)dy[idx] * ((x[idx] - stats[2 * (size_t)i]) * stats[2 * (size_t)i + 1]);
    }
};
struct ColRmsNorm { /* dy ⊙ x · rs, in float as the CPU's */
    const float *dy, *x;
    const double *stats; /* the row's rs (its float rounding is what the CPU multiplies by) */
    __device__ double operator()(size_t idx, int i) const
    {
        return dy[idx] * x[idx] * (float)stats[i];
    }
};

/* ---- linear, norms, modulation ---- */

extern "C" void clk_grad_linear(ClkCtx *c, float *dx, float *dw, float *db, const float *dy,
                                const float *x, const float *w, int m, int k, int n)
{
    if (m <= 0 || k <= 0 || n <= 0)
        return;
    /* cl_grad_linear's two sgemm calls, beta = 1 */
    if (dx)
        gemm_rm(c, 0, 0, m, k, n, 1.0f, dy, n, 0, w, k, 0, 1.0f, dx, k, 0, 1,
                "linear backward dx (cuBLAS)");
    if (dw)
        gemm_rm(c, 1, 0, n, k, m, 1.0f, dy, n, 0, x, k, 0, 1.0f, dw, k, 0, 1,
                "linear backward dw (cuBLAS)");
    col_sums(c, db, m, n, ColOf{ dy }, "linear backward db");
}

/* One block per row: the row's mean and rstd (kept in stats for dw), Σ dx̂ and Σ dx̂·x̂, then
 * dx, all in double as cl_grad_layernorm. */
__global__ void k_grad_layernorm(float *dx, double *stats, const float *dy, const float *x,
                                 const float *w, int m, int n, float eps)
{
    ROW_LOOP(r, m)
    {
        const float *xr = x + (size_t)r * n, *gr = dy + (size_t)r * n;
        double s = 0;
        for (int i = threadIdx.x; i < n; i += blockDim.x)
            s += xr[i];
        const double mean = block_sum(s) / n;
        double q = 0;
        for (int i = threadIdx.x; i < n; i += blockDim.x)
            q += (xr[i] - mean) * (xr[i] - mean);
        const double rstd = 1.0 / sqrt(block_sum(q) / n + eps);
        double s1 = 0, s2 = 0;
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            double xh = (xr[i] - mean) * rstd, g = (double)gr[i] * w[i];
            s1 += g;
            s2 += g * xh;
        }
        s1 = block_sum(s1);
        s2 = block_sum(s2);
        if (dx) {
            float *dr = dx + (size_t)r * n;
            for (int i = threadIdx.x; i < n; i += blockDim.x) {
                double xh = (xr[i] - mean) * rstd, g = (double)gr[i] * w[i];
                dr[i] += (float)(rstd * (g - s1 / n - xh * s2 / n));
            }
        }
        if (stats && threadIdx.x == 0) {
            stats[2 * (size_t)r] = mean;
            stats[2 * (size_t)r + 1] = rstd;
        }
    }
}

extern "C" void clk_grad_layernorm(ClkCtx *c, float *dx, float *dw, float *db, const float *dy,
                                   const float *x, const float *w, int m, int n, float eps)
{
    if (m <= 0 || n <= 0)
        return;
    double *stats = NULL;
    if (dw && !(stats = (double *)grow(c, &c->stats, 2 * (size_t)m * sizeof(double),
                                       "layernorm backward")))
        return;
    if (dx || dw) {
        k_grad_layernorm<<<row_grid(m), ROW_THREADS, 0, c->stream>>>(dx, stats, dy, x, w, m, n,
                                                                     eps);
        launched(c, "layernorm backward");
    }
    if (dw)
        col_sums(c, dw, m, n, ColLayerNorm{ dy, x, stats }, "layernorm backward dw");
    col_sums(c, db, m, n, ColOf{ dy }, "layernorm backward db");
}

/* One block per row: rs = 1/sqrt(mean(x²) + eps) and s = Σ dy·w·x (in double; the CPU sums them
 * in 16 float lanes first), then dx += rs·(dy·w) − rs³·s/n·x in float as cl_grad_rmsnorm. */
__global__ void k_grad_rmsnorm(float *dx, double *stats, const float *dy, const float *x,
                               const float *w, int m, int n, float eps)
{
    ROW_LOOP(r, m)
    {
        const float *xr = x + (size_t)r * n, *gr = dy + (size_t)r * n;
        double q = 0, s = 0;
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            q += (double)xr[i] * xr[i];
            s += (double)gr[i] * w[i] * xr[i];
        }
        const double rs = 1.0 / sqrt(block_sum(q) / n + eps);
        s = block_sum(s);
        if (dx) {
            float *dr = dx + (size_t)r * n;
            const float a = (float)rs, b = (float)(rs * rs * rs * s / n);
            for (int i = threadIdx.x; i < n; i += blockDim.x)
                dr[i] += a * (gr[i] * w[i]) - b * xr[i];
        }
        if (stats && threadIdx.x == 0)
            stats[r] = rs;
    }
}

extern "C" void clk_grad_rmsnorm(ClkCtx *c, float *dx, float *dw, const float *dy, const float *x,
                                 const float *w, int m, int n, float eps)
{
    if (m <= 0 || n <= 0 || (!dx && !dw))
        return;
    double *stats = NULL;
    if (dw &&
        !(stats = (double *)grow(c, &c->stats, (size_t)m * sizeof(double), "rmsnorm backward")))
        return;
    k_grad_rmsnorm<<<row_grid(m), ROW_THREADS, 0, c->stream>>>(dx, stats, dy, x, w, m, n, eps);
    launched(c, "rmsnorm backward");
    if (dw)
        col_sums(c, dw, m, n, ColRmsNorm{ dy, x, stats }, "rmsnorm backward dw");
}

/* da[i, j] += f_j · dy[i, j], f_j = 1 + gate[j] (one_plus), gate[j], or 1 (gate NULL): the
 * input gradient of modulate, residual and scale_cols. */
__global__ void k_grad_by_cols(float *da, const float *dy, const float *gate, int one_plus, int m,
                               int n)
{
    GRID_STRIDE(i, (size_t)m * n)
    {
        const float f = gate ? (one_plus ? 1.0f + gate[i % n] : gate[i % n]) : 1.0f;
        da[i] += f * dy[i];
    }
}

static void grad_by_cols(ClkCtx *c, float *da, const float *dy, const float *gate, int one_plus,
                         int m, int n, const char *what)
{
    if (!da || m <= 0 || n <= 0)
        return;
    k_grad_by_cols<<<grid_for((size_t)m * n, 256), 256, 0, c->stream>>>(da, dy, gate, one_plus, m,
                                                                        n);
    launched(c, what);
}

extern "C" void clk_grad_modulate(ClkCtx *c, float *dx, float *dscale, float *dshift,
                                  const float *dy, const float *x, const float *scale, int m, int n)
{
    grad_by_cols(c, dx, dy, scale, 1, m, n, "modulate backward");
    col_sums(c, dscale, m, n, ColProduct{ dy, x }, "modulate backward dscale");
    col_sums(c, dshift, m, n, ColOf{ dy }, "modulate backward dshift");
}

extern "C" void clk_grad_residual(ClkCtx *c, float *da, float *dgate, const float *dy,
                                  const float *a, const float *gate, int m, int n)
{
    grad_by_cols(c, da, dy, gate, 1, m, n, "residual backward");
    if (gate)
        col_sums(c, dgate, m, n, ColProduct{ dy, a }, "residual backward dgate");
}

extern "C" void clk_grad_scale_cols(ClkCtx *c, float *da, float *dgate, const float *dy,
                                    const float *a, const float *gate, int m, int n)
{
    grad_by_cols(c, da, dy, gate, 0, m, n, "scale_cols backward");
    col_sums(c, dgate, m, n, ColProduct{ dy, a }, "scale_cols backward dgate");
}

/* ---- activations ---- */

/* GELU'(x) = Φ(x) + x·φ(x); Φ through erfc, which keeps its precision in the left tail (where
 * 1 + erf cancels) as the CPU's erfc branch does. */
__global__ void k_grad_gelu(float *dx, const float *dy, const float *x, size_t count)
{
    GRID_STRIDE(i, count)
    {
        const float v = x[i];
        const float cdf = 0.5f * erfcf(-v * 0.707106781186547524f);
        const float phi = expf(-0.5f * (v * v)) * 0.398942280401432678f;
        dx[i] += dy[i] * (cdf + v * phi);
    }
}

__global__ void k_grad_silu(float *dx, const float *dy, const float *x, size_t count)
{
    GRID_STRIDE(i, count)
    {
        const float v = x[i], s = 1.0f / (1.0f + expf(-v));
        dx[i] += dy[i] * (s * (1.0f + v * (1.0f - s)));
    }
}

/* up may be NULL when dgate is (the CPU's silu_mul_grad_lanes reads it only for dgate). */
__global__ void k_grad_silu_mul(float *dgate, float *dup, const float *dy, const float *gate,
                                const float *up, size_t count)
{
    GRID_STRIDE(i, count)
    {
        const float g = gate[i], d = dy[i], sg = 1.0f / (1.0f + expf(-g));
        if (dgate)
            dgate[i] += d * up[i] * (sg * (1.0f + g * (1.0f - sg)));
        if (dup)
            dup[i] += d * (g * sg);
    }
}

extern "C" void clk_grad_gelu(ClkCtx *c, float *dx, const float *dy, const float *x, size_t count)
{
    if (!dx || !count)
        return;
    k_grad_gelu<<<grid_for(count, 256), 256, 0, c->stream>>>(dx, dy, x, count);
    launched(c, "gelu backward");
}

extern "C" void clk_grad_silu(ClkCtx *c, float *dx, const float *dy, const float *x, size_t count)
{
    if (!dx || !count)
        return;
    k_grad_silu<<<grid_for(count, 256), 256, 0, c->stream>>>(dx, dy, x, count);
    launched(c, "silu backward");
}

extern "C" void clk_grad_silu_mul(ClkCtx *c, float *dgate, float *dup, const float *dy,
                                  const float *gate, const float *up, size_t count)
{
    if ((!dgate && !dup) || !count)
        return;
    k_grad_silu_mul<<<grid_for(count, 256), 256, 0, c->stream>>>(dgate, dup, dy, gate, up, count);
    launched(c, "silu_mul backward");
}

/* ---- RoPE, softmax ---- */

extern "C" void clk_grad_rope(ClkCtx *c, float *dx, const float *cos_t, const float *sin_t,
                              int n_tok, int ld, int n_head, int head_dim, int n_sections)
{
    size_t pairs = (size_t)n_tok * n_head * (head_dim / 2);
    if (!pairs || n_sections <= 0)
        return;
    /* a·cos + b·sin, b·cos − a·sin (cl_grad_rope) is the forward's a·cos − b·(−sin), ... */
    k_rope<<<grid_for(pairs, 256), 256, 0, c->stream>>>(dx, cos_t, sin_t, n_tok, ld, n_head,
                                                        head_dim, n_sections, -1.0f);
    launched(c, "rope backward");
}

/* dx += y ⊙ (dy − Σ dy ⊙ y) per row, the sum and the difference in double. */
__global__ void k_grad_softmax(float *dx, const float *dy, const float *y, int m, int n, int ld)
{
    ROW_LOOP(r, m)
    {
        const float *yr = y + (size_t)r * ld, *gr = dy + (size_t)r * ld;
        double s = 0;
        for (int j = threadIdx.x; j < n; j += blockDim.x)
            s += (double)gr[j] * yr[j];
        s = block_sum(s);
        float *dr = dx + (size_t)r * ld;
        for (int j = threadIdx.x; j < n; j += blockDim.x)
            dr[j] += (float)(yr[j] * (gr[j] - s));
    }
}

extern "C" void clk_grad_softmax(ClkCtx *c, float *dx, const float *dy, const float *y, int m,
                                 int n, int ld)
{
    if (!dx || m <= 0 || n <= 0)
        return;
    k_grad_softmax<<<row_grid(m), ROW_THREADS, 0, c->stream>>>(dx, dy, y, m, n, ld);
    launched(c, "softmax backward");
}

/* ---- attention with its probabilities stored ----
 *
 * The training forward and backward work a head at a time as cl_train_attention and
 * grad_attention do, with whole [n_q, n_kv] score matrices (the CPU cuts causal ones into blocks
 * of 64 rows to skip the masked triangle; here the masked entries are zeros in full products).
 * Query heads go in `group` passes: pass r takes the heads h = g·group + r of every kv head g
 * as one strided batch of cuBLAS products, so no two products of one call add into the same key
 * or value head (the heads of a GQA group do, pass after pass, in stream order). */

/* Rows of n_kv scores (row r: query r % n_q of its head) → probabilities in place: softmax over
 * the keys the query sees (all, or j <= causal + i), 0 for the rest. The exponentials' sum in
 * double, then one float reciprocal as the CPU's softmax_row. */
__global__ void k_attn_softmax(float *p, int rows, int n_q, int n_kv, int causal)
{
    ROW_LOOP(r, rows)
    {
        float *x = p + (size_t)r * n_kv;
        const int i = r % n_q;
        const int vis = causal < 0 ? n_kv : min(n_kv, causal + i + 1);
        float mx = -INFINITY;
        for (int j = threadIdx.x; j < vis; j += blockDim.x)
            mx = fmaxf(mx, x[j]);
        mx = block_max(mx);
        double s = 0;
        for (int j = threadIdx.x; j < vis; j += blockDim.x) {
            float e = expf(x[j] - mx);
            x[j] = e;
            s += e;
        }
        s = block_sum(s);
        const float inv = s > 0 ? (float)(1.0 / s) : 0.0f;
        for (int j = threadIdx.x; j < n_kv; j += blockDim.x)
            x[j] = j < vis ? x[j] * inv : 0.0f;
    }
}

/* dS = P ⊙ (dP − Σ_j P dP) over the keys row i sees, 0 for the masked ones: in place on dP
 * (rows of n_kv, in order), the dot in double rounded to float as grad_attention's. P's rows
 * are those of n_q-row heads `sp` floats apart. pm (may be NULL) receives P with its masked
 * entries zeroed (P's own may be anything: cl_train_attention leaves them unwritten). */
__global__ void k_attn_dscores(float *ds, float *pm, const float *p, long long sp, int rows,
                               int n_q, int n_kv, int causal)
{
    ROW_LOOP(r, rows)
    {
        const int b = r / n_q, i = r % n_q;
        const int vis = causal < 0 ? n_kv : min(n_kv, causal + i + 1);
        const float *pr = p + b * sp + (size_t)i * n_kv;
        float *dr = ds + (size_t)r * n_kv;
        double s = 0;
        for (int j = threadIdx.x; j < vis; j += blockDim.x)
            s += (double)pr[j] * dr[j];
        const float dot = (float)block_sum(s);
        for (int j = threadIdx.x; j < n_kv; j += blockDim.x)
            dr[j] = j < vis ? pr[j] * (dr[j] - dot) : 0.0f;
        if (pm)
            for (int j = threadIdx.x; j < n_kv; j += blockDim.x)
                pm[(size_t)r * n_kv + j] = j < vis ? pr[j] : 0.0f;
    }
}

/* Floats per workspace matrix (128 MB): as many kv heads per batch as fit, at least one. */
#define ATTN_WS_FLOATS ((size_t)1 << 25)

extern "C" void clk_grad_attention_keep(ClkCtx *c, float *out, float *probs, const float *q,
                                        const float *k, const float *v, int n_q, int n_kv, int ldq,
                                        int ldk, int ldv, int ldo, int n_head, int n_kv_head,
                                        int head_dim, float scale, int causal)
{
    if (n_q <= 0 || n_kv <= 0 || n_head <= 0 || n_kv_head <= 0)
        return;
    const int group = n_head / n_kv_head, hd = head_dim;
    const long long per_head = (long long)n_q * n_kv;
    /* pass r: heads h = g·group + r, their probabilities at h·n_q·n_kv */
    for (int r = 0; r < group; r++)
        gemm_rm(c, 0, 1, n_q, n_kv, hd, scale, q + (size_t)r * hd, ldq, (long long)group * hd, k,
                ldk, hd, 0.0f, probs + r * per_head, n_kv, group * per_head, n_kv_head,
                "attention forward scores (cuBLAS)");
    const int rows = n_head * n_q;
    k_attn_softmax<<<row_grid(rows), ROW_THREADS, 0, c->stream>>>(probs, rows, n_q, n_kv, causal);
    launched(c, "attention forward softmax");
    for (int r = 0; r < group; r++)
        gemm_rm(c, 0, 0, n_q, hd, n_kv, 1.0f, probs + r * per_head, n_kv, group * per_head, v, ldv,
                hd, 0.0f, out + (size_t)r * hd, ldo, (long long)group * hd, n_kv_head,
                "attention forward values (cuBLAS)");
}

/* grad_attention: probs NULL recomputes the probabilities into the workspace. */
static void attention_backward(ClkCtx *c, float *dq, float *dk, float *dv, const float *dout,
                               const float *q, const float *k, const float *v, const float *probs,
                               int n_q, int n_kv, int ldq, int ldk, int ldv, int ldo, int n_head,
                               int n_kv_head, int head_dim, float scale, int causal)
{
    if (n_q <= 0 || n_kv <= 0 || n_head <= 0 || n_kv_head <= 0 || (!dq && !dk && !dv))
        return;
    const int group = n_head / n_kv_head, hd = head_dim;
    const size_t per_head = (size_t)n_q * n_kv;
    const size_t fit = ATTN_WS_FLOATS / per_head;
    const int nb = fit < 1 ? 1 : fit < (size_t)n_kv_head ? (int)fit : n_kv_head;
    /* dS always; a P of our own unless the forward's is used as it is (no causal mask whose
     * entries it may have left unwritten) */
    const int own_p = !probs || causal >= 0;
    float *ws = (float *)grow(c, &c->attn, (own_p ? 2 : 1) * (size_t)nb * per_head * sizeof(float),
                              "attention backward");
    if (!ws)
        return;
    float *wds = ws, *wp = own_p ? ws + (size_t)nb * per_head : NULL;
    const long long sw = (long long)per_head, sqh = (long long)group * hd;
    for (int r = 0; r < group; r++)
        for (int g0 = 0; g0 < n_kv_head; g0 += nb) {
            const int batch = nb < n_kv_head - g0 ? nb : n_kv_head - g0, h0 = g0 * group + r;
            const int rows = batch * n_q;
            const float *qh = q + (size_t)h0 * hd, *doh = dout + (size_t)h0 * hd;
            const float *kg = k + (size_t)g0 * hd, *vg = v + (size_t)g0 * hd;
            const float *p = probs ? probs + (size_t)h0 * per_head : wp;
            long long sp = probs ? group * sw : sw;
            if (!probs) {
                gemm_rm(c, 0, 1, n_q, n_kv, hd, scale, qh, ldq, sqh, kg, ldk, hd, 0.0f, wp, n_kv,
                        sw, batch, "attention backward scores (cuBLAS)");
                k_attn_softmax<<<row_grid(rows), ROW_THREADS, 0, c->stream>>>(wp, rows, n_q, n_kv,
                                                                              causal);
                launched(c, "attention backward softmax");
            }
            /* dP = dO·V^T, then dS in place */
            gemm_rm(c, 0, 1, n_q, n_kv, hd, 1.0f, doh, ldo, sqh, vg, ldv, hd, 0.0f, wds, n_kv, sw,
                    batch, "attention backward dP (cuBLAS)");
            float *pm = probs && causal >= 0 ? wp : NULL;
            k_attn_dscores<<<row_grid(rows), ROW_THREADS, 0, c->stream>>>(wds, pm, p, sp, rows, n_q,
                                                                          n_kv, causal);
            launched(c, "attention backward dS");
            if (pm)
                p = pm, sp = sw;
            /* dQ += scale·dS·K, dK += scale·dS^T·Q, dV += P^T·dO */
            if (dq)
                gemm_rm(c, 0, 0, n_q, hd, n_kv, scale, wds, n_kv, sw, kg, ldk, hd, 1.0f,
                        dq + (size_t)h0 * hd, ldq, sqh, batch, "attention backward dq (cuBLAS)");
            if (dk)
                gemm_rm(c, 1, 0, n_kv, hd, n_q, scale, wds, n_kv, sw, qh, ldq, sqh, 1.0f,
                        dk + (size_t)g0 * hd, ldk, hd, batch, "attention backward dk (cuBLAS)");
            if (dv)
                gemm_rm(c, 1, 0, n_kv, hd, n_q, 1.0f, p, n_kv, sp, doh, ldo, sqh, 1.0f,
                        dv + (size_t)g0 * hd, ldv, hd, batch, "attention backward dv (cuBLAS)");
        }
}

extern "C" void clk_grad_attention(ClkCtx *c, float *dq, float *dk, float *dv, const float *dout,
                                   const float *q, const float *k, const float *v, int n_q,
                                   int n_kv, int ldq, int ldk, int ldv, int ldo, int n_head,
                                   int n_kv_head, int head_dim, float scale, int causal)
{
    attention_backward(c, dq, dk, dv, dout, q, k, v, NULL, n_q, n_kv, ldq, ldk, ldv, ldo, n_head,
                       n_kv_head, head_dim, scale, causal);
}

extern "C" void clk_grad_attention_probs(ClkCtx *c, float *dq, float *dk, float *dv,
                                         const float *dout, const float *q, const float *k,
                                         const float *v, const float *probs, int n_q, int n_kv,
                                         int ldq, int ldk, int ldv, int ldo, int n_head,
                                         int n_kv_head, int head_dim, float scale, int causal)
{
    attention_backward(c, dq, dk, dv, dout, q, k, v, probs, n_q, n_kv, ldq, ldk, ldv, ldo, n_head,
                       n_kv_head, head_dim, scale, causal);
}

/* ---- row norms, embedding, the merger's gather ---- */

__global__ void k_grad_row_norms(float *da, const float *dout, const float *a, const float *out,
                                 int m, int n)
{
    GRID_STRIDE(idx, (size_t)m * n)
    {
        const size_t i = idx / n;
        const float o = out[i];
        if (o != 0.0f)
            da[idx] += dout[i] / o * a[idx];
    }
}

extern "C" void clk_grad_row_norms(ClkCtx *c, float *da, const float *dout, const float *a,
                                   const float *out, int m, int n)
{
    if (!da || m <= 0 || n <= 0)
        return;
    k_grad_row_norms<<<grid_for((size_t)m * n, 256), 256, 0, c->stream>>>(da, dout, a, out, m, n);
    launched(c, "row_norms backward");
}

/* Atomics: a repeated id's rows add up in whatever order the threads come. */
__global__ void k_grad_embed(float *dtable, const float *dy, const int32_t *ids, int n, int dim)
{
    GRID_STRIDE(idx, (size_t)n * dim)
    {
        const int i = (int)(idx / dim), j = (int)(idx % dim);
        const int id = ids[i];
        if (id >= 0)
            atomicAdd(dtable + (size_t)id * dim + j, dy[idx]);
    }
}

extern "C" void clk_grad_embed(ClkCtx *c, float *dtable, const float *dy, const int32_t *host_ids,
                               int n, int dim)
{
    if (!dtable || n <= 0 || dim <= 0)
        return;
    const int32_t *ids = device_ids(c, host_ids, n, "embed backward (the token ids)");
    if (!ids)
        return;
    k_grad_embed<<<grid_for((size_t)n * dim, 256), 256, 0, c->stream>>>(dtable, dy, ids, n, dim);
    launched(c, "embed backward");
}

/* k_merge2x2's map backwards: each source token has one place in the gather, so no two threads
 * add into the same float. */
__global__ void k_grad_merge2x2(float *dx, const float *dcat, int G, int D)
{
    const int H = G / 2;
    GRID_STRIDE(idx, (size_t)H * H * 4 * D)
    {
        int t = (int)(idx / (4 * (size_t)D)), r = (int)(idx % (4 * (size_t)D));
        int qd = r / D, d = r % D;
        int i = t / H, j = t % H;
        int src = (2 * i + qd / 2) * G + 2 * j + (qd % 2);
        dx[(size_t)src * D + d] += dcat[idx];
    }
}

extern "C" void clk_grad_merge2x2(ClkCtx *c, float *dx, const float *dcat, int grid, int dim)
{
    size_t total = (size_t)(grid / 2) * (grid / 2) * 4 * dim;
    if (!dx || !total)
        return;
    k_grad_merge2x2<<<grid_for(total, 256), 256, 0, c->stream>>>(dx, dcat, grid, dim);
    launched(c, "merge2x2 backward");
}

/* ---- losses and reductions to the host ---- */

/* Blocks of the element reductions' first stage: fixed by the count alone (so the order of the
 * sums is), their partials then added in one block. */
#define REDUCE_BLOCKS 1024u
#define REDUCE_THREADS 256

static unsigned reduce_grid(size_t count)
{
    size_t b = (count + REDUCE_THREADS - 1) / REDUCE_THREADS;
    return b > REDUCE_BLOCKS ? REDUCE_BLOCKS : b ? (unsigned)b : 1u;
}

/* out[0] = Σ in[0, n) (one block of 1024: each thread its stride in order, then the tree). */
__global__ void __launch_bounds__(1024) k_sum_doubles(double *out, const double *in, size_t n)
{
    double s = 0;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x)
        s += in[i];
    s = block_sum(s);
    if (threadIdx.x == 0)
        out[0] = s;
}

/* in[0, n) summed on the device (into in[n]) and brought back; NAN when the context holds an
 * error (an op before it failed, or this one: the value means nothing). */
static double sum_to_host(ClkCtx *c, double *in, size_t n, const char *what)
{
    k_sum_doubles<<<1, 1024, 0, c->stream>>>(in + n, in, n);
    launched(c, what);
    double total = 0;
    clk_download(c, &total, in + n, sizeof total);
    return c->error[0] ? NAN : total;
}

/* One block (1024 threads) per row t of a vocabulary: tgt[t] < 0 (not supervised) zeroes the
 * row's gradient and loses nothing; else the loss lse − z[y] in double and the gradient
 * (e/Σe)·g, minus g at the target, g = scale/ns: cl_cross_entropy's float exponentials summed
 * in double, and its float products (__fmul_rn: not fused with the subtraction). */
__global__ void __launch_bounds__(1024)
    k_cross_entropy(float *dlogits, double *row_loss, const float *logits, const int32_t *tgt,
                    int n, int vocab, double g)
{
    ROW_LOOP(t, n)
    {
        const float *z = logits + (size_t)t * vocab;
        float *d = dlogits ? dlogits + (size_t)t * vocab : NULL;
        const int y = tgt[t];
        if (y < 0) {
            if (d)
                for (int j = threadIdx.x; j < vocab; j += blockDim.x)
                    d[j] = 0.0f;
            if (threadIdx.x == 0)
                row_loss[t] = 0.0;
            continue;
        }
        float mx = -INFINITY;
        for (int j = threadIdx.x; j < vocab; j += blockDim.x)
            mx = fmaxf(mx, z[j]);
        mx = block_max(mx);
        double s = 0;
        for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
            float e = expf(z[j] - mx);
            s += e;
            if (d)
                d[j] = e;
        }
        s = block_sum(s);
        if (threadIdx.x == 0)
            row_loss[t] = ((double)mx + log(s)) - z[y];
        if (d) {
            /* each thread rescales the exponentials it wrote itself: no barrier needed */
            const float f = (float)(g / s), gy = (float)g;
            for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
                float e = __fmul_rn(d[j], f);
                d[j] = j == y ? e - gy : e;
            }
        }
    }
}

extern "C" double clk_grad_cross_entropy(ClkCtx *c, float *dlogits, const float *logits,
                                         const int32_t *host_targets, const uint8_t *host_mask,
                                         int n, int vocab, float scale, int *n_supervised)
{
    int ns = 0;
    for (int t = 0; t < n; t++)
        ns += !host_mask || host_mask[t];
    if (n_supervised)
        *n_supervised = ns;
    if (ns == 0 || vocab <= 0) {
        if (dlogits && n > 0 && vocab > 0)
            clk_zero(c, dlogits, (size_t)n * vocab * sizeof(float));
        return 0.0;
    }
    /* the mask folded into the targets (−1: not supervised), one upload */
    if ((size_t)n > c->host_targets_n) {
        int32_t *t = (int32_t *)realloc(c->host_targets, (size_t)n * sizeof(int32_t));
        if (!t) {
            fail(c, "cross_entropy", "out of host memory for the targets");
            return NAN;
        }
        c->host_targets = t;
        c->host_targets_n = (size_t)n;
    }
    for (int t = 0; t < n; t++)
        c->host_targets[t] = !host_mask || host_mask[t] ? host_targets[t] : -1;
    const int32_t *tgt = device_ids(c, c->host_targets, n, "cross_entropy (the targets)");
    double *rows = (double *)grow(c, &c->red, ((size_t)n + 1) * sizeof(double), "cross_entropy");
    if (!tgt || !rows)
        return NAN;
    k_cross_entropy<<<row_grid(n), 1024, 0, c->stream>>>(dlogits, rows, logits, tgt, n, vocab,
                                                         (double)scale / ns);
    launched(c, "cross_entropy");
    return sum_to_host(c, rows, (size_t)n, "cross_entropy (the sum)") / ns;
}

/* Per element log(1 + e^z) − z·y without overflow and dz = scale·(sigmoid(z) − y), in double as
 * cl_bce_logits; each block's loss into part[blockIdx.x]. */
__global__ void k_bce(float *dz, double *part, const float *z, const float *y, size_t count,
                      float scale)
{
    double s = 0;
    GRID_STRIDE(i, count)
    {
        const double zi = z[i], yi = y[i];
        s += fmax(zi, 0.0) - zi * yi + log1p(exp(-fabs(zi)));
        if (dz)
            dz[i] = (float)((double)scale * (1.0 / (1.0 + exp(-zi)) - yi));
    }
    s = block_sum(s);
    if (threadIdx.x == 0)
        part[blockIdx.x] = s;
}

extern "C" double clk_grad_bce(ClkCtx *c, float *dz, const float *z, const float *y, size_t count,
                               float scale)
{
    if (!count)
        return 0.0;
    const unsigned blocks = reduce_grid(count);
    double *part = (double *)grow(c, &c->red, (REDUCE_BLOCKS + 1) * sizeof(double), "bce");
    if (!part)
        return NAN;
    k_bce<<<blocks, REDUCE_THREADS, 0, c->stream>>>(dz, part, z, y, count, scale);
    launched(c, "bce");
    return sum_to_host(c, part, blocks, "bce (the sum)");
}

__global__ void k_sumsq(double *part, const float *x, size_t count)
{
    double s = 0;
    GRID_STRIDE(i, count) s += (double)x[i] * x[i];
    s = block_sum(s);
    if (threadIdx.x == 0)
        part[blockIdx.x] = s;
}

extern "C" double clk_grad_sumsq(ClkCtx *c, const float *x, size_t n)
{
    if (!n)
        return 0.0;
    const unsigned blocks = reduce_grid(n);
    double *part = (double *)grow(c, &c->red, (REDUCE_BLOCKS + 1) * sizeof(double), "sumsq");
    if (!part)
        return NAN;
    k_sumsq<<<blocks, REDUCE_THREADS, 0, c->stream>>>(part, x, n);
    launched(c, "sumsq");
    return sum_to_host(c, part, blocks, "sumsq (the sum)");
}

/* ---- the optimizer ---- */

__global__ void k_scale(float *x, float s, size_t count)
{
    GRID_STRIDE(i, count) x[i] *= s;
}

extern "C" void clk_grad_scale(ClkCtx *c, float *x, float s, size_t n)
{
    if (!n)
        return;
    k_scale<<<grid_for(n, 256), 256, 0, c->stream>>>(x, s, n);
    launched(c, "scale");
}

/* cl_adamw_elements operation for operation: the _rn intrinsics are never fused into FMAs (nvcc
 * contracts a·b + c by default; the CPU build has no FMA), and division and sqrt are IEEE
 * (nvcc's default -prec-div/-prec-sqrt, no flush to zero), so each element gets the CPU's bits. */
__global__ void k_adamw(float *p, float *m, float *v, const float *g, size_t n, float decay,
                        float w1, float b2, float w2, float bc2_sqrt, float eps, float step_size,
                        float gscale)
{
    GRID_STRIDE(i, n)
    {
        const float gi = __fmul_rn(g[i], gscale);
        const float pi = __fmul_rn(p[i], decay);
        const float mi = __fadd_rn(m[i], __fmul_rn(w1, __fsub_rn(gi, m[i])));
        const float vi = __fadd_rn(__fmul_rn(v[i], b2), __fmul_rn(__fmul_rn(w2, gi), gi));
        const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps);
        p[i] = __fadd_rn(pi, __fdiv_rn(__fmul_rn(step_size, mi), denom));
        m[i] = mi;
        v[i] = vi;
    }
}

extern "C" void clk_grad_adamw(ClkCtx *c, float *p, float *m, float *v, const float *g, size_t n,
                               float decay, float w1, float b2, float w2, float bc2_sqrt, float eps,
                               float step_size, float gscale)
{
    if (!n)
        return;
    k_adamw<<<grid_for(n, 256), 256, 0, c->stream>>>(p, m, v, g, n, decay, w1, b2, w2, bc2_sqrt,
                                                     eps, step_size, gscale);
    launched(c, "adamw");
}
