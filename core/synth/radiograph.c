/* radiograph.c - placeholder until written: the task fails with a clear error */
#include "synth-private.h"

gboolean cl_synth_radiograph_generate(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                                 ClSynthDrawing *drawing, GError **error)
{
    (void)s; (void)rng; (void)opts; (void)drawing;
    g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS, "the radiograph task is not written yet");
    return FALSE;
}

gboolean cl_synth_radiograph_write(const ClSynthSample *s, int k, const char *path, GError **error)
{
    (void)s; (void)k; (void)path;
    g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS, "the radiograph writer is not written yet");
    return FALSE;
}
