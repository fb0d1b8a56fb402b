// Where dblock's locks live in the ZooKeeper tree, and which names are allowed there.
//
//   /root/N/<32 hex>__lock__<10-digit sequence>    a writer (an exclusive contender)
//   /root/N/<32 hex>__rlock__<10-digit sequence>   a reader (a shared contender)
//
// one ephemeral sequential node per contender. The layout is Kazoo's Lock, WriteLock and
// ReadLock recipes', so that a Kazoo `WriteLock("/root/N")` (or `Lock`) and a dblock lock on
// name N exclude each other, and a Kazoo `ReadLock` holds beside dblock's shared holders.
// A semaphore is Kazoo's Semaphore: /root/N with max_leases as its data and one ephemeral
// <32 hex> child per lease, and the gate lock /root/N-__lock__ (zk_driver.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/owner.hpp"

namespace dblock::detail::zk {

// The URL's path (without its leading '/') as an absolute ZooKeeper path; throws UsageError
// when it is empty, has empty, "." or ".." components, a trailing '/', or characters
// ZooKeeper refuses in paths.
std::string root_path(std::string_view url_path);
// The node (one path component) that lock `name` uses: the name itself, as a Kazoo user
// would write the path, except for two escapes. ZooKeeper refuses every character outside
// the BMP (Java sees surrogates), so those (emoji) are written as %XX per UTF-8 byte, and
// '%' itself becomes %25 so that the mapping stays one-to-one. Throws UsageError for what is
// refused, not escaped: a '/' (a name is one node), "." and "..", and the BMP characters
// ZooKeeper refuses (U+0001-U+001F, U+007F-U+009F, U+E000-U+F8FF, U+FFF0-U+FFFF).
std::string node_name(std::string_view name);
// The inverse, for list(): the lock name of a child of the root.
std::string lock_name(std::string_view node);

inline constexpr std::string_view lock_marker = "__lock__";    // a writer: Kazoo's Lock, WriteLock
inline constexpr std::string_view read_marker = "__rlock__";   // a reader: Kazoo's ReadLock

// One contender for a lock: a child named <anything><marker><10-digit sequence>, where the
// marker is Kazoo's "__lock__" (Lock, WriteLock: a writer) or "__rlock__" (ReadLock: a reader).
struct Contender {
  std::string node;  // the child's name
  std::int64_t sequence = 0;
  bool shared = false;  // a reader's node (__rlock__)
};
std::optional<Contender> parse_contender(const std::string& child);
// The contenders among `children`, in sequence order.
std::vector<Contender> contenders(const std::vector<std::string>& children);
// A semaphore's lease: a child named by 32 hex digits alone (Kazoo's uuid4().hex).
bool is_lease(const std::string& child);
// Kazoo's read/write rule: the index in `list` (sequence order) of the one contender that
// list[me] waits for, or npos when list[me] holds. A writer waits for every node before it,
// so for the one right before it; a reader waits only for writers, so for the nearest writer
// before it. Either way a waiter watches exactly one node: no herd. A reader behind a waiting
// writer waits for it, so writers are not starved.
inline constexpr std::size_t npos = static_cast<std::size_t>(-1);
std::size_t blocker(const std::vector<Contender>& list, std::size_t me);
// The contenders that hold the lock now: the first, if it is a writer; else every reader
// before the first writer.
std::vector<Contender> holders(const std::vector<Contender>& list);

// A random 32-hex-digit prefix (a uuid4's hex, as Kazoo uses) that finds our node again
// after a create whose answer was lost.
inline std::string random_prefix() { return random_hex128(); }

}  // namespace dblock::detail::zk
