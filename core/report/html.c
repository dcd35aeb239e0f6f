/* html.c - the HTML report: one self-contained UTF-8 file, pictures as data: URIs (PNG), every
 * text escaped, a small inline style sheet, no scripts and no external resources (a
 * Content-Security-Policy says so to the browser too). Same content as the PDF. */
#include "report/doc.h"

#include <string.h>

static const char css[] =
    "body{font-family:sans-serif;font-size:14px;line-height:1.4;color:#1a1a1a;max-width:1000px;"
    "margin:2em auto;padding:0 1em}"
    "h1{font-size:1.7em;margin:.2em 0}h2{font-size:1.3em;border-bottom:1px solid #ccc;"
    "margin-top:1.6em}h3{font-size:1.05em;margin:1.2em 0 .4em}"
    "p,li,dd,figcaption,blockquote{white-space:pre-wrap;overflow-wrap:anywhere}"
    ".kicker{color:#555;font-size:.85em}"
    "dl.fields{display:grid;grid-template-columns:max-content 1fr;gap:.15em 1em}"
    "dl.fields dt{font-weight:bold}dl.fields dd{margin:0}"
    ".warnings li{border-left:3px solid #d97300;padding-left:.5em;margin:.3em 0;list-style:none}"
    "blockquote{border-left:3px solid #3366bf;margin:.5em 0;padding:.2em .8em;font-size:1.05em}"
    "blockquote.generated{border-color:#999;color:#444;font-size:1em}"
    ".grid{display:grid;grid-template-columns:1fr 1fr;gap:14px}"
    "figure{margin:0}figure img{max-width:100%;height:auto;display:block}"
    "figure img.small{width:100%;image-rendering:pixelated}"
    "figcaption{font-size:.8em;color:#333;margin-top:.3em}"
    ".placeholder{border:1px dashed #777;background:#f2f2f2;min-height:140px;display:flex;"
    "align-items:center;justify-content:center;text-align:center;padding:1em;"
    "white-space:pre-wrap;overflow-wrap:anywhere}"
    "code,.mono{font-family:monospace;font-size:.85em;overflow-wrap:anywhere}"
    "table{border-collapse:collapse}td,th{border-bottom:1px solid #ddd;padding:.2em .5em;"
    "text-align:left;vertical-align:top;overflow-wrap:anywhere}"
    ".meta{font-size:.8em;color:#444}"
    "footer{margin-top:2em;color:#666;font-size:.8em}";

static void esc(GString *s, const char *text)
{
    g_autofree char *e = g_markup_escape_text(text ? text : "", -1);
    g_string_append(s, e);
}

/* <tag>escaped text</tag> */
static void el(GString *s, const char *tag, const char *cls, const char *text)
{
    if (cls)
        g_string_append_printf(s, "<%s class=\"%s\">", tag, cls);
    else
        g_string_append_printf(s, "<%s>", tag);
    esc(s, text);
    g_string_append_printf(s, "</%s>\n", tag);
}

static void field(GString *s, const char *label, const char *value, gboolean mono)
{
    g_string_append(s, "<dt>");
    esc(s, label);
    g_string_append(s, mono ? "</dt><dd class=\"mono\">" : "</dt><dd>");
    esc(s, value);
    g_string_append(s, "</dd>\n");
}

static void picture(GString *s, const ClRpPicture *pic, const char *caption)
{
    g_string_append(s, "<figure>");
    g_autoptr(GBytes) png = cl_rp_picture_png(pic);
    if (png) {
        gsize n;
        const guchar *data = g_bytes_get_data(png, &n);
        g_autofree char *b64 = g_base64_encode(data, n);
        g_string_append_printf(
            s, "<img%s src=\"data:image/png;base64,%s\" width=\"%u\" height=\"%u\" alt=\"",
            MAX(pic->width, pic->height) < 256 ? " class=\"small\"" : "", b64, pic->width,
            pic->height);
        esc(s, caption);
        g_string_append(s, "\">");
    } else {
        g_string_append(s, "<div class=\"placeholder\">");
        esc(s, cl_rp_or(pic->placeholder, "not available"));
        g_string_append(s, "</div>");
    }
    g_string_append(s, "<figcaption>");
    esc(s, caption);
    g_string_append(s, "</figcaption></figure>\n");
}

