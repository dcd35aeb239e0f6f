/* taskmetrics.c - finding-level F1, permutation-invariant change matching, numeric errors
 * (taskmetrics.h; the paper's appendices C and F). */
#include "train/taskmetrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- findings ------------------------------------------------------------------------------ */

static const char *const findings[CL_N_FINDINGS + 1] = {
    /* Lungs */
    "atelectasis",
    "lung opacity",
    "edema",
    "pneumonia",
    "consolidation",
    "emphysema",
    "infection",
    "granuloma",
    "contusion",
    /* Pleura */
    "pleural effusion",
    "pneumothorax",
    "pleural thickening",
    "blunting of the costophrenic angle",
    /* Cardiac */
    "cardiomegaly",
    "vascular congestion",
    "heart failure",
    "hilar congestion",
    /* Mediastinum / Aorta / Hernia */
    "hernia",
    "pneumomediastinum",
    "tortuosity of the thoracic aorta",
    "tortuosity of the descending aorta",
    /* Chest wall / Skeletal */
    "calcification",
    "fracture",
    "scoliosis",
    "hematoma",
    /* Adjacent / Other */
    "air collection",
    "gastric distention",
    NULL,
};

const char *const *cl_findings(void)
{
    return findings;
}

/* finding indices, longest name first, so a longer name claims its words before a shorter one */
static int by_length_desc(const void *a, const void *b)
{
    size_t la = strlen(findings[*(const int *)a]), lb = strlen(findings[*(const int *)b]);
    return la < lb ? 1 : la > lb ? -1 : *(const int *)a - *(const int *)b;
}

static const int *findings_longest_first(void)
{
    static int order[CL_N_FINDINGS];
    static gsize done = 0;
    if (g_once_init_enter(&done)) {
        for (int i = 0; i < CL_N_FINDINGS; i++)
            order[i] = i;
        qsort(order, CL_N_FINDINGS, sizeof(int), by_length_desc);
        g_once_init_leave(&done, 1);
    }
    return order;
}

/* Marks the findings named in list[0 .. len) (lowercase text). */
static void mark_list(const char *list, size_t len, gboolean *marks)
{
    char *seg = g_strndup(list, len);
    const int *order = findings_longest_first();
    for (int k = 0; k < CL_N_FINDINGS; k++) {
        int i = order[k];
        size_t n = strlen(findings[i]);
        char *at = seg;
        while ((at = strstr(at, findings[i]))) {
            /* whole words only: "edema" must not match inside "oedema", nor "hernia" in
             * "herniation" */
            gboolean left = at == seg || !g_ascii_isalpha(at[-1]);
            gboolean right = !g_ascii_isalpha(at[n]);
            if (left && right) {
                marks[i] = TRUE;
                memset(at, '#', n); /* claimed: shorter names cannot match inside it */
            }
            at += n;
        }
    }
    g_free(seg);
}

/* Finds every "<phrase>[s] of <list>" and marks the list's findings. The list ends at " than ",
 * a sentence end or the text's end. */
static void parse_direction(const char *lower, const char *phrase, gboolean *marks)
{
    const char *at = lower;
    size_t plen = strlen(phrase);
    while ((at = strstr(at, phrase))) {
        const char *p = at + plen;
        if (*p == 's')
            p++;
        if (strncmp(p, " of ", 4) != 0) {
            at = p;
            continue;
        }
        p += 4;
        const char *end = p;
        while (*end && *end != '.' && *end != '!' && *end != '?' && *end != ';' &&
               strncmp(end, " than ", 6) != 0)
            end++;
        mark_list(p, (size_t)(end - p), marks);
        at = end;
    }
}

