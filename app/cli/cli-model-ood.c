/* cli-model-ood.c - `changelens-cli model fit-ood`: fits the image statistics that flag images
 * unlike the training ones (config.ood, docs/MODEL.md §3.11) and prints how often each check set
 * is flagged. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "train/checkpoint.h"
#include "train/ood.h"

#define PROG "changelens-cli model fit-ood"

static const char usage_text[] =
    "Usage: " PROG " --model IN|CHECKPOINT --out OUT [--task T] [--photos SET] [--n N]\n"
    "       [--quantile Q] [--check SET[,SET…]] [--seed S] [--files PX] [--head [--rank R]]\n"
    "       [--colour]\n"
    "\n"
    "Fits the per-channel mean and variance of the stem features (or patch pixels) of N samples'\n"
    "images of task T (default photo-edits, its training photos; T1,T2,… take turns, for a model\n"
    "trained on several) into a copy of IN, with the threshold at quantile Q of their scores\n"
    "(default 0.99; each image scored against the images of other photographs, or other\n"
    "samples outside photo-edits), and writes it to OUT. Then scores each check set's images\n"
    "(a task name, or heldout for photo-edits' held-out photographs; default\n"
    "heldout,radiograph,aerial,shapes,dots) and prints the share above the threshold.\n"
    "A description whose images score above it carries a notice.\n"
    "--files PX: the images are written as the tasks' files at PX × PX (DICOM, GeoTIFF, PNG)\n"
    "and read back as describe reads them, for the fit and the checks alike (default: drawn\n"
    "in memory at the model's input size).\n"
    "--head: describe each image by EfficientNet-Lite0's pooled head features (1,280 values,\n"
    "the whole pretrained network) and score it against a Gaussian of the fitting images'\n"
    "with R principal directions (default 16), instead of the stem's statistics and their\n"
    "nearest neighbours (models with the EfficientNet-Lite0 stem).\n"
    "--colour: an image with less than half the colour of the least colourful fitting image\n"
    "is flagged too, whatever its features (models of colour images).\n";

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int fail(GError *err)
{
    fprintf(stderr, PROG ": %s\n", err->message);
    return 1;
}

int cl_cli_model_fit_ood(int argc, char **argv)
{
    g_autofree char *in = NULL, *out = NULL, *task = NULL, *photos = NULL, *check = NULL;
    gint64 n = 300;
    double quantile = 0.99;
    int seed = 7;
    gint64 files = 0;
    gboolean head = FALSE, colour = FALSE;
    gint64 rank = 16;
    const ClCliIntOption ints[] = { { "n", 0, 10, 100000, &n },
                                    { "rank", 0, 1, 256, &rank },
                                    { "files", 0, 32, 4096, &files },
                                    { NULL } };
    GOptionEntry entries[] = {
        { "model", 0, 0, G_OPTION_ARG_FILENAME, &in, NULL, NULL },
        { "out", 0, 0, G_OPTION_ARG_FILENAME, &out, NULL, NULL },
        { "task", 0, 0, G_OPTION_ARG_STRING, &task, NULL, NULL },
        { "photos", 0, 0, G_OPTION_ARG_STRING, &photos, NULL, NULL },
        CL_CLI_INT_ENTRY("n", 0, NULL, NULL),
        CL_CLI_INT_ENTRY("files", 0, NULL, NULL),
        CL_CLI_INT_ENTRY("rank", 0, NULL, NULL),
        { "quantile", 0, 0, G_OPTION_ARG_DOUBLE, &quantile, NULL, NULL },
        { "check", 0, 0, G_OPTION_ARG_STRING, &check, NULL, NULL },
        { "seed", 0, 0, G_OPTION_ARG_INT, &seed, NULL, NULL },
        { "head", 0, 0, G_OPTION_ARG_NONE, &head, NULL, NULL },
        { "colour", 0, 0, G_OPTION_ARG_NONE, &colour, NULL, NULL },
        { NULL },
    };
    int rc = cl_cli_parse_own_help(PROG, usage_text, entries, (gpointer)ints, argc, argv);
    if (rc >= 0)
        return rc;
    if (!in || !out)
        return cl_cli_usage_error(PROG, "--model IN and --out OUT are required");
    g_autoptr(GError) err = NULL;
    /* a model file, or a training checkpoint's model */
    g_autoptr(ClModel) model = cl_checkpoint_file_is_checkpoint(in)
                                   ? cl_checkpoint_load_model(in, &err)
                                   : cl_model_load(in, &err);
    if (!model)
        return fail(err);
    const char *t = task ? task : "photo-edits";
    gint64 t0 = g_get_monotonic_time();
    g_autoptr(ClModel) fitted = cl_ood_fit(
        model, t, photos, (int)n, (guint64)seed, (int)files, quantile,
        (head ? CL_OOD_FIT_HEAD : 0) | (colour ? CL_OOD_FIT_COLOUR : 0), (int)rank, &err);
    if (!fitted)
        return fail(err);
    printf("fitted on %s%s%s: %" G_GINT64_FORMAT " samples, threshold %.4g (quantile %.3g), "
           "%.1f s\n",
           t, photos ? " photos " : "", photos ? photos : "", n, fitted->w.ood_threshold[0],
           quantile, (g_get_monotonic_time() - t0) / 1e6);
    if (fitted->config.ood_min_colour > 0)
        printf("colour floor %.3g (images below it are flagged whatever their features)\n",
               fitted->config.ood_min_colour);
    else if (colour)
        printf("no colour floor: a fitting image had no colour\n");
    g_auto(GStrv) sets =
        g_strsplit(check ? check : "heldout,radiograph,aerial,shapes,dots", ",", -1);
    for (char **s = sets; *s; s++) {
        const gboolean held = strcmp(*s, "heldout") == 0;
        int m = 0;
        g_autofree double *sc =
            cl_ood_scores(fitted, held ? "photo-edits" : *s, held ? "heldout" : NULL,
                          (int)MIN(n, 100), (guint64)seed + 1000, (int)files, NULL, NULL, &m, &err);
        if (!sc) {
            fprintf(stderr, PROG ": check set %s: %s\n", *s, err->message);
            g_clear_error(&err);
            continue;
        }
        int above = 0;
        for (int i = 0; i < m; i++)
            above += sc[i] > fitted->w.ood_threshold[0];
        qsort(sc, (size_t)m, sizeof(double), compare_doubles);
        printf("  %-12s %4d images, %5.1f %% flagged as unlike the training images "
               "(scores: median %.3g, 10 %% %.3g, 90 %% %.3g)\n",
               held ? "heldout" : *s, m, 100.0 * above / MAX(m, 1), sc[m / 2], sc[m / 10],
               sc[m * 9 / 10]);
    }
    if (!cl_model_save(fitted, out, "f16", &err))
        return fail(err);
    printf("%s\n", out);
    return 0;
}
