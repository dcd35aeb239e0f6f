/* cli-bench-decoder.c - `changelens-cli bench --decoder FILE.gguf [--vs-llama] [--as TYPE]`: a
 * GGUF language model's prefill and decode speed (the weights kept quantized), llama.cpp on the
 * same file in the same run with rounds alternating, and the decode step's bytes against the
 * machine's measured memory bandwidth; --as first has llama.cpp requantize the file to another
 * weight type (the registry's SmolLM2 is Q4_1 only). */
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "model/decoder.h"
#include "model/gguf-model.h"
#include "nn/threadpool.h"

typedef struct {
    char *path, *as;
    gint64 threads, prompt, gen, rounds;
    gboolean vs_llama, json;
} DecBenchArgs;

/* ---- memory bandwidth: every thread sums its part of a 256 MiB buffer ---- */

typedef struct {
    const float *buf;
    size_t n;
    double sums[64];
    int parts;
} BwCtx;

static void bw_sum(void *p, int begin, int end)
{
    BwCtx *c = p;
    for (int part = begin; part < end; part++) {
        const float *x = c->buf + c->n / c->parts * part;
        size_t n = c->n / c->parts;
        float acc[16] = { 0 };
        for (size_t i = 0; i + 16 <= n; i += 16)
            for (int j = 0; j < 16; j++)
                acc[j] += x[i + j];
        double s = 0;
        for (int j = 0; j < 16; j++)
            s += acc[j];
        c->sums[part] = s;
    }
}

/* GB/s of reading memory with `threads` threads (best of 5). */
static double measure_bandwidth(int threads)
{
    const size_t n = (size_t)64 << 20; /* 256 MiB of floats */
    float *buf = g_new(float, n);
    for (size_t i = 0; i < n; i++)
        buf[i] = (float)(i & 7);
    ClThreadPool *pool = cl_threadpool_new(threads);
    BwCtx c = { buf, n, { 0 }, MIN(threads, 64) };
    double best = 0;
    for (int r = 0; r < 5; r++) {
        gint64 t0 = g_get_monotonic_time();
        cl_threadpool_run(pool, c.parts, 1, bw_sum, &c);
        double s = (double)(g_get_monotonic_time() - t0) / 1e6;
        best = MAX(best, (double)n * sizeof(float) / s / 1e9);
    }
    cl_threadpool_free(pool);
    g_free(buf);
    return best;
}

/* ---- ours ---- */

/* prefill of a.prompt tokens, then a.gen decode steps, as tokens per second */
static gboolean ours_round(ClBackend *be, const ClModel *m, const DecBenchArgs *a, double *pp,
                           double *tg, GError **error)
{
    int V = m->config.vocab_size;
    g_autofree gint32 *ids = g_new(gint32, a->prompt);
    for (gint64 i = 0; i < a->prompt; i++)
        ids[i] = CL_TOKEN_FIRST_MERGE + (gint32)(i % 1000);
    g_autofree float *logits = g_new(float, V);
    g_autoptr(ClKVCache) cache = cl_kv_cache_new(m, (int)(a->prompt + a->gen + 1));
    if (!cache) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY, "no memory for the cache");
        return FALSE;
    }
    gint64 t0 = g_get_monotonic_time();
    if (!cl_decoder_forward(be, m, cache, ids, (int)a->prompt, NULL, logits, NULL, NULL, NULL,
                            error))
        return FALSE;
    gint64 t1 = g_get_monotonic_time();
    cl_kv_cache_truncate(cache, 1);
    gint64 t2 = g_get_monotonic_time();
    for (gint64 i = 0; i < a->gen; i++) {
        gint32 id = CL_TOKEN_FIRST_MERGE + (gint32)(i % 1000);
        if (!cl_decoder_forward(be, m, cache, &id, 1, NULL, logits, NULL, NULL, NULL, error))
            return FALSE;
    }
    gint64 t3 = g_get_monotonic_time();
    *pp = (double)a->prompt / ((double)(t1 - t0) / 1e6);
    *tg = (double)a->gen / ((double)(t3 - t2) / 1e6);
    return TRUE;
}

/* ---- llama.cpp (tests/reference/llama_peer.py --bench) ---- */

static char *peer_script(void)
{
    return g_build_filename(cl_cli_source_dir(), "tests", "reference", "llama_peer.py", NULL);
}

