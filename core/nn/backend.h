/* backend.h - compute backends as a table of operations; the CPU backend is the oracle. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _ClBackend ClBackend;

/* The CPU backend on `n_threads` threads (0 = all cores): its own pool runs every op, products
 * included (OpenBLAS sgemm/sgemv, single-threaded inside the pool's tasks, on column blocks of
 * the output or on attention heads), so no BLAS thread spins beside the pool's. */
ClBackend *cl_backend_cpu_new(int n_threads);
/* The CPU backend's thread pool (for work outside the op table, such as nn/quant.h's products);
 * NULL for any other backend. */
struct _ClThreadPool *cl_backend_cpu_pool(ClBackend *be);
/* The CPU backend's decode attention on AVX2 where the CPU has it (TRUE, the default) or the
 * portable loops only (FALSE, for tests: both give the same bits). Returns the previous setting. */
gboolean cl_backend_cpu_set_simd(gboolean use);
/* "auto" | "cpu" | "cuda": picks the device; "auto" falls back to the CPU with a one-line
 * notice in *notice (may be NULL). FALSE + error when "cuda" is asked for and absent. */
ClBackend *cl_backend_new(const char *device, char **notice, GError **error);
const char *cl_backend_name(const ClBackend *be);
void cl_backend_free(ClBackend *be);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClBackend, cl_backend_free)

#define CL_BACKEND_ERROR (cl_backend_error_quark())
GQuark cl_backend_error_quark(void);
typedef enum {
    CL_BACKEND_ERROR_UNKNOWN,   /* not "auto", "cpu" or "cuda" */
    CL_BACKEND_ERROR_NO_DEVICE, /* the device asked for is not there (or not built) */
    CL_BACKEND_ERROR_DEVICE,    /* an op failed on the device (a GPU fault, out of memory) */
} ClBackendError;

/* ---- the operations ------------------------------------------------------------------------
 *
 * Every tensor is row-major f32 in the backend's memory (host memory for the CPU backend).
 * `ld*` arguments are row strides in floats (>= the row length), so an op can read the q, k or
 * v columns of a fused [n, 3D] buffer in place. Sizes are ints (bounded by the config limits,
 * core/model/config.h); element counts of whole tensors are size_t. An op may run in place
 * (out == x) where its comment says so. A backend is used from one thread at a time. */
struct cl_backend_ops {
    /* Short name for people and logs: "cpu", "cuda". */
    const char *name;
    /* Releases the backend's private data (be->data); the ClBackend itself is freed by the
     * caller. */
    void (*destroy)(ClBackend *be);
    /* TRUE when the backend's memory is the host's (the CPU backend): callers may then read and
     * write its buffers directly and pass host arrays to every op. */
    gboolean host_memory;

    /* ---- memory. A backend buffer is what `alloc` returns (or a view into one); every op's
     * float pointers are backend buffers, except where an op says "host". */
    /* `bytes` of backend memory, 256-byte aligned, or NULL when there is not enough. */
    void *(*alloc)(ClBackend *be, size_t bytes);
    void (*release)(ClBackend *be, void *p);
    /* Host → backend, backend → host (returns when the bytes are on the host), backend →
     * backend (the ranges do not overlap). Ordered after every op issued before them. */
    void (*upload)(ClBackend *be, void *dst, const void *src, size_t bytes);
    void (*download)(ClBackend *be, void *dst, const void *src, size_t bytes);
    void (*copy)(ClBackend *be, void *dst, const void *src, size_t bytes);
    void (*zero)(ClBackend *be, void *dst, size_t bytes);
    /* Waits for every op issued so far; FALSE + error when one of them failed since the last
     * check (a GPU fault, an out-of-memory in a library call). The CPU backend never fails. */
    gboolean (*finish)(ClBackend *be, GError **error);

    /* out[m, n] = x[m, k] · w[n, k]^T + bias[n]   (a linear layer, PyTorch's [out, in] weight;
     * bias may be NULL). The bias is preloaded into out and the product added with beta = 1. */
    void (*linear)(ClBackend *be, float *out, const float *x, const float *w, const float *bias,
                   int m, int k, int n);
    /* c[m, n] = alpha · op(a) · op(b) + beta · c   (cblas_sgemm, row-major; op(a) is [m, k],
     * op(b) is [k, n]; trans_* transposes the stored matrix). */
    void (*gemm)(ClBackend *be, gboolean trans_a, gboolean trans_b, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                 float *c, int ldc);

