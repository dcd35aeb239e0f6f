/* test-report.c - report export (core/report): PDF pages, sizes, text and pixels through poppler
 * (pdfinfo, pdftoppm, pdftotext), self-contained escaped HTML, the JSON schema, de-identification
 * (profile actions, shifted dates, mapped UIDs, scrubbed text, the secret file), missing files,
 * burned-in annotation and atomic writes (missing folder, a folder as output, a full disk). The
 * cases are built by hand (no database). */
#include <cairo.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "casedb/casedb.h"
#include "report/deid.h"
#include "report/doc.h"
#include "fixtures.h"
#include "model/heatmap.h"
#include "report/report.h"

static char *tmpdir;
static GPtrArray *fixtures;

#define PATIENT_ID "PID-778899"
#define MODEL_SHA "5f1d3c0a9b8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a392817065f4e"
static const char *const study_dates[3] = { "20240131", "20240301", "20240415" };
static const char *const dicom_names[3] = { "dicom-mono2-u16-le.dcm", "dicom-deflated.dcm",
                                            "dicom-rle-grey16.dcm" };
static const char *const desc_current = "New 2 cm opacity in the right lower zone; Mrs Doe "
                                        "(" PATIENT_ID ") to follow up. <script>alert(1)</script>";
static const char *const desc_generated = "A new opacity appears in the right lower zone.";

static char *tmp_path(const char *name)
{
    return g_build_filename(tmpdir, name, NULL);
}

/* ---- building cases by hand ----------------------------------------------------------------- */

/* The metadata of image i: the patient, dates, UIDs and places the profile must deal with.
 * "%d" is the study date, "%u" a UID of this image, "%f" the UID all three share. */
static char *dicom_meta(guint i, gboolean burned)
{
    static const char *const entries[][2] = {
        { "PatientName", "Doe^Jane" },
        { "PatientID", PATIENT_ID },
        { "PatientBirthDate", "19800215" },
        { "PatientSex", "F" },
        { "PatientAge", "044Y" },
        { "AccessionNumber", "ACC-5566%u" },
        { "InstitutionName", "St Example Hospital" },
        { "ReferringPhysicianName", "House^Gregory" },
        { "StudyDate", "%d" },
        { "SeriesDate", "%d" },
        { "AcquisitionDate", "%d" },
        { "ContentDate", "%d" },
        { "StudyTime", "093000" },
        { "AcquisitionTime", "093015" },
        { "AcquisitionDateTime", "%d093015.5" },
        { "StudyInstanceUID", "1.2.826.0.1.3680043.1.%u" },
        { "SeriesInstanceUID", "1.2.826.0.1.3680043.2.%u" },
        { "SOPInstanceUID", "1.2.826.0.1.3680043.3.%u" },
        { "FrameOfReferenceUID", "1.2.826.0.1.3680043.%f" },
        { "DeviceSerialNumber", "SN-4242" },
        { "StationName", "XRAY-ROOM-3" },
        { "StudyID", "S100" },
        { "StudyDescription", "Chest of Jane Doe" },
        { "ImageComments", "Jane Doe, follow-up" },
        { "Modality", "DX" },
        { "Manufacturer", "Acme Imaging" },
        { "BodyPartExamined", "CHEST" },
        { "(0009,0010)", "ACME private data" },
        { "BurnedInAnnotation", "NO" },
    };
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    for (guint k = 0; k < G_N_ELEMENTS(entries); k++) {
        GString *v = g_string_new(entries[k][1]);
        g_autofree char *n = g_strdup_printf("%u", i);
        g_string_replace(v, "%d", study_dates[i], 0);
        g_string_replace(v, "%u", n, 0);
        g_string_replace(v, "%f", "4.0", 0);
        if (burned && strcmp(entries[k][0], "BurnedInAnnotation") == 0)
            g_string_assign(v, "YES");
        json_builder_set_member_name(b, entries[k][0]);
        json_builder_add_string_value(b, v->str);
        g_string_free(v, TRUE);
    }
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return json_to_string(root, FALSE);
}

static char *file_sha256(const char *path, gint64 *size)
{
    g_autofree char *data = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(path, &data, &len, NULL));
    *size = (gint64)len;
    return g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)data, len);
}

/* A heat blob around grid cell (cx, cy) plus a slope: not constant, not symmetric. */
static float *heat_values(guint gw, guint gh, double cx, double cy)
{
    float *v = g_new(float, gw * gh);
    for (guint y = 0; y < gh; y++)
        for (guint x = 0; x < gw; x++)
            v[y * gw + x] = (float)(exp(-((x - cx) * (x - cx) + (y - cy) * (y - cy)) / 3.0) +
                                    0.01 * x + 0.001 * y);
    return v;
}

static void add_heatmap(ClCase *c, gint64 id, gint64 image_id, int layer, const char *kind,
                        double cx, double cy)
{
    ClCaseHeatmap *h = g_new0(ClCaseHeatmap, 1);
    h->id = id;
    h->run_id = 11;
    h->image_id = image_id;
    h->layer = layer;
    h->kind = g_strdup(kind);
    h->input_size = 160;
    h->grid_w = h->grid_h = 10;
    h->data = heat_values(10, 10, cx, cy);
    g_ptr_array_add(c->heatmaps, h);
}

static void add_version(ClCase *c, gint64 id, guint version, const char *text, ClDescStatus st,
                        const char *author, const char *at)
{
    ClCaseDescVersion *v = g_new0(ClCaseDescVersion, 1);
    v->id = id;
    v->description_id = 5;
    v->run_id = 11;
    v->version = version;
    v->text = g_strdup(text);
    v->status = st;
    v->author = g_strdup(author);
    v->created_at = g_strdup(at);
    g_ptr_array_add(c->descriptions, v);
}

static void add_note(ClCase *c, gint64 id, gint64 image_id, const char *text)
{
    ClCaseNote *n = g_new0(ClCaseNote, 1);
    n->id = id;
    n->image_id = image_id;
    n->author = g_strdup("dr.ng");
    n->text = g_strdup(text);
    n->created_at = g_strdup("2024-04-16T08:00:00.000Z");
    g_ptr_array_add(c->notes, n);
}

/* Three images (copies of DICOM fixtures named after the patient, or synthetic PNGs), a run
 * with heatmaps, a generated and an edited + accepted description, notes and a key image. */
static ClCase *make_case(gboolean dicom)
{
    ClCase *c = cl_case_new_empty();
    c->summary.id = 7;
    c->summary.name = g_strdup(dicom ? "Follow-up of Jane Doe \"chest\" & <b>lungs</b>"
                                     : "Garden \"plot\" & <b>shed</b>");
    c->summary.created_at = g_strdup("2024-04-15T12:00:00.000Z");
    c->summary.updated_at = g_strdup("2024-04-16T08:30:00.000Z");
    c->summary.n_images = 3;
    c->summary.has_description = TRUE;
    c->summary.status = CL_DESC_ACCEPTED;
    c->summary.modalities = g_strdup(dicom ? "DX" : "PNG");
    g_autoptr(GPtrArray) paths = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < 3; i++) {
        ClCaseImage *img = g_new0(ClCaseImage, 1);
        img->id = 101 + i;
        img->position = i;
        img->frame = 0;
        img->n_frames = 1;
        if (dicom) {
            const ClFixture *f = cl_fixture_find(fixtures, dicom_names[i]);
            g_assert_nonnull(f);
            g_autofree char *name = g_strdup_printf("Doe_Jane_chest_%u.dcm", i + 1);
            img->path = tmp_path(name);
            g_autofree char *data = NULL;
            gsize len;
            g_assert_true(g_file_get_contents(f->path, &data, &len, NULL));
            g_assert_true(g_file_set_contents(img->path, data, (gssize)len, NULL));
            img->format = g_strdup("DICOM");
            img->modality = g_strdup("DX");
            img->width = f->width;
            img->height = f->height;
            img->metadata_json = dicom_meta(i, i == 2);
            img->acquired_at = g_strdup_printf("%.4s-%.2s-%.2sT09:30:15", study_dates[i],
                                               study_dates[i] + 4, study_dates[i] + 6);
        } else {
            /* a grey field with a bright square that grows from image to image */
            const guint w = 160, h = 120;
            g_autofree guint8 *rgb = g_new(guint8, w * h * 3);
            for (guint y = 0; y < h; y++)
                for (guint x = 0; x < w; x++) {
                    gboolean in = x >= 90 && x < 100 + 12 * i && y >= 40 && y < 50 + 10 * i;
                    guint8 v = in ? 240 : (guint8)(60 + x / 4 + y / 4);
                    for (int k = 0; k < 3; k++)
                        rgb[(y * w + x) * 3 + k] = (guint8)(k == 1 ? v : v * 9 / 10);
                }
            g_autofree char *name = g_strdup_printf("garden-%u.png", i + 1);
            img->path = tmp_path(name);
            g_assert_true(cl_png_write_rgb(img->path, rgb, w, h, NULL));
            img->format = g_strdup("PNG");
            img->width = w;
            img->height = h;
            img->metadata_json = g_strdup("{\"Software\":\"synthetic\"}");
        }
        img->sha256 = file_sha256(img->path, &img->file_size);
        img->file_mtime = 1713180000;
        img->added_at = g_strdup("2024-04-15T12:01:00.000Z");
        img->file_state = CL_FILE_OK;
        g_ptr_array_add(paths, g_strdup(img->path));
        g_ptr_array_add(c->images, img);
    }

    ClCaseRun *r = g_new0(ClCaseRun, 1);
    r->id = 11;
    r->created_at = g_strdup("2024-04-15T12:05:00.000Z");
    r->model_name = g_strdup("/home/reader/models/changelens-tiny.safetensors");
    r->model_sha256 = g_strdup(MODEL_SHA);
    r->model_config_json = g_strdup("{\"d_model\":64,\"enc_depth\":2}");
    r->device = g_strdup("cpu (2 threads)");
    r->settings_json = g_strdup_printf(
        "{\"prompt\":\"Describe the change\",\"beam\":1,\"heatmap_source\":\"update_norm\","
        "\"images\":[\"%s\",\"%s\",\"%s\"],\"note\":\"for Jane Doe\"}",
        (char *)paths->pdata[0], (char *)paths->pdata[1], (char *)paths->pdata[2]);
    r->seed = G_GUINT64_CONSTANT(18446744073709551557);
    r->preprocess_ms = 12.5, r->encode_ms = 80.25, r->prefill_ms = 30, r->decode_ms = 400;
    r->total_ms = 522.75;
    r->n_tokens = 42;
    g_ptr_array_add(c->runs, r);
    for (guint i = 0; i < 3; i++) {
        add_heatmap(c, 201 + i, 101 + i, -1, "update_norm", 6.5, 4.0);
        add_heatmap(c, 211 + i, 101 + i, 0, "update_norm", 1.0, 8.0); /* a block: not shown */
    }
    add_version(c, 21, 1, desc_generated, CL_DESC_DRAFT, "model", "2024-04-15T12:05:01.000Z");
    add_version(c, 22, 2, desc_current, CL_DESC_DRAFT, "dr.ng", "2024-04-16T08:10:00.000Z");
    add_version(c, 23, 3, desc_current, CL_DESC_ACCEPTED, "dr.ng", "2024-04-16T08:20:00.000Z");
    add_note(c, 31, 0, "Called Jane about the result on 2024-03-01.");
    add_note(c, 32, 103, "bad \xff\xfe bytes and a \x01 control");
    ClCaseKeyImage *k = g_new0(ClCaseKeyImage, 1);
    k->id = 41;
    k->image_id = 103;
    k->label = g_strdup("new opacity");
    k->created_at = g_strdup("2024-04-16T08:15:00.000Z");
    g_ptr_array_add(c->key_images, k);
    return c;
}

