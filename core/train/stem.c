/* stem.c - the Snowball English ("Porter2") stemmer, the one METEOR 1.5's stem module runs
 * (org.tartarus.snowball.ext.englishStemmer), written from the published algorithm. Works on
 * ASCII lower-case letters; words with other bytes are stemmed around them like any letter that
 * is not a vowel. */
#include "train/metrics.h"

#include <string.h>

typedef struct {
    char w[128];
    int len;
    int r1, r2;
} Word;

static gboolean is_vowel(char c)
{
    return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u' || c == 'y';
}

static gboolean ends(const Word *w, const char *s)
{
    int n = (int)strlen(s);
    return n <= w->len && memcmp(w->w + w->len - n, s, (size_t)n) == 0;
}

static void set_to(Word *w, int cut, const char *s) /* replace the last `cut` chars by s */
{
    int n = (int)strlen(s);
    w->len -= cut;
    if (w->len + n >= (int)sizeof w->w)
        return;
    memcpy(w->w + w->len, s, (size_t)n);
    w->len += n;
    w->w[w->len] = '\0';
}

/* A short syllable ending at i (inclusive): non-vowel, vowel, non-vowel other than w x Y; or, at
 * the start of the word, vowel then non-vowel. */
static gboolean short_syllable_at(const Word *w, int i)
{
    if (i == 1)
        return is_vowel(w->w[0]) && !is_vowel(w->w[1]);
    if (i < 2)
        return FALSE;
    char c = w->w[i];
    return !is_vowel(w->w[i - 2]) && is_vowel(w->w[i - 1]) && !is_vowel(c) && c != 'w' &&
           c != 'x' && c != 'Y';
}

static gboolean is_short(const Word *w)
{
    return w->r1 >= w->len && short_syllable_at(w, w->len - 1);
}

static gboolean has_vowel(const Word *w, int end)
{
    for (int i = 0; i < end; i++)
        if (is_vowel(w->w[i]))
            return TRUE;
    return FALSE;
}

static int region_after(const Word *w, int from)
{
    for (int i = from + 1; i < w->len; i++)
        if (!is_vowel(w->w[i]) && is_vowel(w->w[i - 1]))
            return i + 1;
    return w->len;
}

/* The longest of the suffixes that the word ends with, or -1. */
static int longest(const Word *w, const char *const *list)
{
    int best = -1, best_len = -1;
    for (int i = 0; list[i]; i++) {
        int n = (int)strlen(list[i]);
        if (n > best_len && ends(w, list[i])) {
            best = i;
            best_len = n;
        }
    }
    return best;
}

static gboolean in_r(int region, const Word *w, const char *suffix)
{
    return w->len - (int)strlen(suffix) >= region;
}

static void step1a(Word *w)
{
    static const char *const s[] = { "sses", "ied", "ies", "s", "us", "ss", NULL };
    int k = longest(w, s);
    if (k < 0)
        return;
    const char *suf = s[k];
    if (!strcmp(suf, "sses")) {
        set_to(w, 4, "ss");
    } else if (!strcmp(suf, "ied") || !strcmp(suf, "ies")) {
        set_to(w, 3, w->len > 4 ? "i" : "ie");
    } else if (!strcmp(suf, "s")) {
        /* delete if the part before the letter preceding the s has a vowel */
        if (has_vowel(w, w->len - 2))
            set_to(w, 1, "");
    }
}

static void step1b(Word *w)
{
    static const char *const s[] = { "eed", "eedly", "ed", "edly", "ing", "ingly", NULL };
    int k = longest(w, s);
    if (k < 0)
        return;
    const char *suf = s[k];
    int n = (int)strlen(suf);
    if (k <= 1) {
        if (in_r(w->r1, w, suf))
            set_to(w, n, "ee");
        return;
    }
    if (!has_vowel(w, w->len - n))
        return;
    set_to(w, n, "");
    if (ends(w, "at") || ends(w, "bl") || ends(w, "iz")) {
        set_to(w, 0, "e");
    } else if (w->len >= 2 && w->w[w->len - 1] == w->w[w->len - 2] &&
               strchr("bdfgmnprt", w->w[w->len - 1])) {
        set_to(w, 1, "");
    } else if (is_short(w)) {
        set_to(w, 0, "e");
    }
}

static void step1c(Word *w)
{
    if (w->len > 2 && (w->w[w->len - 1] == 'y' || w->w[w->len - 1] == 'Y') &&
        !is_vowel(w->w[w->len - 2]))
        w->w[w->len - 1] = 'i';
}

