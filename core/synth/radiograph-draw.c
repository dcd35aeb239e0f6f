/* radiograph-draw.c - the `radiograph` task's film drawn with Cairo: the anatomy (lungs,
 * mediastinum, heart, ribs, diaphragm), each finding of Table 18, the acquisition transform and
 * exposure curve. Everything is drawn in pixels from the Drawing (radiograph-private.h). */
#include "synth/radiograph-private.h"

#include <math.h>

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

LungX cl_radiograph_lung_x(const Drawing *d, int side)
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
    LungX l = cl_radiograph_lung_x(d, side);
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
    LungX l = cl_radiograph_lung_x(d, side);
    double m = -SG(side), h = d->h, w = d->w, apex = d->an.apex * h;
    double cp = d->an.cp[side] * h;
    cairo_new_sub_path(cr);
    cairo_move_to(cr, l.xi, d->an.dome[side] * h + 0.035 * h);
    cairo_line_to(cr, l.xi, apex + 0.08 * h);
    cairo_curve_to(cr, l.xi, apex + 0.03 * h, l.xa + m * 0.04 * w, apex, l.xa, apex);
    cairo_curve_to(cr, l.xa - m * 0.09 * w, apex + 0.005 * h, l.xo - m * 0.015 * w, apex + 0.22 * h,
                   l.xo, cp);
    dome_curve(cr, d, side, FALSE);
    cairo_close_path(cr);
}

void cl_radiograph_lung_bbox(const Drawing *d, int side, double b[4])
{
    LungX l = cl_radiograph_lung_x(d, side);
    double m = -SG(side);
    b[0] = MIN(l.xi, l.xo - m * 0.02 * d->w) - 1;
    b[2] = MAX(l.xi, l.xo - m * 0.02 * d->w) + 1;
    b[1] = d->an.apex * d->h - 1;
    b[3] = d->an.cp[side] * d->h + 1;
}

Heart cl_radiograph_heart(const Drawing *d, gboolean enlarged)
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
void cl_radiograph_ellipse_bbox(double cx, double cy, double rx, double ry, double ang, double b[4])
{
    double c = cos(ang), s = sin(ang);
    double ex = sqrt(rx * rx * c * c + ry * ry * s * s),
           ey = sqrt(rx * rx * s * s + ry * ry * c * c);
    b[0] = cx - ex - 1, b[1] = cy - ey - 1, b[2] = cx + ex + 1, b[3] = cy + ey + 1;
}

/* posterior rib i on one side: a cubic from the spine to the chest wall */
void cl_radiograph_rib_curve(const Drawing *d, int side, int i, double p[8])
{
    const Anatomy *a = &d->an;
    double c = a->cx * d->w, s = SG(side), w = d->w, h = d->h;
    double y0 = (a->apex + 0.01 + i * (a->dome[0] - a->apex) * 0.1) * h;
    p[0] = c + s * 0.035 * w, p[1] = y0;
    p[2] = c + s * 0.13 * w, p[3] = y0 - 0.03 * h;
    p[4] = c + s * (a->tw - 0.02) * w, p[5] = y0 - 0.01 * h;
    p[6] = c + s * (a->tw + 0.01) * w, p[7] = y0 + (0.035 + i * 0.004) * h;
}

void cl_radiograph_bezier_at(const double p[8], double t, double out[2], double tan[2])
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
        cairo_curve_to(cr, c + s * 0.12 * w, 0.08 * h, c + s * 0.3 * w, 0.07 * h, c + s * 0.7 * w,
                       0.10 * h);
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
    Heart hh = cl_radiograph_heart(d, big);
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
    LungX l0 = cl_radiograph_lung_x(d, 0), l1 = cl_radiograph_lung_x(d, 1);
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
                cl_radiograph_rib_curve(d, side, i, rp);
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
        cairo_curve_to(cr, c + s * 0.15 * w, 0.2 * h, c + s * 0.28 * w, 0.11 * h, c + s * 0.4 * w,
                       0.13 * h);
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

