/* test-synth-ground.c - the grounded single-image tasks (core/synth/ground.c): determinism, one
 * image and one <image> tag, every answer re-derived from the scene's objects by a formatter of
 * this test's own, grounding masks against the boxes and the rendered pixels, the data sets
 * `changelens-cli synth` writes (PNG, DICOM, GeoTIFF) read back through core/train's JSONL
 * reader, and the trainer's synthetic path (cl_train_sample_from_synth). */
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "train/jsonl.h"
#include "fixtures.h"
#include "synth/ground.h"
#include "image/image.h"
#include "model/model.h"
#include "synth/radiograph.h"
#include "synth/synth.h"
#include "train/synthdata.h"

#define N_SEEDS 40

static const char *const tasks[] = { "shapes-ground", "dots-ground", "radiograph-ground",
                                     "aerial-ground", "edits-ground" };

static char *jsonl(const ClSynthSample *s)
{
    const char *paths[] = { "1.png", NULL };
    return cl_synth_sample_to_jsonl(s, "x", paths);
}

/* ---- this test's own formatter ---------------------------------------------------------------- */

static const char *const t_shapes[] = { "cube", "sphere", "cylinder" };
static const char *const t_colours[] = { "gray",  "red",    "blue", "green",
                                         "brown", "purple", "cyan", "yellow" };
static const char *const t_sizes[] = { "small", "large" };
static const char *const t_materials[] = { "rubber", "metal" };
static const char *const t_where[] = {
    "at the top left",    "at the top",    "at the top right",
    "on the left",        "in the centre", "on the right",
    "at the bottom left", "at the bottom", "at the bottom right"
};
/* edits.c: kind = shape * 2 + material; backdrop theme = colour + 8 * material */
static const char *const t_kinds[] = { "cup",  "lamp", "plant", "book",
                                       "ball", "vase", "frame", "clock" };
static const char *const t_themes[] = {
    "a plain blue wall",   "a red brick wall",   "a striped wallpaper", "a window with a blue sky",
    "a wooden panel wall", "a green tiled wall", "a plain beige wall",  "a dotted wallpaper",
    "a clear blue sky",    "a sunset sky",       "a cloudy sky",        "a mountain landscape",
    "a city skyline",      "a starry night sky",
};
static const char *const t_settings[] = { "on a table-top", "in a room", "in a garden" };

static void centre(const ClSynthObject *o, double *x, double *y)
{
    *x = 0.5 * (o->box[0] + o->box[2]);
    *y = 0.5 * (o->box[1] + o->box[3]);
}

static int cell(const ClSynthObject *o, int w, int h)
{
    double x, y;
    centre(o, &x, &y);
    int gx = x * 3 < w ? 0 : x * 3 < 2.0 * w ? 1 : 2;
    int gy = y * 3 < h ? 0 : y * 3 < 2.0 * h ? 1 : 2;
    return gy * 3 + gx;
}

/* does a come before b in reading order (3 × 3 row, then x, then y) */
static gboolean reads_before(const ClSynthObject *a, const ClSynthObject *b, int w, int h)
{
    int ra = cell(a, w, h) / 3, rb = cell(b, w, h) / 3;
    double ax, ay, bx, by;
    centre(a, &ax, &ay);
    centre(b, &bx, &by);
    return ra != rb ? ra < rb : ax != bx ? ax < bx : ay < by;
}

/* objects [first, len) in reading order, by selection: not the generator's sort */
static GPtrArray *in_reading_order(const GArray *objs, guint first, int w, int h)
{
    GPtrArray *out = g_ptr_array_new();
    g_autofree gboolean *taken = g_new0(gboolean, objs->len + 1);
    for (guint n = first; n < objs->len; n++) {
        int best = -1;
        for (guint i = first; i < objs->len; i++)
            if (!taken[i] &&
                (best < 0 || reads_before(&g_array_index(objs, ClSynthObject, i),
                                          &g_array_index(objs, ClSynthObject, best), w, h)))
                best = (int)i;
        taken[best] = TRUE;
        g_ptr_array_add(out, &g_array_index(objs, ClSynthObject, best));
    }
    return out;
}

