/* aerial.c - the `aerial` task (the SVE paper's remote sensing, appendix B.6, LEVIR-CC): top-down
 * tiles of fields, roads, roofs with shadows, tree clumps and water at about 0.5 m per pixel;
 * between the before and after image buildings are constructed or demolished, roads built or
 * trees cut down, and about half of the pairs show no change but acquisition differences only
 * (season tint, haze, sun angle, misregistration, noise). Captions in LEVIR-CC's lower-case,
 * space-before-the-full-stop style. */
#include "synth/synth-private.h"
#include "jsonnum.h"

#include <math.h>
#include <string.h>

#define FRAME_MARGIN 3.0 /* changed features stay this far inside the frame (the shift is <= 2) */
#define GAP 3.0          /* between two features' boxes */
#define MAX_FEATURES 56  /* grounding bitmasks hold 64 objects per image */

/* What a feature is. It travels in ClSynthObject.colour (a Kind, not a colour) so that the
 * structured answer can be rebuilt from the sample alone; shape and material are 0 and size
 * says small/large. */
typedef enum { K_BUILDING, K_ROAD, K_TREES, K_WATER, N_KINDS } Kind;
static const char *const kind_names[N_KINDS] = { "building", "road", "trees", "water" };

const char *cl_synth_aerial_kind_name(int index)
{
    return index >= 0 && index < N_KINDS ? kind_names[index] : NULL;
}

int cl_synth_aerial_n_kinds(void)
{
    return N_KINDS;
}

typedef enum { CONSTRUCTION, DEMOLITION, ROAD, VEGETATION_CLEARED, N_TYPES } ChangeKind;
static const char *const type_names[N_TYPES] = { "construction", "demolition", "road",
                                                 "vegetation_cleared" };

/* the coarse 3 × 3 location of a box centre, as LEVIR-CC says it and as the JSON names it */
static const char *const loc_phrases[9] = {
    "at the top left",    "at the top",    "at the top right",
    "on the left",        "in the centre", "on the right",
    "at the bottom left", "at the bottom", "at the bottom right",
};
static const char *const loc_names[9] = { "top left",    "top",    "top right",
                                          "left",        "centre", "right",
                                          "bottom left", "bottom", "bottom right" };

/* Two LEVIR-CC-like phrasings per change, %s the location. None contains " and ", which joins
 * the clauses of one caption. */
static const char *const clause_t[N_TYPES][2] = {
    { "a building is constructed %s", "a new house is built %s" },
    { "the building %s is demolished", "a house %s is removed" },
    { "a road is built %s", "a new road is constructed %s" },
    { "the trees %s are cut down", "some trees %s are removed" },
};
#define NO_CHANGE "there is no difference ."

/* ---- features -------------------------------------------------------------------------------- */

typedef struct {
    Kind kind;
    double x0, y0, x1, y1;   /* footprint: roof, road strip, crowns' extent, pond's extent */
    double height;           /* buildings and trees: what casts the shadow, scene pixels */
    int roof;                /* buildings: roof colour */
    gboolean gable, ridge_x; /* buildings: pitched roof, ridge along x */
    gboolean vertical;       /* roads */
    guint64 seed;            /* detail: crowns, pond outline, rubble */
    double box[4];
} Feature;

typedef struct {
    GArray *features; /* Feature, all that appear in any image */
    int n_slots;      /* images (2; a series: more) */
    GArray **shown;   /* int: the features image k shows, in its object order */
    GArray **scars;   /* int: features removed before image k, drawn as bare ground */
    guint64 terrain_seed;
    guint64 nuisance_seed;
    double scale;
    gboolean nuisance;
    double grass[3];
    int n_parcels;
} AerialDrawing;

static void aerial_drawing_free(gpointer p)
{
    AerialDrawing *d = p;
    g_array_unref(d->features);
    for (int k = 0; k < d->n_slots; k++) {
        g_array_unref(d->shown[k]);
        g_array_unref(d->scars[k]);
    }
    g_free(d->shown);
    g_free(d->scars);
    g_free(d);
}

/* The longest shadow any sun angle of the nuisances gives a feature of this height. */
static double max_shadow(double height)
{
    return 1.3 * height;
}

static void feature_box(Feature *f)
{
    double m = 1.5 + (f->kind == K_BUILDING || f->kind == K_TREES ? max_shadow(f->height) : 0);
    f->box[0] = f->x0 - m, f->box[1] = f->y0 - m;
    f->box[2] = f->x1 + m, f->box[3] = f->y1 + m;
}

static gboolean apart(const double a[4], const double b[4])
{
    return a[2] + GAP <= b[0] || b[2] + GAP <= a[0] || a[3] + GAP <= b[1] || b[3] + GAP <= a[1];
}

static gboolean apart_from_all(const Feature *f, const GArray *features)
{
    for (guint i = 0; i < features->len; i++)
        if (!apart(f->box, g_array_index(features, Feature, i).box))
            return FALSE;
    return TRUE;
}

static gboolean in_frame(const double box[4], int w, int h)
{
    return box[0] >= FRAME_MARGIN && box[1] >= FRAME_MARGIN && box[2] <= w - FRAME_MARGIN &&
           box[3] <= h - FRAME_MARGIN;
}

static int location_of(const double box[4], int w, int h)
{
    double cx = (box[0] + box[2]) / 2, cy = (box[1] + box[3]) / 2;
    int gx = CLAMP((int)floor(3 * cx / w), 0, 2), gy = CLAMP((int)floor(3 * cy / h), 0, 2);
    return gy * 3 + gx;
}

static void make_building(Feature *f, ClSynthRng *rng, double cx, double cy, double u)
{
    double bw = cl_synth_rng_range(rng, 9, 20) * u, bh = cl_synth_rng_range(rng, 9, 16) * u;
    if (cl_synth_rng_int(rng, 0, 1)) { /* rotated a quarter turn */
        double t = bw;
        bw = bh, bh = t;
    }
    *f = (Feature){ .kind = K_BUILDING };
    f->x0 = cx - bw / 2, f->x1 = cx + bw / 2, f->y0 = cy - bh / 2, f->y1 = cy + bh / 2;
    f->height = cl_synth_rng_range(rng, 2.5, 5.0) * u;
    f->roof = cl_synth_rng_int(rng, 0, 5);
    f->gable = cl_synth_rng_int(rng, 0, 2) != 0;
    f->ridge_x = bw >= bh;
    f->seed = cl_synth_rng_next(rng);
    feature_box(f);
}