static void opts(ClReportOptions *o, const ClCase *c, ClReportFormat fmt, const char *secret)
{
    cl_report_options_init(o, c);
    o->format = fmt;
    o->deid_secret = secret;
    o->generator = "ChangeLens test";
    /* make_case(TRUE)'s third image has burned-in annotation: checked, except where the refusal
     * is the test (/report/deid/burned-in) */
    o->burned_in_checked = TRUE;
}

static GPtrArray *export_ok(const ClCase *c, const ClReportOptions *o, const char *path)
{
    GPtrArray *warnings = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GError) err = NULL;
    gboolean ok = cl_report_export(c, o, path, warnings, &err);
    g_assert_no_error(err);
    g_assert_true(ok);
    return warnings;
}

static char *read_text(const char *path)
{
    char *text = NULL;
    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    return text;
}

static gboolean warnings_have(GPtrArray *w, const char *a, const char *b)
{
    for (guint i = 0; i < w->len; i++)
        if (strstr(w->pdata[i], a) && (!b || strstr(w->pdata[i], b)))
            return TRUE;
    return FALSE;
}

static void assert_absent(const char *text, const char *const *gone, guint n, const char *what)
{
    for (guint i = 0; i < n; i++)
        if (strstr(text, gone[i]))
            g_error("the de-identified %s still contains “%s”", what, gone[i]);
}

/* ---- poppler -------------------------------------------------------------------------------- */

/* Runs a tool; NULL (and the test skipped) when it is not installed. */
static char *tool(const char *const *argv)
{
    g_autofree char *prog = g_find_program_in_path(argv[0]);
    if (!prog) {
        g_autofree char *msg = g_strdup_printf("%s is not installed", argv[0]);
        g_test_skip(msg);
        return NULL;
    }
    char *out = NULL, *err = NULL;
    int status = 0;
    g_autoptr(GError) e = NULL;
    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out,
                               &err, &status, &e));
    g_assert_no_error(e);
    if (!g_spawn_check_wait_status(status, NULL))
        g_error("%s failed: %s", argv[0], err);
    g_free(err);
    return out;
}

/* pdftotext output with every run of white space made one space. */
static char *pdf_text(const char *pdf)
{
    const char *argv[] = { "pdftotext", "-enc", "UTF-8", pdf, "-", NULL };
    g_autofree char *raw = tool(argv);
    if (!raw)
        return NULL;
    g_autoptr(GRegex) ws = g_regex_new("\\s+", 0, 0, NULL);
    return g_regex_replace_literal(ws, raw, -1, 0, " ", 0, NULL);
}

static void pdf_info(const char *pdf, int *pages, double *w, double *h, char **all)
{
    const char *argv[] = { "pdfinfo", pdf, NULL };
    g_autofree char *out = tool(argv);
    g_assert_nonnull(out);
    const char *p = strstr(out, "Pages:");
    const char *s = strstr(out, "Page size:");
    g_assert_nonnull(p);
    g_assert_nonnull(s);
    *pages = atoi(p + 6);
    g_assert_cmpint(sscanf(s + 10, " %lf x %lf", w, h), ==, 2);
    if (all)
        *all = g_steal_pointer(&out);
}

typedef struct {
    int n_pages;
    double ink_page1;  /* fraction of page 1 that is not white */
    guint colour;      /* pixels on all pages with a clear hue (heatmap colours) */
    char *most_colour; /* the page PNG with the most of them */
} Raster;

static void raster_clear(Raster *r)
{
    g_free(r->most_colour);
}

static gboolean rasterize(const char *pdf, const char *prefix, Raster *r)
{
    memset(r, 0, sizeof *r);
    const char *argv[] = { "pdftoppm", "-r", "50", "-png", pdf, prefix, NULL };
    g_autofree char *out = tool(argv);
    if (!out)
        return FALSE;
    g_autofree char *dir = g_path_get_dirname(prefix);
    g_autofree char *base = g_path_get_basename(prefix);
    g_autofree char *start = g_strconcat(base, "-", NULL);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    g_autoptr(GPtrArray) pages = g_ptr_array_new_with_free_func(g_free);
    for (const char *n; (n = g_dir_read_name(d));)
        if (g_str_has_prefix(n, start) && g_str_has_suffix(n, ".png"))
            g_ptr_array_add(pages, g_build_filename(dir, n, NULL));
    g_ptr_array_sort(pages, (GCompareFunc)g_strcmp0);
    r->n_pages = (int)pages->len;
    guint best = 0;
    for (guint i = 0; i < pages->len; i++) {
        cairo_surface_t *s = cairo_image_surface_create_from_png(pages->pdata[i]);
        g_assert_cmpint(cairo_surface_status(s), ==, CAIRO_STATUS_SUCCESS);
        const int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
        const int stride = cairo_image_surface_get_stride(s);
        const guint8 *data = cairo_image_surface_get_data(s);
        guint ink = 0, colour = 0;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                guint32 px = *(const guint32 *)(gconstpointer)(data + y * stride + x * 4);
                int rr = (px >> 16) & 255, gg = (px >> 8) & 255, bb = px & 255;
                if (rr < 235 || gg < 235 || bb < 235)
                    ink++;
                if (MAX(rr, MAX(gg, bb)) - MIN(rr, MIN(gg, bb)) > 60)
                    colour++;
            }
        if (i == 0)
            r->ink_page1 = (double)ink / (w * h);
        r->colour += colour;
        if (colour >= best) {
            best = colour;
            g_free(r->most_colour);
            r->most_colour = g_strdup(pages->pdata[i]);
        }
        cairo_surface_destroy(s);
    }
    return TRUE;
}

/* ---- PDF ------------------------------------------------------------------------------------ */

static void check_pdf_paper(ClPaperSize paper, double want_w, double want_h, const char *tag)
{
    g_autoptr(ClCase) c = make_case(TRUE);
    ClReportOptions o;
    opts(&o, c, CL_REPORT_PDF, "secret-A");
    o.paper = paper;
    g_autofree char *name = g_strdup_printf("paper-%s.pdf", tag);
    g_autofree char *pdf = tmp_path(name);
    g_autoptr(GPtrArray) w = export_ok(c, &o, pdf);
    int pages;
    double pw, ph;
    if (!g_find_program_in_path("pdfinfo")) {
        g_test_skip("pdfinfo is not installed");
        return;
    }
    pdf_info(pdf, &pages, &pw, &ph, NULL);
    g_assert_cmpfloat_with_epsilon(pw, want_w, 0.5);
    g_assert_cmpfloat_with_epsilon(ph, want_h, 0.5);
    g_assert_cmpint(pages, >=, 2); /* header, 2 comparisons, images, provenance: more than one */

    g_autofree char *pname = g_strdup_printf("page-%s", tag);
    g_autofree char *prefix = tmp_path(pname);
    Raster r;
    if (!rasterize(pdf, prefix, &r))
        return;
    g_assert_cmpint(r.n_pages, ==, pages);
    g_assert_cmpfloat(r.ink_page1, >, 0.02); /* text and pictures, not a blank page */

    /* the heatmap overlays are where the colour comes from: without heatmaps it is gone */
    g_ptr_array_set_size(c->heatmaps, 0);
    g_autofree char *plain_name = g_strdup_printf("paper-%s-noheat.pdf", tag);
    g_autofree char *plain = tmp_path(plain_name);
    g_autoptr(GPtrArray) w2 = export_ok(c, &o, plain);
    g_autofree char *p2name = g_strdup_printf("noheat-%s", tag);
    g_autofree char *prefix2 = tmp_path(p2name);
    Raster r2;
    g_assert_true(rasterize(plain, prefix2, &r2));
    g_test_message("%s: %d pages, ink on page 1 %.3f, colour pixels %u (without heatmaps %u)", tag,
                   r.n_pages, r.ink_page1, r.colour, r2.colour);
    g_assert_cmpuint(r.colour, >, r2.colour + 2000);

    const char *keep_pdf = g_getenv("CL_REPORT_PDF_OUT"); /* the whole PDF, for a look */
    if (keep_pdf && *keep_pdf && paper == CL_PAPER_A4) {
        g_autofree char *bytes = NULL;
        gsize len;
        g_assert_true(g_file_get_contents(pdf, &bytes, &len, NULL));
        g_assert_true(g_file_set_contents(keep_pdf, bytes, (gssize)len, NULL));
    }
    const char *keep = g_getenv("CL_REPORT_PAGE_OUT");
    if (keep && *keep && paper == CL_PAPER_A4) {
        g_autofree char *png = NULL;
        gsize len;
        g_assert_true(g_file_get_contents(r.most_colour, &png, &len, NULL));
        g_assert_true(g_file_set_contents(keep, png, (gssize)len, NULL));
    }
    raster_clear(&r);
    raster_clear(&r2);
}

static void test_pdf_a4(void)
{
    check_pdf_paper(CL_PAPER_A4, 595.28, 841.89, "a4");
}

static void test_pdf_letter(void)
{
    check_pdf_paper(CL_PAPER_LETTER, 612, 792, "letter");
}

static void test_pdf_text(void)
{
    g_autoptr(ClCase) c = make_case(TRUE);
    ClReportOptions o;
    opts(&o, c, CL_REPORT_PDF, "secret-A");
    g_assert_true(o.deidentify); /* on by default for DICOM */
    g_autofree char *pdf = tmp_path("text-deid.pdf");
    g_autoptr(GPtrArray) w = export_ok(c, &o, pdf);
    g_autofree char *text = pdf_text(pdf);
    if (!text)
        return;
    g_assert_nonnull(strstr(text, "Follow-up of [removed] [removed] \"chest\" & <b>lungs</b>"));
    g_assert_nonnull(strstr(text, "New 2 cm opacity in the right lower zone; Mrs [removed] "
                                  "([removed]) to follow up. <script>alert(1)</script>"));
    g_assert_nonnull(strstr(text, "Generated by the model"));
    g_assert_nonnull(strstr(text, desc_generated));
    g_assert_nonnull(strstr(text, MODEL_SHA));
    g_assert_nonnull(strstr(text, "Accepted by dr.ng"));
    g_assert_nonnull(strstr(text, "image-3.dcm"));
    g_assert_nonnull(strstr(text, "Key image: new opacity"));
    g_assert_nonnull(strstr(text, "Page 1 of"));
    g_assert_nonnull(strstr(text, "BurnedInAnnotation = YES"));
    g_assert_nonnull(strstr(text, "changelens-tiny.safetensors"));
    g_assert_null(strstr(text, "/home/reader")); /* the model path names its owner */
    const char *gone[] = {
        "Doe",       "Jane",     PATIENT_ID,   "19800215",   "St Example",
        "XRAY-ROOM", "20240131", "2024-01-31", "2024-03-01", "1.2.826.0.1.3680043",
        "Doe_Jane",  tmpdir
    };
    assert_absent(text, gone, G_N_ELEMENTS(gone), "PDF");
    char *info = NULL;
    int pages;
    double pw, ph;
    pdf_info(pdf, &pages, &pw, &ph, &info);
    g_assert_null(strstr(info, "Doe"));
    g_free(info);
    /* the PDF's own dates are shifted too: today's date would give the offset away */
    const char *iso_argv[] = { "pdfinfo", "-isodates", pdf, NULL };
    g_autofree char *iso = tool(iso_argv);
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    g_autofree char *today = g_date_time_format(now, "%Y-%m-%d");
    const char *created = strstr(iso, "CreationDate:");
    g_assert_nonnull(created);
    created += strlen("CreationDate:");
    created += strspn(created, " ");
    g_assert_false(g_str_has_prefix(created, today));

    /* de-identification off: everything is there */
    o.deidentify = FALSE;
    g_autofree char *pdf2 = tmp_path("text-plain.pdf");
    g_autoptr(GPtrArray) w2 = export_ok(c, &o, pdf2);
    g_autofree char *text2 = pdf_text(pdf2);
    g_assert_nonnull(strstr(text2, "Follow-up of Jane Doe"));
    g_assert_nonnull(strstr(text2, "Mrs Doe (" PATIENT_ID ")"));
    g_assert_nonnull(strstr(text2, "Doe^Jane"));
    g_assert_nonnull(strstr(text2, "20240131"));
    g_assert_nonnull(strstr(text2, "Doe_Jane_chest_1.dcm"));
    g_assert_true(warnings_have(w2, "De-identification is off", NULL));
}

