/* edits.c - the `edits` task (the SVE paper's fine-grained image comparison, appendix B.5,
 * ImgEdit pairs): photo-like table-tops, rooms and gardens with shaded cups, lamps, plants,
 * books, balls, vases, frames and clocks; the second image applies one instruction-style edit
 * (add, remove, replace, recolour an object, or change the background) and the answer is that
 * instruction, phrased as ImgEdit's are ("Turn the red book positioned in the lower right area
 * into blue"). Acquisition differences: lighting colour and level, vignetting, JPEG-like
 * softness. */
#include "synth/synth-private.h"

#include <math.h>
#include <string.h>

#define FRAME_MARGIN 3.0 /* objects stay this far inside the frame (the shift is <= 2) */
#define GAP 2.0

/* Objects travel in ClSynthObject with their kind as shape * 2 + material (8 kinds), their
 * colour as the colour; object 0 of each image is the backdrop (wall or sky), whose theme is
 * colour + 8 * material. */
typedef enum { CUP, LAMP, PLANT, BOOK, BALL, VASE, FRAME, CLOCK, N_KINDS } Kind;
static const char *const kind_names[N_KINDS] = { "cup",  "lamp", "plant", "book",
                                                 "ball", "vase", "frame", "clock" };
#define HANGS(k) ((k) == FRAME || (k) == CLOCK)

typedef enum { TABLE, ROOM, GARDEN, N_SETTINGS } Setting;

/* backdrops 0..7 indoors (tables and rooms), 8..13 outdoors */
static const char *const themes[14] = {
    "a plain blue wall",   "a red brick wall",   "a striped wallpaper", "a window with a blue sky",
    "a wooden panel wall", "a green tiled wall", "a plain beige wall",  "a dotted wallpaper",
    "a clear blue sky",    "a sunset sky",       "a cloudy sky",        "a mountain landscape",
    "a city skyline",      "a starry night sky",
};

typedef enum { E_ADD, E_REMOVE, E_REPLACE, E_COLOUR, E_BACKGROUND, N_EDITS } EditType;
static const char *const edit_names[N_EDITS] = { "add", "remove", "replace", "colour",
                                                 "background" };

/* ImgEdit-like position words for a 3 × 3 grid of the image */
static const char *const area_names[9] = { "upper left",   "upper central", "upper right",
                                           "central left", "central",       "central right",
                                           "lower left",   "lower central", "lower right" };

static const double palette[CL_SYNTH_N_COLOURS][3] = {
    { 0.50, 0.50, 0.50 }, { 0.75, 0.15, 0.14 }, { 0.18, 0.32, 0.80 }, { 0.16, 0.52, 0.20 },
    { 0.50, 0.31, 0.14 }, { 0.50, 0.20, 0.70 }, { 0.18, 0.75, 0.78 }, { 0.95, 0.85, 0.20 },
};

/* ---- objects --------------------------------------------------------------------------------- */

static Kind kind_of(const ClSynthObject *o)
{
    return (Kind)(o->shape * 2 + o->material);
}

static int theme_of(const ClSynthObject *backdrop)
{
    return backdrop->colour + 8 * backdrop->material;
}

static void set_kind(ClSynthObject *o, Kind k)
{
    o->shape = (ClSynthShape)(k / 2);
    o->material = k % 2;
}

/* The object's unit: farther (higher up the surface) is smaller. */
static double unit(const ClSynthObject *o, double horizon, int h, double scale)
{
    if (HANGS(kind_of(o)))
        return scale;
    double depth = (o->y - horizon) / MAX(1.0, h - horizon);
    return scale * (0.75 + 0.5 * CLAMP(depth, 0, 1));
}

/* Everything drawn for the object: body, handle, shade, leaves, shadow, antialiasing.
 * (x, y): the base centre of a standing object, the centre of a hanging one. */
static void object_box(ClSynthObject *o, double u)
{
    double x = o->x, y = o->y, l, t, r, b;
    switch (kind_of(o)) {
    case CUP: l = x - 5 * u, r = x + 9 * u, t = y - 13 * u, b = y + 2 * u; break;
    case LAMP: l = x - 9 * u, r = x + 9 * u, t = y - 31 * u, b = y + 2.5 * u; break;
    case PLANT: l = x - 11.5 * u, r = x + 11.5 * u, t = y - 23 * u, b = y + 2 * u; break;
    case BOOK: l = x - 5 * u, r = x + 6 * u, t = y - 17 * u, b = y + 2 * u; break;
    case BALL: l = x - 7 * u, r = x + 8 * u, t = y - 13 * u, b = y + 2.5 * u; break;
    case VASE: l = x - 7 * u, r = x + 8 * u, t = y - 21 * u, b = y + 2 * u; break;
    case FRAME: l = x - 10 * u, r = x + 11.5 * u, t = y - 8 * u, b = y + 9.5 * u; break;
    default: /* clock */ l = x - 8 * u, r = x + 9.5 * u, t = y - 8 * u, b = y + 9.5 * u; break;
    }
    o->box[0] = l - 1.5, o->box[1] = t - 1.5, o->box[2] = r + 1.5, o->box[3] = b + 1.5;
}

static gboolean boxes_apart(const double a[4], const double b[4])
{
    return a[2] + GAP <= b[0] || b[2] + GAP <= a[0] || a[3] + GAP <= b[1] || b[3] + GAP <= a[1];
}

