/* json.c - the JSON report, schema "changelens-report/1" (docs/REPORT.md documents every field):
 * the case, its images, runs, description versions, heatmap grids, notes, key images, the
 * comparisons and warnings, written pretty with json-glib. */
#include "report/doc.h"
#include "jsonnum.h"
#include "report/deid.h"

#include <math.h>
#include <string.h>

/* A finite number as JSON. json-glib (1.6) writes a double whose shortest form has an exponent
 * but no point ("1e+20", "1e-300") with ".0" after it, which is not JSON: such a value is
 * written as the integer it is when it fits in 64 bits (exact), else one ulp nearer zero, whose
 * 17 digits carry a point. Every other value is written as before. */
static void add_number(JsonBuilder *b, double v)
{
    g_assert(isfinite(v));
    const double safe = cl_json_double(v); /* core/jsonnum.h: the rule for every JSON writer */
    if (safe != v && v == trunc(v) && fabs(v) < 9.2e18)
        json_builder_add_int_value(b, (gint64)v); /* an integer: exact */
    else
        json_builder_add_double_value(b, safe);
}

static void str_or_null(JsonBuilder *b, const char *name, const char *value)
{
    json_builder_set_member_name(b, name);
    if (value)
        json_builder_add_string_value(b, value);
    else
        json_builder_add_null_value(b);
}

static void id_or_null(JsonBuilder *b, const char *name, gint64 id)
{
    json_builder_set_member_name(b, name);
    if (id)
        json_builder_add_int_value(b, id);
    else
        json_builder_add_null_value(b);
}

/* A stored JSON text as a value (object, array...); text that is not JSON stays a string. */
static void json_text(JsonBuilder *b, const char *name, const char *text)
{
    json_builder_set_member_name(b, name);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autofree char *again = NULL;
    /* a lone surrogate escape ("\ud83d") parses to bytes that are not UTF-8: such a text is kept
     * as the string it is */
    if (text && json_parser_load_from_data(parser, text, -1, NULL) &&
        json_parser_get_root(parser) &&
        g_utf8_validate(again = json_to_string(json_parser_get_root(parser), FALSE), -1, NULL))
        json_builder_add_value(b, json_node_copy(json_parser_get_root(parser)));
    else if (text)
        json_builder_add_string_value(b, text);
    else
        json_builder_add_null_value(b);
}

static void add_case(JsonBuilder *b, const ClRpDoc *d)
{
    const ClCaseSummary *s = &d->c->summary;
    json_builder_set_member_name(b, "case");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "id");
    json_builder_add_int_value(b, s->id);
    str_or_null(b, "name", s->name);
    str_or_null(b, "created_at", s->created_at);
    str_or_null(b, "updated_at", s->updated_at);
    json_builder_set_member_name(b, "status");
    json_builder_add_string_value(b, d->current ? cl_desc_status_name(d->current->status) : "none");
    str_or_null(b, "modalities", s->modalities);
    json_builder_set_member_name(b, "n_images");
    json_builder_add_int_value(b, d->images->len);
    id_or_null(b, "current_description_version_id", d->current ? d->current->id : 0);
    json_builder_end_object(b);
}

static void num_or_null(JsonBuilder *b, const char *name, double value, gboolean known)
{
    json_builder_set_member_name(b, name);
    if (known && isfinite(value))
        add_number(b, value);
    else
        json_builder_add_null_value(b);
}

static const char *display_mode_name(ClDisplayMode m)
{
    switch (m) {
    case CL_DISPLAY_WINDOW: return "window";
    case CL_DISPLAY_VOI_LUT: return "voi_lut";
    case CL_DISPLAY_MINMAX: return "minmax";
    case CL_DISPLAY_PERCENTILE: return "percentile";
    case CL_DISPLAY_FULL_RANGE: return "full_range";
    default: return "auto";
    }
}

/* A display transform: its mode and the numbers that mode uses. */
static void add_display(JsonBuilder *b, const ClDisplaySettings *s, const char *source,
                        const char *words)
{
    json_builder_begin_object(b);
    str_or_null(b, "source", source);
    json_builder_set_member_name(b, "mode");
    json_builder_add_string_value(b, display_mode_name(s->mode));
    num_or_null(b, "window_center", s->center, s->mode == CL_DISPLAY_WINDOW);
    num_or_null(b, "window_width", s->width, s->mode == CL_DISPLAY_WINDOW);
    num_or_null(b, "voi_lut", s->voi_lut, s->mode == CL_DISPLAY_VOI_LUT);
    num_or_null(b, "low_percentile", s->low_pct, s->mode == CL_DISPLAY_PERCENTILE);
    num_or_null(b, "high_percentile", s->high_pct, s->mode == CL_DISPLAY_PERCENTILE);
    json_builder_set_member_name(b, "bands");
    json_builder_begin_array(b);
    for (int c = 0; c < 3; c++)
        json_builder_add_int_value(b, s->bands[c]);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "per_band");
    json_builder_add_boolean_value(b, s->per_band);
    json_builder_set_member_name(b, "invert");
    json_builder_add_boolean_value(b, s->invert);
    str_or_null(b, "text", words);
    json_builder_end_object(b);
}

