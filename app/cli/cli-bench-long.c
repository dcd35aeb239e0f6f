/* cli-bench-long.c - `changelens-cli bench --long`: the decoder on long sequences (many images,
 * long outputs), token insertion against each decoder option, as the number of images and of
 * generated tokens grows: the decoder state's memory and the time per generated token. */
#include <json-glib/json-glib.h>
#include "jsonnum.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "model/decoder.h"
#include "model/model.h"
#include "model/vist.h"

#define PROG CL_CLI_NAME " bench --long"

static const char usage_text[] =
    "Usage: " PROG " [--options insertion,pvm,casa,stream,hybrid,vist,sparse]\n"
    "       [--images 2,8,32,64]\n"
    "       [--gen 32,512,4096] [--quick] [--json]\n"
    "\n"
    "Runs the tiny preset's decoder (random weights; the encoder is not timed: each image is its\n"
    "merger's rows, random) on prompts of N images (2 text tokens and the image's visual rows\n"
    "each, then a question) and generates exactly G tokens greedily, for every option, N and G.\n"
    "Prints per run the decoder state's memory (keys and values at the run's capacity, the\n"
    "workspace, PVM's visual keys; the weights are the same for all) and the milliseconds per\n"
    "generated token (the decode steps after the prefill, median of --repeat runs).\n"
    "\n"
    "  --options LIST  insertion (visual rows in the sequence, every layer's KV cache holds them),\n"
    "                  pvm (insertion plus PVM beside the FFN of every 2nd layer, rank 32) and\n"
    "                  casa (cross-attention to each image's window; text alone in the cache)\n"
    "                  stream (insertion with a sink + window KV cache of 256 + 2048) and\n"
    "                  hybrid (Gated DeltaNet layers, attention in layers 0 and 4 on that cache)\n"
    "                  vist (insertion; the generated text compressed as it comes: every 100\n"
    "                  tokens rendered, encoded and kept as 25 visual rows; the encoder's time\n"
    "                  counts)\n"
    "                  sparse (insertion, the prompt's prefill sparse: blocks of 32, the first,\n"
    "                  previous, own and 4 best; not in the default list)\n"
    "  --images LIST   images per prompt (default 2,8,32,64)\n"
    "  --gen LIST      generated tokens (default 32,512,4096)\n"
    "  --repeat N      timed runs per point (default 1; the longest runs take seconds)\n"
    "  --quick         --images 2,8 --gen 8,32 (a smoke run)\n"
    "  --json          an array of {option, images, gen_tokens, prompt_tokens, peak_mb,\n"
    "                  ms_per_token, prefill_ms}\n";

/* "2,8,32" → ints in [lo, hi]; NULL when malformed */
static GArray *parse_list(const char *s, int lo, int hi)
{
    g_auto(GStrv) parts = g_strsplit(s, ",", -1);
    GArray *a = g_array_new(FALSE, FALSE, sizeof(int));
    for (int i = 0; parts[i]; i++) {
        gint64 v;
        if (!cl_cli_parse_int(NULL, g_strstrip(parts[i]), lo, hi, &v, NULL)) {
            g_array_free(a, TRUE);
            return NULL;
        }
        int x = (int)v;
        g_array_append_val(a, x);
    }
    if (a->len == 0) {
        g_array_free(a, TRUE);
        return NULL;
    }
    return a;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    const char *option;
    int images, gen, prompt;
    double mb, ms_per_token, prefill_ms;
} Point;