    /* out[i, :] = (x[i, :] − mean) / sqrt(var + eps) · w + b, biased variance; in place ok. */
    void (*layernorm)(ClBackend *be, float *out, const float *x, const float *w, const float *b,
                      int m, int n, float eps);
    /* out[i, :] = x[i, :] / sqrt(mean(x[i, :]²) + eps) · w; in place ok. */
    void (*rmsnorm)(ClBackend *be, float *out, const float *x, const float *w, int m, int n,
                    float eps);
    /* x[i, j] = x[i, j] · (1 + scale[j]) + shift[j]   (adaLN modulation; exact when both are
     * zero). */
    void (*modulate)(ClBackend *be, float *x, const float *scale, const float *shift, int m, int n);
    /* out = GELU(x) = x/2 · (1 + erf(x/√2)), exact-erf semantics (|error| ≤ 2e-7·(1+|x|));
     * in place ok. */
    void (*gelu)(ClBackend *be, float *out, const float *x, size_t count);
    /* out = SiLU(x) = x / (1 + exp(−x)); in place ok. */
    void (*silu)(ClBackend *be, float *out, const float *x, size_t count);
    /* out = SiLU(gate) ⊙ up   (SwiGLU); out may alias gate or up. */
    void (*silu_mul)(ClBackend *be, float *out, const float *gate, const float *up, size_t count);
    /* out = a + b; out may alias a or b. */
    void (*add)(ClBackend *be, float *out, const float *a, const float *b, size_t count);
    /* x[i, j] += (1 + gate[j]) · a[i, j]; gate NULL: x += a (a residual connection). */
    void (*residual)(ClBackend *be, float *x, const float *a, const float *gate, int m, int n);
    /* out[i, j] = (accumulate ? out[i, j] : 0) + gate[j] · a[i, j]. */
    void (*scale_cols)(ClBackend *be, float *out, const float *a, const float *gate, int m, int n,
                       gboolean accumulate);
    /* Rotate-half RoPE in place on n_tok rows of `x` (stride ld), heads of `head_dim` at column
     * h·head_dim. Each head is cut into `n_sections` equal sections (1: decoder, 2: the
     * encoder's row/column halves); in section s of size q the pair is (s·q + i, s·q + i + q/2)
     * for i < q/2, rotated by the angle whose cos/sin are cos[t·head_dim/2 + s·q/2 + i]. */
    void (*rope)(ClBackend *be, float *x, const float *cos, const float *sin, int n_tok, int ld,
                 int n_head, int head_dim, int n_sections);
    /* Softmax of each of m rows of n (stride ld), in place. */
    void (*softmax)(ClBackend *be, float *x, int m, int n, int ld);
    /* Multi-head attention. For query head h (kv head g = h / (n_head / n_kv_head)):
     *   out[i, h·hd ..] = Σ_j p_ij v[j, g·hd ..],  p_i = softmax_j(q[i, h·hd ..] · k[j, g·hd ..]
     *   · scale) over the keys query i sees: every j < n_kv when causal < 0, j <= causal + i
     *   otherwise (the decoder: causal = the number of cached positions before these queries).
     * out_tail (may be NULL): the same sum restricted to j >= tail_start (self_ext's
     * predecessor share). `scratch` holds attention_scratch(be, n_q, n_kv, n_head) floats. */
    void (*attention)(ClBackend *be, float *out, float *out_tail, const float *q, const float *k,
                      const float *v, int n_q, int n_kv, int ldq, int ldk, int ldv, int ldo,
                      int n_head, int n_kv_head, int head_dim, float scale, int causal,
                      int tail_start, float *scratch);
    /* Floats of scratch `attention` needs on this backend for any n_q' <= n_q, n_kv' <= n_kv. */
    size_t (*attention_scratch)(ClBackend *be, int n_q, int n_kv, int n_head);
    /* out[i] = ‖a[i, :] − b[i, :]‖₂ (b NULL: ‖a[i, :]‖₂); a and b have stride ld; accumulated in
     * double. */
    void (*row_norms)(ClBackend *be, float *out, const float *a, const float *b, int m, int n,
                      int ld);
    /* out[i, :] = table[ids[i], :] for ids[i] >= 0; rows with ids[i] < 0 are left alone. The
     * caller has checked every id < the table's rows. */
    void (*embed)(ClBackend *be, float *out, const float *table, const gint32 *ids, int n, int dim);

