/* case.c - the case records of casedb.h: names, freeing, lookups in a loaded case. */
#include "casedb/casedb.h"

#include <string.h>

static const char *const status_names[] = { "draft", "accepted", "rejected" };

const char *cl_desc_status_name(ClDescStatus s)
{
    return (guint)s < G_N_ELEMENTS(status_names) ? status_names[s] : "draft";
}

gboolean cl_desc_status_parse(const char *name, ClDescStatus *out)
{
    for (guint i = 0; name && i < G_N_ELEMENTS(status_names); i++)
        if (g_ascii_strcasecmp(name, status_names[i]) == 0) {
            *out = (ClDescStatus)i;
            return TRUE;
        }
    return FALSE;
}

const char *cl_file_state_name(ClFileState s)
{
    static const char *const names[] = { "unchecked", "ok", "missing", "changed", "unreadable" };
    return (guint)s < G_N_ELEMENTS(names) ? names[s] : "unchecked";
}

void cl_case_summary_free(ClCaseSummary *s)
{
    if (!s)
        return;
    g_free(s->name);
    g_free(s->created_at);
    g_free(s->updated_at);
    g_free(s->modalities);
    g_free(s);
}

void cl_case_image_clear(ClCaseImage *img)
{
    if (!img)
        return;
    g_free(img->path);
    g_free(img->sha256);
    g_free(img->format);
    g_free(img->modality);
    g_free(img->acquired_at);
    g_free(img->metadata_json);
    g_free(img->added_at);
    memset(img, 0, sizeof *img);
}

void cl_case_image_free(ClCaseImage *img)
{
    if (!img)
        return;
    cl_case_image_clear(img);
    g_free(img);
}

void cl_case_run_free(ClCaseRun *run)
{
    if (!run)
        return;
    g_free(run->created_at);
    g_free(run->model_name);
    g_free(run->model_sha256);
    g_free(run->model_config_json);
    g_free(run->device);
    g_free(run->settings_json);
    g_free(run);
}

void cl_case_desc_version_free(ClCaseDescVersion *v)
{
    if (!v)
        return;
    g_free(v->text);
    g_free(v->author);
    g_free(v->created_at);
    g_free(v);
}

void cl_case_heatmap_free(ClCaseHeatmap *hm)
{
    if (!hm)
        return;
    g_free(hm->kind);
    g_free(hm->data);
    g_free(hm);
}

static void note_free(gpointer p)
{
    ClCaseNote *n = p;
    g_free(n->author);
    g_free(n->text);
    g_free(n->created_at);
    g_free(n);
}

static void key_image_free(gpointer p)
{
    ClCaseKeyImage *k = p;
    g_free(k->label);
    g_free(k->created_at);
    g_free(k);
}

static void audit_free(gpointer p)
{
    ClCaseAudit *a = p;
    g_free(a->at);
    g_free(a->actor);
    g_free(a->action);
    g_free(a->detail_json);
    g_free(a);
}

void cl_case_search_hit_free(ClCaseSearchHit *h)
{
    if (!h)
        return;
    g_free(h->case_name);
    g_free(h->field);
    g_free(h->snippet);
    g_free(h);
}

ClCase *cl_case_new_empty(void)
{
    ClCase *c = g_new0(ClCase, 1);
    c->images = g_ptr_array_new_with_free_func((GDestroyNotify)cl_case_image_free);
    c->runs = g_ptr_array_new_with_free_func((GDestroyNotify)cl_case_run_free);
    c->descriptions = g_ptr_array_new_with_free_func((GDestroyNotify)cl_case_desc_version_free);
    c->heatmaps = g_ptr_array_new_with_free_func((GDestroyNotify)cl_case_heatmap_free);
    c->notes = g_ptr_array_new_with_free_func(note_free);
    c->key_images = g_ptr_array_new_with_free_func(key_image_free);
    c->audit = g_ptr_array_new_with_free_func(audit_free);
    return c;
}

void cl_case_free(ClCase *c)
{
    if (!c)
        return;
    g_free(c->summary.name);
    g_free(c->summary.created_at);
    g_free(c->summary.updated_at);
    g_free(c->summary.modalities);
    g_clear_pointer(&c->images, g_ptr_array_unref);
    g_clear_pointer(&c->runs, g_ptr_array_unref);
    g_clear_pointer(&c->descriptions, g_ptr_array_unref);
    g_clear_pointer(&c->heatmaps, g_ptr_array_unref);
    g_clear_pointer(&c->notes, g_ptr_array_unref);
    g_clear_pointer(&c->key_images, g_ptr_array_unref);
    g_clear_pointer(&c->audit, g_ptr_array_unref);
    g_free(c);
}

const ClCaseDescVersion *cl_case_current_description(const ClCase *c)
{
    /* the latest version of the latest description: descriptions are oldest first, and a
     * description's versions all come after its creation, so the highest description id wins,
     * then the highest version */
    const ClCaseDescVersion *best = NULL;
    for (guint i = 0; c && c->descriptions && i < c->descriptions->len; i++) {
        const ClCaseDescVersion *v = g_ptr_array_index(c->descriptions, i);
        if (!best || v->description_id > best->description_id ||
            (v->description_id == best->description_id && v->version > best->version))
            best = v;
    }
    return best;
}

const ClCaseDescVersion *cl_case_generated_version(const ClCase *c, const ClCaseDescVersion *v)
{
    if (!c || !v || v->run_id == 0)
        return NULL;
    for (guint i = 0; i < c->descriptions->len; i++) {
        const ClCaseDescVersion *w = g_ptr_array_index(c->descriptions, i);
        if (w->description_id == v->description_id && w->version == 1)
            return w;
    }
    return NULL;
}

const ClCaseRun *cl_case_find_run(const ClCase *c, gint64 run_id)
{
    for (guint i = 0; c && c->runs && i < c->runs->len; i++) {
        const ClCaseRun *r = g_ptr_array_index(c->runs, i);
        if (r->id == run_id)
            return r;
    }
    return NULL;
}

const ClCaseRun *cl_case_latest_run(const ClCase *c)
{
    const ClCaseRun *best = NULL;
    for (guint i = 0; c && c->runs && i < c->runs->len; i++) {
        const ClCaseRun *r = g_ptr_array_index(c->runs, i);
        if (!best || r->id > best->id)
            best = r;
    }
    return best;
}

const ClCaseImage *cl_case_find_image(const ClCase *c, gint64 image_id)
{
    for (guint i = 0; c && c->images && i < c->images->len; i++) {
        const ClCaseImage *img = g_ptr_array_index(c->images, i);
        if (img->id == image_id)
            return img;
    }
    return NULL;
}

const ClCaseHeatmap *cl_case_find_heatmap(const ClCase *c, gint64 run_id, gint64 image_id,
                                          int layer)
{
    for (guint i = 0; c && c->heatmaps && i < c->heatmaps->len; i++) {
        const ClCaseHeatmap *h = g_ptr_array_index(c->heatmaps, i);
        if (h->run_id == run_id && h->image_id == image_id && h->layer == layer)
            return h;
    }
    return NULL;
}

gboolean cl_case_has_dicom(const ClCase *c)
{
    for (guint i = 0; c && c->images && i < c->images->len; i++) {
        const ClCaseImage *img = g_ptr_array_index(c->images, i);
        if (img->format && g_ascii_strcasecmp(img->format, "DICOM") == 0)
            return TRUE;
    }
    return FALSE;
}
