/* synth.c - the synthetic task registry, the common renderer (nuisances, auxiliary per-patch
 * targets) and the ShareGPT-style JSONL data-set writer. */
#include "synth/synth-private.h"
#include "jsonnum.h"
#include "synth/radiograph.h"

#include <errno.h>
#include <math.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>

G_DEFINE_QUARK(cl - synth - error - quark, cl_synth_error)

static const ClSynthTaskDef tasks[] = {
    { "shapes", "CLEVR-like scenes, 1-4 object changes (move/add/remove/replace), paper B.2",
      cl_synth_shapes_generate, NULL, NULL },
    { "dots",
      "a red dot per image over screen-like backgrounds, 2-5 images; distance or "
      "convex-hull area, paper B.1",
      cl_synth_dots_generate, NULL, NULL },
    { "radiograph",
      "chest-film phantoms with findings added or resolved, Medical-Diff-VQA "
      "phrasing (paper B.4); written as DICOM",
      cl_synth_radiograph_generate, "dcm", cl_synth_radiograph_answer_json },
    { "aerial",
      "aerial tiles: constructions, demolitions, new roads, cleared vegetation, about "
      "half unchanged, LEVIR-CC phrasing (paper B.6); written as GeoTIFF",
      cl_synth_aerial_generate, "tif", cl_synth_aerial_answer_json },
    { "edits",
      "photo-like scenes with add/remove/replace/colour/background edits, instruction "
      "phrasing (paper B.5)",
      cl_synth_edits_generate, NULL, cl_synth_edits_answer_json },
    { "photo-edits",
      "real photographs with pasted objects added, removed, moved, recoloured or resized, about a "
      "third unchanged; acquisition nuisances that are not changes",
      cl_synth_photo_edits_generate, NULL, cl_synth_photo_edits_answer_json },
    { "radiograph-edits",
      "photo-edits' edits (objects pasted in, removed, moved, recoloured, resized) in the "
      "radiograph task's chest films; --photos train or heldout picks the films",
      cl_synth_radiograph_edits_generate, NULL, cl_synth_photo_edits_answer_json },
    { "aerial-edits",
      "photo-edits' edits in the aerial task's tiles; --photos train or heldout picks the tiles",
      cl_synth_aerial_edits_generate, NULL, cl_synth_photo_edits_answer_json },
    /* long sequences for the decoder options (docs/MODEL.md §4.2–4.6) */
    { "aerial-series",
      "8-16 aerial tiles of one place (3-32 with --images): when the building "
      "first appears, and what changed since",
      cl_synth_aerial_series_generate, NULL, NULL, FALSE, TRUE },
    { "radiograph-history",
      "radiograph with 1-3 earlier reports as text read with the films: "
      "what changed, and since when each persisting finding is reported; "
      "written as DICOM",
      cl_synth_radiograph_history_generate, "dcm", cl_synth_radiograph_answer_json },
    { "aerial-log",
      "4-8 aerial tiles and their acquisition log as text read with them: when "
      "(image and date) the building first appears, and what changed since",
      cl_synth_aerial_log_generate, NULL, NULL, FALSE, TRUE },
    /* grounded single-image tasks for stage-1 pretraining (docs/DESIGN.md §5), ground.c */
    { "shapes-ground", "one shapes scene: list the objects with attributes and coarse positions",
      cl_synth_ground_generate, NULL, cl_synth_ground_answer_json, TRUE },
    { "dots-ground", "one dots screenshot: the red dot's normalised coordinates",
      cl_synth_ground_generate, NULL, cl_synth_ground_answer_json, TRUE },
    { "radiograph-ground", "one chest-film phantom: the findings present; written as DICOM",
      cl_synth_ground_generate, "dcm", cl_synth_ground_answer_json, TRUE },
    { "aerial-ground",
      "one aerial tile: its buildings, roads, trees and water; written as "
      "GeoTIFF",
      cl_synth_ground_generate, "tif", cl_synth_ground_answer_json, TRUE },
    { "edits-ground", "one photo-like scene: its objects and backdrop", cl_synth_ground_generate,
      NULL, cl_synth_ground_answer_json, TRUE },
};
static const char *const task_names[] = { "shapes",
                                          "dots",
                                          "radiograph",
                                          "aerial",
                                          "edits",
                                          "photo-edits",
                                          "radiograph-edits",
                                          "aerial-edits",
                                          "aerial-series",
                                          "aerial-log",
                                          "radiograph-history",
                                          "shapes-ground",
                                          "dots-ground",
                                          "radiograph-ground",
                                          "aerial-ground",
                                          "edits-ground",
                                          NULL };

