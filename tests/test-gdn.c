/* test-gdn.c - Gated DeltaNet for the hybrid decoder option (docs/MODEL.md §4.5): the chunked
 * (WY) form equals the token-by-token recurrence, a sequence cut in two with the state carried
 * equals one pass, the causal convolution carries its state the same way, and the backwards of
 * the delta rule and of the convolution match float64 finite differences for every input. */
#include <math.h>
#include <string.h>

#include <glib.h>

#include "model/gdn.h"

enum { T = 37, DK = 8, DV = 6 };

typedef struct {
    float q[T * DK], k[T * DK], v[T * DV], g[T], beta[T];
} Seq;

/* L2-normalised keys and queries (as GDN's), decays in (0.6, 1), beta in (0.1, 0.9) */
static void make_seq(Seq *s, guint32 seed)
{
    GRand *r = g_rand_new_with_seed(seed);
    for (int t = 0; t < T; t++) {
        double nq = 0, nk = 0;
        for (int i = 0; i < DK; i++) {
            s->q[t * DK + i] = (float)g_rand_double_range(r, -1, 1);
            s->k[t * DK + i] = (float)g_rand_double_range(r, -1, 1);
            nq += s->q[t * DK + i] * s->q[t * DK + i];
            nk += s->k[t * DK + i] * s->k[t * DK + i];
        }
        for (int i = 0; i < DK; i++) {
            s->q[t * DK + i] /= (float)sqrt(nq);
            s->k[t * DK + i] /= (float)sqrt(nk);
        }
        for (int j = 0; j < DV; j++)
            s->v[t * DV + j] = (float)g_rand_double_range(r, -1, 1);
        s->g[t] = (float)log(g_rand_double_range(r, 0.6, 1.0));
        s->beta[t] = (float)g_rand_double_range(r, 0.1, 0.9);
    }
    g_rand_free(r);
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = MAX(m, fabs((double)a[i] - b[i]));
    return m;
}

static void test_chunked_equals_recurrent(void)
{
    Seq s;
    make_seq(&s, 1);
    float S_init[DK * DV];
    GRand *r = g_rand_new_with_seed(2);
    for (int i = 0; i < DK * DV; i++)
        S_init[i] = (float)g_rand_double_range(r, -0.5, 0.5);
    g_rand_free(r);
    float o_rec[T * DV], S_rec[DK * DV];
    memcpy(S_rec, S_init, sizeof S_rec);
    cl_gdn_recurrent(o_rec, S_rec, s.q, s.k, s.v, s.g, s.beta, T, DK, DV);
    const int chunks[] = { 1, 4, 8, 13, 64 };
    for (gsize c = 0; c < G_N_ELEMENTS(chunks); c++) {
        float o[T * DV], S[DK * DV];
        memcpy(S, S_init, sizeof S);
        cl_gdn_chunked(o, S, s.q, s.k, s.v, s.g, s.beta, T, DK, DV, chunks[c]);
        double eo = max_diff(o, o_rec, T * DV), es = max_diff(S, S_rec, DK * DV);
        g_test_message("chunk %2d: max |do| %.2e, max |dS| %.2e", chunks[c], eo, es);
        g_assert_cmpfloat(eo, <, 2e-5);
        g_assert_cmpfloat(es, <, 2e-5);
    }
    /* and the paper's Eq. (2) taken literally (decay outside the error term) is another
     * function: the recurrence above is not it */
    float S2[DK * DV], o2[T * DV];
    memcpy(S2, S_init, sizeof S2);
    for (int t = 0; t < T; t++) {
        float Sk[DV] = { 0 };
        for (int j = 0; j < DV; j++)
            for (int i = 0; i < DK; i++)
                Sk[j] += S2[i * DV + j] * s.k[t * DK + i];
        for (int i = 0; i < DK; i++)
            for (int j = 0; j < DV; j++)
                S2[i * DV + j] = expf(s.g[t]) * S2[i * DV + j] +
                                 s.beta[t] * s.k[t * DK + i] * (s.v[t * DV + j] - Sk[j]);
        for (int j = 0; j < DV; j++) {
            o2[t * DV + j] = 0;
            for (int i = 0; i < DK; i++)
                o2[t * DV + j] += S2[i * DV + j] * s.q[t * DK + i];
        }
    }
    g_test_message("the paper's Eq. (2) literally: max |do| %.3f", max_diff(o2, o_rec, T * DV));
    g_assert_cmpfloat(max_diff(o2, o_rec, T * DV), >, 1e-3);
}

