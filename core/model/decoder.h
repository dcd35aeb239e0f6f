/* decoder.h - the causal transformer decoder with a KV cache, docs/MODEL.md §4. */
#pragma once

#include <glib.h>

#include "nn/backend.h"
#include "model/encoder.h"
#include "model/model.h"

G_BEGIN_DECLS

/* Keys and values of every layer for up to `capacity` positions. */
typedef struct _ClKVCache ClKVCache;
/* capacity: 1 .. CL_CONFIG_MAX_LEN positions; NULL when memory is short. The cache only serves
 * models of this model's decoder shapes. */
ClKVCache *cl_kv_cache_new(const ClModel *model, int capacity);
/* A streaming cache (docs/MODEL.md §4.4): the first `sink` positions and the
 * last `window` ones, in a ring, however long the sequence; each position attends to exactly
 * those (dense attention under the sink + window mask). Its memory is that of sink + window
 * positions; cl_kv_cache_len() counts every position seen. */
ClKVCache *cl_kv_cache_new_streaming(const ClModel *model, int sink, int window);
int cl_kv_cache_len(const ClKVCache *cache);
int cl_kv_cache_capacity(const ClKVCache *cache);
/* Bytes the cache holds now: keys and values at full capacity, the workspace, PVM's visual
 * keys and values (what the decoder's state costs beside the weights). */
size_t cl_kv_cache_bytes(const ClKVCache *cache);
/* Drop positions >= len. */
void cl_kv_cache_truncate(ClKVCache *cache, int len);
/* dst (same model, capacity >= src's length) becomes a copy of src (beam search). */
void cl_kv_cache_copy_from(ClKVCache *dst, const ClKVCache *src);
/* The offline sparse prefill (docs/MODEL.md §4.5): block > 0 makes a
 * forward call of more than one position attend, per query block of `block` positions, to the
 * first key block, the previous block, its own (causally) and the `topk` other earlier blocks
 * whose mean key scores best against the block's mean query; a decode step (one position)
 * stays dense, and every key stays in the cache. block 0: off. Ordinary caches, CPU. */
void cl_kv_cache_set_sparse_prefill(ClKVCache *cache, int block, int topk);
/* VIST2 (docs/MODEL.md §4.6): the rows the next forward calls add get RoPE positions slot +
 * shift (a chunk's visual rows share its text's positions), until it is set back to 0. */
void cl_kv_cache_set_position_shift(ClKVCache *cache, int shift);
/* VIST2's eviction: drops positions [from, from + count) and moves the later ones down; their
 * keys keep the positions they were made at. Ordinary caches only (not streaming, hybrid, PVM
 * or CASA); FALSE + CL_MODEL_ERROR_INPUT otherwise or for a range outside the cache. */
gboolean cl_kv_cache_remove(ClKVCache *cache, int from, int count, GError **error);
void cl_kv_cache_free(ClKVCache *cache);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClKVCache, cl_kv_cache_free)

/* Runs `n` new positions through the decoder, appending them to the cache.
 * ids[i] >= 0: the token's embedding; ids[i] == CL_DECODER_VISUAL: the next row of `visual`
 * (rows consumed in order; `visual` is (count, E)).
 * logits: (V) for the last position, or NULL; logits_all: (n, V) for every position, or NULL.
 * Fails (no change to the cache) when the cache would overflow or an id is out of range. */
#define CL_DECODER_VISUAL (-1)
gboolean cl_decoder_forward(ClBackend *be, const ClModel *model, ClKVCache *cache,
                            const gint32 *ids, int n, const float *visual, float *logits,
                            float *logits_all, ClTensorTap tap, gpointer tap_data, GError **error);

/* cl_decoder_forward (logits: the last position's, or NULL; no tap) that also gives the
 * attention of decoder block `layer` (< 0: counted from the end), averaged over the heads, from
 * the queries and keys the call runs (RoPE on): att (end − q0, end) row-major, end = the cache's
 * length after the call, one row per position q0 .. end − 1 (q0 >= the length before it), each
 * a distribution over the positions up to its own (0 after it). An ordinary cache (not streaming
 * or sparse), a model with its images in the sequence (not CASA) and a layer with
 * self-attention (not a Gated DeltaNet or CA^# one); FALSE + CL_MODEL_ERROR_INPUT otherwise. */
gboolean cl_decoder_forward_attention(ClBackend *be, const ClModel *model, ClKVCache *cache,
                                      const gint32 *ids, int n, const float *visual, float *logits,
                                      int layer, int q0, float *att, GError **error);

G_END_DECLS
