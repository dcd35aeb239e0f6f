/* fuzz-common.h - what every loader harness shares: small limits, criticals as crashes, and the
 * checks every returned image or error must pass. Header-only: each harness is one file. */
#pragma once

#include <stdlib.h>

#include "image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A critical is a broken precondition somewhere below us (our use of GLib, gdk-pixbuf or a
 * decoder given data it cannot handle): make it a crash the fuzzer saves, as G_DEBUG=
 * fatal-criticals does in the tests. */
static GLogWriterOutput cl_fuzz_abort_on_critical(GLogLevelFlags level, const GLogField *fields,
                                                  gsize n_fields, gpointer user)
{
    if (level & (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_ERROR)) {
        g_log_writer_standard_streams(level, fields, n_fields, user);
        abort();
    }
    return g_log_writer_default(level, fields, n_fields, user);
}

/* 4 Mpixel: a header may claim any size; accepted images (and the buffers decoders size from
 * headers) stay far below the fuzzer's RSS limit. */
static inline void cl_fuzz_setup(ClImageLimits *limits, guint max_frames, guint max_channels)
{
    static gboolean hooked;
    if (!hooked) {
        hooked = TRUE;
        g_log_set_writer_func(cl_fuzz_abort_on_critical, NULL, NULL);
    }
    cl_image_limits_init(limits);
    limits->max_pixels = (guint64)1 << 22;
    limits->max_frames = max_frames;
    limits->max_channels = max_channels;
}

/* Checks what any loader returns, reading every sample so ASan sees short buffers, and frees
 * it; returns nothing on failure: the asserts abort and the fuzzer keeps the input. */
static inline void cl_fuzz_finish(ClImage *img, GError *error, const ClImageLimits *limits)
{
    if (!img) {
        g_assert(error != NULL && error->domain == CL_IMAGE_ERROR && error->message[0]);
        g_error_free(error);
        return;
    }
    g_assert(error == NULL);
    guint nf = cl_image_n_frames(img);
    g_assert(nf >= 1 && nf <= limits->max_frames);
    g_assert(img->channels >= 1 && img->channels <= limits->max_channels);
    g_assert((guint64)img->width * img->height * nf <= limits->max_pixels);
    volatile float sink = 0;
    gsize n = (gsize)img->width * img->height * img->channels;
    for (guint f = 0; f < nf; f++) {
        const float *d = cl_image_frame(img, f)->data;
        for (gsize i = 0; i < n; i++)
            sink += d[i];
    }
    (void)sink;
    for (guint i = 0; i < img->metadata->len; i++) {
        const ClMetaEntry *e = g_ptr_array_index(img->metadata, i);
        g_assert(g_utf8_validate(e->key, -1, NULL) && g_utf8_validate(e->value, -1, NULL));
    }
    cl_image_free(img);
}
