/* half.c - f16 and bf16 <-> f32 conversion (round to nearest even), used by the model files. */
#include "nn/half.h"

#include <string.h>

static inline uint32_t f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static inline float bits_f32(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* Rounds m >> shift to nearest even (shift in [1, 31]). */
static inline uint32_t shift_rne(uint32_t m, unsigned shift)
{
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1)))
        r++;
    return r;
}

uint16_t cl_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffff;
    int e = (int)(ax >> 23); /* biased f32 exponent */
    uint32_t m = ax & 0x7fffff;
    if (e == 255) {
        if (m == 0)
            return sign | 0x7c00;
        return sign | 0x7e00 | (uint16_t)(m >> 13); /* quiet NaN, top payload bits */
    }
    int he = e - 127 + 15;
    if (he >= 31)
        return sign | 0x7c00;
    if (he >= 1) {
        /* normal: a mantissa carry moves into the exponent, 0x7bff + 1 becomes Inf */
        uint32_t r = ((uint32_t)he << 10) | (m >> 13);
        uint32_t rem = m & 0x1fff;
        if (rem > 0x1000 || (rem == 0x1000 && (r & 1)))
            r++;
        return sign | (uint16_t)r;
    }
    /* subnormal f16 (or zero): value = M * 2^(e-150), result = M * 2^(e-126) units of 2^-24 */
    if (e == 0)
        return sign; /* f32 subnormals are far below 2^-25 */
    unsigned shift = (unsigned)(126 - e);
    if (shift > 24)
        return sign; /* below half the smallest f16 subnormal (M < 2^24 <= halfway) */
    return sign | (uint16_t)shift_rne(m | 0x800000, shift);
}

float cl_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t e = (h >> 10) & 0x1f;
    uint32_t m = h & 0x3ff;
    if (e == 31)
        return bits_f32(sign | 0x7f800000 | (m << 13));
    if (e == 0) {
        if (m == 0)
            return bits_f32(sign);
        /* subnormal: normalise */
        e = 127 - 15 + 1;
        while (!(m & 0x400)) {
            m <<= 1;
            e--;
        }
        m &= 0x3ff;
        return bits_f32(sign | (e << 23) | (m << 13));
    }
    return bits_f32(sign | ((e - 15 + 127) << 23) | (m << 13));
}

uint16_t cl_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40); /* quiet NaN: never rounds into Inf */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

float cl_bf16_to_f32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

void cl_f32_to_f16_array(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = cl_f32_to_f16(src[i]);
}

void cl_f16_to_f32_array(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = cl_f16_to_f32(src[i]);
}

void cl_f32_to_bf16_array(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = cl_f32_to_bf16(src[i]);
}

void cl_bf16_to_f32_array(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = cl_bf16_to_f32(src[i]);
}