static void join(GString *g, GPtrArray *items)
{
    for (guint i = 0; i < items->len; i++) {
        if (i)
            g_string_append(g, i + 1 < items->len ? ", " : " and ");
        g_string_append(g, g_ptr_array_index(items, i));
    }
}

static char *expect_shapes(const ClSynthSample *s)
{
    int w = s->images[0].width, h = s->images[0].height;
    g_autoptr(GPtrArray) order = in_reading_order(s->objects[0], 0, w, h);
    g_autoptr(GPtrArray) items = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < order->len; i++) {
        const ClSynthObject *o = g_ptr_array_index(order, i);
        g_ptr_array_add(items, g_strdup_printf("a %s %s %s %s %s", t_sizes[o->size],
                                               t_colours[o->colour], t_materials[o->material],
                                               t_shapes[o->shape], t_where[cell(o, w, h)]));
    }
    GString *g = g_string_new(NULL);
    join(g, items);
    g_string_append(g, ".");
    return g_string_free(g, FALSE);
}

static char *expect_dots(const ClSynthSample *s)
{
    const ClSynthObject *o = &g_array_index(s->objects[0], ClSynthObject, 0);
    char buf[64];
    /* the C locale's printf: the test runs in it */
    snprintf(buf, sizeof buf, "(%.4f, %.4f)", o->x / s->images[0].width,
             o->y / s->images[0].height);
    return g_strdup(buf);
}

static gint cmp_str(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static char *expect_radiograph(const ClSynthSample *s)
{
    const GArray *objs = s->objects[0];
    if (objs->len == 0)
        return g_strdup("the image shows no findings.");
    g_autoptr(GPtrArray) names = g_ptr_array_new();
    for (guint i = 0; i < objs->len; i++) {
        const char *f = cl_synth_radiograph_finding(&g_array_index(objs, ClSynthObject, i));
        g_assert_nonnull(f);
        g_ptr_array_add(names, (gpointer)f);
    }
    g_ptr_array_sort(names, cmp_str);
    GString *g = g_string_new(NULL);
    g_string_append_printf(g, "the image shows the finding%s of ", names->len > 1 ? "s" : "");
    join(g, names);
    g_string_append(g, ".");
    return g_string_free(g, FALSE);
}

static char *expect_aerial(const ClSynthSample *s)
{
    int n[4] = { 0 };
    double w = s->images[0].width, h = s->images[0].height;
    for (guint i = 0; i < s->objects[0]->len; i++) {
        const ClSynthObject *o = &g_array_index(s->objects[0], ClSynthObject, i);
        g_assert_cmpint(o->colour, >=, 0);
        g_assert_cmpint(o->colour, <, 4);
        /* what is on the tile: the footprint's centre inside it */
        if (o->x >= 0 && o->x < w && o->y >= 0 && o->y < h)
            n[o->colour]++;
    }
    g_autoptr(GPtrArray) items = g_ptr_array_new_with_free_func(g_free);
    static const char *const one[] = { "a building", "a road", "trees", "a pond" };
    static const char *const many[] = { "buildings", "roads", NULL, "ponds" };
    for (int k = 0; k < 4; k++)
        if (n[k])
            g_ptr_array_add(items, n[k] == 1 || !many[k] ? g_strdup(one[k])
                                                         : g_strdup_printf("%d %s", n[k], many[k]));
    if (!items->len)
        return g_strdup("the tile shows only fields.");
    GString *g = g_string_new("the tile shows ");
    join(g, items);
    g_string_append(g, ".");
    return g_string_free(g, FALSE);
}

static char *expect_edits(const ClSynthSample *s)
{
    int w = s->images[0].width, h = s->images[0].height;
    const GArray *objs = s->objects[0];
    const ClSynthObject *b = &g_array_index(objs, ClSynthObject, 0);
    int theme = b->colour + 8 * b->material;
    g_assert_cmpint(theme, <, 14);
    g_assert_cmpint(b->size, <, 3);
    /* the garden (and only it) stands against the outdoor backdrops */
    g_assert_cmpint(b->size == 2, ==, theme >= 8);
    g_autoptr(GPtrArray) order = in_reading_order(objs, 1, w, h);
    g_autoptr(GPtrArray) items = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < order->len; i++) {
        const ClSynthObject *o = g_ptr_array_index(order, i);
        g_ptr_array_add(items, g_strdup_printf("a %s %s", t_colours[o->colour],
                                               t_kinds[o->shape * 2 + o->material]));
    }
    GString *g = g_string_new(NULL);
    if (items->len)
        join(g, items);
    else
        g_string_append(g, "nothing");
    g_string_append_printf(g, " %s in front of %s.", t_settings[b->size], t_themes[theme]);
    return g_string_free(g, FALSE);
}