/* One prompt of `images` images through the decoder, then exactly `gen` greedy tokens. */
static gboolean run_point(ClBackend *be, const ClModel *m, gboolean stream, gboolean sparse,
                          int images, int gen, int repeat, Point *pt, GError **error)
{
    const gboolean vist = m->config.vist_chunk > 0;
    const ClModelConfig *c = &m->config;
    const int M = cl_config_n_visual(c), E = c->dec_dim, V = c->vocab_size;
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(gint32));
    GRand *r = g_rand_new_with_seed(7);
    for (int t = 0; t < images; t++) {
        for (int k = 0; k < 2; k++) {
            gint32 id = g_rand_int_range(r, 300, V);
            g_array_append_val(ids, id);
        }
        for (int k = 0; k < M; k++) {
            gint32 id = CL_DECODER_VISUAL;
            g_array_append_val(ids, id);
        }
    }
    for (int k = 0; k < 12; k++) {
        gint32 id = g_rand_int_range(r, 300, V);
        g_array_append_val(ids, id);
    }
    const int T = (int)ids->len;
    g_autofree float *visual = g_new(float, (size_t)images * M * E);
    for (size_t i = 0; i < (size_t)images * M * E; i++)
        visual[i] = (float)g_rand_double_range(r, -1, 1);
    g_rand_free(r);
    g_autofree float *logits = g_new(float, V);
    g_autofree double *ms = g_new(double, repeat), *pre = g_new(double, repeat);
    size_t bytes = 0;
    /* CASA caches text alone: its cache is as long as the text and the output */
    int cached = c->casa != CL_CASA_OFF ? T - images * M : T;
    const int L = c->vist_chunk;
    int room = gen;
    if (vist) /* the chunks' rows, the text of the chunk being written, a chunk's rows on top */
        room = (gen / L) * M + L + M;
    for (int rep = 0; rep < repeat; rep++) {
        g_autoptr(ClVist) vs = vist ? cl_vist_new(be, m, error) : NULL;
        if (vist && !vs)
            return FALSE;
        g_autoptr(GArray) raw = g_array_new(FALSE, FALSE, sizeof(gint32));
        g_autoptr(ClKVCache) cache =
            stream ? cl_kv_cache_new_streaming(m, 256, 2048) : cl_kv_cache_new(m, cached + room);
        if (!cache) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                        "no memory for a KV cache of %d positions", cached + gen);
            return FALSE;
        }
        if (sparse) /* blocks of 32, the first, previous, own and 4 best */
            cl_kv_cache_set_sparse_prefill(cache, 32, 4);
        gint64 t0 = g_get_monotonic_time();
        if (!cl_decoder_forward(be, m, cache, (const gint32 *)ids->data, T, visual, logits, NULL,
                                NULL, NULL, error))
            return FALSE;
        pre[rep] = (g_get_monotonic_time() - t0) / 1000.0;
        t0 = g_get_monotonic_time();
        for (int k = 1; k < gen; k++) { /* token 1 comes from the prefill */
            gint32 best = cl_argmax(logits, V);
            if (!cl_decoder_forward(be, m, cache, &best, 1, NULL, logits, NULL, NULL, NULL, error))
                return FALSE;
            if (vs) {
                g_array_append_val(raw, best);
                if ((int)raw->len == L) {
                    if (!cl_vist_compress(vs, cache, (const gint32 *)(gpointer)raw->data, L, logits,
                                          error))
                        return FALSE;
                    g_array_set_size(raw, 0);
                }
            }
        }
        ms[rep] = (g_get_monotonic_time() - t0) / 1000.0 / MAX(gen - 1, 1);
        bytes = MAX(bytes, cl_kv_cache_bytes(cache));
    }
    qsort(ms, repeat, sizeof(double), cmp_double);
    qsort(pre, repeat, sizeof(double), cmp_double);
    pt->prefill_ms = repeat % 2 ? pre[repeat / 2] : 0.5 * (pre[repeat / 2 - 1] + pre[repeat / 2]);
    pt->images = images;
    pt->gen = gen;
    pt->prompt = T;
    pt->mb = bytes / 1e6;
    pt->ms_per_token = repeat % 2 ? ms[repeat / 2] : 0.5 * (ms[repeat / 2 - 1] + ms[repeat / 2]);
    return TRUE;
}

