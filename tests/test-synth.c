/* test-synth.c - the synthetic tasks (core/synth): determinism, answers re-derived from the scenes,
 * auxiliary masks against the rendered pixels, nuisances, and `changelens-cli synth` end to end. */
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>

#include "fixtures.h"
#include "image/image.h"
#include "synth/synth.h"

#define N_SEEDS 40

static char *conversation_text(const ClSynthSample *s)
{
    return cl_chat_render(cl_chat_conversation_turns(s->conversation),
                          cl_chat_conversation_len(s->conversation), FALSE);
}

/* Every sample's conversation binds one <image> per image and ends with its answer. */
static void check_conversation(const ClSynthSample *s)
{
    const ClChatTurn *t = cl_chat_conversation_turns(s->conversation);
    gsize n = cl_chat_conversation_len(s->conversation);
    g_assert_cmpint(cl_chat_count_images(t, n), ==, s->n_images);
    g_assert_cmpint(t[n - 1].role, ==, CL_CHAT_ASSISTANT);
    g_assert_cmpstr(t[n - 1].text, ==, s->answer);
    for (gsize i = 0; i < n; i++)
        if (strstr(t[i].text, "<image>"))
            g_assert_true(g_str_has_prefix(t[i].text, "<image>\n")); /* appendix B placement */
}

static void test_determinism(void)
{
    for (const char *const *task = cl_synth_tasks(); *task; task++) {
        if (!cl_fixture_task_available(*task))
            continue;
        g_autoptr(ClSynthSample) a = cl_fixture_synth(*task, 42, NULL);
        g_autoptr(ClSynthSample) b = cl_fixture_synth(*task, 42, NULL);
        g_autoptr(ClSynthSample) c = cl_fixture_synth(*task, 43, NULL);
        g_assert_true(cl_fixture_synth_same_pixels(a, b));
        g_autofree char *ta = conversation_text(a), *tb = conversation_text(b);
        g_assert_cmpstr(ta, ==, tb);
        const char *paths[CL_SYNTH_MAX_SERIES + 1] = { NULL }; /* a series has up to 32 */
        char names[CL_SYNTH_MAX_SERIES][8];
        for (int k = 0; k < CL_SYNTH_MAX_SERIES; k++) {
            g_snprintf(names[k], sizeof names[k], "%d.png", k + 1);
            paths[k] = names[k];
        }
        g_autofree char *ja = cl_synth_sample_to_jsonl(a, "x", paths);
        g_autofree char *jb = cl_synth_sample_to_jsonl(b, "x", paths);
        g_assert_cmpstr(ja, ==, jb);
        gsize cells = (gsize)a->grid_w * a->grid_h * a->n_images;
        g_assert_cmpmem(a->grounding, cells * 8, b->grounding, cells * 8);
        g_assert_cmpmem(a->changed, cells, b->changed, cells);
        /* another seed, another sample */
        g_assert_false(cl_fixture_synth_same_pixels(a, c));
        g_autofree char *jc = cl_synth_sample_to_jsonl(c, "x", paths);
        if (!(g_str_equal(a->answer, "No change.") && g_str_equal(c->answer, "No change.")))
            g_assert_cmpstr(ja, !=, jc); /* two unchanged pairs may say the same */
        /* the data-set streams differ per index and per seed */
        g_assert_cmpuint(cl_synth_stream_seed(1, 0), !=, cl_synth_stream_seed(1, 1));
        g_assert_cmpuint(cl_synth_stream_seed(1, 0), !=, cl_synth_stream_seed(2, 0));
    }
}

static void test_errors(void)
{
    g_autoptr(GError) error = NULL;
    g_assert_null(cl_synth_generate("nonsense", 1, NULL, &error));
    g_assert_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_UNKNOWN_TASK);
    g_assert_nonnull(strstr(error->message, "shapes"));
    g_assert_nonnull(strstr(error->message, "dots"));
    g_clear_error(&error);

    ClSynthOptions bad[5];
    for (int i = 0; i < 5; i++)
        cl_synth_options_init(&bad[i]);
    bad[0].width = 8;
    bad[1].patch = 0;
    bad[2].n_images = 6;
    bad[3].max_objects = 65;
    bad[4].min_changes = 5, bad[4].max_changes = 2;
    for (int i = 0; i < 5; i++) {
        g_assert_null(cl_synth_generate("dots", 1, &bad[i], &error));
        g_assert_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS);
        g_clear_error(&error);
    }
    ClSynthOptions three;
    cl_synth_options_init(&three);
    three.n_images = 3; /* shapes come in pairs */
    g_assert_null(cl_synth_generate("shapes", 1, &three, &error));
    g_assert_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS);
}

