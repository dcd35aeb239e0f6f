/* casedb.h - the case database (docs/DESIGN.md §6): cases, their images, model runs, descriptions
 * with every edit kept as a version, heatmaps, notes, key images and an audit log, in one SQLite
 * file or, for a department that reviews together, in a database on a PostgreSQL server (a
 * postgresql:// location: the same schema, migrations and behaviour); full-text search over
 * descriptions, notes, image metadata and case names.
 *
 * Threading: a ClCaseDb is one connection owned by the thread that opened it; every call must
 * come from that thread (checked). Other processes (or other connections) may read while it
 * writes (SQLite's WAL; PostgreSQL's snapshots); writers take turns. Every write is one
 * transaction: it happens completely or not at all.
 *
 * Ownership: functions returning structs or arrays give the caller ownership (free with the
 * matching _free, or g_ptr_array_unref for arrays, which own their elements). Strings passed in
 * are copied. Text is stored as given when valid UTF-8; invalid UTF-8 is stored with the bad
 * bytes replaced by U+FFFD (never refused, never truncated). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define CL_CASEDB_ERROR (cl_casedb_error_quark())
typedef enum {
    CL_CASEDB_ERROR_OPEN,      /* cannot open or create the file (missing directory, permission) */
    CL_CASEDB_ERROR_TOO_NEW,   /* written by a newer ChangeLens (user_version above ours) */
    CL_CASEDB_ERROR_CORRUPT,   /* not a database, or malformed */
    CL_CASEDB_ERROR_READ_ONLY, /* file, directory or connection is read-only */
    CL_CASEDB_ERROR_FULL,      /* disk or quota full */
    CL_CASEDB_ERROR_BUSY,      /* another process held the lock past the busy timeout */
    CL_CASEDB_ERROR_NOT_FOUND, /* no case / image with that id */
    CL_CASEDB_ERROR_INVALID,   /* bad argument: empty name, image of another case, ... */
    CL_CASEDB_ERROR_CONFLICT,  /* the description changed since the version the edit was based on */
    CL_CASEDB_ERROR_FAILED,    /* any other SQLite failure; the message carries SQLite's text */
} ClCaseDbError;
GQuark cl_casedb_error_quark(void);

typedef struct _ClCaseDb ClCaseDb;

typedef enum {
    CL_CASEDB_OPEN_DEFAULT = 0,        /* create the file (and its directory) if missing; migrate */
    CL_CASEDB_OPEN_READ_ONLY = 1 << 0, /* no writes, no migration (an older schema is refused) */
    CL_CASEDB_OPEN_NO_CREATE = 1 << 1, /* a missing file is an error */
} ClCaseDbOpenFlags;

/* The newest schema version this code knows (the number of migrations). */
int cl_casedb_schema_version(void);

/* The database's location: $CHANGELENS_DB when set and not empty, else
 * g_get_user_data_dir()/changelens/cases.db. Newly allocated. */
char *cl_casedb_default_path(void);
/* Whether a location names a database on a PostgreSQL server (a postgresql:// or postgres://
 * address, libpq's URI form: postgresql://USER@HOST:PORT/DATABASE?OPTIONS) rather than an SQLite
 * file. */
gboolean cl_casedb_is_server(const char *location);

/* Opens (and creates, and migrates to cl_casedb_schema_version()) the database at path;
 * ":memory:" gives a private in-memory database. Sets WAL (file databases), synchronous=NORMAL
 * (FULL for the reviewer's writes: edits, accept/reject, notes, key images; docs/DESIGN.md §6),
 * foreign_keys=ON and a busy timeout of 5 s. A database with a user_version above ours fails with
 * TOO_NEW and a message naming both versions; a file that is not a database fails with CORRUPT.
 * A file, folder or mount that cannot be written opens read-only (reads work; every write fails
 * with READ_ONLY and a message saying why), unless the schema is older and must be migrated. */
