/* fuzz-jsonl.c - libFuzzer harness for the JSONL training-data reader (core/train/jsonl.c): the
 * input is written as a JSONL file next to two small PNGs and opened with a tiny random model,
 * strict (the defaults) and lenient (bad lines skipped, long samples cut, every assistant turn,
 * an image cache); every usable sample is then loaded and checked against the summary.
 * `CL_FUZZ_WRITE_SEEDS=DIR fuzz-jsonl` writes seeds in both schemas and exits. */
#include <glib/gstdio.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-common.h"
#include "model/decoder.h"
#include "model/heatmap.h"
#include "train/jsonl.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

static char *tmpdir, *jsonl_path;
static ClModel *model;

static const char *const png_names[] = { "a.png", "b.png" };

static void cleanup(void)
{
    g_unlink(jsonl_path);
    for (guint i = 0; i < G_N_ELEMENTS(png_names); i++) {
        g_autofree char *p = g_build_filename(tmpdir, png_names[i], NULL);
        g_unlink(p);
    }
    g_rmdir(tmpdir);
    cl_model_free(model);
}

static void setup(void)
{
    g_autoptr(GError) err = NULL;
    tmpdir = g_dir_make_tmp("fuzz-jsonl-XXXXXX", &err);
    if (!tmpdir)
        g_error("%s", err->message);
    jsonl_path = g_build_filename(tmpdir, "data.jsonl", NULL);
    for (guint i = 0; i < G_N_ELEMENTS(png_names); i++) {
        guint8 rgb[12 * 10 * 3];
        for (guint k = 0; k < sizeof rgb; k++)
            rgb[k] = (guint8)(k * (7 + 5 * i));
        g_autofree char *p = g_build_filename(tmpdir, png_names[i], NULL);
        if (!cl_png_write_rgb(p, rgb, 12, 10, &err))
            g_error("%s: %s", p, err->message);
    }
    /* small enough that a sample loads in microseconds: 4 visual positions per image */
    ClModelConfig c;
    cl_model_config_preset(&c, "tiny", NULL);
    c.image_size = 32, c.patch_size = 16, c.channels = 3;
    c.enc_dim = 4, c.enc_depth = 1, c.enc_heads = 1, c.enc_mlp = 4;
    c.merger_hidden = 4;
    c.dec_dim = 2, c.dec_depth = 1, c.dec_heads = 1, c.dec_kv_heads = 1, c.dec_mlp = 2;
    c.vocab_size = CL_CONFIG_MIN_VOCAB, c.max_len = 1024;
    model = cl_model_new_random(&c, 1, &err);
    if (!model)
        g_error("model: %s", err->message);
    atexit(cleanup);
}

static void check_error(GError *error)
{
    if (error && error->domain != CL_DATASET_ERROR)
        g_error("error from %s (%d): %s", g_quark_to_string(error->domain), error->code,
                error->message);
    g_assert(error != NULL && error->domain == CL_DATASET_ERROR && error->message[0]);
    if (!g_utf8_validate(error->message, -1, NULL)) {
        g_autofree char *shown = g_strescape(error->message, NULL);
        g_error("an error message that is not UTF-8: %s", shown);
    }
    g_error_free(error);
}

/* Opens the file with o and loads its samples, checking each against the summary. */
static void read_all(const ClDatasetOptions *o)
{
    GError *error = NULL;
    ClDataset *d = cl_dataset_open(jsonl_path, model, o, &error);
    if (!d) {
        check_error(error);
        return;
    }
    const ClDatasetSummary *s = cl_dataset_summary(d);
    guint n = cl_dataset_count(d);
    g_assert(n >= 1 && n == s->n_samples);
    g_assert(s->n_samples + s->n_blank + s->n_bad + s->n_too_long <= s->n_lines);
    int max_len = o && o->max_len ? o->max_len : model->config.max_len;
    g_assert(s->max_positions >= 1 && s->max_positions <= max_len);
    g_autofree char *text = cl_dataset_summary_text(d);
    g_assert(g_utf8_validate(text, -1, NULL));
    const GPtrArray *problems = cl_dataset_problems(d);
    for (guint i = 0; i < problems->len; i++)
        g_assert(g_utf8_validate(problems->pdata[i], -1, NULL));
    guint64 positions = 0, supervised = 0;
    guint images = 0;
    for (guint i = 0; i < n; i++) {
        g_assert(cl_dataset_line(d, i) >= 1 && cl_dataset_line(d, i) <= s->n_lines);
        ClTrainSample *t = cl_dataset_get(d, i, &error);
        if (!t) {
            check_error(error);
            cl_dataset_free(d);
            return;
        }
        g_assert(t->n_ids >= 2 && t->n_ids <= max_len);
        g_assert(t->n_supervised >= 1);
        int sup = 0, visual = 0;
        for (int k = 0; k < t->n_ids; k++) {
            g_assert(t->ids[k] == CL_DECODER_VISUAL ||
                     (t->ids[k] >= 0 && t->ids[k] < model->config.vocab_size));
            visual += t->ids[k] == CL_DECODER_VISUAL;
            if (k + 1 < t->n_ids && t->mask[k]) {
                g_assert(t->ids[k + 1] != CL_DECODER_VISUAL);
                sup++;
            }
        }
        g_assert(sup == t->n_supervised);
        g_assert(visual == (int)t->n_images * t->n_visual_per_image);
        volatile float sink = 0;
        gsize np = (gsize)t->n_images * t->channels * t->size * t->size;
        for (gsize k = 0; k < np; k++)
            sink += t->pixels[k];
        (void)sink;
        positions += (guint64)t->n_ids;
        supervised += (guint64)t->n_supervised;
        images += t->n_images;
        cl_train_sample_free(t);
    }
    g_assert(positions == s->n_positions);
    g_assert(supervised == s->n_supervised);
    g_assert(images == s->n_images);
    cl_dataset_free(d);
}