/* Noncharacters (U+FDD0, U+1FFFE, U+10FFFF) are valid UTF-8 that Cairo refuses: the name,
 * description and note holding them still export, the characters shown as U+FFFD. */
static void test_noncharacters(void)
{
    g_autoptr(ClCase) c = make_case(FALSE);
    g_free(c->summary.name);
    c->summary.name = g_strdup("Plot \xef\xb7\x90 west \xf4\x8f\xbf\xbf end");
    ClCaseDescVersion *v = g_ptr_array_index(c->descriptions, c->descriptions->len - 1);
    g_free(v->text);
    v->text = g_strdup("Shed \xf0\x9f\xbf\xbe moved \xef\xbf\xbe left.");
    ClCaseNote *n = g_ptr_array_index(c->notes, 0);
    g_free(n->text);
    n->text = g_strdup("Note \xef\xb7\xaf here");
    ClReportOptions o;
    opts(&o, c, CL_REPORT_PDF, NULL);
    g_autofree char *pdf = tmp_path("nonchar.pdf");
    g_autoptr(GPtrArray) w = export_ok(c, &o, pdf);
    g_autofree char *text = pdf_text(pdf);
    if (text) {
        g_assert_nonnull(strstr(text, "Plot \xef\xbf\xbd west \xef\xbf\xbd end"));
        g_assert_nonnull(strstr(text, "Shed \xef\xbf\xbd moved \xef\xbf\xbd left."));
        g_assert_nonnull(strstr(text, "Note \xef\xbf\xbd here"));
    }
    o.format = CL_REPORT_JSON;
    g_autofree char *json_path = tmp_path("nonchar.json");
    g_autoptr(GPtrArray) w2 = export_ok(c, &o, json_path);
    g_autofree char *json = read_text(json_path);
    g_assert_nonnull(strstr(json, "Plot \xef\xbf\xbd west \xef\xbf\xbd end"));
    g_assert_null(strstr(json, "\xef\xb7\x90"));
    g_assert_null(strstr(json, "\xf4\x8f\xbf\xbf"));
}

/* Very long words and text: wrapped inside the margins, flowing onto more pages. */
static void test_pdf_long_text(void)
{
    g_autoptr(ClCase) c = make_case(FALSE);
    GString *word = g_string_new(NULL);
    for (int i = 0; i < 700; i++)
        g_string_append_c(word, "xyz"[i % 3]);
    add_note(c, 33, 0, word->str);
    GString *longd = g_string_new(NULL);
    for (int i = 0; i < 400; i++)
        g_string_append_printf(longd, "Sentence %d of a long description that has to flow. ", i);
    g_string_append(longd, "FINALWORD");
    add_version(c, 24, 4, longd->str, CL_DESC_DRAFT, "dr.ng", "2024-04-17T08:00:00.000Z");
    ClReportOptions o;
    opts(&o, c, CL_REPORT_PDF, NULL);
    g_assert_false(o.deidentify); /* no DICOM: off by default */
    g_autofree char *pdf = tmp_path("long.pdf");
    g_autoptr(GPtrArray) w = export_ok(c, &o, pdf);
    g_autofree char *text = pdf_text(pdf);
    if (!text)
        return;
    g_assert_nonnull(strstr(text, "Sentence 399 of a long description"));
    g_assert_nonnull(strstr(text, "FINALWORD"));
    /* the long word is all there once line breaks and inserted hyphens are taken out */
    g_autoptr(GRegex) strip = g_regex_new("[\\s\\-‐]", 0, 0, NULL);
    g_autofree char *flat = g_regex_replace_literal(strip, text, -1, 0, "", 0, NULL);
    g_assert_nonnull(strstr(flat, word->str));
    int pages;
    double pw, ph;
    pdf_info(pdf, &pages, &pw, &ph, NULL);
    g_assert_cmpint(pages, >=, 4);
    /* no word runs past the right margin */
    const char *argv[] = { "pdftotext", "-bbox", pdf, "-", NULL };
    g_autofree char *boxes = tool(argv);
    g_autoptr(GRegex) xmax = g_regex_new("xMax=\"([0-9.]+)\"", 0, 0, NULL);
    g_autoptr(GMatchInfo) mi = NULL;
    guint n = 0;
    for (g_regex_match(xmax, boxes, 0, &mi); g_match_info_matches(mi);
         g_match_info_next(mi, NULL)) {
        g_autofree char *v = g_match_info_fetch(mi, 1);
        g_assert_cmpfloat(g_ascii_strtod(v, NULL), <=, pw - 30);
        n++;
    }
    g_assert_cmpuint(n, >, 500);
    g_string_free(word, TRUE);
    g_string_free(longd, TRUE);
}

/* ---- HTML ----------------------------------------------------------------------------------- */

/* Every element we open is closed, in order (void elements aside). */
static void check_balanced(const char *html)
{
    static const char *const voids[] = { "meta", "img", "br", "hr", "link", NULL };
    g_autoptr(GPtrArray) stack = g_ptr_array_new_with_free_func(g_free);
    for (const char *p = strchr(html, '<'); p; p = strchr(p + 1, '<')) {
        if (p[1] == '!')
            continue;
        gboolean closing = p[1] == '/';
        const char *n = p + 1 + closing;
        gsize len = strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789");
        g_assert_cmpuint(len, >, 0);
        g_autofree char *name = g_strndup(n, len);
        if (g_strv_contains(voids, name))
            continue;
        if (!closing) {
            g_ptr_array_add(stack, g_steal_pointer(&name));
            continue;
        }
        g_assert_cmpuint(stack->len, >, 0);
        g_assert_cmpstr(stack->pdata[stack->len - 1], ==, name);
        g_ptr_array_remove_index(stack, stack->len - 1);
    }
    g_assert_cmpuint(stack->len, ==, 0);
}

static char *strip_data_uris(const char *html)
{
    g_autoptr(GRegex) re = g_regex_new("base64,[A-Za-z0-9+/=]*", 0, 0, NULL);
    return g_regex_replace_literal(re, html, -1, 0, "base64,", 0, NULL);
}

