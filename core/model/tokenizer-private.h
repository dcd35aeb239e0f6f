/* tokenizer-private.h - what tokenizer.c (merges, encoding, training) and pretokenize.c (the
 * pieces) share. */
#pragma once

#include <glib.h>

#include "model/tokenizer.h"

/* "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<|pad|>": ids 256.. */
extern const char *const cl_tokenizer_special_texts[CL_TOKENIZER_N_SPECIAL];

typedef void (*ClPieceFunc)(const guchar *p, gsize len, gpointer data);
typedef void (*ClSpecialFunc)(gint32 id, gpointer data);

/* Calls piece(s + i, len, data) for every piece of s[0..n) as `pre` cuts it, the special tokens
 * whose CL_TOKENIZER_SPECIAL_BIT is in `specials` cut out first and reported as
 * special(id, data). */
void cl_tokenizer_pieces(const guchar *s, gsize n, ClPretokenizer pre, guint specials,
                         ClPieceFunc piece, ClSpecialFunc special, gpointer data);
