/* pixbuf.c - JPEG, WebP, BMP and GIF through GdkPixbufLoader: 8-bit RGB(A), first frame, limits
 * checked when the size is announced, partial decodes refused. */
#include "image/loaders.h"

#include <gdk-pixbuf/gdk-pixbuf.h>
#include <string.h>

static guint16 le16(const guint8 *p)
{
    return (guint16)(p[0] | (p[1] << 8));
}

static guint32 le32(const guint8 *p)
{
    return (guint32)p[0] | ((guint32)p[1] << 8) | ((guint32)p[2] << 16) | ((guint32)p[3] << 24);
}

/* libjpeg only warns about a premature end, and gdk-pixbuf then returns the image with grey
 * where data was missing. Walk the marker segments by their
 * lengths and the entropy-coded data after each SOS (where 0xFF is always followed by a stuffed
 * 0x00 or an RSTn) until EOI. FALSE when the data ends first. */
static gboolean jpeg_has_eoi(const guint8 *d, gsize len)
{
    gsize pos = 2;
    while (pos + 2 <= len) {
        if (d[pos] != 0xFF)
            return FALSE; /* not at a marker: malformed, gdk-pixbuf says how */
        guint8 m = d[pos + 1];
        if (m == 0xFF) {
            pos++;
            continue;
        }
        if (m == 0xD9)
            return TRUE;
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {
            pos += 2;
            continue;
        }
        if (pos + 4 > len)
            return FALSE;
        gsize seg = ((gsize)d[pos + 2] << 8) | d[pos + 3];
        if (seg < 2 || seg > len - pos - 2)
            return FALSE;
        pos += 2 + seg;
        if (m != 0xDA)
            continue;
        /* entropy-coded data up to the next real marker */
        while (pos + 1 < len && !(d[pos] == 0xFF && d[pos + 1] != 0x00 &&
                                  !(d[pos + 1] >= 0xD0 && d[pos + 1] <= 0xD7)))
            pos++;
        if (pos + 1 >= len)
            return FALSE;
    }
    return FALSE;
}

/* gdk-pixbuf's BMP loader keeps a half-read bitmap without an error. Uncompressed pixel
 * data has a size known from the header; RLE data must reach its end-of-bitmap code. Returns
 * FALSE only when the data is provably short; odd headers are left to gdk-pixbuf. */
static gboolean bmp_is_complete(const guint8 *d, gsize len)
{
    if (len < 18)
        return FALSE;
    guint32 off = le32(d + 10), hdr = le32(d + 14);
    guint64 w, h, bpp, compression = 0;
    if (hdr == 12) {
        if (len < 26)
            return FALSE;
        w = le16(d + 18);
        h = le16(d + 20);
        bpp = le16(d + 24);
    } else if (hdr >= 40) {
        if (len < 34)
            return FALSE;
        w = le32(d + 18);
        gint32 sh = (gint32)le32(d + 22);
        h = sh < 0 ? (guint64)(-(gint64)sh) : (guint64)sh;
        bpp = le16(d + 28);
        compression = le32(d + 30);
    } else {
        return TRUE;
    }
    if (off >= len)
        return FALSE;
    if (compression == 0 || compression == 3 || compression == 6) {
        guint64 row = (w * bpp + 31) / 32 * 4;
        return w == 0 || h == 0 || bpp == 0 || (row <= len && row * h <= len - off);
    }
    if (compression == 1 || compression == 2) { /* RLE8, RLE4: walk to end of bitmap (0, 1) */
        gsize pos = off;
        while (pos + 2 <= len) {
            guint8 count = d[pos], code = d[pos + 1];
            pos += 2;
            if (count != 0 || code == 0)
                continue; /* encoded run, or end of line */
            if (code == 1)
                return TRUE;
            if (code == 2) { /* delta */
                pos += 2;
                continue;
            }
            gsize bytes = compression == 1 ? code : (code + 1u) / 2; /* absolute run */
            pos += bytes + (bytes & 1);
        }
        return FALSE;
    }
    return TRUE;
}

/* Skips GIF data sub-blocks starting at *pos; FALSE if the data ends first. */
static gboolean gif_skip_sub_blocks(const guint8 *d, gsize len, gsize *pos)
{
    while (*pos < len) {
        guint n = d[(*pos)++];
        if (n == 0)
            return TRUE;
        if (n > len - *pos)
            return FALSE;
        *pos += n;
    }
    return FALSE;
}

