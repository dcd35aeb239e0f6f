/* test-gguf.c - the GGUF reader: files written by the test (every value type, every tensor type),
 * dequantization against the block formats' definitions, and every malformation refused with a
 * message naming it (truncation at every byte, absurd counts, bad alignment, overlaps, unknown
 * types, nested arrays, duplicate keys and tensors, invalid UTF-8). */
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "model/config.h"
#include "model/gguf.h"
#include "model/model.h"
#include "model/gguf-model.h"
#include "model/effnet.h"
#include "model/chat.h"
#include "model/generate.h"
#include "model/decoder.h"
#include <json-glib/json-glib.h>
#include "nn/backend.h"
#include "nn/half.h"
#include "nn/quant.h"

/* ---- a small GGUF writer -------------------------------------------------------------------- */

typedef struct {
    GByteArray *b;
} W;

static void w_bytes(W *w, const void *p, gsize n)
{
    g_byte_array_append(w->b, p, (guint)n);
}
static void w_u32(W *w, guint32 v)
{
    v = GUINT32_TO_LE(v);
    w_bytes(w, &v, 4);
}
static void w_u64(W *w, guint64 v)
{
    v = GUINT64_TO_LE(v);
    w_bytes(w, &v, 8);
}
static void w_str(W *w, const char *s)
{
    w_u64(w, strlen(s));
    w_bytes(w, s, strlen(s));
}

static void w_header(W *w, guint32 version, guint64 n_tensors, guint64 n_kv)
{
    w_bytes(w, "GGUF", 4);
    w_u32(w, version);
    w_u64(w, n_tensors);
    w_u64(w, n_kv);
}

static void w_kv_u32(W *w, const char *key, guint32 v)
{
    w_str(w, key);
    w_u32(w, CL_GGUF_U32);
    w_u32(w, v);
}

static void w_pad(W *w, guint align)
{
    while (w->b->len % align)
        g_byte_array_append(w->b, (const guint8 *)"\0", 1);
}

/* A Q8_0 block of 32 values d·q, q = k − 16. */
static void q8_block(guint8 *b, float d)
{
    uint16_t h = cl_f32_to_f16(d);
    b[0] = h & 255, b[1] = h >> 8;
    for (int k = 0; k < 32; k++)
        b[2 + k] = (guint8)(gint8)(k - 16);
}

/* A Q4_1 block: d, m, nibble j = j % 16 (low), 15 − j % 16 (high). */
static void q41_block(guint8 *b, float d, float m)
{
    uint16_t hd = cl_f32_to_f16(d), hm = cl_f32_to_f16(m);
    b[0] = hd & 255, b[1] = hd >> 8, b[2] = hm & 255, b[3] = hm >> 8;
    for (int j = 0; j < 16; j++)
        b[4 + j] = (guint8)(j | (15 - j) << 4);
}

/* A well-formed file: metadata of every kind and four tensors (F32 2×3, F16 4, Q8_0 32×2,
 * Q4_1 32). */
static GByteArray *good_file(void)
{
    W w = { g_byte_array_new() };
    w_header(&w, 3, 4, 6);
    w_str(&w, "general.architecture");
    w_u32(&w, CL_GGUF_STRING);
    w_str(&w, "llama");
    w_kv_u32(&w, "llama.block_count", 30);
    w_str(&w, "llama.rope.freq_base");
    w_u32(&w, CL_GGUF_F32);
    float base = 100000.0f;
    w_bytes(&w, &base, 4);
    w_str(&w, "tokenizer.ggml.tokens");
    w_u32(&w, CL_GGUF_ARRAY);
    w_u32(&w, CL_GGUF_STRING);
    w_u64(&w, 3);
    w_str(&w, "a");
    w_str(&w, "\xc4\xa0the");
    w_str(&w, "<|im_end|>");
    w_str(&w, "tokenizer.ggml.token_type");
    w_u32(&w, CL_GGUF_ARRAY);
    w_u32(&w, CL_GGUF_I32);
    w_u64(&w, 2);
    w_u32(&w, 1);
    w_u32(&w, (guint32)-3);
    w_kv_u32(&w, "general.alignment", 32);
    /* tensor infos: name, n_dims, dims, type, offset */
    w_str(&w, "a.f32");
    w_u32(&w, 2);
    w_u64(&w, 3);
    w_u64(&w, 2);
    w_u32(&w, CL_GGML_F32);
    w_u64(&w, 0);
    w_str(&w, "b.f16");
    w_u32(&w, 1);
    w_u64(&w, 4);
    w_u32(&w, CL_GGML_F16);
    w_u64(&w, 32);
    w_str(&w, "c.q8");
    w_u32(&w, 2);
    w_u64(&w, 32);
    w_u64(&w, 2);
    w_u32(&w, CL_GGML_Q8_0);
    w_u64(&w, 64);
    w_str(&w, "d.q41");
    w_u32(&w, 1);
    w_u64(&w, 32);
    w_u32(&w, CL_GGML_Q4_1);
    w_u64(&w, 160);
    w_pad(&w, 32);
    float f[6] = { 1, -2, 3.5f, 0, 1e-3f, -7 };
    w_bytes(&w, f, sizeof f);
    w_pad(&w, 32);
    for (int k = 0; k < 4; k++) {
        uint16_t h = cl_f32_to_f16(0.25f * (float)(k - 1));
        w_bytes(&w, &h, 2);
    }
    w_pad(&w, 32);
    guint8 blk[34];
    q8_block(blk, 0.5f);
    w_bytes(&w, blk, 34);
    q8_block(blk, -0.125f);
    w_bytes(&w, blk, 34);
    w_pad(&w, 32);
    guint8 b41[20];
    q41_block(b41, 0.5f, -1.0f);
    w_bytes(&w, b41, 20);
    return w.b;
}

