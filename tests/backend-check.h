/* backend-check.h - checks a device backend against the CPU backend, op by op and on the whole
 * model (encoder, decoder, greedy and beam generation). Shared by test-devicepath (a "device"
 * backend whose memory the host may not touch, run everywhere) and test-cuda (the GPU). */
#pragma once

#include "nn/backend.h"

/* How close a device's result must be to the CPU's: each element within atol + rtol·|cpu|, and
 * the normalised squared error Σ(dev − cpu)² / Σ cpu² at most nmse. */
typedef struct {
    double rtol, atol, nmse;
} ClTol;

typedef struct {
    ClTol elementwise; /* one rounding of a function (exp, erf) per element */
    ClTol reduction;   /* sums over a row in another order (norms, softmax, attention) */
    ClTol product;     /* matrix products (cuBLAS f32 or TF32 against OpenBLAS) */
    ClTol model;       /* whole-model outputs: every op's error carried through the layers */
} ClTolerances;

/* The CPU backend behind a wall: every buffer it allocates has its address tagged so that a
 * host read or write of it faults (the pointers are not canonical), and each op untags its
 * arguments before the CPU op runs. Results are the CPU's bit for bit, so the engine's device
 * code paths (uploads, downloads, device-side copies, the weights' device copy) are checked on
 * any machine. */
ClBackend *cl_test_walled_backend_new(void);

/* Registers the op checks and the model checks as GLib tests under `prefix` ("/cuda/f32"),
 * run against `dev` with `tol`. `exact_decodes`: greedy and beam outputs must equal the CPU's
 * token for token. */
void cl_test_add_backend_checks(const char *prefix, ClBackend *dev, const ClTolerances *tol,
                                gboolean exact_decodes);
