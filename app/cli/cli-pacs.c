/* cli-pacs.c - `changelens-cli pacs find|get|store`: a PACS over DIMSE or DICOMweb
 * (core/pacs/pacs.h):
 * studies found, retrieved into a folder that then opens as a case, files and a case's report
 * (Encapsulated PDF and Basic Text SR) stored back into the study. */
#include <glib/gstdio.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "casedb/casedb.h"
#include "cl-config.h"
#include "cli.h"
#include "pacs/pacs.h"
#include "report/report.h"

#define PROG "changelens-cli pacs"

static const char usage_text[] =
    "Usage: changelens-cli pacs COMMAND --host HOST [--port N] [--aet OURS] [--aec CALLED] …\n"
    "\n"
    "Commands:\n"
    "  find (--patient ID | --accession A | --study UID) [--series] [--json]\n"
    "                                  C-FIND: the matching studies (patient, date, description,\n"
    "                                  accession, StudyInstanceUID, series and instances),\n"
    "                                  oldest first; --series: the series of one study\n"
    "  get (--study UID | --patient ID | --accession A) --out DIR\n"
    "                                  C-GET: every instance of the study (of each matching\n"
    "                                  study, oldest first) into DIR/STUDY_UID/SOP_UID.dcm;\n"
    "                                  prints the files, ready for 'describe' or 'case add'\n"
    "  store FILE…                     C-STORE: send DICOM files\n"
    "  store --case ID [--db PATH] [--keep DIR] [--deidentify] [--paper a4|letter]\n"
    "                                  the case's report back into the study of its images,\n"
    "                                  in new series: the PDF report as Encapsulated PDF and\n"
    "                                  the accepted description with its provenance (model\n"
    "                                  name and sha256, reviewer) as a Basic Text SR\n"
    "\n"
    "Connection (every command):\n"
    "  --host HOST      the PACS's name or address (DIMSE; this or --dicomweb is required)\n"
    "  --dicomweb URL   the PACS's DICOMweb base URL instead (http://HOST:PORT/PATH): find\n"
    "                   with QIDO-RS, get with WADO-RS, store with STOW-RS; the AE titles\n"
    "                   and --port are not used\n"
    "  --port N         its DICOM port (default 104)\n"
    "  --aet TITLE      our AE title (default CHANGELENS); the PACS must know it, and allow it\n"
    "                   to query, retrieve (C-GET) and store\n"
    "  --aec TITLE      the PACS's AE title (default ANY-SCP)\n"
    "  --timeout S      seconds to wait for the connection and for each answer (default 30)\n"
    "\n"
    "Exit status: 0 done, 1 failed (no connection, association rejected, timeout, no match,\n"
    "refused by the PACS), 2 usage error.\n";

typedef struct {
    char *host, *aet, *aec, *dicomweb;
    gint64 port, timeout;
    char *shown; /* where the PACS is, for the messages */
} PeerArgs;

