/* cl-window.c - ClWindow: coordinates its parts (the case sidebar, the compare view, the
 * description panel, the filmstrip): the sequence and the pair shown, aligning the pair in a
 * worker thread, files dropped on it, the window's properties and settings. Loading files is in
 * cl-window-load.c, the actions in cl-window-actions.c, the model runs in cl-window-describe.c,
 * the cases in cl-window-cases.c. */
#include "cl-window-private.h"

#include <glib/gi18n.h>
#include <string.h>

#include "align/register.h"
#include "cl-config.h"
#include "cl-document.h"
#include "cl-settings.h"
#include "worker/worker.h"

G_DEFINE_FINAL_TYPE(ClWindow, cl_window, ADW_TYPE_APPLICATION_WINDOW)

enum {
    PROP_0,
    PROP_LINK_VIEWS,
    PROP_BUSY,
    PROP_COMPARE_MODE,
    PROP_SHOW_HEATMAP,
    PROP_DESCRIBING,
    PROP_ALIGNED,
    N_PROPS
};
static GParamSpec *properties[N_PROPS];

ClImageView *cl_window_get_view(ClWindow *self, guint index)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), NULL);
    g_return_val_if_fail(index < 2, NULL);
    return cl_compare_view_get_view(self->compare_view, index);
}

/* ---- busy indicator ---- */

gboolean cl_window_get_busy(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    return self->load_cancellable != NULL || self->export_cancellable != NULL ||
           self->align_cancellable != NULL ||
           cl_image_view_get_loading(cl_window_get_view(self, 0)) ||
           cl_image_view_get_loading(cl_window_get_view(self, 1));
}

void cl_window_update_busy(ClWindow *self)
{
    gboolean busy = cl_window_get_busy(self);
    gtk_widget_set_visible(GTK_WIDGET(self->spinner), busy);
    gtk_spinner_set_spinning(self->spinner, busy);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_BUSY]);
}

/* ---- zoom readout ---- */

static gboolean update_zoom_label(gpointer data)
{
    ClWindow *self = data;
    self->zoom_label_idle = 0;
    double zoom = cl_compare_view_get_zoom(self->compare_view);
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

/* ---- the compare view's state, as the window's properties ---- */

gboolean cl_window_get_link_views(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    return cl_compare_view_get_link_views(self->compare_view);
}

void cl_window_set_link_views(ClWindow *self, gboolean link_views)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    if (!!link_views == cl_compare_view_get_link_views(self->compare_view))
        return;
    cl_compare_view_set_link_views(self->compare_view, link_views);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_LINK_VIEWS]);
}

const char *cl_window_get_compare_mode(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), NULL);
    return cl_compare_view_get_compare_mode(self->compare_view);
}

void cl_window_set_compare_mode(ClWindow *self, const char *mode)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    const char *before = cl_compare_view_get_compare_mode(self->compare_view);
    gboolean known = cl_compare_view_set_compare_mode(self->compare_view, mode);
    g_return_if_fail(known);
    if (g_strcmp0(before, cl_compare_view_get_compare_mode(self->compare_view)) != 0)
        g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_COMPARE_MODE]);
}

gboolean cl_window_get_show_heatmap(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    return cl_compare_view_get_show_heatmap(self->compare_view);
}

void cl_window_set_show_heatmap(ClWindow *self, gboolean show)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    if (!!show == cl_compare_view_get_show_heatmap(self->compare_view))
        return;
    cl_compare_view_set_show_heatmap(self->compare_view, show);
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_SHOW_HEATMAP]);
}

guint cl_window_get_n_heat_layers(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), 0);
    return cl_compare_view_get_n_heat_layers(self->compare_view);
}

void cl_window_set_heat_layer(ClWindow *self, int layer)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    cl_compare_view_set_heat_layer(self->compare_view, layer);
}

void cl_window_add_mask(ClWindow *self, double x0, double y0, double x1, double y1)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    cl_compare_view_add_mask(self->compare_view, x0, y0, x1, y1);
}

guint cl_window_get_n_masks(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), 0);
    guint n;
    cl_compare_view_get_masks(self->compare_view, &n);
    return n;
}

