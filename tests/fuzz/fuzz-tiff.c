/* fuzz-tiff.c - libFuzzer harness for the TIFF/GeoTIFF loader through cl_image_load_data();
 * seed it with `make-fixtures DIR` (the *.tif files). */
#include <stdint.h>

#include "fuzz-common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Mutations that stop looking like TIFF belong to the other loaders' harnesses. */
    if (cl_image_detect_format(data, size) != CL_IMAGE_FORMAT_TIFF)
        return 0;
    ClImageLimits limits;
    cl_fuzz_setup(&limits, 64, 64);
    GError *error = NULL;
    ClImage *img = cl_image_load_data(data, size, "fuzz.tif", &limits, &error);
    if (img)
        g_assert(img->format == CL_IMAGE_FORMAT_TIFF);
    cl_fuzz_finish(img, error, &limits);
    return 0;
}
