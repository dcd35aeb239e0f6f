/* dicom-private.h - what the pieces of the DICOM loader share: attribute access (dicom-meta.cc),
 * the Image Pixel header and lookup tables (dicom-pixels.cc), used by the loader in dicom.cc. */
#pragma once

/* osconfig.h must come before every other DCMTK header. */
#include <dcmtk/config/osconfig.h>

#include <dcmtk/dcmdata/dcdatset.h>
#include <dcmtk/dcmdata/dcmetinf.h>
#include <dcmtk/dcmdata/dcxfer.h>

#include <vector>

#include "image/loaders.h"

namespace cl_dicom
{

/* ---- nesting (dicom-depth.cc) ---- */

/* The deepest sequence nesting read: real files nest a few levels (structured reports some
 * tens); DCMTK's reader recurses once per level. */
const unsigned kMaxSequenceDepth = 128;

/* Whether a data set's sequences nest at most max_depth deep (false only when they are found
 * to nest deeper; data the walk cannot follow is left to DCMTK). */
bool nesting_within(const Uint8 *data, size_t len, bool implicit_vr, bool big_endian,
                    unsigned max_depth);

/* ---- errors, strings and attributes (dicom-meta.cc) ---- */

/* "shown: message" in CL_IMAGE_ERROR. */
void set_error(GError **error, ClImageError code, const char *shown, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);
/* A DICOM string as UTF-8 (Latin-1 when it is not valid UTF-8); NULL for empty. */
char *dup_utf8(const char *s);
OFString get_string(DcmItem *item, const DcmTagKey &tag);
char *get_utf8(DcmItem *item, const DcmTagKey &tag);
bool get_u16(DcmItem *item, const DcmTagKey &tag, Uint16 &out, unsigned long pos = 0);
bool get_f64(DcmItem *item, const DcmTagKey &tag, double &out, unsigned long pos = 0);
DcmItem *seq_item(DcmItem *item, const DcmTagKey &seq, unsigned long n);
/* "Basic Text SR" for a SOP Class UID DCMTK knows; NULL otherwise. */
char *readable_sop_name(const char *uid);

/* ---- the Image Pixel module (dicom-pixels.cc) ---- */

enum class Colour { GREY, RGB, YBR_FULL, YBR_FULL_422, PALETTE };

struct PixelHeader {
    Uint16 rows = 0, cols = 0, spp = 1, ba = 0, bs = 0, hb = 0, pr = 0, planar = 0;
    guint32 frames = 1;
    OFString photometric;
    Colour colour = Colour::GREY;
};

/* A lookup table (palette or VOI): n entries, the stored value mapped to entry 0, output bits. */
struct Lut {
    std::vector<guint16> data;
    gint32 first = 0;
    unsigned bits = 16;
};

/* Reads and cross-checks every attribute that says how Pixel Data is laid out. With j2k, the
 * JPEG 2000 photometric interpretations YBR_RCT and YBR_ICT are taken as RGB (the decoder
 * undoes the component transform). */
gboolean read_pixel_header(DcmItem *ds, PixelHeader &h, const char *shown, GError **error,
                           bool j2k = false);
/* A LUT from its descriptor (entries, first stored value mapped, bits) and its data. */
gboolean read_lut(DcmItem *item, const DcmTagKey &desc_tag, const DcmTagKey &data_tag,
                  bool signed_first, Lut &lut, const char *shown, const char *what, GError **error);
/* The samples of (decoded) Pixel Data into img's frames, out_channels planes each: sets img's
 * size and sample format, expands palettes and converts YBR to RGB. */
gboolean decode_pixels(ClImage *img, DcmDataset *ds, DcmElement *pixel, const PixelHeader &h,
                       const DcmXfer &xfer, bool decompressed, guint out_channels,
                       const char *shown, GError **error);

/* Samples already decoded into native layout (as decode_j2k leaves them: little endian, Bits
 * Allocated each, the stored value in the low Bits Stored bits, planes when h.planar) into
 * img's frames, like decode_pixels. */
gboolean decode_native(ClImage *img, DcmDataset *ds, const std::vector<Uint8> &bytes,
                       const PixelHeader &h, guint out_channels, const char *shown, GError **error);

/* ---- JPEG 2000 and HTJ2K (dicom-j2k.cc) ---- */

/* The syntax DCMTK reads a JPEG 2000 or HTJ2K data set as (explicit VR little endian,
 * encapsulated); EXS_Unknown when uid is no syntax decode_j2k decodes. */
E_TransferSyntax j2k_read_syntax(const char *uid);
/* Every frame of pixel (encapsulated; img names the syntax) decoded through OpenJPEG into out
 * in the layout decode_native reads; h becomes that layout. */
gboolean decode_j2k(DcmElement *pixel, PixelHeader &h, std::vector<Uint8> &out, ClImage *img,
                    const char *shown, GError **error);

/* ---- metadata (dicom-meta.cc) ---- */

/* The metadata shown for the file and img's identity fields, strings converted to UTF-8 from
 * the file's character set (orig_charset, read before the conversion). */
void add_file_metadata(ClImage *img, DcmMetaInfo *meta, DcmDataset *ds,
                       const OFString &orig_charset);
/* What the display needs besides the pixels: modality LUT per frame, window presets, VOI LUTs
 * and the pixel spacing. */
void read_display(ClImage *img, DcmDataset *ds, const PixelHeader &h, const char *shown);

} /* namespace cl_dicom */
