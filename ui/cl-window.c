/* cl-window.c - ClWindow: opening files (arguments, dialog, drag and drop), loading them off the
 * main thread, showing two of them side by side (linked or independent viewports) or overlaid
 * (swipe, blend, flicker, difference), and describing the change with the model in the
 * background worker: streamed text in the description panel, heat map over the later image. */
#include "cl-window-private.h"

#include <glib/gi18n.h>
#include <math.h>
#include <string.h>

#include "cl-config.h"
#include "cl-document.h"
#include "cl-preferences.h"
#include "image/display.h"
#include "model/model.h"
#include "align/register.h"
#include "image/sequence.h"
#include "worker/worker.h"

/* One keyboard zoom step: two steps double the zoom, so 100 % → 200 % → 400 % stay on the grid. */
#define CL_ZOOM_STEP G_SQRT2
/* Files decoded per open; more are ignored with a notice (the filmstrip comes later). */
#define MAX_OPEN_FILES 32



G_DEFINE_FINAL_TYPE(ClWindow, cl_window, ADW_TYPE_APPLICATION_WINDOW)

static double *masks_for_later(ClWindow *self);
static void apply_masks(ClWindow *self);

enum { PROP_0, PROP_LINK_VIEWS, PROP_BUSY, PROP_COMPARE_MODE, PROP_SHOW_HEATMAP, PROP_DESCRIBING,
       PROP_ALIGNED, N_PROPS };
static GParamSpec *properties[N_PROPS];

static ClImageView *view_at(ClWindow *self, guint i)
{
    g_assert(i < 2);
    return i == 0 ? self->view_a : self->view_b;
}

/* ---- busy indicator ---- */

gboolean cl_window_get_busy(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    return self->load_cancellable != NULL || self->export_cancellable != NULL ||
           self->align_cancellable != NULL ||
           cl_image_view_get_loading(self->view_a) ||
           cl_image_view_get_loading(self->view_b);
}

static void update_busy(ClWindow *self)
{
    gboolean busy = cl_window_get_busy(self);
    gtk_widget_set_visible(GTK_WIDGET(self->spinner), busy);
    gtk_spinner_set_spinning(self->spinner, busy);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_BUSY]);
}

/* ---- zoom readout and actions ---- */

static gboolean update_zoom_label(gpointer data)
{
    ClWindow *self = data;
    self->zoom_label_idle = 0;
    double zoom = cl_viewport_get_zoom(cl_image_view_get_viewport(self->view_a));
    /* Below 10 % one decimal keeps small zooms distinguishable. */
    g_autofree char *text = zoom < 0.1 ? g_strdup_printf("%.1f %%", zoom * 100.0)
                                       : g_strdup_printf("%.0f %%", zoom * 100.0);
    gtk_label_set_label(self->zoom_label, text);
    return G_SOURCE_REMOVE;
}

/* Zoom changes arrive during size allocation (fit on resize) and many times a frame while
 * scrolling; relabelling then would queue a resize mid-layout, so it waits for an idle. */
static void queue_zoom_label(ClWindow *self)
{
    if (!self->zoom_label_idle)
        self->zoom_label_idle = g_idle_add(update_zoom_label, self);
}

static void follow_zoom_of_view_a(ClWindow *self)
{
    ClViewport *vp = cl_image_view_get_viewport(self->view_a);
    if (vp == self->zoom_label_viewport)
        return;
    if (self->zoom_label_viewport)
        g_clear_signal_handler(&self->zoom_label_id, self->zoom_label_viewport);
    g_set_object(&self->zoom_label_viewport, vp);
    self->zoom_label_id =
        g_signal_connect_swapped(vp, "notify::zoom", G_CALLBACK(queue_zoom_label), self);
    queue_zoom_label(self);
}

/* Linked: both views share one viewport. Unlinked: each has its own, starting where they were. */
static void apply_link(ClWindow *self)
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
            cl_image_view_set_viewport(view_at(self, i), self->own_viewport[i]);
        }
    }
    follow_zoom_of_view_a(self);
}

gboolean cl_window_get_link_views(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    return self->link_views;
}

void cl_window_set_link_views(ClWindow *self, gboolean link_views)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    link_views = !!link_views;
    if (link_views == self->link_views)
        return;
    self->link_views = link_views;
    apply_link(self);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_LINK_VIEWS]);
}

/* The distinct viewports the views use now (1 when linked, 2 when not). */
static guint active_viewports(ClWindow *self, ClViewport *out[2])
{
    out[0] = cl_image_view_get_viewport(self->view_a);
    out[1] = cl_image_view_get_viewport(self->view_b);
    return out[0] == out[1] ? 1 : 2;
}

static void zoom_by(ClWindow *self, double factor)
{
    ClViewport *vps[2];
    guint n = active_viewports(self, vps);
    for (guint i = 0; i < n; i++)
        cl_viewport_zoom_at(vps[i], factor, cl_viewport_get_center_x(vps[i]),
                            cl_viewport_get_center_y(vps[i]));
}

static void action_zoom_in(GtkWidget *widget, const char *name, GVariant *param)
{
    zoom_by(CL_WINDOW(widget), CL_ZOOM_STEP);
}

static void action_zoom_out(GtkWidget *widget, const char *name, GVariant *param)
{
    zoom_by(CL_WINDOW(widget), 1.0 / CL_ZOOM_STEP);
}

static void action_zoom_100(GtkWidget *widget, const char *name, GVariant *param)
{
    ClViewport *vps[2];
    guint n = active_viewports(CL_WINDOW(widget), vps);
    for (guint i = 0; i < n; i++)
        cl_viewport_set_zoom(vps[i], 1.0);
}

static void action_zoom_fit(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    cl_image_view_fit(self->view_a);
    cl_image_view_fit(self->view_b);
}

void cl_window_update_actions(ClWindow *self)
{
    gboolean shown = self->documents->len > 0;
    gboolean pair = cl_image_view_get_document(self->view_a) != NULL &&
                    cl_image_view_get_document(self->view_b) != NULL;
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "win.describe", pair);
    gboolean review = cl_window_cases_can_review(self);
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "win.save-description", review);
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "win.accept-description", review);
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "win.reject-description", review);
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "win.export-report",
                                  self->current_case != NULL && !self->export_cancellable);
    const char *zoom_actions[] = {"win.zoom-in", "win.zoom-out", "win.zoom-100", "win.zoom-fit"};
    for (guint i = 0; i < G_N_ELEMENTS(zoom_actions); i++)
        gtk_widget_action_set_enabled(GTK_WIDGET(self), zoom_actions[i], shown);
}

/* ---- compare modes ---- */

static const struct {
    const char *name;
    ClCompareMode mode;
} compare_modes[] = {
    { "side-by-side", CL_COMPARE_NONE },   { "swipe", CL_COMPARE_SWIPE },
    { "blend", CL_COMPARE_BLEND },         { "flicker", CL_COMPARE_FLICKER },
    { "difference", CL_COMPARE_DIFFERENCE },
};

static const char *mode_name(ClCompareMode mode)
{
    for (guint i = 0; i < G_N_ELEMENTS(compare_modes); i++)
        if (compare_modes[i].mode == mode)
            return compare_modes[i].name;
    return "side-by-side";
}

/* The heat map goes on the view that shows the later image: the right pane side by side, the
 * overlaid view otherwise (its normalised coordinates put it on the stretched later image). */
void cl_window_update_heat(ClWindow *self)
{
    if (self->settings) {
        g_autofree char *c = g_settings_get_string(self->settings, "heatmap-colours");
        ClHeatmapColours map = g_strcmp0(c, "viridis") == 0 ? CL_HEATMAP_VIRIDIS
                               : g_strcmp0(c, "reds") == 0  ? CL_HEATMAP_REDS
                                                            : CL_HEATMAP_INFERNO;
        cl_image_view_set_heatmap_colours(self->view_a, map);
        cl_image_view_set_heatmap_colours(self->view_b, map);
    }
    /* the mean over the encoder's blocks, or the block picked in the layer list */
    const ClHeatmap *shown = self->heatmap;
    guint layers = self->layer_heatmaps ? self->layer_heatmaps->len : 0;
    guint pick = gtk_drop_down_get_selected(self->layer_dropdown);
    if (shown && pick != GTK_INVALID_LIST_POSITION && pick > 0 && pick <= layers)
        shown = g_ptr_array_index(self->layer_heatmaps, pick - 1);
    gtk_widget_set_visible(GTK_WIDGET(self->layer_dropdown), self->heatmap && layers > 1);
    gboolean on = self->show_heatmap && shown;
    ClImageView *target = self->mode == CL_COMPARE_NONE ? self->view_b : self->view_a;
    ClImageView *other = target == self->view_a ? self->view_b : self->view_a;
    cl_image_view_set_heatmap(other, NULL, NULL);
    cl_image_view_set_heatmap_in_frame(target, self->heat_in_frame);
    cl_image_view_set_heatmap(target, on ? shown : NULL, on ? &self->heat_letterbox : NULL);
    double opacity = gtk_range_get_value(GTK_RANGE(self->heat_scale));
    cl_image_view_set_heatmap_opacity(target, opacity);
    gtk_widget_set_sensitive(GTK_WIDGET(self->heat_scale), on);
}

static void update_changed_label(ClWindow *self)
{
    double f = cl_image_view_get_changed_fraction(self->view_a);
    if (self->mode != CL_COMPARE_DIFFERENCE) {
        gtk_label_set_label(self->changed_label, "");
    } else if (f < 0) {
        gtk_label_set_label(self->changed_label, _("Computing…"));
    } else {
        /* TRANSLATORS: difference mode, share of pixels over the tolerance */
        g_autofree char *text = g_strdup_printf(_("%.2f %% of pixels differ"), f * 100.0);
        gtk_label_set_label(self->changed_label, text);
    }
}

/* The mode bar's slider: what it sets depends on the mode. */
static void update_mode_bar(ClWindow *self)
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
        gtk_label_set_label(self->mode_label, self->mode == CL_COMPARE_SWIPE
                                                  ? _("Drag the divider to swipe")
                                                  : "");
        break;
    }
    gtk_scale_set_digits(self->mode_scale, self->mode == CL_COMPARE_FLICKER ? 1 : 0);
    gtk_widget_set_visible(GTK_WIDGET(self->mode_scale), slider);
    self->updating_scale = FALSE;
    update_changed_label(self);
}

static void on_mode_scale_changed(GtkRange *range, ClWindow *self)
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
    default:
        break;
    }
}

const char *cl_window_get_compare_mode(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), NULL);
    return mode_name(self->mode);
}

