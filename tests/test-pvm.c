/* test-pvm.c - PVM, the persistent visual memory beside the decoder's FFN (docs/MODEL.md §4
 * §1): a double-precision reference of its equations, the gate-0 identity with the base model
 * bit for bit, the silencing mask, independence from the text history, cached visual keys
 * against recomputation, config and file round trips. */
#include <math.h>
#include <string.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "nn/backend.h"
#include "model/decoder.h"
#include "model/model.h"
#include "fixtures.h"
#include "refdec.h"

static ClBackend *be;

/* E = 32, 4 query heads over 2 KV heads, depth 4; PVM in layers 1 and 3, rank 16, 4 heads of
 * 4, latent SwiGLU 24. */
static void base_config(ClModelConfig *cfg, gboolean pvm)
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
    cfg->dec_dim = 32;
    cfg->dec_depth = 4;
    cfg->dec_heads = 4;
    cfg->dec_kv_heads = 2;
    cfg->dec_mlp = 48;
    cfg->vocab_size = 300;
    cfg->rope_base = 50.0;
    cfg->max_len = 1024; /* room for a training sample's prompt (test_train_only) */
    if (pvm) {
        g_assert_true(cl_config_set_pvm(cfg, 2, 16)); /* sizes; then layers 1 and 3 */
        cfg->pvm_n_layers = 2;
        cfg->pvm_layers[0] = 1;
        cfg->pvm_layers[1] = 3;
    }
}

/* Lively weights (refdec.h), the same for every tensor two models share by name; α = `alpha`
 * in each PVM layer. */
static void liven(ClModel *m, double alpha)
{
    ref_liven(m);
    for (int l = 0; l < m->config.dec_depth; l++)
        if (m->w.dec[l].pvm_alpha)
            m->w.dec[l].pvm_alpha[0] = (float)alpha;
}

static ClModel *make_model(gboolean pvm, double alpha)
{
    ClModelConfig cfg;
    base_config(&cfg, pvm);
    g_autoptr(GError) err = NULL;
    ClModel *m = cl_model_new_random(&cfg, 5, &err);
    g_assert_no_error(err);
    liven(m, alpha);
    return m;
}

/* text, 9 visual rows, text, 7 more visual rows, text */
static int make_prompt(gint32 *ids, int n)
{
    GRand *r = g_rand_new_with_seed(3);
    for (int i = 0; i < n; i++)
        ids[i] = g_rand_int_range(r, 0, 300);
    g_rand_free(r);
    int vis = 0;
    for (int i = 4; i < 13; i++, vis++)
        ids[i] = CL_DECODER_VISUAL;
    for (int i = 17; i < 24; i++, vis++)
        ids[i] = CL_DECODER_VISUAL;
    return vis;
}

static float *make_visual(int rows, int E)
{
    float *v = g_new(float, (size_t)rows * E);
    GRand *r = g_rand_new_with_seed(11);
    for (int i = 0; i < rows * E; i++)
        v[i] = (float)g_rand_double_range(r, -1.0, 1.0);
    g_rand_free(r);
    return v;
}

/* ---- the double-precision reference (refdec.h, and PVM's branch here) ---- */

