// The Lua texts of src/backends/redis/lua/, compiled into the library by cmake/EmbedLua.cmake
// (as the migrations are): one per file, named after it, without the file's leading comment
// lines (its documentation: the servers are sent only the code). redis_scripts.cpp makes the
// scripts of them.
#pragma once

namespace dblock::detail::redis::lua {

// Helpers that scripts begin with.
extern const char* const record_helpers;
extern const char* const shaped_helpers;
extern const char* const queue_helpers;

// The scripts (redis_scripts.hpp says what each takes and answers).
extern const char* const acquire;
extern const char* const leave;
extern const char* const renew;
extern const char* const free;
extern const char* const keep;
extern const char* const fence;
extern const char* const force_release;
extern const char* const describe;
extern const char* const shaped_acquire;
extern const char* const shaped_renew;
extern const char* const shaped_release;
extern const char* const shaped_keep;

}  // namespace dblock::detail::redis::lua
