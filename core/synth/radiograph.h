/* radiograph.h - what the `radiograph` task tells about its samples beyond synth.h: the findings
 * its objects stand for, their locations, and the structured answer (added / missing finding
 * lists, appendix F) that finding-level F1 is computed from. */
#pragma once

#include "synth/synth.h"

G_BEGIN_DECLS

/* The finding categories the task draws, NULL-terminated; every one is a category of the paper's
 * Table 18 (appendix F), spelled as there. */
const char *const *cl_synth_radiograph_categories(void);

/* The finding an object of a radiograph sample stands for ("pleural effusion"), NULL for an
 * object that is not one. */
const char *cl_synth_radiograph_finding(const ClSynthObject *o);

/* Where it is, in the patient's frame (the film is PA: the patient's right is on the viewer's
 * left): "right lower zone", "left upper zone", "bilateral perihilar", "cardiac",
 * "retrocardiac", "mediastinal", "aortic knob", "left upper quadrant", "right lateral ribs"… */
char *cl_synth_radiograph_location(const ClSynthSample *s, int image, int index);

/* The structured answer of a radiograph sample:
 * {"added": [names], "missing": [names], "text": answer,
 *  "reference": [{"finding", "location"}…], "main": [{"finding", "location"}…]}
 * with the names in the order the answer says them (alphabetical). */
JsonNode *cl_synth_radiograph_answer_json(const ClSynthSample *s);

G_END_DECLS