/* PVM's branch for one row h (docs/MODEL.md §4.2), into P (E). vis: the nv visual rows. */
static void r_pvm(double *P, const ClModel *m, const ClDecoderLayerWeights *L, const double *h,
                  const float *vis, int nv)
{
    const ClModelConfig *c = &m->config;
    const int E = c->dec_dim, r = c->pvm_rank, H = c->pvm_heads, hp = r / H, Fp = c->pvm_mlp;
    const double eps = c->norm_eps;
    double *zt = g_new(double, r), *zq = g_new(double, r), *q = g_new(double, r);
    double *zv = g_new(double, r), *k = g_new(double, (size_t)nv * hp);
    double *v = g_new(double, (size_t)nv * hp), *att = g_new(double, r), *mo = g_new(double, r);
    double *nb = g_new(double, r), *g = g_new(double, Fp), *u = g_new(double, Fp);
    double *m2 = g_new(double, r), *y = g_new(double, E);
    double *xv = g_new(double, E), *tmp = g_new(double, hp);
    ref_matvec(zt, L->pvm_t, h, r, E);
    ref_rmsnorm(zq, zt, L->pvm_norm_a, r, eps);
    ref_matvec(q, L->pvm_q, zq, r, r);
    for (int hh = 0; hh < H; hh++) {
        ref_rmsnorm(tmp, q + hh * hp, L->pvm_q_norm, hp, eps);
        memcpy(q + hh * hp, tmp, hp * sizeof(double));
    }
    for (int j = 0; j < nv; j++) {
        for (int e = 0; e < E; e++)
            xv[e] = vis[(size_t)j * E + e];
        ref_matvec(zv, L->pvm_v, xv, r, E);
        ref_matvec(tmp, L->pvm_k, zv, hp, r);
        ref_rmsnorm(k + (size_t)j * hp, tmp, L->pvm_k_norm, hp, eps);
        ref_matvec(v + (size_t)j * hp, L->pvm_vv, zv, hp, r);
    }
    ref_attend(att, q, k, v, nv, H, 1, hp, NULL); /* every query head, one key/value head */
    ref_matvec(mo, L->pvm_o, att, r, r);
    ref_rmsnorm(nb, mo, L->pvm_norm_b, r, eps);
    ref_matvec(g, L->pvm_gate, nb, Fp, r);
    ref_matvec(u, L->pvm_up, nb, Fp, r);
    for (int i = 0; i < Fp; i++)
        g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
    ref_matvec(m2, L->pvm_down, g, r, Fp);
    for (int i = 0; i < r; i++)
        m2[i] += mo[i];
    ref_matvec(y, L->pvm_out, m2, E, r);
    ref_rmsnorm(P, y, NULL, E, eps);
    for (int e = 0; e < E; e++)
        P[e] *= L->pvm_alpha[0];
    g_free(zt), g_free(zq), g_free(q), g_free(zv), g_free(k), g_free(v), g_free(att), g_free(mo);
    g_free(nb), g_free(g), g_free(u), g_free(m2), g_free(y), g_free(xv), g_free(tmp);
}

typedef struct {
    const gint32 *ids;
    const float *visual;
    int nv;
} PvmRef;

static void pvm_hook(const ClModel *m, int l, int t, const double *xt, double *out, gpointer data)
{
    const PvmRef *r = data;
    if (cl_config_pvm_slot(&m->config, l) < 0 || r->nv == 0 || r->ids[t] == CL_DECODER_VISUAL)
        return; /* the silencing mask */
    const int E = m->config.dec_dim;
    double *P = g_new(double, E);
    r_pvm(P, m, &m->w.dec[l], xt, r->visual, r->nv);
    for (int e = 0; e < E; e++)
        out[e] += P[e];
    g_free(P);
}

/* logits (T, V) of the whole sequence: the decoder of docs/MODEL.md §4 with PVM's branch
 * added beside the FFN at text rows of the PVM layers (Vimg: every visual row of the prompt). */
static void ref_decode(const ClModel *m, const gint32 *ids, int T, const float *visual, int nv,
                       double *logits)
{
    PvmRef r = { ids, visual, nv };
    RefHooks hooks = { .beside_ffn = pvm_hook, .data = &r };
    g_autofree double *x0 = ref_embed(m, ids, T, visual);
    ref_decode_rows(m, x0, T, &hooks, logits);
}

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

/* ---- tests ----------------------------------------------------------------------------------- */

#define T 30

