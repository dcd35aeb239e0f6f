/* test-synth-radiograph.c - the `radiograph` synthetic task: answers re-derived from the findings
 * of both films with a formatter of the test's own, categories against the paper's Table 18,
 * persistence and no-change rate, pixels against the finding boxes, a crude anatomy check, and
 * the DICOM files read back through the real loader. */
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "fixtures.h"
#include "image/image.h"
#include "synth/radiograph.h"
#include "synth/synth-private.h" /* the task's DICOM writer on its own */
#include "synth/synth.h"
#include "train/taskmetrics.h"

#define N_SEEDS 200

/* Appendix F, Table 18, copied from the paper */
static const char *const table18[] = {
    "atelectasis",
    "lung opacity",
    "edema",
    "pneumonia",
    "consolidation",
    "emphysema",
    "infection",
    "granuloma",
    "contusion",
    "pleural effusion",
    "pneumothorax",
    "pleural thickening",
    "blunting of the costophrenic angle",
    "cardiomegaly",
    "vascular congestion",
    "heart failure",
    "hilar congestion",
    "hernia",
    "pneumomediastinum",
    "tortuosity of the thoracic aorta",
    "tortuosity of the descending aorta",
    "calcification",
    "fracture",
    "scoliosis",
    "hematoma",
    "air collection",
    "gastric distention",
};

static gboolean in_table18(const char *name)
{
    for (gsize i = 0; i < G_N_ELEMENTS(table18); i++)
        if (g_strcmp0(table18[i], name) == 0)
            return TRUE;
    return FALSE;
}

static const char *finding(const ClSynthSample *s, int image, int index)
{
    return cl_synth_radiograph_finding(&g_array_index(s->objects[image], ClSynthObject, index));
}

static gboolean has_finding(const ClSynthSample *s, int image, const char *name)
{
    for (guint i = 0; i < s->objects[image]->len; i++)
        if (g_strcmp0(finding(s, image, (int)i), name) == 0)
            return TRUE;
    return FALSE;
}

static gint cmp_str(gconstpointer a, gconstpointer b)
{
    return g_strcmp0(*(const char *const *)a, *(const char *const *)b);
}

/* The test's own Medical-Diff-VQA formatter (appendix B.4's example sentence). */
static char *format_answer(GPtrArray *added, GPtrArray *missing)
{
    if (!added->len && !missing->len)
        return g_strdup("nothing has changed.");
    GString *g = g_string_new(NULL);
    for (int pass = 0; pass < 2; pass++) {
        GPtrArray *l = pass ? missing : added;
        if (!l->len)
            continue;
        if (g->len)
            g_string_append(g, " ");
        if (pass)
            g_string_append(g, l->len == 1 ? "the main image is missing the finding of "
                                           : "the main image is missing the findings of ");
        else
            g_string_append(g, l->len == 1 ? "the main image has an additional finding of "
                                           : "the main image has additional findings of ");
        if (l->len == 1)
            g_string_append(g, g_ptr_array_index(l, 0));
        else if (l->len == 2)
            g_string_append_printf(g, "%s and %s", (char *)g_ptr_array_index(l, 0),
                                   (char *)g_ptr_array_index(l, 1));
        else {
            g_auto(GStrv) head = g_new0(char *, l->len);
            for (guint i = 0; i + 1 < l->len; i++)
                head[i] = g_strdup(g_ptr_array_index(l, i));
            g_autofree char *joined = g_strjoinv(", ", head);
            g_string_append_printf(g, "%s, and %s", joined,
                                   (char *)g_ptr_array_index(l, l->len - 1));
        }
        g_string_append(g, " than the reference image.");
    }
    return g_string_free(g, FALSE);
}

static void test_determinism(void)
{
    for (guint64 seed = 0; seed < 6; seed++) {
        g_autoptr(ClSynthSample) a = cl_fixture_synth("radiograph", seed, NULL);
        g_autoptr(ClSynthSample) b = cl_fixture_synth("radiograph", seed, NULL);
        g_autoptr(ClSynthSample) c = cl_fixture_synth("radiograph", seed + 100, NULL);
        for (int k = 0; k < 2; k++) {
            gsize n = (gsize)a->images[k].width * a->images[k].height * 3;
            g_assert_cmpmem(a->images[k].pixels, n, b->images[k].pixels, n);
            g_assert_true(memcmp(a->images[k].pixels, c->images[k].pixels, n) != 0);
        }
        g_assert_cmpstr(a->answer, ==, b->answer);
        g_autoptr(JsonNode) ja = cl_synth_radiograph_answer_json(a);
        g_autoptr(JsonNode) jb = cl_synth_radiograph_answer_json(b);
        g_autofree char *ta = json_to_string(ja, FALSE), *tb = json_to_string(jb, FALSE);
        g_assert_cmpstr(ta, ==, tb);
    }
    /* only pairs: the reference and the main film */
    ClSynthOptions three;
    cl_synth_options_init(&three);
    three.n_images = 3;
    g_autoptr(GError) error = NULL;
    g_assert_null(cl_synth_generate("radiograph", 1, &three, &error));
    g_assert_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS);
}