/* apart from every object (the backdrop, index 0, excepted) but `skip` */
static gboolean apart_from(const ClSynthObject *o, const GArray *a, int skip)
{
    for (guint i = 1; i < a->len; i++)
        if ((int)i != skip && !boxes_apart(o->box, g_array_index(a, ClSynthObject, i).box))
            return FALSE;
    return TRUE;
}

static gboolean in_frame(const ClSynthObject *o, int w, int h)
{
    return o->box[0] >= FRAME_MARGIN && o->box[1] >= FRAME_MARGIN &&
           o->box[2] <= w - FRAME_MARGIN && o->box[3] <= h - FRAME_MARGIN;
}

/* does a (kind, colour) already exist in the scene: each one named must be the only one */
static gboolean look_used(const GArray *a, Kind k, int colour, int skip)
{
    for (guint i = 1; i < a->len; i++) {
        const ClSynthObject *o = &g_array_index(a, ClSynthObject, i);
        if ((int)i != skip && kind_of(o) == k && o->colour == colour)
            return TRUE;
    }
    return FALSE;
}

static int area_of(const ClSynthObject *o, int w, int h)
{
    double cx = (o->box[0] + o->box[2]) / 2, cy = (o->box[1] + o->box[3]) / 2;
    int gx = CLAMP((int)floor(3 * cx / w), 0, 2), gy = CLAMP((int)floor(3 * cy / h), 0, 2);
    return gy * 3 + gx;
}

/* ---- drawing --------------------------------------------------------------------------------- */

typedef struct {
    Setting setting;
    double horizon; /* where the backdrop meets the surface */
    double scale;
    guint64 texture_seed; /* wood grain, lawn, clouds: the same in both images */
    int surface;          /* surface variant */
    gboolean nuisance;
    guint64 nuisance_seed;
} EditsDrawing;

static void rgb(cairo_t *cr, const double c[3], double k)
{
    cairo_set_source_rgb(cr, MIN(1, c[0] * k), MIN(1, c[1] * k), MIN(1, c[2] * k));
}

static void stop(cairo_pattern_t *p, double at, const double c[3], double k)
{
    cairo_pattern_add_color_stop_rgb(p, at, MIN(1, c[0] * k), MIN(1, c[1] * k), MIN(1, c[2] * k));
}

static void fill_with(cairo_t *cr, cairo_pattern_t *p)
{
    cairo_set_source(cr, p);
    cairo_fill(cr);
    cairo_pattern_destroy(p);
}

static void ellipse(cairo_t *cr, double x, double y, double rx, double ry)
{
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_scale(cr, rx, ry);
    cairo_new_sub_path(cr);
    cairo_arc(cr, 0, 0, 1, 0, 2 * G_PI);
    cairo_restore(cr);
}

/* lit from the upper left: a cylinder's side shaded across */
static cairo_pattern_t *side_light(double x0, double x1, const double c[3])
{
    cairo_pattern_t *p = cairo_pattern_create_linear(x0, 0, x1, 0);
    stop(p, 0, c, 0.75);
    stop(p, 0.3, c, 1.2);
    stop(p, 1, c, 0.5);
    return p;
}

