/* changeeval.c - heat maps against per-patch change targets, the model's text against the
 * sample's truth (changeeval.h, docs/DESIGN.md §5.1). */
#include "train/changeeval.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jsonnum.h"
#include "model/describe.h"
#include "model/heatmap.h"
#include "model/preprocess.h"
#include "train/synthdata.h"

/* ---- AUROC ---------------------------------------------------------------------------------- */

typedef struct {
    double v;
    guint8 pos;
} Scored;

static int by_value(const void *a, const void *b)
{
    double x = ((const Scored *)a)->v, y = ((const Scored *)b)->v;
    return (x > y) - (x < y);
}

double cl_auroc(const float *scores, const guint8 *labels, gsize n)
{
    g_return_val_if_fail(n == 0 || (scores && labels), NAN);
    gsize n_pos = 0;
    for (gsize i = 0; i < n; i++)
        n_pos += labels[i] != 0;
    const gsize n_neg = n - n_pos;
    if (n_pos == 0 || n_neg == 0)
        return NAN;
    Scored *s = g_new(Scored, n);
    for (gsize i = 0; i < n; i++) {
        s[i].v = isfinite(scores[i]) ? scores[i] : -INFINITY;
        s[i].pos = labels[i] != 0;
    }
    qsort(s, n, sizeof *s, by_value);
    /* ranks 1..n; a run of equal scores i..j-1 shares the mean rank (i + 1 + j) / 2 */
    double rank_sum = 0;
    for (gsize i = 0; i < n;) {
        gsize j = i + 1;
        while (j < n && s[j].v == s[i].v)
            j++;
        gsize pos_in_run = 0;
        for (gsize k = i; k < j; k++)
            pos_in_run += s[k].pos;
        rank_sum += pos_in_run * ((double)(i + 1 + j) / 2);
        i = j;
    }
    g_free(s);
    const double u = rank_sum - (double)n_pos * (n_pos + 1) / 2;
    return u / ((double)n_pos * n_neg);
}

/* ---- the text ------------------------------------------------------------------------------- */

const char *cl_change_kind_name(ClChangeKind k)
{
    static const char *const names[CL_CHANGE_N_KINDS] = { "add", "remove", "move", "recolour",
                                                          "resize" };
    return (int)k >= 0 && k < CL_CHANGE_N_KINDS ? names[k] : NULL;
}

/* lower-case ASCII words: every byte that is not an ASCII letter or digit separates (UTF-8
 * letters stay inside their word) */
static char **words_of(const char *text)
{
    g_autofree char *t = g_strdup(text ? text : "");
    for (char *p = t; *p; p++) {
        unsigned char c = (unsigned char)*p;
        *p = c >= 0x80 || g_ascii_isalnum(c) ? g_ascii_tolower(c) : ' ';
    }
    char **split = g_strsplit(t, " ", -1);
    int k = 0;
    for (int i = 0; split[i]; i++) {
        if (*split[i])
            split[k++] = split[i];
        else
            g_free(split[i]);
    }
    split[k] = NULL;
    return split;
}

static gboolean word_in(const char *w, const char *const *list)
{
    for (int i = 0; list[i]; i++)
        if (strcmp(w, list[i]) == 0)
            return TRUE;
    return FALSE;
}

/* whether words[i..] starts with the phrase's words */
static gboolean phrase_at(char *const *words, int i, const char *phrase)
{
    g_auto(GStrv) p = g_strsplit(phrase, " ", -1);
    for (int k = 0; p[k]; k++)
        if (!words[i + k] || strcmp(words[i + k], p[k]) != 0)
            return FALSE;
    return TRUE;
}

static ClChangeKind kind_of_word(const char *w)
{
    static const char *const add[] = { "added",   "add",    "adds",     "new", "appeared",
                                       "appears", "pasted", "inserted", NULL };
    static const char *const remove[] = { "removed", "remove",      "removes", "gone",
                                          "missing", "disappeared", "erased",  NULL };
    static const char *const move[] = { "moved", "move", "moves", "shifted", "relocated", NULL };
    static const char *const recolour[] = { "recoloured", "recolored", "recolour",
                                            "recolor",    "colour",    "color",
                                            "coloured",   "colored",   NULL };
    static const char *const resize[] = { "larger",   "smaller", "bigger", "resized", "resize",
                                          "enlarged", "shrunk",  "shrank", NULL };
    static const char *const *const table[CL_CHANGE_N_KINDS] = { add, remove, move, recolour,
                                                                 resize };
    for (int k = 0; k < CL_CHANGE_N_KINDS; k++)
        if (word_in(w, table[k]))
            return (ClChangeKind)k;
    return CL_CHANGE_KIND_UNKNOWN;
}