static void test_conversation(void)
{
    g_autoptr(ClSynthSample) s = cl_fixture_synth("radiograph", 3, NULL);
    const ClChatTurn *t = cl_chat_conversation_turns(s->conversation);
    g_assert_cmpuint(cl_chat_conversation_len(s->conversation), ==, 5);
    g_assert_cmpint(t[0].role, ==, CL_CHAT_SYSTEM);
    g_assert_cmpstr(t[0].text, ==,
                    "You are a medical imaging expert. Given a reference chest X-ray and a "
                    "current chest X-ray from the same patient, describe what findings have "
                    "changed.");
    g_assert_cmpstr(t[1].text, ==, "<image>\nThis is the reference (prior) chest X-ray.");
    g_assert_cmpstr(t[2].text, ==, "Understood. Please provide the current chest X-ray.");
    g_assert_cmpstr(t[3].text, ==,
                    "<image>\nThis is the current chest X-ray.\n"
                    "What has changed compared to the reference image?");
    g_assert_cmpint(t[4].role, ==, CL_CHAT_ASSISTANT);
    g_assert_cmpstr(t[4].text, ==, s->answer);
}

static void test_answers(void)
{
    int no_change = 0, both = 0, persisted = 0, multi = 0;
    const char *const *cats = cl_synth_radiograph_categories();
    int n_cats = (int)g_strv_length((char **)cats);
    g_autofree int *seen = g_new0(int, n_cats);
    for (int i = 0; i < n_cats; i++)
        g_assert_true(in_table18(cats[i])); /* every category the task uses */
    g_assert_cmpint(n_cats, >=, 10);

    ClSynthOptions opts = cl_fixture_synth_clean_options();
    for (guint64 seed = 0; seed < N_SEEDS; seed++) {
        g_autoptr(ClSynthSample) s = cl_fixture_synth("radiograph", seed, seed % 2 ? &opts : NULL);
        g_assert_cmpint(s->n_images, ==, 2);
        /* every object is a Table 18 finding, named once per film */
        for (int k = 0; k < 2; k++)
            for (guint i = 0; i < s->objects[k]->len; i++) {
                const char *f = finding(s, k, (int)i);
                g_assert_true(in_table18(f));
                for (int c = 0; c < n_cats; c++)
                    seen[c] += g_strcmp0(cats[c], f) == 0;
                for (guint j = 0; j < i; j++)
                    g_assert_cmpstr(finding(s, k, (int)j), !=, f);
                g_autofree char *loc = cl_synth_radiograph_location(s, k, (int)i);
                g_assert_nonnull(loc);
            }

        /* the changes the films imply: set differences of their finding names */
        g_autoptr(GPtrArray) want_added = g_ptr_array_new(), want_missing = g_ptr_array_new();
        for (guint i = 0; i < s->objects[1]->len; i++)
            if (!has_finding(s, 0, finding(s, 1, (int)i)))
                g_ptr_array_add(want_added, (gpointer)finding(s, 1, (int)i));
        for (guint i = 0; i < s->objects[0]->len; i++) {
            if (!has_finding(s, 1, finding(s, 0, (int)i)))
                g_ptr_array_add(want_missing, (gpointer)finding(s, 0, (int)i));
            else
                persisted++;
        }
        g_ptr_array_sort(want_added, cmp_str);
        g_ptr_array_sort(want_missing, cmp_str);

        /* the structured answer: the same lists, in the answer's (alphabetical) order */
        g_autoptr(GPtrArray) added = g_ptr_array_new(), missing = g_ptr_array_new();
        for (guint i = 0; i < s->changes->len; i++) {
            const ClSynthChange *c = &g_array_index(s->changes, ClSynthChange, i);
            g_assert_cmpint(c->image, ==, 1);
            if (c->type == CL_SYNTH_CHANGE_ADD) {
                g_assert_cmpint(c->before, ==, -1);
                g_assert_cmpuint(missing->len, ==, 0); /* additions first */
                g_ptr_array_add(added, (gpointer)finding(s, 1, c->after));
            } else {
                g_assert_cmpint(c->type, ==, CL_SYNTH_CHANGE_REMOVE);
                g_assert_cmpint(c->after, ==, -1);
                g_ptr_array_add(missing, (gpointer)finding(s, 0, c->before));
            }
        }
        g_assert_cmpuint(added->len, ==, want_added->len);
        g_assert_cmpuint(missing->len, ==, want_missing->len);
        for (guint i = 0; i < added->len; i++)
            g_assert_cmpstr(g_ptr_array_index(added, i), ==, g_ptr_array_index(want_added, i));
        for (guint i = 0; i < missing->len; i++)
            g_assert_cmpstr(g_ptr_array_index(missing, i), ==, g_ptr_array_index(want_missing, i));

        /* the text, re-derived */
        g_autofree char *text = format_answer(want_added, want_missing);
        g_assert_cmpstr(s->answer, ==, text);
        no_change += !added->len && !missing->len;
        both += added->len && missing->len;
        multi += added->len > 1 || missing->len > 1;

        /* findings on both films are never mentioned */
        for (guint i = 0; i < s->objects[0]->len; i++)
            if (has_finding(s, 1, finding(s, 0, (int)i)))
                g_assert_null(strstr(s->answer, finding(s, 0, (int)i)));

        /* the paper's parser (appendix F, core/train) reads the same labels */
        ClFindingLabels labels;
        cl_findings_parse(s->answer, &labels);
        const char *const *all = cl_findings();
        for (int f = 0; f < CL_N_FINDINGS; f++) {
            gboolean a = FALSE, m = FALSE;
            for (guint i = 0; i < added->len; i++)
                a |= g_strcmp0(all[f], g_ptr_array_index(added, i)) == 0;
            for (guint i = 0; i < missing->len; i++)
                m |= g_strcmp0(all[f], g_ptr_array_index(missing, i)) == 0;
            g_assert_cmpint(labels.added[f], ==, a);
            g_assert_cmpint(labels.missing[f], ==, m);
        }

        /* the structured JSON carries the lists */
        g_autoptr(JsonNode) json = cl_synth_radiograph_answer_json(s);
        JsonObject *o = json_node_get_object(json);
        JsonArray *ja = json_object_get_array_member(o, "added");
        JsonArray *jm = json_object_get_array_member(o, "missing");
        g_assert_cmpuint(json_array_get_length(ja), ==, added->len);
        g_assert_cmpuint(json_array_get_length(jm), ==, missing->len);
        for (guint i = 0; i < added->len; i++)
            g_assert_cmpstr(json_array_get_string_element(ja, i), ==, g_ptr_array_index(added, i));
        for (guint i = 0; i < missing->len; i++)
            g_assert_cmpstr(json_array_get_string_element(jm, i), ==,
                            g_ptr_array_index(missing, i));
        g_assert_cmpstr(json_object_get_string_member(o, "text"), ==, s->answer);
        g_assert_cmpuint(json_array_get_length(json_object_get_array_member(o, "reference")), ==,
                         s->objects[0]->len);
    }
    /* stable pairs about as often as in the paper's test set (14 %), never the rule */
    g_assert_cmpint(no_change, >=, N_SEEDS * 5 / 100);
    g_assert_cmpint(no_change, <=, N_SEEDS * 30 / 100);
    g_assert_cmpint(both, >, 0);
    g_assert_cmpint(multi, >, 0);
    g_assert_cmpint(persisted, >, 0);
    for (int c = 0; c < n_cats; c++)
        if (!seen[c])
            g_error("category \"%s\" never drawn in %d samples", cats[c], N_SEEDS);
}