    /* ---- layout ops of the encoder */
    /* pixels [C, S, S] → patches [G·G, C·P·P] (G = S / P), each patch flattened in (c, py, px)
     * order, patches in row-major grid order. */
    void (*im2col)(ClBackend *be, float *patches, const float *pixels, int channels, int size,
                   int patch);
    /* The 2×2 merger's gather: x is a grid×grid token grid of rows of d; out[(i·g/2 + j), :] =
     * [x(2i,2j), x(2i,2j+1), x(2i+1,2j), x(2i+1,2j+1)] (4d floats per row). */
    void (*merge2x2)(ClBackend *be, float *out, const float *x, int grid, int d);
    /* out[j] = mean_i x[i, j] over m rows of n, summed in double in row order. */
    void (*col_mean)(ClBackend *be, float *out, const float *x, int m, int n);
    /* x[i, j] −= mean_i x[i, j] (the means in double), in place. */
    void (*center_cols)(ClBackend *be, float *x, int m, int n);
    /* x[i] *= s[0] for i < count (s: one float in backend memory, a learned scalar gate). */
    void (*scale_by)(ClBackend *be, float *x, const float *s, size_t count);

    /* The training ops (below): NULL when the backend cannot train. */
    const struct cl_backend_train_ops *train;
};

/* ---- training ops ----------------------------------------------------------------------------
 *
 * The backward passes of the ops above, the losses and AdamW, so that a whole training step runs
 * in the backend's memory (core/train/trainmodel.h). Each has the semantics of its CPU function
 * in nn/grad.h or train/optim.h (named beside it), which the CPU backend calls: every gradient
 * output ACCUMULATES (+=) and a NULL one is skipped, unless a comment says SET. Pointers are
 * backend buffers except where a comment says host. A backend's results equal the CPU's within
 * float rounding (the products' and reductions' order may differ). */
struct cl_backend_train_ops {
    /* cl_grad_linear: y[m, n] = x[m, k] · w[n, k]^T + b: dx += dy·w, dw += dy^T·x, db += Σ dy. */
    void (*linear)(ClBackend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                   const float *w, int m, int k, int n);
    /* cl_grad_layernorm (mean and rstd recomputed from x). */
    void (*layernorm)(ClBackend *be, float *dx, float *dw, float *db, const float *dy,
                      const float *x, const float *w, int m, int n, float eps);
    /* cl_grad_rmsnorm. */
    void (*rmsnorm)(ClBackend *be, float *dx, float *dw, const float *dy, const float *x,
                    const float *w, int m, int n, float eps);
    /* cl_grad_modulate (x: the input before modulation). */
    void (*modulate)(ClBackend *be, float *dx, float *dscale, float *dshift, const float *dy,
                     const float *x, const float *scale, int m, int n);
    /* cl_grad_gelu, cl_grad_silu, cl_grad_silu_mul. */
    void (*gelu)(ClBackend *be, float *dx, const float *dy, const float *x, size_t count);
    void (*silu)(ClBackend *be, float *dx, const float *dy, const float *x, size_t count);
    void (*silu_mul)(ClBackend *be, float *dgate, float *dup, const float *dy, const float *gate,
                     const float *up, size_t count);
    /* cl_grad_residual (gate may be NULL), cl_grad_scale_cols. */
    void (*residual)(ClBackend *be, float *da, float *dgate, const float *dy, const float *a,
                     const float *gate, int m, int n);
    void (*scale_cols)(ClBackend *be, float *da, float *dgate, const float *dy, const float *a,
                       const float *gate, int m, int n);
    /* cl_grad_rope: in place on dx, the rotation by −angle. */
    void (*rope)(ClBackend *be, float *dx, const float *cos_t, const float *sin_t, int n_tok,
                 int ld, int n_head, int head_dim, int n_sections);
    /* cl_grad_softmax: y given, strides ld. */
    void (*softmax)(ClBackend *be, float *dx, const float *dy, const float *y, int m, int n,
                    int ld);
    /* cl_grad_attention: the probabilities recomputed (no tail). */
    void (*attention)(ClBackend *be, float *dq, float *dk, float *dv, const float *dout,
                      const float *q, const float *k, const float *v, int n_q, int n_kv, int ldq,
                      int ldk, int ldv, int ldo, int n_head, int n_kv_head, int head_dim,
                      float scale, int causal);
    /* cl_train_attention: the forward that keeps each head's probabilities, probs (n_head, n_q,
     * n_kv) (out SET), and cl_grad_attention_probs: the backward that reads them. */
    void (*attention_keep)(ClBackend *be, float *out, float *probs, const float *q, const float *k,
                           const float *v, int n_q, int n_kv, int ldq, int ldk, int ldv, int ldo,
                           int n_head, int n_kv_head, int head_dim, float scale, int causal);
    void (*attention_probs)(ClBackend *be, float *dq, float *dk, float *dv, const float *dout,
                            const float *q, const float *k, const float *v, const float *probs,
                            int n_q, int n_kv, int ldq, int ldk, int ldv, int ldo, int n_head,
                            int n_kv_head, int head_dim, float scale, int causal);
    /* cl_grad_row_norms (b NULL in the forward; out given). */
    void (*row_norms)(ClBackend *be, float *da, const float *dout, const float *a, const float *out,
                      int m, int n);
    /* cl_grad_embed: dtable[ids[i]] += dy[i] for ids[i] >= 0; ids host (n of them; repeats
     * add up). */
    void (*embed)(ClBackend *be, float *dtable, const float *dy, const gint32 *ids, int n, int dim);
    /* The backward of the ops table's merge2x2 (cl_grad_merger_unfold): dx += dcat put back. */
    void (*merge2x2)(ClBackend *be, float *dx, const float *dcat, int grid, int dim);