static void draw_backdrop(cairo_t *cr, const EditsDrawing *d, int theme, int w)
{
    double H = d->horizon, u = d->scale;
    ClSynthRng r;
    cl_synth_rng_init(&r, d->texture_seed ^ (guint64)theme);
    double x0 = -8, x1 = w + 8, y0 = -8;
    cairo_rectangle(cr, x0, y0, x1 - x0, H - y0);
    cairo_pattern_t *p = cairo_pattern_create_linear(0, y0, 0, H);
    static const double base[14][3] = {
        { 0.45, 0.58, 0.80 }, { 0.66, 0.30, 0.22 }, { 0.85, 0.82, 0.72 }, { 0.88, 0.86, 0.82 },
        { 0.60, 0.42, 0.26 }, { 0.45, 0.66, 0.52 }, { 0.86, 0.79, 0.64 }, { 0.80, 0.84, 0.88 },
        { 0.45, 0.68, 0.95 }, { 0.95, 0.55, 0.30 }, { 0.72, 0.76, 0.82 }, { 0.58, 0.74, 0.92 },
        { 0.62, 0.78, 0.95 }, { 0.06, 0.08, 0.20 },
    };
    const double *c = base[theme];
    stop(p, 0, c, theme == 9 ? 0.7 : 1.05);
    stop(p, 1, c, theme == 9 ? 1.05 : 0.88);
    fill_with(cr, p);
    cairo_save(cr);
    cairo_rectangle(cr, x0, y0, x1 - x0, H - y0);
    cairo_clip(cr);
    switch (theme) {
    case 1: /* bricks */
        cairo_set_source_rgba(cr, 0.85, 0.80, 0.72, 0.8);
        cairo_set_line_width(cr, 0.8 * u);
        for (double y = 0, row = 0; y < H; y += 5 * u, row++) {
            cairo_move_to(cr, x0, y);
            cairo_line_to(cr, x1, y);
            for (double x = fmod(row, 2) * 5 * u; x < x1; x += 10 * u) {
                cairo_move_to(cr, x, y);
                cairo_line_to(cr, x, y + 5 * u);
            }
        }
        cairo_stroke(cr);
        break;
    case 2: /* stripes */
        cairo_set_source_rgba(cr, 0.55, 0.45, 0.55, 0.35);
        for (double x = 0; x < x1; x += 8 * u)
            cairo_rectangle(cr, x, y0, 3 * u, H - y0);
        cairo_fill(cr);
        break;
    case 3: { /* a window: frame, sky, mullions */
        double ww = 0.4 * w, wx = 0.3 * w, wy = 0.12 * H, wh = 0.7 * H;
        cairo_set_source_rgb(cr, 0.95, 0.95, 0.93);
        cairo_rectangle(cr, wx - 2 * u, wy - 2 * u, ww + 4 * u, wh + 4 * u);
        cairo_fill(cr);
        cairo_pattern_t *sky = cairo_pattern_create_linear(0, wy, 0, wy + wh);
        cairo_pattern_add_color_stop_rgb(sky, 0, 0.35, 0.60, 0.95);
        cairo_pattern_add_color_stop_rgb(sky, 1, 0.70, 0.85, 0.98);
        cairo_rectangle(cr, wx, wy, ww, wh);
        fill_with(cr, sky);
        cairo_set_source_rgb(cr, 0.95, 0.95, 0.93);
        cairo_rectangle(cr, wx + ww / 2 - u, wy, 2 * u, wh);
        cairo_rectangle(cr, wx, wy + wh / 2 - u, ww, 2 * u);
        cairo_fill(cr);
        break;
    }
    case 4: /* panels */
        cairo_set_source_rgba(cr, 0.25, 0.15, 0.08, 0.5);
        cairo_set_line_width(cr, 0.8 * u);
        for (double x = 0; x < x1; x += 12 * u) {
            cairo_move_to(cr, x, y0);
            cairo_line_to(cr, x, H);
        }
        cairo_stroke(cr);
        break;
    case 5: /* tiles */
        cairo_set_source_rgba(cr, 0.9, 0.95, 0.9, 0.7);
        cairo_set_line_width(cr, 0.7 * u);
        for (double x = 0; x < x1; x += 7 * u) {
            cairo_move_to(cr, x, y0);
            cairo_line_to(cr, x, H);
        }
        for (double y = 0; y < H; y += 7 * u) {
            cairo_move_to(cr, x0, y);
            cairo_line_to(cr, x1, y);
        }
        cairo_stroke(cr);
        break;
    case 7: /* dots */
        cairo_set_source_rgba(cr, 0.40, 0.50, 0.70, 0.5);
        for (double y = 3 * u; y < H; y += 7 * u)
            for (double x = 3 * u; x < x1; x += 7 * u)
                ellipse(cr, x, y, 1.2 * u, 1.2 * u);
        cairo_fill(cr);
        break;
    case 9: /* sun low over the horizon */
        cairo_set_source_rgba(cr, 1.0, 0.85, 0.45, 0.9);
        ellipse(cr, 0.7 * w, H - 4 * u, 9 * u, 9 * u);
        cairo_fill(cr);
        break;
    case 10: /* clouds */
        for (int i = 0; i < 14; i++) {
            cairo_set_source_rgba(cr, 0.96, 0.96, 0.97, 0.8);
            ellipse(cr, cl_synth_rng_range(&r, 0, w), cl_synth_rng_range(&r, 0, H),
                    cl_synth_rng_range(&r, 8, 20) * u, cl_synth_rng_range(&r, 4, 8) * u);
            cairo_fill(cr);
        }
        break;
    case 11: /* mountains */
        cairo_move_to(cr, x0, H);
        for (double x = x0; x <= x1; x += 10 * u)
            cairo_line_to(cr, x, H - cl_synth_rng_range(&r, 0.25, 0.7) * H);
        cairo_line_to(cr, x1, H);
        cairo_close_path(cr);
        cairo_set_source_rgb(cr, 0.40, 0.45, 0.52);
        cairo_fill(cr);
        break;
    case 12: /* skyline */
        cairo_set_source_rgb(cr, 0.30, 0.33, 0.40);
        for (double x = x0; x < x1;) {
            double bw = cl_synth_rng_range(&r, 6, 14) * u;
            double bh = cl_synth_rng_range(&r, 0.2, 0.75) * H;
            cairo_rectangle(cr, x, H - bh, bw - 0.8 * u, bh);
            x += bw;
        }
        cairo_fill(cr);
        break;
    case 13: /* stars */
        cairo_set_source_rgb(cr, 0.95, 0.95, 0.85);
        for (int i = 0; i < 40; i++)
            ellipse(cr, cl_synth_rng_range(&r, 0, w), cl_synth_rng_range(&r, 0, H), 0.6 * u,
                    0.6 * u);
        cairo_fill(cr);
        break;
    default: break;
    }
    cairo_restore(cr);
}