/* What the window showed (o.view), null when the report was not made from one. */
static void add_view(JsonBuilder *b, const ClRpDoc *d)
{
    json_builder_set_member_name(b, "view");
    const ClReportView *v = d->view;
    if (!v) {
        json_builder_add_null_value(b);
        return;
    }
    const ClRpComparison *cmp = NULL;
    for (guint i = 0; i < d->comparisons->len && !cmp; i++)
        if (((const ClRpComparison *)d->comparisons->pdata[i])->on_screen)
            cmp = d->comparisons->pdata[i];
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "before_image_id");
    json_builder_add_int_value(b, v->before_image_id);
    json_builder_set_member_name(b, "after_image_id");
    json_builder_add_int_value(b, v->after_image_id);
    json_builder_set_member_name(b, "display");
    json_builder_begin_array(b);
    for (int k = 0; k < 2; k++) {
        if (!v->has_display[k]) {
            json_builder_add_null_value(b);
            continue;
        }
        g_autofree char *words = cl_rp_display_words(&v->display[k]);
        add_display(b, &v->display[k], "screen", words);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "aligned");
    json_builder_add_boolean_value(b, v->aligned);
    json_builder_set_member_name(b, "alignment");
    if (v->aligned) {
        json_builder_begin_array(b);
        for (int k = 0; k < 6; k++)
            add_number(b, v->align_m[k]);
        json_builder_end_array(b);
    } else {
        json_builder_add_null_value(b);
    }
    str_or_null(b, "alignment_status", v->align_status);
    json_builder_set_member_name(b, "ignore_regions");
    json_builder_begin_array(b);
    for (guint i = 0; i < v->n_masks; i++) {
        json_builder_begin_array(b);
        for (int k = 0; k < 4; k++)
            add_number(b, v->masks[4 * i + k]);
        json_builder_end_array(b);
    }
    json_builder_end_array(b);
    str_or_null(b, "compare_mode", v->compare_mode);
    num_or_null(b, "tolerance", v->tolerance, TRUE);
    num_or_null(b, "changed_fraction", cmp ? cmp->changed_fraction : -1,
                cmp && cmp->changed_fraction >= 0);
    num_or_null(b, "changed_fraction_on_screen", v->changed_fraction, v->changed_fraction >= 0);
    json_builder_set_member_name(b, "heatmap_shown");
    json_builder_add_boolean_value(b, v->heatmap_shown);
    str_or_null(b, "heatmap_source", v->heatmap_source);
    g_autofree char *line = cl_rp_view_line(d);
    str_or_null(b, "text", line);
    json_builder_end_object(b);
}

