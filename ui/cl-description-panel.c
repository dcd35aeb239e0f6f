/* cl-description-panel.c - ClDescriptionPanel: the model run's stage, progress and model, the
 * description's editor (the streamed text, then the reviewer's edits), the sentence under the
 * pointer, and the review part: the versions list and its line. */
#include "cl-description-panel.h"

struct _ClDescriptionPanel {
    GtkBox parent_instance;

    /* template children */
    GtkLabel *stage_label, *model_label, *version_label, *notes_label;
    GtkProgressBar *progress;
    GtkTextView *description_view;
    GtkDropDown *version_dropdown;
    GtkWidget *review_box, *edit_button, *save_button;

    gboolean running;
    gboolean updating_versions; /* the version list is being set, not browsed */
    GPtrArray *sentences;       /* ClSentenceMap* of the last run, for its text */
    char *generated_text;       /* that text */
    int highlighted;            /* the sentence marked, -1 when none */
};

G_DEFINE_FINAL_TYPE(ClDescriptionPanel, cl_description_panel, GTK_TYPE_BOX)

enum { PROP_0, PROP_RUNNING, N_PROPS };
static GParamSpec *properties[N_PROPS];

enum { SIGNAL_VERSION_SELECTED, SIGNAL_SENTENCE_HOVERED, N_SIGNALS };
static guint signals[N_SIGNALS];

/* ---- the run ---- */

void cl_description_panel_set_stage(ClDescriptionPanel *self, const char *text)
{
    g_return_if_fail(CL_IS_DESCRIPTION_PANEL(self));
    gtk_label_set_label(self->stage_label, text ? text : "");
}

void cl_description_panel_set_model(ClDescriptionPanel *self, const char *text)
{
    g_return_if_fail(CL_IS_DESCRIPTION_PANEL(self));
    gtk_label_set_label(self->model_label, text ? text : "");
}

void cl_description_panel_set_progress(ClDescriptionPanel *self, double fraction)
{
    g_return_if_fail(CL_IS_DESCRIPTION_PANEL(self));
    if (fraction >= 0)
        gtk_progress_bar_set_fraction(self->progress, fraction);
    else
        gtk_progress_bar_pulse(self->progress);
}

void cl_description_panel_set_running(ClDescriptionPanel *self, gboolean running)
{
    g_return_if_fail(CL_IS_DESCRIPTION_PANEL(self));
    running = !!running;
    gtk_widget_set_visible(GTK_WIDGET(self->progress), running);
    gtk_text_view_set_editable(self->description_view, !running);
    if (running == self->running)
        return;
    self->running = running;
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_RUNNING]);
}

gboolean cl_description_panel_get_running(ClDescriptionPanel *self)
{
    g_return_val_if_fail(CL_IS_DESCRIPTION_PANEL(self), FALSE);
    return self->running;
}

/* ---- the editor ---- */

GtkTextBuffer *cl_description_panel_get_buffer(ClDescriptionPanel *self)
{
    g_return_val_if_fail(CL_IS_DESCRIPTION_PANEL(self), NULL);
    return gtk_text_view_get_buffer(self->description_view);
}

char *cl_description_panel_get_text(ClDescriptionPanel *self)
{
    g_return_val_if_fail(CL_IS_DESCRIPTION_PANEL(self), NULL);
    GtkTextBuffer *buf = gtk_text_view_get_buffer(self->description_view);
    GtkTextIter a, b;
    gtk_text_buffer_get_bounds(buf, &a, &b);
    return gtk_text_buffer_get_text(buf, &a, &b, FALSE);
}

void cl_description_panel_set_text(ClDescriptionPanel *self, const char *text)
{
    g_return_if_fail(CL_IS_DESCRIPTION_PANEL(self));
    gtk_text_buffer_set_text(gtk_text_view_get_buffer(self->description_view), text, -1);
}

void cl_description_panel_append_text(ClDescriptionPanel *self, const char *text)
{
    g_return_if_fail(CL_IS_DESCRIPTION_PANEL(self));
    GtkTextBuffer *buf = gtk_text_view_get_buffer(self->description_view);
    GtkTextIter end;
    gtk_text_buffer_get_end_iter(buf, &end);
    gtk_text_buffer_insert(buf, &end, text, -1);
}

void cl_description_panel_set_editable(ClDescriptionPanel *self, gboolean editable)
{
    g_return_if_fail(CL_IS_DESCRIPTION_PANEL(self));
    gtk_text_view_set_editable(self->description_view, editable);
}

/* ---- the review ---- */

void cl_description_panel_set_locked(ClDescriptionPanel *self, gboolean locked)
{
    g_return_if_fail(CL_IS_DESCRIPTION_PANEL(self));
    gtk_widget_set_visible(self->edit_button, locked);
    gtk_widget_set_visible(self->save_button, !locked);
    if (locked)
        gtk_text_view_set_editable(self->description_view, FALSE);
}

