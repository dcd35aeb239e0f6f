/* register.c - image alignment: coarse NCC translation search, then Lucas-Kanade (forward
 * additive, with a gain and a bias for exposure differences) over a pyramid. */
#include "align/register.h"

#include <math.h>
#include <string.h>

#include "image/display.h"

#define WORK_SIDE 512 /* the finest level's longest side */
#define COARSE_SIDE 64
#define MAX_LEVELS 8
#define ITERATIONS 30

typedef struct {
    int w, h;
    float *p;      /* grey 0..1, row-major */
    double sx, sy; /* level pixels per full-resolution pixel, per axis */
} Grey;

static void grey_clear(Grey *g)
{
    g_clear_pointer(&g->p, g_free);
}

/* The frame's display image, box-averaged to at most WORK_SIDE a side, as luminance. */
static gboolean grey_from_image(const ClImage *img, guint frame, Grey *out, GCancellable *c,
                                GError **error)
{
    ClDisplaySettings s;
    cl_display_settings_init(&s, img, frame);
    guint step = 1;
    while (img->width / step > WORK_SIDE || img->height / step > WORK_SIDE)
        step *= 2;
    guint w, h;
    g_autofree guint8 *rgba = cl_display_render_rgba_region(img, frame, &s, NULL, 0, 0, img->width,
                                                            img->height, step, &w, &h, c, error);
    if (!rgba)
        return FALSE;
    out->w = (int)w, out->h = (int)h;
    out->p = g_try_new(float, (gsize)w *h);
    if (!out->p) {
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_NO_SPACE, "not enough memory to align");
        return FALSE;
    }
    for (gsize i = 0; i < (gsize)w * h; i++) {
        const guint8 *q = rgba + i * 4;
        out->p[i] = (float)((0.299 * q[0] + 0.587 * q[1] + 0.114 * q[2]) / 255.0 * (q[3] / 255.0));
    }
    out->sx = out->sy = 1.0 / step; /* output pixel k covers [k step, (k + 1) step) */
    return TRUE;
}

static Grey grey_halve(const Grey *g)
{
    /* level pixel k covers pixels 2k and 2k + 1: coordinates halve exactly */
    Grey o = { (g->w + 1) / 2, (g->h + 1) / 2, NULL, g->sx / 2, g->sy / 2 };
    o.p = g_new(float, (gsize)o.w * o.h);
    for (int y = 0; y < o.h; y++)
        for (int x = 0; x < o.w; x++) {
            double s = 0;
            int n = 0;
            for (int dy = 0; dy < 2 && 2 * y + dy < g->h; dy++)
                for (int dx = 0; dx < 2 && 2 * x + dx < g->w; dx++)
                    s += g->p[(gsize)(2 * y + dy) * g->w + 2 * x + dx], n++;
            o.p[(gsize)y * o.w + x] = (float)(s / n);
        }
    return o;
}

/* Bilinear sample at continuous coordinates (pixel centres at +0.5); FALSE outside. */
static inline gboolean sample(const Grey *g, double cx, double cy, double *v, double *gx,
                              double *gy)
{
    double fx = cx - 0.5, fy = cy - 0.5;
    if (fx < 0 || fy < 0 || fx > g->w - 1 || fy > g->h - 1)
        return FALSE;
    int x0 = (int)fx, y0 = (int)fy;
    int x1 = MIN(x0 + 1, g->w - 1), y1 = MIN(y0 + 1, g->h - 1);
    double ax = fx - x0, ay = fy - y0;
    const float *r0 = g->p + (gsize)y0 * g->w, *r1 = g->p + (gsize)y1 * g->w;
    double a = r0[x0], b = r0[x1], c = r1[x0], d = r1[x1];
    *v = (a * (1 - ax) + b * ax) * (1 - ay) + (c * (1 - ax) + d * ax) * ay;
    if (gx) {
        *gx = (b - a) * (1 - ay) + (d - c) * ay;
        *gy = (c - a) * (1 - ax) + (d - b) * ax;
    }
    return TRUE;
}

/* The full-resolution map (m) as a map between level pixels of f and mv. */
static void level_map(const double m[6], const Grey *f, const Grey *mv, double l[6])
{
    /* full fixed u = x / f->sx; moving level = mv->s * (m applied to u) */
    l[0] = mv->sx * m[0], l[1] = mv->sx * m[1] / f->sx, l[2] = mv->sx * m[2] / f->sy;
    l[3] = mv->sy * m[3], l[4] = mv->sy * m[4] / f->sx, l[5] = mv->sy * m[5] / f->sy;
}

