/* cli-tokenizer.c - `changelens-cli tokenizer train|encode|decode`: the BPE tokenizer's tools. */
#include <stdio.h>
#include <string.h>

#include "model/tokenizer.h"
#include "cli.h"

#define PROG CL_CLI_NAME " tokenizer"

static const char usage_text[] =
    "Usage: " PROG " COMMAND [OPTIONS…]\n"
    "\n"
    "Commands:\n"
    "  train --vocab N --out TOK.json FILE…   train merges on text files (one document each)\n"
    "  encode [--tokenizer TOK.json] [--no-specials] TEXT|-\n"
    "                                         print the ids of TEXT (- reads standard input)\n"
    "  decode [--tokenizer TOK.json] ID…      print the text of the ids\n"
    "\n"
    "Without --tokenizer the bytes-only tokenizer (no merges) is used.\n";

static ClTokenizer *load_tokenizer(const char *path, GError **error)
{
    if (!path)
        return cl_tokenizer_new_bytes();
    g_autofree char *json = NULL;
    if (!g_file_get_contents(path, &json, NULL, error))
        return NULL;
    ClTokenizer *tok = cl_tokenizer_from_json(json, error);
    if (!tok)
        g_prefix_error(error, "%s: ", path);
    return tok;
}

static gboolean parse_options(GOptionEntry *entries, const char *params, int *argc, char ***argv)
{
    g_autoptr(GOptionContext) ctx = g_option_context_new(params);
    g_option_context_add_main_entries(ctx, entries, NULL);
    return cl_cli_parse_options(ctx, PROG, argc, argv);
}

static int cmd_train(int argc, char **argv)
{
    int vocab = 0;
    g_autofree char *out = NULL;
    g_auto(GStrv) files = NULL;
    GOptionEntry entries[] = {
        { "vocab", 'v', 0, G_OPTION_ARG_INT, &vocab, "Vocabulary size (ids in all, >= 261)", "N" },
        { "out", 'o', 0, G_OPTION_ARG_FILENAME, &out, "Where to write the tokenizer JSON",
          "TOK.json" },
        { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &files, NULL, "FILE…" },
        { NULL },
    };
    if (!parse_options(entries, "FILE… - train a tokenizer", &argc, &argv))
        return CL_CLI_EXIT_USAGE;
    if (vocab <= 0)
        return cl_cli_usage_error(PROG, "train: --vocab N is required");
    if (!out)
        return cl_cli_usage_error(PROG, "train: --out TOK.json is required");
    if (!files || !files[0])
        return cl_cli_usage_error(PROG, "train: no text files given");

    guint n = g_strv_length(files);
    g_autoptr(GPtrArray) texts = g_ptr_array_new_with_free_func(g_free);
    gsize total = 0;
    for (guint i = 0; i < n; i++) {
        char *text = NULL;
        gsize len = 0;
        g_autoptr(GError) err = NULL;
        if (!g_file_get_contents(files[i], &text, &len, &err)) {
            fprintf(stderr, PROG ": %s\n", err->message);
            return 1;
        }
        if (strlen(text) != len)
            fprintf(stderr,
                    PROG ": warning: %s contains NUL bytes; only the text before the "
                         "first one is used\n",
                    files[i]);
        total += len;
        g_ptr_array_add(texts, text);
    }
    g_autoptr(GError) err = NULL;
    gint64 t0 = g_get_monotonic_time();
    g_autoptr(ClTokenizer) tok =
        cl_tokenizer_train((const char *const *)texts->pdata, texts->len, vocab, &err);
    if (!tok) {
        fprintf(stderr, PROG ": %s\n", err->message);
        return 1;
    }
    double secs = (double)(g_get_monotonic_time() - t0) / 1e6;
    g_autofree char *json = cl_tokenizer_to_json(tok);
    if (!g_file_set_contents(out, json, -1, &err)) {
        fprintf(stderr, PROG ": %s\n", err->message);
        return 1;
    }
    printf("%s: %d ids (%d merges) from %zu bytes in %u files, %.2f s\n", out,
           cl_tokenizer_vocab_size(tok), cl_tokenizer_vocab_size(tok) - CL_TOKEN_FIRST_MERGE, total,
           n, secs);
    if (cl_tokenizer_vocab_size(tok) < vocab)
        printf("(the corpus has no more pairs that occur twice)\n");
    return 0;
}

