/* effnet.h - EfficientNet-Lite0 (ImageNet-1k; MBConv blocks with ReLU6, no squeeze-excitation)
 * on the CPU: the pretrained weights set-up fetches, BatchNorm folded into the convolutions at
 * load, ImageNet logits, and the stride-16 or stride-32 feature map as visual tokens. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _ClEffnet ClEffnet;

#define CL_EFFNET_FILE "efficientnet-lite0.safetensors" /* in the pretrained folder */
#define CL_EFFNET_CLASSES 1000

/* Loads the safetensors state dict (tools/pth2safetensors.py's output): every tensor of the
 * Lite0 architecture present with its shape, none unused; CL_MODEL_ERROR_FILE otherwise. */
ClEffnet *cl_effnet_load(const char *path, GError **error);
void cl_effnet_free(ClEffnet *net);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ClEffnet, cl_effnet_free)

/* `rgb`: size × size × 3 values in [0, 1] (row-major, interleaved); size a multiple of 32, 32 to
 * 1024. Normalised as EfficientNet-Lite's training did ((255·v − 127) / 128). */
gboolean cl_effnet_logits(const ClEffnet *net, const float *rgb, int size, float *logits,
                          GError **error);
/* The feature map at `stride` 16 (after the last 112-channel block) or 32 (after the 1280-channel
 * head): *n = (size / stride)² tokens of *channels values, row-major, in a new array. */
float *cl_effnet_features(const ClEffnet *net, const float *rgb, int size, int stride, int *n,
                          int *channels, GError **error);

/* The rest of the net from the stride-16 map (h × w × 112, as cl_effnet_features gives it):
 * the later blocks and the head, averaged over the cells: the CL_EFFNET_POOLED values ImageNet's
 * classifier reads, into `pooled`. */
#define CL_EFFNET_POOLED 1280
gboolean cl_effnet_pooled_from16(const ClEffnet *net, const float *features16, int h, int w,
                                 float *pooled);

G_END_DECLS