/* ---- pixels ----------------------------------------------------------------------------------- */

static double grey_at(const ClSynthImage *img, double fx, double fy, int r)
{
    int cx = (int)(fx * img->width), cy = (int)(fy * img->height);
    double sum = 0;
    int n = 0;
    for (int y = cy - r; y <= cy + r; y++)
        for (int x = cx - r; x <= cx + r; x++) {
            const guint8 *p = img->pixels + ((gsize)y * img->width + x) * 3;
            sum += (p[0] + p[1] + p[2]) / 3.0;
            n++;
        }
    return sum / n;
}

static gboolean pixel_in_box(int x, int y, const double b[4])
{
    return b[0] < x + 1 && b[2] > x && b[1] < y + 1 && b[3] > y;
}

static void test_pixels(void)
{
    ClSynthOptions opts = cl_fixture_synth_clean_options();
    int checked_changes = 0;
    for (guint64 seed = 0; seed < 40; seed++) {
        g_autoptr(ClSynthSample) s = cl_fixture_synth("radiograph", seed, &opts);
        const ClSynthImage *a = &s->images[0], *b = &s->images[1];
        int w = a->width, h = a->height;
        gsize cells = (gsize)s->grid_w * s->grid_h;
        /* without nuisances the films differ only inside the changed findings' boxes, and
         * inside each of those boxes they do differ */
        g_autofree int *inside = g_new0(int, s->changes->len + 1);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                gsize o = ((gsize)y * w + x) * 3;
                if (memcmp(a->pixels + o, b->pixels + o, 3) == 0)
                    continue;
                gboolean hit = FALSE;
                for (guint i = 0; i < s->changes->len; i++) {
                    const ClSynthChange *c = &g_array_index(s->changes, ClSynthChange, i);
                    const ClSynthObject *ob =
                        &g_array_index(s->objects[c->before >= 0 ? 0 : 1], ClSynthObject,
                                       c->before >= 0 ? c->before : c->after);
                    if (pixel_in_box(x, y, ob->box)) {
                        hit = TRUE;
                        inside[i]++;
                    }
                }
                if (!hit)
                    g_error("seed %" G_GUINT64_FORMAT ": pixel (%d, %d) changed outside every "
                            "changed finding",
                            seed, x, y);
            }
        for (guint i = 0; i < s->changes->len; i++) {
            const ClSynthChange *c = &g_array_index(s->changes, ClSynthChange, i);
            const ClSynthObject *ob =
                &g_array_index(s->objects[c->before >= 0 ? 0 : 1], ClSynthObject,
                               c->before >= 0 ? c->before : c->after);
            if (inside[i] < 3)
                g_error("seed %" G_GUINT64_FORMAT ": the %s change is invisible (%d pixels)", seed,
                        cl_synth_radiograph_finding(ob), inside[i]);
            checked_changes++;
            /* the aux change mask covers its box */
            for (int gy = 0; gy < s->grid_h; gy++)
                for (int gx = 0; gx < s->grid_w; gx++) {
                    double px0 = gx * s->patch, py0 = gy * s->patch;
                    if (ob->box[2] > px0 && ob->box[0] < px0 + s->patch && ob->box[3] > py0 &&
                        ob->box[1] < py0 + s->patch)
                        g_assert_cmpint(s->changed[cells + gy * s->grid_w + gx], ==, 1);
                }
        }
        if (s->changes->len == 0) {
            g_assert_cmpmem(a->pixels, (gsize)w * h * 3, b->pixels, (gsize)w * h * 3);
            for (gsize i = 0; i < cells; i++)
                g_assert_cmpint(s->changed[cells + i], ==, 0);
        }

        /* crude anatomy: lungs darker than the mediastinum, the heart and the abdomen */
        for (int k = 0; k < 2; k++) {
            const ClSynthImage *img = &s->images[k];
            double lungs = MAX(grey_at(img, 0.28, 0.32, 2), grey_at(img, 0.72, 0.32, 2));
            double media = grey_at(img, 0.5 + 0.05, 0.22, 1);
            double heart = grey_at(img, 0.56, 0.55, 2), belly = grey_at(img, 0.3, 0.9, 2);
            if (!(lungs + 40 < media && lungs + 40 < heart && lungs + 40 < belly))
                g_error("seed %" G_GUINT64_FORMAT " film %d: lungs %.0f, mediastinum %.0f, "
                        "heart %.0f, abdomen %.0f",
                        seed, k, lungs, media, heart, belly);
            /* air outside the body, above the shoulders */
            g_assert_cmpfloat(grey_at(img, 0.04, 0.02, 1), <, lungs);
        }
    }
    g_assert_cmpint(checked_changes, >, 20);
}

