/* preprocess.h - a ClImage frame -> the model's input tensor [C, S, S] (docs/MODEL.md §2), and the
 * letterbox geometry that maps the model grid back onto the image (for the heatmaps). */
#pragma once

#include <glib.h>

#include "image/display.h"
#include "image/image.h"

G_BEGIN_DECLS

/* Where the image sits inside the S × S model input. Coordinates are continuous with pixel
 * corners on integers: image point (x, y), 0 <= x <= src_width, lands on model point
 * (off_x + x * scale_x, off_y + y * scale_y). scale_x and scale_y differ only by the rounding of
 * the content size to whole model pixels. */
typedef struct {
    int size;        /* S */
    guint src_width; /* the original frame */
    guint src_height;
    int off_x, off_y;         /* model pixel of the image's left / top edge */
    int content_w, content_h; /* model pixels covered by the image (the rest is padding) */
    double scale_x, scale_y;  /* content_w / src_width, content_h / src_height */
} ClLetterbox;

/* Letterbox of a width × height image into size × size: scaled to fit with the aspect kept
 * (content sizes rounded to whole pixels, at least 1), centred (odd remainders put the extra
 * padding pixel right / below). */
void cl_letterbox_init(ClLetterbox *lb, guint width, guint height, int size);
/* Image point -> model input point, and back (continuous coordinates, see above). */
void cl_letterbox_image_to_model(const ClLetterbox *lb, double x, double y, double *mx, double *my);
void cl_letterbox_model_to_image(const ClLetterbox *lb, double mx, double my, double *x, double *y);

/* Separable resampling of planar float images (c planes of sw × sh) to dw × dh: per axis an
 * area average (box filter with fractional coverage) when that axis shrinks, bilinear with
 * half-pixel centres (edges clamped) when it grows or keeps its size (identity then). */
void cl_preprocess_resize(const float *src, int c, int sw, int sh, float *dst, int dw, int dh);

/* The frame's display values in [0, 1] as 3 planes (R, G, B) of width × height floats (newly
 * allocated): the display transform of core/image/display.h with settings s (NULL: the frame's
 * defaults from cl_display_settings_init — DICOM window/level preset, 16-bit and multi-band
 * stretch), alpha dropped, grey replicated. Values are the 8-bit display levels / 255, so the
 * model sees exactly what the viewer shows (and what 8-bit training images hold). NaN/Inf
 * samples (float "no data") become 0. */
float *cl_preprocess_display(const ClImage *img, guint frame, const ClDisplaySettings *s,
                             GError **error);
/* The settings a frame is shown with: s, or the frame's defaults written to *defaults (s NULL);
 * NULL + error when the image has no such frame. */
const ClDisplaySettings *cl_preprocess_settings(const ClImage *img, guint frame,
                                                const ClDisplaySettings *s,
                                                ClDisplaySettings *defaults, GError **error);
/* The same display values resized to dw × dh (cl_preprocess_resize's filter, the same values as
 * resizing cl_preprocess_display's planes) without the full-size float planes: the horizontal
 * pass reads the 8-bit display render, so a 16384 × 16384 image needs its render and a
 * height × dw intermediate, not 3 GB of floats. */
float *cl_preprocess_display_fit(const ClImage *img, guint frame, const ClDisplaySettings *s,
                                 guint dw, guint dh, GError **error);

/* The model input for one frame: display values (above), to `channels` planes (3: R, G, B;
 * 1: grey images' value, colour images' BT.601 luma), letterboxed into size × size
 * (cl_preprocess_resize for the content), normalised v' = (v - 0.5) / 0.5, padding 0.
 * out: channels * size * size floats, caller-allocated. lb (may be NULL) receives the geometry.
 * FALSE + error for a bad frame, size or channel count. */
gboolean cl_preprocess_image(const ClImage *img, guint frame, const ClDisplaySettings *s, int size,
                             int channels, float *out, ClLetterbox *lb, GError **error);

/* The same for a frame aligned onto another image (register.h): the model input shows the frame
 * of frame_w × frame_h pixels, where frame pixel (x, y) takes this image's pixel m(x, y)
 * (ClRegistration.m), bilinear, mid grey outside it; lb (and the heat maps) then refer to the
 * frame. */
gboolean cl_preprocess_image_aligned(const ClImage *img, guint frame, const ClDisplaySettings *s,
                                     const double m[6], guint frame_w, guint frame_h, int size,
                                     int channels, float *out, ClLetterbox *lb, GError **error);

/* Ignore regions (docs/DESIGN.md §9: masks apply to the model's input too): every model pixel that an
 * image rectangle touches is set to the padding value 0, in every channel, so the model sees the
 * same nothing there in every image. rects: n × (x0, y0, x1, y1) in the frame's pixel
 * coordinates (x0 < x1, y0 < y1; clipped to the image); lb: the frame's letterbox. */
void cl_preprocess_apply_masks(float *pixels, int channels, const ClLetterbox *lb,
                               const double *rects, guint n);

G_END_DECLS
