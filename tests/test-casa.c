/* test-casa.c - CASA, cross-attention beside the text self-attention (SEEDS-DECODER.md §2):
 * a double-precision reference, the KV cache independent of the number of images, text before
 * the first image untouched by images, CA^φ equal to CA with copied projections, an old image
 * reaching later text only through its window's text, cached decode steps, config. */
#include <math.h>
#include <string.h>

#include <glib.h>

#include "backend.h"
#include "decoder.h"
#include "model.h"

static ClBackend *be;

static void casa_config(ClModelConfig *cfg, ClCasaVariant v)
{
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_model_config_preset(cfg, "tiny", &err));
    cfg->image_size = 32;
    cfg->patch_size = 8; /* M = 4 visual rows per image */
    cfg->enc_dim = 16;
    cfg->enc_depth = 1;
    cfg->enc_heads = 1;
    cfg->enc_mlp = 16;
    cfg->merger_hidden = 16;
    cfg->dec_dim = 32;
    cfg->dec_depth = 3;
    cfg->dec_heads = 4;
    cfg->dec_kv_heads = 2;
    cfg->dec_mlp = 48;
    cfg->vocab_size = 300;
    cfg->rope_base = 50.0;
    cfg->max_len = 512;
    cfg->casa = v;
}

/* lively weights, the same for every name two models share */
static ClModel *make_model(ClCasaVariant v)
{
    ClModelConfig cfg;
    casa_config(&cfg, v);
    g_autoptr(GError) err = NULL;
    ClModel *m = cl_model_new_random(&cfg, 5, &err);
    g_assert_no_error(err);
    g_autoptr(GPtrArray) specs = cl_model_weight_specs(&m->config, &m->w);
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        float *p = *s->slot;
        gint64 n = cl_weight_spec_numel(s);
        GRand *r = g_rand_new_with_seed(g_str_hash(s->name));
        for (gint64 j = 0; j < n; j++)
            p[j] = s->ndim == 1 ? (float)(1.0 + g_rand_double_range(r, -0.2, 0.2))
                                : (float)(g_rand_double_range(r, -1.0, 1.0) *
                                          sqrt(3.0 / (double)s->shape[1]));
        g_rand_free(r);
    }
    cl_model_weights_changed(m);
    return m;
}

/* `pre` text tokens, then per image: 4 visual rows and `per` text tokens */
static GArray *prompt(int pre, int images, int per, guint32 seed)
{
    GArray *a = g_array_new(FALSE, FALSE, sizeof(gint32));
    GRand *r = g_rand_new_with_seed(seed);
    for (int i = 0; i < pre; i++) {
        gint32 id = g_rand_int_range(r, 0, 300);
        g_array_append_val(a, id);
    }
    for (int t = 0; t < images; t++) {
        for (int i = 0; i < 4; i++) {
            gint32 id = CL_DECODER_VISUAL;
            g_array_append_val(a, id);
        }
        for (int i = 0; i < per; i++) {
            gint32 id = g_rand_int_range(r, 0, 300);
            g_array_append_val(a, id);
        }
    }
    g_rand_free(r);
    return a;
}

static float *visual_rows(int rows, guint32 seed)
{
    float *v = g_new(float, (size_t)rows * 32);
    GRand *r = g_rand_new_with_seed(seed);
    for (int i = 0; i < rows * 32; i++)
        v[i] = (float)g_rand_double_range(r, -1, 1);
    g_rand_free(r);
    return v;
}

static void forward(const ClModel *m, ClKVCache *c, const GArray *ids, const float *vis,
                    float *logits_all)
{
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_decoder_forward(be, m, c, (const gint32 *)ids->data, (int)ids->len, vis,
                                     NULL, logits_all, NULL, NULL, &err));
    g_assert_no_error(err);
}

/* ---- the float64 reference ------------------------------------------------------------------- */

static void r_rmsnorm(double *out, const double *x, const float *w, int n, double eps)
{
    double ms = 0;
    for (int i = 0; i < n; i++)
        ms += x[i] * x[i];
    for (int i = 0; i < n; i++)
        out[i] = x[i] / sqrt(ms / n + eps) * w[i];
}

