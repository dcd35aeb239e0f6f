/* radiograph-private.h - what the `radiograph` task's generator (radiograph.c) and its drawing
 * (radiograph-draw.c) share: the findings, the patient's anatomy, the geometry the findings are
 * placed by and the drawing callback. */
#pragma once

#include <cairo.h>

#include "synth/synth-private.h"

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

typedef struct {
    Kind kind;
    int side;      /* 0 right, 1 left; -1 for the midline and bilateral findings */
    guint8 zones;  /* lung zones it covers on its side (lateral findings) */
    int zone;      /* 0..2, the zone it is named by; -1 */
    double x, y;   /* anchor, pixels */
    double p[4];   /* kind-specific sizes, pixels (see the drawing in radiograph-draw.c) */
    guint64 seed;  /* its own pattern (patchy opacities, bronchograms, vessels) */
    double box[4]; /* everything drawn for it, pixels, before the nuisance margin */
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

/* ---- anatomy geometry (pixels) ---- */

#define SG(side) ((side) ? 1.0 : -1.0) /* towards the patient's left = the viewer's right */

typedef struct {
    double xi, xo, xt, xa; /* medial border, chest wall, dome top, apex top */
} LungX;

LungX cl_radiograph_lung_x(const Drawing *d, int side);
void cl_radiograph_lung_bbox(const Drawing *d, int side, double b[4]);

typedef struct {
    double cx, cy, rx, ry, angle;
} Heart;

Heart cl_radiograph_heart(const Drawing *d, gboolean enlarged);
/* the bounding box of a rotated ellipse */
void cl_radiograph_ellipse_bbox(double cx, double cy, double rx, double ry, double ang,
                                double b[4]);
/* posterior rib i on one side: a cubic from the spine to the chest wall */
void cl_radiograph_rib_curve(const Drawing *d, int side, int i, double p[8]);
/* the point at t of a cubic and its unit tangent */
void cl_radiograph_bezier_at(const double p[8], double t, double out[2], double tan[2]);

/* The ClSynthDrawFunc of the task: the film of image `image` with its findings, through the
 * image's acquisition (data: the Drawing). */
void cl_radiograph_draw(cairo_t *cr, const ClSynthSample *s, int image, gpointer data);
