/* cl-filmstrip.h - ClFilmstrip: thumbnails of every image of the sequence, under the panes. */
#pragma once

#include <gtk/gtk.h>

#include "cl-document.h"

G_BEGIN_DECLS

/* One item of a sequence: a frame of a document. */
typedef struct {
    ClDocument *doc;
    guint frame;
} ClFilmstripItem;

#define CL_TYPE_FILMSTRIP (cl_filmstrip_get_type())
G_DECLARE_FINAL_TYPE(ClFilmstrip, cl_filmstrip, CL, FILMSTRIP, GtkBox)

/* Shows the items (thumbnails rendered off the main thread; cancellable stops them), hidden
 * while there are two or fewer. A click on item i emits "pair-chosen" (guint i: show it next to
 * the one before it), a drag of item `from` onto item `to` emits "item-moved" (guint from,
 * guint to). */
void cl_filmstrip_set_items(ClFilmstrip *self, const ClFilmstripItem *items, guint n,
                            GCancellable *cancellable);
/* Marks items a and b as the pair shown. */
void cl_filmstrip_mark_pair(ClFilmstrip *self, guint a, guint b);
guint cl_filmstrip_get_n_items(ClFilmstrip *self);

G_END_DECLS
