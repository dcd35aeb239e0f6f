/* cl-application.c - ClApplication: app-wide actions, keyboard shortcuts, window creation and
 * opening files handed over by the command line or the desktop. */
#include "cl-application.h"

#include <glib/gi18n.h>

#include "cl-config.h"
#include "cl-window.h"

struct _ClApplication {
    AdwApplication parent_instance;
};

G_DEFINE_FINAL_TYPE(ClApplication, cl_application, ADW_TYPE_APPLICATION)

static ClWindow *get_window(ClApplication *self)
{
    GtkWindow *window = gtk_application_get_active_window(GTK_APPLICATION(self));
    if (CL_IS_WINDOW(window))
        return CL_WINDOW(window);
    return cl_window_new(GTK_APPLICATION(self));
}

static void cl_application_activate(GApplication *app)
{
    gtk_window_present(GTK_WINDOW(get_window(CL_APPLICATION(app))));
}

static void cl_application_open(GApplication *app, GFile **files, int n_files, const char *hint)
{
    ClWindow *window = get_window(CL_APPLICATION(app));
    cl_window_open_files(window, files, (guint)MAX(n_files, 0));
    gtk_window_present(GTK_WINDOW(window));
}

/* Closing (rather than g_application_quit) lets each window save its state on the way out. */
static void action_quit(GSimpleAction *action, GVariant *param, gpointer user_data)
{
    GList *windows = g_list_copy(gtk_application_get_windows(GTK_APPLICATION(user_data)));
    for (GList *l = windows; l; l = l->next)
        gtk_window_close(GTK_WINDOW(l->data));
    g_list_free(windows);
}

static void action_about(GSimpleAction *action, GVariant *param, gpointer user_data)
{
    const char *developers[] = {"The ChangeLens developers", NULL};
    GtkWindow *parent = gtk_application_get_active_window(GTK_APPLICATION(user_data));
    AdwAboutWindow *about = ADW_ABOUT_WINDOW(adw_about_window_new());
    adw_about_window_set_application_name(about, _("ChangeLens"));
    adw_about_window_set_application_icon(about, CL_APP_ID);
    adw_about_window_set_version(about, CL_VERSION);
    adw_about_window_set_developer_name(about, "The ChangeLens developers");
    adw_about_window_set_developers(about, developers);
    adw_about_window_set_license_type(about, GTK_LICENSE_GPL_3_0);
    adw_about_window_set_comments(
        about, _("Compare images side by side and see what changed: medical studies, aerial and "
                 "satellite scenes, and screenshots."));
    /* TRANSLATORS: replace with your name and e-mail, one translator per line */
    adw_about_window_set_translator_credits(about, _("translator-credits"));
    gtk_window_set_transient_for(GTK_WINDOW(about), parent);
    gtk_window_set_modal(GTK_WINDOW(about), TRUE);
    gtk_window_present(GTK_WINDOW(about));
}

static void cl_application_startup(GApplication *app)
{
    G_APPLICATION_CLASS(cl_application_parent_class)->startup(app);

    static const GActionEntry app_actions[] = {
        {"quit", action_quit, NULL, NULL, NULL, {0}},
        {"about", action_about, NULL, NULL, NULL, {0}},
    };
    g_action_map_add_action_entries(G_ACTION_MAP(app), app_actions, G_N_ELEMENTS(app_actions), app);

    /* Only modifier shortcuts here: application accelerators run before the focused widget
     * sees a key, and the description panel is a text editor. The plain keys (0, 1, +, -, L,
     * H, Escape) are the window's own bindings, which text fields get to first (cl-window.c). */
    static const struct {
        const char *action;
        const char *accels[6];
    } shortcuts[] = {
        {"app.quit", {"<Control>q", NULL}},
        {"win.open", {"<Control>o", NULL}},
        {"win.zoom-fit", {"<Control>0", NULL}},
        {"win.zoom-in", {"<Control>plus", "<Control>equal", NULL}},
        {"win.zoom-out", {"<Control>minus", NULL}},
        {"win.compare-mode('side-by-side')", {"<Control>1", NULL}},
        {"win.compare-mode('swipe')", {"<Control>2", NULL}},
        {"win.compare-mode('blend')", {"<Control>3", NULL}},
        {"win.compare-mode('flicker')", {"<Control>4", NULL}},
        {"win.compare-mode('difference')", {"<Control>5", NULL}},
        {"win.describe", {"<Control>d", NULL}},
    };
    for (guint i = 0; i < G_N_ELEMENTS(shortcuts); i++)
        gtk_application_set_accels_for_action(GTK_APPLICATION(app), shortcuts[i].action,
                                              shortcuts[i].accels);
}

static void cl_application_class_init(ClApplicationClass *klass)
{
    GApplicationClass *app_class = G_APPLICATION_CLASS(klass);
    app_class->startup = cl_application_startup;
    app_class->activate = cl_application_activate;
    app_class->open = cl_application_open;
}

static void cl_application_init(ClApplication *self) {}

ClApplication *cl_application_new(void)
{
    return g_object_new(CL_TYPE_APPLICATION, "application-id", CL_APP_ID, "flags",
                        G_APPLICATION_HANDLES_OPEN, "resource-base-path",
                        "/io/changelens/ChangeLens", NULL);
}