static void test_good(void)
{
    g_autoptr(GByteArray) b = good_file();
    g_autoptr(GError) err = NULL;
    g_autoptr(ClGguf) g = cl_gguf_parse(b->data, b->len, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(g->version, ==, 3);
    g_assert_cmpuint(g->tensors->len, ==, 4);
    g_assert_cmpstr(cl_gguf_get_string(g, "general.architecture", NULL), ==, "llama");
    guint64 u;
    double f;
    g_assert_true(cl_gguf_get_uint(g, "llama.block_count", &u, NULL));
    g_assert_cmpuint(u, ==, 30);
    g_assert_true(cl_gguf_get_float(g, "llama.rope.freq_base", &f, NULL));
    g_assert_cmpfloat(f, ==, 100000.0);
    g_assert_false(cl_gguf_get_uint(g, "general.architecture", &u, &err));
    g_assert_nonnull(strstr(err->message, "general.architecture"));
    g_clear_error(&err);
    g_assert_null(cl_gguf_get_string(g, "no.such.key", &err));
    g_assert_nonnull(strstr(err->message, "missing"));
    g_clear_error(&err);
    const ClGgufValue *toks = cl_gguf_get(g, "tokenizer.ggml.tokens");
    g_assert_cmpuint(toks->n, ==, 3);
    g_assert_cmpstr(toks->strs[1], ==, "\xc4\xa0the");
    g_assert_cmpstr(toks->strs[2], ==, "<|im_end|>");
    const ClGgufValue *tt = cl_gguf_get(g, "tokenizer.ggml.token_type");
    g_assert_cmpint(tt->nums_i[1], ==, -3);

    const ClGgufTensor *a = cl_gguf_tensor(g, "a.f32");
    g_assert_cmpuint(a->ne[0], ==, 3);
    g_assert_cmpuint(a->ne[1], ==, 2);
    g_autofree float *av = cl_gguf_tensor_to_f32(a, NULL);
    g_assert_cmpfloat(av[2], ==, 3.5f);
    g_assert_cmpfloat(av[5], ==, -7.0f);
    g_autofree float *bv = cl_gguf_tensor_to_f32(cl_gguf_tensor(g, "b.f16"), NULL);
    g_assert_cmpfloat(bv[0], ==, -0.25f);
    g_assert_cmpfloat(bv[3], ==, 0.5f);
    g_autofree float *cv = cl_gguf_tensor_to_f32(cl_gguf_tensor(g, "c.q8"), NULL);
    for (int k = 0; k < 32; k++) {
        g_assert_cmpfloat(cv[k], ==, 0.5f * (float)(k - 16));
        g_assert_cmpfloat(cv[32 + k], ==, -0.125f * (float)(k - 16));
    }
    g_autofree float *dv = cl_gguf_tensor_to_f32(cl_gguf_tensor(g, "d.q41"), NULL);
    for (int j = 0; j < 16; j++) {
        g_assert_cmpfloat(dv[j], ==, 0.5f * (float)j - 1.0f);
        g_assert_cmpfloat(dv[16 + j], ==, 0.5f * (float)(15 - j) - 1.0f);
    }
    /* Q4_0 shares the nibble layout; its offset is −8·d */
    guint8 q40[18] = { 0 };
    uint16_t h = cl_f32_to_f16(2.0f);
    q40[0] = h & 255, q40[1] = h >> 8;
    q40[2] = 0x3f; /* element 0: 15, element 16: 3 */
    float y[32];
    cl_ggml_dequantize(CL_GGML_Q4_0, q40, y, 32);
    g_assert_cmpfloat(y[0], ==, 14.0f);
    g_assert_cmpfloat(y[16], ==, -10.0f);
    g_assert_cmpfloat(y[1], ==, -16.0f);
    g_assert_cmpuint(cl_ggml_row_bytes(CL_GGML_Q4_1, 64), ==, 40);
    g_assert_cmpuint(cl_ggml_row_bytes(CL_GGML_Q8_0, 33), ==, 0);
}

/* Every prefix of a good file is refused with an error, never a crash or a read past it. */
static void test_truncated(void)
{
    g_autoptr(GByteArray) b = good_file();
    for (guint n = 0; n < b->len; n++) {
        guint8 *copy = g_memdup2(b->data, n ? n : 1);
        GError *err = NULL;
        ClGguf *g = cl_gguf_parse(copy, n, &err);
        if (g)
            g_error("a %u-byte prefix of a %u-byte file parsed", n, b->len);
        g_assert_error(err, CL_MODEL_ERROR, CL_MODEL_ERROR_FILE);
        g_error_free(err);
        g_free(copy);
    }
}

static void expect_refused(GByteArray *b, const char *needle)
{
    GError *err = NULL;
    ClGguf *g = cl_gguf_parse(b->data, b->len, &err);
    if (g)
        g_error("a file that should be refused ('%s') parsed", needle);
    g_assert_error(err, CL_MODEL_ERROR, CL_MODEL_ERROR_FILE);
    if (!strstr(err->message, needle))
        g_error("expected '%s' in: %s", needle, err->message);
    g_error_free(err);
    g_byte_array_unref(b);
}

/* A file with one metadata entry written by `kv` and no tensors. */
static GByteArray *one_kv(void (*kv)(W *w))
{
    W w = { g_byte_array_new() };
    w_header(&w, 3, 0, 1);
    kv(&w);
    return w.b;
}

static void kv_nested(W *w)
{
    w_str(w, "k");
    w_u32(w, CL_GGUF_ARRAY);
    w_u32(w, CL_GGUF_ARRAY);
    w_u64(w, 1);
}
static void kv_huge_array(W *w)
{
    w_str(w, "k");
    w_u32(w, CL_GGUF_ARRAY);
    w_u32(w, CL_GGUF_U64);
    w_u64(w, G_MAXUINT64 / 2);
}
static void kv_bad_type(W *w)
{
    w_str(w, "k");
    w_u32(w, 13);
    w_u32(w, 0);
}
static void kv_bad_utf8(W *w)
{
    w_str(w, "k");
    w_u32(w, CL_GGUF_STRING);
    w_str(w, "a\xff");
}
static void kv_huge_string(W *w)
{
    w_str(w, "k");
    w_u32(w, CL_GGUF_STRING);
    w_u64(w, G_MAXUINT64);
}
static void kv_bool(W *w)
{
    w_str(w, "k");
    w_u32(w, CL_GGUF_BOOL);
    w_bytes(w, "\x02", 1);
}
static void kv_alignment(W *w)
{
    w_kv_u32(w, "general.alignment", 24);
}

static GByteArray *one_tensor(guint32 nd, guint64 ne0, guint32 type, guint64 offset, guint64 data)
{
    W w = { g_byte_array_new() };
    w_header(&w, 3, 1, 0);
    w_str(&w, "t");
    w_u32(&w, nd);
    for (guint32 d = 0; d < nd && d < 8; d++)
        w_u64(&w, d == 0 ? ne0 : 1);
    w_u32(&w, type);
    w_u64(&w, offset);
    w_pad(&w, 32);
    for (guint64 k = 0; k < data; k++)
        g_byte_array_append(w.b, (const guint8 *)"\1", 1);
    return w.b;
}

static void test_malformed(void)
{
    W w = { g_byte_array_new() };
    w_bytes(&w, "GGUG", 4);
    w_u32(&w, 3);
    expect_refused(w.b, "magic");
    w.b = g_byte_array_new();
    w_header(&w, 1, 0, 0);
    expect_refused(w.b, "version 1");
    w.b = g_byte_array_new();
    w_header(&w, 3, G_MAXUINT64, 0);
    expect_refused(w.b, "cannot fit");
    expect_refused(one_kv(kv_nested), "arrays of array");
    expect_refused(one_kv(kv_huge_array), "cannot fit");
    expect_refused(one_kv(kv_bad_type), "unknown value type 13");
    expect_refused(one_kv(kv_bad_utf8), "UTF-8");
    expect_refused(one_kv(kv_huge_string), "exceeds the limit");
    expect_refused(one_kv(kv_bool), "bool");
    expect_refused(one_kv(kv_alignment), "power of two");
    expect_refused(one_tensor(5, 4, CL_GGML_F32, 0, 64), "dimensions");
    expect_refused(one_tensor(1, 0, CL_GGML_F32, 0, 64), "empty or too large");
    expect_refused(one_tensor(1, 4, 12, 0, 64), "Q4_K");
    expect_refused(one_tensor(1, 4, 99, 0, 64), "not supported");
    expect_refused(one_tensor(1, 40, CL_GGML_Q8_0, 0, 64), "whole number");
    expect_refused(one_tensor(1, 4, CL_GGML_F32, 16, 64), "alignment");
    expect_refused(one_tensor(1, 32, CL_GGML_F32, 0, 64), "past its end");
    expect_refused(one_tensor(1, 4, CL_GGML_F32, G_MAXUINT64 - 31, 64), "past its end");

    /* two tensors over the same bytes, and a name used twice */
    for (int dup = 0; dup < 2; dup++) {
        w.b = g_byte_array_new();
        w_header(&w, 3, 2, 0);
        for (int k = 0; k < 2; k++) {
            w_str(&w, dup || k == 0 ? "t" : "u");
            w_u32(&w, 1);
            w_u64(&w, 16);
            w_u32(&w, CL_GGML_F32);
            w_u64(&w, k ? 32 : 0);
        }
        w_pad(&w, 32);
        for (int k = 0; k < 128; k++)
            g_byte_array_append(w.b, (const guint8 *)"\0", 1);
        expect_refused(w.b, dup ? "appears twice" : "overlaps");
    }
    /* duplicate metadata key */
    w.b = g_byte_array_new();
    w_header(&w, 3, 0, 2);
    w_kv_u32(&w, "k", 1);
    w_kv_u32(&w, "k", 2);
    expect_refused(w.b, "twice");
}

/* Random byte flips of a good file: refused or parsed, never a crash (ASan/valgrind would show
 * a read outside the buffer). */
static void test_flips(void)
{
    g_autoptr(GByteArray) b = good_file();
    GRand *r = g_rand_new_with_seed(7);
    for (int it = 0; it < 20000; it++) {
        g_autofree guint8 *copy = g_memdup2(b->data, b->len);
        int n = g_rand_int_range(r, 1, 4);
        for (int k = 0; k < n; k++)
            copy[g_rand_int_range(r, 0, (gint32)b->len)] = (guint8)g_rand_int(r);
        GError *err = NULL;
        ClGguf *g = cl_gguf_parse(copy, b->len, &err);
        if (g) {
            for (guint t = 0; t < g->tensors->len; t++) {
                const ClGgufTensor *tt = g->tensors->pdata[t];
                g_assert_true(tt->data + tt->nbytes <= copy + b->len);
            }
            cl_gguf_free(g);
        } else {
            g_assert_nonnull(err);
            g_error_free(err);
        }
    }
    g_rand_free(r);
}

/* ---- a small Llama model whose matrices are F16 or BF16 -------------------------------------- */

/* Its shape: 2 blocks, width 64, 2 heads of 32 (1 key/value head), FFN 128 — every row a whole
 * number of blocks of 32, as keep_quantized needs. */
enum { HM_DEPTH = 2, HM_E = 64, HM_HEADS = 2, HM_KV = 1, HM_F = 128, HM_HD = HM_E / HM_HEADS };

/* The file's vocabulary: the 256 bytes in GPT-2's alphabet, three control tokens, and the tokens
 * of the merges "h e", "l l", "he ll". */
static const char *const hm_merges[] = { "h e", "l l", "he ll" };
static const char *const hm_extra[] = { "<|endoftext|>", "<|im_start|>", "<|im_end|>", "he", "ll",
                                        "hell" };
#define HM_N_TOKENS (256 + (int)G_N_ELEMENTS(hm_extra))

static char *byte_token(int b)
{
    static int rank[256];
    int n = 0;
    for (int k = 0; k < 256; k++) {
        gboolean printable = (k >= '!' && k <= '~') || (k >= 0xa1 && k <= 0xac) || k >= 0xae;
        rank[k] = printable ? k : 256 + n++;
    }
    char buf[8] = { 0 };
    g_unichar_to_utf8((gunichar)rank[b], buf);
    return g_strdup(buf);
}

static void w_kv_str(W *w, const char *key, const char *v)
{
    w_str(w, key);
    w_u32(w, CL_GGUF_STRING);
    w_str(w, v);
}

static void w_kv_f32(W *w, const char *key, float v)
{
    w_str(w, key);
    w_u32(w, CL_GGUF_F32);
    w_bytes(w, &v, 4);
}

typedef struct {
    char *name;
    int rows, cols; /* cols is ggml's ne[0] */
    guint32 type;   /* CL_GGML_F32, F16 or BF16 */
    float *v;       /* rows × cols */
} HmTensor;

/* Writes the model: norms in F32, every matrix (and the embedding) as `type`, an untied
 * output.weight unless `tied`. Values drawn from `seed`: matrices ~ U(±0.25) (activations stay
 * O(1) over two blocks), norms 1 ± 0.1, embedding rows ~ U(±1). */
static GByteArray *half_model_file(guint32 type, gboolean tied, guint32 seed)
{
    g_autoptr(GRand) r = g_rand_new_with_seed(seed);
    HmTensor all[3 + 9 * HM_DEPTH];
    int n = 0;
#define T(nm, rr, cc, ty, scale, bias)                                                             \
    do {                                                                                           \
        HmTensor *t = &all[n++];                                                                   \
        *t = (HmTensor){ nm, rr, cc, ty, g_new(float, (size_t)(rr) * (cc)) };                      \
        for (int i = 0; i < (rr) * (cc); i++)                                                      \
            t->v[i] = (float)((bias) + (scale)*g_rand_double_range(r, -1, 1));                     \
    } while (0)
    T(g_strdup("token_embd.weight"), HM_N_TOKENS, HM_E, type, 1.0, 0.0);
    T(g_strdup("output_norm.weight"), 1, HM_E, CL_GGML_F32, 0.1, 1.0);
    if (!tied)
        T(g_strdup("output.weight"), HM_N_TOKENS, HM_E, type, 0.25, 0.0);
    for (int l = 0; l < HM_DEPTH; l++) {
        T(g_strdup_printf("blk.%d.attn_norm.weight", l), 1, HM_E, CL_GGML_F32, 0.1, 1.0);
        T(g_strdup_printf("blk.%d.attn_q.weight", l), HM_HEADS * HM_HD, HM_E, type, 0.25, 0.0);
        T(g_strdup_printf("blk.%d.attn_k.weight", l), HM_KV * HM_HD, HM_E, type, 0.25, 0.0);
        T(g_strdup_printf("blk.%d.attn_v.weight", l), HM_KV * HM_HD, HM_E, type, 0.25, 0.0);
        T(g_strdup_printf("blk.%d.attn_output.weight", l), HM_E, HM_HEADS * HM_HD, type, 0.25, 0.0);
        T(g_strdup_printf("blk.%d.ffn_norm.weight", l), 1, HM_E, CL_GGML_F32, 0.1, 1.0);
        T(g_strdup_printf("blk.%d.ffn_gate.weight", l), HM_F, HM_E, type, 0.25, 0.0);
        T(g_strdup_printf("blk.%d.ffn_up.weight", l), HM_F, HM_E, type, 0.25, 0.0);
        T(g_strdup_printf("blk.%d.ffn_down.weight", l), HM_E, HM_F, type, 0.25, 0.0);
    }
#undef T
    W w = { g_byte_array_new() };
    w_header(&w, 3, (guint64)n, 16);
    w_kv_str(&w, "general.architecture", "llama");
    w_kv_u32(&w, "llama.block_count", HM_DEPTH);
    w_kv_u32(&w, "llama.context_length", 64);
    w_kv_u32(&w, "llama.embedding_length", HM_E);
    w_kv_u32(&w, "llama.feed_forward_length", HM_F);
    w_kv_u32(&w, "llama.attention.head_count", HM_HEADS);
    w_kv_u32(&w, "llama.attention.head_count_kv", HM_KV);
    w_kv_u32(&w, "llama.rope.dimension_count", HM_HD);
    w_kv_f32(&w, "llama.rope.freq_base", 10000.0f);
    w_kv_f32(&w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    w_kv_str(&w, "tokenizer.ggml.model", "gpt2");
    w_kv_str(&w, "tokenizer.ggml.pre", "smollm");
    w_str(&w, "tokenizer.ggml.tokens");
    w_u32(&w, CL_GGUF_ARRAY);
    w_u32(&w, CL_GGUF_STRING);
    w_u64(&w, HM_N_TOKENS);
    for (int b = 0; b < 256; b++) {
        g_autofree char *t = byte_token(b);
        w_str(&w, t);
    }
    for (gsize k = 0; k < G_N_ELEMENTS(hm_extra); k++)
        w_str(&w, hm_extra[k]);
    w_str(&w, "tokenizer.ggml.token_type"); /* 1 normal, 3 control */
    w_u32(&w, CL_GGUF_ARRAY);
    w_u32(&w, CL_GGUF_I32);
    w_u64(&w, HM_N_TOKENS);
    for (int i = 0; i < HM_N_TOKENS; i++)
        w_u32(&w, i >= 256 && i < 259 ? 3 : 1);
    w_str(&w, "tokenizer.ggml.merges");
    w_u32(&w, CL_GGUF_ARRAY);
    w_u32(&w, CL_GGUF_STRING);
    w_u64(&w, G_N_ELEMENTS(hm_merges));
    for (gsize k = 0; k < G_N_ELEMENTS(hm_merges); k++)
        w_str(&w, hm_merges[k]);
    w_kv_u32(&w, "general.alignment", 32);
    guint64 offset = 0;
    for (int i = 0; i < n; i++) {
        w_str(&w, all[i].name);
        w_u32(&w, all[i].rows > 1 ? 2 : 1);
        w_u64(&w, (guint64)all[i].cols);
        if (all[i].rows > 1)
            w_u64(&w, (guint64)all[i].rows);
        w_u32(&w, all[i].type);
        w_u64(&w, offset);
        size_t bytes = (size_t)all[i].rows * all[i].cols * (all[i].type == CL_GGML_F32 ? 4 : 2);
        offset += (bytes + 31) / 32 * 32;
    }
    for (int i = 0; i < n; i++) {
        w_pad(&w, 32);
        for (int k = 0; k < all[i].rows * all[i].cols; k++) {
            if (all[i].type == CL_GGML_F32) {
                w_bytes(&w, &all[i].v[k], 4);
            } else {
                uint16_t h = all[i].type == CL_GGML_F16 ? cl_f32_to_f16(all[i].v[k])
                                                        : cl_f32_to_bf16(all[i].v[k]);
                h = GUINT16_TO_LE(h);
                w_bytes(&w, &h, 2);
            }
        }
        g_free(all[i].name);
        g_free(all[i].v);
    }
    return w.b;
}

/* The last position's logits after `ids` (appended to the cache). */
static void hm_logits(ClBackend *be, const ClModel *m, ClKVCache *cache, const gint32 *ids, int n,
                      float *logits)
{
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_decoder_forward(be, m, cache, ids, n, NULL, logits, NULL, NULL, NULL, &err));
    g_assert_no_error(err);
}

/* A GGUF file whose decoder matrices are `type` (F16 or BF16), loaded with keep_quantized: the
 * matrices (and the output matrix: output.weight, or the tied embedding) stay as stored in
 * model->quant, hold exactly the halves the f32 load widened (Q and K rows reordered alike), and
 * the logits — a prompt's prefill (the half × sgemm tiles), then decode steps (the half matvec
 * kernels) — match those of the f32 load of the same file; the two ids the file lacks (<image>,
 * <|pad|>: the mean row) within the half type's rounding. */
/* The halves widened are exactly the f32 load's weights, so the two differ only in the order of
 * f32 additions (the half kernels' AVX2 lanes against sgemm): measured nmse <= 4.5e-13 and max
 * |diff| <= 6.6e-7 of the largest logit over both files; a misplaced row or a misread half moves
 * them by orders of magnitude more. */
#define HALF_MAX_NMSE 1e-10
#define HALF_MAX_REL 1e-5

static void check_half_model(guint32 gtype, ClQuantType qtype, gboolean tied)
{
    g_autoptr(GByteArray) b = half_model_file(gtype, tied, 7);
    g_autoptr(GError) err = NULL;
    g_autofree char *dir = g_dir_make_tmp("cl-gguf-half-XXXXXX", &err);
    g_assert_no_error(err);
    g_autofree char *path = g_build_filename(dir, "half.gguf", NULL);
    g_assert_true(g_file_set_contents(path, (const char *)b->data, b->len, &err));
    g_autoptr(ClModel) mq = cl_model_load_gguf(path, 1, TRUE, &err);
    g_assert_no_error(err);
    g_autoptr(ClModel) mf = cl_model_load_gguf(path, 1, FALSE, &err);
    g_assert_no_error(err);
    g_autoptr(ClGguf) g = cl_gguf_open(path, &err);
    g_assert_no_error(err);
    g_autofree gint32 *ext = NULL;
    g_autoptr(ClTokenizer) tok = cl_tokenizer_from_gguf(g, &ext, NULL, &err);
    g_assert_no_error(err);
    g_unlink(path);
    g_rmdir(dir);

    g_assert_cmpint(mq->config.dec_dim, ==, HM_E);
    g_assert_cmpint(mq->config.vocab_size, ==, CL_TOKEN_FIRST_MERGE + 3);
    g_assert_cmpint(mq->config.tie_embeddings, ==, tied);
    g_assert_null(mf->quant);
    g_assert_nonnull(mq->quant);
    int E = HM_E, Q = HM_HEADS * HM_HD, KV = HM_KV * HM_HD, F = HM_F;
    for (int l = 0; l < HM_DEPTH; l++) {
        const ClQuantLayer *ql = &mq->quant->dec[l];
        const ClDecoderLayerWeights *lf = &mf->w.dec[l];
        const struct {
            const ClQuantMatrix *q;
            const float *f32;
            int rows, cols;
        } mats[] = { { &ql->q, lf->q, Q, E },       { &ql->k, lf->k, KV, E },
                     { &ql->v, lf->v, KV, E },      { &ql->o, lf->o, E, Q },
                     { &ql->gate, lf->gate, F, E }, { &ql->up, lf->up, F, E },
                     { &ql->down, lf->down, E, F } };
        g_assert_null(mq->w.dec[l].q); /* no f32 view beside the halves */
        for (gsize k = 0; k < G_N_ELEMENTS(mats); k++) {
            g_assert_cmpint(mats[k].q->type, ==, qtype);
            g_assert_nonnull(mats[k].q->data);
            size_t nv = (size_t)mats[k].rows * mats[k].cols;
            g_autofree float *wide = g_new(float, nv);
            cl_dequantize_rows(qtype, mats[k].q->data, wide, mats[k].rows, mats[k].cols);
            /* widening a half is exact: bit for bit what the f32 load holds */
            g_assert_cmpint(memcmp(wide, mats[k].f32, nv * sizeof(float)), ==, 0);
        }
    }
    g_assert_cmpint(mq->quant->lm_head.type, ==, qtype);
    g_assert_nonnull(mq->quant->lm_head.data);

    ClBackend *be = cl_backend_cpu_new(0);
    int V = mq->config.vocab_size;
    g_autofree float *lq = g_new(float, V), *lf = g_new(float, V);
    g_autoptr(ClKVCache) cq = cl_kv_cache_new(mq, 16), cf = cl_kv_cache_new(mf, 16);
    /* <|im_start|> h e l l o, the merges' tokens, <|im_end|> */
    gint32 ids[] = { CL_TOKEN_IM_START,
                     'h',
                     'e',
                     'l',
                     'l',
                     'o',
                     CL_TOKEN_FIRST_MERGE,
                     CL_TOKEN_FIRST_MERGE + 2,
                     ' ',
                     CL_TOKEN_IM_END };
    int n_ids = (int)G_N_ELEMENTS(ids);
    double worst_nmse = 0, worst_rel = 0;
    for (int step = 0; step < 4; step++) {
        const gint32 *in = ids;
        int n = n_ids;
        gint32 next = 0;
        if (step > 0) { /* decode: the f32 model's greedy token into both */
            for (int i = 1; i < V; i++)
                next = lf[i] > lf[next] ? i : next;
            in = &next, n = 1;
        }
        hm_logits(be, mq, cq, in, n, lq);
        hm_logits(be, mf, cf, in, n, lf);
        double e = 0, s = 0, worst = 0, peak = 0, worst_mean = 0;
        for (int i = 0; i < V; i++) {
            g_assert_true(isfinite(lq[i]));
            if (ext[i] < 0) { /* <image>, <|pad|>: the mean row, rounded to a half when kept */
                worst_mean = MAX(worst_mean, fabs((double)lq[i] - lf[i]));
                continue;
            }
            e += ((double)lq[i] - lf[i]) * ((double)lq[i] - lf[i]);
            s += (double)lf[i] * lf[i];
            worst = MAX(worst, fabs((double)lq[i] - lf[i]));
            peak = MAX(peak, fabs((double)lf[i]));
        }
        g_test_message("%s%s %s: logits max |diff| %.3g (of max |logit| %.3g), nmse %.3g; "
                       "mean rows' max |diff| %.3g",
                       cl_quant_type_name(qtype), tied ? " tied" : "",
                       step ? "decode step" : "prefill", worst, peak, e / s, worst_mean);
        worst_nmse = MAX(worst_nmse, e / s);
        worst_rel = MAX(worst_rel, worst / peak);
        /* the mean rows: the f32 load keeps them exact, the kept head rounds them to the half
         * type (2^-11 relative for F16, 2^-8 for BF16; measured 4.5e-6 and 4.4e-5 of the largest
         * logit) */
        g_assert_cmpfloat(worst_mean, <=, (qtype == CL_QUANT_F16 ? 0x1p-11 : 0x1p-8) * peak);
    }
    g_assert_cmpfloat(worst_nmse, <, HALF_MAX_NMSE);
    g_assert_cmpfloat(worst_rel, <, HALF_MAX_REL);
    cl_backend_free(be);
}

static void test_f16_model(void)
{
    check_half_model(CL_GGML_F16, CL_QUANT_F16, FALSE);
}

static void test_bf16_model(void)
{
    check_half_model(CL_GGML_BF16, CL_QUANT_BF16, TRUE);
}

/* The real SmolLM2-135M-Instruct file that set-up fetches (skipped when it is not there): its
 * architecture, shapes and tokenizer as the model card gives them, and weights that dequantize
 * to finite values of a plausible spread. */
static void test_smollm2(void)
{
    g_autofree char *path = cl_pretrained_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        g_autofree char *msg = g_strdup_printf("%s not there (set-up could not fetch it)", path);
        g_test_skip(msg);
        return;
    }
    g_autoptr(GError) err = NULL;
    g_autoptr(ClGguf) g = cl_gguf_open(path, &err);
    g_assert_no_error(err);
    g_assert_cmpstr(cl_gguf_get_string(g, "general.architecture", NULL), ==, "llama");
    static const struct {
        const char *key;
        guint64 want;
    } dims[] = {
        { "llama.block_count", 30 },
        { "llama.embedding_length", 576 },
        { "llama.feed_forward_length", 1536 },
        { "llama.attention.head_count", 9 },
        { "llama.attention.head_count_kv", 3 },
        { "llama.vocab_size", 49152 },
    };
    for (gsize k = 0; k < G_N_ELEMENTS(dims); k++) {
        guint64 v = 0;
        g_assert_true(cl_gguf_get_uint(g, dims[k].key, &v, NULL));
        g_assert_cmpuint(v, ==, dims[k].want);
    }
    g_assert_cmpuint(g->tensors->len, ==, 2 + 9 * 30);
    const ClGgufValue *toks = cl_gguf_get(g, "tokenizer.ggml.tokens");
    g_assert_cmpuint(toks->n, ==, 49152);
    g_assert_cmpstr(toks->strs[2], ==, "<|im_end|>");
    g_assert_cmpuint(cl_gguf_get(g, "tokenizer.ggml.merges")->n, >, 40000);
    const ClGgufTensor *q = cl_gguf_tensor(g, "blk.0.attn_q.weight");
    g_assert_cmpint(q->type, ==, CL_GGML_Q4_1);
    g_assert_cmpint(cl_gguf_tensor(g, "token_embd.weight")->type, ==, CL_GGML_Q8_0);
    g_autofree float *w = cl_gguf_tensor_to_f32(q, NULL);
    double s = 0, s2 = 0;
    for (guint64 k = 0; k < q->numel; k++) {
        g_assert_true(isfinite(w[k]));
        s += w[k], s2 += (double)w[k] * w[k];
    }
    double sd = sqrt(s2 / (double)q->numel - (s / (double)q->numel) * (s / (double)q->numel));
    g_test_message("blk.0.attn_q.weight: mean %.4g, sd %.4g", s / (double)q->numel, sd);
    g_assert_cmpfloat(sd, >, 0.01);
    g_assert_cmpfloat(sd, <, 1.0);
}

