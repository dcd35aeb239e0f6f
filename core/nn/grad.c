/* grad.c - CPU f32 backward passes of the forward's ops (grad.h): products through OpenBLAS,
 * row reductions in double, every gradient accumulated. */
#include "nn/grad.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "nn/backend.h"

void cl_grad_linear(float *dx, float *dw, float *db, const float *dy, const float *x,
                    const float *w, int m, int k, int n)
{
    if (m <= 0 || k <= 0 || n <= 0)
        return;
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, k, n, 1.0f, dy, n, w, k, 1.0f, dx,
                    k);
    if (dw)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, k, m, 1.0f, dy, n, x, k, 1.0f, dw,
                    k);
    if (db) {
        double *acc = g_new0(double, n);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                acc[j] += dy[(size_t)i * n + j];
        for (int j = 0; j < n; j++)
            db[j] += (float)acc[j];
        g_free(acc);
    }
}

void cl_grad_layernorm(float *dx, float *dw, float *db, const float *dy, const float *x,
                       const float *w, int m, int n, float eps)
{
    double *dwa = dw ? g_new0(double, n) : NULL, *dba = db ? g_new0(double, n) : NULL;
    for (int r = 0; r < m; r++) {
        const float *xr = x + (size_t)r * n, *gr = dy + (size_t)r * n;
        double mean = 0, var = 0;
        for (int i = 0; i < n; i++)
            mean += xr[i];
        mean /= n;
        for (int i = 0; i < n; i++)
            var += (xr[i] - mean) * (xr[i] - mean);
        var /= n;
        double rstd = 1.0 / sqrt(var + eps);
        double s1 = 0, s2 = 0; /* Σ dxhat, Σ dxhat·xhat */
        for (int i = 0; i < n; i++) {
            double xh = (xr[i] - mean) * rstd, g = (double)gr[i] * w[i];
            s1 += g;
            s2 += g * xh;
            if (dwa)
                dwa[i] += (double)gr[i] * xh;
            if (dba)
                dba[i] += gr[i];
        }
        if (dx) {
            float *dr = dx + (size_t)r * n;
            for (int i = 0; i < n; i++) {
                double xh = (xr[i] - mean) * rstd, g = (double)gr[i] * w[i];
                dr[i] += (float)(rstd * (g - s1 / n - xh * s2 / n));
            }
        }
    }
    for (int i = 0; i < n; i++) {
        if (dw)
            dw[i] += (float)dwa[i];
        if (db)
            db[i] += (float)dba[i];
    }
    g_free(dwa);
    g_free(dba);
}

/* Σ a[i]·b[i]·(c ? c[i] : 1) over n floats: RMS_LANES float partial sums in fixed blocks (the
 * -O2 vectoriser takes the loop; the order is the same on every machine), then in double. */
#define RMS_LANES 16
static double dot3(const float *a, const float *b, const float *c, int n)
{
    float acc[RMS_LANES] = { 0 };
    int i = 0;
    if (c)
        for (; i + RMS_LANES <= n; i += RMS_LANES)
            for (int j = 0; j < RMS_LANES; j++)
                acc[j] += a[i + j] * b[i + j] * c[i + j];
    else
        for (; i + RMS_LANES <= n; i += RMS_LANES)
            for (int j = 0; j < RMS_LANES; j++)
                acc[j] += a[i + j] * b[i + j];
    double s = 0;
    for (int j = 0; j < RMS_LANES; j++)
        s += acc[j];
    for (; i < n; i++)
        s += (double)a[i] * b[i] * (c ? c[i] : 1.0f);
    return s;
}

