/* jsonl.c - ShareGPT-style JSONL training data (jsonl.h): the up-front index and validation, the
 * conversation -> ClTrainSample conversion (ids, loss mask, preprocessed images) that the
 * synthetic tasks share, an LRU cache of preprocessed images, and the seeded epoch shuffles. */
#include "train/jsonl.h"
#include "model/vist.h"

#include <errno.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "jsondepth.h"
#include "regularfile.h"
#include "model/decoder.h" /* CL_DECODER_VISUAL */
#include "model/preprocess.h"

G_DEFINE_QUARK(cl - dataset - error - quark, cl_dataset_error)

/* A sample's problems are reported at most this many times in skip mode (all are kept). */
#define MAX_SKIP_MESSAGES 20

/* The longest line read: a conversation and its image paths take kilobytes; a file without line
 * breaks (a binary file, /dev/zero) is refused here instead of being read whole into memory. */
#define MAX_LINE_BYTES ((gsize)16 << 20)

void cl_dataset_options_init(ClDatasetOptions *o)
{
    memset(o, 0, sizeof *o);
    o->long_policy = CL_DATASET_LONG_REFUSE;
}

/* ---- conversation -> ids and loss mask -------------------------------------------------------- */

/* The per-token supervision of every assistant turn: the chat template is per turn, so the
 * conversation's ids are the concatenation of each turn encoded alone, and a turn encoded alone
 * marks its own text and <|im_end|> when it is an assistant turn. */
static GArray *all_turns_mask(const ClTokenizer *tok, const ClChatTurn *turns, gsize n,
                              guint expect_len, GError **error)
{
    GArray *mask = g_array_sized_new(FALSE, FALSE, sizeof(guint8), expect_len);
    for (gsize i = 0; i < n; i++) {
        GArray *m = NULL;
        g_autoptr(GArray) ids = cl_chat_encode(tok, &turns[i], 1, FALSE, &m, error);
        if (!ids) {
            g_array_unref(mask);
            return NULL;
        }
        g_array_append_vals(mask, m->data, m->len);
        g_array_unref(m);
    }
    if (mask->len != expect_len) {
        g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_LINE,
                    "internal: per-turn encoding gives %u ids, the conversation %u", mask->len,
                    expect_len);
        g_array_unref(mask);
        return NULL;
    }
    return mask;
}

/* Encodes turns into a new sample with ids, mask and (with_pixels) an unfilled pixel buffer for
 * n_images. limit: most positions; truncate: cut longer samples at limit instead of refusing. */
static ClTrainSample *encode_sample(const ClModel *model, const ClChatTurn *turns, gsize n,
                                    guint n_images, gboolean all_turns, int limit,
                                    gboolean truncate, gboolean with_pixels, gboolean *truncated,
                                    GError **error)
{
    const ClModelConfig *cfg = &model->config;
    if (truncated)
        *truncated = FALSE;
    if (n == 0 || turns[n - 1].role != CL_CHAT_ASSISTANT) {
        g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_LINE,
                    "the conversation does not end with an assistant turn (the answer to train "
                    "on)");
        return NULL;
    }
    GArray *cmask = NULL;
    g_autoptr(GArray) chat = cl_chat_encode(model->tokenizer, turns, n, FALSE, &cmask, error);
    if (!chat)
        return NULL;
    g_autoptr(GArray) sup = cmask;
    if (all_turns) {
        g_array_unref(sup);
        sup = all_turns_mask(model->tokenizer, turns, n, chat->len, error);
        if (!sup)
            return NULL;
    }

    const gint32 *cid = (const gint32 *)(gconstpointer)chat->data;
    const guint8 *csup = (const guint8 *)sup->data;
    guint n_tags = 0;
    for (guint i = 0; i < chat->len; i++)
        n_tags += cid[i] == CL_TOKEN_IMAGE;
    if (n_tags != n_images) {
        g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_LINE,
                    "%u <image> tag%s in the messages but %u image%s given", n_tags,
                    n_tags == 1 ? "" : "s", n_images, n_images == 1 ? "" : "s");
        return NULL;
    }

    const int M = cl_config_n_visual(cfg);
    const int per_image = cl_config_image_positions(cfg); /* M, and CASA's gist token */
    gint64 total = (gint64)chat->len - n_tags + (gint64)n_tags * per_image;
    /* the position just after the last image's visual block: a cut before it is refused */
    gint64 visual_end = 0, pos = 0;
    for (guint i = 0; i < chat->len; i++) {
        pos += cid[i] == CL_TOKEN_IMAGE ? per_image : 1;
        if (cid[i] == CL_TOKEN_IMAGE)
            visual_end = pos;
    }
    int n_ids = (int)MIN(total, (gint64)limit);
    if (total > limit) {
        if (!truncate) {
            g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_TOO_LONG,
                        "the sample takes %" G_GINT64_FORMAT " decoder positions (%u image%s x %d "
                        "visual positions + %u text tokens) but the limit is %d: shorten it, use "
                        "fewer images, or allow truncation",
                        total, n_images, n_images == 1 ? "" : "s", M, chat->len - n_tags, limit);
            return NULL;
        }
        if (visual_end > limit) {
            g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_TOO_LONG,
                        "the sample takes %" G_GINT64_FORMAT " decoder positions and its images "
                        "reach position %" G_GINT64_FORMAT ", past the limit of %d: it cannot be "
                        "truncated without cutting an image",
                        total, visual_end, limit);
            return NULL;
        }
        if (truncated)
            *truncated = TRUE;
    }

    g_autoptr(ClTrainSample) s = g_new0(ClTrainSample, 1);
    s->n_ids = n_ids;
    s->ids = g_try_new(gint32, MAX(n_ids, 1));
    guint8 *target = g_try_new0(guint8, MAX(n_ids, 1)); /* target[i]: ids[i] is supervised */
    s->mask = g_try_new0(guint8, MAX(n_ids, 1));
    if (!s->ids || !s->mask || !target) {
        g_free(target);
        g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_TOO_LONG,
                    "not enough memory for a sample of %d positions", n_ids);
        return NULL;
    }
    int at = 0;
    for (guint i = 0; i < chat->len && at < n_ids; i++) {
        if (cid[i] == CL_TOKEN_IMAGE) {
            for (int m = 0; m < M && at < n_ids; m++)
                s->ids[at++] = CL_DECODER_VISUAL; /* target stays 0: never a visual position */
            if (per_image > M && at < n_ids)
                s->ids[at++] = CL_TOKEN_IMAGE; /* the gist token: never a target either */
        } else {
            target[at] = csup[i];
            s->ids[at++] = cid[i];
        }
    }
    /* sample.h: position t predicts ids[t + 1] */
    for (int t = 0; t + 1 < n_ids; t++) {
        s->mask[t] = target[t + 1];
        s->n_supervised += s->mask[t];
    }
    g_free(target);
    if (s->n_supervised == 0) {
        g_set_error(
            error, CL_DATASET_ERROR, CL_DATASET_ERROR_TOO_LONG,
            "truncated at %d positions the sample keeps no supervised token (it takes %" G_GINT64_FORMAT
            ")",
            n_ids, total);
        return NULL;
    }

    s->n_visual_per_image = M;
    s->n_images = n_images;
    s->channels = cfg->channels;
    s->size = cfg->image_size;
    if (n_images > 0 && with_pixels) {
        s->pixels =
            g_try_new(float, (gsize)n_images * cfg->channels * cfg->image_size * cfg->image_size);
        if (!s->pixels) {
            g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_TOO_LONG,
                        "not enough memory for %u preprocessed images", n_images);
            return NULL;
        }
    }
    return g_steal_pointer(&s);
}

