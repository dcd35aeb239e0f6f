/* cl-settings.h - The app's GSettings, wherever the desktop lets them be kept. */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The app's settings (io.changelens.ChangeLens), or NULL when the schema is not installed (with a
 * warning when warn is TRUE). Without a D-Bus session bus dconf, the usual backend, cannot write
 * (every change would be undone a moment later, a mode button seemingly doing nothing): then a key
 * file in the user's config dir (changelens/settings.ini) keeps them, and a message says so. */
GSettings *cl_settings_new(gboolean warn);

G_END_DECLS
