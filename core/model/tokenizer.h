/* tokenizer.h - byte-level BPE with chat special tokens (docs/MODEL.md §5). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _ClTokenizer ClTokenizer;

enum {
    CL_TOKEN_ENDOFTEXT = 256,
    CL_TOKEN_IM_START = 257,
    CL_TOKEN_IM_END = 258,
    CL_TOKEN_IMAGE = 259,
    CL_TOKEN_PAD = 260,
    CL_TOKEN_FIRST_MERGE = 261,
};

/* Bytes + special tokens, no merges. */
ClTokenizer *cl_tokenizer_new_bytes(void);
/* Trains merges on a corpus until `vocab_size` ids exist (or no pair occurs twice). */
ClTokenizer *cl_tokenizer_train(const char *const *texts, gsize n_texts, int vocab_size,
                                GError **error);
ClTokenizer *cl_tokenizer_from_json(const char *json, GError **error);
char *cl_tokenizer_to_json(const ClTokenizer *tok);
void cl_tokenizer_free(ClTokenizer *tok);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClTokenizer, cl_tokenizer_free)

int cl_tokenizer_vocab_size(const ClTokenizer *tok);
/* Encodes `len` bytes (any bytes; -1 = NUL-terminated); special tokens are recognised when
 * `specials` is TRUE. Returns a GArray of gint32 ids. */
GArray *cl_tokenizer_encode(const ClTokenizer *tok, const char *text, gssize len, gboolean specials);
/* Appends the bytes of the ids (special tokens as their text) to `out`. */
void cl_tokenizer_decode(const ClTokenizer *tok, const gint32 *ids, gsize n, GString *out);
/* The bytes of one token (for streaming); NULL for an invalid id. */
const char *cl_tokenizer_token_bytes(const ClTokenizer *tok, gint32 id, gsize *len);

G_END_DECLS
