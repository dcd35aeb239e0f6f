/* shapes.c - the `shapes` task: CLEVR-like scenes (cubes, spheres, cylinders in 2.5D; 8 colours,
 * 2 sizes, rubber or metal) and a second scene with 1-4 moves/adds/removes/replaces, described
 * in the CLEVR-Multi-Change phrasing of the SVE paper's appendix B.2. */
#include "synth/synth-private.h"

#include <string.h>

/* CLEVR's colours (its properties.json), 0..255 */
static const guint8 colours[CL_SYNTH_N_COLOURS][3] = {
    { 87, 87, 87 },  { 173, 35, 35 },  { 42, 75, 215 },  { 29, 105, 20 },
    { 129, 74, 25 }, { 129, 38, 192 }, { 41, 208, 208 }, { 255, 238, 51 },
};

#define FRAME_MARGIN 3.0 /* objects stay this far inside the frame (the shift is at most 2) */
#define GAP 2.0          /* between two objects' boxes: they never touch */

/* ---- phrasing -------------------------------------------------------------------------------- */

/* {b}: the object before, {a}: the object after (CLEVR-Change templates) */
static const char *const move_t[] = { "The {b} moved.", "The {b} changed its location.",
                                      "The {b} is in a different location.",
                                      "Someone moved the {b}." };
static const char *const add_t[] = { "A new {a} is visible.", "Someone added a {a}.",
                                     "A {a} has been added.", "There is a new {a}." };
static const char *const remove_t[] = { "The {b} has disappeared.", "The {b} is no longer there.",
                                        "The {b} is missing.", "Someone removed the {b}." };
static const char *const replace_t[] = { "Someone replaced the {b} with a {a}.",
                                         "The {b} gave up its position to a {a}.",
                                         "The {b} was replaced by a {a}.",
                                         "A {a} replaced the {b}." };

static const char *const *templates(ClSynthChangeType t, int *n)
{
    switch (t) {
    case CL_SYNTH_CHANGE_MOVE: *n = G_N_ELEMENTS(move_t); return move_t;
    case CL_SYNTH_CHANGE_ADD: *n = G_N_ELEMENTS(add_t); return add_t;
    case CL_SYNTH_CHANGE_REMOVE: *n = G_N_ELEMENTS(remove_t); return remove_t;
    case CL_SYNTH_CHANGE_REPLACE: *n = G_N_ELEMENTS(replace_t); return replace_t;
    }
    *n = 0;
    return NULL;
}

int cl_synth_change_n_variants(ClSynthChangeType t)
{
    int n;
    templates(t, &n);
    return n;
}

char *cl_synth_object_description(const ClSynthObject *o)
{
    g_return_val_if_fail(o, NULL);
    return g_strdup_printf("%s %s %s %s", cl_synth_size_name(o->size),
                           cl_synth_colour_name(o->colour), cl_synth_material_name(o->material),
                           cl_synth_shape_name(o->shape));
}

char *cl_synth_change_phrase(ClSynthChangeType t, const ClSynthObject *before,
                             const ClSynthObject *after, int variant)
{
    int n;
    const char *const *tt = templates(t, &n);
    g_return_val_if_fail(tt && variant >= 0 && variant < n, NULL);
    g_return_val_if_fail(t == CL_SYNTH_CHANGE_ADD || before, NULL);
    g_return_val_if_fail(t == CL_SYNTH_CHANGE_MOVE || t == CL_SYNTH_CHANGE_REMOVE || after, NULL);
    g_autofree char *b = before ? cl_synth_object_description(before) : g_strdup("");
    g_autofree char *a = after ? cl_synth_object_description(after) : g_strdup("");
    GString *out = g_string_new(NULL);
    for (const char *p = tt[variant]; *p; p++) {
        if (p[0] == '{' && (p[1] == 'a' || p[1] == 'b') && p[2] == '}') {
            g_string_append(out, p[1] == 'a' ? a : b);
            p += 2;
        } else {
            g_string_append_c(out, *p);
        }
    }
    return g_string_free(out, FALSE);
}

/* ---- geometry -------------------------------------------------------------------------------- */

static double radius(const ClSynthObject *o, double scale)
{
    return (o->size ? 8.5 : 5.5) * scale;
}

