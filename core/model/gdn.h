/* gdn.h - Gated DeltaNet, the linear-attention layer of the hybrid decoder option
 * (docs/MODEL.md §4.5): its recurrence, its chunked (WY) form and the causal depthwise
 * convolution in front of it, each with a state carried between calls (host memory). The decay
 * is applied before the error term, as the reference code does (not as the paper's Eq. 2). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* One head over T steps. q, k: (T, dk), v: (T, dv), g: (T) log-decays (alpha_t = exp(g_t) in
 * (0, 1]), beta: (T) in (0, 1); S: (dk, dv) the state, updated in place; o: (T, dv).
 *   S <- alpha_t S;  u = beta_t (v_t − S^T k_t);  S <- S + k_t u^T;  o_t = S^T q_t */
void cl_gdn_recurrent(float *o, float *S, const float *q, const float *k, const float *v,
                      const float *g, const float *beta, int T, int dk, int dv);

/* The same by chunks of C steps (the last may be shorter): within a chunk, with b_i the
 * cumulative log-decay, A_ij = beta_i (k_i·k_j) e^(b_i − b_j) (i > j), T = (I + A)^-1,
 * U = T diag(beta) V, W = T diag(beta e^b) K, Vn = U − W S0,
 * O = diag(e^b) Q S0 + ((Q K^T) ⊙ D) Vn (D_ij = e^(b_i − b_j), j <= i),
 * S <- e^(b_C) S0 + (diag(e^(b_C − b)) K)^T Vn. Equal to the recurrence up to rounding;
 * products in double. */
void cl_gdn_chunked(float *o, float *S, const float *q, const float *k, const float *v,
                    const float *g, const float *beta, int T, int dk, int dv, int C);

/* The backward of cl_gdn_recurrent (and so of cl_gdn_chunked: the same function) for one head
 * over T steps from the state S0 ((dk, dv); NULL: zeros), given d_o (T, dv), the gradient of o,
 * and d_S ((dk, dv); NULL: zeros), that of the final state. d_q, d_k (T, dk), d_v (T, dv), d_g,
 * d_beta (T) and d_S0 (dk, dv) ACCUMULATE (+=); a NULL one is skipped. The states are
 * recomputed in double from checkpoints every C ~ √T steps (memory (T/C + C + 1)·dk·dv
 * doubles), and the state's gradient is carried in double. */
void cl_gdn_recurrent_backward(float *d_q, float *d_k, float *d_v, float *d_g, float *d_beta,
                               float *d_S0, const float *d_o, const float *d_S, const float *S0,
                               const float *q, const float *k, const float *v, const float *g,
                               const float *beta, int T, int dk, int dv);

/* Causal depthwise convolution of `channels` channels with kernels of K taps (w: (channels,
 * K), tap K−1 on the current step): y_t = Σ_i w_i x_(t−K+1+i). state: (K−1, channels) the
 * inputs before x (zeros at the start of a sequence), updated to the last K−1 inputs. x, y:
 * (T, channels); y may not alias x. */
void cl_causal_conv1d(float *y, float *state, const float *x, const float *w, int T, int channels,
                      int K);

/* Its backward from the state it started with (NULL: zeros, a sequence's start), given d_y
 * (T, channels): d_x (T, channels), d_w (channels, K) and d_state (K−1, channels) ACCUMULATE
 * (+=); a NULL one is skipped. */
void cl_causal_conv1d_backward(float *d_x, float *d_w, float *d_state, const float *d_y,
                               const float *state, const float *x, const float *w, int T,
                               int channels, int K);

/* A GDN layer's per-step quantities over n rows of H heads (q and k rows of stride ld): q and k
 * unit per head (norms in double, 1e-12 added; q also divided by √dk), in place; beta = σ(b);
 * g = −exp(A_log)·softplus(a + dt_bias) (softplus linear past 20). g may alias a, beta b. */
void cl_gdn_gates(float *q, float *k, int ld, float *g, const float *a, float *beta, const float *b,
                  const float *A_log, const float *dt_bias, int n, int H, int dk);

G_END_DECLS
