/* photo-edits.c - the `photo-edits` task: change pairs made from real photographs. A crop of a
 * photo from Debian's wallpaper packages is the scene; objects (Noto Color Emoji glyphs, named by
 * their Unicode names) are pasted in, and the second image adds, removes, moves, recolours or
 * resizes one of them, or changes nothing (about a third of the pairs). Acquisition nuisances that
 * are not changes: the common renderer's misregistration, gain, offset and noise, and here a
 * white-balance tint, blur, JPEG re-encoding and a small turn and framing about the centre per
 * image. The answer says what, where (a 3 × 3 position) and how, or "No change.". Photos: the
 * training set (plasma-workspace-wallpapers, mate-backgrounds) or the held-out one (opencv-doc's
 * sample photographs), or a folder of the user's (CHANGELENS_PHOTOS). The tasks `radiograph-edits`
 * and `aerial-edits` make the same edits in the radiograph and aerial tasks' renders (a set of 160
 * patients or tiles for training, another for held-out evaluation) instead of photographs. */
#include "synth/synth-private.h"

#include <gdk-pixbuf/gdk-pixbuf.h>
#include <glib/gstdio.h>
#include <math.h>
#include <pango/pangocairo.h>
#include <string.h>

#define PHOTO_SIDE 384  /* each photo is kept at this short side (crops are scaled from it) */
#define MAX_PHOTOS 400  /* per set */
#define MIN_SPREAD 18.0 /* a photo whose grey levels spread less than this (std) is flat art */
#define EMOJI_FONT "Noto Color Emoji"

/* ---- the objects ------------------------------------------------------------------------------ */

static const struct {
    const char *glyph, *name;
} emoji[] = {
    { "\U0001F34E", "red apple" },
    { "\U0001F34C", "banana" },
    { "\U0001F347", "bunch of grapes" },
    { "\U0001F349", "watermelon" },
    { "\U0001F352", "cherry" },
    { "\U0001F353", "strawberry" },
    { "\U0001F955", "carrot" },
    { "\U0001F344", "mushroom" },
    { "\U0001F355", "pizza" },
    { "\U0001F382", "cake" },
    { "\U0001F436", "dog" },
    { "\U0001F431", "cat" },
    { "\U0001F42D", "mouse" },
    { "\U0001F438", "frog" },
    { "\U0001F437", "pig" },
    { "\U0001F43C", "panda" },
    { "\U0001F98A", "fox" },
    { "\U0001F422", "turtle" },
    { "\U0001F41F", "fish" },
    { "\U0001F98B", "butterfly" },
    { "\U0001F41D", "bee" },
    { "\U0001F414", "chicken" },
    { "\U0001F697", "car" },
    { "\U0001F68C", "bus" },
    { "\U0001F6B2", "bicycle" },
    { "\u2708\uFE0F", "airplane" },
    { "\U0001F680", "rocket" },
    { "\u26F5", "sailboat" },
    { "\U0001F3E0", "house" },
    { "\U0001F332", "tree" },
    { "\U0001F335", "cactus" },
    { "\U0001F33B", "sunflower" },
    { "\u2600\uFE0F", "sun" },
    { "\u2B50", "star" },
    { "\U0001F319", "moon" },
    { "\u2601\uFE0F", "cloud" },
    { "\u26BD", "soccer ball" },
    { "\U0001F3C0", "basketball" },
    { "\U0001F3B8", "guitar" },
    { "\U0001F514", "bell" },
    { "\U0001F511", "key" },
    { "\u23F0", "alarm clock" },
    { "\U0001F4A1", "light bulb" },
    { "\U0001F3A9", "top hat" },
    { "\U0001F45F", "shoe" },
    { "\U0001F453", "pair of glasses" },
    { "\U0001F381", "gift" },
    { "\U0001F388", "balloon" },
};
#define N_EMOJI ((int)G_N_ELEMENTS(emoji))

const char *cl_synth_photo_object_name(int index)
{
    return index >= 0 && index < N_EMOJI ? emoji[index].name : NULL;
}

int cl_synth_photo_n_objects(void)
{
    return N_EMOJI;
}

/* Objects travel in ClSynthObject: the emoji index coded into shape (4) × colour (8) × size (2),
 * so the auxiliary attribute labels say which object a patch shows; material 1 = recoloured. */
static int emoji_of(const ClSynthObject *o)
{
    return ((int)o->size * CL_SYNTH_N_SHAPES + (int)o->shape) * CL_SYNTH_N_COLOURS + o->colour;
}

static void set_emoji(ClSynthObject *o, int e)
{
    o->colour = e % CL_SYNTH_N_COLOURS;
    o->shape = (ClSynthShape)(e / CL_SYNTH_N_COLOURS % CL_SYNTH_N_SHAPES);
    o->size = e / (CL_SYNTH_N_COLOURS * CL_SYNTH_N_SHAPES);
}
G_STATIC_ASSERT(G_N_ELEMENTS(emoji) <= CL_SYNTH_N_COLOURS * CL_SYNTH_N_SHAPES * CL_SYNTH_N_SIZES);

