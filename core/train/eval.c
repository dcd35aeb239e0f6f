/* eval.c - held-out evaluation of a model on a synthetic task, with the paper's metrics and the
 * task's trivial baseline (eval.h). */
#include "train/eval.h"
#include "jsonnum.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "model/describe.h"
#include "train/metrics.h"
#include "train/synthdata.h"
#include "train/taskmetrics.h"
#include "train/trainmodel.h"

void cl_eval_options_init(ClEvalOptions *o)
{
    memset(o, 0, sizeof *o);
    o->n = 100;
    o->seed = 1000;
    o->max_new_tokens = 160;
    o->baseline_n = 200;
    o->perplexity = TRUE;
    o->n_examples = 3;
    o->median_numbers = TRUE;
}

void cl_eval_result_clear(ClEvalResult *r)
{
    g_free(r->task);
    g_free(r->baseline_text);
    if (r->examples)
        g_ptr_array_unref(r->examples);
    if (r->answers) {
        for (guint i = 0; i < r->answers->len; i++) {
            ClEvalAnswer *a = &g_array_index(r->answers, ClEvalAnswer, i);
            g_free(a->reference);
            g_free(a->prediction);
        }
        g_array_unref(r->answers);
    }
    memset(r, 0, sizeof *r);
}

static void scores_nan(ClEvalScores *s)
{
    s->change_accuracy = s->bleu4 = s->meteor = s->rouge_l = s->cider = s->ppl = NAN;
    s->finding_f1_micro = s->finding_f1_macro = s->mae = s->rmse = s->exact = NAN;
    s->exact_changed = s->exact_unchanged = NAN;
}

/* Caption metrics of candidates against reference lists. */
static gboolean caption_metrics(const char *const *cand, const char *const *const *refs, guint n,
                                ClEvalScores *out, GError **error)
{
    if (n == 0)
        return TRUE;
    ClMetricsScores m;
    if (!cl_metrics_score(cand, refs, n, CL_METRICS_NONE, &m, error))
        return FALSE;
    out->bleu4 = m.bleu[3];
    out->meteor = m.meteor;
    out->rouge_l = m.rouge_l;
    out->cider = m.cider;
    cl_metrics_scores_clear(&m);
    return TRUE;
}

/* Every wording of each change of a shapes sample (NULL-terminated lists, owned by `store`). */
static GPtrArray *shapes_variants(const ClSynthSample *s, GPtrArray *store)
{
    GPtrArray *changes = g_ptr_array_new();
    for (guint c = 0; c < s->changes->len; c++) {
        const ClSynthChange *ch = &g_array_index(s->changes, ClSynthChange, c);
        const ClSynthObject *before =
            ch->before >= 0 ? &g_array_index(s->objects[ch->image - 1], ClSynthObject, ch->before)
                            : NULL;
        const ClSynthObject *after =
            ch->after >= 0 ? &g_array_index(s->objects[ch->image], ClSynthObject, ch->after) : NULL;
        int nv = cl_synth_change_n_variants(ch->type);
        char **v = g_new0(char *, nv + 1);
        for (int k = 0; k < nv; k++)
            v[k] = cl_synth_change_phrase(ch->type, before, after, k);
        g_ptr_array_add(store, v);
        g_ptr_array_add(changes, v);
    }
    return changes;
}

/* Whether a description says nothing changed (aerial). */
static gboolean says_no_change(const char *text)
{
    static const char *const phrases[] = {
        "no difference", "no change", "nothing has changed", "nothing changed", "unchanged",
        "the same",      NULL
    };
    g_autofree char *n = cl_change_normalise(text);
    for (int i = 0; phrases[i]; i++)
        if (strstr(n, phrases[i]))
            return TRUE;
    return FALSE;
}

/* The permutation-invariant change matching of a shapes answer (appendix C.3) against the
 * sample's changes, each with all its phrasings (kept alive by `store`); returns the changes. */
static GPtrArray *shapes_match(const ClSynthSample *s, const char *prediction, GPtrArray *store,
                               ClChangeMatch *m)
{
    GPtrArray *changes = shapes_variants(s, store);
    ClRefChange *rc = g_new0(ClRefChange, MAX(changes->len, 1));
    for (guint c = 0; c < changes->len; c++)
        rc[c].variants = (const char *const *)g_ptr_array_index(changes, c);
    cl_change_match(prediction ? prediction : "", rc, changes->len, m);
    g_free(rc);
    return changes;
}

