/* radiograph.c - the `radiograph` task: PA chest-film phantoms (lungs, mediastinum, heart,
 * clavicles, ribs, diaphragm domes, gastric bubble, side marker) of one synthetic patient at two
 * studies, with findings of the paper's Table 18 added, resolved or persisting between the
 * reference (prior) and the main (current) film, described in the Medical-Diff-VQA template of
 * appendix B.4. Acquisition differences (exposure, rotation, inspiration) are drawn only when
 * nuisances are on; the DICOM writer is radiograph-dicom.cc. */
#include "synth/radiograph.h"
#include "synth/synth-private.h"

#include <math.h>
#include <string.h>

/* ---- findings -------------------------------------------------------------------------------- */

typedef enum {
    F_ATELECTASIS,
    F_LUNG_OPACITY,
    F_EDEMA,
    F_CONSOLIDATION,
    F_GRANULOMA,
    F_EFFUSION,
    F_PNEUMOTHORAX,
    F_PLEURAL_THICKENING,
    F_BLUNTING,
    F_CARDIOMEGALY,
    F_VASCULAR_CONGESTION,
    F_HERNIA,
    F_PNEUMOMEDIASTINUM,
    F_CALCIFICATION,
    F_FRACTURE,
    F_GASTRIC_DISTENTION,
    N_KINDS
} Kind;

enum { Z_UPPER = 1, Z_MID = 2, Z_LOWER = 4 };

/* lateral: on one side, in one of `zones`; those findings conflict with each other where the
 * zones they cover on one side meet (one picture per lung zone keeps every change readable) */
static const struct {
    const char *name;
    gboolean lateral;
    guint8 zones;
} kinds[N_KINDS] = {
    [F_ATELECTASIS] = { "atelectasis", TRUE, Z_MID | Z_LOWER },
    [F_LUNG_OPACITY] = { "lung opacity", TRUE, Z_MID | Z_LOWER },
    [F_EDEMA] = { "edema", FALSE, 0 },
    [F_CONSOLIDATION] = { "consolidation", TRUE, Z_UPPER | Z_LOWER },
    [F_GRANULOMA] = { "granuloma", TRUE, Z_UPPER | Z_MID | Z_LOWER },
    [F_EFFUSION] = { "pleural effusion", TRUE, Z_LOWER },
    [F_PNEUMOTHORAX] = { "pneumothorax", TRUE, Z_UPPER },
    [F_PLEURAL_THICKENING] = { "pleural thickening", TRUE, Z_UPPER },
    [F_BLUNTING] = { "blunting of the costophrenic angle", TRUE, Z_LOWER },
    [F_CARDIOMEGALY] = { "cardiomegaly", FALSE, 0 },
    [F_VASCULAR_CONGESTION] = { "vascular congestion", FALSE, 0 },
    [F_HERNIA] = { "hernia", FALSE, 0 },
    [F_PNEUMOMEDIASTINUM] = { "pneumomediastinum", FALSE, 0 },
    [F_CALCIFICATION] = { "calcification", FALSE, 0 },
    [F_FRACTURE] = { "fracture", TRUE, Z_MID },
    [F_GASTRIC_DISTENTION] = { "gastric distention", FALSE, 0 },
};

const char *const *cl_synth_radiograph_categories(void)
{
    static const char *names[N_KINDS + 1];
    if (!names[0]) /* same values from every thread: a benign race */
        for (int i = 0; i < N_KINDS; i++)
            names[i] = kinds[i].name;
    return names;
}

/* An object's kind lives in its CLEVR attribute fields (synth.h has no kind of its own):
 * colour = bits 0-2, size = bit 3, material = bit 4; shape is always CUBE. */
#define KIND_TAG_SHAPE CL_SYNTH_SHAPE_CUBE

static void set_kind(ClSynthObject *o, int kind)
{
    o->shape = KIND_TAG_SHAPE;
    o->colour = kind & 7;
    o->size = (kind >> 3) & 1;
    o->material = (kind >> 4) & 1;
}

static int kind_of(const ClSynthObject *o)
{
    int k = o->colour | o->size << 3 | o->material << 4;
    return o->shape == KIND_TAG_SHAPE && o->colour >= 0 && o->colour < 8 && k < N_KINDS ? k : -1;
}

const char *cl_synth_radiograph_finding(const ClSynthObject *o)
{
    g_return_val_if_fail(o, NULL);
    int k = kind_of(o);
    return k >= 0 ? kinds[k].name : NULL;
}

/* ---- the patient ----------------------------------------------------------------------------- */

/* Fractions of the image. Side 0 is the patient's right (the viewer's left on a PA film). */
typedef struct {
    double cx;            /* midline */
    double apex, dome[2]; /* lung apices, tops of the diaphragm domes */
    double cp[2];         /* costophrenic angles */
    double tw;            /* half-width of the thorax */
    double ctr;           /* cardiothoracic ratio without cardiomegaly */
    double big;           /* how much larger the heart is with cardiomegaly */
    guint64 seed;         /* lung markings */
} Anatomy;

/* Zone anchors: the zones cut the lung height at 0.37 and 0.63; the locations read back from the
 * anchors with fixed cuts (0.32 and 0.48 of the image) that every patient's anchors clear. */
static double zone_frac(const Anatomy *a, int zone)
{
    return a->apex + (a->dome[0] - a->apex) * (0.22 + 0.3 * zone);
}

static int zone_index(guint8 z)
{
    return z == Z_UPPER ? 0 : z == Z_MID ? 1 : 2;
}

typedef struct {
    Kind kind;
    int side;        /* 0 right, 1 left; -1 for the midline and bilateral findings */
    guint8 zones;    /* lung zones it covers on its side (lateral findings) */
    int zone;        /* 0..2, the zone it is named by; -1 */
    double x, y;     /* anchor, pixels */
    double p[4];     /* kind-specific sizes, pixels (see draw_finding) */
    guint64 seed;    /* its own pattern (patchy opacities, bronchograms, vessels) */
    double box[4];   /* everything drawn for it, pixels, before the nuisance margin */
} Finding;

#define MAX_FINDINGS 12

typedef struct {
    Anatomy an;
    double w, h, sc;
    Finding f[MAX_FINDINGS];
    int n;
    gboolean present[2][MAX_FINDINGS];
    /* acquisition, per image (used only with nuisances on) */
    gboolean nuisance;
    double rot[2], zoom[2], insp[2];
    guint8 lut[2][256];
} Drawing;

static double zone_y(const Drawing *d, int zone)
{
    return zone_frac(&d->an, zone) * d->h;
}

/* ---- Cairo helpers --------------------------------------------------------------------------- */

static void grey(cairo_t *cr, double v, double a)
{
    cairo_set_source_rgba(cr, v, v, v, a);
}

static void ellipse_path(cairo_t *cr, double x, double y, double rx, double ry, double angle)
{
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_rotate(cr, angle);
    cairo_scale(cr, rx, ry);
    cairo_new_sub_path(cr);
    cairo_arc(cr, 0, 0, 1, 0, 2 * G_PI);
    cairo_close_path(cr);
    cairo_restore(cr);
}

static void radial_blob(cairo_t *cr, double x, double y, double r, double v, double a)
{
    cairo_pattern_t *p = cairo_pattern_create_radial(x, y, 0, x, y, r);
    cairo_pattern_add_color_stop_rgba(p, 0, v, v, v, a);
    cairo_pattern_add_color_stop_rgba(p, 0.6, v, v, v, a * 0.55);
    cairo_pattern_add_color_stop_rgba(p, 1, v, v, v, 0);
    cairo_set_source(cr, p);
    cairo_arc(cr, x, y, r, 0, 2 * G_PI);
    cairo_fill(cr);
    cairo_pattern_destroy(p);
}

static void box_clip(cairo_t *cr, const double b[4])
{
    cairo_rectangle(cr, b[0], b[1], b[2] - b[0], b[3] - b[1]);
    cairo_clip(cr);
}

/* ---- anatomy geometry (pixels) --------------------------------------------------------------- */

#define SG(side) ((side) ? 1.0 : -1.0) /* towards the patient's left = the viewer's right */