/* a prefill cut in two (not at a chunk boundary), the state carried, equals one pass */
static void test_split_equals_one_pass(void)
{
    Seq s;
    make_seq(&s, 3);
    float o1[T * DV], S1[DK * DV] = { 0 };
    cl_gdn_chunked(o1, S1, s.q, s.k, s.v, s.g, s.beta, T, DK, DV, 8);
    for (int cut = 1; cut < T; cut += 6) {
        float o2[T * DV], S2[DK * DV] = { 0 };
        cl_gdn_chunked(o2, S2, s.q, s.k, s.v, s.g, s.beta, cut, DK, DV, 8);
        cl_gdn_recurrent(o2 + cut * DV, S2, s.q + cut * DK, s.k + cut * DK, s.v + cut * DV,
                         s.g + cut, s.beta + cut, T - cut, DK, DV);
        g_assert_cmpfloat(max_diff(o2, o1, T * DV), <, 2e-5);
        g_assert_cmpfloat(max_diff(S2, S1, DK * DV), <, 2e-5);
    }
}

static void test_conv_state(void)
{
    enum { CH = 5, K = 4 };
    float x[T * CH], w[CH * K], y1[T * CH], y2[T * CH];
    GRand *r = g_rand_new_with_seed(4);
    for (int i = 0; i < T * CH; i++)
        x[i] = (float)g_rand_double_range(r, -1, 1);
    for (int i = 0; i < CH * K; i++)
        w[i] = (float)g_rand_double_range(r, -1, 1);
    g_rand_free(r);
    float st1[(K - 1) * CH] = { 0 };
    cl_causal_conv1d(y1, st1, x, w, T, CH, K);
    /* against the definition with zeros before the start */
    for (int t = 0; t < T; t++)
        for (int c = 0; c < CH; c++) {
            double s = 0;
            for (int i = 0; i < K; i++) {
                int src = t - (K - 1) + i;
                s += src >= 0 ? (double)w[c * K + i] * x[src * CH + c] : 0;
            }
            g_assert_cmpfloat(fabs(s - y1[t * CH + c]), <, 1e-6);
        }
    /* in pieces (one of them shorter than the kernel), the state carried */
    const int cuts[] = { 0, 2, 3, 11, T };
    float st2[(K - 1) * CH] = { 0 };
    for (gsize i = 0; i + 1 < G_N_ELEMENTS(cuts); i++)
        cl_causal_conv1d(y2 + cuts[i] * CH, st2, x + cuts[i] * CH, w, cuts[i + 1] - cuts[i], CH, K);
    g_assert_cmpmem(y1, sizeof y1, y2, sizeof y2);
    g_assert_cmpmem(st1, sizeof st1, st2, sizeof st2);
}

/* ---- gradients against float64 finite differences ------------------------------------- */

/* Finite differences in double of a double forward at the float inputs: the step (1e-5) keeps
 * the central difference's truncation (~eps² |f'''| ~ 1e-10) and the loss's rounding
 * (~1e-16 |L| / eps ~ 1e-10) far below the analytic gradient's float rounding (6e-8 relative),
 * so per element |fd − an| <= FD_ATOL + FD_RTOL |fd| fails on any real mistake. */
#define FD_H 1e-5
#define FD_ATOL 1e-8
#define FD_RTOL 1e-5

typedef double (*LossFn)(const double *const *in, const void *ctx);

/* Checks grad (n) against finite differences of loss over input slot `which` of in (n doubles);
 * prints the norm-wise and the largest relative error. */
static void check_fd(const char *what, const char *name, LossFn loss, double **in, int which,
                     const float *grad, size_t n, const void *ctx)
{
    double num = 0, den = 0, worst = 0, max_rel = 0, big = 0;
    double *fds = g_new(double, n);
    for (size_t i = 0; i < n; i++) {
        const double keep = in[which][i];
        in[which][i] = keep + FD_H;
        const double lp = loss((const double *const *)in, ctx);
        in[which][i] = keep - FD_H;
        const double lm = loss((const double *const *)in, ctx);
        in[which][i] = keep;
        fds[i] = (lp - lm) / (2 * FD_H);
        big = MAX(big, fabs(fds[i]));
    }
    for (size_t i = 0; i < n; i++) {
        const double fd = fds[i], an = grad[i];
        num += (fd - an) * (fd - an), den += fd * fd;
        worst = MAX(worst, fabs(fd - an) / (FD_ATOL + FD_RTOL * fabs(fd)));
        if (fabs(fd) >= 1e-3 * big) /* the relative error of the entries that are not ~0 */
            max_rel = MAX(max_rel, fabs(fd - an) / fabs(fd));
    }
    g_free(fds);
    g_test_message("%-10s d%-5s %4zu values, |g| %.3g: norm-wise rel err %.2e, max rel err "
                   "%.2e, worst %.3f of the tolerance",
                   what, name, n, sqrt(den), sqrt(num / MAX(den, 1e-300)), max_rel, worst);
    g_assert_cmpfloat(den, >, 1e-12); /* an all-zero gradient proves nothing */
    g_assert_cmpfloat(worst, <=, 1.0);
}

