/* loaders.h - per-format decoders behind cl_image_load_data(); private to core/image. */
#pragma once

#include "image/image.h"

G_BEGIN_DECLS

/* Each takes the whole file in memory, checks limits before allocating pixels, and returns a
 * complete ClImage or NULL with a CL_IMAGE_ERROR whose message names the file (name may be NULL
 * -> "image") and says what is wrong. None may crash, hang or leak on any input. */
ClImage *cl_image_load_png(const guint8 *data, gsize len, const char *name,
                           const ClImageLimits *limits, GError **error);
ClImage *cl_image_load_tiff(const guint8 *data, gsize len, const char *name,
                            const ClImageLimits *limits, GError **error);
ClImage *cl_image_load_dicom(const guint8 *data, gsize len, const char *name,
                             const ClImageLimits *limits, GError **error);
/* JPEG, WebP, BMP, GIF through gdk-pixbuf (format says which, for messages and metadata). */
ClImage *cl_image_load_pixbuf(const guint8 *data, gsize len, const char *name, ClImageFormat format,
                              const ClImageLimits *limits, GError **error);
/* Any raster GDAL opens (core/image/gdal.c). _gdal takes a path or GDAL dataset name (also
 * "FILE:SUBDATASET", by name or number from 1; a container opens its first subdataset); _data hands
 * the bytes to GDAL as an in-memory file. Over the pixel budget, reads the largest overview that
 * fits, else a decimated grid (metadata "Resolution" says so). Nodata samples become NaN. */
ClImage *cl_image_load_gdal(const char *path, const ClImageLimits *limits, GError **error);
ClImage *cl_image_load_gdal_data(const guint8 *data, gsize len, const char *name,
                                 const ClImageLimits *limits, GError **error);
/* A raw-layout raster's (ENVI, EHdr, ...) bytes needed and its data file's size; FALSE when the
 * dataset (a GDALDatasetH) has no raw layout (gdal-raw.cc). */
gboolean cl_gdal_raw_size(void *dataset, guint64 *need, guint64 *have);
/* GDALAllRegister once (thread-safe). */
void cl_gdal_init(void);

/* Shown in `meson configure`-like summaries and `changelens-cli info --version`. */
const char *
cl_image_dicom_codecs(void); /* e.g. "JPEG (baseline, extended, lossless), JPEG-LS, RLE, deflate" */

G_END_DECLS