/* The extent of everything drawn for the object (body and shadow), plus antialiasing. */
static void object_box(ClSynthObject *o, double scale)
{
    double r = radius(o, scale), x = o->x, y = o->y;
    double x0, y0, x1, y1;
    switch (o->shape) {
    case CL_SYNTH_SHAPE_CUBE: {
        double s = 1.6 * r, d = 0.5 * s, dx = 0.45 * s;
        x0 = x - (s + dx) / 2, x1 = x + (s + dx) / 2;
        y0 = y + d / 2 - s - d, y1 = y + d / 2;
        break;
    }
    case CL_SYNTH_SHAPE_CYLINDER: {
        double rc = 0.9 * r, h = 1.5 * r, ery = 0.4 * rc;
        x0 = x - rc, x1 = x + rc, y0 = y - h - ery, y1 = y + ery;
        break;
    }
    default: /* sphere */ x0 = x - r, x1 = x + r, y0 = y - 1.85 * r, y1 = y + 0.15 * r; break;
    }
    /* shadow: an ellipse down and to the right (light from the upper left) */
    x0 = MIN(x0, x + 0.35 * r - 1.15 * r), x1 = MAX(x1, x + 0.35 * r + 1.15 * r);
    y1 = MAX(y1, y + 0.1 * r + 0.5 * r);
    o->box[0] = x0 - 1.5, o->box[1] = y0 - 1.5, o->box[2] = x1 + 1.5, o->box[3] = y1 + 1.5;
}

static gboolean boxes_apart(const double a[4], const double b[4])
{
    return a[2] + GAP <= b[0] || b[2] + GAP <= a[0] || a[3] + GAP <= b[1] || b[3] + GAP <= a[1];
}

static gboolean in_frame(const ClSynthObject *o, int w, int h)
{
    return o->box[0] >= FRAME_MARGIN && o->box[1] >= FRAME_MARGIN &&
           o->box[2] <= w - FRAME_MARGIN && o->box[3] <= h - FRAME_MARGIN;
}

/* apart from every object of `a` except index `skip` */
static gboolean apart_from(const ClSynthObject *o, const GArray *a, int skip)
{
    for (guint i = 0; i < a->len; i++)
        if ((int)i != skip && !boxes_apart(o->box, g_array_index(a, ClSynthObject, i).box))
            return FALSE;
    return TRUE;
}

static int attr_key(const ClSynthObject *o)
{
    return ((o->shape * CL_SYNTH_N_COLOURS + o->colour) * CL_SYNTH_N_SIZES + o->size) *
               CL_SYNTH_N_MATERIALS +
           o->material;
}
#define N_KEYS (3 * CL_SYNTH_N_COLOURS * CL_SYNTH_N_SIZES * CL_SYNTH_N_MATERIALS)

static void random_attrs(ClSynthObject *o, ClSynthRng *rng)
{
    o->shape = (ClSynthShape)cl_synth_rng_int(rng, 0, 2);
    o->colour = cl_synth_rng_int(rng, 0, CL_SYNTH_N_COLOURS - 1);
    o->size = cl_synth_rng_int(rng, 0, CL_SYNTH_N_SIZES - 1);
    o->material = cl_synth_rng_int(rng, 0, CL_SYNTH_N_MATERIALS - 1);
}

static void random_position(ClSynthObject *o, ClSynthRng *rng, int w, int h, double scale)
{
    o->x = cl_synth_rng_range(rng, 0, w);
    o->y = cl_synth_rng_range(rng, 0, h);
    object_box(o, scale);
}

/* ---- drawing --------------------------------------------------------------------------------- */

static void set_rgb(cairo_t *cr, const guint8 c[3], double k)
{
    cairo_set_source_rgb(cr, MIN(1.0, c[0] / 255.0 * k), MIN(1.0, c[1] / 255.0 * k),
                         MIN(1.0, c[2] / 255.0 * k));
}

static void stop(cairo_pattern_t *p, double at, const guint8 c[3], double k, double white)
{
    double v[3];
    for (int i = 0; i < 3; i++)
        v[i] = MIN(1.0, c[i] / 255.0 * k) * (1 - white) + white;
    cairo_pattern_add_color_stop_rgb(p, at, v[0], v[1], v[2]);
}

static void fill_with(cairo_t *cr, cairo_pattern_t *p)
{
    cairo_set_source(cr, p);
    cairo_fill(cr);
    cairo_pattern_destroy(p);
}

static void draw_sphere(cairo_t *cr, double x, double y, double r, const guint8 *c, gboolean metal)
{
    double cy = y - 0.85 * r;
    cairo_pattern_t *p = cairo_pattern_create_radial(x - 0.35 * r, cy - 0.35 * r, 0, x, cy, r);
    if (metal) {
        stop(p, 0.0, c, 1.0, 0.95);
        stop(p, 0.18, c, 1.25, 0.1);
        stop(p, 0.75, c, 0.55, 0);
        stop(p, 1.0, c, 0.85, 0.1); /* rim reflection */
    } else {
        stop(p, 0.0, c, 1.2, 0);
        stop(p, 1.0, c, 0.55, 0);
    }
    cairo_arc(cr, x, cy, r, 0, 2 * G_PI);
    fill_with(cr, p);
}