/* ---- shapes: the change list re-derived from the two scene descriptions ----------------------- */

static gboolean same_look(const ClSynthObject *a, const ClSynthObject *b)
{
    return a->shape == b->shape && a->colour == b->colour && a->size == b->size &&
           a->material == b->material;
}

static gboolean same_place(const ClSynthObject *a, const ClSynthObject *b)
{
    return a->x == b->x && a->y == b->y;
}

static int count_look(const GArray *objs, const ClSynthObject *o)
{
    int n = 0;
    for (guint i = 0; i < objs->len; i++)
        n += same_look(&g_array_index(objs, ClSynthObject, i), o);
    return n;
}

/* The changes the scenes imply, as "type before after" strings (indices). */
static GPtrArray *derive_changes(const GArray *b, const GArray *a)
{
    g_autofree gboolean *used_b = g_new0(gboolean, b->len + 1);
    g_autofree gboolean *used_a = g_new0(gboolean, a->len + 1);
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    /* untouched: same look, same place */
    for (guint i = 0; i < b->len; i++)
        for (guint j = 0; j < a->len; j++)
            if (!used_a[j] &&
                same_look(&g_array_index(b, ClSynthObject, i),
                          &g_array_index(a, ClSynthObject, j)) &&
                same_place(&g_array_index(b, ClSynthObject, i),
                           &g_array_index(a, ClSynthObject, j))) {
                used_b[i] = used_a[j] = TRUE;
                break;
            }
    /* moved: same look elsewhere; replaced: another look in the same place */
    for (int pass = 0; pass < 2; pass++)
        for (guint i = 0; i < b->len; i++)
            for (guint j = 0; !used_b[i] && j < a->len; j++) {
                const ClSynthObject *x = &g_array_index(b, ClSynthObject, i);
                const ClSynthObject *y = &g_array_index(a, ClSynthObject, j);
                if (used_a[j] || (pass == 0 ? !same_look(x, y) : !same_place(x, y)))
                    continue;
                used_b[i] = used_a[j] = TRUE;
                g_ptr_array_add(out,
                                g_strdup_printf("%s %u %u", pass == 0 ? "move" : "replace", i, j));
            }
    for (guint i = 0; i < b->len; i++)
        if (!used_b[i])
            g_ptr_array_add(out, g_strdup_printf("remove %u -1", i));
    for (guint j = 0; j < a->len; j++)
        if (!used_a[j])
            g_ptr_array_add(out, g_strdup_printf("add -1 %u", j));
    return out;
}

static gint cmp_strptr(gconstpointer a, gconstpointer b)
{
    return g_strcmp0(*(char *const *)a, *(char *const *)b);
}

