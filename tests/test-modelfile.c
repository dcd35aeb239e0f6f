/* test-modelfile.c - model files end to end: f16/bf16 conversion, config presets and validation,
 * the safetensors reader (every malformation refused with a message naming it) and writer, the
 * tensor list, seeded random init with the SVE insertion rules, save/load, and the CLI. */
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>

#include "model/config.h"
#include "nn/half.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "model/tokenizer.h"
#include "model/weights.h"

static char *tmp_dir;

static char *tmp_path(const char *name)
{
    return g_build_filename(tmp_dir, name, NULL);
}

/* A small config: every code path of the tiny preset in ~20k parameters. */
static ClModelConfig small_config(ClSveVariant variant, ClSveFirst first)
{
    ClModelConfig c;
    g_assert_true(cl_model_config_preset(&c, "tiny", NULL));
    c.image_size = 32, c.patch_size = 16;
    c.enc_dim = 16, c.enc_depth = 2, c.enc_heads = 2, c.enc_mlp = 32;
    c.merger_hidden = 32;
    c.dec_dim = 16, c.dec_depth = 2, c.dec_heads = 2, c.dec_kv_heads = 1, c.dec_mlp = 24;
    c.vocab_size = 300, c.max_len = 64;
    c.sve_variant = variant, c.sve_first = first;
    g_assert_true(cl_model_config_validate(&c, NULL));
    return c;
}

static void assert_error_mentions(const GError *err, int code, const char *needle)
{
    g_assert_nonnull(err);
    if (err->domain != CL_MODEL_ERROR || err->code != code || !strstr(err->message, needle))
        g_error("expected a CL_MODEL_ERROR %d mentioning '%s', got %s %d: %s", code, needle,
                g_quark_to_string(err->domain), err->code, err->message);
}

/* ---- half ----------------------------------------------------------------------------------- */

static guint32 fbits(float f)
{
    guint32 x;
    memcpy(&x, &f, 4);
    return x;
}