static void step2(Word *w)
{
    static const char *const s[] = { "tional",  "enci",    "anci",    "abli",    "entli",
                                     "izer",    "ization", "ational", "ation",   "ator",
                                     "alism",   "aliti",   "alli",    "fulness", "ousli",
                                     "ousness", "iveness", "iviti",   "biliti",  "bli",
                                     "ogi",     "fulli",   "lessli",  "li",      NULL };
    static const char *const r[] = { "tion", "ence", "ance", "able", "ent", "ize", "ize",  "ate",
                                     "ate",  "ate",  "al",   "al",   "al",  "ful", "ous",  "ous",
                                     "ive",  "ive",  "ble",  "ble",  "og",  "ful", "less", "" };
    int k = longest(w, s);
    if (k < 0 || !in_r(w->r1, w, s[k]))
        return;
    int n = (int)strlen(s[k]);
    if (!strcmp(s[k], "ogi")) {
        if (w->len >= 4 && w->w[w->len - 4] == 'l')
            set_to(w, n, r[k]);
    } else if (!strcmp(s[k], "li")) {
        if (w->len >= 3 && strchr("cdeghkmnrt", w->w[w->len - 3]))
            set_to(w, n, "");
    } else {
        set_to(w, n, r[k]);
    }
}

static void step3(Word *w)
{
    static const char *const s[] = { "tional", "ational", "alize", "icate", "iciti",
                                     "ical",   "ful",     "ness",  "ative", NULL };
    static const char *const r[] = { "tion", "ate", "al", "ic", "ic", "ic", "", "", "" };
    int k = longest(w, s);
    if (k < 0 || !in_r(w->r1, w, s[k]))
        return;
    if (!strcmp(s[k], "ative") && !in_r(w->r2, w, s[k]))
        return;
    set_to(w, (int)strlen(s[k]), r[k]);
}

static void step4(Word *w)
{
    static const char *const s[] = { "al",  "ance",  "ence", "er",  "ic",  "able", "ible",
                                     "ant", "ement", "ment", "ent", "ism", "ate",  "iti",
                                     "ous", "ive",   "ize",  "ion", NULL };
    int k = longest(w, s);
    if (k < 0 || !in_r(w->r2, w, s[k]))
        return;
    int n = (int)strlen(s[k]);
    if (!strcmp(s[k], "ion")) {
        if (w->len >= 4 && (w->w[w->len - 4] == 's' || w->w[w->len - 4] == 't'))
            set_to(w, n, "");
    } else {
        set_to(w, n, "");
    }
}

static void step5(Word *w)
{
    if (ends(w, "e")) {
        if (in_r(w->r2, w, "e")) {
            set_to(w, 1, "");
        } else if (in_r(w->r1, w, "e")) {
            Word t = *w;
            set_to(&t, 1, "");
            if (!short_syllable_at(&t, t.len - 1))
                set_to(w, 1, "");
        }
    } else if (ends(w, "ll") && in_r(w->r2, w, "l")) {
        set_to(w, 1, "");
    }
}

char *cl_metrics_stem(const char *word)
{
    static const char *const special[][2] = {
        { "skis", "ski" },    { "skies", "sky" },   { "dying", "die" },    { "lying", "lie" },
        { "tying", "tie" },   { "idly", "idl" },    { "gently", "gentl" }, { "ugly", "ugli" },
        { "early", "earli" }, { "only", "onli" },   { "singly", "singl" }, { "sky", "sky" },
        { "news", "news" },   { "howe", "howe" },   { "atlas", "atlas" },  { "cosmos", "cosmos" },
        { "bias", "bias" },   { "andes", "andes" },
    };
    static const char *const after1a[] = { "inning",  "outing", "canning", "herring", "earring",
                                           "proceed", "exceed", "succeed", NULL };
    gsize len = strlen(word);
    if (len <= 2 || len >= sizeof(((Word *)0)->w) - 8)
        return g_strdup(word);
    for (gsize i = 0; i < G_N_ELEMENTS(special); i++)
        if (!strcmp(word, special[i][0]))
            return g_strdup(special[i][1]);

    Word w;
    const char *p = word;
    if (*p == '\'')
        p++;
    w.len = (int)strlen(p);
    memcpy(w.w, p, (size_t)w.len + 1);
    /* y at the start or after a vowel is a consonant */
    for (int i = 0; i < w.len; i++)
        if (w.w[i] == 'y' && (i == 0 || is_vowel(w.w[i - 1])))
            w.w[i] = 'Y';
    if (g_str_has_prefix(w.w, "gener") || g_str_has_prefix(w.w, "arsen"))
        w.r1 = 5;
    else if (g_str_has_prefix(w.w, "commun"))
        w.r1 = 6;
    else
        w.r1 = region_after(&w, 0);
    if (w.r1 > w.len)
        w.r1 = w.len;
    w.r2 = w.r1 < w.len ? region_after(&w, w.r1) : w.len;

    /* step 0: possessives */
    if (ends(&w, "'s'"))
        set_to(&w, 3, "");
    else if (ends(&w, "'s"))
        set_to(&w, 2, "");
    else if (ends(&w, "'"))
        set_to(&w, 1, "");

    step1a(&w);
    for (int i = 0; after1a[i]; i++)
        if (!strcmp(w.w, after1a[i]))
            goto done;
    step1b(&w);
    step1c(&w);
    step2(&w);
    step3(&w);
    step4(&w);
    step5(&w);
done:
    for (int i = 0; i < w.len; i++)
        if (w.w[i] == 'Y')
            w.w[i] = 'y';
    return g_strndup(w.w, (gsize)w.len);
}
