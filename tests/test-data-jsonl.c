/* test-data-jsonl.c - the ShareGPT JSONL dataset (core/train/data.h): JSONL files and PNG/TIFF
 * images written here, read with a tiny random model: the index and counts, ids equal to the chat
 * template's with every <image> expanded, the loss masks (final answer; every assistant turn),
 * pixels equal to inference's preprocessing, every malformed-line case named by line, skip mode,
 * length limits, relative paths, "#frame", the image cache, synthetic samples, the shuffles. */
#include <cairo.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/stat.h>

#include "train/jsonl.h"
#include "model/decoder.h"
#include "fixtures.h"
#include "model/preprocess.h"

static char *tmpdir;
static ClModel *model;

/* ---- helpers -------------------------------------------------------------------------------- */

/* A w × h RGB PNG whose colours depend on seed (so two images differ). */
static char *write_png(const char *name, int w, int h, int seed)
{
    char *path = g_build_filename(tmpdir, name, NULL);
    g_autofree char *dir = g_path_get_dirname(path);
    g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
    cairo_surface_t *sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    cairo_t *cr = cairo_create(sf);
    cairo_set_source_rgb(cr, 0.1 * seed, 0.5, 1.0 - 0.1 * seed);
    cairo_paint(cr);
    cairo_set_source_rgb(cr, 1, 0.2 * seed, 0);
    cairo_rectangle(cr, 3 * seed, 2 * seed, w / 3.0, h / 4.0);
    cairo_fill(cr);
    cairo_destroy(cr);
    g_assert_cmpint(cairo_surface_write_to_png(sf, path), ==, CAIRO_STATUS_SUCCESS);
    cairo_surface_destroy(sf);
    return path;
}

static char *write_text(const char *name, const char *text)
{
    char *path = g_build_filename(tmpdir, name, NULL);
    g_autofree char *dir = g_path_get_dirname(path);
    g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
    g_autoptr(GError) error = NULL;
    g_assert_true(g_file_set_contents(path, text, -1, &error));
    return path;
}

static const char *const role_names[] = { "system", "user", "assistant" };

/* One JSONL line (no newline) for a conversation and its image entries. */
static char *jline(const ClChatTurn *turns, gsize n, const char *const *images, guint n_images,
                   const char *id)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    if (id) {
        json_builder_set_member_name(b, "id");
        json_builder_add_string_value(b, id);
    }
    json_builder_set_member_name(b, "messages");
    json_builder_begin_array(b);
    for (gsize i = 0; i < n; i++) {
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "role");
        json_builder_add_string_value(b, role_names[turns[i].role]);
        json_builder_set_member_name(b, "content");
        json_builder_add_string_value(b, turns[i].text);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "images");
    json_builder_begin_array(b);
    for (guint k = 0; k < n_images; k++)
        json_builder_add_string_value(b, images[k]);
    json_builder_end_array(b);
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return json_to_string(root, FALSE);
}

/* The paper's two-image conversation (appendix B): a filler answer, then the final answer. */
static const char *const FILLER = "I see the image. Please show me the next image.";
static const char *const ANSWER = "A red square moved to the left.";
static const ClChatTurn pair_turns[] = {
    { CL_CHAT_SYSTEM, "You compare images." },
    { CL_CHAT_USER, "<image>\nHere is the first image." },
    { CL_CHAT_ASSISTANT, "I see the image. Please show me the next image." },
    { CL_CHAT_USER, "<image>\nHere is the second image. What changed?" },
    { CL_CHAT_ASSISTANT, "A red square moved to the left." },
};
static const ClChatTurn one_turns[] = {
    { CL_CHAT_USER, "<image>\nDescribe the image." },
    { CL_CHAT_ASSISTANT, "A blue field with an orange block." },
};

static char *pair_line(const char *img1, const char *img2, const char *id)
{
    const char *imgs[] = { img1, img2 };
    return jline(pair_turns, G_N_ELEMENTS(pair_turns), imgs, 2, id);
}

/* The expected decoder ids: cl_chat_encode's, every <image> expanded into M visual positions. */
static GArray *expected_ids(const ClChatTurn *turns, gsize n)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GArray) chat = cl_chat_encode(model->tokenizer, turns, n, FALSE, NULL, &error);
    g_assert_no_error(error);
    GArray *out = g_array_new(FALSE, FALSE, sizeof(gint32));
    const gint32 visual = CL_DECODER_VISUAL;
    int M = cl_config_n_visual(&model->config);
    for (guint i = 0; i < chat->len; i++) {
        gint32 id = g_array_index(chat, gint32, i);
        if (id == CL_TOKEN_IMAGE)
            for (int m = 0; m < M; m++)
                g_array_append_val(out, visual);
        else
            g_array_append_val(out, id);
    }
    return out;
}

/* The supervised targets decoded: ids[t + 1] for every t with mask[t]. Also checks the mask's
 * invariants (never a visual target, last position 0, n_supervised its sum). */
static char *masked_text(const ClTrainSample *s)
{
    GString *out = g_string_new(NULL);
    int count = 0;
    g_assert_cmpint(s->mask[s->n_ids - 1], ==, 0);
    for (int t = 0; t + 1 < s->n_ids; t++) {
        g_assert_cmpint(s->mask[t], <=, 1);
        if (!s->mask[t])
            continue;
        count++;
        g_assert_cmpint(s->ids[t + 1], !=, CL_DECODER_VISUAL);
        cl_tokenizer_decode(model->tokenizer, &s->ids[t + 1], 1, out);
    }
    g_assert_cmpint(count, ==, s->n_supervised);
    return g_string_free(out, FALSE);
}

