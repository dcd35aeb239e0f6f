/* fuzz-report.c - libFuzzer harness for the report writers (core/report): a case built from the
 * input (names, descriptions, notes, a key-image label, metadata JSON, dates, run settings,
 * heat-map values and a view), exported as PDF, HTML and JSON with de-identification off and
 * on, and as the JSON string of `case show --json`. The input is fields separated by NUL bytes;
 * field 0 is whitespace-separated numbers (g_ascii_strtod: "nan", "inf", "1e308" too) choosing
 * the structure. `CL_FUZZ_WRITE_SEEDS=DIR fuzz-report` writes a few real cases as seeds. */
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "casedb/casedb.h"
#include "fuzz-common.h"
#include "model/heatmap.h"
#include "report/report.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

enum {
    F_NUMBERS,
    F_NAME,
    F_GENERATED,
    F_EDITED,
    F_AUTHOR,
    F_NOTE_CASE,
    F_NOTE_IMAGE,
    F_LABEL,
    F_METADATA,
    F_ACQUIRED,
    F_DATE,
    F_SETTINGS,
    F_CONFIG,
    F_MODEL_NAME,
    F_FORMAT,
    F_HEAT_KIND,
    F_VIEW_WORDS,
    F_MISSING_NAME,
    N_FIELDS
};

/* The numbers of field 0, by position (0 when absent). */
enum {
    V_N_IMAGES,                /* 0 .. 4 */
    V_IMG_BITS,                /* per image: bit 2i the file exists, bit 2i+1 format DICOM */
    V_STATUS,                  /* ClDescStatus of the edited version */
    V_PAPER,                   /* ClPaperSize */
    V_GRID_W,                  /* heat-map grid, 1 .. 8 */
    V_GRID_H,                  /* */
    V_VIEW,                    /* 1: a ClReportView */
    V_TOLERANCE,               /* */
    V_CHANGED,                 /* changed_fraction */
    V_ALIGNED,                 /* */
    V_ALIGN_M,                 /* 6 numbers */
    V_N_MASKS = V_ALIGN_M + 6, /* 0 .. 3 */
    V_MASKS,                   /* 12 numbers */
    V_HEAT_SHOWN = V_MASKS + 12,
    V_FRAME,    /* ClCaseImage.frame */
    V_N_FRAMES, /* */
    V_WIDTH,    /* the size recorded for the image (the file's is 16 × 12) */
    V_HEIGHT,   /* */
    V_OPACITY,  /* heatmap_opacity */
    V_MAX_PX,   /* max_image_px */
    V_HEAT,     /* the heat values, cycled */
    N_NUMBERS = V_HEAT + 16
};

static char *tmpdir;
static char *png_path;

static void write_png(const char *path)
{
    guint8 rgb[16 * 12 * 3];
    for (guint i = 0; i < sizeof rgb; i++)
        rgb[i] = (guint8)(i * 37);
    g_autoptr(GError) err = NULL;
    if (!cl_png_write_rgb(path, rgb, 16, 12, &err))
        g_error("%s: %s", path, err->message);
}

static void cleanup(void)
{
    g_autofree char *out = g_build_filename(tmpdir, "report.out", NULL);
    g_unlink(out);
    g_unlink(png_path);
    g_rmdir(tmpdir);
}

static void setup(void)
{
    g_autoptr(GError) err = NULL;
    tmpdir = g_dir_make_tmp("fuzz-report-XXXXXX", &err);
    if (!tmpdir)
        g_error("%s", err->message);
    png_path = g_build_filename(tmpdir, "image.png", NULL);
    write_png(png_path);
    atexit(cleanup);
}

/* ---- the input as a case ----------------------------------------------------------------- */

typedef struct {
    char *field[N_FIELDS]; /* NUL-terminated copies; "" when absent */
    double v[N_NUMBERS];
} Input;

