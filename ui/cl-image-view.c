/* cl-image-view.c - ClImageView: one image frame on screen, zoomed and panned via a ClViewport;
 * the widget's properties, input and drawing order (pictures: cl-image-render.c, comparison with
 * the partner: cl-image-compare.c). */
#include "cl-image-view-private.h"
#include "image/measure.h"

#include <glib/gi18n.h>

#include <math.h>
#include <string.h>

#include "image/display.h"

G_DEFINE_FINAL_TYPE(ClImageView, cl_image_view, GTK_TYPE_WIDGET)

GParamSpec *cl_image_view_properties[N_PROPS];
guint cl_image_view_signals[N_SIGNALS];

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
    cl_image_view_clear_measurement(self);
    cl_image_view_clear_pictures(self);
    self->image_width = self->image_height = 0;

    if (document)
        cl_image_view_render(self, NULL);
    g_object_freeze_notify(G_OBJECT(self));
    g_object_notify_by_pspec(G_OBJECT(self), cl_image_view_properties[PROP_DOCUMENT]);
    g_object_notify_by_pspec(G_OBJECT(self), cl_image_view_properties[PROP_FRAME]);
    g_object_notify_by_pspec(G_OBJECT(self), cl_image_view_properties[PROP_TEXTURE]);
    g_object_notify_by_pspec(G_OBJECT(self), cl_image_view_properties[PROP_LOADING]);
    g_object_thaw_notify(G_OBJECT(self));
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

void cl_image_view_set_alignment(ClImageView *self, const double m[6])
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    self->has_align = m != NULL;
    if (m) {
        memcpy(self->align, m, sizeof self->align);
        cl_image_affine_invert(self->align, self->align_inv);
    }
    cl_image_view_clear_detail(self);
    gtk_widget_queue_draw(GTK_WIDGET(self));
    /* views showing this one as their partner redraw and recompute their difference */
    g_object_notify_by_pspec(G_OBJECT(self), cl_image_view_properties[PROP_TEXTURE]);
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
    self->settings = *settings;
    cl_image_view_render(self, settings);
    g_object_notify_by_pspec(G_OBJECT(self), cl_image_view_properties[PROP_LOADING]);
}

void cl_image_view_set_stretch_images(ClImageView *self, ClDocument *const *docs,
                                      const guint *frames, guint n)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    g_return_if_fail(n <= G_N_ELEMENTS(self->stretch_docs));
    g_return_if_fail(n == 0 || (docs != NULL && frames != NULL));
    for (guint i = 0; i < self->n_stretch; i++)
        g_clear_object(&self->stretch_docs[i]);
    self->n_stretch = 0;
    for (guint i = 0; i < n; i++) {
        g_return_if_fail(CL_IS_DOCUMENT(docs[i]));
        self->stretch_docs[i] = g_object_ref(docs[i]);
        self->stretch_frames[i] = frames[i];
        self->n_stretch++;
    }
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
    g_object_notify_by_pspec(G_OBJECT(self), cl_image_view_properties[PROP_VIEWPORT]);
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
    /* a viewport shared with the other pane fits the smaller of the two (a border makes them
     * differ by a pixel or two): else a relayout of one pane alone moves the zoom */
    ClImageView *peer = self->fit_peer;
    if (peer && peer->viewport == self->viewport && gtk_widget_is_visible(GTK_WIDGET(peer)) &&
        gtk_widget_is_visible(GTK_WIDGET(self))) {
        double pw = gtk_widget_get_width(GTK_WIDGET(peer)),
               ph = gtk_widget_get_height(GTK_WIDGET(peer));
        if (pw > 0 && ph > 0)
            w = MIN(w, pw), h = MIN(h, ph);
    }
    if (w > 0 && h > 0)
        cl_viewport_fit_to(self->viewport, w * s, h * s);
    else
        cl_viewport_set_fit(self->viewport, TRUE); /* applied at the first allocation */
}

void cl_image_view_set_fit_peer(ClImageView *self, ClImageView *peer)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    g_return_if_fail(peer == NULL || CL_IS_IMAGE_VIEW(peer));
    if (self->fit_peer)
        g_object_remove_weak_pointer(G_OBJECT(self->fit_peer), (gpointer *)&self->fit_peer);
    self->fit_peer = peer;
    if (peer)
        g_object_add_weak_pointer(G_OBJECT(peer), (gpointer *)&self->fit_peer);
}

