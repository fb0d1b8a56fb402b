-- dblock lock table for PostgreSQL. ${table} is the lock table (optionally schema.table),
-- ${table_name} the same without the schema (index names take no schema).

-- One row per lock name. Times are milliseconds since the Unix epoch on the server clock.
-- A row is held while valid_until is in the future; the sweeper deletes the others.
CREATE TABLE ${table} (
    name        text COLLATE "C" NOT NULL PRIMARY KEY,  -- the lock name: bytes, compared as bytes
    owner       text    NOT NULL,                       -- host:pid:instance:thread; '' when free
    fence       bigint  NOT NULL,                       -- fencing token of the current grant
    holds       integer NOT NULL,                       -- re-entrant holds by the owner
    acquired_at bigint  NOT NULL,
    valid_until bigint  NOT NULL,
    version     bigint  NOT NULL                        -- bumped by every change (optimistic)
);

-- The sweeper finds expired rows without scanning the table.
CREATE INDEX ${table_name}_valid_until ON ${table} (valid_until);

-- Fences: a sequence only grows, and nextval is never rolled back, so fences keep
-- increasing across release, sweep, deleted rows, crashes and server restarts.
CREATE SEQUENCE ${table}_fence AS bigint;
