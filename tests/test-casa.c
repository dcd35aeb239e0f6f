/* test-casa.c - CASA, cross-attention beside the text self-attention (docs/MODEL.md §4.3):
 * a double-precision reference, the KV cache independent of the number of images, text before
 * the first image untouched by images, CA^φ equal to CA with copied projections, an old image
 * reaching later text only through its window's text, cached decode steps, config. */
#include <math.h>
#include <string.h>

#include <glib.h>

#include "nn/backend.h"
#include "model/decoder.h"
#include "model/model.h"
#include "refdec.h"
#include "train/jsonl.h"
#include "train/synthdata.h"
#include "model/tokenizer.h"

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

/* lively weights (refdec.h), the same for every name two models share */
static ClModel *model_from(const ClModelConfig *cfg)
{
    g_autoptr(GError) err = NULL;
    ClModel *m = cl_model_new_random(cfg, 5, &err);
    g_assert_no_error(err);
    ref_liven(m);
    return m;
}

static ClModel *make_model(ClCasaVariant v)
{
    ClModelConfig cfg;
    casa_config(&cfg, v);
    return model_from(&cfg);
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
    g_assert_true(cl_decoder_forward(be, m, c, (const gint32 *)ids->data, (int)ids->len, vis, NULL,
                                     logits_all, NULL, NULL, &err));
    g_assert_no_error(err);
}

/* ---- the float64 reference (refdec.h, and CASA's cross-attention here) ---- */

typedef struct {
    const float *vis;
    int nv, *win0, *winn;
    int layer;       /* whose keys kc/vc hold */
    double *kc, *vc; /* (nv, KV) */
    int *ws;         /* CA_{t+v}: each text row's window's first text row */
    double *hs;      /* CA_{t+v}: this layer's normalised rows so far (T, E) */
} CasaRef;

static void casa_hook(const ClModel *m, int l, int t, const double *h, double *xt, gpointer data)
{
    CasaRef *r = data;
    if (r->winn[t] == 0)
        return; /* before the first image */
    const ClModelConfig *c = &m->config;
    const ClDecoderLayerWeights *L = &m->w.dec[l];
    const int E = c->dec_dim, Hq = c->dec_heads, Hkv = c->dec_kv_heads, hd = E / Hq;
    const int KV = Hkv * hd;
    const gboolean own = c->casa == CL_CASA_CA;
    if (r->layer != l) { /* this layer's keys and values of every visual row */
        double *y = g_new(double, E), *ny = g_new(double, E);
        for (int j = 0; j < r->nv; j++) {
            for (int e = 0; e < E; e++)
                y[e] = r->vis[(size_t)j * E + e];
            ref_rmsnorm(ny, y, L->casa_norm, E, c->norm_eps);
            ref_matvec(r->kc + (size_t)j * KV, own ? L->casa_k : L->k, ny, KV, E);
            ref_matvec(r->vc + (size_t)j * KV, own ? L->casa_v : L->v, ny, KV, E);
        }
        g_free(y), g_free(ny);
        r->layer = l;
    }
    double *q = g_new(double, E), *att = g_new(double, E), *o = g_new(double, E);
    ref_matvec(q, own ? L->casa_q : L->q, h, E, E); /* no positions */
    if (c->casa_tv) {
        /* the window's visual keys at its first text position, its text up to t at theirs */
        memcpy(r->hs + (size_t)t * E, h, sizeof(double) * E);
        const int w = r->winn[t], ws = r->ws[t], nk = w + t - ws + 1;
        double *k = g_new(double, (size_t)nk * KV), *v = g_new(double, (size_t)nk * KV);
        memcpy(k, r->kc + (size_t)r->win0[t] * KV, sizeof(double) * w * KV);
        memcpy(v, r->vc + (size_t)r->win0[t] * KV, sizeof(double) * w * KV);
        for (int j = 0; j < w; j++)
            ref_rope(k + (size_t)j * KV, Hkv, hd, ws, c->rope_base);
        for (int j = ws; j <= t; j++) {
            double *kj = k + (size_t)(w + j - ws) * KV, *vj = v + (size_t)(w + j - ws) * KV;
            ref_matvec(kj, own ? L->casa_k : L->k, r->hs + (size_t)j * E, KV, E);
            ref_matvec(vj, own ? L->casa_v : L->v, r->hs + (size_t)j * E, KV, E);
            ref_rope(kj, Hkv, hd, j, c->rope_base);
        }
        ref_rope(q, Hq, hd, t, c->rope_base);
        ref_attend(att, q, k, v, nk, Hq, Hkv, hd, NULL);
        g_free(k), g_free(v);
    } else {
        ref_attend(att, q, r->kc + (size_t)r->win0[t] * KV, r->vc + (size_t)r->win0[t] * KV,
                   r->winn[t], Hq, Hkv, hd, NULL);
    }
    ref_matvec(o, own ? L->casa_o : L->o, att, E, E);
    for (int e = 0; e < E; e++)
        xt[e] += o[e];
    g_free(q), g_free(att), g_free(o);
}

