// Notifier: how a SQL backend tells waiters that a lock was freed, if it can. The lease
// drivers call released() after a release that freed the lock, with the owner whose turn is
// next where the release statement names it (Dialect::release_names_next), and hand watch()
// to the waiting loop.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/driver.hpp"
#include "core/wake_table.hpp"
#include "sql/connection.hpp"

namespace dblock::detail::sqldb {

class Notifier {
 public:
  virtual ~Notifier() = default;
  // `next`: the owner of the name's lowest live ticket, "" when nobody queues or unknown.
  virtual void released(const std::string& name, const std::string& next = {}) noexcept = 0;
  // Null: cannot now.
  virtual std::unique_ptr<ReleaseWatch> watch(const std::string& name, const std::string& owner) = 0;
  // The same, only if it costs nothing to make now (LockDriver::early_watch); null otherwise.
  virtual std::unique_ptr<ReleaseWatch> watch_if_ready(const std::string& name, const std::string& owner) {
    (void)name;
    (void)owner;
    return nullptr;
  }
  // Whether a release would reach this process's waiters now. Not while PostgreSQL's LISTEN
  // connection is away (a full server refused it): its waiters then poll as where nothing
  // notifies, or the head of a fair line would sleep through its turn.
  virtual bool hears() const noexcept { return true; }
  // A waiter's pool offers an idle connection, which the notifier takes (calls take_idle) if
  // it needs one to listen on and may lend it back, or closes if it listens already and the
  // pool may borrow its connection instead (PostgreSQL's listener).
  virtual void offer(const std::function<std::unique_ptr<Connection>()>& take_idle) { (void)take_idle; }
  // A connection to run statements on that shares the notifier's own (a Client's shared pool
  // asks before it connects); null when there is none or it is lent already.
  virtual std::unique_ptr<Connection> lend() { return nullptr; }
  // The notifier's own connection for one short read, even where pools may not share it
  // (through a transaction pooler it reaches the server itself: one hop less for a woken
  // waiter's confirmation); null when there is none free.
  virtual std::unique_ptr<Connection> lend_for_read() { return nullptr; }
  // A grant a release handed to `owner`'s watch of `name` (Statement::insert_handover), once.
  virtual std::optional<Handover> take_handover(const std::string& name, const std::string& owner) {
    (void)name;
    (void)owner;
    return std::nullopt;
  }
};

}  // namespace dblock::detail::sqldb
