#include "dblock/settings.hpp"

namespace dblock {

std::string_view to_string(Verdict v) noexcept {
  switch (v) {
    case Verdict::ok: return "ok";
    case Verdict::unknown: return "unknown";
    case Verdict::exposed: return "exposed";
    case Verdict::weakens_exclusion: return "weakens exclusion";
    case Verdict::breaks_exclusion: return "breaks exclusion";
  }
  return "unknown";
}

}  // namespace dblock
