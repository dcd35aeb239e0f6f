/* chat.c - the ChatML template (docs/MODEL.md §6) and the describe conversations of the SVE
 * paper's appendix B, per image domain. */
#include "model/chat.h"

#include <string.h>

#include "model/config.h" /* CL_MODEL_ERROR */

static const char *const role_names[] = { "system", "user", "assistant" };

static gboolean check_turns(const ClChatTurn *turns, gsize n, GError **error)
{
    for (gsize i = 0; i < n; i++) {
        if ((int)turns[i].role < CL_CHAT_SYSTEM || turns[i].role > CL_CHAT_ASSISTANT) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "chat: turn %zu has an unknown role (%d)", i, (int)turns[i].role);
            return FALSE;
        }
        if (turns[i].role == CL_CHAT_SYSTEM && i != 0) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "chat: the system turn must come first (turn %zu)", i);
            return FALSE;
        }
        if (!turns[i].text) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT, "chat: turn %zu has no text",
                        i);
            return FALSE;
        }
    }
    return TRUE;
}

static void mask_fill(GArray *mask, guint len, guint8 v)
{
    while (mask && mask->len < len)
        g_array_append_val(mask, v);
}

GArray *cl_chat_encode(const ClTokenizer *tok, const ClChatTurn *turns, gsize n,
                       gboolean add_generation_prompt, GArray **out_mask, GError **error)
{
    g_return_val_if_fail(tok && (turns || n == 0), NULL);
    if (!check_turns(turns, n, error))
        return NULL;
    GArray *ids = g_array_new(FALSE, FALSE, sizeof(gint32));
    GArray *mask = out_mask ? g_array_new(FALSE, FALSE, sizeof(guint8)) : NULL;
    const gint32 im_start = CL_TOKEN_IM_START, im_end = CL_TOKEN_IM_END;
    const guint image_only = CL_TOKENIZER_SPECIAL_BIT(CL_TOKEN_IMAGE);
    for (gsize i = 0; i < n; i++) {
        g_array_append_val(ids, im_start);
        cl_tokenizer_encode_append(tok, role_names[turns[i].role], -1, 0, ids);
        cl_tokenizer_encode_append(tok, "\n", 1, 0, ids);
        mask_fill(mask, ids->len, 0);
        cl_tokenizer_encode_append(tok, turns[i].text, -1, image_only, ids);
        g_array_append_val(ids, im_end);
        /* the final answer and its <|im_end|> are what training supervises */
        mask_fill(mask, ids->len, i + 1 == n && turns[i].role == CL_CHAT_ASSISTANT);
        cl_tokenizer_encode_append(tok, "\n", 1, 0, ids);
        mask_fill(mask, ids->len, 0);
    }
    if (add_generation_prompt) {
        g_array_append_val(ids, im_start);
        cl_tokenizer_encode_append(tok, "assistant\n", -1, 0, ids);
        mask_fill(mask, ids->len, 0);
    }
    if (out_mask)
        *out_mask = mask;
    return ids;
}

char *cl_chat_render(const ClChatTurn *turns, gsize n, gboolean add_generation_prompt)
{
    g_return_val_if_fail(turns || n == 0, NULL);
    GString *s = g_string_new(NULL);
    for (gsize i = 0; i < n; i++) {
        int r = turns[i].role >= CL_CHAT_SYSTEM && turns[i].role <= CL_CHAT_ASSISTANT
                    ? (int)turns[i].role
                    : CL_CHAT_USER;
        g_string_append_printf(s, "<|im_start|>%s\n%s<|im_end|>\n", role_names[r],
                               turns[i].text ? turns[i].text : "");
    }
    if (add_generation_prompt)
        g_string_append(s, "<|im_start|>assistant\n");
    return g_string_free(s, FALSE);
}

int cl_chat_count_images(const ClChatTurn *turns, gsize n)
{
    g_return_val_if_fail(turns || n == 0, 0);
    int count = 0;
    for (gsize i = 0; i < n; i++)
        for (const char *p = turns[i].text; p && (p = strstr(p, "<image>")); p += 7)
            count++;
    return count;
}

/* ---- conversations -------------------------------------------------------------------------- */

ClChatConversation *cl_chat_conversation_new(void)
{
    ClChatConversation *c = g_new0(ClChatConversation, 1);
    c->turns = g_array_new(FALSE, FALSE, sizeof(ClChatTurn));
    c->texts = g_ptr_array_new_with_free_func(g_free);
    return c;
}

