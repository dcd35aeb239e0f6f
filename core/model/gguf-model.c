/* gguf-model.c - a GGUF language model (SmolLM2-135M) bound to ChangeLens's decoder: the BPE
 * vocabulary renumbered into ours, the config from the metadata, the weights dequantized and
 * reordered (docs/MODEL.md §4.7). */
#include "model/gguf-model.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "model/config.h"
#include "model/effnet.h"

#define FAIL(code, ...) g_set_error(error, CL_MODEL_ERROR, code, __VA_ARGS__)

/* ---- the vocabulary ------------------------------------------------------------------------- */

/* GPT-2's byte alphabet: each byte is written as one printable code point — the printable
 * Latin-1 ones as themselves, the other 68 as U+0100 + their rank among those. Returns the
 * byte of code point `c`, -1 for a code point outside the alphabet. */
static int byte_of_codepoint(gunichar c)
{
    static int table[324];
    static gsize init = 0;
    if (g_once_init_enter(&init)) {
        for (int k = 0; k < 324; k++)
            table[k] = -1;
        int n = 0;
        for (int b = 0; b < 256; b++) {
            gboolean printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
            table[printable ? b : 256 + n++] = b;
        }
        g_once_init_leave(&init, 1);
    }
    return c < G_N_ELEMENTS(table) ? table[c] : -1;
}

/* A token's text in the byte alphabet back to its bytes; FALSE for a character outside it. */
static gboolean token_bytes(const char *text, GByteArray *out)
{
    g_byte_array_set_size(out, 0);
    for (const char *p = text; *p; p = g_utf8_next_char(p)) {
        int b = byte_of_codepoint(g_utf8_get_char(p));
        if (b < 0)
            return FALSE;
        guint8 v = (guint8)b;
        g_byte_array_append(out, &v, 1);
    }
    return TRUE;
}

typedef struct {
    GHashTable *ext;  /* GBytes (a token's bytes) -> file id + 1 */
    GHashTable *ours; /* GBytes -> our id + 1 */
} Vocab;

static gboolean read_vocab(const ClGguf *g, const ClGgufValue *tokens, Vocab *v, GError **error)
{
    const ClGgufValue *types = cl_gguf_get(g, "tokenizer.ggml.token_type");
    g_autoptr(GByteArray) buf = g_byte_array_new();
    for (guint64 i = 0; i < tokens->n; i++) {
        gint64 type = types && types->nums_i && i < types->n ? types->nums_i[i] : 1;
        if (type != 1) /* control and user-defined tokens: matched by text, below */
            continue;
        if (!token_bytes(tokens->strs[i], buf)) {
            FAIL(CL_MODEL_ERROR_TOKENIZER,
                 "token %" G_GUINT64_FORMAT " ('%s') has a character "
                 "outside GPT-2's byte alphabet",
                 i, tokens->strs[i]);
            return FALSE;
        }
        GBytes *key = g_bytes_new(buf->data, buf->len);
        if (g_hash_table_contains(v->ext, key)) {
            g_bytes_unref(key);
            continue; /* a second token of the same bytes is never produced by the merges */
        }
        g_hash_table_insert(v->ext, key, GINT_TO_POINTER((gint)i + 1));
    }
    return TRUE;
}

/* Splits "A B" into our ids of A and B; FALSE when either is unknown so far. */
static gboolean merge_ids(Vocab *v, const char *merge, GByteArray *buf, gint32 *a, gint32 *b,
                          GBytes **joined)
{
    const char *sp = strchr(merge, ' ');
    if (!sp || strchr(sp + 1, ' '))
        return FALSE;
    g_autofree char *left = g_strndup(merge, (gsize)(sp - merge));
    g_autoptr(GByteArray) lb = g_byte_array_new();
    if (!token_bytes(left, lb) || !token_bytes(sp + 1, buf))
        return FALSE;
    g_autoptr(GBytes) kl = g_bytes_new(lb->data, lb->len);
    g_autoptr(GBytes) kr = g_bytes_new(buf->data, buf->len);
    gint ia = GPOINTER_TO_INT(g_hash_table_lookup(v->ours, kl));
    gint ib = GPOINTER_TO_INT(g_hash_table_lookup(v->ours, kr));
    if (!ia || !ib)
        return FALSE;
    *a = ia - 1, *b = ib - 1;
    g_byte_array_prepend(buf, lb->data, lb->len);
    *joined = g_bytes_new(buf->data, buf->len);
    return TRUE;
}

