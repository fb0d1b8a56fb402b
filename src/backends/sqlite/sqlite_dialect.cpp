// SQLite's statement texts. Every statement is one atomic write; the fence counter is
// advanced by triggers on the lock table (migrations/sqlite/V1__...), so an acquire stays a
// single statement. ${now_ms} is SQLite's clock, which is this host's.
#include "backends/sqlite/sqlite_dialect.hpp"

namespace dblock::detail::sql {

const Dialect& sqlite_dialect() {
  static const Dialect d = [] {
    using S = Statement;
    Dialect d;
    d.name = "sqlite";
    d.strategies = {Strategy::insert, Strategy::optimistic};
    // julianday('now') is fixed for the whole statement, so every use agrees.
    d.now_ms = "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)";

    d[S::holder] = "SELECT owner, valid_until - ${now_ms} FROM ${table} WHERE name = ?1 AND valid_until > ${now_ms}";
    d[S::renew] =
        "UPDATE ${table} SET valid_until = MAX(valid_until, ${now_ms} + ?4), version = version + 1 "
        "WHERE name = ?1 AND owner = ?2 AND fence = ?3 AND valid_until > ${now_ms} "
        "RETURNING valid_until - ${now_ms}";
    d[S::release_hold] =
        "UPDATE ${table} SET holds = holds - 1, version = version + 1 "
        "WHERE name = ?1 AND owner = ?2 AND fence = ?3 AND holds > 1";

    // Free or expired: a new grant with the next fence. Ours and unexpired: a re-entry that
    // keeps the fence and counts the hold. Anyone else's: no row.
    d[S::insert_acquire] =
        "INSERT INTO ${table} AS t (name, owner, fence, holds, acquired_at, valid_until, version) "
        "VALUES (?1, ?2, (SELECT value + 1 FROM ${table}_fence), 1, ${now_ms}, ${now_ms} + ?3, 1) "
        "ON CONFLICT (name) DO UPDATE SET "
        "fence = CASE WHEN t.valid_until > ${now_ms} THEN t.fence ELSE excluded.fence END, "
        "holds = CASE WHEN t.valid_until > ${now_ms} THEN t.holds + 1 ELSE 1 END, "
        "acquired_at = CASE WHEN t.valid_until > ${now_ms} THEN t.acquired_at ELSE excluded.acquired_at END, "
        "valid_until = CASE WHEN t.valid_until > excluded.valid_until THEN t.valid_until "
        "ELSE excluded.valid_until END, "
        "owner = excluded.owner, version = t.version + 1 "
        "WHERE t.valid_until <= ${now_ms} OR t.owner = excluded.owner "
        "RETURNING fence, valid_until - ${now_ms}";
    d[S::insert_release] = "DELETE FROM ${table} WHERE name = ?1 AND owner = ?2 AND fence = ?3 AND holds <= 1";

    d[S::optimistic_read] = "SELECT owner, version, valid_until - ${now_ms} FROM ${table} WHERE name = ?1";
    d[S::optimistic_take] =
        "UPDATE ${table} SET owner = ?2, fence = (SELECT value + 1 FROM ${table}_fence), holds = 1, "
        "acquired_at = ${now_ms}, valid_until = ${now_ms} + ?3, version = version + 1 "
        "WHERE name = ?1 AND version = ?4 AND valid_until <= ${now_ms} RETURNING fence, valid_until - ${now_ms}";
    d[S::optimistic_reenter] =
        "UPDATE ${table} SET holds = holds + 1, valid_until = MAX(valid_until, ${now_ms} + ?3), "
        "version = version + 1 "
        "WHERE name = ?1 AND version = ?4 AND owner = ?2 AND valid_until > ${now_ms} "
        "RETURNING fence, valid_until - ${now_ms}";
    d[S::optimistic_release] =
        "UPDATE ${table} SET owner = '', holds = 0, valid_until = 0, version = version + 1 "
        "WHERE name = ?1 AND owner = ?2 AND fence = ?3 AND holds <= 1 RETURNING version";

    d[S::list] =
        "SELECT name, owner, fence, holds, acquired_at, valid_until FROM ${table} "
        "WHERE valid_until > ${now_ms} ORDER BY name";
    d[S::sweep] =
        "DELETE FROM ${table} WHERE name IN "
        "(SELECT name FROM ${table} WHERE valid_until <= ${now_ms} LIMIT ?1)";
    d[S::force_release] = "DELETE FROM ${table} WHERE name = ?1 AND valid_until > ${now_ms}";
    // One writer at a time: a sweep batch holds the database's write lock for its DELETE and
    // commit, and the acquirers that find it taken poll (SqliteConnection's busy handler) rather
    // than queue. So a batch is at most 500 rows (a few ms) and the sweep pauses 10 ms after
    // each, several of the busy handler's polls, so that whoever found the batch running gets
    // in next (the measurements behind both numbers: docs/ARCHITECTURE.md, "Sweeping").
    d.sweep_batch_max = 500;
    d.sweep_pause = std::chrono::milliseconds(10);

    d[S::drop_schema] =
        "DROP TABLE IF EXISTS ${table}; DROP TABLE IF EXISTS ${table}_fence; DROP TABLE IF EXISTS ${table}_schema_history";
    d[S::history_create] =
        "CREATE TABLE IF NOT EXISTS ${table}_schema_history ("
        "installed_rank INTEGER NOT NULL PRIMARY KEY, version TEXT, description TEXT NOT NULL, "
        "type TEXT NOT NULL, script TEXT NOT NULL, checksum INTEGER, installed_by TEXT NOT NULL, "
        "installed_on TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')), "
        "execution_time INTEGER NOT NULL, success INTEGER NOT NULL)";
    d[S::history_select] =
        "SELECT version, script, checksum, success, installed_rank FROM ${table}_schema_history ORDER BY installed_rank";
    d[S::history_insert] =
        "INSERT INTO ${table}_schema_history (installed_rank, version, description, type, script, "
        "checksum, installed_by, execution_time, success) VALUES (?1, ?2, ?3, 'SQL', ?4, ?5, ?6, ?7, 1)";
    d.settings = sqlite_settings;
    d.check();
    return d;
  }();
  return d;
}

}  // namespace dblock::detail::sql