/* A position word: sets *row or *col (the first setting of each counts) or *centre. */
static gboolean position_word(const char *w, int *row, int *col, gboolean *centre)
{
    static const char *const top[] = { "top", "upper", NULL };
    static const char *const bottom[] = { "bottom", "lower", NULL };
    static const char *const middle[] = { "middle", "centre", "center", "central", NULL };
    if (word_in(w, top) || word_in(w, bottom)) {
        if (*row < 0)
            *row = word_in(w, top) ? 0 : 2;
    } else if (strcmp(w, "left") == 0 || strcmp(w, "right") == 0) {
        if (*col < 0)
            *col = w[0] == 'l' ? 0 : 2;
    } else if (word_in(w, middle)) {
        *centre = TRUE;
    } else {
        return FALSE;
    }
    return TRUE;
}

/* words between the position words of one phrase: "top of the image", "left-hand side" */
static const char *const position_filler[] = { "of",   "the",    "and",  "in",     "at",
                                               "part", "area",   "side", "corner", "hand",
                                               "half", "region", NULL };

/* The cell of the phrase that starts at words[i] (a position word); returns where it ends. */
static int position_phrase(char *const *words, int i, int *row, int *col)
{
    gboolean centre = FALSE;
    *row = *col = -1;
    while (words[i] &&
           (position_word(words[i], row, col, &centre) || word_in(words[i], position_filler)))
        i++;
    if (*row < 0)
        *row = 1;
    if (*col < 0)
        *col = 1;
    return i;
}

/* The first phrase, unless it says where a change came from ("moved from the top left to the
 * bottom"): a change is placed where it is now, so a later phrase is taken then. */
static void parse_position(char *const *words, int *row, int *col)
{
    static const char *const articles[] = { "the", "a", NULL };
    *row = *col = -1;
    for (int i = 0; words[i];) {
        int r = -1, c = -1;
        gboolean centre = FALSE;
        if (!position_word(words[i], &r, &c, &centre)) {
            i++;
            continue;
        }
        int k = i - 1;
        while (k >= 0 && word_in(words[k], articles))
            k--;
        const gboolean from = k >= 0 && strcmp(words[k], "from") == 0;
        const int end = position_phrase(words, i, &r, &c);
        if (*row < 0 || !from)
            *row = r, *col = c;
        if (!from)
            return;
        i = end;
    }
}

/* whether the object's words occur in order, the last one also with a plural ending */
static int names_object(char *const *words, const char *object)
{
    g_auto(GStrv) name = words_of(object);
    const int n = (int)g_strv_length(name);
    if (n == 0)
        return -1;
    for (int i = 0; words[i]; i++) {
        int k = 0;
        for (; k < n && words[i + k]; k++) {
            const char *w = words[i + k], *want = name[k];
            if (strcmp(w, want) == 0)
                continue;
            const gsize len = strlen(want);
            if (k == n - 1 && strncmp(w, want, len) == 0 &&
                (strcmp(w + len, "s") == 0 || strcmp(w + len, "es") == 0))
                continue;
            break;
        }
        if (k == n)
            return 1;
    }
    return 0;
}

void cl_change_text_parse(const char *text, const char *object, ClChangeText *out)
{
    g_return_if_fail(out != NULL);
    static const char *const no_change[] = {
        "no change",   "no changes", "nothing changed", "nothing has changed",
        "not changed", "unchanged",  "no difference",   "no differences",
        "identical",   "the same",   "change false",    "changed false",
        NULL
    };
    g_auto(GStrv) words = words_of(text);
    out->no_change = FALSE;
    out->kind = CL_CHANGE_KIND_UNKNOWN;
    for (int i = 0; words[i]; i++) {
        for (int p = 0; !out->no_change && no_change[p]; p++)
            out->no_change = phrase_at(words, i, no_change[p]);
        if (out->kind == CL_CHANGE_KIND_UNKNOWN)
            out->kind = kind_of_word(words[i]);
    }
    parse_position(words, &out->row, &out->col);
    out->object = object && *object ? names_object(words, object) : -1;
}

/* ---- heat-map sources ----------------------------------------------------------------------- */

static const char *stateless_unavailable(const ClModel *model)
{
    return model->config.sve_variant == CL_SVE_STATELESS
               ? "the encoder is stateless: nothing is read from the previous image"
               : NULL;
}

static gboolean check_grid(const ClChangePair *p, int w, int h, GError **error)
{
    if (w == p->grid_w && h == p->grid_h)
        return TRUE;
    g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                "the model's patch grid is %d × %d but the targets' is %d × %d", w, h, p->grid_w,
                p->grid_h);
    return FALSE;
}

/* A source already on the G × G patch grid, copied as it is. */
static gboolean patch_grid_heat(const ClChangePair *p, ClHeatmapSource source, float *heat,
                                GError **error)
{
    g_autoptr(ClHeatmap) hm =
        cl_heatmap_new_from_encoder(p->enc, p->depth, source, p->image, error);
    if (!hm || !check_grid(p, hm->width, hm->height, error))
        return FALSE;
    memcpy(heat, hm->values, sizeof(float) * (gsize)hm->width * hm->height);
    return TRUE;
}

