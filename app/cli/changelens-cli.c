/* changelens-cli.c - the command-line interface: argument parsing only; the work is in core/. */
#include <json-glib/json-glib.h>
#include "jsonnum.h"
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cl-config.h"
#include "synth/demo.h"
#include "device.h"
#include "image/image.h"
#include "image/loaders.h"
#include "image/sequence.h"
#include "cli.h"

static const char usage_text[] =
    "Usage: changelens-cli COMMAND [OPTIONS…]\n"
    "\n"
    "Commands:\n"
    "  info [--json] [--stats] FILE…   describe images (format, size, depth, DICOM, geo, …);\n"
    "                                  FILE may be any raster GDAL opens, or FILE:SUBDATASET\n"
    "  demo --out DIR                  write the demo case (before.png, after.png)\n"
    "  version                         version, compute devices and codecs of this build\n"
    "  describe [OPTIONS] IMG1 IMG2…    describe what changed across an image sequence\n"
    "  model init|info|convert …       create, inspect and convert model files\n"
    "  tokenizer train|encode|decode …  byte-level BPE tokenizer tools\n"
    "  case new|add|list|show|search|describe|edit|accept|reject|export|delete …\n"
    "                                  the case database: images, runs, reviewed descriptions, reports\n"
    "  bench [OPTIONS]                 engine speed and memory (optionally against PyTorch);\n"
    "                                  --casedb: case database inserts and search latency\n"
    "  synth --task T --n N --seed S --out DIR\n"
    "                                  write a synthetic training / test set (synth --list)\n"
    "  eval --model M --task T --n N --seed S [--json]\n"
    "                                  held-out scores with the paper's metrics, beside a baseline\n"
    "  eval-change --model M --task T [--n N] [--describe] [--json OUT]\n"
    "                                  do the heat maps find the change (AUROC, hottest cell,\n"
    "                                  beside a blurred difference); does the text call it right\n"
    "  train --stage pretrain|sve (--task T|--data FILE) --steps N --out DIR\n"
    "                                  train a model: stateless pretraining, then SVE\n"
    "  chat [--model FILE] QUESTION    ask a language model (the pretrained SmolLM2 by default)\n"
    "  pacs find|get|store --host H [--port N] [--aet OURS] [--aec CALLED] …\n"
    "                                  a PACS: find studies (C-FIND), retrieve them (C-GET),\n"
    "                                  send files and a case's report back (C-STORE)\n"
    "  batch describe|status MANIFEST.jsonl [--shard K/N]\n"
    "                                  describe every case of a manifest into the case\n"
    "                                  database, sharded (Slurm job arrays), re-runs skip\n"
    "                                  what is recorded\n"
    "\n"
    "Run 'changelens-cli COMMAND --help' for a command's options.\n";

/* ---- info ---------------------------------------------------------------------------------- */

static void json_add_double(JsonBuilder *b, const char *key, double v)
{
    json_builder_set_member_name(b, key);
    if (isfinite(v))
        json_builder_add_double_value(b, cl_json_double(v));
    else
        json_builder_add_null_value(b);
}

static void json_add_string(JsonBuilder *b, const char *key, const char *v)
{
    json_builder_set_member_name(b, key);
    if (v)
        json_builder_add_string_value(b, v);
    else
        json_builder_add_null_value(b);
}

static void json_add_int(JsonBuilder *b, const char *key, gint64 v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_int_value(b, v);
}

