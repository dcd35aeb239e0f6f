/* simd.h - the CPU backend's vector types and fast math (exp, erf, GELU, SiLU), lane by lane.
 * Included by cpu.c (4 lanes) and by the elementwise kernels (elementwise.inc) at 4 and 16
 * lanes; define CL_VL before including. Everything is static inline: each includer gets its
 * own copy at its own width. */
#pragma once

#include <glib.h>
#include <string.h>

/* ---- SIMD ----------------------------------------------------------------------------------
 * GCC/Clang vector extensions of CL_VL floats: 4, the width every x86-64 and arm64 machine has,
 * or 16 (AVX-512, elementwise-v16.c). GCC's -O2 vectoriser only takes loops it can cover
 * entirely and no selects, so the hot loops are written with these types directly. Tails go
 * through a zero-padded vector, so every element of a tensor is computed by the same
 * instructions. Every function here is lane by lane (no reduction across lanes) and uses only
 * correctly rounded operations in a fixed order, without FMA contraction (ISO C mode): an
 * element's result is the same bits at either width. */
#ifndef CL_VL
#define CL_VL 4
#endif
#if CL_VL == 16
typedef float vf __attribute__((vector_size(64)));
typedef gint32 vi __attribute__((vector_size(64)));
#define V(c)                                                                                       \
    ((vf){ (c), (c), (c), (c), (c), (c), (c), (c), (c), (c), (c), (c), (c), (c), (c), (c) })
#elif CL_VL == 4
typedef float vf __attribute__((vector_size(16)));
typedef gint32 vi __attribute__((vector_size(16)));
#define V(c) ((vf){ (c), (c), (c), (c) })
#else
#error "CL_VL is 4 or 16"
#endif
#define VL CL_VL

/* every lane of a comparison's mask set */
static inline gboolean vall(vi m)
{
    gint32 a = -1;
    for (int j = 0; j < VL; j++)
        a &= m[j];
    return a != 0;
}

