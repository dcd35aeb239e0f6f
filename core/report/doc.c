/* doc.c - prepares a report (doc.h): copies the case with its text made safe, de-identifies the
 * copy, renders every picture and collects the warnings, so that PDF, HTML and JSON all show
 * the same thing. */
#include "report/doc.h"

#include <math.h>
#include <string.h>

#include "report/deid.h"

/* ---- safe text ------------------------------------------------------------------------------ */

/* Unicode's 66 noncharacters (U+FDD0..U+FDEF and the last two code points of every plane,
 * U+FFFE, U+10FFFF, ...): valid UTF-8, but Cairo refuses a string that holds one, so a case
 * named with one could not be exported as PDF. */
static gboolean is_noncharacter(gunichar c)
{
    return (c >= 0xfdd0 && c <= 0xfdef) || (c & 0xfffe) == 0xfffe;
}

/* Valid UTF-8 (bad bytes become U+FFFD), line ends as \n, and no control characters other than
 * \n and \t nor noncharacters (they become U+FFFD too): Pango, Cairo, HTML and JSON all take
 * the result as is. */
static char *clean(const char *s)
{
    if (!s)
        return NULL;
    g_autofree char *v = g_utf8_make_valid(s, -1);
    GString *out = g_string_sized_new(strlen(v));
    for (const char *p = v; *p; p = g_utf8_next_char(p)) {
        gunichar c = g_utf8_get_char(p);
        if (c == '\r') {
            if (p[1] != '\n')
                g_string_append_c(out, '\n');
        } else if ((c < 0x20 && c != '\n' && c != '\t') || (c >= 0x7f && c <= 0x9f) ||
                   is_noncharacter(c)) {
            g_string_append_unichar(out, 0xfffd);
        } else {
            g_string_append_unichar(out, c);
        }
    }
    return g_string_free(out, FALSE);
}

/* ---- the copy ------------------------------------------------------------------------------- */

static ClCaseImage *copy_image(const ClCaseImage *s)
{
    ClCaseImage *d = g_memdup2(s, sizeof *s);
    d->path = clean(s->path);
    d->sha256 = clean(s->sha256);
    d->format = clean(s->format);
    d->modality = clean(s->modality);
    d->acquired_at = clean(s->acquired_at);
    d->metadata_json = clean(s->metadata_json ? s->metadata_json : "{}");
    d->added_at = clean(s->added_at);
    return d;
}

static ClCaseRun *copy_run(const ClCaseRun *s)
{
    ClCaseRun *d = g_memdup2(s, sizeof *s);
    d->created_at = clean(s->created_at);
    d->model_name = clean(s->model_name);
    d->model_sha256 = clean(s->model_sha256);
    d->model_config_json = clean(s->model_config_json);
    d->device = clean(s->device);
    d->settings_json = clean(s->settings_json);
    return d;
}

static ClCaseDescVersion *copy_version(const ClCaseDescVersion *s)
{
    ClCaseDescVersion *d = g_memdup2(s, sizeof *s);
    d->text = clean(s->text ? s->text : "");
    d->author = clean(s->author);
    d->created_at = clean(s->created_at);
    return d;
}

static ClCaseHeatmap *copy_heatmap(const ClCaseHeatmap *s)
{
    ClCaseHeatmap *d = g_memdup2(s, sizeof *s);
    d->kind = clean(s->kind);
    d->data = s->data ? g_memdup2(s->data, sizeof(float) * (gsize)s->grid_w * s->grid_h) : NULL;
    return d;
}