typedef struct {
    double xi, xo, xt, xa; /* medial border, chest wall, dome top, apex top */
} LungX;

static LungX lung_x(const Drawing *d, int side)
{
    const Anatomy *a = &d->an;
    double c = a->cx * d->w, s = SG(side);
    LungX l;
    l.xi = c + s * 0.075 * d->w;
    l.xo = c + s * a->tw * d->w;
    l.xt = l.xo - s * 0.15 * d->w;
    l.xa = c + s * 0.18 * d->w;
    return l;
}

/* the diaphragm from the costophrenic angle to the cardiophrenic angle (or back) */
static void dome_curve(cairo_t *cr, const Drawing *d, int side, gboolean back)
{
    LungX l = lung_x(d, side);
    double m = -SG(side), h = d->h, w = d->w;
    double dome = d->an.dome[side] * h, cp = d->an.cp[side] * h;
    double p0[2] = { l.xo, cp }, c1[2] = { l.xo + m * 0.03 * w, dome + 0.005 * h };
    double c2[2] = { l.xt - m * 0.06 * w, dome }, p1[2] = { l.xt, dome };
    double c3[2] = { l.xt + m * 0.05 * w, dome }, c4[2] = { l.xi - m * 0.03 * w, dome + 0.02 * h };
    double p2[2] = { l.xi, dome + 0.035 * h };
    if (!back) {
        cairo_curve_to(cr, c1[0], c1[1], c2[0], c2[1], p1[0], p1[1]);
        cairo_curve_to(cr, c3[0], c3[1], c4[0], c4[1], p2[0], p2[1]);
    } else {
        cairo_curve_to(cr, c4[0], c4[1], c3[0], c3[1], p1[0], p1[1]);
        cairo_curve_to(cr, c2[0], c2[1], c1[0], c1[1], p0[0], p0[1]);
    }
}

static void lung_path(cairo_t *cr, const Drawing *d, int side)
{
    LungX l = lung_x(d, side);
    double m = -SG(side), h = d->h, w = d->w, apex = d->an.apex * h;
    double cp = d->an.cp[side] * h;
    cairo_new_sub_path(cr);
    cairo_move_to(cr, l.xi, d->an.dome[side] * h + 0.035 * h);
    cairo_line_to(cr, l.xi, apex + 0.08 * h);
    cairo_curve_to(cr, l.xi, apex + 0.03 * h, l.xa + m * 0.04 * w, apex, l.xa, apex);
    cairo_curve_to(cr, l.xa - m * 0.09 * w, apex + 0.005 * h, l.xo - m * 0.015 * w,
                   apex + 0.22 * h, l.xo, cp);
    dome_curve(cr, d, side, FALSE);
    cairo_close_path(cr);
}

static void lung_bbox(const Drawing *d, int side, double b[4])
{
    LungX l = lung_x(d, side);
    double m = -SG(side);
    b[0] = MIN(l.xi, l.xo - m * 0.02 * d->w) - 1;
    b[2] = MAX(l.xi, l.xo - m * 0.02 * d->w) + 1;
    b[1] = d->an.apex * d->h - 1;
    b[3] = d->an.cp[side] * d->h + 1;
}

typedef struct {
    double cx, cy, rx, ry, angle;
} Heart;

static Heart heart(const Drawing *d, gboolean enlarged)
{
    const Anatomy *a = &d->an;
    Heart hh;
    hh.rx = a->ctr * a->tw * d->w * (enlarged ? a->big : 1.0);
    hh.ry = 0.12 * d->h * (enlarged ? 1.0 + (a->big - 1) * 0.4 : 1.0);
    hh.cx = a->cx * d->w + 0.3 * hh.rx;
    hh.cy = a->dome[1] * d->h - 0.075 * d->h;
    hh.angle = -0.35;
    return hh;
}

/* the bounding box of a rotated ellipse */
static void ellipse_bbox(double cx, double cy, double rx, double ry, double ang, double b[4])
{
    double c = cos(ang), s = sin(ang);
    double ex = sqrt(rx * rx * c * c + ry * ry * s * s), ey = sqrt(rx * rx * s * s + ry * ry * c * c);
    b[0] = cx - ex - 1, b[1] = cy - ey - 1, b[2] = cx + ex + 1, b[3] = cy + ey + 1;
}

/* posterior rib i on one side: a cubic from the spine to the chest wall */
static void rib_curve(const Drawing *d, int side, int i, double p[8])
{
    const Anatomy *a = &d->an;
    double c = a->cx * d->w, s = SG(side), w = d->w, h = d->h;
    double y0 = (a->apex + 0.01 + i * (a->dome[0] - a->apex) * 0.1) * h;
    p[0] = c + s * 0.035 * w, p[1] = y0;
    p[2] = c + s * 0.13 * w, p[3] = y0 - 0.03 * h;
    p[4] = c + s * (a->tw - 0.02) * w, p[5] = y0 - 0.01 * h;
    p[6] = c + s * (a->tw + 0.01) * w, p[7] = y0 + (0.035 + i * 0.004) * h;
}

static void bezier_at(const double p[8], double t, double out[2], double tan[2])
{
    double u = 1 - t;
    for (int k = 0; k < 2; k++) {
        out[k] = u * u * u * p[k] + 3 * u * u * t * p[2 + k] + 3 * u * t * t * p[4 + k] +
                 t * t * t * p[6 + k];
        tan[k] = 3 * u * u * (p[2 + k] - p[k]) + 6 * u * t * (p[4 + k] - p[2 + k]) +
                 3 * t * t * (p[6 + k] - p[4 + k]);
    }
    double n = hypot(tan[0], tan[1]);
    tan[0] /= n, tan[1] /= n;
}

/* ---- the film -------------------------------------------------------------------------------- */

static void draw_body(cairo_t *cr, const Drawing *d)
{
    double w = d->w, h = d->h, c = d->an.cx * w;
    /* soft tissue, thicker (whiter) towards the midline */
    cairo_pattern_t *p = cairo_pattern_create_linear(-20, 0, w + 20, 0);
    cairo_pattern_add_color_stop_rgb(p, 0, 0.30, 0.30, 0.30);
    cairo_pattern_add_color_stop_rgb(p, 0.5, 0.50, 0.50, 0.50);
    cairo_pattern_add_color_stop_rgb(p, 1, 0.30, 0.30, 0.30);
    cairo_set_source(cr, p);
    cairo_rectangle(cr, -24, -24, w + 48, h + 48);
    cairo_fill(cr);
    cairo_pattern_destroy(p);
    /* air above the shoulders and beside the neck */
    for (int side = 0; side < 2; side++) {
        double s = SG(side);
        cairo_move_to(cr, c + s * 0.09 * w, -24);
        cairo_line_to(cr, c + s * 0.09 * w, 0.03 * h);
        cairo_curve_to(cr, c + s * 0.12 * w, 0.08 * h, c + s * 0.3 * w, 0.07 * h,
                       c + s * 0.7 * w, 0.10 * h);
        cairo_line_to(cr, c + s * 0.7 * w, -24);
        cairo_close_path(cr);
        grey(cr, 0.03, 1);
        cairo_fill(cr);
        /* the humeral head */
        grey(cr, 1, 0.22);
        cairo_arc(cr, c + s * 0.47 * w, 0.17 * h, 0.07 * w, 0, 2 * G_PI);
        cairo_fill(cr);
    }
}

static void draw_markings(cairo_t *cr, const Drawing *d, int side)
{
    ClSynthRng r;
    cl_synth_rng_init(&r, d->an.seed + (guint64)side);
    double s = SG(side), hx = d->an.cx * d->w + s * 0.11 * d->w, hy = 0.41 * d->h;
    for (int v = 0; v < 14; v++) {
        double ang = cl_synth_rng_range(&r, -1.25, 1.35); /* from up (-) to down (+) */
        double x = hx + s * cl_synth_rng_range(&r, 0, 0.03) * d->w;
        double y = hy + cl_synth_rng_range(&r, -0.03, 0.03) * d->h;
        double width = 1.3 * d->sc, len = cl_synth_rng_range(&r, 0.04, 0.065) * d->w;
        for (int seg = 0; seg < 5; seg++) {
            double dx = s * cos(ang) * len, dy = sin(ang) * len;
            cairo_move_to(cr, x, y);
            x += dx, y += dy;
            cairo_line_to(cr, x, y);
            cairo_set_line_width(cr, width);
            grey(cr, 1, 0.09);
            cairo_stroke(cr);
            ang += cl_synth_rng_range(&r, -0.35, 0.35);
            width *= 0.75;
            len *= 0.85;
        }
    }
}