static inline gsize image_floats(const ClTrainSample *s)
{
    return (gsize)s->channels * s->size * s->size;
}

/* The context's slot (the last image tag's M visual positions, at cp) replaced by the context:
 * its tokens, or (VIST2) its pages' visual positions and the tail's tokens; with_pixels: the
 * pages rendered too (ClTrainSample.page_pixels). */
static gboolean splice_context(const ClModel *model, ClTrainSample *s, const char *context,
                               gboolean with_pixels, GError **error)
{
    const ClModelConfig *cfg = &model->config;
    const int M = cl_config_n_visual(cfg);
    int last = -1;
    for (int t = 0; t < s->n_ids; t++)
        if (s->ids[t] == CL_DECODER_VISUAL)
            last = t;
    const int cp = last - M + 1;
    g_assert(cp >= 0);
    const int slot = cl_config_image_positions(cfg); /* the tag's positions: M (and a gist) */
    g_autoptr(GArray) ctx = cl_tokenizer_encode(model->tokenizer, context, -1, FALSE);
    const int n_ctx = (int)ctx->len;
    int pages = 0;
    const int packed = cl_vist_plan(cfg, n_ctx, &pages);
    const int rep = pages * M + (n_ctx - packed);
    const gint64 n_ids = (gint64)s->n_ids - slot + rep;
    if (n_ids > cfg->max_len) {
        g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_TOO_LONG,
                    "with its context (%d tokens%s) the sample takes %" G_GINT64_FORMAT
                    " decoder positions but the limit is %d",
                    n_ctx, pages ? ", VIST2 pages" : "", n_ids, cfg->max_len);
        return FALSE;
    }
    gint32 *ids = g_new(gint32, MAX(n_ids, 1));
    guint8 *mask = g_new0(guint8, MAX(n_ids, 1));
    memcpy(ids, s->ids, sizeof(gint32) * cp);
    memcpy(mask, s->mask, cp);
    for (int i = 0; i < pages * M; i++)
        ids[cp + i] = CL_DECODER_VISUAL;
    memcpy(ids + cp + pages * M, (const gint32 *)(gconstpointer)ctx->data + packed,
           sizeof(gint32) * (size_t)(n_ctx - packed)); /* the context is never supervised */
    const int after = s->n_ids - (cp + slot);
    memcpy(ids + cp + rep, s->ids + cp + slot, sizeof(gint32) * after);
    memcpy(mask + cp + rep, s->mask + cp + slot, after);
    g_free(s->ids);
    g_free(s->mask);
    s->ids = ids;
    s->mask = mask;
    s->n_ids = (int)n_ids;
    s->n_pages = pages;
    if (pages > 0 && with_pixels) { /* (a data set's index pass needs the length alone) */
        const size_t px = (size_t)cfg->channels * cfg->image_size * cfg->image_size;
        s->page_pixels = g_try_new(float, px *pages);
        if (!s->page_pixels) {
            g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_TOO_LONG,
                        "not enough memory for %d context pages", pages);
            return FALSE;
        }
        for (int p = 0; p < pages; p++) {
            const int a = p * cfg->vist_chunk, b = MIN(a + cfg->vist_chunk, packed);
            g_free(cl_vist_chunk_pixels(model, (const gint32 *)(gconstpointer)ctx->data + a, b - a,
                                        s->page_pixels + p * px, NULL));
        }
    }
    return TRUE;
}

