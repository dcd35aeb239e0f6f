/* ground.h - the grounded single-image tasks (docs/DESIGN.md §5, stage 1): one image of each change
 * task's scene, no change, and a question whose answer says what the image shows and where, so
 * the encoder's tokens learn what and where before they learn change.
 *
 *   shapes-ground      "List the objects in the scene."  "a large red metal cube at the top left,
 *                      a small gray rubber sphere in the centre and … ."  Every object, in reading
 *                      order (the 3 × 3 row of its box centre, then left to right); the position
 *                      is the 3 × 3 cell of the box centre ("at the top left", "at the top",
 *                      "on the left", "in the centre", … "at the bottom right").
 *   dots-ground        "Where is the red dot?"  "(0.3123, 0.5521)": x / width, y / height of the
 *                      dot's centre, 4 decimals.
 *   radiograph-ground  "Which findings are present?"  "the image shows the findings of X, Y and
 *                      Z." (alphabetical, radiograph.h's names), "the image shows the finding of
 *                      X." or "the image shows no findings."
 *   aerial-ground      "Describe the land cover."  "the tile shows 5 buildings, a road, trees and
 *                      a pond." (buildings and roads counted, tree clumps as "trees", water as
 *                      ponds; "the tile shows only fields." when there is nothing); a feature
 *                      counts when its footprint's centre (the object's x, y) is on the tile.
 *   edits-ground       "List the objects in the picture."  "a red cup, a green plant and a blue
 *                      book on a table-top in front of a red brick wall." (reading order; the
 *                      setting "on a table-top", "in a room" or "in a garden"; the backdrop).
 *
 * Each sample has n_images 1, one user turn "<image>\n<question>" (after a short system prompt
 * where the change task's domain has one) and the answer; s->changes is empty and the changed
 * mask all 0; the objects carry boxes, so the grounding targets mark them. Objects are those of
 * the change task's first image, encoded as there (radiograph.h; aerial: the kind in `colour`,
 * 0 building, 1 road, 2 trees, 3 water; edits: object 0 the backdrop, kind = shape * 2 +
 * material); shapes-ground and edits-ground list them in the answer's order, and edits-ground's
 * backdrop carries the setting in `size` (0 table-top, 1 room, 2 garden). */
#pragma once

#include "synth/synth.h"

G_BEGIN_DECLS

/* TRUE for the grounded tasks ("shapes-ground" …), FALSE for the change tasks and unknown names. */
gboolean cl_synth_task_is_grounded(const char *task);

G_END_DECLS
