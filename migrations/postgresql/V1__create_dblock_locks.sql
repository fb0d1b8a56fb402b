-- dblock's schema for PostgreSQL: the lock table and what it needs. ${table} is the lock
-- table (optionally schema.table), ${table_name} the same without the schema (index names
-- take none). Later changes come as V2, V3, ... beside this file.
--
-- Times are milliseconds since the Unix epoch on the server's clock. dblock's statements are
-- texts sent by the client (src/backends/postgresql/pg_dialect.cpp) and the functions here:
-- what a single statement cannot do, and the lease strategies' hot statements (at the end),
-- whose plans the server keeps. An account that only locks needs SELECT, INSERT,
-- UPDATE and DELETE on the tables, USAGE and UPDATE on the sequence (setval, below), and
-- EXECUTE on the functions (granted to PUBLIC by default).

-- One row per lock name. A row is held while valid_until is in the future, or while the
-- Client row it names is valid (${table}_clients); the sweeper deletes the others, but for
-- rows a waiter marked (waited_until).
--
-- The waiters' mark: every acquire that waits for the name (fair or not, exclusive or shared)
-- writes waited_until on its row, now + a few seconds, and again while it waits. An unmarked
-- row has nobody to serve first and nobody to wake, so the lease strategies' uncontended grant
-- and release are single statements with no look at the queue and no notification
-- (pg_dialect.cpp, the *_unmarked statements); on a marked row they take nothing, and
-- ${table}_insert_acquire, ${table}_optimistic_take and ${table}_release do the full work. A
-- marked row is freed rather than deleted, so that the mark outlives the release.
CREATE TABLE ${table} (
    name        text COLLATE "C" NOT NULL PRIMARY KEY,  -- the lock name: bytes, compared as bytes
    owner       text    NOT NULL,  -- host:pid:instance:thread; '' when free; ':readers' or
                                   -- ':semaphore' when shared holders hold it
    fence       bigint  NOT NULL,  -- fencing token of the current grant
    holds       integer NOT NULL,  -- re-entrant holds by the owner; 0 when free, when kept after
                                   -- its release (hold_at_least) or shared
    acquired_at bigint  NOT NULL,
    valid_until bigint  NOT NULL,
    version     bigint  NOT NULL,  -- bumped by every change: the optimistic strategy's compare-and-set
    client      text COLLATE "C",  -- a renewed lease's Client row, or NULL
    waited_until bigint NOT NULL DEFAULT 0  -- someone waits for the name until then (the
                                            -- waiters' mark): see "The waiters' mark" below
);

-- The sweeper finds expired rows without scanning the table.
CREATE INDEX ${table_name}_valid_until ON ${table} (valid_until);
-- A Client's renewal reads back the leases its row keeps.
CREATE INDEX ${table_name}_client ON ${table} (client) WHERE client IS NOT NULL;

-- One row per Client and TTL whose leases it renews: a lease row naming it is held while
-- either is valid, so one write per tick keeps all of a Client's leases of that TTL (a row
-- per lease and tick wrote 20x more WAL). A Client row is only extended while still valid:
-- once expired, its leases may have been taken over, and it stays expired (ids are never
-- reused) until the sweeper deletes it. Every statement that gives a row to another owner,
-- frees it or keeps it after its release sets client to NULL.
CREATE TABLE ${table}_clients (
    id          text COLLATE "C" NOT NULL PRIMARY KEY,
    valid_until bigint NOT NULL
);

-- Fences: a sequence only grows, and nextval is never rolled back, so fences keep increasing
-- across release, sweep, deleted rows, crashes and restarts. Drawn through ${table}_fence_next.
CREATE SEQUENCE ${table}_fence AS bigint;

