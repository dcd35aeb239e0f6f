/* fuzz-dicom.c - libFuzzer harness for the DICOM loader (DCMTK underneath), through
 * cl_image_load_data(); seed it with `make-fixtures DIR` (the dicom-*.dcm files). DCMTK itself
 * is not instrumented: coverage guides through our loader only. */
#include <stdint.h>

#include "fuzz-common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Inputs that are not DICOM would only exercise the other loaders' harnesses. */
    if (cl_image_detect_format(data, size) != CL_IMAGE_FORMAT_DICOM)
        return 0;
    ClImageLimits limits;
    cl_fuzz_setup(&limits, 64, 4);
    GError *error = NULL;
    ClImage *img = cl_image_load_data(data, size, "fuzz.dcm", &limits, &error);
    if (img)
        g_assert(img->format == CL_IMAGE_FORMAT_DICOM);
    cl_fuzz_finish(img, error, &limits);
    return 0;
}
