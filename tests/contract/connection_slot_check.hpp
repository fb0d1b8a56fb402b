// A server with no connection slot free for the Client's account (issue 47: a fleet of cron
// jobs started together), for the PostgreSQL, MariaDB and Redis tests: an acquire that may wait asks
// again until a slot frees; one that may not, or whose wait ends first, fails as unavailable
// (not busy) with the server's refusal in its message. `url`'s account may open a few
// connections (a role's CONNECTION LIMIT, MySQL's max_user_connections); `refusal` is a part
// of the server's text for it; `o` names a migrated lock table the account may use.
#pragma once

#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dblock/dblock.hpp"
#include "support/servers.hpp"

namespace dblock::test {

// `drop_sessions` ends every connection of the account (an administrator's kill) and returns
// once the server no longer counts them. Client::open succeeds with no slot free (it asks
// nothing of the server but a connection, which waits for the first acquire). `squat` opens one
// connection of the account, kept until the result is destroyed, and throws the server's
// refusal when it is full (by default a SQL session, server_connection).
using Squatter = std::shared_ptr<void>;
inline void check_waits_for_a_connection_slot(const std::string& url, const std::string& refusal, const ClientOptions& o,
                                              const std::function<void()>& drop_sessions,
                                              std::function<Squatter()> squat = {}) {
  if (!squat) squat = [&url] { return Squatter(server_connection(url)); };
  using namespace std::chrono_literals;
  auto client = Client::open(url, o);
  drop_sessions();  // the Client's idle connection with them: its next acquire connects anew
  std::vector<Squatter> squatters;  // every slot of the account
  for (int i = 0; i < 20; ++i) {
    try {
      squatters.push_back(squat());
    } catch (const std::exception& e) {
      CHECK_THAT(e.what(), Catch::Contains(refusal));
      break;
    }
  }
  REQUIRE(squatters.size() < 20);

  CHECK_THROWS_AS(client->lock("slot-free").try_acquire(), UnavailableError);
  CHECK_THROWS_WITH(client->lock("slot-free").try_acquire(), Catch::Contains(refusal));
  CHECK_THROWS_WITH(client->lock("slot-free").try_acquire(300ms), Catch::Contains(refusal));  // not a busy answer
  CHECK_THROWS_WITH(Client::open(url, o)->lock("slot-free").try_acquire(), Catch::Contains(refusal));

  std::atomic<bool> left{false};
  std::thread leaving([&] {
    std::this_thread::sleep_for(1s);
    left = true;
    squatters.clear();
  });
  std::optional<Lease> lease;
  try {
    lease = client->lock("slot-free").try_acquire(60s);
  } catch (...) {
    leaving.join();
    throw;
  }
  leaving.join();
  REQUIRE(lease);
  CHECK(left);
  CHECK(lease->fence() > 0);
  lease->release();
}

}  // namespace dblock::test
