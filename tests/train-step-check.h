/* train-step-check.h - a whole training step on a device backend against the CPU trainer's
 * arithmetic: two samples' forward and backward (every SVE variant, the change head and marker,
 * the object head, the auxiliary heads), the gradients' mean, the clipped AdamW update, twice,
 * through train/devicestep.h; shared by test-devicepath (the walled CPU: equal bit for bit)
 * and test-cuda (the GPU: within `atol` per parameter). */
#pragma once

#include "nn/backend.h"

/* Registers `prefix`/train-step/VARIANT (and …/no-stop-grad) against `dev`, and
 * `prefix`/train-step/trainer: the trainer's run with its steps on dev against the CPU's, and
 * its checkpoints resumed on the other. atol bounds each parameter's, moment's and head's
 * difference from the CPU's after the two steps (0: exact; the trainer's 10 × atol); the global
 * norms must agree within rtol. */
void cl_test_add_train_step_checks(const char *prefix, ClBackend *dev, double atol, double rtol);