static void make_trees(Feature *f, ClSynthRng *rng, double cx, double cy, double u)
{
    double rw = cl_synth_rng_range(rng, 8, 20) * u, rh = cl_synth_rng_range(rng, 8, 18) * u;
    *f = (Feature){ .kind = K_TREES };
    f->x0 = cx - rw / 2, f->x1 = cx + rw / 2, f->y0 = cy - rh / 2, f->y1 = cy + rh / 2;
    f->height = cl_synth_rng_range(rng, 2.0, 3.5) * u;
    f->seed = cl_synth_rng_next(rng);
    feature_box(f);
}

/* a road segment (new roads) or a strip across the tile (existing ones, length 0) */
static void make_road(Feature *f, ClSynthRng *rng, double cx, double cy, double len,
                      gboolean vertical, double u)
{
    double half_w = cl_synth_rng_range(rng, 3.5, 5.0) * u;
    *f = (Feature){ .kind = K_ROAD, .vertical = vertical };
    if (vertical)
        f->x0 = cx - half_w, f->x1 = cx + half_w, f->y0 = cy - len / 2, f->y1 = cy + len / 2;
    else
        f->y0 = cy - half_w, f->y1 = cy + half_w, f->x0 = cx - len / 2, f->x1 = cx + len / 2;
    f->seed = cl_synth_rng_next(rng);
    feature_box(f);
}

/* ---- drawing --------------------------------------------------------------------------------- */

static const double roofs[6][3] = {
    { 0.70, 0.33, 0.24 }, /* terracotta */
    { 0.38, 0.38, 0.40 }, /* dark slate */
    { 0.72, 0.72, 0.70 }, /* light concrete */
    { 0.50, 0.36, 0.26 }, /* brown */
    { 0.42, 0.50, 0.58 }, /* blue metal */
    { 0.88, 0.87, 0.84 }, /* white membrane */
};

typedef struct {
    double dx, dy; /* shadow direction times length per unit height */
    double tint[3];
    double haze;
    double rotate; /* radians, about the centre */
} Acquisition;

static void acquisition(const AerialDrawing *d, int image, Acquisition *a)
{
    /* the clean acquisition: sun from the upper left, no tint, no haze */
    double angle = G_PI / 4, len = 1.0;
    a->tint[0] = a->tint[1] = a->tint[2] = 1.0;
    a->haze = 0;
    a->rotate = 0;
    if (d->nuisance) {
        ClSynthRng r;
        cl_synth_rng_init(&r, cl_synth_stream_seed(d->nuisance_seed, (guint64)image));
        angle += cl_synth_rng_range(&r, -0.5, 0.5);
        len = cl_synth_rng_range(&r, 0.75, 1.3);
        /* season: spring greener, autumn yellower, winter bluer */
        int season = cl_synth_rng_int(&r, 0, 3);
        static const double seasons[4][3] = {
            { 0.93, 1.00, 0.92 }, { 1.00, 1.00, 1.00 }, { 1.00, 0.94, 0.82 }, { 0.92, 0.95, 1.00 }
        };
        double b = cl_synth_rng_range(&r, 0.9, 1.0);
        for (int c = 0; c < 3; c++)
            a->tint[c] = seasons[season][c] * b;
        a->haze = cl_synth_rng_double(&r) < 0.5 ? cl_synth_rng_range(&r, 0.04, 0.18) : 0;
        a->rotate = cl_synth_rng_range(&r, -0.004, 0.004);
    }
    a->dx = cos(angle) * len;
    a->dy = sin(angle) * len;
}

static void rect(cairo_t *cr, double x0, double y0, double x1, double y1)
{
    cairo_rectangle(cr, x0, y0, x1 - x0, y1 - y0);
}

/* grass, blotches, crop parcels: the same in every image, redrawn from the terrain seed */
static void draw_terrain(cairo_t *cr, const AerialDrawing *d, int w, int h)
{
    ClSynthRng r;
    cl_synth_rng_init(&r, d->terrain_seed);
    const double *g = d->grass;
    cairo_set_source_rgb(cr, g[0], g[1], g[2]);
    rect(cr, -16, -16, w + 16, h + 16);
    cairo_fill(cr);
    static const double crops[4][3] = {
        { 0.66, 0.60, 0.38 }, { 0.50, 0.58, 0.30 }, { 0.55, 0.45, 0.33 }, { 0.40, 0.52, 0.28 }
    };
    for (int p = 0; p < d->n_parcels; p++) {
        double pw = cl_synth_rng_range(&r, 0.3, 0.6) * w, ph = cl_synth_rng_range(&r, 0.3, 0.6) * h;
        double px = cl_synth_rng_range(&r, -0.2 * w, w - 0.5 * pw);
        double py = cl_synth_rng_range(&r, -0.2 * h, h - 0.5 * ph);
        const double *c = crops[cl_synth_rng_int(&r, 0, 3)];
        cairo_set_source_rgb(cr, c[0], c[1], c[2]);
        cairo_rectangle(cr, px, py, pw, ph);
        cairo_fill(cr);
        /* furrows */
        gboolean vert = cl_synth_rng_int(&r, 0, 1);
        double step = cl_synth_rng_range(&r, 2.5, 4.5) * d->scale;
        cairo_set_source_rgba(cr, 0, 0, 0, 0.08);
        cairo_set_line_width(cr, 0.8 * d->scale);
        for (double t = step / 2; t < (vert ? pw : ph); t += step) {
            if (vert) {
                cairo_move_to(cr, px + t, py);
                cairo_line_to(cr, px + t, py + ph);
            } else {
                cairo_move_to(cr, px, py + t);
                cairo_line_to(cr, px + pw, py + t);
            }
        }
        cairo_stroke(cr);
    }
    /* mottling: soil and darker grass */
    int n = (int)(w * h / 60.0);
    for (int i = 0; i < n; i++) {
        double x = cl_synth_rng_range(&r, -4, w + 4), y = cl_synth_rng_range(&r, -4, h + 4);
        double rr = cl_synth_rng_range(&r, 0.6, 2.6) * d->scale;
        double k = cl_synth_rng_range(&r, -0.08, 0.08);
        cairo_set_source_rgba(cr, k > 0 ? 0.75 : 0.1, k > 0 ? 0.68 : 0.2, k > 0 ? 0.5 : 0.08,
                              fabs(k) * 2);
        cairo_arc(cr, x, y, rr, 0, 2 * G_PI);
        cairo_fill(cr);
    }
}

