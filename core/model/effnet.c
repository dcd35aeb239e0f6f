/* effnet.c - EfficientNet-Lite0 forward on the CPU (effnet.h): activations H × W × C, TF "same"
 * padding (the weights come from TensorFlow: a stride-2 layer pads one more row and column at the
 * end than at the start), 1×1 convolutions as sgemm, the others as direct loops; BatchNorm folded
 * into each convolution's weights and bias when the file is read. */
#include "model/effnet.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "model/config.h" /* CL_MODEL_ERROR */
#include "model/safetensors.h"

#define BN_EPS 1e-3 /* EfficientNet's BatchNorm epsilon */
#define N_BLOCKS 16
#define MAX_SIZE 1024

typedef struct {
    float *w; /* BatchNorm folded in; 1 × 1: (cout, cin); k × k: (k, k, cin or 1, cout) */
    float *b; /* (cout) */
    int cin, cout, k, stride;
    gboolean depthwise;
} Conv;

typedef struct {
    Conv expand, dw, project; /* expand.cout == 0: no expansion (ratio 1) */
    gboolean skip;            /* input added to the output (stride 1, same width) */
} Block;

struct _ClEffnet {
    Conv stem, head;
    Block blocks[N_BLOCKS];
    float *fc_w, *fc_b; /* (1000, 1280), (1000) */
};

/* Lite0: per stage the kernel, the first block's stride and the block count (16 in all). */
static const struct {
    int k, stride, repeats;
} stages[] = { { 3, 1, 1 }, { 3, 2, 2 }, { 5, 2, 2 }, { 3, 2, 3 },
               { 5, 1, 3 }, { 5, 2, 4 }, { 3, 1, 1 } };
#define FEATURE16_BLOCK 10 /* the last block before the stride reaches 32 */

/* ---- loading ---- */

static const ClSafeTensor *need(const ClSafetensors *st, const char *name, int ndim,
                                const gint64 *shape, guint *used, GError **error)
{
    const ClSafeTensor *t = cl_safetensors_get(st, name);
    gboolean ok = t && t->ndim == ndim && t->dtype == CL_DTYPE_F32;
    for (int d = 0; ok && d < ndim; d++)
        ok = shape[d] < 0 || t->shape[d] == shape[d];
    if (!ok) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_FILE,
                    "EfficientNet-Lite0: tensor '%s' is %s", name,
                    t ? "of another shape or type" : "missing");
        return NULL;
    }
    (*used)++;
    return t;
}

/* conv `prefix` (weight cout × cin/1 × k × k) and BatchNorm `bn`, folded */
static gboolean load_conv(const ClSafetensors *st, const char *prefix, const char *bn, Conv *c,
                          guint *used, GError **error)
{
    g_autofree char *wn = g_strdup_printf("%s.weight", prefix);
    gint64 shape[4] = { c->cout, c->depthwise ? 1 : c->cin, c->k, c->k };
    const ClSafeTensor *w = need(st, wn, 4, shape, used, error);
    if (!w)
        return FALSE;
    const float *p[4];
    static const char *const parts[4] = { "weight", "bias", "running_mean", "running_var" };
    gint64 vshape[1] = { c->cout };
    for (int i = 0; i < 4; i++) {
        g_autofree char *n = g_strdup_printf("%s.%s", bn, parts[i]);
        const ClSafeTensor *t = need(st, n, 1, vshape, used, error);
        if (!t)
            return FALSE;
        p[i] = (const float *)(gconstpointer)t->data;
    }
    size_t per = (size_t)(c->depthwise ? 1 : c->cin) * c->k * c->k;
    c->w = g_new(float, (size_t)c->cout * per);
    c->b = g_new(float, c->cout);
    memcpy(c->w, w->data, (size_t)c->cout * per * sizeof(float));
    for (int o = 0; o < c->cout; o++) {
        double scale = p[0][o] / sqrt((double)p[3][o] + BN_EPS);
        for (size_t i = 0; i < per; i++)
            c->w[o * per + i] = (float)(c->w[o * per + i] * scale);
        c->b[o] = (float)(p[1][o] - p[2][o] * scale);
    }
    if (c->k > 1) { /* spatial ones kept tap-major, ((u·k + v)·cin' + ci)·cout + o: the output
                     * channels innermost and contiguous, as spatial() reads them */
        const int ci_n = c->depthwise ? 1 : c->cin, kk = c->k * c->k;
        g_autofree float *t = g_new(float, (size_t)c->cout * per);
        for (int o = 0; o < c->cout; o++)
            for (int ci = 0; ci < ci_n; ci++)
                for (int uv = 0; uv < kk; uv++)
                    t[((size_t)uv * ci_n + ci) * c->cout + o] =
                        c->w[o * per + (size_t)ci * kk + uv];
        memcpy(c->w, t, (size_t)c->cout * per * sizeof(float));
    }
    return TRUE;
}

