/* refdec.c - float64 decoder pieces for the tests' references (refdec.h). */
#include "refdec.h"

#include <math.h>

void ref_rmsnorm(double *out, const double *x, const float *w, int n, double eps)
{
    double ms = 0;
    for (int i = 0; i < n; i++)
        ms += x[i] * x[i];
    ms /= n;
    for (int i = 0; i < n; i++)
        out[i] = x[i] / sqrt(ms + eps) * (w ? w[i] : 1.0);
}

void ref_matvec(double *out, const float *w, const double *x, int n_out, int n_in)
{
    for (int j = 0; j < n_out; j++) {
        double s = 0;
        for (int i = 0; i < n_in; i++)
            s += w[(size_t)j * n_in + i] * x[i];
        out[j] = s;
    }
}

void ref_rope(double *x, int heads, int hd, int pos, double base)
{
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < hd / 2; i++) {
            double ang = pos * pow(base, -2.0 * i / hd);
            double a = x[h * hd + i], b = x[h * hd + i + hd / 2];
            x[h * hd + i] = a * cos(ang) - b * sin(ang);
            x[h * hd + i + hd / 2] = b * cos(ang) + a * sin(ang);
        }
}

void ref_attend(double *out, const double *q, const double *k, const double *v, int nk, int Hq,
                int Hkv, int hd, const gboolean *keep)
{
    const int KV = Hkv * hd;
    double *p = g_new(double, MAX(nk, 1));
    for (int h = 0; h < Hq; h++) {
        const int g = h / (Hq / Hkv);
        double mx = -INFINITY, s = 0;
        for (int j = 0; j < nk; j++) {
            if (keep && !keep[j])
                continue;
            double d = 0;
            for (int i = 0; i < hd; i++)
                d += q[h * hd + i] * k[(size_t)j * KV + g * hd + i];
            p[j] = d / sqrt((double)hd);
            mx = MAX(mx, p[j]);
        }
        for (int j = 0; j < nk; j++)
            s += (p[j] = keep && !keep[j] ? 0 : exp(p[j] - mx));
        for (int i = 0; i < hd; i++) {
            double a = 0;
            for (int j = 0; j < nk; j++)
                a += p[j] / s * v[(size_t)j * KV + g * hd + i];
            out[h * hd + i] = a;
        }
    }
    g_free(p);
}

void ref_mlp(double *out, const float *gate, const float *up, const float *down, const double *h,
             int E, int F)
{
    double *g = g_new(double, F), *u = g_new(double, F);
    ref_matvec(g, gate, h, F, E);
    ref_matvec(u, up, h, F, E);
    for (int i = 0; i < F; i++)
        g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
    ref_matvec(out, down, g, E, F);
    g_free(g);
    g_free(u);
}

void ref_decode_rows(const ClModel *m, const double *x0, int T, const RefHooks *hooks,
                     double *logits)
{
#define POS(t) (hooks && hooks->position ? hooks->position((t), hooks->data) : (t))
    const ClModelConfig *c = &m->config;
    const ClModelWeights *w = &m->w;
    const int E = c->dec_dim, Hq = c->dec_heads, Hkv = c->dec_kv_heads, hd = E / Hq;
    const int KV = Hkv * hd, F = c->dec_mlp, V = c->vocab_size;
    double *x = g_memdup2(x0, sizeof(double) * (size_t)T * E), *h = g_new(double, E);
    double *q = g_new(double, E), *k = g_new(double, (size_t)T * KV);
    double *v = g_new(double, (size_t)T * KV), *att = g_new(double, E), *o = g_new(double, E);
    double *nx = g_new(double, (size_t)T * E), *hn = g_new(double, E);
    gboolean *keep = g_new(gboolean, MAX(T, 1));
    for (int l = 0; l < c->dec_depth; l++) {
        const ClDecoderLayerWeights *L = &w->dec[l];
        for (int t = 0; t < T; t++) {
            ref_rmsnorm(h, x + (size_t)t * E, L->attn_norm, E, c->norm_eps);
            ref_matvec(k + (size_t)t * KV, L->k, h, KV, E);
            ref_matvec(v + (size_t)t * KV, L->v, h, KV, E);
            ref_rope(k + (size_t)t * KV, Hkv, hd, POS(t), c->rope_base);
        }
        for (int t = 0; t < T; t++) {
            double *xt = nx + (size_t)t * E;
            ref_rmsnorm(h, x + (size_t)t * E, L->attn_norm, E, c->norm_eps);
            ref_matvec(q, L->q, h, E, E);
            ref_rope(q, Hq, hd, POS(t), c->rope_base);
            for (int j = 0; j <= t; j++)
                keep[j] = !hooks || !hooks->sees || hooks->sees(t, j, hooks->data);
            const gboolean skip =
                hooks && hooks->skip_self_attention && hooks->skip_self_attention(l, hooks->data);
            ref_attend(att, q, k, v, t + 1, Hq, Hkv, hd, keep);
            ref_matvec(o, L->o, att, E, E);
            for (int e = 0; e < E; e++)
                xt[e] = x[(size_t)t * E + e] + (skip ? 0.0 : o[e]);
            if (hooks && hooks->after_attention)
                hooks->after_attention(m, l, t, h, xt, hooks->data);
        }
        for (int t = 0; t < T; t++) {
            double *xt = nx + (size_t)t * E;
            ref_rmsnorm(hn, xt, L->mlp_norm, E, c->norm_eps);
            ref_mlp(o, L->gate, L->up, L->down, hn, E, F);
            if (hooks && hooks->beside_ffn)
                hooks->beside_ffn(m, l, t, xt, o, hooks->data);
            for (int e = 0; e < E; e++)
                x[(size_t)t * E + e] = xt[e] + o[e];
        }
    }
    const float *head = w->lm_head ? w->lm_head : w->embed;
    for (int t = 0; t < T; t++) {
        ref_rmsnorm(h, x + (size_t)t * E, w->dec_norm, E, c->norm_eps);
        ref_matvec(logits + (size_t)t * V, head, h, V, E);
    }
    g_free(x), g_free(h), g_free(q), g_free(k), g_free(v), g_free(att), g_free(o), g_free(nx);
    g_free(hn), g_free(keep);
#undef POS
}

void ref_liven(ClModel *m)
{
    g_autoptr(GPtrArray) specs = cl_model_weight_specs(&m->config, &m->w);
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *s = g_ptr_array_index(specs, i);
        float *p = *s->slot;
        GRand *r = g_rand_new_with_seed(g_str_hash(s->name));
        for (gint64 j = 0; j < cl_weight_spec_numel(s); j++)
            p[j] =
                s->ndim == 1
                    ? (float)(1.0 + g_rand_double_range(r, -0.2, 0.2))
                    : (float)(g_rand_double_range(r, -1.0, 1.0) * sqrt(3.0 / (double)s->shape[1]));
        g_rand_free(r);
    }
    cl_model_weights_changed(m);
}

double *ref_embed(const ClModel *m, const gint32 *ids, int T, const float *visual)
{
    const int E = m->config.dec_dim;
    double *x = g_new(double, (size_t)MAX(T, 1) * E);
    for (int t = 0, vr = 0; t < T; t++) {
        const float *src = ids[t] < 0 ? visual + (size_t)vr++ * E : m->w.embed + (size_t)ids[t] * E;
        for (int e = 0; e < E; e++)
            x[(size_t)t * E + e] = src[e];
    }
    return x;
}
