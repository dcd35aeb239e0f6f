/* backend-check-private.h - what backend-check.c (the walled backend, the model checks) and
 * backend-ops.c (the op table) share. */
#pragma once

#include <glib.h>

#include "backend-check.h"

typedef struct {
    ClBackend *dev;
    ClTolerances tol;
    gboolean exact_decodes;
} Ctx;

extern ClBackend *cl_check_cpu_be; /* the oracle */

/* Asserts dev ≈ cpu under tol; reports the worst element and the normalised error. */
void cl_check_close(const char *what, const float *dev, const float *cpu, size_t n,
                    const ClTol *tol);
/* host data on the device (a new buffer), and back (g_free) */
float *cl_check_up(ClBackend *dev, const float *h, size_t n);
float *cl_check_down(ClBackend *dev, const float *d, size_t n);
float *cl_check_rnd(GRand *r, size_t n, double lo, double hi);
void cl_check_finish(ClBackend *dev);

/* One GLib test per entry of the op table (backend-ops.c) under prefix "/ops/NAME/PARAMS", per
 * entry of its training-op table under "/ops/train/NAME/PARAMS", and "/ops/coverage". */
void cl_check_add_op_tests(const char *prefix, const Ctx *c);