/* encode_sample with a context (NULL or "": none) in cl_chat_with_context's slot: its tokens,
 * or a VIST2 model's pages (splice_context); a sample with one is never truncated. */
static ClTrainSample *encode_with_context(const ClModel *model, const ClChatTurn *turns, gsize n,
                                          guint n_images, const char *context, gboolean all_turns,
                                          int limit, gboolean truncate, gboolean with_pixels,
                                          gboolean *truncated, GError **error)
{
    if (!context || !*context)
        return encode_sample(model, turns, n, n_images, all_turns, limit, truncate, with_pixels,
                             truncated, error);
    g_autoptr(ClChatConversation) conv = cl_chat_with_context(turns, n);
    /* the context's tag counts as an image until it is spliced in; the limit then too */
    g_autoptr(ClTrainSample) s =
        encode_sample(model, cl_chat_conversation_turns(conv), n, n_images + 1, all_turns,
                      CL_CONFIG_MAX_LEN, FALSE, with_pixels, truncated, error);
    if (!s)
        return NULL;
    s->n_images = n_images;
    if (!splice_context(model, s, context, with_pixels, error))
        return NULL;
    if (s->n_ids > limit) {
        g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_TOO_LONG,
                    "with its context the sample takes %d decoder positions but the limit is %d",
                    s->n_ids, limit);
        return NULL;
    }
    return g_steal_pointer(&s);
}

ClTrainSample *cl_train_sample_from_turns(const ClModel *model, const ClChatTurn *turns, gsize n,
                                          const ClImage *const *images, const guint *frames,
                                          guint n_images, gboolean all_turns, GError **error)
{
    return cl_train_sample_from_turns_with_context(model, turns, n, images, frames, n_images, NULL,
                                                   all_turns, error);
}

ClTrainSample *cl_train_sample_from_turns_with_context(
    const ClModel *model, const ClChatTurn *turns, gsize n, const ClImage *const *images,
    const guint *frames, guint n_images, const char *context, gboolean all_turns, GError **error)
{
    g_return_val_if_fail(model != NULL && (turns != NULL || n == 0), NULL);
    g_return_val_if_fail(images != NULL || n_images == 0, NULL);
    if (n_images > CL_CHAT_MAX_IMAGES) {
        g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_LINE,
                    "%u images in one sample; at most %d", n_images, CL_CHAT_MAX_IMAGES);
        return NULL;
    }
    g_autoptr(ClTrainSample) s =
        encode_with_context(model, turns, n, n_images, context, all_turns, model->config.max_len,
                            FALSE, TRUE, NULL, error);
    if (!s)
        return NULL;
    for (guint k = 0; k < n_images; k++) {
        g_autoptr(GError) perr = NULL;
        if (!images[k]) {
            g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_LINE, "image %u is missing",
                        k + 1);
            return NULL;
        }
        if (!cl_preprocess_image(images[k], frames ? frames[k] : 0, NULL, s->size, s->channels,
                                 s->pixels + k * image_floats(s), NULL, &perr)) {
            g_set_error(error, perr->domain, perr->code, "image %u (%s): %s", k + 1,
                        images[k]->path ? images[k]->path : "in memory", perr->message);
            return NULL;
        }
    }
    s->id = g_strdup("synthetic");
    return g_steal_pointer(&s);
}

/* ---- one JSONL line ------------------------------------------------------------------------ */

typedef struct {
    ClChatConversation *conv;
    GPtrArray *paths; /* resolved file paths (char*) */
    GArray *frames;   /* guint per image */
    char *id;
    char *context; /* "context": text read with the images (docs/MODEL.md §4.6), or NULL */
} Line;

static void line_clear(Line *l)
{
    g_clear_pointer(&l->conv, cl_chat_conversation_free);
    g_clear_pointer(&l->paths, g_ptr_array_unref);
    g_clear_pointer(&l->frames, g_array_unref);
    g_clear_pointer(&l->id, g_free);
    g_clear_pointer(&l->context, g_free);
}

/* The message made valid UTF-8: a line's strings may hold lone surrogate escapes ("\ud83d"),
 * which json-glib decodes to bytes that are not UTF-8, and the messages quote them. */
