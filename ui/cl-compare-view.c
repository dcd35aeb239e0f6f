/* cl-compare-view.c - ClCompareView: the two image panes, their viewports (one shared when
 * linked), the compare modes and the mode bar's controls (mode slider, difference share,
 * alignment words, masks, heat map opacity and encoder block), the ignore regions and the heat
 * map over the later image. Captions, readouts and window/level: cl-compare-view-display.c. */
#include "cl-compare-view-private.h"

#include <glib/gi18n.h>

#include "image/measure.h"
#include <math.h>
#include <string.h>

#include "align/register.h"
#include "cl-document.h"
#include "image/display.h"

static void cl_compare_view_buildable_init(GtkBuildableIface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE(ClCompareView, cl_compare_view, GTK_TYPE_BOX,
                              G_IMPLEMENT_INTERFACE(GTK_TYPE_BUILDABLE,
                                                    cl_compare_view_buildable_init))

enum {
    PROP_0,
    PROP_LINK_VIEWS,
    PROP_COMPARE_MODE,
    PROP_SHOW_HEATMAP,
    PROP_SYNC_WINDOW_LEVEL,
    PROP_ZOOM,
    PROP_SIDE_WIDTH,
    PROP_STRETCH,
    N_PROPS
};
static GParamSpec *properties[N_PROPS];

static GtkBuildableIface *parent_buildable_iface;

ClImageView *cl_compare_view_get_view(ClCompareView *self, guint index)
{
    g_return_val_if_fail(CL_IS_COMPARE_VIEW(self), NULL);
    g_return_val_if_fail(index < 2, NULL);
    return index == 0 ? self->view_a : self->view_b;
}

/* ---- viewports and zoom ---- */

static void on_zoom_changed(ClCompareView *self)
{
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_ZOOM]);
}

static void follow_zoom_of_view_a(ClCompareView *self)
{
    ClViewport *vp = cl_image_view_get_viewport(self->view_a);
    if (vp == self->zoom_viewport)
        return;
    if (self->zoom_viewport)
        g_clear_signal_handler(&self->zoom_id, self->zoom_viewport);
    g_set_object(&self->zoom_viewport, vp);
    self->zoom_id = g_signal_connect_swapped(vp, "notify::zoom", G_CALLBACK(on_zoom_changed), self);
    on_zoom_changed(self);
}

double cl_compare_view_get_zoom(ClCompareView *self)
{
    g_return_val_if_fail(CL_IS_COMPARE_VIEW(self), 1.0);
    return cl_viewport_get_zoom(cl_image_view_get_viewport(self->view_a));
}

/* Linked: both views share one viewport. Unlinked: each has its own, starting where they were. */
static void apply_link(ClCompareView *self)
{
    ClViewport *current_a = cl_image_view_get_viewport(self->view_a);
    if (self->link_views) {
        if (current_a != self->shared_viewport) {
            guint cw, ch;
            cl_viewport_get_content_size(self->shared_viewport, &cw, &ch);
            cl_viewport_copy_from(self->shared_viewport, current_a);
            cl_viewport_set_content_size(self->shared_viewport, cw, ch);
        }
        cl_image_view_set_viewport(self->view_a, self->shared_viewport);
        cl_image_view_set_viewport(self->view_b, self->shared_viewport);
    } else {
        for (guint i = 0; i < 2; i++) {
            guint cw, ch;
            cl_viewport_get_content_size(self->own_viewport[i], &cw, &ch);
            cl_viewport_copy_from(self->own_viewport[i], self->shared_viewport);
            cl_viewport_set_content_size(self->own_viewport[i], cw, ch);
            cl_image_view_set_viewport(cl_compare_view_get_view(self, i), self->own_viewport[i]);
        }
    }
    follow_zoom_of_view_a(self);
}

gboolean cl_compare_view_get_link_views(ClCompareView *self)
{
    g_return_val_if_fail(CL_IS_COMPARE_VIEW(self), FALSE);
    return self->link_views;
}

void cl_compare_view_set_link_views(ClCompareView *self, gboolean link_views)
{
    g_return_if_fail(CL_IS_COMPARE_VIEW(self));
    link_views = !!link_views;
    if (link_views == self->link_views)
        return;
    self->link_views = link_views;
    apply_link(self);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_LINK_VIEWS]);
}

/* The distinct viewports the views use now (1 when linked, 2 when not). */
static guint active_viewports(ClCompareView *self, ClViewport *out[2])
{
    out[0] = cl_image_view_get_viewport(self->view_a);
    out[1] = cl_image_view_get_viewport(self->view_b);
    return out[0] == out[1] ? 1 : 2;
}

void cl_compare_view_zoom_by(ClCompareView *self, double factor)
{
    g_return_if_fail(CL_IS_COMPARE_VIEW(self));
    ClViewport *vps[2];
    guint n = active_viewports(self, vps);
    for (guint i = 0; i < n; i++)
        cl_viewport_zoom_at(vps[i], factor, cl_viewport_get_center_x(vps[i]),
                            cl_viewport_get_center_y(vps[i]));
}

