// One call asked of every Redlock master at once: the answers gathered in a
// Quorum (core/quorum.hpp), the caller answered once, by the first
// decision; later answers are dropped. The shape of every Redlock call but
// acquire, whose decisions are RedlockAcquire's.
#ifndef DLOCK_REDLOCK_FAN_OUT_HPP_
#define DLOCK_REDLOCK_FAN_OUT_HPP_

#include <cstddef>
#include <functional>
#include <optional>
#include <utility>

#include "core/quorum.hpp"

namespace dlock::redlock {

template <class T, class Out>
class FanOut {
 public:
  // The caller's answer once the answers so far settle it; nullopt while
  // they do not.
  using Decide = std::function<std::optional<Out>(const detail::Quorum<T>&)>;

  FanOut(std::size_t nodes, std::size_t quorum, std::function<void(Out)> done, Decide decide)
      : answers_(nodes, quorum), done_(std::move(done)), decide_(std::move(decide)) {}

  // Master i's answer (its second is ignored, as by the Quorum).
  void add(std::size_t i, Result<T> r) {
    if (!done_) return;
    answers_.add(i, std::move(r));
    if (std::optional<Out> out = decide_(answers_)) finish(std::move(*out));
  }
  // Answers the caller now (e.g. cancelled), unless it was answered.
  void finish(Out out) {
    if (done_) std::exchange(done_, nullptr)(std::move(out));
  }
  bool answered() const { return !done_; }

 private:
  detail::Quorum<T> answers_;
  std::function<void(Out)> done_;
  Decide decide_;
};

}  // namespace dlock::redlock

#endif  // DLOCK_REDLOCK_FAN_OUT_HPP_
