/* grounding.c - the changed regions' 3 × 3 cells, and the position-phrase check (grounding.h). */
#include "model/grounding.h"

#include "model/config.h"

#include <math.h>
#include <string.h>

const char *const cl_grounding_position_names[10] = {
    "top left", "top",         "top right", "left",         "centre",
    "right",    "bottom left", "bottom",    "bottom right", NULL,
};

const char *const cl_grounding_place_names[10] = {
    "at the top left",     "at the top",   "at the top right",   "on the left",
    "in the centre",       "on the right", "at the bottom left", "at the bottom",
    "at the bottom right", NULL,
};

const char *const cl_grounding_aerial_nouns[9] = {
    "a building", "the building", "a house",    "a new house", "a road",
    "a new road", "the trees",    "some trees", NULL,
};

const char *const cl_grounding_aerial_noun_kinds[8] = {
    "building", "building", "building", "building", "road", "road", "trees", "trees",
};

/* ---- the regions ------------------------------------------------------------------------------ */

typedef struct {
    double mass, sx, sy; /* Σp, Σp·x, Σp·y in model pixels */
    int id;              /* 1 + its index in the order found */
} Region;

static int region_cmp(const void *a, const void *b)
{
    const Region *x = a, *y = b;
    return x->mass > y->mass ? -1 : x->mass < y->mass ? 1 : 0;
}

/* The 8-connected groups of patches at 0.5 or above, largest mass first, those kept: the first,
 * and a second whose mass is at least a third of the first's (at most CL_GROUNDING_MAX_REGIONS).
 * label (N, may be NULL): 1 + the kept region's index of each patch, 0 elsewhere. Returns how
 * many were kept. */
static int find_regions(const float *prob, int grid, double P, int *label,
                        Region out[CL_GROUNDING_MAX_REGIONS])
{
    const int N = grid * grid;
    g_autofree int *own = g_new0(int, N); /* 0: not taken, else 1 + the group's index */
    g_autofree int *stack = g_new(int, N);
    g_autoptr(GArray) regions = g_array_new(FALSE, TRUE, sizeof(Region));
    for (int p0 = 0; p0 < N; p0++) {
        if (own[p0] || !(prob[p0] >= 0.5f))
            continue;
        Region r = { 0 };
        r.id = (int)regions->len + 1;
        int top = 0;
        stack[top++] = p0;
        own[p0] = r.id;
        while (top > 0) {
            const int p = stack[--top], row = p / grid, col = p % grid;
            r.mass += prob[p];
            r.sx += prob[p] * (col + 0.5) * P;
            r.sy += prob[p] * (row + 0.5) * P;
            for (int dr = -1; dr <= 1; dr++)
                for (int dc = -1; dc <= 1; dc++) {
                    const int rr = row + dr, cc = col + dc;
                    if (rr < 0 || rr >= grid || cc < 0 || cc >= grid)
                        continue;
                    const int q = rr * grid + cc;
                    if (!own[q] && prob[q] >= 0.5f) {
                        own[q] = r.id;
                        stack[top++] = q;
                    }
                }
        }
        g_array_append_val(regions, r);
    }
    g_array_sort(regions, region_cmp);
    int n = 0;
    for (guint i = 0; i < regions->len && n < CL_GROUNDING_MAX_REGIONS; i++) {
        const Region *r = &g_array_index(regions, Region, i);
        if (i > 0 && r->mass < g_array_index(regions, Region, 0).mass / 3)
            break;
        out[n++] = *r;
    }
    for (int p = 0; label && p < N; p++) {
        label[p] = 0;
        for (int i = 0; own[p] && i < n; i++)
            if (out[i].id == own[p])
                label[p] = i + 1;
    }
    return n;
}