static gint32 special_ext(const ClGgufValue *tokens, const char *text)
{
    for (guint64 i = 0; i < tokens->n && i < 1024; i++)
        if (strcmp(tokens->strs[i], text) == 0)
            return (gint32)i;
    return -1;
}

static gboolean check_tokenizer_kind(const ClGguf *g, const ClGgufValue **tokens,
                                     const ClGgufValue **merges, GError **error)
{
    const char *model = cl_gguf_get_string(g, "tokenizer.ggml.model", error);
    if (!model)
        return FALSE;
    const ClGgufValue *pre = cl_gguf_get(g, "tokenizer.ggml.pre");
    const char *pre_name = pre && pre->type == CL_GGUF_STRING ? pre->str : "(none)";
    if (strcmp(model, "gpt2") != 0 || strcmp(pre_name, "smollm") != 0) {
        FAIL(CL_MODEL_ERROR_TOKENIZER,
             "tokenizer '%s' with pre-tokenizer '%s' is not supported "
             "(byte-level BPE 'gpt2' with 'smollm' is)",
             model, pre_name);
        return FALSE;
    }
    *tokens = cl_gguf_get(g, "tokenizer.ggml.tokens");
    *merges = cl_gguf_get(g, "tokenizer.ggml.merges");
    if (!*tokens || !*merges || (*tokens)->elem_type != CL_GGUF_STRING ||
        (*merges)->elem_type != CL_GGUF_STRING || (*tokens)->type != CL_GGUF_ARRAY ||
        (*merges)->type != CL_GGUF_ARRAY) {
        FAIL(CL_MODEL_ERROR_TOKENIZER, "tokenizer.ggml.tokens and tokenizer.ggml.merges must be "
                                       "arrays of strings");
        return FALSE;
    }
    if ((*merges)->n + CL_TOKEN_FIRST_MERGE > CL_TOKENIZER_MAX_VOCAB) {
        FAIL(CL_MODEL_ERROR_TOKENIZER, "%" G_GUINT64_FORMAT " merges, more than the limit",
             (*merges)->n);
        return FALSE;
    }
    return TRUE;
}

ClTokenizer *cl_tokenizer_from_gguf(const ClGguf *g, gint32 **ext_of_id, int *n_ids, GError **error)
{
    const ClGgufValue *tokens, *merges;
    if (!check_tokenizer_kind(g, &tokens, &merges, error))
        return NULL;
    Vocab v = {
        g_hash_table_new_full(g_bytes_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref, NULL),
        g_hash_table_new_full(g_bytes_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref, NULL)
    };
    gsize n = (gsize)merges->n, total = CL_TOKEN_FIRST_MERGE + n;
    g_autofree gint32 *pairs = g_new(gint32, 2 * MAX(n, 1));
    g_autofree gint32 *ext = g_new(gint32, total);
    g_autoptr(GByteArray) buf = g_byte_array_new();
    ClTokenizer *tok = NULL;
    if (!read_vocab(g, tokens, &v, error))
        goto out;
    for (int b = 0; b < 256; b++) {
        guint8 byte = (guint8)b;
        GBytes *key = g_bytes_new(&byte, 1);
        ext[b] = GPOINTER_TO_INT(g_hash_table_lookup(v.ext, key)) - 1;
        g_hash_table_insert(v.ours, key, GINT_TO_POINTER(b + 1));
    }
    static const char *const specials[CL_TOKENIZER_N_SPECIAL] = {
        "<|endoftext|>", "<|im_start|>", "<|im_end|>", NULL, NULL, /* <image>, <|pad|>: new */
    };
    for (int k = 0; k < CL_TOKENIZER_N_SPECIAL; k++)
        ext[CL_TOKEN_ENDOFTEXT + k] = specials[k] ? special_ext(tokens, specials[k]) : -1;
    for (gsize m = 0; m < n; m++) {
        GBytes *joined = NULL;
        if (!merge_ids(&v, merges->strs[m], buf, &pairs[2 * m], &pairs[2 * m + 1], &joined)) {
            FAIL(CL_MODEL_ERROR_TOKENIZER, "merge %zu ('%s') is not two known tokens", m,
                 merges->strs[m]);
            goto out;
        }
        gint32 id = CL_TOKEN_FIRST_MERGE + (gint32)m;
        ext[id] = GPOINTER_TO_INT(g_hash_table_lookup(v.ext, joined)) - 1;
        if (g_hash_table_contains(v.ours, joined))
            g_bytes_unref(joined); /* the same bytes by another merge: the first keeps them */
        else
            g_hash_table_insert(v.ours, joined, GINT_TO_POINTER(id + 1));
    }
    tok = cl_tokenizer_new_from_merges(pairs, n, CL_PRETOK_GPT2_DIGITS, error);
    if (tok && ext_of_id)
        *ext_of_id = g_steal_pointer(&ext);
    if (tok && n_ids)
        *n_ids = (int)total;
out:
    g_hash_table_unref(v.ext);
    g_hash_table_unref(v.ours);
    return tok;
}