    /* cl_cross_entropy: returns (host) the mean −log p(target) over the supervised rows, in
     * double, and *n_supervised; dlogits (may be NULL) SET. targets and mask host (mask NULL:
     * every row). */
    double (*cross_entropy)(ClBackend *be, float *dlogits, const float *logits,
                            const gint32 *targets, const guint8 *mask, int n, int vocab,
                            float scale, int *n_supervised);
    /* Sigmoid binary cross-entropy of `count` logits z against targets y (0 or 1): returns
     * (host) Σ log(1 + e^z) − z·y, accumulated in double; dz (may be NULL) SET to
     * scale · (sigmoid(z) − y). */
    double (*bce)(ClBackend *be, float *dz, const float *z, const float *y, size_t count,
                  float scale);

    /* cl_grad_sumsq over x[0, n): returns (host) Σ x², accumulated in double. */
    double (*sumsq)(ClBackend *be, const float *x, size_t n);
    /* x *= s (s host). */
    void (*scale)(ClBackend *be, float *x, float s, size_t n);
    /* One AdamW update of n elements with the per-step scalars of cl_adamw_update_range (host
     * floats, computed there in double and rounded): per element, g = grad · gscale,
     *   p = p·decay;  m += w1·(g − m);  v = v·b2 + w2·g²;  p += step_size · m / (√v / bc2_sqrt +
     *   eps). */
    void (*adamw)(ClBackend *be, float *p, float *m, float *v, const float *g, size_t n,
                  float decay, float w1, float b2, float w2, float bc2_sqrt, float eps,
                  float step_size, float gscale);
};

struct _ClBackend {
    const struct cl_backend_ops *ops;
    void *data;     /* the backend's own state (CPU: thread pool, thread count) */
    int extra_refs; /* cl_backend_ref()s not yet matched by a cl_backend_free() */
    /* one cache slot a model layer may keep on the backend (the device copy of a model's
     * weights), freed with the backend */
    gpointer cache;
    GDestroyNotify cache_free;
};

/* Another reference: cl_backend_free() then only drops one (buffers that hold backend memory,
 * such as an encoder state or a KV cache, keep their backend alive this way). */
ClBackend *cl_backend_ref(ClBackend *be);

/* Host-readable view of n floats of backend memory: x itself for a host-memory backend, else a
 * downloaded copy in *tmp (g_free it). For taps and tests; not for hot paths. */
const float *cl_backend_host_view(ClBackend *be, const float *x, size_t n, float **tmp);
/* The CUDA backend on device `index` (cl_backend_new("cuda") takes device 0). NULL + error when
 * CUDA is not built in or the device cannot be used. $CHANGELENS_CUDA_MATH=tf32 lets cuBLAS
 * use TF32 tensor cores for the products, =bf16 BF16 tensor cores with f32 accumulation
 * (CUBLAS_COMPUTE_32F_FAST_16BF; the tensors stay f32 in memory), the training ops' products
 * included (default: exact f32). */