/* SmolLM2 as a ChangeLens model answers a question (greedy): the tokenizer, the config, the
 * dequantized weights and the RoPE row order all have to be right for "Paris" to come out. */
static void test_smollm2_chat(void)
{
    g_autofree char *path = cl_pretrained_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        g_test_skip("SmolLM2 not fetched");
        return;
    }
    g_autoptr(GError) err = NULL;
    g_autoptr(ClModel) m = cl_model_load_gguf(path, 1, TRUE, &err);
    g_assert_no_error(err);
    g_assert_cmpint(m->config.vocab_size, ==, CL_TOKEN_FIRST_MERGE + 48900);
    g_assert_nonnull(m->quant); /* every matrix of this file is Q4_1 or Q8_0 */
    g_assert_null(m->w.dec[0].q);
    ClChatTurn turns[] = { { CL_CHAT_USER, "What is the capital of France?" } };
    g_autoptr(GArray) ids = cl_chat_encode(m->tokenizer, turns, 1, TRUE, NULL, &err);
    g_assert_no_error(err);
    ClBackend *be = cl_backend_cpu_new(0);
    ClGenerateOptions o;
    cl_generate_options_init(&o);
    o.max_new_tokens = 24;
    ClGenerateResult r;
    g_assert_true(
        cl_generate(be, m, (const gint32 *)(gpointer)ids->data, (int)ids->len, NULL, &o, &r, &err));
    g_test_message("answer: %s", r.text->str);
    g_assert_nonnull(strstr(r.text->str, "Paris"));
    cl_generate_result_clear(&r);
    cl_backend_free(be);
}