/* ---- measuring ---- */

void cl_image_view_measure(ClImageView *self, ClViewMeasure kind, double x0, double y0, double x1,
                           double y1)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    g_clear_pointer(&self->measure_text, g_free);
    self->measure_kind = kind;
    self->meas_x0 = x0, self->meas_y0 = y0, self->meas_x1 = x1, self->meas_y1 = y1;
    const ClImage *img = self->document ? cl_document_get_image(self->document) : NULL;
    if (kind == CL_VIEW_MEASURE_LENGTH) {
        double len = 0;
        ClMeasureUnit u = cl_measure_length(img, x0, y0, x1, y1, &len);
        self->measure_text = cl_measure_length_text(u, len);
    } else if (kind == CL_VIEW_MEASURE_REGION) {
        ClMeasureRegion r;
        if (cl_measure_region(img, self->frame, x0, y0, x1, y1, &r))
            self->measure_text = cl_measure_region_text(img, &r);
        else
            /* TRANSLATORS: a measured rectangle that holds no pixel's centre */
            self->measure_text = g_strdup(_("no pixels"));
    }
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

const char *cl_image_view_get_measurement(ClImageView *self)
{
    g_return_val_if_fail(CL_IS_IMAGE_VIEW(self), NULL);
    return self->measure_kind != CL_VIEW_MEASURE_NONE ? self->measure_text : NULL;
}

void cl_image_view_clear_measurement(ClImageView *self)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    self->measure_kind = CL_VIEW_MEASURE_NONE;
    self->measuring = FALSE;
    g_clear_pointer(&self->measure_text, g_free);
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

/* White text (tw × th pixels) at (x, y) on a dark box of opacity `shade`. */
static void draw_label(cairo_t *cr, PangoLayout *layout, double x, double y, int tw, int th,
                       double shade)
{
    cairo_set_source_rgba(cr, 0, 0, 0, shade);
    cairo_rectangle(cr, x - 4, y - 2, tw + 8, th + 4);
    cairo_fill(cr);
    cairo_set_source_rgba(cr, 1, 1, 1, 0.95);
    cairo_move_to(cr, x, y);
    pango_cairo_show_layout(cr, layout);
}

/* The measurement over the image: the line or rectangle, and its text on a dark box. */
static void draw_measurement(ClImageView *self, GtkSnapshot *snapshot, double ox, double oy,
                             double lz)
{
    if (self->measure_kind == CL_VIEW_MEASURE_NONE)
        return;
    const double w = gtk_widget_get_width(GTK_WIDGET(self)),
                 h = gtk_widget_get_height(GTK_WIDGET(self));
    const double x0 = ox + self->meas_x0 * lz, y0 = oy + self->meas_y0 * lz;
    const double x1 = ox + self->meas_x1 * lz, y1 = oy + self->meas_y1 * lz;
    cairo_t *cr =
        gtk_snapshot_append_cairo(snapshot, &GRAPHENE_RECT_INIT(0, 0, (float)w, (float)h));
    cairo_set_line_width(cr, 2.0);
    cairo_set_source_rgba(cr, 1.0, 0.85, 0.1, 0.95);
    if (self->measure_kind == CL_VIEW_MEASURE_LENGTH) {
        cairo_move_to(cr, x0, y0);
        cairo_line_to(cr, x1, y1);
    } else {
        cairo_rectangle(cr, MIN(x0, x1), MIN(y0, y1), fabs(x1 - x0), fabs(y1 - y0));
    }
    cairo_stroke(cr);
    if (self->measure_text) {
        PangoLayout *layout = gtk_widget_create_pango_layout(GTK_WIDGET(self), self->measure_text);
        int tw = 0, th = 0;
        pango_layout_get_pixel_size(layout, &tw, &th);
        const double tx = CLAMP(MAX(x0, x1) + 6, 2, MAX(w - tw - 8, 2.0));
        const double ty = CLAMP(MAX(y0, y1) + 6, 2, MAX(h - th - 6, 2.0));
        draw_label(cr, layout, tx, ty, tw, th, 0.7);
        g_object_unref(layout);
    }
    cairo_destroy(cr);
}

/* ---- corner overlays ---- */