void cl_window_set_compare_mode(ClWindow *self, const char *name)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    ClCompareMode mode = CL_COMPARE_NONE;
    gboolean known = FALSE;
    for (guint i = 0; i < G_N_ELEMENTS(compare_modes); i++)
        if (g_strcmp0(compare_modes[i].name, name) == 0)
            mode = compare_modes[i].mode, known = TRUE;
    g_return_if_fail(known);
    if (mode == self->mode)
        return;
    self->mode = mode;
    /* overlaid modes show one view, the later image drawn into the earlier one's */
    gtk_widget_set_visible(self->pane_b, mode == CL_COMPARE_NONE);
    cl_image_view_set_partner(self->view_a, mode == CL_COMPARE_NONE ? NULL : self->view_b);
    cl_image_view_set_blend(self->view_a, self->blend);
    cl_image_view_set_flicker_rate(self->view_a, self->flicker_rate);
    cl_image_view_set_tolerance(self->view_a, self->tolerance);
    cl_image_view_set_compare_mode(self->view_a, mode);
    update_mode_bar(self);
    cl_window_update_heat(self);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_COMPARE_MODE]);
}

gboolean cl_window_get_show_heatmap(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    return self->show_heatmap;
}

void cl_window_set_show_heatmap(ClWindow *self, gboolean show)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    show = !!show;
    if (show == self->show_heatmap)
        return;
    self->show_heatmap = show;
    cl_window_update_heat(self);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_SHOW_HEATMAP]);
}

void cl_window_set_layer_heatmaps(ClWindow *self, GPtrArray *layers)
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

guint cl_window_get_described_images(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), 0);
    return self->described_images;
}

guint cl_window_get_n_heat_layers(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), 0);
    return self->layer_heatmaps ? self->layer_heatmaps->len : 0;
}

void cl_window_set_heat_layer(ClWindow *self, int layer)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    gtk_drop_down_set_selected(self->layer_dropdown, layer < 0 ? 0 : (guint)layer + 1);
}

/* ---- describing with the model ---- */

gboolean cl_window_get_describing(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    return self->describe_cancellable != NULL;
}

static void set_describing(ClWindow *self, GCancellable *cancellable)
{
    g_set_object(&self->describe_cancellable, cancellable);
    gboolean on = cancellable != NULL;
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "win.stop-describe", on);
    gtk_widget_set_visible(GTK_WIDGET(self->panel_progress), on);
    gtk_text_view_set_editable(self->description_view, !on);
    cl_window_update_actions(self);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_DESCRIBING]);
}

typedef struct {
    ClWindow *self; /* weak */
    GCancellable *cancellable;
} DescribeRun;

static void describe_run_free(gpointer data)
{
    DescribeRun *run = data;
    g_clear_weak_pointer(&run->self);
    g_clear_object(&run->cancellable);
    g_free(run);
}

/* The run's callbacks act only while it is the window's current one. */
static ClWindow *run_window(DescribeRun *run)
{
    return run->self && run->self->describe_cancellable == run->cancellable ? run->self : NULL;
}

static void on_describe_progress(const char *stage, double fraction, gpointer data)
{
    ClWindow *self = run_window(data);
    if (!self)
        return;
    gtk_label_set_label(self->panel_stage, stage);
    if (fraction >= 0)
        gtk_progress_bar_set_fraction(self->panel_progress, fraction);
    else
        gtk_progress_bar_pulse(self->panel_progress);
}

static void on_describe_text(const char *text, gpointer data)
{
    ClWindow *self = run_window(data);
    if (!self)
        return;
    GtkTextBuffer *buf = gtk_text_view_get_buffer(self->description_view);
    GtkTextIter end;
    gtk_text_buffer_get_end_iter(buf, &end);
    gtk_text_buffer_insert(buf, &end, text, -1);
}

static void describe_done(GObject *source, GAsyncResult *result, gpointer data)
{
    DescribeRun *run = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(ClWorkerDescribeResult) r =
        cl_worker_describe_finish(CL_WORKER(source), result, &error);
    ClWindow *self = run_window(run);
    describe_run_free(run);
    if (!self)
        return; /* replaced by a newer run, or the window is gone */
    set_describing(self, NULL);
    if (!r) {
        /* the text streamed so far is not the reviewer's edit: never kept as a version */
        gtk_text_buffer_set_modified(gtk_text_view_get_buffer(self->description_view), FALSE);
        gboolean cancelled = g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
        gtk_label_set_label(self->panel_stage, cancelled ? _("Stopped") : _("Failed"));
        if (!cancelled) {
            /* TRANSLATORS: the model run failed; %s says why */
            g_autofree char *text = g_strdup_printf(_("The model could not describe the change: %s"),
                                                    error->message);
            g_autofree char *markup = g_markup_escape_text(text, -1);
            AdwToast *toast = adw_toast_new(markup);
            adw_toast_set_timeout(toast, 8);
            adw_toast_overlay_add_toast(self->toast_overlay, toast);
        }
        return;
    }
    /* the streamed text may have been coalesced; the result is the reference */
    g_autofree char *text = g_utf8_make_valid(r->result.text, -1);
    gtk_text_buffer_set_text(gtk_text_view_get_buffer(self->description_view), text, -1);
    /* TRANSLATORS: after a model run: tokens, their rate, the device */
    g_autofree char *stage =
        g_strdup_printf(_("Done: %u tokens at %.0f per second on the %s"), r->result.ids->len,
                        r->result.tokens_per_s, r->device);
    gtk_label_set_label(self->panel_stage, stage);
    GString *model = g_string_new(NULL);
    /* TRANSLATORS: which model wrote the description */
    g_string_append_printf(model, _("Model: %s"), r->model_name);
    if (!r->model_path)
        g_string_append_printf(model, " — %s",
                               _("untrained: no model is installed, so this text is noise"));
    if (r->result.context_tokens > 0) {
        g_string_append_c(model, '\n');
        if (r->result.context_pages > 0)
            /* TRANSLATORS: the case's notes, read by the model as rendered pages */
            g_string_append_printf(model, _("Case notes read as %d pages (%d tokens)"),
                                   r->result.context_pages, r->result.context_tokens);
        else
            g_string_append_printf(model, _("Case notes read as text (%d tokens)"),
                                   r->result.context_tokens);
    }
    for (guint i = 0; r->result.notices && i < r->result.notices->len; i++)
        g_string_append_printf(model, "\n%s", (char *)r->result.notices->pdata[i]);
    if (r->notice)
        g_string_append_printf(model, "\n%s", r->notice);
    gtk_label_set_label(self->panel_model, model->str);
    g_string_free(model, TRUE);

    g_clear_pointer(&self->sentences, g_ptr_array_unref);
    g_clear_pointer(&self->generated_text, g_free);
    if (r->sentences) {
        self->sentences = g_ptr_array_ref(r->sentences);
        self->generated_text = g_strdup(text);
    }
    g_clear_pointer(&self->heatmap, cl_heatmap_free);
    cl_window_set_layer_heatmaps(self, NULL);
    self->described_images = r->result.n_images;
    /* the later image's maps (the last image read; the long history reads priors before) */
    const guint last = r->result.n_images - 1;
    if (r->result.heatmaps->len >= last && r->result.n_images >= 2) {
        self->heatmap = cl_heatmap_copy(r->result.heatmaps->pdata[last - 1]);
        /* an aligned input gives maps of the earlier image's frame */
        self->heat_in_frame = self->describe_aligned && self->aligned;
        g_autoptr(GPtrArray) layers =
            g_ptr_array_new_with_free_func((GDestroyNotify)cl_heatmap_free);
        for (guint i = 0; r->result.layer_heatmaps && i < r->result.layer_heatmaps->len; i++) {
            const ClHeatmap *lh = r->result.layer_heatmaps->pdata[i];
            if (lh->image_index == (int)last)
                g_ptr_array_add(layers, cl_heatmap_copy(lh));
        }
        cl_window_set_layer_heatmaps(self, layers);
        self->heat_letterbox = r->result.letterbox[last];
        if (!self->show_heatmap)
            cl_window_set_show_heatmap(self, TRUE);
    }
    cl_window_update_heat(self);
    cl_window_cases_record_run(self, r);
    cl_window_update_actions(self);
}

static void release_document(gpointer doc)
{
    g_object_unref(doc);
}

