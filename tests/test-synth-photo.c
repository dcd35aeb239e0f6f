/* test-synth-photo.c - the photo-edits task (core/synth/photo-edits.c): unchanged pairs say
 * "No change." and mark no patch, changed pairs name the object, its kind of change and its
 * position as the structured answer has them and mark the patches where it is, the pasted
 * objects render in colour, strong nuisances change the pixels but not the answer, the held-out
 * photographs are not the training ones, and bad options are refused. Skipped where the
 * photographs' Debian packages are not installed. The same edits in the radiograph and aerial
 * tasks' renders (radiograph-edits, aerial-edits): the same answers and targets, grey chest films
 * and colour tiles as the scenes, held-out scenes that are not the training ones. */
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "fixtures.h"
#include "synth/synth.h"

#define N_SEEDS 60

static gboolean have_photos(const char *set)
{
    ClSynthOptions o;
    cl_synth_options_init(&o);
    o.photos = set;
    g_autoptr(GError) err = NULL;
    g_autoptr(ClSynthSample) s = cl_synth_generate("photo-edits", 0, &o, &err);
    if (!s)
        g_test_skip(err->message);
    return s != NULL;
}

static const char *member(JsonObject *o, const char *name)
{
    return json_object_has_member(o, name) ? json_object_get_string_member(o, name) : NULL;
}

static int changed_cells(const ClSynthSample *s)
{
    int n = 0;
    for (int i = 0; i < s->grid_w * s->grid_h; i++)
        n += s->changed[s->grid_w * s->grid_h + i] != 0;
    return n;
}

static void test_answers(void)
{
    if (!have_photos("train"))
        return;
    int unchanged = 0, kinds[5] = { 0 };
    static const char *const kind_words[5][2] = { { "add", "was added" },
                                                  { "remove", "was removed" },
                                                  { "move", "moved from" },
                                                  { "recolour", "changed colour" },
                                                  { "resize", "became" } };
    for (guint64 seed = 0; seed < N_SEEDS; seed++) {
        g_autoptr(ClSynthSample) s = cl_fixture_synth("photo-edits", seed, NULL);
        g_assert_cmpint(s->n_images, ==, 2);
        g_autoptr(JsonNode) j = cl_synth_sample_answer_json(s);
        JsonObject *o = json_node_get_object(j);
        if (!json_object_get_boolean_member(o, "change")) {
            unchanged++;
            g_assert_cmpstr(s->answer, ==, "No change.");
            g_assert_cmpint(changed_cells(s), ==, 0);
            continue;
        }
        g_assert_cmpint(changed_cells(s), >, 0);
        const char *kind = member(o, "kind"), *object = member(o, "object");
        const char *position = member(o, "position");
        g_assert_nonnull(strstr(s->answer, object));
        g_assert_nonnull(strstr(s->answer, position));
        gboolean known = FALSE;
        for (int k = 0; k < 5; k++)
            if (g_str_equal(kind, kind_words[k][0])) {
                g_assert_nonnull(strstr(s->answer, kind_words[k][1]));
                kinds[k]++;
                known = TRUE;
            }
        g_assert_true(known);
        if (g_str_equal(kind, "move"))
            g_assert_nonnull(strstr(s->answer, member(o, "from")));
    }
    g_test_message("%d of %d unchanged; add %d remove %d move %d recolour %d resize %d", unchanged,
                   N_SEEDS, kinds[0], kinds[1], kinds[2], kinds[3], kinds[4]);
    /* a fair share of unchanged pairs, and every kind of change */
    g_assert_cmpint(unchanged, >=, N_SEEDS / 6);
    g_assert_cmpint(unchanged, <=, N_SEEDS / 2);
    for (int k = 0; k < 5; k++)
        g_assert_cmpint(kinds[k], >, 0);
}

/* An added object's cells in the clean second image hold saturated colour (the emoji font
 * rendered in colour, not as an outline or an empty box). */
static void test_colour_objects(void)
{
    if (!have_photos("train"))
        return;
    ClSynthOptions clean;
    cl_synth_options_init(&clean);
    clean.nuisance = FALSE;
    int checked = 0;
    for (guint64 seed = 0; seed < N_SEEDS && checked < 5; seed++) {
        g_autoptr(ClSynthSample) s = cl_fixture_synth("photo-edits", seed, &clean);
        if (s->changes->len == 0 ||
            g_array_index(s->changes, ClSynthChange, 0).type != CL_SYNTH_CHANGE_ADD)
            continue;
        const ClSynthChange *c = &g_array_index(s->changes, ClSynthChange, 0);
        const ClSynthObject *o = &g_array_index(s->objects[1], ClSynthObject, c->after);
        const ClSynthImage *b = &s->images[1], *a = &s->images[0];
        int saturated = 0, differ = 0, n = 0;
        for (int y = (int)o->box[1]; y < (int)o->box[3]; y++)
            for (int x = (int)o->box[0]; x < (int)o->box[2]; x++, n++) {
                const guint8 *p = b->pixels + ((gsize)y * b->width + x) * 3;
                const guint8 *q = a->pixels + ((gsize)y * a->width + x) * 3;
                int mx = MAX(p[0], MAX(p[1], p[2])), mn = MIN(p[0], MIN(p[1], p[2]));
                saturated += mx - mn > 80;
                differ += abs(p[0] - q[0]) + abs(p[1] - q[1]) + abs(p[2] - q[2]) > 30;
            }
        g_assert_cmpint(differ, >, n / 5);
        g_assert_cmpint(saturated, >, n / 20);
        checked++;
    }
    g_assert_cmpint(checked, ==, 5);
}

