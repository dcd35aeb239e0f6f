/* png.c - PNG decoder on libpng: every colour type and bit depth, stored values kept exactly. */
#include "image/loaders.h"

#include <png.h>
#include <setjmp.h>
#include <string.h>

/* libpng keeps decoder warnings in our context; more than this many are not worth showing. */
#define MAX_WARNINGS 8

/* Everything the decoder allocates lives here, so one cleanup frees it whether libpng returned
 * normally or longjmp'd out of the middle of a row. */
typedef struct {
    const char *shown; /* file name for messages */
    const guint8 *data;
    gsize len, pos;
    gboolean truncated;  /* the read callback ran off the end of the buffer */
    guint64 idat_total;  /* IDAT payload bytes, from scan_chunks() */
    char *error_message; /* libpng's message for the fatal error, if any */
    GPtrArray *warnings; /* char*, libpng's warnings (never printed to stderr) */
    png_structp png;
    png_infop info;
    guint8 *raw; /* rowbytes × height, as libpng delivers it (packed, big-endian) */
    png_bytep *rows;
    ClImage *img;
} PngCtx;

static void png_ctx_error(png_structp png, png_const_charp msg)
{
    PngCtx *ctx = png_get_error_ptr(png);
    if (!ctx->error_message)
        ctx->error_message = g_utf8_make_valid(msg, -1);
    png_longjmp(png, 1);
}

static void png_ctx_warning(png_structp png, png_const_charp msg)
{
    PngCtx *ctx = png_get_error_ptr(png);
    if (ctx->warnings->len < MAX_WARNINGS)
        g_ptr_array_add(ctx->warnings, g_strdup(msg));
}

static void png_ctx_read(png_structp png, png_bytep out, png_size_t n)
{
    PngCtx *ctx = png_get_io_ptr(png);
    if (n > ctx->len - ctx->pos) {
        ctx->truncated = TRUE;
        png_error(png, "unexpected end of file");
    }
    memcpy(out, ctx->data + ctx->pos, n);
    ctx->pos += n;
}

static guint32 be32(const guint8 *p)
{
    return ((guint32)p[0] << 24) | ((guint32)p[1] << 16) | ((guint32)p[2] << 8) | p[3];
}

/* Walks the chunk headers in the buffer up to IEND: sums the IDAT payload and finds the first
 * chunk that runs past the end of the data (returned as its offset, or 0 if none). libpng reads
 * an ancillary chunk whole into a buffer of its declared length, so one flipped length byte
 * would otherwise cost a 2 GiB allocation before libpng sees the file is short. */
static gsize scan_chunks(const guint8 *d, gsize len, guint64 *idat_total)
{
    *idat_total = 0;
    gsize pos = 8;
    while (len >= 8 && pos <= len - 8) {
        guint32 n = be32(d + pos);
        gsize avail = len - pos - 8;
        if ((guint64)n + 4 > avail)
            return pos;
        if (memcmp(d + pos + 4, "IDAT", 4) == 0)
            *idat_total += n;
        if (memcmp(d + pos + 4, "IEND", 4) == 0)
            break;
        pos += (gsize)n + 12;
    }
    return 0;
}

/* tEXt/zTXt keywords and text are Latin-1; iTXt text is UTF-8. */
static char *text_to_utf8(const char *s, gsize len, gboolean utf8)
{
    if (!s)
        return g_strdup("");
    if (utf8)
        return g_utf8_make_valid(s, (gssize)len);
    char *conv = g_convert(s, (gssize)len, "UTF-8", "ISO-8859-1", NULL, NULL, NULL);
    return conv ? conv : g_utf8_make_valid(s, (gssize)len);
}