void cl_window_describe(ClWindow *self)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    ClDocument *a = cl_image_view_get_document(self->view_a);
    ClDocument *b = cl_image_view_get_document(self->view_b);
    if (!a || !b)
        return;
    /* the editor is cleared for the new text: an edit in it is kept first, or nothing runs */
    if (!cl_window_cases_save_pending(self))
        return;
    if (self->describe_cancellable)
        g_cancellable_cancel(self->describe_cancellable);
    if (!self->worker) {
        const char *device = "auto";
        g_autofree char *dev = self->settings ? g_settings_get_string(self->settings, "device")
                                              : NULL;
        if (dev && *dev)
            device = dev;
        self->worker = cl_worker_new(device);
    }

    ClWorkerModel model = { NULL, NULL, NULL, 0 };
    g_autofree char *setting = self->settings ? g_settings_get_string(self->settings, "model-file")
                                              : NULL;
    g_autofree char *found = NULL;
    if (setting && *setting) {
        model.path = setting;
    } else {
        found = cl_model_find_default(NULL);
        model.path = found; /* NULL: the untrained tiny model, said so in the panel */
    }
    if (!model.path)
        model.random_preset = (char *)"tiny";

    /* the long history (Preferences): every earlier item of the sequence before the pair, read
     * in order with the streaming cache (a sink and a window: any number of priors fits) */
    const gboolean history = self->settings && self->sequence &&
                             g_settings_get_boolean(self->settings, "long-history") &&
                             self->pair_a < self->pair_b && self->pair_b < self->sequence->len &&
                             self->pair_a > 0;
    const guint n_prior = history ? self->pair_a : 0;
    ClWorkerImage *imgs = g_new0(ClWorkerImage, n_prior + 2);
    for (guint i = 0; i < n_prior; i++) {
        const SeqItem *it = &g_array_index(self->sequence, SeqItem, i);
        imgs[i] = (ClWorkerImage){ cl_document_get_image(it->doc), it->frame, g_object_ref(it->doc),
                                   release_document, NULL, 0 };
    }
    ClWorkerImage *pair = imgs + n_prior;
    ClImageView *views[2] = { self->view_a, self->view_b };
    /* the ignore regions apply to the model's input too: it sees nothing there */
    g_autofree double *later_masks = masks_for_later(self);
    const double *masks[2] = { (const double *)(gpointer)self->masks->data, later_masks };
    for (guint i = 0; i < 2; i++) {
        ClDocument *doc = cl_image_view_get_document(views[i]);
        pair[i] = (ClWorkerImage){ cl_document_get_image(doc), cl_image_view_get_frame(views[i]),
                                   g_object_ref(doc), release_document, masks[i],
                                   self->masks->len / 4 };
        /* the model reads the image through the window/level on screen */
        pair[i].has_display = cl_image_view_get_display(views[i], &pair[i].display);
        /* and the later one aligned, when it is on screen (Preferences can turn it off; the
         * long history reads every image as it is: one frame for all of them) */
        if (i == 1 && self->aligned && !history &&
            (!self->settings || g_settings_get_boolean(self->settings, "align-model-input")) &&
            cl_image_view_get_alignment(views[1], pair[1].align)) {
            pair[1].has_align = TRUE;
            cl_image_view_get_image_size(views[0], &pair[1].frame_w, &pair[1].frame_h);
            pair[1].masks = masks[0]; /* in the frame's pixels, like the first image's */
        }
    }
    ClDescribeOptions opts;
    cl_describe_options_init(&opts);
    if (self->settings) {
        g_autofree char *src = g_settings_get_string(self->settings, "heatmap-source");
        opts.delta = g_strcmp0(src, "delta") == 0;
    }
    self->describe_delta = opts.delta;
    self->describe_aligned = self->aligned && !history;
    self->describe_first = history ? 0 : self->pair_a;
    if (history) {
        opts.stream_sink = 256;
        opts.stream_window = 2048;
    }
    /* the case's notes, oldest first, as prior reports (the worker copies the text) */
    g_autofree char *notes = NULL;
    if (self->current_case && self->current_case->notes && self->current_case->notes->len &&
        (!self->settings || g_settings_get_boolean(self->settings, "read-case-notes"))) {
        GString *ctx = g_string_new(NULL);
        for (guint i = 0; i < self->current_case->notes->len; i++) {
            const ClCaseNote *n = g_ptr_array_index(self->current_case->notes, i);
            if (n->text && *n->text)
                g_string_append_printf(ctx, "%s%s: %s", ctx->len ? "\n\n" : "",
                                       n->created_at ? n->created_at : "", n->text);
        }
        notes = g_string_free(ctx, FALSE);
        opts.context = *notes ? notes : NULL;
    }

    g_autoptr(GCancellable) cancellable = g_cancellable_new();
    DescribeRun *run = g_new0(DescribeRun, 1);
    g_set_weak_pointer(&run->self, self);
    run->cancellable = g_object_ref(cancellable);
    set_describing(self, cancellable);

    gtk_text_buffer_set_text(gtk_text_view_get_buffer(self->description_view), "", -1);
    gtk_label_set_label(self->panel_stage, _("Starting…"));
    gtk_label_set_label(self->panel_model, "");
    gtk_progress_bar_set_fraction(self->panel_progress, 0);
    gtk_revealer_set_reveal_child(self->panel_revealer, TRUE);

    /* the progress and text callbacks share the run with the result callback, which frees it
     * after the worker has dropped the callbacks (user_data_free runs before the result) */
    DescribeRun *cb_run = g_new0(DescribeRun, 1);
    g_set_weak_pointer(&cb_run->self, self);
    cb_run->cancellable = g_object_ref(cancellable);
    ClWorkerCallbacks cb = { on_describe_progress, on_describe_text, cb_run, describe_run_free };
    cl_worker_describe_async(self->worker, &model, imgs, n_prior + 2, &opts, &cb, cancellable,
                             describe_done, run);
    g_free(imgs);
}

static void action_describe(GtkWidget *widget, const char *name, GVariant *param)
{
    cl_window_describe(CL_WINDOW(widget));
}

static void action_stop_describe(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    if (self->describe_cancellable)
        g_cancellable_cancel(self->describe_cancellable);
}

static void action_close_panel(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    action_stop_describe(widget, name, param);
    gtk_revealer_set_reveal_child(self->panel_revealer, FALSE);
}

char *cl_window_get_description(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), NULL);
    GtkTextBuffer *buf = gtk_text_view_get_buffer(self->description_view);
    GtkTextIter a, b;
    gtk_text_buffer_get_bounds(buf, &a, &b);
    return gtk_text_buffer_get_text(buf, &a, &b, FALSE);
}

/* ---- showing documents ---- */

static char *describe_frame(ClDocument *doc, guint frame)
{
    const ClImage *img = cl_document_get_image(doc);
    /* TRANSLATORS: image size in pixels, width × height */
    g_autofree char *size = g_strdup_printf(_("%u × %u px"), img->width, img->height);
    guint n = cl_document_get_n_frames(doc);
    if (n > 1) {
        /* TRANSLATORS: format, size, and which frame of a multi-frame file is shown */
        return g_strdup_printf(_("%s · %s · frame %u of %u"), cl_image_format_name(img->format),
                               size, frame + 1, n);
    }
    return g_strdup_printf("%s · %s", cl_image_format_name(img->format), size);
}

static void set_caption(GtkLabel *name, GtkLabel *info, ClDocument *doc, guint frame)
{
    if (!doc) {
        gtk_label_set_label(name, _("No second image"));
        gtk_label_set_label(info, _("Open another image to compare"));
        return;
    }
    g_autofree char *text = describe_frame(doc, frame);
    gtk_label_set_label(name, cl_document_get_name(doc));
    gtk_label_set_label(info, text);
}

/* ---- alignment ---- */

typedef struct {
    ClDocument *a, *b;
    guint fa, fb;
    ClRegistration r;
} AlignJob;

static void align_job_free(AlignJob *j)
{
    g_clear_object(&j->a);
    g_clear_object(&j->b);
    g_free(j);
}

static void align_thread(GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    cl_worker_thread_background();
    AlignJob *j = data;
    GError *error = NULL;
    if (cl_register_images(cl_document_get_image(j->a), j->fa, cl_document_get_image(j->b), j->fb,
                           CL_REGISTER_RIGID, &j->r, cancellable, &error))
        g_task_return_boolean(task, TRUE);
    else
        g_task_return_error(task, error);
}

static void set_align_label(ClWindow *self, const char *text)
{
    gtk_label_set_label(self->align_label, text ? text : "");
}

static void align_done(GObject *source, GAsyncResult *result, gpointer user_data)
{
    GTask *task = G_TASK(result);
    if (g_cancellable_is_cancelled(g_task_get_cancellable(task)))
        return;
    ClWindow *self = CL_WINDOW(source);
    g_clear_object(&self->align_cancellable);
    AlignJob *j = g_task_get_task_data(task);
    g_autoptr(GError) error = NULL;
    if (!g_task_propagate_boolean(task, &error)) {
        g_autofree char *msg = g_strdup_printf(_("The images could not be aligned: %s"),
                                               error->message);
        cl_window_toast(self, msg);
        cl_window_set_aligned(self, FALSE);
    } else if (!j->r.improved) {
        /* TRANSLATORS: registration found nothing better than the images as they are */
        g_autofree char *msg = g_strdup_printf(
            _("No better alignment found (match %.2f as they are)"), j->r.before);
        cl_window_toast(self, msg);
        cl_window_set_aligned(self, FALSE);
    } else {
        cl_image_view_set_alignment(self->view_b, j->r.m);
        apply_masks(self);
        /* TRANSLATORS: the registration's quality: normalised cross-correlation after and before */
        g_autofree char *text = g_strdup_printf(_("Aligned: match %.2f (was %.2f)"), j->r.quality,
                                                j->r.before);
        set_align_label(self, text);
    }
    update_busy(self);
}

gboolean cl_window_get_aligned(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    return self->aligned;
}

void cl_window_set_aligned(ClWindow *self, gboolean aligned)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    aligned = !!aligned;
    if (self->align_cancellable) {
        g_cancellable_cancel(self->align_cancellable);
        g_clear_object(&self->align_cancellable);
    }
    ClDocument *a = cl_image_view_get_document(self->view_a);
    ClDocument *b = cl_image_view_get_document(self->view_b);
    if (aligned && (!a || !b))
        aligned = FALSE;
    gboolean changed = aligned != self->aligned;
    self->aligned = aligned;
    cl_image_view_set_alignment(self->view_b, NULL);
    if (self->masks)
        apply_masks(self);
    set_align_label(self, NULL);
    if (aligned) {
        set_align_label(self, _("Aligning…"));
        AlignJob *j = g_new0(AlignJob, 1);
        j->a = g_object_ref(a), j->b = g_object_ref(b);
        j->fa = cl_image_view_get_frame(self->view_a);
        j->fb = cl_image_view_get_frame(self->view_b);
        self->align_cancellable = g_cancellable_new();
        g_autoptr(GTask) task = g_task_new(self, self->align_cancellable, align_done, NULL);
        g_task_set_task_data(task, j, (GDestroyNotify)align_job_free);
        g_task_run_in_thread(task, align_thread);
    }
    update_busy(self);
    if (changed)
        g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_ALIGNED]);
}

/* win.nudge((dx, dy)): moves the later image by whole pixels of the earlier one, from where
 * the alignment (or the plain stretch) put it; the result stays until Align is turned off. */
static void action_nudge(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    if (!cl_image_view_get_document(self->view_a) || !cl_image_view_get_document(self->view_b))
        return;
    int dx, dy;
    g_variant_get(param, "(ii)", &dx, &dy);
    if (self->align_cancellable)
        return; /* an automatic alignment is under way */
    double m[6];
    if (!cl_image_view_get_alignment(self->view_b, m)) {
        guint wa, ha, wb, hb;
        cl_image_view_get_image_size(self->view_a, &wa, &ha);
        cl_image_view_get_image_size(self->view_b, &wb, &hb);
        ClRegistration id;
        cl_registration_identity(&id, wa, ha, wb, hb);
        memcpy(m, id.m, sizeof m);
    }
    /* the later image moves by (dx, dy) in the frame: it shows at u what it showed at u - d */
    m[0] -= m[1] * dx + m[2] * dy;
    m[3] -= m[4] * dx + m[5] * dy;
    cl_image_view_set_alignment(self->view_b, m);
    apply_masks(self);
    if (!self->aligned) {
        self->aligned = TRUE;
        g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_ALIGNED]);
    }
    set_align_label(self, _("Aligned by hand"));
}

/* ---- sentences tied to regions ---- */

/* Shows the attention map of the sentence at character offset `offset` of the description (and
 * marks the sentence), or the run's heat map again for offset < 0 or outside every sentence.
 * Only while the editor holds the generated text unchanged. TRUE when a sentence is shown. */