static double mean_abs_diff(const ClSynthImage *a, const ClSynthImage *b)
{
    double d = 0;
    gsize n = (gsize)a->width * a->height * 3;
    for (gsize i = 0; i < n; i++)
        d += abs(a->pixels[i] - b->pixels[i]);
    return d / n;
}

/* The per-patch targets follow the framing: each object's box corners, turned and scaled about
 * the centre and shifted as its image shows them, fall in patches its grounding bit marks. */
static void test_framed_targets(void)
{
    if (!have_photos("train"))
        return;
    ClSynthOptions strong;
    cl_synth_options_init(&strong);
    strong.nuisance_level = 2;
    strong.width = strong.height = 224;
    strong.patch = 16;
    int checked = 0;
    for (guint64 seed = 0; seed < 24; seed++) {
        g_autoptr(ClSynthSample) s = cl_fixture_synth("photo-edits", seed, &strong);
        const gsize cells = (gsize)s->grid_w * s->grid_h;
        for (int k = 0; k < s->n_images; k++) {
            const ClSynthImage *im = &s->images[k];
            const double c = 112, z = 1 + im->rescale, co = cos(im->rotation) * z,
                         si = sin(im->rotation) * z;
            for (guint i = 0; i < s->objects[k]->len; i++) {
                const ClSynthObject *o = &g_array_index(s->objects[k], ClSynthObject, i);
                for (int q = 0; q < 4; q++) { /* each corner, pulled 1 px inwards */
                    const double px = (q & 1 ? o->box[2] - 1 : o->box[0] + 1) - c,
                                 py = (q & 2 ? o->box[3] - 1 : o->box[1] + 1) - c;
                    const double x = c + co * px - si * py + im->shift[0],
                                 y = c + si * px + co * py + im->shift[1];
                    if (x < 0 || y < 0 || x >= 224 || y >= 224)
                        continue;
                    const int cell = (int)(y / 16) * s->grid_w + (int)(x / 16);
                    g_assert_true(s->grounding[cells * k + cell] & (G_GUINT64_CONSTANT(1) << i));
                    checked++;
                }
            }
        }
    }
    g_test_message("%d framed object corners in their marked patches", checked);
    g_assert_cmpint(checked, >, 100);
}

/* Strong nuisances: the same answers and targets, pixels further apart than mild ones. */
static void test_strong_nuisance(void)
{
    if (!have_photos("train"))
        return;
    ClSynthOptions strong, mild;
    cl_synth_options_init(&strong);
    cl_synth_options_init(&mild);
    strong.nuisance_level = 2;
    ClSynthOptions none;
    cl_synth_options_init(&none);
    none.nuisance_level = 0;
    double dm = 0, ds = 0;
    int mild_framed = 0;
    for (guint64 seed = 0; seed < 16; seed++) {
        g_autoptr(ClSynthSample) m = cl_fixture_synth("photo-edits", seed, &mild);
        g_autoptr(ClSynthSample) s = cl_fixture_synth("photo-edits", seed, &strong);
        g_autoptr(ClSynthSample) z = cl_fixture_synth("photo-edits", seed, &none);
        g_assert_cmpstr(m->answer, ==, s->answer);
        dm += mean_abs_diff(&m->images[0], &m->images[1]);
        ds += mean_abs_diff(&s->images[0], &s->images[1]);
        for (int k = 0; k < 2; k++) {
            /* framing: none without nuisances, every image turned (up to 2°) and scaled (up to
             * 3 %) about its centre under strong ones, about half the images under mild ones */
            g_assert_cmpfloat(z->images[k].rotation, ==, 0);
            g_assert_cmpfloat(z->images[k].rescale, ==, 0);
            g_assert_cmpfloat(s->images[k].rotation, !=, 0);
            g_assert_cmpfloat(fabs(s->images[k].rotation), <=, 2 * G_PI / 180);
            g_assert_cmpfloat(fabs(s->images[k].rescale), <=, 0.03);
            mild_framed += m->images[k].rotation != 0;
            g_assert_cmpfloat(fabs(m->images[k].rotation), <=, 1 * G_PI / 180);
        }
    }
    g_test_message("mild: %d of 32 images turned", mild_framed);
    g_assert_cmpint(mild_framed, >=, 8);
    g_assert_cmpint(mild_framed, <=, 24);
    g_test_message("mean |image 2 - image 1|: mild %.1f, strong %.1f", dm / 16, ds / 16);
    g_assert_cmpfloat(ds, >, 1.3 * dm);
}