static void draw_film(cairo_t *cr, const Drawing *d, int image)
{
    double w = d->w, h = d->h, c = d->an.cx * w;
    cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
    draw_body(cr, d);

    /* lungs: dark, a little denser at the bases (overlying soft tissue) */
    for (int side = 0; side < 2; side++) {
        cairo_pattern_t *p = cairo_pattern_create_linear(0, d->an.apex * h, 0, d->an.cp[side] * h);
        cairo_pattern_add_color_stop_rgb(p, 0, 0.15, 0.15, 0.15);
        cairo_pattern_add_color_stop_rgb(p, 0.45, 0.12, 0.12, 0.12);
        cairo_pattern_add_color_stop_rgb(p, 1, 0.22, 0.22, 0.22);
        cairo_set_source(cr, p);
        lung_path(cr, d, side);
        cairo_fill(cr);
        cairo_pattern_destroy(p);
        cairo_save(cr);
        lung_path(cr, d, side);
        cairo_clip(cr);
        draw_markings(cr, d, side);
        cairo_restore(cr);
    }

    /* spine behind the mediastinum */
    grey(cr, 1, 0.08);
    cairo_rectangle(cr, c - 0.03 * w, -24, 0.06 * w, h + 48);
    cairo_fill(cr);

    /* mediastinum with the trachea and main bronchi */
    cairo_pattern_t *p = cairo_pattern_create_linear(c - 0.07 * w, 0, c + 0.075 * w, 0);
    cairo_pattern_add_color_stop_rgba(p, 0, 0.66, 0.66, 0.66, 0);
    cairo_pattern_add_color_stop_rgba(p, 0.3, 0.66, 0.66, 0.66, 0.9);
    cairo_pattern_add_color_stop_rgba(p, 0.7, 0.66, 0.66, 0.66, 0.9);
    cairo_pattern_add_color_stop_rgba(p, 1, 0.66, 0.66, 0.66, 0);
    cairo_set_source(cr, p);
    cairo_rectangle(cr, c - 0.07 * w, 0.03 * h, 0.145 * w, 0.5 * h);
    cairo_fill(cr);
    cairo_pattern_destroy(p);
    grey(cr, 0.72, 1);
    ellipse_path(cr, c + 0.075 * w, 0.29 * h, 0.035 * w, 0.03 * h, 0); /* aortic knob */
    cairo_fill(cr);
    grey(cr, 0, 0.3);
    cairo_rectangle(cr, c - 0.012 * w, -24, 0.024 * w, 0.34 * h + 24);
    cairo_fill(cr);
    cairo_set_line_width(cr, 0.02 * w);
    for (int side = 0; side < 2; side++) {
        cairo_move_to(cr, c, 0.34 * h);
        cairo_line_to(cr, c + SG(side) * 0.07 * w, 0.39 * h);
    }
    grey(cr, 0, 0.22);
    cairo_stroke(cr);

    /* heart (larger with cardiomegaly) and the hila */
    gboolean big = FALSE;
    for (int i = 0; i < d->n; i++)
        big |= d->present[image][i] && d->f[i].kind == F_CARDIOMEGALY;
    Heart hh = heart(d, big);
    cairo_pattern_t *hp = cairo_pattern_create_radial(hh.cx, hh.cy, 0, hh.cx, hh.cy, hh.rx);
    cairo_pattern_add_color_stop_rgb(hp, 0, 0.80, 0.80, 0.80);
    cairo_pattern_add_color_stop_rgb(hp, 1, 0.70, 0.70, 0.70);
    cairo_set_source(cr, hp);
    ellipse_path(cr, hh.cx, hh.cy, hh.rx, hh.ry, hh.angle);
    cairo_fill(cr);
    cairo_pattern_destroy(hp);
    for (int side = 0; side < 2; side++)
        radial_blob(cr, c + SG(side) * 0.1 * w, 0.41 * h, 0.04 * w, 0.9, 0.35);

    /* abdomen below the diaphragm domes */
    LungX l0 = lung_x(d, 0), l1 = lung_x(d, 1);
    cairo_move_to(cr, -24, d->an.cp[0] * h + 0.04 * h);
    cairo_line_to(cr, l0.xo, d->an.cp[0] * h);
    dome_curve(cr, d, 0, FALSE);
    cairo_line_to(cr, l1.xi, d->an.dome[1] * h + 0.035 * h);
    dome_curve(cr, d, 1, TRUE);
    cairo_line_to(cr, w + 24, d->an.cp[1] * h + 0.04 * h);
    cairo_line_to(cr, w + 24, h + 24);
    cairo_line_to(cr, -24, h + 24);
    cairo_close_path(cr);
    cairo_pattern_t *ap = cairo_pattern_create_linear(0, d->an.dome[0] * h, 0, h);
    cairo_pattern_add_color_stop_rgb(ap, 0, 0.68, 0.68, 0.68);
    cairo_pattern_add_color_stop_rgb(ap, 1, 0.58, 0.58, 0.58);
    cairo_set_source(cr, ap);
    cairo_fill(cr);
    cairo_pattern_destroy(ap);
    /* the gastric bubble under the left dome, with its fluid level */
    double gx = c + 0.17 * w, gy = d->an.dome[1] * h + 0.06 * h;
    cairo_save(cr);
    cairo_rectangle(cr, gx - 0.05 * w, gy - 0.04 * h, 0.1 * w, 0.04 * h + 0.3 * 0.025 * h);
    cairo_clip(cr);
    ellipse_path(cr, gx, gy, 0.045 * w, 0.025 * h, 0);
    grey(cr, 0, 0.35);
    cairo_fill(cr);
    cairo_restore(cr);

    /* bones: posterior ribs, clavicles */
    for (int side = 0; side < 2; side++) {
        for (int pass = 0; pass < 2; pass++) {
            for (int i = 0; i < 10; i++) {
                double rp[8];
                rib_curve(d, side, i, rp);
                if (pass == 0) {
                    cairo_move_to(cr, rp[0], rp[1]);
                    cairo_curve_to(cr, rp[2], rp[3], rp[4], rp[5], rp[6], rp[7]);
                } else { /* the anterior rib, back down towards the midline */
                    cairo_move_to(cr, rp[6], rp[7]);
                    cairo_curve_to(cr, rp[6] - SG(side) * 0.05 * w, rp[7] + 0.04 * h,
                                   c + SG(side) * 0.22 * w, rp[7] + 0.08 * h,
                                   c + SG(side) * 0.12 * w, rp[7] + 0.1 * h);
                }
            }
            cairo_set_line_width(cr, (pass ? 0.012 : 0.017) * h);
            grey(cr, 1, pass ? 0.04 : 0.09);
            cairo_stroke_preserve(cr);
            cairo_set_line_width(cr, 0.006 * h);
            grey(cr, 1, pass ? 0.02 : 0.06);
            cairo_stroke(cr);
        }
        double s = SG(side);
        cairo_move_to(cr, c + s * 0.05 * w, 0.185 * h);
        cairo_curve_to(cr, c + s * 0.15 * w, 0.2 * h, c + s * 0.28 * w, 0.11 * h,
                       c + s * 0.4 * w, 0.13 * h);
        cairo_set_line_width(cr, 0.022 * h);
        grey(cr, 1, 0.3);
        cairo_stroke(cr);
    }

    /* the lead side marker, on the patient's left */
    double mx = 0.85 * w, my = 0.04 * h, ms = MAX(0.05 * w, 5);
    grey(cr, 0.95, 1);
    cairo_rectangle(cr, mx, my, ms, ms);
    cairo_fill(cr);
    cairo_move_to(cr, mx + 0.3 * ms, my + 0.2 * ms);
    cairo_line_to(cr, mx + 0.3 * ms, my + 0.8 * ms);
    cairo_line_to(cr, mx + 0.75 * ms, my + 0.8 * ms);
    cairo_set_line_width(cr, MAX(0.15 * ms, 0.8));
    grey(cr, 0.2, 1);
    cairo_stroke(cr);
}

