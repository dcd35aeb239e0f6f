/* dicom.cc - DICOM decoding through DCMTK behind the C API of loaders.h (cl_image_load_dicom):
 * reading the file, transfer syntaxes, decompression; pixels in dicom-pixels.cc, JPEG 2000 in
 * dicom-j2k.cc, attributes in dicom-meta.cc. */
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
#include <dcmtk/dcmdata/dcxfer.h>
#include <dcmtk/dcmjpeg/djdecode.h>
#include <dcmtk/dcmjpls/djdecode.h>
#include <dcmtk/oflog/oflog.h>

#include <cstring>
#include <gio/gio.h>
#include <mutex>
#include <new>
#include <vector>

#include "image/dicom-private.h"

using namespace cl_dicom;

namespace
{

/* Transfer syntaxes DCMTK 3.6.7 does not know by name (PS3.6 Table A-1), for messages. */
const char *extra_xfer_name(const char *uid)
{
    static const struct {
        const char *uid, *name;
    } names[] = {
        { "1.2.840.10008.1.2.1.98", "Encapsulated Uncompressed Explicit VR Little Endian" },
        { "1.2.840.10008.1.2.4.100.1", "Fragmentable MPEG2 Main Profile / Main Level" },
        { "1.2.840.10008.1.2.4.101.1", "Fragmentable MPEG2 Main Profile / High Level" },
        { "1.2.840.10008.1.2.4.102.1", "Fragmentable MPEG-4 AVC/H.264 High Profile / Level 4.1" },
        { "1.2.840.10008.1.2.4.103.1",
          "Fragmentable MPEG-4 AVC/H.264 BD-compatible High Profile / Level 4.1" },
        { "1.2.840.10008.1.2.4.104.1",
          "Fragmentable MPEG-4 AVC/H.264 High Profile / Level 4.2 For 2D Video" },
        { "1.2.840.10008.1.2.4.105.1",
          "Fragmentable MPEG-4 AVC/H.264 High Profile / Level 4.2 For 3D Video" },
        { "1.2.840.10008.1.2.4.106.1",
          "Fragmentable MPEG-4 AVC/H.264 Stereo High Profile / Level 4.2" },
        { "1.2.840.10008.1.2.4.110", "JPEG XL Lossless" },
        { "1.2.840.10008.1.2.4.111", "JPEG XL JPEG Recompression" },
        { "1.2.840.10008.1.2.4.112", "JPEG XL" },
        { "1.2.840.10008.1.2.4.201", "High-Throughput JPEG 2000 (Lossless Only)" },
        { "1.2.840.10008.1.2.4.202",
          "High-Throughput JPEG 2000 with RPCL Options (Lossless Only)" },
        { "1.2.840.10008.1.2.4.203", "High-Throughput JPEG 2000" },
        { "1.2.840.10008.1.2.4.204", "JPIP HTJ2K Referenced" },
        { "1.2.840.10008.1.2.4.205", "JPIP HTJ2K Referenced Deflate" },
        { "1.2.840.10008.1.2.7.1", "SMPTE ST 2110-20 Uncompressed Progressive Active Video" },
        { "1.2.840.10008.1.2.7.2", "SMPTE ST 2110-20 Uncompressed Interlaced Active Video" },
        { "1.2.840.10008.1.2.7.3", "SMPTE ST 2110-30 PCM Digital Audio" },
        { "1.2.840.10008.1.2.8.1", "Deflated Image Frame Compression" },
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
    if (j2k_read_syntax(uid.c_str()) != EXS_Unknown)
        ok = true; /* JPEG 2000 and HTJ2K: OpenJPEG (dicom-j2k.cc) */
    else if (xfer.getXfer() == EXS_Unknown || xfer.getXfer() == EXS_BigEndianImplicit ||
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

/* Refuses a data set whose sequences nest deeper than DCMTK's recursive reader can go. Without
 * a meta header (EXS_Unknown) the encoding is guessed as DCMTK does: a VR's two capitals after
 * the first tag mean explicit VR. */
gboolean check_nesting(const guint8 *data, gsize len, E_TransferSyntax xfer, const char *shown,
                       GError **error)
{
    bool implicit, big_endian = false;
    if (xfer == EXS_Unknown) {
        implicit = !(len >= 6 && g_ascii_isupper(data[4]) && g_ascii_isupper(data[5]));
    } else {
        DcmXfer x(xfer);
        implicit = x.isImplicitVR();
        big_endian = x.isBigEndian();
    }
    if (nesting_within(data, len, implicit, big_endian, kMaxSequenceDepth))
        return TRUE;
    set_error(error, CL_IMAGE_ERROR_UNSUPPORTED, shown,
              "DICOM file nests sequences more than %u levels deep, which ChangeLens does not "
              "read (real images nest a few)",
              kMaxSequenceDepth);
    return FALSE;
}

/* The meta header, then the data set: the meta header's transfer syntax decides whether the data
 * set is read at all, and how. Names the syntax in img. A deflated data set is inflated into
 * `inflated`, which must outlive ff (deferred values are read from it). */
gboolean read_file(const guint8 *data, gsize len, const ClImageLimits *limits, DcmFileFormat &ff,
                   std::vector<Uint8> &inflated, ClImage *img, const char *shown, GError **error)
{
    MemoryStream stream(data, (offile_off_t)len);
    DcmMetaInfo *meta = ff.getMetaInfo();
    DcmDataset *ds = ff.getDataset();
    if (!meta || !ds) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown, "DCMTK could not set up a DICOM file");
        return FALSE;
    }
    ff.transferInit();
    OFCondition st = meta->read(stream, EXS_Unknown, EGL_noChange, kDeferredValueBytes);
    if (st.bad()) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "the DICOM file meta header is truncated or damaged (%s)", st.text());
        return FALSE;
    }
    OFString uid = get_string(meta, DCM_TransferSyntaxUID);
    if (!uid.empty() && !check_transfer_syntax(uid, img, shown, error))
        return FALSE;
    E_TransferSyntax read_xfer = uid.empty() ? EXS_Unknown : DcmXfer(uid.c_str()).getXfer();
    if (!uid.empty() && j2k_read_syntax(uid.c_str()) != EXS_Unknown)
        read_xfer = j2k_read_syntax(uid.c_str()); /* HTJ2K is unknown to DCMTK 3.6.7 */
    const gsize start = (gsize)stream.tell();
    if (read_xfer == EXS_DeflatedLittleEndianExplicit) {
        const gsize cap =
            (gsize)MIN((guint64)G_MAXUINT32, 16 * limits->max_pixels + ((guint64)64 << 20));
        if (!inflate_dataset(data + start, len - start, cap, inflated, shown, error))
            return FALSE;
        if (!check_nesting(inflated.data(), inflated.size(), EXS_LittleEndianExplicit, shown,
                           error))
            return FALSE;
        MemoryStream plain(inflated.data(), (offile_off_t)inflated.size());
        st = ds->read(plain, EXS_LittleEndianExplicit, EGL_noChange, kDeferredValueBytes);
    } else {
        if (!check_nesting(data + start, len - start, read_xfer, shown, error))
            return FALSE;
        st = ds->read(stream, read_xfer, EGL_noChange, kDeferredValueBytes);
    }
    ff.transferEnd();
    if (st.bad()) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "the DICOM file is truncated or damaged (%s)", st.text());
        return FALSE;
    }
    if (uid.empty()) {
        /* No meta header (ACR-NEMA style stream): DCMTK detected the encoding. */
        uid = DcmXfer(ds->getOriginalXfer()).getXferID();
        if (!check_transfer_syntax(uid, img, shown, error))
            return FALSE;
    }
    return TRUE;
}

