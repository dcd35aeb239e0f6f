/* test-trainmodel.c - the whole model's training pass (core/train/trainmodel.h): loss gradients
 * against finite differences for every SVE variant (and the learned null first state), the
 * paper's stop_grad (the gradient is exactly that of a loss whose predecessor states are held
 * fixed; without it, gradients reach earlier images), parity of the training forward with the
 * inference path, determinism, refusal of bad samples, and the dense auxiliary losses (the
 * whole loss's gradient, the heads' included, against finite differences; weight 0 and a
 * sample without targets leave the gradient bit for bit as without them). */
#include <math.h>
#include <string.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "model/decoder.h"
#include "model/encoder.h"
#include "model/model.h"
#include "train/params.h"
#include "train/trainmodel.h"

static ClBackend *be;

#define N_IMAGES 3
#define FD_EPS 4e-3
#define FD_PER_TENSOR 10
/* the finite-difference step of check_model_grads (FD_EPS unless a test says otherwise) */
static double fd_eps = FD_EPS;

/* tiny, shrunk: G = 4 (N = 16, M = 4), D = 16 (2 heads of 8), depth 2; E = 16, GQA 2/1 */
static void micro_config(ClModelConfig *cfg, ClSveVariant v, ClSveFirst first)
{
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_model_config_preset(cfg, "tiny", &err));
    cfg->image_size = 32;
    cfg->patch_size = 8;
    cfg->enc_dim = 16;
    cfg->enc_depth = 2;
    cfg->enc_heads = 2;
    cfg->enc_mlp = 24;
    cfg->enc_rope_base = 100.0;
    cfg->merger_hidden = 20;
    cfg->dec_dim = 16;
    cfg->dec_depth = 2;
    cfg->dec_heads = 2;
    cfg->dec_kv_heads = 1;
    cfg->dec_mlp = 24;
    cfg->vocab_size = 300;
    cfg->max_len = 64;
    cfg->sve_variant = v;
    cfg->sve_first = first;
    /* SVE outputs large enough that the state visibly matters to the loss */
    cfg->sve_out_init_std = 0.3;
    g_assert_true(cl_model_config_validate(cfg, &err));
}

/* micro_model's configs have a learned visual position table ("merger.pos") when set */
static gboolean micro_visual_pos;
/* … and their visual tokens centred per image when set */
static gboolean micro_visual_center;
/* … and a learned position per patch ("enc.pos") when set */
static gboolean micro_enc_pos;
static gboolean micro_change_head;
/* … and an object head of three classes (config.n_objects) when set */
static gboolean micro_object_head;
/* … and the change marker (needs micro_change_head) when set */
static gboolean micro_change_marker;
/* … and PVM beside the FFN of both decoder layers (rank 8, 2 heads of 4) when set */
static gboolean micro_pvm;
/* … and CASA (this variant) when not off */
static ClCasaVariant micro_casa;
/* … with every micro_casa_replace-th self-attention replaced by it (CA^#) when > 0 */
static int micro_casa_replace;
/* … and CA_{t+v} when set */
static gboolean micro_casa_tv;
/* … and the Gated DeltaNet hybrid when set: depth 3, attention in layer 0, GDN layers 1 and 2
 * (2 heads, dk 8, dv 16, 4 taps), the last one a GDN layer (the answer tail runs through it) */
static gboolean micro_hybrid;

static ClModel *micro_model(ClSveVariant v, ClSveFirst first, guint64 seed)
{
    ClModelConfig cfg;
    micro_config(&cfg, v, first);
    cfg.visual_pos = micro_visual_pos;
    cfg.visual_center = micro_visual_center;
    cfg.enc_pos = micro_enc_pos;
    cfg.change_head = micro_change_head;
    cfg.change_marker = micro_change_marker;
    if (micro_object_head) {
        cfg.n_objects = 3;
        g_strlcpy(cfg.object_names[0], "cat", CL_CONFIG_OBJECT_NAME);
        g_strlcpy(cfg.object_names[1], "dog", CL_CONFIG_OBJECT_NAME);
        g_strlcpy(cfg.object_names[2], "top hat", CL_CONFIG_OBJECT_NAME);
    }
    cfg.casa = micro_casa;
    cfg.casa_replace = micro_casa_replace;
    cfg.casa_tv = micro_casa_tv;
    if (micro_hybrid) {
        cfg.dec_depth = 3;
        g_assert_true(cl_config_set_hybrid(&cfg, 3));
    }
    if (micro_pvm) {
        g_assert_true(cl_config_set_pvm(&cfg, 1, 8));
        cfg.pvm_n_layers = 2;
        cfg.pvm_layers[0] = 0;
        cfg.pvm_layers[1] = 1;
        cfg.pvm_heads = 2;
    }
    g_autoptr(GError) err = NULL;
    ClModel *m = cl_model_new_random(&cfg, seed, &err);
    g_assert_no_error(err);
    g_assert_true(cl_model_make_trainable(m, &err));
    /* random norms and biases too, so that every parameter's gradient is exercised */
    GRand *r = g_rand_new_with_seed((guint32)seed + 7);
    for (size_t i = 0; i < m->n_params; i++)
        m->arena[i] += (float)g_rand_double_range(r, -0.15, 0.15);
    g_rand_free(r);
    /* GDN: the convolutions' current tap near 1 (as `train --hybrid` starts them), so that q
     * and k are not near 0 where their unit normalisation bends too sharply for a finite
     * difference of 4e-3 */
    for (int l = 0; l < m->config.dec_depth; l++) {
        ClDecoderLayerWeights *L = &m->w.dec[l];
        if (!L->gdn_conv_q)
            continue;
        const int K = m->config.gdn_conv, Qk = m->config.gdn_heads * m->config.gdn_dk;
        const int Vv = m->config.gdn_heads * m->config.gdn_dv;
        for (int c = 0; c < Qk; c++)
            L->gdn_conv_q[c * K + K - 1] += 1.0f, L->gdn_conv_k[c * K + K - 1] += 1.0f;
        for (int c = 0; c < Vv; c++)
            L->gdn_conv_v[c * K + K - 1] += 1.0f;
    }
    return m;
}

/* N_IMAGES images, text between and after them; supervised: every text → text prediction
 * from position 1 on (so each image's tokens feed later supervised positions). */
static ClTrainSample *micro_sample(const ClModel *m, guint32 seed)
{
    const ClModelConfig *cfg = &m->config;
    const int M = cl_config_n_visual(cfg), S = cfg->image_size, C = cfg->channels;
    ClTrainSample *s = g_new0(ClTrainSample, 1);
    GRand *r = g_rand_new_with_seed(seed);
    s->n_images = N_IMAGES;
    s->channels = C;
    s->size = S;
    s->n_visual_per_image = M;
    s->pixels = g_new(float, (size_t)N_IMAGES * C * S * S);
    for (size_t i = 0; i < (size_t)N_IMAGES * C * S * S; i++)
        s->pixels[i] = (float)g_rand_double_range(r, -1, 1);
    s->n_ids = N_IMAGES * (M + 2) + 4;
    s->ids = g_new(gint32, s->n_ids);
    int at = 0;
    for (int t = 0; t < N_IMAGES; t++) {
        s->ids[at++] = g_rand_int_range(r, 0, cfg->vocab_size);
        for (int j = 0; j < M; j++)
            s->ids[at++] = -1;
        s->ids[at++] = g_rand_int_range(r, 0, cfg->vocab_size);
    }
    while (at < s->n_ids)
        s->ids[at++] = g_rand_int_range(r, 0, cfg->vocab_size);
    s->mask = g_new0(guint8, s->n_ids);
    for (int t = 1; t + 1 < s->n_ids; t++)
        if (s->ids[t + 1] >= 0 && (s->mask[t] = 1))
            s->n_supervised++;
    s->id = g_strdup("micro");
    g_rand_free(r);
    return s;
}

static double loss_of(const ClModel *m, const ClTrainSample *s, const ClTrainGradOptions *o)
{
    ClTrainStepStats st = { 0 };
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_train_loss(be, m, s, o, &st, &err));
    g_assert_no_error(err);
    return st.loss;
}