static void line_error(GError **error, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void line_error(GError **error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *raw = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_autofree char *msg = g_utf8_make_valid(raw, -1);
    g_set_error_literal(error, CL_DATASET_ERROR, CL_DATASET_ERROR_LINE, msg);
}
#define LINE_ERROR(...) line_error(error, __VA_ARGS__)

static gboolean role_from_name(const char *name, ClChatRole *out)
{
    static const struct {
        const char *name;
        ClChatRole role;
    } roles[] = {
        { "system", CL_CHAT_SYSTEM },       { "user", CL_CHAT_USER },
        { "assistant", CL_CHAT_ASSISTANT }, { "human", CL_CHAT_USER },
        { "gpt", CL_CHAT_ASSISTANT }, /* the older ShareGPT schema */
    };
    for (gsize i = 0; i < G_N_ELEMENTS(roles); i++)
        if (strcmp(name, roles[i].name) == 0) {
            *out = roles[i].role;
            return TRUE;
        }
    return FALSE;
}

/* A member that is one of two names (the new and the old ShareGPT schema). */
static JsonNode *member2(JsonObject *o, const char *a, const char *b, const char **which)
{
    *which = json_object_has_member(o, a) ? a : b;
    return json_object_get_member(o, *which);
}

/* Resolves an "images" entry: the JSONL's folder for relative paths, "#N" for a frame. */
static gboolean resolve_image(const char *dir, const char *entry, guint k, char **path,
                              guint *frame, GError **error)
{
    g_autofree char *full =
        g_path_is_absolute(entry) ? g_strdup(entry) : g_build_filename(dir, entry, NULL);
    *frame = 0;
    if (!g_file_test(full, G_FILE_TEST_IS_REGULAR)) {
        const char *hash = strrchr(full, '#');
        if (hash && hash[1] && strspn(hash + 1, "0123456789") == strlen(hash + 1)) {
            guint64 f = g_ascii_strtoull(hash + 1, NULL, 10);
            g_autofree char *base = g_strndup(full, (gsize)(hash - full));
            if (f > G_MAXUINT) {
                LINE_ERROR("image %u \"%s\": frame number out of range", k + 1, entry);
                return FALSE;
            }
            if (g_file_test(base, G_FILE_TEST_IS_REGULAR)) {
                *frame = (guint)f;
                *path = g_steal_pointer(&base);
                return TRUE;
            }
        }
        LINE_ERROR("image %u \"%s\" not found (looked for %s)", k + 1, entry, full);
        return FALSE;
    }
    *path = g_steal_pointer(&full);
    return TRUE;
}

/* Parses and checks one line. check_files: test that every image file exists. */
static gboolean parse_line(const char *dir, const char *text, gsize len, guint lineno,
                           gboolean check_files, Line *out, GError **error)
{
    memset(out, 0, sizeof *out);
    if (!cl_json_depth_ok(text, (gssize)len, CL_JSON_MAX_DEPTH)) {
        LINE_ERROR("not valid JSON (arrays and objects nested deeper than %d levels)",
                   CL_JSON_MAX_DEPTH);
        return FALSE;
    }
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_autoptr(GError) jerr = NULL;
    if (!json_parser_load_from_data(parser, text, (gssize)len, &jerr)) {
        LINE_ERROR("not valid JSON (%s)", jerr->message);
        return FALSE;
    }
    JsonNode *root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        LINE_ERROR("not a JSON object (each line must be {\"messages\": [...], \"images\": "
                   "[...]})");
        return FALSE;
    }
    JsonObject *obj = json_node_get_object(root);
    const char *mname;
    JsonNode *mnode = member2(obj, "messages", "conversations", &mname);
    if (!mnode) {
        LINE_ERROR("no \"messages\" list");
        return FALSE;
    }
    if (!JSON_NODE_HOLDS_ARRAY(mnode)) {
        LINE_ERROR("\"%s\" is not a list", mname);
        return FALSE;
    }
    JsonArray *msgs = json_node_get_array(mnode);
    guint n_msgs = json_array_get_length(msgs);
    if (n_msgs == 0) {
        LINE_ERROR("\"%s\" is empty", mname);
        return FALSE;
    }

    out->conv = cl_chat_conversation_new();
    for (guint i = 0; i < n_msgs; i++) {
        JsonNode *mn = json_array_get_element(msgs, i);
        if (!JSON_NODE_HOLDS_OBJECT(mn)) {
            LINE_ERROR("message %u is not an object", i + 1);
            goto fail;
        }
        JsonObject *m = json_node_get_object(mn);
        const char *rname, *cname;
        JsonNode *rn = member2(m, "role", "from", &rname);
        JsonNode *cn = member2(m, "content", "value", &cname);
        if (!rn) {
            LINE_ERROR("message %u has no \"role\"", i + 1);
            goto fail;
        }
        if (!JSON_NODE_HOLDS_VALUE(rn) || json_node_get_value_type(rn) != G_TYPE_STRING) {
            LINE_ERROR("message %u: \"%s\" is not a string", i + 1, rname);
            goto fail;
        }
        ClChatRole role;
        const char *rs = json_node_get_string(rn);
        if (!role_from_name(rs, &role)) {
            LINE_ERROR("message %u has an unknown role \"%s\" (system, user or assistant)", i + 1,
                       rs);
            goto fail;
        }
        if (!cn) {
            LINE_ERROR("message %u has no \"content\"", i + 1);
            goto fail;
        }
        if (!JSON_NODE_HOLDS_VALUE(cn) || json_node_get_value_type(cn) != G_TYPE_STRING) {
            LINE_ERROR("message %u: \"%s\" is not a string (lists of content parts are not "
                       "read; write the text with <image> tags)",
                       i + 1, cname);
            goto fail;
        }
        if (role == CL_CHAT_SYSTEM && i != 0) {
            LINE_ERROR("message %u is a system message; only the first message may be one", i + 1);
            goto fail;
        }
        cl_chat_conversation_add(out->conv, role, json_node_get_string(cn));
    }
    const ClChatTurn *turns = cl_chat_conversation_turns(out->conv);
    if (turns[n_msgs - 1].role != CL_CHAT_ASSISTANT) {
        LINE_ERROR("the last message is a %s message; a training sample ends with the "
                   "assistant's answer",
                   turns[n_msgs - 1].role == CL_CHAT_SYSTEM ? "system" : "user");
        goto fail;
    }

    out->paths = g_ptr_array_new_with_free_func(g_free);
    out->frames = g_array_new(FALSE, FALSE, sizeof(guint));
    JsonNode *in = json_object_get_member(obj, "images");
    JsonArray *imgs = NULL;
    if (in && !JSON_NODE_HOLDS_NULL(in)) {
        if (!JSON_NODE_HOLDS_ARRAY(in)) {
            LINE_ERROR("\"images\" is not a list");
            goto fail;
        }
        imgs = json_node_get_array(in);
    }
    guint n_images = imgs ? json_array_get_length(imgs) : 0;
    int n_tags = cl_chat_count_images(turns, n_msgs);
    if ((guint)n_tags != n_images) {
        LINE_ERROR("%d <image> tag%s in the messages but %u image%s listed", n_tags,
                   n_tags == 1 ? "" : "s", n_images, n_images == 1 ? "" : "s");
        goto fail;
    }
    if (n_images > CL_CHAT_MAX_IMAGES) {
        LINE_ERROR("%u images; at most %d per sample", n_images, CL_CHAT_MAX_IMAGES);
        goto fail;
    }
    for (guint k = 0; k < n_images; k++) {
        JsonNode *pn = json_array_get_element(imgs, k);
        if (!JSON_NODE_HOLDS_VALUE(pn) || json_node_get_value_type(pn) != G_TYPE_STRING ||
            !*json_node_get_string(pn)) {
            LINE_ERROR("images[%u] is not a file path", k);
            goto fail;
        }
        const char *entry = json_node_get_string(pn);
        char *path = NULL;
        guint frame = 0;
        if (check_files) {
            if (!resolve_image(dir, entry, k, &path, &frame, error))
                goto fail;
        } else if (!resolve_image(dir, entry, k, &path, &frame, NULL)) {
            /* gone since the open: keep the name, the load will say what is wrong */
            path = g_path_is_absolute(entry) ? g_strdup(entry) : g_build_filename(dir, entry, NULL);
        }
        g_ptr_array_add(out->paths, path);
        g_array_append_val(out->frames, frame);
    }

    JsonNode *idn = json_object_get_member(obj, "id");
    if (idn && JSON_NODE_HOLDS_VALUE(idn) && json_node_get_value_type(idn) == G_TYPE_STRING)
        out->id = g_strdup(json_node_get_string(idn));
    else if (idn && JSON_NODE_HOLDS_VALUE(idn) && json_node_get_value_type(idn) == G_TYPE_INT64)
        out->id = g_strdup_printf("%" G_GINT64_FORMAT, json_node_get_int(idn));
    else
        out->id = g_strdup_printf("line %u", lineno);
    JsonNode *cn = json_object_get_member(obj, "context");
    if (cn && !JSON_NODE_HOLDS_NULL(cn)) {
        if (!JSON_NODE_HOLDS_VALUE(cn) || json_node_get_value_type(cn) != G_TYPE_STRING) {
            LINE_ERROR("\"context\" is not a string");
            goto fail;
        }
        out->context = g_strdup(json_node_get_string(cn));
    }
    return TRUE;

fail:
    line_clear(out);
    return FALSE;
}

