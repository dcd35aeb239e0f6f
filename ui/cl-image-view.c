/* cl-image-view.c - ClImageView: one image frame on screen, zoomed and panned via a ClViewport. */
#include "cl-image-view.h"

#include <math.h>
#include <string.h>

#include "image/display.h"
#include "worker/worker.h"
#include "model/heatmap.h"

/* Above this many pixels per side the overview texture is box-downsampled by a power of two: GL
 * drivers cap texture sizes, a 10k × 10k RGBA texture would cost 400 MB just to be shown at
 * 10 %, and the renderer converts or uploads a new texture on the main thread (a 4096² one took
 * about 100 ms under Xvfb, a frame-long stall). Views zoomed in past the overview draw crops of
 * the visible part instead, rendered at the zoom's own power-of-two level. */
#define CL_VIEW_MAX_TEXTURE 2048

/* GTK 4.8 has no per-node scaling filter (GskTextureScaleNode is 4.10) and scales textures
 * linearly. Past this zoom the view upscales the visible crop itself, nearest neighbour, so
 * that image pixels stay sharp squares. */
#define CL_VIEW_NEAREST_ZOOM 2.0

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
    GdkTexture *texture;  /* of the overview */
    GPtrArray *mips;      /* Mip*: the overview halved again and again (texture first),
                           * so that a view drawn small scales a texture by at most 2× */
    double texture_scale; /* texture width / image width (1 unless downsampled) */
    ClDisplaySettings settings; /* what the overview was rendered with, for the crops */
    ClDisplayRanges ranges;

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
    ClImageView *partner; /* weak: cleared when it goes */
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
    gboolean heat_in_frame; /* the map is of the frame (an aligned model input), not an image */
    double heat_fw, heat_fh; /* the frame's size then */

    /* Input state */
    double pointer_x, pointer_y;
    gboolean has_pointer;
    double drag_last_x, drag_last_y;
    double pinch_start_zoom, pinch_anchor_x, pinch_anchor_y;
    double wl_center, wl_width, wl_step; /* window/level drag: where it started, units/pixel */
};

G_DEFINE_FINAL_TYPE(ClImageView, cl_image_view, GTK_TYPE_WIDGET)

enum {
    PROP_0,
    PROP_DOCUMENT,
    PROP_FRAME,
    PROP_VIEWPORT,
    PROP_TEXTURE,
    PROP_LOADING,
    PROP_COMPARE_MODE,
    PROP_CHANGED_FRACTION,
    N_PROPS
};
static GParamSpec *properties[N_PROPS];

enum { SIGNAL_RENDER_FAILED, SIGNAL_DISPLAY_CHANGED, SIGNAL_MASK_DRAWN, N_SIGNALS };
static guint signals[N_SIGNALS];

/* ---- rendering worker ---- */

typedef struct {
    ClDocument *document;
    guint frame;
    gboolean has_settings; /* else the frame's defaults */
    ClDisplaySettings settings;
} RenderJob;

typedef struct {
    GBytes *overview;
    guint overview_width, overview_height;
    GPtrArray *mips;
    ClDisplaySettings settings;
    ClDisplayRanges ranges;
} RenderResult;

static void render_job_free(RenderJob *job)
{
    g_clear_object(&job->document);
    g_free(job);
}

static void render_result_free(RenderResult *res)
{
    g_clear_pointer(&res->overview, g_bytes_unref);
    g_clear_pointer(&res->mips, g_ptr_array_unref);
    g_free(res);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC(RenderResult, render_result_free)

/* The overview's step: the power of two that brings both sides within CL_VIEW_MAX_TEXTURE. */
static guint overview_step(guint width, guint height)
{
    guint f = 1;
    while (width / f > CL_VIEW_MAX_TEXTURE || height / f > CL_VIEW_MAX_TEXTURE)
        f *= 2;
    return f;
}

/* rgba (w × h) with each 2 × 2 block averaged: ceil(w/2) × ceil(h/2). */
static guint8 *halve_rgba(const guint8 *src, guint w, guint h, guint *ow, guint *oh)
{
    *ow = (w + 1) / 2, *oh = (h + 1) / 2;
    guint8 *out = g_try_malloc((gsize)*ow * *oh * 4);
    if (!out)
        return NULL;
    for (guint y = 0; y < *oh; y++)
        for (guint x = 0; x < *ow; x++)
            for (int c = 0; c < 4; c++) {
                guint sum = 0, n = 0;
                for (guint dy = 0; dy < 2 && 2 * y + dy < h; dy++)
                    for (guint dx = 0; dx < 2 && 2 * x + dx < w; dx++)
                        sum += src[((gsize)(2 * y + dy) * w + 2 * x + dx) * 4 + c], n++;
                out[((gsize)y * *ow + x) * 4 + c] = (guint8)((sum + n / 2) / n);
            }
    return out;
}

/* One level of a mip chain: the texture and the pixels it was made from, so that a part of it
 * can be drawn without the rest. */
typedef struct {
    GdkTexture *texture;
    GBytes *pixels; /* RGBA, stride width * 4 */
    guint width, height;
} Mip;

static void mip_free(Mip *m)
{
    g_clear_object(&m->texture);
    g_clear_pointer(&m->pixels, g_bytes_unref);
    g_free(m);
}

static Mip *mip_new(GBytes *pixels, guint w, guint h)
{
    Mip *m = g_new0(Mip, 1);
    m->pixels = g_bytes_ref(pixels);
    m->width = w, m->height = h;
    m->texture = gdk_memory_texture_new((int)w, (int)h, GDK_MEMORY_R8G8B8A8, pixels, (gsize)w * 4);
    return m;
}

/* The first level for rgba, then its halvings down to MIP_MIN a side (made in a worker: the
 * textures are immutable and only drawn on the main thread). */
#define MIP_MIN 128
static GPtrArray *make_mips(GBytes *rgba, guint w, guint h)
{
    GPtrArray *mips = g_ptr_array_new_with_free_func((GDestroyNotify)mip_free);
    g_ptr_array_add(mips, mip_new(rgba, w, h));
    g_autoptr(GBytes) level = g_bytes_ref(rgba);
    while (w > MIP_MIN || h > MIP_MIN) {
        guint ow, oh;
        guint8 *half = halve_rgba(g_bytes_get_data(level, NULL), w, h, &ow, &oh);
        if (!half)
            break;
        g_bytes_unref(level);
        level = g_bytes_new_take(half, (gsize)ow * oh * 4);
        w = ow, h = oh;
        g_ptr_array_add(mips, mip_new(level, w, h));
    }
    return mips;
}

/* The mip to draw `image_width` image pixels at zoom (device pixels per image pixel): the
 * smallest that still has a texel per screen pixel. */
static const Mip *pick_mip(GPtrArray *mips, guint image_width, double zoom)
{
    guint best = 0;
    for (guint i = 1; i < mips->len; i++)
        if (((Mip *)mips->pdata[i])->width >= image_width * zoom)
            best = i;
    return mips->pdata[best];
}

/* Appends mip m of an image_w × image_h image whose whole lands on `rect`, of which only image
 * pixels vis = [x0, y0, x1, y1) are in sight. When that is a small part of the mip, only the
 * texels under it (and one more each side, for the filter) are drawn: a texture node costs
 * GTK's cairo renderer a copy of the whole texture every frame, about 18 ms for a 2048² level,
 * which zoomed in would be spent on texels off screen. The part shares the mip's pixels. */
static void append_mip(GtkSnapshot *snapshot, const Mip *m, guint image_w, guint image_h,
                       const int vis[4], const graphene_rect_t *rect)
{
    if (!image_w || !image_h)
        return;
    double fx = (double)m->width / image_w, fy = (double)m->height / image_h;
    int tx0 = CLAMP((int)floor(vis[0] * fx) - 1, 0, (int)m->width);
    int ty0 = CLAMP((int)floor(vis[1] * fy) - 1, 0, (int)m->height);
    int tx1 = CLAMP((int)ceil(vis[2] * fx) + 1, 0, (int)m->width);
    int ty1 = CLAMP((int)ceil(vis[3] * fy) + 1, 0, (int)m->height);
    if (tx1 <= tx0 || ty1 <= ty0)
        return; /* out of sight */
    gint64 part = (gint64)(tx1 - tx0) * (ty1 - ty0), whole = (gint64)m->width * m->height;
    if (part * 2 > whole) {
        gtk_snapshot_append_texture(snapshot, m->texture, rect);
        return;
    }
    gsize stride = (gsize)m->width * 4;
    gsize offset = (gsize)ty0 * stride + (gsize)tx0 * 4;
    gsize size = (gsize)(ty1 - ty0 - 1) * stride + (gsize)(tx1 - tx0) * 4;
    g_autoptr(GBytes) bytes = g_bytes_new_from_bytes(m->pixels, offset, size);
    g_autoptr(GdkTexture) t = gdk_memory_texture_new(tx1 - tx0, ty1 - ty0, GDK_MEMORY_R8G8B8A8,
                                                     bytes, stride);
    float sx = rect->size.width / (float)m->width, sy = rect->size.height / (float)m->height;
    gtk_snapshot_append_texture(
        snapshot, t,
        &GRAPHENE_RECT_INIT(rect->origin.x + (float)tx0 * sx, rect->origin.y + (float)ty0 * sy,
                            (float)(tx1 - tx0) * sx, (float)(ty1 - ty0) * sy));
}

static void render_thread(GTask *task, gpointer source, gpointer task_data,
                          GCancellable *cancellable)
{
    cl_worker_thread_background();
    RenderJob *job = task_data;
    const ClImage *img = cl_document_get_image(job->document);
    g_autoptr(RenderResult) res = g_new0(RenderResult, 1);
    if (job->has_settings)
        res->settings = job->settings;
    else
        cl_display_settings_init(&res->settings, img, job->frame);
    cl_display_resolve_ranges(img, job->frame, &res->settings, &res->ranges);
    GError *error = NULL;
    guint8 *rgba = cl_display_render_rgba_region(
        img, job->frame, &res->settings, &res->ranges, 0, 0, img->width, img->height,
        overview_step(img->width, img->height), &res->overview_width, &res->overview_height,
        cancellable, &error);
    if (!rgba) {
        g_task_return_error(task, error);
        return;
    }
    res->overview = g_bytes_new_take(rgba, (gsize)res->overview_width * res->overview_height * 4);
    res->mips = make_mips(res->overview, res->overview_width, res->overview_height);
    if (g_task_return_error_if_cancelled(task))
        return;
    g_task_return_pointer(task, g_steal_pointer(&res), (GDestroyNotify)render_result_free);
}

static void update_diff(ClImageView *self);
static void frame_to_image(ClImageView *self, ClImageView *v, double m[6]);
static void invert_affine(const double m[6], double inv[6]);

static void clear_detail(ClImageView *self)
{
    g_clear_object(&self->detail);
    self->detail_w = self->detail_h = 0;
    if (self->detail_cancellable) {
        g_cancellable_cancel(self->detail_cancellable);
        g_clear_object(&self->detail_cancellable);
    }
}

static void render_done(GObject *source, GAsyncResult *result, gpointer user_data)
{
    GTask *task = G_TASK(result);
    g_autoptr(GError) error = NULL;
    g_autoptr(RenderResult) res = g_task_propagate_pointer(task, &error);
    /* A render replaced by a newer one (or by disposal) is dropped. */
    if (g_cancellable_is_cancelled(g_task_get_cancellable(task)))
        return;
    ClImageView *self = CL_IMAGE_VIEW(source);
    g_clear_object(&self->render_cancellable);

    if (!res) {
        g_signal_emit(self, signals[SIGNAL_RENDER_FAILED], 0, error);
    } else {
        RenderJob *job = g_task_get_task_data(task);
        const ClImage *img = cl_document_get_image(job->document);
        /* a new display transform replaces the pictures of the old one */
        g_clear_object(&self->texture);
        g_clear_pointer(&self->mips, g_ptr_array_unref);
        g_clear_pointer(&self->overview, g_bytes_unref);
        clear_detail(self);
        self->image_width = img->width;
        self->image_height = img->height;
        self->settings = res->settings;
        self->ranges = res->ranges;
        self->overview = g_steal_pointer(&res->overview);
        self->overview_w = res->overview_width;
        self->overview_h = res->overview_height;
        self->mips = g_steal_pointer(&res->mips);
        self->texture = g_object_ref(((Mip *)self->mips->pdata[0])->texture);
        self->texture_scale = (double)self->overview_w / img->width;
        if (cl_viewport_get_fit(self->viewport))
            cl_image_view_fit(self);
    }
    update_diff(self);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_TEXTURE]);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_LOADING]);
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