/* ---- the config ----------------------------------------------------------------------------- */

static gboolean meta_int(const ClGguf *g, const char *key, int lo, int hi, int *out, GError **error)
{
    guint64 v;
    if (!cl_gguf_get_uint(g, key, &v, error))
        return FALSE;
    if (v < (guint64)lo || v > (guint64)hi) {
        FAIL(CL_MODEL_ERROR_CONFIG, "metadata '%s' is %" G_GUINT64_FORMAT ", outside [%d, %d]", key,
             v, lo, hi);
        return FALSE;
    }
    *out = (int)v;
    return TRUE;
}

gboolean cl_gguf_model_config(const ClGguf *g, int n_ids, ClModelConfig *cfg, GError **error)
{
    const char *arch = cl_gguf_get_string(g, "general.architecture", error);
    if (!arch)
        return FALSE;
    if (strcmp(arch, "llama") != 0) {
        FAIL(CL_MODEL_ERROR_CONFIG, "architecture '%s' is not supported (llama is)", arch);
        return FALSE;
    }
    if (!cl_model_config_preset(cfg, "tiny", error))
        return FALSE;
    int ctx, rope_dims;
    double base, eps;
    if (!meta_int(g, "llama.block_count", 1, CL_CONFIG_MAX_DEPTH, &cfg->dec_depth, error) ||
        !meta_int(g, "llama.embedding_length", 1, CL_CONFIG_MAX_DIM, &cfg->dec_dim, error) ||
        !meta_int(g, "llama.feed_forward_length", 1, CL_CONFIG_MAX_DIM * 8, &cfg->dec_mlp, error) ||
        !meta_int(g, "llama.attention.head_count", 1, CL_CONFIG_MAX_HEADS, &cfg->dec_heads,
                  error) ||
        !meta_int(g, "llama.attention.head_count_kv", 1, CL_CONFIG_MAX_HEADS, &cfg->dec_kv_heads,
                  error) ||
        !meta_int(g, "llama.context_length", 1, CL_CONFIG_MAX_LEN, &ctx, error) ||
        !cl_gguf_get_float(g, "llama.rope.freq_base", &base, error) ||
        !cl_gguf_get_float(g, "llama.attention.layer_norm_rms_epsilon", &eps, error))
        return FALSE;
    if (cfg->dec_dim % cfg->dec_heads) {
        FAIL(CL_MODEL_ERROR_CONFIG, "width %d is not a multiple of %d heads", cfg->dec_dim,
             cfg->dec_heads);
        return FALSE;
    }
    if (cl_gguf_get(g, "llama.rope.dimension_count") &&
        (!meta_int(g, "llama.rope.dimension_count", 1, CL_CONFIG_MAX_DIM, &rope_dims, error) ||
         rope_dims != cfg->dec_dim / cfg->dec_heads)) {
        if (error && !*error)
            FAIL(CL_MODEL_ERROR_CONFIG, "RoPE over %d of a head's %d dimensions is not supported",
                 rope_dims, cfg->dec_dim / cfg->dec_heads);
        return FALSE;
    }
    cfg->rope_base = base;
    cfg->norm_eps = eps;
    cfg->vocab_size = n_ids;
    cfg->max_len = MIN(ctx, CL_GGUF_MAX_LEN);
    cfg->tie_embeddings = cl_gguf_tensor(g, "output.weight") == NULL;
    /* the visual side: EfficientNet-Lite0's features when set-up fetched it (SVE blocks and the
     * merger on top, seeded random until trained), else the tiny preset's patch embedding */
    g_autofree char *effnet = cl_pretrained_path(CL_EFFNET_FILE);
    cfg->enc_stem_effnet = g_file_test(effnet, G_FILE_TEST_EXISTS);
    return cl_model_config_validate(cfg, error);
}

