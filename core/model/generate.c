/* generate.c - greedy and beam search over cl_decoder_forward with KV caches; stop strings,
 * limits, UTF-8-safe streaming and cancellation (see generate.h for the contract). */
#include "model/generate.h"
#include "model/vist.h"

#include <math.h>
#include <string.h>

#include "model/decoder.h"

void cl_generate_options_init(ClGenerateOptions *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->max_new_tokens = 256;
    opts->beam_size = 1;
    opts->length_penalty = 1.0;
}

const char *cl_stop_reason_name(ClStopReason r)
{
    switch (r) {
    case CL_STOP_END_TOKEN: return "end_token";
    case CL_STOP_STRING: return "stop_string";
    case CL_STOP_MAX_TOKENS: return "max_tokens";
    case CL_STOP_MAX_LEN: return "max_len";
    case CL_STOP_CANCELLED: return "cancelled";
    }
    return "unknown";
}

void cl_generate_result_init(ClGenerateResult *r)
{
    memset(r, 0, sizeof *r);
    r->ids = g_array_new(FALSE, FALSE, sizeof(gint32));
    r->text = g_string_new(NULL);
}

void cl_generate_result_clear(ClGenerateResult *r)
{
    if (r->ids)
        g_array_unref(r->ids);
    if (r->text)
        g_string_free(r->text, TRUE);
    memset(r, 0, sizeof *r);
}

static inline double ms_since(gint64 t0)
{
    return (g_get_monotonic_time() - t0) / 1000.0;
}

/* ---- vocabulary, log-probabilities -------------------------------------------------------- */

typedef struct {
    const ClModel *model;
    int V;     /* logits per position (config vocab_size) */
    int n_tok; /* ids the tokenizer knows: the only ones that may be generated */
} Vocab;

static inline gboolean allowed(const Vocab *v, int id)
{
    /* the NUL byte never: descriptions travel as C strings (JSON, the case database, the UI) */
    return id > 0 && id < v->n_tok && id != CL_TOKEN_IMAGE && id != CL_TOKEN_PAD;
}

static inline gboolean is_end(gint32 id)
{
    return id == CL_TOKEN_IM_END || id == CL_TOKEN_ENDOFTEXT;
}

/* log(sum exp) over the allowed ids, in double so that logit - lse keeps the logits' order. */
static double log_sum_exp(const Vocab *v, const float *logits)
{
    double mx = -INFINITY;
    for (int i = 0; i < v->n_tok && i < v->V; i++)
        if (allowed(v, i) && logits[i] > mx)
            mx = logits[i];
    if (!isfinite(mx))
        return mx;
    double s = 0;
    for (int i = 0; i < v->n_tok && i < v->V; i++)
        if (allowed(v, i))
            s += exp((double)logits[i] - mx);
    return mx + log(s);
}

/* Ids of the k largest allowed logits, largest first, ties to the lower id. Returns how many
 * were found (< k only when fewer ids are allowed). */
static int top_k(const Vocab *v, const float *logits, int k, gint32 *ids)
{
    int n = 0;
    int lim = MIN(v->n_tok, v->V);
    for (int i = 0; i < lim; i++) {
        if (!allowed(v, i) || isnan(logits[i]))
            continue;
        if (n == k && !(logits[i] > logits[ids[n - 1]]))
            continue;
        int j = n < k ? n++ : n - 1;
        while (j > 0 && logits[i] > logits[ids[j - 1]]) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = i;
    }
    return n;
}

/* ---- text, stop strings, streaming -------------------------------------------------------- */

/* Appends the token's bytes; returns the position of the earliest stop string that the new bytes
 * complete, or -1. Only matches ending in the new bytes are looked for (older text was checked). */
