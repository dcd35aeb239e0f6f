/* op-path.h - the test path of an op and its parameters, shared by the op table (backend-ops.c)
 * and the gradient checks (test-grad.c): "PREFIX/OP/m=7,k=64,n=96". */
#pragma once

#include <glib.h>

/* names: comma-separated, one per value of p (at most 8); skip: leading values left out of the
 * path (a selector the op's name already says). No names (""): ".../OP/default". */
char *cl_test_op_path(const char *prefix, const char *op, const char *names, const int *p,
                      int skip);