gboolean cl_window_highlight_sentence(ClWindow *self, int offset)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    GtkTextBuffer *buf = gtk_text_view_get_buffer(self->description_view);
    GtkTextIter a, b;
    gtk_text_buffer_get_bounds(buf, &a, &b);
    gtk_text_buffer_remove_tag_by_name(buf, "sentence", &a, &b);
    int found = -1;
    g_autofree char *text = gtk_text_buffer_get_text(buf, &a, &b, FALSE);
    if (offset >= 0 && self->sentences && self->generated_text &&
        g_str_equal(text, self->generated_text)) {
        gsize byte = (gsize)(g_utf8_offset_to_pointer(text, MIN(offset, (int)g_utf8_strlen(text, -1))) - text);
        for (guint i = 0; i < self->sentences->len && found < 0; i++) {
            const ClSentenceMap *sm = g_ptr_array_index(self->sentences, i);
            if (byte >= sm->start && byte < sm->end)
                found = (int)i;
        }
    }
    self->highlighted = found;
    if (found < 0) {
        cl_window_update_heat(self);
        return FALSE;
    }
    const ClSentenceMap *sm = g_ptr_array_index(self->sentences, (guint)found);
    GtkTextIter s0, s1;
    gtk_text_buffer_get_iter_at_offset(buf, &s0, (int)g_utf8_pointer_to_offset(text, text + sm->start));
    gtk_text_buffer_get_iter_at_offset(buf, &s1, (int)g_utf8_pointer_to_offset(text, text + sm->end));
    gtk_text_buffer_apply_tag_by_name(buf, "sentence", &s0, &s1);
    ClImageView *target = self->mode == CL_COMPARE_NONE ? self->view_b : self->view_a;
    cl_image_view_set_heatmap(target, sm->map, &self->heat_letterbox);
    cl_image_view_set_heatmap_opacity(target, gtk_range_get_value(GTK_RANGE(self->heat_scale)));
    return TRUE;
}

int cl_window_get_highlighted_sentence(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), -1);
    return self->highlighted;
}

static void on_text_motion(GtkEventControllerMotion *m, double x, double y, ClWindow *self)
{
    int bx, by;
    gtk_text_view_window_to_buffer_coords(self->description_view, GTK_TEXT_WINDOW_WIDGET, (int)x,
                                          (int)y, &bx, &by);
    GtkTextIter it;
    int offset = -1;
    if (gtk_text_view_get_iter_at_location(self->description_view, &it, bx, by))
        offset = gtk_text_iter_get_offset(&it);
    if (offset < 0 && self->highlighted < 0)
        return;
    cl_window_highlight_sentence(self, offset);
}

static void on_text_leave(GtkEventControllerMotion *m, ClWindow *self)
{
    if (self->highlighted >= 0)
        cl_window_highlight_sentence(self, -1);
}

/* ---- preferences ---- */

static void action_preferences(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    if (!self->settings) {
        cl_window_toast(self, _("Preferences need the installed settings schema"));
        return;
    }
    gtk_window_present(GTK_WINDOW(cl_preferences_new(GTK_WINDOW(self), self->settings)));
}

/* ---- ignore regions ---- */

/* The later image's pixels that a frame point shows: its alignment, or the stretch. */
static void later_map(ClWindow *self, double m[6])
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

/* The masks (frame = the earlier image's pixels) as rectangles of the later image: bounding
 * boxes of the mapped corners. Newly allocated, n × 4. */
static double *masks_for_later(ClWindow *self)
{
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

static void apply_masks(ClWindow *self)
{
    guint n = self->masks->len / 4;
    cl_image_view_set_masks(self->view_a, (const double *)(gpointer)self->masks->data, n);
    g_autofree double *later = masks_for_later(self);
    cl_image_view_set_masks(self->view_b, later, n);
    gtk_widget_set_visible(GTK_WIDGET(self->masks_button), n > 0);
    /* TRANSLATORS: button that removes the ignore regions; %u is how many there are */
    g_autofree char *label = g_strdup_printf(
        ngettext("Clear %u Mask", "Clear %u Masks", n), n);
    gtk_button_set_label(self->masks_button, label);
}

static void on_mask_drawn(ClImageView *view, double x0, double y0, double x1, double y1,
                          ClWindow *self)
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
    cl_window_add_mask(self, r[0], r[1], r[2], r[3]);
}

void cl_window_add_mask(ClWindow *self, double x0, double y0, double x1, double y1)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    double r[4] = { MIN(x0, x1), MIN(y0, y1), MAX(x0, x1), MAX(y0, y1) };
    g_array_append_vals(self->masks, r, 4);
    apply_masks(self);
}

guint cl_window_get_n_masks(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), 0);
    return self->masks->len / 4;
}

static void action_clear_masks(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    g_array_set_size(self->masks, 0);
    apply_masks(self);
}

/* ---- pointer readout and window/level ---- */

static void show_readout(ClWindow *self, ClImageView *view, double wx, double wy)
{
    GtkLabel *info = view == self->view_a ? self->info_a : self->info_b;
    ClDocument *doc = cl_image_view_get_document(view);
    if (!doc)
        return;
    double x, y;
    cl_image_view_widget_to_image(view, wx, wy, &x, &y);
    g_autofree char *text = cl_display_pixel_readout(cl_document_get_image(doc),
                                                     cl_image_view_get_frame(view), x, y);
    if (!text)
        text = describe_frame(doc, cl_image_view_get_frame(view));
    gtk_label_set_label(info, text);
}

static void on_view_motion(GtkEventControllerMotion *m, double x, double y, ClWindow *self)
{
    show_readout(self, CL_IMAGE_VIEW(gtk_event_controller_get_widget(GTK_EVENT_CONTROLLER(m))),
                 x, y);
}

static void on_view_leave(GtkEventControllerMotion *m, ClWindow *self)
{
    ClImageView *view =
        CL_IMAGE_VIEW(gtk_event_controller_get_widget(GTK_EVENT_CONTROLLER(m)));
    ClDocument *doc = cl_image_view_get_document(view);
    if (doc) {
        g_autofree char *text = describe_frame(doc, cl_image_view_get_frame(view));
        gtk_label_set_label(view == self->view_a ? self->info_a : self->info_b, text);
    }
}

/* Linked views follow a window/level drag in either (each keeps its bands and inversion). */
static void on_display_changed(ClImageView *view, ClWindow *self)
{
    if (!self->link_views ||
        (self->settings && !g_settings_get_boolean(self->settings, "sync-window-level")))
        return;
    ClImageView *other = view == self->view_a ? self->view_b : self->view_a;
    ClDisplaySettings src, dst;
    if (!cl_image_view_get_display(view, &src) || !cl_image_view_get_display(other, &dst))
        return;
    dst.mode = CL_DISPLAY_WINDOW;
    dst.center = src.center;
    dst.width = src.width;
    cl_image_view_set_display(other, &dst);
}

/* win.display-preset("default" | "minmax" | "percentile" | "file:N" | "ct:NAME"), on both views:
 * each image gets its own defaults, ranges and presets. */
static void apply_preset(ClImageView *view, const char *preset)
{
    ClDocument *doc = cl_image_view_get_document(view);
    if (!doc)
        return;
    const ClImage *img = cl_document_get_image(doc);
    guint frame = cl_image_view_get_frame(view);
    ClDisplaySettings s;
    cl_display_settings_init(&s, img, frame);
    static const struct {
        const char *name;
        double center, width;
    } ct[] = { { "ct:soft-tissue", 40, 400 }, { "ct:lung", -600, 1500 },
               { "ct:bone", 400, 1800 },      { "ct:brain", 40, 80 } };
    if (g_str_equal(preset, "minmax")) {
        s.mode = CL_DISPLAY_MINMAX;
    } else if (g_str_equal(preset, "percentile")) {
        s.mode = CL_DISPLAY_PERCENTILE;
        s.low_pct = 2, s.high_pct = 98;
    } else if (g_str_has_prefix(preset, "bands:")) {
        /* "bands:R,G,B" (1-based band numbers; one number: that band in grey) */
        g_auto(GStrv) parts = g_strsplit(preset + 6, ",", 3);
        guint np = g_strv_length(parts);
        for (int k = 0; k < 3; k++) {
            guint64 b = g_ascii_strtoull(parts[np == 3 ? k : 0], NULL, 10);
            if (b < 1 || b > img->channels)
                return; /* not this image's band: it keeps its display */
            s.bands[k] = (int)b - 1;
        }
        if (s.mode == CL_DISPLAY_FULL_RANGE || s.mode == CL_DISPLAY_WINDOW)
            s.mode = CL_DISPLAY_PERCENTILE, s.low_pct = 2, s.high_pct = 98;
    } else if (g_str_has_prefix(preset, "file:")) {
        guint i = (guint)g_ascii_strtoull(preset + 5, NULL, 10);
        if (img->windows && i < img->windows->len) {
            const ClWindowPreset *w = &g_array_index(img->windows, ClWindowPreset, i);
            s.mode = CL_DISPLAY_WINDOW, s.center = w->center, s.width = w->width;
        }
    } else {
        for (guint i = 0; i < G_N_ELEMENTS(ct); i++)
            if (g_str_equal(preset, ct[i].name))
                s.mode = CL_DISPLAY_WINDOW, s.center = ct[i].center, s.width = ct[i].width;
    }
    cl_image_view_set_display(view, &s);
}

static void action_display_preset(GtkWidget *widget, const char *name, GVariant *param)
{
    ClWindow *self = CL_WINDOW(widget);
    const char *preset = g_variant_get_string(param, NULL);
    apply_preset(self->view_a, preset);
    apply_preset(self->view_b, preset);
}

/* The presets menu for the shown images: the stretches, the first image's own windows (DICOM),
 * the usual CT windows for CT. */
