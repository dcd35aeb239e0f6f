// pacs-report.cc - a case's report as DICOM objects in the study of its images: an Encapsulated
// PDF (the PDF report as it is) and a Basic Text SR (the accepted description and where it came
// from), each in a new series. Patient and study come from one of the study's own files, its
// texts converted to UTF-8; UIDs are 2.25 UUID-derived (no registered root needed).
#include <dcmtk/config/osconfig.h>

#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcdict.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmsr/dsrdoc.h>
#include <dcmtk/oflog/oflog.h>

#include <glib/gstdio.h>
#include <mutex>
#include <string>
#include <vector>

extern "C" {
#include "image/dicom-uid.h"
#include "pacs/pacs.h"
}

namespace
{

std::once_flag log_once;

/* 2.25.<the decimal value of a random version-4 UUID> (PS3.5 B.2) */
std::string new_uid()
{
    g_autofree char *uuid = g_uuid_string_random();
    guint32 limb[4] = { 0, 0, 0, 0 };
    int nib = 0;
    for (const char *c = uuid; *c; c++) {
        if (*c == '-')
            continue;
        limb[nib / 8] = (limb[nib / 8] << 4) | (guint32)g_ascii_xdigit_value(*c);
        nib++;
    }
    char uid[64];
    cl_dicom_uid_2_25(limb, uid, sizeof uid);
    return uid;
}

/* The patient and study modules copied from the study's file. */
const DcmTagKey study_tags[] = {
    DCM_PatientName,      DCM_PatientID,       DCM_IssuerOfPatientID,
    DCM_PatientBirthDate, DCM_PatientSex,      DCM_StudyInstanceUID,
    DCM_StudyDate,        DCM_StudyTime,       DCM_ReferringPhysicianName,
    DCM_StudyID,          DCM_AccessionNumber, DCM_StudyDescription,
};

struct Study {
    DcmFileFormat ff;
    std::string study_uid;
};

gboolean load_study(const ClPacsReportInfo *info, Study &st, GError **error)
{
    std::call_once(log_once, [] { OFLog::configure(OFLogger::OFF_LOG_LEVEL); });
    if (!dcmDataDict.isDictionaryLoaded()) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID,
                    "DCMTK's data dictionary is not installed (set DCMDICTPATH to dicom.dic)");
        return FALSE;
    }
    if (!info || !info->study_file) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID, "no DICOM file of the study");
        return FALSE;
    }
    OFCondition c = st.ff.loadFile(info->study_file);
    if (c.bad()) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_IO, "cannot read %s as DICOM: %s",
                    info->study_file, c.text());
        return FALSE;
    }
    DcmDataset *ds = st.ff.getDataset();
    /* a file without a character set is ASCII, which is UTF-8 already */
    ds->convertToUTF8();
    OFString uid;
    if (ds->findAndGetOFString(DCM_StudyInstanceUID, uid).bad() || uid.empty()) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID,
                    "%s has no StudyInstanceUID: no study to put the report in", info->study_file);
        return FALSE;
    }
    st.study_uid = uid.c_str();
    return TRUE;
}

/* the study's patient and study attributes into ds (those the file has; type 2 ones empty) */
void copy_study(Study &st, DcmDataset *ds)
{
    DcmDataset *src = st.ff.getDataset();
    for (const DcmTagKey &t : study_tags) {
        OFString v;
        src->findAndGetOFStringArray(t, v);
        ds->putAndInsertString(t, v.c_str());
    }
    ds->putAndInsertString(DCM_SpecificCharacterSet, "ISO_IR 192");
}

void now_da_tm(char date[9], char time[7])
{
    g_autoptr(GDateTime) now = g_date_time_new_now_local();
    g_autofree char *d = g_date_time_format(now, "%Y%m%d");
    g_autofree char *t = g_date_time_format(now, "%H%M%S");
    g_strlcpy(date, d, 9);
    g_strlcpy(time, t, 7);
}

