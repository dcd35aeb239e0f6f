/* dicom-j2k.cc - JPEG 2000 and HTJ2K Pixel Data through OpenJPEG: the encapsulated fragments
 * grouped into frames (Basic Offset Table, else one codestream per frame), each frame decoded
 * and checked against the Image Pixel module, the samples laid out as uncompressed data. */
#include "cl-config.h"

#include "image/dicom-private.h"

#include <dcmtk/dcmdata/dcpixel.h>
#include <dcmtk/dcmdata/dcpixseq.h>
#include <dcmtk/dcmdata/dcpxitem.h>

#include <openjpeg.h>

#include <cstring>
#include <string>

namespace cl_dicom
{

namespace
{

const struct {
    const char *uid;
    E_TransferSyntax read_as; /* how DCMTK reads the data set: explicit VR LE, encapsulated */
} kJ2kSyntaxes[] = {
    { "1.2.840.10008.1.2.4.90", EXS_JPEG2000LosslessOnly },
    { "1.2.840.10008.1.2.4.91", EXS_JPEG2000 },
    /* HTJ2K (PS3.5 A.4.11), unknown to DCMTK 3.6.7: the same encoding around the pixel data */
    { "1.2.840.10008.1.2.4.201", EXS_JPEG2000 },
    { "1.2.840.10008.1.2.4.202", EXS_JPEG2000 },
    { "1.2.840.10008.1.2.4.203", EXS_JPEG2000 },
};

/* ---- OpenJPEG over memory ---- */

struct MemSource {
    const Uint8 *data;
    OPJ_SIZE_T len, pos;
};

OPJ_SIZE_T mem_read(void *buf, OPJ_SIZE_T n, void *user)
{
    MemSource *m = (MemSource *)user;
    if (m->pos >= m->len)
        return (OPJ_SIZE_T)-1; /* OpenJPEG's end of stream */
    OPJ_SIZE_T k = MIN(n, m->len - m->pos);
    memcpy(buf, m->data + m->pos, k);
    m->pos += k;
    return k;
}

OPJ_OFF_T mem_skip(OPJ_OFF_T n, void *user)
{
    MemSource *m = (MemSource *)user;
    if (n < 0) {
        OPJ_SIZE_T back = MIN((OPJ_SIZE_T)-n, m->pos);
        m->pos -= back;
        return -(OPJ_OFF_T)back;
    }
    OPJ_SIZE_T k = MIN((OPJ_SIZE_T)n, m->len - m->pos);
    m->pos += k;
    return (OPJ_OFF_T)k;
}

OPJ_BOOL mem_seek(OPJ_OFF_T to, void *user)
{
    MemSource *m = (MemSource *)user;
    if (to < 0 || (OPJ_SIZE_T)to > m->len)
        return OPJ_FALSE;
    m->pos = (OPJ_SIZE_T)to;
    return OPJ_TRUE;
}

/* The first error OpenJPEG reports (it reports the root cause first). */
void keep_first_error(const char *msg, void *user)
{
    std::string *s = (std::string *)user;
    if (s->empty() && msg) {
        *s = msg;
        while (!s->empty() && (s->back() == '\n' || s->back() == ' '))
            s->pop_back();
    }
}

void ignore_message(const char *, void *) {}

struct Codec {
    opj_codec_t *codec = NULL;
    opj_stream_t *stream = NULL;
    opj_image_t *image = NULL;
    ~Codec()
    {
        if (image)
            opj_image_destroy(image);
        if (stream)
            opj_stream_destroy(stream);
        if (codec)
            opj_destroy_codec(codec);
    }
};

/* ---- frames from fragments ---- */

struct Fragment {
    const Uint8 *data;
    Uint32 len;
    guint64 offset; /* of its item tag, from the first fragment's (the Basic Offset Table's unit) */
};

bool starts_codestream(const Fragment &f)
{
    /* SOC then SIZ (a J2K codestream), or a JP2 signature box (some writers wrap frames) */
    static const Uint8 jp2[12] = { 0, 0, 0, 12, 'j', 'P', ' ', ' ', 0x0D, 0x0A, 0x87, 0x0A };
    return (f.len >= 4 && f.data[0] == 0xFF && f.data[1] == 0x4F && f.data[2] == 0xFF &&
            f.data[3] == 0x51) ||
           (f.len >= 12 && memcmp(f.data, jp2, 12) == 0);
}

gboolean read_fragments(DcmElement *pixel, E_TransferSyntax read_as, std::vector<Uint8> &bot,
                        std::vector<Fragment> &frags, const char *shown, const char *syntax,
                        GError **error)
{
    DcmPixelData *pd = OFdynamic_cast(DcmPixelData *, pixel);
    DcmPixelSequence *seq = NULL;
    if (!pd || pd->getEncapsulatedRepresentation(read_as, NULL, seq).bad() || !seq) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "the %s file's Pixel Data is not encapsulated (no fragments)", syntax);
        return FALSE;
    }
    const unsigned long n = seq->card();
    guint64 offset = 0;
    for (unsigned long i = 0; i < n; i++) {
        DcmPixelItem *item = NULL;
        Uint8 *bytes = NULL;
        if (seq->getItem(item, i).bad() || !item) {
            set_error(error, CL_IMAGE_ERROR_CORRUPT, shown, "cannot read %s fragment %lu", syntax,
                      i);
            return FALSE;
        }
        const Uint32 len = item->getLength();
        if (len > 0 && (item->getUint8Array(bytes).bad() || !bytes)) {
            set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                      "the %s pixel data is truncated or damaged (fragment %lu cannot be read)",
                      syntax, i);
            return FALSE;
        }
        if (i == 0) {
            bot.assign(bytes, bytes + len); /* the Basic Offset Table, often empty */
            continue;
        }
        frags.push_back(Fragment{ bytes, len, offset });
        offset += 8 + (guint64)len;
    }
    if (frags.empty()) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown, "the %s pixel data holds no fragments",
                  syntax);
        return FALSE;
    }
    return TRUE;
}