void cl_compare_view_zoom_100(ClCompareView *self)
{
    g_return_if_fail(CL_IS_COMPARE_VIEW(self));
    ClViewport *vps[2];
    guint n = active_viewports(self, vps);
    for (guint i = 0; i < n; i++)
        cl_viewport_set_zoom(vps[i], 1.0);
}

void cl_compare_view_fit(ClCompareView *self)
{
    g_return_if_fail(CL_IS_COMPARE_VIEW(self));
    cl_image_view_fit(self->view_a);
    cl_image_view_fit(self->view_b);
}

/* ---- the stretch shared by the images ---- */

static const char *const stretch_names[] = { "shared", "earlier", "later", "each" };
enum { STRETCH_SHARED, STRETCH_EARLIER, STRETCH_LATER, STRETCH_EACH };

/* Gives both views the images their stretch pools for docs (docs[1] NULL: one image). */
static void apply_stretch(ClCompareView *self, ClDocument *const docs[2], const guint frames[2])
{
    ClDocument *both[2] = { docs[0], docs[1] };
    guint n = docs[0] && docs[1] ? 2 : 0;
    const guint *f = frames;
    switch (self->stretch) {
    case STRETCH_EARLIER: n = n ? 1 : 0; break;
    case STRETCH_LATER:
        if (n)
            both[0] = docs[1], f = frames + 1, n = 1;
        break;
    case STRETCH_EACH: n = 0; break;
    default: break;
    }
    cl_image_view_set_stretch_images(self->view_a, both, f, n);
    cl_image_view_set_stretch_images(self->view_b, both, f, n);
}

const char *cl_compare_view_get_stretch(ClCompareView *self)
{
    g_return_val_if_fail(CL_IS_COMPARE_VIEW(self), NULL);
    return stretch_names[self->stretch];
}

gboolean cl_compare_view_set_stretch(ClCompareView *self, const char *source)
{
    g_return_val_if_fail(CL_IS_COMPARE_VIEW(self), FALSE);
    guint k = 0;
    while (k < G_N_ELEMENTS(stretch_names) && g_strcmp0(stretch_names[k], source) != 0)
        k++;
    if (k == G_N_ELEMENTS(stretch_names))
        return FALSE;
    if (k == self->stretch)
        return TRUE;
    self->stretch = k;
    ClDocument *docs[2];
    guint frames[2];
    for (guint i = 0; i < 2; i++) {
        ClImageView *v = cl_compare_view_get_view(self, i);
        docs[i] = cl_image_view_get_document(v);
        frames[i] = cl_image_view_get_frame(v);
    }
    apply_stretch(self, docs, frames);
    /* each view again with its display settings, under the new stretch */
    for (guint i = 0; i < 2; i++) {
        ClImageView *v = cl_compare_view_get_view(self, i);
        ClDisplaySettings s;
        if (cl_image_view_get_display(v, &s))
            cl_image_view_set_display(v, &s);
    }
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_STRETCH]);
    return TRUE;
}

/* ---- the side panel and its divider ---- */

/* Narrowest side panel the divider is placed at (the panel's own minimum may be wider). */
#define SIDE_MIN_WIDTH 240
#define SIDE_DEFAULT_WIDTH 380

/* The divider where side_width puts it, now that the paned has a width; FALSE before. */
static gboolean place_divider(ClCompareView *self)
{
    int w = gtk_widget_get_width(GTK_WIDGET(self->paned));
    if (w <= 0 || !gtk_widget_get_visible(self->side_scroller))
        return FALSE;
    self->placing = TRUE;
    gtk_paned_set_position(self->paned, MAX(w - self->side_width, 0));
    self->placing = FALSE;
    return TRUE;
}

static gboolean place_divider_tick(GtkWidget *widget, GdkFrameClock *clock, gpointer data)
{
    ClCompareView *self = data;
    if (!gtk_widget_get_visible(self->side_scroller) || place_divider(self)) {
        self->place_tick = 0;
        return G_SOURCE_REMOVE;
    }
    return G_SOURCE_CONTINUE;
}

/* Without a position of its own the paned would share its width by what the children would
 * like, and a description's one-line natural width takes most of the window: the divider is
 * always placed, at once when the panes are laid out, else before the next frame. */
static void queue_place_divider(ClCompareView *self)
{
    if (place_divider(self) || self->place_tick)
        return;
    self->place_tick =
        gtk_widget_add_tick_callback(GTK_WIDGET(self->paned), place_divider_tick, self, NULL);
}

