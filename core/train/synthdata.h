/* synthdata.h - synthetic samples (core/synth) as the trainer and the evaluator take them: their
 * images as ClImage, and whole training samples (conversation, images preprocessed like
 * inference, loss mask, auxiliary per-patch targets). */
#pragma once

#include <glib.h>

#include "image/image.h"
#include "model/model.h"
#include "train/sample.h"
#include "synth/synth.h"

G_BEGIN_DECLS

/* The rendered 8-bit image as a ClImage (PNG-like: grey or RGB, 8 bits, values 0..255), so it
 * goes through the same display transform and preprocessing as a file would. */
ClImage *cl_synth_image_to_image(const ClSynthImage *img);

/* A training sample from a synthetic one: cl_train_sample_from_turns on its conversation (answer
 * last) and images; the auxiliary targets are copied when the synthetic grid equals the model's
 * patch grid (synth options patch = the model's patch size, size = its input size), else left
 * NULL. */
ClTrainSample *cl_train_sample_from_synth(const ClModel *model, const ClSynthSample *s,
                                          gboolean all_turns, GError **error);

/* An object's attribute labels (ClTrainSample.aux_labels): bit shape, then 4 + colour,
 * 12 + size, 14 + material; an index out of its range sets no bit. The tasks that keep a kind
 * in these fields (radiograph, aerial, edits) get that kind's bits. */
guint32 cl_train_aux_label(const ClSynthObject *o);

/* The synthetic options that match a model: its input size and patch size. */
void cl_synth_options_for_model(ClSynthOptions *o, const ClModel *model);

G_END_DECLS
