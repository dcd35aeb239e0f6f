/* model.h - one model = config + weights + tokenizer, loaded from / saved to a safetensors file. */
#pragma once

#include <glib.h>

#include "nn/backend.h"
#include "nn/quant.h"
#include "model/chat.h"
#include "model/config.h"
#include "model/tokenizer.h"
#include "model/weights.h"

G_BEGIN_DECLS

/* A decoder matrix kept block-quantized as its file stored it (nn/quant.h; rows × cols as the
 * f32 view it stands for would be), or with the same blocks rearranged four rows together (x4,
 * nn/quant.h: a GGUF model's, which the loader copies anyway). data NULL: not quantized. */
typedef struct {
    ClQuantType type;
    const guint8 *data;
    gboolean x4;
} ClQuantMatrix;

typedef struct {
    ClQuantMatrix q, k, v, o, gate, up, down;
} ClQuantLayer;

/* The matrices a model keeps quantized (a GGUF model's Q8_0/Q4_1 tensors, a quantized model
 * file's, cl_model_quantize's): their f32 views in ClModelWeights are NULL (the output matrix's
 * too unless it is the tied embedding); the CPU decoder runs the blocks, a device an f32 copy
 * of them (cl_model_weights_on). */
typedef struct {
    ClQuantLayer *dec;     /* (dec_depth) */
    ClQuantMatrix lm_head; /* data NULL: lm_head (or the tied embedding) in f32 */
    guint8 *bytes;         /* owns every matrix's blocks (NULL: they are in the model's mapping) */
    size_t n_bytes;
} ClQuantWeights;

typedef struct {
    ClModelConfig config;
    ClModelWeights w;       /* f32 views into `arena` (or straight into the mapping for F32) */
    ClTokenizer *tokenizer; /* owned */
    float *arena;           /* owned; all converted / initialised parameters */
    size_t n_params;        /* number of parameters (floats) */
    GMappedFile *mapping;   /* owned; the model file when loaded from disk */
    char *path;             /* NULL for a random-init model */
    char *sha256;           /* of the file (hex); NULL for a random-init model until saved */
    guint64 serial;         /* unique per process and per state of the weights (a device copy
                             * is kept until it changes: cl_model_weights_changed) */
    ClQuantWeights *quant;  /* NULL, or the decoder matrices kept quantized (see above) */
} ClModel;

/* Loads and validates a model file (a GGUF language model goes to cl_model_load_gguf with seed
 * 0): header, config, tokenizer, every tensor present with the
 * config's shape and a known dtype, no other tensor. F32 tensors are used in place (pointers
 * into a private copy-on-write mapping, so in-memory edits never reach the file); F16/BF16 are
 * converted to f32 into the arena. model->sha256 is the file's SHA-256, computed here. */
ClModel *cl_model_load(const char *path, GError **error);
/* The same checks on a whole file held in memory (the fuzzer's entry point); every tensor is
 * copied, so `bytes` may be freed afterwards. path is NULL, sha256 that of the bytes. */
ClModel *cl_model_load_from_bytes(const guint8 *bytes, gsize size, GError **error);
/* Number of parameters (floats) of a config: the sum over cl_model_weight_specs(). */
size_t cl_model_n_params(const ClModelConfig *cfg);
/* Seeded random weights (normal std 0.02, norms 1, biases 0; SVE modules initialised per
 * docs/MODEL.md §3.7) and a small built-in byte-level tokenizer. Deterministic for a seed on
 * every machine. */
ClModel *cl_model_new_random(const ClModelConfig *cfg, guint64 seed, GError **error);
/* The same, for a model whose decoder attention and MLP matrices will be quantized: those get no
 * f32 storage (NULL views) and model->quant is allocated with dec_depth zeroed layers for the
 * caller to fill. */
ClModel *cl_model_new_random_quantized(const ClModelConfig *cfg, guint64 seed, GError **error);
/* Writes the model as safetensors (dtype "F32", "F16" or "BF16", any case), atomically, with
 * __metadata__ changelens.format "1", changelens.config and changelens.tokenizer; tensors in
 * cl_model_weight_specs() order. The matrices model->quant holds are written as their blocks
 * (U8, listed in changelens.quant; a tied output matrix's quantized copy as dec.lm_head.weight
 * after the others: docs/MODEL.md §7). On success model->path and model->sha256 name the new
 * file. */
gboolean cl_model_save(ClModel *model, const char *path, const char *dtype, GError **error);
void cl_model_free(ClModel *model);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClModel, cl_model_free)

/* docs/MODEL.md §7: keeps the decoder's attention and MLP matrices and the output matrix as
 * blocks of type t (cl_quantize_rows of their f32 values; a matrix already kept in another type
 * is dequantized first, one of type t kept as it is); their f32 views become NULL. A tied output
 * matrix gets a quantized copy, the embedding stays f32 (tokens are looked up in it); norms,
 * encoder and merger stay f32. Refused (CL_MODEL_ERROR_CONFIG) for decoders with CASA, PVM or
 * Gated DeltaNet layers and for rows whose length is not a multiple of 32. Clears
 * model->sha256. */
gboolean cl_model_quantize(ClModel *model, ClQuantType t, GError **error);