/* The side slot shows while one of its children does; closed, the panes get all the width. */
static void update_side(ClCompareView *self)
{
    gboolean any = FALSE;
    for (GtkWidget *c = gtk_widget_get_first_child(GTK_WIDGET(self->side_box)); c && !any;
         c = gtk_widget_get_next_sibling(c))
        any = gtk_widget_get_visible(c) &&
              (!GTK_IS_REVEALER(c) || gtk_revealer_get_reveal_child(GTK_REVEALER(c)));
    if (any == gtk_widget_get_visible(self->side_scroller))
        return;
    gtk_widget_set_visible(self->side_scroller, any);
    if (any)
        queue_place_divider(self);
}

/* A drag of the divider (the window resizing moves it too, keeping the side's width). */
static void on_paned_position(ClCompareView *self)
{
    int w = gtk_widget_get_width(GTK_WIDGET(self->paned));
    if (self->placing || w <= 0 || !gtk_widget_get_visible(self->side_scroller) ||
        !gtk_widget_get_mapped(GTK_WIDGET(self->paned)))
        return;
    int side = w - gtk_paned_get_position(self->paned);
    if (side == self->side_width || side < SIDE_MIN_WIDTH)
        return;
    self->side_width = side;
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_SIDE_WIDTH]);
}

int cl_compare_view_get_side_width(ClCompareView *self)
{
    g_return_val_if_fail(CL_IS_COMPARE_VIEW(self), SIDE_DEFAULT_WIDTH);
    return self->side_width;
}

void cl_compare_view_set_side_width(ClCompareView *self, int width)
{
    g_return_if_fail(CL_IS_COMPARE_VIEW(self));
    width = MAX(width, SIDE_MIN_WIDTH);
    if (width == self->side_width)
        return;
    self->side_width = width;
    if (gtk_widget_get_visible(self->side_scroller))
        queue_place_divider(self);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_SIDE_WIDTH]);
}

/* ---- the heat map ---- */

void cl_compare_view_set_heatmap_colours(ClCompareView *self, ClHeatmapColours colours)
{
    g_return_if_fail(CL_IS_COMPARE_VIEW(self));
    cl_image_view_set_heatmap_colours(self->view_a, colours);
    cl_image_view_set_heatmap_colours(self->view_b, colours);
}

/* The heat map goes on the view that shows the later image: the right pane side by side, the
 * overlaid view otherwise (its normalised coordinates put it on the stretched later image). */
static ClImageView *heat_target(ClCompareView *self)
{
    return self->mode == CL_COMPARE_NONE ? self->view_b : self->view_a;
}

static void update_heat(ClCompareView *self)
{
    /* the mean over the encoder's blocks, or the block picked in the layer list */
    const ClHeatmap *shown = self->heatmap;
    guint layers = self->layer_heatmaps ? self->layer_heatmaps->len : 0;
    guint pick = gtk_drop_down_get_selected(self->layer_dropdown);
    if (shown && pick != GTK_INVALID_LIST_POSITION && pick > 0 && pick <= layers)
        shown = g_ptr_array_index(self->layer_heatmaps, pick - 1);
    gtk_widget_set_visible(GTK_WIDGET(self->layer_dropdown), self->heatmap && layers > 1);
    gboolean on = self->show_heatmap && shown;
    ClImageView *target = heat_target(self);
    ClImageView *other = target == self->view_a ? self->view_b : self->view_a;
    cl_image_view_set_heatmap(other, NULL, NULL);
    cl_image_view_set_heatmap_in_frame(target, self->heat_in_frame);
    cl_image_view_set_heatmap(target, on ? shown : NULL, on ? &self->heat_letterbox : NULL);
    double opacity = gtk_range_get_value(GTK_RANGE(self->heat_scale));
    cl_image_view_set_heatmap_opacity(target, opacity);
    gtk_widget_set_sensitive(GTK_WIDGET(self->heat_scale), on);
}

void cl_compare_view_show_map(ClCompareView *self, const ClHeatmap *map)
{
    g_return_if_fail(CL_IS_COMPARE_VIEW(self));
    if (!map) {
        update_heat(self);
        return;
    }
    ClImageView *target = heat_target(self);
    cl_image_view_set_heatmap(target, map, &self->heat_letterbox);
    cl_image_view_set_heatmap_opacity(target, gtk_range_get_value(GTK_RANGE(self->heat_scale)));
}

static void set_layer_heatmaps(ClCompareView *self, GPtrArray *layers)
{
    g_clear_pointer(&self->layer_heatmaps, g_ptr_array_unref);
    if (layers && layers->len)
        self->layer_heatmaps = g_ptr_array_ref(layers);
    guint n = self->layer_heatmaps ? self->layer_heatmaps->len : 0;
    GtkStringList *list = gtk_string_list_new(NULL);
    gtk_string_list_append(list, _("All blocks"));
    for (guint i = 0; i < n; i++) {
        /* TRANSLATORS: one block (layer) of the image encoder, for its own heat map */
        g_autofree char *item = g_strdup_printf(_("Block %u"), i + 1);
        gtk_string_list_append(list, item);
    }
    gtk_drop_down_set_model(self->layer_dropdown, G_LIST_MODEL(list));
    g_object_unref(list);
    gtk_drop_down_set_selected(self->layer_dropdown, 0);
}

