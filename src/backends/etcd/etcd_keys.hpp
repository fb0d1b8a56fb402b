// Where dblock's locks live in etcd's key space, and which names are allowed there.
//
//   /<prefix>/<name>/<lease id in lowercase hex>   one key per contender, put under its lease
//
// The layout is etcd's own lock recipe's (Go's concurrency.Mutex, which `etcdctl lock` uses):
// NewMutex(session, pfx) puts pfx + "/" + fmt.Sprintf("%x", leaseID), so `etcdctl lock
// /<prefix>/<name>` and a dblock lock on <name> with the URL etcd://host:port/<prefix> queue
// on the same keys and exclude each other. The holder is the key with the lowest create
// revision under the name's prefix. Pure code: unit-tested and fuzzed without a server.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dblock::detail::etcd {

// The URL's path (without its leading '/') as the absolute key prefix "/<path>"; throws
// UsageError when it is empty, has an empty component (a "//"), or ends with '/'.
std::string key_root(std::string_view url_path);
// Throws UsageError for a name etcd's layout cannot hold: one with a '/', whose keys would
// fall under another name's prefix ("a/b"'s under "a"'s), so that the two would block each
// other.
void check_name(std::string_view name);
// The prefix of lock `name`'s contender keys: root + "/" + name + "/" (concurrency.Mutex's pfx).
std::string lock_prefix(const std::string& root, std::string_view name);
// Go's fmt.Sprintf("%x", id): lowercase hex without leading zeros.
std::string lease_hex(std::int64_t id);
// The end of the range of every key that starts with `prefix` (clientv3.GetPrefixRangeEnd):
// the prefix with its last byte below 0xff incremented and what follows it dropped; "\0"
// (every key) when there is none.
std::string prefix_end(std::string prefix);
// For list(): the lock name of a contender key under `root`, or nullopt for a key of another
// shape (<root>/<name>/<hex>, name without '/').
std::optional<std::string> lock_name_of(const std::string& root, std::string_view key);

}  // namespace dblock::detail::etcd