static gboolean update_norm_heat(const ClChangePair *p, float *heat, GError **error)
{
    return patch_grid_heat(p, CL_HEATMAP_UPDATE_NORM, heat, error);
}

/* Δ lives on the merger's G/2 × G/2 grid, a token per 2 × 2 patches (MODEL.md §3.8): each patch
 * takes its own token's value, so the four patches a token merged tie. */
static gboolean delta_heat(const ClChangePair *p, float *heat, GError **error)
{
    g_autoptr(ClHeatmap) hm =
        cl_heatmap_new_from_encoder(p->enc, p->depth, CL_HEATMAP_DELTA, p->image, error);
    if (!hm || !check_grid(p, p->enc->grid, p->enc->grid, error))
        return FALSE;
    for (int y = 0; y < p->grid_h; y++)
        for (int x = 0; x < p->grid_w; x++) {
            const int ty = MIN(y / 2, hm->height - 1), tx = MIN(x / 2, hm->width - 1);
            heat[y * p->grid_w + x] = hm->values[ty * hm->width + tx];
        }
    return TRUE;
}

/* the change head's per-patch probabilities (MODEL.md §3.10), on the G × G grid */
static const char *change_unavailable(const ClModel *model)
{
    return model->config.change_head ? NULL : "the model has no change head";
}

static gboolean change_heat(const ClChangePair *p, float *heat, GError **error)
{
    return patch_grid_heat(p, CL_HEATMAP_CHANGE, heat, error);
}

/* σ of the baseline's blur, pixels: about the shift the nuisances misregister by */
#define BLURDIFF_SIGMA 2.0

static gboolean blurdiff_heat(const ClChangePair *p, float *heat, GError **error)
{
    const ClSynthSample *s = p->sample;
    return cl_change_blurdiff(&s->images[p->image - 1], &s->images[p->image], BLURDIFF_SIGMA,
                              s->patch, p->grid_w, p->grid_h, heat, error);
}

static const ClChangeSource sources[] = {
    { "update_norm", "mean over the blocks of the SVE update norm per patch (the app's default)",
      TRUE, FALSE, stateless_unavailable, update_norm_heat },
    { "delta", "the paper's Δ map per visual token, each token's value on its 2 × 2 patches", TRUE,
      TRUE, stateless_unavailable, delta_heat },
    { "change", "the change head's probability per patch", TRUE, FALSE, change_unavailable,
      change_heat },
    { "blurdiff", "model-free: |after − before| blurred (σ 2 px), mean per patch", FALSE, FALSE,
      NULL, blurdiff_heat },
    { NULL },
};

const ClChangeSource *cl_change_sources(void)
{
    return sources;
}

/* one axis of a separable blur: n samples `stride` apart, edges clamped */
static void blur_line(const float *in, float *out, int n, gsize stride, const float *k, int r)
{
    for (int i = 0; i < n; i++) {
        float acc = 0;
        for (int d = -r; d <= r; d++)
            acc += k[d + r] * in[(gsize)CLAMP(i + d, 0, n - 1) * stride];
        out[(gsize)i * stride] = acc;
    }
}

gboolean cl_change_blurdiff(const ClSynthImage *a, const ClSynthImage *b, double sigma, int patch,
                            int grid_w, int grid_h, float *heat, GError **error)
{
    g_return_val_if_fail(a && b && heat && patch > 0, FALSE);
    if (a->width != b->width || a->height != b->height || a->channels != b->channels) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "the images of a pair differ in size or channels (%d × %d × %d, %d × %d × %d)",
                    a->width, a->height, a->channels, b->width, b->height, b->channels);
        return FALSE;
    }
    const int w = a->width, h = a->height, c = a->channels;
    const gsize np = (gsize)w * h;
    float *d = g_new(float, np), *t = g_new(float, np);
    for (gsize i = 0; i < np; i++) {
        int sum = 0;
        for (int k = 0; k < c; k++)
            sum += abs((int)b->pixels[i * c + k] - (int)a->pixels[i * c + k]);
        d[i] = (float)sum / c;
    }
    const int r = sigma > 0 ? (int)ceil(3 * sigma) : 0;
    float *k = g_new(float, 2 * r + 1);
    double ksum = 0;
    for (int i = -r; i <= r; i++)
        ksum += k[i + r] = r ? (float)exp(-0.5 * i * i / (sigma * sigma)) : 1.0f;
    for (int i = 0; i <= 2 * r; i++)
        k[i] = (float)(k[i] / ksum);
    for (int y = 0; y < h; y++)
        blur_line(d + (gsize)y * w, t + (gsize)y * w, w, 1, k, r);
    for (int x = 0; x < w; x++)
        blur_line(t + x, d + x, h, (gsize)w, k, r);
    for (int gy = 0; gy < grid_h; gy++)
        for (int gx = 0; gx < grid_w; gx++) {
            const int y0 = gy * patch, y1 = MIN(y0 + patch, h);
            const int x0 = gx * patch, x1 = MIN(x0 + patch, w);
            double sum = 0;
            for (int y = y0; y < y1; y++)
                for (int x = x0; x < x1; x++)
                    sum += d[(gsize)y * w + x];
            const int cnt = MAX(y1 - y0, 0) * MAX(x1 - x0, 0);
            heat[gy * grid_w + gx] = cnt ? (float)(sum / cnt) : 0.0f;
        }
    g_free(k);
    g_free(t);
    g_free(d);
    return TRUE;
}