static char *expect(const ClSynthSample *s)
{
    if (!strcmp(s->task, "shapes-ground"))
        return expect_shapes(s);
    if (!strcmp(s->task, "dots-ground"))
        return expect_dots(s);
    if (!strcmp(s->task, "radiograph-ground"))
        return expect_radiograph(s);
    if (!strcmp(s->task, "aerial-ground"))
        return expect_aerial(s);
    return expect_edits(s);
}

/* ---- the sample's shape ----------------------------------------------------------------------- */

static void check_conversation(const ClSynthSample *s)
{
    const ClChatTurn *t = cl_chat_conversation_turns(s->conversation);
    gsize n = cl_chat_conversation_len(s->conversation);
    static const char *const questions[] = { "List the objects in the scene.",
                                             "Where is the red dot?", "Which findings are present?",
                                             "Describe the land cover.",
                                             "List the objects in the picture." };
    int ti = -1;
    for (int i = 0; i < 5; i++)
        if (!strcmp(s->task, tasks[i]))
            ti = i;
    g_assert_cmpint(ti, >=, 0);
    g_assert_cmpint(s->n_images, ==, 1);
    g_assert_cmpint(cl_chat_count_images(t, n), ==, 1);
    /* a system prompt where the change task's domain has one: all but shapes */
    gsize u = ti == 0 ? 0 : 1;
    g_assert_cmpuint(n, ==, u + 2);
    if (u) {
        g_assert_cmpint(t[0].role, ==, CL_CHAT_SYSTEM);
        g_assert_cmpuint(strlen(t[0].text), <, 200); /* short */
    }
    g_assert_cmpint(t[u].role, ==, CL_CHAT_USER);
    g_autofree char *user = g_strconcat("<image>\n", questions[ti], NULL);
    g_assert_cmpstr(t[u].text, ==, user);
    g_assert_cmpint(t[u + 1].role, ==, CL_CHAT_ASSISTANT);
    g_assert_cmpstr(t[u + 1].text, ==, s->answer);
    /* no change: nothing in the change list or the change mask */
    g_assert_cmpuint(s->changes->len, ==, 0);
    for (int i = 0; i < s->grid_w * s->grid_h; i++)
        g_assert_cmpint(s->changed[i], ==, 0);
    g_assert_true(cl_synth_task_is_grounded(s->task));
}

static void test_determinism(void)
{
    ClSynthOptions clean = cl_fixture_synth_clean_options();
    for (int t = 0; t < 5; t++) {
        g_autoptr(ClSynthSample) a = cl_fixture_synth(tasks[t], 42, NULL);
        g_autoptr(ClSynthSample) b = cl_fixture_synth(tasks[t], 42, NULL);
        g_autoptr(ClSynthSample) c = cl_fixture_synth(tasks[t], 43, NULL);
        g_autoptr(ClSynthSample) off = cl_fixture_synth(tasks[t], 42, &clean);
        check_conversation(a);
        g_assert_true(cl_fixture_synth_same_pixels(a, b));
        g_autofree char *ja = jsonl(a), *jb = jsonl(b), *jc = jsonl(c), *joff = jsonl(off);
        g_assert_cmpstr(ja, ==, jb);
        gsize cells = (gsize)a->grid_w * a->grid_h;
        g_assert_cmpmem(a->grounding, cells * 8, b->grounding, cells * 8);
        g_assert_false(cl_fixture_synth_same_pixels(a, c));
        g_assert_cmpstr(ja, !=, jc);
        /* the acquisition changes the pixels, never the scene or the answer */
        g_assert_false(cl_fixture_synth_same_pixels(a, off));
        g_assert_cmpstr(a->answer, ==, off->answer);
        g_assert_cmpuint(a->objects[0]->len, ==, off->objects[0]->len);
        g_assert_cmpmem(a->objects[0]->data, a->objects[0]->len * sizeof(ClSynthObject),
                        off->objects[0]->data, off->objects[0]->len * sizeof(ClSynthObject));
        g_assert_cmpfloat(a->images[0].noise_sigma, >, 0);
        g_assert_cmpfloat(off->images[0].noise_sigma, ==, 0);
    }
    g_assert_false(cl_synth_task_is_grounded("shapes"));
    g_assert_false(cl_synth_task_is_grounded("nonsense"));
}

