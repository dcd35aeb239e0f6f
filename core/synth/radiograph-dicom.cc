// radiograph-dicom.cc - the radiograph task's films as DICOM (DCMTK): DX For Presentation,
// MONOCHROME2, 12 bits stored in 16, one synthetic patient per sample with the reference study
// dated before the main one, UIDs under 2.25 derived from the sample's seed. Written through a
// temporary file and a rename, so a data set never holds half a file.
#include <dcmtk/config/osconfig.h>

#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcdict.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/oflog/oflog.h>

#include <cairo.h>
#include <cerrno>
#include <glib/gstdio.h>
#include <mutex>
#include <vector>

#include "image/dicom-uid.h"
#include "synth/synth.h" /* C linkage of its own (G_BEGIN_DECLS) */
extern "C" {
#include "synth/synth-private.h" /* has none */
}

namespace
{

std::once_flag log_once;

/* 2.25.<decimal>: the UUID-derived root needs no registration; the number is 128 bits of hash
 * of (seed, what), written in decimal without leading zeros. */
void make_uid(char *out, gsize len, guint64 seed, guint64 what)
{
    guint64 st = seed ^ (what * G_GUINT64_CONSTANT(0x9e3779b97f4a7c15));
    guint64 hi = cl_synth_splitmix64(&st) >> 1, lo = cl_synth_splitmix64(&st); /* < 2^127 */
    guint32 limb[4] = { (guint32)(hi >> 32), (guint32)hi, (guint32)(lo >> 32), (guint32)lo };
    cl_dicom_uid_2_25(limb, out, len);
}

gboolean put(DcmDataset *ds, const DcmTagKey &tag, const char *value, const char *path,
             GError **error)
{
    OFCondition c = ds->putAndInsertString(tag, value);
    if (c.bad()) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_IO, "cannot write %s: DICOM %s: %s", path,
                    DcmTag(tag).getTagName(), c.text());
        return FALSE;
    }
    return TRUE;
}

/* The study dates of a patient: the main study between 2012 and 2023, the reference 1 to 720
 * days before it; times in working hours. */
void study_datetime(guint64 seed, int k, char date[9], char time[7])
{
    guint64 st = seed ^ G_GUINT64_CONSTANT(0x5eedda7e);
    guint64 a = cl_synth_splitmix64(&st), b = cl_synth_splitmix64(&st);
    GDate *d = g_date_new_dmy(1, G_DATE_JANUARY, 2012);
    g_date_add_days(d, (guint)(a % 4000));
    if (k == 0)
        g_date_subtract_days(d, 1 + (guint)((a >> 20) % 720));
    g_snprintf(date, 9, "%04d%02d%02d", g_date_get_year(d), g_date_get_month(d), g_date_get_day(d));
    g_date_free(d);
    guint sec = 8 * 3600 + (guint)((b >> (k ? 32 : 0)) % (9 * 3600));
    g_snprintf(time, 7, "%02u%02u%02u", sec / 3600, sec / 60 % 60, sec % 60);
}

} // namespace

