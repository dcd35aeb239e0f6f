/* fuzz-dicom.c - libFuzzer harness for the DICOM loader (DCMTK underneath), through
 * cl_image_load_data(); seed it with `make-fixtures DIR` (the dicom-*.dcm files). */
#include <stddef.h>
#include <stdint.h>

#include "image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Inputs that are not DICOM would only exercise the other loaders' harnesses. */
    if (cl_image_detect_format(data, size) != CL_IMAGE_FORMAT_DICOM)
        return 0;
    /* Small limits: a header may claim any size, and DCMTK's decoders size their output from
     * it; 4 Mpixel keeps every accepted image far below the fuzzer's RSS limit. */
    ClImageLimits limits;
    cl_image_limits_init(&limits);
    limits.max_pixels = (guint64)1 << 22;
    limits.max_frames = 64;
    limits.max_channels = 4;
    GError *error = NULL;
    ClImage *img = cl_image_load_data(data, size, "fuzz", &limits, &error);
    if (img) {
        /* touch the ends of every frame so ASan sees short buffers */
        volatile float sink = 0;
        gsize n = (gsize)img->width * img->height * img->channels;
        for (guint f = 0; f < cl_image_n_frames(img); f++)
            sink += cl_image_frame(img, f)->data[0] + cl_image_frame(img, f)->data[n - 1];
        (void)sink;
        cl_image_free(img);
    } else {
        g_assert(error != NULL && error->domain == CL_IMAGE_ERROR);
        g_error_free(error);
    }
    return 0;
}