gboolean save(DcmFileFormat &ff, const char *out_path, GError **error)
{
    /* written next to the target and renamed: never half a file at out_path */
    g_autofree char *tmp = g_strconcat(out_path, ".part", NULL);
    OFCondition c = ff.saveFile(tmp, EXS_LittleEndianExplicit, EET_ExplicitLength, EGL_recalcGL,
                                EPD_noChange, 0, 0, EWM_createNewMeta);
    if (c.bad() || g_rename(tmp, out_path) != 0) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_IO, "cannot write %s: %s", out_path,
                    c.bad() ? c.text() : g_strerror(errno));
        g_unlink(tmp);
        return FALSE;
    }
    return TRUE;
}

const char *or_empty(const char *s)
{
    return s ? s : "";
}

} // namespace

extern "C" gboolean cl_pacs_write_encapsulated_pdf(const ClPacsReportInfo *info,
                                                   const char *pdf_path, const char *out_path,
                                                   GError **error)
{
    Study st;
    if (!load_study(info, st, error))
        return FALSE;
    g_autofree char *pdf = NULL;
    gsize len = 0;
    g_autoptr(GError) rerr = NULL;
    if (!g_file_get_contents(pdf_path, &pdf, &len, &rerr)) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_IO, "%s", rerr->message);
        return FALSE;
    }
    if (len < 5 || memcmp(pdf, "%PDF-", 5) != 0 || len >= G_MAXUINT32 - 1) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID, "%s is not a PDF file", pdf_path);
        return FALSE;
    }
    char date[9], time[7];
    now_da_tm(date, time);
    std::string series = new_uid(), sop = new_uid();
    std::string datetime = std::string(date) + time;
    DcmFileFormat ff;
    DcmDataset *ds = ff.getDataset();
    copy_study(st, ds);
    const struct {
        DcmTagKey tag;
        const char *value;
    } tags[] = {
        { DCM_SOPClassUID, UID_EncapsulatedPDFStorage },
        { DCM_SOPInstanceUID, sop.c_str() },
        { DCM_SeriesInstanceUID, series.c_str() },
        { DCM_Modality, "DOC" },
        { DCM_SeriesNumber, "9001" },
        { DCM_SeriesDescription, "ChangeLens report (PDF)" },
        { DCM_SeriesDate, date },
        { DCM_SeriesTime, time },
        { DCM_InstanceNumber, "1" },
        { DCM_ContentDate, date },
        { DCM_ContentTime, time },
        { DCM_AcquisitionDateTime, datetime.c_str() },
        { DCM_ConversionType, "WSD" },
        { DCM_Manufacturer, or_empty(info->manufacturer) },
        { DCM_SoftwareVersions, or_empty(info->software) },
        /* the PDF shows the patient's identity unless it was de-identified */
        { DCM_BurnedInAnnotation, "YES" },
        { DCM_DocumentTitle, or_empty(info->title) },
        { DCM_MIMETypeOfEncapsulatedDocument, "application/pdf" },
    };
    for (const auto &t : tags)
        ds->putAndInsertString(t.tag, t.value);
    ds->insertEmptyElement(DCM_ConceptNameCodeSequence);
    /* OB of even length: one pad byte after an odd-length PDF (PS3.3 C.24.2.1) */
    std::vector<Uint8> bytes(pdf, pdf + len);
    if (bytes.size() % 2)
        bytes.push_back(0);
    ds->putAndInsertUint8Array(DCM_EncapsulatedDocument, bytes.data(), (unsigned long)bytes.size());
    ds->putAndInsertUint32(DCM_EncapsulatedDocumentLength, (Uint32)len);
    return save(ff, out_path, error);
}