static void draw_surface(cairo_t *cr, const EditsDrawing *d, int w, int h)
{
    double H = d->horizon, u = d->scale;
    ClSynthRng r;
    cl_synth_rng_init(&r, d->texture_seed);
    static const double tops[3][3][3] = {
        { { 0.62, 0.42, 0.25 }, { 0.78, 0.62, 0.42 }, { 0.90, 0.90, 0.88 } }, /* tables */
        { { 0.55, 0.38, 0.24 }, { 0.60, 0.55, 0.50 }, { 0.45, 0.35, 0.45 } }, /* floors */
        { { 0.30, 0.55, 0.22 }, { 0.38, 0.58, 0.25 }, { 0.34, 0.50, 0.20 } }, /* lawns */
    };
    const double *c = tops[d->setting][d->surface];
    cairo_rectangle(cr, -8, H, w + 16, h + 8 - H);
    cairo_pattern_t *p = cairo_pattern_create_linear(0, H, 0, h);
    stop(p, 0, c, 0.85);
    stop(p, 1, c, 1.1);
    fill_with(cr, p);
    if (d->setting == ROOM) { /* skirting board */
        cairo_set_source_rgb(cr, 0.93, 0.92, 0.9);
        cairo_rectangle(cr, -8, H, w + 16, 2.5 * u);
        cairo_fill(cr);
    }
    if (d->setting == TABLE) { /* edge of the table top, and grain */
        cairo_set_source_rgba(cr, 1, 1, 1, 0.25);
        cairo_rectangle(cr, -8, H, w + 16, 1.2 * u);
        cairo_fill(cr);
    }
    int n = d->setting == GARDEN ? (int)(w * (h - H) / 12) : 18;
    for (int i = 0; i < n; i++) {
        double y = cl_synth_rng_range(&r, H + 3 * u, h + 4);
        double x = cl_synth_rng_range(&r, -8, w + 8);
        if (d->setting == GARDEN) { /* blades */
            cairo_set_source_rgba(cr, 0.15, 0.35, 0.1, 0.4);
            cairo_move_to(cr, x, y);
            cairo_line_to(cr, x + cl_synth_rng_range(&r, -1, 1) * u, y - 2.5 * u);
            cairo_set_line_width(cr, 0.5 * u);
            cairo_stroke(cr);
        } else { /* grain or plank lines */
            cairo_set_source_rgba(cr, 0.2, 0.12, 0.05, cl_synth_rng_range(&r, 0.05, 0.15));
            cairo_move_to(cr, -8, y);
            cairo_curve_to(cr, w * 0.3, y + cl_synth_rng_range(&r, -2, 2) * u, w * 0.6,
                           y + cl_synth_rng_range(&r, -2, 2) * u, w + 8, y);
            cairo_set_line_width(cr, 0.6 * u);
            cairo_stroke(cr);
        }
    }
}

