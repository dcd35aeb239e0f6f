/* device.h - CUDA device discovery; no GLib here. Built only when nvcc is found. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices (0 when the driver or a device is missing), never fails.
 * name (may be NULL) receives device 0's name when the count is > 0. */
int cl_cuda_device_count(char *name, int name_len);

#ifdef __cplusplus
}
#endif
