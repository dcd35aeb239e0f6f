/* heatmap.h - where the model saw change: per-image heat grids from the encoder's outputs, mapped
 * back through the letterbox onto the original image, coloured and blended, written as PNG. */
#pragma once

#include <glib.h>

#include "image/display.h"
#include "model/encoder.h"
#include "image/image.h"
#include "model/preprocess.h"

G_BEGIN_DECLS

typedef enum {
    /* Default: the mean over the encoder's blocks of the SVE module's per-token update norm
     * (docs/MODEL.md §3.4), on the G × G patch grid. It says how much each patch was rewritten
     * from the previous image's state. All zero for the stateless variant. */
    CL_HEATMAP_UPDATE_NORM,
    /* The paper's Δ map (docs/MODEL.md §3.9), on the G/2 × G/2 merger grid: how much the visual
     * tokens differ from encoding the image against itself. Needs want_delta in the encoder. */
    CL_HEATMAP_DELTA,
    /* config.change_head: per patch, the head's probability that it changed (docs/MODEL.md
     * §3.10), on the G × G patch grid; shown on its own scale (max 1), so that a pair without
     * change stays dark. The default wherever the model has the head. */
    CL_HEATMAP_CHANGE,
} ClHeatmapSource;

/* "update_norm", "delta", "change" */
const char *cl_heatmap_source_name(ClHeatmapSource s);
/* The inverse; FALSE for an unknown name. */
gboolean cl_heatmap_source_from_name(const char *name, ClHeatmapSource *out);

/* A heat grid covering the whole model input (padding included): cell (i, j) is the square of
 * side size/width at model pixels [j * size/width, (j + 1) * size/width) × [i ..., ...). */
typedef struct {
    ClHeatmapSource source;
    int image_index; /* the image of the sequence it belongs to (0-based) */
    int width, height;
    float *values; /* (height, width) the raw values, row-major; owned */
    float max;     /* their largest value (0 when all are 0, or none is finite) */
    int layer;     /* the encoder block of an update-norm map, -1: the mean over the blocks
                    * (and every Δ map) */
} ClHeatmap;

/* From one image's encoder output. `depth` is the config's enc_depth (rows of update_norm).
 * NULL + CL_MODEL_ERROR_INPUT when the source is missing (Δ not computed). */
ClHeatmap *cl_heatmap_new_from_encoder(const ClEncoderOutput *enc, int depth,
                                       ClHeatmapSource source, int image_index, GError **error);
/* The update norms of one encoder block (0-based), not their mean. */
ClHeatmap *cl_heatmap_new_from_encoder_layer(const ClEncoderOutput *enc, int depth, int layer,
                                             int image_index, GError **error);
ClHeatmap *cl_heatmap_copy(const ClHeatmap *hm);
void cl_heatmap_free(ClHeatmap *hm);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClHeatmap, cl_heatmap_free)

/* Normalised heat (values / max, in [0, 1]; 0 everywhere when max is 0) on the original image:
 * for each pixel centre, its point on the model input (the letterbox) sampled bilinearly between
 * cell centres, edges clamped. Returns src_height × src_width floats (newly allocated), or NULL
 * when the image is too large for memory. */
float *cl_heatmap_to_image(const ClHeatmap *hm, const ClLetterbox *lb);

/* The colour map: a perceptual black-purple-orange-yellow ramp ("inferno"), 8 control colours
 * interpolated linearly. v is clamped to [0, 1]. */
void cl_heatmap_colour(double v, guint8 rgb[3]);
/* The colour maps the app offers: inferno (the default above), viridis, and a dark-red to yellow
 * ramp; each from 8 control colours, v clamped to [0, 1]. */
typedef enum {
    CL_HEATMAP_INFERNO,
    CL_HEATMAP_VIRIDIS,
    CL_HEATMAP_REDS,
} ClHeatmapColours;
void cl_heatmap_colour_map(ClHeatmapColours map, double v, guint8 rgb[3]);

/* The overlay: the frame's display image (settings s, NULL = its defaults; alpha composited over
 * black) with the coloured heat blended over it, per pixel alpha = opacity × heat (cold areas
 * keep the image). Returns width × height × 3 bytes (RGB, row stride width × 3), newly
 * allocated. lb must be the letterbox the frame was preprocessed with. */
guint8 *cl_heatmap_render_overlay(const ClHeatmap *hm, const ClLetterbox *lb, const ClImage *img,
                                  guint frame, const ClDisplaySettings *s, double opacity,
                                  GError **error);

/* Renders the overlay at the original image's size and writes it as an 8-bit RGB PNG
 * (atomically: a temporary file renamed into place). */
gboolean cl_heatmap_write_png(const ClHeatmap *hm, const ClLetterbox *lb, const ClImage *img,
                              guint frame, const ClDisplaySettings *s, double opacity,
                              const char *path, GError **error);

/* Writes width × height RGB bytes (stride width × 3) as an 8-bit PNG, atomically. */
gboolean cl_png_write_rgb(const char *path, const guint8 *rgb, guint width, guint height,
                          GError **error);

G_END_DECLS
