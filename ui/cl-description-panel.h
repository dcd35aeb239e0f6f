/* cl-description-panel.h - ClDescriptionPanel: the description of the change beside the images. */
#pragma once

#include <gtk/gtk.h>

#include "worker/sentences.h"

G_BEGIN_DECLS

#define CL_TYPE_DESCRIPTION_PANEL (cl_description_panel_get_type())
G_DECLARE_FINAL_TYPE(ClDescriptionPanel, cl_description_panel, CL, DESCRIPTION_PANEL, GtkBox)

/* The model run's stage ("Starting…", "Done: …"), its model and notices, its progress (fraction
 * < 0: pulse); "running" (property) shows the progress bar and makes the editor read-only. */
void cl_description_panel_set_stage(ClDescriptionPanel *self, const char *text);
void cl_description_panel_set_model(ClDescriptionPanel *self, const char *text);
void cl_description_panel_set_progress(ClDescriptionPanel *self, double fraction);
void cl_description_panel_set_running(ClDescriptionPanel *self, gboolean running);
gboolean cl_description_panel_get_running(ClDescriptionPanel *self);

/* The editor: its buffer (whose "modified" flag marks a reviewer's edit), its text (newly
 * allocated), replacing it, appending streamed text, whether it can be edited. */
GtkTextBuffer *cl_description_panel_get_buffer(ClDescriptionPanel *self);
char *cl_description_panel_get_text(ClDescriptionPanel *self);
void cl_description_panel_set_text(ClDescriptionPanel *self, const char *text);
void cl_description_panel_append_text(ClDescriptionPanel *self, const char *text);
void cl_description_panel_set_editable(ClDescriptionPanel *self, gboolean editable);

/* The review part (shown with a case): the versions list (items: one line each, the last
 * selected; the list only shows with two or more) and the line about the version shown. Picking
 * an item emits "version-selected" (guint index); setting the list does not. */
void cl_description_panel_set_review_visible(ClDescriptionPanel *self, gboolean visible);
/* An accepted description: read-only, with Edit (win.edit-description) in place of Save. */
void cl_description_panel_set_locked(ClDescriptionPanel *self, gboolean locked);
/* The text view (transfer none), to give it the focus. */
GtkWidget *cl_description_panel_get_editor(ClDescriptionPanel *self);
void cl_description_panel_set_versions(ClDescriptionPanel *self, const char *const *items);
/* The case's notes and key images, one line each, under the versions (hidden when empty). */
void cl_description_panel_set_notes(ClDescriptionPanel *self, const char *text);
const char *cl_description_panel_get_notes(ClDescriptionPanel *self);
/* Selects item `index` of the list without emitting "version-selected" (a pick undone). */
void cl_description_panel_select_version(ClDescriptionPanel *self, guint index);
void cl_description_panel_set_version_label(ClDescriptionPanel *self, const char *text);

/* The last run's sentence maps (ClSentenceMap*, referenced; NULL: none) and the text they are
 * of: they hold while the editor shows that text unchanged. */
void cl_description_panel_set_sentences(ClDescriptionPanel *self, GPtrArray *sentences,
                                        const char *text);
/* Marks the sentence at character offset `offset` (< 0: none); returns it (NULL when none: also
 * when the text was edited). The pointer moving over the text emits "sentence-hovered" (int
 * offset, -1 when it leaves a marked one) for whoever shows the sentence's map. */
const ClSentenceMap *cl_description_panel_highlight(ClDescriptionPanel *self, int offset);
int cl_description_panel_get_highlighted(ClDescriptionPanel *self);

G_END_DECLS
