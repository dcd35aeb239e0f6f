/* cl-application.c - ClApplication: app-wide actions, keyboard shortcuts, window creation and
 * opening files handed over by the command line or the desktop. */
#include "cl-application.h"

#include <glib/gi18n.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "casedb/casedb.h"
#include "model/model.h"
#include "cl-config.h"
#include "cl-image-view.h"
#include "cl-settings.h"
#include "cl-window.h"

struct _ClApplication {
    AdwApplication parent_instance;
    ClCaseDb *db;        /* the user's case database (main thread), NULL when it cannot open */
    char *db_error;      /* why, told in the first window */
    char *connecting_to; /* a database server being connected to (a worker thread), or NULL */
};

G_DEFINE_FINAL_TYPE(ClApplication, cl_application, ADW_TYPE_APPLICATION)

static ClWindow *get_window(ClApplication *self, gboolean *created)
{
    GtkWindow *window = gtk_application_get_active_window(GTK_APPLICATION(self));
    *created = !CL_IS_WINDOW(window);
    if (!*created)
        return CL_WINDOW(window);
    ClWindow *win = cl_window_new(GTK_APPLICATION(self));
    cl_window_set_case_db(win, self->db);
    if (self->connecting_to) {
        /* TRANSLATORS: the app is connecting to a shared case database on a server; %s names it */
        g_autofree char *text =
            g_strdup_printf(_("Connecting to the case database %s…"), self->connecting_to);
        cl_window_toast(win, text);
    } else if (self->db_error) {
        /* TRANSLATORS: the case database could not be opened; %s says why */
        g_autofree char *text =
            g_strdup_printf(_("Cases are not kept this time: %s"), self->db_error);
        cl_window_toast(win, text);
        g_warning("%s", text);
    }
    return win;
}

static void cl_application_activate(GApplication *app)
{
    ClApplication *self = CL_APPLICATION(app);
    gboolean created;
    ClWindow *win = get_window(self, &created);
    /* a new window opens on the most recent case (the demo cases on the first run) */
    if (created && self->db) {
        g_autoptr(GPtrArray) cases = cl_casedb_list(self->db, NULL);
        if (cases && cases->len > 0)
            cl_window_open_case(win, ((ClCaseSummary *)cases->pdata[0])->id);
    }
    gtk_window_present(GTK_WINDOW(win));
}

/* The demo cases' folder: data/demo of the source tree the program was built in, else
 * share/changelens/demo of its install prefix. NULL when neither holds cases.json. */
static char *demo_dir(void)
{
    char *dirs[2];
    cl_data_dirs("demo", &dirs[0], &dirs[1]);
    char *found = NULL;
    for (guint i = 0; i < G_N_ELEMENTS(dirs); i++) {
        g_autofree char *json = g_build_filename(dirs[i], "cases.json", NULL);
        if (!found && g_file_test(json, G_FILE_TEST_IS_REGULAR))
            found = g_canonicalize_filename(dirs[i], NULL);
        g_free(dirs[i]);
    }
    return found;
}

gboolean cl_application_add_demo_cases(ClCaseDb *db, const char *dir, GError **error)
{
    g_autofree char *path = g_build_filename(dir, "cases.json", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!json_parser_load_from_file(parser, path, error))
        return FALSE;
    JsonNode *root = json_parser_get_root(parser);
    JsonObject *o = root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
    JsonArray *cases =
        o && json_object_has_member(o, "cases") ? json_object_get_array_member(o, "cases") : NULL;
    if (!cases) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s has no \"cases\"", path);
        return FALSE;
    }
    /* the most recent case is the first one listed: add them in reverse */
    for (guint i = json_array_get_length(cases); i-- > 0;) {
        JsonObject *c = json_array_get_object_element(cases, i);
        const char *name = c ? json_object_get_string_member_with_default(c, "name", NULL) : NULL;
        JsonArray *imgs = c && json_object_has_member(c, "images")
                              ? json_object_get_array_member(c, "images")
                              : NULL;
        if (!name || !imgs)
            continue;
        g_autoptr(GPtrArray) records =
            g_ptr_array_new_with_free_func((GDestroyNotify)cl_case_image_free);
        for (guint k = 0; k < json_array_get_length(imgs); k++) {
            g_autofree char *file =
                g_build_filename(dir, json_array_get_string_element(imgs, k), NULL);
            ClCaseImage *ci = g_new0(ClCaseImage, 1);
            if (!cl_case_image_from_file(file, 0, ci, error)) {
                cl_case_image_free(ci);
                return FALSE;
            }
            g_ptr_array_add(records, ci);
        }
        gint64 id = 0;
        if (!cl_casedb_case_new(db, name, &id, error) ||
            !cl_casedb_images_add(db, id, records, NULL, error))
            return FALSE;
        const char *reference = json_object_get_string_member_with_default(c, "reference", NULL);
        if (reference) {
            /* TRANSLATORS: a note on a demo case: what really changed in its synthetic images */
            g_autofree char *note = g_strdup_printf(_("What changed (the generator's ground "
                                                      "truth): %s"),
                                                    reference);
            cl_casedb_note_add(db, id, 0, note, NULL, NULL);
        }
    }
    return TRUE;
}