static void header(GString *s, const ClRpDoc *d)
{
    const ClCaseSummary *cs = &d->c->summary;
    g_string_append(s, "<header>\n");
    el(s, "p", "kicker", "ChangeLens report");
    el(s, "h1", NULL, cl_rp_or(cs->name, "(unnamed case)"));
    g_string_append(s, "<dl class=\"fields\">\n");
    g_autofree char *id = g_strdup_printf("%" G_GINT64_FORMAT, cs->id);
    field(s, "Case id", id, FALSE);
    field(s, "Created", cl_rp_or(cs->created_at, "unknown"), FALSE);
    field(s, "Updated", cl_rp_or(cs->updated_at, "unknown"), FALSE);
    g_autofree char *status =
        d->current ? g_strdup_printf("%s (description version %u)",
                                     cl_desc_status_name(d->current->status), d->current->version)
                   : g_strdup("no description");
    field(s, "Status", status, FALSE);
    g_autofree char *mods = g_strdup_printf("%s; %u image%s", cl_rp_or(cs->modalities, "none"),
                                            d->images->len, d->images->len == 1 ? "" : "s");
    field(s, "Modalities", mods, FALSE);
    g_autofree char *gen = g_strdup_printf("%s by %s", d->generated_at, d->generator);
    field(s, "Generated", gen, FALSE);
    field(s, "De-identified",
          d->deidentified ? "yes: DICOM PS3.15 Annex E basic profile with modified dates; the "
                            "patient's names and IDs removed from free text; every date shifted by "
                            "the same number of days; file names replaced by image-N names"
                          : "no",
          FALSE);
    g_string_append(s, "</dl>\n</header>\n");
    if (d->warnings->len) {
        g_string_append(s, "<section class=\"warnings\">\n<h2>Warnings</h2>\n<ul>\n");
        for (guint i = 0; i < d->warnings->len; i++)
            el(s, "li", NULL, g_ptr_array_index(d->warnings, i));
        g_string_append(s, "</ul>\n</section>\n");
    }
}

static void description(GString *s, const ClRpDoc *d)
{
    g_string_append(s, "<section>\n<h2>Description</h2>\n");
    g_autofree char *review = cl_rp_review_line(d);
    g_string_append(s, "<p><strong>");
    esc(s, review);
    g_string_append(s, "</strong></p>\n");
    if (d->current)
        el(s, "blockquote", "current", cl_rp_or(d->current->text, "(empty)"));
    g_autofree char *altered = cl_rp_altered_line(d);
    if (altered)
        el(s, "p", "altered", altered);
    if (d->generated) {
        g_autofree char *h = g_strdup_printf(
            "Generated by the model (version 1, run %" G_GINT64_FORMAT ", %s)",
            d->generated->run_id, cl_rp_or(d->generated->created_at, "unknown date"));
        el(s, "h3", NULL, h);
        el(s, "blockquote", "generated", cl_rp_or(d->generated->text, "(empty)"));
    }
    g_string_append(s, "</section>\n");
}

static void comparisons(GString *s, const ClRpDoc *d)
{
    g_string_append(s, "<section>\n<h2>Comparisons</h2>\n");
    if (d->comparisons->len == 0) {
        el(s, "p", NULL, "The case has one image: there is nothing to compare it with.");
        const ClRpImage *ri = g_ptr_array_index(d->images, 0);
        g_autofree char *cap = cl_rp_image_caption(ri, "Image");
        g_string_append(s, "<div class=\"grid\">\n");
        picture(s, &ri->view, cap);
        g_string_append(s, "</div>\n");
    }
    g_autofree char *view = cl_rp_view_line(d);
    if (view)
        el(s, "p", "view", view);
    for (guint i = 0; i < d->comparisons->len; i++) {
        const ClRpComparison *cmp = g_ptr_array_index(d->comparisons, i);
        const ClRpImage *b = g_ptr_array_index(d->images, cmp->before);
        const ClRpImage *a = g_ptr_array_index(d->images, cmp->after);
        g_autofree char *h =
            g_strdup_printf("Comparison %u: image %u → image %u%s", i + 1, cmp->before + 1,
                            cmp->after + 1, cmp->on_screen ? " (as on screen)" : "");
        el(s, "h3", NULL, h);
        g_autofree char *cb = cl_rp_image_caption(b, "Before");
        g_autofree char *ca = cl_rp_image_caption(a, "After");
        g_autofree char *co = cl_rp_overlay_caption(d, cmp);
        g_autofree char *cd = cl_rp_diff_caption(d, cmp);
        g_string_append(s, "<div class=\"grid\">\n");
        picture(s, &b->view, cb);
        picture(s, &a->view, ca);
        picture(s, &cmp->overlay, co);
        picture(s, &cmp->diff, cd);
        g_string_append(s, "</div>\n");
    }
    g_string_append(s, "</section>\n");
}

