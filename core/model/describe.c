/* describe.c - the describe pipeline: preprocess -> stateful encoder over the sequence -> chat
 * prompt with the visual tokens -> generation (streamed) -> heatmaps and timings. */
#include "model/describe.h"
#include "model/vist.h"

#include <string.h>

#include "model/decoder.h"
#include "model/encoder.h"

void cl_describe_options_init(ClDescribeOptions *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->auto_domain = TRUE;
    opts->change_gate = TRUE;
    opts->grounding = TRUE;
    opts->domain = CL_CHAT_DOMAIN_GENERIC;
    opts->max_new_tokens = 256;
    opts->beam_size = 1;
    opts->length_penalty = 1.0;
    opts->heatmaps = TRUE;
}

void cl_describe_result_clear(ClDescribeResult *r)
{
    g_free(r->text);
    if (r->ids)
        g_array_unref(r->ids);
    g_free(r->prompt_text);
    g_free(r->object_name);
    if (r->findings_added)
        g_ptr_array_unref(r->findings_added);
    if (r->findings_missing)
        g_ptr_array_unref(r->findings_missing);
    g_free(r->letterbox);
    if (r->heatmaps)
        g_ptr_array_unref(r->heatmaps);
    if (r->layer_heatmaps)
        g_ptr_array_unref(r->layer_heatmaps);
    g_free(r->encode_ms);
    if (r->prompt_ids)
        g_array_unref(r->prompt_ids);
    g_free(r->visual);
    if (r->context_page_pixels)
        g_ptr_array_unref(r->context_page_pixels);
    if (r->notices)
        g_ptr_array_unref(r->notices);
    memset(r, 0, sizeof *r);
}

static gboolean str_is(const char *s, const char *const *list)
{
    for (int i = 0; s && list[i]; i++)
        if (g_ascii_strcasecmp(s, list[i]) == 0)
            return TRUE;
    return FALSE;
}

ClChatDomain cl_describe_detect_domain(const ClImage *img)
{
    g_return_val_if_fail(img != NULL, CL_CHAT_DOMAIN_GENERIC);
    static const char *const radiographs[] = { "CR", "DX", "DR", "RG", NULL };
    if (str_is(img->modality, radiographs))
        return CL_CHAT_DOMAIN_RADIOGRAPH;
    if (img->modality) {
        g_autofree char *low = g_ascii_strdown(img->modality, -1);
        if (strstr(low, "radiograph"))
            return CL_CHAT_DOMAIN_RADIOGRAPH;
    }
    if (img->geo)
        return CL_CHAT_DOMAIN_AERIAL;
    for (guint i = 0; img->metadata && i < img->metadata->len; i++) {
        const ClMetaEntry *e = g_ptr_array_index(img->metadata, i);
        if (g_str_has_prefix(e->key, "GPS") || strstr(e->key, "GeoKey"))
            return CL_CHAT_DOMAIN_AERIAL;
    }
    if (img->format != CL_IMAGE_FORMAT_DICOM &&
        (img->layout == CL_LAYOUT_RGB || img->layout == CL_LAYOUT_RGBA) &&
        img->sample_format == CL_SAMPLE_UINT && img->bits <= 8)
        return CL_CHAT_DOMAIN_EDITS;
    return CL_CHAT_DOMAIN_GENERIC;
}

static inline double ms_since(gint64 t0)
{
    return (g_get_monotonic_time() - t0) / 1000.0;
}

/* The decoder's prompt: the chat turns (the default conversation of the domain unless given),
 * each <image> tag replaced by the image's M visual slots and the context's tag by its tokens
 * (from *vist_from on). Fails, before anything is encoded, when it cannot fit the model. */