void cl_grounding_change_regions(const float *prob, int grid, const ClLetterbox *lb,
                                 ClChangeRegions *out)
{
    memset(out, 0, sizeof *out);
    if (!prob || grid <= 0 || !lb || lb->content_w <= 0 || lb->content_h <= 0)
        return;
    Region kept[CL_GROUNDING_MAX_REGIONS];
    const int n = find_regions(prob, grid, (double)lb->size / grid, NULL, kept);
    for (int i = 0; i < n; i++) {
        const Region *r = &kept[i];
        const double x = CLAMP((r->sx / r->mass - lb->off_x) / lb->content_w, 0.0, 1.0);
        const double y = CLAMP((r->sy / r->mass - lb->off_y) / lb->content_h, 0.0, 1.0);
        const int col = MIN((int)(x * 3), 2), row = MIN((int)(y * 3), 2);
        out->cell[out->n] = row * 3 + col;
        out->mass[out->n] = r->mass;
        out->x[out->n] = x;
        out->y[out->n] = y;
        out->n++;
    }
}

/* ---- the position phrases --------------------------------------------------------------------- */

typedef struct {
    const char *p;
    int n;
} Span;

static gboolean span_is(Span w, const char *s, int n)
{
    return w.n == n && g_ascii_strncasecmp(w.p, s, (gsize)n) == 0;
}

/* The words of a phrase (at most max) into words; returns how many. */
static int phrase_words(const char *phrase, Span *words, int max)
{
    int k = 0;
    for (const char *s = phrase; *s && k < max;) {
        const char *e = strchr(s, ' ');
        const int n = e ? (int)(e - s) : (int)strlen(s);
        words[k++] = (Span){ s, n };
        s += n + (e != NULL);
    }
    return k;
}

/* whether w is one of the phrases' words */
static gboolean phrase_word(Span w, const char *const *phrases)
{
    for (int i = 0; phrases[i]; i++) {
        Span pw[4];
        const int m = phrase_words(phrases[i], pw, 4);
        for (int j = 0; j < m; j++)
            if (span_is(w, pw[j].p, pw[j].n))
                return TRUE;
    }
    return FALSE;
}

/* the letters that end at e (exclusive) */
static Span word_before(const char *s, int e)
{
    int b = e;
    while (b > 0 && g_ascii_isalpha(s[b - 1]))
        b--;
    return (Span){ s + b, e - b };
}

/* whether s[0, at) ends with "The ", "A " or "An " opening a sentence (at the text's start when
 * `whole`, or after ". ", "! ", "? ") */
static gboolean sentence_context(const char *s, int at, gboolean whole)
{
    static const char *const dets[] = { "the", "a", "an", NULL };
    if (at < 1 || s[at - 1] != ' ')
        return FALSE;
    Span det = word_before(s, at - 1);
    gboolean is_det = FALSE;
    for (int i = 0; dets[i]; i++)
        is_det = is_det || span_is(det, dets[i], (int)strlen(dets[i]));
    if (!is_det)
        return FALSE;
    const int b = (int)(det.p - s);
    if (b == 0)
        return whole;
    return b >= 2 && s[b - 1] == ' ' && (s[b - 2] == '.' || s[b - 2] == '!' || s[b - 2] == '?');
}

/* whether s[0, at) opens a clause: the text's start when `whole`, or "and " or a punctuation mark
 * and a space before */
static gboolean clause_context(const char *s, int at, gboolean whole)
{
    if (at == 0)
        return whole;
    if (at < 2 || s[at - 1] != ' ')
        return FALSE;
    if (g_ascii_ispunct(s[at - 2]))
        return TRUE;
    const Span w = word_before(s, at - 1);
    return span_is(w, "and", 3) && (w.p == s ? whole : !g_ascii_isalpha(w.p[-1]));
}

/* whether s[0, at) ends with "<preposition> the "; *from: the preposition is "from" */
static gboolean position_context(const char *s, int at, gboolean *from)
{
    static const char *const preps[] = { "at", "from", "to", "on", "in", NULL };
    if (at < 1 || s[at - 1] != ' ')
        return FALSE;
    Span the = word_before(s, at - 1);
    if (!span_is(the, "the", 3))
        return FALSE;
    const int b = (int)(the.p - s);
    if (b < 1 || s[b - 1] != ' ')
        return FALSE;
    Span prep = word_before(s, b - 1);
    *from = span_is(prep, "from", 4);
    for (int i = 0; preps[i]; i++)
        if (span_is(prep, preps[i], (int)strlen(preps[i])))
            return TRUE;
    return FALSE;
}

