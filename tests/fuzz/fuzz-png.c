/* fuzz-png.c - libFuzzer harness for the PNG loader (libpng underneath), through
 * cl_image_load_data(); seed it with `make-fixtures DIR` (the png-*.png files). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A critical is a broken precondition somewhere below us (our use of GLib or gdk-pixbuf, or a
 * module given data it cannot handle): make it a crash the fuzzer saves, as G_DEBUG=
 * fatal-criticals does in the tests. */
static GLogWriterOutput abort_on_critical(GLogLevelFlags level, const GLogField *fields,
                                          gsize n_fields, gpointer user)
{
    if (level & (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_ERROR)) {
        g_log_writer_standard_streams(level, fields, n_fields, user);
        abort();
    }
    return g_log_writer_default(level, fields, n_fields, user);
}

static void check_image(const ClImage *img)
{
    g_assert(img->format == CL_IMAGE_FORMAT_PNG);
    g_assert(img->channels >= 1 && img->channels <= 4);
    g_assert(img->bits == 1 || img->bits == 2 || img->bits == 4 || img->bits == 8 ||
             img->bits == 16);
    /* every sample, so ASan sees short buffers and a value past the bit depth shows up */
    float maxval = (float)((1u << img->bits) - 1);
    gsize n = (gsize)img->width * img->height * img->channels;
    const float *d = cl_image_frame(img, 0)->data;
    for (gsize i = 0; i < n; i++)
        g_assert(d[i] >= 0 && d[i] <= maxval);
    for (guint i = 0; i < img->metadata->len; i++) {
        const ClMetaEntry *e = g_ptr_array_index(img->metadata, i);
        g_assert(g_utf8_validate(e->key, -1, NULL) && g_utf8_validate(e->value, -1, NULL));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gboolean hooked;
    if (!hooked) {
        hooked = TRUE;
        g_log_set_writer_func(abort_on_critical, NULL, NULL);
    }
    /* Everything after the signature is what matters: inputs without one get it prepended, so
     * no run is spent on bytes the dispatcher would send to another loader. */
    static const uint8_t sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
    g_autofree uint8_t *copy = NULL;
    if (size < 8 || memcmp(data, sig, 8) != 0) {
        copy = g_malloc(size + 8);
        memcpy(copy, sig, 8);
        if (size)
            memcpy(copy + 8, data, size);
        data = copy;
        size += 8;
    }
    /* 4 Mpixel: a header may claim any size; this keeps accepted images far below the
     * fuzzer's RSS limit. */
    ClImageLimits limits;
    cl_image_limits_init(&limits);
    limits.max_pixels = (guint64)1 << 22;
    limits.max_frames = 1;
    limits.max_channels = 4;
    GError *error = NULL;
    ClImage *img = cl_image_load_data(data, size, "fuzz.png", &limits, &error);
    if (img) {
        check_image(img);
        cl_image_free(img);
    } else {
        g_assert(error != NULL && error->domain == CL_IMAGE_ERROR && error->message[0]);
        g_error_free(error);
    }
    return 0;
}