static void draw_object(cairo_t *cr, const ClSynthObject *o, double u)
{
    double x = o->x, y = o->y;
    const double *c = palette[o->colour];
    Kind k = kind_of(o);
    if (HANGS(k)) { /* a drop shadow on the wall */
        cairo_set_source_rgba(cr, 0, 0, 0, 0.25);
        if (k == FRAME)
            cairo_rectangle(cr, x - 10 * u + 1.5 * u, y - 8 * u + 1.5 * u, 20 * u, 16 * u);
        else
            ellipse(cr, x + 1.5 * u, y + 1.5 * u, 8 * u, 8 * u);
        cairo_fill(cr);
    } else { /* a contact shadow on the surface, light from the upper left */
        cairo_set_source_rgba(cr, 0, 0, 0, 0.28);
        double half = k == LAMP || k == PLANT ? 7 : k == BOOK ? 4 : 5;
        ellipse(cr, x + 1.5 * u, y, half * u + 0.5 * u, 1.8 * u);
        cairo_fill(cr);
    }
    switch (k) {
    case CUP: {
        cairo_set_line_width(cr, 1.8 * u); /* handle */
        rgb(cr, c, 0.8);
        cairo_arc(cr, x + 5 * u, y - 6.5 * u, 3 * u, -G_PI / 2, G_PI / 2);
        cairo_stroke(cr);
        cairo_move_to(cr, x - 5 * u, y - 11 * u);
        cairo_line_to(cr, x + 5 * u, y - 11 * u);
        cairo_line_to(cr, x + 4 * u, y);
        cairo_line_to(cr, x - 4 * u, y);
        cairo_close_path(cr);
        fill_with(cr, side_light(x - 5 * u, x + 5 * u, c));
        ellipse(cr, x, y - 11 * u, 5 * u, 1.5 * u);
        rgb(cr, c, 0.45);
        cairo_fill(cr);
        break;
    }
    case LAMP: {
        static const double metal[3] = { 0.7, 0.7, 0.72 };
        ellipse(cr, x, y - 1 * u, 6 * u, 1.5 * u);
        rgb(cr, metal, 0.7);
        cairo_fill(cr);
        cairo_rectangle(cr, x - 1 * u, y - 20 * u, 2 * u, 19 * u);
        fill_with(cr, side_light(x - u, x + u, metal));
        cairo_move_to(cr, x - 4 * u, y - 31 * u);
        cairo_line_to(cr, x + 4 * u, y - 31 * u);
        cairo_line_to(cr, x + 9 * u, y - 19 * u);
        cairo_line_to(cr, x - 9 * u, y - 19 * u);
        cairo_close_path(cr);
        fill_with(cr, side_light(x - 9 * u, x + 9 * u, c));
        ellipse(cr, x, y - 19 * u, 9 * u, 1.2 * u); /* the bulb's glow under the shade */
        cairo_set_source_rgba(cr, 1, 0.95, 0.7, 0.9);
        cairo_fill(cr);
        break;
    }
    case PLANT: {
        static const double leaf[3] = { 0.20, 0.55, 0.18 };
        for (int i = 0; i < 7; i++) {
            double a = -G_PI / 2 + (i - 3) * 0.38;
            double lx = x + cos(a) * 9 * u, ly = y - 10 * u + sin(a) * 11 * u;
            cairo_save(cr);
            cairo_translate(cr, (x + lx) / 2, (y - 9 * u + ly) / 2);
            cairo_rotate(cr, a);
            ellipse(cr, 0, 0, 6 * u, 2.2 * u);
            cairo_restore(cr);
            rgb(cr, leaf, 0.8 + 0.08 * (i % 3));
            cairo_fill(cr);
        }
        cairo_move_to(cr, x - 5 * u, y - 9 * u);
        cairo_line_to(cr, x + 5 * u, y - 9 * u);
        cairo_line_to(cr, x + 3.8 * u, y);
        cairo_line_to(cr, x - 3.8 * u, y);
        cairo_close_path(cr);
        fill_with(cr, side_light(x - 5 * u, x + 5 * u, c));
        break;
    }
    case BOOK: {
        cairo_rectangle(cr, x - 4 * u, y - 16 * u, 8 * u, 16 * u);
        fill_with(cr, side_light(x - 4 * u, x + 4 * u, c));
        cairo_set_source_rgb(cr, 0.95, 0.93, 0.86); /* pages */
        cairo_rectangle(cr, x + 4 * u, y - 15.5 * u, 1.5 * u, 15 * u);
        cairo_fill(cr);
        rgb(cr, c, 0.5); /* bands on the spine */
        cairo_rectangle(cr, x - 4 * u, y - 13 * u, 8 * u, 1 * u);
        cairo_rectangle(cr, x - 4 * u, y - 4 * u, 8 * u, 1 * u);
        cairo_fill(cr);
        break;
    }
    case BALL: {
        double r = 6 * u, cy = y - r;
        cairo_pattern_t *p = cairo_pattern_create_radial(x - 0.35 * r, cy - 0.4 * r, 0, x, cy, r);
        stop(p, 0, c, 1.5);
        stop(p, 0.5, c, 1.0);
        stop(p, 1, c, 0.5);
        ellipse(cr, x, cy, r, r);
        fill_with(cr, p);
        break;
    }
    case VASE: {
        cairo_move_to(cr, x - 2.5 * u, y - 20 * u);
        cairo_curve_to(cr, x - 2 * u, y - 14 * u, x - 9 * u, y - 12 * u, x - 5 * u, y);
        cairo_line_to(cr, x + 5 * u, y);
        cairo_curve_to(cr, x + 9 * u, y - 12 * u, x + 2 * u, y - 14 * u, x + 2.5 * u, y - 20 * u);
        cairo_close_path(cr);
        fill_with(cr, side_light(x - 7 * u, x + 7 * u, c));
        ellipse(cr, x, y - 20 * u, 2.5 * u, 0.8 * u);
        rgb(cr, c, 0.4);
        cairo_fill(cr);
        break;
    }
    case FRAME: {
        cairo_rectangle(cr, x - 10 * u, y - 8 * u, 20 * u, 16 * u);
        cairo_pattern_t *p =
            cairo_pattern_create_linear(x - 10 * u, y - 8 * u, x + 10 * u, y + 8 * u);
        stop(p, 0, c, 1.2);
        stop(p, 1, c, 0.65);
        fill_with(cr, p);
        /* the picture: sky, a hill */
        cairo_set_source_rgb(cr, 0.70, 0.82, 0.92);
        cairo_rectangle(cr, x - 7.5 * u, y - 5.5 * u, 15 * u, 11 * u);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, 0.35, 0.55, 0.30);
        cairo_move_to(cr, x - 7.5 * u, y + 5.5 * u);
        cairo_curve_to(cr, x - 3 * u, y - 3 * u, x + 2 * u, y, x + 7.5 * u, y + 1 * u);
        cairo_line_to(cr, x + 7.5 * u, y + 5.5 * u);
        cairo_close_path(cr);
        cairo_fill(cr);
        break;
    }
    default: { /* clock */
        cairo_pattern_t *p = cairo_pattern_create_radial(x - 3 * u, y - 3 * u, 0, x, y, 8 * u);
        stop(p, 0, c, 1.3);
        stop(p, 1, c, 0.7);
        ellipse(cr, x, y, 8 * u, 8 * u);
        fill_with(cr, p);
        cairo_set_source_rgb(cr, 0.96, 0.96, 0.94);
        ellipse(cr, x, y, 6.2 * u, 6.2 * u);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        cairo_set_line_width(cr, 0.8 * u);
        cairo_move_to(cr, x, y);
        cairo_line_to(cr, x, y - 4.5 * u);
        cairo_move_to(cr, x, y);
        cairo_line_to(cr, x + 3 * u, y + 1 * u);
        cairo_stroke(cr);
        break;
    }
    }
}

static void draw_scene(cairo_t *cr, const ClSynthSample *s, int image, const EditsDrawing *d)
{
    int w = s->images[image].width, h = s->images[image].height;
    const GArray *objs = s->objects[image];
    draw_backdrop(cr, d, theme_of(&g_array_index(objs, ClSynthObject, 0)), w);
    draw_surface(cr, d, w, h);
    /* hanging things first, then standing ones back to front */
    for (int pass = 0; pass < 2; pass++) {
        g_autofree guint *order = g_new(guint, objs->len);
        guint n = 0;
        for (guint i = 1; i < objs->len; i++)
            if (HANGS(kind_of(&g_array_index(objs, ClSynthObject, i))) == (pass == 0))
                order[n++] = i;
        for (guint a = 1; a < n; a++) /* insertion sort by base y */
            for (guint b = a; b > 0 && g_array_index(objs, ClSynthObject, order[b - 1]).y >
                                           g_array_index(objs, ClSynthObject, order[b]).y;
                 b--) {
                guint t = order[b];
                order[b] = order[b - 1], order[b - 1] = t;
            }
        for (guint i = 0; i < n; i++) {
            const ClSynthObject *o = &g_array_index(objs, ClSynthObject, order[i]);
            draw_object(cr, o, unit(o, d->horizon, h, d->scale));
        }
    }
}

