-- Read/write locks and semaphores on the lease strategies (insert, optimistic): docs/
-- ARCHITECTURE.md, "Lock shapes". A name held by shared holders (a read/write lock's readers,
-- or a semaphore's holders) keeps its one row in ${table}, owned by ':readers' or ':semaphore'
-- (real owners never begin with ':'), whose valid_until is never before any live holder's,
-- with holds 0 (so the in-transaction check, which wants holds > 0, never takes it for a grant).
-- Every exclusive acquire meets that row and is busy until it ends, exactly as behind an
-- exclusive holder, so the exclusive statements need nothing new. The holders are rows of
-- ${table}_holders; the triggers below keep the name's row in step with them (SQLite runs one
-- writer at a time, so a statement and its triggers see every earlier change). Held locks are
-- untouched by this migration.

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
