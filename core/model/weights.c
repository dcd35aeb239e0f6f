/* weights.c - the list of the model's tensors (docs/MODEL.md §3-4): names, shapes, fields. */
#include "model/weights.h"

static void spec_free(gpointer p)
{
    ClWeightSpec *s = p;
    g_free(s->name);
    g_free(s);
}

/* Appends one spec; `slot` may be NULL (names and shapes only). */
static void add(GPtrArray *specs, float **slot, int ndim, gint64 d0, gint64 d1, gint64 d2,
                gint64 d3, const char *fmt, ...) G_GNUC_PRINTF(8, 9);
static void add(GPtrArray *specs, float **slot, int ndim, gint64 d0, gint64 d1, gint64 d2,
                gint64 d3, const char *fmt, ...)
{
    ClWeightSpec *s = g_new0(ClWeightSpec, 1);
    va_list ap;
    va_start(ap, fmt);
    s->name = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    s->ndim = ndim;
    s->shape[0] = d0, s->shape[1] = d1, s->shape[2] = d2, s->shape[3] = d3;
    s->slot = slot;
    g_ptr_array_add(specs, s);
}

#define SLOT(expr) (w ? &(expr) : NULL)
#define V1(slot, a, ...) add(specs, slot, 1, a, 0, 0, 0, __VA_ARGS__)
#define M2(slot, a, b, ...) add(specs, slot, 2, a, b, 0, 0, __VA_ARGS__)