static void full_map(const double l[6], const Grey *f, const Grey *mv, double m[6])
{
    m[0] = l[0] / mv->sx, m[1] = l[1] * f->sx / mv->sx, m[2] = l[2] * f->sy / mv->sx;
    m[3] = l[3] / mv->sy, m[4] = l[4] * f->sx / mv->sy, m[5] = l[5] * f->sy / mv->sy;
}

/* NCC between f and mv warped by the level map l, over the overlap; *overlap its share of f. */
static double ncc(const Grey *f, const Grey *mv, const double l[6], double *overlap)
{
    double sf = 0, sm = 0, sff = 0, smm = 0, sfm = 0;
    gsize n = 0;
    for (int y = 0; y < f->h; y++)
        for (int x = 0; x < f->w; x++) {
            double cx = x + 0.5, cy = y + 0.5, v;
            if (!sample(mv, l[0] + l[1] * cx + l[2] * cy, l[3] + l[4] * cx + l[5] * cy, &v, NULL,
                        NULL))
                continue;
            double a = f->p[(gsize)y * f->w + x];
            sf += a, sm += v, sff += a * a, smm += v * v, sfm += a * v, n++;
        }
    if (overlap)
        *overlap = (double)n / ((double)f->w * f->h);
    if (n < 16)
        return -1;
    double cov = sfm - sf * sm / n, vf = sff - sf * sf / n, vm = smm - sm * sm / n;
    if (vf <= 1e-12 || vm <= 1e-12)
        return 0;
    return cov / sqrt(vf * vm);
}

/* Solves the n × n system a x = b in place (partial pivoting); FALSE when singular. */
static gboolean solve(double *a, double *b, int n)
{
    for (int c = 0; c < n; c++) {
        int p = c;
        for (int r = c + 1; r < n; r++)
            if (fabs(a[r * n + c]) > fabs(a[p * n + c]))
                p = r;
        if (fabs(a[p * n + c]) < 1e-12)
            return FALSE;
        if (p != c) {
            for (int k = 0; k < n; k++) {
                double t = a[c * n + k];
                a[c * n + k] = a[p * n + k], a[p * n + k] = t;
            }
            double t = b[c];
            b[c] = b[p], b[p] = t;
        }
        for (int r = c + 1; r < n; r++) {
            double f = a[r * n + c] / a[c * n + c];
            for (int k = c; k < n; k++)
                a[r * n + k] -= f * a[c * n + k];
            b[r] -= f * b[c];
        }
    }
    for (int c = n - 1; c >= 0; c--) {
        double s = b[c];
        for (int k = c + 1; k < n; k++)
            s -= a[c * n + k] * b[k];
        b[c] = s / a[c * n + c];
    }
    return TRUE;
}

/* The linear part made a rotation (times the size ratio `ratio`, per axis). */
static void make_rigid(double l[6], double rx, double ry)
{
    double a = l[1] / rx, b = l[2] / rx, c = l[4] / ry, d = l[5] / ry;
    double th = atan2(c - b, a + d);
    l[1] = rx * cos(th), l[2] = -rx * sin(th), l[4] = ry * sin(th), l[5] = ry * cos(th);
}

/* Gauss-Newton on the level map: residual gain * M(W(x)) + bias - F(x). */
static void refine(const Grey *f, const Grey *mv, double l[6], ClRegisterModel model, double rx,
                   double ry)
{
    double gain = 1, bias = 0;
    for (int it = 0; it < ITERATIONS; it++) {
        double H[64] = { 0 }, g[8] = { 0 };
        gsize n = 0;
        for (int y = 0; y < f->h; y++)
            for (int x = 0; x < f->w; x++) {
                double cx = x + 0.5, cy = y + 0.5, v, gx, gy;
                if (!sample(mv, l[0] + l[1] * cx + l[2] * cy, l[3] + l[4] * cx + l[5] * cy, &v, &gx,
                            &gy))
                    continue;
                double r = gain * v + bias - f->p[(gsize)y * f->w + x];
                double J[8] = { gain * gx,
                                gain * gx * cx,
                                gain * gx * cy,
                                gain * gy,
                                gain * gy * cx,
                                gain * gy * cy,
                                v,
                                1 };
                for (int i = 0; i < 8; i++) {
                    g[i] += J[i] * r;
                    for (int k = i; k < 8; k++)
                        H[i * 8 + k] += J[i] * J[k];
                }
                n++;
            }
        if (n < 64)
            return;
        for (int i = 0; i < 8; i++)
            for (int k = 0; k < i; k++)
                H[i * 8 + k] = H[k * 8 + i];
        if (model == CL_REGISTER_TRANSLATION) {
            /* only m0, m3, gain, bias move: pin the linear part */
            for (int i = 0; i < 8; i++)
                if (i == 1 || i == 2 || i == 4 || i == 5) {
                    for (int k = 0; k < 8; k++)
                        H[i * 8 + k] = H[k * 8 + i] = 0;
                    H[i * 8 + i] = 1, g[i] = 0;
                }
        }
        for (int i = 0; i < 8; i++)
            H[i * 8 + i] *= 1.0 + 1e-6; /* a touch of damping */
        if (!solve(H, g, 8))
            return;
        for (int i = 0; i < 6; i++)
            l[i] -= g[i];
        gain -= g[6], bias -= g[7];
        if (model == CL_REGISTER_RIGID)
            make_rigid(l, rx, ry);
        if (fabs(g[0]) < 1e-3 && fabs(g[3]) < 1e-3 &&
            fabs(g[1]) + fabs(g[2]) + fabs(g[4]) + fabs(g[5]) < 1e-5)
            break;
    }
}