static void test_shapes_answers(void)
{
    int types_seen[4] = { 0 };
    for (guint64 seed = 0; seed < N_SEEDS; seed++) {
        g_autoptr(ClSynthSample) s = cl_fixture_synth("shapes", seed, NULL);
        check_conversation(s);
        g_assert_cmpint(s->n_images, ==, 2);
        g_assert_cmpint(s->quantity, ==, CL_SYNTH_QUANTITY_NONE);
        g_assert_cmpuint(s->changes->len, >=, 1);
        g_assert_cmpuint(s->changes->len, <=, 4);
        const GArray *b = s->objects[0], *a = s->objects[1];
        g_assert_cmpuint(b->len, >=, 4); /* the default at 160 px: 4-8 objects */
        g_assert_cmpuint(b->len, <=, 8);

        g_autoptr(GPtrArray) derived = derive_changes(b, a);
        g_ptr_array_sort(derived, cmp_strptr);
        g_autoptr(GPtrArray) given = g_ptr_array_new_with_free_func(g_free);
        const char *text = s->answer;
        for (guint i = 0; i < s->changes->len; i++) {
            const ClSynthChange *c = &g_array_index(s->changes, ClSynthChange, i);
            types_seen[c->type]++;
            g_ptr_array_add(given, g_strdup_printf("%s %d %d", cl_synth_change_name(c->type),
                                                   c->before, c->after));
            const ClSynthObject *ob =
                c->before >= 0 ? &g_array_index(b, ClSynthObject, c->before) : NULL;
            const ClSynthObject *oa =
                c->after >= 0 ? &g_array_index(a, ClSynthObject, c->after) : NULL;
            /* every object the answer names is the only one of its look in its scene */
            if (ob)
                g_assert_cmpint(count_look(b, ob), ==, 1);
            if (oa)
                g_assert_cmpint(count_look(a, oa), ==, 1);
            /* the answer says the changes in order, each as one of its phrasings */
            gboolean matched = FALSE;
            for (int v = 0; !matched && v < cl_synth_change_n_variants(c->type); v++) {
                g_autofree char *p = cl_synth_change_phrase(c->type, ob, oa, v);
                if (g_str_has_prefix(text, p)) {
                    text += strlen(p);
                    matched = TRUE;
                }
            }
            if (!matched)
                g_error("seed %" G_GUINT64_FORMAT ": change %u not phrased at \"%s\"", seed, i,
                        text);
            if (i + 1 < s->changes->len) {
                g_assert_cmpint(*text, ==, ' ');
                text++;
            }
        }
        g_assert_cmpstr(text, ==, "");
        g_ptr_array_sort(given, cmp_strptr);
        g_assert_cmpuint(given->len, ==, derived->len);
        for (guint i = 0; i < given->len; i++)
            g_assert_cmpstr(g_ptr_array_index(given, i), ==, g_ptr_array_index(derived, i));

        /* the structured answer says the same */
        g_autoptr(JsonNode) json = cl_synth_sample_answer_json(s);
        JsonArray *arr = json_object_get_array_member(json_node_get_object(json), "changes");
        g_assert_cmpuint(json_array_get_length(arr), ==, s->changes->len);
        JsonObject *c0 = json_array_get_object_element(arr, 0);
        g_assert_cmpstr(json_object_get_string_member(c0, "type"), ==,
                        cl_synth_change_name(g_array_index(s->changes, ClSynthChange, 0).type));
    }
    for (int t = 0; t < 4; t++)
        g_assert_cmpint(types_seen[t], >, 0); /* every kind of change occurs */

    /* the paper's setting: always 4 changes */
    ClSynthOptions four;
    cl_synth_options_init(&four);
    four.min_changes = four.max_changes = 4;
    g_autoptr(ClSynthSample) s = cl_fixture_synth("shapes", 5, &four);
    g_assert_cmpuint(s->changes->len, ==, 4);
    /* the paper's example sentences are among the phrasings */
    ClSynthObject yellow = { CL_SYNTH_SHAPE_CYLINDER, 7, 1, 1, 0, 0, { 0 } };
    g_autofree char *p = cl_synth_change_phrase(CL_SYNTH_CHANGE_ADD, NULL, &yellow, 0);
    g_assert_cmpstr(p, ==, "A new large yellow metal cylinder is visible.");
}

/* ---- dots: the quantity re-computed from the dot positions ------------------------------------ */

/* Jarvis march (gift wrapping), then the shoelace formula: not the generator's algorithm */
static double hull_area_jarvis(const double (*p)[2], int n)
{
    int start = 0;
    for (int i = 1; i < n; i++)
        if (p[i][0] < p[start][0] || (p[i][0] == p[start][0] && p[i][1] < p[start][1]))
            start = i;
    int hull[8], h = 0, cur = start;
    do {
        hull[h++] = cur;
        int next = (cur + 1) % n;
        for (int i = 0; i < n; i++) {
            double cr = (p[next][0] - p[cur][0]) * (p[i][1] - p[cur][1]) -
                        (p[next][1] - p[cur][1]) * (p[i][0] - p[cur][0]);
            if (cr < 0)
                next = i;
        }
        cur = next;
    } while (cur != start && h < n);
    double a = 0;
    for (int i = 0; i < h; i++) {
        const double *u = p[hull[i]], *v = p[hull[(i + 1) % h]];
        a += u[0] * v[1] - v[0] * u[1];
    }
    return fabs(a) / 2;
}