ClBackend *cl_backend_cuda_new(int index, GError **error);
/* The CUDA backend's device name; NULL for any other backend. */
const char *cl_backend_cuda_device_name(ClBackend *be);
/* Milliseconds `reps` products [m, k]·[n, k]^T take on the CUDA backend's stream (the bench's
 * peak); < 0 for another backend or on failure. */
double cl_backend_cuda_time_gemm(ClBackend *be, int m, int n, int k, int reps);
/* Milliseconds `reps` device-to-device copies of `bytes` take (2·bytes·reps moved); < 0 for
 * another backend or on failure. */
double cl_backend_cuda_time_copy(ClBackend *be, size_t bytes, int reps);
/* TRUE when the CUDA backend lets cuBLAS use TF32 ($CHANGELENS_CUDA_MATH=tf32); FALSE for bf16
 * and f32. */
gboolean cl_backend_cuda_tf32(ClBackend *be);
/* out (n × k f32, device memory) = n stored rows `src` (device memory) of ClQuantType `type`
 * (nn/quant.h: Q8_0, Q4_1, F16, BF16; k a multiple of 32) widened on the device, as
 * cl_dequantize_rows does on the host: queued on the backend's stream (cl_backend_finish for
 * errors). FALSE for a backend that is not CUDA or an unknown type. */
gboolean cl_backend_cuda_dequantize(ClBackend *be, int type, float *out, const void *src, int n,
                                    int k);

/* Threads the CPU backend uses for its own ops and for OpenBLAS. */
int cl_backend_cpu_threads(const ClBackend *be);

/* ---- host helpers (plain arrays in host memory; used by generation and the tests) ---------- */

/* dx[i] += dy[i] · GELU'(x[i]) = dy[i] · (Φ(x) + x·φ(x)), with the vectorised erf/exp of the
 * CPU backend's GELU (|error| of the factor <= 3e-7); on the calling thread (the trainer's
 * backward). */
void cl_gelu_grad_accumulate(float *dx, const float *dy, const float *x, size_t count);
/* y = silu(gate) · up: dgate[i] += dy · up · silu'(gate), dup[i] += dy · silu(gate) (either may
 * be NULL), with the backend's vectorised exp; on the calling thread. */
void cl_silu_mul_grad_accumulate(float *dgate, float *dup, const float *dy, const float *gate,
                                 const float *up, size_t count);

/* Softmax of m rows of n (stride ld) in place, with the vectorised exp; causal >= 0: row r sees
 * columns <= causal + row0 + r and the rest of its n become 0. On the calling thread. */
void cl_softmax_rows(float *x, int m, int n, int ld, int causal, int row0);

/* pixels [C, S, S] → patches [(S/P)², C·P·P], each flattened in (c, py, px) order (the CPU's
 * im2col). */
void cl_patch_unfold(float *patches, const float *pixels, int channels, int size, int patch);
/* x[i, j] −= mean_i x[i, j] over m rows of n, the means in double (the CPU's center_cols). */
void cl_center_columns(float *x, int m, int n);

/* Index of the largest value (the first one on ties; NaN never wins); -1 when n <= 0. */
int cl_argmax(const float *x, int n);
/* In place, numerically stable; accumulates in double. */
void cl_softmax(float *x, int n);
void cl_log_softmax(float *x, int n);
/* cos/sin tables for `rope`: 1-D positions pos0 .. pos0+n−1, angle pos·base^(−2i/head_dim)
 * (i < head_dim/2); tables are [n, head_dim/2]. Angles and their cos/sin are computed in
 * double, then rounded to float. */
void cl_rope_table_1d(float *cos_t, float *sin_t, int pos0, int n, int head_dim, double base);
/* 2-D for a grid×grid token grid in row-major order (token t = r·grid + c): the first half of
 * each head (q = head_dim/2 dims) rotates with r, the second with c, angle pos·base^(−2i/q)
 * (i < q/2); tables are [grid², head_dim/2]. */
void cl_rope_table_2d(float *cos_t, float *sin_t, int grid, int head_dim, double base);

G_END_DECLS
