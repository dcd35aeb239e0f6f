// pacs.cc - DIMSE query/retrieve/store through DCMTK's DcmSCU: C-FIND (Study Root, study and
// series level), C-GET of a study (its SOP classes found first with an image-level C-FIND, so
// the association proposes exactly what will come), C-STORE of files. Every association is
// non-blocking with the peer's timeout on connect, association and each message.
#include <dcmtk/config/osconfig.h>

#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcdict.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmnet/diutil.h>
#include <dcmtk/dcmnet/scu.h>
#include <dcmtk/oflog/oflog.h>

#include <algorithm>
#include <glib/gstdio.h>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

extern "C" {
#include "pacs/pacs-private.h"
#include "pacs/pacs.h"
}

G_DEFINE_QUARK(cl - pacs - error - quark, cl_pacs_error)

namespace
{

std::once_flag log_once;

void quiet_dcmtk()
{
    std::call_once(log_once, [] { OFLog::configure(OFLogger::OFF_LOG_LEVEL); });
}

std::string peer_name(const ClPacsPeer *p)
{
    return std::string("PACS at ") + p->host + ":" + std::to_string(p->port) + " (" +
           p->called_aet + ")";
}

/* An AE title: 1-16 characters of the default repertoire, no backslash, not only spaces. */
gboolean check_aet(const char *what, const char *aet, GError **error)
{
    gboolean ok = aet && *aet && strlen(aet) <= 16;
    gboolean blank = TRUE;
    for (const char *c = aet; ok && *c; c++) {
        ok = *c >= 0x20 && *c < 0x7f && *c != '\\';
        blank = blank && *c == ' ';
    }
    if (!ok || blank) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID,
                    "%s AE title must be 1 to 16 printable ASCII characters without '\\', not "
                    "'%s'",
                    what, aet ? aet : "");
        return FALSE;
    }
    return TRUE;
}

gboolean check_peer(const ClPacsPeer *p, GError **error)
{
    if (!p || !p->host || !*p->host) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID, "no PACS host given");
        return FALSE;
    }
    if (p->port == 0) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID, "no PACS port given");
        return FALSE;
    }
    if (!check_aet("our", p->our_aet, error) || !check_aet("the PACS's", p->called_aet, error))
        return FALSE;
    if (!dcmDataDict.isDictionaryLoaded()) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID,
                    "DCMTK's data dictionary is not installed (set DCMDICTPATH to dicom.dic)");
        return FALSE;
    }
    return TRUE;
}

guint timeout_of(const ClPacsPeer *p)
{
    return p->timeout_s ? p->timeout_s : 30;
}

/* A DIMSE or network failure in words: connection, rejection, timeout, the rest. */
void set_net_error(GError **error, const ClPacsPeer *p, const char *doing, const OFCondition &c)
{
    std::string text = c.text();
    std::string lower = text;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    std::string who = peer_name(p);
    ClPacsError code = CL_PACS_ERROR_FAILED;
    std::string msg;
    if (c == DUL_ASSOCIATIONREJECTED) {
        code = CL_PACS_ERROR_REJECTED;
        msg = who + " rejected the association (is our AE title '" + p->our_aet +
              "' known to it, and is its AE title '" + p->called_aet + "'?)";
    } else if (c == NET_EC_NoAcceptablePresentationContexts) {
        code = CL_PACS_ERROR_REJECTED;
        msg = who + " accepted none of the services asked for (" + doing + ")";
    } else if (lower.find("refused") != std::string::npos) {
        code = CL_PACS_ERROR_CONNECT;
        msg = "cannot connect to " + who +
              ": connection refused (is it running, is the port "
              "right?)";
    } else if (lower.find("timeout") != std::string::npos ||
               lower.find("timed out") != std::string::npos || c == DIMSE_NODATAAVAILABLE) {
        code = CL_PACS_ERROR_TIMEOUT;
        msg =
            who + " did not answer within " + std::to_string(timeout_of(p)) + " s (" + doing + ")";
    } else if (lower.find("unknown host") != std::string::npos ||
               lower.find("unreachable") != std::string::npos ||
               lower.find("tcp initialization") != std::string::npos) {
        code = CL_PACS_ERROR_CONNECT;
        msg = "cannot connect to " + who + ": " + text;
    } else if (c == DUL_PEERABORTEDASSOCIATION || c == DUL_PEERREQUESTEDRELEASE ||
               c == DUL_NETWORKCLOSED) {
        msg = who + " closed the association while " + doing;
    } else {
        msg = who + ": " + doing + " failed: " + text;
    }
    g_set_error(error, CL_PACS_ERROR, code, "%s", msg.c_str());
}

