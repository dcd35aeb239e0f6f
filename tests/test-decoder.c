/* test-decoder.c - the decoder and its KV cache: a double-precision reference of docs/MODEL.md
 * §4, cached decoding against recomputation, chunked prefill, visual rows, refusals. */
#include <float.h>
#include <math.h>
#include <string.h>

#include <glib.h>

#include "nn/backend.h"
#include "model/decoder.h"
#include "model/model.h"
#include "refdec.h"

static ClBackend *be;

/* A small decoder: E = 24, 4 query heads over 2 KV heads of 6 (GQA), F = 40, vocab 300. */
static void small_config(ClModelConfig *cfg)
{
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_model_config_preset(cfg, "tiny", &err));
    cfg->image_size = 32;
    cfg->patch_size = 8;
    cfg->enc_dim = 16;
    cfg->enc_depth = 1;
    cfg->enc_heads = 1;
    cfg->enc_mlp = 16;
    cfg->merger_hidden = 16;
    cfg->dec_dim = 24;
    cfg->dec_depth = 3;
    cfg->dec_heads = 4;
    cfg->dec_kv_heads = 2;
    cfg->dec_mlp = 40;
    cfg->vocab_size = 300;
    cfg->rope_base = 50.0; /* large angles over a short sequence */
    cfg->max_len = 512;
}

static ClModel *make_model(const ClModelConfig *cfg, gboolean tied, guint64 seed)
{
    ClModelConfig c = *cfg;
    c.tie_embeddings = tied;
    g_autoptr(GError) err = NULL;
    ClModel *m = cl_model_new_random(&c, seed, &err);
    g_assert_no_error(err);
    /* random init has unit norm weights, which would hide a norm applied to the wrong
     * columns, and 0.02 weights, which make every position look alike: liven them up to
     * std 1/sqrt(E) for the matrices (a trained model's scale), 0.2 for the norms */
    GRand *r = g_rand_new_with_seed((guint32)seed);
    g_autoptr(GPtrArray) specs = cl_model_weight_specs(&m->config, &m->w);
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        float *p = *s->slot;
        if (!p || !g_str_has_prefix(s->name, "dec."))
            continue;
        gint64 n = cl_weight_spec_numel(s);
        double std = strstr(s->name, "norm") ? 0.2 : 1.0 / sqrt((double)c.dec_dim);
        for (gint64 j = 0; j < n; j++)
            p[j] += (float)(g_rand_double_range(r, -1.0, 1.0) * std * sqrt(3.0));
    }
    g_rand_free(r);
    return m;
}

static gint32 *make_ids(int n, int vocab, guint32 seed, int n_visual)
{
    gint32 *ids = g_new(gint32, n);
    GRand *r = g_rand_new_with_seed(seed);
    for (int i = 0; i < n; i++)
        ids[i] = g_rand_int_range(r, 0, vocab);
    /* a block of visual rows near the start, like an image in a prompt */
    for (int i = 0; i < n_visual && 2 + i < n; i++)
        ids[2 + i] = CL_DECODER_VISUAL;
    g_rand_free(r);
    return ids;
}

static float *make_visual(int rows, int E, guint32 seed)
{
    float *v = g_new(float, (size_t)rows * E);
    GRand *r = g_rand_new_with_seed(seed);
    for (int i = 0; i < rows * E; i++)
        v[i] = (float)g_rand_double_range(r, -1.0, 1.0);
    g_rand_free(r);
    return v;
}

/* ---- the double-precision reference ---------------------------------------------------------- */

/* logits (T, V) of the whole sequence, every position (refdec.c: written from docs/MODEL.md §4) */
static void ref_decode(const ClModel *m, const gint32 *ids, int T, const float *visual,
                       double *logits)
{
    g_autofree double *x0 = ref_embed(m, ids, T, visual);
    ref_decode_rows(m, x0, T, NULL, logits);
}

