// RedlockBackend's blocking rounds (redlock_backend_impl.hpp).
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cerrno>
#include <iterator>

#include "redlock/redlock_backend_impl.hpp"

namespace dlock::redlock {

// ---- the blocking fast path --------------------------------------------------
// On the caller's thread: the request written to every master, then the
// answers read as they come, so a round costs the slowest master's round
// trip.
// The decisions are RedlockAcquire's, as on the I/O thread.

std::optional<Result<AcquireOutcome>> RedlockBackend::acquire_now(const AcquireCall& call) {
  if (!fast_) return std::nullopt;
  if (Status bad = detail::check_mode(call, "Redlock", kNoLines); !bad.ok()) return Result<AcquireOutcome>(bad);
  settle_late(std::nullopt);
  const auto start = Clock::now();  // before the first request: validity counts from here
  const std::uint64_t round = rounds_.fetch_add(1) + 1;
  const std::uint64_t bits = up_bits_.load();
  std::vector<bool> connected(nodes_.size());
  for (std::size_t i = 0; i < nodes_.size(); ++i) connected[i] = (bits >> i) & 1;
  const milliseconds per_node = per_node_timeout(command_timeout_, call.lease);
  RedlockAcquire fsm(call, start, per_node, RedlockAcquire::Nodes{&names_, &connected},
                     [] { return detail::random_u64(); });
  std::optional<Result<AcquireOutcome>> report;
  std::vector<bool> answered(nodes_.size(), false);  // the master replied (it is not silent)
  // Effects, and the effects their undos' answers have, in order.
  auto run = [&](RedlockAcquire::Effects first) {
    std::deque<RedlockAcquire::Effects> todo;
    todo.push_back(std::move(first));
    while (!todo.empty()) {
      RedlockAcquire::Effects e = std::move(todo.front());
      todo.pop_front();
      for (const auto& undo : e.undo) {
        undo_now(undo.node, undo_of_round(fsm.call()), round, Clock::now() + per_node, answered[undo.node]);
        todo.push_back(fsm.on_undo_answer(undo.counted));
      }
      if (e.report && !report) report = std::move(e.report);
    }
  };
  auto named = [&](std::size_t i, const Status& s) { return Status(s.code(), names_[i] + ": " + s.message()); };
  std::vector<std::unique_ptr<redis::RedlockMaster::Pending>> sent(nodes_.size());
  each_master_sends(
      [&](std::size_t i, bool pooled_only) {
        return nodes_[i]->send_acquire_now(fsm.call(), round, std::min(start + per_node, call.deadline), pooled_only);
      },
      [&](std::size_t i, Result<std::unique_ptr<redis::RedlockMaster::Pending>> s) {
        if (s.ok())
          sent[i] = std::move(s.value());
        else
          // Cut short by the caller's deadline: the call's timeout; by the
          // per-node window: this master's silence.
          run(fsm.on_answer(i, named(i, call.deadline <= start + per_node ? s.status() : unsent(s.status())),
                            Clock::now()));
      });
  // The answers in the order they come (a silent master must not hold up
  // the others'), until the round is decided or its timer is due.
  while (!report && std::any_of(sent.begin(), sent.end(), [](const auto& p) { return p != nullptr; })) {
    const auto ready = readable(sent, std::min(fsm.timer_at(), call.deadline));
    if (ready.empty() && Clock::now() >= call.deadline && call.deadline < fsm.timer_at()) {
      // The caller's time is up before the round's: the round is left in
      // doubt (the caller undoes this grant id); the silent masters' answers
      // are read later and undone where they granted.
      report = Result<AcquireOutcome>(
          Status(Errc::outcome_unknown, "Redlock: no majority answered within the call's deadline"));
      break;
    }
    if (ready.empty()) {
      run(fsm.on_timer(Clock::now()));
      continue;  // a decision, or the timer moved on (the fence's wait)
    }
    for (std::size_t i : ready) {
      auto answer = nodes_[i]->acquire_answer(*sent[i], std::min(fsm.timer_at(), call.deadline), true);
      sent[i].reset();
      answered[i] = answer.ok() || answer.code() != Errc::outcome_unknown;
      run(fsm.on_answer(i, answer.ok() ? answer : named(i, answer.status()), Clock::now()));
    }
  }
  if (!report) run(fsm.on_timer(Clock::now()));
  if (!report) report = Result<AcquireOutcome>(Status(Errc::outcome_unknown, "Redlock: the round did not decide"));
  leave_silent(sent, fsm.call(), round, start + per_node,
               report->ok() && (*report)->kind == AcquireOutcome::Kind::granted);
  return std::move(*report);
}

// Masters still silent when the round was decided: their answers are read
// later, before this grant's release goes to them (which keeps the two in
// order there); a failed round's is undone where it granted.
void RedlockBackend::leave_silent(std::vector<std::unique_ptr<redis::RedlockMaster::Pending>>& sent,
                                  const AcquireCall& call, std::uint64_t round, Clock::time_point window_end,
                                  bool granted) {
  for (std::size_t i = 0; i < sent.size(); ++i)
    if (sent[i]) {
      Late late{i, call.grant, window_end, std::move(sent[i]), std::nullopt, round};
      if (granted) {
        std::lock_guard lk(late_mu_);
        late_.push_back(std::move(late));
        continue;
      }
      late.undo = undo_of_round(call);
      undo_when_answered(std::move(late));
    }
}

// A failed round's request still out on a master: the I/O thread waits for
// its answer (without blocking: it polls the socket) until the per-node
// deadline, then undoes it there if it granted or stayed in doubt. Its undo
// goes out behind the answer, so it cannot overtake the request.
void RedlockBackend::undo_when_answered(Late late) {
  struct Drain {
    Drain(asio::io_context& io, int fd) : socket(io, fd), timer(io) {}
    asio::posix::stream_descriptor socket;  // a dup of the connection's socket, to wait on
    asio::steady_timer timer;
    Late late;
    bool done = false;
  };
  const int fd = ::dup(late.sent->fd());
  if (fd < 0) {
    return asio::post(io_, [this, node = late.node, undo = *late.undo, round = late.round] {
      if (!closed_) nodes_[node]->release_round(undo, round, [](Result<ReleaseOutcome>) {});
    });
  }
  // Closed here if the handler never runs (the client shut down first).
  auto owned = std::shared_ptr<int>(new int(fd), [](int* p) {
    if (*p >= 0) ::close(*p);
    delete p;
  });
  asio::post(io_, [this, owned, late = std::move(late)]() mutable {
    auto d = std::make_shared<Drain>(io_, std::exchange(*owned, -1));
    d->late = std::move(late);
    auto finish = [this, d](bool readable) {
      if (std::exchange(d->done, true)) return;
      d->timer.cancel();
      boost::system::error_code ignored;
      d->socket.cancel(ignored);
      // Readable: the answer is there (or the connection closed); else the
      // deadline passed and the read gives up at once.
      auto answer = nodes_[d->late.node]->acquire_answer(*d->late.sent,
                                                         readable ? Clock::now() + milliseconds(50) : Clock::now());
      const bool may_hold =
          answer.ok() ? answer->kind == AcquireOutcome::Kind::granted : answer.code() == Errc::outcome_unknown;
      if (may_hold && !closed_)
        nodes_[d->late.node]->release_round(*d->late.undo, d->late.round, [](Result<ReleaseOutcome>) {});
    };
    if (closed_) return;
    d->timer.expires_at(d->late.by);
    d->timer.async_wait([finish](const boost::system::error_code& ec) {
      if (!ec) finish(false);
    });
    d->socket.async_wait(asio::posix::stream_descriptor::wait_read, [finish](const boost::system::error_code& ec) {
      if (!ec) finish(true);
    });
  });
}

// Late answers of granted rounds (acquire_now): those of `grant`'s round
// read now, by their deadline; any other past its deadline read if it is
// there, else dropped with its connection (nullopt: only the latter). A
// failed round's late answers are the I/O thread's (undo_when_answered).
void RedlockBackend::settle_late(std::optional<std::uint64_t> grant) {
  std::vector<Late> due;
  const auto now = Clock::now();
  {
    std::lock_guard lk(late_mu_);
    if (late_.empty()) return;
    auto keep = std::partition(late_.begin(), late_.end(),
                               [&](const Late& l) { return !(l.by <= now || (grant && l.grant == *grant)); });
    std::move(keep, late_.end(), std::back_inserter(due));
    late_.erase(keep, late_.end());
  }
  for (Late& l : due) (void)nodes_[l.node]->acquire_answer(*l.sent, l.by);
}

// The pending masters whose sockets are readable, waiting for the first
// until `until`; empty once it has passed with none.
std::vector<std::size_t> RedlockBackend::readable(
    const std::vector<std::unique_ptr<redis::RedlockMaster::Pending>>& sent, Clock::time_point until) {
  std::vector<pollfd> fds;
  std::vector<std::size_t> who;
  for (std::size_t i = 0; i < sent.size(); ++i)
    if (sent[i]) {
      fds.push_back({sent[i]->fd(), POLLIN, 0});
      who.push_back(i);
    }
  std::vector<std::size_t> ready;
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now()).count();
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long long>(left, 0, 1 << 30)));
    if (n < 0 && errno == EINTR) continue;
    for (std::size_t k = 0; n > 0 && k < fds.size(); ++k)
      if (fds[k].revents != 0) ready.push_back(who[k]);
    return ready;
  }
}

