/* tiff-private.h - what the pieces of the TIFF loader share: the message log, one page's layout,
 * the pixel readers (tiff-pixels.c) and the tag and GeoTIFF readers (tiff-tags.c). */
#pragma once

#include <tiffio.h>

#include "image/loaders.h"

/* ---- messages: everything libtiff/libgeotiff says during one call lands here, never on stderr */

typedef struct {
    char *first_error;   /* first error of this call, "module: text" */
    char *first_warning; /* kept for the metadata */
    guint n_errors;
    guint n_warnings;
    const char *name; /* libtiff uses the file name as the module of many messages */
} TiffLog;

void cl_tiff_log_add(TiffLog *log, gboolean is_error, const char *module, const char *fmt,
                     va_list ap) G_GNUC_PRINTF(4, 0);

/* ---- one page (IFD): what it holds and how it decodes ---- */

typedef enum {
    K_BITS, /* bit-packed unsigned/signed, 1..32 bits, MSB first (1, 2, 4, 12, ... bit data) */
    K_U8,
    K_I8,
    K_U16,
    K_I16,
    K_U24,
    K_I24,
    K_U32,
    K_I32,
    K_U64,
    K_I64,
    K_F16,
    K_F32,
    K_F64,
} SampleKind;

typedef struct {
    guint32 width, height;
    guint16 spp, bps, sample_tag, photometric, planar, compression;
    gboolean alpha; /* the first extra sample is alpha */
    gboolean tiled;
    guint32 tile_w, tile_h, rows_per_strip;
    guint64 row_bytes; /* one decoded row of a strip or tile (of one plane when separate) */
    gboolean use_rgba; /* decoded by TIFFReadRGBAImage into 8-bit RGB(A) */
    gboolean palette;
    SampleKind kind;
    gboolean is_signed;
    /* what the ClImage gets */
    guint channels, bits, bits_allocated;
    ClSampleFormat sample_format;
    ClChannelLayout layout;
} Page;

/* Sets *error to "shown: message" and returns FALSE from the calling function. */
#define FAIL(code, ...)                                                                            \
    do {                                                                                           \
        g_autofree char *m_ = g_strdup_printf(__VA_ARGS__);                                        \
        g_set_error(error, CL_IMAGE_ERROR, (code), "%s: %s", shown, m_);                           \
        return FALSE;                                                                              \
    } while (0)

/* "LZW", "Deflate", ... ("code N" in buf for the others). */
const char *cl_tiff_compression_name(guint16 c, char *buf, gsize n);

/* ---- tiff-pixels.c: page `page`'s pixels into a planar frame of p->channels planes ---- */

gboolean cl_tiff_read_pixels(TIFF *tif, TiffLog *log, const Page *p, float *frame, guint page,
                             const char *shown, GError **error);
/* Through TIFFReadRGBAImage (the codecs and colour spaces only libtiff converts). */
gboolean cl_tiff_read_pixels_rgba(TIFF *tif, TiffLog *log, const Page *p, float *frame, guint page,
                                  const char *shown, GError **error);

/* ---- tiff-tags.c: the current page's tags and GeoTIFF keys as metadata ---- */

void cl_tiff_add_meta_printf(ClImage *img, const char *key, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);
void cl_tiff_read_tags(TIFF *tif, ClImage *img, const Page *p);
/* img->geo from the GeoTIFF tags, when there are any; libgeotiff's messages go to log. */
void cl_tiff_read_geo(TIFF *tif, ClImage *img, TiffLog *log);