/* logits at the text rows (T_text, V): text rows alone through the layers, positions counted
 * over text; CA from each text row to its window's visual rows (none before the first image) */
static int ref_replace_every;

static gboolean replaced(int l, gpointer data)
{
    return l % ref_replace_every == ref_replace_every - 1;
}

static void ref_casa(const ClModel *m, const GArray *ids, const float *vis, double *logits)
{
    ref_replace_every = m->config.casa_replace;
    const int n = (int)ids->len, E = m->config.dec_dim;
    const int KV = m->config.dec_kv_heads * (E / m->config.dec_heads);
    const gint32 *id = (const gint32 *)ids->data;
    int nt = 0, vr = 0, cur0 = 0, curn = 0;
    g_autofree int *win0 = g_new(int, n), *winn = g_new(int, n);
    g_autofree gint32 *tid = g_new(gint32, n);
    gboolean open = FALSE;
    for (int i = 0; i < n; i++) {
        if (id[i] == CL_DECODER_VISUAL) {
            if (!open)
                cur0 = vr, curn = 0;
            curn++, vr++;
            open = TRUE;
        } else {
            open = FALSE;
            tid[nt] = id[i], win0[nt] = cur0, winn[nt] = curn, nt++;
        }
    }
    g_autofree int *ws = g_new(int, MAX(nt, 1));
    for (int t = 0; t < nt; t++) /* a window's text: the rows after its visual rows */
        ws[t] = t > 0 && win0[t] == win0[t - 1] && winn[t] == winn[t - 1] ? ws[t - 1] : t;
    g_autofree double *hs = g_new(double, (size_t)MAX(nt, 1) * E);
    CasaRef r = { vis,
                  vr,
                  win0,
                  winn,
                  -1,
                  g_new(double, (size_t)MAX(vr, 1) * KV),
                        g_new(double, (size_t)MAX(vr, 1) * KV), ws, hs };
    RefHooks hooks = { .after_attention = casa_hook,
                       .data = &r,
                       .skip_self_attention = m->config.casa_replace ? replaced : NULL };
    g_autofree double *x0 = ref_embed(m, tid, nt, NULL);
    ref_decode_rows(m, x0, nt, &hooks, logits);
    g_free(r.kc), g_free(r.vc);
}

/* max |engine − reference| over the text rows' logits (la: every row's, ref: the text rows'),
 * and *den the reference's max |logit| */
static double text_rows_error(const GArray *ids, const float *la, const double *ref, int V,
                              double *den)
{
    double num = 0;
    *den = 0;
    for (guint i = 0, t = 0; i < ids->len; i++) {
        if (g_array_index(ids, gint32, i) == CL_DECODER_VISUAL)
            continue;
        for (int j = 0; j < V; j++) {
            num = MAX(num, fabs(la[(size_t)i * V + j] - ref[(size_t)t * V + j]));
            *den = MAX(*den, fabs(ref[(size_t)t * V + j]));
        }
        t++;
    }
    return num;
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
    double den = 0, num = text_rows_error(ids, la, ref, V, &den);
    g_test_message("casa %s against the float64 reference: %.2e of max |logit|",
                   cl_casa_variant_name(variant), num / den);
    g_assert_cmpfloat(num / den, <, 2e-5);
}

/* CA^# (casa_replace 2): layer 1 of 3 has the cross-attention alone, against the float64
 * reference; its cache holds keys and values for two layers, not three. */