// Sends to every master: first on the connections already open, then
// opening the others (a silent master's connect must not delay the rest),
// those the I/O thread is linked to first: a master gone from the network
// (its connect hangs until the round's window ends) is opened last, so it
// cannot use up the window of one that answers.
// `send(i, pooled_only)` as RedlockMaster's; `sent(i, result)` once each.
void RedlockBackend::each_master_sends(
    const std::function<redis::RedlockMaster::Sent(std::size_t, bool)>& send,
    const std::function<void(std::size_t, Result<std::unique_ptr<redis::RedlockMaster::Pending>>)>& sent) {
  std::vector<std::size_t> later;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    auto s = send(i, true);
    if (s)
      sent(i, std::move(*s));
    else
      later.push_back(i);
  }
  const std::uint64_t up = up_bits_.load();
  std::stable_partition(later.begin(), later.end(), [up](std::size_t i) { return ((up >> i) & 1) != 0; });
  for (std::size_t i : later) {
    auto s = send(i, false);
    sent(i, s ? std::move(*s)
              : Result<std::unique_ptr<redis::RedlockMaster::Pending>>(
                    Status(Errc::unavailable, "no blocking connection")));
  }
}

// An undo. To a master that just answered, from the caller's thread; to
// one that did not (silent, unreachable), or where no blocking call is
// offered, from the I/O thread, so a dead master cannot hold up the caller.
void RedlockBackend::undo_now(std::size_t node, const ReleaseCall& call, std::uint64_t round, Clock::time_point by,
                              bool answered) {
  if (answered)
    if (auto s = nodes_[node]->send_release_now(call, round, by, false); s && s->ok()) {
      (void)nodes_[node]->release_answer(*s->value(), by);
      return;
    }
  asio::post(io_, [this, node, call, round] {
    if (!closed_) nodes_[node]->release_round(call, round, [](Result<ReleaseOutcome>) {});
  });
}

