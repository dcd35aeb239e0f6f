/* backend.c - choosing a backend ("auto", "cpu", "cuda") and the calls common to all of them. */
#include "backend.h"

#include "device.h"

G_DEFINE_QUARK(cl-backend-error-quark, cl_backend_error)

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
        /* The CUDA backend is not written yet: a GPU, when present, is reported but unused. */
        const char *why = cl_device_cuda_count() > 0
                              ? "the CUDA backend is not available in this build"
                              : "no CUDA device found";
        if (want_cuda) {
            g_set_error(error, CL_BACKEND_ERROR, CL_BACKEND_ERROR_NO_DEVICE,
                        "Cannot use the GPU: %s", why);
            return NULL;
        }
        if (notice)
            *notice = g_strdup_printf("%s: running on the CPU", why);
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

void cl_backend_free(ClBackend *be)
{
    if (!be)
        return;
    if (be->ops->destroy)
        be->ops->destroy(be);
    g_free(be);
}