static void draw_water(cairo_t *cr, const Feature *f)
{
    ClSynthRng r;
    cl_synth_rng_init(&r, f->seed);
    double cx = (f->x0 + f->x1) / 2, cy = (f->y0 + f->y1) / 2;
    double rx = (f->x1 - f->x0) / 2, ry = (f->y1 - f->y0) / 2;
    double a1 = cl_synth_rng_range(&r, 0, 2 * G_PI), a2 = cl_synth_rng_range(&r, 0, 2 * G_PI);
    for (int i = 0; i <= 48; i++) {
        double t = 2 * G_PI * i / 48;
        /* 0.85 + 0.15 at most: the outline stays inside the extent */
        double k = 0.85 + 0.09 * sin(3 * t + a1) + 0.06 * sin(5 * t + a2);
        double x = cx + rx * k * cos(t), y = cy + ry * k * sin(t);
        if (i == 0)
            cairo_move_to(cr, x, y);
        else
            cairo_line_to(cr, x, y);
    }
    cairo_close_path(cr);
    cairo_pattern_t *p = cairo_pattern_create_radial(cx, cy, 0, cx, cy, MAX(rx, ry));
    cairo_pattern_add_color_stop_rgb(p, 0, 0.12, 0.26, 0.34);
    cairo_pattern_add_color_stop_rgb(p, 1, 0.22, 0.38, 0.40);
    cairo_set_source(cr, p);
    cairo_fill_preserve(cr);
    cairo_pattern_destroy(p);
    cairo_set_source_rgba(cr, 0.35, 0.42, 0.30, 0.8);
    cairo_set_line_width(cr, 1.0);
    cairo_stroke(cr);
}

static void draw_road(cairo_t *cr, const Feature *f, double u)
{
    cairo_set_source_rgb(cr, 0.62, 0.61, 0.58); /* kerb */
    rect(cr, f->x0, f->y0, f->x1, f->y1);
    cairo_fill(cr);
    double in = 0.9 * u;
    cairo_set_source_rgb(cr, 0.36, 0.36, 0.37); /* asphalt */
    if (f->vertical)
        rect(cr, f->x0 + in, f->y0, f->x1 - in, f->y1);
    else
        rect(cr, f->x0, f->y0 + in, f->x1, f->y1 - in);
    cairo_fill(cr);
    /* dashed centre line */
    cairo_set_source_rgb(cr, 0.85, 0.84, 0.78);
    double dash = 4 * u, len = f->vertical ? f->y1 - f->y0 : f->x1 - f->x0;
    for (double t = dash / 2; t + dash <= len; t += 2 * dash) {
        if (f->vertical)
            rect(cr, (f->x0 + f->x1) / 2 - 0.4 * u, f->y0 + t, (f->x0 + f->x1) / 2 + 0.4 * u,
                 f->y0 + t + dash);
        else
            rect(cr, f->x0 + t, (f->y0 + f->y1) / 2 - 0.4 * u, f->x0 + t + dash,
                 (f->y0 + f->y1) / 2 + 0.4 * u);
    }
    cairo_fill(cr);
}

static void draw_building(cairo_t *cr, const Feature *f, const Acquisition *a)
{
    /* shadow: the footprint swept away from the sun */
    double sx = a->dx * f->height, sy = a->dy * f->height;
    cairo_set_source_rgba(cr, 0.05, 0.06, 0.08, 0.55);
    cairo_move_to(cr, f->x0, f->y0);
    cairo_line_to(cr, f->x1, f->y0);
    cairo_line_to(cr, f->x1 + sx, f->y0 + sy);
    cairo_line_to(cr, f->x1 + sx, f->y1 + sy);
    cairo_line_to(cr, f->x0 + sx, f->y1 + sy);
    cairo_line_to(cr, f->x0, f->y1);
    cairo_close_path(cr);
    cairo_fill(cr);
    const double *c = roofs[f->roof];
    if (f->gable) {
        /* two slopes: the sunlit one brighter, a ridge between */
        double mx = (f->x0 + f->x1) / 2, my = (f->y0 + f->y1) / 2;
        cairo_set_source_rgb(cr, MIN(1, c[0] * 1.15), MIN(1, c[1] * 1.15), MIN(1, c[2] * 1.15));
        if (f->ridge_x)
            rect(cr, f->x0, f->y0, f->x1, my);
        else
            rect(cr, f->x0, f->y0, mx, f->y1);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, c[0] * 0.72, c[1] * 0.72, c[2] * 0.72);
        if (f->ridge_x)
            rect(cr, f->x0, my, f->x1, f->y1);
        else
            rect(cr, mx, f->y0, f->x1, f->y1);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, c[0] * 0.55, c[1] * 0.55, c[2] * 0.55);
        cairo_set_line_width(cr, 0.8);
        if (f->ridge_x) {
            cairo_move_to(cr, f->x0, my);
            cairo_line_to(cr, f->x1, my);
        } else {
            cairo_move_to(cr, mx, f->y0);
            cairo_line_to(cr, mx, f->y1);
        }
        cairo_stroke(cr);
    } else {
        /* flat roof: parapet and a roof unit */
        cairo_set_source_rgb(cr, c[0] * 0.8, c[1] * 0.8, c[2] * 0.8);
        rect(cr, f->x0, f->y0, f->x1, f->y1);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, c[0], c[1], c[2]);
        rect(cr, f->x0 + 1, f->y0 + 1, f->x1 - 1, f->y1 - 1);
        cairo_fill(cr);
        ClSynthRng r;
        cl_synth_rng_init(&r, f->seed);
        double ux = cl_synth_rng_range(&r, f->x0 + 2, MAX(f->x0 + 2, f->x1 - 5));
        double uy = cl_synth_rng_range(&r, f->y0 + 2, MAX(f->y0 + 2, f->y1 - 5));
        cairo_set_source_rgb(cr, 0.55, 0.56, 0.58);
        rect(cr, ux, uy, MIN(ux + 3, f->x1 - 1), MIN(uy + 3, f->y1 - 1));
        cairo_fill(cr);
    }
}