static ClModel *option_model(const char *option, int max_len, GError **error)
{
    ClModelConfig cfg;
    if (!cl_model_config_preset(&cfg, "tiny", error))
        return NULL;
    cfg.max_len = max_len;
    if (strcmp(option, "pvm") == 0)
        cl_config_set_pvm(&cfg, 2, 32);
    if (strcmp(option, "casa") == 0)
        cfg.casa = CL_CASA_CA;
    if (strcmp(option, "hybrid") == 0) /* attention in layers 0 and 4, Gated DeltaNet between */
        cl_config_set_hybrid(&cfg, 4);
    if (strcmp(option, "vist") == 0)
        cl_config_set_vist(&cfg, 0);
    ClModel *m = cl_model_new_random(&cfg, 1, error);
    if (m && strcmp(option, "pvm") == 0) /* an open gate: the branch's work is real either way,
                                          * but its output should reach the logits */
        for (int l = 0; l < cfg.dec_depth; l++)
            if (m->w.dec[l].pvm_alpha)
                m->w.dec[l].pvm_alpha[0] = 0.5f;
    return m;
}

/* The command line: the lists as given (--quick replaces two of them, in the order given). */
typedef struct {
    char *options, *images, *gen;
    int repeat;
    gboolean json, long_flag;
} LongArgs;