/* A DIMSE status in words ("0xA700 (out of resources)"). */
std::string status_text(Uint16 s, const OFString &comment)
{
    char hex[16];
    g_snprintf(hex, sizeof hex, "0x%04X", s);
    std::string t = hex;
    const char *what = nullptr;
    if ((s & 0xff00) == 0xa700)
        what = "out of resources";
    else if ((s & 0xff00) == 0xa900 || s == 0xa900)
        what = "data set does not match the SOP class";
    else if ((s & 0xf000) == 0xc000)
        what = "cannot understand";
    else if (s == 0xa801)
        what = "move destination unknown";
    else if (s == 0x0122)
        what = "SOP class not supported";
    else if (s == 0x0124)
        what = "not authorized";
    else if (s == 0xfe00)
        what = "cancelled";
    if (what)
        t += std::string(" (") + what + ")";
    if (!comment.empty())
        t += std::string(": ") + comment.c_str();
    return t;
}

/* The SCU set up for a peer; the association is released (or aborted) when it goes. */
class Scu : public DcmSCU
{
  public:
    explicit Scu(const ClPacsPeer *p)
    {
        guint t = timeout_of(p);
        setAETitle(p->our_aet);
        setPeerHostName(p->host);
        setPeerPort(p->port);
        setPeerAETitle(p->called_aet);
        setConnectionTimeout((Sint32)t);
        setACSETimeout(t);
        setDIMSETimeout(t);
        setDIMSEBlockingMode(DIMSE_NONBLOCKING);
        setProgressNotificationMode(OFFalse);
        setVerbosePCMode(OFFalse);
    }
    ~Scu() override
    {
        if (isConnected())
            releaseAssociation();
    }
    /* after a timeout or a broken message: abort, do not wait for a release answer too */
    void drop()
    {
        if (isConnected())
            abortAssociation();
    }
    /* initNetwork + negotiateAssociation, the failure in words */
    gboolean open(const ClPacsPeer *p, const char *doing, GError **error)
    {
        OFCondition c = initNetwork();
        if (c.good())
            c = negotiateAssociation();
        if (c.bad()) {
            set_net_error(error, p, doing, c);
            return FALSE;
        }
        return TRUE;
    }
};

OFList<OFString> transfer_syntaxes()
{
    OFList<OFString> ts;
    ts.push_back(UID_LittleEndianExplicitTransferSyntax);
    ts.push_back(UID_LittleEndianImplicitTransferSyntax);
    return ts;
}

char *get_string(DcmItem *ds, const DcmTagKey &tag)
{
    OFString v;
    if (ds && ds->findAndGetOFStringArray(tag, v).good())
        return g_strdup(v.c_str());
    return g_strdup("");
}

int get_int(DcmItem *ds, const DcmTagKey &tag)
{
    OFString v;
    gint64 n;
    if (!ds || ds->findAndGetOFString(tag, v).bad())
        return -1;
    /* IS values may carry spaces */
    g_autofree char *s = g_strstrip(g_strdup(v.c_str()));
    return g_ascii_string_to_signed(s, 10, 0, G_MAXINT, &n, NULL) ? (int)n : -1;
}

void add_key(DcmDataset *q, const DcmTagKey &tag, const char *value)
{
    q->putAndInsertString(tag, value ? value : "");
}

/* C-FIND at `level` ("STUDY", "SERIES", "IMAGE") with these keys; the pending answers' data
 * sets (owned by the caller) into out. */
