/* vist.h - VIST2 context compression (docs/MODEL.md §4.6): text in chunks
 * rendered into images with Pango/Cairo, encoded by the visual encoder as first images, kept in
 * the decoder only as their visual rows. */
#pragma once

#include <glib.h>

#include "nn/backend.h"
#include "model/decoder.h"
#include "model/model.h"

G_BEGIN_DECLS

/* The renderer (docs/MODEL.md §4.6): a white S × S page (S = image_size), black DejaVu Sans
 * Mono (fontconfig's "monospace" where it is missing) of vist_font_px pixels, grey antialiasing,
 * no hinting; a margin of max(2, S/40) pixels; wrapped at words, or inside a word longer than a
 * line; left to right, top to bottom. Text that does not fit is set smaller, a pixel at a time
 * down to 4 px, and then cut at the page's foot (*cut). grey: S × S bytes, 255 white. Invalid
 * UTF-8 is rendered with U+FFFD. font_px_used, cut: may be NULL. */
void cl_vist_render(const ClModelConfig *cfg, const char *text, guint8 *grey, int *font_px_used,
                    gboolean *cut);

/* A page (size² grey bytes) as a PNG. */
gboolean cl_vist_write_page_png(const guint8 *grey, int size, const char *path, GError **error);

/* The text tokens of a context of n tokens that VIST2 compresses: whole chunks of vist_chunk,
 * and the tail when longer than vist_tail (docs/MODEL.md §4.6's m > β); the rest stays text.
 * *n_chunks (may be NULL): the images it makes. 0 when the model has no VIST2. */
int cl_vist_plan(const ClModelConfig *cfg, int n_tokens, int *n_chunks);

/* A compressor: the model, its backend, an encoder state for the pages, the pages so far. */
typedef struct _ClVist ClVist;
/* NULL + CL_MODEL_ERROR_INPUT when the model has no VIST2 (config vist) */
ClVist *cl_vist_new(ClBackend *be, const ClModel *model, GError **error);
void cl_vist_free(ClVist *v);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClVist, cl_vist_free)
/* Pages rendered so far (each image_size² grey bytes) and their texts, for thumbnails. */
guint cl_vist_n_pages(const ClVist *v);
const guint8 *cl_vist_page(const ClVist *v, guint i, const char **text);

/* The model input (C, S, S) of a chunk of n token ids: decoded, rendered (grey: the page's S × S
 * bytes when not NULL), normalised as docs/MODEL.md §2. Returns the chunk's text (free it). */
char *cl_vist_chunk_pixels(const ClModel *model, const gint32 *ids, int n, float *pixels,
                           guint8 *grey);
/* n_pages pages (n_pages × (C, S, S), cl_vist_chunk_pixels) encoded each as a first image:
 * rows (n_pages × M × E). The trainer's pages (the encoder frozen for them, as VIST2's later
 * stages keep it). */
gboolean cl_vist_encode_pages(ClBackend *be, const ClModel *model, const float *pixels, int n_pages,
                              float *rows, GError **error);

/* The visual rows (M, E) of a chunk of n token ids: decoded, rendered (a page), encoded as a
 * first image. rows: M·E floats. */
gboolean cl_vist_encode(ClVist *v, const gint32 *ids, int n, float *rows, GError **error);

/* The compression step. The cache's last n positions hold this chunk's raw text ids (n >= 1).
 * They are replaced by the chunk's M visual rows at the chunk's positions (Pos(j) = P_i + j):
 *   mask "image": the text is evicted, then the rows run after the earlier chunks' rows;
 *   mask "paper": the rows run first, seeing the text, then the text is evicted.
 * logits (V, may be NULL): the last visual row's (they predict the next chunk's first token). */
gboolean cl_vist_compress(ClVist *v, ClKVCache *cache, const gint32 *ids, int n, float *logits,
                          GError **error);
/* The same step with the chunk's rows (M, E) already made (cl_vist_encode). */
gboolean cl_vist_compress_rows(ClVist *v, ClKVCache *cache, int n, const float *rows, float *logits,
                               GError **error);

/* A context (ids, n; text only) appended to the cache as VIST2 keeps it: cl_vist_plan's chunks
 * as visual rows (mask "image": their text never runs; "paper": it runs, then is evicted), the
 * rest as text. logits (V, may be NULL): the last position's. *added: positions the cache
 * gained. */
gboolean cl_vist_prefill(ClVist *v, ClKVCache *cache, const gint32 *ids, int n, float *logits,
                         int *added, GError **error);

G_END_DECLS
