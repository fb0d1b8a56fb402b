-- dblock lock table for SQLite. ${table} is the lock table (optionally schema.table),
-- ${table_name} the same without the schema (SQLite wants it so in ON clauses and triggers).

-- One row per lock name. Times are milliseconds since the Unix epoch on the database clock.
-- A row is held while valid_until is in the future; the sweeper deletes the others.
CREATE TABLE ${table} (
    name        TEXT    NOT NULL PRIMARY KEY,  -- the user's lock name (1..255 bytes of UTF-8)
    owner       TEXT    NOT NULL,              -- host:pid:instance:thread of the holder; '' when free
    fence       INTEGER NOT NULL,              -- fencing token of the current grant
    holds       INTEGER NOT NULL,              -- re-entrant holds by the owner
    acquired_at INTEGER NOT NULL,
    valid_until INTEGER NOT NULL,
    version     INTEGER NOT NULL               -- bumped by every change (optimistic strategy)
);

-- The sweeper finds expired rows without scanning the table.
CREATE INDEX ${table}_valid_until ON ${table_name} (valid_until);

-- The fence counter: one row that only grows, so fences keep increasing across release,
-- sweep and deleted rows. Triggers advance it whenever a grant takes a new fence.
CREATE TABLE ${table}_fence (
    id    INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    value INTEGER NOT NULL
);
INSERT INTO ${table}_fence (id, value) VALUES (1, 0);

CREATE TRIGGER ${table}_fence_on_insert AFTER INSERT ON ${table_name}
WHEN NEW.fence > (SELECT value FROM ${table_name}_fence)
BEGIN
    UPDATE ${table_name}_fence SET value = NEW.fence;
END;

CREATE TRIGGER ${table}_fence_on_update AFTER UPDATE OF fence ON ${table_name}
WHEN NEW.fence > (SELECT value FROM ${table_name}_fence)
BEGIN
    UPDATE ${table_name}_fence SET value = NEW.fence;
END;
