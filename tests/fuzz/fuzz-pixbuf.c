/* fuzz-pixbuf.c - libFuzzer harness for JPEG, WebP, BMP and GIF through gdk-pixbuf, via
 * cl_image_load_data(); seed it with `make-fixtures DIR` (the *.jpg, *.bmp, *.gif, *.webp files).
 * The gdk-pixbuf loader modules are not instrumented: this finds faults in our glue and in
 * what the modules hand back, not inside libjpeg or libwebp. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz-common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ClImageFormat fmt = cl_image_detect_format(data, size);
    if (fmt != CL_IMAGE_FORMAT_JPEG && fmt != CL_IMAGE_FORMAT_WEBP && fmt != CL_IMAGE_FORMAT_BMP &&
        fmt != CL_IMAGE_FORMAT_GIF)
        return 0; /* other formats have their own harnesses */
    ClImageLimits limits;
    cl_fuzz_setup(&limits, 1, 4);
    GError *error = NULL;
    ClImage *img = cl_image_load_data(data, size, "fuzz", &limits, &error);
    if (img) {
        g_assert(img->format == fmt && img->bits == 8);
        g_assert(img->channels == 3 || img->channels == 4);
        const float *d = cl_image_frame(img, 0)->data;
        gsize n = (gsize)img->width * img->height * img->channels;
        for (gsize i = 0; i < n; i++)
            g_assert(d[i] >= 0 && d[i] <= 255);
    }
    cl_fuzz_finish(img, error, &limits);
    return 0;
}