const ClHeatmap *cl_compare_view_get_heatmap(ClCompareView *self, ClLetterbox *letterbox,
                                             gboolean *in_frame)
{
    g_return_val_if_fail(CL_IS_COMPARE_VIEW(self), NULL);
    if (letterbox)
        *letterbox = self->heat_letterbox;
    if (in_frame)
        *in_frame = self->heat_in_frame;
    return self->heatmap;
}

void cl_compare_view_set_heatmap(ClCompareView *self, ClHeatmap *heatmap, GPtrArray *layers,
                                 const ClLetterbox *letterbox, gboolean in_frame)
{
    g_return_if_fail(CL_IS_COMPARE_VIEW(self));
    g_clear_pointer(&self->heatmap, cl_heatmap_free);
    self->heatmap = heatmap;
    self->heat_in_frame = in_frame;
    if (letterbox)
        self->heat_letterbox = *letterbox;
    set_layer_heatmaps(self, layers);
    update_heat(self);
}

gboolean cl_compare_view_get_show_heatmap(ClCompareView *self)
{
    g_return_val_if_fail(CL_IS_COMPARE_VIEW(self), FALSE);
    return self->show_heatmap;
}

void cl_compare_view_set_show_heatmap(ClCompareView *self, gboolean show)
{
    g_return_if_fail(CL_IS_COMPARE_VIEW(self));
    show = !!show;
    if (show == self->show_heatmap)
        return;
    self->show_heatmap = show;
    update_heat(self);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_SHOW_HEATMAP]);
}

guint cl_compare_view_get_n_heat_layers(ClCompareView *self)
{
    g_return_val_if_fail(CL_IS_COMPARE_VIEW(self), 0);
    return self->layer_heatmaps ? self->layer_heatmaps->len : 0;
}

void cl_compare_view_set_heat_layer(ClCompareView *self, int layer)
{
    g_return_if_fail(CL_IS_COMPARE_VIEW(self));
    gtk_drop_down_set_selected(self->layer_dropdown, layer < 0 ? 0 : (guint)layer + 1);
}

/* ---- compare modes and the mode bar ---- */

static const struct {
    const char *name;
    ClCompareMode mode;
} compare_modes[] = {
    { "side-by-side", CL_COMPARE_NONE },     { "swipe", CL_COMPARE_SWIPE },
    { "blend", CL_COMPARE_BLEND },           { "flicker", CL_COMPARE_FLICKER },
    { "difference", CL_COMPARE_DIFFERENCE },
};

static const char *mode_name(ClCompareMode mode)
{
    for (guint i = 0; i < G_N_ELEMENTS(compare_modes); i++)
        if (compare_modes[i].mode == mode)
            return compare_modes[i].name;
    return "side-by-side";
}

static void update_changed_label(ClCompareView *self)
{
    double f = cl_image_view_get_changed_fraction(self->view_a);
    if (self->mode != CL_COMPARE_DIFFERENCE) {
        gtk_label_set_label(self->changed_label, "");
    } else if (f < 0) {
        gtk_label_set_label(self->changed_label, _("Computing…"));
    } else {
        /* TRANSLATORS: difference mode, share of pixels over the tolerance */
        g_autofree char *text = g_strdup_printf(_("%.2f %% of pixels differ"), f * 100.0);
        /* and the ground (or tissue) they cover, where the image knows its pixels' size */
        ClDocument *doc = cl_image_view_get_document(self->view_a);
        double whole = 0;
        ClMeasureUnit u = cl_measure_image_area(doc ? cl_document_get_image(doc) : NULL, &whole);
        g_autofree char *area = cl_measure_area_text(u, whole * f);
        if (area) {
            g_autofree char *both = g_strdup_printf("%s, %s", text, area);
            gtk_label_set_label(self->changed_label, both);
        } else {
            gtk_label_set_label(self->changed_label, text);
        }
    }
}

/* The mode bar's slider: what it sets depends on the mode. */
static void update_mode_bar(ClCompareView *self)
{
    GtkAdjustment *adj = gtk_range_get_adjustment(GTK_RANGE(self->mode_scale));
    self->updating_scale = TRUE;
    gboolean slider = TRUE;
    switch (self->mode) {
    case CL_COMPARE_BLEND:
        gtk_label_set_label(self->mode_label, _("Opacity"));
        gtk_adjustment_configure(adj, self->blend * 100.0, 0, 100, 5, 10, 0);
        break;
    case CL_COMPARE_FLICKER:
        gtk_label_set_label(self->mode_label, _("Switches per second"));
        gtk_adjustment_configure(adj, self->flicker_rate, CL_VIEW_MIN_FLICKER, CL_VIEW_MAX_FLICKER,
                                 0.5, 1, 0);
        break;
    case CL_COMPARE_DIFFERENCE:
        gtk_label_set_label(self->mode_label, _("Tolerance"));
        gtk_adjustment_configure(adj, self->tolerance, 0, 255, 1, 8, 0);
        break;
    default:
        slider = FALSE;
        gtk_label_set_label(self->mode_label,
                            self->mode == CL_COMPARE_SWIPE ? _("Drag the divider to swipe") : "");
        break;
    }
    gtk_scale_set_digits(self->mode_scale, self->mode == CL_COMPARE_FLICKER ? 1 : 0);
    gtk_widget_set_visible(GTK_WIDGET(self->mode_scale), slider);
    self->updating_scale = FALSE;
    update_changed_label(self);
}