static inline double log_sigmoid(double z)
{
    return z >= 0 ? -log1p(exp(-z)) : z - log1p(exp(z));
}

/* ---- the radiograph findings' lists ---------------------------------------------------------- */

static gboolean starts_with(const char *s, gsize n, const char *prefix)
{
    const gsize m = strlen(prefix);
    return n >= m && g_ascii_strncasecmp(s, prefix, m) == 0;
}

/* whether s[0, n) is a proper start of word (shorter than it) */
static gboolean begins(const char *s, gsize n, const char *word)
{
    return n < strlen(word) && g_ascii_strncasecmp(s, word, n) == 0;
}

/* how many of the classes are allowed */
static int n_allowed(const ClGroundingSlot *slot, const gboolean *allowed)
{
    int k = 0;
    for (int c = 0; allowed && slot->phrases[c] && c < CL_CONFIG_MAX_OBJECTS; c++)
        k += allowed[c] != FALSE;
    return k;
}

/* whether the last list of text[0, n) is opened in the plural ("has additional findings of",
 * "is missing the findings of") where only one finding is allowed: such a list could never be
 * closed (the answers' template says "an additional finding of x", "the finding of x" for one).
 * The plural is caught where it is written: "has ad…" (the singular is "has an …"), "missing the
 * findings". */
static gboolean plural_of_one(const char *s, gsize n, const ClGroundingSlot *slot)
{
    for (gsize i = n; i-- > 0;) {
        if (i > 0 && s[i - 1] != ' ')
            continue;
        const char *t = s + i;
        const gsize tn = n - i;
        const gboolean *added = slot->allowed_several ? slot->allowed_several : slot->allowed;
        const gboolean *missing =
            slot->allowed_missing_several ? slot->allowed_missing_several : slot->allowed_missing;
        if (starts_with(t, tn, "has ad") ||
            (starts_with(t, tn, "has ") && tn < strlen("has ad"))) /* "has a": either yet */
            return starts_with(t, tn, "has ad") && n_allowed(slot, added) == 1;
        if (starts_with(t, tn, "missing the findings"))
            return n_allowed(slot, missing) == 1;
        if (starts_with(t, tn, "missing the finding"))
            return FALSE;
    }
    return FALSE;
}

