#include "dlock/election.hpp"

#include "recipe_calls.hpp"
#include "sync_wait.hpp"

namespace dlock {

Observation::~Observation() { stop(); }

Observation& Observation::operator=(Observation&& other) noexcept {
  if (this != &other) {
    stop();
    stop_ = std::move(other.stop_);
  }
  return *this;
}

void Observation::stop() noexcept {
  if (auto f = std::exchange(stop_, nullptr)) f();
}

Election::Election(Client client, std::string name, std::string candidate_id, LockOptions options)
    : client_(std::move(client)), name_(std::move(name)), id_(std::move(candidate_id)), options_(std::move(options)) {
  options_.fair = true;
  // The candidate id is what others see: a holder of its own would be
  // overwritten unseen (refused by campaign()).
  if (options_.holder.empty()) options_.holder = id_;
}

Result<Leadership> Election::campaign(milliseconds wait) {
  if (options_.holder != id_)
    return Status(Errc::invalid_argument, "LockOptions::holder: an Election shows its candidate id ('" + id_ +
                                              "') as the holder; leave it empty");
  auto r = detail::take_hold(*client_.core_, name_, wait, options_, {});
  if (!r.ok()) return r.status();
  return Leadership(std::move(r.value()), id_);
}

namespace {
std::optional<LeaderInfo> leader_of(const LockInfo& info) {
  if (!info.held) return std::nullopt;
  return LeaderInfo{info.holder, info.fence};
}
}  // namespace

Result<std::optional<LeaderInfo>> Election::leader() const {
  auto info = client_.inspect(name_);
  if (!info.ok()) return info.status();
  return leader_of(*info);
}

Observation Election::observe(std::function<void(const std::optional<LeaderInfo>&)> on_change) {
  auto core = client_.core_;
  const auto id =
      core->observe(name_, [on_change = std::move(on_change)](const LockInfo& info) { on_change(leader_of(info)); });
  return Observation([core, id] { core->unobserve(id); });
}

}  // namespace dlock