static void draw_cube(cairo_t *cr, double x, double y, double r, const guint8 *c, gboolean metal)
{
    double s = 1.6 * r, d = 0.5 * s, dx = 0.45 * s;
    double fx0 = x - (s + dx) / 2, fy1 = y + d / 2, fy0 = fy1 - s;
    /* top face */
    cairo_move_to(cr, fx0, fy0);
    cairo_line_to(cr, fx0 + s, fy0);
    cairo_line_to(cr, fx0 + s + dx, fy0 - d);
    cairo_line_to(cr, fx0 + dx, fy0 - d);
    cairo_close_path(cr);
    if (metal) {
        cairo_pattern_t *p = cairo_pattern_create_linear(fx0, fy0 - d, fx0 + s + dx, fy0);
        stop(p, 0, c, 1.1, 0.15);
        stop(p, 0.45, c, 1.2, 0.6);
        stop(p, 1, c, 0.9, 0);
        fill_with(cr, p);
    } else {
        set_rgb(cr, c, 1.15);
        cairo_fill(cr);
    }
    /* front face */
    cairo_rectangle(cr, fx0, fy0, s, s);
    if (metal) {
        cairo_pattern_t *p = cairo_pattern_create_linear(fx0, fy0, fx0 + s, fy1);
        stop(p, 0, c, 1.05, 0.25);
        stop(p, 0.5, c, 0.8, 0);
        stop(p, 1, c, 0.6, 0);
        fill_with(cr, p);
    } else {
        set_rgb(cr, c, 0.88);
        cairo_fill(cr);
    }
    /* side face */
    cairo_move_to(cr, fx0 + s, fy0);
    cairo_line_to(cr, fx0 + s + dx, fy0 - d);
    cairo_line_to(cr, fx0 + s + dx, fy1 - d);
    cairo_line_to(cr, fx0 + s, fy1);
    cairo_close_path(cr);
    set_rgb(cr, c, metal ? 0.45 : 0.62);
    cairo_fill(cr);
}

static void ellipse(cairo_t *cr, double x, double y, double rx, double ry)
{
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_scale(cr, rx, ry);
    cairo_arc(cr, 0, 0, 1, 0, 2 * G_PI);
    cairo_restore(cr);
}

static void draw_cylinder(cairo_t *cr, double x, double y, double r, const guint8 *c,
                          gboolean metal)
{
    double rc = 0.9 * r, h = 1.5 * r, ery = 0.4 * rc;
    /* body: the side between the two ellipses, lit across */
    cairo_move_to(cr, x - rc, y - h);
    cairo_line_to(cr, x - rc, y);
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_scale(cr, rc, ery);
    cairo_arc_negative(cr, 0, 0, 1, G_PI, 0);
    cairo_restore(cr);
    cairo_line_to(cr, x + rc, y - h);
    cairo_close_path(cr);
    cairo_pattern_t *p = cairo_pattern_create_linear(x - rc, 0, x + rc, 0);
    if (metal) {
        stop(p, 0, c, 0.5, 0);
        stop(p, 0.28, c, 1.1, 0.55);
        stop(p, 0.42, c, 1.2, 0.05);
        stop(p, 1, c, 0.35, 0);
    } else {
        stop(p, 0, c, 0.6, 0);
        stop(p, 0.4, c, 1.05, 0);
        stop(p, 1, c, 0.5, 0);
    }
    fill_with(cr, p);
    ellipse(cr, x, y - h, rc, ery);
    if (metal) {
        cairo_pattern_t *q = cairo_pattern_create_linear(x - rc, y - h - ery, x + rc, y - h + ery);
        stop(q, 0, c, 1.2, 0.5);
        stop(q, 1, c, 0.95, 0);
        fill_with(cr, q);
    } else {
        set_rgb(cr, c, 1.12);
        cairo_fill(cr);
    }
}

static void draw_object(cairo_t *cr, const ClSynthObject *o, double scale)
{
    double r = radius(o, scale);
    const guint8 *c = colours[o->colour];
    gboolean metal = o->material == 1;
    cairo_set_source_rgba(cr, 0, 0, 0, 0.3);
    ellipse(cr, o->x + 0.35 * r, o->y + 0.1 * r, 1.15 * r, 0.5 * r);
    cairo_fill(cr);
    switch (o->shape) {
    case CL_SYNTH_SHAPE_CUBE: draw_cube(cr, o->x, o->y, r, c, metal); break;
    case CL_SYNTH_SHAPE_CYLINDER: draw_cylinder(cr, o->x, o->y, r, c, metal); break;
    default: draw_sphere(cr, o->x, o->y, r, c, metal); break;
    }
}