static void update_presets(ClWindow *self, ClDocument *doc)
{
    GMenu *menu = g_menu_new();
    GMenu *stretch = g_menu_new();
    g_menu_append(stretch, _("Default"), "win.display-preset('default')");
    g_menu_append(stretch, _("Minimum to maximum"), "win.display-preset('minmax')");
    g_menu_append(stretch, _("2 to 98 percentile"), "win.display-preset('percentile')");
    g_menu_append_section(menu, NULL, G_MENU_MODEL(stretch));
    g_object_unref(stretch);
    const ClImage *img = doc ? cl_document_get_image(doc) : NULL;
    if (img && img->windows && img->windows->len > 0) {
        GMenu *file = g_menu_new();
        for (guint i = 0; i < img->windows->len && i < 16; i++) {
            const ClWindowPreset *w = &g_array_index(img->windows, ClWindowPreset, i);
            /* TRANSLATORS: a window preset from the DICOM file: its name, centre and width */
            g_autofree char *label = g_strdup_printf(_("%s (centre %g, width %g)"),
                                                     w->explanation ? w->explanation : _("File"),
                                                     w->center, w->width);
            g_autofree char *action = g_strdup_printf("win.display-preset('file:%u')", i);
            g_menu_append(file, label, action);
        }
        g_menu_append_section(menu, _("From the file"), G_MENU_MODEL(file));
        g_object_unref(file);
    }
    if (img && img->channels >= 3 && img->layout == CL_LAYOUT_BANDS) {
        /* multi-band (remote sensing): which band goes to red, green and blue */
        GMenu *bands = g_menu_new();
        g_menu_append(bands, _("Bands 1, 2, 3 as red, green, blue"), "win.display-preset('bands:1,2,3')");
        g_menu_append(bands, _("Bands 3, 2, 1 as red, green, blue"), "win.display-preset('bands:3,2,1')");
        if (img->channels >= 4) {
            /* TRANSLATORS: a false-colour composite of multispectral bands */
            g_menu_append(bands, _("Bands 4, 3, 2 (false colour)"), "win.display-preset('bands:4,3,2')");
        }
        for (guint b = 1; b <= MIN(img->channels, 12u); b++) {
            /* TRANSLATORS: one band of a multi-band image shown in grey */
            g_autofree char *label = g_strdup_printf(_("Band %u alone"), b);
            g_autofree char *action = g_strdup_printf("win.display-preset('bands:%u')", b);
            g_menu_append(bands, label, action);
        }
        g_menu_append_section(menu, _("Bands"), G_MENU_MODEL(bands));
        g_object_unref(bands);
    }
    if (img && g_strcmp0(img->modality, "CT") == 0) {
        GMenu *ct = g_menu_new();
        g_menu_append(ct, _("Soft tissue"), "win.display-preset('ct:soft-tissue')");
        g_menu_append(ct, _("Lung"), "win.display-preset('ct:lung')");
        g_menu_append(ct, _("Bone"), "win.display-preset('ct:bone')");
        g_menu_append(ct, _("Brain"), "win.display-preset('ct:brain')");
        g_menu_append_section(menu, "CT", G_MENU_MODEL(ct));
        g_object_unref(ct);
    }
    gtk_menu_button_set_menu_model(self->preset_button, G_MENU_MODEL(menu));
    g_object_unref(menu);
}

/* Shows documents (at least one): the first two, or the first two frames of a lone
 * multi-frame document. */
/* ---- the sequence: filmstrip and the pair shown ---- */

static void seq_item_clear(gpointer p)
{
    g_clear_object(&((SeqItem *)p)->doc);
}

/* Shows items i and j of the sequence in the two views (j may equal i for a lone image). */
static void show_pair(ClWindow *self, guint i, guint j)
{
    g_assert(i < self->sequence->len && j < self->sequence->len);
    self->pair_a = i, self->pair_b = j;
    const SeqItem *ia = &g_array_index(self->sequence, SeqItem, i);
    const SeqItem *ib = &g_array_index(self->sequence, SeqItem, j);
    ClDocument *docs[2] = { ia->doc, i == j ? NULL : ib->doc };
    guint frames[2] = { ia->frame, ib->frame };

    guint union_w = 0, union_h = 0;
    for (guint k = 0; k < 2; k++) {
        ClDocument *doc = docs[k] ? docs[k] : docs[0];
        const ClImage *img = cl_document_get_image(doc);
        cl_viewport_set_content_size(self->own_viewport[k], img->width, img->height);
        union_w = MAX(union_w, img->width);
        union_h = MAX(union_h, img->height);
    }
    cl_viewport_set_content_size(self->shared_viewport, union_w, union_h);

    /* an alignment and ignore regions belonged to the images shown until now */
    cl_window_set_aligned(self, FALSE);
    g_array_set_size(self->masks, 0);
    /* what the model said was about the images shown until now */
    if (self->describe_cancellable)
        g_cancellable_cancel(self->describe_cancellable);
    g_clear_pointer(&self->heatmap, cl_heatmap_free);
    self->heat_in_frame = FALSE;
    cl_window_set_layer_heatmaps(self, NULL);
    cl_window_update_heat(self);
    cl_image_view_set_image(self->view_a, docs[0], frames[0]);
    cl_image_view_set_image(self->view_b, docs[1], frames[1]);
    apply_masks(self);
    update_presets(self, docs[0]);
    set_caption(self->name_a, self->info_a, docs[0], frames[0]);
    set_caption(self->name_b, self->info_b, docs[1], frames[1]);
    cl_image_view_fit(self->view_a);
    cl_image_view_fit(self->view_b);

    if (docs[1] && docs[1] != docs[0]) {
        /* TRANSLATORS: window subtitle: the two files being compared */
        g_autofree char *subtitle = g_strdup_printf(_("%s and %s"), cl_document_get_name(docs[0]),
                                                    cl_document_get_name(docs[1]));
        adw_window_title_set_subtitle(self->window_title, subtitle);
    } else {
        adw_window_title_set_subtitle(self->window_title, cl_document_get_name(docs[0]));
    }
    /* the filmstrip marks the pair */
    guint k = 0;
    for (GtkWidget *c = gtk_widget_get_first_child(GTK_WIDGET(self->filmstrip)); c;
         c = gtk_widget_get_next_sibling(c), k++) {
        if (k == i || k == j)
            gtk_widget_add_css_class(c, "cl-film-current");
        else
            gtk_widget_remove_css_class(c, "cl-film-current");
    }
    gtk_stack_set_visible_child_name(self->stack, "compare");
    cl_window_update_actions(self);
}

void cl_window_show_pair(ClWindow *self, guint later)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    if (!self->sequence || later >= self->sequence->len)
        return;
    cl_window_cases_save_pending(self);
    /* an item and its predecessor; the first with the second */
    guint b = MAX(later, MIN(1u, self->sequence->len - 1));
    show_pair(self, b > 0 ? b - 1 : 0, b);
    cl_window_cases_pair_changed(self);
}

guint cl_window_get_n_sequence(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), 0);
    return self->sequence ? self->sequence->len : 0;
}

void cl_window_get_pair(ClWindow *self, guint *a, guint *b)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    *a = self->pair_a, *b = self->pair_b;
}

/* Thumbnails, rendered off the main thread. */
typedef struct {
    ClDocument *doc;
    guint frame;
} ThumbJob;

static void thumb_job_free(ThumbJob *j)
{
    g_clear_object(&j->doc);
    g_free(j);
}

#define THUMB_SIDE 96

static void thumb_thread(GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    cl_worker_thread_background();
    ThumbJob *j = data;
    const ClImage *img = cl_document_get_image(j->doc);
    ClDisplaySettings s;
    cl_display_settings_init(&s, img, j->frame);
    guint step = 1;
    while (img->width / step > THUMB_SIDE || img->height / step > THUMB_SIDE)
        step *= 2;
    guint w, h;
    GError *error = NULL;
    guint8 *rgba = cl_display_render_rgba_region(img, j->frame, &s, NULL, 0, 0, img->width,
                                                 img->height, step, &w, &h, cancellable, &error);
    if (!rgba) {
        g_task_return_error(task, error);
        return;
    }
    g_autoptr(GBytes) bytes = g_bytes_new_take(rgba, (gsize)w * h * 4);
    g_task_return_pointer(task,
                          gdk_memory_texture_new((int)w, (int)h, GDK_MEMORY_R8G8B8A8, bytes,
                                                 (gsize)w * 4),
                          g_object_unref);
}

static void thumb_done(GObject *source, GAsyncResult *result, gpointer user_data)
{
    GtkPicture *pic = user_data; /* a reference, held by the task */
    g_autoptr(GdkTexture) t = g_task_propagate_pointer(G_TASK(result), NULL);
    if (t)
        gtk_picture_set_paintable(pic, GDK_PAINTABLE(t));
    g_object_unref(pic);
}

static void rebuild_filmstrip(ClWindow *self);

static void on_film_clicked(GtkGestureClick *click, int n, double x, double y, ClWindow *self)
{
    GtkWidget *item = gtk_event_controller_get_widget(GTK_EVENT_CONTROLLER(click));
    cl_window_show_pair(self, GPOINTER_TO_UINT(g_object_get_data(G_OBJECT(item), "index")));
}

static GdkContentProvider *on_film_drag_prepare(GtkDragSource *src, double x, double y,
                                                gpointer data)
{
    GtkWidget *item = gtk_event_controller_get_widget(GTK_EVENT_CONTROLLER(src));
    return gdk_content_provider_new_typed(G_TYPE_UINT, GPOINTER_TO_UINT(g_object_get_data(
                                                           G_OBJECT(item), "index")));
}

static gboolean on_film_drop(GtkDropTarget *target, const GValue *value, double x, double y,
                             ClWindow *self)
{
    GtkWidget *item = gtk_event_controller_get_widget(GTK_EVENT_CONTROLLER(target));
    guint from = g_value_get_uint(value);
    guint to = GPOINTER_TO_UINT(g_object_get_data(G_OBJECT(item), "index"));
    cl_window_move_image(self, from, to);
    return TRUE;
}

static void rebuild_filmstrip(ClWindow *self)
{
    GtkWidget *c;
    while ((c = gtk_widget_get_first_child(GTK_WIDGET(self->filmstrip))))
        gtk_box_remove(self->filmstrip, c);
    guint n = self->sequence ? self->sequence->len : 0;
    gtk_widget_set_visible(self->filmstrip_scroller, n > 2);
    for (guint i = 0; i < n; i++) {
        const SeqItem *it = &g_array_index(self->sequence, SeqItem, i);
        GtkWidget *box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 2);
        gtk_widget_add_css_class(box, "cl-film-item");
        GtkWidget *pic = gtk_picture_new();
        gtk_widget_set_size_request(pic, THUMB_SIDE, THUMB_SIDE * 3 / 4);
        gtk_box_append(GTK_BOX(box), pic);
        g_autofree char *label = cl_document_get_n_frames(it->doc) > 1
                                     ? g_strdup_printf("%s [%u]", cl_document_get_name(it->doc),
                                                       it->frame + 1)
                                     : g_strdup(cl_document_get_name(it->doc));
        GtkWidget *name = gtk_label_new(label);
        gtk_label_set_ellipsize(GTK_LABEL(name), PANGO_ELLIPSIZE_MIDDLE);
        gtk_label_set_max_width_chars(GTK_LABEL(name), 14);
        gtk_widget_add_css_class(name, "caption");
        gtk_box_append(GTK_BOX(box), name);
        g_object_set_data(G_OBJECT(box), "index", GUINT_TO_POINTER(i));
        GtkGesture *click = gtk_gesture_click_new();
        g_signal_connect(click, "released", G_CALLBACK(on_film_clicked), self);
        gtk_widget_add_controller(box, GTK_EVENT_CONTROLLER(click));
        GtkDragSource *drag = gtk_drag_source_new();
        g_signal_connect(drag, "prepare", G_CALLBACK(on_film_drag_prepare), NULL);
        gtk_widget_add_controller(box, GTK_EVENT_CONTROLLER(drag));
        GtkDropTarget *drop = gtk_drop_target_new(G_TYPE_UINT, GDK_ACTION_MOVE | GDK_ACTION_COPY);
        g_signal_connect(drop, "drop", G_CALLBACK(on_film_drop), self);
        gtk_widget_add_controller(box, GTK_EVENT_CONTROLLER(drop));
        gtk_widget_set_tooltip_text(box, _("Click to compare with the image before it; drag to "
                                           "reorder"));
        gtk_box_append(self->filmstrip, box);
        ThumbJob *j = g_new0(ThumbJob, 1);
        j->doc = g_object_ref(it->doc);
        j->frame = it->frame;
        g_autoptr(GTask) task = g_task_new(NULL, self->load_cancellable, thumb_done,
                                           g_object_ref(pic));
        g_task_set_task_data(task, j, (GDestroyNotify)thumb_job_free);
        g_task_run_in_thread(task, thumb_thread);
    }
}