const char *const *cl_synth_tasks(void)
{
    G_STATIC_ASSERT(G_N_ELEMENTS(task_names) == G_N_ELEMENTS(tasks) + 1);
    return task_names;
}

static const ClSynthTaskDef *find_task(const char *name)
{
    for (gsize i = 0; name && i < G_N_ELEMENTS(tasks); i++)
        if (strcmp(tasks[i].name, name) == 0)
            return &tasks[i];
    return NULL;
}

const char *cl_synth_task_summary(const char *task)
{
    const ClSynthTaskDef *t = find_task(task);
    return t ? t->summary : NULL;
}

/* ---- names ----------------------------------------------------------------------------------- */

const char *cl_synth_shape_name(ClSynthShape s)
{
    static const char *const names[] = { "cube", "sphere", "cylinder", "dot" };
    return (int)s >= 0 && s < CL_SYNTH_N_SHAPES ? names[s] : NULL;
}

const char *cl_synth_colour_name(int colour)
{
    static const char *const names[CL_SYNTH_N_COLOURS] = { "gray",  "red",    "blue", "green",
                                                           "brown", "purple", "cyan", "yellow" };
    return colour >= 0 && colour < CL_SYNTH_N_COLOURS ? names[colour] : NULL;
}

const char *cl_synth_size_name(int size)
{
    static const char *const names[CL_SYNTH_N_SIZES] = { "small", "large" };
    return size >= 0 && size < CL_SYNTH_N_SIZES ? names[size] : NULL;
}

const char *cl_synth_material_name(int material)
{
    static const char *const names[CL_SYNTH_N_MATERIALS] = { "rubber", "metal" };
    return material >= 0 && material < CL_SYNTH_N_MATERIALS ? names[material] : NULL;
}

const char *cl_synth_change_name(ClSynthChangeType t)
{
    static const char *const names[] = { "move", "add", "remove", "replace" };
    return (int)t >= 0 && t <= CL_SYNTH_CHANGE_REPLACE ? names[t] : NULL;
}

const char *cl_synth_quantity_name(ClSynthQuantity q)
{
    static const char *const names[] = { "none", "distance", "area" };
    return (int)q >= 0 && q <= CL_SYNTH_QUANTITY_AREA ? names[q] : NULL;
}

/* ---- random numbers -------------------------------------------------------------------------- */

