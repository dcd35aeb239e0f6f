/* weights.h - the model's parameters as named f32 views into one buffer (docs/MODEL.md §3-4). */
#pragma once

#include <glib.h>

#include "model/config.h"

G_BEGIN_DECLS

/* Shapes are in the comments (PyTorch layout: linear weights are [out, in]). A pointer is NULL
 * when the config has no such tensor (e.g. sve_* for "stateless", lm_head when tied). */
typedef struct {
    float *ln1_w, *ln1_b;           /* (D) */
    float *qkv_w, *qkv_b;           /* (3D, D), (3D) */
    float *attn_out_w, *attn_out_b; /* (D, D), (D) */
    float *ln2_w, *ln2_b;           /* (D) */
    float *fc1_w, *fc1_b;           /* (F, D), (F) */
    float *fc2_w, *fc2_b;           /* (D, F), (D) */
    /* SVE module (cross, cross_ffn, self_ffn) */
    float *sve_ln_w, *sve_ln_b;         /* (D) */
    float *sve_q_w, *sve_q_b;           /* (D, D), (D) */
    float *sve_kv_w, *sve_kv_b;         /* (2D, D), (2D) */
    float *sve_out_w, *sve_out_b;       /* (D, D), (D) */
    float *sve_ffn_ln_w, *sve_ffn_ln_b; /* (D) cross_ffn, self_ffn */
    float *sve_fc1_w, *sve_fc1_b;       /* (F, D), (F) */
    float *sve_fc2_w, *sve_fc2_b;       /* (D, F), (D) */
    float *sve_ada_w, *sve_ada_b;       /* (6D, D), (6D) adaln_zero */
    float *sve_null;                    /* (1, D) or (D) for adaln_zero; sve_first == null only */
} ClEncoderLayerWeights;

typedef struct {
    float *attn_norm; /* (E) */
    float *q, *k, *v; /* (Hq*hd, E), (Hkv*hd, E), (Hkv*hd, E) */
    float *o;         /* (E, Hq*hd) */
    float *mlp_norm;  /* (E) */
    float *gate, *up; /* (F, E) */
    float *down;      /* (E, F) */
    /* PVM (config pvm_layers; NULL in the other layers), r = pvm_rank, hp = r / pvm_heads,
     * Fp = pvm_mlp. Consecutive in this order (k|vv and gate|up are stacked products). */
    float *pvm_t;                   /* (r, E)  text query source: RMSNorm_a(h W_t^T) */
    float *pvm_norm_a;              /* (r) */
    float *pvm_v;                   /* (r, E)  visual source: Vimg W_v^T */
    float *pvm_q;                   /* (r, r) */
    float *pvm_k, *pvm_vv;          /* (hp, r), (hp, r)  one key/value head */
    float *pvm_q_norm, *pvm_k_norm; /* (hp) per-head RMSNorm gains */
    float *pvm_o;                   /* (r, r) */
    float *pvm_norm_b;              /* (r) */
    float *pvm_gate, *pvm_up;       /* (Fp, r) */
    float *pvm_down;                /* (r, Fp) */
    float *pvm_out;                 /* (E, r)  W_up, then RMSNorm without a gain */
    float *pvm_alpha;               /* (1)  the gate, 0 at init */
    /* CASA (config casa): the norm of the window's visual rows (both variants) and, for ca,
     * the cross-attention's own projections (ca_shared uses q/k/v/o above) */
    float *casa_norm;                /* (E) */
    float *casa_q, *casa_k, *casa_v; /* (Hq*hd, E), (Hkv*hd, E), (Hkv*hd, E) */
    float *casa_o;                   /* (E, Hq*hd) */
    /* Gated DeltaNet layers (config hybrid_every; their q/k/v/o above are NULL), H heads,
     * dk/dv, K taps: */
    float *gdn_q, *gdn_k;           /* (H*dk, E) */
    float *gdn_v, *gdn_g;           /* (H*dv, E)  values, output gate */
    float *gdn_a, *gdn_b;           /* (H, E)     decay input, beta */
    float *gdn_conv_q, *gdn_conv_k; /* (H*dk, K) */
    float *gdn_conv_v;              /* (H*dv, K) */
    float *gdn_A_log, *gdn_dt_bias; /* (H) */
    float *gdn_o_norm;              /* (dv) */
    float *gdn_o;                   /* (E, H*dv) */
} ClDecoderLayerWeights;

typedef struct {
    float *patch_w, *patch_b;             /* (D, C, P, P), (D) */
    float *enc_pos;                       /* (N, D) when config.enc_pos, else NULL */
    float *enc_change_w, *enc_change_b;   /* (1, D), (1) when config.change_head, else NULL */
    float *enc_objects_w, *enc_objects_b; /* (CL_CONFIG_OBJECT_OUT, D), (CL_CONFIG_OBJECT_OUT)
                                           * when config.n_objects, else NULL */
    float *ood_radius;                    /* (K) with config.ood */
    float *ood_mean, *ood_var, *ood_bank, *ood_threshold; /* (2C), (2C), (K, 2C), (1) when
                                                           * config.ood = K > 0, else NULL */
    ClEncoderLayerWeights *enc;                           /* (enc_depth) */
    float *merger_ln_w, *merger_ln_b;                     /* (D) */
    float *merger_fc1_w, *merger_fc1_b;                   /* (Hm, 4D), (Hm) */
    float *merger_fc2_w, *merger_fc2_b;                   /* (E, Hm), (E) */
    float *merger_change;       /* (1, E) when config.change_marker, else NULL */
    float *merger_pos;          /* (M, E) when config.visual_pos, else NULL */
    float *embed;               /* (V, E) */
    ClDecoderLayerWeights *dec; /* (dec_depth) */
    float *dec_norm;            /* (E) */
    float *lm_head;             /* (V, E); == embed when tied */
} ClModelWeights;

/* One named tensor of the model: its docs/MODEL.md name, shape and where it lives. */
typedef struct {
    char *name; /* "enc.3.attn.qkv.weight" */
    int ndim;
    gint64 shape[4];
    float **slot; /* the ClModelWeights field that points at it */
} ClWeightSpec;

/* Every tensor the config has (ClWeightSpec *, freed with the array), in a fixed order (the
 * file order when we write). With `w`, each spec's `slot` points at its field of `w`, and
 * w->enc / w->dec are allocated (zeroed, enc_depth / dec_depth entries) when NULL; with
 * w == NULL the slots are NULL (names and shapes only). */
GPtrArray *cl_model_weight_specs(const ClModelConfig *cfg, ClModelWeights *w);
/* Product of the spec's shape. */
gint64 cl_weight_spec_numel(const ClWeightSpec *s);
/* Frees w->enc and w->dec (not the tensors: they live in a model's arena) and zeroes `w`. */
void cl_model_weights_clear(ClModelWeights *w);

G_END_DECLS
