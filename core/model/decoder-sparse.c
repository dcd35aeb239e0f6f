/* decoder-sparse.c - the decoder's offline sparse prefill (docs/MODEL.md §4.5): a long prompt's
 * query blocks attend to a few chosen key blocks; a decode step stays dense. Inference only. */
#include "model/decoder-options.h"

#include <math.h>
#include <string.h>

void cl_kv_cache_set_sparse_prefill(ClKVCache *cache, int block, int topk)
{
    g_return_if_fail(cache != NULL);
    cache->sp_block = MAX(block, 0);
    cache->sp_topk = MAX(topk, 0);
}

/* Ordinary caches only; one position (a decode step) stays dense. */
gboolean cl_dec_sparse_on(const ClKVCache *c, int cn)
{
    return c->sp_block > 0 && cn > 1 && !c->window;
}

/* The offline sparse prefill's attention (docs/MODEL.md §4.5, InfLLM-V2's rule): the cn
 * queries at pos0.. in blocks of B positions; a query block qb attends, causally, to key block 0,
 * block qb − 1, its own block and the topk other earlier blocks whose mean key scores highest
 * against the block's mean query (the best over the query heads); with no more candidates than
 * that, to every earlier block (dense). Host memory. */
void cl_dec_sparse_attention(const ClDecRun *r, const float *kl, const float *vl, int pos0, int cn)
{
    ClKVCache *c = r->c;
    ClBackend *be = r->be;
    const int B = c->sp_block, KV = c->kv_dim, Hq = c->heads, Hkv = c->kv_heads, hd = c->hd;
    const int Q = Hq * hd, grp = Hq / Hkv, end = pos0 + cn;
    const int nb = (end + B - 1) / B;
    /* each key block's mean key (its rows so far) */
    float *kmean = g_new0(float, (size_t)nb * KV);
    for (int kb = 0; kb < nb; kb++) {
        const int a = kb * B, b = MIN(end, a + B);
        float *m = kmean + (size_t)kb * KV;
        for (int j = a; j < b; j++)
            for (int e = 0; e < KV; e++)
                m[e] += kl[(size_t)j * KV + e];
        for (int e = 0; e < KV; e++)
            m[e] /= (float)(b - a);
    }
    float *gk = g_new(float, (size_t)end * KV), *gv = g_new(float, (size_t)end * KV);
    double *score = g_new(double, MAX(nb, 1));
    gboolean *take = g_new(gboolean, MAX(nb, 1));
    float *qmean = g_new(float, Q);
    for (int qb = pos0 / B; qb * B < end; qb++) {
        const int r0 = MAX(pos0, qb * B) - pos0, r1 = MIN(end, (qb + 1) * B) - pos0;
        const int extra = qb - 2; /* earlier blocks other than block 0 and qb − 1 */
        for (int kb = 0; kb < qb; kb++)
            take[kb] = extra <= c->sp_topk || kb == 0 || kb == qb - 1;
        if (extra > c->sp_topk) {
            memset(qmean, 0, sizeof(float) * Q);
            for (int i = r0; i < r1; i++)
                for (int e = 0; e < Q; e++)
                    qmean[e] += c->q[(size_t)i * Q + e];
            for (int kb = 1; kb < qb - 1; kb++) {
                double best = -INFINITY;
                for (int h = 0; h < Hq; h++) {
                    const float *qh = qmean + (size_t)h * hd;
                    const float *kh = kmean + (size_t)kb * KV + (size_t)(h / grp) * hd;
                    double d = 0;
                    for (int e = 0; e < hd; e++)
                        d += (double)qh[e] * kh[e];
                    best = MAX(best, d);
                }
                score[kb] = best;
            }
            for (int t = 0; t < c->sp_topk; t++) { /* the topk best, ties to the earlier */
                int arg = -1;
                for (int kb = 1; kb < qb - 1; kb++)
                    if (!take[kb] && (arg < 0 || score[kb] > score[arg]))
                        arg = kb;
                take[arg] = TRUE;
            }
        }
        /* the chosen blocks in order, then the own block's keys up to the last query */
        int g = 0;
        for (int kb = 0; kb < qb; kb++) {
            if (!take[kb])
                continue;
            memcpy(gk + (size_t)g * KV, kl + (size_t)kb * B * KV, sizeof(float) * B * KV);
            memcpy(gv + (size_t)g * KV, vl + (size_t)kb * B * KV, sizeof(float) * B * KV);
            g += B;
        }
        const int own = pos0 + r1 - qb * B;
        memcpy(gk + (size_t)g * KV, kl + (size_t)qb * B * KV, sizeof(float) * own * KV);
        memcpy(gv + (size_t)g * KV, vl + (size_t)qb * B * KV, sizeof(float) * own * KV);
        g += own;
        be->ops->attention(be, c->att + (size_t)r0 * Q, NULL, c->q + (size_t)r0 * Q, gk, gv,
                           r1 - r0, g, Q, KV, KV, Q, Hq, Hkv, hd, r->scale, g - (r1 - r0), 0,
                           c->scores);
    }
    g_free(kmean), g_free(gk), g_free(gv), g_free(score), g_free(take), g_free(qmean);
}
