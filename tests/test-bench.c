/* test-bench.c - `changelens-cli bench` runs and reports every figure README's bench section names, with
 * sane values (not speed targets: those are read off the benchmark, never asserted in tests). */
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>

#include <glib.h>

#include "fixtures.h"

static void test_bench_tiny_json(void)
{
    const char *args[] = { "bench",    "--preset", "tiny",   "--tokens", "4",
                           "--repeat", "1",        "--json", NULL };
    g_autoptr(JsonNode) root = cl_fixture_cli_json(args);
    JsonObject *o = json_node_get_object(root);
    const char *keys[] = { "encode_ms_per_image", "prefill_ms",        "decode_tokens_per_s",
                           "peak_rss_mb",         "sgemm_peak_gflops", "encoder_sgemm_fraction",
                           "describe_ms" };
    for (gsize i = 0; i < G_N_ELEMENTS(keys); i++) {
        g_assert_true(json_object_has_member(o, keys[i]));
        double v = json_object_get_double_member(o, keys[i]);
        g_test_message("%s = %g", keys[i], v);
        g_assert_true(isfinite(v) && v > 0);
    }
    /* the encoder cannot beat the machine's own sgemm peak by much: a fraction far above 1
     * would mean the FLOP count or the timing is wrong */
    g_assert_cmpfloat(json_object_get_double_member(o, "encoder_sgemm_fraction"), <, 1.5);
    g_assert_cmpint(json_object_get_int_member(o, "gen_tokens"), ==, 4);
}

/* `bench --model FILE`: a shipped model's own weights (the default model, its decoder Q8_0),
 * the file named in the report; --model with --preset is a usage error */
static void test_bench_model_json(void)
{
    g_autofree char *model = g_build_filename(g_getenv("CL_SOURCE_ROOT"), "data", "models",
                                              "changelens-default.safetensors", NULL);
    const char *args[] = { "bench",    "--model", model,    "--tokens", "4",
                           "--repeat", "1",       "--json", NULL };
    g_autoptr(JsonNode) root = cl_fixture_cli_json(args);
    JsonObject *o = json_node_get_object(root);
    g_assert_cmpstr(json_object_get_string_member(o, "model"), ==, model);
    g_assert_false(json_object_has_member(o, "preset"));
    double ms = json_object_get_double_member(o, "describe_ms");
    g_test_message("describe_ms = %g", ms);
    g_assert_true(isfinite(ms) && ms > 0);
    g_assert_cmpint(json_object_get_int_member(o, "gen_tokens"), ==, 4);

    const char *argv[] = {
        g_getenv("CL_CLI"), "bench", "--model", model, "--preset", "base", NULL
    };
    g_autofree char *out = NULL, *err = NULL;
    int status = 0;
    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                               &status, NULL));
    g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 2);
    g_assert_nonnull(strstr(err, "exclude each other"));
}

static void test_bench_bad_args(void)
{
    const char *argv[] = { g_getenv("CL_CLI"), "bench", "--preset", "huge", NULL };
    g_autofree char *out = NULL, *err = NULL;
    int status = 0;
    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                               &status, NULL));
    g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 2);
    g_assert_nonnull(strstr(err, "huge"));
}

/* `bench --casedb` on a small database: every figure present and sane, every search answered */
static void test_bench_casedb_json(void)
{
    const char *args[] = {
        "bench", "--casedb", "--cases", "200", "--queries", "50", "--json", NULL
    };
    g_autoptr(JsonNode) root = cl_fixture_cli_json(args);
    JsonObject *o = json_node_get_object(root);
    const char *keys[] = { "insert_cases_per_s", "search_p50_ms", "search_p95_ms", "db_mb" };
    for (gsize i = 0; i < G_N_ELEMENTS(keys); i++) {
        double v = json_object_get_double_member(o, keys[i]);
        g_test_message("%s = %g", keys[i], v);
        g_assert_true(isfinite(v) && v > 0);
    }
    g_assert_cmpint(json_object_get_int_member(o, "listed_cases"), ==, 200);
    /* the queries are made of the cases' own words: nearly all find something (a random pair of
     * words need not occur together in 200 cases) */
    g_assert_cmpint(json_object_get_int_member(o, "search_queries_with_hits"), >=, 40);
    g_assert_cmpfloat(json_object_get_double_member(o, "search_p50_ms"), <=,
                      json_object_get_double_member(o, "search_p95_ms"));
}

