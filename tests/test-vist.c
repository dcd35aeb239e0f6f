/* test-vist.c - VIST2 context compression (docs/MODEL.md §4.6): the incremental
 * render–encode–evict loop against one float64 pass over the whole sequence under VIST2's mask
 * and positions, for both masks; a chunk's raw text changes nothing later once its visual rows
 * are fixed (mask "image"); the KV size after n chunks; the tail rule; the renderer; the
 * compressed prompt and the compressed generation through cl_generate. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "nn/backend.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "model/model.h"
#include "refdec.h"
#include "model/vist.h"
#include "model/describe.h"
#include "train/jsonl.h"
#include "train/synthdata.h"
#include "train/trainmodel.h"

static ClBackend *be;

enum { V = 300, P = 5, L = 6 };

/* The tests' small shapes: 32-pixel images of 4 visual rows, a 2-layer decoder of width 32. */
static void small_config(ClModelConfig *cfg, int max_len)
{
    g_assert_true(cl_model_config_preset(cfg, "tiny", NULL));
    cfg->image_size = 32, cfg->patch_size = 8, cfg->enc_dim = 16, cfg->enc_depth = 1;
    cfg->enc_heads = 1, cfg->enc_mlp = 16, cfg->merger_hidden = 16;
    cfg->dec_dim = 32, cfg->dec_depth = 2, cfg->dec_heads = 4, cfg->dec_kv_heads = 2;
    cfg->dec_mlp = 48, cfg->max_len = max_len;
}

static ClModel *make_model(gboolean sees_text)
{
    ClModelConfig cfg;
    g_autoptr(GError) err = NULL;
    small_config(&cfg, 64);
    cfg.vocab_size = V, cfg.rope_base = 50.0;
    cl_config_set_vist(&cfg, L);
    cfg.vist_tail = 2;
    cfg.vist_sees_text = sees_text;
    ClModel *m = cl_model_new_random(&cfg, 9, &err);
    g_assert_no_error(err);
    ref_liven(m);
    return m;
}

static void make_ids(gint32 *ids, int n, guint32 seed)
{
    GRand *r = g_rand_new_with_seed(seed);
    for (int i = 0; i < n; i++)
        ids[i] = g_rand_int_range(r, 'a', 'z' + 1); /* letters: text the renderer can show */
    g_rand_free(r);
}

/* ---- the whole sequence under VIST2's mask and positions, in float64 ----------------------- */

/* rows in order: the prefix (P), then per chunk its text (L) and its rows (M), then the tail */
typedef struct {
    int m, chunks;
    gboolean sees_text;
} Layout;

/* -1: the prefix; else chunk i (0-based; chunks = the tail) and whether the row is visual */
static int chunk_of(const Layout *lo, int t, gboolean *visual, int *local)
{
    if (t < P) {
        *visual = FALSE, *local = t;
        return -1;
    }
    int r = t - P, i = r / (L + lo->m);
    if (i >= lo->chunks) {
        *visual = FALSE, *local = r - lo->chunks * (L + lo->m);
        return lo->chunks;
    }
    r -= i * (L + lo->m);
    *visual = r >= L;
    *local = *visual ? r - L : r;
    return i;
}

/* a text row of chunk i: the prefix, v_<i, its own text before it; a visual row of chunk i: the
 * prefix, v_<i, its own rows before it, and (mask "paper") its own text */
static gboolean vist_sees(int t, int j, gpointer data)
{
    const Layout *lo = data;
    gboolean vt, vj;
    int lt, lj;
    const int ct = chunk_of(lo, t, &vt, &lt), cj = chunk_of(lo, j, &vj, &lj);
    if (cj < 0)
        return TRUE;
    if (cj < ct)
        return vj;
    /* the same chunk (j <= t) */
    if (!vt)
        return !vj;
    return vj || lo->sees_text;
}

/* Pos(j) = P + Σ|v_<i| + j for text and visual rows of chunk i alike */
static int vist_position(int t, gpointer data)
{
    const Layout *lo = data;
    gboolean vis;
    int local;
    const int c = chunk_of(lo, t, &vis, &local);
    return c < 0 ? t : P + c * lo->m + local;
}