static float bitsf(guint32 x)
{
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static void test_half(void)
{
    /* every f16 survives f16 -> f32 -> f16 */
    for (guint32 h = 0; h < 65536; h++) {
        float f = cl_f16_to_f32((guint16)h);
        if (((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff)) {
            g_assert_true(isnan(f));
            guint16 back = cl_f32_to_f16(f);
            g_assert_true((back & 0x7c00) == 0x7c00 && (back & 0x3ff) &&
                          (back & 0x8000) == (h & 0x8000));
            continue;
        }
        g_assert_cmphex(cl_f32_to_f16(f), ==, h);
    }
    g_assert_cmpfloat(cl_f16_to_f32(0x3c00), ==, 1.0f);
    g_assert_cmpfloat(cl_f16_to_f32(0x7bff), ==, 65504.0f);
    g_assert_cmpfloat(cl_f16_to_f32(0x0001), ==, 0x1p-24f);
    g_assert_cmphex(cl_f32_to_f16(65519.0f), ==, 0x7bff); /* below the midpoint */
    g_assert_cmphex(cl_f32_to_f16(65520.0f), ==, 0x7c00); /* ties to even: Inf */
    g_assert_cmphex(cl_f32_to_f16(1e10f), ==, 0x7c00);
    g_assert_cmphex(cl_f32_to_f16(-INFINITY), ==, 0xfc00);
    g_assert_cmphex(cl_f32_to_f16(-0.0f), ==, 0x8000);
    g_assert_cmphex(cl_f32_to_f16(0x1p-25f), ==, 0x0000); /* tie between 0 and 1 ulp: even */
    g_assert_cmphex(cl_f32_to_f16(0x1.8p-25f), ==, 0x0001);
    g_assert_cmphex(cl_f32_to_f16(0x3p-25f), ==, 0x0002);        /* 1.5 ulp ties to 2 */
    g_assert_cmphex(cl_f32_to_f16(1.0f + 0x1p-11f), ==, 0x3c00); /* tie, even mantissa */
    g_assert_cmphex(cl_f32_to_f16(1.0f + 0x3p-11f), ==, 0x3c02); /* tie, odd -> up */
    g_assert_cmphex(cl_f32_to_f16(0x1.ffcp-15f), ==, 0x0400);    /* rounds up into the normals */
    g_assert_true(isnan(cl_f16_to_f32(cl_f32_to_f16(NAN))));
    g_assert_true(isinf(cl_f16_to_f32(0x7c00)));

#if defined(__FLT16_MAX__)
    /* against the compiler's conversion on a spread of floats around the f16 range */
    guint64 s = 12345;
    for (int i = 0; i < 2000000; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        guint32 x = (guint32)(s >> 32);
        x = (x & 0x807fffff) | ((guint32)(96 + (x >> 23) % 64) << 23); /* exponents 2^-31..2^32 */
        float f = bitsf(x);
        _Float16 r = (_Float16)f;
        guint16 want;
        memcpy(&want, &r, 2);
        if (cl_f32_to_f16(f) != want)
            g_error("f16(%a) = %04x, compiler says %04x", f, cl_f32_to_f16(f), want);
    }
#endif

    /* bf16: exact widening, round to nearest even, NaN stays NaN, overflow to Inf */
    for (guint32 h = 0; h < 65536; h++) {
        float f = cl_bf16_to_f32((guint16)h);
        g_assert_cmphex(fbits(f), ==, h << 16);
        if (!isnan(f))
            g_assert_cmphex(cl_f32_to_bf16(f), ==, h);
        else
            g_assert_true(isnan(cl_bf16_to_f32(cl_f32_to_bf16(f))));
    }
    g_assert_cmphex(cl_f32_to_bf16(bitsf(0x3f808000)), ==, 0x3f80); /* tie, even */
    g_assert_cmphex(cl_f32_to_bf16(bitsf(0x3f818000)), ==, 0x3f82); /* tie, odd -> up */
    g_assert_cmphex(cl_f32_to_bf16(bitsf(0x3f808001)), ==, 0x3f81);
    g_assert_cmphex(cl_f32_to_bf16(bitsf(0x7f7fffff)), ==, 0x7f80);          /* FLT_MAX -> Inf */
    g_assert_cmphex(cl_f32_to_bf16(bitsf(0x7f800001)) & 0x7fc0, ==, 0x7fc0); /* quiet NaN */

    float src[5] = { 1.5f, -2.25f, 0.1f, 1e-8f, 70000.0f }, back[5];
    guint16 h[5];
    cl_f32_to_f16_array(h, src, 5);
    cl_f16_to_f32_array(back, h, 5);
    g_assert_cmpfloat(back[0], ==, 1.5f);
    g_assert_cmpfloat(back[1], ==, -2.25f);
    g_assert_cmpfloat_with_epsilon(back[2], 0.1f, 0.1f * 0x1p-11f);
    g_assert_true(isinf(back[4]));
    cl_f32_to_bf16_array(h, src, 5);
    cl_bf16_to_f32_array(back, h, 5);
    g_assert_cmpfloat(back[0], ==, 1.5f);
    g_assert_cmpfloat_with_epsilon(back[2], 0.1f, 0.1f * 0x1p-8f);
}

/* ---- config --------------------------------------------------------------------------------- */

static void assert_config_equal(const ClModelConfig *a, const ClModelConfig *b)
{
    g_autofree char *ja = cl_model_config_to_json(a);
    g_autofree char *jb = cl_model_config_to_json(b);
    g_assert_cmpstr(ja, ==, jb);
    g_assert_cmpint(a->image_size, ==, b->image_size);
    g_assert_cmpint(a->enc_dim, ==, b->enc_dim);
    g_assert_cmpint(a->sve_variant, ==, b->sve_variant);
    g_assert_cmpint(a->sve_first, ==, b->sve_first);
    g_assert_cmpint(a->sve_cross_pos, ==, b->sve_cross_pos);
    g_assert_true(a->sve_out_init_std == b->sve_out_init_std);
    g_assert_true(a->norm_eps == b->norm_eps && a->rope_base == b->rope_base &&
                  a->enc_rope_base == b->enc_rope_base);
    g_assert_cmpint(a->tie_embeddings, ==, b->tie_embeddings);
}

static void test_config_presets(void)
{
    static const struct {
        const char *name;
        int image, d, depth, heads, mlp, merger, e, ddepth, dheads, kv, dmlp, vocab, max_len;
    } table[] = {
        { "tiny", 160, 192, 6, 3, 768, 768, 256, 6, 4, 2, 704, 4096, 2048 },
        { "base", 384, 768, 12, 12, 3072, 3072, 1024, 12, 16, 4, 2816, 32000, 4096 },
        { "large", 768, 1152, 27, 16, 4304, 4608, 2560, 36, 32, 8, 9728, 151936, 8192 },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(table); i++) {
        ClModelConfig c;
        g_autoptr(GError) err = NULL;
        g_assert_true(cl_model_config_preset(&c, table[i].name, &err));
        g_assert_no_error(err);
        g_assert_true(cl_model_config_validate(&c, &err));
        g_assert_no_error(err);
        g_assert_cmpint(c.format, ==, 1);
        g_assert_cmpint(c.image_size, ==, table[i].image);
        g_assert_cmpint(c.patch_size, ==, 16);
        g_assert_cmpint(c.channels, ==, 3);
        g_assert_cmpint(c.enc_dim, ==, table[i].d);
        g_assert_cmpint(c.enc_depth, ==, table[i].depth);
        g_assert_cmpint(c.enc_heads, ==, table[i].heads);
        g_assert_cmpint(c.enc_mlp, ==, table[i].mlp);
        g_assert_cmpint(c.merger_hidden, ==, table[i].merger);
        g_assert_cmpint(c.dec_dim, ==, table[i].e);
        g_assert_cmpint(c.dec_depth, ==, table[i].ddepth);
        g_assert_cmpint(c.dec_heads, ==, table[i].dheads);
        g_assert_cmpint(c.dec_kv_heads, ==, table[i].kv);
        g_assert_cmpint(c.dec_mlp, ==, table[i].dmlp);
        g_assert_cmpint(c.vocab_size, ==, table[i].vocab);
        g_assert_cmpint(c.max_len, ==, table[i].max_len);
        g_assert_cmpint(c.sve_variant, ==, CL_SVE_CROSS_FFN);
        g_assert_cmpint(c.sve_first, ==, CL_SVE_FIRST_OWN);
        g_assert_true(c.sve_cross_pos);
        g_assert_true(c.sve_out_init_std == 1e-4);
        g_assert_true(c.enc_rope_base == 10000.0 && c.rope_base == 10000.0);
        g_assert_true(c.norm_eps == 1e-6);
        g_assert_false(c.tie_embeddings);

        /* JSON round trip, for every variant and both firsts */
        for (int v = 0; v < CL_SVE_N_VARIANTS; v++)
            for (int f = 0; f < 2; f++) {
                ClModelConfig m = c, back;
                m.sve_variant = v, m.sve_first = f, m.sve_cross_pos = (v + f) % 2;
                m.sve_out_init_std = v == 0 ? 0.0 : 0.1 * v / 3.0;
                m.tie_embeddings = f;
                g_autofree char *json = cl_model_config_to_json(&m);
                g_assert_true(cl_model_config_from_json(&back, json, &err));
                g_assert_no_error(err);
                assert_config_equal(&m, &back);
                g_assert_cmpstr(cl_sve_variant_name(v), !=, "invalid");
                ClSveVariant vv;
                g_assert_true(cl_sve_variant_from_name(cl_sve_variant_name(v), &vv));
                g_assert_cmpint(vv, ==, v);
            }
    }
    g_autoptr(GError) err = NULL;
    ClModelConfig c, tiny;
    g_assert_false(cl_model_config_preset(&c, "huge", &err));
    assert_error_mentions(err, CL_MODEL_ERROR_CONFIG, "huge");
    g_clear_error(&err);

    /* missing keys take tiny's values; the §1 example is the tiny preset */
    g_assert_true(cl_model_config_preset(&tiny, "tiny", NULL));
    g_assert_true(cl_model_config_from_json(&c, "{}", &err));
    g_assert_no_error(err);
    assert_config_equal(&c, &tiny);
    const char *doc =
        "{\"format\": 1, \"image_size\": 160, \"patch_size\": 16, \"channels\": 3,"
        " \"enc_dim\": 192, \"enc_depth\": 6, \"enc_heads\": 3, \"enc_mlp\": 768,"
        " \"enc_rope_base\": 10000.0,"
        " \"sve\": { \"variant\": \"cross_ffn\", \"first\": \"own\", \"cross_pos\": true,"
        " \"out_init_std\": 0.0001 }, \"merger_hidden\": 768,"
        " \"dec_dim\": 256, \"dec_depth\": 6, \"dec_heads\": 4, \"dec_kv_heads\": 2, \"dec_mlp\": "
        "704,"
        " \"vocab_size\": 4096, \"rope_base\": 10000.0, \"max_len\": 2048,"
        " \"norm_eps\": 1e-6, \"tie_embeddings\": false }";
    g_assert_true(cl_model_config_from_json(&c, doc, &err));
    g_assert_no_error(err);
    assert_config_equal(&c, &tiny);
    g_assert_true(cl_model_config_from_json(
        &c, "{\"sve\": {\"variant\": \"adaln_zero\", \"first\": \"null\"}, \"enc_dim\": 96}",
        &err));
    g_assert_no_error(err);
    g_assert_cmpint(c.sve_variant, ==, CL_SVE_ADALN_ZERO);
    g_assert_cmpint(c.sve_first, ==, CL_SVE_FIRST_NULL);
    g_assert_true(c.sve_cross_pos && c.sve_out_init_std == 1e-4);
    g_assert_cmpint(c.enc_dim, ==, 96);
    g_assert_cmpint(c.enc_heads, ==, 3);
    g_autofree char *tj = cl_model_config_to_json(&tiny);
    g_assert_nonnull(strstr(tj, "\"out_init_std\":0.0001"));
    g_assert_nonnull(strstr(tj, "\"norm_eps\":1e-06"));
}

static void test_config_invalid(void)
{
    static const struct {
        const char *json, *needle;
    } cases[] = {
        { "{\"enc_dim\": 0}", "enc_dim" },
        { "{\"enc_depth\": 0}", "enc_depth" },
        { "{\"enc_depth\": 257}", "enc_depth" },
        { "{\"image_size\": 8192}", "image_size" },
        { "{\"patch_size\": 15}", "patch_size" },
        { "{\"patch_size\": 32}", "must be even" }, /* grid 5 */
        { "{\"enc_heads\": 5}", "enc_heads" },
        { "{\"enc_dim\": 198}", "enc_dim / enc_heads" }, /* head dim 66 */
        { "{\"dec_heads\": 3}", "dec_heads" },
        { "{\"dec_dim\": 260}", "dec_dim / dec_heads" }, /* head dim 65 */
        { "{\"dec_kv_heads\": 3}", "dec_kv_heads" },
        { "{\"dec_kv_heads\": 0}", "dec_kv_heads" },
        { "{\"max_len\": 8}", "max_len" },
        { "{\"channels\": 2}", "channels" },
        { "{\"vocab_size\": 100}", "vocab_size" },
        { "{\"merger_hidden\": -4}", "merger_hidden" },
        { "{\"dec_mlp\": 99999}", "dec_mlp" },
        { "{\"enc_dim\": \"192\"}", "enc_dim must be an integer" },
        { "{\"enc_dim\": 192.5}", "enc_dim must be an integer" },
        { "{\"enc_dim\": 99999999999}", "enc_dim" },
        { "{\"enc_dim\": 99999999999999999999999}", "too large" },
        { "{\"rope_base\": \"big\"}", "rope_base must be a number" },
        { "{\"rope_base\": -1}", "rope_base" },
        { "{\"enc_rope_base\": 0}", "enc_rope_base" },
        { "{\"norm_eps\": 0}", "norm_eps" },
        { "{\"norm_eps\": 1e999}", "norm_eps" },
        { "{\"tie_embeddings\": \"yes\"}", "tie_embeddings" },
        { "{\"format\": 2}", "format" },
        { "{\"foo\": 1}", "unknown key 'foo'" },
        { "{\"sve\": 1}", "sve must be an object" },
        { "{\"sve\": {\"variant\": \"bogus\"}}", "sve.variant" },
        { "{\"sve\": {\"variant\": 3}}", "sve.variant" },
        { "{\"sve\": {\"first\": \"zero\"}}", "sve.first" },
        { "{\"sve\": {\"cross_pos\": 1}}", "sve.cross_pos" },
        { "{\"sve\": {\"out_init_std\": -1}}", "sve.out_init_std" },
        { "{\"sve\": {\"bar\": 1}}", "sve.bar" },
        { "{\"vocab_size\": 1048576, \"dec_dim\": 4096, \"dec_heads\": 16}", "dec.embed.weight" },
        { "{\"image_size\": 4096, \"patch_size\": 2}", "image_size/patch_size" },
        { "{\"max_len\": 1048576, \"dec_mlp\": 16384}", "max_len" },
        { "[1, 2]", "not a JSON object" },
        { "{\"enc_dim\": ", "invalid JSON" },
        { "", "JSON" },
        { "{\"enc_dim\": 192, \"enc_dim\": 96}", "duplicate" },
        { "{\"enc_dim\": 0xc0}", "unexpected character" },
        { "{\"enc_dim\": 192 /* c */}", "unexpected character" },
        { "{\"sve\": {\"a\": {\"b\": [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}}}", "deeper" },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        ClModelConfig c;
        memset(&c, 0x5a, sizeof c);
        ClModelConfig before = c;
        g_autoptr(GError) err = NULL;
        if (cl_model_config_from_json(&c, cases[i].json, &err))
            g_error("accepted %s", cases[i].json);
        assert_error_mentions(err, CL_MODEL_ERROR_CONFIG, cases[i].needle);
        g_assert_true(memcmp(&c, &before, sizeof c) == 0); /* untouched on failure */
    }
    /* straight on the struct */
    ClModelConfig c;
    g_assert_true(cl_model_config_preset(&c, "tiny", NULL));
    c.sve_variant = (ClSveVariant)42;
    g_autoptr(GError) err = NULL;
    g_assert_false(cl_model_config_validate(&c, &err));
    assert_error_mentions(err, CL_MODEL_ERROR_CONFIG, "sve.variant");
}

/* ---- weight specs --------------------------------------------------------------------------- */

static const ClWeightSpec *find_spec(GPtrArray *specs, const char *name)
{
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        if (strcmp(s->name, name) == 0)
            return s;
    }
    return NULL;
}

static void assert_spec(GPtrArray *specs, const char *name, int ndim, gint64 a, gint64 b, gint64 c,
                        gint64 d)
{
    const ClWeightSpec *s = find_spec(specs, name);
    if (!s)
        g_error("no tensor %s", name);
    g_assert_cmpint(s->ndim, ==, ndim);
    gint64 want[4] = { a, b, c, d };
    for (int i = 0; i < ndim; i++)
        g_assert_cmpint(s->shape[i], ==, want[i]);
}

static int count_sve(GPtrArray *specs, int layer)
{
    g_autofree char *prefix = g_strdup_printf("enc.%d.sve.", layer);
    int n = 0;
    for (guint i = 0; i < specs->len; i++)
        n += g_str_has_prefix(((ClWeightSpec *)g_ptr_array_index(specs, i))->name, prefix);
    return n;
}

static void test_specs(void)
{
    ClModelConfig c;
    g_assert_true(cl_model_config_preset(&c, "tiny", NULL));
    ClModelWeights w = { 0 };
    g_autoptr(GPtrArray) specs = cl_model_weight_specs(&c, &w);
    const gint64 D = 192, F = 768, E = 256, V = 4096, Fd = 704, Hm = 768;
    assert_spec(specs, "enc.patch.weight", 4, D, 3, 16, 16);
    assert_spec(specs, "enc.patch.bias", 1, D, 0, 0, 0);
    assert_spec(specs, "enc.5.ln1.weight", 1, D, 0, 0, 0);
    assert_spec(specs, "enc.0.attn.qkv.weight", 2, 3 * D, D, 0, 0);
    assert_spec(specs, "enc.0.attn.qkv.bias", 1, 3 * D, 0, 0, 0);
    assert_spec(specs, "enc.0.attn.out.weight", 2, D, D, 0, 0);
    assert_spec(specs, "enc.0.mlp.fc1.weight", 2, F, D, 0, 0);
    assert_spec(specs, "enc.0.mlp.fc2.weight", 2, D, F, 0, 0);
    assert_spec(specs, "enc.3.sve.ln.bias", 1, D, 0, 0, 0);
    assert_spec(specs, "enc.3.sve.q.weight", 2, D, D, 0, 0);
    assert_spec(specs, "enc.3.sve.kv.weight", 2, 2 * D, D, 0, 0);
    assert_spec(specs, "enc.3.sve.kv.bias", 1, 2 * D, 0, 0, 0);
    assert_spec(specs, "enc.3.sve.out.weight", 2, D, D, 0, 0);
    assert_spec(specs, "enc.3.sve.ffn_ln.weight", 1, D, 0, 0, 0);
    assert_spec(specs, "enc.3.sve.fc1.weight", 2, F, D, 0, 0);
    assert_spec(specs, "enc.3.sve.fc2.weight", 2, D, F, 0, 0);
    assert_spec(specs, "merger.ln.weight", 1, D, 0, 0, 0);
    assert_spec(specs, "merger.fc1.weight", 2, Hm, 4 * D, 0, 0);
    assert_spec(specs, "merger.fc2.weight", 2, E, Hm, 0, 0);
    assert_spec(specs, "merger.fc2.bias", 1, E, 0, 0, 0);
    assert_spec(specs, "dec.embed.weight", 2, V, E, 0, 0);
    assert_spec(specs, "dec.0.attn_norm.weight", 1, E, 0, 0, 0);
    assert_spec(specs, "dec.0.attn.q.weight", 2, E, E, 0, 0);
    assert_spec(specs, "dec.0.attn.k.weight", 2, 128, E, 0, 0); /* 2 KV heads of 64 */
    assert_spec(specs, "dec.0.attn.v.weight", 2, 128, E, 0, 0);
    assert_spec(specs, "dec.0.attn.o.weight", 2, E, E, 0, 0);
    assert_spec(specs, "dec.5.mlp_norm.weight", 1, E, 0, 0, 0);
    assert_spec(specs, "dec.5.mlp.gate.weight", 2, Fd, E, 0, 0);
    assert_spec(specs, "dec.5.mlp.up.weight", 2, Fd, E, 0, 0);
    assert_spec(specs, "dec.5.mlp.down.weight", 2, E, Fd, 0, 0);
    assert_spec(specs, "dec.norm.weight", 1, E, 0, 0, 0);
    assert_spec(specs, "dec.lm_head.weight", 2, V, E, 0, 0);
    g_assert_null(find_spec(specs, "enc.6.ln1.weight"));
    g_assert_null(find_spec(specs, "enc.0.sve.null"));
    g_assert_null(find_spec(specs, "enc.0.sve.ada.weight"));
    g_assert_cmpint(count_sve(specs, 0), ==, 14);
    /* 2 patch + 6 x (12 + 14) + 6 merger + embed + 6 x 9 + norm + lm_head */
    g_assert_cmpuint(specs->len, ==, 2 + 6 * 26 + 6 + 1 + 6 * 9 + 1 + 1);
    /* names unique, slots distinct and inside w */
    g_autoptr(GHashTable) names = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GHashTable) slots = g_hash_table_new(NULL, NULL);
    gint64 total = 0;
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        g_assert_true(g_hash_table_add(names, s->name));
        g_assert_nonnull(s->slot);
        g_assert_true(g_hash_table_add(slots, s->slot));
        total += cl_weight_spec_numel(s);
    }
    g_assert_cmpuint(cl_model_n_params(&c), ==, (size_t)total);
    /* the formula, by hand */
    gint64 enc_layer = 4 * D + 3 * D * D + 3 * D + D * D + D + F * D + F + D * F + D;
    gint64 sve = 2 * D + D * D + D + 2 * D * D + 2 * D + D * D + D + 2 * D + F * D + F + D * F + D;
    gint64 dec_layer = E + E * E + 2 * 128 * E + E * E + E + 3 * Fd * E;
    gint64 want = D * 3 * 256 + D + 6 * (enc_layer + sve) + 2 * D + Hm * 4 * D + Hm + E * Hm + E +
                  V * E + 6 * dec_layer + E + V * E;
    g_assert_cmpint(total, ==, want);
    cl_model_weights_clear(&w);

    /* per variant */
    static const struct {
        ClSveVariant v;
        ClSveFirst f;
        int n_sve;
        gint64 null_ndim;
    } variants[] = {
        { CL_SVE_STATELESS, CL_SVE_FIRST_OWN, 0, 0 },
        { CL_SVE_STATELESS, CL_SVE_FIRST_NULL, 0, 0 },
        { CL_SVE_CROSS, CL_SVE_FIRST_OWN, 8, 0 },
        { CL_SVE_CROSS, CL_SVE_FIRST_NULL, 9, 2 },
        { CL_SVE_CROSS_FFN, CL_SVE_FIRST_NULL, 15, 2 },
        { CL_SVE_SELF_FFN, CL_SVE_FIRST_OWN, 14, 0 },
        { CL_SVE_SELF_FFN, CL_SVE_FIRST_NULL, 15, 2 },
        { CL_SVE_SELF_EXT, CL_SVE_FIRST_OWN, 0, 0 },
        { CL_SVE_SELF_EXT, CL_SVE_FIRST_NULL, 1, 2 },
        { CL_SVE_ADALN_ZERO, CL_SVE_FIRST_OWN, 2, 0 },
        { CL_SVE_ADALN_ZERO, CL_SVE_FIRST_NULL, 3, 1 },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(variants); i++) {
        ClModelConfig vc = c;
        vc.sve_variant = variants[i].v, vc.sve_first = variants[i].f;
        g_autoptr(GPtrArray) vs = cl_model_weight_specs(&vc, NULL);
        g_assert_cmpint(count_sve(vs, 2), ==, variants[i].n_sve);
        const ClWeightSpec *nul = find_spec(vs, "enc.2.sve.null");
        if (variants[i].null_ndim == 0) {
            g_assert_null(nul);
        } else {
            g_assert_nonnull(nul);
            g_assert_cmpint(nul->ndim, ==, variants[i].null_ndim);
            g_assert_cmpint(nul->shape[nul->ndim - 1], ==, D);
            if (nul->ndim == 2)
                g_assert_cmpint(nul->shape[0], ==, 1);
        }
        if (variants[i].v == CL_SVE_ADALN_ZERO) {
            assert_spec(vs, "enc.2.sve.ada.weight", 2, 6 * D, D, 0, 0);
            assert_spec(vs, "enc.2.sve.ada.bias", 1, 6 * D, 0, 0, 0);
        }
        gboolean ffn = variants[i].v == CL_SVE_CROSS_FFN || variants[i].v == CL_SVE_SELF_FFN;
        g_assert_true((find_spec(vs, "enc.0.sve.ffn_ln.weight") != NULL) == ffn);
        g_assert_true((find_spec(vs, "enc.0.sve.fc2.bias") != NULL) == ffn);
    }
    c.tie_embeddings = TRUE;
    g_autoptr(GPtrArray) tied = cl_model_weight_specs(&c, NULL);
    g_assert_null(find_spec(tied, "dec.lm_head.weight"));
    g_assert_nonnull(find_spec(tied, "dec.embed.weight"));
}

