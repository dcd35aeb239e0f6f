/* pixbuf.c - JPEG/WebP/BMP/GIF through gdk-pixbuf (placeholder until the loader lands). */
#include "loaders.h"

ClImage *cl_image_load_pixbuf(const guint8 *data, gsize len, const char *name, ClImageFormat format,
                              const ClImageLimits *limits, GError **error)
{
    g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNSUPPORTED, "%s: %s loading is not built yet",
                name ? name : "image", cl_image_format_name(format));
    return NULL;
}
