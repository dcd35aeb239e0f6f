/* pdf.c - the PDF report: Cairo's PDF surface, Pango text (wrapped, flowing over pages), a
 * picture grid per comparison, page numbers "Page N of M" (a first pass lays the document out
 * to count the pages), written to a temporary file that is renamed into place. */
#include "report/doc.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <pango/pangocairo.h>
#include <cairo-pdf.h>
#include <string.h>
#include <unistd.h>

#define MARGIN 48.0
#define FOOTER_SPACE 30.0
#define GAP 14.0
#define PICTURE_MAX_H 210.0

typedef struct {
    cairo_t *cr;
    double pw, ph;      /* page size, points */
    double x0, w;       /* content column */
    double top, bottom; /* content area */
    double y;
    int page;     /* 1-based */
    int n_pages;  /* total, known in the second pass (0 in the first) */
    gboolean dry; /* first pass: measure, draw nothing */
    const ClRpDoc *d;
    PangoFontDescription *body, *small, *mono, *h1, *h2, *h3, *big;
} Pdf;

/* ---- pages ---------------------------------------------------------------------------------- */

static PangoLayout *layout_new(Pdf *p, const char *text, const PangoFontDescription *font,
                               double width)
{
    PangoLayout *l = pango_cairo_create_layout(p->cr);
    pango_layout_set_font_description(l, font);
    pango_layout_set_width(l, (int)(width * PANGO_SCALE));
    pango_layout_set_wrap(l, PANGO_WRAP_WORD_CHAR);
    g_autofree char *broken = cl_rp_with_breaks(text);
    pango_layout_set_text(l, broken ? broken : text, -1);
    return l;
}

static double layout_height(PangoLayout *l)
{
    int w, h;
    pango_layout_get_size(l, &w, &h);
    return h / (double)PANGO_SCALE;
}

static void footer(Pdf *p)
{
    if (p->dry)
        return;
    g_autofree char *name = cl_rp_short(p->d->c->summary.name, 70);
    g_autofree char *left = g_strdup_printf("ChangeLens report · %s", name);
    g_autofree char *right = p->n_pages ? g_strdup_printf("Page %d of %d", p->page, p->n_pages)
                                        : g_strdup_printf("Page %d", p->page);
    cairo_save(p->cr);
    cairo_set_source_rgb(p->cr, 0.4, 0.4, 0.4);
    cairo_set_line_width(p->cr, 0.5);
    cairo_move_to(p->cr, p->x0, p->ph - FOOTER_SPACE - 4);
    cairo_line_to(p->cr, p->x0 + p->w, p->ph - FOOTER_SPACE - 4);
    cairo_stroke(p->cr);
    PangoLayout *r = layout_new(p, right, p->small, p->w);
    pango_layout_set_alignment(r, PANGO_ALIGN_RIGHT);
    cairo_move_to(p->cr, p->x0, p->ph - FOOTER_SPACE);
    pango_cairo_show_layout(p->cr, r);
    PangoLayout *l = layout_new(p, left, p->small, p->w * 0.75);
    pango_layout_set_ellipsize(l, PANGO_ELLIPSIZE_END);
    cairo_move_to(p->cr, p->x0, p->ph - FOOTER_SPACE);
    pango_cairo_show_layout(p->cr, l);
    g_object_unref(r);
    g_object_unref(l);
    cairo_restore(p->cr);
}

static void end_page(Pdf *p)
{
    footer(p);
    cairo_show_page(p->cr);
}

static void new_page(Pdf *p)
{
    end_page(p);
    p->page++;
    p->y = p->top;
}

/* Room for h more points on this page, else the next one (a block taller than a page starts on
 * a fresh page and runs over its end only when it cannot be split). */
static void need(Pdf *p, double h)
{
    if (p->y + h > p->bottom && p->y > p->top + 0.5)
        new_page(p);
}

/* ---- text ----------------------------------------------------------------------------------- */

