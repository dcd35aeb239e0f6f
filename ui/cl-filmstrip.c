/* cl-filmstrip.c - ClFilmstrip: a thumbnail per item of the sequence (rendered in a worker
 * thread), the pair shown marked; a click picks the pair, a drag reorders. */
#include "cl-filmstrip.h"

#include <glib/gi18n.h>

#include "image/display.h"
#include "worker/worker.h"

#define THUMB_SIDE 96

struct _ClFilmstrip {
    GtkBox parent_instance;

    GtkBox *strip; /* template child: the row of items */
    guint n_items;
};

G_DEFINE_FINAL_TYPE(ClFilmstrip, cl_filmstrip, GTK_TYPE_BOX)

enum { PROP_0, PROP_N_ITEMS, N_PROPS };
static GParamSpec *properties[N_PROPS];

enum { SIGNAL_PAIR_CHOSEN, SIGNAL_ITEM_MOVED, N_SIGNALS };
static guint signals[N_SIGNALS];

/* ---- thumbnails ---- */

typedef struct {
    ClDocument *doc;
    guint frame;
} ThumbJob;

static void thumb_job_free(ThumbJob *j)
{
    g_clear_object(&j->doc);
    g_free(j);
}

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
    g_task_return_pointer(
        task, gdk_memory_texture_new((int)w, (int)h, GDK_MEMORY_R8G8B8A8, bytes, (gsize)w * 4),
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

/* ---- clicks and drags ---- */

static guint item_index(GtkEventController *controller)
{
    GtkWidget *item = gtk_event_controller_get_widget(controller);
    return GPOINTER_TO_UINT(g_object_get_data(G_OBJECT(item), "index"));
}

static void on_item_clicked(GtkGestureClick *click, int n, double x, double y, ClFilmstrip *self)
{
    g_signal_emit(self, signals[SIGNAL_PAIR_CHOSEN], 0, item_index(GTK_EVENT_CONTROLLER(click)));
}

static GdkContentProvider *on_item_drag_prepare(GtkDragSource *src, double x, double y,
                                                gpointer data)
{
    return gdk_content_provider_new_typed(G_TYPE_UINT, item_index(GTK_EVENT_CONTROLLER(src)));
}

static gboolean on_item_drop(GtkDropTarget *target, const GValue *value, double x, double y,
                             ClFilmstrip *self)
{
    guint from = g_value_get_uint(value);
    guint to = item_index(GTK_EVENT_CONTROLLER(target));
    g_signal_emit(self, signals[SIGNAL_ITEM_MOVED], 0, from, to);
    return TRUE;
}

/* One item: its thumbnail (filled in when rendered) over its name, index i. */
static GtkWidget *new_item(ClFilmstrip *self, const ClFilmstripItem *it, guint i,
                           GCancellable *cancellable)
{
    GtkWidget *box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 2);
    gtk_widget_add_css_class(box, "cl-film-item");
    GtkWidget *pic = gtk_picture_new();
    gtk_widget_set_size_request(pic, THUMB_SIDE, THUMB_SIDE * 3 / 4);
    gtk_box_append(GTK_BOX(box), pic);
    g_autofree char *label =
        cl_document_get_n_frames(it->doc) > 1
            ? g_strdup_printf("%s [%u]", cl_document_get_name(it->doc), it->frame + 1)
            : g_strdup(cl_document_get_name(it->doc));
    GtkWidget *name = gtk_label_new(label);
    gtk_label_set_ellipsize(GTK_LABEL(name), PANGO_ELLIPSIZE_MIDDLE);
    gtk_label_set_max_width_chars(GTK_LABEL(name), 14);
    gtk_widget_add_css_class(name, "caption");
    gtk_box_append(GTK_BOX(box), name);
    g_object_set_data(G_OBJECT(box), "index", GUINT_TO_POINTER(i));
    GtkGesture *click = gtk_gesture_click_new();
    g_signal_connect(click, "released", G_CALLBACK(on_item_clicked), self);
    gtk_widget_add_controller(box, GTK_EVENT_CONTROLLER(click));
    GtkDragSource *drag = gtk_drag_source_new();
    g_signal_connect(drag, "prepare", G_CALLBACK(on_item_drag_prepare), NULL);
    gtk_widget_add_controller(box, GTK_EVENT_CONTROLLER(drag));
    GtkDropTarget *drop = gtk_drop_target_new(G_TYPE_UINT, GDK_ACTION_MOVE | GDK_ACTION_COPY);
    g_signal_connect(drop, "drop", G_CALLBACK(on_item_drop), self);
    gtk_widget_add_controller(box, GTK_EVENT_CONTROLLER(drop));
    gtk_widget_set_tooltip_text(box, _("Click to compare with the image before it; drag to "
                                       "reorder"));
    ThumbJob *j = g_new0(ThumbJob, 1);
    j->doc = g_object_ref(it->doc);
    j->frame = it->frame;
    g_autoptr(GTask) task = g_task_new(NULL, cancellable, thumb_done, g_object_ref(pic));
    g_task_set_task_data(task, j, (GDestroyNotify)thumb_job_free);
    g_task_run_in_thread(task, thumb_thread);
    return box;
}

