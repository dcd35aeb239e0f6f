/* dots.c - the `dots` task (the SVE paper's cross-image spatial aggregation, appendix B.1): one red
 * dot per image over a screen-like background, 2-5 images; the answer is the normalised distance
 * between two dots or the normalised convex-hull area of 3-5, to 4 decimals. */
#include "synth/synth-private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FRAME_MARGIN 3.0 /* dots stay this far inside the frame (the shift is at most 2) */

static const char *const counts[] = { NULL, NULL, "two", "three", "four", "five" };

/* the paper's system prompts, by number of images */
static const char *const system_prompts[] = {
    NULL,
    NULL,
    "You are a visual distance estimator. You are shown two screenshots, each with a red dot. "
    "Your task is to estimate the normalized Euclidean distance between the red dots across the "
    "two images. The distance is normalized to [0, 1] where 0 means the dots are at the same "
    "position and 1 means they are at opposite corners. Output only the distance as a decimal "
    "number rounded to 4 decimal places.",
    "You are a visual area estimator. You are shown three screenshots, each with a red dot. Your "
    "task is to estimate the normalized area of the triangle formed by the red dots across the "
    "three images. The area is normalized by the full image area, so it ranges from 0 to 0.5. "
    "Output only the area as a decimal number rounded to 4 decimal places.",
    "You are a visual area estimator. You are shown four screenshots, each with a red dot. Your "
    "task is to estimate the area of the convex hull formed by the red dots across the four "
    "images. The area is normalized by the full image area. Output only the area as a decimal "
    "number rounded to 4 decimal places.",
    "You are a visual area estimator. You are shown five screenshots, each with a red dot. Your "
    "task is to estimate the area of the convex hull formed by the red dots across the five "
    "images. The area is normalized by the full image area. Output only the area as a decimal "
    "number rounded to 4 decimal places.",
};

#define IMAGE_TEXT "A red dot is placed on this screenshot."
#define FILLER "I see the red dot on the screenshot."

/* ---- geometry -------------------------------------------------------------------------------- */

static double cross(const double *o, const double *a, const double *b)
{
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]);
}

static int cmp_point(const void *a, const void *b)
{
    const double *p = a, *q = b;
    if (p[0] != q[0])
        return p[0] < q[0] ? -1 : 1;
    return p[1] < q[1] ? -1 : p[1] > q[1];
}

/* Convex-hull area of n (<= 8) points: Andrew's monotone chain, then the shoelace formula. */
static double hull_area(const double (*pts)[2], int n)
{
    double p[8][2], hull[17][2];
    g_assert(n <= 8);
    memcpy(p, pts, sizeof(double) * 2 * n);
    qsort(p, n, sizeof p[0], cmp_point);
    int k = 0;
    for (int i = 0; i < n; i++) {
        while (k >= 2 && cross(hull[k - 2], hull[k - 1], p[i]) <= 0)
            k--;
        memcpy(hull[k++], p[i], sizeof p[i]);
    }
    for (int i = n - 2, lo = k + 1; i >= 0; i--) {
        while (k >= lo && cross(hull[k - 2], hull[k - 1], p[i]) <= 0)
            k--;
        memcpy(hull[k++], p[i], sizeof p[i]);
    }
    double a = 0;
    for (int i = 0; i + 1 < k; i++)
        a += hull[i][0] * hull[i + 1][1] - hull[i + 1][0] * hull[i][1];
    return fabs(a) / 2;
}

/* ---- background ------------------------------------------------------------------------------ */

/* accents of a desktop: blues, greens, teal, violet, amber, greys; no red a dot could hide in */
static const double accents[][3] = {
    { 0.20, 0.45, 0.85 }, { 0.22, 0.60, 0.35 }, { 0.10, 0.58, 0.60 }, { 0.50, 0.36, 0.76 },
    { 0.95, 0.72, 0.22 }, { 0.45, 0.48, 0.52 }, { 0.28, 0.32, 0.40 }, { 0.62, 0.78, 0.95 },
};

typedef struct {
    guint64 seed; /* the background is redrawn from it, identically, for every image */
    double scale;
    double radius; /* the dot's */
} DotsDrawing;

static void set_accent(cairo_t *cr, ClSynthRng *rng, double k)
{
    const double *a = accents[cl_synth_rng_int(rng, 0, G_N_ELEMENTS(accents) - 1)];
    cairo_set_source_rgb(cr, MIN(1, a[0] * k), MIN(1, a[1] * k), MIN(1, a[2] * k));
}