/* max |a − b| / max |b| (b the reference) */
static double rel_err_d(const float *a, const double *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]))
            return INFINITY;
        num = MAX(num, fabs((double)a[i] - b[i]));
        den = MAX(den, fabs(b[i]));
    }
    return num / den;
}

static double rel_err(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i]))
            return INFINITY;
        num = MAX(num, fabs((double)a[i] - b[i]));
        den = MAX(den, fabs((double)b[i]));
    }
    return num / den;
}

/* Float32 against double: sums of <= F = 40 products per layer, 3 layers; logits are
 * O(1-10): relative errors ~1e-6; 1e-5 is our float-vs-float budget, 2e-5 against double. */
#define TOL_REF 2e-5
/* The same float model computed two ways (cached steps vs one pass, chunk boundaries): the
 * products see the same operands in other groupings (sgemm vs sgemv, other row blocks), so
 * they differ by rounding only: 1e-5 relative. */
#define TOL_SAME 1e-5

static void test_reference(void)
{
    ClModelConfig cfg;
    small_config(&cfg);
    for (int tied = 0; tied < 2; tied++) {
        g_autoptr(ClModel) m = make_model(&cfg, tied, 3 + tied);
        const int T = 23, E = cfg.dec_dim, V = cfg.vocab_size, nv = 6;
        g_autofree gint32 *ids = make_ids(T, V, 5, nv);
        g_autofree float *visual = make_visual(nv, E, 6);
        g_autofree double *ref = g_new(double, (size_t)T * V);
        ref_decode(m, ids, T, visual, ref);

        g_autoptr(ClKVCache) cache = cl_kv_cache_new(m, 64);
        g_autofree float *all = g_new(float, (size_t)T * V);
        g_autofree float *last = g_new(float, V);
        g_autoptr(GError) err = NULL;
        g_assert_true(
            cl_decoder_forward(be, m, cache, ids, T, visual, last, all, NULL, NULL, &err));
        g_assert_no_error(err);
        g_assert_cmpint(cl_kv_cache_len(cache), ==, T);
        double e = rel_err_d(all, ref, (size_t)T * V);
        g_printerr("decoder vs double reference (tied=%d): %.3g\n", tied, e);
        g_assert_cmpfloat(e, <=, TOL_REF);
        g_assert_cmpmem(last, V * sizeof(float), all + (size_t)(T - 1) * V, V * sizeof(float));
    }
}

/* prefill then one position at a time == the whole sequence in one pass */
static void test_cached_vs_full(void)
{
    ClModelConfig cfg;
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_model_config_preset(&cfg, "tiny", &err));
    g_autoptr(ClModel) m = make_model(&cfg, FALSE, 7);
    const int T = 40, P = 25, E = cfg.dec_dim, V = cfg.vocab_size, nv = 9;
    g_autofree gint32 *ids = make_ids(T, V, 8, nv);
    g_autofree float *visual = make_visual(nv, E, 9);

    g_autoptr(ClKVCache) full = cl_kv_cache_new(m, T);
    g_autofree float *all = g_new(float, (size_t)T * V);
    g_assert_true(cl_decoder_forward(be, m, full, ids, T, visual, NULL, all, NULL, NULL, &err));

    g_autoptr(ClKVCache) cache = cl_kv_cache_new(m, T);
    g_autofree float *logits = g_new(float, V);
    g_assert_true(cl_decoder_forward(be, m, cache, ids, P, visual, logits, NULL, NULL, NULL, &err));
    double worst = rel_err(logits, all + (size_t)(P - 1) * V, V);
    for (int t = P; t < T; t++) {
        g_assert_true(
            cl_decoder_forward(be, m, cache, ids + t, 1, NULL, logits, NULL, NULL, NULL, &err));
        g_assert_no_error(err);
        worst = MAX(worst, rel_err(logits, all + (size_t)t * V, V));
    }
    g_assert_cmpint(cl_kv_cache_len(cache), ==, T);
    g_printerr("cached decode vs full recomputation: %.3g\n", worst);
    g_assert_cmpfloat(worst, <=, TOL_SAME);

    /* full: the cache is full now; one more position is refused and changes nothing */
    gint32 one = 1;
    g_assert_false(cl_decoder_forward(be, m, cache, &one, 1, NULL, logits, NULL, NULL, NULL, &err));
    g_assert_error(err, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT);
    g_clear_error(&err);
    g_assert_cmpint(cl_kv_cache_len(cache), ==, T);
}

