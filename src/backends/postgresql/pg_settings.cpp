// PostgreSQL: what makes a committed grant survive a crash (fsync, synchronous_commit) and a
// failover (synchronous standbys), and the isolation dblock's statements run under. Read with current_setting() on one of
// dblock's own connections.
#include "backends/postgresql/pg_dialect.hpp"
#include "sql/settings.hpp"

namespace dblock::detail::sqldb {

namespace {

std::optional<std::string> current(Connection& s, const std::string& name) {
  return read_setting(s, "SELECT current_setting('" + name + "')");
}

SettingCheck fsync_check(Connection& s) {
  auto v = current(s, "fsync");
  if (!v) return {"fsync", "", Verdict::unknown, "could not be read"};
  if (*v == "off")
    return {"fsync", *v, Verdict::breaks_exclusion,
            "an OS crash or power loss can corrupt the database: the lock table and fence counters with it"};
  return {"fsync", *v, Verdict::ok, "commits are flushed to disk, so a crash loses no acknowledged grant"};
}

SettingCheck synchronous_commit_check(Connection& s) {
  auto v = current(s, "synchronous_commit");
  if (!v) return {"synchronous_commit", "", Verdict::unknown, "could not be read"};
  if (*v == "off")
    return {"synchronous_commit", *v, Verdict::weakens_exclusion,
            "a server crash can lose the last grants acknowledged (up to 3 x wal_writer_delay): their holders "
            "run on while the lock is free again, and their fences can be handed out again"};
  if (*v == "local") {
    auto standbys = current(s, "synchronous_standby_names");
    if (standbys && standbys->empty())
      return {"synchronous_commit", *v, Verdict::ok,
              "a grant is on local disk before dblock hears it committed (no synchronous standby is configured)"};
    return {"synchronous_commit", *v, Verdict::weakens_exclusion,
            "a grant is not waited for on the synchronous standbys: a failover can lose the last grants, whose "
            "holders run on while the lock is free on the new primary"};
  }
  // on, remote_write, remote_apply
  return {"synchronous_commit", *v, Verdict::ok, "a grant is on disk before dblock hears it committed"};
}

// A failover promotes a standby, and the lock table is what that standby had. A synchronous
// one has every grant dblock heard committed (with synchronous_commit at on, remote_write or
// remote_apply: the check above); an asynchronous one may lack the last. pg_stat_replication
// shows its rows (not their sync_state) to any role.
SettingCheck standbys_check(Connection& s) {
  auto streaming = read_setting(s, "SELECT count(*) FROM pg_stat_replication");
  auto names = current(s, "synchronous_standby_names");
  if (!streaming || !names) return {"standbys", "", Verdict::unknown, "could not be read"};
  const std::string value = *streaming + " streaming, synchronous_standby_names = '" + *names + "'";
  if (*streaming == "0") return {"standbys", value, Verdict::ok, "no standby streams from this server"};
  if (names->empty())
    return {"standbys", value, Verdict::weakens_exclusion,
            "asynchronous standbys: a failover to one can lose the last grants acknowledged: their holders run "
            "on while the lock is free on the new primary (fences still increase: they carry the timeline)"};
  return {"standbys", value, Verdict::ok,
          "a grant waits for a synchronous standby, so a failover to it keeps every grant acknowledged"};
}

// dblock sets READ COMMITTED on its own connections (PgConnection): its upserts rely on seeing
// the row another transaction just committed, where REPEATABLE READ and SERIALIZABLE would
// fail them with serialization errors. So the server's or role's default does not reach
// dblock; this reports it, and what this connection actually runs.
SettingCheck pg_isolation_check(Connection& s) {
  const std::string name = "default_transaction_isolation";
  auto configured = read_setting(s, "SELECT reset_val FROM pg_settings WHERE name = '" + name + "'");
  auto running = current(s, "transaction_isolation");
  return isolation_verdict(name, configured, running, "read committed",
                           "its statements may fail with serialization errors");
}

}  // namespace

std::vector<SettingCheck> postgresql_settings(Connection& s) {
  return {fsync_check(s), synchronous_commit_check(s), standbys_check(s), pg_isolation_check(s)};
}

}  // namespace dblock::detail::sqldb
