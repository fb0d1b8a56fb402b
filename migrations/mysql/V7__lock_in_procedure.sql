-- ${table}_lock_in(name, key, wait_ms): the lock `name` for the rest of the calling
-- transaction (dblock/mysql.hpp; README, "Protecting rows in the same database"). It holds
-- the name's row FOR UPDATE, as the for-update strategy and a lease's takeover need it, so
-- the commit, the rollback or the connection's end frees it. Answers one row: 1 when
-- locked, 0 when another transaction or a session lock kept the row past wait_ms (or an
-- advisory lock holds the name), -ms when a lease holds it for ms more.
--
-- The fence is not drawn here: raising ${table}_fence in the caller's transaction would
-- keep the counter row locked until that transaction ends, and every grant on the table
-- would wait for it (V3's cache compares against the counter, a shared lock under
-- REPEATABLE READ, the same). The client draws it on a connection of its own once this
-- answered 1, with ${table}_fence_draw, as the for-update strategy does (docs/ARCHITECTURE.md,
-- "Locks in the caller's transaction").
--
-- InnoDB keeps a row lock until the transaction ends, even when the row did not match or
-- a savepoint was rolled back to. A busy answer must leave nothing locked, or a lease holder's
-- renewals would wait behind the caller's transaction and its lease run out: so a lease is
-- looked for first with a plain (consistent) read, which locks nothing, and the row is
-- locked only when that read shows it free. (Under REPEATABLE READ that read is the
-- transaction's snapshot, which would not see the lease go: the client does not wait for it.) The locked read sees the latest committed row;
-- should it show a live lease after all (granted since the caller's transaction took its
-- snapshot), the row cannot be let go, and the procedure raises DL003: the caller must roll
-- back. A wait is the server's own, in whole seconds (innodb_lock_wait_timeout, set for the
-- call and put back); a shorter one is a try (timeout 0), which the client repeats.
-- A lock wait that times out rolls back only its statement unless innodb_rollback_on_timeout
-- is on; then it would roll back the caller's whole transaction, and the procedure refuses.
--
-- GET_LOCK is not transactional: an advisory holder of the name is seen (IS_USED_LOCK) and
-- waited out, but an advisory acquire does not see this lock. Do not mix the two on a name.
DELIMITER //

DROP PROCEDURE IF EXISTS ${table}_lock_in//

CREATE PROCEDURE ${table}_lock_in(IN p_name VARBINARY(255), IN p_key BIGINT, IN p_wait_ms BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
body: BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    DECLARE saved_wait BIGINT DEFAULT @@SESSION.innodb_lock_wait_timeout;
    DECLARE left_ms BIGINT DEFAULT NULL;
    DECLARE busy INT DEFAULT 0;
    IF @@GLOBAL.innodb_rollback_on_timeout THEN
        SIGNAL SQLSTATE 'DL004' SET MESSAGE_TEXT =
            'dblock: lock_in needs innodb_rollback_on_timeout = OFF (a busy try would roll back the whole transaction)';
    END IF;
    IF IS_USED_LOCK(CONCAT('dblock:', LPAD(HEX(p_key), 16, '0'))) IS NOT NULL THEN
        SELECT 0;
        LEAVE body;
    END IF;
    SELECT valid_until - now_ms INTO left_ms FROM ${table} WHERE name = p_name;
    IF left_ms > 0 THEN
        SELECT -left_ms;
        LEAVE body;
    END IF;
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1205 SET busy = 1;  -- lock wait timeout
        DECLARE EXIT HANDLER FOR SQLEXCEPTION
        BEGIN
            SET SESSION innodb_lock_wait_timeout = saved_wait;
            RESIGNAL;
        END;
        -- 0 is a try on MariaDB (what its NOWAIT sets, which procedures may not use);
        -- MySQL 8 raises it to its minimum, 1 s.
        SET SESSION innodb_lock_wait_timeout = p_wait_ms DIV 1000;
        IF left_ms IS NULL THEN
            -- No row seen: make it (an insert takes no gap lock another first lock_in could
            -- deadlock on). One made meanwhile by another is locked instead, waiting for it.
            INSERT INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version)
            VALUES (p_name, '', 0, 0, now_ms, 0, 0) ON DUPLICATE KEY UPDATE name = name;
        END IF;
        IF busy = 0 THEN
            SELECT valid_until - now_ms INTO left_ms FROM ${table} WHERE name = p_name FOR UPDATE;
        END IF;
        SET SESSION innodb_lock_wait_timeout = saved_wait;
    END;
    IF busy = 1 THEN
        SELECT 0;
    ELSEIF left_ms > 0 THEN
        SIGNAL SQLSTATE 'DL003' SET MESSAGE_TEXT =
            'dblock: the lock was leased after this transaction took its snapshot, and its row lock cannot be given back: roll back and try again';
    ELSE
        SELECT 1;
    END IF;
END//

DELIMITER ;
