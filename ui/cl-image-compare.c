/* cl-image-compare.c - ClImageView's comparison with its partner view: swipe, blend (onion
 * skin), flicker and the difference with its tolerance, plus the ignore masks and the heat
 * overlay drawn over every mode. */
#include "cl-image-view-private.h"

#include <math.h>
#include <string.h>

#include "worker/worker.h"

/* ---- ignore regions ---- */

void cl_image_view_set_masks(ClImageView *self, const double *rects, guint n)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    g_array_set_size(self->masks, 0);
    if (n)
        g_array_append_vals(self->masks, rects, n * 4);
    cl_image_view_update_diff(self);
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

guint cl_image_view_get_n_masks(ClImageView *self)
{
    g_return_val_if_fail(CL_IS_IMAGE_VIEW(self), 0);
    return self->masks->len / 4;
}

/* ---- the difference ---- */

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
    r->mips = cl_image_mips_new(r->rgba, r->width, r->height);
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
        self->diff = g_object_ref(((ClImageMip *)self->diff_mips->pdata[0])->texture);
        self->changed_fraction = r->changed_fraction;
        diff_result_free(r);
    } else {
        g_signal_emit(self, cl_image_view_signals[SIGNAL_RENDER_FAILED], 0, error);
    }
    g_object_notify_by_pspec(G_OBJECT(self), cl_image_view_properties[PROP_CHANGED_FRACTION]);
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

/* Drops the difference picture and, in difference mode with both images rendered, starts
 * computing the new one. */
void cl_image_view_update_diff(ClImageView *self)
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
        cl_image_view_frame_to_image(self, self->partner, fm);
        double sa = self->texture_scale, sb = self->partner->texture_scale;
        j->map[0] = sb * fm[0], j->map[1] = sb * fm[1] / sa, j->map[2] = sb * fm[2] / sa;
        j->map[3] = sb * fm[3], j->map[4] = sb * fm[4] / sa, j->map[5] = sb * fm[5] / sa;
        j->tolerance = self->tolerance;
        self->diff_cancellable = g_cancellable_new();
        g_autoptr(GTask) task = g_task_new(self, self->diff_cancellable, diff_done, NULL);
        g_task_set_source_tag(task, cl_image_view_update_diff);
        g_task_set_task_data(task, j, (GDestroyNotify)diff_job_free);
        g_task_run_in_thread(task, diff_thread);
    }
    if (was_known)
        g_object_notify_by_pspec(G_OBJECT(self), cl_image_view_properties[PROP_CHANGED_FRACTION]);
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

/* ---- the partner and the modes ---- */

static void partner_texture_changed(ClImageView *self)
{
    cl_image_view_update_diff(self);
}

