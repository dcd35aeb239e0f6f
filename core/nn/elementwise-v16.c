/* elementwise-v16.c - the elementwise kernels at 16 lanes, compiled with -mavx512f (meson) and
 * only called where the CPU has AVX-512 (elementwise.c). */
#include <glib.h>

#define CL_VL 16
#define EW(name) cl_ew16_##name
#include "nn/elementwise-decl.h"
#include "elementwise.inc"