static void read_metadata(PngCtx *ctx)
{
    png_structp png = ctx->png;
    ClImage *img = ctx->img;

    static const char *ctype_names[] = { [PNG_COLOR_TYPE_GRAY] = "grey",
                                         [PNG_COLOR_TYPE_RGB] = "RGB",
                                         [PNG_COLOR_TYPE_PALETTE] = "palette",
                                         [PNG_COLOR_TYPE_GRAY_ALPHA] = "grey+alpha",
                                         [PNG_COLOR_TYPE_RGB_ALPHA] = "RGBA" };
    int ctype = png_get_color_type(png, ctx->info);
    g_autofree char *ctype_s =
        g_strdup_printf("%s, %d-bit", ctype_names[ctype], png_get_bit_depth(png, ctx->info));
    cl_image_add_meta(img, "ColorType", ctype_s);
    if (png_get_interlace_type(png, ctx->info) == PNG_INTERLACE_ADAM7)
        cl_image_add_meta(img, "Interlace", "Adam7");

    /* Text chunks before and after the pixels, in file order. */
    png_textp text = NULL;
    int n_text = 0;
    if (png_get_text(png, ctx->info, &text, &n_text)) {
        for (int i = 0; i < n_text; i++) {
            gboolean itxt = text[i].compression == PNG_ITXT_COMPRESSION_NONE ||
                            text[i].compression == PNG_ITXT_COMPRESSION_zTXt;
            gsize tlen = itxt ? text[i].itxt_length : text[i].text_length;
            g_autofree char *key = text_to_utf8(text[i].key, strlen(text[i].key), FALSE);
            g_autofree char *value = text_to_utf8(text[i].text, tlen, itxt);
            cl_image_add_meta(img, key, value);
        }
    }

    double gamma = 0;
    if (png_get_gAMA(png, ctx->info, &gamma)) {
        g_autofree char *s = g_strdup_printf("%.5f", gamma);
        cl_image_add_meta(img, "Gamma", s);
    }
    int intent = 0;
    if (png_get_sRGB(png, ctx->info, &intent)) {
        static const char *intents[] = { "perceptual", "relative colorimetric", "saturation",
                                         "absolute colorimetric" };
        cl_image_add_meta(img, "sRGB",
                          intent >= 0 && intent < 4 ? intents[intent] : "unknown intent");
    }
    png_charp icc_name = NULL;
    png_bytep icc = NULL;
    png_uint_32 icc_len = 0;
    int icc_comp = 0;
    if (png_get_iCCP(png, ctx->info, &icc_name, &icc_comp, &icc, &icc_len)) {
        g_autofree char *nm = text_to_utf8(icc_name, icc_name ? strlen(icc_name) : 0, FALSE);
        g_autofree char *s = g_strdup_printf("%s (%u bytes)", nm, (unsigned)icc_len);
        cl_image_add_meta(img, "ICCProfile", s);
    }
    png_color_8p sig = NULL;
    if (png_get_sBIT(png, ctx->info, &sig) && sig) {
        guint b =
            (ctype & PNG_COLOR_MASK_COLOR) ? MAX(MAX(sig->red, sig->green), sig->blue) : sig->gray;
        g_autofree char *s = g_strdup_printf("%u", b);
        cl_image_add_meta(img, "SignificantBits", s);
    }
    /* pHYs is kept as metadata only: nearly every editor writes its print resolution (72 or
     * 96 dpi) here, which says nothing about the size of what was imaged, so it must not become
     * has_pixel_spacing and drive measurements in millimetres. */
    png_uint_32 rx = 0, ry = 0;
    int unit = 0;
    if (png_get_pHYs(png, ctx->info, &rx, &ry, &unit)) {
        g_autofree char *sx = g_strdup_printf("%u", (unsigned)rx);
        g_autofree char *sy = g_strdup_printf("%u", (unsigned)ry);
        if (unit == PNG_RESOLUTION_METER) {
            cl_image_add_meta(img, "PixelsPerMeterX", sx);
            cl_image_add_meta(img, "PixelsPerMeterY", sy);
        } else {
            g_autofree char *aspect = g_strdup_printf("%u:%u", (unsigned)rx, (unsigned)ry);
            cl_image_add_meta(img, "PixelAspectRatio", aspect);
        }
    }
    png_timep t = NULL;
    if (png_get_tIME(png, ctx->info, &t) && t) {
        g_autofree char *s = g_strdup_printf("%04u-%02u-%02uT%02u:%02u:%02uZ", t->year, t->month,
                                             t->day, t->hour, t->minute, t->second);
        cl_image_add_meta(img, "ModifyTime", s);
    }
    for (guint i = 0; i < ctx->warnings->len; i++)
        cl_image_add_meta(img, "DecoderWarning", g_ptr_array_index(ctx->warnings, i));
}