static guint count(const char *hay, const char *needle)
{
    guint n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void test_html(void)
{
    g_autoptr(ClCase) c = make_case(TRUE);
    ClReportOptions o;
    opts(&o, c, CL_REPORT_HTML, "secret-A");
    o.deidentify = FALSE; /* the raw text, to see it escaped */
    g_autofree char *path = tmp_path("report.html");
    g_autoptr(GPtrArray) w = export_ok(c, &o, path);
    g_autofree char *html = read_text(path);
    g_assert_true(g_utf8_validate(html, -1, NULL));
    g_autofree char *low = g_ascii_strdown(html, -1);
    g_assert_null(strstr(low, "<script"));
    g_assert_null(strstr(low, "http:"));
    g_assert_null(strstr(low, "https:"));
    g_assert_null(strstr(low, "href="));
    g_assert_nonnull(strstr(html, "&lt;script&gt;alert(1)&lt;/script&gt;"));
    g_assert_nonnull(
        strstr(html, "Follow-up of Jane Doe &quot;chest&quot; &amp; &lt;b&gt;lungs&lt;/b&gt;"));
    g_assert_nonnull(strstr(html, "Generated by the model"));
    g_assert_nonnull(strstr(html, MODEL_SHA));
    /* 2 comparisons × (before, after, overlay, difference), all embedded */
    g_assert_cmpuint(count(html, "<img"), ==, 8);
    g_assert_cmpuint(count(html, "<img src=\"data:image/png;base64,") +
                         count(html, "<img class=\"small\" src=\"data:image/png;base64,"),
                     ==, 8);
    g_assert_cmpuint(count(html, "src="), ==, 8);
    check_balanced(html);
    /* the first picture decodes to the PNG its attributes describe */
    const char *b64 = strstr(html, "base64,") + 7;
    g_autofree char *enc = g_strndup(b64, strcspn(b64, "\""));
    gsize n;
    g_autofree guchar *png = g_base64_decode(enc, &n);
    g_assert_cmpuint(n, >, 8);
    g_assert_cmpmem(png, 8, "\x89PNG\r\n\x1a\n", 8);
    g_assert_nonnull(strstr(html, "width=\"37\" height=\"23\""));
    /* the U+FFFD that replaced the bad bytes, no control character */
    g_assert_nonnull(strstr(html, "bad \xef\xbf\xbd"));
    g_assert_null(strchr(html, '\x01'));

    /* de-identified: nothing of the patient outside the pictures */
    o.deidentify = TRUE;
    g_autofree char *path2 = tmp_path("report-deid.html");
    g_autoptr(GPtrArray) w2 = export_ok(c, &o, path2);
    g_autofree char *html2 = read_text(path2);
    g_autofree char *text2 = strip_data_uris(html2);
    const char *gone[] = { "Doe", "Jane", PATIENT_ID, "20240131", "1.2.826.0.1.3680043", tmpdir };
    assert_absent(text2, gone, G_N_ELEMENTS(gone), "HTML");
    g_assert_nonnull(strstr(text2, "image-1.dcm"));
    check_balanced(html2);
}

/* ---- JSON ----------------------------------------------------------------------------------- */

static JsonObject *load_json(const char *path, JsonParser *parser)
{
    g_autoptr(GError) err = NULL;
    g_assert_true(json_parser_load_from_file(parser, path, &err));
    g_assert_no_error(err);
    JsonNode *root = json_parser_get_root(parser);
    g_assert_true(JSON_NODE_HOLDS_OBJECT(root));
    return json_node_get_object(root);
}

static JsonObject *nth(JsonObject *o, const char *array, guint i)
{
    return json_array_get_object_element(json_object_get_array_member(o, array), i);
}

static void test_json(void)
{
    g_autoptr(ClCase) c = make_case(TRUE);
    ClReportOptions o;
    opts(&o, c, CL_REPORT_JSON, "secret-A");
    o.deidentify = FALSE;
    g_autofree char *path = tmp_path("report.json");
    g_autoptr(GPtrArray) w = export_ok(c, &o, path);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root = load_json(path, parser);
    g_assert_cmpstr(json_object_get_string_member(root, "schema"), ==, "changelens-report/1");
    g_assert_false(json_object_get_boolean_member(root, "deidentified"));
    const struct {
        const char *name;
        guint n;
    } counts[] = { { "images", 3 }, { "runs", 1 },       { "descriptions", 3 }, { "heatmaps", 6 },
                   { "notes", 2 },  { "key_images", 1 }, { "comparisons", 2 } };
    for (guint i = 0; i < G_N_ELEMENTS(counts); i++)
        g_assert_cmpuint(json_array_get_length(json_object_get_array_member(root, counts[i].name)),
                         ==, counts[i].n);
    JsonObject *cs = json_object_get_object_member(root, "case");
    g_assert_cmpstr(json_object_get_string_member(cs, "name"), ==, c->summary.name);
    g_assert_cmpstr(json_object_get_string_member(cs, "status"), ==, "accepted");
    /* heat grids survive the trip bit for bit (as floats) */
    for (guint i = 0; i < 6; i++) {
        JsonObject *h = nth(root, "heatmaps", i);
        const ClCaseHeatmap *src = c->heatmaps->pdata[i];
        g_assert_cmpint(json_object_get_int_member(h, "grid_w"), ==, 10);
        g_assert_cmpint(json_object_get_int_member(h, "input_size"), ==, 160);
        g_assert_cmpint(json_object_get_int_member(h, "layer"), ==, src->layer);
        JsonArray *v = json_object_get_array_member(h, "values");
        g_assert_cmpuint(json_array_get_length(v), ==, 100);
        for (guint k = 0; k < 100; k++)
            g_assert_cmpfloat((float)json_array_get_double_element(v, k), ==, src->data[k]);
    }
    JsonObject *cmp = nth(root, "comparisons", 1);
    g_assert_cmpint(json_object_get_int_member(cmp, "heatmap_id"), ==, 203); /* layer -1 */
    JsonObject *run = nth(root, "runs", 0);
    g_assert_cmpstr(json_object_get_string_member(run, "seed"), ==, "18446744073709551557");
    g_assert_cmpstr(json_object_get_string_member(run, "model_sha256"), ==, MODEL_SHA);
    JsonObject *settings = json_object_get_object_member(run, "settings");
    g_assert_cmpint(json_object_get_int_member(settings, "beam"), ==, 1);
    JsonObject *d3 = nth(root, "descriptions", 2);
    g_assert_true(json_object_get_boolean_member(d3, "current"));
    g_assert_cmpstr(json_object_get_string_member(d3, "text"), ==, desc_current);
    JsonObject *note = nth(root, "notes", 1);
    g_assert_cmpstr(json_object_get_string_member(note, "text"), ==,
                    "bad \xef\xbf\xbd\xef\xbf\xbd bytes and a \xef\xbf\xbd control");
    JsonObject *img1 = nth(root, "images", 0);
    g_assert_cmpstr(json_object_get_string_member(img1, "path"), ==,
                    ((ClCaseImage *)c->images->pdata[0])->path);
    JsonObject *meta = json_object_get_object_member(img1, "metadata");
    g_assert_cmpstr(json_object_get_string_member(meta, "PatientName"), ==, "Doe^Jane");
    g_assert_true(json_object_get_boolean_member(nth(root, "images", 2), "key_image"));
    g_assert_true(json_object_get_boolean_member(nth(root, "images", 2), "burned_in_annotation"));

    /* cl_report_to_json gives the same document (but for generated_at) */
    g_autoptr(GError) err = NULL;
    g_autofree char *str = cl_report_to_json(c, &o, NULL, &err);
    g_assert_no_error(err);
    g_autoptr(JsonParser) p2 = json_parser_new();
    g_assert_true(json_parser_load_from_data(p2, str, -1, NULL));
    JsonObject *r2 = json_node_get_object(json_parser_get_root(p2));
    g_assert_cmpuint(json_array_get_length(json_object_get_array_member(r2, "heatmaps")), ==, 6);
}

/* ---- de-identification ---------------------------------------------------------------------- */

static int julian(const char *da)
{
    g_assert_cmpuint(strlen(da), >=, 8);
    int y = 0, m = 0, d = 0;
    g_assert_cmpint(sscanf(da, "%4d%2d%2d", &y, &m, &d), ==, 3);
    g_assert_true(g_date_valid_dmy(d, m, y));
    GDate *g = g_date_new_dmy(d, m, y);
    int j = (int)g_date_get_julian(g);
    g_date_free(g);
    return j;
}

static void assert_uid(const char *u)
{
    g_assert_true(g_regex_match_simple("^2\\.25\\.(0|[1-9][0-9]*)$", u, 0, 0));
    g_assert_cmpuint(strlen(u), <=, 64);
}

typedef struct {
    int offset; /* days shifted */
    char *study_uid[3];
    char *frame_uid[3];
} DeidOut;

static void deid_out_clear(DeidOut *d)
{
    for (int i = 0; i < 3; i++) {
        g_free(d->study_uid[i]);
        g_free(d->frame_uid[i]);
    }
}

/* Exports JSON de-identified with this secret and checks what every export must satisfy. */
static void deid_export(const ClCase *c, const char *secret, const char *name, DeidOut *out)
{
    ClReportOptions o;
    opts(&o, c, CL_REPORT_JSON, secret);
    g_assert_true(o.deidentify);
    g_autofree char *path = tmp_path(name);
    g_autoptr(GPtrArray) w = export_ok(c, &o, path);
    g_autofree char *text = read_text(path);
    const char *gone[] = { "Doe",          "Jane",      PATIENT_ID,   "19800215",
                           "St Example",   "XRAY-ROOM", "SN-4242",    "ACC-5566",
                           "20240131",     "20240301",  "2024-03-01", "1.2.826.0.1.3680043",
                           "ACME private", "093015\"",  tmpdir };
    assert_absent(text, gone, G_N_ELEMENTS(gone), "JSON");
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root = load_json(path, parser);
    g_assert_true(json_object_get_boolean_member(root, "deidentified"));
    g_assert_true(warnings_have(w, "Image 3 (image-3.dcm)", "BurnedInAnnotation = YES"));
    memset(out, 0, sizeof *out);
    for (guint i = 0; i < 3; i++) {
        JsonObject *img = nth(root, "images", i);
        g_autofree char *want = g_strdup_printf("image-%u.dcm", i + 1);
        g_assert_cmpstr(json_object_get_string_member(img, "name"), ==, want);
        g_assert_true(json_object_get_null_member(img, "path"));
        JsonObject *m = json_object_get_object_member(img, "metadata");
        /* Z: present and empty; X: gone; kept: as it was */
        g_assert_cmpstr(json_object_get_string_member(m, "PatientName"), ==, "");
        g_assert_cmpstr(json_object_get_string_member(m, "PatientID"), ==, "");
        g_assert_cmpstr(json_object_get_string_member(m, "StudyTime"), ==, "");
        const char *removed[] = { "InstitutionName",  "PatientAge",         "AcquisitionTime",
                                  "StationName",      "DeviceSerialNumber", "ImageComments",
                                  "StudyDescription", "(0009,0010)" };
        for (guint k = 0; k < G_N_ELEMENTS(removed); k++)
            g_assert_false(json_object_has_member(m, removed[k]));
        g_assert_cmpstr(json_object_get_string_member(m, "Manufacturer"), ==, "Acme Imaging");
        g_assert_cmpstr(json_object_get_string_member(m, "PatientIdentityRemoved"), ==, "YES");
        g_assert_nonnull(
            strstr(json_object_get_string_member(m, "DeidentificationMethod"), "PS3.15"));
        /* every date moved by the same number of days */
        const char *sd = json_object_get_string_member(m, "StudyDate");
        int off = julian(sd) - julian(study_dates[i]);
        if (i == 0)
            out->offset = off;
        g_assert_cmpint(off, ==, out->offset);
        g_assert_cmpint(julian(json_object_get_string_member(m, "ContentDate")) -
                            julian(study_dates[i]),
                        ==, off);
        const char *adt = json_object_get_string_member(m, "AcquisitionDateTime");
        /* no time of acquisition (the profile removes AcquisitionTime): the shifted date */
        g_assert_true(g_regex_match_simple("^[0-9]{8}$", adt, 0, 0));
        g_assert_cmpint(julian(adt) - julian(study_dates[i]), ==, off);
        g_autofree char *acq = g_strdup(json_object_get_string_member(img, "acquired_at"));
        g_assert_true(g_regex_match_simple("^[0-9]{4}-[0-9]{2}-[0-9]{2}$", acq, 0, 0));
        acq[4] = acq[7] = 0; /* YYYY-MM-DD -> YYYYMMDD */
        g_autofree char *compact = g_strconcat(acq, acq + 5, acq + 8, NULL);
        g_assert_cmpint(julian(compact) - julian(study_dates[i]), ==, off);
        out->study_uid[i] = g_strdup(json_object_get_string_member(m, "StudyInstanceUID"));
        out->frame_uid[i] = g_strdup(json_object_get_string_member(m, "FrameOfReferenceUID"));
        assert_uid(out->study_uid[i]);
        assert_uid(out->frame_uid[i]);
        assert_uid(json_object_get_string_member(m, "SOPInstanceUID"));
    }
    g_assert_cmpint(out->offset, <=, -1);
    g_assert_cmpint(out->offset, >=, -3650);
    /* one original UID, one new one; different originals, different new ones */
    g_assert_cmpstr(out->frame_uid[0], ==, out->frame_uid[2]);
    g_assert_cmpstr(out->study_uid[0], !=, out->study_uid[1]);
    /* the paths in the run's settings became image names; free text was scrubbed */
    JsonObject *settings = json_object_get_object_member(nth(root, "runs", 0), "settings");
    JsonArray *paths = json_object_get_array_member(settings, "images");
    g_assert_cmpstr(json_array_get_string_element(paths, 1), ==, "image-2.dcm");
    g_assert_cmpstr(json_object_get_string_member(settings, "note"), ==, "for [removed] [removed]");
    g_assert_cmpstr(json_object_get_string_member(nth(root, "runs", 0), "model_name"), ==,
                    "changelens-tiny.safetensors");
    const char *note = json_object_get_string_member(nth(root, "notes", 0), "text");
    g_assert_true(g_str_has_prefix(note, "Called [removed] about the result on "));
    g_assert_null(strstr(note, "2024-03-01"));
}

static void test_deid_consistent(void)
{
    g_autoptr(ClCase) c = make_case(TRUE);
    DeidOut a1, a2, b;
    deid_export(c, "secret-A", "deid-a1.json", &a1);
    deid_export(c, "secret-A", "deid-a2.json", &a2);
    deid_export(c, "secret-B", "deid-b.json", &b);
    g_assert_cmpint(a1.offset, ==, a2.offset);
    for (int i = 0; i < 3; i++) {
        g_assert_cmpstr(a1.study_uid[i], ==, a2.study_uid[i]);
        g_assert_cmpstr(a1.study_uid[i], !=, b.study_uid[i]);
    }
    g_assert_cmpint(a1.offset, !=, b.offset);
    deid_out_clear(&a1);
    deid_out_clear(&a2);
    deid_out_clear(&b);
}

/* The unit pieces: date forms, UIDs, whole-word matching of short names. */
static void test_deid_units(void)
{
    g_autoptr(ClCase) c = make_case(TRUE);
    g_autoptr(ClDeid) d = cl_deid_new("secret-A", c);
    const int off = cl_deid_day_offset(d);
    g_assert_cmpint(off, <=, -1);
    g_assert_cmpint(off, >=, -3650);
    GDate *g = g_date_new_dmy(31, 1, 2024);
    if (off < 0)
        g_date_subtract_days(g, (guint)-off);
    char want[16];
    g_snprintf(want, sizeof want, "%04d%02d%02d", g_date_get_year(g), g_date_get_month(g),
               g_date_get_day(g));
    g_date_free(g);
    g_autofree char *da = cl_deid_shift_date(d, "20240131");
    g_assert_cmpstr(da, ==, want);
    g_autofree char *dt = cl_deid_shift_date(d, "20240131093015.5+0100");
    g_assert_true(g_str_has_prefix(dt, want) && g_str_has_suffix(dt, "093015.5+0100"));
    g_autofree char *iso = cl_deid_shift_date(d, "2024-01-31T09:30:15.123Z");
    g_autofree char *iso_da = g_strdup_printf("%.4s%.2s%.2s", iso, iso + 5, iso + 8);
    g_assert_cmpstr(iso_da, ==, want);
    g_assert_true(g_str_has_suffix(iso, "T09:30:15.123Z"));
    g_autofree char *multi = cl_deid_shift_date(d, "20240131\\20240301");
    g_assert_nonnull(strchr(multi, '\\'));
    g_autofree char *partial = cl_deid_shift_date(d, "2024");
    g_assert_cmpstr(partial, ==, "");
    g_autofree char *u1 = cl_deid_uid(d, "1.2.3.4"), *u2 = cl_deid_uid(d, "1.2.3.4"),
                    *u3 = cl_deid_uid(d, "1.2.3.5");
    assert_uid(u1);
    g_assert_cmpstr(u1, ==, u2);
    g_assert_cmpstr(u1, !=, u3);
    /* short name parts only as whole words; longer ones anywhere, in any case */
    g_autofree char *t = cl_deid_text(d, "Does DOE know? JANE's janet, " PATIENT_ID "x");
    g_assert_cmpstr(t, ==, "Does [removed] know? [removed]'s [removed]t, [removed]x");
    g_autofree char *p = cl_deid_text(d, ((ClCaseImage *)c->images->pdata[1])->path);
    g_assert_cmpstr(p, ==, "image-2.dcm");
    /* keys are never scrubbed, values are, even when the name is a common word */
    g_autoptr(ClCase) odd = cl_case_new_empty();
    ClCaseImage *oi = g_new0(ClCaseImage, 1);
    oi->path = g_strdup("/x/scan.dcm");
    oi->format = g_strdup("DICOM");
    oi->metadata_json = g_strdup("{\"PatientName\":\"Patient^Rows\",\"PatientOrientation\":"
                                 "\"L\\\\F\",\"Manufacturer\":\"Rows Inc\",\"Rows\":\"23\"}");
    g_ptr_array_add(odd->images, oi);
    g_autoptr(ClDeid) od = cl_deid_new("secret-A", odd);
    g_autofree char *om = cl_deid_metadata(od, oi->metadata_json, TRUE);
    g_autoptr(JsonParser) op = json_parser_new();
    g_assert_true(json_parser_load_from_data(op, om, -1, NULL));
    JsonObject *oo = json_node_get_object(json_parser_get_root(op));
    g_assert_cmpstr(json_object_get_string_member(oo, "PatientOrientation"), ==, "L\\F");
    g_assert_cmpstr(json_object_get_string_member(oo, "Manufacturer"), ==, "[removed] Inc");
    g_assert_cmpstr(json_object_get_string_member(oo, "Rows"), ==, "23");
    g_assert_cmpstr(json_object_get_string_member(oo, "PatientName"), ==, "");
    g_assert_null(cl_deid_metadata(od, "[1, 2]", TRUE)); /* not an object */

    g_assert_cmpint(cl_deid_action("PatientName", TRUE), ==, CL_DEID_EMPTY);
    g_assert_cmpint(cl_deid_action("InstitutionName", TRUE), ==, CL_DEID_REMOVE);
    g_assert_cmpint(cl_deid_action("SOPInstanceUID", TRUE), ==, CL_DEID_UID);
    g_assert_cmpint(cl_deid_action("StudyDate", TRUE), ==, CL_DEID_SHIFT);
    g_assert_cmpint(cl_deid_action("Rows", TRUE), ==, CL_DEID_KEEP);
    g_assert_cmpint(cl_deid_action("GPSLatitude", FALSE), ==, CL_DEID_REMOVE);
}

/* A file's own extension never survives: it may be the patient's ID ("scan.77123"), or
 * anything at all ("scan.a-b12" once made the name be built from freed memory). */
static ClCaseImage *named_image(guint position, const char *path, const char *format)
{
    ClCaseImage *img = g_new0(ClCaseImage, 1);
    img->position = position;
    img->path = g_strdup(path);
    img->format = g_strdup(format);
    img->metadata_json = g_strdup("{\"PatientID\":\"77123\",\"PatientName\":\"Roe^Richard\"}");
    return img;
}

static void test_deid_file_names(void)
{
    g_autoptr(ClCase) c = cl_case_new_empty();
    g_ptr_array_add(c->images, named_image(0, "/data/scans/scan.77123", "DICOM"));
    g_ptr_array_add(c->images, named_image(1, "/data/scans/scan.a-b12", "DICOM"));
    g_ptr_array_add(c->images, named_image(2, "/data/Roe.Richard.TIFF", "TIFF"));
    g_ptr_array_add(c->images, named_image(3, "/data/photo.77123.png", "PNG"));
    g_ptr_array_add(c->images, named_image(4, "/data/noext", NULL));
    const char *const want[] = { "image-1.dcm", "image-2.dcm", "image-3.tif", "image-4.png",
                                 "image-5.img" };
    for (guint i = 0; i < c->images->len; i++) {
        g_autofree char *name = cl_deid_image_name(g_ptr_array_index(c->images, i));
        g_assert_cmpstr(name, ==, want[i]);
    }
    g_autoptr(ClDeid) d = cl_deid_new("secret-A", c);
    g_autofree char *t = cl_deid_text(d, "Compare scan.77123 with /data/scans/scan.a-b12 and "
                                         "photo.77123.png; ID 77123.");
    g_assert_cmpstr(t, ==, "Compare image-1.dcm with image-2.dcm and image-4.png; ID [removed].");
    cl_deid_case(d, c);
    for (guint i = 0; i < c->images->len; i++) {
        const ClCaseImage *img = g_ptr_array_index(c->images, i);
        g_assert_cmpstr(img->path, ==, want[i]);
        g_assert_null(strstr(img->metadata_json, "77123"));
    }
}

/* The gaps probing found: text after a date, acquisition times kept in date-times, names and
 * numbers the file holds typed into free text, dates of birth in other forms, a decomposed
 * "Müller", free-form PNG keys, the case name in the PDF's title. */
static void test_deid_gaps(void)
{
    g_autoptr(ClCase) c = cl_case_new_empty();
    c->summary.id = 3;
    c->summary.name = g_strdup("St. Quimby Hospital: Hans for Dr. Okonkwo");
    ClCaseImage *img = named_image(0, "/data/a.dcm", "DICOM");
    g_free(img->metadata_json);
    img->metadata_json = g_strdup(
        "{\"PatientName\":\"M\u00fcller^Hans\",\"PatientID\":\"PX7712\","
        "\"InstitutionName\":\"St. Quimby Hospital\",\"ReferringPhysicianName\":\"Okonkwo^Ada\","
        "\"StudyID\":\"ST8841\",\"DeviceSerialNumber\":\"SN-4471\",\"StationName\":\"CTROOM7\","
        "\"StudyDate\":\"20230714QUIMBY\",\"AcquisitionDateTime\":\"20230714093015.25\","
        "\"ContentDate\":\"20230714\"}");
    img->acquired_at = g_strdup("2023-07-14T09:30:15");
    g_ptr_array_add(c->images, img);
    g_autoptr(ClDeid) d = cl_deid_new("secret-A", c);

    /* metadata: the date alone, no trailing text and no time of acquisition */
    g_autofree char *m = cl_deid_metadata(d, img->metadata_json, TRUE);
    g_autoptr(JsonParser) jp = json_parser_new();
    g_assert_true(json_parser_load_from_data(jp, m, -1, NULL));
    JsonObject *o = json_node_get_object(json_parser_get_root(jp));
    const char *content = json_object_get_string_member(o, "ContentDate");
    g_assert_true(g_regex_match_simple("^[0-9]{8}$", content, 0, 0));
    g_assert_cmpstr(json_object_get_string_member(o, "StudyDate"), ==, content);
    g_assert_cmpstr(json_object_get_string_member(o, "AcquisitionDateTime"), ==, content);
    g_assert_null(strstr(m, "QUIMBY"));
    g_autofree char *kept = cl_deid_shift_date(d, "20230714093015");
    g_assert_true(g_str_has_suffix(kept, "093015")); /* a time of day is kept where it may be */

    /* free text: names and numbers the file holds, dates of birth however written */
    const char *nfd = "M"
                      "u\xcc\x88"
                      "ller"; /* u + COMBINING DIAERESIS */
    g_autofree char *text = g_strdup_printf(
        "Seen at st. quimby hospital by Dr. Okonkwo (study ST8841, device SN-4471, CTROOM7) for "
        "%s. Born 25/12/1961, 12.05.1961, May 12, 1961, 12th of May 1961, 03/04/1961. "
        "Lesion 12 mm.",
        nfd);
    g_autofree char *t = cl_deid_text(d, text);
    const char *gone[] = { "uimby", "Okonkwo", "ST8841", "SN-4471", "CTROOM7", "ller",
                           "1961",  "25/12",   "12.05",  "May 12",  "of May",  "03/04" };
    for (guint i = 0; i < G_N_ELEMENTS(gone); i++)
        if (strstr(t, gone[i]))
            g_error("\"%s\" survived de-identification: %s", gone[i], t);
    g_assert_nonnull(strstr(t, "[date removed]")); /* 03/04/1961 reads both ways */
    g_assert_nonnull(strstr(t, "Lesion 12 mm."));  /* ordinary numbers stay */
    g_assert_true(g_regex_match_simple("Born [0-9]{2}/[0-9]{2}/[0-9]{4}, [0-9]{2}\\.[0-9]{2}\\."
                                       "[0-9]{4}, [A-Z][a-z]+ [0-9]{1,2}, [0-9]{4}, [0-9]{1,2} "
                                       "[A-Z][a-z]+ [0-9]{4}",
                                       t, 0, 0));

    /* free-form keys of other formats, in any case */
    const char *removed[] = { "Patient",  "INSTITUTION", "mrn", "Referring physician",
                              "Study ID", "patient_id" };
    for (guint i = 0; i < G_N_ELEMENTS(removed); i++)
        g_assert_cmpint(cl_deid_action(removed[i], FALSE), ==, CL_DEID_REMOVE);
    const char *kept_keys[] = { "Software", "Width", "Grid", "Video mode" };
    for (guint i = 0; i < G_N_ELEMENTS(kept_keys); i++)
        g_assert_cmpint(cl_deid_action(kept_keys[i], FALSE), ==, CL_DEID_KEEP);

    /* the whole case: the name scrubbed, acquired_at a date */
    g_autoptr(ClCase) copy = cl_case_new_empty();
    copy->summary.name = g_strdup(c->summary.name);
    ClCaseImage *ci = named_image(0, "/data/a.dcm", "DICOM");
    g_free(ci->metadata_json);
    ci->metadata_json = g_strdup(img->metadata_json);
    ci->acquired_at = g_strdup(img->acquired_at);
    g_ptr_array_add(copy->images, ci);
    cl_deid_case(d, copy);
    g_assert_true(g_regex_match_simple("^[0-9]{4}-[0-9]{2}-[0-9]{2}$", ci->acquired_at, 0, 0));
    g_assert_null(strstr(copy->summary.name, "Quimby"));
    g_assert_null(strstr(copy->summary.name, "Okonkwo"));
}

/* The PDF's /Title is this ASCII text: cairo writes it as a literal string, or in UTF-16BE hex
 * (it does for some characters) */
static gboolean pdf_title_is(const char *pdf, gsize len, const char *ascii)
{
    GString *hex = g_string_new("/Title <FEFF");
    for (const char *p = ascii; *p; p++)
        g_string_append_printf(hex, "%04X", (unsigned)(guchar)*p);
    g_string_append_c(hex, '>');
    g_autofree char *lit = g_strdup_printf("/Title (%s)", ascii);
    gboolean found = memmem(pdf, len, hex->str, hex->len) || memmem(pdf, len, lit, strlen(lit));
    g_string_free(hex, TRUE);
    return found;
}

/* A de-identified PDF's title names no case: the name is free text, and the title is shown
 * outside the pages. */
static void test_deid_pdf_title(void)
{
    g_autoptr(ClCase) c = make_case(TRUE);
    g_free(c->summary.name);
    c->summary.name = g_strdup("Ward7 chest");
    ClReportOptions o;
    opts(&o, c, CL_REPORT_PDF, "secret-A");
    g_autofree char *out = tmp_path("deid-title.pdf");
    g_autoptr(GPtrArray) w = export_ok(c, &o, out);
    gsize len = 0;
    g_autofree char *pdf = NULL;
    g_assert_true(g_file_get_contents(out, &pdf, &len, NULL));
    g_assert_true(pdf_title_is(pdf, len, "ChangeLens report (de-identified)"));
    g_assert_false(pdf_title_is(pdf, len, "ChangeLens report: Ward7 chest"));
    o.deidentify = FALSE;
    g_autofree char *plain = tmp_path("plain-title.pdf");
    g_autoptr(GPtrArray) w2 = export_ok(c, &o, plain);
    g_autofree char *pdf2 = NULL;
    g_assert_true(g_file_get_contents(plain, &pdf2, &len, NULL));
    g_assert_true(pdf_title_is(pdf2, len, "ChangeLens report: Ward7 chest"));
}

/* A long run without a space gets break opportunities (Pango's wrapping inside a word is
 * quadratic: a 40,000-character name without a space took 16 s to lay out); text with spaces
 * is left alone; the text read without the breaks is the same. */
static void test_long_words(void)
{
    g_assert_null(cl_rp_with_breaks("An ordinary sentence, with words-and/slashes."));
    GString *word = g_string_new(NULL);
    for (int i = 0; i < 10000; i++)
        g_string_append(word, i % 2 ? "b" : "\u00e4"); /* ä: two bytes */
    g_autofree char *broken = cl_rp_with_breaks(word->str);
    g_assert_nonnull(broken);
    int run = 0, longest = 0, breaks = 0;
    GString *back = g_string_new(NULL);
    for (const char *q = broken; *q; q = g_utf8_next_char(q)) {
        gunichar c = g_utf8_get_char(q);
        if (c == 0x200B) {
            breaks++, run = 0;
            continue;
        }
        g_string_append_unichar(back, c);
        run++;
        longest = MAX(longest, run);
    }
    g_assert_cmpint(longest, <=, 64);
    g_assert_cmpint(breaks, ==, 10000 / 64);
    g_assert_cmpstr(back->str, ==, word->str);
    g_string_free(back, TRUE);
    /* and the PDF of a case so named is written */
    g_autoptr(ClCase) c = make_case(FALSE);
    g_free(c->summary.name);
    c->summary.name = g_string_free(word, FALSE);
    ClReportOptions o;
    opts(&o, c, CL_REPORT_PDF, "secret-A");
    g_autofree char *out = tmp_path("long-name.pdf");
    g_autoptr(GPtrArray) w = export_ok(c, &o, out);
}

/* No secret given: one is made in the config dir (0600) and reused. */
static void test_deid_secret_file(void)
{
    g_autoptr(ClCase) c = make_case(TRUE);
    g_autofree char *file =
        g_build_filename(g_get_user_config_dir(), "changelens", "deid-secret", NULL);
    g_assert_true(g_str_has_prefix(file, tmpdir));
    g_assert_false(g_file_test(file, G_FILE_TEST_EXISTS));
    DeidOut a, b, e;
    deid_export(c, NULL, "secret-1.json", &a);
    GStatBuf st;
    g_assert_cmpint(g_stat(file, &st), ==, 0);
    g_assert_cmpint(st.st_mode & 0777, ==, 0600);
    g_autofree char *secret = read_text(file);
    g_strstrip(secret);
    g_assert_cmpuint(strlen(secret), ==, 64);
    g_assert_true(g_regex_match_simple("^[0-9a-f]{64}$", secret, 0, 0));
    deid_export(c, NULL, "secret-2.json", &b);
    deid_export(c, secret, "secret-3.json", &e);
    g_assert_cmpint(a.offset, ==, b.offset);
    g_assert_cmpint(a.offset, ==, e.offset);
    g_assert_cmpstr(a.study_uid[0], ==, e.study_uid[0]);
    deid_out_clear(&a);
    deid_out_clear(&b);
    deid_out_clear(&e);
    /* a damaged secret file is refused, not silently replaced */
    g_assert_true(g_file_set_contents(file, "not a secret", -1, NULL));
    ClReportOptions o;
    opts(&o, c, CL_REPORT_JSON, NULL);
    g_autoptr(GError) err = NULL;
    g_autofree char *out = tmp_path("secret-bad.json");
    g_assert_false(cl_report_export(c, &o, out, NULL, &err));
    g_assert_error(err, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID);
    g_assert_nonnull(strstr(err->message, "deid-secret"));
    g_unlink(file);
}

/* ---- missing files, burned-in annotation ---------------------------------------------------- */

/* De-identification changes metadata and text, never pixels: a de-identified PDF or HTML report
 * of an image that may show burned-in text is refused until its pixels are confirmed checked;
 * JSON (no pixels) and a report that is not de-identified are written. */
static void test_deid_burned_in(void)
{
    g_autoptr(ClCase) c = make_case(TRUE); /* image 3: BurnedInAnnotation YES */
    g_assert_cmpuint(cl_report_burned_in_images(c), ==, 1);
    ClReportOptions o;
    opts(&o, c, CL_REPORT_PDF, "secret-A");
    o.burned_in_checked = FALSE;
    g_autofree char *out = tmp_path("burned.pdf");
    g_autoptr(GError) err = NULL;
    g_assert_false(cl_report_export(c, &o, out, NULL, &err));
    g_assert_error(err, CL_REPORT_ERROR, CL_REPORT_ERROR_BURNED_IN);
    g_assert_nonnull(strstr(err->message, "Image 3"));
    g_assert_nonnull(strstr(err->message, "--burned-in-checked"));
    g_assert_false(g_file_test(out, G_FILE_TEST_EXISTS));
    g_clear_error(&err);
    o.format = CL_REPORT_HTML;
    g_assert_false(cl_report_export(c, &o, out, NULL, &err));
    g_assert_error(err, CL_REPORT_ERROR, CL_REPORT_ERROR_BURNED_IN);
    g_clear_error(&err);
    o.format = CL_REPORT_JSON;
    g_autoptr(GPtrArray) w1 = export_ok(c, &o, out);
    o.format = CL_REPORT_PDF;
    o.burned_in_checked = TRUE;
    g_autoptr(GPtrArray) w2 = export_ok(c, &o, out);
    g_assert_true(warnings_have(w2, "Image 3", "burned-in annotation"));
    o.burned_in_checked = FALSE;
    o.deidentify = FALSE;
    g_autoptr(GPtrArray) w3 = export_ok(c, &o, out);

    /* ultrasound that does not say: refused as well; one that says NO: written */
    ClCaseImage *us = g_ptr_array_index(c->images, 1);
    g_free(us->modality);
    us->modality = g_strdup("US");
    g_free(us->metadata_json);
    us->metadata_json = g_strdup("{\"Modality\":\"US\",\"PatientID\":\"X1\"}");
    ClCaseImage *third = g_ptr_array_index(c->images, 2);
    g_free(third->metadata_json);
    third->metadata_json = g_strdup("{\"BurnedInAnnotation\":\"NO\"}");
    g_assert_cmpuint(cl_report_burned_in_images(c), ==, 1);
    o.deidentify = TRUE;
    g_assert_false(cl_report_export(c, &o, out, NULL, &err));
    g_assert_error(err, CL_REPORT_ERROR, CL_REPORT_ERROR_BURNED_IN);
    g_assert_nonnull(strstr(err->message, "ultrasound"));
    g_clear_error(&err);
    g_free(us->metadata_json);
    us->metadata_json = g_strdup("{\"Modality\":\"US\",\"BurnedInAnnotation\":\"NO\"}");
    g_assert_cmpuint(cl_report_burned_in_images(c), ==, 0);
    g_autoptr(GPtrArray) w4 = export_ok(c, &o, out);
}

static void test_missing_file(void)
{
    g_autoptr(ClCase) c = make_case(TRUE);
    ClCaseImage *img2 = c->images->pdata[1], *img3 = c->images->pdata[2];
    g_assert_cmpint(g_unlink(img2->path), ==, 0);
    img2->file_state = CL_FILE_MISSING;
    img3->file_state = CL_FILE_CHANGED;
    ClReportOptions o;
    opts(&o, c, CL_REPORT_PDF, "secret-A");
    g_autofree char *pdf = tmp_path("missing.pdf");
    g_autoptr(GPtrArray) w = export_ok(c, &o, pdf);
    g_assert_true(warnings_have(w, "Image 2 (image-2.dcm)", "missing"));
    g_assert_true(warnings_have(w, "Image 3 (image-3.dcm)", "changed"));
    g_autofree char *text = pdf_text(pdf);
    if (text) {
        g_assert_nonnull(strstr(text, "file missing: missing (moved or deleted)"));
        g_assert_nonnull(strstr(text, "file changed"));
        g_assert_nonnull(strstr(text, "No difference image"));
    }
    o.format = CL_REPORT_HTML;
    g_autofree char *html_path = tmp_path("missing.html");
    g_autoptr(GPtrArray) w2 = export_ok(c, &o, html_path);
    g_autofree char *html = read_text(html_path);
    g_assert_nonnull(
        strstr(html, "<div class=\"placeholder\">Image 2 (image-2.dcm)\nfile missing"));
    g_assert_cmpuint(count(html, "<img"), ==, 1); /* image 1, before in comparison 1 */
    o.format = CL_REPORT_JSON;
    g_autofree char *json_path = tmp_path("missing.json");
    g_autoptr(GPtrArray) w3 = export_ok(c, &o, json_path);
    g_autofree char *json = read_text(json_path);
    g_assert_nonnull(strstr(json, "\"file_state\" : \"missing\""));
    g_assert_true(warnings_have(w3, "Image 2 (image-2.dcm)", "missing"));

    /* a file that cannot be decoded (unchecked state): a placeholder with the loader's words */
    g_assert_true(g_file_set_contents(img2->path, "not an image at all", -1, NULL));
    img2->file_state = CL_FILE_UNCHECKED;
    o.format = CL_REPORT_PDF;
    g_autoptr(GPtrArray) w4 = export_ok(c, &o, pdf);
    g_assert_true(warnings_have(w4, "Image 2 (image-2.dcm) cannot be shown", NULL));
    g_assert_false(warnings_have(w4, "Doe_Jane", NULL));
}

/* ---- writing -------------------------------------------------------------------------------- */

static void assert_dir_entries(const char *dir, guint want)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    guint n = 0;
    for (const char *name; (name = g_dir_read_name(d));) {
        g_test_message("in %s: %s", dir, name);
        n++;
    }
    g_assert_cmpuint(n, ==, want); /* no temporary file left behind */
}

