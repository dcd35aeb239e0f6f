/* cl-pacs-dialog.h - the "From PACS…" window: where the PACS is (DIMSE host, port and AE titles,
 * or a DICOMweb URL), a patient ID or an accession number, the studies found (oldest first, each
 * with a check box), and "Open as Case": the checked studies retrieved (core/pacs/pacs.h) into the
 * user's data folder and opened in the main window as one case, priors first. Every PACS call
 * runs in a thread; the window stays responsive and can be closed at any time. */
#pragma once

#include "cl-window.h"

G_BEGIN_DECLS

/* A new window over parent (not shown); it remembers the connection in parent's settings. */
GtkWindow *cl_pacs_dialog_new(ClWindow *parent);

/* Where retrieved studies are kept: $CHANGELENS_DATA/pacs, else the user data folder's
 * changelens/pacs. Newly allocated. */
char *cl_pacs_dialog_folder(void);

G_END_DECLS
