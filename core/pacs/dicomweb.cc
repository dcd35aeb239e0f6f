// dicomweb.cc - the PACS over DICOMweb (PS3.18) through libsoup: QIDO-RS for the studies and
// series cl_pacs_find returns, WADO-RS for a study's instances (the multipart answer streamed
// part by part into files, never held whole), STOW-RS for files sent back, one request a file.
// Only the base URL the user gave is contacted: no proxy, no redirect to another host.
#include <dcmtk/config/osconfig.h>

#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>

#include <algorithm>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <string>
#include <vector>

extern "C" {
#include "pacs/pacs-private.h"
}

namespace
{

std::string who(const ClPacsPeer *p)
{
    return std::string("DICOMweb server at ") + p->dicomweb;
}

guint timeout_of(const ClPacsPeer *p)
{
    return p->timeout_s ? p->timeout_s : 30;
}

/* The base URL: http or https, a host, no query or fragment; its path without a trailing '/'. */
gboolean check_base(const ClPacsPeer *p, std::string &base, GError **error)
{
    g_autoptr(GUri) u = g_uri_parse(p->dicomweb, G_URI_FLAGS_NONE, NULL);
    const char *scheme = u ? g_uri_get_scheme(u) : NULL;
    if (!u || !scheme ||
        (g_ascii_strcasecmp(scheme, "http") != 0 && g_ascii_strcasecmp(scheme, "https") != 0) ||
        !g_uri_get_host(u) || !*g_uri_get_host(u) || g_uri_get_query(u) || g_uri_get_fragment(u)) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID,
                    "'%s' is not a DICOMweb base URL (http://HOST:PORT/PATH, e.g. "
                    "http://127.0.0.1:8042/dicom-web)",
                    p->dicomweb);
        return FALSE;
    }
    base = p->dicomweb;
    while (!base.empty() && base.back() == '/')
        base.pop_back();
    return TRUE;
}

SoupSession *new_session(const ClPacsPeer *p)
{
    /* direct connections only (a proxy would be another address), the peer's timeout */
    return SOUP_SESSION(g_object_new(SOUP_TYPE_SESSION, "timeout", timeout_of(p), "idle-timeout",
                                     timeout_of(p), "user-agent", "ChangeLens", "proxy-resolver",
                                     NULL, NULL));
}

/* A transport error in words: refused, unknown host, timeout, the rest. */
void set_transport_error(GError **error, const ClPacsPeer *p, const char *doing, const GError *e)
{
    ClPacsError code = CL_PACS_ERROR_FAILED;
    std::string msg;
    if (g_error_matches(e, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED)) {
        code = CL_PACS_ERROR_CONNECT;
        msg = "cannot connect to " + who(p) +
              ": connection refused (is it running, is the URL "
              "right?)";
    } else if (g_error_matches(e, G_IO_ERROR, G_IO_ERROR_TIMED_OUT)) {
        code = CL_PACS_ERROR_TIMEOUT;
        msg = who(p) + " did not answer within " + std::to_string(timeout_of(p)) + " s (" + doing +
              ")";
    } else if (e->domain == G_RESOLVER_ERROR ||
               g_error_matches(e, G_IO_ERROR, G_IO_ERROR_HOST_UNREACHABLE) ||
               g_error_matches(e, G_IO_ERROR, G_IO_ERROR_NETWORK_UNREACHABLE)) {
        code = CL_PACS_ERROR_CONNECT;
        msg = "cannot connect to " + who(p) + ": " + e->message;
    } else {
        msg = who(p) + ": " + doing + " failed: " + e->message;
    }
    g_set_error_literal(error, CL_PACS_ERROR, code, msg.c_str());
}

/* An HTTP status that is not success, in words. */
gboolean check_status(SoupMessage *msg, const ClPacsPeer *p, const char *doing, GError **error)
{
    guint st = soup_message_get_status(msg);
    if (st >= 200 && st < 300)
        return TRUE;
    const char *reason = soup_message_get_reason_phrase(msg);
    std::string text = std::to_string(st) + (reason && *reason ? std::string(" ") + reason : "");
    ClPacsError code = st == 401 || st == 403 ? CL_PACS_ERROR_REJECTED : CL_PACS_ERROR_FAILED;
    std::string hint = st == 404   ? " (is the base URL right, and the study there?)"
                       : st == 401 ? " (it asks for credentials, which ChangeLens does not send)"
                                   : "";
    g_set_error(error, CL_PACS_ERROR, code, "%s answered %s to %s%s", who(p).c_str(), text.c_str(),
                doing, hint.c_str());
    return FALSE;
}