GPtrArray *cl_model_weight_specs(const ClModelConfig *cfg, ClModelWeights *w)
{
    g_return_val_if_fail(cfg != NULL, NULL);
    GPtrArray *specs = g_ptr_array_new_with_free_func(spec_free);
    if (w) {
        if (!w->enc)
            w->enc = g_new0(ClEncoderLayerWeights, cfg->enc_depth);
        if (!w->dec)
            w->dec = g_new0(ClDecoderLayerWeights, cfg->dec_depth);
    }
    const gint64 D = cfg->enc_dim, C = cfg->channels, P = cfg->patch_size, F = cfg->enc_mlp;
    const gint64 Hm = cfg->merger_hidden, E = cfg->dec_dim, V = cfg->vocab_size;
    const gint64 Fd = cfg->dec_mlp;
    const gint64 hd = cfg->dec_heads > 0 ? E / cfg->dec_heads : 0;
    const gint64 Q = cfg->dec_heads * hd, KV = cfg->dec_kv_heads * hd;

    if (cfg->enc_stem_effnet) /* the stem's features, not pixels */
        M2(SLOT(w->patch_w), D, CL_CONFIG_EFFNET_CHANNELS, "enc.patch.weight");
    else
        add(specs, SLOT(w->patch_w), 4, D, C, P, P, "enc.patch.weight");
    V1(SLOT(w->patch_b), D, "enc.patch.bias");
    if (cfg->enc_pos) {
        const gint64 G = (gint64)(cfg->image_size / cfg->patch_size);
        M2(SLOT(w->enc_pos), G * G, D, "enc.pos");
    }
    if (cfg->ood > 0) {
        const gint64 C2 = cl_config_ood_len(cfg);
        V1(SLOT(w->ood_mean), C2, "ood.mean");
        V1(SLOT(w->ood_var), C2, "ood.var");
        M2(SLOT(w->ood_bank), cfg->ood, C2, "ood.bank");
        V1(SLOT(w->ood_radius), cfg->ood, "ood.radius");
        V1(SLOT(w->ood_threshold), 1, "ood.threshold");
    }
    if (cfg->change_head) {
        M2(SLOT(w->enc_change_w), 1, D, "enc.change.weight");
        V1(SLOT(w->enc_change_b), 1, "enc.change.bias");
    }
    if (cfg->n_objects > 0) {
        M2(SLOT(w->enc_objects_w), CL_CONFIG_OBJECT_OUT, D, "enc.objects.weight");
        V1(SLOT(w->enc_objects_b), CL_CONFIG_OBJECT_OUT, "enc.objects.bias");
    }
    for (int l = 0; l < cfg->enc_depth; l++) {
        ClEncoderLayerWeights *L = w ? &w->enc[l] : NULL;
#define LS(field) (L ? &L->field : NULL)
        V1(LS(ln1_w), D, "enc.%d.ln1.weight", l);
        V1(LS(ln1_b), D, "enc.%d.ln1.bias", l);
        M2(LS(qkv_w), 3 * D, D, "enc.%d.attn.qkv.weight", l);
        V1(LS(qkv_b), 3 * D, "enc.%d.attn.qkv.bias", l);
        M2(LS(attn_out_w), D, D, "enc.%d.attn.out.weight", l);
        V1(LS(attn_out_b), D, "enc.%d.attn.out.bias", l);
        V1(LS(ln2_w), D, "enc.%d.ln2.weight", l);
        V1(LS(ln2_b), D, "enc.%d.ln2.bias", l);
        M2(LS(fc1_w), F, D, "enc.%d.mlp.fc1.weight", l);
        V1(LS(fc1_b), F, "enc.%d.mlp.fc1.bias", l);
        M2(LS(fc2_w), D, F, "enc.%d.mlp.fc2.weight", l);
        V1(LS(fc2_b), D, "enc.%d.mlp.fc2.bias", l);
        if (cl_config_has_cross(cfg)) {
            V1(LS(sve_ln_w), D, "enc.%d.sve.ln.weight", l);
            V1(LS(sve_ln_b), D, "enc.%d.sve.ln.bias", l);
            M2(LS(sve_q_w), D, D, "enc.%d.sve.q.weight", l);
            V1(LS(sve_q_b), D, "enc.%d.sve.q.bias", l);
            M2(LS(sve_kv_w), 2 * D, D, "enc.%d.sve.kv.weight", l);
            V1(LS(sve_kv_b), 2 * D, "enc.%d.sve.kv.bias", l);
            M2(LS(sve_out_w), D, D, "enc.%d.sve.out.weight", l);
            V1(LS(sve_out_b), D, "enc.%d.sve.out.bias", l);
        }
        if (cl_config_has_sve_ffn(cfg)) {
            V1(LS(sve_ffn_ln_w), D, "enc.%d.sve.ffn_ln.weight", l);
            V1(LS(sve_ffn_ln_b), D, "enc.%d.sve.ffn_ln.bias", l);
            M2(LS(sve_fc1_w), F, D, "enc.%d.sve.fc1.weight", l);
            V1(LS(sve_fc1_b), F, "enc.%d.sve.fc1.bias", l);
            M2(LS(sve_fc2_w), D, F, "enc.%d.sve.fc2.weight", l);
            V1(LS(sve_fc2_b), D, "enc.%d.sve.fc2.bias", l);
        }
        if (cfg->sve_variant == CL_SVE_ADALN_ZERO) {
            M2(LS(sve_ada_w), 6 * D, D, "enc.%d.sve.ada.weight", l);
            V1(LS(sve_ada_b), 6 * D, "enc.%d.sve.ada.bias", l);
        }
        if (cfg->sve_first == CL_SVE_FIRST_NULL) {
            if (cfg->sve_variant == CL_SVE_ADALN_ZERO)
                V1(LS(sve_null), D, "enc.%d.sve.null", l);
            else if (cfg->sve_variant != CL_SVE_STATELESS)
                M2(LS(sve_null), 1, D, "enc.%d.sve.null", l);
        }
#undef LS
    }
    V1(SLOT(w->merger_ln_w), D, "merger.ln.weight");
    V1(SLOT(w->merger_ln_b), D, "merger.ln.bias");
    M2(SLOT(w->merger_fc1_w), Hm, 4 * D, "merger.fc1.weight");
    V1(SLOT(w->merger_fc1_b), Hm, "merger.fc1.bias");
    M2(SLOT(w->merger_fc2_w), E, Hm, "merger.fc2.weight");
    V1(SLOT(w->merger_fc2_b), E, "merger.fc2.bias");
    if (cfg->visual_pos) {
        const gint64 Gm = (gint64)(cfg->image_size / cfg->patch_size) / 2;
        M2(SLOT(w->merger_pos), Gm * Gm, E, "merger.pos");
    }
    if (cfg->change_marker)
        M2(SLOT(w->merger_change), 1, E, "merger.change");
    M2(SLOT(w->embed), V, E, "dec.embed.weight");
    for (int l = 0; l < cfg->dec_depth; l++) {
        ClDecoderLayerWeights *L = w ? &w->dec[l] : NULL;
#define LS(field) (L ? &L->field : NULL)
        V1(LS(attn_norm), E, "dec.%d.attn_norm.weight", l);
        if (cl_config_is_gdn(cfg, l)) {
            const gint64 H = cfg->gdn_heads, dk = cfg->gdn_dk, dv = cfg->gdn_dv, K = cfg->gdn_conv;
            M2(LS(gdn_q), H * dk, E, "dec.%d.gdn.q.weight", l);
            M2(LS(gdn_k), H * dk, E, "dec.%d.gdn.k.weight", l);
            M2(LS(gdn_v), H * dv, E, "dec.%d.gdn.v.weight", l);
            M2(LS(gdn_g), H * dv, E, "dec.%d.gdn.g.weight", l);
            M2(LS(gdn_a), H, E, "dec.%d.gdn.a.weight", l);
            M2(LS(gdn_b), H, E, "dec.%d.gdn.b.weight", l);
            M2(LS(gdn_conv_q), H * dk, K, "dec.%d.gdn.conv_q.weight", l);
            M2(LS(gdn_conv_k), H * dk, K, "dec.%d.gdn.conv_k.weight", l);
            M2(LS(gdn_conv_v), H * dv, K, "dec.%d.gdn.conv_v.weight", l);
            V1(LS(gdn_A_log), H, "dec.%d.gdn.A_log", l);
            V1(LS(gdn_dt_bias), H, "dec.%d.gdn.dt_bias", l);
            V1(LS(gdn_o_norm), dv, "dec.%d.gdn.o_norm.weight", l);
            M2(LS(gdn_o), E, H * dv, "dec.%d.gdn.o.weight", l);
        } else {
            M2(LS(q), Q, E, "dec.%d.attn.q.weight", l);
            M2(LS(k), KV, E, "dec.%d.attn.k.weight", l);
            M2(LS(v), KV, E, "dec.%d.attn.v.weight", l);
            M2(LS(o), E, Q, "dec.%d.attn.o.weight", l);
        }
        V1(LS(mlp_norm), E, "dec.%d.mlp_norm.weight", l);
        M2(LS(gate), Fd, E, "dec.%d.mlp.gate.weight", l);
        M2(LS(up), Fd, E, "dec.%d.mlp.up.weight", l);
        M2(LS(down), E, Fd, "dec.%d.mlp.down.weight", l);
        if (cl_config_pvm_slot(cfg, l) >= 0) {
            const gint64 r = cfg->pvm_rank, hp = r / MAX(cfg->pvm_heads, 1), Fp = cfg->pvm_mlp;
            M2(LS(pvm_t), r, E, "dec.%d.pvm.t.weight", l);
            V1(LS(pvm_norm_a), r, "dec.%d.pvm.norm_a.weight", l);
            M2(LS(pvm_v), r, E, "dec.%d.pvm.v.weight", l);
            M2(LS(pvm_q), r, r, "dec.%d.pvm.q.weight", l);
            M2(LS(pvm_k), hp, r, "dec.%d.pvm.k.weight", l);
            M2(LS(pvm_vv), hp, r, "dec.%d.pvm.vv.weight", l);
            V1(LS(pvm_q_norm), hp, "dec.%d.pvm.q_norm.weight", l);
            V1(LS(pvm_k_norm), hp, "dec.%d.pvm.k_norm.weight", l);
            M2(LS(pvm_o), r, r, "dec.%d.pvm.o.weight", l);
            V1(LS(pvm_norm_b), r, "dec.%d.pvm.norm_b.weight", l);
            M2(LS(pvm_gate), Fp, r, "dec.%d.pvm.mlp.gate.weight", l);
            M2(LS(pvm_up), Fp, r, "dec.%d.pvm.mlp.up.weight", l);
            M2(LS(pvm_down), r, Fp, "dec.%d.pvm.mlp.down.weight", l);
            M2(LS(pvm_out), E, r, "dec.%d.pvm.out.weight", l);
            V1(LS(pvm_alpha), 1, "dec.%d.pvm.alpha", l);
        }
        if (cfg->casa != CL_CASA_OFF)
            V1(LS(casa_norm), E, "dec.%d.casa.norm.weight", l);
        if (cfg->casa == CL_CASA_CA) {
            M2(LS(casa_q), Q, E, "dec.%d.casa.q.weight", l);
            M2(LS(casa_k), KV, E, "dec.%d.casa.k.weight", l);
            M2(LS(casa_v), KV, E, "dec.%d.casa.v.weight", l);
            M2(LS(casa_o), E, Q, "dec.%d.casa.o.weight", l);
        }
#undef LS
    }
    V1(SLOT(w->dec_norm), E, "dec.norm.weight");
    if (!cfg->tie_embeddings)
        M2(SLOT(w->lm_head), V, E, "dec.lm_head.weight");
    return specs;
}

gint64 cl_weight_spec_numel(const ClWeightSpec *s)
{
    gint64 n = 1;
    for (int d = 0; d < s->ndim; d++)
        n *= s->shape[d];
    return n;
}

void cl_model_weights_clear(ClModelWeights *w)
{
    if (!w)
        return;
    g_free(w->enc);
    g_free(w->dec);
    *w = (ClModelWeights){ 0 };
}