/* o->x, o->y the centre; the side is box width */
static double side_of(const ClSynthObject *o)
{
    return o->box[2] - o->box[0];
}

static void place(ClSynthObject *o, double x, double y, double side)
{
    o->x = x, o->y = y;
    o->box[0] = x - side / 2, o->box[1] = y - side / 2;
    o->box[2] = x + side / 2, o->box[3] = y + side / 2;
}

/* ---- the photos ------------------------------------------------------------------------------- */

typedef struct {
    GPtrArray *pixbufs; /* cairo_surface_t* (RGB24), short side PHOTO_SIDE */
    char *where;        /* what was searched, for the error */
} PhotoSet;

static const char *const train_globs[] = {
    "/usr/share/wallpapers",       /* plasma-workspace-wallpapers: NAME/contents/images/ */
    "/usr/share/backgrounds/mate", /* mate-backgrounds: nature/, abstract/, desktop/ */
    NULL,
};
static const char *const heldout_globs[] = {
    "/usr/share/doc/opencv-doc/examples/data", /* opencv-doc's sample photographs */
    NULL,
};

static gboolean is_image_name(const char *name)
{
    g_autofree char *l = g_ascii_strdown(name, -1);
    return g_str_has_suffix(l, ".jpg") || g_str_has_suffix(l, ".jpeg") ||
           g_str_has_suffix(l, ".png");
}

static gint compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Files under dir (depth-first, sorted, at most 4 levels). Plasma wallpapers come in several
 * resolutions: only the largest file of each contents/images folder is kept. */
static void collect(const char *dir, int depth, GPtrArray *out)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    if (!d)
        return;
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    for (const char *n; (n = g_dir_read_name(d));)
        g_ptr_array_add(names, g_strdup(n));
    g_dir_close(d);
    g_ptr_array_sort(names, compare_names);
    const gboolean one_per_folder = g_str_has_suffix(dir, "contents/images");
    char *best = NULL;
    goffset best_size = -1;
    for (guint i = 0; i < names->len; i++) {
        g_autofree char *p = g_build_filename(dir, (const char *)names->pdata[i], NULL);
        if (g_file_test(p, G_FILE_TEST_IS_DIR)) {
            if (depth < 4)
                collect(p, depth + 1, out);
            continue;
        }
        if (!is_image_name(p))
            continue;
        if (!one_per_folder) {
            g_ptr_array_add(out, g_steal_pointer(&p));
            continue;
        }
        GStatBuf st;
        if (g_stat(p, &st) == 0 && st.st_size > best_size) {
            g_free(best);
            best = g_steal_pointer(&p);
            best_size = st.st_size;
        }
    }
    if (best)
        g_ptr_array_add(out, best);
}

/* The grey levels' standard deviation of a pixbuf (a sample of its pixels). */
static double spread(GdkPixbuf *pb)
{
    const int w = gdk_pixbuf_get_width(pb), h = gdk_pixbuf_get_height(pb);
    const int rs = gdk_pixbuf_get_rowstride(pb), nc = gdk_pixbuf_get_n_channels(pb);
    const guint8 *px = gdk_pixbuf_read_pixels(pb);
    double s = 0, s2 = 0;
    int n = 0;
    for (int y = 0; y < h; y += 4)
        for (int x = 0; x < w; x += 4) {
            const guint8 *p = px + (gsize)y * rs + (gsize)x * nc;
            double v = 0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2];
            s += v, s2 += v * v, n++;
        }
    return n ? sqrt(MAX(0, s2 / n - (s / n) * (s / n))) : 0;
}

/* An RGB24 cairo surface of an RGB(A) pixbuf. */
static cairo_surface_t *surface_of(GdkPixbuf *pb)
{
    const int w = gdk_pixbuf_get_width(pb), h = gdk_pixbuf_get_height(pb);
    const int rs = gdk_pixbuf_get_rowstride(pb), nc = gdk_pixbuf_get_n_channels(pb);
    const guint8 *px = gdk_pixbuf_read_pixels(pb);
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    guint8 *d = cairo_image_surface_get_data(s);
    const int st = cairo_image_surface_get_stride(s);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const guint8 *p = px + (gsize)y * rs + (gsize)x * nc;
            *(guint32 *)(gpointer)(d + (gsize)y * st + (gsize)x * 4) =
                0xff000000u | (guint32)p[0] << 16 | (guint32)p[1] << 8 | p[2];
        }
    cairo_surface_mark_dirty(s);
    return s;
}

