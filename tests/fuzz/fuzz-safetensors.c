/* fuzz-safetensors.c - libFuzzer harness for the model file reader: the safetensors parser on
 * any bytes, then model binding (config, tokenizer, tensor list, f16/bf16 conversion) from
 * memory. `CL_FUZZ_WRITE_SEEDS=DIR fuzz-safetensors` writes a seed corpus (small valid models of
 * every variant and dtype, and a few broken files) and exits. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-common.h"
#include "model/model.h"
#include "model/safetensors.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The smallest config of each variant: a few KB per file, so mutations stay cheap. */
static ClModelConfig seed_config(ClSveVariant v, ClSveFirst first, gboolean tied)
{
    ClModelConfig c;
    cl_model_config_preset(&c, "tiny", NULL);
    c.image_size = 32, c.patch_size = 16, c.channels = v % 2 ? 1 : 3;
    c.enc_dim = 4, c.enc_depth = 1, c.enc_heads = 1, c.enc_mlp = 4;
    c.merger_hidden = 4;
    c.dec_dim = 2, c.dec_depth = 1, c.dec_heads = 1, c.dec_kv_heads = 1, c.dec_mlp = 2;
    c.vocab_size = CL_CONFIG_MIN_VOCAB, c.max_len = 16;
    c.sve_variant = v, c.sve_first = first, c.tie_embeddings = tied;
    return c;
}

static void write_seeds(const char *dir)
{
    g_mkdir_with_parents(dir, 0755);
    g_autoptr(GError) err = NULL;
    int n = 0;
    for (int v = 0; v < CL_SVE_N_VARIANTS; v++)
        for (int dt = 0; dt < CL_N_DTYPES; dt++) {
            ClModelConfig c = seed_config(v, (v + dt) % 2 ? CL_SVE_FIRST_NULL : CL_SVE_FIRST_OWN,
                                          dt != CL_DTYPE_F32);
            g_autoptr(ClModel) m = cl_model_new_random(&c, (guint64)(v * 3 + dt), &err);
            g_autofree char *path = g_strdup_printf("%s/model-%s-%s.safetensors", dir,
                                                    cl_sve_variant_name(v), cl_dtype_name(dt));
            if (!m || !cl_model_save(m, path, cl_dtype_name(dt), &err))
                g_error("seed %s: %s", path, err->message);
            n++;
        }
    /* broken ones: the reader's refusals are worth exploring too */
    static const char *const broken[] = {
        "{}",
        "{\"__metadata__\":{\"changelens.format\":\"1\"}}",
        "{\"t\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}",
        "{\"t\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,6]}}",
        /* overlapping */
        ("{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}"),
    };
    for (gsize i = 0; i < G_N_ELEMENTS(broken); i++) {
        gsize hlen = strlen(broken[i]);
        GByteArray *f = g_byte_array_new();
        guint8 len8[8] = { 0 };
        for (int k = 0; k < 8; k++)
            len8[k] = (guint8)((guint64)hlen >> (8 * k));
        g_byte_array_append(f, len8, 8);
        g_byte_array_append(f, (const guint8 *)broken[i], (guint)hlen);
        g_byte_array_append(f, (const guint8 *)"\x00\x3c\x00\x3c\x00\x3c\x00\x3c", 8);
        g_autofree char *path = g_strdup_printf("%s/broken-%zu.safetensors", dir, i);
        if (!g_file_set_contents(path, (const char *)f->data, f->len, &err))
            g_error("%s", err->message);
        g_byte_array_unref(f);
        n++;
    }
    printf("%d seeds in %s\n", n, dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    g_log_set_writer_func(cl_fuzz_abort_on_critical, NULL, NULL);
    const char *dir = g_getenv("CL_FUZZ_WRITE_SEEDS");
    if (dir) {
        write_seeds(dir);
        exit(0);
    }
    return 0;
}

static void check_error(GError *error)
{
    g_assert(error != NULL && error->domain == CL_MODEL_ERROR && error->message[0]);
    g_assert(g_utf8_validate(error->message, -1, NULL));
    g_error_free(error);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    GError *error = NULL;
    ClSafetensors *st = cl_safetensors_parse(data, size, &error);
    if (!st) {
        g_assert(error->code == CL_MODEL_ERROR_FILE);
        check_error(error);
        return 0;
    }
    /* what the parser promises: every tensor inside the data, sized by dtype and shape, the
     * data covered exactly once; reading every byte lets ASan check the bounds */
    volatile guint8 sink = 0;
    guint64 covered = 0;
    for (guint i = 0; i < st->tensors->len; i++) {
        const ClSafeTensor *t = g_ptr_array_index(st->tensors, i);
        g_assert(t->begin <= t->end && t->end <= st->data_size);
        g_assert(t->end - t->begin == t->numel * cl_dtype_size(t->dtype));
        g_assert(t->data == st->data + t->begin);
        g_assert(t->ndim >= 0 && t->ndim <= CL_SAFETENSORS_MAX_NDIM);
        g_assert(cl_safetensors_get(st, t->name) == t);
        for (guint64 k = t->begin; k < t->end; k++)
            sink ^= st->data[k];
        covered += t->end - t->begin;
    }
    (void)sink;
    g_assert(covered == st->data_size);
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init(&it, st->metadata);
    while (g_hash_table_iter_next(&it, &k, &v))
        g_assert(g_utf8_validate(k, -1, NULL) && g_utf8_validate(v, -1, NULL));
    cl_safetensors_free(st);

    ClModel *m = cl_model_load_from_bytes(data, size, &error);
    if (!m) {
        check_error(error);
        return 0;
    }
    g_assert(cl_model_config_validate(&m->config, NULL));
    g_assert(cl_tokenizer_vocab_size(m->tokenizer) <= m->config.vocab_size);
    g_assert(m->n_params == cl_model_n_params(&m->config));
    g_assert(m->sha256 && strlen(m->sha256) == 64);
    GPtrArray *specs = cl_model_weight_specs(&m->config, &m->w);
    volatile float fsink = 0;
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        gint64 n = cl_weight_spec_numel(s);
        const float *p = *s->slot;
        g_assert(p != NULL);
        for (gint64 j = 0; j < n; j++)
            fsink += p[j];
    }
    (void)fsink;
    g_ptr_array_unref(specs);
    cl_model_free(m);
    return 0;
}
