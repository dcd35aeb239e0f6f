-- 001-initial: the records (docs/DESIGN.md §6). Times are ISO 8601 UTC with milliseconds, written by
-- casedb (one timestamp per transaction). Everything in a case goes when the case goes (ON DELETE
-- CASCADE), except the audit log, which keeps the case id as a plain number.

PRAGMA application_id = 1129071682; -- 'CLDB': a ChangeLens case database

CREATE TABLE cases (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL CHECK (name <> ''),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
-- the case list: most recently updated first
CREATE INDEX cases_by_update ON cases (updated_at DESC, id DESC);

-- Images are referenced by path and content hash, not copied.
CREATE TABLE images (
    id          INTEGER PRIMARY KEY,
    case_id     INTEGER NOT NULL REFERENCES cases (id) ON DELETE CASCADE,
    position    INTEGER NOT NULL CHECK (position >= 0),
    path        TEXT NOT NULL CHECK (path <> ''),
    frame       INTEGER NOT NULL DEFAULT 0 CHECK (frame >= 0),
    sha256      TEXT NOT NULL,
    file_size   INTEGER NOT NULL,
    file_mtime  INTEGER NOT NULL,
    format      TEXT NOT NULL,
    modality    TEXT,
    width       INTEGER NOT NULL,
    height      INTEGER NOT NULL,
    n_frames    INTEGER NOT NULL,
    acquired_at TEXT,
    metadata    TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
    added_at    TEXT NOT NULL,
    UNIQUE (case_id, position)
);

CREATE TABLE runs (
    id            INTEGER PRIMARY KEY,
    case_id       INTEGER NOT NULL REFERENCES cases (id) ON DELETE CASCADE,
    created_at    TEXT NOT NULL,
    model_name    TEXT NOT NULL,
    model_sha256  TEXT NOT NULL,
    model_config  TEXT NOT NULL,
    device        TEXT NOT NULL,
    settings      TEXT NOT NULL,
    seed          TEXT NOT NULL, -- decimal: a uint64 does not fit SQLite's signed integers
    preprocess_ms REAL NOT NULL DEFAULT 0,
    encode_ms     REAL NOT NULL DEFAULT 0,
    prefill_ms    REAL NOT NULL DEFAULT 0,
    decode_ms     REAL NOT NULL DEFAULT 0,
    total_ms      REAL NOT NULL DEFAULT 0,
    n_tokens      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_by_case ON runs (case_id);

-- A description is the chain of its versions; the case's current description is the latest
-- version of its latest description.
CREATE TABLE descriptions (
    id         INTEGER PRIMARY KEY,
    case_id    INTEGER NOT NULL REFERENCES cases (id) ON DELETE CASCADE,
    run_id     INTEGER REFERENCES runs (id) ON DELETE CASCADE, -- NULL: written by hand
    created_at TEXT NOT NULL
);
CREATE INDEX descriptions_by_case ON descriptions (case_id, id);
CREATE INDEX descriptions_by_run ON descriptions (run_id);

CREATE TABLE description_versions (
    id             INTEGER PRIMARY KEY,
    description_id INTEGER NOT NULL REFERENCES descriptions (id) ON DELETE CASCADE,
    version        INTEGER NOT NULL CHECK (version >= 1),
    text           TEXT NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ('draft', 'accepted', 'rejected')),
    author         TEXT NOT NULL,
    reviewer       TEXT, -- who accepted or rejected (the versions made by a status change)
    created_at     TEXT NOT NULL,
    UNIQUE (description_id, version)
);

-- Nothing a reviewer wrote is ever overwritten: versions are only added. They go only with
-- their case (the cascade deletes the parent row first, so the parent is gone by then).
CREATE TRIGGER description_versions_no_update BEFORE UPDATE ON description_versions
BEGIN
    SELECT RAISE(ABORT, 'description versions are never changed; add a version instead');
END;
CREATE TRIGGER description_versions_no_delete BEFORE DELETE ON description_versions
WHEN EXISTS (SELECT 1 FROM descriptions WHERE id = OLD.description_id)
BEGIN
    SELECT RAISE(ABORT, 'description versions are only deleted with their case');
END;
CREATE TRIGGER descriptions_no_update BEFORE UPDATE ON descriptions
BEGIN
    SELECT RAISE(ABORT, 'descriptions are never changed; add a version instead');
END;
CREATE TRIGGER descriptions_no_delete BEFORE DELETE ON descriptions
WHEN EXISTS (SELECT 1 FROM cases WHERE id = OLD.case_id)
BEGIN
    SELECT RAISE(ABORT, 'descriptions are only deleted with their case');
END;

CREATE TABLE heatmaps (
    id         INTEGER PRIMARY KEY,
    run_id     INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    image_id   INTEGER NOT NULL REFERENCES images (id) ON DELETE CASCADE,
    layer      INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    input_size INTEGER NOT NULL,
    grid_w     INTEGER NOT NULL CHECK (grid_w > 0),
    grid_h     INTEGER NOT NULL CHECK (grid_h > 0),
    data       BLOB NOT NULL CHECK (length(data) = grid_w * grid_h * 4), -- float32, native order
    UNIQUE (run_id, image_id, layer, kind)
);
CREATE INDEX heatmaps_by_image ON heatmaps (image_id);

CREATE TABLE notes (
    id         INTEGER PRIMARY KEY,
    case_id    INTEGER NOT NULL REFERENCES cases (id) ON DELETE CASCADE,
    image_id   INTEGER REFERENCES images (id) ON DELETE CASCADE, -- NULL: about the whole case
    author     TEXT NOT NULL,
    text       TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX notes_by_case ON notes (case_id);
CREATE INDEX notes_by_image ON notes (image_id);

CREATE TABLE key_images (
    id         INTEGER PRIMARY KEY,
    case_id    INTEGER NOT NULL REFERENCES cases (id) ON DELETE CASCADE,
    image_id   INTEGER NOT NULL REFERENCES images (id) ON DELETE CASCADE,
    label      TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL
);
CREATE INDEX key_images_by_case ON key_images (case_id);
CREATE INDEX key_images_by_image ON key_images (image_id);

-- Who did what when. No foreign key: the log outlives the cases it names.
CREATE TABLE audit (
    id      INTEGER PRIMARY KEY,
    at      TEXT NOT NULL,
    actor   TEXT NOT NULL,
    action  TEXT NOT NULL,
    case_id INTEGER,
    detail  TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_by_case ON audit (case_id, id);