/* Encapsulated Pixel Data decoded in place: h becomes the decoded layout (its photometric
 * interpretation still the file's) and pixel the decoded element. */
gboolean decompress(DcmDataset *ds, const DcmXfer &xfer, PixelHeader &h, DcmElement *&pixel,
                    ClImage *img, const char *shown, GError **error)
{
    if (is_ijg_syntax(xfer.getXfer()) && !check_jpeg_fragments(pixel, xfer, shown, error))
        return FALSE;
    OFCondition st = ds->chooseRepresentation(EXS_LittleEndianExplicit, NULL);
    if (st.bad() || !ds->hasRepresentation(EXS_LittleEndianExplicit, NULL)) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown, "cannot decode the %s pixel data: %s",
                  img->transfer_syntax, st.bad() ? st.text() : "no decoded representation");
        return FALSE;
    }
    PixelHeader after;
    if (!read_pixel_header(ds, after, shown, error))
        return FALSE;
    /* The JPEG decoder rewrites Bits Allocated/Stored from the stream's precision (that is
     * fine) and lowers Number of Frames to the fragments present (a truncated file). */
    if (after.frames != h.frames) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown,
                  "the %s pixel data holds %u of the %u frames the header declares",
                  img->transfer_syntax, after.frames, h.frames);
        return FALSE;
    }
    if (after.rows != h.rows || after.cols != h.cols || after.spp != h.spp) {
        set_error(error, CL_IMAGE_ERROR_CORRUPT, shown, "the %s decoder changed the image geometry",
                  img->transfer_syntax);
        return FALSE;
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
        return FALSE;
    }
    return TRUE;
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

    g_autoptr(ClImage) img = cl_image_new(CL_IMAGE_FORMAT_DICOM);
    std::vector<Uint8> inflated; /* outlives ff: deferred values are read from it */
    DcmFileFormat ff;
    if (!read_file(data, len, limits, ff, inflated, img, shown, error))
        return NULL;
    DcmDataset *ds = ff.getDataset();
    DcmXfer xfer(img->transfer_syntax_uid);
    DcmElement *pixel = NULL;
    if (!find_pixel_data(ds, pixel, shown, error))
        return NULL;

    /* Original values, read before the decoder rewrites photometric and friends. */
    const OFString orig_charset = get_string(ds, DCM_SpecificCharacterSet);
    const bool j2k = j2k_read_syntax(img->transfer_syntax_uid) != EXS_Unknown;
    PixelHeader h;
    if (!read_pixel_header(ds, h, shown, error, j2k))
        return NULL;
    const guint out_channels = h.spp == 1 && h.colour != Colour::PALETTE ? 1 : 3;
    /* Before anything is decompressed or allocated: the decoders size their output from
     * these same attributes. */
    if (!cl_image_check_limits(limits, h.cols, h.rows, h.frames, out_channels, error)) {
        g_prefix_error(error, "%s: ", shown);
        return NULL;
    }

    add_file_metadata(img, ff.getMetaInfo(), ds, orig_charset);
    img->photometric = dup_utf8(h.photometric.c_str());
    if (j2k) {
        std::vector<Uint8> native;
        if (!decode_j2k(pixel, h, native, img, shown, error) ||
            !decode_native(img, ds, native, h, out_channels, shown, error))
            return NULL;
    } else {
        const bool decompressed = xfer.isEncapsulated();
        if (decompressed && !decompress(ds, xfer, h, pixel, img, shown, error))
            return NULL;
        if (!decode_pixels(img, ds, pixel, h, xfer, decompressed, out_channels, shown, error))
            return NULL;
    }
    read_display(img, ds, h, shown);
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