/* ---- the evaluation ------------------------------------------------------------------------- */

void cl_change_eval_options_init(ClChangeEvalOptions *o)
{
    memset(o, 0, sizeof *o);
    o->n = 200;
    o->seed = CL_CHANGE_EVAL_SET_SEED;
    o->set = "heldout";
    o->nuisance = -1;
    o->max_new_tokens = 160;
}

void cl_change_eval_result_clear(ClChangeEvalResult *r)
{
    g_free(r->task);
    g_free(r->set);
    if (r->sources)
        g_array_unref(r->sources);
    if (r->answers)
        g_array_unref(r->answers);
    memset(r, 0, sizeof *r);
}

/* What the sample's structured answer says about its change (changeeval.h: read generically;
 * what it leaves out is not scored). */
typedef struct {
    gboolean changed; /* a patch of an image after the first changed */
    ClChangeKind kind;
    int row, col;
    char *object;
} Truth;

/* a string member under the first of the names the answer has */
static const char *answer_string(JsonObject *o, const char *name, const char *alt)
{
    JsonNode *n = json_object_get_member(o, name);
    if (!n && alt)
        n = json_object_get_member(o, alt);
    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING
               ? json_node_get_string(n)
               : NULL;
}

static void truth_of(const ClSynthSample *s, Truth *t)
{
    memset(t, 0, sizeof *t);
    t->kind = CL_CHANGE_KIND_UNKNOWN;
    t->row = t->col = -1;
    const gsize cells = (gsize)s->grid_w * s->grid_h;
    for (gsize i = cells; s->changed && i < cells * s->n_images; i++)
        t->changed |= s->changed[i] != 0;
    g_autoptr(JsonNode) root = cl_synth_sample_answer_json(s);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root))
        return;
    JsonObject *o = json_node_get_object(root);
    ClChangeText ct;
    const char *kind = answer_string(o, "kind", "type");
    if (kind) {
        cl_change_text_parse(kind, NULL, &ct);
        t->kind = ct.kind;
    }
    const char *where = answer_string(o, "position", "location");
    JsonNode *pos = json_object_get_member(o, "position");
    if (where) {
        cl_change_text_parse(where, NULL, &ct);
        t->row = ct.row, t->col = ct.col;
    } else if (pos && JSON_NODE_HOLDS_ARRAY(pos) &&
               json_array_get_length(json_node_get_array(pos)) == 2) {
        /* [x, y] in [0, 1] of the image */
        JsonArray *a = json_node_get_array(pos);
        const double x = json_array_get_double_element(a, 0),
                     y = json_array_get_double_element(a, 1);
        if (x >= 0 && x <= 1 && y >= 0 && y <= 1)
            t->col = MIN((int)(x * 3), 2), t->row = MIN((int)(y * 3), 2);
    }
    const char *object = answer_string(o, "object", NULL);
    t->object = object && *object ? g_strdup(object) : NULL;
}

static void score_text(const Truth *t, const char *text, ClChangeTextScore *ts, double acc[5])
{
    ClChangeText ct;
    cl_change_text_parse(text, t->object, &ct);
    ts->n++;
    ts->n_unchanged += !t->changed;
    acc[0] += ct.no_change == !t->changed;
    acc[4] += !t->changed && ct.no_change; /* unchanged pairs called unchanged */
    if (!t->changed)
        return;
    if (t->kind != CL_CHANGE_KIND_UNKNOWN) {
        ts->n_kind++;
        acc[1] += ct.kind == t->kind;
    }
    if (t->row >= 0) {
        ts->n_position++;
        acc[2] += ct.row == t->row && ct.col == t->col;
    }
    if (t->object) {
        ts->n_object++;
        acc[3] += ct.object == 1;
    }
}

/* One source's sums over the pairs. */
typedef struct {
    const ClChangeSource *src;
    const char *unavailable;
    GArray *pooled; /* float: every changed pair's cells, in the order of Run.labels */
    double pair_auroc, hits;
    int n_auroc_pairs, n_pairs;
    gint64 us;
} Acc;

