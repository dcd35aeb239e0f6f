/* test-synth-aerial-edits.c - the `aerial` (LEVIR-CC phrasing, GeoTIFF files) and `edits`
 * (ImgEdit phrasing) synthetic tasks: determinism, answers re-derived from the scenes and their
 * structured form, changes visible exactly where they are said to be, GeoTIFF round trips. */
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "fixtures.h"
#include "image/image.h"
#include "synth/synth-private.h" /* the aerial task's GeoTIFF writer */

/* The tasks' structured answers (aerial.c, edits.c). */

#define N_SEEDS 100

static gsize n_bytes(const ClSynthImage *im)
{
    return (gsize)im->width * im->height * im->channels;
}

static char *json_text(JsonNode *n)
{
    g_autoptr(JsonGenerator) g = json_generator_new();
    json_generator_set_root(g, n);
    return json_generator_to_data(g, NULL);
}

/* The 3 × 3 cell of a box centre: the definition of the coarse locations. */
static int cell_of(const double box[4], int w, int h)
{
    double cx = (box[0] + box[2]) / 2, cy = (box[1] + box[3]) / 2;
    int gx = CLAMP((int)floor(3 * cx / w), 0, 2), gy = CLAMP((int)floor(3 * cy / h), 0, 2);
    return gy * 3 + gx;
}

/* Mean absolute difference of the two images inside the union of `boxes` and outside it. */
static void diff_inside_outside(const ClSynthSample *s, const double (*boxes)[4], int n_boxes,
                                double *inside, double *outside, int *n_out_differ)
{
    const ClSynthImage *a = &s->images[0], *b = &s->images[1];
    double si = 0, so = 0;
    gsize ni = 0, no = 0;
    *n_out_differ = 0;
    for (int y = 0; y < a->height; y++)
        for (int x = 0; x < a->width; x++) {
            gboolean in = FALSE;
            for (int i = 0; i < n_boxes; i++)
                in |= boxes[i][0] < x + 1 && boxes[i][2] > x && boxes[i][1] < y + 1 &&
                      boxes[i][3] > y;
            double d = 0;
            for (int c = 0; c < 3; c++) {
                gsize at = ((gsize)y * a->width + x) * 3 + c;
                d += fabs((double)a->pixels[at] - b->pixels[at]);
            }
            if (in)
                si += d / 3, ni++;
            else {
                so += d / 3, no++;
                *n_out_differ += d > 0;
            }
        }
    *inside = ni ? si / ni : 0;
    *outside = no ? so / no : 0;
}

static void check_conversation(const ClSynthSample *s, const char *system, const char *question)
{
    const ClChatTurn *t = cl_chat_conversation_turns(s->conversation);
    gsize n = cl_chat_conversation_len(s->conversation);
    g_assert_cmpuint(n, ==, 5); /* system, image, filler, image + question, answer */
    g_assert_cmpint(t[0].role, ==, CL_CHAT_SYSTEM);
    g_assert_cmpstr(t[0].text, ==, system);
    g_assert_true(g_str_has_prefix(t[1].text, "<image>\n"));
    g_assert_true(g_str_has_prefix(t[3].text, "<image>\n"));
    g_assert_true(g_str_has_suffix(t[3].text, question));
    g_assert_cmpint(t[4].role, ==, CL_CHAT_ASSISTANT);
    g_assert_cmpstr(t[4].text, ==, s->answer);
}

/* ---- determinism ------------------------------------------------------------------------------ */