typedef struct {
    double scale;
} ShapesDrawing;

static void draw(cairo_t *cr, const ClSynthSample *s, int image, gpointer data)
{
    const ShapesDrawing *d = data;
    int w = s->images[image].width, h = s->images[image].height;
    /* CLEVR's grey floor, lit from the far side */
    cairo_pattern_t *p = cairo_pattern_create_linear(0, 0, 0, h);
    cairo_pattern_add_color_stop_rgb(p, 0, 0.60, 0.60, 0.59);
    cairo_pattern_add_color_stop_rgb(p, 1, 0.44, 0.44, 0.45);
    cairo_rectangle(cr, -16, -16, w + 32, h + 32);
    fill_with(cr, p);
    const GArray *objs = s->objects[image];
    for (guint i = 0; i < objs->len; i++)
        draw_object(cr, &g_array_index(objs, ClSynthObject, i), d->scale);
}

/* ---- the task -------------------------------------------------------------------------------- */

/* The first scene of a sample (also the grounded task's, ground.c): 4-8 objects at 160 px
 * (CLEVR-Change's own range is 3-10; at 10-15 a 160 px scene puts two or three objects in each
 * merged visual token and our model did not learn to read them within its training budget:
 * docs/runs/2026-11-22-ship4.md), growing with the area up to the paper's 30-40 at 768 px, each
 * inside the frame and apart from the others. */
GArray *cl_synth_shapes_scene(ClSynthRng *rng, const ClSynthOptions *opts, double scale)
{
    int w = opts->width, h = opts->height;
    double area = (double)w * h / (160.0 * 160.0);
    int lo = opts->min_objects ? opts->min_objects : CLAMP((int)(4 * area + 0.5), 3, 30);
    int hi = opts->max_objects ? opts->max_objects : CLAMP((int)(8 * area + 0.5), 4, 40);
    if (hi < lo)
        hi = lo;

    GArray *scene = g_array_new(FALSE, TRUE, sizeof(ClSynthObject));
    int want = cl_synth_rng_int(rng, lo, hi);
    for (int tries = 0; (int)scene->len < want && tries < 200 * want; tries++) {
        ClSynthObject o = { 0 };
        random_attrs(&o, rng);
        random_position(&o, rng, w, h, scale);
        if (in_frame(&o, w, h) && apart_from(&o, scene, -1))
            g_array_append_val(scene, o);
    }
    return scene;
}

void cl_synth_shapes_drawing(ClSynthDrawing *drawing, double scale)
{
    ShapesDrawing *d = g_new(ShapesDrawing, 1);
    d->scale = scale;
    drawing->draw = draw;
    drawing->data = d;
    drawing->free_data = g_free;
}

/* A fresh look for an added or replacing object: one no object before or after already has,
 * so each sentence names exactly one object in either scene. */
static void fresh_attrs(ClSynthObject *o, ClSynthRng *rng, const guint8 *used)
{
    do
        random_attrs(o, rng);
    while (used[attr_key(o)]);
}

