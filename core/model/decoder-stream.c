/* decoder-stream.c - the decoder's streaming window (docs/MODEL.md §4.4): the first `sink`
 * positions and the last `window` ones in a ring of slots, each position attending to exactly
 * those. Inference only: training runs whole sequences. */
#include "model/decoder-options.h"

ClKVCache *cl_kv_cache_new_streaming(const ClModel *model, int sink, int window)
{
    g_return_val_if_fail(model != NULL, NULL);
    g_return_val_if_fail(sink >= 0 && window >= 1 && sink <= CL_CONFIG_MAX_LEN - window, NULL);
    ClKVCache *c = cl_kv_cache_new(model, sink + window);
    if (c) {
        c->sink = sink;
        c->window = window;
    }
    return c;
}

int cl_dec_slot_of(const ClKVCache *c, int p)
{
    if (!c->window || p < c->sink)
        return p;
    return c->sink + (p - c->sink) % c->window;
}

/* A streaming cache fills its slots in chunks, then takes one position at a time (a chunk would
 * overwrite keys its own earlier rows still see). */
int cl_dec_chunk_rows(const ClKVCache *c, int pos, int want)
{
    if (!c->window)
        return want;
    return pos < c->capacity ? MIN(want, c->capacity - pos) : 1;
}

gboolean cl_dec_stream_ring(const ClKVCache *c, int pos0, int cn)
{
    return c->window && pos0 + cn > c->capacity;
}

/* Every slot holds a position the query sees (the sink and the last window); their order does
 * not matter to a softmax, so no mask. */
void cl_dec_stream_attention(const ClDecRun *r, const float *kl, const float *vl, int cn)
{
    ClKVCache *c = r->c;
    const int Q = c->heads * c->hd, KV = c->kv_dim;
    r->be->ops->attention(r->be, c->att, NULL, c->q, kl, vl, cn, c->capacity, Q, KV, KV, Q,
                          c->heads, c->kv_heads, c->hd, r->scale, -1, 0, c->scores);
}

/* The ring holds no position before the last window, so only a cut that leaves every kept
 * position in its slot is possible. */
gboolean cl_dec_stream_truncate_ok(const ClKVCache *c, int len)
{
    if (c->window && c->len > c->capacity && len > 0) {
        g_warning("A streaming KV cache past its window can only be truncated to 0");
        return FALSE;
    }
    return TRUE;
}
