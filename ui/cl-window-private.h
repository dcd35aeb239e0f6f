/* cl-window-private.h - ClWindow's instance struct, shared with its companion files
 * (cl-window-actions.c: the win.* actions; cl-window-load.c: loading files;
 * cl-window-describe.c: the model runs; cl-window-cases.c: the case sidebar and the case
 * database; cl-window-caseview.c: each case's view as it was left; cl-window-export.c: the
 * report). */
#pragma once

#include "casedb/casedb.h"
#include "cl-case-sidebar.h"
#include "cl-compare-view.h"
#include "cl-description-panel.h"
#include "cl-filmstrip.h"
#include "cl-window.h"
#include "worker/worker.h"

G_BEGIN_DECLS

/* Files decoded per open; more are ignored with a notice. */
#define MAX_OPEN_FILES 32

/* One item of the window's sequence: a frame of a document. */
typedef ClFilmstripItem SeqItem;

struct _ClWindow {
    AdwApplicationWindow parent_instance;

    /* template children */
    AdwWindowTitle *window_title;
    GtkSpinner *spinner;
    GtkLabel *zoom_label;
    AdwToastOverlay *toast_overlay;
    GtkStack *stack;
    GtkToggleButton *sidebar_button;
    GtkRevealer *sidebar_revealer;
    ClCaseSidebar *case_sidebar;
    ClCompareView *compare_view;
    GtkRevealer *panel_revealer;
    ClDescriptionPanel *description_panel;
    ClFilmstrip *filmstrip;

    GSettings *settings; /* NULL when the schema is not installed */
    GCancellable *load_cancellable;
    GPtrArray *documents;  /* ClDocument*, what is shown */
    GArray *sequence;      /* SeqItem: every image of the sequence, in order */
    guint pair_a, pair_b;  /* the items shown */
    guint cine_id;         /* cine: the timeout that steps the later image on (0: stopped) */
    guint zoom_label_idle; /* pending update_zoom_label */
    guint n_toasts;        /* shown so far, and the last one's text */
    char *last_toast;
    char *load_errors; /* the last open's failed files, "name: reason" a line; NULL: none */
    gboolean aligned;
    GCancellable *align_cancellable;

    /* the model (cl-window-describe.c) */
    ClWorker *worker;
    GCancellable *describe_cancellable; /* the run in progress, NULL when none */
    gboolean describe_delta;            /* the running (or last) describe used Δ maps */
    gboolean describe_aligned;          /* ... and read the later image aligned */
    guint describe_first;               /* ... and read the sequence from this item (the long
                                         * history: every prior; else pair_a) */
    guint described_images;             /* images the last finished run read */

    /* cases (cl-window-cases.c); db borrowed, NULL: a plain viewer without cases */
    ClCaseDb *db;
    gboolean geo_export_busy, last_geo_export_ok; /* the change map's GeoTIFF export */
    GPtrArray *undo, *redo; /* cl-window-undo.c: the view before each edit, and after each undo */
    ClCase *current_case;   /* the case shown, with its heatmap grids; NULL when none */
    gint64 pending_case_id; /* the case whose images are being loaded, 0 when none */
    guint shown_version;    /* index into the versions list that is shown, G_MAXUINT: latest */
    GCancellable *export_cancellable; /* a report being written */
    gint64 sequence_case_id;          /* the case whose images the sequence shows, 0: none */
    gboolean last_export_ok;
    gboolean reopened;         /* the accepted description was opened for editing (Edit) */
    GtkWindow *confirm_dialog; /* the question asked before an edit is kept or dropped */
    GtkWindow *export_dialog;  /* the export's options (de-identification), NULL when none */
    gboolean close_confirmed;  /* closing after that question: ask no more */
    GHashTable *case_views;    /* case id → its view as left (cl-window-caseview.c) */
    guint watch_id;            /* the look for other reviewers' changes (cl-window-cases.c) */
    gint64 seen_change;        /* the database's last change seen (-1: none yet) */
};

/* cl-window.c */
void cl_window_update_actions(ClWindow *self);
void cl_window_update_busy(ClWindow *self);
/* Shows loaded documents (at least one): all their images go in the filmstrip, the first two
 * are shown. frames: the frame of each document (a case's items; a document may come once per
 * frame); NULL: a lone multi-frame file gives one item per frame, several files their first. */
void cl_window_show_documents(ClWindow *self, GPtrArray *documents, const guint *frames);

/* cl-window-load.c: loads files as cl_window_open_files does; case_id: the case they belong to
 * (0: new files, of which the window makes a case when it has a database), frames: with a case,
 * the frame of each file the case shows (NULL: the first). */