/* first[f]: the first fragment of frame f (frames + 1 entries, the last = frags.size()). */
gboolean group_frames(const std::vector<Uint8> &bot, const std::vector<Fragment> &frags,
                      guint32 frames, std::vector<size_t> &first, const char *shown,
                      const char *syntax, GError **error)
{
    first.clear();
    if (!bot.empty()) {
        /* PS3.5 A.4: one 32-bit little-endian offset per frame, from the first fragment's item
         * tag to the frame's first fragment's. */
        if (bot.size() % 4 != 0 || bot.size() / 4 != frames) {
            set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                      "the %s Basic Offset Table has %zu bytes, not 4 for each of the %u frames",
                      syntax, bot.size(), frames);
            return FALSE;
        }
        size_t k = 0;
        for (guint32 f = 0; f < frames; f++) {
            const guint64 off = (guint64)bot[4 * f] | (guint64)bot[4 * f + 1] << 8 |
                                (guint64)bot[4 * f + 2] << 16 | (guint64)bot[4 * f + 3] << 24;
            while (k < frags.size() && frags[k].offset < off)
                k++;
            if (k == frags.size() || frags[k].offset != off || (f == 0 && off != 0) ||
                (f > 0 && k == first.back())) {
                set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                          "the %s Basic Offset Table's offset %" G_GUINT64_FORMAT
                          " for frame %u is not the start of a fragment after the previous frame's",
                          syntax, off, f + 1);
                return FALSE;
            }
            first.push_back(k);
        }
    } else if (frames == 1) {
        first.push_back(0);
    } else if (frags.size() == frames) {
        for (guint32 f = 0; f < frames; f++)
            first.push_back(f);
    } else {
        /* no offsets and more fragments than frames: each frame starts a new codestream */
        for (size_t k = 0; k < frags.size(); k++)
            if (starts_codestream(frags[k]))
                first.push_back(k);
        if (first.empty() || first[0] != 0 || first.size() != frames) {
            set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                      "the %s pixel data holds %zu codestreams in %zu fragments for the %u "
                      "frames the header declares",
                      syntax, first.size(), frags.size(), frames);
            return FALSE;
        }
    }
    if (first.size() < frames) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "the %s pixel data holds %zu of the %u frames the header declares", syntax,
                  first.size(), frames);
        return FALSE;
    }
    first.push_back(frags.size());
    return TRUE;
}

