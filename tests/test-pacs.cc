/* test-pacs.cc - `changelens-cli pacs` against a real Orthanc that this test starts on loopback
 * ports with its own configuration (storage in a temporary folder, our AE title allowed to
 * find, get and store, no plugin but Debian's DICOMweb one, no remote access) and stops at the
 * end; if the test dies, the server dies with it (PR_SET_PDEATHSIG). Loaded with the test's own
 * DICOM files (the radiograph task's two studies of one patient); find -> get -> describe ->
 * store the report -> find it again, and read the report objects back — once over DIMSE, once
 * over DICOMweb (QIDO-RS, WADO-RS, STOW-RS; another patient; skipped without the plugin). Exit
 * 77 (skipped) only when the Orthanc program is missing or does not start. Only 127.0.0.1 is
 * ever contacted. */
#include <dcmtk/config/osconfig.h>

#include <dcmtk/dcmdata/dctk.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

extern "C" {
#include "fixtures.h"
#include "image/image.h"
}

static char *tmpdir;
static char *port_text;
static char *files[2]; /* the fixture: prior and current study */
static char *study_uid[2], *patient_id;
static char *got[2];                  /* the retrieved copies */
static std::vector<std::string> peer; /* the connection options of the protocol under test */
static const char *mode = "";         /* "dimse" or "dicomweb": whose fixture is loaded */

typedef struct {
    int status;
    std::string out, err;
} Run;

/* argv (CL_CLI first, NULL last) run to its end */
static Run run_argv(std::vector<const char *> &argv)
{
    argv.push_back(NULL);
    g_autofree char *out = NULL, *err = NULL;
    g_autoptr(GError) error = NULL;
    int status = 0;
    g_assert_true(g_spawn_sync(NULL, (char **)argv.data(), NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                               &err, &status, &error));
    g_assert_no_error(error);
    if (!WIFEXITED(status))
        g_error("changelens-cli %s died (status %d): %s", argv[1], status, err);
    return Run{ WEXITSTATUS(status), out, err };
}

/* changelens-cli ARGS… (NULL-terminated) */
static Run cli(const char *first, ...)
{
    std::vector<const char *> argv = { g_getenv("CL_CLI"), first };
    va_list ap;
    va_start(ap, first);
    for (const char *a; (a = va_arg(ap, const char *));)
        argv.push_back(a);
    va_end(ap);
    return run_argv(argv);
}

/* changelens-cli pacs SUB, the connection options of the protocol under test, ARGS… */
static Run pacs(const char *sub, ...)
{
    std::vector<const char *> argv = { g_getenv("CL_CLI"), "pacs", sub };
    for (const std::string &a : peer)
        argv.push_back(a.c_str());
    va_list ap;
    va_start(ap, sub);
    for (const char *a; (a = va_arg(ap, const char *));)
        argv.push_back(a);
    va_end(ap);
    return run_argv(argv);
}

static void expect_ok(const Run &r, const char *what)
{
    if (r.status != 0)
        g_error("%s: expected success, got exit %d: %s", what, r.status, r.err.c_str());
}

static void expect_fail(const Run &r, const char *what, const char *message)
{
    if (r.status != 1 || r.err.find(message) == std::string::npos)
        g_error("%s: expected exit 1 with '%s', got exit %d: %s", what, message, r.status,
                r.err.c_str());
}

static JsonArray *json_array(const std::string &text, JsonParser **keep)
{
    *keep = json_parser_new();
    g_autoptr(GError) error = NULL;
    if (!json_parser_load_from_data(*keep, text.c_str(), -1, &error))
        g_error("not JSON (%s): %.300s", error->message, text.c_str());
    return json_node_get_array(json_parser_get_root(*keep));
}

static ClFixtureOrthanc orthanc;

static int free_port(void)
{
    return cl_fixture_free_port();
}

