/* cli-bench.c - `changelens-cli bench`: engine speed and memory, with ratios against a
 * reference measured in the same run (OpenBLAS sgemm peak; optionally the PyTorch peer). */
#include <cblas.h>
#include "jsonnum.h"
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "nn/backend.h"
#include "nn/blas.h"
#include "cl-config.h"
#include "cli.h"
#include "model/decoder.h"
#include "model/encoder.h"
#include "model/model.h"
#include "model/tokenizer.h"

static double now_ms(void)
{
    return g_get_monotonic_time() / 1000.0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- the reference: OpenBLAS sgemm peak on this machine ------------------------------------ */

/* Best GFLOP/s of C = A·B^T over a few shapes: square ones and the encoder's own products, so
 * the "fraction of peak" is against the best this machine's sgemm does, not a datasheet. */
static double sgemm_peak_gflops(const ClModelConfig *cfg)
{
    size_t n_tok = (size_t)cl_config_n_patches(cfg);
    size_t shapes[][3] = {
        { 1024, 1024, 1024 },
        { 2048, 2048, 2048 },
        { n_tok, (size_t)cfg->enc_mlp, (size_t)cfg->enc_dim },
        { n_tok, 3 * (size_t)cfg->enc_dim, (size_t)cfg->enc_dim },
    };
    double best = 0;
    for (size_t s = 0; s < G_N_ELEMENTS(shapes); s++) {
        size_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        float *a = g_malloc(m * k * sizeof(float));
        float *b = g_malloc(n * k * sizeof(float));
        float *c = g_malloc(m * n * sizeof(float));
        for (size_t i = 0; i < m * k; i++)
            a[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
        for (size_t i = 0; i < n * k; i++)
            b[i] = (float)((i * 40503u) % 1000) / 1000.0f - 0.5f;
        double flops = 2.0 * m * n * k;
        int reps = (int)CLAMP(2e10 / flops, 2, 200);
        /* warm-up, then the best of several timed batches */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1, a, k, b, k, 0, c, n);
        for (int batch = 0; batch < 3; batch++) {
            double t0 = now_ms();
            for (int r = 0; r < reps; r++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1, a, k, b, k, 0, c,
                            n);
            double gf = flops * reps / ((now_ms() - t0) * 1e6);
            best = MAX(best, gf);
        }
        g_free(a);
        g_free(b);
        g_free(c);
    }
    return best;
}

/* ---- the reference on a GPU: cuBLAS sgemm and a device copy, measured here --------------- */

/* Best GFLOP/s of cuBLAS's C = A·B^T (TF32 when the backend allows it) over the same shapes. */
static double cuda_peak_gflops(ClBackend *be, const ClModelConfig *cfg)
{
    int n_tok = cl_config_n_patches(cfg);
    int shapes[][3] = {
        { 4096, 4096, 4096 },
        { 8192, 8192, 8192 },
        { n_tok, cfg->enc_mlp, cfg->enc_dim },
        { n_tok, 3 * cfg->enc_dim, cfg->enc_dim },
    };
    double best = 0;
    for (size_t s = 0; s < G_N_ELEMENTS(shapes); s++) {
        double flops = 2.0 * shapes[s][0] * shapes[s][1] * shapes[s][2];
        int reps = (int)CLAMP(2e12 / flops, 3, 2000);
        for (int batch = 0; batch < 3; batch++) {
            double ms =
                cl_backend_cuda_time_gemm(be, shapes[s][0], shapes[s][1], shapes[s][2], reps);
            if (ms > 0)
                best = MAX(best, flops * reps / (ms * 1e6));
        }
    }
    return best;
}

/* Best GB/s (bytes read + written) of a 256 MiB device-to-device copy. */
static double cuda_copy_gbs(ClBackend *be)
{
    const size_t bytes = (size_t)256 << 20;
    double best = 0;
    for (int batch = 0; batch < 3; batch++) {
        double ms = cl_backend_cuda_time_copy(be, bytes, 10);
        if (ms > 0)
            best = MAX(best, 2.0 * bytes * 10 / (ms * 1e6));
    }
    return best;
}

/* Bytes of weights a decode step reads: every decoder tensor but the embedding table (one row
 * of it), which is read whole as the head when tied. */
static double decode_weight_bytes(const ClModelConfig *cfg)
{
    g_autoptr(GPtrArray) specs = cl_model_weight_specs(cfg, NULL);
    double n = 0;
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *w = specs->pdata[i];
        if (!g_str_has_prefix(w->name, "dec."))
            continue;
        if (strstr(w->name, "embed") && !cfg->tie_embeddings)
            continue;
        n += (double)cl_weight_spec_numel(w);
    }
    return 4.0 * n;
}

