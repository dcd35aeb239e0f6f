/* cl-application.h - ClApplication: the ChangeLens GtkApplication (one instance, opens files). */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define CL_TYPE_APPLICATION (cl_application_get_type())
G_DECLARE_FINAL_TYPE(ClApplication, cl_application, CL, APPLICATION, AdwApplication)

ClApplication *cl_application_new(void);

/* Adds the demo cases listed in dir/cases.json (data/demo, made by tools/make-demo.sh) to db,
 * with a note telling what really changed. */
typedef struct _ClCaseDb ClCaseDb;
gboolean cl_application_add_demo_cases(ClCaseDb *db, const char *dir, GError **error);

/* The application's keyboard shortcuts: n entries of an action (detailed name) and its
 * accelerators (NULL-terminated, the first the one the shortcuts window shows). */
typedef struct {
    const char *action;
    const char *accels[6];
} ClShortcut;
const ClShortcut *cl_application_get_shortcuts(guint *n);

G_END_DECLS
