/* cl-window.h - ClWindow: the main window, two image views side by side. */
#pragma once

#include <adwaita.h>

#include "cl-image-view.h"

G_BEGIN_DECLS

#define CL_TYPE_WINDOW (cl_window_get_type())
G_DECLARE_FINAL_TYPE(ClWindow, cl_window, CL, WINDOW, AdwApplicationWindow)

/* application may be NULL (tests). */
ClWindow *cl_window_new(GtkApplication *application);

/* Loads files in a worker thread and shows the first two images (or the first two frames of a
 * single multi-frame file). A newer call cancels an older one still loading. Files that fail to
 * load are reported in a toast naming them; if none loads, what is shown stays. */
void cl_window_open_files(ClWindow *self, GFile *const *files, guint n_files);

/* Shows the Open dialog (GtkFileChooserNative, several files at once). */
void cl_window_choose_files(ClWindow *self);

/* The sequence (all opened images, or a case's): its length, the pair shown (indices), showing
 * item `later` next to the one before it (the filmstrip's click), moving an item (its drag; a
 * case's order in the database follows). */
guint cl_window_get_n_sequence(ClWindow *self);
void cl_window_get_pair(ClWindow *self, guint *a, guint *b);
/* Cine (win.cine, the c key): the later image steps through the sequence, each item with its
 * predecessor, at 4 a second, from the last back to the second; only on three or more items. */
gboolean cl_window_get_cine(ClWindow *self);
/* Notes and key images of the shown case (win.add-note, the n key, asks for the text;
 * win.key-image, the k key, marks the later image): stored in the case database, listed in the
 * description panel, in the reports. FALSE (a toast says why) when not stored. */
gboolean cl_window_cases_add_note(ClWindow *self, const char *text);
gboolean cl_window_cases_mark_key_image(ClWindow *self);
void cl_window_stop_cine(ClWindow *self);
void cl_window_show_pair(ClWindow *self, guint later);
void cl_window_move_image(ClWindow *self, guint from, guint to);

/* index 0 = left, 1 = right. (transfer none) */
ClImageView *cl_window_get_view(ClWindow *self, guint index);

gboolean cl_window_get_link_views(ClWindow *self);
void cl_window_set_link_views(ClWindow *self, gboolean link_views);

/* TRUE while files are being loaded or frames rendered. */
gboolean cl_window_get_busy(ClWindow *self);

/* How the two images are compared: "side-by-side" (two panes, the default), or overlaid in the
 * left pane: "swipe", "blend", "flicker", "difference" (action win.compare-mode). */
const char *cl_window_get_compare_mode(ClWindow *self);
void cl_window_set_compare_mode(ClWindow *self, const char *mode);
/* Aligns the later image onto the earlier one (action win.align; rigid, core/align/register.h)
 * off the main thread; the match before and after is shown. Alt+arrows nudge it by a pixel
 * (win.nudge). Turning it off shows the images as they are. */
gboolean cl_window_get_aligned(ClWindow *self);
void cl_window_set_aligned(ClWindow *self, gboolean aligned);

/* Ignore regions (docs/DESIGN.md §9: masks apply everywhere, the model's input included), in the
 * earlier image's pixels; Shift+drag on either view draws one; win.clear-masks removes them.
 * New images start without any. */
void cl_window_add_mask(ClWindow *self, double x0, double y0, double x1, double y1);
guint cl_window_get_n_masks(ClWindow *self);

/* The heat map's encoder block: the mean over all (-1, the default) or one block's; how many
 * blocks the last run has maps of (0 for Δ maps). */
guint cl_window_get_n_heat_layers(ClWindow *self);
/* Images the last finished model run read (2 for the pair; more with the long history). */
guint cl_window_get_described_images(ClWindow *self);
void cl_window_set_heat_layer(ClWindow *self, int layer);

/* The last model run's heat map over the later image (action win.show-heatmap). */
gboolean cl_window_get_show_heatmap(ClWindow *self);
void cl_window_set_show_heatmap(ClWindow *self, gboolean show);