typedef struct {
    const PangoFontDescription *font;
    double indent;
    int bold_len;   /* bytes at the start set in bold (a "Label:" prefix) */
    double r, g, b; /* text colour */
    gboolean bar;   /* a coloured bar left of every line (quotes, warnings) */
    double bar_r, bar_g, bar_b;
    double after; /* space below the paragraph */
} Style;

static const Style BODY = { NULL, 0, 0, 0.1, 0.1, 0.1, FALSE, 0, 0, 0, 4 };

static void bold_range(PangoAttrList *attrs, gsize start, gsize end)
{
    PangoAttribute *a = pango_attr_weight_new(PANGO_WEIGHT_BOLD);
    a->start_index = (guint)start;
    a->end_index = (guint)end;
    pango_attr_list_insert(attrs, a);
}

/* A paragraph, line by line so that long text flows onto the next pages. attrs (may be NULL):
 * more styling, by byte ranges of text. */
static void para_attrs(Pdf *p, const char *text, Style st, PangoAttrList *attrs)
{
    const PangoFontDescription *font = st.font ? st.font : p->body;
    PangoLayout *l = layout_new(p, text, font, p->w - st.indent);
    if (st.bold_len > 0 || attrs) {
        PangoAttrList *all = attrs ? pango_attr_list_copy(attrs) : pango_attr_list_new();
        if (st.bold_len > 0)
            bold_range(all, 0, (gsize)st.bold_len);
        pango_layout_set_attributes(l, all);
        pango_attr_list_unref(all);
    }
    PangoLayoutIter *it = pango_layout_get_iter(l);
    do {
        PangoRectangle logical;
        pango_layout_iter_get_line_extents(it, NULL, &logical);
        const double lh = logical.height / (double)PANGO_SCALE;
        const double base = (pango_layout_iter_get_baseline(it) - logical.y) / (double)PANGO_SCALE;
        need(p, lh);
        if (!p->dry) {
            PangoLayoutLine *line = pango_layout_iter_get_line_readonly(it);
            if (st.bar) {
                cairo_set_source_rgb(p->cr, st.bar_r, st.bar_g, st.bar_b);
                cairo_rectangle(p->cr, p->x0 + st.indent - 7, p->y, 2.5, lh);
                cairo_fill(p->cr);
            }
            cairo_set_source_rgb(p->cr, st.r, st.g, st.b);
            cairo_move_to(p->cr, p->x0 + st.indent + logical.x / (double)PANGO_SCALE, p->y + base);
            pango_cairo_show_layout_line(p->cr, line);
        }
        p->y += lh;
    } while (pango_layout_iter_next_line(it));
    pango_layout_iter_free(it);
    g_object_unref(l);
    p->y += st.after;
}

static void para(Pdf *p, const char *text, Style st)
{
    para_attrs(p, text, st, NULL);
}

static void heading(Pdf *p, const char *text, const PangoFontDescription *font, double before,
                    double keep_with_next)
{
    if (p->y > p->top + 0.5)
        p->y += before;
    PangoLayout *l = layout_new(p, text, font, p->w);
    need(p, layout_height(l) + keep_with_next);
    g_object_unref(l);
    Style st = BODY;
    st.font = font;
    st.after = 3;
    para(p, text, st);
}

/* "Label: value" with the label in bold. */
static void field(Pdf *p, const char *label, const char *value)
{
    g_autofree char *text = g_strdup_printf("%s: %s", label, value ? value : "");
    Style st = BODY;
    st.bold_len = (int)strlen(label) + 1;
    st.after = 1.5;
    para(p, text, st);
}

static void mono_field(Pdf *p, const char *label, const char *value)
{
    g_autofree char *text = g_strdup_printf("%s: %s", label, value ? value : "");
    Style st = BODY;
    st.font = p->mono;
    st.bold_len = (int)strlen(label) + 1;
    st.after = 1.5;
    para(p, text, st);
}

/* ---- pictures ------------------------------------------------------------------------------- */

