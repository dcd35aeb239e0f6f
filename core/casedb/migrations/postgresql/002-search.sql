-- 002-search (PostgreSQL): full-text search over case names, current descriptions, notes and image
-- metadata, as ../002-search.sql does with FTS5. One row per case; its words are split and folded
-- by casedb itself (core/casedb/search.c, the same rule as the SQLite index's tokenizer: letters,
-- digits, private-use and other symbols such as emoji are word characters; lower case, diacritics
-- removed) and kept as a tsvector with a weight per field (A name, B description, C notes,
-- D metadata), so that a query's words are matched exactly as they are in SQLite and never parsed
-- as syntax. casedb rewrites a case's row in every write that changes the case, inside its
-- transaction; the view says what is indexed.

CREATE VIEW search_source AS
SELECT c.id AS case_id,
       c.name AS name,
       coalesce((SELECT v.text FROM description_versions v
                 WHERE v.description_id = (SELECT max(d.id) FROM descriptions d
                                           WHERE d.case_id = c.id)
                 ORDER BY v.version DESC LIMIT 1), '') AS description,
       coalesce((SELECT string_agg(n.text, chr(10) ORDER BY n.id) FROM notes n
                 WHERE n.case_id = c.id), '') AS notes,
       -- "Key: value" lines, each once per case
       coalesce((SELECT string_agg(line, chr(10) ORDER BY line) FROM
                   (SELECT DISTINCT j.key || ': ' || j.value AS line
                    FROM images i, json_each_text(i.metadata::json) j
                    WHERE i.case_id = c.id) x),
                '') AS metadata
FROM cases c;

CREATE TABLE search (
    rowid       BIGINT PRIMARY KEY REFERENCES cases (id) ON DELETE CASCADE,
    name        TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    notes       TEXT NOT NULL DEFAULT '',
    metadata    TEXT NOT NULL DEFAULT '',
    doc         TSVECTOR NOT NULL DEFAULT ''
);
CREATE INDEX search_doc ON search USING gin (doc);
