/* op-path.c - test paths that name an op's parameters (op-path.h). */
#include "op-path.h"

char *cl_test_op_path(const char *prefix, const char *op, const char *names, const int *p, int skip)
{
    g_auto(GStrv) parts = g_strsplit(names, ",", 8);
    GString *s = g_string_new(NULL);
    for (int i = skip; parts[i] && *parts[i]; i++)
        g_string_append_printf(s, "%s%s=%d", s->len ? "," : "", parts[i], p[i]);
    if (s->len == 0)
        g_string_append(s, "default");
    char *path = g_strdup_printf("%s/%s/%s", prefix, op, s->str);
    g_string_free(s, TRUE);
    return path;
}
