/* cl-image-view-private.h - ClImageView's instance struct, shared by the widget (cl-image-view.c)
 * with its rendering (cl-image-render.c) and its compare modes (cl-image-compare.c). */
#pragma once

#include "cl-image-view.h"

G_BEGIN_DECLS

/* One level of a mip chain: the texture and the pixels it was made from, so that a part of it
 * can be drawn without the rest. */
typedef struct {
    GdkTexture *texture;
    GBytes *pixels; /* RGBA, stride width * 4 */
    guint width, height;
} ClImageMip;

struct _ClImageView {
    GtkWidget parent_instance;

    ClDocument *document;
    guint frame;
    ClViewport *viewport;
    gulong viewport_notify_id;

    /* The rendered overview: the whole frame through the display transform, box-downsampled when
     * larger than CL_VIEW_MAX_TEXTURE (RGBA, non-premultiplied, stride overview_w * 4). The
     * full-resolution frame is never rendered whole: memory stays bounded by the overview and
     * the crop on screen, whatever the image's size. */
    GCancellable *render_cancellable;
    GBytes *overview;
    guint overview_w, overview_h;
    guint image_width, image_height;
    GdkTexture *texture;        /* of the overview */
    GPtrArray *mips;            /* ClImageMip*: the overview halved again and again (texture first),
                           * so that a view drawn small scales a texture by at most 2× */
    double texture_scale;       /* texture width / image width (1 unless downsampled) */
    ClDisplaySettings settings; /* what the overview was rendered with, for the crops */
    ClDisplayRanges ranges;
    ClDocument *stretch_docs[2]; /* the images the stretch is taken over (0: this frame alone) */
    guint stretch_frames[2];
    guint n_stretch;

    /* Full-resolution crop for zoomed-in drawing, cached while the view stays inside it;
     * rendered off the main thread unless it is small. */
    GdkTexture *detail;
    int detail_x, detail_y, detail_w, detail_h; /* image pixels covered */
    int detail_k;                               /* texels per image pixel (step 1) */
    int detail_step;                            /* image pixels per texel (k 1) */
    GCancellable *detail_cancellable;           /* the crop being rendered */
    int pending_x, pending_y, pending_w, pending_h, pending_k, pending_step;

    /* Comparison with the partner view's image, drawn into this image's rectangle (a partner of
     * another size is stretched onto it: same scene, other resolution). */
    ClImageView *partner;  /* weak: cleared when it goes */
    ClImageView *fit_peer; /* weak: the other view of the pair, for fits */
    gulong partner_texture_id;
    ClCompareMode mode;
    double swipe;        /* divider at this fraction of the widget's width */
    double blend;        /* partner's opacity */
    double flicker_rate; /* image switches per second */
    double tolerance;    /* difference: display levels (0-255) a pixel may differ by */
    guint flicker_id;
    gboolean flicker_phase; /* TRUE: the partner's image shows */
    gboolean dragging_divider;
    GCancellable *diff_cancellable;
    GdkTexture *diff;        /* difference mode's picture (overview resolution) */
    GPtrArray *diff_mips;    /* and its halvings, as mips */
    double changed_fraction; /* of the pixels, over the tolerance; < 0 while unknown */

    /* Alignment: this image is drawn in the frame of the image it was aligned onto; a point u
     * of that frame shows this image's pixel align(u) (register.h's map). */
    gboolean has_align;
    double align[6], align_inv[6];

    /* Ignore regions in this image's pixels (x0, y0, x1, y1 each), drawn hatched; the
     * difference leaves them out. Shift+drag draws one ("mask-drawn"). */
    GArray *masks; /* double */
    gboolean drawing_mask;
    double mask_x0, mask_y0, mask_x1, mask_y1; /* the one being drawn, image pixels */

    /* Heat overlay: a small texture stretched over the model input's square, in this image's
     * normalised coordinates (u, v in [0, 1] cover the image; the letterbox padding lies beyond). */
    GdkTexture *heat;
    double heat_u0, heat_v0, heat_u1, heat_v1;
    double heat_opacity;
    ClHeatmapColours heat_colours;
    gboolean heat_in_frame;  /* the map is of the frame (an aligned model input), not an image */
    double heat_fw, heat_fh; /* the frame's size then */

    /* The measurement (Ctrl+drag a distance, Ctrl+Shift+drag a rectangle), image pixels; its
     * text in the image's units (image/measure.h), NULL when there is none */
    ClViewMeasure measure_kind;
    gboolean measuring; /* a drag is drawing it */
    double meas_x0, meas_y0, meas_x1, meas_y1;
    char *measure_text;

    /* The four corners' texts (patient, study, window/level, frame and zoom), when shown */
    gboolean overlays;