typedef struct {
    const ClRpPicture *pic;
    const char *caption;
} Cell;

static double picture_height(const ClRpPicture *pic, double cw)
{
    if (!pic->rgb)
        return MIN(PICTURE_MAX_H, cw * 0.6);
    const double s = MIN(cw / pic->width, PICTURE_MAX_H / pic->height);
    return pic->height * s;
}

static void draw_picture(Pdf *p, const ClRpPicture *pic, double x, double y, double cw)
{
    if (pic->rgb) {
        const double s = MIN(cw / pic->width, PICTURE_MAX_H / pic->height);
        cairo_surface_t *surf = cl_rp_picture_surface(pic);
        if (!surf)
            return;
        cairo_save(p->cr);
        cairo_translate(p->cr, x, y);
        cairo_scale(p->cr, s, s);
        cairo_set_source_surface(p->cr, surf, 0, 0);
        /* small images blown up show their pixels rather than a blur */
        cairo_pattern_set_filter(cairo_get_source(p->cr),
                                 s > 2 ? CAIRO_FILTER_NEAREST : CAIRO_FILTER_GOOD);
        cairo_rectangle(p->cr, 0, 0, pic->width, pic->height);
        cairo_fill(p->cr);
        cairo_restore(p->cr);
        cairo_surface_destroy(surf);
        return;
    }
    /* the placeholder: a dashed box naming what is wrong */
    const double h = picture_height(pic, cw);
    cairo_save(p->cr);
    cairo_set_source_rgb(p->cr, 0.95, 0.95, 0.95);
    cairo_rectangle(p->cr, x, y, cw, h);
    cairo_fill_preserve(p->cr);
    const double dash[] = { 4, 3 };
    cairo_set_dash(p->cr, dash, 2, 0);
    cairo_set_line_width(p->cr, 1);
    cairo_set_source_rgb(p->cr, 0.45, 0.45, 0.45);
    cairo_stroke(p->cr);
    PangoLayout *l = layout_new(p, cl_rp_or(pic->placeholder, "not available"), p->body, cw - 16);
    pango_layout_set_alignment(l, PANGO_ALIGN_CENTER);
    double th = layout_height(l);
    cairo_set_source_rgb(p->cr, 0.25, 0.25, 0.25);
    cairo_move_to(p->cr, x + 8, y + MAX(4, (h - th) / 2));
    pango_cairo_show_layout(p->cr, l);
    g_object_unref(l);
    cairo_restore(p->cr);
}

/* The height cells() will take (rows and their spacing). */
static double cells_height(Pdf *p, const Cell *c, int n)
{
    const double cw = (p->w - GAP) / 2;
    double total = 0;
    for (int r = 0; r < n; r += 2) {
        double row_h = 0;
        for (int k = 0; k < MIN(2, n - r); k++) {
            PangoLayout *cap = layout_new(p, c[r + k].caption, p->small, cw);
            row_h = MAX(row_h, picture_height(c[r + k].pic, cw) + 4 + layout_height(cap));
            g_object_unref(cap);
        }
        total += row_h + 10;
    }
    return total;
}

/* Pictures two to a row, each with its caption below. */
static void cells(Pdf *p, const Cell *c, int n)
{
    const double cw = (p->w - GAP) / 2;
    for (int r = 0; r < n; r += 2) {
        const int m = MIN(2, n - r);
        double row_h = 0;
        PangoLayout *caps[2] = { NULL, NULL };
        double pic_h[2] = { 0, 0 };
        for (int k = 0; k < m; k++) {
            caps[k] = layout_new(p, c[r + k].caption, p->small, cw);
            pic_h[k] = picture_height(c[r + k].pic, cw);
            row_h = MAX(row_h, pic_h[k] + 4 + layout_height(caps[k]));
        }
        need(p, row_h);
        for (int k = 0; k < m && !p->dry; k++) {
            const double x = p->x0 + k * (cw + GAP);
            draw_picture(p, c[r + k].pic, x, p->y, cw);
            cairo_set_source_rgb(p->cr, 0.2, 0.2, 0.2);
            cairo_move_to(p->cr, x, p->y + pic_h[k] + 4);
            pango_cairo_show_layout(p->cr, caps[k]);
        }
        for (int k = 0; k < m; k++)
            g_object_unref(caps[k]);
        p->y += row_h + 10;
    }
}