static void r_matvec(double *out, const float *w, const double *x, int n_out, int n_in)
{
    for (int j = 0; j < n_out; j++) {
        double s = 0;
        for (int i = 0; i < n_in; i++)
            s += w[(size_t)j * n_in + i] * x[i];
        out[j] = s;
    }
}

/* softmax(q k^T/√hd) v for one query over nk keys (GQA) */
static void r_attend(double *out, const double *q, const double *k, const double *v, int nk,
                     int Hq, int Hkv, int hd)
{
    const int KV = Hkv * hd;
    double *p = g_new(double, MAX(nk, 1));
    for (int h = 0; h < Hq; h++) {
        const int g = h / (Hq / Hkv);
        double mx = -INFINITY, s = 0;
        for (int j = 0; j < nk; j++) {
            double d = 0;
            for (int i = 0; i < hd; i++)
                d += q[h * hd + i] * k[(size_t)j * KV + g * hd + i];
            p[j] = d / sqrt((double)hd);
            mx = MAX(mx, p[j]);
        }
        for (int j = 0; j < nk; j++)
            s += (p[j] = exp(p[j] - mx));
        for (int i = 0; i < hd; i++) {
            double a = 0;
            for (int j = 0; j < nk; j++)
                a += p[j] / s * v[(size_t)j * KV + g * hd + i];
            out[h * hd + i] = a;
        }
    }
    g_free(p);
}

static void r_rope(double *x, int heads, int hd, int pos, double base)
{
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < hd / 2; i++) {
            double ang = pos * pow(base, -2.0 * i / hd), a = x[h * hd + i], b = x[h * hd + i + hd / 2];
            x[h * hd + i] = a * cos(ang) - b * sin(ang);
            x[h * hd + i + hd / 2] = b * cos(ang) + a * sin(ang);
        }
}

/* logits at the text rows (T_text, V): text rows alone through the layers, positions counted
 * over text; CA from each text row to its window's visual rows (none before the first image) */