static ClCase *copy_case(const ClCase *s)
{
    ClCase *d = cl_case_new_empty();
    d->summary = s->summary;
    d->summary.name = clean(s->summary.name ? s->summary.name : "");
    d->summary.created_at = clean(s->summary.created_at);
    d->summary.updated_at = clean(s->summary.updated_at);
    d->summary.modalities = clean(s->summary.modalities);
    for (guint i = 0; s->images && i < s->images->len; i++)
        g_ptr_array_add(d->images, copy_image(g_ptr_array_index(s->images, i)));
    for (guint i = 0; s->runs && i < s->runs->len; i++)
        g_ptr_array_add(d->runs, copy_run(g_ptr_array_index(s->runs, i)));
    for (guint i = 0; s->descriptions && i < s->descriptions->len; i++)
        g_ptr_array_add(d->descriptions, copy_version(g_ptr_array_index(s->descriptions, i)));
    for (guint i = 0; s->heatmaps && i < s->heatmaps->len; i++)
        g_ptr_array_add(d->heatmaps, copy_heatmap(g_ptr_array_index(s->heatmaps, i)));
    for (guint i = 0; s->notes && i < s->notes->len; i++) {
        const ClCaseNote *n = g_ptr_array_index(s->notes, i);
        ClCaseNote *m = g_memdup2(n, sizeof *n);
        m->author = clean(n->author);
        m->text = clean(n->text ? n->text : "");
        m->created_at = clean(n->created_at);
        g_ptr_array_add(d->notes, m);
    }
    for (guint i = 0; s->key_images && i < s->key_images->len; i++) {
        const ClCaseKeyImage *k = g_ptr_array_index(s->key_images, i);
        ClCaseKeyImage *m = g_memdup2(k, sizeof *k);
        m->label = clean(k->label ? k->label : "");
        m->created_at = clean(k->created_at);
        g_ptr_array_add(d->key_images, m);
    }
    return d; /* the audit log is not part of a report */
}

/* ---- helpers for the writers ---------------------------------------------------------------- */

const char *cl_rp_or(const char *s, const char *fallback)
{
    return s && *s ? s : fallback;
}

const ClRpImage *cl_rp_doc_image_by_id(const ClRpDoc *d, gint64 image_id)
{
    for (guint i = 0; i < d->images->len; i++) {
        const ClRpImage *ri = g_ptr_array_index(d->images, i);
        if (ri->img->id == image_id)
            return ri;
    }
    return NULL;
}

char *cl_rp_timings(const ClCaseRun *r)
{
    return g_strdup_printf("preprocess %.1f ms, encode %.1f ms, prefill %.1f ms, decode %.1f ms, "
                           "total %.1f ms; %u tokens",
                           r->preprocess_ms, r->encode_ms, r->prefill_ms, r->decode_ms, r->total_ms,
                           r->n_tokens);
}

char *cl_rp_short(const char *text, guint max_chars)
{
    if (!text)
        return g_strdup("");
    const char *nl = strchr(text, '\n');
    g_autofree char *line = nl ? g_strndup(text, (gsize)(nl - text)) : g_strdup(text);
    if (g_utf8_strlen(line, -1) <= (glong)max_chars && !nl)
        return g_steal_pointer(&line);
    if (g_utf8_strlen(line, -1) > (glong)max_chars)
        *g_utf8_offset_to_pointer(line, max_chars) = 0;
    return g_strconcat(line, "…", NULL);
}

char *cl_rp_compact_json(const char *json)
{
    if (!json || !*json)
        return g_strdup("");
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!json_parser_load_from_data(parser, json, -1, NULL) || !json_parser_get_root(parser))
        return g_strdup(json);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    json_generator_set_root(gen, json_parser_get_root(parser));
    return json_generator_to_data(gen, NULL);
}

char *cl_rp_overlay_caption(const ClRpDoc *d, const ClRpComparison *cmp)
{
    const ClRpImage *after = g_ptr_array_index(d->images, cmp->after);
    if (!cmp->heatmap || !cmp->overlay.rgb)
        return g_strdup_printf("Heatmap over image %u: not available", cmp->after + 1);
    const ClCaseHeatmap *h = cmp->heatmap;
    return g_strdup_printf("Heatmap over image %u (%s): %s of run %" G_GINT64_FORMAT
                           ", grid %u × %u over a %d-pixel input, opacity %.2g; brighter = more "
                           "change seen by the model",
                           cmp->after + 1, after->name, cl_rp_or(h->kind, "heatmap"), h->run_id,
                           h->grid_w, h->grid_h, h->input_size, d->o.heatmap_opacity);
}