static ClParamBuf *grads_of(const ClModel *m, const ClTrainSample *s, gboolean stop_grad)
{
    g_autoptr(GError) err = NULL;
    ClParamBuf *g = cl_param_buf_new(&m->config, &err);
    ClTrainGradOptions o;
    cl_train_grad_options_init(&o);
    o.stop_grad = stop_grad;
    ClTrainStepStats st = { 0 };
    g_assert_true(cl_train_forward_backward(be, m, s, &o, g, &st, &err));
    g_assert_no_error(err);
    g_assert_cmpint(st.n_supervised, ==, s->n_supervised);
    g_assert_true(isfinite(st.loss) && st.loss > 0);
    return g;
}

/* Finite differences on FD_PER_TENSOR random entries of every tensor (all of a small one).
 * stop_grad: the loss holds every predecessor state at its value for the unperturbed
 * parameters (o.state_params), the finite-difference meaning of stop_grad. */
static void check_model_grads(ClModel *m, const ClTrainSample *s, gboolean stop_grad,
                              const char *label)
{
    g_autoptr(ClParamBuf) g = grads_of(m, s, stop_grad);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClParamBuf) snap = cl_param_buf_new(&m->config, &err);
    memcpy(snap->data, m->arena, m->n_params * sizeof(float));
    ClTrainGradOptions o;
    cl_train_grad_options_init(&o);
    o.state_params = stop_grad ? snap : NULL;

    size_t *off = NULL;
    g_autoptr(GPtrArray) specs = cl_param_specs(&m->config, &off);
    GRand *r = g_rand_new_with_seed(11);
    double num = 0, den = 0, worst = 0, gdn_worst = -1;
    const char *worst_name = "", *gdn_name = NULL;
    int n_checked = 0;
    for (guint i = 0; i < specs->len; i++) {
        const ClWeightSpec *sp = g_ptr_array_index(specs, i);
        size_t n = off[i + 1] - off[i];
        int k = (int)MIN(n, FD_PER_TENSOR);
        double tnum = 0, tden = 0;
        for (int j = 0; j < k; j++) {
            size_t at =
                off[i] + (n <= FD_PER_TENSOR ? (size_t)j : (size_t)g_rand_int_range(r, 0, (int)n));
            float keep = m->arena[at];
            m->arena[at] = keep + (float)fd_eps;
            double lp = loss_of(m, s, &o);
            m->arena[at] = keep - (float)fd_eps;
            double lm = loss_of(m, s, &o);
            m->arena[at] = keep;
            double fd = (lp - lm) / (2 * fd_eps), an = g->data[at];
            tnum += (fd - an) * (fd - an);
            tden += fd * fd;
            /* each entry: within f32 finite-difference noise (~1e-4 here) or 2 % */
            double bad = fabs(fd - an) / (3e-4 + 0.02 * fabs(fd));
            if (bad > worst)
                worst = bad, worst_name = sp->name;
            if (strstr(sp->name, ".gdn.") && bad > gdn_worst)
                gdn_worst = bad, gdn_name = sp->name;
            n_checked++;
        }
        num += tnum, den += tden;
    }
    double rel = sqrt(num / den);
    g_test_message("%-26s %s: %d entries, norm-wise rel err %.2e, worst entry %.2f of its "
                   "tolerance (%s)",
                   label, stop_grad ? "stop_grad" : "full     ", n_checked, rel, worst, worst_name);
    if (gdn_name) /* the hybrid's Gated DeltaNet tensors */
        g_test_message("%-26s %s: worst GDN entry %.2f of its tolerance (%s)", label,
                       stop_grad ? "stop_grad" : "full     ", gdn_worst, gdn_name);
    g_assert_cmpfloat(rel, <, 5e-3);
    g_assert_cmpfloat(worst, <, 1.0);
    g_rand_free(r);
    g_free(off);
}

static void test_variant(gconstpointer data)
{
    int code = GPOINTER_TO_INT(data);
    ClSveVariant v = code % 16;
    ClSveFirst first = code / 16 ? CL_SVE_FIRST_NULL : CL_SVE_FIRST_OWN;
    g_autoptr(ClModel) m = micro_model(v, first, 100 + code);
    g_autoptr(ClTrainSample) s = micro_sample(m, 5);
    g_autofree char *label =
        g_strdup_printf("%s/%s", cl_sve_variant_name(v), cl_sve_first_name(first));
    check_model_grads(m, s, TRUE, label);
    check_model_grads(m, s, FALSE, label);

    /* stop_grad changes the gradient exactly when the encoder reads a predecessor */
    g_autoptr(ClParamBuf) a = grads_of(m, s, TRUE);
    g_autoptr(ClParamBuf) b = grads_of(m, s, FALSE);
    double diff = 0, norm = 0;
    for (size_t i = 0; i < a->n; i++) {
        diff += ((double)a->data[i] - b->data[i]) * ((double)a->data[i] - b->data[i]);
        norm += (double)a->data[i] * a->data[i];
    }
    gboolean reads_prev = v != CL_SVE_STATELESS && v != CL_SVE_SELF_FFN;
    g_test_message("%-26s |g_stop − g_full| / |g| = %.2e", label, sqrt(diff / norm));
    if (reads_prev)
        g_assert_cmpfloat(sqrt(diff / norm), >, 1e-4);
    else
        g_assert_cmpfloat(diff, ==, 0.0);
}

/* A learned position table of a cross_ffn micro model (made with the micro_* switch `flag` on):
 * its gradient checked against finite differences with the rest of the model, and the table
 * changes the loss (so it is really read): the loss again with it zeroed. */
static void check_position_table(gboolean *flag, guint64 seed, const char *label)
{
    *flag = TRUE;
    g_autoptr(ClModel) m = micro_model(CL_SVE_CROSS_FFN, CL_SVE_FIRST_OWN, seed);
    *flag = FALSE;
    const ClModelConfig *c = &m->config;
    float *table = flag == &micro_enc_pos ? m->w.enc_pos : m->w.merger_pos;
    const size_t n = flag == &micro_enc_pos ? (size_t)cl_config_n_patches(c) * c->enc_dim
                                            : (size_t)cl_config_n_visual(c) * c->dec_dim;
    g_assert_nonnull(table);
    g_autoptr(ClTrainSample) s = micro_sample(m, 5);
    check_model_grads(m, s, TRUE, label);
    ClTrainGradOptions o;
    cl_train_grad_options_init(&o);
    double with = loss_of(m, s, &o);
    memset(table, 0, n * sizeof(float));
    double without = loss_of(m, s, &o);
    g_test_message("%s: loss with the table %.6f, with it zeroed %.6f", label, with, without);
    g_assert_cmpfloat(fabs(with - without), >, 1e-4);
}

/* The learned visual positions (merger.pos): their gradient is the visual tokens' gradient
 * summed over the images. */
static void test_visual_pos(void)
{
    check_position_table(&micro_visual_pos, 131, "cross_ffn/visual_pos");
}

/* The learned patch positions (enc.pos, added to the patch embedding before the SVE blocks):
 * their gradient is the embedding's gradient summed over the images, the successor's reading of
 * the state included. */
static void test_enc_pos(void)
{
    check_position_table(&micro_enc_pos, 139, "cross_ffn/enc_pos");
}

static void test_parity(gconstpointer data);

/* PVM (its gate α perturbed away from 0 like every parameter): every PVM tensor's gradient,
 * the gates' included, against finite differences with the rest of the model; the branch
 * changes the loss; the training forward computes what inference computes; the answer-tail
 * pruning keeps the gradients. */
static void test_answer_tail(void);

/* CASA (both variants): every tensor's gradient (the windows' keys and values included, back
 * into the encoder through the visual rows) against finite differences; the training forward
 * computes what inference computes (text rows; visual rows' logits 0); a visual row asked to be
 * supervised is refused. */