/* ---- public API ---- */

GtkWidget *cl_image_view_new(void)
{
    return g_object_new(CL_TYPE_IMAGE_VIEW, NULL);
}

void cl_image_view_set_image(ClImageView *self, ClDocument *document, guint frame)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    g_return_if_fail(document == NULL || CL_IS_DOCUMENT(document));
    g_return_if_fail(document == NULL || frame < cl_document_get_n_frames(document));

    if (self->render_cancellable) {
        g_cancellable_cancel(self->render_cancellable);
        g_clear_object(&self->render_cancellable);
    }
    g_set_object(&self->document, document);
    self->frame = frame;
    g_clear_object(&self->texture);
    g_clear_pointer(&self->mips, g_ptr_array_unref);
    g_clear_pointer(&self->overview, g_bytes_unref);
    self->image_width = self->image_height = 0;
    clear_detail(self);

    if (document) {
        self->render_cancellable = g_cancellable_new();
        RenderJob *job = g_new0(RenderJob, 1);
        job->document = g_object_ref(document);
        job->frame = frame;
        g_autoptr(GTask) task = g_task_new(self, self->render_cancellable, render_done, NULL);
        g_task_set_source_tag(task, cl_image_view_set_image);
        g_task_set_task_data(task, job, (GDestroyNotify)render_job_free);
        g_task_run_in_thread(task, render_thread);
    }
    g_object_freeze_notify(G_OBJECT(self));
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_DOCUMENT]);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_FRAME]);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_TEXTURE]);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_LOADING]);
    g_object_thaw_notify(G_OBJECT(self));
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

void cl_image_view_set_masks(ClImageView *self, const double *rects, guint n)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    g_array_set_size(self->masks, 0);
    if (n)
        g_array_append_vals(self->masks, rects, n * 4);
    update_diff(self);
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

guint cl_image_view_get_n_masks(ClImageView *self)
{
    g_return_val_if_fail(CL_IS_IMAGE_VIEW(self), 0);
    return self->masks->len / 4;
}

void cl_image_view_set_alignment(ClImageView *self, const double m[6])
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    self->has_align = m != NULL;
    if (m) {
        memcpy(self->align, m, sizeof self->align);
        invert_affine(self->align, self->align_inv);
    }
    clear_detail(self);
    gtk_widget_queue_draw(GTK_WIDGET(self));
    /* views showing this one as their partner redraw and recompute their difference */
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_TEXTURE]);
}

gboolean cl_image_view_get_alignment(ClImageView *self, double m[6])
{
    g_return_val_if_fail(CL_IS_IMAGE_VIEW(self), FALSE);
    if (self->has_align && m)
        memcpy(m, self->align, sizeof self->align);
    return self->has_align;
}

void cl_image_view_set_display(ClImageView *self, const ClDisplaySettings *settings)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    g_return_if_fail(settings != NULL);
    if (!self->document)
        return;
    /* the current picture stays until the new one is ready: no flash while dragging */
    if (self->render_cancellable) {
        g_cancellable_cancel(self->render_cancellable);
        g_clear_object(&self->render_cancellable);
    }
    self->settings = *settings;
    self->render_cancellable = g_cancellable_new();
    RenderJob *job = g_new0(RenderJob, 1);
    job->document = g_object_ref(self->document);
    job->frame = self->frame;
    job->has_settings = TRUE;
    job->settings = *settings;
    g_autoptr(GTask) task = g_task_new(self, self->render_cancellable, render_done, NULL);
    g_task_set_source_tag(task, cl_image_view_set_image);
    g_task_set_task_data(task, job, (GDestroyNotify)render_job_free);
    g_task_run_in_thread(task, render_thread);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_LOADING]);
}

gboolean cl_image_view_get_display(ClImageView *self, ClDisplaySettings *out)
{
    g_return_val_if_fail(CL_IS_IMAGE_VIEW(self), FALSE);
    if (!self->document || !self->mips)
        return FALSE;
    *out = self->settings;
    return TRUE;
}

ClDocument *cl_image_view_get_document(ClImageView *self)
{
    g_return_val_if_fail(CL_IS_IMAGE_VIEW(self), NULL);
    return self->document;
}

guint cl_image_view_get_frame(ClImageView *self)
{
    g_return_val_if_fail(CL_IS_IMAGE_VIEW(self), 0);
    return self->frame;
}

GdkTexture *cl_image_view_get_texture(ClImageView *self)
{
    g_return_val_if_fail(CL_IS_IMAGE_VIEW(self), NULL);
    return self->texture;
}

gboolean cl_image_view_get_loading(ClImageView *self)
{
    g_return_val_if_fail(CL_IS_IMAGE_VIEW(self), FALSE);
    return self->render_cancellable != NULL;
}

void cl_image_view_get_image_size(ClImageView *self, guint *width, guint *height)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    if (width)
        *width = self->image_width;
    if (height)
        *height = self->image_height;
}

