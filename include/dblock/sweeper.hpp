/// @file
/// Sweeper: deletes expired leases in batches, once or on a schedule in a background thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "dblock/client.hpp"
#include "dblock/errors.hpp"
#include "dblock/export.hpp"

namespace dblock {

/// How a Sweeper runs (all optional).
struct SweeperOptions {
  std::size_t batch = 1000;  ///< rows per DELETE transaction (SQLite: at most 500, with pauses between)
  std::chrono::milliseconds every{60000};  ///< between passes, after start()
  std::function<void(std::size_t removed)> on_sweep;  ///< after each pass
  std::function<void(const Error&)> on_error;         ///< a failed pass; the next one still runs
};

/// Deletes expired leases (Client::sweep) once, or on a schedule in a thread of its own.
class DBLOCK_EXPORT Sweeper {
 public:
  /// A sweeper of `client`'s lock table; nothing runs until run_once() or start().
  Sweeper(std::shared_ptr<Client> client, SweeperOptions options = {});
  ~Sweeper();  ///< stops the background thread
  /// @name Not copyable
  ///@{
  Sweeper(const Sweeper&) = delete;
  Sweeper& operator=(const Sweeper&) = delete;
  ///@}

  std::size_t run_once();  ///< one pass: every expired lease, batch by batch; throws on errors
  void start();            ///< a pass now and then every `every`, until stop()
  void stop();  ///< stops the background thread after the pass under way; idempotent

 private:
  void loop();
  std::shared_ptr<Client> client_;
  SweeperOptions options_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace dblock
