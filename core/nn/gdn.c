/* gdn.c - Gated DeltaNet's recurrence, chunked form and causal convolution (gdn.h). */
#include "gdn.h"

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
    for (int c0 = 0; c0 < T; c0 += C) {
        const int n = MIN(C, T - c0);
        const float *qc = q + (size_t)c0 * dk, *kc = k + (size_t)c0 * dk;
        const float *vc = v + (size_t)c0 * dv;
        for (size_t i = 0; i < (size_t)dk * dv; i++)
            S0[i] = S[i];
        double acc = 0;
        for (int i = 0; i < n; i++)
            b[i] = (acc += g[c0 + i]);
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
                    s += Tm[(size_t)i * n + e] * beta[c0 + e] * exp(b[e]) *
                         kc[(size_t)e * dk + j];
                W[(size_t)i * dk + j] = s;
            }
            for (int j = 0; j < dv; j++) {
                double s = U[(size_t)i * dv + j];
                for (int e = 0; e < dk; e++)
                    s -= W[(size_t)i * dk + e] * S0[(size_t)e * dv + j];
                Vn[(size_t)i * dv + j] = s;
            }
        }
        /* O = diag(e^b) Q S0 + ((Q K^T) ⊙ D) Vn */
        for (int i = 0; i < n; i++)
            for (int j = 0; j < dv; j++) {
                double s = 0;
                for (int e = 0; e < dk; e++)
                    s += (double)qc[(size_t)i * dk + e] * S0[(size_t)e * dv + j];
                s *= exp(b[i]);
                for (int t = 0; t <= i; t++) {
                    double qk = 0;
                    for (int e = 0; e < dk; e++)
                        qk += (double)qc[(size_t)i * dk + e] * kc[(size_t)t * dk + e];
                    s += qk * exp(b[i] - b[t]) * Vn[(size_t)t * dv + j];
                }
                o[(size_t)(c0 + i) * dv + j] = (float)s;
            }
        /* S = e^(b_C) S0 + (diag(e^(b_C − b)) K)^T Vn */
        const double bC = b[n - 1];
        for (int e = 0; e < dk; e++)
            for (int j = 0; j < dv; j++) {
                double s = exp(bC) * S0[(size_t)e * dv + j];
                for (int t = 0; t < n; t++)
                    s += exp(bC - b[t]) * kc[(size_t)t * dk + e] * Vn[(size_t)t * dv + j];
                S[(size_t)e * dv + j] = (float)s;
            }
    }
    g_free(b), g_free(A), g_free(Tm), g_free(U), g_free(W), g_free(Vn), g_free(S0);
}

void cl_causal_conv1d(float *y, float *state, const float *x, const float *w, int T,
                      int channels, int K)
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
                   src >= 0 ? x + (size_t)src * channels
                            : state + (size_t)(K - 1 + src) * channels,
                   sizeof(float) * (size_t)channels);
        }
        memcpy(state, next, sizeof(float) * (size_t)(K - 1) * channels);
        g_free(next);
    }
}
