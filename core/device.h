/* device.h - which compute devices this build and this machine offer. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

gboolean cl_device_cuda_built(void);
/* Number of CUDA devices at run time (0 without a build with CUDA, a driver or a GPU). */
int cl_device_cuda_count(void);
/* One line for people: "CUDA: NVIDIA H100 (1 device)" or "CUDA: no device found, using the CPU".
 * Caller frees. */
char *cl_device_describe(void);

G_END_DECLS