gboolean find(const ClPacsPeer *peer, DcmDataset *q, std::vector<DcmDataset *> &out, GError **error)
{
    Scu scu(peer);
    scu.addPresentationContext(UID_FINDStudyRootQueryRetrieveInformationModel, transfer_syntaxes());
    if (!scu.open(peer, "C-FIND", error))
        return FALSE;
    T_ASC_PresentationContextID pc =
        scu.findPresentationContextID(UID_FINDStudyRootQueryRetrieveInformationModel, "");
    if (!pc) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_REJECTED,
                    "%s does not offer the Study Root query (C-FIND)", peer_name(peer).c_str());
        return FALSE;
    }
    OFList<QRResponse *> rs;
    OFCondition c = scu.sendFINDRequest(pc, q, &rs);
    gboolean ok = TRUE;
    if (c.bad()) {
        set_net_error(error, peer, "C-FIND", c);
        scu.drop();
        ok = FALSE;
    }
    Uint16 final_status = 0xffff;
    OFString comment;
    for (QRResponse *r : rs) {
        if (r->m_dataset && DICOM_PENDING_STATUS(r->m_status)) {
            out.push_back(r->m_dataset);
            r->m_dataset = nullptr;
        } else if (!DICOM_PENDING_STATUS(r->m_status)) {
            final_status = r->m_status;
            if (r->m_statusDetail)
                r->m_statusDetail->findAndGetOFString(DCM_ErrorComment, comment);
        }
        delete r;
    }
    if (ok && final_status != STATUS_Success) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_FAILED, "%s: the query failed: status %s",
                    peer_name(peer).c_str(), status_text(final_status, comment).c_str());
        ok = FALSE;
    }
    if (!ok) {
        for (DcmDataset *d : out)
            delete d;
        out.clear();
    }
    return ok;
}

bool match_before(const ClPacsMatch *a, const ClPacsMatch *b)
{
    return cl_pacs_match_compare(a, b) < 0;
}

/* C-GET's receiving side: each C-STORE sub-operation written as DIR/SOPInstanceUID.dcm. */
class GetScu : public Scu
{
  public:
    GetScu(const ClPacsPeer *p, const char *dir) : Scu(p), dir_(dir)
    {
        setStorageDir(dir);
        setStorageMode(DCMSCU_STORAGE_DISK);
    }
    mutable std::vector<std::string> files;

  protected:
    OFString createStorageFilename(DcmDataset *ds) override
    {
        OFString uid;
        std::string name;
        if (ds && ds->findAndGetOFString(DCM_SOPInstanceUID, uid).good() &&
            cl_pacs_uid_is_safe(uid.c_str()))
            name = std::string(uid.c_str()) + ".dcm";
        else
            name = "instance-" + std::to_string(++unnamed_) + ".dcm";
        g_autofree char *path = g_build_filename(dir_.c_str(), name.c_str(), NULL);
        return OFString(path);
    }
    void notifyInstanceStored(const OFString &filename, const OFString &,
                              const OFString &) const override
    {
        files.push_back(filename.c_str());
    }

  private:
    std::string dir_;
    int unnamed_ = 0;
};

} // namespace

extern "C" int cl_pacs_match_compare(const ClPacsMatch *a, const ClPacsMatch *b)
{
    int c = strcmp(a->study_date, b->study_date);
    if (c == 0)
        c = strcmp(a->study_time, b->study_time);
    if (c == 0)
        c = strcmp(a->study_uid, b->study_uid);
    if (c == 0)
        c = a->series_number - b->series_number;
    return c;
}

extern "C" gboolean cl_pacs_check_query(ClPacsLevel level, const ClPacsQuery *query,
                                        gboolean uid_in_url, GError **error)
{
    auto given = [](const char *s) { return s && *s; };
    if (!query ||
        (!given(query->patient_id) && !given(query->accession) && !given(query->study_uid))) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID,
                    "give a patient ID, an accession number or a study UID to look for");
        return FALSE;
    }
    if (level == CL_PACS_LEVEL_SERIES && !given(query->study_uid)) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID,
                    "listing series needs the study's UID");
        return FALSE;
    }
    if (level == CL_PACS_LEVEL_SERIES && uid_in_url && !cl_pacs_uid_is_safe(query->study_uid)) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID,
                    "'%s' is not a study UID (digits and dots)", query->study_uid);
        return FALSE;
    }
    return TRUE;
}

extern "C" gboolean cl_pacs_check_get(const char *study_uid, const char *out_dir,
                                      gboolean uid_in_url, GError **error)
{
    if (!study_uid || !*study_uid || !out_dir || !*out_dir ||
        (uid_in_url && !cl_pacs_uid_is_safe(study_uid))) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID,
                    uid_in_url ? "retrieving needs a study UID (digits and dots) and a folder"
                               : "retrieving needs a study UID and a folder");
        return FALSE;
    }
    if (g_mkdir_with_parents(out_dir, 0755) != 0) {
        int e = errno;
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_IO, "cannot create %s: %s", out_dir,
                    g_strerror(e));
        return FALSE;
    }
    return TRUE;
}

extern "C" gboolean cl_pacs_uid_is_safe(const char *uid)
{
    if (!uid || !*uid || strlen(uid) > 64 || uid[0] == '.')
        return FALSE;
    for (const char *c = uid; *c; c++)
        if (!g_ascii_isdigit(*c) && *c != '.')
            return FALSE;
    return TRUE;
}