void cl_findings_parse(const char *text, ClFindingLabels *out)
{
    memset(out, 0, sizeof *out);
    if (!text)
        return;
    char *lower = g_ascii_strdown(text, -1);
    /* runs of white space (line breaks in a long answer) read as one space */
    char *w = lower;
    for (const char *r = lower; *r; r++) {
        gboolean sp = g_ascii_isspace(*r);
        if (sp && w > lower && w[-1] == ' ')
            continue;
        *w++ = sp ? ' ' : *r;
    }
    *w = '\0';
    parse_direction(lower, "additional finding", out->added);
    parse_direction(lower, "missing the finding", out->missing);
    g_free(lower);
}

gboolean cl_findings_empty(const ClFindingLabels *l)
{
    for (int i = 0; i < CL_N_FINDINGS; i++)
        if (l->added[i] || l->missing[i])
            return FALSE;
    return TRUE;
}

gboolean cl_findings_equal(const ClFindingLabels *a, const ClFindingLabels *b)
{
    for (int i = 0; i < CL_N_FINDINGS; i++)
        if (!a->added[i] != !b->added[i] || !a->missing[i] != !b->missing[i])
            return FALSE;
    return TRUE;
}

void cl_finding_score_init(ClFindingScore *s)
{
    memset(s, 0, sizeof *s);
}

void cl_finding_score_add(ClFindingScore *s, const char *reference, const char *prediction)
{
    ClFindingLabels g, p;
    cl_findings_parse(reference, &g);
    cl_findings_parse(prediction, &p);
    gboolean g0 = cl_findings_empty(&g), p0 = cl_findings_empty(&p);
    s->n_pairs++;
    s->n_change_correct += g0 == p0;
    s->n_exact += cl_findings_equal(&g, &p);
    if (g0)
        return; /* F1 is over the pairs whose reference names a change (appendix F) */
    s->n_changed_pairs++;
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < CL_N_FINDINGS; i++) {
            gboolean gi = d ? g.missing[i] : g.added[i];
            gboolean pi = d ? p.missing[i] : p.added[i];
            int k = d * CL_N_FINDINGS + i;
            s->tp[k] += gi && pi;
            s->fp[k] += !gi && pi;
            s->fn[k] += gi && !pi;
        }
}

void cl_finding_score_result(const ClFindingScore *s, ClFindingResult *out)
{
    memset(out, 0, sizeof *out);
    double tp = 0, fp = 0, fn = 0, macro = 0;
    int present = 0;
    for (int k = 0; k < 2 * CL_N_FINDINGS; k++) {
        tp += s->tp[k];
        fp += s->fp[k];
        fn += s->fn[k];
        double den = 2.0 * s->tp[k] + s->fp[k] + s->fn[k];
        if (den > 0) {
            macro += 2.0 * s->tp[k] / den;
            present++;
        }
    }
    out->micro_f1 = tp + fp + fn > 0 ? 2 * tp / (2 * tp + fp + fn) : 0;
    out->macro_f1 = present ? macro / present : 0;
    out->macro_f1_all54 = macro / (2 * CL_N_FINDINGS);
    out->change_accuracy = s->n_pairs ? (double)s->n_change_correct / s->n_pairs : 0;
    out->n_pairs = s->n_pairs;
    out->n_changed_pairs = s->n_changed_pairs;
    out->n_exact = s->n_exact;
}

/* ---- change matching ----------------------------------------------------------------------- */

#define MAX_SENTENCES 32
#define EXHAUSTIVE_REFS 4 /* exhaustive search up to 4 changes × 12 sentences (≈ 12⁴ paths) */
#define EXHAUSTIVE_PRED 12

GPtrArray *cl_change_sentences(const char *text)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    if (!text)
        return out;
    const char *start = text;
    for (const char *p = text;; p++) {
        gboolean end = *p == '\0';
        gboolean stop =
            (*p == '.' || *p == '!' || *p == '?') && (p[1] == '\0' || g_ascii_isspace(p[1]));
        if (end || stop) {
            size_t n = (size_t)(p - start) + (stop ? 1 : 0);
            char *s = g_strstrip(g_strndup(start, n));
            if (*s && out->len < MAX_SENTENCES)
                g_ptr_array_add(out, s);
            else
                g_free(s);
            if (end)
                break;
            start = p + 1;
        }
    }
    return out;
}

