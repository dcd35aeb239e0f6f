/* tiff-pixels.c - the TIFF loader's pixel reading: strips and tiles decoded by libtiff, samples
 * of any width unpacked into planar float frames, palettes expanded, the RGBA path. */
#include "image/tiff-private.h"

#include <math.h>
#include <string.h>

/* ---- sample unpacking ---- */

static float half_to_float(guint16 h)
{
    guint sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float v;
    if (exp == 0)
        v = ldexpf((float)man, -24);
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = ldexpf((float)(man | 0x400), (int)exp - 25);
    return sign ? -v : v;
}

/* dst[k] = sample (first + k*step) of a decoded row, for k < n. Multi-byte samples are in host
 * order (libtiff swaps them); bit-packed ones are MSB-first bit streams. */
static void unpack_row(float *dst, const guint8 *row, gsize first, gsize step, gsize n,
                       const Page *p)
{
    gsize i = first;
    switch (p->kind) {
    case K_U8:
        for (gsize k = 0; k < n; k++, i += step)
            dst[k] = row[i];
        break;
    case K_I8:
        for (gsize k = 0; k < n; k++, i += step)
            dst[k] = (gint8)row[i];
        break;
#define TYPED(KIND, T)                                                                             \
    case KIND:                                                                                     \
        for (gsize k = 0; k < n; k++, i += step) {                                                 \
            T v;                                                                                   \
            memcpy(&v, row + i * sizeof(T), sizeof(T));                                            \
            dst[k] = (float)v;                                                                     \
        }                                                                                          \
        break;
        TYPED(K_U16, guint16)
        TYPED(K_I16, gint16)
        TYPED(K_U32, guint32)
        TYPED(K_I32, gint32)
        TYPED(K_U64, guint64)
        TYPED(K_I64, gint64)
        TYPED(K_F32, float)
        TYPED(K_F64, double)
#undef TYPED
    case K_F16:
        for (gsize k = 0; k < n; k++, i += step) {
            guint16 v;
            memcpy(&v, row + i * 2, 2);
            dst[k] = half_to_float(v);
        }
        break;
    case K_U24:
    case K_I24:
        for (gsize k = 0; k < n; k++, i += step) {
            const guint8 *b = row + i * 3;
            guint32 v = G_BYTE_ORDER == G_LITTLE_ENDIAN
                            ? (guint32)b[0] | (guint32)b[1] << 8 | (guint32)b[2] << 16
                            : (guint32)b[2] | (guint32)b[1] << 8 | (guint32)b[0] << 16;
            dst[k] = p->kind == K_I24 ? (float)((gint32)(v << 8) >> 8) : (float)v;
        }
        break;
    case K_BITS: {
        guint bps = p->bps;
        guint64 mask = ((guint64)1 << bps) - 1;
        for (gsize k = 0; k < n; k++, i += step) {
            guint64 bit = (guint64)i * bps;
            const guint8 *b = row + (bit >> 3);
            guint skip = bit & 7, nbytes = (skip + bps + 7) / 8;
            guint64 acc = 0;
            for (guint j = 0; j < nbytes; j++)
                acc = acc << 8 | b[j];
            guint64 v = (acc >> (nbytes * 8 - skip - bps)) & mask;
            if (p->is_signed && bps > 1 && (v >> (bps - 1)))
                dst[k] = (float)((gint64)v - ((gint64)1 << bps));
            else
                dst[k] = (float)v;
        }
        break;
    }
    }
}

/* ---- pixel reading ---- */

static gboolean read_block(TIFF *tif, TiffLog *log, gboolean tile, guint32 index, void *buf,
                           tmsize_t size, guint page, const char *shown, GError **error)
{
    guint before = log->n_errors;
    tmsize_t got = tile ? TIFFReadEncodedTile(tif, index, buf, size)
                        : TIFFReadEncodedStrip(tif, index, buf, size);
    if (got != size || log->n_errors != before)
        FAIL(CL_IMAGE_ERROR_CORRUPT,
             "page %u %s %u cannot be decoded, the file is truncated or "
             "damaged (%s)",
             page + 1, tile ? "tile" : "strip", index,
             log->first_error ? log->first_error : "short data");
    return TRUE;
}

/* Decoded samples of one strip/tile row span into the planar frame. */
static void scatter_row(float *frame, const Page *p, guint plane, const guint8 *row, guint32 x0,
                        guint32 y, guint32 ncols)
{
    gsize plane_len = (gsize)p->width * p->height;
    gboolean separate = p->planar == PLANARCONFIG_SEPARATE && p->spp > 1;
    /* palette indices go to the last plane, expanded into all three afterwards */
    guint out_base = p->palette ? 2 : 0;
    if (separate) {
        unpack_row(frame + (gsize)plane * plane_len + (gsize)y * p->width + x0, row, 0, 1, ncols,
                   p);
        return;
    }
    for (guint c = 0; c < p->spp; c++)
        unpack_row(frame + (gsize)(out_base + c) * plane_len + (gsize)y * p->width + x0, row, c,
                   p->spp, ncols, p);
}

