/* deid.c - de-identification (deid.h): the PS3.15 Annex E basic profile over metadata, dates
 * shifted by an HMAC-derived offset, UIDs mapped into 2.25, names and IDs scrubbed from text. */
#include "report/deid.h"

#include <errno.h>
#include <fcntl.h>
#include <json-glib/json-glib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/dicom-uid.h"
#include "report/report.h"

/* ---- the profile ---------------------------------------------------------------------------- */

typedef struct {
    const char *key;
    ClDeidAction action;
} Rule;

/* PS3.15 Table E.1-1, "Basic Prof." column, for the attributes ChangeLens keeps in metadata and
 * their usual companions. Where the table allows a choice (X/Z/D, X/D) the strictest applicable
 * one is taken; dates and date-times are shifted instead (Retain Longitudinal Temporal
 * Information with Modified Dates Option); times follow the basic profile. */
static const Rule dicom_rules[] = {
    /* patient */
    { "PatientName", CL_DEID_EMPTY },
    { "PatientID", CL_DEID_EMPTY },
    { "IssuerOfPatientID", CL_DEID_REMOVE },
    { "PatientBirthDate", CL_DEID_EMPTY },
    { "PatientBirthTime", CL_DEID_REMOVE },
    { "PatientSex", CL_DEID_EMPTY },
    { "PatientAge", CL_DEID_REMOVE },
    { "PatientSize", CL_DEID_REMOVE },
    { "PatientWeight", CL_DEID_REMOVE },
    { "PatientAddress", CL_DEID_REMOVE },
    { "PatientTelephoneNumbers", CL_DEID_REMOVE },
    { "PatientMotherBirthName", CL_DEID_REMOVE },
    { "PatientBirthName", CL_DEID_REMOVE },
    { "OtherPatientIDs", CL_DEID_REMOVE },
    { "OtherPatientNames", CL_DEID_REMOVE },
    { "OtherPatientIDsSequence", CL_DEID_REMOVE },
    { "MedicalRecordLocator", CL_DEID_REMOVE },
    { "EthnicGroup", CL_DEID_REMOVE },
    { "Occupation", CL_DEID_REMOVE },
    { "AdditionalPatientHistory", CL_DEID_REMOVE },
    { "PatientComments", CL_DEID_REMOVE },
    { "MilitaryRank", CL_DEID_REMOVE },
    { "BranchOfService", CL_DEID_REMOVE },
    { "CountryOfResidence", CL_DEID_REMOVE },
    { "RegionOfResidence", CL_DEID_REMOVE },
    { "PatientReligiousPreference", CL_DEID_REMOVE },
    { "MedicalAlerts", CL_DEID_REMOVE },
    { "Allergies", CL_DEID_REMOVE },
    { "PregnancyStatus", CL_DEID_REMOVE },
    { "SmokingStatus", CL_DEID_REMOVE },
    { "PatientInsurancePlanCodeSequence", CL_DEID_REMOVE },
    { "ResponsiblePerson", CL_DEID_REMOVE },
    { "ResponsibleOrganization", CL_DEID_REMOVE },
    /* study, visit, request */
    { "AccessionNumber", CL_DEID_EMPTY },
    { "StudyID", CL_DEID_EMPTY },
    { "StudyDescription", CL_DEID_REMOVE },
    { "SeriesDescription", CL_DEID_REMOVE },
    { "ImageComments", CL_DEID_REMOVE },
    { "DerivationDescription", CL_DEID_REMOVE },
    { "ProtocolName", CL_DEID_REMOVE },
    { "AdmittingDiagnosesDescription", CL_DEID_REMOVE },
    { "ReasonForStudy", CL_DEID_REMOVE },
    { "RequestedProcedureDescription", CL_DEID_REMOVE },
    { "RequestAttributesSequence", CL_DEID_REMOVE },
    { "PerformedProcedureStepDescription", CL_DEID_REMOVE },
    { "PerformedProcedureStepID", CL_DEID_REMOVE },
    { "ScheduledProcedureStepDescription", CL_DEID_REMOVE },
    { "AdmissionID", CL_DEID_REMOVE },
    { "CurrentPatientLocation", CL_DEID_REMOVE },
    { "VisitComments", CL_DEID_REMOVE },
    { "TextComments", CL_DEID_REMOVE },
    { "TextString", CL_DEID_REMOVE },
    { "ContentSequence", CL_DEID_REMOVE },
    /* people and places */
    { "ReferringPhysicianName", CL_DEID_EMPTY },
    { "ReferringPhysicianAddress", CL_DEID_REMOVE },
    { "ReferringPhysicianTelephoneNumbers", CL_DEID_REMOVE },
    { "PerformingPhysicianName", CL_DEID_REMOVE },
    { "PhysiciansOfRecord", CL_DEID_REMOVE },
    { "NameOfPhysiciansReadingStudy", CL_DEID_REMOVE },
    { "RequestingPhysician", CL_DEID_REMOVE },
    { "OperatorsName", CL_DEID_REMOVE },
    { "VerifyingObserverName", CL_DEID_DUMMY },
    { "PersonName", CL_DEID_DUMMY },
    { "ContentCreatorName", CL_DEID_EMPTY },
    { "InstitutionName", CL_DEID_REMOVE },
    { "InstitutionAddress", CL_DEID_REMOVE },
    { "InstitutionalDepartmentName", CL_DEID_REMOVE },
    { "StationName", CL_DEID_REMOVE },
    { "DeviceSerialNumber", CL_DEID_REMOVE },
    { "DetectorID", CL_DEID_REMOVE },
    { "PlateID", CL_DEID_REMOVE },
    { "GantryID", CL_DEID_REMOVE },
    { "SoftwareVersions", CL_DEID_REMOVE },
    { "SourceApplicationEntityTitle", CL_DEID_REMOVE },
    /* UIDs of this patient's instances (class and transfer syntax UIDs are standard: kept) */
    { "StudyInstanceUID", CL_DEID_UID },
    { "SeriesInstanceUID", CL_DEID_UID },
    { "SOPInstanceUID", CL_DEID_UID },
    { "MediaStorageSOPInstanceUID", CL_DEID_UID },
    { "FrameOfReferenceUID", CL_DEID_UID },
    { "SynchronizationFrameOfReferenceUID", CL_DEID_UID },
    { "ReferencedSOPInstanceUID", CL_DEID_UID },
    { "ReferencedFrameOfReferenceUID", CL_DEID_UID },
    { "IrradiationEventUID", CL_DEID_UID },
    { "ConcatenationUID", CL_DEID_UID },
    { "DimensionOrganizationUID", CL_DEID_UID },
    { "DeviceUID", CL_DEID_UID },
    { "InstanceCreatorUID", CL_DEID_UID },
    { "StorageMediaFileSetUID", CL_DEID_UID },
    { "TargetUID", CL_DEID_UID },
    { "UID", CL_DEID_UID },
    /* dates: shifted (the modified dates option) */
    { "StudyDate", CL_DEID_SHIFT },
    { "SeriesDate", CL_DEID_SHIFT },
    { "AcquisitionDate", CL_DEID_SHIFT },
    { "ContentDate", CL_DEID_SHIFT },
    { "OverlayDate", CL_DEID_SHIFT },
    { "CurveDate", CL_DEID_SHIFT },
    { "InstanceCreationDate", CL_DEID_SHIFT },
    { "AcquisitionDateTime", CL_DEID_SHIFT },
    { "FrameAcquisitionDateTime", CL_DEID_SHIFT },
    { "PerformedProcedureStepStartDate", CL_DEID_SHIFT },
    /* times: the basic profile's action */
    { "StudyTime", CL_DEID_EMPTY },
    { "SeriesTime", CL_DEID_REMOVE },
    { "AcquisitionTime", CL_DEID_REMOVE },
    { "ContentTime", CL_DEID_EMPTY },
    { "OverlayTime", CL_DEID_REMOVE },
    { "CurveTime", CL_DEID_REMOVE },
    { "InstanceCreationTime", CL_DEID_REMOVE },
    { "PerformedProcedureStepStartTime", CL_DEID_REMOVE },
};