void cl_chat_conversation_free(ClChatConversation *c)
{
    if (!c)
        return;
    g_array_unref(c->turns);
    g_ptr_array_unref(c->texts);
    g_free(c);
}

ClChatConversation *cl_chat_with_context(const ClChatTurn *turns, gsize n)
{
    ClChatConversation *c = cl_chat_conversation_new();
    gssize last_user = -1;
    for (gsize i = 0; i < n; i++)
        if (turns[i].role == CL_CHAT_USER)
            last_user = (gssize)i;
    for (gsize i = 0; i < n; i++) {
        if ((gssize)i != last_user) {
            cl_chat_conversation_add(c, turns[i].role, turns[i].text);
            continue;
        }
        const char *t = turns[i].text, *tag = strstr(t, "<image>");
        const char *at = tag ? tag + strlen("<image>") : t;
        if (tag && *at == '\n')
            at++;
        g_autofree char *nt =
            g_strdup_printf("%.*sPrior reports: <image>\n%s", (int)(at - t), t, at);
        cl_chat_conversation_add(c, turns[i].role, nt);
    }
    return c;
}

void cl_chat_conversation_add(ClChatConversation *c, ClChatRole role, const char *text)
{
    g_return_if_fail(c && text);
    char *copy = g_strdup(text);
    g_ptr_array_add(c->texts, copy);
    ClChatTurn t = { role, copy };
    g_array_append_val(c->turns, t);
}

/* One domain's texts. "pair" texts are the paper's two-image conversation; "seq" ones are used
 * when there are more than two images (the paper's ImgEdit sequence format, carried over to the
 * other domains). */
typedef struct {
    const char *name;
    const char *system_pair, *system_seq; /* NULL: no system turn */
    const char *first;                    /* first image's text */
    const char *middle;                   /* images between the first and the last (seq) */
    const char *filler_next;              /* answer before a middle image */
    const char *filler_last_pair, *filler_last_seq; /* answer before the last image */
    const char *last_pair, *last_seq; /* last image's text before the question; NULL: none */
    const char *sep;                  /* between that text and the question */
    const char *question_pair, *question_seq;
} Domain;

static const Domain domains[CL_CHAT_N_DOMAINS] = {
    [CL_CHAT_DOMAIN_GENERIC] = {
        .name = "generic",
        .system_pair = "You are an expert at detecting and describing changes between images. "
                       "Given two images of the same subject, describe what has changed.",
        .system_seq = "You are an expert at detecting and describing changes between images. "
                      "Given a sequence of images of the same subject, describe what has changed.",
        .first = "Here is the first image.",
        .middle = "Here is the next image.",
        .filler_next = "I see the image. Please show me the next image.",
        .filler_last_pair = "I see the image. Please show me the next image.",
        .filler_last_seq = "I see the image. Please show me the next image.",
        .last_pair = "Here is the second image.",
        .last_seq = "Here is the last image.",
        .sep = "\n",
        .question_pair = "What has changed between the two images?",
        .question_seq = "What has changed across these images?",
    },
    [CL_CHAT_DOMAIN_RADIOGRAPH] = {
        .name = "radiograph",
        .system_pair = "You are a medical imaging expert. Given a reference chest X-ray and a "
                       "current chest X-ray from the same patient, describe what findings have "
                       "changed.",
        .system_seq = "You are a medical imaging expert. Given a sequence of chest X-rays from the "
                      "same patient, from the reference (prior) to the current one, describe what "
                      "findings have changed.",
        .first = "This is the reference (prior) chest X-ray.",
        .middle = "This is a follow-up chest X-ray.",
        .filler_next = "Understood. Please provide the next chest X-ray.",
        .filler_last_pair = "Understood. Please provide the current chest X-ray.",
        .filler_last_seq = "Understood. Please provide the current chest X-ray.",
        .last_pair = "This is the current chest X-ray.",
        .last_seq = "This is the current chest X-ray.",
        .sep = "\n",
        .question_pair = "What has changed compared to the reference image?",
        .question_seq = "What has changed across these chest X-rays?",
    },
    [CL_CHAT_DOMAIN_AERIAL] = {
        .name = "aerial",
        .system_pair = "You are an expert at detecting and describing changes between two images. "
                       "Given a before and after image, describe what has changed.",
        .system_seq = "You are an expert at detecting and describing changes across a sequence of "
                      "images. Given a time series of images of the same place, describe what has "
                      "changed.",
        .first = "This is the before satellite image.",
        .middle = "This is the next satellite image.",
        .filler_next = "Understood. Please provide the next image.",
        .filler_last_pair = "Understood. Please provide the after image.",
        .filler_last_seq = "Understood. Please provide the after image.",
        .last_pair = "This is the after satellite image.",
        .last_seq = "This is the after satellite image.",
        .sep = " ",
        .question_pair = "Describe what has changed.",
        .question_seq = "Describe what has changed across these images.",
    },
    [CL_CHAT_DOMAIN_EDITS] = {
        .name = "edits",
        .system_pair = "You are given a pair of images. Describe the edit made between them.",
        .system_seq = "You are given a sequence of image edits. Describe all the changes made.",
        .first = "Here is the original image.",
        .middle = "Here is the next version.",
        .filler_next = "I see the image. Please show me the next version.",
        .filler_last_pair = "I see the image. Please show me the edited version.",
        .filler_last_seq = "I see the image. Please show me the next version.",
        .last_pair = NULL,
        .last_seq = NULL,
        .sep = "\n",
        .question_pair = "What was edited between the two images?",
        .question_seq = "What was edited across all these versions?",
    },
    [CL_CHAT_DOMAIN_SHAPES] = {
        .name = "shapes",
        .system_pair = NULL, /* the paper's CLEVR conversation has none */
        .system_seq = NULL,
        .first = "Here is an image of a scene with objects.",
        .middle = "Here is the next image of the scene.",
        .filler_next = "I see the scene. Please show me the next image.",
        .filler_last_pair = "I see the scene. Please show me the next image.",
        .filler_last_seq = "I see the scene. Please show me the next image.",
        .last_pair = NULL,
        .last_seq = NULL,
        .sep = "\n",
        .question_pair = "What changed between the two images?",
        .question_seq = "What changed across these images?",
    },
};

