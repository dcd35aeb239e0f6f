/* dicom-pixels.cc - the Image Pixel module of the DICOM loader: the layout of Pixel Data, its
 * samples in any bit depth and byte order, palettes, YBR to RGB, lookup tables. */
#include "cl-config.h"

#include "image/dicom-private.h"

#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcelem.h>

#include <cmath>
#include <cstring>

namespace cl_dicom
{

/* ---------------------------------------------------------------------------------------------
 * Image Pixel module
 * ------------------------------------------------------------------------------------------- */

/* Reads and cross-checks every attribute that says how Pixel Data is laid out. */
gboolean read_pixel_header(DcmItem *ds, PixelHeader &h, const char *shown, GError **error, bool j2k)
{
    if (!get_u16(ds, DCM_Rows, h.rows) || !get_u16(ds, DCM_Columns, h.cols)) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "DICOM image lacks Rows (0028,0010) or Columns (0028,0011)");
        return FALSE;
    }
    if (h.rows == 0 || h.cols == 0) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown, "DICOM image has %u rows × %u columns",
                  h.rows, h.cols);
        return FALSE;
    }
    if (!get_u16(ds, DCM_BitsAllocated, h.ba)) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "DICOM image lacks Bits Allocated (0028,0100)");
        return FALSE;
    }
    if (h.ba != 1 && h.ba != 8 && h.ba != 16 && h.ba != 32) {
        set_error(error, CL_IMAGE_ERROR_UNSUPPORTED, shown,
                  "DICOM image has %u bits allocated per sample; ChangeLens reads 1, 8, 16 and 32",
                  h.ba);
        return FALSE;
    }
    if (!get_u16(ds, DCM_BitsStored, h.bs))
        h.bs = h.ba;
    if (h.bs == 0 || h.bs > h.ba) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "DICOM image has Bits Stored %u with Bits Allocated %u", h.bs, h.ba);
        return FALSE;
    }
    if (!get_u16(ds, DCM_HighBit, h.hb))
        h.hb = (Uint16)(h.bs - 1);
    if (h.hb < h.bs - 1 || h.hb >= h.ba) {
        set_error(
            error, CL_IMAGE_ERROR_CORRUPT, shown,
            "DICOM image has High Bit %u, which does not fit Bits Stored %u in Bits Allocated %u",
            h.hb, h.bs, h.ba);
        return FALSE;
    }
    if (!get_u16(ds, DCM_PixelRepresentation, h.pr))
        h.pr = 0;
    if (h.pr > 1) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "DICOM image has Pixel Representation %u (must be 0 or 1)", h.pr);
        return FALSE;
    }
    if (!get_u16(ds, DCM_SamplesPerPixel, h.spp))
        h.spp = 1;
    if (h.spp == 4) {
        set_error(error, CL_IMAGE_ERROR_UNSUPPORTED, shown,
                  "DICOM image has 4 samples per pixel (retired ARGB/CMYK), which ChangeLens does "
                  "not read");
        return FALSE;
    }
    if (h.spp != 1 && h.spp != 3) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "DICOM image has %u samples per pixel (must be 1 or 3)", h.spp);
        return FALSE;
    }
    if (h.spp > 1 && !get_u16(ds, DCM_PlanarConfiguration, h.planar))
        h.planar = 0;
    if (h.spp == 1)
        h.planar = 0;
    if (h.planar > 1) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "DICOM image has Planar Configuration %u (must be 0 or 1)", h.planar);
        return FALSE;
    }
    h.frames = 1;
    DcmElement *nf_elem = NULL;
    if (ds->findAndGetElement(DCM_NumberOfFrames, nf_elem).good() && nf_elem &&
        nf_elem->getLength() > 0) {
        Sint32 nf = 0;
        if (ds->findAndGetSint32(DCM_NumberOfFrames, nf).bad() || nf < 1) {
            OFString raw = get_string(ds, DCM_NumberOfFrames);
            g_autofree char *shown_nf = dup_utf8(raw.c_str());
            set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                      "DICOM image has an invalid Number of Frames '%s'", shown_nf ? shown_nf : "");
            return FALSE;
        }
        h.frames = (guint32)nf;
    }

    h.photometric = get_string(ds, DCM_PhotometricInterpretation);
    if (h.photometric.empty())
        h.photometric = h.spp == 1 ? "MONOCHROME2" : "RGB"; /* ACR-NEMA files may lack it */
    const char *pi = h.photometric.c_str();
    bool grey_pi = strcmp(pi, "MONOCHROME1") == 0 || strcmp(pi, "MONOCHROME2") == 0;
    bool palette = strcmp(pi, "PALETTE COLOR") == 0;
    bool colour_pi = strcmp(pi, "RGB") == 0 || g_str_has_prefix(pi, "YBR_");
    if (!grey_pi && !palette && !colour_pi) {
        g_autofree char *p = dup_utf8(pi);
        set_error(error, CL_IMAGE_ERROR_UNSUPPORTED, shown,
                  "DICOM image has photometric interpretation '%s', which ChangeLens does not read",
                  p);
        return FALSE;
    }
    if ((grey_pi || palette) != (h.spp == 1)) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "DICOM image is %s but has %u samples per pixel", pi, h.spp);
        return FALSE;
    }
    if (h.ba == 1 && !grey_pi) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "DICOM image is %s with 1 bit allocated per sample", pi);
        return FALSE;
    }
    if (grey_pi)
        h.colour = Colour::GREY;
    else if (palette)
        h.colour = Colour::PALETTE;
    else if (strcmp(pi, "RGB") == 0)
        h.colour = Colour::RGB;
    else if (strcmp(pi, "YBR_FULL") == 0)
        h.colour = Colour::YBR_FULL;
    else if (strcmp(pi, "YBR_FULL_422") == 0)
        h.colour = Colour::YBR_FULL_422;
    else if (j2k && (strcmp(pi, "YBR_RCT") == 0 || strcmp(pi, "YBR_ICT") == 0))
        h.colour = Colour::RGB;
    else {
        set_error(error, CL_IMAGE_ERROR_UNSUPPORTED, shown,
                  "DICOM image has photometric interpretation %s, which ChangeLens converts only "
                  "from compressed data it can decode",
                  pi);
        return FALSE;
    }
    if ((h.colour == Colour::YBR_FULL || h.colour == Colour::YBR_FULL_422 ||
         (h.colour == Colour::RGB && strcmp(pi, "RGB") != 0)) &&
        h.pr == 1) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown, "DICOM image is %s with signed samples",
                  pi);
        return FALSE;
    }
    if (h.colour == Colour::PALETTE && h.ba == 32) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "DICOM palette image has 32-bit indices (must be 8 or 16)");
        return FALSE;
    }
    return TRUE;
}