static void test_reference(void)
{
    g_autoptr(ClModel) m = make_model(TRUE, 0.7);
    gint32 ids[T];
    int nv = make_prompt(ids, T);
    g_autofree float *vis = make_visual(nv, m->config.dec_dim);
    const int V = m->config.vocab_size;
    g_autofree float *logits = g_new(float, (size_t)T * V);
    g_autofree double *ref = g_new(double, (size_t)T * V);
    g_autoptr(ClKVCache) c = cl_kv_cache_new(m, T);
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_decoder_forward(be, m, c, ids, T, vis, NULL, logits, NULL, NULL, &err));
    g_assert_no_error(err);
    ref_decode(m, ids, T, vis, nv, ref);
    double e = rel_err_d(logits, ref, (size_t)T * V);
    g_test_message("PVM decoder against the float64 reference: max error %.2e of max |logit|", e);
    g_assert_cmpfloat(e, <, 2e-5);
    /* and the branch matters: without it the reference is far away */
    g_autoptr(ClModel) m0 = make_model(TRUE, 0.0);
    g_autofree double *ref0 = g_new(double, (size_t)T * V);
    ref_decode(m0, ids, T, vis, nv, ref0);
    g_assert_cmpfloat(rel_err_d(logits, ref0, (size_t)T * V), >, 1e-2);
}

/* α = 0: the logits are the base model's bit for bit (prefill and decode steps). */
static void test_gate_zero(void)
{
    g_autoptr(ClModel) pvm = make_model(TRUE, 0.0);
    g_autoptr(ClModel) base = make_model(FALSE, 0.0);
    gint32 ids[T];
    int nv = make_prompt(ids, T);
    g_autofree float *vis = make_visual(nv, base->config.dec_dim);
    const int V = base->config.vocab_size;
    g_autofree float *la = g_new(float, (size_t)T * V), *lb = g_new(float, (size_t)T * V);
    g_autoptr(ClKVCache) ca = cl_kv_cache_new(pvm, T + 4);
    g_autoptr(ClKVCache) cb = cl_kv_cache_new(base, T + 4);
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_decoder_forward(be, pvm, ca, ids, T, vis, NULL, la, NULL, NULL, &err));
    g_assert_true(cl_decoder_forward(be, base, cb, ids, T, vis, NULL, lb, NULL, NULL, &err));
    g_assert_cmpmem(la, (size_t)T * V * sizeof(float), lb, (size_t)T * V * sizeof(float));
    for (int s = 0; s < 4; s++) {
        gint32 id = 40 + s;
        g_assert_true(cl_decoder_forward(be, pvm, ca, &id, 1, NULL, la, NULL, NULL, NULL, &err));
        g_assert_true(cl_decoder_forward(be, base, cb, &id, 1, NULL, lb, NULL, NULL, NULL, &err));
        g_assert_cmpmem(la, V * sizeof(float), lb, V * sizeof(float));
    }
    g_assert_no_error(err);
}

typedef struct {
    int layer;
    float *rows; /* (T, E) */
} TapGrab;

static void grab(const char *name, const float *x, int ndim, const gint64 *shape, gpointer data)
{
    TapGrab *g = data;
    g_autofree char *want = g_strdup_printf("dec.%d.out", g->layer);
    if (strcmp(name, want) == 0 && ndim == 2)
        memcpy(g->rows, x, (size_t)shape[0] * shape[1] * sizeof(float));
}

/* The silencing mask: the first PVM layer's output at visual rows is the same with and
 * without the branch; at text rows it is not. */
