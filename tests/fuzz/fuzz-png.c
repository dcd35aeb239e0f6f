/* fuzz-png.c - libFuzzer harness for the PNG loader (libpng underneath), through
 * cl_image_load_data(); seed it with `make-fixtures DIR` (the png-*.png files). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-common.h"

static void check_image(const ClImage *img)
{
    g_assert(img->format == CL_IMAGE_FORMAT_PNG);
    g_assert(img->channels >= 1 && img->channels <= 4);
    g_assert(img->bits == 1 || img->bits == 2 || img->bits == 4 || img->bits == 8 ||
             img->bits == 16);
    /* a value past the bit depth is a decoding bug (cl_fuzz_finish reads every sample too) */
    float maxval = (float)((1u << img->bits) - 1);
    gsize n = (gsize)img->width * img->height * img->channels;
    const float *d = cl_image_frame(img, 0)->data;
    for (gsize i = 0; i < n; i++)
        g_assert(d[i] >= 0 && d[i] <= maxval);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
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
    ClImageLimits limits;
    cl_fuzz_setup(&limits, 1, 4);
    GError *error = NULL;
    ClImage *img = cl_image_load_data(data, size, "fuzz.png", &limits, &error);
    if (img)
        check_image(img);
    cl_fuzz_finish(img, error, &limits);
    return 0;
}