/* Counts the image descriptors of a GIF (gdk-pixbuf's animation API has no frame count);
 * *bad is set if a frame is empty or reaches outside the logical screen, which gdk-pixbuf
 * 2.42's GIF module does not clip: it trips its own assertions compositing such a frame. */
static guint gif_count_frames(const guint8 *d, gsize len, gboolean *bad)
{
    *bad = FALSE;
    if (len < 13)
        return 0;
    guint screen_w = le16(d + 6), screen_h = le16(d + 8);
    gsize pos = 13;
    if (d[10] & 0x80)
        pos += 3u << ((d[10] & 7) + 1);
    guint frames = 0;
    while (pos < len) {
        guint8 block = d[pos++];
        if (block == 0x3B) { /* trailer */
            break;
        } else if (block == 0x21) { /* extension: label, then sub-blocks */
            pos++;
            if (!gif_skip_sub_blocks(d, len, &pos))
                break;
        } else if (block == 0x2C) { /* image: descriptor, local table, LZW size, sub-blocks */
            if (len - pos < 9)
                break;
            guint8 packed = d[pos + 8];
            guint x = le16(d + pos), y = le16(d + pos + 2);
            guint w = le16(d + pos + 4), h = le16(d + pos + 6);
            if (w == 0 || h == 0 || x + w > screen_w || y + h > screen_h)
                *bad = TRUE;
            pos += 9;
            if (packed & 0x80)
                pos += 3u << ((packed & 7) + 1);
            pos++; /* LZW minimum code size */
            if (pos > len || !gif_skip_sub_blocks(d, len, &pos))
                break;
            frames++;
        }
        /* any other byte is skipped, as gdk-pixbuf's GIF parser does */
    }
    return frames;
}

/* Canvas size from the first chunk of a WebP file (VP8X, VP8L or VP8); FALSE if not found. */
static gboolean webp_size(const guint8 *d, gsize len, guint64 *w, guint64 *h)
{
    if (len < 30)
        return FALSE;
    const guint8 *p = d + 20; /* payload of the first chunk */
    if (memcmp(d + 12, "VP8X", 4) == 0) {
        *w = 1 + (p[4] | ((guint32)p[5] << 8) | ((guint32)p[6] << 16));
        *h = 1 + (p[7] | ((guint32)p[8] << 8) | ((guint32)p[9] << 16));
        return TRUE;
    }
    if (memcmp(d + 12, "VP8L", 4) == 0 && p[0] == 0x2F) {
        guint32 bits = le32(p + 1);
        *w = 1 + (bits & 0x3FFF);
        *h = 1 + ((bits >> 14) & 0x3FFF);
        return TRUE;
    }
    if (memcmp(d + 12, "VP8 ", 4) == 0 && p[3] == 0x9D && p[4] == 0x01 && p[5] == 0x2A) {
        *w = le16(p + 6) & 0x3FFF;
        *h = le16(p + 8) & 0x3FFF;
        return TRUE;
    }
    return FALSE;
}

/* Counts ANMF (animation frame) chunks of a WebP RIFF container; 0 for a still image. */
static guint webp_count_frames(const guint8 *d, gsize len)
{
    guint frames = 0;
    gsize pos = 12;
    while (len >= 8 && pos <= len - 8) {
        guint32 n = le32(d + pos + 4);
        if (memcmp(d + pos, "ANMF", 4) == 0)
            frames++;
        if ((guint64)n + (n & 1) > len - pos - 8)
            break;
        pos += 8 + (gsize)n + (n & 1);
    }
    return frames;
}

/* Number of colour components in the first SOF segment of a JPEG, 0 if not found. */
static guint jpeg_components(const guint8 *d, gsize len, guint8 *sof_marker)
{
    gsize pos = 2;
    while (pos + 4 <= len) {
        if (d[pos] != 0xFF)
            return 0;
        guint8 m = d[pos + 1];
        if (m == 0xFF) { /* fill byte */
            pos++;
            continue;
        }
        if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {
            pos += 2;
            continue;
        }
        if (m == 0xDA || m == 0xD9) /* start of scan / end of image: no SOF before it */
            return 0;
        guint seg = ((guint)d[pos + 2] << 8) | d[pos + 3];
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            if (seg < 8 || pos + 10 > len)
                return 0;
            *sof_marker = m;
            return d[pos + 9];
        }
        if (seg < 2)
            return 0;
        pos += 2 + seg;
    }
    return 0;
}