static void update_heat_colours(ClWindow *self)
{
    g_autofree char *c = g_settings_get_string(self->settings, "heatmap-colours");
    ClHeatmapColours map = g_strcmp0(c, "viridis") == 0 ? CL_HEATMAP_VIRIDIS
                           : g_strcmp0(c, "reds") == 0  ? CL_HEATMAP_REDS
                                                        : CL_HEATMAP_INFERNO;
    cl_compare_view_set_heatmap_colours(self->compare_view, map);
    /* the heat map shown again, in the new colours */
    cl_compare_view_show_map(self->compare_view, NULL);
}

void cl_window_update_actions(ClWindow *self)
{
    gboolean shown = self->documents->len > 0;
    gboolean pair = cl_image_view_get_document(cl_window_get_view(self, 0)) != NULL &&
                    cl_image_view_get_document(cl_window_get_view(self, 1)) != NULL;
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "win.describe", pair);
    gboolean review = cl_window_cases_can_review(self);
    /* an accepted description is saved or accepted again only after Edit */
    gboolean locked = review && cl_window_cases_locked(self);
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "win.save-description", review && !locked);
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "win.accept-description", review && !locked);
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "win.reject-description", review);
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "win.edit-description", locked);
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "win.export-report",
                                  self->current_case != NULL && !self->export_cancellable);
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "win.export-change-map",
                                  cl_window_can_export_change_map(self));
    const char *zoom_actions[] = { "win.zoom-in", "win.zoom-out", "win.zoom-100", "win.zoom-fit" };
    for (guint i = 0; i < G_N_ELEMENTS(zoom_actions); i++)
        gtk_widget_action_set_enabled(GTK_WIDGET(self), zoom_actions[i], shown);
}

/* ---- sentences tied to regions ---- */

gboolean cl_window_highlight_sentence(ClWindow *self, int offset)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    const ClSentenceMap *sm = cl_description_panel_highlight(self->description_panel, offset);
    cl_compare_view_show_map(self->compare_view, sm ? sm->map : NULL);
    return sm != NULL;
}

int cl_window_get_highlighted_sentence(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), -1);
    return cl_description_panel_get_highlighted(self->description_panel);
}

static void on_sentence_hovered(ClWindow *self, int offset)
{
    cl_window_highlight_sentence(self, offset);
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
        g_autofree char *msg =
            g_strdup_printf(_("The images could not be aligned: %s"), error->message);
        cl_window_toast(self, msg);
        cl_window_set_aligned(self, FALSE);
    } else if (!j->r.improved) {
        /* TRANSLATORS: registration found nothing better than the images as they are */
        g_autofree char *msg =
            g_strdup_printf(_("No better alignment found (match %.2f as they are)"), j->r.before);
        cl_window_toast(self, msg);
        cl_window_set_aligned(self, FALSE);
    } else {
        cl_compare_view_set_alignment(self->compare_view, j->r.m);
        /* TRANSLATORS: the registration's quality: normalised cross-correlation after and before */
        g_autofree char *text =
            g_strdup_printf(_("Aligned: match %.2f (was %.2f)"), j->r.quality, j->r.before);
        cl_compare_view_set_align_status(self->compare_view, text);
    }
    cl_window_update_busy(self);
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
    ClImageView *va = cl_window_get_view(self, 0), *vb = cl_window_get_view(self, 1);
    ClDocument *a = cl_image_view_get_document(va);
    ClDocument *b = cl_image_view_get_document(vb);
    if (aligned && (!a || !b))
        aligned = FALSE;
    gboolean changed = aligned != self->aligned;
    self->aligned = aligned;
    cl_compare_view_set_alignment(self->compare_view, NULL);
    cl_compare_view_set_align_status(self->compare_view, NULL);
    if (aligned) {
        cl_compare_view_set_align_status(self->compare_view, _("Aligning…"));
        AlignJob *j = g_new0(AlignJob, 1);
        j->a = g_object_ref(a), j->b = g_object_ref(b);
        j->fa = cl_image_view_get_frame(va);
        j->fb = cl_image_view_get_frame(vb);
        self->align_cancellable = g_cancellable_new();
        g_autoptr(GTask) task = g_task_new(self, self->align_cancellable, align_done, NULL);
        g_task_set_task_data(task, j, (GDestroyNotify)align_job_free);
        g_task_run_in_thread(task, align_thread);
    }
    cl_window_update_busy(self);
    if (changed)
        g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_ALIGNED]);
}

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

    /* an alignment belonged to the images shown until now, and so did their edits */
    cl_window_set_aligned(self, FALSE);
    cl_window_undo_reset(self);
    /* and what the model said */
    if (self->describe_cancellable)
        g_cancellable_cancel(self->describe_cancellable);
    cl_compare_view_show_images(self->compare_view, docs, frames);

    if (docs[1] && docs[1] != docs[0]) {
        /* TRANSLATORS: window subtitle: the two files being compared */
        g_autofree char *subtitle = g_strdup_printf(_("%s and %s"), cl_document_get_name(docs[0]),
                                                    cl_document_get_name(docs[1]));
        adw_window_title_set_subtitle(self->window_title, subtitle);
    } else {
        adw_window_title_set_subtitle(self->window_title, cl_document_get_name(docs[0]));
    }
    cl_filmstrip_mark_pair(self->filmstrip, i, j);
    gtk_stack_set_visible_child_name(self->stack, "compare");
    cl_window_update_actions(self);
}