/* ---- the document --------------------------------------------------------------------------- */

static void header(Pdf *p)
{
    const ClRpDoc *d = p->d;
    const ClCaseSummary *s = &d->c->summary;
    Style st = BODY;
    st.font = p->small;
    st.r = st.g = st.b = 0.35;
    st.after = 2;
    para(p, "ChangeLens report", st);
    heading(p, cl_rp_or(s->name, "(unnamed case)"), p->h1, 0, 40);
    g_autofree char *id = g_strdup_printf("%" G_GINT64_FORMAT, s->id);
    field(p, "Case id", id);
    g_autofree char *dates = g_strdup_printf("%s; updated %s", cl_rp_or(s->created_at, "unknown"),
                                             cl_rp_or(s->updated_at, "unknown"));
    field(p, "Created", dates);
    g_autofree char *status =
        d->current ? g_strdup_printf("%s (description version %u)",
                                     cl_desc_status_name(d->current->status), d->current->version)
                   : g_strdup("no description");
    field(p, "Status", status);
    g_autofree char *mods = g_strdup_printf("%s; %u image%s", cl_rp_or(s->modalities, "none"),
                                            d->images->len, d->images->len == 1 ? "" : "s");
    field(p, "Modalities", mods);
    g_autofree char *gen = g_strdup_printf("%s by %s", d->generated_at, d->generator);
    field(p, "Generated", gen);
    if (d->deidentified) {
        const char *how = "yes: DICOM PS3.15 Annex E basic profile with modified dates; the "
                          "patient's names and IDs removed from free text; every date shifted by "
                          "the same number of days; file names replaced by image-N names";
        field(p, "De-identified", how);
    } else {
        field(p, "De-identified", "no");
    }
    if (d->warnings->len) {
        heading(p, "Warnings", p->h2, 10, 30);
        for (guint i = 0; i < d->warnings->len; i++) {
            Style w = BODY;
            w.indent = 9;
            w.bar = TRUE;
            w.bar_r = 0.85, w.bar_g = 0.45, w.bar_b = 0.0;
            para(p, g_ptr_array_index(d->warnings, i), w);
        }
    }
}

static void description(Pdf *p)
{
    const ClRpDoc *d = p->d;
    heading(p, "Description", p->h2, 12, 40);
    g_autofree char *review = cl_rp_review_line(d);
    Style st = BODY;
    st.bold_len = (int)strlen(review);
    para(p, review, st);
    if (!d->current)
        return;
    Style q = BODY;
    q.font = p->big;
    q.indent = 9;
    q.bar = TRUE;
    q.bar_r = 0.2, q.bar_g = 0.4, q.bar_b = 0.75;
    q.after = 6;
    para(p, cl_rp_or(d->current->text, "(empty)"), q);
    g_autofree char *altered = cl_rp_altered_line(d);
    if (altered) {
        Style a = BODY;
        a.font = p->small;
        a.r = a.g = a.b = 0.35;
        para(p, altered, a);
    }
    if (d->generated) {
        g_autofree char *h = g_strdup_printf(
            "Generated by the model (version 1, run %" G_GINT64_FORMAT ", %s)",
            d->generated->run_id, cl_rp_or(d->generated->created_at, "unknown date"));
        heading(p, h, p->h3, 4, 24);
        Style g = q;
        g.font = p->body;
        g.r = g.g = g.b = 0.3;
        g.bar_r = g.bar_g = g.bar_b = 0.6;
        para(p, cl_rp_or(d->generated->text, "(empty)"), g);
    }
}

