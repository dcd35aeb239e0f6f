/* tiff.c - TIFF, BigTIFF and GeoTIFF decoder: libtiff reading from memory, libgeotiff for keys. */
#include "image/loaders.h"

#include <geotiffio.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <tiffio.h>
#include <xtiffio.h>

/* libtiff 4.5 (20221213) lets each TIFF* carry its own error handlers; older ones only have
 * process-wide handlers, which we route to the loading thread's log. */
#if TIFFLIB_VERSION >= 20221213
#define CL_TIFF_PER_HANDLE_ERRORS 1
#else
#define CL_TIFF_PER_HANDLE_ERRORS 0
#endif

/* ---- messages: everything libtiff/libgeotiff says during one call lands here, never on stderr */

typedef struct {
    char *first_error;   /* first error of this call, "module: text" */
    char *first_warning; /* kept for the metadata */
    guint n_errors;
    guint n_warnings;
    const char *name; /* libtiff uses the file name as the module of many messages */
} TiffLog;

static void log_add(TiffLog *log, gboolean is_error, const char *module, const char *fmt,
                    va_list ap) G_GNUC_PRINTF(4, 0);
static void log_add(TiffLog *log, gboolean is_error, const char *module, const char *fmt,
                    va_list ap)
{
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    /* libjpeg reports a truncated stream as a warning and pads with grey: that is lost data. */
    if (!is_error && (strstr(msg, "Premature end") || strstr(msg, "Corrupt JPEG")))
        is_error = TRUE;
    char **slot = is_error ? &log->first_error : &log->first_warning;
    if (is_error)
        log->n_errors++;
    else
        log->n_warnings++;
    if (!*slot)
        *slot = module && *module && g_strcmp0(module, log->name) != 0
                    ? g_strdup_printf("%s: %s", module, msg) : g_steal_pointer(&msg);
}

static void log_clear(TiffLog *log)
{
    g_free(log->first_error);
    g_free(log->first_warning);
}

#if CL_TIFF_PER_HANDLE_ERRORS
static int on_tiff_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
    G_GNUC_PRINTF(4, 0);
static int on_tiff_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    log_add(user, TRUE, module, fmt, ap);
    return 1; /* handled: do not call the global (stderr) handler */
}

static int on_tiff_warning(TIFF *tif, void *user, const char *module, const char *fmt,
                           va_list ap) G_GNUC_PRINTF(4, 0);
static int on_tiff_warning(TIFF *tif, void *user, const char *module, const char *fmt,
                           va_list ap)
{
    log_add(user, FALSE, module, fmt, ap);
    return 1;
}
#else
static GPrivate current_log;
static TIFFErrorHandlerExt prev_error, prev_warning;

static void on_global_error(thandle_t h, const char *module, const char *fmt, va_list ap)
    G_GNUC_PRINTF(3, 0);
static void on_global_error(thandle_t h, const char *module, const char *fmt, va_list ap)
{
    TiffLog *log = g_private_get(&current_log);
    if (log)
        log_add(log, TRUE, module, fmt, ap);
    else if (prev_error)
        prev_error(h, module, fmt, ap);
}

static void on_global_warning(thandle_t h, const char *module, const char *fmt, va_list ap)
    G_GNUC_PRINTF(3, 0);
static void on_global_warning(thandle_t h, const char *module, const char *fmt, va_list ap)
{
    TiffLog *log = g_private_get(&current_log);
    if (log)
        log_add(log, FALSE, module, fmt, ap);
    else if (prev_warning)
        prev_warning(h, module, fmt, ap);
}
#endif