namespace
{

/* Raw samples in stored order, from whatever the Pixel Data element holds after decompression.
 * OW values are in host order (DCMTK swaps them); bytes of OB keep the order of the stream. */
struct SampleSource {
    const Uint8 *bytes = NULL;  /* OB (or any non-OW) view */
    const Uint16 *words = NULL; /* OW view, host order */
    bool big = false;           /* order of bytes inside multi-byte samples / inside OW words */
    unsigned ba = 16;

    guint32 raw(guint64 i) const
    {
        switch (ba) {
        case 1: return words ? (words[i >> 4] >> (i & 15)) & 1u : (bytes[i >> 3] >> (i & 7)) & 1u;
        case 8:
            if (!words)
                return bytes[i];
            /* 8-bit samples packed in 16-bit words: the first sample is the one that comes
             * first in the stream, i.e. the low byte in little endian, the high in big. */
            return (guint32)(words[i >> 1] >> (((i & 1) ^ (big ? 1u : 0u)) * 8)) & 0xFFu;
        case 16:
            if (words)
                return words[i];
            return big ? (guint32)bytes[2 * i] << 8 | bytes[2 * i + 1]
                       : (guint32)bytes[2 * i + 1] << 8 | bytes[2 * i];
        default: /* 32 */
            if (words)
                return big ? (guint32)words[2 * i] << 16 | words[2 * i + 1]
                           : (guint32)words[2 * i + 1] << 16 | words[2 * i];
            {
                const Uint8 *b = bytes + 4 * i;
                return big ? (guint32)b[0] << 24 | (guint32)b[1] << 16 | (guint32)b[2] << 8 | b[3]
                           : (guint32)b[3] << 24 | (guint32)b[2] << 16 | (guint32)b[1] << 8 | b[0];
            }
        }
    }
};

/* Stored value = the Bits Stored bits ending at High Bit, sign-extended when signed. */
struct StoredBits {
    unsigned shift, bs;
    guint32 mask;
    bool is_signed;

    explicit StoredBits(const PixelHeader &h)
        : shift((unsigned)(h.hb + 1 - h.bs)), bs(h.bs),
          mask(h.bs >= 32 ? 0xFFFFFFFFu : ((guint32)1 << h.bs) - 1), is_signed(h.pr == 1)
    {
    }