char *cl_rp_diff_caption(const ClRpDoc *d, const ClRpComparison *cmp)
{
    (void)d;
    if (cmp->diff_max < 0)
        return g_strdup_printf("Difference image %u − %u: not available", cmp->after + 1,
                               cmp->before + 1);
    if (cmp->diff_max == 0)
        return g_strdup_printf("Difference |image %u − image %u|: none (identical display images)",
                               cmp->after + 1, cmp->before + 1);
    return g_strdup_printf("Difference |image %u − image %u| of the display images (image %u "
                           "resampled to image %u's size), grey scale: black = none, white = "
                           "%.0f/255 (the largest)",
                           cmp->after + 1, cmp->before + 1, cmp->before + 1, cmp->after + 1,
                           cmp->diff_max * 255.0);
}

char *cl_rp_review_line(const ClRpDoc *d)
{
    const ClCaseDescVersion *v = d->current;
    if (!v)
        return g_strdup("No description yet.");
    const char *who = cl_rp_or(v->author, "unknown");
    const char *when = cl_rp_or(v->created_at, "an unknown date");
    switch (v->status) {
    case CL_DESC_ACCEPTED:
        return g_strdup_printf("Accepted by %s on %s (version %u).", who, when, v->version);
    case CL_DESC_REJECTED:
        return g_strdup_printf("Rejected by %s on %s (version %u).", who, when, v->version);
    default:
        return g_strdup_printf("Draft, not reviewed yet (version %u by %s on %s).", v->version, who,
                               when);
    }
}

/* ---- building ------------------------------------------------------------------------------- */

static void rp_image_free(gpointer p)
{
    ClRpImage *ri = p;
    g_free(ri->name);
    g_free(ri->title);
    cl_rp_picture_clear(&ri->view);
    g_free(ri->key_labels);
    if (ri->meta)
        json_object_unref(ri->meta);
    g_free(ri);
}

static void rp_comparison_free(gpointer p)
{
    ClRpComparison *cmp = p;
    cl_rp_picture_clear(&cmp->overlay);
    cl_rp_picture_clear(&cmp->diff);
    g_free(cmp);
}

void cl_rp_doc_free(ClRpDoc *d)
{
    if (!d)
        return;
    cl_case_free(d->c);
    g_free(d->generator);
    g_free(d->generated_at);
    g_ptr_array_unref(d->images);
    g_ptr_array_unref(d->comparisons);
    g_ptr_array_unref(d->warnings);
    g_free(d);
}

static void warn(ClRpDoc *d, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void warn(ClRpDoc *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_ptr_array_add(d->warnings, g_strdup_vprintf(fmt, ap));
    va_end(ap);
}

static JsonObject *parse_meta(const char *json, gboolean *ok)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    *ok = FALSE;
    if (json && json_parser_load_from_data(parser, json, -1, NULL)) {
        JsonNode *root = json_parser_get_root(parser);
        if (root && JSON_NODE_HOLDS_OBJECT(root)) {
            *ok = TRUE;
            return json_object_ref(json_node_get_object(root));
        }
    }
    return json_object_new();
}

static const char *meta_string(JsonObject *o, const char *key)
{
    JsonNode *n = json_object_get_member(o, key);
    if (!n || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING)
        return NULL;
    return json_node_get_string(n);
}

/* The heat grid of the run for this image: the mean map (layer -1), of the kind the run's
 * settings name, else update_norm, else delta. */
