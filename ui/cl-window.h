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

/* index 0 = left, 1 = right. (transfer none) */
ClImageView *cl_window_get_view(ClWindow *self, guint index);

gboolean cl_window_get_link_views(ClWindow *self);
void cl_window_set_link_views(ClWindow *self, gboolean link_views);

/* TRUE while files are being loaded or frames rendered. */
gboolean cl_window_get_busy(ClWindow *self);

G_END_DECLS