/* ---- safetensors: round trip ---------------------------------------------------------------- */

static void test_safetensors_roundtrip(void)
{
    float a[15], b[24], c7[7], scalar = 3.25f;
    for (int i = 0; i < 15; i++)
        a[i] = (float)sin(i * 1.7) * 1000.0f + (float)i * 1e-7f;
    for (int i = 0; i < 24; i++)
        b[i] = (float)cos(i * 0.37) * (float)pow(10.0, (i % 9) - 4);
    for (int i = 0; i < 7; i++)
        c7[i] = (float)(i - 3) / 7.0f;
    c7[6] = 1e30f;
    static const gint64 sa[] = { 3, 5 }, sb[] = { 2, 3, 4 }, sc[] = { 7 }, sz[] = { 0, 4 };
    for (int dt = 0; dt < CL_N_DTYPES; dt++) {
        ClSafetensorsEntry entries[] = {
            { "alpha", CL_DTYPE_F32, 2, sa, a },
            { "beta \"quoted\" é", (ClDtype)dt, 3, sb, b },
            { "gamma", CL_DTYPE_BF16, 1, sc, c7 },
            { "empty", (ClDtype)dt, 2, sz, NULL },
            { "scalar", (ClDtype)dt, 0, NULL, &scalar },
        };
        const char *meta[] = { "k1", "v1", "json", "{\"x\": [1, 2]}\n\t", NULL };
        g_autofree char *path = tmp_path("round.safetensors");
        g_autofree char *sha = NULL;
        g_autoptr(GError) err = NULL;
        g_assert_true(cl_safetensors_write(path, entries, G_N_ELEMENTS(entries), meta, &sha, &err));
        g_assert_no_error(err);
        g_assert_cmpuint(strlen(sha), ==, 64);
        /* the hash is the file's */
        g_autofree char *contents = NULL;
        gsize len = 0;
        g_assert_true(g_file_get_contents(path, &contents, &len, NULL));
        g_autofree char *sha2 =
            g_compute_checksum_for_data(G_CHECKSUM_SHA256, (guchar *)contents, len);
        g_assert_cmpstr(sha, ==, sha2);

        g_autoptr(ClSafetensors) st = cl_safetensors_open(path, &err);
        g_assert_no_error(err);
        g_assert_cmpuint((8 + st->header_len) % 64, ==, 0);
        g_assert_cmpuint(st->tensors->len, ==, G_N_ELEMENTS(entries));
        g_assert_cmpstr(cl_safetensors_metadata(st, "k1"), ==, "v1");
        g_assert_cmpstr(cl_safetensors_metadata(st, "json"), ==, "{\"x\": [1, 2]}\n\t");
        g_assert_null(cl_safetensors_metadata(st, "nope"));
        /* contiguous in the given order */
        guint64 at = 0;
        for (gsize i = 0; i < G_N_ELEMENTS(entries); i++) {
            const ClSafeTensor *t = cl_safetensors_get(st, entries[i].name);
            g_assert_nonnull(t);
            g_assert_cmpuint(t->begin, ==, at);
            g_assert_true(g_ptr_array_index(st->tensors, i) == t);
            g_assert_cmpint(t->dtype, ==, entries[i].dtype);
            g_assert_cmpint(t->ndim, ==, entries[i].ndim);
            at = t->end;
        }
        g_assert_cmpuint(at, ==, st->data_size);
        const ClSafeTensor *ta = cl_safetensors_get(st, "alpha");
        g_assert_cmpuint(ta->numel, ==, 15);
        g_assert_true(memcmp(ta->data, a, sizeof a) == 0); /* F32 exact */
        const ClSafeTensor *tb = cl_safetensors_get(st, "beta \"quoted\" é");
        g_assert_cmpuint(tb->numel, ==, 24);
        for (int i = 0; i < 24; i++) {
            float got;
            if (dt == CL_DTYPE_F32) {
                memcpy(&got, tb->data + 4 * i, 4);
                g_assert_cmphex(fbits(got), ==, fbits(b[i]));
                continue;
            }
            guint16 h;
            memcpy(&h, tb->data + 2 * i, 2);
            got = dt == CL_DTYPE_F16 ? cl_f16_to_f32(h) : cl_bf16_to_f32(h);
            /* half an ulp of the dtype: 2^-11 relative (f16 normal), 2^-8 (bf16); f16
             * subnormals below 2^-14 have an absolute step of 2^-24 */
            double tol =
                dt == CL_DTYPE_F16 ? MAX(fabs(b[i]) * 0x1p-11, 0x1p-25) : fabs(b[i]) * 0x1p-8;
            g_assert_cmpfloat(fabs(got - b[i]), <=, tol);
        }
        const ClSafeTensor *tg = cl_safetensors_get(st, "gamma");
        for (int i = 0; i < 7; i++) {
            guint16 h;
            memcpy(&h, tg->data + 2 * i, 2);
            g_assert_cmpfloat(fabs(cl_bf16_to_f32(h) - c7[i]), <=, fabs(c7[i]) * 0x1p-8);
        }
        const ClSafeTensor *ts = cl_safetensors_get(st, "scalar");
        g_assert_cmpint(ts->ndim, ==, 0);
        g_assert_cmpuint(ts->numel, ==, 1);
        const ClSafeTensor *te = cl_safetensors_get(st, "empty");
        g_assert_cmpuint(te->numel, ==, 0);
        g_assert_cmpuint(te->begin, ==, te->end);

        /* the memory parser sees the same */
        g_autoptr(ClSafetensors) mem = cl_safetensors_parse((guint8 *)contents, len, &err);
        g_assert_no_error(err);
        g_assert_cmpuint(mem->tensors->len, ==, st->tensors->len);
    }
    /* no temporary files left next to the target */
    g_autoptr(GDir) dir = g_dir_open(tmp_dir, 0, NULL);
    for (const char *n; (n = g_dir_read_name(dir));)
        g_assert_null(strstr(n, ".tmp-"));

    /* the writer refuses what it cannot write */
    g_autoptr(GError) err = NULL;
    g_autofree char *path = tmp_path("bad.safetensors");
    ClSafetensorsEntry dup[] = { { "x", CL_DTYPE_F32, 1, sc, c7 },
                                 { "x", CL_DTYPE_F32, 1, sc, c7 } };
    g_assert_false(cl_safetensors_write(path, dup, 2, NULL, NULL, &err));
    assert_error_mentions(err, CL_MODEL_ERROR_FILE, "duplicate");
    g_clear_error(&err);
    g_autofree char *nodir = tmp_path("no/such/dir/x.safetensors");
    g_assert_false(cl_safetensors_write(nodir, dup, 1, NULL, NULL, &err));
    assert_error_mentions(err, CL_MODEL_ERROR_FILE, "x.safetensors");
}

