/* cli-synth.c - `changelens-cli synth`: write a synthetic task's samples as images and a
 * ShareGPT-style JSONL file (core/synth does the work). */
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
    "  --nuisance-level L  0 none, 1 mild (default), 2 strong (2-4 px shifts, exposure and\n"
    "                      white-balance changes, JPEG)\n"
    "  --photos SET        photo-edits: train (default) or heldout photographs\n"
    "  --changed-only      radiograph, aerial: no unchanged pairs\n"
    "  --force             write into a non-empty DIR\n"
    "  --quiet             no progress on standard error\n"
    "  --list              list the tasks and exit\n";

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
    int size = 0, width = 0, height = 0, patch = 0, images = 0, nuisance_level = 1;
    g_autofree char *photos = NULL;
    gint64 n = -1; /* -1: not given */
    const ClCliIntOption ints[] = { { "n", 0, 1, G_MAXINT, &n }, { NULL } };
    double dot_scale = 1.0;
    gboolean no_nuisance = FALSE, force = FALSE, quiet = FALSE, list = FALSE, changed_only = FALSE;
    GOptionEntry entries[] = {
        { "task", 0, 0, G_OPTION_ARG_STRING, &task, NULL, NULL },
        CL_CLI_INT_ENTRY("n", 0, NULL, NULL),
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
        { "nuisance-level", 0, 0, G_OPTION_ARG_INT, &nuisance_level, NULL, NULL },
        { "photos", 0, 0, G_OPTION_ARG_STRING, &photos, NULL, NULL },
        { "changed-only", 0, 0, G_OPTION_ARG_NONE, &changed_only, NULL, NULL },
        { "force", 0, 0, G_OPTION_ARG_NONE, &force, NULL, NULL },
        { "quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, NULL, NULL },
        { "list", 0, 0, G_OPTION_ARG_NONE, &list, NULL, NULL },
        { NULL },
    };
    int rc = cl_cli_parse_own_help(PROG, usage_text, entries, (gpointer)ints, argc, argv);
    if (rc >= 0)
        return rc;
    if (list) {
        for (const char *const *t = cl_synth_tasks(); *t; t++)
            printf("%-8s %s\n", *t, cl_synth_task_summary(*t));
        return 0;
    }
    g_autofree char *known = g_strjoinv(", ", (char **)cl_synth_tasks());
    if (!task)
        return cl_cli_usage_error(PROG, "--task is required (one of: %s)", known);
    if (!cl_synth_task_summary(task))
        return cl_cli_usage_error(PROG, "unknown task \"%s\" (known tasks: %s)", task, known);
    if (n < 1)
        return cl_cli_usage_error(PROG, "--n N is required, N at least 1");
    guint64 seed;
    g_autoptr(GError) err = NULL;
    if (!seed_s)
        return cl_cli_usage_error(PROG, "--seed S is required");
    if (!cl_cli_parse_uint64("--seed", seed_s, &seed, &err))
        return cl_cli_usage_error(PROG, "%s", err->message);
    if (!out)
        return cl_cli_usage_error(PROG, "--out DIR is required");

    ClSynthOptions opts;
    cl_synth_options_init(&opts);
    opts.width = width ? width : size ? size : opts.width;
    opts.height = height ? height : size ? size : opts.height;
    if (patch)
        opts.patch = patch;
    opts.n_images = images;
    opts.nuisance = !no_nuisance;
    opts.nuisance_level = nuisance_level;
    opts.photos = photos;
    opts.changed_only = changed_only;
    opts.dot_scale = dot_scale;
    if (objects && !cl_cli_parse_range(objects, &opts.min_objects, &opts.max_objects))
        return cl_cli_usage_error(PROG, "--objects takes N or MIN-MAX, not \"%s\"", objects);
    if (changes && !cl_cli_parse_range(changes, &opts.min_changes, &opts.max_changes))
        return cl_cli_usage_error(PROG, "--changes takes N or MIN-MAX, not \"%s\"", changes);
    /* bad option values are usage errors: try one sample before touching DIR */
    g_autoptr(ClSynthSample) probe = cl_synth_generate(task, 0, &opts, &err);
    if (!probe)
        return cl_cli_usage_error(PROG, "%s", err->message);

    Progress progress = { 0, quiet };
    if (!cl_synth_write_dataset(out, task, seed, (int)n, &opts, force, on_progress, &progress,
                                &err)) {
        fprintf(stderr, PROG ": %s\n", err->message);
        return 1;
    }
    if (!quiet)
        fprintf(stderr, "wrote %d %s samples to %s\n", (int)n, task, out);
    return 0;
}