static void test_dots_answers(void)
{
    static const char *const words[] = { NULL, NULL, "two", "three", "four", "five" };
    int counts_seen[6] = { 0 };
    ClSynthOptions wide; /* the paper's 384 × 216 aspect: normalisation by both sides */
    cl_synth_options_init(&wide);
    wide.width = 192, wide.height = 108;
    for (guint64 seed = 0; seed < 2 * N_SEEDS; seed++) {
        g_autoptr(ClSynthSample) s = cl_fixture_synth("dots", seed, seed < N_SEEDS ? NULL : &wide);
        check_conversation(s);
        int n = s->n_images;
        g_assert_cmpint(n, >=, 2);
        g_assert_cmpint(n, <=, 5);
        counts_seen[n]++;
        double p[5][2];
        for (int k = 0; k < n; k++) {
            g_assert_cmpuint(s->objects[k]->len, ==, 1);
            const ClSynthObject *o = &g_array_index(s->objects[k], ClSynthObject, 0);
            g_assert_cmpint(o->shape, ==, CL_SYNTH_SHAPE_DOT);
            p[k][0] = o->x, p[k][1] = o->y;
        }
        double w = s->images[0].width, h = s->images[0].height, want;
        if (n == 2) {
            g_assert_cmpint(s->quantity, ==, CL_SYNTH_QUANTITY_DISTANCE);
            want = hypot(p[1][0] - p[0][0], p[1][1] - p[0][1]) / hypot(w, h);
        } else {
            g_assert_cmpint(s->quantity, ==, CL_SYNTH_QUANTITY_AREA);
            want = hull_area_jarvis((const double(*)[2])p, n) / (w * h);
            if (n == 3)
                g_assert_cmpfloat(want, <=, 0.5);
        }
        g_assert_cmpfloat_with_epsilon(s->value, want, 1e-12); /* two summation orders */
        char text[G_ASCII_DTOSTR_BUF_SIZE];
        g_ascii_formatd(text, sizeof text, "%.4f", want);
        g_assert_cmpstr(s->answer, ==, text);
        g_assert_cmpfloat(fabs(g_ascii_strtod(s->answer, NULL) - want), <=, 0.00005 + 1e-12);

        const ClChatTurn *t = cl_chat_conversation_turns(s->conversation);
        gsize nt = cl_chat_conversation_len(s->conversation);
        g_assert_cmpint(t[0].role, ==, CL_CHAT_SYSTEM);
        g_assert_nonnull(strstr(t[0].text, words[n]));
        g_autofree char *q = g_strdup_printf("What is the %s formed by the red dots across the %s "
                                             "images?",
                                             n == 2 ? "distance" : "area", words[n]);
        g_assert_true(g_str_has_suffix(t[nt - 2].text, q));
        g_assert_cmpuint(nt, ==, 1 + 2 * (gsize)n); /* system, n user turns, n-1 fillers, answer */
    }
    for (int n = 2; n <= 5; n++)
        g_assert_cmpint(counts_seen[n], >, 0);
}

/* ---- auxiliary targets ------------------------------------------------------------------------ */

/* Whether the box, as image `as` shows it (shifted; with a framing, turned and scaled about the
 * centre first: the bounding box of its corners), overlaps patch (gx, gy). */
static gboolean box_hits_patch(const ClSynthSample *s, const double *box, const ClSynthImage *as,
                               int gx, int gy)
{
    double px0 = gx * s->patch, py0 = gy * s->patch;
    double px1 = MIN(px0 + s->patch, s->images[0].width),
           py1 = MIN(py0 + s->patch, s->images[0].height);
    double b[4] = { box[0], box[1], box[2], box[3] };
    if (as->rotation != 0 || as->rescale != 0) {
        const double c[2] = { as->width / 2.0, as->height / 2.0 }, z = 1 + as->rescale;
        b[0] = b[1] = G_MAXDOUBLE, b[2] = b[3] = -G_MAXDOUBLE;
        for (int q = 0; q < 4; q++) {
            const double u = box[q % 2 ? 2 : 0] - c[0], v = box[q / 2 ? 3 : 1] - c[1];
            const double x = c[0] + z * (u * cos(as->rotation) - v * sin(as->rotation)),
                         y = c[1] + z * (u * sin(as->rotation) + v * cos(as->rotation));
            b[0] = MIN(b[0], x), b[2] = MAX(b[2], x), b[1] = MIN(b[1], y), b[3] = MAX(b[3], y);
        }
    }
    return b[2] + as->shift[0] > px0 && b[0] + as->shift[0] < px1 && b[3] + as->shift[1] > py0 &&
           b[1] + as->shift[1] < py1;
}