static gssize append_and_find_stop(const ClModel *model, GString *text, gint32 id,
                                   const char *const *stops)
{
    gsize old = text->len, len = 0;
    const char *b = cl_tokenizer_token_bytes(model->tokenizer, id, &len);
    if (b)
        g_string_append_len(text, b, (gssize)len);
    if (!stops)
        return -1;
    gssize best = -1;
    for (int s = 0; stops[s]; s++) {
        gsize L = strlen(stops[s]);
        if (L == 0 || L > text->len)
            continue;
        gsize from = old >= L - 1 ? old - (L - 1) : 0;
        const char *hit = memmem(text->str + from, text->len - from, stops[s], L);
        if (hit && (best < 0 || hit - text->str < best))
            best = hit - text->str;
    }
    return best;
}

/* Length of the longest suffix of text that is a proper prefix of a stop string: text that may
 * still become a stop string and so must not be shown yet. */
static gsize stop_holdback(const GString *text, const char *const *stops)
{
    gsize best = 0;
    for (int s = 0; stops && stops[s]; s++) {
        gsize L = strlen(stops[s]);
        for (gsize k = MIN(L ? L - 1 : 0, text->len); k > best; k--)
            if (memcmp(text->str + text->len - k, stops[s], k) == 0) {
                best = k;
                break;
            }
    }
    return best;
}

/* The largest end <= `end` such that s[start, end) does not finish with an incomplete UTF-8
 * sequence. Invalid bytes pass through (they will never complete). */
static gsize utf8_safe_end(const char *s, gsize start, gsize end)
{
    for (gsize back = 1; back <= 4 && back <= end - start; back++) {
        guchar c = (guchar)s[end - back];
        if ((c & 0xC0) == 0x80)
            continue;
        gsize need = c >= 0xF8 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back ? end - back : end;
    }
    return end;
}

typedef struct {
    ClTokenCallback cb;
    gpointer data;
    const char *const *stops;
    gsize emitted; /* bytes of the text already passed on */
} Emitter;

static void emit_token(Emitter *e, gint32 id, const GString *text)
{
    if (!e->cb)
        return;
    gsize hold = stop_holdback(text, e->stops);
    gsize end = text->len - hold;
    end = MAX(end, e->emitted);
    end = utf8_safe_end(text->str, e->emitted, end);
    e->cb(id, text->str + e->emitted, end - e->emitted, e->data);
    e->emitted = end;
}

static void emit_finish(Emitter *e, const GString *text)
{
    if (e->cb && e->emitted < text->len)
        e->cb(-1, text->str + e->emitted, text->len - e->emitted, e->data);
    e->emitted = text->len;
}

/* ---- greedy ------------------------------------------------------------------------------- */

typedef struct {
    ClBackend *be;
    const ClModel *model;
    const ClGenerateOptions *opts;
    Vocab vocab;
    gint32 digit_id[10]; /* the token that is exactly the digit d, or -1 */
    int max_new;         /* tokens that may be generated */
    ClStopReason limit;  /* what max_new stands for */
    int capacity;        /* cache positions */
    GArray *vist_raw;    /* VIST2: the generated ids not compressed yet */
} Gen;

static gboolean cancelled(const Gen *g, GError **error)
{
    return g_cancellable_set_error_if_cancelled(g->opts->cancellable, error);
}

static double finish_score(double logprob, int n, double lp)
{
    return n > 0 ? logprob / pow((double)n, lp) : logprob;
}

int cl_generate_quantile_pick(const double *p, int n, double *q)
{
    double sum = 0;
    int last = -1;
    for (int d = 0; d < n; d++)
        if (p[d] > 0) {
            sum += p[d];
            last = d;
        }
    if (last < 0)
        return -1;
    double below = 0;
    for (int d = 0; d < n; d++) {
        if (p[d] <= 0)
            continue;
        double pd = p[d] / sum;
        if (below + pd >= *q) {
            *q = CLAMP((*q - below) / pd, 0.0, 1.0);
            return d;
        }
        below += pd;
    }
    *q = 1.0; /* rounding left q above the last cumulative sum: the largest choice, its top */
    return last;
}

/* median_numbers: the single-digit token the number's median takes at this place (see
 * cl_generate_quantile_pick); -1 when no digit token is allowed. */