static void test_casa(gconstpointer data)
{
    micro_casa = GPOINTER_TO_INT(data);
    g_autoptr(ClModel) m = micro_model(CL_SVE_CROSS_FFN, CL_SVE_FIRST_OWN, 161 + micro_casa);
    g_autoptr(ClTrainSample) s = micro_sample(m, 5);
    /* only text rows predict (a visual row has no logits under CASA) */
    for (int t = 0; t < s->n_ids; t++)
        if (s->ids[t] < 0 && s->mask[t]) {
            s->mask[t] = 0;
            s->n_supervised--;
        }
    g_autofree char *label = g_strdup_printf("cross_ffn/casa %s", cl_casa_variant_name(micro_casa));
    check_model_grads(m, s, TRUE, label);
    check_model_grads(m, s, FALSE, label);
    test_parity(GINT_TO_POINTER(CL_SVE_CROSS_FFN));
    /* a supervised visual row */
    g_autoptr(ClTrainSample) bad = micro_sample(m, 5);
    ClTrainGradOptions o;
    cl_train_grad_options_init(&o);
    ClTrainStepStats st = { 0 };
    g_autoptr(GError) err = NULL;
    g_autoptr(ClParamBuf) g = cl_param_buf_new(&m->config, &err);
    g_assert_false(cl_train_forward_backward(be, m, bad, &o, g, &st, &err));
    g_assert_nonnull(strstr(err->message, "visual row"));
    micro_casa = CL_CASA_OFF;
}

/* CA^#: the micro decoder's layer 1 has the cross-attention alone */
static void test_casa_replace(void)
{
    micro_casa_replace = 2;
    test_casa(GINT_TO_POINTER(CL_CASA_CA));
    micro_casa_replace = 0;
}

/* CA_{t+v}: the cross-attention over the window's visual rows and its text, with RoPE; ca and
 * ca_shared, and with CA^# (its last layer the cross-attention alone) */
static void test_casa_tv(void)
{
    micro_casa_tv = TRUE;
    test_casa(GINT_TO_POINTER(CL_CASA_CA));
    test_casa(GINT_TO_POINTER(CL_CASA_SHARED));
    micro_casa_replace = 2;
    test_casa(GINT_TO_POINTER(CL_CASA_CA));
    micro_casa_replace = 0;
    micro_casa_tv = FALSE;
}

static void test_pvm(void)
{
    micro_pvm = TRUE;
    g_autoptr(ClModel) m = micro_model(CL_SVE_CROSS_FFN, CL_SVE_FIRST_OWN, 151);
    micro_pvm = FALSE;
    g_assert_nonnull(m->w.dec[1].pvm_alpha);
    g_autoptr(ClTrainSample) s = micro_sample(m, 5);
    check_model_grads(m, s, TRUE, "cross_ffn/pvm");
    check_model_grads(m, s, FALSE, "cross_ffn/pvm");
    ClTrainGradOptions o;
    cl_train_grad_options_init(&o);
    double with = loss_of(m, s, &o);
    m->w.dec[0].pvm_alpha[0] = m->w.dec[1].pvm_alpha[0] = 0;
    double without = loss_of(m, s, &o);
    g_test_message("pvm: loss with the branch %.6f, with α = 0 %.6f", with, without);
    g_assert_cmpfloat(fabs(with - without), >, 1e-4);
    micro_pvm = TRUE;
    test_parity(GINT_TO_POINTER(CL_SVE_CROSS_FFN));
    test_answer_tail();
    micro_pvm = FALSE;
}

/* The training forward against inference (the encoder image by image, cl_decoder_forward's
 * prefill in chunks with any GDN state carried) for model m on sample s: the visual tokens' and
 * the logits' max |diff| and largest |value| (vmax and vref may be NULL). */
static void parity(const ClModel *m, const ClTrainSample *s, double *vmax, double *vref,
                   double *lmax, double *lref)
{
    const ClModelConfig *cfg = &m->config;
    const int M = cl_config_n_visual(cfg), E = cfg->dec_dim, V = cfg->vocab_size;
    g_autoptr(GError) err = NULL;
    g_autofree float *tv = NULL, *tl = NULL;
    g_assert_true(cl_train_forward_outputs(be, m, s, &tv, &tl, &err));
    g_assert_no_error(err);
    g_autoptr(ClEncoderState) st = cl_encoder_state_new(m);
    g_autofree float *iv = g_new(float, (size_t)N_IMAGES * M * E);
    const size_t img = (size_t)cfg->channels * cfg->image_size * cfg->image_size;
    for (int t = 0; t < N_IMAGES; t++) {
        ClEncoderOutput out;
        g_assert_true(
            cl_encoder_forward(be, m, st, s->pixels + t * img, t, FALSE, NULL, NULL, &out, &err));
        memcpy(iv + (size_t)t * M * E, out.visual, (size_t)M * E * sizeof(float));
        cl_encoder_output_clear(&out);
    }
    g_autoptr(ClKVCache) kv = cl_kv_cache_new(m, cfg->max_len);
    g_autofree float *il = g_new(float, (size_t)s->n_ids * V);
    g_assert_true(cl_decoder_forward(be, m, kv, s->ids, s->n_ids, iv, NULL, il, NULL, NULL, &err));
    g_assert_no_error(err);
    double vm = 0, vr = 0;
    for (size_t i = 0; i < (size_t)N_IMAGES * M * E; i++)
        vm = MAX(vm, fabs(tv[i] - iv[i])), vr = MAX(vr, fabs(iv[i]));
    if (vmax)
        *vmax = vm, *vref = vr;
    *lmax = *lref = 0;
    for (size_t i = 0; i < (size_t)s->n_ids * V; i++) {
        g_assert_true(isfinite(tl[i]) && isfinite(il[i]));
        *lmax = MAX(*lmax, fabs(tl[i] - il[i])), *lref = MAX(*lref, fabs(il[i]));
    }
}

/* The Gated DeltaNet hybrid: every tensor's gradient (each gdn_* of both GDN layers, A_log and
 * dt_bias included) against finite differences with the rest of the model, with and without
 * stop_grad; the GDN layers change the loss; the training forward computes what inference
 * computes; the answer tail through a GDN last layer keeps the gradients; and a model trained a
 * few steps, saved and loaded back, gives the trainer's logits through the inference decoder. */
static void test_hybrid(void)
{
    micro_hybrid = TRUE;
    /* a smaller step: the unit normalisation of q and k bends sharply enough that the central
     * difference's truncation at 4e-3 reaches 2e-3 norm-wise (it falls as the step's square:
     * 4e-4 at 1.5e-3, where the f32 loss's rounding is still below it) */
    fd_eps = 1.5e-3;
    g_autoptr(ClModel) m = micro_model(CL_SVE_CROSS_FFN, CL_SVE_FIRST_OWN, 171);
    g_assert_nonnull(m->w.dec[1].gdn_q);
    g_assert_nonnull(m->w.dec[2].gdn_A_log);
    g_assert_null(m->w.dec[1].q);
    g_assert_nonnull(m->w.dec[0].q);
    g_autoptr(ClTrainSample) s = micro_sample(m, 5);
    check_model_grads(m, s, TRUE, "cross_ffn/hybrid");
    check_model_grads(m, s, FALSE, "cross_ffn/hybrid");
    /* the branch matters: its output projections at 0 give another loss */
    ClTrainGradOptions o;
    cl_train_grad_options_init(&o);
    double with = loss_of(m, s, &o);
    const size_t no = (size_t)m->config.dec_dim * m->config.gdn_heads * m->config.gdn_dv;
    g_autofree float *keep = g_memdup2(m->w.dec[1].gdn_o, no * sizeof(float));
    memset(m->w.dec[1].gdn_o, 0, no * sizeof(float));
    double without = loss_of(m, s, &o);
    memcpy(m->w.dec[1].gdn_o, keep, no * sizeof(float));
    g_test_message("hybrid: loss %.6f, with layer 1's GDN output at 0 %.6f", with, without);
    g_assert_cmpfloat(fabs(with - without), >, 1e-4);

    double lmax, lref;
    parity(m, s, NULL, NULL, &lmax, &lref);
    g_test_message("hybrid parity: logits max abs diff %.2e (of %.2f)", lmax, lref);
    g_assert_cmpfloat(lref, >, 0);
    g_assert_cmpfloat(lmax, <=, 1e-5 * lref);
    test_answer_tail();

    /* a few plain gradient steps, saved (F32) and loaded back: the file's tensors are the
     * trained ones, and inference reads them as the trainer does */
    for (int step = 0; step < 5; step++) {
        g_autoptr(ClParamBuf) g = grads_of(m, s, TRUE);
        for (size_t i = 0; i < m->n_params; i++)
            m->arena[i] -= 0.05f * g->data[i];
        cl_model_weights_changed(m);
    }
    double trained = loss_of(m, s, &o);
    g_test_message("hybrid: loss after 5 steps %.6f (from %.6f)", trained, with);
    g_assert_cmpfloat(trained, <, with);
    g_autofree char *dir = g_dir_make_tmp("cl-hybrid-XXXXXX", NULL);
    g_assert_nonnull(dir);
    g_autofree char *path = g_build_filename(dir, "model.safetensors", NULL);
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_model_save(m, path, "F32", &err));
    g_assert_no_error(err);
    g_autoptr(ClModel) back = cl_model_load(path, &err);
    g_assert_no_error(err);
    g_assert_cmpint(back->config.hybrid_every, ==, 3);
    g_assert_cmpmem(back->w.dec[2].gdn_dt_bias, sizeof(float) * back->config.gdn_heads,
                    m->w.dec[2].gdn_dt_bias, sizeof(float) * m->config.gdn_heads);
    double bmax, bref;
    parity(back, s, NULL, NULL, &bmax, &bref);
    g_test_message("hybrid, trained and reloaded: logits max abs diff %.2e (of %.2f); the "
                   "reloaded loss %.6f",
                   bmax, bref, loss_of(back, s, &o));
    g_assert_cmpfloat(bref, >, 0);
    g_assert_cmpfloat(bmax, <=, 1e-5 * bref);
    g_assert_cmpfloat(fabs(loss_of(back, s, &o) - trained), <=, 1e-6 * trained);
    g_unlink(path);
    g_rmdir(dir);
    micro_hybrid = FALSE;
    fd_eps = FD_EPS;
}