/* One sample of a raw row: packed MSB-first below 8 bits, big-endian at 16 bits. */
static inline guint sample_at(const guint8 *row, gsize idx, int depth)
{
    switch (depth) {
    case 16: return ((guint)row[2 * idx] << 8) | row[2 * idx + 1];
    case 8: return row[idx];
    default: {
        gsize bit = idx * (gsize)depth;
        guint shift = 8 - (guint)depth - (guint)(bit & 7);
        return (row[bit >> 3] >> shift) & ((1u << depth) - 1);
    }
    }
}

/* Raw rows -> planar float. tRNS colour keys become an alpha channel at the file's bit depth
 * (0 or 2^bits-1) so every channel shares the range img->bits states. */
static void convert(PngCtx *ctx, int ctype, int depth, guint in_spp)
{
    png_structp png = ctx->png;
    ClImage *img = ctx->img;
    const guint w = img->width, h = img->height;
    const guint maxval = (1u << depth) - 1;

    png_bytep trans_alpha = NULL;
    int num_trans = 0;
    png_color_16p trans_color = NULL;
    gboolean has_trns = png_get_tRNS(png, ctx->info, &trans_alpha, &num_trans, &trans_color) != 0;

    png_colorp palette = NULL;
    int num_palette = 0;
    if (ctype == PNG_COLOR_TYPE_PALETTE)
        png_get_PLTE(png, ctx->info, &palette, &num_palette);

    float *planes[4] = { NULL };
    for (guint c = 0; c < img->channels; c++)
        planes[c] = cl_image_plane(img, 0, c);

    for (guint y = 0; y < h; y++) {
        const guint8 *row = ctx->rows[y];
        gsize o = (gsize)y * w;
        for (guint x = 0; x < w; x++, o++) {
            if (ctype == PNG_COLOR_TYPE_PALETTE) {
                guint idx = sample_at(row, x, depth);
                /* Indices past the palette are a broken file; black is what libpng shows. */
                png_color c = { 0, 0, 0 };
                if (palette && (int)idx < num_palette)
                    c = palette[idx];
                planes[0][o] = c.red;
                planes[1][o] = c.green;
                planes[2][o] = c.blue;
                if (img->channels == 4)
                    planes[3][o] = (int)idx < num_trans && trans_alpha ? trans_alpha[idx] : 255;
                continue;
            }
            guint v[4];
            for (guint c = 0; c < in_spp; c++) {
                v[c] = sample_at(row, (gsize)x * in_spp + c, depth);
                planes[c][o] = (float)v[c];
            }
            if (img->channels > in_spp && has_trns && trans_color) {
                gboolean key = ctype == PNG_COLOR_TYPE_GRAY
                                   ? v[0] == trans_color->gray
                                   : v[0] == trans_color->red && v[1] == trans_color->green &&
                                         v[2] == trans_color->blue;
                planes[in_spp][o] = key ? 0.0f : (float)maxval;
            }
        }
    }
}

/* The libpng part: returns FALSE after a longjmp with ctx->error_message set. Nothing here may
 * own memory that is not reachable from ctx, because the longjmp skips every local cleanup. */
