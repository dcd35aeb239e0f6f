/* refdec.h - float64 building blocks of the decoder references in the tests (test-decoder,
 * test-pvm, test-casa, test-streaming): written from docs/MODEL.md §4, independent of the
 * engine's code. */
#pragma once

#include <glib.h>

/* out = x / sqrt(mean(x²) + eps) · w (w NULL: a unit gain) */
void ref_rmsnorm(double *out, const double *x, const float *w, int n, double eps);
/* out[j] = Σ_i w[j, i] x[i] */
void ref_matvec(double *out, const float *w, const double *x, int n_out, int n_in);
/* rotate-half RoPE of `heads` heads of hd at position pos */
void ref_rope(double *x, int heads, int hd, int pos, double base);
/* out (Hq·hd) = softmax over the keys j < nk with keep[j] (keep NULL: all) of q·k_j / sqrt(hd),
 * times v; query head h reads key/value head h / (Hq/Hkv); k, v rows of Hkv·hd */
void ref_attend(double *out, const double *q, const double *k, const double *v, int nk, int Hq,
                int Hkv, int hd, const gboolean *keep);
/* SwiGLU MLP of one row: out (E) = down(SiLU(gate h) ⊙ up h) */
void ref_mlp(double *out, const float *gate, const float *up, const float *down, const double *h,
             int E, int F);

#include "model/model.h"

typedef struct {
    /* position t sees key j (j <= t); NULL: every j <= t */
    gboolean (*sees)(int t, int j, gpointer data);
    /* TRUE: layer l has no self-attention (CASA's CA^#; after_attention still runs) */
    gboolean (*skip_self_attention)(int l, gpointer data);
    /* row t's RoPE position; NULL: t */
    int (*position)(int t, gpointer data);
    /* after row t's self-attention residual in layer l (h: the row's attn_norm output): may
     * add into xt (CASA's cross-attention) */
    void (*after_attention)(const ClModel *m, int l, int t, const double *h, double *xt,
                            gpointer data);
    /* beside row t's FFN in layer l (xt: the FFN's input): may add into out (PVM) */
    void (*beside_ffn)(const ClModel *m, int l, int t, const double *xt, double *out,
                       gpointer data);
    gpointer data;
} RefHooks;

/* logits (T, V) of the embedded rows x0 (T, E) through the model's decoder at positions
 * 0..T−1 (or the hooks') (docs/MODEL.md §4), with the hooks (may be NULL). */
void ref_decode_rows(const ClModel *m, const double *x0, int T, const RefHooks *hooks,
                     double *logits);
/* Lively weights for the decoder tests, the same values for every tensor two models share by
 * name (seeded by the name): vectors 1 ± 0.2 (norm gains), matrices uniform with std
 * 1/sqrt(fan-in) — random init's unit gains, zero biases and 0.02 weights would hide a norm or
 * a projection on the wrong columns and make every position alike. */
void ref_liven(ClModel *m);
/* x0 (T, E) of a prompt: token embeddings, visual rows taken in order from `visual` */
double *ref_embed(const ClModel *m, const gint32 *ids, int T, const float *visual);