/* The four pictures of a comparison with their captions. */
typedef struct {
    char *caption[4];
    Cell cell[4];
} Quad;

static void quad_init(Quad *q, const ClRpDoc *d, const ClRpComparison *cmp)
{
    const ClRpImage *b = g_ptr_array_index(d->images, cmp->before);
    const ClRpImage *a = g_ptr_array_index(d->images, cmp->after);
    q->caption[0] = cl_rp_image_caption(b, "Before");
    q->caption[1] = cl_rp_image_caption(a, "After");
    q->caption[2] = cl_rp_overlay_caption(d, cmp);
    q->caption[3] = cl_rp_diff_caption(d, cmp);
    const ClRpPicture *pics[4] = { &b->view, &a->view, &cmp->overlay, &cmp->diff };
    for (int k = 0; k < 4; k++)
        q->cell[k] = (Cell){ pics[k], q->caption[k] };
}

static void quad_clear(Quad *q)
{
    for (int k = 0; k < 4; k++)
        g_free(q->caption[k]);
}

static void comparisons(Pdf *p)
{
    const ClRpDoc *d = p->d;
    const double page = p->bottom - p->top - 60;
    if (d->comparisons->len == 0) {
        heading(p, "Comparisons", p->h2, 12, 120);
        para(p, "The case has one image: there is nothing to compare it with.", BODY);
        const ClRpImage *ri = g_ptr_array_index(d->images, 0);
        g_autofree char *cap = cl_rp_image_caption(ri, "Image");
        Cell c = { &ri->view, cap };
        cells(p, &c, 1);
        return;
    }
    /* the section title stays with its first comparison, each comparison on one page when it
     * fits on one */
    Quad first;
    quad_init(&first, d, g_ptr_array_index(d->comparisons, 0));
    heading(p, "Comparisons", p->h2, 12, MIN(cells_height(p, first.cell, 4) + 24, page));
    quad_clear(&first);
    g_autofree char *view = cl_rp_view_line(d);
    if (view)
        para(p, view, BODY);
    for (guint i = 0; i < d->comparisons->len; i++) {
        const ClRpComparison *cmp = g_ptr_array_index(d->comparisons, i);
        g_autofree char *h =
            g_strdup_printf("Comparison %u: image %u → image %u%s", i + 1, cmp->before + 1,
                            cmp->after + 1, cmp->on_screen ? " (as on screen)" : "");
        Quad q;
        quad_init(&q, d, cmp);
        heading(p, h, p->h3, 8, MIN(cells_height(p, q.cell, 4), page));
        cells(p, q.cell, 4);
        quad_clear(&q);
    }
}

static void images(Pdf *p)
{
    const ClRpDoc *d = p->d;
    heading(p, "Images", p->h2, 12, 60);
    for (guint i = 0; i < d->images->len; i++) {
        const ClRpImage *ri = g_ptr_array_index(d->images, i);
        const ClCaseImage *img = ri->img;
        heading(p, ri->title, p->h3, 6, 30);
        g_autofree char *what =
            g_strdup_printf("%s%s%s, %u × %u pixels, frame %u of %u, %" G_GINT64_FORMAT " bytes",
                            cl_rp_or(img->format, "?"), img->modality ? " " : "",
                            img->modality ? img->modality : "", img->width, img->height,
                            img->frame + 1, MAX(img->n_frames, 1), img->file_size);
        field(p, "Format", what);
        if (!d->deidentified)
            field(p, "Path", cl_rp_or(img->path, "(none)"));
        field(p, "Acquired", cl_rp_or(img->acquired_at, "unknown"));
        g_autofree char *added =
            g_strdup_printf("%s; file state: %s", cl_rp_or(img->added_at, "unknown"),
                            cl_file_state_name(img->file_state));
        field(p, "Added", added);
        mono_field(p, "sha256", cl_rp_or(img->sha256, "unknown"));
        if (ri->key_labels)
            field(p, "★ Key image", cl_rp_or(ri->key_labels, "(no label)"));
        if (json_object_get_size(ri->meta)) {
            /* "Key value · Key value ..." with the keys in bold */
            GString *m = g_string_new("Metadata: ");
            PangoAttrList *attrs = pango_attr_list_new();
            bold_range(attrs, 0, m->len - 1);
            g_autoptr(GList) members = json_object_get_members(ri->meta);
            for (GList *l = members; l; l = l->next) {
                JsonNode *n = json_object_get_member(ri->meta, l->data);
                g_autofree char *v =
                    JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING
                        ? g_strdup(json_node_get_string(n))
                        : json_to_string(n, FALSE);
                if (l != members)
                    g_string_append(m, "  ·  ");
                gsize start = m->len;
                g_string_append(m, l->data);
                bold_range(attrs, start, m->len);
                g_string_append_printf(m, " %s", *v ? v : "“”");
            }
            Style st = BODY;
            st.font = p->small;
            st.r = st.g = st.b = 0.3;
            para_attrs(p, m->str, st, attrs);
            pango_attr_list_unref(attrs);
            g_string_free(m, TRUE);
        }
    }
}

