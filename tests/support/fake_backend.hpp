// An in-memory lock backend for unit tests of ClientCore's decisions, with
// switches for the faults real servers have (leveldb's fault-injecting Env
// is the model): a reply dropped after the call was applied, a reply held
// back and delivered late, a call refused, the link down, a refused watch, a
// holder's TTL, a session that expires. Its capabilities are settable, so
// the same core is driven as Redis (renewal, server-side re-entry) or as a
// ZooKeeper-like backend (session liveness pushed, re-entry counted by the
// client, FIFO attempts).
//
// Semantics follow the Redis scripts: one exclusive holder per name,
// idempotent replays of acquire and release (the `held` count), owner- and
// grant-checked release and renewal, a release to depth 0 publishes. Fair,
// shared and counted calls (and every call on a name that has them) run
// core/lock_line's decisions, and a hand-over is published to every client.
//
// Several clients may share one FakeServer, as they would a server: a
// release is published to all of them; link, session and liveness switches
// reach all of them.
//
// Threading: Backend calls arrive on the clients' I/O threads; the switches
// and inspectors are called from the test's thread. One mutex guards all.
#ifndef DLOCK_TESTS_SUPPORT_FAKE_BACKEND_HPP_
#define DLOCK_TESTS_SUPPORT_FAKE_BACKEND_HPP_

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend.hpp"
#include "core/lock_line.hpp"
#include "core/lock_row.hpp"

namespace dlock::testing {

class FakeBackend;

// What the test holds: the switches, shared with the backend the client
// owns (the client builds it on its own I/O loop).
struct FakeServer {
  // expires_ms: on the steady clock (steady_ms()); kNoExpiry: never.
  using Lock = detail::LockRow;
  static std::int64_t steady_ms();

  // Set before connecting.
  detail::Capabilities caps;
  // Offer the blocking fast path (acquire_now, release_now on the callers'
  // threads), as Redis, SQL and ZooKeeper do.
  bool fast_path = false;
  // Runs on the caller's thread at the start of each release_now, before it
  // is applied and without the server's lock: a test parks a fast release
  // here to let another thread's call overtake it.
  std::function<void()> before_release_now;
  // Runs on the client's I/O thread at the start of each acquire(), before
  // it is applied and without the server's lock: a test blocks the I/O
  // thread here.
  std::function<void(const std::string& name)> before_acquire;
  // Runs on the caller's thread inside each acquire_now, after it was
  // applied: a test moves its clock here, as if the reply came late.
  std::function<void()> during_acquire_now;
  // Runs on the caller's thread when acquire_now has its answer, without
  // the server's lock: a test ends the session here, before the client can
  // stage the grant.
  std::function<void()> after_acquire_now;
  // While set, the next busy answer of acquire() (the I/O thread's) is
  // overtaken by the lock's release: the lock is freed and its release
  // published, naming the attempt (as a queue backend names the waiter
  // whose predecessor went), before the busy answer is delivered. That
  // answer says the backend watches already (WaitHint::watched).
  std::atomic<bool> release_before_busy{false};
  // While false, release_now is not offered (as a backend whose blocking
  // connections are all busy): the release must go through the I/O thread.
  std::atomic<bool> release_now_offered{true};

  // --- switches (any thread) ---
  // The next `n` acquire (release) calls are applied but answered
  // outcome_unknown: the reply was lost.
  void drop_acquire_replies(int n);
  void drop_release_replies(int n);
  // Acquire call number `index` (1-based, counted over the whole run) is
  // applied at once but its reply is held until flush().
  void hold_acquire_reply(int index);
  void flush();  // delivers held replies, oldest first
  // While on, abandon calls are held, not applied: flush() applies them
  // (answered ok); a client that closes first cancels them unapplied, as a
  // request its closed connection never sent.
  void hold_abandons(bool on);
  // The next `n` calls of any kind fail with `status`, applying nothing.
  void fail_calls(int n, Status status);
  // Renewals fail (unavailable) while set.
  void fail_renewals(bool on);
  // Watches are refused (permission_denied), as for an ACL user without
  // channel rights.
  void refuse_watches(bool on);
  // The lease of holds made by take() (nullopt: no expiry); default 30 s.
  void set_holder_ttl(std::optional<std::chrono::milliseconds> ttl);
  // Another client's hold (owner "other"), for the holder TTL.
  void take(const std::string& name);
  // A waiter (owner "ghost") joins `name`'s line and never comes back, as
  // a client that died in line: its place, and a grant handed to it, last
  // `lease`.
  void queue_ghost(const std::string& name, std::chrono::milliseconds lease);
  // Deletes the lock as an expiry would; publish: as a release would.
  void drop(const std::string& name, bool publish);
  // Deletes the holder of `name`'s line granted with `fence`, as an operator
  // would (nobody is told); false when there is none.
  bool drop_hold(const std::string& name, std::uint64_t fence);
  void link(bool up);
  void session_lost(LossReason reason);
  // Tells every client these holds are gone (empty: the session's, and
  // the server forgets every lock) and returns once each I/O thread has
  // told its core (never call it on an I/O thread).
  void lost_delivered(std::vector<detail::HoldRef> holds, LossReason reason);
  void alive_until(std::chrono::steady_clock::time_point until);

  // --- inspectors (any thread) ---
  std::optional<Lock> lock(const std::string& name);
  int acquires();
  int releases();
  int renewals();
  int held_replies();
  std::vector<detail::AbandonCall> abandons();
  std::vector<detail::AcquireCall> acquire_calls();
  std::vector<detail::WatchKey> watches();  // every watch() call
  int backends_destroyed();                 // the server may go once this counts every client

  // The maker for ClientCore::connect_with.
  std::function<std::unique_ptr<detail::Backend>(boost::asio::io_context&)> maker();

 private:
  friend class FakeBackend;
  // The live lock under `name` (an expired one is removed), or null.
  // REQUIRES: mu_ held.
  Lock* live(const std::string& name);
  std::mutex mu_;
  std::vector<FakeBackend*> backends_;    // every open client's (guarded by mu_)
  void publish(const std::string& name);  // to every client; REQUIRES: mu_ held
  template <class F>
  void each_backend(F f);  // REQUIRES: mu_ held
  std::map<std::string, Lock> locks_;
  // Names used by fair, shared or counted calls: their whole state (a plain
  // hold of such a name moves in here).
  std::map<std::string, detail::LineState> lines_;
  // The line of `name`, with a plain hold of it moved in. REQUIRES: mu_ held.
  detail::LineState& line(const std::string& name);
  void hand_over(const std::string& name, const std::vector<detail::Handed>& to);  // REQUIRES: mu_ held
  std::uint64_t fence_ = 0;
  int drop_ = 0;
  int drop_release_ = 0;
  std::optional<int> hold_index_;
  int fail_ = 0;
  Status fail_status_;
  bool fail_renewals_ = false;
  bool refuse_watches_ = false;
  bool hold_abandons_ = false;
  std::optional<std::chrono::milliseconds> ttl_ = std::chrono::milliseconds(30000);
  int acquires_ = 0, releases_ = 0, renewals_ = 0, destroyed_ = 0;
  std::vector<std::function<void(bool cancel)>> held_;
  std::vector<detail::AbandonCall> abandons_;
  std::vector<detail::AcquireCall> acquire_calls_;
  std::vector<detail::WatchKey> watches_;
  std::map<std::string, int> watching_;  // live watches per name
};

}  // namespace dlock::testing

#endif  // DLOCK_TESTS_SUPPORT_FAKE_BACKEND_HPP_
