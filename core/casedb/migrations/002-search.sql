-- 002-search: full-text search over case names, current descriptions, notes and image metadata.
-- One FTS5 row per case (rowid = case id), one column per field, so that a query's words may
-- match anywhere in the case and each case is one hit. The view says what is indexed; triggers
-- keep the index in step inside the transaction that changes the case. unicode61 with symbols
-- (emoji) as token characters and diacritics folded; prefix indexes keep short last-word
-- prefixes fast.

CREATE VIEW search_source AS
SELECT c.id AS case_id,
       c.name AS name,
       -- the current description: the latest version of the latest description
       coalesce((SELECT v.text FROM description_versions v
                 WHERE v.description_id = (SELECT max(d.id) FROM descriptions d
                                           WHERE d.case_id = c.id)
                 ORDER BY v.version DESC LIMIT 1), '') AS description,
       coalesce((SELECT group_concat(n.text, char(10)) FROM notes n WHERE n.case_id = c.id),
                '') AS notes,
       -- "Key: value" lines, each once per case (the images of a study repeat most of them)
       coalesce((SELECT group_concat(line, char(10)) FROM
                   (SELECT DISTINCT j.key || ': ' || j.value AS line
                    FROM images i, json_each(i.metadata) j WHERE i.case_id = c.id)),
                '') AS metadata
FROM cases c;

CREATE VIRTUAL TABLE search USING fts5 (
    name, description, notes, metadata,
    tokenize = "unicode61 remove_diacritics 2 categories 'L* N* Co So'",
    prefix = '1 2 3'
);
-- a word in the name says more than one in the description, notes or metadata
INSERT INTO search (search, rank) VALUES ('rank', 'bm25(4.0, 2.0, 1.5, 1.0)');

-- Each trigger rewrites only the field that changed (the metadata of a big series is costly to
-- gather; FTS5 itself still re-reads the row).
CREATE TRIGGER search_case_insert AFTER INSERT ON cases
BEGIN
    INSERT OR REPLACE INTO search (rowid, name, description, notes, metadata)
    VALUES (NEW.id, NEW.name, '', '', '');
END;
CREATE TRIGGER search_case_rename AFTER UPDATE OF name ON cases
BEGIN
    UPDATE search SET name = NEW.name WHERE rowid = NEW.id;
END;
CREATE TRIGGER search_case_delete AFTER DELETE ON cases
BEGIN
    DELETE FROM search WHERE rowid = OLD.id;
END;

-- A version of the case's latest description is its current text (versions are only appended,
-- and a new description comes with its version 1).
CREATE TRIGGER search_version_insert AFTER INSERT ON description_versions
WHEN NEW.description_id = (SELECT max(d.id) FROM descriptions d
                           WHERE d.case_id = (SELECT case_id FROM descriptions
                                              WHERE id = NEW.description_id))
BEGIN
    UPDATE search SET description = NEW.text
    WHERE rowid = (SELECT case_id FROM descriptions WHERE id = NEW.description_id);
END;

-- Notes and images. After a cascade from a deleted case there is no row left to update. Added
-- images are indexed by cl_casedb_images_add, once per call in its transaction: a trigger per
-- image would gather the case's metadata once per slice of a 300-slice series.
CREATE TRIGGER search_note_insert AFTER INSERT ON notes
BEGIN
    UPDATE search SET notes = (SELECT notes FROM search_source WHERE case_id = NEW.case_id)
    WHERE rowid = NEW.case_id;
END;
CREATE TRIGGER search_note_update AFTER UPDATE OF text ON notes
BEGIN
    UPDATE search SET notes = (SELECT notes FROM search_source WHERE case_id = NEW.case_id)
    WHERE rowid = NEW.case_id;
END;
CREATE TRIGGER search_note_delete AFTER DELETE ON notes
BEGIN
    UPDATE search SET notes = (SELECT notes FROM search_source WHERE case_id = OLD.case_id)
    WHERE rowid = OLD.case_id;
END;
CREATE TRIGGER search_image_update AFTER UPDATE OF metadata ON images
BEGIN
    UPDATE search SET metadata = (SELECT metadata FROM search_source WHERE case_id = NEW.case_id)
    WHERE rowid = NEW.case_id;
END;
CREATE TRIGGER search_image_delete AFTER DELETE ON images
BEGIN
    UPDATE search SET metadata = (SELECT metadata FROM search_source WHERE case_id = OLD.case_id)
    WHERE rowid = OLD.case_id;
END;

-- What was written before this migration.
INSERT INTO search (rowid, name, description, notes, metadata) SELECT * FROM search_source;
