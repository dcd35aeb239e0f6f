/* render.h - the pictures of a report: an image frame through its display transform, the heatmap
 * overlay and the difference image, at most max_px on a side, as 8-bit RGB; PNG and Cairo
 * surfaces from them. Internal to core/report. */
#pragma once

#include <cairo.h>
#include <glib.h>

#include "casedb/casedb.h"
#include "image/display.h"
#include "image/image.h"

G_BEGIN_DECLS

typedef struct {
    guint8 *rgb; /* width × height × 3, row stride width × 3; NULL: no picture */
    guint width, height;
    char *placeholder; /* when rgb is NULL: why (the file's state, the loader's message) */
} ClRpPicture;

void cl_rp_picture_clear(ClRpPicture *p);

/* The display image of one frame: values in [0, 1], 3 planes (R, G, B) of w × h, resized so the
 * longest side is at most max_px (never enlarged). */
typedef struct {
    float *planes;
    guint w, h;
} ClRpPlanes;

void cl_rp_planes_clear(ClRpPlanes *p);

/* Fits w × h into max_px (aspect kept, at least 1 pixel). */
void cl_rp_fit(guint w, guint h, guint max_px, guint *out_w, guint *out_h);

/* The frame's display image through s (NULL: the frame's defaults), resized to fit max_px. */
gboolean cl_rp_display(const ClImage *img, guint frame, const ClDisplaySettings *s, guint max_px,
                       ClRpPlanes *out, GError **error);

/* Planes -> RGB bytes (rounded). */
void cl_rp_planes_to_picture(const ClRpPlanes *p, ClRpPicture *out);

/* |after − before| of two display images, before resampled to after's size, mean over the
 * three channels, shown grey: black = no difference, white = *max_out (the largest difference,
 * in display levels 0..1; at least 1/255 so that noise-free images stay black). */
void cl_rp_difference(const ClRpPlanes *before, const ClRpPlanes *after, ClRpPicture *out,
                      double *max_out);

/* The difference as the window's difference mode shows it, in the earlier image's frame: per
 * pixel of before (the display planes of a bw × bh image), the later image's pixel that shows the
 * same point (m: ClRegistration.m in full-resolution pixels; NULL: the plain stretch of one image
 * onto the other), nearest; changed when a channel differs by more than tolerance levels of 255.
 * Changed pixels red (brighter = larger), others the earlier image in faded grey, ignore regions
 * (masks: n_masks × (x0, y0, x1, y1) in before's full-resolution pixels) dark blue and not
 * compared, pixels with no later pixel dark slate and not compared. out may be NULL (the numbers
 * only). *changed_fraction: changed / compared (0 when nothing is compared). */
void cl_rp_difference_view(const ClRpPlanes *before, guint bw, guint bh, const ClRpPlanes *after,
                           guint aw, guint ah, const double *m, const double *masks, guint n_masks,
                           double tolerance, ClRpPicture *out, double *changed_fraction,
                           guint64 *compared);

/* The overlay of a stored heat grid on the frame through display s (NULL: its defaults)
 * (heatmap.h: letterbox of the grid's input size over the image), resized to fit max_px. FALSE +
 * error when the grid is unusable. */
gboolean cl_rp_overlay(const ClCaseHeatmap *hm, guint image_index, const ClImage *img, guint frame,
                       const ClDisplaySettings *s, double opacity, guint max_px, ClRpPicture *out,
                       GError **error);

/* A Cairo RGB24 surface holding the picture (NULL when it has none). */
cairo_surface_t *cl_rp_picture_surface(const ClRpPicture *p);
/* The picture as PNG bytes (NULL when it has none or encoding failed). */
GBytes *cl_rp_picture_png(const ClRpPicture *p);

G_END_DECLS