static void check_masks(const ClSynthSample *s, gboolean pixel_check)
{
    int gw = s->grid_w, gh = s->grid_h;
    gsize cells = (gsize)gw * gh;
    g_assert_cmpint(gw, ==, (s->images[0].width + s->patch - 1) / s->patch);
    for (int k = 0; k < s->n_images; k++) {
        const GArray *objs = s->objects[k];
        /* grounding: bit i exactly where object i's box (as drawn, shifted) meets the patch */
        for (int gy = 0; gy < gh; gy++)
            for (int gx = 0; gx < gw; gx++) {
                guint64 m = s->grounding[cells * k + gy * gw + gx];
                for (guint i = 0; i < objs->len; i++)
                    g_assert_cmpint(!!(m & (G_GUINT64_CONSTANT(1) << i)), ==,
                                    box_hits_patch(s, g_array_index(objs, ClSynthObject, i).box,
                                                   &s->images[k], gx, gy));
                g_assert_cmpuint(m >> objs->len, ==, 0);
            }
    }
    for (gsize i = 0; i < cells; i++)
        g_assert_cmpint(s->changed[i], ==, 0); /* the first image has no predecessor */
    for (int k = 1; k < s->n_images; k++) {
        const guint8 *mask = s->changed + cells * k;
        /* a pair may be unchanged (aerial's "there is no difference"): then nothing is marked */
        gboolean has_change = FALSE;
        for (guint i = 0; i < s->changes->len; i++)
            has_change |= g_array_index(s->changes, ClSynthChange, i).image == k;
        int marked = 0;
        for (int gy = 0; gy < gh; gy++)
            for (int gx = 0; gx < gw; gx++) {
                /* marked exactly where a changed object's old or new box falls */
                gboolean hit = FALSE;
                for (guint i = 0; i < s->changes->len; i++) {
                    const ClSynthChange *c = &g_array_index(s->changes, ClSynthChange, i);
                    if (c->image != k)
                        continue;
                    if (c->before >= 0)
                        hit |= box_hits_patch(
                            s, g_array_index(s->objects[k - 1], ClSynthObject, c->before).box,
                            &s->images[k], gx, gy);
                    if (c->after >= 0)
                        hit |= box_hits_patch(
                            s, g_array_index(s->objects[k], ClSynthObject, c->after).box,
                            &s->images[k], gx, gy);
                }
                g_assert_cmpint(mask[gy * gw + gx], ==, hit);
                marked += hit;
            }
        g_assert_cmpint(marked > 0, ==, has_change);
        g_assert_cmpint(marked, <, (int)cells); /* unchanged areas stay unmarked */
        if (!pixel_check)
            continue;
        /* without nuisances, every pixel that differs from the previous image lies in a marked
         * patch: the boxes hold everything drawn for the changed objects */
        const ClSynthImage *a = &s->images[k - 1], *b = &s->images[k];
        int differing = 0;
        for (int y = 0; y < b->height; y++)
            for (int x = 0; x < b->width; x++)
                if (memcmp(a->pixels + ((gsize)y * b->width + x) * b->channels,
                           b->pixels + ((gsize)y * b->width + x) * b->channels,
                           (size_t)b->channels) != 0) {
                    differing++;
                    if (!mask[(y / s->patch) * gw + x / s->patch])
                        g_error("%s: pixel (%d, %d) of image %d changed outside the mask", s->task,
                                x, y, k);
                    /* and, finer than patches, inside a changed object's box */
                    gboolean inside = FALSE;
                    for (guint i = 0; i < s->changes->len; i++) {
                        const ClSynthChange *c = &g_array_index(s->changes, ClSynthChange, i);
                        for (int side = 0; c->image == k && side < 2; side++) {
                            int idx = side ? c->after : c->before;
                            if (idx < 0)
                                continue;
                            const double *bx =
                                g_array_index(s->objects[side ? k : k - 1], ClSynthObject, idx).box;
                            inside |= bx[0] < x + 1 && bx[2] > x && bx[1] < y + 1 && bx[3] > y;
                        }
                    }
                    if (!inside)
                        g_error("%s: pixel (%d, %d) of image %d changed outside every box", s->task,
                                x, y, k);
                }
        g_assert_cmpint(differing > 0, ==, has_change);
    }
}