static GArray *build_prompt(const ClModel *model, const ClDescribeImage *images, guint n_images,
                            const ClDescribeOptions *opts, ClDescribeResult *out, int *vist_from,
                            GError **error)
{
    const ClModelConfig *cfg = &model->config;
    out->domain = opts->auto_domain ? cl_describe_detect_domain(images[0].image) : opts->domain;
    g_autoptr(ClChatConversation) conv = NULL;
    const ClChatTurn *turns = opts->turns;
    gsize n_turns = opts->n_turns;
    if (turns) {
        if (n_turns == 0 || turns[n_turns - 1].role != CL_CHAT_USER) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                        "the conversation must end with a user turn (the answer is generated)");
            return NULL;
        }
    } else {
        conv = cl_chat_describe_conversation(
            out->domain, (int)n_images, opts->question && *opts->question ? opts->question : NULL,
            error);
        if (!conv)
            return NULL;
        turns = cl_chat_conversation_turns(conv);
        n_turns = cl_chat_conversation_len(conv);
    }
    /* the context: an extra <image> tag after the last user turn's image stands for it */
    const gboolean with_context = opts->context && *opts->context;
    g_autoptr(ClChatConversation) with_ctx = NULL;
    if (with_context) {
        with_ctx = cl_chat_with_context(turns, n_turns);
        turns = cl_chat_conversation_turns(with_ctx);
    }
    g_autoptr(GArray) chat_ids =
        cl_chat_encode(model->tokenizer, turns, n_turns, TRUE, NULL, error);
    if (!chat_ids)
        return NULL;
    out->prompt_text = cl_chat_render(turns, n_turns, TRUE);
    int ctx_tag = -1; /* the index in chat_ids of the context's tag: the last tag */
    for (guint i = 0; with_context && i < chat_ids->len; i++)
        if (g_array_index(chat_ids, gint32, i) == CL_TOKEN_IMAGE)
            ctx_tag = (int)i;
    g_autoptr(GArray) ctx_ids = NULL;
    if (with_context) {
        ctx_ids = cl_tokenizer_encode(model->tokenizer, opts->context, -1, FALSE);
        out->context_tokens = (int)ctx_ids->len;
    }

    const int M = cl_config_n_visual(cfg);
    out->n_visual_per_image = M;
    guint n_tags = 0;
    for (guint i = 0; i < chat_ids->len; i++)
        n_tags += g_array_index(chat_ids, gint32, i) == CL_TOKEN_IMAGE;
    if (with_context)
        n_tags--;
    if (n_tags != n_images) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "the %s conversation has %u image tags for %u images",
                    cl_chat_domain_name(out->domain), n_tags, n_images);
        return NULL;
    }
    gint64 positions =
        (gint64)chat_ids->len - n_images + (gint64)n_images * cl_config_image_positions(cfg);
    int ctx_positions = 0; /* what the context takes in the decoder */
    if (with_context) {
        int chunks = 0;
        out->context_compressed = cl_vist_plan(cfg, out->context_tokens, &chunks);
        out->context_pages = chunks;
        ctx_positions = out->context_tokens - out->context_compressed + chunks * M;
        positions += ctx_positions - 1;
    }
    /* a streaming cache (opts->stream_window) holds any length: sink + window positions */
    if (positions >= cfg->max_len && opts->stream_window <= 0) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "the prompt for %u images takes %" G_GINT64_FORMAT
                    " positions (%d per image%s) "
                    "but the model's context holds %d: use fewer images%s",
                    n_images, positions, M, with_context ? ", the prior reports included" : "",
                    cfg->max_len, with_context ? " or shorter prior reports" : "");
        return NULL;
    }
    GArray *dec_ids = g_array_sized_new(FALSE, FALSE, sizeof(gint32), (guint)positions);
    const gint32 visual_id = CL_DECODER_VISUAL;
    *vist_from = -1;
    for (guint i = 0; i < chat_ids->len; i++) {
        gint32 id = g_array_index(chat_ids, gint32, i);
        if ((int)i == ctx_tag) { /* the context's tokens; VIST2 compresses them in the prefill */
            *vist_from = (int)dec_ids->len;
            g_array_append_vals(dec_ids, ctx_ids->data, ctx_ids->len);
        } else if (id == CL_TOKEN_IMAGE) {
            for (int m = 0; m < M; m++)
                g_array_append_val(dec_ids, visual_id);
            if (cl_config_image_positions(cfg) > M) /* CASA's gist token after the image */
                g_array_append_val(dec_ids, id);
        } else
            g_array_append_val(dec_ids, id);
    }
    out->n_prompt = (int)dec_ids->len;

    return dec_ids;
}

/* Preprocesses and encodes the images one by one (the encoder's state carries the previous
 * one) into *visual_out, n_images × M × E (set even on failure), with heatmaps and timings. */