/* shapes: every change matched to one of its phrasings, and no sentence more */
static gboolean shapes_exact(const ClChangeMatch *m, guint n_changes)
{
    return m->n_exact == n_changes && m->n_pred == n_changes;
}

/* aerial-series: the image an answer says the building first appears in ("… first appears in
 * image 6 ; …"), -1 when it names none */
static int series_first_image(const char *answer)
{
    const char *at = answer ? strstr(answer, "appears in image ") : NULL;
    if (!at)
        return -1;
    char *end = NULL;
    gint64 k = g_ascii_strtoll(at + strlen("appears in image "), &end, 10);
    return end && end != at + strlen("appears in image ") && k > 0 && k < 1000 ? (int)k : -1;
}

/* the whole answer, up to spacing and case */
static char *normalised(const char *a)
{
    g_auto(GStrv) w = g_strsplit_set(a ? a : "", " \t\r\n", -1);
    g_autoptr(GString) out = g_string_new(NULL);
    for (int i = 0; w[i]; i++)
        if (*w[i])
            g_string_append_printf(out, "%s%s", out->len ? " " : "", w[i]);
    return g_utf8_casefold(out->str, -1);
}

static gboolean same_answer(const char *a, const char *b)
{
    g_autofree char *x = normalised(a), *y = normalised(b);
    return strcmp(x, y) == 0;
}

int cl_eval_answer_exact(const char *task, const ClSynthSample *s, const char *prediction)
{
    if (strcmp(task, "aerial") == 0 || strcmp(task, "aerial-series") == 0 ||
        strcmp(task, "aerial-log") == 0)
        return same_answer(s->answer, prediction);
    if (strcmp(task, "shapes") == 0) {
        g_autoptr(GPtrArray) store = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
        ClChangeMatch m;
        g_autoptr(GPtrArray) changes = shapes_match(s, prediction, store, &m);
        gboolean exact = shapes_exact(&m, changes->len);
        cl_change_match_clear(&m);
        return exact;
    }
    if (strcmp(task, "radiograph") == 0) {
        ClFindingLabels g, p;
        cl_findings_parse(s->answer, &g);
        cl_findings_parse(prediction, &p);
        return cl_findings_equal(&g, &p);
    }
    return -1;
}

/* Whether sample s shows a change (1), none (0), or cannot say (-1). */
static int sample_changed(const char *task, const ClSynthSample *s)
{
    if (strcmp(task, "radiograph") == 0) {
        ClFindingLabels g;
        cl_findings_parse(s->answer, &g);
        return !cl_findings_empty(&g);
    }
    if (strcmp(task, "aerial") == 0 || strcmp(task, "shapes") == 0)
        return s->changes && s->changes->len > 0;
    return -1;
}

/* ClEvalScores.exact_changed and exact_unchanged. */
static void exact_split(const char *task, ClSynthSample *const *samples,
                        const char *const *predictions, int n, ClEvalScores *out)
{
    int right[2] = { 0 }, count[2] = { 0 };
    for (int i = 0; i < n; i++) {
        int changed = sample_changed(task, samples[i]);
        int exact = changed >= 0 ? cl_eval_answer_exact(task, samples[i], predictions[i]) : -1;
        if (exact < 0)
            continue;
        count[changed]++;
        right[changed] += exact;
    }
    if (count[1])
        out->exact_changed = (double)right[1] / count[1];
    if (count[0])
        out->exact_unchanged = (double)right[0] / count[0];
}