static const ClCaseHeatmap *pick_heatmap(const ClCase *c, const ClCaseRun *run, gint64 image_id)
{
    if (!run)
        return NULL;
    const char *want = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    if (run->settings_json && json_parser_load_from_data(parser, run->settings_json, -1, NULL) &&
        JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
        JsonObject *o = json_node_get_object(json_parser_get_root(parser));
        want = meta_string(o, "heatmap_source");
        if (!want)
            want = meta_string(o, "heatmap");
    }
    const ClCaseHeatmap *best = NULL;
    int best_rank = 99;
    for (guint i = 0; i < c->heatmaps->len; i++) {
        const ClCaseHeatmap *h = g_ptr_array_index(c->heatmaps, i);
        if (h->run_id != run->id || h->image_id != image_id || h->layer != -1)
            continue;
        int rank = want && g_strcmp0(h->kind, want) == 0    ? 0
                   : g_strcmp0(h->kind, "update_norm") == 0 ? 1
                   : g_strcmp0(h->kind, "delta") == 0       ? 2
                                                            : 3;
        if (rank < best_rank)
            best = h, best_rank = rank;
    }
    return best;
}

static const char *state_words(ClFileState s)
{
    switch (s) {
    case CL_FILE_MISSING: return "missing (moved or deleted)";
    case CL_FILE_CHANGED: return "changed since it was added (its sha256 differs)";
    case CL_FILE_UNREADABLE: return "unreadable (permission or I/O error)";
    default: return cl_file_state_name(s);
    }
}

/* Loads one image's frame and its display planes; on any problem sets the placeholder and a
 * warning and returns NULL. */
static ClImage *load_image(ClRpDoc *d, const ClDeid *deid, const ClCaseImage *orig, ClRpImage *ri,
                           ClRpPlanes *planes)
{
    ClFileState st = orig->file_state;
    if (st == CL_FILE_MISSING || st == CL_FILE_CHANGED || st == CL_FILE_UNREADABLE) {
        ri->view.placeholder =
            g_strdup_printf("%s\nfile %s: %s", ri->title, cl_file_state_name(st), state_words(st));
        warn(d, "%s: the file is %s; the report shows a placeholder instead.", ri->title,
             state_words(st));
        return NULL;
    }
    g_autoptr(GError) err = NULL;
    g_autoptr(ClImage) img = NULL;
    if (orig->path && *orig->path)
        img = cl_image_load(orig->path, NULL, &err);
    else
        g_set_error(&err, CL_REPORT_ERROR, CL_REPORT_ERROR_RENDER, "the image has no path");
    if (img && orig->frame >= cl_image_n_frames(img))
        g_set_error(&err, CL_REPORT_ERROR, CL_REPORT_ERROR_RENDER,
                    "frame %u is not in the file (it has %u)", orig->frame + 1,
                    cl_image_n_frames(img));
    else if (img && orig->width && orig->height &&
             (img->width != orig->width || img->height != orig->height))
        g_set_error(&err, CL_REPORT_ERROR, CL_REPORT_ERROR_RENDER,
                    "the file changed: it is %u × %u pixels now, %u × %u when it was added",
                    img->width, img->height, orig->width, orig->height);
    else if (img)
        cl_rp_display(img, orig->frame, d->o.max_image_px, planes, &err);
    if (!err)
        return g_steal_pointer(&img);
    /* loader messages name the path */
    g_autofree char *msg = deid ? cl_deid_text(deid, err->message) : clean(err->message);
    ri->view.placeholder = g_strdup_printf("%s\ncannot be shown: %s", ri->title, msg);
    warn(d, "%s cannot be shown: %s", ri->title, msg);
    cl_rp_planes_clear(planes);
    return NULL;
}