typedef struct {
    ClBackend *be;
    const ClModel *model;
    const ClChangeEvalOptions *o;
    ClSynthOptions so;
    int grid_w, grid_h, size, patch;
    Acc acc[G_N_ELEMENTS(sources)];
    int n_acc;
    gboolean want_delta, run_encoder;
    GArray *labels; /* guint8: the targets of every changed pair's cells */
    int n_changed_pairs;
    double changed_share; /* the sum over the changed pairs of their changed cells' share */
    float *heat, *pixels;
    ClEncoderState *state;
    gint64 encode_us, describe_us;
    int n_unfamiliar;
    ClChangeTextScore text;
    double text_acc[5];
    GArray *answers; /* ClChangeTextAnswer */
} Run;

/* the set's seed and the synthetic options: the model's input size and patch grid */
static gboolean run_setup(Run *r, GError **error)
{
    const ClChangeEvalOptions *o = r->o;
    const char *set = o->set ? o->set : "heldout";
    if (strcmp(set, "heldout") != 0 && strcmp(set, "train") != 0) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "the set must be heldout or train, not '%s'", set);
        return FALSE;
    }
    if (o->n < 1 || o->nuisance < -1 || o->nuisance > 2 || o->size < 0) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "evaluate at least one sample, nuisance -1 to 2, size >= 0");
        return FALSE;
    }
    cl_synth_options_init(&r->so);
    if (r->model) {
        const ClModelConfig *cfg = &r->model->config;
        const int g = cl_config_grid(cfg);
        r->size = o->size ? o->size : cfg->image_size;
        if (r->size % g != 0) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "the image size %d px is not a multiple of the model's %d × %d patch grid",
                        r->size, g, g);
            return FALSE;
        }
        r->patch = r->size / g;
    } else {
        r->size = o->size ? o->size : r->so.width;
        r->patch = r->so.patch;
    }
    r->so.width = r->so.height = r->size;
    r->so.patch = r->patch;
    /* the nuisances' level (0 turns them off); photo-edits reads its photographs from the set
     * of the same name (the other tasks ignore it) */
    if (o->nuisance >= 0) {
        r->so.nuisance = o->nuisance > 0;
        r->so.nuisance_level = o->nuisance;
    }
    r->so.photos = set;
    r->grid_w = r->grid_h = (r->size + r->patch - 1) / r->patch;
    for (const ClChangeSource *s = sources; s->name; s++) {
        Acc *a = &r->acc[r->n_acc++];
        a->src = s;
        if (s->from_model && !r->model)
            a->unavailable = "no model";
        else if (s->unavailable && r->model)
            a->unavailable = s->unavailable(r->model);
        if (!a->unavailable) {
            a->pooled = g_array_new(FALSE, FALSE, sizeof(float));
            r->want_delta |= s->needs_delta;
            r->run_encoder |= s->from_model;
        }
    }
    r->labels = g_array_new(FALSE, FALSE, sizeof(guint8));
    r->answers = g_array_new(FALSE, FALSE, sizeof(ClChangeTextAnswer));
    r->heat = g_new(float, (gsize)r->grid_w * r->grid_h);
    if (r->model && r->run_encoder) {
        const ClModelConfig *cfg = &r->model->config;
        r->pixels = g_new(float, (gsize)cfg->channels * cfg->image_size * cfg->image_size);
        r->state = cl_encoder_state_new(r->model);
        if (!r->state) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                        "not enough memory for the encoder");
            return FALSE;
        }
    }
    return TRUE;
}

static void run_clear(Run *r)
{
    for (int i = 0; i < r->n_acc; i++)
        if (r->acc[i].pooled)
            g_array_unref(r->acc[i].pooled);
    if (r->labels)
        g_array_unref(r->labels);
    if (r->answers)
        g_array_unref(r->answers);
    g_free(r->heat);
    g_free(r->pixels);
    if (r->state)
        cl_encoder_state_free(r->state);
}

/* share of the changed cells among the hottest (a tie at the top shares the credit) */
static double hottest_hit(const float *heat, const guint8 *label, int n)
{
    float top = -INFINITY;
    for (int i = 0; i < n; i++)
        if (isfinite(heat[i]) && heat[i] > top)
            top = heat[i];
    int at_top = 0, hits = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(top) ? heat[i] == top : TRUE) {
            at_top++;
            hits += label[i] != 0;
        }
    return at_top ? (double)hits / at_top : 0;
}

