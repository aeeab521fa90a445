// The ZooKeeper C client (libzookeeper-mt) behind an Asio loop.
//
// The C client runs two threads of its own: its I/O thread and a completion
// thread that calls every completion and watcher. Nothing runs there but a
// copy of the result (the library owns its strings and frees them when the
// call returns) and a post to the client's loop: every reply, watch event
// and session event reaches its handler on the loop's thread, so lock logic
// stays on one thread.
//
// Its traps, handled here once:
//   - the global watcher gets every session event and every node event of
//     watches set with watch=1; per-call watcher contexts (which the library
//     keeps across session events and frees nowhere we can see) are never
//     used;
//   - no synchronous call on the completion thread (we make none there);
//   - zookeeper_close() runs every pending completion (ZCLOSING) and joins
//     the library's threads: a replaced session is closed on a helper
//     thread, joined at close(), so its completions still reach the loop;
//   - a reply from an earlier session (a handle since replaced) arrives as
//     ZSESSIONEXPIRED whatever the server said.
//
// A session is one handle: open() makes a new one (a new session, never a
// re-attach to an old one).
#ifndef DLOCK_ZOOKEEPER_ZK_SESSION_HPP_
#define DLOCK_ZOOKEEPER_ZK_SESSION_HPP_

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/error.hpp"
#include "zookeeper/config.hpp"

namespace dlock::zookeeper {

// The parts of a node's Stat the lock uses.
struct NodeStat {
  std::int64_t czxid = 0;            // the zxid that created it: the fence
  std::int64_t pzxid = 0;            // last change to its children
  std::int64_t ephemeral_owner = 0;  // the session that owns it (0: persistent)
};

struct Reply {
  int rc = 0;                         // ZOK or a ZooKeeper error code
  std::string path;                   // create: the node made
  std::string data;                   // get
  NodeStat stat;                      // create, exists, get, children (the parent's)
  std::vector<std::string> children;  // children
  std::chrono::steady_clock::time_point sent_at;
};
using ReplyFn = std::function<void(Reply)>;

struct SessionState {
  int state = 0;                         // ZOO_CONNECTED_STATE, ZOO_CONNECTING_STATE, ZOO_EXPIRED_SESSION_STATE, ...
  std::int64_t session_id = 0;           // when connected
  std::chrono::milliseconds timeout{0};  // negotiated, when connected
};

class ZkSession {
 public:
  struct Handlers {
    std::function<void(const SessionState&)> state;
    std::function<void(int type, const std::string& path)> node;  // a watched node changed or went
  };
  ZkSession(boost::asio::io_context& io, const ZkConfig& config, Handlers handlers);
  ~ZkSession();

  // A new handle and session (the current one, if any, is closed on a helper
  // thread). Connecting goes on in the background; Handlers::state tells.
  Status open();
  // Closes the current session (its ephemeral nodes go at once if the server
  // is reachable), joins the helpers. Pending calls complete with ZCLOSING.
  void close();

  // Where a reply goes: posted to the loop's thread (the lock logic's), or
  // handed over on the C client's completion thread (the blocking fast
  // path: `done` only passes it to the waiting caller; a refusal at once is
  // handed over on the calling thread).
  enum class Delivery { loop, direct };

  // Asynchronous calls, from any thread; the reply reaches `done` exactly
  // once (ZINVALIDSTATE at once when no handle is open).
  void create(const std::string& path, const std::string& data, int flags, bool creator_acl, ReplyFn done,
              Delivery via = Delivery::loop);
  void remove(const std::string& path, ReplyFn done, Delivery via = Delivery::loop);
  void exists(const std::string& path, bool watch, ReplyFn done);
  // With `watch`, a node that exists is watched (its change or deletion
  // comes to Handlers::node); a missing one leaves no watch behind, unlike
  // exists(), whose watch waits for a creation that may never come.
  void get(const std::string& path, bool watch, ReplyFn done);
  // With `watch`, a change to the node's children (or its deletion) comes
  // to Handlers::node under the node's own path.
  void children(const std::string& path, ReplyFn done, Delivery via = Delivery::loop, bool watch = false);
  // A round trip through the leader (the server forwards it and answers
  // once the leader has). Like the C client's own pings, not counted in
  // calls(): it keeps the session's proof, it is no lock command.
  void sync(const std::string& path, ReplyFn done);
  // For the current handle, resent on every reconnect.
  Status add_digest_auth(const std::string& user, const std::string& password);

  std::uint64_t calls() const { return calls_.load(std::memory_order_relaxed); }

  struct Bridge;  // what the C client's threads see (internal)
  struct Handle;
  friend struct ZkCallbacks;

 private:
  // How long close() waits for the requests out to be answered.
  static constexpr std::chrono::milliseconds kDrainAtClose{500};

  template <class Call>
  void submit(ReplyFn done, Delivery via, Call call, bool counted = true);
  void deliver(std::uint64_t generation, ReplyFn& done, Reply& reply);
  void on_watch(std::uint64_t generation, int type, int state, const std::string& path, std::int64_t session,
                int timeout_ms);
  boost::asio::io_context& io_;
  const ZkConfig& config_;
  Handlers handlers_;
  std::shared_ptr<Bridge> bridge_;
  std::mutex mu_;                    // current_, against calls from other threads
  std::unique_ptr<Handle> current_;  // guarded by mu_
  // Replaced sessions being closed; each is joined once done (at the next
  // open()) or at close().
  struct Closer {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Closer> closers_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<std::uint64_t> calls_{0};
};

// "ZNONODE", "ZCONNECTIONLOSS", ... for Status::backend_code().
std::string rc_name(int rc);
// What a ZooKeeper error means for the caller. Connection loss and
// operation timeouts are `unknown_as` (unavailable for reads, outcome_unknown
// for writes whose effect cannot be told).
Status rc_status(int rc, std::string_view what, Errc unknown_as = Errc::unavailable);

}  // namespace dlock::zookeeper

#endif  // DLOCK_ZOOKEEPER_ZK_SESSION_HPP_