/* Findings in the lung fields: atelectasis, opacity, edema, consolidation, granuloma. */
static void draw_lung_finding(cairo_t *cr, const Drawing *d, const Finding *f, ClSynthRng *r)
{
    double w = d->w, h = d->h, c = d->an.cx * w;
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
            radial_blob(cr, f->x + cl_synth_rng_range(r, -0.6, 0.6) * f->p[0],
                        f->y + cl_synth_rng_range(r, -0.6, 0.6) * f->p[1],
                        f->p[2] * cl_synth_rng_range(r, 0.7, 1.0), 0.9, 0.3);
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
        bronchograms(cr, d, f, r);
        break;
    }
    case F_GRANULOMA: /* a small calcified nodule; p: radius */
        grey(cr, 1, 0.85);
        cairo_arc(cr, f->x, f->y, f->p[0], 0, 2 * G_PI);
        cairo_fill(cr);
        break;
    default: break;
    }
}

/* Findings of the pleura: effusion, blunting, pneumothorax, pleural thickening. */
static void draw_pleural_finding(cairo_t *cr, const Drawing *d, const Finding *f)
{
    double w = d->w, h = d->h, sc = d->sc;
    int side = f->side;
    switch (f->kind) {
    case F_EFFUSION:
    case F_BLUNTING: { /* fluid below a meniscus rising to the chest wall; p: medial level, lateral level */
        LungX l = cl_radiograph_lung_x(d, side);
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
        double ax = cl_radiograph_lung_x(d, side).xi, ay = d->an.dome[side] * h + 0.02 * h;
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
    default: break;
    }
}

/* Findings of the mediastinum, bones and upper abdomen. */
static void draw_central_finding(cairo_t *cr, const Drawing *d, const Finding *f, ClSynthRng *r)
{
    double w = d->w, h = d->h, sc = d->sc, c = d->an.cx * w;
    int side = f->side;
    switch (f->kind) {
    case F_VASCULAR_CONGESTION: /* hazy, large hila and engorged upper-zone vessels */
        for (int s = 0; s < 2; s++) {
            double hx = c + SG(s) * 0.11 * w, hy = 0.41 * h;
            radial_blob(cr, hx, hy, 0.06 * w, 0.9, 0.35);
            for (int v = 0; v < 5; v++) {
                double ang = cl_synth_rng_range(r, -1.4, -0.2),
                       len = cl_synth_rng_range(r, 0.1, 0.15) * w;
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
        Heart hh = cl_radiograph_heart(d, FALSE);
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
        cl_radiograph_rib_curve(d, side, (int)f->p[0], rp);
        cl_radiograph_bezier_at(rp, f->p[1], pt, tan);
        double nx = -tan[1], ny = tan[0], half = 0.014 * h;
        cairo_move_to(cr, pt[0] - nx * half, pt[1] - ny * half);
        cairo_line_to(cr, pt[0] + nx * half, pt[1] + ny * half);
        cairo_set_line_width(cr, 1.0 * sc);
        grey(cr, 0.12, 0.85);
        cairo_stroke(cr);
        double off = 1.2 * sc, len = 0.03 * w;
        cairo_move_to(cr, pt[0] + tan[0] * 0.6 * sc + nx * off,
                      pt[1] + tan[1] * 0.6 * sc + ny * off);
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
    default: break;
    }
}

static void draw_finding(cairo_t *cr, const Drawing *d, const Finding *f)
{
    ClSynthRng r;
    cl_synth_rng_init(&r, f->seed);
    cairo_save(cr);
    box_clip(cr, f->box); /* nothing of it outside its box */
    switch (f->kind) {
    case F_ATELECTASIS:
    case F_LUNG_OPACITY:
    case F_EDEMA:
    case F_CONSOLIDATION:
    case F_GRANULOMA: draw_lung_finding(cr, d, f, &r); break;
    case F_EFFUSION:
    case F_BLUNTING:
    case F_PNEUMOTHORAX:
    case F_PLEURAL_THICKENING: draw_pleural_finding(cr, d, f); break;
    case F_CARDIOMEGALY: /* drawn with the heart */ break;
    default: draw_central_finding(cr, d, f, &r); break;
    }
    cairo_restore(cr);
}

/* Acquisition: one transform for patient rotation, distance and inspiration depth (the thorax
 * stretches down from the apices), then the film's exposure curve. */
void cl_radiograph_draw(cairo_t *cr, const ClSynthSample *s, int image, gpointer data)
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