/* ---- safetensors: malformed ----------------------------------------------------------------- */

/* 8-byte length + header + `data_size` bytes; `hlen_override` >= 0 replaces the length */
static GByteArray *make_file(const char *header, gsize data_size, gint64 hlen_override)
{
    GByteArray *f = g_byte_array_new();
    guint64 hlen = hlen_override >= 0 ? (guint64)hlen_override : strlen(header);
    guint8 len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (guint8)(hlen >> (8 * i));
    g_byte_array_append(f, len8, 8);
    g_byte_array_append(f, (const guint8 *)header, strlen(header));
    for (gsize i = 0; i < data_size; i++)
        g_byte_array_append(f, (const guint8 *)"\x01", 1);
    return f;
}

static void assert_refused(GByteArray *f, const char *needle)
{
    g_autoptr(GError) err = NULL;
    ClSafetensors *st = cl_safetensors_parse(f->data, f->len, &err);
    if (st)
        g_error("accepted a file that should fail with '%s'", needle);
    assert_error_mentions(err, CL_MODEL_ERROR_FILE, needle);
    /* and the model binder refuses it the same way */
    g_clear_error(&err);
    g_assert_null(cl_model_load_from_bytes(f->data, f->len, &err));
    assert_error_mentions(err, CL_MODEL_ERROR_FILE, needle);
}

#define T(name, dtype, shape, b, e)                                                                \
    "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static void test_safetensors_malformed(void)
{
    static const struct {
        const char *header;
        gsize data;
        const char *needle;
    } cases[] = {
        { "{\"a\":", 0, "invalid JSON" },
        { "[1, 2]", 0, "not a JSON object" },
        { "  ", 0, "empty JSON" },
        { "{" T("t", "F32", "[2]", 0, 8) "}", 4, "past the end of the data" },
        { "{" T("t", "F32", "[2]", 0, 8) "," T("u", "F32", "[2]", 4, 12) "}", 12, "overlap" },
        { "{" T("t", "F32", "[3]", 0, 8) "}", 8, "size mismatch" },
        { "{" T("t", "F16", "[4294967296,4294967296,16]", 0, 8) "}", 8, "too large" },
        { "{" T("t", "F32", "[4611686018427387904]", 0, 8) "}", 8, "too large" },
        { "{" T("t", "F32", "[99999999999999999999]", 0, 8) "}", 8, "too large" },
        { "{" T("t", "F32", "[2,-2]", 0, 8) "}", 8, "negative dimension" },
        { "{" T("t", "F32", "[2.5]", 0, 8) "}", 8, "not an integer" },
        { "{" T("t", "F32", "[1,1,1,1,1,1,1,1,1]", 0, 4) "}", 4, "9 dimensions" },
        { "{" T("t", "F32", "2", 0, 4) "}", 4, "shape is not an array" },
        { "{" T("t", "F64", "[1]", 0, 8) "}", 8, "unsupported dtype F64 for tensor 't'" },
        { "{" T("t", "I64", "[1]", 0, 8) "}", 8, "unsupported dtype I64" },
        { "{" T("t", "I32", "[1]", 0, 4) "}", 4, "unsupported dtype I32" },
        { "{" T("t", "I8", "[1]", 0, 1) "}", 1, "unsupported dtype I8" },
        { "{" T("t", "BOOL", "[1]", 0, 1) "}", 1, "unsupported dtype BOOL" },
        { "{" T("t", "F17", "[1]", 0, 4) "}", 4, "unknown dtype 'F17' for tensor 't'" },
        { "{" T("t", "f32", "[1]", 0, 4) "}", 4, "unknown dtype 'f32'" },
        { "{\"t\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
          "dtype is not a string" },
        { "{\"t\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "no dtype" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "no data_offsets" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4,
          "unknown key 'x'" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "data_offsets" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,\"4\"]}}", 4,
          "data_offsets end is not an integer" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4, "negative" },
        { "{" T("t", "F32", "[1]", 4, 0) "}", 4, "end before" },
        { "{\"t\":[1]}", 0, "tensor 't': entry is not a JSON object" },
        { "{" T("t", "F32", "[1]", 4, 8) "}", 8, "gap in the data before tensor 't'" },
        { "{" T("t", "F32", "[1]", 0, 4) "}", 9, "5 bytes after the last tensor" },
        { "{\"__metadata__\":{\"a\":1}}", 0, "__metadata__ value of 'a' is not a string" },
        { "{\"__metadata__\":[\"a\"]}", 0, "__metadata__ is not a JSON object" },
        { "{" T("t", "F32", "[1]", 0, 4) "," T("t", "F32", "[1]", 0, 4) "}", 4, "duplicate" },
        { "{\"t\\u0000x\":{}}", 0, "\\u0000" },
        { "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
          0, "deeper" },
        { "{\"\xff\":1}", 0, "UTF-8" },
        /* json-glib's extensions are refused: they could hide text from the strict scan */
        { "/* \" */ {}", 0, "unexpected character" },
        { "{'a\"':1}", 0, "unexpected character" },
        { "{" T("t", "F32", "[0x2]", 0, 8) "}", 8, "unexpected character" },
        { "var x = {};", 0, "unexpected character" },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GByteArray) f = make_file(cases[i].header, cases[i].data, -1);
        assert_refused(f, cases[i].needle);
    }
    /* lengths */
    g_autoptr(GByteArray) shortf = g_byte_array_new();
    g_byte_array_append(shortf, (const guint8 *)"\x02\0\0\0", 4);
    assert_refused(shortf, "truncated");
    g_autoptr(GByteArray) past = make_file("{}", 0, 1000);
    assert_refused(past, "runs past the end of the file");
    g_autoptr(GByteArray) huge = make_file("{}", 0, 200000000);
    assert_refused(huge, "100 MB");
    g_autoptr(GByteArray) huge64 = make_file("{}", 0, G_MAXINT64);
    assert_refused(huge64, "100 MB");
    g_autoptr(GByteArray) nul = make_file("{}", 0, -1);
    g_byte_array_append(nul, (const guint8 *)"\0", 1);
    nul->data[0] = 3;
    assert_refused(nul, "NUL");
    /* a valid file cut short */
    g_autoptr(GByteArray) ok = make_file("{" T("t", "F32", "[2]", 0, 8) "}", 8, -1);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClSafetensors) st = cl_safetensors_parse(ok->data, ok->len, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(cl_safetensors_get(st, "t")->numel, ==, 2);
    g_byte_array_set_size(ok, ok->len - 1);
    assert_refused(ok, "past the end of the data");
    g_byte_array_set_size(ok, 12);
    assert_refused(ok, "truncated");

    /* from files: the message names the file */
    g_autofree char *path = tmp_path("broken.safetensors");
    g_assert_true(g_file_set_contents(path, "\x10\0\0\0\0\0\0\0{\"a\"", 12, NULL));
    g_assert_null(cl_safetensors_open(path, &err));
    assert_error_mentions(err, CL_MODEL_ERROR_FILE, "broken.safetensors: truncated");
    g_clear_error(&err);
    g_assert_true(g_file_set_contents(path, "", 0, NULL));
    g_assert_null(cl_model_load(path, &err));
    assert_error_mentions(err, CL_MODEL_ERROR_FILE, "truncated");
    g_clear_error(&err);
    g_autofree char *missing = tmp_path("missing.safetensors");
    g_assert_null(cl_model_load(missing, &err));
    assert_error_mentions(err, CL_MODEL_ERROR_FILE, "missing.safetensors");
}