static void viewport_changed(ClImageView *self)
{
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

void cl_image_view_set_viewport(ClImageView *self, ClViewport *viewport)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    g_return_if_fail(viewport == NULL || CL_IS_VIEWPORT(viewport));
    g_autoptr(ClViewport) vp = viewport ? g_object_ref(viewport) : cl_viewport_new();
    if (vp == self->viewport)
        return;
    if (self->viewport) {
        g_clear_signal_handler(&self->viewport_notify_id, self->viewport);
        g_clear_object(&self->viewport);
    }
    self->viewport = g_steal_pointer(&vp);
    self->viewport_notify_id =
        g_signal_connect_swapped(self->viewport, "notify", G_CALLBACK(viewport_changed), self);
    if (cl_viewport_get_fit(self->viewport))
        cl_image_view_fit(self);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_VIEWPORT]);
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

ClViewport *cl_image_view_get_viewport(ClImageView *self)
{
    g_return_val_if_fail(CL_IS_IMAGE_VIEW(self), NULL);
    return self->viewport;
}

/* Device pixels per logical pixel: zoom is in device pixels, so "100 %" is truly 1:1. */
static double view_scale(ClImageView *self)
{
    return (double)gtk_widget_get_scale_factor(GTK_WIDGET(self));
}

void cl_image_view_widget_to_image(ClImageView *self, double x, double y, double *image_x,
                                   double *image_y)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    double lz = cl_viewport_get_zoom(self->viewport) / view_scale(self);
    double w = gtk_widget_get_width(GTK_WIDGET(self));
    double h = gtk_widget_get_height(GTK_WIDGET(self));
    if (image_x)
        *image_x = cl_viewport_get_center_x(self->viewport) + (x - w / 2.0) / lz;
    if (image_y)
        *image_y = cl_viewport_get_center_y(self->viewport) + (y - h / 2.0) / lz;
}

void cl_image_view_zoom_at(ClImageView *self, double factor, double x, double y)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    double ix, iy;
    cl_image_view_widget_to_image(self, x, y, &ix, &iy);
    cl_viewport_zoom_at(self->viewport, factor, ix, iy);
}

void cl_image_view_pan_by(ClImageView *self, double dx, double dy)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    double s = view_scale(self);
    cl_viewport_pan_by(self->viewport, dx * s, dy * s);
}

void cl_image_view_fit(ClImageView *self)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    guint cw, ch;
    cl_viewport_get_content_size(self->viewport, &cw, &ch);
    if ((cw == 0 || ch == 0) && self->image_width > 0)
        cl_viewport_set_content_size(self->viewport, self->image_width, self->image_height);
    double s = view_scale(self);
    double w = gtk_widget_get_width(GTK_WIDGET(self)), h = gtk_widget_get_height(GTK_WIDGET(self));
    if (w > 0 && h > 0)
        cl_viewport_fit_to(self->viewport, w * s, h * s);
    else
        cl_viewport_set_fit(self->viewport, TRUE); /* applied at the first allocation */
}

/* ---- comparison with the partner ---- */

typedef struct {
    GBytes *a, *b;
    guint wa, ha, wb, hb;
    double tolerance;
    double map[6]; /* A's overview point -> B's overview point (the alignment, or the stretch) */
    GArray *masks; /* double: A's ignore regions in A's overview pixels */
} DiffJob;

typedef struct {
    GBytes *rgba;
    guint width, height;
    GPtrArray *mips;
    double changed_fraction;
} DiffResult;

static void diff_job_free(DiffJob *j)
{
    g_clear_pointer(&j->masks, g_array_unref);
    g_bytes_unref(j->a);
    g_bytes_unref(j->b);
    g_free(j);
}

static void diff_result_free(DiffResult *r)
{
    g_clear_pointer(&r->rgba, g_bytes_unref);
    g_clear_pointer(&r->mips, g_ptr_array_unref);
    g_free(r);
}

/* Per pixel of A's overview: the largest channel difference against B's overview pixel at the
 * same relative place (nearest). Over the tolerance: red, brighter the bigger the difference;
 * else A's grey, faded, for context. Images up to CL_VIEW_MAX_TEXTURE a side are compared at
 * full resolution; larger ones at their overview's (block means). */
static void diff_thread(GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
    cl_worker_thread_background();
    DiffJob *j = task_data;
    const guint8 *a = g_bytes_get_data(j->a, NULL), *b = g_bytes_get_data(j->b, NULL);
    guint8 *out = g_try_malloc((gsize)j->wa * j->ha * 4);
    if (!out) {
        g_task_return_new_error(task, G_IO_ERROR, G_IO_ERROR_NO_SPACE,
                                "not enough memory for the difference image");
        return;
    }
    guint64 changed = 0, compared = 0;
    const double *m = j->map;
    for (guint y = 0; y < j->ha; y++) {
        if (g_cancellable_is_cancelled(cancellable)) {
            g_free(out);
            g_task_return_error_if_cancelled(task);
            return;
        }
        const guint8 *ra = a + (gsize)y * j->wa * 4;
        guint8 *ro = out + (gsize)y * j->wa * 4;
        double cy = y + 0.5;
        for (guint x = 0; x < j->wa; x++) {
            const guint8 *pa = ra + x * 4;
            guint8 *po = ro + x * 4;
            double cx = x + 0.5;
            double bx = m[0] + m[1] * cx + m[2] * cy, by = m[3] + m[4] * cx + m[5] * cy;
            po[3] = 255;
            gboolean masked = FALSE;
            for (guint k = 0; k + 3 < j->masks->len && !masked; k += 4) {
                const double *r = &g_array_index(j->masks, double, k);
                masked = cx >= r[0] && cx < r[2] && cy >= r[1] && cy < r[3];
            }
            if (masked) {
                /* an ignore region: not compared */
                guint8 grey = (guint8)((pa[0] * 77 + pa[1] * 150 + pa[2] * 29) >> 8);
                po[0] = po[1] = (guint8)(grey / 8), po[2] = (guint8)(40 + grey / 8);
                continue;
            }
            if (!(bx >= 0 && by >= 0 && bx < j->wb && by < j->hb)) {
                /* no pixel of B here (alignment moved it away): not compared */
                po[0] = po[1] = 36, po[2] = 56;
                continue;
            }
            const guint8 *pb = b + ((gsize)(guint)by * j->wb + (guint)bx) * 4;
            int d = 0;
            for (int c = 0; c < 3; c++)
                d = MAX(d, abs((int)pa[c] - (int)pb[c]));
            compared++;
            if (d > j->tolerance) {
                changed++;
                po[0] = (guint8)(128 + d / 2), po[1] = 24, po[2] = 24;
            } else {
                guint8 grey = (guint8)((pa[0] * 77 + pa[1] * 150 + pa[2] * 29) >> 8);
                po[0] = po[1] = po[2] = (guint8)(grey * 3 / 10);
            }
        }
    }
    DiffResult *r = g_new0(DiffResult, 1);
    r->changed_fraction = compared ? (double)changed / (double)compared : 0.0;
    r->rgba = g_bytes_new_take(out, (gsize)j->wa * j->ha * 4);
    r->width = j->wa, r->height = j->ha;
    r->mips = make_mips(r->rgba, r->width, r->height);
    g_task_return_pointer(task, r, (GDestroyNotify)diff_result_free);
}

static void diff_done(GObject *source, GAsyncResult *result, gpointer user_data)
{
    GTask *task = G_TASK(result);
    g_autoptr(GError) error = NULL;
    DiffResult *r = g_task_propagate_pointer(task, &error);
    if (g_cancellable_is_cancelled(g_task_get_cancellable(task))) {
        if (r)
            diff_result_free(r);
        return;
    }
    ClImageView *self = CL_IMAGE_VIEW(source);
    g_clear_object(&self->diff_cancellable);
    if (r) {
        self->diff_mips = g_steal_pointer(&r->mips);
        self->diff = g_object_ref(((Mip *)self->diff_mips->pdata[0])->texture);
        self->changed_fraction = r->changed_fraction;
        diff_result_free(r);
    } else {
        g_signal_emit(self, signals[SIGNAL_RENDER_FAILED], 0, error);
    }
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_CHANGED_FRACTION]);
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

/* Drops the difference picture and, in difference mode with both images rendered, starts
 * computing the new one. */