/* A loopback port that accepts connections and then says nothing: the socket, *port its port */
static int mute_port(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    g_assert_cmpint(bind(fd, (struct sockaddr *)&sa, sizeof sa), ==, 0);
    g_assert_cmpint(listen(fd, 4), ==, 0);
    g_assert_cmpint(getsockname(fd, (struct sockaddr *)&sa, &len), ==, 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

/* ---- the fixture ---- */

static void make_fixture(int seed)
{
    g_autofree char *dir = g_build_filename(tmpdir, mode, "synth", NULL);
    g_autofree char *seed_text = g_strdup_printf("%d", seed);
    Run r =
        cli("synth", "--task", "radiograph", "--n", "1", "--seed", seed_text, "--out", dir, NULL);
    expect_ok(r, "synth");
    g_clear_pointer(&patient_id, g_free);
    for (int k = 0; k < 2; k++) {
        g_autofree char *name = g_strdup_printf("000001-%d.dcm", k + 1);
        g_free(files[k]);
        files[k] = g_build_filename(dir, "images", name, NULL);
        g_autoptr(GError) err = NULL;
        g_autoptr(ClImage) img = cl_image_load(files[k], NULL, &err);
        g_assert_no_error(err);
        g_free(study_uid[k]);
        study_uid[k] = g_strdup(img->study_uid);
        if (!patient_id)
            patient_id = g_strdup(img->patient_id);
        g_assert_cmpstr(patient_id, ==, img->patient_id);
        g_clear_pointer(&got[k], g_free);
    }
    g_assert_cmpstr(study_uid[0], !=, study_uid[1]);
}

/* The protocol a test runs over (its data: "dimse" or "dicomweb"): its connection options and
 * its own fixture (another patient for DICOMweb), made when the protocol changes. FALSE (the
 * test skipped) for DICOMweb without Orthanc's plugin. */
static gboolean enter(gconstpointer data)
{
    const char *m = (const char *)data;
    const gboolean web = strcmp(m, "dicomweb") == 0;
    if (web && !orthanc.dicomweb) {
        g_test_skip(
            "Orthanc's DICOMweb plugin is not installed (apt-get install orthanc-dicomweb)");
        return FALSE;
    }
    if (strcmp(mode, m) == 0)
        return TRUE;
    mode = m;
    peer.clear();
    if (web) {
        peer = { "--dicomweb", std::string("http://127.0.0.1:") +
                                   std::to_string(orthanc.http_port) + "/dicom-web/" };
    } else {
        peer = { "--host", "127.0.0.1", "--port", port_text,
                 "--aec",  "CLTEST",    "--aet",  "CHANGELENS" };
    }
    g_autofree char *dir = g_build_filename(tmpdir, mode, NULL);
    g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
    make_fixture(web ? 12 : 11);
    return TRUE;
}

/* ---- the tests, in order ---- */

static void test_store_files(gconstpointer data)
{
    if (!enter(data))
        return;
    Run r = pacs("store", files[0], files[1], NULL);
    expect_ok(r, "store files");
    g_assert_true(r.err.find("2 of 2 files stored") != std::string::npos);
    /* a file that is not DICOM is refused before anything is sent */
    g_autofree char *bad = g_build_filename(tmpdir, mode, "not-dicom.dcm", NULL);
    g_assert_true(g_file_set_contents(bad, "hello", -1, NULL));
    expect_fail(pacs("store", bad, NULL), "store a text file", "cannot read");
}

static void test_find(gconstpointer data)
{
    if (!enter(data))
        return;
    g_autoptr(JsonParser) p = NULL;
    Run r = pacs("find", "--patient", patient_id, "--json", NULL);
    expect_ok(r, "find by patient");
    JsonArray *a = json_array(r.out, &p);
    g_assert_cmpuint(json_array_get_length(a), ==, 2);
    for (guint k = 0; k < 2; k++) { /* oldest first: the prior, then the current study */
        JsonObject *o = json_array_get_object_element(a, k);
        g_assert_cmpstr(json_object_get_string_member(o, "study_uid"), ==, study_uid[k]);
        g_assert_cmpstr(json_object_get_string_member(o, "patient_id"), ==, patient_id);
        g_assert_cmpstr(json_object_get_string_member(o, "modalities"), ==, "DX");
        g_assert_cmpint(json_object_get_int_member(o, "series"), ==, 1);
        g_assert_cmpint(json_object_get_int_member(o, "instances"), ==, 1);
    }
    /* by accession: the current study alone */
    g_autofree char *acc =
        g_strdup(json_object_get_string_member(json_array_get_object_element(a, 1), "accession"));
    Run t = pacs("find", "--accession", acc, NULL);
    expect_ok(t, "find by accession");
    g_assert_true(t.out.find(study_uid[1]) != std::string::npos);
    g_assert_true(t.out.find(study_uid[0]) == std::string::npos);
    g_assert_true(t.out.find("CHEST PA") != std::string::npos);
    expect_fail(pacs("find", "--patient", "NOBODY", NULL), "find nobody",
                "no study matches patient ID NOBODY");
}

static std::vector<std::string> lines(const std::string &s)
{
    std::vector<std::string> v;
    g_auto(GStrv) parts = g_strsplit(s.c_str(), "\n", -1);
    for (char **l = parts; *l; l++)
        if (**l)
            v.push_back(*l);
    return v;
}

static void test_get(gconstpointer data)
{
    if (!enter(data))
        return;
    g_autofree char *dir = g_build_filename(tmpdir, mode, "got", NULL);
    Run r = pacs("get", "--patient", patient_id, "--out", dir, NULL);
    expect_ok(r, "get");
    std::vector<std::string> paths = lines(r.out);
    g_assert_cmpuint(paths.size(), ==, 2);
    for (int k = 0; k < 2; k++) {
        /* in time order, each in its study's folder, pixel for pixel the file that was sent */
        g_assert_true(paths[k].find(study_uid[k]) != std::string::npos);
        got[k] = g_strdup(paths[k].c_str());
        g_autoptr(ClImage) a = cl_image_load(files[k], NULL, NULL);
        g_autoptr(ClImage) b = cl_image_load(got[k], NULL, NULL);
        g_assert_nonnull(a);
        g_assert_nonnull(b);
        g_assert_cmpstr(b->study_uid, ==, study_uid[k]);
        g_assert_cmpuint(a->width, ==, b->width);
        g_assert_cmpuint(a->height, ==, b->height);
        const ClFrame *fa = cl_image_frame(a, 0), *fb = cl_image_frame(b, 0);
        g_assert_cmpuint(a->channels, ==, b->channels);
        g_assert_cmpmem(fa->data, (gsize)a->width * a->height * a->channels * sizeof(float),
                        fb->data, (gsize)b->width * b->height * b->channels * sizeof(float));
    }
    /* the retrieved files open as a case */
    Run d = cli("describe", "--random-init", "tiny", "--max-tokens", "4", "--device", "cpu", got[0],
                got[1], NULL);
    expect_ok(d, "describe the retrieved files");
    /* a study that is not there */
    g_autofree char *none = g_build_filename(tmpdir, mode, "none", NULL);
    expect_fail(pacs("get", "--study", "1.2.3.4", "--out", none, NULL), "get nothing",
                "no study matches study 1.2.3.4");
}

/* every TextValue of an SR data set */
static std::vector<std::string> sr_texts(DcmDataset *ds)
{
    std::vector<std::string> v;
    DcmStack stack;
    while (ds->search(DCM_TextValue, stack, ESM_afterStackTop, OFTrue).good()) {
        OFString s;
        static_cast<DcmElement *>(stack.top())->getOFStringArray(s);
        v.push_back(s.c_str());
    }
    return v;
}

static void test_store_report(gconstpointer data)
{
    if (!enter(data))
        return;
    g_autofree char *db = g_build_filename(tmpdir, mode, "cases.db", NULL);
    Run r = cli("case", "--db", db, "new", "from the PACS", NULL);
    expect_ok(r, "case new");
    std::string id = lines(r.out).at(0);
    expect_ok(cli("case", "--db", db, "add", id.c_str(), got[0], got[1], NULL), "case add");
    expect_ok(cli("case", "--db", db, "describe", id.c_str(), "--random-init", "tiny",
                  "--max-tokens", "4", "--device", "cpu", NULL),
              "case describe");
    /* a draft is not stored */
    expect_fail(pacs("store", "--case", id.c_str(), "--db", db, NULL), "store a draft",
                "has no accepted description (draft)");
    const char *text = "New opacity in the right lower zone — größer als zuvor.";
    expect_ok(cli("case", "--db", db, "edit", id.c_str(), text, NULL), "case edit");
    expect_ok(cli("case", "--db", db, "accept", id.c_str(), NULL), "case accept");
    g_autofree char *keep = g_build_filename(tmpdir, mode, "report", NULL);
    expect_ok(pacs("store", "--case", id.c_str(), "--db", db, "--keep", keep, NULL),
              "store the report");

    /* found again: the current study has the two report series beside the image */
    g_autoptr(JsonParser) p = NULL;
    Run f = pacs("find", "--study", study_uid[1], "--series", "--json", NULL);
    expect_ok(f, "find the series");
    JsonArray *a = json_array(f.out, &p);
    g_assert_cmpuint(json_array_get_length(a), ==, 3);
    std::string mods;
    for (guint i = 0; i < 3; i++)
        mods += std::string(json_object_get_string_member(json_array_get_object_element(a, i),
                                                          "modality")) +
                " ";
    g_assert_cmpstr(mods.c_str(), ==, "DX DOC SR ");
    Run prior = pacs("find", "--study", study_uid[0], "--series", "--json", NULL);
    expect_ok(prior, "find the prior's series");
    g_autoptr(JsonParser) p2 = NULL;
    g_assert_cmpuint(json_array_get_length(json_array(prior.out, &p2)), ==, 1);

    /* retrieved again, the objects are the report: the PDF's bytes, the SR's texts */
    g_autofree char *dir = g_build_filename(tmpdir, mode, "got-report", NULL);
    Run g = pacs("get", "--study", study_uid[1], "--out", dir, NULL);
    expect_ok(g, "get the report");
    g_autofree char *pdf_path = g_build_filename(keep, "report.pdf", NULL);
    g_autofree char *pdf = NULL;
    gsize pdf_len = 0;
    g_assert_true(g_file_get_contents(pdf_path, &pdf, &pdf_len, NULL));
    g_autoptr(JsonParser) p3 = NULL;
    Run show = cli("case", "--db", db, "show", id.c_str(), "--json", NULL);
    expect_ok(show, "case show");
    p3 = json_parser_new();
    g_assert_true(json_parser_load_from_data(p3, show.out.c_str(), -1, NULL));
    JsonObject *c = json_node_get_object(json_parser_get_root(p3));
    JsonObject *run0 = json_array_get_object_element(json_object_get_array_member(c, "runs"), 0);
    std::string sha = json_object_get_string_member(run0, "model_sha256");
    int n_pdf = 0, n_sr = 0;
    for (const std::string &path : lines(g.out)) {
        DcmFileFormat ff;
        g_assert_true(ff.loadFile(path.c_str()).good());
        DcmDataset *ds = ff.getDataset();
        OFString cls, study, series;
        ds->findAndGetOFString(DCM_SOPClassUID, cls);
        ds->findAndGetOFString(DCM_StudyInstanceUID, study);
        g_assert_cmpstr(study.c_str(), ==, study_uid[1]);
        OFString pid;
        ds->findAndGetOFString(DCM_PatientID, pid);
        g_assert_cmpstr(pid.c_str(), ==, patient_id);
        if (cls == UID_EncapsulatedPDFStorage) {
            n_pdf++;
            const Uint8 *doc = NULL;
            unsigned long len = 0;
            g_assert_true(ds->findAndGetUint8Array(DCM_EncapsulatedDocument, doc, &len).good());
            g_assert_cmpuint(len, ==, pdf_len + (pdf_len % 2));
            g_assert_cmpmem(doc, pdf_len, pdf, pdf_len);
            OFString mime;
            ds->findAndGetOFString(DCM_MIMETypeOfEncapsulatedDocument, mime);
            g_assert_cmpstr(mime.c_str(), ==, "application/pdf");
        } else if (cls == UID_BasicTextSRStorage) {
            n_sr++;
            std::vector<std::string> t = sr_texts(ds);
            gboolean has_text = FALSE, has_sha = FALSE;
            for (const std::string &s : t) {
                has_text |= s == text;
                has_sha |= s == "sha256:" + sha;
            }
            g_assert_true(has_text);
            g_assert_true(has_sha);
        }
    }
    g_assert_cmpint(n_pdf, ==, 1);
    g_assert_cmpint(n_sr, ==, 1);
}

static void test_errors(void)
{
    enter("dimse");
    g_autofree char *closed = g_strdup_printf("%d", free_port());
    expect_fail(cli("pacs", "find", "--host", "127.0.0.1", "--port", closed, "--aec", "CLTEST",
                    "--patient", "X", NULL),
                "nothing listening", "connection refused");
    expect_fail(cli("pacs", "find", "--host", "127.0.0.1", "--port", port_text, "--aec", "CLTEST",
                    "--aet", "STRANGER", "--patient", "X", NULL),
                "unknown AE title", "rejected the association");
    expect_fail(cli("pacs", "find", "--host", "127.0.0.1", "--port", port_text, "--aec", "OTHER",
                    "--patient", "X", NULL),
                "wrong called AE title", "rejected the association");
    /* a port that accepts the connection and then says nothing: a timeout, not a hang */
    int port = 0;
    int fd = mute_port(&port);
    g_autofree char *mute = g_strdup_printf("%d", port);
    gint64 t0 = g_get_monotonic_time();
    expect_fail(cli("pacs", "find", "--host", "127.0.0.1", "--port", mute, "--aec", "CLTEST",
                    "--patient", "X", "--timeout", "2", NULL),
                "silent peer", "did not answer within 2 s");
    close(fd);
    g_assert_cmpint(g_get_monotonic_time() - t0, <, 15 * G_USEC_PER_SEC);
    /* usage errors exit 2 */
    Run u = cli("pacs", "find", "--patient", "X", NULL);
    g_assert_cmpint(u.status, ==, 2);
    g_assert_true(u.err.find("--host (or --dicomweb URL) is required") != std::string::npos);
    Run v = pacs("find", "--aet", "THIS-TITLE-IS-TOO-LONG", "--patient", "X", NULL);
    g_assert_cmpint(v.status, ==, 1);
    g_assert_true(v.err.find("1 to 16") != std::string::npos);
}

/* DICOMweb's failures in words: nothing listening, a wrong base path, a bad URL, a server that
 * says nothing, both protocols at once */
static void test_web_errors(void)
{
    if (!enter("dicomweb"))
        return;
    g_autofree char *closed = g_strdup_printf("http://127.0.0.1:%d/dicom-web", free_port());
    Run r = cli("pacs", "find", "--dicomweb", closed, "--patient", "X", NULL);
    expect_fail(r, "nothing listening", "connection refused");
    g_autofree char *wrong = g_strdup_printf("http://127.0.0.1:%d/no-such-root", orthanc.http_port);
    expect_fail(cli("pacs", "find", "--dicomweb", wrong, "--patient", "X", NULL), "wrong root",
                "answered 404");
    expect_fail(cli("pacs", "find", "--dicomweb", "ftp://127.0.0.1/x", "--patient", "X", NULL),
                "not http", "is not a DICOMweb base URL");
    int port = 0;
    int fd = mute_port(&port);
    g_autofree char *mute = g_strdup_printf("http://127.0.0.1:%d/dicom-web", port);
    gint64 t0 = g_get_monotonic_time();
    expect_fail(cli("pacs", "find", "--dicomweb", mute, "--patient", "X", "--timeout", "2", NULL),
                "silent server", "did not answer within 2 s");
    close(fd);
    g_assert_cmpint(g_get_monotonic_time() - t0, <, 15 * G_USEC_PER_SEC);
    Run u =
        cli("pacs", "find", "--dicomweb", closed, "--host", "127.0.0.1", "--patient", "X", NULL);
    g_assert_cmpint(u.status, ==, 2);
    g_assert_true(u.err.find("not both") != std::string::npos);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    if (!g_getenv("CL_CLI"))
        g_error("CL_CLI is not set (run through meson test)");
    if (!cl_fixture_orthanc_program()) {
        g_printerr("SKIP: no Orthanc program (apt-get install orthanc)\n");
        return 77;
    }
    tmpdir = g_dir_make_tmp("cl-test-pacs-XXXXXX", NULL);
    g_assert_nonnull(tmpdir);
    g_autofree char *why = NULL;
    if (!cl_fixture_orthanc_start(tmpdir, &orthanc, &why)) {
        g_printerr("SKIP: Orthanc cannot start: %s\n", why);
        cl_fixture_rmdir(tmpdir);
        return 77;
    }
    port_text = g_strdup_printf("%d", orthanc.dicom_port);
    for (const char *m : { "dimse", "dicomweb" }) {
        g_autofree char *p1 = g_strdup_printf("/pacs/%s/store-files", m);
        g_autofree char *p2 = g_strdup_printf("/pacs/%s/find", m);
        g_autofree char *p3 = g_strdup_printf("/pacs/%s/get", m);
        g_autofree char *p4 = g_strdup_printf("/pacs/%s/store-report", m);
        g_test_add_data_func(p1, m, test_store_files);
        g_test_add_data_func(p2, m, test_find);
        g_test_add_data_func(p3, m, test_get);
        g_test_add_data_func(p4, m, test_store_report);
    }
    g_test_add_func("/pacs/dimse/errors", test_errors);
    g_test_add_func("/pacs/dicomweb/errors", test_web_errors);
    int rc = g_test_run();
    cl_fixture_orthanc_stop(&orthanc);
    if (rc == 0)
        cl_fixture_rmdir(tmpdir);
    else
        g_printerr("kept %s (orthanc.log)\n", tmpdir);
    return rc;
}
