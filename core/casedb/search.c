/* search.c - cl_casedb_search: full-text search (FTS5, table `search` of migration 002: one
 * row per case) over case names, current descriptions, notes and image metadata. The user's
 * words are never FTS syntax: each becomes a quoted FTS5 string (the last one a prefix), so
 * quotes, AND, NEAR( and friends are searched for as the words they are. */
#include "casedb/casedb-private.h"

#include <string.h>

/* The columns of the FTS table (002-search.sql), as ClCaseSearchHit.field names them. */
static const char *const fields[] = { "name", "description", "note", "metadata" };

/* cl_best_column(search): the column holding most of the query's hits (the first on a tie), so
 * that the hit names one field and shows the snippet from it. */
static void best_column(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx,
                        int n_args, sqlite3_value **args)
{
    (void)n_args, (void)args;
    int n_inst = 0, counts[G_N_ELEMENTS(fields)] = { 0 };
    if (api->xInstCount(fts, &n_inst) == SQLITE_OK)
        for (int i = 0; i < n_inst; i++) {
            int phrase, col, offset;
            if (api->xInst(fts, i, &phrase, &col, &offset) == SQLITE_OK && col >= 0 &&
                col < (int)G_N_ELEMENTS(fields))
                counts[col]++;
        }
    int best = 0;
    for (int c = 1; c < (int)G_N_ELEMENTS(fields); c++)
        if (counts[c] > counts[best])
            best = c;
    sqlite3_result_int(ctx, best);
}

gboolean cl_casedb_search_register(ClCaseDb *db, GError **error)
{
    /* the documented way to reach FTS5's API: SELECT fts5(?) with a pointer binding */
    fts5_api *api = NULL;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sql, "SELECT fts5(?1)", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_pointer(st, 1, (void *)&api, "fts5_api_ptr", NULL);
        sqlite3_step(st);
    }
    sqlite3_finalize(st);
    if (!api || api->iVersion < 2 ||
        api->xCreateFunction(api, "cl_best_column", NULL, best_column, NULL) != SQLITE_OK) {
        g_set_error(error, CL_CASEDB_ERROR, CL_CASEDB_ERROR_FAILED,
                    "This SQLite library has no full-text search (FTS5), which the case "
                    "database needs. Install an SQLite built with FTS5.");
        return FALSE;
    }
    return TRUE;
}

/* Whether the FTS tokenizer (unicode61, categories L* N* Co So) keeps any character of word: a
 * word of punctuation alone would make an empty phrase, which matches nothing. */
static gboolean has_token_char(const char *word)
{
    for (const char *p = word; *p; p = g_utf8_next_char(p)) {
        gunichar c = g_utf8_get_char(p);
        switch (g_unichar_type(c)) {
        case G_UNICODE_LOWERCASE_LETTER:
        case G_UNICODE_MODIFIER_LETTER:
        case G_UNICODE_OTHER_LETTER:
        case G_UNICODE_TITLECASE_LETTER:
        case G_UNICODE_UPPERCASE_LETTER:
        case G_UNICODE_DECIMAL_NUMBER:
        case G_UNICODE_LETTER_NUMBER:
        case G_UNICODE_OTHER_NUMBER:
        case G_UNICODE_PRIVATE_USE:
        case G_UNICODE_OTHER_SYMBOL: return TRUE;
        default: break;
        }
    }
    return FALSE;
}

/* Splits at Unicode white space. */
static GPtrArray *split_words(const char *text)
{
    GPtrArray *words = g_ptr_array_new_with_free_func(g_free);
    const char *start = NULL;
    for (const char *p = text;; p = g_utf8_next_char(p)) {
        gboolean end = *p == '\0';
        gboolean space = !end && g_unichar_isspace(g_utf8_get_char(p));
        if ((end || space) && start) {
            g_ptr_array_add(words, g_strndup(start, (gsize)(p - start)));
            start = NULL;
        } else if (!end && !space && !start) {
            start = p;
        }
        if (end)
            break;
    }
    return words;
}

/* Each word as an FTS5 string ("" inside doubled), all required, the last one a prefix. NULL
 * when no word holds anything the index knows. */
static char *fts_expression(GPtrArray *words)
{
    GString *q = g_string_new(NULL);
    for (guint i = 0; i < words->len; i++) {
        const char *w = g_ptr_array_index(words, i);
        if (!has_token_char(w))
            continue;
        if (q->len)
            g_string_append_c(q, ' ');
        g_string_append_c(q, '"');
        for (const char *p = w; *p; p++) {
            if (*p == '"')
                g_string_append_c(q, '"');
            g_string_append_c(q, *p);
        }
        g_string_append_c(q, '"');
    }
    if (!q->len) {
        g_string_free(q, TRUE);
        return NULL;
    }
    g_string_append_c(q, '*');
    return g_string_free(q, FALSE);
}

