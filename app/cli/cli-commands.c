/* cli-commands.c - the table of CLI command families. */
#include <stddef.h>

#include "cli.h"

const ClCliCommand cl_cli_commands[] = {
    { "describe", cl_cli_describe },
    { "model", cl_cli_model },
    { "tokenizer", cl_cli_tokenizer },
    { "bench", cl_cli_bench },
    { "case", cl_cli_case },
    { "synth", cl_cli_synth },
    { "eval", cl_cli_eval },
    { "eval-change", cl_cli_eval_change },
    { "train", cl_cli_train },
    { "chat", cl_cli_chat },
    { "pacs", cl_cli_pacs },
    { "batch", cl_cli_batch },
    { NULL, NULL },
};
