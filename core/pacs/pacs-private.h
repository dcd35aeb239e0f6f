/* pacs-private.h - what the DIMSE side (pacs.cc) and the DICOMweb side (dicomweb.cc) share. */
#pragma once

#include "pacs/pacs.h"

G_BEGIN_DECLS

/* The order cl_pacs_find returns: study date, time, UID, then series number (qsort-style). */
int cl_pacs_match_compare(const ClPacsMatch *a, const ClPacsMatch *b);

/* The query has a key to look for (and a study UID for the series level: one usable in a URL
 * when uid_in_url); FALSE + CL_PACS_ERROR_INVALID otherwise. */
gboolean cl_pacs_check_query(ClPacsLevel level, const ClPacsQuery *query, gboolean uid_in_url,
                             GError **error);

/* A study UID (usable in a URL when uid_in_url) and a folder, created if missing, to retrieve
 * into; FALSE + CL_PACS_ERROR_INVALID or _IO otherwise. */
gboolean cl_pacs_check_get(const char *study_uid, const char *out_dir, gboolean uid_in_url,
                           GError **error);

/* A UID usable as a file name: 1-64 digits and dots, not starting with a dot. */
gboolean cl_pacs_uid_is_safe(const char *uid);

/* The DICOMweb side: cl_pacs_find, cl_pacs_get_study and cl_pacs_store_files when the peer
 * names a DICOMweb base URL (peer->dicomweb). */
GPtrArray *cl_dicomweb_find(const ClPacsPeer *peer, ClPacsLevel level, const ClPacsQuery *query,
                            GError **error);
gboolean cl_dicomweb_get_study(const ClPacsPeer *peer, const char *study_uid, const char *out_dir,
                               GPtrArray *files, GError **error);
gboolean cl_dicomweb_store_files(const ClPacsPeer *peer, const char *const *paths, guint *n_stored,
                                 GError **error);

G_END_DECLS