static void on_mode_scale_changed(GtkRange *range, ClCompareView *self)
{
    if (self->updating_scale)
        return;
    double v = gtk_range_get_value(range);
    switch (self->mode) {
    case CL_COMPARE_BLEND:
        self->blend = v / 100.0;
        cl_image_view_set_blend(self->view_a, self->blend);
        break;
    case CL_COMPARE_FLICKER:
        self->flicker_rate = v;
        cl_image_view_set_flicker_rate(self->view_a, v);
        break;
    case CL_COMPARE_DIFFERENCE:
        self->tolerance = v;
        cl_image_view_set_tolerance(self->view_a, v);
        break;
    default: break;
    }
}

double cl_compare_view_get_tolerance(ClCompareView *self)
{
    g_return_val_if_fail(CL_IS_COMPARE_VIEW(self), CL_VIEW_DEFAULT_TOLERANCE);
    return self->tolerance;
}

const char *cl_compare_view_get_compare_mode(ClCompareView *self)
{
    g_return_val_if_fail(CL_IS_COMPARE_VIEW(self), NULL);
    return mode_name(self->mode);
}

gboolean cl_compare_view_set_compare_mode(ClCompareView *self, const char *name)
{
    g_return_val_if_fail(CL_IS_COMPARE_VIEW(self), FALSE);
    ClCompareMode mode = CL_COMPARE_NONE;
    gboolean known = FALSE;
    for (guint i = 0; i < G_N_ELEMENTS(compare_modes); i++)
        if (g_strcmp0(compare_modes[i].name, name) == 0)
            mode = compare_modes[i].mode, known = TRUE;
    if (!known)
        return FALSE;
    if (mode == self->mode)
        return TRUE;
    self->mode = mode;
    /* overlaid modes show one view, the later image drawn into the earlier one's */
    gtk_widget_set_visible(self->pane_b, mode == CL_COMPARE_NONE);
    cl_image_view_set_partner(self->view_a, mode == CL_COMPARE_NONE ? NULL : self->view_b);
    cl_image_view_set_blend(self->view_a, self->blend);
    cl_image_view_set_flicker_rate(self->view_a, self->flicker_rate);
    cl_image_view_set_tolerance(self->view_a, self->tolerance);
    cl_image_view_set_compare_mode(self->view_a, mode);
    update_mode_bar(self);
    update_heat(self);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_COMPARE_MODE]);
    return TRUE;
}

/* ---- ignore regions and alignment ---- */

/* The later image's pixels that a frame point shows: its alignment, or the stretch. */
static void later_map(ClCompareView *self, double m[6])
{
    if (cl_image_view_get_alignment(self->view_b, m))
        return;
    guint wa, ha, wb, hb;
    cl_image_view_get_image_size(self->view_a, &wa, &ha);
    cl_image_view_get_image_size(self->view_b, &wb, &hb);
    ClRegistration id;
    cl_registration_identity(&id, wa, ha, wb, hb);
    memcpy(m, id.m, sizeof id.m);
}

double *cl_compare_view_masks_for_later(ClCompareView *self)
{
    g_return_val_if_fail(CL_IS_COMPARE_VIEW(self), NULL);
    guint n = self->masks->len / 4;
    double *out = g_new(double, MAX(n, 1) * 4), m[6];
    later_map(self, m);
    for (guint k = 0; k < n; k++) {
        const double *r = &g_array_index(self->masks, double, k * 4);
        double x0 = G_MAXDOUBLE, y0 = G_MAXDOUBLE, x1 = -G_MAXDOUBLE, y1 = -G_MAXDOUBLE;
        for (int c = 0; c < 4; c++) {
            double u = c & 1 ? r[2] : r[0], v = c & 2 ? r[3] : r[1];
            double x = m[0] + m[1] * u + m[2] * v, y = m[3] + m[4] * u + m[5] * v;
            x0 = MIN(x0, x), y0 = MIN(y0, y), x1 = MAX(x1, x), y1 = MAX(y1, y);
        }
        out[k * 4 + 0] = x0, out[k * 4 + 1] = y0, out[k * 4 + 2] = x1, out[k * 4 + 3] = y1;
    }
    return out;
}