/* Every available source's map of pair (t - 1, t) against its targets. */
static gboolean measure_pair(Run *r, const ClSynthSample *s, int t, const ClEncoderOutput *enc,
                             GError **error)
{
    const int cells = r->grid_w * r->grid_h;
    const guint8 *label = s->changed + (gsize)cells * t;
    int n_changed = 0;
    for (int i = 0; i < cells; i++)
        n_changed += label[i] != 0;
    if (n_changed == 0)
        return TRUE;
    r->n_changed_pairs++;
    r->changed_share += (double)n_changed / cells;
    g_array_append_vals(r->labels, label, cells);
    const ClChangePair pair = { s,         t,        enc, r->model ? r->model->config.enc_depth : 0,
                                r->grid_w, r->grid_h };
    for (int k = 0; k < r->n_acc; k++) {
        Acc *a = &r->acc[k];
        if (a->unavailable)
            continue;
        gint64 t0 = g_get_monotonic_time();
        if (!a->src->heat(&pair, r->heat, error))
            return FALSE;
        a->us += g_get_monotonic_time() - t0;
        g_array_append_vals(a->pooled, r->heat, cells);
        const double auc = cl_auroc(r->heat, label, cells);
        if (isfinite(auc)) {
            a->pair_auroc += auc;
            a->n_auroc_pairs++;
        }
        a->hits += hottest_hit(r->heat, label, cells);
        a->n_pairs++;
    }
    return TRUE;
}

/* The sample's images through the encoder, its pairs measured. */
static gboolean measure_sample(Run *r, const ClSynthSample *s, ClImage *const *imgs, int *n_pairs,
                               GError **error)
{
    if (s->grid_w != r->grid_w || s->grid_h != r->grid_h || !s->changed) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "task %s gives no change targets on the %d × %d grid", s->task, r->grid_w,
                    r->grid_h);
        return FALSE;
    }
    if (r->state)
        cl_encoder_state_reset(r->state);
    for (int t = 0; t < s->n_images; t++) {
        ClEncoderOutput eo;
        memset(&eo, 0, sizeof eo);
        if (r->state) {
            const ClModelConfig *cfg = &r->model->config;
            ClLetterbox lb;
            gint64 t0 = g_get_monotonic_time();
            gboolean ok = cl_preprocess_image(imgs[t], 0, NULL, cfg->image_size, cfg->channels,
                                              r->pixels, &lb, error) &&
                          cl_encoder_forward(r->be, r->model, r->state, r->pixels, t,
                                             r->want_delta && t > 0, NULL, NULL, &eo, error);
            r->encode_us += g_get_monotonic_time() - t0;
            if (!ok) {
                cl_encoder_output_clear(&eo);
                return FALSE;
            }
        }
        gboolean ok = t == 0 || measure_pair(r, s, t, r->state ? &eo : NULL, error);
        cl_encoder_output_clear(&eo);
        if (!ok)
            return FALSE;
        *n_pairs += t > 0;
    }
    return TRUE;
}

/* The model's answer to the sample's own question (greedy, as `eval` asks it), scored. */
static gboolean describe_sample(Run *r, const ClSynthSample *s, ClImage *const *imgs,
                                GError **error)
{
    ClDescribeImage *di = g_new0(ClDescribeImage, s->n_images);
    for (int k = 0; k < s->n_images; k++)
        di[k].image = imgs[k];
    ClDescribeOptions d;
    cl_describe_options_init(&d);
    gsize len = cl_chat_conversation_len(s->conversation);
    d.turns = cl_chat_conversation_turns(s->conversation);
    d.n_turns = len > 0 ? len - 1 : 0; /* up to the answer */
    d.change_gate_turns = TRUE;        /* the task's own question: as describe asks it */
    d.max_new_tokens = r->o->max_new_tokens;
    d.grounding = !r->o->no_grounding;
    d.heatmaps = FALSE;
    d.context = s->context;
    d.cancellable = r->o->cancellable;
    ClDescribeResult res;
    gint64 t0 = g_get_monotonic_time();
    gboolean ok = cl_describe_run(r->be, r->model, di, (guint)s->n_images, &d, &res, error);
    r->describe_us += g_get_monotonic_time() - t0;
    if (ok) {
        Truth t;
        truth_of(s, &t);
        g_autofree char *text = g_utf8_make_valid(res.text ? res.text : "", -1);
        ClChangeTextScore before = r->text;
        double acc[5];
        memcpy(acc, r->text_acc, sizeof acc);
        score_text(&t, text, &r->text, r->text_acc);
        /* right throughout: every part this sample is scored on was counted right */
        gboolean right = r->text_acc[0] > acc[0] &&
                         (r->text.n_kind == before.n_kind || r->text_acc[1] > acc[1]) &&
                         (r->text.n_position == before.n_position || r->text_acc[2] > acc[2]) &&
                         (r->text.n_object == before.n_object || r->text_acc[3] > acc[3]);
        r->n_unfamiliar += res.n_unfamiliar > 0;
        ClChangeTextAnswer a = { res.logprob, right };
        g_array_append_val(r->answers, a);
        g_free(t.object);
    }
    cl_describe_result_clear(&res);
    g_free(di);
    return ok;
}