/* ---- models --------------------------------------------------------------------------------- */

static char *file_sha256(const char *path)
{
    g_autofree char *contents = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(path, &contents, &len, NULL));
    return g_compute_checksum_for_data(G_CHECKSUM_SHA256, (guchar *)contents, len);
}

static void save_or_die(ClModel *m, const char *path, const char *dtype)
{
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_model_save(m, path, dtype, &err));
    g_assert_no_error(err);
}

static double tensor_std(const float *x, gsize n)
{
    double s = 0, s2 = 0;
    for (gsize i = 0; i < n; i++)
        s += x[i], s2 += (double)x[i] * x[i];
    double mean = s / n;
    return sqrt(s2 / n - mean * mean);
}

static void test_random_init(void)
{
    ClModelConfig tiny;
    g_assert_true(cl_model_config_preset(&tiny, "tiny", NULL));
    g_autoptr(GError) err = NULL;
    gint64 t0 = g_get_monotonic_time();
    g_autoptr(ClModel) m = cl_model_new_random(&tiny, 7, &err);
    double secs = (g_get_monotonic_time() - t0) / 1e6;
    g_assert_no_error(err);
    g_test_message("random init of tiny (%zu parameters): %.3f s", m->n_params, secs);
    /* "well under a second"; the bound leaves room for a loaded shared machine */
    g_assert_cmpfloat(secs, <, 2.0);
    g_assert_cmpuint(m->n_params, ==, cl_model_n_params(&tiny));
    g_assert_null(m->sha256);
    g_assert_null(m->path);
    g_assert_cmpint(cl_tokenizer_vocab_size(m->tokenizer), ==, CL_TOKEN_FIRST_MERGE);

    const size_t D = 192, F = 768;
    const ClEncoderLayerWeights *L = &m->w.enc[3];
    for (size_t i = 0; i < D; i++) {
        g_assert_cmpfloat(L->ln1_w[i], ==, 1.0f);
        g_assert_cmpfloat(L->ln1_b[i], ==, 0.0f);
        g_assert_cmpfloat(L->qkv_b[i], ==, 0.0f);
        g_assert_cmpfloat(m->w.merger_ln_w[i], ==, 1.0f);
    }
    for (size_t i = 0; i < 256; i++) {
        g_assert_cmpfloat(m->w.dec[2].attn_norm[i], ==, 1.0f);
        g_assert_cmpfloat(m->w.dec[2].mlp_norm[i], ==, 1.0f);
        g_assert_cmpfloat(m->w.dec_norm[i], ==, 1.0f);
    }
    /* N(0, 0.02²): sample std within 2% on 100k+ values */
    g_assert_cmpfloat(fabs(tensor_std(L->qkv_w, 3 * D * D) - 0.02), <, 0.0004);
    g_assert_cmpfloat(fabs(tensor_std(m->w.embed, 4096 * 256) - 0.02), <, 0.0004);
    g_assert_true(m->w.lm_head != m->w.embed);
    g_assert_true(memcmp(m->w.lm_head, m->w.embed, 4096 * 256 * sizeof(float)) != 0);

    /* §3.7: clones of the block, outputs ~ N(0, out_init_std²) */
    g_assert_true(memcmp(L->sve_ln_w, L->ln1_w, D * 4) == 0);
    g_assert_true(memcmp(L->sve_ln_b, L->ln1_b, D * 4) == 0);
    g_assert_true(memcmp(L->sve_q_w, L->qkv_w, D * D * 4) == 0);
    g_assert_true(memcmp(L->sve_q_b, L->qkv_b, D * 4) == 0);
    g_assert_true(memcmp(L->sve_kv_w, L->qkv_w + D * D, 2 * D * D * 4) == 0);
    g_assert_true(memcmp(L->sve_kv_b, L->qkv_b + D, 2 * D * 4) == 0);
    g_assert_true(memcmp(L->sve_ffn_ln_w, L->ln2_w, D * 4) == 0);
    g_assert_true(memcmp(L->sve_fc1_w, L->fc1_w, F * D * 4) == 0);
    g_assert_true(memcmp(L->sve_fc1_b, L->fc1_b, F * 4) == 0);
    g_assert_cmpfloat(fabs(tensor_std(L->sve_out_w, D * D) - 1e-4), <, 0.05e-4);
    g_assert_cmpfloat(fabs(tensor_std(L->sve_fc2_w, D * F) - 1e-4), <, 0.03e-4);
    for (size_t i = 0; i < D; i++)
        g_assert_true(L->sve_out_b[i] == 0 && L->sve_fc2_b[i] == 0);
    g_assert_true(memcmp(m->w.enc[0].sve_out_w, m->w.enc[1].sve_out_w, D * D * 4) != 0);

    /* determinism: same seed, same file; another seed, another file */
    g_autofree char *p1 = tmp_path("r1.safetensors");
    g_autofree char *p2 = tmp_path("r2.safetensors");
    g_autofree char *p3 = tmp_path("r3.safetensors");
    ClModelConfig small = small_config(CL_SVE_CROSS_FFN, CL_SVE_FIRST_NULL);
    g_autoptr(ClModel) a = cl_model_new_random(&small, 42, &err);
    g_autoptr(ClModel) b = cl_model_new_random(&small, 42, &err);
    g_autoptr(ClModel) c = cl_model_new_random(&small, 43, &err);
    g_assert_no_error(err);
    save_or_die(a, p1, "F32");
    save_or_die(b, p2, "F32");
    save_or_die(c, p3, "F32");
    g_assert_cmpstr(a->sha256, ==, b->sha256);
    g_assert_cmpstr(a->sha256, !=, c->sha256);
    g_autofree char *h1 = file_sha256(p1);
    g_assert_cmpstr(a->sha256, ==, h1);
    g_assert_cmpstr(a->path, ==, p1);
    /* a pinned value: the same weights on every machine and every build */
    g_autoptr(ClModel) pinned = cl_model_new_random(&small, 1, &err);
    g_test_message("small seed 1: patch_w[0] = %a, embed[5] = %a, sve.null[0] = %a",
                   pinned->w.patch_w[0], pinned->w.embed[5], pinned->w.enc[1].sve_null[0]);
    g_assert_cmpfloat(pinned->w.patch_w[0], ==, -0x1.99d8a4p-8f);
    g_assert_cmpfloat(pinned->w.embed[5], ==, -0x1.b70a9cp-6f);
    g_assert_cmpfloat(pinned->w.enc[1].sve_null[0], ==, 0x1.7c3176p-9f);

    /* sve.null ~ N(0, 0.02²) and present for first == null */
    g_assert_nonnull(a->w.enc[1].sve_null);
    g_assert_null(m->w.enc[1].sve_null);

    /* out_init_std 0: exact zeros (the paper's zero init), for every variant with outputs */
    for (int v = 0; v < CL_SVE_N_VARIANTS; v++) {
        ClModelConfig z = small_config(v, CL_SVE_FIRST_NULL);
        z.sve_out_init_std = 0;
        g_autoptr(ClModel) zm = cl_model_new_random(&z, 5, &err);
        g_assert_no_error(err);
        const size_t d = 16, f = 32;
        for (int l = 0; l < z.enc_depth; l++) {
            const ClEncoderLayerWeights *zl = &zm->w.enc[l];
            if (zl->sve_out_w)
                for (size_t i = 0; i < d * d; i++)
                    g_assert_cmphex(fbits(zl->sve_out_w[i]), ==, 0);
            if (zl->sve_fc2_w)
                for (size_t i = 0; i < d * f; i++)
                    g_assert_cmphex(fbits(zl->sve_fc2_w[i]), ==, 0);
            if (zl->sve_ada_w)
                for (size_t i = 0; i < 6 * d * d; i++)
                    g_assert_cmphex(fbits(zl->sve_ada_w[i]), ==, 0);
            if (zl->sve_ada_b)
                for (size_t i = 0; i < 6 * d; i++)
                    g_assert_cmphex(fbits(zl->sve_ada_b[i]), ==, 0);
            g_assert_true((zl->sve_ada_w != NULL) == (v == CL_SVE_ADALN_ZERO));
            g_assert_true((zl->sve_q_w != NULL) == cl_config_has_cross(&z));
            g_assert_true((zl->sve_fc1_w != NULL) == cl_config_has_sve_ffn(&z));
            g_assert_true((zl->sve_null != NULL) == (v != CL_SVE_STATELESS));
            if (zl->sve_null)
                g_assert_true(zl->sve_null[0] != 0);
        }
    }

    /* tied embeddings: one tensor, lm_head is the embedding */
    ClModelConfig tied = small;
    tied.tie_embeddings = TRUE;
    g_autoptr(ClModel) tm = cl_model_new_random(&tied, 1, &err);
    g_assert_true(tm->w.lm_head == tm->w.embed);
    g_assert_cmpuint(tm->n_params, ==, a->n_params - 300 * 16);

    /* invalid config refused */
    ClModelConfig bad = small;
    bad.enc_heads = 3;
    g_assert_null(cl_model_new_random(&bad, 1, &err));
    assert_error_mentions(err, CL_MODEL_ERROR_CONFIG, "enc_heads");
}