gboolean cl_eval_score(const char *task, ClSynthSample *const *samples,
                       const char *const *predictions, int n, ClEvalScores *out, GError **error)
{
    scores_nan(out);
    if (n <= 0)
        return TRUE;
    exact_split(task, samples, predictions, n, out);
    if (strcmp(task, "dots") == 0) {
        ClNumericScore ns = { 0 };
        for (int i = 0; i < n; i++)
            cl_numeric_score_add(&ns, samples[i]->value, predictions[i]);
        out->mae = cl_numeric_score_mae(&ns) * 100;
        out->rmse = cl_numeric_score_rmse(&ns) * 100;
        return TRUE;
    }
    if (strcmp(task, "shapes") == 0) {
        g_autoptr(GPtrArray) store = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
        g_autoptr(GPtrArray) cand = g_ptr_array_new_with_free_func(g_free);
        g_autoptr(GPtrArray) refs = g_ptr_array_new();
        double acc = 0;
        int exact = 0;
        for (int i = 0; i < n; i++) {
            ClChangeMatch m;
            g_autoptr(GPtrArray) changes = shapes_match(samples[i], predictions[i], store, &m);
            acc += cl_change_match_accuracy(&m);
            exact += shapes_exact(&m, changes->len);
            for (guint c = 0; c < changes->len; c++) {
                g_ptr_array_add(cand, g_strdup(m.matched[c] ? m.matched[c] : ""));
                g_ptr_array_add(refs, g_ptr_array_index(changes, c));
            }
            cl_change_match_clear(&m);
        }
        out->change_accuracy = acc / n;
        out->exact = (double)exact / n;
        return caption_metrics((const char *const *)cand->pdata,
                               (const char *const *const *)refs->pdata, cand->len, out, error);
    }
    /* whole-answer caption metrics: radiograph, aerial, edits (and any later task) */
    g_autofree const char **cand = g_new(const char *, n);
    g_autofree const char ***refs = g_new(const char **, n);
    g_autofree const char **ref1 = g_new0(const char *, 2 * (gsize)n);
    for (int i = 0; i < n; i++) {
        cand[i] = predictions[i];
        ref1[2 * i] = samples[i]->answer;
        refs[i] = &ref1[2 * i];
    }
    if (!caption_metrics(cand, (const char *const *const *)refs, (guint)n, out, error))
        return FALSE;
    if (strcmp(task, "radiograph") == 0) {
        ClFindingScore fs;
        cl_finding_score_init(&fs);
        for (int i = 0; i < n; i++)
            cl_finding_score_add(&fs, samples[i]->answer, predictions[i]);
        ClFindingResult fr;
        cl_finding_score_result(&fs, &fr);
        out->change_accuracy = fr.change_accuracy;
        out->exact = fr.n_pairs ? (double)fr.n_exact / fr.n_pairs : NAN;
        if (fr.n_changed_pairs) {
            out->finding_f1_micro = fr.micro_f1;
            out->finding_f1_macro = fr.macro_f1;
        }
    } else if (strcmp(task, "aerial") == 0) {
        int agree = 0, exact = 0;
        for (int i = 0; i < n; i++) {
            agree += (samples[i]->changes->len == 0) == says_no_change(predictions[i]);
            exact += same_answer(samples[i]->answer, predictions[i]);
        }
        out->change_accuracy = (double)agree / n;
        out->exact = (double)exact / n;
    } else if (strcmp(task, "aerial-series") == 0 || strcmp(task, "aerial-log") == 0) {
        /* change accuracy: the image the building first appears in, as the reference says;
         * exact: the whole answer */
        int when = 0, exact = 0;
        for (int i = 0; i < n; i++) {
            const int k = series_first_image(samples[i]->answer);
            when += k > 0 && k == series_first_image(predictions[i]);
            exact += same_answer(samples[i]->answer, predictions[i]);
        }
        out->change_accuracy = (double)when / n;
        out->exact = (double)exact / n;
    }
    return TRUE;
}

/* The baseline's single answer: the most frequent training answer; dots: the mean value of the
 * question asked, answered per sample with its own question's mean. The question names the
 * quantity and the number of images, and the area's mean grows with the number of dots (0.06 for
 * a triangle, 0.18 for five), so a model that reads only the question scores this mean's error,
 * not the error of one mean over all questions. */
#define BASELINE_MAX_IMAGES 8
typedef struct {
    char *majority;
    double mean[3][BASELINE_MAX_IMAGES + 1]; /* by ClSynthQuantity and number of images */
} Baseline;

static int baseline_images(const ClSynthSample *s)
{
    return s->n_images >= 0 && s->n_images <= BASELINE_MAX_IMAGES ? s->n_images : 0;
}

static gboolean make_baseline(const ClEvalOptions *o, const ClSynthOptions *so, Baseline *b,
                              GError **error)
{
    memset(b, 0, sizeof *b);
    guint64 seed =
        o->baseline_seed ? o->baseline_seed : o->seed ^ G_GUINT64_CONSTANT(0x5eedba5e1ee7);
    g_autoptr(GHashTable) counts = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    double sum[3][BASELINE_MAX_IMAGES + 1] = { { 0 } };
    int cnt[3][BASELINE_MAX_IMAGES + 1] = { { 0 } };
    guint best = 0;
    for (int i = 0; i < o->baseline_n; i++) {
        g_autoptr(ClSynthSample) s =
            cl_synth_generate(o->task, cl_synth_stream_seed(seed, (guint64)i), so, error);
        if (!s)
            return FALSE;
        guint c = GPOINTER_TO_UINT(g_hash_table_lookup(counts, s->answer)) + 1;
        g_hash_table_replace(counts, g_strdup(s->answer), GUINT_TO_POINTER(c));
        if (c > best) {
            best = c;
            g_free(b->majority);
            b->majority = g_strdup(s->answer);
        }
        if ((guint)s->quantity < 3) {
            sum[s->quantity][baseline_images(s)] += s->value;
            cnt[s->quantity][baseline_images(s)]++;
        }
    }
    for (int q = 0; q < 3; q++)
        for (int k = 0; k <= BASELINE_MAX_IMAGES; k++)
            b->mean[q][k] = cnt[q][k] ? sum[q][k] / cnt[q][k] : 0;
    return TRUE;
}

