/* report.c - cl_report_export (report.h): checks the options, prepares the report once (doc.c)
 * and hands it to the PDF, HTML or JSON writer; HTML and JSON are written atomically with
 * g_file_set_contents. */
#include "report/report.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "cl-config.h"
#include "report/doc.h"

G_DEFINE_QUARK(cl - report - error - quark, cl_report_error)

gboolean cl_report_format_parse(const char *name, ClReportFormat *out)
{
    static const struct {
        const char *name;
        ClReportFormat format;
    } names[] = { { "pdf", CL_REPORT_PDF },
                  { "html", CL_REPORT_HTML },
                  { "json", CL_REPORT_JSON } };
    for (guint i = 0; name && i < G_N_ELEMENTS(names); i++)
        if (g_ascii_strcasecmp(name, names[i].name) == 0) {
            *out = names[i].format;
            return TRUE;
        }
    return FALSE;
}

gboolean cl_paper_size_parse(const char *name, ClPaperSize *out)
{
    if (name && g_ascii_strcasecmp(name, "a4") == 0) {
        *out = CL_PAPER_A4;
        return TRUE;
    }
    if (name && g_ascii_strcasecmp(name, "letter") == 0) {
        *out = CL_PAPER_LETTER;
        return TRUE;
    }
    return FALSE;
}

void cl_report_options_init(ClReportOptions *o, const ClCase *c)
{
    g_return_if_fail(o != NULL);
    memset(o, 0, sizeof *o);
    o->format = CL_REPORT_PDF;
    o->paper = CL_PAPER_A4;
    o->deidentify = cl_case_has_dicom(c);
    o->deid_secret = NULL;
    o->heatmap_opacity = 0.6;
    o->max_image_px = 1024;
    o->generator = "ChangeLens " CL_VERSION;
}

/* The view's numbers (the JSON report writes them as they are: JSON has no NaN or infinity). */
static gboolean check_view(const ClReportView *v, GError **error)
{
    if (v && !(v->tolerance >= 0 && v->tolerance <= 255)) {
        g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID,
                    "the difference tolerance must be between 0 and 255 (it is %g)", v->tolerance);
        return FALSE;
    }
    if (v && v->n_masks && !v->masks) {
        g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID,
                    "%u ignore regions are named but none is given", v->n_masks);
        return FALSE;
    }
    for (guint i = 0; v && i < 4 * v->n_masks; i++)
        if (!isfinite(v->masks[i])) {
            g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID,
                        "ignore region %u is not a rectangle of finite numbers", i / 4 + 1);
            return FALSE;
        }
    for (guint i = 0; v && v->aligned && i < 6; i++)
        if (!isfinite(v->align_m[i])) {
            g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID,
                        "the alignment holds a number that is not finite");
            return FALSE;
        }
    return TRUE;
}

static gboolean check(const ClCase *c, const ClReportOptions *o, const char *path, GError **error)
{
    if (!path || !*path) {
        g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID, "no output file given");
        return FALSE;
    }
    if ((guint)o->format > CL_REPORT_JSON) {
        g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID,
                    "unknown report format %d (pdf, html or json)", (int)o->format);
        return FALSE;
    }
    if ((guint)o->paper > CL_PAPER_LETTER) {
        g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID,
                    "unknown paper size %d (a4 or letter)", (int)o->paper);
        return FALSE;
    }
    if (!(o->heatmap_opacity >= 0 && o->heatmap_opacity <= 1)) {
        g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID,
                    "the heatmap opacity must be between 0 and 1 (it is %g)", o->heatmap_opacity);
        return FALSE;
    }
    if (o->max_image_px < 16 || o->max_image_px > 8192) {
        g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID,
                    "the image size limit must be between 16 and 8192 pixels (it is %u)",
                    o->max_image_px);
        return FALSE;
    }
    if (!check_view(o->view, error))
        return FALSE;
    if (!c->images || c->images->len == 0) {
        /* the name as written (a case name need not be UTF-8) */
        g_autofree char *name = g_utf8_make_valid(c->summary.name ? c->summary.name : "", -1);
        g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID,
                    "the case “%s” has no images: there is nothing to report", name);
        return FALSE;
    }
    return TRUE;
}

/* g_file_set_contents writes a temporary file beside path and renames it over path. */
static gboolean write_text(const char *path, const char *text, GError **error)
{
    g_autofree char *dir = g_path_get_dirname(path);
    if (!g_file_test(dir, G_FILE_TEST_IS_DIR)) {
        g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_WRITE,
                    "cannot write the report to %s: the folder %s does not exist", path, dir);
        return FALSE;
    }
    if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
        g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_WRITE,
                    "cannot write the report to %s: it is a folder", path);
        return FALSE;
    }
    g_autoptr(GError) e = NULL;
    if (!g_file_set_contents(path, text, (gssize)strlen(text), &e)) {
        g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_WRITE,
                    "cannot write the report to %s: %s", path, e->message);
        return FALSE;
    }
    return TRUE;
}

static void add_warnings(GPtrArray *warnings, const ClRpDoc *d)
{
    for (guint i = 0; warnings && i < d->warnings->len; i++)
        g_ptr_array_add(warnings, g_strdup(g_ptr_array_index(d->warnings, i)));
}

gboolean cl_report_export(const ClCase *c, const ClReportOptions *o, const char *path,
                          GPtrArray *warnings, GError **error)
{
    g_return_val_if_fail(c != NULL && o != NULL, FALSE);
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    if (!check(c, o, path, error))
        return FALSE;
    /* JSON holds no pictures: its images are not read */
    g_autoptr(ClRpDoc) d = cl_rp_doc_new(c, o, o->format != CL_REPORT_JSON, error);
    if (!d)
        return FALSE;
    gboolean ok;
    if (o->format == CL_REPORT_PDF) {
        ok = cl_rp_write_pdf(d, path, error);
    } else {
        g_autofree char *text = o->format == CL_REPORT_HTML ? cl_rp_html(d) : cl_rp_json(d);
        ok = write_text(path, text, error);
    }
    if (ok)
        add_warnings(warnings, d);
    return ok;
}

char *cl_report_to_json(const ClCase *c, const ClReportOptions *o, GPtrArray *warnings,
                        GError **error)
{
    g_return_val_if_fail(c != NULL && o != NULL, NULL);
    g_return_val_if_fail(error == NULL || *error == NULL, NULL);
    if (!check_view(o->view, error))
        return NULL;
    g_autoptr(ClRpDoc) d = cl_rp_doc_new(c, o, FALSE, error);
    if (!d)
        return NULL;
    add_warnings(warnings, d);
    return cl_rp_json(d);
}