/* ---- drawing the findings -------------------------------------------------------------------- */

static void bronchograms(cairo_t *cr, const Drawing *d, const Finding *f, ClSynthRng *r)
{
    for (int i = 0; i < 3; i++) {
        double x = f->x + cl_synth_rng_range(r, -0.3, 0.3) * f->p[0];
        double y = f->y + cl_synth_rng_range(r, -0.3, 0.3) * f->p[1];
        double ang = cl_synth_rng_range(r, 0, 2 * G_PI), len = 0.04 * d->w;
        cairo_move_to(cr, x, y);
        cairo_line_to(cr, x + cos(ang) * len, y + sin(ang) * len);
        cairo_move_to(cr, x + cos(ang) * len * 0.5, y + sin(ang) * len * 0.5);
        cairo_line_to(cr, x + cos(ang + 0.5) * len, y + sin(ang + 0.5) * len);
    }
    cairo_set_line_width(cr, 0.8 * d->sc);
    grey(cr, 0, 0.28);
    cairo_stroke(cr);
}

static void draw_finding(cairo_t *cr, const Drawing *d, const Finding *f)
{
    double w = d->w, h = d->h, sc = d->sc, c = d->an.cx * w;
    ClSynthRng r;
    cl_synth_rng_init(&r, f->seed);
    cairo_save(cr);
    box_clip(cr, f->box); /* nothing of it outside its box */
    int side = f->side;
    switch (f->kind) {
    case F_ATELECTASIS: { /* a plate-like band; p: half-length, angle, thickness */
        double dx = cos(f->p[1]) * f->p[0], dy = sin(f->p[1]) * f->p[0];
        lung_path(cr, d, side);
        cairo_clip(cr);
        cairo_move_to(cr, f->x - dx, f->y - dy);
        cairo_line_to(cr, f->x + dx, f->y + dy);
        cairo_set_line_width(cr, 2.2 * f->p[2]);
        grey(cr, 1, 0.12);
        cairo_stroke_preserve(cr);
        cairo_set_line_width(cr, f->p[2]);
        grey(cr, 1, 0.42);
        cairo_stroke(cr);
        break;
    }
    case F_LUNG_OPACITY: /* patchy, ill-defined; p: rx, ry, blob radius */
        lung_path(cr, d, side);
        cairo_clip(cr);
        for (int i = 0; i < 7; i++)
            radial_blob(cr, f->x + cl_synth_rng_range(&r, -0.6, 0.6) * f->p[0],
                        f->y + cl_synth_rng_range(&r, -0.6, 0.6) * f->p[1],
                        f->p[2] * cl_synth_rng_range(&r, 0.7, 1.0), 0.9, 0.3);
        break;
    case F_EDEMA: /* bilateral perihilar haze */
        lung_path(cr, d, 0);
        lung_path(cr, d, 1);
        cairo_clip(cr);
        for (int s = 0; s < 2; s++) {
            cairo_save(cr);
            cairo_translate(cr, c + SG(s) * 0.12 * w, 0.42 * h);
            cairo_scale(cr, 1, f->p[1] / f->p[0]);
            radial_blob(cr, 0, 0, f->p[0], 0.85, 0.55);
            cairo_restore(cr);
        }
        break;
    case F_CONSOLIDATION: { /* lobar, dense; upper: sharp fissure below; p: rx, ry, top, bottom */
        lung_path(cr, d, side);
        cairo_clip(cr);
        cairo_pattern_t *p = cairo_pattern_create_linear(0, f->p[2], 0, f->p[3]);
        gboolean upper = f->zone == 0;
        cairo_pattern_add_color_stop_rgba(p, 0, 0.75, 0.75, 0.75, upper ? 0.62 : 0.0);
        cairo_pattern_add_color_stop_rgba(p, 0.35, 0.75, 0.75, 0.75, upper ? 0.6 : 0.5);
        cairo_pattern_add_color_stop_rgba(p, 1, 0.75, 0.75, 0.75, 0.6);
        cairo_set_source(cr, p);
        cairo_rectangle(cr, f->box[0], f->p[2], f->box[2] - f->box[0], f->p[3] - f->p[2]);
        cairo_fill(cr);
        cairo_pattern_destroy(p);
        bronchograms(cr, d, f, &r);
        break;
    }
    case F_GRANULOMA: /* a small calcified nodule; p: radius */
        grey(cr, 1, 0.85);
        cairo_arc(cr, f->x, f->y, f->p[0], 0, 2 * G_PI);
        cairo_fill(cr);
        break;
    case F_EFFUSION:
    case F_BLUNTING: { /* fluid below a meniscus rising to the chest wall; p: medial level, lateral level */
        LungX l = lung_x(d, side);
        double m = -SG(side);
        lung_path(cr, d, side);
        cairo_clip(cr);
        double x0 = f->kind == F_EFFUSION ? l.xi : l.xo + m * 0.09 * w;
        cairo_move_to(cr, x0, f->p[0]);
        cairo_curve_to(cr, x0 - m * 0.4 * fabs(x0 - l.xo), f->p[0], l.xo + m * 0.02 * w,
                       f->p[1] + 0.2 * (f->p[0] - f->p[1]), l.xo - m * 0.01 * w, f->p[1]);
        cairo_line_to(cr, l.xo - m * 0.01 * w, h + 24);
        cairo_line_to(cr, x0, h + 24);
        cairo_close_path(cr);
        cairo_pattern_t *p = cairo_pattern_create_linear(0, f->p[1], 0, d->an.cp[side] * h);
        cairo_pattern_add_color_stop_rgba(p, 0, 0.66, 0.66, 0.66, 0.7);
        cairo_pattern_add_color_stop_rgba(p, 1, 0.68, 0.68, 0.68, 0.95);
        cairo_set_source(cr, p);
        cairo_fill(cr);
        cairo_pattern_destroy(p);
        break;
    }
    case F_PNEUMOTHORAX: { /* the lung retracted from the wall: no markings, a pleural line */
        double ax = lung_x(d, side).xi, ay = d->an.dome[side] * h + 0.02 * h;
        lung_path(cr, d, side);
        cairo_clip(cr);
        cairo_save(cr);
        cairo_translate(cr, ax, ay);
        cairo_scale(cr, f->p[0], f->p[0]);
        cairo_translate(cr, -ax, -ay);
        lung_path(cr, d, side);
        cairo_restore(cr);
        lung_path(cr, d, side);
        cairo_set_fill_rule(cr, CAIRO_FILL_RULE_EVEN_ODD);
        grey(cr, 0.07, 0.92);
        cairo_fill(cr);
        cairo_save(cr); /* the path scaled, not the line width */
        cairo_translate(cr, ax, ay);
        cairo_scale(cr, f->p[0], f->p[0]);
        cairo_translate(cr, -ax, -ay);
        lung_path(cr, d, side);
        cairo_restore(cr);
        cairo_set_line_width(cr, 0.7 * sc);
        grey(cr, 1, 0.55);
        cairo_stroke(cr);
        break;
    }
    case F_PLEURAL_THICKENING: /* an apical cap along the pleura; p: thickness */
        lung_path(cr, d, side);
        cairo_clip_preserve(cr);
        cairo_set_line_width(cr, 2 * f->p[0]);
        grey(cr, 0.9, 0.5);
        cairo_stroke(cr);
        break;
    case F_CARDIOMEGALY: /* drawn with the heart */
        break;
    case F_VASCULAR_CONGESTION: /* hazy, large hila and engorged upper-zone vessels */
        for (int s = 0; s < 2; s++) {
            double hx = c + SG(s) * 0.11 * w, hy = 0.41 * h;
            radial_blob(cr, hx, hy, 0.06 * w, 0.9, 0.35);
            for (int v = 0; v < 5; v++) {
                double ang = cl_synth_rng_range(&r, -1.4, -0.2), len = cl_synth_rng_range(&r, 0.1, 0.15) * w;
                cairo_move_to(cr, hx, hy);
                cairo_line_to(cr, hx + SG(s) * cos(ang) * len, hy + sin(ang) * len);
            }
            cairo_set_line_width(cr, 1.5 * sc);
            grey(cr, 1, 0.28);
            cairo_stroke(cr);
        }
        break;
    case F_HERNIA: /* hiatal: a retrocardiac gas lucency with an air-fluid level; p: radius */
        cairo_save(cr);
        cairo_arc(cr, f->x, f->y, f->p[0], 0, 2 * G_PI);
        cairo_clip(cr);
        grey(cr, 0, 0.38);
        cairo_rectangle(cr, f->x - f->p[0], f->y - f->p[0], 2 * f->p[0], 1.2 * f->p[0]);
        cairo_fill(cr);
        grey(cr, 1, 0.15);
        cairo_rectangle(cr, f->x - f->p[0], f->y + 0.2 * f->p[0], 2 * f->p[0], f->p[0]);
        cairo_fill(cr);
        cairo_restore(cr);
        cairo_arc(cr, f->x, f->y, f->p[0], 0, 2 * G_PI);
        cairo_set_line_width(cr, 0.8 * sc);
        grey(cr, 1, 0.25);
        cairo_stroke(cr);
        break;
    case F_PNEUMOMEDIASTINUM: { /* lucent streaks along the left heart border and the trachea */
        Heart hh = heart(d, FALSE);
        cairo_save(cr);
        cairo_translate(cr, hh.cx, hh.cy);
        cairo_rotate(cr, hh.angle);
        cairo_scale(cr, hh.rx + 1.5 * sc, hh.ry + 1.5 * sc);
        cairo_arc(cr, 0, 0, 1, -1.9, -0.1);
        cairo_restore(cr);
        for (int s = 0; s < 2; s++) {
            cairo_move_to(cr, c + SG(s) * 0.03 * w, 0.05 * h);
            cairo_line_to(cr, c + SG(s) * 0.035 * w, 0.26 * h);
        }
        cairo_set_line_width(cr, 1.0 * sc);
        grey(cr, 0, 0.5);
        cairo_stroke(cr);
        break;
    }
    case F_CALCIFICATION: /* a rim of calcium in the aortic knob */
        cairo_save(cr);
        cairo_translate(cr, c + 0.075 * w, 0.29 * h);
        cairo_scale(cr, 0.028 * w, 0.024 * h);
        cairo_arc(cr, 0, 0, 1, -2.6, 0.35);
        cairo_restore(cr);
        cairo_set_line_width(cr, 0.9 * sc);
        grey(cr, 1, 0.8);
        cairo_stroke(cr);
        break;
    case F_FRACTURE: { /* a lucent gap across a lateral rib and a stepped fragment; p: rib, t */
        double rp[8], pt[2], tan[2];
        rib_curve(d, side, (int)f->p[0], rp);
        bezier_at(rp, f->p[1], pt, tan);
        double nx = -tan[1], ny = tan[0], half = 0.014 * h;
        cairo_move_to(cr, pt[0] - nx * half, pt[1] - ny * half);
        cairo_line_to(cr, pt[0] + nx * half, pt[1] + ny * half);
        cairo_set_line_width(cr, 1.0 * sc);
        grey(cr, 0.12, 0.85);
        cairo_stroke(cr);
        double off = 1.2 * sc, len = 0.03 * w;
        cairo_move_to(cr, pt[0] + tan[0] * 0.6 * sc + nx * off, pt[1] + tan[1] * 0.6 * sc + ny * off);
        cairo_line_to(cr, pt[0] + tan[0] * len + nx * off, pt[1] + tan[1] * len + ny * off);
        cairo_set_line_width(cr, 0.012 * h);
        grey(cr, 1, 0.2);
        cairo_stroke(cr);
        break;
    }
    case F_GASTRIC_DISTENTION: /* a large gastric bubble with its fluid level; p: rx, ry */
        cairo_rectangle(cr, f->x - f->p[0] - 1, f->y - f->p[1] - 1, 2 * f->p[0] + 2,
                        1.3 * f->p[1] + 1);
        cairo_clip(cr);
        ellipse_path(cr, f->x, f->y, f->p[0], f->p[1], 0);
        grey(cr, 0, 0.45);
        cairo_fill(cr);
        break;
    default:
        break;
    }
    cairo_restore(cr);
}