static void provenance(Pdf *p)
{
    const ClRpDoc *d = p->d;
    heading(p, "Provenance", p->h2, 12, 60);
    if (d->c->runs->len == 0)
        para(p, "The model has not run on this case.", BODY);
    for (guint i = d->c->runs->len; i-- > 0;) {
        const ClCaseRun *r = g_ptr_array_index(d->c->runs, i);
        const gboolean made_current = d->current && d->current->run_id == r->id;
        g_autofree char *h = g_strdup_printf(
            "Run %" G_GINT64_FORMAT " (%s)%s%s", r->id, cl_rp_or(r->created_at, "unknown date"),
            r == d->latest_run ? ", the latest" : "",
            made_current ? ", generated the current description" : "");
        heading(p, h, p->h3, 6, 40);
        field(p, "Model", cl_rp_or(r->model_name, "unknown"));
        mono_field(p, "Model sha256", cl_rp_or(r->model_sha256, "unknown"));
        field(p, "Device", cl_rp_or(r->device, "unknown"));
        g_autofree char *seed = g_strdup_printf("%" G_GUINT64_FORMAT, r->seed);
        field(p, "Seed", seed);
        g_autofree char *t = cl_rp_timings(r);
        field(p, "Timings", t);
        g_autofree char *settings = cl_rp_compact_json(r->settings_json);
        mono_field(p, "Settings", cl_rp_or(settings, "{}"));
        g_autofree char *config = cl_rp_compact_json(r->model_config_json);
        mono_field(p, "Model config", cl_rp_or(config, "{}"));
    }
    heading(p, "Images' sha256", p->h3, 6, 30);
    for (guint i = 0; i < d->images->len; i++) {
        const ClRpImage *ri = g_ptr_array_index(d->images, i);
        g_autofree char *label = g_strdup_printf("%u. %s", i + 1, ri->name);
        mono_field(p, label, cl_rp_or(ri->img->sha256, "unknown"));
    }
}

static void history(Pdf *p)
{
    const ClRpDoc *d = p->d;
    heading(p, "Version history", p->h2, 12, 40);
    if (d->c->descriptions->len == 0)
        para(p, "No versions.", BODY);
    for (guint i = 0; i < d->c->descriptions->len; i++) {
        const ClCaseDescVersion *v = g_ptr_array_index(d->c->descriptions, i);
        g_autofree char *label = g_strdup_printf(
            "Description %" G_GINT64_FORMAT " v%u, %s, %s, %s", v->description_id, v->version,
            cl_desc_status_name(v->status), cl_rp_or(v->author, "unknown"),
            cl_rp_or(v->created_at, "unknown date"));
        g_autofree char *gist = cl_rp_short(v->text, 110);
        field(p, label, gist);
    }
}