/* enc.pos: the training forward computes what inference computes */
static void test_enc_pos_parity(void)
{
    micro_enc_pos = TRUE;
    test_parity(GINT_TO_POINTER(CL_SVE_CROSS_FFN));
    micro_enc_pos = FALSE;
}

/* Centred visual tokens: the gradient (the centring applied to the visual tokens' gradient)
 * against finite differences, with the learned positions added after it; a constant added to
 * every visual token (the merger's output bias) then cannot change the loss, and without the
 * centring it does; the inference encoder's tokens have zero mean over the image. */
static void test_visual_center(void)
{
    micro_visual_pos = micro_visual_center = TRUE;
    g_autoptr(ClModel) m = micro_model(CL_SVE_CROSS_FFN, CL_SVE_FIRST_OWN, 137);
    micro_visual_pos = micro_visual_center = FALSE;
    g_autoptr(ClTrainSample) s = micro_sample(m, 5);
    check_model_grads(m, s, TRUE, "cross_ffn/visual_center");
    ClTrainGradOptions o;
    cl_train_grad_options_init(&o);
    const int E = m->config.dec_dim;
    double before = loss_of(m, s, &o);
    for (int j = 0; j < E; j++)
        m->w.merger_fc2_b[j] += 0.5f * (float)((j % 3) - 1);
    double shifted = loss_of(m, s, &o);
    g_test_message("centred: loss %.9f, with the output bias shifted %.9f", before, shifted);
    g_assert_cmpfloat(fabs(shifted - before), <, 1e-6 * fabs(before) + 1e-9);
    m->config.visual_center = FALSE;
    double uncentred = loss_of(m, s, &o);
    for (int j = 0; j < E; j++)
        m->w.merger_fc2_b[j] -= 0.5f * (float)((j % 3) - 1);
    double uncentred0 = loss_of(m, s, &o);
    g_test_message("not centred: loss %.9f, shifted %.9f", uncentred0, uncentred);
    g_assert_cmpfloat(fabs(uncentred - uncentred0), >, 1e-4);
    m->config.visual_center = TRUE;

    /* the inference encoder: zero column means before the positions (zeroed here) */
    memset(m->w.merger_pos, 0, (size_t)cl_config_n_visual(&m->config) * E * sizeof(float));
    g_autoptr(GError) err = NULL;
    g_autoptr(ClBackend) be = cl_backend_cpu_new(1);
    g_autoptr(ClEncoderState) st = cl_encoder_state_new(m);
    g_assert_nonnull(be);
    g_assert_nonnull(st);
    const int S = m->config.image_size;
    g_autofree float *px = g_new(float, (size_t)3 * S * S);
    for (int i = 0; i < 3 * S * S; i++)
        px[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    ClEncoderOutput out;
    g_assert_true(cl_encoder_forward(be, m, st, px, 0, FALSE, NULL, NULL, &out, &err));
    g_assert_no_error(err);
    double worst = 0, size = 0;
    for (int j = 0; j < E; j++) {
        double mean = 0;
        for (int i = 0; i < out.n_visual; i++) {
            mean += out.visual[(size_t)i * E + j];
            size = MAX(size, fabs(out.visual[(size_t)i * E + j]));
        }
        worst = MAX(worst, fabs(mean / out.n_visual));
    }
    cl_encoder_output_clear(&out);
    g_test_message("largest column mean %.3g (largest entry %.3g)", worst, size);
    g_assert_cmpfloat(size, >, 1e-3);
    g_assert_cmpfloat(worst, <, 1e-5 * size);
}

/* With every SVE output projection zeroed the module reads the state but passes nothing on, so
 * no path leads from an earlier image to the loss through the state: stop_grad must then change
 * nothing, bit for bit (no spurious gradient into the predecessor's pass). */
static void test_stop_grad_zero_module(void)
{
    g_autoptr(ClModel) m = micro_model(CL_SVE_CROSS_FFN, CL_SVE_FIRST_OWN, 3);
    for (int l = 0; l < m->config.enc_depth; l++) {
        const int D = m->config.enc_dim, F = m->config.enc_mlp;
        memset(m->w.enc[l].sve_out_w, 0, (size_t)D * D * sizeof(float));
        memset(m->w.enc[l].sve_fc2_w, 0, (size_t)D * F * sizeof(float));
    }
    g_autoptr(ClTrainSample) s = micro_sample(m, 9);
    g_autoptr(ClParamBuf) a = grads_of(m, s, TRUE);
    g_autoptr(ClParamBuf) b = grads_of(m, s, FALSE);
    g_assert_cmpmem(a->data, a->n * sizeof(float), b->data, b->n * sizeof(float));
}

/* The decoder runs q/k/v and gate/up as stacked products over a trainable model's consecutive
 * tensors; weights and gradients stored apart (a model as loaded) take the copying path, with
 * the same gradients. */
static void test_dec_unstacked(void)
{
    g_autoptr(ClModel) m = micro_model(CL_SVE_CROSS_FFN, CL_SVE_FIRST_OWN, 5);
    g_autoptr(ClTrainSample) s = micro_sample(m, 12);
    g_autoptr(ClParamBuf) want = grads_of(m, s, TRUE);
    const ClModelConfig *cfg = &m->config;
    const int E = cfg->dec_dim, hd = E / cfg->dec_heads, KV = cfg->dec_kv_heads * hd;
    const size_t nq = (size_t)cfg->dec_heads * hd * E, nkv = (size_t)KV * E;
    const size_t nup = (size_t)cfg->dec_mlp * E;
    g_autoptr(GPtrArray) own = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClParamBuf) got = cl_param_buf_new(cfg, &err);
    g_assert_no_error(err);
    float *saved[3 * 8];
    g_assert_cmpint(cfg->dec_depth, <=, 8);
    for (int l = 0; l < cfg->dec_depth; l++) {
        ClDecoderLayerWeights *L = &m->w.dec[l], *G = &got->w.dec[l];
        saved[3 * l] = L->k, saved[3 * l + 1] = L->v, saved[3 * l + 2] = L->up;
        L->k = g_memdup2(L->k, nkv * sizeof(float)), g_ptr_array_add(own, L->k);
        L->v = g_memdup2(L->v, nkv * sizeof(float)), g_ptr_array_add(own, L->v);
        L->up = g_memdup2(L->up, nup * sizeof(float)), g_ptr_array_add(own, L->up);
        G->k = g_new0(float, nkv), g_ptr_array_add(own, G->k);
        G->up = g_new0(float, nup), g_ptr_array_add(own, G->up);
    }
    ClTrainGradOptions o;
    cl_train_grad_options_init(&o);
    ClTrainStepStats st = { 0 };
    g_assert_true(cl_train_forward_backward(be, m, s, &o, got, &st, &err));
    g_assert_no_error(err);
    for (int l = 0; l < cfg->dec_depth; l++) {
        const ClDecoderLayerWeights *W = &want->w.dec[l], *G = &got->w.dec[l];
        const struct {
            const float *a, *b;
            size_t n;
        } t[] = {
            { W->q, G->q, nq },        { W->k, G->k, nkv },   { W->v, G->v, nkv },
            { W->gate, G->gate, nup }, { W->up, G->up, nup }, { W->o, G->o, nq },
        };
        for (guint i = 0; i < G_N_ELEMENTS(t); i++)
            for (size_t j = 0; j < t[i].n; j++)
                g_assert_cmpfloat_with_epsilon(t[i].a[j], t[i].b[j],
                                               1e-5 + 1e-4 * fabsf(t[i].a[j]));
        m->w.dec[l].k = saved[3 * l], m->w.dec[l].v = saved[3 * l + 1];
        m->w.dec[l].up = saved[3 * l + 2];
    }
}

