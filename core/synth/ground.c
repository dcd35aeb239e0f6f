/* ground.c - the grounded single-image tasks (ground.h): each change task's scene generator for
 * one image, asked what it shows (objects with attributes and positions, the red dot's
 * coordinates, the findings, the land cover, the objects and backdrop). The scene, its drawing
 * and the acquisition nuisances are the change task's; only the conversation is new. */
#include "synth/ground.h"
#include "jsonnum.h"
#include "synth/radiograph.h"
#include "synth/synth-private.h"

#include <math.h>
#include <string.h>

typedef enum { G_SHAPES, G_DOTS, G_RADIOGRAPH, G_AERIAL, G_EDITS, N_GROUND } GroundTask;

static const char *const ground_names[N_GROUND] = { "shapes-ground", "dots-ground",
                                                    "radiograph-ground", "aerial-ground",
                                                    "edits-ground" };

static const struct {
    const char *system; /* only where the change task's domain has one (shapes has none) */
    const char *question;
} prompts[N_GROUND] = {
    [G_SHAPES] = { NULL, "List the objects in the scene." },
    [G_DOTS] = { "You are a visual locator. You are shown a screenshot with a red dot. Output the "
                 "dot's position as (x, y), normalized to [0, 1] from the top-left corner and "
                 "rounded to 4 decimal places.",
                 "Where is the red dot?" },
    [G_RADIOGRAPH] = { "You are a medical imaging expert. Given a chest X-ray, name the findings "
                       "it shows.",
                       "Which findings are present?" },
    [G_AERIAL] = { "You are an expert at describing satellite images. Given an image, describe "
                   "what it shows.",
                   "Describe the land cover." },
    [G_EDITS] = { "You are given an image. Describe what it shows.",
                  "List the objects in the picture." },
};

/* the coarse 3 × 3 position of a box centre, as said and as the JSON names it */
static const char *const position_phrases[9] = {
    "at the top left",    "at the top",    "at the top right",
    "on the left",        "in the centre", "on the right",
    "at the bottom left", "at the bottom", "at the bottom right",
};
static const char *const position_names[9] = { "top left",    "top",    "top right",
                                               "left",        "centre", "right",
                                               "bottom left", "bottom", "bottom right" };

/* aerial.c's feature kinds, carried in ClSynthObject.colour */
enum { AERIAL_BUILDING, AERIAL_ROAD, AERIAL_TREES, AERIAL_WATER, N_AERIAL };
static const char *const aerial_kinds[N_AERIAL] = { "building", "road", "trees", "water" };

/* edits.c's settings, returned by cl_synth_edits_scene */
static const char *const settings[3] = { "on a table-top", "in a room", "in a garden" };
static const char *const setting_names[3] = { "table-top", "room", "garden" };

static int ground_task(const char *task)
{
    for (int i = 0; task && i < N_GROUND; i++)
        if (strcmp(task, ground_names[i]) == 0)
            return i;
    return -1;
}

gboolean cl_synth_task_is_grounded(const char *task)
{
    return ground_task(task) >= 0;
}

/* ---- positions ------------------------------------------------------------------------------- */

static void box_centre(const ClSynthObject *o, double *cx, double *cy)
{
    *cx = (o->box[0] + o->box[2]) / 2;
    *cy = (o->box[1] + o->box[3]) / 2;
}

static int cell_of(const ClSynthObject *o, int w, int h)
{
    double cx, cy;
    box_centre(o, &cx, &cy);
    int gx = CLAMP((int)floor(3 * cx / w), 0, 2), gy = CLAMP((int)floor(3 * cy / h), 0, 2);
    return gy * 3 + gx;
}

typedef struct {
    int w, h;
} Frame;

/* reading order: the 3 × 3 row, then left to right (then top to bottom, for a total order) */
static gint cmp_reading(gconstpointer a, gconstpointer b, gpointer data)
{
    const Frame *f = data;
    const ClSynthObject *p = a, *q = b;
    int rp = cell_of(p, f->w, f->h) / 3, rq = cell_of(q, f->w, f->h) / 3;
    if (rp != rq)
        return rp < rq ? -1 : 1;
    double px, py, qx, qy;
    box_centre(p, &px, &py);
    box_centre(q, &qx, &qy);
    if (px != qx)
        return px < qx ? -1 : 1;
    return py < qy ? -1 : py > qy;
}

/* sorts objects from index `first` on into reading order */
static void sort_reading(GArray *objs, guint first, int w, int h)
{
    if (objs->len <= first + 1)
        return;
    Frame f = { w, h };
    g_qsort_with_data(&g_array_index(objs, ClSynthObject, first), (gint)(objs->len - first),
                      sizeof(ClSynthObject), cmp_reading, &f);
}