static void text_lines(cairo_t *cr, ClSynthRng *rng, double x, double y, double w, double h,
                       double u, gboolean dark)
{
    double line = 4.5 * u;
    for (double ty = y + 2 * u; ty + 2 * u < y + h; ty += line) {
        double tw = w * cl_synth_rng_range(rng, 0.3, 0.95);
        double g = dark ? cl_synth_rng_range(rng, 0.65, 0.85) : cl_synth_rng_range(rng, 0.2, 0.45);
        cairo_set_source_rgb(cr, g, g, g);
        for (double tx = x; tx < x + tw;) { /* words */
            double ww = MIN(cl_synth_rng_range(rng, 3, 11) * u, x + tw - tx);
            cairo_rectangle(cr, tx, ty, ww, 1.6 * u);
            tx += ww + 1.5 * u;
        }
        cairo_fill(cr);
    }
}

static void window(cairo_t *cr, ClSynthRng *rng, int w, int h, double u, gboolean dark)
{
    double ww = cl_synth_rng_range(rng, 0.35, 0.8) * w, wh = cl_synth_rng_range(rng, 0.3, 0.75) * h;
    double x = cl_synth_rng_range(rng, -0.1 * w, w - 0.6 * ww);
    double y = cl_synth_rng_range(rng, 0, h - 0.5 * wh);
    double bar = 6 * u;
    cairo_set_source_rgba(cr, 0, 0, 0, 0.25); /* drop shadow */
    cairo_rectangle(cr, x + 2 * u, y + 2 * u, ww, wh);
    cairo_fill(cr);
    double body = dark ? cl_synth_rng_range(rng, 0.16, 0.26) : cl_synth_rng_range(rng, 0.93, 1.0);
    cairo_set_source_rgb(cr, body, body, body);
    cairo_rectangle(cr, x, y, ww, wh);
    cairo_fill(cr);
    set_accent(cr, rng, dark ? 0.7 : 1.0);
    cairo_rectangle(cr, x, y, ww, bar);
    cairo_fill(cr);
    int layout = cl_synth_rng_int(rng, 0, 2);
    double cx = x + 3 * u, cy = y + bar + 2 * u, cw = ww - 6 * u, ch = wh - bar - 4 * u;
    if (layout == 1) { /* sidebar of icons */
        for (double iy = cy; iy + 5 * u < cy + ch; iy += 8 * u) {
            set_accent(cr, rng, 1.0);
            cairo_rectangle(cr, cx, iy, 5 * u, 5 * u);
            cairo_fill(cr);
        }
        cx += 9 * u, cw -= 9 * u;
    } else if (layout == 2 && ch > 20 * u) { /* a picture above the text */
        cairo_pattern_t *p = cairo_pattern_create_linear(cx, cy, cx + cw, cy + 14 * u);
        const double *a = accents[cl_synth_rng_int(rng, 0, G_N_ELEMENTS(accents) - 1)];
        const double *b = accents[cl_synth_rng_int(rng, 0, G_N_ELEMENTS(accents) - 1)];
        cairo_pattern_add_color_stop_rgb(p, 0, a[0], a[1], a[2]);
        cairo_pattern_add_color_stop_rgb(p, 1, b[0], b[1], b[2]);
        cairo_rectangle(cr, cx, cy, cw, 14 * u);
        cairo_set_source(cr, p);
        cairo_fill(cr);
        cairo_pattern_destroy(p);
        cy += 17 * u, ch -= 17 * u;
    }
    text_lines(cr, rng, cx, cy, cw, ch, u, dark);
    int buttons = cl_synth_rng_int(rng, 0, 2);
    for (int i = 0; i < buttons; i++) {
        set_accent(cr, rng, 1.0);
        cairo_rectangle(cr, x + ww - (i + 1) * 16 * u, y + wh - 8 * u, 13 * u, 5 * u);
        cairo_fill(cr);
    }
}

static void draw(cairo_t *cr, const ClSynthSample *s, int image, gpointer data)
{
    const DotsDrawing *d = data;
    int w = s->images[image].width, h = s->images[image].height;
    double u = d->scale;
    ClSynthRng rng;
    cl_synth_rng_init(&rng, d->seed);
    gboolean dark = cl_synth_rng_int(&rng, 0, 2) == 0;
    /* wallpaper: a two-colour gradient */
    cairo_pattern_t *p = cairo_pattern_create_linear(0, 0, w, h);
    for (int i = 0; i < 2; i++) {
        const double *a = accents[cl_synth_rng_int(&rng, 0, G_N_ELEMENTS(accents) - 1)];
        double k = dark ? 0.45 : 0.9;
        cairo_pattern_add_color_stop_rgb(p, i, a[0] * k, a[1] * k, a[2] * k);
    }
    cairo_rectangle(cr, -16, -16, w + 32, h + 32);
    cairo_set_source(cr, p);
    cairo_fill(cr);
    cairo_pattern_destroy(p);
    /* desktop icons down the left, windows, a top bar */
    for (double iy = 12 * u; iy < h - 8 * u; iy += 14 * u) {
        set_accent(cr, &rng, 1.0);
        cairo_rectangle(cr, 4 * u, iy, 7 * u, 7 * u);
        cairo_fill(cr);
    }
    int n = cl_synth_rng_int(&rng, 1, 4);
    for (int i = 0; i < n; i++)
        window(cr, &rng, w, h, u, dark);
    double g = dark ? 0.08 : 0.85;
    cairo_set_source_rgb(cr, g, g, g);
    cairo_rectangle(cr, -16, -16, w + 32, 16 + 7 * u);
    cairo_fill(cr);
    text_lines(cr, &rng, w * 0.35, 0, w * 0.3, 7 * u, u * 0.8, dark);

    const ClSynthObject *dot = &g_array_index(s->objects[image], ClSynthObject, 0);
    cairo_set_source_rgb(cr, 1, 0, 0);
    cairo_arc(cr, dot->x, dot->y, d->radius, 0, 2 * G_PI);
    cairo_fill(cr);
}

