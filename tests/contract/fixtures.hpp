// The backend x strategy combinations the contract suite runs against. A later backend
// adds its fixtures here (and to DBLOCK_CONTRACT_FIXTURES), nothing else.
//
// A fixture makes a fresh lock namespace per test (a new SQLite file; on a server, a new
// table) and tells what the strategy promises where strategies differ.
#pragma once

#include <memory>
#include <string>

#include "dblock/dblock.hpp"
#include "support/temp_dir.hpp"

namespace dblock::test {

struct Namespace {
  std::string url;
  ClientOptions options;
  std::shared_ptr<Client> open() const { return Client::open(url, options); }
};

struct SqliteFixture {
  static constexpr bool lease_based = true;  // freed by TTL, not by a dropped session
  TempDir dir;
  Namespace make() const { return Namespace{"sqlite:" + dir.path() + "/locks.db", ClientOptions{}}; }
};

struct SqliteInsert : SqliteFixture {
  static constexpr const char* label = "sqlite/insert";
  static constexpr Strategy strategy = Strategy::insert;
};

struct SqliteOptimistic : SqliteFixture {
  static constexpr const char* label = "sqlite/optimistic";
  static constexpr Strategy strategy = Strategy::optimistic;
};

}  // namespace dblock::test

// Every fixture the contract suite runs against (a macro so that test names say which).
#define DBLOCK_CONTRACT_FIXTURES dblock::test::SqliteInsert, dblock::test::SqliteOptimistic