-- Shared holders of a name: a read/write lock's readers, a semaphore's holders, and the
-- marks of writers waiting behind readers. The name keeps its one row in ${table}, owned by
-- ':readers' or ':semaphore' (real owners never begin with ':') with holds 0, lasting at
-- least as long as every live holder here: an exclusive acquire meets that row and is busy
-- until it ends, as behind an exclusive holder, and ${table}_check (holds > 0) never takes
-- it for a grant. Every shaped grant and release locks that row first, which orders them
-- with each other and with the exclusive statements.
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

-- Fair waiting on the lease strategies: a waiter that finds a name busy takes a ticket and
-- keeps it alive while it waits; a name is granted only to the lowest live ticket (or, with
-- none, to anyone), the grant deletes the winner's ticket in the same statement, and a
-- release hands the name to the lowest ticket's owner. A ticket lives a few seconds unless
-- renewed, so a waiter that dies holds the queue up that long at most, and a lost ticket
-- only costs its place: hence UNLOGGED (no WAL, so joining costs no flush; after a crash or
-- on a promoted standby it starts empty).
CREATE UNLOGGED TABLE ${table}_queue (
    name        text COLLATE "C" NOT NULL,
    owner       text   NOT NULL,
    ticket      bigint NOT NULL,  -- when the waiter first found the name busy (us, server clock)
    valid_until bigint NOT NULL,  -- renewed while the waiter waits
    lease_ms    bigint NOT NULL,  -- the TTL the waiter asked for: what a hand-over grants it
    PRIMARY KEY (name, owner)
);

