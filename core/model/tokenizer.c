/* tokenizer.c - byte-level BPE (docs/MODEL.md §5): pre-tokenisation, rank-ordered merges with a
 * piece cache, training by incremental pair counts, JSON load/save. */
#include "model/tokenizer.h"
#include "model/tokenizer-private.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "jsondepth.h"
#include "model/config.h" /* CL_MODEL_ERROR */

#define special_texts cl_tokenizer_special_texts

#define MAX_MERGES (CL_TOKENIZER_MAX_VOCAB - CL_TOKEN_FIRST_MERGE)
#define CACHE_MAX_PIECE 64          /* longer pieces are rare: not cached */
#define CACHE_MAX_ENTRIES (1 << 16) /* the cache is emptied when it reaches this */

static void set_error(GError **error, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void set_error(GError **error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_TOKENIZER, "tokenizer: %s", msg);
}

/* ---- (a, b) -> int32 map: open addressing, keys a<<32|b ------------------------------------- */

#define PAIR_EMPTY G_MAXUINT64

typedef struct {
    guint64 *keys;
    gint32 *vals;
    gsize cap; /* power of two */
    gsize n;
} PairMap;

static inline guint64 pair_key(gint32 a, gint32 b)
{
    return ((guint64)(guint32)a << 32) | (guint32)b;
}

static inline gsize pair_hash(guint64 k)
{
    k ^= k >> 31;
    k *= 0x9e3779b97f4a7c15ULL;
    k ^= k >> 29;
    return (gsize)k;
}

static void pairmap_init(PairMap *m, gsize expected)
{
    gsize cap = 16;
    while (cap < 2 * expected)
        cap *= 2;
    m->cap = cap;
    m->n = 0;
    m->keys = g_new(guint64, cap);
    memset(m->keys, 0xff, cap * sizeof(guint64));
    m->vals = g_new(gint32, cap);
}

static void pairmap_clear(PairMap *m)
{
    g_clear_pointer(&m->keys, g_free);
    g_clear_pointer(&m->vals, g_free);
    m->cap = m->n = 0;
}

static inline gint32 pairmap_get(const PairMap *m, guint64 k)
{
    gsize mask = m->cap - 1;
    for (gsize i = pair_hash(k) & mask;; i = (i + 1) & mask) {
        if (m->keys[i] == k)
            return m->vals[i];
        if (m->keys[i] == PAIR_EMPTY)
            return -1;
    }
}

static void pairmap_grow(PairMap *m)
{
    PairMap old = *m;
    pairmap_init(m, old.cap); /* doubles */
    for (gsize i = 0; i < old.cap; i++) {
        if (old.keys[i] == PAIR_EMPTY)
            continue;
        gsize mask = m->cap - 1, j = pair_hash(old.keys[i]) & mask;
        while (m->keys[j] != PAIR_EMPTY)
            j = (j + 1) & mask;
        m->keys[j] = old.keys[i];
        m->vals[j] = old.vals[i];
    }
    m->n = old.n;
    pairmap_clear(&old);
}

/* The value slot of `k`, inserted (value -1) when absent. */
static gint32 *pairmap_slot(PairMap *m, guint64 k)
{
    if (2 * (m->n + 1) > m->cap)
        pairmap_grow(m);
    gsize mask = m->cap - 1;
    for (gsize i = pair_hash(k) & mask;; i = (i + 1) & mask) {
        if (m->keys[i] == k)
            return &m->vals[i];
        if (m->keys[i] == PAIR_EMPTY) {
            m->keys[i] = k;
            m->vals[i] = -1;
            m->n++;
            return &m->vals[i];
        }
    }
}

/* ---- pieces: byte strings as hash keys ------------------------------------------------------ */

typedef struct {
    const char *p;
    gsize len;
} PieceKey;

static guint piece_hash(gconstpointer v)
{
    const PieceKey *k = v;
    guint32 h = 2166136261u; /* FNV-1a */
    for (gsize i = 0; i < k->len; i++)
        h = (h ^ (guchar)k->p[i]) * 16777619u;
    return h;
}

static gboolean piece_equal(gconstpointer a, gconstpointer b)
{
    const PieceKey *x = a, *y = b;
    return x->len == y->len && memcmp(x->p, y->p, x->len) == 0;
}

/* A cached encoding: one allocation holding the key, the ids and the piece's bytes. */
typedef struct {
    PieceKey key;
    guint n_ids;
    gint32 *ids;
} CacheEntry;

/* ---- the tokenizer -------------------------------------------------------------------------- */