/* The training forward computes what inference computes. */
static void test_parity(gconstpointer data)
{
    ClSveVariant v = GPOINTER_TO_INT(data);
    g_autoptr(ClModel) m = micro_model(v, CL_SVE_FIRST_NULL, 21);
    g_autoptr(ClTrainSample) s = micro_sample(m, 22);
    double vmax, vref, lmax, lref;
    parity(m, s, &vmax, &vref, &lmax, &lref);
    g_test_message("parity %-10s visual max diff %.2e (of %.2f), logits max diff %.2e (of %.2f)",
                   cl_sve_variant_name(v), vmax, vref, lmax, lref);
    g_assert_cmpfloat(vmax, <=, 1e-5 * vref);
    g_assert_cmpfloat(lmax, <=, 1e-5 * lref);
}

/* Only the answer at the end supervised: the decoder's last layer runs past its keys and values
 * on the answer's rows alone (cl_train_dec_forward's tail). Its gradients against finite
 * differences, and the pruned pass against the whole one (every row's logits, the unsupervised
 * ones given no gradient): the same logits, parameter gradients and visual gradients. */
static void test_answer_tail(void)
{
    g_autoptr(ClModel) m = micro_model(CL_SVE_CROSS_FFN, CL_SVE_FIRST_NULL, 31);
    g_autoptr(ClTrainSample) s = micro_sample(m, 32);
    enum { A = 3 }; /* the last A predictions supervised */
    const int n = s->n_ids;
    memset(s->mask, 0, (size_t)n);
    s->n_supervised = 0;
    for (int t = n - 1 - A; t + 1 < n; t++)
        s->mask[t] = 1, s->n_supervised++;
    check_model_grads(m, s, TRUE, "answer tail");

    const ClModelConfig *cfg = &m->config;
    const int E = cfg->dec_dim, V = cfg->vocab_size, NV = N_IMAGES * cl_config_n_visual(cfg);
    int rows[A];
    for (int r = 0; r < A; r++)
        rows[r] = n - 1 - A + r;
    GRand *rnd = g_rand_new_with_seed(33);
    g_autofree float *visual = g_new(float, (size_t)NV * E);
    for (size_t i = 0; i < (size_t)NV * E; i++)
        visual[i] = (float)g_rand_double_range(rnd, -1, 1);
    g_autofree float *dl_tail = g_new(float, (size_t)A * V);
    g_autofree float *dl_all = g_new0(float, (size_t)n * V);
    for (int r = 0; r < A; r++)
        for (int j = 0; j < V; j++)
            dl_tail[(size_t)r * V + j] = dl_all[(size_t)rows[r] * V + j] =
                (float)g_rand_double_range(rnd, -1, 1);
    g_rand_free(rnd);

    g_autoptr(GError) err = NULL;
    g_autofree float *lt = g_new(float, (size_t)A * V), *la = g_new(float, (size_t)n * V);
    g_autofree float *vt = g_new(float, (size_t)NV * E), *va = g_new(float, (size_t)NV * E);
    g_autoptr(ClParamBuf) gt = cl_param_buf_new(cfg, &err);
    g_autoptr(ClParamBuf) ga = cl_param_buf_new(cfg, &err);
    ClTrainDec *dt = cl_train_dec_forward(be, m, s->ids, n, visual, rows, A, lt, &err);
    g_assert_no_error(err);
    cl_train_dec_backward(dt, &m->w, dl_tail, vt, &gt->w);
    cl_train_dec_free(dt);
    ClTrainDec *da = cl_train_dec_forward(be, m, s->ids, n, visual, NULL, 0, la, &err);
    g_assert_no_error(err);
    cl_train_dec_backward(da, &m->w, dl_all, va, &ga->w);
    cl_train_dec_free(da);

    double lmax = 0, lref = 0;
    for (int r = 0; r < A; r++)
        for (int j = 0; j < V; j++) {
            float x = lt[(size_t)r * V + j], y = la[(size_t)rows[r] * V + j];
            lmax = MAX(lmax, fabs(x - y)), lref = MAX(lref, fabs(y));
        }
    double gd = 0, gn = 0, vd = 0, vn = 0;
    for (size_t i = 0; i < gt->n; i++)
        gd += ((double)gt->data[i] - ga->data[i]) * ((double)gt->data[i] - ga->data[i]),
            gn += (double)ga->data[i] * ga->data[i];
    for (size_t i = 0; i < (size_t)NV * E; i++)
        vd += ((double)vt[i] - va[i]) * ((double)vt[i] - va[i]), vn += (double)va[i] * va[i];
    g_test_message("answer tail: logits max diff %.2e (of %.2f), gradients rel %.2e, visual "
                   "gradients rel %.2e",
                   lmax, lref, sqrt(gd / gn), sqrt(vd / vn));
    g_assert_cmpfloat(lref, >, 0);
    g_assert_cmpfloat(lmax, <=, 1e-5 * lref);
    g_assert_cmpfloat(gn, >, 0);
    g_assert_cmpfloat(vn, >, 0);
    g_assert_cmpfloat(sqrt(gd / gn), <, 1e-5);
    g_assert_cmpfloat(sqrt(vd / vn), <, 1e-5);
}

static void test_determinism(void)
{
    g_autoptr(ClModel) m = micro_model(CL_SVE_CROSS_FFN, CL_SVE_FIRST_OWN, 31);
    g_autoptr(ClTrainSample) s = micro_sample(m, 32);
    g_autoptr(ClParamBuf) a = grads_of(m, s, TRUE);
    g_autoptr(ClParamBuf) b = grads_of(m, s, TRUE);
    g_assert_cmpmem(a->data, a->n * sizeof(float), b->data, b->n * sizeof(float));
    /* and gradients accumulate: a second call adds the same again */
    g_autoptr(GError) err = NULL;
    ClTrainGradOptions o;
    cl_train_grad_options_init(&o);
    g_assert_true(cl_train_forward_backward(be, m, s, &o, b, NULL, &err));
    for (size_t i = 0; i < a->n; i++)
        g_assert_cmpfloat(fabs(b->data[i] - 2 * a->data[i]), <=, 1e-6 * (1 + fabs(a->data[i])));
}

/* ---- the auxiliary losses ------------------------------------------------------------------ */

/* The sample's dense targets on the model's grid: random object bitmasks (about half the
 * patches empty) and change flags for images 1.. (image 0's are 0, as core/synth writes). */
static void add_aux_targets(const ClModel *m, ClTrainSample *s, guint32 seed)
{
    const int G = cl_config_grid(&m->config);
    const size_t n = (size_t)s->n_images * G * G;
    GRand *r = g_rand_new_with_seed(seed);
    s->grid = G;
    s->aux_objects = g_new0(guint64, n);
    s->aux_changed = g_new0(guint8, n);
    s->aux_labels = g_new0(guint32, n);
    for (size_t i = 0; i < n; i++) {
        if (g_rand_boolean(r)) {
            s->aux_objects[i] = (guint64)1 << g_rand_int_range(r, 0, 64);
            s->aux_labels[i] = (guint32)g_rand_int_range(r, 1, 1 << CL_TRAIN_AUX_N_LABELS);
        }
        s->aux_changed[i] = i >= (size_t)G * G && g_rand_int_range(r, 0, 3) == 0;
    }
    g_rand_free(r);
}