guint64 cl_synth_splitmix64(guint64 *state)
{
    guint64 z = (*state += G_GUINT64_CONSTANT(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

void cl_synth_rng_init(ClSynthRng *r, guint64 seed)
{
    guint64 st = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = cl_synth_splitmix64(&st);
}

static inline guint64 rotl(guint64 x, int k)
{
    return (x << k) | (x >> (64 - k));
}

guint64 cl_synth_rng_next(ClSynthRng *r)
{
    guint64 *s = r->s;
    guint64 result = rotl(s[1] * 5, 7) * 9;
    guint64 t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double cl_synth_rng_double(ClSynthRng *r)
{
    return (double)(cl_synth_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

double cl_synth_rng_range(ClSynthRng *r, double lo, double hi)
{
    return lo + (hi - lo) * cl_synth_rng_double(r);
}

int cl_synth_rng_int(ClSynthRng *r, int lo, int hi)
{
    g_assert(hi >= lo);
    guint64 span = (guint64)((gint64)hi - lo) + 1;
    /* multiply-shift: bias below 2^-32 for the small spans used here */
    return lo + (int)(((cl_synth_rng_next(r) >> 32) * span) >> 32);
}

guint64 cl_synth_stream_seed(guint64 seed, guint64 index)
{
    guint64 a = seed, b = index ^ G_GUINT64_CONSTANT(0x6a09e667f3bcc909);
    guint64 h = cl_synth_splitmix64(&a);
    return h ^ cl_synth_splitmix64(&b) * G_GUINT64_CONSTANT(0xff51afd7ed558ccd);
}

/* FNV-1a: the task name picks the stream, so "shapes" and "dots" with one seed are unrelated */
static guint64 name_hash(const char *name)
{
    guint64 h = G_GUINT64_CONSTANT(0xcbf29ce484222325);
    for (const char *p = name; *p; p++)
        h = (h ^ (guint8)*p) * G_GUINT64_CONSTANT(0x100000001b3);
    return h;
}

/* ---- options --------------------------------------------------------------------------------- */

void cl_synth_options_init(ClSynthOptions *opts)
{
    g_return_if_fail(opts);
    *opts = (ClSynthOptions){
        .width = 160,
        .height = 160,
        .patch = 16,
        .nuisance = TRUE,
        .n_images = 0,
        .min_objects = 0,
        .max_objects = 0,
        .min_changes = 1,
        .max_changes = 4,
        .dot_scale = 1.0,
        .nuisance_level = 1,
    };
}

static gboolean check_options(const ClSynthTaskDef *def, const ClSynthOptions *o, GError **error)
{
    const char *bad = NULL;
    if (o->width < 32 || o->width > 4096 || o->height < 32 || o->height > 4096)
        bad = "the image size must be 32 to 4096 pixels";
    else if (o->patch < 1 || o->patch > MIN(o->width, o->height))
        bad = "the patch size must be 1 to the image size";
    else if (def->single && o->n_images != 0 && o->n_images != 1)
        bad = "a grounded task has one image (0 or 1 images)";
    else if (def->series && o->n_images != 0 &&
             (o->n_images < 3 || o->n_images > CL_SYNTH_MAX_SERIES))
        bad = "a series has 3 to 32 images (or 0: drawn from the seed)";
    else if (!def->single && !def->series && o->n_images != 0 &&
             (o->n_images < 2 || o->n_images > 5))
        bad = "the number of images must be 2 to 5 (or 0: drawn from the seed)";
    else if (o->min_objects < 0 || o->max_objects < 0 || o->min_objects > CL_SYNTH_MAX_OBJECTS ||
             o->max_objects > CL_SYNTH_MAX_OBJECTS ||
             (o->max_objects > 0 && o->min_objects > o->max_objects))
        bad = "the object counts must be 0 to 64, the minimum not above the maximum";
    else if (o->min_changes < 1 || o->max_changes > 8 || o->min_changes > o->max_changes)
        bad = "the change counts must be 1 to 8, the minimum not above the maximum";
    else if (!(o->dot_scale >= 1.0 && o->dot_scale <= 4.0))
        bad = "the dot scale must be 1 to 4";
    else if (o->nuisance_level < 0 || o->nuisance_level > 2)
        bad = "the nuisance level must be 0 (none), 1 (mild) or 2 (strong)";
    if (bad) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS, "synth: %s", bad);
        return FALSE;
    }
    return TRUE;
}

/* ---- rendering ------------------------------------------------------------------------------- */

/* Draws one image and applies the photometric nuisances in integer arithmetic, so the bytes do
 * not depend on the machine's libm. */
static void render_image(ClSynthSample *s, int k, const ClSynthDrawing *d, ClSynthRng *nr,
                         int level)
{
    const gboolean nuisance = level > 0;
    ClSynthImage *img = &s->images[k];
    int w = img->width, h = img->height;
    int gain_q = 1024, offset = 0, sigma = 0; /* gain in 1/1024, offset and sigma in 0..255 */
    img->shift[0] = img->shift[1] = 0;
    if (nuisance) {
        img->shift[0] = cl_synth_rng_range(nr, -2.0, 2.0);
        img->shift[1] = cl_synth_rng_range(nr, -2.0, 2.0);
        gain_q = cl_synth_rng_int(nr, 900, 1140);
        offset = cl_synth_rng_int(nr, -14, 14);
        sigma = cl_synth_rng_int(nr, 1, 4);
    }
    if (level == 2) { /* strong: 2-4 px each way, a larger exposure change, more noise */
        for (int a = 0; a < 2; a++)
            img->shift[a] = (img->shift[a] < 0 ? -1 : 1) * (2.0 + fabs(img->shift[a]));
        gain_q = cl_synth_rng_int(nr, 760, 1300);
        offset = cl_synth_rng_int(nr, -28, 28);
        sigma = cl_synth_rng_int(nr, 3, 7);
    }
    img->gain = gain_q / 1024.0;
    img->offset = offset;
    img->noise_sigma = sigma;

    cairo_surface_t *surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    cairo_t *cr = cairo_create(surf);
    cairo_translate(cr, img->shift[0], img->shift[1]);
    d->draw(cr, s, k, d->data);
    cairo_destroy(cr);
    cairo_surface_flush(surf);

    const guint8 *src = cairo_image_surface_get_data(surf);
    int sstride = cairo_image_surface_get_stride(surf);
    img->pixels = g_malloc((gsize)w * h * 3);
    /* noise: Irwin-Hall sum of four bytes, std 147.8 (= sqrt(4 * (256^2 - 1) / 12)) */
    const gint64 denom = (gint64)1024 * 148;
    for (int y = 0; y < h; y++) {
        const guint32 *row = (const guint32 *)(gconstpointer)(src + (gsize)y * sstride);
        guint8 *out = img->pixels + (gsize)y * w * 3;
        for (int x = 0; x < w; x++) {
            guint32 px = row[x];
            for (int c = 0; c < 3; c++) {
                gint64 v = (px >> (16 - 8 * c)) & 0xff;
                gint64 acc = v * gain_q * 148 + (gint64)offset * denom;
                if (sigma) {
                    guint64 b = cl_synth_rng_next(nr);
                    gint64 n = (gint64)(b & 0xff) + ((b >> 8) & 0xff) + ((b >> 16) & 0xff) +
                               ((b >> 24) & 0xff) - 510;
                    acc += n * sigma * 1024;
                }
                acc = acc >= 0 ? (acc + denom / 2) / denom : 0;
                out[x * 3 + c] = (guint8)CLAMP(acc, 0, 255);
            }
        }
    }
    cairo_surface_destroy(surf);
}

static void mark_box(guint8 *grid, guint64 *ground, guint64 bit, const ClSynthSample *s,
                     const double box[4], const ClSynthImage *as)
{
    /* the box where image `as` shows it: shifted, and with a framing (photo-edits) turned and
     * scaled about the centre first, the bounding box of its corners */
    double x0 = box[0] + as->shift[0], y0 = box[1] + as->shift[1];
    double x1 = box[2] + as->shift[0], y1 = box[3] + as->shift[1];
    if (as->rotation != 0 || as->rescale != 0) {
        const double cx = as->width / 2.0, cy = as->height / 2.0, z = 1 + as->rescale;
        const double co = cos(as->rotation) * z, si = sin(as->rotation) * z;
        x0 = y0 = G_MAXDOUBLE, x1 = y1 = -G_MAXDOUBLE;
        for (int k = 0; k < 4; k++) {
            const double px = box[k & 1 ? 2 : 0] - cx, py = box[k & 2 ? 3 : 1] - cy;
            const double x = cx + co * px - si * py + as->shift[0],
                         y = cy + si * px + co * py + as->shift[1];
            x0 = MIN(x0, x), x1 = MAX(x1, x), y0 = MIN(y0, y), y1 = MAX(y1, y);
        }
    }
    const ClSynthImage *img = &s->images[0];
    for (int gy = 0; gy < s->grid_h; gy++) {
        double py0 = gy * s->patch, py1 = MIN((gy + 1) * s->patch, img->height);
        if (y1 <= py0 || y0 >= py1)
            continue;
        for (int gx = 0; gx < s->grid_w; gx++) {
            double px0 = gx * s->patch, px1 = MIN((gx + 1) * s->patch, img->width);
            if (x1 <= px0 || x0 >= px1)
                continue;
            if (grid)
                grid[gy * s->grid_w + gx] = 1;
            if (ground)
                ground[gy * s->grid_w + gx] |= bit;
        }
    }
}

static void aux_targets(ClSynthSample *s)
{
    gsize cells = (gsize)s->grid_w * s->grid_h;
    s->grounding = g_new0(guint64, cells * s->n_images);
    s->changed = g_new0(guint8, cells * s->n_images);
    for (int k = 0; k < s->n_images; k++) {
        const GArray *objs = s->objects[k];
        for (guint i = 0; i < objs->len && i < CL_SYNTH_MAX_OBJECTS; i++)
            mark_box(NULL, s->grounding + cells * k, G_GUINT64_CONSTANT(1) << i, s,
                     g_array_index(objs, ClSynthObject, i).box, &s->images[k]);
    }
    /* A change shows where its object was and where it is now, both seen in the later image's
     * pixels (that image's shift and framing), since those are the tokens the target labels. */
    for (guint i = 0; i < s->changes->len; i++) {
        const ClSynthChange *c = &g_array_index(s->changes, ClSynthChange, i);
        guint8 *grid = s->changed + cells * c->image;
        const ClSynthImage *as = &s->images[c->image];
        if (c->before >= 0)
            mark_box(grid, NULL, 0, s,
                     g_array_index(s->objects[c->image - 1], ClSynthObject, c->before).box, as);
        if (c->after >= 0)
            mark_box(grid, NULL, 0, s,
                     g_array_index(s->objects[c->image], ClSynthObject, c->after).box, as);
    }
}

ClSynthSample *cl_synth_generate(const char *task, guint64 seed, const ClSynthOptions *opts,
                                 GError **error)
{
    g_return_val_if_fail(task, NULL);
    ClSynthOptions defaults;
    if (!opts) {
        cl_synth_options_init(&defaults);
        opts = &defaults;
    }
    const ClSynthTaskDef *def = find_task(task);
    if (!def) {
        g_autofree char *known = g_strjoinv(", ", (char **)task_names);
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_UNKNOWN_TASK,
                    "synth: unknown task \"%s\" (known tasks: %s)", task, known);
        return NULL;
    }
    if (!check_options(def, opts, error))
        return NULL;

    g_autoptr(ClSynthSample) s = g_new0(ClSynthSample, 1);
    s->task = g_strdup(def->name);
    s->seed = seed;
    s->changes = g_array_new(FALSE, FALSE, sizeof(ClSynthChange));
    s->source = -1;
    s->patch = opts->patch;
    s->grid_w = (opts->width + opts->patch - 1) / opts->patch;
    s->grid_h = (opts->height + opts->patch - 1) / opts->patch;

    /* the scene and the acquisition draw from separate streams */
    guint64 base = seed ^ name_hash(def->name);
    ClSynthRng scene_rng, nuisance_rng;
    cl_synth_rng_init(&scene_rng, cl_synth_stream_seed(base, 1));
    cl_synth_rng_init(&nuisance_rng, cl_synth_stream_seed(base, 2));

    ClSynthDrawing drawing = { 0 };
    gboolean ok = def->generate(s, &scene_rng, opts, &drawing, error);
    if (ok) {
        g_assert((def->single ? s->n_images == 1 : s->n_images >= 2) && s->objects &&
                 s->conversation && drawing.draw);
        gsize n = cl_chat_conversation_len(s->conversation);
        const ClChatTurn *last = &cl_chat_conversation_turns(s->conversation)[n - 1];
        g_assert(last->role == CL_CHAT_ASSISTANT);
        s->answer = last->text;
        s->images = g_new0(ClSynthImage, s->n_images);
        for (int k = 0; k < s->n_images; k++) {
            s->images[k].width = opts->width;
            s->images[k].height = opts->height;
            s->images[k].channels = 3;
            render_image(s, k, &drawing, &nuisance_rng, opts->nuisance ? opts->nuisance_level : 0);
            if (drawing.framing)
                drawing.framing(k, drawing.data, &s->images[k].rotation, &s->images[k].rescale);
        }
        aux_targets(s);
    }
    if (drawing.free_data)
        drawing.free_data(drawing.data);
    return ok ? g_steal_pointer(&s) : NULL;
}

const char *cl_synth_a_or_an(const char *word)
{
    return strchr("aeiou", word[0]) ? "an" : "a";
}

void cl_synth_replace_answer(ClSynthSample *s, const char *answer)
{
    const gsize n = cl_chat_conversation_len(s->conversation);
    const ClChatTurn *t = cl_chat_conversation_turns(s->conversation);
    ClChatConversation *c = cl_chat_conversation_new();
    for (gsize i = 0; i + 1 < n; i++)
        cl_chat_conversation_add(c, t[i].role, t[i].text);
    cl_chat_conversation_add(c, CL_CHAT_ASSISTANT, answer);
    cl_chat_conversation_free(s->conversation);
    s->conversation = c;
}

void cl_synth_sample_free(ClSynthSample *s)
{
    if (!s)
        return;
    g_free(s->task);
    for (int k = 0; s->images && k < s->n_images; k++)
        g_free(s->images[k].pixels);
    g_free(s->images);
    for (int k = 0; s->objects && k < s->n_images; k++)
        if (s->objects[k])
            g_array_unref(s->objects[k]);
    g_free(s->objects);
    cl_chat_conversation_free(s->conversation);
    g_free(s->context);
    if (s->changes)
        g_array_unref(s->changes);
    g_free(s->grounding);
    g_free(s->changed);
    g_free(s);
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static void add_double(JsonBuilder *b, const char *key, double v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_double_value(b, cl_json_double(v));
}

static void add_string(JsonBuilder *b, const char *key, const char *v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_string_value(b, v);
}

/* positions in [0, 1] of the image, rounded to 4 decimals so the JSONL is stable text */
static double norm4(double v, int size)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    return g_ascii_strtod(g_ascii_formatd(buf, sizeof buf, "%.4f", v / size), NULL);
}

static void object_json(JsonBuilder *b, const ClSynthSample *s, const char *key, int image,
                        int index)
{
    json_builder_set_member_name(b, key);
    if (index < 0) {
        json_builder_add_null_value(b);
        return;
    }
    const ClSynthObject *o = &g_array_index(s->objects[image], ClSynthObject, index);
    json_builder_begin_object(b);
    add_string(b, "shape", cl_synth_shape_name(o->shape));
    add_string(b, "colour", cl_synth_colour_name(o->colour));
    add_string(b, "size", cl_synth_size_name(o->size));
    add_string(b, "material", cl_synth_material_name(o->material));
    add_double(b, "x", norm4(o->x, s->images[image].width));
    add_double(b, "y", norm4(o->y, s->images[image].height));
    json_builder_end_object(b);
}

JsonNode *cl_synth_sample_answer_json(const ClSynthSample *s)
{
    g_return_val_if_fail(s, NULL);
    const ClSynthTaskDef *def = find_task(s->task);
    if (def && def->answer_json)
        return def->answer_json(s);
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    if (s->quantity == CL_SYNTH_QUANTITY_NONE) {
        json_builder_set_member_name(b, "changes");
        json_builder_begin_array(b);
        for (guint i = 0; i < s->changes->len; i++) {
            const ClSynthChange *c = &g_array_index(s->changes, ClSynthChange, i);
            json_builder_begin_object(b);
            add_string(b, "type", cl_synth_change_name(c->type));
            object_json(b, s, "before", c->image - 1, c->before);
            object_json(b, s, "after", c->image, c->after);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
    } else {
        add_string(b, "quantity", cl_synth_quantity_name(s->quantity));
        add_double(b, "value", s->value);
        add_string(b, "text", s->answer);
        json_builder_set_member_name(b, "points");
        json_builder_begin_array(b);
        for (int k = 0; k < s->n_images; k++) {
            const ClSynthObject *o = &g_array_index(s->objects[k], ClSynthObject, 0);
            json_builder_begin_array(b);
            json_builder_add_double_value(b, cl_json_double(norm4(o->x, s->images[k].width)));
            json_builder_add_double_value(b, cl_json_double(norm4(o->y, s->images[k].height)));
            json_builder_end_array(b);
        }
        json_builder_end_array(b);
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

char *cl_synth_sample_to_jsonl(const ClSynthSample *s, const char *id,
                               const char *const *image_paths)
{
    g_return_val_if_fail(s && id && image_paths, NULL);
    static const char *const roles[] = { "system", "user", "assistant" };
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    add_string(b, "id", id);
    json_builder_set_member_name(b, "messages");
    json_builder_begin_array(b);
    const ClChatTurn *turns = cl_chat_conversation_turns(s->conversation);
    for (gsize i = 0; i < cl_chat_conversation_len(s->conversation); i++) {
        json_builder_begin_object(b);
        add_string(b, "role", roles[turns[i].role]);
        add_string(b, "content", turns[i].text);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "images");
    json_builder_begin_array(b);
    for (int k = 0; k < s->n_images; k++)
        json_builder_add_string_value(b, image_paths[k]);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "answer");
    json_builder_add_value(b, cl_synth_sample_answer_json(s));
    if (s->context) /* text read with the images (docs/MODEL.md §4.6) */
        add_string(b, "context", s->context);
    add_string(b, "task", s->task);
    json_builder_end_object(b);

    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    json_generator_set_root(gen, root);
    return json_generator_to_data(gen, NULL);
}

gboolean cl_synth_image_write_png(const ClSynthImage *img, const char *path, GError **error)
{
    g_return_val_if_fail(img && img->pixels && path, FALSE);
    cairo_surface_t *surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, img->width, img->height);
    cairo_surface_flush(surf);
    guint8 *dst = cairo_image_surface_get_data(surf);
    int stride = cairo_image_surface_get_stride(surf);
    for (int y = 0; y < img->height; y++) {
        guint32 *row = (guint32 *)(gpointer)(dst + (gsize)y * stride);
        const guint8 *p = img->pixels + (gsize)y * img->width * img->channels;
        for (int x = 0; x < img->width; x++) {
            const guint8 *q = p + (gsize)x * img->channels;
            guint32 r = q[0], g = img->channels >= 3 ? q[1] : q[0],
                    bl = img->channels >= 3 ? q[2] : q[0];
            row[x] = 0xff000000u | (r << 16) | (g << 8) | bl;
        }
    }
    cairo_surface_mark_dirty(surf);
    cairo_status_t st = cairo_surface_write_to_png(surf, path);
    cairo_surface_destroy(surf);
    if (st != CAIRO_STATUS_SUCCESS) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_IO, "cannot write %s: %s", path,
                    cairo_status_to_string(st));
        return FALSE;
    }
    return TRUE;
}

const char *cl_synth_task_ext(const char *task)
{
    const ClSynthTaskDef *t = find_task(task);
    return t ? (t->ext ? t->ext : "png") : NULL;
}