static void ref_casa(const ClModel *m, const GArray *ids, const float *vis, double *logits)
{
    const ClModelConfig *c = &m->config;
    const ClModelWeights *w = &m->w;
    const int E = c->dec_dim, Hq = c->dec_heads, Hkv = c->dec_kv_heads, hd = E / Hq;
    const int KV = Hkv * hd, F = c->dec_mlp, V = c->vocab_size, n = (int)ids->len;
    const gint32 *id = (const gint32 *)ids->data;
    /* text rows, their window (first visual row, count), and the visual rows */
    int nt = 0, *win0 = g_new(int, n), *winn = g_new(int, n), *tid = g_new(int, n);
    int cur0 = -1, curn = 0, vr = 0;
    gboolean open = FALSE;
    for (int i = 0; i < n; i++) {
        if (id[i] == CL_DECODER_VISUAL) {
            if (!open)
                cur0 = vr, curn = 0;
            curn++, vr++;
            open = TRUE;
        } else {
            open = FALSE;
            tid[nt] = id[i], win0[nt] = cur0, winn[nt] = cur0 < 0 ? 0 : curn, nt++;
        }
    }
    double *x = g_new(double, (size_t)nt * E), *h = g_new(double, E), *q = g_new(double, E);
    double *k = g_new(double, (size_t)nt * KV), *v = g_new(double, (size_t)nt * KV);
    double *kc = g_new(double, (size_t)MAX(vr, 1) * KV), *vc = g_new(double, (size_t)MAX(vr, 1) * KV);
    double *att = g_new(double, E), *o = g_new(double, E), *g = g_new(double, F);
    double *u = g_new(double, F), *nx = g_new(double, (size_t)nt * E), *y = g_new(double, E);
    for (int t = 0; t < nt; t++)
        for (int e = 0; e < E; e++)
            x[(size_t)t * E + e] = w->embed[(size_t)tid[t] * E + e];
    for (int l = 0; l < c->dec_depth; l++) {
        const ClDecoderLayerWeights *L = &w->dec[l];
        const gboolean own = c->casa == CL_CASA_CA;
        for (int j = 0; j < vr; j++) {
            for (int e = 0; e < E; e++)
                y[e] = vis[(size_t)j * E + e];
            r_rmsnorm(h, y, L->casa_norm, E, c->norm_eps);
            r_matvec(kc + (size_t)j * KV, own ? L->casa_k : L->k, h, KV, E);
            r_matvec(vc + (size_t)j * KV, own ? L->casa_v : L->v, h, KV, E);
        }
        for (int t = 0; t < nt; t++) {
            r_rmsnorm(h, x + (size_t)t * E, L->attn_norm, E, c->norm_eps);
            r_matvec(k + (size_t)t * KV, L->k, h, KV, E);
            r_matvec(v + (size_t)t * KV, L->v, h, KV, E);
            r_rope(k + (size_t)t * KV, Hkv, hd, t, c->rope_base);
        }
        for (int t = 0; t < nt; t++) {
            double *xt = nx + (size_t)t * E;
            r_rmsnorm(h, x + (size_t)t * E, L->attn_norm, E, c->norm_eps);
            r_matvec(q, L->q, h, E, E);
            r_rope(q, Hq, hd, t, c->rope_base);
            r_attend(att, q, k, v, t + 1, Hq, Hkv, hd);
            r_matvec(o, L->o, att, E, E);
            for (int e = 0; e < E; e++)
                xt[e] = x[(size_t)t * E + e] + o[e];
            if (winn[t] > 0) {
                r_matvec(q, own ? L->casa_q : L->q, h, E, E);
                r_attend(att, q, kc + (size_t)win0[t] * KV, vc + (size_t)win0[t] * KV, winn[t],
                         Hq, Hkv, hd);
                r_matvec(o, own ? L->casa_o : L->o, att, E, E);
                for (int e = 0; e < E; e++)
                    xt[e] += o[e];
            }
        }
        for (int t = 0; t < nt; t++) {
            double *xt = nx + (size_t)t * E;
            r_rmsnorm(h, xt, L->mlp_norm, E, c->norm_eps);
            r_matvec(g, L->gate, h, F, E);
            r_matvec(u, L->up, h, F, E);
            for (int i = 0; i < F; i++)
                g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
            r_matvec(o, L->down, g, E, F);
            for (int e = 0; e < E; e++)
                x[(size_t)t * E + e] = xt[e] + o[e];
        }
    }
    const float *head = w->lm_head ? w->lm_head : w->embed;
    for (int t = 0; t < nt; t++) {
        r_rmsnorm(h, x + (size_t)t * E, w->dec_norm, E, c->norm_eps);
        r_matvec(logits + (size_t)t * V, head, h, V, E);
    }
    g_free(x), g_free(h), g_free(q), g_free(k), g_free(v), g_free(kc), g_free(vc), g_free(att);
    g_free(o), g_free(g), g_free(u), g_free(nx), g_free(y), g_free(win0), g_free(winn);
    g_free(tid);
}

/* ---- tests ----------------------------------------------------------------------------------- */

static void test_reference(gconstpointer data)
{
    ClCasaVariant variant = GPOINTER_TO_INT(data);
    g_autoptr(ClModel) m = make_model(variant);
    g_autoptr(GArray) ids = prompt(3, 3, 5, 1);
    g_autofree float *vis = visual_rows(12, 2);
    const int V = 300, n = (int)ids->len;
    g_autofree float *la = g_new(float, (size_t)n * V);
    g_autoptr(ClKVCache) c = cl_kv_cache_new(m, n);
    forward(m, c, ids, vis, la);
    g_assert_cmpint(cl_kv_cache_len(c), ==, 3 + 3 * 5); /* text positions only */
    g_autofree double *ref = g_new(double, (size_t)n * V);
    ref_casa(m, ids, vis, ref);
    double num = 0, den = 0;
    for (int i = 0, t = 0; i < n; i++) {
        if (g_array_index(ids, gint32, i) == CL_DECODER_VISUAL)
            continue;
        for (int j = 0; j < V; j++) {
            num = MAX(num, fabs(la[(size_t)i * V + j] - ref[(size_t)t * V + j]));
            den = MAX(den, fabs(ref[(size_t)t * V + j]));
        }
        t++;
    }
    g_test_message("casa %s against the float64 reference: %.2e of max |logit|",
                   cl_casa_variant_name(variant), num / den);
    g_assert_cmpfloat(num / den, <, 2e-5);
}

