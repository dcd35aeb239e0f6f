/* deid.h - de-identification of a case for export: the DICOM PS3.15 Annex E Basic Application
 * Confidentiality Profile on the images' metadata with the Retain Longitudinal Temporal
 * Information with Modified Dates option (every date shifted by one per-patient number of days),
 * UIDs replaced consistently, file names replaced by "image-N.ext", and the patient's names and
 * IDs removed from free text. Everything is derived from a secret with HMAC-SHA256, so re-exports
 * of the same patient with the same secret come out the same, and nobody without the secret can
 * undo the shift or map a new UID back. */
#pragma once

#include <glib.h>

#include "casedb/casedb.h"

G_BEGIN_DECLS

/* What the profile does with one attribute (PS3.15 Table E.1-1 action codes). */
typedef enum {
    CL_DEID_KEEP = 0, /* not in the profile: technical attributes (Modality, Rows, ...); free text
                       * in it is still scrubbed of the patient's names and IDs */
    CL_DEID_REMOVE,   /* X */
    CL_DEID_EMPTY,    /* Z: kept with an empty value */
    CL_DEID_DUMMY,    /* D: a dummy value of the same kind */
    CL_DEID_UID,      /* U: 2.25.<128 bits of HMAC(secret, uid)> */
    CL_DEID_SHIFT,    /* dates and date-times: shifted by the offset (modified dates option) */
} ClDeidAction;

/* The action for a metadata key: DICOM keywords ("PatientName") for DICOM images; for other
 * formats their people/place/date entries (Artist, GPS..., DateTime). Private and unknown DICOM
 * tags are removed. */
ClDeidAction cl_deid_action(const char *key, gboolean dicom);

/* Written into the DeidentificationMethod entry and the report. */
const char *cl_deid_method(void);

/* The per-installation secret: the 64 hex digits in
 * g_get_user_config_dir()/changelens/deid-secret, created (32 random bytes, mode 0600, the
 * folder 0700) on first use. CL_REPORT_ERROR_WRITE when it cannot be created,
 * CL_REPORT_ERROR_INVALID when the file holds something else. */
char *cl_deid_installation_secret(GError **error);

typedef struct _ClDeid ClDeid;

/* Collects what identifies the patient from the case (names, IDs, UIDs, file paths in the
 * images' metadata and paths) and derives the date offset from HMAC(secret, PatientID), or the
 * StudyInstanceUID, or the case id when the case has neither. secret must not be empty. */
ClDeid *cl_deid_new(const char *secret, const ClCase *c);
void cl_deid_free(ClDeid *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClDeid, cl_deid_free)

/* The shift in days, -3650 ..= -1. */
int cl_deid_day_offset(const ClDeid *d);

/* "2.25." + the decimal of the first 128 bits of HMAC-SHA256(secret, uid): a valid UID of at
 * most 44 characters; the same uid always gives the same result. Multi-valued (\-separated)
 * values are mapped value by value. */
char *cl_deid_uid(const ClDeid *d, const char *uid);

/* Shifts DICOM DA ("20240131"), DT ("20240131093015.5+0100"), ISO 8601 ("2024-01-31T09:30Z"),
 * ACR-NEMA ("2024.01.31") and EXIF ("2024:01:31 09:30:15") dates by the offset, keeping their
 * form and the time of day; \-separated values one by one. A value that is not a full date
 * cannot be shifted and is removed (""); text after the date that is not a time of day
 * ("20230714QUIMBY") is dropped. cl_deid_metadata and cl_deid_case keep no time of acquisition
 * (AcquisitionDateTime, EXIF DateTimeOriginal, an image's acquired_at): the basic profile
 * removes AcquisitionTime, so the shifted date alone is written there. */
char *cl_deid_shift_date(const ClDeid *d, const char *value);

/* Free text: the patient's name components (^-separated, at least 2 characters), IDs and
 * accession numbers, the other people the files name (referring, performing and reading
 * physicians, operators), their institutions, stations, study IDs and device serials become
 * "[removed]" (case-insensitive, in composed form (NFC); whole words for terms under 4
 * characters; all-digit values under 4 digits are left, they would take every such number), the
 * images' paths and file names become "image-N.ext", their UIDs the mapped ones, and dates are
 * shifted: YYYY-MM-DD, YYYYMMDD, DD/MM/YYYY or MM/DD/YYYY where only one reading is a date (both:
 * "[date removed]"), DD.MM.YYYY, "May 12, 1961" and "12 May 1961". */
char *cl_deid_text(const ClDeid *d, const char *text);

/* The name an image gets in a de-identified export: "image-<position + 1>.<ext>", ext from the
 * format ("dcm", "tif", "png", ...; "img" for one it does not know), never from the file name,
 * whose extension may be anything (a patient ID). */
char *cl_deid_image_name(const ClCaseImage *img);

/* The profile applied to one image's metadata (a JSON object of key -> string). Adds
 * PatientIdentityRemoved, DeidentificationMethod and LongitudinalTemporalInformationModified to
 * DICOM images. Returns a JSON object text; NULL when metadata_json is not a JSON object. */
char *cl_deid_metadata(const ClDeid *d, const char *metadata_json, gboolean dicom);

/* Applies all of the above, in place, to a copy of a case: the name, notes and descriptions
 * (text), every date, the images' paths (image-N.ext only) and metadata, the runs' model path
 * (its file name only) and settings; the audit log is dropped. */
void cl_deid_case(const ClDeid *d, ClCase *c);

G_END_DECLS