static void peer_args_clear(PeerArgs *a)
{
    cl_cli_free_all(&a->host, &a->aet, &a->aec, &a->dicomweb, &a->shown, NULL);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(PeerArgs, peer_args_clear)

static int fail(const char *cmd, const GError *err)
{
    g_autofree char *msg = cl_cli_printable(err ? err->message : "failed");
    fprintf(stderr, "%s %s: %s\n", PROG, cmd, msg);
    return 1;
}

static int usage(const char *cmd, const char *msg)
{
    g_autofree char *pname = g_strdup_printf("%s %s", PROG, cmd);
    return cl_cli_usage_error(pname, "%s", msg);
}

/* Parses the connection options, the command's own (entries) and its positional arguments
 * (left in argc, argv). Returns -1 to go on, else the exit status. */
static int parse(const char *cmd, const char *params, GOptionEntry *entries, PeerArgs *peer,
                 ClPacsPeer *out, int *argc, char ***argv)
{
    g_autofree char *pname = g_strdup_printf("%s %s", PROG, cmd);
    const ClCliIntOption ints[] = {
        { "port", 0, 1, 65535, &peer->port },
        { "timeout", 0, 1, 3600, &peer->timeout },
        { NULL },
    };
    GOptionEntry conn[] = {
        { "host", 0, 0, G_OPTION_ARG_STRING, &peer->host, "The PACS's name or address", "HOST" },
        { "dicomweb", 0, 0, G_OPTION_ARG_STRING, &peer->dicomweb,
          "The PACS's DICOMweb base URL instead of DIMSE at --host", "URL" },
        CL_CLI_INT_ENTRY("port", 0, "Its DICOM port (default 104)", "N"),
        { "aet", 0, 0, G_OPTION_ARG_STRING, &peer->aet, "Our AE title (default CHANGELENS)",
          "TITLE" },
        { "aec", 0, 0, G_OPTION_ARG_STRING, &peer->aec, "The PACS's AE title (default ANY-SCP)",
          "TITLE" },
        CL_CLI_INT_ENTRY("timeout", 0,
                         "Seconds to wait for the connection and each answer (default 30)", "S"),
        { NULL },
    };
    peer->port = 104;
    peer->timeout = 30;
    g_autoptr(GOptionContext) ctx = g_option_context_new(params);
    g_option_context_set_description(ctx, "See 'changelens-cli pacs --help' and docs/PACS.md.");
    cl_cli_add_entries(ctx, conn, ints);
    if (entries)
        g_option_context_add_main_entries(ctx, entries, NULL);
    g_set_prgname(pname);
    if (!cl_cli_parse_options(ctx, pname, argc, argv))
        return CL_CLI_EXIT_USAGE;
    if (peer->dicomweb && peer->host)
        return usage(cmd, "give --host (DIMSE) or --dicomweb URL, not both");
    if ((!peer->host || !*peer->host) && (!peer->dicomweb || !*peer->dicomweb))
        return usage(cmd, "--host (or --dicomweb URL) is required");
    out->host = peer->host ? peer->host : "";
    out->dicomweb = peer->dicomweb;
    out->port = (guint16)peer->port;
    out->our_aet = peer->aet ? peer->aet : "CHANGELENS";
    out->called_aet = peer->aec ? peer->aec : "ANY-SCP";
    out->timeout_s = (guint)peer->timeout;
    peer->shown = peer->dicomweb
                      ? g_strdup(peer->dicomweb)
                      : g_strdup_printf("%s:%u (%s)", out->host, out->port, out->called_aet);
    return -1;
}

static void json_member(JsonBuilder *b, const char *key, const char *value)
{
    json_builder_set_member_name(b, key);
    json_builder_add_string_value(b, value);
}

static void json_count(JsonBuilder *b, const char *key, int n)
{
    json_builder_set_member_name(b, key);
    if (n >= 0)
        json_builder_add_int_value(b, n);
    else
        json_builder_add_null_value(b);
}

/* "20190804" -> "2019-08-04"; anything else as it is */
static char *show_date(const char *da)
{
    if (strlen(da) == 8)
        return g_strdup_printf("%.4s-%.2s-%.2s", da, da + 4, da + 6);
    return g_strdup(*da ? da : "(no date)");
}

static char *what_query(const ClPacsQuery *q)
{
    GString *s = g_string_new(NULL);
    if (q->patient_id && *q->patient_id)
        g_string_append_printf(s, "patient ID %s", q->patient_id);
    if (q->accession && *q->accession)
        g_string_append_printf(s, "%saccession %s", s->len ? ", " : "", q->accession);
    if (q->study_uid && *q->study_uid)
        g_string_append_printf(s, "%sstudy %s", s->len ? ", " : "", q->study_uid);
    return g_string_free(s, FALSE);
}

/* ---- find ------------------------------------------------------------------------------------ */

static int cmd_find(int argc, char **argv)
{
    g_auto(PeerArgs) pa = { 0 };
    ClPacsPeer peer;
    g_autofree char *patient = NULL, *accession = NULL, *study = NULL;
    gboolean series = FALSE, json = FALSE;
    GOptionEntry entries[] = {
        { "patient", 0, 0, G_OPTION_ARG_STRING, &patient, "Patient ID (wildcards * ?)", "ID" },
        { "accession", 0, 0, G_OPTION_ARG_STRING, &accession, "Accession number", "A" },
        { "study", 0, 0, G_OPTION_ARG_STRING, &study, "StudyInstanceUID", "UID" },
        { "series", 0, 0, G_OPTION_ARG_NONE, &series, "List the series of the study (--study)",
          NULL },
        { "json", 0, 0, G_OPTION_ARG_NONE, &json, "Print a JSON array", NULL },
        { NULL },
    };
    int rc = parse("find", "- find studies (C-FIND)", entries, &pa, &peer, &argc, &argv);
    if (rc >= 0)
        return rc;
    if (argc > 1)
        return usage("find", "unexpected argument (give the keys as --patient, --accession or "
                             "--study)");
    if (!patient && !accession && !study)
        return usage("find", "give --patient ID, --accession A or --study UID");
    if (series && !study)
        return usage("find", "--series needs --study UID");
    ClPacsQuery q = { patient, accession, study };
    g_autoptr(GError) err = NULL;
    g_autoptr(GPtrArray) m =
        cl_pacs_find(&peer, series ? CL_PACS_LEVEL_SERIES : CL_PACS_LEVEL_STUDY, &q, &err);
    if (!m)
        return fail("find", err);
    if (json) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        json_builder_begin_array(b);
        for (guint i = 0; i < m->len; i++) {
            const ClPacsMatch *x = g_ptr_array_index(m, i);
            json_builder_begin_object(b);
            json_member(b, "patient_name", x->patient_name);
            json_member(b, "patient_id", x->patient_id);
            json_member(b, "study_date", x->study_date);
            json_member(b, "study_time", x->study_time);
            json_member(b, "study_description", x->study_description);
            json_member(b, "accession", x->accession);
            json_member(b, "study_uid", x->study_uid);
            if (series) {
                json_member(b, "series_uid", x->series_uid);
                json_count(b, "series_number", x->series_number);
                json_member(b, "modality", x->modality);
                json_member(b, "series_description", x->series_description);
            } else {
                json_member(b, "modalities", x->modalities);
                json_count(b, "series", x->n_series);
            }
            json_count(b, "instances", x->n_instances);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        cl_cli_print_json(b);
    }
    if (m->len == 0) {
        g_autofree char *what = what_query(&q);
        fprintf(stderr, "%s find: no %s matches %s at %s\n", PROG, series ? "series" : "study",
                what, pa.shown);
        return 1;
    }
    if (json)
        return 0;
    for (guint i = 0; i < m->len; i++) {
        const ClPacsMatch *x = g_ptr_array_index(m, i);
        g_autofree char *date = show_date(x->study_date);
        g_autofree char *name = cl_cli_printable(x->patient_name);
        g_autofree char *pid = cl_cli_printable(x->patient_id);
        g_autofree char *desc = cl_cli_printable(x->study_description);
        g_autofree char *acc = cl_cli_printable(x->accession);
        g_autofree char *uid = cl_cli_printable(x->study_uid);
        if (series) {
            g_autofree char *sdesc = cl_cli_printable(x->series_description);
            g_autofree char *mod = cl_cli_printable(x->modality);
            g_autofree char *suid = cl_cli_printable(x->series_uid);
            printf("series %d  %s  %s  %d instance%s\n  %s\n", x->series_number, mod, sdesc,
                   x->n_instances, x->n_instances == 1 ? "" : "s", suid);
            continue;
        }
        g_autofree char *mods = cl_cli_printable(x->modalities);
        g_autofree char *series_n =
            x->n_series >= 0 ? g_strdup_printf("%d", x->n_series) : g_strdup("?");
        g_autofree char *inst_n =
            x->n_instances >= 0 ? g_strdup_printf("%d", x->n_instances) : g_strdup("?");
        printf("%s  %s (ID %s)  %s  accession %s  %s  %s series, %s instances\n  %s\n", date, name,
               pid, *desc ? desc : "(no description)", *acc ? acc : "-", mods, series_n, inst_n,
               uid);
    }
    return 0;
}

/* ---- get ------------------------------------------------------------------------------------- */

static gint compare_paths(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmd_get(int argc, char **argv)
{
    g_auto(PeerArgs) pa = { 0 };
    ClPacsPeer peer;
    g_autofree char *patient = NULL, *accession = NULL, *study = NULL, *out = NULL;
    GOptionEntry entries[] = {
        { "study", 0, 0, G_OPTION_ARG_STRING, &study, "StudyInstanceUID of the study", "UID" },
        { "patient", 0, 0, G_OPTION_ARG_STRING, &patient, "Every study of this patient", "ID" },
        { "accession", 0, 0, G_OPTION_ARG_STRING, &accession,
          "The study (studies) of this accession number", "A" },
        { "out", 'o', 0, G_OPTION_ARG_FILENAME, &out, "Folder to write into", "DIR" },
        { NULL },
    };
    int rc = parse("get", "- retrieve studies (C-GET)", entries, &pa, &peer, &argc, &argv);
    if (rc >= 0)
        return rc;
    if (argc > 1)
        return usage("get", "unexpected argument");
    if (!patient && !accession && !study)
        return usage("get", "give --study UID, --patient ID or --accession A");
    if (!out)
        return usage("get", "--out DIR is required");
    g_autoptr(GError) err = NULL;
    /* the studies: those the keys match, oldest first (so that the files print in time order) */
    ClPacsQuery q = { patient, accession, study };
    g_autoptr(GPtrArray) m = cl_pacs_find(&peer, CL_PACS_LEVEL_STUDY, &q, &err);
    if (!m)
        return fail("get", err);
    if (m->len == 0) {
        g_autofree char *what = what_query(&q);
        fprintf(stderr, "%s get: no study matches %s at %s\n", PROG, what, pa.shown);
        return 1;
    }
    guint total = 0;
    for (guint i = 0; i < m->len; i++) {
        const ClPacsMatch *x = g_ptr_array_index(m, i);
        g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);
        /* the UID as a folder name only when it is one (digits and dots) */
        gboolean safe = *x->study_uid &&
                        strspn(x->study_uid, "0123456789.") == strlen(x->study_uid) &&
                        x->study_uid[0] != '.';
        g_autofree char *sub = safe ? g_strdup(x->study_uid) : g_strdup_printf("study-%u", i + 1);
        g_autofree char *dir = g_build_filename(out, sub, NULL);
        gboolean ok = cl_pacs_get_study(&peer, x->study_uid, dir, files, &err);
        g_ptr_array_sort(files, compare_paths);
        for (guint k = 0; k < files->len; k++)
            printf("%s\n", (const char *)g_ptr_array_index(files, k));
        total += files->len;
        if (!ok)
            return fail("get", err);
    }
    fprintf(stderr, "%s get: %u file%s from %u stud%s in %s\n", PROG, total, total == 1 ? "" : "s",
            m->len, m->len == 1 ? "y" : "ies", out);
    return 0;
}

/* ---- store ----------------------------------------------------------------------------------- */

static ClCaseDb *open_db(const char *db_path, GError **error)
{
    g_autofree char *path = db_path ? g_strdup(db_path) : cl_casedb_default_path();
    if (!cl_casedb_is_server(path) && !g_file_test(path, G_FILE_TEST_EXISTS)) {
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_NOT_FOUND,
                    "there is no case database at %s (pass --db PATH)", path);
        return NULL;
    }
    return cl_casedb_open(path, CL_CASEDB_OPEN_READ_ONLY | CL_CASEDB_OPEN_NO_CREATE, error);
}

