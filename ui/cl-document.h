/* cl-document.h - ClDocument: one opened image file (decoded ClImage, GFile, display name). */
#pragma once

#include <gio/gio.h>

#include "image/image.h"

G_BEGIN_DECLS

#define CL_TYPE_DOCUMENT (cl_document_get_type())
G_DECLARE_FINAL_TYPE(ClDocument, cl_document, CL, DOCUMENT, GObject)

/* Loads file synchronously (call it from a worker thread). Local files are mapped; other GFiles
 * (gvfs, portals) are read into memory. limits may be NULL for the defaults. Returns a new
 * document or NULL with error; the message names the file. */
ClDocument *cl_document_load(GFile *file, const ClImageLimits *limits, GCancellable *cancellable,
                             GError **error);

/* Wraps an image already decoded; takes ownership of image. file may be NULL. */
ClDocument *cl_document_new(ClImage *image, GFile *file);

/* The decoded image: owned by the document, immutable, safe to read from any thread. */
const ClImage *cl_document_get_image(ClDocument *self);
GFile *cl_document_get_file(ClDocument *self);      /* may be NULL */
const char *cl_document_get_name(ClDocument *self); /* for display: "before.png" */
guint cl_document_get_n_frames(ClDocument *self);

G_END_DECLS