static void test_errors(void)
{
    g_autoptr(GError) error = NULL;
    ClSynthOptions o;
    cl_synth_options_init(&o);
    o.n_images = 2; /* a grounded task has one image */
    for (int t = 0; t < 5; t++) {
        g_assert_null(cl_synth_generate(tasks[t], 1, &o, &error));
        g_assert_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS);
        g_assert_nonnull(strstr(error->message, "one image"));
        g_clear_error(&error);
    }
    o.n_images = 1; /* allowed for them, still refused for the change tasks */
    g_autoptr(ClSynthSample) s = cl_fixture_synth("dots-ground", 1, &o);
    g_assert_cmpint(s->n_images, ==, 1);
    g_assert_null(cl_synth_generate("dots", 1, &o, &error));
    g_assert_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS);
    g_clear_error(&error);
    const double bad_scales[] = { 0, 0.5, 4.5, NAN };
    for (int k = 0; k < 4; k++) {
        cl_synth_options_init(&o);
        o.dot_scale = bad_scales[k];
        g_assert_null(cl_synth_generate("dots-ground", 1, &o, &error));
        g_assert_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS);
        g_assert_nonnull(strstr(error->message, "dot scale"));
        g_clear_error(&error);
    }
}

/* ---- answers ---------------------------------------------------------------------------------- */

static void test_answers(void)
{
    ClSynthOptions wide; /* another aspect: positions normalised by each side */
    cl_synth_options_init(&wide);
    wide.width = 192, wide.height = 108;
    for (int t = 0; t < 5; t++) {
        g_autoptr(GHashTable) distinct =
            g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
        int n_objects[3] = { 0 }; /* samples with 0, 1, more objects (backdrop excepted) */
        for (guint64 seed = 0; seed < N_SEEDS; seed++) {
            g_autoptr(ClSynthSample) s =
                cl_fixture_synth(tasks[t], seed, seed % 4 == 3 ? &wide : NULL);
            check_conversation(s);
            g_autofree char *want = expect(s);
            if (strcmp(want, s->answer) != 0)
                g_error("%s seed %" G_GUINT64_FORMAT ": answer \"%s\", expected \"%s\"", tasks[t],
                        seed, s->answer, want);
            g_hash_table_add(distinct, g_strdup(s->answer));
            int n = (int)s->objects[0]->len - (t == 4);
            n_objects[MIN(n, 2)]++;
            /* shapes and edits list their objects in the answer's order */
            const GArray *objs = s->objects[0];
            int w = s->images[0].width, h = s->images[0].height;
            for (guint i = t == 4 ? 2 : 1; (t == 0 || t == 4) && i < objs->len; i++)
                g_assert_true(reads_before(&g_array_index(objs, ClSynthObject, i - 1),
                                           &g_array_index(objs, ClSynthObject, i), w, h));
            /* the structured answer repeats the text */
            g_autoptr(JsonNode) json = cl_synth_sample_answer_json(s);
            JsonObject *jo = json_node_get_object(json);
            g_assert_cmpstr(json_object_get_string_member(jo, "text"), ==, s->answer);
            if (t == 0) {
                JsonArray *a = json_object_get_array_member(jo, "objects");
                g_assert_cmpuint(json_array_get_length(a), ==, objs->len);
                g_assert_cmpuint(objs->len, >=,
                                 3); /* the change task's scenes (4-8 at 160 px, at least 3) */
            } else if (t == 1) {
                JsonArray *p = json_object_get_array_member(jo, "point");
                const ClSynthObject *o = &g_array_index(objs, ClSynthObject, 0);
                g_assert_cmpfloat(fabs(json_array_get_double_element(p, 0) - o->x / w), <=, 5.1e-5);
                g_assert_cmpfloat(fabs(json_array_get_double_element(p, 1) - o->y / h), <=, 5.1e-5);
            } else if (t == 2) {
                JsonArray *a = json_object_get_array_member(jo, "findings");
                g_assert_cmpuint(json_array_get_length(a), ==, objs->len);
            } else if (t == 3) {
                JsonObject *c = json_object_get_object_member(jo, "counts");
                gint64 total = json_object_get_int_member(c, "building") +
                               json_object_get_int_member(c, "road") +
                               json_object_get_int_member(c, "trees") +
                               json_object_get_int_member(c, "water");
                g_assert_cmpint(total, <=, objs->len);
                g_assert_cmpint(total, >, 0);
                g_assert_cmpuint(json_array_get_length(json_object_get_array_member(jo, "objects")),
                                 ==, objs->len);
            } else {
                JsonArray *a = json_object_get_array_member(jo, "objects");
                g_assert_cmpuint(json_array_get_length(a), ==, objs->len - 1);
            }
        }
        /* the answers vary with the scene; radiographs show none, one and several findings */
        static const guint min_distinct[] = { 36, 36, 8, 10, 30 };
        g_test_message("%s: %u distinct answers", tasks[t], g_hash_table_size(distinct));
        g_assert_cmpuint(g_hash_table_size(distinct), >=, min_distinct[t]);
        if (t == 2)
            for (int k = 0; k < 3; k++)
                g_assert_cmpint(n_objects[k], >, 0);
    }
}

