/* quant-layout.h - the stored weight formats the CUDA dequantization kernels read: the same
 * bytes as core/nn/quant.h's (cuda.c checks each constant against quant.h's at compile time). */
#pragma once

#define CLK_QUANT_BLOCK 32      /* values a block */
#define CLK_Q8_0_BYTES 34       /* f16 d, 32 × int8: x = d·q */
#define CLK_Q4_1_BYTES 20       /* f16 d, f16 m, 16 bytes of nibbles (j low, j + 16 high) */
#define CLK_HALF_BLOCK_BYTES 64 /* F16 / BF16: 32 halves */

/* Types, numbered as ClQuantType (nn/quant.h) */
enum { CLK_Q8_0 = 0, CLK_Q4_1 = 1, CLK_F16 = 2, CLK_BF16 = 3 };
