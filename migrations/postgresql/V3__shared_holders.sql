-- Read/write locks and semaphores on the lease strategies (insert, optimistic): docs/
-- ARCHITECTURE.md, "Lock shapes". A name held by shared holders (a read/write lock's readers,
-- or a semaphore's holders) keeps its one row in ${table}, owned by ':readers' or ':semaphore'
-- (real owners never begin with ':'), whose valid_until is never before any live holder's,
-- with holds 0 (so ${table}_check, which wants holds > 0, never takes it for a grant).
-- Every exclusive acquire meets that row and is busy until it ends, exactly as behind an
-- exclusive holder, so the exclusive statements need nothing new; and every shaped grant and
-- release locks that row first, which orders them with each other and with the exclusive
-- ones. The holders are rows of ${table}_holders. Held locks are untouched by this migration.

CREATE TABLE ${table}_holders (
    name        text COLLATE "C" NOT NULL,
    owner       text    NOT NULL,
    mode        text    NOT NULL,  -- 's' a reader; 'x' a semaphore's holder; 'w' a waiting writer's mark
    permits     integer NOT NULL,  -- 1 for a read/write lock, N for a semaphore (0 for a mark)
    fence       bigint  NOT NULL,  -- from ${table}_fence, as every grant's (0 for a mark)
    holds       integer NOT NULL,  -- re-entrant holds; 0 once released but kept (hold_at_least)
    acquired_at bigint  NOT NULL,
    valid_until bigint  NOT NULL,  -- a mark's: until when new readers wait behind the writer
    PRIMARY KEY (name, owner)
);
CREATE INDEX ${table_name}_holders_valid_until ON ${table}_holders (valid_until);

-- ${table}_acquire_shared(name, owner, mode, permits, ttl_ms) -> (fence, remaining):
-- fence > 0, granted for remaining ms; 0, busy for remaining ms (0: not known); the asker
-- disagrees about what the name is (a usage error, not a wait): -1, a semaphore of
-- `remaining` permits holds it; -2, readers hold it; -3, an exclusive holder (asked for a
-- semaphore: readers wait for a writer).
-- The name's turn (the transaction advisory lock the insert acquire tries before it draws a
-- fence) is waited for, bounded, then the name's row is locked: from then on each statement
-- reads a snapshot taken after every other grant and release of the name committed.
-- A reader that finds the name held by live readers, with the row lasting past its own
-- lease, writes nothing of the name's row: it takes the turn and the row lock shared, so
-- the grants of a name's readers commit side by side and share WAL flushes instead of
-- queueing one flush each. Anything that would change the row (a new run of readers, a
-- lease past the row's end, a semaphore, whose count must not be raced) takes the row lock
-- exclusively. A reader that does extend the row extends it by a little more than its own
-- lease (the slack: ttl/2, at most 1 s), so the next readers find it long enough.
CREATE FUNCTION ${table}_acquire_shared(lock_name text, lock_owner text, lock_mode text, lock_permits integer,
                                       ttl_ms bigint, OUT fence bigint, OUT remaining bigint)
    LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $dblock$
DECLARE
    now_ms bigint := (extract(epoch from now()) * 1000)::bigint;
    turn bigint := hashtextextended('${table}:' || lock_name, 0);
    row_owner text;
    row_until bigint;
    held_mode text;
    held_permits integer;
    live integer;
    soonest bigint;
    granted bigint;
    summary text := CASE WHEN lock_mode = 's' THEN ':readers' ELSE ':semaphore' END;
    slack bigint := CASE WHEN lock_mode = 's' THEN LEAST(ttl_ms / 2, 1000) ELSE 0 END;
    saved text := current_setting('lock_timeout');
    beside boolean := false;  -- a reader beside live readers: the row is locked shared
BEGIN
    IF lock_mode = 's' THEN  -- a writer waits: readers queue behind it, without taking the turn
        -- (a writer's acquire only tries the turn, and takes a failed try for a grant under way
        -- whose release will wake it: a reader that is only going to be busy must not hold it)
        SELECT min(h.valid_until) INTO soonest FROM ${table}_holders AS h
            WHERE h.name = lock_name AND h.mode = 'w' AND h.valid_until > now_ms AND h.owner <> lock_owner;
        IF soonest IS NOT NULL THEN
            fence := 0;
            remaining := soonest - now_ms;
            RETURN;
        END IF;
    END IF;
    BEGIN
        PERFORM set_config('lock_timeout', '2000ms', true);
        IF lock_mode = 's' THEN
            PERFORM pg_advisory_xact_lock_shared(turn);
        ELSE
            PERFORM pg_advisory_xact_lock(turn);
        END IF;
    EXCEPTION WHEN lock_not_available THEN
        fence := 0;  -- a transaction's lock_in holds the turn: busy, woken by its release
        remaining := 0;
        RETURN;
    END;
    PERFORM set_config('lock_timeout', saved, true);
    INSERT INTO ${table} AS t (name, owner, fence, holds, acquired_at, valid_until, version)
        VALUES (lock_name, summary, 0, 0, now_ms, 0, 1) ON CONFLICT (name) DO NOTHING;
    IF lock_mode = 's' THEN
        BEGIN  -- a subtransaction: leaving it by the exception gives the shared row lock back
            SELECT t.owner, t.valid_until INTO row_owner, row_until FROM ${table} AS t
                WHERE t.name = lock_name FOR SHARE;
            IF NOT FOUND OR row_owner <> ':readers' OR row_until < now_ms + ttl_ms THEN
                RAISE EXCEPTION USING ERRCODE = 'DBL01';  -- the row must change: lock it exclusively
            END IF;
            -- Under a live ':readers' row every live holder is a reader (a semaphore's grant
            -- would have found them and refused): nothing more to check.
            beside := true;
        EXCEPTION WHEN SQLSTATE 'DBL01' THEN
            NULL;
        END;
    END IF;
    IF NOT beside THEN
        SELECT t.owner, t.valid_until INTO row_owner, row_until FROM ${table} AS t WHERE t.name = lock_name FOR UPDATE;
        IF NOT FOUND THEN  -- deleted right after the insert found it: look again at the next attempt
            fence := 0;
            remaining := 0;
            RETURN;
        END IF;
        IF row_until > now_ms AND row_owner NOT LIKE ':%' THEN  -- an exclusive holder
            fence := CASE WHEN lock_mode = 'x' THEN -3 ELSE 0 END;
            remaining := row_until - now_ms;
            RETURN;
        END IF;
        IF row_owner NOT LIKE ':%' OR row_until <= now_ms THEN
            -- A new run of shared holders: rows left from an earlier one are dead (a holder is
            -- never live past the row), all but the waiting writers' marks.
            DELETE FROM ${table}_holders AS h WHERE h.name = lock_name AND h.mode <> 'w';
        END IF;
        -- The owner's own leftover (an acquire whose answer was lost) is replaced below.
        SELECT min(h.mode), min(h.permits), count(*), min(h.valid_until) INTO held_mode, held_permits, live, soonest
            FROM ${table}_holders AS h
            WHERE h.name = lock_name AND h.mode <> 'w' AND h.valid_until > now_ms AND h.owner <> lock_owner;
        IF live > 0 AND (held_mode <> lock_mode OR held_permits <> lock_permits) THEN
            fence := CASE WHEN held_mode = 'x' THEN -1 ELSE -2 END;
            remaining := held_permits;
            RETURN;
        END IF;
        IF lock_mode = 'x' AND live >= lock_permits THEN
            fence := 0;
            remaining := soonest - now_ms;
            RETURN;
        END IF;
    END IF;
    granted := nextval('${table}_fence');
    INSERT INTO ${table}_holders AS h (name, owner, mode, permits, fence, holds, acquired_at, valid_until)
        VALUES (lock_name, lock_owner, lock_mode, lock_permits, granted, 1, now_ms, now_ms + ttl_ms)
        ON CONFLICT (name, owner) DO UPDATE SET mode = EXCLUDED.mode, permits = EXCLUDED.permits,
            fence = EXCLUDED.fence, holds = 1, acquired_at = EXCLUDED.acquired_at, valid_until = EXCLUDED.valid_until;
    IF NOT beside THEN
        UPDATE ${table} AS t SET
            acquired_at = CASE WHEN row_owner LIKE ':%' AND row_until > now_ms THEN t.acquired_at ELSE now_ms END,
            valid_until = GREATEST(CASE WHEN row_owner LIKE ':%' THEN row_until ELSE 0 END, now_ms + ttl_ms + slack),
            owner = summary, fence = granted, holds = 0, version = t.version + 1
            WHERE t.name = lock_name;
    END IF;
    fence := granted;
    remaining := ttl_ms;
END
$dblock$;

-- ${table}_release_shared(name, owner, fence) -> true when it was ours: deletes the holder
-- and brings the row's valid_until back to the latest live holder's (0 with none left), so a
-- waiting writer gets in as soon as the last reader goes; waiters are notified. Readers keep
-- the slack (see above) on top, or the next reader would have to extend the row again,
-- exclusively. Committed without waiting for the WAL flush, as the exclusive release
-- (pg_dialect.cpp says why).
CREATE FUNCTION ${table}_release_shared(lock_name text, lock_owner text, lock_fence bigint) RETURNS boolean
    LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $dblock$
DECLARE
    now_ms bigint := (extract(epoch from now()) * 1000)::bigint;
    latest bigint;
BEGIN
    PERFORM 1 FROM ${table} AS t WHERE t.name = lock_name AND t.owner LIKE ':%' FOR UPDATE;
    DELETE FROM ${table}_holders AS h
        WHERE h.name = lock_name AND h.owner = lock_owner AND h.fence = lock_fence AND h.mode <> 'w';
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    SELECT max(h.valid_until) INTO latest FROM ${table}_holders AS h
        WHERE h.name = lock_name AND h.mode <> 'w' AND h.valid_until > now_ms;
    UPDATE ${table} AS t SET version = t.version + 1, valid_until = CASE WHEN latest IS NULL THEN 0
            ELSE LEAST(t.valid_until, latest + CASE WHEN t.owner = ':readers' THEN 1000 ELSE 0 END) END
        WHERE t.name = lock_name AND t.owner LIKE ':%';
    PERFORM pg_notify('dblock_${table}', lock_name), set_config('synchronous_commit', 'off', true);
    RETURN true;
END
$dblock$;