void cl_grad_rmsnorm(float *dx, float *dw, const float *dy, const float *x, const float *w, int m,
                     int n, float eps)
{
    /* dw's column sums: float over blocks of rows, then into double */
    enum { ROW_BLOCK = 32 };
    double *dwa = dw ? g_new0(double, n) : NULL;
    float *dwb = dw ? g_new0(float, n) : NULL;
    for (int r = 0; r < m; r++) {
        const float *xr = x + (size_t)r * n, *gr = dy + (size_t)r * n;
        const double rs = 1.0 / sqrt(dot3(xr, xr, NULL, n) / n + eps);
        const double s = dot3(gr, w, xr, n); /* Σ dxhat·x */
        if (dwb) {
            const float rsf = (float)rs;
            for (int i = 0; i < n; i++)
                dwb[i] += gr[i] * xr[i] * rsf;
            if ((r + 1) % ROW_BLOCK == 0 || r + 1 == m)
                for (int i = 0; i < n; i++)
                    dwa[i] += dwb[i], dwb[i] = 0;
        }
        if (dx) {
            float *dr = dx + (size_t)r * n;
            const float a = (float)rs, b = (float)(rs * rs * rs * s / n);
            for (int i = 0; i < n; i++)
                dr[i] += a * (gr[i] * w[i]) - b * xr[i];
        }
    }
    if (dw)
        for (int i = 0; i < n; i++)
            dw[i] += (float)dwa[i];
    g_free(dwa);
    g_free(dwb);
}

/* dst[j] += Σ_rows a[i, j]·(b ? b[i, j] : 1), in double */
static void col_sums_add(float *dst, const float *a, const float *b, int m, int n)
{
    if (!dst)
        return;
    double *acc = g_new0(double, n);
    for (int i = 0; i < m; i++) {
        const float *ar = a + (size_t)i * n, *br = b ? b + (size_t)i * n : NULL;
        for (int j = 0; j < n; j++)
            acc[j] += br ? (double)ar[j] * br[j] : ar[j];
    }
    for (int j = 0; j < n; j++)
        dst[j] += (float)acc[j];
    g_free(acc);
}

void cl_grad_modulate(float *dx, float *dscale, float *dshift, const float *dy, const float *x,
                      const float *scale, int m, int n)
{
    if (dx)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                dx[(size_t)i * n + j] += dy[(size_t)i * n + j] * (1.0f + scale[j]);
    col_sums_add(dscale, dy, x, m, n);
    col_sums_add(dshift, dy, NULL, m, n);
}

void cl_grad_gelu(float *dx, const float *dy, const float *x, size_t count)
{
    /* the CPU backend's vectorised erf/exp: the scalar erff/expf loop was 8 % of a step */
    cl_gelu_grad_accumulate(dx, dy, x, count);
}

static inline float sigmoidf(float v)
{
    return 1.0f / (1.0f + expf(-v));
}

static inline float dsilu(float v)
{
    float s = sigmoidf(v);
    return s * (1.0f + v * (1.0f - s));
}

void cl_grad_silu(float *dx, const float *dy, const float *x, size_t count)
{
    for (size_t i = 0; i < count; i++)
        dx[i] += dy[i] * dsilu(x[i]);
}

void cl_grad_silu_mul(float *dgate, float *dup, const float *dy, const float *gate, const float *up,
                      size_t count)
{
    cl_silu_mul_grad_accumulate(dgate, dup, dy, gate, up, count);
}

void cl_grad_residual(float *da, float *dgate, const float *dy, const float *a, const float *gate,
                      int m, int n)
{
    if (da)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                da[(size_t)i * n + j] += (gate ? 1.0f + gate[j] : 1.0f) * dy[(size_t)i * n + j];
    if (gate)
        col_sums_add(dgate, dy, a, m, n);
}

void cl_grad_scale_cols(float *da, float *dgate, const float *dy, const float *a, const float *gate,
                        int m, int n)
{
    if (da)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                da[(size_t)i * n + j] += gate[j] * dy[(size_t)i * n + j];
    col_sums_add(dgate, dy, a, m, n);
}

