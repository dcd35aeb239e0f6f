/* cl-case-sidebar.c - ClCaseSidebar: the search entry and the case list (a row per case, its id
 * kept on the row); a row picked by hand asks for its case once the list is done with it. */
#include "cl-case-sidebar.h"

struct _ClCaseSidebar {
    GtkBox parent_instance;

    /* template children */
    GtkSearchEntry *case_search;
    GtkListBox *case_list;

    gboolean refreshing; /* the list is being filled: selections are not the user's */
};

G_DEFINE_FINAL_TYPE(ClCaseSidebar, cl_case_sidebar, GTK_TYPE_BOX)

enum { PROP_0, PROP_SELECTED_CASE, N_PROPS };
static GParamSpec *properties[N_PROPS];

enum { SIGNAL_CASE_ACTIVATED, SIGNAL_SEARCH_CHANGED, N_SIGNALS };
static guint signals[N_SIGNALS];

static gint64 row_case_id(GtkListBoxRow *row)
{
    gint64 *pid = row ? g_object_get_data(G_OBJECT(row), "case-id") : NULL;
    return pid ? *pid : 0;
}

gint64 cl_case_sidebar_get_selected_case(ClCaseSidebar *self)
{
    g_return_val_if_fail(CL_IS_CASE_SIDEBAR(self), 0);
    return row_case_id(gtk_list_box_get_selected_row(self->case_list));
}

void cl_case_sidebar_begin(ClCaseSidebar *self)
{
    g_return_if_fail(CL_IS_CASE_SIDEBAR(self));
    self->refreshing = TRUE;
    GtkWidget *child;
    while ((child = gtk_widget_get_first_child(GTK_WIDGET(self->case_list))))
        gtk_list_box_remove(self->case_list, child);
}

void cl_case_sidebar_add(ClCaseSidebar *self, gint64 id, const char *name, const char *subtitle)
{
    g_return_if_fail(CL_IS_CASE_SIDEBAR(self));
    GtkWidget *box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 2);
    gtk_widget_set_margin_top(box, 6);
    gtk_widget_set_margin_bottom(box, 6);
    GtkWidget *title = gtk_label_new(name);
    gtk_label_set_xalign(GTK_LABEL(title), 0);
    gtk_label_set_ellipsize(GTK_LABEL(title), PANGO_ELLIPSIZE_END);
    gtk_box_append(GTK_BOX(box), title);
    GtkWidget *sub = gtk_label_new(subtitle);
    gtk_label_set_xalign(GTK_LABEL(sub), 0);
    gtk_label_set_ellipsize(GTK_LABEL(sub), PANGO_ELLIPSIZE_END);
    gtk_widget_add_css_class(sub, "caption");
    gtk_widget_add_css_class(sub, "dim-label");
    gtk_box_append(GTK_BOX(box), sub);
    GtkWidget *row = gtk_list_box_row_new();
    gtk_list_box_row_set_child(GTK_LIST_BOX_ROW(row), box);
    gint64 *pid = g_new(gint64, 1);
    *pid = id;
    g_object_set_data_full(G_OBJECT(row), "case-id", pid, g_free);
    gtk_list_box_append(self->case_list, row);
}

void cl_case_sidebar_end(ClCaseSidebar *self, gint64 selected)
{
    g_return_if_fail(CL_IS_CASE_SIDEBAR(self));
    GtkListBoxRow *select = NULL;
    for (int i = 0; selected && !select; i++) {
        GtkListBoxRow *row = gtk_list_box_get_row_at_index(self->case_list, i);
        if (!row)
            break;
        if (row_case_id(row) == selected)
            select = row;
    }
    gtk_list_box_select_row(self->case_list, select);
    self->refreshing = FALSE;
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_SELECTED_CASE]);
}

const char *cl_case_sidebar_get_query(ClCaseSidebar *self)
{
    g_return_val_if_fail(CL_IS_CASE_SIDEBAR(self), NULL);
    return gtk_editable_get_text(GTK_EDITABLE(self->case_search));
}