/* ---- the weights ---------------------------------------------------------------------------- */

/* One tensor, checked against the shape we expect (ggml lists the row length first). */
static float *tensor_f32(const ClGguf *g, const char *name, guint64 rows, guint64 cols,
                         GError **error)
{
    const ClGgufTensor *t = cl_gguf_tensor(g, name);
    if (!t) {
        FAIL(CL_MODEL_ERROR_FILE, "tensor '%s' is missing", name);
        return NULL;
    }
    if (t->ne[0] != cols || t->numel != rows * cols) {
        FAIL(CL_MODEL_ERROR_FILE,
             "tensor '%s' is %" G_GUINT64_FORMAT " x %" G_GUINT64_FORMAT
             ", expected %" G_GUINT64_FORMAT " x %" G_GUINT64_FORMAT,
             name, t->numel / t->ne[0], t->ne[0], rows, cols);
        return NULL;
    }
    return cl_gguf_tensor_to_f32(t, error);
}

/* llama.cpp stores Q and K with each head's rows interleaved for its pairwise RoPE: its row
 * 2i + j is the half-split row j·hd/2 + i that our RoPE rotates with row i (j = 0) or is rotated
 * into (j = 1). Rows of `row_bytes` (f32 values or quantized blocks alike). */
static void unpermute_rope_rows(void *dst, const void *src, int heads, int hd, size_t row_bytes)
{
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < hd / 2; i++)
            for (int j = 0; j < 2; j++)
                memcpy((guint8 *)dst + ((size_t)h * hd + (size_t)j * hd / 2 + i) * row_bytes,
                       (const guint8 *)src + ((size_t)h * hd + 2 * (size_t)i + j) * row_bytes,
                       row_bytes);
}

static gboolean copy_tensor(const ClGguf *g, const char *name, float *dst, guint64 rows,
                            guint64 cols, int rope_heads, int hd, GError **error)
{
    g_autofree float *src = tensor_f32(g, name, rows, cols, error);
    if (!src)
        return FALSE;
    if (rope_heads)
        unpermute_rope_rows(dst, src, rope_heads, hd, cols * sizeof(float));
    else
        memcpy(dst, src, rows * cols * sizeof(float));
    return TRUE;
}

/* Embedding (or output) rows in our numbering; rows the file lacks get the mean row. */
static gboolean copy_rows(const ClGguf *g, const char *name, float *dst, const gint32 *ext,
                          int n_ids, int n_file, int E, GError **error)
{
    g_autofree float *src = tensor_f32(g, name, (guint64)n_file, (guint64)E, error);
    if (!src)
        return FALSE;
    g_autofree double *mean = g_new0(double, E);
    for (int r = 0; r < n_file; r++)
        for (int e = 0; e < E; e++)
            mean[e] += src[(size_t)r * E + e] / n_file;
    for (int id = 0; id < n_ids; id++) {
        float *row = dst + (size_t)id * E;
        if (ext[id] >= 0 && ext[id] < n_file)
            memcpy(row, src + (size_t)ext[id] * E, (size_t)E * sizeof(float));
        else
            for (int e = 0; e < E; e++)
                row[e] = (float)mean[e];
    }
    return TRUE;
}

