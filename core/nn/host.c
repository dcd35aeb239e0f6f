/* host.c - small helpers on host arrays every backend's caller uses: argmax, (log-)softmax of one
 * row, and the RoPE cos/sin tables (backend.h). */
#include <math.h>

#include "nn/backend.h"

int cl_argmax(const float *x, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (!isnan(x[i]) && (best < 0 || x[i] > x[best]))
            best = i;
    return n > 0 && best < 0 ? 0 : best;
}

/* max(x) and Σ exp(x − max), in double: the shared first half of (log-)softmax. */
static double max_and_sum_exp(const float *x, int n, float *max)
{
    float m = x[0];
    for (int i = 1; i < n; i++)
        m = MAX(m, x[i]);
    double s = 0;
    for (int i = 0; i < n; i++)
        s += exp((double)x[i] - m);
    *max = m;
    return s;
}

void cl_softmax(float *x, int n)
{
    if (n <= 0)
        return;
    float m;
    double s = max_and_sum_exp(x, n, &m);
    for (int i = 0; i < n; i++)
        x[i] = (float)(exp((double)x[i] - m) / s);
}

void cl_log_softmax(float *x, int n)
{
    if (n <= 0)
        return;
    float m;
    double s = max_and_sum_exp(x, n, &m);
    double lse = m + log(s);
    for (int i = 0; i < n; i++)
        x[i] = (float)((double)x[i] - lse);
}

void cl_rope_table_1d(float *cos_t, float *sin_t, int pos0, int n, int head_dim, double base)
{
    int half = head_dim / 2;
    double *freq = g_new(double, MAX(half, 1)); /* the same doubles as pow() per entry */
    for (int i = 0; i < half; i++)
        freq[i] = pow(base, -2.0 * i / head_dim);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < half; i++) {
            double a = (double)(pos0 + t) * freq[i];
            cos_t[(size_t)t * half + i] = (float)cos(a);
            sin_t[(size_t)t * half + i] = (float)sin(a);
        }
    g_free(freq);
}

void cl_rope_table_2d(float *cos_t, float *sin_t, int grid, int head_dim, double base)
{
    int half = head_dim / 2; /* entries per token */
    int q = head_dim / 2;    /* section size */
    for (int t = 0; t < grid * grid; t++) {
        int pos[2] = { t / grid, t % grid };
        for (int s = 0; s < 2; s++)
            for (int i = 0; i < q / 2; i++) {
                double a = (double)pos[s] * pow(base, -2.0 * i / q);
                cos_t[(size_t)t * half + s * (q / 2) + i] = (float)cos(a);
                sin_t[(size_t)t * half + s * (q / 2) + i] = (float)sin(a);
            }
    }
}