/* Acquisition: one transform for patient rotation, distance and inspiration depth (the thorax
 * stretches down from the apices), then the film's exposure curve. */
static void draw(cairo_t *cr, const ClSynthSample *s, int image, gpointer data)
{
    const Drawing *d = data;
    int w = s->images[image].width, h = s->images[image].height, m = 8;
    cairo_surface_t *film = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w + 2 * m, h + 2 * m);
    cairo_t *c = cairo_create(film);
    cairo_translate(c, m, m);
    if (d->nuisance) {
        double px = w / 2.0, py = d->an.apex * h;
        cairo_translate(c, px, py);
        cairo_rotate(c, d->rot[image]);
        cairo_scale(c, d->zoom[image], d->zoom[image] * (1 + d->insp[image]));
        cairo_translate(c, -px, -py);
    }
    draw_film(c, d, image);
    for (int i = 0; i < d->n; i++)
        if (d->present[image][i])
            draw_finding(c, d, &d->f[i]);
    cairo_destroy(c);
    cairo_surface_flush(film);
    if (d->nuisance) {
        guint8 *px = cairo_image_surface_get_data(film);
        int stride = cairo_image_surface_get_stride(film);
        for (int y = 0; y < h + 2 * m; y++) {
            guint32 *row = (guint32 *)(gpointer)(px + (gsize)y * stride);
            for (int x = 0; x < w + 2 * m; x++) {
                guint32 v = row[x];
                guint32 r = d->lut[image][(v >> 16) & 0xff], g = d->lut[image][(v >> 8) & 0xff],
                        b = d->lut[image][v & 0xff];
                row[x] = 0xff000000u | r << 16 | g << 8 | b;
            }
        }
        cairo_surface_mark_dirty(film);
    }
    cairo_set_source_surface(cr, film, -m, -m);
    cairo_paint(cr);
    cairo_surface_destroy(film);
}

/* ---- placing findings ------------------------------------------------------------------------ */

static void set_box(Finding *f, double x0, double y0, double x1, double y1)
{
    f->box[0] = x0, f->box[1] = y0, f->box[2] = x1, f->box[3] = y1;
}