ClCaseDb *cl_casedb_open(const char *path, ClCaseDbOpenFlags flags, GError **error);
/* Tests: opens like cl_casedb_open but migrates only up to `version` (0 = an empty schema). */
ClCaseDb *cl_casedb_open_at_version(const char *path, int version, GError **error);
/* Runs the migrations from the current user_version up to target (each in one transaction with
 * its PRAGMA user_version). */
gboolean cl_casedb_migrate(ClCaseDb *db, int target, GError **error);
void cl_casedb_close(ClCaseDb *db);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClCaseDb, cl_casedb_close)
/* Hands the connection to the calling thread: a database opened on a worker thread (a server
 * that may take seconds to answer) and given to the main thread, which owns it from then on. The
 * thread that opened it must not use it again. */
void cl_casedb_adopt(ClCaseDb *db);

int cl_casedb_user_version(ClCaseDb *db);
const char *cl_casedb_path(ClCaseDb *db);
/* The engine, for people: "SQLite 3.40.1" or "PostgreSQL 15.18" (the server's). */
const char *cl_casedb_engine(ClCaseDb *db);
/* The database's size in bytes (SQLite: the file's pages; PostgreSQL: the database's on the
 * server), -1 when unknown. */
gint64 cl_casedb_size(ClCaseDb *db);

/* Benchmarks and tests: a new, empty database `name` on the PostgreSQL server of `server` (a
 * postgresql:// address; its user needs the right to create databases); *out_location its
 * address. Dropping it ends every connection to it first. */
gboolean cl_casedb_server_create_database(const char *server, const char *name, char **out_location,
                                          GError **error);
gboolean cl_casedb_server_drop_database(const char *server, const char *name, GError **error);
/* PRAGMA integrity_check and foreign_key_check; FALSE + CORRUPT naming the first problem. */
gboolean cl_casedb_check_integrity(ClCaseDb *db, GError **error);
/* Who the audit log and new versions name when no author is given (default g_get_user_name()). */
void cl_casedb_set_actor(ClCaseDb *db, const char *actor);
const char *cl_casedb_get_actor(ClCaseDb *db);
/* Tests and the full-disk path: caps the file at max_pages pages (PRAGMA max_page_count). */
void cl_casedb_set_max_pages(ClCaseDb *db, gint64 max_pages);

/* ---- the records ---- */

typedef enum {
    CL_DESC_DRAFT = 0,
    CL_DESC_ACCEPTED,
    CL_DESC_REJECTED,
} ClDescStatus;
const char *cl_desc_status_name(ClDescStatus s); /* "draft", "accepted", "rejected" */
gboolean cl_desc_status_parse(const char *name, ClDescStatus *out);

typedef enum {
    CL_FILE_UNCHECKED = 0,
    CL_FILE_OK,         /* there, same size and content hash */
    CL_FILE_MISSING,    /* no file at the path (moved or deleted) */
    CL_FILE_CHANGED,    /* there, but its sha256 differs from the one recorded */
    CL_FILE_UNREADABLE, /* there, but cannot be read (permission, IO error) */
} ClFileState;
const char *
cl_file_state_name(ClFileState s); /* "unchecked", "ok", "missing", "changed", "unreadable" */

typedef struct {
    gint64 id;
    char *name;
    char *created_at; /* ISO 8601 UTC with milliseconds: "2026-11-21T21:30:00.123Z" */
    char *updated_at; /* last change to the case or anything in it */
    guint n_images;
    gboolean has_description;
    ClDescStatus status; /* of the current description version (DRAFT when none) */
    char *modalities; /* distinct modalities (DICOM) or formats of its images, "DX" or "PNG, TIFF";
                          * "" when it has no images */
} ClCaseSummary;

