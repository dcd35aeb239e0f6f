/* test-quantfile.c - quantized model files (docs/MODEL.md §7): cl_model_quantize, the blocks
 * saved and read back bit for bit (in place from the mapping), every malformed changelens.quant
 * refused with a message naming it, and `changelens-cli model convert --quantize` on the shipped
 * model: smaller, and its logits on a synthetic sample close to the float model's. */
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>

#include "model/decoder.h"
#include "model/describe.h"
#include "model/effnet.h"
#include "model/model-quant.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "synth/synth.h"
#include "train/synthdata.h"

static char *tmp_dir;

static char *tmp_path(const char *name)
{
    return g_build_filename(tmp_dir, name, NULL);
}

/* Plain decoder blocks whose rows are whole blocks of 32 (E = 64, F = 96). */
static ClModelConfig small_config(gboolean tied)
{
    ClModelConfig c;
    g_assert_true(cl_model_config_preset(&c, "tiny", NULL));
    c.image_size = 32, c.patch_size = 16;
    c.enc_dim = 16, c.enc_depth = 1, c.enc_heads = 2, c.enc_mlp = 32;
    c.merger_hidden = 32;
    c.dec_dim = 64, c.dec_depth = 2, c.dec_heads = 2, c.dec_kv_heads = 1, c.dec_mlp = 96;
    c.vocab_size = 320, c.max_len = 64, c.tie_embeddings = tied;
    g_assert_true(cl_model_config_validate(&c, NULL));
    return c;
}

static void assert_error_mentions(const GError *err, const char *needle)
{
    g_assert_nonnull(err);
    if (err->domain != CL_MODEL_ERROR || !strstr(err->message, needle))
        g_error("expected a CL_MODEL_ERROR mentioning '%s', got %s: %s", needle,
                g_quark_to_string(err->domain), err->message);
}

/* The last position's logits for a fixed text prompt. */
static float *prompt_logits(ClBackend *be, const ClModel *m)
{
    static const gint32 ids[] = { 257, 10, 72, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100 };
    g_autoptr(ClKVCache) cache = cl_kv_cache_new(m, 32);
    float *logits = g_new(float, m->config.vocab_size);
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_decoder_forward(be, m, cache, ids, G_N_ELEMENTS(ids), NULL, logits, NULL, NULL,
                                     NULL, &err));
    g_assert_no_error(err);
    return logits;
}

static double max_abs_diff(const float *a, const float *b, int n, double *nmse)
{
    double m = 0, se = 0, ss = 0;
    for (int i = 0; i < n; i++) {
        g_assert_true(isfinite(a[i]) && isfinite(b[i]));
        double d = fabs((double)a[i] - b[i]);
        m = MAX(m, d);
        se += d * d, ss += (double)b[i] * b[i];
    }
    if (nmse)
        *nmse = se / MAX(ss, 1e-30);
    return m;
}

/* ---- in memory, saved, read back ------------------------------------------------------------ */