/* With nuisances, even a stable pair's films differ (exposure, positioning, noise) but show the
 * same chest. */
static void test_nuisance(void)
{
    int stable = 0;
    for (guint64 seed = 0; seed < 60 && stable < 3; seed++) {
        g_autoptr(ClSynthSample) s = cl_fixture_synth("radiograph", seed, NULL);
        if (s->changes->len)
            continue;
        stable++;
        const ClSynthImage *a = &s->images[0], *b = &s->images[1];
        gsize n = (gsize)a->width * a->height * 3;
        double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
        int differ = 0;
        for (gsize i = 0; i < n; i++) {
            double x = a->pixels[i], y = b->pixels[i];
            differ += a->pixels[i] != b->pixels[i];
            sa += x, sb += y, saa += x * x, sbb += y * y, sab += x * y;
        }
        double corr = (sab / n - sa / n * sb / n) /
                      sqrt((saa / n - sa * sa / n / n) * (sbb / n - sb * sb / n / n));
        g_assert_cmpint(differ, >, (int)(n / 2));
        g_assert_cmpfloat(corr, >, 0.85);
        g_assert_cmpfloat(corr, <, 0.9999);
    }
    g_assert_cmpint(stable, >, 0);
}

/* ---- DICOM ------------------------------------------------------------------------------------ */