/* `bench --train`: a timed training step through the real trainer, every figure present */
static void test_bench_train_json(void)
{
    const char *args[] = { "bench", "--train",  "--batch", "2",      "--repeat",
                           "1",     "--warmup", "0",       "--json", NULL };
    g_autoptr(JsonNode) root = cl_fixture_cli_json(args);
    JsonObject *o = json_node_get_object(root);
    double ms = json_object_get_double_member(o, "train_step_ms");
    double loss = json_object_get_double_member(o, "first_loss");
    g_test_message("train step %.1f ms, first loss %.4f", ms, loss);
    g_assert_true(isfinite(ms) && ms > 0);
    /* an untrained model's loss is near ln(vocabulary): far from 0 */
    g_assert_true(isfinite(loss) && loss > 3);
    g_assert_true(json_node_is_null(json_object_get_member(o, "torch_train_step_ms")));
    /* which OpenBLAS kernels ran the products (core/nn/blas.c) */
    const char *k = json_object_get_string_member(o, "blas_kernels");
    g_assert_true(k && *k);
    g_test_message("OpenBLAS kernels %s", k);
}

/* `bench --train --config`: the step runs on the given config, which the JSON echoes back */
static void test_bench_train_config(void)
{
    const char *cfg =
        "{\"image_size\": 64, \"patch_size\": 16, \"enc_dim\": 64, \"enc_depth\": 1, "
        "\"enc_heads\": 2, \"enc_mlp\": 128, \"merger_hidden\": 128, \"dec_dim\": 64, "
        "\"dec_depth\": 1, \"dec_heads\": 2, \"dec_kv_heads\": 1, \"dec_mlp\": 128, "
        "\"vocab_size\": 512, \"max_len\": 1024}";
    const char *args[] = { "bench",    "--train", "--config", cfg, "--batch", "2",
                           "--repeat", "1",       "--warmup", "0", "--json",  NULL };
    g_autoptr(JsonNode) root = cl_fixture_cli_json(args);
    JsonObject *o = json_node_get_object(root);
    g_assert_true(json_node_is_null(json_object_get_member(o, "preset")));
    JsonObject *c = json_object_get_object_member(o, "config");
    g_assert_cmpint(json_object_get_int_member(c, "enc_depth"), ==, 1);
    g_assert_cmpint(json_object_get_int_member(c, "vocab_size"), ==, 512);
    double loss = json_object_get_double_member(o, "first_loss");
    /* near ln 512 = 6.24 for an untrained model */
    g_assert_true(isfinite(loss) && loss > 4 && loss < 9);
}

/* `bench --train --model FILE --rounds 2`: the step starts from the file's weights and config
 * (an f16 cross_ffn model, so its first loss is the file's, not a preset's), and each round's
 * median is reported */
