/* cl-window-caseview.c - ClWindow's memory of each case's view, for this window's life: the pair
 * shown, each image's window/level and the later image's alignment (automatic or by hand) as the
 * case was left, given back when the case is opened again. */
#include "cl-window-private.h"

typedef struct {
    guint pair_a, pair_b;
    gboolean has_display[2];
    ClDisplaySettings display[2];
    gboolean aligned; /* an alignment was on: m and its words */
    double m[6];
    char *align_status;
} CaseView;

static void case_view_free(gpointer p)
{
    CaseView *v = p;
    g_free(v->align_status);
    g_free(v);
}

void cl_window_caseview_remember(ClWindow *self)
{
    const ClCase *c = self->current_case;
    /* only the case's own images, fully shown (not while they load) */
    if (!c || c->summary.id != self->sequence_case_id || !self->sequence ||
        self->sequence->len == 0)
        return;
    if (!self->case_views)
        self->case_views =
            g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, case_view_free);
    CaseView *v = g_new0(CaseView, 1);
    v->pair_a = self->pair_a, v->pair_b = self->pair_b;
    for (guint i = 0; i < 2; i++)
        v->has_display[i] = cl_image_view_get_display(cl_window_get_view(self, i), &v->display[i]);
    /* an alignment still being computed is not kept: there is nothing to give back */
    v->aligned = self->aligned && !self->align_cancellable &&
                 cl_image_view_get_alignment(cl_window_get_view(self, 1), v->m);
    if (v->aligned)
        v->align_status = g_strdup(cl_compare_view_get_align_status(self->compare_view));
    g_hash_table_replace(self->case_views, g_memdup2(&c->summary.id, sizeof(gint64)), v);
}

void cl_window_caseview_restore(ClWindow *self)
{
    const ClCase *c = self->current_case;
    const CaseView *v =
        c && self->case_views ? g_hash_table_lookup(self->case_views, &c->summary.id) : NULL;
    if (!v || !self->sequence || v->pair_b >= self->sequence->len)
        return;
    /* the pair first: showing one clears the alignment */
    if (v->pair_a != self->pair_a || v->pair_b != self->pair_b)
        cl_window_show_pair(self, v->pair_b);
    /* (the views may still be rendering the defaults: the saved transform replaces that) */
    for (guint i = 0; i < 2; i++)
        if (v->has_display[i])
            cl_image_view_set_display(cl_window_get_view(self, i), &v->display[i]);
    if (v->aligned && cl_image_view_get_document(cl_window_get_view(self, 1))) {
        cl_compare_view_set_alignment(self->compare_view, v->m);
        cl_compare_view_set_align_status(self->compare_view, v->align_status);
        if (!self->aligned) {
            self->aligned = TRUE;
            g_object_notify(G_OBJECT(self), "aligned");
        }
    }
}

void cl_window_caseview_dispose(ClWindow *self)
{
    g_clear_pointer(&self->case_views, g_hash_table_unref);
}