static int count_visual(const ClTrainSample *s)
{
    int n = 0;
    for (int i = 0; i < s->n_ids; i++)
        n += s->ids[i] == CL_DECODER_VISUAL;
    return n;
}

/* The model input inference makes from a file's frame. */
static float *preprocessed(const char *path, guint frame)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(ClImage) img = cl_image_load(path, NULL, &error);
    g_assert_no_error(error);
    const ClModelConfig *c = &model->config;
    float *px = g_new(float, (gsize)c->channels * c->image_size * c->image_size);
    g_assert_true(
        cl_preprocess_image(img, frame, NULL, c->image_size, c->channels, px, NULL, &error));
    g_assert_no_error(error);
    return px;
}

static gsize per_image(const ClTrainSample *s)
{
    return (gsize)s->channels * s->size * s->size;
}

static ClDataset *open_ok(const char *path, const ClDatasetOptions *o)
{
    g_autoptr(GError) error = NULL;
    ClDataset *d = cl_dataset_open(path, model, o, &error);
    g_assert_no_error(error);
    g_assert_nonnull(d);
    return d;
}

static ClTrainSample *get_ok(ClDataset *d, guint i)
{
    g_autoptr(GError) error = NULL;
    ClTrainSample *s = cl_dataset_get(d, i, &error);
    g_assert_no_error(error);
    g_assert_nonnull(s);
    return s;
}

/* ---- a well-formed file ------------------------------------------------------------------- */

static char *basic_jsonl; /* 3 samples: pair (a, b), one image (c), pair (b, a); a blank line */

static void make_basic(void)
{
    g_autofree char *a = write_png("basic/a.png", 64, 48, 1);
    g_autofree char *b = write_png("basic/b.png", 40, 70, 2);
    g_autofree char *c = write_png("basic/c.png", 33, 33, 3);
    g_autofree char *l1 = pair_line("a.png", "b.png", "first");
    const char *ci[] = { "c.png" };
    g_autofree char *l2 = jline(one_turns, G_N_ELEMENTS(one_turns), ci, 1, NULL);
    g_autofree char *l3 = pair_line("b.png", "a.png", NULL);
    /* CRLF on one line and a blank line: both tolerated */
    g_autofree char *text = g_strdup_printf("%s\n%s\r\n\n%s\n", l1, l2, l3);
    basic_jsonl = write_text("basic/data.jsonl", text);
}

static void test_count_and_ids(void)
{
    g_autoptr(ClDataset) d = open_ok(basic_jsonl, NULL);
    g_assert_cmpuint(cl_dataset_count(d), ==, 3);
    const ClDatasetSummary *sum = cl_dataset_summary(d);
    g_assert_cmpuint(sum->n_lines, ==, 4);
    g_assert_cmpuint(sum->n_blank, ==, 1);
    g_assert_cmpuint(sum->n_bad, ==, 0);
    g_assert_cmpuint(sum->n_images, ==, 5);
    g_assert_cmpuint(cl_dataset_line(d, 0), ==, 1);
    g_assert_cmpuint(cl_dataset_line(d, 1), ==, 2);
    g_assert_cmpuint(cl_dataset_line(d, 2), ==, 4);
    g_autofree char *st = cl_dataset_summary_text(d);
    g_assert_nonnull(strstr(st, "3 samples from 4 lines"));

    const int M = cl_config_n_visual(&model->config);
    /* read out of order: the index, not a sequential reader */
    const guint order[] = { 2, 0, 1 };
    for (guint k = 0; k < G_N_ELEMENTS(order); k++) {
        guint i = order[k];
        g_autoptr(ClTrainSample) s = get_ok(d, i);
        const ClChatTurn *turns = i == 1 ? one_turns : pair_turns;
        gsize n = i == 1 ? G_N_ELEMENTS(one_turns) : G_N_ELEMENTS(pair_turns);
        guint n_images = i == 1 ? 1 : 2;
        g_autoptr(GArray) want = expected_ids(turns, n);
        g_assert_cmpint(s->n_ids, ==, (int)want->len);
        g_assert_cmpmem(s->ids, sizeof(gint32) * s->n_ids, want->data, sizeof(gint32) * want->len);
        g_assert_cmpint(s->n_visual_per_image, ==, M);
        g_assert_cmpint(count_visual(s), ==, (int)n_images * M);
        g_assert_cmpuint(s->n_images, ==, n_images);
        g_assert_cmpint(s->channels, ==, model->config.channels);
        g_assert_cmpint(s->size, ==, model->config.image_size);
        g_assert_null(s->aux_objects);
        g_assert_cmpstr(s->id, ==, i == 0 ? "first" : i == 1 ? "line 2" : "line 4");
    }
    g_autoptr(GError) error = NULL;
    g_assert_null(cl_dataset_get(d, 3, &error));
    g_assert_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_INDEX);
}