static ClTrainAuxHeads *random_heads(int dim, guint32 seed)
{
    g_autoptr(GError) err = NULL;
    ClTrainAuxHeads *h = cl_train_aux_heads_new(dim, &err);
    g_assert_no_error(err);
    GRand *r = g_rand_new_with_seed(seed);
    for (size_t i = 0; i < h->n; i++)
        h->data[i] = (float)g_rand_double_range(r, -0.5, 0.5);
    g_rand_free(r);
    return h;
}

static double total_loss_of(const ClModel *m, const ClTrainSample *s, const ClTrainGradOptions *o)
{
    ClTrainStepStats st = { 0 };
    g_autoptr(GError) err = NULL;
    g_assert_true(cl_train_loss(be, m, s, o, &st, &err));
    g_assert_no_error(err);
    return st.total_loss;
}

/* Finite differences of the whole loss (caption + 0.7 objects + 1.3 changed) on every model
 * tensor (FD_PER_TENSOR entries) and every entry of the heads, stop_grad as in training. */
static void check_aux_fd(ClSveVariant v, gboolean visual)
{
    g_autoptr(ClModel) m = micro_model(v, CL_SVE_FIRST_OWN, 200 + v);
    g_autoptr(ClTrainSample) s = micro_sample(m, 61);
    add_aux_targets(m, s, 62);
    const int width = visual ? m->config.dec_dim : m->config.enc_dim;
    g_autoptr(ClTrainAuxHeads) heads = random_heads(width, 63);
    g_autoptr(GError) err = NULL;
    g_autoptr(ClParamBuf) g = cl_param_buf_new(&m->config, &err);
    g_autoptr(ClTrainAuxHeads) hg = cl_train_aux_heads_new(width, &err);
    ClTrainGradOptions o;
    cl_train_grad_options_init(&o);
    o.aux_objects_weight = 0.7;
    o.aux_changed_weight = 1.3;
    o.aux_on_visual = visual;
    o.aux_heads = heads;
    ClTrainStepStats st = { 0 };
    g_assert_true(cl_train_forward_backward_aux(be, m, s, &o, g, hg, &st, &err));
    g_assert_no_error(err);
    g_assert_true(isfinite(st.aux_objects_loss) && st.aux_objects_loss > 0);
    g_assert_true(isfinite(st.aux_changed_loss) && st.aux_changed_loss > 0);
    g_assert_cmpfloat(
        fabs(st.total_loss - (st.loss + 0.7 * st.aux_objects_loss + 1.3 * st.aux_changed_loss)), <,
        1e-9);

    g_autoptr(ClParamBuf) snap = cl_param_buf_new(&m->config, &err);
    memcpy(snap->data, m->arena, m->n_params * sizeof(float));
    o.state_params = snap;
    size_t *off = NULL;
    g_autoptr(GPtrArray) specs = cl_param_specs(&m->config, &off);
    GRand *r = g_rand_new_with_seed(64);
    double num = 0, den = 0, worst = 0;
    int n_checked = 0;
    /* entries: the model's (FD_PER_TENSOR per tensor), then every head entry */
    const guint n_tensors = specs->len;
    for (guint i = 0; i <= n_tensors; i++) {
        size_t n = i < n_tensors ? off[i + 1] - off[i] : heads->n;
        int k = i < n_tensors ? (int)MIN(n, FD_PER_TENSOR) : (int)n;
        for (int j = 0; j < k; j++) {
            size_t at = i == n_tensors || n <= FD_PER_TENSOR
                            ? (size_t)j
                            : (size_t)g_rand_int_range(r, 0, (int)n);
            float *p = i < n_tensors ? &m->arena[off[i] + at] : &heads->data[at];
            double an = i < n_tensors ? g->data[off[i] + at] : hg->data[at];
            float keep = *p;
            *p = keep + (float)FD_EPS;
            double lp = total_loss_of(m, s, &o);
            *p = keep - (float)FD_EPS;
            double lm = total_loss_of(m, s, &o);
            *p = keep;
            double fd = (lp - lm) / (2 * FD_EPS);
            num += (fd - an) * (fd - an);
            den += fd * fd;
            /* as check_model_grads: f32 finite-difference noise or 2 % */
            worst = MAX(worst, fabs(fd - an) / (3e-4 + 0.02 * fabs(fd)));
            n_checked++;
        }
    }
    double rel = sqrt(num / den);
    g_test_message("aux fd %-10s %-7s %d entries, rel err %.2e, worst %.2f of its tolerance",
                   cl_sve_variant_name(v), visual ? "visual" : "patches", n_checked, rel, worst);
    g_assert_cmpfloat(rel, <, 5e-3);
    g_assert_cmpfloat(worst, <, 1.0);
    /* the heads' gradient is not trivially zero (the check above would pass on zeros); with
     * config.change_head the changed term trains the model's enc.change instead */
    const float changed_b = m->w.enc_change_b ? g->w.enc_change_b[0] : hg->changed_b[0];
    /* with config.n_objects the objects term trains the model's enc.objects instead */
    const float *objects_b = m->w.enc_objects_b && !visual ? g->w.enc_objects_b : hg->objects_b;
    g_assert_cmpfloat(fabs(objects_b[0]), >, 1e-4);
    g_assert_cmpfloat(fabs(changed_b), >, 1e-4);
    if (m->w.enc_change_b)
        g_assert_cmpfloat(fabs(hg->changed_b[0]), ==, 0);
    if (m->w.enc_objects_b && !visual)
        g_assert_cmpfloat(fabs(hg->objects_b[0]), ==, 0);
    for (int k = 1; k < CL_TRAIN_AUX_N_OBJECT_OUT; k++)
        g_assert_cmpfloat(fabs(objects_b[k]), >, 1e-6);
    g_rand_free(r);
    g_free(off);
}

static void test_aux_fd(gconstpointer data)
{
    check_aux_fd(GPOINTER_TO_INT(data), FALSE);
}

/* config.change_head: the changed loss trains the model's own head (enc.change.*, checked
 * with every other tensor against finite differences), and the inference encoder's change
 * probabilities are sigmoid(w·x + b) of the training forward's final patch tokens. */
static void test_change_head(void)
{
    micro_change_head = TRUE;
    check_aux_fd(CL_SVE_CROSS_FFN, FALSE);
    g_autoptr(ClModel) m = micro_model(CL_SVE_CROSS_FFN, CL_SVE_FIRST_OWN, 171);
    micro_change_head = FALSE;
    g_autoptr(ClTrainSample) s = micro_sample(m, 172);
    const ClModelConfig *cfg = &m->config;
    const int N = cl_config_n_patches(cfg), D = cfg->enc_dim, S = cfg->image_size;
    const size_t img = (size_t)cfg->channels * S * S;
    g_autoptr(GError) err = NULL;
    g_autofree float *visual =
        g_new(float, (size_t)s->n_images * cl_config_n_visual(cfg) *
                                                cfg->dec_dim);
    ClTrainEnc *enc =
        cl_train_enc_forward(be, m, &m->w, s->pixels, (int)s->n_images, NULL, visual, &err);
    g_assert_no_error(err);
    g_autoptr(ClEncoderState) st = cl_encoder_state_new(m);
    double worst = 0;
    for (guint t = 0; t < s->n_images; t++) {
        ClEncoderOutput out = { 0 };
        g_assert_true(cl_encoder_forward(be, m, st, s->pixels + t * img, (int)t, FALSE, NULL, NULL,
                                         &out, &err));
        g_assert_no_error(err);
        if (t == 0) {
            g_assert_null(out.change_prob); /* a first image has nothing to change from */
        } else {
            g_assert_nonnull(out.change_prob);
            const float *x = cl_train_enc_tokens(enc, (int)t);
            for (int p = 0; p < N; p++) {
                double z = m->w.enc_change_b[0];
                for (int d = 0; d < D; d++)
                    z += (double)m->w.enc_change_w[d] * x[(size_t)p * D + d];
                worst = MAX(worst, fabs(out.change_prob[p] - 1.0 / (1.0 + exp(-z))));
            }
        }
        cl_encoder_output_clear(&out);
    }
    cl_train_enc_free(enc);
    g_test_message("change head: inference vs training probabilities, max diff %.2e", worst);
    g_assert_cmpfloat(worst, <, 1e-5);
}

