/* load.c - cl_image_load and cl_image_load_data: the format detected from the bytes, each format
 * to its loader (PNG, TIFF, DICOM, gdk-pixbuf's, else GDAL). The engine-only programs link
 * load-png.c instead. */
#include "image/image.h"

#include <string.h>
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
    ClImage *img = NULL;
    switch (fmt) {
    case CL_IMAGE_FORMAT_PNG: img = cl_image_load_png(data, len, name, limits, error); break;
    case CL_IMAGE_FORMAT_TIFF: img = cl_image_load_tiff(data, len, name, limits, error); break;
    case CL_IMAGE_FORMAT_DICOM: img = cl_image_load_dicom(data, len, name, limits, error); break;
    case CL_IMAGE_FORMAT_JPEG:
    case CL_IMAGE_FORMAT_WEBP:
    case CL_IMAGE_FORMAT_BMP:
    case CL_IMAGE_FORMAT_GIF:
        img = cl_image_load_pixbuf(data, len, name, fmt, limits, error);
        break;
    default:
        /* JPEG 2000, NITF, ...: GDAL reads the bytes through its in-memory files (formats made
         * of several files, ENVI or VRT, need the path: cl_image_load) */
        img = cl_image_load_gdal_data(data, len, name, limits, error);
        break;
    }
    if (img) {
        g_assert(img->frames->len >= 1 && img->width && img->height && img->channels);
        if (name && !img->path)
            img->path = g_strdup(name);
    }
    return img;
}

ClImage *cl_image_load(const char *path, const ClImageLimits *limits, GError **error)
{
    g_return_val_if_fail(path != NULL, NULL);
    g_autoptr(GError) local = NULL;
    const char *why = NULL;
    int fd = cl_open_regular(path, &why);
    if (fd == -1 && strchr(path, ':')) {
        /* not a file: a GDAL dataset name (NETCDF:"f.nc":var) or FILE:SUBDATASET */
        g_autoptr(GError) gerr = NULL;
        ClImage *img = cl_image_load_gdal(path, limits, &gerr);
        if (img)
            return img;
        if (!g_error_matches(gerr, CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNKNOWN_FORMAT)) {
            g_propagate_error(error, g_steal_pointer(&gerr));
            return NULL;
        }
    }
    if (fd < 0) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_IO,
                    fd == -1 ? "%s: cannot open: %s" : "%s: %s, not an image file", path, why);
        return NULL;
    }
    GMappedFile *map = g_mapped_file_new_from_fd(fd, FALSE, &local);
    close(fd); /* the mapping keeps what it needs */
    if (!map) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_IO, "%s: cannot open: %s", path,
                    local->message);
        return NULL;
    }
    const guint8 *data = (const guint8 *)g_mapped_file_get_contents(map);
    gsize len = g_mapped_file_get_length(map);
    ClImageFormat fmt = cl_image_detect_format(data, len);
    if (len > 0 && fmt == CL_IMAGE_FORMAT_UNKNOWN) {
        /* GDAL opens the file by its path: sidecar files (ENVI .hdr, VRT sources, .aux.xml)
         * and large rasters read by window */
        g_mapped_file_unref(map);
        return cl_image_load_gdal(path, limits, error);
    }
    /* Two bytes ("BM") or a DICOM group number without the preamble are weak evidence: raw
     * samples of an ENVI file can start so. */
    gboolean weak = fmt == CL_IMAGE_FORMAT_BMP ||
                    (fmt == CL_IMAGE_FORMAT_DICOM && (len < 132 || memcmp(data + 128, "DICM", 4)));
    ClImage *img = cl_image_load_data(data, len, path, limits, &local);
    g_mapped_file_unref(map);
    gboolean too_large_tiff = fmt == CL_IMAGE_FORMAT_TIFF &&
                              g_error_matches(local, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE);
    if (!img && (weak || too_large_tiff)) {
        /* a TIFF over the pixel budget (a large GeoTIFF, a COG): GDAL reads an overview or a
         * decimated scale that fits instead (a TIFF refused for anything else, such as its
         * number of pages, stays refused) */
        g_autoptr(GError) gerr = NULL;
        img = cl_image_load_gdal(path, limits, &gerr);
        if (img && too_large_tiff && !cl_image_get_meta(img, "Resolution"))
            g_clear_pointer(&img, cl_image_free);
        if (img)
            return img;
    }
    if (!img)
        g_propagate_error(error, g_steal_pointer(&local));
    return img;
}