/* The file requantized by the peer to `type` at `out`. */
static gboolean llama_requantize(const char *path, const char *type, const char *out,
                                 GError **error)
{
    g_autofree char *py = cl_cli_torch_python(), *script = peer_script();
    const char *argv[] = { py, script, "--model", path, "--quantize", type, "--out", out, NULL };
    g_autofree char *err_text = NULL;
    int status = 0;
    if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL,
                      &err_text, &status, error))
        return FALSE;
    if (!g_spawn_check_wait_status(status, NULL)) {
        const char *last = err_text ? strrchr(g_strchomp(err_text), '\n') : NULL;
        g_set_error(error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                    "llama.cpp could not requantize %s to %s (%s; tools/peer-venv.sh builds the "
                    "peer): %.300s",
                    path, type, py, last ? last + 1 : (err_text ? err_text : ""));
        return FALSE;
    }
    return TRUE;
}

static gboolean llama_round(const DecBenchArgs *a, double *pp, double *tg, GError **error)
{
    g_autofree char *py = cl_cli_torch_python(); /* BUILD/venv's python: the peers' venv */
    g_autofree char *script = peer_script();
    g_autofree char *th = g_strdup_printf("%" G_GINT64_FORMAT, a->threads);
    g_autofree char *pr = g_strdup_printf("%" G_GINT64_FORMAT, a->prompt);
    g_autofree char *ge = g_strdup_printf("%" G_GINT64_FORMAT, a->gen);
    const char *argv[] = { py,        script,         "--model", a->path,
                           "--bench", "--threads",    th,        "--prompt-tokens",
                           pr,        "--gen-tokens", ge,        NULL };
    g_autofree char *out = NULL, *err_text = NULL;
    int status = 0;
    if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err_text,
                      &status, error))
        return FALSE;
    if (!g_spawn_check_wait_status(status, NULL)) {
        g_set_error(error, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                    "the llama.cpp peer failed (%s; tools/peer-venv.sh builds it): %.300s", py,
                    err_text ? err_text : "");
        return FALSE;
    }
    g_autoptr(JsonParser) p = json_parser_new();
    if (!json_parser_load_from_data(p, out, -1, error))
        return FALSE;
    JsonArray *rounds =
        json_object_get_array_member(json_node_get_object(json_parser_get_root(p)), "rounds");
    JsonObject *r0 = json_array_get_object_element(rounds, 0);
    *pp = json_object_get_double_member(r0, "prefill_tok_s");
    *tg = json_object_get_double_member(r0, "decode_tok_s");
    return TRUE;
}