/* The loop: prefix, then per chunk its text (every row's logits) and the step (the last visual
 * row's logits), then a tail of `tail` rows. got: the logits of the rows in the layout's order
 * (the visual rows but the last of each chunk left 0); rows_out: each chunk's rows. */
static void run_loop(ClModel *m, const gint32 *ids, int chunks, int tail, float *got,
                     float *rows_out, int *lens)
{
    const int M = cl_config_n_visual(&m->config), E = m->config.dec_dim;
    g_autoptr(GError) err = NULL;
    g_autoptr(ClVist) vist = cl_vist_new(be, m, &err);
    g_assert_no_error(err);
    g_autoptr(ClKVCache) c = cl_kv_cache_new(m, 64);
    g_assert_true(cl_decoder_forward(be, m, c, ids, P, NULL, NULL, got, NULL, NULL, &err));
    int row = P;
    for (int i = 0; i < chunks; i++) {
        const gint32 *ci = ids + P + i * L;
        g_assert_true(cl_decoder_forward(be, m, c, ci, L, NULL, NULL, got + (size_t)row * V, NULL,
                                         NULL, &err));
        g_assert_no_error(err);
        row += L;
        g_assert_true(cl_vist_encode(vist, ci, L, rows_out + (size_t)i * M * E, &err));
        g_assert_true(cl_vist_compress_rows(vist, c, L, rows_out + (size_t)i * M * E,
                                            got + (size_t)(row + M - 1) * V, &err));
        g_assert_no_error(err);
        row += M;
        lens[i] = cl_kv_cache_len(c);
    }
    g_assert_true(cl_decoder_forward(be, m, c, ids + P + chunks * L, tail, NULL, NULL,
                                     got + (size_t)row * V, NULL, NULL, &err));
    g_assert_no_error(err);
    lens[chunks] = cl_kv_cache_len(c);
}

static void check_loop(gboolean sees_text)
{
    g_autoptr(ClModel) m = make_model(sees_text);
    const int M = cl_config_n_visual(&m->config), E = m->config.dec_dim;
    const int chunks = 3, tail = 2, T = P + chunks * (L + M) + tail;
    gint32 ids[P + 3 * L + 2];
    make_ids(ids, G_N_ELEMENTS(ids), 5);
    g_autofree float *got = g_new0(float, (size_t)T * V);
    g_autofree float *rows = g_new(float, (size_t)chunks * M * E);
    int lens[4];
    run_loop(m, ids, chunks, tail, got, rows, lens);

    /* KV size: the prefix, M rows per chunk, the raw text of the current chunk */
    for (int i = 0; i < chunks; i++)
        g_assert_cmpint(lens[i], ==, P + (i + 1) * M);
    g_assert_cmpint(lens[chunks], ==, P + chunks * M + tail);

    /* the reference: every row in order, the mask and the positions */
    gint32 *seq = g_new(gint32, T);
    for (int t = 0, k = 0; t < T; t++) {
        Layout lo0 = { M, chunks, sees_text };
        gboolean vis;
        int local;
        chunk_of(&lo0, t, &vis, &local);
        seq[t] = vis ? CL_DECODER_VISUAL : ids[k++];
    }
    Layout lo = { M, chunks, sees_text };
    RefHooks hooks = { .sees = vist_sees, .position = vist_position, .data = &lo };
    g_autofree double *x0 = ref_embed(m, seq, T, rows);
    g_autofree double *ref = g_new(double, (size_t)T * V);
    ref_decode_rows(m, x0, T, &hooks, ref);
    double num = 0, den = 0;
    int compared = 0;
    for (int t = 0; t < T; t++) {
        gboolean vis;
        int local;
        const int c = chunk_of(&lo, t, &vis, &local);
        if (vis && local != M - 1)
            continue; /* the loop reads only a chunk's last visual row's logits */
        (void)c;
        compared++;
        for (int k = 0; k < V; k++) {
            num = MAX(num, fabs(got[(size_t)t * V + k] - ref[(size_t)t * V + k]));
            den = MAX(den, fabs(ref[(size_t)t * V + k]));
        }
    }
    g_test_message("mask %s: the render-encode-evict loop (%d chunks of %d tokens -> %d rows, "
                   "a tail of %d) against one float64 pass under the mask and Pos(j): %.2e of max "
                   "|logit| over %d rows",
                   sees_text ? "paper" : "image", chunks, L, M, tail, num / den, compared);
    g_assert_cmpfloat(num / den, <, 2e-5);

    /* and the mask and positions matter: plain causal attention at positions 0.. is elsewhere */
    g_autofree double *plain = g_new(double, (size_t)T * V);
    ref_decode_rows(m, x0, T, NULL, plain);
    double far = 0;
    for (size_t i = (size_t)(T - tail) * V; i < (size_t)T * V; i++)
        far = MAX(far, fabs(got[i] - plain[i]));
    g_assert_cmpfloat(far / den, >, 1e-3);
    g_free(seq);
}

