/* cl-application.h - ClApplication: the ChangeLens GtkApplication (one instance, opens files). */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define CL_TYPE_APPLICATION (cl_application_get_type())
G_DECLARE_FINAL_TYPE(ClApplication, cl_application, CL, APPLICATION, AdwApplication)

ClApplication *cl_application_new(void);

G_END_DECLS