static void on_geo_error(GTIF *gt, int level, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static void on_geo_error(GTIF *gt, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_add(GTIFGetUserData(gt), level == LIBGEOTIFF_ERROR, "GeoTIFF", fmt, ap);
    va_end(ap);
}

/* libtiff 4.5 names GDAL's ASCII tags but does not define them; read as unknown tags they would
 * only add "unknown field" warnings. */
static TIFFExtendProc parent_extender;

static void gdal_tags_extender(TIFF *tif)
{
    static const TIFFFieldInfo gdal[] = {
        { TIFFTAG_GDAL_METADATA, -1, -1, TIFF_ASCII, FIELD_CUSTOM, TRUE, FALSE, "GDALMetadata" },
        { TIFFTAG_GDAL_NODATA, -1, -1, TIFF_ASCII, FIELD_CUSTOM, TRUE, FALSE, "GDALNoDataValue" },
    };
    TIFFMergeFieldInfo(tif, gdal, G_N_ELEMENTS(gdal));
    if (parent_extender)
        parent_extender(tif);
}

/* Process-wide, once: the GeoTIFF tag extender (so libtiff knows tags 33550 ... 34737), the
 * GDAL tags, and on old libtiff the routing handlers. XTIFFInitialize is not thread-safe. */
static void tiff_global_init(void)
{
    static gsize done = 0;
    if (g_once_init_enter(&done)) {
        XTIFFInitialize();
        parent_extender = TIFFSetTagExtender(gdal_tags_extender);
#if !CL_TIFF_PER_HANDLE_ERRORS
        prev_error = TIFFSetErrorHandlerExt(on_global_error);
        prev_warning = TIFFSetWarningHandlerExt(on_global_warning);
        TIFFSetErrorHandler(NULL);
        TIFFSetWarningHandler(NULL);
#endif
        g_once_init_leave(&done, 1);
    }
}

/* ---- the file in memory, as libtiff client procs ---- */

typedef struct {
    const guint8 *data;
    guint64 len;
    guint64 pos;
} MemSrc;

static tmsize_t mem_read(thandle_t h, void *buf, tmsize_t size)
{
    MemSrc *m = h;
    if (size <= 0 || m->pos >= m->len)
        return 0;
    guint64 n = MIN((guint64)size, m->len - m->pos);
    memcpy(buf, m->data + m->pos, n);
    m->pos += n;
    return (tmsize_t)n;
}

static tmsize_t mem_write(thandle_t h, void *buf, tmsize_t size)
{
    return -1; /* opened read-only */
}

static toff_t mem_seek(thandle_t h, toff_t off, int whence)
{
    MemSrc *m = h;
    gint64 base;
    switch (whence) {
    case SEEK_SET: base = 0; break;
    case SEEK_CUR: base = (gint64)m->pos; break;
    case SEEK_END: base = (gint64)m->len; break;
    default: return (toff_t)-1;
    }
    /* off is unsigned; SEEK_CUR/SEEK_END may carry a negative offset in two's complement */
    gint64 delta = (gint64)off;
    if (whence == SEEK_SET && off > (toff_t)G_MAXINT64)
        return (toff_t)-1;
    if ((delta < 0 && base + delta < 0) || (delta > 0 && base > G_MAXINT64 - delta))
        return (toff_t)-1;
    m->pos = (guint64)(base + delta);
    return (toff_t)m->pos;
}

static int mem_close(thandle_t h)
{
    return 0;
}

static toff_t mem_size(thandle_t h)
{
    return ((MemSrc *)h)->len;
}

/* "Mapping" hands libtiff our buffer, so strips are decoded straight from it without copies. */
static int mem_map(thandle_t h, void **base, toff_t *size)
{
    MemSrc *m = h;
    *base = (void *)m->data;
    *size = m->len;
    return 1;
}

static void mem_unmap(thandle_t h, void *base, toff_t size)
{
}

/* ---- one page (IFD): what it holds and how it decodes ---- */

typedef enum {
    K_BITS, /* bit-packed unsigned/signed, 1..32 bits, MSB first (1, 2, 4, 12, ... bit data) */
    K_U8, K_I8, K_U16, K_I16, K_U24, K_I24, K_U32, K_I32, K_U64, K_I64,
    K_F16, K_F32, K_F64,
} SampleKind;

typedef struct {
    guint32 width, height;
    guint16 spp, bps, sample_tag, photometric, planar, compression;
    gboolean alpha;    /* the first extra sample is alpha */
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

static const char *photometric_name(guint16 p, char *buf, gsize n)
{
    switch (p) {
    case PHOTOMETRIC_MINISWHITE: return "min-is-white";
    case PHOTOMETRIC_MINISBLACK: return "min-is-black";
    case PHOTOMETRIC_RGB: return "rgb";
    case PHOTOMETRIC_PALETTE: return "palette";
    case PHOTOMETRIC_MASK: return "mask";
    case PHOTOMETRIC_SEPARATED: return "separated";
    case PHOTOMETRIC_YCBCR: return "ycbcr";
    case PHOTOMETRIC_CIELAB: return "cielab";
    case PHOTOMETRIC_ICCLAB: return "icclab";
    case PHOTOMETRIC_ITULAB: return "itulab";
    case PHOTOMETRIC_CFA: return "cfa";
    case PHOTOMETRIC_LOGL: return "logl";
    case PHOTOMETRIC_LOGLUV: return "logluv";
    case 34892: return "linear-raw";
    default: g_snprintf(buf, n, "photometric-%u", p); return buf;
    }
}

static const char *compression_name(guint16 c, char *buf, gsize n)
{
    switch (c) {
    case COMPRESSION_NONE: return "none";
    case COMPRESSION_CCITTRLE: return "CCITT modified Huffman RLE";
    case COMPRESSION_CCITTFAX3: return "CCITT Group 3 fax";
    case COMPRESSION_CCITTFAX4: return "CCITT Group 4 fax";
    case COMPRESSION_LZW: return "LZW";
    case COMPRESSION_OJPEG: return "old-style JPEG";
    case COMPRESSION_JPEG: return "JPEG";
    case COMPRESSION_ADOBE_DEFLATE: return "Deflate";
    case COMPRESSION_DEFLATE: return "Deflate (legacy code)";
    case COMPRESSION_PACKBITS: return "PackBits";
    case COMPRESSION_THUNDERSCAN: return "ThunderScan";
    case COMPRESSION_NEXT: return "NeXT 2-bit RLE";
    case COMPRESSION_PIXARLOG: return "PixarLog";
    case COMPRESSION_JBIG: return "JBIG";
    case COMPRESSION_SGILOG: return "SGI LogLuv";
    case COMPRESSION_SGILOG24: return "SGI LogLuv 24-bit";
    case COMPRESSION_JP2000: return "JPEG 2000";
    case COMPRESSION_LERC: return "LERC";
    case COMPRESSION_LZMA: return "LZMA";
    case COMPRESSION_ZSTD: return "Zstandard";
    case COMPRESSION_WEBP: return "WebP";
    case COMPRESSION_JXL: return "JPEG XL";
    default: g_snprintf(buf, n, "code %u", c); return buf;
    }
}

static ClChannelLayout layout_for(guint16 photometric, guint spp, gboolean alpha)
{
    if (spp == 1)
        return CL_LAYOUT_GREY;
    if ((photometric == PHOTOMETRIC_MINISBLACK || photometric == PHOTOMETRIC_MINISWHITE) &&
        spp == 2 && alpha)
        return CL_LAYOUT_GREY_ALPHA;
    if (photometric == PHOTOMETRIC_RGB && spp == 3)
        return CL_LAYOUT_RGB;
    if (photometric == PHOTOMETRIC_RGB && spp == 4 && alpha)
        return CL_LAYOUT_RGBA;
    return CL_LAYOUT_BANDS;
}

#define FAIL(code, ...)                                                                            \
    do {                                                                                           \
        g_autofree char *m_ = g_strdup_printf(__VA_ARGS__);                                        \
        g_set_error(error, CL_IMAGE_ERROR, (code), "%s: %s", shown, m_);                           \
        return FALSE;                                                                              \
    } while (0)

/* Reads the current directory's layout into p and checks that this loader can decode it. */
static gboolean page_describe(TIFF *tif, guint page, const ClImageLimits *limits, Page *p,
                              const char *shown, GError **error)
{
    memset(p, 0, sizeof(*p));
    char nbuf[32];
    guint32 depth = 1;
    if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &p->width) ||
        !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &p->height))
        FAIL(CL_IMAGE_ERROR_CORRUPT, "page %u has no image size", page + 1);
    if (p->width == 0 || p->height == 0)
        FAIL(CL_IMAGE_ERROR_CORRUPT, "page %u is empty (%u × %u pixels)", page + 1, p->width,
             p->height);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &p->spp);
    TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &p->bps);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &p->sample_tag);
    TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &p->planar);
    TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &p->compression);
    TIFFGetFieldDefaulted(tif, TIFFTAG_IMAGEDEPTH, &depth);
    if (!TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &p->photometric))
        p->photometric = p->spp >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK;
    if (p->spp == 0)
        FAIL(CL_IMAGE_ERROR_CORRUPT, "page %u has 0 samples per pixel", page + 1);
    if (depth > 1)
        FAIL(CL_IMAGE_ERROR_UNSUPPORTED, "page %u is a volume (ImageDepth %u), which ChangeLens "
             "does not read", page + 1, depth);
    if (!TIFFIsCODECConfigured(p->compression))
        FAIL(CL_IMAGE_ERROR_UNSUPPORTED, "uses %s compression, which this build of libtiff "
             "cannot decode", compression_name(p->compression, nbuf, sizeof nbuf));
    guint16 n_extra = 0, *extra = NULL;
    if (TIFFGetField(tif, TIFFTAG_EXTRASAMPLES, &n_extra, &extra) && n_extra > 0 && extra)
        p->alpha = extra[0] == EXTRASAMPLE_ASSOCALPHA || extra[0] == EXTRASAMPLE_UNASSALPHA;

    /* JPEG-compressed YCbCr: let the codec convert to RGB and read it like RGB strips. */
    gboolean jpeg_rgb = p->compression == COMPRESSION_JPEG && p->photometric == PHOTOMETRIC_YCBCR;
    if (jpeg_rgb)
        TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
    p->use_rgba = !jpeg_rgb && (p->compression == COMPRESSION_OJPEG ||
                                p->photometric == PHOTOMETRIC_YCBCR ||
                                p->photometric == PHOTOMETRIC_CIELAB ||
                                p->photometric == PHOTOMETRIC_ICCLAB ||
                                p->photometric == PHOTOMETRIC_ITULAB ||
                                p->photometric == PHOTOMETRIC_LOGL ||
                                p->photometric == PHOTOMETRIC_LOGLUV);
    if (p->use_rgba) {
        /* Colour models only libtiff's RGBA interface converts: 8-bit RGB(A) display values. */
        char emsg[1024] = "", cbuf[32];
        if (!TIFFRGBAImageOK(tif, emsg))
            FAIL(CL_IMAGE_ERROR_UNSUPPORTED, "page %u (%s, %s compression) cannot be decoded: %s",
                 page + 1, photometric_name(p->photometric, nbuf, sizeof nbuf),
                 compression_name(p->compression, cbuf, sizeof cbuf), emsg);
        p->channels = p->alpha ? 4 : 3;
        p->layout = p->alpha ? CL_LAYOUT_RGBA : CL_LAYOUT_RGB;
        p->bits = p->bits_allocated = 8;
        p->sample_format = CL_SAMPLE_UINT;
        return TRUE;
    }

    guint bps = p->bps;
    switch (p->sample_tag) {
    case SAMPLEFORMAT_UINT:
    case SAMPLEFORMAT_VOID:
    case SAMPLEFORMAT_INT:
        p->is_signed = p->sample_tag == SAMPLEFORMAT_INT;
        p->sample_format = p->is_signed ? CL_SAMPLE_INT : CL_SAMPLE_UINT;
        if (bps == 8)
            p->kind = p->is_signed ? K_I8 : K_U8;
        else if (bps == 16)
            p->kind = p->is_signed ? K_I16 : K_U16;
        else if (bps == 24)
            p->kind = p->is_signed ? K_I24 : K_U24;
        else if (bps == 32)
            p->kind = p->is_signed ? K_I32 : K_U32;
        else if (bps == 64)
            p->kind = p->is_signed ? K_I64 : K_U64;
        else if (bps >= 1 && bps < 32)
            p->kind = K_BITS;
        else
            FAIL(CL_IMAGE_ERROR_UNSUPPORTED, "page %u has %u-bit integer samples, which ChangeLens "
                 "does not read", page + 1, bps);
        break;
    case SAMPLEFORMAT_IEEEFP:
        p->sample_format = CL_SAMPLE_FLOAT;
        if (bps == 16)
            p->kind = K_F16;
        else if (bps == 32)
            p->kind = K_F32;
        else if (bps == 64)
            p->kind = K_F64;
        else
            FAIL(CL_IMAGE_ERROR_UNSUPPORTED, "page %u has %u-bit floating-point samples; "
                 "ChangeLens reads 16, 32 and 64-bit floats", page + 1, bps);
        break;
    default:
        FAIL(CL_IMAGE_ERROR_UNSUPPORTED, "page %u has complex or unknown samples (SampleFormat %u),"
             " which ChangeLens does not read", page + 1, p->sample_tag);
    }
    p->bits = bps;
    p->bits_allocated = bps <= 8 ? 8 : bps <= 16 ? 16 : bps <= 32 ? 32 : 64;

    if (p->photometric == PHOTOMETRIC_PALETTE) {
        if (p->spp != 1 || p->sample_format != CL_SAMPLE_UINT || bps > 16)
            FAIL(CL_IMAGE_ERROR_UNSUPPORTED, "page %u is a palette image with %u samples of %u "
                 "bits; ChangeLens reads 1-sample palette images up to 16 bits", page + 1, p->spp,
                 bps);
        guint16 *r, *g, *b;
        if (!TIFFGetField(tif, TIFFTAG_COLORMAP, &r, &g, &b))
            FAIL(CL_IMAGE_ERROR_CORRUPT, "page %u is a palette image without a colour map",
                 page + 1);
        p->palette = TRUE;
        p->channels = 3;
        p->layout = CL_LAYOUT_RGB;
        p->bits = p->bits_allocated = 16; /* colour map entries as stored, 0..65535 */
        p->sample_format = CL_SAMPLE_UINT;
    } else {
        p->channels = p->spp;
        p->layout = layout_for(jpeg_rgb ? PHOTOMETRIC_RGB : p->photometric, p->spp, p->alpha);
    }
    if (p->spp > limits->max_channels)
        FAIL(CL_IMAGE_ERROR_TOO_LARGE, "page %u has %u samples per pixel; the limit is %u",
             page + 1, p->spp, limits->max_channels);

    /* Row geometry, ours and libtiff's; they must agree or we would misread the buffer. */
    gboolean separate = p->planar == PLANARCONFIG_SEPARATE && p->spp > 1;
    guint64 per_row = separate ? 1 : p->spp;
    p->tiled = TIFFIsTiled(tif);
    guint64 libtiff_row;
    if (p->tiled) {
        if (!TIFFGetField(tif, TIFFTAG_TILEWIDTH, &p->tile_w) ||
            !TIFFGetField(tif, TIFFTAG_TILELENGTH, &p->tile_h) || p->tile_w == 0 || p->tile_h == 0)
            FAIL(CL_IMAGE_ERROR_CORRUPT, "page %u is tiled but has no valid tile size", page + 1);
        /* A tile may be larger than a small image, but not absurdly (it is decoded whole). */
        guint64 area = (guint64)p->tile_w * p->tile_h;
        guint64 allowed = MAX((guint64)4 * p->width * p->height, (guint64)1 << 20);
        if (area > allowed || area > 4 * limits->max_pixels)
            FAIL(CL_IMAGE_ERROR_CORRUPT, "page %u has implausible %u × %u tiles for a %u × %u "
                 "image", page + 1, p->tile_w, p->tile_h, p->width, p->height);
        p->row_bytes = ((guint64)p->tile_w * per_row * bps + 7) / 8;
        libtiff_row = TIFFTileRowSize64(tif);
    } else {
        p->rows_per_strip = p->height;
        guint32 rps = 0;
        if (TIFFGetField(tif, TIFFTAG_ROWSPERSTRIP, &rps) && rps > 0 && rps < p->height)
            p->rows_per_strip = rps;
        p->row_bytes = ((guint64)p->width * per_row * bps + 7) / 8;
        libtiff_row = TIFFScanlineSize64(tif);
    }
    if (libtiff_row != p->row_bytes)
        FAIL(CL_IMAGE_ERROR_UNSUPPORTED, "page %u has a sample layout ChangeLens does not read "
             "(%" G_GUINT64_FORMAT " bytes per row where %" G_GUINT64_FORMAT " were expected)",
             page + 1, libtiff_row, p->row_bytes);
    return TRUE;
}