typedef struct {
    const char *suffix;
    size_t offset;  /* of the f32 view in ClDecoderLayerWeights */
    size_t qoffset; /* of the blocks in ClQuantLayer, or (size_t)-1 for a norm */
    int rows, cols, rope_heads;
} LayerPart;

#define NO_QUANT ((size_t)-1)

/* The nine tensors of layer block l, shaped for config c. */
static void layer_parts(const ClModelConfig *c, LayerPart parts[9])
{
    int E = c->dec_dim, F = c->dec_mlp, hd = E / c->dec_heads;
    int Q = c->dec_heads * hd, KV = c->dec_kv_heads * hd;
#define P(s, f, q, r, cc, h)                                                                       \
    {                                                                                              \
        s, offsetof(ClDecoderLayerWeights, f), q, r, cc, h                                         \
    }
#define QO(f) offsetof(ClQuantLayer, f)
    const LayerPart p[9] = {
        P("attn_norm", attn_norm, NO_QUANT, 1, E, 0),  P("attn_q", q, QO(q), Q, E, c->dec_heads),
        P("attn_k", k, QO(k), KV, E, c->dec_kv_heads), P("attn_v", v, QO(v), KV, E, 0),
        P("attn_output", o, QO(o), E, Q, 0),           P("ffn_norm", mlp_norm, NO_QUANT, 1, E, 0),
        P("ffn_gate", gate, QO(gate), F, E, 0),        P("ffn_up", up, QO(up), F, E, 0),
        P("ffn_down", down, QO(down), E, F, 0),
    };
#undef P
#undef QO
    memcpy(parts, p, sizeof p);
}

static gboolean quantizable(ClGgmlType t, ClQuantType *out)
{
    switch (t) { /* kept as stored: the blocks, and the halves (F16, BF16) */
    case CL_GGML_Q8_0: *out = CL_QUANT_Q8_0; return TRUE;
    case CL_GGML_Q4_1: *out = CL_QUANT_Q4_1; return TRUE;
    case CL_GGML_F16: *out = CL_QUANT_F16; return TRUE;
    case CL_GGML_BF16: *out = CL_QUANT_BF16; return TRUE;
    default: return FALSE;
    }
}

/* Bytes of every matrix the model can keep quantized (0 when one of them cannot: then the whole
 * model is dequantized). */
static size_t quantized_bytes(const ClGguf *g, const ClModelConfig *c)
{
    LayerPart parts[9];
    layer_parts(c, parts);
    size_t total = 0;
    for (int l = 0; l < c->dec_depth; l++)
        for (int k = 0; k < 9; k++) {
            if (parts[k].qoffset == NO_QUANT)
                continue;
            g_autofree char *name = g_strdup_printf("blk.%d.%s.weight", l, parts[k].suffix);
            const ClGgufTensor *t = cl_gguf_tensor(g, name);
            ClQuantType qt;
            if (!t || !quantizable(t->type, &qt) || t->ne[0] != (guint64)parts[k].cols ||
                parts[k].cols % CL_QUANT_BLOCK ||
                t->numel != (guint64)parts[k].rows * (guint64)parts[k].cols)
                return 0;
            total += cl_quant_row_bytes(qt, parts[k].cols) * (size_t)parts[k].rows;
        }
    return total;
}

/* A matrix's rows (m × k of qm->type) at dst: the blocks in the x4 layout (nn/quant.h), which the
 * decode step's kernels read four rows at a time; halves as they are. */
static void place_rows(ClQuantMatrix *qm, const guint8 *rows, guint8 *dst, int m, int k)
{
    qm->x4 = CL_QUANT_IS_BLOCK(qm->type);
    if (qm->x4)
        cl_quant_pack4(qm->type, rows, dst, m, k);
    else
        memcpy(dst, rows, cl_quant_row_bytes(qm->type, k) * (size_t)m);
    qm->data = dst;
}

