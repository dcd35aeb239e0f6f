/* synthdata.c - synthetic samples as ClImage and ClTrainSample (synthdata.h). */
#include "train/synthdata.h"

#include <string.h>

#include "train/jsonl.h"

ClImage *cl_synth_image_to_image(const ClSynthImage *img)
{
    ClImage *out = cl_image_new(CL_IMAGE_FORMAT_PNG);
    out->width = (guint)img->width;
    out->height = (guint)img->height;
    out->channels = (guint)img->channels;
    out->layout = img->channels == 1 ? CL_LAYOUT_GREY : CL_LAYOUT_RGB;
    out->bits = 8;
    out->bits_allocated = 8;
    out->sample_format = CL_SAMPLE_UINT;
    out->photometric = g_strdup(img->channels == 1 ? "grey" : "rgb");
    if (!cl_image_alloc_frames(out, 1, NULL)) {
        cl_image_free(out);
        return NULL;
    }
    const gsize plane = (gsize)img->width * img->height;
    for (int c = 0; c < img->channels; c++) {
        float *dst = cl_image_plane(out, 0, (guint)c);
        for (gsize i = 0; i < plane; i++)
            dst[i] = img->pixels[i * img->channels + c];
    }
    return out;
}

guint32 cl_train_aux_label(const ClSynthObject *o)
{
    guint32 bits = 0;
    if ((int)o->shape >= 0 && o->shape < CL_SYNTH_N_SHAPES)
        bits |= 1u << o->shape;
    if (o->colour >= 0 && o->colour < CL_SYNTH_N_COLOURS)
        bits |= 1u << (CL_SYNTH_N_SHAPES + o->colour);
    if (o->size >= 0 && o->size < CL_SYNTH_N_SIZES)
        bits |= 1u << (CL_SYNTH_N_SHAPES + CL_SYNTH_N_COLOURS + o->size);
    if (o->material >= 0 && o->material < CL_SYNTH_N_MATERIALS)
        bits |= 1u << (CL_SYNTH_N_SHAPES + CL_SYNTH_N_COLOURS + CL_SYNTH_N_SIZES + o->material);
    return bits;
}

G_STATIC_ASSERT(CL_SYNTH_N_SHAPES + CL_SYNTH_N_COLOURS + CL_SYNTH_N_SIZES + CL_SYNTH_N_MATERIALS ==
                CL_TRAIN_AUX_N_LABELS);

void cl_synth_options_for_model(ClSynthOptions *o, const ClModel *model)
{
    cl_synth_options_init(o);
    o->width = o->height = model->config.image_size;
    o->patch = model->config.patch_size;
}

ClTrainSample *cl_train_sample_from_synth(const ClModel *model, const ClSynthSample *s,
                                          gboolean all_turns, GError **error)
{
    ClImage **imgs = g_new0(ClImage *, s->n_images);
    ClTrainSample *out = NULL;
    for (int k = 0; k < s->n_images; k++) {
        imgs[k] = cl_synth_image_to_image(&s->images[k]);
        if (!imgs[k]) {
            g_set_error(error, CL_MODEL_ERROR, CL_MODEL_ERROR_NO_MEMORY,
                        "out of memory for a synthetic image");
            goto done;
        }
    }
    out = cl_train_sample_from_turns_with_context(
        model, cl_chat_conversation_turns(s->conversation),
        cl_chat_conversation_len(s->conversation), (const ClImage *const *)imgs, NULL,
        (guint)s->n_images, s->context, all_turns, error);
    if (!out)
        goto done;
    g_free(out->id);
    out->id = g_strdup_printf("%s seed %" G_GUINT64_FORMAT, s->task, s->seed);
    /* the auxiliary targets only when they are on the model's own patch grid */
    const int grid = cl_config_grid(&model->config);
    if (s->grounding && s->changed && s->grid_w == grid && s->grid_h == grid &&
        s->patch == model->config.patch_size) {
        const gsize n = (gsize)s->n_images * grid * grid;
        out->grid = grid;
        out->aux_objects = g_memdup2(s->grounding, n * sizeof(guint64));
        out->aux_changed = g_memdup2(s->changed, n);
        /* each patch's labels: the attributes of the objects its grounding bits name */
        out->aux_labels = g_new0(guint32, n);
        for (int t = 0; t < s->n_images; t++) {
            const GArray *objs = s->objects[t];
            for (gsize p = 0; p < (gsize)grid * grid; p++) {
                const gsize at = (gsize)t * grid * grid + p;
                for (guint k = 0; k < objs->len && k < 64; k++)
                    if (s->grounding[at] >> k & 1)
                        out->aux_labels[at] |=
                            cl_train_aux_label(&g_array_index(objs, ClSynthObject, k));
            }
        }
    }
done:
    for (int k = 0; k < s->n_images; k++)
        cl_image_free(imgs[k]);
    g_free(imgs);
    return out;
}