static void assert_weights_equal(ClModel *a, ClModel *b, int dtype)
{
    g_autoptr(GPtrArray) sa = cl_model_weight_specs(&a->config, &a->w);
    g_autoptr(GPtrArray) sb = cl_model_weight_specs(&b->config, &b->w);
    g_assert_cmpuint(sa->len, ==, sb->len);
    for (guint i = 0; i < sa->len; i++) {
        const ClWeightSpec *x = g_ptr_array_index(sa, i), *y = g_ptr_array_index(sb, i);
        g_assert_cmpstr(x->name, ==, y->name);
        gint64 n = cl_weight_spec_numel(x);
        for (gint64 k = 0; k < n; k++) {
            float want = (*x->slot)[k], got = (*y->slot)[k];
            if (dtype == CL_DTYPE_F16)
                want = cl_f16_to_f32(cl_f32_to_f16(want));
            else if (dtype == CL_DTYPE_BF16)
                want = cl_bf16_to_f32(cl_f32_to_bf16(want));
            if (fbits(want) != fbits(got))
                g_error("%s[%" G_GINT64_FORMAT "]: %a != %a", x->name, k, got, want);
        }
    }
    g_assert_true(b->w.lm_head != NULL);
    g_assert_cmpint(cl_tokenizer_vocab_size(a->tokenizer), ==,
                    cl_tokenizer_vocab_size(b->tokenizer));
    g_autofree char *ca = cl_model_config_to_json(&a->config);
    g_autofree char *cb = cl_model_config_to_json(&b->config);
    g_assert_cmpstr(ca, ==, cb);
}

static gboolean points_into(const float *p, const guint8 *base, gsize size)
{
    return (const guint8 *)p >= base && (const guint8 *)p < base + size;
}

static void test_save_load(void)
{
    g_autoptr(GError) err = NULL;
    for (int v = 0; v < CL_SVE_N_VARIANTS; v++) {
        ClModelConfig c = small_config(v, v % 2 ? CL_SVE_FIRST_NULL : CL_SVE_FIRST_OWN);
        c.tie_embeddings = v == CL_SVE_SELF_EXT;
        c.visual_pos = v == CL_SVE_CROSS_FFN; /* the learned visual positions, "merger.pos" */
        c.visual_center = v == CL_SVE_CROSS || v == CL_SVE_CROSS_FFN;
        c.enc_pos = v == CL_SVE_CROSS_FFN || v == CL_SVE_STATELESS; /* "enc.pos" */
        g_autoptr(ClModel) m = cl_model_new_random(&c, 100 + v, &err);
        g_assert_no_error(err);
        for (int dt = 0; dt < CL_N_DTYPES; dt++) {
            g_autofree char *path = tmp_path("model.safetensors");
            save_or_die(m, path, cl_dtype_name(dt));
            g_autoptr(ClModel) back = cl_model_load(path, &err);
            g_assert_no_error(err);
            g_autofree char *h = file_sha256(path);
            g_assert_cmpstr(back->sha256, ==, h);
            g_assert_cmpstr(back->sha256, ==, m->sha256);
            g_assert_cmpstr(back->path, ==, path);
            g_assert_cmpuint(back->n_params, ==, m->n_params);
            g_assert_cmpint(back->config.visual_pos, ==, c.visual_pos);
            g_assert_cmpint(back->config.visual_center, ==, c.visual_center);
            g_assert_true(!back->w.merger_pos == !c.visual_pos);
            g_assert_cmpint(back->config.enc_pos, ==, c.enc_pos);
            g_assert_true(!back->w.enc_pos == !c.enc_pos);
            assert_weights_equal(m, back, dt);
            if (c.tie_embeddings)
                g_assert_true(back->w.lm_head == back->w.embed);
            const guint8 *base = (const guint8 *)g_mapped_file_get_contents(back->mapping);
            gsize size = g_mapped_file_get_length(back->mapping);
            if (dt == CL_DTYPE_F32) {
                /* no copy: every tensor points into the mapping, nothing in an arena */
                g_assert_null(back->arena);
                g_assert_true(points_into(back->w.embed, base, size));
                g_assert_true(points_into(back->w.enc[1].qkv_w, base, size));
                /* private mapping: writes stay in memory */
                back->w.embed[0] = 12345.0f;
                g_autofree char *h2 = file_sha256(path);
                g_assert_cmpstr(h2, ==, h);
            } else {
                g_assert_nonnull(back->arena);
                g_assert_false(points_into(back->w.embed, base, size));
            }
            /* the same file from memory */
            g_autofree char *contents = NULL;
            gsize len = 0;
            g_assert_true(g_file_get_contents(path, &contents, &len, NULL));
            g_autoptr(ClModel) mem = cl_model_load_from_bytes((guint8 *)contents, len, &err);
            g_assert_no_error(err);
            g_clear_pointer(&contents, g_free);
            assert_weights_equal(m, mem, dt);
            g_assert_cmpstr(mem->sha256, ==, h);
            g_assert_null(mem->path);
        }
    }

    /* convert a model over its own file while it is mapped */
    ClModelConfig c = small_config(CL_SVE_CROSS_FFN, CL_SVE_FIRST_OWN);
    g_autoptr(ClModel) m = cl_model_new_random(&c, 9, &err);
    g_autofree char *path = tmp_path("self.safetensors");
    save_or_die(m, path, "F32");
    g_autoptr(ClModel) loaded = cl_model_load(path, &err);
    g_assert_no_error(err);
    save_or_die(loaded, path, "bf16");
    g_autoptr(ClModel) again = cl_model_load(path, &err);
    g_assert_no_error(err);
    assert_weights_equal(m, again, CL_DTYPE_BF16);
    /* a read-only file maps too (the private mapping needs no write access) */
    g_autofree char *ro = tmp_path("readonly.safetensors");
    save_or_die(m, ro, "F32");
    g_assert_cmpint(g_chmod(ro, 0444), ==, 0);
    g_autoptr(ClModel) rom = cl_model_load(ro, &err);
    g_assert_no_error(err);
    assert_weights_equal(m, rom, CL_DTYPE_F32);
    rom->w.patch_w[0] = 1.0f; /* copy-on-write */
    g_assert_false(cl_model_save(m, path, "F64", &err));
    assert_error_mentions(err, CL_MODEL_ERROR_INPUT, "F64");
}

/* Writes a file with the model's tensors, edited by the caller's choices. */
static void write_variant(ClModel *m, const char *path, const char *drop, const char *reshape,
                          const char *extra, const char *const *meta)
{
    g_autoptr(GPtrArray) specs = cl_model_weight_specs(&m->config, &m->w);
    g_autoptr(GArray) entries = g_array_new(FALSE, TRUE, sizeof(ClSafetensorsEntry));
    static gint64 flat[1];
    static const gint64 one[1] = { 4 };
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        if (drop && strcmp(s->name, drop) == 0)
            continue;
        ClSafetensorsEntry e = { s->name, CL_DTYPE_F32, s->ndim, s->shape, *s->slot };
        if (reshape && strcmp(s->name, reshape) == 0) {
            flat[0] = cl_weight_spec_numel(s);
            e.ndim = 1, e.shape = flat;
        }
        g_array_append_val(entries, e);
    }
    if (extra) {
        ClSafetensorsEntry e = { extra, CL_DTYPE_F32, 1, one, m->w.patch_b };
        g_array_append_val(entries, e);
    }
    g_autofree char *cfg = cl_model_config_to_json(&m->config);
    g_autofree char *tok = cl_tokenizer_to_json(m->tokenizer);
    const char *def[] = {
        "changelens.format", "1", "changelens.config", cfg, "changelens.tokenizer", tok, NULL
    };
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_safetensors_write(path, (ClSafetensorsEntry *)entries->data, entries->len,
                                       meta ? meta : def, NULL, &err));
    g_assert_no_error(err);
}

static void assert_load_fails(const char *path, int code, const char *needle)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(ClModel) m = cl_model_load(path, &err);
    if (m)
        g_error("loaded a model that should fail with '%s'", needle);
    assert_error_mentions(err, code, needle);
    g_autofree char *base = g_path_get_basename(path);
    g_assert_nonnull(strstr(err->message, base));
}