static void test_heldout_and_errors(void)
{
    if (!have_photos("train") || !have_photos("heldout"))
        return;
    ClSynthOptions t, h;
    cl_synth_options_init(&t);
    cl_synth_options_init(&h);
    h.photos = "heldout";
    for (guint64 seed = 0; seed < 8; seed++) {
        g_autoptr(ClSynthSample) a = cl_fixture_synth("photo-edits", seed, &t);
        g_autoptr(ClSynthSample) b = cl_fixture_synth("photo-edits", seed, &h);
        g_assert_cmpfloat(mean_abs_diff(&a->images[0], &b->images[0]), >, 5);
    }
    g_autoptr(GError) err = NULL;
    ClSynthOptions bad;
    cl_synth_options_init(&bad);
    bad.photos = "somewhere";
    g_assert_null(cl_synth_generate("photo-edits", 1, &bad, &err));
    g_assert_error(err, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS);
    g_clear_error(&err);
    cl_synth_options_init(&bad);
    bad.nuisance_level = 3;
    g_assert_null(cl_synth_generate("photo-edits", 1, &bad, &err));
    g_assert_error(err, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS);
    g_clear_error(&err);
    cl_synth_options_init(&bad);
    bad.n_images = 3;
    g_assert_null(cl_synth_generate("photo-edits", 1, &bad, &err));
    g_assert_error(err, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS);
}

/* the share of pixels outside every object's box whose channels are equal (a grey scene) */
static double grey_share(const ClSynthSample *s, int image)
{
    const ClSynthImage *im = &s->images[image];
    const GArray *objs = s->objects[image];
    int grey = 0, n = 0;
    for (int y = 0; y < im->height; y++)
        for (int x = 0; x < im->width; x++) {
            gboolean inside = FALSE;
            for (guint i = 0; i < objs->len && !inside; i++) {
                const ClSynthObject *o = &g_array_index(objs, ClSynthObject, i);
                inside = x >= o->box[0] - 2 && x <= o->box[2] + 2 && y >= o->box[1] - 2 &&
                         y <= o->box[3] + 2;
            }
            if (inside)
                continue;
            const guint8 *p = im->pixels + ((gsize)y * im->width + x) * 3;
            grey += p[0] == p[1] && p[1] == p[2];
            n++;
        }
    return n ? (double)grey / n : 1;
}

static void test_other_domains(void)
{
    static const char *const tasks[2] = { "radiograph-edits", "aerial-edits" };
    ClSynthOptions clean, held;
    cl_synth_options_init(&clean);
    clean.nuisance = FALSE;
    held = clean;
    held.photos = "heldout";
    for (int t = 0; t < 2; t++) {
        int changed = 0, unchanged = 0;
        double grey = 0;
        for (guint64 seed = 0; seed < 16; seed++) {
            g_autoptr(ClSynthSample) s = cl_fixture_synth(tasks[t], seed, &clean);
            g_assert_cmpint(s->n_images, ==, 2);
            g_assert_cmpint(s->images[0].channels, ==, 3);
            g_autoptr(JsonNode) j = cl_synth_sample_answer_json(s);
            JsonObject *o = json_node_get_object(j);
            if (!json_object_get_boolean_member(o, "change")) {
                g_assert_cmpstr(s->answer, ==, "No change.");
                g_assert_cmpint(changed_cells(s), ==, 0);
                unchanged++;
            } else {
                g_assert_nonnull(strstr(s->answer, member(o, "object")));
                g_assert_nonnull(strstr(s->answer, member(o, "position")));
                g_assert_cmpint(changed_cells(s), >, 0);
                changed++;
            }
            grey += grey_share(s, 0) / 16;
            /* the held-out scenes are other patients and tiles */
            g_autoptr(ClSynthSample) h = cl_fixture_synth(tasks[t], seed, &held);
            g_assert_cmpfloat(mean_abs_diff(&s->images[0], &h->images[0]), >, 5);
        }
        g_test_message("%s: %d changed, %d unchanged, %.0f %% of the scene grey", tasks[t], changed,
                       unchanged, 100 * grey);
        g_assert_cmpint(changed, >, 0);
        g_assert_cmpint(unchanged, >, 0);
        /* chest films are grey, aerial tiles are not */
        if (t == 0)
            g_assert_cmpfloat(grey, >, 0.99);
        else
            g_assert_cmpfloat(grey, <, 0.2);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/synth-photo/answers", test_answers);
    g_test_add_func("/synth-photo/colour-objects", test_colour_objects);
    g_test_add_func("/synth-photo/strong-nuisance", test_strong_nuisance);
    g_test_add_func("/synth-photo/framed-targets", test_framed_targets);
    g_test_add_func("/synth-photo/heldout-and-errors", test_heldout_and_errors);
    g_test_add_func("/synth-photo/other-domains", test_other_domains);
    return g_test_run();
}