    double value(guint32 raw) const
    {
        guint32 v = (raw >> shift) & mask;
        if (is_signed && (v >> (bs - 1)) & 1u)
            return bs >= 32 ? (double)(gint32)v : (double)((gint64)v - ((gint64)1 << bs));
        return (double)v;
    }
};

/* LUT Data may hold one entry per 16-bit word, or two 8-bit entries per word (some writers
 * pack 8-bit LUTs). A descriptor that says 8 bits over data with larger values is taken as 16
 * bits, as other readers do. */
gboolean read_lut_data(DcmItem *item, const DcmTagKey &data_tag, guint32 n, Lut &lut,
                       const char *shown, const char *what, GError **error)
{
    DcmElement *e = NULL;
    if (item->findAndGetElement(data_tag, e).bad() || !e) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown, "DICOM %s has no LUT data", what);
        return FALSE;
    }
    const Uint32 len = e->getLength();
    lut.data.assign(n, 0);
    if (e->getVR() == EVR_OB) {
        Uint8 *b = NULL;
        if (len < n || e->getUint8Array(b).bad() || !b) {
            set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                      "DICOM %s holds %u bytes of LUT data for %u entries", what, len, n);
            return FALSE;
        }
        for (guint32 k = 0; k < n; k++)
            lut.data[k] = b[k];
        lut.bits = MIN(lut.bits, 8u);
        return TRUE;
    }
    Uint16 *w = NULL;
    const guint64 words = len / 2;
    if (words == 0 || e->getUint16Array(w).bad() || !w) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown, "DICOM %s has empty LUT data", what);
        return FALSE;
    }
    if (words >= n) {
        bool over8 = false;
        for (guint32 k = 0; k < n; k++) {
            lut.data[k] = w[k];
            over8 |= w[k] > 0xFF;
        }
        if (lut.bits <= 8 && over8)
            lut.bits = 16;
    } else if (lut.bits <= 8 && words * 2 >= n) {
        for (guint32 k = 0; k < n; k++)
            lut.data[k] = (guint16)((w[k >> 1] >> ((k & 1) * 8)) & 0xFF);
    } else {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "DICOM %s holds %" G_GUINT64_FORMAT " LUT words for %u entries", what, words, n);
        return FALSE;
    }
    return TRUE;
}

} /* namespace */

/* descriptor: entries (0 = 65536), first stored value mapped (signed if signed_first), bits. */
gboolean read_lut(DcmItem *item, const DcmTagKey &desc_tag, const DcmTagKey &data_tag,
                  bool signed_first, Lut &lut, const char *shown, const char *what, GError **error)
{
    Uint16 d0, d1, d2;
    if (!get_u16(item, desc_tag, d0, 0) || !get_u16(item, desc_tag, d1, 1) ||
        !get_u16(item, desc_tag, d2, 2)) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "DICOM %s lacks a complete LUT descriptor (3 values)", what);
        return FALSE;
    }
    guint32 n = d0 == 0 ? 65536u : d0;
    lut.first = signed_first ? (gint32)(Sint16)d1 : (gint32)d1;
    if (d2 < 1 || d2 > 16) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "DICOM %s has %u bits per LUT entry (must be 1 to 16)", what, d2);
        return FALSE;
    }
    lut.bits = d2;
    return read_lut_data(item, data_tag, n, lut, shown, what, error);
}

