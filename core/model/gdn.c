/* gdn.c - Gated DeltaNet's recurrence, chunked form and causal convolution (gdn.h). */
#include "model/gdn.h"

#include <math.h>
#include <string.h>

void cl_gdn_recurrent(float *o, float *S, const float *q, const float *k, const float *v,
                      const float *g, const float *beta, int T, int dk, int dv)
{
    double *u = g_new(double, MAX(dv, 1));
    for (int t = 0; t < T; t++) {
        const float *kt = k + (size_t)t * dk, *qt = q + (size_t)t * dk, *vt = v + (size_t)t * dv;
        const float a = expf(g[t]);
        for (size_t i = 0; i < (size_t)dk * dv; i++)
            S[i] *= a;
        for (int j = 0; j < dv; j++) { /* u = beta (v − S^T k) */
            double s = 0;
            for (int i = 0; i < dk; i++)
                s += (double)S[(size_t)i * dv + j] * kt[i];
            u[j] = beta[t] * (vt[j] - s);
        }
        for (int i = 0; i < dk; i++)
            for (int j = 0; j < dv; j++)
                S[(size_t)i * dv + j] += (float)(kt[i] * u[j]);
        for (int j = 0; j < dv; j++) {
            double s = 0;
            for (int i = 0; i < dk; i++)
                s += (double)S[(size_t)i * dv + j] * qt[i];
            o[(size_t)t * dv + j] = (float)s;
        }
    }
    g_free(u);
}

void cl_gdn_chunked(float *o, float *S, const float *q, const float *k, const float *v,
                    const float *g, const float *beta, int T, int dk, int dv, int C)
{
    C = MAX(C, 1);
    const int cmax = MIN(C, MAX(T, 1));
    double *b = g_new(double, cmax), *A = g_new(double, (size_t)cmax * cmax);
    double *Tm = g_new(double, (size_t)cmax * cmax);
    double *U = g_new(double, (size_t)cmax * dv), *W = g_new(double, (size_t)cmax * dk);
    double *Vn = g_new(double, (size_t)cmax * dv), *S0 = g_new(double, (size_t)dk * dv);
    double *eb = g_new(double, cmax), *ec = g_new(double, cmax); /* e^b, e^(b_C − b) */
    for (int c0 = 0; c0 < T; c0 += C) {
        const int n = MIN(C, T - c0);
        const float *qc = q + (size_t)c0 * dk, *kc = k + (size_t)c0 * dk;
        const float *vc = v + (size_t)c0 * dv;
        for (size_t i = 0; i < (size_t)dk * dv; i++)
            S0[i] = S[i];
        double acc = 0;
        for (int i = 0; i < n; i++)
            b[i] = (acc += g[c0 + i]);
        for (int i = 0; i < n; i++)
            eb[i] = exp(b[i]), ec[i] = exp(b[n - 1] - b[i]);
        /* A (strictly lower) and T = (I + A)^-1 by forward substitution, row by row:
         * T_i = e_i − Σ_{j<i} A_ij T_j */
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                double a = 0;
                if (i > j) {
                    double d = 0;
                    for (int e = 0; e < dk; e++)
                        d += (double)kc[(size_t)i * dk + e] * kc[(size_t)j * dk + e];
                    a = beta[c0 + i] * d * exp(b[i] - b[j]);
                }
                A[(size_t)i * n + j] = a;
            }
        for (int i = 0; i < n; i++) {
            double *Ti = Tm + (size_t)i * n;
            for (int j = 0; j < n; j++)
                Ti[j] = i == j;
            for (int j = 0; j < i; j++) {
                const double a = A[(size_t)i * n + j];
                if (a == 0)
                    continue;
                const double *Tj = Tm + (size_t)j * n;
                for (int e = 0; e <= j; e++)
                    Ti[e] -= a * Tj[e];
            }
        }
        /* U = T diag(beta) V, W = T diag(beta e^b) K, Vn = U − W S0 */
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < dv; j++) {
                double s = 0;
                for (int e = 0; e <= i; e++)
                    s += Tm[(size_t)i * n + e] * beta[c0 + e] * vc[(size_t)e * dv + j];
                U[(size_t)i * dv + j] = s;
            }
            for (int j = 0; j < dk; j++) {
                double s = 0;
                for (int e = 0; e <= i; e++)
                    s += Tm[(size_t)i * n + e] * beta[c0 + e] * eb[e] * kc[(size_t)e * dk + j];
                W[(size_t)i * dk + j] = s;
            }
            for (int j = 0; j < dv; j++) {
                double s = U[(size_t)i * dv + j];
                for (int e = 0; e < dk; e++)
                    s -= W[(size_t)i * dk + e] * S0[(size_t)e * dv + j];
                Vn[(size_t)i * dv + j] = s;
            }
        }
        /* O = diag(e^b) Q S0 + ((Q K^T) ⊙ D) Vn; (Q K^T) ⊙ D once per chunk (into A, whose
         * use ended above) */
        for (int i = 0; i < n; i++)
            for (int t = 0; t <= i; t++) {
                double qk = 0;
                for (int e = 0; e < dk; e++)
                    qk += (double)qc[(size_t)i * dk + e] * kc[(size_t)t * dk + e];
                A[(size_t)i * n + t] = qk * exp(b[i] - b[t]);
            }
        for (int i = 0; i < n; i++)
            for (int j = 0; j < dv; j++) {
                double s = 0;
                for (int e = 0; e < dk; e++)
                    s += (double)qc[(size_t)i * dk + e] * S0[(size_t)e * dv + j];
                s *= exp(b[i]);
                for (int t = 0; t <= i; t++)
                    s += A[(size_t)i * n + t] * Vn[(size_t)t * dv + j];
                o[(size_t)(c0 + i) * dv + j] = (float)s;
            }
        /* S = e^(b_C) S0 + (diag(e^(b_C − b)) K)^T Vn */
        const double bC = b[n - 1];
        for (int e = 0; e < dk; e++)
            for (int j = 0; j < dv; j++) {
                double s = exp(bC) * S0[(size_t)e * dv + j];
                for (int t = 0; t < n; t++)
                    s += ec[t] * kc[(size_t)t * dk + e] * Vn[(size_t)t * dv + j];
                S[(size_t)e * dv + j] = (float)s;
            }
    }
    g_free(b), g_free(A), g_free(Tm), g_free(U), g_free(W), g_free(Vn), g_free(S0);
    g_free(eb), g_free(ec);
}

