/* cl-window-cases.c - ClWindow's cases: the sidebar's list (search, most recent first), opening
 * a case, making a case of newly opened files, recording model runs, the report export, and the
 * review of the description (save as a new version, accept, reject, every version kept and
 * browsable; an accepted one read-only until Edit asks). Edits are never lost and never kept by
 * themselves: switching case, opening files or closing the window with an edited text asks
 * whether to save it as a version, drop it or stay. */
#include "cl-window-private.h"

#include <glib/gi18n.h>
#include <math.h>
#include <string.h>

#include "casedb/caserun.h"
#include "cl-config.h"
#include "model/preprocess.h"
#include "report/report.h"
#include "worker/worker.h"

/* ---- the case read back ---- */

static const char *status_label(ClDescStatus s)
{
    switch (s) {
    case CL_DESC_ACCEPTED: return _("accepted");
    case CL_DESC_REJECTED: return _("rejected");
    default: return _("draft");
    }
}

/* The versions of the case's current description, oldest first (borrowed pointers). */
static GPtrArray *current_versions(const ClCase *c)
{
    GPtrArray *out = g_ptr_array_new();
    const ClCaseDescVersion *cur = c ? cl_case_current_description(c) : NULL;
    for (guint i = 0; cur && i < c->descriptions->len; i++) {
        const ClCaseDescVersion *v = g_ptr_array_index(c->descriptions, i);
        if (v->description_id == cur->description_id)
            g_ptr_array_add(out, (gpointer)v);
    }
    return out;
}

static gboolean reload_case(ClWindow *self, GError **error)
{
    gint64 id = self->current_case->summary.id;
    ClCase *c = cl_casedb_get_case(self->db, id, CL_CASE_HEATMAP_DATA, error);
    if (!c)
        return FALSE;
    cl_case_free(self->current_case);
    self->current_case = c;
    return TRUE;
}

/* ---- the list ---- */

void cl_window_cases_refresh_list(ClWindow *self)
{
    if (!self->db)
        return;
    cl_case_sidebar_begin(self->case_sidebar);
    const char *query = cl_case_sidebar_get_query(self->case_sidebar);
    g_autoptr(GError) error = NULL;
    if (!query || !*query) {
        g_autoptr(GPtrArray) list = cl_casedb_list(self->db, &error);
        for (guint i = 0; list && i < list->len; i++) {
            const ClCaseSummary *s = g_ptr_array_index(list, i);
            /* TRANSLATORS: case list subtitle: modalities, number of images, review status */
            g_autofree char *sub = g_strdup_printf(
                ngettext("%s · %u image · %s", "%s · %u images · %s", s->n_images),
                s->modalities && *s->modalities ? s->modalities : _("no images"), s->n_images,
                s->has_description ? status_label(s->status) : _("not described"));
            cl_case_sidebar_add(self->case_sidebar, s->id, s->name, sub);
        }
    } else {
        g_autoptr(GPtrArray) hits = cl_casedb_search(self->db, query, 200, &error);
        for (guint i = 0; hits && i < hits->len; i++) {
            const ClCaseSearchHit *h = g_ptr_array_index(hits, i);
            cl_case_sidebar_add(self->case_sidebar, h->case_id, h->case_name, h->snippet);
        }
    }
    if (error) {
        /* TRANSLATORS: the case database could not be read; %s says why */
        g_autofree char *text = g_strdup_printf(_("Could not list the cases: %s"), error->message);
        cl_window_toast(self, text);
    }
    cl_case_sidebar_end(self->case_sidebar, cl_window_get_case_id(self));
}

/* A case picked in the sidebar (after the list is done with its row). */
void cl_window_cases_activated(ClWindow *self, gint64 id)
{
    if (id != cl_window_get_case_id(self))
        cl_window_open_case(self, id);
}

/* ---- the description's review ---- */

const ClCaseImage *cl_window_cases_image_at(ClWindow *self, guint index)
{
    const ClCase *c = self->current_case;
    if (!c || c->summary.id != self->sequence_case_id || !self->sequence ||
        self->sequence->len != c->images->len || index >= c->images->len)
        return NULL;
    return g_ptr_array_index(c->images, index);
}

/* A stored heat map grid as the model's (image 2 of a pair; max over its finite values). */
static ClHeatmap *heatmap_from_case(const ClCaseHeatmap *h, ClHeatmapSource source, int layer)
{
    ClHeatmap *hm = g_new0(ClHeatmap, 1);
    hm->source = source;
    hm->image_index = 1;
    hm->layer = layer;
    hm->width = (int)h->grid_w, hm->height = (int)h->grid_h;
    hm->values = g_memdup2(h->data, sizeof(float) * h->grid_w * h->grid_h);
    for (guint i = 0; i < h->grid_w * h->grid_h; i++)
        if (isfinite(hm->values[i]))
            hm->max = MAX(hm->max, hm->values[i]);
    return hm;
}