/* describe with SmolLM2 as the decoder and EfficientNet-Lite0 as the encoder's stem (both as
 * set-up fetched them; the SVE blocks, merger and projector seeded random, so the text is noise):
 * the whole pipeline runs, images through the stem into the decoder's prompt. */
static void test_describe_effnet(void)
{
    g_autofree char *path = cl_pretrained_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    g_autofree char *effnet = cl_pretrained_path(CL_EFFNET_FILE);
    const char *cli = g_getenv("CL_CLI"), *src = g_getenv("CL_SOURCE_ROOT");
    if (!g_file_test(path, G_FILE_TEST_EXISTS) || !g_file_test(effnet, G_FILE_TEST_EXISTS) ||
        !cli || !src) {
        g_test_skip("SmolLM2 or EfficientNet-Lite0 not fetched (or no CLI to run)");
        return;
    }
    g_autoptr(GError) err = NULL;
    g_autoptr(ClModel) m = cl_model_load(path, &err);
    g_assert_no_error(err);
    g_assert_true(m->config.enc_stem_effnet);
    g_autofree char *a = g_build_filename(src, "data", "demo", "edits", "before.png", NULL);
    g_autofree char *b = g_build_filename(src, "data", "demo", "edits", "after.png", NULL);
    const char *argv[] = { cli, "describe", "--model", path, "--max-tokens",
                           "6", "--json",   a,         b,    NULL };
    g_autofree char *out = NULL, *errout = NULL;
    int status = 0;
    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                               &errout, &status, &err));
    if (!g_spawn_check_wait_status(status, NULL))
        g_error("describe failed: %s", errout);
    g_autoptr(JsonParser) p = json_parser_new();
    g_assert_true(json_parser_load_from_data(p, out, -1, NULL));
    JsonObject *o = json_node_get_object(json_parser_get_root(p));
    g_test_message("describe (random connector): %s", json_object_get_string_member(o, "text"));
    g_assert_true(json_object_has_member(o, "text"));
}

