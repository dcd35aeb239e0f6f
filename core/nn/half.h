/* half.h - f16 (IEEE binary16) and bf16 <-> f32 conversion: round to nearest even, NaN/Inf kept. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* f32 -> f16: round to nearest even; overflow gives +-Inf, NaN stays a (quiet) NaN with the top
 * payload bits kept, values below half the smallest subnormal give +-0. */
uint16_t cl_f32_to_f16(float f);
/* exact (every f16 is an f32) */
float cl_f16_to_f32(uint16_t h);
/* f32 -> bf16: round to nearest even on the upper 16 bits; NaN stays a (quiet) NaN. */
uint16_t cl_f32_to_bf16(float f);
/* exact */
float cl_bf16_to_f32(uint16_t h);

/* Array versions; dst and src must not overlap. */
void cl_f32_to_f16_array(uint16_t *dst, const float *src, size_t n);
void cl_f16_to_f32_array(float *dst, const uint16_t *src, size_t n);
void cl_f32_to_bf16_array(uint16_t *dst, const float *src, size_t n);
void cl_bf16_to_f32_array(float *dst, const uint16_t *src, size_t n);

#ifdef __cplusplus
}
#endif