void cl_image_view_set_overlays(ClImageView *self, gboolean shown)
{
    g_return_if_fail(CL_IS_IMAGE_VIEW(self));
    if (self->overlays == !!shown)
        return;
    self->overlays = !!shown;
    g_object_notify_by_pspec(G_OBJECT(self), cl_image_view_properties[PROP_OVERLAYS]);
    gtk_widget_queue_draw(GTK_WIDGET(self));
}

gboolean cl_image_view_get_overlays(ClImageView *self)
{
    g_return_val_if_fail(CL_IS_IMAGE_VIEW(self), FALSE);
    return self->overlays;
}

/* "YYYYMMDDHHMMSS…" as "YYYY-MM-DD HH:MM" (what there is of it) */
static char *readable_datetime(const char *dt)
{
    const gsize n = strlen(dt);
    if (n < 8)
        return g_strdup(dt);
    GString *s = g_string_new(NULL);
    g_string_append_printf(s, "%.4s-%.2s-%.2s", dt, dt + 4, dt + 6);
    if (n >= 12)
        g_string_append_printf(s, " %.2s:%.2s", dt + 8, dt + 10);
    return g_string_free(s, FALSE);
}

char *cl_image_view_get_overlay_text(ClImageView *self, ClViewCorner corner)
{
    g_return_val_if_fail(CL_IS_IMAGE_VIEW(self), NULL);
    const ClImage *img = self->document ? cl_document_get_image(self->document) : NULL;
    if (!img)
        return g_strdup("");
    GString *s = g_string_new(NULL);
    switch (corner) {
    case CL_VIEW_TOP_LEFT:
        if (img->patient_name && *img->patient_name) {
            g_autofree char *name = g_strdup(img->patient_name);
            g_strdelimit(name, "^", ' ');
            g_string_append(s, g_strstrip(name));
        }
        if (img->patient_id && *img->patient_id)
            g_string_append_printf(s, "%sID %s", s->len ? "\n" : "", img->patient_id);
        break;
    case CL_VIEW_TOP_RIGHT: {
        const char *when = img->study_datetime ? img->study_datetime : img->acquisition_datetime;
        if (when && *when) {
            g_autofree char *d = readable_datetime(when);
            g_string_append(s, d);
        }
        const char *series = cl_image_get_meta(img, "SeriesDescription");
        if (img->modality || series)
            g_string_append_printf(s, "%s%s%s%s", s->len ? "\n" : "",
                                   img->modality ? img->modality : "",
                                   img->modality && series ? " · " : "", series ? series : "");
        break;
    }
    case CL_VIEW_BOTTOM_LEFT: {
        /* what the picture was rendered with (a stretch's resolved range: nothing is computed
         * here, the draw must stay cheap on a huge image) */
        double c = 0, w = 0;
        if (!self->image_width)
            break;
        if (self->settings.mode == CL_DISPLAY_VOI_LUT) {
            g_string_append(s, "VOI LUT");
            break;
        }
        if (self->settings.mode == CL_DISPLAY_FULL_RANGE)
            break; /* values as the file means them (8-bit photographs): no window to tell */
        if (self->settings.mode == CL_DISPLAY_WINDOW)
            c = self->settings.center, w = self->settings.width;
        else if (self->ranges.hi[0] > self->ranges.lo[0])
            c = (self->ranges.lo[0] + self->ranges.hi[0]) / 2,
            w = self->ranges.hi[0] - self->ranges.lo[0];
        else
            break;
        g_string_append_printf(s, "W %.6g L %.6g%s%s", w, c, img->rescale_type ? " " : "",
                               img->rescale_type ? img->rescale_type : "");
        break;
    }
    case CL_VIEW_BOTTOM_RIGHT: {
        const guint n = cl_image_n_frames(img);
        if (n > 1)
            /* TRANSLATORS: the frame shown of a multi-frame image, "frame 3 / 24" */
            g_string_append_printf(s, _("frame %u / %u"), self->frame + 1, n);
        g_string_append_printf(s, "%s%.0f %%", s->len ? "\n" : "",
                               cl_viewport_get_zoom(self->viewport) * 100);
        break;
    }
    }
    return g_string_free(s, FALSE);
}