/* One image of a case: a frame of a file, referenced by path and content hash (not copied). */
typedef struct {
    gint64 id;
    guint position;    /* 0-based order in the case: the model reads the images in this order */
    char *path;        /* absolute path, in the file system's encoding (not always UTF-8:
                        * show it with g_filename_display_name) */
    guint frame;       /* frame / page of the file */
    char *sha256;      /* lowercase hex of the file's bytes when added */
    gint64 file_size;  /* bytes when added */
    gint64 file_mtime; /* seconds since the epoch when added */
    char *format;      /* "DICOM", "PNG", "TIFF", ... */
    char *modality;    /* DICOM Modality, NULL elsewhere */
    guint width, height;
    guint n_frames;      /* frames of the file */
    char *acquired_at;   /* acquisition (or study) date-time from the metadata, NULL if unknown */
    char *metadata_json; /* JSON object: the image's metadata entries, key -> string
                           * (PatientName, StudyInstanceUID, GeoTIFF keys, ...); "{}" when none */
    char *added_at;
    ClFileState file_state; /* set by cl_casedb_get_case with CL_CASE_CHECK_FILES */
} ClCaseImage;

/* One run of the model over the case's images (provenance of a generated description). */
typedef struct {
    gint64 id;
    char *created_at;
    char *model_name;        /* model file path, or "random-init tiny" */
    char *model_sha256;      /* of the model file (of the weights for a random init) */
    char *model_config_json; /* the model's config */
    char *device;            /* "cpu (2 threads)", "cuda (NVIDIA H100)" */
    char *settings_json;     /* preprocessing, display and generation settings: prompt, domain,
                              * beam, max tokens, heatmap source, per-image display settings,
                              * the images' sha256 in order, ... */
    guint64 seed;
    double preprocess_ms, encode_ms, prefill_ms, decode_ms, total_ms;
    guint n_tokens; /* generated tokens */
} ClCaseRun;

/* One version of a description. A description starts as version 1 (generated by a run, author
 * "model", or written by hand) and every edit, accept or reject adds the next version; nothing
 * is ever overwritten. The case's current description is the latest version of its latest
 * description. */
typedef struct {
    gint64 id;             /* this version's row id */
    gint64 description_id; /* shared by all versions of one description */
    gint64 run_id;         /* the run that generated version 1; 0 for a hand-written description */
    guint version;         /* 1, 2, ... */
    char *text;
    ClDescStatus status;
    char *author; /* "model" for a generated version 1, else the person */
    char *created_at;
} ClCaseDescVersion;

typedef struct {
    gint64 id;
    gint64 run_id;
    gint64 image_id;
    int layer;      /* encoder block, or -1 for the mean over blocks / the Δ map */
    char *kind;     /* "update_norm" or "delta" (cl_heatmap_source_name) */
    int input_size; /* the model input S the grid covers (cl_letterbox_init(w, h, S) maps it back) */
    guint grid_w, grid_h;
    float *data; /* grid_h × grid_w row-major; NULL unless asked for (CL_CASE_HEATMAP_DATA) */
} ClCaseHeatmap;

typedef struct {
    gint64 id;
    gint64 image_id; /* 0: about the whole case */
    char *author;
    char *text;
    char *created_at;
} ClCaseNote;

typedef struct {
    gint64 id;
    gint64 image_id;
    char *label; /* may be "" */
    char *created_at;
} ClCaseKeyImage;

typedef struct {
    gint64 id;
    char *at;
    char *actor;
    char *action;      /* "case.new", "image.add", "run.record", "description.edit",
                        * "description.accept", "description.reject", "note.add", "key_image.add",
                        * "case.delete", ... */
    gint64 case_id;    /* kept after the case is deleted */
    char *detail_json; /* JSON object with the action's particulars */
} ClCaseAudit;

typedef struct {
    ClCaseSummary summary;
    GPtrArray *images; /* ClCaseImage*, by position */
    GPtrArray *runs;   /* ClCaseRun*, oldest first */
    GPtrArray
        *descriptions;   /* ClCaseDescVersion*, every version of every description, oldest first */
    GPtrArray *heatmaps; /* ClCaseHeatmap* of every run, by run then image then layer */
    GPtrArray *notes;    /* ClCaseNote*, oldest first */
    GPtrArray *key_images; /* ClCaseKeyImage*, oldest first */
    GPtrArray *audit;      /* ClCaseAudit* of this case, oldest first */
} ClCase;