/* CL_GROUNDING_FINDINGS: the last list of findings of text[0, len) (cl_grounding_text_ok) */
static gboolean findings_ok(const char *s, gsize n, const ClGroundingSlot *slot)
{
    if (plural_of_one(s, n, slot))
        return FALSE;
    /* the last "finding of " or "findings of ", and whose list it opens */
    gsize at = 0, word = 0; /* where the list starts, and its "finding" */
    gboolean found = FALSE;
    for (gsize i = n; i-- > 0 && !found;) {
        if (i > 0 && s[i - 1] != ' ')
            continue;
        if (starts_with(s + i, n - i, "finding of "))
            at = i + 11, word = i, found = TRUE;
        else if (starts_with(s + i, n - i, "findings of "))
            at = i + 12, word = i, found = TRUE;
    }
    if (!found)
        return TRUE;
    const gboolean *allowed = NULL;
    const gboolean plural = g_ascii_strncasecmp(s + word, "findings", 8) == 0;
    if (word >= 11 && g_ascii_strncasecmp(s + word - 11, "additional ", 11) == 0)
        allowed = plural && slot->allowed_several ? slot->allowed_several : slot->allowed;
    else if (word >= 12 && g_ascii_strncasecmp(s + word - 12, "missing the ", 12) == 0)
        allowed = plural && slot->allowed_missing_several ? slot->allowed_missing_several
                                                          : slot->allowed_missing;
    const char *const *names = slot->phrases;
    gboolean any = FALSE;
    for (int c = 0; allowed && names[c]; c++)
        any = any || allowed[c];
    if (!any)
        return TRUE; /* another list, or one not held */
    gboolean listed[CL_CONFIG_MAX_OBJECTS] = { FALSE };
    const char *r = s + at;
    gsize rn = n - at, pos = 0;
    for (;;) {
        /* a whole name here (the longest), or one being written */
        int name = -1;
        gsize name_len = 0;
        for (int c = 0; names[c] && c < CL_CONFIG_MAX_OBJECTS; c++) {
            const gsize l = strlen(names[c]);
            if (l > name_len && starts_with(r + pos, rn - pos, names[c]))
                name = c, name_len = l;
        }
        if (name < 0) {
            for (int c = 0; names[c] && c < CL_CONFIG_MAX_OBJECTS; c++)
                if (allowed[c] && !listed[c] && begins(r + pos, rn - pos, names[c]))
                    return TRUE;
            return FALSE; /* another finding, or no finding's name */
        }
        if (!allowed[name] || listed[name])
            return FALSE;
        listed[name] = TRUE;
        pos += name_len;
        gboolean more = FALSE; /* an allowed name left to list */
        for (int c = 0; names[c] && c < CL_CONFIG_MAX_OBJECTS; c++)
            more = more || (allowed[c] && !listed[c]);
        const char *t = r + pos;
        const gsize tn = rn - pos;
        static const char *const seps[] = { ", and ", " and ", ", ", NULL };
        int sep = -1;
        for (int k = 0; seps[k] && sep < 0; k++)
            if (starts_with(t, tn, seps[k]))
                sep = k;
        if (sep >= 0) { /* the list goes on */
            if (!more)
                return FALSE;
            pos += strlen(seps[sep]);
            if (sep == 2) { /* ", " and perhaps "and " ("x, y, and z") */
                if (begins(r + pos, rn - pos, "and "))
                    return TRUE;
                if (starts_with(r + pos, rn - pos, "and "))
                    pos += 4;
            }
            continue;
        }
        /* a separator being written goes on the list while a name is left; else the list
         * closes as the answers' template closes it, " than the reference image" (an answer that
         * stops after a name, or goes on with another word, has lost its sentence) */
        static const char *const close = " than the reference image";
        if (tn == 0 || starts_with(t, tn, close) || begins(t, tn, close))
            return TRUE;
        gboolean going_on = FALSE;
        for (int k = 0; seps[k]; k++)
            going_on = going_on || begins(t, tn, seps[k]);
        return going_on && more;
    }
}

void cl_grounding_findings_several(const gboolean *seen, const double *score, int n,
                                   gboolean *several)
{
    int next = -1;
    for (int c = 0; c < n; c++) {
        several[c] = seen[c];
        if (!seen[c] && score[c] >= CL_GROUNDING_FINDING_MIN &&
            (next < 0 || score[c] > score[next]))
            next = c;
    }
    if (next >= 0)
        several[next] = TRUE;
}

int cl_grounding_findings(const float *before, const float *after, const float *prob, int N,
                          int n_classes, gboolean *added, gboolean *missing, double *appeared,
                          double *vanished)
{
    const int K = CL_CONFIG_OBJECT_OUT;
    double up[CL_CONFIG_MAX_FINDINGS] = { 0 }, down[CL_CONFIG_MAX_FINDINGS] = { 0 };
    n_classes = CLAMP(n_classes, 0, CL_CONFIG_MAX_FINDINGS);
    for (int c = 0; c < n_classes; c++)
        added[c] = missing[c] = FALSE;
    if (!before || !after || !prob)
        return 0;
    for (int p = 0; p < N; p++) {
        if (!(prob[p] >= 0.5f))
            continue;
        const float *z[2] = { before + (size_t)p * K, after + (size_t)p * K };
        for (int c = 0; c < n_classes; c++) {
            double shows[2];
            for (int t = 0; t < 2; t++) /* cube (shape 0), colour, size, material */
                shows[t] = exp(
                    log_sigmoid(z[t][0]) + log_sigmoid(z[t][1]) + log_sigmoid(z[t][1 + 4 + c % 8]) +
                    log_sigmoid(z[t][1 + 12 + c / 8 % 2]) + log_sigmoid(z[t][1 + 14 + c / 16]));
            const double d = prob[p] * (shows[1] - shows[0]);
            up[c] += MAX(0, d);
            down[c] += MAX(0, -d);
        }
    }
    double top_up = 0, top_down = 0;
    for (int c = 0; c < n_classes; c++)
        top_up = MAX(top_up, up[c]), top_down = MAX(top_down, down[c]);
    int n = 0;
    const double share = CL_GROUNDING_FINDING_SHARE;
    for (int c = 0; c < n_classes; c++) {
        added[c] = up[c] >= CL_GROUNDING_FINDING_MIN && up[c] >= share * top_up;
        missing[c] = down[c] >= CL_GROUNDING_FINDING_MIN && down[c] >= share * top_down;
        n += added[c] + missing[c];
        if (appeared)
            appeared[c] = up[c];
        if (vanished)
            vanished[c] = down[c];
    }
    return n;
}