static void test_model_file_errors(void)
{
    g_autoptr(GError) err = NULL;
    ClModelConfig c = small_config(CL_SVE_CROSS_FFN, CL_SVE_FIRST_OWN);
    g_autoptr(ClModel) m = cl_model_new_random(&c, 3, &err);
    g_autofree char *path = tmp_path("edited.safetensors");

    write_variant(m, path, NULL, NULL, NULL, NULL);
    g_autoptr(ClModel) fine = cl_model_load(path, &err);
    g_assert_no_error(err);
    g_assert_nonnull(fine);

    write_variant(m, path, "enc.1.sve.kv.bias", NULL, NULL, NULL);
    assert_load_fails(path, CL_MODEL_ERROR_FILE, "missing tensor 'enc.1.sve.kv.bias'");
    write_variant(m, path, NULL, "dec.0.attn.k.weight", NULL, NULL);
    assert_load_fails(path, CL_MODEL_ERROR_FILE,
                      "tensor 'dec.0.attn.k.weight' has shape [128], the config needs [8, 16]");
    write_variant(m, path, NULL, NULL, "enc.0.bonus.weight", NULL);
    assert_load_fails(path, CL_MODEL_ERROR_FILE, "unexpected tensor 'enc.0.bonus.weight'");

    g_autofree char *cfg = cl_model_config_to_json(&m->config);
    g_autofree char *tok = cl_tokenizer_to_json(m->tokenizer);
    const char *no_format[] = { "changelens.config", cfg, "changelens.tokenizer", tok, NULL };
    write_variant(m, path, NULL, NULL, NULL, no_format);
    assert_load_fails(path, CL_MODEL_ERROR_FILE, "changelens.format");
    const char *format2[] = {
        "changelens.format", "2", "changelens.config", cfg, "changelens.tokenizer", tok, NULL
    };
    write_variant(m, path, NULL, NULL, NULL, format2);
    assert_load_fails(path, CL_MODEL_ERROR_FILE, "changelens.format '2'");
    const char *no_cfg[] = { "changelens.format", "1", "changelens.tokenizer", tok, NULL };
    write_variant(m, path, NULL, NULL, NULL, no_cfg);
    assert_load_fails(path, CL_MODEL_ERROR_FILE, "no changelens.config");
    const char *no_tok[] = { "changelens.format", "1", "changelens.config", cfg, NULL };
    write_variant(m, path, NULL, NULL, NULL, no_tok);
    assert_load_fails(path, CL_MODEL_ERROR_FILE, "no changelens.tokenizer");
    const char *bad_cfg[] = { "changelens.format",
                              "1",
                              "changelens.config",
                              "{\"enc_heads\": 5}",
                              "changelens.tokenizer",
                              tok,
                              NULL };
    write_variant(m, path, NULL, NULL, NULL, bad_cfg);
    assert_load_fails(path, CL_MODEL_ERROR_CONFIG, "enc_heads");
    const char *bad_tok[] = { "changelens.format",
                              "1",
                              "changelens.config",
                              cfg,
                              "changelens.tokenizer",
                              "{\"version\": 1, \"merges\": 7}",
                              NULL };
    write_variant(m, path, NULL, NULL, NULL, bad_tok);
    assert_load_fails(path, CL_MODEL_ERROR_TOKENIZER, "");

    /* the config's vocabulary must hold the tokenizer's */
    const char *texts[] = { "the cat sat on the mat; the cat sat on the mat again and again",
                            "there the other mother bathes the other cat" };
    g_autoptr(ClTokenizer) big = cl_tokenizer_train(texts, 2, 290, &err);
    g_assert_no_error(err);
    g_assert_cmpint(cl_tokenizer_vocab_size(big), >, 261);
    ClModelConfig small_vocab = c;
    small_vocab.vocab_size = 261;
    g_autoptr(ClModel) sv = cl_model_new_random(&small_vocab, 3, &err);
    g_assert_no_error(err);
    g_autofree char *cfg261 = cl_model_config_to_json(&small_vocab);
    g_autofree char *bigtok = cl_tokenizer_to_json(big);
    const char *vocab_meta[] = {
        "changelens.format", "1", "changelens.config", cfg261, "changelens.tokenizer", bigtok, NULL
    };
    write_variant(sv, path, NULL, NULL, NULL, vocab_meta);
    assert_load_fails(path, CL_MODEL_ERROR_CONFIG, "vocab_size (261)");

    /* a tied config refuses a file that still has lm_head */
    ClModelConfig tied = c;
    tied.tie_embeddings = TRUE;
    g_autofree char *tied_cfg = cl_model_config_to_json(&tied);
    const char *tied_meta[] = {
        "changelens.format", "1", "changelens.config", tied_cfg, "changelens.tokenizer", tok, NULL
    };
    write_variant(m, path, NULL, NULL, NULL, tied_meta);
    assert_load_fails(path, CL_MODEL_ERROR_FILE, "unexpected tensor 'dec.lm_head.weight'");

    /* another variant's file */
    ClModelConfig other = c;
    other.sve_variant = CL_SVE_CROSS;
    g_autofree char *other_cfg = cl_model_config_to_json(&other);
    const char *other_meta[] = {
        "changelens.format", "1", "changelens.config", other_cfg, "changelens.tokenizer", tok, NULL
    };
    write_variant(m, path, NULL, NULL, NULL, other_meta);
    assert_load_fails(path, CL_MODEL_ERROR_FILE, "unexpected tensor 'enc.0.sve.ffn_ln.weight'");
}

/* ---- the CLI -------------------------------------------------------------------------------- */