static cairo_surface_t *load_photo(const char *path)
{
    g_autoptr(GdkPixbuf) pb = gdk_pixbuf_new_from_file(path, NULL);
    if (!pb)
        return NULL;
    g_autoptr(GdkPixbuf) o = gdk_pixbuf_apply_embedded_orientation(pb);
    int w = gdk_pixbuf_get_width(o), h = gdk_pixbuf_get_height(o);
    if (w < 64 || h < 64 || w > 16384 || h > 16384)
        return NULL;
    double k = (double)PHOTO_SIDE / MIN(w, h);
    int nw = MAX(PHOTO_SIDE, (int)lround(w * k)), nh = MAX(PHOTO_SIDE, (int)lround(h * k));
    GdkPixbuf *s = gdk_pixbuf_scale_simple(o, nw, nh, GDK_INTERP_BILINEAR);
    if (s && gdk_pixbuf_get_has_alpha(s)) { /* transparent wallpapers over grey */
        GdkPixbuf *flat = gdk_pixbuf_composite_color_simple(s, nw, nh, GDK_INTERP_NEAREST, 255, 64,
                                                            0x808080, 0x808080);
        g_object_unref(s);
        s = flat;
    }
    if (!s)
        return NULL;
    cairo_surface_t *out = spread(s) >= MIN_SPREAD ? surface_of(s) : NULL;
    g_object_unref(s);
    return out;
}

static PhotoSet *photo_set_load(const char *which)
{
    PhotoSet *set = g_new0(PhotoSet, 1);
    set->pixbufs = g_ptr_array_new_with_free_func((GDestroyNotify)cairo_surface_destroy);
    g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);
    const char *env = g_getenv("CHANGELENS_PHOTOS");
    const char *const *globs = g_strcmp0(which, "heldout") == 0 ? heldout_globs : train_globs;
    const char *one[2] = { env, NULL };
    if (env && *env)
        globs = one;
    set->where = g_strjoinv(", ", (char **)globs);
    for (int i = 0; globs[i]; i++)
        collect(globs[i], 0, files);
    for (guint i = 0; i < files->len && set->pixbufs->len < MAX_PHOTOS; i++) {
        cairo_surface_t *pb = load_photo(files->pdata[i]);
        if (pb)
            g_ptr_array_add(set->pixbufs, pb);
    }
    return set;
}

/* Where the scenes of the edits come from: photographs, or the radiograph or aerial task's
 * renders (the same edits on those domains' images). */
typedef enum { SCENE_PHOTO, SCENE_RADIOGRAPH, SCENE_AERIAL, N_SCENES } SceneKind;
static const char *const scene_tasks[N_SCENES] = { NULL, "radiograph", "aerial" };
#define N_RENDERS 160 /* rendered scenes per set */

/* The first image of N_RENDERS samples of the scene's task (no nuisances) at PHOTO_SIDE, as
 * RGB24 surfaces; the training and the held-out set draw their seeds from separate streams. */
static PhotoSet *render_set_load(SceneKind scene, gboolean heldout)
{
    PhotoSet *set = g_new0(PhotoSet, 1);
    set->pixbufs = g_ptr_array_new_with_free_func((GDestroyNotify)cairo_surface_destroy);
    set->where = g_strdup_printf("the %s task's renders", scene_tasks[scene]);
    ClSynthOptions o;
    cl_synth_options_init(&o);
    o.width = o.height = PHOTO_SIDE;
    o.nuisance = FALSE;
    const guint64 base = heldout ? 0x48454c444f555400ull : 0x545241494e000000ull;
    for (int i = 0; i < N_RENDERS; i++) {
        g_autoptr(ClSynthSample) r =
            cl_synth_generate(scene_tasks[scene], cl_synth_stream_seed(base, (guint64)i), &o, NULL);
        if (!r || r->n_images < 1)
            continue;
        const ClSynthImage *im = &r->images[0];
        cairo_surface_t *sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, im->width, im->height);
        guint8 *d = cairo_image_surface_get_data(sf);
        const int st = cairo_image_surface_get_stride(sf), nc = im->channels;
        for (int y = 0; y < im->height; y++)
            for (int x = 0; x < im->width; x++) {
                const guint8 *p = im->pixels + ((gsize)y * im->width + x) * nc;
                const guint8 g = p[0];
                *(guint32 *)(gpointer)(d + (gsize)y * st + (gsize)x * 4) =
                    0xff000000u | (guint32)(nc >= 3 ? p[0] : g) << 16 |
                    (guint32)(nc >= 3 ? p[1] : g) << 8 | (nc >= 3 ? p[2] : g);
            }
        cairo_surface_mark_dirty(sf);
        g_ptr_array_add(set->pixbufs, sf);
    }
    return set;
}

/* The set's scenes, decoded or rendered once per process (two trainer threads may ask at once). */
static const PhotoSet *photo_set(SceneKind scene, const char *which)
{
    static GMutex lock;
    static PhotoSet *sets[N_SCENES][2];
    const int k = g_strcmp0(which, "heldout") == 0;
    g_mutex_lock(&lock);
    if (!sets[scene][k])
        sets[scene][k] = scene == SCENE_PHOTO ? photo_set_load(which) : render_set_load(scene, k);
    g_mutex_unlock(&lock);
    return sets[scene][k];
}

/* ---- drawing ---------------------------------------------------------------------------------- */

