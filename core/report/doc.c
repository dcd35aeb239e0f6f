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

/* A run of more than this many characters without a break opportunity gets one (U+200B ZERO
 * WIDTH SPACE) every BREAK_EVERY characters: Pango breaks such a run inside a word by reshaping
 * it for each line, which takes time quadratic in its length (a 20,000-character name without a
 * space took 7 s, 40,000 16 s). Text with spaces is left as it is. */
#define BREAK_EVERY 64

char *cl_rp_with_breaks(const char *text)
{
    GString *out = NULL; /* made at the first break inserted */
    int run = 0;
    for (const char *q = text; *q; q = g_utf8_next_char(q)) {
        gunichar c = g_utf8_get_char(q);
        if (g_unichar_isspace(c) || c == 0x200B || c == '-' || c == '/') {
            run = 0;
        } else if (++run > BREAK_EVERY) {
            if (!out)
                out = g_string_new_len(text, q - text);
            g_string_append_unichar(out, 0x200B);
            run = 1;
        }
        if (out)
            g_string_append_unichar(out, c);
    }
    return out ? g_string_free(out, FALSE) : NULL;
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
    char *out = json_generator_to_data(gen, NULL);
    /* a lone surrogate escape ("\ud83d") comes back as bytes that are not UTF-8 */
    if (!g_utf8_validate(out, -1, NULL)) {
        g_free(out);
        return g_strdup(json);
    }
    return out;
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
    if (cmp->on_screen && cmp->changed_fraction >= 0) {
        GString *s = g_string_new(NULL);
        g_string_append_printf(s,
                               "Difference as on screen: image %u %s image %u; red = a channel "
                               "differs by more than %.0f/255 (brighter = more), grey = within it",
                               cmp->after + 1, cmp->aligned ? "aligned onto" : "stretched onto",
                               cmp->before + 1, d->view->tolerance);
        if (d->view->n_masks)
            g_string_append_printf(s, ", dark blue = %u ignore region%s (not compared)",
                                   d->view->n_masks, d->view->n_masks == 1 ? "" : "s");
        g_string_append_printf(s, ". %.2f %% of the %" G_GUINT64_FORMAT " compared pixels differ",
                               cmp->changed_fraction * 100.0, cmp->compared);
        return g_string_free(s, FALSE);
    }
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
    g_autofree char *when_shifted =
        d->deidentified && v->created_at && *v->created_at
            ? g_strdup_printf("%s (moved back with every date of this de-identified report)",
                              v->created_at)
            : NULL;
    const char *when = when_shifted ? when_shifted : cl_rp_or(v->created_at, "an unknown date");
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
    g_free(ri->display_words);
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
    g_clear_pointer(&d->desc_altered, g_array_unref);
    g_free((char *)d->view_copy.align_status);
    g_free((char *)d->view_copy.compare_mode);
    g_free((char *)d->view_copy.heatmap_source);
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
static const ClCaseHeatmap *pick_heatmap(const ClCase *c, const ClCaseRun *run, gint64 image_id,
                                         const ClReportView *view)
{
    if (!run)
        return NULL;
    const char *want = view ? view->heatmap_source : NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    /* an empty or blank text loads as a document without a root */
    if (run->settings_json && json_parser_load_from_data(parser, run->settings_json, -1, NULL) &&
        json_parser_get_root(parser) && JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
        JsonObject *o = json_node_get_object(json_parser_get_root(parser));
        if (!want)
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

/* Whether settings made for one image fit another (its bands and VOI LUTs exist). */
static gboolean display_fits(const ClDisplaySettings *s, const ClImage *img)
{
    for (int c = 0; c < 3; c++)
        if (s->bands[c] >= (int)img->channels)
            return FALSE;
    return s->mode != CL_DISPLAY_VOI_LUT || (img->voi_luts && s->voi_lut < img->voi_luts->len);
}

/* The display an image is drawn with: the view's for the images on screen; for another image of
 * the same format and modality as the later one on screen (a series: the next CT of a follow-up)
 * the later one's, so that the whole report has the window the reviewer chose; else the frame's
 * defaults. */
static void pick_display(ClRpDoc *d, ClRpImage *ri, const ClImage *img)
{
    const ClReportView *v = d->view;
    ri->display_source = "default";
    for (int k = 0; v && k < 2; k++) {
        gint64 id = k == 0 ? v->before_image_id : v->after_image_id;
        if (ri->img->id == id && v->has_display[k] && display_fits(&v->display[k], img)) {
            ri->display = v->display[k];
            ri->display_source = "screen";
        }
    }
    if (v && v->has_display[1] && g_str_equal(ri->display_source, "default")) {
        const ClRpImage *later = cl_rp_doc_image_by_id(d, v->after_image_id);
        if (later && later != ri && g_strcmp0(later->img->format, ri->img->format) == 0 &&
            g_strcmp0(later->img->modality, ri->img->modality) == 0 &&
            display_fits(&v->display[1], img)) {
            ri->display = v->display[1];
            ri->display_source = "screen-series";
        }
    }
    if (g_str_equal(ri->display_source, "default"))
        cl_display_settings_init(&ri->display, img, ri->img->frame);
    ri->has_display = TRUE;
    g_free(ri->display_words);
    ri->display_words = cl_rp_display_words(&ri->display);
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
    else if (img) {
        pick_display(d, ri, img);
        cl_rp_display(img, orig->frame, &ri->display, d->o.max_image_px, planes, &err);
    }
    if (!err)
        return g_steal_pointer(&img);
    /* loader messages name the path */
    g_autofree char *msg = deid ? cl_deid_text(deid, err->message) : clean(err->message);
    ri->view.placeholder = g_strdup_printf("%s\ncannot be shown: %s", ri->title, msg);
    warn(d, "%s cannot be shown: %s", ri->title, msg);
    cl_rp_planes_clear(planes);
    return NULL;
}

/* The comparison of images ib and i (before, after): overlay and grey difference. */
static ClRpComparison *compare(ClRpDoc *d, guint ib, guint i, const ClImage *after_img,
                               const ClCaseImage *after_orig, const ClRpPlanes *before,
                               const ClRpPlanes *after)
{
    ClRpComparison *cmp = g_new0(ClRpComparison, 1);
    cmp->before = ib;
    cmp->after = i;
    cmp->diff_max = -1;
    cmp->changed_fraction = -1;
    const ClRpImage *rb = g_ptr_array_index(d->images, ib), *ra = g_ptr_array_index(d->images, i);
    cmp->heatmap = pick_heatmap(d->c, d->latest_run, ra->img->id, d->view);
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
        if (!cl_rp_overlay(cmp->heatmap, i, after_img, after_orig->frame,
                           ra->has_display ? &ra->display : NULL, d->o.heatmap_opacity,
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
    return cmp;
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

/* One frame's display planes for the pair on screen, read again without warnings (the main pass
 * gave them); NULL when it cannot be shown. */
static ClImage *load_quiet(const ClRpDoc *d, const ClCaseImage *orig, const ClRpImage *ri,
                           ClRpPlanes *planes)
{
    memset(planes, 0, sizeof *planes);
    ClFileState st = orig->file_state;
    if (st == CL_FILE_MISSING || st == CL_FILE_CHANGED || st == CL_FILE_UNREADABLE || !orig->path ||
        !*orig->path)
        return NULL;
    g_autoptr(ClImage) img = cl_image_load(orig->path, NULL, NULL);
    if (!img || orig->frame >= cl_image_n_frames(img) ||
        (orig->width && orig->height && (img->width != orig->width || img->height != orig->height)))
        return NULL;
    ClDisplaySettings s;
    if (ri->has_display && display_fits(&ri->display, img))
        s = ri->display;
    else
        cl_display_settings_init(&s, img, orig->frame);
    if (!cl_rp_display(img, orig->frame, &s, d->o.max_image_px, planes, NULL))
        return NULL;
    return g_steal_pointer(&img);
}

/* The pair on screen (o.view): its comparison (the consecutive one, or a new one listed first)
 * gets the difference as the window showed it and the share of changed pixels. */
static void view_comparison(ClRpDoc *d, const ClDeid *deid, const ClCase *orig)
{
    const ClReportView *v = d->view;
    if (!v)
        return;
    int ib = -1, ia = -1;
    for (guint i = 0; i < d->images->len; i++) {
        const ClRpImage *ri = g_ptr_array_index(d->images, i);
        if (ri->img->id == v->before_image_id)
            ib = (int)i;
        if (ri->img->id == v->after_image_id)
            ia = (int)i;
    }
    if (ib < 0 || ia < 0 || ib == ia) {
        warn(d, "The images on screen are not two images of this case: the report shows the "
                "case's comparisons without the view's alignment, ignore regions and tolerance.");
        return;
    }
    ClRpComparison *cmp = NULL;
    for (guint i = 0; i < d->comparisons->len && !cmp; i++) {
        ClRpComparison *c = g_ptr_array_index(d->comparisons, i);
        if ((int)c->before == ib && (int)c->after == ia)
            cmp = c;
    }
    const ClCaseImage *ob = g_ptr_array_index(orig->images, ib),
                      *oa = g_ptr_array_index(orig->images, ia);
    ClRpPlanes pb, pa;
    g_autoptr(ClImage) before = load_quiet(d, ob, g_ptr_array_index(d->images, ib), &pb);
    g_autoptr(ClImage) after = load_quiet(d, oa, g_ptr_array_index(d->images, ia), &pa);
    if (!cmp) { /* a pair that is not consecutive (the filmstrip can show any two) */
        if (d->pictures) {
            cmp = compare(d, (guint)ib, (guint)ia, after, oa, &pb, &pa);
        } else {
            cmp = g_new0(ClRpComparison, 1);
            cmp->before = (guint)ib;
            cmp->after = (guint)ia;
            cmp->diff_max = -1;
            cmp->heatmap = pick_heatmap(d->c, d->latest_run, oa->id, d->view);
        }
        g_ptr_array_insert(d->comparisons, 0, cmp);
    }
    (void)deid;
    cmp->on_screen = TRUE;
    cmp->aligned = v->aligned;
    cmp->changed_fraction = -1;
    if (before && after && pb.planes && pa.planes) {
        ClRpPicture pic = { 0 };
        cl_rp_difference_view(&pb, before->width, before->height, &pa, after->width, after->height,
                              v->aligned ? v->align_m : NULL, v->masks, v->n_masks, v->tolerance,
                              d->pictures ? &pic : NULL, &cmp->changed_fraction, &cmp->compared);
        if (d->pictures) {
            cl_rp_picture_clear(&cmp->diff);
            cmp->diff = pic;
        }
    }
    cl_rp_planes_clear(&pb);
    cl_rp_planes_clear(&pa);
}

/* The de-identifier of these options' secret (or the installation's). */
static ClDeid *deid_for(const ClCase *c, const ClReportOptions *o, GError **error)
{
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
    return cl_deid_new(secret, c);
}

static void view_comparison(ClRpDoc *d, const ClDeid *deid, const ClCase *orig);

/* An ultrasound image (from the case's modality or the metadata's) */
static gboolean is_ultrasound(const ClCaseImage *img, JsonObject *meta)
{
    const char *m = img->modality && *img->modality ? img->modality : meta_string(meta, "Modality");
    if (!m)
        return FALSE;
    g_autofree char *s = g_strstrip(g_ascii_strup(m, -1));
    return strcmp(s, "US") == 0;
}

typedef enum {
    BURN_NONE, /* BurnedInAnnotation other than YES, or absent on a modality that rarely has it */
    BURN_YES,  /* BurnedInAnnotation = YES */
    BURN_ULTRASOUND, /* ultrasound that does not say */
} BurnRisk;

/* Whether an image's pixels may show identifying text */
static BurnRisk burn_risk(const ClCaseImage *img, JsonObject *meta)
{
    const char *burned = meta_string(meta, "BurnedInAnnotation");
    if (burned) {
        g_autofree char *b = g_strstrip(g_ascii_strup(burned, -1));
        return strcmp(b, "YES") == 0 ? BURN_YES : BURN_NONE;
    }
    return is_ultrasound(img, meta) ? BURN_ULTRASOUND : BURN_NONE;
}

guint cl_report_burned_in_images(const ClCase *c)
{
    g_return_val_if_fail(c != NULL, 0);
    guint n = 0;
    for (guint i = 0; c->images && i < c->images->len; i++) {
        const ClCaseImage *img = g_ptr_array_index(c->images, i);
        gboolean ok;
        JsonObject *meta = parse_meta(img->metadata_json, &ok);
        n += burn_risk(img, meta) != BURN_NONE;
        json_object_unref(meta);
    }
    return n;
}

ClRpDoc *cl_rp_doc_new(const ClCase *c, const ClReportOptions *o, gboolean pictures, GError **error)
{
    g_autoptr(ClDeid) deid = NULL;
    if (o->deidentify && !(deid = deid_for(c, o, error)))
        return NULL;

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
    if (o->view) {
        /* the view's words go into the report like the case's texts */
        d->view_copy = *o->view;
        d->view_copy.align_status = clean(o->view->align_status);
        d->view_copy.compare_mode = clean(o->view->compare_mode);
        d->view_copy.heatmap_source = clean(o->view->heatmap_source);
        d->view = &d->view_copy;
    }
    d->c = copy_case(c);
    d->desc_altered = g_array_new(FALSE, TRUE, sizeof(gboolean));
    g_array_set_size(d->desc_altered, d->c->descriptions->len);
    if (deid) {
        /* what de-identification changes in the descriptions is said next to them */
        g_autoptr(GPtrArray) before = g_ptr_array_new_with_free_func(g_free);
        for (guint i = 0; i < d->c->descriptions->len; i++)
            g_ptr_array_add(before,
                            g_strdup(((ClCaseDescVersion *)d->c->descriptions->pdata[i])->text));
        cl_deid_case(deid, d->c);
        for (guint i = 0; i < d->c->descriptions->len; i++)
            g_array_index(d->desc_altered, gboolean, i) =
                g_strcmp0(before->pdata[i],
                          ((ClCaseDescVersion *)d->c->descriptions->pdata[i])->text) != 0;
        d->day_shift = cl_deid_day_offset(deid);
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
        const BurnRisk risk = burn_risk(ri->img, ri->meta);
        ri->burned_in = risk == BURN_YES;
        if (ri->burned_in)
            warn(d,
                 "%s has burned-in annotation (BurnedInAnnotation = YES): its pixels may show "
                 "identifying text that this export %s.",
                 ri->title, deid ? "does not remove" : "shows as it is");
        else if (risk == BURN_ULTRASOUND)
            warn(d,
                 "%s is an ultrasound image that does not say whether text is burned into its "
                 "pixels (no BurnedInAnnotation); ultrasound images often show the patient's "
                 "name and the date, which this export %s.",
                 ri->title, deid ? "does not remove" : "shows as it is");
        if (risk != BURN_NONE && deid && pictures && !o->burned_in_checked) {
            g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_BURNED_IN,
                        "%s may show identifying text in its pixels (%s), and de-identification "
                        "changes metadata and text, never pixels: look at its pixels, then export "
                        "again confirming they were checked (case export --burned-in-checked; "
                        "in the app, \"Pixels checked\"), or export the JSON report, which holds "
                        "no pixels",
                        ri->title,
                        ri->burned_in ? "BurnedInAnnotation = YES"
                                      : "ultrasound without BurnedInAnnotation");
            rp_image_free(ri);
            cl_rp_doc_free(d);
            return NULL;
        }
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
                cmp->heatmap = pick_heatmap(d->c, d->latest_run, ri->img->id, d->view);
                cmp->changed_fraction = -1;
                g_ptr_array_add(d->comparisons, cmp);
            }
            for (int k = 0; d->view && k < 2; k++)
                if (ri->img->id == (k ? d->view->after_image_id : d->view->before_image_id) &&
                    d->view->has_display[k]) {
                    ri->display = d->view->display[k];
                    ri->has_display = TRUE;
                    ri->display_source = "screen";
                    ri->display_words = cl_rp_display_words(&ri->display);
                }
        }
        view_comparison(d, deid, c);
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
            g_ptr_array_add(d->comparisons, compare(d, i - 1, i, img, orig, &prev, &planes));
        cl_rp_planes_clear(&prev);
        prev = planes;
    }
    cl_rp_planes_clear(&prev);
    view_comparison(d, deid, c);
    return d;
}

char *cl_rp_image_caption(const ClRpImage *ri, const char *role)
{
    GString *s = g_string_new(NULL);
    g_string_append_printf(s, "%s: %s", role, ri->title);
    if (ri->img->acquired_at && *ri->img->acquired_at)
        g_string_append_printf(s, ", acquired %s", ri->img->acquired_at);
    if (ri->display_words)
        g_string_append_printf(s, "\nDisplay: %s (%s)", ri->display_words,
                               g_strcmp0(ri->display_source, "screen") == 0 ? "as on screen"
                               : g_strcmp0(ri->display_source, "screen-series") == 0
                                   ? "as the later image on screen"
                                   : "the file's default");
    if (ri->key_labels)
        g_string_append_printf(s, "\n★ Key image%s%s", *ri->key_labels ? ": " : "", ri->key_labels);
    if (ri->burned_in)
        g_string_append(s, "\nBurned-in annotation: the pixels may show identifying text");
    return g_string_free(s, FALSE);
}

char *cl_rp_altered_line(const ClRpDoc *d)
{
    if (!d->deidentified || !d->current)
        return NULL;
    for (guint i = 0; i < d->c->descriptions->len; i++)
        if (g_ptr_array_index(d->c->descriptions, i) == d->current &&
            g_array_index(d->desc_altered, gboolean, i))
            return g_strdup("De-identified copy of this text: dates in it moved back by the same "
                            "number of days as every date of this report, the patient's names and "
                            "IDs removed. The text as written and signed is kept unchanged in the "
                            "case.");
    return NULL;
}

char *cl_rp_display_words(const ClDisplaySettings *s)
{
    GString *w = g_string_new(NULL);
    switch (s->mode) {
    case CL_DISPLAY_WINDOW:
        g_string_append_printf(w, "window width %.6g, level %.6g", s->width, s->center);
        break;
    case CL_DISPLAY_VOI_LUT:
        g_string_append_printf(w, "the file's VOI LUT %u", s->voi_lut + 1);
        break;
    case CL_DISPLAY_MINMAX: g_string_append(w, "min–max stretch"); break;
    case CL_DISPLAY_PERCENTILE:
        g_string_append_printf(w, "%.3g–%.3g %% percentile stretch", s->low_pct, s->high_pct);
        break;
    case CL_DISPLAY_FULL_RANGE: g_string_append(w, "full range"); break;
    default: g_string_append(w, "the default display"); break;
    }
    if (s->per_band)
        g_string_append(w, ", each band stretched on its own");
    if (!(s->bands[0] == s->bands[1] && s->bands[1] == s->bands[2]) &&
        !(s->bands[0] == 0 && s->bands[1] == 1 && s->bands[2] == 2))
        g_string_append_printf(w, ", bands %d, %d, %d as R, G, B", s->bands[0] + 1, s->bands[1] + 1,
                               s->bands[2] + 1);
    if (s->invert)
        g_string_append(w, ", inverted");
    return g_string_free(w, FALSE);
}

char *cl_rp_view_line(const ClRpDoc *d)
{
    const ClReportView *v = d->view;
    if (!v)
        return NULL;
    const ClRpComparison *cmp = NULL;
    for (guint i = 0; i < d->comparisons->len && !cmp; i++) {
        const ClRpComparison *c = g_ptr_array_index(d->comparisons, i);
        if (c->on_screen)
            cmp = c;
    }
    if (!cmp)
        return g_strdup("As on screen: the images shown are not two images of this case.");
    const ClRpImage *b = g_ptr_array_index(d->images, cmp->before),
                    *a = g_ptr_array_index(d->images, cmp->after);
    GString *s = g_string_new(NULL);
    g_string_append_printf(s, "As on screen: image %u → image %u", cmp->before + 1, cmp->after + 1);
    if (b->display_words && a->display_words && g_str_equal(b->display_words, a->display_words))
        g_string_append_printf(s, ", both shown with %s", a->display_words);
    else
        g_string_append_printf(s, ", image %u shown with %s, image %u with %s", cmp->before + 1,
                               cl_rp_or(b->display_words, "its default display"), cmp->after + 1,
                               cl_rp_or(a->display_words, "its default display"));
    if (v->aligned)
        g_string_append_printf(s, "; image %u aligned onto image %u%s%s%s", cmp->after + 1,
                               cmp->before + 1, v->align_status ? " (" : "",
                               v->align_status ? v->align_status : "", v->align_status ? ")" : "");
    else
        g_string_append_printf(s, "; not aligned (image %u stretched onto image %u)",
                               cmp->after + 1, cmp->before + 1);
    g_string_append_printf(s, "; compare mode %s", cl_rp_or(v->compare_mode, "side-by-side"));
    g_string_append_printf(s, "; difference tolerance %.0f/255", v->tolerance);
    if (cmp->changed_fraction >= 0)
        g_string_append_printf(s, ": %.2f %% of the compared pixels differ",
                               cmp->changed_fraction * 100.0);
    if (v->changed_fraction >= 0)
        g_string_append_printf(s, " (%.2f %% on screen)", v->changed_fraction * 100.0);
    if (v->n_masks)
        g_string_append_printf(s, "; %u ignore region%s left out", v->n_masks,
                               v->n_masks == 1 ? "" : "s");
    g_string_append_printf(s, "; heat map %s", v->heatmap_shown ? "shown" : "hidden");
    if (v->heatmap_source)
        g_string_append_printf(s, " (%s)", v->heatmap_source);
    g_string_append_c(s, '.');
    return g_string_free(s, FALSE);
}

void cl_report_text_change_free(ClReportTextChange *t)
{
    if (!t)
        return;
    g_free(t->where);
    g_free(t->before);
    g_free(t->after);
    g_free(t);
}

static void text_change(GPtrArray *out, const ClDeid *deid, char *where, const char *text)
{
    g_autofree char *w = where;
    g_autofree char *before = clean(text ? text : "");
    for (guint i = 0; i < out->len; i++) /* a text kept in several versions: once */
        if (g_str_equal(((ClReportTextChange *)out->pdata[i])->before, before))
            return;
    g_autofree char *after = cl_deid_text(deid, before);
    if (g_strcmp0(before, after) == 0)
        return;
    ClReportTextChange *t = g_new0(ClReportTextChange, 1);
    t->where = g_steal_pointer(&w);
    t->before = g_steal_pointer(&before);
    t->after = g_steal_pointer(&after);
    g_ptr_array_add(out, t);
}

GPtrArray *cl_report_deid_text_changes(const ClCase *c, const ClReportOptions *o, GError **error)
{
    g_return_val_if_fail(c != NULL && o != NULL, NULL);
    g_autoptr(ClDeid) deid = deid_for(c, o, error);
    if (!deid)
        return NULL;
    GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)cl_report_text_change_free);
    /* the current description first: the text a reviewer signs */
    const ClCaseDescVersion *cur = cl_case_current_description(c);
    for (int pass = 0; pass < 2; pass++)
        for (guint i = 0; c->descriptions && i < c->descriptions->len; i++) {
            const ClCaseDescVersion *v = g_ptr_array_index(c->descriptions, i);
            gboolean generated = v->run_id != 0 && v->version == 1;
            if (generated || (pass == 0) != (v == cur))
                continue;
            text_change(out, deid,
                        g_strdup_printf("Description, version %u (%s, by %s)", v->version,
                                        cl_desc_status_name(v->status),
                                        cl_rp_or(v->author, "unknown")),
                        v->text);
        }
    for (guint i = 0; c->notes && i < c->notes->len; i++) {
        const ClCaseNote *n = g_ptr_array_index(c->notes, i);
        text_change(out, deid, g_strdup_printf("Note by %s", cl_rp_or(n->author, "unknown")),
                    n->text);
    }
    for (guint i = 0; c->key_images && i < c->key_images->len; i++) {
        const ClCaseKeyImage *k = g_ptr_array_index(c->key_images, i);
        text_change(out, deid, g_strdup("Key-image label"), k->label);
    }
    text_change(out, deid, g_strdup("Case name"), c->summary.name);
    return out;
}