/* The latest run's heat map of the pair's later image, if that run read it. */
static void apply_case_heat(ClWindow *self)
{
    const ClCase *c = self->current_case;
    const ClCaseRun *run = c ? cl_case_latest_run(c) : NULL;
    const ClCaseImage *img = cl_window_cases_image_at(self, self->pair_b);
    const ClCaseHeatmap *h = run && img ? cl_case_find_heatmap(c, run->id, img->id, -1) : NULL;
    if (!h || !h->data || h->grid_w == 0 || h->grid_h == 0 || h->input_size <= 0)
        return;
    ClHeatmap *hm = heatmap_from_case(
        h, g_strcmp0(h->kind, "delta") == 0 ? CL_HEATMAP_DELTA : CL_HEATMAP_UPDATE_NORM, -1);
    ClLetterbox letterbox;
    cl_letterbox_init(&letterbox, img->width, img->height, h->input_size);
    /* and the run's map of each encoder block, when it kept them */
    g_autoptr(GPtrArray) layers = g_ptr_array_new_with_free_func((GDestroyNotify)cl_heatmap_free);
    for (int l = 0; l < 64; l++) {
        const ClCaseHeatmap *lh = cl_case_find_heatmap(c, run->id, img->id, l);
        if (!lh || !lh->data || lh->grid_w != h->grid_w || lh->grid_h != h->grid_h)
            break;
        g_ptr_array_add(layers, heatmap_from_case(lh, CL_HEATMAP_UPDATE_NORM, l));
    }
    /* a stored map is drawn on the later image as it is (not in the earlier one's frame) */
    cl_compare_view_set_heatmap(self->compare_view, hm, layers, &letterbox, FALSE);
}

void cl_window_cases_pair_changed(ClWindow *self)
{
    apply_case_heat(self);
    cl_window_update_actions(self);
}

gboolean cl_window_cases_reorder(ClWindow *self, guint from, guint to)
{
    const ClCase *c = self->current_case;
    if (!self->db || !c || c->summary.id != self->sequence_case_id || !self->sequence ||
        self->sequence->len != c->images->len)
        return TRUE; /* not a case's sequence: only the window's order changes */
    guint n = c->images->len;
    g_autofree gint64 *ids = g_new(gint64, n);
    for (guint i = 0; i < n; i++)
        ids[i] = ((ClCaseImage *)g_ptr_array_index(c->images, i))->id;
    gint64 moved = ids[from];
    if (from < to)
        memmove(ids + from, ids + from + 1, sizeof(gint64) * (to - from));
    else
        memmove(ids + to + 1, ids + to, sizeof(gint64) * (from - to));
    ids[to] = moved;
    g_autoptr(GError) error = NULL;
    if (!cl_casedb_images_reorder(self->db, c->summary.id, ids, n, &error)) {
        g_autofree char *msg = g_strdup_printf(_("The new order was not kept: %s"), error->message);
        cl_window_toast(self, msg);
        return FALSE;
    }
    /* the order is kept; the window follows it even if the case cannot be read back now */
    if (!reload_case(self, &error)) {
        g_autofree char *msg = g_strdup_printf(_("Could not open the case: %s"), error->message);
        cl_window_toast(self, msg);
    }
    cl_window_cases_refresh_list(self);
    return TRUE;
}

/* The line about a version: number, status, author, time. */
static char *version_line(const ClCaseDescVersion *v)
{
    /* TRANSLATORS: the description shown: version, status, author, time */
    return g_strdup_printf(_("Version %u · %s · %s · %s"), v->version, status_label(v->status),
                           v->author, v->created_at);
}

static GtkTextBuffer *editor(ClWindow *self)
{
    return cl_description_panel_get_buffer(self->description_panel);
}

/* Shows the case's description, its versions and its last heat map. keep_text: leave the
 * editor's text as it is (it is what was just saved or generated). */
/* The case's notes and key images in the panel, oldest first. */
static void show_notes(ClWindow *self)
{
    const ClCase *c = self->current_case;
    g_autoptr(GString) s = g_string_new(NULL);
    for (guint i = 0; c && c->notes && i < c->notes->len; i++) {
        const ClCaseNote *n = g_ptr_array_index(c->notes, i);
        /* TRANSLATORS: one note of a case: when, by whom, what */
        g_string_append_printf(s, _("%sNote · %s · %s: %s"), s->len ? "\n" : "",
                               n->created_at ? n->created_at : "", n->author ? n->author : "",
                               n->text ? n->text : "");
    }
    for (guint i = 0; c && c->key_images && i < c->key_images->len; i++) {
        const ClCaseKeyImage *k = g_ptr_array_index(c->key_images, i);
        /* TRANSLATORS: an image of the case marked as a key image, and its label */
        g_string_append_printf(s, _("%sKey image: %s"), s->len ? "\n" : "",
                               k->label ? k->label : "");
    }
    cl_description_panel_set_notes(self->description_panel, s->str);
}

gboolean cl_window_cases_add_note(ClWindow *self, const char *text)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    g_autofree char *t = g_strstrip(g_strdup(text ? text : ""));
    if (!self->db || !self->current_case || !*t)
        return FALSE;
    g_autoptr(GError) error = NULL;
    if (!cl_casedb_note_add(self->db, self->current_case->summary.id, 0, t, NULL, &error) ||
        !reload_case(self, &error)) {
        /* TRANSLATORS: a note could not be stored; the reason follows */
        g_autofree char *msg = g_strdup_printf(_("The note was not saved: %s"), error->message);
        cl_window_toast(self, msg);
        return FALSE;
    }
    show_notes(self);
    cl_window_toast(self, _("Note added to the case"));
    return TRUE;
}

gboolean cl_window_cases_mark_key_image(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    const ClCase *c = self->current_case;
    if (!self->db || !c)
        return FALSE;
    /* the later item as one of the case's images (not a frame of a multi-frame file) */
    const ClCaseImage *img = cl_window_cases_image_at(self, self->pair_b);
    if (!img) {
        /* TRANSLATORS: k pressed where the later item is not one of the case's own images */
        cl_window_toast(self, _("Only one of the case's images can be a key image, not a "
                                "frame of a multi-frame file"));
        return FALSE;
    }
    g_autofree char *label = g_path_get_basename(img->path ? img->path : "image");
    g_autoptr(GError) error = NULL;
    if (!cl_casedb_key_image_add(self->db, c->summary.id, img->id, label, NULL, &error) ||
        !reload_case(self, &error)) {
        g_autofree char *msg =
            g_strdup_printf(_("The key image was not saved: %s"), error->message);
        cl_window_toast(self, msg);
        return FALSE;
    }
    show_notes(self);
    /* TRANSLATORS: the later image shown was marked as a key image of the case */
    g_autofree char *msg = g_strdup_printf(_("“%s” marked as a key image"), label);
    cl_window_toast(self, msg);
    return TRUE;
}