static void test_atomic(void)
{
    g_autoptr(ClCase) c = make_case(FALSE);
    const ClReportFormat formats[] = { CL_REPORT_PDF, CL_REPORT_HTML, CL_REPORT_JSON };
    g_autofree char *dir = tmp_path("atomic");
    g_assert_cmpint(g_mkdir(dir, 0755), ==, 0);
    g_autofree char *old = g_build_filename(dir, "old-report", NULL);
    g_assert_true(g_file_set_contents(old, "OLD REPORT", -1, NULL));
    g_autofree char *folder = g_build_filename(dir, "a-folder", NULL);
    g_assert_cmpint(g_mkdir(folder, 0755), ==, 0);
    g_autofree char *inside = g_build_filename(folder, "keep", NULL);
    g_assert_true(g_file_set_contents(inside, "KEEP", -1, NULL));
    for (guint i = 0; i < G_N_ELEMENTS(formats); i++) {
        ClReportOptions o;
        opts(&o, c, formats[i], NULL);
        /* a folder that does not exist */
        g_autofree char *nowhere = tmp_path("no-such-folder/report.out");
        g_autoptr(GError) err = NULL;
        g_assert_false(cl_report_export(c, &o, nowhere, NULL, &err));
        g_assert_error(err, CL_REPORT_ERROR, CL_REPORT_ERROR_WRITE);
        g_assert_nonnull(strstr(err->message, "does not exist"));
        g_assert_nonnull(strstr(err->message, "no-such-folder"));
        g_clear_error(&err);
        /* a folder as the output: refused, the folder and its file untouched */
        g_assert_false(cl_report_export(c, &o, folder, NULL, &err));
        g_assert_error(err, CL_REPORT_ERROR, CL_REPORT_ERROR_WRITE);
        g_assert_nonnull(strstr(err->message, "folder"));
        g_clear_error(&err);
        g_autofree char *keep = read_text(inside);
        g_assert_cmpstr(keep, ==, "KEEP");
        /* the disk fills up mid-write (a file size limit works even as root) */
        struct rlimit saved, small;
        g_assert_cmpint(getrlimit(RLIMIT_FSIZE, &saved), ==, 0);
        small = saved;
        small.rlim_cur = 3000;
        void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
        g_assert_cmpint(setrlimit(RLIMIT_FSIZE, &small), ==, 0);
        gboolean ok = cl_report_export(c, &o, old, NULL, &err);
        g_assert_cmpint(setrlimit(RLIMIT_FSIZE, &saved), ==, 0);
        signal(SIGXFSZ, prev);
        g_assert_false(ok);
        g_assert_error(err, CL_REPORT_ERROR, CL_REPORT_ERROR_WRITE);
        g_assert_nonnull(strstr(err->message, old));
        g_test_message("full disk: %s", err->message);
        g_clear_error(&err);
        g_autofree char *still = read_text(old);
        g_assert_cmpstr(still, ==, "OLD REPORT");
        assert_dir_entries(dir, 2);
    }
    /* and a successful export replaces the old file */
    ClReportOptions o;
    opts(&o, c, CL_REPORT_JSON, NULL);
    g_autoptr(GPtrArray) w = export_ok(c, &o, old);
    g_autofree char *now = read_text(old);
    g_assert_true(g_str_has_prefix(now, "{"));
    assert_dir_entries(dir, 2);
}