/* tree crowns: circles inside the extent, each with its own shadow */
static void draw_trees(cairo_t *cr, const Feature *f, const Acquisition *a, double u)
{
    ClSynthRng r;
    cl_synth_rng_init(&r, f->seed);
    double cx[12], cy[12], cr_[12];
    int n = cl_synth_rng_int(&r, 3, 12);
    for (int i = 0; i < n; i++) {
        double rad =
            MIN(cl_synth_rng_range(&r, 2.2, 4.5) * u, MIN(f->x1 - f->x0, f->y1 - f->y0) / 2);
        cr_[i] = rad;
        cx[i] = cl_synth_rng_range(&r, f->x0 + rad, f->x1 - rad);
        cy[i] = cl_synth_rng_range(&r, f->y0 + rad, f->y1 - rad);
    }
    cairo_set_source_rgba(cr, 0.03, 0.06, 0.03, 0.45);
    for (int i = 0; i < n; i++) {
        cairo_new_sub_path(cr);
        cairo_arc(cr, cx[i] + a->dx * f->height, cy[i] + a->dy * f->height, cr_[i], 0, 2 * G_PI);
    }
    cairo_fill(cr);
    for (int i = 0; i < n; i++) {
        double g = cl_synth_rng_range(&r, 0.85, 1.15);
        cairo_pattern_t *p = cairo_pattern_create_radial(
            cx[i] - a->dx * cr_[i] * 0.4, cy[i] - a->dy * cr_[i] * 0.4, 0, cx[i], cy[i], cr_[i]);
        cairo_pattern_add_color_stop_rgb(p, 0, 0.25 * g, 0.45 * g, 0.18 * g);
        cairo_pattern_add_color_stop_rgb(p, 1, 0.08 * g, 0.22 * g, 0.08 * g);
        cairo_arc(cr, cx[i], cy[i], cr_[i], 0, 2 * G_PI);
        cairo_set_source(cr, p);
        cairo_fill(cr);
        cairo_pattern_destroy(p);
    }
}

/* what is left where a feature was removed: bare soil, rubble or stumps, inside its extent */
static void draw_scar(cairo_t *cr, const Feature *f, double u)
{
    ClSynthRng r;
    cl_synth_rng_init(&r, f->seed ^ G_GUINT64_CONSTANT(0x5ca7));
    cairo_set_source_rgb(cr, 0.60, 0.52, 0.40);
    if (f->kind == K_BUILDING) {
        rect(cr, f->x0, f->y0, f->x1, f->y1);
        cairo_fill(cr);
    } else {
        double cx = (f->x0 + f->x1) / 2, cy = (f->y0 + f->y1) / 2;
        cairo_save(cr);
        cairo_translate(cr, cx, cy);
        cairo_scale(cr, (f->x1 - f->x0) / 2, (f->y1 - f->y0) / 2);
        cairo_arc(cr, 0, 0, 1, 0, 2 * G_PI);
        cairo_restore(cr);
        cairo_fill(cr);
    }
    int n = (int)((f->x1 - f->x0) * (f->y1 - f->y0) / (6 * u * u)) + 2;
    for (int i = 0; i < n; i++) {
        double k = cl_synth_rng_range(&r, 0.6, 1.1);
        cairo_set_source_rgb(cr, 0.55 * k, 0.48 * k, 0.38 * k);
        double x = cl_synth_rng_range(&r, f->x0 + 1, f->x1 - 1);
        double y = cl_synth_rng_range(&r, f->y0 + 1, f->y1 - 1);
        cairo_arc(cr, x, y, 0.6 * u, 0, 2 * G_PI);
        cairo_fill(cr);
    }
}

static void draw(cairo_t *cr, const ClSynthSample *s, int image, gpointer data)
{
    const AerialDrawing *d = data;
    int w = s->images[image].width, h = s->images[image].height;
    Acquisition a;
    acquisition(d, image, &a);
    if (a.rotate != 0) { /* slight misregistration beyond the renderer's shift */
        cairo_translate(cr, w / 2.0, h / 2.0);
        cairo_rotate(cr, a.rotate);
        cairo_translate(cr, -w / 2.0, -h / 2.0);
    }
    draw_terrain(cr, d, w, h);
    const GArray *shown = d->shown[image], *scars = d->scars[image];
    /* flat things first, then what stands up (and casts shadows) */
    for (int pass = 0; pass < 4; pass++) {
        if (pass == 2)
            for (guint i = 0; i < scars->len; i++)
                draw_scar(cr, &g_array_index(d->features, Feature, g_array_index(scars, int, i)),
                          d->scale);
        for (guint i = 0; i < shown->len; i++) {
            const Feature *f = &g_array_index(d->features, Feature, g_array_index(shown, int, i));
            if (pass == 0 && f->kind == K_WATER)
                draw_water(cr, f);
            else if (pass == 1 && f->kind == K_ROAD)
                draw_road(cr, f, d->scale);
            else if (pass == 2 && f->kind == K_BUILDING)
                draw_building(cr, f, &a);
            else if (pass == 3 && f->kind == K_TREES)
                draw_trees(cr, f, &a, d->scale);
        }
    }
    /* the acquisition: season and sun tint, then haze */
    if (a.tint[0] != 1 || a.tint[1] != 1 || a.tint[2] != 1) {
        cairo_set_operator(cr, CAIRO_OPERATOR_MULTIPLY);
        cairo_set_source_rgb(cr, a.tint[0], a.tint[1], a.tint[2]);
        rect(cr, -16, -16, w + 16, h + 16);
        cairo_fill(cr);
        cairo_set_operator(cr, CAIRO_OPERATOR_OVER);
    }
    if (a.haze > 0) {
        cairo_set_source_rgba(cr, 0.80, 0.84, 0.88, a.haze);
        rect(cr, -16, -16, w + 16, h + 16);
        cairo_fill(cr);
    }
}