static void image_to_json(JsonBuilder *b, const char *path, const ClImage *img, gboolean stats)
{
    json_builder_begin_object(b);
    json_add_string(b, "path", path);
    json_add_string(b, "format", cl_image_format_name(img->format));
    json_add_int(b, "width", img->width);
    json_add_int(b, "height", img->height);
    json_add_int(b, "frames", cl_image_n_frames(img));
    json_add_int(b, "bits", img->bits);
    json_add_int(b, "bits_allocated", img->bits_allocated);
    json_add_string(b, "sample_format", cl_sample_format_name(img->sample_format));
    json_add_int(b, "channels", img->channels);
    json_add_string(b, "layout", cl_channel_layout_name(img->layout));
    json_add_string(b, "photometric", img->photometric);
    json_add_string(b, "transfer_syntax", img->transfer_syntax);
    json_add_string(b, "transfer_syntax_uid", img->transfer_syntax_uid);
    json_add_string(b, "modality", img->modality);

    const ClFrame *f0 = cl_image_frame(img, 0);
    json_builder_set_member_name(b, "rescale");
    json_builder_begin_object(b);
    json_add_double(b, "slope", f0->rescale_slope);
    json_add_double(b, "intercept", f0->rescale_intercept);
    json_add_string(b, "type", img->rescale_type);
    json_builder_end_object(b);

    json_builder_set_member_name(b, "window_presets");
    json_builder_begin_array(b);
    for (guint i = 0; i < img->windows->len; i++) {
        const ClWindowPreset *w = &g_array_index(img->windows, ClWindowPreset, i);
        json_builder_begin_object(b);
        json_add_double(b, "center", w->center);
        json_add_double(b, "width", w->width);
        json_add_string(b, "explanation", w->explanation);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_add_int(b, "voi_luts", img->voi_luts->len);

    json_builder_set_member_name(b, "pixel_spacing");
    if (img->has_pixel_spacing) {
        json_builder_begin_array(b);
        json_builder_add_double_value(b, cl_json_double(img->pixel_spacing[0]));
        json_builder_add_double_value(b, cl_json_double(img->pixel_spacing[1]));
        json_builder_end_array(b);
    } else {
        json_builder_add_null_value(b);
    }

    json_builder_set_member_name(b, "geo");
    if (img->geo) {
        const ClGeoInfo *g = img->geo;
        json_builder_begin_object(b);
        json_add_int(b, "epsg", g->epsg);
        json_add_string(b, "crs", g->crs_name);
        json_add_string(b, "crs_wkt", g->crs_wkt);
        json_builder_set_member_name(b, "origin");
        json_builder_begin_array(b);
        json_builder_add_double_value(b, cl_json_double(g->origin[0]));
        json_builder_add_double_value(b, cl_json_double(g->origin[1]));
        json_builder_end_array(b);
        json_builder_set_member_name(b, "pixel_size");
        json_builder_begin_array(b);
        json_builder_add_double_value(b, cl_json_double(g->pixel_size[0]));
        json_builder_add_double_value(b, cl_json_double(g->pixel_size[1]));
        json_builder_end_array(b);
        json_builder_set_member_name(b, "transform");
        if (g->has_transform) {
            json_builder_begin_array(b);
            for (int k = 0; k < 6; k++)
                json_builder_add_double_value(b, cl_json_double(g->transform[k]));
            json_builder_end_array(b);
        } else {
            json_builder_add_null_value(b);
        }
        json_add_string(b, "raster_type", g->pixel_is_point ? "point" : "area");
        json_builder_end_object(b);
    } else {
        json_builder_add_null_value(b);
    }

    if (img->format == CL_IMAGE_FORMAT_DICOM) {
        json_add_string(b, "patient_id", img->patient_id);
        json_add_string(b, "patient_name", img->patient_name);
        json_add_string(b, "study_uid", img->study_uid);
        json_add_string(b, "series_uid", img->series_uid);
        json_add_string(b, "study_datetime", img->study_datetime);
        json_add_string(b, "acquisition_datetime", img->acquisition_datetime);
        json_builder_set_member_name(b, "instance_number");
        if (img->instance_number >= 0)
            json_builder_add_int_value(b, img->instance_number);
        else
            json_builder_add_null_value(b);
    }

    json_builder_set_member_name(b, "metadata");
    json_builder_begin_object(b);
    GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    for (guint i = 0; i < img->metadata->len; i++) {
        const ClMetaEntry *e = g_ptr_array_index(img->metadata, i);
        /* repeated keys get a suffix so the object stays valid JSON */
        char *key = g_strdup(e->key);
        for (int n = 2; g_hash_table_contains(seen, key); n++) {
            g_free(key);
            key = g_strdup_printf("%s#%d", e->key, n);
        }
        json_add_string(b, key, e->value);
        g_hash_table_add(seen, key);
    }
    g_hash_table_unref(seen);
    json_builder_end_object(b);

    if (stats) {
        json_builder_set_member_name(b, "stats");
        json_builder_begin_array(b);
        for (guint f = 0; f < cl_image_n_frames(img); f++) {
            ClFrameStats st;
            cl_image_frame_stats(img, f, &st);
            json_builder_begin_object(b);
            json_add_double(b, "min", st.min);
            json_add_double(b, "max", st.max);
            json_add_double(b, "mean", st.mean);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
    }
    json_builder_end_object(b);
}

static void print_row(const char *key, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void print_row(const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *v = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    printf("  %-20s %s\n", key, v);
}

static void image_to_text(const char *path, const ClImage *img, gboolean stats)
{
    printf("%s\n", path);
    if (img->transfer_syntax)
        print_row("format", "%s (%s, %s)", cl_image_format_name(img->format), img->transfer_syntax,
                  img->transfer_syntax_uid ? img->transfer_syntax_uid : "?");
    else if (cl_image_get_meta(img, "GDALDriver"))
        print_row("format", "%s (%s)", cl_image_format_name(img->format),
                  cl_image_get_meta(img, "GDALDriver"));
    else
        print_row("format", "%s", cl_image_format_name(img->format));
    guint nf = cl_image_n_frames(img);
    print_row("size", "%u × %u, %u frame%s", img->width, img->height, nf, nf == 1 ? "" : "s");
    g_autofree char *container = img->bits_allocated && img->bits_allocated != img->bits
                                     ? g_strdup_printf(" in %u", img->bits_allocated)
                                     : g_strdup("");
    print_row("samples", "%u channel%s (%s), %u bits%s, %s", img->channels,
              img->channels == 1 ? "" : "s", cl_channel_layout_name(img->layout), img->bits,
              container, cl_sample_format_name(img->sample_format));
    if (img->photometric)
        print_row("photometric", "%s", img->photometric);
    if (img->modality)
        print_row("modality", "%s", img->modality);
    const ClFrame *f0 = cl_image_frame(img, 0);
    if (img->format == CL_IMAGE_FORMAT_DICOM || f0->rescale_slope != 1 ||
        f0->rescale_intercept != 0)
        print_row("rescale", "slope %.10g, intercept %.10g%s%s", f0->rescale_slope,
                  f0->rescale_intercept, img->rescale_type ? " " : "",
                  img->rescale_type ? img->rescale_type : "");
    for (guint i = 0; i < img->windows->len; i++) {
        const ClWindowPreset *w = &g_array_index(img->windows, ClWindowPreset, i);
        print_row(i == 0 ? "window" : "", "center %.10g, width %.10g%s%s%s", w->center, w->width,
                  w->explanation ? " (" : "", w->explanation ? w->explanation : "",
                  w->explanation ? ")" : "");
    }
    if (img->voi_luts->len)
        print_row("VOI LUTs", "%u", img->voi_luts->len);
    if (img->has_pixel_spacing)
        print_row("pixel spacing", "%.6g × %.6g mm (row × column)", img->pixel_spacing[0],
                  img->pixel_spacing[1]);
    if (img->geo) {
        const ClGeoInfo *g = img->geo;
        print_row("CRS", "%s%d%s%s", g->epsg ? "EPSG:" : "", g->epsg, g->crs_name ? " " : "",
                  g->crs_name ? g->crs_name : "");
        print_row("origin", "%.10g, %.10g", g->origin[0], g->origin[1]);
        print_row("pixel size", "%.10g × %.10g", g->pixel_size[0], g->pixel_size[1]);
    }
    if (img->patient_id || img->patient_name)
        print_row("patient", "%s%s%s", img->patient_name ? img->patient_name : "",
                  img->patient_id ? " ID " : "", img->patient_id ? img->patient_id : "");
    if (img->study_datetime)
        print_row("study", "%s", img->study_datetime);
    if (img->acquisition_datetime)
        print_row("acquired", "%s", img->acquisition_datetime);
    if (img->instance_number >= 0)
        print_row("instance", "%d", img->instance_number);
    for (guint i = 0; i < img->metadata->len; i++) {
        const ClMetaEntry *e = g_ptr_array_index(img->metadata, i);
        printf("  %-20s %s\n", e->key, e->value);
    }
    if (stats)
        for (guint f = 0; f < nf; f++) {
            ClFrameStats st;
            cl_image_frame_stats(img, f, &st);
            g_autofree char *key = g_strdup_printf("frame %u", f + 1);
            print_row(key, "min %.10g, max %.10g, mean %.10g", st.min, st.max, st.mean);
        }
}

static int cmd_info(int argc, char **argv)
{
    gboolean json = FALSE, stats = FALSE;
    g_auto(GStrv) files = NULL;
    GOptionEntry entries[] = {
        { "json", 0, 0, G_OPTION_ARG_NONE, &json, "Print one JSON array, an object per file",
          NULL },
        { "stats", 0, 0, G_OPTION_ARG_NONE, &stats,
          "Add per-frame min/max/mean in original units (after the modality LUT)", NULL },
        { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &files, NULL, "FILE…" },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("FILE… - describe images");
    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!cl_cli_parse_options(ctx, "changelens-cli info", &argc, &argv))
        return CL_CLI_EXIT_USAGE;
    if (!files || !files[0])
        return cl_cli_usage_error("changelens-cli info", "no files given (usage: changelens-cli "
                                                         "info [--json] [--stats] FILE…)");
    int rc = 0;
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_array(b);
    for (guint i = 0; files[i]; i++) {
        g_autoptr(GError) lerr = NULL;
        /* without --stats the pixels are not needed: a loader that can skips keeping them */
        ClImageLimits limits;
        cl_image_limits_init(&limits);
        limits.header_only = !stats;
        g_autoptr(ClImage) img = cl_image_load(files[i], &limits, &lerr);
        if (!img) {
            /* the message already names the file */
            fprintf(stderr, "changelens-cli: %s\n", lerr->message);
            rc = 1;
            if (json) {
                json_builder_begin_object(b);
                json_add_string(b, "path", files[i]);
                json_add_string(b, "error", lerr->message);
                json_builder_end_object(b);
            }
            continue;
        }
        if (json)
            image_to_json(b, files[i], img, stats);
        else
            image_to_text(files[i], img, stats);
    }
    json_builder_end_array(b);
    if (json) {
        cl_cli_print_json(b);
    }
    return rc;
}

/* ---- demo, version --------------------------------------------------------------------------- */

static int cmd_demo(int argc, char **argv)
{
    g_autofree char *out = NULL;
    GOptionEntry entries[] = {
        { "out", 'o', 0, G_OPTION_ARG_FILENAME, &out, "Folder to write the demo case into", "DIR" },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("- write the demo case");
    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!cl_cli_parse_options(ctx, "changelens-cli demo", &argc, &argv))
        return CL_CLI_EXIT_USAGE;
    if (!out)
        return cl_cli_usage_error("changelens-cli demo", "--out DIR is required");
    g_autoptr(GError) err = NULL;
    if (!cl_synth_demo_pair(out, &err)) {
        fprintf(stderr, "changelens-cli demo: %s\n", err->message);
        return 1;
    }
    printf("%s/before.png\n%s/after.png\n", out, out);
    return 0;
}

static int cmd_version(void)
{
    g_autofree char *dev = cl_device_describe();
    printf("changelens-cli %s\n", CL_VERSION);
    printf("%s\n", dev);
    printf("DICOM codecs: %s\n", cl_image_dicom_codecs());
    return 0;
}

int main(int argc, char **argv)
{
    setlocale(LC_ALL, "");
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(usage_text, argc < 2 ? stderr : stdout);
        return argc < 2 ? CL_CLI_EXIT_USAGE : 0;
    }
    const char *cmd = argv[1];
    /* hand the subcommand its own argv: "changelens-cli info" as program name */
    g_autofree char *prog = g_strdup_printf("changelens-cli %s", cmd);
    argv[1] = prog;
    if (strcmp(cmd, "info") == 0)
        return cmd_info(argc - 1, argv + 1);
    if (strcmp(cmd, "demo") == 0)
        return cmd_demo(argc - 1, argv + 1);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0)
        return cmd_version();
    for (const ClCliCommand *c = cl_cli_commands; c->name; c++)
        if (strcmp(cmd, c->name) == 0)
            return c->run(argc - 1, argv + 1);
    fprintf(stderr, "changelens-cli: unknown command '%s'\n\n%s", cmd, usage_text);
    return CL_CLI_EXIT_USAGE;
}
