/* decoder-options.h - inside the decoder only (decoder.c, its option files decoder-*.c and the
 * training side, decoder-train.h): the KV cache's fields, what one forward call's steps share,
 * and what each option adds to the plain Llama block (docs/MODEL.md §4: PVM §4.2, CASA §4.3,
 * streaming §4.4, hybrid and sparse §4.5). */
#pragma once

#include "model/decoder.h"

G_BEGIN_DECLS

struct _ClKVCache {
    int depth, capacity, len;
    /* layers with keys and values (all but the Gated DeltaNet ones) and each layer's slot among
     * them (-1: a GDN layer) */
    int kv_layers;
    int *kv_slot;
    /* the hybrid's Gated DeltaNet layers (host memory): per layer H states of dk × dv
     * (gdn_state floats) and the convolution's last inputs (gdn_conv_n floats) */
    int n_gdn, gdn_h, gdn_dk, gdn_dv, gdn_k;
    int *gdn_slot;
    size_t gdn_state, gdn_conv_n;
    float *gdn_S, *gdn_convst;
    /* its per-chunk activations, in the arena: (rows, H·dk) ×2, (rows, H·dv) ×3, (rows, H) ×2 */
    float *gq, *gk, *gv, *gg, *go, *ga, *gb;
    /* streaming (sink + window): positions p >= sink live in slot sink + (p − sink) % window
     * and len may exceed capacity = sink + window; 0: an ordinary cache */
    int sink, window;
    /* VIST2: the RoPE position of a row added now is its slot + pos_shift */
    int pos_shift;
    /* offline sparse prefill (sp_block > 0): a chunk's queries in blocks of sp_block positions
     * attend to the first key block, the previous one, their own and the sp_topk best others */
    int sp_block, sp_topk;
    int kv_dim; /* Hkv · hd */
    int e, f, heads, kv_heads, hd, vocab;
    float *k, *v;     /* (depth, capacity, kv_dim) */
    ClBackend *kv_be; /* a reference to the device backend k and v live on; NULL: host memory
                         * (g_malloc), which every host-memory backend uses as it is */

    /* workspace for `rows` positions at a time, grown on demand */
    ClBackend *arena_be; /* a reference to the backend the arena belongs to */
    int rows;
    size_t scratch_floats; /* attention scratch laid out (depends on the backend's threads) */
    float *arena;
    float *x;         /* (rows, E) the stream */
    float *h;         /* (rows, E) normalised */
    float *q;         /* (rows, Hq·hd) */
    float *att;       /* (rows, Hq·hd) */
    float *proj;      /* (rows, E) */
    float *gate, *up; /* (rows, F) */
    float *scores;    /* attention scratch for (rows, capacity) */
    float *rope_cos;  /* (rows, hd/2) */
    float *rope_sin;
    /* device backends only: the logits before their download, (rows, V); the RoPE tables in
     * host memory before their upload */
    float *logits;
    float *host_rope;

    /* PVM (config pvm_layers): each PVM layer's keys and values of the prompt's visual rows,
     * (n_pvm, pvm_cap, hp) each, made by the call that brought them (the first at position
     * pvm_from) and kept for the decode steps after it */
    int n_pvm, pvm_r, pvm_heads, pvm_hp, pvm_f;
    ClBackend *pvm_be; /* a reference to the backend pvm_k/pvm_v/pvm_vis live on */
    int pvm_cap, pvm_n, pvm_from;
    float *pvm_k, *pvm_v;
    float *pvm_vis; /* (pvm_cap, E) the visual rows in backend memory (device backends) */
    /* the branch's activations, in the arena: (rows, r) ×3, (rows, Fp) ×2, (rows, E), (E) */
    float *pa, *pb, *pc, *pg, *pu, *pp, *ones;

