-- The fence check for code that is not C++ (README, "Protecting rows in the same database"),
-- as a guard table whose trigger raises: inside a write transaction,
--     INSERT INTO ${table}_check (name, fence) VALUES ('job', 42);
-- stores nothing and succeeds only while 42 is the current, unexpired holder's lease on
-- 'job'; otherwise it aborts with "dblock: ...", and the transaction must roll back. The
-- insert makes the transaction a writer, and SQLite has one writer at a time: no takeover,
-- release or sweep of the lease commits before the caller's transaction ends.
-- (SQLite has no stored procedures; a trigger is the one place SQL can raise from.)
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