/* the delta rule in double: in = { q, k, v, g, beta, S0 }, L = Σ wo ⊙ o + Σ wS ⊙ S_T */
typedef struct {
    int T;
    const double *wo, *wS; /* wS NULL: the final state does not enter the loss */
} RecCtx;

static double rec_loss(const double *const *in, const void *p)
{
    const RecCtx *c = p;
    const double *q = in[0], *k = in[1], *v = in[2], *g = in[3], *beta = in[4];
    double S[DK * DV], u[DV], L = 0;
    for (int i = 0; i < DK * DV; i++)
        S[i] = in[5][i];
    for (int t = 0; t < c->T; t++) {
        const double a = exp(g[t]);
        for (int i = 0; i < DK * DV; i++)
            S[i] *= a;
        for (int j = 0; j < DV; j++) {
            double s = 0;
            for (int i = 0; i < DK; i++)
                s += S[i * DV + j] * k[t * DK + i];
            u[j] = beta[t] * (v[t * DV + j] - s);
        }
        for (int i = 0; i < DK; i++)
            for (int j = 0; j < DV; j++)
                S[i * DV + j] += k[t * DK + i] * u[j];
        for (int j = 0; j < DV; j++) {
            double s = 0;
            for (int i = 0; i < DK; i++)
                s += S[i * DV + j] * q[t * DK + i];
            L += c->wo[t * DV + j] * s;
        }
    }
    if (c->wS)
        for (int i = 0; i < DK * DV; i++)
            L += c->wS[i] * S[i];
    return L;
}