/* The KV cache holds text alone: its bytes do not grow with the images (one window each). */
static void test_kv_independent_of_images(void)
{
    g_autoptr(ClModel) m = make_model(CL_CASA_CA);
    size_t bytes[3];
    const int images[3] = { 1, 8, 32 };
    for (int i = 0; i < 3; i++) {
        g_autoptr(GArray) ids = prompt(3, images[i], 2, 3);
        g_autofree float *vis = visual_rows(4 * images[i], 4);
        /* the same capacity: the cache's size is its capacity, the window's is one image */
        g_autoptr(ClKVCache) c = cl_kv_cache_new(m, 200);
        forward(m, c, ids, vis, NULL);
        bytes[i] = cl_kv_cache_bytes(c);
        g_test_message("%d images: %zu bytes, %d positions cached", images[i], bytes[i],
                       cl_kv_cache_len(c));
    }
    g_assert_cmpuint(bytes[0], ==, bytes[1]);
    g_assert_cmpuint(bytes[1], ==, bytes[2]);
}

/* Text before the first image has no window: its logits are those of the text alone. */
static void test_text_before_image(void)
{
    g_autoptr(ClModel) m = make_model(CL_CASA_CA);
    g_autoptr(GArray) with = prompt(6, 2, 3, 5);
    g_autoptr(GArray) alone = prompt(6, 0, 0, 5);
    g_autofree float *vis = visual_rows(8, 6);
    const int V = 300;
    g_autofree float *a = g_new(float, (size_t)with->len * V),
                     *b = g_new(float, (size_t)alone->len * V);
    g_autoptr(ClKVCache) ca = cl_kv_cache_new(m, 64);
    g_autoptr(ClKVCache) cb = cl_kv_cache_new(m, 64);
    forward(m, ca, with, vis, a);
    forward(m, cb, alone, NULL, b);
    /* the first 6 rows: the same positions through the same prefill chunking */
    g_assert_cmpmem(a, 6 * V * sizeof(float), b, 6 * V * sizeof(float));
}

/* CA^φ (shared projections) equals CA whose own projections are copies of the SA's. */
static void test_shared_is_copied(void)
{
    g_autoptr(ClModel) shared = make_model(CL_CASA_SHARED);
    g_autoptr(ClModel) ca = make_model(CL_CASA_CA);
    cl_model_weights_init_casa(ca); /* casa.q/k/v/o := q/k/v/o */
    g_autoptr(GArray) ids = prompt(2, 2, 4, 7);
    g_autofree float *vis = visual_rows(8, 8);
    const int V = 300, n = (int)ids->len;
    g_autofree float *a = g_new(float, (size_t)n * V), *b = g_new(float, (size_t)n * V);
    g_autoptr(ClKVCache) c1 = cl_kv_cache_new(shared, n);
    g_autoptr(ClKVCache) c2 = cl_kv_cache_new(ca, n);
    forward(shared, c1, ids, vis, a);
    forward(ca, c2, ids, vis, b);
    g_assert_cmpmem(a, (size_t)n * V * sizeof(float), b, (size_t)n * V * sizeof(float));
}

/* An earlier image reaches later text only through its window's text in the KV cache: with the
 * self-attention's output zeroed (no text-to-text route), changing the first image leaves the
 * second window's logits exactly as they were; with it, they change. */
