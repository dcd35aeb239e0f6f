/* doc.h - what a report shows, prepared once for the three writers: a cleaned copy of the case
 * (valid UTF-8, no control characters; de-identified when asked), its pictures, the comparisons
 * and the warnings. Internal to core/report. */
#pragma once

#include <json-glib/json-glib.h>

#include "casedb/casedb.h"
#include "report/render.h"
#include "report/report.h"

G_BEGIN_DECLS

typedef struct {
    const ClCaseImage *img;     /* in doc->c */
    char *name;                 /* the file name shown: its basename, or image-N.ext */
    char *title;                /* "Image 2 (name)" */
    ClRpPicture view;           /* the display image, or a placeholder */
    gboolean burned_in;         /* BurnedInAnnotation = YES */
    char *key_labels;           /* NULL unless marked as a key image: the labels, "; "-joined */
    JsonObject *meta;           /* its metadata (de-identified), owned; never NULL */
    ClDisplaySettings display;  /* the display transform its picture is drawn with */
    gboolean has_display;       /* display is known (the image was read, or the view gave it) */
    const char *display_source; /* "screen" (the view's), "screen-series" (the view's for an
                                  * image of the same series not on screen) or "default" */
    char *display_words;        /* "window 1500 / −600", NULL until known */
} ClRpImage;

typedef struct {
    guint before, after;          /* indices into doc->images */
    const ClCaseHeatmap *heatmap; /* of the latest run for the after image, or NULL */
    ClRpPicture overlay;          /* picture or placeholder */
    ClRpPicture diff;
    double diff_max; /* display levels 0..1; < 0 when there is no difference image */
    /* the pair on screen (o.view): its difference drawn as the window's difference mode with the
     * alignment, ignore regions and tolerance, and the share of changed pixels */
    gboolean on_screen;
    gboolean aligned;
    double changed_fraction; /* of the compared pixels; < 0: not measured */
    guint64 compared;        /* pixels compared (not masked, inside both images) */
} ClRpComparison;

typedef struct {
    ClCase *c;         /* cleaned (and de-identified) copy */
    ClReportOptions o; /* generator and secret not kept */
    gboolean deidentified;
    gboolean pictures; /* the images were read (PDF, HTML) */
    char *generator;
    char *generated_at;                 /* ISO 8601 UTC; shifted with the rest when de-identified */
    GPtrArray *images;                  /* ClRpImage* by position */
    GPtrArray *comparisons;             /* ClRpComparison* */
    GPtrArray *warnings;                /* char* */
    const ClCaseDescVersion *current;   /* NULL when the case has no description */
    const ClCaseDescVersion *generated; /* version 1 when its text differs from the current one */
    const ClCaseRun *latest_run;
    const ClReportView *view; /* = &view_copy when o.view is given (its texts cleaned as the
                               * case's are, masks borrowed for the doc's life); NULL: none */
    ClReportView view_copy;
    GArray *desc_altered; /* gboolean per d->c->descriptions: de-identification changed
                                 * its text */
    int day_shift;        /* de-identified: the dates' shift in days (< 0), else 0 */
} ClRpDoc;

/* pictures FALSE: no image is read (the JSON report): no views, overlays or differences, and
 * only the file states give warnings. */
ClRpDoc *cl_rp_doc_new(const ClCase *c, const ClReportOptions *o, gboolean pictures,
                       GError **error);
void cl_rp_doc_free(ClRpDoc *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClRpDoc, cl_rp_doc_free)

/* Text helpers shared by the writers. */
const ClRpImage *cl_rp_doc_image_by_id(const ClRpDoc *d, gint64 image_id);
char *cl_rp_timings(const ClCaseRun *r);              /* "preprocess 1.0 ms, encode ..." */
char *cl_rp_short(const char *text, guint max_chars); /* first line, cut with … */
/* text with a U+200B ZERO WIDTH SPACE every 64 characters of a longer run without a space,
 * hyphen or slash (for Pango's wrapping, quadratic inside a word); NULL when it has no such run */
char *cl_rp_with_breaks(const char *text);
char *cl_rp_compact_json(const char *json); /* one line; the text itself if not JSON */
const char *cl_rp_or(const char *s, const char *fallback); /* s when not empty */
/* "1 → 2: update_norm heatmap of run 3 (grid 10 × 10)" style captions. */
/* "Before: image-1.dcm, acquired …", key-image and burned-in lines added */
char *cl_rp_image_caption(const ClRpImage *ri, const char *role);
char *cl_rp_overlay_caption(const ClRpDoc *d, const ClRpComparison *cmp);
char *cl_rp_diff_caption(const ClRpDoc *d, const ClRpComparison *cmp);
/* The reviewer line: "Accepted by X on DATE", "Draft, last edited by X on DATE". */
char *cl_rp_review_line(const ClRpDoc *d);
/* Under the current description when de-identification changed its text: says so (NULL when
 * it did not). */
char *cl_rp_altered_line(const ClRpDoc *d);
/* The view line: "As on screen: window …; aligned (…); difference mode, tolerance 16/255: 0.91 %
 * of the compared pixels differ; 2 ignore regions; heat map update_norm shown" (NULL: no view). */
char *cl_rp_view_line(const ClRpDoc *d);
/* "window 1500 / −600" style words for a display transform. */
char *cl_rp_display_words(const ClDisplaySettings *s);

/* Writers: each writes a complete file atomically (CL_REPORT_ERROR_WRITE on failure, leaving
 * any old file as it was). */
gboolean cl_rp_write_pdf(const ClRpDoc *d, const char *path, GError **error);
char *cl_rp_html(const ClRpDoc *d);
char *cl_rp_json(const ClRpDoc *d);

G_END_DECLS
