/* dicom.cc - DICOM decoding through DCMTK behind a C API (placeholder until the loader lands). */
#include "cl-config.h"
#include "loaders.h"

extern "C" ClImage *cl_image_load_dicom(const guint8 *data, gsize len, const char *name,
                                        const ClImageLimits *limits, GError **error)
{
    g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNSUPPORTED, "%s: DICOM loading is not built yet",
                name ? name : "image");
    return NULL;
}

extern "C" const char *cl_image_dicom_codecs(void)
{
    return CL_DCMTK_CODECS;
}
