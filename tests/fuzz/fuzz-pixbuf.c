/* fuzz-pixbuf.c - libFuzzer harness for JPEG, WebP, BMP and GIF through gdk-pixbuf, via
 * cl_image_load_data(); seed it with `make-fixtures DIR` (the *.jpg, *.bmp, *.gif, *.webp files).
 * The gdk-pixbuf loader modules are not instrumented: this finds faults in our glue and in
 * what the modules hand back, not inside libjpeg or libwebp. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gboolean hooked;
    if (!hooked) {
        hooked = TRUE;
        g_log_set_writer_func(abort_on_critical, NULL, NULL);
    }
    ClImageFormat fmt = cl_image_detect_format(data, size);
    if (fmt != CL_IMAGE_FORMAT_JPEG && fmt != CL_IMAGE_FORMAT_WEBP && fmt != CL_IMAGE_FORMAT_BMP &&
        fmt != CL_IMAGE_FORMAT_GIF)
        return 0; /* other formats have their own harnesses */
    /* 4 Mpixel: a header may claim any size; this keeps accepted images (and gdk-pixbuf's
     * own buffers, refused from "size-prepared") far below the fuzzer's RSS limit. */
    ClImageLimits limits;
    cl_image_limits_init(&limits);
    limits.max_pixels = (guint64)1 << 22;
    limits.max_frames = 1;
    limits.max_channels = 4;
    GError *error = NULL;
    ClImage *img = cl_image_load_data(data, size, "fuzz", &limits, &error);
    if (img) {
        g_assert(img->format == fmt && img->bits == 8);
        g_assert(img->channels == 3 || img->channels == 4);
        g_assert((guint64)img->width * img->height <= limits.max_pixels);
        /* every sample, so ASan sees short buffers */
        gsize n = (gsize)img->width * img->height * img->channels;
        const float *d = cl_image_frame(img, 0)->data;
        for (gsize i = 0; i < n; i++)
            g_assert(d[i] >= 0 && d[i] <= 255);
        for (guint i = 0; i < img->metadata->len; i++) {
            const ClMetaEntry *e = g_ptr_array_index(img->metadata, i);
            g_assert(g_utf8_validate(e->key, -1, NULL) && g_utf8_validate(e->value, -1, NULL));
        }
        cl_image_free(img);
    } else {
        g_assert(error != NULL && error->domain == CL_IMAGE_ERROR && error->message[0]);
        g_error_free(error);
    }
    return 0;
}