/* A request whose whole answer is small (QIDO-RS, STOW-RS): the body, or NULL + error. */
GBytes *send_small(SoupSession *s, SoupMessage *msg, const ClPacsPeer *p, const char *doing,
                   GError **error)
{
    GError *e = NULL;
    GBytes *body = soup_session_send_and_read(s, msg, NULL, &e);
    if (!body) {
        set_transport_error(error, p, doing, e);
        g_error_free(e);
        return NULL;
    }
    if (!check_status(msg, p, doing, error)) {
        g_bytes_unref(body);
        return NULL;
    }
    return body;
}

/* ---- QIDO-RS answers (application/dicom+json) ---- */

/* An attribute's values as DICOM's string form: several joined by '\', a person name's
 * alphabetic group, numbers in decimal; "" when absent. */
char *json_value(JsonObject *ds, const char *tag)
{
    JsonNode *n = json_object_get_member(ds, tag);
    if (!n || !JSON_NODE_HOLDS_OBJECT(n))
        return g_strdup("");
    JsonObject *a = json_node_get_object(n);
    JsonNode *v = json_object_get_member(a, "Value");
    if (!v || !JSON_NODE_HOLDS_ARRAY(v))
        return g_strdup("");
    JsonArray *arr = json_node_get_array(v);
    GString *out = g_string_new(NULL);
    for (guint i = 0; i < json_array_get_length(arr); i++) {
        JsonNode *e = json_array_get_element(arr, i);
        if (i)
            g_string_append_c(out, '\\');
        if (JSON_NODE_HOLDS_OBJECT(e)) {
            JsonObject *pn = json_node_get_object(e);
            if (json_object_has_member(pn, "Alphabetic")) {
                JsonNode *al = json_object_get_member(pn, "Alphabetic");
                if (JSON_NODE_HOLDS_VALUE(al) && json_node_get_value_type(al) == G_TYPE_STRING)
                    g_string_append(out, json_node_get_string(al));
            }
        } else if (JSON_NODE_HOLDS_VALUE(e)) {
            GType t = json_node_get_value_type(e);
            if (t == G_TYPE_STRING)
                g_string_append(out, json_node_get_string(e));
            else if (t == G_TYPE_INT64)
                g_string_append_printf(out, "%" G_GINT64_FORMAT, json_node_get_int(e));
            else if (t == G_TYPE_DOUBLE)
                g_string_append_printf(out, "%.17g", json_node_get_double(e));
        }
    }
    return g_string_free(out, FALSE);
}

int json_count(JsonObject *ds, const char *tag)
{
    g_autofree char *s = json_value(ds, tag);
    gint64 n;
    g_strstrip(s);
    return g_ascii_string_to_signed(s, 10, 0, G_MAXINT, &n, NULL) ? (int)n : -1;
}

void add_param(std::string &url, bool &first, const char *key, const char *value)
{
    if (!value || !*value)
        return;
    g_autofree char *v = g_uri_escape_string(value, "*?", FALSE);
    url += (first ? "?" : "&") + std::string(key) + "=" + v;
    first = false;
}

/* ---- WADO-RS: a multipart answer, part by part into files ---- */

/* The part's bytes into path; FALSE + error when reading or writing fails. */
gboolean write_part(GInputStream *part, const char *path, const ClPacsPeer *p, GError **error)
{
    g_autoptr(GFile) f = g_file_new_for_path(path);
    GError *e = NULL;
    g_autoptr(GFileOutputStream) out =
        g_file_replace(f, NULL, FALSE, G_FILE_CREATE_PRIVATE, NULL, &e);
    if (!out) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_IO, "cannot write %s: %s", path,
                    e->message);
        g_error_free(e);
        return FALSE;
    }
    gssize n = g_output_stream_splice(
        G_OUTPUT_STREAM(out), part, (GOutputStreamSpliceFlags)(G_OUTPUT_STREAM_SPLICE_CLOSE_TARGET),
        NULL, &e);
    if (n < 0) {
        if (e->domain == G_IO_ERROR && e->code != G_IO_ERROR_NO_SPACE &&
            e->code != G_IO_ERROR_PERMISSION_DENIED)
            set_transport_error(error, p, "retrieving the study", e);
        else
            g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_IO, "cannot write %s: %s", path,
                        e->message);
        g_error_free(e);
        g_unlink(path);
        return FALSE;
    }
    return TRUE;
}