static void test_masks(void)
{
    ClSynthOptions clean;
    cl_synth_options_init(&clean);
    clean.nuisance = FALSE;
    ClSynthOptions odd; /* a grid that does not divide the image, with nuisances */
    cl_synth_options_init(&odd);
    odd.width = 150, odd.height = 130, odd.patch = 14;
    for (const char *const *task = cl_synth_tasks(); *task; task++)
        for (guint64 seed = 0; seed < 12 && cl_fixture_task_available(*task); seed++) {
            g_autoptr(ClSynthSample) a = cl_fixture_synth(*task, seed, &clean);
            check_masks(a, TRUE);
            g_autoptr(ClSynthSample) b = cl_fixture_synth(*task, seed, &odd);
            g_assert_cmpint(b->grid_w, ==, 11);
            g_assert_cmpint(b->grid_h, ==, 10);
            check_masks(b, FALSE);
            g_autoptr(ClSynthSample) c = cl_fixture_synth(*task, seed, NULL);
            check_masks(c, FALSE);
        }
}

/* ---- nuisances -------------------------------------------------------------------------------- */

static void test_nuisance(void)
{
    ClSynthOptions off;
    cl_synth_options_init(&off);
    off.nuisance = FALSE;
    for (const char *const *task = cl_synth_tasks(); *task; task++)
        for (guint64 seed = 0; seed < 8 && cl_fixture_task_available(*task); seed++) {
            g_autoptr(ClSynthSample) on = cl_fixture_synth(*task, seed, NULL);
            g_autoptr(ClSynthSample) no = cl_fixture_synth(*task, seed, &off);
            g_autofree char *ta = conversation_text(on), *tb = conversation_text(no);
            g_assert_cmpstr(ta, ==, tb); /* the answer does not depend on the acquisition */
            g_assert_cmpfloat(on->value, ==, no->value);
            g_assert_cmpint(on->n_images, ==, no->n_images);
            for (int k = 0; k < on->n_images; k++) {
                g_assert_cmpuint(on->objects[k]->len, ==, no->objects[k]->len);
                g_assert_cmpmem(on->objects[k]->data, on->objects[k]->len * sizeof(ClSynthObject),
                                no->objects[k]->data, no->objects[k]->len * sizeof(ClSynthObject));
                const ClSynthImage *x = &on->images[k], *y = &no->images[k];
                g_assert_cmpfloat(fabs(x->shift[0]), <=, 2.0);
                g_assert_cmpfloat(fabs(x->shift[1]), <=, 2.0);
                g_assert_cmpfloat(fabs(x->gain - 1), <=, 0.122); /* gain_q 900..1140 of 1024 */
                g_assert_cmpfloat(x->noise_sigma, >, 0);
                g_assert_cmpfloat(y->gain, ==, 1.0);
                /* slight: different pixels, but the same picture: against the clean image
                 * moved by the rounded shift, the pixels stay strongly correlated (gain, offset
                 * and a sub-pixel remainder are all a correlation tolerates) */
                int w = x->width, h = x->height, differ = 0;
                int dx = (int)lround(x->shift[0]), dy = (int)lround(x->shift[1]);
                double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0, cnt = 0;
                for (int yy = 4; yy < h - 4; yy++)
                    for (int xx = 4; xx < w - 4; xx++)
                        for (int c = 0; c < 3; c++) {
                            double a = x->pixels[((gsize)yy * w + xx) * 3 + c];
                            double b = y->pixels[((gsize)(yy - dy) * w + (xx - dx)) * 3 + c];
                            differ += x->pixels[((gsize)yy * w + xx) * 3 + c] !=
                                      y->pixels[((gsize)yy * w + xx) * 3 + c];
                            sa += a, sb += b, saa += a * a, sbb += b * b, sab += a * b, cnt++;
                        }
                double cov = sab / cnt - sa / cnt * sb / cnt;
                double corr = cov / sqrt((saa / cnt - sa * sa / cnt / cnt) *
                                         (sbb / cnt - sb * sb / cnt / cnt));
                g_assert_cmpint(differ, >, (int)(cnt / 4));
                g_assert_cmpfloat(corr, >, 0.75);
            }
            /* with nuisances even the unchanged first images of two samples differ by acquisition
             * only: the first image of `on` is not bit-identical to its clean version */
            g_assert_false(cl_fixture_synth_same_pixels(on, no));
        }
}