static void apply_masks(ClCompareView *self)
{
    guint n = self->masks->len / 4;
    cl_image_view_set_masks(self->view_a, (const double *)(gpointer)self->masks->data, n);
    g_autofree double *later = cl_compare_view_masks_for_later(self);
    cl_image_view_set_masks(self->view_b, later, n);
    gtk_widget_set_visible(GTK_WIDGET(self->masks_button), n > 0);
    /* TRANSLATORS: button that removes the ignore regions; %u is how many there are */
    g_autofree char *label = g_strdup_printf(ngettext("Clear %u Mask", "Clear %u Masks", n), n);
    gtk_button_set_label(self->masks_button, label);
}

static void on_mask_drawn(ClImageView *view, double x0, double y0, double x1, double y1,
                          ClCompareView *self)
{
    double r[4] = { x0, y0, x1, y1 };
    if (view == self->view_b) {
        /* back into the frame through the inverse of the later image's map */
        double m[6];
        later_map(self, m);
        double det = m[1] * m[5] - m[2] * m[4];
        if (fabs(det) < 1e-12)
            return;
        double fx0 = G_MAXDOUBLE, fy0 = G_MAXDOUBLE, fx1 = -G_MAXDOUBLE, fy1 = -G_MAXDOUBLE;
        for (int c = 0; c < 4; c++) {
            double x = (c & 1 ? x1 : x0) - m[0], y = (c & 2 ? y1 : y0) - m[3];
            double u = (m[5] * x - m[2] * y) / det, v = (-m[4] * x + m[1] * y) / det;
            fx0 = MIN(fx0, u), fy0 = MIN(fy0, v), fx1 = MAX(fx1, u), fy1 = MAX(fy1, v);
        }
        r[0] = fx0, r[1] = fy0, r[2] = fx1, r[3] = fy1;
    }
    cl_compare_view_add_mask(self, r[0], r[1], r[2], r[3]);
}

void cl_compare_view_add_mask(ClCompareView *self, double x0, double y0, double x1, double y1)
{
    g_return_if_fail(CL_IS_COMPARE_VIEW(self));
    double r[4] = { MIN(x0, x1), MIN(y0, y1), MAX(x0, x1), MAX(y0, y1) };
    g_array_append_vals(self->masks, r, 4);
    apply_masks(self);
}

void cl_compare_view_clear_masks(ClCompareView *self)
{
    g_return_if_fail(CL_IS_COMPARE_VIEW(self));
    g_array_set_size(self->masks, 0);
    apply_masks(self);
}

const double *cl_compare_view_get_masks(ClCompareView *self, guint *n)
{
    g_return_val_if_fail(CL_IS_COMPARE_VIEW(self), NULL);
    *n = self->masks->len / 4;
    return (const double *)(gpointer)self->masks->data;
}

void cl_compare_view_set_alignment(ClCompareView *self, const double m[6])
{
    g_return_if_fail(CL_IS_COMPARE_VIEW(self));
    cl_image_view_set_alignment(self->view_b, m);
    apply_masks(self);
}

void cl_compare_view_set_align_status(ClCompareView *self, const char *text)
{
    g_return_if_fail(CL_IS_COMPARE_VIEW(self));
    gtk_label_set_label(self->align_label, text ? text : "");
}

const char *cl_compare_view_get_align_status(ClCompareView *self)
{
    g_return_val_if_fail(CL_IS_COMPARE_VIEW(self), NULL);
    return gtk_label_get_label(self->align_label);
}

gboolean cl_compare_view_nudge(ClCompareView *self, int dx, int dy)
{
    g_return_val_if_fail(CL_IS_COMPARE_VIEW(self), FALSE);
    if (!cl_image_view_get_document(self->view_a) || !cl_image_view_get_document(self->view_b))
        return FALSE;
    double m[6];
    later_map(self, m);
    /* the later image moves by (dx, dy) in the frame: it shows at u what it showed at u - d */
    m[0] -= m[1] * dx + m[2] * dy;
    m[3] -= m[4] * dx + m[5] * dy;
    cl_compare_view_set_alignment(self, m);
    return TRUE;
}

/* ---- the images ---- */

void cl_compare_view_show_images(ClCompareView *self, ClDocument *const docs[2],
                                 const guint frames[2])
{
    g_return_if_fail(CL_IS_COMPARE_VIEW(self));
    g_return_if_fail(docs[0] != NULL);
    guint union_w = 0, union_h = 0;
    for (guint k = 0; k < 2; k++) {
        ClDocument *doc = docs[k] ? docs[k] : docs[0];
        const ClImage *img = cl_document_get_image(doc);
        cl_viewport_set_content_size(self->own_viewport[k], img->width, img->height);
        union_w = MAX(union_w, img->width);
        union_h = MAX(union_h, img->height);
    }
    cl_viewport_set_content_size(self->shared_viewport, union_w, union_h);

    /* ignore regions and the heat map belonged to the images shown until now */
    g_array_set_size(self->masks, 0);
    cl_compare_view_set_heatmap(self, NULL, NULL, NULL, FALSE);
    apply_stretch(self, docs, frames);
    cl_image_view_set_image(self->view_a, docs[0], frames[0]);
    cl_image_view_set_image(self->view_b, docs[1], frames[1]);
    apply_masks(self);
    cl_compare_view_update_presets(self, docs[0]);
    cl_compare_view_set_captions(self, docs, frames);
    cl_compare_view_fit(self);
}

