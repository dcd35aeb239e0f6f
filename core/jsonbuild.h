/* jsonbuild.h - members of a JSON object being built: text (made valid UTF-8, null for NULL) and
 * integers, as the case database's records and the CLI's listings write them. */
#pragma once

#include <json-glib/json-glib.h>

static inline void cl_json_str(JsonBuilder *b, const char *key, const char *v)
{
    json_builder_set_member_name(b, key);
    if (v) {
        g_autofree char *valid = g_utf8_make_valid(v, -1);
        json_builder_add_string_value(b, valid);
    } else {
        json_builder_add_null_value(b);
    }
}

static inline void cl_json_int(JsonBuilder *b, const char *key, gint64 v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_int_value(b, v);
}