static void test_determinism(void)
{
    static const char *const tasks[] = { "aerial", "edits" };
    for (gsize t = 0; t < G_N_ELEMENTS(tasks); t++)
        for (guint64 seed = 7; seed < 10; seed++) {
            g_autoptr(ClSynthSample) a = cl_fixture_synth(tasks[t], seed, NULL);
            g_autoptr(ClSynthSample) b = cl_fixture_synth(tasks[t], seed, NULL);
            g_autoptr(ClSynthSample) c = cl_fixture_synth(tasks[t], seed + 100, NULL);
            g_assert_true(cl_fixture_synth_same_pixels(a, b));
            g_assert_cmpstr(a->answer, ==, b->answer);
            JsonNode *(*structured)(const ClSynthSample *) =
                t == 0 ? cl_synth_aerial_answer_json : cl_synth_edits_answer_json;
            g_autoptr(JsonNode) ja = structured(a), jb = structured(b);
            g_autofree char *ta = json_text(ja), *tb = json_text(jb);
            g_assert_cmpstr(ta, ==, tb);
            for (int k = 0; k < 2; k++) {
                g_assert_cmpuint(a->objects[k]->len, ==, b->objects[k]->len);
                g_assert_cmpmem(a->objects[k]->data, a->objects[k]->len * sizeof(ClSynthObject),
                                b->objects[k]->data, b->objects[k]->len * sizeof(ClSynthObject));
            }
            g_assert_false(cl_fixture_synth_same_pixels(a, c)); /* another seed, another scene */
        }
}

/* ---- aerial ----------------------------------------------------------------------------------- */

static const char *const aerial_locs[9] = {
    "at the top left",    "at the top",    "at the top right",
    "on the left",        "in the centre", "on the right",
    "at the bottom left", "at the bottom", "at the bottom right",
};
static const char *const aerial_loc_names[9] = { "top left",    "top",    "top right",
                                                 "left",        "centre", "right",
                                                 "bottom left", "bottom", "bottom right" };

static const double *aerial_change_box(const ClSynthSample *s, const ClSynthChange *c)
{
    return c->type == CL_SYNTH_CHANGE_ADD
               ? g_array_index(s->objects[1], ClSynthObject, c->after).box
               : g_array_index(s->objects[0], ClSynthObject, c->before).box;
}

/* changed_only (a mix's radiograph+changed, aerial+changed): no unchanged pair, and the tasks
 * as they were without it (the option draws nothing when off) */
static void test_changed_only(void)
{
    ClSynthOptions on;
    cl_synth_options_init(&on);
    on.changed_only = TRUE;
    const char *tasks[] = { "aerial", "radiograph" };
    for (guint t = 0; t < G_N_ELEMENTS(tasks); t++) {
        int unchanged_before = 0;
        for (guint64 seed = 0; seed < 40; seed++) {
            g_autoptr(ClSynthSample) plain = cl_fixture_synth(tasks[t], seed, NULL);
            g_autoptr(ClSynthSample) again = cl_fixture_synth(tasks[t], seed, NULL);
            g_assert_cmpstr(plain->answer, ==, again->answer);
            g_autoptr(ClSynthSample) s = cl_fixture_synth(tasks[t], seed, &on);
            gboolean still = t == 0 ? plain->changes->len == 0
                                    : g_str_equal(plain->answer, "nothing has changed.");
            unchanged_before += still;
            if (t == 0)
                g_assert_cmpuint(s->changes->len, >, 0);
            else
                g_assert_cmpstr(s->answer, !=, "nothing has changed.");
        }
        g_test_message("%s: %d of 40 unchanged without it, none with it", tasks[t],
                       unchanged_before);
        g_assert_cmpint(unchanged_before, >, 0);
    }
}