/* ---- the scene ------------------------------------------------------------------------------- */

static void add_feature(AerialDrawing *d, const Feature *f, int image_mask)
{
    int idx = (int)d->features->len;
    g_array_append_val(d->features, *f);
    for (int k = 0; k < 2; k++)
        if (image_mask & (1 << k))
            g_array_append_val(d->shown[k], idx);
}

static void build_scene(AerialDrawing *d, ClSynthRng *rng, int w, int h)
{
    double u = d->scale, area = (double)w * h / (160.0 * 160.0);
    /* roads across the tile */
    int n_roads = cl_synth_rng_int(rng, 0, 9);
    n_roads = n_roads < 2 ? 0 : n_roads < 7 ? 1 : 2;
    for (int i = 0; i < n_roads; i++) {
        gboolean vertical = cl_synth_rng_int(rng, 0, 1);
        double at = cl_synth_rng_range(rng, 0.2, 0.8) * (vertical ? w : h);
        Feature f;
        make_road(&f, rng, vertical ? at : w / 2.0, vertical ? h / 2.0 : at,
                  (vertical ? h : w) + 40, vertical, u);
        if (apart_from_all(&f, d->features))
            add_feature(d, &f, 1);
    }
    if (cl_synth_rng_double(rng) < 0.3) {
        Feature f = { .kind = K_WATER, .seed = cl_synth_rng_next(rng) };
        double rx = cl_synth_rng_range(rng, 0.08, 0.16) * w,
               ry = cl_synth_rng_range(rng, 0.08, 0.16) * h;
        double cx = cl_synth_rng_range(rng, 0, w), cy = cl_synth_rng_range(rng, 0, h);
        f.x0 = cx - rx, f.x1 = cx + rx, f.y0 = cy - ry, f.y1 = cy + ry;
        feature_box(&f);
        if (apart_from_all(&f, d->features))
            add_feature(d, &f, 1);
    }
    /* houses, many along the roads, and tree clumps; space is left for new ones */
    int want_b = cl_synth_rng_int(rng, (int)(2 * area + 0.5), (int)(7 * area + 0.5));
    int want_t = cl_synth_rng_int(rng, (int)(2 * area + 0.5), (int)(5 * area + 0.5));
    int n_b = 0, n_t = 0;
    for (int t = 0;
         t < 300 && (n_b < want_b || n_t < want_t) && d->features->len < MAX_FEATURES - 8; t++) {
        Feature f;
        gboolean tree = n_b >= want_b || (n_t < want_t && cl_synth_rng_int(rng, 0, 1));
        double cx = cl_synth_rng_range(rng, -0.05 * w, 1.05 * w);
        double cy = cl_synth_rng_range(rng, -0.05 * h, 1.05 * h);
        if (!tree && n_roads > 0 && cl_synth_rng_double(rng) < 0.6) {
            /* beside the first road */
            const Feature *r = &g_array_index(d->features, Feature, 0);
            double side = cl_synth_rng_int(rng, 0, 1) ? 1 : -1,
                   off = cl_synth_rng_range(rng, 13, 18) * u;
            if (r->vertical)
                cx = (r->x0 + r->x1) / 2 + side * off;
            else
                cy = (r->y0 + r->y1) / 2 + side * off;
        }
        if (tree)
            make_trees(&f, rng, cx, cy, u);
        else
            make_building(&f, rng, cx, cy, u);
        if (!apart_from_all(&f, d->features))
            continue;
        add_feature(d, &f, 1);
        n_t += tree;
        n_b += !tree;
    }
}

/* One change into the scene, at a location no change of its type has yet; FALSE if no room. */
static gboolean place_change(AerialDrawing *d, ClSynthRng *rng, ChangeKind type, int w, int h,
                             guint16 *used, GArray *changes)
{
    double u = d->scale;
    if (type == DEMOLITION || type == VEGETATION_CLEARED) {
        Kind want = type == DEMOLITION ? K_BUILDING : K_TREES;
        int cand[MAX_FEATURES], n = 0;
        const GArray *before = d->shown[0];
        for (guint i = 0; i < before->len; i++) {
            int fi = g_array_index(before, int, i);
            const Feature *f = &g_array_index(d->features, Feature, fi);
            if (f->kind != want || !in_frame(f->box, w, h) ||
                (used[location_of(f->box, w, h)] & (1u << type)))
                continue;
            gboolean gone = FALSE;
            for (guint j = 0; j < d->scars[1]->len; j++)
                gone |= g_array_index(d->scars[1], int, j) == fi;
            if (!gone)
                cand[n++] = (int)i;
        }
        if (n == 0)
            return FALSE;
        int i = cand[cl_synth_rng_int(rng, 0, n - 1)];
        int fi = g_array_index(before, int, i);
        g_array_append_val(d->scars[1], fi);
        used[location_of(g_array_index(d->features, Feature, fi).box, w, h)] |= 1u << type;
        ClSynthChange c = { CL_SYNTH_CHANGE_REMOVE, 1, i, -1 };
        g_array_append_val(changes, c);
        return TRUE;
    }
    for (int t = 0; t < 60; t++) {
        int cell = cl_synth_rng_int(rng, 0, 8);
        if (used[cell] & (1u << type))
            continue;
        /* inside the cell, away from its borders, so the location reads one way */
        double cx = (cell % 3 + cl_synth_rng_range(rng, 0.2, 0.8)) * w / 3.0;
        double cy = (cell / 3 + cl_synth_rng_range(rng, 0.2, 0.8)) * h / 3.0;
        Feature f;
        if (type == CONSTRUCTION)
            make_building(&f, rng, cx, cy, u);
        else {
            gboolean vertical = cl_synth_rng_int(rng, 0, 1);
            make_road(&f, rng, cx, cy, cl_synth_rng_range(rng, 0.25, 0.4) * (vertical ? h : w),
                      vertical, u);
        }
        if (!in_frame(f.box, w, h) || location_of(f.box, w, h) != cell ||
            !apart_from_all(&f, d->features))
            continue;
        used[cell] |= 1u << type;
        int idx = (int)d->features->len;
        g_array_append_val(d->features, f);
        /* its index in the after image's object list comes when the list is final */
        ClSynthChange c = { CL_SYNTH_CHANGE_ADD, 1, -1, idx };
        g_array_append_val(changes, c);
        return TRUE;
    }
    return FALSE;
}