/* ---- GtkBuildable: "side" and "bottom" children ---- */

static void cl_compare_view_add_child(GtkBuildable *buildable, GtkBuilder *builder, GObject *child,
                                      const char *type)
{
    ClCompareView *self = CL_COMPARE_VIEW(buildable);
    if (g_strcmp0(type, "side") == 0 && GTK_IS_WIDGET(child)) {
        gtk_box_append(self->side_box, GTK_WIDGET(child));
        g_signal_connect_object(child, "notify::visible", G_CALLBACK(update_side), self,
                                G_CONNECT_SWAPPED);
        if (GTK_IS_REVEALER(child))
            g_signal_connect_object(child, "notify::reveal-child", G_CALLBACK(update_side), self,
                                    G_CONNECT_SWAPPED);
        update_side(self);
    } else if (g_strcmp0(type, "bottom") == 0 && GTK_IS_WIDGET(child))
        gtk_box_append(self->bottom_box, GTK_WIDGET(child));
    else
        parent_buildable_iface->add_child(buildable, builder, child, type);
}

static void cl_compare_view_buildable_init(GtkBuildableIface *iface)
{
    parent_buildable_iface = g_type_interface_peek_parent(iface);
    iface->add_child = cl_compare_view_add_child;
}

/* ---- GObject ---- */

static void cl_compare_view_get_property(GObject *object, guint prop_id, GValue *value,
                                         GParamSpec *pspec)
{
    ClCompareView *self = CL_COMPARE_VIEW(object);
    switch (prop_id) {
    case PROP_LINK_VIEWS: g_value_set_boolean(value, self->link_views); break;
    case PROP_COMPARE_MODE: g_value_set_string(value, mode_name(self->mode)); break;
    case PROP_SHOW_HEATMAP: g_value_set_boolean(value, self->show_heatmap); break;
    case PROP_SYNC_WINDOW_LEVEL: g_value_set_boolean(value, self->sync_window_level); break;
    case PROP_ZOOM: g_value_set_double(value, cl_compare_view_get_zoom(self)); break;
    case PROP_SIDE_WIDTH: g_value_set_int(value, self->side_width); break;
    case PROP_STRETCH: g_value_set_string(value, stretch_names[self->stretch]); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    }
}

static void cl_compare_view_set_property(GObject *object, guint prop_id, const GValue *value,
                                         GParamSpec *pspec)
{
    ClCompareView *self = CL_COMPARE_VIEW(object);
    switch (prop_id) {
    case PROP_LINK_VIEWS: cl_compare_view_set_link_views(self, g_value_get_boolean(value)); break;
    case PROP_COMPARE_MODE:
        if (!cl_compare_view_set_compare_mode(self, g_value_get_string(value)))
            g_warning("unknown compare mode “%s”", g_value_get_string(value));
        break;
    case PROP_SHOW_HEATMAP:
        cl_compare_view_set_show_heatmap(self, g_value_get_boolean(value));
        break;
    case PROP_SYNC_WINDOW_LEVEL:
        if (self->sync_window_level != g_value_get_boolean(value)) {
            self->sync_window_level = g_value_get_boolean(value);
            g_object_notify_by_pspec(object, pspec);
        }
        break;
    case PROP_SIDE_WIDTH: cl_compare_view_set_side_width(self, g_value_get_int(value)); break;
    case PROP_STRETCH:
        if (!cl_compare_view_set_stretch(self, g_value_get_string(value)))
            g_warning("unknown stretch “%s”", g_value_get_string(value));
        break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    }
}

static void cl_compare_view_dispose(GObject *object)
{
    ClCompareView *self = CL_COMPARE_VIEW(object);
    if (self->place_tick && self->paned)
        gtk_widget_remove_tick_callback(GTK_WIDGET(self->paned), self->place_tick);
    self->place_tick = 0;
    if (self->zoom_viewport) {
        g_clear_signal_handler(&self->zoom_id, self->zoom_viewport);
        g_clear_object(&self->zoom_viewport);
    }
    /* the view's last "changed-fraction" (it drops its difference on going) must not reach a
     * label the template has already let go: closing a window in difference mode */
    if (self->view_a)
        g_signal_handlers_disconnect_by_func(self->view_a, update_changed_label, self);
    gtk_widget_dispose_template(GTK_WIDGET(self), CL_TYPE_COMPARE_VIEW);
    g_clear_pointer(&self->heatmap, cl_heatmap_free);
    g_clear_pointer(&self->layer_heatmaps, g_ptr_array_unref);
    g_clear_pointer(&self->masks, g_array_unref);
    g_clear_object(&self->shared_viewport);
    g_clear_object(&self->own_viewport[0]);
    g_clear_object(&self->own_viewport[1]);
    G_OBJECT_CLASS(cl_compare_view_parent_class)->dispose(object);
}

