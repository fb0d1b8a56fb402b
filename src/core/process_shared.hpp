// One object per process and key, shared by every Client that asks with the same key while
// any of them holds it: made on first use, gone with its last user. For the release
// listeners (PostgreSQL LISTEN, Redis SUBSCRIBE): one per process means a release wakes one
// waiter per process (WakeTable), not one per Client, and the server keeps one listening
// connection per process. The pid is part of the key, so that a forked child never shares
// its parent's object, whose threads did not survive the fork.
#pragma once

#include <unistd.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace dblock::detail {

template <class T, class Make>
std::shared_ptr<T> process_shared(const std::string& key, Make make) {
  static std::mutex mutex;
  static auto* objects = new std::map<std::string, std::weak_ptr<T>>;  // never destroyed
  std::lock_guard lk(mutex);
  for (auto it = objects->begin(); it != objects->end();) it = it->second.expired() ? objects->erase(it) : std::next(it);
  auto& slot = (*objects)[std::to_string(getpid()) + '\n' + key];
  if (auto o = slot.lock()) return o;
  std::shared_ptr<T> o = make();
  slot = o;
  return o;
}

}  // namespace dblock::detail