void cl_causal_conv1d(float *y, float *state, const float *x, const float *w, int T, int channels,
                      int K)
{
    for (int t = 0; t < T; t++)
        for (int ch = 0; ch < channels; ch++) {
            double s = 0;
            for (int i = 0; i < K; i++) {
                const int src = t - (K - 1) + i; /* < 0: from the state */
                const float xv = src >= 0 ? x[(size_t)src * channels + ch]
                                          : state[(size_t)(K - 1 + src) * channels + ch];
                s += (double)w[(size_t)ch * K + i] * xv;
            }
            y[(size_t)t * channels + ch] = (float)s;
        }
    /* the last K−1 inputs (from the state when T < K−1) */
    if (K > 1) {
        float *next = g_new(float, (size_t)(K - 1) * channels);
        for (int r = 0; r < K - 1; r++) {
            const int src = T - (K - 1) + r;
            memcpy(next + (size_t)r * channels,
                   src >= 0 ? x + (size_t)src * channels : state + (size_t)(K - 1 + src) * channels,
                   sizeof(float) * (size_t)channels);
        }
        memcpy(state, next, sizeof(float) * (size_t)(K - 1) * channels);
        g_free(next);
    }
}

/* One step of the recurrence in double from S_(t−1) = S (dk, dv), in place to S_t; r = v − S'^T k
 * (dv) and u = beta r are left for the backward. */
