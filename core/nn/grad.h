/* grad.h - CPU f32 backward passes of the ops the model's forward uses (core/nn/backend.h).
 *
 * Conventions: every tensor is row-major host memory; every gradient output ACCUMULATES (+=),
 * so the caller zeroes a buffer once and several paths can add into it; a NULL gradient output
 * is skipped (its input is a constant). `dy` is the gradient of the op's output. Products run
 * through cblas_sgemm; the rest are plain loops, reductions over rows in double. */
#pragma once

#include <glib.h>

#include "nn/backend.h"

G_BEGIN_DECLS

/* y[m, n] = x[m, k] · w[n, k]^T + b[n]: dx += dy·w, dw += dy^T·x, db += Σ_rows dy. */
void cl_grad_linear(float *dx, float *dw, float *db, const float *dy, const float *x,
                    const float *w, int m, int k, int n);
/* y = (x − mean) · rstd · w + b per row (biased variance): recomputes mean/rstd from x. */
void cl_grad_layernorm(float *dx, float *dw, float *db, const float *dy, const float *x,
                       const float *w, int m, int n, float eps);
/* y = x · rs · w, rs = 1/sqrt(mean(x²) + eps) per row. */
void cl_grad_rmsnorm(float *dx, float *dw, const float *dy, const float *x, const float *w, int m,
                     int n, float eps);
/* y[i, j] = x[i, j]·(1 + scale[j]) + shift[j]  (x: the input before modulation). */
void cl_grad_modulate(float *dx, float *dscale, float *dshift, const float *dy, const float *x,
                      const float *scale, int m, int n);
/* y = GELU(x), exact erf. */
void cl_grad_gelu(float *dx, const float *dy, const float *x, size_t count);
/* y = SiLU(x). */
void cl_grad_silu(float *dx, const float *dy, const float *x, size_t count);
/* y = SiLU(gate) ⊙ up. */
void cl_grad_silu_mul(float *dgate, float *dup, const float *dy, const float *gate, const float *up,
                      size_t count);
/* x += (1 + gate[j])·a (gate NULL: x += a): da += (1 + gate)·dy, dgate += Σ_rows dy ⊙ a.
 * (The residual's own input passes dy through unchanged: nothing to do for it.) */
void cl_grad_residual(float *da, float *dgate, const float *dy, const float *a, const float *gate,
                      int m, int n);
/* y[i, j] = gate[j]·a[i, j]: da += gate·dy, dgate += Σ_rows dy ⊙ a. */
void cl_grad_scale_cols(float *da, float *dgate, const float *dy, const float *a, const float *gate,
                        int m, int n);
/* In place on the gradient `dx` (layout as backend.h's rope): the transpose of the rotation,
 * i.e. the same rotation by −angle. */
void cl_grad_rope(float *dx, const float *cos_t, const float *sin_t, int n_tok, int ld, int n_head,
                  int head_dim, int n_sections);
/* y = softmax of each row of x (y given): dx += y ⊙ (dy − Σ dy ⊙ y). Strides ld. */
void cl_grad_softmax(float *dx, const float *dy, const float *y, int m, int n, int ld);
/* The backward of backend.h's `attention` (out only, not out_tail): probabilities are
 * recomputed one head at a time (O(n_q·n_kv) memory). dq: (n_q, ldq-strided like q), dk/dv
 * like k/v; GQA groups add their heads' key/value gradients. */
void cl_grad_attention(float *dq, float *dk, float *dv, const float *dout, const float *q,
                       const float *k, const float *v, int n_q, int n_kv, int ldq, int ldk, int ldv,
                       int ldo, int n_head, int n_kv_head, int head_dim, float scale, int causal);
/* The training forward of attention (backend.h's `attention`, no tail) that keeps what its
 * backward needs: probs (n_head, n_q, n_kv) receives each head's probabilities (rows past a
 * causal block's last key are left unwritten: cl_grad_attention_probs does not read them). */
void cl_train_attention(float *out, float *probs, const float *q, const float *k, const float *v,
                        int n_q, int n_kv, int ldq, int ldk, int ldv, int ldo, int n_head,
                        int n_kv_head, int head_dim, float scale, int causal);
/* cl_grad_attention with the forward's probabilities (cl_train_attention's probs) instead of
 * recomputing them. */
void cl_grad_attention_probs(float *dq, float *dk, float *dv, const float *dout, const float *q,
                             const float *k, const float *v, const float *probs, int n_q, int n_kv,
                             int ldq, int ldk, int ldv, int ldo, int n_head, int n_kv_head,
                             int head_dim, float scale, int causal);