static gboolean decode(PngCtx *ctx, const ClImageLimits *limits, GError **error)
{
    png_structp png = ctx->png;
    png_infop info = ctx->info;
    if (setjmp(png_jmpbuf(png)))
        return FALSE;

    /* A broken CRC means the file was damaged on the way: refuse it rather than show pixels or
     * metadata that may be wrong (libpng only warns for ancillary chunks by default). */
    png_set_crc_action(png, PNG_CRC_ERROR_QUIT, PNG_CRC_ERROR_QUIT);
    guint64 dim_max = MIN(limits->max_pixels, (guint64)PNG_UINT_31_MAX);
    png_set_user_limits(png, (png_uint_32)dim_max, (png_uint_32)dim_max);
    /* Caps what zTXt/iTXt/iCCP may decompress to (chunk lengths were checked by scan_chunks). */
    gsize text_max = MIN(ctx->len, (gsize)PNG_UINT_31_MAX / 4) * 4;
    png_set_chunk_malloc_max(png, MAX((gsize)16 << 20, text_max));
    png_set_read_fn(png, ctx, png_ctx_read);
    png_read_info(png, info);

    png_uint_32 w = 0, h = 0;
    int depth = 0, ctype = 0, interlace = 0;
    png_get_IHDR(png, info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);

    gboolean has_trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
    guint in_spp = png_get_channels(png, info); /* samples per pixel in the file */
    guint channels;
    ClChannelLayout layout;
    const char *photometric;
    switch (ctype) {
    case PNG_COLOR_TYPE_GRAY:
        channels = has_trns ? 2 : 1;
        photometric = "grey";
        break;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
        channels = 2;
        photometric = "grey+alpha";
        break;
    case PNG_COLOR_TYPE_RGB:
        channels = has_trns ? 4 : 3;
        photometric = "rgb";
        break;
    case PNG_COLOR_TYPE_RGB_ALPHA:
        channels = 4;
        photometric = "rgba";
        break;
    case PNG_COLOR_TYPE_PALETTE:
        channels = has_trns ? 4 : 3;
        photometric = "palette";
        break;
    default:
        png_error(png, "unknown colour type"); /* libpng refuses these first; belt and braces */
    }
    layout = channels == 1   ? CL_LAYOUT_GREY
             : channels == 2 ? CL_LAYOUT_GREY_ALPHA
             : channels == 3 ? CL_LAYOUT_RGB
                             : CL_LAYOUT_RGBA;

    if (!cl_image_check_limits(limits, w, h, 1, channels, error)) {
        g_prefix_error(error, "%s: ", ctx->shown);
        return FALSE;
    }

    /* deflate cannot compress better than 1032:1, so a few bytes of IDAT cannot hold a large
     * image: say so before allocating buffers for pixels that are not in the file. */
    double min_raw = (double)w * h * in_spp * depth / 8.0;
    if ((double)ctx->idat_total * 1032.0 + 1032.0 < min_raw) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT,
                    "%s: the PNG file is truncated or damaged: its %" G_GUINT64_FORMAT
                    " bytes of compressed pixel data cannot hold %u × %u pixels",
                    ctx->shown, ctx->idat_total, (unsigned)w, (unsigned)h);
        return FALSE;
    }

    ClImage *img = ctx->img;
    img->width = w;
    img->height = h;
    img->channels = channels;
    img->layout = layout;
    /* The palette's entries are 8-bit whatever the index depth. */
    img->bits = ctype == PNG_COLOR_TYPE_PALETTE ? 8 : (guint)depth;
    img->bits_allocated = img->bits <= 8 ? 8 : 16;
    img->sample_format = CL_SAMPLE_UINT;
    img->photometric = g_strdup(photometric);

    /* No value transforms at all: rows arrive packed and big-endian, and convert() unpacks them,
     * so low-bit grey is not scaled and 16-bit is not stripped. Only de-interlacing. */
    const int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    gsize rowbytes = png_get_rowbytes(png, info);
    if (rowbytes == 0 || rowbytes < ((gsize)w * in_spp * (gsize)depth + 7) / 8)
        png_error(png, "inconsistent row size");

    if (limits->header_only) {
        /* every row decoded (and so checked) into one row's memory, then thrown away */
        ClFrame *f = g_new0(ClFrame, 1);
        f->rescale_slope = 1.0;
        g_ptr_array_add(img->frames, f);
        ctx->raw = g_try_malloc(rowbytes);
        if (!ctx->raw)
            png_error(png, "out of memory");
        for (int pass = 0; pass < passes; pass++)
            for (png_uint_32 y = 0; y < h; y++)
                png_read_row(png, ctx->raw, NULL);
        png_read_end(png, info);
        read_metadata(ctx);
        return TRUE;
    }
    ctx->raw = g_try_malloc_n(h, rowbytes);
    ctx->rows = g_try_new(png_bytep, h);
    if (!ctx->raw || !ctx->rows || !cl_image_alloc_frames(img, 1, error)) {
        if (error && !*error)
            g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE,
                        "%s: not enough memory to decode %u × %u PNG", ctx->shown, w, h);
        else
            g_prefix_error(error, "%s: ", ctx->shown);
        return FALSE;
    }
    for (png_uint_32 y = 0; y < h; y++)
        ctx->rows[y] = ctx->raw + (gsize)y * rowbytes;

    png_read_image(png, ctx->rows);
    /* Reads the rest of the compressed stream, its CRC and every chunk up to IEND, so a file cut
     * inside the last IDAT (or right after it) fails instead of passing with a silent gap. */
    png_read_end(png, info); /* text and tIME chunks after the pixels land in info too */

    convert(ctx, ctype, depth, in_spp);
    read_metadata(ctx);
    return TRUE;
}

