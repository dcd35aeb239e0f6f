/* main.c - the ChangeLens application entry point: translations, then ClApplication. */
#include <glib/gi18n.h>
#include <locale.h>

#include "cl-application.h"
#include "cl-config.h"

int main(int argc, char **argv)
{
    setlocale(LC_ALL, "");
    bindtextdomain(GETTEXT_PACKAGE, CL_LOCALEDIR);
    bind_textdomain_codeset(GETTEXT_PACKAGE, "UTF-8");
    textdomain(GETTEXT_PACKAGE);

    g_set_application_name(_("ChangeLens"));
    g_autoptr(ClApplication) app = cl_application_new();
    return g_application_run(G_APPLICATION(app), argc, argv);
}
