/* decoder-train.h - TRAINING ONLY: the activations the trainer's decoder forward keeps for its
 * backward (core/train/trainmodel-dec.c, over one whole sequence, no cache), and each option
 * file's training forward and backward on them (decoder-pvm.c, decoder-casa.c, decoder-gdn.c).
 * Inference never reads this header. Every activation is a view into the one buffer a forward
 * lays out (nn/grad.h's ClActArena); the backward is CPU f32 (nn/grad.h). */
#pragma once

#include "model/decoder-options.h"
#include "nn/grad.h"

G_BEGIN_DECLS

/* PVM's activations in a PVM layer (rows [s, n) of the text queries; nv visual rows):
 * zv = Vimg W_v^T, kp = zv W_k^T, kn = RMSNorm_head(kp), vv = zv W_vv^T; zt = h W_t^T,
 * zq = RMSNorm_a(zt), qp = zq W_q^T, qn = RMSNorm_head(qp), att = Attn(qn; kn, vv), mo = att W_o^T,
 * nb = RMSNorm_b(mo), gu = nb [gate|up]^T, act = SiLU(gate) ⊙ up, m2 = mo + act W_down^T,
 * y = m2 W_up^T, u = RMSNorm0(y); P = α u at text rows. */
typedef struct {
    float *zv, *kp, *kn, *vv;                 /* (nv, r), (nv, hp) ×3 */
    float *zt, *zq, *qp, *qn, *att, *mo, *nb; /* (n, r) */
    float *gu, *act;                          /* (n, 2 Fp), (n, Fp) */
    float *m2;                                /* (n, r) */
    float *y, *u;                             /* (n, E) */
    float *probs;                             /* (H, n, nv) */
} ClTrainPvmAct;

/* CASA's activations in a layer: ny = RMSNorm(Vimg; casa.norm) (nv, E), kc/vc its keys and
 * values (nv, KV), qc = h1 W_qc^T (n, Q), attc the cross-attention per window (n, Q; 0 at rows
 * without a window). */
typedef struct {
    float *ny, *kc, *vc, *qc, *attc;
    /* CA_{t+v}: kr the visual keys with RoPE at their window's first text position (nv, KV),
     * kt/vt every text row's keys (with RoPE) and values (n, KV); qc then holds roped queries */
    float *kr, *kt, *vt;
} ClTrainCasaAct;

/* A Gated DeltaNet layer's activations (decoder-gdn.c's inference step, docs/MODEL.md §4.5),
 * over every row (the state runs through all of them): zq, zk (n, H·dk), zv, zg (n, H·dv), za,
 * zb (n, H) the products of h1; cq, ck, cv the causal convolutions' outputs and sq, sk, sv after
 * SiLU; nq, nk the rows made unit per head (nq also /√dk); gd the log-decay, bt beta (n, H); o
 * the delta rule's output, on its RMSNorm per head, y = SiLU(zg) ⊙ on (n, H·dv). */
typedef struct {
    float *zq, *zk, *zv, *zg, *za, *zb;
    float *cq, *ck, *cv, *sq, *sk, *sv, *nq, *nk;
    float *gd, *bt, *o, *on, *y;
} ClTrainGdnAct;

/* qkv: (n, Q + 2 KV) rows [q | k | v], one product with the layer's q, k and v weights
 * stacked (they are consecutive in a trainable model); gu: (n, 2 F) rows [gate | up], likewise.
 * Fewer, wider products: the activation is packed once instead of three times. */
typedef struct {
    float *x_in, *h1, *qkv, *att, *x_mid, *h2, *gu, *act;
    gboolean gdn;     /* a Gated DeltaNet layer in place of the attention (qkv, att, probs NULL) */
    gboolean ca_only; /* CASA's CA^#: the cross-attention alone (qkv, att, probs NULL) */
    ClTrainGdnAct g;
    float *probs; /* (Hq, n, n) attention probabilities, or NULL: the backward recomputes them */
    ClTrainPvmAct *pvm;  /* PVM layers with visual rows, else NULL */
    ClTrainCasaAct casa; /* CASA models with visual rows */
} ClTrainLayerAct;

