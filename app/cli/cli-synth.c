/* cli-synth.c - `changelens-cli synth`: write a synthetic task's samples as images and a
 * ShareGPT-style JSONL file (core/synth does the work). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "synth/synth.h"
#include "cli.h"

#define PROG "changelens-cli synth"

static const char usage_text[] =
    "Usage: " PROG " --task TASK --n N --seed S --out DIR [OPTIONS…]\n"
    "\n"
    "Writes DIR/images/NNNNNN-K.png and DIR/data.jsonl, one line per sample:\n"
    "  {\"id\", \"messages\": [{\"role\", \"content\"}…], \"images\": [\"images/…png\"…],\n"
    "   \"answer\": {…}, \"task\"}\n"
    "Sample i uses the stream seed hash(S, i): take train and held-out sets from different S.\n"
    "\n"
    "Options:\n"
    "  --task TASK         a task (--list shows them)\n"
    "  --n N               number of samples\n"
    "  --seed S            data-set seed (unsigned 64-bit integer)\n"
    "  --out DIR           output folder (must be empty unless --force)\n"
    "  --size PX           image width and height (default 160)\n"
    "  --width PX, --height PX\n"
    "  --patch PX          patch size of the auxiliary targets' grid (default 16)\n"
    "  --images K          dots: images per sample, 2-5 (default: drawn per sample)\n"
    "  --objects A[-B]     shapes: objects per scene (default: 4-8 at 160 px, 30-40 at 768)\n"
    "  --changes A[-B]     shapes: changes per pair (default 1-4; the paper: 4)\n"
    "  --dot-scale X       dots tasks: the red dot's radius times X, 1 to 4 (default 1)\n"
    "  --no-nuisance       no misregistration, exposure change or noise\n"
    "  --force             write into a non-empty DIR\n"
    "  --quiet             no progress on standard error\n"
    "  --list              list the tasks and exit\n";

static int usage_error(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    fprintf(stderr, PROG ": %s\n\n%s", msg, usage_text);
    return 2;
}

typedef struct {
    gint64 last_us;
    gboolean quiet;
} Progress;

/* at most ~10 lines a second, and the last one always */
static void on_progress(int done, int total, gpointer user_data)
{
    Progress *p = user_data;
    gint64 now = g_get_monotonic_time();
    if (p->quiet || (done < total && now - p->last_us < 100000))
        return;
    p->last_us = now;
    fprintf(stderr, "\r%d/%d samples", done, total);
    if (done == total)
        fputc('\n', stderr);
    fflush(stderr);
}

int cl_cli_synth(int argc, char **argv)
{
    g_autofree char *task = NULL, *seed_s = NULL, *out = NULL, *objects = NULL, *changes = NULL;
    int n = -1, size = 0, width = 0, height = 0, patch = 0, images = 0;
    double dot_scale = 1.0;
    gboolean no_nuisance = FALSE, force = FALSE, quiet = FALSE, list = FALSE, help = FALSE;
    GOptionEntry entries[] = {
        { "task", 0, 0, G_OPTION_ARG_STRING, &task, NULL, NULL },
        { "n", 0, 0, G_OPTION_ARG_INT, &n, NULL, NULL },
        { "seed", 0, 0, G_OPTION_ARG_STRING, &seed_s, NULL, NULL },
        { "out", 0, 0, G_OPTION_ARG_FILENAME, &out, NULL, NULL },
        { "size", 0, 0, G_OPTION_ARG_INT, &size, NULL, NULL },
        { "width", 0, 0, G_OPTION_ARG_INT, &width, NULL, NULL },
        { "height", 0, 0, G_OPTION_ARG_INT, &height, NULL, NULL },
        { "patch", 0, 0, G_OPTION_ARG_INT, &patch, NULL, NULL },
        { "images", 0, 0, G_OPTION_ARG_INT, &images, NULL, NULL },
        { "objects", 0, 0, G_OPTION_ARG_STRING, &objects, NULL, NULL },
        { "changes", 0, 0, G_OPTION_ARG_STRING, &changes, NULL, NULL },
        { "dot-scale", 0, 0, G_OPTION_ARG_DOUBLE, &dot_scale, NULL, NULL },
        { "no-nuisance", 0, 0, G_OPTION_ARG_NONE, &no_nuisance, NULL, NULL },
        { "force", 0, 0, G_OPTION_ARG_NONE, &force, NULL, NULL },
        { "quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, NULL, NULL },
        { "list", 0, 0, G_OPTION_ARG_NONE, &list, NULL, NULL },
        { "help", 'h', 0, G_OPTION_ARG_NONE, &help, NULL, NULL },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(NULL);
    g_option_context_set_help_enabled(ctx, FALSE);
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) err = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &err))
        return usage_error("%s", err->message);
    if (help) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (list) {
        for (const char *const *t = cl_synth_tasks(); *t; t++)
            printf("%-8s %s\n", *t, cl_synth_task_summary(*t));
        return 0;
    }
    if (argc > 1)
        return usage_error("unexpected argument \"%s\"", argv[1]);
    g_autofree char *known = g_strjoinv(", ", (char **)cl_synth_tasks());
    if (!task)
        return usage_error("--task is required (one of: %s)", known);
    if (!cl_synth_task_summary(task))
        return usage_error("unknown task \"%s\" (known tasks: %s)", task, known);
    if (n < 1)
        return usage_error("--n N is required, N at least 1");
    guint64 seed;
    if (!seed_s)
        return usage_error("--seed S is required");
    if (!g_ascii_string_to_unsigned(seed_s, 10, 0, G_MAXUINT64, &seed, NULL))
        return usage_error("--seed must be an unsigned integer, not \"%s\"", seed_s);
    if (!out)
        return usage_error("--out DIR is required");

    ClSynthOptions opts;
    cl_synth_options_init(&opts);
    opts.width = width ? width : size ? size : opts.width;
    opts.height = height ? height : size ? size : opts.height;
    if (patch)
        opts.patch = patch;
    opts.n_images = images;
    opts.nuisance = !no_nuisance;
    opts.dot_scale = dot_scale;
    if (objects && !cl_cli_parse_range(objects, &opts.min_objects, &opts.max_objects))
        return usage_error("--objects takes N or MIN-MAX, not \"%s\"", objects);
    if (changes && !cl_cli_parse_range(changes, &opts.min_changes, &opts.max_changes))
        return usage_error("--changes takes N or MIN-MAX, not \"%s\"", changes);
    /* bad option values are usage errors: try one sample before touching DIR */
    g_autoptr(ClSynthSample) probe = cl_synth_generate(task, 0, &opts, &err);
    if (!probe)
        return usage_error("%s", err->message);

    Progress progress = { 0, quiet };
    if (!cl_synth_write_dataset(out, task, seed, n, &opts, force, on_progress, &progress, &err)) {
        fprintf(stderr, PROG ": %s\n", err->message);
        return 1;
    }
    if (!quiet)
        fprintf(stderr, "wrote %d %s samples to %s\n", n, task, out);
    return 0;
}