/* The red dot's pixels (nuisances off) centre on the coordinates the answer gives, and cover
 * the disc the dot scale asks for (a curriculum's larger dots). */
static void test_dots_pixels(void)
{
    const double scales[] = { 1, 2, 3 };
    for (int k = 0; k < 3; k++) {
        ClSynthOptions clean = cl_fixture_synth_clean_options();
        clean.dot_scale = scales[k];
        const double r = 3.5 * scales[k];
        double total = 0;
        for (guint64 seed = 0; seed < 12; seed++) {
            g_autoptr(ClSynthSample) s = cl_fixture_synth("dots-ground", seed, &clean);
            const ClSynthImage *img = &s->images[0];
            double sx = 0, sy = 0, n = 0;
            for (int y = 0; y < img->height; y++)
                for (int x = 0; x < img->width; x++) {
                    const guint8 *p = img->pixels + ((gsize)y * img->width + x) * 3;
                    if (p[0] > 230 && p[1] < 30 && p[2] < 30)
                        sx += x + 0.5, sy += y + 0.5, n++;
                }
            g_assert_cmpfloat(n, >, 20);
            total += n;
            double ax = g_ascii_strtod(s->answer + 1, NULL);
            double ay = g_ascii_strtod(strchr(s->answer, ',') + 1, NULL);
            g_assert_cmpfloat(fabs(sx / n / img->width - ax), <, 0.01);
            g_assert_cmpfloat(fabs(sy / n / img->height - ay), <, 0.01);
            /* the grounding box holds the disc */
            const ClSynthObject *o = &g_array_index(s->objects[0], ClSynthObject, 0);
            g_assert_cmpfloat(o->box[2] - o->box[0], >=, 2 * r);
            g_assert_cmpfloat(o->box[2] - o->box[0], <=, 2 * r + 4);
        }
        /* the pure-red interior of a disc of radius r (its antialiased rim excluded) */
        const double mean = total / 12, disc = G_PI * r * r;
        g_assert_cmpfloat(mean, >, 0.7 * disc);
        g_assert_cmpfloat(mean, <, 1.1 * disc);
    }
}

/* ---- grounding masks -------------------------------------------------------------------------- */

static gboolean box_hits_patch(const ClSynthSample *s, const double *box, int gx, int gy)
{
    const double *sh = s->images[0].shift;
    double px0 = gx * s->patch, py0 = gy * s->patch;
    double px1 = MIN(px0 + s->patch, s->images[0].width);
    double py1 = MIN(py0 + s->patch, s->images[0].height);
    return box[2] + sh[0] > px0 && box[0] + sh[0] < px1 && box[3] + sh[1] > py0 &&
           box[1] + sh[1] < py1;
}