static void compare(ClRpDoc *d, guint i, const ClImage *after_img, const ClCaseImage *after_orig,
                    const ClRpPlanes *before, const ClRpPlanes *after)
{
    ClRpComparison *cmp = g_new0(ClRpComparison, 1);
    cmp->before = i - 1;
    cmp->after = i;
    cmp->diff_max = -1;
    const ClRpImage *rb = g_ptr_array_index(d->images, i - 1),
                    *ra = g_ptr_array_index(d->images, i);
    cmp->heatmap = pick_heatmap(d->c, d->latest_run, ra->img->id);
    if (!d->latest_run) {
        cmp->overlay.placeholder = g_strdup("No heatmap: the model has not run on this case");
    } else if (!cmp->heatmap) {
        cmp->overlay.placeholder =
            g_strdup_printf("No heatmap: run %" G_GINT64_FORMAT " stored none for image %u",
                            d->latest_run->id, i + 1);
    } else if (!after_img || !after->planes) {
        cmp->overlay.placeholder =
            g_strdup_printf("No heatmap overlay: image %u cannot be shown", i + 1);
    } else {
        g_autoptr(GError) err = NULL;
        if (!cl_rp_overlay(cmp->heatmap, i, after_img, after_orig->frame, d->o.heatmap_opacity,
                           d->o.max_image_px, &cmp->overlay, &err)) {
            g_autofree char *msg = clean(err->message);
            cmp->overlay.placeholder =
                g_strdup_printf("No heatmap overlay for image %u: %s", i + 1, msg);
            warn(d, "The heatmap of %s cannot be shown: %s", ra->title, msg);
        }
    }
    if (before->planes && after->planes) {
        cl_rp_difference(before, after, &cmp->diff, &cmp->diff_max);
    } else {
        cmp->diff.placeholder = g_strdup_printf("No difference image: %s cannot be shown",
                                                !before->planes ? rb->title : ra->title);
    }
    g_ptr_array_add(d->comparisons, cmp);
}

static char *key_labels(const ClCase *c, gint64 image_id)
{
    GString *s = NULL;
    for (guint i = 0; i < c->key_images->len; i++) {
        const ClCaseKeyImage *k = g_ptr_array_index(c->key_images, i);
        if (k->image_id != image_id)
            continue;
        if (!s)
            s = g_string_new(NULL);
        if (k->label && *k->label) {
            if (s->len)
                g_string_append(s, "; ");
            g_string_append(s, k->label);
        }
    }
    return s ? g_string_free(s, FALSE) : NULL;
}

static char *now_iso(void)
{
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    return g_date_time_format(now, "%Y-%m-%dT%H:%M:%SZ");
}