static int run_cli(const char *const *args, char **out, char **err)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, (char *)g_getenv("CL_CLI"));
    for (int i = 0; args[i]; i++)
        g_ptr_array_add(argv, (char *)args[i]);
    g_ptr_array_add(argv, NULL);
    int status = 0;
    g_autoptr(GError) error = NULL;
    g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, out,
                               err, &status, &error));
    g_assert_no_error(error);
    g_assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* cl_model_grafted: the encoder, its heads and the merger's first layer from the vision model,
 * the decoder, its embedding and its config from the language model, the merger's last layer
 * (the new decoder's width) new */
static void test_graft(void)
{
    g_autoptr(GError) err = NULL;
    ClModelConfig vc, lc;
    g_assert_true(cl_model_config_preset(&vc, "tiny", &err));
    vc.change_head = TRUE;
    vc.change_threshold = 0.8;
    lc = vc;
    lc.change_head = FALSE, lc.change_threshold = 0;
    lc.dec_dim = vc.dec_dim / 2, lc.dec_depth = 1, lc.dec_mlp = 96, lc.vocab_size = 512;
    lc.rope_base = 50000;
    g_autoptr(ClModel) vision = cl_model_new_random(&vc, 1, &err);
    g_assert_no_error(err);
    g_autoptr(ClModel) language = cl_model_new_random(&lc, 2, &err);
    g_assert_no_error(err);
    g_autoptr(ClModel) g = cl_model_grafted(vision, language, 3, &err);
    g_assert_no_error(err);
    const ClModelConfig *c = &g->config;
    g_assert_cmpint(c->dec_dim, ==, lc.dec_dim);
    g_assert_cmpint(c->dec_depth, ==, 1);
    g_assert_cmpint(c->vocab_size, ==, 512);
    g_assert_cmpfloat(c->rope_base, ==, 50000);
    g_assert_true(c->change_head);
    g_assert_cmpfloat(c->change_threshold, ==, 0.8);
    g_assert_cmpint(c->enc_dim, ==, vc.enc_dim);
    const size_t D = (size_t)vc.enc_dim, E = (size_t)lc.dec_dim;
    const size_t cpp = (size_t)cl_config_patch_inputs(&vc);
    g_assert_cmpmem(g->w.patch_w, D * cpp * sizeof(float), vision->w.patch_w,
                    D * cpp * sizeof(float));
    g_assert_cmpmem(g->w.enc_change_w, D * sizeof(float), vision->w.enc_change_w,
                    D * sizeof(float));
    const size_t fc1 = (size_t)vc.merger_hidden * 4 * D;
    g_assert_cmpmem(g->w.merger_fc1_w, fc1 * sizeof(float), vision->w.merger_fc1_w,
                    fc1 * sizeof(float));
    g_assert_cmpmem(g->w.embed, 512 * E * sizeof(float), language->w.embed,
                    512 * E * sizeof(float));
    const size_t q = (size_t)lc.dec_heads * (E / lc.dec_heads) * E;
    g_assert_cmpmem(g->w.dec[0].q, q * sizeof(float), language->w.dec[0].q, q * sizeof(float));
    /* the new merger output: finite, and not a copy of either model's */
    const size_t fc2 = E * (size_t)vc.merger_hidden;
    for (size_t i = 0; i < fc2; i++)
        g_assert_true(isfinite(g->w.merger_fc2_w[i]));
    g_assert_true(memcmp(g->w.merger_fc2_w, language->w.merger_fc2_w, fc2 * sizeof(float)) != 0);
}

/* --visual-pos-grid: merger.pos as a 2-D sin-cos grid (docs/MODEL.md §3.8): centred, the
 * formula's values, and a cell's distance to another growing with their distance on the grid,
 * the same along rows and columns */
static void test_visual_pos_grid(void)
{
    g_autoptr(GError) err = NULL;
    ClModelConfig c = small_config(CL_SVE_STATELESS, CL_SVE_FIRST_OWN);
    c.image_size = 160; /* a 10 × 10 patch grid, 5 × 5 merged */
    g_autoptr(ClModel) plain = cl_model_new_random(&c, 3, &err);
    g_assert_no_error(err);
    g_assert_false(cl_model_init_visual_pos_grid(plain, 0.1)); /* no merger.pos */
    c.visual_pos = TRUE;
    g_autoptr(ClModel) m = cl_model_new_random(&c, 3, &err);
    g_assert_no_error(err);
    g_assert_true(cl_model_init_visual_pos_grid(m, 0.5));
    const int G = 5, M = G * G, E = c.dec_dim, q = E / 4;
    const float *pos = m->w.merger_pos;
    for (int e = 0; e < E; e++) {
        double mean = 0;
        for (int k = 0; k < M; k++)
            mean += pos[k * E + e];
        g_assert_cmpfloat(fabs(mean / M), <, 1e-6);
    }
    for (int k = 0; k < q; k++) { /* channel k: 0.5 · (sin(i f_k) − its mean over the rows) */
        double f = pow(2.0, -4.0 * k / q), mean = 0;
        for (int i = 0; i < G; i++)
            mean += sin(i * f) / G;
        for (int cell = 0; cell < M; cell++)
            g_assert_cmpfloat(fabs(pos[cell * E + k] - 0.5 * (sin((cell / G) * f) - mean)), <,
                              1e-6);
    }
    double last = 0;
    for (int d = 1; d < G; d++) {
        double dr = 0, dc = 0;
        for (int e = 0; e < E; e++) {
            double a = pos[e], r = pos[d * G * E + e], col = pos[d * E + e];
            dr += (a - r) * (a - r);
            dc += (a - col) * (a - col);
        }
        g_assert_cmpfloat(fabs(dr - dc), <, 1e-6);
        g_assert_cmpfloat(dr, >, last);
        last = dr;
    }
    /* with enc_pos, enc.pos gets the same grid at the patch grid (10 × 10) and the encoder's
     * width: patch (r, c)'s channel k is 0.5 · (sin(r f_k) − its mean over the rows) */
    c.enc_pos = TRUE;
    g_autoptr(ClModel) me = cl_model_new_random(&c, 3, &err);
    g_assert_no_error(err);
    g_assert_true(cl_model_init_visual_pos_grid(me, 0.5));
    const int Gp = 10, D = c.enc_dim, qd = D / 4;
    for (int k = 0; k < qd; k++) {
        double f = pow(2.0, -4.0 * k / qd), mean = 0;
        for (int i = 0; i < Gp; i++)
            mean += sin(i * f) / Gp;
        for (int cell = 0; cell < Gp * Gp; cell++)
            g_assert_cmpfloat(
                fabs(me->w.enc_pos[cell * D + k] - 0.5 * (sin((cell / Gp) * f) - mean)), <, 1e-6);
    }
    g_assert_cmpmem(me->w.merger_pos, (gsize)M * E * sizeof(float), m->w.merger_pos,
                    (gsize)M * E * sizeof(float));
}

static void test_cli(void)
{
    const char *cli = g_getenv("CL_CLI");
    if (!cli || !g_file_test(cli, G_FILE_TEST_IS_EXECUTABLE)) {
        g_test_skip("CL_CLI is not set to a built changelens-cli");
        return;
    }
    g_autofree char *cfg_path = tmp_path("small.json");
    ClModelConfig c = small_config(CL_SVE_CROSS_FFN, CL_SVE_FIRST_OWN);
    g_autofree char *cfg_json = cl_model_config_to_json(&c);
    g_assert_true(g_file_set_contents(cfg_path, cfg_json, -1, NULL));
    g_autofree char *out1 = tmp_path("cli1.safetensors");
    g_autofree char *out2 = tmp_path("cli2.safetensors");
    g_autofree char *out3 = tmp_path("cli3.safetensors");

    g_autofree char *o = NULL, *e = NULL;
    const char *init[] = { "model",      "init",    "--config", cfg_path,         "--variant",
                           "adaln_zero", "--first", "null",     "--no-cross-pos", "--out-init-std",
                           "0",          "--seed",  "11",       "--dtype",        "f16",
                           "--out",      out1,      NULL };
    g_assert_cmpint(run_cli(init, &o, &e), ==, 0);
    g_autofree char *h1 = file_sha256(out1);
    g_assert_nonnull(strstr(o, h1));
    g_assert_nonnull(strstr(o, out1));
    {
        /* a grid for positions the config does not have is a usage error */
        g_autofree char *o2 = NULL, *e2 = NULL;
        const char *grid[] = { "model", "init",  "--config", cfg_path, "--visual-pos-grid",
                               "0.1",   "--out", out3,       NULL };
        g_assert_cmpint(run_cli(grid, &o2, &e2), ==, 2);
        g_assert_nonnull(strstr(e2, "visual_pos"));
        g_assert_false(g_file_test(out3, G_FILE_TEST_EXISTS));
    }

    /* the same through the library */
    c.sve_variant = CL_SVE_ADALN_ZERO, c.sve_first = CL_SVE_FIRST_NULL;
    c.sve_cross_pos = FALSE, c.sve_out_init_std = 0;
    g_autoptr(GError) err = NULL;
    g_autoptr(ClModel) m = cl_model_new_random(&c, 11, &err);
    save_or_die(m, out2, "F16");
    g_assert_cmpstr(m->sha256, ==, h1);
    g_autofree char *params = g_strdup_printf("%zu", m->n_params);
    g_assert_nonnull(strstr(o, params));

    g_clear_pointer(&o, g_free);
    g_clear_pointer(&e, g_free);
    const char *info[] = { "model", "info", "--json", out1, NULL };
    g_assert_cmpint(run_cli(info, &o, &e), ==, 0);
    g_autoptr(JsonParser) p = json_parser_new();
    g_assert_true(json_parser_load_from_data(p, o, -1, NULL));
    JsonObject *root = json_node_get_object(json_parser_get_root(p));
    g_assert_cmpint(json_object_get_int_member(root, "params"), ==, (gint64)m->n_params);
    g_assert_cmpstr(json_object_get_string_member(root, "sha256"), ==, h1);
    g_assert_cmpint(json_object_get_int_member(root, "tokenizer_vocab"), ==, 261);
    JsonArray *dts = json_object_get_array_member(root, "dtypes");
    g_assert_cmpuint(json_array_get_length(dts), ==, 1);
    g_assert_cmpstr(json_array_get_string_element(dts, 0), ==, "F16");
    JsonObject *jc = json_object_get_object_member(root, "config");
    g_assert_cmpstr(
        json_object_get_string_member(json_object_get_object_member(jc, "sve"), "variant"), ==,
        "adaln_zero");

    g_clear_pointer(&o, g_free);
    g_clear_pointer(&e, g_free);
    const char *info_text[] = { "model", "info", out1, NULL };
    g_assert_cmpint(run_cli(info_text, &o, &e), ==, 0);
    g_assert_nonnull(strstr(o, "adaln_zero"));

    g_clear_pointer(&o, g_free);
    g_clear_pointer(&e, g_free);
    const char *convert[] = { "model", "convert", "--dtype", "bf16", out1, out3, NULL };
    g_assert_cmpint(run_cli(convert, &o, &e), ==, 0);
    g_autoptr(ClModel) conv = cl_model_load(out3, &err);
    g_assert_no_error(err);
    g_autoptr(ClModel) orig = cl_model_load(out1, &err);
    assert_weights_equal(orig, conv, CL_DTYPE_BF16);

    /* usage errors exit 2, failures 1 with the prefix */
    static const char *const usage[][6] = {
        { "model", NULL },
        { "model", "frobnicate", NULL },
        { "model", "init", "--preset", "tiny", NULL },            /* no --out */
        { "model", "init", "--out", "x", NULL },                  /* no preset/config */
        { "model", "init", "--preset", "tiny", "--dtype", NULL }, /* missing value */
        { "model", "convert", "--dtype", "f8", "a", NULL },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(usage); i++) {
        g_clear_pointer(&o, g_free);
        g_clear_pointer(&e, g_free);
        g_assert_cmpint(run_cli(usage[i], &o, &e), ==, 2);
    }
    g_clear_pointer(&o, g_free);
    g_clear_pointer(&e, g_free);
    const char *bad_variant[] = { "model", "init",  "--preset", "tiny", "--variant",
                                  "nope",  "--out", out3,       NULL };
    g_assert_cmpint(run_cli(bad_variant, &o, &e), ==, 2);
    g_clear_pointer(&o, g_free);
    g_clear_pointer(&e, g_free);
    const char *missing[] = { "model", "info", cfg_path, NULL };
    g_assert_cmpint(run_cli(missing, &o, &e), ==, 1);
    g_assert_true(g_str_has_prefix(e, "changelens-cli model: "));
    g_assert_nonnull(strstr(e, "small.json"));
}

/* Escapes JSON does not have (json-glib takes octal ones) must not smuggle non-UTF-8 bytes into
 * names and messages; found by fuzzing. Every message must be valid UTF-8. */
static void test_safetensors_json_escapes(void)
{
    const char *headers[] = {
        "{\"__metadat0922\\372036854775806ormat\":\"1\"}", /* octal escape */
        "{\"a\\x41\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}",
        "{\"a\\ud800\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}",
        "{\"a\\udc00x\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}",
        "{\"a\\u12\":{}}",
        "{\"a\tb\":{}}",
    };
    for (gsize i = 0; i < G_N_ELEMENTS(headers); i++) {
        gsize hl = strlen(headers[i]);
        g_autofree guint8 *buf = g_malloc0(8 + hl);
        for (int b = 0; b < 8; b++)
            buf[b] = (guint8)((guint64)hl >> (8 * b));
        memcpy(buf + 8, headers[i], hl);
        g_autoptr(GError) err = NULL;
        g_autoptr(ClSafetensors) st = cl_safetensors_parse(buf, 8 + hl, &err);
        g_assert_null(st);
        g_assert_nonnull(err);
        g_test_message("%s", err->message);
        g_assert_true(g_utf8_validate(err->message, -1, NULL));
    }
    /* a proper surrogate pair is fine */
    const char *good =
        "{\"a\\ud83d\\ude00\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}";
    gsize hl = strlen(good);
    g_autofree guint8 *buf = g_malloc0(8 + hl);
    buf[0] = (guint8)hl;
    memcpy(buf + 8, good, hl);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClSafetensors) st = cl_safetensors_parse(buf, 8 + hl, &err);
    g_assert_no_error(err);
    g_assert_nonnull(cl_safetensors_get(st, "a\xf0\x9f\x98\x80"));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    tmp_dir = g_dir_make_tmp("test-modelfile-XXXXXX", NULL);
    g_assert_nonnull(tmp_dir);
    g_test_add_func("/modelfile/half", test_half);
    g_test_add_func("/modelfile/config/presets", test_config_presets);
    g_test_add_func("/modelfile/config/invalid", test_config_invalid);
    g_test_add_func("/modelfile/specs", test_specs);
    g_test_add_func("/modelfile/safetensors/roundtrip", test_safetensors_roundtrip);
    g_test_add_func("/modelfile/safetensors/malformed", test_safetensors_malformed);
    g_test_add_func("/modelfile/safetensors/json-escapes", test_safetensors_json_escapes);
    g_test_add_func("/modelfile/model/random-init", test_random_init);
    g_test_add_func("/modelfile/model/save-load", test_save_load);
    g_test_add_func("/modelfile/model/file-errors", test_model_file_errors);
    g_test_add_func("/modelfile/model/visual-pos-grid", test_visual_pos_grid);
    g_test_add_func("/modelfile/model/graft", test_graft);
    g_test_add_func("/modelfile/cli", test_cli);
    int rc = g_test_run();
    /* remove what the tests wrote */
    g_autoptr(GDir) dir = g_dir_open(tmp_dir, 0, NULL);
    for (const char *n; dir && (n = g_dir_read_name(dir));) {
        g_autofree char *p = g_build_filename(tmp_dir, n, NULL);
        g_unlink(p);
    }
    g_rmdir(tmp_dir);
    g_free(tmp_dir);
    return rc;
}