void cl_window_move_image(ClWindow *self, guint from, guint to)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    if (!self->sequence || from >= self->sequence->len || to >= self->sequence->len ||
        from == to)
        return;
    if (!cl_window_cases_reorder(self, from, to))
        return; /* the case database refused it: nothing moves */
    /* move the item: shift the others by one (no clear function runs: nothing is freed) */
    SeqItem *v = &g_array_index(self->sequence, SeqItem, 0);
    SeqItem it = v[from];
    if (from < to)
        memmove(v + from, v + from + 1, sizeof(SeqItem) * (to - from));
    else
        memmove(v + to + 1, v + to, sizeof(SeqItem) * (from - to));
    v[to] = it;
    rebuild_filmstrip(self);
    cl_window_show_pair(self, MAX(to, 1u));
}

/* Shows documents (at least one): all their images go in the filmstrip (a lone multi-frame file
 * gives one item per frame), the first two are shown. */
static void show_documents(ClWindow *self, GPtrArray *documents)
{
    g_assert(documents->len > 0);
    g_ptr_array_set_size(self->documents, 0);
    for (guint i = 0; i < documents->len; i++)
        g_ptr_array_add(self->documents, g_object_ref(documents->pdata[i]));
    g_array_set_size(self->sequence, 0);
    ClDocument *first = documents->pdata[0];
    if (documents->len == 1) {
        for (guint f = 0; f < MIN(cl_document_get_n_frames(first), (guint)MAX_OPEN_FILES); f++) {
            SeqItem it = { g_object_ref(first), f };
            g_array_append_val(self->sequence, it);
        }
    } else {
        for (guint i = 0; i < documents->len; i++) {
            SeqItem it = { g_object_ref(documents->pdata[i]), 0 };
            g_array_append_val(self->sequence, it);
        }
    }
    rebuild_filmstrip(self);
    show_pair(self, 0, MIN(1u, self->sequence->len - 1));
}

void cl_window_toast(ClWindow *self, const char *text)
{
    /* AdwToast titles are Pango markup in libadwaita 1.2: file names may hold '&' or '<'. */
    g_autofree char *markup = g_markup_escape_text(text, -1);
    AdwToast *toast = adw_toast_new(markup);
    adw_toast_set_timeout(toast, 8);
    adw_toast_overlay_add_toast(self->toast_overlay, toast);
}

static void toast_error(ClWindow *self, GFile *file, const GError *error)
{
    g_autofree char *name = g_file_get_basename(file);
    /* Loader messages start with "<path>: "; the toast names the file already. */
    g_autofree char *path = g_file_get_path(file);
    if (!path)
        path = g_file_get_uri(file); /* what cl_document_load() names non-local files by */
    const char *message = error->message;
    gsize len = path ? strlen(path) : 0;
    if (len && g_str_has_prefix(message, path) && message[len] == ':' && message[len + 1] == ' ')
        message += len + 2;
    /* AdwToast titles are Pango markup in libadwaita 1.2: file names may hold '&' or '<'. */
    g_autofree char *text = g_strdup_printf(_("Could not open “%s”: %s"), name, message);
    g_autofree char *markup = g_markup_escape_text(text, -1);
    AdwToast *toast = adw_toast_new(markup);
    adw_toast_set_timeout(toast, 8);
    adw_toast_overlay_add_toast(self->toast_overlay, toast);
}

static void on_render_failed(ClImageView *view, GError *error, ClWindow *self)
{
    ClDocument *doc = cl_image_view_get_document(view);
    /* TRANSLATORS: a file loaded but could not be drawn; the second %s says why */
    g_autofree char *text = g_strdup_printf(_("Could not show “%s”: %s"),
                                            doc ? cl_document_get_name(doc) : "", error->message);
    g_autofree char *markup = g_markup_escape_text(text, -1);
    AdwToast *toast = adw_toast_new(markup);
    adw_toast_set_timeout(toast, 8);
    adw_toast_overlay_add_toast(self->toast_overlay, toast);
}

/* ---- loading (worker thread) ---- */

typedef struct {
    GPtrArray *files;     /* GFile*, input */
    GPtrArray *documents; /* ClDocument*, output */
    GPtrArray *errors;    /* GError*, output; errors->pdata[i] belongs to error_files[i] */
    GPtrArray *error_files;
    GPtrArray *warnings; /* char*, output: mixed patients, sizes, ... */
    gboolean want_case_images; /* a new case will be made of the files: describe them */
    GPtrArray *case_images;    /* ClCaseImage*, output: the shown images' records (path,
                                * frame, sha256, metadata), NULL when not wanted or failed */
    gint64 case_id;            /* the case being opened (its images are its own), or 0 */
    guint *groups;             /* output with case_images: each image's group (cl_sequence_group) */
    guint n_groups;
} LoadJob;

static void load_job_free(LoadJob *job)
{
    g_clear_pointer(&job->files, g_ptr_array_unref);
    g_clear_pointer(&job->documents, g_ptr_array_unref);
    g_clear_pointer(&job->errors, g_ptr_array_unref);
    g_clear_pointer(&job->error_files, g_ptr_array_unref);
    g_clear_pointer(&job->warnings, g_ptr_array_unref);
    g_clear_pointer(&job->case_images, g_ptr_array_unref);
    g_free(job->groups);
    g_free(job);
}

static void load_thread(GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
    cl_worker_thread_background();
    LoadJob *job = task_data;
    /* Every file is loaded so the sequence can be ordered (DICOM priors by date); the first
     * two in that order are shown. */
    for (guint i = 0; i < job->files->len && i < MAX_OPEN_FILES; i++) {
        if (g_task_return_error_if_cancelled(task))
            return;
        GFile *file = job->files->pdata[i];
        GError *error = NULL;
        ClDocument *doc = cl_document_load(file, NULL, cancellable, &error);
        if (doc) {
            g_ptr_array_add(job->documents, doc);
        } else {
            g_ptr_array_add(job->errors, error);
            g_ptr_array_add(job->error_files, g_object_ref(file));
        }
    }
    if (g_task_return_error_if_cancelled(task))
        return;
    guint n = job->documents->len;
    g_autofree const ClImage **images = g_new(const ClImage *, n ? n : 1);
    for (guint i = 0; i < n; i++)
        images[i] = cl_document_get_image(job->documents->pdata[i]);
    g_autofree guint *order = g_new(guint, n ? n : 1);
    if (job->case_id) {
        /* a case's images come in the order the case keeps */
        for (guint i = 0; i < n; i++)
            order[i] = i;
    } else {
        cl_sequence_order(images, n, order);
    }
    GPtrArray *sorted = g_ptr_array_new_with_free_func(g_object_unref);
    for (guint i = 0; i < n; i++)
        g_ptr_array_add(sorted, g_object_ref(job->documents->pdata[order[i]]));
    for (guint i = 0; i < n; i++)
        images[i] = cl_document_get_image(sorted->pdata[i]);
    job->warnings = cl_sequence_warnings(images, n);
    g_ptr_array_unref(job->documents);
    job->documents = sorted;
    /* the records of the two shown images (or the two frames of a lone multi-frame file), for
     * the case the window makes of them: hashing reads each file once more, here and not on
     * the main thread */
    if (job->want_case_images && n > 0) {
        job->case_images = g_ptr_array_new_with_free_func((GDestroyNotify)cl_case_image_free);
        guint items = n > 1 ? n : MIN(cl_document_get_n_frames(sorted->pdata[0]),
                                      (guint)MAX_OPEN_FILES);
        for (guint i = 0; i < items && job->case_images; i++) {
            ClDocument *doc = n > 1 ? sorted->pdata[i] : sorted->pdata[0];
            guint frame = n > 1 ? 0 : i;
            GFile *file = cl_document_get_file(doc);
            g_autofree char *path = file ? g_file_get_path(file) : NULL;
            if (!path || g_cancellable_is_cancelled(cancellable)) {
                g_clear_pointer(&job->case_images, g_ptr_array_unref);
                break;
            }
            ClCaseImage *ci = g_new0(ClCaseImage, 1);
            if (!cl_case_image_from_file(path, frame, ci, NULL)) {
                cl_case_image_free(ci);
                g_clear_pointer(&job->case_images, g_ptr_array_unref);
                break;
            }
            g_ptr_array_add(job->case_images, ci);
        }
        /* files that belong to different studies, places or photos make different cases */
        if (job->case_images && n > 1) {
            job->groups = g_new(guint, n);
            job->n_groups = cl_sequence_group(images, n, job->groups);
        }
    }
    g_task_return_boolean(task, TRUE);
}

