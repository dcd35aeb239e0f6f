/* radiograph.c - the `radiograph` task: PA chest-film phantoms (lungs, mediastinum, heart,
 * clavicles, ribs, diaphragm domes, gastric bubble, side marker) of one synthetic patient at two
 * studies, with findings of the paper's Table 18 added, resolved or persisting between the
 * reference (prior) and the main (current) film, described in the Medical-Diff-VQA template of
 * appendix B.4. Acquisition differences (exposure, rotation, inspiration) are drawn only when
 * nuisances are on; the drawing is radiograph-draw.c, the DICOM writer radiograph-dicom.cc. */
#include "synth/radiograph.h"
#include "synth/radiograph-private.h"

#include <math.h>
#include <string.h>

/* ---- findings -------------------------------------------------------------------------------- */

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

static double zone_y(const Drawing *d, int zone)
{
    return zone_frac(&d->an, zone) * d->h;
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
        LungX l = cl_radiograph_lung_x(d, f->side);
        cl_radiograph_lung_bbox(d, f->side, lb);
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
        LungX l = cl_radiograph_lung_x(d, f->side);
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
            LungX l = cl_radiograph_lung_x(d, f->side);
            f->x = l.xo - SG(f->side) * 0.04 * w; /* the angle itself */
        }
        set_box(f, lb[0], f->p[1] - 1, lb[2], lb[3]);
        if (f->kind == F_BLUNTING) {
            LungX l = cl_radiograph_lung_x(d, f->side);
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
        Heart hh = cl_radiograph_heart(d, TRUE);
        f->x = hh.cx, f->y = hh.cy;
        cl_radiograph_ellipse_bbox(hh.cx, hh.cy, hh.rx, hh.ry, hh.angle, f->box);
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
        set_box(f, f->x - f->p[0] - 1.5 * sc, f->y - f->p[0] - 1.5 * sc, f->x + f->p[0] + 1.5 * sc,
                f->y + f->p[0] + 1.5 * sc);
        break;
    case F_PNEUMOMEDIASTINUM: {
        Heart hh = cl_radiograph_heart(d, FALSE);
        double b[4];
        cl_radiograph_ellipse_bbox(hh.cx, hh.cy, hh.rx + 1.5 * sc, hh.ry + 1.5 * sc, hh.angle, b);
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
        cl_radiograph_rib_curve(d, f->side, (int)f->p[0], rp);
        cl_radiograph_bezier_at(rp, f->p[1], pt, tan);
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
    default: break;
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
    drawing->draw = cl_radiograph_draw;
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
    if (opts->changed_only || cl_synth_rng_int(rng, 0, 99) >= 15) {
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
    drawing->draw = cl_radiograph_draw;
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
    g_return_val_if_fail(
        s && s->n_images == 2 && s->task &&
            (strcmp(s->task, "radiograph") == 0 || strcmp(s->task, "radiograph-history") == 0),
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
            json_builder_add_string_value(b, cl_synth_radiograph_finding(&g_array_index(
                                                 s->objects[img], ClSynthObject, idx)));
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
                                              const ClSynthOptions *opts, ClSynthDrawing *drawing,
                                              GError **error)
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
