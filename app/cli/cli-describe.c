/* cli-describe.c - `changelens-cli describe`: what changed across an image sequence, streamed,
 * with heatmap overlays and a JSON report; the work is in core/model/describe.c. */
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/backend.h"
#include "cli.h"
#include "model/describe.h"
#include "image/sequence.h"
#include "model/vist.h"

#define PROG "changelens-cli describe"
/* How much of the heat colour covers the image where the heat is highest. */
#define HEATMAP_OPACITY 0.6

static const char summary_text[] =
    "Describes what changed across an image sequence (the first image is the reference, each\n"
    "later one is read against its predecessor). Multi-frame files count as one image per frame;\n"
    "DICOM files are ordered by acquisition time. The description is streamed to stdout.\n"
    "\n"
    "Without --model and --random-init the default model is used: $CHANGELENS_MODEL, else\n"
    "data/models/changelens-default.safetensors of the source tree (or\n"
    "share/changelens/models/ when installed).\n"
    "Exit status: 0 done, 1 failure, 2 usage error.";

/* ---- streaming ---------------------------------------------------------------------------- */

/* The callback hands over complete UTF-8 sequences; bytes that are not UTF-8 at all (an untrained
 * model makes plenty) are shown as U+FFFD so the terminal only ever gets text. */
void cl_cli_stream_token(gint32 id, const char *text, gsize len, gpointer user_data)
{
    (void)id;
    gboolean *any = user_data;
    if (len == 0)
        return;
    if (g_utf8_validate_len(text, len, NULL)) {
        fwrite(text, 1, len, stdout);
    } else {
        g_autofree char *valid = g_utf8_make_valid(text, (gssize)len);
        fputs(valid, stdout);
    }
    fflush(stdout);
    *any = TRUE;
}

/* ---- JSON --------------------------------------------------------------------------------- */

static void json_member_double(JsonBuilder *b, const char *key, double v)
{
    json_builder_set_member_name(b, key);
    if (isfinite(v))
        json_builder_add_double_value(b, v);
    else
        json_builder_add_null_value(b);
}

static void json_member_string(JsonBuilder *b, const char *key, const char *v)
{
    json_builder_set_member_name(b, key);
    if (v)
        json_builder_add_string_value(b, v);
    else
        json_builder_add_null_value(b);
}

static void json_member_int(JsonBuilder *b, const char *key, gint64 v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_int_value(b, v);
}

typedef struct {
    const char *model_path; /* NULL for random init */
    const char *model_sha256;
    const char *preset;
    gint64 seed;
    const char *variant;
    const char *device;
    char **heatmap_files; /* per heatmap, NULL when not written */
} JsonContext;

