#include "etcd/etcd_rpc.hpp"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <mutex>
#include <utility>

#include "etcdserverpb/rpc.grpc.pb.h"

namespace dlock::etcd {
namespace {

namespace pb = etcdserverpb;

// A call with no deadline of its own still ends: a member that accepts
// connections and never answers must not hold a caller forever.
constexpr std::chrono::seconds kLongestCall{30};

Status status_of(const grpc::Status& s, bool write) {
  const std::string what = "etcd: " + s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::OK:
      return {};
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::CANCELLED:
      // A write may have been applied before its answer was lost.
      if (write) return {Errc::outcome_unknown, what + " (the write may have been applied)"};
      return {Errc::unavailable, what};
    case grpc::StatusCode::UNAUTHENTICATED:
      return {Errc::auth_failed, what};
    case grpc::StatusCode::PERMISSION_DENIED:
      return {Errc::permission_denied, what};
    case grpc::StatusCode::NOT_FOUND:  // "requested lease not found"
      return {Errc::not_held, what};
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
      // etcd answers a wrong password, a missing token and an expired one
      // with InvalidArgument.
      for (const char* auth : {"authentication failed", "user name is empty", "invalid auth token"})
        if (s.error_message().find(auth) != std::string::npos) return {Errc::auth_failed, what};
      return {Errc::invalid_argument, what};
    default:
      return {Errc::server_error, what};
  }
}

KeyValue from_pb(const mvccpb::KeyValue& kv) {
  return {kv.key(), kv.value(), kv.create_revision(), kv.mod_revision(), kv.version(), kv.lease()};
}

// gRPC's target for the endpoints: every member by address when they are
// all IPv4 literals (gRPC then moves to the next when one fails), else the
// first by name.
std::string target_of(const std::vector<std::string>& endpoints) {
  const bool literal = std::all_of(endpoints.begin(), endpoints.end(), [](const std::string& e) {
    return !e.empty() && e.find_first_not_of("0123456789.:") == std::string::npos;
  });
  if (!literal) return "dns:///" + endpoints.front();
  std::string t = "ipv4:";
  for (std::size_t i = 0; i < endpoints.size(); ++i) t += (i ? "," : "") + endpoints[i];
  return t;
}

}  // namespace

std::string prefix_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

struct EtcdRpc::Impl {
  EtcdConfig config;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::KV::Stub> kv;
  std::unique_ptr<pb::Lease::Stub> lease;
  std::unique_ptr<pb::Maintenance::Stub> maintenance;
  std::unique_ptr<pb::Auth::Stub> auth;
  std::mutex mu;
  std::string token;  // under mu

  explicit Impl(EtcdConfig c) : config(std::move(c)) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    channel = grpc::CreateCustomChannel(target_of(config.endpoints), grpc::InsecureChannelCredentials(), args);
    kv = pb::KV::NewStub(channel);
    lease = pb::Lease::NewStub(channel);
    maintenance = pb::Maintenance::NewStub(channel);
    auth = pb::Auth::NewStub(channel);
  }

  void prepare(grpc::ClientContext& ctx, Clock::time_point by) {
    const auto now = Clock::now();
    const auto left = std::min<Clock::duration>(by - now, kLongestCall);
    ctx.set_deadline(std::chrono::system_clock::now() + std::max<Clock::duration>(left, Clock::duration::zero()));
    std::lock_guard lock(mu);
    if (!token.empty()) ctx.AddMetadata("token", token);
  }

  Result<Range> range(const pb::RangeRequest& req, Clock::time_point by) {
    pb::RangeResponse resp;
    if (Status s = invoke([&](grpc::ClientContext& c) { return kv->Range(&c, req, &resp); }, by, false); !s.ok())
      return s;
    Range out;
    out.revision = resp.header().revision();
    for (const auto& x : resp.kvs()) out.kvs.push_back(from_pb(x));
    return out;
  }

  Status authenticate(Clock::time_point by) {
    pb::AuthenticateRequest req;
    req.set_name(config.user);
    req.set_password(config.password);
    pb::AuthenticateResponse resp;
    grpc::ClientContext ctx;
    {
      std::lock_guard lock(mu);
      token.clear();
    }
    prepare(ctx, by);
    if (Status s = status_of(auth->Authenticate(&ctx, req, &resp), false); !s.ok()) return s;
    std::lock_guard lock(mu);
    token = resp.token();
    return {};
  }

  // Runs `call` with a context bounded by `by`; an expired token is
  // renewed once (the server refused the call: nothing was applied).
  template <class Call>
  Status invoke(Call&& call, Clock::time_point by, bool write) {
    for (int attempt = 0;; ++attempt) {
      grpc::ClientContext ctx;
      prepare(ctx, by);
      const grpc::Status s = call(ctx);
      if (s.ok()) return {};
      if (attempt == 0 && !config.user.empty() && s.error_message().find("invalid auth token") != std::string::npos &&
          authenticate(by).ok())
        continue;
      return status_of(s, write);
    }
  }
};