/* Layer l: the norms (and, without QL, every matrix) as f32; with QL, the matrices' blocks copied
 * at *cursor (Q and K rows reordered as for f32). */
static gboolean copy_layer(const ClGguf *g, const ClModelConfig *c, int l, ClDecoderLayerWeights *L,
                           ClQuantLayer *QL, guint8 **cursor, GError **error)
{
    int hd = c->dec_dim / c->dec_heads;
    LayerPart parts[9];
    layer_parts(c, parts);
    for (int k = 0; k < 9; k++) {
        const LayerPart *p = &parts[k];
        g_autofree char *name = g_strdup_printf("blk.%d.%s.weight", l, p->suffix);
        if (QL && p->qoffset != NO_QUANT) {
            const ClGgufTensor *t = cl_gguf_tensor(g, name); /* checked by quantized_bytes */
            ClQuantMatrix *qm = (ClQuantMatrix *)((guint8 *)QL + p->qoffset);
            g_assert(quantizable(t->type, &qm->type));
            size_t rb = cl_quant_row_bytes(qm->type, p->cols);
            const guint8 *rows = t->data;
            g_autofree guint8 *unpermuted = NULL;
            if (p->rope_heads) {
                unpermuted = g_malloc(rb * (size_t)p->rows);
                unpermute_rope_rows(unpermuted, t->data, p->rope_heads, hd, rb);
                rows = unpermuted;
            }
            place_rows(qm, rows, *cursor, p->rows, p->cols);
            *cursor += rb * (size_t)p->rows;
            continue;
        }
        float *dst = *(float **)((guint8 *)L + p->offset);
        if (!copy_tensor(g, name, dst, (guint64)p->rows, (guint64)p->cols, p->rope_heads, hd,
                         error))
            return FALSE;
    }
    return TRUE;
}

/* The output rows as blocks, renumbered like copy_rows (the rows the file lacks: the f32 mean
 * row already in `f32`, quantized). */
static void quantize_head(const ClGgufTensor *t, ClQuantType qt, const gint32 *ext, int n_ids,
                          int n_file, int E, const float *f32, guint8 *dst)
{
    size_t rb = cl_quant_row_bytes(qt, E);
    for (int id = 0; id < n_ids; id++) {
        if (ext[id] >= 0 && ext[id] < n_file)
            memcpy(dst + (size_t)id * rb, t->data + (size_t)ext[id] * rb, rb);
        else
            cl_quantize_rows(qt, f32 + (size_t)id * E, dst + (size_t)id * rb, 1, E);
    }
}

gboolean cl_file_is_gguf(const char *path)
{
    char magic[4] = { 0 };
    FILE *f = fopen(path, "rb");
    if (!f)
        return FALSE;
    gboolean yes = fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0;
    fclose(f);
    return yes;
}

/* The output matrix (output.weight, or the tied token_embd.weight) and whether it can stay
 * quantized. */
static const ClGgufTensor *head_tensor(const ClGguf *g, const ClModelConfig *cfg, ClQuantType *qt,
                                       gboolean *quantized)
{
    const ClGgufTensor *t =
        cl_gguf_tensor(g, cfg->tie_embeddings ? "token_embd.weight" : "output.weight");
    *quantized = t && quantizable(t->type, qt) && t->ne[0] == (guint64)cfg->dec_dim &&
                 cfg->dec_dim % CL_QUANT_BLOCK == 0;
    return t;
}