static void test_mask_final(void)
{
    g_autoptr(ClDataset) d = open_ok(basic_jsonl, NULL);
    g_autoptr(ClTrainSample) s = get_ok(d, 0);
    g_autofree char *text = masked_text(s);
    g_autofree char *want = g_strconcat(ANSWER, "<|im_end|>", NULL);
    g_assert_cmpstr(text, ==, want);
    g_autoptr(GArray) ans = cl_tokenizer_encode(model->tokenizer, ANSWER, -1, FALSE);
    g_assert_cmpint(s->n_supervised, ==, (int)ans->len + 1);
    /* the supervised block is contiguous and ends predicting the final <|im_end|> */
    int first = -1, last = -1;
    for (int t = 0; t < s->n_ids; t++)
        if (s->mask[t]) {
            if (first < 0)
                first = t;
            last = t;
        }
    g_assert_cmpint(last - first + 1, ==, s->n_supervised);
    g_assert_cmpint(s->ids[last + 1], ==, CL_TOKEN_IM_END);

    g_autoptr(ClTrainSample) s1 = get_ok(d, 1);
    g_autofree char *t1 = masked_text(s1);
    g_assert_cmpstr(t1, ==, "A blue field with an orange block.<|im_end|>");
}

static void test_mask_all_turns(void)
{
    ClDatasetOptions o;
    cl_dataset_options_init(&o);
    o.all_turns = TRUE;
    g_autoptr(ClDataset) d = open_ok(basic_jsonl, &o);
    g_autoptr(ClTrainSample) s = get_ok(d, 0);
    g_autofree char *text = masked_text(s);
    g_autofree char *want = g_strconcat(FILLER, "<|im_end|>", ANSWER, "<|im_end|>", NULL);
    g_assert_cmpstr(text, ==, want);
    /* the same ids as in the final-answer mode */
    g_autoptr(ClDataset) d0 = open_ok(basic_jsonl, NULL);
    g_autoptr(ClTrainSample) s0 = get_ok(d0, 0);
    g_assert_cmpint(s->n_ids, ==, s0->n_ids);
    g_assert_cmpmem(s->ids, sizeof(gint32) * s->n_ids, s0->ids, sizeof(gint32) * s0->n_ids);
    g_assert_cmpint(s->n_supervised, >, s0->n_supervised);
    g_assert_cmpuint(cl_dataset_summary(d)->n_supervised, >, cl_dataset_summary(d0)->n_supervised);
}

static void test_pixels(void)
{
    g_autoptr(ClDataset) d = open_ok(basic_jsonl, NULL);
    g_autoptr(ClTrainSample) s = get_ok(d, 2); /* images b, a */
    g_autofree char *a = g_build_filename(tmpdir, "basic", "a.png", NULL);
    g_autofree char *b = g_build_filename(tmpdir, "basic", "b.png", NULL);
    g_autofree float *pa = preprocessed(a, 0);
    g_autofree float *pb = preprocessed(b, 0);
    gsize n = per_image(s) * sizeof(float);
    g_assert_cmpmem(s->pixels, n, pb, n);
    g_assert_cmpmem(s->pixels + per_image(s), n, pa, n);
    g_assert_true(memcmp(pa, pb, n) != 0); /* the images differ, so the order is checked */
}

/* Relative paths start from the JSONL's folder, wherever the process runs; absolute ones and
 * "../" work too. */
static void test_relative_paths(void)
{
    g_autofree char *a = write_png("rel/a.png", 20, 30, 4);
    g_autofree char *b = write_png("rel/sub/deeper/b.png", 30, 20, 5);
    g_autofree char *l = pair_line("../a.png", "deeper/b.png", NULL);
    g_autofree char *l2 = pair_line(a, "deeper/b.png", NULL); /* absolute */
    g_autofree char *text = g_strdup_printf("%s\n%s\n", l, l2);
    g_autofree char *path = write_text("rel/sub/data.jsonl", text);

    g_autofree char *cwd = g_get_current_dir();
    g_assert_cmpint(g_chdir("/"), ==, 0);
    g_autoptr(ClDataset) d = open_ok(path, NULL);
    g_autoptr(ClTrainSample) s = get_ok(d, 0);
    g_autoptr(ClTrainSample) s2 = get_ok(d, 1);
    g_assert_cmpint(g_chdir(cwd), ==, 0);

    g_autofree float *pa = preprocessed(a, 0);
    g_autofree float *pb = preprocessed(b, 0);
    gsize n = per_image(s) * sizeof(float);
    g_assert_cmpmem(s->pixels, n, pa, n);
    g_assert_cmpmem(s->pixels + per_image(s), n, pb, n);
    g_assert_cmpmem(s2->pixels, n, pa, n);

    /* the same relative names resolved from the wrong folder are missing */
    g_autofree char *wrong = write_text("rel/elsewhere.jsonl", l);
    g_autoptr(GError) error = NULL;
    g_assert_null(cl_dataset_open(wrong, model, NULL, &error));
    g_assert_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_LINE);
    g_assert_nonnull(strstr(error->message, "not found"));
}

/* ---- malformed lines ----------------------------------------------------------------------- */

typedef struct {
    const char *line;
    const char *problem; /* in the message */
} BadCase;