static void test_roundtrip(void)
{
    ClBackend *be = cl_backend_cpu_new(1);
    for (int tied = 0; tied < 2; tied++)
        for (int t = 0; t < CL_QUANT_N_TYPES; t++) {
            ClModelConfig c = small_config(tied);
            g_autoptr(GError) err = NULL;
            g_autoptr(ClModel) m = cl_model_new_random(&c, 7 + tied, &err);
            g_assert_no_error(err);
            g_autofree float *ref = prompt_logits(be, m);
            g_assert_true(cl_model_quantize(m, (ClQuantType)t, &err));
            g_assert_no_error(err);
            g_assert_null(m->w.dec[1].gate);
            g_assert_true(m->quant->dec[1].gate.data && m->quant->lm_head.data);
            g_assert_true(!tied == !m->w.lm_head); /* tied: the embedding, f32 */
            g_autofree float *q = prompt_logits(be, m);
            double nmse, d = max_abs_diff(q, ref, c.vocab_size, &nmse);
            /* Q8_0 rounds each weight to 1/254 of its block's range, Q4_1 to 1/30 (and the
             * activations to 8 bits): measured nmse ~1e-4 (Q8_0) and ~1.5e-2 (Q4_1) on these
             * random weights; the bounds leave 3-10× room */
            g_test_message("%s %s: max |Δlogit| %.3g, nmse %.3g", cl_quant_type_name(t),
                           tied ? "tied" : "untied", d, nmse);
            /* F16 / BF16 (the halves a GGUF file may hold, kept the same way): their rounding
             * only, 2^-11 / 2^-8 relative per weight, exact f32 activations */
            g_assert_cmpfloat(nmse, <,
                              t == CL_QUANT_Q8_0   ? 1e-3
                              : t == CL_QUANT_Q4_1 ? 5e-2
                              : t == CL_QUANT_F16  ? 1e-6
                                                   : 1e-4);

            g_autofree char *path = tmp_path("q.safetensors");
            g_assert_true(cl_model_save(m, path, "F32", &err));
            g_assert_no_error(err);
            g_autoptr(ClModel) back = cl_model_load(path, &err);
            g_assert_no_error(err);
            g_assert_nonnull(back->quant);
            g_assert_cmpuint(back->n_params, ==, cl_model_n_params(&c));
            g_assert_true(!tied == !back->w.lm_head);
            const guint8 *map = (const guint8 *)g_mapped_file_get_contents(back->mapping);
            gsize map_len = g_mapped_file_get_length(back->mapping);
            for (int l = 0; l < c.dec_depth; l++) {
                const ClQuantMatrix *a = &m->quant->dec[l].down, *b = &back->quant->dec[l].down;
                g_assert_cmpint(a->type, ==, b->type);
                /* in place: the blocks are the mapping's bytes */
                g_assert_true(b->data >= map && b->data < map + map_len);
                g_assert_cmpmem(a->data, cl_quant_row_bytes(a->type, c.dec_dim) * c.dec_dim,
                                b->data, cl_quant_row_bytes(b->type, c.dec_dim) * c.dec_dim);
                g_assert_null(back->w.dec[l].q);
            }
            g_assert_cmpmem(m->quant->lm_head.data, cl_quant_row_bytes(t, c.dec_dim) * c.vocab_size,
                            back->quant->lm_head.data,
                            cl_quant_row_bytes(t, c.dec_dim) * c.vocab_size);
            g_autofree float *q2 = prompt_logits(be, back);
            g_assert_cmpmem(q, sizeof(float) * c.vocab_size, q2, sizeof(float) * c.vocab_size);

            /* from bytes (copied), and saved again: the same file */
            g_autofree char *bytes = NULL;
            gsize len;
            g_assert_true(g_file_get_contents(path, &bytes, &len, NULL));
            g_autoptr(ClModel) copy = cl_model_load_from_bytes((guint8 *)bytes, len, &err);
            g_assert_no_error(err);
            g_autofree char *path2 = tmp_path("q2.safetensors");
            g_assert_true(cl_model_save(copy, path2, "F32", &err));
            g_assert_cmpstr(copy->sha256, ==, back->sha256);

            /* requantized to another type from the blocks */
            ClQuantType other = t == CL_QUANT_Q8_0 ? CL_QUANT_Q4_1 : CL_QUANT_Q8_0;
            g_assert_true(cl_model_quantize(back, other, &err));
            g_assert_cmpint(back->quant->dec[0].v.type, ==, other);
            g_assert_null(back->sha256);
        }
    cl_backend_free(be);
}

static void test_refused(void)
{
    g_autoptr(GError) err = NULL;
    ClModelConfig c = small_config(FALSE);
    c.dec_mlp = 80; /* down's rows: 80 values, not whole blocks */
    g_autoptr(ClModel) m = cl_model_new_random(&c, 1, &err);
    g_assert_false(cl_model_quantize(m, CL_QUANT_Q8_0, &err));
    assert_error_mentions(err, "dec.0.mlp.down.weight has rows of 80 values");
    g_assert_null(m->quant);
    g_assert_nonnull(m->w.dec[0].q); /* nothing changed */
    g_clear_error(&err);

    c = small_config(FALSE);
    c.casa = CL_CASA_CA;
    g_autoptr(ClModel) casa = cl_model_new_random(&c, 1, &err);
    g_assert_no_error(err);
    g_assert_false(cl_model_quantize(casa, CL_QUANT_Q4_1, &err));
    assert_error_mentions(err, "plain blocks");
}

/* The quantized small model's file rewritten: `meta` replaces changelens.quant (NULL: kept),
 * tensor `drop` left out, tensor `as_f32` written as zeros of F32 of its U8 shape. */
