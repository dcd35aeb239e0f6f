/* cl-image-view.h - ClImageView: shows one frame of a ClDocument through the display transform,
 * with zoom and pan driven by a (possibly shared) ClViewport. */
#pragma once

#include <gtk/gtk.h>

#include "cl-document.h"
#include "model/heatmap.h"
#include "cl-viewport.h"
#include "image/display.h"

G_BEGIN_DECLS

#define CL_TYPE_IMAGE_VIEW (cl_image_view_get_type())
G_DECLARE_FINAL_TYPE(ClImageView, cl_image_view, CL, IMAGE_VIEW, GtkWidget)

GtkWidget *cl_image_view_new(void);

/* Shows frame of document (NULL clears the view). Rendering runs in a worker thread; the
 * "texture" property changes when the result arrives ("render-failed" with a GError if it
 * cannot be rendered). A newer call drops an older render. */
void cl_image_view_set_image(ClImageView *self, ClDocument *document, guint frame);
ClDocument *cl_image_view_get_document(ClImageView *self); /* (transfer none), may be NULL */
guint cl_image_view_get_frame(ClImageView *self);

/* The view follows viewport (a new one is created when NULL). Views sharing one are linked. */
void cl_image_view_set_viewport(ClImageView *self, ClViewport *viewport);
ClViewport *cl_image_view_get_viewport(ClImageView *self); /* (transfer none) */

/* The rendered frame at its display resolution (NULL while none is ready). Large images get a
 * downsampled overview texture here; full-resolution detail is drawn when zoomed in. */
GdkTexture *cl_image_view_get_texture(ClImageView *self);
gboolean cl_image_view_get_loading(ClImageView *self);
/* Size in image pixels of what is shown (0 × 0 when nothing is). */
void cl_image_view_get_image_size(ClImageView *self, guint *width, guint *height);

/* What the pointer and keyboard do, callable directly (widget coordinates, logical pixels). */
void cl_image_view_zoom_at(ClImageView *self, double factor, double x, double y);
void cl_image_view_pan_by(ClImageView *self, double dx, double dy);
void cl_image_view_fit(ClImageView *self);
/* The other view of a pair: while both show and share one viewport, a fit shows the whole image
 * in the smaller of the two, so the zoom does not depend on which was laid out last (weak; NULL:
 * none). */
void cl_image_view_set_fit_peer(ClImageView *self, ClImageView *peer);
void cl_image_view_widget_to_image(ClImageView *self, double x, double y, double *image_x,
                                   double *image_y);

/* The display transform (window/level, stretch, bands): the frame's defaults until set. Setting
 * one re-renders off the main thread; the current picture stays until the new one is ready.
 * Dragging with the secondary button sets a window (horizontal: width, vertical: level) and
 * emits "display-changed" so that linked views can follow. get: FALSE while nothing is shown. */
void cl_image_view_set_display(ClImageView *self, const ClDisplaySettings *settings);
/* The images (documents at frames, at most 2) whose pooled values a stretch (min-max, percentile)
 * is taken over, so that views given the same list show one value as one colour; n 0: this
 * view's frame alone. Applies from the next render (set_image, set_display). */
void cl_image_view_set_stretch_images(ClImageView *self, ClDocument *const *docs,
                                      const guint *frames, guint n);
gboolean cl_image_view_get_display(ClImageView *self, ClDisplaySettings *out);

/* Alignment (register.h): this image is drawn in the frame of the image it was aligned onto,
 * where a frame point u shows this image's pixel m(u) (m as ClRegistration.m); NULL clears it.
 * Views comparing with this one (their partner) lay it over theirs through it. */
void cl_image_view_set_alignment(ClImageView *self, const double m[6]);
gboolean cl_image_view_get_alignment(ClImageView *self, double m[6]);

/* Ignore regions: n rectangles (x0, y0, x1, y1) in this image's pixels, copied; drawn over the
 * image, left out of the difference. Shift+drag on the view draws one and emits "mask-drawn"
 * (x0, y0, x1, y1) without adding it: whoever owns the masks sets them. */
void cl_image_view_set_masks(ClImageView *self, const double *rects, guint n);
guint cl_image_view_get_n_masks(ClImageView *self);

/* Measuring: a distance (Ctrl+drag) or a rectangle's values and area (Ctrl+Shift+drag) on this
 * view's image, in its units (image/measure.h: mm, m or px; values in modality units), drawn
 * over the image with its text until another replaces it, the image changes or it is cleared.
 * measure: sets one from image pixel coordinates (what the drag does); get: its text, NULL
 * when there is none (transfer none). Not on an aligned image (its pixels are not the frame's). */