static void draw(cairo_t *cr, const ClSynthSample *s, int image, gpointer data)
{
    const EditsDrawing *d = data;
    int w = s->images[image].width, h = s->images[image].height;
    if (!d->nuisance) {
        draw_scene(cr, s, image, d);
        return;
    }
    ClSynthRng r;
    cl_synth_rng_init(&r, cl_synth_stream_seed(d->nuisance_seed, (guint64)image));
    double warm = cl_synth_rng_range(&r, -0.06, 0.06), level = cl_synth_rng_range(&r, 0.9, 1.0);
    double vignette = cl_synth_rng_range(&r, 0.0, 0.25);
    double soft = cl_synth_rng_double(&r) < 0.5 ? cl_synth_rng_range(&r, 0.7, 0.9) : 1.0;
    if (soft < 1.0) {
        /* JPEG-like softness: the scene at a lower resolution, scaled back up bilinearly */
        int pad = 8, sw = (int)ceil((w + 2 * pad) * soft), sh = (int)ceil((h + 2 * pad) * soft);
        cairo_surface_t *small = cairo_image_surface_create(CAIRO_FORMAT_RGB24, sw, sh);
        cairo_t *sc = cairo_create(small);
        cairo_scale(sc, soft, soft);
        cairo_translate(sc, pad, pad);
        draw_scene(sc, s, image, d);
        cairo_destroy(sc);
        cairo_save(cr);
        cairo_translate(cr, -pad, -pad);
        cairo_scale(cr, 1 / soft, 1 / soft);
        cairo_set_source_surface(cr, small, 0, 0);
        cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_BILINEAR);
        cairo_paint(cr);
        cairo_restore(cr);
        cairo_surface_destroy(small);
    } else {
        draw_scene(cr, s, image, d);
    }
    /* lighting: colour temperature and level, then a vignette */
    cairo_set_operator(cr, CAIRO_OPERATOR_MULTIPLY);
    cairo_set_source_rgb(cr, level * (1 + MIN(0, -warm)), level * (1 - fabs(warm) / 2),
                         level * (1 + MIN(0, warm)));
    cairo_rectangle(cr, -8, -8, w + 16, h + 16);
    cairo_fill(cr);
    cairo_set_operator(cr, CAIRO_OPERATOR_OVER);
    cairo_pattern_t *v = cairo_pattern_create_radial(w / 2.0, h / 2.0, 0.3 * MAX(w, h), w / 2.0,
                                                     h / 2.0, 0.75 * MAX(w, h));
    cairo_pattern_add_color_stop_rgba(v, 0, 0, 0, 0, 0);
    cairo_pattern_add_color_stop_rgba(v, 1, 0, 0, 0, vignette);
    cairo_rectangle(cr, -8, -8, w + 16, h + 16);
    fill_with(cr, v);
}

/* ---- the edit -------------------------------------------------------------------------------- */

/* A new standing or hanging object somewhere free, of a look the scene does not have. */
static gboolean place_new(ClSynthObject *o, ClSynthRng *rng, const GArray *scene,
                          const EditsDrawing *d, int w, int h, Setting setting)
{
    for (int t = 0; t < 80; t++) {
        Kind k;
        do
            k = (Kind)cl_synth_rng_int(rng, 0, N_KINDS - 1);
        while (setting == GARDEN && HANGS(k));
        *o = (ClSynthObject){ 0 };
        set_kind(o, k);
        o->colour = cl_synth_rng_int(rng, 0, CL_SYNTH_N_COLOURS - 1);
        if (look_used(scene, k, o->colour, -1))
            continue;
        o->x = cl_synth_rng_range(rng, 0, w);
        if (HANGS(k))
            o->y = cl_synth_rng_range(rng, 0.1 * h, d->horizon - 12 * d->scale);
        else
            o->y = cl_synth_rng_range(rng, d->horizon + 0.15 * (h - d->horizon), h - 3 * d->scale);
        o->size = 0;
        object_box(o, unit(o, d->horizon, h, d->scale));
        if (in_frame(o, w, h) && apart_from(o, scene, -1))
            return TRUE;
    }
    return FALSE;
}

