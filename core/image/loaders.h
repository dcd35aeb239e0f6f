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

/* Shown in `meson configure`-like summaries and `changelens-cli info --version`. */
const char *
cl_image_dicom_codecs(void); /* e.g. "JPEG (baseline, extended, lossless), JPEG-LS, RLE, deflate" */

G_END_DECLS