static void cl_compare_view_class_init(ClCompareViewClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    GtkWidgetClass *widget_class = GTK_WIDGET_CLASS(klass);

    object_class->get_property = cl_compare_view_get_property;
    object_class->set_property = cl_compare_view_set_property;
    object_class->dispose = cl_compare_view_dispose;

    const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS;
    properties[PROP_LINK_VIEWS] = g_param_spec_boolean("link-views", NULL, NULL, TRUE, rw);
    properties[PROP_COMPARE_MODE] =
        g_param_spec_string("compare-mode", NULL, NULL, "side-by-side", rw);
    properties[PROP_SHOW_HEATMAP] = g_param_spec_boolean("show-heatmap", NULL, NULL, FALSE, rw);
    properties[PROP_SYNC_WINDOW_LEVEL] =
        g_param_spec_boolean("sync-window-level", NULL, NULL, TRUE, rw);
    properties[PROP_ZOOM] = g_param_spec_double("zoom", NULL, NULL, 0, G_MAXDOUBLE, 1.0,
                                                G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    properties[PROP_SIDE_WIDTH] = g_param_spec_int("side-width", NULL, NULL, SIDE_MIN_WIDTH,
                                                   G_MAXINT, SIDE_DEFAULT_WIDTH, rw);
    properties[PROP_STRETCH] = g_param_spec_string("stretch", NULL, NULL, "shared", rw);
    g_object_class_install_properties(object_class, N_PROPS, properties);
    /* the presets menu's "Stretch across the images" section */
    gtk_widget_class_install_property_action(widget_class, "view.stretch", "stretch");

    g_type_ensure(CL_TYPE_IMAGE_VIEW);
    gtk_widget_class_set_template_from_resource(widget_class,
                                                "/io/changelens/ChangeLens/cl-compare-view.ui");
    gtk_widget_class_bind_template_child(widget_class, ClCompareView, view_a);
    gtk_widget_class_bind_template_child(widget_class, ClCompareView, view_b);
    gtk_widget_class_bind_template_child(widget_class, ClCompareView, name_a);
    gtk_widget_class_bind_template_child(widget_class, ClCompareView, info_a);
    gtk_widget_class_bind_template_child(widget_class, ClCompareView, name_b);
    gtk_widget_class_bind_template_child(widget_class, ClCompareView, info_b);
    gtk_widget_class_bind_template_child(widget_class, ClCompareView, pane_b);
    gtk_widget_class_bind_template_child(widget_class, ClCompareView, paned);
    gtk_widget_class_bind_template_child(widget_class, ClCompareView, side_scroller);
    gtk_widget_class_bind_template_child(widget_class, ClCompareView, side_box);
    gtk_widget_class_bind_template_child(widget_class, ClCompareView, bottom_box);
    gtk_widget_class_bind_template_child(widget_class, ClCompareView, mode_label);
    gtk_widget_class_bind_template_child(widget_class, ClCompareView, changed_label);
    gtk_widget_class_bind_template_child(widget_class, ClCompareView, align_label);
    gtk_widget_class_bind_template_child(widget_class, ClCompareView, mode_scale);
    gtk_widget_class_bind_template_child(widget_class, ClCompareView, heat_scale);
    gtk_widget_class_bind_template_child(widget_class, ClCompareView, preset_button);
    gtk_widget_class_bind_template_child(widget_class, ClCompareView, masks_button);
    gtk_widget_class_bind_template_child(widget_class, ClCompareView, layer_dropdown);
    gtk_widget_class_bind_template_callback(widget_class, update_changed_label);
    gtk_widget_class_bind_template_callback(widget_class, update_heat);
    gtk_widget_class_bind_template_callback(widget_class, on_mode_scale_changed);
    gtk_widget_class_bind_template_callback(widget_class, on_mask_drawn);
    gtk_widget_class_bind_template_callback(widget_class, on_paned_position);
    cl_compare_view_display_class_init(widget_class);
}

static void cl_compare_view_init(ClCompareView *self)
{
    self->link_views = TRUE;
    self->sync_window_level = TRUE;
    self->blend = 0.5;
    self->flicker_rate = 2.0;
    self->tolerance = CL_VIEW_DEFAULT_TOLERANCE;
    self->side_width = SIDE_DEFAULT_WIDTH;
    self->masks = g_array_new(FALSE, FALSE, sizeof(double));
    self->shared_viewport = cl_viewport_new();
    self->own_viewport[0] = cl_viewport_new();
    self->own_viewport[1] = cl_viewport_new();
    gtk_widget_init_template(GTK_WIDGET(self));
    cl_image_view_set_fit_peer(self->view_a, self->view_b);
    cl_image_view_set_fit_peer(self->view_b, self->view_a);
    apply_link(self);
    update_mode_bar(self);
    update_heat(self);
}