extern "C" void cl_pacs_match_free(ClPacsMatch *m)
{
    if (!m)
        return;
    g_free(m->patient_name);
    g_free(m->patient_id);
    g_free(m->study_date);
    g_free(m->study_time);
    g_free(m->study_description);
    g_free(m->accession);
    g_free(m->study_uid);
    g_free(m->modalities);
    g_free(m->series_uid);
    g_free(m->series_description);
    g_free(m->modality);
    g_free(m);
}

extern "C" GPtrArray *cl_pacs_find(const ClPacsPeer *peer, ClPacsLevel level,
                                   const ClPacsQuery *query, GError **error)
{
    if (peer && peer->dicomweb)
        return cl_dicomweb_find(peer, level, query, error);
    quiet_dcmtk();
    if (!check_peer(peer, error) || !cl_pacs_check_query(level, query, FALSE, error))
        return NULL;
    DcmDataset q;
    add_key(&q, DCM_QueryRetrieveLevel, level == CL_PACS_LEVEL_SERIES ? "SERIES" : "STUDY");
    add_key(&q, DCM_SpecificCharacterSet, "ISO_IR 192");
    add_key(&q, DCM_PatientName, "");
    add_key(&q, DCM_PatientID, query->patient_id);
    add_key(&q, DCM_StudyDate, "");
    add_key(&q, DCM_StudyTime, "");
    add_key(&q, DCM_StudyDescription, "");
    add_key(&q, DCM_AccessionNumber, query->accession);
    add_key(&q, DCM_StudyInstanceUID, query->study_uid);
    if (level == CL_PACS_LEVEL_STUDY) {
        add_key(&q, DCM_ModalitiesInStudy, "");
        add_key(&q, DCM_NumberOfStudyRelatedSeries, "");
        add_key(&q, DCM_NumberOfStudyRelatedInstances, "");
    } else {
        add_key(&q, DCM_SeriesInstanceUID, "");
        add_key(&q, DCM_SeriesDescription, "");
        add_key(&q, DCM_SeriesNumber, "");
        add_key(&q, DCM_Modality, "");
        add_key(&q, DCM_NumberOfSeriesRelatedInstances, "");
    }
    std::vector<DcmDataset *> answers;
    if (!find(peer, &q, answers, error))
        return NULL;
    std::vector<ClPacsMatch *> v;
    for (DcmDataset *d : answers) {
        /* answers in another character set are read as UTF-8 where DCMTK can convert them */
        d->convertToUTF8();
        ClPacsMatch *m = g_new0(ClPacsMatch, 1);
        m->patient_name = get_string(d, DCM_PatientName);
        m->patient_id = get_string(d, DCM_PatientID);
        m->study_date = get_string(d, DCM_StudyDate);
        m->study_time = get_string(d, DCM_StudyTime);
        m->study_description = get_string(d, DCM_StudyDescription);
        m->accession = get_string(d, DCM_AccessionNumber);
        m->study_uid = get_string(d, DCM_StudyInstanceUID);
        m->modalities = get_string(d, DCM_ModalitiesInStudy);
        m->n_series = get_int(d, DCM_NumberOfStudyRelatedSeries);
        m->n_instances =
            get_int(d, level == CL_PACS_LEVEL_SERIES ? DCM_NumberOfSeriesRelatedInstances
                                                     : DCM_NumberOfStudyRelatedInstances);
        m->series_uid = get_string(d, DCM_SeriesInstanceUID);
        m->series_description = get_string(d, DCM_SeriesDescription);
        m->modality = get_string(d, DCM_Modality);
        m->series_number = get_int(d, DCM_SeriesNumber);
        v.push_back(m);
        delete d;
    }
    std::stable_sort(v.begin(), v.end(), match_before);
    GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)cl_pacs_match_free);
    for (ClPacsMatch *m : v)
        g_ptr_array_add(out, m);
    return out;
}

