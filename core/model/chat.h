/* chat.h - the chat template (docs/MODEL.md §6: ChatML as Qwen's) and the describe
 * conversations of the SVE paper's appendix B. */
#pragma once

#include <glib.h>

#include "model/tokenizer.h"

G_BEGIN_DECLS

typedef enum {
    CL_CHAT_SYSTEM,
    CL_CHAT_USER,
    CL_CHAT_ASSISTANT,
} ClChatRole;

typedef struct {
    ClChatRole role;
    const char *text; /* `<image>` tags in it become CL_TOKEN_IMAGE; other specials stay text */
} ClChatTurn;

/* Most images a describe conversation takes. */
#define CL_CHAT_MAX_IMAGES 256

/* Encodes a conversation:
 *   <|im_start|>{role}\n{text}<|im_end|>\n   per turn (a system turn may only come first),
 *   <|im_start|>assistant\n                  when add_generation_prompt.
 * Template tokens are ids; role names, "\n" and texts are encoded as text with only `<image>`
 * recognised, so a text cannot inject <|im_end|>. `out_mask` (optional) receives a guint8 per
 * id: 1 on the final answer (the text of the last turn when it is an assistant turn, and its
 * <|im_end|>), 0 elsewhere (the paper's mask_history). FALSE + CL_MODEL_ERROR_INPUT on a bad
 * role or a misplaced system turn. Returns gint32 ids. */
GArray *cl_chat_encode(const ClTokenizer *tok, const ClChatTurn *turns, gsize n,
                       gboolean add_generation_prompt, GArray **out_mask, GError **error);

/* The same conversation as ChatML text (what decoding cl_chat_encode's ids gives). */
char *cl_chat_render(const ClChatTurn *turns, gsize n, gboolean add_generation_prompt);

/* The image domains of the paper's describe conversations. */
typedef enum {
    CL_CHAT_DOMAIN_GENERIC,
    CL_CHAT_DOMAIN_RADIOGRAPH, /* Medical-Diff-VQA (appendix B.4) */
    CL_CHAT_DOMAIN_AERIAL,     /* LEVIR-CC (B.6) */
    CL_CHAT_DOMAIN_EDITS,      /* ImgEdit pairs and sequences (B.5) */
    CL_CHAT_DOMAIN_SHAPES,     /* CLEVR-Multi-Change (B.2) */
    CL_CHAT_N_DOMAINS
} ClChatDomain;

const char *cl_chat_domain_name(ClChatDomain d); /* "generic", "radiograph", … */
gboolean cl_chat_domain_from_name(const char *name, ClChatDomain *out);

/* A conversation that owns its texts. */
typedef struct {
    GArray *turns;    /* ClChatTurn */
    GPtrArray *texts; /* the owned strings the turns point to */
} ClChatConversation;

ClChatConversation *cl_chat_conversation_new(void);
void cl_chat_conversation_free(ClChatConversation *c);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClChatConversation, cl_chat_conversation_free)
/* Appends a turn (the text is copied). */
void cl_chat_conversation_add(ClChatConversation *c, ClChatRole role, const char *text);
static inline const ClChatTurn *cl_chat_conversation_turns(const ClChatConversation *c)
{
    return (const ClChatTurn *)(gconstpointer)c->turns->data;
}
static inline gsize cl_chat_conversation_len(const ClChatConversation *c)
{
    return c->turns->len;
}

/* The describe conversation for `n_images` (2..CL_CHAT_MAX_IMAGES) images of a domain, as in the
 * paper's appendix B: the domain's system prompt (none for shapes), one user turn per image
 * starting "<image>\n", the paper's filler answers between images, and the question in the last
 * user turn (`question` replaces the domain's question when not NULL or empty). Sequences of more
 * than two images use the paper's sequence format (ImgEdit's "next version" turns). Append the
 * answer as an assistant turn for training; encode with add_generation_prompt for inference.
 * NULL + CL_MODEL_ERROR_INPUT for a bad count or domain, or a question with an <image> tag. */
ClChatConversation *cl_chat_describe_conversation(ClChatDomain domain, int n_images,
                                                  const char *question, GError **error);

/* The conversation with a context slot (prior reports, case notes: docs/MODEL.md §4.6): the last
 * user turn gets "Prior reports: <image>\n" after its first <image> tag and the newline after it
 * (or at its start when it has none); that extra tag, the last <image> of the user turns, stands
 * for the context's tokens or its VIST2 pages. */
ClChatConversation *cl_chat_with_context(const ClChatTurn *turns, gsize n);

/* Number of `<image>` tags in the turns' texts (the CL_TOKEN_IMAGE ids cl_chat_encode makes). */
int cl_chat_count_images(const ClChatTurn *turns, gsize n);

G_END_DECLS