static ClSynthObject to_object(const Feature *f)
{
    ClSynthObject o = { 0 };
    o.shape = CL_SYNTH_SHAPE_CUBE;
    o.colour = f->kind;
    o.size = (f->x1 - f->x0) * (f->y1 - f->y0) > 200;
    o.material = 0;
    o.x = (f->x0 + f->x1) / 2;
    o.y = (f->y0 + f->y1) / 2;
    memcpy(o.box, f->box, sizeof o.box);
    return o;
}

static ChangeKind change_kind(const ClSynthSample *s, const ClSynthChange *c)
{
    if (c->type == CL_SYNTH_CHANGE_ADD)
        return g_array_index(s->objects[1], ClSynthObject, c->after).colour == K_ROAD
                   ? ROAD
                   : CONSTRUCTION;
    return g_array_index(s->objects[0], ClSynthObject, c->before).colour == K_TREES
               ? VEGETATION_CLEARED
               : DEMOLITION;
}

static const double *change_box(const ClSynthSample *s, const ClSynthChange *c)
{
    return c->type == CL_SYNTH_CHANGE_ADD
               ? g_array_index(s->objects[1], ClSynthObject, c->after).box
               : g_array_index(s->objects[0], ClSynthObject, c->before).box;
}

#define GSD_AT_160 0.5 /* metres per pixel at the default 160 px (LEVIR-CC's resolution) */

/* The tile's upper-left corner and pixel size, from the sample alone: the same for both images
 * (the GeoTIFF writer, aerial-geotiff.c, georeferences both so). Whole metres inside zone 33N's
 * valid eastings and Central Europe's northings. Also in the structured answer, which is how two
 * unchanged tiles still differ there. */
void cl_synth_aerial_georef(const ClSynthSample *s, double origin[2], double *gsd)
{
    guint64 st = s->seed ^ G_GUINT64_CONSTANT(0x6e07a7);
    guint64 a = cl_synth_splitmix64(&st), b = cl_synth_splitmix64(&st);
    origin[0] = 300000.0 + (double)(a % 400000);
    origin[1] = 5000000.0 + (double)(b % 900000);
    *gsd = GSD_AT_160 * 160.0 / MIN(s->images[0].width, s->images[0].height);
}