static gint32 median_digit(const Gen *g, const float *logits, double *q)
{
    double p[10], mx = -INFINITY;
    for (int d = 0; d < 10; d++) {
        gint32 id = g->digit_id[d];
        if (id >= 0 && allowed(&g->vocab, id) && logits[id] > mx)
            mx = logits[id];
    }
    if (!isfinite(mx))
        return -1;
    for (int d = 0; d < 10; d++) {
        gint32 id = g->digit_id[d];
        p[d] = id >= 0 && allowed(&g->vocab, id) ? exp((double)logits[id] - mx) : 0;
    }
    int d = cl_generate_quantile_pick(p, 10, q);
    return d < 0 ? -1 : g->digit_id[d];
}

static gboolean is_digit_id(const Gen *g, gint32 id)
{
    for (int d = 0; d < 10; d++)
        if (g->digit_id[d] == id)
            return TRUE;
    return FALSE;
}

/* opts->first_text: the tokens that disagree with it (or, avoiding it, agree) get -inf. */
static void constrain_first(const Gen *g, float *logits)
{
    const ClGenerateOptions *o = g->opts;
    const size_t L = strlen(o->first_text);
    const int lim = MIN(g->vocab.n_tok, g->vocab.V);
    for (int i = 0; i < lim; i++) {
        gsize len = 0;
        const char *b = cl_tokenizer_token_bytes(g->model->tokenizer, i, &len);
        gboolean agrees = b && len > 0 && memcmp(b, o->first_text, MIN(len, L)) == 0;
        if (agrees == o->first_text_avoid)
            logits[i] = -INFINITY;
    }
}

/* slot_phrases: how many of the most likely tokens are tried before the best one is taken
 * regardless (a model that wants nothing allowed there) */
#define MAX_SLOT_TRIES 64

/* whether the text with token id appended keeps every slot's phrase to the allowed ones; the
 * answer's end closes the text as a full stop would (an answer may not end inside a phrase: "a
 * new" where only "a new house" is allowed) */
static gboolean slot_ok(const Gen *g, const GString *text, gint32 id)
{
    gsize len = 0;
    const char *b = is_end(id) ? "." : cl_tokenizer_token_bytes(g->model->tokenizer, id, &len);
    if (is_end(id))
        len = 1;
    char buf[CL_GROUNDING_TEXT_WINDOW + 64];
    const gsize keep = MIN(text->len, (gsize)CL_GROUNDING_TEXT_WINDOW),
                add = b ? MIN(len, (gsize)64) : 0;
    memcpy(buf, text->str + text->len - keep, keep);
    if (add)
        memcpy(buf + keep, b, add);
    for (int i = 0; i < g->opts->n_slots; i++)
        if (!cl_grounding_text_ok(buf, keep + add, keep == text->len, &g->opts->slots[i]))
            return FALSE;
    return TRUE;
}