char *cl_change_normalise(const char *sentence)
{
    GString *s = g_string_new(NULL);
    gboolean space = FALSE;
    for (const char *p = sentence ? sentence : ""; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (g_ascii_isalnum(c) || c >= 0x80) {
            if (space && s->len)
                g_string_append_c(s, ' ');
            space = FALSE;
            g_string_append_c(s, (char)g_ascii_tolower(c));
        } else {
            space = TRUE; /* punctuation and white space separate words */
        }
    }
    return g_string_free(s, FALSE);
}

/* Unigram F1 of two normalised sentences (multiset overlap). */
static double unigram_f1(const char *a, const char *b)
{
    g_auto(GStrv) wa = g_strsplit(a, " ", -1), wb = g_strsplit(b, " ", -1);
    guint na = *a ? g_strv_length(wa) : 0, nb = *b ? g_strv_length(wb) : 0;
    if (na == 0 || nb == 0)
        return 0;
    gboolean *used = g_new0(gboolean, nb);
    guint common = 0;
    for (guint i = 0; i < na; i++)
        for (guint j = 0; j < nb; j++)
            if (!used[j] && strcmp(wa[i], wb[j]) == 0) {
                used[j] = TRUE;
                common++;
                break;
            }
    g_free(used);
    return 2.0 * common / (na + nb);
}

typedef struct {
    guint n_ref, n_pred;
    const double *sim; /* n_ref × n_pred */
    int *cur, *best;
    gboolean *taken;
    double best_total;
} Search;

static void search(Search *s, guint r, double total)
{
    if (r == s->n_ref) {
        if (total > s->best_total + 1e-12) {
            s->best_total = total;
            memcpy(s->best, s->cur, s->n_ref * sizeof(int));
        }
        return;
    }
    /* bound: even perfect matches for the rest cannot beat the best */
    if (total + (s->n_ref - r) <= s->best_total + 1e-12 && s->best_total >= 0)
        return;
    for (guint j = 0; j < s->n_pred; j++) {
        if (s->taken[j])
            continue;
        s->taken[j] = TRUE;
        s->cur[r] = (int)j;
        search(s, r + 1, total + s->sim[r * s->n_pred + j]);
        s->taken[j] = FALSE;
    }
    s->cur[r] = -1; /* this change left unmatched */
    search(s, r + 1, total);
}