static gboolean load_blocks(const ClSafetensors *st, ClEffnet *net, guint *used, GError **error)
{
    int b = 0, cin = 32;
    /* the widths the file's projections have: 16, 24, 40, 80, 112, 192, 320 */
    static const int widths[] = { 16, 24, 40, 80, 112, 192, 320 };
    for (gsize s = 0; s < G_N_ELEMENTS(stages); s++)
        for (int r = 0; r < stages[s].repeats; r++, b++) {
            Block *B = &net->blocks[b];
            int expand = s == 0 ? 1 : 6, hidden = cin * expand, cout = widths[s];
            g_autofree char *pre = g_strdup_printf("_blocks.%d.", b);
            g_autofree char *ex = g_strconcat(pre, "_expand_conv", NULL);
            g_autofree char *bn0 = g_strconcat(pre, "_bn0", NULL);
            g_autofree char *dw = g_strconcat(pre, "_depthwise_conv", NULL);
            g_autofree char *bn1 = g_strconcat(pre, "_bn1", NULL);
            g_autofree char *pj = g_strconcat(pre, "_project_conv", NULL);
            g_autofree char *bn2 = g_strconcat(pre, "_bn2", NULL);
            B->expand = (Conv){ .cin = cin, .cout = expand > 1 ? hidden : 0, .k = 1, .stride = 1 };
            B->dw = (Conv){ .cin = hidden,
                            .cout = hidden,
                            .k = stages[s].k,
                            .stride = r == 0 ? stages[s].stride : 1,
                            .depthwise = TRUE };
            B->project = (Conv){ .cin = hidden, .cout = cout, .k = 1, .stride = 1 };
            B->skip = B->dw.stride == 1 && cin == cout;
            if ((expand > 1 && !load_conv(st, ex, bn0, &B->expand, used, error)) ||
                !load_conv(st, dw, bn1, &B->dw, used, error) ||
                !load_conv(st, pj, bn2, &B->project, used, error))
                return FALSE;
            cin = cout;
        }
    return TRUE;
}

void cl_effnet_free(ClEffnet *net)
{
    if (!net)
        return;
    Conv *convs[2 + 3 * N_BLOCKS];
    int n = 0;
    convs[n++] = &net->stem, convs[n++] = &net->head;
    for (int b = 0; b < N_BLOCKS; b++)
        convs[n++] = &net->blocks[b].expand, convs[n++] = &net->blocks[b].dw,
        convs[n++] = &net->blocks[b].project;
    for (int i = 0; i < n; i++)
        g_free(convs[i]->w), g_free(convs[i]->b);
    g_free(net->fc_w);
    g_free(net->fc_b);
    g_free(net);
}

ClEffnet *cl_effnet_load(const char *path, GError **error)
{
    g_autoptr(ClSafetensors) st = cl_safetensors_open(path, error);
    if (!st)
        return NULL;
    g_autoptr(ClEffnet) net = g_new0(ClEffnet, 1);
    guint used = 0;
    net->stem = (Conv){ .cin = 3, .cout = 32, .k = 3, .stride = 2 };
    net->head = (Conv){ .cin = 320, .cout = 1280, .k = 1, .stride = 1 };
    const gint64 fcw[2] = { CL_EFFNET_CLASSES, 1280 }, fcb[1] = { CL_EFFNET_CLASSES };
    const ClSafeTensor *w, *b;
    if (!load_conv(st, "_conv_stem", "_bn0", &net->stem, &used, error) ||
        !load_blocks(st, net, &used, error) ||
        !load_conv(st, "_conv_head", "_bn1", &net->head, &used, error) ||
        !(w = need(st, "_fc.weight", 2, fcw, &used, error)) ||
        !(b = need(st, "_fc.bias", 1, fcb, &used, error))) {
        g_prefix_error(error, "%s: ", path);
        return NULL;
    }
    if (used != st->tensors->len) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_FILE,
                    "%s: %u tensors, of which EfficientNet-Lite0 uses %u", path, st->tensors->len,
                    used);
        return NULL;
    }
    net->fc_w = g_memdup2(w->data, (gsize)CL_EFFNET_CLASSES * 1280 * sizeof(float));
    net->fc_b = g_memdup2(b->data, CL_EFFNET_CLASSES * sizeof(float));
    return g_steal_pointer(&net);
}