extern "C" gboolean cl_pacs_write_text_sr(const ClPacsReportInfo *info, const char *out_path,
                                          GError **error)
{
    Study st;
    if (!load_study(info, st, error))
        return FALSE;
    if (!info->description || !*info->description) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID, "the description is empty");
        return FALSE;
    }
    DSRDocument doc(DSRTypes::DT_BasicTextSR);
    doc.setSpecificCharacterSetType(DSRTypes::CS_UTF8);
    doc.createNewSeriesInStudy(st.study_uid.c_str());
    doc.setSeriesDescription("ChangeLens report (description)");
    doc.setSeriesNumber("9002");
    doc.setManufacturer(or_empty(info->manufacturer));
    doc.setInstanceNumber("1");
    /* the description was accepted: the content is complete (verification, a signed-off
     * report with its organisation, is for the PACS side to do) */
    doc.completeDocument();
    DSRDocumentTree &tree = doc.getTree();
    gboolean ok = TRUE;
    /* the title: LOINC 18748-4, Diagnostic Imaging Report */
    ok = ok && tree.addContentItem(DSRTypes::RT_isRoot, DSRTypes::VT_Container) > 0;
    ok = ok && tree.getCurrentContentItem()
                   .setConceptName(DSRCodedEntryValue("18748-4", "LN", "Diagnostic Imaging Report"))
                   .good();
    /* observation context first (PS3.3 C.17.3.2.1): who accepted it, what generated it */
    struct Child {
        DSRTypes::E_RelationshipType rel;
        DSRTypes::E_ValueType type;
        const char *code, *scheme, *meaning;
        const char *value;
    };
    g_autofree char *version = info->model_sha256 && *info->model_sha256
                                   ? g_strdup_printf("sha256:%s", info->model_sha256)
                                   : NULL;
    g_autofree char *accepted = g_strdup_printf(
        "Accepted by %s%s%s; generated on %s by %s",
        *or_empty(info->reviewer) ? info->reviewer : "an unnamed reviewer",
        *or_empty(info->accepted_at) ? " at " : "", or_empty(info->accepted_at),
        *or_empty(info->device) ? info->device : "an unrecorded device", or_empty(info->software));
    std::vector<Child> kids;
    if (info->reviewer && *info->reviewer)
        kids.push_back({ DSRTypes::RT_hasObsContext, DSRTypes::VT_PName, "121008", "DCM",
                         "Person Observer Name", info->reviewer });
    if (info->model_name && *info->model_name) {
        kids.push_back({ DSRTypes::RT_hasObsContext, DSRTypes::VT_Text, "111001", "DCM",
                         "Algorithm Name", info->model_name });
        if (version)
            kids.push_back({ DSRTypes::RT_hasObsContext, DSRTypes::VT_Text, "111003", "DCM",
                             "Algorithm Version", version });
    }
    kids.push_back({ DSRTypes::RT_contains, DSRTypes::VT_Text, "121071", "DCM", "Finding",
                     info->description });
    kids.push_back(
        { DSRTypes::RT_contains, DSRTypes::VT_Text, "121106", "DCM", "Comment", accepted });
    bool first = true;
    for (const Child &k : kids) {
        if (!ok)
            break;
        ok = tree.addContentItem(k.rel, k.type,
                                 first ? DSRTypes::AM_belowCurrent : DSRTypes::AM_afterCurrent) > 0;
        first = false;
        DSRContentItem &item = tree.getCurrentContentItem();
        ok = ok && item.setConceptName(DSRCodedEntryValue(k.code, k.scheme, k.meaning)).good();
        ok = ok && item.setStringValue(k.value, OFFalse).good();
    }
    if (!ok) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID,
                    "cannot build the structured report (a content item was refused)");
        return FALSE;
    }
    DcmFileFormat ff;
    DcmDataset *ds = ff.getDataset();
    OFCondition c = doc.write(*ds);
    if (c.bad()) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID,
                    "cannot write the structured report: %s", c.text());
        return FALSE;
    }
    copy_study(st, ds);
    ds->putAndInsertString(DCM_SoftwareVersions, or_empty(info->software));
    /* UIDs of the same kind as the PDF's, not under DCMTK's root */
    ds->putAndInsertString(DCM_SeriesInstanceUID, new_uid().c_str());
    ds->putAndInsertString(DCM_SOPInstanceUID, new_uid().c_str());
    return save(ff, out_path, error);
}