static const BadCase bad_cases[] = {
    { "{\"messages\": [", "not valid JSON" },
    { "[1, 2, 3]", "not a JSON object" },
    { "{\"images\": []}", "no \"messages\"" },
    { "{\"messages\": {\"role\": \"user\"}}", "is not a list" },
    { "{\"messages\": []}", "is empty" },
    { "{\"messages\": [\"hello\"]}", "message 1 is not an object" },
    { "{\"messages\": [{\"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"x\"}]}",
      "message 1 has no \"role\"" },
    { "{\"messages\": [{\"role\": \"robot\", \"content\": \"hi\"}, {\"role\": \"assistant\", "
      "\"content\": \"x\"}]}",
      "unknown role \"robot\"" },
    { "{\"messages\": [{\"role\": 3, \"content\": \"hi\"}]}", "\"role\" is not a string" },
    { "{\"messages\": [{\"role\": \"user\", \"content\": 5}, {\"role\": \"assistant\", "
      "\"content\": \"x\"}]}",
      "message 1: \"content\" is not a string" },
    { "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", "
      "\"content\": [{\"type\": \"text\"}]}]}",
      "message 2: \"content\" is not a string" },
    { "{\"messages\": [{\"role\": \"user\"}, {\"role\": \"assistant\", \"content\": \"x\"}]}",
      "message 1 has no \"content\"" },
    { "{\"messages\": [{\"role\": \"user\", \"content\": \"<image><image>two\"}, {\"role\": "
      "\"assistant\", \"content\": \"x\"}], \"images\": [\"a.png\"]}",
      "2 <image> tags in the messages but 1 image listed" },
    { "{\"messages\": [{\"role\": \"user\", \"content\": \"none\"}, {\"role\": "
      "\"assistant\", \"content\": \"x\"}], \"images\": [\"a.png\"]}",
      "0 <image> tags in the messages but 1 image listed" },
    { "{\"messages\": [{\"role\": \"user\", \"content\": \"<image>x\"}, {\"role\": "
      "\"assistant\", \"content\": \"x\"}], \"images\": [\"nope.png\"]}",
      "image 1 \"nope.png\" not found" },
    { "{\"messages\": [{\"role\": \"user\", \"content\": \"<image>x\"}, {\"role\": "
      "\"assistant\", \"content\": \"x\"}], \"images\": \"a.png\"}",
      "\"images\" is not a list" },
    { "{\"messages\": [{\"role\": \"user\", \"content\": \"<image>x\"}, {\"role\": "
      "\"assistant\", \"content\": \"x\"}], \"images\": [7]}",
      "images[0] is not a file path" },
    { "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", "
      "\"content\": \"x\"}, {\"role\": \"user\", \"content\": \"more?\"}]}",
      "the last message is a user message" },
    { "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"system\", "
      "\"content\": \"s\"}, {\"role\": \"assistant\", \"content\": \"x\"}]}",
      "message 2 is a system message" },
};

static char *bad_dir_good_line(void)
{
    g_autofree char *a = write_png("bad/a.png", 16, 16, 1);
    const char *ci[] = { "a.png" };
    return jline(one_turns, G_N_ELEMENTS(one_turns), ci, 1, NULL);
}

static void test_bad_lines_strict(void)
{
    g_autofree char *good = bad_dir_good_line();
    for (gsize i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
        /* the bad line is line 3, after a good line and a blank one */
        g_autofree char *text = g_strdup_printf("%s\n\n%s\n%s\n", good, bad_cases[i].line, good);
        g_autofree char *path = write_text("bad/case.jsonl", text);
        g_autoptr(GError) error = NULL;
        g_autoptr(ClDataset) d = cl_dataset_open(path, model, NULL, &error);
        g_assert_null(d);
        g_assert_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_LINE);
        g_autofree char *where = g_strdup_printf("%s:3: ", path);
        if (!g_str_has_prefix(error->message, where) ||
            !strstr(error->message, bad_cases[i].problem))
            g_error("case %zu (%s): message \"%s\" lacks \"%s\" or \"%s\"", i, bad_cases[i].line,
                    error->message, where, bad_cases[i].problem);
    }
}

/* A line of 100,000 '[' is a bad line like any other, not a crash (json-glib's parser recurses
 * per level; the depth is checked first). */
static void test_deep_line(void)
{
    g_autofree char *good = bad_dir_good_line();
    g_autofree char *deep = g_strnfill(100000, '[');
    g_autofree char *text = g_strdup_printf("%s\n%s\n", good, deep);
    g_autofree char *path = write_text("bad/deep.jsonl", text);
    g_autoptr(GError) error = NULL;
    g_autoptr(ClDataset) d = cl_dataset_open(path, model, NULL, &error);
    g_assert_null(d);
    g_assert_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_LINE);
    g_autofree char *where = g_strdup_printf("%s:2: ", path);
    g_assert_true(g_str_has_prefix(error->message, where));
    g_assert_nonnull(strstr(error->message, "nested deeper than 256 levels"));
}

/* json-glib quotes the text near a parse error as it decoded it: a lone surrogate escape
 * ("\ud83d") comes out as bytes that are not UTF-8 (found by tests/fuzz/fuzz-jsonl.c). The
 * line's message is still UTF-8, strict and skipped alike. */
static void test_bad_line_utf8(void)
{
    g_autofree char *good = bad_dir_good_line();
    g_autofree char *text = g_strdup_printf(
        "%s\n{\"messages\": [{\"role\": \"user\", \"content\": \"hi \\ud83d\"}, {\"x\"}]}\n", good);
    g_autofree char *path = write_text("bad/surrogate.jsonl", text);
    g_autoptr(GError) error = NULL;
    g_assert_null(cl_dataset_open(path, model, NULL, &error));
    g_assert_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_LINE);
    g_autofree char *where = g_strdup_printf("%s:2: not valid JSON", path);
    g_assert_true(g_str_has_prefix(error->message, where));
    g_assert_true(g_utf8_validate(error->message, -1, NULL));
    ClDatasetOptions o;
    cl_dataset_options_init(&o);
    o.skip_bad_lines = TRUE;
    g_autoptr(ClDataset) d = open_ok(path, &o);
    const GPtrArray *probs = cl_dataset_problems(d);
    g_assert_cmpuint(probs->len, ==, 1);
    g_assert_true(g_str_has_prefix(g_ptr_array_index(probs, 0), where));
    g_assert_true(g_utf8_validate(g_ptr_array_index(probs, 0), -1, NULL));

    /* a valid line whose role is such a string: the message quotes it */
    g_autofree char *text2 = g_strdup_printf(
        "%s\n{\"messages\": [{\"role\": \"a\\ud83dx\", \"content\": \"x\"}]}\n", good);
    g_autofree char *path2 = write_text("bad/surrogate-role.jsonl", text2);
    g_clear_error(&error);
    g_assert_null(cl_dataset_open(path2, model, NULL, &error));
    g_assert_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_LINE);
    g_assert_nonnull(strstr(error->message, "unknown role"));
    g_assert_true(g_utf8_validate(error->message, -1, NULL));
}