/* Pages after the first become frames only if they decode to the same shape. */
static gboolean page_same_shape(const Page *a, const Page *b)
{
    return a->width == b->width && a->height == b->height && a->channels == b->channels &&
           a->bits == b->bits && a->sample_format == b->sample_format && a->layout == b->layout &&
           a->use_rgba == b->use_rgba && a->palette == b->palette &&
           a->photometric == b->photometric;
}

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
        FAIL(CL_IMAGE_ERROR_CORRUPT, "page %u %s %u cannot be decoded, the file is truncated or "
             "damaged (%s)", page + 1, tile ? "tile" : "strip", index,
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

static gboolean read_pixels(TIFF *tif, TiffLog *log, const Page *p, float *frame, guint page,
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
            FAIL(CL_IMAGE_ERROR_CORRUPT, "page %u has %u tiles where %" G_GUINT64_FORMAT
                 " were expected", page + 1, TIFFNumberOfTiles(tif), across * down * n_planes);
        for (guint s = 0; s < n_planes; s++)
            for (guint32 ty = 0; ty < p->height; ty += MIN(p->tile_h, p->height - ty)) {
                for (guint32 tx = 0; tx < p->width; tx += MIN(p->tile_w, p->width - tx)) {
                    guint32 index = TIFFComputeTile(tif, tx, ty, 0, (guint16)s);
                    if (!read_block(tif, log, TRUE, index, buf, (tmsize_t)block_bytes, page,
                                    shown, error))
                        return FALSE;
                    /* edge tiles are stored whole: keep only the part inside the image */
                    guint32 rows = MIN(p->tile_h, p->height - ty);
                    guint32 cols = MIN(p->tile_w, p->width - tx);
                    for (guint32 r = 0; r < rows; r++)
                        scatter_row(frame, p, s, buf + r * p->row_bytes, tx, ty + r, cols);
                }
            }
    } else {
        guint32 per_plane = (guint32)(((guint64)p->height + p->rows_per_strip - 1) /
                                      p->rows_per_strip);
        if ((guint64)TIFFNumberOfStrips(tif) != (guint64)per_plane * n_planes)
            FAIL(CL_IMAGE_ERROR_CORRUPT, "page %u has %u strips where %" G_GUINT64_FORMAT
                 " were expected", page + 1, TIFFNumberOfStrips(tif),
                 (guint64)per_plane * n_planes);
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

static gboolean read_pixels_rgba(TIFF *tif, TiffLog *log, const Page *p, float *frame,
                                 guint page, const char *shown, GError **error)
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
        FAIL(CL_IMAGE_ERROR_CORRUPT, "page %u cannot be decoded, the file is truncated or damaged"
             " (%s)", page + 1, log->first_error ? log->first_error : "RGBA decoding failed");
    for (gsize i = 0; i < n; i++) {
        frame[i] = TIFFGetR(raster[i]);
        frame[n + i] = TIFFGetG(raster[i]);
        frame[2 * n + i] = TIFFGetB(raster[i]);
        if (p->channels == 4)
            frame[3 * n + i] = TIFFGetA(raster[i]);
    }
    return TRUE;
}

/* ---- metadata ---- */

static const TIFFField *find_field(TIFF *tif, guint32 tag)
{
    return TIFFFindField(tif, tag, TIFF_ANY); /* unlike TIFFFieldWithTag, silent when unknown */
}

/* ASCII tag value, copied (NULL when absent). */
static char *get_ascii(TIFF *tif, guint32 tag)
{
    const TIFFField *fip = find_field(tif, tag);
    if (!fip || TIFFFieldDataType(fip) != TIFF_ASCII)
        return NULL;
    char *s = NULL;
    if (TIFFFieldPassCount(fip)) {
        if (TIFFFieldReadCount(fip) == TIFF_VARIABLE2) {
            guint32 n = 0;
            if (TIFFGetField(tif, tag, &n, &s) && s)
                return g_strndup(s, n);
        } else {
            guint16 n = 0;
            if (TIFFGetField(tif, tag, &n, &s) && s)
                return g_strndup(s, n);
        }
        return NULL;
    }
    return TIFFGetField(tif, tag, &s) && s ? g_strdup(s) : NULL;
}

/* Array-valued tag (doubles or shorts) with its count, whichever count width libtiff uses. */
static gboolean get_array(TIFF *tif, guint32 tag, TIFFDataType type, guint32 *count, void **v)
{
    const TIFFField *fip = find_field(tif, tag);
    *count = 0;
    *v = NULL;
    if (!fip || TIFFFieldDataType(fip) != type || !TIFFFieldPassCount(fip))
        return FALSE;
    if (TIFFFieldReadCount(fip) == TIFF_VARIABLE2) {
        guint32 n = 0;
        if (!TIFFGetField(tif, tag, &n, v))
            return FALSE;
        *count = n;
    } else {
        guint16 n = 0;
        if (!TIFFGetField(tif, tag, &n, v))
            return FALSE;
        *count = n;
    }
    return *v != NULL && *count > 0;
}

static void add_meta_printf(ClImage *img, const char *key, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);
static void add_meta_printf(ClImage *img, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *v = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    cl_image_add_meta(img, key, v);
}

static void read_tags(TIFF *tif, ClImage *img, const Page *p)
{
    static const struct {
        guint32 tag;
        const char *key;
    } ascii[] = {
        { TIFFTAG_DOCUMENTNAME, "DocumentName" }, { TIFFTAG_IMAGEDESCRIPTION, "ImageDescription" },
        { TIFFTAG_MAKE, "Make" },                 { TIFFTAG_MODEL, "Model" },
        { TIFFTAG_PAGENAME, "PageName" },         { TIFFTAG_SOFTWARE, "Software" },
        { TIFFTAG_DATETIME, "DateTime" },         { TIFFTAG_ARTIST, "Artist" },
        { TIFFTAG_HOSTCOMPUTER, "HostComputer" }, { TIFFTAG_COPYRIGHT, "Copyright" },
        { TIFFTAG_GDAL_NODATA, "GDAL_NODATA" },   { TIFFTAG_GDAL_METADATA, "GDAL_METADATA" },
    };
    for (guint i = 0; i < G_N_ELEMENTS(ascii); i++) {
        g_autofree char *v = get_ascii(tif, ascii[i].tag);
        if (v) {
            g_strstrip(v);
            cl_image_add_meta(img, ascii[i].key, v);
        }
    }
    char nbuf[32];
    cl_image_add_meta(img, "Compression", compression_name(p->compression, nbuf, sizeof nbuf));
    guint16 predictor = 0;
    if (TIFFGetField(tif, TIFFTAG_PREDICTOR, &predictor) && predictor > 1)
        cl_image_add_meta(img, "Predictor",
                          predictor == PREDICTOR_HORIZONTAL      ? "horizontal differencing"
                          : predictor == PREDICTOR_FLOATINGPOINT ? "floating point"
                                                                 : "unknown");
    if (p->spp > 1)
        cl_image_add_meta(img, "PlanarConfiguration",
                          p->planar == PLANARCONFIG_SEPARATE ? "separate planes" : "contiguous");
    if (p->tiled)
        add_meta_printf(img, "Tiles", "%u × %u", p->tile_w, p->tile_h);
    else if (!p->use_rgba)
        add_meta_printf(img, "RowsPerStrip", "%u", p->rows_per_strip);
    cl_image_add_meta(img, "ByteOrder", TIFFIsBigEndian(tif) ? "big-endian" : "little-endian");
    if (TIFFIsBigTIFF(tif))
        cl_image_add_meta(img, "BigTIFF", "yes");
    float xres = 0, yres = 0;
    guint16 unit = RESUNIT_INCH;
    if (TIFFGetField(tif, TIFFTAG_XRESOLUTION, &xres)) {
        add_meta_printf(img, "XResolution", "%g", xres);
        if (TIFFGetField(tif, TIFFTAG_YRESOLUTION, &yres))
            add_meta_printf(img, "YResolution", "%g", yres);
        TIFFGetFieldDefaulted(tif, TIFFTAG_RESOLUTIONUNIT, &unit);
        cl_image_add_meta(img, "ResolutionUnit", unit == RESUNIT_CENTIMETER ? "centimetre"
                                                 : unit == RESUNIT_NONE     ? "none"
                                                                            : "inch");
    }
    guint16 orientation = 0;
    if (TIFFGetField(tif, TIFFTAG_ORIENTATION, &orientation) && orientation != ORIENTATION_TOPLEFT)
        add_meta_printf(img, "Orientation", "%u (rows and columns kept as stored)", orientation);
    guint16 n_extra = 0, *extra = NULL;
    if (TIFFGetField(tif, TIFFTAG_EXTRASAMPLES, &n_extra, &extra) && n_extra > 0 && extra) {
        GString *s = g_string_new(NULL);
        for (guint i = 0; i < n_extra && i < 16; i++)
            g_string_append_printf(s, "%s%s", i ? ", " : "",
                                   extra[i] == EXTRASAMPLE_ASSOCALPHA   ? "associated alpha"
                                   : extra[i] == EXTRASAMPLE_UNASSALPHA ? "unassociated alpha"
                                                                        : "unspecified");
        cl_image_add_meta(img, "ExtraSamples", s->str);
        g_string_free(s, TRUE);
    }
}

/* ---- GeoTIFF ---- */

/* libgeotiff trusts the GeoKeyDirectory more than a fuzzed file deserves: check it first. */
static gboolean geokeys_valid(TIFF *tif, const guint16 *dir, guint32 n)
{
    if (n < 4 || n > 4 + 1000 || dir[0] != 1) /* version 1; libgeotiff keeps at most 1000 values */
        return FALSE;
    guint32 n_keys = dir[3];
    if (n_keys >= 250 || 4 + 4 * n_keys > n)
        return FALSE;
    guint32 n_doubles = 0;
    void *doubles = NULL;
    get_array(tif, TIFFTAG_GEODOUBLEPARAMS, TIFF_DOUBLE, &n_doubles, &doubles);
    if (n_doubles > 1000)
        return FALSE;
    g_autofree char *ascii = get_ascii(tif, TIFFTAG_GEOASCIIPARAMS);
    guint32 ascii_len = ascii ? (guint32)strlen(ascii) : 0;
    for (guint32 k = 0; k < n_keys; k++) {
        const guint16 *e = dir + 4 + 4 * k; /* key id, location, count, value or offset */
        guint32 count = e[2], off = e[3];
        switch (e[1]) {
        case 0:
            if (count != 1)
                return FALSE;
            break;
        case TIFFTAG_GEOKEYDIRECTORY:
            if (off + count > n)
                return FALSE;
            break;
        case TIFFTAG_GEODOUBLEPARAMS:
            if (!doubles || off + count > n_doubles)
                return FALSE;
            break;
        case TIFFTAG_GEOASCIIPARAMS:
            if (!ascii || off > ascii_len || off + count > ascii_len + 1)
                return FALSE;
            break;
        default:
            return FALSE;
        }
    }
    return TRUE;
}

static const char *crs_known_name(int epsg, char *buf, gsize n)
{
    switch (epsg) {
    case 4326: return "WGS 84";
    case 4258: return "ETRS89";
    case 4269: return "NAD83";
    case 4267: return "NAD27";
    case 3857: return "WGS 84 / Pseudo-Mercator";
    case 3035: return "ETRS89 / LAEA Europe";
    }
    if (epsg >= 32601 && epsg <= 32660)
        g_snprintf(buf, n, "WGS 84 / UTM zone %dN", epsg - 32600);
    else if (epsg >= 32701 && epsg <= 32760)
        g_snprintf(buf, n, "WGS 84 / UTM zone %dS", epsg - 32700);
    else if (epsg >= 25828 && epsg <= 25838)
        g_snprintf(buf, n, "ETRS89 / UTM zone %dN", epsg - 25800);
    else if (epsg >= 26901 && epsg <= 26923)
        g_snprintf(buf, n, "NAD83 / UTM zone %dN", epsg - 26900);
    else
        return NULL;
    return buf;
}

static char *geokey_short_text(geokey_t key, guint v)
{
    char nbuf[64];
    const char *name = NULL;
    if (v == KvUserDefined)
        name = "user-defined";
    else if (key == GTModelTypeGeoKey)
        name = v == ModelTypeProjected    ? "projected"
               : v == ModelTypeGeographic ? "geographic"
               : v == ModelTypeGeocentric ? "geocentric"
                                          : NULL;
    else if (key == GTRasterTypeGeoKey)
        name = v == RasterPixelIsArea    ? "PixelIsArea"
               : v == RasterPixelIsPoint ? "PixelIsPoint"
                                         : NULL;
    else if (key == ProjectedCSTypeGeoKey || key == GeographicTypeGeoKey) {
        const char *crs = crs_known_name((int)v, nbuf, sizeof nbuf);
        return g_strdup_printf("EPSG:%u%s%s", v, crs ? " " : "", crs ? crs : "");
    }
    else if (key == ProjLinearUnitsGeoKey || key == GeogLinearUnitsGeoKey ||
             key == VerticalUnitsGeoKey || key == GeogAngularUnitsGeoKey)
        name = v == 9001 ? "metre" : v == 9002 ? "foot" : v == 9003 ? "US survey foot"
               : v == 9101 ? "radian" : v == 9102 ? "degree" : NULL;
    return name ? g_strdup_printf("%u (%s)", v, name) : g_strdup_printf("%u", v);
}

/* Every GeoKey present, as metadata, in key order. */
static void geokeys_to_meta(GTIF *gtif, ClImage *img)
{
    for (guint key = 1; key < 65535; key++) {
        int size = 0;
        tagtype_t type = TYPE_UNKNOWN;
        int count = GTIFKeyInfo(gtif, (geokey_t)key, &size, &type);
        if (count <= 0)
            continue;
        const char *kname = GTIFKeyNameEx(gtif, (geokey_t)key);
        g_autofree char *value = NULL;
        if (type == TYPE_ASCII) {
            char buf[1024] = "";
            GTIFKeyGetASCII(gtif, (geokey_t)key, buf, sizeof buf);
            gsize l = strlen(buf);
            while (l > 0 && buf[l - 1] == '|') /* GeoASCIIParams separator */
                buf[--l] = '\0';
            value = g_strdup(buf);
        } else if (type == TYPE_SHORT) {
            guint16 v[16];
            int n = GTIFKeyGetSHORT(gtif, (geokey_t)key, v, 0, MIN(count, 16));
            if (n == 1) {
                value = geokey_short_text((geokey_t)key, v[0]);
            } else {
                GString *s = g_string_new(NULL);
                for (int i = 0; i < n; i++)
                    g_string_append_printf(s, "%s%u", i ? " " : "", v[i]);
                value = g_string_free(s, FALSE);
            }
        } else if (type == TYPE_DOUBLE) {
            double v[16];
            int n = GTIFKeyGetDOUBLE(gtif, (geokey_t)key, v, 0, MIN(count, 16));
            GString *s = g_string_new(NULL);
            for (int i = 0; i < n; i++)
                g_string_append_printf(s, "%s%.15g", i ? " " : "", v[i]);
            value = g_string_free(s, FALSE);
        }
        if (value)
            cl_image_add_meta(img, kname, value);
    }
}

static void set_transform(ClGeoInfo *g, const double t[6])
{
    memcpy(g->transform, t, sizeof g->transform);
    g->has_transform = TRUE;
    g->origin[0] = t[0];
    g->origin[1] = t[3];
    g->pixel_size[0] = hypot(t[1], t[4]);
    g->pixel_size[1] = hypot(t[2], t[5]);
}

static void read_geo(TIFF *tif, ClImage *img, TiffLog *log)
{
    guint32 n_tie = 0, n_scale = 0, n_mat = 0, n_dir = 0;
    void *vtie, *vscale, *vmat, *vdir;
    gboolean has_tie = get_array(tif, TIFFTAG_GEOTIEPOINTS, TIFF_DOUBLE, &n_tie, &vtie);
    gboolean has_scale = get_array(tif, TIFFTAG_GEOPIXELSCALE, TIFF_DOUBLE, &n_scale, &vscale);
    gboolean has_mat = get_array(tif, TIFFTAG_GEOTRANSMATRIX, TIFF_DOUBLE, &n_mat, &vmat);
    gboolean has_dir = get_array(tif, TIFFTAG_GEOKEYDIRECTORY, TIFF_SHORT, &n_dir, &vdir);
    if (!has_tie && !has_scale && !has_mat && !has_dir)
        return;
    const double *tie = vtie, *scale = vscale, *mat = vmat;
    ClGeoInfo *g = img->geo = g_new0(ClGeoInfo, 1);

    guint16 model = 0, raster = 0, pcs = 0, gcs = 0;
    char citation[512] = "";
    if (has_dir && geokeys_valid(tif, vdir, n_dir)) {
        GTIF *gtif = GTIFNewEx(tif, on_geo_error, log);
        if (gtif) {
            GTIFKeyGetSHORT(gtif, GTModelTypeGeoKey, &model, 0, 1);
            GTIFKeyGetSHORT(gtif, GTRasterTypeGeoKey, &raster, 0, 1);
            GTIFKeyGetSHORT(gtif, ProjectedCSTypeGeoKey, &pcs, 0, 1);
            GTIFKeyGetSHORT(gtif, GeographicTypeGeoKey, &gcs, 0, 1);
            if (!GTIFKeyGetASCII(gtif, GTCitationGeoKey, citation, sizeof citation) &&
                !GTIFKeyGetASCII(gtif, PCSCitationGeoKey, citation, sizeof citation))
                GTIFKeyGetASCII(gtif, GeogCitationGeoKey, citation, sizeof citation);
            geokeys_to_meta(gtif, img);
            GTIFFree(gtif);
        } else {
            cl_image_add_meta(img, "GeoKeyDirectory", "unreadable, ignored");
        }
    } else if (has_dir) {
        cl_image_add_meta(img, "GeoKeyDirectory", "malformed, ignored");
    }

    gboolean pcs_ok = pcs > 0 && pcs != KvUserDefined, gcs_ok = gcs > 0 && gcs != KvUserDefined;
    if (model == ModelTypeGeographic)
        g->epsg = gcs_ok ? gcs : 0;
    else
        g->epsg = pcs_ok ? pcs : gcs_ok ? gcs : 0;
    gsize cl = strlen(citation);
    while (cl > 0 && (citation[cl - 1] == '|' || citation[cl - 1] == ' '))
        citation[--cl] = '\0';
    char nbuf[64];
    const char *known = g->epsg ? crs_known_name(g->epsg, nbuf, sizeof nbuf) : NULL;
    if (cl > 0)
        g->crs_name = g_utf8_make_valid(citation, -1);
    else if (known)
        g->crs_name = g_strdup(known);
    g->pixel_is_point = raster == RasterPixelIsPoint;

    double t[6];
    gboolean have = FALSE;
    if (has_mat && n_mat >= 16) {
        /* ModelTransformation: a 4×4 row-major matrix mapping (col, row, 0, 1) to (x, y, z, 1) */
        double m[6] = { mat[3], mat[0], mat[1], mat[7], mat[4], mat[5] };
        memcpy(t, m, sizeof t);
        have = TRUE;
        GString *s = g_string_new(NULL);
        for (guint i = 0; i < 16; i++)
            g_string_append_printf(s, "%s%.15g", i ? " " : "", mat[i]);
        cl_image_add_meta(img, "ModelTransformation", s->str);
        g_string_free(s, TRUE);
    } else if (has_tie && n_tie >= 6 && has_scale && n_scale >= 2) {
        /* first tie point (I, J, K) -> (X, Y, Z) and the pixel scale; rows go south */
        double m[6] = { tie[3] - tie[0] * scale[0], scale[0], 0,
                        tie[4] + tie[1] * scale[1], 0, -scale[1] };
        memcpy(t, m, sizeof t);
        have = TRUE;
    }
    if (has_tie && n_tie >= 6)
        add_meta_printf(img, "ModelTiepoint", "(%.15g, %.15g, %.15g) -> (%.15g, %.15g, %.15g)%s",
                        tie[0], tie[1], tie[2], tie[3], tie[4], tie[5],
                        n_tie >= 12 ? " and more" : "");
    if (has_scale && n_scale >= 2)
        add_meta_printf(img, "ModelPixelScale", "%.15g %.15g %.15g", scale[0], scale[1],
                        n_scale >= 3 ? scale[2] : 0.0);
    if (have) {
        /* PixelIsPoint ties pixel centres: shift by half a pixel so the transform (like GDAL's)
         * and origin refer to the upper-left corner of pixel (0, 0). */
        if (g->pixel_is_point) {
            t[0] -= 0.5 * t[1] + 0.5 * t[2];
            t[3] -= 0.5 * t[4] + 0.5 * t[5];
        }
        gboolean finite = TRUE;
        for (guint i = 0; i < 6; i++)
            finite = finite && isfinite(t[i]);
        if (finite)
            set_transform(g, t);
    }
}

/* ---- the loader ---- */

static ClImage *load_open_tiff(TIFF *tif, TiffLog *log, const char *shown,
                               const ClImageLimits *limits, GError **error)
{
    Page first;
    if (!page_describe(tif, 0, limits, &first, shown, error))
        return NULL;
    /* Refuse a huge first page before walking the rest of the file. */
    if (!cl_image_check_limits(limits, first.width, first.height, 1, first.channels, error)) {
        g_prefix_error(error, "%s: ", shown);
        return NULL;
    }
    g_autoptr(ClImage) img = cl_image_new(CL_IMAGE_FORMAT_TIFF);
    read_tags(tif, img, &first);
    read_geo(tif, img, log);

    /* Walk the page chain with a bound (cycles are caught by libtiff). Pages shaped unlike the
     * first (thumbnails, overviews, masks) are skipped with a note rather than refusing the file:
     * many GeoTIFFs and scanner files carry such extra pages. */
    g_autoptr(GArray) use = g_array_new(FALSE, TRUE, sizeof(gboolean));
    gboolean yes = TRUE;
    g_array_append_val(use, yes);
    guint n_frames = 1;
    GString *skipped = g_string_new(NULL);
    while (!TIFFLastDirectory(tif)) {
        if (use->len >= limits->max_frames) {
            g_string_free(skipped, TRUE);
            g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE,
                        "%s: has more than %u pages; the limit is %u", shown, limits->max_frames,
                        limits->max_frames);
            return NULL;
        }
        if (!TIFFReadDirectory(tif)) {
            g_string_free(skipped, TRUE);
            g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT,
                        "%s: page %u cannot be read, the file is truncated or damaged (%s)", shown,
                        use->len + 1, log->first_error ? log->first_error : "bad directory");
            return NULL;
        }
        Page p;
        g_autoptr(GError) why = NULL;
        gboolean ok = page_describe(tif, use->len, limits, &p, shown, &why);
        if (ok && !page_same_shape(&first, &p)) {
            ok = FALSE;
            char nbuf[32];
            why = g_error_new(CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNSUPPORTED,
                              "%u × %u, %u × %u-bit %s, %s", p.width, p.height, p.channels, p.bits,
                              cl_sample_format_name(p.sample_format),
                              photometric_name(p.photometric, nbuf, sizeof nbuf));
        }
        if (!ok) {
            const char *msg = why->message;
            if (g_str_has_prefix(msg, shown) && msg[strlen(shown)] == ':')
                msg += strlen(shown) + 2;
            g_string_append_printf(skipped, "%spage %u (%s)", skipped->len ? "; " : "",
                                   use->len + 1, msg);
        }
        g_array_append_val(use, ok);
        n_frames += ok;
    }
    guint n_pages = use->len;
    if (skipped->len)
        add_meta_printf(img, "SkippedPages", "%s — not loaded: they differ from page 1 (%u × %u, "
                        "%u × %u-bit)", skipped->str, first.width, first.height, first.channels,
                        first.bits);
    g_string_free(skipped, TRUE);
    if (n_pages > 1)
        add_meta_printf(img, "Pages", "%u", n_pages);

    if (!cl_image_check_limits(limits, first.width, first.height, n_frames, first.channels,
                               error)) {
        g_prefix_error(error, "%s: ", shown);
        return NULL;
    }
    char nbuf[32];
    img->width = first.width;
    img->height = first.height;
    img->channels = first.channels;
    img->layout = first.layout;
    img->bits = first.bits;
    img->bits_allocated = first.bits_allocated;
    img->sample_format = first.sample_format;
    img->photometric = g_strdup(photometric_name(first.photometric, nbuf, sizeof nbuf));
    if (!cl_image_alloc_frames(img, n_frames, error)) {
        g_prefix_error(error, "%s: ", shown);
        return NULL;
    }

    if (n_pages > 1 && !TIFFSetDirectory(tif, 0)) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT,
                    "%s: cannot return to the first page (%s)", shown,
                    log->first_error ? log->first_error : "bad directory");
        return NULL;
    }
    guint frame = 0;
    for (guint d = 0; d < n_pages; d++) {
        if (d > 0 && !TIFFReadDirectory(tif)) {
            g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT,
                        "%s: page %u cannot be read (%s)", shown, d + 1,
                        log->first_error ? log->first_error : "bad directory");
            return NULL;
        }
        if (!g_array_index(use, gboolean, d))
            continue;
        Page p;
        if (!page_describe(tif, d, limits, &p, shown, error))
            return NULL;
        float *data = ((ClFrame *)g_ptr_array_index(img->frames, frame))->data;
        gboolean ok = p.use_rgba ? read_pixels_rgba(tif, log, &p, data, d, shown, error)
                                 : read_pixels(tif, log, &p, data, d, shown, error);
        if (!ok)
            return NULL;
        frame++;
    }
    if (log->first_warning)
        add_meta_printf(img, "TIFFWarnings", "%u, first: %s", log->n_warnings, log->first_warning);
    return g_steal_pointer(&img);
}

