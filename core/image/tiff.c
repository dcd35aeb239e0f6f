/* tiff.c - TIFF, BigTIFF and GeoTIFF decoder: libtiff reading from memory, page by page (the
 * pixels in tiff-pixels.c, tags and GeoTIFF keys in tiff-tags.c). */
#include "image/tiff-private.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <xtiffio.h>

/* libtiff 4.5 (20221213) lets each TIFF* carry its own error handlers; older ones only have
 * process-wide handlers, which we route to the loading thread's log. */
#if TIFFLIB_VERSION >= 20221213
#define CL_TIFF_PER_HANDLE_ERRORS 1
#else
#define CL_TIFF_PER_HANDLE_ERRORS 0
#endif

/* ---- messages ---- */

void cl_tiff_log_add(TiffLog *log, gboolean is_error, const char *module, const char *fmt,
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
                    ? g_strdup_printf("%s: %s", module, msg)
                    : g_steal_pointer(&msg);
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
    cl_tiff_log_add(user, TRUE, module, fmt, ap);
    return 1; /* handled: do not call the global (stderr) handler */
}

static int on_tiff_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
    G_GNUC_PRINTF(4, 0);
static int on_tiff_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    cl_tiff_log_add(user, FALSE, module, fmt, ap);
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
        cl_tiff_log_add(log, TRUE, module, fmt, ap);
    else if (prev_error)
        prev_error(h, module, fmt, ap);
}

static void on_global_warning(thandle_t h, const char *module, const char *fmt, va_list ap)
    G_GNUC_PRINTF(3, 0);
static void on_global_warning(thandle_t h, const char *module, const char *fmt, va_list ap)
{
    TiffLog *log = g_private_get(&current_log);
    if (log)
        cl_tiff_log_add(log, FALSE, module, fmt, ap);
    else if (prev_warning)
        prev_warning(h, module, fmt, ap);
}
#endif

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

static void mem_unmap(thandle_t h, void *base, toff_t size) {}

/* ---- one page (IFD): what it holds and how it decodes ---- */

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

const char *cl_tiff_compression_name(guint16 c, char *buf, gsize n)
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

/* The sample kind, bits and format of p's samples (SampleFormat and BitsPerSample). */
static gboolean page_sample_kind(Page *p, guint page, const char *shown, GError **error)
{
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
            FAIL(CL_IMAGE_ERROR_UNSUPPORTED,
                 "page %u has %u-bit integer samples, which ChangeLens "
                 "does not read",
                 page + 1, bps);
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
            FAIL(CL_IMAGE_ERROR_UNSUPPORTED,
                 "page %u has %u-bit floating-point samples; "
                 "ChangeLens reads 16, 32 and 64-bit floats",
                 page + 1, bps);
        break;
    default:
        FAIL(CL_IMAGE_ERROR_UNSUPPORTED,
             "page %u has complex or unknown samples (SampleFormat %u),"
             " which ChangeLens does not read",
             page + 1, p->sample_tag);
    }
    p->bits = bps;
    p->bits_allocated = bps <= 8 ? 8 : bps <= 16 ? 16 : bps <= 32 ? 32 : 64;
    return TRUE;
}

