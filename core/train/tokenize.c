/* tokenize.c - the COCO caption evaluation's tokenizer (metrics.h): Stanford PTBTokenizer's
 * behaviour on ordinary English captions, then pycocoevalcap's punctuation removal. */
#include "train/metrics.h"

#include <string.h>

/* pycocoevalcap's PUNCTUATIONS after PTB's -lowerCase: the bracket names no longer match. */
static const char *const removed[] = { "''", "'", "``", "`",  ".",   "?", "!",
                                       ",",  ":", "-",  "--", "...", ";", NULL };

/* Abbreviations PTB keeps with their period (a subset of PTBLexer's list). */
static const char *const abbrevs[] = { "mr",  "mrs",  "ms",   "dr",  "st",  "vs",   "etc", "jr",
                                       "sr",  "prof", "inc",  "ltd", "co",  "corp", "mt",  "jan",
                                       "feb", "aug",  "sept", "oct", "nov", "dec",  NULL };

static const char *const clitics[] = { "n't", "'s", "'re", "'ve", "'ll", "'m", "'d", NULL };

static gboolean in_list(const char *const *list, const char *s, gsize n)
{
    for (int i = 0; list[i]; i++)
        if (strlen(list[i]) == n && !strncmp(list[i], s, n))
            return TRUE;
    return FALSE;
}

static gboolean is_word_char(gunichar c)
{
    if (c < 0x80)
        return g_ascii_isalnum((char)c) || c == '@' || c == '_';
    return c != 0xFFFD && (g_unichar_isalnum(c) || g_unichar_ismark(c));
}

static void emit(GPtrArray *out, const char *s, gsize n)
{
    if (n == 0 || in_list(removed, s, n))
        return;
    g_ptr_array_add(out, g_strndup(s, n));
}

/* A word with its clitics split off: "don't" -> "do" "n't", "cannot" -> "can" "not". */
static void emit_word(GPtrArray *out, const char *s, gsize n)
{
    static const char *const split[][2] = {
        { "cannot", "can" }, { "gonna", "gon" }, { "wanna", "wan" }, { "gotta", "got" }
    };
    for (gsize i = 0; i < G_N_ELEMENTS(split); i++) {
        gsize k = strlen(split[i][0]);
        if (n == k && !strncmp(s, split[i][0], k)) {
            gsize h = strlen(split[i][1]);
            emit(out, s, h);
            emit(out, s + h, n - h);
            return;
        }
    }
    for (int i = 0; clitics[i]; i++) {
        gsize k = strlen(clitics[i]);
        if (n > k && !strncmp(s + n - k, clitics[i], k)) {
            emit(out, s, n - k);
            emit(out, s + n - k, k);
            return;
        }
    }
    emit(out, s, n);
}

/* "u.s." "e.g." "a.m.": single letters each followed by a period. */
static gboolean is_acronym(const char *s, gsize n)
{
    if (n < 4 || n % 2)
        return FALSE;
    for (gsize i = 0; i < n; i += 2)
        if (!g_ascii_isalpha(s[i]) || s[i + 1] != '.')
            return FALSE;
    return TRUE;
}

