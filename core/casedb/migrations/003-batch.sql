-- 003-batch: archive-wide describe (changelens-cli batch describe). The case each manifest line
-- became, so that a re-run (another shard, a re-queued or killed task) finds it instead of making
-- another; a line is done when its case has a run. Case, images and this row are written in one
-- transaction.

CREATE TABLE batch_items (
    manifest TEXT NOT NULL CHECK (manifest <> ''),
    key      TEXT NOT NULL CHECK (key <> ''),
    case_id  INTEGER NOT NULL REFERENCES cases (id) ON DELETE CASCADE,
    added_at TEXT NOT NULL,
    PRIMARY KEY (manifest, key)
);
CREATE INDEX batch_items_by_case ON batch_items (case_id);