/* config.n_objects: the objects loss trains the model's own object head (enc.objects.*,
 * checked with every other tensor against finite differences), and the inference encoder's
 * object logits are w·x + b of the training forward's final patch tokens, for every image. */
static void test_object_head(void)
{
    micro_object_head = TRUE;
    check_aux_fd(CL_SVE_CROSS_FFN, FALSE);
    g_autoptr(ClModel) m = micro_model(CL_SVE_CROSS_FFN, CL_SVE_FIRST_OWN, 175);
    micro_object_head = FALSE;
    g_assert_nonnull(m->w.enc_objects_w);
    g_autoptr(ClTrainSample) s = micro_sample(m, 176);
    const ClModelConfig *cfg = &m->config;
    const int N = cl_config_n_patches(cfg), D = cfg->enc_dim, S = cfg->image_size;
    const int K = CL_CONFIG_OBJECT_OUT;
    const size_t img = (size_t)cfg->channels * S * S;
    g_autoptr(GError) err = NULL;
    g_autofree float *visual =
        g_new(float, (size_t)s->n_images * cl_config_n_visual(cfg) * cfg->dec_dim);
    ClTrainEnc *enc =
        cl_train_enc_forward(be, m, &m->w, s->pixels, (int)s->n_images, NULL, visual, &err);
    g_assert_no_error(err);
    g_autoptr(ClEncoderState) st = cl_encoder_state_new(m);
    double worst = 0;
    for (guint t = 0; t < s->n_images; t++) {
        ClEncoderOutput out = { 0 };
        g_assert_true(cl_encoder_forward(be, m, st, s->pixels + t * img, (int)t, FALSE, NULL, NULL,
                                         &out, &err));
        g_assert_no_error(err);
        g_assert_nonnull(out.object_logits); /* every image, the first too */
        const float *x = cl_train_enc_tokens(enc, (int)t);
        for (int p = 0; p < N; p++)
            for (int k = 0; k < K; k++) {
                double z = m->w.enc_objects_b[k];
                for (int d = 0; d < D; d++)
                    z += (double)m->w.enc_objects_w[(size_t)k * D + d] * x[(size_t)p * D + d];
                worst = MAX(worst, fabs(out.object_logits[(size_t)p * K + k] - z));
            }
        cl_encoder_output_clear(&out);
    }
    cl_train_enc_free(enc);
    g_test_message("object head: inference vs training logits, max diff %.2e", worst);
    g_assert_cmpfloat(worst, <, 1e-4);
}

/* config.change_marker: merger.change and the path through the change head's probabilities
 * (q_m, the largest of a token's four) checked against finite differences with every other
 * tensor; the inference encoder's visual tokens are the training forward's, marker included,
 * and the marker moves the tokens of the images after the first by q_m · merger.change. */
static void test_change_marker(void)
{
    micro_change_head = micro_change_marker = TRUE;
    check_aux_fd(CL_SVE_CROSS_FFN, FALSE);
    g_autoptr(ClModel) m = micro_model(CL_SVE_CROSS_FFN, CL_SVE_FIRST_OWN, 173);
    micro_change_head = micro_change_marker = FALSE;
    g_assert_nonnull(m->w.merger_change);
    g_autoptr(ClTrainSample) s = micro_sample(m, 174);
    const ClModelConfig *cfg = &m->config;
    const int M = cl_config_n_visual(cfg), E = cfg->dec_dim, S = cfg->image_size;
    const int G = cl_config_grid(cfg);
    const size_t img = (size_t)cfg->channels * S * S, ME = (size_t)M * E;
    g_autoptr(GError) err = NULL;
    g_autofree float *visual = g_new(float, s->n_images * ME);
    ClTrainEnc *enc =
        cl_train_enc_forward(be, m, &m->w, s->pixels, (int)s->n_images, NULL, visual, &err);
    g_assert_no_error(err);
    /* the same forward without the marker */
    g_autofree float *keep = g_memdup2(m->w.merger_change, (size_t)E * sizeof(float));
    memset(m->w.merger_change, 0, (size_t)E * sizeof(float));
    cl_model_weights_changed(m);
    g_autofree float *plain = g_new(float, s->n_images * ME);
    ClTrainEnc *enc0 =
        cl_train_enc_forward(be, m, &m->w, s->pixels, (int)s->n_images, NULL, plain, &err);
    g_assert_no_error(err);
    cl_train_enc_free(enc0);
    memcpy(m->w.merger_change, keep, (size_t)E * sizeof(float));
    cl_model_weights_changed(m);

    g_autoptr(ClEncoderState) st = cl_encoder_state_new(m);
    double worst = 0, worst_mark = 0, moved = 0;
    g_autofree float *q = g_new(float, M);
    for (guint t = 0; t < s->n_images; t++) {
        ClEncoderOutput out = { 0 };
        g_assert_true(cl_encoder_forward(be, m, st, s->pixels + t * img, (int)t, FALSE, NULL, NULL,
                                         &out, &err));
        g_assert_no_error(err);
        const float *v = visual + t * ME, *v0 = plain + t * ME;
        for (size_t i = 0; i < ME; i++)
            worst = MAX(worst, fabs(out.visual[i] - v[i]));
        if (t == 0) {
            for (size_t i = 0; i < ME; i++) /* a first image is not marked */
                g_assert_cmpfloat(v[i], ==, v0[i]);
        } else {
            cl_change_marker_pool(out.change_prob, G, q, NULL);
            for (int i = 0; i < M; i++) {
                g_assert_cmpfloat(q[i], >, 0);
                for (int e = 0; e < E; e++) {
                    const size_t at = (size_t)i * E + e;
                    worst_mark = MAX(worst_mark, fabs(v[at] - v0[at] - q[i] * keep[e]));
                    moved = MAX(moved, fabs(v[at] - v0[at]));
                }
            }
        }
        cl_encoder_output_clear(&out);
    }
    cl_train_enc_free(enc);
    g_test_message("change marker: inference vs training %.2e, marker %.2e, largest move %.3f",
                   worst, worst_mark, moved);
    g_assert_cmpfloat(worst, <, 1e-4);
    g_assert_cmpfloat(worst_mark, <, 1e-5);
    g_assert_cmpfloat(moved, >, 1e-2);
}

/* The pooled targets: with only an objectness bias b (weights 0), the objects loss is the mean
 * over visual tokens of BCE(b, y), y = 1 when any of the token's 2 x 2 patches has an object */
static void test_aux_visual_targets(void)
{
    g_autoptr(ClModel) m = micro_model(CL_SVE_CROSS_FFN, CL_SVE_FIRST_OWN, 81);
    g_autoptr(ClTrainSample) s = micro_sample(m, 82);
    add_aux_targets(m, s, 83);
    g_clear_pointer(&s->aux_labels, g_free); /* objectness only: one logit */
    const int G = cl_config_grid(&m->config), H = G / 2;
    double want = 0, b = 2.0;
    int n = 0;
    for (guint t = 0; t < s->n_images; t++)
        for (int r = 0; r < H; r++)
            for (int c = 0; c < H; c++, n++) {
                gboolean y = FALSE;
                for (int k = 0; k < 4; k++)
                    y |= s->aux_objects[(t * G + 2 * r + k / 2) * G + 2 * c + k % 2] != 0;
                want += y ? log1p(exp(-b)) : log1p(exp(b));
            }
    want /= n;
    g_autoptr(GError) err = NULL;
    g_autoptr(ClTrainAuxHeads) heads = cl_train_aux_heads_new(m->config.dec_dim, &err);
    heads->objects_b[0] = (float)b;
    ClTrainGradOptions o;
    cl_train_grad_options_init(&o);
    o.aux_objects_weight = 1.0;
    o.aux_on_visual = TRUE;
    o.aux_heads = heads;
    ClTrainStepStats st = { 0 };
    g_assert_true(cl_train_loss(be, m, s, &o, &st, &err));
    g_assert_no_error(err);
    g_test_message("pooled objectness loss %.9f, expected %.9f", st.aux_objects_loss, want);
    g_assert_cmpfloat(fabs(st.aux_objects_loss - want), <, 1e-9);
}

/* The heads on the visual tokens (targets pooled 2 x 2, gradient into the merger's output) */
static void test_aux_fd_visual(void)
{
    check_aux_fd(CL_SVE_CROSS_FFN, TRUE);
}

