// ClientCore's owner epochs (src/core/client_core.cpp, owner_for): after an acquire whose
// answer was lost, or a last release that failed, the server may still hold a grant for
// this thread's owner string that the core no longer tracks. The next acquire must not
// re-enter that leftover (same owner: the server would count a second hold and hand the
// old fence out again); it must wait for it like for anyone else's lease. The torture run
// found this around a PostgreSQL restart; this is its direct regression test, on a fake
// lease driver (core logic only: the real backends are covered by the contract suite).
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/client_core.hpp"
#include "core/url.hpp"
#include "dblock/errors.hpp"

using namespace std::chrono_literals;
using dblock::detail::AcquireRequest;
using dblock::detail::Attempt;
using dblock::detail::Clock;
using dblock::detail::Renewal;

namespace {

// An `insert`-like lease table in memory: re-entry by the same owner counts a hold; the
// faults are switched on by the test.
class FakeLeaseDriver : public dblock::detail::LockDriver {
 public:
  struct Row {
    std::string owner;
    std::uint64_t fence = 0;
    int holds = 0;
  };
  std::mutex m;
  std::map<std::string, Row> rows;
  std::uint64_t next_fence = 0;
  std::vector<std::string> owners_seen;  // the owner of every acquire attempt, in order
  bool lose_grant_answer = false;        // apply the grant, then fail as if the reply was lost
  bool releases_fail = false;            // every release fails as if the server were down

  Attempt try_acquire(const AcquireRequest& r) override {
    std::lock_guard lk(m);
    owners_seen.push_back(r.owner);
    auto& row = rows[r.name];
    if (row.holds > 0 && row.owner != r.owner) return Attempt{false, 0, 30s};
    if (row.holds > 0) ++row.holds;
    else row = Row{r.owner, ++next_fence, 1};
    if (lose_grant_answer) throw dblock::UnavailableError("fake: the reply to the grant was lost");
    return Attempt{true, row.fence, r.ttl};
  }
  Renewal renew(const std::string& name, const std::string& owner, std::uint64_t fence,
                std::chrono::milliseconds ttl) override {
    std::lock_guard lk(m);
    auto it = rows.find(name);
    bool ours = it != rows.end() && it->second.owner == owner && it->second.fence == fence;
    return Renewal{ours, ours ? ttl : 0ms};
  }
  bool release(const std::string& name, const std::string& owner, std::uint64_t fence) override {
    std::lock_guard lk(m);
    if (releases_fail) throw dblock::UnavailableError("fake: server down");
    auto it = rows.find(name);
    if (it == rows.end() || it->second.owner != owner || it->second.fence != fence || it->second.holds == 0)
      return false;
    if (--it->second.holds == 0) rows.erase(it);
    return true;
  }
  void expire(const std::string& name) {  // what the TTL does to a leftover
    std::lock_guard lk(m);
    rows.erase(name);
  }
};

class FakeBackend : public dblock::detail::Backend {
 public:
  std::string_view name() const noexcept override { return "fake"; }
  std::vector<dblock::Strategy> strategies() const override { return {dblock::Strategy::insert}; }
  std::unique_ptr<dblock::detail::LockDriver> make_driver(dblock::Strategy) override {
    return std::make_unique<FakeLeaseDriver>();
  }
  std::vector<std::string> migrate() override { return {}; }
  std::size_t sweep(std::size_t) override { return 0; }
  std::vector<dblock::LeaseInfo> list() override { return {}; }
  bool force_release(const std::string&) override { return false; }
  std::vector<dblock::SettingCheck> check_settings() override { return {}; }
};

struct Fixture {
  std::shared_ptr<dblock::detail::ClientCore> core;
  FakeLeaseDriver* driver;
  dblock::detail::LockSpec spec;

  Fixture() {
    dblock::ClientOptions options;
    options.statement_timeout = 200ms;  // how long a failing last release is retried
    core = std::make_shared<dblock::detail::ClientCore>(dblock::detail::parse_url("sqlite:unused.db"), options,
                                                        std::make_unique<FakeBackend>());
    driver = static_cast<FakeLeaseDriver*>(&core->driver(dblock::Strategy::insert));
    dblock::LockOptions lock_options;
    lock_options.ttl = 30s;  // no renewal fires during a test
    spec = dblock::detail::LockSpec{"job", lock_options, dblock::Strategy::insert, driver};
  }
  std::optional<dblock::Lease> try_acquire() { return core->acquire(core, spec, Clock::now()); }
};

}  // namespace

TEST_CASE("an acquire whose answer was lost is not re-entered by the next acquire", "[unit][owner]") {
  Fixture f;
  f.driver->lose_grant_answer = true;
  REQUIRE_THROWS_AS(f.try_acquire(), dblock::UnavailableError);
  REQUIRE(f.driver->rows.at("job").holds == 1);  // the server granted it: a leftover

  f.driver->lose_grant_answer = false;
  CHECK_FALSE(f.try_acquire());  // busy: the leftover is someone else's lease now
  REQUIRE(f.driver->owners_seen.size() == 2);
  CHECK(f.driver->owners_seen[1] != f.driver->owners_seen[0]);
  CHECK(f.driver->rows.at("job").holds == 1);  // not counted up as a re-entry

  f.driver->expire("job");  // the leftover's TTL ends
  auto lease = f.try_acquire();
  REQUIRE(lease);
  CHECK(lease->fence() == 2);  // a new grant, never the leftover's fence again
  lease->release();
  CHECK(f.driver->rows.empty());
}

TEST_CASE("a last release that failed is not re-entered by the next acquire", "[unit][owner]") {
  Fixture f;
  auto lease = f.try_acquire();
  REQUIRE(lease);
  CHECK(lease->fence() == 1);
  f.driver->releases_fail = true;
  REQUIRE_THROWS_AS(lease->release(), dblock::UnavailableError);  // after retrying ~200 ms
  f.driver->releases_fail = false;

  CHECK_FALSE(f.try_acquire());  // the row is still there, and no longer this thread's
  CHECK(f.driver->rows.at("job").holds == 1);
  f.driver->expire("job");
  auto next = f.try_acquire();
  REQUIRE(next);
  CHECK(next->fence() == 2);
  next->release();
}

TEST_CASE("a thread that holds a lock keeps its owner: re-entry still works", "[unit][owner]") {
  Fixture f;
  auto outer = f.try_acquire();
  REQUIRE(outer);
  auto inner = f.try_acquire();
  REQUIRE(inner);
  CHECK(inner->fence() == outer->fence());
  CHECK(f.driver->owners_seen[0] == f.driver->owners_seen[1]);
  inner->release();
  outer->release();
  CHECK(f.driver->rows.empty());
  auto again = f.try_acquire();  // a clean release keeps the owner string too
  REQUIRE(again);
  CHECK(f.driver->owners_seen.back() == f.driver->owners_seen.front());
  again->release();
}