/* ---- the aerial places: each once ------------------------------------------------------------ */

/* used[i]: place phrase i (whole, the longest that fits) stands in text[0, n) */
static void places_used(const char *text, gsize n, const char *const *phrases, gboolean *used)
{
    for (int i = 0; phrases[i] && i < CL_CONFIG_MAX_OBJECTS; i++)
        used[i] = FALSE;
    for (gsize j = 0; j < n; j++) {
        if (j > 0 && g_ascii_isalpha(text[j - 1]))
            continue;
        int best = -1;
        gsize best_len = 0;
        for (int i = 0; phrases[i] && i < CL_CONFIG_MAX_OBJECTS; i++) {
            const gsize l = strlen(phrases[i]);
            if (l > best_len && j + l < n && g_ascii_strncasecmp(text + j, phrases[i], l) == 0 &&
                !g_ascii_isalpha(text[j + l]))
                best = i, best_len = l;
        }
        if (best >= 0)
            used[best] = TRUE;
    }
}

/* A clause that "and" would open needs a place still to say: once every allowed place has been
 * said, the answer may not go on with " and" or "," (each place is said once: the generator never
 * names one twice, and a decoder that does repeats its clause, "… at the bottom left are cut
 * down and the trees at the bottom left are cut down"). */
static gboolean place_and_ok(const char *text, gsize n, const ClGroundingSlot *slot)
{
    /* " and", or a comma (which a decoder refused its " and" takes next, and loses its
     * sentence: "… on the left, newthe trees …") */
    if (!(n >= 4 && g_ascii_strncasecmp(text + n - 4, " and", 4) == 0) &&
        !(n >= 1 && text[n - 1] == ','))
        return TRUE;
    gboolean used[CL_CONFIG_MAX_OBJECTS];
    places_used(text, n, slot->phrases, used);
    gboolean any_used = FALSE;
    for (int i = 0; slot->phrases[i] && i < CL_CONFIG_MAX_OBJECTS; i++) {
        if (slot->allowed[i] && !used[i])
            return TRUE;
        any_used = any_used || used[i];
    }
    return !any_used;
}