/* ---- the forward pass ---- */

static inline float relu6(float x)
{
    return x < 0 ? 0 : x > 6 ? 6 : x;
}

/* TF "same": output ceil(in / stride); the padding's start (the rest goes at the end). */
static int same_pad(int in, int k, int stride, int *out)
{
    *out = (in + stride - 1) / stride;
    int total = MAX((*out - 1) * stride + k - in, 0);
    return total / 2;
}

/* y (h·w × cout) = x (h·w × cin) · Wᵀ + b, then ReLU6 when `act` */
static void pointwise(const Conv *c, const float *x, int hw, float *y, gboolean act)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, hw, c->cout, c->cin, 1.0f, x, c->cin, c->w,
                c->cin, 0.0f, y, c->cout);
    for (int i = 0; i < hw; i++)
        for (int o = 0; o < c->cout; o++) {
            float v = y[(size_t)i * c->cout + o] + c->b[o];
            y[(size_t)i * c->cout + o] = act ? relu6(v) : v;
        }
}

/* KxK convolution (full or depthwise), "same" padding, ReLU6; x is h × w × cin, the weights
 * tap-major (load_conv) so every inner loop runs over contiguous output channels */
static void spatial(const Conv *c, const float *x, int h, int w, float *y, int *oh, int *ow)
{
    int p0 = same_pad(h, c->k, c->stride, oh), q0 = same_pad(w, c->k, c->stride, ow);
    const int K = c->k, C = c->cout, ci_n = c->depthwise ? 1 : c->cin;
    for (int i = 0; i < *oh; i++)
        for (int j = 0; j < *ow; j++) {
            float *restrict out = y + ((size_t)i * *ow + j) * C;
            memcpy(out, c->b, (size_t)C * sizeof(float));
            for (int u = 0; u < K; u++) {
                int yi = i * c->stride + u - p0;
                if (yi < 0 || yi >= h)
                    continue;
                for (int v = 0; v < K; v++) {
                    int xj = j * c->stride + v - q0;
                    if (xj < 0 || xj >= w)
                        continue;
                    const float *restrict in = x + ((size_t)yi * w + xj) * c->cin;
                    const float *restrict wt = c->w + (size_t)(u * K + v) * ci_n * C;
                    if (c->depthwise) {
                        for (int o = 0; o < C; o++)
                            out[o] += wt[o] * in[o];
                    } else {
                        for (int ci = 0; ci < ci_n; ci++)
                            for (int o = 0; o < C; o++)
                                out[o] += wt[(size_t)ci * C + o] * in[ci];
                    }
                }
            }
            for (int o = 0; o < C; o++)
                out[o] = relu6(out[o]);
        }
}

/* One MBConv block: x (h × w × cin) → y; *h, *w updated. tmp holds the expanded activations. */
static void block(const Block *B, const float *x, int *h, int *w, float *y, float *t1, float *t2)
{
    int hw = *h * *w, oh, ow;
    const float *e = x;
    if (B->expand.cout) {
        pointwise(&B->expand, x, hw, t1, TRUE);
        e = t1;
    }
    spatial(&B->dw, e, *h, *w, t2, &oh, &ow);
    pointwise(&B->project, t2, oh * ow, y, FALSE);
    if (B->skip)
        for (size_t i = 0; i < (size_t)oh * ow * B->project.cout; i++)
            y[i] += x[i];
    *h = oh, *w = ow;
}

/* Runs blocks [first, last] (last −1: through the head) on x (h × w × c values), which it
 * overwrites; the result in a new array. cap: room for the widest activation on the way. */