static gboolean greedy(Gen *g, ClKVCache *cache, float *logits, ClGenerateResult *out,
                       GError **error)
{
    const ClGenerateOptions *o = g->opts;
    Emitter em = { o->on_token, o->user_data, o->stop_strings, 0 };
    gint64 t0 = g_get_monotonic_time();
    gboolean ok = TRUE;
    double q = 0.5;          /* median_numbers: the quantile still sought in this number */
    gboolean in_num = FALSE; /* the last token was a digit or the '.' inside a number */
    for (;;) {
        gint32 id;
        if (o->first_text && *o->first_text && out->ids->len == 0)
            constrain_first(g, logits);
        if (top_k(&g->vocab, logits, 1, &id) < 1) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "the decoder produced no usable logits (NaN)");
            ok = FALSE;
            break;
        }
        for (int tries = 0; o->n_slots > 0 && tries < MAX_SLOT_TRIES && !slot_ok(g, out->text, id);
             tries++) {
            gint32 next;
            logits[id] = -INFINITY;
            if (top_k(&g->vocab, logits, 1, &next) < 1)
                break; /* nothing else: the first choice stands */
            id = next;
        }
        if (o->median_numbers) {
            gboolean digit = is_digit_id(g, id);
            if (!in_num)
                q = 0.5; /* a new number starts */
            if (digit) {
                gint32 m = median_digit(g, logits, &q);
                if (m >= 0)
                    id = m;
            }
            gsize len = 0;
            const char *b = cl_tokenizer_token_bytes(g->model->tokenizer, id, &len);
            in_num = digit || (in_num && len == 1 && b && b[0] == '.');
        }
        out->logprob += (double)logits[id] - log_sum_exp(&g->vocab, logits);
        out->n_scored++;
        if (is_end(id)) {
            out->stop_reason = CL_STOP_END_TOKEN;
            break;
        }
        g_array_append_val(out->ids, id);
        gssize stop = append_and_find_stop(g->model, out->text, id, o->stop_strings);
        if (stop >= 0) {
            g_string_truncate(out->text, (gsize)stop);
            out->stop_reason = CL_STOP_STRING;
            emit_token(&em, id, out->text);
            break;
        }
        emit_token(&em, id, out->text);
        if ((int)out->ids->len >= g->max_new) {
            out->stop_reason = g->limit;
            break;
        }
        if (cancelled(g, error)) {
            out->stop_reason = CL_STOP_CANCELLED;
            ok = FALSE;
            break;
        }
        if (!cl_decoder_forward(g->be, g->model, cache, &id, 1, NULL, logits, NULL, NULL, NULL,
                                error)) {
            ok = FALSE;
            break;
        }
        out->n_steps++;
        if (g->vist_raw) { /* VIST2: a full chunk of generated text becomes its image's rows */
            g_array_append_val(g->vist_raw, id);
            if ((int)g->vist_raw->len == g->model->config.vist_chunk) {
                if (!cl_vist_compress(o->vist, cache, (const gint32 *)(gpointer)g->vist_raw->data,
                                      (int)g->vist_raw->len, logits, error)) {
                    ok = FALSE;
                    break;
                }
                g_array_set_size(g->vist_raw, 0);
            }
        }
    }
    if (ok)
        emit_finish(&em, out->text);
    out->score = finish_score(out->logprob, out->n_scored, o->length_penalty);
    out->decode_ms = ms_since(t0);
    return ok;
}

/* ---- beam search -------------------------------------------------------------------------- */

typedef struct {
    GArray *ids; /* gint32 */
    GString *text;
    double logprob;
    int n_scored;
    ClStopReason reason; /* finished hypotheses */
    ClKVCache *cache;    /* live hypotheses */
    float *logits;       /* live: (V) for the next token */
} Hyp;

static Hyp *hyp_new(void)
{
    Hyp *h = g_new0(Hyp, 1);
    h->ids = g_array_new(FALSE, FALSE, sizeof(gint32));
    h->text = g_string_new(NULL);
    return h;
}

static void hyp_free(Hyp *h)
{
    if (!h)
        return;
    g_array_unref(h->ids);
    g_string_free(h->text, TRUE);
    if (h->cache)
        cl_kv_cache_free(h->cache);
    g_free(h->logits);
    g_free(h);
}

static Hyp *hyp_child(const Hyp *p, gint32 id, double lp)
{
    Hyp *h = hyp_new();
    g_array_append_vals(h->ids, p->ids->data, p->ids->len);
    g_string_append_len(h->text, p->text->str, (gssize)p->text->len);
    h->logprob = p->logprob + lp;
    h->n_scored = p->n_scored + 1;
    (void)id;
    return h;
}

typedef struct {
    int parent;
    gint32 id;
    float logit;  /* tie-break: same parent, same score -> larger logit first */
    double lp;    /* log-probability of id */
    double score; /* parent's logprob + lp */
} Cand;

