-- Fair waiting on the lease strategies (docs/ARCHITECTURE.md, "Fair waiting"). A waiter that
-- finds a name busy takes a ticket here and keeps it alive while it waits; a name is granted
-- only to the asker whose ticket is the lowest live one (or, when no ticket lives, to anyone).
-- A grant (a new fence on the name's row) deletes the winner's ticket in the same statement,
-- by the triggers below. A ticket lives keep_ms (a few seconds) unless its waiter renews it,
-- so a waiter that dies holds the queue up that long at most. Held locks are untouched.
CREATE TABLE ${table}_queue (
    name        TEXT    NOT NULL,
    owner       TEXT    NOT NULL,
    ticket      INTEGER NOT NULL,  -- lower goes first: drawn above the name's highest
    valid_until INTEGER NOT NULL,  -- ms on the database clock; renewed while the waiter waits
    PRIMARY KEY (name, owner)
);

CREATE TRIGGER ${table}_queue_served_on_insert AFTER INSERT ON ${table_name}
BEGIN
    DELETE FROM ${table_name}_queue WHERE name = NEW.name AND owner = NEW.owner;
END;

CREATE TRIGGER ${table}_queue_served_on_update AFTER UPDATE OF fence ON ${table_name}
BEGIN
    DELETE FROM ${table_name}_queue WHERE name = NEW.name AND owner = NEW.owner;
END;