static const char *loader_type(ClImageFormat format)
{
    switch (format) {
    case CL_IMAGE_FORMAT_JPEG: return "jpeg";
    case CL_IMAGE_FORMAT_WEBP: return "webp";
    case CL_IMAGE_FORMAT_BMP: return "bmp";
    case CL_IMAGE_FORMAT_GIF: return "gif";
    default: return NULL;
    }
}

/* The JPEG, BMP and WebP loaders fill in what a truncated file lacks (grey, black, nothing) and
 * report success, so completeness is judged from the file's own structure. */
static gboolean file_is_complete(ClImageFormat format, const guint8 *data, gsize len)
{
    switch (format) {
    case CL_IMAGE_FORMAT_JPEG: return jpeg_has_eoi(data, len);
    case CL_IMAGE_FORMAT_BMP: return bmp_is_complete(data, len);
    case CL_IMAGE_FORMAT_WEBP: return len >= 12 && (guint64)le32(data + 4) + 8 <= len;
    default: return TRUE; /* the GIF loader reports truncation itself */
    }
}

typedef struct {
    const ClImageLimits *limits;
    ClImageFormat format;
    const guint8 *data;
    gsize len;
    GError *error;      /* set when the announced size breaks the limits */
    gboolean truncated; /* the file cannot hold the image it announces */
} SizeCheck;

/* Emitted once the header is parsed and before the module allocates its pixbuf: setting the
 * size to 0 × 0 tells the module to stop (the convention gdk_pixbuf_get_file_info() uses). A
 * short file is stopped here too, or a few damaged header bytes cost a gigabyte pixbuf. */
static void on_size_prepared(GdkPixbufLoader *loader, int width, int height, gpointer user)
{
    SizeCheck *sc = user;
    if (sc->error || sc->truncated)
        return;
    /* 4 channels: gdk-pixbuf's worst case (RGBA) */
    if (!cl_image_check_limits(sc->limits, (guint64)MAX(width, 0), (guint64)MAX(height, 0), 1, 4,
                               &sc->error))
        gdk_pixbuf_loader_set_size(loader, 0, 0);
    else if (!file_is_complete(sc->format, sc->data, sc->len)) {
        sc->truncated = TRUE;
        gdk_pixbuf_loader_set_size(loader, 0, 0);
    }
}

/* Adds what gdk-pixbuf reports about the file. Orientation is recorded, never applied: the
 * planes keep the stored pixel order like every other loader. */
static void add_pixbuf_options(ClImage *img, GdkPixbuf *pb)
{
    g_autoptr(GHashTable) opts = gdk_pixbuf_get_options(pb); /* transfer container */
    if (!opts)
        return;
    g_autoptr(GList) keys = g_hash_table_get_keys(opts);
    keys = g_list_sort(keys, (GCompareFunc)g_strcmp0);
    for (GList *l = keys; l; l = l->next) {
        const char *k = l->data, *v = g_hash_table_lookup(opts, k);
        if (strcmp(k, "icc-profile") == 0) {
            g_autofree char *s =
                g_strdup_printf("embedded (%" G_GSIZE_FORMAT " bytes)", strlen(v) / 4 * 3);
            cl_image_add_meta(img, "ICCProfile", s);
        } else if (strcmp(k, "orientation") == 0) {
            cl_image_add_meta(img, "Orientation", v);
        } else if (strcmp(k, "x-dpi") == 0) {
            cl_image_add_meta(img, "XResolution", v);
        } else if (strcmp(k, "y-dpi") == 0) {
            cl_image_add_meta(img, "YResolution", v);
        } else {
            cl_image_add_meta(img, k, v);
        }
    }
}

