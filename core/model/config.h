/* config.h - the model's configuration (docs/MODEL.md §1): JSON in the model file, presets. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
    CL_SVE_STATELESS,
    CL_SVE_CROSS,
    CL_SVE_CROSS_FFN, /* the default */
    CL_SVE_SELF_EXT,
    CL_SVE_ADALN_ZERO,
    CL_SVE_SELF_FFN,
    CL_SVE_N_VARIANTS
} ClSveVariant;

typedef enum {
    CL_SVE_FIRST_OWN,  /* the paper's Z1 fallback (adaln_zero: zero vector) */
    CL_SVE_FIRST_NULL, /* learned null state */
} ClSveFirst;

/* Limits a config must respect (validated on load, so a hostile header cannot ask for
 * absurd allocations). */
#define CL_CONFIG_MAX_DIM 16384
#define CL_CONFIG_MAX_DEPTH 256
#define CL_CONFIG_MAX_HEADS 256
#define CL_CONFIG_MAX_IMAGE 4096
#define CL_CONFIG_MAX_VOCAB 1048576
#define CL_CONFIG_MAX_LEN 1048576
/* Every tensor and every per-image activation of the config (N x 3D, N x F, N x N scores,
 * max_len x F, ...) holds at most this many values, so one tensor's int indexing never
 * overflows; the model holds at most CL_CONFIG_MAX_PARAMS parameters. */
#define CL_CONFIG_MAX_ELEMENTS ((gint64)G_MAXINT32)
#define CL_CONFIG_MAX_PARAMS ((gint64)1 << 34)
/* Decoder layers that can carry a PVM branch. */
#define CL_CONFIG_MAX_PVM_LAYERS 16
/* Every tokenizer has the 256 bytes and the 5 special tokens (tokenizer.h). */
#define CL_CONFIG_MIN_VOCAB 261

typedef enum {
    CL_CASA_OFF,    /* token insertion (default) */
    CL_CASA_CA,     /* CA with its own q/k/v/o per layer */
    CL_CASA_SHARED, /* CA^φ: CA with the layer's self-attention projections */
} ClCasaVariant;

/* config.object_task: how the object head's class c is coded in its labels (the synthetic task
 * whose objects the head was trained on, docs/MODEL.md §3.13) */
typedef enum {
    CL_OBJECTS_PHOTO_EDITS, /* shape c / 8 % 4, colour c % 8, size c / 32 (default) */
    CL_OBJECTS_AERIAL,      /* the aerial task's kind c, kept in the colour labels: colour c */
    CL_OBJECTS_RADIOGRAPH,  /* the radiograph task's finding c: shape cube, colour c % 8, size
                             * c / 8 % 2, material c / 16 (core/synth/radiograph.c) */
} ClObjectTask;

/* config.n_objects: classes at most, a name's bytes at most (with its NUL), the head's logits */
#define CL_CONFIG_MAX_OBJECTS 64
#define CL_CONFIG_OBJECT_NAME 40
#define CL_CONFIG_OBJECT_OUT 17
/* config.n_findings: the radiograph coding's classes at most (5 label bits) */
#define CL_CONFIG_MAX_FINDINGS 32

