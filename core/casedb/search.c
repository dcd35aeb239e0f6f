/* search.c - cl_casedb_search: full-text search (table `search` of migration 002: one row per
 * case) over case names, current descriptions, notes and image metadata. The user's words are
 * never query syntax. SQLite: FTS5 with the unicode61 tokenizer; each word becomes a quoted FTS5
 * string (the last one a prefix), so quotes, AND, NEAR( and friends are searched for as the words
 * they are. PostgreSQL: casedb splits and folds the words itself by the same rule as unicode61
 * (split_tokens), keeps them as a tsvector (cl_casedb_pg_reindex) and builds the tsquery from
 * the query's tokens, each a quoted lexeme: the server parses neither. */
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

/* Whether the FTS tokenizer (unicode61, categories L* N* Co So) keeps c. */
static gboolean is_token_char(gunichar c)
{
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
    default: return FALSE;
    }
}

/* Whether word holds any token character: a word of punctuation alone would make an empty
 * phrase, which matches nothing. */
static gboolean has_token_char(const char *word)
{
    for (const char *p = word; *p; p = g_utf8_next_char(p))
        if (is_token_char(g_utf8_get_char(p)))
            return TRUE;
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
    ClDbStmt *st = cl_casedb_stmt(db,
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
    cl_db_bind_text(st, 1, expr);
    cl_db_bind_int64(st, 2, limit);
    int rc;
    while ((rc = cl_db_step(st)) == SQLITE_ROW) {
        ClCaseSearchHit *h = g_new0(ClCaseSearchHit, 1);
        h->case_id = cl_db_column_int64(st, 0);
        h->case_name = cl_casedb_column_dup(st, 1);
        int col = (int)cl_db_column_int64(st, 2);
        h->field = g_strdup(fields[CLAMP(col, 0, (int)G_N_ELEMENTS(fields) - 1)]);
        h->rank = cl_db_column_double(st, 3);
        h->snippet = cl_casedb_column_dup(st, 4);
        if (!h->snippet)
            h->snippet = g_strdup("");
        g_ptr_array_add(out, h);
    }
    cl_db_reset(st);
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
    ClDbStmt *st =
        cl_casedb_stmt(db,
                       CL_SQL(db,
                              "SELECT rowid, name, description, notes, metadata FROM search "
                              "WHERE instr(name, ?1) OR instr(description, ?1) OR instr(notes, ?1) "
                              "   OR instr(metadata, ?1) "
                              "ORDER BY rowid DESC LIMIT ?2",
                              "SELECT rowid, name, description, notes, metadata FROM search "
                              "WHERE strpos(name, ?1) > 0 OR strpos(description, ?1) > 0 "
                              "   OR strpos(notes, ?1) > 0 OR strpos(metadata, ?1) > 0 "
                              "ORDER BY rowid DESC LIMIT ?2"),
                       error);
    if (!st)
        return FALSE;
    cl_db_bind_text(st, 1, needle);
    cl_db_bind_int64(st, 2, limit);
    int rc;
    while ((rc = cl_db_step(st)) == SQLITE_ROW) {
        ClCaseSearchHit *h = g_new0(ClCaseSearchHit, 1);
        h->case_id = cl_db_column_int64(st, 0);
        h->case_name = cl_casedb_column_dup(st, 1);
        for (int col = 0; col < (int)G_N_ELEMENTS(fields) && !h->field; col++) {
            const char *body = cl_db_column_text(st, 1 + col);
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
    cl_db_reset(st);
    if (rc != SQLITE_DONE) {
        cl_casedb_set_sqlite_error(db, rc, "searching", error);
        return FALSE;
    }
    return TRUE;
}

/* ---- PostgreSQL ------------------------------------------------------------------------------ */

/* A lexeme longer than this is cut (PostgreSQL keeps lexemes under 2 KB). */
#define MAX_LEXEME 1024
/* tsvector positions run to 16383; a lexeme keeps at most 255 of them. */
#define MAX_POSITION 16383
#define MAX_POSITIONS 255
/* A tsvector holds under 1 MB: each distinct word counts its bytes (rounded up to even) and two
 * bytes for each position and one more. A case's words past this budget (a huge series'
 * metadata, a pasted report of a novel's length) are not indexed on PostgreSQL, rather than the
 * write failing. */
#define TSVECTOR_BUDGET (1000 * 1000)

typedef struct {
    gsize start, end; /* bytes of the text */
    char *folded;     /* lower case, diacritics removed */
} Token;

static void token_clear(Token *t)
{
    g_free(t->folded);
}

/* c in lower case without its diacritics (unicode61's remove_diacritics: the base letter of a
 * canonical decomposition, its combining marks dropped). */
static void append_folded(GString *out, gunichar c)
{
    gunichar parts[G_UNICHAR_MAX_DECOMPOSITION_LENGTH];
    gsize n = g_unichar_fully_decompose(g_unichar_tolower(c), FALSE, parts, G_N_ELEMENTS(parts));
    for (gsize i = 0; i < n; i++)
        if (g_unichar_type(parts[i]) != G_UNICODE_NON_SPACING_MARK)
            g_string_append_unichar(out, g_unichar_tolower(parts[i]));
}

/* The tokens of text (valid UTF-8), as the SQLite index's tokenizer makes them. */
static GArray *split_tokens(const char *text)
{
    GArray *tokens = g_array_new(FALSE, FALSE, sizeof(Token));
    g_array_set_clear_func(tokens, (GDestroyNotify)token_clear);
    GString *cur = NULL;
    gsize start = 0;
    for (const char *p = text;; p = g_utf8_next_char(p)) {
        gunichar c = *p ? g_utf8_get_char(p) : 0;
        gboolean keep = c && is_token_char(c);
        if (keep) {
            if (!cur) {
                cur = g_string_new(NULL);
                start = (gsize)(p - text);
            }
            if (cur->len < MAX_LEXEME)
                append_folded(cur, c);
        } else if (cur) {
            if (cur->len > MAX_LEXEME) { /* cut at a character's start */
                const char *cut = g_utf8_find_prev_char(cur->str, cur->str + MAX_LEXEME + 1);
                g_string_truncate(cur, cut ? (gsize)(cut - cur->str) : MAX_LEXEME);
            }
            Token t = { start, (gsize)(p - text), NULL };
            t.folded = cur->len ? g_string_free(cur, FALSE) : (g_string_free(cur, TRUE), NULL);
            cur = NULL;
            if (t.folded)
                g_array_append_val(tokens, t);
        }
        if (!c)
            break;
    }
    return tokens;
}

/* s as a quoted lexeme of tsvector or tsquery input: quotes doubled, backslashes escaped. */
static void append_lexeme(GString *out, const char *s)
{
    g_string_append_c(out, '\'');
    for (const char *p = s; *p; p++) {
        if (*p == '\'' || *p == '\\')
            g_string_append_c(out, *p == '\'' ? '\'' : '\\');
        g_string_append_c(out, *p);
    }
    g_string_append_c(out, '\'');
}

/* The tsvector (as input text) of a case's four fields: each word with its positions and its
 * field's weight; the fields far apart, so that no phrase spans two. */
static char *document_vector(const char *const fields_text[4])
{
    static const char weights[] = { 'A', 'B', 'C', 'D' };
    g_autoptr(GHashTable) positions =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_ptr_array_unref);
    GPtrArray *order = g_ptr_array_new(); /* lexemes, first seen first */
    int pos = 1;
    for (int f = 0; f < 4; f++) {
        g_autoptr(GArray) tokens = split_tokens(fields_text[f] ? fields_text[f] : "");
        for (guint i = 0; i < tokens->len; i++, pos = MIN(pos + 1, MAX_POSITION)) {
            Token *t = &g_array_index(tokens, Token, i);
            GPtrArray *list = g_hash_table_lookup(positions, t->folded);
            if (!list) {
                char *key = g_strdup(t->folded); /* the table owns it; order borrows it */
                list = g_ptr_array_new_with_free_func(g_free);
                g_hash_table_insert(positions, key, list);
                g_ptr_array_add(order, key);
            }
            if (list->len < MAX_POSITIONS)
                g_ptr_array_add(list, g_strdup_printf("%d%c", pos, weights[f]));
        }
        pos = MIN(pos + 100, MAX_POSITION);
    }
    GString *out = g_string_new(NULL);
    gsize size = 0;
    for (guint i = 0; i < order->len; i++) {
        const char *lexeme = order->pdata[i];
        GPtrArray *list = g_hash_table_lookup(positions, lexeme);
        size += ((strlen(lexeme) + 1) & ~(gsize)1) + 2 * ((gsize)list->len + 1);
        if (size > TSVECTOR_BUDGET)
            break; /* the words seen first are kept */
        if (out->len)
            g_string_append_c(out, ' ');
        append_lexeme(out, lexeme);
        g_string_append_c(out, ':');
        for (guint k = 0; k < list->len; k++)
            g_string_append_printf(out, "%s%s", k ? "," : "", (char *)list->pdata[k]);
    }
    g_ptr_array_free(order, TRUE);
    return g_string_free(out, FALSE);
}

gboolean cl_casedb_pg_reindex(ClCaseDb *db, gint64 case_id, GError **error)
{
    ClDbStmt *st = cl_casedb_stmt(
        db, "SELECT name, description, notes, metadata FROM search_source WHERE case_id = ?1",
        error);
    if (!st)
        return FALSE;
    cl_db_bind_int64(st, 1, case_id);
    int rc = cl_db_step(st);
    if (rc == SQLITE_DONE) { /* the case has gone: its row went with it (ON DELETE CASCADE) */
        cl_db_reset(st);
        return TRUE;
    }
    if (rc != SQLITE_ROW) {
        cl_casedb_set_sqlite_error(db, rc, "indexing the case for search", error);
        cl_db_reset(st);
        return FALSE;
    }
    g_autofree char *name = cl_casedb_column_dup(st, 0), *description = cl_casedb_column_dup(st, 1);
    g_autofree char *notes = cl_casedb_column_dup(st, 2), *metadata = cl_casedb_column_dup(st, 3);
    cl_db_reset(st);
    const char *const texts[4] = { name, description, notes, metadata };
    g_autofree char *vector = document_vector(texts);
    st = cl_casedb_stmt(db,
                        "INSERT INTO search (rowid, name, description, notes, metadata, doc) "
                        "VALUES (?1, ?2, ?3, ?4, ?5, CAST(?6 AS tsvector)) "
                        "ON CONFLICT (rowid) DO UPDATE SET name = EXCLUDED.name, "
                        "description = EXCLUDED.description, notes = EXCLUDED.notes, "
                        "metadata = EXCLUDED.metadata, doc = EXCLUDED.doc",
                        error);
    if (!st)
        return FALSE;
    cl_db_bind_int64(st, 1, case_id);
    for (int f = 0; f < 4; f++)
        cl_db_bind_text(st, 2 + f, texts[f] ? texts[f] : "");
    cl_db_bind_text(st, 6, vector);
    return cl_casedb_exec_stmt(db, st, "indexing the case for search", error);
}

gboolean cl_casedb_pg_reindex_all(ClCaseDb *db, GError **error)
{
    ClDbStmt *st = cl_casedb_stmt(db, "SELECT id FROM cases ORDER BY id", error);
    if (!st)
        return FALSE;
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(gint64));
    int rc;
    while ((rc = cl_db_step(st)) == SQLITE_ROW) {
        gint64 id = cl_db_column_int64(st, 0);
        g_array_append_val(ids, id);
    }
    cl_db_reset(st);
    if (rc != SQLITE_DONE) {
        cl_casedb_set_sqlite_error(db, rc, "indexing the cases for search", error);
        return FALSE;
    }
    for (guint i = 0; i < ids->len; i++)
        if (!cl_casedb_pg_reindex(db, g_array_index(ids, gint64, i), error))
            return FALSE;
    return TRUE;
}

/* The tsquery (input text) of the words: every word required, a word of several tokens
 * ("Fixture^Patient") as a phrase, the last token a prefix; out_words gets each word's tokens
 * (a GArray of Token per word that has any). NULL when no word has a token. */
static char *query_vector(GPtrArray *words, GPtrArray *out_words)
{
    GString *q = g_string_new(NULL);
    for (guint i = 0; i < words->len; i++) {
        GArray *tokens = split_tokens(g_ptr_array_index(words, i));
        if (!tokens->len) {
            g_array_unref(tokens);
            continue;
        }
        g_ptr_array_add(out_words, tokens);
    }
    for (guint i = 0; i < out_words->len; i++) {
        GArray *tokens = g_ptr_array_index(out_words, i);
        if (q->len)
            g_string_append(q, " & ");
        g_string_append_c(q, '(');
        for (guint k = 0; k < tokens->len; k++) {
            if (k)
                g_string_append(q, " <-> ");
            append_lexeme(q, g_array_index(tokens, Token, k).folded);
            if (i + 1 == out_words->len && k + 1 == tokens->len)
                g_string_append(q, ":*");
        }
        g_string_append_c(q, ')');
    }
    if (!q->len) {
        g_string_free(q, TRUE);
        return NULL;
    }
    return g_string_free(q, FALSE);
}

/* Whether a token of the text is one of the query's (the last query token as a prefix). */
static gboolean token_matches(const char *folded, GPtrArray *qwords)
{
    for (guint i = 0; i < qwords->len; i++) {
        GArray *tokens = g_ptr_array_index(qwords, i);
        for (guint k = 0; k < tokens->len; k++) {
            const char *q = g_array_index(tokens, Token, k).folded;
            gboolean last = i + 1 == qwords->len && k + 1 == tokens->len;
            if (last ? g_str_has_prefix(folded, q) : strcmp(folded, q) == 0)
                return TRUE;
        }
    }
    return FALSE;
}

/* The snippet of a field: up to 16 tokens around its first hit, every hit in [ ] (as FTS5's
 * snippet()). *n_hits: how many of the field's tokens are hits. */
static char *field_snippet(const char *text, GPtrArray *qwords, guint *n_hits)
{
    g_autoptr(GArray) tokens = split_tokens(text);
    int first = -1;
    *n_hits = 0;
    for (guint i = 0; i < tokens->len; i++)
        if (token_matches(g_array_index(tokens, Token, i).folded, qwords)) {
            (*n_hits)++;
            if (first < 0)
                first = (int)i;
        }
    if (first < 0)
        return NULL;
    guint from = (guint)MAX(0, first - 4), to = MIN(tokens->len, from + 16);
    GString *out = g_string_new(from > 0 ? "…" : "");
    gsize at = g_array_index(tokens, Token, from).start;
    for (guint i = from; i < to; i++) {
        Token *t = &g_array_index(tokens, Token, i);
        g_string_append_len(out, text + at, (gssize)(t->start - at));
        gboolean hit = token_matches(t->folded, qwords);
        if (hit)
            g_string_append_c(out, '[');
        g_string_append_len(out, text + t->start, (gssize)(t->end - t->start));
        if (hit)
            g_string_append_c(out, ']');
        at = t->end;
    }
    if (to < tokens->len)
        g_string_append(out, "…");
    return g_string_free(out, FALSE);
}

static gboolean pg_hits(ClCaseDb *db, GPtrArray *words, guint limit, GPtrArray *out, GError **error)
{
    g_autoptr(GPtrArray) qwords = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    g_autofree char *tsquery = query_vector(words, qwords);
    if (!tsquery)
        return TRUE;
    /* ts_rank's weights run D, C, B, A: metadata 1, notes 1.5, description 2, name 4 (as the
     * FTS5 index's bm25 weights), scaled into 0..1; negated, so that lower is better */
    ClDbStmt *st =
        cl_casedb_stmt(db,
                       "SELECT s.rowid, s.name, s.description, s.notes, s.metadata, "
                       "  -ts_rank('{0.25, 0.375, 0.5, 1.0}', s.doc, x.q) AS r "
                       "FROM search s, (SELECT CAST(?1 AS tsquery) AS q) x WHERE s.doc @@ x.q "
                       "ORDER BY r, s.rowid DESC LIMIT ?2",
                       error);
    if (!st)
        return FALSE;
    cl_db_bind_text(st, 1, tsquery);
    cl_db_bind_int64(st, 2, limit);
    int rc;
    while ((rc = cl_db_step(st)) == SQLITE_ROW) {
        ClCaseSearchHit *h = g_new0(ClCaseSearchHit, 1);
        h->case_id = cl_db_column_int64(st, 0);
        h->case_name = cl_casedb_column_dup(st, 1);
        h->rank = cl_db_column_double(st, 5);
        guint best = 0;
        for (int col = 0; col < (int)G_N_ELEMENTS(fields); col++) {
            guint n = 0;
            const char *body = cl_db_column_text(st, 1 + col);
            char *snippet = field_snippet(body ? body : "", qwords, &n);
            if (snippet && n > best) {
                best = n;
                g_free(h->field), g_free(h->snippet);
                h->field = g_strdup(fields[col]);
                h->snippet = snippet;
            } else {
                g_free(snippet);
            }
        }
        if (!h->field) { /* a phrase's tokens apart: the row matched, name its first field */
            h->field = g_strdup(fields[0]);
            h->snippet = g_strdup("");
        }
        g_ptr_array_add(out, h);
    }
    cl_db_reset(st);
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
    if (expr && db->pg) {
        ok = pg_hits(db, words, limit, out, error);
    } else if (expr) {
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
