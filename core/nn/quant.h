/* quant.h - weight matrices kept as they are stored (GGUF's Q8_0 and Q4_1 blocks of 32, and F16 /
 * BF16 values): matrix-vector products for decoding (on quantized activations for the blocks,
 * f32 ones for the halves; AVX2 where the CPU has it, a scalar reference otherwise), and matrix
 * products for prefill on f32 tiles. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "nn/threadpool.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CL_QUANT_Q8_0, /* f16 d, 32 × int8 q: x = d·q (34 bytes) */
    CL_QUANT_Q4_1, /* f16 d, f16 m, 16 bytes of nibbles (element j low, j + 16 high): x = d·q + m */
    CL_QUANT_F16,  /* one IEEE binary16 per value (64 bytes a "block" of 32) */
    CL_QUANT_BF16, /* one bfloat16 per value (64 bytes a "block" of 32) */
    CL_QUANT_N_TYPES
} ClQuantType;
/* Q8_0 and Q4_1: the 8-bit / 4-bit block formats (the rest are halves, exact f32 activations) */
#define CL_QUANT_IS_BLOCK(t) ((t) == CL_QUANT_Q8_0 || (t) == CL_QUANT_Q4_1)

#define CL_QUANT_BLOCK 32
/* bytes of a block of 32 values (kernels/quant-layout.h must agree: cuda.c checks) */
#define CL_QUANT_Q8_0_BYTES 34
#define CL_QUANT_Q4_1_BYTES 20
#define CL_QUANT_HALF_BYTES (2 * CL_QUANT_BLOCK)

const char *cl_quant_type_name(ClQuantType t); /* "Q8_0", "Q4_1", "F16", "BF16" */
/* Bytes of a row of k values (k a multiple of CL_QUANT_BLOCK). */
size_t cl_quant_row_bytes(ClQuantType t, int k);

/* Quantizes n rows of k values (k a multiple of 32) as llama.cpp's reference quantizers do (F16,
 * BF16: rounded to nearest even). */
void cl_quantize_rows(ClQuantType t, const float *x, void *out, int n, int k);
/* Dequantizes n rows of k values. */
void cl_dequantize_rows(ClQuantType t, const void *q, float *out, int n, int k);

/* Four rows interleaved ("x4"), the layout the decode step's kernels read fastest: m rows of
 * Q8_0 or Q4_1 as m/4 quads of 4·row_bytes bytes each, then the last m % 4 rows as they are — the
 * same bytes rearranged. A quad holds its four rows' quants block by block (Q8_0: 4 × 32 bytes a
 * block, Q4_1: 4 × 16 bytes of nibbles), then their scales block by block (Q8_0: 4 f16 d; Q4_1:
 * 4 × the f16 d, m pair): four rows' values of a block load together, scales convert four at a
 * time, and no load straddles a block's scale. */
void cl_quant_pack4(ClQuantType t, const void *rows, void *x4, int m, int k);
void cl_quant_unpack4(ClQuantType t, const void *x4, void *rows, int m, int k);

/* Kernels: CL_QUANT_KERNELS_AUTO picks AVX2 when the CPU has AVX2, FMA and F16C, else the scalar
 * reference (CL_QUANT_KERNELS_SCALAR, also what tests compare against). Returns the level in
 * use ("avx2" or "scalar"). */
typedef enum { CL_QUANT_KERNELS_AUTO, CL_QUANT_KERNELS_SCALAR } ClQuantKernels;
const char *cl_quant_set_kernels(ClQuantKernels k);
const char *cl_quant_kernels(void);

/* y[i] = W[i,:]·x for the m rows of W (m × k, type t): for Q8_0 / Q4_1, x is quantized to 8 bits
 * per block first (Q8_0 against Q8_0 weights, Q8_1 — with the block's sum — against Q4_1), as
 * llama.cpp does, so the dot products run on integers; F16 / BF16 rows are widened to f32 and
 * multiplied with x as it is. Rows are split over `pool` (NULL: this thread). */
void cl_quant_matvec(ClThreadPool *pool, ClQuantType t, const void *W, int m, int k, const float *x,
                     float *y);
/* One matrix of several multiplied by the same x (q, k and v; gate and up). */
typedef struct {
    ClQuantType type;
    const void *W;
    int m;
    float *y;
    int x4; /* W is in the x4 layout (only the last matrix of a job may have m % 4 != 0) */
} ClQuantMatvec;
#define CL_QUANT_MAX_MULTI 4
/* cl_quant_matvec for n (1..CL_QUANT_MAX_MULTI) matrices of k columns over the same x: x is
 * quantized once and every matrix's rows are shared out in one job of the pool. */
void cl_quant_matvec_multi(ClThreadPool *pool, const ClQuantMatvec *mats, int n, int k,
                           const float *x);
/* Y (n × m) = X (n × k) · W^T for prefill: W (x4: in the x4 layout) is dequantized tile by tile
 * into f32 and each tile multiplied with sgemm, spread over `pool`. */
void cl_quant_matmul(ClThreadPool *pool, ClQuantType t, int x4, const void *W, int m, int k,
                     const float *X, int n, float *Y);

#ifdef __cplusplus
}
#endif