/* A received file renamed to its SOPInstanceUID.dcm; FALSE when it is not a DICOM file. */
gboolean name_instance(const char *tmp, const char *dir, int k, std::string &final_path,
                       const ClPacsPeer *p, GError **error)
{
    DcmFileFormat ff;
    OFCondition c = ff.loadFile(tmp, EXS_Unknown, EGL_noChange, 4096);
    if (c.bad()) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_FAILED,
                    "%s sent part %d of the study, which is not a DICOM file (%s)", who(p).c_str(),
                    k, c.text());
        g_unlink(tmp);
        return FALSE;
    }
    OFString uid;
    std::string name;
    if (ff.getDataset()->findAndGetOFString(DCM_SOPInstanceUID, uid).good() &&
        cl_pacs_uid_is_safe(uid.c_str()))
        name = std::string(uid.c_str()) + ".dcm";
    else
        name = "instance-" + std::to_string(k) + ".dcm";
    g_autofree char *path = g_build_filename(dir, name.c_str(), NULL);
    if (g_rename(tmp, path) != 0) {
        int e = errno;
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_IO, "cannot write %s: %s", path,
                    g_strerror(e));
        g_unlink(tmp);
        return FALSE;
    }
    final_path = path;
    return TRUE;
}

/* "DICM" at 128: a DICOM file with its meta header, as STOW-RS takes them */
gboolean is_part10(const char *path, GBytes **out, GError **error)
{
    GError *e = NULL;
    g_autoptr(GMappedFile) m = g_mapped_file_new(path, FALSE, &e);
    if (!m) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_IO, "cannot read %s: %s", path, e->message);
        g_error_free(e);
        return FALSE;
    }
    gsize len = g_mapped_file_get_length(m);
    const char *d = g_mapped_file_get_contents(m);
    if (len < 132 || memcmp(d + 128, "DICM", 4) != 0) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_IO,
                    "cannot read %s as DICOM: it is not a DICOM file with a meta header (no DICM "
                    "at byte 128)",
                    path);
        return FALSE;
    }
    *out = g_mapped_file_get_bytes(m);
    return TRUE;
}

} // namespace