/* ---- the CLI ---------------------------------------------------------------------------------- */

static int run_cli(const char *const *args, char **err_out)
{
    /* changelens-cli synth ARGS… */
    g_autoptr(GPtrArray) a = g_ptr_array_new();
    g_ptr_array_add(a, "synth");
    for (int i = 0; args[i]; i++)
        g_ptr_array_add(a, (char *)args[i]);
    g_ptr_array_add(a, NULL);
    return cl_fixture_run_cli((const char *const *)a->pdata, err_out);
}

static void check_written(const char *dir, const char *task, guint64 seed, int n, int size)
{
    g_autofree char *path = g_build_filename(dir, "data.jsonl", NULL);
    g_autofree char *tmp = g_build_filename(dir, "data.jsonl.tmp", NULL);
    g_assert_false(g_file_test(tmp, G_FILE_TEST_EXISTS));
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_assert_cmpuint(g_strv_length(lines), ==, (guint)n + 1);
    g_assert_cmpstr(lines[n], ==, "");
    ClSynthOptions opts;
    cl_synth_options_init(&opts);
    opts.width = opts.height = size;
    for (int i = 0; i < n; i++) {
        g_autoptr(JsonParser) parser = json_parser_new();
        g_autoptr(GError) error = NULL;
        g_assert_true(json_parser_load_from_data(parser, lines[i], -1, &error));
        g_assert_no_error(error);
        JsonObject *o = json_node_get_object(json_parser_get_root(parser));
        g_assert_cmpstr(json_object_get_string_member(o, "task"), ==, task);
        g_autofree char *id = g_strdup_printf("%s-%06d", task, i + 1);
        g_assert_cmpstr(json_object_get_string_member(o, "id"), ==, id);
        g_assert_true(json_object_has_member(o, "answer"));
        JsonArray *msgs = json_object_get_array_member(o, "messages");
        JsonArray *imgs = json_object_get_array_member(o, "images");
        int tags = 0;
        const char *last_role = NULL, *last = NULL;
        for (guint m = 0; m < json_array_get_length(msgs); m++) {
            JsonObject *msg = json_array_get_object_element(msgs, m);
            last_role = json_object_get_string_member(msg, "role");
            last = json_object_get_string_member(msg, "content");
            for (const char *p = last; (p = strstr(p, "<image>")); p += 7)
                tags++;
        }
        g_assert_cmpint(tags, ==, (int)json_array_get_length(imgs));
        g_assert_cmpstr(last_role, ==, "assistant");

        /* the sample is the one the library makes from the stream seed */
        g_autoptr(ClSynthSample) s = cl_fixture_synth(task, cl_synth_stream_seed(seed, i), &opts);
        g_assert_cmpstr(last, ==, s->answer);
        g_assert_cmpint(s->n_images, ==, (int)json_array_get_length(imgs));
        for (int k = 0; k < s->n_images; k++) {
            const char *rel = json_array_get_string_element(imgs, k);
            g_autofree char *want = g_strdup_printf("images/%06d-%d.png", i + 1, k + 1);
            g_assert_cmpstr(rel, ==, want);
            g_autofree char *png = g_build_filename(dir, rel, NULL);
            g_autoptr(ClImage) img = cl_image_load(png, NULL, &error);
            g_assert_no_error(error);
            g_assert_cmpuint(img->width, ==, (guint)size);
            g_assert_cmpuint(img->height, ==, (guint)size);
            g_assert_cmpuint(img->channels, ==, 3);
            /* lossless: the file holds the sample's bytes */
            const float *d = cl_image_frame(img, 0)->data;
            const ClSynthImage *si = &s->images[k];
            for (int c = 0; c < 3; c++)
                for (int p = 0; p < size * size; p++)
                    if (d[(gsize)c * size * size + p] != si->pixels[(gsize)p * 3 + c])
                        g_error("%s: channel %d pixel %d differs", png, c, p);
        }
    }
}