static void test_old_image_through_text(void)
{
    g_autoptr(ClModel) m = make_model(CL_CASA_CA);
    g_autoptr(GArray) ids = prompt(2, 2, 4, 9);
    g_autofree float *vis = visual_rows(8, 10), *vis2 = g_memdup2(vis, 8 * 32 * sizeof(float));
    for (int i = 0; i < 4 * 32; i++) /* the first image only */
        vis2[i] = -vis2[i];
    const int V = 300, n = (int)ids->len, tail = n - 4; /* the second window's text */
    g_autofree float *a = g_new(float, (size_t)n * V), *b = g_new(float, (size_t)n * V);
    for (int zero_sa = 1; zero_sa >= 0; zero_sa--) {
        if (zero_sa)
            for (int l = 0; l < m->config.dec_depth; l++)
                memset(m->w.dec[l].o, 0, sizeof(float) * 32 * 32);
        else {
            g_clear_pointer(&m, cl_model_free);
            m = make_model(CL_CASA_CA);
        }
        cl_model_weights_changed(m);
        g_autoptr(ClKVCache) c1 = cl_kv_cache_new(m, n);
        g_autoptr(ClKVCache) c2 = cl_kv_cache_new(m, n);
        forward(m, c1, ids, vis, a);
        forward(m, c2, ids, vis2, b);
        int same = memcmp(a + (size_t)tail * V, b + (size_t)tail * V, 4 * V * sizeof(float)) == 0;
        g_assert_cmpint(same, ==, zero_sa);
        /* the first window's own text always sees its image */
        g_assert_cmpint(memcmp(a + 6 * V, b + 6 * V, V * sizeof(float)), !=, 0);
    }
}

/* Decode steps after a prefill (the window stays), against one pass. */
static void test_cached_steps(void)
{
    g_autoptr(ClModel) m = make_model(CL_CASA_CA);
    g_autoptr(GArray) ids = prompt(3, 2, 6, 11);
    g_autofree float *vis = visual_rows(8, 12);
    const int V = 300, n = (int)ids->len, head = n - 4;
    g_autofree float *full = g_new(float, (size_t)n * V), *step = g_new(float, V);
    g_autoptr(ClKVCache) cf = cl_kv_cache_new(m, n);
    forward(m, cf, ids, vis, full);
    g_autoptr(ClKVCache) cs = cl_kv_cache_new(m, n);
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_decoder_forward(be, m, cs, (gint32 *)ids->data, head, vis, step, NULL, NULL,
                                     NULL, &err));
    double worst = 0;
    for (int t = head; t < n; t++) {
        g_assert_true(cl_decoder_forward(be, m, cs, &g_array_index(ids, gint32, t), 1, NULL,
                                         step, NULL, NULL, NULL, &err));
        for (int i = 0; i < V; i++)
            worst = MAX(worst, fabs((double)step[i] - full[(size_t)t * V + i]));
    }
    g_assert_no_error(err);
    g_assert_cmpfloat(worst, <, 1e-4);
}

static void test_config(void)
{
    ClModelConfig cfg;
    casa_config(&cfg, CL_CASA_SHARED);
    g_autofree char *json = cl_model_config_to_json(&cfg);
    g_assert_nonnull(strstr(json, "\"casa\":\"ca_shared\""));
    ClModelConfig back;
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_model_config_from_json(&back, json, &err));
    g_assert_cmpint(back.casa, ==, CL_CASA_SHARED);
    g_autoptr(GError) e1 = NULL;
    g_assert_false(cl_model_config_from_json(&back, "{\"casa\":\"cross\"}", &e1));
    g_assert_nonnull(strstr(e1->message, "off, ca, ca_shared"));
    g_autoptr(GError) e2 = NULL;
    g_assert_false(cl_model_config_from_json(
        &back, "{\"casa\":\"ca\",\"pvm\":{\"layers\":[1],\"rank\":8,\"heads\":2,\"mlp\":8}}",
        &e2));
    g_assert_nonnull(e2);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    be = cl_backend_cpu_new(0);
    g_test_add_data_func("/casa/reference/ca", GINT_TO_POINTER(CL_CASA_CA), test_reference);
    g_test_add_data_func("/casa/reference/ca_shared", GINT_TO_POINTER(CL_CASA_SHARED),
                         test_reference);
    g_test_add_func("/casa/kv-cache-independent-of-images", test_kv_independent_of_images);
    g_test_add_func("/casa/text-before-first-image", test_text_before_image);
    g_test_add_func("/casa/shared-equals-copied", test_shared_is_copied);
    g_test_add_func("/casa/old-image-through-text", test_old_image_through_text);
    g_test_add_func("/casa/cached-steps", test_cached_steps);
    g_test_add_func("/casa/config", test_config);
    int rc = g_test_run();
    cl_backend_free(be);
    return rc;
}
