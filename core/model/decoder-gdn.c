/* decoder-gdn.c - the hybrid decoder's Gated DeltaNet layers (docs/MODEL.md §4.5): the token
 * mixer in place of the attention, its recurrent state carried in the cache; the math is gdn.c's.
 * Inference here, training after it. */
#include "model/decoder-options.h"

#include <math.h>
#include <string.h>

#include "model/gdn.h"

/* ---- inference ---- */

gboolean cl_dec_gdn_init(ClKVCache *c, const ClModelConfig *cfg)
{
    if (!c->n_gdn)
        return TRUE;
    c->gdn_h = cfg->gdn_heads, c->gdn_dk = cfg->gdn_dk, c->gdn_dv = cfg->gdn_dv;
    c->gdn_k = cfg->gdn_conv;
    c->gdn_state = (size_t)c->gdn_h * c->gdn_dk * c->gdn_dv;
    c->gdn_conv_n = (size_t)(c->gdn_k - 1) * c->gdn_h * (2 * c->gdn_dk + c->gdn_dv);
    c->gdn_S = g_try_new0(float, MAX((size_t)c->n_gdn * c->gdn_state, 1));
    c->gdn_convst = g_try_new0(float, MAX((size_t)c->n_gdn * c->gdn_conv_n, 1));
    return c->gdn_S && c->gdn_convst;
}

void cl_dec_gdn_free(ClKVCache *c)
{
    g_clear_pointer(&c->gdn_S, g_free);
    g_clear_pointer(&c->gdn_convst, g_free);
}

gboolean cl_dec_gdn_truncate(ClKVCache *c, int len)
{
    if (c->n_gdn && len > 0 && len < c->len) {
        /* a recurrent state cannot be rewound */
        g_warning("A hybrid (Gated DeltaNet) KV cache can only be truncated to 0");
        return FALSE;
    }
    if (c->n_gdn && len == 0) {
        memset(c->gdn_S, 0, sizeof(float) * c->n_gdn * c->gdn_state);
        memset(c->gdn_convst, 0, sizeof(float) * c->n_gdn * c->gdn_conv_n);
    }
    return TRUE;
}

void cl_dec_gdn_copy(ClKVCache *dst, const ClKVCache *src)
{
    if (!src->n_gdn)
        return;
    memcpy(dst->gdn_S, src->gdn_S, sizeof(float) * src->n_gdn * src->gdn_state);
    memcpy(dst->gdn_convst, src->gdn_convst, sizeof(float) * src->n_gdn * src->gdn_conv_n);
}

/* A Gated DeltaNet layer in place of the attention (docs/MODEL.md §4.5), on cn rows of
 * c->x, its state carried in the cache: q, k, v through the causal convolution and SiLU, q and
 * k L2-normalised per head (q by 1/√dk too), beta = σ(h W_b), g = −exp(A_log)·softplus(h W_a +
 * dt_bias); the delta rule per head (gdn.h); y = RMSNorm_head(o; o_norm) ⊙ SiLU(h W_g);
 * x += y W_o^T. Host memory (the CPU backend). */
void cl_dec_gdn_layer(const ClDecRun *r, const ClDecoderLayerWeights *L, int slot, int cn)
{
    ClBackend *be = r->be;
    const struct cl_backend_ops *op = be->ops;
    ClKVCache *c = r->c;
    const int E = c->e, H = c->gdn_h, dk = c->gdn_dk, dv = c->gdn_dv, K = c->gdn_k;
    const int Qk = H * dk, Vv = H * dv;
    op->rmsnorm(be, c->h, c->x, L->attn_norm, cn, E, r->eps);
    op->linear(be, c->gq, c->h, L->gdn_q, NULL, cn, E, Qk);
    op->linear(be, c->gk, c->h, L->gdn_k, NULL, cn, E, Qk);
    op->linear(be, c->gv, c->h, L->gdn_v, NULL, cn, E, Vv);
    op->linear(be, c->gg, c->h, L->gdn_g, NULL, cn, E, Vv);
    op->linear(be, c->ga, c->h, L->gdn_a, NULL, cn, E, H);
    op->linear(be, c->gb, c->h, L->gdn_b, NULL, cn, E, H);
    /* the causal convolutions (their states after the layer's earlier rows), then SiLU */
    float *st = c->gdn_convst + (size_t)slot * c->gdn_conv_n;
    float *tmp = g_new(float, (size_t)cn * MAX(Qk, Vv));
    struct {
        float *x;
        const float *w;
        int ch;
    } conv[3] = { { c->gq, L->gdn_conv_q, Qk }, { c->gk, L->gdn_conv_k, Qk },
                  { c->gv, L->gdn_conv_v, Vv } };
    for (int i = 0; i < 3; i++) {
        cl_causal_conv1d(tmp, st, conv[i].x, conv[i].w, cn, conv[i].ch, K);
        op->silu(be, conv[i].x, tmp, (size_t)cn * conv[i].ch);
        st += (size_t)(K - 1) * conv[i].ch;
    }
    g_free(tmp);
    /* per head: unit q and k (q scaled), beta, the log-decay */
    cl_gdn_gates(c->gq, c->gk, Qk, c->ga, c->ga, c->gb, c->gb, L->gdn_A_log, L->gdn_dt_bias, cn,
                 H, dk);
    /* the delta rule, head by head, on contiguous copies */
    float *qh = g_new(float, (size_t)cn * dk), *kh = g_new(float, (size_t)cn * dk);
    float *vh = g_new(float, (size_t)cn * dv), *oh = g_new(float, (size_t)cn * dv);
    float *gh = g_new(float, cn), *bh = g_new(float, cn);
    for (int h = 0; h < H; h++) {
        for (int i = 0; i < cn; i++) {
            memcpy(qh + (size_t)i * dk, c->gq + (size_t)i * Qk + (size_t)h * dk, dk * sizeof(float));
            memcpy(kh + (size_t)i * dk, c->gk + (size_t)i * Qk + (size_t)h * dk, dk * sizeof(float));
            memcpy(vh + (size_t)i * dv, c->gv + (size_t)i * Vv + (size_t)h * dv, dv * sizeof(float));
            gh[i] = c->ga[(size_t)i * H + h];
            bh[i] = c->gb[(size_t)i * H + h];
        }
        float *S = c->gdn_S + (size_t)slot * c->gdn_state + (size_t)h * dk * dv;
        if (cn == 1) /* a decode step: the recurrence is the cheaper form */
            cl_gdn_recurrent(oh, S, qh, kh, vh, gh, bh, cn, dk, dv);
        else
            cl_gdn_chunked(oh, S, qh, kh, vh, gh, bh, cn, dk, dv, 64);
        for (int i = 0; i < cn; i++)
            memcpy(c->go + (size_t)i * Vv + (size_t)h * dv, oh + (size_t)i * dv, dv * sizeof(float));
    }
    g_free(qh), g_free(kh), g_free(vh), g_free(oh), g_free(gh), g_free(bh);
    /* the gated output */
    op->rmsnorm(be, c->go, c->go, L->gdn_o_norm, cn * H, dv, r->eps);
    op->silu_mul(be, c->go, c->gg, c->go, (size_t)cn * Vv);
    op->linear(be, c->proj, c->go, L->gdn_o, NULL, cn, Vv, E);
    op->residual(be, c->x, c->proj, NULL, cn, E);
}