static void test_bench_train_model_rounds(void)
{
    g_autofree char *dir = cl_fixture_tmpdir("bench-model");
    g_autofree char *cfg_path = g_build_filename(dir, "config.json", NULL);
    g_autofree char *model = g_build_filename(dir, "m.safetensors", NULL);
    g_assert_true(g_file_set_contents(
        cfg_path,
        "{\"image_size\": 64, \"patch_size\": 16, \"enc_dim\": 64, \"enc_depth\": 1, "
        "\"enc_heads\": 2, \"enc_mlp\": 128, \"merger_hidden\": 128, \"dec_dim\": 64, "
        "\"dec_depth\": 2, \"dec_heads\": 2, \"dec_kv_heads\": 1, \"dec_mlp\": 128, "
        "\"vocab_size\": 300, \"max_len\": 1024}",
        -1, NULL));
    const char *init[] = { "model",     "init",    "--config", cfg_path, "--variant",
                           "cross_ffn", "--dtype", "f16",      "--seed", "3",
                           "--out",     model,     NULL };
    g_assert_cmpint(cl_fixture_run_cli(init, NULL), ==, 0);
    const char *args[] = { "bench",    "--train",  "--model", model,      "--batch",
                           "2",        "--repeat", "1",       "--warmup", "0",
                           "--rounds", "2",        "--json",  NULL };
    g_autoptr(JsonNode) root = cl_fixture_cli_json(args);
    JsonObject *o = json_node_get_object(root);
    g_assert_cmpstr(json_object_get_string_member(o, "model"), ==, model);
    g_assert_true(json_node_is_null(json_object_get_member(o, "preset")));
    JsonObject *c = json_object_get_object_member(o, "config");
    g_assert_cmpint(json_object_get_int_member(c, "dec_depth"), ==, 2);
    g_assert_cmpstr(
        json_object_get_string_member(json_object_get_object_member(c, "sve"), "variant"), ==,
        "cross_ffn");
    g_assert_cmpint(json_object_get_int_member(o, "rounds"), ==, 2);
    JsonArray *r = json_object_get_array_member(o, "round_train_step_ms");
    g_assert_cmpint(json_array_get_length(r), ==, 2);
    double ms = json_object_get_double_member(o, "train_step_ms");
    double a0 = json_array_get_double_element(r, 0), a1 = json_array_get_double_element(r, 1);
    g_assert_true(a0 > 0 && a1 > 0);
    /* the median of two rounds is their mean */
    g_assert_cmpfloat(fabs(ms - 0.5 * (a0 + a1)), <=, 1e-9 * ms);
    /* no peer: the ratios are null */
    JsonArray *sp = json_object_get_array_member(o, "round_speedups_vs_torch");
    g_assert_cmpint(json_array_get_length(sp), ==, 2);
    g_assert_true(json_node_is_null(json_array_get_element(sp, 0)));
    double loss = json_object_get_double_member(o, "first_loss");
    g_assert_true(isfinite(loss) && loss > 3);

    const char *bad[] = { "bench", "--train", "--model", model, "--preset", "tiny", NULL };
    g_autofree char *err = NULL;
    g_assert_cmpint(cl_fixture_run_cli(bad, &err), ==, 2);
    g_assert_nonnull(strstr(err, "one of --preset, --config and --model"));
    g_autofree char *missing = g_build_filename(dir, "none.safetensors", NULL);
    const char *bad2[] = { "bench", "--train", "--model", missing, NULL };
    g_clear_pointer(&err, g_free);
    g_assert_cmpint(cl_fixture_run_cli(bad2, &err), ==, 2);
    g_assert_nonnull(strstr(err, "--model"));
    cl_fixture_rmdir(dir);
}

/* bench --long: one row per option, image count and output length, with the fields README's
 * bench section names; the insertion KV cache grows with the images, PVM adds its visual keys on top, CASA's
 * holds less. */