static void test_aerial_answers(void)
{
    ClSynthOptions clean;
    cl_synth_options_init(&clean);
    clean.nuisance = FALSE;
    int unchanged = 0, types_seen[4] = { 0 };
    static const char *const types[4] = { "construction", "demolition", "road",
                                          "vegetation_cleared" };
    for (guint64 seed = 0; seed < N_SEEDS; seed++) {
        g_autoptr(ClSynthSample) s = cl_fixture_synth("aerial", seed, &clean);
        g_autoptr(ClSynthSample) noisy = cl_fixture_synth("aerial", seed, NULL);
        check_conversation(s,
                           "You are an expert at detecting and describing changes between two "
                           "images. Given a before and after image, describe what has changed.",
                           "This is the after satellite image. Describe what has changed.");
        /* the acquisition never changes the answer or the scene */
        g_assert_cmpstr(s->answer, ==, noisy->answer);
        g_assert_cmpuint(s->changes->len, ==, noisy->changes->len);
        int w = s->images[0].width, h = s->images[0].height;
        g_autoptr(JsonNode) json = cl_synth_aerial_answer_json(s);
        JsonObject *jo = json_node_get_object(json);
        JsonArray *jc = json_object_get_array_member(jo, "changes");
        g_assert_cmpuint(json_array_get_length(jc), ==, s->changes->len);
        g_assert_cmpint(json_object_get_boolean_member(jo, "change"), ==, s->changes->len > 0);
        g_assert_cmpstr(json_object_get_string_member(jo, "text"), ==, s->answer);

        if (s->changes->len == 0) {
            unchanged++;
            g_assert_cmpstr(s->answer, ==, "there is no difference .");
            /* the same scene twice: without nuisances the same pixels, with them not */
            g_assert_cmpuint(s->objects[0]->len, ==, s->objects[1]->len);
            g_assert_cmpmem(s->objects[0]->data, s->objects[0]->len * sizeof(ClSynthObject),
                            s->objects[1]->data, s->objects[1]->len * sizeof(ClSynthObject));
            g_assert_cmpmem(s->images[0].pixels, n_bytes(&s->images[0]), s->images[1].pixels,
                            n_bytes(&s->images[1]));
            g_assert_true(memcmp(noisy->images[0].pixels, noisy->images[1].pixels,
                                 n_bytes(&noisy->images[0])) != 0);
            continue;
        }
        /* one clause per change, in order, LEVIR-CC style: lower case, " ." at the end */
        g_assert_true(g_str_has_suffix(s->answer, " ."));
        g_assert_cmpstr(s->answer, !=, "there is no difference .");
        g_autofree char *body = g_strndup(s->answer, strlen(s->answer) - 2);
        g_auto(GStrv) clauses = g_strsplit(body, " and ", -1);
        g_assert_cmpuint(g_strv_length(clauses), ==, s->changes->len);
        int n_add = 0, n_remove = 0;
        double(*boxes)[4] = g_malloc(sizeof(double[4]) * s->changes->len);
        for (guint i = 0; i < s->changes->len; i++) {
            const ClSynthChange *c = &g_array_index(s->changes, ClSynthChange, i);
            g_assert_cmpint(c->image, ==, 1);
            const double *box = aerial_change_box(s, c);
            memcpy(boxes[i], box, sizeof boxes[i]);
            int cell = cell_of(box, w, h);
            JsonObject *e = json_array_get_object_element(jc, i);
            const char *type = json_object_get_string_member(e, "type");
            g_assert_cmpstr(json_object_get_string_member(e, "location"), ==,
                            aerial_loc_names[cell]);
            g_assert_nonnull(strstr(clauses[i], aerial_locs[cell]));
            int ti = -1;
            for (int t = 0; t < 4; t++)
                if (g_strcmp0(type, types[t]) == 0)
                    ti = t;
            g_assert_cmpint(ti, >=, 0);
            types_seen[ti]++;
            const char *cl = clauses[i];
            gboolean built = strstr(cl, "constructed") || strstr(cl, "built");
            gboolean house = strstr(cl, "building") || strstr(cl, "house");
            switch (ti) {
            case 0: g_assert_true(built && house); break;
            case 1:
                g_assert_true(house && (strstr(cl, "demolished") || strstr(cl, "removed")));
                break;
            case 2: g_assert_true(built && strstr(cl, "road")); break;
            default: g_assert_true(strstr(cl, "trees") && !house); break;
            }
            /* additions are in the after image only, removals in the before image only */
            g_assert_cmpint(c->type == CL_SYNTH_CHANGE_ADD, ==, ti == 0 || ti == 2);
            g_assert_cmpint(c->type == CL_SYNTH_CHANGE_REMOVE, ==, ti == 1 || ti == 3);
            n_add += c->type == CL_SYNTH_CHANGE_ADD;
            n_remove += c->type == CL_SYNTH_CHANGE_REMOVE;
            /* the changed area lies inside the tile */
            g_assert_cmpfloat(box[0], >=, 0);
            g_assert_cmpfloat(box[2], <=, w);
        }
        g_assert_cmpint((int)s->objects[1]->len, ==, (int)s->objects[0]->len + n_add - n_remove);
        /* visible where said: without nuisances nothing differs outside the changed boxes and
         * the boxes hold a clear difference (roofs, roads, bare soil against grass) */
        double inside, outside;
        int n_out;
        diff_inside_outside(s, (const double(*)[4])boxes, (int)s->changes->len, &inside, &outside,
                            &n_out);
        g_free(boxes);
        g_assert_cmpint(n_out, ==, 0);
        if (inside < 8.0)
            g_error("seed %" G_GUINT64_FORMAT ": a change barely visible (%.2f)", seed, inside);
        g_assert_cmpfloat(inside, >, 20 * outside);
    }
    /* LEVIR-CC: about half the pairs unchanged */
    g_assert_cmpint(unchanged, >=, 35);
    g_assert_cmpint(unchanged, <=, 65);
    for (int t = 0; t < 4; t++)
        g_assert_cmpint(types_seen[t], >, 0);
}