/* ---- phrasing -------------------------------------------------------------------------------- */

/* "x", "x and y", "x, y and z" */
static void append_list(GString *g, GPtrArray *items)
{
    for (guint i = 0; i < items->len; i++) {
        if (i > 0)
            g_string_append(g, i + 1 == items->len ? " and " : ", ");
        g_string_append(g, g_ptr_array_index(items, i));
    }
}

static gint cmp_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* positions in [0, 1] of the image, rounded to 4 decimals like the change tasks' JSON */
static double norm4(double v, int size)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    return g_ascii_strtod(g_ascii_formatd(buf, sizeof buf, "%.4f", v / size), NULL);
}

static char *shapes_answer(const GArray *objs, int w, int h)
{
    if (objs->len == 0)
        return g_strdup("there are no objects.");
    g_autoptr(GPtrArray) items = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < objs->len; i++) {
        const ClSynthObject *o = &g_array_index(objs, ClSynthObject, i);
        g_autofree char *desc = cl_synth_object_description(o);
        g_ptr_array_add(items, g_strdup_printf("%s %s %s", cl_synth_a_or_an(desc), desc,
                                               position_phrases[cell_of(o, w, h)]));
    }
    GString *g = g_string_new(NULL);
    append_list(g, items);
    g_string_append_c(g, '.');
    return g_string_free(g, FALSE);
}

static char *dots_answer(const ClSynthObject *dot, int w, int h)
{
    char x[G_ASCII_DTOSTR_BUF_SIZE], y[G_ASCII_DTOSTR_BUF_SIZE];
    g_ascii_formatd(x, sizeof x, "%.4f", dot->x / w);
    g_ascii_formatd(y, sizeof y, "%.4f", dot->y / h);
    return g_strdup_printf("(%s, %s)", x, y);
}

static char *radiograph_answer(const GArray *objs)
{
    if (objs->len == 0)
        return g_strdup("the image shows no findings.");
    g_autoptr(GPtrArray) names = g_ptr_array_new();
    for (guint i = 0; i < objs->len; i++)
        g_ptr_array_add(
            names, (gpointer)cl_synth_radiograph_finding(&g_array_index(objs, ClSynthObject, i)));
    g_ptr_array_sort(names, cmp_names);
    GString *g = g_string_new(names->len > 1 ? "the image shows the findings of "
                                             : "the image shows the finding of ");
    append_list(g, names);
    g_string_append_c(g, '.');
    return g_string_free(g, FALSE);
}

/* Features run off the tile's edges; one counts when the centre of its footprint (x, y) is on
 * the tile, so a roof cut down to a sliver is not "a building". */
static void aerial_counts(const GArray *objs, int w, int h, int counts[N_AERIAL])
{
    memset(counts, 0, sizeof(int) * N_AERIAL);
    for (guint i = 0; i < objs->len; i++) {
        const ClSynthObject *o = &g_array_index(objs, ClSynthObject, i);
        if (o->colour >= 0 && o->colour < N_AERIAL && o->x >= 0 && o->x < w && o->y >= 0 &&
            o->y < h)
            counts[o->colour]++;
    }
}

static char *aerial_answer(const GArray *objs, int w, int h)
{
    int n[N_AERIAL];
    aerial_counts(objs, w, h, n);
    g_autoptr(GPtrArray) items = g_ptr_array_new_with_free_func(g_free);
    if (n[AERIAL_BUILDING])
        g_ptr_array_add(items, n[AERIAL_BUILDING] == 1
                                   ? g_strdup("a building")
                                   : g_strdup_printf("%d buildings", n[AERIAL_BUILDING]));
    if (n[AERIAL_ROAD])
        g_ptr_array_add(items, n[AERIAL_ROAD] == 1 ? g_strdup("a road")
                                                   : g_strdup_printf("%d roads", n[AERIAL_ROAD]));
    if (n[AERIAL_TREES]) /* clumps run into each other: trees, not a count */
        g_ptr_array_add(items, g_strdup("trees"));
    if (n[AERIAL_WATER])
        g_ptr_array_add(items, n[AERIAL_WATER] == 1 ? g_strdup("a pond")
                                                    : g_strdup_printf("%d ponds", n[AERIAL_WATER]));
    if (items->len == 0)
        return g_strdup("the tile shows only fields.");
    GString *g = g_string_new("the tile shows ");
    append_list(g, items);
    g_string_append_c(g, '.');
    return g_string_free(g, FALSE);
}