/* Other formats carry people, places and dates under their own names (PNG text, TIFF, EXIF). */
static const Rule other_rules[] = {
    { "Artist", CL_DEID_REMOVE },
    { "Author", CL_DEID_REMOVE },
    { "Copyright", CL_DEID_REMOVE },
    { "HostComputer", CL_DEID_REMOVE },
    { "Comment", CL_DEID_REMOVE },
    { "Description", CL_DEID_REMOVE },
    { "ImageDescription", CL_DEID_REMOVE },
    { "DocumentName", CL_DEID_REMOVE },
    { "Title", CL_DEID_REMOVE },
    { "Source", CL_DEID_REMOVE },
    { "Disclaimer", CL_DEID_REMOVE },
    { "UserComment", CL_DEID_REMOVE },
    { "CameraOwnerName", CL_DEID_REMOVE },
    { "BodySerialNumber", CL_DEID_REMOVE },
    { "DateTime", CL_DEID_SHIFT },
    { "DateTimeOriginal", CL_DEID_SHIFT },
    { "DateTimeDigitized", CL_DEID_SHIFT },
    { "Creation Time", CL_DEID_SHIFT },
};

static gboolean is_private_key(const char *key)
{
    /* DCMTK names tags it does not know "Unknown Tag & Data", private ones "PrivateCreator" or
     * by their numbers; all are X in the basic profile */
    return key[0] == '(' || g_str_has_prefix(key, "Private") || strstr(key, "Unknown") ||
           strstr(key, "PrivateCreator");
}

ClDeidAction cl_deid_action(const char *key, gboolean dicom)
{
    g_return_val_if_fail(key != NULL, CL_DEID_REMOVE);
    for (guint i = 0; i < G_N_ELEMENTS(dicom_rules); i++)
        if (strcmp(key, dicom_rules[i].key) == 0)
            return dicom_rules[i].action;
    if (dicom)
        return is_private_key(key) ? CL_DEID_REMOVE : CL_DEID_KEEP;
    for (guint i = 0; i < G_N_ELEMENTS(other_rules); i++)
        if (g_ascii_strcasecmp(key, other_rules[i].key) == 0)
            return other_rules[i].action;
    if (g_str_has_prefix(key, "GPS")) /* a place */
        return CL_DEID_REMOVE;
    /* PNG text and other free-form keys are whatever their writer chose ("Patient",
     * "institution", "MRN", "Referring physician"): the words that name people, places and
     * record numbers, in any case */
    static const char *const words[] = { "patient", "institution", "hospital",  "clinic",
                                         "mrn",     "physician",   "doctor",    "operator",
                                         "person",  "owner",       "address",   "phone",
                                         "email",   "birth",       "accession", "location",
                                         "station", "serial",      "id" };
    g_autofree char *low = g_ascii_strdown(key, -1);
    for (guint i = 0; i < G_N_ELEMENTS(words); i++) {
        const char *hit = strstr(low, words[i]);
        if (!hit)
            continue;
        if (strcmp(words[i], "id") == 0) { /* "PatientID", "study id", "mrn_id"; not "width" */
            const size_t at = (size_t)(hit - low);
            if ((at > 0 && g_ascii_isalpha(low[at - 1]) && !g_ascii_isupper(key[at])) ||
                g_ascii_isalpha(hit[2]))
                continue;
        }
        return CL_DEID_REMOVE;
    }
    return CL_DEID_KEEP;
}