/* ---- the dataset --------------------------------------------------------------------------- */

typedef struct {
    char *key;
    float *pixels;
    GList *link; /* in lru */
} CacheEntry;

static void cache_entry_free(gpointer p)
{
    CacheEntry *e = p;
    g_free(e->key);
    g_free(e->pixels);
    g_free(e);
}

struct _ClDataset {
    char *path; /* as given, for messages */
    char *dir;  /* the folder relative image paths start from */
    const ClModel *model;
    ClDatasetOptions o;
    int limit;
    GArray *offsets; /* gint64: byte offset of each usable line */
    GArray *lengths; /* gsize: its length without the newline */
    GArray *lines;   /* guint: its line number */
    ClDatasetSummary sum;
    GPtrArray *problems;

    GMutex lock;       /* the cache */
    GHashTable *cache; /* key -> CacheEntry */
    GQueue lru;        /* keys, most recent first */
    guint64 hits, misses;
};

void cl_dataset_free(ClDataset *d)
{
    if (!d)
        return;
    g_free(d->path);
    g_free(d->dir);
    g_array_unref(d->offsets);
    g_array_unref(d->lengths);
    g_array_unref(d->lines);
    g_ptr_array_unref(d->problems);
    g_hash_table_unref(d->cache);
    g_queue_clear(&d->lru);
    g_mutex_clear(&d->lock);
    g_free(d);
}