/* The corners' texts over the image, on dark boxes. */
static void draw_overlays(ClImageView *self, GtkSnapshot *snapshot)
{
    if (!self->overlays || !self->document)
        return;
    const double w = gtk_widget_get_width(GTK_WIDGET(self)),
                 h = gtk_widget_get_height(GTK_WIDGET(self));
    cairo_t *cr =
        gtk_snapshot_append_cairo(snapshot, &GRAPHENE_RECT_INIT(0, 0, (float)w, (float)h));
    for (int c = CL_VIEW_TOP_LEFT; c <= CL_VIEW_BOTTOM_RIGHT; c++) {
        g_autofree char *text = cl_image_view_get_overlay_text(self, (ClViewCorner)c);
        if (!*text)
            continue;
        PangoLayout *layout = gtk_widget_create_pango_layout(GTK_WIDGET(self), text);
        const gboolean right = c == CL_VIEW_TOP_RIGHT || c == CL_VIEW_BOTTOM_RIGHT;
        pango_layout_set_alignment(layout, right ? PANGO_ALIGN_RIGHT : PANGO_ALIGN_LEFT);
        int tw = 0, th = 0;
        pango_layout_get_pixel_size(layout, &tw, &th);
        const double x = right ? w - tw - 8 : 8;
        const double y = c >= CL_VIEW_BOTTOM_LEFT ? h - th - 8 : 8;
        draw_label(cr, layout, x, y, tw, th, 0.55);
        g_object_unref(layout);
    }
    cairo_destroy(cr);
}

/* ---- drawing ---- */

/* The image (or the compare mode's picture), then the ignore regions, then the heat overlay. */
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
    cl_image_view_draw_compare(self, snapshot, ox, oy, lz, zoom);
    cl_image_view_draw_masks(self, snapshot, ox, oy, lz);
    cl_image_view_draw_heat(self, snapshot, ox, oy, lz);
    draw_measurement(self, snapshot, ox, oy, lz);
    draw_overlays(self, snapshot);
}

static void cl_image_view_map(GtkWidget *widget)
{
    GTK_WIDGET_CLASS(cl_image_view_parent_class)->map(widget);
    cl_image_view_update_flicker(CL_IMAGE_VIEW(widget));
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
    /* a click on the image gives it the keys (0, 1, +, -, ...) back from a text field */
    gtk_widget_grab_focus(GTK_WIDGET(self));
    GdkModifierType mods = gtk_event_controller_get_current_event_state(GTK_EVENT_CONTROLLER(drag));
    self->measuring = (mods & GDK_CONTROL_MASK) && self->texture && !self->has_align;
    if (self->measuring) {
        double ix, iy;
        cl_image_view_widget_to_image(self, x, y, &ix, &iy);
        cl_image_view_measure(
            self, (mods & GDK_SHIFT_MASK) ? CL_VIEW_MEASURE_REGION : CL_VIEW_MEASURE_LENGTH, ix, iy,
            ix, iy);
        gtk_widget_set_cursor_from_name(GTK_WIDGET(self), "crosshair");
        return;
    }
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
    if (self->measuring) {
        double x0, y0, ix, iy;
        if (gtk_gesture_drag_get_start_point(drag, &x0, &y0)) {
            cl_image_view_widget_to_image(self, x0 + offset_x, y0 + offset_y, &ix, &iy);
            cl_image_view_measure(self, self->measure_kind, self->meas_x0, self->meas_y0, ix, iy);
        }
        return;
    }
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
    if (self->measuring) {
        self->measuring = FALSE;
        /* a Ctrl+click without a drag clears it */
        if (hypot(offset_x, offset_y) < 2)
            cl_image_view_clear_measurement(self);
        gtk_widget_set_cursor_from_name(GTK_WIDGET(self), "grab");
        return;
    }
    if (self->drawing_mask) {
        self->drawing_mask = FALSE;
        double x0 = CLAMP(MIN(self->mask_x0, self->mask_x1), 0, self->image_width);
        double x1 = CLAMP(MAX(self->mask_x0, self->mask_x1), 0, self->image_width);
        double y0 = CLAMP(MIN(self->mask_y0, self->mask_y1), 0, self->image_height);
        double y1 = CLAMP(MAX(self->mask_y0, self->mask_y1), 0, self->image_height);
        if (x1 - x0 >= 1 && y1 - y0 >= 1)
            g_signal_emit(self, cl_image_view_signals[SIGNAL_MASK_DRAWN], 0, x0, y0, x1, y1);
        gtk_widget_queue_draw(GTK_WIDGET(self));
    }
    self->dragging_divider = FALSE;
    gtk_widget_set_cursor_from_name(GTK_WIDGET(self), "grab");
}

