/* cl-case-sidebar.h - ClCaseSidebar: the case search and the list of cases, left of the images. */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

#define CL_TYPE_CASE_SIDEBAR (cl_case_sidebar_get_type())
G_DECLARE_FINAL_TYPE(ClCaseSidebar, cl_case_sidebar, CL, CASE_SIDEBAR, GtkBox)

/* Filling the list: begin (empties it), a row per case (name over a dim line), end (selects the
 * row of case `selected`, none for 0). Selecting a row by hand (or cl_case_sidebar_step) emits
 * "case-activated" (gint64 id) from an idle, once the list is done with the row: opening a case
 * refills the list. Typing in the search emits "search-changed". "selected-case" (property): the
 * id of the selected row, 0 when none. */
void cl_case_sidebar_begin(ClCaseSidebar *self);
void cl_case_sidebar_add(ClCaseSidebar *self, gint64 id, const char *name, const char *subtitle);
void cl_case_sidebar_end(ClCaseSidebar *self, gint64 selected);
/* The search text (NULL or "" for the whole list, most recent first). */
const char *cl_case_sidebar_get_query(ClCaseSidebar *self);
/* Selects the next (delta 1) or previous (-1) row as the list is sorted or filtered. */
void cl_case_sidebar_step(ClCaseSidebar *self, int delta);
gint64 cl_case_sidebar_get_selected_case(ClCaseSidebar *self);

G_END_DECLS