ClImage *cl_image_load_tiff(const guint8 *data, gsize len, const char *name,
                            const ClImageLimits *limits, GError **error)
{
    const char *shown = name ? name : "image";
    ClImageLimits def;
    if (!limits) {
        cl_image_limits_init(&def);
        limits = &def;
    }
    tiff_global_init();
    MemSrc src = { data, len, 0 };
    TiffLog log = { .name = shown };
    TIFF *tif;
#if CL_TIFF_PER_HANDLE_ERRORS
    TIFFOpenOptions *opts = TIFFOpenOptionsAlloc();
    TIFFOpenOptionsSetErrorHandlerExtR(opts, on_tiff_error, &log);
    TIFFOpenOptionsSetWarningHandlerExtR(opts, on_tiff_warning, &log);
    /* libtiff's own buffers (strip arrays, codec state) stay within what the limits allow */
    guint64 max_alloc = CLAMP(limits->max_pixels * 16, (guint64)64 << 20, (guint64)2 << 30);
    TIFFOpenOptionsSetMaxSingleMemAlloc(opts, (tmsize_t)max_alloc);
    tif = TIFFClientOpenExt(shown, "rM", &src, mem_read, mem_write, mem_seek, mem_close, mem_size,
                            mem_map, mem_unmap, opts);
    TIFFOpenOptionsFree(opts);
#else
    g_private_set(&current_log, &log);
    tif = TIFFClientOpen(shown, "rM", &src, mem_read, mem_write, mem_seek, mem_close, mem_size,
                         mem_map, mem_unmap);
#endif
    ClImage *img = NULL;
    if (!tif) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT,
                    "%s: not a readable TIFF file (%s)", shown,
                    log.first_error ? log.first_error : "libtiff refused it");
    } else {
        img = load_open_tiff(tif, &log, shown, limits, error);
        TIFFClose(tif);
    }
#if !CL_TIFF_PER_HANDLE_ERRORS
    g_private_set(&current_log, NULL);
#endif
    log_clear(&log);
    return img;
}
