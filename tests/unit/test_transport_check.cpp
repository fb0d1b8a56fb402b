// The doctor's transport line (src/core/transport_check.hpp): which servers count as on this
// machine, and the verdict for each protection off it.
#include <catch2/catch.hpp>

#include "core/transport_check.hpp"

using dblock::Verdict;
using dblock::detail::on_this_machine;
using dblock::detail::parse_url;
using dblock::detail::Transport;
using dblock::detail::transport_check;

TEST_CASE("transport: loopback addresses, localhost and sockets are on this machine", "[unit][transport]") {
  CHECK(on_this_machine(parse_url("mysql://u:p@127.0.0.1:3306/db")));
  CHECK(on_this_machine(parse_url("mysql://u:p@127.8.9.10:3306/db")));
  CHECK(on_this_machine(parse_url("postgresql://u@localhost/db")));
  CHECK(on_this_machine(parse_url("postgresql://u@[::1]:5432/db")));
  CHECK(on_this_machine(parse_url("postgresql://u@db.example/db?host=/var/run/postgresql")));  // host overrides
  CHECK(on_this_machine(parse_url("mysql://u:p@db.example/db?socket=/run/mysqld/mysqld.sock")));
  CHECK(on_this_machine(parse_url("etcd://127.0.0.1:2379,localhost:2380/p")));
  CHECK_FALSE(on_this_machine(parse_url("mysql://u:p@10.0.0.5:3306/db")));
  CHECK_FALSE(on_this_machine(parse_url("etcd://127.0.0.1:2379,db.example:2379/p")));  // one off it is enough
  CHECK_FALSE(on_this_machine(parse_url("postgresql://u@localhost/db?host=db.example")));  // host overrides
  CHECK_FALSE(on_this_machine(parse_url("redis://128.0.0.1:6379")));
}

TEST_CASE("transport: plaintext or an unverified server off this machine is exposed", "[unit][transport]") {
  const auto remote = parse_url("mysql://u:p@10.0.0.5:3306/db");
  const auto local = parse_url("mysql://u:p@127.0.0.1:3306/db");
  auto plain = transport_check(remote, Transport{});
  CHECK(plain.setting == "transport");
  CHECK(plain.value == "plaintext");
  CHECK(plain.verdict == Verdict::exposed);
  CHECK(dblock::is_problem(plain.verdict));
  auto unverified = transport_check(remote, Transport{"TLSv1.3", false, false});
  CHECK(unverified.value == "TLSv1.3, server not verified");
  CHECK(unverified.verdict == Verdict::exposed);
  auto chain = transport_check(remote, Transport{"TLSv1.3", true, false});
  CHECK(chain.value == "TLSv1.3, server's chain verified (not its name)");
  CHECK(chain.verdict == Verdict::ok);
  auto full = transport_check(remote, Transport{"TLS", true, true});
  CHECK(full.value == "TLS, server verified (chain and name)");
  CHECK(full.verdict == Verdict::ok);
  CHECK(transport_check(local, Transport{}).verdict == Verdict::ok);
  CHECK(transport_check(local, Transport{"TLSv1.2", false, false}).verdict == Verdict::ok);
  CHECK(dblock::to_string(Verdict::exposed) == "exposed");
}
