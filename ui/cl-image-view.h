/* cl-image-view.h - ClImageView: shows one frame of a ClDocument through the display transform,
 * with zoom and pan driven by a (possibly shared) ClViewport. */
#pragma once

#include <gtk/gtk.h>

#include "cl-document.h"
#include "cl-viewport.h"

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
void cl_image_view_widget_to_image(ClImageView *self, double x, double y, double *image_x,
                                   double *image_y);

G_END_DECLS
