/* backend.h - compute backends as a table of operations; the CPU backend is the oracle. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _ClBackend ClBackend;

/* The CPU backend: OpenBLAS sgemm for products, other ops on `n_threads` threads (0 = all
 * cores). */
ClBackend *cl_backend_cpu_new(int n_threads);
/* "auto" | "cpu" | "cuda": picks the device; "auto" falls back to the CPU with a one-line
 * notice in *notice (may be NULL). FALSE + error when "cuda" is asked for and absent. */
ClBackend *cl_backend_new(const char *device, char **notice, GError **error);
const char *cl_backend_name(const ClBackend *be);
void cl_backend_free(ClBackend *be);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClBackend, cl_backend_free)

G_END_DECLS