/* out[i] = ‖a[i, :]‖ (out given): da += dout[i]·a[i, :]/out[i] (0 where out is 0). */
void cl_grad_row_norms(float *da, const float *dout, const float *a, const float *out, int m,
                       int n);
/* out[i] = table[ids[i]] for ids[i] >= 0: dtable[ids[i]] += dy[i]. */
void cl_grad_embed(float *dtable, const float *dy, const gint32 *ids, int n, int dim);

/* The patch embedding's unfold is cl_patch_unfold (backend.h); the conv is then cl_grad_linear
 * over the patches. Its backward (col2im): dpixels += the patch gradients put back. */
void cl_grad_patch_unfold(float *dpixels, const float *dpatches, int channels, int size, int patch);
/* The 2×2 merger's unfold (§3.8): x [G², D] → cat [(G/2)², 4D]. */
void cl_merger_unfold(float *cat, const float *x, int grid, int dim);
void cl_grad_merger_unfold(float *dx, const float *dcat, int grid, int dim);

/* Masked next-token cross-entropy: row t of logits [n, V] predicts targets[t] where mask[t]
 * (mask NULL: every row). Returns the mean over supervised rows of −log p(target), in double,
 * and *n_supervised; dlogits (may be NULL) is SET (not accumulated) to
 * scale·(softmax − onehot)/n_supervised on supervised rows, 0 elsewhere. No supervised row:
 * 0 and dlogits zeroed. The caller has checked every supervised target is in [0, V). */
double cl_cross_entropy(float *dlogits, const float *logits, const gint32 *targets,
                        const guint8 *mask, int n, int vocab, float scale, int *n_supervised);

/* Sigmoid binary cross-entropy of count logits z against targets y (0 or 1): returns
 * Σ log(1 + e^z) − z·y (without overflow), in double; dz (may be NULL) is SET to
 * scale · (sigmoid(z) − y). */
double cl_bce_logits(float *dz, const float *z, const float *y, size_t count, float scale);

/* Σ x[begin, end)², four partial sums in double (train/optim.h's cl_grad_sumsq). */
double cl_sumsq(const float *x, size_t begin, size_t end);
/* AdamW's per-element update over [begin, end) (train/optim.h's cl_adamw_update_range, whose
 * per-step scalars these are): g = grad·gscale, p = p·decay, m += w1·(g − m),
 * v = v·b2 + w2·g², p += step_size · m / (√v / bc2_sqrt + eps). */
void cl_adamw_elements(float *p, float *m, float *v, const float *g, size_t begin, size_t end,
                       float decay, float w1, float b2, float w2, float bc2_sqrt, float eps,
                       float step_size, float gscale);

/* The CPU backend's training ops (backend.h's struct cl_backend_train_ops): the functions
 * above. */
extern const struct cl_backend_train_ops cl_cpu_train_ops;

/* ---- products with row-stacked weights ---- */

/* Rows a (na, E) and b (nb, E) (and c (nc, E), may be NULL) as one (na + nb + nc, E) matrix:
 * themselves when consecutive (a trainable model's flat parameters), else a copy in tmp. The
 * arrays are be's memory (copies, zeroing and sums by its ops). */
const float *cl_grad_stacked(ClBackend *be, const float *a, int na, const float *b, int nb,
                             const float *c, int nc, int E, float *tmp);
/* The gradient of a stacked product's weights: into a itself when its parts are consecutive,
 * else into tmp (zeroed), added back part by part by cl_grad_unstack(). */
float *cl_grad_stacked_grad(ClBackend *be, float *a, int na, float *b, int nb, float *c, int nc,
                            int E, float *tmp);
void cl_grad_unstack(ClBackend *be, const float *at, float *a, int na, float *b, int nb, float *c,
                     int nc, int E);

/* ---- training activations: views into one buffer ---- */

/* A training forward lays its activations out twice (llm.c style): with base NULL to count the
 * floats, then over one buffer of that size to hand out the views. Views are 64-byte aligned. */
typedef struct {
    float *base; /* NULL: the counting pass */
    size_t used; /* floats counted or handed out so far */
} ClActArena;
/* The next n floats (NULL in the counting pass). */
float *cl_act_take(ClActArena *a, size_t n);
/* A buffer of at least n floats (uninitialised), *got its size: a spare one given back earlier
 * when one is large enough, so that sample after sample reuses the same memory (no fresh
 * mapping faulted in page by page) however malloc is tuned. NULL when memory is short. */
float *cl_act_buffer_take(size_t n, size_t *got);
/* Gives a buffer back (NULL: nothing); a few of the largest are kept for the next takes. */
void cl_act_buffer_give(float *buf, size_t n);

G_END_DECLS