gboolean cl_describe_heatmap_source(const ClModel *model, const ClDescribeOptions *opts,
                                    ClHeatmapSource *source, GError **error)
{
    const char *name = opts->heatmap_source;
    if (opts->delta && (!name || !*name || g_strcmp0(name, "auto") == 0))
        name = "delta";
    if (!name || !*name || g_strcmp0(name, "auto") == 0) {
        *source = model->config.change_head ? CL_HEATMAP_CHANGE : CL_HEATMAP_UPDATE_NORM;
        return TRUE;
    }
    if (!cl_heatmap_source_from_name(name, source)) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "unknown heat-map source \"%s\" (auto, update_norm, delta or change)", name);
        return FALSE;
    }
    if (*source == CL_HEATMAP_CHANGE && !model->config.change_head) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "the heat-map source \"change\" needs a model with a change head; this one "
                    "has none (use update_norm or delta)");
        return FALSE;
    }
    return TRUE;
}

static gboolean encode_images(ClBackend *be, const ClModel *model, const ClDescribeImage *images,
                              guint n_images, const ClDescribeOptions *opts, ClDescribeResult *out,
                              float **visual_out, GError **error)
{
    const ClModelConfig *cfg = &model->config;
    ClHeatmapSource source = CL_HEATMAP_UPDATE_NORM;
    if (opts->heatmaps && !cl_describe_heatmap_source(model, opts, &source, error))
        return FALSE;
    g_autoptr(GString) unlike = g_string_new(NULL); /* the images config.ood flags */
    int n_unlike = 0;
    g_autoptr(GString) grey = g_string_new(NULL); /* those among them without colour */
    const int M = cl_config_n_visual(cfg), E = cfg->dec_dim, C = cfg->channels, S = cfg->image_size;
    out->letterbox = g_new0(ClLetterbox, n_images);
    out->encode_ms = g_new0(double, n_images);
    gsize px_n = (gsize)C * S * S;
    float *pixels = g_new(float, px_n);
    float *visual = *visual_out = g_try_new(float, (gsize)n_images *M *E);
    ClEncoderState *state = cl_encoder_state_new(model);
    g_autofree float *prev_objects = NULL; /* the previous image's object-head logits */
    gboolean ok = visual != NULL && state != NULL;
    if (!ok)
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                    "not enough memory to encode %u images", n_images);
    for (guint t = 0; ok && t < n_images; t++) {
        if (g_cancellable_set_error_if_cancelled(opts->cancellable, error)) {
            ok = FALSE;
            break;
        }
        if (opts->on_progress)
            opts->on_progress(CL_DESCRIBE_ENCODING, t, n_images, opts->user_data);
        gint64 t0 = g_get_monotonic_time();
        g_autoptr(GError) perr = NULL;
        gboolean pre =
            images[t].align
                ? cl_preprocess_image_aligned(images[t].image, images[t].frame, images[t].display,
                                              images[t].align, images[t].frame_w, images[t].frame_h,
                                              S, C, pixels, &out->letterbox[t], &perr)
                : cl_preprocess_image(images[t].image, images[t].frame, images[t].display, S, C,
                                      pixels, &out->letterbox[t], &perr);
        if (!pre) {
            g_set_error(error, perr->domain, perr->code, "image %u (%s): %s", t + 1,
                        images[t].image->path ? images[t].image->path : "in memory", perr->message);
            ok = FALSE;
            break;
        }
        if (images[t].masks && images[t].n_masks)
            cl_preprocess_apply_masks(pixels, C, &out->letterbox[t], images[t].masks,
                                      images[t].n_masks);
        out->preprocess_ms += ms_since(t0);

        t0 = g_get_monotonic_time();
        gboolean want_delta = opts->heatmaps && source == CL_HEATMAP_DELTA && t > 0;
        ClEncoderOutput eo;
        memset(&eo, 0, sizeof eo);
        if (!cl_encoder_forward(be, model, state, pixels, (int)t, want_delta, NULL, NULL, &eo,
                                error)) {
            cl_encoder_output_clear(&eo);
            ok = FALSE;
            break;
        }
        out->encode_ms[t] = ms_since(t0);
        if (eo.change_prob && t + 1 == n_images) {
            out->change_max = 0;
            out->change_threshold = cl_config_change_threshold(cfg);
            for (int p = 0; p < eo.n_patches; p++)
                out->change_max = MAX(out->change_max, eo.change_prob[p]);
            /* below the model's change threshold the head calls no change: no region, no
             * object (patches at 0.5 alone do not make one) */
            if (out->change_max >= cl_config_change_threshold(cfg))
                cl_grounding_change_regions(eo.change_prob, eo.grid, &out->letterbox[t],
                                            &out->regions);
            int n_findings = 0;
            cl_config_findings(cfg, &n_findings);
            if (n_findings > 0 && out->regions.n > 0 && out->domain == CL_CHAT_DOMAIN_RADIOGRAPH) {
                /* the findings whose presence the head sees change, added and missing */
                out->n_findings = n_findings;
                double up[CL_CONFIG_MAX_FINDINGS], down[CL_CONFIG_MAX_FINDINGS];
                cl_grounding_findings(prev_objects, eo.object_logits, eo.change_prob, eo.n_patches,
                                      n_findings, out->finding_added, out->finding_missing, up,
                                      down);
                cl_grounding_findings_several(out->finding_added, up, n_findings,
                                              out->finding_added_several);
                cl_grounding_findings_several(out->finding_missing, down, n_findings,
                                              out->finding_missing_several);
                const char(*names)[CL_CONFIG_OBJECT_NAME] = cl_config_findings(cfg, &n_findings);
                out->findings_added = g_ptr_array_new_with_free_func(g_free);
                out->findings_missing = g_ptr_array_new_with_free_func(g_free);
                for (int c = 0; c < n_findings; c++) {
                    if (out->finding_added[c])
                        g_ptr_array_add(out->findings_added, g_strdup(names[c]));
                    if (out->finding_missing[c])
                        g_ptr_array_add(out->findings_missing, g_strdup(names[c]));
                }
            } else if (cfg->n_objects > 0 && out->regions.n > 0 &&
                       cfg->object_task == CL_OBJECTS_RADIOGRAPH) {
                /* a radiograph model's findings are read on radiographs only */
            } else if (cfg->n_objects > 0 && out->regions.n > 0 &&
                       cfg->object_task == CL_OBJECTS_AERIAL) {
                /* the aerial kinds, region by region, among those a clause can name (water
                 * never changes) */
                if (out->domain == CL_CHAT_DOMAIN_AERIAL) {
                    gboolean named[CL_CONFIG_MAX_OBJECTS] = { FALSE };
                    for (int c = 0; c < cfg->n_objects; c++)
                        for (int i = 0; cl_grounding_aerial_nouns[i]; i++)
                            named[c] = named[c] || strcmp(cfg->object_names[c],
                                                          cl_grounding_aerial_noun_kinds[i]) == 0;
                    double shares[CL_GROUNDING_MAX_REGIONS];
                    cl_grounding_region_objects(prev_objects, eo.object_logits, eo.change_prob,
                                                eo.grid, cfg->object_task, cfg->n_objects, named,
                                                out->region_objects, shares);
                    out->object = out->region_objects[0];
                    out->object_share = shares[0];
                }
            } else if (cfg->n_objects > 0 && out->regions.n > 0)
                out->object =
                    cl_grounding_changed_object(prev_objects, eo.object_logits, eo.change_prob,
                                                eo.n_patches, cfg->n_objects, &out->object_share);
            if (out->object >= 0) {
                g_free(out->object_name);
                out->object_name = g_strdup(cfg->object_names[out->object]);
            }
        }
        if (eo.ood_grey || (eo.ood_threshold > 0 && eo.ood_score > eo.ood_threshold)) {
            g_string_append_printf(unlike, "%s%u", unlike->len ? ", " : "", t + 1);
            n_unlike++;
            out->n_unfamiliar++;
            if (eo.ood_grey)
                g_string_append_printf(grey, "%s%u", grey->len ? ", " : "", t + 1);
        }
        g_free(prev_objects);
        prev_objects = g_steal_pointer(&eo.object_logits);
        memcpy(visual + (gsize)t * M * E, eo.visual, sizeof(float) * (gsize)M * E);
        if (opts->heatmaps && t > 0) {
            ClHeatmap *hm = cl_heatmap_new_from_encoder(&eo, cfg->enc_depth, source, (int)t, error);
            if (!hm)
                ok = FALSE;
            else
                g_ptr_array_add(out->heatmaps, hm);
            for (int l = 0; ok && source == CL_HEATMAP_UPDATE_NORM && l < cfg->enc_depth; l++) {
                ClHeatmap *lh =
                    cl_heatmap_new_from_encoder_layer(&eo, cfg->enc_depth, l, (int)t, NULL);
                if (lh)
                    g_ptr_array_add(out->layer_heatmaps, lh);
            }
        }
        cl_encoder_output_clear(&eo);
    }
    g_free(pixels);
    if (state)
        cl_encoder_state_free(state);
    if (ok && unlike->len)
        g_ptr_array_add(out->notices,
                        g_strdup_printf("%s %s %s unlike the images this model was trained on: "
                                        "its description and heat maps may be wrong%s%s%s",
                                        n_unlike > 1 ? "images" : "image", unlike->str,
                                        n_unlike > 1 ? "are" : "is",
                                        grey->len ? " (without colour: " : "", grey->str,
                                        grey->len ? "; every training image had some)" : ""));
    if (ok && opts->heatmaps && cfg->sve_variant == CL_SVE_STATELESS)
        g_ptr_array_add(out->notices,
                        g_strdup("the model's encoder is stateless: its heatmaps are all zero"));
    return ok;
}