static void record_tap(const char *name, const float *data, int ndim, const gint64 *shape,
                       gpointer user_data)
{
    GHashTable *t = user_data;
    gint64 n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    GArray *a = g_array_sized_new(FALSE, FALSE, sizeof(float), (guint)n);
    g_array_append_vals(a, data, (guint)n);
    g_hash_table_replace(t, g_strdup_printf("%s/%d", name, ndim), a);
}

/* two chunks == one pass; a long prompt crosses the internal chunk size */
static void test_split_prefill(void)
{
    ClModelConfig cfg;
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_model_config_preset(&cfg, "tiny", &err));
    cfg.dec_depth = 2;
    g_autoptr(ClModel) m = make_model(&cfg, FALSE, 11);
    const int T = 300, split = 117, E = cfg.dec_dim, V = cfg.vocab_size, nv = 144;
    g_autofree gint32 *ids = make_ids(T, V, 12, nv);
    g_autofree float *visual = make_visual(nv, E, 13);
    g_autofree float *a = g_new(float, (size_t)T * V);
    g_autofree float *b = g_new(float, (size_t)T * V);

    /* one call: the engine runs it in chunks of its own */
    g_autoptr(ClKVCache) c1 = cl_kv_cache_new(m, T);
    g_assert_true(cl_decoder_forward(be, m, c1, ids, T, visual, NULL, a, NULL, NULL, &err));
    /* two calls, the split inside the visual rows: the second call's visual rows start at the
     * row after the first call's */
    g_autoptr(ClKVCache) c2 = cl_kv_cache_new(m, T);
    g_assert_true(cl_decoder_forward(be, m, c2, ids, split, visual, NULL, b, NULL, NULL, &err));
    int used = 0;
    for (int i = 0; i < split; i++)
        used += ids[i] == CL_DECODER_VISUAL;
    g_assert_true(cl_decoder_forward(be, m, c2, ids + split, T - split, visual + (size_t)used * E,
                                     NULL, b + (size_t)split * V, NULL, NULL, &err));
    g_assert_no_error(err);
    double e = rel_err(b, a, (size_t)T * V);
    g_printerr("split prefill vs one pass: %.3g\n", e);
    g_assert_cmpfloat(e, <=, TOL_SAME);

    /* one pass with a tap runs as a single chunk: the same logits */
    g_autoptr(ClKVCache) c3 = cl_kv_cache_new(m, T);
    g_autoptr(GHashTable) seen =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
    g_assert_true(cl_decoder_forward(be, m, c3, ids, T, visual, NULL, b, record_tap, seen, &err));
    GArray *out0 = g_hash_table_lookup(seen, "dec.0.out/2");
    g_assert_nonnull(out0);
    g_assert_cmpuint(out0->len, ==, (guint)(T * E)); /* whole, not per chunk */
    e = rel_err(b, a, (size_t)T * V);
    g_assert_cmpfloat(e, <=, TOL_SAME);
}