static void check_grounding(const ClSynthSample *s)
{
    const GArray *objs = s->objects[0];
    int gw = s->grid_w, gh = s->grid_h;
    g_assert_cmpint(gw, ==, (s->images[0].width + s->patch - 1) / s->patch);
    g_assert_cmpint(gh, ==, (s->images[0].height + s->patch - 1) / s->patch);
    guint64 seen = 0;
    for (int gy = 0; gy < gh; gy++)
        for (int gx = 0; gx < gw; gx++) {
            guint64 m = s->grounding[gy * gw + gx];
            for (guint i = 0; i < objs->len && i < 64; i++)
                g_assert_cmpint(
                    !!(m & (G_GUINT64_CONSTANT(1) << i)), ==,
                    box_hits_patch(s, g_array_index(objs, ClSynthObject, i).box, gx, gy));
            if (objs->len < 64)
                g_assert_cmpuint(m >> objs->len, ==, 0);
            seen |= m;
        }
    /* every object shows on some patch */
    for (guint i = 0; i < objs->len && i < 64; i++)
        g_assert_true(seen & (G_GUINT64_CONSTANT(1) << i));
}

/* Without nuisances, the saturated pixels of a shapes scene (its floor and shadows are grey) lie
 * inside an object's box, on a patch whose mask names that object. */
static void check_shapes_pixels(const ClSynthSample *s)
{
    const ClSynthImage *img = &s->images[0];
    const GArray *objs = s->objects[0];
    int coloured = 0;
    for (int y = 0; y < img->height; y++)
        for (int x = 0; x < img->width; x++) {
            const guint8 *p = img->pixels + ((gsize)y * img->width + x) * 3;
            int mx = MAX(p[0], MAX(p[1], p[2])), mn = MIN(p[0], MIN(p[1], p[2]));
            if (mx - mn < 24)
                continue;
            coloured++;
            guint64 m = s->grounding[(y / s->patch) * s->grid_w + x / s->patch];
            gboolean inside = FALSE;
            for (guint i = 0; i < objs->len; i++) {
                const double *b = g_array_index(objs, ClSynthObject, i).box;
                if (b[0] < x + 1 && b[2] > x && b[1] < y + 1 && b[3] > y) {
                    inside = TRUE;
                    g_assert_true(m & (G_GUINT64_CONSTANT(1) << i));
                }
            }
            if (!inside)
                g_error("%s seed %" G_GUINT64_FORMAT ": coloured pixel (%d, %d) outside every box",
                        s->task, s->seed, x, y);
        }
    g_assert_cmpint(coloured, >, 100);
}

static void test_masks(void)
{
    ClSynthOptions clean = cl_fixture_synth_clean_options();
    ClSynthOptions odd; /* a grid that does not divide the image, with nuisances */
    cl_synth_options_init(&odd);
    odd.width = 150, odd.height = 130, odd.patch = 14;
    for (int t = 0; t < 5; t++)
        for (guint64 seed = 0; seed < 10; seed++) {
            g_autoptr(ClSynthSample) a = cl_fixture_synth(tasks[t], seed, &clean);
            check_grounding(a);
            if (t == 0)
                check_shapes_pixels(a);
            g_autoptr(ClSynthSample) b = cl_fixture_synth(tasks[t], seed, &odd);
            g_assert_cmpint(b->grid_w, ==, 11);
            g_assert_cmpint(b->grid_h, ==, 10);
            check_grounding(b);
            g_autoptr(ClSynthSample) c = cl_fixture_synth(tasks[t], seed, NULL);
            check_grounding(c);
        }
}

/* ---- files and the trainer -------------------------------------------------------------------- */

static int run_cli(const char *const *args)
{
    /* changelens-cli synth ARGS… */
    g_autoptr(GPtrArray) a = g_ptr_array_new();
    g_ptr_array_add(a, "synth");
    for (int i = 0; args[i]; i++)
        g_ptr_array_add(a, (char *)args[i]);
    g_ptr_array_add(a, NULL);
    return cl_fixture_run_cli((const char *const *)a->pdata, NULL);
}