/* A file without line breaks is refused at the line limit, not read whole into memory. */
static void test_endless_line(void)
{
    g_autofree char *good = bad_dir_good_line();
    gsize n = (gsize)17 << 20;
    char *text = g_malloc(strlen(good) + 1 + n + 1);
    char *p = g_stpcpy(text, good);
    *p++ = '\n';
    memset(p, 'x', n);
    p[n] = '\0';
    g_autofree char *path = write_text("bad/endless.jsonl", text);
    g_free(text);
    ClDatasetOptions o;
    cl_dataset_options_init(&o);
    o.skip_bad_lines = TRUE; /* even so: a line with no end cannot be skipped */
    g_autoptr(GError) error = NULL;
    g_autoptr(ClDataset) d = cl_dataset_open(path, model, &o, &error);
    g_assert_null(d);
    g_assert_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_LINE);
    g_autofree char *where = g_strdup_printf("%s:2: a line longer than 16 MiB", path);
    g_assert_true(g_str_has_prefix(error->message, where));
}

/* A pipe or a device is refused before anything is read: a FIFO without a writer would block
 * the open (and the command with it), /dev/zero would be read forever. */
static void test_not_regular(void)
{
    g_autofree char *fifo = g_build_filename(tmpdir, "bad", "fifo.jsonl", NULL);
    g_autofree char *dir = g_path_get_dirname(fifo);
    g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
    g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
    const char *paths[] = { fifo, "/dev/zero" };
    for (gsize i = 0; i < G_N_ELEMENTS(paths); i++) {
        if (!g_file_test(paths[i], G_FILE_TEST_EXISTS))
            continue;
        g_autoptr(GError) error = NULL;
        g_autoptr(ClDataset) d = cl_dataset_open(paths[i], model, NULL, &error);
        g_assert_null(d);
        g_assert_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_IO);
        g_assert_nonnull(strstr(error->message, "is not a regular file"));
    }
    g_unlink(fifo);
}

static void test_bad_lines_skip(void)
{
    g_autofree char *good = bad_dir_good_line();
    GString *text = g_string_new(NULL);
    g_string_append_printf(text, "%s\n", good);
    for (gsize i = 0; i < G_N_ELEMENTS(bad_cases); i++)
        g_string_append_printf(text, "%s\n", bad_cases[i].line);
    g_string_append_printf(text, "%s\n", good);
    g_autofree char *path = write_text("bad/skip.jsonl", text->str);
    g_string_free(text, TRUE);

    ClDatasetOptions o;
    cl_dataset_options_init(&o);
    o.skip_bad_lines = TRUE;
    g_autoptr(ClDataset) d = open_ok(path, &o);
    guint n_bad = G_N_ELEMENTS(bad_cases);
    g_assert_cmpuint(cl_dataset_count(d), ==, 2);
    g_assert_cmpuint(cl_dataset_summary(d)->n_bad, ==, n_bad);
    g_assert_cmpuint(cl_dataset_line(d, 1), ==, n_bad + 2);
    const GPtrArray *probs = cl_dataset_problems(d);
    g_assert_cmpuint(probs->len, ==, n_bad);
    for (guint i = 0; i < n_bad; i++) {
        g_autofree char *where = g_strdup_printf("%s:%u: ", path, i + 2);
        const char *msg = g_ptr_array_index(probs, i);
        g_assert_true(g_str_has_prefix(msg, where));
        g_assert_nonnull(strstr(msg, bad_cases[i].problem));
    }
    g_autofree char *st = cl_dataset_summary_text(d);
    g_autofree char *want = g_strdup_printf("%u bad lines skipped", n_bad);
    g_assert_nonnull(strstr(st, want));
    g_autoptr(ClTrainSample) s = get_ok(d, 1);
    g_autofree char *last_id = g_strdup_printf("line %u", n_bad + 2);
    g_assert_cmpstr(s->id, ==, last_id);

    /* nothing usable at all */
    g_autofree char *none = write_text("bad/none.jsonl", "\n{}\n  \n");
    g_autoptr(GError) error = NULL;
    g_assert_null(cl_dataset_open(none, model, &o, &error));
    g_assert_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_EMPTY);
    g_clear_error(&error);
    g_autofree char *missing = g_build_filename(tmpdir, "bad", "missing.jsonl", NULL);
    g_assert_null(cl_dataset_open(missing, model, NULL, &error));
    g_assert_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_IO);
    g_assert_nonnull(strstr(error->message, "missing.jsonl"));
}