/* object 0 is the backdrop, whose size carries the setting */
static char *edits_answer(const GArray *objs)
{
    const ClSynthObject *backdrop = &g_array_index(objs, ClSynthObject, 0);
    g_autoptr(GPtrArray) items = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 1; i < objs->len; i++) {
        const ClSynthObject *o = &g_array_index(objs, ClSynthObject, i);
        const char *colour = cl_synth_colour_name(o->colour);
        g_ptr_array_add(items, g_strdup_printf("%s %s %s", cl_synth_a_or_an(colour), colour,
                                               cl_synth_edits_object_name(o)));
    }
    GString *g = g_string_new(NULL);
    if (items->len)
        append_list(g, items);
    else
        g_string_append(g, "nothing");
    g_string_append_printf(g, " %s in front of %s.", settings[backdrop->size],
                           cl_synth_edits_backdrop_name(backdrop));
    return g_string_free(g, FALSE);
}

/* ---- the tasks ------------------------------------------------------------------------------- */

gboolean cl_synth_ground_generate(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                                  ClSynthDrawing *drawing, GError **error)
{
    int t = ground_task(s->task), w = opts->width, h = opts->height;
    if (t < 0) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_UNKNOWN_TASK,
                    "synth: \"%s\" is not a grounded task", s->task);
        return FALSE;
    }
    double scale = cl_synth_scale(s, opts);
    char *answer = NULL;
    switch ((GroundTask)t) {
    case G_SHAPES: {
        GArray *objs = cl_synth_shapes_scene(rng, opts, scale);
        sort_reading(objs, 0, w, h); /* object k is the k-th the answer names */
        s->n_images = 1;
        s->objects = g_new0(GArray *, 1);
        s->objects[0] = objs;
        answer = shapes_answer(objs, w, h);
        cl_synth_shapes_drawing(drawing, scale);
        break;
    }
    case G_DOTS: {
        double radius = cl_synth_dot_radius(s, opts);
        ClSynthObject dot = cl_synth_dots_place(rng, w, h, radius);
        s->n_images = 1;
        s->objects = g_new0(GArray *, 1);
        s->objects[0] = g_array_new(FALSE, TRUE, sizeof(ClSynthObject));
        g_array_append_val(s->objects[0], dot);
        answer = dots_answer(&dot, w, h);
        cl_synth_dots_drawing(drawing, cl_synth_rng_next(rng), scale, radius);
        break;
    }
    case G_RADIOGRAPH:
        cl_synth_radiograph_film(s, rng, opts, drawing);
        answer = radiograph_answer(s->objects[0]);
        break;
    case G_AERIAL:
        cl_synth_aerial_tile(s, rng, opts, drawing);
        answer = aerial_answer(s->objects[0], w, h);
        break;
    case G_EDITS: {
        int setting = cl_synth_edits_scene(s, rng, opts, drawing);
        GArray *objs = s->objects[0];
        g_array_index(objs, ClSynthObject, 0).size = setting;
        sort_reading(objs, 1, w, h); /* the backdrop stays first */
        answer = edits_answer(objs);
        break;
    }
    default: g_assert_not_reached();
    }
    s->quantity = CL_SYNTH_QUANTITY_NONE;

    ClChatConversation *c = cl_chat_conversation_new();
    if (prompts[t].system)
        cl_chat_conversation_add(c, CL_CHAT_SYSTEM, prompts[t].system);
    g_autofree char *user = g_strconcat("<image>\n", prompts[t].question, NULL);
    cl_chat_conversation_add(c, CL_CHAT_USER, user);
    cl_chat_conversation_add(c, CL_CHAT_ASSISTANT, answer);
    g_free(answer);
    s->conversation = c;
    return TRUE;
}

/* ---- the structured answer ------------------------------------------------------------------- */

static void add_string(JsonBuilder *b, const char *key, const char *v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_string_value(b, v);
}

static void add_double(JsonBuilder *b, const char *key, double v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_double_value(b, cl_json_double(v));
}

static void add_int(JsonBuilder *b, const char *key, gint64 v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_int_value(b, v);
}

/* {"text", and per task: shapes "objects": [{shape, colour, size, material, x, y, position}];
 *  dots "point": [x, y]; radiograph "findings": [{finding, location}]; aerial "counts":
 *  {building, road, trees, water} (those said), "objects": [{kind, x, y, position}] (all, box
 *  centres), "tile"
 *  (as aerial's); edits "setting", "backdrop", "objects": [{object, colour,
 *  position}]}, x and y in [0, 1] of the image, objects in the answer's order */