static int cand_cmp(const void *a, const void *b)
{
    const Cand *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    if (x->parent != y->parent)
        return x->parent < y->parent ? -1 : 1;
    if (x->logit != y->logit)
        return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static ClKVCache *new_cache(const Gen *g)
{
    if (g->opts->stream_window > 0)
        return cl_kv_cache_new_streaming(g->model, MAX(g->opts->stream_sink, 0),
                                         g->opts->stream_window);
    return cl_kv_cache_new(g->model, g->capacity);
}

static ClKVCache *take_cache(Gen *g, GPtrArray *spare, GError **error)
{
    if (spare->len > 0)
        return g_ptr_array_steal_index_fast(spare, spare->len - 1);
    ClKVCache *c = new_cache(g);
    if (!c)
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "not enough memory for another beam's KV cache (%d positions)", g->capacity);
    return c;
}

static double hyp_score(const Hyp *h, double lp)
{
    return finish_score(h->logprob, h->n_scored, lp);
}

static void result_from_hyp(ClGenerateResult *out, const Hyp *h, double lp)
{
    g_array_set_size(out->ids, 0);
    g_array_append_vals(out->ids, h->ids->data, h->ids->len);
    g_string_assign(out->text, "");
    g_string_append_len(out->text, h->text->str, (gssize)h->text->len);
    out->logprob = h->logprob;
    out->n_scored = h->n_scored;
    out->score = hyp_score(h, lp);
    out->stop_reason = h->reason;
}

/* Replays the chosen hypothesis through the emitter, so the callback sees what greedy decoding
 * of the same tokens would have shown. */
static void replay(const Gen *g, const ClGenerateResult *out)
{
    const ClGenerateOptions *o = g->opts;
    if (!o->on_token)
        return;
    Emitter em = { o->on_token, o->user_data, o->stop_strings, 0 };
    GString *t = g_string_new(NULL);
    for (guint i = 0; i < out->ids->len; i++) {
        gint32 id = g_array_index(out->ids, gint32, i);
        gsize len = 0;
        const char *b = cl_tokenizer_token_bytes(g->model->tokenizer, id, &len);
        if (b)
            g_string_append_len(t, b, (gssize)len);
        if (t->len > out->text->len) /* the stop string's token: cut as the search did */
            g_string_truncate(t, out->text->len);
        emit_token(&em, id, t);
    }
    emit_finish(&em, t);
    g_string_free(t, TRUE);
}

/* The candidates of one step: the top `slots` tokens of every live hypothesis, scored by the
 * hypothesis' log-probability plus the token's; returns how many (0 when every logit is NaN). */
static int score_candidates(const Gen *g, GPtrArray *live, int slots, Cand *cands, gint32 *top)
{
    int nc = 0;
    for (guint b = 0; b < live->len; b++) {
        Hyp *h = g_ptr_array_index(live, b);
        double lse = log_sum_exp(&g->vocab, h->logits);
        int k = top_k(&g->vocab, h->logits, slots, top);
        for (int j = 0; j < k; j++) {
            Cand *c = &cands[nc++];
            c->parent = (int)b;
            c->id = top[j];
            c->logit = h->logits[top[j]];
            c->lp = (double)c->logit - lse;
            c->score = h->logprob + c->lp;
        }
    }
    return nc;
}

/* The best `slots` candidates (sorted) become children: finished ones go to done, the others to
 * next with their parent's index in parents. */
static void select_children(const Gen *g, GPtrArray *live, const Cand *cands, int nc, int slots,
                            GPtrArray *done, GPtrArray *next, GArray *parents)
{
    const ClGenerateOptions *o = g->opts;
    for (int j = 0; j < MIN(nc, slots); j++) {
        const Cand *c = &cands[j];
        const Hyp *p = g_ptr_array_index(live, c->parent);
        Hyp *h = hyp_child(p, c->id, c->lp);
        if (is_end(c->id)) {
            h->reason = CL_STOP_END_TOKEN;
            g_ptr_array_add(done, h);
            continue;
        }
        g_array_append_val(h->ids, c->id);
        gssize stop = append_and_find_stop(g->model, h->text, c->id, o->stop_strings);
        if (stop >= 0) {
            g_string_truncate(h->text, (gsize)stop);
            h->reason = CL_STOP_STRING;
            g_ptr_array_add(done, h);
        } else if ((int)h->ids->len >= g->max_new) {
            h->reason = g->limit;
            g_ptr_array_add(done, h);
        } else {
            g_ptr_array_add(next, h);
            g_array_append_val(parents, c->parent);
        }
    }
}

