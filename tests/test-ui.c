/* test-ui.c - The ui suite (one process, run alone: it times the main loop): the window and the
 * views (test-ui-window.c), the compare view (test-ui-compare.c), the model in the window
 * (test-ui-describe.c), the cases (test-ui-cases.c), the report (test-ui-report.c), over
 * ui-util.c. */
#include "ui-util.h"

int main(int argc, char **argv)
{
    int rc = ui_util_init(&argc, &argv);
    if (rc != 0)
        return rc;
    test_ui_window_register();
    test_ui_compare_register();
    test_ui_describe_register();
    test_ui_cases_register();
    test_ui_report_register();
    rc = g_test_run();
    ui_util_cleanup();
    return rc;
}