static void images(GString *s, const ClRpDoc *d)
{
    g_string_append(s, "<section>\n<h2>Images</h2>\n");
    for (guint i = 0; i < d->images->len; i++) {
        const ClRpImage *ri = g_ptr_array_index(d->images, i);
        const ClCaseImage *img = ri->img;
        el(s, "h3", NULL, ri->title);
        g_string_append(s, "<dl class=\"fields\">\n");
        g_autofree char *what =
            g_strdup_printf("%s%s%s, %u × %u pixels, frame %u of %u, %" G_GINT64_FORMAT " bytes",
                            cl_rp_or(img->format, "?"), img->modality ? " " : "",
                            img->modality ? img->modality : "", img->width, img->height,
                            img->frame + 1, MAX(img->n_frames, 1), img->file_size);
        field(s, "Format", what, FALSE);
        if (!d->deidentified)
            field(s, "Path", cl_rp_or(img->path, "(none)"), FALSE);
        field(s, "Acquired", cl_rp_or(img->acquired_at, "unknown"), FALSE);
        field(s, "Added", cl_rp_or(img->added_at, "unknown"), FALSE);
        field(s, "File state", cl_file_state_name(img->file_state), FALSE);
        field(s, "sha256", cl_rp_or(img->sha256, "unknown"), TRUE);
        if (ri->key_labels)
            field(s, "★ Key image", cl_rp_or(ri->key_labels, "(no label)"), FALSE);
        g_string_append(s, "</dl>\n");
        if (json_object_get_size(ri->meta)) {
            g_string_append(s, "<table class=\"meta\">\n");
            g_autoptr(GList) members = json_object_get_members(ri->meta);
            for (GList *l = members; l; l = l->next) {
                JsonNode *n = json_object_get_member(ri->meta, l->data);
                g_autofree char *v =
                    JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING
                        ? g_strdup(json_node_get_string(n))
                        : json_to_string(n, FALSE);
                g_string_append(s, "<tr><th>");
                esc(s, l->data);
                g_string_append(s, "</th><td>");
                esc(s, v);
                g_string_append(s, "</td></tr>\n");
            }
            g_string_append(s, "</table>\n");
        }
    }
    g_string_append(s, "</section>\n");
}

static void provenance(GString *s, const ClRpDoc *d)
{
    g_string_append(s, "<section>\n<h2>Provenance</h2>\n");
    if (d->c->runs->len == 0)
        el(s, "p", NULL, "The model has not run on this case.");
    for (guint i = d->c->runs->len; i-- > 0;) {
        const ClCaseRun *r = g_ptr_array_index(d->c->runs, i);
        const gboolean made_current = d->current && d->current->run_id == r->id;
        g_autofree char *h = g_strdup_printf(
            "Run %" G_GINT64_FORMAT " (%s)%s%s", r->id, cl_rp_or(r->created_at, "unknown date"),
            r == d->latest_run ? ", the latest" : "",
            made_current ? ", generated the current description" : "");
        el(s, "h3", NULL, h);
        g_string_append(s, "<dl class=\"fields\">\n");
        field(s, "Model", cl_rp_or(r->model_name, "unknown"), FALSE);
        field(s, "Model sha256", cl_rp_or(r->model_sha256, "unknown"), TRUE);
        field(s, "Device", cl_rp_or(r->device, "unknown"), FALSE);
        g_autofree char *seed = g_strdup_printf("%" G_GUINT64_FORMAT, r->seed);
        field(s, "Seed", seed, FALSE);
        g_autofree char *t = cl_rp_timings(r);
        field(s, "Timings", t, FALSE);
        g_autofree char *settings = cl_rp_compact_json(r->settings_json);
        field(s, "Settings", cl_rp_or(settings, "{}"), TRUE);
        g_autofree char *config = cl_rp_compact_json(r->model_config_json);
        field(s, "Model config", cl_rp_or(config, "{}"), TRUE);
        g_string_append(s, "</dl>\n");
    }
    el(s, "h3", NULL, "Images' sha256");
    g_string_append(s, "<dl class=\"fields\">\n");
    for (guint i = 0; i < d->images->len; i++) {
        const ClRpImage *ri = g_ptr_array_index(d->images, i);
        g_autofree char *label = g_strdup_printf("%u. %s", i + 1, ri->name);
        field(s, label, cl_rp_or(ri->img->sha256, "unknown"), TRUE);
    }
    g_string_append(s, "</dl>\n</section>\n");
}