/* Weights 0, or a sample without targets: the gradient is bit for bit the plain one, the
 * stats' auxiliary losses NaN and the whole loss the caption loss. With targets and weights
 * the encoder's gradient changes (the heads' gradient reaches it). */
static void test_aux_off(void)
{
    g_autoptr(ClModel) m = micro_model(CL_SVE_CROSS_FFN, CL_SVE_FIRST_OWN, 71);
    g_autoptr(ClTrainSample) plain = micro_sample(m, 72);
    g_autoptr(ClTrainSample) with = micro_sample(m, 72);
    add_aux_targets(m, with, 73);
    g_autoptr(ClTrainAuxHeads) heads = random_heads(m->config.enc_dim, 74);
    g_autoptr(ClParamBuf) ref = grads_of(m, plain, TRUE);

    for (int c = 0; c < 3; c++) {
        g_autoptr(GError) err = NULL;
        g_autoptr(ClParamBuf) g = cl_param_buf_new(&m->config, &err);
        g_autoptr(ClTrainAuxHeads) hg = cl_train_aux_heads_new(m->config.enc_dim, &err);
        ClTrainGradOptions o;
        cl_train_grad_options_init(&o);
        o.aux_heads = heads;
        /* 0: weights 0 with targets; 1: weights > 0, no targets; 2: weights > 0 and targets */
        o.aux_objects_weight = o.aux_changed_weight = c == 0 ? 0.0 : 1.0;
        ClTrainStepStats st = { 0 };
        g_assert_true(
            cl_train_forward_backward_aux(be, m, c == 1 ? plain : with, &o, g, hg, &st, &err));
        g_assert_no_error(err);
        double hnorm = 0;
        for (size_t i = 0; i < hg->n; i++)
            hnorm += fabs(hg->data[i]);
        if (c < 2) {
            g_assert_cmpmem(g->data, g->n * sizeof(float), ref->data, ref->n * sizeof(float));
            g_assert_true(isnan(st.aux_objects_loss) && isnan(st.aux_changed_loss));
            g_assert_cmpfloat(st.total_loss, ==, st.loss);
            g_assert_cmpfloat(hnorm, ==, 0.0);
        } else {
            g_assert_true(isfinite(st.aux_objects_loss) && isfinite(st.aux_changed_loss));
            g_assert_cmpfloat(hnorm, >, 0.0);
            double diff = 0;
            for (size_t i = 0; i < g->n; i++)
                diff += fabs((double)g->data[i] - ref->data[i]);
            g_assert_cmpfloat(diff, >, 1e-4);
        }
    }

    /* refused: weights without heads, and targets on another grid */
    g_autoptr(ClParamBuf) g = cl_param_buf_new(&m->config, NULL);
    ClTrainGradOptions o;
    cl_train_grad_options_init(&o);
    o.aux_objects_weight = 1.0;
    g_autoptr(GError) err = NULL;
    g_assert_false(cl_train_forward_backward(be, m, with, &o, g, NULL, &err));
    g_assert_error(err, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT);
    g_clear_error(&err);
    o.aux_heads = heads;
    with->grid = 2;
    g_assert_false(cl_train_forward_backward(be, m, with, &o, g, NULL, &err));
    g_assert_error(err, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT);
    g_test_message("%s", err->message);
}

static void test_bad_samples(void)
{
    g_autoptr(ClModel) m = micro_model(CL_SVE_CROSS, CL_SVE_FIRST_OWN, 41);
    g_autoptr(ClParamBuf) g = cl_param_buf_new(&m->config, NULL);
    ClTrainGradOptions o;
    cl_train_grad_options_init(&o);
    struct {
        const char *what;
        void (*spoil)(ClTrainSample *s);
    } cases[] = {
        { "visual count", NULL },
        { "id range", NULL },
        { "nothing supervised", NULL },
        { "image size", NULL },
        { "supervised visual target", NULL },
    };
    for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
        g_autoptr(ClTrainSample) s = micro_sample(m, 50 + c);
        switch (c) {
        case 0:
            s->ids[1] = 5; /* one visual position fewer than 3 images need */
            break;
        case 1: s->ids[0] = m->config.vocab_size; break;
        case 2: memset(s->mask, 0, s->n_ids); break;
        case 3: s->size = 16; break;
        case 4:
            s->mask[0] = 1; /* position 0 predicts a visual position */
            break;
        }
        g_autoptr(GError) err = NULL;
        ClTrainStepStats st;
        g_assert_false(cl_train_forward_backward(be, m, s, &o, g, &st, &err));
        g_assert_error(err, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT);
        g_test_message("%s: %s", cases[c].what, err->message);
    }
    for (size_t i = 0; i < g->n; i++)
        g_assert_cmpfloat(g->data[i], ==, 0.0f);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    be = cl_backend_cpu_new(2);
    for (int v = 0; v < CL_SVE_N_VARIANTS; v++) {
        g_autofree char *p = g_strdup_printf("/trainmodel/fd/%s", cl_sve_variant_name(v));
        g_test_add_data_func(p, GINT_TO_POINTER(v), test_variant);
    }
    /* the learned null first state */
    const ClSveVariant nulls[] = { CL_SVE_CROSS_FFN, CL_SVE_SELF_EXT, CL_SVE_ADALN_ZERO };
    for (guint i = 0; i < G_N_ELEMENTS(nulls); i++) {
        g_autofree char *p =
            g_strdup_printf("/trainmodel/fd/%s-null", cl_sve_variant_name(nulls[i]));
        g_test_add_data_func(p, GINT_TO_POINTER(16 + nulls[i]), test_variant);
    }
    g_test_add_func("/trainmodel/stop-grad-unread-state", test_stop_grad_zero_module);
    g_test_add_func("/trainmodel/fd/visual-pos", test_visual_pos);
    g_test_add_func("/trainmodel/fd/visual-center", test_visual_center);
    g_test_add_func("/trainmodel/fd/enc-pos", test_enc_pos);
    g_test_add_func("/trainmodel/fd/pvm", test_pvm);
    g_test_add_func("/trainmodel/fd/hybrid", test_hybrid);
    g_test_add_data_func("/trainmodel/fd/casa-ca", GINT_TO_POINTER(CL_CASA_CA), test_casa);
    g_test_add_func("/trainmodel/fd/casa-replace", test_casa_replace);
    g_test_add_func("/trainmodel/fd/casa-tv", test_casa_tv);
    g_test_add_data_func("/trainmodel/fd/casa-shared", GINT_TO_POINTER(CL_CASA_SHARED), test_casa);
    g_test_add_func("/trainmodel/parity/enc-pos", test_enc_pos_parity);
    for (int v = 0; v < CL_SVE_N_VARIANTS; v++) {
        g_autofree char *p = g_strdup_printf("/trainmodel/parity/%s", cl_sve_variant_name(v));
        g_test_add_data_func(p, GINT_TO_POINTER(v), test_parity);
    }
    g_test_add_func("/trainmodel/determinism", test_determinism);
    g_test_add_func("/trainmodel/answer-tail", test_answer_tail);
    g_test_add_func("/trainmodel/decoder-unstacked", test_dec_unstacked);
    g_test_add_func("/trainmodel/bad-samples", test_bad_samples);
    const ClSveVariant aux[] = { CL_SVE_STATELESS, CL_SVE_CROSS_FFN, CL_SVE_SELF_EXT };
    for (guint i = 0; i < G_N_ELEMENTS(aux); i++) {
        g_autofree char *p = g_strdup_printf("/trainmodel/aux/fd/%s", cl_sve_variant_name(aux[i]));
        g_test_add_data_func(p, GINT_TO_POINTER(aux[i]), test_aux_fd);
    }
    g_test_add_func("/trainmodel/aux/off", test_aux_off);
    g_test_add_func("/trainmodel/aux/fd-visual", test_aux_fd_visual);
    g_test_add_func("/trainmodel/aux/change-head", test_change_head);
    g_test_add_func("/trainmodel/aux/object-head", test_object_head);
    g_test_add_func("/trainmodel/aux/change-marker", test_change_marker);
    g_test_add_func("/trainmodel/aux/visual-targets", test_aux_visual_targets);
    int rc = g_test_run();
    cl_backend_free(be);
    return rc;
}