/* ---- window/level by dragging with the secondary button ---- */

static void on_wl_begin(GtkGestureDrag *drag, double x, double y, ClImageView *self)
{
    gtk_widget_grab_focus(GTK_WIDGET(self));
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
    g_signal_emit(self, cl_image_view_signals[SIGNAL_WINDOW_LEVEL_BEGIN], 0);
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
    g_signal_emit(self, cl_image_view_signals[SIGNAL_DISPLAY_CHANGED], 0);
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
    case PROP_DOCUMENT: g_value_set_object(value, self->document); break;
    case PROP_FRAME: g_value_set_uint(value, self->frame); break;
    case PROP_VIEWPORT: g_value_set_object(value, self->viewport); break;
    case PROP_TEXTURE: g_value_set_object(value, self->texture); break;
    case PROP_LOADING: g_value_set_boolean(value, cl_image_view_get_loading(self)); break;
    case PROP_COMPARE_MODE: g_value_set_int(value, self->mode); break;
    case PROP_CHANGED_FRACTION: g_value_set_double(value, self->changed_fraction); break;
    case PROP_OVERLAYS: g_value_set_boolean(value, self->overlays); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    }
}

static void cl_image_view_set_property(GObject *object, guint prop_id, const GValue *value,
                                       GParamSpec *pspec)
{
    ClImageView *self = CL_IMAGE_VIEW(object);
    switch (prop_id) {
    case PROP_VIEWPORT: cl_image_view_set_viewport(self, g_value_get_object(value)); break;
    case PROP_OVERLAYS: cl_image_view_set_overlays(self, g_value_get_boolean(value)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
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
    cl_image_view_compare_dispose(self);
    g_clear_pointer(&self->measure_text, g_free);
    cl_image_view_set_fit_peer(self, NULL);
    cl_image_view_set_stretch_images(self, NULL, NULL, 0);
    g_clear_object(&self->document);
    cl_image_view_clear_pictures(self);
    G_OBJECT_CLASS(cl_image_view_parent_class)->dispose(object);
}

static void cl_image_view_class_init(ClImageViewClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    GtkWidgetClass *widget_class = GTK_WIDGET_CLASS(klass);
    GParamSpec **properties = cl_image_view_properties;
    guint *signals = cl_image_view_signals;

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
    /* the corner overlays (cl_image_view_set_overlays) */
    properties[PROP_OVERLAYS] =
        g_param_spec_boolean("overlays", NULL, NULL, FALSE,
                             G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties(object_class, N_PROPS, properties);

    /* The frame could not be rendered (memory, bad frame): the GError says why, naming the file. */
    signals[SIGNAL_RENDER_FAILED] =
        g_signal_new("render-failed", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                     NULL, G_TYPE_NONE, 1, G_TYPE_ERROR);

    /* The user set a window/level by dragging (cl_image_view_get_display tells it). */
    signals[SIGNAL_DISPLAY_CHANGED] =
        g_signal_new("display-changed", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                     NULL, G_TYPE_NONE, 0);

    /* A window/level drag starts (before its first change): what was shown can be kept. */
    signals[SIGNAL_WINDOW_LEVEL_BEGIN] =
        g_signal_new("window-level-begin", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL,
                     NULL, NULL, G_TYPE_NONE, 0);

    /* Shift+drag drew an ignore region: x0, y0, x1, y1 in this image's pixels (the owner of the
     * masks decides what to do with it: cl_image_view_set_masks shows them). */
    signals[SIGNAL_MASK_DRAWN] =
        g_signal_new("mask-drawn", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                     G_TYPE_NONE, 4, G_TYPE_DOUBLE, G_TYPE_DOUBLE, G_TYPE_DOUBLE, G_TYPE_DOUBLE);

    gtk_widget_class_set_css_name(widget_class, "imageview");
}

static void cl_image_view_init(ClImageView *self)
{
    GtkWidget *widget = GTK_WIDGET(self);
    gtk_widget_set_overflow(widget, GTK_OVERFLOW_HIDDEN);
    gtk_widget_set_hexpand(widget, TRUE);
    gtk_widget_set_vexpand(widget, TRUE);
    gtk_widget_set_cursor_from_name(widget, "grab");
    /* focusable, so that the window's plain keys reach it (not a text field) after a click */
    gtk_widget_set_focusable(widget, TRUE);
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
