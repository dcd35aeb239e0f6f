/* jsondepth.h - how deeply a JSON text nests, before json-glib parses it.
 *
 * json-glib's parser recurses once per array or object level, so a line of 100,000 '[' runs it
 * off the stack (a crash, not an error). cl_json_depth_ok scans the text once — strings and
 * their escapes skipped — and says whether its arrays and objects nest at most max_depth deep;
 * a text that does not nest deeper can then be parsed safely, whatever else is wrong with it. */
#pragma once

#include <glib.h>
#include <string.h>

/* The nesting any JSON ChangeLens reads needs (tokenizer files, training lines) is under 10. */
#define CL_JSON_MAX_DEPTH 256

/* len < 0: text is NUL-terminated. */
static inline gboolean cl_json_depth_ok(const char *text, gssize len, guint max_depth)
{
    gsize n = len < 0 ? strlen(text) : (gsize)len;
    guint depth = 0;
    gboolean in_string = FALSE;
    for (gsize i = 0; i < n; i++) {
        char c = text[i];
        if (in_string) {
            if (c == '\\')
                i++; /* the escaped character, '"' included, does not end the string */
            else if (c == '"')
                in_string = FALSE;
        } else if (c == '"') {
            in_string = TRUE;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth)
                return FALSE;
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
    }
    return TRUE;
}