/* Caches: a child takes its parent's cache when it is the first to claim it, else a copy (made
 * before any cache moves on); parents without children give theirs to spare. */
static gboolean hand_down_caches(Gen *g, GPtrArray *live, GPtrArray *next, GArray *parents,
                                 GPtrArray *spare, GError **error)
{
    const int V = g->vocab.V;
    gboolean ok = TRUE;
    gboolean *claimed = g_new0(gboolean, live->len);
    for (guint j = 0; j < next->len; j++) {
        int pi = g_array_index(parents, int, j);
        Hyp *p = g_ptr_array_index(live, pi);
        Hyp *h = g_ptr_array_index(next, j);
        if (!claimed[pi]) {
            claimed[pi] = TRUE;
            h->cache = p->cache;
            h->logits = p->logits; /* reused as this child's output buffer */
        }
    }
    for (guint j = 0; ok && j < next->len; j++) {
        Hyp *h = g_ptr_array_index(next, j);
        if (h->cache)
            continue;
        Hyp *p = g_ptr_array_index(live, g_array_index(parents, int, j));
        h->cache = take_cache(g, spare, error);
        if (!h->cache) {
            ok = FALSE;
            break;
        }
        cl_kv_cache_copy_from(h->cache, p->cache);
        h->logits = g_new(float, V);
    }
    for (guint b = 0; b < live->len; b++) {
        Hyp *p = g_ptr_array_index(live, b);
        if (claimed[b]) {
            p->cache = NULL; /* moved to a child */
            p->logits = NULL;
        } else if (p->cache) {
            g_ptr_array_add(spare, p->cache);
            p->cache = NULL;
        }
    }
    g_free(claimed);
    return ok;
}

/* Each live hypothesis' last token through the decoder, into its logits. */
static gboolean advance_live(Gen *g, GPtrArray *live, ClGenerateResult *out, GError **error)
{
    for (guint j = 0; j < live->len; j++) {
        Hyp *h = g_ptr_array_index(live, j);
        if (cancelled(g, error))
            return FALSE;
        gint32 id = g_array_index(h->ids, gint32, h->ids->len - 1);
        if (!cl_decoder_forward(g->be, g->model, h->cache, &id, 1, NULL, h->logits, NULL, NULL,
                                NULL, error))
            return FALSE;
        out->n_steps++;
    }
    return TRUE;
}

/* The best finished hypothesis by length-normalised score (earlier wins ties); when cancelled
 * or failed (!ok), the best of everything so far. NULL when there is none. */
static const Hyp *best_hypothesis(GPtrArray *done, GPtrArray *live, gboolean ok, double lpen)
{
    const Hyp *best = NULL;
    double best_s = -INFINITY;
    for (int pass = 0; pass < 2; pass++) {
        GPtrArray *set = pass == 0 ? done : live;
        if (pass == 1 && ok)
            break;
        for (guint i = 0; i < set->len; i++) {
            const Hyp *h = g_ptr_array_index(set, i);
            double s = hyp_score(h, lpen);
            if (!best || s > best_s) {
                best = h;
                best_s = s;
            }
        }
    }
    return best;
}