/* Prefill and generation over the encoded images: the answer, its ids and timings into out. */
static gboolean generate_answer(ClBackend *be, const ClModel *model, const GArray *dec_ids,
                                const float *visual, int vist_from, guint n_images,
                                const ClDescribeOptions *opts, ClDescribeResult *out,
                                GError **error)
{
    const ClModelConfig *cfg = &model->config;
    const int M = cl_config_n_visual(cfg), S = cfg->image_size;
    const gboolean with_context = opts->context && *opts->context;
    gboolean ok = TRUE;
    if (opts->on_progress)
        opts->on_progress(CL_DESCRIBE_GENERATING, n_images, n_images, opts->user_data);
    ClGenerateOptions go;
    cl_generate_options_init(&go);
    go.max_new_tokens = opts->max_new_tokens;
    go.beam_size = opts->beam_size;
    go.stream_sink = opts->stream_sink;
    go.stream_window = opts->stream_window;
    go.sparse_block = opts->sparse_block;
    go.sparse_topk = opts->sparse_topk;
    go.median_numbers = opts->median_numbers;
    go.length_penalty = opts->length_penalty;
    /* how the domain's answer says "no change": photographs "No change." (core/synth). Not
     * radiographs: their change head also fires on films that differ only in acquisition
     * (rotation, inspiration), and the decoder calls those better (the radiograph-and-aerial
     * model's card); nor aerial tiles, whose "there is no difference ." starts as their changes
     * do ("the trees …"), so one token cannot steer it */
    const char *no_change =
        out->domain == CL_CHAT_DOMAIN_RADIOGRAPH || out->domain == CL_CHAT_DOMAIN_AERIAL ? NULL
                                                                                         : "No";
    if (opts->change_gate && no_change && out->change_max >= 0 && opts->beam_size == 1 &&
        (!opts->turns || opts->change_gate_turns) && (!opts->question || !*opts->question)) {
        /* the change head's call, and the answer steered to agree with it */
        go.first_text = no_change;
        go.first_text_avoid = out->change_max >= cl_config_change_threshold(cfg);
    }
    /* grounding: the position phrases to the changed regions' cells, the object named to the
     * object head's class */
    gboolean allowed_cells[9] = { FALSE }, allowed_from[9] = { FALSE };
    gboolean allowed_objects[CL_CONFIG_MAX_OBJECTS] = { FALSE }, allowed_nouns[8] = { FALSE };
    const char *object_names[CL_CONFIG_MAX_OBJECTS + 1] = { NULL };
    const char *finding_names[CL_CONFIG_MAX_FINDINGS + 1] = { NULL };
    ClGroundingSlot slots[3];
    int n_slots = 0;
    if (opts->grounding && out->regions.n > 0 && opts->beam_size == 1 &&
        (!opts->turns || opts->change_gate_turns) && (!opts->question || !*opts->question)) {
        /* positions: not for radiographs (left and right are the patient's); aerial tiles'
         * phrases hold their own prepositions ("in the centre", "on the left"), so the whole
         * phrase is held there (a model that wrote "at the" could not go on to "centre") */
        if (out->domain == CL_CHAT_DOMAIN_AERIAL) {
            for (int i = 0; i < out->regions.n; i++)
                allowed_cells[out->regions.cell[i]] = TRUE;
            slots[n_slots++] = (ClGroundingSlot){ cl_grounding_place_names, allowed_cells,
                                                  CL_GROUNDING_PLACE, NULL };
        } else if (out->domain != CL_CHAT_DOMAIN_RADIOGRAPH) {
            for (int i = 0; i < out->regions.n; i++)
                allowed_cells[out->regions.cell[i]] = allowed_from[out->regions.cell[i]] = TRUE;
            /* one region: a moved object's new place (its old one, filled from the
             * surroundings, may not reach 0.5), so where it came from is any other cell */
            for (int c = 0; out->regions.n == 1 && c < 9; c++)
                allowed_from[c] = !allowed_cells[c];
            slots[n_slots++] = (ClGroundingSlot){ cl_grounding_position_names, allowed_cells,
                                                  CL_GROUNDING_AFTER_PREPOSITION, allowed_from };
        }
        if (out->domain == CL_CHAT_DOMAIN_RADIOGRAPH && out->n_findings > 0) {
            /* the findings listed as additional or missing to those the head sees so */
            int n = 0;
            const char(*names)[CL_CONFIG_OBJECT_NAME] = cl_config_findings(cfg, &n);
            for (int c = 0; c < n && c < out->n_findings; c++)
                finding_names[c] = names[c];
            slots[n_slots++] = (ClGroundingSlot){
                finding_names,        out->finding_added,         CL_GROUNDING_FINDINGS,       NULL,
                out->finding_missing, out->finding_added_several, out->finding_missing_several
            };
        } else if (out->domain == CL_CHAT_DOMAIN_AERIAL && cfg->object_task == CL_OBJECTS_AERIAL) {
            /* each clause's object (its determiner with it: "the trees", "a new house") to the
             * kinds the object head sees in the regions */
            for (int i = 0; cl_grounding_aerial_nouns[i]; i++)
                for (int r = 0; r < out->regions.n; r++)
                    if (out->region_objects[r] >= 0 &&
                        strcmp(cfg->object_names[out->region_objects[r]],
                               cl_grounding_aerial_noun_kinds[i]) == 0)
                        allowed_nouns[i] = TRUE;
            gboolean any = FALSE;
            for (int i = 0; cl_grounding_aerial_nouns[i]; i++)
                any = any || allowed_nouns[i];
            if (any)
                slots[n_slots++] = (ClGroundingSlot){ cl_grounding_aerial_nouns, allowed_nouns,
                                                      CL_GROUNDING_CLAUSE_START, NULL };
        } else if (out->object >= 0 && cfg->object_task == CL_OBJECTS_PHOTO_EDITS) {
            for (int c = 0; c < cfg->n_objects; c++)
                object_names[c] = cfg->object_names[c];
            allowed_objects[out->object] = TRUE;
            slots[n_slots++] =
                (ClGroundingSlot){ object_names, allowed_objects, CL_GROUNDING_SENTENCE_START };
        }
    }
    go.slots = slots;
    go.n_slots = n_slots;
    /* The chat's special texts end the answer also when spelt out in plain bytes (a
     * generated <|im_start|> id decodes to its text: the model opening another turn). */
    g_autoptr(GPtrArray) stops = g_ptr_array_new();
    for (int i = 0; opts->stop_strings && opts->stop_strings[i]; i++)
        g_ptr_array_add(stops, (gpointer)opts->stop_strings[i]);
    g_ptr_array_add(stops, (gpointer) "<|im_start|>");
    g_ptr_array_add(stops, (gpointer) "<|im_end|>");
    g_ptr_array_add(stops, (gpointer) "<|endoftext|>");
    g_ptr_array_add(stops, NULL);
    go.stop_strings = (const char *const *)stops->pdata;
    go.on_token = opts->on_token;
    go.user_data = opts->user_data;
    go.cancellable = opts->cancellable;
    g_autoptr(ClVist) vist = NULL;
    if (with_context && cfg->vist_chunk > 0 && opts->beam_size == 1 && opts->stream_window <= 0) {
        vist = cl_vist_new(be, model, error);
        ok = vist != NULL;
        go.vist = vist;
        go.vist_from = vist_from;
        go.vist_len = out->context_tokens;
    } else if (with_context && cfg->vist_chunk > 0) {
        g_ptr_array_add(out->notices,
                        g_strdup("the prior reports are read as text: VIST2 compression "
                                 "works with greedy decoding on an ordinary cache"));
        out->context_compressed = out->context_pages = 0;
    }
    ClGenerateResult gr;
    if (!ok)
        cl_generate_result_init(&gr);
    else
        ok = cl_generate(be, model, (const gint32 *)(gconstpointer)dec_ids->data, (int)dec_ids->len,
                         visual, &go, &gr, error);
    if (vist) /* the decoder's positions: the pages' rows in place of the text they hold */
        out->n_prompt = (int)dec_ids->len - out->context_compressed + out->context_pages * M;
    for (guint i = 0; vist && i < cl_vist_n_pages(vist); i++) {
        g_ptr_array_add(out->context_page_pixels,
                        g_memdup2(cl_vist_page(vist, i, NULL), (gsize)S * S));
    }
    out->text = g_strndup(gr.text->str, gr.text->len);
    g_array_append_vals(out->ids, gr.ids->data, gr.ids->len);
    out->stop_reason = gr.stop_reason;
    out->logprob = gr.logprob;
    out->score = gr.score;
    out->prefill_ms = gr.prefill_ms;
    out->decode_ms = gr.decode_ms;
    out->tokens_per_s = gr.decode_ms > 0 ? gr.ids->len / (gr.decode_ms / 1000.0) : 0;
    out->unsure = ok && cfg->sure_logprob < 0 && gr.logprob < cfg->sure_logprob;
    if (out->unsure)
        g_ptr_array_add(out->notices,
                        g_strdup_printf("the model is not sure of this description (its "
                                        "log-probability %.2f is below the %.2f it is sure "
                                        "from): check it against the images and the heat map",
                                        gr.logprob, cfg->sure_logprob));
    if (ok && gr.stop_reason == CL_STOP_MAX_LEN)
        g_ptr_array_add(out->notices,
                        g_strdup_printf("the description was cut at the model's context "
                                        "length (%d positions)",
                                        cfg->max_len));
    cl_generate_result_clear(&gr);
    return ok;
}