EtcdRpc::EtcdRpc(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EtcdRpc::~EtcdRpc() = default;

Result<std::unique_ptr<EtcdRpc>> EtcdRpc::connect(EtcdConfig config, Clock::time_point by) {
  if (config.endpoints.empty()) return Status(Errc::invalid_argument, "etcd: no endpoints");
  auto impl = std::make_unique<Impl>(std::move(config));
  // Wait for a connection (the first call would fail fast otherwise).
  const auto left = std::max<Clock::duration>(std::min<Clock::duration>(by - Clock::now(), kLongestCall), {});
  if (!impl->channel->WaitForConnected(std::chrono::system_clock::now() + left))
    return Status(Errc::unavailable, "etcd: no member of the cluster answered in time");
  if (!impl->config.user.empty())
    if (Status s = impl->authenticate(by); !s.ok()) return s;
  std::unique_ptr<EtcdRpc> rpc(new EtcdRpc(std::move(impl)));
  if (auto st = rpc->status(by); !st.ok()) return st.status();
  return rpc;
}

Result<EtcdRpc::Range> EtcdRpc::range(std::string_view key, std::string_view range_end, Clock::time_point by) {
  pb::RangeRequest req;
  req.set_key(std::string(key));
  if (!range_end.empty()) req.set_range_end(std::string(range_end));
  return impl_->range(req, by);
}

Result<EtcdRpc::Range> EtcdRpc::last_created_before(std::string_view prefix, std::int64_t max_create_revision,
                                                    Clock::time_point by) {
  pb::RangeRequest req;
  req.set_key(std::string(prefix));
  req.set_range_end(prefix_end(prefix));
  req.set_sort_target(pb::RangeRequest::CREATE);
  req.set_sort_order(pb::RangeRequest::DESCEND);
  req.set_limit(1);
  req.set_max_create_revision(max_create_revision);
  return impl_->range(req, by);
}

Result<std::int64_t> EtcdRpc::put(std::string_view key, std::string_view value, std::int64_t lease,
                                  Clock::time_point by) {
  pb::PutRequest req;
  req.set_key(std::string(key));
  req.set_value(std::string(value));
  req.set_lease(lease);
  pb::PutResponse resp;
  if (Status s = impl_->invoke([&](grpc::ClientContext& c) { return impl_->kv->Put(&c, req, &resp); }, by, true);
      !s.ok())
    return s;
  return resp.header().revision();
}

Result<std::int64_t> EtcdRpc::erase(std::string_view key, Clock::time_point by) {
  pb::DeleteRangeRequest req;
  req.set_key(std::string(key));
  pb::DeleteRangeResponse resp;
  if (Status s =
          impl_->invoke([&](grpc::ClientContext& c) { return impl_->kv->DeleteRange(&c, req, &resp); }, by, true);
      !s.ok())
    return s;
  return resp.deleted();
}

Result<EtcdRpc::Created> EtcdRpc::create(std::string_view key, std::string_view value, std::int64_t lease,
                                         Clock::time_point by) {
  pb::TxnRequest req;
  auto* cmp = req.add_compare();
  cmp->set_key(std::string(key));
  cmp->set_target(pb::Compare::CREATE);
  cmp->set_result(pb::Compare::EQUAL);
  cmp->set_create_revision(0);
  auto* put = req.add_success()->mutable_request_put();
  put->set_key(std::string(key));
  put->set_value(std::string(value));
  put->set_lease(lease);
  req.add_success()->mutable_request_range()->set_key(std::string(key));
  req.add_failure()->mutable_request_range()->set_key(std::string(key));
  pb::TxnResponse resp;
  if (Status s = impl_->invoke([&](grpc::ClientContext& c) { return impl_->kv->Txn(&c, req, &resp); }, by, true);
      !s.ok())
    return s;
  Created out;
  out.created = resp.succeeded();
  out.revision = resp.header().revision();
  for (const auto& op : resp.responses())
    if (op.has_response_range() && op.response_range().kvs_size() > 0) out.kv = from_pb(op.response_range().kvs(0));
  if (out.kv.key.empty())
    return Status(Errc::protocol_error, "etcd: a transaction that created or found a key did not read it back");
  return out;
}

Result<std::int64_t> EtcdRpc::lease_grant(std::int64_t ttl_seconds, Clock::time_point by) {
  pb::LeaseGrantRequest req;
  req.set_ttl(ttl_seconds);
  pb::LeaseGrantResponse resp;
  if (Status s =
          impl_->invoke([&](grpc::ClientContext& c) { return impl_->lease->LeaseGrant(&c, req, &resp); }, by, true);
      !s.ok())
    return s;
  if (!resp.error().empty()) return Status(Errc::server_error, "etcd: " + resp.error());
  return resp.id();
}

Status EtcdRpc::lease_revoke(std::int64_t id, Clock::time_point by) {
  pb::LeaseRevokeRequest req;
  req.set_id(id);
  pb::LeaseRevokeResponse resp;
  return impl_->invoke([&](grpc::ClientContext& c) { return impl_->lease->LeaseRevoke(&c, req, &resp); }, by, true);
}

Result<std::int64_t> EtcdRpc::lease_time_to_live(std::int64_t id, Clock::time_point by) {
  pb::LeaseTimeToLiveRequest req;
  req.set_id(id);
  pb::LeaseTimeToLiveResponse resp;
  if (Status s = impl_->invoke([&](grpc::ClientContext& c) { return impl_->lease->LeaseTimeToLive(&c, req, &resp); },
                               by, false);
      !s.ok())
    return s;
  return resp.ttl();
}

Result<EtcdRpc::MemberStatus> EtcdRpc::status(Clock::time_point by) {
  pb::StatusRequest req;
  pb::StatusResponse resp;
  if (Status s =
          impl_->invoke([&](grpc::ClientContext& c) { return impl_->maintenance->Status(&c, req, &resp); }, by, false);
      !s.ok())
    return s;
  return MemberStatus{resp.header().member_id(), resp.leader(), resp.raftterm(), resp.version()};
}

}  // namespace dlock::etcd
