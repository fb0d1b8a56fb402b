// Where dblock's locks live in etcd's key space, and which names are allowed there.
//
//   /<prefix>/<name>/<lease id in lowercase hex>              an exclusive contender (a writer)
//   /<prefix>/<name>/<lease id hex>-r-<16 hex>                 a reader (a shared contender)
//   /<prefix>/<name>/<lease id hex>-s<permits>-<16 hex>        one of a semaphore's contenders
//
// one key per contender, put under its lease.
// The layout is etcd's own lock recipe's (Go's concurrency.Mutex, which `etcdctl lock` uses):
// NewMutex(session, pfx) puts pfx + "/" + fmt.Sprintf("%x", leaseID), so `etcdctl lock
// /<prefix>/<name>` and a dblock lock on <name> with the URL etcd://host:port/<prefix> queue
// on the same keys and exclude each other. The holder is the key with the lowest create
// revision under the name's prefix; with shapes, the readers below the first key of another
// kind, or a semaphore's first N keys (docs/ARCHITECTURE.md, "Lock shapes"). A shaped key
// carries a random tag besides its lease, since several threads of one Client (each its own
// owner) contend for one name under the Client's one lease at once. Every key that is not a
// reader's or a semaphore's (etcdctl's, dblock's exclusive one, anything else) is a writer:
// it excludes everyone. Pure code: unit-tested and fuzzed without a server.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// What a contender key says about its contender, by its last component.
struct KeyShape {
  enum Kind { writer, reader, permit } kind = writer;
  std::uint32_t permits = 0;  // permit: the semaphore's N
  bool operator==(const KeyShape& o) const noexcept { return kind == o.kind && permits == o.permits; }
};
// The last component of a shaped key: "<lease hex>-r-<tag hex>" (a reader) or
// "<lease hex>-s<permits>-<tag hex>" (a semaphore's contender; permits > 1).
std::string shaped_suffix(std::int64_t lease, KeyShape shape, std::uint64_t tag);
// The shape of key `key` (its text after the last '/'); anything but a well-formed reader's or
// semaphore contender's suffix is a writer.
KeyShape key_shape(std::string_view key);
// For list(): the lock name and shape of a contender key under `root`: a plain one
// (lock_name_of) or a shaped one; nullopt for a key of another form.
std::optional<std::pair<std::string, KeyShape>> parse_lock_key(const std::string& root, std::string_view key);
// Which of a name's contenders (their shapes in creation order) hold it now, by index: the
// first alone if it is a writer; else the readers before the first key of another kind; else,
// among a semaphore's first N keys, those of its shape (one of another shape is a contender
// on its way out: it finds the name's first key is not its shape).
std::vector<std::size_t> holders(const std::vector<KeyShape>& in_creation_order);

}  // namespace dblock::detail::etcd