void cl_registration_identity(ClRegistration *r, guint fw, guint fh, guint mw, guint mh)
{
    memset(r, 0, sizeof *r);
    r->m[1] = (double)mw / MAX(fw, 1);
    r->m[5] = (double)mh / MAX(fh, 1);
    r->overlap = 1;
}

void cl_registration_apply(const ClRegistration *r, double x, double y, double *mx, double *my)
{
    *mx = r->m[0] + r->m[1] * x + r->m[2] * y;
    *my = r->m[3] + r->m[4] * x + r->m[5] * y;
}

gboolean cl_register_images(const ClImage *fixed, guint ff, const ClImage *moving, guint mf,
                            ClRegisterModel model, ClRegistration *out, GCancellable *cancellable,
                            GError **error)
{
    g_return_val_if_fail(fixed && moving && out, FALSE);
    cl_registration_identity(out, fixed->width, fixed->height, moving->width, moving->height);
    Grey F[MAX_LEVELS] = { 0 }, M[MAX_LEVELS] = { 0 };
    int n = 1;
    gboolean ok = FALSE;
    if (!grey_from_image(fixed, ff, &F[0], cancellable, error) ||
        !grey_from_image(moving, mf, &M[0], cancellable, error))
        goto done;
    while (n < MAX_LEVELS && MAX(F[n - 1].w, F[n - 1].h) > COARSE_SIDE &&
           MIN(M[n - 1].w, M[n - 1].h) > 16 && MIN(F[n - 1].w, F[n - 1].h) > 16) {
        F[n] = grey_halve(&F[n - 1]);
        M[n] = grey_halve(&M[n - 1]);
        n++;
    }
    /* the stretch, the quality before alignment */
    double l[6], m[6];
    memcpy(m, out->m, sizeof m);
    level_map(m, &F[0], &M[0], l);
    out->before = ncc(&F[0], &M[0], l, NULL);

    /* coarse: every integer shift within a quarter of the size */
    const Grey *cf = &F[n - 1], *cm = &M[n - 1];
    level_map(m, cf, cm, l);
    double best = -2, bx = 0, by = 0;
    int rx = cm->w / 4, ry = cm->h / 4;
    for (int dy = -ry; dy <= ry; dy++) {
        if (g_cancellable_set_error_if_cancelled(cancellable, error))
            goto done;
        for (int dx = -rx; dx <= rx; dx++) {
            double t[6] = { l[0] + dx, l[1], l[2], l[3] + dy, l[4], l[5] };
            double ov, v = ncc(cf, cm, t, &ov);
            if (ov >= 0.5 && v > best)
                best = v, bx = dx, by = dy;
        }
    }
    l[0] += bx, l[3] += by;
    full_map(l, cf, cm, m);

    /* fine: Gauss-Newton per level, coarse to fine */
    double ratio_x = out->m[1], ratio_y = out->m[5];
    for (int lev = n - 1; lev >= 0; lev--) {
        if (g_cancellable_set_error_if_cancelled(cancellable, error))
            goto done;
        level_map(m, &F[lev], &M[lev], l);
        refine(&F[lev], &M[lev], l, model, ratio_x * M[lev].sx / F[lev].sx,
               ratio_y * M[lev].sy / F[lev].sy);
        full_map(l, &F[lev], &M[lev], m);
    }
    level_map(m, &F[0], &M[0], l);
    double ov, q = ncc(&F[0], &M[0], l, &ov);
    if (q > out->before + 1e-3 && ov >= 0.25) {
        memcpy(out->m, m, sizeof m);
        out->quality = q;
        out->overlap = ov;
        out->improved = TRUE;
    } else {
        out->quality = out->before;
    }
    ok = TRUE;
done:
    for (int i = 0; i < MAX_LEVELS; i++)
        grey_clear(&F[i]), grey_clear(&M[i]);
    return ok;
}
