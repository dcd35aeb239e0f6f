/* test-gdn.c - Gated DeltaNet for the hybrid decoder option (SEEDS-DECODER.md §3): the chunked
 * (WY) form equals the token-by-token recurrence, a sequence cut in two with the state carried
 * equals one pass, and the causal convolution carries its state the same way. */
#include <math.h>
#include <string.h>

#include <glib.h>

#include "gdn.h"

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
        cl_causal_conv1d(y2 + cuts[i] * CH, st2, x + cuts[i] * CH, w, cuts[i + 1] - cuts[i], CH,
                         K);
    g_assert_cmpmem(y1, sizeof y1, y2, sizeof y2);
    g_assert_cmpmem(st1, sizeof st1, st2, sizeof st2);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/gdn/chunked-equals-recurrent", test_chunked_equals_recurrent);
    g_test_add_func("/gdn/split-equals-one-pass", test_split_equals_one_pass);
    g_test_add_func("/gdn/conv-state", test_conv_state);
    return g_test_run();
}
