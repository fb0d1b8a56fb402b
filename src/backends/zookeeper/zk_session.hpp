// One ZooKeeper session: an RAII zhandle_t, its connection state, the watches set through
// it, and the one place where ZooKeeper's return codes become dblock errors.
//
// Thread-safety: the C client (zookeeper_mt) serialises requests itself, so any thread may
// call the operations. Watcher and completion callbacks run on the client's completion
// thread; they only record what happened and signal a condition variable.
//
// Every operation is sent with the client's asynchronous call and waited for here, until its
// completion or the session's end, whichever comes first. The client's synchronous calls
// wait for the completion alone, and one sent as the session expires can wait forever: the
// client's I/O thread ends when the session is unrecoverable, and a request queued after
// its last pass is never sent nor failed (a torture worker's release hung so in CI).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/driver.hpp"

typedef struct _zhandle zhandle_t;  // NOLINT: the C client's own spelling
struct Stat;
struct ACL_vector;

namespace dblock::detail::zk {

// Throws the dblock error for a ZooKeeper return code (never for ZOK); `what` says which
// operation on which path, for the one-line message.
[[noreturn]] void throw_error(int rc, const std::string& what);

class Session {
 public:
  // Connects to `hosts` ("h:p,h:p") asking for `session_timeout` (the server clamps it to its
  // bounds); throws UnavailableError unless the session is established within `connect_timeout`.
  // With a `digest` ("user:password") the session authenticates as that identity, and every
  // node it creates belongs to it alone (ZOO_CREATOR_ALL_ACL); without, nodes are open to all.
  Session(const std::string& hosts, milliseconds session_timeout, milliseconds connect_timeout,
          const std::string& digest = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The negotiated session timeout.
  milliseconds timeout() const;
  bool connected() const;
  // Expired or refused for good: this handle can never be used again.
  bool dead() const;
  // Waits up to `limit` for the connection to come back; true when connected.
  bool wait_connected(milliseconds limit);

  // The operations, returning the raw code for the codes a caller handles itself and
  // throwing (throw_error) for every other failure. A write whose answer never came is
  // ZCONNECTIONLOSS, whether the connection broke or went silent (ZOPERATIONTIMEOUT): it may
  // or may not have been applied.
  int create(const std::string& path, const std::string& data, int flags, std::string* created, Stat* stat);
  // create() and then children(dir) sent back to back, so both cost one round trip: the
  // server runs a session's requests in order (the read waits for the create to commit), so
  // the listing includes the new node. Returns create()'s code; *listed tells whether
  // `names` holds the listing (false when it failed, e.g. ZNONODE with the create).
  int create_and_list(const std::string& path, const std::string& data, int flags, std::string* created, Stat* stat,
                      const std::string& dir, std::vector<std::string>* names, bool* listed);
  int remove(const std::string& path);
  int exists(const std::string& path, Stat* stat);
  int children(const std::string& path, std::vector<std::string>* names);
  int get(const std::string& path, std::string* data, Stat* stat);
  // Creates `path` and its missing parents as persistent nodes.
  void ensure_path(const std::string& path);

  // Watches `path` for deletion or change: a token to wait on, or nullopt when the node is
  // already gone (no watch is left behind then).
  std::optional<std::uint64_t> watch(const std::string& path);
  // Lists the children of `path` and watches them for a change (a child created or deleted):
  // ZOK with *token to wait on, after which the caller calls wait() or unwatch() once; or
  // ZNONODE, and no watch is left behind.
  int watch_children(const std::string& path, std::vector<std::string>* names, std::uint64_t* token);
  // Gives up waiting on a watch set by watch() or watch_children() without calling wait().
  void unwatch(const std::string& path);
  // Waits until the watch on `path` set with `token` fired, the connection state changed,
  // `cancel` was cancelled (which then calls wake_waiters), or `until`. Spurious returns are
  // allowed; callers re-check.
  void wait(const std::string& path, std::uint64_t token, Clock::time_point until,
            const WaitCancel* cancel = nullptr);
  // Every wait() now returns, to look again (a cancel: only the cancelled one stops).
  void wake_waiters();

  // For tests: the client id (session id and password) of a live session of this process,
  // by session id, so that a test can expire it by closing a second handle on it.
  static bool credentials(std::int64_t session_id, std::string* password);

 private:
  static void on_event(zhandle_t* zh, int type, int state, const char* path, void* context);
  void check_usable(const std::string& what) const;
  // Adds the digest identity to the session (the client sends it again on every reconnection).
  int authenticate(const std::string& digest);

  // A request in flight and what its completion reported (zk_session.cpp).
  struct Call;
  friend struct Completions;
  // A Call kept alive for its completion until it comes or the handle is closed.
  std::shared_ptr<Call> start();
  // `sent`: what the asynchronous call returned. Not ZOK: nothing will complete it, and
  // that code is the answer. Else waits for the completion, or answers ZSESSIONEXPIRED
  // (ZAUTHFAILED) once the session is over.
  int finish(const std::shared_ptr<Call>& call, int sent);
  std::map<const Call*, std::shared_ptr<Call>> calls_;

  zhandle_t* zh_ = nullptr;
  const ACL_vector* acl_;  // what the nodes we create get
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int state_ = 0;
  std::uint64_t state_changes_ = 0;
  // Per path someone waits on: how many times its watch fired (a waiter compares with its
  // token) and how many wait, so the entry goes with the last of them.
  struct Watched {
    std::uint64_t fired = 0;
    int waiters = 0;
  };
  std::map<std::string, Watched> watched_;
  void unwatch_locked(const std::string& path);
};

}  // namespace dblock::detail::zk