static void update_diff(ClImageView *self)
{
    if (self->diff_cancellable) {
        g_cancellable_cancel(self->diff_cancellable);
        g_clear_object(&self->diff_cancellable);
    }
    g_clear_object(&self->diff);
    g_clear_pointer(&self->diff_mips, g_ptr_array_unref);
    gboolean was_known = self->changed_fraction >= 0;
    self->changed_fraction = -1;
    if (self->mode == CL_COMPARE_DIFFERENCE && self->overview && self->partner &&
        self->partner->overview) {
        DiffJob *j = g_new0(DiffJob, 1);
        j->a = g_bytes_ref(self->overview);
        j->b = g_bytes_ref(self->partner->overview);
        j->wa = self->overview_w, j->ha = self->overview_h;
        j->wb = self->partner->overview_w, j->hb = self->partner->overview_h;
        j->masks = g_array_new(FALSE, FALSE, sizeof(double));
        for (guint k = 0; k < self->masks->len; k++) {
            double v = g_array_index(self->masks, double, k) * self->texture_scale;
            g_array_append_val(j->masks, v);
        }
        /* overview pixels -> full A -> (alignment or stretch) -> full B -> overview pixels */
        double fm[6];
        frame_to_image(self, self->partner, fm);
        double sa = self->texture_scale, sb = self->partner->texture_scale;
        j->map[0] = sb * fm[0], j->map[1] = sb * fm[1] / sa, j->map[2] = sb * fm[2] / sa;
        j->map[3] = sb * fm[3], j->map[4] = sb * fm[4] / sa, j->map[5] = sb * fm[5] / sa;
        j->tolerance = self->tolerance;
        self->diff_cancellable = g_cancellable_new();
        g_autoptr(GTask) task = g_task_new(self, self->diff_cancellable, diff_done, NULL);
        g_task_set_source_tag(task, update_diff);
        g_task_set_task_data(task, j, (GDestroyNotify)diff_job_free);
        g_task_run_in_thread(task, diff_thread);
    }
    if (was_known)
        g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_CHANGED_FRACTION]);
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

static void partner_texture_changed(ClImageView *self)
{
    update_diff(self);
}

static void partner_gone(gpointer data, GObject *where)
{
    ClImageView *self = data;
    self->partner = NULL;
    self->partner_texture_id = 0;
    update_diff(self);
}

void cl_image_view_set_partner(ClImageView *self, ClImageView *partner)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    g_return_if_fail(partner == NULL || (CL_IS_IMAGE_VIEW(partner) && partner != self));
    if (partner == self->partner)
        return;
    if (self->partner) {
        g_clear_signal_handler(&self->partner_texture_id, self->partner);
        g_object_weak_unref(G_OBJECT(self->partner), partner_gone, self);
    }
    self->partner = partner;
    if (partner) {
        g_object_weak_ref(G_OBJECT(partner), partner_gone, self);
        self->partner_texture_id = g_signal_connect_swapped(
            partner, "notify::texture", G_CALLBACK(partner_texture_changed), self);
    }
    update_diff(self);
}

ClImageView *cl_image_view_get_partner(ClImageView *self)
{
    g_return_val_if_fail(CL_IS_IMAGE_VIEW(self), NULL);
    return self->partner;
}

static gboolean flicker_tick(gpointer data)
{
    ClImageView *self = data;
    self->flicker_phase = !self->flicker_phase;
    gtk_widget_queue_draw(GTK_WIDGET(self));
    return G_SOURCE_CONTINUE;
}

static void update_flicker(ClImageView *self)
{
    g_clear_handle_id(&self->flicker_id, g_source_remove);
    self->flicker_phase = FALSE;
    if (self->mode == CL_COMPARE_FLICKER && gtk_widget_get_mapped(GTK_WIDGET(self)))
        self->flicker_id = g_timeout_add((guint)lround(1000.0 / self->flicker_rate), flicker_tick,
                                         self);
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

void cl_image_view_set_compare_mode(ClImageView *self, ClCompareMode mode)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    g_return_if_fail(mode <= CL_COMPARE_DIFFERENCE);
    if (mode == self->mode)
        return;
    self->mode = mode;
    update_flicker(self);
    update_diff(self);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_COMPARE_MODE]);
}

ClCompareMode cl_image_view_get_compare_mode(ClImageView *self)
{
    g_return_val_if_fail(CL_IS_IMAGE_VIEW(self), CL_COMPARE_NONE);
    return self->mode;
}

void cl_image_view_set_swipe_position(ClImageView *self, double fraction)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    self->swipe = CLAMP(fraction, 0.0, 1.0);
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

double cl_image_view_get_swipe_position(ClImageView *self)
{
    g_return_val_if_fail(CL_IS_IMAGE_VIEW(self), 0.5);
    return self->swipe;
}

void cl_image_view_set_blend(ClImageView *self, double opacity)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    self->blend = CLAMP(opacity, 0.0, 1.0);
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

void cl_image_view_set_flicker_rate(ClImageView *self, double switches_per_second)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    self->flicker_rate = CLAMP(switches_per_second, CL_VIEW_MIN_FLICKER, CL_VIEW_MAX_FLICKER);
    if (self->flicker_id)
        update_flicker(self);
}

gboolean cl_image_view_get_showing_partner(ClImageView *self)
{
    g_return_val_if_fail(CL_IS_IMAGE_VIEW(self), FALSE);
    return self->mode == CL_COMPARE_FLICKER && self->flicker_phase;
}

void cl_image_view_set_tolerance(ClImageView *self, double levels)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    levels = CLAMP(levels, 0.0, 255.0);
    if (levels == self->tolerance)
        return;
    self->tolerance = levels;
    update_diff(self);
}

double cl_image_view_get_changed_fraction(ClImageView *self)
{
    g_return_val_if_fail(CL_IS_IMAGE_VIEW(self), -1);
    return self->changed_fraction;
}

void cl_image_view_set_heatmap(ClImageView *self, const ClHeatmap *hm, const ClLetterbox *lb)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    g_clear_object(&self->heat);
    if (hm && lb && hm->width > 0 && hm->height > 0 && lb->content_w > 0 && lb->content_h > 0) {
        gsize n = (gsize)hm->width * hm->height;
        guint8 *px = g_new(guint8, n * 4);
        for (gsize i = 0; i < n; i++) {
            double v = hm->max > 0 && isfinite(hm->values[i]) ? hm->values[i] / hm->max : 0.0;
            v = CLAMP(v, 0.0, 1.0);
            cl_heatmap_colour_map(self->heat_colours, v, px + i * 4);
            /* cold cells let the image through, as in the exported overlays */
            px[i * 4 + 3] = (guint8)lround(255.0 * v);
        }
        g_autoptr(GBytes) bytes = g_bytes_new_take(px, n * 4);
        self->heat = gdk_memory_texture_new(hm->width, hm->height, GDK_MEMORY_R8G8B8A8, bytes,
                                            (gsize)hm->width * 4);
        /* the model input's square in the image's normalised coordinates */
        self->heat_u0 = -(double)lb->off_x / lb->content_w;
        self->heat_v0 = -(double)lb->off_y / lb->content_h;
        self->heat_u1 = (double)(lb->size - lb->off_x) / lb->content_w;
        self->heat_v1 = (double)(lb->size - lb->off_y) / lb->content_h;
        self->heat_fw = lb->src_width, self->heat_fh = lb->src_height;
    }
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

void cl_image_view_set_heatmap_in_frame(ClImageView *self, gboolean in_frame)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    self->heat_in_frame = in_frame;
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

void cl_image_view_set_heatmap_colours(ClImageView *self, ClHeatmapColours colours)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    self->heat_colours = colours; /* used from the next cl_image_view_set_heatmap */
}

gboolean cl_image_view_get_has_heatmap(ClImageView *self)
{
    g_return_val_if_fail(CL_IS_IMAGE_VIEW(self), FALSE);
    return self->heat != NULL;
}

void cl_image_view_set_heatmap_opacity(ClImageView *self, double opacity)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    self->heat_opacity = CLAMP(opacity, 0.0, 1.0);
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

/* ---- drawing ---- */

/* Crops up to this many image pixels are rendered while drawing (a millisecond or two);
 * larger ones in a worker thread while the overview stands in. */
#define SYNC_DETAIL_PIXELS (512 * 512)

/* rgba (w × h, stride w * 4) upscaled k times, nearest neighbour, as a texture. */
static GdkTexture *upscale_nearest(const guint8 *src, int w, int h, int k)
{
    gsize src_stride = (gsize)w * 4;
    gsize out_w = (gsize)w * k, out_h = (gsize)h * k, out_stride = out_w * 4;
    guint8 *out = g_try_malloc(out_stride * out_h);
    if (!out)
        return NULL;
    for (int row = 0; row < h; row++) {
        const guint8 *sp = src + (gsize)row * src_stride;
        guint8 *d = out + (gsize)row * k * out_stride;
        for (int col = 0; col < w; col++)
            for (int r = 0; r < k; r++)
                memcpy(d + ((gsize)col * k + r) * 4, sp + (gsize)col * 4, 4);
        for (int r = 1; r < k; r++)
            memcpy(d + (gsize)r * out_stride, d, out_stride);
    }
    g_autoptr(GBytes) bytes = g_bytes_new_take(out, out_stride * out_h);
    return gdk_memory_texture_new((int)out_w, (int)out_h, GDK_MEMORY_R8G8B8A8, bytes, out_stride);
}

typedef struct {
    ClDocument *document;
    guint frame;
    ClDisplaySettings settings;
    ClDisplayRanges ranges;
    int x, y, w, h; /* image pixels */
    int k;          /* texels per image pixel (nearest upscaling), when step is 1 */
    int step;       /* image pixels per texel (block means), when k is 1 */
} DetailJob;