static void test_aerial_nuisance(void)
{
    /* with the acquisition on, the same unchanged ground still looks alike: correlated, not equal */
    for (guint64 seed = 0; seed < 6; seed++) {
        g_autoptr(ClSynthSample) s = cl_fixture_synth("aerial", seed, NULL);
        const ClSynthImage *a = &s->images[0], *b = &s->images[1];
        double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0, n = 0;
        for (gsize i = 0; i < n_bytes(a); i++) {
            double x = a->pixels[i], y = b->pixels[i];
            sa += x, sb += y, saa += x * x, sbb += y * y, sab += x * y, n++;
        }
        double cov = sab / n - sa / n * sb / n;
        double corr = cov / sqrt((saa / n - sa * sa / n / n) * (sbb / n - sb * sb / n / n));
        g_assert_cmpfloat(corr, >, 0.5);
        g_assert_true(memcmp(a->pixels, b->pixels, n_bytes(a)) != 0);
    }
}

static void test_aerial_geotiff(void)
{
    g_autofree char *dir = cl_fixture_tmpdir("cl-test-synth-aerial");
    ClSynthOptions big;
    cl_synth_options_init(&big);
    big.width = big.height = 320;
    for (guint64 seed = 0; seed < 4; seed++) {
        g_autoptr(ClSynthSample) s = cl_fixture_synth("aerial", seed, seed == 3 ? &big : NULL);
        ClImage *img[2];
        for (int k = 0; k < 2; k++) {
            g_autofree char *path = g_strdup_printf("%s/%d-%d.tif", dir, (int)seed, k);
            g_autoptr(GError) error = NULL;
            g_assert_true(cl_synth_aerial_write(s, k, path, &error));
            g_assert_no_error(error);
            img[k] = cl_image_load(path, NULL, &error);
            g_assert_no_error(error);
            g_assert_nonnull(img[k]);
            g_assert_cmpint(img[k]->format, ==, CL_IMAGE_FORMAT_TIFF);
            g_assert_cmpuint(img[k]->width, ==, (guint)s->images[k].width);
            g_assert_cmpuint(img[k]->height, ==, (guint)s->images[k].height);
            g_assert_cmpuint(img[k]->channels, ==, 3);
            g_assert_cmpuint(img[k]->bits, ==, 8);
            /* lossless: the rendered bytes */
            const float *d = cl_image_frame(img[k], 0)->data;
            gsize np = (gsize)s->images[k].width * s->images[k].height;
            for (int c = 0; c < 3; c++)
                for (gsize p = 0; p < np; p++)
                    if (d[c * np + p] != s->images[k].pixels[p * 3 + c])
                        g_error("%s: channel %d pixel %" G_GSIZE_FORMAT " differs", path, c, p);
            const ClGeoInfo *g = img[k]->geo;
            g_assert_nonnull(g);
            g_assert_cmpint(g->epsg, ==, 32633);
            g_assert_true(g->has_transform);
            g_assert_false(g->pixel_is_point);
            g_assert_nonnull(g->crs_name);
            g_assert_nonnull(strstr(g->crs_name, "UTM zone 33N"));
            /* ~0.5 m per pixel at the default size, north up */
            double gsd = 0.5 * 160.0 / s->images[k].width;
            g_assert_cmpfloat_with_epsilon(g->pixel_size[0], gsd, 1e-12);
            g_assert_cmpfloat_with_epsilon(g->pixel_size[1], gsd, 1e-12);
            g_assert_cmpfloat(g->transform[1], ==, gsd);
            g_assert_cmpfloat(g->transform[5], ==, -gsd);
            g_assert_cmpfloat(g->transform[2], ==, 0);
            g_assert_cmpfloat(g->transform[4], ==, 0);
            /* a plausible UTM 33N position */
            g_assert_cmpfloat(g->origin[0], >=, 166000);
            g_assert_cmpfloat(g->origin[0], <=, 834000);
            g_assert_cmpfloat(g->origin[1], >=, 0);
            g_assert_cmpfloat(g->origin[1], <=, 9330000);
        }
        /* the structured answer says where the tile is, as the files do */
        g_autoptr(JsonNode) json = cl_synth_aerial_answer_json(s);
        JsonObject *tile = json_object_get_object_member(json_node_get_object(json), "tile");
        JsonArray *org = json_object_get_array_member(tile, "origin");
        g_assert_cmpint(json_object_get_int_member(tile, "epsg"), ==, img[0]->geo->epsg);
        g_assert_cmpfloat(json_array_get_double_element(org, 0), ==, img[0]->geo->origin[0]);
        g_assert_cmpfloat(json_array_get_double_element(org, 1), ==, img[0]->geo->origin[1]);
        g_assert_cmpfloat(json_object_get_double_member(tile, "pixel_size"), ==,
                          img[0]->geo->pixel_size[0]);
        /* one pixel grid for the pair */
        g_assert_cmpint(img[0]->geo->epsg, ==, img[1]->geo->epsg);
        g_assert_cmpmem(img[0]->geo->transform, sizeof img[0]->geo->transform,
                        img[1]->geo->transform, sizeof img[1]->geo->transform);
        g_assert_cmpmem(img[0]->geo->pixel_size, sizeof img[0]->geo->pixel_size,
                        img[1]->geo->pixel_size, sizeof img[1]->geo->pixel_size);
        cl_image_free(img[0]);
        cl_image_free(img[1]);
    }

    /* errors a user can act on, and nothing left behind */
    g_autoptr(ClSynthSample) s = cl_fixture_synth("aerial", 1, NULL);
    g_autoptr(GError) error = NULL;
    g_autofree char *nowhere = g_build_filename(dir, "missing", "x.tif", NULL);
    g_assert_false(cl_synth_aerial_write(s, 0, nowhere, &error));
    g_assert_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_IO);
    g_assert_nonnull(strstr(error->message, nowhere));
    g_assert_false(g_file_test(nowhere, G_FILE_TEST_EXISTS));
    g_clear_error(&error);
    g_autofree char *third = g_build_filename(dir, "third.tif", NULL);
    g_assert_false(cl_synth_aerial_write(s, 2, third, &error));
    g_assert_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS);
    g_assert_false(g_file_test(third, G_FILE_TEST_EXISTS));
    g_clear_error(&error);

    /* a data set of the task is written as GeoTIFF */
    g_autofree char *set = g_build_filename(dir, "set", NULL);
    g_assert_true(cl_synth_write_dataset(set, "aerial", 3, 2, NULL, FALSE, NULL, NULL, &error));
    g_assert_no_error(error);
    g_autofree char *first = g_build_filename(set, "images", "000001-2.tif", NULL);
    g_autoptr(ClImage) loaded = cl_image_load(first, NULL, &error);
    g_assert_no_error(error);
    g_assert_nonnull(loaded->geo);
    cl_fixture_rmdir(dir);
}