static int parse_args(int argc, char **argv, DecBenchArgs *a)
{
    a->threads = 2, a->prompt = 512, a->gen = 128, a->rounds = 3;
    const ClCliIntOption ints[] = {
        { "threads", 0, 1, 256, &a->threads },
        { "prompt-tokens", 0, 1, CL_GGUF_MAX_LEN / 2, &a->prompt },
        { "gen-tokens", 0, 1, CL_GGUF_MAX_LEN / 2, &a->gen },
        { "rounds", 0, 1, 100, &a->rounds },
        { NULL },
    };
    GOptionEntry entries[] = {
        { "decoder", 0, 0, G_OPTION_ARG_FILENAME, &a->path, "The GGUF language model", "FILE" },
        { "vs-llama", 0, 0, G_OPTION_ARG_NONE, &a->vs_llama,
          "llama.cpp (llama-cpp-python in BUILD/venv) on the same file, rounds alternating", NULL },
        { "as", 0, 0, G_OPTION_ARG_STRING, &a->as,
          "First requantize the file with llama.cpp to f32, q8_0, q4_1, f16 or bf16 (a temporary copy)",
          "TYPE" },
        CL_CLI_INT_ENTRY("threads", 0, "Threads for both (2)", "N"),
        CL_CLI_INT_ENTRY("prompt-tokens", 0, "Prefill length (512)", "N"),
        CL_CLI_INT_ENTRY("gen-tokens", 0, "Decode steps (128)", "N"),
        CL_CLI_INT_ENTRY("rounds", 0, "Rounds (3)", "N"),
        { "json", 0, 0, G_OPTION_ARG_NONE, &a->json, "One JSON object", NULL },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("--decoder FILE.gguf");
    cl_cli_add_entries(ctx, entries, ints);
    if (!cl_cli_parse_options(ctx, argv[0], &argc, &argv))
        return 2;
    if (!a->path)
        return cl_cli_usage_error(argv[0], "--decoder FILE.gguf is required");
    return -1;
}

/* the requantized copy's folder, removed with what it holds */
static void remove_tmp(char **dir)
{
    if (!*dir)
        return;
    g_autoptr(GDir) d = g_dir_open(*dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *p = g_build_filename(*dir, name, NULL);
        g_remove(p);
    }
    g_rmdir(*dir);
    g_free(*dir);
}

int cl_cli_bench_decoder(int argc, char **argv)
{
    DecBenchArgs a = { 0 };
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    g_autoptr(GError) err = NULL;
    __attribute__((cleanup(remove_tmp))) char *tmpdir = NULL;
    if (a.as) {
        if (!(tmpdir = g_dir_make_tmp("changelens-bench-XXXXXX", &err))) {
            fprintf(stderr, "%s: %s\n", argv[0], err->message);
            return 1;
        }
        g_autofree char *base = g_path_get_basename(a.path);
        g_autofree char *name = g_strdup_printf("%s.%s.gguf", base, a.as);
        char *out = g_build_filename(tmpdir, name, NULL);
        fprintf(stderr, "requantizing %s to %s with llama.cpp…\n", a.path, a.as);
        if (!llama_requantize(a.path, a.as, out, &err)) {
            fprintf(stderr, "%s: %s\n", argv[0], err->message);
            g_free(out);
            return 1;
        }
        g_free(a.path);
        a.path = out;
    }
    g_autoptr(ClModel) m = cl_model_load_gguf(a.path, 0, TRUE, &err);
    if (!m) {
        fprintf(stderr, "%s: %s\n", argv[0], err->message);
        return 1;
    }
    g_autoptr(ClBackend) be = cl_backend_cpu_new((int)a.threads);
    double bw = measure_bandwidth((int)a.threads);
    /* a decode step reads every matrix once (the quantized ones as stored), plus the norms */
    const ClModelConfig *mc = &m->config;
    double E = mc->dec_dim, KV = (double)mc->dec_kv_heads * (mc->dec_dim / mc->dec_heads);
    double f32_matrices =
        (mc->dec_depth * (2 * E * E + 2 * E * KV + 3 * E * mc->dec_mlp) + E * mc->vocab_size) *
        sizeof(float);
    double step_bytes = (m->quant ? (double)m->quant->n_bytes : f32_matrices) +
                        (double)mc->dec_depth * 2 * mc->dec_dim * sizeof(float);
    double sum[4] = { 0 };
    int n_llama = 0;
    for (gint64 r = 0; r < a.rounds; r++) {
        double pp, tg, lpp = 0, ltg = 0;
        if (!ours_round(be, m, &a, &pp, &tg, &err)) {
            fprintf(stderr, "%s: %s\n", argv[0], err->message);
            return 1;
        }
        if (a.vs_llama) {
            if (!llama_round(&a, &lpp, &ltg, &err)) {
                fprintf(stderr, "%s: %s\n", argv[0], err->message);
                return 1;
            }
            n_llama++;
        }
        sum[0] += pp, sum[1] += tg, sum[2] += lpp, sum[3] += ltg;
        if (!a.json)
            printf("round %" G_GINT64_FORMAT ": changelens prefill %.0f tok/s, decode %.1f tok/s"
                   "%s",
                   r + 1, pp, tg, a.vs_llama ? "" : "\n");
        if (!a.json && a.vs_llama)
            printf("; llama.cpp prefill %.0f tok/s, decode %.1f tok/s\n", lpp, ltg);
    }
    double R = (double)a.rounds, tg = sum[1] / R;
    if (a.json) {
        printf("{\"model\": \"%s\", \"threads\": %" G_GINT64_FORMAT ", \"kernels\": \"%s\", "
               "\"prefill_tok_s\": %.1f, \"decode_tok_s\": %.2f, \"llama_prefill_tok_s\": %.1f, "
               "\"llama_decode_tok_s\": %.2f, \"bandwidth_gb_s\": %.2f, "
               "\"decode_bytes_per_token\": %.0f, \"bandwidth_fraction\": %.3f}\n",
               m->sha256, a.threads, cl_quant_kernels(), sum[0] / R, tg, n_llama ? sum[2] / R : 0,
               n_llama ? sum[3] / R : 0, bw, step_bytes, tg * step_bytes / 1e9 / bw);
        return 0;
    }
    printf("mean: changelens prefill %.0f tok/s, decode %.1f tok/s (%s kernels, %" G_GINT64_FORMAT
           " threads)\n",
           sum[0] / R, tg, cl_quant_kernels(), a.threads);
    if (n_llama)
        printf("mean: llama.cpp prefill %.0f tok/s, decode %.1f tok/s; ratio prefill %.2f, "
               "decode %.2f\n",
               sum[2] / R, sum[3] / R, sum[0] / MAX(sum[2], 1e-9), sum[1] / MAX(sum[3], 1e-9));
    printf("memory: %.1f GB/s read (%" G_GINT64_FORMAT " threads); a decode step reads %.1f MB: "
           "%.0f tok/s at most, %.0f %% of it reached\n",
           bw, a.threads, step_bytes / 1e6, bw * 1e9 / step_bytes,
           100.0 * tg * step_bytes / 1e9 / bw);
    return 0;
}
