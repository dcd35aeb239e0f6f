/* test-streaming.c - the streaming KV cache (sink + window in a ring, docs/MODEL.md §4.4):
 * equal to dense attention under the sink + window mask (a float64 reference),
 * the ordinary cache's results until the ring fills, memory that does not grow, generation past
 * max_len. */
#include <math.h>
#include <string.h>

#include <glib.h>

#include "nn/backend.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "model/model.h"
#include "refdec.h"

static ClBackend *be;

static ClModel *make_model(void)
{
    ClModelConfig cfg;
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_model_config_preset(&cfg, "tiny", &err));
    cfg.image_size = 32, cfg.patch_size = 8, cfg.enc_dim = 16, cfg.enc_depth = 1;
    cfg.enc_heads = 1, cfg.enc_mlp = 16, cfg.merger_hidden = 16;
    cfg.dec_dim = 32, cfg.dec_depth = 2, cfg.dec_heads = 4, cfg.dec_kv_heads = 2;
    cfg.dec_mlp = 48, cfg.vocab_size = 300, cfg.rope_base = 50.0, cfg.max_len = 16;
    ClModel *m = cl_model_new_random(&cfg, 9, &err);
    g_assert_no_error(err);
    ref_liven(m);
    return m;
}

typedef struct {
    int sink, window;
} Mask;

static gboolean sees(int t, int j, gpointer data)
{
    const Mask *mk = data;
    return j < mk->sink || t - j < mk->window;
}

/* logits (T, V): the decoder with position t attending to j <= t with j < sink or t − j < window */
static void ref_masked(const ClModel *m, const gint32 *ids, int T, int sink, int window,
                       double *logits)
{
    Mask mk = { sink, window };
    RefHooks hooks = { .sees = sees, .data = &mk };
    g_autofree double *x0 = ref_embed(m, ids, T, NULL);
    ref_decode_rows(m, x0, T, &hooks, logits);
}

enum { T = 60, SINK = 4, WINDOW = 9, V = 300 };

static void make_ids(gint32 *ids)
{
    GRand *r = g_rand_new_with_seed(21);
    for (int i = 0; i < T; i++)
        ids[i] = g_rand_int_range(r, 0, V);
    g_rand_free(r);
}

/* A prompt of 20 (more than sink + window: the prefill fills the ring then steps), then one
 * position per call: every position's logits against the masked dense reference. */
static void test_ring_equals_masked_dense(void)
{
    g_autoptr(ClModel) m = make_model();
    gint32 ids[T];
    make_ids(ids);
    g_autofree double *ref = g_new(double, (size_t)T * V);
    ref_masked(m, ids, T, SINK, WINDOW, ref);
    g_autoptr(ClKVCache) c = cl_kv_cache_new_streaming(m, SINK, WINDOW);
    g_autofree float *got = g_new(float, (size_t)T * V);
    g_autoptr(GError) err = NULL;
    const int head = 20;
    g_assert_true(cl_decoder_forward(be, m, c, ids, head, NULL, NULL, got, NULL, NULL, &err));
    for (int t = head; t < T; t++)
        g_assert_true(cl_decoder_forward(be, m, c, ids + t, 1, NULL, got + (size_t)t * V, NULL,
                                         NULL, NULL, &err));
    g_assert_no_error(err);
    g_assert_cmpint(cl_kv_cache_len(c), ==, T);
    double num = 0, den = 0;
    for (size_t i = 0; i < (size_t)T * V; i++) {
        num = MAX(num, fabs(got[i] - ref[i]));
        den = MAX(den, fabs(ref[i]));
    }
    g_test_message("streaming (sink %d, window %d, %d positions) against masked dense attention "
                   "in float64: %.2e of max |logit|",
                   SINK, WINDOW, T, num / den);
    g_assert_cmpfloat(num / den, <, 2e-5);
    /* and the mask matters: without it (dense over everything) the logits are elsewhere */
    g_autofree double *dense = g_new(double, (size_t)T * V);
    ref_masked(m, ids, T, T, T, dense);
    double far = 0;
    for (size_t i = (size_t)(SINK + WINDOW + 2) * V; i < (size_t)T * V; i++)
        far = MAX(far, fabs(got[i] - dense[i]));
    g_assert_cmpfloat(far / den, >, 1e-3);
}