/* Where the cases are kept: $CHANGELENS_DB, else the Preferences' case database, else the file
 * in the user's data folder. */
static char *database_location(void)
{
    const char *env = g_getenv("CHANGELENS_DB");
    if (env && *env)
        return g_strdup(env);
    g_autoptr(GSettings) settings = cl_settings_new(FALSE);
    g_autofree char *chosen = settings ? g_settings_get_string(settings, "case-database") : NULL;
    if (chosen && *g_strstrip(chosen))
        return g_steal_pointer(&chosen);
    return cl_casedb_default_path();
}

static void add_demo_cases_once(ClApplication *self);

static void open_database_thread(GTask *task, gpointer source, gpointer data, GCancellable *c)
{
    GError *error = NULL;
    ClCaseDb *db = cl_casedb_open(data, CL_CASEDB_OPEN_DEFAULT, &error);
    if (db)
        g_task_return_pointer(task, db, NULL);
    else
        g_task_return_error(task, error);
}

/* The server answered (or not): every window gets the database, or hears why not. */
static void database_opened(GObject *source, GAsyncResult *result, gpointer data)
{
    ClApplication *self = CL_APPLICATION(source);
    g_autoptr(GError) error = NULL;
    ClCaseDb *db = g_task_propagate_pointer(G_TASK(result), &error);
    g_clear_pointer(&self->connecting_to, g_free);
    if (db) {
        cl_casedb_adopt(db);
        self->db = db;
    } else {
        self->db_error = g_strdup(error->message);
        g_warning("Cases are not kept this time: %s", self->db_error);
    }
    for (GList *l = gtk_application_get_windows(GTK_APPLICATION(self)); l; l = l->next) {
        if (!CL_IS_WINDOW(l->data))
            continue;
        ClWindow *win = CL_WINDOW(l->data);
        if (!db) {
            g_autofree char *text =
                g_strdup_printf(_("Cases are not kept this time: %s"), self->db_error);
            cl_window_toast(win, text);
            continue;
        }
        cl_window_set_case_db(win, db);
        /* as a new window does: the most recent case, unless files are open already */
        g_autoptr(GPtrArray) cases = cl_casedb_list(db, NULL);
        if (cases && cases->len > 0 && !cl_image_view_get_document(cl_window_get_view(win, 0)))
            cl_window_open_case(win, ((ClCaseSummary *)cases->pdata[0])->id);
    }
    g_application_release(G_APPLICATION(self));
}

/* The user's case database; on the first run (an empty database, demo cases never added) the
 * demo cases go in. A database on a server is connected to on a worker thread — it may take
 * seconds, or the connection's timeout, to answer — and the windows get it when it has. */
static void open_database(ClApplication *self)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *path = database_location();
    if (cl_casedb_is_server(path)) {
        /* named by its database (the address's path, without options or a password) */
        const char *name = strrchr(path, '/') + 1;
        g_autofree char *bare = g_strndup(name, strcspn(name, "?#"));
        self->connecting_to = bare[0] ? g_uri_unescape_string(bare, NULL) : NULL;
        if (!self->connecting_to)
            self->connecting_to = g_strdup(_("on the server"));
        g_application_hold(G_APPLICATION(self));
        GTask *task = g_task_new(self, NULL, database_opened, NULL);
        g_task_set_task_data(task, g_strdup(path), g_free);
        g_task_run_in_thread(task, open_database_thread);
        g_object_unref(task);
        return;
    }
    self->db = cl_casedb_open(path, CL_CASEDB_OPEN_DEFAULT, &error);
    if (!self->db) {
        self->db_error = g_strdup(error->message);
        return;
    }
    add_demo_cases_once(self);
}

