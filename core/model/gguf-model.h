/* gguf-model.h - a pretrained Llama-style language model in a GGUF file (SmolLM2) as a ChangeLens
 * model: its tokenizer renumbered into ours, its weights as the decoder's (docs/MODEL.md §4.7). */
#pragma once

#include <glib.h>

#include "model/gguf.h"
#include "model/model.h"
#include "model/tokenizer.h"

G_BEGIN_DECLS

/* The largest context a GGUF model gets (its KV cache is allocated whole): its own context
 * length if smaller. */
#define CL_GGUF_MAX_LEN 2048

/* The GGUF file's byte-level BPE (tokenizer.ggml.model "gpt2", pre-tokenizer "smollm") in our
 * numbering: ids 0..255 the bytes, 256..260 our special tokens, then one id per merge in the
 * file's merge order — so the merges and their ranks are the file's, and only the ids differ.
 * `ext_of_id` (optional) receives, per id of ours, the file's id of the same token (-1 where
 * the file has none: bytes that never occur in UTF-8, <image>, <|pad|>); free with g_free. */
ClTokenizer *cl_tokenizer_from_gguf(const ClGguf *g, gint32 **ext_of_id, int *n_ids,
                                    GError **error);

/* The decoder's part of a config from the file's metadata (architecture "llama": depth, width,
 * heads, FFN, RoPE base, RMSNorm epsilon, tied embeddings); the encoder's fields are the "tiny"
 * preset's. vocab_size is `n_ids` (cl_tokenizer_from_gguf). */
gboolean cl_gguf_model_config(const ClGguf *g, int n_ids, ClModelConfig *cfg, GError **error);

/* Loads a GGUF language model as a ChangeLens model: tokenizer and config as above, the decoder's
 * weights (rows renumbered; Q and K rows back from llama.cpp's interleaved RoPE order to the
 * half-split order our RoPE uses), the encoder and merger seeded random (`seed`) for a connector
 * to be trained. Embedding rows the file lacks are the mean of the others. keep_quantized: the
 * attention and MLP matrices and the output matrix stay as stored, Q8_0/Q4_1 blocks or F16/BF16
 * halves (model->quant; CPU inference only), when every one of them is stored so (mixed types
 * included; rows of whole blocks of 32); else, and without it, everything is dequantized to
 * f32. model->path is the file, model->sha256 its SHA-256. */
ClModel *cl_model_load_gguf(const char *path, guint64 seed, gboolean keep_quantized,
                            GError **error);

/* TRUE when `path` starts with the GGUF magic (FALSE also when it cannot be read). */
gboolean cl_file_is_gguf(const char *path);

G_END_DECLS
