/* elementwise.c - the 4-lane elementwise kernels and the choice between widths. */
#include "nn/elementwise.h"

#include <stdlib.h>

#include "cl-config.h"

#define CL_VL 4
#define EW(name) cl_ew4_##name
#include "nn/elementwise-decl.h"
#include "elementwise.inc"

static const ClElementwise v4 = {
    4,
    cl_ew4_gelu,
    cl_ew4_silu,
    cl_ew4_silu_mul,
    cl_ew4_gelu_grad_acc,
    cl_ew4_silu_mul_grad_acc,
    cl_ew4_exp_shift,
};

const ClElementwise *cl_elementwise_v4(void)
{
    return &v4;
}

#if CL_HAVE_EW16
#undef EW
#define EW(name) cl_ew16_##name
#include "nn/elementwise-decl.h"

static const ClElementwise v16 = {
    16,
    cl_ew16_gelu,
    cl_ew16_silu,
    cl_ew16_silu_mul,
    cl_ew16_gelu_grad_acc,
    cl_ew16_silu_mul_grad_acc,
    cl_ew16_exp_shift,
};
#endif

const ClElementwise *cl_elementwise_v16(void)
{
#if CL_HAVE_EW16
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return &v16;
#endif
    return NULL;
}

const ClElementwise *cl_elementwise(void)
{
    static gsize chosen;
    if (g_once_init_enter(&chosen)) {
        const char *force = g_getenv("CL_SIMD");
        const ClElementwise *e = force && atoi(force) == 4 ? NULL : cl_elementwise_v16();
        g_once_init_leave(&chosen, (gsize)(e ? e : &v4));
    }
    return (const ClElementwise *)chosen;
}
