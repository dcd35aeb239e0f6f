/* cli-args.c - argument handling shared by every command: usage errors, option parsing and
 * range-checked numbers, so that a bad argument reads the same whichever command it went to;
 * and the little all commands do alike with what they parsed and print. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cl_cli_usage_error(const char *prog, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s (see '%s --help')\n", prog, msg, prog);
    return CL_CLI_EXIT_USAGE;
}

gboolean cl_cli_parse_options(GOptionContext *ctx, const char *prog, int *argc, char ***argv)
{
    g_autoptr(GError) err = NULL;
    if (g_option_context_parse(ctx, argc, argv, &err))
        return TRUE;
    cl_cli_usage_error(prog, "%s", err->message);
    return FALSE;
}

/* The accepted range in words: "2 to 5", "1 or 2", "a whole number >= 1" (a bound at a type's
 * limit is no bound a user needs to hear of). */
static char *int_range_text(gint64 lo, gint64 hi)
{
    if (hi >= G_MAXINT)
        return g_strdup_printf("a whole number >= %" G_GINT64_FORMAT, lo);
    if (hi == lo + 1)
        return g_strdup_printf("%" G_GINT64_FORMAT " or %" G_GINT64_FORMAT, lo, hi);
    return g_strdup_printf("%" G_GINT64_FORMAT " to %" G_GINT64_FORMAT, lo, hi);
}

gboolean cl_cli_parse_int(const char *option, const char *text, gint64 lo, gint64 hi, gint64 *out,
                          GError **error)
{
    if (text && g_ascii_string_to_signed(text, 10, lo, hi, out, NULL))
        return TRUE;
    if (!error)
        return FALSE;
    g_autofree char *range = int_range_text(lo, hi);
    g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "%s must be %s, not '%s'", option,
                range, text ? text : "");
    return FALSE;
}

gboolean cl_cli_parse_uint64(const char *option, const char *text, guint64 *out, GError **error)
{
    if (text && g_ascii_string_to_unsigned(text, 10, 0, G_MAXUINT64, out, NULL))
        return TRUE;
    g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                "%s must be a whole number >= 0, not '%s'", option, text ? text : "");
    return FALSE;
}

gboolean cl_cli_parse_double(const char *option, const char *text, double lo, double hi,
                             double *out, GError **error)
{
    if (text && *text) {
        char *end = NULL;
        errno = 0;
        double v = g_ascii_strtod(text, &end);
        if (!errno && !*end && isfinite(v) && v >= lo && v <= hi) {
            *out = v;
            return TRUE;
        }
    }
    g_autofree char *range =
        isinf(hi) ? g_strdup_printf("a number >= %g", lo) : g_strdup_printf("%g to %g", lo, hi);
    g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "%s must be %s, not '%s'", option,
                range, text ? text : "");
    return FALSE;
}

/* "A" or "A-B": the dash splits the bounds, so neither may be negative. */
gboolean cl_cli_parse_range(const char *s, int *lo, int *hi)
{
    g_auto(GStrv) parts = g_strsplit(s, "-", 2);
    gint64 a, b;
    if (!parts[0] || !cl_cli_parse_int(NULL, parts[0], 0, 1000, &a, NULL))
        return FALSE;
    b = a;
    if (parts[1] && !cl_cli_parse_int(NULL, parts[1], 0, 1000, &b, NULL))
        return FALSE;
    *lo = (int)a, *hi = (int)b;
    return TRUE;
}

gboolean cl_cli_parse_stream(const char *text, int *sink, int *window)
{
    g_auto(GStrv) sw = g_strsplit(text, "+", 2);
    gint64 s = 0, w = 0;
    if (!sw[0] || !sw[1] || !cl_cli_parse_int(NULL, sw[0], 0, 1 << 20, &s, NULL) ||
        !cl_cli_parse_int(NULL, sw[1], 1, 1 << 20, &w, NULL))
        return FALSE;
    *sink = (int)s;
    *window = (int)w;
    return TRUE;
}

gboolean cl_cli_int_option(const char *name, const char *value, gpointer data, GError **error)
{
    const ClCliIntOption *ints = data;
    /* GOption names the option as typed: "--beam" or "-b" */
    for (const ClCliIntOption *o = ints; o && o->name; o++) {
        gboolean is_long = name[1] == '-' && strcmp(name + 2, o->name) == 0;
        gboolean is_short = name[1] != '-' && o->short_name && name[1] == o->short_name;
        if (is_long || is_short)
            return cl_cli_parse_int(name, value, o->lo, o->hi, o->value, error);
    }
    g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "%s is not a number option", name);
    return FALSE;
}

void cl_cli_add_entries(GOptionContext *ctx, const GOptionEntry *entries, gconstpointer data)
{
    GOptionGroup *group = g_option_context_get_main_group(ctx);
    if (!group) {
        group = g_option_group_new(NULL, NULL, NULL, (gpointer)data, NULL);
        g_option_context_set_main_group(ctx, group);
    }
    g_option_group_add_entries(group, entries);
}

int cl_cli_parse_own_help(const char *prog, const char *usage_text, const GOptionEntry *entries,
                          gpointer data, int argc, char **argv)
{
    gboolean help = FALSE;
    const GOptionEntry help_entry[] = {
        { "help", 'h', 0, G_OPTION_ARG_NONE, &help, NULL, NULL },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(NULL);
    g_option_context_set_help_enabled(ctx, FALSE);
    cl_cli_add_entries(ctx, help_entry, data);
    cl_cli_add_entries(ctx, entries, data);
    if (!cl_cli_parse_options(ctx, prog, &argc, &argv))
        return CL_CLI_EXIT_USAGE;
    if (help) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (argc > 1)
        return cl_cli_usage_error(prog, "unexpected argument '%s'", argv[1]);
    return -1;
}

void cl_cli_free_all(gpointer first, ...)
{
    va_list ap;
    va_start(ap, first);
    for (gpointer *p = first; p; p = va_arg(ap, gpointer *))
        g_clear_pointer(p, g_free);
    va_end(ap);
}

void cl_cli_print_json(JsonBuilder *b)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, TRUE);
    g_autofree char *text = json_generator_to_data(gen, NULL);
    printf("%s\n", text);
}

char *cl_cli_printable(const char *s)
{
    g_autofree char *valid = g_utf8_make_valid(s ? s : "", -1);
    GString *out = g_string_sized_new(strlen(valid));
    for (const char *p = valid; *p; p = g_utf8_next_char(p)) {
        gunichar c = g_utf8_get_char(p);
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f || (c >= 0x80 && c < 0xa0))
            g_string_append(out, "\xef\xbf\xbd");
        else
            g_string_append_unichar(out, c);
    }
    return g_string_free(out, FALSE);
}

/* The callback hands over complete UTF-8 sequences; bytes that are not UTF-8 at all (an untrained
 * model makes plenty) are shown as U+FFFD so the terminal only ever gets text. */
void cl_cli_stream_token(gint32 id, const char *text, gsize len, gpointer user_data)
{
    (void)id;
    gboolean *any = user_data;
    if (len == 0)
        return;
    if (g_utf8_validate_len(text, len, NULL)) {
        fwrite(text, 1, len, stdout);
    } else {
        g_autofree char *valid = g_utf8_make_valid(text, (gssize)len);
        fputs(valid, stdout);
    }
    fflush(stdout);
    *any = TRUE;
}