static void test_silencing(void)
{
    g_autoptr(ClModel) on = make_model(TRUE, 0.9);
    g_autoptr(ClModel) off = make_model(TRUE, 0.0);
    gint32 ids[T];
    int nv = make_prompt(ids, T);
    const int E = on->config.dec_dim, V = on->config.vocab_size;
    g_autofree float *vis = make_visual(nv, E);
    TapGrab ga = { 1, g_new(float, (size_t)T * E) }, gb = { 1, g_new(float, (size_t)T * E) };
    g_autofree float *la = g_new(float, V);
    g_autoptr(ClKVCache) ca = cl_kv_cache_new(on, T);
    g_autoptr(ClKVCache) cb = cl_kv_cache_new(off, T);
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_decoder_forward(be, on, ca, ids, T, vis, la, NULL, grab, &ga, &err));
    g_assert_true(cl_decoder_forward(be, off, cb, ids, T, vis, la, NULL, grab, &gb, &err));
    int text_differs = 0;
    for (int t = 0; t < T; t++) {
        gboolean same =
            memcmp(ga.rows + (size_t)t * E, gb.rows + (size_t)t * E, E * sizeof(float)) == 0;
        if (ids[t] == CL_DECODER_VISUAL)
            g_assert_true(same);
        else
            text_differs += !same;
    }
    g_assert_cmpint(text_differs, ==, T - nv);
    g_free(ga.rows);
    g_free(gb.rows);
}

/* Cached visual keys (decode steps after a prefill, and a prefill cut in two calls after the
 * images) against the whole sequence in one call. */
static void test_cached(void)
{
    g_autoptr(ClModel) m = make_model(TRUE, 0.8);
    gint32 ids[T];
    int nv = make_prompt(ids, T);
    const int V = m->config.vocab_size;
    g_autofree float *vis = make_visual(nv, m->config.dec_dim);
    g_autofree float *full = g_new(float, (size_t)T * V), *step = g_new(float, V);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClKVCache) cf = cl_kv_cache_new(m, T);
    g_assert_true(cl_decoder_forward(be, m, cf, ids, T, vis, NULL, full, NULL, NULL, &err));
    g_autoptr(ClKVCache) cs = cl_kv_cache_new(m, T);
    const int head = 26; /* every visual row is in the first call */
    g_assert_true(cl_decoder_forward(be, m, cs, ids, head, vis, step, NULL, NULL, NULL, &err));
    double worst = 0;
    for (int t = head; t < T; t++) {
        g_assert_true(
            cl_decoder_forward(be, m, cs, ids + t, 1, NULL, step, NULL, NULL, NULL, &err));
        for (int i = 0; i < V; i++)
            worst = MAX(worst, fabs((double)step[i] - full[(size_t)t * V + i]));
    }
    g_assert_no_error(err);
    g_test_message("decode steps with cached PVM keys vs one pass: max |dlogit| %.2e", worst);
    g_assert_cmpfloat(worst, <, 1e-4);
    /* truncating before the images and bringing them again (a retry) gives the one pass's
     * logits: the new call's visual rows replace the forgotten ones */
    cl_kv_cache_truncate(cs, 2);
    g_autofree float *again = g_new(float, (size_t)(T - 2) * V);
    g_assert_true(
        cl_decoder_forward(be, m, cs, ids + 2, T - 2, vis, NULL, again, NULL, NULL, &err));
    double d = 0;
    for (size_t i = 0; i < (size_t)(T - 2) * V; i++)
        d = MAX(d, fabs((double)again[i] - full[2 * (size_t)V + i]));
    g_assert_cmpfloat(d, <, 1e-4);
}

/* Theorem 4.1: the branch reads only the visual rows, so its output for a text row is a
 * function of that row's input alone: two prompts whose text history differs give the same
 * branch output wherever the row's input to the layer is the same. Observed at the first PVM
 * layer by giving the layer identical inputs through a model whose earlier layers attend to
 * nothing (zero q/k/v/o: the residual is the embedding) — only the PVM branch then separates
 * the outputs, and it must not see the history. */