static gboolean beam(Gen *g, ClKVCache *cache0, float *logits0, ClGenerateResult *out,
                     GError **error)
{
    const ClGenerateOptions *o = g->opts;
    const int B = o->beam_size;
    const double lpen = o->length_penalty;
    gint64 t0 = g_get_monotonic_time();
    gboolean ok = TRUE;

    GPtrArray *live = g_ptr_array_new_with_free_func((GDestroyNotify)hyp_free);
    GPtrArray *done = g_ptr_array_new_with_free_func((GDestroyNotify)hyp_free);
    GPtrArray *spare = g_ptr_array_new_with_free_func((GDestroyNotify)cl_kv_cache_free);
    Hyp *root = hyp_new();
    root->cache = cache0;
    root->logits = logits0;
    g_ptr_array_add(live, root);

    Cand *cands = g_new(Cand, (gsize)B * B);
    gint32 *top = g_new(gint32, B);

    /* Every finished hypothesis keeps its slot: the live beams shrink to B - finished, and the
     * search ends when none is left. With B = 1 this is exactly greedy decoding. */
    while (live->len > 0) {
        int slots = B - (int)done->len;
        int nc = score_candidates(g, live, slots, cands, top);
        if (nc == 0) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "the decoder produced no usable logits (NaN)");
            ok = FALSE;
            break;
        }
        qsort(cands, (gsize)nc, sizeof(Cand), cand_cmp);

        GPtrArray *next = g_ptr_array_new_with_free_func((GDestroyNotify)hyp_free);
        GArray *parents = g_array_new(FALSE, FALSE, sizeof(int));
        select_children(g, live, cands, nc, slots, done, next, parents);
        ok = hand_down_caches(g, live, next, parents, spare, error);
        g_array_unref(parents);
        g_ptr_array_unref(live);
        live = next;
        if (!ok)
            break;
        ok = advance_live(g, live, out, error);
        if (!ok)
            break;
    }

    const Hyp *best = best_hypothesis(done, live, ok, lpen);
    if (best) {
        result_from_hyp(out, best, lpen);
        if (!ok)
            out->stop_reason = CL_STOP_CANCELLED;
    }
    if (ok)
        replay(g, out);

    g_free(cands);
    g_free(top);
    g_ptr_array_unref(live);
    g_ptr_array_unref(done);
    g_ptr_array_unref(spare);
    out->decode_ms = ms_since(t0);
    return ok;
}

/* ---- entry -------------------------------------------------------------------------------- */