/* ---- edits ------------------------------------------------------------------------------------ */

static const char *const edit_areas[9] = { "upper left",   "upper central", "upper right",
                                           "central left", "central",       "central right",
                                           "lower left",   "lower central", "lower right" };

/* The instruction the structured edit stands for, rebuilt from the JSON. */
static char *instruction(JsonObject *e)
{
    const char *type = json_object_get_string_member(e, "type");
    const char *obj = json_object_get_string_member(e, "object");
    if (g_strcmp0(type, "background") == 0)
        return g_strdup_printf("Change the background to %s",
                               json_object_get_string_member(e, "after"));
    const char *loc = json_object_get_string_member(e, "location");
    JsonObject *col = json_object_get_object_member(e, "colours");
    const char *cb = json_object_get_null_member(col, "before")
                         ? NULL
                         : json_object_get_string_member(col, "before");
    const char *ca = json_object_get_null_member(col, "after")
                         ? NULL
                         : json_object_get_string_member(col, "after");
    if (g_strcmp0(type, "add") == 0)
        return g_strdup_printf("Add a %s %s in the %s area", ca, obj, loc);
    if (g_strcmp0(type, "remove") == 0)
        return g_strdup_printf("Remove the %s %s positioned in the %s area", cb, obj, loc);
    if (g_strcmp0(type, "colour") == 0)
        return g_strdup_printf("Turn the %s %s positioned in the %s area into %s", cb, obj, loc,
                               ca);
    g_assert_cmpstr(type, ==, "replace");
    return g_strdup_printf("Replace the %s %s positioned in the %s area with a %s %s", cb, obj, loc,
                           ca, json_object_get_string_member(e, "new_object"));
}