/* Until the ring fills, a streaming cache is an ordinary one, bit for bit; its memory is that
 * of sink + window positions however far it goes. */
static void test_before_fill_and_memory(void)
{
    g_autoptr(ClModel) m = make_model();
    gint32 ids[T];
    make_ids(ids);
    g_autoptr(ClKVCache) s = cl_kv_cache_new_streaming(m, SINK, WINDOW);
    g_autoptr(ClKVCache) o = cl_kv_cache_new(m, T);
    g_autofree float *a = g_new(float, (size_t)(SINK + WINDOW) * V),
                                *b = g_new(float, (size_t)(SINK + WINDOW) * V);
    g_autoptr(GError) err = NULL;
    g_assert_true(
        cl_decoder_forward(be, m, s, ids, SINK + WINDOW, NULL, NULL, a, NULL, NULL, &err));
    g_assert_true(
        cl_decoder_forward(be, m, o, ids, SINK + WINDOW, NULL, NULL, b, NULL, NULL, &err));
    g_assert_cmpmem(a, (size_t)(SINK + WINDOW) * V * sizeof(float), b,
                    (size_t)(SINK + WINDOW) * V * sizeof(float));
    size_t before = cl_kv_cache_bytes(s);
    float l[V];
    for (int t = SINK + WINDOW; t < T; t++)
        g_assert_true(cl_decoder_forward(be, m, s, ids + t, 1, NULL, l, NULL, NULL, NULL, &err));
    g_assert_cmpuint(cl_kv_cache_bytes(s), ==, before);
    /* the same as an ordinary cache of sink + window positions after the same prefill */
    g_autoptr(ClKVCache) small = cl_kv_cache_new(m, SINK + WINDOW);
    g_assert_true(
        cl_decoder_forward(be, m, small, ids, SINK + WINDOW, NULL, l, NULL, NULL, NULL, &err));
    g_assert_cmpuint(cl_kv_cache_bytes(small), ==, before);
}

/* Generation with streaming caches goes past the model's max_len (16 here), greedy and beam. */
static void test_generate_past_max_len(void)
{
    g_autoptr(ClModel) m = make_model();
    gint32 ids[T]; /* the first 12 are the prompt */
    make_ids(ids);
    for (int beam = 1; beam <= 2; beam++) {
        ClGenerateOptions o;
        cl_generate_options_init(&o);
        o.max_new_tokens = 100;
        o.beam_size = beam;
        o.stream_sink = SINK;
        o.stream_window = WINDOW;
        ClGenerateResult r;
        g_autoptr(GError) err = NULL;
        gboolean ok = cl_generate(be, m, ids, 12, NULL, &o, &r, &err);
        g_assert_no_error(err);
        g_assert_true(ok);
        g_test_message("beam %d: %u tokens, stop %s", beam, r.ids->len,
                       cl_stop_reason_name(r.stop_reason));
        g_assert_true(r.stop_reason != CL_STOP_MAX_LEN);
        g_assert_cmpint(12 + (int)r.ids->len, >, 16);
        if (r.stop_reason == CL_STOP_MAX_TOKENS)
            g_assert_cmpuint(r.ids->len, ==, 100);
        cl_generate_result_clear(&r);
    }
}

/* ---- the hybrid: Gated DeltaNet layers between attention layers ------------------------------ */

static ClModel *hybrid_model(void)
{
    g_autoptr(ClModel) base = make_model();
    ClModelConfig cfg = base->config;
    cfg.dec_depth = 4;
    cfg.max_len = 256;
    g_assert_true(cl_config_set_hybrid(&cfg, 2)); /* layers 0, 2 attention; 1, 3 GDN */
    g_autoptr(GError) err = NULL;
    ClModel *m = cl_model_new_random(&cfg, 3, &err);
    g_assert_no_error(err);
    g_assert_null(m->w.dec[1].q);
    g_assert_nonnull(m->w.dec[1].gdn_q);
    /* lively projections: the random init's 0.02 leaves the layers near the identity */
    g_autoptr(GPtrArray) specs = cl_model_weight_specs(&m->config, &m->w);
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        if (s->ndim != 2 || strstr(s->name, "conv"))
            continue;
        float *p = *s->slot;
        GRand *r = g_rand_new_with_seed(g_str_hash(s->name));
        for (gint64 j = 0; j < cl_weight_spec_numel(s); j++)
            p[j] = (float)(g_rand_double_range(r, -1.0, 1.0) * sqrt(3.0 / (double)s->shape[1]));
        g_rand_free(r);
    }
    cl_model_weights_changed(m);
    return m;
}