static void test_loop_image(void)
{
    check_loop(FALSE);
}

static void test_loop_paper(void)
{
    check_loop(TRUE);
}

/* VIST2 invariant: a chunk's raw text changed, its visual rows held: the later
 * logits are the same bit for bit under mask "image"; under the paper's mask the rows read the
 * text, so they are not. */
static void check_invariance(gboolean sees_text)
{
    g_autoptr(ClModel) m = make_model(sees_text);
    const int M = cl_config_n_visual(&m->config), E = m->config.dec_dim;
    gint32 a[P + 2 * L], b[P + 2 * L];
    make_ids(a, G_N_ELEMENTS(a), 8);
    memcpy(b, a, sizeof a);
    make_ids(b + P, L, 99); /* chunk 1's text differs */
    g_assert_true(memcmp(a + P, b + P, L * sizeof(gint32)) != 0);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClVist) vist = cl_vist_new(be, m, &err);
    g_autofree float *rows = g_new(float, (size_t)M * E);
    g_assert_true(cl_vist_encode(vist, a + P, L, rows, &err)); /* v̂_1: a's page */
    float out[2][L * V];
    const gint32 *seqs[2] = { a, b };
    for (int s = 0; s < 2; s++) {
        g_autoptr(ClKVCache) c = cl_kv_cache_new(m, 64);
        g_assert_true(
            cl_decoder_forward(be, m, c, seqs[s], P + L, NULL, NULL, NULL, NULL, NULL, &err));
        g_assert_no_error(err);
        g_assert_true(cl_vist_compress_rows(vist, c, L, rows, NULL, &err));
        g_assert_true(
            cl_decoder_forward(be, m, c, seqs[s] + P + L, L, NULL, NULL, out[s], NULL, NULL, &err));
        g_assert_no_error(err);
    }
    const gboolean same = memcmp(out[0], out[1], sizeof out[0]) == 0;
    g_test_message("mask %s: chunk 1's raw text changed, its visual rows held: chunk 2's logits %s",
                   sees_text ? "paper" : "image", same ? "bit for bit the same" : "differ");
    g_assert_true(same == !sees_text);
}

static void test_invariance(void)
{
    check_invariance(FALSE);
    check_invariance(TRUE);
}

/* §4.4 test 4: a tail of m tokens is compressed only when m > β */
static void test_tail_rule(void)
{
    ClModelConfig cfg;
    g_assert_true(cl_model_config_preset(&cfg, "tiny", NULL));
    cl_config_set_vist(&cfg, 0);
    g_assert_cmpint(cfg.vist_chunk, ==, 100); /* r = 4: 4 × 25 rows */
    g_assert_cmpint(cfg.vist_tail, ==, 25);
    int chunks = -1;
    g_assert_cmpint(cl_vist_plan(&cfg, 250, &chunks), ==, 250);
    g_assert_cmpint(chunks, ==, 3); /* 2 chunks + a tail of 50 > 25 */
    g_assert_cmpint(cl_vist_plan(&cfg, 220, &chunks), ==, 200);
    g_assert_cmpint(chunks, ==, 2); /* a tail of 20 stays text */
    g_assert_cmpint(cl_vist_plan(&cfg, 225, &chunks), ==, 200);
    g_assert_cmpint(cl_vist_plan(&cfg, 226, &chunks), ==, 226);
    g_assert_cmpint(cl_vist_plan(&cfg, 25, &chunks), ==, 0);
    g_assert_cmpint(chunks, ==, 0);
    g_assert_cmpint(cl_vist_plan(&cfg, 26, &chunks), ==, 26);
    g_assert_cmpint(chunks, ==, 1);
    cl_config_set_vist(&cfg, -1);
    g_assert_cmpint(cl_vist_plan(&cfg, 1000, &chunks), ==, 0);
    g_assert_cmpint(chunks, ==, 0);
}