void cl_case_summary_free(ClCaseSummary *s);
void cl_case_image_clear(ClCaseImage *img); /* frees the strings, keeps the struct */
void cl_case_image_free(ClCaseImage *img);
void cl_case_run_free(ClCaseRun *run);
void cl_case_desc_version_free(ClCaseDescVersion *v);
void cl_case_heatmap_free(ClCaseHeatmap *hm);
void cl_case_free(ClCase *c);
/* A case with empty arrays that own their elements (for casedb.c and for tests building a
 * case by hand); the caller fills it. */
ClCase *cl_case_new_empty(void);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClCase, cl_case_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClCaseSummary, cl_case_summary_free)

/* Lookups in a loaded case (borrowed pointers, NULL when absent). */
const ClCaseDescVersion *cl_case_current_description(const ClCase *c);
/* Version 1 of the description `v` belongs to, when a run generated it (else NULL). */
const ClCaseDescVersion *cl_case_generated_version(const ClCase *c, const ClCaseDescVersion *v);
const ClCaseRun *cl_case_find_run(const ClCase *c, gint64 run_id);
const ClCaseRun *cl_case_latest_run(const ClCase *c);
const ClCaseImage *cl_case_find_image(const ClCase *c, gint64 image_id);
/* The heatmap of (run, image) with the given layer, or NULL. */
const ClCaseHeatmap *cl_case_find_heatmap(const ClCase *c, gint64 run_id, gint64 image_id,
                                          int layer);
/* TRUE when any image is a DICOM (de-identification is on by default for these cases). */
gboolean cl_case_has_dicom(const ClCase *c);

/* ---- writes (each one transaction, each recorded in the audit log) ---- */

gboolean cl_casedb_case_new(ClCaseDb *db, const char *name, gint64 *out_id, GError **error);
gboolean cl_casedb_case_rename(ClCaseDb *db, gint64 case_id, const char *name, GError **error);
/* Deletes the case and everything in it; the audit log keeps the deletion (with the name). */
gboolean cl_casedb_case_delete(ClCaseDb *db, gint64 case_id, GError **error);

/* Fills `out` (ids and file_state left 0) from a file: loads it with core/image (format,
 * modality, size, frames, metadata, acquisition time), hashes it (sha256), makes the path
 * absolute. frame must exist in the file. */
gboolean cl_case_image_from_file(const char *path, guint frame, ClCaseImage *out, GError **error);
/* Appends the images (ClCaseImage*, as filled by cl_case_image_from_file) after the case's
 * last one, all or none. out_ids (may be NULL) receives their new ids (gint64). */
gboolean cl_casedb_images_add(ClCaseDb *db, gint64 case_id, GPtrArray *images, GArray *out_ids,
                              GError **error);

/* Puts the case's images in this order (image_ids: every image of the case, once); the model
 * reads them in it. INVALID when the ids are not exactly the case's images. */
gboolean cl_casedb_images_reorder(ClCaseDb *db, gint64 case_id, const gint64 *image_ids, guint n,
                                  GError **error);

/* Records a run, its generated description (version 1, draft, author "model") and its heatmaps
 * (ClCaseHeatmap* with image_id, layer, kind, input_size, grid and data; run_id is ignored) in
 * one transaction. generated_text may be "" (an empty description is still recorded). */
gboolean cl_casedb_run_record(ClCaseDb *db, gint64 case_id, const ClCaseRun *run,
                              const char *generated_text, GPtrArray *heatmaps, gint64 *out_run_id,
                              gint64 *out_version_id, GError **error);

/* A new version of the case's current description with this text, status draft (a new
 * hand-written description, version 1, when the case has none). author NULL = the actor.
 * base_version_id: the version the editor started from, or 0 to skip the check; when the
 * current version is another one, nothing is written and the call fails with CONFLICT (the
 * caller still has its text). */