ClImage *cl_image_load_png(const guint8 *data, gsize len, const char *name,
                           const ClImageLimits *limits, GError **error)
{
    const char *shown = name ? name : "image";
    ClImageLimits def;
    if (!limits) {
        cl_image_limits_init(&def);
        limits = &def;
    }

    /* Refuse an absurd IHDR before libpng sets anything up: the sizes are at fixed offsets. */
    if (len >= 24 && be32(data + 8) == 13 && memcmp(data + 12, "IHDR", 4) == 0) {
        guint32 w = be32(data + 16), h = be32(data + 20);
        if (w && h && !cl_image_check_limits(limits, w, h, 1, 1, error)) {
            g_prefix_error(error, "%s: ", shown);
            return NULL;
        }
    }

    PngCtx ctx = { .shown = shown, .data = data, .len = len };
    if (len >= 8 && memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0) {
        gsize bad = scan_chunks(data, len, &ctx.idat_total);
        if (bad) {
            g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT,
                        "%s: the PNG file is truncated or damaged: the chunk at byte "
                        "%" G_GSIZE_FORMAT " runs past the end of the file (%" G_GSIZE_FORMAT
                        " bytes)",
                        shown, bad, len);
            return NULL;
        }
    }
    ctx.warnings = g_ptr_array_new_with_free_func(g_free);
    ctx.img = cl_image_new(CL_IMAGE_FORMAT_PNG);
    ctx.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &ctx, png_ctx_error, png_ctx_warning);
    if (ctx.png)
        ctx.info = png_create_info_struct(ctx.png);

    GError *local = NULL;
    gboolean ok = ctx.png && ctx.info && decode(&ctx, limits, &local);

    if (!ok && !local) {
        if (!ctx.png || !ctx.info)
            g_set_error(&local, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE,
                        "%s: not enough memory to start the PNG decoder", shown);
        else if (ctx.truncated)
            g_set_error(&local, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT,
                        "%s: the PNG file is truncated (it ends after %" G_GSIZE_FORMAT
                        " bytes, in the middle of its data)",
                        shown, len);
        else if (ctx.error_message && (strstr(ctx.error_message, "exceeds user limit") ||
                                       strstr(ctx.error_message, "ut of memory")))
            g_set_error(&local, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE,
                        "%s: PNG is too large to load: %s", shown, ctx.error_message);
        else
            g_set_error(&local, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT,
                        "%s: the PNG file is damaged: %s", shown,
                        ctx.error_message ? ctx.error_message : "unknown libpng error");
    }

    png_destroy_read_struct(ctx.png ? &ctx.png : NULL, ctx.info ? &ctx.info : NULL, NULL);
    g_free(ctx.raw);
    g_free(ctx.rows);
    g_free(ctx.error_message);
    g_ptr_array_unref(ctx.warnings);
    if (!ok) {
        cl_image_free(ctx.img);
        g_propagate_error(error, local);
        return NULL;
    }
    return ctx.img;
}