/* The trainer's tiny model, shrunk: image 64 / patch 16 (a 4 × 4 grid), byte vocabulary. */
static ClModel *micro_model(void)
{
    g_autoptr(GError) err = NULL;
    ClModelConfig cfg;
    g_assert_true(cl_model_config_preset(&cfg, "tiny", &err));
    cfg.image_size = 64;
    cfg.patch_size = 16;
    cfg.enc_dim = 16;
    cfg.enc_depth = 1;
    cfg.enc_heads = 2;
    cfg.enc_mlp = 32;
    cfg.merger_hidden = 32;
    cfg.dec_dim = 32;
    cfg.dec_depth = 1;
    cfg.dec_heads = 2;
    cfg.dec_kv_heads = 1;
    cfg.dec_mlp = 64;
    cfg.vocab_size = 300;
    cfg.max_len = 1024;
    g_assert_true(cl_model_config_validate(&cfg, &err));
    ClModel *m = cl_model_new_random(&cfg, 1, &err);
    g_assert_no_error(err);
    return m;
}

static void test_files(void)
{
    static const char *const ext[] = { "png", "png", "dcm", "tif", "png" };
    g_autofree char *tmp = cl_fixture_tmpdir("cl-test-synth-ground");
    g_autoptr(ClModel) model = micro_model();
    ClSynthOptions opts;
    cl_synth_options_init(&opts);
    opts.width = opts.height = 64;
    for (int t = 0; t < 5; t++) {
        g_autofree char *dir = g_build_filename(tmp, tasks[t], NULL);
        const char *args[] = { "--task", tasks[t], "--n",    "3",  "--seed",  "9",
                               "--out",  dir,      "--size", "64", "--quiet", NULL };
        g_assert_cmpint(run_cli(args), ==, 0);
        g_autofree char *path = g_build_filename(dir, "data.jsonl", NULL);
        g_autofree char *text = NULL;
        g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
        g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
        g_assert_cmpuint(g_strv_length(lines), ==, 4);
        for (int i = 0; i < 3; i++) {
            g_autoptr(GError) error = NULL;
            g_autoptr(JsonParser) parser = json_parser_new();
            g_assert_true(json_parser_load_from_data(parser, lines[i], -1, &error));
            JsonObject *o = json_node_get_object(json_parser_get_root(parser));
            g_assert_cmpstr(json_object_get_string_member(o, "task"), ==, tasks[t]);
            JsonArray *imgs = json_object_get_array_member(o, "images");
            g_assert_cmpuint(json_array_get_length(imgs), ==, 1);
            g_autofree char *rel = g_strdup_printf("images/%06d-1.%s", i + 1, ext[t]);
            g_assert_cmpstr(json_array_get_string_element(imgs, 0), ==, rel);
            JsonArray *msgs = json_object_get_array_member(o, "messages");
            guint nm = json_array_get_length(msgs), tags = 0;
            for (guint m = 0; m < nm; m++) {
                const char *c = json_object_get_string_member(
                    json_array_get_object_element(msgs, m), "content");
                for (const char *p = c; (p = strstr(p, "<image>")); p += 7)
                    tags++;
            }
            g_assert_cmpuint(tags, ==, 1);
            /* the line is the library's sample from the stream seed, its file loads */
            g_autoptr(ClSynthSample) s =
                cl_fixture_synth(tasks[t], cl_synth_stream_seed(9, i), &opts);
            const char *last = json_object_get_string_member(
                json_array_get_object_element(msgs, nm - 1), "content");
            g_assert_cmpstr(last, ==, s->answer);
            g_autofree char *file = g_build_filename(dir, rel, NULL);
            g_autoptr(ClImage) img = cl_image_load(file, NULL, &error);
            g_assert_no_error(error);
            g_assert_cmpuint(img->width, ==, 64);
            g_assert_cmpuint(img->height, ==, 64);
            if (t == 0) { /* PNG: lossless, the sample's bytes */
                const float *d = cl_image_frame(img, 0)->data;
                for (int c = 0; c < 3; c++)
                    for (int p = 0; p < 64 * 64; p++)
                        g_assert_cmpfloat(d[(gsize)c * 64 * 64 + p], ==,
                                          s->images[0].pixels[(gsize)p * 3 + c]);
            }
        }
        /* core/train's JSONL reader takes the data set: one image, a supervised answer */
        g_autoptr(GError) error = NULL;
        g_autoptr(ClDataset) ds = cl_dataset_open(path, model, NULL, &error);
        g_assert_no_error(error);
        g_assert_cmpuint(cl_dataset_count(ds), ==, 3);
        g_autoptr(ClTrainSample) ts = cl_dataset_get(ds, 0, &error);
        g_assert_no_error(error);
        g_assert_cmpuint(ts->n_images, ==, 1);
        g_assert_cmpint(ts->n_supervised, >, 0);
    }
    cl_fixture_rmdir(tmp);
}