static void apply_case_state(ClWindow *self, gboolean keep_text)
{
    ClDescriptionPanel *panel = self->description_panel;
    const ClCase *c = self->current_case;
    g_autoptr(GPtrArray) versions = current_versions(c);
    const ClCaseDescVersion *cur =
        versions->len ? g_ptr_array_index(versions, versions->len - 1) : NULL;
    g_autoptr(GPtrArray) items = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < versions->len; i++) {
        const ClCaseDescVersion *v = g_ptr_array_index(versions, i);
        /* TRANSLATORS: one version of a description: number, review status, author */
        g_ptr_array_add(items, g_strdup_printf(_("Version %u · %s · %s"), v->version,
                                               status_label(v->status), v->author));
    }
    g_ptr_array_add(items, NULL);
    self->shown_version = G_MAXUINT;
    cl_description_panel_set_versions(panel, (const char *const *)items->pdata);
    g_autofree char *label = cur ? version_line(cur) : g_strdup(c ? _("Not described yet") : "");
    cl_description_panel_set_version_label(panel, label);
    if (!keep_text) {
        cl_description_panel_set_text(panel, cur ? cur->text : "");
        gtk_text_buffer_set_modified(editor(self), FALSE);
        cl_description_panel_set_stage(panel, "");
        cl_description_panel_set_model(panel, "");
        const ClCaseRun *run = c ? cl_case_latest_run(c) : NULL;
        if (run) {
            /* TRANSLATORS: which model run the description comes from */
            g_autofree char *m = g_strdup_printf(_("Model: %s · %s · %s"), run->model_name,
                                                 run->device, run->created_at);
            cl_description_panel_set_model(panel, m);
        }
    }
    cl_window_cases_update_editor(self);
    show_notes(self);
    cl_description_panel_set_review_visible(panel, c != NULL);
    if (cur)
        gtk_revealer_set_reveal_child(self->panel_revealer, TRUE);

    if (!keep_text)
        apply_case_heat(self);
    cl_window_update_actions(self);
}

gboolean cl_window_cases_save(ClWindow *self)
{
    if (!self->db || !self->current_case || cl_window_get_describing(self))
        return TRUE;
    g_autofree char *text = cl_description_panel_get_text(self->description_panel);
    const ClCaseDescVersion *cur = cl_case_current_description(self->current_case);
    if ((cur && strcmp(cur->text, text) == 0) || (!cur && !*text)) {
        gtk_text_buffer_set_modified(editor(self), FALSE);
        return TRUE;
    }
    g_autoptr(GError) error = NULL;
    gint64 vid = 0;
    if (!cl_casedb_description_edit(self->db, self->current_case->summary.id, text, NULL,
                                    cur ? cur->id : 0, &vid, &error) &&
        g_error_matches(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_CONFLICT)) {
        /* another reviewer saved first: theirs stays the current version, this text stays in
         * the editor (modified), and the case is shown as it now is, so that saving again is
         * a choice made seeing their version */
        g_autoptr(GError) reload_error = NULL;
        if (reload_case(self, &reload_error))
            apply_case_state(self, TRUE);
        const ClCaseDescVersion *now = cl_case_current_description(self->current_case);
        /* TRANSLATORS: a reviewer's edit met another reviewer's newer version: %1$s is who,
         * %2$u the version they saved */
        g_autofree char *msg = g_strdup_printf(
            _("%1$s saved version %2$u while you were editing, so your text was not saved. It "
              "is still in the editor; theirs is in the history. Save again to make yours the "
              "next version."),
            now ? now->author : _("Another reviewer"), now ? now->version : 0);
        cl_window_toast(self, msg);
        cl_window_cases_refresh_list(self);
        return FALSE;
    }
    if (error) {
        /* TRANSLATORS: an edit could not be kept; %s says why */
        g_autofree char *msg = g_strdup_printf(
            _("The description was not saved: %s. Your text is still in the editor."),
            error->message);
        cl_window_toast(self, msg);
        return FALSE;
    }
    gtk_text_buffer_set_modified(editor(self), FALSE);
    if (reload_case(self, &error))
        apply_case_state(self, TRUE);
    cl_window_cases_refresh_list(self);
    return TRUE;
}

gboolean cl_window_cases_save_pending(ClWindow *self)
{
    if (self->db && self->current_case && gtk_text_buffer_get_modified(editor(self)))
        return cl_window_cases_save(self);
    return TRUE;
}

/* ---- the reviewer's name: asked once, at the first sign-off ---- */

/* The reviewer-name setting goes to the database as the author of edits and sign-offs. */
static void sync_reviewer(ClWindow *self)
{
    if (!self->db || !self->settings)
        return;
    g_autofree char *name = g_settings_get_string(self->settings, "reviewer-name");
    g_strstrip(name);
    if (*name)
        cl_casedb_set_actor(self->db, name);
}

static void set_status_now(ClWindow *self, ClDescStatus status);

static void on_reviewer_changed(GtkEditable *entry, AdwMessageDialog *dialog)
{
    g_autofree char *name = g_strstrip(g_strdup(gtk_editable_get_text(entry)));
    adw_message_dialog_set_response_enabled(dialog, "sign", *name != '\0');
}