JsonNode *cl_synth_edits_answer_json(const ClSynthSample *s)
{
    g_return_val_if_fail(s && g_strcmp0(s->task, "edits") == 0 && s->changes->len == 1, NULL);
    const ClSynthChange *c = &g_array_index(s->changes, ClSynthChange, 0);
    const ClSynthObject *b =
        c->before >= 0 ? &g_array_index(s->objects[0], ClSynthObject, c->before) : NULL;
    const ClSynthObject *a =
        c->after >= 0 ? &g_array_index(s->objects[1], ClSynthObject, c->after) : NULL;
    EditType t = c->type == CL_SYNTH_CHANGE_ADD      ? E_ADD
                 : c->type == CL_SYNTH_CHANGE_REMOVE ? E_REMOVE
                 : c->before == 0                    ? E_BACKGROUND
                 : kind_of(b) == kind_of(a)          ? E_COLOUR
                                                     : E_REPLACE;
    int w = s->images[0].width, h = s->images[0].height;
    g_autoptr(JsonBuilder) j = json_builder_new();
    json_builder_begin_object(j);
    json_builder_set_member_name(j, "type");
    json_builder_add_string_value(j, edit_names[t]);
    json_builder_set_member_name(j, "object");
    json_builder_add_string_value(j, t == E_BACKGROUND ? "background"
                                                       : kind_names[kind_of(b ? b : a)]);
    if (t == E_REPLACE) {
        json_builder_set_member_name(j, "new_object");
        json_builder_add_string_value(j, kind_names[kind_of(a)]);
    }
    if (t == E_BACKGROUND) {
        json_builder_set_member_name(j, "before");
        json_builder_add_string_value(j, themes[theme_of(b)]);
        json_builder_set_member_name(j, "after");
        json_builder_add_string_value(j, themes[theme_of(a)]);
    } else {
        json_builder_set_member_name(j, "location");
        json_builder_add_string_value(j, area_names[area_of(b ? b : a, w, h)]);
        json_builder_set_member_name(j, "colours");
        json_builder_begin_object(j);
        json_builder_set_member_name(j, "before");
        if (b)
            json_builder_add_string_value(j, cl_synth_colour_name(b->colour));
        else
            json_builder_add_null_value(j);
        json_builder_set_member_name(j, "after");
        if (a)
            json_builder_add_string_value(j, cl_synth_colour_name(a->colour));
        else
            json_builder_add_null_value(j);
        json_builder_end_object(j);
    }
    json_builder_set_member_name(j, "text");
    json_builder_add_string_value(j, s->answer);
    json_builder_end_object(j);
    return json_builder_get_root(j);
}

/* The original image's scene: setting, backdrop (object 0) and objects. */
static EditsDrawing *new_scene(const ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                               GArray **objects)
{
    int w = opts->width, h = opts->height;
    EditsDrawing *d = g_new0(EditsDrawing, 1);
    d->setting = (Setting)cl_synth_rng_int(rng, 0, N_SETTINGS - 1);
    d->horizon = cl_synth_rng_range(rng, 0.42, 0.58) * h;
    d->scale = cl_synth_scale(s, opts);
    d->texture_seed = cl_synth_rng_next(rng);
    d->surface = cl_synth_rng_int(rng, 0, 2);
    d->nuisance = opts->nuisance;
    d->nuisance_seed = cl_synth_stream_seed(s->seed ^ G_GUINT64_CONSTANT(0xed175), 5);
    gboolean outdoor = d->setting == GARDEN;

    GArray *scene = g_array_new(FALSE, TRUE, sizeof(ClSynthObject));
    ClSynthObject backdrop = { 0 };
    int theme = outdoor ? cl_synth_rng_int(rng, 8, 13) : cl_synth_rng_int(rng, 0, 7);
    backdrop.colour = theme % 8, backdrop.material = theme / 8;
    backdrop.x = w / 2.0, backdrop.y = d->horizon / 2;
    backdrop.box[0] = -8, backdrop.box[1] = -8, backdrop.box[2] = w + 8;
    backdrop.box[3] = d->horizon + 1.5;
    g_array_append_val(scene, backdrop);
    double area = (double)w * h / (160.0 * 160.0);
    int want = cl_synth_rng_int(rng, CLAMP((int)(3 * area + 0.5), 2, 20),
                                CLAMP((int)(6 * area + 0.5), 3, 40));
    for (int t = 0; t < 20 * want && (int)scene->len - 1 < want; t++) {
        ClSynthObject o;
        if (place_new(&o, rng, scene, d, w, h, d->setting))
            g_array_append_val(scene, o);
    }
    *objects = scene;
    return d;
}

int cl_synth_edits_scene(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                         ClSynthDrawing *drawing)
{
    s->n_images = 1;
    s->objects = g_new0(GArray *, 1);
    EditsDrawing *d = new_scene(s, rng, opts, &s->objects[0]);
    drawing->draw = draw;
    drawing->data = d;
    drawing->free_data = g_free;
    return d->setting;
}

const char *cl_synth_edits_object_name(const ClSynthObject *o)
{
    Kind k = kind_of(o);
    return (int)k >= 0 && k < N_KINDS ? kind_names[k] : NULL;
}

const char *cl_synth_edits_backdrop_name(const ClSynthObject *backdrop)
{
    int t = theme_of(backdrop);
    return t >= 0 && t < (int)G_N_ELEMENTS(themes) ? themes[t] : NULL;
}