void cl_window_show_pair(ClWindow *self, guint later)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    if (!self->sequence || later >= self->sequence->len)
        return;
    /* an edit of the description stays in the editor: the case is the same */
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

static void rebuild_filmstrip(ClWindow *self)
{
    cl_filmstrip_set_items(self->filmstrip, (const SeqItem *)(gpointer)self->sequence->data,
                           self->sequence->len, self->load_cancellable);
}

void cl_window_move_image(ClWindow *self, guint from, guint to)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    if (!self->sequence || from >= self->sequence->len || to >= self->sequence->len || from == to)
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

/* Shows documents (at least one): all their images go in the filmstrip (the frames given, else a
 * lone multi-frame file gives one item per frame), the first two are shown. */
void cl_window_show_documents(ClWindow *self, GPtrArray *documents, const guint *frames)
{
    g_assert(documents->len > 0);
    g_ptr_array_set_size(self->documents, 0);
    for (guint i = 0; i < documents->len; i++)
        g_ptr_array_add(self->documents, g_object_ref(documents->pdata[i]));
    g_array_set_size(self->sequence, 0);
    ClDocument *first = documents->pdata[0];
    if (frames) {
        for (guint i = 0; i < documents->len; i++) {
            SeqItem it = { g_object_ref(documents->pdata[i]), frames[i] };
            g_assert(frames[i] < cl_document_get_n_frames(it.doc));
            g_array_append_val(self->sequence, it);
        }
    } else if (documents->len == 1) {
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

/* ---- toasts ---- */

void cl_window_toast_with_button(ClWindow *self, const char *text, const char *label,
                                 const char *action)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    /* AdwToast titles are Pango markup in libadwaita 1.2: file names may hold '&' or '<'. */
    g_autofree char *markup = g_markup_escape_text(text, -1);
    AdwToast *toast = adw_toast_new(markup);
    adw_toast_set_timeout(toast, 8);
    if (label && action) {
        adw_toast_set_button_label(toast, label);
        adw_toast_set_action_name(toast, action);
    }
    self->n_toasts++;
    g_free(self->last_toast);
    self->last_toast = g_strdup(text);
    adw_toast_overlay_add_toast(self->toast_overlay, toast);
}

void cl_window_toast(ClWindow *self, const char *text)
{
    cl_window_toast_with_button(self, text, NULL, NULL);
}

guint cl_window_get_n_toasts(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), 0);
    return self->n_toasts;
}

const char *cl_window_get_last_toast(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), NULL);
    return self->last_toast ? self->last_toast : "";
}

const char *cl_window_get_load_errors(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), NULL);
    return self->load_errors;
}