const char *cl_deid_method(void)
{
    return "ChangeLens: DICOM PS3.15 Annex E Basic Application Confidentiality Profile (113100) "
           "with Retain Longitudinal Temporal Information with Modified Dates (113107); "
           "patient names and IDs removed from free text";
}

/* ---- the secret ----------------------------------------------------------------------------- */

static gboolean is_hex_secret(const char *s)
{
    if (strlen(s) != 64)
        return FALSE;
    for (const char *p = s; *p; p++)
        if (!g_ascii_isxdigit(*p))
            return FALSE;
    return TRUE;
}

static gboolean random_bytes(guint8 *buf, gsize n)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return FALSE;
    gsize got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (gsize)r;
    }
    close(fd);
    return got == n;
}

/* Creates the file exclusively: two exports starting at once must not end up with two secrets
 * (the loser reads the winner's). FALSE + errno when it exists or cannot be written. */
static gboolean create_secret(const char *path, int *err)
{
    guint8 raw[32];
    if (!random_bytes(raw, sizeof raw)) {
        *err = EIO;
        return FALSE;
    }
    char hex[66];
    for (guint i = 0; i < sizeof raw; i++)
        g_snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    hex[64] = '\n';
    hex[65] = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        *err = errno;
        return FALSE;
    }
    gsize done = 0;
    while (done < 65) {
        ssize_t w = write(fd, hex + done, 65 - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            *err = w < 0 ? errno : EIO;
            close(fd);
            unlink(path);
            return FALSE;
        }
        done += (gsize)w;
    }
    fsync(fd);
    if (close(fd) != 0) {
        *err = errno;
        unlink(path);
        return FALSE;
    }
    return TRUE;
}

char *cl_deid_installation_secret(GError **error)
{
    g_autofree char *dir = g_build_filename(g_get_user_config_dir(), "changelens", NULL);
    g_autofree char *path = g_build_filename(dir, "deid-secret", NULL);
    for (int attempt = 0; attempt < 5; attempt++) {
        g_autofree char *text = NULL;
        g_autoptr(GError) e = NULL;
        if (g_file_get_contents(path, &text, NULL, &e)) {
            g_strstrip(text);
            if (is_hex_secret(text))
                return g_steal_pointer(&text);
            if (attempt < 4) { /* another export may be writing it this instant */
                g_usleep(20000);
                continue;
            }
            g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID,
                        "%s does not hold a de-identification secret (64 hex digits); move it "
                        "away to have a new one made (earlier exports will then shift dates "
                        "differently)",
                        path);
            return NULL;
        }
        if (!g_error_matches(e, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
            g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_WRITE,
                        "cannot read the de-identification secret: %s", e->message);
            return NULL;
        }
        if (g_mkdir_with_parents(dir, 0700) != 0) {
            int err = errno;
            g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_WRITE,
                        "cannot create the folder %s for the de-identification secret: %s", dir,
                        g_strerror(err));
            return NULL;
        }
        int err = 0;
        if (!create_secret(path, &err) && err != EEXIST) {
            g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_WRITE,
                        "cannot create the de-identification secret %s: %s", path, g_strerror(err));
            return NULL;
        }
        /* made it, or someone else did: read it back */
    }
    g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_WRITE,
                "cannot read the de-identification secret %s", path);
    return NULL;
}

/* ---- the context ---------------------------------------------------------------------------- */

typedef struct {
    gunichar *lower; /* the term, lower case */
    glong n;
    gboolean whole_word;
    char *replacement;
} Term;

struct _ClDeid {
    char *secret;
    int offset_days;
    GPtrArray *terms; /* Term*, longest first */
    GRegex *iso_date, *da_date;
    GRegex *num_date;   /* 12/05/1961, 12.05.1961, 5/25/61 is not taken (two-digit years) */
    GRegex *named_date; /* May 12, 1961; 12 May 1961; 12th of May 1961 */
};

static void term_free(gpointer p)
{
    Term *t = p;
    g_free(t->lower);
    g_free(t->replacement);
    g_free(t);
}

static void add_term(ClDeid *d, const char *text, const char *replacement, glong min_chars)
{
    if (!text || !g_utf8_validate(text, -1, NULL))
        return;
    /* composed (NFC): "Müller" written with a combining diaeresis is the same name */
    g_autofree char *s = g_utf8_normalize(text, -1, G_NORMALIZE_DEFAULT_COMPOSE);
    if (!s)
        return;
    g_strstrip(s);
    glong n = 0;
    g_autofree gunichar *u = g_utf8_to_ucs4_fast(s, -1, &n);
    if (n < min_chars || n < 1)
        return;
    for (glong i = 0; i < n; i++)
        u[i] = g_unichar_tolower(u[i]);
    for (guint i = 0; i < d->terms->len; i++) { /* once is enough */
        Term *t = g_ptr_array_index(d->terms, i);
        if (t->n == n && memcmp(t->lower, u, sizeof(gunichar) * (gsize)n) == 0)
            return;
    }
    Term *t = g_new0(Term, 1);
    t->lower = g_steal_pointer(&u);
    t->n = n;
    /* short names ("Li", "Ng", "Doe") would eat pieces of ordinary words as substrings */
    t->whole_word = n < 4;
    t->replacement = g_strdup(replacement);
    g_ptr_array_add(d->terms, t);
}

static int term_cmp(gconstpointer a, gconstpointer b)
{
    const Term *x = *(const Term *const *)a, *y = *(const Term *const *)b;
    return (y->n > x->n) - (y->n < x->n);
}

static void hmac(const char *secret, const char *msg, guint8 out[32])
{
    GHmac *h = g_hmac_new(G_CHECKSUM_SHA256, (const guchar *)secret, strlen(secret));
    g_hmac_update(h, (const guchar *)msg, -1);
    gsize len = 32;
    g_hmac_get_digest(h, out, &len);
    g_hmac_unref(h);
}