namespace
{

inline guint16 lut_lookup(const Lut &lut, double stored)
{
    double k = stored - lut.first;
    if (k <= 0)
        return lut.data.front();
    if (k >= (double)lut.data.size() - 1)
        return lut.data.back();
    return lut.data[(size_t)k];
}

inline float ybr_clamp(double v, double max)
{
    v = std::floor(v + 0.5);
    return (float)(v < 0 ? 0 : v > max ? max : v);
}

/* PS3.3 C.7.6.3.1.2: YBR_FULL, full range, ITU-R BT.601 coefficients. */
inline void ybr_to_rgb(double y, double cb, double cr, double half, double max, float *r, float *g,
                       float *b)
{
    cb -= half;
    cr -= half;
    *r = ybr_clamp(y + 1.402 * cr, max);
    *g = ybr_clamp(y - 0.344136 * cb - 0.714136 * cr, max);
    *b = ybr_clamp(y + 1.772 * cb, max);
}

/* Bytes the Pixel Data must hold for the header; 4:2:2 stores two samples per pixel. */
guint64 needed_bytes(const PixelHeader &h, bool subsampled_422)
{
    guint64 per_frame = (guint64)h.rows * h.cols * (subsampled_422 ? 2u : h.spp);
    guint64 samples = per_frame * h.frames;
    return h.ba == 1 ? (samples + 7) / 8 : samples * (h.ba / 8u);
}

/* The samples of Pixel Data as they are stored (or as the decoder left them). */
gboolean open_samples(DcmElement *pixel, const PixelHeader &h, const DcmXfer &xfer,
                      bool decompressed, bool subsampled, SampleSource &src, const char *shown,
                      GError **error)
{
    src.ba = h.ba;
    const Uint32 have = pixel->getLength();
    const guint64 need = needed_bytes(h, subsampled);
    if ((guint64)have < need) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "Pixel Data holds %u bytes, but %u × %u pixels × %u frames × %u samples of "
                  "%u bits need %" G_GUINT64_FORMAT "; the file is truncated or damaged",
                  have, h.cols, h.rows, h.frames, subsampled ? 2u : (guint)h.spp, h.ba, need);
        return FALSE;
    }
    /* Decoded data is in host order, except 8-bit samples in OW words, which DCMTK's decoders
     * leave in stream order (the first sample in the low byte of a little-endian word). */
    const bool host_big = G_BYTE_ORDER == G_BIG_ENDIAN && h.ba != 8;
    src.big = decompressed ? host_big : xfer.getPixelDataByteOrder() == EBO_BigEndian;
    bool readable;
    if (pixel->getVR() == EVR_OW) {
        Uint16 *w = NULL;
        readable = pixel->getUint16Array(w).good() && w;
        src.words = w;
    } else {
        Uint8 *b = NULL;
        readable = pixel->getUint8Array(b).good() && b;
        src.bytes = b;
    }
    if (!readable) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown, "cannot read the Pixel Data");
        return FALSE;
    }
    return TRUE;
}

/* The three palette LUTs (red, green, blue) of a PALETTE COLOR image. */
gboolean read_palette(DcmDataset *ds, const PixelHeader &h, Lut pal[3], const char *shown,
                      GError **error)
{
    if (ds->tagExists(DCM_SegmentedRedPaletteColorLookupTableData)) {
        set_error(error, CL_IMAGE_ERROR_UNSUPPORTED, shown,
                  "DICOM image uses a segmented palette, which ChangeLens does not read");
        return FALSE;
    }
    const struct {
        DcmTagKey desc, data;
    } tags[3] = {
        { DCM_RedPaletteColorLookupTableDescriptor, DCM_RedPaletteColorLookupTableData },
        { DCM_GreenPaletteColorLookupTableDescriptor, DCM_GreenPaletteColorLookupTableData },
        { DCM_BluePaletteColorLookupTableDescriptor, DCM_BluePaletteColorLookupTableData },
    };
    for (int c = 0; c < 3; c++)
        if (!read_lut(ds, tags[c].desc, tags[c].data, h.pr == 1, pal[c], shown, "palette", error))
            return FALSE;
    return TRUE;
}

/* img's size and sample format: the stored samples', or the palette entries' when expanded. */
void set_format(ClImage *img, const PixelHeader &h, const Lut pal[3], guint out_channels)
{
    img->width = h.cols;
    img->height = h.rows;
    img->channels = out_channels;
    img->layout = out_channels == 1 ? CL_LAYOUT_GREY : CL_LAYOUT_RGB;
    img->bits = h.bs;
    img->bits_allocated = h.ba;
    img->sample_format = h.pr == 1 ? CL_SAMPLE_INT : CL_SAMPLE_UINT;
    if (h.colour == Colour::PALETTE) {
        /* The samples are the palette's entries, not the indices. */
        img->bits = MAX(pal[0].bits, MAX(pal[1].bits, pal[2].bits));
        img->bits_allocated = img->bits > 8 ? 16 : 8;
        img->sample_format = CL_SAMPLE_UINT;
        cl_image_add_meta(img, "ColourConversion", "PALETTE COLOR expanded to RGB");
    } else if (h.colour == Colour::YBR_FULL || h.colour == Colour::YBR_FULL_422) {
        g_autofree char *msg = g_strdup_printf("%s converted to RGB", h.photometric.c_str());
        cl_image_add_meta(img, "ColourConversion", msg);
    }
}

