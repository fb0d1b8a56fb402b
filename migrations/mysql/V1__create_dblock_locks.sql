-- dblock lock table for MySQL 8 and MariaDB 10.11 (InnoDB). ${table} is the lock table,
-- qualified with its database; ${table_name} the same without it (index names take none).

-- One row per lock name. Times are milliseconds since the Unix epoch on the server clock.
-- A row is held while valid_until is in the future; the sweeper deletes the others.
-- name and owner are VARBINARY, compared byte for byte: a utf8mb4 collation would fold
-- case ('Job' = 'job') and, in MariaDB's PAD SPACE collations, ignore trailing spaces
-- ('job' = 'job '), making two names one lock.
CREATE TABLE ${table} (
    name        VARBINARY(255) NOT NULL,  -- the lock name (1..255 bytes of UTF-8)
    owner       VARBINARY(512) NOT NULL,  -- host:pid:instance:thread; '' when free
    fence       BIGINT NOT NULL,          -- fencing token of the current grant
    holds       INT    NOT NULL,          -- re-entrant holds by the owner
    acquired_at BIGINT NOT NULL,
    valid_until BIGINT NOT NULL,
    version     BIGINT NOT NULL,          -- bumped by every change (optimistic)
    PRIMARY KEY (name),
    KEY ${table_name}_valid_until (valid_until)  -- the sweeper finds expired rows without a scan
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Fences: one counter row, bumped in the same transaction that grants a lock (or, for
-- session locks, in a committed transaction of its own once the lock is held). A committed
-- InnoDB row survives release, sweep, deleted lock rows, crashes and restarts on both
-- MySQL 8 and MariaDB; an AUTO_INCREMENT counter would not (before MySQL 8 and MariaDB
-- 10.2.4 it restarted from MAX(id) + 1, and MySQL 8 may reuse values lost in a crash).
CREATE TABLE ${table}_fence (
    id    TINYINT NOT NULL PRIMARY KEY,
    value BIGINT  NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

INSERT INTO ${table}_fence (id, value) VALUES (1, 0);