JsonNode *cl_synth_aerial_answer_json(const ClSynthSample *s)
{
    g_return_val_if_fail(s && g_strcmp0(s->task, "aerial") == 0, NULL);
    int w = s->images[0].width, h = s->images[0].height;
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "change");
    json_builder_add_boolean_value(b, s->changes->len > 0);
    json_builder_set_member_name(b, "changes");
    json_builder_begin_array(b);
    for (guint i = 0; i < s->changes->len; i++) {
        const ClSynthChange *c = &g_array_index(s->changes, ClSynthChange, i);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "type");
        json_builder_add_string_value(b, type_names[change_kind(s, c)]);
        json_builder_set_member_name(b, "location");
        json_builder_add_string_value(b, loc_names[location_of(change_box(s, c), w, h)]);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "text");
    json_builder_add_string_value(b, s->answer);
    /* the tile's georeferencing, as its GeoTIFF files carry it */
    double origin[2], gsd;
    cl_synth_aerial_georef(s, origin, &gsd);
    json_builder_set_member_name(b, "tile");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "epsg");
    json_builder_add_int_value(b, 32633);
    json_builder_set_member_name(b, "origin");
    json_builder_begin_array(b);
    json_builder_add_double_value(b, cl_json_double(origin[0]));
    json_builder_add_double_value(b, cl_json_double(origin[1]));
    json_builder_end_array(b);
    json_builder_set_member_name(b, "pixel_size");
    json_builder_add_double_value(b, cl_json_double(gsd));
    json_builder_end_object(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* The terrain and the features of the before image. */
static AerialDrawing *new_tile(const ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                               int n_slots)
{
    AerialDrawing *d = g_new0(AerialDrawing, 1);
    d->features = g_array_new(FALSE, TRUE, sizeof(Feature));
    d->n_slots = MAX(n_slots, 2);
    d->shown = g_new0(GArray *, d->n_slots);
    d->scars = g_new0(GArray *, d->n_slots);
    for (int k = 0; k < d->n_slots; k++) {
        d->shown[k] = g_array_new(FALSE, FALSE, sizeof(int));
        d->scars[k] = g_array_new(FALSE, FALSE, sizeof(int));
    }
    d->scale = cl_synth_scale(s, opts);
    d->nuisance = opts->nuisance;
    d->terrain_seed = cl_synth_rng_next(rng);
    d->nuisance_seed = cl_synth_stream_seed(s->seed ^ G_GUINT64_CONSTANT(0xae71a1), 7);
    double k = cl_synth_rng_range(rng, 0.9, 1.1);
    d->grass[0] = 0.42 * k, d->grass[1] = 0.50 * k, d->grass[2] = 0.30 * k;
    d->n_parcels = cl_synth_rng_int(rng, 0, 3);
    build_scene(d, rng, opts->width, opts->height);
    return d;
}

void cl_synth_aerial_tile(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                          ClSynthDrawing *drawing)
{
    AerialDrawing *d = new_tile(s, rng, opts, 2);
    s->n_images = 1;
    s->objects = g_new0(GArray *, 1);
    s->objects[0] = g_array_new(FALSE, TRUE, sizeof(ClSynthObject));
    for (guint i = 0; i < d->shown[0]->len; i++) {
        ClSynthObject o =
            to_object(&g_array_index(d->features, Feature, g_array_index(d->shown[0], int, i)));
        g_array_append_val(s->objects[0], o);
    }
    drawing->draw = draw;
    drawing->data = d;
    drawing->free_data = aerial_drawing_free;
}

gboolean cl_synth_aerial_generate(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                                  ClSynthDrawing *drawing, GError **error)
{
    int w = opts->width, h = opts->height;
    if (opts->n_images != 0 && opts->n_images != 2) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS,
                    "synth: aerial tiles come in pairs (before and after), not %d images",
                    opts->n_images);
        return FALSE;
    }
    AerialDrawing *d = new_tile(s, rng, opts, 2);

    /* LEVIR-CC: about half the pairs unchanged */
    GArray *changes = g_array_new(FALSE, FALSE, sizeof(ClSynthChange));
    if (opts->changed_only || cl_synth_rng_double(rng) >= 0.5) {
        int lo = opts->min_changes, hi = MAX(lo, MIN(opts->max_changes, 3));
        double v = cl_synth_rng_double(rng);
        int want = lo + (int)(v * v * (hi - lo + 1)); /* mostly one, as in LEVIR-CC */
        guint16 used[9] = { 0 };
        for (int t = 0; (int)changes->len < want && t < 40; t++)
            place_change(d, rng, (ChangeKind)cl_synth_rng_int(rng, 0, N_TYPES - 1), w, h, used,
                         changes);
        if (changes->len == 0) {
            g_array_unref(changes);
            aerial_drawing_free(d);
            g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS,
                        "synth: no room for a change in the %d × %d aerial tile; use a larger "
                        "image",
                        w, h);
            return FALSE;
        }
    }
    /* the after image: the before features less the removed ones, then the new ones */
    for (guint i = 0; i < d->shown[0]->len; i++) {
        int fi = g_array_index(d->shown[0], int, i);
        gboolean gone = FALSE;
        for (guint j = 0; j < d->scars[1]->len; j++)
            gone |= g_array_index(d->scars[1], int, j) == fi;
        if (!gone)
            g_array_append_val(d->shown[1], fi);
    }
    for (guint i = 0; i < changes->len; i++) {
        ClSynthChange *c = &g_array_index(changes, ClSynthChange, i);
        if (c->type == CL_SYNTH_CHANGE_ADD) {
            int fi = c->after;
            c->after = (int)d->shown[1]->len;
            g_array_append_val(d->shown[1], fi);
        }
    }
    s->n_images = 2;
    s->objects = g_new0(GArray *, 2);
    for (int im = 0; im < 2; im++) {
        s->objects[im] = g_array_new(FALSE, TRUE, sizeof(ClSynthObject));
        for (guint i = 0; i < d->shown[im]->len; i++) {
            ClSynthObject o = to_object(
                &g_array_index(d->features, Feature, g_array_index(d->shown[im], int, i)));
            g_array_append_val(s->objects[im], o);
        }
    }
    g_array_unref(s->changes);
    s->changes = changes;
    s->quantity = CL_SYNTH_QUANTITY_NONE;

    GString *answer = g_string_new(NULL);
    for (guint i = 0; i < changes->len; i++) {
        const ClSynthChange *c = &g_array_index(changes, ClSynthChange, i);
        const char *tmpl = clause_t[change_kind(s, c)][cl_synth_rng_int(rng, 0, 1)];
        if (i)
            g_string_append(answer, " and ");
        g_string_append_printf(answer, tmpl, loc_phrases[location_of(change_box(s, c), w, h)]);
    }
    g_string_append(answer, changes->len ? " ." : NO_CHANGE);
    s->conversation = cl_chat_describe_conversation(CL_CHAT_DOMAIN_AERIAL, 2, NULL, error);
    g_assert(s->conversation); /* a fixed, valid request */
    cl_chat_conversation_add(s->conversation, CL_CHAT_ASSISTANT, answer->str);
    g_string_free(answer, TRUE);

    drawing->draw = draw;
    drawing->data = d;
    drawing->free_data = aerial_drawing_free;
    return TRUE;
}

/* ---- aerial-series: the long-sequence task ---------------------------------------------------- */

/* N tiles of one place (acquisition nuisances each), a building constructed at some image k and,
 * in half the samples, trees or a building removed at a later one m. The answer: when the
 * building first appears and what changed since, e.g. "the building at the top right first
 * appears in image 6 ; since then the trees on the left are cut down in image 11 ." */