/* The renderer: the same text gives the same page; other text another; ink where the text is;
 * text too long for the page is set smaller, then cut; odd bytes do not break it. */
static void test_render(void)
{
    ClModelConfig cfg;
    g_assert_true(cl_model_config_preset(&cfg, "tiny", NULL));
    cl_config_set_vist(&cfg, 0);
    const int S = cfg.image_size;
    g_autofree guint8 *a = g_new(guint8, S * S),
                                 *b = g_new(guint8, S * S), *c = g_new(guint8, S * S);
    int px = 0;
    gboolean cut = TRUE;
    const char *report = "Comparison: chest radiograph of 2026-03-02. Findings: the right lower "
                         "lobe opacity has decreased. No pleural effusion. Heart size normal.";
    cl_vist_render(&cfg, report, a, &px, &cut);
    g_assert_cmpint(px, ==, cfg.vist_font_px);
    g_assert_false(cut);
    cl_vist_render(&cfg, report, b, NULL, NULL);
    g_assert_cmpmem(a, S * S, b, S * S);
    cl_vist_render(&cfg, "Findings: unchanged.", c, NULL, NULL);
    g_assert_true(memcmp(a, c, S * S) != 0);
    /* ink: the first line's band is darker than the page's foot (the text is short) */
    long top = 0, foot = 0, dark = 0;
    for (int x = 0; x < S; x++)
        for (int y = 0; y < 12; y++) {
            top += 255 - a[y * S + x];
            foot += 255 - a[(S - 1 - y) * S + x];
        }
    for (int i = 0; i < S * S; i++)
        dark += a[i] < 128;
    g_assert_cmpint(top, >, 50 * 255);
    g_assert_cmpint(foot, ==, 0);
    g_assert_cmpint(dark, >, 100);
    /* a page's worth and more: smaller type, then cut */
    GString *lng = g_string_new(NULL);
    for (int i = 0; i < 200; i++)
        g_string_append(lng, "the nodule in the left upper lobe is stable. ");
    cl_vist_render(&cfg, lng->str, b, &px, &cut);
    g_assert_cmpint(px, ==, 4);
    g_assert_true(cut);
    g_string_free(lng, TRUE);
    /* invalid UTF-8 and control bytes */
    cl_vist_render(&cfg, "\xff\xfe broken \x01\x02 bytes \xe2\x82", b, NULL, &cut);
    g_assert_false(cut);
}

/* cl_generate with a compressed span equals the prompt made by hand with the span's pages'
 * rows in its place (mask "image"), and generation past a chunk compresses what it made: the
 * cache stays within the prompt + a chunk's text + the rows. */
