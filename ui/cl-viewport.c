/* cl-viewport.c - ClViewport: zoom/centre model that linked image views share. */
#include "cl-viewport.h"

#include <math.h>

struct _ClViewport {
    GObject parent_instance;
    double zoom;
    double center_x, center_y; /* image pixel coordinates of the view's centre */
    gboolean fit;
    guint content_width, content_height;
};

G_DEFINE_FINAL_TYPE(ClViewport, cl_viewport, G_TYPE_OBJECT)

enum { PROP_0, PROP_ZOOM, PROP_CENTER_X, PROP_CENTER_Y, PROP_FIT, N_PROPS };
static GParamSpec *properties[N_PROPS];

/* Centres far outside any image are meaningless and make float maths lose precision. */
#define CL_VIEWPORT_MAX_COORD 1e7

static void cl_viewport_get_property(GObject *object, guint prop_id, GValue *value,
                                     GParamSpec *pspec)
{
    ClViewport *self = CL_VIEWPORT(object);
    switch (prop_id) {
    case PROP_ZOOM: g_value_set_double(value, self->zoom); break;
    case PROP_CENTER_X: g_value_set_double(value, self->center_x); break;
    case PROP_CENTER_Y: g_value_set_double(value, self->center_y); break;
    case PROP_FIT: g_value_set_boolean(value, self->fit); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    }
}

static void cl_viewport_set_property(GObject *object, guint prop_id, const GValue *value,
                                     GParamSpec *pspec)
{
    ClViewport *self = CL_VIEWPORT(object);
    switch (prop_id) {
    case PROP_ZOOM: cl_viewport_set_zoom(self, g_value_get_double(value)); break;
    case PROP_CENTER_X:
        cl_viewport_set(self, self->zoom, g_value_get_double(value), self->center_y);
        break;
    case PROP_CENTER_Y:
        cl_viewport_set(self, self->zoom, self->center_x, g_value_get_double(value));
        break;
    case PROP_FIT: cl_viewport_set_fit(self, g_value_get_boolean(value)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
    }
}

static void cl_viewport_class_init(ClViewportClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    object_class->get_property = cl_viewport_get_property;
    object_class->set_property = cl_viewport_set_property;

    GParamFlags flags = G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS;
    properties[PROP_ZOOM] = g_param_spec_double("zoom", NULL, NULL, CL_VIEWPORT_MIN_ZOOM,
                                                CL_VIEWPORT_MAX_ZOOM, 1.0, flags);
    properties[PROP_CENTER_X] = g_param_spec_double("center-x", NULL, NULL, -CL_VIEWPORT_MAX_COORD,
                                                    CL_VIEWPORT_MAX_COORD, 0.0, flags);
    properties[PROP_CENTER_Y] = g_param_spec_double("center-y", NULL, NULL, -CL_VIEWPORT_MAX_COORD,
                                                    CL_VIEWPORT_MAX_COORD, 0.0, flags);
    properties[PROP_FIT] = g_param_spec_boolean("fit", NULL, NULL, TRUE, flags);
    g_object_class_install_properties(object_class, N_PROPS, properties);
}

static void cl_viewport_init(ClViewport *self)
{
    self->zoom = 1.0;
    self->fit = TRUE;
}

ClViewport *cl_viewport_new(void)
{
    return g_object_new(CL_TYPE_VIEWPORT, NULL);
}

double cl_viewport_get_zoom(ClViewport *self)
{
    g_return_val_if_fail(CL_IS_VIEWPORT(self), 1.0);
    return self->zoom;
}

double cl_viewport_get_center_x(ClViewport *self)
{
    g_return_val_if_fail(CL_IS_VIEWPORT(self), 0.0);
    return self->center_x;
}

double cl_viewport_get_center_y(ClViewport *self)
{
    g_return_val_if_fail(CL_IS_VIEWPORT(self), 0.0);
    return self->center_y;
}

gboolean cl_viewport_get_fit(ClViewport *self)
{
    g_return_val_if_fail(CL_IS_VIEWPORT(self), FALSE);
    return self->fit;
}

/* Sets the values without touching fit; notifications are queued by the caller's freeze. */
static void set_values(ClViewport *self, double zoom, double cx, double cy)
{
    if (!isfinite(zoom) || !isfinite(cx) || !isfinite(cy))
        return;
    zoom = CLAMP(zoom, CL_VIEWPORT_MIN_ZOOM, CL_VIEWPORT_MAX_ZOOM);
    cx = CLAMP(cx, -CL_VIEWPORT_MAX_COORD, CL_VIEWPORT_MAX_COORD);
    cy = CLAMP(cy, -CL_VIEWPORT_MAX_COORD, CL_VIEWPORT_MAX_COORD);
    if (zoom != self->zoom) {
        self->zoom = zoom;
        g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_ZOOM]);
    }
    if (cx != self->center_x) {
        self->center_x = cx;
        g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_CENTER_X]);
    }
    if (cy != self->center_y) {
        self->center_y = cy;
        g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_CENTER_Y]);
    }
}