static void step_double(double *S, double *r, double *u, const float *kt, const float *vt, float gt,
                        float bt, int dk, int dv)
{
    const double a = exp((double)gt);
    for (size_t i = 0; i < (size_t)dk * dv; i++)
        S[i] *= a;
    for (int j = 0; j < dv; j++) {
        double s = 0;
        for (int i = 0; i < dk; i++)
            s += S[(size_t)i * dv + j] * kt[i];
        r[j] = vt[j] - s;
        u[j] = bt * r[j];
    }
    for (int i = 0; i < dk; i++)
        for (int j = 0; j < dv; j++)
            S[(size_t)i * dv + j] += kt[i] * u[j];
}

void cl_gdn_recurrent_backward(float *d_q, float *d_k, float *d_v, float *d_g, float *d_beta,
                               float *d_S0, const float *d_o, const float *d_S, const float *S0,
                               const float *q, const float *k, const float *v, const float *g,
                               const float *beta, int T, int dk, int dv)
{
    const size_t N = (size_t)dk * dv;
    /* checkpoints every C steps (C ~ √T): ck[c] is the state before step c·C */
    const int C = MAX(8, (int)ceil(sqrt((double)MAX(T, 1))));
    const int n_ck = (T + C - 1) / C;
    double *ck = g_new(double, MAX((size_t)n_ck * N, 1));
    double *st = g_new(double, (size_t)(C + 1) * N); /* a chunk's states, before each step */
    double *dS = g_new0(double, MAX(N, 1));
    double *r = g_new(double, MAX(dv, 1)), *u = g_new(double, MAX(dv, 1));
    double *du = g_new(double, MAX(dv, 1)), *dp = g_new(double, MAX(dv, 1));
    for (size_t i = 0; i < N; i++)
        st[i] = S0 ? S0[i] : 0.0;
    for (int t = 0; t < T; t++) {
        if (t % C == 0)
            memcpy(ck + (size_t)(t / C) * N, st, N * sizeof(double));
        step_double(st, r, u, k + (size_t)t * dk, v + (size_t)t * dv, g[t], beta[t], dk, dv);
    }
    if (d_S)
        for (size_t i = 0; i < N; i++)
            dS[i] = d_S[i];
    for (int c = n_ck - 1; c >= 0; c--) {
        const int t0 = c * C, n = MIN(C, T - t0);
        memcpy(st, ck + (size_t)c * N, N * sizeof(double));
        for (int j = 0; j < n; j++) {
            memcpy(st + (size_t)(j + 1) * N, st + (size_t)j * N, N * sizeof(double));
            step_double(st + (size_t)(j + 1) * N, r, u, k + (size_t)(t0 + j) * dk,
                        v + (size_t)(t0 + j) * dv, g[t0 + j], beta[t0 + j], dk, dv);
        }
        for (int j = n - 1; j >= 0; j--) {
            const int t = t0 + j;
            const double *Sprev = st + (size_t)j * N, *Snext = st + (size_t)(j + 1) * N;
            const float *qt = q + (size_t)t * dk, *kt = k + (size_t)t * dk;
            const float *vt = v + (size_t)t * dv, *dot = d_o + (size_t)t * dv;
            const double a = exp((double)g[t]), b = beta[t];
            /* o = S_t^T q: dq = S_t do, dS_t += q do^T */
            for (int i = 0; i < dk; i++) {
                double s = 0;
                for (int e = 0; e < dv; e++) {
                    s += Snext[(size_t)i * dv + e] * dot[e];
                    dS[(size_t)i * dv + e] += (double)qt[i] * dot[e];
                }
                if (d_q)
                    d_q[(size_t)t * dk + i] += (float)s;
            }
            /* r = v − S'^T k, u = beta r with S' = a S_(t−1) */
            for (int e = 0; e < dv; e++) {
                double s = 0;
                for (int i = 0; i < dk; i++)
                    s += Sprev[(size_t)i * dv + e] * kt[i];
                r[e] = vt[e] - a * s;
                u[e] = b * r[e];
            }
            /* S_t = S' + k u^T: dk += dS u, du = dS^T k */
            for (int e = 0; e < dv; e++)
                du[e] = 0;
            for (int i = 0; i < dk; i++) {
                double s = 0;
                for (int e = 0; e < dv; e++) {
                    s += dS[(size_t)i * dv + e] * u[e];
                    du[e] += dS[(size_t)i * dv + e] * kt[i];
                }
                if (d_k)
                    d_k[(size_t)t * dk + i] += (float)s;
            }
            /* u = beta (v − p): dbeta = du·r, dv = beta du, dp = −beta du */
            double db = 0;
            for (int e = 0; e < dv; e++) {
                db += du[e] * r[e];
                if (d_v)
                    d_v[(size_t)t * dv + e] += (float)(b * du[e]);
                dp[e] = -b * du[e];
            }
            if (d_beta)
                d_beta[t] += (float)db;
            /* p = S'^T k: dS' = dS + k dp^T, dk += S' dp; then S' = a S_(t−1):
             * dg = a <dS', S_(t−1)>, dS_(t−1) = a dS' */
            double dg = 0;
            for (int i = 0; i < dk; i++) {
                double s = 0;
                for (int e = 0; e < dv; e++) {
                    const size_t at = (size_t)i * dv + e;
                    s += Sprev[at] * dp[e];
                    dS[at] += (double)kt[i] * dp[e];
                    dg += dS[at] * Sprev[at];
                    dS[at] *= a;
                }
                if (d_k)
                    d_k[(size_t)t * dk + i] += (float)(a * s);
            }
            if (d_g)
                d_g[t] += (float)(a * dg);
        }
    }
    if (d_S0)
        for (size_t i = 0; i < N; i++)
            d_S0[i] += (float)dS[i];
    g_free(ck), g_free(st), g_free(dS), g_free(r), g_free(u), g_free(du), g_free(dp);
}

