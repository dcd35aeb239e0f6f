/* pacs.h - a PACS over DIMSE (DCMTK): studies found with C-FIND, retrieved with C-GET (no
 * listening port of ours), files sent with C-STORE; or over DICOMweb (libsoup): QIDO-RS,
 * WADO-RS and STOW-RS; and a case's report made into DICOM objects that go back into the study
 * of its images (docs/PACS.md).
 *
 * Every call opens its own association and releases it before it returns; nothing waits longer
 * than the peer's timeout for a connection, an association answer or a message. Errors name the
 * peer ("PACS at 127.0.0.1:4242 (ORTHANC)") and what went wrong in words a user can act on. */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

#define CL_PACS_ERROR (cl_pacs_error_quark())
typedef enum {
    CL_PACS_ERROR_INVALID,  /* bad argument: empty host, AE title too long, no query key, ... */
    CL_PACS_ERROR_CONNECT,  /* no connection: refused, host unknown or unreachable */
    CL_PACS_ERROR_REJECTED, /* association rejected (unknown AE titles, no accepted service) */
    CL_PACS_ERROR_TIMEOUT,  /* the peer did not answer within the timeout */
    CL_PACS_ERROR_FAILED,   /* the peer answered with a failure status, or broke the protocol */
    CL_PACS_ERROR_IO,       /* a file could not be read or written */
} ClPacsError;
GQuark cl_pacs_error_quark(void);

/* Where the PACS is and who we are. */
typedef struct {
    const char *host;       /* name or address */
    guint16 port;           /* DICOM port (104, 4242, 11112, ...) */
    const char *our_aet;    /* our AE title (calling), 1-16 characters */
    const char *called_aet; /* the PACS's AE title (called), 1-16 characters */
    guint timeout_s;        /* connection, association and each message; 0 = 30 s */
    /* NULL: DIMSE at host:port. Else the PACS's DICOMweb base URL (http or https, e.g.
     * "http://127.0.0.1:8042/dicom-web"): the calls below speak QIDO-RS, WADO-RS and STOW-RS
     * to it, and host, port and the AE titles are not used */
    const char *dicomweb;
} ClPacsPeer;

/* cl_pacs_find's query level */
typedef enum {
    CL_PACS_LEVEL_STUDY = 0,
    CL_PACS_LEVEL_SERIES,
} ClPacsLevel;

/* What to look for: at least one key. Values are matched as DICOM matches them (exact, or
 * wildcards * and ?). */
typedef struct {
    const char *patient_id;
    const char *accession;
    const char *study_uid; /* required for CL_PACS_LEVEL_SERIES */
} ClPacsQuery;

/* One match. Texts are "" when the PACS returned none; counts -1. */
typedef struct {
    char *patient_name, *patient_id;
    char *study_date, *study_time; /* DICOM DA "YYYYMMDD" and TM "HHMMSS[.F]" */
    char *study_description, *accession, *study_uid, *modalities; /* modalities: "CT\\SR" */
    int n_series, n_instances;
    /* series level only */
    char *series_uid, *series_description, *modality;
    int series_number;
} ClPacsMatch;
void cl_pacs_match_free(ClPacsMatch *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClPacsMatch, cl_pacs_match_free)

/* C-FIND in the Study Root information model. Returns the matches (ClPacsMatch*, owned), sorted
 * by study date and time, oldest first (then series number); an empty array when nothing
 * matched. */
GPtrArray *cl_pacs_find(const ClPacsPeer *peer, ClPacsLevel level, const ClPacsQuery *query,
                        GError **error);

/* C-GET of one study into out_dir (created if missing): every instance is written as
 * out_dir/SOPInstanceUID.dcm (a DICOM file with meta header), and its path appended to files
 * (char*, owned by the caller's array). Fails when any instance failed or none came. */
gboolean cl_pacs_get_study(const ClPacsPeer *peer, const char *study_uid, const char *out_dir,
                           GPtrArray *files, GError **error);

/* C-STORE of DICOM files (each sent in its own transfer syntax when the PACS accepts it, else
 * converted to an uncompressed one). *n_stored (may be NULL) counts those the PACS stored;
 * fails on the first file that could not be read or that the PACS refused. */
gboolean cl_pacs_store_files(const ClPacsPeer *peer, const char *const *paths, guint *n_stored,
                             GError **error);

/* ---- a report as DICOM (pacs-report.cc) ---- */

/* What goes into the report objects besides the study (which is copied from a DICOM file of the
 * case: patient, study and its identifiers). */
typedef struct {
    const char *study_file;  /* a DICOM image of the study the report belongs to */
    const char *title;       /* the document title ("ChangeLens change report") */
    const char *description; /* the accepted description */
    const char *reviewer;    /* who accepted it ("" unknown) */
    const char *accepted_at; /* ISO 8601, "" unknown */
    const char *model_name;  /* provenance of the run that generated it ("" none: hand-written) */
    const char *model_sha256;
    const char *device;
    const char *manufacturer; /* "ChangeLens" */
    const char *software;     /* "ChangeLens 0.1.0" */
} ClPacsReportInfo;

/* Writes out_path: an Encapsulated PDF Storage object holding the bytes of pdf_path, in a new
 * series (modality DOC) of the study of info->study_file. */
gboolean cl_pacs_write_encapsulated_pdf(const ClPacsReportInfo *info, const char *pdf_path,
                                        const char *out_path, GError **error);

/* Writes out_path: a Basic Text SR with the description (Finding) and its provenance
 * (Algorithm Name, Algorithm Version = the model's sha256, the reviewer), in a new series
 * (modality SR) of the same study. */
gboolean cl_pacs_write_text_sr(const ClPacsReportInfo *info, const char *out_path, GError **error);

G_END_DECLS