static void test_replace(void)
{
    ClModelConfig cfg;
    casa_config(&cfg, CL_CASA_CA);
    cfg.casa_replace = 2;
    g_autoptr(GError) err = NULL;
    g_autoptr(ClModel) m = model_from(&cfg);
    g_autoptr(ClModel) full = make_model(CL_CASA_CA);
    g_autoptr(GArray) ids = prompt(3, 3, 5, 1);
    g_autofree float *vis = visual_rows(12, 2);
    const int V = 300, n = (int)ids->len;
    g_autofree float *la = g_new(float, (size_t)n * V);
    g_autoptr(ClKVCache) c = cl_kv_cache_new(m, n);
    forward(m, c, ids, vis, la);
    g_autofree double *ref = g_new(double, (size_t)n * V);
    ref_casa(m, ids, vis, ref);
    double den = 0, num = text_rows_error(ids, la, ref, V, &den);
    g_autoptr(ClKVCache) cf = cl_kv_cache_new(full, n);
    g_autofree float *lf = g_new(float, (size_t)n * V);
    forward(full, cf, ids, vis, lf);
    double diff = 0;
    for (size_t i = 0; i < (size_t)n * V; i++)
        diff = MAX(diff, fabs(la[i] - lf[i]));
    g_test_message("casa ca with every 2nd self-attention replaced, against the float64 "
                   "reference: %.2e of max |logit| (%.2f from the model without it); KV %zu "
                   "bytes against %zu",
                   num / den, diff / den, cl_kv_cache_bytes(c), cl_kv_cache_bytes(cf));
    g_assert_cmpfloat(num / den, <, 2e-5);
    g_assert_cmpfloat(diff / den, >, 1e-3);
    g_assert_cmpuint(cl_kv_cache_bytes(c), <, cl_kv_cache_bytes(cf));
    /* refused: without casa, every layer, more than the depth */
    cfg.casa_replace = 1;
    g_assert_false(cl_model_config_validate(&cfg, NULL));
    cfg.casa_replace = 2, cfg.casa = CL_CASA_OFF;
    g_assert_false(cl_model_config_validate(&cfg, NULL));
}

/* CA_{t+v} (casa_tv), own and shared projections, with CA^# and split into steps: against the
 * float64 reference, and far from plain CA. */
static void test_tv(void)
{
    for (int variant = CL_CASA_CA; variant <= CL_CASA_SHARED; variant++)
        for (int replace = 0; replace <= 2; replace += 2) {
            ClModelConfig cfg;
            casa_config(&cfg, variant);
            cfg.casa_tv = TRUE;
            cfg.casa_replace = replace;
            g_autoptr(GError) err = NULL;
            g_autoptr(ClModel) m = model_from(&cfg);
            g_autoptr(GArray) ids = prompt(3, 3, 5, 1);
            g_autofree float *vis = visual_rows(12, 2);
            const int V = 300, n = (int)ids->len;
            g_autofree float *la = g_new(float, (size_t)n * V);
            g_autoptr(ClKVCache) c = cl_kv_cache_new(m, n);
            forward(m, c, ids, vis, la);
            /* the same, the last image's text one position at a time */
            g_autofree float *lb = g_new(float, (size_t)n * V);
            g_autoptr(ClKVCache) c2 = cl_kv_cache_new(m, n);
            g_assert_true(cl_decoder_forward(be, m, c2, (const gint32 *)ids->data, n - 4, vis, NULL,
                                             lb, NULL, NULL, &err));
            for (int i = n - 4; i < n; i++)
                g_assert_true(cl_decoder_forward(be, m, c2, &g_array_index(ids, gint32, i), 1, NULL,
                                                 lb + (size_t)i * V, NULL, NULL, NULL, &err));
            g_assert_no_error(err);
            g_autofree double *ref = g_new(double, (size_t)n * V);
            ref_casa(m, ids, vis, ref);
            double den = 0, num = text_rows_error(ids, la, ref, V, &den);
            double steps = text_rows_error(ids, lb, ref, V, &den);
            g_test_message("casa %s t+v%s against the float64 reference: %.2e of max |logit| "
                           "(decode steps %.2e)",
                           cl_casa_variant_name(variant), replace ? " with CA^#" : "", num / den,
                           steps / den);
            g_assert_cmpfloat(num / den, <, 2e-5);
            g_assert_cmpfloat(steps / den, <, 2e-5);
            /* plain CA (no text, no positions in the cross-attention) is elsewhere */
            m->config.casa_tv = FALSE;
            ref_casa(m, ids, vis, ref);
            double far = text_rows_error(ids, la, ref, V, &(double){ 0 });
            g_assert_cmpfloat(far / den, >, 1e-3);
        }
}

