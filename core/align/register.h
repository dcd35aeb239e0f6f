/* register.h - automatic alignment of one image onto another (docs/DESIGN.md §9 (table stake 5)): a
 * translation found by exhaustive normalised cross-correlation on a coarse level, refined by an
 * intensity-based Gauss-Newton optimiser (Lucas-Kanade, forward additive) of a rigid or affine
 * transform over a pyramid, with the normalised cross-correlation on the overlap as the quality
 * figure the user sees. Works on the display images (defaults of each frame), so a DICOM pair
 * and an RGB pair are aligned alike. */
#pragma once

#include <gio/gio.h>

#include "image/image.h"

G_BEGIN_DECLS

typedef enum {
    CL_REGISTER_TRANSLATION, /* shift only */
    CL_REGISTER_RIGID,       /* shift and rotation (and the images' size ratio) */
    CL_REGISTER_AFFINE,      /* the general 2-D affine map */
} ClRegisterModel;

/* The map from a pixel of the fixed image to the moving image's pixel that shows the same
 * point: mx = m[0] + m[1] x + m[2] y, my = m[3] + m[4] x + m[5] y (full-resolution pixel
 * coordinates, pixel centres at +0.5). */
typedef struct {
    double m[6];
    double quality;    /* normalised cross-correlation on the overlap after alignment, -1..1 */
    double before;     /* the same for the images stretched onto each other, before alignment */
    double overlap;    /* fraction of the fixed image whose point lies inside the moving image */
    gboolean improved; /* FALSE when alignment did not beat the stretched images (m is then the
                        * plain stretch) */
} ClRegistration;

/* The stretch that lays the moving image over the fixed one (what the views do unaligned). */
void cl_registration_identity(ClRegistration *r, guint fixed_w, guint fixed_h, guint moving_w,
                              guint moving_h);
/* Applies r to a fixed-image point. */
void cl_registration_apply(const ClRegistration *r, double x, double y, double *mx, double *my);

/* Aligns frame `mf` of `moving` onto frame `ff` of `fixed`. FALSE + error for a bad frame, no
 * memory or G_IO_ERROR_CANCELLED. */
gboolean cl_register_images(const ClImage *fixed, guint ff, const ClImage *moving, guint mf,
                            ClRegisterModel model, ClRegistration *out, GCancellable *cancellable,
                            GError **error);

G_END_DECLS