/* A file that is there at the open but no image at all: the load fails with file:line. */
static void test_bad_image(void)
{
    g_autofree char *junk = write_text("badimg/junk.png", "this is not an image");
    g_autofree char *a = write_png("badimg/a.png", 16, 16, 1);
    g_autofree char *l = pair_line("a.png", "junk.png", NULL);
    g_autofree char *l2 = pair_line("a.png", "a.png#3", NULL); /* a PNG has one frame */
    g_autofree char *text = g_strdup_printf("%s\n%s\n", l, l2);
    g_autofree char *path = write_text("badimg/data.jsonl", text);
    g_autoptr(ClDataset) d = open_ok(path, NULL);
    g_autoptr(GError) error = NULL;
    g_assert_null(cl_dataset_get(d, 0, &error));
    g_assert_nonnull(error);
    g_autofree char *where = g_strdup_printf("%s:1: image 2", path);
    g_assert_true(g_str_has_prefix(error->message, where));
    g_clear_error(&error);
    g_assert_null(cl_dataset_get(d, 1, &error));
    g_assert_nonnull(error);
    g_assert_nonnull(strstr(error->message, ":2: image 2"));
    g_assert_nonnull(strstr(error->message, "frame #3"));
}

/* ---- length limits ------------------------------------------------------------------------- */

static void test_too_long(void)
{
    g_autofree char *a = write_png("long/a.png", 16, 16, 1);
    const int M = cl_config_n_visual(&model->config);
    /* a long answer: its sample is over 2 * M + 60 positions */
    GString *ans = g_string_new(NULL);
    for (int i = 0; ans->len < 400; i++)
        g_string_append_printf(ans, "word%d ", i);
    ClChatTurn turns[G_N_ELEMENTS(pair_turns)];
    memcpy(turns, pair_turns, sizeof turns);
    turns[4].text = ans->str;
    const char *imgs[] = { "a.png", "a.png" };
    g_autofree char *longl = jline(turns, G_N_ELEMENTS(turns), imgs, 2, NULL);
    g_autofree char *shortl = pair_line("a.png", "a.png", NULL);
    g_autofree char *text = g_strdup_printf("%s\n%s\n", shortl, longl);
    g_autofree char *path = write_text("long/data.jsonl", text);
    g_autoptr(GArray) short_ids = expected_ids(pair_turns, G_N_ELEMENTS(pair_turns));
    const int limit = (int)short_ids->len + 5;
    g_autoptr(GArray) long_ids = expected_ids(turns, G_N_ELEMENTS(turns));
    g_assert_cmpint((int)long_ids->len, >, limit);

    ClDatasetOptions o;
    cl_dataset_options_init(&o);
    o.max_len = limit;
    g_autoptr(GError) error = NULL;
    g_assert_null(cl_dataset_open(path, model, &o, &error));
    g_assert_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_TOO_LONG);
    g_autofree char *where = g_strdup_printf("%s:2: ", path);
    g_autofree char *what = g_strdup_printf("takes %u decoder positions", long_ids->len);
    g_autofree char *lim = g_strdup_printf("the limit is %d", limit);
    g_assert_true(g_str_has_prefix(error->message, where));
    g_assert_nonnull(strstr(error->message, what));
    g_assert_nonnull(strstr(error->message, lim));
    g_clear_error(&error);

    /* skipped and counted */
    o.skip_bad_lines = TRUE;
    {
        g_autoptr(ClDataset) d = open_ok(path, &o);
        g_assert_cmpuint(cl_dataset_count(d), ==, 1);
        g_assert_cmpuint(cl_dataset_summary(d)->n_too_long, ==, 1);
        g_assert_cmpuint(cl_dataset_summary(d)->n_bad, ==, 0);
        g_autofree char *st = cl_dataset_summary_text(d);
        g_assert_nonnull(strstr(st, "1 refused as longer than"));
    }

    /* truncated: the first `limit` ids, a prefix of the answer supervised */
    o.skip_bad_lines = FALSE;
    o.long_policy = CL_DATASET_LONG_TRUNCATE;
    {
        g_autoptr(ClDataset) d = open_ok(path, &o);
        g_assert_cmpuint(cl_dataset_count(d), ==, 2);
        g_assert_cmpuint(cl_dataset_summary(d)->n_truncated, ==, 1);
        g_autoptr(ClTrainSample) s = get_ok(d, 1);
        g_assert_cmpint(s->n_ids, ==, limit);
        g_assert_cmpmem(s->ids, sizeof(gint32) * limit, long_ids->data, sizeof(gint32) * limit);
        g_autofree char *sup = masked_text(s);
        g_assert_cmpint(s->n_supervised, >, 0);
        g_assert_true(g_str_has_prefix(ans->str, sup));
        g_assert_cmpuint(strlen(sup), <, ans->len);
    }
    /* a cut inside the images is refused even then */
    o.max_len = M + 3;
    g_assert_null(cl_dataset_open(path, model, &o, &error));
    g_assert_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_TOO_LONG);
    g_assert_nonnull(strstr(error->message, ":1: "));
    g_assert_nonnull(strstr(error->message, "cutting an image"));
    g_clear_error(&error);

    /* no option: the model's max_len is the limit (and a larger option cannot raise it) */
    const int max_len = model->config.max_len;
    for (int i = 0; (int)ans->len < 8 * max_len; i++)
        g_string_append_printf(ans, "item %d, ", i);
    turns[4].text = ans->str;
    g_autoptr(GArray) huge_ids = expected_ids(turns, G_N_ELEMENTS(turns));
    g_assert_cmpint((int)huge_ids->len, >, max_len);
    g_autofree char *huge = jline(turns, G_N_ELEMENTS(turns), imgs, 2, NULL);
    g_autofree char *hpath = write_text("long/huge.jsonl", huge);
    cl_dataset_options_init(&o);
    o.max_len = 10 * max_len;
    g_assert_null(cl_dataset_open(hpath, model, &o, &error));
    g_assert_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_TOO_LONG);
    g_autofree char *mlim = g_strdup_printf("the limit is %d", max_len);
    g_assert_nonnull(strstr(error->message, mlim));
    g_string_free(ans, TRUE);
}