static void test_history(void)
{
    g_autoptr(ClModel) m = make_model(TRUE, 0.9);
    const ClModelConfig *c = &m->config;
    const int E = c->dec_dim;
    /* layers 0 and 1: no attention (o = 0), so a row's input to layer 1's FFN and PVM is its
     * embedding passed through layer 0's FFN: the same for the same token whatever precedes */
    for (int l = 0; l <= 1; l++)
        memset(m->w.dec[l].o, 0, sizeof(float) * (size_t)E * E);
    cl_model_weights_changed(m);
    gint32 a[T], b[T];
    int nv = make_prompt(a, T);
    make_prompt(b, T);
    for (int t = 24; t < 28; t++) /* another text history before the last rows */
        b[t] = (a[t] + 17) % 300;
    g_autofree float *vis = make_visual(nv, E);
    TapGrab ga = { 1, g_new(float, (size_t)T * E) }, gb = { 1, g_new(float, (size_t)T * E) };
    g_autoptr(GError) err = NULL;
    g_autoptr(ClKVCache) ca = cl_kv_cache_new(m, T);
    g_autoptr(ClKVCache) cb = cl_kv_cache_new(m, T);
    g_assert_true(cl_decoder_forward(be, m, ca, a, T, vis, NULL, NULL, grab, &ga, &err));
    g_assert_true(cl_decoder_forward(be, m, cb, b, T, vis, NULL, NULL, grab, &gb, &err));
    g_assert_no_error(err);
    for (int t = 28; t < T; t++) /* same token, other history: the same layer-1 output */
        g_assert_cmpmem(ga.rows + (size_t)t * E, E * sizeof(float), gb.rows + (size_t)t * E,
                        E * sizeof(float));
    g_assert_cmpint(memcmp(ga.rows + (size_t)24 * E, gb.rows + (size_t)24 * E, E * sizeof(float)),
                    !=, 0);
    g_free(ga.rows);
    g_free(gb.rows);
}

static void test_config_and_file(void)
{
    ClModelConfig cfg;
    base_config(&cfg, TRUE);
    g_autofree char *json = cl_model_config_to_json(&cfg);
    g_assert_nonnull(strstr(json, "\"pvm\":{\"layers\":[1,3],\"rank\":16,\"heads\":4"));
    ClModelConfig back;
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_model_config_from_json(&back, json, &err));
    g_assert_no_error(err);
    g_assert_cmpint(back.pvm_n_layers, ==, 2);
    g_assert_cmpint(back.pvm_layers[1], ==, 3);
    g_assert_cmpint(back.pvm_mlp, ==, cfg.pvm_mlp);
    /* refusals with a reason */
    const char *bad[] = {
        "{\"dec_depth\":4,\"pvm\":{\"layers\":[1,9],\"rank\":16,\"heads\":4,\"mlp\":8}}",
        "{\"pvm\":{\"layers\":[2,1],\"rank\":16,\"heads\":4,\"mlp\":8}}",
        "{\"pvm\":{\"layers\":[1],\"rank\":18,\"heads\":4,\"mlp\":8}}",
        "{\"pvm\":{\"layers\":[1],\"rank\":16,\"heads\":4}}",
        "{\"pvm\":{\"layers\":3}}",
        "{\"pvm\":{\"depth\":3}}",
    };
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) e = NULL;
        ClModelConfig x;
        gboolean ok = cl_model_config_from_json(&x, bad[i], &e);
        g_assert_false(ok);
        g_assert_nonnull(e);
        g_test_message("%s -> %s", bad[i], e->message);
    }
    /* a model file keeps the branch: same logits after save and load */
    g_autoptr(ClModel) m = make_model(TRUE, 0.6);
    g_autofree char *dir = g_dir_make_tmp("cl-pvm-XXXXXX", &err);
    g_autofree char *path = g_build_filename(dir, "pvm.safetensors", NULL);
    g_assert_true(cl_model_save(m, path, "F32", &err));
    g_autoptr(ClModel) m2 = cl_model_load(path, &err);
    g_assert_no_error(err);
    gint32 ids[T];
    int nv = make_prompt(ids, T);
    g_autofree float *vis = make_visual(nv, m->config.dec_dim);
    const int V = m->config.vocab_size;
    g_autofree float *a = g_new(float, V), *b = g_new(float, V);
    g_autoptr(ClKVCache) ca = cl_kv_cache_new(m, T);
    g_autoptr(ClKVCache) cb = cl_kv_cache_new(m2, T);
    g_assert_true(cl_decoder_forward(be, m, ca, ids, T, vis, a, NULL, NULL, NULL, &err));
    g_assert_true(cl_decoder_forward(be, m2, cb, ids, T, vis, b, NULL, NULL, NULL, &err));
    g_assert_cmpmem(a, V * sizeof(float), b, V * sizeof(float));
    g_unlink(path);
    g_rmdir(dir);
}