/* ---- FLOP counts (matrix products only: what sgemm does) ------------------------------------ */

static double encoder_gemm_flops(const ClModelConfig *c, gboolean has_prev)
{
    double N = cl_config_n_patches(c), D = c->enc_dim, F = c->enc_mlp, K = N;
    double M = cl_config_n_visual(c), E = c->dec_dim, Hm = c->merger_hidden;
    double cpp = (double)c->channels * c->patch_size * c->patch_size;
    double block = 2 * N * D * 3 * D + 4 * N * N * D + 2 * N * D * D + 4 * N * D * F;
    double sve = 0;
    switch (c->sve_variant) {
    case CL_SVE_CROSS:
    case CL_SVE_CROSS_FFN:
    case CL_SVE_SELF_FFN:
        sve = 2 * N * D * D + 2 * K * D * 2 * D + 4 * N * K * D + 2 * N * D * D;
        if (cl_config_has_sve_ffn(c))
            sve += 4 * N * D * F;
        break;
    case CL_SVE_SELF_EXT:
        sve = has_prev || c->sve_first == CL_SVE_FIRST_OWN ? 2 * K * D * 2 * D + 4 * N * K * D : 0;
        break;
    case CL_SVE_ADALN_ZERO: sve = 2 * D * 6 * D; break;
    default: break;
    }
    return 2 * N * cpp * D + c->enc_depth * (block + sve) + 2 * M * 4 * D * Hm + 2 * M * Hm * E;
}

/* ---- the PyTorch peer ----------------------------------------------------------------------- */

const char *cl_cli_source_dir(void)
{
    const char *env = g_getenv("CL_SOURCE_ROOT");
    return env && *env ? env : CL_SOURCE_DIR;
}

char *cl_cli_torch_python(void)
{
    const char *env = g_getenv("CL_TORCH_PYTHON");
    if (env && *env)
        return g_strdup(env);
    g_autofree char *venv = g_build_filename(CL_BUILD_DIR, "venv", "bin", "python", NULL);
    if (g_file_test(venv, G_FILE_TEST_IS_EXECUTABLE))
        return g_steal_pointer(&venv);
    return g_strdup("/usr/bin/python3");
}

static gboolean write_floats(const char *path, const float *v, size_t n, GError **error)
{
    return g_file_set_contents(path, (const char *)v, (gssize)(n * sizeof(float)), error);
}

/* Runs tests/reference/bench_torch.py on the same model file and inputs; returns its JSON. */
static JsonObject *run_torch(const char *model_path, const char *pixels_path,
                             const char *prompt_path, int n_images, int tokens, int repeat,
                             gboolean compile, const char *torch_device, gboolean tf32,
                             GError **error)
{
    g_autofree char *python = cl_cli_torch_python();
    g_autofree char *script =
        g_build_filename(cl_cli_source_dir(), "tests", "reference", "bench_torch.py", NULL);
    g_autofree char *tok = g_strdup_printf("%d", tokens);
    g_autofree char *rep = g_strdup_printf("%d", repeat);
    g_autofree char *nimg = g_strdup_printf("%d", n_images);
    const char *argv[20] = { python,      script,       "--model",  model_path, "--pixels",
                             pixels_path, "--n-images", nimg,       "--prompt", prompt_path,
                             "--tokens",  tok,          "--repeat", rep,        NULL };
    int argc = 14;
    argv[argc++] = "--device";
    argv[argc++] = torch_device;
    if (tf32)
        argv[argc++] = "--tf32";
    if (compile)
        argv[argc++] = "--torch-compile";
    argv[argc] = NULL;
    g_assert(argc < (int)G_N_ELEMENTS(argv));
    g_autofree char *out = NULL, *err = NULL;
    int status = 0;
    if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status,
                      error))
        return NULL;
    if (!g_spawn_check_wait_status(status, NULL)) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT, "PyTorch peer (%s) failed: %s",
                    python, err ? err : "");
        return NULL;
    }
    /* the last non-empty line is the JSON object */
    g_strchomp(out);
    const char *line = strrchr(out, '\n');
    line = line ? line + 1 : out;
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!json_parser_load_from_data(parser, line, -1, error))
        return NULL;
    JsonNode *root = json_parser_get_root(parser);
    if (!JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT, "PyTorch peer printed no JSON");
        return NULL;
    }
    return json_object_ref(json_node_get_object(root));
}