void cl_causal_conv1d_backward(float *d_x, float *d_w, float *d_state, const float *d_y,
                               const float *state, const float *x, const float *w, int T,
                               int channels, int K)
{
    for (int ch = 0; ch < channels; ch++)
        for (int i = 0; i < K; i++) {
            const double wi = w[(size_t)ch * K + i];
            double dw = 0;
            for (int t = 0; t < T; t++) {
                const int src = t - (K - 1) + i; /* < 0: from the state */
                const double dy = d_y[(size_t)t * channels + ch];
                if (src >= 0) {
                    dw += dy * x[(size_t)src * channels + ch];
                    if (d_x)
                        d_x[(size_t)src * channels + ch] += (float)(wi * dy);
                } else {
                    const size_t at = (size_t)(K - 1 + src) * channels + ch;
                    if (state)
                        dw += dy * state[at];
                    if (d_state)
                        d_state[at] += (float)(wi * dy);
                }
            }
            if (d_w)
                d_w[(size_t)ch * K + i] += (float)dw;
        }
}

void cl_gdn_gates(float *q, float *k, int ld, float *g, const float *a, float *beta, const float *b,
                  const float *A_log, const float *dt_bias, int n, int H, int dk)
{
    for (int i = 0; i < n; i++)
        for (int h = 0; h < H; h++) {
            float *qh = q + (size_t)i * ld + (size_t)h * dk;
            float *kh = k + (size_t)i * ld + (size_t)h * dk;
            double nq = 0, nk = 0;
            for (int e = 0; e < dk; e++)
                nq += (double)qh[e] * qh[e], nk += (double)kh[e] * kh[e];
            const float sq = (float)(1.0 / (sqrt(nq + 1e-12) * sqrt((double)dk)));
            const float sk = (float)(1.0 / sqrt(nk + 1e-12));
            for (int e = 0; e < dk; e++)
                qh[e] *= sq, kh[e] *= sk;
            const size_t at = (size_t)i * H + h;
            beta[at] = 1.0f / (1.0f + expf(-b[at]));
            const double z = (double)a[at] + dt_bias[h];
            const double sp = z > 20 ? z : log1p(exp(z));
            g[at] = (float)(-exp((double)A_log[h]) * sp);
        }
}
