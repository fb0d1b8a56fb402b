// Schema changes after V1 come as V2, V3, ...: a later script, applied by the migrator over a
// table that V1 made and that holds locks, runs once, keeps every held lock held, and locking
// goes on after it, fences still increasing. The script is a test's own (each dialect's test
// writes one of the kinds a real V2 would be: a column added, a procedure, function or
// trigger replaced), handed to the migrator beside the embedded V1, so the upgrade path stays
// tested while migrations/ holds V1 alone.
#pragma once

#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/validate.hpp"
#include "dblock/dblock.hpp"
#include "sql/connection.hpp"
#include "sql/dialect.hpp"
#include "sql/migration_files.hpp"
#include "sql/migrator.hpp"

namespace dblock::test {

inline const std::string later_script = "V2__test_upgrade.sql";

// The embedded migrations of `dialect` and the test's own `later` text as V2.
inline std::vector<detail::sqldb::Migration> with_later(const detail::sqldb::Dialect& dialect,
                                                        const std::string& later) {
  auto files = detail::sqldb::embedded_migrations();
  files.push_back({dialect.name, later_script, later});
  return detail::sqldb::migrations_for(dialect.name, files);
}

// Applies them to `table` over `raw` (a connection of the test's own to its database).
inline std::vector<std::string> migrate_with(detail::sqldb::Connection& raw, const detail::sqldb::Dialect& dialect,
                                             const std::string& table, const std::string& later) {
  auto t = detail::parse_table_name(table);
  return detail::sqldb::migrate(raw, dialect.rendered(t), dialect, t, with_later(dialect, later), "test");
}

// `open` makes a Client on `table`, which it has migrated to V1.
inline void check_later_migration(const std::function<std::shared_ptr<Client>()>& open,
                                  detail::sqldb::Connection& raw, const detail::sqldb::Dialect& dialect,
                                  const std::string& table, const std::string& later) {
  auto c = open();
  auto held = c->lock("held").try_acquire();
  REQUIRE(held);
  auto reader = c->lock("read").try_acquire_shared();
  REQUIRE(reader);
  CHECK(migrate_with(raw, dialect, table, later) == std::vector<std::string>{later_script});
  CHECK(migrate_with(raw, dialect, table, later).empty());  // once
  CHECK(c->migrate().empty());  // a dblock that knows V1 alone finds nothing to do
  auto other = open();
  CHECK_FALSE(other->lock("held").try_acquire());  // still held
  CHECK_FALSE(other->lock("read").try_acquire());  // the reader too
  const auto fence = held->fence();
  held->release();
  auto next = other->lock("held").try_acquire();
  REQUIRE(next);
  CHECK(next->fence() > fence);
  auto second = other->lock("read").try_acquire_shared();
  REQUIRE(second);
  CHECK(second->fence() > reader->fence());
}

}  // namespace dblock::test
