// dlock/election.hpp: leader election over a fair lock.
//
//   dlock::Election e(client, "scheduler", "host-a:4242");
//   dlock::Leadership lead = e.campaign().value();   // waits in line to lead
//   while (!lead.lost()) run_one_round(lead.term()); // fence writes with term()
//   lead.resign();
//
// Candidates wait in arrival order; the leader is whoever holds the lock,
// and its term is the grant's fence, so terms strictly increase from leader
// to leader (one master; see Lease::fence): pass term() with every write and
// have the resource refuse a term lower than the highest it has seen, and a
// deposed leader that still believes it leads is refused.
// Leadership is a lease renewed by the watchdog (a session on ZooKeeper); it
// ends when resigned, when its holder dies (after the lease), or when it is
// lost (lost_token() fires first: stop leading then).
// Backends: Redis (one master), ZooKeeper, PostgreSQL, SQLite. Redlock
// refuses it (Errc::invalid_argument, naming why).
#ifndef DLOCK_ELECTION_HPP_
#define DLOCK_ELECTION_HPP_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/export.hpp"
#include "dlock/lease.hpp"
#include "dlock/options.hpp"

namespace dlock {

struct DLOCK_EXPORT LeaderInfo {
  std::string id;          // the leader's candidate id
  std::uint64_t term = 0;  // its grant's fence
  bool operator==(const LeaderInfo&) const = default;
};

// What a won campaign returns: move-only, resigns when destroyed.
class DLOCK_EXPORT Leadership {
 public:
  Leadership() = default;
  std::uint64_t term() const { return term_; }  // 0 for an empty Leadership
  const std::string& id() const { return id_; }
  bool lost() const noexcept { return lease_.lost(); }
  std::stop_token lost_token() const noexcept { return lease_.lost_token(); }
  // Until when this leadership is known to be valid (Lease::valid_until):
  // act as leader only before it, even if no loss was signalled yet (a
  // starved process may learn of a loss late).
  std::chrono::steady_clock::time_point valid_until() const { return lease_.valid_until(); }
  // Held, not lost, and still valid by the steady clock.
  bool leading() const noexcept {
    return lease_.held() && !lease_.lost() && std::chrono::steady_clock::now() < lease_.valid_until();
  }
  // Steps down (the next candidate in line leads at once). Errors as
  // Lease::release.
  Status resign() { return lease_.release(); }

 private:
  friend class Election;
  Leadership(Lease lease, std::string id) : lease_(std::move(lease)), id_(std::move(id)), term_(lease_.fence()) {}
  Lease lease_;
  std::string id_;
  std::uint64_t term_ = 0;
};

// Stops its observation when destroyed (waiting for a callback that is
// running, unless destroyed inside that callback).
class DLOCK_EXPORT Observation {
 public:
  Observation() = default;
  ~Observation();
  Observation(Observation&&) noexcept = default;
  Observation& operator=(Observation&& other) noexcept;
  void stop() noexcept;

 private:
  friend class Election;
  explicit Observation(std::function<void()> stop) : stop_(std::move(stop)) {}
  std::function<void()> stop_;
};

class DLOCK_EXPORT Election {
 public:
  // candidate_id: what others see as the leader's id (at most
  // kMaxHolderInfo bytes, no NUL byte; not a secret: campaign() refuses
  // others with Errc::invalid_argument). options as for Client::acquire
  // (fair is set: candidates wait in line); owner and holder must be left
  // empty (campaign() refuses them with invalid_argument).
  Election(Client client, std::string name, std::string candidate_id, LockOptions options = {});

  // Waits up to `wait` to lead. Errc::timeout (or busy for wait 0) when
  // another candidate leads throughout; others as Client::acquire.
  Result<Leadership> campaign(milliseconds wait = kForever);
  // The current leader as the server sees it; nullopt when nobody leads.
  Result<std::optional<LeaderInfo>> leader() const;
  // Calls `on_change` with the leader (nullopt: none) now and at every
  // change, on the client's I/O thread (it must not block). Changes come
  // from the lock's release and hand-over notifications (on ZooKeeper, a
  // watch on its queue), and from the leader's lease running out. Returns
  // once the first call was made (or the first look failed: the next one
  // follows), so no change after it returns goes untold; changes in quick
  // succession may be told as one, the latest.
  Observation observe(std::function<void(const std::optional<LeaderInfo>&)> on_change);

  const std::string& name() const { return name_; }
  const std::string& id() const { return id_; }

 private:
  Client client_;
  std::string name_;
  std::string id_;
  LockOptions options_;
};

}  // namespace dlock

#endif  // DLOCK_ELECTION_HPP_