extern "C" GPtrArray *cl_dicomweb_find(const ClPacsPeer *peer, ClPacsLevel level,
                                       const ClPacsQuery *query, GError **error)
{
    std::string base;
    if (!check_base(peer, base, error))
        return NULL;
    if (!cl_pacs_check_query(level, query, TRUE, error))
        return NULL;
    std::string url = base;
    bool first = true;
    if (level == CL_PACS_LEVEL_STUDY) {
        url += "/studies";
        add_param(url, first, "PatientID", query->patient_id);
        add_param(url, first, "AccessionNumber", query->accession);
        add_param(url, first, "StudyInstanceUID", query->study_uid);
        for (const char *t : { "00100010", "00100020", "00080020", "00080030", "00081030",
                               "00080050", "00080061", "00201206", "00201208" })
            add_param(url, first, "includefield", t);
    } else {
        url += std::string("/studies/") + query->study_uid + "/series";
        add_param(url, first, "PatientID", query->patient_id);
        add_param(url, first, "AccessionNumber", query->accession);
        for (const char *t : { "0008103E", "00200011", "00080060", "00201209" })
            add_param(url, first, "includefield", t);
    }
    g_autoptr(SoupSession) s = new_session(peer);
    g_autoptr(SoupMessage) msg = soup_message_new("GET", url.c_str());
    if (!msg) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID, "cannot make a URL of %s",
                    url.c_str());
        return NULL;
    }
    soup_message_headers_replace(soup_message_get_request_headers(msg), "Accept",
                                 "application/dicom+json");
    soup_message_add_flags(msg, SOUP_MESSAGE_NO_REDIRECT);
    g_autoptr(GBytes) body = send_small(s, msg, peer, "a query (QIDO-RS)", error);
    if (!body)
        return NULL;
    GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)cl_pacs_match_free);
    gsize len = 0;
    const char *text = (const char *)g_bytes_get_data(body, &len);
    if (soup_message_get_status(msg) == 204 || len == 0)
        return out; /* nothing matched */
    g_autoptr(JsonParser) parser = json_parser_new();
    GError *e = NULL;
    if (!json_parser_load_from_data(parser, text, (gssize)len, &e) ||
        !JSON_NODE_HOLDS_ARRAY(json_parser_get_root(parser))) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_FAILED,
                    "%s answered the query with something that is not DICOM JSON (%s)",
                    who(peer).c_str(), e ? e->message : "not an array");
        g_clear_error(&e);
        g_ptr_array_unref(out);
        return NULL;
    }
    JsonArray *arr = json_node_get_array(json_parser_get_root(parser));
    std::vector<ClPacsMatch *> v;
    for (guint i = 0; i < json_array_get_length(arr); i++) {
        JsonNode *n = json_array_get_element(arr, i);
        if (!JSON_NODE_HOLDS_OBJECT(n))
            continue;
        JsonObject *d = json_node_get_object(n);
        ClPacsMatch *m = g_new0(ClPacsMatch, 1);
        m->patient_name = json_value(d, "00100010");
        m->patient_id = json_value(d, "00100020");
        m->study_date = json_value(d, "00080020");
        m->study_time = json_value(d, "00080030");
        m->study_description = json_value(d, "00081030");
        m->accession = json_value(d, "00080050");
        m->study_uid = json_value(d, "0020000D");
        if (!*m->study_uid && level == CL_PACS_LEVEL_SERIES) {
            g_free(m->study_uid);
            m->study_uid = g_strdup(query->study_uid);
        }
        m->modalities = json_value(d, "00080061");
        m->n_series = json_count(d, "00201206");
        m->n_instances = json_count(d, level == CL_PACS_LEVEL_SERIES ? "00201209" : "00201208");
        m->series_uid = json_value(d, "0020000E");
        m->series_description = json_value(d, "0008103E");
        m->modality = json_value(d, "00080060");
        m->series_number = json_count(d, "00200011");
        v.push_back(m);
    }
    std::stable_sort(v.begin(), v.end(), [](const ClPacsMatch *a, const ClPacsMatch *b) {
        return cl_pacs_match_compare(a, b) < 0;
    });
    for (ClPacsMatch *m : v)
        g_ptr_array_add(out, m);
    return out;
}

extern "C" gboolean cl_dicomweb_get_study(const ClPacsPeer *peer, const char *study_uid,
                                          const char *out_dir, GPtrArray *files, GError **error)
{
    std::string base;
    if (!check_base(peer, base, error))
        return FALSE;
    if (!cl_pacs_check_get(study_uid, out_dir, TRUE, error))
        return FALSE;
    std::string url = base + "/studies/" + study_uid;
    g_autoptr(SoupSession) s = new_session(peer);
    g_autoptr(SoupMessage) msg = soup_message_new("GET", url.c_str());
    if (!msg) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID, "cannot make a URL of %s",
                    url.c_str());
        return FALSE;
    }
    soup_message_headers_replace(soup_message_get_request_headers(msg), "Accept",
                                 "multipart/related; type=\"application/dicom\"");
    soup_message_add_flags(msg, SOUP_MESSAGE_NO_REDIRECT);
    GError *e = NULL;
    g_autoptr(GInputStream) stream = soup_session_send(s, msg, NULL, &e);
    if (!stream) {
        set_transport_error(error, peer, "retrieving the study (WADO-RS)", e);
        g_error_free(e);
        return FALSE;
    }
    if (!check_status(msg, peer, "retrieving the study (WADO-RS)", error))
        return FALSE;
    g_autoptr(SoupMultipartInputStream) parts = soup_multipart_input_stream_new(msg, stream);
    int k = 0;
    for (;;) {
        g_autoptr(GInputStream) part = soup_multipart_input_stream_next_part(parts, NULL, &e);
        if (!part) {
            if (e) {
                set_transport_error(error, peer, "retrieving the study (WADO-RS)", e);
                g_error_free(e);
                return FALSE;
            }
            break;
        }
        k++;
        g_autofree char *tmp_name = g_strdup_printf(".incoming-%d.part", k);
        g_autofree char *tmp = g_build_filename(out_dir, tmp_name, NULL);
        std::string path;
        if (!write_part(part, tmp, peer, error) ||
            !name_instance(tmp, out_dir, k, path, peer, error))
            return FALSE;
        if (files)
            g_ptr_array_add(files, g_strdup(path.c_str()));
    }
    if (k == 0) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_FAILED, "%s sent no instance of study %s",
                    who(peer).c_str(), study_uid);
        return FALSE;
    }
    return TRUE;
}