void cl_filmstrip_set_items(ClFilmstrip *self, const ClFilmstripItem *items, guint n,
                            GCancellable *cancellable)
{
    g_return_if_fail(CL_IS_FILMSTRIP(self));
    GtkWidget *c;
    while ((c = gtk_widget_get_first_child(GTK_WIDGET(self->strip))))
        gtk_box_remove(self->strip, c);
    gtk_widget_set_visible(GTK_WIDGET(self), n > 2);
    for (guint i = 0; i < n; i++)
        gtk_box_append(self->strip, new_item(self, &items[i], i, cancellable));
    if (n != self->n_items) {
        self->n_items = n;
        g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_N_ITEMS]);
    }
}

void cl_filmstrip_mark_pair(ClFilmstrip *self, guint a, guint b)
{
    g_return_if_fail(CL_IS_FILMSTRIP(self));
    guint k = 0;
    for (GtkWidget *c = gtk_widget_get_first_child(GTK_WIDGET(self->strip)); c;
         c = gtk_widget_get_next_sibling(c), k++) {
        if (k == a || k == b)
            gtk_widget_add_css_class(c, "cl-film-current");
        else
            gtk_widget_remove_css_class(c, "cl-film-current");
    }
}

guint cl_filmstrip_get_n_items(ClFilmstrip *self)
{
    g_return_val_if_fail(CL_IS_FILMSTRIP(self), 0);
    return self->n_items;
}

/* ---- GObject ---- */

static void cl_filmstrip_get_property(GObject *object, guint prop_id, GValue *value,
                                      GParamSpec *pspec)
{
    ClFilmstrip *self = CL_FILMSTRIP(object);
    switch (prop_id) {
    case PROP_N_ITEMS: g_value_set_uint(value, self->n_items); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    }
}

static void cl_filmstrip_dispose(GObject *object)
{
    gtk_widget_dispose_template(GTK_WIDGET(object), CL_TYPE_FILMSTRIP);
    G_OBJECT_CLASS(cl_filmstrip_parent_class)->dispose(object);
}

static void cl_filmstrip_class_init(ClFilmstripClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    GtkWidgetClass *widget_class = GTK_WIDGET_CLASS(klass);

    object_class->get_property = cl_filmstrip_get_property;
    object_class->dispose = cl_filmstrip_dispose;

    properties[PROP_N_ITEMS] = g_param_spec_uint("n-items", NULL, NULL, 0, G_MAXUINT, 0,
                                                 G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties(object_class, N_PROPS, properties);

    signals[SIGNAL_PAIR_CHOSEN] =
        g_signal_new("pair-chosen", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                     NULL, G_TYPE_NONE, 1, G_TYPE_UINT);
    signals[SIGNAL_ITEM_MOVED] =
        g_signal_new("item-moved", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                     G_TYPE_NONE, 2, G_TYPE_UINT, G_TYPE_UINT);

    gtk_widget_class_set_template_from_resource(widget_class,
                                                "/io/changelens/ChangeLens/cl-filmstrip.ui");
    gtk_widget_class_bind_template_child(widget_class, ClFilmstrip, strip);
}

static void cl_filmstrip_init(ClFilmstrip *self)
{
    gtk_widget_init_template(GTK_WIDGET(self));
}