gboolean cl_describe_run(ClBackend *be, const ClModel *model, const ClDescribeImage *images,
                         guint n_images, const ClDescribeOptions *opts, ClDescribeResult *out,
                         GError **error)
{
    g_return_val_if_fail(be != NULL && model != NULL && out != NULL, FALSE);
    g_return_val_if_fail(images != NULL || n_images == 0, FALSE);
    ClDescribeOptions defaults;
    if (!opts) {
        cl_describe_options_init(&defaults);
        opts = &defaults;
    }
    memset(out, 0, sizeof *out);
    out->change_max = -1;
    out->object = -1;
    for (int i = 0; i < CL_GROUNDING_MAX_REGIONS; i++)
        out->region_objects[i] = -1;
    out->ids = g_array_new(FALSE, FALSE, sizeof(gint32));
    out->heatmaps = g_ptr_array_new_with_free_func((GDestroyNotify)cl_heatmap_free);
    out->layer_heatmaps = g_ptr_array_new_with_free_func((GDestroyNotify)cl_heatmap_free);
    out->notices = g_ptr_array_new_with_free_func(g_free);
    out->context_page_pixels = g_ptr_array_new_with_free_func(g_free);
    out->n_images = n_images;
    ClDescribeOptions without_context;
    if (opts->context && *opts->context && opts->context_vist_only &&
        model->config.vist_chunk <= 0) {
        without_context = *opts;
        without_context.context = NULL;
        opts = &without_context;
        g_ptr_array_add(out->notices,
                        g_strdup("the case's notes were not given to the model: it was not "
                                 "trained to read prior reports"));
    }

    if (n_images < 2 || n_images > CL_CHAT_MAX_IMAGES) {
        g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT,
                    "a description needs 2 to %d images; %u given", CL_CHAT_MAX_IMAGES, n_images);
        return FALSE;
    }
    for (guint t = 0; t < n_images; t++)
        if (!images[t].image) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_INPUT, "image %u is missing", t + 1);
            return FALSE;
        }

    /* the prompt first: a prompt that cannot fit fails before any encoding */
    int vist_from = -1;
    GArray *dec_ids = build_prompt(model, images, n_images, opts, out, &vist_from, error);
    if (!dec_ids)
        return FALSE;
    float *visual = NULL;
    gboolean ok = encode_images(be, model, images, n_images, opts, out, &visual, error);
    if (ok)
        ok = generate_answer(be, model, dec_ids, visual, vist_from, n_images, opts, out, error);
    /* kept for what comes after (the attention of the generated text over the images) */
    out->visual = visual;
    out->prompt_ids = dec_ids;
    if (!out->text)
        out->text = g_strdup("");
    return ok;
}
