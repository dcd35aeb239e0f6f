/* report.h - exporting a case (casedb.h) as a PDF (Cairo + Pango, A4 or Letter), a single-file
 * HTML page (images embedded, all text escaped) or JSON (docs/REPORT.md documents the schema),
 * with optional de-identification (deid.h). */
#pragma once

#include <glib.h>

#include "casedb/casedb.h"
#include "image/display.h"

G_BEGIN_DECLS

#define CL_REPORT_ERROR (cl_report_error_quark())
typedef enum {
    CL_REPORT_ERROR_WRITE,   /* the output cannot be written (directory, permission, disk full) */
    CL_REPORT_ERROR_INVALID, /* bad options (unknown format, empty case) */
    CL_REPORT_ERROR_RENDER,  /* Cairo / Pango failed */
    /* a de-identified report with pictures of an image whose pixels may show identifying text
     * (BurnedInAnnotation = YES; ultrasound without the attribute), not confirmed as checked
     * (ClReportOptions.burned_in_checked) */
    CL_REPORT_ERROR_BURNED_IN,
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

/* What the window showed when the report was asked for, so that the report shows the same: the
 * pair on screen, each image's display transform (window/level, stretch, bands), the later image's
 * alignment, the ignore regions, the compare mode, the difference tolerance and the heat map. All
 * pointers are borrowed for the call. docs/REPORT.md says how each is used and recorded. */
typedef struct {
    gint64 before_image_id, after_image_id; /* ClCaseImage ids of the pair shown */
    gboolean has_display[2];                /* display[0]: the earlier image's, [1]: the later's */
    ClDisplaySettings display[2];
    gboolean aligned;         /* the later image was laid over the earlier one through align_m: */
    double align_m[6];        /* earlier-image pixel (x, y) shows later-image pixel m(x, y)
                               * (ClRegistration.m: full-resolution pixels, centres at +0.5) */
    const char *align_status; /* the mode bar's words about it ("Aligned: match 0.84 → 0.99") */
    const double *masks; /* ignore regions: n_masks × (x0, y0, x1, y1), earlier image's pixels */
    guint n_masks;
    const char *compare_mode; /* "side-by-side", "swipe", "blend", "flicker", "difference" */
    double tolerance; /* difference: changed when a channel differs by more (levels of 255) */
    double changed_fraction;    /* the share the window measured (difference mode); < 0: unknown */
    gboolean heatmap_shown;     /* the heat overlay was on */
    const char *heatmap_source; /* the kind of heat map shown ("update_norm", "delta"); NULL: any */
} ClReportView;

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
    /* The person exporting has looked at the pixels of the images that may show identifying text
     * burned into them and found none (or accepts it): without it a de-identified PDF or HTML
     * report of such a case is refused (CL_REPORT_ERROR_BURNED_IN), since de-identification
     * changes metadata and text, never pixels. JSON reports hold no pixels and are not refused.
     * Default FALSE. */
    gboolean burned_in_checked;
    double heatmap_opacity; /* 0.6 */
    guint max_image_px;     /* longest side of embedded images, 1024 */
    const char *generator;  /* "ChangeLens 0.x" written in the report */
    /* The view the report is made from (the app: what the window shows); NULL: every frame with
     * its default display, consecutive pairs only, no tolerance (the command line). */
    const ClReportView *view;
} ClReportOptions;
/* How many of the case's images may show identifying text in their pixels: BurnedInAnnotation
 * YES, or an ultrasound image (Modality US) that does not say. */
guint cl_report_burned_in_images(const ClCase *c);

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
 * de-identification secret cannot be read or made, or when the view's numbers are refused as
 * cl_report_export refuses them (CL_REPORT_ERROR_INVALID: a tolerance out of range, a region or
 * alignment that is not finite). */
char *cl_report_to_json(const ClCase *c, const ClReportOptions *o, GPtrArray *warnings,
                        GError **error);

/* One text a person wrote (a description version not generated by the model, a note, a key-image
 * label, the case name) as de-identification would change it. */
typedef struct {
    char *where;  /* "Description, version 3 (accepted, by Dr Ng)" */
    char *before; /* the text as written */
    char *after;  /* the text in the de-identified report */
} ClReportTextChange;
void cl_report_text_change_free(ClReportTextChange *t);

/* The changes de-identification with these options (o->deidentify is ignored: as if on) would
 * make to what people wrote in the case, for showing them before the export; an empty array when
 * it changes none. NULL + error when the secret cannot be read or made. */
GPtrArray *cl_report_deid_text_changes(const ClCase *c, const ClReportOptions *o, GError **error);

G_END_DECLS
