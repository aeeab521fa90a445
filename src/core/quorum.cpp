#include "core/quorum.hpp"

#include <string>

#include "core/transient.hpp"

namespace dlock::detail {

Status quorum_failure(const std::vector<Status>& errors, std::size_t answered, std::size_t nodes, std::size_t quorum,
                      std::string_view what) {
  std::string detail;
  bool unknown = false;
  for (const Status& e : errors) {
    if (!transient(e.code())) return Status(e.code(), "Redlock " + std::string(what) + ": " + e.message());
    unknown = unknown || e.code() == Errc::outcome_unknown;
    detail += (detail.empty() ? "" : "; ") + e.message();
  }
  return Status(unknown ? Errc::outcome_unknown : Errc::unavailable,
                "Redlock " + std::string(what) + ": only " + std::to_string(answered) + " of " + std::to_string(nodes) +
                    " masters answered, " + std::to_string(quorum) + " needed for a majority (" + detail + ")");
}

}  // namespace dlock::detail