static void load_done(GObject *source, GAsyncResult *result, gpointer user_data)
{
    GTask *task = G_TASK(result);
    /* Dropped when a newer open (or closing the window) cancelled it. */
    if (g_cancellable_is_cancelled(g_task_get_cancellable(task)))
        return;
    ClWindow *self = CL_WINDOW(source);
    g_clear_object(&self->load_cancellable);

    g_autoptr(GError) error = NULL;
    if (g_task_propagate_boolean(task, &error)) {
        LoadJob *job = g_task_get_task_data(task);
        for (guint i = 0; i < job->errors->len; i++)
            toast_error(self, job->error_files->pdata[i], job->errors->pdata[i]);
        if (job->files->len > MAX_OPEN_FILES) {
            g_autofree char *text = g_strdup_printf(
                _("Only the first %u of %u files were opened"), MAX_OPEN_FILES, job->files->len);
            adw_toast_overlay_add_toast(self->toast_overlay, adw_toast_new(text));
        }
        for (guint i = 0; job->warnings && i < job->warnings->len; i++) {
            /* flagged, not refused: the user decides whether the comparison makes sense */
            /* TRANSLATORS: the sequence was opened but looks odd (mixed patients, sizes, ...) */
            g_autofree char *text =
                g_strdup_printf(_("Warning: %s"), (char *)job->warnings->pdata[i]);
            g_autofree char *markup = g_markup_escape_text(text, -1);
            AdwToast *toast = adw_toast_new(markup);
            adw_toast_set_timeout(toast, 8);
            adw_toast_overlay_add_toast(self->toast_overlay, toast);
        }
        if (job->documents->len > 0) {
            if (!job->case_id)
                cl_window_cases_save_pending(self);
            show_documents(self, job->documents);
            cl_window_cases_loaded(self, job->documents, job->case_images, job->groups,
                                   job->n_groups);
        }
    }
    update_busy(self);
}

void cl_window_open_files(ClWindow *self, GFile *const *files, guint n_files)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    cl_window_load_files(self, files, n_files, 0);
}

void cl_window_load_files(ClWindow *self, GFile *const *files, guint n_files, gint64 case_id)
{
    g_return_if_fail(files != NULL || n_files == 0);
    if (n_files == 0)
        return;
    if (self->load_cancellable) {
        g_cancellable_cancel(self->load_cancellable);
        g_clear_object(&self->load_cancellable);
    }
    LoadJob *job = g_new0(LoadJob, 1);
    job->files = g_ptr_array_new_with_free_func(g_object_unref);
    for (guint i = 0; i < n_files; i++)
        g_ptr_array_add(job->files, g_object_ref(files[i]));
    job->documents = g_ptr_array_new_with_free_func(g_object_unref);
    job->errors = g_ptr_array_new_with_free_func((GDestroyNotify)g_error_free);
    job->error_files = g_ptr_array_new_with_free_func(g_object_unref);
    job->case_id = case_id;
    job->want_case_images = self->db != NULL && case_id == 0;
    self->pending_case_id = case_id;

    self->load_cancellable = g_cancellable_new();
    g_autoptr(GTask) task = g_task_new(self, self->load_cancellable, load_done, NULL);
    g_task_set_source_tag(task, cl_window_open_files);
    g_task_set_task_data(task, job, (GDestroyNotify)load_job_free);
    g_task_run_in_thread(task, load_thread);
    update_busy(self);
}

static void open_file_list(ClWindow *self, GListModel *list)
{
    guint n = g_list_model_get_n_items(list);
    g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_object_unref);
    for (guint i = 0; i < n; i++)
        g_ptr_array_add(files, g_list_model_get_item(list, i));
    cl_window_open_files(self, (GFile *const *)files->pdata, files->len);
}

/* ---- Open dialog ---- */

static const char *const supported_mime_types[] = {
    "image/png",  "image/tiff", "application/dicom", "image/jpeg",
    "image/webp", "image/bmp",  "image/gif",
};
/* DICOM files often carry no MIME type the desktop knows: match their usual suffixes too. */
static const char *const supported_suffixes[] = {
    "png", "tif", "tiff", "dcm", "dicom", "jpg", "jpeg", "webp", "bmp", "gif",
};

static void on_chooser_response(GtkNativeDialog *dialog, int response, ClWindow *self)
{
    if (response == GTK_RESPONSE_ACCEPT) {
        g_autoptr(GListModel) files = gtk_file_chooser_get_files(GTK_FILE_CHOOSER(dialog));
        open_file_list(self, files);
    }
    gtk_native_dialog_destroy(dialog);
    g_object_unref(dialog);
}

void cl_window_choose_files(ClWindow *self)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    GtkFileChooserNative *chooser = gtk_file_chooser_native_new(
        _("Open Images"), GTK_WINDOW(self), GTK_FILE_CHOOSER_ACTION_OPEN, _("_Open"), _("_Cancel"));
    GtkFileChooser *fc = GTK_FILE_CHOOSER(chooser);
    gtk_native_dialog_set_modal(GTK_NATIVE_DIALOG(chooser), TRUE);
    gtk_file_chooser_set_select_multiple(fc, TRUE);

    g_autoptr(GtkFileFilter) images = gtk_file_filter_new();
    gtk_file_filter_set_name(images, _("Supported images"));
    for (guint i = 0; i < G_N_ELEMENTS(supported_mime_types); i++)
        gtk_file_filter_add_mime_type(images, supported_mime_types[i]);
    for (guint i = 0; i < G_N_ELEMENTS(supported_suffixes); i++)
        gtk_file_filter_add_suffix(images, supported_suffixes[i]);
    gtk_file_chooser_add_filter(fc, images);

    g_autoptr(GtkFileFilter) dicom = gtk_file_filter_new();
    gtk_file_filter_set_name(dicom, _("DICOM files"));
    gtk_file_filter_add_mime_type(dicom, "application/dicom");
    gtk_file_filter_add_suffix(dicom, "dcm");
    gtk_file_filter_add_suffix(dicom, "dicom");
    gtk_file_chooser_add_filter(fc, dicom);

    g_autoptr(GtkFileFilter) all = gtk_file_filter_new();
    gtk_file_filter_set_name(all, _("All files"));
    gtk_file_filter_add_pattern(all, "*");
    gtk_file_chooser_add_filter(fc, all);
    gtk_file_chooser_set_filter(fc, images);

    g_signal_connect(chooser, "response", G_CALLBACK(on_chooser_response), self);
    gtk_native_dialog_show(GTK_NATIVE_DIALOG(chooser));
}

static void action_open(GtkWidget *widget, const char *name, GVariant *param)
{
    cl_window_choose_files(CL_WINDOW(widget));
}

/* ---- drag and drop ---- */

static gboolean on_drop(GtkDropTarget *target, const GValue *value, double x, double y,
                        ClWindow *self)
{
    if (!G_VALUE_HOLDS(value, GDK_TYPE_FILE_LIST))
        return FALSE;
    GSList *list = gdk_file_list_get_files(g_value_get_boxed(value));
    g_autoptr(GPtrArray) files = g_ptr_array_new();
    for (GSList *l = list; l; l = l->next)
        g_ptr_array_add(files, l->data);
    g_slist_free(list);
    if (files->len == 0)
        return FALSE;
    cl_window_open_files(self, (GFile *const *)files->pdata, files->len);
    return TRUE;
}

/* ---- window state ---- */

static void restore_window_state(ClWindow *self)
{
    if (!self->settings)
        return;
    gtk_window_set_default_size(GTK_WINDOW(self),
                                g_settings_get_int(self->settings, "window-width"),
                                g_settings_get_int(self->settings, "window-height"));
    if (g_settings_get_boolean(self->settings, "window-maximized"))
        gtk_window_maximize(GTK_WINDOW(self));
}

static void save_window_state(ClWindow *self)
{
    if (!self->settings)
        return;
    gboolean maximized = gtk_window_is_maximized(GTK_WINDOW(self));
    g_settings_set_boolean(self->settings, "window-maximized", maximized);
    /* The unmaximized size is what should come back next time. */
    if (!maximized) {
        int w, h;
        gtk_window_get_default_size(GTK_WINDOW(self), &w, &h);
        if (w > 0 && h > 0) {
            g_settings_set_int(self->settings, "window-width", w);
            g_settings_set_int(self->settings, "window-height", h);
        }
    }
}

static gboolean cl_window_close_request(GtkWindow *window)
{
    cl_window_cases_save_pending(CL_WINDOW(window));
    save_window_state(CL_WINDOW(window));
    return GTK_WINDOW_CLASS(cl_window_parent_class)->close_request(window);
}

/* A missing schema would abort in g_settings_new(); run without saved state instead. */
static GSettings *settings_or_null(void)
{
    GSettingsSchemaSource *source = g_settings_schema_source_get_default();
    g_autoptr(GSettingsSchema) schema =
        source ? g_settings_schema_source_lookup(source, CL_APP_ID, TRUE) : NULL;
    if (!schema) {
        g_warning("GSettings schema %s is not installed: window state and preferences will not be "
                  "saved (set GSETTINGS_SCHEMA_DIR to the build's data directory when running "
                  "uninstalled)",
                  CL_APP_ID);
        return NULL;
    }
    return g_settings_new_full(schema, NULL, NULL);
}

/* ---- GObject ---- */

ClWindow *cl_window_new(GtkApplication *application)
{
    return g_object_new(CL_TYPE_WINDOW, "application", application, NULL);
}

ClImageView *cl_window_get_view(ClWindow *self, guint index)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), NULL);
    g_return_val_if_fail(index < 2, NULL);
    return view_at(self, index);
}

static void cl_window_get_property(GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
    ClWindow *self = CL_WINDOW(object);
    switch (prop_id) {
    case PROP_LINK_VIEWS:
        g_value_set_boolean(value, self->link_views);
        break;
    case PROP_BUSY:
        g_value_set_boolean(value, cl_window_get_busy(self));
        break;
    case PROP_COMPARE_MODE:
        g_value_set_string(value, mode_name(self->mode));
        break;
    case PROP_SHOW_HEATMAP:
        g_value_set_boolean(value, self->show_heatmap);
        break;
    case PROP_DESCRIBING:
        g_value_set_boolean(value, self->describe_cancellable != NULL);
        break;
    case PROP_ALIGNED:
        g_value_set_boolean(value, self->aligned);
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    }
}

static void cl_window_set_property(GObject *object, guint prop_id, const GValue *value,
                                   GParamSpec *pspec)
{
    ClWindow *self = CL_WINDOW(object);
    switch (prop_id) {
    case PROP_LINK_VIEWS:
        cl_window_set_link_views(self, g_value_get_boolean(value));
        break;
    case PROP_COMPARE_MODE:
        cl_window_set_compare_mode(self, g_value_get_string(value));
        break;
    case PROP_SHOW_HEATMAP:
        cl_window_set_show_heatmap(self, g_value_get_boolean(value));
        break;
    case PROP_ALIGNED:
        cl_window_set_aligned(self, g_value_get_boolean(value));
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    }
}