struct _ClTokenizer {
    int n_vocab;     /* CL_TOKEN_FIRST_MERGE + n_merges */
    gint32 *merges;  /* (n_merges, 2): merge i makes id CL_TOKEN_FIRST_MERGE + i */
    guint32 *offset; /* (n_vocab + 1): token id's bytes are bytes[offset[id] .. offset[id+1]) */
    char *bytes;
    PairMap ids; /* (a, b) -> merged id; the id is the rank */
    ClPretokenizer pretok;
    GMutex cache_lock;
    GHashTable *cache; /* PieceKey* -> CacheEntry* (same pointer), pieces of 2..64 bytes */
};

static inline int n_merges(const ClTokenizer *tok)
{
    return tok->n_vocab - CL_TOKEN_FIRST_MERGE;
}

const char *cl_tokenizer_special_text(gint32 id)
{
    if (id < CL_TOKEN_ENDOFTEXT || id >= CL_TOKEN_FIRST_MERGE)
        return NULL;
    return special_texts[id - CL_TOKEN_ENDOFTEXT];
}

/* Builds a tokenizer from merges, validating them (ids below their own id, no special ids, no
 * duplicate, size limits). Takes ownership of `merges` (g_malloc'd, may be NULL when n = 0). */
static ClTokenizer *tokenizer_build(gint32 *merges, gsize n, GError **error)
{
    if (n > MAX_MERGES) {
        set_error(error, "%zu merges, more than the limit of %d", n, MAX_MERGES);
        g_free(merges);
        return NULL;
    }
    ClTokenizer *tok = g_new0(ClTokenizer, 1);
    tok->n_vocab = CL_TOKEN_FIRST_MERGE + (int)n;
    tok->merges = merges;
    tok->offset = g_new(guint32, tok->n_vocab + 1);
    pairmap_init(&tok->ids, n);
    g_mutex_init(&tok->cache_lock);
    tok->cache = g_hash_table_new_full(piece_hash, piece_equal, NULL, g_free);

    /* token lengths first, so the byte buffer is allocated once */
    gsize total = 256;
    for (int i = 0; i < CL_TOKENIZER_N_SPECIAL; i++)
        total += strlen(special_texts[i]);
    guint32 *len = g_new(guint32, tok->n_vocab);
    for (int i = 0; i < 256; i++)
        len[i] = 1;
    for (int i = 0; i < CL_TOKENIZER_N_SPECIAL; i++)
        len[CL_TOKEN_ENDOFTEXT + i] = (guint32)strlen(special_texts[i]);
    for (gsize m = 0; m < n; m++) {
        gint32 id = CL_TOKEN_FIRST_MERGE + (gint32)m, a = merges[2 * m], b = merges[2 * m + 1];
        for (int k = 0; k < 2; k++) {
            gint32 x = k ? b : a;
            if (x < 0 || x >= id) {
                set_error(error, "merge %zu ([%d, %d]): id %d is not below the merge's own id %d",
                          m, a, b, x, id);
                goto fail;
            }
            if (x >= CL_TOKEN_ENDOFTEXT && x < CL_TOKEN_FIRST_MERGE) {
                set_error(error, "merge %zu ([%d, %d]) uses the special token %d (%s)", m, a, b, x,
                          special_texts[x - CL_TOKEN_ENDOFTEXT]);
                goto fail;
            }
        }
        gint32 *slot = pairmap_slot(&tok->ids, pair_key(a, b));
        if (*slot >= 0) {
            set_error(error, "merge %zu ([%d, %d]) repeats merge %d", m, a, b,
                      *slot - CL_TOKEN_FIRST_MERGE);
            goto fail;
        }
        *slot = id;
        len[id] = len[a] + len[b];
        if (len[id] > CL_TOKENIZER_MAX_TOKEN_LEN) {
            set_error(error, "merge %zu ([%d, %d]) makes a token of %u bytes (limit %d)", m, a, b,
                      len[id], CL_TOKENIZER_MAX_TOKEN_LEN);
            goto fail;
        }
        total += len[id];
        if (total > CL_TOKENIZER_MAX_TOTAL_BYTES) {
            set_error(error, "the tokens take more than %u bytes together",
                      CL_TOKENIZER_MAX_TOTAL_BYTES);
            goto fail;
        }
    }

    tok->bytes = g_malloc(total);
    guint32 off = 0;
    for (int id = 0; id < tok->n_vocab; id++) {
        tok->offset[id] = off;
        char *dst = tok->bytes + off;
        if (id < 256) {
            dst[0] = (char)id;
        } else if (id < CL_TOKEN_FIRST_MERGE) {
            memcpy(dst, special_texts[id - CL_TOKEN_ENDOFTEXT], len[id]);
        } else {
            gint32 a = merges[2 * (id - CL_TOKEN_FIRST_MERGE)];
            gint32 b = merges[2 * (id - CL_TOKEN_FIRST_MERGE) + 1];
            memcpy(dst, tok->bytes + tok->offset[a], len[a]);
            memcpy(dst + len[a], tok->bytes + tok->offset[b], len[b]);
        }
        off += len[id];
    }
    tok->offset[tok->n_vocab] = off;
    g_assert(off == total);
    g_free(len);
    return tok;

fail:
    g_free(len);
    cl_tokenizer_free(tok);
    return NULL;
}