static JsonObject *parse_object(const char *json, JsonParser *parser)
{
    if (!json || !g_utf8_validate(json, -1, NULL) ||
        !json_parser_load_from_data(parser, json, -1, NULL))
        return NULL;
    JsonNode *root = json_parser_get_root(parser);
    return root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
}

static const char *member_string(JsonObject *o, const char *key)
{
    JsonNode *n = json_object_get_member(o, key);
    if (!n || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING)
        return NULL;
    const char *s = json_node_get_string(n);
    return s && *s ? s : NULL;
}

static gboolean key_in(const char *key, const char *const *keys)
{
    for (int i = 0; keys[i]; i++)
        if (strcmp(key, keys[i]) == 0)
            return TRUE;
    return FALSE;
}

/* Person names other than the patient's (PN attributes the profile removes or empties) */
static gboolean is_person_key(const char *key)
{
    static const char *const keys[] = {
        "ReferringPhysicianName",
        "PerformingPhysicianName",
        "PhysiciansOfRecord",
        "NameOfPhysiciansReadingStudy",
        "RequestingPhysician",
        "OperatorsName",
        "ResponsiblePerson",
        "ContentCreatorName",
        NULL,
    };
    return key_in(key, keys);
}

/* Places, organisations and identifying numbers the file holds */
static gboolean is_place_or_id_key(const char *key)
{
    static const char *const keys[] = {
        "InstitutionName",
        "InstitutionAddress",
        "InstitutionalDepartmentName",
        "StationName",
        "ResponsibleOrganization",
        "StudyID",
        "DeviceSerialNumber",
        "DetectorID",
        "PlateID",
        "GantryID",
        "AdmissionID",
        "PerformedProcedureStepID",
        "IssuerOfPatientID",
        NULL,
    };
    return key_in(key, keys);
}

/* Names and IDs to remove from text, UIDs to map, and the first patient ID / study UID. */
static void collect(ClDeid *d, const ClCase *c, char **patient_id, char **study_uid)
{
    for (guint i = 0; c->images && i < c->images->len; i++) {
        const ClCaseImage *img = g_ptr_array_index(c->images, i);
        g_autofree char *name = cl_deid_image_name(img);
        if (img->path && *img->path) {
            add_term(d, img->path, name, 1);
            g_autofree char *base = g_path_get_basename(img->path);
            add_term(d, base, name, 1);
        }
        g_autoptr(JsonParser) parser = json_parser_new();
        JsonObject *meta = parse_object(img->metadata_json, parser);
        if (!meta)
            continue;
        g_autoptr(GList) members = json_object_get_members(meta);
        for (GList *l = members; l; l = l->next) {
            const char *key = l->data;
            const char *v = member_string(meta, key);
            if (!v)
                continue;
            if (strcmp(key, "PatientName") == 0 || strcmp(key, "OtherPatientNames") == 0 ||
                strcmp(key, "PatientBirthName") == 0 ||
                strcmp(key, "PatientMotherBirthName") == 0) {
                g_auto(GStrv) parts = g_strsplit_set(v, "^=\\, \t", -1);
                for (int k = 0; parts[k]; k++)
                    add_term(d, parts[k], "[removed]", 2);
            } else if (strcmp(key, "PatientID") == 0 || strcmp(key, "OtherPatientIDs") == 0 ||
                       strcmp(key, "AccessionNumber") == 0 ||
                       strcmp(key, "MedicalRecordLocator") == 0) {
                g_auto(GStrv) parts = g_strsplit(v, "\\", -1);
                for (int k = 0; parts[k]; k++)
                    add_term(d, parts[k], "[removed]", 2);
            } else if (is_person_key(key)) {
                /* the people the file names: typed into a case name or a note, they go too */
                g_auto(GStrv) parts = g_strsplit_set(v, "^=\\, \t", -1);
                for (int k = 0; parts[k]; k++)
                    add_term(d, parts[k], "[removed]", 2);
            } else if (is_place_or_id_key(key)) {
                /* whole values: an institution, a station, a study ID, a device's serial; short
                 * numbers ("1", "12") are left, or every such number in the text would go */
                g_auto(GStrv) parts = g_strsplit(v, "\\", -1);
                for (int k = 0; parts[k]; k++) {
                    g_strstrip(parts[k]);
                    gboolean digits = parts[k][0] != 0;
                    for (const char *q = parts[k]; *q; q++)
                        digits = digits && g_ascii_isdigit(*q);
                    add_term(d, parts[k], "[removed]", digits ? 4 : 3);
                }
            } else if (cl_deid_action(key, TRUE) == CL_DEID_UID) {
                g_auto(GStrv) parts = g_strsplit(v, "\\", -1);
                for (int k = 0; parts[k]; k++) {
                    g_strstrip(parts[k]);
                    g_autofree char *mapped = cl_deid_uid(d, parts[k]);
                    add_term(d, parts[k], mapped, 8);
                }
            }
            if (!*patient_id && strcmp(key, "PatientID") == 0)
                *patient_id = g_strstrip(g_strdup(v));
            if (!*study_uid && strcmp(key, "StudyInstanceUID") == 0)
                *study_uid = g_strstrip(g_strdup(v));
        }
    }
}