    /* Input state */
    double pointer_x, pointer_y;
    gboolean has_pointer;
    double drag_last_x, drag_last_y;
    double pinch_start_zoom, pinch_anchor_x, pinch_anchor_y;
    double wl_center, wl_width, wl_step; /* window/level drag: where it started, units/pixel */
};

enum {
    PROP_0,
    PROP_DOCUMENT,
    PROP_FRAME,
    PROP_VIEWPORT,
    PROP_TEXTURE,
    PROP_LOADING,
    PROP_COMPARE_MODE,
    PROP_CHANGED_FRACTION,
    PROP_OVERLAYS,
    N_PROPS
};
extern GParamSpec *cl_image_view_properties[N_PROPS];

enum {
    SIGNAL_RENDER_FAILED,
    SIGNAL_DISPLAY_CHANGED,
    SIGNAL_MASK_DRAWN,
    SIGNAL_WINDOW_LEVEL_BEGIN,
    N_SIGNALS
};
extern guint cl_image_view_signals[N_SIGNALS];

/* cl-image-render.c: the overview, its mips, the full-resolution crops, and the image-space
 * transforms every drawn layer goes through. (ox, oy): the image origin on the widget, lz:
 * logical pixels per image pixel, zoom: device pixels per image pixel. */

/* The mip chain of rgba (w × h): the first level, then its halvings (callable in a worker). */
GPtrArray *cl_image_mips_new(GBytes *rgba, guint w, guint h);
/* The mip to draw image_width image pixels at zoom. */
const ClImageMip *cl_image_mips_pick(GPtrArray *mips, guint image_width, double zoom);
/* Appends the part of mip m in sight (image pixels vis) of an image_w × image_h image on rect. */
void cl_image_mip_append(GtkSnapshot *snapshot, const ClImageMip *m, guint image_w, guint image_h,
                         const int vis[4], const graphene_rect_t *rect);
/* Starts rendering the overview with settings (NULL: the frame's defaults), dropping the render
 * in progress; "texture" changes when it is ready. */
void cl_image_view_render(ClImageView *self, const ClDisplaySettings *settings);
/* Drops the rendered pictures: overview, mips, texture and crop. */
void cl_image_view_clear_pictures(ClImageView *self);
/* Drops the full-resolution crop (and the one being rendered). */
void cl_image_view_clear_detail(ClImageView *self);
/* inv: the inverse of the affine map m (x' = m0 + m1 x + m2 y, y' = m3 + m4 x + m5 y). */
void cl_image_affine_invert(const double m[6], double inv[6]);
/* The map from frame coordinates to v's pixels, v drawn in self. */
void cl_image_view_frame_to_image(ClImageView *self, ClImageView *v, double m[6]);
/* Pushes the transform that puts v's pixels on self's screen (pop with gtk_snapshot_restore);
 * vis: v's pixels in sight, x0, y0, x1, y1. */
void cl_image_view_push_image_space(ClImageView *self, ClImageView *v, GtkSnapshot *snapshot,
                                    double ox, double oy, double lz, int vis[4]);
/* vis: this image's pixels in sight when it is drawn straight (no alignment). */
void cl_image_view_screen_pixels(ClImageView *self, double ox, double oy, double lz, int vis[4]);
/* This view's image; the partner's, laid over it through its alignment or stretched onto it. */
void cl_image_view_draw_own(ClImageView *self, GtkSnapshot *snapshot, double ox, double oy,
                            double lz, double zoom);
void cl_image_view_draw_partner(ClImageView *self, GtkSnapshot *snapshot, double ox, double oy,
                                double lz, double zoom);

/* cl-image-compare.c: the partner, the compare modes, the difference, masks and heat overlay. */

/* Drops the difference picture and starts the new one when difference mode can show it. */
void cl_image_view_update_diff(ClImageView *self);
/* Starts or stops the flicker timer for the mode and whether the view is mapped. */
void cl_image_view_update_flicker(ClImageView *self);
/* Draws the picture of the compare mode (CL_COMPARE_NONE: this image alone). */
void cl_image_view_draw_compare(ClImageView *self, GtkSnapshot *snapshot, double ox, double oy,
                                double lz, double zoom);
/* The ignore regions (and the one being drawn), then the heat overlay, over every mode. */
void cl_image_view_draw_masks(ClImageView *self, GtkSnapshot *snapshot, double ox, double oy,
                              double lz);
void cl_image_view_draw_heat(ClImageView *self, GtkSnapshot *snapshot, double ox, double oy,
                             double lz);
/* Lets the partner go and drops the comparison's pictures, timer, masks and heat overlay. */
void cl_image_view_compare_dispose(ClImageView *self);

G_END_DECLS