ClTokenizer *cl_tokenizer_new_bytes(void)
{
    return tokenizer_build(NULL, 0, NULL);
}

ClTokenizer *cl_tokenizer_new_from_merges(const gint32 *merges, gsize n, ClPretokenizer pre,
                                          GError **error)
{
    g_return_val_if_fail(merges || n == 0, NULL);
    g_return_val_if_fail(pre == CL_PRETOK_CHANGELENS || pre == CL_PRETOK_GPT2_DIGITS, NULL);
    if (n > MAX_MERGES) {
        set_error(error, "%zu merges, more than the limit of %d", n, MAX_MERGES);
        return NULL;
    }
    ClTokenizer *tok =
        tokenizer_build(n ? g_memdup2(merges, 2 * n * sizeof(gint32)) : NULL, n, error);
    if (tok)
        tok->pretok = pre;
    return tok;
}

ClPretokenizer cl_tokenizer_pretokenizer(const ClTokenizer *tok)
{
    g_return_val_if_fail(tok, CL_PRETOK_CHANGELENS);
    return tok->pretok;
}

void cl_tokenizer_free(ClTokenizer *tok)
{
    if (!tok)
        return;
    g_free(tok->merges);
    g_free(tok->offset);
    g_free(tok->bytes);
    pairmap_clear(&tok->ids);
    g_hash_table_unref(tok->cache);
    g_mutex_clear(&tok->cache_lock);
    g_free(tok);
}

int cl_tokenizer_vocab_size(const ClTokenizer *tok)
{
    g_return_val_if_fail(tok, 0);
    return tok->n_vocab;
}

const char *cl_tokenizer_token_bytes(const ClTokenizer *tok, gint32 id, gsize *len)
{
    g_return_val_if_fail(tok, NULL);
    if (id < 0 || id >= tok->n_vocab) {
        if (len)
            *len = 0;
        return NULL;
    }
    if (len)
        *len = tok->offset[id + 1] - tok->offset[id];
    return tok->bytes + tok->offset[id];
}

void cl_tokenizer_decode(const ClTokenizer *tok, const gint32 *ids, gsize n, GString *out)
{
    g_return_if_fail(tok && out && (ids || n == 0));
    for (gsize i = 0; i < n; i++) {
        gint32 id = ids[i];
        if (id < 0 || id >= tok->n_vocab)
            continue;
        g_string_append_len(out, tok->bytes + tok->offset[id],
                            tok->offset[id + 1] - tok->offset[id]);
    }
}

/* ---- encoding ------------------------------------------------------------------------------- */

typedef struct {
    gint32 rank; /* the merged id: lower = earlier merge */
    gint32 pos;  /* left symbol's index in the piece: ties go leftmost */
} HeapItem;

static inline gboolean heap_less(HeapItem x, HeapItem y)
{
    return x.rank < y.rank || (x.rank == y.rank && x.pos < y.pos);
}

