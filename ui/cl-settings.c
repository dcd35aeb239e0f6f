/* cl-settings.c - The app's GSettings: the default backend, or a key file when dconf cannot write
 * for want of a D-Bus session bus (cl-settings.h). */
#define G_SETTINGS_ENABLE_BACKEND
#include "cl-settings.h"

#include <gio/gsettingsbackend.h>
#include <glib/gstdio.h>

#include "cl-config.h"

/* NULL: the default backend; else the key file (once per process). */
static GSettingsBackend *backend_once(void)
{
    static gsize once;
    static GSettingsBackend *backend;
    if (g_once_init_enter(&once)) {
        GSettingsBackend *def = g_settings_backend_get_default();
        /* dconf writes through its service on the session bus; the memory and keyfile backends
         * (GSETTINGS_BACKEND) need none */
        if (g_str_equal(G_OBJECT_TYPE_NAME(def), "DConfSettingsBackend")) {
            g_autoptr(GError) error = NULL;
            g_autoptr(GDBusConnection) bus = g_bus_get_sync(G_BUS_TYPE_SESSION, NULL, &error);
            if (!bus) {
                g_autofree char *dir =
                    g_build_filename(g_get_user_config_dir(), "changelens", NULL);
                g_autofree char *path = g_build_filename(dir, "settings.ini", NULL);
                g_mkdir_with_parents(dir, 0700);
                backend = g_keyfile_settings_backend_new(path, "/io/changelens/ChangeLens/",
                                                         "ChangeLens");
                g_message("No D-Bus session bus (%s): the settings are kept in %s", error->message,
                          path);
            }
        }
        g_object_unref(def);
        g_once_init_leave(&once, 1);
    }
    return backend;
}

GSettings *cl_settings_new(gboolean warn)
{
    GSettingsSchemaSource *source = g_settings_schema_source_get_default();
    g_autoptr(GSettingsSchema) schema =
        source ? g_settings_schema_source_lookup(source, CL_APP_ID, TRUE) : NULL;
    if (!schema) {
        if (warn)
            g_warning("GSettings schema %s is not installed: window state and preferences will "
                      "not be saved (set GSETTINGS_SCHEMA_DIR to the build's data directory when "
                      "running uninstalled)",
                      CL_APP_ID);
        return NULL;
    }
    return g_settings_new_full(schema, backend_once(), NULL);
}
