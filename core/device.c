/* device.c - run-time device discovery: the GPU when CUDA finds one, else the CPU. */
#include "device.h"

#include "cl-config.h"
#if CL_HAVE_CUDA
#include "device.h"
int cl_cuda_device_count(char *name, int name_len);
#endif

gboolean cl_device_cuda_built(void)
{
    return CL_HAVE_CUDA;
}

int cl_device_cuda_count(void)
{
#if CL_HAVE_CUDA
    return cl_cuda_device_count(NULL, 0);
#else
    return 0;
#endif
}

char *cl_device_describe(void)
{
#if CL_HAVE_CUDA
    char name[256] = "";
    int n = cl_cuda_device_count(name, sizeof name);
    if (n > 0)
        return g_strdup_printf("CUDA: %s (%d device%s)", name, n, n == 1 ? "" : "s");
    return g_strdup("CUDA: built in, but no device found; using the CPU");
#else
    return g_strdup("CUDA: not built (nvcc was not found at configure time); using the CPU");
#endif
}