void cl_window_load_files(ClWindow *self, GFile *const *files, const guint *frames, guint n_files,
                          gint64 case_id);

/* cl-window-actions.c: installs the win.* actions and their keys. */
void cl_window_actions_class_init(GtkWidgetClass *widget_class);

/* cl-window-describe.c: the run in progress (NULL: none) and what shows it. */
void cl_window_set_describing(ClWindow *self, GCancellable *cancellable);

/* cl-window-caseview.c: each case's pair, window/level and alignment, remembered before other
 * images replace the case's and given back once its images are shown again. */
void cl_window_caseview_remember(ClWindow *self);
void cl_window_caseview_restore(ClWindow *self);
void cl_window_caseview_dispose(ClWindow *self);

/* cl-window-cases.c */
void cl_window_cases_init(ClWindow *self);
/* The case image the sequence shows at index, when the sequence is the current case's; else
 * NULL. */
const ClCaseImage *cl_window_cases_image_at(ClWindow *self, guint index);
void cl_window_cases_dispose(ClWindow *self);
/* After a load: a case for newly opened files (documents, the files' paths), or the state of the
 * case that was opened (description, versions, heat map). */
void cl_window_cases_loaded(ClWindow *self, GPtrArray *documents, GPtrArray *case_images,
                            const guint *groups, guint n_groups);
/* After a model run: records it in the current case; FALSE when there is none. */
void cl_window_cases_record_run(ClWindow *self, const ClWorkerDescribeResult *r);
/* The pair shown changed (filmstrip): the case's state for it. */
void cl_window_cases_pair_changed(ClWindow *self);
/* A move in the filmstrip: the case's image order follows; FALSE when it could not be kept. */
gboolean cl_window_cases_reorder(ClWindow *self, guint from, guint to);
/* TRUE when the description can be saved, accepted or rejected now. */
gboolean cl_window_cases_can_review(ClWindow *self);
/* Keeps an edited description before the window shows something else (nothing is lost). */
gboolean cl_window_cases_save_pending(ClWindow *self);
/* TRUE when the editor holds text that differs from the case's current version. */
gboolean cl_window_cases_has_unsaved(ClWindow *self);
/* Runs then(self, data) now when nothing is unsaved; else asks first (Save, Discard or Cancel)
 * and runs it after Save or Discard, never after Cancel. destroy frees data either way. Switching
 * case, opening files and closing never keep an edit as a version without asking. */
typedef void (*ClWindowThen)(ClWindow *self, gpointer data);
void cl_window_cases_confirm_unsaved(ClWindow *self, ClWindowThen then, gpointer data,
                                     GDestroyNotify destroy);
/* What follows the question, which words it uses and what its other answer does. */
typedef enum {
    CL_UNSAVED_LEAVE,    /* another case, files, closing: Save, Discard or Cancel */
    CL_UNSAVED_DESCRIBE, /* a model run replaces the text: Save, Discard or Cancel */
    CL_UNSAVED_EXPORT,   /* a report: Save and Export, Export the Saved Version (the edit stays
                          * in the editor, unsaved) or Cancel */
} ClUnsavedAsk;
void cl_window_cases_confirm_unsaved_for(ClWindow *self, ClUnsavedAsk ask, ClWindowThen then,
                                         gpointer data, GDestroyNotify destroy);
/* An accepted description is read-only until Edit (win.edit-description) asks and reopens it; the
 * editor's state (editable, Edit or Save) follows the case, the version shown and a model run. */
gboolean cl_window_cases_locked(ClWindow *self);
void cl_window_cases_update_editor(ClWindow *self);
void cl_window_cases_edit_accepted(ClWindow *self);
/* win.save-description, win.accept-description and win.reject-description. */
gboolean cl_window_cases_save(ClWindow *self);
void cl_window_cases_set_status(ClWindow *self, ClDescStatus status);
/* The sidebar's list again (its search, the case shown selected); a case picked in it. */
void cl_window_cases_refresh_list(ClWindow *self);
void cl_window_cases_activated(ClWindow *self, gint64 id);
/* A version picked in the panel's list: shown, read-only unless it is the latest. */
void cl_window_cases_version_selected(ClWindow *self, guint index);

/* cl-window-undo.c */
void cl_window_undo_init(ClWindow *self);
void cl_window_undo_dispose(ClWindow *self);
/* the view as it is now, kept before an edit the window makes (nudge, preset, clearing masks) */
void cl_window_undo_record(ClWindow *self);
/* another pair or case: nothing to undo */
void cl_window_undo_reset(ClWindow *self);

G_END_DECLS