static void test_edits(void)
{
    static const char *const types[5] = { "add", "remove", "replace", "colour", "background" };
    int seen[5] = { 0 };
    ClSynthOptions clean;
    cl_synth_options_init(&clean);
    clean.nuisance = FALSE;
    for (guint64 seed = 0; seed < N_SEEDS; seed++) {
        g_autoptr(ClSynthSample) s = cl_fixture_synth("edits", seed, &clean);
        check_conversation(s,
                           "You are given a pair of images. Describe the edit made between them.",
                           "What was edited between the two images?");
        g_assert_cmpuint(s->changes->len, ==, 1);
        const ClSynthChange *c = &g_array_index(s->changes, ClSynthChange, 0);
        g_autoptr(JsonNode) json = cl_synth_edits_answer_json(s);
        JsonObject *e = json_node_get_object(json);
        const char *type = json_object_get_string_member(e, "type");
        int ti = -1;
        for (int t = 0; t < 5; t++)
            if (g_strcmp0(type, types[t]) == 0)
                ti = t;
        g_assert_cmpint(ti, >=, 0);
        seen[ti]++;
        /* the answer is the structured edit, in ImgEdit's words */
        g_autofree char *want = instruction(e);
        g_assert_cmpstr(s->answer, ==, want);
        g_assert_cmpstr(json_object_get_string_member(e, "text"), ==, s->answer);

        /* the structured edit agrees with the two scenes */
        const GArray *b = s->objects[0], *a = s->objects[1];
        const ClSynthObject *ob =
            c->before >= 0 ? &g_array_index(b, ClSynthObject, c->before) : NULL;
        const ClSynthObject *oa = c->after >= 0 ? &g_array_index(a, ClSynthObject, c->after) : NULL;
        int w = s->images[0].width, h = s->images[0].height;
        switch (ti) {
        case 0:
            g_assert_cmpuint(a->len, ==, b->len + 1);
            g_assert_null(ob);
            break;
        case 1:
            g_assert_cmpuint(a->len + 1, ==, b->len);
            g_assert_null(oa);
            break;
        default:
            g_assert_cmpuint(a->len, ==, b->len);
            g_assert_nonnull(ob);
            g_assert_nonnull(oa);
        }
        if (ti != 4) {
            const ClSynthObject *o = ob ? ob : oa;
            g_assert_cmpstr(json_object_get_string_member(e, "location"), ==,
                            edit_areas[cell_of(o->box, w, h)]);
            JsonObject *col = json_object_get_object_member(e, "colours");
            if (ob)
                g_assert_cmpstr(json_object_get_string_member(col, "before"), ==,
                                cl_synth_colour_name(ob->colour));
            if (oa)
                g_assert_cmpstr(json_object_get_string_member(col, "after"), ==,
                                cl_synth_colour_name(oa->colour));
            if (ti == 3) /* a recolouring keeps the object where and what it was */
                g_assert_true(ob->colour != oa->colour && ob->x == oa->x && ob->y == oa->y);
            if (ti == 2)
                g_assert_cmpstr(json_object_get_string_member(e, "object"), !=,
                                json_object_get_string_member(e, "new_object"));
        } else {
            g_assert_cmpint(c->before, ==, 0); /* the backdrop */
            g_assert_cmpstr(json_object_get_string_member(e, "before"), !=,
                            json_object_get_string_member(e, "after"));
        }
        /* everything else is untouched: the other objects are the same */
        for (guint i = 0, j = 0; i < b->len; i++, j++) {
            if ((int)i == c->before && ti == 1) {
                j--; /* removed */
                continue;
            }
            if ((int)i == c->before)
                continue;
            g_assert_cmpmem(&g_array_index(b, ClSynthObject, i), sizeof(ClSynthObject),
                            &g_array_index(a, ClSynthObject, j), sizeof(ClSynthObject));
        }
        if (ti == 0)
            g_assert_cmpint(c->after, ==, (int)b->len); /* appended */
        /* and pixel-identical outside the edited object (or backdrop); inside it differs */
        double boxes[2][4];
        int n = 0;
        if (ob)
            memcpy(boxes[n++], ob->box, sizeof boxes[0]);
        if (oa)
            memcpy(boxes[n++], oa->box, sizeof boxes[0]);
        double inside, outside;
        int n_out;
        diff_inside_outside(s, (const double(*)[4])boxes, n, &inside, &outside, &n_out);
        if (n_out != 0 || inside < 4.0)
            g_error("seed %" G_GUINT64_FORMAT " (%s): %d pixels changed outside, %.2f inside", seed,
                    type, n_out, inside);
        if (ti == 4) /* the surface under the backdrop is the same picture */
            g_assert_cmpfloat(ob->box[3], <, 0.7 * h);
    }
    for (int t = 0; t < 5; t++)
        g_assert_cmpint(seen[t], >, 0);
}