/* One whitespace-free chunk of lower-case valid UTF-8. */
static void tokenize_chunk(GPtrArray *out, const char *s, gsize n, gboolean next_is_number)
{
    gsize i = 0;
    while (i < n) {
        const char *p = s + i;
        gunichar c = g_utf8_get_char(p);
        gsize cl = (gsize)(g_utf8_next_char(p) - p);
        gunichar c1 = i + cl < n ? g_utf8_get_char(p + cl) : 0;
        if (c == 0xFFFD) { /* untokenizable: dropped */
            i += cl;
            continue;
        }
        /* signed numbers: "-5", "+3", "-0.5" */
        gboolean sign = (c == '-' || c == '+') && g_ascii_isdigit((char)c1) &&
                        (i == 0 || !is_word_char(g_utf8_get_char(g_utf8_prev_char(p))));
        if (is_word_char(c) || sign) {
            gsize j = i + cl;
            for (;;) {
                if (j >= n)
                    break;
                gunichar d = g_utf8_get_char(s + j);
                gsize dl = (gsize)(g_utf8_next_char(s + j) - (s + j));
                gunichar d1 = j + dl < n ? g_utf8_get_char(s + j + dl) : 0;
                gunichar d0 = g_utf8_get_char(g_utf8_prev_char(s + j));
                if (is_word_char(d)) {
                    j += dl;
                } else if ((d == '.' || d == '-' || d == '/') && d1 && is_word_char(d1)) {
                    j += dl; /* 0.1234, x.y, left-most, a/b */
                } else if ((d == ',' || d == ':') && d0 < 0x80 && g_ascii_isdigit((char)d0) &&
                           d1 < 0x80 && g_ascii_isdigit((char)d1)) {
                    j += dl; /* 1,000 and 3:4 */
                } else if ((d == '\'' || d == 0x2019) && d1 && is_word_char(d1)) {
                    j += dl; /* o'clock, don't, it's: clitics are split below */
                } else {
                    break;
                }
            }
            g_autoptr(GString) w = g_string_new_len(p, (gssize)(j - i));
            /* normalise the curly apostrophe (3 bytes) to ' */
            for (char *q; (q = strstr(w->str, "\xe2\x80\x99"));) {
                gssize at = q - w->str;
                g_string_erase(w, at, 2);
                w->str[at] = '\'';
            }
            /* a trailing period stays on acronyms and known abbreviations */
            if (j < n && s[j] == '.') {
                gboolean keep =
                    in_list(abbrevs, w->str, w->len) || (next_is_number && !strcmp(w->str, "no"));
                g_string_append_c(w, '.');
                if (keep || is_acronym(w->str, w->len))
                    j++;
                else
                    g_string_truncate(w, w->len - 1);
            }
            emit_word(out, w->str, w->len);
            i = j;
            continue;
        }
        /* punctuation runs */
        if (c == '.' || c == '-') {
            gsize j = i;
            while (j < n && s[j] == (char)c)
                j++;
            if (c == '.' && j - i >= 3)
                emit(out, "...", 3);
            else if (c == '-' && j - i >= 2)
                emit(out, "--", 2);
            else
                emit(out, p, 1); /* dropped, like ". ." */
            i = j;
            continue;
        }
        switch (c) {
        case '(': emit(out, "-lrb-", 5); break;
        case ')': emit(out, "-rrb-", 5); break;
        case '[': emit(out, "-lsb-", 5); break;
        case ']': emit(out, "-rsb-", 5); break;
        case '{': emit(out, "-lcb-", 5); break;
        case '}': emit(out, "-rcb-", 5); break;
        case 0x2014:
        case 0x2013:
        case 0x2026: /* em/en dash, ellipsis: become -- and ... */
        case '"':
        case '\'':
        case '`':
        case 0x201C:
        case 0x201D:
        case 0x2018:
        case 0x2019: break;        /* quotes: dropped */
        default: emit(out, p, cl); /* , ; : ! ? dropped by emit; % $ # & * = < > kept as tokens */
        }
        i += cl;
    }
}

char **cl_metrics_tokenize(const char *text)
{
    GPtrArray *out = g_ptr_array_new();
    if (text) {
        g_autofree char *valid = g_utf8_make_valid(text, -1);
        g_autofree char *lower = g_utf8_strdown(valid, -1);
        const char *s = lower;
        while (*s) {
            while (*s && g_ascii_isspace(*s))
                s++;
            const char *e = s;
            while (*e && !g_ascii_isspace(*e))
                e++;
            if (e == s)
                break;
            const char *nx = e;
            while (*nx && g_ascii_isspace(*nx))
                nx++;
            tokenize_chunk(out, s, (gsize)(e - s), g_ascii_isdigit(*nx));
            s = e;
        }
    }
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_free(out, FALSE);
}

char *cl_metrics_tokenize_join(const char *text)
{
    g_auto(GStrv) toks = cl_metrics_tokenize(text);
    return g_strjoinv(" ", toks);
}