/* The hits of an FTS query: one row per case, best first. */
static gboolean fts_hits(ClCaseDb *db, const char *expr, guint limit, GPtrArray *out,
                         GError **error)
{
    /* ORDER BY rank is done inside FTS5, so the snippet is only made for the rows returned */
    sqlite3_stmt *st = cl_casedb_stmt(db,
                                      "SELECT rowid, name, cl_best_column(search), rank, "
                                      "  CASE cl_best_column(search) "
                                      "  WHEN 0 THEN snippet(search, 0, '[', ']', '…', 16) "
                                      "  WHEN 1 THEN snippet(search, 1, '[', ']', '…', 16) "
                                      "  WHEN 2 THEN snippet(search, 2, '[', ']', '…', 16) "
                                      "  ELSE snippet(search, 3, '[', ']', '…', 16) END "
                                      "FROM search WHERE search MATCH ?1 ORDER BY rank LIMIT ?2",
                                      error);
    if (!st)
        return FALSE;
    sqlite3_bind_text(st, 1, expr, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, limit);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        ClCaseSearchHit *h = g_new0(ClCaseSearchHit, 1);
        h->case_id = sqlite3_column_int64(st, 0);
        h->case_name = cl_casedb_column_dup(st, 1);
        int col = sqlite3_column_int(st, 2);
        h->field = g_strdup(fields[CLAMP(col, 0, (int)G_N_ELEMENTS(fields) - 1)]);
        h->rank = sqlite3_column_double(st, 3);
        h->snippet = cl_casedb_column_dup(st, 4);
        if (!h->snippet)
            h->snippet = g_strdup("");
        g_ptr_array_add(out, h);
    }
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) {
        cl_casedb_set_sqlite_error(db, rc, "searching", error);
        return FALSE;
    }
    return TRUE;
}

/* Up to `around` characters each side of the needle at text[at], the needle in [ ]. */
static char *literal_snippet(const char *text, gsize at, gsize len, guint around)
{
    const char *start = text + at, *end = text + at + len;
    guint n;
    for (n = 0; n < around && start > text; n++)
        start = g_utf8_prev_char(start);
    for (n = 0; n < around && *end; n++)
        end = g_utf8_next_char(end);
    return g_strdup_printf("%s%.*s[%.*s]%.*s%s", start > text ? "…" : "", (int)(text + at - start),
                           start, (int)len, text + at, (int)(end - (text + at + len)),
                           text + at + len, *end ? "…" : "");
}

/* Punctuation alone is not in the index: look for it as a plain substring of the indexed texts
 * (newest cases first). Rare, and a scan of the texts is fast enough for it. */
static gboolean literal_hits(ClCaseDb *db, const char *needle, guint limit, GPtrArray *out,
                             GError **error)
{
    sqlite3_stmt *st =
        cl_casedb_stmt(db,
                       "SELECT rowid, name, description, notes, metadata FROM search "
                       "WHERE instr(name, ?1) OR instr(description, ?1) OR instr(notes, ?1) "
                       "   OR instr(metadata, ?1) "
                       "ORDER BY rowid DESC LIMIT ?2",
                       error);
    if (!st)
        return FALSE;
    sqlite3_bind_text(st, 1, needle, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, limit);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        ClCaseSearchHit *h = g_new0(ClCaseSearchHit, 1);
        h->case_id = sqlite3_column_int64(st, 0);
        h->case_name = cl_casedb_column_dup(st, 1);
        for (int col = 0; col < (int)G_N_ELEMENTS(fields) && !h->field; col++) {
            const char *body = (const char *)sqlite3_column_text(st, 1 + col);
            const char *at = body ? strstr(body, needle) : NULL;
            if (at) {
                h->field = g_strdup(fields[col]);
                h->snippet = literal_snippet(body, (gsize)(at - body), strlen(needle), 24);
            }
        }
        if (!h->field) { /* cannot happen: instr() found it */
            h->field = g_strdup(fields[0]);
            h->snippet = g_strdup("");
        }
        g_ptr_array_add(out, h);
    }
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) {
        cl_casedb_set_sqlite_error(db, rc, "searching", error);
        return FALSE;
    }
    return TRUE;
}

GPtrArray *cl_casedb_search(ClCaseDb *db, const char *query, guint limit, GError **error)
{
    CL_CASEDB_CHECK(db, NULL);
    g_return_val_if_fail(query != NULL, NULL);
    g_autoptr(GPtrArray) out =
        g_ptr_array_new_with_free_func((GDestroyNotify)cl_case_search_hit_free);
    g_autofree char *text = g_utf8_make_valid(query, -1);
    g_autoptr(GPtrArray) words = split_words(text);
    if (!words->len || limit == 0)
        return g_steal_pointer(&out);
    g_autofree char *expr = fts_expression(words);
    gboolean ok;
    if (expr) {
        ok = fts_hits(db, expr, limit, out, error);
    } else {
        /* only punctuation: the whole query, trimmed, as a literal */
        g_autofree char *needle = g_strstrip(g_strdup(text));
        ok = literal_hits(db, needle, limit, out, error);
    }
    if (!ok)
        return NULL;
    return g_steal_pointer(&out);
}
