/// @file
/// dblock: distributed locks kept in the database a service already owns (SQL, Redis, ZooKeeper, etcd).
///
/// Three steps, three types:
///
/// 1. `Client::open(url)` connects to a backend: one Client per backend per process.
/// 2. `client->lock(name)` returns a Lock: a *handle* on one named lock, like a std::mutex
///    object. It holds nothing yet and sends nothing; it only checks the name and options.
/// 3. The Lock is then held in one of two ways. Pick one per use; they report a lost lock
///    differently:
///
/// | | `lock()` / `unlock()` (std-style) | `acquire()` / `try_acquire()` → Lease |
/// |---|---|---|
/// | the hold | kept inside the Lock, per thread | a move-only Lease value the caller owns |
/// | released by | `unlock()`, or std::lock_guard / std::unique_lock / std::scoped_lock | the Lease's destructor, or `Lease::release()` |
/// | the fence | `Lock::fence()` (the calling thread's newest hold) | `Lease::fence()` |
/// | a lost lock | only through LockOptions::on_lost; `unlock()` never throws | `Lease::lost()` to ask at any time, on_lost too, and `Lease::release()` throws LockLostError |
/// | moves between threads | no: the thread that locked unlocks | yes |
///
/// Use a Lease when the work must know whether it still holds the lock (check `lost()` or
/// `remaining()` before each write, pass `fence()` to the resource); use `lock()`/`unlock()`
/// to pass the Lock to code written for std mutexes, and set LockOptions::on_lost to learn of
/// a loss. Either way a fence, not the lock alone, protects a resource from a holder that
/// paused past its lease (docs/CONTRACT.md).
#pragma once

#include "dblock/client.hpp"
#include "dblock/duration.hpp"
#include "dblock/errors.hpp"
#include "dblock/events.hpp"
#include "dblock/leadership.hpp"
#include "dblock/lease.hpp"
#include "dblock/lock.hpp"
#include "dblock/options.hpp"
#include "dblock/settings.hpp"
#include "dblock/sweeper.hpp"
#include "dblock/version.hpp"
