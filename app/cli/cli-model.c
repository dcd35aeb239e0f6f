/* placeholder: being written */
#include <stdio.h>
#include "cli.h"
int cl_cli_model(int argc, char **argv)
{
    (void)argc;
    fprintf(stderr, "%s: not available yet\n", argv[0]);
    return 2;
}