typedef enum {
    CL_VIEW_MEASURE_NONE,
    CL_VIEW_MEASURE_LENGTH,
    CL_VIEW_MEASURE_REGION,
} ClViewMeasure;
void cl_image_view_measure(ClImageView *self, ClViewMeasure kind, double x0, double y0, double x1,
                           double y1);
const char *cl_image_view_get_measurement(ClImageView *self);
void cl_image_view_clear_measurement(ClImageView *self);

/* Corner overlays, as PACS viewers draw them: top left the patient (name, ID), top right the
 * study (date and time, modality, series), bottom left the window (W and L in modality units,
 * or the stretch's; nothing for values shown as the file means them, an 8-bit photograph's),
 * bottom right the frame (k / n) and the zoom. get_overlay_text: a corner's
 * lines (CL_VIEW_TOP_LEFT ...), newly allocated, "" when it has none; computed even while the
 * overlays are hidden. */
typedef enum {
    CL_VIEW_TOP_LEFT,
    CL_VIEW_TOP_RIGHT,
    CL_VIEW_BOTTOM_LEFT,
    CL_VIEW_BOTTOM_RIGHT,
} ClViewCorner;
void cl_image_view_set_overlays(ClImageView *self, gboolean shown);
gboolean cl_image_view_get_overlays(ClImageView *self);
char *cl_image_view_get_overlay_text(ClImageView *self, ClViewCorner corner);

/* ---- comparison: this view's image with its partner's, in this view ----
 * The partner's image is drawn into this image's rectangle (stretched when its size differs:
 * the same scene at another resolution). */
typedef enum {
    CL_COMPARE_NONE,       /* this image alone (side by side puts two views next to each other) */
    CL_COMPARE_SWIPE,      /* the partner's image right of a draggable divider */
    CL_COMPARE_BLEND,      /* the partner's image over this one at an opacity (onion skin) */
    CL_COMPARE_FLICKER,    /* the two alternating at a rate */
    CL_COMPARE_DIFFERENCE, /* pixels differing by more than the tolerance in red over a faded
                            * grey of this image */
} ClCompareMode;

#define CL_VIEW_MIN_FLICKER 0.5 /* switches per second */
#define CL_VIEW_MAX_FLICKER 20.0
#define CL_VIEW_DEFAULT_TOLERANCE 16.0 /* display levels of 255 */

/* The view compared with (weak: cleared when it is destroyed); NULL for none. */
void cl_image_view_set_partner(ClImageView *self, ClImageView *partner);
ClImageView *cl_image_view_get_partner(ClImageView *self);
void cl_image_view_set_compare_mode(ClImageView *self, ClCompareMode mode);
ClCompareMode cl_image_view_get_compare_mode(ClImageView *self);
void cl_image_view_set_swipe_position(ClImageView *self, double fraction); /* of the width */
double cl_image_view_get_swipe_position(ClImageView *self);
void cl_image_view_set_blend(ClImageView *self, double opacity);
void cl_image_view_set_flicker_rate(ClImageView *self, double switches_per_second);
/* Flicker: TRUE while the partner's image is the one shown. */
gboolean cl_image_view_get_showing_partner(ClImageView *self);
/* Difference: a pixel is changed when a channel differs by more than `levels` (of 255) on the
 * display images. The picture is computed off the main thread; "changed-fraction" tells the
 * fraction of changed pixels when it is ready (< 0 until then). */
void cl_image_view_set_tolerance(ClImageView *self, double levels);
double cl_image_view_get_changed_fraction(ClImageView *self);

/* The heat overlay: where the model saw change, for this view's image (hm's letterbox lb maps
 * the model input onto it); copied. NULL clears it. Drawn over every mode at the opacity. */
void cl_image_view_set_heatmap(ClImageView *self, const ClHeatmap *hm, const ClLetterbox *lb);
gboolean cl_image_view_get_has_heatmap(ClImageView *self);
/* TRUE: the heat map's letterbox is of the frame the viewport shows (the model read the later
 * image aligned onto the earlier one), so it is drawn in frame coordinates. */
void cl_image_view_set_heatmap_in_frame(ClImageView *self, gboolean in_frame);
/* The colour map of the heat maps set from now on (default inferno). */
void cl_image_view_set_heatmap_colours(ClImageView *self, ClHeatmapColours colours);
void cl_image_view_set_heatmap_opacity(ClImageView *self, double opacity);

G_END_DECLS
