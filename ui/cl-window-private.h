/* cl-window-private.h - ClWindow's instance struct, shared with its companion files
 * (cl-window-cases.c: the case sidebar and the case database). */
#pragma once

#include "casedb/casedb.h"
#include "cl-window.h"
#include "model/heatmap.h"
#include "worker/sentences.h"
#include "worker/worker.h"

G_BEGIN_DECLS

/* One item of the window's sequence: a frame of a document. */
typedef struct {
    ClDocument *doc;
    guint frame;
} SeqItem;

struct _ClWindow {
    AdwApplicationWindow parent_instance;

    /* template children */
    AdwWindowTitle *window_title;
    GtkSpinner *spinner;
    GtkLabel *zoom_label;
    AdwToastOverlay *toast_overlay;
    GtkStack *stack;
    ClImageView *view_a, *view_b;
    GtkLabel *name_a, *info_a, *name_b, *info_b;
    GtkWidget *pane_b;
    GtkRevealer *panel_revealer;
    GtkLabel *panel_stage, *panel_model, *mode_label, *changed_label;
    GtkProgressBar *panel_progress;
    GtkTextView *description_view;
    GtkActionBar *mode_bar;
    GtkScale *mode_scale, *heat_scale;
    GtkMenuButton *preset_button;
    GtkLabel *align_label;
    GtkButton *masks_button;
    GtkBox *filmstrip;
    GtkWidget *filmstrip_scroller;
    GArray *sequence;       /* SeqItem: every image of the sequence, in order */
    guint pair_a, pair_b;   /* the items shown */
    GArray *masks; /* double: ignore regions, x0 y0 x1 y1 in the earlier image's pixels */
    gboolean aligned;
    GCancellable *align_cancellable;

    GSettings *settings; /* NULL when the schema is not installed */
    GCancellable *load_cancellable;
    GPtrArray *documents; /* ClDocument*, what is shown */

    gboolean link_views;
    ClViewport *shared_viewport;
    ClViewport *own_viewport[2];
    ClViewport *zoom_label_viewport; /* the one zoom_label follows */
    gulong zoom_label_id;
    guint zoom_label_idle; /* pending update_zoom_label */

    /* comparison */
    ClCompareMode mode;  /* NONE = side by side */
    double blend;        /* the mode bar's value per mode */
    double flicker_rate;
    double tolerance;
    gboolean updating_scale;

    /* the model */
    ClWorker *worker;
    GCancellable *describe_cancellable; /* the run in progress, NULL when none */
    gboolean show_heatmap;
    ClHeatmap *heatmap; /* of the last run: image 2 of the shown pair, on its letterbox */
    ClLetterbox heat_letterbox;
    GPtrArray *layer_heatmaps; /* ClHeatmap*: the same image's map per encoder block */
    GtkDropDown *layer_dropdown;
    GPtrArray *sentences;   /* ClSentenceMap* of the last run, for its text */
    char *generated_text;   /* that text (the maps hold while the editor shows it unchanged) */
    int highlighted;        /* the sentence shown, -1 when none */

    /* cases (cl-window-cases.c); db borrowed, NULL: a plain viewer without cases */
    ClCaseDb *db;
    ClCase *current_case;   /* the case shown, with its heatmap grids; NULL when none */
    gint64 pending_case_id; /* the case whose images are being loaded, 0 when none */
    gboolean refreshing_list;
    guint shown_version;    /* index into the versions dropdown that is shown, G_MAXUINT: latest */
    GtkRevealer *sidebar_revealer;
    GtkSearchEntry *case_search;
    GtkListBox *case_list;
    GtkToggleButton *sidebar_button;
    GtkLabel *version_label;
    GtkDropDown *version_dropdown;
    GtkWidget *review_box;
    GCancellable *export_cancellable; /* a report being written */
    gboolean updating_versions;       /* the version list is being rebuilt, not browsed */
    gint64 sequence_case_id;          /* the case whose images the sequence shows, 0: none */
    gboolean describe_delta;          /* the running (or last) describe used Δ maps */
    gboolean describe_aligned;        /* ... and read the later image aligned */
    guint describe_first;             /* ... and read the sequence from this item (the long
                                       * history: every prior; else pair_a) */
    guint described_images;           /* images the last finished run read */
    gboolean heat_in_frame;           /* the heat map is of the earlier image's frame */
    gboolean last_export_ok;
};

/* cl-window.c */
void cl_window_update_actions(ClWindow *self);
void cl_window_update_heat(ClWindow *self);
/* The per-block heat maps of the later image (ClHeatmap*, borrowed ref) for the layer list. */
void cl_window_set_layer_heatmaps(ClWindow *self, GPtrArray *layers);
/* Loads files as cl_window_open_files does; case_id: the case they belong to (0: new files, of
 * which the window makes a case when it has a database). */
void cl_window_load_files(ClWindow *self, GFile *const *files, guint n_files, gint64 case_id);

/* cl-window-cases.c */
void cl_window_cases_init(ClWindow *self);
void cl_window_cases_class_init(GtkWidgetClass *widget_class);
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

G_END_DECLS
