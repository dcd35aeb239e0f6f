/* elementwise.h - the CPU backend's elementwise kernels (GELU, SiLU, their gradients, the
 * softmax's exponentials) at the widest vector width the machine runs: 16 lanes where the CPU
 * has AVX-512 (and the build could compile them), else 4. Both widths give the same bits for
 * every element (simd.h), so a result never depends on the machine; CL_SIMD=4 in the
 * environment forces the 4-lane kernels. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
    int lanes;
    /* out[i] = GELU(a[i]) (exact erf), SiLU(a[i]), SiLU(a[i])·b[i]; b unused by the first two */
    void (*gelu)(float *out, const float *a, const float *b, size_t n);
    void (*silu)(float *out, const float *a, const float *b, size_t n);
    void (*silu_mul)(float *out, const float *a, const float *b, size_t n);
    /* dx += dy · GELU'(x) */
    void (*gelu_grad_acc)(float *dx, const float *dy, const float *x, size_t n);
    /* y = SiLU(gate) ⊙ up: dgate += …, dup += … (either may be NULL) */
    void (*silu_mul_grad_acc)(float *dgate, float *dup, const float *dy, const float *gate,
                              const float *up, size_t n);
    /* x[i] = exp(x[i] − m) */
    void (*exp_shift)(float *x, size_t n, float m);
} ClElementwise;

/* The kernels this process uses (chosen once). */
const ClElementwise *cl_elementwise(void);
/* The 4-lane kernels; the 16-lane ones, or NULL where this build or CPU has none (tests). */
const ClElementwise *cl_elementwise_v4(void);
const ClElementwise *cl_elementwise_v16(void);

G_END_DECLS