static void heap_push(HeapItem *h, gsize *n, HeapItem it)
{
    gsize i = (*n)++;
    while (i > 0) {
        gsize p = (i - 1) / 2;
        if (!heap_less(it, h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = it;
}

static HeapItem heap_pop(HeapItem *h, gsize *n)
{
    HeapItem top = h[0], last = h[--(*n)];
    gsize i = 0;
    for (;;) {
        gsize c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && heap_less(h[c + 1], h[c]))
            c++;
        if (!heap_less(h[c], last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = last;
    return top;
}

/* Merges by rank within one piece of n >= 2 bytes: the lowest-ranked adjacent pair first (the
 * leftmost among equals), as training applied them. A linked list over the piece and a heap of
 * candidate pairs with lazy invalidation: O(n log n). */
static void bpe_merge(const ClTokenizer *tok, const guchar *s, gsize n, GArray *out)
{
    gint32 id_buf[CACHE_MAX_PIECE], next_buf[CACHE_MAX_PIECE], prev_buf[CACHE_MAX_PIECE];
    HeapItem heap_buf[3 * CACHE_MAX_PIECE];
    gint32 *id = id_buf, *next = next_buf, *prev = prev_buf;
    HeapItem *heap = heap_buf;
    if (n > CACHE_MAX_PIECE) {
        id = g_new(gint32, 3 * n);
        next = id + n;
        prev = next + n;
        heap = g_new(HeapItem, 3 * n); /* n - 1 pairs, then at most 2 per merge */
    }
    gsize nh = 0;
    for (gsize i = 0; i < n; i++) {
        id[i] = s[i];
        next[i] = i + 1 < n ? (gint32)(i + 1) : -1;
        prev[i] = (gint32)i - 1;
    }
    for (gsize i = 0; i + 1 < n; i++) {
        gint32 r = pairmap_get(&tok->ids, pair_key(id[i], id[i + 1]));
        if (r >= 0)
            heap_push(heap, &nh, (HeapItem){ r, (gint32)i });
    }
    while (nh > 0) {
        HeapItem it = heap_pop(heap, &nh);
        gint32 i = it.pos, j;
        if (id[i] < 0 || (j = next[i]) < 0)
            continue;
        const gint32 *m = tok->merges + 2 * (it.rank - CL_TOKEN_FIRST_MERGE);
        if (id[i] != m[0] || id[j] != m[1])
            continue; /* stale: a neighbour merged first */
        id[i] = it.rank;
        id[j] = -1;
        next[i] = next[j];
        if (next[j] >= 0)
            prev[next[j]] = i;
        if (prev[i] >= 0) {
            gint32 r = pairmap_get(&tok->ids, pair_key(id[prev[i]], id[i]));
            if (r >= 0)
                heap_push(heap, &nh, (HeapItem){ r, prev[i] });
        }
        if (next[i] >= 0) {
            gint32 r = pairmap_get(&tok->ids, pair_key(id[i], id[next[i]]));
            if (r >= 0)
                heap_push(heap, &nh, (HeapItem){ r, i });
        }
    }
    for (gint32 i = 0; i >= 0; i = next[i])
        g_array_append_val(out, id[i]);
    if (id != id_buf) {
        g_free(id);
        g_free(heap);
    }
}

typedef struct {
    ClTokenizer *tok; /* the cache is mutable state behind the const API */
    GArray *out;
} EncodeCtx;

static void encode_piece(const guchar *p, gsize n, gpointer data)
{
    EncodeCtx *ctx = data;
    ClTokenizer *tok = ctx->tok;
    if (n == 1 || n_merges(tok) == 0) {
        for (gsize i = 0; i < n; i++) {
            gint32 b = p[i];
            g_array_append_val(ctx->out, b);
        }
        return;
    }
    if (n > CACHE_MAX_PIECE) {
        bpe_merge(tok, p, n, ctx->out);
        return;
    }
    PieceKey key = { (const char *)p, n };
    g_mutex_lock(&tok->cache_lock);
    const CacheEntry *e = g_hash_table_lookup(tok->cache, &key);
    if (e)
        g_array_append_vals(ctx->out, e->ids, e->n_ids);
    g_mutex_unlock(&tok->cache_lock);
    if (e)
        return;

    guint start = ctx->out->len;
    bpe_merge(tok, p, n, ctx->out);
    guint n_ids = ctx->out->len - start;
    CacheEntry *ne = g_malloc(sizeof(CacheEntry) + n_ids * sizeof(gint32) + n);
    ne->n_ids = n_ids;
    ne->ids = (gint32 *)(ne + 1);
    memcpy(ne->ids, &g_array_index(ctx->out, gint32, start), n_ids * sizeof(gint32));
    char *kb = (char *)(ne->ids + n_ids);
    memcpy(kb, p, n);
    ne->key = (PieceKey){ kb, n };
    g_mutex_lock(&tok->cache_lock);
    if (g_hash_table_size(tok->cache) >= CACHE_MAX_ENTRIES)
        g_hash_table_remove_all(tok->cache);
    g_hash_table_replace(tok->cache, &ne->key, ne); /* another thread may have added it too */
    g_mutex_unlock(&tok->cache_lock);
}

static void encode_special(gint32 id, gpointer data)
{
    EncodeCtx *ctx = data;
    g_array_append_val(ctx->out, id);
}

void cl_tokenizer_encode_append(const ClTokenizer *tok, const char *text, gssize len,
                                guint specials, GArray *out)
{
    g_return_if_fail(tok && out && (text || len == 0));
    g_return_if_fail(g_array_get_element_size(out) == sizeof(gint32));
    gsize n = len < 0 ? strlen(text) : (gsize)len;
    EncodeCtx ctx = { (ClTokenizer *)tok, out };
    cl_tokenizer_pieces((const guchar *)text, n, tok->pretok, specials, encode_piece,
                        encode_special, &ctx);
}

GArray *cl_tokenizer_encode(const ClTokenizer *tok, const char *text, gssize len, gboolean specials)
{
    g_return_val_if_fail(tok && (text || len == 0), NULL);
    gsize n = len < 0 ? strlen(text) : (gsize)len;
    GArray *out = g_array_sized_new(FALSE, FALSE, sizeof(gint32), (guint)MIN(n / 3 + 8, 1u << 20));
    cl_tokenizer_encode_append(tok, text, (gssize)n, specials ? CL_TOKENIZER_ALL_SPECIALS : 0, out);
    return out;
}

/* ---- training ------------------------------------------------------------------------------- */

/* A unique piece of the corpus, its frequency and its current symbols. */
typedef struct {
    PieceKey key;
    gint64 freq;
    gint32 *sym;
    gint32 n;
} Word;

/* An adjacent pair's count over all words, and the words it (may) occur in: entries go stale
 * when merges remove the pair from a word; they are checked when used. */
typedef struct {
    gint64 count;
    gint32 a, b;
    guint32 *words;
    guint32 n_words, cap_words;
    guint32 stamp; /* merge number that last touched it (dedups the push list) */
} PairStat;

typedef struct {
    gint64 count;
    gint32 a, b;
    guint32 stat;
} BestItem;

/* Max-heap order: higher count, then lower a, then lower b. */
static inline gboolean best_before(const BestItem *x, const BestItem *y)
{
    if (x->count != y->count)
        return x->count > y->count;
    if (x->a != y->a)
        return x->a < y->a;
    return x->b < y->b;
}

static void best_push(GArray *h, BestItem it)
{
    g_array_set_size(h, h->len + 1);
    BestItem *v = (BestItem *)h->data;
    gsize i = h->len - 1;
    while (i > 0) {
        gsize p = (i - 1) / 2;
        if (!best_before(&it, &v[p]))
            break;
        v[i] = v[p];
        i = p;
    }
    v[i] = it;
}

static void best_pop(GArray *h)
{
    BestItem *v = (BestItem *)h->data;
    BestItem last = v[h->len - 1];
    gsize n = h->len - 1, i = 0;
    for (;;) {
        gsize c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && best_before(&v[c + 1], &v[c]))
            c++;
        if (!best_before(&v[c], &last))
            break;
        v[i] = v[c];
        i = c;
    }
    if (n > 0)
        v[i] = last;
    g_array_set_size(h, n);
}

typedef struct {
    GHashTable *index; /* PieceKey* -> Word* */
    GPtrArray *words;  /* Word*, in order of first occurrence (determinism) */
    GStringChunk *bytes;
} Corpus;

static void corpus_piece(const guchar *p, gsize n, gpointer data)
{
    Corpus *c = data;
    if (n < 2)
        return; /* no pair inside */
    PieceKey key = { (const char *)p, n };
    Word *w = g_hash_table_lookup(c->index, &key);
    if (!w) {
        w = g_new0(Word, 1);
        w->key.p = g_string_chunk_insert_len(c->bytes, (const char *)p, (gssize)n);
        w->key.len = n;
        g_ptr_array_add(c->words, w);
        g_hash_table_insert(c->index, &w->key, w);
    }
    w->freq++;
}

static void corpus_special(gint32 id, gpointer data) {}

typedef struct {
    PairMap map;     /* (a, b) -> index in stats */
    GArray *stats;   /* PairStat */
    GArray *len;     /* guint32 per id: token length in bytes */
    GArray *touched; /* guint32 stat indices whose count grew during this merge */
    guint32 stamp;
} Pairs;

static inline gboolean pair_allowed(const Pairs *ps, gint32 a, gint32 b)
{
    const guint32 *len = (const guint32 *)ps->len->data;
    return len[a] + len[b] <= CL_TOKENIZER_MAX_TOKEN_LEN;
}

static void pair_add(Pairs *ps, gint32 a, gint32 b, guint32 w, gint64 f)
{
    if (!pair_allowed(ps, a, b))
        return;
    gint32 *slot = pairmap_slot(&ps->map, pair_key(a, b));
    if (*slot < 0) {
        *slot = (gint32)ps->stats->len;
        PairStat st = { 0, a, b, NULL, 0, 0, 0 };
        g_array_append_val(ps->stats, st);
    }
    PairStat *st = &g_array_index(ps->stats, PairStat, *slot);
    st->count += f;
    if (st->n_words == 0 || st->words[st->n_words - 1] != w) {
        if (st->n_words == st->cap_words) {
            st->cap_words = st->cap_words ? 2 * st->cap_words : 4;
            st->words = g_renew(guint32, st->words, st->cap_words);
        }
        st->words[st->n_words++] = w;
    }
    if (st->stamp != ps->stamp) {
        st->stamp = ps->stamp;
        guint32 idx = (guint32)*slot;
        g_array_append_val(ps->touched, idx);
    }
}

static void pair_sub(Pairs *ps, gint32 a, gint32 b, gint64 f)
{
    if (!pair_allowed(ps, a, b))
        return;
    gint32 idx = pairmap_get(&ps->map, pair_key(a, b));
    g_assert(idx >= 0);
    g_array_index(ps->stats, PairStat, idx).count -= f;
}

/* Replaces every (a, b) in the word by c, left to right, updating the pair counts around each
 * replacement (the left neighbour may already be a c from this pass). */
static void word_merge(Pairs *ps, Word *w, guint32 wi, gint32 a, gint32 b, gint32 c)
{
    gint32 *s = w->sym;
    gint32 n = w->n, o = 0;
    for (gint32 r = 0; r < n;) {
        if (r + 1 < n && s[r] == a && s[r + 1] == b) {
            if (o > 0) {
                pair_sub(ps, s[o - 1], a, w->freq);
                pair_add(ps, s[o - 1], c, wi, w->freq);
            }
            pair_sub(ps, a, b, w->freq);
            if (r + 2 < n) {
                pair_sub(ps, b, s[r + 2], w->freq);
                pair_add(ps, c, s[r + 2], wi, w->freq);
            }
            s[o++] = c;
            r += 2;
        } else {
            s[o++] = s[r++];
        }
    }
    w->n = o;
}

ClTokenizer *cl_tokenizer_train(const char *const *texts, gsize n_texts, int vocab_size,
                                GError **error)
{
    g_return_val_if_fail(texts || n_texts == 0, NULL);
    if (vocab_size < CL_TOKEN_FIRST_MERGE || vocab_size > CL_TOKENIZER_MAX_VOCAB) {
        set_error(error, "vocabulary size %d is outside [%d, %d]", vocab_size, CL_TOKEN_FIRST_MERGE,
                  CL_TOKENIZER_MAX_VOCAB);
        return NULL;
    }

    /* 1. unique pieces and their frequencies */
    Corpus corpus = {
        g_hash_table_new(piece_hash, piece_equal),
        g_ptr_array_new_with_free_func(g_free),
        g_string_chunk_new(1 << 16),
    };
    for (gsize t = 0; t < n_texts; t++)
        if (texts[t])
            cl_tokenizer_pieces((const guchar *)texts[t], strlen(texts[t]), CL_PRETOK_CHANGELENS,
                                CL_TOKENIZER_ALL_SPECIALS, corpus_piece, corpus_special, &corpus);
    g_hash_table_unref(corpus.index);
    guint n_words = corpus.words->len;
    Word **words = (Word **)corpus.words->pdata;

    /* 2. initial pair counts */
    Pairs ps = {
        .stats = g_array_new(FALSE, FALSE, sizeof(PairStat)),
        .len = g_array_new(FALSE, FALSE, sizeof(guint32)),
        .touched = g_array_new(FALSE, FALSE, sizeof(guint32)),
        .stamp = 1,
    };
    pairmap_init(&ps.map, 1024);
    g_array_set_size(ps.len, CL_TOKEN_FIRST_MERGE);
    for (int i = 0; i < CL_TOKEN_FIRST_MERGE; i++)
        g_array_index(ps.len, guint32, i) = i < 256 ? 1 : 1000000; /* specials never pair */
    gsize total_sym = 0;
    for (guint wi = 0; wi < n_words; wi++)
        total_sym += words[wi]->key.len;
    gint32 *sym_store = g_new(gint32, total_sym);
    total_sym = 0;
    for (guint wi = 0; wi < n_words; wi++) {
        Word *w = words[wi];
        w->sym = sym_store + total_sym;
        w->n = (gint32)w->key.len;
        total_sym += w->key.len;
        for (gint32 i = 0; i < w->n; i++)
            w->sym[i] = (guchar)w->key.p[i];
        for (gint32 i = 0; i + 1 < w->n; i++)
            pair_add(&ps, w->sym[i], w->sym[i + 1], wi, w->freq);
    }
    GArray *heap = g_array_new(FALSE, FALSE, sizeof(BestItem));
    for (guint i = 0; i < ps.stats->len; i++) {
        const PairStat *st = &g_array_index(ps.stats, PairStat, i);
        if (st->count >= 2)
            best_push(heap, (BestItem){ st->count, st->a, st->b, i });
    }

    /* 3. merge the most frequent pair until the vocabulary is full */
    GArray *merges = g_array_new(FALSE, FALSE, sizeof(gint32));
    guint32 *word_stamp = g_new0(guint32, MAX(n_words, 1));
    int n_vocab = CL_TOKEN_FIRST_MERGE;
    while (n_vocab < vocab_size && heap->len > 0) {
        BestItem top = g_array_index(heap, BestItem, 0);
        PairStat *st = &g_array_index(ps.stats, PairStat, top.stat);
        if (st->count != top.count) { /* stale: counts of existing pairs only fall */
            best_pop(heap);
            if (st->count >= 2)
                best_push(heap, (BestItem){ st->count, st->a, st->b, top.stat });
            continue;
        }
        best_pop(heap);
        if (top.count < 2)
            break;
        gint32 a = top.a, b = top.b, c = n_vocab++;
        g_array_append_val(merges, a);
        g_array_append_val(merges, b);
        guint32 lc = g_array_index(ps.len, guint32, a) + g_array_index(ps.len, guint32, b);
        g_array_append_val(ps.len, lc);

        ps.stamp++;
        g_array_set_size(ps.touched, 0);
        /* the pair's own word list is not appended to while it is walked (new pairs hold c) */
        guint32 *wl = st->words, nwl = st->n_words;
        st->words = NULL;
        st->n_words = st->cap_words = 0;
        for (guint32 k = 0; k < nwl; k++) {
            guint32 wi = wl[k];
            if (word_stamp[wi] == ps.stamp)
                continue;
            word_stamp[wi] = ps.stamp;
            word_merge(&ps, words[wi], wi, a, b, c);
        }
        g_free(wl);
        for (guint k = 0; k < ps.touched->len; k++) {
            guint32 idx = g_array_index(ps.touched, guint32, k);
            const PairStat *t = &g_array_index(ps.stats, PairStat, idx);
            if (t->count >= 2)
                best_push(heap, (BestItem){ t->count, t->a, t->b, idx });
        }
    }

    for (guint i = 0; i < ps.stats->len; i++)
        g_free(g_array_index(ps.stats, PairStat, i).words);
    g_array_unref(ps.stats);
    g_array_unref(ps.len);
    g_array_unref(ps.touched);
    pairmap_clear(&ps.map);
    g_array_unref(heap);
    g_free(word_stamp);
    g_free(sym_store);
    g_ptr_array_unref(corpus.words);
    g_string_chunk_free(corpus.bytes);

    gsize nm = merges->len / 2;
    gint32 *m = (gint32 *)g_array_free(merges, FALSE);
    return tokenizer_build(m, nm, error);
}

/* ---- JSON ----------------------------------------------------------------------------------- */

char *cl_tokenizer_to_json(const ClTokenizer *tok)
{
    g_return_val_if_fail(tok, NULL);
    GString *s = g_string_sized_new(64 + 16 * (gsize)n_merges(tok));
    g_string_append(s, "{\"version\": 1, \"special\": [");
    for (int i = 0; i < CL_TOKENIZER_N_SPECIAL; i++)
        g_string_append_printf(s, "%s\"%s\"", i ? ", " : "", special_texts[i]);
    g_string_append(s, "], ");
    if (tok->pretok == CL_PRETOK_GPT2_DIGITS) /* absent: ours (files before it stay the same) */
        g_string_append(s, "\"pretokenizer\": \"gpt2-digits\", ");
    g_string_append(s, "\"merges\": [");
    for (int m = 0; m < n_merges(tok); m++)
        g_string_append_printf(s, "%s[%d, %d]", m ? ", " : "", tok->merges[2 * m],
                               tok->merges[2 * m + 1]);
    g_string_append(s, "]}");
    return g_string_free(s, FALSE);
}

static gboolean node_int(JsonNode *node, gint64 *v)
{
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_INT64)
        return FALSE;
    *v = json_node_get_int(node);
    return TRUE;
}

ClTokenizer *cl_tokenizer_from_json(const char *json, GError **error)
{
    g_return_val_if_fail(json, NULL);
    if (!cl_json_depth_ok(json, -1, CL_JSON_MAX_DEPTH)) {
        set_error(error, "invalid JSON: arrays and objects nested deeper than %d levels",
                  CL_JSON_MAX_DEPTH);
        return NULL;
    }
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_autoptr(GError) perr = NULL;
    if (!json_parser_load_from_data(parser, json, -1, &perr)) {
        /* json-glib quotes the input near the error and may cut a UTF-8 sequence in half */
        g_autofree char *msg = g_utf8_make_valid(perr->message, -1);
        set_error(error, "invalid JSON: %s", msg);
        return NULL;
    }
    JsonNode *root = json_parser_get_root(parser);
    if (!root) {
        set_error(error, "invalid JSON: empty document");
        return NULL;
    }
    if (!JSON_NODE_HOLDS_OBJECT(root)) {
        set_error(error, "the JSON is not an object");
        return NULL;
    }
    JsonObject *obj = json_node_get_object(root);

    g_autoptr(GList) members = json_object_get_members(obj);
    for (GList *l = members; l; l = l->next) {
        const char *k = l->data;
        if (strcmp(k, "version") != 0 && strcmp(k, "special") != 0 && strcmp(k, "merges") != 0 &&
            strcmp(k, "pretokenizer") != 0) {
            set_error(error, "unknown member \"%s\"", k);
            return NULL;
        }
    }

    JsonNode *vn = json_object_get_member(obj, "version");
    gint64 version;
    if (!vn || !node_int(vn, &version)) {
        set_error(error, "\"version\" is missing or not an integer");
        return NULL;
    }
    if (version != 1) {
        set_error(error, "version %" G_GINT64_FORMAT " is not supported (this build reads 1)",
                  version);
        return NULL;
    }

    JsonNode *sn = json_object_get_member(obj, "special");
    if (!sn || !JSON_NODE_HOLDS_ARRAY(sn)) {
        set_error(error, "\"special\" is missing or not an array");
        return NULL;
    }
    JsonArray *sa = json_node_get_array(sn);
    if (json_array_get_length(sa) != CL_TOKENIZER_N_SPECIAL) {
        set_error(error, "\"special\" has %u entries, expected %d", json_array_get_length(sa),
                  CL_TOKENIZER_N_SPECIAL);
        return NULL;
    }
    for (guint i = 0; i < CL_TOKENIZER_N_SPECIAL; i++) {
        JsonNode *e = json_array_get_element(sa, i);
        if (!JSON_NODE_HOLDS_VALUE(e) || json_node_get_value_type(e) != G_TYPE_STRING ||
            strcmp(json_node_get_string(e), special_texts[i]) != 0) {
            set_error(error, "special token %u must be \"%s\"", i, special_texts[i]);
            return NULL;
        }
    }

    ClPretokenizer pre = CL_PRETOK_CHANGELENS;
    JsonNode *pn = json_object_get_member(obj, "pretokenizer");
    if (pn) {
        const char *name =
            JSON_NODE_HOLDS_VALUE(pn) && json_node_get_value_type(pn) == G_TYPE_STRING
                ? json_node_get_string(pn)
                : "";
        if (strcmp(name, "gpt2-digits") == 0)
            pre = CL_PRETOK_GPT2_DIGITS;
        else if (strcmp(name, "changelens") != 0) {
            set_error(error, "\"pretokenizer\" must be \"changelens\" or \"gpt2-digits\"");
            return NULL;
        }
    }

    JsonNode *mn = json_object_get_member(obj, "merges");
    if (!mn || !JSON_NODE_HOLDS_ARRAY(mn)) {
        set_error(error, "\"merges\" is missing or not an array");
        return NULL;
    }
    JsonArray *ma = json_node_get_array(mn);
    guint n = json_array_get_length(ma);
    if (n > MAX_MERGES) {
        set_error(error, "%u merges, more than the limit of %d", n, MAX_MERGES);
        return NULL;
    }
    gint32 *merges = g_new(gint32, 2 * (gsize)MAX(n, 1));
    for (guint m = 0; m < n; m++) {
        JsonNode *e = json_array_get_element(ma, m);
        JsonArray *pair = JSON_NODE_HOLDS_ARRAY(e) ? json_node_get_array(e) : NULL;
        gint64 a, b;
        if (!pair || json_array_get_length(pair) != 2 ||
            !node_int(json_array_get_element(pair, 0), &a) ||
            !node_int(json_array_get_element(pair, 1), &b)) {
            set_error(error, "merge %u is not an array of two integer ids", m);
            g_free(merges);
            return NULL;
        }
        gint64 own = CL_TOKEN_FIRST_MERGE + (gint64)m;
        if (a < 0 || a >= own || b < 0 || b >= own) {
            set_error(error,
                      "merge %u ([%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                      "]): ids must be in [0, %" G_GINT64_FORMAT ")",
                      m, a, b, own);
            g_free(merges);
            return NULL;
        }
        merges[2 * m] = (gint32)a;
        merges[2 * m + 1] = (gint32)b;
    }
    ClTokenizer *tok = tokenizer_build(merges, n, error);
    if (tok)
        tok->pretok = pre;
    return tok;
}
