/* caserun.c - the case-database records of a describe run. */
#include "casedb/caserun.h"

#include <json-glib/json-glib.h>

#include "jsonbuild.h"

static char *settings_json(GPtrArray *images, const ClDescribeOptions *opts,
                           const ClDescribeResult *res)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    cl_json_str(b, "domain", cl_chat_domain_name(res->domain));
    cl_json_str(b, "question", opts->question && *opts->question ? opts->question : NULL);
    cl_json_int(b, "max_new_tokens", opts->max_new_tokens);
    cl_json_int(b, "beam_size", opts->beam_size);
    cl_json_str(
        b, "heatmap_source",
        res->heatmaps && res->heatmaps->len
            ? cl_heatmap_source_name(((ClHeatmap *)g_ptr_array_index(res->heatmaps, 0))->source)
        : opts->delta ? "delta"
                      : "update_norm");
    cl_json_str(b, "display",
                "defaults of each image (DICOM window / VOI LUT, full range otherwise)");
    cl_json_str(b, "preprocess", "letterbox to the model input, aspect kept, centred");
    cl_json_str(b, "stop_reason", cl_stop_reason_name(res->stop_reason));
    cl_json_int(b, "prompt_positions", res->n_prompt);
    if (res->context_tokens > 0) { /* the notes read as prior reports, and how */
        cl_json_int(b, "prior_report_tokens", res->context_tokens);
        cl_json_int(b, "prior_report_pages", res->context_pages);
    }
    json_builder_set_member_name(b, "images");
    json_builder_begin_array(b);
    for (guint i = 0; i < images->len; i++) {
        const ClCaseImage *img = g_ptr_array_index(images, i);
        json_builder_begin_object(b);
        cl_json_int(b, "image_id", img->id);
        cl_json_str(b, "path", img->path);
        cl_json_int(b, "frame", img->frame);
        cl_json_str(b, "sha256", img->sha256);
        if (i < res->n_images && res->letterbox) {
            const ClLetterbox *lb = &res->letterbox[i];
            json_builder_set_member_name(b, "letterbox");
            json_builder_begin_object(b);
            cl_json_int(b, "size", lb->size);
            cl_json_int(b, "off_x", lb->off_x);
            cl_json_int(b, "off_y", lb->off_y);
            cl_json_int(b, "content_w", lb->content_w);
            cl_json_int(b, "content_h", lb->content_h);
            json_builder_end_object(b);
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    return json_generator_to_data(gen, NULL);
}

ClCaseRun *cl_case_run_from_describe(GPtrArray *images, const ClDescribeOptions *opts,
                                     const ClDescribeResult *res, const char *model_name,
                                     const char *model_sha256, const char *model_config_json,
                                     int model_image_size, const char *device, guint64 seed,
                                     double load_ms, GPtrArray **heatmaps)
{
    g_return_val_if_fail(images != NULL && res != NULL && heatmaps != NULL, NULL);
    ClCaseRun *run = g_new0(ClCaseRun, 1);
    run->model_name = g_strdup(model_name);
    run->model_sha256 = g_strdup(model_sha256);
    run->model_config_json = g_strdup(model_config_json);
    run->device = g_strdup(device);
    run->settings_json = settings_json(images, opts, res);
    run->seed = seed;
    run->preprocess_ms = res->preprocess_ms;
    for (guint t = 0; t < res->n_images && res->encode_ms; t++)
        run->encode_ms += res->encode_ms[t];
    run->prefill_ms = res->prefill_ms;
    run->decode_ms = res->decode_ms;
    run->total_ms =
        load_ms + run->preprocess_ms + run->encode_ms + run->prefill_ms + run->decode_ms;
    run->n_tokens = res->ids ? res->ids->len : 0;

    GPtrArray *heat = g_ptr_array_new_with_free_func((GDestroyNotify)cl_case_heatmap_free);
    /* the maps (mean over the blocks, layer -1) and each block's (layer 0, 1, ...) */
    guint n_mean = res->heatmaps ? res->heatmaps->len : 0;
    guint n_layer = res->layer_heatmaps ? res->layer_heatmaps->len : 0;
    for (guint i = 0; i < n_mean + n_layer; i++) {
        const ClHeatmap *hm = i < n_mean ? g_ptr_array_index(res->heatmaps, i)
                                         : g_ptr_array_index(res->layer_heatmaps, i - n_mean);
        if (hm->image_index < 0 || (guint)hm->image_index >= images->len)
            continue;
        const ClCaseImage *ci = g_ptr_array_index(images, (guint)hm->image_index);
        ClCaseHeatmap *h = g_new0(ClCaseHeatmap, 1);
        h->image_id = ci->id;
        h->layer = i < n_mean ? -1 : hm->layer;
        h->kind = g_strdup(cl_heatmap_source_name(hm->source));
        h->input_size = model_image_size;
        h->grid_w = (guint)hm->width;
        h->grid_h = (guint)hm->height;
        h->data = g_memdup2(hm->values, sizeof(float) * (gsize)hm->width * (gsize)hm->height);
        g_ptr_array_add(heat, h);
    }
    *heatmaps = heat;
    return run;
}
