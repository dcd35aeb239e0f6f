/* device.cu - CUDA device discovery: the run-time check that picks GPU or CPU. */
#include "device.h"

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <string.h>

extern "C" int cl_cuda_device_count(char *name, int name_len)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no driver" error */
        return 0;
    }
    if (n > 0 && name && name_len > 0) {
        cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
            strncpy(name, prop.name, (size_t)name_len - 1);
            name[name_len - 1] = '\0';
        } else {
            name[0] = '\0';
        }
    }
    return n;
}