static float *run_blocks(const ClEffnet *net, float *x, size_t cap, int first, int last, int *h,
                         int *w, int *c)
{
    float *a = x, *b = g_new(float, cap);
    g_autofree float *t1 = g_new(float, cap), *t2 = g_new(float, cap);
    for (int k = first; k < N_BLOCKS && (last < 0 || k <= last); k++) {
        block(&net->blocks[k], a, h, w, b, t1, t2);
        *c = net->blocks[k].project.cout;
        float *s = a;
        a = b, b = s;
    }
    if (last < 0) {
        pointwise(&net->head, a, *h * *w, b, TRUE);
        *c = net->head.cout;
        float *s = a;
        a = b, b = s;
    }
    g_free(b);
    return a;
}

/* Runs the net up to block `last` (−1: through the head); the result in a new array. */
static float *run(const ClEffnet *net, const float *rgb, int size, int last, int *h, int *w, int *c)
{
    size_t cap = (size_t)(size / 2) * (size / 2) * 96; /* the widest activation: block 1's */
    g_autofree float *in = g_new(float, (size_t)size * size * 3);
    for (size_t i = 0; i < (size_t)size * size * 3; i++)
        in[i] = (255.0f * rgb[i] - 127.0f) / 128.0f;
    float *a = g_new(float, cap);
    spatial(&net->stem, in, size, size, a, h, w);
    *c = 32;
    return run_blocks(net, a, cap, 0, last, h, w, c);
}

static gboolean check_size(int size, GError **error)
{
    if (size < 32 || size > MAX_SIZE || size % 32) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "EfficientNet-Lite0 takes square images of 32 to %d pixels, a multiple of 32, "
                    "not %d",
                    MAX_SIZE, size);
        return FALSE;
    }
    return TRUE;
}

gboolean cl_effnet_logits(const ClEffnet *net, const float *rgb, int size, float *logits,
                          GError **error)
{
    g_return_val_if_fail(net && rgb && logits, FALSE);
    if (!check_size(size, error))
        return FALSE;
    int h, w, c;
    g_autofree float *f = run(net, rgb, size, -1, &h, &w, &c);
    g_autofree double *pool = g_new0(double, c);
    for (int i = 0; i < h * w; i++)
        for (int k = 0; k < c; k++)
            pool[k] += f[(size_t)i * c + k];
    for (int o = 0; o < CL_EFFNET_CLASSES; o++) {
        double s = net->fc_b[o];
        for (int k = 0; k < c; k++)
            s += net->fc_w[(size_t)o * c + k] * (pool[k] / (h * w));
        logits[o] = (float)s;
    }
    return TRUE;
}

float *cl_effnet_features(const ClEffnet *net, const float *rgb, int size, int stride, int *n,
                          int *channels, GError **error)
{
    g_return_val_if_fail(net && rgb && n && channels, NULL);
    if (!check_size(size, error))
        return NULL;
    if (stride != 16 && stride != 32) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "EfficientNet-Lite0 features come at stride 16 or 32, not %d", stride);
        return NULL;
    }
    int h, w;
    float *f = run(net, rgb, size, stride == 16 ? FEATURE16_BLOCK : -1, &h, &w, channels);
    *n = h * w;
    return f;
}

gboolean cl_effnet_pooled_from16(const ClEffnet *net, const float *features16, int h, int w,
                                 float *pooled)
{
    g_return_val_if_fail(net && features16 && pooled && h > 0 && w > 0, FALSE);
    const int c16 = net->blocks[FEATURE16_BLOCK].project.cout;
    /* the widest activation from here on: the head's 1280, or a block's expansion (6 × 192) */
    const size_t cap = (size_t)h * w * 1280;
    float *x = g_new(float, cap);
    memcpy(x, features16, (size_t)h * w * c16 * sizeof(float));
    int c = c16;
    g_autofree float *f = run_blocks(net, x, cap, FEATURE16_BLOCK + 1, -1, &h, &w, &c);
    for (int k = 0; k < c; k++) {
        double s = 0;
        for (int i = 0; i < h * w; i++)
            s += f[(size_t)i * c + k];
        pooled[k] = (float)(s / (h * w));
    }
    return TRUE;
}