static void place(Drawing *d, Finding *f, ClSynthRng *rng)
{
    double w = d->w, h = d->h, sc = d->sc, c = d->an.cx * w;
    const Anatomy *a = &d->an;
    double lb[4] = { 0, 0, d->w, d->h };
    if (f->side >= 0) {
        LungX l = lung_x(d, f->side);
        lung_bbox(d, f->side, lb);
        f->x = (l.xi + l.xo) / 2, f->y = zone_y(d, f->zone);
    }
    f->seed = cl_synth_rng_next(rng);
    switch (f->kind) {
    case F_ATELECTASIS: {
        f->x += cl_synth_rng_range(rng, -0.03, 0.03) * w;
        f->p[0] = cl_synth_rng_range(rng, 0.065, 0.085) * w;
        f->p[1] = SG(f->side) * cl_synth_rng_range(rng, 0.08, 0.25);
        f->p[2] = cl_synth_rng_range(rng, 0.012, 0.018) * h;
        double ex = fabs(cos(f->p[1])) * f->p[0] + 1.1 * f->p[2] + 1;
        double ey = fabs(sin(f->p[1])) * f->p[0] + 1.1 * f->p[2] + 1;
        set_box(f, f->x - ex, f->y - ey, f->x + ex, f->y + ey);
        break;
    }
    case F_LUNG_OPACITY: {
        f->p[0] = cl_synth_rng_range(rng, 0.06, 0.08) * w;
        f->p[1] = cl_synth_rng_range(rng, 0.05, 0.07) * h;
        f->p[2] = cl_synth_rng_range(rng, 0.04, 0.055) * MIN(w, h);
        double ex = 0.6 * f->p[0] + f->p[2] + 1, ey = 0.6 * f->p[1] + f->p[2] + 1;
        set_box(f, f->x - ex, f->y - ey, f->x + ex, f->y + ey);
        break;
    }
    case F_EDEMA:
        f->x = c, f->y = 0.42 * h;
        f->p[0] = cl_synth_rng_range(rng, 0.12, 0.15) * w;
        f->p[1] = cl_synth_rng_range(rng, 0.10, 0.13) * h;
        set_box(f, c - 0.12 * w - f->p[0] - 1, f->y - f->p[1] - 1, c + 0.12 * w + f->p[0] + 1,
                f->y + f->p[1] + 1);
        break;
    case F_CONSOLIDATION:
        f->p[0] = 0.1 * w, f->p[1] = 0.05 * h;
        if (f->zone == 0) {
            f->p[2] = lb[1];
            f->p[3] = zone_y(d, 0) + cl_synth_rng_range(rng, 0.04, 0.07) * h; /* the fissure */
        } else {
            f->p[2] = zone_y(d, 2) - cl_synth_rng_range(rng, 0.07, 0.1) * h;
            f->p[3] = lb[3];
        }
        set_box(f, lb[0], f->p[2] - 1, lb[2], f->p[3] + 1);
        break;
    case F_GRANULOMA: {
        LungX l = lung_x(d, f->side);
        f->x = l.xi + (l.xo - l.xi) * cl_synth_rng_range(rng, 0.3, 0.75);
        f->y += cl_synth_rng_range(rng, -0.025, 0.025) * h;
        f->p[0] = MAX(cl_synth_rng_range(rng, 0.01, 0.014) * w, 1.3);
        set_box(f, f->x - f->p[0] - 1, f->y - f->p[0] - 1, f->x + f->p[0] + 1, f->y + f->p[0] + 1);
        break;
    }
    case F_EFFUSION:
    case F_BLUNTING: {
        double dome = a->dome[f->side] * h, cp = a->cp[f->side] * h;
        if (f->kind == F_EFFUSION) {
            f->p[0] = dome - cl_synth_rng_range(rng, 0.03, 0.12) * h; /* medial level */
            f->p[1] = f->p[0] - cl_synth_rng_range(rng, 0.05, 0.08) * h;
        } else {
            f->p[0] = cp + 0.01 * h;
            f->p[1] = cp - cl_synth_rng_range(rng, 0.04, 0.06) * h;
            LungX l = lung_x(d, f->side);
            f->x = l.xo - SG(f->side) * 0.04 * w; /* the angle itself */
        }
        set_box(f, lb[0], f->p[1] - 1, lb[2], lb[3]);
        if (f->kind == F_BLUNTING) {
            LungX l = lung_x(d, f->side);
            double x0 = l.xo - SG(f->side) * 0.09 * w;
            set_box(f, MIN(x0, l.xo) - 0.02 * w - 1, f->p[1] - 1, MAX(x0, l.xo) + 0.02 * w + 1,
                    lb[3]);
        }
        break;
    }
    case F_PNEUMOTHORAX:
        f->p[0] = cl_synth_rng_range(rng, 0.8, 0.88); /* the lung's retraction */
        set_box(f, lb[0], lb[1], lb[2], zone_y(d, 1) + 0.06 * h);
        break;
    case F_PLEURAL_THICKENING:
        f->p[0] = MAX(cl_synth_rng_range(rng, 0.012, 0.018) * h, 1.2);
        set_box(f, lb[0], lb[1], lb[2], zone_y(d, 0) + 0.03 * h);
        break;
    case F_CARDIOMEGALY: {
        Heart hh = heart(d, TRUE);
        f->x = hh.cx, f->y = hh.cy;
        ellipse_bbox(hh.cx, hh.cy, hh.rx, hh.ry, hh.angle, f->box);
        break;
    }
    case F_VASCULAR_CONGESTION:
        f->x = c, f->y = 0.35 * h;
        set_box(f, c - 0.11 * w - 0.16 * w - 2, 0.41 * h - 0.16 * w - 2, c + 0.27 * w + 2,
                0.41 * h + 0.06 * w + 2);
        break;
    case F_HERNIA:
        f->p[0] = cl_synth_rng_range(rng, 0.04, 0.055) * w;
        f->x = c + 0.01 * w, f->y = a->dome[1] * h - 0.07 * h;
        set_box(f, f->x - f->p[0] - 1.5 * sc, f->y - f->p[0] - 1.5 * sc,
                f->x + f->p[0] + 1.5 * sc, f->y + f->p[0] + 1.5 * sc);
        break;
    case F_PNEUMOMEDIASTINUM: {
        Heart hh = heart(d, FALSE);
        double b[4];
        ellipse_bbox(hh.cx, hh.cy, hh.rx + 1.5 * sc, hh.ry + 1.5 * sc, hh.angle, b);
        f->x = c, f->y = 0.25 * h;
        set_box(f, c - 0.035 * w - 1.5 * sc, 0.05 * h - 1.5 * sc, b[2] + sc, hh.cy + 1.5 * sc);
        break;
    }
    case F_CALCIFICATION:
        f->x = c + 0.075 * w, f->y = 0.29 * h;
        set_box(f, f->x - 0.028 * w - sc - 1, f->y - 0.024 * h - sc - 1, f->x + 0.028 * w + sc + 1,
                f->y + 0.024 * h + sc + 1);
        break;
    case F_FRACTURE: {
        f->p[0] = cl_synth_rng_int(rng, 3, 6);
        f->p[1] = cl_synth_rng_range(rng, 0.72, 0.85);
        double rp[8], pt[2], tan[2];
        rib_curve(d, f->side, (int)f->p[0], rp);
        bezier_at(rp, f->p[1], pt, tan);
        f->x = pt[0], f->y = pt[1];
        double r = 0.03 * w + 0.012 * h + 2 * sc + 1;
        set_box(f, pt[0] - r, pt[1] - r, pt[0] + r, pt[1] + r);
        break;
    }
    case F_GASTRIC_DISTENTION:
        f->p[0] = cl_synth_rng_range(rng, 0.085, 0.105) * w;
        f->p[1] = cl_synth_rng_range(rng, 0.05, 0.065) * h;
        f->x = c + 0.19 * w, f->y = a->dome[1] * h + 0.085 * h;
        set_box(f, f->x - f->p[0] - 1, f->y - f->p[1] - 1, f->x + f->p[0] + 1,
                f->y + 0.3 * f->p[1] + 1);
        break;
    default:
        break;
    }
}

/* the zones a finding covers (pneumothorax: from the apex into the middle zone) */
static guint8 covered(const Finding *f)
{
    guint8 z = f->zone >= 0 ? (guint8)(1 << f->zone) : 0;
    if (f->kind == F_PNEUMOTHORAX || (f->kind == F_CONSOLIDATION && f->zone == 0))
        z |= Z_MID;
    return z;
}

static gboolean conflicts(const Finding *a, const Finding *b)
{
    if (a->kind == b->kind)
        return TRUE; /* a category is named once per film */
    if (a->side < 0 || b->side < 0 || a->side != b->side)
        return FALSE;
    return (covered(a) & covered(b)) != 0;
}

/* A new finding of a kind not yet in `used` (findings of either film), or FALSE. */
static gboolean new_finding(Drawing *d, ClSynthRng *rng, Finding *out)
{
    for (int tries = 0; tries < 40; tries++) {
        Finding f = { 0 };
        f.kind = (Kind)cl_synth_rng_int(rng, 0, N_KINDS - 1);
        f.side = -1, f.zone = -1;
        if (kinds[f.kind].lateral) {
            f.side = cl_synth_rng_int(rng, 0, 1);
            guint8 zs[3];
            int nz = 0;
            for (int z = 0; z < 3; z++)
                if (kinds[f.kind].zones & (1 << z))
                    zs[nz++] = (guint8)(1 << z);
            f.zone = zone_index(zs[cl_synth_rng_int(rng, 0, nz - 1)]);
        }
        gboolean ok = TRUE;
        for (int i = 0; ok && i < d->n; i++)
            ok = !conflicts(&f, &d->f[i]);
        if (!ok)
            continue;
        place(d, &f, rng);
        *out = f;
        return TRUE;
    }
    return FALSE;
}

