/* jsonnum.h - doubles that json-glib writes as valid JSON.
 *
 * json-glib 1.6 (Debian 12) writes a double whose shortest "%.17g" form has an exponent and no
 * decimal point by appending ".0": 1e-13 becomes "1e-13.0", which no JSON parser (json-glib's
 * included) reads back. cl_json_double gives the value to hand to json_builder_add_double_value:
 * unchanged, or for those few values the neighbouring double toward zero (one ulp away), which
 * is written with seventeen digits and a point. */
#pragma once

#include <glib.h>
#include <math.h>
#include <string.h>

static inline double cl_json_double(double v)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    if (!isfinite(v))
        return v;
    g_ascii_formatd(buf, sizeof buf, "%.17g", v);
    if (strchr(buf, 'e') && !strchr(buf, '.'))
        return nextafter(v, 0.0);
    return v;
}