extern "C" gboolean cl_pacs_get_study(const ClPacsPeer *peer, const char *study_uid,
                                      const char *out_dir, GPtrArray *files, GError **error)
{
    if (peer && peer->dicomweb)
        return cl_dicomweb_get_study(peer, study_uid, out_dir, files, error);
    quiet_dcmtk();
    if (!check_peer(peer, error))
        return FALSE;
    if (!cl_pacs_check_get(study_uid, out_dir, FALSE, error))
        return FALSE;

    /* The SOP classes in the study, so that the retrieving association proposes them (in the
     * SCP role); when the PACS does not answer image-level queries, the common ones. */
    std::set<std::string> classes;
    {
        DcmDataset q;
        add_key(&q, DCM_QueryRetrieveLevel, "IMAGE");
        add_key(&q, DCM_StudyInstanceUID, study_uid);
        add_key(&q, DCM_SeriesInstanceUID, "");
        add_key(&q, DCM_SOPInstanceUID, "");
        add_key(&q, DCM_SOPClassUID, "");
        std::vector<DcmDataset *> answers;
        g_autoptr(GError) ferr = NULL;
        if (!find(peer, &q, answers, &ferr)) {
            if (ferr->code != CL_PACS_ERROR_FAILED) {
                g_propagate_error(error, g_steal_pointer(&ferr));
                return FALSE;
            }
        }
        for (DcmDataset *d : answers) {
            OFString uid;
            if (d->findAndGetOFString(DCM_SOPClassUID, uid).good() && !uid.empty())
                classes.insert(uid.c_str());
            delete d;
        }
        if (ferr == NULL && answers.empty()) {
            g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_FAILED, "%s has no study %s",
                        peer_name(peer).c_str(), study_uid);
            return FALSE;
        }
    }
    if (classes.empty())
        for (int i = 0; i < numberOfDcmLongSCUStorageSOPClassUIDs; i++)
            classes.insert(dcmLongSCUStorageSOPClassUIDs[i]);

    GetScu scu(peer, out_dir);
    scu.addPresentationContext(UID_GETStudyRootQueryRetrieveInformationModel, transfer_syntaxes());
    /* what we can read: uncompressed, deflated, the JPEG family, RLE, JPEG 2000 */
    OFList<OFString> ts = transfer_syntaxes();
    for (const char *t :
         { UID_DeflatedExplicitVRLittleEndianTransferSyntax, UID_JPEGProcess14SV1TransferSyntax,
           UID_JPEGProcess1TransferSyntax, UID_JPEGProcess2_4TransferSyntax,
           UID_JPEGLSLosslessTransferSyntax, UID_JPEGLSLossyTransferSyntax,
           UID_RLELosslessTransferSyntax, UID_JPEG2000LosslessOnlyTransferSyntax,
           UID_JPEG2000TransferSyntax, UID_BigEndianExplicitTransferSyntax })
        ts.push_back(t);
    int n_pc = 1;
    for (const std::string &c : classes) {
        if (++n_pc > 127)
            break; /* 128 presentation contexts per association */
        scu.addPresentationContext(c.c_str(), ts, ASC_SC_ROLE_SCP);
    }
    if (!scu.open(peer, "C-GET", error))
        return FALSE;
    T_ASC_PresentationContextID pc =
        scu.findPresentationContextID(UID_GETStudyRootQueryRetrieveInformationModel, "");
    if (!pc) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_REJECTED,
                    "%s does not offer retrieval with C-GET (Study Root); is our AE title '%s' "
                    "allowed to retrieve?",
                    peer_name(peer).c_str(), peer->our_aet);
        return FALSE;
    }
    DcmDataset q;
    add_key(&q, DCM_QueryRetrieveLevel, "STUDY");
    add_key(&q, DCM_StudyInstanceUID, study_uid);
    OFList<RetrieveResponse *> rs;
    OFCondition c = scu.sendCGETRequest(pc, &q, &rs);
    Uint16 final_status = 0xffff;
    int failed = 0;
    OFString comment;
    for (RetrieveResponse *r : rs) {
        if (!DICOM_PENDING_STATUS(r->m_status)) {
            final_status = r->m_status;
            failed = r->m_numberOfFailedSubops;
            if (r->m_statusDetail)
                r->m_statusDetail->findAndGetOFString(DCM_ErrorComment, comment);
        }
        delete r;
    }
    for (const std::string &f : scu.files)
        g_ptr_array_add(files, g_strdup(f.c_str()));
    if (c.bad()) {
        set_net_error(error, peer, "C-GET", c);
        scu.drop();
        return FALSE;
    }
    if (final_status != STATUS_Success) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_FAILED,
                    "%s: retrieving study %s failed: status %s (%d instance%s failed, %zu "
                    "received)",
                    peer_name(peer).c_str(), study_uid, status_text(final_status, comment).c_str(),
                    failed, failed == 1 ? "" : "s", scu.files.size());
        return FALSE;
    }
    if (scu.files.empty()) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_FAILED, "%s sent no instances of study %s",
                    peer_name(peer).c_str(), study_uid);
        return FALSE;
    }
    return TRUE;
}