typedef struct {
    cairo_surface_t *photo; /* borrowed from the cache */
    double crop[3];         /* x, y, side in the photo's pixels */
    gboolean flip;          /* mirrored left-right */
    double tint[2][3];      /* per image: white balance multipliers */
    double blur[2];         /* per image: blur radius in pixels (0: none) */
    int jpeg[2];            /* per image: JPEG quality (0: none) */
    double turn[2];         /* per image: a rotation about the centre, radians (0: none) */
    double zoom[2];         /* per image: a scale about the centre, the crop's framing (1: none) */
} PhotoDrawing;

/* an emoji glyph centred at (x, y) filling a side × side square; `recolour` permutes its colour
 * channels (a clear hue change) */
static void draw_emoji(cairo_t *cr, int e, double x, double y, double side, gboolean recolour)
{
    const int S = (int)ceil(side) + 2;
    cairo_surface_t *g = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, S, S);
    cairo_t *gc = cairo_create(g);
    PangoLayout *l = pango_cairo_create_layout(gc);
    PangoFontDescription *fd = pango_font_description_from_string(EMOJI_FONT);
    pango_font_description_set_absolute_size(fd, side * 0.8 * PANGO_SCALE);
    pango_layout_set_font_description(l, fd);
    pango_layout_set_text(l, emoji[e].glyph, -1);
    PangoRectangle ink;
    pango_layout_get_pixel_extents(l, &ink, NULL);
    if (ink.width > 0 && ink.height > 0) {
        double k = MIN(side / ink.width, side / ink.height);
        cairo_translate(gc, S / 2.0, S / 2.0);
        cairo_scale(gc, k, k);
        cairo_translate(gc, -(ink.x + ink.width / 2.0), -(ink.y + ink.height / 2.0));
        pango_cairo_show_layout(gc, l);
    }
    pango_font_description_free(fd);
    g_object_unref(l);
    cairo_destroy(gc);
    cairo_surface_flush(g);
    if (recolour) {
        guint8 *d = cairo_image_surface_get_data(g);
        const int st = cairo_image_surface_get_stride(g);
        for (int r = 0; r < S; r++)
            for (int c = 0; c < S; c++) {
                guint32 *p = (guint32 *)(gpointer)(d + (gsize)r * st + (gsize)c * 4);
                guint32 a = *p >> 24, R = (*p >> 16) & 255, G = (*p >> 8) & 255, B = *p & 255;
                *p = a << 24 | B << 16 | R << 8 | G; /* R→G→B→R */
            }
        cairo_surface_mark_dirty(g);
    }
    cairo_set_source_surface(cr, g, x - S / 2.0, y - S / 2.0);
    cairo_paint(cr);
    cairo_surface_destroy(g);
}

/* Box blur of radius r (three passes approximate a Gaussian) on an RGB24 surface. */
static void blur_surface(cairo_surface_t *s, int r)
{
    if (r < 1)
        return;
    cairo_surface_flush(s);
    guint8 *d = cairo_image_surface_get_data(s);
    const int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
    const int st = cairo_image_surface_get_stride(s);
    g_autofree guint32 *tmp = g_new(guint32, MAX(w, h));
    for (int pass = 0; pass < 6; pass++) { /* 3 × horizontal, 3 × vertical */
        const gboolean horiz = pass % 2 == 0;
        const int lines = horiz ? h : w, len = horiz ? w : h;
        for (int a = 0; a < lines; a++) {
            for (int i = 0; i < len; i++)
                tmp[i] = *(guint32 *)(gpointer)(d + (horiz ? (gsize)a * st + (gsize)i * 4
                                                           : (gsize)i * st + (gsize)a * 4));
            for (int i = 0; i < len; i++) {
                int acc[3] = { 0, 0, 0 }, n = 0;
                for (int j = MAX(0, i - r); j <= MIN(len - 1, i + r); j++, n++)
                    for (int c = 0; c < 3; c++)
                        acc[c] += (tmp[j] >> (8 * c)) & 255;
                guint32 v = 0xff000000u;
                for (int c = 0; c < 3; c++)
                    v |= (guint32)((acc[c] + n / 2) / n) << (8 * c);
                *(guint32 *)(gpointer)(d + (horiz ? (gsize)a * st + (gsize)i * 4
                                                  : (gsize)i * st + (gsize)a * 4)) = v;
            }
        }
    }
    cairo_surface_mark_dirty(s);
}

