/* pretokenize.c - cutting text into the pieces BPE merges within (docs/MODEL.md §5): ours, and
 * GPT-2's pattern with digits apart (§4.7); special tokens cut out first. */
#include "model/tokenizer-private.h"

#include <string.h>

const char *const cl_tokenizer_special_texts[CL_TOKENIZER_N_SPECIAL] = {
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<|pad|>",
};

/* ---- ours ----------------------------------------------------------------------- */

enum { C_OTHER, C_LETTER, C_DIGIT, C_SPACE };

static inline int byte_class(guchar c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80)
        return C_LETTER;
    if (c >= '0' && c <= '9')
        return C_DIGIT;
    if (c == ' ' || (c >= '\t' && c <= '\r'))
        return C_SPACE;
    return C_OTHER;
}

/* End of the piece that starts at `i` (< n). */
static gsize next_piece(const guchar *s, gsize n, gsize i)
{
    int c = byte_class(s[i]);
    gsize j = i + 1;
    if (s[i] == ' ' && j < n) {
        int d = byte_class(s[j]);
        if (d == C_LETTER || d == C_OTHER) { /* one leading space */
            while (j < n && byte_class(s[j]) == d)
                j++;
            return j;
        }
    }
    if (c == C_DIGIT)
        return j;
    while (j < n && byte_class(s[j]) == c)
        j++;
    if (c == C_SPACE && j < n && j - i > 1 && s[j - 1] == ' ') {
        int d = byte_class(s[j]);
        if (d == C_LETTER || d == C_OTHER)
            j--; /* the last space goes with the next piece */
    }
    return j;
}

/* ---- GPT-2's pre-tokenisation, digits apart (CL_PRETOK_GPT2_DIGITS) ----
 * Every \p{N} code point is a piece of its own; between them, GPT-2's pattern
 * 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * on code points. A byte that does not start valid UTF-8 counts as one "other" code point. */

enum { U_OTHER, U_LETTER, U_NUMBER, U_SPACE, U_END };

static gboolean unicode_space(gunichar c)
{
    return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
           c == 0x205f || c == 0x3000;
}

/* The class of the code point at s[i] (i < e, else U_END) and its length in bytes. */
static int cp_class(const guchar *s, gsize e, gsize i, gsize *len, gunichar *cp)
{
    *len = 1;
    *cp = 0xfffd;
    if (i >= e)
        return U_END;
    if (s[i] < 0x80) {
        *cp = s[i];
    } else {
        gunichar c = g_utf8_get_char_validated((const char *)s + i, (gssize)(e - i));
        if (c == (gunichar)-1 || c == (gunichar)-2)
            return U_OTHER;
        *cp = c;
        *len = (gsize)(g_utf8_next_char((const char *)s + i) - (const char *)(s + i));
    }
    if (unicode_space(*cp))
        return U_SPACE;
    switch (g_unichar_type(*cp)) {
    case G_UNICODE_UPPERCASE_LETTER:
    case G_UNICODE_LOWERCASE_LETTER:
    case G_UNICODE_TITLECASE_LETTER:
    case G_UNICODE_MODIFIER_LETTER:
    case G_UNICODE_OTHER_LETTER: return U_LETTER;
    case G_UNICODE_DECIMAL_NUMBER:
    case G_UNICODE_LETTER_NUMBER:
    case G_UNICODE_OTHER_NUMBER: return U_NUMBER;
    default: return U_OTHER;
    }
}

/* The end of a run of class `c` from i (< e). */
static gsize run_end(const guchar *s, gsize e, gsize i, int c)
{
    gsize len;
    gunichar cp;
    while (cp_class(s, e, i, &len, &cp) == c)
        i += len;
    return i;
}

/* End of GPT-2's piece that starts at i (< e) in a segment without numbers. */
static gsize next_piece_gpt2(const guchar *s, gsize e, gsize i)
{
    gsize len, len2;
    gunichar cp, cp2;
    int c = cp_class(s, e, i, &len, &cp);
    if (cp == '\'' && i + 1 < e) {
        guchar a = s[i + 1], b = i + 2 < e ? s[i + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd')
            return i + 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
            return i + 3;
    }
    int c2 = cp == ' ' ? cp_class(s, e, i + 1, &len2, &cp2) : c;
    gsize j = cp == ' ' ? i + 1 : i;
    if (c2 == U_LETTER || c2 == U_NUMBER || c2 == U_OTHER)
        return run_end(s, e, j, c2);
    /* whitespace: \s+(?!\S) leaves the last code point of a run to what follows it */
    gsize k = i, last = i;
    while (cp_class(s, e, k, &len, &cp) == U_SPACE) {
        last = k;
        k += len;
    }
    if (k > i)
        return (k < e && last > i) ? last : k;
    return i + len;
}

static void pieces_of_gpt2(const guchar *s, gsize n, ClPieceFunc piece, gpointer data)
{
    gsize i = 0, len;
    gunichar cp;
    while (i < n) {
        if (cp_class(s, n, i, &len, &cp) == U_NUMBER) {
            piece(s + i, len, data);
            i += len;
            continue;
        }
        gsize e = i; /* the segment up to the next number */
        while (e < n && cp_class(s, n, e, &len, &cp) != U_NUMBER)
            e += len;
        while (i < e) {
            gsize j = next_piece_gpt2(s, e, i);
            piece(s + i, j - i, data);
            i = j;
        }
    }
}

static void pieces_of_plain(const guchar *s, gsize n, ClPretokenizer pre, ClPieceFunc piece,
                            gpointer data)
{
    if (pre == CL_PRETOK_GPT2_DIGITS) {
        pieces_of_gpt2(s, n, piece, data);
        return;
    }
    for (gsize i = 0; i < n;) {
        gsize j = next_piece(s, n, i);
        piece(s + i, j - i, data);
        i = j;
    }
}

void cl_tokenizer_pieces(const guchar *s, gsize n, ClPretokenizer pre, guint specials,
                         ClPieceFunc piece, ClSpecialFunc special, gpointer data)
{
    specials &= CL_TOKENIZER_ALL_SPECIALS;
    gsize start = 0, i = 0;
    while (specials && i < n) {
        const guchar *lt = memchr(s + i, '<', n - i);
        if (!lt)
            break;
        i = (gsize)(lt - s);
        gint32 found = -1;
        gsize flen = 0;
        for (int k = 0; k < CL_TOKENIZER_N_SPECIAL; k++) {
            if (!(specials & (1u << k)))
                continue;
            gsize l = strlen(cl_tokenizer_special_texts[k]);
            if (l <= n - i && memcmp(s + i, cl_tokenizer_special_texts[k], l) == 0) {
                found = CL_TOKEN_ENDOFTEXT + k;
                flen = l;
                break;
            }
        }
        if (found < 0) {
            i++;
            continue;
        }
        pieces_of_plain(s + start, i - start, pre, piece, data);
        special(found, data);
        i += flen;
        start = i;
    }
    pieces_of_plain(s + start, n - start, pre, piece, data);
}