void cl_grad_rope(float *dx, const float *cos_t, const float *sin_t, int n_tok, int ld, int n_head,
                  int head_dim, int n_sections)
{
    const int half = head_dim / 2, q = head_dim / n_sections, h2 = q / 2;
    for (int t = 0; t < n_tok; t++) {
        const float *ct = cos_t + (size_t)t * half, *st = sin_t + (size_t)t * half;
        for (int h = 0; h < n_head; h++) {
            float *x = dx + (size_t)t * ld + (size_t)h * head_dim;
            for (int s = 0; s < n_sections; s++) {
                float *xs = x + s * q;
                const float *cs = ct + s * h2, *ss = st + s * h2;
                for (int i = 0; i < h2; i++) {
                    float a = xs[i], b = xs[i + h2];
                    xs[i] = a * cs[i] + b * ss[i];
                    xs[i + h2] = b * cs[i] - a * ss[i];
                }
            }
        }
    }
}

void cl_grad_softmax(float *dx, const float *dy, const float *y, int m, int n, int ld)
{
    for (int i = 0; i < m; i++) {
        const float *yr = y + (size_t)i * ld, *gr = dy + (size_t)i * ld;
        double s = 0;
        for (int j = 0; j < n; j++)
            s += (double)gr[j] * yr[j];
        float *dr = dx + (size_t)i * ld;
        for (int j = 0; j < n; j++)
            dr[j] += (float)(yr[j] * (gr[j] - s));
    }
}

/* Rows per block of the causal backward: a block of query rows only needs the keys its last row
 * sees, so the products skip most of the masked upper triangle (about half the work on a long
 * decoder sequence) while each stays big enough for OpenBLAS's kernels. */
#define GRAD_ATTN_ROWS 64

void cl_train_attention(float *out, float *probs, const float *q, const float *k, const float *v,
                        int n_q, int n_kv, int ldq, int ldk, int ldv, int ldo, int n_head,
                        int n_kv_head, int head_dim, float scale, int causal)
{
    if (n_q <= 0 || n_kv <= 0)
        return;
    const int group = n_head / n_kv_head, hd = head_dim;
    const int rows = causal < 0 ? n_q : MIN(n_q, GRAD_ATTN_ROWS);
    for (int h = 0; h < n_head; h++) {
        const int g = h / group;
        const float *qh = q + (size_t)h * hd, *kg = k + (size_t)g * hd, *vg = v + (size_t)g * hd;
        for (int i0 = 0; i0 < n_q; i0 += rows) {
            const int r = MIN(rows, n_q - i0);
            const int c = causal < 0 ? n_kv : MIN(n_kv, causal + i0 + r);
            float *pb = probs + ((size_t)h * n_q + i0) * n_kv,
                  *ob = out + (size_t)i0 * ldo + (size_t)h * hd;
            if (c <= 0) {
                for (int i = 0; i < r; i++)
                    memset(ob + (size_t)i * ldo, 0, (size_t)hd * sizeof(float));
                continue;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, c, hd, scale,
                        qh + (size_t)i0 * ldq, ldq, kg, ldk, 0.0f, pb, n_kv);
            cl_softmax_rows(pb, r, c, n_kv, causal, i0);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, hd, c, 1.0f, pb, n_kv, vg,
                        ldv, 0.0f, ob, ldo);
        }
    }
}

