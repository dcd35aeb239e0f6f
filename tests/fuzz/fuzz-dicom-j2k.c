/* fuzz-dicom-j2k.c - libFuzzer harness for the DICOM loader's JPEG 2000 and HTJ2K path
 * (core/image/dicom-j2k.cc, OpenJPEG underneath). The input is a 6-byte header choosing the
 * syntax and the Image Pixel attributes, then a codestream; the harness wraps it into a DICOM
 * file in memory (so the fuzzer spends its time in fragments, offsets and codestreams, not in
 * the data set's encoding) and loads it through cl_image_load_data().
 *   byte 0: bits 0-2 syntax (.90 .91 .201 .202 .203), bit 3 signed, bit 4 Basic Offset Table,
 *           bit 5 each frame in two fragments, bit 6 YBR_RCT for 3 samples
 *   byte 1, 2: rows, columns (1-64); byte 3: bits stored (1-16); byte 4: 1 or 3 samples;
 *   byte 5: frames (1-3), each frame the same codestream.
 * CL_FUZZ_WRITE_SEEDS=DIR writes seeds (small codestreams from OpenJPEG's encoder) and exits. */
#include <openjpeg.h>
#include <stdint.h>
#include <string.h>

#include <glib/gstdio.h>

#include "fuzz-common.h"

static const char *const syntaxes[] = {
    "1.2.840.10008.1.2.4.90",  "1.2.840.10008.1.2.4.91",  "1.2.840.10008.1.2.4.201",
    "1.2.840.10008.1.2.4.202", "1.2.840.10008.1.2.4.203",
};

static void put16(GByteArray *b, guint v)
{
    guint8 x[2] = { (guint8)v, (guint8)(v >> 8) };
    g_byte_array_append(b, x, 2);
}

static void put32(GByteArray *b, guint32 v)
{
    put16(b, v & 0xFFFF);
    put16(b, v >> 16);
}

/* An explicit VR little endian element with a short (16-bit) length, padded to even. */
static void element(GByteArray *b, guint group, guint elem, const char *vr, const void *value,
                    guint len, guint8 pad)
{
    put16(b, group);
    put16(b, elem);
    g_byte_array_append(b, (const guint8 *)vr, 2);
    put16(b, len + (len & 1));
    g_byte_array_append(b, value, len);
    if (len & 1)
        g_byte_array_append(b, &pad, 1);
}

static void element_us(GByteArray *b, guint elem, guint v)
{
    guint8 x[2] = { (guint8)v, (guint8)(v >> 8) };
    element(b, 0x0028, elem, "US", x, 2, 0);
}

static void item(GByteArray *b, const guint8 *data, guint32 len)
{
    put16(b, 0xFFFE);
    put16(b, 0xE000);
    put32(b, len);
    g_byte_array_append(b, data, len);
}

static GByteArray *wrap(const uint8_t *data, size_t size)
{
    const guint flags = data[0];
    const char *uid = syntaxes[(flags & 7) % G_N_ELEMENTS(syntaxes)];
    const guint rows = data[1] % 64 + 1, cols = data[2] % 64 + 1, bs = data[3] % 16 + 1;
    const guint spp = data[4] & 1 ? 3 : 1, frames = data[5] % 3 + 1;
    const gboolean split = (flags & 0x20) != 0;
    const guint8 *cs = data + 6;
    guint32 n = (guint32)(size - 6);
    const guint32 half = (n / 2) & ~1u;

    GByteArray *b = g_byte_array_new();
    guint8 zero[128] = { 0 };
    g_byte_array_append(b, zero, 128);
    g_byte_array_append(b, (const guint8 *)"DICM", 4);
    GByteArray *meta = g_byte_array_new();
    element(meta, 0x0002, 0x0010, "UI", uid, (guint)strlen(uid), 0);
    guint32 glen = meta->len;
    element(b, 0x0002, 0x0000, "UL", &glen, 4, 0); /* host = little endian on our machines */
    g_byte_array_append(b, meta->data, meta->len);
    g_byte_array_free(meta, TRUE);

    element_us(b, 0x0002, spp);
    const char *pi = spp == 1 ? "MONOCHROME2" : (flags & 0x40 ? "YBR_RCT" : "RGB");
    element(b, 0x0028, 0x0004, "CS", pi, (guint)strlen(pi), ' ');
    char nf[4];
    g_snprintf(nf, sizeof nf, "%u", frames);
    element(b, 0x0028, 0x0008, "IS", nf, (guint)strlen(nf), ' ');
    element_us(b, 0x0010, rows);
    element_us(b, 0x0011, cols);
    element_us(b, 0x0100, bs > 8 ? 16 : 8);
    element_us(b, 0x0101, bs);
    element_us(b, 0x0102, bs - 1);
    element_us(b, 0x0103, flags & 8 ? 1 : 0);

    put16(b, 0x7FE0);
    put16(b, 0x0010);
    g_byte_array_append(b, (const guint8 *)"OB\0\0", 4);
    put32(b, 0xFFFFFFFFu);
    guint8 offsets[12];
    guint32 off = 0;
    for (guint f = 0; f < frames; f++) {
        memcpy(offsets + 4 * f, &off, 4);
        off += split ? 16 + n : 8 + n;
    }
    item(b, offsets, flags & 0x10 ? 4 * frames : 0);
    for (guint f = 0; f < frames; f++) {
        if (split) {
            item(b, cs, half);
            item(b, cs + half, n - half);
        } else {
            item(b, cs, n);
        }
    }
    put16(b, 0xFFFE);
    put16(b, 0xE0DD);
    put32(b, 0);
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 6 || size > (1u << 20))
        return 0;
    GByteArray *file = wrap(data, size);
    ClImageLimits limits;
    cl_fuzz_setup(&limits, 4, 3);
    GError *error = NULL;
    ClImage *img = cl_image_load_data(file->data, file->len, "fuzz-j2k.dcm", &limits, &error);
    if (img)
        g_assert(img->format == CL_IMAGE_FORMAT_DICOM);
    cl_fuzz_finish(img, error, &limits);
    g_byte_array_free(file, TRUE);
    return 0;
}