static void test_generate(void)
{
    g_autoptr(ClModel) m = make_model(FALSE);
    const int M = cl_config_n_visual(&m->config), E = m->config.dec_dim;
    g_autoptr(GError) err = NULL;
    /* prompt: 3 tokens, a span of 2 chunks + 1 raw token (tail 1 <= 2), 2 tokens */
    gint32 prompt[3 + 2 * L + 1 + 2];
    make_ids(prompt, G_N_ELEMENTS(prompt), 31);
    ClGenerateOptions o;
    cl_generate_options_init(&o);
    o.max_new_tokens = 8;
    g_autoptr(ClVist) vist = cl_vist_new(be, m, &err);
    o.vist = vist;
    o.vist_from = 3;
    o.vist_len = 2 * L + 1;
    ClGenerateResult r1, r2;
    g_assert_true(cl_generate(be, m, prompt, G_N_ELEMENTS(prompt), NULL, &o, &r1, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(cl_vist_n_pages(vist), >=, 2);

    /* by hand: the two pages' rows in place of the chunks */
    g_autoptr(ClVist) v2 = cl_vist_new(be, m, &err);
    g_autofree float *rows = g_new(float, (size_t)2 * M * E);
    g_assert_true(cl_vist_encode(v2, prompt + 3, L, rows, &err));
    g_assert_true(cl_vist_encode(v2, prompt + 3 + L, L, rows + (size_t)M * E, &err));
    GArray *hand = g_array_new(FALSE, FALSE, sizeof(gint32));
    g_array_append_vals(hand, prompt, 3);
    const gint32 vis = CL_DECODER_VISUAL;
    for (int i = 0; i < 2 * M; i++)
        g_array_append_val(hand, vis);
    g_array_append_vals(hand, prompt + 3 + 2 * L, 3);
    ClGenerateOptions o2;
    cl_generate_options_init(&o2);
    o2.max_new_tokens = L - 1; /* before the generated text's first compression */
    g_assert_true(cl_generate(be, m, (const gint32 *)(gpointer)hand->data, (int)hand->len, rows,
                              &o2, &r2, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(r2.ids->len, >=, 1);
    const guint k = MIN(r1.ids->len, r2.ids->len);
    g_assert_cmpmem(r1.ids->data, k * sizeof(gint32), r2.ids->data, k * sizeof(gint32));
    g_test_message("generate with a compressed span: %u tokens, the same as the prompt built "
                   "with the pages' rows by hand",
                   k);
    cl_generate_result_clear(&r1);
    cl_generate_result_clear(&r2);
    g_array_unref(hand);

    /* generation past the model's max_len in raw text: 3 chunks of generated text compressed */
    ClGenerateOptions o3;
    cl_generate_options_init(&o3);
    o3.max_new_tokens = 3 * L + 2;
    g_autoptr(ClVist) v3 = cl_vist_new(be, m, &err);
    o3.vist = v3;
    o3.vist_from = 0;
    o3.vist_len = 0;
    ClGenerateResult r3;
    g_assert_true(cl_generate(be, m, prompt, 3, NULL, &o3, &r3, &err));
    g_assert_no_error(err);
    g_test_message("generated %u tokens, %u pages of them compressed (%s)", r3.ids->len,
                   cl_vist_n_pages(v3), cl_stop_reason_name(r3.stop_reason));
    g_assert_cmpuint(cl_vist_n_pages(v3), ==, r3.ids->len / L);
    cl_generate_result_clear(&r3);

    /* refused: beam search, a span holding an image row */
    o.beam_size = 2;
    g_assert_false(cl_generate(be, m, prompt, G_N_ELEMENTS(prompt), NULL, &o, &r3, &err));
    g_assert_error(err, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT);
    g_clear_error(&err);
    cl_generate_result_clear(&r3);
}

/* the cache's eviction: a range outside it and the caches it cannot serve are refused */
static void test_remove(void)
{
    g_autoptr(ClModel) m = make_model(FALSE);
    g_autoptr(GError) err = NULL;
    gint32 ids[10];
    make_ids(ids, 10, 3);
    g_autoptr(ClKVCache) c = cl_kv_cache_new(m, 16);
    g_assert_true(cl_decoder_forward(be, m, c, ids, 10, NULL, NULL, NULL, NULL, NULL, &err));
    g_assert_false(cl_kv_cache_remove(c, 8, 3, &err));
    g_assert_error(err, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT);
    g_clear_error(&err);
    g_assert_true(cl_kv_cache_remove(c, 2, 3, &err));
    g_assert_cmpint(cl_kv_cache_len(c), ==, 7);
    float a[V];
    g_assert_true(cl_decoder_forward(be, m, c, ids, 1, NULL, a, NULL, NULL, NULL, &err));
    g_assert_cmpint(cl_kv_cache_len(c), ==, 8);
    g_autoptr(ClKVCache) s = cl_kv_cache_new_streaming(m, 2, 4);
    g_assert_true(cl_decoder_forward(be, m, s, ids, 5, NULL, NULL, NULL, NULL, NULL, &err));
    g_assert_false(cl_kv_cache_remove(s, 0, 1, &err));
    g_assert_error(err, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT);
    g_clear_error(&err);
    /* a model without VIST2 has no compressor */
    ClModelConfig cfg = m->config;
    cl_config_set_vist(&cfg, -1);
    g_autoptr(ClModel) plain = cl_model_new_random(&cfg, 1, &err);
    g_assert_null(cl_vist_new(be, plain, &err));
    g_assert_error(err, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT);
}

/* the config: written and read back; combinations it does not serve refused */
static void test_config(void)
{
    ClModelConfig cfg, back;
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_model_config_preset(&cfg, "tiny", NULL));
    cl_config_set_vist(&cfg, 0);
    cfg.vist_sees_text = TRUE;
    g_autofree char *json = cl_model_config_to_json(&cfg);
    g_assert_nonnull(strstr(json, "\"vist\":{\"chunk\":100,\"tail\":25,\"font_px\":8,"
                                  "\"mask\":\"paper\"}"));
    g_assert_true(cl_model_config_from_json(&back, json, &err));
    g_assert_no_error(err);
    g_assert_cmpint(back.vist_chunk, ==, 100);
    g_assert_cmpint(back.vist_tail, ==, 25);
    g_assert_cmpint(back.vist_font_px, ==, 8);
    g_assert_true(back.vist_sees_text);
    ClModelConfig bad = cfg;
    bad.casa = CL_CASA_CA;
    g_assert_false(cl_model_config_validate(&bad, &err));
    g_assert_error(err, CL_MODEL_ERROR, CL_MODEL_ERROR_CONFIG);
    g_clear_error(&err);
    g_autofree char *bad_mask = g_strdup(json);
    char *at = strstr(bad_mask, "\"paper\"");
    memcpy(at, "\"sidew\"", 7);
    g_assert_false(cl_model_config_from_json(&back, bad_mask, &err));
    g_assert_nonnull(err);
}

/* A training sample with a context: a VIST2 model gets the context's pages (their visual
 * positions after the images', the tail rule's text after them), another model the text; the
 * pages' rows are the inference encoder's, so the trainer's logits are the decoder's. */
static void test_training_sample(void)
{
    ClModelConfig cfg;
    g_autoptr(GError) err = NULL;
    small_config(&cfg, 512);
    g_autoptr(ClModel) plain = cl_model_new_random(&cfg, 3, &err);
    g_assert_no_error(err);
    cl_config_set_vist(&cfg, 16);
    cfg.vist_tail = 4;
    g_autoptr(ClModel) vm = cl_model_new_random(&cfg, 3, &err);
    g_assert_no_error(err);
    const int M = cl_config_n_visual(&cfg);
    g_autoptr(ClChatConversation) conv =
        cl_chat_describe_conversation(CL_CHAT_DOMAIN_AERIAL, 2, "What changed?", &err);
    cl_chat_conversation_add(conv, CL_CHAT_ASSISTANT, "a road is built .");
    const char *context = "image 1 was acquired on 2019-03-14 .\nimage 2 was acquired on "
                          "2019-05-02 .";
    g_autoptr(GArray) ctx = cl_tokenizer_encode(vm->tokenizer, context, -1, FALSE);
    guint8 px[2][32 * 32 * 3];
    for (gsize i = 0; i < sizeof px[0]; i++)
        px[0][i] = (guint8)(i * 7), px[1][i] = (guint8)(i * 13);
    ClSynthImage si[2] = { { .width = 32, .height = 32, .channels = 3, .pixels = px[0] },
                           { .width = 32, .height = 32, .channels = 3, .pixels = px[1] } };
    g_autoptr(ClImage) a = cl_synth_image_to_image(&si[0]);
    g_autoptr(ClImage) b = cl_synth_image_to_image(&si[1]);
    const ClImage *imgs[2] = { a, b };
    g_autoptr(ClTrainSample) tp = cl_train_sample_from_turns_with_context(
        plain, cl_chat_conversation_turns(conv), cl_chat_conversation_len(conv), imgs, NULL, 2,
        context, FALSE, &err);
    g_assert_no_error(err);
    g_autoptr(ClTrainSample) tv = cl_train_sample_from_turns_with_context(
        vm, cl_chat_conversation_turns(conv), cl_chat_conversation_len(conv), imgs, NULL, 2,
        context, FALSE, &err);
    g_assert_no_error(err);
    int pages = 0;
    const int packed = cl_vist_plan(&cfg, (int)ctx->len, &pages);
    g_assert_cmpint(pages, >=, 2);
    g_assert_cmpint(tp->n_pages, ==, 0);
    g_assert_cmpint(tv->n_pages, ==, pages);
    g_assert_cmpint(tv->n_ids, ==,
                    tp->n_ids - (int)ctx->len + pages * M + ((int)ctx->len - packed));
    int vis_p = 0, vis_v = 0;
    for (int t = 0; t < tp->n_ids; t++)
        vis_p += tp->ids[t] == CL_DECODER_VISUAL;
    for (int t = 0; t < tv->n_ids; t++)
        vis_v += tv->ids[t] == CL_DECODER_VISUAL;
    g_assert_cmpint(vis_p, ==, 2 * M);
    g_assert_cmpint(vis_v, ==, (2 + pages) * M);
    g_assert_cmpint(tp->n_supervised, ==, tv->n_supervised);
    /* the context's text is in the plain sample */
    gboolean found = FALSE;
    for (int t = 0; t + (int)ctx->len <= tp->n_ids && !found; t++)
        found = memcmp(tp->ids + t, ctx->data, ctx->len * sizeof(gint32)) == 0;
    g_assert_true(found);
    /* the trainer's logits are the inference decoder's on the same sequence, the pages' rows
     * the inference encoder's */
    float *tvis = NULL, *tlog = NULL;
    g_assert_true(cl_train_forward_outputs(be, vm, tv, &tvis, &tlog, &err));
    g_assert_no_error(err);
    const size_t me = (size_t)M * cfg.dec_dim;
    g_autofree float *rows = g_new(float, (2 + pages) * me);
    memcpy(rows, tvis, 2 * me * sizeof(float));
    g_assert_true(cl_vist_encode_pages(be, vm, tv->page_pixels, pages, rows + 2 * me, &err));
    g_autoptr(ClKVCache) c = cl_kv_cache_new(vm, tv->n_ids);
    const int V = cfg.vocab_size;
    g_autofree float *ilog = g_new(float, (size_t)tv->n_ids * V);
    g_assert_true(
        cl_decoder_forward(be, vm, c, tv->ids, tv->n_ids, rows, NULL, ilog, NULL, NULL, &err));
    g_assert_no_error(err);
    double num = 0, den = 0;
    for (size_t i = 0; i < (size_t)tv->n_ids * V; i++) {
        num = MAX(num, fabs(ilog[i] - tlog[i]));
        den = MAX(den, fabs(ilog[i]));
    }
    g_test_message("a VIST2 training sample: %d context tokens -> %d pages (%d positions) + %d "
                   "text; the trainer's logits against the decoder's: %.2e of max |logit|",
                   (int)ctx->len, pages, pages * M, (int)ctx->len - packed, num / den);
    g_assert_cmpfloat(num / den, <, 1e-4);
    g_free(tvis);
    g_free(tlog);
    ClTrainStepStats st;
    g_assert_true(cl_train_loss(be, vm, tv, NULL, &st, &err));
    g_assert_true(isfinite(st.loss));
    /* a model without VIST2 refuses pages */
    g_assert_false(cl_train_loss(be, plain, tv, NULL, &st, &err));
    g_assert_error(err, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT);
}

/* A data set written by synth (aerial-log: the log in each line's "context") reads back as the
 * synthetic samples do: pages for a VIST2 model, the log's text for another. */
static void test_dataset_context(void)
{
    g_autofree char *dir = g_dir_make_tmp("cl-vist-XXXXXX", NULL);
    ClSynthOptions so;
    cl_synth_options_init(&so);
    so.width = so.height = 32, so.patch = 8;
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_synth_write_dataset(dir, "aerial-log", 5, 2, &so, TRUE, NULL, NULL, &err));
    g_assert_no_error(err);
    ClModelConfig cfg;
    small_config(&cfg, 2048);
    g_autoptr(ClModel) plain = cl_model_new_random(&cfg, 3, &err);
    cl_config_set_vist(&cfg, 0);
    g_autoptr(ClModel) vm = cl_model_new_random(&cfg, 3, &err);
    g_assert_no_error(err);
    g_autofree char *jsonl = g_build_filename(dir, "data.jsonl", NULL);
    ClDatasetOptions o;
    cl_dataset_options_init(&o);
    ClDataset *dp = cl_dataset_open(jsonl, plain, &o, &err);
    g_assert_no_error(err);
    ClDataset *dv = cl_dataset_open(jsonl, vm, &o, &err);
    g_assert_no_error(err);
    g_autoptr(ClTrainSample) sp = cl_dataset_get(dp, 0, &err);
    g_assert_no_error(err);
    g_autoptr(ClTrainSample) sv = cl_dataset_get(dv, 0, &err);
    g_assert_no_error(err);
    g_assert_cmpint(sp->n_pages, ==, 0);
    g_assert_cmpint(sv->n_pages, >, 0);
    g_assert_cmpint(sv->n_ids, <, sp->n_ids); /* the log's ~40 tokens a line as 25-row pages */
    g_test_message("aerial-log from its JSONL: %d positions with the log as text, %d with it as "
                   "%d pages",
                   sp->n_ids, sv->n_ids, sv->n_pages);
    cl_dataset_free(dp);
    cl_dataset_free(dv);
    g_autofree char *rm = g_strdup_printf("rm -rf '%s'", dir);
    g_assert_cmpint(system(rm), ==, 0);
}

/* describe with prior reports: a VIST2 model reads them as pages (fewer prompt positions than
 * the same weights reading them as text; the pages come back for thumbnails) */
static void test_describe_context(void)
{
    ClModelConfig cfg;
    g_autoptr(GError) err = NULL;
    small_config(&cfg, 1024);
    g_autoptr(ClModel) plain = cl_model_new_random(&cfg, 3, &err);
    cl_config_set_vist(&cfg, 0);
    g_autoptr(ClModel) vm = cl_model_new_random(&cfg, 3, &err);
    g_assert_no_error(err);
    guint8 px[2][32 * 32 * 3];
    for (gsize i = 0; i < sizeof px[0]; i++)
        px[0][i] = (guint8)(i * 3), px[1][i] = (guint8)(i * 5);
    ClSynthImage si[2] = { { .width = 32, .height = 32, .channels = 3, .pixels = px[0] },
                           { .width = 32, .height = 32, .channels = 3, .pixels = px[1] } };
    g_autoptr(ClImage) a = cl_synth_image_to_image(&si[0]);
    g_autoptr(ClImage) b = cl_synth_image_to_image(&si[1]);
    ClDescribeImage di[2] = { { .image = a }, { .image = b } };
    ClDescribeOptions o;
    cl_describe_options_init(&o);
    o.max_new_tokens = 4;
    o.heatmaps = FALSE;
    o.context = "2026-03-02: the right lower lobe opacity has decreased. No effusion. The heart "
                "is normal in size. Lines and tubes unchanged since the prior study.";
    ClDescribeResult rp, rv;
    g_assert_true(cl_describe_run(be, plain, di, 2, &o, &rp, &err));
    g_assert_no_error(err);
    g_assert_true(cl_describe_run(be, vm, di, 2, &o, &rv, &err));
    g_assert_no_error(err);
    g_assert_cmpint(rp.context_tokens, ==, rv.context_tokens);
    g_assert_cmpint(rp.context_pages, ==, 0);
    g_assert_cmpint(rv.context_pages, >, 0);
    g_assert_cmpuint(rv.context_page_pixels->len, ==, (guint)rv.context_pages);
    g_assert_nonnull(strstr(rv.prompt_text, "Prior reports: <image>"));
    int chunks = 0;
    const int packed = cl_vist_plan(&vm->config, rv.context_tokens, &chunks);
    g_test_message("describe with %d tokens of prior reports: %d pages (%d tokens packed)",
                   rv.context_tokens, chunks, packed);
    g_assert_cmpint(chunks, ==, rv.context_pages);
    cl_describe_result_clear(&rp);
    cl_describe_result_clear(&rv);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    be = cl_backend_cpu_new(0);
    g_test_add_func("/vist/loop-equals-masked-pass/image", test_loop_image);
    g_test_add_func("/vist/loop-equals-masked-pass/paper", test_loop_paper);
    g_test_add_func("/vist/raw-text-invariance", test_invariance);
    g_test_add_func("/vist/tail-rule", test_tail_rule);
    g_test_add_func("/vist/render", test_render);
    g_test_add_func("/vist/generate", test_generate);
    g_test_add_func("/vist/remove", test_remove);
    g_test_add_func("/vist/config", test_config);
    g_test_add_func("/vist/training-sample", test_training_sample);
    g_test_add_func("/vist/dataset-context", test_dataset_context);
    g_test_add_func("/vist/describe-context", test_describe_context);
    int rc = g_test_run();
    cl_backend_free(be);
    return rc;
}