static void notes(Pdf *p)
{
    const ClRpDoc *d = p->d;
    heading(p, "Notes", p->h2, 12, 40);
    if (d->c->notes->len == 0)
        para(p, "No notes.", BODY);
    for (guint i = 0; i < d->c->notes->len; i++) {
        const ClCaseNote *n = g_ptr_array_index(d->c->notes, i);
        const ClRpImage *ri = n->image_id ? cl_rp_doc_image_by_id(d, n->image_id) : NULL;
        g_autofree char *about =
            ri ? g_strdup_printf("about %s", ri->title) : g_strdup("about the case");
        g_autofree char *label = g_strdup_printf("%s, %s, %s", cl_rp_or(n->author, "unknown"),
                                                 cl_rp_or(n->created_at, "unknown date"), about);
        field(p, label, n->text);
    }
    heading(p, "Key images", p->h2, 12, 30);
    if (d->c->key_images->len == 0)
        para(p, "No key images.", BODY);
    for (guint i = 0; i < d->c->key_images->len; i++) {
        const ClCaseKeyImage *k = g_ptr_array_index(d->c->key_images, i);
        const ClRpImage *ri = cl_rp_doc_image_by_id(d, k->image_id);
        g_autofree char *label =
            g_strdup_printf("★ %s", ri ? ri->title : "an image not in the case");
        g_autofree char *v = g_strdup_printf("%s (marked %s)", cl_rp_or(k->label, "no label"),
                                             cl_rp_or(k->created_at, "unknown date"));
        field(p, label, v);
    }
}

static void document(Pdf *p)
{
    p->page = 1;
    p->y = p->top;
    header(p);
    description(p);
    comparisons(p);
    images(p);
    provenance(p);
    history(p);
    notes(p);
    end_page(p);
}

/* ---- output --------------------------------------------------------------------------------- */

typedef struct {
    int fd;
    int err; /* errno of the first failed write */
} Sink;

static cairo_status_t sink_write(void *closure, const unsigned char *data, unsigned int length)
{
    Sink *s = closure;
    while (length > 0) {
        ssize_t w = write(s->fd, data, length);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            s->err = w < 0 ? errno : EIO;
            return CAIRO_STATUS_WRITE_ERROR;
        }
        data += w;
        length -= (unsigned int)w;
    }
    return CAIRO_STATUS_SUCCESS;
}

static void fonts(Pdf *p)
{
    p->body = pango_font_description_from_string("Sans 9");
    p->small = pango_font_description_from_string("Sans 7.5");
    p->mono = pango_font_description_from_string("Monospace 7.5");
    p->h1 = pango_font_description_from_string("Sans Bold 17");
    p->h2 = pango_font_description_from_string("Sans Bold 13");
    p->h3 = pango_font_description_from_string("Sans Bold 10");
    p->big = pango_font_description_from_string("Sans 10.5");
}

static void fonts_free(Pdf *p)
{
    pango_font_description_free(p->body);
    pango_font_description_free(p->small);
    pango_font_description_free(p->mono);
    pango_font_description_free(p->h1);
    pango_font_description_free(p->h2);
    pango_font_description_free(p->h3);
    pango_font_description_free(p->big);
}

/* One pass over the document onto surface; the cairo status at the end. */
static cairo_status_t run_pass(Pdf *p, cairo_surface_t *surface)
{
    p->cr = cairo_create(surface);
    document(p);
    cairo_status_t st = cairo_status(p->cr);
    cairo_destroy(p->cr);
    p->cr = NULL;
    cairo_surface_finish(surface);
    if (st == CAIRO_STATUS_SUCCESS)
        st = cairo_surface_status(surface);
    return st;
}

static gboolean write_error(const char *path, int err, GError **error)
{
    g_autofree char *dir = g_path_get_dirname(path);
    if (err == ENOENT || err == ENOTDIR)
        g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_WRITE,
                    "cannot write the report to %s: the folder %s does not exist", path, dir);
    else if (err == EISDIR || err == ENOTEMPTY || err == EEXIST)
        g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_WRITE,
                    "cannot write the report to %s: it is a folder", path);
    else
        g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_WRITE,
                    "cannot write the report to %s: %s", path, g_strerror(err));
    return FALSE;
}