static char *rewrite(const char *src, const char *meta, const char *drop, const char *as_f32)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(ClSafetensors) st = cl_safetensors_open(src, &err);
    g_assert_no_error(err);
    g_autoptr(GArray) entries = g_array_new(FALSE, TRUE, sizeof(ClSafetensorsEntry));
    g_autoptr(GPtrArray) keep = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < st->tensors->len; i++) {
        const ClSafeTensor *t = g_ptr_array_index(st->tensors, i);
        if (drop && strcmp(t->name, drop) == 0)
            continue;
        ClSafetensorsEntry e = { t->name, t->dtype, t->ndim, t->shape, NULL, NULL };
        if (t->dtype == CL_DTYPE_U8 && !(as_f32 && strcmp(t->name, as_f32) == 0)) {
            e.bytes = t->data;
        } else {
            float *f = g_new0(float, t->numel ? t->numel : 1);
            if (t->dtype == CL_DTYPE_F32)
                memcpy(f, t->data, t->numel * 4);
            g_ptr_array_add(keep, f);
            e.dtype = CL_DTYPE_F32;
            e.data = f;
        }
        g_array_append_val(entries, e);
    }
    const char *md[] = { "changelens.format",
                         cl_safetensors_metadata(st, "changelens.format"),
                         "changelens.config",
                         cl_safetensors_metadata(st, "changelens.config"),
                         "changelens.tokenizer",
                         cl_safetensors_metadata(st, "changelens.tokenizer"),
                         "changelens.quant",
                         meta ? meta : cl_safetensors_metadata(st, "changelens.quant"),
                         NULL };
    char *path = tmp_path("bad.safetensors");
    g_assert_true(cl_safetensors_write(path, (ClSafetensorsEntry *)entries->data, entries->len, md,
                                       NULL, &err));
    g_assert_no_error(err);
    return path;
}

static void test_malformed(void)
{
    ClModelConfig c = small_config(FALSE);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClModel) m = cl_model_new_random(&c, 3, &err);
    g_assert_true(cl_model_quantize(m, CL_QUANT_Q8_0, &err));
    g_autofree char *good = tmp_path("good.safetensors");
    g_assert_true(cl_model_save(m, good, "F32", &err));
#define ONE_LISTED "{\"dec.0.attn.q.weight\":\"Q8_0\"}" /* the rest U8 unlisted */
    static const struct {
        const char *meta, *drop, *as_f32, *needle;
    } cases[] = {
        { "[1]", NULL, NULL, "changelens.quant is not a JSON object" },
        { "{\"dec.0.attn.q.weight\":", NULL, NULL, "changelens.quant: " },
        { "{\"dec.0.attn.q.weight\":\"Q4_0\"}", NULL, NULL,
          "has type Q4_0 (Q8_0, Q4_1, F16 or BF16" },
        { "{\"dec.0.attn.q.weight\":\"q8_0\"}", NULL, NULL, "has type q8_0" },
        { "{\"dec.0.attn.q.weight\":8}", NULL, NULL, "(not a string)" },
        { "{\"dec.0.attn_norm.weight\":\"Q8_0\"}", NULL, NULL, "is not a decoder matrix" },
        { "{\"dec.9.attn.q.weight\":\"Q8_0\"}", NULL, NULL, "is not a decoder matrix" },
        { "{\"dec.embed.weight\":\"Q8_0\"}", NULL, NULL, "is not a decoder matrix" },
        { ONE_LISTED, NULL, NULL,
          "is U8 (quantized blocks), but changelens.quant does not list it" },
        { "{\"dec.0.attn.q.weight\":\"Q4_1\"}", NULL, NULL, "must be U8 of shape [64, 2, 20]" },
        { NULL, "dec.1.mlp.up.weight", NULL, "missing tensor 'dec.1.mlp.up.weight'" },
        { NULL, NULL, "dec.1.attn.o.weight", "'dec.1.attn.o.weight' is listed as Q8_0" },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *bad = rewrite(good, cases[i].meta, cases[i].drop, cases[i].as_f32);
        g_autoptr(GError) e = NULL;
        g_autoptr(ClModel) back = cl_model_load(bad, &e);
        g_assert_null(back);
        g_test_message("refused: %s", e->message);
        assert_error_mentions(e, cases[i].needle);
    }
    /* a tied model listing an output matrix the file lacks */
    c = small_config(TRUE);
    g_autoptr(ClModel) tm = cl_model_new_random(&c, 3, &err);
    g_assert_true(cl_model_quantize(tm, CL_QUANT_Q8_0, &err));
    g_assert_true(cl_model_save(tm, good, "F32", &err));
    g_autofree char *bad = rewrite(good, NULL, "dec.lm_head.weight", NULL);
    g_autoptr(ClModel) back = cl_model_load(bad, &err);
    g_assert_null(back);
    assert_error_mentions(err, "changelens.quant lists 'dec.lm_head.weight'");
}