static ClChatTurn *prompt_turns(const ClSynthSample *s, gsize *n)
{
    /* the conversation up to (not including) the final answer (appendix C) */
    gsize len = cl_chat_conversation_len(s->conversation);
    *n = len > 0 ? len - 1 : 0;
    return (ClChatTurn *)cl_chat_conversation_turns(s->conversation);
}

gboolean cl_eval_run(ClBackend *be, const ClModel *model, const ClEvalOptions *o, ClEvalResult *out,
                     GError **error)
{
    memset(out, 0, sizeof *out);
    out->task = g_strdup(o->task);
    out->n = o->n;
    out->examples = g_ptr_array_new_with_free_func(g_free);
    out->answers = g_array_new(FALSE, TRUE, sizeof(ClEvalAnswer));
    scores_nan(&out->model);
    scores_nan(&out->baseline);
    gint64 t0 = g_get_monotonic_time();
    if (o->n < 1) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT, "evaluate at least one sample");
        return FALSE;
    }
    ClSynthOptions so;
    cl_synth_options_for_model(&so, model);
    so.n_images = strcmp(o->task, "dots") == 0 ? o->dot_images : 0; /* a dots option (eval.h) */
    Baseline base;
    if (!make_baseline(o, &so, &base, error))
        return FALSE;
    out->baseline_text =
        g_strdup(strcmp(o->task, "dots") == 0
                     ? "the mean value of the question asked (quantity and number of images)"
                     : base.majority);

    ClSynthSample **samples = g_new0(ClSynthSample *, o->n);
    char **pred = g_new0(char *, o->n + 1), **bpred = g_new0(char *, o->n + 1);
    double nll = 0, n_tok = 0;
    gboolean ok = TRUE;
    for (int i = 0; ok && i < o->n; i++) {
        if (g_cancellable_set_error_if_cancelled(o->cancellable, error)) {
            ok = FALSE;
            break;
        }
        samples[i] =
            cl_synth_generate(o->task, cl_synth_stream_seed(o->seed, (guint64)i), &so, error);
        if (!samples[i]) {
            ok = FALSE;
            break;
        }
        const ClSynthSample *s = samples[i];
        ClImage **imgs = g_new0(ClImage *, s->n_images);
        ClDescribeImage *di = g_new0(ClDescribeImage, s->n_images);
        for (int k = 0; k < s->n_images; k++) {
            imgs[k] = cl_synth_image_to_image(&s->images[k]);
            di[k].image = imgs[k];
        }
        ClDescribeOptions dopt;
        cl_describe_options_init(&dopt);
        dopt.turns = prompt_turns(s, &dopt.n_turns);
        dopt.max_new_tokens = o->max_new_tokens;
        dopt.median_numbers = o->median_numbers && strcmp(o->task, "dots") == 0;
        dopt.heatmaps = FALSE;
        dopt.context = s->context;
        dopt.stream_sink = o->stream_sink;
        dopt.stream_window = o->stream_window;
        dopt.sparse_block = o->sparse_block;
        dopt.sparse_topk = o->sparse_topk;
        dopt.cancellable = o->cancellable;
        if (o->grounded) {
            /* the domain describe detects in the task's files, and its steering */
            dopt.change_gate_turns = TRUE;
            if (g_str_has_prefix(o->task, "aerial")) {
                dopt.auto_domain = FALSE;
                dopt.domain = CL_CHAT_DOMAIN_AERIAL;
            } else if (g_str_has_prefix(o->task, "radiograph")) {
                dopt.auto_domain = FALSE;
                dopt.domain = CL_CHAT_DOMAIN_RADIOGRAPH;
            }
        }
        ClDescribeResult res;
        double logprob = 0;
        int n_scored = 0;
        ok = cl_describe_run(be, model, di, (guint)s->n_images, &dopt, &res, error);
        if (ok) {
            pred[i] = g_utf8_make_valid(res.text ? res.text : "", -1);
            g_strstrip(pred[i]);
            logprob = res.logprob;
            n_scored = res.ids ? (int)res.ids->len + 1 : 0;
        }
        cl_describe_result_clear(&res);
        if (ok && o->perplexity) {
            g_autoptr(ClTrainSample) ts = cl_train_sample_from_synth(model, s, FALSE, error);
            ClTrainStepStats st;
            ok = ts && cl_train_loss(be, model, ts, NULL, &st, error);
            if (ok) {
                nll += st.loss * st.n_supervised;
                n_tok += st.n_supervised;
            }
        }
        for (int k = 0; k < s->n_images; k++)
            cl_image_free(imgs[k]);
        g_free(imgs);
        g_free(di);
        if (!ok)
            break;
        if (strcmp(o->task, "dots") == 0)
            bpred[i] = g_strdup_printf(
                "%.4f", base.mean[(guint)s->quantity < 3 ? s->quantity : 0][baseline_images(s)]);
        else
            bpred[i] = g_strdup(base.majority);
        ClEvalAnswer a = { g_strdup(s->answer), g_strdup(pred[i]),
                           cl_eval_answer_exact(o->task, s, pred[i]), logprob, n_scored };
        g_array_append_val(out->answers, a);
        if (i < o->n_examples) {
            g_ptr_array_add(out->examples, g_strdup(s->answer));
            g_ptr_array_add(out->examples, g_strdup(pred[i]));
        }
        if (o->progress)
            o->progress(i + 1, o->n, o->user_data);
    }
    if (ok)
        ok = cl_eval_score(o->task, samples, (const char *const *)pred, o->n, &out->model, error) &&
             cl_eval_score(o->task, samples, (const char *const *)bpred, o->n, &out->baseline,
                           error);
    if (ok && o->perplexity && n_tok > 0)
        out->model.ppl = exp(nll / n_tok);
    for (int i = 0; i < o->n; i++)
        cl_synth_sample_free(samples[i]);
    g_free(samples);
    g_strfreev(pred);
    g_strfreev(bpred);
    g_free(base.majority);
    out->seconds = (g_get_monotonic_time() - t0) / 1e6;
    return ok;
}