static void run_finish(Run *r, ClChangeEvalResult *out)
{
    out->grid_w = r->grid_w, out->grid_h = r->grid_h, out->size = r->size, out->patch = r->patch;
    out->chance_hottest = out->n_changed_pairs ? r->changed_share / out->n_changed_pairs : NAN;
    for (int k = 0; k < r->n_acc; k++) {
        const Acc *a = &r->acc[k];
        ClChangeSourceScore sc = {
            a->src->name, a->src->summary, a->unavailable, NAN, NAN, 0, NAN, 0, NAN
        };
        if (!a->unavailable && a->n_pairs) {
            sc.auroc_pooled = cl_auroc((const float *)(gconstpointer)a->pooled->data,
                                       (const guint8 *)r->labels->data, r->labels->len);
            sc.auroc_pair_mean = a->n_auroc_pairs ? a->pair_auroc / a->n_auroc_pairs : NAN;
            sc.n_auroc_pairs = a->n_auroc_pairs;
            sc.hottest = a->hits / a->n_pairs;
            sc.n_pairs = a->n_pairs;
            sc.ms = a->us / 1000.0 / a->n_pairs;
        }
        g_array_append_val(out->sources, sc);
    }
    out->encode_ms = r->state && out->n_pairs ? r->encode_us / 1000.0 / out->n_pairs : NAN;
    out->describe_ms = out->described ? r->describe_us / 1000.0 / out->n_samples : NAN;
    out->n_unfamiliar = out->described && r->model->config.ood > 0 ? r->n_unfamiliar : -1;
    ClChangeTextScore ts = r->text;
    ts.change = ts.n ? r->text_acc[0] / ts.n : NAN;
    ts.kind = ts.n_kind ? r->text_acc[1] / ts.n_kind : NAN;
    ts.position = ts.n_position ? r->text_acc[2] / ts.n_position : NAN;
    ts.object = ts.n_object ? r->text_acc[3] / ts.n_object : NAN;
    ts.unchanged_right = ts.n_unchanged ? r->text_acc[4] / ts.n_unchanged : NAN;
    ts.changed_right =
        ts.n > ts.n_unchanged ? (r->text_acc[0] - r->text_acc[4]) / (ts.n - ts.n_unchanged) : NAN;
    out->text = ts;
    if (out->described)
        out->answers = g_array_ref(r->answers);
}

gboolean cl_change_eval_run(ClBackend *be, const ClModel *model, const ClChangeEvalOptions *o,
                            ClChangeEvalResult *out, GError **error)
{
    g_return_val_if_fail(o && o->task && out, FALSE);
    g_return_val_if_fail(!model || be, FALSE);
    memset(out, 0, sizeof *out);
    out->task = g_strdup(o->task);
    out->set = g_strdup(o->set ? o->set : "heldout");
    out->seed = o->seed != CL_CHANGE_EVAL_SET_SEED ? o->seed
                : strcmp(out->set, "train") == 0   ? 0
                                                   : 1000;
    out->nuisance = o->nuisance;
    out->sources = g_array_new(FALSE, TRUE, sizeof(ClChangeSourceScore));
    if (o->describe && !model) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT, "describing needs a model");
        return FALSE;
    }
    gint64 t0 = g_get_monotonic_time();
    Run r = { .be = be, .model = model, .o = o };
    gboolean ok = run_setup(&r, error);
    for (int i = 0; ok && i < o->n; i++) {
        if (g_cancellable_set_error_if_cancelled(o->cancellable, error)) {
            ok = FALSE;
            break;
        }
        g_autoptr(ClSynthSample) s =
            cl_synth_generate(o->task, cl_synth_stream_seed(out->seed, (guint64)i), &r.so, error);
        if (!s) {
            ok = FALSE;
            break;
        }
        if (s->n_images < 2) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "task %s has single images: nothing changes", o->task);
            ok = FALSE;
            break;
        }
        const gboolean need_images = r.state || o->describe;
        ClImage **imgs = g_new0(ClImage *, s->n_images);
        for (int k = 0; need_images && k < s->n_images; k++)
            imgs[k] = cl_synth_image_to_image(&s->images[k]);
        int n_pairs = 0;
        ok = measure_sample(&r, s, imgs, &n_pairs, error) &&
             (!o->describe || describe_sample(&r, s, imgs, error));
        for (int k = 0; k < s->n_images; k++)
            if (imgs[k])
                cl_image_free(imgs[k]);
        g_free(imgs);
        if (!ok)
            break;
        out->n_samples++;
        out->n_pairs += n_pairs;
        out->n_changed_pairs = r.n_changed_pairs;
        if (o->progress)
            o->progress(i + 1, o->n, o->user_data);
    }
    out->described = o->describe;
    if (ok)
        run_finish(&r, out);
    run_clear(&r);
    out->seconds = (g_get_monotonic_time() - t0) / 1e6;
    return ok;
}