static void on_reviewer_response(AdwMessageDialog *dialog, const char *response, ClWindow *self)
{
    if (!g_str_equal(response, "sign"))
        return;
    GtkEditable *entry = GTK_EDITABLE(adw_message_dialog_get_extra_child(dialog));
    g_autofree char *name = g_strstrip(g_strdup(gtk_editable_get_text(entry)));
    if (!*name || !self->settings)
        return;
    g_settings_set_string(self->settings, "reviewer-name", name);
    sync_reviewer(self);
    set_status_now(self, GPOINTER_TO_INT(g_object_get_data(G_OBJECT(dialog), "cl-status")));
}

/* Asks for the reviewer's name (kept in the reviewer-name setting), then signs off. */
static void ask_reviewer(ClWindow *self, ClDescStatus status)
{
    /* TRANSLATORS: asked once, before the first accept or reject */
    GtkWidget *d = adw_message_dialog_new(
        GTK_WINDOW(self), _("Your Name as the Reviewer"),
        _("It is recorded with the descriptions you accept, reject or edit. It is asked once; "
          "Preferences can change it."));
    GtkWidget *entry = gtk_entry_new();
    gtk_entry_set_placeholder_text(GTK_ENTRY(entry), _("Name"));
    gtk_entry_set_activates_default(GTK_ENTRY(entry), TRUE);
    const char *real = g_get_real_name();
    if (real && *real && g_strcmp0(real, "Unknown") != 0)
        gtk_editable_set_text(GTK_EDITABLE(entry), real);
    adw_message_dialog_set_extra_child(ADW_MESSAGE_DIALOG(d), entry);
    adw_message_dialog_add_responses(ADW_MESSAGE_DIALOG(d), "cancel", _("_Cancel"), "sign",
                                     status == CL_DESC_REJECTED ? _("_Reject") : _("_Accept"),
                                     NULL);
    adw_message_dialog_set_response_appearance(ADW_MESSAGE_DIALOG(d), "sign",
                                               ADW_RESPONSE_SUGGESTED);
    adw_message_dialog_set_default_response(ADW_MESSAGE_DIALOG(d), "sign");
    adw_message_dialog_set_close_response(ADW_MESSAGE_DIALOG(d), "cancel");
    gtk_window_set_destroy_with_parent(GTK_WINDOW(d), TRUE);
    g_object_set_data(G_OBJECT(d), "cl-status", GINT_TO_POINTER(status));
    g_signal_connect(entry, "changed", G_CALLBACK(on_reviewer_changed), d);
    on_reviewer_changed(GTK_EDITABLE(entry), ADW_MESSAGE_DIALOG(d));
    g_signal_connect_object(d, "response", G_CALLBACK(on_reviewer_response), self, 0);
    gtk_window_present(GTK_WINDOW(d));
    gtk_widget_grab_focus(entry);
}

void cl_window_cases_set_status(ClWindow *self, ClDescStatus status)
{
    if (!self->db || !self->current_case)
        return;
    g_autofree char *name =
        self->settings ? g_settings_get_string(self->settings, "reviewer-name") : NULL;
    if (name && !*g_strstrip(name)) {
        ask_reviewer(self, status);
        return;
    }
    set_status_now(self, status);
}

static void set_status_now(ClWindow *self, ClDescStatus status)
{
    if (!self->db || !self->current_case || !cl_window_cases_save(self))
        return;
    g_autoptr(GError) error = NULL;
    /* the version on the screen is the one signed off: another reviewer's newer text is not */
    const ClCaseDescVersion *seen = cl_case_current_description(self->current_case);
    if (!cl_casedb_description_set_status(self->db, self->current_case->summary.id, status, NULL,
                                          seen ? seen->id : 0, NULL, &error)) {
        g_autofree char *msg =
            g_strdup_printf(_("Could not record the review: %s"), error->message);
        cl_window_toast(self, msg);
        if (g_error_matches(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_CONFLICT)) {
            g_autoptr(GError) reload_error = NULL;
            if (reload_case(self, &reload_error))
                apply_case_state(self, FALSE); /* the new version, to read before signing */
            cl_window_cases_refresh_list(self);
        }
        return;
    }
    self->reopened = FALSE;
    if (reload_case(self, &error))
        apply_case_state(self, TRUE);
    cl_window_cases_refresh_list(self);
    /* signed off: the keys are the images' again (0 fits, not types a zero) */
    if (status == CL_DESC_ACCEPTED)
        gtk_widget_grab_focus(GTK_WIDGET(cl_window_get_view(self, 0)));
}

/* ---- the editor's state, and asking before an edit is kept or dropped ---- */

gboolean cl_window_cases_locked(ClWindow *self)
{
    const ClCaseDescVersion *cur =
        self->current_case ? cl_case_current_description(self->current_case) : NULL;
    return cur && cur->status == CL_DESC_ACCEPTED && !self->reopened;
}

void cl_window_cases_update_editor(ClWindow *self)
{
    gboolean locked = self->db && cl_window_cases_locked(self);
    cl_description_panel_set_locked(self->description_panel, locked);
    cl_description_panel_set_editable(self->description_panel,
                                      !locked && !cl_window_get_describing(self) &&
                                          self->shown_version == G_MAXUINT);
}

gboolean cl_window_cases_has_unsaved(ClWindow *self)
{
    if (!self->db || !self->current_case || cl_window_get_describing(self) ||
        !gtk_text_buffer_get_modified(editor(self)))
        return FALSE;
    g_autofree char *text = cl_description_panel_get_text(self->description_panel);
    const ClCaseDescVersion *cur = cl_case_current_description(self->current_case);
    return cur ? strcmp(cur->text, text) != 0 : *text != '\0';
}

typedef struct {
    ClWindow *self;
    ClWindowThen then;
    gpointer data;
    GDestroyNotify destroy;
} Confirm;

