/* dicom-meta.cc - DICOM attributes for the DICOM loader: typed access, the metadata shown,
 * identity, window presets, modality and VOI LUTs, pixel spacing. */
#include "cl-config.h"

#include "image/dicom-private.h"

#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcsequen.h>
#include <dcmtk/dcmdata/dcuid.h>

#include <cmath>
#include <cstring>

namespace cl_dicom
{

/* ---------------------------------------------------------------------------------------------
 * Errors and strings
 * ------------------------------------------------------------------------------------------- */

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

/* All values of a string-like element of item itself (never one nested in its sequences: a
 * Patient's Name inside ReferencedImageSequence is not this image's) joined with '\', padding
 * removed; empty if absent. */
OFString get_string(DcmItem *item, const DcmTagKey &tag)
{
    OFString v;
    if (!item || item->findAndGetOFStringArray(tag, v, OFFalse /* searchIntoSub */).bad())
        return OFString();
    return v;
}

char *get_utf8(DcmItem *item, const DcmTagKey &tag)
{
    OFString v = get_string(item, tag);
    return dup_utf8(v.c_str());
}

/* US or SS (the "xs" VRs of LUT descriptors): the 16 stored bits, interpreted by the caller. */
bool get_u16(DcmItem *item, const DcmTagKey &tag, Uint16 &out, unsigned long pos)
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

bool get_f64(DcmItem *item, const DcmTagKey &tag, double &out, unsigned long pos)
{
    Float64 v;
    if (!item || item->findAndGetFloat64(tag, v, pos).bad() || !std::isfinite(v))
        return false;
    out = v;
    return true;
}

DcmItem *seq_item(DcmItem *item, const DcmTagKey &seq, unsigned long n)
{
    DcmItem *out = NULL;
    if (!item || item->findAndGetSequenceItem(seq, out, (signed long)n).bad())
        return NULL;
    return out;
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

namespace
{

unsigned long value_count(DcmItem *item, const DcmTagKey &tag)
{
    DcmElement *e = NULL;
    if (!item || item->findAndGetElement(tag, e).bad() || !e || e->getLength() == 0)
        return 0;
    return e->getVM();
}

/* The first item of a functional group macro in a Shared or Per-frame Functional Groups item. */
DcmItem *fg_macro(DcmItem *group_item, const DcmTagKey &macro)
{
    return seq_item(group_item, macro, 0);
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

} /* namespace */

void add_file_metadata(ClImage *img, DcmMetaInfo *meta, DcmDataset *ds,
                       const OFString &orig_charset)
{
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
}

void read_display(ClImage *img, DcmDataset *ds, const PixelHeader &h, const char *shown)
{
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
}

} /* namespace cl_dicom */