GtkWidget *cl_description_panel_get_editor(ClDescriptionPanel *self)
{
    g_return_val_if_fail(CL_IS_DESCRIPTION_PANEL(self), NULL);
    return GTK_WIDGET(self->description_view);
}

void cl_description_panel_set_review_visible(ClDescriptionPanel *self, gboolean visible)
{
    g_return_if_fail(CL_IS_DESCRIPTION_PANEL(self));
    gtk_widget_set_visible(self->review_box, visible);
}

void cl_description_panel_set_versions(ClDescriptionPanel *self, const char *const *items)
{
    g_return_if_fail(CL_IS_DESCRIPTION_PANEL(self));
    GtkStringList *list = gtk_string_list_new(items);
    guint n = g_list_model_get_n_items(G_LIST_MODEL(list));
    /* setting the list selects in it: that is not the user browsing versions */
    self->updating_versions = TRUE;
    gtk_drop_down_set_model(self->version_dropdown, G_LIST_MODEL(list));
    g_object_unref(list);
    if (n)
        gtk_drop_down_set_selected(self->version_dropdown, n - 1);
    self->updating_versions = FALSE;
    gtk_widget_set_visible(GTK_WIDGET(self->version_dropdown), n > 1);
}

void cl_description_panel_select_version(ClDescriptionPanel *self, guint index)
{
    g_return_if_fail(CL_IS_DESCRIPTION_PANEL(self));
    self->updating_versions = TRUE;
    gtk_drop_down_set_selected(self->version_dropdown, index);
    self->updating_versions = FALSE;
}

void cl_description_panel_set_notes(ClDescriptionPanel *self, const char *text)
{
    g_return_if_fail(CL_IS_DESCRIPTION_PANEL(self));
    gtk_label_set_label(self->notes_label, text ? text : "");
    gtk_widget_set_visible(GTK_WIDGET(self->notes_label), text && *text);
}

const char *cl_description_panel_get_notes(ClDescriptionPanel *self)
{
    g_return_val_if_fail(CL_IS_DESCRIPTION_PANEL(self), NULL);
    return gtk_label_get_label(self->notes_label);
}

void cl_description_panel_set_version_label(ClDescriptionPanel *self, const char *text)
{
    g_return_if_fail(CL_IS_DESCRIPTION_PANEL(self));
    gtk_label_set_label(self->version_label, text ? text : "");
}

static void on_version_selected(GtkDropDown *dd, GParamSpec *pspec, ClDescriptionPanel *self)
{
    if (self->updating_versions)
        return;
    guint sel = gtk_drop_down_get_selected(dd);
    if (sel != GTK_INVALID_LIST_POSITION)
        g_signal_emit(self, signals[SIGNAL_VERSION_SELECTED], 0, sel);
}

/* ---- sentences tied to regions ---- */

void cl_description_panel_set_sentences(ClDescriptionPanel *self, GPtrArray *sentences,
                                        const char *text)
{
    g_return_if_fail(CL_IS_DESCRIPTION_PANEL(self));
    g_clear_pointer(&self->sentences, g_ptr_array_unref);
    g_clear_pointer(&self->generated_text, g_free);
    if (sentences) {
        self->sentences = g_ptr_array_ref(sentences);
        self->generated_text = g_strdup(text);
    }
}

const ClSentenceMap *cl_description_panel_highlight(ClDescriptionPanel *self, int offset)
{
    g_return_val_if_fail(CL_IS_DESCRIPTION_PANEL(self), NULL);
    GtkTextBuffer *buf = gtk_text_view_get_buffer(self->description_view);
    GtkTextIter a, b;
    gtk_text_buffer_get_bounds(buf, &a, &b);
    gtk_text_buffer_remove_tag_by_name(buf, "sentence", &a, &b);
    int found = -1;
    g_autofree char *text = gtk_text_buffer_get_text(buf, &a, &b, FALSE);
    if (offset >= 0 && self->sentences && self->generated_text &&
        g_str_equal(text, self->generated_text)) {
        gsize byte =
            (gsize)(g_utf8_offset_to_pointer(text, MIN(offset, (int)g_utf8_strlen(text, -1))) -
                    text);
        for (guint i = 0; i < self->sentences->len && found < 0; i++) {
            const ClSentenceMap *sm = g_ptr_array_index(self->sentences, i);
            if (byte >= sm->start && byte < sm->end)
                found = (int)i;
        }
    }
    self->highlighted = found;
    if (found < 0)
        return NULL;
    const ClSentenceMap *sm = g_ptr_array_index(self->sentences, (guint)found);
    GtkTextIter s0, s1;
    gtk_text_buffer_get_iter_at_offset(buf, &s0,
                                       (int)g_utf8_pointer_to_offset(text, text + sm->start));
    gtk_text_buffer_get_iter_at_offset(buf, &s1,
                                       (int)g_utf8_pointer_to_offset(text, text + sm->end));
    gtk_text_buffer_apply_tag_by_name(buf, "sentence", &s0, &s1);
    return sm;
}