gboolean cl_synth_edits_generate(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                                 ClSynthDrawing *drawing, GError **error)
{
    int w = opts->width, h = opts->height;
    if (opts->n_images != 0 && opts->n_images != 2) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS,
                    "synth: edits come in pairs (original and edited), not %d images",
                    opts->n_images);
        return FALSE;
    }
    GArray *before;
    EditsDrawing *d = new_scene(s, rng, opts, &before);
    gboolean outdoor = d->setting == GARDEN;
    int theme = theme_of(&g_array_index(before, ClSynthObject, 0));

    GArray *after = g_array_copy(before);
    ClSynthChange c = { CL_SYNTH_CHANGE_REPLACE, 1, -1, -1 };
    gboolean done = FALSE;
    for (int attempt = 0; !done && attempt < 50; attempt++) {
        EditType t = (EditType)cl_synth_rng_int(rng, 0, N_EDITS - 1);
        int i = before->len > 1 ? cl_synth_rng_int(rng, 1, (int)before->len - 1) : -1;
        const ClSynthObject *ob = i > 0 ? &g_array_index(before, ClSynthObject, i) : NULL;
        ClSynthObject o;
        switch (t) {
        case E_ADD:
            if (place_new(&o, rng, before, d, w, h, d->setting)) {
                g_array_append_val(after, o);
                c = (ClSynthChange){ CL_SYNTH_CHANGE_ADD, 1, -1, (int)after->len - 1 };
                done = TRUE;
            }
            break;
        case E_REMOVE:
            if (ob) {
                g_array_remove_index(after, i);
                c = (ClSynthChange){ CL_SYNTH_CHANGE_REMOVE, 1, i, -1 };
                done = TRUE;
            }
            break;
        case E_REPLACE:
            if (!ob)
                break;
            for (int tries = 0; !done && tries < 20; tries++) {
                o = *ob;
                Kind k = (Kind)cl_synth_rng_int(rng, 0, N_KINDS - 1);
                o.colour = cl_synth_rng_int(rng, 0, CL_SYNTH_N_COLOURS - 1);
                /* the same place: a standing thing for a standing one */
                if (k == kind_of(ob) || HANGS(k) != HANGS(kind_of(ob)) ||
                    look_used(before, k, o.colour, -1))
                    continue;
                set_kind(&o, k);
                object_box(&o, unit(&o, d->horizon, h, d->scale));
                if (in_frame(&o, w, h) && apart_from(&o, before, i)) {
                    g_array_index(after, ClSynthObject, i) = o;
                    c = (ClSynthChange){ CL_SYNTH_CHANGE_REPLACE, 1, i, i };
                    done = TRUE;
                }
            }
            break;
        case E_COLOUR:
            if (!ob)
                break;
            o = *ob;
            o.colour = cl_synth_rng_int(rng, 0, CL_SYNTH_N_COLOURS - 1);
            if (o.colour != ob->colour && !look_used(before, kind_of(ob), o.colour, -1)) {
                g_array_index(after, ClSynthObject, i) = o;
                c = (ClSynthChange){ CL_SYNTH_CHANGE_REPLACE, 1, i, i };
                done = TRUE;
            }
            break;
        default: { /* background */
            int nt = outdoor ? cl_synth_rng_int(rng, 8, 13) : cl_synth_rng_int(rng, 0, 7);
            if (nt == theme)
                break;
            ClSynthObject *nb = &g_array_index(after, ClSynthObject, 0);
            nb->colour = nt % 8, nb->material = nt / 8;
            c = (ClSynthChange){ CL_SYNTH_CHANGE_REPLACE, 1, 0, 0 };
            done = TRUE;
            break;
        }
        }
    }
    if (!done) {
        g_array_unref(before);
        g_array_unref(after);
        g_free(d);
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS,
                    "synth: no room for an edit in the %d × %d scene; use a larger image", w, h);
        return FALSE;
    }
    s->n_images = 2;
    s->objects = g_new0(GArray *, 2);
    s->objects[0] = before;
    s->objects[1] = after;
    g_array_append_val(s->changes, c);
    s->quantity = CL_SYNTH_QUANTITY_NONE;

    /* the instruction, ImgEdit style: capitalised, no full stop */
    const ClSynthObject *ob =
        c.before >= 0 ? &g_array_index(before, ClSynthObject, c.before) : NULL;
    const ClSynthObject *oa = c.after >= 0 ? &g_array_index(after, ClSynthObject, c.after) : NULL;
    char *answer;
    if (c.before == 0)
        answer = g_strdup_printf("Change the background to %s", themes[theme_of(oa)]);
    else if (c.type == CL_SYNTH_CHANGE_ADD)
        answer = g_strdup_printf("Add %s %s %s in the %s area",
                                 cl_synth_a_or_an(cl_synth_colour_name(oa->colour)),
                                 cl_synth_colour_name(oa->colour), kind_names[kind_of(oa)],
                                 area_names[area_of(oa, w, h)]);
    else if (c.type == CL_SYNTH_CHANGE_REMOVE)
        answer = g_strdup_printf("Remove the %s %s positioned in the %s area",
                                 cl_synth_colour_name(ob->colour), kind_names[kind_of(ob)],
                                 area_names[area_of(ob, w, h)]);
    else if (kind_of(ob) == kind_of(oa))
        answer = g_strdup_printf("Turn the %s %s positioned in the %s area into %s",
                                 cl_synth_colour_name(ob->colour), kind_names[kind_of(ob)],
                                 area_names[area_of(ob, w, h)], cl_synth_colour_name(oa->colour));
    else
        answer = g_strdup_printf("Replace the %s %s positioned in the %s area with %s %s %s",
                                 cl_synth_colour_name(ob->colour), kind_names[kind_of(ob)],
                                 area_names[area_of(ob, w, h)],
                                 cl_synth_a_or_an(cl_synth_colour_name(oa->colour)),
                                 cl_synth_colour_name(oa->colour), kind_names[kind_of(oa)]);
    s->conversation = cl_chat_describe_conversation(CL_CHAT_DOMAIN_EDITS, 2, NULL, error);
    g_assert(s->conversation); /* a fixed, valid request */
    cl_chat_conversation_add(s->conversation, CL_CHAT_ASSISTANT, answer);
    g_free(answer);

    drawing->draw = draw;
    drawing->data = d;
    drawing->free_data = g_free;
    return TRUE;
}
