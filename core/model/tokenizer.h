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

#define CL_TOKENIZER_N_SPECIAL 5
/* Bit masks for cl_tokenizer_encode_append's `specials`: bit k recognises id 256 + k. */
#define CL_TOKENIZER_SPECIAL_BIT(id) (1u << ((id)-CL_TOKEN_ENDOFTEXT))
#define CL_TOKENIZER_ALL_SPECIALS 0x1fu
/* Limits (validated on load; training never exceeds them), so a hostile file cannot ask for
 * absurd allocations. */
#define CL_TOKENIZER_MAX_VOCAB 1048576           /* ids in all, = CL_CONFIG_MAX_VOCAB */
#define CL_TOKENIZER_MAX_TOKEN_LEN 1024          /* bytes of one token */
#define CL_TOKENIZER_MAX_TOTAL_BYTES (64u << 20) /* bytes of all tokens together */

/* Pre-tokenisation (the choices docs/MODEL.md §5 leaves open): letters are ASCII letters and
 * every byte >= 0x80 (so UTF-8 sequences, valid or not, stay in one piece); whitespace is
 * space, \t, \n, \v, \f, \r; "other" is every remaining byte except digits. The optional
 * leading space is the byte 0x20 only. A whitespace run followed by a letter or other byte
 * leaves its last byte to that piece when that byte is a space and the run is longer than
 * one (as GPT-2's `\s+(?!\S)`): "a  b" -> "a", " ", " b". Digits never take a space. */

/* How text is cut into pieces before the merges. CL_PRETOK_CHANGELENS: ours (above; the
 * tokenizers trained here). CL_PRETOK_GPT2_DIGITS: every Unicode number code point alone, then
 * GPT-2's pattern on Unicode classes (contractions 's 't 're 've 'm 'll 'd, an optional leading
 * space before letters, numbers or other characters, whitespace runs that leave their last code
 * point to a following non-space) — the pretrained SmolLM2 tokenizer's. */
typedef enum {
    CL_PRETOK_CHANGELENS,
    CL_PRETOK_GPT2_DIGITS,
} ClPretokenizer;

/* Bytes + special tokens, no merges. */
ClTokenizer *cl_tokenizer_new_bytes(void);
/* Trains merges on a corpus until `vocab_size` ids exist (or no pair occurs twice).
 * Special token texts in the corpus are split out, never merged. Ties between equally frequent
 * pairs go to the lowest (a, b); deterministic. */
ClTokenizer *cl_tokenizer_train(const char *const *texts, gsize n_texts, int vocab_size,
                                GError **error);
/* A tokenizer of `n` merges (pairs of ids, merge i making id CL_TOKEN_FIRST_MERGE + i; copied)
 * cutting text with `pre`. The JSON form keeps `pre` ("pretokenizer", absent for ours). */
ClTokenizer *cl_tokenizer_new_from_merges(const gint32 *merges, gsize n, ClPretokenizer pre,
                                          GError **error);
ClPretokenizer cl_tokenizer_pretokenizer(const ClTokenizer *tok);
ClTokenizer *cl_tokenizer_from_json(const char *json, GError **error);
char *cl_tokenizer_to_json(const ClTokenizer *tok);
void cl_tokenizer_free(ClTokenizer *tok);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClTokenizer, cl_tokenizer_free)

int cl_tokenizer_vocab_size(const ClTokenizer *tok);
/* Encodes `len` bytes (any bytes; -1 = NUL-terminated); special tokens are recognised when
 * `specials` is TRUE. Returns a GArray of gint32 ids. */
GArray *cl_tokenizer_encode(const ClTokenizer *tok, const char *text, gssize len,
                            gboolean specials);
/* Appends the ids of `len` bytes to `out` (gint32), recognising the special tokens whose
 * CL_TOKENIZER_SPECIAL_BIT is set in `specials`. Thread-safe (the piece cache is locked). */
void cl_tokenizer_encode_append(const ClTokenizer *tok, const char *text, gssize len,
                                guint specials, GArray *out);
/* The text of a special token id (256..260), NULL for other ids. */
const char *cl_tokenizer_special_text(gint32 id);
/* Appends the bytes of the ids (special tokens as their text) to `out`; ids outside the
 * vocabulary add nothing (a model's vocab_size may exceed the tokenizer's). */
void cl_tokenizer_decode(const ClTokenizer *tok, const gint32 *ids, gsize n, GString *out);
/* The bytes of one token (for streaming); NULL for an invalid id. */
const char *cl_tokenizer_token_bytes(const ClTokenizer *tok, gint32 id, gsize *len);

G_END_DECLS