gboolean cl_tiff_read_pixels(TIFF *tif, TiffLog *log, const Page *p, float *frame, guint page,
                             const char *shown, GError **error)
{
    gboolean separate = p->planar == PLANARCONFIG_SEPARATE && p->spp > 1;
    guint n_planes = separate ? p->spp : 1;
    guint64 block_rows = p->tiled ? p->tile_h : p->rows_per_strip;
    guint64 block_bytes = block_rows * p->row_bytes;
    if (block_bytes > (guint64)G_MAXSSIZE / 2)
        FAIL(CL_IMAGE_ERROR_TOO_LARGE, "page %u has %s of %" G_GUINT64_FORMAT " bytes", page + 1,
             p->tiled ? "tiles" : "strips", block_bytes);
    g_autofree guint8 *buf = g_try_malloc(block_bytes);
    if (!buf)
        FAIL(CL_IMAGE_ERROR_TOO_LARGE, "not enough memory for a %" G_GUINT64_FORMAT "-byte %s",
             block_bytes, p->tiled ? "tile" : "strip");

    if (p->tiled) {
        guint64 across = ((guint64)p->width + p->tile_w - 1) / p->tile_w;
        guint64 down = ((guint64)p->height + p->tile_h - 1) / p->tile_h;
        if (TIFFNumberOfTiles(tif) != across * down * n_planes)
            FAIL(CL_IMAGE_ERROR_CORRUPT,
                 "page %u has %u tiles where %" G_GUINT64_FORMAT " were expected", page + 1,
                 TIFFNumberOfTiles(tif), across * down * n_planes);
        for (guint s = 0; s < n_planes; s++)
            for (guint32 ty = 0; ty < p->height; ty += MIN(p->tile_h, p->height - ty)) {
                for (guint32 tx = 0; tx < p->width; tx += MIN(p->tile_w, p->width - tx)) {
                    guint32 index = TIFFComputeTile(tif, tx, ty, 0, (guint16)s);
                    if (!read_block(tif, log, TRUE, index, buf, (tmsize_t)block_bytes, page, shown,
                                    error))
                        return FALSE;
                    /* edge tiles are stored whole: keep only the part inside the image */
                    guint32 rows = MIN(p->tile_h, p->height - ty);
                    guint32 cols = MIN(p->tile_w, p->width - tx);
                    for (guint32 r = 0; r < rows; r++)
                        scatter_row(frame, p, s, buf + r * p->row_bytes, tx, ty + r, cols);
                }
            }
    } else {
        guint32 per_plane =
            (guint32)(((guint64)p->height + p->rows_per_strip - 1) / p->rows_per_strip);
        if ((guint64)TIFFNumberOfStrips(tif) != (guint64)per_plane * n_planes)
            FAIL(CL_IMAGE_ERROR_CORRUPT,
                 "page %u has %u strips where %" G_GUINT64_FORMAT " were expected", page + 1,
                 TIFFNumberOfStrips(tif), (guint64)per_plane * n_planes);
        for (guint s = 0; s < n_planes; s++)
            for (guint32 k = 0; k < per_plane; k++) {
                guint32 y0 = k * p->rows_per_strip;
                guint32 rows = MIN(p->rows_per_strip, p->height - y0);
                if (!read_block(tif, log, FALSE, s * per_plane + k, buf,
                                (tmsize_t)(rows * p->row_bytes), page, shown, error))
                    return FALSE;
                for (guint32 r = 0; r < rows; r++)
                    scatter_row(frame, p, s, buf + r * p->row_bytes, 0, y0 + r, p->width);
            }
    }

    if (p->palette) {
        guint16 *cr, *cg, *cb;
        if (!TIFFGetField(tif, TIFFTAG_COLORMAP, &cr, &cg, &cb))
            FAIL(CL_IMAGE_ERROR_CORRUPT, "page %u has no colour map", page + 1);
        gsize n = (gsize)p->width * p->height;
        float *r = frame, *g = frame + n, *b = frame + 2 * n;
        for (gsize i = 0; i < n; i++) {
            guint idx = (guint)b[i]; /* < 2^bps: the colour map has that many entries */
            r[i] = cr[idx];
            g[i] = cg[idx];
            b[i] = cb[idx];
        }
    }
    return TRUE;
}

gboolean cl_tiff_read_pixels_rgba(TIFF *tif, TiffLog *log, const Page *p, float *frame, guint page,
                                  const char *shown, GError **error)
{
    gsize n = (gsize)p->width * p->height;
    g_autofree guint32 *raster = g_try_malloc_n(n, sizeof(guint32));
    if (!raster)
        FAIL(CL_IMAGE_ERROR_TOO_LARGE, "not enough memory to decode page %u", page + 1);
    guint16 orientation = ORIENTATION_TOPLEFT;
    TIFFGetFieldDefaulted(tif, TIFFTAG_ORIENTATION, &orientation);
    /* Ask for the file's own row order so rows stay as stored, like the other path. */
    if (orientation < ORIENTATION_TOPLEFT || orientation > ORIENTATION_BOTLEFT)
        orientation = ORIENTATION_TOPLEFT;
    guint before = log->n_errors;
    if (!TIFFReadRGBAImageOriented(tif, p->width, p->height, raster, orientation, 1) ||
        log->n_errors != before)
        FAIL(CL_IMAGE_ERROR_CORRUPT,
             "page %u cannot be decoded, the file is truncated or damaged"
             " (%s)",
             page + 1, log->first_error ? log->first_error : "RGBA decoding failed");
    for (gsize i = 0; i < n; i++) {
        frame[i] = TIFFGetR(raster[i]);
        frame[n + i] = TIFFGetG(raster[i]);
        frame[2 * n + i] = TIFFGetB(raster[i]);
        if (p->channels == 4)
            frame[3 * n + i] = TIFFGetA(raster[i]);
    }
    return TRUE;
}