/* JPEG at `quality` and back (gdk-pixbuf's codec): the blocks and ringing of a re-encoded photo */
static void jpeg_roundtrip(cairo_surface_t *s, int quality)
{
    cairo_surface_flush(s);
    const int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
    const int st = cairo_image_surface_get_stride(s);
    guint8 *d = cairo_image_surface_get_data(s);
    g_autoptr(GdkPixbuf) pb = gdk_pixbuf_new(GDK_COLORSPACE_RGB, FALSE, 8, w, h);
    guint8 *p = gdk_pixbuf_get_pixels(pb);
    const int rs = gdk_pixbuf_get_rowstride(pb);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            guint32 v = *(guint32 *)(gpointer)(d + (gsize)y * st + (gsize)x * 4);
            for (int c = 0; c < 3; c++)
                p[(gsize)y * rs + x * 3 + c] = (v >> (16 - 8 * c)) & 255;
        }
    g_autofree char *q = g_strdup_printf("%d", quality), *buf = NULL;
    gsize n = 0;
    if (!gdk_pixbuf_save_to_buffer(pb, &buf, &n, "jpeg", NULL, "quality", q, NULL))
        return; /* no JPEG saver: the image stays as it is */
    g_autoptr(GInputStream) in = g_memory_input_stream_new_from_data(buf, (gssize)n, NULL);
    g_autoptr(GdkPixbuf) back = gdk_pixbuf_new_from_stream(in, NULL, NULL);
    if (!back || gdk_pixbuf_get_width(back) != w || gdk_pixbuf_get_height(back) != h)
        return;
    const guint8 *b = gdk_pixbuf_read_pixels(back);
    const int bs = gdk_pixbuf_get_rowstride(back), bc = gdk_pixbuf_get_n_channels(back);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const guint8 *v = b + (gsize)y * bs + (gsize)x * bc;
            *(guint32 *)(gpointer)(d + (gsize)y * st + (gsize)x * 4) =
                0xff000000u | (guint32)v[0] << 16 | (guint32)v[1] << 8 | v[2];
        }
    cairo_surface_mark_dirty(s);
}

static void draw(cairo_t *cr, const ClSynthSample *s, int image, gpointer data)
{
    const PhotoDrawing *d = data;
    /* the margin: room for the common shift, and for a small rotation or zoom when there is one
     * (a multiple of 8, so that JPEG's blocks fall on the image's as they would without it) */
    const gboolean framed = d->turn[image] != 0 || d->zoom[image] != 1;
    const int w = s->images[image].width, h = s->images[image].height,
              m = framed ? 8 * (int)ceil(MAX(w, h) / 160.0) : 8;
    /* the scene on a canvas a margin larger than the image (the common shift moves it) */
    cairo_surface_t *canvas = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w + 2 * m, h + 2 * m);
    cairo_t *c = cairo_create(canvas);
    cairo_translate(c, m, m);
    cairo_save(c);
    const double k = (double)MAX(w, h) / d->crop[2];
    if (d->flip) {
        cairo_translate(c, w, 0);
        cairo_scale(c, -1, 1);
    }
    cairo_scale(c, k, k);
    cairo_translate(c, -d->crop[0], -d->crop[1]);
    cairo_set_source_surface(c, d->photo, 0, 0);
    cairo_pattern_set_extend(cairo_get_source(c), CAIRO_EXTEND_PAD);
    cairo_pattern_set_filter(cairo_get_source(c), CAIRO_FILTER_GOOD);
    cairo_paint(c);
    cairo_restore(c);
    const GArray *objs = s->objects[image];
    for (guint i = 0; i < objs->len; i++) {
        const ClSynthObject *o = &g_array_index(objs, ClSynthObject, i);
        draw_emoji(c, emoji_of(o), o->x, o->y, side_of(o), o->material == 1);
    }
    /* white balance: multiply by the tint */
    cairo_set_operator(c, CAIRO_OPERATOR_MULTIPLY);
    cairo_set_source_rgb(c, d->tint[image][0], d->tint[image][1], d->tint[image][2]);
    cairo_paint(c);
    cairo_destroy(c);
    blur_surface(canvas, (int)lround(d->blur[image]));
    if (d->jpeg[image] > 0)
        jpeg_roundtrip(canvas, d->jpeg[image]);
    /* acquisition: turned and framed a little differently about the centre */
    cairo_save(cr);
    cairo_translate(cr, w / 2.0, h / 2.0);
    cairo_rotate(cr, d->turn[image]);
    cairo_scale(cr, d->zoom[image], d->zoom[image]);
    cairo_translate(cr, -w / 2.0, -h / 2.0);
    cairo_set_source_surface(cr, canvas, -m, -m);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_GOOD);
    if (framed) /* a corner the margin does not reach (small images) repeats the edge */
        cairo_pattern_set_extend(cairo_get_source(cr), CAIRO_EXTEND_PAD);
    cairo_paint(cr);
    cairo_restore(cr);
    cairo_surface_destroy(canvas);
}

static void photo_framing(int image, gpointer data, double *rotation, double *rescale)
{
    const PhotoDrawing *d = data;
    *rotation = d->turn[image];
    *rescale = d->zoom[image] - 1;
}

/* ---- the task --------------------------------------------------------------------------------- */

typedef enum { P_ADD, P_REMOVE, P_MOVE, P_RECOLOUR, P_RESIZE, N_KINDS } Kind;
static const char *const kind_names[N_KINDS] = { "add", "remove", "move", "recolour", "resize" };

static const char *const position_names[9] = { "top left",    "top",    "top right",
                                               "left",        "centre", "right",
                                               "bottom left", "bottom", "bottom right" };