static void input_parse(Input *in, const uint8_t *data, size_t size)
{
    size_t start = 0;
    guint f = 0;
    for (size_t i = 0; i <= size && f < N_FIELDS; i++)
        if (i == size || data[i] == 0) {
            in->field[f++] = g_strndup((const char *)data + start, i - start);
            start = i + 1;
        }
    for (; f < N_FIELDS; f++)
        in->field[f] = g_strdup("");
    memset(in->v, 0, sizeof in->v);
    const char *p = in->field[F_NUMBERS];
    for (guint k = 0; k < N_NUMBERS && *p; k++) {
        char *end = NULL;
        double x = g_ascii_strtod(p, &end);
        if (end == p) /* not a number: skip one byte and read on */
            end = (char *)p + 1;
        else
            in->v[k] = x;
        p = end;
    }
}

static void input_clear(Input *in)
{
    for (guint f = 0; f < N_FIELDS; f++)
        g_free(in->field[f]);
}

/* A number as a small count in [0, n): NaN, infinities and negatives too. */
static guint pick(double x, guint n)
{
    if (!(x >= 0 && x < 1e9))
        return 0;
    return (guint)x % n;
}

static const char *or_default(const char *s, const char *def)
{
    return *s ? s : def;
}

static ClCase *make_case(const Input *in)
{
    const double *v = in->v;
    ClCase *c = cl_case_new_empty();
    c->summary.id = 7;
    c->summary.name = g_strdup(in->field[F_NAME]);
    c->summary.created_at = g_strdup(or_default(in->field[F_DATE], "2024-04-15T12:00:00.000Z"));
    c->summary.updated_at = g_strdup(in->field[F_DATE]);
    guint n_images = pick(v[V_N_IMAGES], 5);
    c->summary.n_images = n_images;
    c->summary.has_description = TRUE;
    c->summary.status = (ClDescStatus)pick(v[V_STATUS], 3);
    c->summary.modalities = g_strdup(in->field[F_FORMAT]);
    guint bits = pick(v[V_IMG_BITS], 256);
    for (guint i = 0; i < n_images; i++) {
        ClCaseImage *img = g_new0(ClCaseImage, 1);
        img->id = 101 + i;
        img->position = i;
        img->frame = pick(v[V_FRAME], 4);
        img->n_frames = pick(v[V_N_FRAMES], 4);
        gboolean exists = bits >> (2 * i) & 1, dicom = bits >> (2 * i + 1) & 1;
        if (exists) {
            img->path = g_strdup(png_path);
            img->file_state = CL_FILE_OK;
        } else {
            /* a name from the input, kept inside the folder */
            g_autofree char *name = g_strdup_printf("missing-%s", in->field[F_MISSING_NAME]);
            g_strdelimit(name, "/", '_');
            img->path = g_build_filename(tmpdir, name, NULL);
            img->file_state = (ClFileState)pick(v[V_IMG_BITS] + i, 5);
        }
        img->sha256 = g_strdup("0f");
        img->file_size = 600;
        img->file_mtime = 1713180000;
        img->format = g_strdup(dicom ? "DICOM" : or_default(in->field[F_FORMAT], "PNG"));
        img->modality = dicom ? g_strdup(in->field[F_FORMAT]) : NULL;
        img->width = pick(v[V_WIDTH], 70000);
        img->height = pick(v[V_HEIGHT], 70000);
        img->acquired_at = *in->field[F_ACQUIRED] ? g_strdup(in->field[F_ACQUIRED]) : NULL;
        img->metadata_json = g_strdup(in->field[F_METADATA]);
        img->added_at = g_strdup(in->field[F_DATE]);
        g_ptr_array_add(c->images, img);
    }

    ClCaseRun *r = g_new0(ClCaseRun, 1);
    r->id = 11;
    r->created_at = g_strdup(in->field[F_DATE]);
    r->model_name = g_strdup(in->field[F_MODEL_NAME]);
    r->model_sha256 = g_strdup(in->field[F_MODEL_NAME]);
    r->model_config_json = g_strdup(in->field[F_CONFIG]);
    r->device = g_strdup("cpu (2 threads)");
    r->settings_json = g_strdup(in->field[F_SETTINGS]);
    r->seed = 42;
    r->preprocess_ms = v[V_TOLERANCE], r->total_ms = v[V_CHANGED];
    r->n_tokens = 3;
    g_ptr_array_add(c->runs, r);
    guint gw = 1 + pick(v[V_GRID_W], 8), gh = 1 + pick(v[V_GRID_H], 8);
    for (guint i = 0; i < n_images; i++)
        for (int layer = -1; layer <= 0; layer++) {
            ClCaseHeatmap *h = g_new0(ClCaseHeatmap, 1);
            h->id = 201 + 2 * i + (guint)(layer + 1);
            h->run_id = 11;
            h->image_id = 101 + i;
            h->layer = layer;
            h->kind = g_strdup(or_default(in->field[F_HEAT_KIND], "update_norm"));
            h->input_size = (int)pick(v[V_MAX_PX], 512);
            h->grid_w = gw, h->grid_h = gh;
            h->data = g_new(float, gw * gh);
            for (guint k = 0; k < gw * gh; k++)
                h->data[k] = (float)v[V_HEAT + (k + i) % 16];
            g_ptr_array_add(c->heatmaps, h);
        }

    static const char *const at[] = { "2024-04-15T12:05:01.000Z", "2024-04-16T08:10:00.000Z" };
    const char *texts[] = { in->field[F_GENERATED], in->field[F_EDITED] };
    for (guint k = 0; k < 2; k++) {
        ClCaseDescVersion *d = g_new0(ClCaseDescVersion, 1);
        d->id = 21 + k;
        d->description_id = 5;
        d->run_id = 11;
        d->version = k + 1;
        d->text = g_strdup(texts[k]);
        d->status = k ? c->summary.status : CL_DESC_DRAFT;
        d->author = g_strdup(k ? in->field[F_AUTHOR] : "model");
        d->created_at = g_strdup(*in->field[F_DATE] ? in->field[F_DATE] : at[k]);
        g_ptr_array_add(c->descriptions, d);
    }
    const char *notes[] = { in->field[F_NOTE_CASE], in->field[F_NOTE_IMAGE] };
    for (guint k = 0; k < 2; k++) {
        ClCaseNote *n = g_new0(ClCaseNote, 1);
        n->id = 31 + k;
        n->image_id = k && n_images ? 100 + n_images : 0;
        n->author = g_strdup(in->field[F_AUTHOR]);
        n->text = g_strdup(notes[k]);
        n->created_at = g_strdup(in->field[F_DATE]);
        g_ptr_array_add(c->notes, n);
    }
    if (n_images) {
        ClCaseKeyImage *k = g_new0(ClCaseKeyImage, 1);
        k->id = 41;
        k->image_id = 101;
        k->label = g_strdup(in->field[F_LABEL]);
        k->created_at = g_strdup(in->field[F_DATE]);
        g_ptr_array_add(c->key_images, k);
    }
    return c;
}