static inline vf vload(const float *p)
{
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void vstore(float *p, vf v)
{
    memcpy(p, &v, sizeof v);
}

/* the first n (< VL) floats, the rest zero */
static inline vf vload_n(const float *p, int n)
{
    float t[VL] = { 0 };
    memcpy(t, p, (size_t)n * sizeof(float));
    return vload(t);
}

static inline void vstore_n(float *p, vf v, int n)
{
    float t[VL];
    vstore(t, v);
    memcpy(p, t, (size_t)n * sizeof(float));
}

/* m ? a : b, lane by lane (m from a comparison: all ones or zero) */
static inline vf vsel(vi m, vf a, vf b)
{
    return (vf)((m & (vi)a) | (~m & (vi)b));
}

/* ---- fast math ------------------------------------------------------------------------------
 * Coefficients are Chebyshev interpolants fitted for this file (near-minimax), evaluated by
 * Horner in float without FMA contraction (ISO C mode), so every build gives the same bits. */

/* exp(x) with relative error <= 9e-8 for x in [-87.3, 88.3]; 0 below, clamped above.
 * x = n·ln2 + r, |r| <= ln2/2, exp(r) = 1 + r + r²·p(r), times 2^n built from the bits. */
static inline vf vexp(vf x)
{
    vf xc = vsel(x > V(88.3f), V(88.3f), x);
    xc = vsel(xc < V(-87.3f), V(-87.3f), xc);
    vf t = xc * V(1.44269504088896341f);
    vf nf = (t + V(12582912.0f)) - V(12582912.0f); /* round to nearest: the 1.5·2^23 trick */
    vf r = xc - nf * V(0.693145751953125f);        /* ln2 split hi/lo: nf·hi is exact */
    r = r - nf * V(1.428606765330187045e-06f);
    vf p = V(1.392618181e-03f);
    p = p * r + V(8.363177630e-03f);
    p = p * r + V(4.166655463e-02f);
    p = p * r + V(1.666657700e-01f);
    p = p * r + V(5.000000000e-01f);
    p = p * (r * r) + r + V(1.0f);
    vi n = __builtin_convertvector(nf, vi);
    vf y = p * (vf)((n + 127) << 23);
    return vsel(x < V(-87.3f), V(0.0f), y);
}

/* erf(z) for |z| < 1.25 as z·A(u), u = 1.28·z² − 1 (|error| <= 1.1e-7). */
static inline vf verf_small(vf z)
{
    vf u = V(1.28f) * (z * z) - V(1.0f);
    vf p = V(-1.352995692e-06f);
    p = p * u + V(1.421704087e-05f);
    p = p * u + V(-1.291520475e-04f);
    p = p * u + V(1.034352678e-03f);
    p = p * u + V(-7.047490190e-03f);
    p = p * u + V(3.998836368e-02f);
    p = p * u + V(-1.878515369e-01f);
    p = p * u + V(8.923127005e-01f);
    return z * p;
}

/* erfc(t) for t in [1.25, 4] as exp(−t²)·R(u), u = (2t − 5.25)/2.75, R ≈ erfc(t)·exp(t²)
 * (|error| <= 3.2e-8). The exp and the polynomial are independent chains, which halves the
 * latency of a Horner form over log erfc. t is clamped to [1.25, 4]: erfc(4) = 1.5e-8 is below
 * float's resolution of erf near 1. */
static inline vf verfc_large(vf t)
{
    t = vsel(t > V(4.0f), V(4.0f), t);
    t = vsel(t < V(1.25f), V(1.25f), t);
    vf e = vexp(-(t * t));
    vf u = (V(2.0f) * t - V(5.25f)) * V(1.0f / 2.75f);
    vf p = V(-7.275345704e-05f);
    p = p * u + V(2.084283930e-04f);
    p = p * u + V(-4.010921652e-04f);
    p = p * u + V(1.068618976e-03f);
    p = p * u + V(-2.921010118e-03f);
    p = p * u + V(7.361911584e-03f);
    p = p * u + V(-1.787126903e-02f);
    p = p * u + V(4.188457068e-02f);
    p = p * u + V(-9.414558657e-02f);
    p = p * u + V(2.018876030e-01f);
    return e * p;
}

/* GELU(x) = x/2 · (1 + erf(x/√2)). For |z| >= 1.25 the tail erfc is used directly, which keeps
 * the relative accuracy on the negative side where 1 + erf(z) cancels. Both branches are
 * computed and one selected. */
static inline vf vgelu(vf x)
{
    vf z = x * V(0.707106781186547524f);
    vf t = vsel(z < V(0.0f), -z, z);
    vf half_x = V(0.5f) * x;
    vf small = half_x * (V(1.0f) + verf_small(z));
    vf c = verfc_large(t);
    vf large = vsel(z > V(0.0f), x - half_x * c, half_x * c);
    return vsel(t < V(1.25f), small, large);
}

/* The same values as vgelu; when every lane is in the polynomial range (most activations) the
 * tail branch, three quarters of the work, is skipped. */
static inline vf vgelu_fast(vf x)
{
    vf z = x * V(0.707106781186547524f);
    vi in = (z < V(1.25f)) & (z > V(-1.25f));
    if (vall(in))
        return V(0.5f) * x * (V(1.0f) + verf_small(z));
    return vgelu(x);
}

/* GELU'(x) = Φ(x) + x·φ(x), Φ from the same erf/erfc branches as vgelu; the erfc branch only
 * when a lane needs it. */
static inline vf vgelu_grad(vf x)
{
    vf z = x * V(0.707106781186547524f);
    vf phi = vexp(V(-0.5f) * (x * x)) * V(0.398942280401432678f);
    vi in = (z < V(1.25f)) & (z > V(-1.25f));
    vf cdf = V(0.5f) * (V(1.0f) + verf_small(z));
    if (!vall(in)) {
        vf t = vsel(z < V(0.0f), -z, z);
        vf c = V(0.5f) * verfc_large(t);
        cdf = vsel(in, cdf, vsel(z > V(0.0f), V(1.0f) - c, c));
    }
    return cdf + x * phi;
}

static inline vf vsilu(vf x)
{
    return x / (V(1.0f) + vexp(-x));
}

static inline __attribute__((always_inline)) void silu_mul_grad_lanes(float *dgate, float *dup,
                                                                      const float *dy,
                                                                      const float *gate,
                                                                      const float *up, int k)
{
    const gboolean full = k == VL;
    vf g = full ? vload(gate) : vload_n(gate, k), d = full ? vload(dy) : vload_n(dy, k);
    vf sg = V(1.0f) / (V(1.0f) + vexp(-g));
    if (dgate) {
        vf u = full ? vload(up) : vload_n(up, k);
        vf v = (full ? vload(dgate) : vload_n(dgate, k)) +
               d * u * (sg * (V(1.0f) + g * (V(1.0f) - sg)));
        full ? vstore(dgate, v) : vstore_n(dgate, v, k);
    }
    if (dup) {
        vf v = (full ? vload(dup) : vload_n(dup, k)) + d * (g * sg);
        full ? vstore(dup, v) : vstore_n(dup, v, k);
    }
}