static void partner_gone(gpointer data, GObject *where)
{
    ClImageView *self = data;
    self->partner = NULL;
    self->partner_texture_id = 0;
    cl_image_view_update_diff(self);
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
    cl_image_view_update_diff(self);
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

void cl_image_view_update_flicker(ClImageView *self)
{
    g_clear_handle_id(&self->flicker_id, g_source_remove);
    self->flicker_phase = FALSE;
    if (self->mode == CL_COMPARE_FLICKER && gtk_widget_get_mapped(GTK_WIDGET(self)))
        self->flicker_id =
            g_timeout_add((guint)lround(1000.0 / self->flicker_rate), flicker_tick, self);
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

void cl_image_view_set_compare_mode(ClImageView *self, ClCompareMode mode)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    g_return_if_fail(mode <= CL_COMPARE_DIFFERENCE);
    if (mode == self->mode)
        return;
    self->mode = mode;
    cl_image_view_update_flicker(self);
    cl_image_view_update_diff(self);
    g_object_notify_by_pspec(G_OBJECT(self), cl_image_view_properties[PROP_COMPARE_MODE]);
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
        cl_image_view_update_flicker(self);
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
    cl_image_view_update_diff(self);
}

double cl_image_view_get_changed_fraction(ClImageView *self)
{
    g_return_val_if_fail(CL_IS_IMAGE_VIEW(self), -1);
    return self->changed_fraction;
}

/* ---- the heat overlay ---- */

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

static void draw_divider(GtkSnapshot *snapshot, double x, double h)
{
    GdkRGBA dark = { 0, 0, 0, 0.5 }, light = { 1, 1, 1, 0.9 };
    gtk_snapshot_append_color(snapshot, &dark, &GRAPHENE_RECT_INIT((float)x - 2, 0, 4, (float)h));
    gtk_snapshot_append_color(snapshot, &light, &GRAPHENE_RECT_INIT((float)x - 1, 0, 2, (float)h));
}

void cl_image_view_draw_compare(ClImageView *self, GtkSnapshot *snapshot, double ox, double oy,
                                double lz, double zoom)
{
    GtkWidget *widget = GTK_WIDGET(self);
    double w = gtk_widget_get_width(widget), h = gtk_widget_get_height(widget);
    double iw = self->image_width * lz, ih = self->image_height * lz;
    graphene_rect_t image_rect = GRAPHENE_RECT_INIT((float)ox, (float)oy, (float)iw, (float)ih);
    gboolean other = self->partner && self->partner->mips;

    switch (self->mode) {
    case CL_COMPARE_NONE: cl_image_view_draw_own(self, snapshot, ox, oy, lz, zoom); break;
    case CL_COMPARE_SWIPE: {
        double x = round(w * self->swipe);
        cl_image_view_draw_own(self, snapshot, ox, oy, lz, zoom);
        if (other) {
            gtk_snapshot_push_clip(snapshot,
                                   &GRAPHENE_RECT_INIT((float)x, 0, (float)(w - x), (float)h));
            cl_image_view_draw_partner(self, snapshot, ox, oy, lz, zoom);
            gtk_snapshot_pop(snapshot);
        }
        draw_divider(snapshot, x, h);
        break;
    }
    case CL_COMPARE_BLEND:
        cl_image_view_draw_own(self, snapshot, ox, oy, lz, zoom);
        if (other) {
            gtk_snapshot_push_opacity(snapshot, self->blend);
            cl_image_view_draw_partner(self, snapshot, ox, oy, lz, zoom);
            gtk_snapshot_pop(snapshot);
        }
        break;
    case CL_COMPARE_FLICKER:
        if (self->flicker_phase && other)
            cl_image_view_draw_partner(self, snapshot, ox, oy, lz, zoom);
        else
            cl_image_view_draw_own(self, snapshot, ox, oy, lz, zoom);
        break;
    case CL_COMPARE_DIFFERENCE:
        if (self->diff) {
            int vis[4];
            cl_image_view_screen_pixels(self, ox, oy, lz, vis);
            cl_image_mip_append(snapshot,
                                cl_image_mips_pick(self->diff_mips, self->image_width, zoom),
                                self->image_width, self->image_height, vis, &image_rect);
        } else
            cl_image_view_draw_own(self, snapshot, ox, oy, lz, zoom); /* while it is computed */
        break;
    }
}

void cl_image_view_draw_masks(ClImageView *self, GtkSnapshot *snapshot, double ox, double oy,
                              double lz)
{
    if (!self->masks->len && !self->drawing_mask)
        return;
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
        cl_image_view_push_image_space(self, self, snapshot, ox, oy, lz, vis);
        graphene_rect_t gr = GRAPHENE_RECT_INIT((float)r[0], (float)r[1], (float)(r[2] - r[0]),
                                                (float)(r[3] - r[1]));
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

void cl_image_view_draw_heat(ClImageView *self, GtkSnapshot *snapshot, double ox, double oy,
                             double lz)
{
    if (!self->heat || self->heat_opacity <= 0)
        return;
    /* the heat map belongs to the later image: the partner's in an overlaid mode */
    gboolean other = self->partner && self->partner->mips;
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
        cl_image_view_push_image_space(self, v, snapshot, ox, oy, lz, vis);
    }
    gtk_snapshot_push_clip(snapshot, &GRAPHENE_RECT_INIT(0, 0, (float)vw, (float)vh));
    gtk_snapshot_push_opacity(snapshot, self->heat_opacity);
    gtk_snapshot_append_texture(snapshot, self->heat,
                                &GRAPHENE_RECT_INIT((float)(self->heat_u0 * vw),
                                                    (float)(self->heat_v0 * vh),
                                                    (float)((self->heat_u1 - self->heat_u0) * vw),
                                                    (float)((self->heat_v1 - self->heat_v0) * vh)));
    gtk_snapshot_pop(snapshot);
    gtk_snapshot_pop(snapshot);
    gtk_snapshot_restore(snapshot);
}

void cl_image_view_compare_dispose(ClImageView *self)
{
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
}