/* The recurrent state carried between calls: a prefill in one pass (chunked GDN) equals the
 * same positions one at a time (the recurrence), and a cut prefill equals one pass. */
static void test_hybrid_split_equals_one_pass(void)
{
    g_autoptr(ClModel) m = hybrid_model();
    gint32 ids[T];
    make_ids(ids);
    const int n = 40;
    g_autofree float *one = g_new(float, (size_t)n * V), *step = g_new(float, V);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClKVCache) a = cl_kv_cache_new(m, n);
    g_assert_true(cl_decoder_forward(be, m, a, ids, n, NULL, NULL, one, NULL, NULL, &err));
    g_autoptr(ClKVCache) b = cl_kv_cache_new(m, n);
    double worst = 0;
    g_assert_true(cl_decoder_forward(be, m, b, ids, 13, NULL, step, NULL, NULL, NULL, &err));
    for (int i = 0; i < V; i++)
        worst = MAX(worst, fabs((double)step[i] - one[12 * V + i]));
    for (int t = 13; t < n; t++) {
        g_assert_true(cl_decoder_forward(be, m, b, ids + t, 1, NULL, step, NULL, NULL, NULL, &err));
        for (int i = 0; i < V; i++)
            worst = MAX(worst, fabs((double)step[i] - one[(size_t)t * V + i]));
    }
    g_assert_no_error(err);
    g_test_message("hybrid: a prefill cut at 13, then one position at a time, against one pass: "
                   "max |dlogit| %.2e",
                   worst);
    g_assert_cmpfloat(worst, <, 1e-4);
    /* truncating to 0 starts the state over: the same logits again */
    cl_kv_cache_truncate(b, 0);
    g_assert_true(cl_decoder_forward(be, m, b, ids, 13, NULL, step, NULL, NULL, NULL, &err));
    double again = 0;
    for (int i = 0; i < V; i++)
        again = MAX(again, fabs((double)step[i] - one[12 * V + i]));
    g_assert_cmpfloat(again, <, 1e-4);
}

/* With a streaming cache for its attention layers, the hybrid's memory is constant however long
 * the sequence, and the GDN layers' state is part of it. */