static char *result_to_json(const ClDescribeResult *r, const ClSequence *seq, const JsonContext *c)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    g_autofree char *text = g_utf8_make_valid(r->text, -1);
    json_member_string(b, "text", text);
    json_builder_set_member_name(b, "tokens");
    json_builder_begin_array(b);
    for (guint i = 0; i < r->ids->len; i++)
        json_builder_add_int_value(b, g_array_index(r->ids, gint32, i));
    json_builder_end_array(b);
    json_member_string(b, "stop_reason", cl_stop_reason_name(r->stop_reason));
    json_member_double(b, "logprob", r->logprob);
    json_member_string(b, "domain", cl_chat_domain_name(r->domain));
    json_member_int(b, "prompt_positions", r->n_prompt);
    if (r->context_tokens > 0) {
        json_builder_set_member_name(b, "prior_reports");
        json_builder_begin_object(b);
        json_member_int(b, "tokens", r->context_tokens);
        json_member_int(b, "compressed_tokens", r->context_compressed);
        json_member_int(b, "pages", r->context_pages);
        json_member_int(b, "page_positions", (gint64)r->context_pages * r->n_visual_per_image);
        json_builder_end_object(b);
    }

    json_builder_set_member_name(b, "images");
    json_builder_begin_array(b);
    for (guint t = 0; t < cl_sequence_length(seq); t++) {
        const ClSequenceItem *it = cl_sequence_item(seq, t);
        json_builder_begin_object(b);
        json_member_string(b, "path", it->image->path);
        json_member_int(b, "frame", it->frame);
        json_member_string(b, "label", it->label);
        json_member_int(b, "width", it->image->width);
        json_member_int(b, "height", it->image->height);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);

    json_builder_set_member_name(b, "timings");
    json_builder_begin_object(b);
    json_member_double(b, "load_ms", r->load_ms);
    json_member_double(b, "preprocess_ms", r->preprocess_ms);
    json_builder_set_member_name(b, "encode_ms");
    json_builder_begin_array(b);
    double enc_total = 0;
    for (guint t = 0; t < r->n_images; t++) {
        json_builder_add_double_value(b, r->encode_ms[t]);
        enc_total += r->encode_ms[t];
    }
    json_builder_end_array(b);
    json_member_double(b, "prefill_ms", r->prefill_ms);
    json_member_double(b, "decode_ms", r->decode_ms);
    json_member_int(b, "generated_tokens", r->ids->len);
    json_member_double(b, "tokens_per_s", r->tokens_per_s);
    json_member_double(b, "total_ms",
                       r->load_ms + r->preprocess_ms + enc_total + r->prefill_ms + r->decode_ms);
    json_builder_end_object(b);

    json_builder_set_member_name(b, "model");
    json_builder_begin_object(b);
    if (c->model_path) {
        json_member_string(b, "source", "file");
        json_member_string(b, "path", c->model_path);
        json_member_string(b, "sha256", c->model_sha256);
    } else {
        g_autofree char *desc =
            g_strdup_printf("random-init %s seed %" G_GINT64_FORMAT, c->preset, c->seed);
        json_member_string(b, "source", "random-init");
        json_member_string(b, "description", desc);
        json_member_string(b, "preset", c->preset);
        json_member_int(b, "seed", c->seed);
    }
    json_member_string(b, "variant", c->variant);
    json_builder_end_object(b);
    json_member_string(b, "device", c->device);

    json_builder_set_member_name(b, "heatmaps");
    json_builder_begin_array(b);
    for (guint i = 0; i < r->heatmaps->len; i++) {
        const ClHeatmap *hm = g_ptr_array_index(r->heatmaps, i);
        json_builder_begin_object(b);
        json_member_int(b, "image", hm->image_index + 1);
        json_member_string(b, "source", cl_heatmap_source_name(hm->source));
        json_member_int(b, "width", hm->width);
        json_member_int(b, "height", hm->height);
        json_member_double(b, "max", hm->max);
        json_builder_set_member_name(b, "values");
        json_builder_begin_array(b);
        for (int k = 0; k < hm->width * hm->height; k++)
            json_builder_add_double_value(b, isfinite(hm->values[k]) ? hm->values[k] : 0.0);
        json_builder_end_array(b);
        json_member_string(b, "file", c->heatmap_files ? c->heatmap_files[i] : NULL);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);

    json_builder_set_member_name(b, "notices");
    json_builder_begin_array(b);
    for (guint i = 0; i < r->notices->len; i++)
        json_builder_add_string_value(b, g_ptr_array_index(r->notices, i));
    json_builder_end_array(b);
    json_builder_end_object(b);

    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, TRUE);
    return json_generator_to_data(gen, NULL);
}

/* ---- the command -------------------------------------------------------------------------- */

static int usage_error(GOptionContext *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "%s: %s (see '%s --help')\n", PROG, msg, PROG);
    return 2;
}