/* ---- one frame ---- */

/* Decodes one codestream and writes its samples into out (frame f of the native layout: planes
 * of rows × cols samples, Bits Allocated each, little endian, the stored value in the low Bits
 * Stored bits). */
gboolean decode_frame_j2k(const Uint8 *data, size_t len, guint32 f, const PixelHeader &h,
                          Uint8 *out, const char *shown, const char *syntax, GError **error)
{
    static const Uint8 jp2_sig[4] = { 0, 0, 0, 12 };
    const bool jp2 = len >= 12 && memcmp(data, jp2_sig, 4) == 0 && memcmp(data + 4, "jP  ", 4) == 0;
    Codec c;
    std::string err;
    MemSource src{ data, (OPJ_SIZE_T)len, 0 };
    c.codec = opj_create_decompress(jp2 ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K);
    c.stream = opj_stream_create(1 << 16, OPJ_TRUE);
    if (!c.codec || !c.stream) {
        set_error(error, CL_IMAGE_ERROR_TOO_LARGE, shown, "cannot set up the JPEG 2000 decoder");
        return FALSE;
    }
    opj_stream_set_user_data(c.stream, &src, NULL);
    opj_stream_set_user_data_length(c.stream, (OPJ_UINT64)len);
    opj_stream_set_read_function(c.stream, mem_read);
    opj_stream_set_skip_function(c.stream, mem_skip);
    opj_stream_set_seek_function(c.stream, mem_seek);
    opj_set_error_handler(c.codec, keep_first_error, &err);
    opj_set_warning_handler(c.codec, ignore_message, NULL);
    opj_set_info_handler(c.codec, ignore_message, NULL);
    opj_dparameters_t params;
    opj_set_default_decoder_parameters(&params);
    if (!opj_setup_decoder(c.codec, &params)) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown, "cannot set up the JPEG 2000 decoder");
        return FALSE;
    }
    /* A truncated codestream is an error, not an image with its last part missing. */
    opj_decoder_set_strict_mode(c.codec, OPJ_TRUE);

    if (!opj_read_header(c.stream, c.codec, &c.image) || !c.image) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "frame %u of the %s pixel data is not a readable JPEG 2000 codestream (%s)",
                  f + 1, syntax, err.empty() ? "no header" : err.c_str());
        return FALSE;
    }
    /* The geometry is checked before OpenJPEG allocates anything for the samples: the limits
     * were checked against Rows, Columns and Samples per Pixel. */
    const opj_image_t *im = c.image;
    if (im->numcomps != h.spp || im->x1 - im->x0 != h.cols || im->y1 - im->y0 != h.rows) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "frame %u of the %s pixel data is %u × %u with %u components, but the header "
                  "says %u × %u with %u samples per pixel",
                  f + 1, syntax, im->x1 - im->x0, im->y1 - im->y0, im->numcomps, h.cols, h.rows,
                  h.spp);
        return FALSE;
    }
    for (OPJ_UINT32 k = 0; k < im->numcomps; k++) {
        const opj_image_comp_t &cp = im->comps[k];
        if (cp.dx != 1 || cp.dy != 1) {
            set_error(error, CL_IMAGE_ERROR_UNSUPPORTED, shown,
                      "frame %u of the %s pixel data has subsampled components, which "
                      "ChangeLens does not read",
                      f + 1, syntax);
            return FALSE;
        }
        if (cp.prec < 1 || cp.prec > 32) {
            set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                      "frame %u of the %s pixel data has %u-bit samples", f + 1, syntax, cp.prec);
            return FALSE;
        }
    }
    if (!opj_decode(c.codec, c.stream, c.image) || !opj_end_decompress(c.codec, c.stream)) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "frame %u of the %s pixel data is truncated or damaged (%s)", f + 1, syntax,
                  err.empty() ? "the JPEG 2000 decoder failed" : err.c_str());
        return FALSE;
    }

    /* Stored values: what fits Bits Stored either signed or unsigned is kept as its low Bits
     * Stored bits, which is what an uncompressed file would hold (a codestream's signedness
     * may disagree with Pixel Representation; the bits do not). */
    const guint64 npix = (guint64)h.rows * h.cols;
    const unsigned bytes = h.ba / 8u;
    const gint64 lo = -((gint64)1 << (h.bs - 1)), hi = ((gint64)1 << h.bs) - 1;
    const guint32 mask = h.bs >= 32 ? 0xFFFFFFFFu : ((guint32)1 << h.bs) - 1;
    for (OPJ_UINT32 k = 0; k < im->numcomps; k++) {
        const opj_image_comp_t &cp = im->comps[k];
        if (!cp.data || cp.w != h.cols || cp.h != h.rows) {
            set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                      "frame %u of the %s pixel data decoded to no samples", f + 1, syntax);
            return FALSE;
        }
        Uint8 *plane = out + ((guint64)f * h.spp + k) * npix * bytes;
        for (guint64 p = 0; p < npix; p++) {
            const gint64 v = cp.data[p];
            if (v < lo || v > hi) {
                set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                          "frame %u of the %s pixel data holds the value %" G_GINT64_FORMAT
                          ", which does not fit the %u bits stored",
                          f + 1, syntax, v, h.bs);
                return FALSE;
            }
            const guint32 bits = (guint32)v & mask;
            for (unsigned b = 0; b < bytes; b++)
                plane[p * bytes + b] = (Uint8)(bits >> (8 * b));
        }
    }
    return TRUE;
}

} /* namespace */

