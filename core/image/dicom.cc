/* dicom.cc - DICOM decoding through DCMTK behind the C API of loaders.h (cl_image_load_dicom). */
#include "cl-config.h"

/* osconfig.h must come before every other DCMTK header. */
#include <dcmtk/config/osconfig.h>

#include <dcmtk/dcmdata/dccodec.h>
#include <dcmtk/dcmdata/dcdatset.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcdict.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcistrmb.h>
#include <dcmtk/dcmdata/dcmetinf.h>
#include <dcmtk/dcmdata/dcpixel.h>
#include <dcmtk/dcmdata/dcpixseq.h>
#include <dcmtk/dcmdata/dcpxitem.h>
#include <dcmtk/dcmdata/dcrledrg.h>
#include <dcmtk/dcmdata/dcsequen.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmdata/dcxfer.h>
#include <dcmtk/dcmjpeg/djdecode.h>
#include <dcmtk/dcmjpls/djdecode.h>
#include <dcmtk/oflog/oflog.h>

#include <cmath>
#include <cstring>
#include <gio/gio.h>
#include <mutex>
#include <new>
#include <vector>

#include "image/loaders.h"

namespace
{

/* ---------------------------------------------------------------------------------------------
 * Errors and strings
 * ------------------------------------------------------------------------------------------- */

void set_error(GError **error, ClImageError code, const char *shown, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);

void set_error(GError **error, ClImageError code, const char *shown, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, CL_IMAGE_ERROR, code, "%s: %s", shown, msg);
}

/* DICOM strings are converted to UTF-8 from SpecificCharacterSet when DCMTK can; whatever is
 * still not UTF-8 (no or wrong character set declared) is most often Latin-1 in practice. */
char *dup_utf8(const char *s)
{
    if (!s || !*s)
        return NULL;
    gsize n = strlen(s);
    if (g_utf8_validate(s, (gssize)n, NULL))
        return g_strndup(s, n);
    char *conv = g_convert(s, (gssize)n, "UTF-8", "ISO-8859-1", NULL, NULL, NULL);
    return conv ? conv : g_utf8_make_valid(s, (gssize)n);
}

/* All values of a string-like element joined with '\', padding removed; empty if absent. */
OFString get_string(DcmItem *item, const DcmTagKey &tag)
{
    OFString v;
    if (!item || item->findAndGetOFStringArray(tag, v, OFTrue).bad())
        return OFString();
    return v;
}

char *get_utf8(DcmItem *item, const DcmTagKey &tag)
{
    OFString v = get_string(item, tag);
    return dup_utf8(v.c_str());
}

/* US or SS (the "xs" VRs of LUT descriptors): the 16 stored bits, interpreted by the caller. */
bool get_u16(DcmItem *item, const DcmTagKey &tag, Uint16 &out, unsigned long pos = 0)
{
    if (!item)
        return false;
    if (item->findAndGetUint16(tag, out, pos).good())
        return true;
    Sint16 s;
    if (item->findAndGetSint16(tag, s, pos).good()) {
        out = (Uint16)s;
        return true;
    }
    return false;
}

bool get_f64(DcmItem *item, const DcmTagKey &tag, double &out, unsigned long pos = 0)
{
    Float64 v;
    if (!item || item->findAndGetFloat64(tag, v, pos).bad() || !std::isfinite(v))
        return false;
    out = v;
    return true;
}

unsigned long value_count(DcmItem *item, const DcmTagKey &tag)
{
    DcmElement *e = NULL;
    if (!item || item->findAndGetElement(tag, e).bad() || !e || e->getLength() == 0)
        return 0;
    return e->getVM();
}

DcmItem *seq_item(DcmItem *item, const DcmTagKey &seq, unsigned long n)
{
    DcmItem *out = NULL;
    if (!item || item->findAndGetSequenceItem(seq, out, (signed long)n).bad())
        return NULL;
    return out;
}

/* The first item of a functional group macro in a Shared or Per-frame Functional Groups item. */
DcmItem *fg_macro(DcmItem *group_item, const DcmTagKey &macro)
{
    return seq_item(group_item, macro, 0);
}

/* "BasicTextSRStorage" -> "Basic Text SR" (DCMTK names are CamelCase keywords). */
char *readable_sop_name(const char *uid)
{
    const char *kw = uid ? dcmFindNameOfUID(uid, NULL) : NULL;
    if (!kw)
        return NULL;
    if (g_str_has_prefix(kw, "RETIRED_"))
        kw += strlen("RETIRED_");
    GString *s = g_string_new(NULL);
    size_t n = strlen(kw);
    if (n > 7 && strcmp(kw + n - 7, "Storage") == 0)
        n -= 7;
    for (size_t i = 0; i < n; i++) {
        char c = kw[i];
        if (i > 0 && g_ascii_isupper(c) &&
            (g_ascii_islower(kw[i - 1]) ||
             (g_ascii_isupper(kw[i - 1]) && i + 1 < n && g_ascii_islower(kw[i + 1]))))
            g_string_append_c(s, ' ');
        g_string_append_c(s, c == '_' ? ' ' : c);
    }
    return g_string_free(s, FALSE);
}