static void add_format_metadata(ClImage *img, const guint8 *data, gsize len, ClImageFormat format)
{
    if (format == CL_IMAGE_FORMAT_JPEG) {
        guint8 sof = 0;
        guint comps = jpeg_components(data, len, &sof);
        if (comps) {
            g_autofree char *s = g_strdup_printf("%u", comps);
            cl_image_add_meta(img, "JPEGComponents", s);
            cl_image_add_meta(
                img, "JPEGProcess",
                sof == 0xC2 || sof == 0xC6 || sof == 0xCA || sof == 0xCE   ? "progressive"
                : sof == 0xC3 || sof == 0xC7 || sof == 0xCB || sof == 0xCF ? "lossless"
                : sof == 0xC0                                              ? "baseline"
                                                                           : "extended");
        }
        /* gdk-pixbuf always hands back RGB: a greyscale JPEG arrives as three equal channels.
         * Keeping them is harmless for display and the model; say what the file held. */
        if (comps == 1)
            cl_image_add_meta(img, "ColorSpace", "grey (decoded as RGB with R = G = B)");
    } else if (format == CL_IMAGE_FORMAT_GIF || format == CL_IMAGE_FORMAT_WEBP) {
        gboolean bad = FALSE;
        guint frames = format == CL_IMAGE_FORMAT_GIF ? gif_count_frames(data, len, &bad)
                                                     : webp_count_frames(data, len);
        if (frames > 1) {
            g_autofree char *s = g_strdup_printf("%u", frames);
            cl_image_add_meta(img, "Frames", s);
            cl_image_add_meta(img, "Animated", "yes (first frame loaded)");
        }
    }
}

/* What the loaders themselves would check too late: headers claiming more than the file
 * holds (BMP), a WebP over the limits or shorter than its header says, damaged GIF frames. */
static gboolean headers_are_sane(const guint8 *data, gsize len, ClImageFormat format,
                                 const ClImageLimits *limits, const char *shown, GError **error)
{
    /* gdk-pixbuf's BMP loader grows its header buffer to the sizes the header states before it
     * announces the image size: "BM" and garbage can cost gigabytes. Those headers must lie
     * within the file anyway. */
    if (format == CL_IMAGE_FORMAT_BMP &&
        (len < 18 || le32(data + 10) > len || (guint64)le32(data + 14) + 14 > len)) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT,
                    "%s: the BMP file is truncated or damaged: its headers claim more bytes than "
                    "the file holds",
                    shown);
        return FALSE;
    }

    /* The WebP loader allocates its pixbuf whatever size-prepared answers, so its limits and
     * its length are checked from the headers first. */
    guint64 ww = 0, wh = 0;
    if (format == CL_IMAGE_FORMAT_WEBP && webp_size(data, len, &ww, &wh) &&
        !cl_image_check_limits(limits, ww, wh, 1, 4, error)) {
        g_prefix_error(error, "%s: ", shown);
        return FALSE;
    }
    if (format == CL_IMAGE_FORMAT_WEBP && !file_is_complete(format, data, len)) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT,
                    "%s: the WebP file is truncated (%" G_GSIZE_FORMAT " bytes; its header says "
                    "%" G_GUINT64_FORMAT ")",
                    shown, len, len < 8 ? (guint64)12 : (guint64)le32(data + 4) + 8);
        return FALSE;
    }

    gboolean bad_frame = FALSE;
    if (format == CL_IMAGE_FORMAT_GIF)
        gif_count_frames(data, len, &bad_frame);
    if (bad_frame) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT,
                    "%s: the GIF file is damaged: one of its frames is empty or lies outside the "
                    "picture",
                    shown);
        return FALSE;
    }
    return TRUE;
}

/* The decoded 8-bit RGB(A) pixbuf as a one-frame planar image. */
static ClImage *image_from_pixbuf(GdkPixbuf *pb, ClImageFormat format, const ClImageLimits *limits,
                                  const char *shown, GError **error)
{
    int w = gdk_pixbuf_get_width(pb), h = gdk_pixbuf_get_height(pb);
    int nch = gdk_pixbuf_get_n_channels(pb), stride = gdk_pixbuf_get_rowstride(pb);
    if (gdk_pixbuf_get_colorspace(pb) != GDK_COLORSPACE_RGB ||
        gdk_pixbuf_get_bits_per_sample(pb) != 8 || (nch != 3 && nch != 4) ||
        nch != (gdk_pixbuf_get_has_alpha(pb) ? 4 : 3) || w <= 0 || h <= 0 || stride < w * nch) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNSUPPORTED,
                    "%s: gdk-pixbuf returned a pixel layout ChangeLens does not handle "
                    "(%d channels, %d bits)",
                    shown, nch, gdk_pixbuf_get_bits_per_sample(pb));
        return NULL;
    }
    if (!cl_image_check_limits(limits, (guint64)w, (guint64)h, 1, (guint64)nch, error)) {
        g_prefix_error(error, "%s: ", shown);
        return NULL;
    }

    g_autoptr(ClImage) img = cl_image_new(format);
    img->width = (guint)w;
    img->height = (guint)h;
    img->channels = (guint)nch;
    img->layout = nch == 4 ? CL_LAYOUT_RGBA : CL_LAYOUT_RGB;
    img->bits = 8;
    img->bits_allocated = 8;
    img->sample_format = CL_SAMPLE_UINT;
    img->photometric = g_strdup(nch == 4 ? "rgba" : "rgb");
    if (!cl_image_alloc_frames(img, 1, error)) {
        g_prefix_error(error, "%s: ", shown);
        return NULL;
    }
    const guint8 *px = gdk_pixbuf_read_pixels(pb);
    for (int c = 0; c < nch; c++) {
        float *plane = cl_image_plane(img, 0, (guint)c);
        for (int y = 0; y < h; y++) {
            const guint8 *row = px + (gsize)y * (gsize)stride;
            for (int x = 0; x < w; x++)
                plane[(gsize)y * w + x] = row[(gsize)x * nch + c];
        }
    }
    return g_steal_pointer(&img);
}