void cl_change_match(const char *prediction, const ClRefChange *refs, guint n_refs,
                     ClChangeMatch *out)
{
    memset(out, 0, sizeof *out);
    g_autoptr(GPtrArray) sent = cl_change_sentences(prediction);
    guint np = sent->len;
    out->n_ref = n_refs;
    out->n_pred = np;
    out->assignment = g_new(int, MAX(n_refs, 1));
    out->matched = g_new0(char *, MAX(n_refs, 1));
    for (guint r = 0; r < n_refs; r++)
        out->assignment[r] = -1;
    if (n_refs == 0 || np == 0)
        return;
    char **pn = g_new0(char *, np);
    for (guint j = 0; j < np; j++)
        pn[j] = cl_change_normalise(g_ptr_array_index(sent, j));
    double *sim = g_new0(double, (gsize)n_refs * np);
    gboolean *exact = g_new0(gboolean, (gsize)n_refs * np);
    for (guint r = 0; r < n_refs; r++)
        for (const char *const *v = refs[r].variants; v && *v; v++) {
            g_autofree char *vn = cl_change_normalise(*v);
            for (guint j = 0; j < np; j++) {
                gsize k = (gsize)r * np + j;
                if (strcmp(vn, pn[j]) == 0) {
                    sim[k] = 1.0;
                    exact[k] = TRUE;
                } else {
                    sim[k] = MAX(sim[k], unigram_f1(vn, pn[j]));
                }
            }
        }
    if (n_refs <= EXHAUSTIVE_REFS && np <= EXHAUSTIVE_PRED) {
        Search s = {
            n_refs, np, sim, g_new(int, n_refs), out->assignment, g_new0(gboolean, np), -1 };
        search(&s, 0, 0);
        g_free(s.cur);
        g_free(s.taken);
    } else {
        /* greedy: the best remaining pair first */
        gboolean *rdone = g_new0(gboolean, n_refs), *pdone = g_new0(gboolean, np);
        for (;;) {
            double best = 0;
            guint br = 0, bj = 0;
            gboolean any = FALSE;
            for (guint r = 0; r < n_refs; r++)
                for (guint j = 0; j < np; j++)
                    if (!rdone[r] && !pdone[j] && sim[(gsize)r * np + j] > best) {
                        best = sim[(gsize)r * np + j];
                        br = r;
                        bj = j;
                        any = TRUE;
                    }
            if (!any)
                break;
            rdone[br] = pdone[bj] = TRUE;
            out->assignment[br] = (int)bj;
        }
        g_free(rdone);
        g_free(pdone);
    }
    for (guint r = 0; r < n_refs; r++) {
        int j = out->assignment[r];
        if (j < 0)
            continue;
        gsize k = (gsize)r * np + (guint)j;
        out->similarity += sim[k];
        out->n_exact += exact[k];
        out->matched[r] = g_strdup(g_ptr_array_index(sent, (guint)j));
    }
    for (guint j = 0; j < np; j++)
        g_free(pn[j]);
    g_free(pn);
    g_free(sim);
    g_free(exact);
}

void cl_change_match_clear(ClChangeMatch *m)
{
    if (m->matched)
        for (guint r = 0; r < m->n_ref; r++)
            g_free(m->matched[r]);
    g_free(m->matched);
    g_free(m->assignment);
    memset(m, 0, sizeof *m);
}

double cl_change_match_accuracy(const ClChangeMatch *m)
{
    guint den = MAX(m->n_ref, m->n_pred);
    return den ? (double)m->n_exact / den : 1.0;
}

/* ---- numbers ------------------------------------------------------------------------------- */

gboolean cl_parse_first_number(const char *text, double *out)
{
    for (const char *p = text ? text : ""; *p; p++) {
        gboolean sign = (*p == '-' || *p == '+') &&
                        (g_ascii_isdigit(p[1]) || (p[1] == '.' && g_ascii_isdigit(p[2])));
        gboolean start = g_ascii_isdigit(*p) || (*p == '.' && g_ascii_isdigit(p[1])) || sign;
        if (!start)
            continue;
        /* digits [. digits] only: no exponents, no thousands separators */
        GString *s = g_string_new(NULL);
        const char *q = p;
        if (*q == '-' || *q == '+')
            g_string_append_c(s, *q++);
        while (g_ascii_isdigit(*q))
            g_string_append_c(s, *q++);
        if (*q == '.' && g_ascii_isdigit(q[1])) {
            g_string_append_c(s, *q++);
            while (g_ascii_isdigit(*q))
                g_string_append_c(s, *q++);
        }
        *out = g_ascii_strtod(s->str, NULL);
        g_string_free(s, TRUE);
        return isfinite(*out);
    }
    return FALSE;
}

void cl_numeric_score_add(ClNumericScore *s, double reference, const char *prediction)
{
    double v = 0;
    if (!cl_parse_first_number(prediction, &v)) {
        v = 0;
        s->n_unparsed++;
    }
    double e = v - reference;
    s->n++;
    s->sum_abs += fabs(e);
    s->sum_sq += e * e;
}

double cl_numeric_score_mae(const ClNumericScore *s)
{
    return s->n ? s->sum_abs / s->n : 0;
}

double cl_numeric_score_rmse(const ClNumericScore *s)
{
    return s->n ? sqrt(s->sum_sq / s->n) : 0;
}
