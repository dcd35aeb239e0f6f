/* edits.c - placeholder until written: the task fails with a clear error */
#include "synth-private.h"

gboolean cl_synth_edits_generate(ClSynthSample *s, ClSynthRng *rng, const ClSynthOptions *opts,
                                 ClSynthDrawing *drawing, GError **error)
{
    (void)s; (void)rng; (void)opts; (void)drawing;
    g_set_error(error, CL_SYNTH_ERROR, CL_SYNTH_ERROR_OPTIONS, "the edits task is not written yet");
    return FALSE;
}
