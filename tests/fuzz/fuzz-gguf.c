/* fuzz-gguf.c - libFuzzer harness for the GGUF reader: the parser on any bytes, then every
 * promise it makes checked (tensors inside the data section, sized by type and shape, aligned,
 * not overlapping; metadata strings UTF-8) and every tensor dequantized. Seeds: test-gguf writes
 * them (`CL_FUZZ_WRITE_SEEDS=DIR build/tests/test-gguf`). */
#include <stddef.h>
#include <stdint.h>

#include "fuzz-common.h"
#include "model/config.h"
#include "model/gguf.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    g_log_set_writer_func(cl_fuzz_abort_on_critical, NULL, NULL);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    GError *error = NULL;
    ClGguf *g = cl_gguf_parse(data, size, &error);
    if (!g) {
        g_assert(error && error->domain == CL_MODEL_ERROR && error->message[0]);
        g_assert(g_utf8_validate(error->message, -1, NULL));
        g_error_free(error);
        return 0;
    }
    g_assert(g->data_start <= size && g->alignment && !(g->alignment & (g->alignment - 1)));
    for (guint i = 0; i < g->keys->len; i++) {
        const ClGgufValue *v = cl_gguf_get(g, g->keys->pdata[i]);
        g_assert(v && g_utf8_validate(g->keys->pdata[i], -1, NULL));
        if (v->type == CL_GGUF_STRING)
            g_assert(g_utf8_validate(v->str, -1, NULL));
        if (v->type == CL_GGUF_ARRAY && v->elem_type == CL_GGUF_STRING)
            for (guint64 k = 0; k < v->n; k++)
                g_assert(g_utf8_validate(v->strs[k], -1, NULL));
    }
    volatile float sink = 0;
    for (guint i = 0; i < g->tensors->len; i++) {
        const ClGgufTensor *t = g_ptr_array_index(g->tensors, i);
        g_assert(cl_gguf_tensor(g, t->name) == t);
        g_assert(t->offset % g->alignment == 0);
        g_assert(t->data == data + g->data_start + t->offset);
        g_assert(t->data + t->nbytes <= data + size);
        g_assert(t->nbytes == cl_ggml_row_bytes(t->type, t->ne[0]) * (t->numel / t->ne[0]));
        if (t->numel <= (1u << 20)) {
            float *f = cl_gguf_tensor_to_f32(t, NULL);
            for (guint64 k = 0; k < t->numel; k++)
                sink += f[k];
            g_free(f);
        }
    }
    (void)sink;
    cl_gguf_free(g);
    return 0;
}
