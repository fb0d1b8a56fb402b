-- dblock's schema for SQLite: the lock table and what it needs. ${table} is the lock table
-- (optionally schema.table), ${table_name} the same without the schema (SQLite wants it so
-- in ON clauses and in triggers' bodies). Later changes come as V2, V3, ... beside this file.
--
-- Times are milliseconds since the Unix epoch on the database's clock. SQLite runs one
-- writer at a time, so a statement and its triggers see every earlier change: the triggers
-- below keep the tables in step within the statement that changes them, which is what
-- stored procedures do on the servers (src/backends/sqlite/sqlite_dialect.cpp sends the
-- statements).

-- One row per lock name. A row is held while valid_until is in the future; the sweeper
-- deletes the others, unless someone still waits for the name (waited_until).
CREATE TABLE ${table} (
    name        TEXT    NOT NULL PRIMARY KEY,  -- the lock name (1..255 bytes of UTF-8)
    owner       TEXT    NOT NULL,              -- host:pid:instance:thread of the holder; '' when free;
                                               -- ':readers' or ':semaphore' when shared holders hold it
    fence       INTEGER NOT NULL,              -- fencing token of the current grant
    holds       INTEGER NOT NULL,              -- re-entrant holds by the owner; 0 when free, when kept
                                               -- after its release (hold_at_least) or shared
    acquired_at INTEGER NOT NULL,
    valid_until INTEGER NOT NULL,
    version     INTEGER NOT NULL,              -- bumped by every change: the optimistic strategy's
                                               -- compare-and-set
    handed_to   INTEGER NOT NULL DEFAULT 0,    -- the ticket a release handed the row to (0: none)
    waited_until INTEGER NOT NULL DEFAULT 0    -- the waiters' mark: until when an acquire waits
                                               -- for this name (below)
);

-- The sweeper finds expired rows without scanning the table.
CREATE INDEX ${table}_valid_until ON ${table_name} (valid_until);

-- The fence counter: one row that only grows, so fences keep increasing across release,
-- sweep and deleted rows. The two triggers advance it whenever a grant writes a new fence
-- (a grant draws its fence as the counter's value + 1 in the same statement).
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

-- ${table}_check: the fence check for code that is not C++, as a guard table whose trigger
-- raises (SQLite has no stored procedures; a trigger is the one place SQL can raise from).
-- Inside a write transaction,
--     INSERT INTO ${table}_check (name, fence) VALUES ('job', 42);
-- stores nothing and succeeds only while 42 is the current, unexpired holder's lease on
-- 'job'; otherwise it aborts with "dblock: ...", and the transaction must roll back. The
-- insert makes the transaction a writer, and SQLite has one writer at a time: no takeover,
-- release or sweep of the lease commits before the caller's transaction ends. (dblock's own
-- check_in applies the same rule in a statement of its own.)
CREATE TABLE ${table}_check (
    name  TEXT    NOT NULL,
    fence INTEGER NOT NULL
);

CREATE TRIGGER ${table}_check_fence BEFORE INSERT ON ${table_name}_check
BEGIN
    SELECT CASE
        WHEN NOT EXISTS (SELECT 1 FROM ${table_name} WHERE name = NEW.name AND fence = NEW.fence
                         AND holds > 0 AND valid_until > ${now_ms})
        THEN RAISE(ABORT, 'dblock: the lock is not held with this fence (released, expired or taken over)')
        ELSE RAISE(IGNORE)
    END;
END;

-- Shared holders of a name: a read/write lock's readers, a semaphore's holders, and the
-- marks of writers waiting behind readers. The name keeps its one row in ${table}, owned by
-- ':readers' or ':semaphore' (real owners never begin with ':') with holds 0, lasting at
-- least as long as every live holder here: an exclusive acquire meets that row and is busy
-- until it ends, as behind an exclusive holder, and the check (holds > 0) never takes it
-- for a grant. The triggers below keep that row in step with its holders.
CREATE TABLE ${table}_holders (
    name        TEXT    NOT NULL,
    owner       TEXT    NOT NULL,
    mode        TEXT    NOT NULL,  -- 's' a reader; 'x' a semaphore's holder; 'w' a waiting writer's mark
    permits     INTEGER NOT NULL,  -- 1 for a read/write lock, N for a semaphore (0 for a mark)
    fence       INTEGER NOT NULL,  -- from ${table}_fence, as every grant's (0 for a mark)
    holds       INTEGER NOT NULL,  -- re-entrant holds; 0 once released but kept (hold_at_least)
    acquired_at INTEGER NOT NULL,
    valid_until INTEGER NOT NULL,  -- a mark's: until when new readers wait behind the writer
    PRIMARY KEY (name, owner)
);
CREATE INDEX ${table}_holders_valid_until ON ${table_name}_holders (valid_until);

-- A holder granted, renewed or kept: the name's row is shared, lasts at least as long, and
-- carries the newest fence (which its own triggers copy into the fence counter). An update
-- does the same as an insert: an acquire that replaces the owner's own leftover is one.
CREATE TRIGGER ${table}_holders_on_insert AFTER INSERT ON ${table_name}_holders WHEN NEW.mode <> 'w'
BEGIN
    INSERT INTO ${table_name} (name, owner, fence, holds, acquired_at, valid_until, version)
    VALUES (NEW.name, CASE NEW.mode WHEN 's' THEN ':readers' ELSE ':semaphore' END, NEW.fence, 0,
            NEW.acquired_at, NEW.valid_until, 1)
    ON CONFLICT (name) DO UPDATE SET
        acquired_at = CASE WHEN owner LIKE ':%' AND valid_until > excluded.acquired_at THEN acquired_at
                      ELSE excluded.acquired_at END,
        valid_until = MAX(CASE WHEN owner LIKE ':%' THEN valid_until ELSE 0 END, excluded.valid_until),
        holds = 0,
        owner = excluded.owner, fence = MAX(fence, excluded.fence), version = version + 1;
END;

CREATE TRIGGER ${table}_holders_on_update AFTER UPDATE ON ${table_name}_holders WHEN NEW.mode <> 'w'
BEGIN
    INSERT INTO ${table_name} (name, owner, fence, holds, acquired_at, valid_until, version)
    VALUES (NEW.name, CASE NEW.mode WHEN 's' THEN ':readers' ELSE ':semaphore' END, NEW.fence, 0,
            NEW.acquired_at, NEW.valid_until, 1)
    ON CONFLICT (name) DO UPDATE SET
        acquired_at = CASE WHEN owner LIKE ':%' AND valid_until > excluded.acquired_at THEN acquired_at
                      ELSE excluded.acquired_at END,
        valid_until = MAX(CASE WHEN owner LIKE ':%' THEN valid_until ELSE 0 END, excluded.valid_until),
        holds = 0,
        owner = excluded.owner, fence = MAX(fence, excluded.fence), version = version + 1;
END;

-- A holder gone: the name's row lasts as long as the latest live holder, and is free with
-- none left (a waiting writer gets in at once).
CREATE TRIGGER ${table}_holders_on_delete AFTER DELETE ON ${table_name}_holders WHEN OLD.mode <> 'w'
BEGIN
    UPDATE ${table_name} SET
        valid_until = COALESCE((SELECT max(h.valid_until) FROM ${table_name}_holders AS h
                                WHERE h.name = OLD.name AND h.mode <> 'w' AND h.valid_until > ${now_ms}), 0),
        version = version + 1
    WHERE name = OLD.name AND owner LIKE ':%';
END;

-- The name's row deleted (swept, force-released): its holders and marks go with it.
CREATE TRIGGER ${table}_shared_on_delete AFTER DELETE ON ${table_name} WHEN OLD.owner LIKE ':%'
BEGIN
    DELETE FROM ${table_name}_holders WHERE name = OLD.name;
END;

-- Fair waiting on the lease strategies: a waiter that finds a name busy takes a ticket and
-- keeps it alive while it waits; a name is granted only to the lowest live ticket (or, with
-- none, to anyone). A ticket lives a few seconds unless renewed, so a waiter that dies holds
-- the queue up that long at most. The release of a grant made after waiting hands the row
-- to the lowest live ticket's owner (the next fence, the lease that waiter asked for, and
-- the ticket's number in handed_to); that
-- waiter, woken through its own wake file, reads the row handed to its ticket instead of
-- writing a grant of its own: one write transaction and its sync less per hand-off.
CREATE TABLE ${table}_queue (
    name        TEXT    NOT NULL,
    owner       TEXT    NOT NULL,
    ticket      INTEGER NOT NULL,  -- lower goes first: drawn above the name's highest
    valid_until INTEGER NOT NULL,  -- renewed while the waiter waits
    lease_ms    INTEGER NOT NULL,  -- the TTL the waiter asked for: what a hand-over grants it
    PRIMARY KEY (name, owner)
);

-- The waiters' mark: every acquire that will wait (fair or not, a writer or a reader) sets
-- waited_until on the name's row before it takes a ticket, and again each second while it
-- waits. A name with no row then has nobody to serve first and nobody to wake: its grant is
-- the least correct lease's INSERT, and the release of an unmarked row a DELETE that wakes
-- nobody (sqlite_dialect.cpp, insert_acquire_unmarked). A marked row is freed, not deleted,
-- by its release, and kept by the sweeper while marked, so the mark outlives the releases
-- that the waiters wait through.

-- A grant (a new row, or a new fence on the name's row, a hand-over's too) deletes the new
-- holder's ticket in the same statement.
CREATE TRIGGER ${table}_queue_served_on_insert AFTER INSERT ON ${table_name}
BEGIN
    DELETE FROM ${table_name}_queue WHERE name = NEW.name AND owner = NEW.owner;
END;

CREATE TRIGGER ${table}_queue_served_on_update AFTER UPDATE OF fence ON ${table_name}
BEGIN
    DELETE FROM ${table_name}_queue WHERE name = NEW.name AND owner = NEW.owner;
END;