static void test_cli(void)
{
    g_autofree char *tmp = cl_fixture_tmpdir("cl-test-synth");
    g_autofree char *dir = g_build_filename(tmp, "shapes", NULL);
    const char *shapes[] = { "--task", "shapes", "--n", "3", "--seed", "11", "--out", dir, NULL };
    g_assert_cmpint(run_cli(shapes, NULL), ==, 0);
    check_written(dir, "shapes", 11, 3, 160);

    /* a non-empty folder is refused, then overwritten with --force */
    g_autofree char *err = NULL;
    g_assert_cmpint(run_cli(shapes, &err), !=, 0);
    g_assert_nonnull(strstr(err, "--force"));
    const char *forced[] = { "--task", "shapes", "--n",     "2",       "--seed", "12",
                             "--out",  dir,      "--force", "--quiet", NULL };
    g_assert_cmpint(run_cli(forced, NULL), ==, 0);
    check_written(dir, "shapes", 12, 2, 160);

    g_autofree char *ddir = g_build_filename(tmp, "dots", NULL);
    const char *dots[] = { "--task", "dots", "--n",    "4",  "--seed",  "5",
                           "--out",  ddir,   "--size", "96", "--quiet", NULL };
    g_assert_cmpint(run_cli(dots, NULL), ==, 0);
    check_written(ddir, "dots", 5, 4, 96);
    cl_fixture_rmdir(tmp);
}

static void test_cli_bad_args(void)
{
    g_autofree char *tmp = cl_fixture_tmpdir("cl-test-synth-bad");
    g_autofree char *out = g_build_filename(tmp, "out", NULL);
    const char *const cases[][12] = {
        { "--task", "nonsense", "--n", "1", "--seed", "1", "--out", out, NULL },
        { "--n", "1", "--seed", "1", "--out", out, NULL },
        { "--task", "dots", "--seed", "1", "--out", out, NULL },
        { "--task", "dots", "--n", "0", "--seed", "1", "--out", out, NULL },
        { "--task", "dots", "--n", "x", "--seed", "1", "--out", out, NULL },
        { "--task", "dots", "--n", "1", "--seed", "-3", "--out", out, NULL },
        { "--task", "dots", "--n", "1", "--seed", "1", NULL },
        { "--task", "dots", "--n", "1", "--seed", "1", "--out", out, "--size", "8", NULL },
        { "--task", "dots", "--n", "1", "--seed", "1", "--out", out, "--images", "7", NULL },
        { "--task", "shapes", "--n", "1", "--seed", "1", "--out", out, "--changes", "x", NULL },
        { "--task", "dots", "--n", "1", "--seed", "1", "--out", out, "extra", NULL },
        { "--bogus", NULL },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *err = NULL;
        g_assert_cmpint(run_cli(cases[i], &err), ==, 2);
        g_assert_cmpuint(strlen(err), >, 0);
        if (i == 0)
            g_assert_nonnull(strstr(err, "known tasks: shapes, dots"));
    }
    g_assert_false(g_file_test(out, G_FILE_TEST_EXISTS)); /* nothing written on a usage error */
    const char *list[] = { "--list", NULL };
    g_assert_cmpint(run_cli(list, NULL), ==, 0);
    cl_fixture_rmdir(tmp);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/synth/determinism", test_determinism);
    g_test_add_func("/synth/errors", test_errors);
    g_test_add_func("/synth/shapes-answers", test_shapes_answers);
    g_test_add_func("/synth/dots-answers", test_dots_answers);
    g_test_add_func("/synth/masks", test_masks);
    g_test_add_func("/synth/nuisance", test_nuisance);
    g_test_add_func("/synth/cli", test_cli);
    g_test_add_func("/synth/cli-bad-args", test_cli_bad_args);
    return g_test_run();
}