void cl_case_sidebar_step(ClCaseSidebar *self, int delta)
{
    g_return_if_fail(CL_IS_CASE_SIDEBAR(self));
    GtkListBoxRow *sel = gtk_list_box_get_selected_row(self->case_list);
    int i = sel ? gtk_list_box_row_get_index(sel) + delta : 0;
    GtkListBoxRow *row = gtk_list_box_get_row_at_index(self->case_list, MAX(i, 0));
    if (row && row != sel)
        gtk_list_box_select_row(self->case_list, row); /* opens it (row-selected) */
}

typedef struct {
    ClCaseSidebar *self; /* weak */
    gint64 id;
} ActivateLater;

static gboolean activate_later_cb(gpointer data)
{
    ActivateLater *a = data;
    if (a->self)
        g_signal_emit(a->self, signals[SIGNAL_CASE_ACTIVATED], 0, a->id);
    return G_SOURCE_REMOVE;
}

static void activate_later_free(gpointer data)
{
    ActivateLater *a = data;
    g_clear_weak_pointer(&a->self);
    g_free(a);
}

static void on_row_selected(GtkListBox *box, GtkListBoxRow *row, ClCaseSidebar *self)
{
    if (self->refreshing)
        return;
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_SELECTED_CASE]);
    gint64 id = row_case_id(row);
    if (!id)
        return;
    /* opening rebuilds the list, and the list box still uses this row after the signal: the
     * case opens from an idle, once the click is done with it */
    ActivateLater *a = g_new0(ActivateLater, 1);
    g_set_weak_pointer(&a->self, self);
    a->id = id;
    g_idle_add_full(G_PRIORITY_DEFAULT, activate_later_cb, a, activate_later_free);
}

static void on_search_changed(ClCaseSidebar *self)
{
    g_signal_emit(self, signals[SIGNAL_SEARCH_CHANGED], 0);
}

static void cl_case_sidebar_get_property(GObject *object, guint prop_id, GValue *value,
                                         GParamSpec *pspec)
{
    ClCaseSidebar *self = CL_CASE_SIDEBAR(object);
    switch (prop_id) {
    case PROP_SELECTED_CASE:
        g_value_set_int64(value, cl_case_sidebar_get_selected_case(self));
        break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    }
}

static void cl_case_sidebar_dispose(GObject *object)
{
    gtk_widget_dispose_template(GTK_WIDGET(object), CL_TYPE_CASE_SIDEBAR);
    G_OBJECT_CLASS(cl_case_sidebar_parent_class)->dispose(object);
}

static void cl_case_sidebar_class_init(ClCaseSidebarClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    GtkWidgetClass *widget_class = GTK_WIDGET_CLASS(klass);

    object_class->get_property = cl_case_sidebar_get_property;
    object_class->dispose = cl_case_sidebar_dispose;

    properties[PROP_SELECTED_CASE] = g_param_spec_int64(
        "selected-case", NULL, NULL, 0, G_MAXINT64, 0, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties(object_class, N_PROPS, properties);

    signals[SIGNAL_CASE_ACTIVATED] =
        g_signal_new("case-activated", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                     NULL, G_TYPE_NONE, 1, G_TYPE_INT64);
    signals[SIGNAL_SEARCH_CHANGED] =
        g_signal_new("search-changed", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                     NULL, G_TYPE_NONE, 0);

    gtk_widget_class_set_template_from_resource(widget_class,
                                                "/io/changelens/ChangeLens/cl-case-sidebar.ui");
    gtk_widget_class_bind_template_child(widget_class, ClCaseSidebar, case_search);
    gtk_widget_class_bind_template_child(widget_class, ClCaseSidebar, case_list);
    gtk_widget_class_bind_template_callback(widget_class, on_row_selected);
    gtk_widget_class_bind_template_callback(widget_class, on_search_changed);
}

static void cl_case_sidebar_init(ClCaseSidebar *self)
{
    gtk_widget_init_template(GTK_WIDGET(self));
}