ClDeid *cl_deid_new(const char *secret, const ClCase *c)
{
    g_return_val_if_fail(secret != NULL && *secret && c != NULL, NULL);
    ClDeid *d = g_new0(ClDeid, 1);
    d->secret = g_strdup(secret);
    d->terms = g_ptr_array_new_with_free_func(term_free);
    g_autofree char *patient_id = NULL, *study_uid = NULL;
    collect(d, c, &patient_id, &study_uid);
    g_ptr_array_sort(d->terms, term_cmp);

    /* the same patient shifts the same in every export made with this secret */
    g_autofree char *key = NULL;
    if (patient_id && *patient_id)
        key = g_strconcat("PatientID:", patient_id, NULL);
    else if (study_uid && *study_uid)
        key = g_strconcat("StudyInstanceUID:", study_uid, NULL);
    else
        key = g_strdup_printf("case:%" G_GINT64_FORMAT, c->summary.id);
    guint8 mac[32];
    hmac(d->secret, key, mac);
    guint32 v = ((guint32)mac[0] << 24) | ((guint32)mac[1] << 16) | ((guint32)mac[2] << 8) | mac[3];
    d->offset_days = -(int)(1 + v % 3650);

    d->iso_date =
        g_regex_new("(?<![0-9])((?:19|20)[0-9]{2})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
                    "(?![0-9])",
                    G_REGEX_OPTIMIZE, 0, NULL);
    /* YYYYMMDD alone or starting a DICOM date-time (HHMM or HHMMSS, a fraction) */
    d->da_date = g_regex_new("(?<![0-9])((?:19|20)[0-9]{2})(0[1-9]|1[0-2])(0[1-9]|[12][0-9]|3[01])"
                             "(?=(?:[0-9]{4}|[0-9]{6})?(?:\\.[0-9]+)?(?![0-9]))",
                             G_REGEX_OPTIMIZE, 0, NULL);
    d->num_date = g_regex_new("(?<![0-9./-])([0-9]{1,2})([/.])([0-9]{1,2})\\2((?:18|19|20)[0-9]{2})"
                              "(?![0-9])",
                              G_REGEX_OPTIMIZE, 0, NULL);
#define MONTHS                                                                                     \
    "(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"               \
    "sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\\.?"
    d->named_date = g_regex_new("(?<![[:alnum:]])(?:" MONTHS "\\s+([0-9]{1,2})(?:st|nd|rd|th)?,?"
                                "|([0-9]{1,2})(?:st|nd|rd|th)?(?:\\s+of)?\\s+" MONTHS ",?)"
                                "\\s+((?:18|19|20)[0-9]{2})(?![0-9])",
                                G_REGEX_OPTIMIZE | G_REGEX_CASELESS, 0, NULL);
#undef MONTHS
    g_assert(d->iso_date && d->da_date && d->num_date && d->named_date);
    return d;
}

void cl_deid_free(ClDeid *d)
{
    if (!d)
        return;
    g_free(d->secret);
    g_ptr_array_unref(d->terms);
    g_regex_unref(d->iso_date);
    g_regex_unref(d->da_date);
    g_regex_unref(d->num_date);
    g_regex_unref(d->named_date);
    g_free(d);
}

int cl_deid_day_offset(const ClDeid *d)
{
    return d->offset_days;
}

/* ---- UIDs ----------------------------------------------------------------------------------- */

static char *uid_one(const ClDeid *d, const char *uid)
{
    guint8 mac[32];
    hmac(d->secret, uid, mac);
    /* the first 128 bits as a big-endian number */
    guint32 limb[4];
    for (int i = 0; i < 4; i++)
        limb[i] = (guint32)mac[4 * i] << 24 | (guint32)mac[4 * i + 1] << 16 |
                  (guint32)mac[4 * i + 2] << 8 | mac[4 * i + 3];
    char out[64];
    cl_dicom_uid_2_25(limb, out, sizeof out);
    return g_strdup(out);
}

char *cl_deid_uid(const ClDeid *d, const char *uid)
{
    g_return_val_if_fail(d != NULL, NULL);
    if (!uid || !*uid)
        return g_strdup("");
    g_auto(GStrv) parts = g_strsplit(uid, "\\", -1);
    GString *out = g_string_new(NULL);
    for (int i = 0; parts[i]; i++) {
        g_strstrip(parts[i]);
        if (i)
            g_string_append_c(out, '\\');
        if (*parts[i]) {
            g_autofree char *m = uid_one(d, parts[i]);
            g_string_append(out, m);
        }
    }
    return g_string_free(out, FALSE);
}

/* ---- dates ---------------------------------------------------------------------------------- */

static gboolean shift_ymd(int days, int *y, int *m, int *dd)
{
    if (*y < 1 || *y > 9999 || *m < 1 || *m > 12 || *dd < 1 ||
        !g_date_valid_dmy((GDateDay)*dd, (GDateMonth)*m, (GDateYear)*y))
        return FALSE;
    GDate date;
    g_date_clear(&date, 1);
    g_date_set_dmy(&date, (GDateDay)*dd, (GDateMonth)*m, (GDateYear)*y);
    if (days < 0) {
        if (g_date_get_julian(&date) <= (guint32)-days)
            return FALSE;
        g_date_subtract_days(&date, (guint)-days);
    } else {
        g_date_add_days(&date, (guint)days);
    }
    *y = g_date_get_year(&date);
    *m = g_date_get_month(&date);
    *dd = g_date_get_day(&date);
    return *y <= 9999;
}