static void confirm_free(gpointer p, GClosure *closure)
{
    Confirm *c = p;
    if (c->destroy)
        c->destroy(c->data);
    g_free(c);
}

static void on_unsaved_response(AdwMessageDialog *dialog, const char *response, Confirm *c)
{
    /* "keep": go on with the edit left in the editor, unsaved (Export the Saved Version) */
    ClWindow *self = c->self;
    if (self->confirm_dialog) {
        g_object_remove_weak_pointer(G_OBJECT(self->confirm_dialog),
                                     (gpointer *)&self->confirm_dialog);
        self->confirm_dialog = NULL;
    }
    gboolean go = FALSE;
    if (g_str_equal(response, "save")) {
        go = cl_window_cases_save(self);
    } else if (g_str_equal(response, "discard")) {
        gtk_text_buffer_set_modified(editor(self), FALSE);
        go = TRUE;
    } else if (g_str_equal(response, "keep")) {
        go = TRUE;
    }
    if (go)
        c->then(self, c->data);
    else
        cl_window_cases_refresh_list(self); /* the list marks the case still shown */
}

void cl_window_cases_confirm_unsaved(ClWindow *self, ClWindowThen then, gpointer data,
                                     GDestroyNotify destroy)
{
    cl_window_cases_confirm_unsaved_for(self, CL_UNSAVED_LEAVE, then, data, destroy);
}

void cl_window_cases_confirm_unsaved_for(ClWindow *self, ClUnsavedAsk ask, ClWindowThen then,
                                         gpointer data, GDestroyNotify destroy)
{
    if (!cl_window_cases_has_unsaved(self)) {
        then(self, data);
        if (destroy)
            destroy(data);
        return;
    }
    if (self->confirm_dialog) {
        /* one question at a time: the newer request waits for none */
        gtk_window_present(self->confirm_dialog);
        if (destroy)
            destroy(data);
        return;
    }
    /* TRANSLATORS: the description was edited and another case, files or closing follow */
    GtkWidget *d =
        adw_message_dialog_new(GTK_WINDOW(self), _("Keep the Edited Description?"), NULL);
    const char *name = self->current_case->summary.name;
    switch (ask) {
    case CL_UNSAVED_DESCRIBE:
        adw_message_dialog_format_body(
            ADW_MESSAGE_DIALOG(d),
            /* TRANSLATORS: before a model run replaces an edited description */
            _("The description of “%s” was edited. The model's new text replaces it: saving "
              "first keeps your text as a new version (a draft, not signed)."),
            name);
        break;
    case CL_UNSAVED_EXPORT:
        adw_message_dialog_format_body(
            ADW_MESSAGE_DIALOG(d),
            /* TRANSLATORS: before a report is written while the description has an unsaved edit */
            _("The description of “%s” was edited but not saved. The report shows the saved "
              "version, unless you save your text first as a new version (a draft, not signed)."),
            name);
        break;
    default:
        adw_message_dialog_format_body(ADW_MESSAGE_DIALOG(d),
                                       _("The description of “%s” was edited. Saving keeps the "
                                         "text as a new version (a draft)."),
                                       name);
        break;
    }
    if (ask == CL_UNSAVED_EXPORT) {
        adw_message_dialog_add_responses(ADW_MESSAGE_DIALOG(d), "cancel", _("_Cancel"), "keep",
                                         _("Export the Saved _Version"), "save",
                                         _("_Save and Export"), NULL);
    } else {
        adw_message_dialog_add_responses(ADW_MESSAGE_DIALOG(d), "cancel", _("_Cancel"), "discard",
                                         _("_Discard"), "save", _("_Save"), NULL);
        adw_message_dialog_set_response_appearance(ADW_MESSAGE_DIALOG(d), "discard",
                                                   ADW_RESPONSE_DESTRUCTIVE);
    }
    adw_message_dialog_set_response_appearance(ADW_MESSAGE_DIALOG(d), "save",
                                               ADW_RESPONSE_SUGGESTED);
    adw_message_dialog_set_default_response(ADW_MESSAGE_DIALOG(d), "save");
    adw_message_dialog_set_close_response(ADW_MESSAGE_DIALOG(d), "cancel");
    gtk_window_set_destroy_with_parent(GTK_WINDOW(d), TRUE);
    Confirm *c = g_new0(Confirm, 1);
    *c = (Confirm){ self, then, data, destroy };
    g_signal_connect_data(d, "response", G_CALLBACK(on_unsaved_response), c, confirm_free, 0);
    self->confirm_dialog = GTK_WINDOW(d);
    g_object_add_weak_pointer(G_OBJECT(d), (gpointer *)&self->confirm_dialog);
    gtk_window_present(GTK_WINDOW(d));
}

static void on_edit_response(AdwMessageDialog *dialog, const char *response, ClWindow *self)
{
    if (!g_str_equal(response, "edit") || !cl_window_cases_locked(self))
        return;
    self->reopened = TRUE;
    cl_window_cases_update_editor(self);
    cl_window_update_actions(self);
    gtk_widget_grab_focus(cl_description_panel_get_editor(self->description_panel));
}