/* ---- seeds --------------------------------------------------------------------------------- */

static void write_seeds(const char *dir)
{
    g_mkdir_with_parents(dir, 0755);
    static const char *const seeds[] = {
        /* the paper's two-image conversation */
        "{\"id\": \"pair\", \"messages\": [{\"role\": \"system\", \"content\": \"You compare "
        "images.\"}, {\"role\": \"user\", \"content\": \"<image>\\nHere is the first image.\"}, "
        "{\"role\": \"assistant\", \"content\": \"I see the image. Please show me the next "
        "image.\"}, {\"role\": \"user\", \"content\": \"<image>\\nHere is the second image. What "
        "changed?\"}, {\"role\": \"assistant\", \"content\": \"A red square moved to the "
        "left.\"}], \"images\": [\"a.png\", \"b.png\"]}\n",
        /* the older schema, a numeric id, frames, a blank line */
        "{\"conversations\": [{\"from\": \"human\", \"value\": \"<image>\\nfirst\"}, {\"from\": "
        "\"gpt\", \"value\": \"ok\"}, {\"from\": \"human\", \"value\": \"<image>\\nnext\"}, "
        "{\"from\": \"gpt\", \"value\": \"same\"}], \"images\": [\"a.png#0\", \"b.png\"], "
        "\"id\": 17}\n\n"
        "{\"messages\": [{\"role\": \"user\", \"content\": \"<image>\\nDescribe the image.\"}, "
        "{\"role\": \"assistant\", \"content\": \"A blue field with an orange block.\"}], "
        "\"images\": [\"b.png\"]}\n",
        /* text only; then bad lines: no assistant at the end, a missing image, too few images */
        "{\"messages\": [{\"role\": \"user\", \"content\": \"hello <|im_end|>\"}, {\"role\": "
        "\"assistant\", \"content\": \"hi \\u00e9\\ud83d\\ude00\"}]}\n"
        "{\"messages\": [{\"role\": \"user\", \"content\": \"<image>\"}], \"images\": "
        "[\"a.png\"]}\n"
        "{\"messages\": [{\"role\": \"user\", \"content\": \"<image>\"}, {\"role\": "
        "\"assistant\", \"content\": \"x\"}], \"images\": [\"gone.png\"]}\n"
        "{\"messages\": [{\"role\": \"user\", \"content\": \"<image><image>\"}, {\"role\": "
        "\"assistant\", \"content\": \"x\"}], \"images\": [\"a.png#7\"]}\n"
        "[1, 2]\n",
    };
    for (gsize i = 0; i < G_N_ELEMENTS(seeds); i++) {
        g_autofree char *path = g_strdup_printf("%s/seed-%zu.jsonl", dir, i);
        g_autoptr(GError) err = NULL;
        if (!g_file_set_contents(path, seeds[i], -1, &err))
            g_error("%s", err->message);
    }
    printf("%zu seeds in %s\n", G_N_ELEMENTS(seeds), dir);
}

/* Skip mode's messages about each bad line would fill the log: criticals abort, messages go. */
static GLogWriterOutput quiet_writer(GLogLevelFlags level, const GLogField *fields, gsize n_fields,
                                     gpointer user)
{
    if (level & (G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_INFO | G_LOG_LEVEL_DEBUG))
        return G_LOG_WRITER_HANDLED;
    return cl_fuzz_abort_on_critical(level, fields, n_fields, user);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    g_log_set_writer_func(quiet_writer, NULL, NULL);
    const char *dir = g_getenv("CL_FUZZ_WRITE_SEEDS");
    if (dir) {
        write_seeds(dir);
        exit(0);
    }
    setup();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(GError) err = NULL;
    if (!g_file_set_contents(jsonl_path, (const char *)data, (gssize)size, &err))
        g_error("%s", err->message);
    read_all(NULL);
    ClDatasetOptions o;
    cl_dataset_options_init(&o);
    o.skip_bad_lines = TRUE;
    o.long_policy = CL_DATASET_LONG_TRUNCATE;
    o.all_turns = TRUE;
    o.max_len = 48;
    o.image_cache = 1;
    read_all(&o);
    return 0;
}