static int digits_at(const char *s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!g_ascii_isdigit(s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* What may follow a date in its own value: a DICOM DT's time (HH, HHMM, HHMMSS, a fraction, an
 * offset) or an ISO 8601 / EXIF time ("T09:30:15.123Z", " 09:30:15"). Anything else ("QUIMBY"
 * after "20230714") is not part of the date and is dropped with the shift. */
static gboolean is_time_tail(const char *rest, gboolean separated)
{
    const char *pattern =
        separated ? "^(?:[T ][0-9]{2}(?::[0-9]{2}(?::[0-9]{2}(?:[.,][0-9]+)?)?)?)?"
                    "(?:Z|[+-][0-9]{2}(?::?[0-9]{2})?)?$"
                  : "^(?:[0-9]{2}(?:[0-9]{2}(?:[0-9]{2}(?:\\.[0-9]{1,6})?)?)?)?(?:[+-][0-9]{4})?$";
    return g_regex_match_simple(pattern, rest, 0, 0);
}

/* One value; NULL when it is not a full date in a form we know. keep_time: the time of day that
 * follows the date is kept (else the shifted date alone). */
static char *shift_one(int days, const char *v, gboolean keep_time)
{
    int y = digits_at(v, 4);
    if (y < 0)
        return NULL;
    int m, dd;
    char sep = 0;
    const char *rest;
    if (g_ascii_isdigit(v[4])) { /* YYYYMMDD... */
        m = digits_at(v + 4, 2);
        dd = m >= 0 ? digits_at(v + 6, 2) : -1;
        rest = v + 8;
    } else if (v[4] == '-' || v[4] == '.' || v[4] == ':') {
        sep = v[4];
        m = digits_at(v + 5, 2);
        dd = (m >= 0 && v[7] == sep) ? digits_at(v + 8, 2) : -1;
        rest = v + 10;
    } else {
        return NULL;
    }
    if (m < 0 || dd < 0 || !shift_ymd(days, &y, &m, &dd))
        return NULL;
    if (g_ascii_isdigit(rest[0]) && !sep && strlen(rest) < 2) /* "202401311" is no DT */
        return NULL;
    if (!keep_time || !is_time_tail(rest, sep != 0))
        rest = "";
    if (sep)
        return g_strdup_printf("%04d%c%02d%c%02d%s", y, sep, m, sep, dd, rest);
    return g_strdup_printf("%04d%02d%02d%s", y, m, dd, rest);
}

static char *shift_values(const ClDeid *d, const char *value, gboolean keep_time)
{
    if (!value)
        return g_strdup("");
    g_auto(GStrv) parts = g_strsplit(value, "\\", -1);
    GString *out = g_string_new(NULL);
    for (int i = 0; parts[i]; i++) {
        g_strstrip(parts[i]);
        if (i)
            g_string_append_c(out, '\\');
        g_autofree char *s = *parts[i] ? shift_one(d->offset_days, parts[i], keep_time) : NULL;
        if (s)
            g_string_append(out, s);
    }
    return g_string_free(out, FALSE);
}

char *cl_deid_shift_date(const ClDeid *d, const char *value)
{
    g_return_val_if_fail(d != NULL, NULL);
    return shift_values(d, value, TRUE);
}

/* When an image was acquired: the basic profile removes acquisition times (AcquisitionTime), so
 * the date-times that hold the same time keep only their shifted date. */
static char *shift_acquisition(const ClDeid *d, const char *value)
{
    return shift_values(d, value, FALSE);
}

static gboolean shift_match(const GMatchInfo *mi, GString *res, gpointer data)
{
    const ClDeid *d = data;
    g_autofree char *ys = g_match_info_fetch(mi, 1), *ms = g_match_info_fetch(mi, 2),
                    *ds = g_match_info_fetch(mi, 3), *all = g_match_info_fetch(mi, 0);
    int y = atoi(ys), m = atoi(ms), dd = atoi(ds);
    if (!shift_ymd(d->offset_days, &y, &m, &dd)) {
        g_string_append(res, "[date removed]");
        return FALSE;
    }
    if (strchr(all, '-'))
        g_string_append_printf(res, "%04d-%02d-%02d", y, m, dd);
    else
        g_string_append_printf(res, "%04d%02d%02d", y, m, dd);
    return FALSE;
}

static const char *const month_names[12] = {
    "January", "February", "March",     "April",   "May",      "June",
    "July",    "August",   "September", "October", "November", "December",
};

/* 12/05/1961 or 12.05.1961: day first when the first number cannot be a month, month first when
 * the second cannot; a dotted date is day first (its usual reading); a slashed one that reads
 * both ways is removed rather than guessed. The shifted date keeps the order and separator. */
static gboolean shift_num_match(const GMatchInfo *mi, GString *res, gpointer data)
{
    const ClDeid *d = data;
    g_autofree char *as = g_match_info_fetch(mi, 1), *sep = g_match_info_fetch(mi, 2),
                    *bs = g_match_info_fetch(mi, 3), *ys = g_match_info_fetch(mi, 4);
    int a = atoi(as), b = atoi(bs), y = atoi(ys);
    gboolean day_first;
    if (a > 12 || *sep == '.')
        day_first = TRUE;
    else if (b > 12)
        day_first = FALSE;
    else if (a == b)
        day_first = TRUE;
    else {
        g_string_append(res, "[date removed]");
        return FALSE;
    }
    int m = day_first ? b : a, dd = day_first ? a : b;
    if (!shift_ymd(d->offset_days, &y, &m, &dd)) {
        g_string_append(res, "[date removed]");
        return FALSE;
    }
    if (day_first)
        g_string_append_printf(res, "%02d%s%02d%s%04d", dd, sep, m, sep, y);
    else
        g_string_append_printf(res, "%02d%s%02d%s%04d", m, sep, dd, sep, y);
    return FALSE;
}

static int month_of(const char *name)
{
    for (int i = 0; i < 12; i++)
        if (g_ascii_strncasecmp(name, month_names[i], 3) == 0)
            return i + 1;
    return 0;
}

/* May 12, 1961 / 12 May 1961: shifted, written the same way round with the month in full */
static gboolean shift_named_match(const GMatchInfo *mi, GString *res, gpointer data)
{
    const ClDeid *d = data;
    g_autofree char *m1 = g_match_info_fetch(mi, 1), *d1 = g_match_info_fetch(mi, 2),
                    *d2 = g_match_info_fetch(mi, 3), *m2 = g_match_info_fetch(mi, 4),
                    *ys = g_match_info_fetch(mi, 5);
    const gboolean month_first = m1 && *m1;
    int m = month_of(month_first ? m1 : m2), dd = atoi(month_first ? d1 : d2), y = atoi(ys);
    if (!m || !shift_ymd(d->offset_days, &y, &m, &dd)) {
        g_string_append(res, "[date removed]");
        return FALSE;
    }
    if (month_first)
        g_string_append_printf(res, "%s %d, %04d", month_names[m - 1], dd, y);
    else
        g_string_append_printf(res, "%d %s %04d", dd, month_names[m - 1], y);
    return FALSE;
}

/* ---- free text ------------------------------------------------------------------------------ */

static char *replace_terms(const ClDeid *d, const char *text)
{
    glong n = 0;
    g_autofree gunichar *orig = g_utf8_to_ucs4_fast(text, -1, &n);
    g_autofree gunichar *low = g_new(gunichar, n + 1);
    for (glong i = 0; i < n; i++)
        low[i] = g_unichar_tolower(orig[i]);
    GString *out = g_string_sized_new(strlen(text) + 16);
    for (glong i = 0; i < n;) {
        const Term *hit = NULL;
        for (guint k = 0; k < d->terms->len && !hit; k++) {
            const Term *t = g_ptr_array_index(d->terms, k);
            if (t->n > n - i || memcmp(low + i, t->lower, sizeof(gunichar) * (gsize)t->n) != 0)
                continue;
            if (t->whole_word && ((i > 0 && g_unichar_isalnum(orig[i - 1])) ||
                                  (i + t->n < n && g_unichar_isalnum(orig[i + t->n]))))
                continue;
            hit = t;
        }
        if (hit) {
            g_string_append(out, hit->replacement);
            i += hit->n;
        } else {
            g_string_append_unichar(out, orig[i]);
            i++;
        }
    }
    return g_string_free(out, FALSE);
}

char *cl_deid_text(const ClDeid *d, const char *text)
{
    g_return_val_if_fail(d != NULL, NULL);
    if (!text)
        return NULL;
    g_autofree char *valid = g_utf8_make_valid(text, -1);
    g_autofree char *nfc = g_utf8_normalize(valid, -1, G_NORMALIZE_DEFAULT_COMPOSE);
    g_autofree char *a = replace_terms(d, nfc ? nfc : valid);
    g_autofree char *b =
        g_regex_replace_eval(d->iso_date, a, -1, 0, 0, shift_match, (gpointer)d, NULL);
    if (!b)
        return g_steal_pointer(&a);
    g_autofree char *c =
        g_regex_replace_eval(d->da_date, b, -1, 0, 0, shift_match, (gpointer)d, NULL);
    if (!c)
        return g_steal_pointer(&b);
    g_autofree char *e =
        g_regex_replace_eval(d->num_date, c, -1, 0, 0, shift_num_match, (gpointer)d, NULL);
    if (!e)
        return g_steal_pointer(&c);
    char *f =
        g_regex_replace_eval(d->named_date, e, -1, 0, 0, shift_named_match, (gpointer)d, NULL);
    return f ? f : g_steal_pointer(&e);
}

/* ---- images and metadata -------------------------------------------------------------------- */

char *cl_deid_image_name(const ClCaseImage *img)
{
    /* the extension comes from the format, never from the file name: a name's extension can be
     * anything its writer chose ("scan.77123", the patient's ID) */
    const char *f = img->format ? img->format : "";
    const char *ext = g_ascii_strcasecmp(f, "DICOM") == 0  ? "dcm"
                      : g_ascii_strcasecmp(f, "TIFF") == 0 ? "tif"
                      : g_ascii_strcasecmp(f, "JPEG") == 0 ? "jpg"
                      : g_ascii_strcasecmp(f, "PNG") == 0  ? "png"
                      : g_ascii_strcasecmp(f, "WebP") == 0 ? "webp"
                      : g_ascii_strcasecmp(f, "BMP") == 0  ? "bmp"
                      : g_ascii_strcasecmp(f, "GIF") == 0  ? "gif"
                                                           : "img";
    return g_strdup_printf("image-%u.%s", img->position + 1, ext);
}

/* Strings anywhere inside a kept value are scrubbed; other values are kept as they are. */
static JsonNode *scrub_node(const ClDeid *d, JsonNode *node)
{
    if (JSON_NODE_HOLDS_OBJECT(node)) {
        JsonObject *in = json_node_get_object(node), *out = json_object_new();
        g_autoptr(GList) members = json_object_get_members(in);
        /* keys are the program's vocabulary (and DICOM keywords): only values are scrubbed,
         * or a patient named "Patient" would rename PatientOrientation */
        for (GList *l = members; l; l = l->next)
            json_object_set_member(out, l->data,
                                   scrub_node(d, json_object_get_member(in, l->data)));
        JsonNode *n = json_node_new(JSON_NODE_OBJECT);
        json_node_take_object(n, out);
        return n;
    }
    if (JSON_NODE_HOLDS_ARRAY(node)) {
        JsonArray *in = json_node_get_array(node), *out = json_array_new();
        for (guint i = 0; i < json_array_get_length(in); i++)
            json_array_add_element(out, scrub_node(d, json_array_get_element(in, i)));
        JsonNode *n = json_node_new(JSON_NODE_ARRAY);
        json_node_take_array(n, out);
        return n;
    }
    if (JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_STRING) {
        g_autofree char *s = cl_deid_text(d, json_node_get_string(node));
        JsonNode *n = json_node_new(JSON_NODE_VALUE);
        json_node_set_string(n, s);
        return n;
    }
    return json_node_copy(node);
}

static char *node_to_string(JsonNode *node, gboolean pretty)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    json_generator_set_pretty(gen, pretty);
    json_generator_set_root(gen, node);
    return json_generator_to_data(gen, NULL);
}