gboolean cl_rp_write_pdf(const ClRpDoc *d, const char *path, GError **error)
{
    Pdf p = { 0 };
    p.d = d;
    if (d->o.paper == CL_PAPER_LETTER)
        p.pw = 612, p.ph = 792;
    else
        p.pw = 595.28, p.ph = 841.89;
    p.x0 = MARGIN;
    p.w = p.pw - 2 * MARGIN;
    p.top = MARGIN;
    p.bottom = p.ph - MARGIN - FOOTER_SPACE + 10;
    fonts(&p);

    /* first pass: the page count for "Page N of M" (same surface type, so the same metrics) */
    p.dry = TRUE;
    cairo_surface_t *count = cairo_pdf_surface_create_for_stream(NULL, NULL, p.pw, p.ph);
    cairo_status_t st = run_pass(&p, count);
    cairo_surface_destroy(count);
    if (st != CAIRO_STATUS_SUCCESS) {
        fonts_free(&p);
        g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_RENDER, "cannot lay out the PDF: %s",
                    cairo_status_to_string(st));
        return FALSE;
    }
    p.n_pages = p.page;
    p.dry = FALSE;

    g_autofree char *dir = g_path_get_dirname(path);
    g_autofree char *base = g_path_get_basename(path);
    if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
        fonts_free(&p);
        return write_error(path, EISDIR, error);
    }
    g_autofree char *tmp = g_strdup_printf("%s%c.%s.XXXXXX", dir, G_DIR_SEPARATOR, base);
    Sink sink = { g_mkstemp_full(tmp, O_WRONLY | O_CLOEXEC, 0666), 0 };
    if (sink.fd < 0) {
        int err = errno;
        fonts_free(&p);
        return write_error(path, err, error);
    }
    cairo_surface_t *surface = cairo_pdf_surface_create_for_stream(sink_write, &sink, p.pw, p.ph);
    /* a de-identified report's title names no case: a name is free text its author chose, and
     * a PDF's title is shown where the pages are not (file managers, tabs, indexes) */
    g_autofree char *title = d->deidentified
                                 ? g_strdup("ChangeLens report (de-identified)")
                                 : g_strdup_printf("ChangeLens report: %s", d->c->summary.name);
    cairo_pdf_surface_set_metadata(surface, CAIRO_PDF_METADATA_TITLE, title);
    cairo_pdf_surface_set_metadata(surface, CAIRO_PDF_METADATA_CREATOR, d->generator);
    /* set, so that a de-identified report carries the shifted date rather than today's */
    cairo_pdf_surface_set_metadata(surface, CAIRO_PDF_METADATA_CREATE_DATE, d->generated_at);
    cairo_pdf_surface_set_metadata(surface, CAIRO_PDF_METADATA_MOD_DATE, d->generated_at);
    st = run_pass(&p, surface);
    cairo_surface_destroy(surface);
    fonts_free(&p);

    int err = sink.err;
    if (st == CAIRO_STATUS_SUCCESS && !err && fsync(sink.fd) != 0 && errno != EINVAL)
        err = errno;
    if (close(sink.fd) != 0 && !err && st == CAIRO_STATUS_SUCCESS)
        err = errno;
    if (st != CAIRO_STATUS_SUCCESS || err) {
        g_unlink(tmp);
        if (err || st == CAIRO_STATUS_WRITE_ERROR)
            return write_error(path, err ? err : EIO, error);
        g_set_error(error, CL_REPORT_ERROR, CL_REPORT_ERROR_RENDER, "cannot draw the PDF: %s",
                    cairo_status_to_string(st));
        return FALSE;
    }
    if (g_rename(tmp, path) != 0) {
        err = errno;
        g_unlink(tmp);
        return write_error(path, err, error);
    }
    return TRUE;
}