std::optional<Result<ReleaseOutcome>> RedlockBackend::release_now(const ReleaseCall& call) {
  if (!fast_) return std::nullopt;
  settle_late(call.grant);
  detail::Quorum<ReleaseOutcome> answers(nodes_.size(), quorum_);
  std::vector<std::unique_ptr<redis::RedlockMaster::Pending>> sent(nodes_.size());
  // Every answer is read (the connections go back clean); each by the
  // command timeout from the first send, as on the I/O thread.
  const auto by = Clock::now() + command_timeout_;
  each_master_sends(
      [&](std::size_t i, bool pooled_only) { return nodes_[i]->send_release_now(call, 0, by, pooled_only); },
      [&](std::size_t i, Result<std::unique_ptr<redis::RedlockMaster::Pending>> s) {
        if (s.ok())
          sent[i] = std::move(s.value());
        else
          answers.add(i, Result<ReleaseOutcome>(unsent(s.status())));
      });
  while (std::any_of(sent.begin(), sent.end(), [](const auto& p) { return p != nullptr; })) {
    auto ready = readable(sent, by);
    const bool late = ready.empty();  // past `by`: the rest give up at once
    if (late)
      for (std::size_t i = 0; i < sent.size(); ++i)
        if (sent[i]) ready.push_back(i);
    for (std::size_t i : ready) {
      answers.add(i, nodes_[i]->release_answer(*sent[i], by, !late));
      sent[i].reset();
    }
  }
  if (auto out = release_decision(answers)) return std::move(*out);
  return Result<ReleaseOutcome>(answers.failure("release"));
}

}  // namespace dlock::redlock