/* The weights as backend `be` sees them: &model->w for a host-memory backend (the CPU); for a
 * device, one copy of every tensor in the device's memory, made on first use and kept on the
 * backend (for one model at a time) while model->serial stays the same. NULL + error when the
 * device has not enough memory. */
const ClModelWeights *cl_model_weights_on(const ClModel *model, ClBackend *be, GError **error);
/* Code that edits a model's weights in place calls this before running it on a device again:
 * it gives the model a new serial, so the next cl_model_weights_on() copies the new values. */
void cl_model_weights_changed(ClModel *model);

/* docs/MODEL.md §3.7: (re)initialises every SVE tensor the model has from its block (clone +
 * out_init_std; sve.null ~ N(0, 0.02²)), deterministically for `seed`. Clears model->sha256 (the
 * weights no longer are the file's). */
void cl_model_weights_insert_sve(ClModel *model, guint64 seed);

/* docs/MODEL.md §4.3: CASA's cross-attention projections (config casa "ca") become copies of
 * each layer's self-attention projections, as the paper initialises them. */
void cl_model_weights_init_casa(ClModel *model);

/* docs/MODEL.md §3.8: sets merger.pos (config.visual_pos) to a 2-D sin-cos grid: for the
 * merged grid's cell (i, j), channels [0, E/4) sin(i·f_k), [E/4, E/2) cos(i·f_k), then the same
 * of j, f_k = 2^(−4k/(E/4)) (1 down to about 1/16 per cell), centred over the cells and times
 * `scale`; channels past 4·(E/4) are 0. A token's place is then a smooth function of its row and
 * column from the first step, where N(0, 0.02²) rows are unrelated vectors. FALSE (and nothing
 * changed) when the model has no merger.pos. With config.enc_pos, enc.pos gets the same grid at
 * the patch grid and the encoder's width. Clears model->sha256. */
gboolean cl_model_init_visual_pos_grid(ClModel *model, double scale);

/* Where the program's data folder `sub` ("models", "demo") would be: data/<sub> of the source
 * tree it was built in, and share/changelens/<sub> of its install prefix (both newly allocated;
 * neither need exist). */
void cl_data_dirs(const char *sub, char **source_dir, char **install_dir);
/* The same for a program at `exe` (absolute, canonical) built from source_root in build_root
 * and installed to bindir and datadir (meson's, absolute): a program inside build_root gets
 * source_root/data/<sub>, wherever build_root lies; one elsewhere (a moved tree) EXE/../../data;
 * the installed data is datadir/changelens/<sub> unless the program runs from another prefix
 * (then EXE/../share/changelens/<sub>). */
void cl_data_dirs_for(const char *exe, const char *source_root, const char *build_root,
                      const char *bindir, const char *datadir, const char *sub, char **source_dir,
                      char **install_dir);

/* A model that sees with `vision` and speaks with `language` (docs/MODEL.md §4.7): vision's
 * encoder (stem, SVE blocks, heads) and merger, language's decoder and tokenizer (a GGUF
 * file's, say). Config: vision's, with the decoder's fields (dec_*, vocab_size, rope_base,
 * max_len, norm_eps, tie_embeddings) language's and no PVM, CASA, hybrid, VIST2 or ood; tensors
 * by name from vision (enc.*, merger.*) or language (the rest) where the shapes agree, the
 * others (the merger's last layer and its positions, whose width is the new decoder's) seeded
 * random. NULL + error when the config does not hold together. */
ClModel *cl_model_grafted(const ClModel *vision, const ClModel *language, guint64 seed,
                          GError **error);

/* A random model of cfg (seeded) with src's tokenizer and every tensor of src by name (the
 * shapes of shared names agree); the new ones, whose names hold new_part, keep their init. */
ClModel *cl_model_reshaped(const ClModel *src, const ClModelConfig *cfg, guint64 seed,
                           const char *new_part, GError **error);

/* Where set-up (tools/fetch-pretrained.sh) puts the pretrained parts: $CHANGELENS_DATA/pretrained,
 * else the user data folder's changelens/pretrained. With `file`, that file's path there (it
 * need not exist). Newly allocated. */
char *cl_pretrained_path(const char *file);

/* The model used when none is named: $CHANGELENS_MODEL, else changelens-default.safetensors (or
 * the first *.safetensors by name) in data/models/ of the source tree the program was built in,
 * else in share/changelens/models/ of its install prefix. NULL + an error telling the user what
 * to pass instead. */
char *cl_model_find_default(GError **error);
/* The same, for images of a domain (chat.h; cl_describe_detect_domain): colour photographs
 * (CL_CHAT_DOMAIN_EDITS) get the photo model (CL_MODEL_PHOTO_FILE: trained on real photographs,
 * data/models/changelens-photo.md), radiographs and aerial tiles the radiograph-and-aerial model
 * (CL_MODEL_SCAN_FILE: data/models/changelens-radiograph-aerial.md), each where it is there and
 * set-up fetched the EfficientNet-Lite0 it needs; else, and for other domains, as above. */
#define CL_MODEL_PHOTO_FILE "changelens-photo.safetensors"
#define CL_MODEL_SCAN_FILE "changelens-radiograph-aerial.safetensors"
char *cl_model_find_default_for(ClChatDomain domain, GError **error);

G_END_DECLS