/* ---- JSON ----------------------------------------------------------------------------------- */

static void json_number(JsonBuilder *b, const char *key, double v)
{
    json_builder_set_member_name(b, key);
    if (isfinite(v))
        json_builder_add_double_value(b, cl_json_double(v));
    else
        json_builder_add_null_value(b);
}

static void json_int(JsonBuilder *b, const char *key, gint64 v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_int_value(b, v);
}

static void json_string(JsonBuilder *b, const char *key, const char *v)
{
    json_builder_set_member_name(b, key);
    if (v)
        json_builder_add_string_value(b, v);
    else
        json_builder_add_null_value(b);
}

char *cl_change_eval_result_to_json(const ClChangeEvalResult *r)
{
    g_return_val_if_fail(r != NULL, NULL);
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_string(b, "task", r->task);
    json_string(b, "set", r->set);
    json_builder_set_member_name(b, "seed");
    json_builder_add_int_value(b, (gint64)r->seed);
    json_builder_set_member_name(b, "nuisance");
    if (r->nuisance >= 0)
        json_builder_add_int_value(b, r->nuisance);
    else
        json_builder_add_string_value(b, "task default");
    json_int(b, "samples", r->n_samples);
    json_int(b, "pairs", r->n_pairs);
    json_int(b, "changed_pairs", r->n_changed_pairs);
    json_int(b, "size", r->size);
    json_int(b, "patch", r->patch);
    json_builder_set_member_name(b, "grid");
    json_builder_begin_array(b);
    json_builder_add_int_value(b, r->grid_w);
    json_builder_add_int_value(b, r->grid_h);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "chance");
    json_builder_begin_object(b);
    json_number(b, "auroc", 0.5);
    json_number(b, "hottest_on_change", r->chance_hottest);
    json_builder_end_object(b);

    json_builder_set_member_name(b, "sources");
    json_builder_begin_array(b);
    for (guint i = 0; r->sources && i < r->sources->len; i++) {
        const ClChangeSourceScore *s = &g_array_index(r->sources, ClChangeSourceScore, i);
        json_builder_begin_object(b);
        json_string(b, "name", s->name);
        json_string(b, "summary", s->summary);
        json_builder_set_member_name(b, "available");
        json_builder_add_boolean_value(b, s->unavailable == NULL);
        json_string(b, "unavailable", s->unavailable);
        json_number(b, "auroc_pooled", s->auroc_pooled);
        json_number(b, "auroc_pair_mean", s->auroc_pair_mean);
        json_int(b, "auroc_pairs", s->n_auroc_pairs);
        json_number(b, "hottest_on_change", s->hottest);
        json_int(b, "pairs", s->n_pairs);
        json_number(b, "ms_per_pair", s->ms);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);

    json_builder_set_member_name(b, "text");
    if (r->described) {
        const ClChangeTextScore *t = &r->text;
        json_builder_begin_object(b);
        json_int(b, "samples", t->n);
        json_int(b, "unchanged_samples", t->n_unchanged);
        json_number(b, "change_called", t->change);
        json_number(b, "unchanged_called_unchanged", t->unchanged_right);
        json_number(b, "changed_called_changed", t->changed_right);
        json_number(b, "kind", t->kind);
        json_int(b, "kind_samples", t->n_kind);
        json_number(b, "position", t->position);
        json_int(b, "position_samples", t->n_position);
        json_number(b, "object", t->object);
        json_int(b, "object_samples", t->n_object);
        if (r->n_unfamiliar >= 0) /* samples with an image the unfamiliar-image notice flags */
            json_int(b, "unfamiliar_samples", r->n_unfamiliar);
        /* each answer: its log-probability and whether it was right throughout */
        json_builder_set_member_name(b, "answers");
        json_builder_begin_array(b);
        for (guint i = 0; r->answers && i < r->answers->len; i++) {
            const ClChangeTextAnswer *a = &g_array_index(r->answers, ClChangeTextAnswer, i);
            json_builder_begin_object(b);
            json_number(b, "logprob", a->logprob);
            json_builder_set_member_name(b, "right");
            json_builder_add_boolean_value(b, a->right);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        json_builder_end_object(b);
    } else {
        json_builder_add_null_value(b);
    }
    json_builder_set_member_name(b, "timing_ms");
    json_builder_begin_object(b);
    json_number(b, "encode_per_pair", r->encode_ms);
    json_number(b, "describe_per_sample", r->describe_ms);
    json_number(b, "total_per_pair", r->n_pairs ? r->seconds * 1000 / r->n_pairs : NAN);
    json_builder_end_object(b);
    json_number(b, "seconds", r->seconds);
    json_builder_end_object(b);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, TRUE);
    return json_generator_to_data(gen, NULL);
}