JsonNode *cl_synth_ground_answer_json(const ClSynthSample *s)
{
    int t = s ? ground_task(s->task) : -1;
    g_return_val_if_fail(t >= 0 && s->n_images == 1, NULL);
    const GArray *objs = s->objects[0];
    int w = s->images[0].width, h = s->images[0].height;
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    add_string(b, "text", s->answer);
    switch ((GroundTask)t) {
    case G_SHAPES:
        json_builder_set_member_name(b, "objects");
        json_builder_begin_array(b);
        for (guint i = 0; i < objs->len; i++) {
            const ClSynthObject *o = &g_array_index(objs, ClSynthObject, i);
            json_builder_begin_object(b);
            add_string(b, "shape", cl_synth_shape_name(o->shape));
            add_string(b, "colour", cl_synth_colour_name(o->colour));
            add_string(b, "size", cl_synth_size_name(o->size));
            add_string(b, "material", cl_synth_material_name(o->material));
            add_double(b, "x", norm4(o->x, w));
            add_double(b, "y", norm4(o->y, h));
            add_string(b, "position", position_names[cell_of(o, w, h)]);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        break;
    case G_DOTS: {
        const ClSynthObject *o = &g_array_index(objs, ClSynthObject, 0);
        json_builder_set_member_name(b, "point");
        json_builder_begin_array(b);
        json_builder_add_double_value(b, cl_json_double(norm4(o->x, w)));
        json_builder_add_double_value(b, cl_json_double(norm4(o->y, h)));
        json_builder_end_array(b);
        break;
    }
    case G_RADIOGRAPH:
        json_builder_set_member_name(b, "findings");
        json_builder_begin_array(b);
        for (guint i = 0; i < objs->len; i++) {
            g_autofree char *loc = cl_synth_radiograph_location(s, 0, (int)i);
            json_builder_begin_object(b);
            add_string(b, "finding",
                       cl_synth_radiograph_finding(&g_array_index(objs, ClSynthObject, i)));
            add_string(b, "location", loc);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        break;
    case G_AERIAL: {
        int n[N_AERIAL];
        aerial_counts(objs, w, h, n);
        json_builder_set_member_name(b, "counts");
        json_builder_begin_object(b);
        for (int k = 0; k < N_AERIAL; k++)
            add_int(b, aerial_kinds[k], n[k]);
        json_builder_end_object(b);
        json_builder_set_member_name(b, "objects");
        json_builder_begin_array(b);
        for (guint i = 0; i < objs->len; i++) {
            const ClSynthObject *o = &g_array_index(objs, ClSynthObject, i);
            double cx, cy;
            box_centre(o, &cx, &cy);
            json_builder_begin_object(b);
            add_string(b, "kind",
                       o->colour >= 0 && o->colour < N_AERIAL ? aerial_kinds[o->colour]
                                                              : "unknown");
            add_double(b, "x", norm4(cx, w));
            add_double(b, "y", norm4(cy, h));
            add_string(b, "position", position_names[cell_of(o, w, h)]);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        /* the tile's georeferencing, as its GeoTIFF file carries it */
        double origin[2], gsd;
        cl_synth_aerial_georef(s, origin, &gsd);
        json_builder_set_member_name(b, "tile");
        json_builder_begin_object(b);
        add_int(b, "epsg", 32633);
        json_builder_set_member_name(b, "origin");
        json_builder_begin_array(b);
        json_builder_add_double_value(b, cl_json_double(origin[0]));
        json_builder_add_double_value(b, cl_json_double(origin[1]));
        json_builder_end_array(b);
        add_double(b, "pixel_size", gsd);
        json_builder_end_object(b);
        break;
    }
    case G_EDITS: {
        const ClSynthObject *backdrop = &g_array_index(objs, ClSynthObject, 0);
        add_string(b, "setting", setting_names[backdrop->size]);
        add_string(b, "backdrop", cl_synth_edits_backdrop_name(backdrop));
        json_builder_set_member_name(b, "objects");
        json_builder_begin_array(b);
        for (guint i = 1; i < objs->len; i++) {
            const ClSynthObject *o = &g_array_index(objs, ClSynthObject, i);
            json_builder_begin_object(b);
            add_string(b, "object", cl_synth_edits_object_name(o));
            add_string(b, "colour", cl_synth_colour_name(o->colour));
            add_string(b, "position", position_names[cell_of(o, w, h)]);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        break;
    }
    default: g_assert_not_reached();
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}