static void check_dicom(const char *path, const ClSynthSample *s, int k, ClImage **out)
{
    g_autoptr(GError) error = NULL;
    ClImage *img = cl_image_load(path, NULL, &error);
    g_assert_no_error(error);
    g_assert_cmpint(img->format, ==, CL_IMAGE_FORMAT_DICOM);
    g_assert_cmpstr(img->modality, ==, "DX");
    g_assert_cmpstr(img->photometric, ==, "MONOCHROME2");
    g_assert_cmpuint(img->bits, ==, 12);
    g_assert_cmpuint(img->bits_allocated, ==, 16);
    g_assert_cmpuint(img->channels, ==, 1);
    const ClSynthImage *si = &s->images[k];
    g_assert_cmpuint(img->width, ==, (guint)si->width);
    g_assert_cmpuint(img->height, ==, (guint)si->height);
    const ClFrame *f = cl_image_frame(img, 0);
    g_assert_cmpfloat(f->rescale_slope, ==, 1.0);
    g_assert_cmpfloat(f->rescale_intercept, ==, 0.0);
    double lo = 1e9, hi = -1;
    for (int p = 0; p < si->width * si->height; p++) {
        const guint8 *q = si->pixels + (gsize)p * 3;
        int v = (q[0] + q[1] + q[2] + 1) / 3;
        double want = lround(v * 4095.0 / 255.0); /* 8 to 12 bits, full scale */
        if (f->data[p] != want)
            g_error("%s: pixel %d is %g, not %g", path, p, f->data[p], want);
        lo = MIN(lo, f->data[p]), hi = MAX(hi, f->data[p]);
    }
    g_assert_cmpfloat(hi - lo, >, 2000); /* a film, not a flat field */
    /* its window spans what it holds */
    g_assert_cmpuint(img->windows->len, >=, 1);
    const ClWindowPreset *wp = &g_array_index(img->windows, ClWindowPreset, 0);
    g_assert_cmpfloat(fabs(wp->center - (lo + hi) / 2), <=, 1);
    g_assert_cmpfloat(fabs(wp->width - (hi - lo + 1)), <=, 1);
    g_assert_true(img->has_pixel_spacing);
    g_assert_cmpfloat(fabs(img->pixel_spacing[0] - 0.7 * 512 / si->height), <, 1e-4);
    g_assert_true(g_str_has_prefix(img->study_uid, "2.25."));
    g_assert_true(g_str_has_prefix(img->sop_instance_uid, "2.25."));
    g_assert_cmpuint(strlen(img->sop_instance_uid), <=, 64);
    g_assert_nonnull(img->acquisition_datetime);
    g_assert_nonnull(img->patient_id);
    g_assert_cmpstr(cl_image_get_meta(img, "ViewPosition"), ==, "PA");
    g_assert_cmpstr(cl_image_get_meta(img, "BodyPartExamined"), ==, "CHEST");
    *out = img;
}

