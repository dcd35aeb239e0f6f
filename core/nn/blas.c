/* blas.c - OpenBLAS's kernel choice on CPUs newer than the library it was built with.
 *
 * Debian 12's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its kernels from a table of CPU models; a
 * model it does not know (Intel's Sapphire and Emerald Rapids, for example) falls back to the
 * "Prescott" kernels: SSE3 only. Measured on a 2-core Xeon of family 6 model 207 (AVX-512):
 * the shipping model's training step took 2049 ms with them and 598 ms with the SkylakeX ones
 * the same library carries (`bench --train`, batch 8). So when the library settled on Prescott
 * but the CPU has AVX2 or AVX-512, the kernels are re-chosen, by the library's own
 * OPENBLAS_CORETYPE mechanism, before the first product. A user's own OPENBLAS_CORETYPE is
 * never overridden. */
#include "nn/blas.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <cblas.h>

static gboolean rechosen; /* TRUE: ChangeLens replaced the library's fallback kernels */

/* The best kernels of the 0.3.x tables that this CPU can run, or NULL. */
static const char *best_core(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512cd"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
#endif
    return NULL;
}

/* Runs once, before main (single-threaded, after OpenBLAS's own initialiser: the executable's
 * constructors run after its libraries'), so no product has run with the fallback kernels and
 * setenv races with no other thread. */
__attribute__((constructor)) static void blas_choose(void)
{
    if (getenv("OPENBLAS_CORETYPE"))
        return;
    const char *now = openblas_get_corename();
    const char *best = best_core();
    if (!now || !best || g_ascii_strcasecmp(now, "Prescott") != 0)
        return;
    /* DYNAMIC_ARCH builds export these two; a build without them keeps its kernels */
    void (*quit)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit");
    void (*init)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init");
    if (!quit || !init)
        return;
    setenv("OPENBLAS_CORETYPE", best, 0);
    quit();
    init(); /* reads OPENBLAS_CORETYPE, sets the kernel table and its blocking sizes */
    unsetenv("OPENBLAS_CORETYPE"); /* child processes (the PyTorch peer) choose for themselves */
    const char *after = openblas_get_corename();
    if (after && g_ascii_strcasecmp(after, "Prescott") != 0)
        rechosen = TRUE;
}

const char *cl_blas_kernels(void)
{
    const char *name = openblas_get_corename();
    return name ? name : "unknown";
}

gboolean cl_blas_kernels_rechosen(void)
{
    return rechosen;
}

gboolean cl_blas_kernels_fit_cpu(void)
{
    const char *best = best_core();
    return !best || g_ascii_strcasecmp(cl_blas_kernels(), "Prescott") != 0 ||
           getenv("OPENBLAS_CORETYPE") != NULL;
}