static void test_train_sample(void)
{
    g_autoptr(ClModel) model = micro_model();
    ClSynthOptions so;
    cl_synth_options_for_model(&so, model);
    for (int t = 0; t < 5; t++)
        for (guint64 seed = 0; seed < 3; seed++) {
            g_autoptr(GError) err = NULL;
            g_autoptr(ClSynthSample) s = cl_fixture_synth(tasks[t], seed, &so);
            g_autoptr(ClTrainSample) ts = cl_train_sample_from_synth(model, s, FALSE, &err);
            g_assert_no_error(err);
            g_assert_nonnull(ts);
            g_assert_cmpuint(ts->n_images, ==, 1);
            /* the answer is supervised: as many targets as its tokens plus <|im_end|> */
            int supervised = 0;
            for (int i = 0; i < ts->n_ids; i++)
                supervised += ts->mask[i];
            g_assert_cmpint(supervised, ==, ts->n_supervised);
            g_assert_cmpint(ts->n_supervised, >=, (int)strlen(s->answer) / 4 + 1);
            /* the grounding targets came along: a 4 × 4 grid, the objects marked, no change */
            g_assert_cmpint(ts->grid, ==, 4);
            g_assert_nonnull(ts->aux_objects);
            g_assert_nonnull(ts->aux_changed);
            guint64 any = 0;
            for (int p = 0; p < 16; p++) {
                any |= ts->aux_objects[p];
                g_assert_cmpint(ts->aux_changed[p], ==, 0);
            }
            g_assert_cmpmem(ts->aux_objects, 16 * sizeof(guint64), s->grounding,
                            16 * sizeof(guint64));
            if (s->objects[0]->len > 0)
                g_assert_cmpuint(any, !=, 0);
            /* the labels: a patch has an object's attribute bits exactly when the object is on
             * it (the patch's bits are the union of its objects' labels) */
            g_assert_nonnull(ts->aux_labels);
            for (int p = 0; p < 16; p++) {
                guint32 want = 0;
                for (guint k = 0; k < s->objects[0]->len; k++)
                    if (s->grounding[p] >> k & 1)
                        want |= cl_train_aux_label(&g_array_index(s->objects[0], ClSynthObject, k));
                g_assert_cmphex(ts->aux_labels[p], ==, want);
                g_assert_cmpint(ts->aux_labels[p] != 0, ==, ts->aux_objects[p] != 0);
            }
        }
    /* the label bits of a CLEVR object: shape, then colour, size, material */
    ClSynthObject o = { .shape = CL_SYNTH_SHAPE_SPHERE, .colour = 7, .size = 1, .material = 0 };
    g_assert_cmphex(cl_train_aux_label(&o), ==, (1u << 1) | (1u << 11) | (1u << 13) | (1u << 14));
    o.colour = 99; /* out of range: no colour bit */
    g_assert_cmphex(cl_train_aux_label(&o), ==, (1u << 1) | (1u << 13) | (1u << 14));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/synth-ground/determinism", test_determinism);
    g_test_add_func("/synth-ground/errors", test_errors);
    g_test_add_func("/synth-ground/answers", test_answers);
    g_test_add_func("/synth-ground/dots-pixels", test_dots_pixels);
    g_test_add_func("/synth-ground/masks", test_masks);
    g_test_add_func("/synth-ground/files", test_files);
    g_test_add_func("/synth-ground/train-sample", test_train_sample);
    return g_test_run();
}