int cl_description_panel_get_highlighted(ClDescriptionPanel *self)
{
    g_return_val_if_fail(CL_IS_DESCRIPTION_PANEL(self), -1);
    return self->highlighted;
}

static void on_text_motion(GtkEventControllerMotion *m, double x, double y,
                           ClDescriptionPanel *self)
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
    g_signal_emit(self, signals[SIGNAL_SENTENCE_HOVERED], 0, offset);
}

static void on_text_leave(GtkEventControllerMotion *m, ClDescriptionPanel *self)
{
    if (self->highlighted >= 0)
        g_signal_emit(self, signals[SIGNAL_SENTENCE_HOVERED], 0, -1);
}

/* ---- GObject ---- */

static void cl_description_panel_get_property(GObject *object, guint prop_id, GValue *value,
                                              GParamSpec *pspec)
{
    ClDescriptionPanel *self = CL_DESCRIPTION_PANEL(object);
    switch (prop_id) {
    case PROP_RUNNING: g_value_set_boolean(value, self->running); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    }
}

static void cl_description_panel_set_property(GObject *object, guint prop_id, const GValue *value,
                                              GParamSpec *pspec)
{
    ClDescriptionPanel *self = CL_DESCRIPTION_PANEL(object);
    switch (prop_id) {
    case PROP_RUNNING: cl_description_panel_set_running(self, g_value_get_boolean(value)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    }
}

static void cl_description_panel_dispose(GObject *object)
{
    ClDescriptionPanel *self = CL_DESCRIPTION_PANEL(object);
    gtk_widget_dispose_template(GTK_WIDGET(self), CL_TYPE_DESCRIPTION_PANEL);
    g_clear_pointer(&self->sentences, g_ptr_array_unref);
    g_clear_pointer(&self->generated_text, g_free);
    G_OBJECT_CLASS(cl_description_panel_parent_class)->dispose(object);
}

static void cl_description_panel_class_init(ClDescriptionPanelClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    GtkWidgetClass *widget_class = GTK_WIDGET_CLASS(klass);

    object_class->get_property = cl_description_panel_get_property;
    object_class->set_property = cl_description_panel_set_property;
    object_class->dispose = cl_description_panel_dispose;

    properties[PROP_RUNNING] =
        g_param_spec_boolean("running", NULL, NULL, FALSE,
                             G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties(object_class, N_PROPS, properties);

    signals[SIGNAL_VERSION_SELECTED] =
        g_signal_new("version-selected", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                     NULL, G_TYPE_NONE, 1, G_TYPE_UINT);
    signals[SIGNAL_SENTENCE_HOVERED] =
        g_signal_new("sentence-hovered", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                     NULL, G_TYPE_NONE, 1, G_TYPE_INT);

    gtk_widget_class_set_template_from_resource(
        widget_class, "/io/changelens/ChangeLens/cl-description-panel.ui");
    gtk_widget_class_bind_template_child(widget_class, ClDescriptionPanel, stage_label);
    gtk_widget_class_bind_template_child(widget_class, ClDescriptionPanel, model_label);
    gtk_widget_class_bind_template_child(widget_class, ClDescriptionPanel, version_label);
    gtk_widget_class_bind_template_child(widget_class, ClDescriptionPanel, notes_label);
    gtk_widget_class_bind_template_child(widget_class, ClDescriptionPanel, progress);
    gtk_widget_class_bind_template_child(widget_class, ClDescriptionPanel, description_view);
    gtk_widget_class_bind_template_child(widget_class, ClDescriptionPanel, version_dropdown);
    gtk_widget_class_bind_template_child(widget_class, ClDescriptionPanel, review_box);
    gtk_widget_class_bind_template_child(widget_class, ClDescriptionPanel, edit_button);
    gtk_widget_class_bind_template_child(widget_class, ClDescriptionPanel, save_button);
    gtk_widget_class_bind_template_callback(widget_class, on_version_selected);
    gtk_widget_class_bind_template_callback(widget_class, on_text_motion);
    gtk_widget_class_bind_template_callback(widget_class, on_text_leave);
}

static void cl_description_panel_init(ClDescriptionPanel *self)
{
    self->highlighted = -1;
    gtk_widget_init_template(GTK_WIDGET(self));
    gtk_text_buffer_create_tag(gtk_text_view_get_buffer(self->description_view), "sentence",
                               "background", "rgba(255, 200, 0, 0.35)", NULL);
    gtk_widget_set_visible(self->review_box, FALSE);
}