typedef struct {
    int format; /* 1 */
    int image_size, patch_size, channels;
    int enc_dim, enc_depth, enc_heads, enc_mlp;
    double enc_rope_base;
    ClSveVariant sve_variant;
    ClSveFirst sve_first;
    gboolean sve_cross_pos;
    double sve_out_init_std;
    int merger_hidden;
    int dec_dim, dec_depth, dec_heads, dec_kv_heads, dec_mlp;
    int vocab_size;
    double rope_base;
    int max_len;
    double norm_eps;
    gboolean tie_embeddings;
    /* a learned absolute position per visual token ("merger.pos" [M, E], added to the merger's
     * output): the decoder gives visual tokens 1-D positions and the encoder has only relative
     * (RoPE) ones, so without it *where* a token sits on the grid is not in its value */
    gboolean visual_pos;
    /* a learned absolute position per patch ("enc.pos" [N, D], added to the patch embedding
     * before the first block): with it a token's place is in its value inside the encoder, so
     * what an SVE block reads from the previous image carries where it was */
    gboolean enc_pos;
    /* The encoder's stem (JSON "stem"): FALSE ("patch") a linear embedding of each patch's
     * pixels; TRUE ("efficientnet_lite0:16") the pretrained EfficientNet-Lite0's stride-16 feature
     * map (model/effnet.h; 112 values a token, frozen, read from the pretrained folder), then the
     * same linear embedding (enc.patch.weight (D, 112)). Needs patch_size 16, 3 channels and an
     * image_size that is a multiple of 32; CPU inference only. */
    gboolean enc_stem_effnet;
    /* a per-patch change head ("enc.change.weight" [1, D], "enc.change.bias" [1]) on the
     * encoder's final patch tokens: sigmoid(w·x + b) is the probability that the patch changed
     * from the previous image, a heat-map source (model/heatmap.h). Trained by the trainer's
     * --aux-changed loss on the tokens of every image after the first. */
    gboolean change_head;
    /* with change_head: the largest patch probability from which describe calls the last image
     * changed (0: 0.5, cl_config_change_threshold); chosen per model on its training images
     * with their nuisances (the model card says how). JSON "change_threshold", (0, 1). */
    double change_threshold;
    /* the answer's log-probability (its tokens' summed, end token included) from which the model
     * is sure of what it wrote; below it, describe adds a notice that the model is unsure. 0: no
     * such notice. Chosen per model on held-out draws of its tasks that are not the card's
     * evaluation set (the card gives its rates). JSON "sure_logprob", < 0. */
    double sure_logprob;
    /* with change_head: "merger.change" [1, E], added to each visual token of every image after
     * the first in proportion to the largest change probability of its four patches, so that the
     * decoder finds the changed tokens by their value (docs/MODEL.md §3.12) */
    gboolean change_marker;
    /* n_objects > 0: an object head ("enc.objects.weight" [CL_CONFIG_OBJECT_OUT, D],
     * "enc.objects.bias" [CL_CONFIG_OBJECT_OUT]) on the encoder's final patch tokens, the
     * trainer's objects loss made part of the model: logit 0 "the patch shows an object",
     * logits 1 + j the synthetic objects' attribute labels j (4 shapes, 8 colours, 2 sizes,
     * 2 materials). Class c (object_names[c], c < n_objects) is the object whose labels are
     * shape c / 8 % 4, colour c % 8, size c / 32: how photo-edits codes its objects; with
     * object_task aerial, the one whose colour label is c (the aerial task's kinds, at most 8).
     * With object_task radiograph, the radiograph task's findings (at most 32). describe names
     * the changed object by it (docs/MODEL.md §3.13). JSON "object_names": [...],
     * "object_task": "aerial" or "radiograph" (absent: photo-edits). */
    int n_objects;
    char object_names[CL_CONFIG_MAX_OBJECTS][CL_CONFIG_OBJECT_NAME];
    ClObjectTask object_task;
    /* n_findings > 0 (with an object head whose object_task is another one): the same head's
     * classes on radiographs, coded as object_task radiograph codes them, so that one head
     * trained on two tasks names the objects of both (docs/MODEL.md §3.13). JSON
     * "radiograph_findings": [...]. cl_config_findings gives the radiograph table either way. */
    int n_findings;
    char finding_names[CL_CONFIG_MAX_FINDINGS][CL_CONFIG_OBJECT_NAME];
    /* K > 0: the training images' descriptors (docs/MODEL.md §3.11): "ood.mean", "ood.var" [2C],
     * "ood.bank" [K, 2C], "ood.threshold" [1], C = cl_config_ood_channels; an image whose
     * pooled features score above the threshold is unlike the training images (a notice).
     * With ood_head the descriptor is EfficientNet-Lite0's pooled head features instead (its
     * CL_CONFIG_EFFNET_POOLED values, cl_config_ood_len), scored against a Gaussian of the
     * training images' (cl_encoder_ood_gauss_score): "ood.mean" its mean, "ood.bank" [K, L] its
     * K principal directions, "ood.radius" [K] their variances, "ood.var" [L] the residual
     * variance of each value. */
    int ood;
    gboolean ood_head;
    /* > 0: an image whose colourfulness (cl_encoder_colourfulness) is below this is unlike the
     * training images as well, whatever its descriptor: each one they held had colour */
    double ood_min_colour;
    /* each image's visual tokens minus their mean over the image (before visual_pos): what the
     * merger emits for every image alike (a constant "soft prompt") is removed, so after the
     * decoder's RMSNorm a token is what sets it apart from the image's other tokens */
    gboolean visual_center;
    /* PVM, persistent visual memory (docs/MODEL.md §4.2): a gated
     * cross-attention from text positions to the prompt's visual rows, parallel to the FFN, in
     * the listed decoder layers (pvm_n_layers = 0: none). Latent width pvm_rank, pvm_heads query
     * heads of pvm_rank / pvm_heads over one key/value head of that size, a SwiGLU of pvm_mlp on
     * the latent. */
    int pvm_n_layers;
    int pvm_layers[CL_CONFIG_MAX_PVM_LAYERS]; /* ascending */
    int pvm_rank, pvm_heads, pvm_mlp;
    /* CASA (docs/MODEL.md §4.3): visual rows never enter the sequence or
     * the KV cache; every layer's text self-attention runs beside a cross-attention to the
     * current window's visual rows (a window: the images since the last text, and the text after
     * them). */
    ClCasaVariant casa;
    /* CASA's CA^# (docs/MODEL.md §4.3): casa_replace = n > 0 drops the text self-attention
     * of every n-th layer (l % n == n − 1), leaving its cross-attention alone there (and no keys
     * or values in the cache); 0: none */
    int casa_replace;
    /* CASA's gist token (docs/MODEL.md §4.3): each image's rows are followed by the
     * <image> token as text, which cross-attends to the image and stays in the text KV cache
     * after the image's window is gone */
    gboolean casa_gist;
    /* CASA's CA_{t+v} (docs/MODEL.md §4.3): the cross-attention also reads the window's
     * text so far (causally), with RoPE: text at its positions, the window's visual rows all at
     * the window's first text position */
    gboolean casa_tv;
    /* The Gated DeltaNet hybrid (docs/MODEL.md §4.5): hybrid_every > 0
     * keeps softmax attention in layers l % hybrid_every == 0 and puts a Gated DeltaNet layer
     * (gdn_heads heads, keys of gdn_dk, values of gdn_dv, a causal convolution of gdn_conv taps)
     * in the others; 0: every layer attention. */
    int hybrid_every, gdn_heads, gdn_dk, gdn_dv, gdn_conv;
    /* VIST2 (docs/MODEL.md §4.6): text is compressed in chunks of
     * vist_chunk tokens, each rendered into an image (vist_font_px, core/model/vist.h), encoded
     * as a first image and kept as its visual rows only; a tail of more than vist_tail tokens is
     * compressed too, a shorter one stays text. vist_sees_text: a chunk's visual rows also attend
     * to its raw text (the paper's mask) — FALSE, the default, lets only the image through, so a
     * chunk's raw text can change nothing later. vist_chunk = 0: off. */
    int vist_chunk, vist_tail, vist_font_px;
    gboolean vist_sees_text;
} ClModelConfig;

