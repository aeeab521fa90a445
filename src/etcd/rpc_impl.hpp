// What etcd_rpc.cpp and etcd_streams.cpp share: the channel, the stubs, the
// auth token, and how a gRPC status reads as a dlock Status. Internal: the
// only etcd file that includes gRPC's headers besides those two.
#ifndef DLOCK_ETCD_RPC_IMPL_HPP_
#define DLOCK_ETCD_RPC_IMPL_HPP_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "etcd/etcd_rpc.hpp"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace dlock::etcd {

namespace pb = etcdserverpb;

// A call with no deadline of its own still ends: a member that accepts
// connections and never answers must not hold a caller forever.
inline constexpr std::chrono::seconds kLongestCall{30};

// `left` from now on gRPC's monotonic clock: a deadline no jump of the
// wall clock moves.
inline gpr_timespec deadline_in(Clock::duration left) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::max(left, Clock::duration::zero()));
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_nanos(ns.count(), GPR_TIMESPAN));
}

Status status_of(const grpc::Status& s, bool write);
KeyValue from_pb(const mvccpb::KeyValue& kv);
// The server refused the call for an expired or missing token: nothing
// was applied, and the call may be made again after authenticating.
bool token_expired(const grpc::Status& s);

struct EtcdRpc::Impl {
  Impl(EtcdConfig c, std::shared_ptr<grpc::ChannelCredentials> credentials);
  // Cancels the asynchronous calls still out and waits for their callbacks.
  ~Impl();

  void prepare(grpc::ClientContext& ctx, Clock::time_point by);
  // A stream's context: the token, no deadline (it lives until cancelled).
  void prepare_stream(grpc::ClientContext& ctx);
  Result<Range> range(const pb::RangeRequest& req, Clock::time_point by);
  Status authenticate(Clock::time_point by);

  // Runs `call` with a context bounded by `by`; an expired token is
  // renewed once (the server refused the call: nothing was applied).
  template <class Call>
  Status invoke(Call&& call, Clock::time_point by, bool write) {
    for (int attempt = 0;; ++attempt) {
      grpc::ClientContext ctx;
      prepare(ctx, by);
      const grpc::Status s = call(ctx);
      if (s.ok()) return {};
      if (attempt == 0 && !config.user.empty() && token_expired(s) && authenticate(by).ok()) continue;
      return status_of(s, write);
    }
  }

  // The asynchronous form: `start(ctx, req, resp, callback)` makes the call
  // on a stub's async() interface; `done(status, resp)` runs once, on a
  // gRPC thread. An expired token is renewed (blocking, on that thread:
  // rare) and the call made once more.
  template <class Req, class Resp, class Start, class Done>
  void invoke_async(std::shared_ptr<const Req> req, Start start, Clock::time_point by, bool write, Done done,
                    bool again = false) {
    struct Pending {
      grpc::ClientContext ctx;
      Resp resp;
    };
    auto p = std::make_shared<Pending>();
    prepare(p->ctx, by);
    if (!track(&p->ctx)) return done(Status(Errc::cancelled, "etcd: client closed"), p->resp);
    start(&p->ctx, req.get(), &p->resp,
          [this, p, req, start, by, write, again, done = std::move(done)](grpc::Status s) mutable {
            // Untracked last: the destructor waits until `done` has run.
            if (!s.ok() && !again && !config.user.empty() && token_expired(s) && authenticate(by).ok())
              invoke_async<Req, Resp>(std::move(req), std::move(start), by, write, std::move(done), true);
            else
              done(s.ok() ? Status() : status_of(s, write), p->resp);
            untrack(&p->ctx);
          });
  }

  // A transaction on the caller's thread (the fast path), bounded by `by`.
  Status txn_now(const pb::TxnRequest& req, pb::TxnResponse& resp, Clock::time_point by) {
    return invoke([&](grpc::ClientContext& ctx) { return pick().kv->Txn(&ctx, req, &resp); }, by, true);
  }

  // What invoke_async starts for a transaction.
  auto txn_start() {
    return [this](grpc::ClientContext* c, const pb::TxnRequest* q, pb::TxnResponse* r,
                  std::function<void(grpc::Status)> f) { pick().kv->async()->Txn(c, q, r, std::move(f)); };
  }

  // One member: its own channel ("dns:///host:port", so gRPC resolves the
  // name again when a connection fails, and TLS checks this member's own
  // name) and the stubs on it.
  struct Member {
    std::string endpoint;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<pb::KV::Stub> kv;
    std::unique_ptr<pb::Lease::Stub> lease;
    std::unique_ptr<pb::Watch::Stub> watch;
    std::unique_ptr<pb::Maintenance::Stub> maintenance;
    std::unique_ptr<pb::Auth::Stub> auth;
    // Until then (steady clock, ns), passed over while another is
    // connected: a probe found it silent (frozen, or cut off).
    std::unique_ptr<std::atomic<Clock::rep>> suspect_until = std::make_unique<std::atomic<Clock::rep>>(0);
  };
  // The member for the next call: the members connected now in turn (as
  // etcd's own client balances: a call that failed on one, frozen, gone or
  // cut off, is made again on the next); when none is, the next one that
  // may still connect, every idle one asked to connect. Any thread.
  Member& pick(std::optional<std::size_t> avoid = std::nullopt);
  std::size_t index_of(const Member& m) const { return static_cast<std::size_t>(&m - members.data()); }
  // True once a member is connected, false at `by`.
  bool wait_connected(Clock::time_point by);

  EtcdConfig config;
  std::vector<Member> members;
  std::mutex mu;
  std::string token;  // under mu

 private:
  // Asynchronous calls out, so the destructor can end them.
  bool track(grpc::ClientContext* ctx);
  void untrack(grpc::ClientContext* ctx);
  std::mutex calls_mu_;
  std::condition_variable calls_cv_;
  std::set<grpc::ClientContext*> calls_;  // under calls_mu_
  bool closing_ = false;                  // under calls_mu_
  std::atomic<std::size_t> next_{0};      // pick()'s turn
};

}  // namespace dlock::etcd

#endif  // DLOCK_ETCD_RPC_IMPL_HPP_