extern "C" gboolean cl_synth_radiograph_write(const ClSynthSample *s, int k, const char *path,
                                              GError **error)
{
    g_return_val_if_fail(s && path, FALSE);
    if (k < 0 || k >= s->n_images || !s->images || !s->images[k].pixels ||
        (s->images[k].channels != 1 && s->images[k].channels != 3)) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS,
                    "cannot write %s: the sample has no grey or RGB image %d", path, k);
        return FALSE;
    }
    std::call_once(log_once, [] { OFLog::configure(OFLogger::OFF_LOG_LEVEL); });
    if (!dcmDataDict.isDictionaryLoaded()) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_IO,
                    "cannot write %s: DCMTK's data dictionary is not installed (set DCMDICTPATH "
                    "to dicom.dic)",
                    path);
        return FALSE;
    }
    const ClSynthImage *img = &s->images[k];
    const guint w = (guint)img->width, h = (guint)img->height, ch = (guint)img->channels;

    /* The film's grey (the channels' rounded mean: the renderer's noise is per channel) scaled
     * to the 12 bits, 0 -> 0 and 255 -> 4095, rounded (v * 4095 / 255 is never a half). */
    std::vector<Uint16> words((size_t)w * h);
    Uint16 lo = 4095, hi = 0;
    for (size_t i = 0; i < words.size(); i++) {
        const guint8 *p = img->pixels + i * ch;
        guint v = ch == 3 ? (p[0] + p[1] + p[2] + 1) / 3 : p[0];
        words[i] = (Uint16)((v * 4095 + 127) / 255);
        lo = MIN(lo, words[i]);
        hi = MAX(hi, words[i]);
    }

    char study_uid[80], series_uid[80], sop_uid[80], date[9], time[7];
    make_uid(study_uid, sizeof study_uid, s->seed, 10 + (guint64)k);
    make_uid(series_uid, sizeof series_uid, s->seed, 20 + (guint64)k);
    make_uid(sop_uid, sizeof sop_uid, s->seed, 30 + (guint64)k);
    study_datetime(s->seed, k, date, time);
    g_autofree char *patient_id = g_strdup_printf("SYNTH%06u", (guint)(s->seed % 1000000));
    g_autofree char *patient_name = g_strdup_printf("SYNTH^P%06u", (guint)(s->seed % 1000000));
    g_autofree char *accession = g_strdup_printf("SY%06u%d", (guint)(s->seed % 1000000), k + 1);
    g_autofree char *datetime = g_strconcat(date, time, NULL);
    /* 0.7 mm at 512 pixels, the detector's field of view kept at other sizes */
    char spacing[64], centre[32], width[32], buf[32];
    g_ascii_formatd(buf, sizeof buf, "%.6g", 0.7 * 512.0 / h);
    g_strlcpy(spacing, buf, sizeof spacing);
    g_strlcat(spacing, "\\", sizeof spacing);
    g_ascii_formatd(buf, sizeof buf, "%.6g", 0.7 * 512.0 / w);
    g_strlcat(spacing, buf, sizeof spacing);
    g_snprintf(centre, sizeof centre, "%u", (guint)(lo + hi + 1) / 2);
    g_snprintf(width, sizeof width, "%u", (guint)(hi - lo) + 1);
    g_autofree char *instance = g_strdup_printf("%d", k + 1);

    DcmFileFormat ff;
    DcmDataset *ds = ff.getDataset();
    const struct {
        DcmTagKey tag;
        const char *value;
    } tags[] = {
        { DCM_SpecificCharacterSet, "ISO_IR 192" },
        { DCM_ImageType, "ORIGINAL\\PRIMARY" },
        { DCM_SOPClassUID, UID_DigitalXRayImageStorageForPresentation },
        { DCM_SOPInstanceUID, sop_uid },
        { DCM_StudyDate, date },
        { DCM_SeriesDate, date },
        { DCM_AcquisitionDate, date },
        { DCM_ContentDate, date },
        { DCM_AcquisitionDateTime, datetime },
        { DCM_StudyTime, time },
        { DCM_SeriesTime, time },
        { DCM_AcquisitionTime, time },
        { DCM_ContentTime, time },
        { DCM_AccessionNumber, accession },
        { DCM_Modality, "DX" },
        { DCM_PresentationIntentType, "FOR PRESENTATION" },
        { DCM_Manufacturer, "ChangeLens synthetic phantom" },
        { DCM_StudyDescription, "CHEST PA" },
        { DCM_SeriesDescription, k == 0 ? "reference (prior)" : "current" },
        { DCM_PatientName, patient_name },
        { DCM_PatientID, patient_id },
        { DCM_PatientBirthDate, "" },
        { DCM_PatientSex, "O" },
        { DCM_BurnedInAnnotation, "NO" },
        { DCM_BodyPartExamined, "CHEST" },
        { DCM_ViewPosition, "PA" },
        { DCM_PatientOrientation, "L\\F" },
        { DCM_StudyInstanceUID, study_uid },
        { DCM_SeriesInstanceUID, series_uid },
        { DCM_StudyID, accession },
        { DCM_SeriesNumber, "1" },
        { DCM_InstanceNumber, instance },
        { DCM_PhotometricInterpretation, "MONOCHROME2" },
        { DCM_PixelSpacing, spacing },
        { DCM_ImagerPixelSpacing, spacing },
        { DCM_WindowCenter, centre },
        { DCM_WindowWidth, width },
        { DCM_WindowCenterWidthExplanation, "FULL RANGE" },
        { DCM_RescaleIntercept, "0" },
        { DCM_RescaleSlope, "1" },
        { DCM_RescaleType, "US" },
        { DCM_LossyImageCompression, "00" },
    };
    for (const auto &t : tags)
        if (!put(ds, t.tag, t.value, path, error))
            return FALSE;
    ds->putAndInsertUint16(DCM_Rows, (Uint16)h);
    ds->putAndInsertUint16(DCM_Columns, (Uint16)w);
    ds->putAndInsertUint16(DCM_SamplesPerPixel, 1);
    ds->putAndInsertUint16(DCM_BitsAllocated, 16);
    ds->putAndInsertUint16(DCM_BitsStored, 12);
    ds->putAndInsertUint16(DCM_HighBit, 11);
    ds->putAndInsertUint16(DCM_PixelRepresentation, 0);
    OFCondition c =
        ds->putAndInsertUint16Array(DCM_PixelData, words.data(), (unsigned long)words.size());
    if (c.bad()) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_IO, "cannot write %s: %s", path,
                    c.text());
        return FALSE;
    }

    g_autofree char *tmp = g_strconcat(path, ".tmp", NULL);
    c = ff.saveFile(tmp, EXS_LittleEndianExplicit, EET_ExplicitLength, EGL_recalcGL, EPD_noChange,
                    0, 0, EWM_createNewMeta);
    if (c.bad()) {
        g_unlink(tmp);
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_IO, "cannot write %s: %s", tmp, c.text());
        return FALSE;
    }
    if (g_rename(tmp, path) != 0) {
        int e = errno;
        g_unlink(tmp);
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_IO, "cannot rename %s to %s: %s", tmp,
                    path, g_strerror(e));
        return FALSE;
    }
    return TRUE;
}