-- ${table}_fence_next(): the next fence, for every grant of every strategy. Fences stay
-- ahead across a promotion: a standby promoted without its primary's last WAL (an
-- asynchronous standby) has a sequence behind the fences its primary granted. The timeline
-- ID rises at every promotion, so a fence carries it in its high bits, as ZooKeeper's zxid
-- carries the leader's epoch. The first draw on a newer timeline moves the sequence up to
-- (timeline << 40) + its low bits, once (setval: hence UPDATE on the sequence), and every
-- draw after it is above. 40 bits leave 1.1e12 grants per timeline (3.5 years at 10 000 a
-- second; past that the count carries into the timeline's bits, still increasing), and
-- fences stay below 2^53, exact as a JSON number, for 8 191 timelines. The timeline is the
-- one WAL is written on now (a WAL file's name begins with it). The move is made under a
-- transaction lock in the two-int advisory key space (apart from the bigint keys every
-- strategy uses) and checked again under it, so two drawers that both saw an old timeline
-- move it once: a second setval could put the sequence below a fence already handed out.
CREATE FUNCTION ${table}_fence_next() RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $dblock$
DECLARE
    fence bigint := nextval('${table}_fence');
    timeline bigint := ('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::bigint;
BEGIN
    IF fence >> 40 < timeline THEN
        PERFORM pg_advisory_xact_lock(1684171883, hashtext('${table}'));  -- 'dblk'
        fence := nextval('${table}_fence');
        IF fence >> 40 < timeline THEN
            IF timeline >= 8388608 THEN
                RAISE EXCEPTION 'dblock: timeline % does not fit in a fence of ${table}', timeline;
            END IF;
            PERFORM setval('${table}_fence', (timeline << 40) + (fence & 1099511627775));
            fence := nextval('${table}_fence');
        END IF;
    END IF;
    RETURN fence;
END
$dblock$;

-- ${table}_lock_in(name, key, wait_ms): the lock `name` until the calling transaction ends
-- (LockTable::lock_in, dblock/postgresql.hpp). Answers the fence (> 0); 0 when another
-- transaction or a session lock kept it past wait_ms; -ms when a lease holds it for ms more.
-- It reads the clock with clock_timestamp(): now() is the caller's transaction start, which
-- may be long past. It excludes every strategy on this table:
--   1. pg_advisory_xact_lock(key): the advisory strategy's key (the client computes it), so
--      a session advisory lock on the name keeps us out, and we keep it out;
--   2. the name's turn, the transaction advisory lock the insert strategy's acquire tries
--      before it draws a fence: while we hold it, such an acquire answers busy instead of
--      drawing a fence it would be granted after ours;
--   3. the row FOR UPDATE, as the for-update strategy and every other lock_in take it, and
--      which a lease's takeover needs;
--   4. no live lease on the row (insert, optimistic, or one kept by hold_at_least).
-- Taken in this order, the insert acquire's (2 then 3): no deadlock between the two. With
-- wait_ms 0 every step is a try (no setting changed); otherwise the waits are the server's
-- own, bounded by lock_timeout, set for the inner block only. A busy attempt raises inside
-- the block, which rolls it back (its locks and its setting: the block is a
-- subtransaction), so the caller's transaction stays usable. The fence's WAL record is
-- flushed by the caller's commit: a fence whose transaction committed is never handed out
-- again; one whose transaction rolled back may be after a crash, but nothing it guarded in
-- the database was kept either.
CREATE FUNCTION ${table}_lock_in(lock_name text, lock_key bigint, wait_ms bigint) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $dblock$
DECLARE
    saved text;
    left_ms bigint;
BEGIN
    BEGIN
        IF wait_ms > 0 THEN
            saved := current_setting('lock_timeout');
            PERFORM set_config('lock_timeout', wait_ms || 'ms', true);
            PERFORM pg_advisory_xact_lock(lock_key);
            PERFORM pg_advisory_xact_lock(hashtextextended('${table}:' || lock_name, 0));
            SELECT ${until:t} - (extract(epoch from clock_timestamp()) * 1000)::bigint INTO left_ms
            FROM ${table} AS t WHERE t.name = lock_name FOR UPDATE OF t;
        ELSE
            IF NOT pg_try_advisory_xact_lock(lock_key)
               OR NOT pg_try_advisory_xact_lock(hashtextextended('${table}:' || lock_name, 0)) THEN
                RAISE EXCEPTION USING ERRCODE = '55P03';  -- lock_not_available: busy
            END IF;
            SELECT ${until:t} - (extract(epoch from clock_timestamp()) * 1000)::bigint INTO left_ms
            FROM ${table} AS t WHERE t.name = lock_name FOR UPDATE OF t NOWAIT;
        END IF;
        IF NOT FOUND THEN  -- the name's first lock: its row, locked by being ours uncommitted
            INSERT INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version)
            VALUES (lock_name, '', 0, 0, (extract(epoch from clock_timestamp()) * 1000)::bigint, 0, 0)
            ON CONFLICT (name) DO NOTHING;
            SELECT ${until:t} - (extract(epoch from clock_timestamp()) * 1000)::bigint INTO left_ms
            FROM ${table} AS t WHERE t.name = lock_name FOR UPDATE OF t;
        END IF;
        IF left_ms > 0 THEN
            RAISE EXCEPTION USING ERRCODE = 'DL002';  -- leased: undo the block, answer below
        END IF;
        IF saved IS NOT NULL THEN
            PERFORM set_config('lock_timeout', saved, true);
        END IF;
    EXCEPTION
        WHEN lock_not_available THEN RETURN 0;
        WHEN SQLSTATE 'DL002' THEN RETURN -left_ms;
    END;
    RETURN ${table}_fence_next();
END
$dblock$;

-- ${table}_check(name, fence): the fence check for the service's own transactions, for code
-- in any language: SELECT ${table}_check('job', 42) inside the transaction succeeds (answers
-- the fence) only while 42 is the current, unexpired holder's lease on 'job' (insert or
-- optimistic strategy: a session lock's row carries no fence), and keeps it so until the
-- transaction ends: the row is locked FOR SHARE, so no takeover, release or sweep of it
-- commits first (the holder's renewals wait for it too: keep such transactions short).
-- Otherwise it raises SQLSTATE DL001 naming the lock, and the transaction cannot commit.
-- (dblock's own check_in sends the same SELECT ... FOR SHARE without the function: a
-- PL/pgSQL call costs about as much as the check.)
CREATE FUNCTION ${table}_check(lock_name text, lock_fence bigint) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $dblock$
BEGIN
    PERFORM 1 FROM ${table} AS t
    WHERE t.name = lock_name AND t.fence = lock_fence AND t.holds > 0
      AND ${until:t} > (extract(epoch from clock_timestamp()) * 1000)::bigint
    FOR SHARE OF t;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'DL001',
            MESSAGE = format('dblock: lock %L is not held with fence %s (released, expired or taken over)',
                             lock_name, lock_fence);
    END IF;
    RETURN lock_fence;
END
$dblock$;

-- ${table}_acquire_shared(name, owner, mode, permits, ttl_ms) -> (fence, remaining): a
-- reader's (mode 's', permits 1) or a semaphore holder's (mode 'x', permits N) grant, on
-- the lease strategies. fence > 0: granted for remaining ms; 0: busy for remaining ms (0:
-- not known); the asker disagrees about what the name is (a usage error, not a wait): -1, a
-- semaphore of `remaining` permits holds it; -2, readers hold it; -3, an exclusive holder
-- (asked for a semaphore: readers wait for a writer).
-- The name's turn (the transaction advisory lock the insert acquire tries before it draws a
-- fence) is waited for, bounded, then the name's row is locked: from then on each statement
-- reads a snapshot taken after every other grant and release of the name committed. A
-- function, since a single statement reads one snapshot.
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
            SELECT t.owner, ${until:t} INTO row_owner, row_until FROM ${table} AS t
                WHERE t.name = lock_name FOR SHARE OF t;
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
        SELECT t.owner, ${until:t} INTO row_owner, row_until FROM ${table} AS t WHERE t.name = lock_name
            FOR UPDATE OF t;
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
    granted := ${table}_fence_next();
    INSERT INTO ${table}_holders AS h (name, owner, mode, permits, fence, holds, acquired_at, valid_until)
        VALUES (lock_name, lock_owner, lock_mode, lock_permits, granted, 1, now_ms, now_ms + ttl_ms)
        ON CONFLICT (name, owner) DO UPDATE SET mode = EXCLUDED.mode, permits = EXCLUDED.permits,
            fence = EXCLUDED.fence, holds = 1, acquired_at = EXCLUDED.acquired_at, valid_until = EXCLUDED.valid_until;
    IF NOT beside THEN
        UPDATE ${table} AS t SET
            acquired_at = CASE WHEN row_owner LIKE ':%' AND row_until > now_ms THEN t.acquired_at ELSE now_ms END,
            valid_until = GREATEST(CASE WHEN row_owner LIKE ':%' THEN row_until ELSE 0 END, now_ms + ttl_ms + slack),
            owner = summary, fence = granted, holds = 0, version = t.version + 1, client = NULL
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

-- The lease strategies' hot statements, as functions: PL/pgSQL keeps each statement's plan
-- for the server session, where a statement sent as text is parsed and planned at every call
-- (through a transaction pooler dblock cannot prepare by name: planning the grant took 0.4 ms
-- and more, running it 0.14 ms). pg_dialect.cpp calls them on every connection; now_ms is
-- the clock at the transaction's start.

-- ${table}_insert_acquire(name, owner, ttl_ms, ticket, wait_ms) -> (fence, remaining, holder):
-- the insert strategy's grant. fence > 0: granted for remaining ms; 0: busy, held by `holder`
-- for remaining ms. ticket: 0 asks unfairly, 9223372036854775807 fairly without a ticket,
-- else the asker's ticket in ${table}_queue (deleted with the grant). Who may grant a name,
-- and in which order fences are drawn:
-- - nextval in VALUES would run before the conflict check, so two acquires could draw 41
--   and 42 and be granted 42 first. Every grant of a name goes through here, and it draws
--   the fence only while holding a transaction advisory lock on the name (its turn): draws
--   and grants happen in one order.
-- - The turn is *tried*, not waited for, and only when the snapshot shows no live holder
--   other than us. The waiters one release wakes all race here; the losers fail the try and
--   write nothing (a failed ON CONFLICT DO UPDATE would lock the row, which costs a
--   transaction id and a WAL flush per loser), and go back to waiting for the next release.
-- - The row lock is waited for up to wait_ms (lock_timeout, for this transaction): another
--   transaction holding the row (a caller's check_in or lock_in, to its commit) makes the
--   attempt busy by the acquire's deadline instead of at the statement timeout.
-- - An owner taking over its own leftover waits for the turn instead (an attempt holds it
--   for one statement), so that it never fails because someone else just tried. But a
--   waiter with a ticket finding the row its own was granted it during this acquire (a
--   release handed it over, its message not read yet; an answer lost): that grant, fence and
--   all, is the answer, with no write (a new fence would not be the one the message names).
-- - A busy answer carries the holder's time left and name, so a waiter's attempt is one
--   round trip.
-- - Small statements, each run only when the step before calls for it, rather than one
--   statement holding every branch: the server initialises a statement's whole plan at each
--   call, and the one-statement form (the grant, the ticket's DELETE and the busy answer as
--   CTEs and a UNION) spent a quarter of its backend's time in ExecutorStart
--   (docs/ARCHITECTURE.md, PostgreSQL, has the figures).
CREATE FUNCTION ${table}_insert_acquire(lock_name text, lock_owner text, ttl_ms bigint, lock_ticket bigint,
                                        wait_ms bigint)
    RETURNS TABLE (fence bigint, remaining bigint, holder text)
    LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $dblock$
#variable_conflict use_column
DECLARE
    now_ms bigint := (extract(epoch from now()) * 1000)::bigint;
    row_owner text;
    row_until bigint;
    row_fence bigint;
    ahead boolean;
BEGIN
    PERFORM set_config('lock_timeout', wait_ms || 'ms', true);
    SELECT t.owner, ${until:t}, t.fence,
           EXISTS (SELECT 1 FROM ${table}_queue AS q WHERE q.name = lock_name AND q.ticket < lock_ticket
                   AND q.owner <> lock_owner AND q.valid_until > now_ms)
      INTO row_owner, row_until, row_fence, ahead
      FROM (SELECT 1) AS one LEFT JOIN ${table} AS t ON t.name = lock_name;
    IF row_until > now_ms AND row_owner <> lock_owner THEN
        fence := 0; remaining := row_until - now_ms; holder := row_owner;
        RETURN NEXT;
        RETURN;
    END IF;
    IF row_until > now_ms AND lock_ticket BETWEEN 1 AND 9223372036854775806 THEN  -- handed to us
        fence := row_fence; remaining := row_until - now_ms; holder := '';
        RETURN NEXT;
        RETURN;
    END IF;
    IF row_until > now_ms THEN  -- our own leftover
        PERFORM pg_advisory_xact_lock(hashtextextended('${table}:' || lock_name, 0));
    ELSIF ahead OR NOT pg_try_advisory_xact_lock(hashtextextended('${table}:' || lock_name, 0)) THEN
        fence := 0; remaining := COALESCE(row_until - now_ms, 0); holder := COALESCE(row_owner, '');
        RETURN NEXT;
        RETURN;
    END IF;
    INSERT INTO ${table} AS t (name, owner, fence, holds, acquired_at, valid_until, version)
    VALUES (lock_name, lock_owner, ${table}_fence_next(), 1, now_ms, now_ms + ttl_ms, 1)
    ON CONFLICT (name) DO UPDATE SET fence = EXCLUDED.fence, holds = 1, acquired_at = EXCLUDED.acquired_at,
        valid_until = EXCLUDED.valid_until, owner = EXCLUDED.owner, version = t.version + 1, client = NULL
    WHERE ${until:t} <= now_ms OR (t.owner = EXCLUDED.owner AND t.holds > 0)
    RETURNING t.fence, t.valid_until - now_ms INTO fence, remaining;
    IF fence IS NULL THEN  -- a grant committed since our read: answer it
        SELECT 0, COALESCE(${until:busy} - now_ms, 0), COALESCE(busy.owner, '') INTO fence, remaining, holder
          FROM (SELECT 1) AS one LEFT JOIN ${table} AS busy ON busy.name = lock_name;
        RETURN NEXT;
        RETURN;
    END IF;
    IF lock_ticket BETWEEN 1 AND 9223372036854775806 THEN
        DELETE FROM ${table}_queue AS q WHERE q.name = lock_name AND q.owner = lock_owner;
    END IF;
    holder := '';
    RETURN NEXT;
END
$dblock$;

-- ${table}_optimistic_take(name, owner, ttl_ms, version, ticket, wait_ms) -> (fence,
-- remaining, holder): the optimistic strategy's compare-and-set of the row it read at
-- `version`. The waiters one release wakes all read the same free version and race to take
-- it; an UPDATE that loses that race waits for the winner's row lock and then locks the row
-- itself to recheck it, which costs it a transaction id and a WAL flush. So the take first
-- tries the name's turn, as ${table}_insert_acquire does (only on a row that still looks
-- free), and a loser writes nothing. A busy answer says why: fence 0 with the holder's time
-- left; 0 when someone else is taking the row right now (their release will notify); -1 when
-- the row is free and nobody holds the turn (the version moved: read again).
CREATE FUNCTION ${table}_optimistic_take(lock_name text, lock_owner text, ttl_ms bigint, read_version bigint,
                                         lock_ticket bigint, wait_ms bigint)
    RETURNS TABLE (fence bigint, remaining bigint, holder text)
    LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $dblock$
#variable_conflict use_column
DECLARE
    now_ms bigint := (extract(epoch from now()) * 1000)::bigint;
    row_owner text;
    row_until bigint;
    row_version bigint;
    ahead boolean;
BEGIN
    PERFORM set_config('lock_timeout', wait_ms || 'ms', true);
    SELECT t.owner, ${until:t}, t.version,
           EXISTS (SELECT 1 FROM ${table}_queue AS q WHERE q.name = lock_name AND q.ticket < lock_ticket
                   AND q.owner <> lock_owner AND q.valid_until > now_ms)
      INTO row_owner, row_until, row_version, ahead
      FROM (SELECT 1) AS one LEFT JOIN ${table} AS t ON t.name = lock_name;
    fence := 0;
    holder := COALESCE(row_owner, '');
    IF row_until > now_ms THEN
        remaining := row_until - now_ms;
    ELSIF ahead OR NOT pg_try_advisory_xact_lock(hashtextextended('${table}:' || lock_name, 0)) THEN
        remaining := 0;
    ELSIF row_version IS DISTINCT FROM read_version THEN
        remaining := -1;
    ELSE
        UPDATE ${table} AS t SET owner = lock_owner, fence = ${table}_fence_next(), holds = 1, acquired_at = now_ms,
            valid_until = now_ms + ttl_ms, version = t.version + 1, client = NULL
        WHERE t.name = lock_name AND t.version = read_version AND ${until:t} <= now_ms
        RETURNING t.fence, t.valid_until - now_ms INTO fence, remaining;
        IF fence IS NULL THEN  -- changed since our read, and the turn is ours: read again
            fence := 0;
            remaining := -1;
        ELSE
            holder := '';
            IF lock_ticket BETWEEN 1 AND 9223372036854775806 THEN
                DELETE FROM ${table}_queue AS q WHERE q.name = lock_name AND q.owner = lock_owner;
            END IF;
        END IF;
    END IF;
    RETURN NEXT;
END
$dblock$;

-- ${table}_release(name, owner, fence, keep_row, hand_over) -> the version the row was left at
-- (0 when deleted), -1 when it handed the row over; no row when the grant was not ours.
-- A lease's release: its row deleted (insert) or freed with its version moved (optimistic,
-- keep_row, and a row a waiter marked), expiring now, not at 0 (the sweeper picks rows in
-- valid_until order). Committed
-- without waiting for its WAL flush (synchronous_commit off for this transaction only); the
-- waiters are notified at the commit, so a hand-off costs one flush (the grant's), not two.
-- No guarantee depends on the release's flush: WAL is flushed in order, so the next grant's
-- commit, which saw the release, is durable only together with it. A crash can only lose a
-- release nobody built on yet, and then the row comes back held by its old owner until its
-- TTL: exactly a client that died before releasing. The notification's payload is the name
-- and, after a newline, the owner whose ticket comes next (empty when nobody queues): only
-- that waiter is woken.
-- hand_over: the release of a grant made after waiting. With a live ticket of another owner
-- in the name's queue, it grants the row to the lowest instead: new fence, the lease that
-- waiter asked for (its TTL, lease_ms: a hand-over survives a stall as well as any grant),
-- the ticket deleted, and the grant announced on the channel of hand-overs as
-- "FENCE LEASE_MS TICKET OWNER_BYTES OWNER NAME" (one channel for every table, as an owner
-- names one Client of one table; the ticket says which of the owner's acquires it was for).
-- The ticket is deleted first and the row granted only if that DELETE returned it: a waiter
-- that gave up deleted its ticket first, or waits for this commit and then frees the row
-- handed to it (handed_free in pg_dialect.cpp). Not to the releaser's own ticket: a renewal
-- crossing the hand-over that granted it writes it back. It commits synchronously, as every
-- grant does (its fence must not be lost in a crash), and draws its fence without the name's
-- turn: the row stays locked from our grant to the head's, so no other grant of the name can
-- draw meanwhile. With no live ticket it releases as above, its notification naming nobody
-- next. It also deletes any ticket of the releaser's own: an owner is one thread of one
-- Client, so a ticket of ours while we hold the name is a renewal that crossed the hand-over
-- that granted it to us (its snapshot predated that commit). Left, it would put a waiter
-- nobody is in the line ahead of every later one.
CREATE FUNCTION ${table}_release(lock_name text, lock_owner text, lock_fence bigint, keep_row boolean,
                                 hand_over boolean)
    RETURNS SETOF bigint
    LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $dblock$
DECLARE
    now_ms bigint := (extract(epoch from now()) * 1000)::bigint;
    next_owner text;
    next_ticket bigint;
    next_lease bigint;
    handed bigint;
    left_version bigint := 0;
BEGIN
    IF hand_over THEN
        WITH head AS (
            SELECT q.owner, q.ticket FROM ${table}_queue AS q
            WHERE q.name = lock_name AND q.owner <> lock_owner AND q.valid_until > now_ms
              AND EXISTS (SELECT 1 FROM ${table} AS o
                          WHERE o.name = lock_name AND o.owner = lock_owner AND o.fence = lock_fence)
            ORDER BY q.ticket LIMIT 1)
        DELETE FROM ${table}_queue AS q USING head
            WHERE q.name = lock_name AND q.owner = head.owner AND q.ticket = head.ticket
            RETURNING q.owner, q.ticket, q.lease_ms INTO next_owner, next_ticket, next_lease;
        DELETE FROM ${table}_queue AS q WHERE q.name = lock_name AND q.owner = lock_owner;
        IF next_owner IS NOT NULL THEN
            UPDATE ${table} AS t SET owner = next_owner, fence = ${table}_fence_next(), holds = 1,
                acquired_at = now_ms, valid_until = now_ms + next_lease, version = t.version + 1, client = NULL
                WHERE t.name = lock_name AND t.owner = lock_owner AND t.fence = lock_fence
                RETURNING t.fence INTO handed;
            IF handed IS NULL THEN
                RETURN;
            END IF;
            -- On the channel of the head's process ('dblock handed <pid>', the pid from its
            -- owner, host:pid:instance:thread): only that process's listener wakes, not
            -- every waiting process's (each NOTIFY wakes every listening backend and client).
            PERFORM pg_notify('dblock handed' || COALESCE(' ' || substring(next_owner from ':([0-9]+):[^:]*:[^:]*$'), ''),
                              handed || ' ' || next_lease || ' ' || next_ticket || ' ' ||
                              octet_length(next_owner) || ' ' || next_owner || lock_name);
            RETURN NEXT -1;
            RETURN;
        END IF;
    END IF;
    IF NOT keep_row THEN
        DELETE FROM ${table} AS t WHERE t.name = lock_name AND t.owner = lock_owner AND t.fence = lock_fence
            AND t.waited_until <= now_ms;
    END IF;
    IF keep_row OR NOT FOUND THEN  -- kept, or marked: freed, so that the mark stays
        UPDATE ${table} AS t SET owner = '', holds = 0, valid_until = now_ms, version = t.version + 1, client = NULL
            WHERE t.name = lock_name AND t.owner = lock_owner AND t.fence = lock_fence
            RETURNING CASE WHEN keep_row THEN t.version ELSE 0 END INTO left_version;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    PERFORM pg_notify('dblock_${table}', lock_name || E'\n' || CASE WHEN hand_over THEN '' ELSE
                      COALESCE((SELECT q.owner FROM ${table}_queue AS q WHERE q.name = lock_name
                                AND q.valid_until > now_ms ORDER BY q.ticket LIMIT 1), '') END),
            set_config('synchronous_commit', 'off', true);
    RETURN NEXT left_version;
END
$dblock$;

-- ${table}_queue_join(name, owner, ticket_ms, ticket, lease_ms, wait_ms) -> ticket: a waiter's
-- ticket, taken (ticket 0: the server's clock in us now) or renewed (its own ticket written
-- back, so even a swept one keeps its place), alive for ticket_ms. A renewal after a release
-- handed the row to its owner (and deleted the ticket) is not written back: the ticket would
-- outlive the acquire it was for, holding up other owners' grants for its life. It answers
-- no row then, and the waiter keeps its ticket for the hand-over's message or a grant that
-- takes the row as its own leftover. (A renewal whose snapshot predates the release's
-- commit still writes it back.)
CREATE FUNCTION ${table}_queue_join(lock_name text, lock_owner text, ticket_ms bigint, lock_ticket bigint,
                                    lease bigint, wait_ms bigint)
    RETURNS SETOF bigint
    LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $dblock$
DECLARE
    now_ms bigint := (extract(epoch from now()) * 1000)::bigint;
BEGIN
    PERFORM set_config('lock_timeout', wait_ms || 'ms', true);
    RETURN QUERY
    INSERT INTO ${table}_queue AS q (name, owner, ticket, valid_until, lease_ms)
    SELECT lock_name, lock_owner,
           CASE WHEN lock_ticket = 0 THEN (extract(epoch from clock_timestamp()) * 1000000)::bigint ELSE lock_ticket END,
           now_ms + ticket_ms, lease
    WHERE lock_ticket = 0 OR NOT EXISTS (SELECT 1 FROM ${table} AS t WHERE t.name = lock_name
                                         AND t.owner = lock_owner AND t.holds > 0 AND ${until:t} > now_ms)
    ON CONFLICT (name, owner) DO UPDATE SET ticket = EXCLUDED.ticket, valid_until = EXCLUDED.valid_until,
        lease_ms = EXCLUDED.lease_ms
    RETURNING q.ticket;
END
$dblock$;