static double obj_double(JsonObject *o, const char *key)
{
    if (!o || !json_object_has_member(o, key))
        return NAN;
    return json_object_get_double_member(o, key);
}

/* ---- the command ---------------------------------------------------------------------------- */

static void fill_image(float *px, const ClModelConfig *c, int t)
{
    /* smooth patterns with a moving blob: realistic enough and deterministic */
    int S = c->image_size;
    for (int ch = 0; ch < c->channels; ch++)
        for (int y = 0; y < S; y++)
            for (int x = 0; x < S; x++) {
                double v = 0.4 * sin(0.07 * x + 0.5 * ch) * cos(0.05 * y) +
                           0.5 * exp(-(pow(x - S * (0.3 + 0.1 * t), 2) + pow(y - S * 0.5, 2)) /
                                     (0.01 * S * S));
                px[((size_t)ch * S + y) * S + x] = (float)CLAMP(v, -1.0, 1.0);
            }
}

#define PROG CL_CLI_NAME " bench"

typedef struct {
    char *preset, *device, *variant, *model; /* model: a model file instead of a preset */
    gboolean vs_torch, torch_compile, json;
    int tokens, repeat, threads;
    ClModelConfig cfg;
} BenchArgs;

static void bench_args_clear(BenchArgs *a)
{
    cl_cli_free_all(&a->preset, &a->device, &a->variant, &a->model, NULL);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(BenchArgs, bench_args_clear)

/* What a run measured: the device's references, the medians of our describe's parts and the
 * PyTorch peer's object (NULL when not run or when it failed: torch_error says why). */
typedef struct {
    const char *gpu; /* NULL: not on a GPU */
    gboolean tf32;
    double peak, copy_gbs;
    int n_images, prompt_tokens;
    gint32 first_token;
    double encode_ms, prefill_ms, decode_ms, describe_ms, decode_tps, enc_gflops, peak_rss_mb;
    double dec_gbs;
    JsonObject *torch, *torchc;
    char *torch_error;
} BenchResult;

static void bench_result_clear(BenchResult *r)
{
    g_clear_pointer(&r->torch, json_object_unref);
    g_clear_pointer(&r->torchc, json_object_unref);
    cl_cli_free_all(&r->torch_error, NULL);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(BenchResult, bench_result_clear)

/* The inputs of the timed describe: the images' pixels, the prompt's ids and the decoder's
 * sequence (each <image> expanded into its visual rows). */
typedef struct {
    int n_images;
    size_t img_floats;
    float *pixels;
    GArray *ids, *seq;
} BenchInput;

/* Returns -1 to go on, else the exit status. */
static int parse_bench_args(int argc, char **argv, BenchArgs *a)
{
    gboolean casedb_unused = FALSE;
    g_autofree char *decoder_unused = NULL; /* listed for --help; cl_cli_bench hands over */
    gint64 tokens = 32, repeat = 3, threads = 0;
    const ClCliIntOption ints[] = {
        { "tokens", 't', 1, 4096, &tokens },
        { "repeat", 'r', 1, 100, &repeat },
        { "threads", 0, 0, G_MAXINT, &threads },
        { NULL },
    };
    GOptionEntry entries[] = {
        { "preset", 'p', 0, G_OPTION_ARG_STRING, &a->preset, "Model size: tiny, base or large",
          "NAME" },
        { "model", 'm', 0, G_OPTION_ARG_FILENAME, &a->model,
          "A model file instead of a preset's random weights (a shipped model)", "FILE" },
        { "device", 'd', 0, G_OPTION_ARG_STRING, &a->device, "auto, cpu or cuda (default cpu)",
          "DEV" },
        { "variant", 0, 0, G_OPTION_ARG_STRING, &a->variant, "SVE variant (default cross_ffn)",
          "V" },
        CL_CLI_INT_ENTRY("tokens", 't', "Generated tokens per describe (32)", "N"),
        CL_CLI_INT_ENTRY("repeat", 'r', "Timed repetitions (3; median)", "N"),
        CL_CLI_INT_ENTRY("threads", 0, "Threads (0 = all cores)", "N"),
        { "vs-torch", 0, 0, G_OPTION_ARG_NONE, &a->vs_torch,
          "Run the PyTorch reference on the same weights", NULL },
        { "torch-compile", 0, 0, G_OPTION_ARG_NONE, &a->torch_compile,
          "Also time torch.compile (PyTorch >= 2)", NULL },
        { "json", 0, 0, G_OPTION_ARG_NONE, &a->json, "Print one JSON object", NULL },
        { "casedb", 0, 0, G_OPTION_ARG_NONE, &casedb_unused,
          "Benchmark the case database instead (bench --casedb --help)", NULL },
        { "train", 0, 0, G_OPTION_ARG_NONE, &casedb_unused,
          "Benchmark a training step instead (bench --train --help)", NULL },
        { "long", 0, 0, G_OPTION_ARG_NONE, &casedb_unused,
          "Benchmark the decoder options on long sequences (bench --long --help)", NULL },
        { "decoder", 0, 0, G_OPTION_ARG_FILENAME, &decoder_unused,
          "Benchmark a GGUF language model, optionally against llama.cpp (bench --decoder F "
          "--help)",
          "FILE" },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("- engine speed and memory");
    cl_cli_add_entries(ctx, entries, ints);
    if (!cl_cli_parse_options(ctx, PROG, &argc, &argv))
        return CL_CLI_EXIT_USAGE;
    a->tokens = (int)tokens, a->repeat = (int)repeat, a->threads = (int)threads;
    g_autoptr(GError) err = NULL;
    if (a->model && (a->preset || a->variant))
        return cl_cli_usage_error(PROG, "--model and --preset/--variant exclude each other");
    if (!cl_model_config_preset(&a->cfg, a->preset ? a->preset : "tiny", &err))
        return cl_cli_usage_error(PROG, "%s", err->message);
    if (a->variant && !cl_sve_variant_from_name(a->variant, &a->cfg.sve_variant))
        return cl_cli_usage_error(PROG, "unknown SVE variant '%s'", a->variant);
    a->cfg.sve_out_init_std = 0.02; /* a model whose SVE modules do something */
    return -1;
}

/* The describe prompt (the paper's two-image conversation, ChatML) and two images. */
static void bench_input_init(BenchInput *in, const ClModel *model)
{
    const ClModelConfig *cfg = &model->config;
    in->n_images = 2;
    in->img_floats = (size_t)cfg->channels * cfg->image_size * cfg->image_size;
    in->pixels = g_malloc(in->n_images * in->img_floats * sizeof(float));
    for (int t = 0; t < in->n_images; t++)
        fill_image(in->pixels + t * in->img_floats, cfg, t);

    const char *prompt_text =
        "<|im_start|>system\nYou are an expert at detecting and describing changes between two "
        "images. Given a before and after image, describe what has changed.<|im_end|>\n"
        "<|im_start|>user\n<image>\nThis is the before image.<|im_end|>\n"
        "<|im_start|>assistant\nUnderstood. Please provide the after image.<|im_end|>\n"
        "<|im_start|>user\n<image>\nThis is the after image. Describe what has changed."
        "<|im_end|>\n<|im_start|>assistant\n";
    in->ids = cl_tokenizer_encode(model->tokenizer, prompt_text, -1, TRUE);
    int M = cl_config_n_visual(cfg);
    /* expand each <image> into M visual rows */
    in->seq = g_array_new(FALSE, FALSE, sizeof(gint32));
    for (guint i = 0; i < in->ids->len; i++) {
        gint32 id = g_array_index(in->ids, gint32, i);
        if (id == CL_TOKEN_IMAGE) {
            for (int m = 0; m < M; m++) {
                gint32 v = CL_DECODER_VISUAL;
                g_array_append_val(in->seq, v);
            }
        } else {
            g_array_append_val(in->seq, id);
        }
    }
}

static void bench_input_clear(BenchInput *in)
{
    cl_cli_free_all(&in->pixels, NULL);
    g_clear_pointer(&in->ids, g_array_unref);
    g_clear_pointer(&in->seq, g_array_unref);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(BenchInput, bench_input_clear)

/* One describe: encode the images, prefill the prompt, exactly `tokens` greedy tokens (no stop:
 * the same work every run). Times in ms into enc_ms[n_images], *pre, *dec. */
static gboolean time_describe(ClBackend *be, const ClModel *model, const BenchInput *in,
                              ClEncoderState *state, ClKVCache *cache, float *visual, float *logits,
                              int tokens, double *enc_ms, double *pre, double *dec,
                              gint32 *first_token, GError **error)
{
    const ClModelConfig *cfg = &model->config;
    const int M = cl_config_n_visual(cfg);
    const size_t E = cfg->dec_dim, V = cfg->vocab_size;
    cl_encoder_state_reset(state);
    for (int t = 0; t < in->n_images; t++) {
        ClEncoderOutput out = { 0 };
        double t0 = now_ms();
        if (!cl_encoder_forward(be, model, state, in->pixels + t * in->img_floats, t, FALSE, NULL,
                                NULL, &out, error))
            return FALSE;
        enc_ms[t] = now_ms() - t0;
        memcpy(visual + (size_t)t * M * E, out.visual, (size_t)M * E * sizeof(float));
        cl_encoder_output_clear(&out);
    }
    cl_kv_cache_truncate(cache, 0);
    double t0 = now_ms();
    if (!cl_decoder_forward(be, model, cache, (const gint32 *)in->seq->data, (int)in->seq->len,
                            visual, logits, NULL, NULL, NULL, error))
        return FALSE;
    double t1 = now_ms();
    for (int k = 0; k < tokens; k++) {
        gint32 best = 0;
        for (size_t v = 1; v < V; v++)
            if (logits[v] > logits[best])
                best = (gint32)v;
        if (k == 0)
            *first_token = best;
        if (k == tokens - 1)
            break;
        if (!cl_decoder_forward(be, model, cache, &best, 1, NULL, logits, NULL, NULL, NULL, error))
            return FALSE;
    }
    *pre = t1 - t0;
    *dec = now_ms() - t1;
    return TRUE;
}

/* A warm-up describe, then `repeat` timed ones; their medians into r. */
static gboolean time_describes(ClBackend *be, const ClModel *model, const BenchInput *in,
                               int tokens, int repeat, BenchResult *r, GError **error)
{
    const ClModelConfig *cfg = &model->config;
    const int n_images = in->n_images, M = cl_config_n_visual(cfg);
    const size_t E = cfg->dec_dim, V = cfg->vocab_size;
    const int T = (int)in->seq->len;
    g_autofree float *visual = g_malloc((size_t)n_images * M * E * sizeof(float));
    g_autofree float *logits = g_malloc(V * sizeof(float));
    g_autofree double *enc_ms = g_new0(double, (repeat + 1) * n_images);
    g_autofree double *pre_ms = g_new0(double, repeat + 1), *dec_ms = g_new0(double, repeat + 1);
    g_autofree double *all_ms = g_new0(double, repeat + 1);
    g_autoptr(ClEncoderState) state = cl_encoder_state_new(model);
    g_autoptr(ClKVCache) cache = cl_kv_cache_new(model, T + tokens + 1);
    r->first_token = -1;
    /* slot 0: the warm-up, left out of the medians */
    for (int k = 0; k <= repeat; k++) {
        double t_start = now_ms();
        if (!time_describe(be, model, in, state, cache, visual, logits, tokens,
                           enc_ms + k * n_images, &pre_ms[k], &dec_ms[k], &r->first_token, error))
            return FALSE;
        all_ms[k] = now_ms() - t_start;
    }
    r->n_images = n_images;
    r->prompt_tokens = T;
    r->encode_ms = median(enc_ms + n_images, repeat * n_images);
    r->prefill_ms = median(pre_ms + 1, repeat);
    r->decode_ms = median(dec_ms + 1, repeat);
    r->describe_ms = median(all_ms + 1, repeat);
    /* decode: `tokens - 1` forward steps produce tokens 2..N (token 1 comes from the prefill) */
    r->decode_tps = tokens > 1 ? (tokens - 1) / (r->decode_ms / 1000.0) : NAN;
    r->enc_gflops = encoder_gemm_flops(cfg, TRUE) / (r->encode_ms * 1e6);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    r->peak_rss_mb = ru.ru_maxrss / 1024.0;
    /* a decode step streams the decoder's weights: its bandwidth against the device's copy */
    r->dec_gbs = tokens > 1 ? decode_weight_bytes(cfg) / (r->decode_ms / (tokens - 1) * 1e6) : NAN;
    return TRUE;
}

/* The PyTorch peer on the same weights and inputs (and torch.compile's when asked); a failure
 * is reported in r->torch_error, not as the command's. */
static void run_torch_peer(const BenchArgs *a, ClModel *model, const BenchInput *in, BenchResult *r)
{
    g_autoptr(GError) err = NULL;
    if (!a->json)
        fprintf(stderr, "bench: running the PyTorch peer on the same weights…\n");
    g_autofree char *dir = g_dir_make_tmp("changelens-bench-XXXXXX", &err);
    g_autofree char *mpath = dir ? g_build_filename(dir, "model.safetensors", NULL) : NULL;
    g_autofree char *ppath = dir ? g_build_filename(dir, "pixels.f32", NULL) : NULL;
    g_autofree char *ipath = dir ? g_build_filename(dir, "prompt.json", NULL) : NULL;
    GString *pj = g_string_new("[");
    for (guint i = 0; i < in->ids->len; i++)
        g_string_append_printf(pj, "%s%d", i ? "," : "", g_array_index(in->ids, gint32, i));
    g_string_append(pj, "]");
    gboolean ok = dir && cl_model_save(model, mpath, "F32", &err) &&
                  write_floats(ppath, in->pixels, in->n_images * in->img_floats, &err) &&
                  g_file_set_contents(ipath, pj->str, -1, &err);
    g_string_free(pj, TRUE);
    const char *torch_device = r->gpu ? "cuda" : "cpu";
    if (ok)
        r->torch = run_torch(mpath, ppath, ipath, in->n_images, a->tokens, a->repeat, FALSE,
                             torch_device, r->tf32, &err);
    if (ok && r->torch && a->torch_compile) {
        g_autoptr(GError) cerr = NULL;
        r->torchc = run_torch(mpath, ppath, ipath, in->n_images, a->tokens, a->repeat, TRUE,
                              torch_device, r->tf32, &cerr);
        if (!r->torchc)
            fprintf(stderr, "bench: torch.compile run failed: %s\n", cerr->message);
    }
    if (!r->torch)
        r->torch_error = g_strdup(err ? err->message : "unknown error");
    if (mpath)
        g_unlink(mpath);
    if (ppath)
        g_unlink(ppath);
    if (ipath)
        g_unlink(ipath);
    if (dir)
        g_rmdir(dir);
}

/* A JSON member of the report: a number, null when not finite */
typedef struct {
    const char *key;
    double value;
} Figure;

static void print_bench_json(const BenchArgs *a, const ClBackend *be, const BenchResult *r)
{
    const ClModelConfig *cfg = &a->cfg;
    double torch_ms = obj_double(r->torch, "describe_ms");
    double torchc_ms = obj_double(r->torchc, "describe_ms");
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
#define NUM(k, v)                                                                                  \
    do {                                                                                           \
        json_builder_set_member_name(b, k);                                                        \
        if (isfinite(v))                                                                           \
            json_builder_add_double_value(b, cl_json_double(v));                                   \
        else                                                                                       \
            json_builder_add_null_value(b);                                                        \
    } while (0)
    json_builder_set_member_name(b, a->model ? "model" : "preset");
    json_builder_add_string_value(b, a->model ? a->model : a->preset ? a->preset : "tiny");
    json_builder_set_member_name(b, "variant");
    json_builder_add_string_value(b, cl_sve_variant_name(cfg->sve_variant));
    json_builder_set_member_name(b, "device");
    json_builder_add_string_value(b, cl_backend_name(be));
    if (r->gpu) {
        json_builder_set_member_name(b, "gpu");
        json_builder_add_string_value(b, r->gpu);
        json_builder_set_member_name(b, "tf32");
        json_builder_add_boolean_value(b, r->tf32);
        NUM("copy_peak_gbs", r->copy_gbs);
        NUM("decode_weight_gbs", r->dec_gbs);
        NUM("decode_bandwidth_fraction", r->dec_gbs / r->copy_gbs);
    }
    json_builder_set_member_name(b, "prompt_tokens");
    json_builder_add_int_value(b, r->prompt_tokens);
    json_builder_set_member_name(b, "gen_tokens");
    json_builder_add_int_value(b, a->tokens);
    json_builder_set_member_name(b, "first_token");
    json_builder_add_int_value(b, r->first_token);
    const Figure times[] = {
        { "encode_ms_per_image", r->encode_ms },  { "prefill_ms", r->prefill_ms },
        { "decode_tokens_per_s", r->decode_tps }, { "describe_ms", r->describe_ms },
        { "peak_rss_mb", r->peak_rss_mb },        { "sgemm_peak_gflops", r->peak },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(times); i++)
        NUM(times[i].key, times[i].value);
    json_builder_set_member_name(b, "blas_kernels");
    json_builder_add_string_value(b, cl_blas_kernels());
    NUM("encoder_gflops", r->enc_gflops);
    NUM("encoder_sgemm_fraction", r->enc_gflops / r->peak);
    if (a->vs_torch) {
        json_builder_set_member_name(b, "torch");
        if (r->torch) {
            JsonNode *n = json_node_new(JSON_NODE_OBJECT);
            json_node_set_object(n, r->torch);
            json_builder_add_value(b, n);
        } else {
            json_builder_add_string_value(b, r->torch_error);
        }
        NUM("torch_describe_ms", torch_ms);
        NUM("speedup_vs_torch", torch_ms / r->describe_ms);
        NUM("torch_encode_ms_per_image", obj_double(r->torch, "encode_ms_per_image"));
        NUM("torch_prefill_ms", obj_double(r->torch, "prefill_ms"));
        NUM("torch_decode_ms_per_token", obj_double(r->torch, "decode_ms_per_token"));
        if (a->torch_compile) {
            NUM("torch_compile_describe_ms", torchc_ms);
            NUM("speedup_vs_torch_compile", torchc_ms / r->describe_ms);
        }
    }
#undef NUM
    json_builder_end_object(b);
    cl_cli_print_json(b);
}

static void print_bench_text(const BenchArgs *a, const ClBackend *be, const BenchResult *r)
{
    g_autofree char *label = a->model
                                 ? g_strdup_printf("model %s", a->model)
                                 : g_strdup_printf("preset %s", a->preset ? a->preset : "tiny");
    const char *variant = cl_sve_variant_name(a->cfg.sve_variant);
    const int tokens = a->tokens;
    JsonObject *torch = r->torch;
    double torch_ms = obj_double(torch, "describe_ms");
    double torchc_ms = obj_double(r->torchc, "describe_ms");
    if (r->gpu)
        printf("ChangeLens bench: %s, SVE %s, cuda on %s (%s products)\n", label, variant, r->gpu,
               r->tf32 ? "TF32" : "f32");
    else
        printf("ChangeLens bench: %s, SVE %s, %s, %d threads' worth of cores\n", label, variant,
               cl_backend_name(be), a->threads ? a->threads : (int)g_get_num_processors());
    printf("  describe = %d images + prefill of %d tokens + %d generated tokens (median of %d)\n",
           r->n_images, r->prompt_tokens, tokens, a->repeat);
    double te = obj_double(torch, "encode_ms_per_image"), tp = obj_double(torch, "prefill_ms"),
           td = obj_double(torch, "decode_ms_per_token");
    double ours_tok_ms = tokens > 1 ? r->decode_ms / (tokens - 1) : NAN;
    const char *rows[4] = { "encode ms / image", "prefill ms", "decode ms / token",
                            "describe ms (total)" };
    const double ours[4] = { r->encode_ms, r->prefill_ms, ours_tok_ms, r->describe_ms };
    const double peer[4] = { te, tp, td, torch_ms };
    if (torch) {
        printf("  %-28s %10s %12s %10s\n", "", "ChangeLens", "PyTorch", "ratio");
        for (int i = 0; i < 4; i++)
            printf("  %-28s %10.1f %12.1f %9.2fx\n", rows[i], ours[i], peer[i], peer[i] / ours[i]);
    } else { /* no peer: no columns of NaN */
        printf("  %-28s %10s\n", "", "ChangeLens");
        for (int i = 0; i < 4; i++)
            printf("  %-28s %10.1f\n", rows[i], ours[i]);
    }
    if (a->torch_compile)
        printf("  %-28s %10.1f %12.1f %9.2fx\n", "describe ms vs torch.compile", r->describe_ms,
               torchc_ms, torchc_ms / r->describe_ms);
    printf("  decode tokens/s %.1f, peak RSS %.0f MB\n", r->decode_tps, r->peak_rss_mb);
    if (r->gpu) {
        printf("  cuBLAS sgemm peak %.1f TFLOP/s (%s, measured here); encoder %.2f TFLOP/s = "
               "%.1f %% of peak\n",
               r->peak / 1e3, r->tf32 ? "TF32" : "f32", r->enc_gflops / 1e3,
               100 * r->enc_gflops / r->peak);
        printf("  device copy %.0f GB/s (read + write, measured here); a decode step streams "
               "the decoder's weights at %.0f GB/s = %.1f %% of it\n",
               r->copy_gbs, r->dec_gbs, 100 * r->dec_gbs / r->copy_gbs);
    } else {
        printf("  sgemm peak %.1f GFLOP/s (OpenBLAS %s kernels%s); encoder %.1f GFLOP/s = "
               "%.0f %% of peak\n",
               r->peak, cl_blas_kernels(),
               cl_blas_kernels_rechosen() ? ", re-chosen: the library fell back to Prescott" : "",
               r->enc_gflops, 100 * r->enc_gflops / r->peak);
    }
    if (a->cfg.enc_stem_effnet)
        printf("  (the encoder's figure counts its blocks' products alone: the EfficientNet-Lite0 "
               "stem's, on the CPU, are in its time but not in its FLOPs)\n");
    if (a->vs_torch && !torch)
        printf("  PyTorch peer: %s\n", r->torch_error);
    else if (torch)
        printf("  PyTorch %s, %d threads\n",
               json_object_has_member(torch, "torch_version")
                   ? json_object_get_string_member(torch, "torch_version")
                   : "?",
               json_object_has_member(torch, "threads")
                   ? (int)json_object_get_int_member(torch, "threads")
                   : 0);
}

int cl_cli_bench(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--casedb") == 0) {
#ifdef CL_ENGINE_ONLY
            return cl_cli_usage_error(argv[0], "--casedb: the engine-only program has no case "
                                               "database (changelens-cli bench --casedb has)");
#else
            return cl_cli_bench_casedb(argc, argv);
#endif
        } else if (strcmp(argv[i], "--train") == 0)
            return cl_cli_bench_train(argc, argv);
        else if (strcmp(argv[i], "--long") == 0)
            return cl_cli_bench_long(argc, argv);
        else if (strcmp(argv[i], "--decoder") == 0 || g_str_has_prefix(argv[i], "--decoder="))
            return cl_cli_bench_decoder(argc, argv);
    g_auto(BenchArgs) a = { 0 };
    int rc = parse_bench_args(argc, argv, &a);
    if (rc >= 0)
        return rc;

    g_autoptr(GError) err = NULL;
    g_autofree char *notice = NULL;
    g_autoptr(ClBackend) be = NULL;
    if (a.threads > 0 && (!a.device || strcmp(a.device, "cpu") == 0))
        be = cl_backend_cpu_new(a.threads);
    else
        be = cl_backend_new(a.device ? a.device : "cpu", &notice, &err);
    if (!be) {
        fprintf(stderr, PROG ": %s\n", err->message);
        return 1;
    }
    if (notice)
        fprintf(stderr, "%s\n", notice);

    g_auto(BenchResult) r = { 0 };
    r.gpu = cl_backend_cuda_device_name(be);
    r.tf32 = r.gpu && cl_backend_cuda_tf32(be);
    g_autoptr(ClModel) model = NULL;
    if (a.model) { /* before the peaks: they are measured at its widths */
        if (!(model = cl_model_load(a.model, &err))) {
            fprintf(stderr, PROG ": %s\n", err->message);
            return 1;
        }
        a.cfg = model->config;
    }
    if (!a.json)
        fprintf(stderr, "bench: measuring %s peak…\n", r.gpu ? "cuBLAS sgemm and copy" : "sgemm");
    r.peak = r.gpu ? cuda_peak_gflops(be, &a.cfg) : sgemm_peak_gflops(&a.cfg);
    r.copy_gbs = r.gpu ? cuda_copy_gbs(be) : NAN;

    if (!model && !a.json)
        fprintf(stderr, "bench: initialising a random %s model…\n", a.preset ? a.preset : "tiny");
    if (!model && !(model = cl_model_new_random(&a.cfg, 1, &err))) {
        fprintf(stderr, PROG ": %s\n", err->message);
        return 1;
    }
    g_auto(BenchInput) in = { 0 };
    bench_input_init(&in, model);
    if (!time_describes(be, model, &in, a.tokens, a.repeat, &r, &err)) {
        fprintf(stderr, PROG ": %s\n", err->message);
        return 1;
    }
    if (a.vs_torch && model->config.enc_stem_effnet)
        r.torch_error = g_strdup("the PyTorch peer (tests/reference/bench_torch.py) has no "
                                 "EfficientNet-Lite0 stem: not run");
    else if (a.vs_torch && model->quant)
        r.torch_error = g_strdup("the PyTorch peer reads f32 weights; this model keeps its "
                                 "decoder's matrices quantized: not run");
    else if (a.vs_torch)
        run_torch_peer(&a, model, &in, &r);
    if (a.json)
        print_bench_json(&a, be, &r);
    else
        print_bench_text(&a, be, &r);
    return 0;
}
