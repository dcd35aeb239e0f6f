/* tiff.c - TIFF decoder (placeholder until the loader lands). */
#include "loaders.h"

ClImage *cl_image_load_tiff(const guint8 *data, gsize len, const char *name,
                          const ClImageLimits *limits, GError **error)
{
    g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNSUPPORTED, "%s: TIFF loading is not built yet",
                name ? name : "image");
    return NULL;
}