/* The demo cases go into the user's own first database (never into a shared server's). */
static void add_demo_cases_once(ClApplication *self)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GSettings) settings = cl_settings_new(FALSE);
    if (settings && g_settings_get_boolean(settings, "demo-cases-added"))
        return;
    g_autoptr(GPtrArray) cases = cl_casedb_list(self->db, NULL);
    g_autofree char *dir = demo_dir();
    if (cases && cases->len == 0 && dir) {
        if (!cl_application_add_demo_cases(self->db, dir, &error))
            g_warning("the demo cases could not be added: %s", error->message);
    }
    if (settings)
        g_settings_set_boolean(settings, "demo-cases-added", TRUE);
}

static void cl_application_open(GApplication *app, GFile **files, int n_files, const char *hint)
{
    gboolean created;
    ClWindow *window = get_window(CL_APPLICATION(app), &created);
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
    const char *developers[] = { "The ChangeLens developers", NULL };
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

/* Only modifier shortcuts here: application accelerators run before the focused widget sees a
 * key, and the description panel is a text editor. The plain keys (0, 1, +, -, L, H, Escape) are
 * the window's own bindings, which text fields get to first (cl-window-actions.c). */
static const ClShortcut shortcuts[] = {
    { "app.quit", { "<Control>q", NULL } },
    { "win.open", { "<Control>o", NULL } },
    { "win.zoom-fit", { "<Control>0", NULL } },
    { "win.zoom-in", { "<Control>plus", "<Control>equal", NULL } },
    { "win.zoom-out", { "<Control>minus", NULL } },
    { "win.compare-mode('side-by-side')", { "<Control>1", NULL } },
    { "win.compare-mode('swipe')", { "<Control>2", NULL } },
    { "win.compare-mode('blend')", { "<Control>3", NULL } },
    { "win.compare-mode('flicker')", { "<Control>4", NULL } },
    { "win.compare-mode('difference')", { "<Control>5", NULL } },
    { "win.describe", { "<Control>d", NULL } },
    { "win.save-description", { "<Control>s", NULL } },
    { "win.accept-description", { "<Control>Return", NULL } },
    { "win.toggle-sidebar", { "F9", NULL } },
    { "win.export-report", { "<Control>e", NULL } },
    { "win.preferences", { "<Control>comma", NULL } },
    { "win.next-case", { "<Control>Page_Down", NULL } },
    { "win.previous-case", { "<Control>Page_Up", NULL } },
};

const ClShortcut *cl_application_get_shortcuts(guint *n)
{
    *n = G_N_ELEMENTS(shortcuts);
    return shortcuts;
}

static void cl_application_startup(GApplication *app)
{
    G_APPLICATION_CLASS(cl_application_parent_class)->startup(app);
    open_database(CL_APPLICATION(app));

    static const GActionEntry app_actions[] = {
        { "quit", action_quit, NULL, NULL, NULL, { 0 } },
        { "about", action_about, NULL, NULL, NULL, { 0 } },
    };
    g_action_map_add_action_entries(G_ACTION_MAP(app), app_actions, G_N_ELEMENTS(app_actions), app);

    for (guint i = 0; i < G_N_ELEMENTS(shortcuts); i++)
        gtk_application_set_accels_for_action(GTK_APPLICATION(app), shortcuts[i].action,
                                              shortcuts[i].accels);
}

static void cl_application_shutdown(GApplication *app)
{
    ClApplication *self = CL_APPLICATION(app);
    G_APPLICATION_CLASS(cl_application_parent_class)->shutdown(app);
    /* after the windows (which borrow it) are gone */
    g_clear_pointer(&self->db, cl_casedb_close);
    g_clear_pointer(&self->db_error, g_free);
    g_clear_pointer(&self->connecting_to, g_free);
}

static void cl_application_class_init(ClApplicationClass *klass)
{
    GApplicationClass *app_class = G_APPLICATION_CLASS(klass);
    app_class->startup = cl_application_startup;
    app_class->shutdown = cl_application_shutdown;
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