typedef struct _ClTrainDec ClTrainDec;
struct _ClTrainDec {
    ClBackend *be;
    const ClModelConfig *cfg;
    int n, E, F, Hq, Hkv, hd, Q, KV, QKV, V;
    float eps, scale;
    const gint32 *ids;
    ClTrainLayerAct *layer;
    float *x_out, *hn, *rope_cos, *rope_sin;
    int n_rows;          /* logit rows: every position, or the listed ones */
    int tail;            /* the first logit row: the last layer's queries, output projection,
                        * MLP and the final norm run on positions [tail, n) only */
    int *rows;           /* (n_rows) their positions, NULL = all */
    float *hk;           /* (n_rows, E) the final norm's output at those rows */
    const float *visual; /* (n_vis, E) the visual rows (PVM's Vimg) */
    float *ones;         /* (E) RMSNorm0's unit gain */
    int n_vis;
    gboolean keep_probs; /* every attention layer keeps its probabilities */
    ClTrainPvmAct *pvm;  /* one per PVM layer */
    /* CASA: the text rows alone go through the layers (ids/n are theirs); text row t reads the
     * window of visual rows [win0[t], win0[t] + winn[t]) (winn 0: no window yet) */
    gboolean casa;
    gint32 *tids;
    int *win0, *winn;
    /* CA_{t+v}: each text row's window's first text row; the visual rows' RoPE tables (at that
     * row's position, nv × hd/2) */
    int *wstart;
    float *img_cos, *img_sin;
    /* the forward's scratch: proj (n, E), the attention's, stacked weights, PVM's P (n, E), and
     * CA_{t+v}'s gathered window keys and values (nv + n, KV) each */
    float *proj, *scratch, *wtmp, *pp, *cgk, *cgv;
    /* the one buffer every view above lies in (cl_act_buffer_take), buf_n floats */
    float *buf;
    size_t buf_n;
};

/* ---- decoder-pvm.c ---- */

/* Views of a PVM layer's activations. */
void cl_dec_train_pvm_layout(ClTrainDec *d, ClTrainPvmAct *p, ClActArena *a);
/* The branch for rows [s, n) of h (the FFN's input): keeps its activations in p and adds P into
 * x's text rows [s, n). */
void cl_dec_train_pvm_forward(ClTrainDec *d, const ClDecoderLayerWeights *L, ClTrainPvmAct *p,
                              const float *h, float *x, int s);
/* dx: the gradient at the layer's output (the branch adds P to it); the gradient at h goes
 * into dh (rows [s, n)), at the visual rows into dvis (n_vis, E), the weights' into G. */
void cl_dec_train_pvm_backward(const ClTrainDec *d, const ClDecoderLayerWeights *L,
                               ClDecoderLayerWeights *G, const ClTrainPvmAct *p, const float *h,
                               const float *dx, int s, float *dh, float *dvis, float *wtmp,
                               float *gtmp);

/* ---- decoder-casa.c ---- */

/* The text rows and their windows (d->tids, win0, winn, wstart, img_cos/sin, n_vis) of the
 * sequence ids (n): *ids / *n become the text's; *rows (n_rows, may be NULL) are renumbered to
 * text rows in *trows (a visual row: FALSE + CL_MODEL_ERROR_INPUT); full2text (n) maps each
 * position to its text row (−1: visual). */
gboolean cl_dec_train_casa_rows(ClTrainDec *d, const gint32 **ids, int *n, const int **rows,
                                int n_rows, int *full2text, int **trows, GError **error);
void cl_dec_train_casa_layout(ClTrainDec *d, ClTrainCasaAct *c, ClActArena *a);
/* After the layer's self-attention residual (or in its place, CA^#): x += CA(h1, window) at
 * the text rows [s, n) that have a window, in inference's order. */
void cl_dec_train_casa_forward(ClTrainDec *d, const ClDecoderLayerWeights *L, ClTrainLayerAct *a,
                               float *x, int s);
/* dx: the gradient at the layer's x after the attention and CA residuals; the gradient at h1
 * goes into dh (rows [s, n)), at the visual rows into dvis. */
void cl_dec_train_casa_backward(const ClTrainDec *d, const ClDecoderLayerWeights *L,
                                ClDecoderLayerWeights *G, const ClTrainLayerAct *a, const float *dx,
                                int s, float *dh, float *dvis);
/* Every position's logits (n_full, V) from the text rows' final norm d->hk: the text rows'
 * in place, zeros at visual rows (as inference gives them). FALSE when memory is short. */
gboolean cl_dec_train_casa_logits(const ClTrainDec *d, const float *lm_head, const int *full2text,
                                  int n_full, float *logits);

/* ---- decoder-gdn.c ---- */

void cl_dec_train_gdn_layout(ClTrainDec *d, ClTrainGdnAct *g, ClActArena *a);
/* In place of the attention, from a->h1 over every row (the state and the convolutions start at
 * zero: one sample is one sequence), keeping its activations in a->g; x += y W_o^T at rows
 * [s, n). */
void cl_dec_train_gdn_forward(ClTrainDec *d, const ClDecoderLayerWeights *L, ClTrainLayerAct *a,
                              float *x, int s);
/* dx: the gradient at the layer's x after the residual (rows [s, n) nonzero); G gets every
 * gdn_* tensor's and attn_norm's gradient and dx the gradient through the branch at the layer's
 * input (added: the residual's own path is dx). */
void cl_dec_train_gdn_backward(const ClTrainDec *d, const ClDecoderLayerWeights *L,
                               ClDecoderLayerWeights *G, const ClTrainLayerAct *a, float *dx,
                               int s);

G_END_DECLS
