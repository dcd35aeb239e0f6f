/* cl-compare-view.h - ClCompareView: the two image panes and the mode bar under them. */
#pragma once

#include <gtk/gtk.h>

#include "cl-image-view.h"
#include "model/preprocess.h"

G_BEGIN_DECLS

#define CL_TYPE_COMPARE_VIEW (cl_compare_view_get_type())
G_DECLARE_FINAL_TYPE(ClCompareView, cl_compare_view, CL, COMPARE_VIEW, GtkBox)

/* Two panes side by side (the later image's one hidden when the images are overlaid), each with
 * its caption (name, format and size, the pixel under the pointer). Builder children of type
 * "side" go to the right of the panes behind a divider the user drags (shown while one of them
 * is: a GtkRevealer while it reveals its child), of type "bottom" between them and the mode
 * bar.
 *
 * Properties: "link-views" (one viewport for both views, else one each), "compare-mode"
 * ("side-by-side", "swipe", "blend", "flicker", "difference"), "show-heatmap", "sync-window-level"
 * (linked views follow a window/level drag in either), "zoom" (read-only: the left view's),
 * "side-width" (the side panel's width with its divider, logical pixels; kept as the window
 * resizes, changed by dragging the divider). */

/* index 0 = left (the earlier image), 1 = right (the later one). (transfer none) */
ClImageView *cl_compare_view_get_view(ClCompareView *self, guint index);

/* Shows docs[0] and docs[1] (docs[1] may be NULL: "No second image"), fitted, without masks,
 * alignment or heat map; the presets menu is docs[0]'s. */
void cl_compare_view_show_images(ClCompareView *self, ClDocument *const docs[2],
                                 const guint frames[2]);

gboolean cl_compare_view_get_link_views(ClCompareView *self);
void cl_compare_view_set_link_views(ClCompareView *self, gboolean link_views);
const char *cl_compare_view_get_compare_mode(ClCompareView *self);
/* FALSE for a name that is not a mode (nothing changes). */
gboolean cl_compare_view_set_compare_mode(ClCompareView *self, const char *mode);

/* The difference mode's tolerance (levels of 255; the mode bar's slider), kept in every mode. */
double cl_compare_view_get_tolerance(ClCompareView *self);

/* Zoom on each distinct viewport (one when linked), about its centre; 1:1; fit. */
void cl_compare_view_zoom_by(ClCompareView *self, double factor);
void cl_compare_view_zoom_100(ClCompareView *self);
void cl_compare_view_fit(ClCompareView *self);
double cl_compare_view_get_zoom(ClCompareView *self);

/* Whose values a stretch (min-max, percentile: the default of 16-bit, float and multi-band
 * images) is taken over: "shared" (both images pooled: one value, one colour in both views),
 * "earlier" or "later" (that image's, for both), "each" (each image its own). FALSE for another
 * name. The "stretch" property. */
gboolean cl_compare_view_set_stretch(ClCompareView *self, const char *source);
const char *cl_compare_view_get_stretch(ClCompareView *self);

/* The side panel's width (see "side-width"); set: clamped to what the window leaves. */
int cl_compare_view_get_side_width(ClCompareView *self);
void cl_compare_view_set_side_width(ClCompareView *self, int width);

/* win.display-preset's argument ("default", "minmax", "percentile", "bands:R,G,B", "bands:N",
 * "file:N", "ct:NAME") on both views: each image gets its own defaults, ranges and presets. */
void cl_compare_view_apply_preset(ClCompareView *self, const char *preset);

/* The later image's alignment onto the earlier one (m: cl_image_view_set_alignment's; NULL: none),
 * and the mode bar's words about it (NULL: none). */
void cl_compare_view_set_alignment(ClCompareView *self, const double m[6]);
void cl_compare_view_set_align_status(ClCompareView *self, const char *text);
const char *cl_compare_view_get_align_status(ClCompareView *self);
/* Moves the later image by (dx, dy) pixels of the earlier one from where its alignment (or the
 * plain stretch) puts it. FALSE without two images. */
gboolean cl_compare_view_nudge(ClCompareView *self, int dx, int dy);

/* Ignore regions in the earlier image's pixels (x0 y0 x1 y1 each); the later view gets them
 * through its map. Shift+drag on either view adds one. */
void cl_compare_view_add_mask(ClCompareView *self, double x0, double y0, double x1, double y1);
void cl_compare_view_clear_masks(ClCompareView *self);
const double *cl_compare_view_get_masks(ClCompareView *self, guint *n);
/* The masks as rectangles of the later image (bounding boxes of the mapped corners); newly
 * allocated, n × 4 (at least 4 doubles). */
double *cl_compare_view_masks_for_later(ClCompareView *self);

/* The heat map of the later image (transfer full; NULL: none), the same image's map per encoder
 * block (ClHeatmap*, referenced; NULL or empty: none), its letterbox, and whether it is of the
 * earlier image's frame (an aligned model input). Picks "All blocks" in the layer list. */
void cl_compare_view_set_heatmap(ClCompareView *self, ClHeatmap *heatmap, GPtrArray *layers,
                                 const ClLetterbox *letterbox, gboolean in_frame);
/* The heat map set (NULL: none), its letterbox and whether it is of the earlier image's frame;
 * owned by the view. */
const ClHeatmap *cl_compare_view_get_heatmap(ClCompareView *self, ClLetterbox *letterbox,
                                             gboolean *in_frame);
gboolean cl_compare_view_get_show_heatmap(ClCompareView *self);
void cl_compare_view_set_show_heatmap(ClCompareView *self, gboolean show);
void cl_compare_view_set_heatmap_colours(ClCompareView *self, ClHeatmapColours colours);
guint cl_compare_view_get_n_heat_layers(ClCompareView *self);
void cl_compare_view_set_heat_layer(ClCompareView *self, int layer);
/* Shows map (a sentence's, on the heat map's letterbox) in place of the heat map; NULL: the heat
 * map again. */
void cl_compare_view_show_map(ClCompareView *self, const ClHeatmap *map);

G_END_DECLS