E_TransferSyntax j2k_read_syntax(const char *uid)
{
    for (const auto &s : kJ2kSyntaxes)
        if (uid && strcmp(uid, s.uid) == 0)
            return s.read_as;
    return EXS_Unknown;
}

gboolean decode_j2k(DcmElement *pixel, PixelHeader &h, std::vector<Uint8> &out, ClImage *img,
                    const char *shown, GError **error)
{
    const char *syntax = img->transfer_syntax;
    const E_TransferSyntax read_as = j2k_read_syntax(img->transfer_syntax_uid);
    if (h.ba == 1) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "the %s image has 1 bit allocated per sample", syntax);
        return FALSE;
    }
    std::vector<Uint8> bot;
    std::vector<Fragment> frags;
    std::vector<size_t> first;
    if (!read_fragments(pixel, read_as, bot, frags, shown, syntax, error) ||
        !group_frames(bot, frags, h.frames, first, shown, syntax, error))
        return FALSE;

    const guint64 frame_bytes = (guint64)h.rows * h.cols * h.spp * (h.ba / 8u);
    out.assign((size_t)(frame_bytes * h.frames), 0);
    std::vector<Uint8> joined;
    for (guint32 f = 0; f < h.frames; f++) {
        const size_t a = first[f], b = first[f + 1];
        const Uint8 *data = frags[a].data;
        size_t len = frags[a].len;
        if (b - a > 1) { /* a frame in several fragments: joined */
            joined.clear();
            for (size_t k = a; k < b; k++)
                joined.insert(joined.end(), frags[k].data, frags[k].data + frags[k].len);
            data = joined.data();
            len = joined.size();
        }
        if (len == 0 || !data) {
            set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                      "frame %u of the %s pixel data is empty", f + 1, syntax);
            return FALSE;
        }
        if (!decode_frame_j2k(data, len, f, h, out.data(), shown, syntax, error))
            return FALSE;
    }

    /* The layout decode_native reads: planes, the stored value in the low bits. */
    if (h.spp > 1 && h.photometric != "RGB" && h.colour == Colour::RGB) {
        /* YBR_RCT / YBR_ICT: the decoder undid the codestream's component transform */
        g_autofree char *msg =
            g_strdup_printf("%s converted to RGB by the %s decoder", h.photometric.c_str(), syntax);
        cl_image_add_meta(img, "ColourConversion", msg);
    }
    h.planar = h.spp > 1 ? 1 : 0;
    h.hb = (Uint16)(h.bs - 1);
    return TRUE;
}

} /* namespace cl_dicom */