/* Frame f into out: planar, 1 or 3 planes of rows × cols. */
void decode_frame(float *out, guint32 f, const PixelHeader &h, const SampleSource &src,
                  const Lut pal[3], bool subsampled)
{
    const StoredBits sb(h);
    const guint64 npix = (guint64)h.rows * h.cols;
    const double ymax = (double)sb.mask, yhalf = (double)(sb.mask / 2 + 1);
    switch (h.colour) {
    case Colour::GREY: {
        const guint64 base = f * npix;
        for (guint64 p = 0; p < npix; p++)
            out[p] = (float)sb.value(src.raw(base + p));
        break;
    }
    case Colour::PALETTE: {
        const guint64 base = f * npix;
        for (guint64 p = 0; p < npix; p++) {
            double idx = sb.value(src.raw(base + p));
            for (int c = 0; c < 3; c++)
                out[c * npix + p] = lut_lookup(pal[c], idx);
        }
        break;
    }
    case Colour::RGB:
    case Colour::YBR_FULL:
    case Colour::YBR_FULL_422: {
        if (subsampled) {
            /* Y0 Y1 Cb Cr for each pair of pixels (PS3.3 C.7.6.3.1.2). */
            const guint64 base = f * npix * 2;
            for (guint64 y = 0; y < h.rows; y++)
                for (guint64 x = 0; x < h.cols; x++) {
                    guint64 q = base + (y * h.cols + (x & ~(guint64)1)) * 2;
                    guint64 p = y * h.cols + x;
                    ybr_to_rgb(sb.value(src.raw(q + (x & 1))), sb.value(src.raw(q + 2)),
                               sb.value(src.raw(q + 3)), yhalf, ymax, &out[p], &out[npix + p],
                               &out[2 * npix + p]);
                }
            break;
        }
        /* Three samples per pixel, interleaved or in planes; YBR_FULL_422 decoded by a codec
         * comes at full resolution like YBR_FULL. */
        const guint64 base = f * npix * 3;
        for (guint64 p = 0; p < npix; p++) {
            double v[3];
            for (int c = 0; c < 3; c++)
                v[c] = sb.value(src.raw(base + (h.planar ? c * npix + p : p * 3 + c)));
            if (h.colour == Colour::RGB) {
                for (int c = 0; c < 3; c++)
                    out[c * npix + p] = (float)v[c];
            } else {
                ybr_to_rgb(v[0], v[1], v[2], yhalf, ymax, &out[p], &out[npix + p],
                           &out[2 * npix + p]);
            }
        }
        break;
    }
    }
}

/* The image's format and every frame from src (the palette read first where there is one). */
gboolean fill_frames(ClImage *img, DcmDataset *ds, const PixelHeader &h, const SampleSource &src,
                     bool subsampled, guint out_channels, const char *shown, GError **error)
{
    Lut pal[3];
    if (h.colour == Colour::PALETTE && !read_palette(ds, h, pal, shown, error))
        return FALSE;
    set_format(img, h, pal, out_channels);
    if (!cl_image_alloc_frames(img, h.frames, error)) {
        g_prefix_error(error, "%s: ", shown);
        return FALSE;
    }
    for (guint32 f = 0; f < h.frames; f++)
        decode_frame(cl_image_plane(img, f, 0), f, h, src, pal, subsampled);
    return TRUE;
}

} /* namespace */

gboolean decode_pixels(ClImage *img, DcmDataset *ds, DcmElement *pixel, const PixelHeader &h,
                       const DcmXfer &xfer, bool decompressed, guint out_channels,
                       const char *shown, GError **error)
{
    /* Only native YBR_FULL_422 is stored subsampled; decoders return full resolution. */
    const bool subsampled = h.colour == Colour::YBR_FULL_422 && !decompressed;
    if (subsampled && (h.cols % 2 != 0 || h.planar != 0)) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "YBR_FULL_422 image must have an even width and Planar Configuration 0");
        return FALSE;
    }
    SampleSource src;
    if (!open_samples(pixel, h, xfer, decompressed, subsampled, src, shown, error))
        return FALSE;
    return fill_frames(img, ds, h, src, subsampled, out_channels, shown, error);
}

gboolean decode_native(ClImage *img, DcmDataset *ds, const std::vector<Uint8> &bytes,
                       const PixelHeader &h, guint out_channels, const char *shown, GError **error)
{
    SampleSource src;
    src.ba = h.ba;
    src.bytes = bytes.data();
    src.big = false;
    if ((guint64)bytes.size() < needed_bytes(h, false)) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown, "decoded Pixel Data is short");
        return FALSE;
    }
    return fill_frames(img, ds, h, src, false, out_channels, shown, error);
}

} /* namespace cl_dicom */