extern "C" gboolean cl_dicomweb_store_files(const ClPacsPeer *peer, const char *const *paths,
                                            guint *n_stored, GError **error)
{
    if (n_stored)
        *n_stored = 0;
    std::string base;
    if (!check_base(peer, base, error))
        return FALSE;
    if (!paths || !paths[0]) {
        g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID, "no files to send");
        return FALSE;
    }
    /* every file checked first: one that is not DICOM stops the send before anything went */
    std::vector<GBytes *> data;
    auto free_data = [&data] {
        for (GBytes *b : data)
            g_bytes_unref(b);
    };
    for (guint i = 0; paths[i]; i++) {
        GBytes *b = NULL;
        if (!is_part10(paths[i], &b, error)) {
            free_data();
            return FALSE;
        }
        data.push_back(b);
    }
    g_autoptr(SoupSession) s = new_session(peer);
    const std::string url = base + "/studies";
    gboolean ok = TRUE;
    for (guint i = 0; ok && paths[i]; i++) {
        SoupMultipart *mp = soup_multipart_new("multipart/related");
        SoupMessageHeaders *ph = soup_message_headers_new(SOUP_MESSAGE_HEADERS_MULTIPART);
        soup_message_headers_replace(ph, "Content-Type", "application/dicom");
        soup_multipart_append_part(mp, ph, data[i]);
        soup_message_headers_unref(ph);
        g_autoptr(SoupMessage) msg = soup_message_new("POST", url.c_str());
        if (!msg) {
            soup_multipart_free(mp);
            g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_INVALID, "cannot make a URL of %s",
                        url.c_str());
            ok = FALSE;
            break;
        }
        SoupMessageHeaders *rh = soup_message_get_request_headers(msg);
        GBytes *body = NULL;
        soup_multipart_to_message(mp, rh, &body);
        soup_multipart_free(mp);
        /* PS3.18: the parts' type is a parameter of the multipart's */
        GHashTable *theirs = NULL;
        g_autofree char *mime = g_strdup(soup_message_headers_get_content_type(rh, &theirs));
        g_autofree char *boundary =
            g_strdup(theirs ? (const char *)g_hash_table_lookup(theirs, "boundary") : NULL);
        if (theirs)
            g_hash_table_destroy(theirs);
        g_autoptr(GHashTable) params = g_hash_table_new(g_str_hash, g_str_equal);
        if (boundary)
            g_hash_table_insert(params, (gpointer) "boundary", boundary);
        g_hash_table_insert(params, (gpointer) "type", (gpointer) "application/dicom");
        soup_message_headers_set_content_type(rh, mime, params);
        soup_message_set_request_body_from_bytes(msg, NULL, body);
        g_bytes_unref(body);
        soup_message_headers_replace(rh, "Accept", "application/dicom+json");
        soup_message_add_flags(msg, SOUP_MESSAGE_NO_REDIRECT);
        g_autofree char *doing = g_strdup_printf("storing %s (STOW-RS)", paths[i]);
        g_autoptr(GBytes) answer = send_small(s, msg, peer, doing, error);
        if (!answer) {
            ok = FALSE;
        } else if (soup_message_get_status(msg) == 202) { /* stored with warnings, or in part */
            g_set_error(error, CL_PACS_ERROR, CL_PACS_ERROR_FAILED,
                        "%s did not store all of %s (202 Accepted with failures)",
                        who(peer).c_str(), paths[i]);
            ok = FALSE;
        } else if (n_stored)
            (*n_stored)++;
    }
    free_data();
    return ok;
}