/* Values a token of the EfficientNet-Lite0 stem (its stride-16 feature map's channels). */
#define CL_CONFIG_EFFNET_CHANNELS 112
#define CL_CONFIG_EFFNET_POOLED 1280 /* its pooled head features (config.ood_head) */
/* What the patch embedding reads per patch: C·P·P pixels, or the stem's features. */
#define cl_config_patch_inputs(c)                                                                  \
    ((c)->enc_stem_effnet ? CL_CONFIG_EFFNET_CHANNELS                                              \
                          : (c)->channels * (c)->patch_size * (c)->patch_size)

/* The values per patch config.ood describes (docs/MODEL.md §3.11): the EfficientNet-Lite0 stem's
 * features, or for a patch stem the patch embedding's D outputs. */
#define cl_config_ood_channels(c) ((c)->enc_stem_effnet ? CL_CONFIG_EFFNET_CHANNELS : (c)->enc_dim)
/* The length of config.ood's descriptor: the pooled head features (ood_head), or the mean and
 * the standard deviation of each of those values. */
#define cl_config_ood_len(c)                                                                       \
    ((c)->ood_head ? CL_CONFIG_EFFNET_POOLED : 2 * cl_config_ood_channels(c))

/* config.change_threshold, 0.5 when unset */
#define cl_config_change_threshold(c) ((c)->change_threshold > 0 ? (c)->change_threshold : 0.5)

#define CL_MODEL_ERROR (cl_model_error_quark())
GQuark cl_model_error_quark(void);
typedef enum {
    CL_MODEL_ERROR_CONFIG,    /* invalid or inconsistent config */
    CL_MODEL_ERROR_FILE,      /* malformed model file */
    CL_MODEL_ERROR_TOKENIZER, /* malformed tokenizer */
    CL_MODEL_ERROR_INPUT,     /* bad input to the model (too long, wrong size) */
    CL_MODEL_ERROR_NO_MEMORY,
} ClModelError;

/* Presets "tiny", "base", "large"; FALSE + error for an unknown name. */
gboolean cl_model_config_preset(ClModelConfig *cfg, const char *name, GError **error);
/* Parses and validates JSON (missing keys take the tiny preset's values). */
gboolean cl_model_config_from_json(ClModelConfig *cfg, const char *json, GError **error);
/* Validates every constraint of docs/MODEL.md §1. */
gboolean cl_model_config_validate(const ClModelConfig *cfg, GError **error);
/* Newly allocated compact JSON. */
char *cl_model_config_to_json(const ClModelConfig *cfg);