/* ---- parity with llama.cpp (the peer: llama-cpp-python in BUILD/venv) ---- */

/* Five conversations and a text that exercises the pre-tokenisation (contractions, Unicode
 * letters and numbers, whitespace runs, digits). */
static const char *const parity_prompts[] = {
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWrite one sentence about a red bicycle.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou answer briefly.<|im_end|>\n<|im_start|>user\nHow many legs does a spider have?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nList three colours.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nTranslate 'good morning' into French.<|im_end|>\n<|im_start|>assistant\n",
    "It's 2026: naïve café — x² ≠ 3.14!\n\n  Tabs\tand   spaces,\r\nÜber 12345 Straße; don't we'll they're I'M 日本語 😀 ",
};

/* A lead (logits) below which llama.cpp's greedy choice is a near tie that another exact
 * arithmetic may break the other way. */
#define PARITY_MARGIN 0.25

static char *peer_python(void)
{
    const char *env = g_getenv("CL_LLAMA_PYTHON");
    if (env && *env)
        return g_strdup(env);
    const char *build = g_getenv("CL_BUILD_ROOT");
    return build ? g_build_filename(build, "venv", "bin", "python", NULL) : NULL;
}

/* The peer's JSON for the prompts, or NULL (skipped) with the reason in *why. */
static JsonObject *run_peer(const char *model, JsonParser *parser, char **why)
{
    g_autofree char *py = peer_python();
    const char *src = g_getenv("CL_SOURCE_ROOT");
    if (!py || !src || !g_file_test(py, G_FILE_TEST_IS_EXECUTABLE)) {
        *why = g_strdup("no peer python (BUILD/venv/bin/python; run.sh test builds it)");
        return NULL;
    }
    g_autoptr(GError) err = NULL;
    g_autofree char *dir = g_dir_make_tmp("cl-gguf-XXXXXX", &err);
    g_assert_no_error(err);
    g_autofree char *pjson = g_build_filename(dir, "prompts.json", NULL);
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_array(b);
    for (gsize k = 0; k < G_N_ELEMENTS(parity_prompts); k++)
        json_builder_add_string_value(b, parity_prompts[k]);
    json_builder_end_array(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autofree char *text = json_to_string(root, FALSE);
    g_assert_true(g_file_set_contents(pjson, text, -1, NULL));
    g_autofree char *script = g_build_filename(src, "tests", "reference", "llama_peer.py", NULL);
    const char *argv[] = {
        py, script, "--model", model, "--prompts", pjson, "--greedy", "24", NULL
    };
    g_autofree char *out = NULL, *errout = NULL;
    int status = 0;
    gboolean ran = g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                                &errout, &status, &err);
    g_unlink(pjson);
    g_rmdir(dir);
    if (!ran || !g_spawn_check_wait_status(status, NULL)) {
        *why = g_strdup_printf("the peer did not run (%s)", errout && strstr(errout, "llama_cpp")
                                                                ? "llama_cpp not importable"
                                                                : "see its stderr");
        if (errout)
            g_test_message("peer stderr: %s", errout);
        return NULL;
    }
    g_assert_true(json_parser_load_from_data(parser, out, -1, NULL));
    return json_node_get_object(json_parser_get_root(parser));
}

