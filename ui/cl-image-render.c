/* cl-image-render.c - ClImageView's pictures: the overview rendered off the main thread, its mip
 * levels, the full-resolution crops drawn when zoomed in, and the transforms that put an image's
 * pixels on the screen. */
#include "cl-image-view-private.h"

#include <math.h>
#include <string.h>

#include "image/display.h"
#include "worker/worker.h"

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

/* ---- rendering worker ---- */

typedef struct {
    ClDocument *document;
    guint frame;
    gboolean has_settings; /* else the frame's defaults */
    ClDisplaySettings settings;
    ClDocument *stretch_docs[2]; /* whose values the stretch pools (none: the frame's own) */
    guint stretch_frames[2];
    guint n_stretch;
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
    for (guint i = 0; i < job->n_stretch; i++)
        g_clear_object(&job->stretch_docs[i]);
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

static void mip_free(ClImageMip *m)
{
    g_clear_object(&m->texture);
    g_clear_pointer(&m->pixels, g_bytes_unref);
    g_free(m);
}

static ClImageMip *mip_new(GBytes *pixels, guint w, guint h)
{
    ClImageMip *m = g_new0(ClImageMip, 1);
    m->pixels = g_bytes_ref(pixels);
    m->width = w, m->height = h;
    m->texture = gdk_memory_texture_new((int)w, (int)h, GDK_MEMORY_R8G8B8A8, pixels, (gsize)w * 4);
    return m;
}

/* The first level for rgba, then its halvings down to MIP_MIN a side (made in a worker: the
 * textures are immutable and only drawn on the main thread). */
#define MIP_MIN 128
GPtrArray *cl_image_mips_new(GBytes *rgba, guint w, guint h)
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
const ClImageMip *cl_image_mips_pick(GPtrArray *mips, guint image_width, double zoom)
{
    guint best = 0;
    for (guint i = 1; i < mips->len; i++)
        if (((ClImageMip *)mips->pdata[i])->width >= image_width * zoom)
            best = i;
    return mips->pdata[best];
}

/* Appends mip m of an image_w × image_h image whose whole lands on `rect`, of which only image
 * pixels vis = [x0, y0, x1, y1) are in sight. When that is a small part of the mip, only the
 * texels under it (and one more each side, for the filter) are drawn: a texture node costs
 * GTK's cairo renderer a copy of the whole texture every frame, about 18 ms for a 2048² level,
 * which zoomed in would be spent on texels off screen. The part shares the mip's pixels. */
void cl_image_mip_append(GtkSnapshot *snapshot, const ClImageMip *m, guint image_w, guint image_h,
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
    g_autoptr(GdkTexture) t =
        gdk_memory_texture_new(tx1 - tx0, ty1 - ty0, GDK_MEMORY_R8G8B8A8, bytes, stride);
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
    if (job->n_stretch > 0) {
        /* one stretch over the images compared: one value, one colour in each view */
        const ClImage *imgs[2];
        for (guint i = 0; i < job->n_stretch; i++)
            imgs[i] = cl_document_get_image(job->stretch_docs[i]);
        cl_display_resolve_ranges_shared(imgs, job->stretch_frames, job->n_stretch, &res->settings,
                                         &res->ranges);
    } else {
        cl_display_resolve_ranges(img, job->frame, &res->settings, &res->ranges);
    }
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
    res->mips = cl_image_mips_new(res->overview, res->overview_width, res->overview_height);
    if (g_task_return_error_if_cancelled(task))
        return;
    g_task_return_pointer(task, g_steal_pointer(&res), (GDestroyNotify)render_result_free);
}

void cl_image_view_clear_detail(ClImageView *self)
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
        g_signal_emit(self, cl_image_view_signals[SIGNAL_RENDER_FAILED], 0, error);
    } else {
        RenderJob *job = g_task_get_task_data(task);
        const ClImage *img = cl_document_get_image(job->document);
        /* a new display transform replaces the pictures of the old one */
        cl_image_view_clear_pictures(self);
        self->image_width = img->width;
        self->image_height = img->height;
        self->settings = res->settings;
        self->ranges = res->ranges;
        self->overview = g_steal_pointer(&res->overview);
        self->overview_w = res->overview_width;
        self->overview_h = res->overview_height;
        self->mips = g_steal_pointer(&res->mips);
        self->texture = g_object_ref(((ClImageMip *)self->mips->pdata[0])->texture);
        self->texture_scale = (double)self->overview_w / img->width;
        if (cl_viewport_get_fit(self->viewport))
            cl_image_view_fit(self);
    }
    cl_image_view_update_diff(self);
    g_object_notify_by_pspec(G_OBJECT(self), cl_image_view_properties[PROP_TEXTURE]);
    g_object_notify_by_pspec(G_OBJECT(self), cl_image_view_properties[PROP_LOADING]);
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

