// How long the ZooKeeper leader is known to keep this client's session.
//
// Only the leader expires sessions: at the last touch it has applied plus
// the session timeout. A follower answers reads by itself and touches the
// session only locally; it relays its touches in its reply to the leader's
// PING (sent every tickTime/2), so a follower cut off from the leader keeps
// answering reads while the leader expires the session. A read proves
// nothing about the leader.
//
// A `sync` does go through the leader, and its answer proves two things
// (ZooKeeper 3.8: Learner, LearnerHandler, Leader.processSync):
//   - the session was not expired when the leader handled it: an expiry
//     queues the closeSession proposal and commit on the follower's stream
//     ahead of the sync's answer, so the follower closes the connection
//     before it answers the sync;
//   - every packet the follower wrote to the leader before it forwarded the
//     sync was handled first (one stream, read in order; PING touches are
//     applied as they are read).
// A sync does not touch the session at the leader (its checkSession does
// not), so the proof needs a touch relayed before it. Three syncs j < i < k
// on one connection, each sent after the previous one's answer, with i
// sent at least timeout/3 after j's answer:
//   1. j's touch happened at the follower before j's answer;
//   2. the leader queued a PING to the follower after j's answer and before
//      it handled i (it pings every tickTime/2 <= timeout/4 < timeout/3,
//      the server clamping timeouts to >= 2 ticks), so the follower
//      handled that PING, and wrote its reply carrying j's touch, before
//      i's answer (the leader's stream is in order too);
//   3. k was forwarded after i's answer, so behind that reply: when k is
//      answered, the leader had applied j's touch while the session was
//      alive (touching an expired session does nothing, and k would fail).
// So k's answer vouches for the session until j's send time + timeout
// (less drift). Syncs every timeout/6 make j = k - 3 and the proof reach
// about timeout/2 past the newest sync. The sound bound holds for faults in
// either direction of the follower's leader link, and for a client talking
// to the leader itself (stronger proofs are then ignored).
#ifndef DLOCK_ZOOKEEPER_LEADER_PROOF_HPP_
#define DLOCK_ZOOKEEPER_LEADER_PROOF_HPP_

#include <chrono>
#include <deque>
#include <optional>

namespace dlock::zookeeper {

class LeaderProof {
 public:
  using Clock = std::chrono::steady_clock;
  using milliseconds = std::chrono::milliseconds;

  explicit LeaderProof(milliseconds timeout) : timeout_(timeout) {}
  void set_timeout(milliseconds timeout) { timeout_ = timeout; }

  // How long after one sync's answer the next is sent.
  milliseconds interval() const { return timeout_ / 6; }

  // A new connection: syncs of the old one prove nothing any more.
  void reset() { beats_.clear(); }

  // A sync sent at `sent` on the current connection, after the previous
  // sync's answer, was answered at `replied`. Returns the send time of the
  // newest earlier sync whose touch the leader is now known to have applied.
  std::optional<Clock::time_point> answered(Clock::time_point sent, Clock::time_point replied) {
    beats_.push_back({sent, replied});
    if (beats_.size() > 32) beats_.pop_front();  // syncs spaced too closely never prove anything
    if (beats_.size() < 3) return std::nullopt;
    const Clock::time_point i_sent = beats_[beats_.size() - 2].sent;
    for (std::size_t j = beats_.size() - 2; j-- > 0;) {
      if (i_sent >= beats_[j].replied + timeout_ / 3) {
        const Clock::time_point proven = beats_[j].sent;
        beats_.erase(beats_.begin(), beats_.begin() + static_cast<std::ptrdiff_t>(j));
        return proven;
      }
    }
    return std::nullopt;
  }

 private:
  struct Beat {
    Clock::time_point sent, replied;
  };
  milliseconds timeout_;
  std::deque<Beat> beats_;
};

}  // namespace dlock::zookeeper

#endif  // DLOCK_ZOOKEEPER_LEADER_PROOF_HPP_