static void grad_attention(float *dq, float *dk, float *dv, const float *dout, const float *q,
                           const float *k, const float *v, const float *probs, int n_q, int n_kv,
                           int ldq, int ldk, int ldv, int ldo, int n_head, int n_kv_head,
                           int head_dim, float scale, int causal)
{
    if (n_q <= 0 || n_kv <= 0)
        return;
    const int group = n_head / n_kv_head, hd = head_dim;
    const int rows = causal < 0 ? n_q : MIN(n_q, GRAD_ATTN_ROWS);
    float *p = probs ? NULL : g_new(float, (size_t)rows * n_kv);
    float *dp = g_new(float, (size_t)rows * n_kv);
    for (int h = 0; h < n_head; h++) {
        const int g = h / group;
        const float *qh = q + (size_t)h * hd, *kg = k + (size_t)g * hd, *vg = v + (size_t)g * hd;
        const float *doh = dout + (size_t)h * hd;
        for (int i0 = 0; i0 < n_q; i0 += rows) {
            const int r = MIN(rows, n_q - i0);
            /* the keys any row of the block sees: [0, c) */
            const int c = causal < 0 ? n_kv : MIN(n_kv, causal + i0 + r);
            if (c <= 0)
                continue;
            const float *qb = qh + (size_t)i0 * ldq, *dob = doh + (size_t)i0 * ldo;
            /* the block's probabilities: kept by the forward, or recomputed here */
            float *pb = p;
            int ldp = c;
            if (probs) {
                pb = (float *)probs + ((size_t)h * n_q + i0) * n_kv;
                ldp = n_kv;
            } else {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, c, hd, scale, qb, ldq, kg,
                            ldk, 0.0f, p, c);
                cl_softmax_rows(p, r, c, c, causal, i0);
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, c, hd, 1.0f, dob, ldo, vg, ldv,
                        0.0f, dp, c);
            for (int i = 0; i < r; i++) {
                const float *pr = pb + (size_t)i * ldp;
                float *dr = dp + (size_t)i * c;
                int n_vis = causal < 0 ? c : MIN(c, causal + i0 + i + 1);
                /* dp becomes dS = P ⊙ (dP − Σ P dP); the masked keys get nothing */
                const float fdot = (float)dot3(pr, dr, NULL, n_vis);
                for (int j = 0; j < n_vis; j++)
                    dr[j] = pr[j] * (dr[j] - fdot);
                for (int j = n_vis; j < c; j++)
                    dr[j] = 0.0f;
            }
            if (dq)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, hd, c, scale, dp, c, kg,
                            ldk, 1.0f, dq + (size_t)i0 * ldq + (size_t)h * hd, ldq);
            if (dk)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, hd, r, scale, dp, c, qb,
                            ldq, 1.0f, dk + (size_t)g * hd, ldk);
            if (dv)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, hd, r, 1.0f, pb, ldp, dob,
                            ldo, 1.0f, dv + (size_t)g * hd, ldv);
        }
    }
    g_free(p);
    g_free(dp);
}

void cl_grad_attention(float *dq, float *dk, float *dv, const float *dout, const float *q,
                       const float *k, const float *v, int n_q, int n_kv, int ldq, int ldk, int ldv,
                       int ldo, int n_head, int n_kv_head, int head_dim, float scale, int causal)
{
    grad_attention(dq, dk, dv, dout, q, k, v, NULL, n_q, n_kv, ldq, ldk, ldv, ldo, n_head,
                   n_kv_head, head_dim, scale, causal);
}

void cl_grad_attention_probs(float *dq, float *dk, float *dv, const float *dout, const float *q,
                             const float *k, const float *v, const float *probs, int n_q, int n_kv,
                             int ldq, int ldk, int ldv, int ldo, int n_head, int n_kv_head,
                             int head_dim, float scale, int causal)
{
    grad_attention(dq, dk, dv, dout, q, k, v, probs, n_q, n_kv, ldq, ldk, ldv, ldo, n_head,
                   n_kv_head, head_dim, scale, causal);
}

void cl_grad_row_norms(float *da, const float *dout, const float *a, const float *out, int m, int n)
{
    for (int i = 0; i < m; i++) {
        if (out[i] == 0.0f)
            continue;
        float f = dout[i] / out[i];
        for (int j = 0; j < n; j++)
            da[(size_t)i * n + j] += f * a[(size_t)i * n + j];
    }
}

void cl_grad_embed(float *dtable, const float *dy, const gint32 *ids, int n, int dim)
{
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0)
            continue;
        float *row = dtable + (size_t)ids[i] * dim;
        for (int j = 0; j < dim; j++)
            row[j] += dy[(size_t)i * dim + j];
    }
}

void cl_grad_patch_unfold(float *dpixels, const float *dpatches, int channels, int size, int patch)
{
    const int C = channels, P = patch, S = size, G = size / patch;
    for (int r = 0; r < G; r++)
        for (int cc = 0; cc < G; cc++) {
            const float *src = dpatches + ((size_t)r * G + cc) * C * P * P;
            for (int c = 0; c < C; c++)
                for (int py = 0; py < P; py++) {
                    float *d = dpixels + ((size_t)c * S + (size_t)r * P + py) * S + (size_t)cc * P;
                    const float *s = src + ((size_t)c * P + py) * P;
                    for (int px = 0; px < P; px++)
                        d[px] += s[px];
                }
        }
}