static GArray *ints_of(JsonArray *a)
{
    GArray *v = g_array_new(FALSE, FALSE, sizeof(gint32));
    for (guint i = 0; i < json_array_get_length(a); i++) {
        gint32 x = (gint32)json_array_get_int_element(a, i);
        g_array_append_val(v, x);
    }
    return v;
}

/* Tokens identical; logits after the prompt within the tolerance; greedy continuations identical
 * token for token. */
static void test_llama_parity(void)
{
    g_autofree char *path = cl_pretrained_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        g_test_skip("SmolLM2 not fetched");
        return;
    }
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autofree char *why = NULL;
    JsonObject *peer = run_peer(path, parser, &why);
    if (!peer) {
        g_test_skip(why);
        return;
    }
    g_autoptr(GError) err = NULL;
    g_autoptr(ClGguf) g = cl_gguf_open(path, &err);
    g_assert_no_error(err);
    g_autofree gint32 *ext = NULL;
    int n_ids = 0;
    g_autoptr(ClTokenizer) tok = cl_tokenizer_from_gguf(g, &ext, &n_ids, &err);
    g_assert_no_error(err);
    g_autoptr(ClModel) m = cl_model_load_gguf(path, 1, TRUE, &err);
    g_assert_no_error(err);
    g_assert_nonnull(m->quant);
    /* the same weights dequantized: the products without rounding the activations, the yardstick
     * both quantized arithmetics are measured against */
    g_autoptr(ClModel) exact = cl_model_load_gguf(path, 1, FALSE, &err);
    g_assert_no_error(err);
    g_assert_null(exact->quant);
    ClBackend *be = cl_backend_cpu_new(0);
    JsonArray *results = json_object_get_array_member(peer, "prompts");
    g_assert_cmpuint(json_array_get_length(results), ==, G_N_ELEMENTS(parity_prompts));
    int V = m->config.vocab_size;
    g_autofree float *logits = g_new(float, V);
    g_autofree float *exact_logits = g_new(float, V);
    guint parity_same = 0, parity_total = 0;
    for (guint p = 0; p < G_N_ELEMENTS(parity_prompts); p++) {
        JsonObject *r = json_array_get_object_element(results, p);
        g_autoptr(GArray) want = ints_of(json_object_get_array_member(r, "tokens"));
        g_autoptr(GArray) ids = cl_tokenizer_encode(tok, parity_prompts[p], -1, TRUE);
        g_assert_cmpuint(ids->len, ==, want->len);
        for (guint i = 0; i < ids->len; i++)
            if (ext[g_array_index(ids, gint32, i)] != g_array_index(want, gint32, i))
                g_error("prompt %u token %u: ours %d (file id %d), llama.cpp's %d", p, i,
                        g_array_index(ids, gint32, i), ext[g_array_index(ids, gint32, i)],
                        g_array_index(want, gint32, i));
        if (p == G_N_ELEMENTS(parity_prompts) - 1)
            continue; /* the tokenizer text: tokens only */
        g_autoptr(ClKVCache) cache = cl_kv_cache_new(m, ids->len + 1);
        g_assert_true(cl_decoder_forward(be, m, cache, (const gint32 *)(gpointer)ids->data,
                                         (int)ids->len, NULL, logits, NULL, NULL, NULL, &err));
        g_autoptr(ClKVCache) exact_cache = cl_kv_cache_new(exact, ids->len + 1);
        g_assert_true(cl_decoder_forward(be, exact, exact_cache,
                                         (const gint32 *)(gpointer)ids->data, (int)ids->len, NULL,
                                         exact_logits, NULL, NULL, NULL, &err));
        JsonArray *pl = json_object_get_array_member(r, "logits");
        double e = 0, s = 0, worst = 0, e_ours = 0, e_theirs = 0, s_exact = 0;
        for (int i = 0; i < V; i++) {
            if (ext[i] < 0)
                continue;
            double ref = json_array_get_double_element(pl, (guint)ext[i]);
            e += (logits[i] - ref) * (logits[i] - ref);
            s += ref * ref;
            worst = MAX(worst, fabs(logits[i] - ref));
            e_ours += (logits[i] - exact_logits[i]) * (logits[i] - exact_logits[i]);
            e_theirs += (ref - exact_logits[i]) * (ref - exact_logits[i]);
            s_exact += (double)exact_logits[i] * exact_logits[i];
        }
        e_ours /= s_exact, e_theirs /= s_exact;
        g_test_message("prompt %u: %u tokens, logits nmse %.2e against llama.cpp's, max |diff| "
                       "%.3f; against the dequantized weights' exact products: ours %.2e, "
                       "llama.cpp's %.2e",
                       p, ids->len, e / s, worst, e_ours, e_theirs);
        /* Both multiply Q4_1 weights with activations rounded to 8 bits per block of 32 (~0.4 %
         * of the block's largest value), in their own order and with their own kernels, which
         * llama.cpp picks by the CPU. Ours must stay close to the exact products (on an AVX-512
         * machine: ours 1.3e-5 to 1.2e-4, llama.cpp's 8.5e-5 to 1.5e-3 — where llama.cpp's alone
         * passed the old bound of 1e-3 between the two); the two must agree as two such
         * roundings do */
        g_assert_cmpfloat(e_ours, <, 1e-3);
        g_assert_cmpfloat(e / s, <, 3e-3);

        ClGenerateOptions o;
        cl_generate_options_init(&o);
        o.max_new_tokens = 24;
        ClGenerateResult res;
        g_assert_true(cl_generate(be, m, (const gint32 *)(gpointer)ids->data, (int)ids->len, NULL,
                                  &o, &res, &err));
        g_autoptr(GArray) greedy = ints_of(json_object_get_array_member(r, "greedy"));
        JsonArray *margins = json_object_get_array_member(r, "margins");
        /* Token for token until a step where llama.cpp's own choice leads the runner-up by less
         * than PARITY_MARGIN logits: there the two arithmetics (its 8-bit activations, our f32
         * prefill) may pick differently, and what follows is another continuation. The end token
         * (greedy's last margin) counts as a step. */
        guint steps = MIN(res.ids->len, greedy->len) + 1, same = 0;
        for (; same < steps; same++) {
            double lead = same < json_array_get_length(margins)
                              ? json_array_get_double_element(margins, same)
                              : 0;
            gint32 ours = same < res.ids->len ? ext[g_array_index(res.ids, gint32, same)] : -1;
            gint32 theirs = same < greedy->len ? g_array_index(greedy, gint32, same) : -1;
            if (ours != theirs) {
                if (lead >= PARITY_MARGIN)
                    g_error("prompt %u step %u: ours %d, llama.cpp's %d, which led by %.3f", p,
                            same, ours, theirs, lead);
                break;
            }
            if (ours < 0)
                break;
        }
        g_test_message("prompt %u greedy: %s (%u of %u tokens as llama.cpp's%s)", p, res.text->str,
                       same, greedy->len, same >= greedy->len ? "" : ", then a near tie");
        parity_same += same, parity_total += greedy->len;
        cl_generate_result_clear(&res);
    }
    cl_backend_free(be);
    g_test_message("greedy: %u of %u tokens as llama.cpp's", parity_same, parity_total);
}