static void test_hybrid_memory(void)
{
    g_autoptr(ClModel) m = hybrid_model();
    gint32 ids[T];
    make_ids(ids);
    g_autoptr(ClKVCache) c = cl_kv_cache_new_streaming(m, SINK, WINDOW);
    g_autoptr(GError) err = NULL;
    float l[V];
    g_assert_true(cl_decoder_forward(be, m, c, ids, 1, NULL, l, NULL, NULL, NULL, &err));
    const size_t first = cl_kv_cache_bytes(c);
    for (int t = 1; t < T; t++)
        g_assert_true(cl_decoder_forward(be, m, c, ids + t, 1, NULL, l, NULL, NULL, NULL, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(cl_kv_cache_bytes(c), ==, first);
    /* half the layers hold keys and values: less than the attention-only model's cache */
    g_autoptr(ClModel) dense = make_model();
    ClModelConfig dc = dense->config;
    dc.dec_depth = 4;
    g_autoptr(ClModel) d4 = cl_model_new_random(&dc, 3, &err);
    g_autoptr(ClKVCache) cd = cl_kv_cache_new_streaming(d4, SINK, WINDOW);
    g_assert_true(cl_decoder_forward(be, d4, cd, ids, 1, NULL, l, NULL, NULL, NULL, &err));
    g_test_message("hybrid %zu bytes against attention-only %zu", first, cl_kv_cache_bytes(cd));
    /* the config round trip */
    g_autofree char *json = cl_model_config_to_json(&m->config);
    g_assert_nonnull(strstr(json, "\"hybrid\":{\"attention_every\":2"));
    ClModelConfig back;
    g_assert_true(cl_model_config_from_json(&back, json, &err));
    g_assert_cmpint(back.hybrid_every, ==, 2);
    g_assert_cmpint(back.gdn_dv, ==, m->config.gdn_dv);
}

/* The offline sparse prefill: with top-k covering every block it is dense attention; with
 * top-k 0 it is dense attention under the block mask (block 0, the previous block, the own
 * block causally) in float64; with top-k 1 it picks a block (neither of those); decode steps
 * after it are dense over every key. */
typedef struct {
    int block;
} Blocks;

static gboolean block_sees(int t, int j, gpointer data)
{
    const Blocks *b = data;
    const int qb = t / b->block, kb = j / b->block;
    return kb == 0 || kb >= qb - 1;
}

static void test_sparse_prefill(void)
{
    g_autoptr(ClModel) m = make_model();
    enum { TS = 100, BLK = 8 };
    m->config.max_len = 128;
    gint32 ids[TS];
    GRand *rg = g_rand_new_with_seed(4);
    for (int i = 0; i < TS; i++)
        ids[i] = g_rand_int_range(rg, 0, V);
    g_rand_free(rg);
    g_autoptr(GError) err = NULL;
    float *out[4];
    const int topk[4] = { -1, 100, 0, 1 }; /* -1: dense */
    for (int v = 0; v < 4; v++) {
        out[v] = g_new(float, (size_t)(TS + 1) * V);
        g_autoptr(ClKVCache) c = cl_kv_cache_new(m, TS + 1);
        if (topk[v] >= 0)
            cl_kv_cache_set_sparse_prefill(c, BLK, topk[v]);
        g_assert_true(cl_decoder_forward(be, m, c, ids, TS, NULL, NULL, out[v], NULL, NULL, &err));
        gint32 next = 5; /* a decode step: dense whatever the prefill was */
        g_assert_true(cl_decoder_forward(be, m, c, &next, 1, NULL, out[v] + (size_t)TS * V, NULL,
                                         NULL, NULL, &err));
        g_assert_no_error(err);
    }
    double all = 0, den = 0, k1 = 0, k0 = 0;
    for (size_t i = 0; i < (size_t)TS * V; i++) {
        all = MAX(all, fabs(out[1][i] - out[0][i]));
        den = MAX(den, fabs(out[0][i]));
        k1 = MAX(k1, fabs(out[3][i] - out[2][i]));
        k0 = MAX(k0, fabs(out[2][i] - out[0][i]));
    }
    /* top-k 0 against float64 under the block mask */
    Blocks bl = { BLK };
    RefHooks hooks = { .sees = block_sees, .data = &bl };
    g_autofree double *x0 = ref_embed(m, ids, TS, NULL);
    g_autofree double *ref = g_new(double, (size_t)TS * V);
    ref_decode_rows(m, x0, TS, &hooks, ref);
    double mask_err = 0;
    for (size_t i = 0; i < (size_t)TS * V; i++)
        mask_err = MAX(mask_err, fabs(out[2][i] - ref[i]));
    g_test_message("sparse prefill (%d positions, blocks of %d): top-k over every block vs dense "
                   "%.2e; top-k 0 vs float64 under the block mask %.2e (vs dense %.2e); top-k 1 "
                   "vs top-k 0 %.2e (of max |logit|)",
                   TS, BLK, all / den, mask_err / den, k0 / den, k1 / den);
    g_assert_cmpfloat(all / den, <, 1e-6);
    g_assert_cmpfloat(mask_err / den, <, 2e-5);
    g_assert_cmpfloat(k0 / den, >, 1e-3);
    g_assert_cmpfloat(k1 / den, >, 1e-4);
    for (int v = 0; v < 4; v++)
        g_free(out[v]);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    be = cl_backend_cpu_new(0);
    g_test_add_func("/streaming/ring-equals-masked-dense", test_ring_equals_masked_dense);
    g_test_add_func("/streaming/before-fill-and-memory", test_before_fill_and_memory);
    g_test_add_func("/streaming/generate-past-max-len", test_generate_past_max_len);
    g_test_add_func("/streaming/hybrid-split-equals-one-pass", test_hybrid_split_equals_one_pass);
    g_test_add_func("/streaming/hybrid-memory", test_hybrid_memory);
    g_test_add_func("/streaming/sparse-prefill", test_sparse_prefill);
    int rc = g_test_run();
    cl_backend_free(be);
    return rc;
}