static int position_of(const ClSynthObject *o, int w, int h)
{
    int col = CLAMP((int)(3 * o->x / w), 0, 2), row = CLAMP((int)(3 * o->y / h), 0, 2);
    return row * 3 + col;
}

/* "at the top left", "at the centre" */
static char *at_position(int p)
{
    return g_strdup_printf("at the %s", position_names[p]);
}

static gboolean overlaps(const ClSynthObject *o, const GArray *objs, int skip, double gap)
{
    for (guint i = 0; i < objs->len; i++) {
        if ((int)i == skip)
            continue;
        const ClSynthObject *b = &g_array_index(objs, ClSynthObject, i);
        if (o->box[0] < b->box[2] + gap && b->box[0] < o->box[2] + gap &&
            o->box[1] < b->box[3] + gap && b->box[1] < o->box[3] + gap)
            return TRUE;
    }
    return FALSE;
}

/* A free place for an object of this side (FALSE when none after some tries). */
static gboolean find_place(ClSynthObject *o, ClSynthRng *rng, const GArray *objs, int skip,
                           double side, int w, int h)
{
    const double margin = 4;
    for (int t = 0; t < 40; t++) {
        double x = cl_synth_rng_range(rng, margin + side / 2, w - margin - side / 2);
        double y = cl_synth_rng_range(rng, margin + side / 2, h - margin - side / 2);
        place(o, x, y, side);
        if (!overlaps(o, objs, skip, side * 0.15))
            return TRUE;
    }
    return FALSE;
}

static int new_emoji(ClSynthRng *rng, const GArray *objs)
{
    for (;;) {
        int e = cl_synth_rng_int(rng, 0, N_EMOJI - 1);
        gboolean used = FALSE;
        for (guint i = 0; i < objs->len; i++)
            used |= emoji_of(&g_array_index(objs, ClSynthObject, i)) == e;
        if (!used)
            return e;
    }
}

JsonNode *cl_synth_photo_edits_answer_json(const ClSynthSample *s)
{
    g_autoptr(JsonBuilder) j = json_builder_new();
    json_builder_begin_object(j);
    json_builder_set_member_name(j, "change");
    json_builder_add_boolean_value(j, s->changes->len > 0);
    if (s->changes->len > 0) {
        const ClSynthChange *c = &g_array_index(s->changes, ClSynthChange, 0);
        const ClSynthObject *b =
            c->before >= 0 ? &g_array_index(s->objects[0], ClSynthObject, c->before) : NULL;
        const ClSynthObject *a =
            c->after >= 0 ? &g_array_index(s->objects[1], ClSynthObject, c->after) : NULL;
        Kind k = !b                                    ? P_ADD
                 : !a                                  ? P_REMOVE
                 : a->material != b->material          ? P_RECOLOUR
                 : fabs(side_of(a) - side_of(b)) > 0.5 ? P_RESIZE
                                                       : P_MOVE;
        const int w = s->images[0].width, h = s->images[0].height;
        json_builder_set_member_name(j, "kind");
        json_builder_add_string_value(j, kind_names[k]);
        json_builder_set_member_name(j, "object");
        json_builder_add_string_value(j, emoji[emoji_of(a ? a : b)].name);
        json_builder_set_member_name(j, "position");
        json_builder_add_string_value(j, position_names[position_of(a ? a : b, w, h)]);
        if (k == P_MOVE) {
            json_builder_set_member_name(j, "from");
            json_builder_add_string_value(j, position_names[position_of(b, w, h)]);
        }
    }
    json_builder_end_object(j);
    return json_builder_get_root(j);
}