/* ---- frames, old schema, cache, synthetic samples ------------------------------------------ */

static void test_frames(void)
{
    g_autofree char *fdir = g_build_filename(tmpdir, "frames", NULL);
    g_assert_cmpint(g_mkdir_with_parents(fdir, 0755), ==, 0);
    g_autoptr(GPtrArray) fx = g_ptr_array_new_with_free_func((GDestroyNotify)cl_fixture_free);
    g_autoptr(GError) error = NULL;
    g_assert_true(cl_fixtures_tiff(fdir, fx, &error));
    const ClFixture *multi = NULL;
    for (guint i = 0; i < fx->len && !multi; i++) {
        const ClFixture *f = g_ptr_array_index(fx, i);
        if (!f->must_fail && f->frames >= 2)
            multi = f;
    }
    g_assert_nonnull(multi);
    g_autofree char *base = g_path_get_basename(multi->path);
    g_autofree char *f0 = g_strdup(base);
    g_autofree char *f1 = g_strdup_printf("%s#1", base);
    /* the older ShareGPT schema ("from"/"value", "conversations") */
    g_autofree char *line = g_strdup_printf(
        "{\"conversations\": [{\"from\": \"human\", \"value\": \"<image>\\nfirst\"}, {\"from\": "
        "\"gpt\", \"value\": \"ok\"}, {\"from\": \"human\", \"value\": \"<image>\\nnext\"}, "
        "{\"from\": \"gpt\", \"value\": \"same\"}], \"images\": [\"%s\", \"%s\"], \"id\": 17}\n",
        f0, f1);
    g_autofree char *path = g_build_filename(fdir, "frames.jsonl", NULL);
    g_assert_true(g_file_set_contents(path, line, -1, &error));
    g_autoptr(ClDataset) d = open_ok(path, NULL);
    g_autoptr(ClTrainSample) s = get_ok(d, 0);
    g_assert_cmpstr(s->id, ==, "17");
    g_autofree float *p0 = preprocessed(multi->path, 0);
    g_autofree float *p1 = preprocessed(multi->path, 1);
    gsize n = per_image(s) * sizeof(float);
    g_assert_true(memcmp(p0, p1, n) != 0); /* pages differ */
    g_assert_cmpmem(s->pixels, n, p0, n);
    g_assert_cmpmem(s->pixels + per_image(s), n, p1, n);
    g_autofree char *t = masked_text(s);
    g_assert_cmpstr(t, ==, "same<|im_end|>");
}

static void test_cache(void)
{
    ClDatasetOptions o;
    cl_dataset_options_init(&o);
    o.image_cache = 2;
    g_autoptr(ClDataset) d = open_ok(basic_jsonl, &o);
    g_autoptr(ClDataset) plain = open_ok(basic_jsonl, NULL);
    guint64 hits, misses;
    for (int round = 0; round < 2; round++)
        for (guint i = 0; i < 3; i++) {
            g_autoptr(ClTrainSample) s = get_ok(d, i);
            g_autoptr(ClTrainSample) r = get_ok(plain, i);
            gsize n = per_image(s) * s->n_images * sizeof(float);
            g_assert_cmpmem(s->pixels, n, r->pixels, n);
        }
    cl_dataset_cache_stats(d, &hits, &misses);
    g_assert_cmpuint(hits + misses, ==, 10);
    g_assert_cmpuint(hits, >, 0);
    g_assert_cmpuint(misses, >=, 3); /* three distinct images */
    cl_dataset_cache_stats(plain, &hits, &misses);
    g_assert_cmpuint(hits, ==, 0);
}