/* Describes the change between the two shown images with the model in the background worker
 * (action win.describe): the model file of the "model-file" setting, else the installed
 * default, else an untrained one (the panel says so); the text streams into the description
 * panel, the heat map arrives with the result. A newer run or new images stop an older run. An
 * unsaved edit of the description asks first (Save, Discard or Cancel). */
void cl_window_describe(ClWindow *self);
/* TRUE while a run is in progress ("describing" property). */
gboolean cl_window_get_describing(ClWindow *self);
/* Hovering a sentence of the generated description shows where in the later image the model
 * looked while writing it (the last decoder block's attention over its visual tokens) and marks
 * the sentence; callable directly with a character offset (< 0: back to the run's heat map).
 * TRUE when a sentence is shown; only while the text is the model's, unedited. */
gboolean cl_window_highlight_sentence(ClWindow *self, int offset);
int cl_window_get_highlighted_sentence(ClWindow *self);

/* The description panel's text (newly allocated). */
char *cl_window_get_description(ClWindow *self);

/* Tells the user something in a toast (text, not markup); with a button (use_underline label)
 * that activates action. */
void cl_window_toast(ClWindow *self, const char *text);
void cl_window_toast_with_button(ClWindow *self, const char *text, const char *label,
                                 const char *action);
/* How many toasts the window has shown, and the last one's text ("" when none). */
guint cl_window_get_n_toasts(ClWindow *self);
const char *cl_window_get_last_toast(ClWindow *self);
/* The reasons of the last open's files that failed, one "name: reason" a line (NULL: none); the
 * toast's Details (win.show-load-errors) shows them. */
const char *cl_window_get_load_errors(ClWindow *self);

/* ---- cases (cl-window-cases.c) ---- */
typedef struct _ClCaseDb ClCaseDb;
/* The case database the window lists, opens and records into (borrowed: it must outlive the
 * window; main thread only). With one, opened files become a new case and model runs, edits,
 * accepts and rejects are kept in it; NULL: a plain viewer. */
void cl_window_set_case_db(ClWindow *self, ClCaseDb *db);
/* Shows a case: its images, its current description with its versions, its last heat map. */
void cl_window_open_case(ClWindow *self, gint64 case_id);
/* The case shown, 0 when none. */
gint64 cl_window_get_case_id(ClWindow *self);
/* The shown case's report to file (action win.export-report asks where): PDF, or HTML / JSON by
 * the name's suffix. Asks first about an unsaved edit of the description (save it, or export the
 * saved version), then shows the export's options: de-identification (on by default for DICOM
 * cases) with the changes it would make to the reviewer's text. Export writes it in a worker
 * thread from the view on screen (window/level, alignment, ignore regions, compare mode,
 * tolerance, heat map); a toast says how it went. */
void cl_window_export_report(ClWindow *self, GFile *file);
gboolean cl_window_get_exporting(ClWindow *self);
gboolean cl_window_get_last_export_ok(ClWindow *self);
/* The heat map of the pair shown, for GIS (action win.export-change-map asks where; enabled when
 * the heat map's image is a georeferenced file): file NAME.tif gets the heat (Float32) on the
 * image's own grid — its size, CRS and geotransform — with NAME-mask.tif (1 where the heat is at
 * least 0.5) and NAME-regions.gpkg (the mask's changed regions as polygons with area_m2), written
 * in a worker thread; a toast says how it went. */
gboolean cl_window_can_export_change_map(ClWindow *self);
/* Undo and redo of the view's edits (win.undo Ctrl+Z, win.redo Ctrl+Shift+Z; the description's
 * editor undoes its own text): ignore regions, the nudged alignment, window/level. FALSE when
 * there is nothing to undo or redo (or an automatic alignment is running). */
gboolean cl_window_undo(ClWindow *self);
gboolean cl_window_redo(ClWindow *self);
gboolean cl_window_can_undo(ClWindow *self);
gboolean cl_window_can_redo(ClWindow *self);
void cl_window_export_change_map(ClWindow *self, GFile *file);
gboolean cl_window_get_geo_exporting(ClWindow *self);
gboolean cl_window_get_last_geo_export_ok(ClWindow *self);

G_END_DECLS