static void history(GString *s, const ClRpDoc *d)
{
    g_string_append(s, "<section>\n<h2>Version history</h2>\n");
    if (d->c->descriptions->len == 0)
        el(s, "p", NULL, "No versions.");
    else
        g_string_append(s, "<table>\n<tr><th>Description</th><th>Version</th><th>Status</th>"
                           "<th>Author</th><th>Date</th><th>Text</th></tr>\n");
    for (guint i = 0; i < d->c->descriptions->len; i++) {
        const ClCaseDescVersion *v = g_ptr_array_index(d->c->descriptions, i);
        g_autofree char *gist = cl_rp_short(v->text, 110);
        g_string_append_printf(s, "<tr><td>%" G_GINT64_FORMAT "</td><td>%u</td><td>",
                               v->description_id, v->version);
        esc(s, cl_desc_status_name(v->status));
        g_string_append(s, "</td><td>");
        esc(s, cl_rp_or(v->author, "unknown"));
        g_string_append(s, "</td><td>");
        esc(s, cl_rp_or(v->created_at, "unknown"));
        g_string_append(s, "</td><td>");
        esc(s, gist);
        g_string_append(s, "</td></tr>\n");
    }
    if (d->c->descriptions->len)
        g_string_append(s, "</table>\n");
    g_string_append(s, "</section>\n");
}

static void notes(GString *s, const ClRpDoc *d)
{
    g_string_append(s, "<section>\n<h2>Notes</h2>\n");
    if (d->c->notes->len == 0)
        el(s, "p", NULL, "No notes.");
    for (guint i = 0; i < d->c->notes->len; i++) {
        const ClCaseNote *n = g_ptr_array_index(d->c->notes, i);
        const ClRpImage *ri = n->image_id ? cl_rp_doc_image_by_id(d, n->image_id) : NULL;
        g_autofree char *about =
            ri ? g_strdup_printf("about %s", ri->title) : g_strdup("about the case");
        g_autofree char *label = g_strdup_printf("%s, %s, %s", cl_rp_or(n->author, "unknown"),
                                                 cl_rp_or(n->created_at, "unknown date"), about);
        g_string_append(s, "<p><strong>");
        esc(s, label);
        g_string_append(s, ":</strong> ");
        esc(s, n->text);
        g_string_append(s, "</p>\n");
    }
    g_string_append(s, "</section>\n<section>\n<h2>Key images</h2>\n");
    if (d->c->key_images->len == 0)
        el(s, "p", NULL, "No key images.");
    else
        g_string_append(s, "<ul>\n");
    for (guint i = 0; i < d->c->key_images->len; i++) {
        const ClCaseKeyImage *k = g_ptr_array_index(d->c->key_images, i);
        const ClRpImage *ri = cl_rp_doc_image_by_id(d, k->image_id);
        g_autofree char *text = g_strdup_printf(
            "★ %s: %s (marked %s)", ri ? ri->title : "an image not in the case",
            cl_rp_or(k->label, "no label"), cl_rp_or(k->created_at, "unknown date"));
        el(s, "li", NULL, text);
    }
    if (d->c->key_images->len)
        g_string_append(s, "</ul>\n");
    g_string_append(s, "</section>\n");
}

char *cl_rp_html(const ClRpDoc *d)
{
    GString *s = g_string_sized_new(64 * 1024);
    g_string_append(s,
                    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                    "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                    "img-src data:; style-src 'unsafe-inline'\">\n"
                    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    g_string_append(s, "<meta name=\"generator\" content=\"");
    esc(s, d->generator);
    g_string_append(s, "\">\n<title>");
    g_autofree char *title = g_strdup_printf("ChangeLens report: %s", d->c->summary.name);
    esc(s, title);
    g_string_append_printf(s, "</title>\n<style>%s</style>\n</head>\n<body>\n", css);
    header(s, d);
    description(s, d);
    comparisons(s, d);
    images(s, d);
    provenance(s, d);
    history(s, d);
    notes(s, d);
    g_string_append(s, "<footer>");
    g_autofree char *foot = g_strdup_printf("Generated %s by %s", d->generated_at, d->generator);
    esc(s, foot);
    g_string_append(s, "</footer>\n</body>\n</html>\n");
    return g_string_free(s, FALSE);
}