static void test_options(void)
{
    ClReportFormat f;
    ClPaperSize p;
    g_assert_true(cl_report_format_parse("pdf", &f) && f == CL_REPORT_PDF);
    g_assert_true(cl_report_format_parse("HTML", &f) && f == CL_REPORT_HTML);
    g_assert_true(cl_report_format_parse("json", &f) && f == CL_REPORT_JSON);
    g_assert_false(cl_report_format_parse("docx", &f));
    g_assert_false(cl_report_format_parse(NULL, &f));
    g_assert_true(cl_paper_size_parse("Letter", &p) && p == CL_PAPER_LETTER);
    g_assert_true(cl_paper_size_parse("a4", &p) && p == CL_PAPER_A4);
    g_assert_false(cl_paper_size_parse("a3", &p));

    g_autoptr(ClCase) png = make_case(FALSE);
    ClReportOptions o;
    cl_report_options_init(&o, png);
    g_assert_false(o.deidentify);
    g_assert_cmpint(o.paper, ==, CL_PAPER_A4);
    g_assert_cmpfloat(o.heatmap_opacity, ==, 0.6);
    g_assert_cmpuint(o.max_image_px, ==, 1024);
    g_assert_true(g_str_has_prefix(o.generator, "ChangeLens "));
    g_autofree char *out = tmp_path("invalid.pdf");
    g_autoptr(GError) err = NULL;
    o.heatmap_opacity = 2;
    g_assert_false(cl_report_export(png, &o, out, NULL, &err));
    g_assert_error(err, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID);
    g_clear_error(&err);
    cl_report_options_init(&o, png);
    o.format = (ClReportFormat)9;
    g_assert_false(cl_report_export(png, &o, out, NULL, &err));
    g_assert_error(err, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID);
    g_clear_error(&err);
    g_autoptr(ClCase) empty = cl_case_new_empty();
    empty->summary.name = g_strdup("empty");
    cl_report_options_init(&o, empty);
    g_assert_false(o.deidentify);
    g_assert_false(cl_report_export(empty, &o, out, NULL, &err));
    g_assert_error(err, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID);
    g_assert_false(g_file_test(out, G_FILE_TEST_EXISTS));
    g_clear_error(&err);
    g_autofree char *json = cl_report_to_json(empty, &o, NULL, &err); /* `case show` of it */
    g_assert_no_error(err);
    g_assert_nonnull(strstr(json, "\"n_images\" : 0"));
}

