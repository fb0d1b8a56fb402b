-- Locks held by the caller's own transaction, and fences the database checks (README,
-- "Protecting rows in the same database"). Both functions run inside the caller's
-- transaction and read the clock with clock_timestamp(): now() would be that transaction's
-- start, which may be long past.

-- ${table}_lock_in(name, key, wait_ms): the lock `name` until the calling transaction ends.
-- Answers the fence (> 0); 0 when another transaction or a session lock kept it past wait_ms;
-- -ms when a lease holds it for ms more. It excludes every strategy on this table:
--   1. pg_advisory_xact_lock(key): the advisory strategy's key (the client computes it), so
--      a session advisory lock on the name keeps us out, and we keep it out;
--   2. the transaction advisory lock the insert strategy's acquire tries before it draws a
--      fence: while we hold it, such an acquire answers busy instead of drawing a fence it
--      would be granted after ours;
--   3. the row FOR UPDATE, as the for-update strategy and every other lock_in take it, and
--      which a lease's takeover needs;
--   4. no live lease on the row (insert, optimistic, or one kept by hold_at_least).
-- Taken in this order, the insert acquire's (2 then 3): no deadlock between the two. With
-- wait_ms 0 every step is a try (the uncontended path: no setting changed); otherwise the
-- waits are the server's own, bounded by lock_timeout, set for the inner block only. A
-- busy attempt raises inside the block, which rolls it back (its locks and its setting: the
-- block is a subtransaction), so the caller's transaction stays usable.
-- The fence comes from the same sequence as every grant on this table. nextval is not rolled
-- back; its WAL record is flushed by the caller's commit, so a fence whose transaction
-- committed is never handed out again, while one whose transaction rolled back may be after
-- a crash: nothing it guarded in the database was kept either.
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
            SELECT valid_until - (extract(epoch from clock_timestamp()) * 1000)::bigint INTO left_ms
            FROM ${table} WHERE name = lock_name FOR UPDATE;
        ELSE
            IF NOT pg_try_advisory_xact_lock(lock_key)
               OR NOT pg_try_advisory_xact_lock(hashtextextended('${table}:' || lock_name, 0)) THEN
                RAISE EXCEPTION USING ERRCODE = '55P03';  -- lock_not_available: busy
            END IF;
            SELECT valid_until - (extract(epoch from clock_timestamp()) * 1000)::bigint INTO left_ms
            FROM ${table} WHERE name = lock_name FOR UPDATE NOWAIT;
        END IF;
        IF NOT FOUND THEN  -- the name's first lock: its row, locked by being ours uncommitted
            INSERT INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version)
            VALUES (lock_name, '', 0, 0, (extract(epoch from clock_timestamp()) * 1000)::bigint, 0, 0)
            ON CONFLICT (name) DO NOTHING;
            SELECT valid_until - (extract(epoch from clock_timestamp()) * 1000)::bigint INTO left_ms
            FROM ${table} WHERE name = lock_name FOR UPDATE;
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
    RETURN nextval('${table}_fence');
END
$dblock$;

-- ${table}_check(name, fence): succeeds (answers the fence) only while `fence` is the current,
-- unexpired holder's lease on `name`, and keeps it so until the calling transaction ends: the
-- row is locked FOR SHARE, so no takeover, release or sweep of it commits first (the holder's
-- renewals wait for it too: keep such transactions short). Otherwise it raises SQLSTATE DL001
-- naming the lock, and the transaction cannot commit. For lease strategies (insert,
-- optimistic): a session lock's row carries no fence. (dblock's own check_in sends the same
-- SELECT ... FOR SHARE without the function: a PL/pgSQL call costs more than the check.)
CREATE FUNCTION ${table}_check(lock_name text, lock_fence bigint) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $dblock$
BEGIN
    PERFORM 1 FROM ${table}
    WHERE name = lock_name AND fence = lock_fence AND holds > 0
      AND valid_until > (extract(epoch from clock_timestamp()) * 1000)::bigint
    FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'DL001',
            MESSAGE = format('dblock: lock %L is not held with fence %s (released, expired or taken over)',
                             lock_name, lock_fence);
    END IF;
    RETURN lock_fence;
END
$dblock$;