extern "C" gboolean cl_pacs_store_files(const ClPacsPeer *peer, const char *const *paths,
                                        guint *n_stored, GError **error)
{
    if (peer && peer->dicomweb)
        return cl_dicomweb_store_files(peer, paths, n_stored, error);
    quiet_dcmtk();
    if (n_stored)
        *n_stored = 0;
    if (!check_peer(peer, error))
        return FALSE;
    if (!paths || !paths[0]) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID, "no files to send");
        return FALSE;
    }
    /* Read every file first: a file that is not DICOM stops the send before anything went. */
    struct Item {
        std::string path, sop_class, xfer;
        DcmFileFormat ff;
    };
    std::vector<std::unique_ptr<Item>> items;
    std::map<std::string, std::set<std::string>> wanted; /* SOP class -> transfer syntaxes */
    for (const char *const *p = paths; *p; p++) {
        auto it = std::make_unique<Item>();
        it->path = *p;
        OFCondition c = it->ff.loadFile(*p);
        OFString cls, inst;
        if (c.bad()) {
            g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_IO, "cannot read %s as DICOM: %s", *p,
                        c.text());
            return FALSE;
        }
        DcmDataset *ds = it->ff.getDataset();
        if (ds->findAndGetOFString(DCM_SOPClassUID, cls).bad() || cls.empty() ||
            ds->findAndGetOFString(DCM_SOPInstanceUID, inst).bad() || inst.empty()) {
            g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_IO,
                        "%s has no SOP class or instance UID: not a DICOM object to store", *p);
            return FALSE;
        }
        it->sop_class = cls.c_str();
        it->xfer = DcmXfer(ds->getOriginalXfer()).getXferID();
        wanted[it->sop_class].insert(it->xfer);
        items.push_back(std::move(it));
    }
    Scu scu(peer);
    scu.setDatasetConversionMode(OFTrue);
    int n_pc = 0;
    for (const auto &w : wanted) {
        for (const std::string &x : w.second) {
            if (x == UID_LittleEndianExplicitTransferSyntax ||
                x == UID_LittleEndianImplicitTransferSyntax)
                continue;
            OFList<OFString> one;
            one.push_back(x.c_str());
            if (++n_pc <= 128)
                scu.addPresentationContext(w.first.c_str(), one);
        }
        if (++n_pc <= 128)
            scu.addPresentationContext(w.first.c_str(), transfer_syntaxes());
    }
    if (n_pc > 128) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID,
                    "the files need %d presentation contexts, more than one association has "
                    "(128): send them in smaller groups",
                    n_pc);
        return FALSE;
    }
    if (!scu.open(peer, "C-STORE", error))
        return FALSE;
    for (auto &it : items) {
        T_ASC_PresentationContextID pc =
            scu.findPresentationContextID(it->sop_class.c_str(), it->xfer.c_str());
        if (!pc)
            pc = scu.findPresentationContextID(it->sop_class.c_str(),
                                               UID_LittleEndianExplicitTransferSyntax);
        if (!pc)
            pc = scu.findPresentationContextID(it->sop_class.c_str(),
                                               UID_LittleEndianImplicitTransferSyntax);
        if (!pc) {
            g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_REJECTED,
                        "%s does not store %s (SOP class %s%s%s)", peer_name(peer).c_str(),
                        it->path.c_str(), it->sop_class.c_str(),
                        dcmFindNameOfUID(it->sop_class.c_str()) ? ", " : "",
                        dcmFindNameOfUID(it->sop_class.c_str(), ""));
            return FALSE;
        }
        Uint16 status = 0xffff;
        OFCondition c = scu.sendSTORERequest(pc, "", it->ff.getDataset(), status);
        if (c.bad()) {
            g_autofree char *doing = g_strdup_printf("C-STORE of %s", it->path.c_str());
            set_net_error(error, peer, doing, c);
            scu.drop();
            return FALSE;
        }
        /* success, and the warnings (coerced, elements discarded) that still store it */
        if (status != STATUS_Success && status != 0xb000 && status != 0xb006 && status != 0xb007) {
            g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_FAILED,
                        "%s refused to store %s: status %s", peer_name(peer).c_str(),
                        it->path.c_str(), status_text(status, "").c_str());
            return FALSE;
        }
        if (n_stored)
            (*n_stored)++;
    }
    return TRUE;
}
