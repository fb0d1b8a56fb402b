// MySQL and MariaDB: what makes a committed grant survive a crash (InnoDB's redo log flush,
// and with a binary log its sync, which crash recovery trusts over InnoDB's own log), and
// the isolation dblock's statements run under. Read with @@ variables on one of dblock's
// own connections.
#include "backends/mysql/mysql_dialect.hpp"
#include "sql/settings.hpp"

namespace dblock::detail::sqldb {

namespace {

std::optional<std::string> variable(Connection& s, const std::string& name) {
  return read_setting(s, "SELECT @@" + name);
}

SettingCheck flush_log_check(Connection& s) {
  const std::string name = "innodb_flush_log_at_trx_commit";
  auto v = variable(s, "GLOBAL." + name);
  if (!v) return {name, "", Verdict::unknown, "could not be read"};
  if (*v == "1" || *v == "3")  // 3: MariaDB's name for 1 with the old group commit
    return {name, *v, Verdict::ok, "the redo log is flushed at every commit, so a crash loses no acknowledged grant"};
  if (*v == "2")
    return {name, *v, Verdict::weakens_exclusion,
            "an OS crash or power loss can lose about the last second of grants: their holders run on while the "
            "lock is free again, and their fences can be handed out again"};
  return {name, *v, Verdict::weakens_exclusion,
          "a server crash can lose about the last second of grants: their holders run on while the lock is free "
          "again, and their fences can be handed out again"};
}

SettingCheck sync_binlog_check(Connection& s) {
  const std::string name = "sync_binlog";
  auto log_bin = variable(s, "GLOBAL.log_bin");
  auto v = variable(s, "GLOBAL." + name);
  if (!log_bin || !v) return {name, v.value_or(""), Verdict::unknown, "could not be read"};
  bool binlog_on = *log_bin == "1" || *log_bin == "ON";
  std::string value = *v + " (log_bin " + (binlog_on ? "ON" : "OFF") + ")";
  if (!binlog_on) return {name, value, Verdict::ok, "no binary log: InnoDB's own log decides what survives a crash"};
  if (*v == "1") return {name, value, Verdict::ok, "the binary log is flushed at every commit"};
  return {name, value, Verdict::weakens_exclusion,
          "an OS crash can lose the binary log's last transactions: crash recovery then rolls back grants that "
          "were acknowledged, and replicas never see them"};
}

// dblock sets READ COMMITTED on its own connections (MySqlConnection), so the server's default
// does not reach its statements; this reports it, and what this connection actually runs.
SettingCheck isolation_check(Connection& s) {
  // MySQL 8 and MariaDB 11.1+ call it transaction_isolation, older MariaDB tx_isolation.
  std::string name = "transaction_isolation";
  auto configured = variable(s, "GLOBAL." + name);
  auto running = variable(s, "SESSION." + name);
  if (!configured) {
    name = "tx_isolation";
    configured = variable(s, "GLOBAL." + name);
    running = variable(s, "SESSION." + name);
  }
  return isolation_verdict(name, configured, running, "READ-COMMITTED",
                           "its statements may wait on gap locks or fail with deadlocks");
}

}  // namespace

std::vector<SettingCheck> mysql_settings(Connection& s) {
  return {flush_log_check(s), sync_binlog_check(s), isolation_check(s)};
}

}  // namespace dblock::detail::sqldb