int cl_cli_describe(int argc, char **argv)
{
    g_autofree char *model_path = NULL, *random_init = NULL, *variant = NULL, *device = NULL;
    g_autofree char *prompt = NULL, *heatmap = NULL, *domain_name = NULL;
    gint64 seed = -1;
    int max_tokens = 256, beam_size = 1;
    g_autofree char *stream = NULL;
    int sparse_topk = -1;
    gboolean delta = FALSE, json = FALSE;
    g_auto(GStrv) files = NULL, reports = NULL;
    g_autofree char *pages_prefix = NULL;
    GOptionEntry entries[] = {
        {"model", 'm', 0, G_OPTION_ARG_FILENAME, &model_path, "Model file (safetensors)", "FILE"},
        {"random-init", 0, 0, G_OPTION_ARG_STRING, &random_init,
         "Use an untrained model of this preset (tiny, base, large) instead of a file", "PRESET"},
        {"seed", 0, 0, G_OPTION_ARG_INT64, &seed, "Seed of --random-init (default 0)", "N"},
        {"variant", 0, 0, G_OPTION_ARG_STRING, &variant,
         "SVE variant of --random-init: stateless, cross, cross_ffn, self_ext, adaln_zero, "
         "self_ffn",
         "V"},
        {"device", 'd', 0, G_OPTION_ARG_STRING, &device,
         "auto (GPU when present, default), cpu or cuda", "DEVICE"},
        {"prompt", 'p', 0, G_OPTION_ARG_STRING, &prompt,
         "Ask this instead of the domain's final question", "TEXT"},
        {"domain", 0, 0, G_OPTION_ARG_STRING, &domain_name,
         "Conversation: generic, radiograph, aerial, edits, shapes (default: from the first "
         "image)",
         "NAME"},
        {"max-tokens", 'n', 0, G_OPTION_ARG_INT, &max_tokens,
         "Generate at most N tokens (default 256)", "N"},
        {"beam", 'b', 0, G_OPTION_ARG_INT, &beam_size, "Beam search with N beams (1 = greedy)",
         "N"},
        {"stream", 0, 0, G_OPTION_ARG_STRING, &stream,
         "Streaming KV cache: every position attends to the first SINK positions and the last "
         "WINDOW ones (memory of SINK + WINDOW positions, no max_len bound; e.g. 256+2048)",
         "SINK+WINDOW"},
        {"sparse-prefill", 0, 0, G_OPTION_ARG_INT, &sparse_topk,
         "Offline sparse prefill: the prompt's queries, per block of 32 positions, attend to the "
         "first block, the previous one, their own and the K best others (K >= 0)",
         "K"},
        {"prior-report", 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &reports,
         "A prior report or case note (UTF-8 text, repeatable) read with the images; a model "
         "with VIST2 keeps it as rendered pages' visual tokens",
         "FILE"},
        {"context-pages", 0, 0, G_OPTION_ARG_FILENAME, &pages_prefix,
         "Write the pages VIST2 rendered the prior reports into as PREFIX-1.png, PREFIX-2.png, …",
         "PREFIX"},
        {"heatmap", 0, 0, G_OPTION_ARG_FILENAME, &heatmap,
         "Write heatmap overlays PREFIX-2.png, PREFIX-3.png, … (one per image after the first)",
         "PREFIX"},
        {"delta", 0, 0, G_OPTION_ARG_NONE, &delta,
         "Heatmaps from the paper's Δ map (a second encoder pass) instead of the update norms",
         NULL},
        {"json", 0, 0, G_OPTION_ARG_NONE, &json,
         "Print one JSON object (text, tokens, timings, model, device, heatmaps) instead of "
         "streaming",
         NULL},
        {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &files, NULL, "IMG1 IMG2 [IMG…]"},
        {NULL},
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("- describe what changed across images");
    g_option_context_set_summary(ctx, summary_text);
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) err = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        return 2;
    }
    if (!files || !files[0])
        return usage_error(ctx, "no images given");
    if (model_path && random_init)
        return usage_error(ctx, "--model and --random-init exclude each other");
    if (seed != -1 && !random_init)
        return usage_error(ctx, "--seed only applies to --random-init");
    if (variant && !random_init)
        return usage_error(ctx, "--variant only applies to --random-init (a model file has "
                                "its variant built in)");
    if (max_tokens < 1)
        return usage_error(ctx, "--max-tokens must be at least 1");
    if (beam_size < 1 || beam_size > 64)
        return usage_error(ctx, "--beam must be 1 to 64");
    if (seed < -1)
        return usage_error(ctx, "--seed must not be negative");
    if (!device)
        device = g_strdup("auto");
    if (strcmp(device, "auto") != 0 && strcmp(device, "cpu") != 0 && strcmp(device, "cuda") != 0)
        return usage_error(ctx, "--device must be auto, cpu or cuda");
    ClSveVariant sve_variant = CL_SVE_CROSS_FFN;
    if (variant && !cl_sve_variant_from_name(variant, &sve_variant)) {
        g_autofree char *m = g_strdup_printf("unknown variant '%s'", variant);
        return usage_error(ctx, m);
    }
    ClDescribeOptions opts;
    cl_describe_options_init(&opts);
    g_autoptr(GString) context = g_string_new(NULL);
    for (int i = 0; reports && reports[i]; i++) {
        g_autofree char *text = NULL;
        gsize len = 0;
        g_autoptr(GError) rerr = NULL;
        if (!g_file_get_contents(reports[i], &text, &len, &rerr)) {
            fprintf(stderr, "%s: --prior-report: %s\n", PROG, rerr->message);
            return 1;
        }
        if (len > (1u << 20) || !g_utf8_validate(text, (gssize)len, NULL)) {
            fprintf(stderr, "%s: --prior-report %s: %s\n", PROG, reports[i],
                    len > (1u << 20) ? "larger than 1 MiB" : "not UTF-8 text");
            return 1;
        }
        g_strstrip(text);
        if (context->len && *text)
            g_string_append(context, "\n\n");
        g_string_append(context, text);
    }
    if (sparse_topk >= 0 && stream)
        return usage_error(ctx, "--sparse-prefill and --stream exclude each other");
    if (sparse_topk >= 0) {
        opts.sparse_block = 32;
        opts.sparse_topk = sparse_topk;
    }
    if (pages_prefix && !context->len)
        return usage_error(ctx, "--context-pages needs --prior-report");
    opts.context = context->len ? context->str : NULL;
    if (stream) {
        gint64 sink = -1, window = -1;
        g_auto(GStrv) sw = g_strsplit(stream, "+", 2);
        if (!sw[0] || !sw[1] || !g_ascii_string_to_signed(sw[0], 10, 0, 1 << 20, &sink, NULL) ||
            !g_ascii_string_to_signed(sw[1], 10, 1, 1 << 20, &window, NULL))
            return usage_error(ctx, "--stream takes SINK+WINDOW, e.g. 256+2048");
        opts.stream_sink = (int)sink;
        opts.stream_window = (int)window;
    }
    if (domain_name) {
        if (!cl_chat_domain_from_name(domain_name, &opts.domain)) {
            g_autofree char *m = g_strdup_printf("unknown domain '%s'", domain_name);
            return usage_error(ctx, m);
        }
        opts.auto_domain = FALSE;
    }
    ClModelConfig cfg;
    if (random_init) {
        if (!cl_model_config_preset(&cfg, random_init, &err)) {
            g_autofree char *m = g_strdup_printf("--random-init: %s", err->message);
            return usage_error(ctx, m);
        }
        cfg.sve_variant = sve_variant;
    }

    /* ---- images (fail fast on a bad path), then the model and the device ---- */
    gint64 t0 = g_get_monotonic_time();
    guint n_files = g_strv_length(files);
    g_autoptr(ClSequence) seq = cl_sequence_open((const char *const *)files, n_files, NULL, &err);
    if (!seq) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        return 1;
    }
    guint n_images = cl_sequence_length(seq);
    if (n_images < 2) {
        fprintf(stderr,
                "%s: %s holds one image; a description needs at least two (give more files, "
                "or a multi-frame file)\n",
                PROG, files[0]);
        return 2;
    }

    g_autoptr(ClModel) model = NULL;
    g_autofree char *resolved_path = NULL;
    if (random_init) {
        model = cl_model_new_random(&cfg, seed < 0 ? 0 : (guint64)seed, &err);
    } else {
        resolved_path = model_path ? g_strdup(model_path) : cl_model_find_default(&err);
        if (resolved_path)
            model = cl_model_load(resolved_path, &err);
    }
    if (!model) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        return 1;
    }
    g_autofree char *backend_notice = NULL;
    g_autoptr(ClBackend) be = cl_backend_new(device, &backend_notice, &err);
    if (!be) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        return 1;
    }
    double load_ms = (g_get_monotonic_time() - t0) / 1000.0;

    /* ---- run ---- */
    g_autofree ClDescribeImage *imgs = g_new0(ClDescribeImage, n_images);
    for (guint t = 0; t < n_images; t++) {
        imgs[t].image = cl_sequence_item(seq, t)->image;
        imgs[t].frame = cl_sequence_item(seq, t)->frame;
    }
    gboolean streamed_any = FALSE;
    opts.question = prompt;
    opts.max_new_tokens = max_tokens;
    opts.beam_size = beam_size;
    opts.delta = delta;
    opts.heatmaps = TRUE; /* cheap; the JSON reports them even without --heatmap */
    if (!json) {
        opts.on_token = cl_cli_stream_token;
        opts.user_data = &streamed_any;
    }
    ClDescribeResult res;
    gboolean ok = cl_describe_run(be, model, imgs, n_images, &opts, &res, &err);
    res.load_ms = load_ms;
    if (streamed_any)
        fputc('\n', stdout);
    fflush(stdout);
    /* notices: the device fallback and the sequence's warnings first */
    guint pos = 0;
    if (backend_notice)
        g_ptr_array_insert(res.notices, (gint)pos++, g_strdup(backend_notice));
    if (random_init)
        g_ptr_array_insert(res.notices, (gint)pos++,
                           g_strdup_printf("random-init %s seed %" G_GINT64_FORMAT
                                           ": an untrained model, its text is noise",
                                           random_init, seed < 0 ? (gint64)0 : seed));
    for (guint i = 0; i < seq->warnings->len; i++)
        g_ptr_array_insert(res.notices, (gint)pos++, g_strdup(g_ptr_array_index(seq->warnings, i)));
    for (guint i = 0; i < res.notices->len; i++)
        fprintf(stderr, "%s: note: %s\n", PROG, (const char *)g_ptr_array_index(res.notices, i));
    if (!ok) {
        fprintf(stderr, "%s: %s\n", PROG, err->message);
        cl_describe_result_clear(&res);
        return 1;
    }

    if (res.context_tokens > 0 && res.context_pages > 0)
        fprintf(stderr, "%s: prior reports: %d tokens, VIST2 kept %d of them as %d page%s (%d "
                "positions)\n", PROG, res.context_tokens, res.context_compressed,
                res.context_pages, res.context_pages == 1 ? "" : "s",
                res.context_pages * res.n_visual_per_image);
    else if (res.context_tokens > 0)
        fprintf(stderr, "%s: prior reports: %d tokens, read as text\n", PROG,
                res.context_tokens);

    /* ---- heatmaps ---- */
    int rc = 0;
    for (guint i = 0; pages_prefix && i < res.context_page_pixels->len; i++) {
        const int S = model->config.image_size;
        g_autofree char *path = g_strdup_printf("%s-%u.png", pages_prefix, i + 1);
        g_autoptr(GError) perr = NULL;
        if (!cl_vist_write_page_png(g_ptr_array_index(res.context_page_pixels, i), S, path,
                                    &perr)) {
            fprintf(stderr, "%s: %s\n", PROG, perr->message);
            rc = 1;
        } else {
            fprintf(stderr, "%s: wrote %s (VIST2 page %u, %d × %d)\n", PROG, path, i + 1, S, S);
        }
    }
    char **written = g_new0(char *, res.heatmaps->len + 1);
    for (guint i = 0; heatmap && i < res.heatmaps->len; i++) {
        const ClHeatmap *hm = g_ptr_array_index(res.heatmaps, i);
        int t = hm->image_index;
        const ClSequenceItem *it = cl_sequence_item(seq, (guint)t);
        g_autofree char *path = g_strdup_printf("%s-%d.png", heatmap, t + 1);
        g_autoptr(GError) herr = NULL;
        if (!cl_heatmap_write_png(hm, &res.letterbox[t], it->image, it->frame, NULL,
                                  HEATMAP_OPACITY, path, &herr)) {
            fprintf(stderr, "%s: %s\n", PROG, herr->message);
            rc = 1;
            continue;
        }
        fprintf(stderr, "%s: wrote %s (%s heatmap of image %d, %s, %u × %u)\n", PROG, path,
                cl_heatmap_source_name(hm->source), t + 1, it->label, it->image->width,
                it->image->height);
        written[i] = g_steal_pointer(&path);
    }

    if (json) {
        JsonContext c = {
            .model_path = resolved_path,
            .model_sha256 = model->sha256,
            .preset = random_init,
            .seed = seed < 0 ? 0 : seed,
            .variant = cl_sve_variant_name(model->config.sve_variant),
            .device = cl_backend_name(be),
            .heatmap_files = written,
        };
        g_autofree char *out = result_to_json(&res, seq, &c);
        printf("%s\n", out);
    } else {
        double enc = 0;
        for (guint t = 0; t < res.n_images; t++)
            enc += res.encode_ms[t];
        fprintf(stderr,
                "%s: %s, %u images (%s), load %.0f ms, preprocess %.0f ms, encode %.0f ms, "
                "prefill %d positions %.0f ms, %u tokens in %.0f ms (%.1f tokens/s, %s)\n",
                PROG, cl_backend_name(be), n_images, cl_chat_domain_name(res.domain), load_ms,
                res.preprocess_ms, enc, res.n_prompt, res.prefill_ms, res.ids->len, res.decode_ms,
                res.tokens_per_s, cl_stop_reason_name(res.stop_reason));
    }
    g_strfreev(written);
    cl_describe_result_clear(&res);
    return rc;
}
