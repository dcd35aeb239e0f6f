/* fuzz-tokenizer.c - libFuzzer harness for the tokenizer's JSON loader (core/model/tokenizer.c,
 * the changelens.tokenizer of a model file): the input as the JSON text; a tokenizer that loads
 * must encode and decode a few texts and the input itself back to the same bytes (with and
 * without special tokens), name every id's bytes and write JSON that loads to the same JSON.
 * `CL_FUZZ_WRITE_SEEDS=DIR fuzz-tokenizer` writes seeds (the shipped models' tokenizers, run from
 * the repository root; a trained one; a GPT-2-digits one; the bytes-only one) and exits. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-common.h"
#include "model/safetensors.h"
#include "model/tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

static void write_seed(const char *dir, const char *name, const char *json)
{
    g_autofree char *path = g_strdup_printf("%s/%s.json", dir, name);
    g_autoptr(GError) err = NULL;
    if (!g_file_set_contents(path, json, -1, &err))
        g_error("%s", err->message);
}

static void write_seeds(const char *dir)
{
    g_mkdir_with_parents(dir, 0755);
    int n = 0;
    static const char *const shipped[] = { "changelens-default", "changelens-photo" };
    for (gsize i = 0; i < G_N_ELEMENTS(shipped); i++) {
        g_autofree char *path = g_strdup_printf("data/models/%s.safetensors", shipped[i]);
        g_autofree char *bytes = NULL;
        gsize len = 0;
        g_autoptr(GError) err = NULL;
        if (!g_file_get_contents(path, &bytes, &len, &err)) {
            fprintf(stderr, "no seed from %s: %s\n", path, err->message);
            continue;
        }
        ClSafetensors *st = cl_safetensors_parse((const guint8 *)bytes, len, &err);
        if (!st)
            g_error("%s: %s", path, err->message);
        const char *json = cl_safetensors_metadata(st, "changelens.tokenizer");
        if (!json)
            g_error("%s has no changelens.tokenizer", path);
        write_seed(dir, shipped[i], json);
        cl_safetensors_free(st);
        n++;
    }
    static const char *const corpus[] = {
        "A red square moved to the left. The blue circle is gone.",
        "<|im_start|>user\n<image>\nWhat changed?<|im_end|>\n<|im_start|>assistant\n",
        "New 2 cm opacity in the right lower zone, 12.5 mm larger than on 2024-03-01.",
    };
    g_autoptr(GError) err = NULL;
    g_autoptr(ClTokenizer) trained = cl_tokenizer_train(corpus, G_N_ELEMENTS(corpus), 320, &err);
    if (!trained)
        g_error("train: %s", err->message);
    g_autofree char *tj = cl_tokenizer_to_json(trained);
    write_seed(dir, "trained", tj);
    n++;
    static const gint32 merges[] = { ' ', 't', 'h', 'e', 262, 'e', 261, 263, '1', '2' };
    g_autoptr(ClTokenizer) gpt2 =
        cl_tokenizer_new_from_merges(merges, G_N_ELEMENTS(merges) / 2, CL_PRETOK_GPT2_DIGITS, &err);
    if (!gpt2)
        g_error("merges: %s", err->message);
    g_autofree char *gj = cl_tokenizer_to_json(gpt2);
    write_seed(dir, "gpt2-digits", gj);
    n++;
    g_autoptr(ClTokenizer) bytes = cl_tokenizer_new_bytes();
    g_autofree char *bj = cl_tokenizer_to_json(bytes);
    write_seed(dir, "bytes", bj);
    n++;
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

/* Encodes len bytes with the specials of mask, checks the ids and that they decode to the same
 * bytes. */
static void roundtrip(const ClTokenizer *tok, const char *text, gsize len, guint specials)
{
    int vocab = cl_tokenizer_vocab_size(tok);
    GArray *ids = g_array_new(FALSE, FALSE, sizeof(gint32));
    cl_tokenizer_encode_append(tok, text, (gssize)len, specials, ids);
    for (guint i = 0; i < ids->len; i++) {
        gint32 id = g_array_index(ids, gint32, i);
        g_assert(id >= 0 && id < vocab);
        if (id >= CL_TOKEN_ENDOFTEXT && id < CL_TOKEN_FIRST_MERGE)
            g_assert(specials & CL_TOKENIZER_SPECIAL_BIT(id));
    }
    GString *out = g_string_new(NULL);
    cl_tokenizer_decode(tok, (const gint32 *)ids->data, ids->len, out);
    if (out->len != len || memcmp(out->str, text, len) != 0)
        g_error("%zu bytes encode to %u ids that decode to %zu other bytes", len, ids->len,
                out->len);
    g_string_free(out, TRUE);
    g_array_unref(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *json = g_strndup((const char *)data, size);
    GError *error = NULL;
    ClTokenizer *tok = cl_tokenizer_from_json(json, &error);
    g_free(json);
    if (!tok) {
        g_assert(error != NULL && error->message[0]);
        g_assert(g_utf8_validate(error->message, -1, NULL));
        g_error_free(error);
        return 0;
    }
    g_assert(error == NULL);
    int vocab = cl_tokenizer_vocab_size(tok);
    g_assert(vocab >= CL_TOKEN_FIRST_MERGE && vocab <= CL_TOKENIZER_MAX_VOCAB);
    gsize total = 0;
    for (gint32 id = 0; id < vocab; id++) {
        gsize len = 0;
        const char *b = cl_tokenizer_token_bytes(tok, id, &len);
        g_assert(b != NULL && len >= 1 && len <= CL_TOKENIZER_MAX_TOKEN_LEN);
        total += len;
    }
    g_assert(total <= CL_TOKENIZER_MAX_TOTAL_BYTES);
    g_assert(cl_tokenizer_token_bytes(tok, vocab, NULL) == NULL);
    g_assert(cl_tokenizer_token_bytes(tok, -1, NULL) == NULL);

    static const char *const texts[] = {
        "A red square moved to the left.",
        "<|im_start|>user\n<image>\nWhat changed?<|im_end|>",
        "12.5 mm \xc3\xa9\xe2\x80\xae\xf0\x9f\x98\x80 \xff\xfe  \t\n x's  don't",
    };
    for (gsize i = 0; i < G_N_ELEMENTS(texts); i++) {
        roundtrip(tok, texts[i], strlen(texts[i]), 0);
        roundtrip(tok, texts[i], strlen(texts[i]), CL_TOKENIZER_ALL_SPECIALS);
    }
    roundtrip(tok, (const char *)data, size, 0);
    roundtrip(tok, (const char *)data, size, CL_TOKENIZER_ALL_SPECIALS);

    /* its JSON loads again to the same tokenizer */
    char *out = cl_tokenizer_to_json(tok);
    ClTokenizer *again = cl_tokenizer_from_json(out, &error);
    if (!again)
        g_error("the tokenizer's own JSON does not load: %s", error->message);
    g_assert(cl_tokenizer_vocab_size(again) == vocab);
    g_assert(cl_tokenizer_pretokenizer(again) == cl_tokenizer_pretokenizer(tok));
    char *out2 = cl_tokenizer_to_json(again);
    g_assert(strcmp(out, out2) == 0);
    g_free(out2);
    g_free(out);
    cl_tokenizer_free(again);
    cl_tokenizer_free(tok);
    return 0;
}