gboolean cl_casedb_description_edit(ClCaseDb *db, gint64 case_id, const char *text,
                                    const char *author, gint64 base_version_id,
                                    gint64 *out_version_id, GError **error);
/* A new version with the current text and this status (reviewer NULL = the actor). INVALID when
 * the case has no description. base_version_id: the version the reviewer read, or 0 to skip the
 * check; when the current version is another one (someone changed the text since), nothing is
 * written and the call fails with CONFLICT: nobody signs off a text they have not seen. */
gboolean cl_casedb_description_set_status(ClCaseDb *db, gint64 case_id, ClDescStatus status,
                                          const char *reviewer, gint64 base_version_id,
                                          gint64 *out_version_id, GError **error);
gboolean cl_casedb_note_add(ClCaseDb *db, gint64 case_id, gint64 image_id, const char *text,
                            gint64 *out_id, GError **error);
gboolean cl_casedb_key_image_add(ClCaseDb *db, gint64 case_id, gint64 image_id, const char *label,
                                 gint64 *out_id, GError **error);

/* ---- batch describe (changelens-cli batch) ---- */

typedef enum {
    CL_BATCH_NEW,     /* the line's case was made now */
    CL_BATCH_PENDING, /* made before, no run recorded yet (a killed task's, say) */
    CL_BATCH_DONE,    /* its case has a run: nothing to do */
} ClBatchState;
/* The case of manifest line `key` of `manifest`: made the first time — the case `name`, its
 * images and the line's record in one transaction, so a killed process leaves all or nothing —
 * and found again after (a re-run, another shard). *state says which; *case_id is the case. */
gboolean cl_casedb_batch_case(ClCaseDb *db, const char *manifest, const char *key, const char *name,
                              GPtrArray *images, gint64 *case_id, ClBatchState *state,
                              GError **error);
/* How many of the manifest's lines have a case, and how many of those a run. */
gboolean cl_casedb_batch_counts(ClCaseDb *db, const char *manifest, gint64 *made, gint64 *described,
                                GError **error);

/* ---- reads ---- */

/* The newest change anyone made to the database (the id of its last audit entry: every write is
 * audited, this connection's and every other's). A window polls it to see another reviewer's
 * edit. */
gboolean cl_casedb_last_change(ClCaseDb *db, gint64 *out_change, GError **error);

/* Every case, most recently updated first (ClCaseSummary*). */
GPtrArray *cl_casedb_list(ClCaseDb *db, GError **error);

typedef enum {
    CL_CASE_GET_DEFAULT = 0,
    CL_CASE_HEATMAP_DATA = 1 << 0, /* load the heatmap grids (else data stays NULL) */
    CL_CASE_CHECK_FILES = 1 << 1,  /* set each image's file_state (stat; rehash when size or
                                    * mtime differ from the recorded ones) */
} ClCaseGetFlags;
/* NULL + NOT_FOUND when there is no such case. */
ClCase *cl_casedb_get_case(ClCaseDb *db, gint64 case_id, ClCaseGetFlags flags, GError **error);

typedef struct {
    gint64 case_id;
    char *case_name;
    char *field;   /* where it matched: "name", "description", "note", "metadata" */
    char *snippet; /* the matching text around the hit, hits wrapped in [ ] */
    double rank;   /* bm25; lower is better */
} ClCaseSearchHit;
void cl_case_search_hit_free(ClCaseSearchHit *h);
/* Full-text search (FTS5) over case names, current descriptions, notes and image metadata. The
 * query is the user's words, never FTS syntax: every word must match (as a prefix for the last
 * one); quotes, operators and punctuation are taken literally. Best first, at most `limit`
 * hits, at most one per case (its best). An empty query gives an empty array. */
GPtrArray *cl_casedb_search(ClCaseDb *db, const char *query, guint limit, GError **error);

G_END_DECLS
