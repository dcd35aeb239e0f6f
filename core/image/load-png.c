/* load-png.c - cl_image_load and cl_image_load_data for the engine-only programs
 * (changelens-engine, the GPU tests): PNG files alone, so that they need none of the libraries
 * behind the other formats (DCMTK, libtiff, GDAL, gdk-pixbuf's loaders). Any other format is
 * refused with a message that names the full program. The full programs link load.c. */
#include "image/image.h"

#include <unistd.h>

#include "image/loaders.h"
#include "regularfile.h"

ClImage *cl_image_load_data(const guint8 *data, gsize len, const char *name,
                            const ClImageLimits *limits, GError **error)
{
    ClImageLimits def;
    if (!limits) {
        cl_image_limits_init(&def);
        limits = &def;
    }
    const char *shown = name ? name : "image";
    if (len == 0) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT, "%s: the file is empty", shown);
        return NULL;
    }
    ClImageFormat fmt = cl_image_detect_format(data, len);
    if (fmt != CL_IMAGE_FORMAT_PNG) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNKNOWN_FORMAT,
                    "%s: this engine-only program reads PNG images alone (this file is %s); "
                    "changelens-cli reads every format",
                    shown,
                    fmt == CL_IMAGE_FORMAT_UNKNOWN ? "in no format it knows"
                                                   : cl_image_format_name(fmt));
        return NULL;
    }
    ClImage *img = cl_image_load_png(data, len, name, limits, error);
    if (img && name && !img->path)
        img->path = g_strdup(name);
    return img;
}

ClImage *cl_image_load(const char *path, const ClImageLimits *limits, GError **error)
{
    g_return_val_if_fail(path != NULL, NULL);
    const char *why = NULL;
    int fd = cl_open_regular(path, &why);
    if (fd < 0) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_IO,
                    fd == -1 ? "%s: cannot open: %s" : "%s: %s, not an image file", path, why);
        return NULL;
    }
    g_autoptr(GError) local = NULL;
    GMappedFile *map = g_mapped_file_new_from_fd(fd, FALSE, &local);
    close(fd); /* the mapping keeps what it needs */
    if (!map) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_IO, "%s: cannot open: %s", path,
                    local->message);
        return NULL;
    }
    ClImage *img = cl_image_load_data((const guint8 *)g_mapped_file_get_contents(map),
                                      g_mapped_file_get_length(map), path, limits, error);
    g_mapped_file_unref(map);
    return img;
}