static void test_from_turns(void)
{
    g_autoptr(ClDataset) d = open_ok(basic_jsonl, NULL);
    g_autoptr(ClTrainSample) want = get_ok(d, 0);
    g_autofree char *a = g_build_filename(tmpdir, "basic", "a.png", NULL);
    g_autofree char *b = g_build_filename(tmpdir, "basic", "b.png", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(ClImage) ia = cl_image_load(a, NULL, &error);
    g_autoptr(ClImage) ib = cl_image_load(b, NULL, &error);
    g_assert_no_error(error);
    const ClImage *imgs[] = { ia, ib };
    g_autoptr(ClTrainSample) s = cl_train_sample_from_turns(
        model, pair_turns, G_N_ELEMENTS(pair_turns), imgs, NULL, 2, FALSE, &error);
    g_assert_no_error(error);
    g_assert_cmpint(s->n_ids, ==, want->n_ids);
    g_assert_cmpmem(s->ids, sizeof(gint32) * s->n_ids, want->ids, sizeof(gint32) * want->n_ids);
    g_assert_cmpmem(s->mask, s->n_ids, want->mask, want->n_ids);
    g_assert_cmpint(s->n_supervised, ==, want->n_supervised);
    gsize n = per_image(s) * 2 * sizeof(float);
    g_assert_cmpmem(s->pixels, n, want->pixels, n);
    g_assert_cmpstr(s->id, ==, "synthetic");

    /* all turns */
    g_autoptr(ClTrainSample) all = cl_train_sample_from_turns(
        model, pair_turns, G_N_ELEMENTS(pair_turns), imgs, NULL, 2, TRUE, &error);
    g_assert_no_error(error);
    g_autofree char *t = masked_text(all);
    g_autofree char *wt = g_strconcat(FILLER, "<|im_end|>", ANSWER, "<|im_end|>", NULL);
    g_assert_cmpstr(t, ==, wt);

    /* refusals: wrong image count, no final answer, a frame that is not there */
    g_assert_null(cl_train_sample_from_turns(model, pair_turns, G_N_ELEMENTS(pair_turns), imgs,
                                             NULL, 1, FALSE, &error));
    g_assert_nonnull(strstr(error->message, "2 <image> tags"));
    g_clear_error(&error);
    g_assert_null(cl_train_sample_from_turns(model, pair_turns, 4, imgs, NULL, 2, FALSE, &error));
    g_assert_nonnull(strstr(error->message, "assistant"));
    g_clear_error(&error);
    const guint frames[] = { 0, 5 };
    g_assert_null(cl_train_sample_from_turns(model, pair_turns, G_N_ELEMENTS(pair_turns), imgs,
                                             frames, 2, FALSE, &error));
    g_assert_nonnull(error);
    g_assert_nonnull(strstr(error->message, "image 2"));
}

/* ---- shuffles ------------------------------------------------------------------------------ */

static gboolean is_permutation(const guint *order, guint n)
{
    g_autofree guint8 *seen = g_new0(guint8, MAX(n, 1));
    for (guint i = 0; i < n; i++) {
        if (order[i] >= n || seen[order[i]])
            return FALSE;
        seen[order[i]] = 1;
    }
    return TRUE;
}

static void test_shuffle(void)
{
    const guint n = 1000;
    g_autofree guint *a = g_new(guint, n);
    g_autofree guint *b = g_new(guint, n);
    cl_data_shuffle(a, n, 42);
    cl_data_shuffle(b, n, 42);
    g_assert_true(is_permutation(a, n));
    g_assert_cmpmem(a, n * sizeof(guint), b, n * sizeof(guint));
    guint fixed = 0;
    for (guint i = 0; i < n; i++)
        fixed += a[i] == i;
    g_assert_cmpuint(fixed, <, 10); /* about 1 expected */
    cl_data_shuffle(b, n, 43);
    g_assert_true(is_permutation(b, n));
    g_assert_true(memcmp(a, b, n * sizeof(guint)) != 0);

    cl_dataset_epoch_order(a, n, 7, 0);
    cl_dataset_epoch_order(b, n, 7, 1);
    g_assert_true(is_permutation(a, n) && is_permutation(b, n));
    g_assert_true(memcmp(a, b, n * sizeof(guint)) != 0);
    cl_dataset_epoch_order(b, n, 7, 0);
    g_assert_cmpmem(a, n * sizeof(guint), b, n * sizeof(guint));

    guint one = 99;
    cl_data_shuffle(&one, 1, 5);
    g_assert_cmpuint(one, ==, 0);
    cl_data_shuffle(NULL, 0, 5);

    /* uniform over the 6 orders of 3 (a biased swap would skew this far past the bounds) */
    guint counts[6] = { 0 };
    for (guint64 seed = 0; seed < 6000; seed++) {
        guint o[3];
        cl_data_shuffle(o, 3, seed);
        g_assert_true(is_permutation(o, 3));
        counts[o[0] * 2 + (o[1] > o[2])]++;
    }
    for (int k = 0; k < 6; k++) {
        g_assert_cmpuint(counts[k], >, 850);
        g_assert_cmpuint(counts[k], <, 1150);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    tmpdir = cl_fixture_tmpdir("data-jsonl");
    ClModelConfig cfg;
    g_autoptr(GError) error = NULL;
    g_assert_true(cl_model_config_preset(&cfg, "tiny", &error));
    model = cl_model_new_random(&cfg, 1, &error);
    g_assert_no_error(error);
    make_basic();

    g_test_add_func("/data/jsonl/count-and-ids", test_count_and_ids);
    g_test_add_func("/data/jsonl/mask-final", test_mask_final);
    g_test_add_func("/data/jsonl/mask-all-turns", test_mask_all_turns);
    g_test_add_func("/data/jsonl/pixels", test_pixels);
    g_test_add_func("/data/jsonl/relative-paths", test_relative_paths);
    g_test_add_func("/data/jsonl/bad-lines", test_bad_lines_strict);
    g_test_add_func("/data/jsonl/bad-lines-skip", test_bad_lines_skip);
    g_test_add_func("/data/jsonl/deep-line", test_deep_line);
    g_test_add_func("/data/jsonl/bad-line-utf8", test_bad_line_utf8);
    g_test_add_func("/data/jsonl/endless-line", test_endless_line);
    g_test_add_func("/data/jsonl/not-regular", test_not_regular);
    g_test_add_func("/data/jsonl/bad-image", test_bad_image);
    g_test_add_func("/data/jsonl/too-long", test_too_long);
    g_test_add_func("/data/jsonl/frames", test_frames);
    g_test_add_func("/data/jsonl/cache", test_cache);
    g_test_add_func("/data/jsonl/from-turns", test_from_turns);
    g_test_add_func("/data/shuffle", test_shuffle);
    int rc = g_test_run();

    cl_model_free(model);
    g_free(basic_jsonl);
    cl_fixture_rmdir(tmpdir);
    g_free(tmpdir);
    return rc;
}