/* ---- the answer ------------------------------------------------------------------------------ */

static gint cmp_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "x", "x and y", "x, y, and z" */
static void append_list(GString *g, GPtrArray *names)
{
    for (guint i = 0; i < names->len; i++) {
        if (i > 0)
            g_string_append(g, names->len == 2 ? " and " : i + 1 == names->len ? ", and " : ", ");
        g_string_append(g, g_ptr_array_index(names, i));
    }
}

/* appendix B.4's template (Medical-Diff-VQA): additional, missing, both, or no change */
static char *answer_text(GPtrArray *added, GPtrArray *missing)
{
    GString *g = g_string_new(NULL);
    if (added->len) {
        g_string_append(g, added->len > 1 ? "the main image has additional findings of "
                                           : "the main image has an additional finding of ");
        append_list(g, added);
        g_string_append(g, " than the reference image.");
    }
    if (missing->len) {
        g_string_append_printf(g, "%sthe main image is missing the finding%s of ",
                               added->len ? " " : "", missing->len > 1 ? "s" : "");
        append_list(g, missing);
        g_string_append(g, " than the reference image.");
    }
    if (!added->len && !missing->len)
        g_string_append(g, "nothing has changed.");
    return g_string_free(g, FALSE);
}

/* ---- the task -------------------------------------------------------------------------------- */

/* Acquisition limits: rotation (rad), magnification, inspiration (vertical stretch). */
#define MAX_ROT 0.012
#define MAX_ZOOM 0.01
#define MAX_INSP 0.015

/* How far the acquisition transform can move anything of a finding: object boxes carry this
 * margin, so they hold the finding on every film of the patient. */
static double acquisition_margin(const Drawing *d, const Finding *f)
{
    double px = d->w / 2, py = d->an.apex * d->h, r = 0;
    for (int i = 0; i < 4; i++)
        r = MAX(r, hypot(f->box[i & 1 ? 2 : 0] - px, f->box[i & 2 ? 3 : 1] - py));
    return r * (MAX_ROT + MAX_ZOOM) + MAX_INSP * MAX(0, f->box[3] - py) * (1 + MAX_ZOOM) + 1;
}

static void add_object(GArray *objs, const Drawing *d, const Finding *f)
{
    double margin = acquisition_margin(d, f);
    ClSynthObject o = { 0 };
    set_kind(&o, f->kind);
    o.x = f->x, o.y = f->y;
    o.box[0] = f->box[0] - margin, o.box[1] = f->box[1] - margin;
    o.box[2] = f->box[2] + margin, o.box[3] = f->box[3] + margin;
    g_array_append_val(objs, o);
}

/* The patient and the reference film's findings (0-3) present on every film. */
static Drawing *new_patient(const ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts)
{
    Drawing *d = g_new0(Drawing, 1);
    d->w = opts->width, d->h = opts->height, d->sc = cl_synth_scale(s, opts);
    Anatomy *a = &d->an;
    a->cx = cl_synth_rng_range(rng, 0.49, 0.51);
    a->apex = cl_synth_rng_range(rng, 0.11, 0.13);
    a->dome[0] = cl_synth_rng_range(rng, 0.63, 0.66);
    a->dome[1] = a->dome[0] + cl_synth_rng_range(rng, 0.01, 0.03); /* the left dome sits lower */
    for (int side = 0; side < 2; side++)
        a->cp[side] = a->dome[side] + cl_synth_rng_range(rng, 0.06, 0.08);
    a->tw = cl_synth_rng_range(rng, 0.36, 0.4);
    a->ctr = cl_synth_rng_range(rng, 0.42, 0.48);
    a->big = cl_synth_rng_range(rng, 1.3, 1.38);
    a->seed = cl_synth_rng_next(rng);

    static const int n_ref_w[] = { 20, 35, 30, 15 };
    int pick = cl_synth_rng_int(rng, 0, 99), n_ref = 0;
    for (int acc = n_ref_w[0]; pick >= acc; acc += n_ref_w[++n_ref])
        ;
    for (int i = 0; i < n_ref; i++)
        if (new_finding(d, rng, &d->f[d->n])) {
            d->present[0][d->n] = d->present[1][d->n] = TRUE;
            d->n++;
        }
    return d;
}

/* The acquisitions, from a stream of their own, drawn whether or not they are used. */
static void acquisitions(Drawing *d, ClSynthRng *rng, const ClSynthOptions *opts)
{
    ClSynthRng acq;
    cl_synth_rng_init(&acq, cl_synth_rng_next(rng));
    d->nuisance = opts->nuisance;
    for (int k = 0; k < 2; k++) {
        d->rot[k] = cl_synth_rng_range(&acq, -MAX_ROT, MAX_ROT);
        d->zoom[k] = 1 + cl_synth_rng_range(&acq, -MAX_ZOOM, MAX_ZOOM);
        d->insp[k] = cl_synth_rng_range(&acq, -MAX_INSP, MAX_INSP);
        /* exposure: a rational curve, lighter or darker film, integer arithmetic only */
        int e = cl_synth_rng_int(&acq, 300, 1200), dir = cl_synth_rng_int(&acq, 0, 2);
        for (int v = 0; v < 256; v++) {
            int x = dir == 1 ? 255 - v : v;
            int y = dir == 0 ? x : (x * (255 + e) + (x + e) / 2) / (x + e);
            d->lut[k][v] = (guint8)CLAMP(dir == 1 ? 255 - y : y, 0, 255);
        }
    }
}

void cl_synth_radiograph_film(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                              ClSynthDrawing *drawing)
{
    Drawing *d = new_patient(s, rng, opts);
    s->n_images = 1;
    s->objects = g_new0(GArray *, 1);
    s->objects[0] = g_array_new(FALSE, TRUE, sizeof(ClSynthObject));
    for (int i = 0; i < d->n; i++)
        add_object(s->objects[0], d, &d->f[i]);
    acquisitions(d, rng, opts);
    drawing->draw = draw;
    drawing->data = d;
    drawing->free_data = g_free;
}

gboolean cl_synth_radiograph_generate(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                                      ClSynthDrawing *drawing, GError **error)
{
    if (opts->n_images != 0 && opts->n_images != 2) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS,
                    "synth: radiograph studies come in pairs (reference and main), not %d images",
                    opts->n_images);
        return FALSE;
    }
    Drawing *d = new_patient(s, rng, opts);
    int n_ref = d->n;
    /* about one pair in seven is stable (the paper's test set: 2,317 of 16,347) */
    if (cl_synth_rng_int(rng, 0, 99) >= 15) {
        int n_add, n_res;
        do {
            n_add = cl_synth_rng_int(rng, 0, 2);
            n_res = cl_synth_rng_int(rng, 0, MIN(2, n_ref));
        } while (n_add + n_res == 0);
        for (int i = 0; i < n_res; i++) {
            int j = cl_synth_rng_int(rng, 0, n_ref - 1);
            d->present[1][j] = FALSE; /* drawn twice: fewer resolved */
        }
        for (int i = 0; i < n_add && d->n < MAX_FINDINGS; i++)
            if (new_finding(d, rng, &d->f[d->n])) {
                d->present[1][d->n] = TRUE;
                d->n++;
            }
    }

    /* objects: the findings of each film, in finding order */
    s->n_images = 2;
    s->objects = g_new0(GArray *, 2);
    int index[2][MAX_FINDINGS];
    for (int k = 0; k < 2; k++) {
        s->objects[k] = g_array_new(FALSE, TRUE, sizeof(ClSynthObject));
        for (int i = 0; i < d->n; i++) {
            index[k][i] = d->present[k][i] ? (int)s->objects[k]->len : -1;
            if (d->present[k][i])
                add_object(s->objects[k], d, &d->f[i]);
        }
    }
    /* changes in the answer's order: the additional findings, then the missing ones, each
     * alphabetical */
    g_autoptr(GPtrArray) added = g_ptr_array_new(), missing = g_ptr_array_new();
    for (int i = 0; i < d->n; i++) {
        if (d->present[1][i] && !d->present[0][i])
            g_ptr_array_add(added, (gpointer)kinds[d->f[i].kind].name);
        if (d->present[0][i] && !d->present[1][i])
            g_ptr_array_add(missing, (gpointer)kinds[d->f[i].kind].name);
    }
    g_ptr_array_sort(added, cmp_names);
    g_ptr_array_sort(missing, cmp_names);
    for (int pass = 0; pass < 2; pass++) {
        GPtrArray *names = pass ? missing : added;
        for (guint n = 0; n < names->len; n++)
            for (int i = 0; i < d->n; i++) {
                if (strcmp(kinds[d->f[i].kind].name, g_ptr_array_index(names, n)) != 0 ||
                    d->present[0][i] == d->present[1][i])
                    continue;
                ClSynthChange c = { pass ? CL_SYNTH_CHANGE_REMOVE : CL_SYNTH_CHANGE_ADD, 1,
                                    pass ? index[0][i] : -1, pass ? -1 : index[1][i] };
                g_array_append_val(s->changes, c);
            }
    }
    s->quantity = CL_SYNTH_QUANTITY_NONE;
    g_autofree char *answer = answer_text(added, missing);
    s->conversation = cl_chat_describe_conversation(CL_CHAT_DOMAIN_RADIOGRAPH, 2, NULL, error);
    g_assert(s->conversation); /* a fixed, valid request */
    cl_chat_conversation_add(s->conversation, CL_CHAT_ASSISTANT, answer);

    acquisitions(d, rng, opts);
    drawing->draw = draw;
    drawing->data = d;
    drawing->free_data = g_free;
    return TRUE;
}