static void add_scores(JsonBuilder *b, const ClEvalScores *s)
{
    const struct {
        const char *key;
        double v;
    } m[] = {
        { "change_accuracy", s->change_accuracy },
        { "bleu4", s->bleu4 },
        { "meteor", s->meteor },
        { "rougeL", s->rouge_l },
        { "cider", s->cider },
        { "ppl", s->ppl },
        { "finding_f1_micro", s->finding_f1_micro },
        { "finding_f1_macro", s->finding_f1_macro },
        { "mae", s->mae },
        { "rmse", s->rmse },
        { "exact", s->exact },
        { "exact_changed", s->exact_changed },
        { "exact_unchanged", s->exact_unchanged },
    };
    for (gsize i = 0; i < G_N_ELEMENTS(m); i++) {
        json_builder_set_member_name(b, m[i].key);
        if (isfinite(m[i].v))
            json_builder_add_double_value(b, cl_json_double(m[i].v));
        else
            json_builder_add_null_value(b);
    }
}

char *cl_eval_result_to_json(const ClEvalResult *r)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "task");
    json_builder_add_string_value(b, r->task);
    json_builder_set_member_name(b, "n");
    json_builder_add_int_value(b, r->n);
    add_scores(b, &r->model);
    json_builder_set_member_name(b, "baseline");
    json_builder_begin_object(b);
    add_scores(b, &r->baseline);
    json_builder_set_member_name(b, "answer");
    json_builder_add_string_value(b, r->baseline_text ? r->baseline_text : "");
    json_builder_end_object(b);
    json_builder_set_member_name(b, "examples");
    json_builder_begin_array(b);
    for (guint i = 0; r->examples && i + 1 < r->examples->len; i += 2) {
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "reference");
        json_builder_add_string_value(b, g_ptr_array_index(r->examples, i));
        json_builder_set_member_name(b, "prediction");
        json_builder_add_string_value(b, g_ptr_array_index(r->examples, i + 1));
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "seconds");
    json_builder_add_double_value(b, cl_json_double(r->seconds));
    json_builder_end_object(b);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, TRUE);
    return json_generator_to_data(gen, NULL);
}
