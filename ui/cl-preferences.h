/* cl-preferences.h - the Preferences window (device, model file, compare mode, linking). */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

/* A new Preferences window for settings (the app's schema), transient for parent. */
GtkWidget *cl_preferences_new(GtkWindow *parent, GSettings *settings);

G_END_DECLS
