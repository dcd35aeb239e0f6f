-- 003-batch (PostgreSQL): archive-wide describe, as ../003-batch.sql.

CREATE TABLE batch_items (
    manifest TEXT NOT NULL CHECK (manifest <> ''),
    key      TEXT NOT NULL CHECK (key <> ''),
    case_id  BIGINT NOT NULL REFERENCES cases (id) ON DELETE CASCADE,
    added_at TEXT NOT NULL,
    PRIMARY KEY (manifest, key)
);
CREATE INDEX batch_items_by_case ON batch_items (case_id);