const char *cl_chat_domain_name(ClChatDomain d)
{
    if ((int)d < 0 || d >= CL_CHAT_N_DOMAINS)
        return NULL;
    return domains[d].name;
}

gboolean cl_chat_domain_from_name(const char *name, ClChatDomain *out)
{
    for (int d = 0; name && d < CL_CHAT_N_DOMAINS; d++)
        if (g_ascii_strcasecmp(name, domains[d].name) == 0) {
            if (out)
                *out = (ClChatDomain)d;
            return TRUE;
        }
    return FALSE;
}

static void add_image_turn(ClChatConversation *c, const char *text)
{
    g_autofree char *t = g_strconcat("<image>\n", text, NULL);
    cl_chat_conversation_add(c, CL_CHAT_USER, t);
}

ClChatConversation *cl_chat_describe_conversation(ClChatDomain domain, int n_images,
                                                  const char *question, GError **error)
{
    if ((int)domain < 0 || domain >= CL_CHAT_N_DOMAINS) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT, "chat: unknown domain %d",
                    (int)domain);
        return NULL;
    }
    if (n_images < 2 || n_images > CL_CHAT_MAX_IMAGES) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "chat: a description needs 2 to %d images, not %d", CL_CHAT_MAX_IMAGES,
                    n_images);
        return NULL;
    }
    if (question && strstr(question, "<image>")) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "chat: the question must not contain an <image> tag");
        return NULL;
    }
    const Domain *d = &domains[domain];
    gboolean pair = n_images == 2;
    ClChatConversation *c = cl_chat_conversation_new();
    const char *system = pair ? d->system_pair : d->system_seq;
    if (system)
        cl_chat_conversation_add(c, CL_CHAT_SYSTEM, system);

    add_image_turn(c, d->first);
    for (int i = 1; i + 1 < n_images; i++) {
        cl_chat_conversation_add(c, CL_CHAT_ASSISTANT, d->filler_next);
        add_image_turn(c, d->middle);
    }
    cl_chat_conversation_add(c, CL_CHAT_ASSISTANT, pair ? d->filler_last_pair : d->filler_last_seq);

    const char *q = question && *question ? question : pair ? d->question_pair : d->question_seq;
    const char *intro = pair ? d->last_pair : d->last_seq;
    g_autofree char *last = intro ? g_strconcat(intro, d->sep, q, NULL) : g_strdup(q);
    add_image_turn(c, last);
    return c;
}