/* One edit of object i (or an added one) of `after`; the answer into *answer. */
static gboolean edit(ClSynthSample *s, ClSynthRng *rng, GArray *before, GArray *after, Kind k,
                     int w, int h, char **answer)
{
    const int n = (int)before->len;
    const int i = n > 0 ? cl_synth_rng_int(rng, 0, n - 1) : -1;
    const ClSynthObject *ob = i >= 0 ? &g_array_index(before, ClSynthObject, i) : NULL;
    ClSynthChange c = { CL_SYNTH_CHANGE_REPLACE, 1, i, i };
    ClSynthObject o = ob ? *ob : (ClSynthObject){ 0 };
    g_autofree char *where = ob ? at_position(position_of(ob, w, h)) : NULL;
    const double unit = MIN(w, h);
    switch (k) {
    case P_ADD: {
        double side = unit * cl_synth_rng_range(rng, 0.2, 0.34);
        if (!find_place(&o, rng, after, -1, side, w, h))
            return FALSE;
        set_emoji(&o, new_emoji(rng, after));
        o.material = 0;
        g_array_append_val(after, o);
        c = (ClSynthChange){ CL_SYNTH_CHANGE_ADD, 1, -1, (int)after->len - 1 };
        g_autofree char *at = at_position(position_of(&o, w, h));
        const char *name = emoji[emoji_of(&o)].name;
        *answer =
            g_strdup_printf("%c%s %s was added %s.", g_ascii_toupper(cl_synth_a_or_an(name)[0]),
                            cl_synth_a_or_an(name) + 1, name, at);
        break;
    }
    case P_REMOVE:
        if (!ob)
            return FALSE;
        g_array_remove_index(after, i);
        c = (ClSynthChange){ CL_SYNTH_CHANGE_REMOVE, 1, i, -1 };
        *answer = g_strdup_printf("The %s %s was removed.", emoji[emoji_of(ob)].name, where);
        break;
    case P_MOVE: {
        if (!ob)
            return FALSE;
        /* somewhere free, in another of the 3 × 3 cells, at least its own size away */
        const int from = position_of(ob, w, h);
        gboolean found = FALSE;
        for (int t = 0; !found && t < 12; t++)
            found = find_place(&o, rng, after, i, side_of(ob), w, h) &&
                    position_of(&o, w, h) != from && hypot(o.x - ob->x, o.y - ob->y) >= side_of(ob);
        if (!found)
            return FALSE;
        const int to = position_of(&o, w, h);
        g_array_index(after, ClSynthObject, i) = o;
        c.type = CL_SYNTH_CHANGE_MOVE;
        *answer = g_strdup_printf("The %s moved from the %s to the %s.", emoji[emoji_of(ob)].name,
                                  position_names[from], position_names[to]);
        break;
    }
    case P_RECOLOUR:
        if (!ob)
            return FALSE;
        o.material = !ob->material;
        g_array_index(after, ClSynthObject, i) = o;
        *answer = g_strdup_printf("The %s %s changed colour.", emoji[emoji_of(ob)].name, where);
        break;
    default: { /* resize about its centre */
        if (!ob)
            return FALSE;
        const gboolean larger = side_of(ob) < unit * 0.3 ? cl_synth_rng_int(rng, 0, 3) > 0
                                                         : cl_synth_rng_int(rng, 0, 3) == 0;
        double side = side_of(ob) * (larger ? cl_synth_rng_range(rng, 1.5, 1.8)
                                            : cl_synth_rng_range(rng, 0.45, 0.6));
        place(&o, CLAMP(ob->x, side / 2 + 2, w - side / 2 - 2),
              CLAMP(ob->y, side / 2 + 2, h - side / 2 - 2), side);
        if (overlaps(&o, after, i, 2))
            return FALSE;
        g_array_index(after, ClSynthObject, i) = o;
        *answer = g_strdup_printf("The %s %s became %s.", emoji[emoji_of(ob)].name, where,
                                  larger ? "larger" : "smaller");
        break;
    }
    }
    g_array_append_val(s->changes, c);
    return TRUE;
}