void cl_window_cases_edit_accepted(ClWindow *self)
{
    if (!cl_window_cases_can_review(self) || !cl_window_cases_locked(self))
        return;
    /* TRANSLATORS: the reviewer asked to change a description that was signed off */
    GtkWidget *d = adw_message_dialog_new(GTK_WINDOW(self), _("Edit the Accepted Description?"),
                                          _("The accepted version stays in the history. Your "
                                            "edits make a new draft, to be accepted again."));
    adw_message_dialog_add_responses(ADW_MESSAGE_DIALOG(d), "cancel", _("_Cancel"), "edit",
                                     _("_Edit"), NULL);
    adw_message_dialog_set_response_appearance(ADW_MESSAGE_DIALOG(d), "edit",
                                               ADW_RESPONSE_SUGGESTED);
    adw_message_dialog_set_default_response(ADW_MESSAGE_DIALOG(d), "edit");
    adw_message_dialog_set_close_response(ADW_MESSAGE_DIALOG(d), "cancel");
    gtk_window_set_destroy_with_parent(GTK_WINDOW(d), TRUE);
    g_signal_connect_object(d, "response", G_CALLBACK(on_edit_response), self, 0);
    gtk_window_present(GTK_WINDOW(d));
}

/* Browsing versions: an older one is shown read-only; the latest is the one edited. */
static void show_version(ClWindow *self, gpointer data)
{
    guint sel = GPOINTER_TO_UINT(data);
    /* saving may have added a version (versions are appended: the pick's index holds) */
    g_autoptr(GPtrArray) now = current_versions(self->current_case);
    if (now->len == 0)
        return;
    sel = MIN(sel, now->len - 1);
    const ClCaseDescVersion *v = g_ptr_array_index(now, sel);
    gboolean latest = sel == now->len - 1;
    self->shown_version = latest ? G_MAXUINT : sel;
    cl_description_panel_set_text(self->description_panel, v->text);
    gtk_text_buffer_set_modified(editor(self), FALSE);
    cl_window_cases_update_editor(self);
    g_autofree char *label = version_line(v);
    cl_description_panel_set_version_label(self->description_panel, label);
    cl_description_panel_select_version(self->description_panel, sel);
    cl_window_update_actions(self);
}

void cl_window_cases_version_selected(ClWindow *self, guint sel)
{
    g_autoptr(GPtrArray) versions = current_versions(self->current_case);
    if (sel >= versions->len || sel == self->shown_version)
        return;
    if (!cl_window_cases_has_unsaved(self)) {
        show_version(self, GUINT_TO_POINTER(sel));
        return;
    }
    /* an edit in the editor: asked first (it used to be saved as a new version unasked);
     * until the answer, the list shows the version still in the editor */
    cl_description_panel_select_version(self->description_panel, self->shown_version == G_MAXUINT
                                                                     ? versions->len - 1
                                                                     : self->shown_version);
    cl_window_cases_confirm_unsaved(self, show_version, GUINT_TO_POINTER(sel), NULL);
}

/* ---- opening and recording ---- */

void cl_window_set_case_db(ClWindow *self, ClCaseDb *db)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    cl_window_cases_save_pending(self);
    self->db = db;
    /* what is there now is what the list and a case opened from it show */
    self->seen_change = -1;
    if (db && !cl_casedb_last_change(db, &self->seen_change, NULL))
        self->seen_change = -1;
    sync_reviewer(self);
    g_clear_pointer(&self->current_case, cl_case_free);
    gtk_widget_set_visible(GTK_WIDGET(self->sidebar_button), db != NULL);
    gtk_toggle_button_set_active(self->sidebar_button, db != NULL);
    cl_window_cases_refresh_list(self);
    apply_case_state(self, TRUE);
}

gint64 cl_window_get_case_id(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), 0);
    return self->current_case ? self->current_case->summary.id : 0;
}

static void open_case(ClWindow *self, gpointer data)
{
    gint64 case_id = *(gint64 *)data;
    /* the case shown is left as it is: its window/level and alignment come back with it */
    cl_window_caseview_remember(self);
    if (self->describe_cancellable)
        g_cancellable_cancel(self->describe_cancellable);
    g_autoptr(GError) error = NULL;
    ClCase *c =
        cl_casedb_get_case(self->db, case_id, CL_CASE_HEATMAP_DATA | CL_CASE_CHECK_FILES, &error);
    if (!c) {
        g_autofree char *msg = g_strdup_printf(_("Could not open the case: %s"), error->message);
        cl_window_toast(self, msg);
        return;
    }
    g_clear_pointer(&self->current_case, cl_case_free);
    self->current_case = c;
    self->reopened = FALSE;
    self->sequence_case_id = 0; /* until its images are loaded */
    g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_object_unref);
    g_autoptr(GArray) frames = g_array_new(FALSE, FALSE, sizeof(guint));
    for (guint i = 0; i < c->images->len; i++) {
        const ClCaseImage *img = g_ptr_array_index(c->images, i);
        g_autofree char *shown = g_filename_display_name(img->path);
        if (img->file_state == CL_FILE_MISSING || img->file_state == CL_FILE_UNREADABLE) {
            /* TRANSLATORS: an image of a case cannot be read any more */
            g_autofree char *msg = g_strdup_printf(_("“%s” is missing or unreadable"), shown);
            cl_window_toast(self, msg);
            continue;
        }
        if (img->file_state == CL_FILE_CHANGED) {
            g_autofree char *msg =
                g_strdup_printf(_("“%s” changed since it was added to the case"), shown);
            cl_window_toast(self, msg);
        }
        g_ptr_array_add(files, g_file_new_for_path(img->path));
        /* a multi-frame file comes once per frame the case holds, at that frame */
        g_array_append_val(frames, img->frame);
    }
    apply_case_state(self, FALSE);
    cl_window_cases_refresh_list(self);
    if (files->len > 0)
        cl_window_load_files(self, (GFile *const *)files->pdata,
                             (const guint *)(gpointer)frames->data, files->len, case_id);
}

void cl_window_open_case(ClWindow *self, gint64 case_id)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    if (!self->db)
        return;
    /* an edit is kept or dropped as the reviewer says, never as a version by itself */
    cl_window_cases_confirm_unsaved(self, open_case, g_memdup2(&case_id, sizeof case_id), g_free);
}