/* ---- the shipped model through the CLI ------------------------------------------------------ */

static int run_cli(const char *const *args, char **out, char **errout)
{
    const char *cli = g_getenv("CL_CLI");
    g_assert_nonnull(cli);
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, (gpointer)cli);
    for (int i = 0; args[i]; i++)
        g_ptr_array_add(argv, (gpointer)args[i]);
    g_ptr_array_add(argv, NULL);
    int status = 0;
    g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, out,
                               errout, &status, NULL));
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_cli_errors(void)
{
    g_autofree char *out = NULL, *err = NULL;
    const char *a1[] = { "model", "convert", "--quantize", "q4_0", "a", "b", NULL };
    g_assert_cmpint(run_cli(a1, &out, &err), ==, 2);
    g_assert_nonnull(strstr(err, "unknown --quantize 'q4_0' (q8_0 or q4_1)"));
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);

    g_autoptr(GError) e = NULL;
    ClModelConfig c = small_config(FALSE);
    c.dec_mlp = 80;
    g_autoptr(ClModel) m = cl_model_new_random(&c, 1, &e);
    g_autofree char *in = tmp_path("odd.safetensors"), *dst = tmp_path("odd-q.safetensors");
    g_assert_true(cl_model_save(m, in, "F32", &e));
    const char *a2[] = { "model", "convert", "--quantize", "q8_0", in, dst, NULL };
    g_assert_cmpint(run_cli(a2, &out, &err), ==, 1);
    g_assert_nonnull(strstr(err, "not a multiple of Q8_0's blocks of 32"));
    g_assert_false(g_file_test(dst, G_FILE_TEST_EXISTS));
}

static void describe(ClBackend *be, const ClModel *m, const ClSynthSample *s, ClDescribeResult *res)
{
    ClImage *imgs[8];
    ClDescribeImage di[8] = { 0 };
    for (int k = 0; k < s->n_images; k++) {
        imgs[k] = cl_synth_image_to_image(&s->images[k]);
        di[k].image = imgs[k];
    }
    ClDescribeOptions o;
    cl_describe_options_init(&o);
    o.max_new_tokens = 24;
    o.heatmaps = FALSE;
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_describe_run(be, m, di, (guint)s->n_images, &o, res, &err));
    g_assert_no_error(err);
    for (int k = 0; k < s->n_images; k++)
        cl_image_free(imgs[k]);
}

/* The prompt's last logits (the first generated token's distribution). */
static float *describe_logits(ClBackend *be, const ClModel *m, const ClDescribeResult *r)
{
    g_autoptr(ClKVCache) cache = cl_kv_cache_new(m, r->n_prompt + 1);
    float *logits = g_new(float, m->config.vocab_size);
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_decoder_forward(be, m, cache, (const gint32 *)r->prompt_ids->data,
                                     (int)r->prompt_ids->len, r->visual, logits, NULL, NULL, NULL,
                                     &err));
    g_assert_no_error(err);
    return logits;
}