/* A PNG case end to end, and a one-image case: something to see, nothing to compare. */
static void test_png_case(void)
{
    g_autoptr(ClCase) c = make_case(FALSE);
    ClReportOptions o;
    opts(&o, c, CL_REPORT_HTML, NULL);
    o.max_image_px = 64; /* pictures are fitted to the limit */
    g_autofree char *html_path = tmp_path("png.html");
    g_autoptr(GPtrArray) w = export_ok(c, &o, html_path);
    g_assert_cmpuint(w->len, ==, 0);
    g_autofree char *html = read_text(html_path);
    g_assert_cmpuint(count(html, "width=\"64\" height=\"48\""), ==, 8);
    g_assert_nonnull(strstr(html, "garden-2.png"));
    g_assert_nonnull(strstr(html, "white = ")); /* a real difference was found */
    g_assert_nonnull(strstr(html, "Garden &quot;plot&quot; &amp; &lt;b&gt;shed&lt;/b&gt;"));
    g_ptr_array_set_size(c->images, 1);
    o.format = CL_REPORT_PDF;
    g_autofree char *pdf = tmp_path("one.pdf");
    g_autoptr(GPtrArray) w2 = export_ok(c, &o, pdf);
    g_autofree char *text = pdf_text(pdf);
    if (text)
        g_assert_nonnull(strstr(text, "nothing to compare"));
}

/* A run whose settings are an empty or blank text (json-glib loads it as a document without a
 * root): the report is written as for settings without a heat-map source (the mean
 * update_norm map), not stopped by a critical. */
static void test_blank_settings(void)
{
    static const char *const blanks[] = { "", "  \n", "[]" };
    for (guint i = 0; i < G_N_ELEMENTS(blanks); i++) {
        g_autoptr(ClCase) c = make_case(FALSE);
        ClCaseRun *r = c->runs->pdata[0];
        g_free(r->settings_json);
        r->settings_json = g_strdup(blanks[i]);
        ClReportOptions o;
        opts(&o, c, CL_REPORT_JSON, "secret-A");
        g_autofree char *path = tmp_path("blank-settings.json");
        g_autoptr(GPtrArray) w = export_ok(c, &o, path);
        g_autoptr(JsonParser) parser = json_parser_new();
        JsonObject *root = load_json(path, parser);
        for (guint k = 0; k < 2; k++) /* comparisons 1 -> 2, 2 -> 3: the later image's map */
            g_assert_cmpint(json_object_get_int_member(nth(root, "comparisons", k), "heatmap_id"),
                            ==, 202 + k);
        o.format = CL_REPORT_HTML;
        g_autofree char *html = tmp_path("blank-settings.html");
        g_autoptr(GPtrArray) w2 = export_ok(c, &o, html);
    }
}

/* Text that is not UTF-8 where the report does not expect people's words: the view's (the
 * window's) heat-map source and mode words, a lone surrogate escape in the run's settings JSON
 * (json-glib decodes it to bytes that are not UTF-8). The JSON and HTML reports stay UTF-8
 * (found by tests/fuzz/fuzz-report.c). */
static void test_bad_utf8(void)
{
    g_autoptr(ClCase) c = make_case(FALSE);
    ClCaseRun *r = c->runs->pdata[0];
    g_free(r->settings_json);
    r->settings_json = g_strdup("{\"prompt\":\"a\\ud83d b\"}");
    ClReportView v = { .before_image_id = 101,
                       .after_image_id = 102,
                       .align_status = "aligned \xff",
                       .compare_mode = "blend\xfe",
                       .changed_fraction = -1,
                       .heatmap_shown = TRUE,
                       .heatmap_source = "update_norm\xc3" };
    ClReportOptions o;
    opts(&o, c, CL_REPORT_JSON, "secret-A");
    o.view = &v;
    static const ClReportFormat formats[] = { CL_REPORT_JSON, CL_REPORT_HTML };
    for (guint deid = 0; deid <= 1; deid++)
        for (guint f = 0; f < G_N_ELEMENTS(formats); f++) {
            o.format = formats[f];
            o.deidentify = deid;
            g_autofree char *path = tmp_path("bad-utf8.out");
            g_autoptr(GPtrArray) w = export_ok(c, &o, path);
            g_autofree char *text = read_text(path);
            const char *bad = NULL;
            if (!g_utf8_validate(text, -1, &bad))
                g_error("format %u, deid %u: not UTF-8 at \"%.40s\"", f, deid,
                        bad - MIN(bad - text, 40));
        }
}

/* A view whose alignment or ignore region holds a number that is not finite is refused by the
 * JSON string as by the export (JSON has no NaN or infinity: it used to write them as they are,
 * found by tests/fuzz/fuzz-report.c). */
static void test_json_bad_view(void)
{
    g_autoptr(ClCase) c = make_case(FALSE);
    double masks[4] = { 0, 0, 10, INFINITY };
    ClReportView v = { .before_image_id = 101, .after_image_id = 102, .changed_fraction = -1 };
    ClReportOptions o;
    opts(&o, c, CL_REPORT_JSON, "secret-A");
    o.view = &v;
    for (int k = 0; k < 2; k++) {
        v.aligned = k == 0;
        v.align_m[0] = k == 0 ? NAN : 1;
        v.masks = masks;
        v.n_masks = k;
        g_autoptr(GError) err = NULL;
        g_autofree char *json = cl_report_to_json(c, &o, NULL, &err);
        g_assert_null(json);
        g_assert_error(err, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID);
        g_autoptr(GError) err2 = NULL;
        g_autofree char *path = tmp_path("bad-view.json");
        g_assert_false(cl_report_export(c, &o, path, NULL, &err2));
        g_assert_error(err2, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID);
    }
    v.aligned = FALSE, v.n_masks = 0; /* a finite view is written */
    g_autoptr(GError) err = NULL;
    g_autofree char *json = cl_report_to_json(c, &o, NULL, &err);
    g_assert_no_error(err);
    g_assert_nonnull(json);
}

/* Numbers whose shortest form has an exponent and no point: json-glib writes "1e+20" as
 * "1e+20.0", which is not JSON (found by tests/fuzz/fuzz-report.c). The JSON report parses and
 * keeps them: an integer exactly, any other within one ulp. */
static void test_json_big_numbers(void)
{
    g_autoptr(ClCase) c = make_case(FALSE);
    ClCaseRun *r = c->runs->pdata[0];
    r->preprocess_ms = 1e17, r->encode_ms = 1e-300, r->decode_ms = -1e22, r->total_ms = 1e308;
    ClReportOptions o;
    opts(&o, c, CL_REPORT_JSON, "secret-A");
    g_autofree char *path = tmp_path("big-numbers.json");
    g_autoptr(GPtrArray) w = export_ok(c, &o, path);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root = load_json(path, parser); /* asserts that it parses */
    JsonObject *t = json_object_get_object_member(nth(root, "runs", 0), "timings_ms");
    g_assert_cmpint(json_object_get_int_member(t, "preprocess"), ==,
                    G_GINT64_CONSTANT(100000000000000000));
    const struct {
        const char *name;
        double v;
    } want[] = { { "encode", 1e-300 }, { "decode", -1e22 }, { "total", 1e308 } };
    for (guint k = 0; k < G_N_ELEMENTS(want); k++) {
        double got = json_object_get_double_member(t, want[k].name);
        g_assert_cmpfloat(fabs(got - want[k].v), <=, fabs(want[k].v) * 4e-16);
    }
}

/* A case without images whose name is not UTF-8: the refusal names it in UTF-8 (found by
 * tests/fuzz/fuzz-report.c). */
static void test_empty_bad_name(void)
{
    g_autoptr(ClCase) c = cl_case_new_empty();
    c->summary.name = g_strdup("plot \xcb\xdf 7");
    ClReportOptions o;
    opts(&o, c, CL_REPORT_HTML, "secret-A");
    g_autoptr(GError) err = NULL;
    g_autofree char *path = tmp_path("empty-bad-name.html");
    g_assert_false(cl_report_export(c, &o, path, NULL, &err));
    g_assert_error(err, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID);
    g_assert_true(g_utf8_validate(err->message, -1, NULL));
    g_assert_nonnull(strstr(err->message, "“plot "));
    g_assert_nonnull(strstr(err->message, " 7” has no images"));
}

/* ---- the view on screen (ClReportView) ------------------------------------------------------ */