/* Validates one line completely (parse, files, encode, length). On success adds it. */
static gboolean index_line(ClDataset *d, const char *text, gsize len, gint64 offset, guint lineno,
                           GError **error)
{
    Line l;
    if (!parse_line(d->dir, text, len, lineno, TRUE, &l, error))
        return FALSE;
    gboolean truncated = FALSE;
    g_autoptr(ClTrainSample) s = encode_with_context(
        d->model, cl_chat_conversation_turns(l.conv), cl_chat_conversation_len(l.conv),
        l.paths->len, l.context, d->o.all_turns, d->limit,
        d->o.long_policy == CL_DATASET_LONG_TRUNCATE, FALSE, &truncated, error);
    guint n_images = l.paths->len;
    line_clear(&l);
    if (!s)
        return FALSE;
    g_array_append_val(d->offsets, offset);
    g_array_append_val(d->lengths, len);
    g_array_append_val(d->lines, lineno);
    d->sum.n_samples++;
    d->sum.n_truncated += truncated;
    d->sum.n_images += n_images;
    d->sum.n_positions += (guint64)s->n_ids;
    d->sum.n_supervised += (guint64)s->n_supervised;
    d->sum.max_positions = MAX(d->sum.max_positions, s->n_ids);
    return TRUE;
}

/* fopen(path, "rb") for a regular file only (regularfile.h): a folder, a pipe, a device or a
 * socket is refused with a message saying so. */
static FILE *open_regular(const char *path, GError **error)
{
    const char *why = NULL;
    int fd = cl_open_regular(path, &why);
    if (fd < 0) {
        g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_IO,
                    fd == -1 ? "cannot open %s: %s" : "%s %s, not a JSONL file", path, why);
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f)
        close(fd);
    return f;
}

/* The next line of f, its '\n' kept, into line: its length, 0 at the end of the file, -1 on an
 * error (*ok cleared, *error set): a read error, or a line over MAX_LINE_BYTES. */
static gssize read_line_bounded(FILE *f, GString *line, const char *path, guint lineno,
                                gboolean *ok, GError **error)
{
    g_string_truncate(line, 0);
    int c;
    errno = 0;
    while ((c = getc_unlocked(f)) != EOF) {
        g_string_append_c(line, (char)c);
        if (c == '\n')
            return (gssize)line->len;
        if (line->len > MAX_LINE_BYTES) {
            g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_LINE,
                        "%s:%u: a line longer than %u MiB: not a JSONL file of conversations", path,
                        lineno, (guint)(MAX_LINE_BYTES >> 20));
            *ok = FALSE;
            return -1;
        }
    }
    if (ferror(f)) {
        int e = errno;
        g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_IO, "%s:%u: read error: %s", path,
                    lineno, g_strerror(e));
        *ok = FALSE;
        return -1;
    }
    return (gssize)line->len;
}

static gboolean is_blank(const char *s, gsize len)
{
    for (gsize i = 0; i < len; i++)
        if (!g_ascii_isspace(s[i]))
            return FALSE;
    return TRUE;
}

ClDataset *cl_dataset_open(const char *path, const ClModel *model, const ClDatasetOptions *o,
                           GError **error)
{
    g_return_val_if_fail(path != NULL && model != NULL && model->tokenizer != NULL, NULL);
    ClDatasetOptions defaults;
    if (!o) {
        cl_dataset_options_init(&defaults);
        o = &defaults;
    }
    FILE *f = open_regular(path, error);
    if (!f)
        return NULL;

    g_autoptr(ClDataset) d = g_new0(ClDataset, 1);
    d->path = g_strdup(path);
    d->dir = g_path_get_dirname(path);
    d->model = model;
    d->o = *o;
    d->limit =
        o->max_len > 0 && o->max_len < model->config.max_len ? o->max_len : model->config.max_len;
    d->offsets = g_array_new(FALSE, FALSE, sizeof(gint64));
    d->lengths = g_array_new(FALSE, FALSE, sizeof(gsize));
    d->lines = g_array_new(FALSE, FALSE, sizeof(guint));
    d->problems = g_ptr_array_new_with_free_func(g_free);
    g_mutex_init(&d->lock);
    d->cache = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, cache_entry_free);
    g_queue_init(&d->lru);

    g_autoptr(GString) line = g_string_sized_new(4096);
    gint64 offset = 0;
    guint lineno = 0;
    gboolean ok = TRUE;
    for (;;) {
        gssize got = read_line_bounded(f, line, path, lineno + 1, &ok, error);
        if (got <= 0)
            break;
        const char *buf = line->str;
        lineno++;
        gint64 at = offset;
        offset += got;
        gsize len = (gsize)got;
        const char *text = buf;
        while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
            len--;
        if (lineno == 1 && len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
            text += 3; /* a UTF-8 byte-order mark */
            at += 3;
            len -= 3;
        }
        d->sum.n_lines = lineno;
        if (is_blank(text, len)) {
            d->sum.n_blank++;
            continue;
        }
        g_autoptr(GError) lerr = NULL;
        if (index_line(d, text, len, at, lineno, &lerr))
            continue;
        gboolean too_long = g_error_matches(lerr, CL_DATASET_ERROR, CL_DATASET_ERROR_TOO_LONG);
        if (!o->skip_bad_lines) {
            g_set_error(error, lerr->domain, lerr->code, "%s:%u: %s%s", path, lineno, lerr->message,
                        too_long ? "" : " (or open the file with bad lines skipped)");
            ok = FALSE;
            break;
        }
        char *msg = g_strdup_printf("%s:%u: %s", path, lineno, lerr->message);
        if (d->problems->len < MAX_SKIP_MESSAGES)
            g_message("skipping %s", msg);
        g_ptr_array_add(d->problems, msg);
        if (too_long)
            d->sum.n_too_long++;
        else
            d->sum.n_bad++;
    }
    fclose(f);
    if (!ok)
        return NULL;
    if (d->sum.n_samples == 0) {
        g_autofree char *summary = cl_dataset_summary_text(d);
        g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_EMPTY, "%s has no usable sample: %s",
                    path, summary);
        return NULL;
    }
    return g_steal_pointer(&d);
}