static double *to_double(const float *x, size_t n)
{
    double *d = g_new(double, n);
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

/* every input's gradient, with a given initial state and a final-state gradient (with_state),
 * or from zeros with the outputs alone (a training sequence's case); sequences shorter than
 * one checkpoint interval, one, and several with a shorter last */
static void check_rec_backward(int T_run, gboolean with_state, guint32 seed)
{
    Seq s;
    make_seq(&s, seed);
    GRand *r = g_rand_new_with_seed(seed + 100);
    /* unnormalised queries and keys too (the rule does not need unit vectors) */
    for (int i = 0; i < T * DK; i++)
        s.q[i] *= (float)g_rand_double_range(r, 0.5, 1.5);
    float S0[DK * DV] = { 0 }, wo[T * DV], wS[DK * DV];
    for (int i = 0; i < DK * DV; i++) {
        if (with_state)
            S0[i] = (float)g_rand_double_range(r, -0.5, 0.5);
        wS[i] = (float)g_rand_double_range(r, -1, 1);
    }
    for (int i = 0; i < T * DV; i++)
        wo[i] = (float)g_rand_double_range(r, -1, 1);
    g_rand_free(r);

    float dq[T * DK] = { 0 }, dk[T * DK] = { 0 }, dv[T * DV] = { 0 }, dg[T] = { 0 };
    float dbeta[T] = { 0 }, dS0[DK * DV] = { 0 };
    cl_gdn_recurrent_backward(dq, dk, dv, dg, dbeta, dS0, wo, with_state ? wS : NULL,
                              with_state ? S0 : NULL, s.q, s.k, s.v, s.g, s.beta, T_run, DK, DV);
    double *in[6] = { to_double(s.q, T * DK), to_double(s.k, T * DK), to_double(s.v, T * DV),
                      to_double(s.g, T),      to_double(s.beta, T),   to_double(S0, DK * DV) };
    g_autofree double *wod = to_double(wo, T * DV), *wSd = to_double(wS, DK * DV);
    RecCtx c = { T_run, wod, with_state ? wSd : NULL };
    g_autofree char *what = g_strdup_printf("T %d%s", T_run, with_state ? " S0" : "");
    check_fd(what, "q", rec_loss, in, 0, dq, (size_t)T_run * DK, &c);
    check_fd(what, "k", rec_loss, in, 1, dk, (size_t)T_run * DK, &c);
    check_fd(what, "v", rec_loss, in, 2, dv, (size_t)T_run * DV, &c);
    check_fd(what, "g", rec_loss, in, 3, dg, (size_t)T_run, &c);
    check_fd(what, "beta", rec_loss, in, 4, dbeta, (size_t)T_run, &c);
    if (with_state)
        check_fd(what, "S0", rec_loss, in, 5, dS0, DK * DV, &c);
    for (int i = 0; i < 6; i++)
        g_free(in[i]);

    /* the gradients accumulate: a second call doubles them */
    float dq2[T * DK];
    memcpy(dq2, dq, sizeof dq);
    cl_gdn_recurrent_backward(dq2, NULL, NULL, NULL, NULL, NULL, wo, with_state ? wS : NULL,
                              with_state ? S0 : NULL, s.q, s.k, s.v, s.g, s.beta, T_run, DK, DV);
    for (int i = 0; i < T_run * DK; i++)
        g_assert_cmpfloat(fabs(dq2[i] - 2 * dq[i]), <=, 1e-6 * (1 + fabs(dq[i])));
}

static void test_recurrent_backward(void)
{
    check_rec_backward(T, TRUE, 7);
    check_rec_backward(T, FALSE, 8);
    check_rec_backward(5, TRUE, 9);    /* one checkpoint interval, partly filled */
    check_rec_backward(16, FALSE, 10); /* two full ones */
}

/* the causal convolution in double: in = { x, w, state } */
enum { CCH = 5, CK = 4, CT = 11 };

static double conv_loss(const double *const *in, const void *p)
{
    const double *wy = p;
    double L = 0;
    for (int t = 0; t < CT; t++)
        for (int c = 0; c < CCH; c++) {
            double s = 0;
            for (int i = 0; i < CK; i++) {
                const int src = t - (CK - 1) + i;
                s += in[1][c * CK + i] *
                     (src >= 0 ? in[0][src * CCH + c] : in[2][(CK - 1 + src) * CCH + c]);
            }
            L += wy[t * CCH + c] * s;
        }
    return L;
}

static void test_conv_backward(void)
{
    GRand *r = g_rand_new_with_seed(12);
    float x[CT * CCH], w[CCH * CK], st[(CK - 1) * CCH], wy[CT * CCH];
    for (int i = 0; i < CT * CCH; i++)
        x[i] = (float)g_rand_double_range(r, -1, 1), wy[i] = (float)g_rand_double_range(r, -1, 1);
    for (int i = 0; i < CCH * CK; i++)
        w[i] = (float)g_rand_double_range(r, -1, 1);
    for (int i = 0; i < (CK - 1) * CCH; i++)
        st[i] = (float)g_rand_double_range(r, -1, 1);
    g_rand_free(r);
    g_autofree double *wyd = to_double(wy, CT * CCH);
    for (int with_state = 0; with_state < 2; with_state++) {
        float dx[CT * CCH] = { 0 }, dw[CCH * CK] = { 0 }, dst[(CK - 1) * CCH] = { 0 };
        float zeros[(CK - 1) * CCH] = { 0 };
        cl_causal_conv1d_backward(dx, dw, dst, wy, with_state ? st : NULL, x, w, CT, CCH, CK);
        double *in[3] = { to_double(x, CT * CCH), to_double(w, CCH * CK),
                          to_double(with_state ? st : zeros, (CK - 1) * CCH) };
        const char *what = with_state ? "conv S0" : "conv";
        check_fd(what, "x", conv_loss, in, 0, dx, CT * CCH, wyd);
        check_fd(what, "w", conv_loss, in, 1, dw, CCH * CK, wyd);
        check_fd(what, "state", conv_loss, in, 2, dst, (CK - 1) * CCH, wyd);
        for (int i = 0; i < 3; i++)
            g_free(in[i]);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/gdn/chunked-equals-recurrent", test_chunked_equals_recurrent);
    g_test_add_func("/gdn/split-equals-one-pass", test_split_equals_one_pass);
    g_test_add_func("/gdn/conv-state", test_conv_state);
    g_test_add_func("/gdn/recurrent-backward", test_recurrent_backward);
    g_test_add_func("/gdn/conv-backward", test_conv_backward);
    return g_test_run();
}
