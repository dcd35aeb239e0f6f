/* cli.h - the CLI's commands: one file per command family (cli-*.c), dispatched by main. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "model/config.h"
#include "model/model.h"

/* the program's name in messages: changelens-cli, or the engine-only changelens-engine built
 * from the same files (app/cli/changelens-engine.c) */
#ifdef CL_ENGINE_ONLY
#define CL_CLI_NAME "changelens-engine"
#else
#define CL_CLI_NAME "changelens-cli"
#endif

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is "changelens-cli NAME" */
} ClCliCommand;

int cl_cli_describe(int argc, char **argv);      /* cli-describe.c */
int cl_cli_model(int argc, char **argv);         /* cli-model.c */
int cl_cli_model_fit_ood(int argc, char **argv); /* cli-model-ood.c */
int cl_cli_tokenizer(int argc, char **argv);     /* cli-tokenizer.c */
int cl_cli_bench(int argc, char **argv);         /* cli-bench.c */
int cl_cli_case(int argc, char **argv);          /* cli-case.c */
int cl_cli_batch(int argc, char **argv);         /* cli-case.c: batch describe, status */
int cl_cli_synth(int argc, char **argv);         /* cli-synth.c */
int cl_cli_eval(int argc, char **argv);          /* cli-eval.c */
int cl_cli_eval_change(int argc, char **argv);   /* cli-eval-change.c */
int cl_cli_train(int argc, char **argv);         /* cli-train.c */
int cl_cli_chat(int argc, char **argv);          /* cli-chat.c */
int cl_cli_pacs(int argc, char **argv);          /* cli-pacs.c */
/* `model info` of a GGUF language model (cli-chat.c) */
int cl_cli_model_info_gguf(const char *path, const ClModel *model, gboolean json);
/* `bench --casedb` (cli-bench-casedb.c; cl_cli_bench hands over when it sees --casedb) */
int cl_cli_bench_casedb(int argc, char **argv);
/* The Python that runs the PyTorch peers: $CL_TORCH_PYTHON, else BUILD/venv/bin/python when it
 * exists, else /usr/bin/python3 (Debian's python3-torch). Newly allocated. (cli-bench.c) */
char *cl_cli_torch_python(void);
/* The source tree the PyTorch peers' scripts are read from: $CL_SOURCE_ROOT when set (a copy
 * of the tree on another machine), else the tree this program was built in. */
const char *cl_cli_source_dir(void);
/* --config of train and bench --train: JSON text when it starts with '{', else a file holding it
 * (cli-train.c). */
gboolean cl_cli_load_config(const char *arg, ClModelConfig *cfg, GError **error);
/* `bench --train` (cli-bench-train.c) */
int cl_cli_bench_train(int argc, char **argv);
/* `bench --long` (cli-bench-long.c): the decoder options on long sequences */
int cl_cli_bench_long(int argc, char **argv);
/* `bench --decoder FILE.gguf [--vs-llama]` (cli-bench-decoder.c) */
int cl_cli_bench_decoder(int argc, char **argv);

/* Shared by describe, case describe and chat (cli-args.c). */
/* ClTokenCallback that prints the text to stdout (invalid UTF-8 shown as U+FFFD) and sets
 * *(gboolean *)user_data once anything was printed. */
void cl_cli_stream_token(gint32 id, const char *text, gsize len, gpointer user_data);

/* ---- arguments (cli-args.c) ---- */

/* exit status of a usage error (0 done, 1 failure) */
#define CL_CLI_EXIT_USAGE 2
/* "PROG: MESSAGE (see 'PROG --help')" on stderr; returns CL_CLI_EXIT_USAGE. PROG is the command
 * as typed, e.g. "changelens-cli case show". */
int cl_cli_usage_error(const char *prog, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
/* g_option_context_parse; a failure is reported as a usage error of PROG. */
gboolean cl_cli_parse_options(GOptionContext *ctx, const char *prog, int *argc, char ***argv);
/* TEXT as a whole number in [lo, hi]; the error (G_OPTION_ERROR_BAD_VALUE) names OPTION, the
 * range and the text: "--images must be 2 to 5, not '6'"; a hi at G_MAXINT or more (a type's
 * limit) is worded as no upper bound, "a whole number >= 1". */
gboolean cl_cli_parse_int(const char *option, const char *text, gint64 lo, gint64 hi, gint64 *out,
                          GError **error);
/* TEXT as an unsigned 64-bit whole number (seeds) */
gboolean cl_cli_parse_uint64(const char *option, const char *text, guint64 *out, GError **error);
/* TEXT as a finite number in [lo, hi]; hi INFINITY: no upper bound */
gboolean cl_cli_parse_double(const char *option, const char *text, double lo, double hi,
                             double *out, GError **error);
/* "N" or "MIN-MAX" (each 0..1000) as *lo, *hi */
gboolean cl_cli_parse_range(const char *s, int *lo, int *hi);
/* --stream's "SINK+WINDOW" (sink 0..2^20, window 1..2^20) */
gboolean cl_cli_parse_stream(const char *text, int *sink, int *window);

/* A whole-number option with its range: an entry CL_CLI_INT_ENTRY(...) of the same name in a
 * group added with cl_cli_add_entries, whose table of these ends with a NULL name. */
typedef struct {
    const char *name; /* the long name, without the dashes */
    char short_name;
    gint64 lo, hi;
    gint64 *value;
} ClCliIntOption;
/* The GOptionArgFunc of such an entry: parses the value into the table's *value. */
gboolean cl_cli_int_option(const char *name, const char *value, gpointer data, GError **error);
#define CL_CLI_INT_ENTRY(name, short_name, description, arg_description)                           \
    {                                                                                              \
        name, short_name, 0, G_OPTION_ARG_CALLBACK, (gpointer)cl_cli_int_option, description,      \
            arg_description                                                                        \
    }
/* entries into ctx's main group; its callbacks are handed data (the ClCliIntOption table, or a
 * command's own struct) */
void cl_cli_add_entries(GOptionContext *ctx, const GOptionEntry *entries, gconstpointer data);
/* For commands whose --help (-h) prints their own usage_text: parses argv with entries (their
 * callbacks handed data); positional arguments are usage errors. Returns -1 to go on, else the
 * exit status. */
int cl_cli_parse_own_help(const char *prog, const char *usage_text, const GOptionEntry *entries,
                          gpointer data, int argc, char **argv);
/* g_free and NULL the pointers at these addresses (a parsed command line's texts, a run's
 * arrays); the list ends with NULL */
void cl_cli_free_all(gpointer first, ...) G_GNUC_NULL_TERMINATED;
/* Text for a terminal: valid UTF-8, control characters (but newline and tab) shown as U+FFFD,
 * so a hostile text (a description, a PACS's answer) cannot drive the terminal. Newly allocated. */
char *cl_cli_printable(const char *s);
/* b's value as pretty JSON and a newline on stdout */
void cl_cli_print_json(JsonBuilder *b);

/* NULL-terminated (cli-commands.c) */
extern const ClCliCommand cl_cli_commands[];
