/* fuzz-tiff.c - libFuzzer harness for the TIFF/GeoTIFF loader through cl_image_load_data(). */
#include <stdint.h>

#include "image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Small limits: a header may claim any size; the fuzzer must not run out of memory on
     * images that are legitimately refused as too large. */
    /* Mutations that stop looking like TIFF belong to the other loaders' harnesses. */
    if (cl_image_detect_format(data, size) != CL_IMAGE_FORMAT_TIFF)
        return 0;
    ClImageLimits limits;
    cl_image_limits_init(&limits);
    limits.max_pixels = (guint64)1 << 22;
    limits.max_frames = 64;
    limits.max_channels = 64;
    GError *error = NULL;
    ClImage *img = cl_image_load_data(data, size, "fuzz.tif", &limits, &error);
    if (img) {
        /* touch every sample so ASan sees short buffers */
        volatile float sink = 0;
        gsize n = (gsize)img->width * img->height * img->channels;
        for (guint f = 0; f < cl_image_n_frames(img); f++)
            for (gsize i = 0; i < n; i++)
                sink += cl_image_frame(img, f)->data[i];
        (void)sink;
        cl_image_free(img);
    } else {
        g_assert(error != NULL && error->domain == CL_IMAGE_ERROR);
        g_error_free(error);
    }
    return 0;
}