guint cl_dataset_count(const ClDataset *d)
{
    return d->sum.n_samples;
}

const ClDatasetSummary *cl_dataset_summary(const ClDataset *d)
{
    return &d->sum;
}

const GPtrArray *cl_dataset_problems(const ClDataset *d)
{
    return d->problems;
}

guint cl_dataset_line(const ClDataset *d, guint index)
{
    g_return_val_if_fail(index < d->lines->len, 0);
    return g_array_index(d->lines, guint, index);
}

char *cl_dataset_summary_text(const ClDataset *d)
{
    const ClDatasetSummary *s = &d->sum;
    GString *t = g_string_new(NULL);
    g_string_append_printf(t, "%u sample%s from %u line%s", s->n_samples,
                           s->n_samples == 1 ? "" : "s", s->n_lines, s->n_lines == 1 ? "" : "s");
    if (s->n_blank)
        g_string_append_printf(t, ", %u blank", s->n_blank);
    if (s->n_bad)
        g_string_append_printf(t, ", %u bad line%s skipped", s->n_bad, s->n_bad == 1 ? "" : "s");
    if (s->n_too_long)
        g_string_append_printf(t, ", %u refused as longer than %d positions", s->n_too_long,
                               d->limit);
    if (s->n_truncated)
        g_string_append_printf(t, ", %u truncated to %d positions", s->n_truncated, d->limit);
    if (s->n_samples)
        g_string_append_printf(t,
                               "; %u images, %" G_GUINT64_FORMAT
                               " positions (longest %d), %" G_GUINT64_FORMAT
                               " supervised targets (%s)",
                               s->n_images, s->n_positions, s->max_positions, s->n_supervised,
                               d->o.all_turns ? "every assistant turn" : "final answers");
    return g_string_free(t, FALSE);
}

void cl_dataset_cache_stats(const ClDataset *d, guint64 *hits, guint64 *misses)
{
    g_mutex_lock((GMutex *)&d->lock);
    if (hits)
        *hits = d->hits;
    if (misses)
        *misses = d->misses;
    g_mutex_unlock((GMutex *)&d->lock);
}

/* Copies a cached image into out; FALSE on a miss. */
static gboolean cache_lookup(ClDataset *d, const char *key, float *out, gsize n)
{
    if (d->o.image_cache == 0)
        return FALSE;
    g_mutex_lock(&d->lock);
    CacheEntry *e = g_hash_table_lookup(d->cache, key);
    if (e) {
        memcpy(out, e->pixels, n * sizeof(float));
        g_queue_unlink(&d->lru, e->link);
        g_queue_push_head_link(&d->lru, e->link);
        d->hits++;
    } else {
        d->misses++;
    }
    g_mutex_unlock(&d->lock);
    return e != NULL;
}

static void cache_insert(ClDataset *d, const char *key, const float *px, gsize n)
{
    if (d->o.image_cache == 0)
        return;
    g_mutex_lock(&d->lock);
    if (!g_hash_table_contains(d->cache, key)) { /* another thread may have loaded it too */
        CacheEntry *e = g_new0(CacheEntry, 1);
        e->key = g_strdup(key);
        e->pixels = g_memdup2(px, n * sizeof(float));
        g_queue_push_head(&d->lru, e->key);
        e->link = d->lru.head;
        g_hash_table_insert(d->cache, e->key, e);
        while (d->lru.length > d->o.image_cache) {
            char *old = g_queue_pop_tail(&d->lru);
            g_hash_table_remove(d->cache, old); /* frees the entry and its key */
        }
    }
    g_mutex_unlock(&d->lock);
}

/* Reads the bytes of sample index's line. */
static char *read_line(ClDataset *d, guint index, gsize *len, GError **error)
{
    gint64 off = g_array_index(d->offsets, gint64, index);
    gsize n = g_array_index(d->lengths, gsize, index);
    guint lineno = g_array_index(d->lines, guint, index);
    FILE *f = fopen(d->path, "rb");
    if (!f) {
        int e = errno;
        g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_IO, "%s:%u: cannot reopen: %s",
                    d->path, lineno, g_strerror(e));
        return NULL;
    }
    char *text = g_try_malloc(n + 1);
    gboolean ok = text && fseeko(f, (off_t)off, SEEK_SET) == 0 && fread(text, 1, n, f) == n;
    fclose(f);
    if (!ok) {
        g_free(text);
        g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_IO,
                    "%s:%u: cannot read the line back (was the file changed since it was "
                    "opened?)",
                    d->path, lineno);
        return NULL;
    }
    text[n] = '\0';
    *len = n;
    return text;
}