/* A new case of these images (ClCaseImage*); its id, or 0 with a toast. */
static gint64 make_case(ClWindow *self, GPtrArray *images)
{
    const ClCaseImage *a = g_ptr_array_index(images, 0);
    const ClCaseImage *b = images->len > 1 ? g_ptr_array_index(images, 1) : a;
    g_autofree char *na = g_filename_display_basename(a->path),
                    *nb = g_filename_display_basename(b->path);
    /* TRANSLATORS: the name of a case made of opened files: two names, or the first and how
     * many more */
    g_autofree char *name = g_strcmp0(a->path, b->path) == 0 ? g_strdup(na)
                            : images->len == 2
                                ? g_strdup_printf(_("%s and %s"), na, nb)
                                : g_strdup_printf(_("%s and %u more"), na, images->len - 1);
    g_autoptr(GError) error = NULL;
    gint64 id = 0;
    if (!cl_casedb_case_new(self->db, name, &id, &error) ||
        !cl_casedb_images_add(self->db, id, images, NULL, &error)) {
        g_autofree char *msg =
            g_strdup_printf(_("The images were not added as a case: %s"), error->message);
        cl_window_toast(self, msg);
        if (id)
            cl_casedb_case_delete(self->db, id, NULL);
        return 0;
    }
    return id;
}

void cl_window_cases_loaded(ClWindow *self, GPtrArray *documents, GPtrArray *case_images,
                            const guint *groups, guint n_groups)
{
    if (!self->db)
        return;
    if (self->pending_case_id) {
        /* the case's own images: its description and heat map go with them */
        self->sequence_case_id = self->pending_case_id;
        self->pending_case_id = 0;
        apply_case_state(self, FALSE);
        cl_window_caseview_restore(self);
        return;
    }
    self->sequence_case_id = 0;
    self->reopened = FALSE;
    g_clear_pointer(&self->current_case, cl_case_free);
    if (!case_images || case_images->len < 2) {
        apply_case_state(self, FALSE);
        cl_window_cases_refresh_list(self);
        return;
    }
    /* one import, several studies / places / photos (at least two groups of two or more): a
     * case each, the first opened; otherwise the files picked together are one comparison */
    g_autofree guint *sizes = g_new0(guint, MAX(n_groups, 1));
    guint n_pairs = 0;
    for (guint i = 0; groups && i < case_images->len; i++)
        if (groups[i] < n_groups && ++sizes[groups[i]] == 2)
            n_pairs++;
    if (groups && n_pairs > 1) {
        gint64 first = 0;
        guint made = 0;
        g_autoptr(GPtrArray) alone = g_ptr_array_new();
        for (guint g = 0; g < n_groups; g++) {
            g_autoptr(GPtrArray) part = g_ptr_array_new();
            for (guint i = 0; i < case_images->len; i++)
                if (groups[i] == g)
                    g_ptr_array_add(part, g_ptr_array_index(case_images, i));
            if (part->len < 2) {
                g_ptr_array_extend(alone, part, NULL, NULL);
                continue;
            }
            gint64 id = make_case(self, part);
            made += id != 0;
            if (!first)
                first = id;
        }
        /* the files that matched no other: together, one more comparison */
        if (alone->len > 1) {
            gint64 id = make_case(self, alone);
            made += id != 0;
        }
        /* TRANSLATORS: the opened files were sorted into this many cases */
        g_autofree char *msg = g_strdup_printf(
            ngettext("The files make %u case", "The files make %u cases", made), made);
        if (alone->len == 1) {
            g_autofree char *name =
                g_path_get_basename(((ClCaseImage *)g_ptr_array_index(alone, 0))->path);
            /* TRANSLATORS: the cases made of the opened files, and the one file that matched
             * none of the others (shown, in no case) */
            g_autofree char *more =
                g_strdup_printf(_("%s; “%s” matched no other file and is in none"), msg, name);
            cl_window_toast(self, more);
        } else {
            cl_window_toast(self, msg);
        }
        cl_window_cases_refresh_list(self);
        if (first)
            cl_window_open_case(self, first);
        else
            apply_case_state(self, FALSE);
        return;
    }
    gint64 id = make_case(self, case_images);
    if (!id) {
        apply_case_state(self, FALSE);
        return;
    }
    self->current_case = cl_casedb_get_case(self->db, id, CL_CASE_HEATMAP_DATA, NULL);
    self->sequence_case_id = id;
    cl_window_cases_refresh_list(self);
    apply_case_state(self, FALSE);
}

void cl_window_cases_record_run(ClWindow *self, const ClWorkerDescribeResult *r)
{
    const ClCaseImage *ia = cl_window_cases_image_at(self, self->pair_a);
    const ClCaseImage *ib = cl_window_cases_image_at(self, self->pair_b);
    if (!self->db || !ia || !ib || ia == ib)
        return;
    ClDescribeOptions opts;
    cl_describe_options_init(&opts);
    opts.delta = self->describe_delta; /* what the run used */
    g_autoptr(GPtrArray) heat = NULL;
    /* the run read the pair shown, those two images in that order, after every earlier one of
     * the sequence with the long history */
    g_autoptr(GPtrArray) pair = g_ptr_array_new();
    for (guint i = self->describe_first; i < self->pair_a; i++) {
        const ClCaseImage *ip = cl_window_cases_image_at(self, i);
        if (ip)
            g_ptr_array_add(pair, (gpointer)ip);
    }
    g_ptr_array_add(pair, (gpointer)ia);
    g_ptr_array_add(pair, (gpointer)ib);
    ClCaseRun *run = cl_case_run_from_describe(
        pair, &opts, &r->result, r->model_path ? r->model_path : r->model_name, r->model_sha256,
        r->model_config_json, r->model_image_size, r->device, 0, r->load_ms, &heat);
    g_autofree char *text = g_utf8_make_valid(r->result.text ? r->result.text : "", -1);
    g_autoptr(GError) error = NULL;
    gboolean ok = cl_casedb_run_record(self->db, self->current_case->summary.id, run, text, heat,
                                       NULL, NULL, &error);
    cl_case_run_free(run);
    if (!ok) {
        /* the text stays in the editor, marked as edited, so it is kept at the next save */
        g_autofree char *msg =
            g_strdup_printf(_("The description was not recorded in the case: %s"), error->message);
        cl_window_toast(self, msg);
        gtk_text_buffer_set_modified(editor(self), TRUE);
        return;
    }
    gtk_text_buffer_set_modified(editor(self), FALSE);
    if (reload_case(self, &error))
        apply_case_state(self, TRUE);
    cl_window_cases_refresh_list(self);
}