static const char *dummy_for(const char *key)
{
    (void)key; /* the D attributes we know are person names */
    return "ANONYMIZED";
}

/* Date-times that say when the pixels were acquired (their time is removed, as AcquisitionTime) */
static gboolean is_acquisition_time(const char *key)
{
    static const char *const keys[] = { "AcquisitionDateTime",
                                        "FrameAcquisitionDateTime",
                                        "DateTimeOriginal",
                                        "DateTimeDigitized",
                                        "DateTime",
                                        "Creation Time" };
    for (guint i = 0; i < G_N_ELEMENTS(keys); i++)
        if (g_ascii_strcasecmp(key, keys[i]) == 0)
            return TRUE;
    return FALSE;
}

char *cl_deid_metadata(const ClDeid *d, const char *metadata_json, gboolean dicom)
{
    g_return_val_if_fail(d != NULL, NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *in = parse_object(metadata_json, parser);
    if (!in)
        return NULL;
    JsonObject *out = json_object_new();
    g_autoptr(GList) members = json_object_get_members(in);
    for (GList *l = members; l; l = l->next) {
        const char *key = l->data;
        JsonNode *v = json_object_get_member(in, key);
        gboolean is_string =
            JSON_NODE_HOLDS_VALUE(v) && json_node_get_value_type(v) == G_TYPE_STRING;
        const char *s = is_string ? json_node_get_string(v) : NULL;
        switch (cl_deid_action(key, dicom)) {
        case CL_DEID_REMOVE: break;
        case CL_DEID_EMPTY: json_object_set_string_member(out, key, ""); break;
        case CL_DEID_DUMMY: json_object_set_string_member(out, key, dummy_for(key)); break;
        case CL_DEID_UID: {
            g_autofree char *m = cl_deid_uid(d, s ? s : "");
            json_object_set_string_member(out, key, m);
            break;
        }
        case CL_DEID_SHIFT: {
            g_autofree char *m = is_acquisition_time(key) ? shift_acquisition(d, s ? s : "")
                                                          : cl_deid_shift_date(d, s ? s : "");
            json_object_set_string_member(out, key, m);
            break;
        }
        case CL_DEID_KEEP: json_object_set_member(out, key, scrub_node(d, v)); break;
        }
    }
    if (dicom) {
        json_object_set_string_member(out, "PatientIdentityRemoved", "YES");
        json_object_set_string_member(out, "DeidentificationMethod", cl_deid_method());
        json_object_set_string_member(out, "LongitudinalTemporalInformationModified", "MODIFIED");
    }
    JsonNode *root = json_node_new(JSON_NODE_OBJECT);
    json_node_take_object(root, out);
    char *text = node_to_string(root, FALSE);
    json_node_unref(root);
    return text;
}

/* ---- the whole case ------------------------------------------------------------------------- */

static void replace_str(char **field, char *value)
{
    g_free(*field);
    *field = value;
}

static void shift_field(const ClDeid *d, char **field)
{
    if (*field && **field)
        replace_str(field, cl_deid_shift_date(d, *field));
}

static void text_field(const ClDeid *d, char **field)
{
    if (*field)
        replace_str(field, cl_deid_text(d, *field));
}

/* A JSON text with every string scrubbed; text that is not JSON is scrubbed as text. */
static void json_field(const ClDeid *d, char **field)
{
    if (!*field)
        return;
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!g_utf8_validate(*field, -1, NULL) ||
        !json_parser_load_from_data(parser, *field, -1, NULL) || !json_parser_get_root(parser)) {
        text_field(d, field);
        return;
    }
    JsonNode *n = scrub_node(d, json_parser_get_root(parser));
    char *out = node_to_string(n, FALSE);
    json_node_unref(n);
    if (!g_utf8_validate(out, -1, NULL)) {
        /* a lone surrogate escape ("\ud83d") parses to bytes that are not UTF-8: scrubbed as text */
        g_free(out);
        text_field(d, field);
        return;
    }
    replace_str(field, out);
}