static void add_images(JsonBuilder *b, const ClRpDoc *d)
{
    json_builder_set_member_name(b, "images");
    json_builder_begin_array(b);
    for (guint i = 0; i < d->images->len; i++) {
        const ClRpImage *ri = g_ptr_array_index(d->images, i);
        const ClCaseImage *img = ri->img;
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "id");
        json_builder_add_int_value(b, img->id);
        json_builder_set_member_name(b, "position");
        json_builder_add_int_value(b, img->position);
        str_or_null(b, "name", ri->name);
        str_or_null(b, "path", d->deidentified ? NULL : img->path);
        json_builder_set_member_name(b, "frame");
        json_builder_add_int_value(b, img->frame);
        json_builder_set_member_name(b, "n_frames");
        json_builder_add_int_value(b, img->n_frames);
        str_or_null(b, "format", img->format);
        str_or_null(b, "modality", img->modality);
        json_builder_set_member_name(b, "width");
        json_builder_add_int_value(b, img->width);
        json_builder_set_member_name(b, "height");
        json_builder_add_int_value(b, img->height);
        str_or_null(b, "sha256", img->sha256);
        json_builder_set_member_name(b, "file_size");
        json_builder_add_int_value(b, img->file_size);
        str_or_null(b, "acquired_at", img->acquired_at);
        str_or_null(b, "added_at", img->added_at);
        json_builder_set_member_name(b, "file_state");
        json_builder_add_string_value(b, cl_file_state_name(img->file_state));
        json_builder_set_member_name(b, "key_image");
        json_builder_add_boolean_value(b, ri->key_labels != NULL);
        json_builder_set_member_name(b, "burned_in_annotation");
        json_builder_add_boolean_value(b, ri->burned_in);
        json_builder_set_member_name(b, "display");
        if (ri->has_display)
            add_display(b, &ri->display, ri->display_source, ri->display_words);
        else
            json_builder_add_null_value(b);
        json_builder_set_member_name(b, "metadata");
        JsonNode *meta = json_node_new(JSON_NODE_OBJECT);
        json_node_set_object(meta, ri->meta);
        json_builder_add_value(b, meta);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

static void add_comparisons(JsonBuilder *b, const ClRpDoc *d)
{
    json_builder_set_member_name(b, "comparisons");
    json_builder_begin_array(b);
    for (guint i = 0; i < d->comparisons->len; i++) {
        const ClRpComparison *cmp = g_ptr_array_index(d->comparisons, i);
        const ClRpImage *bi = g_ptr_array_index(d->images, cmp->before);
        const ClRpImage *ai = g_ptr_array_index(d->images, cmp->after);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "before_image_id");
        json_builder_add_int_value(b, bi->img->id);
        json_builder_set_member_name(b, "after_image_id");
        json_builder_add_int_value(b, ai->img->id);
        id_or_null(b, "heatmap_id", cmp->heatmap ? cmp->heatmap->id : 0);
        json_builder_set_member_name(b, "on_screen");
        json_builder_add_boolean_value(b, cmp->on_screen);
        json_builder_set_member_name(b, "aligned");
        json_builder_add_boolean_value(b, cmp->on_screen && cmp->aligned);
        num_or_null(b, "tolerance", d->view ? d->view->tolerance : 0, cmp->on_screen);
        num_or_null(b, "changed_fraction", cmp->changed_fraction, cmp->changed_fraction >= 0);
        json_builder_set_member_name(b, "compared_pixels");
        if (cmp->changed_fraction >= 0)
            json_builder_add_int_value(b, (gint64)cmp->compared);
        else
            json_builder_add_null_value(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

static void add_runs(JsonBuilder *b, const ClRpDoc *d)
{
    json_builder_set_member_name(b, "runs");
    json_builder_begin_array(b);
    for (guint i = 0; i < d->c->runs->len; i++) {
        const ClCaseRun *r = g_ptr_array_index(d->c->runs, i);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "id");
        json_builder_add_int_value(b, r->id);
        str_or_null(b, "created_at", r->created_at);
        str_or_null(b, "model_name", r->model_name);
        str_or_null(b, "model_sha256", r->model_sha256);
        json_text(b, "model_config", r->model_config_json);
        str_or_null(b, "device", r->device);
        json_text(b, "settings", r->settings_json);
        /* a string: 64-bit seeds do not survive readers that hold numbers as doubles */
        g_autofree char *seed = g_strdup_printf("%" G_GUINT64_FORMAT, r->seed);
        json_builder_set_member_name(b, "seed");
        json_builder_add_string_value(b, seed);
        json_builder_set_member_name(b, "timings_ms");
        json_builder_begin_object(b);
        const struct {
            const char *name;
            double v;
        } t[] = { { "preprocess", r->preprocess_ms },
                  { "encode", r->encode_ms },
                  { "prefill", r->prefill_ms },
                  { "decode", r->decode_ms },
                  { "total", r->total_ms } };
        for (guint k = 0; k < G_N_ELEMENTS(t); k++) {
            json_builder_set_member_name(b, t[k].name);
            add_number(b, isfinite(t[k].v) ? t[k].v : 0.0);
        }
        json_builder_end_object(b);
        json_builder_set_member_name(b, "n_tokens");
        json_builder_add_int_value(b, r->n_tokens);
        json_builder_set_member_name(b, "latest");
        json_builder_add_boolean_value(b, r == d->latest_run);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

static void add_descriptions(JsonBuilder *b, const ClRpDoc *d)
{
    json_builder_set_member_name(b, "descriptions");
    json_builder_begin_array(b);
    for (guint i = 0; i < d->c->descriptions->len; i++) {
        const ClCaseDescVersion *v = g_ptr_array_index(d->c->descriptions, i);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "id");
        json_builder_add_int_value(b, v->id);
        json_builder_set_member_name(b, "description_id");
        json_builder_add_int_value(b, v->description_id);
        id_or_null(b, "run_id", v->run_id);
        json_builder_set_member_name(b, "version");
        json_builder_add_int_value(b, v->version);
        str_or_null(b, "text", v->text);
        json_builder_set_member_name(b, "status");
        json_builder_add_string_value(b, cl_desc_status_name(v->status));
        str_or_null(b, "author", v->author);
        str_or_null(b, "created_at", v->created_at);
        json_builder_set_member_name(b, "current");
        json_builder_add_boolean_value(b, v == d->current);
        json_builder_set_member_name(b, "generated");
        json_builder_add_boolean_value(b, v->run_id != 0 && v->version == 1);
        json_builder_set_member_name(b, "deidentified_text");
        json_builder_add_boolean_value(b, g_array_index(d->desc_altered, gboolean, i));
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

static void add_heatmaps(JsonBuilder *b, const ClRpDoc *d)
{
    json_builder_set_member_name(b, "heatmaps");
    json_builder_begin_array(b);
    for (guint i = 0; i < d->c->heatmaps->len; i++) {
        const ClCaseHeatmap *h = g_ptr_array_index(d->c->heatmaps, i);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "id");
        json_builder_add_int_value(b, h->id);
        json_builder_set_member_name(b, "run_id");
        json_builder_add_int_value(b, h->run_id);
        json_builder_set_member_name(b, "image_id");
        json_builder_add_int_value(b, h->image_id);
        json_builder_set_member_name(b, "layer");
        json_builder_add_int_value(b, h->layer);
        str_or_null(b, "kind", h->kind);
        json_builder_set_member_name(b, "input_size");
        json_builder_add_int_value(b, h->input_size);
        json_builder_set_member_name(b, "grid_w");
        json_builder_add_int_value(b, h->grid_w);
        json_builder_set_member_name(b, "grid_h");
        json_builder_add_int_value(b, h->grid_h);
        json_builder_set_member_name(b, "values");
        if (h->data) {
            json_builder_begin_array(b);
            for (gsize k = 0; k < (gsize)h->grid_w * h->grid_h; k++)
                if (isfinite(h->data[k]))
                    add_number(b, h->data[k]);
                else
                    json_builder_add_null_value(b); /* JSON has no NaN or infinity */
            json_builder_end_array(b);
        } else {
            json_builder_add_null_value(b);
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

static void add_notes(JsonBuilder *b, const ClRpDoc *d)
{
    json_builder_set_member_name(b, "notes");
    json_builder_begin_array(b);
    for (guint i = 0; i < d->c->notes->len; i++) {
        const ClCaseNote *n = g_ptr_array_index(d->c->notes, i);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "id");
        json_builder_add_int_value(b, n->id);
        id_or_null(b, "image_id", n->image_id);
        str_or_null(b, "author", n->author);
        str_or_null(b, "text", n->text);
        str_or_null(b, "created_at", n->created_at);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);

    json_builder_set_member_name(b, "key_images");
    json_builder_begin_array(b);
    for (guint i = 0; i < d->c->key_images->len; i++) {
        const ClCaseKeyImage *k = g_ptr_array_index(d->c->key_images, i);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "id");
        json_builder_add_int_value(b, k->id);
        json_builder_set_member_name(b, "image_id");
        json_builder_add_int_value(b, k->image_id);
        str_or_null(b, "label", k->label);
        str_or_null(b, "created_at", k->created_at);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

char *cl_rp_json(const ClRpDoc *d)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "schema");
    json_builder_add_string_value(b, "changelens-report/1");
    str_or_null(b, "generator", d->generator);
    str_or_null(b, "generated_at", d->generated_at);
    json_builder_set_member_name(b, "deidentified");
    json_builder_add_boolean_value(b, d->deidentified);
    str_or_null(b, "deidentification_method", d->deidentified ? cl_deid_method() : NULL);
    add_case(b, d);
    add_view(b, d);
    add_images(b, d);
    add_comparisons(b, d);
    add_runs(b, d);
    add_descriptions(b, d);
    add_heatmaps(b, d);
    add_notes(b, d);
    json_builder_set_member_name(b, "warnings");
    json_builder_begin_array(b);
    for (guint i = 0; i < d->warnings->len; i++)
        json_builder_add_string_value(b, g_ptr_array_index(d->warnings, i));
    json_builder_end_array(b);
    json_builder_end_object(b);

    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    json_generator_set_pretty(gen, TRUE);
    json_generator_set_indent(gen, 2);
    json_generator_set_root(gen, root);
    char *text = json_generator_to_data(gen, NULL);
    char *with_nl = g_strconcat(text, "\n", NULL);
    g_free(text);
    return with_nl;
}