void cl_image_view_render(ClImageView *self, const ClDisplaySettings *settings)
{
    if (self->render_cancellable) {
        g_cancellable_cancel(self->render_cancellable);
        g_clear_object(&self->render_cancellable);
    }
    self->render_cancellable = g_cancellable_new();
    RenderJob *job = g_new0(RenderJob, 1);
    job->document = g_object_ref(self->document);
    job->frame = self->frame;
    if (settings) {
        job->has_settings = TRUE;
        job->settings = *settings;
    }
    job->n_stretch = self->n_stretch;
    for (guint i = 0; i < self->n_stretch; i++) {
        job->stretch_docs[i] = g_object_ref(self->stretch_docs[i]);
        job->stretch_frames[i] = self->stretch_frames[i];
    }
    g_autoptr(GTask) task = g_task_new(self, self->render_cancellable, render_done, NULL);
    g_task_set_source_tag(task, cl_image_view_set_image);
    g_task_set_task_data(task, job, (GDestroyNotify)render_job_free);
    g_task_run_in_thread(task, render_thread);
}

void cl_image_view_clear_pictures(ClImageView *self)
{
    g_clear_object(&self->texture);
    g_clear_pointer(&self->mips, g_ptr_array_unref);
    g_clear_pointer(&self->overview, g_bytes_unref);
    cl_image_view_clear_detail(self);
}