gboolean cl_synth_aerial_series_generate(ClSynthSample *s, ClSynthRng *rng,
                                         const ClSynthOptions *opts, ClSynthDrawing *drawing,
                                         GError **error)
{
    const int w = opts->width, h = opts->height;
    const int N = opts->n_images ? opts->n_images : cl_synth_rng_int(rng, 8, 16);
    if (N < 3 || N > CL_SYNTH_MAX_SERIES) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS,
                    "synth: an aerial series has 3 to %d tiles, not %d", CL_SYNTH_MAX_SERIES, N);
        return FALSE;
    }
    /* a scene with room for the building (a crowded one is drawn again, from the same stream) */
    AerialDrawing *d = NULL;
    GArray *placed = NULL;
    guint16 used[9] = { 0 };
    for (int scene = 0; scene < 8 && !d; scene++) {
        d = new_tile(s, rng, opts, N);
        placed = g_array_new(FALSE, FALSE, sizeof(ClSynthChange));
        memset(used, 0, sizeof used);
        for (int t = 0; placed->len == 0 && t < 40; t++)
            place_change(d, rng, CONSTRUCTION, w, h, used, placed);
        if (placed->len == 0) {
            g_clear_pointer(&placed, g_array_unref);
            g_clear_pointer(&d, aerial_drawing_free);
        }
    }
    if (!d) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS,
                    "synth: no room for a construction in the %d × %d aerial tile; use a larger "
                    "image",
                    w, h);
        return FALSE;
    }
    gboolean second = cl_synth_rng_double(rng) < 0.5;
    for (int t = 0; second && placed->len < 2 && t < 40; t++)
        place_change(d, rng, cl_synth_rng_int(rng, 0, 1) ? VEGETATION_CLEARED : DEMOLITION, w, h,
                     used, placed);
    const ClSynthChange built = g_array_index(placed, ClSynthChange, 0);
    const int built_f = built.after; /* the feature */
    const gboolean removal = placed->len > 1;
    const int gone_f =
        removal ? g_array_index(d->shown[0], int, g_array_index(placed, ClSynthChange, 1).before)
                : -1;
    const int k = cl_synth_rng_int(rng, 1, removal ? N - 2 : N - 1); /* 0-based */
    const int m = removal ? cl_synth_rng_int(rng, k + 1, N - 1) : N;
    g_array_set_size(d->scars[1], 0); /* place_change's bookkeeping, rebuilt per image below */
    /* image i shows the base features (less the removed one from m on), then the building
     * from k on */
    GArray *base = g_array_copy(d->shown[0]);
    s->changes = s->changes ? s->changes : g_array_new(FALSE, FALSE, sizeof(ClSynthChange));
    g_array_set_size(s->changes, 0);
    s->n_images = N;
    s->objects = g_new0(GArray *, N);
    for (int i = 0; i < N; i++) {
        g_array_set_size(d->shown[i], 0);
        int removed_at = -1;
        for (guint j = 0; j < base->len; j++) {
            int fi = g_array_index(base, int, j);
            if (fi == gone_f && i >= m) {
                removed_at = (int)j;
                continue;
            }
            g_array_append_val(d->shown[i], fi);
        }
        if (i >= m)
            g_array_append_val(d->scars[i], gone_f);
        if (i >= k)
            g_array_append_val(d->shown[i], built_f);
        s->objects[i] = g_array_new(FALSE, TRUE, sizeof(ClSynthObject));
        for (guint j = 0; j < d->shown[i]->len; j++) {
            ClSynthObject o =
                to_object(&g_array_index(d->features, Feature, g_array_index(d->shown[i], int, j)));
            g_array_append_val(s->objects[i], o);
        }
        if (i == k) { /* the building appears: the last object of image k */
            ClSynthChange c = { CL_SYNTH_CHANGE_ADD, k, -1, (int)d->shown[i]->len - 1 };
            g_array_append_val(s->changes, c);
        }
        if (i == m && removed_at >= 0) { /* its index in image m − 1's list */
            ClSynthChange c = { CL_SYNTH_CHANGE_REMOVE, m, removed_at, -1 };
            g_array_append_val(s->changes, c);
        }
    }
    g_array_unref(base);
    s->quantity = CL_SYNTH_QUANTITY_NONE;

    const Feature *b = &g_array_index(d->features, Feature, built_f);
    GString *answer = g_string_new(NULL);
    g_string_append_printf(answer, "the building %s first appears in image %d ;",
                           loc_phrases[location_of(b->box, w, h)], k + 1);
    if (removal) {
        const Feature *g = &g_array_index(d->features, Feature, gone_f);
        g_string_append_printf(answer, " since then %s %s %s in image %d .",
                               g->kind == K_TREES ? "the trees" : "the building",
                               loc_phrases[location_of(g->box, w, h)],
                               g->kind == K_TREES ? "are cut down" : "is demolished", m + 1);
    } else {
        g_string_append(answer, " nothing has changed since .");
    }
    s->conversation = cl_chat_describe_conversation(
        CL_CHAT_DOMAIN_AERIAL, N, "When did the building first appear, and what changed since?",
        error);
    g_array_unref(placed);
    if (!s->conversation) {
        g_string_free(answer, TRUE);
        aerial_drawing_free(d);
        return FALSE;
    }
    cl_chat_conversation_add(s->conversation, CL_CHAT_ASSISTANT, answer->str);
    g_string_free(answer, TRUE);
    drawing->draw = draw;
    drawing->data = d;
    drawing->free_data = aerial_drawing_free;
    return TRUE;
}

/* ---- aerial-log: the series with its acquisition log as text ------------------------------- */

/* aerial-series (4-8 tiles), and a log of when each tile was acquired ("image 3 was acquired on
 * 2019-05-02 ."), read as text with the tiles (the context of cl_chat_with_context); the answer
 * names the dates too: "the building at the top right first appears in image 6 , acquired on
 * 2020-08-11 ; since then … in image 11 , acquired on 2021-02-03 ." The dates are only in the
 * log: a model must read it. */
gboolean cl_synth_aerial_log_generate(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                                      ClSynthDrawing *drawing, GError **error)
{
    /* 4-8 tiles unless asked (the log's dates are long in tokens: 8 lines are ~190) */
    ClSynthOptions o = *opts;
    if (!o.n_images)
        o.n_images = cl_synth_rng_int(rng, 4, 8);
    if (!cl_synth_aerial_series_generate(s, rng, &o, drawing, error))
        return FALSE;
    const int N = s->n_images;
    char *date = g_new0(char, (size_t)N * 16); /* N dates of 16 bytes */
    GDate *d = g_date_new_dmy(1, G_DATE_JANUARY, 2015);
    g_date_add_days(d, (guint)cl_synth_rng_int(rng, 0, 2900));
    GString *log = g_string_new(NULL);
    for (int i = 0; i < N; i++) {
        if (i)
            g_date_add_days(d, (guint)cl_synth_rng_int(rng, 12, 120));
        g_date_strftime(date + 16 * i, 16, "%Y-%m-%d", d);
        g_string_append_printf(log, "%simage %d was acquired on %s .", i ? "\n" : "", i + 1,
                               date + 16 * i);
    }
    g_date_free(d);
    /* the answer: each "in image K" gains ", acquired on DATE" */
    gsize n_turns = cl_chat_conversation_len(s->conversation);
    const char *old = cl_chat_conversation_turns(s->conversation)[n_turns - 1].text;
    GString *answer = g_string_new(NULL);
    for (const char *p = old; *p;) {
        const char *at = strstr(p, "in image ");
        if (!at) {
            g_string_append(answer, p);
            break;
        }
        char *end = NULL;
        const gint64 k = g_ascii_strtoll(at + 9, &end, 10);
        g_string_append_len(answer, p, end - p);
        if (k >= 1 && k <= N)
            g_string_append_printf(answer, " , acquired on %s", date + 16 * (k - 1));
        p = end;
    }
    cl_synth_replace_answer(s, answer->str);
    s->context = g_string_free(log, FALSE);
    g_string_free(answer, TRUE);
    g_free(date);
    return TRUE;
}