/* The gist token (casa_gist): describe and the trainer put <image> after each image's rows, as
 * text; the decoder runs it as the window's first text row (the float64 reference agrees), it
 * stays in the cache, and it carries the image on after the image's window has closed. */
static void test_gist(void)
{
    ClModelConfig cfg;
    casa_config(&cfg, CL_CASA_CA);
    cfg.casa_gist = TRUE;
    g_autoptr(GError) err = NULL;
    g_autoptr(ClModel) m = model_from(&cfg);
    g_assert_cmpint(cl_config_image_positions(&cfg), ==, 5);
    /* the prompt: 3 text, then per image 4 rows, the gist and 5 text */
    g_autoptr(GArray) plain = prompt(3, 3, 5, 1);
    GArray *ids = g_array_new(FALSE, FALSE, sizeof(gint32));
    for (guint i = 0; i < plain->len; i++) {
        const gint32 id = g_array_index(plain, gint32, i);
        g_array_append_val(ids, id);
        if (id == CL_DECODER_VISUAL &&
            (i + 1 == plain->len || g_array_index(plain, gint32, i + 1) != CL_DECODER_VISUAL)) {
            const gint32 gist = CL_TOKEN_IMAGE;
            g_array_append_val(ids, gist);
        }
    }
    g_autofree float *vis = visual_rows(12, 2);
    const int V = 300, n = (int)ids->len;
    g_autofree float *la = g_new(float, (size_t)n * V);
    g_autoptr(ClKVCache) c = cl_kv_cache_new(m, n);
    forward(m, c, ids, vis, la);
    g_assert_cmpint(cl_kv_cache_len(c), ==, 3 + 3 * (1 + 5)); /* the gists are in the cache */
    g_autofree double *ref = g_new(double, (size_t)n * V);
    ref_casa(m, ids, vis, ref);
    double den = 0, num = text_rows_error(ids, la, ref, V, &den);
    g_test_message("casa ca with gist tokens against the float64 reference: %.2e of max |logit|",
                   num / den);
    g_assert_cmpfloat(num / den, <, 2e-5);
    /* the trainer's samples carry the gist after each image, unsupervised */
    g_autoptr(ClChatConversation) conv =
        cl_chat_describe_conversation(CL_CHAT_DOMAIN_SHAPES, 2, NULL, &err);
    cl_chat_conversation_add(conv, CL_CHAT_ASSISTANT, "nothing has changed .");
    guint8 px[2][32 * 32 * 3];
    memset(px, 60, sizeof px);
    ClSynthImage si[2] = { { .width = 32, .height = 32, .channels = 3, .pixels = px[0] },
                           { .width = 32, .height = 32, .channels = 3, .pixels = px[1] } };
    g_autoptr(ClImage) a = cl_synth_image_to_image(&si[0]);
    g_autoptr(ClImage) b = cl_synth_image_to_image(&si[1]);
    const ClImage *imgs[2] = { a, b };
    g_autoptr(ClTrainSample) s =
        cl_train_sample_from_turns(m, cl_chat_conversation_turns(conv),
                                   cl_chat_conversation_len(conv), imgs, NULL, 2, FALSE, &err);
    g_assert_no_error(err);
    int gists = 0;
    for (int t = 1; t < s->n_ids; t++)
        if (s->ids[t] == CL_TOKEN_IMAGE) {
            gists++;
            g_assert_cmpint(s->ids[t - 1], ==, CL_DECODER_VISUAL);
            g_assert_cmpint(s->mask[t - 1], ==, 0);
        }
    g_assert_cmpint(gists, ==, 2);
    g_array_unref(ids);
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
        g_assert_true(cl_decoder_forward(be, m, cs, &g_array_index(ids, gint32, t), 1, NULL, step,
                                         NULL, NULL, NULL, &err));
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
        &back, "{\"casa\":\"ca\",\"pvm\":{\"layers\":[1],\"rank\":8,\"heads\":2,\"mlp\":8}}", &e2));
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
    g_test_add_func("/casa/replace-every-2", test_replace);
    g_test_add_func("/casa/gist", test_gist);
    g_test_add_func("/casa/tv", test_tv);
    int rc = g_test_run();
    cl_backend_free(be);
    return rc;
}