void cl_deid_case(const ClDeid *d, ClCase *c)
{
    g_return_if_fail(d != NULL && c != NULL);
    text_field(d, &c->summary.name);
    shift_field(d, &c->summary.created_at);
    shift_field(d, &c->summary.updated_at);
    for (guint i = 0; i < c->images->len; i++) {
        ClCaseImage *img = g_ptr_array_index(c->images, i);
        gboolean dicom = img->format && g_ascii_strcasecmp(img->format, "DICOM") == 0;
        char *meta = cl_deid_metadata(d, img->metadata_json, dicom);
        replace_str(&img->metadata_json, meta ? meta : g_strdup("{}"));
        replace_str(&img->path, cl_deid_image_name(img));
        if (img->acquired_at && *img->acquired_at)
            replace_str(&img->acquired_at, shift_acquisition(d, img->acquired_at));
        shift_field(d, &img->added_at);
        img->file_mtime += (gint64)d->offset_days * 86400;
    }
    for (guint i = 0; i < c->runs->len; i++) {
        ClCaseRun *r = g_ptr_array_index(c->runs, i);
        shift_field(d, &r->created_at);
        if (r->model_name && strchr(r->model_name, G_DIR_SEPARATOR)) /* a path names its owner */
            replace_str(&r->model_name, g_path_get_basename(r->model_name));
        text_field(d, &r->model_name);
        json_field(d, &r->model_config_json);
        json_field(d, &r->settings_json);
        text_field(d, &r->device);
    }
    for (guint i = 0; i < c->descriptions->len; i++) {
        ClCaseDescVersion *v = g_ptr_array_index(c->descriptions, i);
        text_field(d, &v->text);
        text_field(d, &v->author);
        shift_field(d, &v->created_at);
    }
    for (guint i = 0; i < c->notes->len; i++) {
        ClCaseNote *n = g_ptr_array_index(c->notes, i);
        text_field(d, &n->text);
        text_field(d, &n->author);
        shift_field(d, &n->created_at);
    }
    for (guint i = 0; i < c->key_images->len; i++) {
        ClCaseKeyImage *k = g_ptr_array_index(c->key_images, i);
        text_field(d, &k->label);
        shift_field(d, &k->created_at);
    }
    g_ptr_array_set_size(c->audit, 0);
}