/* token index of the q-th (0..3) member of merged token (i, j) */
static size_t merge_src(int grid, int i, int j, int q)
{
    return (size_t)(2 * i + q / 2) * grid + 2 * j + q % 2;
}

void cl_merger_unfold(float *cat, const float *x, int grid, int dim)
{
    const int g2 = grid / 2;
    for (int i = 0; i < g2; i++)
        for (int j = 0; j < g2; j++)
            for (int q = 0; q < 4; q++)
                memcpy(cat + (((size_t)i * g2 + j) * 4 + q) * dim,
                       x + merge_src(grid, i, j, q) * dim, (size_t)dim * sizeof(float));
}

void cl_grad_merger_unfold(float *dx, const float *dcat, int grid, int dim)
{
    const int g2 = grid / 2;
    for (int i = 0; i < g2; i++)
        for (int j = 0; j < g2; j++)
            for (int q = 0; q < 4; q++) {
                float *d = dx + merge_src(grid, i, j, q) * dim;
                const float *s = dcat + (((size_t)i * g2 + j) * 4 + q) * dim;
                for (int c = 0; c < dim; c++)
                    d[c] += s[c];
            }
}

double cl_cross_entropy(float *dlogits, const float *logits, const gint32 *targets,
                        const guint8 *mask, int n, int vocab, float scale, int *n_supervised)
{
    int ns = 0;
    for (int t = 0; t < n; t++)
        ns += !mask || mask[t];
    if (n_supervised)
        *n_supervised = ns;
    if (dlogits)
        memset(dlogits, 0, (size_t)n * vocab * sizeof(float));
    if (ns == 0)
        return 0.0;
    double total = 0;
    for (int t = 0; t < n; t++) {
        if (mask && !mask[t])
            continue;
        const float *z = logits + (size_t)t * vocab;
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < vocab; j++)
            mx = MAX(mx, z[j]);
        /* one pass of single-precision exponentials (kept in dlogits when asked for), summed in
         * double: the loss is exact to float rounding, and the vocabulary-wide loop is the
         * costliest elementwise work of a step */
        const float fmx = (float)mx;
        float *d = dlogits ? dlogits + (size_t)t * vocab : NULL;
        for (int j = 0; j < vocab; j++) {
            float e = expf(z[j] - fmx);
            sum += e;
            if (d)
                d[j] = e;
        }
        double lse = mx + log(sum);
        total += lse - z[targets[t]];
        if (d) {
            const float f = (float)((double)scale / ns / sum);
            for (int j = 0; j < vocab; j++)
                d[j] *= f;
            d[targets[t]] -= (float)((double)scale / ns);
        }
    }
    return total / ns;
}

double cl_bce_logits(float *dz, const float *z, const float *y, size_t count, float scale)
{
    double loss = 0;
    for (size_t i = 0; i < count; i++) {
        const double zi = z[i], yi = y[i];
        /* log(1 + e^z) − z·y without overflow */
        loss += MAX(zi, 0) - zi * yi + log1p(exp(-fabs(zi)));
        if (dz)
            dz[i] = (float)((double)scale * (1.0 / (1.0 + exp(-zi)) - yi));
    }
    return loss;
}

double cl_sumsq(const float *x, size_t begin, size_t end)
{
    /* four partial sums: independent chains vectorise, and double keeps 1e9 terms exact enough */
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = begin;
    for (; i + 4 <= end; i += 4) {
        s0 += (double)x[i] * x[i];
        s1 += (double)x[i + 1] * x[i + 1];
        s2 += (double)x[i + 2] * x[i + 2];
        s3 += (double)x[i + 3] * x[i + 3];
    }
    for (; i < end; i++)
        s0 += (double)x[i] * x[i];
    return (s0 + s1) + (s2 + s3);
}