void cl_viewport_set_fit(ClViewport *self, gboolean fit)
{
    g_return_if_fail(CL_IS_VIEWPORT(self));
    fit = !!fit;
    if (fit == self->fit)
        return;
    self->fit = fit;
    g_object_notify_by_pspec(G_OBJECT(self), properties[PROP_FIT]);
}

void cl_viewport_set(ClViewport *self, double zoom, double center_x, double center_y)
{
    g_return_if_fail(CL_IS_VIEWPORT(self));
    g_object_freeze_notify(G_OBJECT(self));
    set_values(self, zoom, center_x, center_y);
    cl_viewport_set_fit(self, FALSE);
    g_object_thaw_notify(G_OBJECT(self));
}

void cl_viewport_set_zoom(ClViewport *self, double zoom)
{
    g_return_if_fail(CL_IS_VIEWPORT(self));
    cl_viewport_set(self, zoom, self->center_x, self->center_y);
}

void cl_viewport_zoom_at(ClViewport *self, double factor, double anchor_x, double anchor_y)
{
    g_return_if_fail(CL_IS_VIEWPORT(self));
    if (!(factor > 0.0) || !isfinite(factor))
        return;
    double zoom = CLAMP(self->zoom * factor, CL_VIEWPORT_MIN_ZOOM, CL_VIEWPORT_MAX_ZOOM);
    /* The anchor stays at the same screen offset from the centre: (a - c) * z = (a - c') * z'. */
    double ratio = self->zoom / zoom;
    cl_viewport_set(self, zoom, anchor_x - (anchor_x - self->center_x) * ratio,
                    anchor_y - (anchor_y - self->center_y) * ratio);
}

void cl_viewport_pan_by(ClViewport *self, double dx, double dy)
{
    g_return_if_fail(CL_IS_VIEWPORT(self));
    cl_viewport_set(self, self->zoom, self->center_x - dx / self->zoom,
                    self->center_y - dy / self->zoom);
}

void cl_viewport_set_content_size(ClViewport *self, guint width, guint height)
{
    g_return_if_fail(CL_IS_VIEWPORT(self));
    self->content_width = width;
    self->content_height = height;
}

void cl_viewport_get_content_size(ClViewport *self, guint *width, guint *height)
{
    g_return_if_fail(CL_IS_VIEWPORT(self));
    if (width)
        *width = self->content_width;
    if (height)
        *height = self->content_height;
}

void cl_viewport_fit_to(ClViewport *self, double view_width, double view_height)
{
    g_return_if_fail(CL_IS_VIEWPORT(self));
    if (self->content_width == 0 || self->content_height == 0 || view_width < 1 || view_height < 1)
        return;
    double zoom = MIN(view_width / self->content_width, view_height / self->content_height);
    g_object_freeze_notify(G_OBJECT(self));
    set_values(self, zoom, self->content_width / 2.0, self->content_height / 2.0);
    cl_viewport_set_fit(self, TRUE);
    g_object_thaw_notify(G_OBJECT(self));
}

void cl_viewport_copy_from(ClViewport *self, ClViewport *other)
{
    g_return_if_fail(CL_IS_VIEWPORT(self));
    g_return_if_fail(CL_IS_VIEWPORT(other));
    if (self == other)
        return;
    g_object_freeze_notify(G_OBJECT(self));
    set_values(self, other->zoom, other->center_x, other->center_y);
    cl_viewport_set_fit(self, other->fit);
    self->content_width = other->content_width;
    self->content_height = other->content_height;
    g_object_thaw_notify(G_OBJECT(self));
}
