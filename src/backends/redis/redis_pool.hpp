// A small pool of connections to one Redis server (ClientOptions::pool_size): commands of
// concurrent threads (waiters, the renewal thread, releases) do not queue behind each other.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/redis/redis_connection.hpp"

namespace dblock::detail::redis {

class Pool {
 public:
  Pool(Target target, std::size_t size) : target_(std::move(target)), size_(size) {}

  // A borrowed connection, returned at destruction unless an error left it unusable.
  class Handle {
   public:
    Handle(Pool& p, std::unique_ptr<Connection> c) : pool_(p), c_(std::move(c)) {}
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() { pool_.give_back(std::move(c_)); }
    Connection* operator->() { return c_.get(); }
    Connection& operator*() { return *c_; }

   private:
    Pool& pool_;
    std::unique_ptr<Connection> c_;
  };

  Handle get();

 private:
  void give_back(std::unique_ptr<Connection> c) noexcept;
  Target target_;
  std::size_t size_;
  std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::size_t open_ = 0;  // idle + borrowed
};

}  // namespace dblock::detail::redis
