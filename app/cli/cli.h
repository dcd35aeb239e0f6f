/* cli.h - the CLI's commands: one file per command family (cli-*.c), dispatched by main. */
#pragma once

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is "changelens-cli NAME" */
} ClCliCommand;

int cl_cli_describe(int argc, char **argv);  /* cli-describe.c */
int cl_cli_model(int argc, char **argv);     /* cli-model.c */
int cl_cli_tokenizer(int argc, char **argv); /* cli-tokenizer.c */
int cl_cli_bench(int argc, char **argv);     /* cli-bench.c */

/* NULL-terminated (cli-commands.c) */
extern const ClCliCommand cl_cli_commands[];
