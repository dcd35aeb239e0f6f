/* blas.h - which OpenBLAS kernels run our products, and the re-choice on CPUs the library does
 * not know (blas.c). The choice itself happens before main; these only report it. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The kernel set OpenBLAS runs ("SkylakeX", "Haswell", "Zen", ...); static string. */
const char *cl_blas_kernels(void);
/* TRUE when ChangeLens replaced the library's fallback choice (Prescott) at start-up. */
gboolean cl_blas_kernels_rechosen(void);
/* FALSE when the CPU has AVX2 or AVX-512 but the SSE3 fallback kernels run anyway (and the user
 * did not ask for them through OPENBLAS_CORETYPE). */
gboolean cl_blas_kernels_fit_cpu(void);

G_END_DECLS
