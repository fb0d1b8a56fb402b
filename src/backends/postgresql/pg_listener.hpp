// Release notifications on PostgreSQL: releases run pg_notify('dblock_<table>', name) in
// the same statement (see pg_dialect.cpp). The process's ReleaseFeed (core/release_feed.hpp;
// one per process, server and channel, shared by the Clients on them, pg_backend.cpp) keeps
// one connection that LISTENs on that channel and wakes the waiters of the name; and on
// 'dblock handed', where a release that granted the name to the next waiter says so
// (handover_channel). Started at the first wait, so uncontended clients open no extra
// connection.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/release_feed.hpp"
#include "sql/connection.hpp"
#include "sql/notifier.hpp"

namespace dblock::detail::sqldb {

// The channel of hand-overs, one for every table: the owner a hand-over names is one Client's,
// of one table (a space: no table's release channel has one).
inline const std::string handover_channel = "dblock handed";

class PgListener final : public Notifier {
 public:
  PgListener(std::function<std::unique_ptr<Connection>()> connect, std::string channel);
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

 private:
  ReleaseFeed feed_;
};

}  // namespace dblock::detail::sqldb