static void cl_window_dispose(GObject *object)
{
    ClWindow *self = CL_WINDOW(object);
    if (self->load_cancellable) {
        g_cancellable_cancel(self->load_cancellable);
        g_clear_object(&self->load_cancellable);
    }
    if (self->describe_cancellable) {
        g_cancellable_cancel(self->describe_cancellable);
        g_clear_object(&self->describe_cancellable);
    }
    if (self->align_cancellable) {
        g_cancellable_cancel(self->align_cancellable);
        g_clear_object(&self->align_cancellable);
    }
    g_clear_object(&self->worker);
    g_clear_pointer(&self->heatmap, cl_heatmap_free);
    g_clear_pointer(&self->sentences, g_ptr_array_unref);
    g_clear_pointer(&self->generated_text, g_free);
    g_clear_pointer(&self->layer_heatmaps, g_ptr_array_unref);
    cl_window_cases_dispose(self);
    if (self->zoom_label_viewport) {
        g_clear_signal_handler(&self->zoom_label_id, self->zoom_label_viewport);
        g_clear_object(&self->zoom_label_viewport);
    }
    g_clear_handle_id(&self->zoom_label_idle, g_source_remove);
    gtk_widget_dispose_template(GTK_WIDGET(self), CL_TYPE_WINDOW);
    g_clear_object(&self->settings);
    g_clear_pointer(&self->documents, g_ptr_array_unref);
    g_clear_pointer(&self->masks, g_array_unref);
    g_clear_pointer(&self->sequence, g_array_unref);
    g_clear_object(&self->shared_viewport);
    g_clear_object(&self->own_viewport[0]);
    g_clear_object(&self->own_viewport[1]);
    G_OBJECT_CLASS(cl_window_parent_class)->dispose(object);
}

static void cl_window_class_init(ClWindowClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    GtkWidgetClass *widget_class = GTK_WIDGET_CLASS(klass);
    GtkWindowClass *window_class = GTK_WINDOW_CLASS(klass);

    object_class->get_property = cl_window_get_property;
    object_class->set_property = cl_window_set_property;
    object_class->dispose = cl_window_dispose;
    window_class->close_request = cl_window_close_request;

    properties[PROP_LINK_VIEWS] =
        g_param_spec_boolean("link-views", NULL, NULL, TRUE,
                             G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
    properties[PROP_BUSY] =
        g_param_spec_boolean("busy", NULL, NULL, FALSE, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    /* "side-by-side", "swipe", "blend", "flicker" or "difference" */
    properties[PROP_COMPARE_MODE] =
        g_param_spec_string("compare-mode", NULL, NULL, "side-by-side",
                            G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
    properties[PROP_SHOW_HEATMAP] =
        g_param_spec_boolean("show-heatmap", NULL, NULL, FALSE,
                             G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
    properties[PROP_ALIGNED] =
        g_param_spec_boolean("aligned", NULL, NULL, FALSE,
                             G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
    properties[PROP_DESCRIBING] = g_param_spec_boolean(
        "describing", NULL, NULL, FALSE, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties(object_class, N_PROPS, properties);

    g_type_ensure(CL_TYPE_IMAGE_VIEW);
    gtk_widget_class_set_template_from_resource(widget_class,
                                                "/io/changelens/ChangeLens/cl-window.ui");
    gtk_widget_class_bind_template_child(widget_class, ClWindow, window_title);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, spinner);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, zoom_label);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, toast_overlay);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, stack);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, view_a);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, view_b);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, name_a);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, info_a);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, name_b);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, info_b);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, pane_b);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, panel_revealer);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, panel_stage);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, panel_model);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, panel_progress);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, description_view);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, mode_bar);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, mode_label);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, mode_scale);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, changed_label);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, heat_scale);

    gtk_widget_class_install_action(widget_class, "win.open", NULL, action_open);
    gtk_widget_class_install_action(widget_class, "win.zoom-in", NULL, action_zoom_in);
    gtk_widget_class_install_action(widget_class, "win.zoom-out", NULL, action_zoom_out);
    gtk_widget_class_install_action(widget_class, "win.zoom-100", NULL, action_zoom_100);
    gtk_widget_class_install_action(widget_class, "win.zoom-fit", NULL, action_zoom_fit);
    gtk_widget_class_install_property_action(widget_class, "win.link-views", "link-views");
    gtk_widget_class_install_property_action(widget_class, "win.compare-mode", "compare-mode");
    gtk_widget_class_install_property_action(widget_class, "win.show-heatmap", "show-heatmap");
    gtk_widget_class_install_action(widget_class, "win.describe", NULL, action_describe);
    gtk_widget_class_install_action(widget_class, "win.stop-describe", NULL, action_stop_describe);
    gtk_widget_class_install_action(widget_class, "win.close-panel", NULL, action_close_panel);
    cl_window_cases_class_init(widget_class);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, preset_button);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, align_label);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, masks_button);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, filmstrip);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, filmstrip_scroller);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, layer_dropdown);
    gtk_widget_class_install_action(widget_class, "win.clear-masks", NULL, action_clear_masks);
    gtk_widget_class_install_action(widget_class, "win.preferences", NULL, action_preferences);
    gtk_widget_class_install_property_action(widget_class, "win.align", "aligned");
    gtk_widget_class_install_action(widget_class, "win.nudge", "(ii)", action_nudge);
    static const struct {
        guint key;
        int dx, dy;
    } nudges[] = { { GDK_KEY_Left, -1, 0 }, { GDK_KEY_Right, 1, 0 }, { GDK_KEY_Up, 0, -1 },
                   { GDK_KEY_Down, 0, 1 } };
    for (guint i = 0; i < G_N_ELEMENTS(nudges); i++)
        gtk_widget_class_add_binding_action(widget_class, nudges[i].key, GDK_ALT_MASK,
                                            "win.nudge", "(ii)", nudges[i].dx, nudges[i].dy);
    gtk_widget_class_install_action(widget_class, "win.display-preset", "s",
                                    action_display_preset);

    /* Plain keys as the window's bindings (bubble phase): a focused text field types them. */
    static const struct {
        guint key;
        const char *action;
    } keys[] = {
        { GDK_KEY_0, "win.zoom-fit" },         { GDK_KEY_KP_0, "win.zoom-fit" },
        { GDK_KEY_1, "win.zoom-100" },         { GDK_KEY_KP_1, "win.zoom-100" },
        { GDK_KEY_plus, "win.zoom-in" },       { GDK_KEY_equal, "win.zoom-in" },
        { GDK_KEY_KP_Add, "win.zoom-in" },     { GDK_KEY_minus, "win.zoom-out" },
        { GDK_KEY_KP_Subtract, "win.zoom-out" }, { GDK_KEY_l, "win.link-views" },
        { GDK_KEY_h, "win.show-heatmap" },     { GDK_KEY_Escape, "win.stop-describe" },
    };
    for (guint i = 0; i < G_N_ELEMENTS(keys); i++)
        gtk_widget_class_add_binding_action(widget_class, keys[i].key, 0, keys[i].action, NULL);
}

static void cl_window_init(ClWindow *self)
{
    /* Before the template: the link toggle reads the action state when it is built. */
    self->link_views = TRUE;
    self->blend = 0.5;
    self->flicker_rate = 2.0;
    self->tolerance = CL_VIEW_DEFAULT_TOLERANCE;
    gtk_widget_init_template(GTK_WIDGET(self));
    self->documents = g_ptr_array_new_with_free_func(g_object_unref);
    self->masks = g_array_new(FALSE, FALSE, sizeof(double));
    self->sequence = g_array_new(FALSE, TRUE, sizeof(SeqItem));
    g_array_set_clear_func(self->sequence, seq_item_clear);
    self->shared_viewport = cl_viewport_new();
    self->own_viewport[0] = cl_viewport_new();
    self->own_viewport[1] = cl_viewport_new();
    apply_link(self);

    g_signal_connect_swapped(self->view_a, "notify::loading", G_CALLBACK(update_busy), self);
    g_signal_connect_swapped(self->view_b, "notify::loading", G_CALLBACK(update_busy), self);
    g_signal_connect(self->view_a, "render-failed", G_CALLBACK(on_render_failed), self);
    g_signal_connect(self->view_b, "render-failed", G_CALLBACK(on_render_failed), self);

    GtkDropTarget *drop = gtk_drop_target_new(GDK_TYPE_FILE_LIST, GDK_ACTION_COPY);
    g_signal_connect(drop, "drop", G_CALLBACK(on_drop), self);
    gtk_widget_add_controller(GTK_WIDGET(self->toast_overlay), GTK_EVENT_CONTROLLER(drop));

    self->settings = settings_or_null();
    if (self->settings) {
        g_settings_bind(self->settings, "link-views", self, "link-views", G_SETTINGS_BIND_DEFAULT);
        g_settings_bind(self->settings, "compare-mode", self, "compare-mode",
                        G_SETTINGS_BIND_DEFAULT);
        g_signal_connect_swapped(self->settings, "changed::heatmap-colours",
                                 G_CALLBACK(cl_window_update_heat), self);
        restore_window_state(self);
    }
    g_signal_connect(self->mode_scale, "value-changed", G_CALLBACK(on_mode_scale_changed), self);
    g_signal_connect_swapped(self->heat_scale, "value-changed", G_CALLBACK(cl_window_update_heat), self);
    g_signal_connect_swapped(self->layer_dropdown, "notify::selected",
                             G_CALLBACK(cl_window_update_heat), self);
    g_signal_connect_swapped(self->view_a, "notify::changed-fraction",
                             G_CALLBACK(update_changed_label), self);
    cl_window_cases_init(self);
    self->highlighted = -1;
    gtk_text_buffer_create_tag(gtk_text_view_get_buffer(self->description_view), "sentence",
                               "background", "rgba(255, 200, 0, 0.35)", NULL);
    GtkEventController *tm = gtk_event_controller_motion_new();
    g_signal_connect(tm, "motion", G_CALLBACK(on_text_motion), self);
    g_signal_connect(tm, "leave", G_CALLBACK(on_text_leave), self);
    gtk_widget_add_controller(GTK_WIDGET(self->description_view), tm);
    ClImageView *views[2] = { self->view_a, self->view_b };
    for (guint i = 0; i < 2; i++) {
        GtkEventController *motion = gtk_event_controller_motion_new();
        g_signal_connect(motion, "motion", G_CALLBACK(on_view_motion), self);
        g_signal_connect(motion, "leave", G_CALLBACK(on_view_leave), self);
        gtk_widget_add_controller(GTK_WIDGET(views[i]), motion);
        g_signal_connect(views[i], "display-changed", G_CALLBACK(on_display_changed), self);
        g_signal_connect(views[i], "mask-drawn", G_CALLBACK(on_mask_drawn), self);
    }
    set_describing(self, NULL);
    update_mode_bar(self);
    cl_window_update_heat(self);
    gtk_stack_set_visible_child_name(self->stack, "empty");
    cl_window_update_actions(self);
}
