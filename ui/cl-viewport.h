/* cl-viewport.h - ClViewport: zoom and centre shown by one or more image views (shared = linked).
 */
#pragma once

#include <glib-object.h>

G_BEGIN_DECLS

#define CL_TYPE_VIEWPORT (cl_viewport_get_type())
G_DECLARE_FINAL_TYPE(ClViewport, cl_viewport, CL, VIEWPORT, GObject)

/* Zoom is in device pixels per image pixel (1.0 = "100 %", one image pixel per screen pixel). */
#define CL_VIEWPORT_MIN_ZOOM (1.0 / 128.0)
#define CL_VIEWPORT_MAX_ZOOM 128.0

ClViewport *cl_viewport_new(void);

double cl_viewport_get_zoom(ClViewport *self);
double cl_viewport_get_center_x(ClViewport *self);
double cl_viewport_get_center_y(ClViewport *self);
/* TRUE while views keep the content fitted as they resize; an explicit zoom or pan clears it. */
gboolean cl_viewport_get_fit(ClViewport *self);

/* Sets zoom (clamped) and centre (image pixel coordinates) in one go; one notify per changed
 * property, emitted together. Clears fit. */
void cl_viewport_set(ClViewport *self, double zoom, double center_x, double center_y);
void cl_viewport_set_zoom(ClViewport *self, double zoom);
void cl_viewport_set_fit(ClViewport *self, gboolean fit);

/* Multiplies the zoom by factor, keeping image point (anchor_x, anchor_y) where it is on screen. */
void cl_viewport_zoom_at(ClViewport *self, double factor, double anchor_x, double anchor_y);
/* Moves the view by (dx, dy) device pixels: content follows the pointer. */
void cl_viewport_pan_by(ClViewport *self, double dx, double dy);

/* Size (image pixels) the views fit to: the union of what they show. 0 × 0 = nothing to fit. */
void cl_viewport_set_content_size(ClViewport *self, guint width, guint height);
void cl_viewport_get_content_size(ClViewport *self, guint *width, guint *height);
/* Applies fit for a view of view_width × view_height device pixels (keeps fit set). */
void cl_viewport_fit_to(ClViewport *self, double view_width, double view_height);

/* Copies zoom, centre, fit and content size from other. */
void cl_viewport_copy_from(ClViewport *self, ClViewport *other);

G_END_DECLS