static void detail_job_free(DetailJob *j)
{
    g_clear_object(&j->document);
    g_free(j);
}

static GdkTexture *render_detail(const DetailJob *j, GCancellable *cancellable, GError **error)
{
    guint ow, oh;
    g_autofree guint8 *rgba = cl_display_render_rgba_region(
        cl_document_get_image(j->document), j->frame, &j->settings, &j->ranges, (guint)j->x,
        (guint)j->y, (guint)j->w, (guint)j->h, (guint)j->step, &ow, &oh, cancellable, error);
    if (!rgba)
        return NULL;
    GdkTexture *t = upscale_nearest(rgba, (int)ow, (int)oh, j->k);
    if (!t)
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_NO_SPACE,
                            "not enough memory for the zoomed-in view");
    return t;
}

static void detail_thread(GTask *task, gpointer source, gpointer task_data,
                          GCancellable *cancellable)
{
    cl_worker_thread_background();
    GError *error = NULL;
    GdkTexture *t = render_detail(task_data, cancellable, &error);
    if (t)
        g_task_return_pointer(task, t, g_object_unref);
    else
        g_task_return_error(task, error);
}

static void detail_done(GObject *source, GAsyncResult *result, gpointer user_data)
{
    GTask *task = G_TASK(result);
    g_autoptr(GError) error = NULL;
    g_autoptr(GdkTexture) t = g_task_propagate_pointer(task, &error);
    if (g_cancellable_is_cancelled(g_task_get_cancellable(task)))
        return;
    ClImageView *self = CL_IMAGE_VIEW(source);
    g_clear_object(&self->detail_cancellable);
    if (!t)
        return; /* the overview keeps standing in */
    const DetailJob *j = g_task_get_task_data(task);
    g_set_object(&self->detail, t);
    self->detail_x = j->x, self->detail_y = j->y, self->detail_w = j->w, self->detail_h = j->h;
    self->detail_k = j->k;
    self->detail_step = j->step;
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

/* Draws the visible part at full resolution; FALSE when it is not ready (being rendered, or no
 * memory): the caller draws the overview instead. */
static gboolean snapshot_detail(ClImageView *self, GtkSnapshot *snapshot, int vx0, int vy0,
                                int vx1, int vy1, double zoom, double ox, double oy, double lz)
{
    if (vx1 <= vx0 || vy1 <= vy0)
        return TRUE; /* the image is out of sight */

    int k = zoom > CL_VIEW_NEAREST_ZOOM ? (int)ceil(zoom) : 1;
    int step = 1; /* below 100 %: the coarsest power of two that still has a texel per pixel */
    while (zoom * step * 2 <= 1.0 && step < (1 << 20))
        step *= 2;
    gboolean cached = self->detail && self->detail_k == k && self->detail_step == step &&
                      vx0 >= self->detail_x &&
                      vy0 >= self->detail_y && vx1 <= self->detail_x + self->detail_w &&
                      vy1 <= self->detail_y + self->detail_h;
    if (!cached) {
        /* A margin of a quarter view each side lets small pans reuse the crop. */
        int mx = (vx1 - vx0) / 4 + 1, my = (vy1 - vy0) / 4 + 1;
        int x0 = MAX(0, vx0 - mx), y0 = MAX(0, vy0 - my);
        int x1 = MIN((int)self->image_width, vx1 + mx), y1 = MIN((int)self->image_height, vy1 + my);
        gboolean pending = self->detail_cancellable && self->pending_k == k &&
                           self->pending_step == step &&
                           vx0 >= self->pending_x && vy0 >= self->pending_y &&
                           vx1 <= self->pending_x + self->pending_w &&
                           vy1 <= self->pending_y + self->pending_h;
        if (pending)
            return FALSE;
        DetailJob *j = g_new0(DetailJob, 1);
        j->document = g_object_ref(self->document);
        j->frame = self->frame;
        j->settings = self->settings;
        j->ranges = self->ranges;
        j->x = x0, j->y = y0, j->w = x1 - x0, j->h = y1 - y0, j->k = k, j->step = step;
        if ((gint64)j->w * j->h <= SYNC_DETAIL_PIXELS) {
            GdkTexture *t = render_detail(j, NULL, NULL);
            detail_job_free(j);
            if (!t)
                return FALSE;
            clear_detail(self);
            self->detail = t;
            self->detail_x = x0, self->detail_y = y0;
            self->detail_w = x1 - x0, self->detail_h = y1 - y0;
            self->detail_k = k;
            self->detail_step = step;
        } else {
            if (self->detail_cancellable)
                g_cancellable_cancel(self->detail_cancellable);
            g_clear_object(&self->detail_cancellable);
            self->detail_cancellable = g_cancellable_new();
            self->pending_x = j->x, self->pending_y = j->y;
            self->pending_w = j->w, self->pending_h = j->h, self->pending_k = k;
            self->pending_step = step;
            g_autoptr(GTask) task = g_task_new(self, self->detail_cancellable, detail_done, NULL);
            g_task_set_source_tag(task, snapshot_detail);
            g_task_set_task_data(task, j, (GDestroyNotify)detail_job_free);
            g_task_run_in_thread(task, detail_thread);
            return FALSE;
        }
    }
    gtk_snapshot_append_texture(
        snapshot, self->detail,
        &GRAPHENE_RECT_INIT((float)(ox + self->detail_x * lz), (float)(oy + self->detail_y * lz),
                            (float)(self->detail_w * lz), (float)(self->detail_h * lz)));
    return TRUE;
}

/* The map from frame coordinates (what the viewport centres) to v's pixels, drawn in self: v's
 * alignment; for a partner without one, the stretch onto self's image; else the identity. */
static void frame_to_image(ClImageView *self, ClImageView *v, double m[6])
{
    if (v->has_align) {
        memcpy(m, v->align, sizeof v->align);
        return;
    }
    double sx = v != self && self->image_width ? (double)v->image_width / self->image_width : 1;
    double sy = v != self && self->image_height ? (double)v->image_height / self->image_height : 1;
    const double t[6] = { 0, sx, 0, 0, 0, sy };
    memcpy(m, t, sizeof t);
}

static void invert_affine(const double m[6], double inv[6])
{
    double det = m[1] * m[5] - m[2] * m[4];
    if (fabs(det) < 1e-12)
        det = det < 0 ? -1e-12 : 1e-12;
    inv[1] = m[5] / det, inv[2] = -m[2] / det, inv[4] = -m[4] / det, inv[5] = m[1] / det;
    inv[0] = -(inv[1] * m[0] + inv[2] * m[3]);
    inv[3] = -(inv[4] * m[0] + inv[5] * m[3]);
}

/* Pushes the transform under which v's pixel coordinates land on self's screen; pop with
 * gtk_snapshot_restore. Fills v's visible pixel rectangle (clamped to its image). */
static void push_image_space(ClImageView *self, ClImageView *v, GtkSnapshot *snapshot, double ox,
                             double oy, double lz, int vis[4])
{
    double m[6], inv[6];
    frame_to_image(self, v, m);
    invert_affine(m, inv);
    gtk_snapshot_save(snapshot);
    gtk_snapshot_translate(snapshot, &GRAPHENE_POINT_INIT((float)ox, (float)oy));
    gtk_snapshot_scale(snapshot, (float)lz, (float)lz);
    /* inv as translate · rotate · skew · scale: transforms the renderers know as 2-D (a general
     * matrix node falls outside what GTK 4.8's cairo renderer draws) */
    double a = inv[1], b = inv[2], c = inv[4], d = inv[5];
    double sx = hypot(a, c), th = atan2(c, a);
    double m01 = cos(th) * b + sin(th) * d, sy = -sin(th) * b + cos(th) * d;
    double k = fabs(sy) > 1e-12 ? m01 / sy : 0;
    gtk_snapshot_translate(snapshot, &GRAPHENE_POINT_INIT((float)inv[0], (float)inv[3]));
    if (fabs(th) > 1e-9)
        gtk_snapshot_rotate(snapshot, (float)(th * 180 / G_PI));
    if (fabs(k) > 1e-9)
        gtk_snapshot_transform(snapshot, gsk_transform_skew(NULL, (float)(atan(k) * 180 / G_PI), 0));
    gtk_snapshot_scale(snapshot, (float)sx, (float)sy);
    double w = gtk_widget_get_width(GTK_WIDGET(self)), h = gtk_widget_get_height(GTK_WIDGET(self));
    double x0 = G_MAXDOUBLE, y0 = G_MAXDOUBLE, x1 = -G_MAXDOUBLE, y1 = -G_MAXDOUBLE;
    const double cx[4] = { 0, w, 0, w }, cy[4] = { 0, 0, h, h };
    for (int i = 0; i < 4; i++) {
        double ux = (cx[i] - ox) / lz, uy = (cy[i] - oy) / lz;
        double px = m[0] + m[1] * ux + m[2] * uy, py = m[3] + m[4] * ux + m[5] * uy;
        x0 = MIN(x0, px), y0 = MIN(y0, py), x1 = MAX(x1, px), y1 = MAX(y1, py);
    }
    vis[0] = (int)floor(MAX(0.0, x0)), vis[1] = (int)floor(MAX(0.0, y0));
    vis[2] = (int)ceil(MIN((double)v->image_width, x1));
    vis[3] = (int)ceil(MIN((double)v->image_height, y1));
}

/* The zoom (device pixels per image pixel) at which v's image is drawn in self. */
static double zoom_of(ClImageView *self, ClImageView *v, double zoom)
{
    double m[6];
    frame_to_image(self, v, m);
    double det = fabs(m[1] * m[5] - m[2] * m[4]);
    return det > 1e-12 ? zoom / sqrt(det) : zoom;
}

/* The image pixels [x0, y0, x1, y1) on screen when the image is drawn straight at (ox, oy) with
 * lz logical pixels per image pixel (clamped to the image). */
static void screen_pixels(ClImageView *self, double ox, double oy, double lz, int vis[4])
{
    double w = gtk_widget_get_width(GTK_WIDGET(self)), h = gtk_widget_get_height(GTK_WIDGET(self));
    vis[0] = (int)floor(MAX(0.0, -ox / lz)), vis[1] = (int)floor(MAX(0.0, -oy / lz));
    vis[2] = (int)ceil(MIN((double)self->image_width, (w - ox) / lz));
    vis[3] = (int)ceil(MIN((double)self->image_height, (h - oy) / lz));
}

/* This view's own image: the overview's mip for the zoom, or the crop of what is on screen at
 * full resolution when zoomed past the overview. */
static void draw_own(ClImageView *self, GtkSnapshot *snapshot, double ox, double oy, double lz,
                     double zoom)
{
    if (!self->has_align) {
        /* straight onto the screen: texel edges land on whole device pixels when zoomed in, so
         * the nearest-neighbour crop stays sharp (no transform for the renderer to filter) */
        int vis[4];
        screen_pixels(self, ox, oy, lz, vis);
        gboolean need_detail = zoom > CL_VIEW_NEAREST_ZOOM || zoom > self->texture_scale * 1.001;
        if (need_detail &&
            snapshot_detail(self, snapshot, vis[0], vis[1], vis[2], vis[3], zoom, ox, oy, lz))
            return;
        append_mip(snapshot, pick_mip(self->mips, self->image_width, zoom), self->image_width,
                   self->image_height, vis,
                   &GRAPHENE_RECT_INIT((float)ox, (float)oy, (float)(self->image_width * lz),
                                       (float)(self->image_height * lz)));
        return;
    }
    int vis[4];
    push_image_space(self, self, snapshot, ox, oy, lz, vis);
    double z = zoom_of(self, self, zoom);
    gboolean need_detail = z > CL_VIEW_NEAREST_ZOOM || z > self->texture_scale * 1.001;
    if (!need_detail ||
        !snapshot_detail(self, snapshot, vis[0], vis[1], vis[2], vis[3], z, 0, 0, 1))
        append_mip(snapshot, pick_mip(self->mips, self->image_width, z), self->image_width,
                   self->image_height, vis,
                   &GRAPHENE_RECT_INIT(0, 0, (float)self->image_width, (float)self->image_height));
    gtk_snapshot_restore(snapshot);
}

/* The partner's image (the mip for its size here), laid over this one: through its alignment,
 * or stretched onto this image. */
static void draw_partner(ClImageView *self, GtkSnapshot *snapshot, double ox, double oy, double lz,
                         double zoom)
{
    ClImageView *p = self->partner;
    int vis[4];
    push_image_space(self, p, snapshot, ox, oy, lz, vis);
    append_mip(snapshot, pick_mip(p->mips, p->image_width, zoom_of(self, p, zoom)), p->image_width,
               p->image_height, vis,
               &GRAPHENE_RECT_INIT(0, 0, (float)p->image_width, (float)p->image_height));
    gtk_snapshot_restore(snapshot);
}

static void draw_divider(GtkSnapshot *snapshot, double x, double h)
{
    GdkRGBA dark = { 0, 0, 0, 0.5 }, light = { 1, 1, 1, 0.9 };
    gtk_snapshot_append_color(snapshot, &dark, &GRAPHENE_RECT_INIT((float)x - 2, 0, 4, (float)h));
    gtk_snapshot_append_color(snapshot, &light, &GRAPHENE_RECT_INIT((float)x - 1, 0, 2, (float)h));
}

static void cl_image_view_snapshot(GtkWidget *widget, GtkSnapshot *snapshot)
{
    ClImageView *self = CL_IMAGE_VIEW(widget);
    if (!self->texture)
        return;
    double w = gtk_widget_get_width(widget), h = gtk_widget_get_height(widget);
    double zoom = cl_viewport_get_zoom(self->viewport);
    double lz = zoom / view_scale(self); /* logical pixels per image pixel */
    /* The image origin snaps to whole device pixels: at integer zooms every image pixel then
     * covers whole screen pixels, and linear sampling has nothing to blur. */
    double s = view_scale(self);
    double ox = round((w / 2.0 - cl_viewport_get_center_x(self->viewport) * lz) * s) / s;
    double oy = round((h / 2.0 - cl_viewport_get_center_y(self->viewport) * lz) * s) / s;
    double iw = self->image_width * lz, ih = self->image_height * lz;
    graphene_rect_t image_rect = GRAPHENE_RECT_INIT((float)ox, (float)oy, (float)iw, (float)ih);
    gboolean other = self->partner && self->partner->mips;

    switch (self->mode) {
    case CL_COMPARE_NONE:
        draw_own(self, snapshot, ox, oy, lz, zoom);
        break;
    case CL_COMPARE_SWIPE: {
        double x = round(w * self->swipe);
        draw_own(self, snapshot, ox, oy, lz, zoom);
        if (other) {
            gtk_snapshot_push_clip(snapshot,
                                   &GRAPHENE_RECT_INIT((float)x, 0, (float)(w - x), (float)h));
            draw_partner(self, snapshot, ox, oy, lz, zoom);
            gtk_snapshot_pop(snapshot);
        }
        draw_divider(snapshot, x, h);
        break;
    }
    case CL_COMPARE_BLEND:
        draw_own(self, snapshot, ox, oy, lz, zoom);
        if (other) {
            gtk_snapshot_push_opacity(snapshot, self->blend);
            draw_partner(self, snapshot, ox, oy, lz, zoom);
            gtk_snapshot_pop(snapshot);
        }
        break;
    case CL_COMPARE_FLICKER:
        if (self->flicker_phase && other)
            draw_partner(self, snapshot, ox, oy, lz, zoom);
        else
            draw_own(self, snapshot, ox, oy, lz, zoom);
        break;
    case CL_COMPARE_DIFFERENCE:
        if (self->diff) {
            int vis[4];
            screen_pixels(self, ox, oy, lz, vis);
            append_mip(snapshot, pick_mip(self->diff_mips, self->image_width, zoom),
                       self->image_width, self->image_height, vis, &image_rect);
        } else
            draw_own(self, snapshot, ox, oy, lz, zoom); /* while it is computed */
        break;
    }

    /* the ignore regions (and the one being drawn) */
    if (self->masks->len || self->drawing_mask) {
        GdkRGBA fill = { 0.2, 0.35, 0.8, 0.35 }, edge = { 0.55, 0.7, 1.0, 0.9 };
        guint n = self->masks->len / 4 + (self->drawing_mask ? 1 : 0);
        for (guint k = 0; k < n; k++) {
            double r[4];
            if (k < self->masks->len / 4) {
                memcpy(r, &g_array_index(self->masks, double, k * 4), sizeof r);
            } else {
                r[0] = MIN(self->mask_x0, self->mask_x1), r[2] = MAX(self->mask_x0, self->mask_x1);
                r[1] = MIN(self->mask_y0, self->mask_y1), r[3] = MAX(self->mask_y0, self->mask_y1);
            }
            int vis[4];
            push_image_space(self, self, snapshot, ox, oy, lz, vis);
            graphene_rect_t gr = GRAPHENE_RECT_INIT((float)r[0], (float)r[1],
                                                    (float)(r[2] - r[0]), (float)(r[3] - r[1]));
            gtk_snapshot_append_color(snapshot, &fill, &gr);
            float bw = (float)(1.5 / lz), x = gr.origin.x, y = gr.origin.y;
            float rw = gr.size.width, rh = gr.size.height;
            gtk_snapshot_append_color(snapshot, &edge, &GRAPHENE_RECT_INIT(x, y, rw, bw));
            gtk_snapshot_append_color(snapshot, &edge, &GRAPHENE_RECT_INIT(x, y + rh - bw, rw, bw));
            gtk_snapshot_append_color(snapshot, &edge, &GRAPHENE_RECT_INIT(x, y, bw, rh));
            gtk_snapshot_append_color(snapshot, &edge, &GRAPHENE_RECT_INIT(x + rw - bw, y, bw, rh));
            gtk_snapshot_restore(snapshot);
        }
    }

    /* the heat map belongs to the later image: the partner's in an overlaid mode */
    if (self->heat && self->heat_opacity > 0) {
        ClImageView *v = self->mode != CL_COMPARE_NONE && other ? self->partner : self;
        int vis[4];
        double vw = v->image_width, vh = v->image_height;
        if (self->heat_in_frame) {
            /* the map is of the frame the viewport shows: no image's own transform */
            gtk_snapshot_save(snapshot);
            gtk_snapshot_translate(snapshot, &GRAPHENE_POINT_INIT((float)ox, (float)oy));
            gtk_snapshot_scale(snapshot, (float)lz, (float)lz);
            vw = self->heat_fw, vh = self->heat_fh;
        } else {
            push_image_space(self, v, snapshot, ox, oy, lz, vis);
        }
        gtk_snapshot_push_clip(snapshot, &GRAPHENE_RECT_INIT(0, 0, (float)vw, (float)vh));
        gtk_snapshot_push_opacity(snapshot, self->heat_opacity);
        gtk_snapshot_append_texture(
            snapshot, self->heat,
            &GRAPHENE_RECT_INIT((float)(self->heat_u0 * vw), (float)(self->heat_v0 * vh),
                                (float)((self->heat_u1 - self->heat_u0) * vw),
                                (float)((self->heat_v1 - self->heat_v0) * vh)));
        gtk_snapshot_pop(snapshot);
        gtk_snapshot_pop(snapshot);
        gtk_snapshot_restore(snapshot);
    }
}

static void cl_image_view_map(GtkWidget *widget)
{
    GTK_WIDGET_CLASS(cl_image_view_parent_class)->map(widget);
    update_flicker(CL_IMAGE_VIEW(widget));
}

static void cl_image_view_unmap(GtkWidget *widget)
{
    ClImageView *self = CL_IMAGE_VIEW(widget);
    g_clear_handle_id(&self->flicker_id, g_source_remove);
    GTK_WIDGET_CLASS(cl_image_view_parent_class)->unmap(widget);
}

static void cl_image_view_size_allocate(GtkWidget *widget, int width, int height, int baseline)
{
    ClImageView *self = CL_IMAGE_VIEW(widget);
    if (cl_viewport_get_fit(self->viewport))
        cl_image_view_fit(self);
}

/* ---- input ---- */

static void on_motion(GtkEventControllerMotion *motion, double x, double y, ClImageView *self)
{
    self->pointer_x = x;
    self->pointer_y = y;
    self->has_pointer = TRUE;
}

static void on_leave(GtkEventControllerMotion *motion, ClImageView *self)
{
    self->has_pointer = FALSE;
}

static gboolean on_scroll(GtkEventControllerScroll *scroll, double dx, double dy, ClImageView *self)
{
    if (!self->texture || dy == 0.0)
        return FALSE;
    /* Wheels step by notches (1.0 each); touchpads report pixels, so they need a gentler curve. */
    double factor = gtk_event_controller_scroll_get_unit(scroll) == GDK_SCROLL_UNIT_WHEEL
                        ? pow(1.25, -dy)
                        : exp(-dy / 100.0);
    double x = self->has_pointer ? self->pointer_x : gtk_widget_get_width(GTK_WIDGET(self)) / 2.0;
    double y = self->has_pointer ? self->pointer_y : gtk_widget_get_height(GTK_WIDGET(self)) / 2.0;
    cl_image_view_zoom_at(self, factor, x, y);
    return TRUE;
}

/* Pointer distance (logical pixels) at which a drag takes the swipe divider instead of panning. */
#define DIVIDER_GRAB 12.0

static void on_drag_begin(GtkGestureDrag *drag, double x, double y, ClImageView *self)
{
    self->drag_last_x = self->drag_last_y = 0.0;
    GdkModifierType mods =
        gtk_event_controller_get_current_event_state(GTK_EVENT_CONTROLLER(drag));
    self->drawing_mask = (mods & GDK_SHIFT_MASK) && self->texture && !self->has_align;
    if (self->drawing_mask) {
        cl_image_view_widget_to_image(self, x, y, &self->mask_x0, &self->mask_y0);
        self->mask_x1 = self->mask_x0, self->mask_y1 = self->mask_y0;
        gtk_widget_set_cursor_from_name(GTK_WIDGET(self), "crosshair");
        return;
    }
    double w = gtk_widget_get_width(GTK_WIDGET(self));
    self->dragging_divider =
        self->mode == CL_COMPARE_SWIPE && fabs(x - w * self->swipe) <= DIVIDER_GRAB;
    gtk_widget_set_cursor_from_name(GTK_WIDGET(self),
                                    self->dragging_divider ? "col-resize" : "grabbing");
}

static void on_drag_update(GtkGestureDrag *drag, double offset_x, double offset_y,
                           ClImageView *self)
{
    if (self->drawing_mask) {
        double x0, y0;
        if (gtk_gesture_drag_get_start_point(drag, &x0, &y0))
            cl_image_view_widget_to_image(self, x0 + offset_x, y0 + offset_y, &self->mask_x1,
                                          &self->mask_y1);
        gtk_widget_queue_draw(GTK_WIDGET(self));
        return;
    }
    if (self->dragging_divider) {
        double x0, y0, w = gtk_widget_get_width(GTK_WIDGET(self));
        if (w > 0 && gtk_gesture_drag_get_start_point(drag, &x0, &y0))
            cl_image_view_set_swipe_position(self, (x0 + offset_x) / w);
        return;
    }
    if (!self->texture)
        return;
    cl_image_view_pan_by(self, offset_x - self->drag_last_x, offset_y - self->drag_last_y);
    self->drag_last_x = offset_x;
    self->drag_last_y = offset_y;
}

static void on_drag_end(GtkGestureDrag *drag, double offset_x, double offset_y, ClImageView *self)
{
    if (self->drawing_mask) {
        self->drawing_mask = FALSE;
        double x0 = CLAMP(MIN(self->mask_x0, self->mask_x1), 0, self->image_width);
        double x1 = CLAMP(MAX(self->mask_x0, self->mask_x1), 0, self->image_width);
        double y0 = CLAMP(MIN(self->mask_y0, self->mask_y1), 0, self->image_height);
        double y1 = CLAMP(MAX(self->mask_y0, self->mask_y1), 0, self->image_height);
        if (x1 - x0 >= 1 && y1 - y0 >= 1)
            g_signal_emit(self, signals[SIGNAL_MASK_DRAWN], 0, x0, y0, x1, y1);
        gtk_widget_queue_draw(GTK_WIDGET(self));
    }
    self->dragging_divider = FALSE;
    gtk_widget_set_cursor_from_name(GTK_WIDGET(self), "grab");
}

/* ---- window/level by dragging with the secondary button ---- */

static void on_wl_begin(GtkGestureDrag *drag, double x, double y, ClImageView *self)
{
    if (!self->document || !self->mips) {
        gtk_gesture_set_state(GTK_GESTURE(drag), GTK_EVENT_SEQUENCE_DENIED);
        return;
    }
    const ClImage *img = cl_document_get_image(self->document);
    double c, w;
    if (!cl_display_effective_window(img, self->frame, &self->settings, &c, &w)) {
        /* a VOI LUT: start from the frame's value range */
        ClDisplaySettings mm = self->settings;
        mm.mode = CL_DISPLAY_MINMAX;
        cl_display_effective_window(img, self->frame, &mm, &c, &w);
    }
    self->wl_center = c;
    self->wl_width = MAX(w, 1e-6);
    /* a drag across the view spans about the starting width, whatever the units */
    self->wl_step = self->wl_width / MAX(gtk_widget_get_width(GTK_WIDGET(self)), 100);
    gtk_widget_set_cursor_from_name(GTK_WIDGET(self), "move");
}

static void on_wl_update(GtkGestureDrag *drag, double dx, double dy, ClImageView *self)
{
    if (!self->document)
        return;
    ClDisplaySettings s = self->settings;
    s.mode = CL_DISPLAY_WINDOW;
    s.width = MAX(self->wl_width + dx * self->wl_step, self->wl_step);
    s.center = self->wl_center + dy * self->wl_step;
    cl_image_view_set_display(self, &s);
    g_signal_emit(self, signals[SIGNAL_DISPLAY_CHANGED], 0);
}

static void on_wl_end(GtkGestureDrag *drag, double dx, double dy, ClImageView *self)
{
    gtk_widget_set_cursor_from_name(GTK_WIDGET(self), "grab");
}

static void on_pinch_begin(GtkGesture *gesture, GdkEventSequence *sequence, ClImageView *self)
{
    double x, y;
    self->pinch_start_zoom = cl_viewport_get_zoom(self->viewport);
    if (!gtk_gesture_get_bounding_box_center(gesture, &x, &y)) {
        x = gtk_widget_get_width(GTK_WIDGET(self)) / 2.0;
        y = gtk_widget_get_height(GTK_WIDGET(self)) / 2.0;
    }
    cl_image_view_widget_to_image(self, x, y, &self->pinch_anchor_x, &self->pinch_anchor_y);
}

static void on_pinch_scale_changed(GtkGestureZoom *gesture, double scale, ClImageView *self)
{
    if (!self->texture)
        return;
    double target = self->pinch_start_zoom * scale;
    cl_viewport_zoom_at(self->viewport, target / cl_viewport_get_zoom(self->viewport),
                        self->pinch_anchor_x, self->pinch_anchor_y);
}

/* ---- GObject ---- */

static void cl_image_view_get_property(GObject *object, guint prop_id, GValue *value,
                                       GParamSpec *pspec)
{
    ClImageView *self = CL_IMAGE_VIEW(object);
    switch (prop_id) {
    case PROP_DOCUMENT:
        g_value_set_object(value, self->document);
        break;
    case PROP_FRAME:
        g_value_set_uint(value, self->frame);
        break;
    case PROP_VIEWPORT:
        g_value_set_object(value, self->viewport);
        break;
    case PROP_TEXTURE:
        g_value_set_object(value, self->texture);
        break;
    case PROP_LOADING:
        g_value_set_boolean(value, cl_image_view_get_loading(self));
        break;
    case PROP_COMPARE_MODE:
        g_value_set_int(value, self->mode);
        break;
    case PROP_CHANGED_FRACTION:
        g_value_set_double(value, self->changed_fraction);
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    }
}

static void cl_image_view_set_property(GObject *object, guint prop_id, const GValue *value,
                                       GParamSpec *pspec)
{
    ClImageView *self = CL_IMAGE_VIEW(object);
    switch (prop_id) {
    case PROP_VIEWPORT:
        cl_image_view_set_viewport(self, g_value_get_object(value));
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    }
}

static void cl_image_view_dispose(GObject *object)
{
    ClImageView *self = CL_IMAGE_VIEW(object);
    if (self->render_cancellable) {
        g_cancellable_cancel(self->render_cancellable);
        g_clear_object(&self->render_cancellable);
    }
    if (self->viewport) {
        g_clear_signal_handler(&self->viewport_notify_id, self->viewport);
        g_clear_object(&self->viewport);
    }
    if (self->diff_cancellable) {
        g_cancellable_cancel(self->diff_cancellable);
        g_clear_object(&self->diff_cancellable);
    }
    g_clear_handle_id(&self->flicker_id, g_source_remove);
    if (self->partner) {
        g_clear_signal_handler(&self->partner_texture_id, self->partner);
        g_object_weak_unref(G_OBJECT(self->partner), partner_gone, self);
        self->partner = NULL;
    }
    g_clear_object(&self->diff);
    g_clear_pointer(&self->diff_mips, g_ptr_array_unref);
    g_clear_object(&self->heat);
    g_clear_pointer(&self->masks, g_array_unref);
    g_clear_object(&self->document);
    g_clear_object(&self->texture);
    g_clear_pointer(&self->mips, g_ptr_array_unref);
    g_clear_pointer(&self->overview, g_bytes_unref);
    clear_detail(self);
    G_OBJECT_CLASS(cl_image_view_parent_class)->dispose(object);
}

static void cl_image_view_class_init(ClImageViewClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    GtkWidgetClass *widget_class = GTK_WIDGET_CLASS(klass);

    object_class->get_property = cl_image_view_get_property;
    object_class->set_property = cl_image_view_set_property;
    object_class->dispose = cl_image_view_dispose;
    widget_class->snapshot = cl_image_view_snapshot;
    widget_class->size_allocate = cl_image_view_size_allocate;
    widget_class->map = cl_image_view_map;
    widget_class->unmap = cl_image_view_unmap;

    properties[PROP_DOCUMENT] = g_param_spec_object("document", NULL, NULL, CL_TYPE_DOCUMENT,
                                                    G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    properties[PROP_FRAME] = g_param_spec_uint("frame", NULL, NULL, 0, G_MAXUINT, 0,
                                               G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    properties[PROP_VIEWPORT] =
        g_param_spec_object("viewport", NULL, NULL, CL_TYPE_VIEWPORT,
                            G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
    properties[PROP_TEXTURE] = g_param_spec_object("texture", NULL, NULL, GDK_TYPE_TEXTURE,
                                                   G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    properties[PROP_LOADING] = g_param_spec_boolean("loading", NULL, NULL, FALSE,
                                                    G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    properties[PROP_COMPARE_MODE] =
        g_param_spec_int("compare-mode", NULL, NULL, CL_COMPARE_NONE, CL_COMPARE_DIFFERENCE,
                         CL_COMPARE_NONE, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    /* difference mode: the fraction of pixels over the tolerance; < 0 while unknown */
    properties[PROP_CHANGED_FRACTION] = g_param_spec_double(
        "changed-fraction", NULL, NULL, -1, 1, -1, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties(object_class, N_PROPS, properties);

    /* The frame could not be rendered (memory, bad frame): the GError says why, naming the file. */
    signals[SIGNAL_RENDER_FAILED] =
        g_signal_new("render-failed", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                     NULL, G_TYPE_NONE, 1, G_TYPE_ERROR);

    /* The user set a window/level by dragging (cl_image_view_get_display tells it). */
    signals[SIGNAL_DISPLAY_CHANGED] = g_signal_new("display-changed", G_TYPE_FROM_CLASS(klass),
                                                   G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                                   G_TYPE_NONE, 0);

    /* Shift+drag drew an ignore region: x0, y0, x1, y1 in this image's pixels (the owner of the
     * masks decides what to do with it: cl_image_view_set_masks shows them). */
    signals[SIGNAL_MASK_DRAWN] = g_signal_new("mask-drawn", G_TYPE_FROM_CLASS(klass),
                                              G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE,
                                              4, G_TYPE_DOUBLE, G_TYPE_DOUBLE, G_TYPE_DOUBLE,
                                              G_TYPE_DOUBLE);

    gtk_widget_class_set_css_name(widget_class, "imageview");
}

static void cl_image_view_init(ClImageView *self)
{
    GtkWidget *widget = GTK_WIDGET(self);
    gtk_widget_set_overflow(widget, GTK_OVERFLOW_HIDDEN);
    gtk_widget_set_hexpand(widget, TRUE);
    gtk_widget_set_vexpand(widget, TRUE);
    gtk_widget_set_cursor_from_name(widget, "grab");
    self->texture_scale = 1.0;
    self->swipe = 0.5;
    self->blend = 0.5;
    self->flicker_rate = 2.0;
    self->tolerance = CL_VIEW_DEFAULT_TOLERANCE;
    self->changed_fraction = -1;
    self->heat_opacity = 0.6;
    self->masks = g_array_new(FALSE, FALSE, sizeof(double));
    cl_image_view_set_viewport(self, NULL);

    GtkEventController *motion = gtk_event_controller_motion_new();
    g_signal_connect(motion, "enter", G_CALLBACK(on_motion), self);
    g_signal_connect(motion, "motion", G_CALLBACK(on_motion), self);
    g_signal_connect(motion, "leave", G_CALLBACK(on_leave), self);
    gtk_widget_add_controller(widget, motion);

    GtkEventController *scroll =
        gtk_event_controller_scroll_new(GTK_EVENT_CONTROLLER_SCROLL_VERTICAL);
    g_signal_connect(scroll, "scroll", G_CALLBACK(on_scroll), self);
    gtk_widget_add_controller(widget, scroll);

    GtkGesture *drag = gtk_gesture_drag_new();
    g_signal_connect(drag, "drag-begin", G_CALLBACK(on_drag_begin), self);
    g_signal_connect(drag, "drag-update", G_CALLBACK(on_drag_update), self);
    g_signal_connect(drag, "drag-end", G_CALLBACK(on_drag_end), self);
    gtk_widget_add_controller(widget, GTK_EVENT_CONTROLLER(drag));

    GtkGesture *wl = gtk_gesture_drag_new();
    gtk_gesture_single_set_button(GTK_GESTURE_SINGLE(wl), GDK_BUTTON_SECONDARY);
    g_signal_connect(wl, "drag-begin", G_CALLBACK(on_wl_begin), self);
    g_signal_connect(wl, "drag-update", G_CALLBACK(on_wl_update), self);
    g_signal_connect(wl, "drag-end", G_CALLBACK(on_wl_end), self);
    gtk_widget_add_controller(widget, GTK_EVENT_CONTROLLER(wl));

    GtkGesture *pinch = gtk_gesture_zoom_new();
    g_signal_connect(pinch, "begin", G_CALLBACK(on_pinch_begin), self);
    g_signal_connect(pinch, "scale-changed", G_CALLBACK(on_pinch_scale_changed), self);
    gtk_widget_add_controller(widget, GTK_EVENT_CONTROLLER(pinch));
}