/* torch's per-element AdamW over [begin, end) on gradients g · gscale; the float scalars are
 * computed once in double and rounded, as torch's Python-side scalars are when they reach the
 * float kernels. */
void cl_adamw_elements(float *restrict p, float *restrict m, float *restrict v,
                       const float *restrict g, size_t begin, size_t end, float decay, float w1,
                       float b2, float w2, float bc2_sqrt, float eps, float step_size, float gscale)
{
    for (size_t i = begin; i < end; i++) {
        float gi = g[i] * gscale;
        float pi = p[i] * decay;
        float mi = m[i] + w1 * (gi - m[i]);
        float vi = v[i] * b2 + w2 * gi * gi;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        p[i] = pi + step_size * mi / denom;
        m[i] = mi;
        v[i] = vi;
    }
}

const float *cl_grad_stacked(ClBackend *be, const float *a, int na, const float *b, int nb,
                             const float *c, int nc, int E, float *tmp)
{
    const size_t sa = (size_t)na * E, sb = (size_t)nb * E;
    if (b == a + sa && (!c || c == b + sb))
        return a;
    be->ops->copy(be, tmp, a, sa * sizeof(float));
    be->ops->copy(be, tmp + sa, b, sb * sizeof(float));
    if (c)
        be->ops->copy(be, tmp + sa + sb, c, (size_t)nc * E * sizeof(float));
    return tmp;
}

float *cl_grad_stacked_grad(ClBackend *be, float *a, int na, float *b, int nb, float *c, int nc,
                            int E, float *tmp)
{
    const size_t sa = (size_t)na * E, sb = (size_t)nb * E;
    if (b == a + sa && (!c || c == b + sb))
        return a;
    be->ops->zero(be, tmp, (sa + sb + (c ? (size_t)nc * E : 0)) * sizeof(float));
    return tmp;
}

void cl_grad_unstack(ClBackend *be, const float *at, float *a, int na, float *b, int nb, float *c,
                     int nc, int E)
{
    if (at == a)
        return;
    const size_t sa = (size_t)na * E, sb = (size_t)nb * E;
    be->ops->add(be, a, a, at, sa);
    be->ops->add(be, b, b, at + sa, sb);
    if (c)
        be->ops->add(be, c, c, at + sa + sb, (size_t)nc * E);
}

float *cl_act_take(ClActArena *a, size_t n)
{
    float *p = a->base ? a->base + a->used : NULL;
    a->used += (n + 15) & ~(size_t)15;
    return p;
}

/* The spare buffers: a sample's encoder and decoder hold one each, on up to two workers. */
#define N_SPARE 4
static GMutex spare_lock;
static float *spare[N_SPARE];
static size_t spare_n[N_SPARE];

float *cl_act_buffer_take(size_t n, size_t *got)
{
    n = MAX(n, 1);
    int best = -1;
    g_mutex_lock(&spare_lock);
    for (int i = 0; i < N_SPARE; i++) /* the smallest that is large enough */
        if (spare[i] && spare_n[i] >= n && (best < 0 || spare_n[i] < spare_n[best]))
            best = i;
    float *buf = NULL;
    if (best >= 0) {
        buf = spare[best], *got = spare_n[best];
        spare[best] = NULL;
    }
    g_mutex_unlock(&spare_lock);
    if (!buf && (buf = g_try_new(float, n)))
        *got = n;
    return buf;
}

void cl_act_buffer_give(float *buf, size_t n)
{
    if (!buf)
        return;
    g_mutex_lock(&spare_lock);
    int slot = 0; /* an empty slot, else the smallest spare */
    for (int i = 0; i < N_SPARE; i++) {
        if (!spare[i]) {
            slot = i;
            break;
        }
        if (spare_n[i] < spare_n[slot])
            slot = i;
    }
    float *drop = buf;
    if (!spare[slot] || spare_n[slot] < n) {
        drop = spare[slot];
        spare[slot] = buf, spare_n[slot] = n;
    }
    g_mutex_unlock(&spare_lock);
    g_free(drop);
}