gboolean cl_synth_shapes_generate(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                                  ClSynthDrawing *drawing, GError **error)
{
    int w = opts->width, h = opts->height;
    double scale = cl_synth_scale(s, opts);
    if (opts->n_images != 0 && opts->n_images != 2) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS,
                    "synth: shapes scenes come in pairs (2 images), not %d", opts->n_images);
        return FALSE;
    }
    GArray *before = cl_synth_shapes_scene(rng, opts, scale);
    guint8 count[N_KEYS] = { 0 }, used[N_KEYS] = { 0 };
    for (guint i = 0; i < before->len; i++) {
        int k = attr_key(&g_array_index(before, ClSynthObject, i));
        count[k]++;
        used[k] = 1;
    }

    /* The after scene starts as a copy; removed slots are dropped at the end. */
    GArray *after = g_array_copy(before);
    g_autofree gboolean *touched = g_new0(gboolean, before->len + 1);
    g_autofree gboolean *removed = g_new0(gboolean, before->len + 1);
    GArray *changes = g_array_new(FALSE, FALSE, sizeof(ClSynthChange));
    int n_changes = cl_synth_rng_int(rng, opts->min_changes, opts->max_changes);
    for (int attempt = 0; (int)changes->len < n_changes && attempt < 400; attempt++) {
        ClSynthChange c = { (ClSynthChangeType)cl_synth_rng_int(rng, 0, 3), 1, -1, -1 };
        if (c.type != CL_SYNTH_CHANGE_ADD) {
            if (before->len == 0)
                continue;
            int i = cl_synth_rng_int(rng, 0, (int)before->len - 1);
            /* only an object whose description is unique can be named */
            if (touched[i] || count[attr_key(&g_array_index(before, ClSynthObject, i))] != 1)
                continue;
            c.before = i;
        }
        ClSynthObject o =
            c.before >= 0 ? g_array_index(before, ClSynthObject, c.before) : (ClSynthObject){ 0 };
        gboolean placed = c.type == CL_SYNTH_CHANGE_REMOVE;
        if (c.type == CL_SYNTH_CHANGE_REPLACE)
            fresh_attrs(&o, rng, used);
        else if (c.type == CL_SYNTH_CHANGE_ADD)
            fresh_attrs(&o, rng, used);
        for (int t = 0; !placed && t < 60; t++) {
            if (c.type == CL_SYNTH_CHANGE_REPLACE)
                object_box(&o, scale); /* same spot, maybe another size */
            else
                random_position(&o, rng, w, h, scale);
            /* new places keep clear of every old box too, so a change never looks like
             * another (an add where something was removed reads as a replace) */
            placed = in_frame(&o, w, h) && apart_from(&o, after, c.before) &&
                     apart_from(&o, before, c.type == CL_SYNTH_CHANGE_REPLACE ? c.before : -1);
            if (c.type == CL_SYNTH_CHANGE_REPLACE && !placed)
                fresh_attrs(&o, rng, used);
        }
        if (!placed)
            continue;
        if (c.before >= 0)
            touched[c.before] = TRUE;
        if (c.type == CL_SYNTH_CHANGE_REMOVE)
            removed[c.before] = TRUE;
        else if (c.type == CL_SYNTH_CHANGE_ADD) {
            g_array_append_val(after, o);
            c.after = (int)after->len - 1;
        } else {
            g_array_index(after, ClSynthObject, c.before) = o;
            c.after = c.before;
        }
        if (c.type == CL_SYNTH_CHANGE_ADD || c.type == CL_SYNTH_CHANGE_REPLACE)
            used[attr_key(&o)] = 1;
        g_array_append_val(changes, c);
    }
    if ((int)changes->len < opts->min_changes) {
        g_array_unref(before);
        g_array_unref(after);
        g_array_unref(changes);
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS,
                    "synth: the %d × %d scene is too crowded for %d changes; use fewer objects "
                    "or a larger image",
                    w, h, opts->min_changes);
        return FALSE;
    }
    /* drop the removed objects, renumbering the after indices */
    g_autofree int *remap = g_new(int, after->len);
    GArray *kept = g_array_new(FALSE, TRUE, sizeof(ClSynthObject));
    for (guint i = 0; i < after->len; i++) {
        remap[i] = i < before->len && removed[i] ? -1 : (int)kept->len;
        if (remap[i] >= 0)
            g_array_append_val(kept, g_array_index(after, ClSynthObject, i));
    }
    g_array_unref(after);
    for (guint i = 0; i < changes->len; i++) {
        ClSynthChange *c = &g_array_index(changes, ClSynthChange, i);
        if (c->after >= 0)
            c->after = remap[c->after];
    }

    s->n_images = 2;
    s->objects = g_new0(GArray *, 2);
    s->objects[0] = before;
    s->objects[1] = kept;
    g_array_unref(s->changes);
    s->changes = changes;
    s->quantity = CL_SYNTH_QUANTITY_NONE;

    GString *answer = g_string_new(NULL);
    for (guint i = 0; i < changes->len; i++) {
        const ClSynthChange *c = &g_array_index(changes, ClSynthChange, i);
        int v = cl_synth_rng_int(rng, 0, cl_synth_change_n_variants(c->type) - 1);
        g_autofree char *sentence = cl_synth_change_phrase(
            c->type, c->before >= 0 ? &g_array_index(before, ClSynthObject, c->before) : NULL,
            c->after >= 0 ? &g_array_index(kept, ClSynthObject, c->after) : NULL, v);
        if (i)
            g_string_append_c(answer, ' ');
        g_string_append(answer, sentence);
    }
    s->conversation = cl_chat_describe_conversation(CL_CHAT_DOMAIN_SHAPES, 2, NULL, error);
    g_assert(s->conversation); /* a fixed, valid request */
    cl_chat_conversation_add(s->conversation, CL_CHAT_ASSISTANT, answer->str);
    g_string_free(answer, TRUE);

    cl_synth_shapes_drawing(drawing, scale);
    return TRUE;
}
