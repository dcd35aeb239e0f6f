/* ui-util.h - What the ui tests share: the temporary directory and the two small PNGs, running
 * the main loop until a condition holds, opening files into a new window, reading back what a
 * view shows, screenshots, and the generated scenes. */
#pragma once

#include <adwaita.h>

#include "casedb/casedb.h"
#include "cl-document.h"
#include "cl-image-view.h"
#include "cl-viewport.h"
#include "cl-window.h"

/* Generous: loading is quick, but CI machines under load and Xvfb's software rendering are not. */
#define WAIT_TIMEOUT_US (20 * G_USEC_PER_SEC)

extern char *tmpdir;
extern char *path_a, *path_b; /* 64 × 48 and 80 × 60 PNGs */

/* The set-up before the tests are added (g_test_init, per-user dirs in tmpdir, GTK and
 * libadwaita, the app's stylesheet, the two PNGs): 0, or the exit status (77: no display). */
int ui_util_init(int *argc, char ***argv);
/* While set, GTK's warning "Trying to snapshot … without a current allocation" is written but
 * not fatal (every other warning stays fatal); /ui/window/panel-divider says why. */
extern gboolean ui_snapshot_warning_tolerated;
/* Removes tmpdir. */
void ui_util_cleanup(void);

/* Solid background colour per image, and a marker rectangle, so pixels can be checked. */
gboolean write_png(const char *path, int w, int h, double r, double g, double b);

typedef gboolean (*Condition)(gpointer data);

/* Runs the main loop until cond holds; FALSE on timeout. */
gboolean wait_for(Condition cond, gpointer data);
/* Conditions on a ClWindow: nothing loading and every shown view laid out; no model run. */
gboolean window_idle(gpointer data);
gboolean not_describing(gpointer data);
/* On a ClImageView: its difference is computed. */
gboolean diff_ready(gpointer data);

void open_paths(ClWindow *win, const char *const *paths, guint n);
/* A 900 × 600 window showing paths, loaded. */
ClWindow *new_window_with(const char *const *paths, guint n);
void assert_shows(ClImageView *view, const char *name, guint frame, int width, int height);
/* Pixel (x, y) of the view's texture as 0xRRGGBBAA. */
guint32 texture_pixel(ClImageView *view, int x, int y);
/* Waits until the window has painted a frame with everything queued so far. */
void wait_for_paint(GtkWidget *widget);
/* Writes what the window shows to $CL_SCREENSHOT_DIR/name.png (test artefacts; skipped when the
 * variable is unset). */
void save_screenshot(ClWindow *win, const char *name);
void save_widget_screenshot(GtkWidget *widget, const char *name);
/* The message dialog over win (AdwMessageDialog, transient for it), NULL when none; answering it
 * as a click on one of its responses would. */
AdwMessageDialog *find_dialog(ClWindow *win);
/* The widget of type `type` under root, NULL when none. */
GtkWidget *find_widget_of_type(GtkWidget *root, GType type);
/* The text of the first label under root that contains needle, NULL when none. */
const char *label_containing(GtkWidget *root, const char *needle);
void answer_dialog(ClWindow *win, const char *response);
/* A press on the view as the pointer's would start it (its primary-button drag gesture). */
void press_view(ClImageView *view, double x, double y);
/* The first text view in the window (the description's editor). */
GtkTextView *find_text_view(ClWindow *win);
/* win.compare-mode, checked. */
void set_mode(ClWindow *win, const char *mode);

/* Larger images (320 × 240) with a shared scene and one change (`changed`), shifted by (dx, dy),
 * for the compare modes and the model. */
void write_scene_at(const char *path, gboolean changed, double dx, double dy);
void write_scene(const char *path, gboolean changed);
/* A case in db named name of two such scenes (stem-1.png, stem-2.png in tmpdir), the later one
 * changed and shifted by (dx, 0); its id. */
gint64 shifted_case(ClCaseDb *db, const char *name, const char *stem, double dx);
/* Wait conditions (data: the ClWindow): no export running; no model run or alignment busy; idle
 * with the first view's document shown. */
gboolean not_exporting(gpointer data);
gboolean not_busy(gpointer data);
gboolean case_shown(gpointer data);
/* Types text into the description's editor as a user would (the buffer marked modified). */
void set_description_text(ClWindow *win, const char *text);
/* The case's description versions. */
guint n_versions(ClCaseDb *db, gint64 id);
/* The widget under root whose action is action_name (a button, the header bar's link toggle,
 * ...), depth first; NULL when none. */
GtkWidget *find_actionable(GtkWidget *root, const char *action_name);

/* Each test file's tests (test-ui-window.c, test-ui-compare.c, test-ui-describe.c,
 * test-ui-cases.c, test-ui-report.c). */
void test_ui_window_register(void);
void test_ui_compare_register(void);
void test_ui_describe_register(void);
void test_ui_cases_register(void);
void test_ui_report_register(void);
