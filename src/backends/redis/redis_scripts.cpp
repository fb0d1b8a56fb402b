#include "backends/redis/redis_scripts.hpp"

#include "backends/redis/redis_lua.hpp"
#include "dblock/errors.hpp"

namespace dblock::detail::redis {

void keys::check_name(const std::string& name) {
  for (const auto* prefix : {&fence_prefix, &queue_prefix, &alive_prefix, &handed_prefix})
    if (name.compare(0, prefix->size(), *prefix) == 0)
      throw UsageError("bad lock name '" + name + "': names beginning '" + *prefix +
                       "' are keys of the redis and redlock backends' own (fence counters, wait queues, hand-overs)");
}

// Each script is a file under lua/ (its documentation there, as Lua comments), compiled in
// by cmake/EmbedLua.cmake; here each gets the helpers it calls in front. Every script starts
// with the grant record's (lua/record_helpers.lua); those that may meet a hash of holders
// (acquire's busy path, describe, the shaped scripts) also with lua/shaped_helpers.lua, and
// those that work on a fair queue with lua/queue_helpers.lua. The others do not define
// functions they never call.
namespace {
std::string with_record(const std::string& body) { return lua::record_helpers + body; }
std::string with_shapes(const char* body) { return with_record(lua::shaped_helpers + std::string(body)); }
std::string with_queue(const char* body) { return with_record(lua::queue_helpers + std::string(body)); }
}  // namespace

const Script& acquire_script() {
  static const Script s(with_record(lua::shaped_helpers + std::string(lua::queue_helpers) + lua::acquire));
  return s;
}

const Script& renew_script() {
  static const Script s(with_record(lua::renew));
  return s;
}

const Script& free_script() {
  static const Script s(with_record(lua::queue_helpers + std::string(lua::free)));
  return s;
}

const Script& leave_script() {
  static const Script s(with_queue(lua::leave));
  return s;
}

const Script& keep_script() {
  static const Script s(with_record(lua::keep));
  return s;
}

const Script& fence_script() {
  static const Script s(with_record(lua::fence));
  return s;
}

const Script& force_release_script() {
  static const Script s(with_record(lua::queue_helpers + std::string(lua::force_release)));
  return s;
}

const Script& describe_script() {
  static const Script s(with_shapes(lua::describe));
  return s;
}

const Script& shaped_acquire_script() {
  static const Script s(with_shapes(lua::shaped_acquire));
  return s;
}

const Script& shaped_renew_script() {
  static const Script s(with_shapes(lua::shaped_renew));
  return s;
}

const Script& shaped_release_script() {
  static const Script s(with_shapes(lua::shaped_release));
  return s;
}

const Script& shaped_keep_script() {
  static const Script s(with_shapes(lua::shaped_keep));
  return s;
}

}  // namespace dblock::detail::redis