/* A 20 × 10 grey PNG of level 100, with a 4 × 5 block of level 200 at (bx, 0) when bx >= 0. */
static char *grey_png(const char *name, int bx)
{
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 20, 10);
    cairo_surface_flush(s);
    guint8 *data = cairo_image_surface_get_data(s);
    const int stride = cairo_image_surface_get_stride(s);
    for (int y = 0; y < 10; y++)
        for (int x = 0; x < 20; x++) {
            guint8 v = bx >= 0 && x >= bx && x < bx + 4 && y < 5 ? 200 : 100;
            guint32 *p = (guint32 *)(data + y * stride) + x;
            *p = 0xff000000u | (guint32)v << 16 | (guint32)v << 8 | v;
        }
    cairo_surface_mark_dirty(s);
    char *path = tmp_path(name);
    g_assert_true(cairo_surface_write_to_png(s, path) == CAIRO_STATUS_SUCCESS);
    cairo_surface_destroy(s);
    return path;
}

static ClCaseImage *grey_image(guint position, gint64 id, const char *path)
{
    ClCaseImage *img = g_new0(ClCaseImage, 1);
    img->id = id;
    img->position = position;
    img->path = g_strdup(path);
    img->format = g_strdup("PNG");
    img->width = 20;
    img->height = 10;
    img->n_frames = 1;
    img->file_state = CL_FILE_OK;
    img->metadata_json = g_strdup("{}");
    return img;
}

/* The JSON report of c through view v; its "view" and first comparison. */
static JsonObject *view_json(const ClCase *c, const ClReportView *v, JsonParser *parser,
                             JsonObject **cmp)
{
    ClReportOptions o;
    opts(&o, c, CL_REPORT_JSON, "view-secret");
    o.view = v;
    g_autoptr(GError) err = NULL;
    g_autofree char *json = cl_report_to_json(c, &o, NULL, &err);
    g_assert_no_error(err);
    g_assert_true(json_parser_load_from_data(parser, json, -1, &err));
    JsonObject *root = json_node_get_object(json_parser_get_root(parser));
    *cmp = json_array_get_object_element(json_object_get_array_member(root, "comparisons"), 0);
    return json_object_get_null_member(root, "view") ? NULL
                                                     : json_object_get_object_member(root, "view");
}

/* The changed share is counted on known pixels: 20 of 200 changed; an ignore region leaves 10 of
 * 190; the alignment (a 2-pixel shift) leaves 20 of the 180 pixels with a later pixel; the view's
 * window (both levels below it: black) leaves none. The view and each image's display are
 * recorded; without a view there is none. */
static void test_view(void)
{
    g_autofree char *pa = grey_png("view-a.png", -1);
    g_autofree char *pb = grey_png("view-b.png", 10);
    g_autoptr(ClCase) c = cl_case_new_empty();
    c->summary.id = 5;
    c->summary.name = g_strdup("View");
    g_ptr_array_add(c->images, grey_image(0, 11, pa));
    g_ptr_array_add(c->images, grey_image(1, 12, pb));
    ClReportView v = { 0 };
    v.before_image_id = 11;
    v.after_image_id = 12;
    v.compare_mode = "difference";
    v.tolerance = 16;
    v.changed_fraction = 0.1;
    JsonObject *cmp;

    g_autoptr(JsonParser) p1 = json_parser_new();
    JsonObject *view = view_json(c, &v, p1, &cmp);
    g_assert_nonnull(view);
    g_assert_cmpfloat(json_object_get_double_member(view, "changed_fraction"), ==, 0.1);
    g_assert_cmpfloat(json_object_get_double_member(view, "changed_fraction_on_screen"), ==, 0.1);
    g_assert_cmpstr(json_object_get_string_member(view, "compare_mode"), ==, "difference");
    g_assert_true(json_object_get_boolean_member(cmp, "on_screen"));
    g_assert_cmpint(json_object_get_int_member(cmp, "compared_pixels"), ==, 200);

    const double mask[4] = { 10, 0, 12, 5 };
    v.masks = mask;
    v.n_masks = 1;
    g_autoptr(JsonParser) p2 = json_parser_new();
    view = view_json(c, &v, p2, &cmp);
    g_assert_cmpint(json_object_get_int_member(cmp, "compared_pixels"), ==, 190);
    g_assert_cmpfloat(fabs(json_object_get_double_member(view, "changed_fraction") - 10.0 / 190), <,
                      1e-12);
    g_assert_cmpuint(json_array_get_length(json_object_get_array_member(view, "ignore_regions")),
                     ==, 1);

    v.n_masks = 0;
    v.aligned = TRUE;
    const double m[6] = { 2, 1, 0, 0, 0, 1 };
    memcpy(v.align_m, m, sizeof m);
    g_autoptr(JsonParser) p3 = json_parser_new();
    view = view_json(c, &v, p3, &cmp);
    g_assert_cmpint(json_object_get_int_member(cmp, "compared_pixels"), ==, 180);
    g_assert_cmpfloat(fabs(json_object_get_double_member(view, "changed_fraction") - 20.0 / 180), <,
                      1e-12);
    g_assert_true(json_object_get_boolean_member(cmp, "aligned"));
    g_assert_cmpfloat(
        json_array_get_double_element(json_object_get_array_member(view, "alignment"), 0), ==, 2);

    v.aligned = FALSE;
    for (int k = 0; k < 2; k++) {
        v.has_display[k] = TRUE;
        v.display[k] = (ClDisplaySettings){
            .mode = CL_DISPLAY_WINDOW, .center = 300, .width = 10, .bands = { 0, 1, 2 }
        };
    }
    g_autoptr(JsonParser) p4 = json_parser_new();
    view = view_json(c, &v, p4, &cmp);
    g_assert_cmpfloat(json_object_get_double_member(view, "changed_fraction"), ==, 0);
    JsonObject *d0 =
        json_array_get_object_element(json_object_get_array_member(view, "display"), 0);
    g_assert_cmpstr(json_object_get_string_member(d0, "mode"), ==, "window");
    g_assert_cmpfloat(json_object_get_double_member(d0, "window_center"), ==, 300);

    /* the pictures too: the images drawn with the window, the view line and captions */
    ClReportOptions o;
    opts(&o, c, CL_REPORT_HTML, "view-secret");
    o.view = &v;
    g_autofree char *html_path = tmp_path("view.html");
    g_autoptr(GPtrArray) w = export_ok(c, &o, html_path);
    g_autofree char *html = read_text(html_path);
    g_assert_nonnull(strstr(html, "As on screen: image 1 → image 2, both shown with window width "
                                  "10, level 300; not aligned"));
    g_assert_nonnull(strstr(html, "difference tolerance 16/255: 0.00 % of the compared pixels "
                                  "differ (10.00 % on screen)"));
    g_assert_nonnull(strstr(html, "Display: window width 10, level 300 (as on screen)"));
    g_assert_nonnull(strstr(html, "Comparison 1: image 1 → image 2 (as on screen)"));

    /* a bad view is refused, never drawn */
    v.tolerance = NAN;
    g_autoptr(GError) err = NULL;
    g_autofree char *bad = tmp_path("view-bad.html");
    g_assert_false(cl_report_export(c, &o, bad, NULL, &err));
    g_assert_error(err, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID);
    v.tolerance = 16;

    /* without a view: none recorded, the comparison not the screen's */
    g_autoptr(JsonParser) p5 = json_parser_new();
    g_assert_null(view_json(c, NULL, p5, &cmp));
    g_assert_false(json_object_get_boolean_member(cmp, "on_screen"));
    g_assert_true(json_object_get_null_member(cmp, "changed_fraction"));
}

/* De-identification's changes to what people wrote, listed before an export: the reviewer's
 * signed sentence with its date shifted (as the report will have it), the model's own text not
 * listed, an unchanged text not listed. */
static void test_deid_text_changes(void)
{
    g_autoptr(ClCase) c = make_case(TRUE);
    ClReportOptions o;
    opts(&o, c, CL_REPORT_JSON, "changes-secret");
    add_version(c, 900, 9, "Compared with the prior of 2024-03-12: stable.", CL_DESC_ACCEPTED,
                "Dr Ng", "2024-04-16T10:00:00Z");
    g_autoptr(GError) err = NULL;
    g_autoptr(GPtrArray) changes = cl_report_deid_text_changes(c, &o, &err);
    g_assert_no_error(err);
    const ClReportTextChange *first = NULL;
    for (guint i = 0; i < changes->len; i++) {
        const ClReportTextChange *t = changes->pdata[i];
        g_test_message("%s: %s -> %s", t->where, t->before, t->after);
        g_assert_cmpstr(t->before, !=, t->after);
        g_assert_cmpstr(t->before, !=, desc_generated); /* the model's text is not the reviewer's */
        if (strstr(t->before, "2024-03-12"))
            first = t;
    }
    g_assert_nonnull(first);
    g_assert_null(strstr(first->after, "2024-03-12"));
    g_assert_nonnull(strstr(first->where, "version 9"));
    /* what is listed is what the report holds */
    g_autofree char *json = cl_report_to_json(c, &o, NULL, &err);
    g_assert_no_error(err);
    g_assert_nonnull(strstr(json, first->after));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    tmpdir = cl_fixture_tmpdir("report");
    /* the per-installation secret goes here, not into the real config dir */
    g_autofree char *config = g_build_filename(tmpdir, "config", NULL);
    g_setenv("XDG_CONFIG_HOME", config, TRUE);
    fixtures = g_ptr_array_new_with_free_func((GDestroyNotify)cl_fixture_free);
    g_autofree char *fx = g_build_filename(tmpdir, "fixtures", NULL);
    g_assert_cmpint(g_mkdir_with_parents(fx, 0755), ==, 0);
    g_autoptr(GError) err = NULL;
    if (!cl_fixtures_dicom(fx, fixtures, &err))
        g_error("cannot write the DICOM fixtures: %s", err->message);

    g_test_add_func("/report/options", test_options);
    g_test_add_func("/report/pdf/a4", test_pdf_a4);
    g_test_add_func("/report/pdf/letter", test_pdf_letter);
    g_test_add_func("/report/pdf/text", test_pdf_text);
    g_test_add_func("/report/pdf/long-text", test_pdf_long_text);
    g_test_add_func("/report/pdf/noncharacters", test_noncharacters);
    g_test_add_func("/report/html", test_html);
    g_test_add_func("/report/json", test_json);
    g_test_add_func("/report/deid/units", test_deid_units);
    g_test_add_func("/report/deid/consistent", test_deid_consistent);
    g_test_add_func("/report/deid/file-names", test_deid_file_names);
    g_test_add_func("/report/deid/gaps", test_deid_gaps);
    g_test_add_func("/report/deid/pdf-title", test_deid_pdf_title);
    g_test_add_func("/report/deid/burned-in", test_deid_burned_in);
    g_test_add_func("/report/pdf/long-words", test_long_words);
    g_test_add_func("/report/deid/secret-file", test_deid_secret_file);
    g_test_add_func("/report/missing-file", test_missing_file);
    g_test_add_func("/report/atomic", test_atomic);
    g_test_add_func("/report/png-case", test_png_case);
    g_test_add_func("/report/blank-settings", test_blank_settings);
    g_test_add_func("/report/bad-utf8", test_bad_utf8);
    g_test_add_func("/report/json-bad-view", test_json_bad_view);
    g_test_add_func("/report/json-big-numbers", test_json_big_numbers);
    g_test_add_func("/report/empty-bad-name", test_empty_bad_name);
    g_test_add_func("/report/view", test_view);
    g_test_add_func("/report/deid/text-changes", test_deid_text_changes);
    int rc = g_test_run();
    g_ptr_array_unref(fixtures);
    if (g_getenv("CL_REPORT_KEEP")) /* to look at the reports */
        g_printerr("reports kept in %s\n", tmpdir);
    else
        cl_fixture_rmdir(tmpdir);
    g_free(tmpdir);
    return rc;
}