/* ---- reading a sample back ------------------------------------------------------------------- */

char *cl_synth_radiograph_location(const ClSynthSample *s, int image, int index)
{
    g_return_val_if_fail(s && image >= 0 && image < s->n_images, NULL);
    g_return_val_if_fail(index >= 0 && (guint)index < s->objects[image]->len, NULL);
    const ClSynthObject *o = &g_array_index(s->objects[image], ClSynthObject, index);
    double w = s->images ? s->images[image].width : 0, h = s->images ? s->images[image].height : 0;
    int k = kind_of(o);
    switch (k) {
    case F_EDEMA: return g_strdup("bilateral perihilar");
    case F_VASCULAR_CONGESTION: return g_strdup("bilateral hilar and upper zones");
    case F_CARDIOMEGALY: return g_strdup("cardiac");
    case F_HERNIA: return g_strdup("retrocardiac");
    case F_PNEUMOMEDIASTINUM: return g_strdup("mediastinal");
    case F_CALCIFICATION: return g_strdup("aortic knob");
    case F_GASTRIC_DISTENTION: return g_strdup("left upper quadrant");
    case -1: return NULL;
    default: break;
    }
    /* PA film: the patient's right is on the viewer's left */
    const char *side = o->x < w / 2 ? "right" : "left";
    if (k == F_FRACTURE)
        return g_strdup_printf("%s lateral ribs", side);
    if (k == F_BLUNTING)
        return g_strdup_printf("%s costophrenic angle", side);
    const char *zone = o->y < 0.32 * h ? "upper" : o->y < 0.48 * h ? "middle" : "lower";
    return g_strdup_printf("%s %s zone", side, zone);
}

static void findings_json(JsonBuilder *b, const ClSynthSample *s, int image)
{
    json_builder_begin_array(b);
    for (guint i = 0; i < s->objects[image]->len; i++) {
        const ClSynthObject *o = &g_array_index(s->objects[image], ClSynthObject, i);
        g_autofree char *loc = cl_synth_radiograph_location(s, image, (int)i);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "finding");
        json_builder_add_string_value(b, cl_synth_radiograph_finding(o));
        json_builder_set_member_name(b, "location");
        json_builder_add_string_value(b, loc);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

JsonNode *cl_synth_radiograph_answer_json(const ClSynthSample *s)
{
    g_return_val_if_fail(s && s->n_images == 2 && s->task &&
                             (strcmp(s->task, "radiograph") == 0 ||
                              strcmp(s->task, "radiograph-history") == 0),
                         NULL);
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    for (int pass = 0; pass < 2; pass++) {
        json_builder_set_member_name(b, pass ? "missing" : "added");
        json_builder_begin_array(b);
        for (guint i = 0; i < s->changes->len; i++) {
            const ClSynthChange *c = &g_array_index(s->changes, ClSynthChange, i);
            if ((c->type == CL_SYNTH_CHANGE_REMOVE) != pass)
                continue;
            int img = pass ? 0 : 1, idx = pass ? c->before : c->after;
            json_builder_add_string_value(
                b, cl_synth_radiograph_finding(&g_array_index(s->objects[img], ClSynthObject, idx)));
        }
        json_builder_end_array(b);
    }
    json_builder_set_member_name(b, "text");
    json_builder_add_string_value(b, s->answer);
    json_builder_set_member_name(b, "reference");
    findings_json(b, s, 0);
    json_builder_set_member_name(b, "main");
    findings_json(b, s, 1);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* ---- radiograph-history: the pair with the patient's earlier reports --------------------------- */

/* The radiograph pair, and the reports of 1-3 earlier studies as text read with the films (the
 * context of cl_chat_with_context): each dated, listing the findings of the prior film reported
 * by then (each finding from a drawn study on). The answer is the radiograph answer and, for
 * every finding on both films, since when it is reported: "… the pleural effusion in the right
 * lower zone is reported since 2024-03-02 ." Those dates are only in the reports. */
gboolean cl_synth_radiograph_history_generate(ClSynthSample *s, ClSynthRng *rng,
                                              const ClSynthOptions *opts,
                                              ClSynthDrawing *drawing, GError **error)
{
    if (!cl_synth_radiograph_generate(s, rng, opts, drawing, error))
        return FALSE;
    const Drawing *d = drawing->data;
    const int K = cl_synth_rng_int(rng, 1, 3);
    char date[3][16];
    GDate *g = g_date_new_dmy(1, G_DATE_JANUARY, 2016);
    g_date_add_days(g, (guint)cl_synth_rng_int(rng, 0, 2500));
    for (int j = 0; j < K; j++) {
        if (j)
            g_date_add_days(g, (guint)cl_synth_rng_int(rng, 30, 400));
        g_date_strftime(date[j], sizeof date[j], "%Y-%m-%d", g);
    }
    g_date_free(g);
    /* each finding of the prior film: the study it is first reported in (its index in the prior
     * film's object list for its location) */
    int onset[MAX_FINDINGS], obj[MAX_FINDINGS];
    for (int i = 0, o = 0; i < d->n; i++) {
        obj[i] = d->present[0][i] ? o++ : -1;
        onset[i] = cl_synth_rng_int(rng, 0, K - 1);
    }
    GString *ctx = g_string_new(NULL);
    for (int j = 0; j < K; j++) {
        g_string_append_printf(ctx, "%sreport of %s : ", j ? "\n" : "", date[j]);
        int listed = 0;
        for (int i = 0; i < d->n; i++) {
            if (obj[i] < 0 || onset[i] > j)
                continue;
            g_autofree char *where = cl_synth_radiograph_location(s, 0, obj[i]);
            g_string_append_printf(ctx, "%s%s in the %s", listed++ ? " ; " : "",
                                   kinds[d->f[i].kind].name, where);
        }
        g_string_append(ctx, listed ? " ." : "no finding .");
    }
    gsize n_turns = cl_chat_conversation_len(s->conversation);
    const ClChatTurn *t = cl_chat_conversation_turns(s->conversation);
    GString *answer = g_string_new(t[n_turns - 1].text); /* the radiograph answer */
    for (int i = 0; i < d->n; i++)
        if (obj[i] >= 0 && d->present[1][i]) {
            g_autofree char *where = cl_synth_radiograph_location(s, 0, obj[i]);
            g_string_append_printf(answer, " the %s in the %s is reported since %s .",
                                   kinds[d->f[i].kind].name, where, date[onset[i]]);
        }
    cl_synth_replace_answer(s, answer->str);
    s->context = g_string_free(ctx, FALSE);
    g_string_free(answer, TRUE);
    return TRUE;
}