static void test_bench_long_json(void)
{
    const char *args[] = { "bench", "--long", "--quick", "--json", NULL };
    g_autoptr(JsonNode) root = cl_fixture_cli_json(args);
    g_assert_true(JSON_NODE_HOLDS_ARRAY(root));
    JsonArray *a = json_node_get_array(root);
    g_assert_cmpint(json_array_get_length(a), ==, 6 * 2 * 2); /* options × images × gen */
    /* [insertion | pvm | casa | stream | hybrid | vist][images 2 | 8] at gen 32 */
    double mb[6][2] = { { 0 } };
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonObject *o = json_array_get_object_element(a, i);
        const char *opt = json_object_get_string_member(o, "option");
        int images = (int)json_object_get_int_member(o, "images");
        int gen = (int)json_object_get_int_member(o, "gen_tokens");
        double peak = json_object_get_double_member(o, "peak_mb");
        double ms = json_object_get_double_member(o, "ms_per_token");
        g_test_message("%s images %d gen %d: %.2f MB, %.3f ms/token", opt, images, gen, peak, ms);
        g_assert_true(isfinite(peak) && peak > 0 && isfinite(ms) && ms > 0);
        g_assert_cmpfloat(json_object_get_double_member(o, "prefill_ms"), >, 0);
        g_assert_cmpint(json_object_get_int_member(o, "prompt_tokens"), >, images * 25);
        if (gen == 32)
            mb[!strcmp(opt, "pvm")      ? 1
               : !strcmp(opt, "casa")   ? 2
               : !strcmp(opt, "stream") ? 3
               : !strcmp(opt, "hybrid") ? 4
               : !strcmp(opt, "vist")   ? 5
                                        : 0][images == 8] = peak;
    }
    g_assert_cmpfloat(mb[0][1], >, mb[0][0]);
    g_assert_cmpfloat(mb[1][0], >, mb[0][0]);
    g_assert_cmpfloat(mb[1][1], >, mb[0][1]);
    /* CASA: the cache holds the text alone, however many images */
    g_assert_cmpfloat(mb[2][1], <, mb[0][1]);
    /* VIST2: past a few chunks of output its cache holds a quarter of insertion's text */
    const char *long_out[] = { "bench", "--long", "--options", "insertion,vist", "--images",
                               "2",     "--gen",  "600",       "--json",         NULL };
    g_autoptr(JsonNode) lo = cl_fixture_cli_json(long_out);
    JsonArray *la = json_node_get_array(lo);
    g_assert_cmpint(json_array_get_length(la), ==, 2);
    const double ins =
                     json_object_get_double_member(json_array_get_object_element(la, 0), "peak_mb"),
                 vis =
                     json_object_get_double_member(json_array_get_object_element(la, 1), "peak_mb");
    g_test_message("600 generated tokens after 2 images: insertion %.2f MB, vist %.2f MB", ins,
                   vis);
    g_assert_cmpfloat(vis, <, 0.8 * ins);
    /* the sparse prefill: a row of its own, the same state */
    const char *sp[] = { "bench", "--long", "--options", "insertion,sparse", "--images",
                         "8",     "--gen",  "4",         "--json",           NULL };
    g_autoptr(JsonNode) spn = cl_fixture_cli_json(sp);
    JsonArray *spa = json_node_get_array(spn);
    g_assert_cmpint(json_array_get_length(spa), ==, 2);
    g_assert_cmpstr(json_object_get_string_member(json_array_get_object_element(spa, 1), "option"),
                    ==, "sparse");
    g_assert_cmpfloat(
        json_object_get_double_member(json_array_get_object_element(spa, 0), "peak_mb"), ==,
        json_object_get_double_member(json_array_get_object_element(spa, 1), "peak_mb"));
    const char *bad[] = { "bench", "--long", "--options", "vist2", NULL };
    g_autofree char *err = NULL;
    g_assert_cmpint(cl_fixture_run_cli(bad, &err), ==, 2);
    g_assert_nonnull(strstr(err, "unknown option 'vist2'"));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/bench/tiny-json", test_bench_tiny_json);
    g_test_add_func("/bench/bad-args", test_bench_bad_args);
    g_test_add_func("/bench/model-json", test_bench_model_json);
    g_test_add_func("/bench/long-json", test_bench_long_json);
    g_test_add_func("/bench/casedb-json", test_bench_casedb_json);
    g_test_add_func("/bench/train-json", test_bench_train_json);
    g_test_add_func("/bench/train-config", test_bench_train_config);
    g_test_add_func("/bench/train-model-rounds", test_bench_train_model_rounds);
    return g_test_run();
}