/* The case's report as two DICOM files in dir (report.pdf beside them); their paths into files. */
static gboolean write_report_objects(const ClCase *c, gboolean deidentify, ClPaperSize paper,
                                     const char *dir, GPtrArray *files, GError **error)
{
    const ClCaseDescVersion *v = cl_case_current_description(c);
    if (!v || v->status != CL_DESC_ACCEPTED) {
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID,
                    "case %" G_GINT64_FORMAT " has no accepted description (%s): accept it first "
                    "('changelens-cli case accept %" G_GINT64_FORMAT "')",
                    c->summary.id, v ? cl_desc_status_name(v->status) : "none", c->summary.id);
        return FALSE;
    }
    /* the study: that of the case's latest DICOM image whose file is as it was added */
    const ClCaseImage *study_img = NULL;
    for (guint i = c->images->len; i-- > 0 && !study_img;) {
        const ClCaseImage *img = g_ptr_array_index(c->images, i);
        if (g_strcmp0(img->format, "DICOM") == 0 && img->file_state == CL_FILE_OK)
            study_img = img;
    }
    if (!study_img) {
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_INVALID,
                    "case %" G_GINT64_FORMAT " has no DICOM image (whose file is still there): "
                    "no study to store the report in",
                    c->summary.id);
        return FALSE;
    }
    const ClCaseDescVersion *gen = cl_case_generated_version(c, v);
    const ClCaseRun *run = gen ? cl_case_find_run(c, gen->run_id) : NULL;

    g_autofree char *pdf = g_build_filename(dir, "report.pdf", NULL);
    ClReportOptions o;
    cl_report_options_init(&o, c);
    o.format = CL_REPORT_PDF;
    o.paper = paper;
    o.deidentify = deidentify;
    o.generator = "ChangeLens " CL_VERSION;
    g_autoptr(GPtrArray) warnings = g_ptr_array_new_with_free_func(g_free);
    if (!cl_report_export(c, &o, pdf, warnings, error))
        return FALSE;
    for (guint i = 0; i < warnings->len; i++)
        fprintf(stderr, "%s store: warning: %s\n", PROG,
                (const char *)g_ptr_array_index(warnings, i));

    ClPacsReportInfo info = {
        .study_file = study_img->path,
        .title = "ChangeLens change report",
        .description = v->text,
        .reviewer = v->author,
        .accepted_at = v->created_at,
        .model_name = run ? run->model_name : "",
        .model_sha256 = run ? run->model_sha256 : "",
        .device = run ? run->device : "",
        .manufacturer = "ChangeLens",
        .software = "ChangeLens " CL_VERSION,
    };
    g_autofree char *pdf_dcm = g_build_filename(dir, "report-pdf.dcm", NULL);
    g_autofree char *sr_dcm = g_build_filename(dir, "report-sr.dcm", NULL);
    if (!cl_pacs_write_encapsulated_pdf(&info, pdf, pdf_dcm, error) ||
        !cl_pacs_write_text_sr(&info, sr_dcm, error))
        return FALSE;
    g_ptr_array_add(files, g_steal_pointer(&pdf_dcm));
    g_ptr_array_add(files, g_steal_pointer(&sr_dcm));
    return TRUE;
}