static int cmd_encode(int argc, char **argv)
{
    g_autofree char *tok_path = NULL;
    gboolean no_specials = FALSE;
    g_auto(GStrv) rest = NULL;
    GOptionEntry entries[] = {
        { "tokenizer", 't', 0, G_OPTION_ARG_FILENAME, &tok_path, "Tokenizer JSON", "TOK.json" },
        { "no-specials", 0, 0, G_OPTION_ARG_NONE, &no_specials,
          "Encode special token texts as plain bytes", NULL },
        { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &rest, NULL, "TEXT" },
        { NULL },
    };
    if (!parse_options(entries, "TEXT - print token ids", &argc, &argv))
        return CL_CLI_EXIT_USAGE;
    if (!rest || !rest[0] || rest[1])
        return cl_cli_usage_error(PROG, "encode: give exactly one TEXT (or - for standard input)");

    g_autoptr(GError) err = NULL;
    g_autoptr(ClTokenizer) tok = load_tokenizer(tok_path, &err);
    if (!tok) {
        fprintf(stderr, PROG ": %s\n", err->message);
        return 1;
    }
    g_autoptr(GString) text = g_string_new(NULL);
    if (strcmp(rest[0], "-") == 0) {
        char buf[65536];
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, stdin)) > 0)
            g_string_append_len(text, buf, (gssize)got);
        if (ferror(stdin)) {
            fprintf(stderr, PROG ": cannot read standard input\n");
            return 1;
        }
    } else {
        g_string_assign(text, rest[0]);
    }
    g_autoptr(GArray) ids = cl_tokenizer_encode(tok, text->str, (gssize)text->len, !no_specials);
    g_autoptr(GString) line = g_string_new(NULL);
    for (guint i = 0; i < ids->len; i++)
        g_string_append_printf(line, "%s%d", i ? " " : "", g_array_index(ids, gint32, i));
    printf("%s\n", line->str);
    return 0;
}

static int cmd_decode(int argc, char **argv)
{
    g_autofree char *tok_path = NULL;
    g_auto(GStrv) rest = NULL;
    GOptionEntry entries[] = {
        { "tokenizer", 't', 0, G_OPTION_ARG_FILENAME, &tok_path, "Tokenizer JSON", "TOK.json" },
        { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_STRING_ARRAY, &rest, NULL, "ID…" },
        { NULL },
    };
    if (!parse_options(entries, "ID… - print the text of token ids", &argc, &argv))
        return CL_CLI_EXIT_USAGE;
    if (!rest || !rest[0])
        return cl_cli_usage_error(PROG, "decode: no ids given");

    g_autoptr(GError) err = NULL;
    g_autoptr(ClTokenizer) tok = load_tokenizer(tok_path, &err);
    if (!tok) {
        fprintf(stderr, PROG ": %s\n", err->message);
        return 1;
    }
    int vocab = cl_tokenizer_vocab_size(tok);
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(gint32));
    for (guint i = 0; rest[i]; i++) {
        /* ids may come as one argument ("1 2 3", as encode prints them) or several */
        g_auto(GStrv) parts = g_strsplit_set(rest[i], " \t\n,", -1);
        for (guint k = 0; parts[k]; k++) {
            if (!parts[k][0])
                continue;
            gint64 v;
            if (!cl_cli_parse_int(NULL, parts[k], 0, vocab - 1, &v, NULL)) {
                fprintf(stderr, PROG ": '%s' is not a token id (the vocabulary has %d ids)\n",
                        parts[k], vocab);
                return 1;
            }
            gint32 id = (gint32)v;
            g_array_append_val(ids, id);
        }
    }
    g_autoptr(GString) out = g_string_new(NULL);
    cl_tokenizer_decode(tok, (const gint32 *)(gconstpointer)ids->data, ids->len, out);
    fwrite(out->str, 1, out->len, stdout);
    fputc('\n', stdout);
    return 0;
}

int cl_cli_tokenizer(int argc, char **argv)
{
    if (argc < 2)
        return cl_cli_usage_error(PROG, "no command given");
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage_text, stdout);
        return 0;
    }
    /* the command's own argv: "changelens-cli tokenizer train" as program name */
    g_autofree char *prog = g_strdup_printf("%s %s", argv[0], cmd);
    argv[1] = prog;
    if (strcmp(cmd, "train") == 0)
        return cmd_train(argc - 1, argv + 1);
    if (strcmp(cmd, "encode") == 0)
        return cmd_encode(argc - 1, argv + 1);
    if (strcmp(cmd, "decode") == 0)
        return cmd_decode(argc - 1, argv + 1);
    return cl_cli_usage_error(PROG, "unknown command '%s'", cmd);
}
