/* report.h - exporting a case (casedb.h) as a PDF (Cairo + Pango, A4 or Letter), a single-file
 * HTML page (images embedded, all text escaped) or JSON (docs/REPORT.md documents the schema),
 * with optional de-identification (deid.h). */
#pragma once

#include <glib.h>

#include "casedb/casedb.h"

G_BEGIN_DECLS

#define CL_REPORT_ERROR (cl_report_error_quark())
typedef enum {
    CL_REPORT_ERROR_WRITE,   /* the output cannot be written (directory, permission, disk full) */
    CL_REPORT_ERROR_INVALID, /* bad options (unknown format, empty case) */
    CL_REPORT_ERROR_RENDER,  /* Cairo / Pango failed */
} ClReportError;
GQuark cl_report_error_quark(void);

typedef enum {
    CL_REPORT_PDF,
    CL_REPORT_HTML,
    CL_REPORT_JSON,
} ClReportFormat;
gboolean cl_report_format_parse(const char *name, ClReportFormat *out); /* "pdf", "html", "json" */

typedef enum {
    CL_PAPER_A4,
    CL_PAPER_LETTER,
} ClPaperSize;
gboolean cl_paper_size_parse(const char *name, ClPaperSize *out); /* "a4", "letter" (any case) */

typedef struct {
    ClReportFormat format;
    ClPaperSize paper; /* PDF only (default A4) */
    /* De-identify everything the report and its images contain (DICOM PS3.15 basic profile,
     * deid.h). Default: on when the case has a DICOM image (cl_report_options_init sets it from
     * the case), off otherwise. */
    gboolean deidentify;
    /* Date shift and UID root are derived from this secret, so re-exports of a case shift
     * consistently; NULL = a per-installation secret kept in the user config dir
     * (g_get_user_config_dir()/changelens/deid-secret, created on first use). */
    const char *deid_secret;
    double heatmap_opacity; /* 0.6 */
    guint max_image_px;     /* longest side of embedded images, 1024 */
    const char *generator;  /* "ChangeLens 0.x" written in the report */
} ClReportOptions;
/* Defaults for this case (deidentify = cl_case_has_dicom(c)). */
void cl_report_options_init(ClReportOptions *o, const ClCase *c);

/* Writes the report of `c` (loaded with CL_CASE_HEATMAP_DATA | CL_CASE_CHECK_FILES) to path,
 * atomically (a temporary file renamed into place: a failed export leaves any old file intact).
 * Images are read from their paths with core/image and shown through their display transform;
 * a missing or changed file is reported in the report (placeholder + its file state), never an
 * error. Each comparison (image i-1 -> i) shows before, after, the heatmap overlay of the latest
 * run and a difference image. warnings (may be NULL) receives char* lines for the user (burned-in
 * annotation flagged, files missing, ...). */
gboolean cl_report_export(const ClCase *c, const ClReportOptions *o, const char *path,
                          GPtrArray *warnings, GError **error);

/* The JSON report (format ignored) as a string, for `case show --json`; NULL + error when the
 * de-identification secret cannot be read or made. */
char *cl_report_to_json(const ClCase *c, const ClReportOptions *o, GPtrArray *warnings,
                        GError **error);

G_END_DECLS