static gboolean edits_generate(SceneKind scenes, ClSynthSample *s, ClSynthRng *rng,
                               const ClSynthOptions *opts, ClSynthDrawing *drawing, GError **error)
{
    ClSynthRng *const scene = rng;
    const int w = opts->width, h = opts->height;
    if (opts->n_images != 0 && opts->n_images != 2) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS,
                    "synth: photo edits come in pairs, not %d images", opts->n_images);
        return FALSE;
    }
    const char *which = opts->photos && *opts->photos ? opts->photos : "train";
    if (g_strcmp0(which, "train") != 0 && g_strcmp0(which, "heldout") != 0) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS,
                    "synth: the photo set must be \"train\" or \"heldout\", not \"%s\"", which);
        return FALSE;
    }
    const PhotoSet *set = photo_set(scenes, which);
    if (set->pixbufs->len == 0 && scenes != SCENE_PHOTO) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS,
                    "synth: %s rendered no scene to edit", set->where);
        return FALSE;
    }
    if (set->pixbufs->len == 0) {
        g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS,
                    "synth: photo-edits found no photographs in %s (install the Debian packages "
                    "%s, or point CHANGELENS_PHOTOS at a folder of photos)",
                    set->where,
                    g_strcmp0(which, "heldout") == 0 ? "opencv-doc"
                                                     : "plasma-workspace-wallpapers and "
                                                       "mate-backgrounds");
        return FALSE;
    }
    PhotoDrawing *d = g_new0(PhotoDrawing, 1);
    s->source = cl_synth_rng_int(rng, 0, (int)set->pixbufs->len - 1);
    d->photo = set->pixbufs->pdata[s->source];
    const int pw = cairo_image_surface_get_width(d->photo);
    const int ph = cairo_image_surface_get_height(d->photo);
    d->crop[2] = MIN(pw, ph) * cl_synth_rng_range(rng, 0.5, 1.0);
    d->crop[0] = cl_synth_rng_range(rng, 0, pw - d->crop[2]);
    d->crop[1] = cl_synth_rng_range(rng, 0, ph - d->crop[2]);
    d->flip = cl_synth_rng_int(rng, 0, 1);
    /* acquisition: level 0 none, 1 mild (some images), 2 strong (every image); from a stream
     * of its own, so that the level changes no answer */
    const int level = !opts->nuisance ? 0 : opts->nuisance_level;
    ClSynthRng nuisance, framing;
    const guint64 nuisance_seed = cl_synth_rng_next(rng);
    cl_synth_rng_init(&nuisance, nuisance_seed);
    /* the rotation and framing from a stream of their own, so that the other nuisances are the
     * ones they were before these were added */
    cl_synth_rng_init(&framing, cl_synth_stream_seed(nuisance_seed, 7));
    rng = &nuisance;
    for (int t = 0; t < 2; t++) {
        for (int c = 0; c < 3; c++)
            d->tint[t][c] = 1.0;
        d->turn[t] = 0, d->zoom[t] = 1;
        if (level == 0)
            continue;
        /* mild: half the images turned up to 1° and framed 1.5 % tighter or looser; strong:
         * every image, up to 2° and 3 % */
        if (level == 2 || cl_synth_rng_int(&framing, 0, 1) == 1) {
            const double deg = level == 2 ? 2 : 1, z = level == 2 ? 0.03 : 0.015;
            d->turn[t] = cl_synth_rng_range(&framing, -deg, deg) * G_PI / 180;
            d->zoom[t] = 1 + cl_synth_rng_range(&framing, -z, z);
        }
        double a = level == 2 ? 0.2 : 0.08;
        double warm = cl_synth_rng_range(rng, -a, a), lvl = cl_synth_rng_range(rng, -a, 0);
        d->tint[t][0] = CLAMP(1 + lvl + warm, 0.5, 1);
        d->tint[t][1] = CLAMP(1 + lvl, 0.5, 1);
        d->tint[t][2] = CLAMP(1 + lvl - warm, 0.5, 1);
        d->blur[t] = cl_synth_rng_int(rng, 0, level == 2 ? 2 : 4) == 0 ? 1 : 0;
        d->jpeg[t] = level == 2                         ? cl_synth_rng_int(rng, 25, 55)
                     : cl_synth_rng_int(rng, 0, 1) == 1 ? cl_synth_rng_int(rng, 50, 90)
                                                        : 0;
    }

    rng = scene;
    /* the first image: 0-3 objects */
    GArray *before = g_array_new(FALSE, FALSE, sizeof(ClSynthObject));
    const int n0 = cl_synth_rng_int(rng, 0, 9) == 0 ? 0 : cl_synth_rng_int(rng, 1, 3);
    for (int i = 0; i < n0; i++) {
        ClSynthObject o = { 0 };
        if (!find_place(&o, rng, before, -1, MIN(w, h) * cl_synth_rng_range(rng, 0.18, 0.32), w, h))
            break;
        set_emoji(&o, new_emoji(rng, before));
        g_array_append_val(before, o);
    }
    GArray *after = g_array_copy(before);
    char *answer = NULL;
    /* about a third of the pairs change nothing */
    if (cl_synth_rng_int(rng, 0, 99) >= 35) {
        for (int t = 0; !answer && t < 30; t++) {
            g_array_set_size(after, 0);
            g_array_append_vals(after, before->data, before->len);
            g_array_set_size(s->changes, 0);
            Kind k = before->len == 0 ? P_ADD : (Kind)cl_synth_rng_int(rng, 0, N_KINDS - 1);
            if (!edit(s, rng, before, after, k, w, h, &answer))
                g_clear_pointer(&answer, g_free);
        }
        if (!answer)
            g_array_set_size(s->changes, 0);
    }
    if (!answer)
        answer = g_strdup("No change.");
    s->n_images = 2;
    s->objects = g_new0(GArray *, 2);
    s->objects[0] = before;
    s->objects[1] = after;
    s->quantity = CL_SYNTH_QUANTITY_NONE;
    s->conversation = cl_chat_describe_conversation(CL_CHAT_DOMAIN_EDITS, 2, NULL, error);
    g_assert(s->conversation);
    cl_chat_conversation_add(s->conversation, CL_CHAT_ASSISTANT, answer);
    g_free(answer);
    drawing->draw = draw;
    drawing->data = d;
    drawing->free_data = g_free;
    drawing->framing = photo_framing;
    return TRUE;
}

gboolean cl_synth_photo_edits_generate(ClSynthSample *s, ClSynthRng *rng,
                                       const ClSynthOptions *opts, ClSynthDrawing *drawing,
                                       GError **error)
{
    return edits_generate(SCENE_PHOTO, s, rng, opts, drawing, error);
}

gboolean cl_synth_radiograph_edits_generate(ClSynthSample *s, ClSynthRng *rng,
                                            const ClSynthOptions *opts, ClSynthDrawing *drawing,
                                            GError **error)
{
    return edits_generate(SCENE_RADIOGRAPH, s, rng, opts, drawing, error);
}

gboolean cl_synth_aerial_edits_generate(ClSynthSample *s, ClSynthRng *rng,
                                        const ClSynthOptions *opts, ClSynthDrawing *drawing,
                                        GError **error)
{
    return edits_generate(SCENE_AERIAL, s, rng, opts, drawing, error);
}