/* ---- seeds ---- */

typedef struct {
    GByteArray *out;
    gsize pos;
} Sink;

static OPJ_SIZE_T sink_write(void *p, OPJ_SIZE_T n, void *user)
{
    Sink *s = user;
    if (s->out->len < s->pos + n)
        g_byte_array_set_size(s->out, (guint)(s->pos + n));
    memcpy(s->out->data + s->pos, p, n);
    s->pos += n;
    return n;
}

static OPJ_OFF_T sink_skip(OPJ_OFF_T n, void *user)
{
    Sink *s = user;
    s->pos += (gsize)n;
    if (s->out->len < s->pos)
        g_byte_array_set_size(s->out, (guint)s->pos);
    return n;
}

static OPJ_BOOL sink_seek(OPJ_OFF_T to, void *user)
{
    ((Sink *)user)->pos = (gsize)to;
    return OPJ_TRUE;
}

static void write_seed(const char *dir, const char *name, guint8 flags, guint rows, guint cols,
                       guint bs, guint spp, guint frames, gboolean lossy)
{
    opj_cparameters_t p;
    opj_set_default_encoder_parameters(&p);
    p.tcp_numlayers = 1;
    p.cp_disto_alloc = 1;
    p.tcp_rates[0] = lossy ? 5.0f : 0.0f;
    p.irreversible = lossy;
    p.numresolution = 2;
    p.tcp_mct = spp == 3 && (flags & 0x40) ? 1 : 0;
    opj_image_cmptparm_t cp[3];
    memset(cp, 0, sizeof cp);
    for (guint c = 0; c < spp; c++) {
        cp[c].dx = cp[c].dy = 1;
        cp[c].w = cols;
        cp[c].h = rows;
        cp[c].prec = bs;
        cp[c].sgnd = flags & 8 ? 1 : 0;
    }
    opj_image_t *img = opj_image_create(spp, cp, spp == 3 ? OPJ_CLRSPC_SRGB : OPJ_CLRSPC_GRAY);
    img->x1 = cols;
    img->y1 = rows;
    for (guint c = 0; c < spp; c++)
        for (guint i = 0; i < rows * cols; i++) {
            gint32 v = (gint32)((i * 2654435761u + c * 40503u) >> 7) & ((1 << bs) - 1);
            img->comps[c].data[i] = flags & 8 ? v - (1 << (bs - 1)) : v;
        }
    opj_codec_t *codec = opj_create_compress(OPJ_CODEC_J2K);
    opj_stream_t *st = opj_stream_create(1 << 16, OPJ_FALSE);
    Sink s = { g_byte_array_new(), 0 };
    guint8 head[6] = { flags,
                       (guint8)(rows - 1),
                       (guint8)(cols - 1),
                       (guint8)(bs - 1),
                       (guint8)(spp == 3),
                       (guint8)(frames - 1) };
    g_byte_array_append(s.out, head, 6);
    s.pos = 6;
    opj_stream_set_user_data(st, &s, NULL);
    opj_stream_set_write_function(st, sink_write);
    opj_stream_set_skip_function(st, sink_skip);
    opj_stream_set_seek_function(st, sink_seek);
    if (opj_setup_encoder(codec, &p, img) && opj_start_compress(codec, img, st) &&
        opj_encode(codec, st) && opj_end_compress(codec, st)) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        g_file_set_contents(path, (const char *)s.out->data, s.out->len, NULL);
    }
    opj_stream_destroy(st);
    opj_destroy_codec(codec);
    opj_image_destroy(img);
    g_byte_array_free(s.out, TRUE);
}

__attribute__((constructor)) static void maybe_write_seeds(void)
{
    const char *dir = g_getenv("CL_FUZZ_WRITE_SEEDS");
    if (!dir)
        return;
    g_mkdir_with_parents(dir, 0755);
    write_seed(dir, "grey16.j2kseed", 0x00, 16, 12, 16, 1, 1, FALSE);
    write_seed(dir, "signed12-bot.j2kseed", 0x18, 9, 14, 12, 1, 2, FALSE);
    write_seed(dir, "rct8-split.j2kseed", 0x60, 8, 8, 8, 3, 1, FALSE);
    write_seed(dir, "lossy12-3frames.j2kseed", 0x31, 20, 20, 12, 1, 3, TRUE);
    write_seed(dir, "ht-grey8.j2kseed", 0x02, 5, 7, 8, 1, 1, FALSE);
    exit(0);
}