static gboolean copy_weights(const ClGguf *g, ClModel *m, const gint32 *ext, int n_ids,
                             GError **error)
{
    const ClModelConfig *cfg = &m->config;
    const ClGgufValue *tokens = cl_gguf_get(g, "tokenizer.ggml.tokens");
    int E = cfg->dec_dim, n_file = (int)MIN(tokens->n, (guint64)G_MAXINT32);
    if (!copy_rows(g, "token_embd.weight", m->w.embed, ext, n_ids, n_file, E, error) ||
        !copy_tensor(g, "output_norm.weight", m->w.dec_norm, 1, (guint64)E, 0, 0, error))
        return FALSE;
    if (!cfg->tie_embeddings &&
        !copy_rows(g, "output.weight", m->w.lm_head, ext, n_ids, n_file, E, error))
        return FALSE;
    ClQuantWeights *qw = m->quant;
    guint8 *cursor = qw ? qw->bytes : NULL;
    for (int l = 0; l < cfg->dec_depth; l++)
        if (!copy_layer(g, cfg, l, &m->w.dec[l], qw ? &qw->dec[l] : NULL, &cursor, error))
            return FALSE;
    ClQuantType qt;
    gboolean head_q;
    const ClGgufTensor *head = head_tensor(g, cfg, &qt, &head_q);
    if (qw && head_q) {
        size_t bytes = cl_quant_row_bytes(qt, E) * (size_t)n_ids;
        g_autofree guint8 *rows = g_try_malloc(bytes);
        if (!rows) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                        "no memory for %zu bytes of the output matrix", bytes);
            return FALSE;
        }
        quantize_head(head, qt, ext, n_ids, n_file, E, m->w.lm_head ? m->w.lm_head : m->w.embed,
                      rows);
        qw->lm_head.type = qt;
        place_rows(&qw->lm_head, rows, cursor, n_ids, E);
    }
    return TRUE;
}

/* A model of cfg whose decoder matrices can stay quantized: blocks allocated for them. */
static ClModel *new_quantized(const ClGguf *g, const ClModelConfig *cfg, guint64 seed,
                              GError **error)
{
    size_t bytes = quantized_bytes(g, cfg);
    if (bytes == 0)
        return NULL; /* some matrix is of another type: dequantize all */
    ClQuantType qt;
    gboolean head_q;
    head_tensor(g, cfg, &qt, &head_q);
    if (head_q)
        bytes += cl_quant_row_bytes(qt, cfg->dec_dim) * (size_t)cfg->vocab_size;
    ClModel *m = cl_model_new_random_quantized(cfg, seed, error);
    if (!m)
        return NULL;
    m->quant->bytes = g_try_malloc(bytes);
    m->quant->n_bytes = bytes;
    if (!m->quant->bytes) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "no memory for %zu bytes of quantized weights", bytes);
        cl_model_free(m);
        return NULL;
    }
    return m;
}

ClModel *cl_model_load_gguf(const char *path, guint64 seed, gboolean keep_quantized, GError **error)
{
    GError *err = NULL;
    g_autoptr(ClGguf) g = cl_gguf_open(path, error);
    if (!g)
        return NULL;
    g_autofree gint32 *ext = NULL;
    int n_ids = 0;
    g_autoptr(ClTokenizer) tok = cl_tokenizer_from_gguf(g, &ext, &n_ids, &err);
    ClModelConfig cfg;
    if (!tok || !cl_gguf_model_config(g, n_ids, &cfg, &err)) {
        g_propagate_prefixed_error(error, err, "%s: ", path);
        return NULL;
    }
    g_autoptr(ClModel) m = keep_quantized ? new_quantized(g, &cfg, seed, &err) : NULL;
    if (err) {
        g_propagate_error(error, err);
        return NULL;
    }
    if (!m && !(m = cl_model_new_random(&cfg, seed, error)))
        return NULL;
    if (!copy_weights(g, m, ext, n_ids, &err)) {
        g_propagate_prefixed_error(error, err, "%s: ", path);
        return NULL;
    }
    cl_tokenizer_free(m->tokenizer);
    m->tokenizer = g_steal_pointer(&tok);
    m->path = g_strdup(path);
    GChecksum *sum = g_checksum_new(G_CHECKSUM_SHA256);
    g_checksum_update(sum, g->bytes, (gssize)g->size);
    m->sha256 = g_strdup(g_checksum_get_string(sum));
    g_checksum_free(sum);
    cl_model_weights_changed(m);
    return g_steal_pointer(&m);
}
