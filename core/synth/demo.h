/* demo.h - the demo case: a pair of aerial-like tiles with a few real changes. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Writes DIR/before.png and DIR/after.png (512 × 512 RGB, deterministic): fields, a road, a river
 * and buildings; the after tile has a new building, a cleared tree group, a new road spur, and a
 * slight illumination change and misregistration that are not changes. Creates DIR if needed. */
gboolean cl_synth_demo_pair(const char *dir, GError **error);

G_END_DECLS
