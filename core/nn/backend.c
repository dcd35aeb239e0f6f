/* backend.c - choosing a backend ("auto", "cpu", "cuda") and the calls common to all of them. */
#include "nn/backend.h"

#include "cl-config.h"
#include "device.h"

G_DEFINE_QUARK(cl - backend - error - quark, cl_backend_error)

ClBackend *cl_backend_new(const char *device, char **notice, GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, NULL);
    if (notice)
        *notice = NULL;
    if (!device)
        device = "auto";
    if (g_strcmp0(device, "cpu") == 0)
        return cl_backend_cpu_new(0);
    if (g_strcmp0(device, "cuda") == 0 || g_strcmp0(device, "auto") == 0) {
        gboolean want_cuda = g_strcmp0(device, "cuda") == 0;
        g_autoptr(GError) cuda_error = NULL;
        ClBackend *be = cl_backend_cuda_new(0, &cuda_error);
        if (be)
            return be;
        if (want_cuda) {
            g_set_error(error, CL_BACKEND_ERROR, CL_BACKEND_ERROR_NO_DEVICE,
                        "Cannot use the GPU: %s", cuda_error->message);
            return NULL;
        }
        if (notice)
            *notice = g_strdup_printf("%s: running on the CPU", cuda_error->message);
        return cl_backend_cpu_new(0);
    }
    g_set_error(error, CL_BACKEND_ERROR, CL_BACKEND_ERROR_UNKNOWN,
                "Unknown device “%s” (expected auto, cpu or cuda)", device);
    return NULL;
}

const char *cl_backend_name(const ClBackend *be)
{
    g_return_val_if_fail(be != NULL, NULL);
    return be->ops->name;
}

ClBackend *cl_backend_ref(ClBackend *be)
{
    g_return_val_if_fail(be != NULL, NULL);
    g_atomic_int_inc(&be->extra_refs);
    return be;
}

void cl_backend_free(ClBackend *be)
{
    if (!be)
        return;
    /* extra_refs counts the references beyond the first */
    int old = g_atomic_int_get(&be->extra_refs);
    while (old > 0) {
        if (g_atomic_int_compare_and_exchange(&be->extra_refs, old, old - 1))
            return;
        old = g_atomic_int_get(&be->extra_refs);
    }
    if (be->cache && be->cache_free)
        be->cache_free(be->cache);
    if (be->ops->destroy)
        be->ops->destroy(be);
    g_free(be);
}

const float *cl_backend_host_view(ClBackend *be, const float *x, size_t n, float **tmp)
{
    *tmp = NULL;
    if (be->ops->host_memory || !x)
        return x;
    *tmp = g_new(float, MAX(n, 1));
    be->ops->download(be, *tmp, x, n * sizeof(float));
    return *tmp;
}

#if !CL_HAVE_CUDA
ClBackend *cl_backend_cuda_new(int index, GError **error)
{
    (void)index;
    g_set_error(error, CL_BACKEND_ERROR, CL_BACKEND_ERROR_NO_DEVICE,
                "CUDA is not built in (nvcc was not found at configure time)");
    return NULL;
}

const char *cl_backend_cuda_device_name(ClBackend *be)
{
    (void)be;
    return NULL;
}

double cl_backend_cuda_time_gemm(ClBackend *be, int m, int n, int k, int reps)
{
    (void)be, (void)m, (void)n, (void)k, (void)reps;
    return -1;
}

double cl_backend_cuda_time_copy(ClBackend *be, size_t bytes, int reps)
{
    (void)be, (void)bytes, (void)reps;
    return -1;
}

gboolean cl_backend_cuda_tf32(ClBackend *be)
{
    (void)be;
    return FALSE;
}

gboolean cl_backend_cuda_dequantize(ClBackend *be, int type, float *out, const void *src, int n,
                                    int k)
{
    (void)be, (void)type, (void)out, (void)src, (void)n, (void)k;
    return FALSE;
}
#endif