/* visual rows, taps, refusals, truncate and copy */
static void test_visual_taps_errors(void)
{
    ClModelConfig cfg;
    small_config(&cfg);
    g_autoptr(ClModel) m = make_model(&cfg, FALSE, 21);
    const int E = cfg.dec_dim, V = cfg.vocab_size;
    g_autoptr(GError) err = NULL;

    /* a visual row equal to token 7's embedding gives exactly token 7's logits */
    gint32 with_vis[5] = { 3, CL_DECODER_VISUAL, 9, CL_DECODER_VISUAL, 4 };
    gint32 with_tok[5] = { 3, 7, 9, 8, 4 };
    g_autofree float *vis = g_new(float, 2 * E);
    memcpy(vis, m->w.embed + 7 * E, E * sizeof(float));
    memcpy(vis + E, m->w.embed + 8 * E, E * sizeof(float));
    g_autofree float *la = g_new(float, 5 * V), *lb = g_new(float, 5 * V);
    g_autoptr(ClKVCache) ca = cl_kv_cache_new(m, 16);
    g_autoptr(ClKVCache) cb = cl_kv_cache_new(m, 16);
    g_assert_true(cl_decoder_forward(be, m, ca, with_vis, 5, vis, NULL, la, NULL, NULL, &err));
    g_assert_true(cl_decoder_forward(be, m, cb, with_tok, 5, NULL, NULL, lb, NULL, NULL, &err));
    g_assert_cmpmem(la, 5 * V * sizeof(float), lb, 5 * V * sizeof(float));
    /* and swapping the two visual rows changes them */
    g_autoptr(ClKVCache) cc = cl_kv_cache_new(m, 16);
    memcpy(vis, m->w.embed + 8 * E, E * sizeof(float));
    memcpy(vis + E, m->w.embed + 7 * E, E * sizeof(float));
    g_assert_true(cl_decoder_forward(be, m, cc, with_vis, 5, vis, NULL, la, NULL, NULL, &err));
    g_assert_true(memcmp(la + V, lb + V, V * sizeof(float)) != 0);

    /* taps: every layer's output [n, E] and the last logits [V] */
    g_autoptr(GHashTable) taps =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
    g_autoptr(ClKVCache) cd = cl_kv_cache_new(m, 16);
    g_autofree float *logits = g_new(float, V);
    g_assert_true(
        cl_decoder_forward(be, m, cd, with_tok, 5, NULL, logits, NULL, record_tap, taps, &err));
    for (int l = 0; l < cfg.dec_depth; l++) {
        g_autofree char *name = g_strdup_printf("dec.%d.out/2", l);
        GArray *a = g_hash_table_lookup(taps, name);
        g_assert_nonnull(a);
        g_assert_cmpuint(a->len, ==, 5 * E);
    }
    GArray *tl = g_hash_table_lookup(taps, "dec.logits/1");
    g_assert_nonnull(tl);
    g_assert_cmpmem(tl->data, V * sizeof(float), logits, V * sizeof(float));
    /* the last position alone (a matrix-vector product) vs the same row of logits_all */
    g_assert_cmpfloat(rel_err(logits, lb + 4 * V, V), <=, TOL_SAME);

    /* refusals: nothing is written, the cache keeps its length and contents */
    int len = cl_kv_cache_len(cd);
    gint32 bad_hi[2] = { 5, 300 }, bad_neg[2] = { 5, -2 }, vis_only[1] = { CL_DECODER_VISUAL };
    g_autofree gint32 *too_many = g_new0(gint32, 12);
    struct {
        const gint32 *ids;
        int n;
    } bad[] = { { bad_hi, 2 }, { bad_neg, 2 }, { vis_only, 1 }, { too_many, 12 }, { with_tok, 0 } };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_assert_false(cl_decoder_forward(be, m, cd, bad[i].ids, bad[i].n, NULL, logits, NULL, NULL,
                                          NULL, &err));
        g_assert_error(err, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT);
        g_clear_error(&err);
        g_assert_cmpint(cl_kv_cache_len(cd), ==, len);
    }
    /* the cache still continues exactly as an untouched one */
    gint32 next = 11;
    g_autofree float *l1 = g_new(float, V), *l2 = g_new(float, V);
    g_assert_true(cl_decoder_forward(be, m, cd, &next, 1, NULL, l1, NULL, NULL, NULL, &err));
    g_assert_true(cl_decoder_forward(be, m, cb, &next, 1, NULL, l2, NULL, NULL, NULL, &err));
    g_assert_cmpmem(l1, V * sizeof(float), l2, V * sizeof(float));

    /* copy_from: two caches continue identically; truncate: redo the last position */
    g_autoptr(ClKVCache) ce = cl_kv_cache_new(m, 20);
    cl_kv_cache_copy_from(ce, cb);
    g_assert_cmpint(cl_kv_cache_len(ce), ==, 6);
    g_assert_cmpint(cl_kv_cache_capacity(ce), ==, 20);
    gint32 after = 12;
    g_assert_true(cl_decoder_forward(be, m, ce, &after, 1, NULL, l1, NULL, NULL, NULL, &err));
    g_assert_true(cl_decoder_forward(be, m, cb, &after, 1, NULL, l2, NULL, NULL, NULL, &err));
    g_assert_cmpmem(l1, V * sizeof(float), l2, V * sizeof(float));
    cl_kv_cache_truncate(ce, 6);
    g_assert_cmpint(cl_kv_cache_len(ce), ==, 6);
    cl_kv_cache_truncate(ce, 99); /* never grows */
    g_assert_cmpint(cl_kv_cache_len(ce), ==, 6);
    g_assert_true(cl_decoder_forward(be, m, ce, &after, 1, NULL, l1, NULL, NULL, NULL, &err));
    g_assert_cmpmem(l1, V * sizeof(float), l2, V * sizeof(float));

    /* a cache of another model's shape is refused */
    ClModelConfig other = cfg;
    other.dec_dim = 32;
    g_autoptr(ClModel) m2 = make_model(&other, FALSE, 2);
    g_assert_false(cl_decoder_forward(be, m2, ce, &after, 1, NULL, NULL, NULL, NULL, NULL, &err));
    g_assert_error(err, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT);
}