ClTrainSample *cl_dataset_get(ClDataset *d, guint index, GError **error)
{
    g_return_val_if_fail(d != NULL, NULL);
    if (index >= d->sum.n_samples) {
        g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_INDEX,
                    "sample %u asked for; %s has %u", index, d->path, d->sum.n_samples);
        return NULL;
    }
    guint lineno = g_array_index(d->lines, guint, index);
    gsize len = 0;
    g_autofree char *text = read_line(d, index, &len, error);
    if (!text)
        return NULL;
    g_autoptr(GError) lerr = NULL;
    Line l;
    if (!parse_line(d->dir, text, len, lineno, FALSE, &l, &lerr)) {
        g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_IO,
                    "%s:%u: the line no longer reads (was the file changed since it was "
                    "opened?): %s",
                    d->path, lineno, lerr->message);
        return NULL;
    }
    g_autoptr(ClTrainSample) s = encode_with_context(
        d->model, cl_chat_conversation_turns(l.conv), cl_chat_conversation_len(l.conv),
        l.paths->len, l.context, d->o.all_turns, d->limit,
        d->o.long_policy == CL_DATASET_LONG_TRUNCATE, TRUE, NULL, &lerr);
    if (!s) {
        g_set_error(error, lerr->domain, lerr->code, "%s:%u: %s", d->path, lineno, lerr->message);
        line_clear(&l);
        return NULL;
    }

    /* images: the same file named twice in a sample (two frames) is decoded once */
    const gsize per = image_floats(s);
    g_autoptr(ClImage) img = NULL;
    const char *img_path = NULL;
    gboolean ok = TRUE;
    for (guint k = 0; ok && k < l.paths->len; k++) {
        const char *p = g_ptr_array_index(l.paths, k);
        guint frame = g_array_index(l.frames, guint, k);
        g_autofree char *key = g_strdup_printf("%s#%u", p, frame);
        float *out = s->pixels + k * per;
        if (cache_lookup(d, key, out, per))
            continue;
        g_autoptr(GError) ierr = NULL;
        if (!img_path || strcmp(img_path, p) != 0) {
            g_clear_pointer(&img, cl_image_free);
            img_path = NULL;
            img = cl_image_load(p, NULL, &ierr);
            if (!img) {
                g_set_error(error, ierr->domain, ierr->code, "%s:%u: image %u (%s): %s", d->path,
                            lineno, k + 1, p, ierr->message);
                ok = FALSE;
                break;
            }
            img_path = p;
        }
        if (frame >= cl_image_n_frames(img)) {
            g_set_error(error, CL_DATASET_ERROR, CL_DATASET_ERROR_LINE,
                        "%s:%u: image %u (%s) asks for frame #%u but the file has %u frame%s "
                        "(#0 to #%u)",
                        d->path, lineno, k + 1, p, frame, cl_image_n_frames(img),
                        cl_image_n_frames(img) == 1 ? "" : "s", cl_image_n_frames(img) - 1);
            ok = FALSE;
            break;
        }
        if (!cl_preprocess_image(img, frame, NULL, s->size, s->channels, out, NULL, &ierr)) {
            g_set_error(error, ierr->domain, ierr->code, "%s:%u: image %u (%s): %s", d->path,
                        lineno, k + 1, p, ierr->message);
            ok = FALSE;
            break;
        }
        cache_insert(d, key, out, per);
    }
    if (ok)
        s->id = g_steal_pointer(&l.id);
    line_clear(&l);
    return ok ? g_steal_pointer(&s) : NULL;
}

/* ---- shuffles ------------------------------------------------------------------------------ */

static inline guint64 splitmix64(guint64 *state)
{
    guint64 z = (*state += G_GUINT64_CONSTANT(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Uniform in [0, range) without modulo bias (rejection of the top partial block). */
static guint64 bounded(guint64 *state, guint64 range)
{
    guint64 limit = G_MAXUINT64 - G_MAXUINT64 % range;
    guint64 r;
    do
        r = splitmix64(state);
    while (r >= limit);
    return r % range;
}

void cl_data_shuffle(guint *order, guint n, guint64 seed)
{
    g_return_if_fail(order != NULL || n == 0);
    for (guint i = 0; i < n; i++)
        order[i] = i;
    guint64 state = seed;
    for (guint i = n; i > 1; i--) {
        guint j = (guint)bounded(&state, i);
        guint t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
}

void cl_dataset_epoch_order(guint *order, guint n, guint64 seed, guint64 epoch)
{
    /* the epoch is mixed into the seed through one splitmix step, so neighbouring epochs (and
     * neighbouring seeds) get unrelated permutations */
    guint64 st = seed ^ (epoch * G_GUINT64_CONSTANT(0xD1B54A32D192ED03));
    cl_data_shuffle(order, n, splitmix64(&st));
}