gboolean cl_generate(ClBackend *be, const ClModel *model, const gint32 *prompt, int n_prompt,
                     const float *visual, const ClGenerateOptions *opts, ClGenerateResult *out,
                     GError **error)
{
    g_return_val_if_fail(be != NULL && model != NULL && out != NULL, FALSE);
    g_return_val_if_fail(prompt != NULL || n_prompt == 0, FALSE);
    ClGenerateOptions defaults;
    if (!opts) {
        cl_generate_options_init(&defaults);
        opts = &defaults;
    }
    cl_generate_result_init(out);
    out->n_prompt = n_prompt;

    const ClModelConfig *cfg = &model->config;
    if (n_prompt < 1) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT, "the prompt is empty");
        return FALSE;
    }
    const gboolean streaming = opts->stream_window > 0;
    /* the positions the prompt takes: VIST2 keeps its span as pages' rows and a text tail */
    int positions = n_prompt;
    if (opts->vist && opts->vist_len > 0 && opts->vist_len <= n_prompt) {
        int chunks = 0;
        const int packed = cl_vist_plan(cfg, opts->vist_len, &chunks);
        positions = n_prompt - packed + chunks * cl_config_n_visual(cfg);
    }
    if (!streaming && positions >= cfg->max_len) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "the prompt is %d positions long (image tokens included) but the model's "
                    "context holds %d: nothing can be generated; use fewer or smaller images or "
                    "a shorter prompt",
                    positions, cfg->max_len);
        return FALSE;
    }
    if (opts->beam_size < 1 || opts->beam_size > 64) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "beam size %d is out of range (1 to 64)", opts->beam_size);
        return FALSE;
    }
    if (opts->vist &&
        (opts->beam_size != 1 || streaming || opts->vist_from < 0 || opts->vist_len < 0 ||
         opts->vist_from > n_prompt || opts->vist_len > n_prompt - opts->vist_from)) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "VIST2 compression works with greedy decoding on an ordinary cache, over a "
                    "span inside the prompt");
        return FALSE;
    }
    for (int i = 0; opts->vist && i < opts->vist_len; i++)
        if (prompt[opts->vist_from + i] < 0) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "the text VIST2 compresses holds an image row");
            return FALSE;
        }

    Gen g = { .be = be, .model = model, .opts = opts };
    g.vocab.model = model;
    g.vocab.V = cfg->vocab_size;
    g.vocab.n_tok = MIN(cl_tokenizer_vocab_size(model->tokenizer), cfg->vocab_size);
    for (int d = 0; d < 10; d++)
        g.digit_id[d] = -1;
    for (gint32 id = 0; opts->median_numbers && id < g.vocab.n_tok; id++) {
        gsize len = 0;
        const char *b = cl_tokenizer_token_bytes(model->tokenizer, id, &len);
        if (b && len == 1 && b[0] >= '0' && b[0] <= '9' && g.digit_id[b[0] - '0'] < 0)
            g.digit_id[b[0] - '0'] = id;
    }
    /* the k-th generated token sits at position n_prompt + k - 1 */
    int room = cfg->max_len - positions;
    if (streaming) { /* the ring bounds memory, not the length */
        g.max_new = opts->max_new_tokens > 0 ? opts->max_new_tokens : cfg->max_len;
        g.limit = CL_STOP_MAX_TOKENS;
    } else if (opts->max_new_tokens > 0 && opts->max_new_tokens <= room) {
        g.max_new = opts->max_new_tokens;
        g.limit = CL_STOP_MAX_TOKENS;
    } else {
        g.max_new = room;
        g.limit = CL_STOP_MAX_LEN;
    }
    g.capacity = positions + g.max_new;
    if (opts->vist) /* a chunk's rows run before its text is evicted (mask "paper") */
        g.capacity = MIN(g.capacity + cl_config_n_visual(cfg), CL_CONFIG_MAX_LEN);

    if (g_cancellable_set_error_if_cancelled(opts->cancellable, error)) {
        out->stop_reason = CL_STOP_CANCELLED;
        return FALSE;
    }
    ClKVCache *cache = new_cache(&g);
    if (cache && opts->sparse_block > 0 && !streaming)
        cl_kv_cache_set_sparse_prefill(cache, opts->sparse_block, opts->sparse_topk);
    float *logits = g_try_new(float, g.vocab.V);
    if (!cache || !logits) {
        if (cache)
            cl_kv_cache_free(cache);
        g_free(logits);
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "not enough memory for a KV cache of %d positions", g.capacity);
        return FALSE;
    }
    gint64 t0 = g_get_monotonic_time();
    gboolean ok;
    if (opts->vist) {
        /* before the span, the span as VIST2 keeps it, after it (the visual rows go on) */
        const int a = opts->vist_from, b = a + opts->vist_len;
        int rows_before = 0;
        for (int i = 0; i < a; i++)
            rows_before += prompt[i] == CL_DECODER_VISUAL;
        ok = (a == 0 || cl_decoder_forward(be, model, cache, prompt, a, visual, logits, NULL, NULL,
                                           NULL, error)) &&
             cl_vist_prefill(opts->vist, cache, prompt + a, b - a, logits, NULL, error) &&
             (b == n_prompt ||
              cl_decoder_forward(be, model, cache, prompt + b, n_prompt - b,
                                 visual ? visual + (size_t)rows_before * cfg->dec_dim : NULL,
                                 logits, NULL, NULL, NULL, error));
    } else {
        ok = cl_decoder_forward(be, model, cache, prompt, n_prompt, visual, logits, NULL, NULL,
                                NULL, error);
    }
    if (!ok) {
        cl_kv_cache_free(cache);
        g_free(logits);
        return FALSE;
    }
    out->prefill_ms = ms_since(t0);

    if (opts->beam_size == 1) {
        if (opts->vist)
            g.vist_raw = g_array_new(FALSE, FALSE, sizeof(gint32));
        ok = greedy(&g, cache, logits, out, error);
        if (g.vist_raw)
            g_array_unref(g.vist_raw);
        cl_kv_cache_free(cache);
        g_free(logits);
        return ok;
    }
    return beam(&g, cache, logits, out, error); /* takes cache and logits */
}