ClRpDoc *cl_rp_doc_new(const ClCase *c, const ClReportOptions *o, gboolean pictures, GError **error)
{
    g_autoptr(ClDeid) deid = NULL;
    if (o->deidentify) {
        g_autofree char *secret = NULL;
        if (o->deid_secret) {
            if (!*o->deid_secret) {
                g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_INVALID,
                            "the de-identification secret is empty");
                return NULL;
            }
            secret = g_strdup(o->deid_secret);
        } else if (!(secret = cl_deid_installation_secret(error))) {
            return NULL;
        }
        deid = cl_deid_new(secret, c);
    }

    ClRpDoc *d = g_new0(ClRpDoc, 1);
    d->o = *o;
    d->o.deid_secret = NULL;
    d->o.generator = NULL;
    d->deidentified = deid != NULL;
    d->pictures = pictures;
    d->generator = clean(cl_rp_or(o->generator, "ChangeLens"));
    d->generated_at = now_iso();
    d->images = g_ptr_array_new_with_free_func(rp_image_free);
    d->comparisons = g_ptr_array_new_with_free_func(rp_comparison_free);
    d->warnings = g_ptr_array_new_with_free_func(g_free);
    d->c = copy_case(c);
    if (deid) {
        cl_deid_case(deid, d->c);
        g_autofree char *g = cl_deid_shift_date(deid, d->generated_at);
        g_free(d->generated_at);
        d->generated_at = g_steal_pointer(&g);
    } else if (cl_case_has_dicom(c)) {
        warn(d, "De-identification is off: this report contains the patient's name, IDs, dates "
                "and UIDs from the DICOM metadata.");
    }
    d->current = cl_case_current_description(d->c);
    const ClCaseDescVersion *gen = cl_case_generated_version(d->c, d->current);
    if (gen && gen != d->current && g_strcmp0(gen->text, d->current->text) != 0)
        d->generated = gen;
    d->latest_run = cl_case_latest_run(d->c);

    /* image records first: warnings and captions refer to their titles */
    for (guint i = 0; i < d->c->images->len; i++) {
        ClRpImage *ri = g_new0(ClRpImage, 1);
        ri->img = g_ptr_array_index(d->c->images, i);
        ri->name = g_path_get_basename(cl_rp_or(ri->img->path, "(no path)"));
        ri->title = g_strdup_printf("Image %u (%s)", i + 1, ri->name);
        gboolean ok;
        ri->meta = parse_meta(ri->img->metadata_json, &ok);
        if (!ok)
            warn(d, "%s: its stored metadata is not a JSON object and is left out.", ri->title);
        const char *burned = meta_string(ri->meta, "BurnedInAnnotation");
        if (burned) {
            g_autofree char *b = g_strstrip(g_ascii_strup(burned, -1));
            ri->burned_in = strcmp(b, "YES") == 0;
        }
        if (ri->burned_in)
            warn(d,
                 "%s has burned-in annotation (BurnedInAnnotation = YES): its pixels may show "
                 "identifying text that this export %s.",
                 ri->title, deid ? "does not remove" : "shows as it is");
        ri->key_labels = key_labels(d->c, ri->img->id);
        g_ptr_array_add(d->images, ri);
    }

    if (!pictures) {
        /* the file states alone (JSON): the same warnings, no pixels read */
        for (guint i = 0; i < d->images->len; i++) {
            ClRpImage *ri = g_ptr_array_index(d->images, i);
            ClFileState st = ri->img->file_state;
            if (st == CL_FILE_MISSING || st == CL_FILE_CHANGED || st == CL_FILE_UNREADABLE)
                warn(d, "%s: the file is %s.", ri->title, state_words(st));
            if (i >= 1) {
                ClRpComparison *cmp = g_new0(ClRpComparison, 1);
                cmp->before = i - 1;
                cmp->after = i;
                cmp->diff_max = -1;
                cmp->heatmap = pick_heatmap(d->c, d->latest_run, ri->img->id);
                g_ptr_array_add(d->comparisons, cmp);
            }
        }
        return d;
    }
    ClRpPlanes prev = { 0 };
    for (guint i = 0; i < d->images->len; i++) {
        ClRpImage *ri = g_ptr_array_index(d->images, i);
        const ClCaseImage *orig = g_ptr_array_index(c->images, i); /* the real path */
        ClRpPlanes planes = { 0 };
        g_autoptr(ClImage) img = load_image(d, deid, orig, ri, &planes);
        if (img)
            cl_rp_planes_to_picture(&planes, &ri->view);
        if (i >= 1)
            compare(d, i, img, orig, &prev, &planes);
        cl_rp_planes_clear(&prev);
        prev = planes;
    }
    cl_rp_planes_clear(&prev);
    return d;
}

char *cl_rp_image_caption(const ClRpImage *ri, const char *role)
{
    GString *s = g_string_new(NULL);
    g_string_append_printf(s, "%s: %s", role, ri->title);
    if (ri->img->acquired_at && *ri->img->acquired_at)
        g_string_append_printf(s, ", acquired %s", ri->img->acquired_at);
    if (ri->key_labels)
        g_string_append_printf(s, "\n★ Key image%s%s", *ri->key_labels ? ": " : "", ri->key_labels);
    if (ri->burned_in)
        g_string_append(s, "\nBurned-in annotation: the pixels may show identifying text");
    return g_string_free(s, FALSE);
}