/* Transfer syntaxes DCMTK 3.6.7 does not know by name (PS3.6 Table A-1), for messages. */
const char *extra_xfer_name(const char *uid)
{
    static const struct {
        const char *uid, *name;
    } names[] = {
        {"1.2.840.10008.1.2.1.98", "Encapsulated Uncompressed Explicit VR Little Endian"},
        {"1.2.840.10008.1.2.4.100.1", "Fragmentable MPEG2 Main Profile / Main Level"},
        {"1.2.840.10008.1.2.4.101.1", "Fragmentable MPEG2 Main Profile / High Level"},
        {"1.2.840.10008.1.2.4.102.1", "Fragmentable MPEG-4 AVC/H.264 High Profile / Level 4.1"},
        {"1.2.840.10008.1.2.4.103.1",
         "Fragmentable MPEG-4 AVC/H.264 BD-compatible High Profile / Level 4.1"},
        {"1.2.840.10008.1.2.4.104.1",
         "Fragmentable MPEG-4 AVC/H.264 High Profile / Level 4.2 For 2D Video"},
        {"1.2.840.10008.1.2.4.105.1",
         "Fragmentable MPEG-4 AVC/H.264 High Profile / Level 4.2 For 3D Video"},
        {"1.2.840.10008.1.2.4.106.1",
         "Fragmentable MPEG-4 AVC/H.264 Stereo High Profile / Level 4.2"},
        {"1.2.840.10008.1.2.4.110", "JPEG XL Lossless"},
        {"1.2.840.10008.1.2.4.111", "JPEG XL JPEG Recompression"},
        {"1.2.840.10008.1.2.4.112", "JPEG XL"},
        {"1.2.840.10008.1.2.4.201", "High-Throughput JPEG 2000 (Lossless Only)"},
        {"1.2.840.10008.1.2.4.202", "High-Throughput JPEG 2000 with RPCL Options (Lossless Only)"},
        {"1.2.840.10008.1.2.4.203", "High-Throughput JPEG 2000"},
        {"1.2.840.10008.1.2.4.204", "JPIP HTJ2K Referenced"},
        {"1.2.840.10008.1.2.4.205", "JPIP HTJ2K Referenced Deflate"},
        {"1.2.840.10008.1.2.7.1", "SMPTE ST 2110-20 Uncompressed Progressive Active Video"},
        {"1.2.840.10008.1.2.7.2", "SMPTE ST 2110-20 Uncompressed Interlaced Active Video"},
        {"1.2.840.10008.1.2.7.3", "SMPTE ST 2110-30 PCM Digital Audio"},
        {"1.2.840.10008.1.2.8.1", "Deflated Image Frame Compression"},
    };
    for (const auto &n : names)
        if (strcmp(n.uid, uid) == 0)
            return n.name;
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * One-time DCMTK setup
 * ------------------------------------------------------------------------------------------- */

std::once_flag init_once;

void init_dcmtk()
{
    std::call_once(init_once, [] {
        /* DCMTK logs parse problems to stderr; every problem reaches the user as a GError. */
        OFLog::configure(OFLogger::OFF_LOG_LEVEL);
        /* YBR JPEG is converted to RGB by the decoder (it knows the subsampling); the SOP
         * Instance UID is never replaced, since we only read. */
        DJDecoderRegistration::registerCodecs(EDC_photometricInterpretation, EUC_never);
        DJLSDecoderRegistration::registerCodecs(EJLSUC_never);
        DcmRLEDecoderRegistration::registerCodecs(OFFalse, OFFalse);
    });
}

/* ---------------------------------------------------------------------------------------------
 * Image Pixel module
 * ------------------------------------------------------------------------------------------- */

enum class Colour { GREY, RGB, YBR_FULL, YBR_FULL_422, PALETTE };

struct PixelHeader {
    Uint16 rows = 0, cols = 0, spp = 1, ba = 0, bs = 0, hb = 0, pr = 0, planar = 0;
    guint32 frames = 1;
    OFString photometric;
    Colour colour = Colour::GREY;
};

/* Reads and cross-checks every attribute that says how Pixel Data is laid out. */
gboolean read_pixel_header(DcmItem *ds, PixelHeader &h, const char *shown, GError **error)
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
    else {
        set_error(error, CL_IMAGE_ERROR_UNSUPPORTED, shown,
                  "DICOM image has photometric interpretation %s, which ChangeLens converts only "
                  "from compressed data it can decode",
                  pi);
        return FALSE;
    }
    if ((h.colour == Colour::YBR_FULL || h.colour == Colour::YBR_FULL_422) && h.pr == 1) {
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
        case 1:
            return words ? (words[i >> 4] >> (i & 15)) & 1u : (bytes[i >> 3] >> (i & 7)) & 1u;
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

/* A lookup table (palette or VOI): n entries, the stored value mapped to entry 0, output bits. */
struct Lut {
    std::vector<guint16> data;
    gint32 first = 0;
    unsigned bits = 16;
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

/* ---------------------------------------------------------------------------------------------
 * Metadata
 * ------------------------------------------------------------------------------------------- */

/* Attributes worth showing, added in file order when present. */
// clang-format off
const DcmTagKey meta_tags[] = {
    DCM_SpecificCharacterSet, DCM_ImageType, DCM_SOPClassUID, DCM_SOPInstanceUID, DCM_StudyDate,
    DCM_SeriesDate, DCM_AcquisitionDate, DCM_ContentDate, DCM_AcquisitionDateTime, DCM_StudyTime,
    DCM_SeriesTime, DCM_AcquisitionTime, DCM_ContentTime, DCM_AccessionNumber, DCM_Modality,
    DCM_ConversionType, DCM_PresentationIntentType, DCM_Manufacturer, DCM_InstitutionName,
    DCM_ReferringPhysicianName, DCM_StationName, DCM_StudyDescription, DCM_SeriesDescription,
    DCM_InstitutionalDepartmentName, DCM_ManufacturerModelName, DCM_DerivationDescription,
    DCM_PatientName, DCM_PatientID, DCM_PatientBirthDate, DCM_PatientSex, DCM_PatientAge,
    DCM_PatientSize, DCM_PatientWeight, DCM_BodyPartExamined, DCM_SliceThickness, DCM_KVP,
    DCM_DeviceSerialNumber, DCM_SoftwareVersions, DCM_ProtocolName, DCM_ExposureTime,
    DCM_XRayTubeCurrent, DCM_Exposure, DCM_ViewPosition, DCM_StudyInstanceUID,
    DCM_SeriesInstanceUID, DCM_StudyID, DCM_SeriesNumber, DCM_AcquisitionNumber, DCM_InstanceNumber,
    DCM_PatientOrientation, DCM_ImagePositionPatient, DCM_ImageOrientationPatient,
    DCM_FrameOfReferenceUID, DCM_Laterality, DCM_ImageLaterality, DCM_SliceLocation,
    DCM_ImageComments, DCM_SamplesPerPixel, DCM_PhotometricInterpretation, DCM_NumberOfFrames,
    DCM_Rows, DCM_Columns, DCM_PixelSpacing, DCM_ImagerPixelSpacing, DCM_BitsAllocated,
    DCM_BitsStored, DCM_HighBit, DCM_PixelRepresentation, DCM_PlanarConfiguration,
    DCM_BurnedInAnnotation, DCM_WindowCenter, DCM_WindowWidth, DCM_WindowCenterWidthExplanation,
    DCM_RescaleIntercept, DCM_RescaleSlope, DCM_RescaleType, DCM_LossyImageCompression,
    DCM_LossyImageCompressionRatio, DCM_LossyImageCompressionMethod,
};
// clang-format on

/* Long texts (LT/UT comments) are cut so that a file cannot flood the info panel. */
void add_meta_value(ClImage *img, const char *key, const char *value)
{
    g_autofree char *v = dup_utf8(value);
    if (!v)
        return;
    const gsize max = 2048;
    if (strlen(v) > max) {
        char *end = g_utf8_find_prev_char(v, v + max);
        g_autofree char *cut = g_strndup(v, end ? (gsize)(end - v) : max);
        g_autofree char *with = g_strconcat(cut, "…", NULL);
        cl_image_add_meta(img, key, with);
        return;
    }
    cl_image_add_meta(img, key, v);
}

void add_metadata(ClImage *img, DcmDataset *ds)
{
    for (unsigned long i = 0; i < ds->card(); i++) {
        DcmElement *e = ds->getElement(i);
        if (!e)
            continue;
        const DcmTagKey key = e->getTag().getXTag();
        bool wanted = false;
        for (const DcmTagKey &t : meta_tags)
            if (t == key) {
                wanted = true;
                break;
            }
        if (!wanted || key == DCM_SpecificCharacterSet) /* added before conversion */
            continue;
        OFString v;
        if (e->getOFStringArray(v, OFTrue).bad() || v.empty())
            continue;
        DcmTag tag(key);
        add_meta_value(img, tag.getTagName(), v.c_str());
    }
}

/* DA + TM -> "YYYYMMDDHHMMSS[.f]"; old ACR-NEMA "1993.08.22" and "09:30:15" forms accepted. */
char *compose_datetime(DcmItem *ds, const DcmTagKey &date_tag, const DcmTagKey &time_tag)
{
    OFString date = get_string(ds, date_tag), time = get_string(ds, time_tag);
    GString *s = g_string_new(NULL);
    for (char c : date)
        if (g_ascii_isdigit(c))
            g_string_append_c(s, c);
    if (s->len != 8) {
        g_string_free(s, TRUE);
        return NULL;
    }
    for (char c : time) {
        if (c == '\\')
            break; /* only the first value */
        if (g_ascii_isdigit(c) || c == '.')
            g_string_append_c(s, c);
    }
    return g_string_free(s, FALSE);
}

char *clean_datetime(const OFString &dt)
{
    OFString first = dt.substr(0, dt.find('\\'));
    for (char c : first)
        if (!g_ascii_isdigit(c) && c != '.' && c != '+' && c != '-')
            return NULL;
    return first.empty() ? NULL : g_strdup(first.c_str());
}

/* Window presets of an item (the dataset or a Frame VOI LUT macro); returns how many. */
guint add_windows(ClImage *img, DcmItem *item)
{
    if (!item)
        return 0;
    unsigned long n = MIN(value_count(item, DCM_WindowCenter), value_count(item, DCM_WindowWidth));
    guint added = 0;
    for (unsigned long k = 0; k < n && k < 64; k++) {
        double c, w;
        if (!get_f64(item, DCM_WindowCenter, c, k) || !get_f64(item, DCM_WindowWidth, w, k) ||
            w <= 0)
            continue;
        OFString expl;
        g_autofree char *e = NULL;
        if (item->findAndGetOFString(DCM_WindowCenterWidthExplanation, expl, k).good())
            e = dup_utf8(expl.c_str());
        cl_image_add_window(img, c, w, e);
        added++;
    }
    return added;
}

/* Rescale from an item (the dataset or a Pixel Value Transformation macro). */
void read_rescale(DcmItem *item, double &slope, double &intercept, OFString &type)
{
    if (!item)
        return;
    double s, b;
    /* A zero slope would flatten the frame; such files exist and other readers use 1. */
    if (get_f64(item, DCM_RescaleSlope, s) && s != 0)
        slope = s;
    if (get_f64(item, DCM_RescaleIntercept, b))
        intercept = b;
    OFString t = get_string(item, DCM_RescaleType);
    if (!t.empty())
        type = t;
}

bool read_spacing(DcmItem *item, const DcmTagKey &tag, double out[2])
{
    double a, b;
    if (!get_f64(item, tag, a, 0) || a <= 0)
        return false;
    if (!get_f64(item, tag, b, 1))
        b = a; /* one value written where two belong: square pixels */
    if (b <= 0)
        return false;
    out[0] = a;
    out[1] = b;
    return true;
}

void read_voi_luts(ClImage *img, DcmDataset *ds, const PixelHeader &h, const char *shown)
{
    DcmSequenceOfItems *seq = NULL;
    if (ds->findAndGetSequence(DCM_VOILUTSequence, seq).bad() || !seq)
        return;
    for (unsigned long k = 0; k < seq->card() && k < 16; k++) {
        DcmItem *item = seq->getItem(k);
        if (!item)
            continue;
        Lut lut;
        g_autoptr(GError) err = NULL;
        /* The first value is signed exactly when the pixels are (PS3.3 C.11.2.1.1). */
        if (!read_lut(item, DCM_LUTDescriptor, DCM_LUTData, h.pr == 1, lut, shown, "VOI LUT",
                      &err)) {
            /* A broken VOI LUT costs a display preset, not the image. */
            cl_image_add_meta(img, "VOILUTWarning", err->message);
            continue;
        }
        ClVoiLut *v = g_new0(ClVoiLut, 1);
        v->n_entries = (guint)lut.data.size();
        v->first_value = lut.first;
        v->bits = lut.bits;
        v->data = (guint16 *)g_memdup2(lut.data.data(), lut.data.size() * sizeof(guint16));
        v->explanation = get_utf8(item, DCM_LUTExplanation);
        g_ptr_array_add(img->voi_luts, v);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Reading from memory
 * ------------------------------------------------------------------------------------------- */

/* DCMTK allocates an element's declared length before reading its value, unless the stream can
 * hand out a factory to read it later: then values over maxReadLength are skipped while
 * parsing, and a length beyond the end of the data fails the parse instead of allocating up to
 * 4 GiB. DcmInputBufferStream has no factory; this one does, over the same memory. */
class MemoryStream : public DcmInputBufferStream
{
  public:
    MemoryStream(const Uint8 *base, offile_off_t len, offile_off_t origin = 0)
        : base_(base), len_(len), origin_(origin)
    {
        setBuffer(base + origin, len - origin);
        setEos();
    }

    DcmInputStreamFactory *newFactory() const override;

    OFCondition installCompressionFilter(E_StreamCompression type) override
    {
        filtered_ = true; /* positions no longer map to memory offsets */
        return DcmInputBufferStream::installCompressionFilter(type);
    }

  private:
    const Uint8 *base_;
    offile_off_t len_, origin_;
    bool filtered_ = false;
};

class MemoryStreamFactory : public DcmInputStreamFactory
{
  public:
    MemoryStreamFactory(const Uint8 *base, offile_off_t len, offile_off_t offset)
        : base_(base), len_(len), offset_(offset)
    {
    }
    DcmInputStream *create() const override { return new MemoryStream(base_, len_, offset_); }
    DcmInputStreamFactory *clone() const override { return new MemoryStreamFactory(*this); }
    DcmInputStreamFactoryType ident() const override { return DFT_DcmInputFileStreamFactory; }

  private:
    const Uint8 *base_;
    offile_off_t len_, offset_;
};

DcmInputStreamFactory *MemoryStream::newFactory() const
{
    if (filtered_)
        return NULL;
    return new MemoryStreamFactory(base_, len_, origin_ + tell());
}

/* Values up to this size are read while parsing; larger ones when first used. */
const Uint32 kDeferredValueBytes = 4096;

/* Deflated Explicit VR Little Endian: the data set after the meta header is a raw deflate
 * stream. Inflated here rather than by DCMTK's stream filter so that the result is plain memory
 * with deferred loading (see MemoryStream); cap bounds what a small file may expand to. */
gboolean inflate_dataset(const guint8 *in, gsize n, gsize cap, std::vector<Uint8> &out,
                         const char *shown, GError **error)
{
    g_autoptr(GZlibDecompressor) z = g_zlib_decompressor_new(G_ZLIB_COMPRESSOR_FORMAT_RAW);
    std::vector<Uint8> chunk(1 << 16);
    gsize pos = 0;
    out.clear();
    for (;;) {
        gsize r = 0, w = 0;
        g_autoptr(GError) err = NULL;
        GConverterResult res =
            g_converter_convert(G_CONVERTER(z), in + pos, n - pos, chunk.data(), chunk.size(),
                                G_CONVERTER_INPUT_AT_END, &r, &w, &err);
        if (res == G_CONVERTER_ERROR) {
            set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                      "the deflated DICOM data set is truncated or damaged (%s)", err->message);
            return FALSE;
        }
        pos += r;
        out.insert(out.end(), chunk.begin(), chunk.begin() + (std::ptrdiff_t)w);
        if (out.size() > cap) {
            set_error(error, CL_IMAGE_ERROR_TOO_LARGE, shown,
                      "the deflated DICOM data set expands to more than %" G_GSIZE_FORMAT
                      " bytes, more than an image within the limits can need",
                      cap);
            return FALSE;
        }
        if (res == G_CONVERTER_FINISHED)
            return TRUE;
        if (r == 0 && w == 0) {
            set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                      "the deflated DICOM data set ends early");
            return FALSE;
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * The loader
 * ------------------------------------------------------------------------------------------- */

/* DCMTK 3.6.7's JPEG decoder first walks the markers of the first fragment to find the sample
 * precision, and that walk never moves past a TEM marker (FF01): a damaged fragment would hang
 * the loader. Walk the same way first and refuse what would hang it. */
bool jpeg_scan_would_hang(const Uint8 *d, Uint32 len)
{
    Uint32 off = 0;
    while (off + 4 < len) {
        const unsigned m = (unsigned)d[off] << 8 | d[off + 1];
        const Uint32 seg = ((Uint32)d[off + 2] << 8 | d[off + 3]) + 2;
        if (m == 0xFF01)
            return true;
        if ((m >= 0xFFC0 && m <= 0xFFCF && m != 0xFFC4 && m != 0xFFC8 && m != 0xFFCC))
            return false; /* a start of frame: the walk ends here */
        if (m == 0xFFC4 || m == 0xFFC8 || m == 0xFFCC || (m >= 0xFFDA && m <= 0xFFFE))
            off += seg;
        else if (m >= 0xFFD0 && m <= 0xFFD9)
            off += 2;
        else if (m == 0xFFFF)
            off += 1;
        else if (d[off] == 0xFF && d[off + 1] > 2 && d[off + 1] <= 0xBF)
            off += 2;
        else
            return false; /* the walk stops at an invalid marker */
    }
    return false;
}

bool is_ijg_syntax(E_TransferSyntax x)
{
    return x == EXS_JPEGProcess1 || x == EXS_JPEGProcess2_4 || x == EXS_JPEGProcess6_8 ||
           x == EXS_JPEGProcess10_12 || x == EXS_JPEGProcess14 || x == EXS_JPEGProcess14SV1;
}

gboolean check_jpeg_fragments(DcmElement *pixel, const DcmXfer &xfer, const char *shown,
                              GError **error)
{
    DcmPixelData *pd = OFdynamic_cast(DcmPixelData *, pixel);
    DcmPixelSequence *seq = NULL;
    if (!pd || pd->getEncapsulatedRepresentation(xfer.getXfer(), NULL, seq).bad() || !seq)
        return TRUE; /* nothing encapsulated: chooseRepresentation reports it */
    DcmPixelItem *item = NULL;
    Uint8 *bytes = NULL;
    if (seq->getItem(item, 1).bad() || !item || item->getUint8Array(bytes).bad() || !bytes)
        return TRUE;
    if (jpeg_scan_would_hang(bytes, item->getLength())) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "the %s pixel data is damaged (a JPEG marker is misplaced)", xfer.getXferName());
        return FALSE;
    }
    return TRUE;
}

/* Names the syntax in img and refuses what this build cannot decode. */
gboolean check_transfer_syntax(const OFString &uid, ClImage *img, const char *shown, GError **error)
{
    DcmXfer xfer(uid.c_str());
    g_autofree char *uid_utf8 = dup_utf8(uid.c_str());
    const char *name =
        xfer.getXfer() != EXS_Unknown ? xfer.getXferName() : extra_xfer_name(uid.c_str());
    img->transfer_syntax_uid = g_strdup(uid_utf8 ? uid_utf8 : "");
    img->transfer_syntax = g_strdup(name ? name : "unknown transfer syntax");

    bool ok;
    if (xfer.getXfer() == EXS_Unknown || xfer.getXfer() == EXS_BigEndianImplicit ||
        xfer.isReferenced())
        ok = false;
    else if (xfer.isEncapsulated())
        ok = DcmCodecList::canChangeCoding(xfer.getXfer(), EXS_LittleEndianExplicit);
    else
        ok = true;
    if (!ok) {
        set_error(error, CL_IMAGE_ERROR_UNSUPPORTED, shown,
                  "DICOM file uses transfer syntax %s (%s), which this build cannot decode "
                  "(it decodes uncompressed, %s); convert the file to an uncompressed transfer "
                  "syntax first",
                  name ? name : "unknown to this build", uid_utf8 ? uid_utf8 : "no UID",
                  CL_DCMTK_CODECS);
        return FALSE;
    }
    return TRUE;
}

/* Pixel Data present? Otherwise say what the object is (SR, PDF, presentation state, ...). */
gboolean find_pixel_data(DcmDataset *ds, DcmElement *&pixel, const char *shown, GError **error)
{
    pixel = NULL;
    if (ds->findAndGetElement(DCM_PixelData, pixel).good() && pixel)
        return TRUE;
    if (ds->tagExists(DCM_FloatPixelData) || ds->tagExists(DCM_DoubleFloatPixelData)) {
        set_error(error, CL_IMAGE_ERROR_UNSUPPORTED, shown,
                  "DICOM file holds floating-point pixel data (a parametric map), which ChangeLens "
                  "does not read");
        return FALSE;
    }
    OFString sop = get_string(ds, DCM_SOPClassUID);
    g_autofree char *sop_utf8 = dup_utf8(sop.c_str());
    g_autofree char *readable = readable_sop_name(sop.c_str());
    if (readable) {
        bool vowel = strchr("AEIOU", readable[0]) != NULL;
        set_error(error, CL_IMAGE_ERROR_UNSUPPORTED, shown,
                  "DICOM file has no image (Pixel Data) — it is %s %s object (%s)",
                  vowel ? "an" : "a", readable, sop_utf8);
    } else if (sop_utf8) {
        set_error(error, CL_IMAGE_ERROR_UNSUPPORTED, shown,
                  "DICOM file has no image (Pixel Data) — it is an object of SOP class %s",
                  sop_utf8);
    } else {
        set_error(error, CL_IMAGE_ERROR_UNSUPPORTED, shown,
                  "DICOM file has no image (Pixel Data) and no SOP Class UID; it may be truncated");
    }
    return FALSE;
}

void fill_identity(ClImage *img, DcmDataset *ds)
{
    img->modality = get_utf8(ds, DCM_Modality);
    img->patient_id = get_utf8(ds, DCM_PatientID);
    img->patient_name = get_utf8(ds, DCM_PatientName);
    img->study_uid = get_utf8(ds, DCM_StudyInstanceUID);
    img->series_uid = get_utf8(ds, DCM_SeriesInstanceUID);
    img->sop_instance_uid = get_utf8(ds, DCM_SOPInstanceUID);
    img->study_datetime = compose_datetime(ds, DCM_StudyDate, DCM_StudyTime);
    img->acquisition_datetime = clean_datetime(get_string(ds, DCM_AcquisitionDateTime));
    if (!img->acquisition_datetime)
        img->acquisition_datetime = compose_datetime(ds, DCM_AcquisitionDate, DCM_AcquisitionTime);
    if (!img->acquisition_datetime)
        img->acquisition_datetime = compose_datetime(ds, DCM_ContentDate, DCM_ContentTime);
    if (!img->acquisition_datetime) {
        /* Enhanced objects keep it per frame: take the first frame's. */
        DcmItem *pf = seq_item(ds, DCM_PerFrameFunctionalGroupsSequence, 0);
        DcmItem *fc = fg_macro(pf, DCM_FrameContentSequence);
        if (fc)
            img->acquisition_datetime =
                clean_datetime(get_string(fc, DCM_FrameAcquisitionDateTime));
    }
    Sint32 inst;
    if (ds->findAndGetSint32(DCM_InstanceNumber, inst).good())
        img->instance_number = inst;
}

/* Converts every string of the dataset from its SpecificCharacterSet to UTF-8 (DCMTK then
 * says ISO_IR 192 in the data set; the metadata keeps what the file said). */
void convert_charset(ClImage *img, DcmDataset *ds, const OFString &charset)
{
    if (charset.empty() || charset == "ISO_IR 192" || charset == "ISO_IR 6")
        return; /* ASCII or UTF-8 already; anything else falls back in dup_utf8 */
    OFCondition st = ds->convertToUTF8();
    g_autofree char *cs = dup_utf8(charset.c_str());
    g_autofree char *msg = st.good() ? g_strdup_printf("%s converted to UTF-8", cs)
                                     : g_strdup_printf("strings not converted from %s (%s); "
                                                       "shown as UTF-8 or Latin-1",
                                                       cs, st.text());
    cl_image_add_meta(img, "CharacterSetConversion", msg);
}

ClImage *load(const guint8 *data, gsize len, const char *shown, const ClImageLimits *limits,
              GError **error)
{
    init_dcmtk();
    if (!dcmDataDict.isDictionaryLoaded()) {
        set_error(error, CL_IMAGE_ERROR_UNSUPPORTED, shown,
                  "DCMTK's data dictionary is not installed (set DCMDICTPATH to dicom.dic)");
        return NULL;
    }

    /* The meta header first: its transfer syntax decides whether the data set is read at all,
     * and how. */
    g_autoptr(ClImage) img = cl_image_new(CL_IMAGE_FORMAT_DICOM);
    std::vector<Uint8> inflated; /* outlives ff: deferred values are read from it */
    MemoryStream stream(data, (offile_off_t)len);
    DcmFileFormat ff;
    DcmMetaInfo *meta = ff.getMetaInfo();
    DcmDataset *ds = ff.getDataset();
    if (!meta || !ds) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown, "DCMTK could not set up a DICOM file");
        return NULL;
    }
    ff.transferInit();
    OFCondition st = meta->read(stream, EXS_Unknown, EGL_noChange, kDeferredValueBytes);
    if (st.bad()) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "the DICOM file meta header is truncated or damaged (%s)", st.text());
        return NULL;
    }
    OFString uid = get_string(meta, DCM_TransferSyntaxUID);
    if (!uid.empty() && !check_transfer_syntax(uid, img, shown, error))
        return NULL;
    E_TransferSyntax read_xfer = uid.empty() ? EXS_Unknown : DcmXfer(uid.c_str()).getXfer();
    if (read_xfer == EXS_DeflatedLittleEndianExplicit) {
        const gsize cap =
            (gsize)MIN((guint64)G_MAXUINT32, 16 * limits->max_pixels + ((guint64)64 << 20));
        const gsize start = (gsize)stream.tell();
        if (!inflate_dataset(data + start, len - start, cap, inflated, shown, error))
            return NULL;
        MemoryStream plain(inflated.data(), (offile_off_t)inflated.size());
        st = ds->read(plain, EXS_LittleEndianExplicit, EGL_noChange, kDeferredValueBytes);
    } else {
        st = ds->read(stream, read_xfer, EGL_noChange, kDeferredValueBytes);
    }
    ff.transferEnd();
    if (st.bad()) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "the DICOM file is truncated or damaged (%s)", st.text());
        return NULL;
    }
    if (uid.empty()) {
        /* No meta header (ACR-NEMA style stream): DCMTK detected the encoding. */
        uid = DcmXfer(ds->getOriginalXfer()).getXferID();
        if (!check_transfer_syntax(uid, img, shown, error))
            return NULL;
    }
    DcmXfer xfer(img->transfer_syntax_uid);
    DcmElement *pixel = NULL;
    if (!find_pixel_data(ds, pixel, shown, error))
        return NULL;

    /* Original values, read before the decoder rewrites photometric and friends. */
    const OFString orig_charset = get_string(ds, DCM_SpecificCharacterSet);
    PixelHeader h;
    if (!read_pixel_header(ds, h, shown, error))
        return NULL;
    const guint out_channels = h.spp == 1 && h.colour != Colour::PALETTE ? 1 : 3;
    /* Before anything is decompressed or allocated: the decoders size their output from
     * these same attributes. */
    if (!cl_image_check_limits(limits, h.cols, h.rows, h.frames, out_channels, error)) {
        g_prefix_error(error, "%s: ", shown);
        return NULL;
    }

    cl_image_add_meta(img, "TransferSyntax", img->transfer_syntax);
    cl_image_add_meta(img, "TransferSyntaxUID", img->transfer_syntax_uid);
    {
        OFString v = get_string(meta, DCM_SourceApplicationEntityTitle);
        if (!v.empty())
            add_meta_value(img, "SourceApplicationEntityTitle", v.c_str());
        v = get_string(meta, DCM_ImplementationVersionName);
        if (!v.empty())
            add_meta_value(img, "ImplementationVersionName", v.c_str());
    }
    if (!orig_charset.empty())
        add_meta_value(img, "SpecificCharacterSet", orig_charset.c_str());
    convert_charset(img, ds, orig_charset);
    add_metadata(img, ds);
    {
        OFString sop = get_string(ds, DCM_SOPClassUID);
        g_autofree char *readable = readable_sop_name(sop.c_str());
        if (readable)
            cl_image_add_meta(img, "SOPClassName", readable);
    }
    fill_identity(img, ds);
    img->photometric = dup_utf8(h.photometric.c_str());

    bool decompressed = false;
    if (xfer.isEncapsulated()) {
        if (is_ijg_syntax(xfer.getXfer()) && !check_jpeg_fragments(pixel, xfer, shown, error))
            return NULL;
        st = ds->chooseRepresentation(EXS_LittleEndianExplicit, NULL);
        if (st.bad() || !ds->hasRepresentation(EXS_LittleEndianExplicit, NULL)) {
            set_error(error, CL_IMAGE_ERROR_CORRUPT, shown, "cannot decode the %s pixel data: %s",
                      img->transfer_syntax, st.bad() ? st.text() : "no decoded representation");
            return NULL;
        }
        decompressed = true;
        PixelHeader after;
        if (!read_pixel_header(ds, after, shown, error))
            return NULL;
        /* The JPEG decoder rewrites Bits Allocated/Stored from the stream's precision (that
         * is fine) and lowers Number of Frames to the fragments present (a truncated file). */
        if (after.frames != h.frames) {
            set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                      "the %s pixel data holds %u of the %u frames the header declares",
                      img->transfer_syntax, after.frames, h.frames);
            return NULL;
        }
        if (after.rows != h.rows || after.cols != h.cols || after.spp != h.spp) {
            set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                      "the %s decoder changed the image geometry", img->transfer_syntax);
            return NULL;
        }
        if (after.colour != h.colour) {
            g_autofree char *msg =
                g_strdup_printf("%s converted to %s by the %s decoder", h.photometric.c_str(),
                                after.photometric.c_str(), img->transfer_syntax);
            cl_image_add_meta(img, "ColourConversion", msg);
        }
        after.photometric = h.photometric; /* img->photometric keeps what the file said */
        h = after;
        if (ds->findAndGetElement(DCM_PixelData, pixel).bad() || !pixel) {
            set_error(error, CL_IMAGE_ERROR_CORRUPT, shown, "decoded Pixel Data is missing");
            return NULL;
        }
    }

    /* Only native YBR_FULL_422 is stored subsampled; decoders return full resolution. */
    const bool subsampled = h.colour == Colour::YBR_FULL_422 && !decompressed;
    if (subsampled && (h.cols % 2 != 0 || h.planar != 0)) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "YBR_FULL_422 image must have an even width and Planar Configuration 0");
        return NULL;
    }

    SampleSource src;
    src.ba = h.ba;
    const Uint32 have = pixel->getLength();
    const guint64 need = needed_bytes(h, subsampled);
    if ((guint64)have < need) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "Pixel Data holds %u bytes, but %u × %u pixels × %u frames × %u samples of "
                  "%u bits need %" G_GUINT64_FORMAT "; the file is truncated or damaged",
                  have, h.cols, h.rows, h.frames, subsampled ? 2u : (guint)h.spp, h.ba, need);
        return NULL;
    }
    /* Decoded data is in host order, except 8-bit samples in OW words, which DCMTK's decoders
     * leave in stream order (the first sample in the low byte of a little-endian word). */
    const bool host_big = G_BYTE_ORDER == G_BIG_ENDIAN && h.ba != 8;
    if (pixel->getVR() == EVR_OW) {
        Uint16 *w = NULL;
        if (pixel->getUint16Array(w).bad() || !w) {
            set_error(error, CL_IMAGE_ERROR_CORRUPT, shown, "cannot read the Pixel Data");
            return NULL;
        }
        src.words = w;
        src.big = decompressed ? host_big : xfer.getPixelDataByteOrder() == EBO_BigEndian;
    } else {
        Uint8 *b = NULL;
        if (pixel->getUint8Array(b).bad() || !b) {
            set_error(error, CL_IMAGE_ERROR_CORRUPT, shown, "cannot read the Pixel Data");
            return NULL;
        }
        src.bytes = b;
        src.big = decompressed ? host_big : xfer.getPixelDataByteOrder() == EBO_BigEndian;
    }

    Lut pal[3];
    if (h.colour == Colour::PALETTE) {
        if (ds->tagExists(DCM_SegmentedRedPaletteColorLookupTableData)) {
            set_error(error, CL_IMAGE_ERROR_UNSUPPORTED, shown,
                      "DICOM image uses a segmented palette, which ChangeLens does not read");
            return NULL;
        }
        const DcmTagKey desc[3] = {DCM_RedPaletteColorLookupTableDescriptor,
                                   DCM_GreenPaletteColorLookupTableDescriptor,
                                   DCM_BluePaletteColorLookupTableDescriptor};
        const DcmTagKey lut_data[3] = {DCM_RedPaletteColorLookupTableData,
                                       DCM_GreenPaletteColorLookupTableData,
                                       DCM_BluePaletteColorLookupTableData};
        for (int c = 0; c < 3; c++)
            if (!read_lut(ds, desc[c], lut_data[c], h.pr == 1, pal[c], shown, "palette", error))
                return NULL;
    }

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
    if (!cl_image_alloc_frames(img, h.frames, error)) {
        g_prefix_error(error, "%s: ", shown);
        return NULL;
    }

    const StoredBits sb(h);
    const guint64 npix = (guint64)h.rows * h.cols;
    const double ymax = (double)sb.mask, yhalf = (double)(sb.mask / 2 + 1);
    for (guint32 f = 0; f < h.frames; f++) {
        float *out = cl_image_plane(img, f, 0);
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
        case Colour::YBR_FULL: {
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
        case Colour::YBR_FULL_422: {
            if (!subsampled) {
                const guint64 base = f * npix * 3;
                for (guint64 p = 0; p < npix; p++) {
                    double v[3];
                    for (int c = 0; c < 3; c++)
                        v[c] = sb.value(src.raw(base + (h.planar ? c * npix + p : p * 3 + c)));
                    ybr_to_rgb(v[0], v[1], v[2], yhalf, ymax, &out[p], &out[npix + p],
                               &out[2 * npix + p]);
                }
                break;
            }
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
        }
    }

    /* Modality LUT: dataset, then Shared, then Per-frame Functional Groups (enhanced). */
    double slope = 1.0, intercept = 0.0;
    OFString rescale_type;
    read_rescale(ds, slope, intercept, rescale_type);
    DcmItem *shared = seq_item(ds, DCM_SharedFunctionalGroupsSequence, 0);
    read_rescale(fg_macro(shared, DCM_PixelValueTransformationSequence), slope, intercept,
                 rescale_type);
    DcmSequenceOfItems *per_frame = NULL;
    if (ds->findAndGetSequence(DCM_PerFrameFunctionalGroupsSequence, per_frame).bad())
        per_frame = NULL;
    for (guint32 f = 0; f < h.frames; f++) {
        ClFrame *fr = (ClFrame *)g_ptr_array_index(img->frames, f);
        fr->rescale_slope = slope;
        fr->rescale_intercept = intercept;
        if (per_frame && f < per_frame->card())
            read_rescale(fg_macro(per_frame->getItem(f), DCM_PixelValueTransformationSequence),
                         fr->rescale_slope, fr->rescale_intercept, rescale_type);
    }
    img->rescale_type = dup_utf8(rescale_type.c_str());

    DcmItem *first_frame = per_frame && per_frame->card() > 0 ? per_frame->getItem(0) : NULL;
    if (add_windows(img, ds) == 0 &&
        add_windows(img, fg_macro(shared, DCM_FrameVOILUTSequence)) == 0)
        add_windows(img, fg_macro(first_frame, DCM_FrameVOILUTSequence));
    read_voi_luts(img, ds, h, shown);

    const char *spacing_source = NULL;
    if (read_spacing(ds, DCM_PixelSpacing, img->pixel_spacing))
        spacing_source = "PixelSpacing";
    else if (read_spacing(fg_macro(shared, DCM_PixelMeasuresSequence), DCM_PixelSpacing,
                          img->pixel_spacing) ||
             read_spacing(fg_macro(first_frame, DCM_PixelMeasuresSequence), DCM_PixelSpacing,
                          img->pixel_spacing))
        spacing_source = "PixelMeasuresSequence";
    else if (read_spacing(ds, DCM_ImagerPixelSpacing, img->pixel_spacing))
        spacing_source = "ImagerPixelSpacing";
    else if (read_spacing(ds, DCM_NominalScannedPixelSpacing, img->pixel_spacing))
        spacing_source = "NominalScannedPixelSpacing";
    if (spacing_source) {
        img->has_pixel_spacing = TRUE;
        cl_image_add_meta(img, "PixelSpacingSource", spacing_source);
    }
    return (ClImage *)g_steal_pointer(&img);
}

} /* namespace */

extern "C" ClImage *cl_image_load_dicom(const guint8 *data, gsize len, const char *name,
                                        const ClImageLimits *limits, GError **error)
{
    const char *shown = name ? name : "image";
    ClImageLimits def;
    if (!limits) {
        cl_image_limits_init(&def);
        limits = &def;
    }
    /* No C++ exception may cross into C callers. */
    try {
        return load(data, len, shown, limits, error);
    } catch (const std::bad_alloc &) {
        g_clear_error(error);
        set_error(error, CL_IMAGE_ERROR_TOO_LARGE, shown,
                  "not enough memory to decode the DICOM file");
    } catch (const std::exception &e) {
        g_clear_error(error);
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown, "the DICOM file could not be decoded (%s)",
                  e.what());
    } catch (...) {
        g_clear_error(error);
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown, "the DICOM file could not be decoded");
    }
    return NULL;
}

extern "C" const char *cl_image_dicom_codecs(void)
{
    return CL_DCMTK_CODECS;
}