/* ---- exporting it -------------------------------------------------------------------------- */

static void check_json(const char *text)
{
    g_assert(g_utf8_validate(text, -1, NULL));
    g_autoptr(JsonParser) p = json_parser_new();
    g_autoptr(GError) err = NULL;
    if (!json_parser_load_from_data(p, text, -1, &err))
        g_error("the JSON report does not parse: %s", err->message);
    g_assert(JSON_NODE_HOLDS_OBJECT(json_parser_get_root(p)));
}

static void check_file(ClReportFormat fmt, const char *path)
{
    g_autofree char *text = NULL;
    gsize len = 0;
    g_assert(g_file_get_contents(path, &text, &len, NULL));
    switch (fmt) {
    case CL_REPORT_PDF: g_assert(len > 5 && memcmp(text, "%PDF-", 5) == 0); break;
    case CL_REPORT_HTML:
        g_assert(g_utf8_validate(text, (gssize)len, NULL));
        g_assert(strstr(text, "<script") == NULL);
        break;
    case CL_REPORT_JSON: check_json(text); break;
    }
    g_unlink(path);
}

static void export_all(const ClCase *c, const Input *in)
{
    const double *v = in->v;
    double masks[12];
    for (guint k = 0; k < 12; k++)
        masks[k] = v[V_MASKS + k];
    ClReportView view = {
        .before_image_id = 101,
        .after_image_id = 102,
        .aligned = pick(v[V_ALIGNED], 2),
        .align_status = in->field[F_VIEW_WORDS],
        .masks = masks,
        .n_masks = pick(v[V_N_MASKS], 4),
        .compare_mode = in->field[F_VIEW_WORDS],
        .tolerance = v[V_TOLERANCE],
        .changed_fraction = v[V_CHANGED],
        .heatmap_shown = pick(v[V_HEAT_SHOWN], 2),
        .heatmap_source = *in->field[F_HEAT_KIND] ? in->field[F_HEAT_KIND] : NULL,
    };
    for (guint k = 0; k < 6; k++)
        view.align_m[k] = v[V_ALIGN_M + k];
    static const ClReportFormat formats[] = { CL_REPORT_JSON, CL_REPORT_HTML, CL_REPORT_PDF };
    for (int deid = 0; deid <= 1; deid++)
        for (guint f = 0; f < G_N_ELEMENTS(formats); f++) {
            ClReportOptions o;
            cl_report_options_init(&o, c);
            o.format = formats[f];
            o.paper = (ClPaperSize)pick(v[V_PAPER], 2);
            o.deidentify = deid;
            o.deid_secret = "fuzz-secret";
            o.generator = "ChangeLens fuzz";
            o.heatmap_opacity = v[V_OPACITY];
            o.max_image_px = 1 + pick(v[V_MAX_PX], 64);
            o.view = pick(v[V_VIEW], 2) ? &view : NULL;
            g_autofree char *path = g_build_filename(tmpdir, "report.out", NULL);
            g_autoptr(GPtrArray) warnings = g_ptr_array_new_with_free_func(g_free);
            GError *err = NULL;
            if (cl_report_export(c, &o, path, warnings, &err)) {
                g_assert(err == NULL);
                check_file(formats[f], path);
            } else {
                g_assert(err && err->domain == CL_REPORT_ERROR && err->message[0]);
                g_assert(g_utf8_validate(err->message, -1, NULL));
                g_clear_error(&err);
            }
            for (guint k = 0; k < warnings->len; k++)
                g_assert(g_utf8_validate(warnings->pdata[k], -1, NULL));
            if (formats[f] == CL_REPORT_JSON) {
                char *json = cl_report_to_json(c, &o, NULL, &err);
                if (json) {
                    g_assert(err == NULL);
                    check_json(json);
                    g_free(json);
                } else {
                    g_assert(err && err->domain == CL_REPORT_ERROR &&
                             err->code == CL_REPORT_ERROR_INVALID);
                    g_clear_error(&err);
                }
            }
        }
    ClReportOptions o;
    cl_report_options_init(&o, c);
    o.deid_secret = "fuzz-secret";
    GError *err = NULL;
    GPtrArray *changes = cl_report_deid_text_changes(c, &o, &err);
    g_assert(changes != NULL && err == NULL);
    for (guint k = 0; k < changes->len; k++) {
        const ClReportTextChange *t = changes->pdata[k];
        g_assert(t->where && t->before && t->after);
        g_assert(g_utf8_validate(t->after, -1, NULL));
    }
    g_ptr_array_unref(changes);
}

