/* cl-window-undo.c - undo and redo of what the reviewer did to the view of a pair, beyond the
 * description's text (which its editor undoes itself): ignore regions drawn or cleared, the
 * later image nudged into place, window/level dragged or picked (a preset, a custom window).
 * Each edit keeps the view as it was before it; Ctrl+Z puts that back, Ctrl+Shift+Z the edit
 * again. Another pair or case starts afresh. */
#include "cl-window-private.h"

#include <string.h>

#define MAX_UNDO 100

typedef struct {
    GArray *masks; /* doubles, 4 per ignore region, in the earlier image's frame */
    gboolean aligned, has_m;
    double m[6];
    char *align_status;
    gboolean has_display[2];
    ClDisplaySettings display[2];
} ViewState;

static void view_state_free(ViewState *s)
{
    g_array_unref(s->masks);
    g_free(s->align_status);
    g_free(s);
}

static ViewState *state_now(ClWindow *self)
{
    ViewState *s = g_new0(ViewState, 1);
    guint n = 0;
    const double *masks = cl_compare_view_get_masks(self->compare_view, &n);
    s->masks = g_array_new(FALSE, FALSE, sizeof(double));
    g_array_append_vals(s->masks, masks, n * 4);
    s->aligned = self->aligned;
    s->has_m = cl_image_view_get_alignment(cl_window_get_view(self, 1), s->m);
    s->align_status = g_strdup(cl_compare_view_get_align_status(self->compare_view));
    for (guint i = 0; i < 2; i++)
        s->has_display[i] = cl_image_view_get_display(cl_window_get_view(self, i), &s->display[i]);
    return s;
}

static void state_apply(ClWindow *self, const ViewState *s)
{
    cl_compare_view_clear_masks(self->compare_view);
    for (guint k = 0; k + 4 <= s->masks->len; k += 4) {
        const double *r = &g_array_index(s->masks, double, k);
        cl_compare_view_add_mask(self->compare_view, r[0], r[1], r[2], r[3]);
    }
    cl_compare_view_set_alignment(self->compare_view, s->has_m ? s->m : NULL);
    cl_compare_view_set_align_status(self->compare_view, s->align_status);
    if (self->aligned != s->aligned) {
        self->aligned = s->aligned;
        g_object_notify(G_OBJECT(self), "aligned");
    }
    for (guint i = 0; i < 2; i++)
        if (s->has_display[i])
            cl_image_view_set_display(cl_window_get_view(self, i), &s->display[i]);
}

static GPtrArray *stack(GPtrArray **p)
{
    if (!*p)
        *p = g_ptr_array_new_with_free_func((GDestroyNotify)view_state_free);
    return *p;
}

static void update_actions(ClWindow *self)
{
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "win.undo", cl_window_can_undo(self));
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "win.redo", cl_window_can_redo(self));
}

static void push(ClWindow *self, ViewState *before)
{
    GPtrArray *u = stack(&self->undo);
    g_ptr_array_add(u, before);
    if (u->len > MAX_UNDO)
        g_ptr_array_remove_index(u, 0);
    if (self->redo)
        g_ptr_array_set_size(self->redo, 0);
    update_actions(self);
}

void cl_window_undo_record(ClWindow *self)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    if (!cl_image_view_get_document(cl_window_get_view(self, 0)))
        return;
    push(self, state_now(self));
}

void cl_window_undo_reset(ClWindow *self)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    if (self->undo)
        g_ptr_array_set_size(self->undo, 0);
    if (self->redo)
        g_ptr_array_set_size(self->redo, 0);
    update_actions(self);
}

gboolean cl_window_can_undo(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    return self->undo && self->undo->len > 0 && !self->align_cancellable;
}

gboolean cl_window_can_redo(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    return self->redo && self->redo->len > 0 && !self->align_cancellable;
}

/* from one stack to the other: the view now goes onto `to`, the top of `from` is shown */
static gboolean step(ClWindow *self, GPtrArray *from, GPtrArray **to)
{
    if (!from || from->len == 0 || self->align_cancellable)
        return FALSE;
    ViewState *s = g_ptr_array_steal_index(from, from->len - 1);
    g_ptr_array_add(stack(to), state_now(self));
    state_apply(self, s);
    view_state_free(s);
    update_actions(self);
    return TRUE;
}

gboolean cl_window_undo(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    return step(self, self->undo, &self->redo);
}

gboolean cl_window_redo(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    return step(self, self->redo, &self->undo);
}

/* an ignore region was drawn (the compare view has added it): the view before is the one
 * without it */
static void on_mask_drawn(ClImageView *view, double x0, double y0, double x1, double y1,
                          ClWindow *self)
{
    ViewState *before = state_now(self);
    if (before->masks->len >= 4)
        g_array_set_size(before->masks, before->masks->len - 4);
    push(self, before);
}

static void on_window_level_begin(ClImageView *view, ClWindow *self)
{
    cl_window_undo_record(self);
}

void cl_window_undo_init(ClWindow *self)
{
    for (guint i = 0; i < 2; i++) {
        ClImageView *view = cl_window_get_view(self, i);
        g_signal_connect_object(view, "mask-drawn", G_CALLBACK(on_mask_drawn), self, 0);
        g_signal_connect_object(view, "window-level-begin", G_CALLBACK(on_window_level_begin), self,
                                0);
    }
    update_actions(self);
}

void cl_window_undo_dispose(ClWindow *self)
{
    g_clear_pointer(&self->undo, g_ptr_array_unref);
    g_clear_pointer(&self->redo, g_ptr_array_unref);
}