/* ---- full-resolution crops ---- */

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
static gboolean snapshot_detail(ClImageView *self, GtkSnapshot *snapshot, int vx0, int vy0, int vx1,
                                int vy1, double zoom, double ox, double oy, double lz)
{
    if (vx1 <= vx0 || vy1 <= vy0)
        return TRUE; /* the image is out of sight */

    int k = zoom > CL_VIEW_NEAREST_ZOOM ? (int)ceil(zoom) : 1;
    int step = 1; /* below 100 %: the coarsest power of two that still has a texel per pixel */
    while (zoom * step * 2 <= 1.0 && step < (1 << 20))
        step *= 2;
    gboolean cached = self->detail && self->detail_k == k && self->detail_step == step &&
                      vx0 >= self->detail_x && vy0 >= self->detail_y &&
                      vx1 <= self->detail_x + self->detail_w &&
                      vy1 <= self->detail_y + self->detail_h;
    if (!cached) {
        /* A margin of a quarter view each side lets small pans reuse the crop. */
        int mx = (vx1 - vx0) / 4 + 1, my = (vy1 - vy0) / 4 + 1;
        int x0 = MAX(0, vx0 - mx), y0 = MAX(0, vy0 - my);
        int x1 = MIN((int)self->image_width, vx1 + mx), y1 = MIN((int)self->image_height, vy1 + my);
        gboolean pending = self->detail_cancellable && self->pending_k == k &&
                           self->pending_step == step && vx0 >= self->pending_x &&
                           vy0 >= self->pending_y && vx1 <= self->pending_x + self->pending_w &&
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
            cl_image_view_clear_detail(self);
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

/* ---- image space ---- */

/* The map from frame coordinates (what the viewport centres) to v's pixels, drawn in self: v's
 * alignment; for a partner without one, the stretch onto self's image; else the identity. */
void cl_image_view_frame_to_image(ClImageView *self, ClImageView *v, double m[6])
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

void cl_image_affine_invert(const double m[6], double inv[6])
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
void cl_image_view_push_image_space(ClImageView *self, ClImageView *v, GtkSnapshot *snapshot,
                                    double ox, double oy, double lz, int vis[4])
{
    double m[6], inv[6];
    cl_image_view_frame_to_image(self, v, m);
    cl_image_affine_invert(m, inv);
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
        gtk_snapshot_transform(snapshot,
                               gsk_transform_skew(NULL, (float)(atan(k) * 180 / G_PI), 0));
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
    cl_image_view_frame_to_image(self, v, m);
    double det = fabs(m[1] * m[5] - m[2] * m[4]);
    return det > 1e-12 ? zoom / sqrt(det) : zoom;
}

/* The image pixels [x0, y0, x1, y1) on screen when the image is drawn straight at (ox, oy) with
 * lz logical pixels per image pixel (clamped to the image). */
void cl_image_view_screen_pixels(ClImageView *self, double ox, double oy, double lz, int vis[4])
{
    double w = gtk_widget_get_width(GTK_WIDGET(self)), h = gtk_widget_get_height(GTK_WIDGET(self));
    vis[0] = (int)floor(MAX(0.0, -ox / lz)), vis[1] = (int)floor(MAX(0.0, -oy / lz));
    vis[2] = (int)ceil(MIN((double)self->image_width, (w - ox) / lz));
    vis[3] = (int)ceil(MIN((double)self->image_height, (h - oy) / lz));
}

/* This view's own image: the overview's mip for the zoom, or the crop of what is on screen at
 * full resolution when zoomed past the overview. */
void cl_image_view_draw_own(ClImageView *self, GtkSnapshot *snapshot, double ox, double oy,
                            double lz, double zoom)
{
    if (!self->has_align) {
        /* straight onto the screen: texel edges land on whole device pixels when zoomed in, so
         * the nearest-neighbour crop stays sharp (no transform for the renderer to filter) */
        int vis[4];
        cl_image_view_screen_pixels(self, ox, oy, lz, vis);
        gboolean need_detail = zoom > CL_VIEW_NEAREST_ZOOM || zoom > self->texture_scale * 1.001;
        if (need_detail &&
            snapshot_detail(self, snapshot, vis[0], vis[1], vis[2], vis[3], zoom, ox, oy, lz))
            return;
        cl_image_mip_append(snapshot, cl_image_mips_pick(self->mips, self->image_width, zoom),
                            self->image_width, self->image_height, vis,
                            &GRAPHENE_RECT_INIT((float)ox, (float)oy,
                                                (float)(self->image_width * lz),
                                                (float)(self->image_height * lz)));
        return;
    }
    int vis[4];
    cl_image_view_push_image_space(self, self, snapshot, ox, oy, lz, vis);
    double z = zoom_of(self, self, zoom);
    gboolean need_detail = z > CL_VIEW_NEAREST_ZOOM || z > self->texture_scale * 1.001;
    if (!need_detail ||
        !snapshot_detail(self, snapshot, vis[0], vis[1], vis[2], vis[3], z, 0, 0, 1))
        cl_image_mip_append(
            snapshot, cl_image_mips_pick(self->mips, self->image_width, z), self->image_width,
            self->image_height, vis,
            &GRAPHENE_RECT_INIT(0, 0, (float)self->image_width, (float)self->image_height));
    gtk_snapshot_restore(snapshot);
}

/* The partner's image (the mip for its size here), laid over this one: through its alignment,
 * or stretched onto this image. */
void cl_image_view_draw_partner(ClImageView *self, GtkSnapshot *snapshot, double ox, double oy,
                                double lz, double zoom)
{
    ClImageView *p = self->partner;
    int vis[4];
    cl_image_view_push_image_space(self, p, snapshot, ox, oy, lz, vis);
    const ClImageMip *m = cl_image_mips_pick(p->mips, p->image_width, zoom_of(self, p, zoom));
    cl_image_mip_append(snapshot, m, p->image_width, p->image_height, vis,
                        &GRAPHENE_RECT_INIT(0, 0, (float)p->image_width, (float)p->image_height));
    gtk_snapshot_restore(snapshot);
}