    /* CASA (config casa): the current window's visual rows as every layer's cross-attention
     * keys and values, (depth, casa_cap, kv_dim) each; casa_open: the last position was visual
     * (more visual rows extend the window; text closes it, the next image starts a new one) */
    ClCasaVariant casa;
    ClBackend *casa_be; /* a reference to the backend casa_k/casa_v live on */
    int casa_cap, casa_rows;
    /* CA_{t+v}: the window's text rows' cross-attention keys and values after its visual rows
     * (casa_text of them), the window's first text position */
    int casa_text, casa_pos;
    gboolean casa_open;
    float *casa_k, *casa_v;
};

/* What one forward call's steps share. att_out (NULL: not asked): the attention map of layer
 * att_layer for the positions from att_q0, rows of att_cols floats
 * (cl_decoder_forward_attention). */
typedef struct {
    ClBackend *be;
    const ClModelConfig *cfg;
    const ClModelWeights *w;
    ClKVCache *c;
    gboolean host;
    ClTensorTap tap;
    gpointer tap_data;
    float eps, scale;
    int att_layer, att_q0, att_cols;
    float *att_out;
    const ClQuantWeights *quant; /* the model's quantized matrices (CPU only), or NULL */
    struct _ClThreadPool *pool;  /* the CPU backend's pool, for them */
} ClDecRun;

/* ---- kvcache.c: the cache ---- */

/* The cache serves models of cfg's decoder shapes. */
gboolean cl_dec_same_model(const ClKVCache *c, const ClModelConfig *cfg);
/* The workspace for `rows` positions on backend be (and the keys and values moved there). */
gboolean cl_dec_ensure_workspace(ClKVCache *c, ClBackend *be, int rows, GError **error);

/* ---- decoder.c: the plain block ---- */

/* Positions cid[0, cn) at positions pos0.. through every layer into c->x, their keys and values
 * into the cache; visual ids take the next rows of `visual` from *vis_row (visual may be NULL
 * when cid has none). */
void cl_dec_run_layers(const ClDecRun *r, const gint32 *cid, int cn, int pos0, const float *visual,
                       int *vis_row);
/* Logits of c->x's cn rows: every row's into rows_out ((cn, V), host) and/or the last row's into
 * last ((V), host); either may be NULL. */
void cl_dec_run_logits(const ClDecRun *r, int cn, float *rows_out, float *last);
/* The RoPE tables of `rows` rows all at position pos (in the workspace, on the backend). */
void cl_dec_rope_tables_at(const ClDecRun *r, int pos, int rows);
/* out (rows, ldo) += the attention of query rows q (ldq apart, positions pos0..) over keys k
 * (ldk apart, positions 0..) averaged over the Hq heads (GQA: Hq / Hkv per key head), each row
 * over the positions up to its own; host memory (the inference's map and the trainer's). */
void cl_dec_attention_map(float *out, int ldo, const float *q, int ldq, const float *k, int ldk,
                          int rows, int pos0, int Hq, int Hkv, int hd, float scale);

/* ---- decoder-stream.c: the streaming window (§4.4) ---- */

/* The slot of position p (streaming: the ring after the sink). */
int cl_dec_slot_of(const ClKVCache *c, int p);
/* Rows of the next chunk from position pos, at most `want`. */
int cl_dec_chunk_rows(const ClKVCache *c, int pos, int want);
/* TRUE when the chunk [pos0, pos0 + cn) runs past the ring's first fill. */
gboolean cl_dec_stream_ring(const ClKVCache *c, int pos0, int cn);
/* The chunk's one position attending to every slot of layer keys kl / values vl. */
void cl_dec_stream_attention(const ClDecRun *r, const float *kl, const float *vl, int cn);
/* FALSE (and a warning) when a streaming cache cannot be cut to len. */
gboolean cl_dec_stream_truncate_ok(const ClKVCache *c, int len);

/* ---- decoder-sparse.c: the offline sparse prefill (§4.5) ---- */