/* `train --train-only pvm.`: PVM's branch trains alone (its tensors change, every other one is
 * the file's bit for bit), as the paper's stage I; a part that matches nothing is refused. */
static void test_train_only(void)
{
    g_autoptr(ClModel) m = make_model(TRUE, 0.0);
    g_autofree char *dir = cl_fixture_tmpdir("cl-pvm-train");
    g_autofree char *src = g_build_filename(dir, "src.safetensors", NULL);
    g_autofree char *out = g_build_filename(dir, "out", NULL);
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_model_save(m, src, "F32", &err));
    const char *args[] = {
        "train",   "--from", src,    "--train-only", "pvm.",     "--task", "shapes", "--steps", "2",
        "--batch", "1",      "--lr", "1e-2",         "--no-aux", "--out",  out,      "--quiet", NULL
    };
    g_autofree char *msg = NULL;
    int rc = cl_fixture_run_cli(args, &msg);
    if (rc != 0)
        g_test_message("train: %s", msg);
    g_assert_cmpint(rc, ==, 0);
    g_autofree char *trained_path = g_build_filename(out, "model.safetensors", NULL);
    g_autoptr(ClModel) t = cl_model_load(trained_path, &err);
    g_assert_no_error(err);
    g_autoptr(GPtrArray) a = cl_model_weight_specs(&m->config, &m->w);
    g_autoptr(GPtrArray) b = cl_model_weight_specs(&t->config, &t->w);
    int changed = 0, kept = 0;
    for (guint i = 0; i < a->len; i++) {
        const ClWeightSpec *sa = g_ptr_array_index(a, i), *sb = g_ptr_array_index(b, i);
        gboolean same =
            memcmp(*sa->slot, *sb->slot, sizeof(float) * (size_t)cl_weight_spec_numel(sa)) == 0;
        if (strstr(sa->name, "pvm.")) {
            changed += !same;
        } else {
            g_assert_true(same);
            kept++;
        }
    }
    g_test_message("--train-only pvm.: %d PVM tensors changed, %d others kept", changed, kept);
    g_assert_cmpint(changed, >, 10);
    g_autofree char *out2 = g_build_filename(dir, "out2", NULL);
    const char *bad[] = { "train",  "--from",  src, "--train-only", "nothing.", "--task",
                          "shapes", "--steps", "1", "--out",        out2,       "--quiet",
                          NULL };
    g_autofree char *msg2 = NULL;
    g_assert_cmpint(cl_fixture_run_cli(bad, &msg2), !=, 0);
    g_assert_nonnull(strstr(msg2, "matches no tensor"));
    cl_fixture_rmdir(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    be = cl_backend_cpu_new(0);
    g_test_add_func("/pvm/reference", test_reference);
    g_test_add_func("/pvm/gate-zero-is-base", test_gate_zero);
    g_test_add_func("/pvm/silencing", test_silencing);
    g_test_add_func("/pvm/cached-visual-keys", test_cached);
    g_test_add_func("/pvm/text-history", test_history);
    g_test_add_func("/pvm/config-and-file", test_config_and_file);
    g_test_add_func("/pvm/train-only", test_train_only);
    int rc = g_test_run();
    cl_backend_free(be);
    return rc;
}
