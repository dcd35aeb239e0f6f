/* changelens-engine.c - the engine-only command line: changelens-cli's model, tokenizer, bench,
 * train, eval and eval-change commands linked with the engine alone (core/meson.build's
 * engine_dep), so that it needs none of the image, case-database, PACS or report libraries.
 * It is what tools/gpu-check.sh takes to a GPU machine that has CUDA but not this project's
 * Debian libraries; images are read from PNG files alone and --mpi is refused. */
#include <locale.h>
#include <stdio.h>
#include <string.h>

#include "cl-config.h"
#include "device.h"
#include "cli.h"

static const char usage_text[] =
    "Usage: changelens-engine COMMAND [OPTIONS…]\n"
    "\n"
    "The engine alone: changelens-cli's commands that need no image loaders, case database or\n"
    "PACS (images are read from PNG files alone).\n"
    "\n"
    "Commands:\n"
    "  version                         version and compute devices of this build\n"
    "  model init|info|convert|graft … create, inspect and convert model files\n"
    "  tokenizer train|encode|decode …  byte-level BPE tokenizer tools\n"
    "  bench [OPTIONS]                 engine speed and memory (optionally against PyTorch)\n"
    "  eval --model M --task T --n N --seed S [--json]\n"
    "                                  held-out scores with the paper's metrics, beside a baseline\n"
    "  eval-change --model M --task T [--n N] [--json OUT]\n"
    "                                  do the heat maps find the change\n"
    "  train (--task T|--data FILE) --steps N --out DIR [--device cpu|cuda|auto]\n"
    "                                  train a model\n"
    "\n"
    "Run 'changelens-engine COMMAND --help' for a command's options.\n";

static const ClCliCommand commands[] = {
    { "model", cl_cli_model },
    { "tokenizer", cl_cli_tokenizer },
    { "bench", cl_cli_bench },
    { "eval", cl_cli_eval },
    { "eval-change", cl_cli_eval_change },
    { "train", cl_cli_train },
    { NULL, NULL },
};

int main(int argc, char **argv)
{
    setlocale(LC_ALL, "");
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(usage_text, argc < 2 ? stderr : stdout);
        return argc < 2 ? CL_CLI_EXIT_USAGE : 0;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        g_autofree char *dev = cl_device_describe();
        printf("changelens-engine %s\n%s\n", CL_VERSION, dev);
        return 0;
    }
    g_autofree char *prog = g_strdup_printf("changelens-engine %s", cmd);
    argv[1] = prog;
    for (const ClCliCommand *c = commands; c->name; c++)
        if (strcmp(cmd, c->name) == 0)
            return c->run(argc - 1, argv + 1);
    fprintf(stderr,
            "changelens-engine: unknown command '%s' (changelens-cli has every command)\n\n%s", cmd,
            usage_text);
    return CL_CLI_EXIT_USAGE;
}
