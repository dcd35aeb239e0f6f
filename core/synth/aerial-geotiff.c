/* aerial-geotiff.c - writes the aerial task's tiles as GeoTIFF (libtiff + libgeotiff): 8-bit RGB,
 * deflate, georeferenced in WGS 84 / UTM zone 33N by a tie point and a pixel scale. Both images
 * of a pair carry the same georeferencing: they share one pixel grid, as a co-registered
 * before/after pair from an archive does (the content's misregistration is a nuisance). */
#include "synth/synth-private.h"

#include <errno.h>
#include <geotiffio.h>
#include <glib/gstdio.h>
#include <string.h>
#include <tiffio.h>
#include <xtiffio.h>

#define EPSG_UTM33N 32633 /* also in aerial.c's structured answer */

/* libtiff 4.5 lets each handle carry its own error handler; older ones print to stderr */
#if TIFFLIB_VERSION >= 20221213
#define PER_HANDLE_ERRORS 1
#else
#define PER_HANDLE_ERRORS 0
#endif

#if PER_HANDLE_ERRORS
static int on_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
    G_GNUC_PRINTF(4, 0);
static int on_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    (void)tif;
    (void)module;
    char **first = user;
    if (!*first)
        *first = g_strdup_vprintf(fmt, ap);
    return 1; /* handled: nothing on stderr */
}

static int on_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    (void)tif, (void)user, (void)module, (void)fmt, (void)ap;
    return 1;
}
#endif

static TIFF *open_for_writing(const char *path, char **first_error)
{
    static gsize once = 0;
    if (g_once_init_enter(&once)) {
        XTIFFInitialize(); /* GeoTIFF tags known to libtiff; guarded by libgeotiff too */
        g_once_init_leave(&once, 1);
    }
#if PER_HANDLE_ERRORS
    TIFFOpenOptions *o = TIFFOpenOptionsAlloc();
    TIFFOpenOptionsSetErrorHandlerExtR(o, on_error, first_error);
    TIFFOpenOptionsSetWarningHandlerExtR(o, on_warning, NULL);
    TIFF *tif = TIFFOpenExt(path, "w", o);
    TIFFOpenOptionsFree(o);
    return tif;
#else
    (void)first_error;
    return TIFFOpen(path, "w");
#endif
}

gboolean cl_synth_aerial_write(const ClSynthSample *s, int k, const char *path, GError **error)
{
    g_return_val_if_fail(s && path, FALSE);
    if (k < 0 || k >= s->n_images || !s->images[k].pixels || s->images[k].channels != 3) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS,
                    "synth: no RGB image %d in this %d-image sample to write to %s", k + 1,
                    s->n_images, path);
        return FALSE;
    }
    const ClSynthImage *img = &s->images[k];
    g_autofree char *why = NULL;
    errno = 0;
    TIFF *tif = open_for_writing(path, &why);
    if (!tif) {
        int e = errno;
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_IO, "cannot create %s: %s", path,
                    why ? why
                    : e ? g_strerror(e)
                        : "libtiff refused it");
        return FALSE;
    }
    guint16 compression = TIFFIsCODECConfigured(COMPRESSION_ADOBE_DEFLATE)
                              ? COMPRESSION_ADOBE_DEFLATE
                              : COMPRESSION_NONE;
    guint32 rps = MAX(1, 65536 / (img->width * 3)); /* ~64 KiB strips */
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, (guint32)img->width);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, (guint32)img->height);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 3);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8);
    TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT, SAMPLEFORMAT_UINT);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_RGB);
    TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(tif, TIFFTAG_COMPRESSION, compression);
    if (compression != COMPRESSION_NONE)
        TIFFSetField(tif, TIFFTAG_PREDICTOR, PREDICTOR_HORIZONTAL);
    TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, rps);
    TIFFSetField(tif, TIFFTAG_SOFTWARE, "ChangeLens synth (aerial)");
    g_autofree char *desc =
        g_strdup_printf("synthetic aerial tile, %s image, seed %" G_GUINT64_FORMAT,
                        k == 0 ? "before" : "after", s->seed);
    TIFFSetField(tif, TIFFTAG_IMAGEDESCRIPTION, desc);

    /* georeferencing: the corner of pixel (0, 0) and the ground sample distance */
    double origin[2], gsd;
    cl_synth_aerial_georef(s, origin, &gsd);
    double tie[6] = { 0, 0, 0, origin[0], origin[1], 0 };
    double scale[3] = { gsd, gsd, 0 };
    TIFFSetField(tif, TIFFTAG_GEOTIEPOINTS, 6, tie);
    TIFFSetField(tif, TIFFTAG_GEOPIXELSCALE, 3, scale);
    GTIF *gtif = GTIFNew(tif);
    gboolean ok = gtif != NULL;
    if (ok) {
        GTIFKeySet(gtif, GTModelTypeGeoKey, TYPE_SHORT, 1, ModelTypeProjected);
        GTIFKeySet(gtif, GTRasterTypeGeoKey, TYPE_SHORT, 1, RasterPixelIsArea);
        GTIFKeySet(gtif, GTCitationGeoKey, TYPE_ASCII, 0, "WGS 84 / UTM zone 33N");
        GTIFKeySet(gtif, ProjectedCSTypeGeoKey, TYPE_SHORT, 1, EPSG_UTM33N);
        GTIFKeySet(gtif, ProjLinearUnitsGeoKey, TYPE_SHORT, 1, Linear_Meter);
        ok = GTIFWriteKeys(gtif) != 0;
        GTIFFree(gtif);
    }
    /* a copy per strip: libtiff may modify the buffer it is given (predictor) */
    gsize row_bytes = (gsize)img->width * 3;
    g_autofree guint8 *strip = g_malloc(row_bytes * rps);
    for (guint32 y = 0, n = 0; ok && y < (guint32)img->height; y += rps, n++) {
        guint32 rows = MIN(rps, (guint32)img->height - y);
        memcpy(strip, img->pixels + (gsize)y * row_bytes, rows * row_bytes);
        ok = TIFFWriteEncodedStrip(tif, n, strip, (tmsize_t)(rows * row_bytes)) >= 0;
    }
    ok = ok && TIFFWriteDirectory(tif);
    TIFFClose(tif);
    if (!ok) {
        g_unlink(path); /* no half-written tile left behind */
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_IO, "cannot write %s: %s", path,
                    why ? why : "libtiff could not write the image (is the disk full?)");
        return FALSE;
    }
    return TRUE;
}
