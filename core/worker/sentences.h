/* sentences.h - which part of the image each sentence of a description rests on (docs/DESIGN.md §9:
 * "change descriptions tied to regions"): the generated text cut into sentences, and for each the
 * decoder's attention over the later image's visual tokens, averaged over the sentence's tokens
 * and the heads of the last block. */
#pragma once

#include <glib.h>

#include "nn/backend.h"
#include "model/describe.h"
#include "model/heatmap.h"
#include "model/model.h"

G_BEGIN_DECLS

typedef struct {
    gsize start, end; /* byte range of the sentence in the result's text made valid UTF-8
                       * (g_utf8_make_valid: what the description panel shows) */
    ClHeatmap *map;   /* on the merger grid of the image (its letterbox maps it back), owned */
} ClSentenceMap;

void cl_sentence_map_free(ClSentenceMap *s);

/* For a finished describe result (res->prompt_ids, res->visual, res->ids set): one forward pass
 * of the decoder over prompt + generated tokens, the last block's attention of every generated
 * token over image `image`'s visual tokens, grouped by sentence (a sentence ends after '.', '!',
 * '?' or a newline; trailing text without one is the last sentence). Returns ClSentenceMap*
 * (owned by the array), empty when nothing was generated, or NULL + error. */
GPtrArray *cl_sentence_maps(ClBackend *be, const ClModel *model, const ClDescribeResult *res,
                            guint image, GError **error);

G_END_DECLS
