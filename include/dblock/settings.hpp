/// @file
/// What Client::check_settings reports: the server settings dblock's guarantees rely on
/// (durability of a grant, locks that stay put), read from the server, each with a verdict.
/// dblock cannot enforce these itself: a database that acknowledges a commit it then loses
/// on a crash, or a Redis that evicts a lock key, takes a lock from a holder that still runs.
#pragma once

#include <string>
#include <string_view>

#include "dblock/export.hpp"

namespace dblock {

/// From harmless to worst. "Exclusion" is "one holder at a time"; fences (the tokens a
/// resource uses to refuse a superseded holder) have no verdict of their own: every setting
/// that can hand a fence out again also loses the grant it belonged to, so it weakens
/// exclusion, and its meaning line says what happens to fences.
enum class Verdict {
  ok,                 ///< the guarantee holds as documented (docs/RELIABILITY.md)
  unknown,            ///< could not be read (no privilege, CONFIG disabled, not on the protocol)
  exposed,            ///< the traffic to a server off this machine is readable or forgeable on
                      ///< the way: no TLS, or TLS with no server verified (docs/SECURITY.md)
  weakens_exclusion,  ///< a crash can lose the latest grants: a holder may run beside a new one
                      ///< until its next renewal (and fences may repeat)
  breaks_exclusion,   ///< locks can vanish under their holders without a crash, or a crash can
                      ///< corrupt the store: no guarantee is left
};

/// "ok", "unknown", "exposed", "weakens exclusion", "breaks exclusion".
DBLOCK_EXPORT std::string_view to_string(Verdict v) noexcept;

/// True for the verdicts that make `dblock doctor` fail: a guarantee is off, or the traffic
/// is exposed.
inline bool is_problem(Verdict v) noexcept { return v > Verdict::unknown; }

/// One server setting, as Client::check_settings read it.
struct SettingCheck {
  std::string setting;  ///< the server's own name; on Redlock prefixed with the node: "host:port appendonly"
  std::string value;    ///< as the server reports it; empty when unknown
  Verdict verdict = Verdict::unknown;  ///< what the value does to the guarantees
  std::string meaning;  ///< one line: what this value means for dblock's locks
};

}  // namespace dblock