static void test_edits_nuisance(void)
{
    ClSynthOptions off;
    cl_synth_options_init(&off);
    off.nuisance = FALSE;
    for (guint64 seed = 0; seed < 8; seed++) {
        g_autoptr(ClSynthSample) on = cl_fixture_synth("edits", seed, NULL);
        g_autoptr(ClSynthSample) no = cl_fixture_synth("edits", seed, &off);
        g_assert_cmpstr(on->answer, ==, no->answer);
        for (int k = 0; k < 2; k++)
            g_assert_cmpmem(on->objects[k]->data, on->objects[k]->len * sizeof(ClSynthObject),
                            no->objects[k]->data, no->objects[k]->len * sizeof(ClSynthObject));
        /* lighting and softness change pixels all over */
        const ClSynthImage *x = &on->images[0], *y = &no->images[0];
        int differ = 0;
        for (gsize i = 0; i < n_bytes(x); i++)
            differ += x->pixels[i] != y->pixels[i];
        g_assert_cmpint(differ, >, (int)(n_bytes(x) / 2));
    }
}

/* aerial-series (the long-sequence task): the building is in every image from the one the
 * answer names on and in none before, a removal the same way, the changes say so, the answer's
 * image numbers are theirs, and --images bounds hold. */
static void test_aerial_series(void)
{
    const int counts[] = { 0, 3, 8, 32 };
    for (gsize c = 0; c < G_N_ELEMENTS(counts); c++)
        for (guint64 seed = 1; seed <= 12; seed++) {
            ClSynthOptions o;
            cl_synth_options_init(&o);
            o.n_images = counts[c];
            g_autoptr(GError) err = NULL;
            g_autoptr(ClSynthSample) s = cl_synth_generate("aerial-series", seed, &o, &err);
            g_assert_no_error(err);
            g_assert_cmpint(s->n_images, ==, counts[c] ? counts[c] : s->n_images);
            g_assert_cmpint(s->n_images, >=, 3);
            g_assert_cmpint(s->n_images, <=, counts[c] ? counts[c] : 16);
            g_assert_cmpuint(s->changes->len, >=, 1);
            const ClSynthChange *add = &g_array_index(s->changes, ClSynthChange, 0);
            g_assert_cmpint(add->type, ==, CL_SYNTH_CHANGE_ADD);
            g_assert_cmpint(add->image, >=, 1);
            for (int i = 1; i < s->n_images; i++) {
                int d = (int)s->objects[i]->len - (int)s->objects[i - 1]->len;
                int want =
                    (i == add->image) -
                    (s->changes->len > 1 && g_array_index(s->changes, ClSynthChange, 1).image == i);
                g_assert_cmpint(d, ==, want);
            }
            const ClChatConversation *conv = s->conversation;
            const ClChatTurn *turns = (const ClChatTurn *)conv->turns->data;
            const ClChatTurn *last = &turns[conv->turns->len - 1];
            g_autofree char *first = g_strdup_printf("first appears in image %d ;", add->image + 1);
            g_assert_nonnull(strstr(last->text, first));
            if (s->changes->len > 1) {
                const ClSynthChange *rm = &g_array_index(s->changes, ClSynthChange, 1);
                g_assert_cmpint(rm->type, ==, CL_SYNTH_CHANGE_REMOVE);
                g_assert_cmpint(rm->image, >, add->image);
                g_autofree char *when = g_strdup_printf("in image %d .", rm->image + 1);
                g_assert_nonnull(strstr(last->text, when));
            } else {
                g_assert_nonnull(strstr(last->text, "nothing has changed since"));
            }
            g_assert_cmpint(cl_chat_count_images(turns, conv->turns->len), ==, s->n_images);
        }
    ClSynthOptions o;
    cl_synth_options_init(&o);
    o.n_images = 33;
    g_autoptr(GError) err = NULL;
    g_assert_null(cl_synth_generate("aerial-series", 1, &o, &err));
    g_assert_nonnull(strstr(err->message, "3 to 32"));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/synth-aerial-edits/determinism", test_determinism);
    g_test_add_func("/synth-aerial-edits/aerial-answers", test_aerial_answers);
    g_test_add_func("/synth-aerial-edits/changed-only", test_changed_only);
    g_test_add_func("/synth-aerial-edits/aerial-nuisance", test_aerial_nuisance);
    g_test_add_func("/synth-aerial-edits/aerial-geotiff", test_aerial_geotiff);
    g_test_add_func("/synth-aerial-edits/aerial-series", test_aerial_series);
    g_test_add_func("/synth-aerial-edits/edits", test_edits);
    g_test_add_func("/synth-aerial-edits/edits-nuisance", test_edits_nuisance);
    return g_test_run();
}