static void on_render_failed(ClImageView *view, GError *error, ClWindow *self)
{
    ClDocument *doc = cl_image_view_get_document(view);
    /* TRANSLATORS: a file loaded but could not be drawn; the second %s says why */
    g_autofree char *text = g_strdup_printf(_("Could not show “%s”: %s"),
                                            doc ? cl_document_get_name(doc) : "", error->message);
    cl_window_toast(self, text);
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

static void close_now(ClWindow *self, gpointer data)
{
    self->close_confirmed = TRUE;
    gtk_window_close(GTK_WINDOW(self));
}

static gboolean cl_window_close_request(GtkWindow *window)
{
    ClWindow *self = CL_WINDOW(window);
    if (!self->close_confirmed && cl_window_cases_has_unsaved(self)) {
        /* asked first: Save keeps the edit as a version, Discard drops it, Cancel stays */
        cl_window_cases_confirm_unsaved(self, close_now, NULL, NULL);
        return TRUE;
    }
    save_window_state(CL_WINDOW(window));
    return GTK_WINDOW_CLASS(cl_window_parent_class)->close_request(window);
}

/* ---- GObject ---- */

ClWindow *cl_window_new(GtkApplication *application)
{
    return g_object_new(CL_TYPE_WINDOW, "application", application, NULL);
}

static void cl_window_get_property(GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
    ClWindow *self = CL_WINDOW(object);
    if (!self->compare_view) {
        /* asked while the template is built (the header's toggles read their actions' state) */
        g_param_value_set_default(pspec, value);
        return;
    }
    switch (prop_id) {
    case PROP_LINK_VIEWS: g_value_set_boolean(value, cl_window_get_link_views(self)); break;
    case PROP_BUSY: g_value_set_boolean(value, cl_window_get_busy(self)); break;
    case PROP_COMPARE_MODE: g_value_set_string(value, cl_window_get_compare_mode(self)); break;
    case PROP_SHOW_HEATMAP: g_value_set_boolean(value, cl_window_get_show_heatmap(self)); break;
    case PROP_DESCRIBING: g_value_set_boolean(value, self->describe_cancellable != NULL); break;
    case PROP_ALIGNED: g_value_set_boolean(value, self->aligned); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    }
}

static void cl_window_set_property(GObject *object, guint prop_id, const GValue *value,
                                   GParamSpec *pspec)
{
    ClWindow *self = CL_WINDOW(object);
    switch (prop_id) {
    case PROP_LINK_VIEWS: cl_window_set_link_views(self, g_value_get_boolean(value)); break;
    case PROP_COMPARE_MODE: cl_window_set_compare_mode(self, g_value_get_string(value)); break;
    case PROP_SHOW_HEATMAP: cl_window_set_show_heatmap(self, g_value_get_boolean(value)); break;
    case PROP_ALIGNED: cl_window_set_aligned(self, g_value_get_boolean(value)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
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
    cl_window_cases_dispose(self);
    cl_window_undo_dispose(self);
    g_clear_handle_id(&self->zoom_label_idle, g_source_remove);
    g_clear_handle_id(&self->cine_id, g_source_remove);
    gtk_widget_dispose_template(GTK_WIDGET(self), CL_TYPE_WINDOW);
    g_clear_object(&self->settings);
    g_clear_pointer(&self->documents, g_ptr_array_unref);
    g_clear_pointer(&self->sequence, g_array_unref);
    g_clear_pointer(&self->last_toast, g_free);
    g_clear_pointer(&self->load_errors, g_free);
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

    const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS;
    properties[PROP_LINK_VIEWS] = g_param_spec_boolean("link-views", NULL, NULL, TRUE, rw);
    properties[PROP_BUSY] =
        g_param_spec_boolean("busy", NULL, NULL, FALSE, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    /* "side-by-side", "swipe", "blend", "flicker" or "difference" */
    properties[PROP_COMPARE_MODE] =
        g_param_spec_string("compare-mode", NULL, NULL, "side-by-side", rw);
    properties[PROP_SHOW_HEATMAP] = g_param_spec_boolean("show-heatmap", NULL, NULL, FALSE, rw);
    properties[PROP_ALIGNED] = g_param_spec_boolean("aligned", NULL, NULL, FALSE, rw);
    properties[PROP_DESCRIBING] = g_param_spec_boolean("describing", NULL, NULL, FALSE,
                                                       G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties(object_class, N_PROPS, properties);

    g_type_ensure(CL_TYPE_CASE_SIDEBAR);
    g_type_ensure(CL_TYPE_COMPARE_VIEW);
    g_type_ensure(CL_TYPE_DESCRIPTION_PANEL);
    g_type_ensure(CL_TYPE_FILMSTRIP);
    gtk_widget_class_set_template_from_resource(widget_class,
                                                "/io/changelens/ChangeLens/cl-window.ui");
    gtk_widget_class_bind_template_child(widget_class, ClWindow, window_title);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, spinner);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, zoom_label);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, toast_overlay);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, stack);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, sidebar_button);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, sidebar_revealer);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, case_sidebar);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, compare_view);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, panel_revealer);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, description_panel);
    gtk_widget_class_bind_template_child(widget_class, ClWindow, filmstrip);
    gtk_widget_class_bind_template_callback(widget_class, queue_zoom_label);
    gtk_widget_class_bind_template_callback(widget_class, on_sentence_hovered);
    gtk_widget_class_bind_template_callback(widget_class, cl_window_show_pair);
    gtk_widget_class_bind_template_callback(widget_class, cl_window_move_image);
    gtk_widget_class_bind_template_callback(widget_class, cl_window_cases_refresh_list);
    gtk_widget_class_bind_template_callback(widget_class, cl_window_cases_version_selected);
    gtk_widget_class_bind_template_callback(widget_class, cl_window_cases_activated);
    cl_window_actions_class_init(widget_class);
}