static void remove_tree(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *p = g_build_filename(dir, name, NULL);
        g_unlink(p);
    }
    g_rmdir(dir);
}

static int cmd_store(int argc, char **argv)
{
    g_auto(PeerArgs) pa = { 0 };
    ClPacsPeer peer;
    g_autofree char *db = NULL, *keep = NULL, *paper = NULL, *case_text = NULL;
    gint64 case_id = 0;
    gboolean deid = FALSE;
    GOptionEntry entries[] = {
        { "case", 0, 0, G_OPTION_ARG_STRING, &case_text,
          "Store this case's report (Encapsulated PDF and Basic Text SR)", "ID" },
        { "db", 0, 0, G_OPTION_ARG_FILENAME, &db, "The case database (as for 'case')", "PATH" },
        { "keep", 0, 0, G_OPTION_ARG_FILENAME, &keep,
          "Also keep the report's files (report.pdf, report-pdf.dcm, report-sr.dcm) in DIR",
          "DIR" },
        { "deidentify", 0, 0, G_OPTION_ARG_NONE, &deid,
          "De-identify the PDF (off: the report goes into the patient's own study)", NULL },
        { "paper", 0, 0, G_OPTION_ARG_STRING, &paper, "PDF paper size: a4 (default) or letter",
          "SIZE" },
        { NULL },
    };
    int rc = parse("store", "[FILE…] - send files, or a case's report (C-STORE)", entries, &pa,
                   &peer, &argc, &argv);
    if (rc >= 0)
        return rc;
    g_autoptr(GError) err = NULL;
    if (case_text && !cl_cli_parse_int("--case", case_text, 1, G_MAXINT64, &case_id, &err))
        return usage("store", err->message);
    if (!case_text && argc < 2)
        return usage("store", "give DICOM files, or --case ID");
    if (case_text && argc > 1)
        return usage("store", "give either files or --case ID, not both");
    if (!case_text && (db || keep || deid || paper))
        return usage("store", "--db, --keep, --deidentify and --paper go with --case");
    ClPaperSize ps = CL_PAPER_A4;
    if (paper && !cl_paper_size_parse(paper, &ps))
        return usage("store", "--paper must be a4 or letter");

    if (!case_text) {
        guint n = 0;
        gboolean ok = cl_pacs_store_files(&peer, (const char *const *)argv + 1, &n, &err);
        fprintf(stderr, "%s store: %u of %d file%s stored at %s\n", PROG, n, argc - 1,
                argc == 2 ? "" : "s", pa.shown);
        return ok ? 0 : fail("store", err);
    }

    g_autoptr(ClCaseDb) cdb = open_db(db, &err);
    if (!cdb)
        return fail("store", err);
    g_autoptr(ClCase) c =
        cl_casedb_get_case(cdb, case_id, CL_CASE_HEATMAP_DATA | CL_CASE_CHECK_FILES, &err);
    if (!c)
        return fail("store", err);
    g_autofree char *dir = NULL;
    if (keep) {
        if (g_mkdir_with_parents(keep, 0755) != 0) {
            fprintf(stderr, "%s store: cannot create %s: %s\n", PROG, keep, g_strerror(errno));
            return 1;
        }
        dir = g_strdup(keep);
    } else {
        dir = g_dir_make_tmp("changelens-pacs-XXXXXX", &err);
        if (!dir)
            return fail("store", err);
    }
    g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);
    gboolean ok = write_report_objects(c, deid, ps, dir, files, &err);
    guint n = 0;
    if (ok) {
        g_ptr_array_add(files, NULL);
        ok = cl_pacs_store_files(&peer, (const char *const *)files->pdata, &n, &err);
        g_ptr_array_set_size(files, files->len - 1);
    }
    if (!keep)
        remove_tree(dir);
    if (!ok)
        return fail("store", err);
    fprintf(stderr,
            "%s store: the report of case %" G_GINT64_FORMAT
            " (Encapsulated PDF and Basic Text SR) stored at %s%s%s\n",
            PROG, case_id, pa.shown, keep ? "; kept in " : "", keep ? keep : "");
    return 0;
}

int cl_cli_pacs(int argc, char **argv)
{
    /* a PACS that closes the connection mid-send is an error to report, not a signal to die of */
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage_text, argc < 2 ? stderr : stdout);
        return argc < 2 ? CL_CLI_EXIT_USAGE : 0;
    }
    const char *cmd = argv[1];
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } cmds[] = { { "find", cmd_find }, { "get", cmd_get }, { "store", cmd_store } };
    for (guint i = 0; i < G_N_ELEMENTS(cmds); i++)
        if (strcmp(cmd, cmds[i].name) == 0) {
            g_autofree char *prog = g_strdup_printf("%s %s", PROG, cmd);
            argv[1] = prog;
            return cmds[i].run(argc - 1, argv + 1);
        }
    return cl_cli_usage_error(PROG, "unknown command '%s' (find, get or store)", cmd);
}