/* The fuzzer's seeds: the good file and a few of its refused variants. */
static int write_seeds(const char *dir)
{
    g_mkdir_with_parents(dir, 0755);
    GByteArray *files[] = { good_file(), one_tensor(1, 32, CL_GGML_Q8_0, 0, 64),
                            one_tensor(2, 64, CL_GGML_Q4_1, 0, 64), one_kv(kv_nested) };
    for (gsize k = 0; k < G_N_ELEMENTS(files); k++) {
        g_autofree char *path = g_strdup_printf("%s/seed-%zu.gguf", dir, k);
        if (!g_file_set_contents(path, (const char *)files[k]->data, files[k]->len, NULL))
            return 1;
        g_byte_array_unref(files[k]);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (g_getenv("CL_FUZZ_WRITE_SEEDS"))
        return write_seeds(g_getenv("CL_FUZZ_WRITE_SEEDS"));
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/gguf/good", test_good);
    g_test_add_func("/gguf/truncated", test_truncated);
    g_test_add_func("/gguf/malformed", test_malformed);
    g_test_add_func("/gguf/flips", test_flips);
    g_test_add_func("/gguf/f16-model", test_f16_model);
    g_test_add_func("/gguf/bf16-model", test_bf16_model);
    g_test_add_func("/gguf/smollm2", test_smollm2);
    g_test_add_func("/gguf/smollm2-chat", test_smollm2_chat);
    g_test_add_func("/gguf/llama-parity", test_llama_parity);
    g_test_add_func("/gguf/describe-effnet", test_describe_effnet);
    return g_test_run();
}