/* Row geometry, ours and libtiff's; they must agree or we would misread the buffer. */
static gboolean page_row_geometry(TIFF *tif, guint page, const ClImageLimits *limits, Page *p,
                                  const char *shown, GError **error)
{
    guint bps = p->bps;
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
            FAIL(CL_IMAGE_ERROR_CORRUPT,
                 "page %u has implausible %u × %u tiles for a %u × %u "
                 "image",
                 page + 1, p->tile_w, p->tile_h, p->width, p->height);
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
        FAIL(CL_IMAGE_ERROR_UNSUPPORTED,
             "page %u has a sample layout ChangeLens does not read "
             "(%" G_GUINT64_FORMAT " bytes per row where %" G_GUINT64_FORMAT " were expected)",
             page + 1, libtiff_row, p->row_bytes);
    return TRUE;
}

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
        FAIL(CL_IMAGE_ERROR_UNSUPPORTED,
             "page %u is a volume (ImageDepth %u), which ChangeLens "
             "does not read",
             page + 1, depth);
    if (!TIFFIsCODECConfigured(p->compression))
        FAIL(CL_IMAGE_ERROR_UNSUPPORTED,
             "uses %s compression, which this build of libtiff "
             "cannot decode",
             cl_tiff_compression_name(p->compression, nbuf, sizeof nbuf));
    guint16 n_extra = 0, *extra = NULL;
    if (TIFFGetField(tif, TIFFTAG_EXTRASAMPLES, &n_extra, &extra) && n_extra > 0 && extra)
        p->alpha = extra[0] == EXTRASAMPLE_ASSOCALPHA || extra[0] == EXTRASAMPLE_UNASSALPHA;

    /* JPEG-compressed YCbCr: let the codec convert to RGB and read it like RGB strips. */
    gboolean jpeg_rgb = p->compression == COMPRESSION_JPEG && p->photometric == PHOTOMETRIC_YCBCR;
    if (jpeg_rgb)
        TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
    p->use_rgba = !jpeg_rgb &&
                  (p->compression == COMPRESSION_OJPEG || p->photometric == PHOTOMETRIC_YCBCR ||
                   p->photometric == PHOTOMETRIC_CIELAB || p->photometric == PHOTOMETRIC_ICCLAB ||
                   p->photometric == PHOTOMETRIC_ITULAB || p->photometric == PHOTOMETRIC_LOGL ||
                   p->photometric == PHOTOMETRIC_LOGLUV);
    if (p->use_rgba) {
        /* Colour models only libtiff's RGBA interface converts: 8-bit RGB(A) display values. */
        char emsg[1024] = "", cbuf[32];
        if (!TIFFRGBAImageOK(tif, emsg))
            FAIL(CL_IMAGE_ERROR_UNSUPPORTED, "page %u (%s, %s compression) cannot be decoded: %s",
                 page + 1, photometric_name(p->photometric, nbuf, sizeof nbuf),
                 cl_tiff_compression_name(p->compression, cbuf, sizeof cbuf), emsg);
        p->channels = p->alpha ? 4 : 3;
        p->layout = p->alpha ? CL_LAYOUT_RGBA : CL_LAYOUT_RGB;
        p->bits = p->bits_allocated = 8;
        p->sample_format = CL_SAMPLE_UINT;
        return TRUE;
    }

    if (!page_sample_kind(p, page, shown, error))
        return FALSE;
    guint bps = p->bps;

    if (p->photometric == PHOTOMETRIC_PALETTE) {
        if (p->spp != 1 || p->sample_format != CL_SAMPLE_UINT || bps > 16)
            FAIL(CL_IMAGE_ERROR_UNSUPPORTED,
                 "page %u is a palette image with %u samples of %u "
                 "bits; ChangeLens reads 1-sample palette images up to 16 bits",
                 page + 1, p->spp, bps);
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

    return page_row_geometry(tif, page, limits, p, shown, error);
}

/* Pages after the first become frames only if they decode to the same shape. */
static gboolean page_same_shape(const Page *a, const Page *b)
{
    return a->width == b->width && a->height == b->height && a->channels == b->channels &&
           a->bits == b->bits && a->sample_format == b->sample_format && a->layout == b->layout &&
           a->use_rgba == b->use_rgba && a->palette == b->palette &&
           a->photometric == b->photometric;
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
    cl_tiff_read_tags(tif, img, &first);
    cl_tiff_read_geo(tif, img, log);

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
        cl_tiff_add_meta_printf(
            img, "SkippedPages", "%s — not loaded: they differ from page 1 (%u × %u, %u × %u-bit)",
            skipped->str, first.width, first.height, first.channels, first.bits);
    g_string_free(skipped, TRUE);
    if (n_pages > 1)
        cl_tiff_add_meta_printf(img, "Pages", "%u", n_pages);

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
        gboolean ok = p.use_rgba ? cl_tiff_read_pixels_rgba(tif, log, &p, data, d, shown, error)
                                 : cl_tiff_read_pixels(tif, log, &p, data, d, shown, error);
        if (!ok)
            return NULL;
        frame++;
    }
    if (log->first_warning)
        cl_tiff_add_meta_printf(img, "TIFFWarnings", "%u, first: %s", log->n_warnings,
                                log->first_warning);
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