/* ---- the task -------------------------------------------------------------------------------- */

/* One red dot anywhere inside the frame, with its box (radius plus antialiasing). */
ClSynthObject cl_synth_dots_place(ClSynthRng *rng, int w, int h, double radius)
{
    double r = radius, lo = FRAME_MARGIN + r + 1.5;
    ClSynthObject o = { .shape = CL_SYNTH_SHAPE_DOT };
    o.x = cl_synth_rng_range(rng, lo, w - lo);
    o.y = cl_synth_rng_range(rng, lo, h - lo);
    o.box[0] = o.x - r - 1.5, o.box[1] = o.y - r - 1.5;
    o.box[2] = o.x + r + 1.5, o.box[3] = o.y + r + 1.5;
    return o;
}

void cl_synth_dots_drawing(ClSynthDrawing *drawing, guint64 background_seed, double scale,
                           double radius)
{
    DotsDrawing *d = g_new(DotsDrawing, 1);
    d->seed = background_seed;
    d->scale = scale;
    d->radius = radius;
    drawing->draw = draw;
    drawing->data = d;
    drawing->free_data = g_free;
}

gboolean cl_synth_dots_generate(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                                ClSynthDrawing *drawing, GError **error)
{
    (void)error;
    int w = opts->width, h = opts->height;
    double u = cl_synth_scale(s, opts);
    int n = opts->n_images ? opts->n_images : cl_synth_rng_int(rng, 2, 5);
    s->n_images = n;
    s->objects = g_new0(GArray *, n);
    double pts[5][2], radius = cl_synth_dot_radius(s, opts);
    for (int k = 0; k < n; k++) {
        ClSynthObject o = cl_synth_dots_place(rng, w, h, radius);
        pts[k][0] = o.x, pts[k][1] = o.y;
        s->objects[k] = g_array_new(FALSE, TRUE, sizeof(ClSynthObject));
        g_array_append_val(s->objects[k], o);
        if (k > 0) { /* the dot moves: both places show a change */
            ClSynthChange c = { CL_SYNTH_CHANGE_MOVE, k, 0, 0 };
            g_array_append_val(s->changes, c);
        }
    }
    if (n == 2) {
        double dx = pts[1][0] - pts[0][0], dy = pts[1][1] - pts[0][1];
        s->quantity = CL_SYNTH_QUANTITY_DISTANCE;
        s->value = sqrt(dx * dx + dy * dy) / sqrt((double)w * w + (double)h * h);
    } else {
        s->quantity = CL_SYNTH_QUANTITY_AREA;
        s->value = hull_area((const double(*)[2])pts, n) / ((double)w * h);
    }
    char text[G_ASCII_DTOSTR_BUF_SIZE];
    g_ascii_formatd(text, sizeof text, "%.4f", s->value);

    ClChatConversation *c = cl_chat_conversation_new();
    cl_chat_conversation_add(c, CL_CHAT_SYSTEM, system_prompts[n]);
    for (int k = 0; k < n; k++) {
        if (k + 1 < n) {
            cl_chat_conversation_add(c, CL_CHAT_USER, "<image>\n" IMAGE_TEXT);
            cl_chat_conversation_add(c, CL_CHAT_ASSISTANT, FILLER);
        } else {
            g_autofree char *last = g_strdup_printf(
                "<image>\n" IMAGE_TEXT "\nWhat is the %s formed by the red dots across the %s "
                "images?",
                n == 2 ? "distance" : "area", counts[n]);
            cl_chat_conversation_add(c, CL_CHAT_USER, last);
        }
    }
    cl_chat_conversation_add(c, CL_CHAT_ASSISTANT, text);
    s->conversation = c;

    cl_synth_dots_drawing(drawing, cl_synth_rng_next(rng), u, radius);
    return TRUE;
}