const char *cl_sve_variant_name(ClSveVariant v);
/* "off", "ca", "ca_shared" */
const char *cl_casa_variant_name(ClCasaVariant v);
gboolean cl_casa_variant_from_name(const char *name, ClCasaVariant *out);
gboolean cl_sve_variant_from_name(const char *name, ClSveVariant *out);
/* "photo-edits", "aerial", "radiograph" */
const char *cl_object_task_name(ClObjectTask t);
gboolean cl_object_task_from_name(const char *name, ClObjectTask *out);
/* "own", "null" */
const char *cl_sve_first_name(ClSveFirst f);
gboolean cl_sve_first_from_name(const char *name, ClSveFirst *out);

/* The object head's classes on radiographs (object_task radiograph's object_names, or
 * radiograph_findings), *n of them; NULL (*n = 0) when the model has none. */
static inline const char (*cl_config_findings(const ClModelConfig *c,
                                              int *n))[CL_CONFIG_OBJECT_NAME]
{
    if (c->n_objects > 0 && c->object_task == CL_OBJECTS_RADIOGRAPH) {
        *n = c->n_objects;
        return c->object_names;
    }
    *n = c->n_objects > 0 ? c->n_findings : 0;
    return *n > 0 ? c->finding_names : NULL;
}

/* Derived sizes. */
static inline int cl_config_grid(const ClModelConfig *c)
{
    return c->image_size / c->patch_size;
}
static inline int cl_config_n_patches(const ClModelConfig *c)
{
    return cl_config_grid(c) * cl_config_grid(c);
}
static inline int cl_config_n_visual(const ClModelConfig *c)
{
    return cl_config_n_patches(c) / 4;
}
/* The decoder positions an <image> tag becomes: its M visual rows, and CASA's gist token. */
static inline int cl_config_image_positions(const ClModelConfig *c)
{
    const int g = c->image_size / c->patch_size;
    return g * g / 4 + (c->casa != CL_CASA_OFF && c->casa_gist);
}
/* TRUE when decoder layer `layer` has CASA's cross-attention in place of its self-attention. */
static inline gboolean cl_config_casa_replaced(const ClModelConfig *c, int layer)
{
    return c->casa != CL_CASA_OFF && c->casa_replace > 0 &&
           layer % c->casa_replace == c->casa_replace - 1;
}
/* TRUE when decoder layer `layer` is a Gated DeltaNet layer (config hybrid_every). */
static inline gboolean cl_config_is_gdn(const ClModelConfig *c, int layer)
{
    return c->hybrid_every > 0 && layer % c->hybrid_every != 0;
}
/* The PVM slot of decoder layer `layer`, or -1 when it has none. */
static inline int cl_config_pvm_slot(const ClModelConfig *c, int layer)
{
    for (int i = 0; i < c->pvm_n_layers; i++)
        if (c->pvm_layers[i] == layer)
            return i;
    return -1;
}
/* Sets the PVM layers to every `every`-th decoder layer from `every` (the paper's 8, 16, 24 of
 * 36 for 8) and the sizes to rank r, 4 heads, a latent SwiGLU of r·dec_mlp/dec_dim (rounded
 * to 8); every <= 0 switches PVM off. FALSE when more layers than the limit would carry it. */
gboolean cl_config_set_pvm(ClModelConfig *c, int every, int rank);
/* Sets the hybrid: attention in every `every`-th layer from 0, Gated DeltaNet layers between
 * with the decoder's heads, dk = its head size, dv = 2·dk, a 4-tap convolution; every <= 0: off. */
gboolean cl_config_set_hybrid(ClModelConfig *c, int every);
/* Switches VIST2 on with chunks of `chunk` tokens (0: the default, 4 tokens per visual row of an
 * image, the paper's r = 4), the tail limit one image's rows and the renderer's font size for
 * the image size, the image-only mask; chunk < 0 switches it off. */
void cl_config_set_vist(ClModelConfig *c, int chunk);
/* TRUE when the variant has the cross-attention module (cross, cross_ffn, self_ffn). */
static inline gboolean cl_config_has_cross(const ClModelConfig *c)
{
    return c->sve_variant == CL_SVE_CROSS || c->sve_variant == CL_SVE_CROSS_FFN ||
           c->sve_variant == CL_SVE_SELF_FFN;
}
static inline gboolean cl_config_has_sve_ffn(const ClModelConfig *c)
{
    return c->sve_variant == CL_SVE_CROSS_FFN || c->sve_variant == CL_SVE_SELF_FFN;
}

G_END_DECLS