ClImage *cl_image_load_pixbuf(const guint8 *data, gsize len, const char *name, ClImageFormat format,
                              const ClImageLimits *limits, GError **error)
{
    const char *shown = name ? name : "image";
    const char *fmt_name = cl_image_format_name(format);
    const char *type = loader_type(format);
    ClImageLimits def;
    if (!limits) {
        cl_image_limits_init(&def);
        limits = &def;
    }
    if (!type) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_INVALID,
                    "%s: %s images are not decoded through gdk-pixbuf", shown, fmt_name);
        return NULL;
    }
    if (len == 0) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT, "%s: the file is empty", shown);
        return NULL;
    }
    if (!headers_are_sane(data, len, format, limits, shown, error))
        return NULL;

    g_autoptr(GError) gerr = NULL;
    g_autoptr(GdkPixbufLoader) loader = gdk_pixbuf_loader_new_with_type(type, &gerr);
    if (!loader) {
        if (format == CL_IMAGE_FORMAT_WEBP)
            g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNSUPPORTED,
                        "%s: cannot decode WebP images: the gdk-pixbuf WebP loader is not "
                        "installed (on Debian and Ubuntu: apt install webp-pixbuf-loader)",
                        shown);
        else
            g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_UNSUPPORTED,
                        "%s: cannot decode %s images: the gdk-pixbuf %s loader is missing (on "
                        "Debian and Ubuntu it comes with libgdk-pixbuf-2.0-0; a stale loader "
                        "cache is refreshed by gdk-pixbuf-query-loaders --update-cache): %s",
                        shown, fmt_name, type, gerr ? gerr->message : "unknown type");
        return NULL;
    }

    SizeCheck sc = { .limits = limits, .format = format, .data = data, .len = len };
    g_signal_connect(loader, "size-prepared", G_CALLBACK(on_size_prepared), &sc);
    /* A failed write closes the loader itself; closing it again would be a critical. */
    gboolean ok = gdk_pixbuf_loader_write(loader, data, len, &gerr);
    if (ok)
        ok = gdk_pixbuf_loader_close(loader, &gerr);
    g_signal_handlers_disconnect_by_data(loader, &sc);

    if (sc.error) {
        g_propagate_prefixed_error(error, sc.error, "%s: ", shown);
        return NULL;
    }
    if (sc.truncated || (ok && !file_is_complete(format, data, len))) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT,
                    "%s: the %s file is truncated: its image data ends before the end of the "
                    "picture",
                    shown, fmt_name);
        return NULL;
    }
    if (!ok) {
        /* A loader that is there but stopped on the data: truncated or malformed. */
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT,
                    "%s: the %s file is damaged or truncated: %s", shown, fmt_name,
                    gerr ? gerr->message : "the decoder gave up");
        return NULL;
    }

    GdkPixbuf *pb = NULL; /* owned by the loader (or the animation) */
    GdkPixbufAnimation *anim = gdk_pixbuf_loader_get_animation(loader);
    if (anim && !gdk_pixbuf_animation_is_static_image(anim))
        pb = gdk_pixbuf_animation_get_static_image(anim); /* the first frame */
    if (!pb)
        pb = gdk_pixbuf_loader_get_pixbuf(loader);
    if (!pb) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT, "%s: the %s file holds no image",
                    shown, fmt_name);
        return NULL;
    }

    g_autoptr(ClImage) img = image_from_pixbuf(pb, format, limits, shown, error);
    if (!img)
        return NULL;
    add_format_metadata(img, data, len, format);
    add_pixbuf_options(img, pb);
    return g_steal_pointer(&img);
}