/* TRUE when the sparse prefill's rule serves a chunk of cn positions. */
gboolean cl_dec_sparse_on(const ClKVCache *c, int cn);
/* c->att for the chunk's queries c->q at pos0.. over layer keys kl / values vl. */
void cl_dec_sparse_attention(const ClDecRun *r, const float *kl, const float *vl, int pos0, int cn);

/* ---- decoder-gdn.c: the hybrid's Gated DeltaNet layers (§4.5) ---- */

/* The recurrent states of cfg's GDN layers (none: TRUE, nothing made); FALSE when memory is
 * short. */
gboolean cl_dec_gdn_init(ClKVCache *c, const ClModelConfig *cfg);
void cl_dec_gdn_free(ClKVCache *c);
/* A cut to len: FALSE (and a warning) when the states cannot go back there; len 0 zeroes them. */
gboolean cl_dec_gdn_truncate(ClKVCache *c, int len);
void cl_dec_gdn_copy(ClKVCache *dst, const ClKVCache *src);
/* Layer l's token mixer for cn rows of c->x: x += GDN(RMSNorm(x)), its state in `slot`. */
void cl_dec_gdn_layer(const ClDecRun *r, const ClDecoderLayerWeights *L, int slot, int cn);

/* ---- decoder-pvm.c: persistent visual memory (§4.2) ---- */

void cl_dec_pvm_init(ClKVCache *c, const ClModelConfig *cfg);
void cl_dec_pvm_release(ClKVCache *c);
void cl_dec_pvm_truncate(ClKVCache *c, int len);
void cl_dec_pvm_copy(ClKVCache *dst, const ClKVCache *src);
/* The PVM keys and values of the call's visual rows (ids' CL_DECODER_VISUAL ones, rows of
 * `visual`), made before the layers run; nothing when the call has none. */
gboolean cl_dec_pvm_prepare(ClKVCache *c, ClBackend *be, const ClModelConfig *cfg,
                            const ClModelWeights *w, const gint32 *ids, int n, const float *visual,
                            GError **error);
/* P for the chunk's cn rows of h into c->pp (zero at visual rows); nothing (FALSE) when layer l
 * has no PVM branch or no visual rows were read. */
gboolean cl_dec_pvm_branch(const ClDecRun *r, const ClDecoderLayerWeights *L, int l, const float *h,
                           const gint32 *cid, int cn);

/* ---- decoder-casa.c: cross-attention beside self-attention (§4.3) ---- */

void cl_dec_casa_release(ClKVCache *c);
/* Room for n window rows on backend be, the rows already there kept. */
gboolean cl_dec_casa_reserve(ClKVCache *c, ClBackend *be, int n, GError **error);
void cl_dec_casa_truncate(ClKVCache *c, int len);
void cl_dec_casa_copy(ClKVCache *dst, const ClKVCache *src);
/* Positions a call adds to the cache (the text alone) and the rows per pass (its longest text
 * run, at most chunk). */
int cl_dec_casa_adds(const gint32 *ids, int n);
int cl_dec_casa_rows(const gint32 *ids, int n, int chunk);
/* x += CA(c->h, window) for the chunk's cn rows (c->h: RMSNorm(x) with attn_norm). */
void cl_dec_casa_cross(const ClDecRun *r, const ClDecoderLayerWeights *L, int l, int cn);
/* CA^#'s layer l: the cross-attention alone (nothing without a window). */
void cl_dec_casa_only(const ClDecRun *r, const ClDecoderLayerWeights *L, int l, int cn);
/* A CASA call: runs of visual rows into the window, runs of text through the layers `rows` at a
 * time, logits as cl_decoder_forward's (0 at visual rows); *pos advances by the text's
 * positions. */
gboolean cl_dec_casa_forward(const ClDecRun *r, const gint32 *ids, int n, const float *visual,
                             int rows, float *logits, float *logits_all, int *pos, GError **error);

G_END_DECLS
