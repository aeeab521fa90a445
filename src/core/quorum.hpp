// Collecting one answer per node and deciding by majority, for backends made
// of independent nodes (Redlock today). I/O-free: the caller feeds answers
// and asks what they add up to.
#ifndef DLOCK_CORE_QUORUM_HPP_
#define DLOCK_CORE_QUORUM_HPP_

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "dlock/error.hpp"

namespace dlock::detail {

// The failure when fewer than `quorum` of `nodes` answered (`answered` did):
// a permanent error (auth, ACL, wrong type) as it is; else outcome_unknown if
// any node may have applied the call, unavailable otherwise. `what` names
// the call ("acquire", "renewal"...).
Status quorum_failure(const std::vector<Status>& errors, std::size_t answered, std::size_t nodes, std::size_t quorum,
                      std::string_view what);

// Answers of `nodes` nodes to one call; each node counts once.
template <class T>
class Quorum {
 public:
  Quorum(std::size_t nodes, std::size_t quorum) : quorum_(quorum), answers_(nodes), errors_(nodes) {}

  // Records node i's answer (a second one is ignored).
  void add(std::size_t i, Result<T> r) {
    if (answers_[i] || errors_[i]) return;
    if (r.ok()) {
      answers_[i] = std::move(r).value();
      ++ok_;
    } else {
      errors_[i] = r.status();
      ++failed_;
    }
  }

  std::size_t nodes() const { return answers_.size(); }
  std::size_t quorum() const { return quorum_; }
  std::size_t ok() const { return ok_; }
  std::size_t failed() const { return failed_; }
  bool complete() const { return ok_ + failed_ == nodes(); }
  // A majority answered; or so many failed that one never can.
  bool majority_ok() const { return ok_ >= quorum_; }
  bool majority_lost() const { return nodes() - failed_ < quorum_; }

  const std::optional<T>& answer(std::size_t i) const { return answers_[i]; }
  const std::vector<std::optional<T>>& answers() const { return answers_; }

  // How many answers satisfy `pred`.
  template <class Pred>
  std::size_t count(Pred pred) const {
    std::size_t n = 0;
    for (const auto& a : answers_)
      if (a && pred(*a)) ++n;
    return n;
  }

  // quorum_failure() over the errors so far.
  Status failure(std::string_view what) const {
    std::vector<Status> errors;
    for (const auto& e : errors_)
      if (e) errors.push_back(*e);
    return quorum_failure(errors, ok_, nodes(), quorum_, what);
  }

 private:
  std::size_t quorum_;
  std::vector<std::optional<T>> answers_;
  std::vector<std::optional<Status>> errors_;
  std::size_t ok_ = 0;
  std::size_t failed_ = 0;
};

}  // namespace dlock::detail

#endif  // DLOCK_CORE_QUORUM_HPP_
