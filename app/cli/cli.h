/* cli.h - the CLI's commands: one file per command family (cli-*.c), dispatched by main. */
#pragma once

#include <glib.h>

#include "model/config.h"
#include "model/model.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is "changelens-cli NAME" */
} ClCliCommand;

int cl_cli_describe(int argc, char **argv);  /* cli-describe.c */
int cl_cli_model(int argc, char **argv);     /* cli-model.c */
int cl_cli_tokenizer(int argc, char **argv); /* cli-tokenizer.c */
int cl_cli_bench(int argc, char **argv);     /* cli-bench.c */
int cl_cli_case(int argc, char **argv);      /* cli-case.c */
int cl_cli_synth(int argc, char **argv);     /* cli-synth.c */
int cl_cli_eval(int argc, char **argv);      /* cli-eval.c */
int cl_cli_train(int argc, char **argv);     /* cli-train.c */
int cl_cli_chat(int argc, char **argv);      /* cli-chat.c */
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
/* "N" or "MIN-MAX" (each 0..1000) as *lo, *hi (cli-synth.c) */
gboolean cl_cli_parse_range(const char *s, int *lo, int *hi);
/* `bench --train` (cli-bench-train.c) */
int cl_cli_bench_train(int argc, char **argv);
/* `bench --long` (cli-bench-long.c): the decoder options on long sequences */
int cl_cli_bench_long(int argc, char **argv);

/* Shared by describe and case describe (cli-describe.c). */
/* ClTokenCallback that prints the text to stdout (invalid UTF-8 shown as U+FFFD) and sets
 * *(gboolean *)user_data once anything was printed. */
void cl_cli_stream_token(gint32 id, const char *text, gsize len, gpointer user_data);

/* NULL-terminated (cli-commands.c) */
extern const ClCliCommand cl_cli_commands[];