/* one cache used by backends of different thread counts (the workspace follows) */
static void test_backends(void)
{
    ClModelConfig cfg;
    small_config(&cfg);
    cfg.dec_dim = 128; /* 8 heads of 16: big enough to split 3-3-2 over three threads */
    cfg.dec_heads = 8;
    cfg.dec_kv_heads = 4;
    g_autoptr(ClModel) m = make_model(&cfg, FALSE, 31);
    const int T = 400, V = cfg.vocab_size;
    g_autofree gint32 *ids = make_ids(T, V, 32, 0);
    g_autofree float *ref = g_new(float, (size_t)T * V), *got = g_new(float, (size_t)T * V);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClKVCache) c1 = cl_kv_cache_new(m, T);
    g_assert_true(cl_decoder_forward(be, m, c1, ids, T, NULL, NULL, ref, NULL, NULL, &err));
    g_autoptr(ClBackend) one = cl_backend_cpu_new(1);
    g_autoptr(ClBackend) three = cl_backend_cpu_new(3);
    g_autoptr(ClKVCache) c2 = cl_kv_cache_new(m, T);
    g_assert_true(cl_decoder_forward(one, m, c2, ids, 1, NULL, NULL, got, NULL, NULL, &err));
    g_assert_true(
        cl_decoder_forward(three, m, c2, ids + 1, 2, NULL, NULL, got + V, NULL, NULL, &err));
    /* 200 rows on one thread, then 197 on three: the scratch must grow for three lanes */
    g_assert_true(
        cl_decoder_forward(one, m, c2, ids + 3, 200, NULL, NULL, got + 3 * V, NULL, NULL, &err));
    g_assert_true(cl_decoder_forward(three, m, c2, ids + 203, T - 203, NULL, NULL,
                                     got + (size_t)203 * V, NULL, NULL, &err));
    g_assert_no_error(err);
    g_assert_cmpfloat(rel_err(got, ref, (size_t)T * V), <=, TOL_SAME);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    be = cl_backend_cpu_new(0);
    g_test_add_func("/decoder/reference", test_reference);
    g_test_add_func("/decoder/cached-vs-full", test_cached_vs_full);
    g_test_add_func("/decoder/split-prefill", test_split_prefill);
    g_test_add_func("/decoder/visual-taps-errors", test_visual_taps_errors);
    g_test_add_func("/decoder/backends", test_backends);
    int rc = g_test_run();
    cl_backend_free(be);
    return rc;
}