static void long_args_clear(LongArgs *a)
{
    cl_cli_free_all(&a->options, &a->images, &a->gen, NULL);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(LongArgs, long_args_clear)

static gboolean on_list(const char *name, const char *value, gpointer data, GError **error)
{
    (void)error;
    LongArgs *a = data;
    if (strcmp(name, "--quick") == 0) {
        g_free(a->images), a->images = g_strdup("2,8");
        g_free(a->gen), a->gen = g_strdup("8,32");
        return TRUE;
    }
    char **list = strcmp(name, "--options") == 0  ? &a->options
                  : strcmp(name, "--images") == 0 ? &a->images
                                                  : &a->gen;
    g_free(*list);
    *list = g_strdup(value);
    return TRUE;
}

static gboolean on_repeat(const char *name, const char *value, gpointer data, GError **error)
{
    gint64 k;
    if (!cl_cli_parse_int(name, value, 1, 100, &k, error))
        return FALSE;
    ((LongArgs *)data)->repeat = (int)k;
    return TRUE;
}

/* Returns -1 to go on, else the exit status. */
static int parse_long_args(int argc, char **argv, LongArgs *a)
{
    a->options = g_strdup("insertion,pvm,casa,stream,hybrid,vist");
    a->images = g_strdup("2,8,32,64");
    a->gen = g_strdup("32,512,4096");
    a->repeat = 1;
    GOptionEntry entries[] = {
        { "long", 0, 0, G_OPTION_ARG_NONE, &a->long_flag, NULL, NULL },
        { "json", 0, 0, G_OPTION_ARG_NONE, &a->json, NULL, NULL },
        { "quick", 0, G_OPTION_FLAG_NO_ARG, G_OPTION_ARG_CALLBACK, (gpointer)on_list, NULL, NULL },
        { "options", 0, G_OPTION_FLAG_FILENAME, G_OPTION_ARG_CALLBACK, (gpointer)on_list, NULL,
          NULL },
        { "images", 0, G_OPTION_FLAG_FILENAME, G_OPTION_ARG_CALLBACK, (gpointer)on_list, NULL,
          NULL },
        { "gen", 0, G_OPTION_FLAG_FILENAME, G_OPTION_ARG_CALLBACK, (gpointer)on_list, NULL, NULL },
        { "repeat", 0, 0, G_OPTION_ARG_CALLBACK, (gpointer)on_repeat, NULL, NULL },
        { NULL },
    };
    return cl_cli_parse_own_help(PROG, usage_text, entries, a, argc, argv);
}

int cl_cli_bench_long(int argc, char **argv)
{
    g_auto(LongArgs) a = { 0 };
    int rc = parse_long_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    const char *options = a.options, *images_s = a.images, *gen_s = a.gen;
    const gboolean json = a.json;
    const int repeat = a.repeat;
    g_autoptr(GArray) images = parse_list(images_s, 1, 1024);
    g_autoptr(GArray) gens = parse_list(gen_s, 1, 65536);
    if (!images || !gens)
        return cl_cli_usage_error(PROG, "--images and --gen take comma-separated whole numbers "
                                        "(1-1024, 1-65536)");
    g_auto(GStrv) opts = g_strsplit(options, ",", -1);
    for (int i = 0; opts[i]; i++)
        if (strcmp(opts[i], "insertion") != 0 && strcmp(opts[i], "pvm") != 0 &&
            strcmp(opts[i], "casa") != 0 && strcmp(opts[i], "stream") != 0 &&
            strcmp(opts[i], "hybrid") != 0 && strcmp(opts[i], "vist") != 0 &&
            strcmp(opts[i], "sparse") != 0)
            return cl_cli_usage_error(PROG,
                                      "unknown option '%s' (insertion, pvm, casa, stream, "
                                      "hybrid, vist, sparse)",
                                      opts[i]);

    ClModelConfig tiny;
    cl_model_config_preset(&tiny, "tiny", NULL);
    const int M = cl_config_n_visual(&tiny);
    int max_images = 0, max_gen = 0;
    for (guint i = 0; i < images->len; i++)
        max_images = MAX(max_images, g_array_index(images, int, i));
    for (guint i = 0; i < gens->len; i++)
        max_gen = MAX(max_gen, g_array_index(gens, int, i));
    const int max_len = max_images * (M + 2) + 12 + max_gen + 16;

    g_autoptr(GError) err = NULL;
    g_autoptr(ClBackend) be = cl_backend_cpu_new(0);
    g_autoptr(GArray) points = g_array_new(FALSE, FALSE, sizeof(Point));
    for (int o = 0; opts[o]; o++) {
        g_autoptr(ClModel) m = option_model(opts[o], MAX(max_len, 16), &err);
        if (!m) {
            fprintf(stderr, PROG ": %s\n", err->message);
            return 1;
        }
        for (guint i = 0; i < images->len; i++)
            for (guint g = 0; g < gens->len; g++) {
                Point pt = { .option = opts[o] };
                if (!json)
                    fprintf(stderr, "bench: %s, %d images, %d tokens…\n", opts[o],
                            g_array_index(images, int, i), g_array_index(gens, int, g));
                if (!run_point(be, m,
                               strcmp(opts[o], "stream") == 0 || strcmp(opts[o], "hybrid") == 0,
                               strcmp(opts[o], "sparse") == 0, g_array_index(images, int, i),
                               g_array_index(gens, int, g), repeat, &pt, &err)) {
                    fprintf(stderr, PROG ": %s\n", err->message);
                    return 1;
                }
                pt.option = g_intern_string(opts[o]);
                g_array_append_val(points, pt);
            }
    }
    if (json) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        json_builder_begin_array(b);
        for (guint i = 0; i < points->len; i++) {
            const Point *p = &g_array_index(points, Point, i);
            json_builder_begin_object(b);
            json_builder_set_member_name(b, "option");
            json_builder_add_string_value(b, p->option);
            json_builder_set_member_name(b, "images");
            json_builder_add_int_value(b, p->images);
            json_builder_set_member_name(b, "gen_tokens");
            json_builder_add_int_value(b, p->gen);
            json_builder_set_member_name(b, "prompt_tokens");
            json_builder_add_int_value(b, p->prompt);
            json_builder_set_member_name(b, "peak_mb");
            json_builder_add_double_value(b, cl_json_double(p->mb));
            json_builder_set_member_name(b, "ms_per_token");
            json_builder_add_double_value(b, cl_json_double(p->ms_per_token));
            json_builder_set_member_name(b, "prefill_ms");
            json_builder_add_double_value(b, cl_json_double(p->prefill_ms));
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        cl_cli_print_json(b);
        return 0;
    }
    printf("ChangeLens bench --long: tiny decoder (E %d, %d layers), %d visual rows per image, "
           "CPU (%d threads)\n",
           tiny.dec_dim, tiny.dec_depth, M, cl_backend_cpu_threads(be));
    printf("  %-10s %7s %8s %8s %12s %14s %12s\n", "option", "images", "prompt", "gen", "state MB",
           "ms / token", "prefill ms");
    for (guint i = 0; i < points->len; i++) {
        const Point *p = &g_array_index(points, Point, i);
        printf("  %-10s %7d %8d %8d %12.2f %14.3f %12.1f\n", p->option, p->images, p->prompt,
               p->gen, p->mb, p->ms_per_token, p->prefill_ms);
    }
    return 0;
}