static void test_dicom(void)
{
    g_autofree char *tmp = cl_fixture_tmpdir("cl-test-synth-radiograph");
    g_autofree char *dir = g_build_filename(tmp, "set", NULL);
    const int n = 4;
    const guint64 seed = 77;
    g_autoptr(GError) error = NULL;
    g_assert_true(
        cl_synth_write_dataset(dir, "radiograph", seed, n, NULL, FALSE, NULL, NULL, &error));
    g_assert_no_error(error);
    g_autofree char *jsonl = g_build_filename(dir, "data.jsonl", NULL), *text = NULL;
    g_assert_true(g_file_get_contents(jsonl, &text, NULL, NULL));
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_assert_cmpuint(g_strv_length(lines), ==, (guint)n + 1);
    g_autofree char *first_patient = NULL;
    for (int i = 0; i < n; i++) {
        g_autoptr(JsonParser) parser = json_parser_new();
        g_assert_true(json_parser_load_from_data(parser, lines[i], -1, &error));
        JsonObject *o = json_node_get_object(json_parser_get_root(parser));
        JsonArray *imgs = json_object_get_array_member(o, "images");
        g_assert_cmpuint(json_array_get_length(imgs), ==, 2);
        g_autoptr(ClSynthSample) s =
            cl_fixture_synth("radiograph", cl_synth_stream_seed(seed, i), NULL);
        ClImage *films[2] = { NULL, NULL };
        for (int k = 0; k < 2; k++) {
            const char *rel = json_array_get_string_element(imgs, k);
            g_assert_true(g_str_has_suffix(rel, ".dcm"));
            g_autofree char *path = g_build_filename(dir, rel, NULL);
            g_autofree char *part = g_strconcat(path, ".tmp", NULL);
            g_assert_false(g_file_test(part, G_FILE_TEST_EXISTS));
            check_dicom(path, s, k, &films[k]);
        }
        /* one patient, two studies, the reference first */
        g_assert_cmpstr(films[0]->patient_id, ==, films[1]->patient_id);
        g_assert_cmpstr(films[0]->patient_name, ==, films[1]->patient_name);
        g_assert_cmpstr(films[0]->study_uid, !=, films[1]->study_uid);
        g_assert_cmpstr(films[0]->sop_instance_uid, !=, films[1]->sop_instance_uid);
        g_assert_cmpuint(strlen(films[0]->acquisition_datetime), ==,
                         strlen(films[1]->acquisition_datetime));
        g_assert_cmpint(strcmp(films[0]->acquisition_datetime, films[1]->acquisition_datetime), <,
                        0);
        g_assert_cmpint(strcmp(films[0]->study_datetime, films[1]->study_datetime), <, 0);
        if (i == 0)
            first_patient = g_strdup(films[0]->patient_id);
        else
            g_assert_cmpstr(films[0]->patient_id, !=, first_patient); /* another patient */
        cl_image_free(films[0]);
        cl_image_free(films[1]);
    }

    /* the writer on its own: the same bytes twice; a clear error where it cannot write */
    g_autoptr(ClSynthSample) s = cl_fixture_synth("radiograph", 5, NULL);
    g_autofree char *p1 = g_build_filename(tmp, "a.dcm", NULL);
    g_autofree char *p2 = g_build_filename(tmp, "b.dcm", NULL);
    ClSynthOptions opts;
    cl_synth_options_init(&opts);
    opts.width = 200, opts.height = 120; /* not square: rows and columns kept apart */
    g_autoptr(ClSynthSample) wide = cl_fixture_synth("radiograph", 6, &opts);
    g_autofree char *pw = g_build_filename(tmp, "wide.dcm", NULL);
    g_assert_true(cl_synth_radiograph_write(wide, 1, pw, &error));
    g_assert_no_error(error);
    ClImage *wimg = NULL;
    check_dicom(pw, wide, 1, &wimg);
    cl_image_free(wimg);
    g_assert_true(cl_synth_radiograph_write(s, 0, p1, &error));
    g_assert_true(cl_synth_radiograph_write(s, 0, p2, &error));
    g_autofree char *b1 = NULL, *b2 = NULL;
    gsize l1, l2;
    g_assert_true(g_file_get_contents(p1, &b1, &l1, NULL));
    g_assert_true(g_file_get_contents(p2, &b2, &l2, NULL));
    g_assert_cmpmem(b1, l1, b2, l2);
    g_autofree char *bad = g_build_filename(tmp, "no-such-dir", "x.dcm", NULL);
    g_assert_false(cl_synth_radiograph_write(s, 0, bad, &error));
    g_assert_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_IO);
    g_assert_nonnull(strstr(error->message, "no-such-dir"));
    g_clear_error(&error);
    g_assert_false(cl_synth_radiograph_write(s, 2, p1, &error));
    g_assert_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS);
    cl_fixture_rmdir(tmp);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/synth-radiograph/determinism", test_determinism);
    g_test_add_func("/synth-radiograph/conversation", test_conversation);
    g_test_add_func("/synth-radiograph/answers", test_answers);
    g_test_add_func("/synth-radiograph/pixels", test_pixels);
    g_test_add_func("/synth-radiograph/nuisance", test_nuisance);
    g_test_add_func("/synth-radiograph/dicom", test_dicom);
    return g_test_run();
}
