// MySQL and MariaDB: what makes a committed grant survive a crash (InnoDB's redo log flush,
// and with a binary log its sync, which crash recovery trusts over InnoDB's own log) and a
// failover (semi-synchronous replicas), and the isolation dblock's statements run under. Read with @@ variables on one of dblock's
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

std::optional<std::string> status(Connection& s, const std::string& name) {  // any role reads these
  return read_setting(s, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = '" +
                             name + "'");
}

// A failover promotes a replica, and the lock table is what that replica had. With
// semi-synchronous replication a commit is acknowledged once a replica has it; an
// asynchronous replica (or semi-synchronous replication fallen back after its timeout) may
// lack the last grants, and MySQL has no timeline to keep their fences apart from the new
// primary's (docs/ARCHITECTURE.md, "MySQL and MariaDB"). MariaDB's Slaves_connected counts the
// replicas; MySQL 8 has no such status any role can read: unknown there.
SettingCheck replicas_check(Connection& s) {
  const std::string name = "replicas";
  auto log_bin = variable(s, "GLOBAL.log_bin");
  if (log_bin && *log_bin != "1" && *log_bin != "ON")
    return {name, "log_bin OFF", Verdict::ok, "no binary log: no replica streams from this server"};
  auto connected = status(s, "SLAVES_CONNECTED");
  if (!connected) return {name, "", Verdict::unknown, "could not be read (MariaDB's Slaves_connected status)"};
  if (*connected == "0") return {name, "0 connected", Verdict::ok, "no replica streams from this server"};
  auto semi_sync = status(s, "RPL_SEMI_SYNC_MASTER_STATUS");
  auto acknowledging = status(s, "RPL_SEMI_SYNC_MASTER_CLIENTS");
  auto wait_point = variable(s, "GLOBAL.rpl_semi_sync_master_wait_point");
  const std::string value = *connected + " connected, semi-synchronous " + semi_sync.value_or("OFF") + " (" +
                            acknowledging.value_or("0") + " acknowledging, " + wait_point.value_or("?") + ")";
  if (semi_sync == "ON" && acknowledging && *acknowledging != "0")
    return {name, value, Verdict::ok,
            "a grant is acknowledged once a replica has it, so a failover to that replica keeps every grant "
            "acknowledged"};
  return {name, value, Verdict::weakens_exclusion,
          "asynchronous replicas: a failover to one can lose the last grants acknowledged: their holders run on "
          "while the lock is free on the new primary, and their fences can be handed out again"};
}

// dblock sets READ COMMITTED on its own connections (MySqlConnection), so the server's default
// does not reach its statements; this reports it, and what this connection actually runs.
SettingCheck mysql_isolation_check(Connection& s) {
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
  return {flush_log_check(s), sync_binlog_check(s), replicas_check(s), mysql_isolation_check(s)};
}

}  // namespace dblock::detail::sqldb