static void test_shipped(void)
{
    const char *src = g_getenv("CL_SOURCE_ROOT");
    /* the photo model: shipped in f16 (the default model ships quantized already) */
    g_autofree char *in =
        g_build_filename(src, "data", "models", "changelens-photo.safetensors", NULL);
    if (!g_file_test(in, G_FILE_TEST_EXISTS)) {
        g_test_skip("no shipped model");
        return;
    }
    g_autofree char *stem = cl_pretrained_path(CL_EFFNET_FILE);
    if (!g_file_test(stem, G_FILE_TEST_EXISTS)) {
        g_test_skip("no pretrained EfficientNet-Lite0 (the photo model's stem; set-up fetches it)");
        return;
    }
    g_autofree char *dst = tmp_path("photo-q8_0.safetensors");
    g_autofree char *out = NULL, *errout = NULL;
    const char *args[] = { "model", "convert", "--quantize", "q8_0", in, dst, NULL };
    int rc = run_cli(args, &out, &errout);
    if (rc != 0)
        g_error("convert: %s", errout);
    g_test_message("%s", out);
    GStatBuf a, b;
    g_assert_cmpint(g_stat(in, &a), ==, 0);
    g_assert_cmpint(g_stat(dst, &b), ==, 0);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClModel) f = cl_model_load(in, &err);
    g_assert_no_error(err);
    /* the unfamiliar-image statistics (f16, never quantized) are left out of the comparison */
    const gint64 K = f->config.ood, C2 = 2 * (gint64)cl_config_ood_channels(&f->config);
    const gint64 ood = K > 0 ? 2 * (2 * C2 + K * C2 + K + 1) : 0;
    g_test_message("file: %lld bytes (%lld of them image statistics), quantized %lld",
                   (long long)a.st_size, (long long)ood, (long long)b.st_size);
    g_assert_cmpint(b.st_size - ood, <, (a.st_size - ood) * 3 / 4);
    g_autoptr(ClModel) q = cl_model_load(dst, &err);
    g_assert_no_error(err);
    g_assert_nonnull(q->quant);
    ClBackend *be = cl_backend_cpu_new(1);
    ClSynthOptions so;
    cl_synth_options_init(&so);
    g_autoptr(ClSynthSample) s = cl_synth_generate("shapes", 11, &so, &err);
    g_assert_no_error(err);
    ClDescribeResult rf, rq;
    describe(be, f, s, &rf);
    describe(be, q, s, &rq);
    g_test_message("float: %s", rf.text);
    g_test_message("Q8_0:  %s", rq.text);
    /* the encoder and merger are the same f32 in both: the same visual tokens, the same prompt */
    g_assert_cmpuint(rf.prompt_ids->len, ==, rq.prompt_ids->len);
    size_t nv = (size_t)rf.n_images * rf.n_visual_per_image * f->config.dec_dim;
    g_assert_cmpmem(rf.visual, nv * sizeof(float), rq.visual, nv * sizeof(float));
    g_autofree float *lf = describe_logits(be, f, &rf);
    g_autofree float *lq = describe_logits(be, q, &rq);
    int V = f->config.vocab_size;
    double nmse, d = max_abs_diff(lq, lf, V, &nmse);
    double spread = 0;
    for (int i = 0; i < V; i++)
        spread = MAX(spread, fabs(lf[i]));
    g_test_message("prompt's last logits: max |Δ| %.4g (largest |logit| %.3g), nmse %.3g", d,
                   spread, nmse);
    /* measured (shapes seed 11): the photo model max |Δ| 0.040 of logits up to 12.6, nmse
     * 4.5e-6 (the synthetic default model, before it shipped quantized: 0.064 of 12.1, 4.1e-5)
     * — 8-bit weights with a block scale and 8-bit activations put ~0.5% relative noise on each
     * product, through six layers; the bounds leave about 4× room */
    g_assert_cmpfloat(d, <, 0.25);
    g_assert_cmpfloat(nmse, <, 2e-4);
    /* the first token is the same whenever its margin over the second is larger than the
     * difference */
    int top = 0, second = -1;
    for (int i = 1; i < V; i++)
        if (lf[i] > lf[top])
            second = top, top = i;
        else if (second < 0 || lf[i] > lf[second])
            second = i;
    if (lf[top] - lf[second] > 2 * d)
        g_assert_cmpint(g_array_index(rq.ids, gint32, 0), ==, g_array_index(rf.ids, gint32, 0));
    int same = 0;
    while (same < (int)MIN(rf.ids->len, rq.ids->len) &&
           g_array_index(rf.ids, gint32, same) == g_array_index(rq.ids, gint32, same))
        same++;
    g_test_message("greedy tokens in agreement: %d of %u", same, rf.ids->len);
    cl_describe_result_clear(&rf);
    cl_describe_result_clear(&rq);
    cl_backend_free(be);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    tmp_dir = g_dir_make_tmp("cl-quantfile-XXXXXX", NULL);
    g_test_add_func("/quantfile/roundtrip", test_roundtrip);
    g_test_add_func("/quantfile/refused", test_refused);
    g_test_add_func("/quantfile/malformed", test_malformed);
    g_test_add_func("/quantfile/cli-errors", test_cli_errors);
    g_test_add_func("/quantfile/shipped", test_shipped);
    int rc = g_test_run();
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", tmp_dir);
    (void)!system(cmd);
    return rc;
}