gboolean cl_grounding_text_ok(const char *text, gsize len, gboolean whole,
                              const ClGroundingSlot *slot)
{
    if (!text || !slot || !slot->phrases || !slot->allowed)
        return TRUE;
    if (slot->context == CL_GROUNDING_FINDINGS)
        return findings_ok(text, len, slot);
    if (slot->context == CL_GROUNDING_PLACE && !place_and_ok(text, len, slot))
        return FALSE;
    const char *const *phrases = slot->phrases;
    const gboolean *allowed = slot->allowed;
    const gsize from = len > 64 ? len - 64 : 0;
    whole = whole && from == 0;
    const char *s = text + from;
    const int n = (int)(len - from);
    /* the word being written, and where the run's last whole word ends */
    Span partial = { NULL, 0 };
    gboolean open = FALSE; /* a space follows the last whole word: the run may go on */
    int e = n;
    if (e > 0 && g_ascii_isalpha(s[e - 1])) {
        partial = word_before(s, e);
        e = (int)(partial.p - s);
        if (e == 0 && whole && slot->context == CL_GROUNDING_CLAUSE_START) {
            /* the answer's first word: a clause's opening */
        } else if (e < 1 || s[e - 1] != ' ') {
            return TRUE; /* glued to what comes before: not a phrase's word */
        } else {
            e--;
        }
    } else if (e > 0 && s[e - 1] == ' ') {
        open = TRUE;
        e--;
    } else if (e > 0) {
        e--; /* a punctuation mark closes the run */
    }
    /* the run of whole phrase words before, last first */
    Span run[4];
    int k = 0, first = partial.n ? (int)(partial.p - s) : -1;
    while (k < 4 && e > 0 && g_ascii_isalpha(s[e - 1])) {
        Span w = word_before(s, e);
        if (!phrase_word(w, phrases))
            break;
        run[k++] = w;
        first = (int)(w.p - s);
        if (first < 1 || s[first - 1] != ' ')
            break;
        e = first - 1;
    }
    gboolean from_context = FALSE;
    if (first < 0)
        return TRUE;
    gboolean unused[CL_CONFIG_MAX_OBJECTS];
    if (slot->context == CL_GROUNDING_PLACE) {
        /* a place phrase begins with its preposition, whole: "the trees", "a", "o" are none
         * (yet) */
        const Span w0 = k > 0 ? run[k - 1] : partial;
        if (!span_is(w0, "at", 2) && !span_is(w0, "in", 2) && !span_is(w0, "on", 2))
            return TRUE;
        /* each place once: those said before this phrase are no longer allowed */
        gboolean used[CL_CONFIG_MAX_OBJECTS];
        places_used(text, from + (gsize)first, phrases, used);
        for (int i = 0; phrases[i] && i < CL_CONFIG_MAX_OBJECTS; i++)
            unused[i] = allowed[i] && !used[i];
        allowed = unused;
    } else if (slot->context == CL_GROUNDING_CLAUSE_START) {
        if (!clause_context(s, first, whole))
            return TRUE;
    } else if (!(slot->context == CL_GROUNDING_SENTENCE_START
                     ? sentence_context(s, first, whole)
                     : position_context(s, first, &from_context))) {
        return TRUE;
    }
    if (from_context && slot->allowed_from)
        allowed = slot->allowed_from;
    for (int a = 0, b = k - 1; a < b; a++, b--) {
        Span t = run[a];
        run[a] = run[b];
        run[b] = t;
    }
    /* complete: the run is an allowed phrase; extends: some phrase, allowed or not, goes on from
     * the run with a word that the word being written begins */
    gboolean complete = FALSE, extends = FALSE;
    for (int i = 0; phrases[i]; i++) {
        Span pw[4];
        const int m = phrase_words(phrases[i], pw, 4);
        gboolean same = k <= m;
        for (int j = 0; same && j < k; j++)
            same = span_is(run[j], pw[j].p, pw[j].n);
        if (!same)
            continue;
        const gboolean goes_on = partial.n && m > k && pw[k].n >= partial.n &&
                                 g_ascii_strncasecmp(pw[k].p, partial.p, (gsize)partial.n) == 0;
        if (allowed[i] && goes_on)
            return TRUE; /* the word being written goes on an allowed phrase */
        if (allowed[i] && !partial.n && (open ? m >= k : m == k))
            return TRUE; /* whole, or still open and the start of an allowed phrase */
        complete = complete || (allowed[i] && m == k);
        extends = extends || goes_on;
    }
    /* another word after a whole allowed phrase (or in place of a phrase), one that cannot be
     * the start of a phrase's next word: "to", "became" ("at the top" + "le" is refused when
     * only "top" is allowed, or the text would get round the check a piece at a time) */
    return partial.n && (k == 0 || complete) && !extends;
}

/* ---- the changed object ----------------------------------------------------------------------- */

int cl_grounding_changed_object(const float *before, const float *after, const float *prob, int N,
                                int n_classes, double *share)
{
    const int K = CL_CONFIG_OBJECT_OUT;
    if (share)
        *share = 0;
    if (!prob || n_classes <= 0 || n_classes > CL_CONFIG_MAX_OBJECTS)
        return -1;
    double score[CL_CONFIG_MAX_OBJECTS] = { 0 }, wsum = 0;
    const float *images[2] = { before, after };
    for (int t = 0; t < 2; t++)
        for (int p = 0; images[t] && p < N; p++) {
            if (!(prob[p] >= 0.5f))
                continue;
            const float *z = images[t] + (size_t)p * K;
            const double w = prob[p] * exp(log_sigmoid(z[0]));
            wsum += w;
            for (int c = 0; c < n_classes; c++) {
                const int shape = c / 8 % 4, colour = c % 8, size = c / 32;
                score[c] += w * (log_sigmoid(z[1 + shape]) + log_sigmoid(z[1 + 4 + colour]) +
                                 log_sigmoid(z[1 + 12 + size]));
            }
        }
    if (!(wsum > 0))
        return -1;
    int best = 0;
    for (int c = 1; c < n_classes; c++)
        if (score[c] > score[best])
            best = c;
    if (share) {
        double z = 0;
        for (int c = 0; c < n_classes; c++)
            z += exp((score[c] - score[best]) / wsum);
        *share = 1.0 / z;
    }
    return best;
}

