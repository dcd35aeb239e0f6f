/* display.h - the display transform: original values -> 8-bit RGBA for the screen. */
#pragma once

#include <gio/gio.h>

#include "image/image.h"

G_BEGIN_DECLS

typedef enum {
    CL_DISPLAY_AUTO = 0,   /* resolved by cl_display_settings_init(): see there */
    CL_DISPLAY_WINDOW,     /* linear window/level (DICOM PS3.3 C.11.2.1.2) in modality units */
    CL_DISPLAY_VOI_LUT,    /* a DICOM VOI LUT from the file */
    CL_DISPLAY_MINMAX,     /* stretch the frame's min..max */
    CL_DISPLAY_PERCENTILE, /* stretch the low..high percentiles (default 2..98 %) */
    CL_DISPLAY_FULL_RANGE, /* 0..2^bits-1 (integers) or 0..1 (float): values as the file means them */
} ClDisplayMode;

typedef struct {
    ClDisplayMode mode;
    double center, width; /* CL_DISPLAY_WINDOW, in modality units */
    guint voi_lut;        /* CL_DISPLAY_VOI_LUT: index into img->voi_luts */
    double low_pct;       /* CL_DISPLAY_PERCENTILE */
    double high_pct;
    int bands[3];      /* channel shown as R, G, B; all three equal for grey; -1 = black */
    gboolean per_band; /* stretch each band on its own (else one range over the three) */
    gboolean invert;   /* MONOCHROME1: applied after the VOI step */
} ClDisplaySettings;

/* Sensible defaults for a frame: DICOM -> the file's first window preset, else its first VOI LUT,
 * else a modality default (CT: soft tissue 40/400; others: min..max), inverted for MONOCHROME1;
 * 8-bit integer images -> full range; 16-bit, 32-bit and float -> 2–98 % percentile stretch;
 * multi-band -> bands 0,1,2 (or 0 for grey), RGB(A) -> R,G,B. */
void cl_display_settings_init(ClDisplaySettings *s, const ClImage *img, guint frame);

/* The window (center/width, modality units) that settings s amount to for this frame, so the UI
 * can start a window/level drag from any mode. Returns FALSE for a VOI LUT. */
gboolean cl_display_effective_window(const ClImage *img, guint frame, const ClDisplaySettings *s,
                                     double *center, double *width);

/* Renders frame to 8-bit RGBA (non-premultiplied, row stride = width*4). Returns a new buffer of
 * width*height*4 bytes, or NULL with error (frame or band out of range). Alpha comes from the
 * image's alpha channel when it has one, else 255. Always computed from the original values. */
guint8 *cl_display_render_rgba(const ClImage *img, guint frame, const ClDisplaySettings *s,
                               GError **error);

/* The low/high values each output colour's stretch maps to 0 and 1 (for the stretch modes; unused
 * by a window or a VOI LUT), resolved once so that many region renders of one frame agree and
 * do not recompute percentiles. */
typedef struct {
    double lo[3], hi[3];
} ClDisplayRanges;
void cl_display_resolve_ranges(const ClImage *img, guint frame, const ClDisplaySettings *s,
                               ClDisplayRanges *ranges);

/* The stretch of a comparison: the ranges of cl_display_resolve_ranges() taken over the pooled
 * values (modality units) of frames[i] of every imgs[i] that has the bands s shows, so that one
 * value shows as one colour in each of them. Only the stretch modes (min-max, percentile) pool;
 * other modes, and n 1, resolve imgs[0] alone. */
void cl_display_resolve_ranges_shared(const ClImage *const *imgs, const guint *frames, guint n,
                                      const ClDisplaySettings *s, ClDisplayRanges *ranges);

/* Renders the rectangle (x, y, w, h) of the frame, each step × step block box-averaged (on the
 * 8-bit display values) into one output pixel — step 1 is full resolution — into a new
 * ceil(w / step) × ceil(h / step) RGBA buffer (stride out_w * 4). ranges may be NULL (resolved
 * here). NULL + error for a rectangle outside the image, a bad frame or band, no memory, or
 * G_IO_ERROR_CANCELLED (checked every row). Memory is bounded by the output, never the frame. */
guint8 *cl_display_render_rgba_region(const ClImage *img, guint frame, const ClDisplaySettings *s,
                                      const ClDisplayRanges *ranges, guint x, guint y, guint w,
                                      guint h, guint step, guint *out_w, guint *out_h,
                                      GCancellable *cancellable, GError **error);

/* Maps one modality value to 0..1 under s (the grey pipeline: VOI then inversion), for tests and
 * for the pixel readout. Percentile/min-max ranges must be resolved first: see below. */
double cl_display_map_value(const ClImage *img, const ClDisplaySettings *s, double modality_value,
                            double lo, double hi);

/* The low/high modality values a stretch mode maps to 0 and 1 for one channel. */
void cl_display_channel_range(const ClImage *img, guint frame, guint channel,
                              const ClDisplaySettings *s, double *lo, double *hi);

/* The pointer readout at image point (x, y) of a frame: the pixel, its place in the world
 * (millimetres from PixelSpacing, map coordinates from a GeoTIFF transform) and its values in
 * modality units (rescale applied, the DICOM rescale type as unit), e.g.
 * "x 120 y 88 (84.0, 61.6 mm) · 1023 HU". NULL outside the image. */
char *cl_display_pixel_readout(const ClImage *img, guint frame, double x, double y);

G_END_DECLS
