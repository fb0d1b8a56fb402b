// Release notifications on PostgreSQL: releases run pg_notify('dblock_<table>', name) in
// the same statement (see pg_dialect.cpp). The process's ReleaseFeed (core/release_feed.hpp;
// one per process, server and channel, shared by the Clients on them, pg_backend.cpp) keeps
// one connection that LISTENs on that channel and wakes the waiters of the name; and on
// 'dblock handed <pid>', where a release that granted the name to the next waiter of this
// process says so (handover_channel). Started at the first wait, so uncontended clients open no extra
// connection.
//
// Where the listener reaches the same server as the Clients (no pooler between), its
// connection is also one of theirs: the first waiter gives it an idle connection of its pool
// to listen on (offer), and the pool borrows it back for statements (lend), one statement or
// transaction at a time, between the listener's reads. A waiting process so keeps one
// connection, not two. PostgreSQL holds a notification back while its listening session runs
// a statement, so a statement on the lent connection that waits in the server delays this
// process's wake-ups by as much: the lease statements wait at most a row lock's bound.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "core/release_feed.hpp"
#include "sql/connection.hpp"
#include "sql/notifier.hpp"

namespace dblock::detail::sqldb {

// The channel of hand-overs to this process's waiters, one for every table: "dblock handed
// <pid>" (a space: no table's release channel has one). The release names the pid from the
// head's owner (host:pid:instance:thread), so a hand-over wakes one process, not all; a
// process on another host with the same pid reads it and finds no waiter of that owner.
std::string handover_channel();

struct ListenSession;

class PgListener final : public Notifier {
 public:
  // `lends`: the Clients' pools reach the server `connect` does, and may share its connection.
  PgListener(std::function<std::unique_ptr<Connection>()> connect, std::string channel, bool lends);
  void released(const std::string&, const std::string&) noexcept override {}  // the release statement notified
  std::unique_ptr<ReleaseWatch> watch(const std::string& name, const std::string& owner) override {
    return feed_.watch(name, owner);  // null: cannot listen now
  }
  std::unique_ptr<ReleaseWatch> watch_if_ready(const std::string& name, const std::string& owner) override {
    return feed_.watch_if_live(name, owner);
  }
  std::optional<Handover> take_handover(const std::string& name, const std::string& owner) override {
    return feed_.take_handover(name, owner);
  }
  bool hears() const noexcept override { return feed_.live(); }
  void offer(const std::function<std::unique_ptr<Connection>()>& take_idle) override;
  std::unique_ptr<Connection> lend() override { return lends_ ? lend_for_read() : nullptr; }
  std::unique_ptr<Connection> lend_for_read() override;

 private:
  std::unique_ptr<Subscription> subscribe();

  const std::function<std::unique_ptr<Connection>()> connect_;
  const std::string channel_;
  const bool lends_;
  std::mutex mutex_;
  std::unique_ptr<Connection> offered_;     // for the next subscription to listen on
  std::weak_ptr<ListenSession> listening_;  // the subscription's, while it lives
  ReleaseFeed feed_;                        // last: its thread stops before the rest goes
};

}  // namespace dblock::detail::sqldb