/* ---- seeds --------------------------------------------------------------------------------- */

static void write_seed(const char *dir, const char *name, const char *const *fields, guint n)
{
    GByteArray *b = g_byte_array_new();
    for (guint f = 0; f < n; f++) {
        if (f)
            g_byte_array_append(b, (const guint8 *)"", 1);
        g_byte_array_append(b, (const guint8 *)fields[f], (guint)strlen(fields[f]));
    }
    g_autofree char *path = g_strdup_printf("%s/%s.report", dir, name);
    g_autoptr(GError) err = NULL;
    if (!g_file_set_contents(path, (const char *)b->data, b->len, &err))
        g_error("%s", err->message);
    g_byte_array_unref(b);
}

static void write_seeds(const char *dir)
{
    g_mkdir_with_parents(dir, 0755);
    /* a DICOM follow-up with patient details everywhere, a view and heat maps */
    const char *dicom[N_FIELDS] = {
        ("3 10 1 0 4 3 1 24 0.12 1 1 0 2 0 1 -1 1 10 10 40 30 1 0 1 16 12 0.6 32 "
         "0.1 0.5 0.9 0.2 0.3 0.7 1 0 0.4 0.6 0.8 0.05 0.15 0.25 0.35 0.45"),
        "Follow-up of Jane Doe \"chest\" & <b>lungs</b>",
        "A new opacity appears in the right lower zone.",
        "New 2 cm opacity in the right lower zone; Mrs Doe (PID-778899) to follow up. "
        "<script>alert(1)</script>",
        "Dr Ng",
        "Called Jane about the result on 2024-03-01.",
        "bad \xff\xfe bytes and a \x01 control",
        "new opacity",
        "{\"PatientName\":\"Doe^Jane\",\"PatientID\":\"PID-778899\",\"PatientBirthDate\":"
        "\"19800215\",\"StudyDate\":\"20240131\",\"StudyTime\":\"093000\",\"StudyInstanceUID\":"
        "\"1.2.826.0.1.3680043.1.1\",\"InstitutionName\":\"St Example Hospital\","
        "\"BurnedInAnnotation\":\"YES\",\"(0009,0010)\":\"ACME private data\"}",
        "2024-01-31T09:30:15",
        "2024-04-16T08:30:00.000Z",
        "{\"prompt\":\"Describe the change\",\"beam\":1,\"heatmap_source\":\"update_norm\","
        "\"images\":[\"/data/Doe_Jane_1.dcm\"],\"note\":\"for Jane Doe\"}",
        "{\"d_model\":64,\"enc_depth\":2}",
        "/home/reader/models/changelens-tiny.safetensors",
        "DX",
        "update_norm",
        "difference",
        "Doe_Jane_chest_3.dcm",
    };
    write_seed(dir, "dicom", dicom, N_FIELDS);
    /* photos: two files present, no view, Letter paper, a delta map */
    const char *photo[N_FIELDS] = {
        ("2 5 1 1 8 6 0 0 -1 0 1 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 160 120 0.6 1024 "
         "0.5 0.25 0.125 nan inf -inf 1e308 -0 3 2 1 0"),
        "Garden \"plot\" & <b>shed</b>",
        "The shed door is open.",
        "The shed door is open; the wheelbarrow has moved to the left.",
        "reviewer",
        "",
        "check the hinge",
        "",
        "{\"Software\":\"synthetic\",\"DateTimeOriginal\":\"2024:04:15 12:00:00\"}",
        "",
        "2024-04-15T12:00:00.000Z",
        "{\"prompt\":\"What changed?\"}",
        "{}",
        "random-init tiny",
        "PNG",
        "delta",
        "swipe",
        "garden-2.png",
    };
    write_seed(dir, "photo", photo, N_FIELDS);
    /* a case without images, a rejected description, broken JSON and dates */
    const char *empty[] = { "0 0 2",
                            "",
                            "",
                            "rejected text \xe2\x80\xae RTL",
                            "x",
                            "",
                            "",
                            "",
                            "{\"PatientName\":",
                            "not a date",
                            "9999-99-99T99:99:99Z",
                            "[",
                            "null" };
    write_seed(dir, "empty", empty, G_N_ELEMENTS(empty));
    printf("3 seeds in %s\n", dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    g_log_set_writer_func(cl_fuzz_abort_on_critical, NULL, NULL);
    const char *dir = g_getenv("CL_FUZZ_WRITE_SEEDS");
    if (dir) {
        write_seeds(dir);
        exit(0);
    }
    setup();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Input in;
    input_parse(&in, data, size);
    ClCase *c = make_case(&in);
    export_all(c, &in);
    cl_case_free(c);
    input_clear(&in);
    return 0;
}