/* the head's labels (logit 1 + j) of class c in the coding `task`; returns how many */
static int class_labels(ClObjectTask task, int c, int labels[4])
{
    if (task == CL_OBJECTS_AERIAL) {
        labels[0] = 4 + c; /* the kind travels as the colour */
        return 1;
    }
    if (task == CL_OBJECTS_RADIOGRAPH) { /* cube, colour, size, material */
        labels[0] = 0, labels[1] = 4 + c % 8, labels[2] = 12 + c / 8 % 2, labels[3] = 14 + c / 16;
        return 4;
    }
    labels[0] = c / 8 % 4, labels[1] = 4 + c % 8, labels[2] = 12 + c / 32;
    return 3;
}

int cl_grounding_region_objects(const float *before, const float *after, const float *prob,
                                int grid, ClObjectTask task, int n_classes,
                                const gboolean *candidates, int classes[CL_GROUNDING_MAX_REGIONS],
                                double shares[CL_GROUNDING_MAX_REGIONS])
{
    const int K = CL_CONFIG_OBJECT_OUT;
    const int max_classes = task == CL_OBJECTS_AERIAL       ? 8
                            : task == CL_OBJECTS_RADIOGRAPH ? CL_CONFIG_MAX_FINDINGS
                                                            : CL_CONFIG_MAX_OBJECTS;
    for (int i = 0; i < CL_GROUNDING_MAX_REGIONS; i++) {
        classes[i] = -1;
        if (shares)
            shares[i] = 0;
    }
    if (!prob || grid <= 0 || n_classes <= 0 || n_classes > max_classes || (!before && !after))
        return 0;
    gboolean any = FALSE;
    for (int c = 0; c < n_classes; c++)
        any = any || !candidates || candidates[c];
    if (!any)
        return 0;
    const int N = grid * grid;
    g_autofree int *label = g_new0(int, N);
    Region kept[CL_GROUNDING_MAX_REGIONS];
    const int n = find_regions(prob, grid, 1.0, label, kept);
    int labels[CL_CONFIG_MAX_OBJECTS][4], n_labels[CL_CONFIG_MAX_OBJECTS];
    for (int c = 0; c < n_classes; c++)
        n_labels[c] = class_labels(task, c, labels[c]);
    for (int i = 0; i < n; i++) {
        double score[CL_CONFIG_MAX_OBJECTS] = { 0 };
        for (int p = 0; p < N; p++) {
            if (label[p] != i + 1)
                continue;
            const float *z[2] = { before ? before + (size_t)p * K : NULL,
                                  after ? after + (size_t)p * K : NULL };
            for (int c = 0; c < n_classes; c++) {
                /* how likely the patch shows class c, before and after (0 without the image) */
                double shows[2] = { 0, 0 };
                for (int t = 0; t < 2; t++) {
                    if (!z[t])
                        continue;
                    double l = log_sigmoid(z[t][0]);
                    for (int j = 0; j < n_labels[c]; j++)
                        l += log_sigmoid(z[t][1 + labels[c][j]]);
                    shows[t] = exp(l);
                }
                score[c] += prob[p] * fabs(shows[1] - shows[0]);
            }
        }
        int best = -1;
        double sum = 0;
        for (int c = 0; c < n_classes; c++)
            if (!candidates || candidates[c]) {
                sum += score[c];
                if (best < 0 || score[c] > score[best])
                    best = c;
            }
        classes[i] = best;
        if (shares)
            shares[i] = sum > 0 ? score[best] / sum : 0;
    }
    return n;
}
