/* generate.h - text generation over the decoder's KV cache: greedy and beam search, stop strings,
 * length limits, UTF-8-safe streaming of the tokens as they are decided, cancellation. */
#pragma once

#include <gio/gio.h>
#include <glib.h>

#include "nn/backend.h"
#include "model/grounding.h"
#include "model/model.h"

G_BEGIN_DECLS

/* Streaming callback. Called in order as tokens are decided (greedy: at once; beam search: when
 * the search has finished, replaying the chosen hypothesis), once per generated token (`id`),
 * with the bytes that became safe to show with it: complete UTF-8 sequences only (a multibyte
 * character split over tokens arrives with the token that completes it) and never text that
 * could still turn out to be the start of a stop string. `len` may be 0. A last call with
 * id == -1 delivers whatever was held back when generation ends (a stop-string prefix that did
 * not complete, or a sequence left incomplete by the last token). The concatenation of every
 * call's bytes is exactly the result's text. `text` is valid only during the call. The end
 * token (<|im_end|>, <|endoftext|>) is not passed. */
typedef void (*ClTokenCallback)(gint32 id, const char *text, gsize len, gpointer user_data);

typedef struct {
    int max_new_tokens;              /* generated tokens at most (end token included); <= 0: as
                                      * many as the model's max_len allows */
    int beam_size;                   /* 1 = greedy; beam search keeps this many hypotheses */
    double length_penalty;           /* beam ranking: logprob / n_tokens^length_penalty (1.0) */
    const char *const *stop_strings; /* NULL-terminated, may be NULL: generation ends when the
                                      * decoded text contains one; the text is cut before it */
    ClTokenCallback on_token;        /* may be NULL */
    gpointer user_data;
    GCancellable *cancellable; /* checked before every decoder step; may be NULL */
    /* Greedy only. TRUE: where the most likely next token is a digit, the digits of a number
     * are chosen so that the number is the median of the model's distribution over numbers
     * (each digit by the quantile carried down from the digits before it; the tokens that are
     * a single digit are the candidates), not the most likely digit at each place. The median
     * minimises the expected absolute error, where greedy digits give each place's mode (for a
     * quantity mostly below 0.1: "0.0034" for a median near 0.04). Meant for answers that are
     * decimals of a fixed format ("0.dddd"), whose digit strings sort as their values do;
     * other tokens, and '.', stay greedy. FALSE (default): plain greedy. */
    gboolean median_numbers;
    /* stream_window > 0: streaming KV caches (cl_kv_cache_new_streaming): every position
     * attends to the first stream_sink positions and the last stream_window ones, memory stays
     * that of sink + window positions, and generation is not bounded by the model's max_len
     * (max_new_tokens <= 0 then means max_len new tokens). */
    int stream_sink, stream_window;
    /* VIST2 (vist.h; greedy, not with a streaming cache): prompt[vist_from, vist_from +
     * vist_len) is text that `vist` compresses (cl_vist_prefill), and the generated text is
     * compressed as it comes, every vist_chunk tokens (cl_vist_compress). NULL: none. */
    struct _ClVist *vist;
    int vist_from, vist_len;
    /* sparse_block > 0: the prompt's prefill attends per block to sparse_topk chosen blocks
     * besides the first, the previous and its own (cl_kv_cache_set_sparse_prefill); 0: dense */
    int sparse_block, sparse_topk;
    /* Greedy only. first_text (NULL: none): the first generated token must agree with it (its
     * bytes begin first_text or first_text begins with them), or, with first_text_avoid, must
     * not: how a change head's call steers an answer towards or away from "No change."
     * (describe.h change_gate). */
    const char *first_text;
    gboolean first_text_avoid;
    /* Greedy only. n_slots sets of phrases (grounding.h) the text must keep to: where the most
     * likely token would make a slot's phrase one that is not allowed (cl_grounding_text_ok),
     * the next most likely is taken, and so on. How describe holds the text to where the change
     * head found the change and to the object the object head sees there. */
    const ClGroundingSlot *slots;
    int n_slots;
} ClGenerateOptions;

/* Defaults: max_new_tokens 256, beam_size 1, length_penalty 1.0, nothing else. */
void cl_generate_options_init(ClGenerateOptions *opts);

typedef enum {
    CL_STOP_END_TOKEN,  /* the model emitted <|im_end|> or <|endoftext|> */
    CL_STOP_STRING,     /* a stop string appeared */
    CL_STOP_MAX_TOKENS, /* max_new_tokens generated */
    CL_STOP_MAX_LEN,    /* the model's context (max_len) is full */
    CL_STOP_CANCELLED,  /* the cancellable fired (the call returns FALSE) */
} ClStopReason;

const char *cl_stop_reason_name(ClStopReason r); /* "end_token", "stop_string", ... */

typedef struct {
    GArray *ids;   /* gint32: the generated tokens, without the end token; when a stop string
                    * ended generation, every token up to the one that completed it */
    GString *text; /* their decoded bytes, cut before the stop string */
    ClStopReason stop_reason;
    double logprob;    /* sum of the log-probabilities of the generated tokens (end token
                        * included) under the model */
    int n_scored;      /* tokens in logprob (ids->len + 1 when the end token was emitted) */
    double score;      /* logprob / n_scored^length_penalty (beam search's ranking) */
    int n_prompt;      /* positions in the prompt (visual rows included) */
    int n_steps;       /* decoder calls after the prefill (summed over beams) */
    double prefill_ms; /* the prompt through the decoder */
    double decode_ms;  /* everything after the prefill */
} ClGenerateResult;

void cl_generate_result_init(ClGenerateResult *r);
void cl_generate_result_clear(ClGenerateResult *r);

/* Generates a continuation of `prompt` (n_prompt ids; CL_DECODER_VISUAL entries take the next
 * row of `visual`, see cl_decoder_forward). The tokens <image> and <|pad|>, the NUL byte (id 0)
 * and ids past the tokenizer's vocabulary are never generated. Fails with CL_MODEL_ERROR_INPUT
 * when the prompt leaves no room in the model's max_len; with G_IO_ERROR_CANCELLED when
 * cancelled (`out` then holds what was decided so far: greedy's tokens, or beam search's best
 * hypothesis, finished or not). `out` is initialised by the call; clear it after either outcome.
 */
gboolean cl_generate(ClBackend *be, const ClModel *model, const gint32 *prompt, int n_prompt,
                     const float *visual, const ClGenerateOptions *opts, ClGenerateResult *out,
                     GError **error);

/* median_numbers' step, exposed for tests: among n choices in ascending order with weights p
 * (>= 0, not necessarily normalised), the one where the cumulative share first reaches the
 * quantile *q, and *q becomes the quantile within that choice's share. Applied place by place
 * to digits (with each place's conditional weights) it finds the exact median of the whole
 * number's distribution when *q starts at 0.5. -1 when every weight is 0. */
int cl_generate_quantile_pick(const double *p, int n, double *q);

G_END_DECLS