static void cl_window_init(ClWindow *self)
{
    gtk_widget_init_template(GTK_WIDGET(self));
    self->documents = g_ptr_array_new_with_free_func(g_object_unref);
    self->sequence = g_array_new(FALSE, TRUE, sizeof(SeqItem));
    g_array_set_clear_func(self->sequence, seq_item_clear);
    queue_zoom_label(self);

    for (guint i = 0; i < 2; i++) {
        ClImageView *view = cl_window_get_view(self, i);
        /* a render can finish after the window went (its task holds the view) */
        g_signal_connect_object(view, "notify::loading", G_CALLBACK(cl_window_update_busy), self,
                                G_CONNECT_SWAPPED);
        g_signal_connect_object(view, "render-failed", G_CALLBACK(on_render_failed), self, 0);
    }
    cl_window_undo_init(self);

    GtkDropTarget *drop = gtk_drop_target_new(GDK_TYPE_FILE_LIST, GDK_ACTION_COPY);
    g_signal_connect(drop, "drop", G_CALLBACK(on_drop), self);
    gtk_widget_add_controller(GTK_WIDGET(self->toast_overlay), GTK_EVENT_CONTROLLER(drop));

    /* NULL without the schema (a missing one would abort in g_settings_new()): no saved state */
    self->settings = cl_settings_new(TRUE);
    if (self->settings) {
        g_settings_bind(self->settings, "link-views", self, "link-views", G_SETTINGS_BIND_DEFAULT);
        g_settings_bind(self->settings, "panel-width", self->compare_view, "side-width",
                        G_SETTINGS_BIND_DEFAULT);
        g_settings_bind(self->settings, "stretch", self->compare_view, "stretch",
                        G_SETTINGS_BIND_DEFAULT);
        g_settings_bind(self->settings, "compare-mode", self, "compare-mode",
                        G_SETTINGS_BIND_DEFAULT);
        g_settings_bind(self->settings, "sync-window-level", self->compare_view,
                        "sync-window-level", G_SETTINGS_BIND_GET);
        for (int i = 0; i < 2; i++)
            g_settings_bind(self->settings, "corner-overlays", cl_window_get_view(self, i),
                            "overlays", G_SETTINGS_BIND_DEFAULT);
        g_signal_connect_swapped(self->settings, "changed::heatmap-colours",
                                 G_CALLBACK(update_heat_colours), self);
        update_heat_colours(self);
        restore_window_state(self);
    }
    cl_window_cases_init(self);
    cl_window_set_describing(self, NULL);
    gtk_stack_set_visible_child_name(self->stack, "empty");
    cl_window_update_actions(self);
}