gboolean cl_window_cases_can_review(ClWindow *self)
{
    return self->db && self->current_case && !cl_window_get_describing(self) &&
           self->shown_version == G_MAXUINT;
}

/* ---- another reviewer's changes ---- */

/* Every two seconds: has anyone (another window, workstation or reviewer on the same database)
 * changed it? Then the case list again, and the case shown when it changed: reloaded as it now
 * is, unless the reviewer is editing its description — their text is never replaced; they are
 * told, and their save then meets the other version (cl_window_cases_save). */
static gboolean watch_changes(gpointer data)
{
    ClWindow *self = data;
    gint64 change = 0;
    if (!self->db || cl_window_get_describing(self) ||
        !cl_casedb_last_change(self->db, &change, NULL) || change == self->seen_change)
        return G_SOURCE_CONTINUE;
    gboolean first = self->seen_change < 0; /* the database could not be read at the start */
    self->seen_change = change;
    if (first)
        return G_SOURCE_CONTINUE;
    cl_window_cases_refresh_list(self);
    if (!self->current_case)
        return G_SOURCE_CONTINUE;
    g_autoptr(GError) error = NULL;
    g_autoptr(ClCase) fresh =
        cl_casedb_get_case(self->db, self->current_case->summary.id, CL_CASE_HEATMAP_DATA, &error);
    if (!fresh) {
        if (g_error_matches(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_NOT_FOUND))
            cl_window_toast(self, _("This case was deleted from the case database by another "
                                    "reviewer; what you see is no longer kept there."));
        return G_SOURCE_CONTINUE;
    }
    if (g_strcmp0(fresh->summary.updated_at, self->current_case->summary.updated_at) == 0)
        return G_SOURCE_CONTINUE;
    const ClCaseAudit *last =
        fresh->audit->len ? g_ptr_array_index(fresh->audit, fresh->audit->len - 1) : NULL;
    const char *who = last ? last->actor : NULL;
    gboolean ours = who && g_strcmp0(who, cl_casedb_get_actor(self->db)) == 0;
    if (cl_window_cases_has_unsaved(self)) {
        if (!ours) {
            /* TRANSLATORS: %s is the reviewer who changed the case being edited */
            g_autofree char *msg = g_strdup_printf(
                _("%s changed this case while you are editing it. Your text stays as it is; "
                  "when you save, you will see their version first."),
                who ? who : _("Another reviewer"));
            cl_window_toast(self, msg);
        }
        return G_SOURCE_CONTINUE;
    }
    g_clear_pointer(&self->current_case, cl_case_free);
    self->current_case = g_steal_pointer(&fresh);
    apply_case_state(self, FALSE);
    if (!ours) {
        /* TRANSLATORS: %s is the reviewer whose change to the shown case was just loaded */
        g_autofree char *msg = g_strdup_printf(_("%s changed this case: it is shown as it is now"),
                                               who ? who : _("Another reviewer"));
        cl_window_toast(self, msg);
    }
    return G_SOURCE_CONTINUE;
}

/* ---- set-up ---- */

void cl_window_cases_init(ClWindow *self)
{
    self->shown_version = G_MAXUINT;
    self->seen_change = -1;
    self->watch_id = g_timeout_add_seconds(2, watch_changes, self);
    if (self->settings)
        g_signal_connect_object(self->settings, "changed::reviewer-name", G_CALLBACK(sync_reviewer),
                                self, G_CONNECT_SWAPPED);
    g_object_bind_property(self->sidebar_button, "active", self->sidebar_revealer, "reveal-child",
                           G_BINDING_SYNC_CREATE);
    gtk_widget_set_visible(GTK_WIDGET(self->sidebar_button), FALSE);
}

void cl_window_cases_dispose(ClWindow *self)
{
    g_clear_handle_id(&self->watch_id, g_source_remove);
    if (self->export_cancellable) {
        g_cancellable_cancel(self->export_cancellable);
        g_clear_object(&self->export_cancellable);
    }
    if (self->confirm_dialog) {
        /* the question goes with the window (its answer would find no window) */
        GtkWindow *d = self->confirm_dialog;
        g_object_remove_weak_pointer(G_OBJECT(d), (gpointer *)&self->confirm_dialog);
        self->confirm_dialog = NULL;
        gtk_window_destroy(d);
    }
    if (self->export_dialog) { /* likewise */
        GtkWindow *d = self->export_dialog;
        g_object_remove_weak_pointer(G_OBJECT(d), (gpointer *)&self->export_dialog);
        self->export_dialog = NULL;
        gtk_window_destroy(d);
    }
    g_clear_pointer(&self->current_case, cl_case_free);
    cl_window_caseview_dispose(self);
    self->db = NULL;
}
