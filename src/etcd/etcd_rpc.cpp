#include "etcd/etcd_rpc.hpp"

#include <grpc/support/log.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include "etcd/rpc_impl.hpp"

namespace dlock::etcd {

Status status_of(const grpc::Status& s, bool write) {
  const std::string what = "etcd: " + s.error_message();
  // No answer: a write may have been applied before its answer was lost.
  auto no_answer = [&]() -> Status {
    if (write) return {Errc::outcome_unknown, what + " (the write may have been applied)"};
    return {Errc::unavailable, what};
  };
  switch (s.error_code()) {
    case grpc::StatusCode::OK:
      return {};
    case grpc::StatusCode::UNAVAILABLE:
      // gRPC names a failed handshake in the message it fails calls with.
      for (const char* tls : {"handshake", "CERTIFICATE_VERIFY_FAILED", "certificate verify", "SSL_ERROR"})
        if (s.error_message().find(tls) != std::string::npos) return {Errc::tls_failed, what};
      [[fallthrough]];
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
      return no_answer();
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
    case grpc::StatusCode::RESOURCE_EXHAUSTED:  // "etcdserver: too many requests": nothing applied
      return {Errc::unavailable, what};
    default:
      // The member's own timeouts reach the client as Unknown with Go's
      // text ("context deadline exceeded", "context canceled") or etcd's
      // ("request timed out", "leader changed"): no answer, not a refusal.
      for (const char* timeout :
           {"context deadline exceeded", "context canceled", "request timed out", "leader changed", "no leader"})
        if (s.error_message().find(timeout) != std::string::npos) return no_answer();
      return {Errc::server_error, what};
  }
}

KeyValue from_pb(const mvccpb::KeyValue& kv) {
  return {kv.key(), kv.value(), kv.create_revision(), kv.mod_revision(), kv.version(), kv.lease()};
}

bool token_expired(const grpc::Status& s) {
  // etcd 3.4 answers an expired or unknown token with InvalidArgument or
  // Unauthenticated (by version and path), and a token older than the auth
  // store's last change likewise.
  if (s.error_code() != grpc::StatusCode::INVALID_ARGUMENT && s.error_code() != grpc::StatusCode::UNAUTHENTICATED)
    return false;
  return s.error_message().find("invalid auth token") != std::string::npos ||
         s.error_message().find("revision of auth store is old") != std::string::npos;
}

namespace {

std::string slurp(const std::string& path, bool& ok) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  ok = static_cast<bool>(in) || in.eof();
  return out.str();
}

// True if `pem` holds what `kind` says ("certificate" or "private key"),
// as OpenSSL reads it: a wrong file is named before gRPC, which only says
// that no member answered, is handed it.
bool pem_holds(const std::string& pem, bool key) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return false;
  bool ok = false;
  if (key) {
    EVP_PKEY* k = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
    ok = k != nullptr;
    EVP_PKEY_free(k);
  } else {
    X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    ok = x != nullptr;
    X509_free(x);
  }
  BIO_free(bio);
  ERR_clear_error();
  return ok;
}

// The channel's credentials: plain, or TLS with the files' PEM contents.
Result<std::shared_ptr<grpc::ChannelCredentials>> credentials_of(const EtcdConfig& c) {
  if (!c.tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions o;
  struct File {
    const std::string* path;
    std::string* pem;
    const char* what;
    bool key;
  };
  for (const File& f :
       {File{&c.ca_file, &o.pem_root_certs, "cacert", false}, File{&c.cert_file, &o.pem_cert_chain, "cert", false},
        File{&c.key_file, &o.pem_private_key, "key", true}}) {
    if (f.path->empty()) continue;
    bool ok = false;
    *f.pem = slurp(*f.path, ok);
    if (!ok || f.pem->empty())
      return Status(Errc::invalid_argument, std::string("etcd: cannot read the TLS file ") + f.what + "=" + *f.path);
    if (!pem_holds(*f.pem, f.key))
      return Status(Errc::invalid_argument, std::string("etcd: ") + f.what + "=" + *f.path + " holds no PEM " +
                                                (f.key ? "private key" : "certificate"));
  }
  return grpc::SslCredentials(o);
}

// gRPC's own log lines (process-wide: gpr_set_log_function) go to the
// loggers of the etcd clients alive, as debug, never to stderr; the newest
// line about TLS is kept to name a failed handshake.
struct GrpcLog {
  std::mutex mu;
  std::map<const void*, std::function<void(LogLevel, std::string_view)>> sinks;
  std::string last_tls;
  std::uint64_t tls_lines = 0;
};

GrpcLog& grpc_log() {
  static auto* log = new GrpcLog;  // never destroyed: gRPC's threads may log at exit
  return *log;
}

bool about_tls(std::string_view line) {
  for (std::string_view word : {"ssl", "SSL", "handshake", "Handshake", "certificate", "CERTIFICATE"})
    if (line.find(word) != std::string_view::npos) return true;
  return false;
}

void on_grpc_log(gpr_log_func_args* args) {
  const std::string_view message = args->message != nullptr ? args->message : "";
  const std::string line = "etcd: grpc: " + std::string(message);
  GrpcLog& g = grpc_log();
  // Told under the lock: a client that goes (its sink erased) is never
  // called after its destructor returned.
  std::lock_guard lock(g.mu);
  if (about_tls(message)) {
    g.last_tls.assign(message.substr(0, 400));
    ++g.tls_lines;
  }
  for (const auto& [owner, sink] : g.sinks) sink(LogLevel::debug, line);
}

// The newest TLS line logged after `seen` lines, if any.
std::optional<std::string> tls_line_since(std::uint64_t seen) {
  GrpcLog& g = grpc_log();
  std::lock_guard lock(g.mu);
  if (g.tls_lines == seen) return std::nullopt;
  return g.last_tls;
}

std::uint64_t tls_lines_now() {
  GrpcLog& g = grpc_log();
  std::lock_guard lock(g.mu);
  return g.tls_lines;
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

EtcdRpc::Impl::Impl(EtcdConfig c, std::shared_ptr<grpc::ChannelCredentials> credentials) : config(std::move(c)) {
  // gRPC 1.51 serves callback calls from a completion queue shared by the
  // channels that use it, and tears it down when the last of them goes,
  // racing its own threads still reading it (an abort or a crash as the
  // last etcd client closed). One channel that used it is kept for the
  // process's life (to an address that is never there: it holds no
  // connection), so that queue and its threads stay.
  static const bool kept = [] {
    gpr_set_log_function(on_grpc_log);
    grpc_init();
    auto* anchor = new std::shared_ptr<grpc::Channel>(
        grpc::CreateChannel("unix:/nonexistent/dlock-etcd-anchor", grpc::InsecureChannelCredentials()));
    auto* stub = pb::Maintenance::NewStub(*anchor).release();
    auto* ctx = new grpc::ClientContext;
    ctx->set_deadline(deadline_in(std::chrono::milliseconds(1)));
    auto* req = new pb::StatusRequest;
    auto* resp = new pb::StatusResponse;
    stub->async()->Status(ctx, req, resp, [](grpc::Status) {});
    return true;
  }();
  (void)kept;
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // A member that stopped answering is found by HTTP/2 pings, and its
  // connection dropped (etcd allows a ping every 5 s by default).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 3000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  if (config.log) {
    GrpcLog& g = grpc_log();
    std::lock_guard lock(g.mu);
    g.sinks[this] = config.log;
  }
  // A channel per member, by name: one channel over several names would
  // resolve only the first (gRPC has no target for a list of names), and
  // one over resolved addresses would neither resolve them again nor check
  // each member's certificate against its own name.
  members.reserve(config.endpoints.size());
  for (const std::string& endpoint : config.endpoints) {
    Member m;
    m.endpoint = endpoint;
    m.channel = grpc::CreateCustomChannel("dns:///" + endpoint, credentials, args);
    m.kv = pb::KV::NewStub(m.channel);
    m.lease = pb::Lease::NewStub(m.channel);
    m.watch = pb::Watch::NewStub(m.channel);
    m.maintenance = pb::Maintenance::NewStub(m.channel);
    m.auth = pb::Auth::NewStub(m.channel);
    members.push_back(std::move(m));
  }
}

EtcdRpc::Impl::Member& EtcdRpc::Impl::pick(std::optional<std::size_t> avoid) {
  const std::size_t n = members.size();
  if (n == 1) return members.front();
  const std::size_t start = next_.fetch_add(1, std::memory_order_relaxed) % n;
  // A connected member, trusted first: one suspected (or avoided) only
  // when no other is connected.
  const Clock::rep now = Clock::now().time_since_epoch().count();
  Member* doubtful = nullptr;
  for (std::size_t k = 0; k < n; ++k) {
    Member& m = members[(start + k) % n];
    if (m.channel->GetState(false) != GRPC_CHANNEL_READY) continue;
    if ((avoid && index_of(m) == *avoid) || m.suspect_until->load(std::memory_order_relaxed) > now) {
      if (doubtful == nullptr) doubtful = &m;
      continue;
    }
    return m;
  }
  if (doubtful != nullptr) return *doubtful;
  Member* hopeful = nullptr;
  for (std::size_t k = 0; k < n; ++k) {
    Member& m = members[(start + k) % n];
    const auto state = m.channel->GetState(true);
    if (hopeful == nullptr && state != GRPC_CHANNEL_TRANSIENT_FAILURE && state != GRPC_CHANNEL_SHUTDOWN) hopeful = &m;
  }
  return hopeful != nullptr ? *hopeful : members[start];
}

void EtcdRpc::suspect(std::size_t member, Clock::time_point until) {
  impl_->members.at(member).suspect_until->store(until.time_since_epoch().count(), std::memory_order_relaxed);
}

bool EtcdRpc::other_connected(std::size_t member) const {
  for (std::size_t i = 0; i < impl_->members.size(); ++i)
    if (i != member && impl_->members[i].channel->GetState(false) == GRPC_CHANNEL_READY) return true;
  return false;
}

const std::string& EtcdRpc::endpoint(std::size_t member) const { return impl_->members.at(member).endpoint; }

bool EtcdRpc::Impl::wait_connected(Clock::time_point by) {
  for (;;) {
    for (Member& m : members)
      if (m.channel->GetState(true) == GRPC_CHANNEL_READY) return true;
    const auto now = Clock::now();
    if (now >= by) return false;
    // Woken by the first member's change, or after a short nap for the others.
    members.front().channel->WaitForStateChange(
        members.front().channel->GetState(false),
        deadline_in(std::min<Clock::duration>(by - now, std::chrono::milliseconds(20))));
  }
}

EtcdRpc::Impl::~Impl() {
  {
    GrpcLog& g = grpc_log();
    std::lock_guard lock(g.mu);
    g.sinks.erase(this);
  }
  std::unique_lock lock(calls_mu_);
  closing_ = true;
  for (auto* ctx : calls_) ctx->TryCancel();
  calls_cv_.wait(lock, [&] { return calls_.empty(); });
}

bool EtcdRpc::Impl::track(grpc::ClientContext* ctx) {
  std::lock_guard lock(calls_mu_);
  if (closing_) return false;
  calls_.insert(ctx);
  return true;
}

void EtcdRpc::Impl::untrack(grpc::ClientContext* ctx) {
  std::lock_guard lock(calls_mu_);
  calls_.erase(ctx);
  if (calls_.empty()) calls_cv_.notify_all();
}

void EtcdRpc::Impl::prepare(grpc::ClientContext& ctx, Clock::time_point by) {
  const auto now = Clock::now();
  const auto left = std::min<Clock::duration>(by - now, kLongestCall);
  ctx.set_deadline(deadline_in(left));
  std::lock_guard lock(mu);
  if (!token.empty()) ctx.AddMetadata("token", token);
}

void EtcdRpc::Impl::prepare_stream(grpc::ClientContext& ctx) {
  // A member that lost its leader ends the stream rather than keep it open
  // and silent (etcd's WithRequireLeader): the client goes to another.
  ctx.AddMetadata("hasleader", "true");
  std::lock_guard lock(mu);
  if (!token.empty()) ctx.AddMetadata("token", token);
}

Result<EtcdRpc::Range> EtcdRpc::Impl::range(const pb::RangeRequest& req, Clock::time_point by) {
  pb::RangeResponse resp;
  if (Status s = invoke([&](grpc::ClientContext& c) { return pick().kv->Range(&c, req, &resp); }, by, false); !s.ok())
    return s;
  Range out;
  out.revision = resp.header().revision();
  for (const auto& x : resp.kvs()) out.kvs.push_back(from_pb(x));
  return out;
}

Status EtcdRpc::Impl::authenticate(Clock::time_point by) {
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
  if (Status s = status_of(pick().auth->Authenticate(&ctx, req, &resp), false); !s.ok()) return s;
  std::lock_guard lock(mu);
  token = resp.token();
  return {};
}

EtcdRpc::EtcdRpc(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EtcdRpc::~EtcdRpc() = default;

Result<std::unique_ptr<EtcdRpc>> EtcdRpc::connect(EtcdConfig config, Clock::time_point by) {
  if (config.endpoints.empty()) return Status(Errc::invalid_argument, "etcd: no endpoints");
  auto credentials = credentials_of(config);
  if (!credentials.ok()) return credentials.status();
  const std::uint64_t tls_seen = tls_lines_now();
  auto impl = std::make_unique<Impl>(std::move(config), std::move(*credentials));
  // Wait for a connection (the first call would fail fast otherwise).
  const auto left = std::max<Clock::duration>(std::min<Clock::duration>(by - Clock::now(), kLongestCall), {});
  if (!impl->wait_connected(Clock::now() + left)) {
    // A call says why (a failed TLS handshake is named in its error).
    pb::StatusRequest req;
    pb::StatusResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(std::chrono::milliseconds(100)));
    const Status why = status_of(impl->pick().maintenance->Status(&ctx, req, &resp), false);
    const std::string hint = impl->config.cert_file.empty()
                                 ? " (no client certificate was given: if the members ask for one, pass cert= and key=)"
                                 : "";
    if (why.code() == Errc::tls_failed) return Status(Errc::tls_failed, why.message() + hint);
    if (impl->config.tls)
      if (auto line = tls_line_since(tls_seen))
        return Status(Errc::tls_failed, "etcd: the TLS handshake with the members failed: " + *line + hint);
    return Status(Errc::unavailable, "etcd: no member of the cluster answered in time");
  }
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
  if (Status s = impl_->invoke([&](grpc::ClientContext& c) { return impl_->pick().kv->Put(&c, req, &resp); }, by, true);
      !s.ok())
    return s;
  return resp.header().revision();
}

Result<std::int64_t> EtcdRpc::erase(std::string_view key, Clock::time_point by) {
  pb::DeleteRangeRequest req;
  req.set_key(std::string(key));
  pb::DeleteRangeResponse resp;
  if (Status s = impl_->invoke([&](grpc::ClientContext& c) { return impl_->pick().kv->DeleteRange(&c, req, &resp); },
                               by, true);
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
  if (Status s = impl_->invoke([&](grpc::ClientContext& c) { return impl_->pick().kv->Txn(&c, req, &resp); }, by, true);
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
  if (Status s = impl_->invoke([&](grpc::ClientContext& c) { return impl_->pick().lease->LeaseGrant(&c, req, &resp); },
                               by, true);
      !s.ok())
    return s;
  if (!resp.error().empty()) return Status(Errc::server_error, "etcd: " + resp.error());
  return resp.id();
}

Status EtcdRpc::reauthenticate(Clock::time_point by) {
  if (impl_->config.user.empty()) return {};
  return impl_->authenticate(by);
}

Status EtcdRpc::lease_revoke(std::int64_t id, Clock::time_point by) {
  pb::LeaseRevokeRequest req;
  req.set_id(id);
  pb::LeaseRevokeResponse resp;
  return impl_->invoke([&](grpc::ClientContext& c) { return impl_->pick().lease->LeaseRevoke(&c, req, &resp); }, by,
                       true);
}

Result<std::int64_t> EtcdRpc::lease_time_to_live(std::int64_t id, Clock::time_point by) {
  pb::LeaseTimeToLiveRequest req;
  req.set_id(id);
  pb::LeaseTimeToLiveResponse resp;
  if (Status s = impl_->invoke(
          [&](grpc::ClientContext& c) { return impl_->pick().lease->LeaseTimeToLive(&c, req, &resp); }, by, false);
      !s.ok())
    return s;
  return resp.ttl();
}

Result<EtcdRpc::MemberStatus> EtcdRpc::status(Clock::time_point by) {
  pb::StatusRequest req;
  pb::StatusResponse resp;
  if (Status s = impl_->invoke(
          [&](grpc::ClientContext& c) { return impl_->pick().maintenance->Status(&c, req, &resp); }, by, false);
      !s.ok())
    return s;
  return MemberStatus{resp.header().member_id(), resp.leader(), resp.raftterm(), resp.version()};
}

}  // namespace dlock::etcd

// ---- asynchronous calls ----

namespace dlock::etcd {
namespace {

void line_request(pb::RangeRequest& r, const std::string& prefix, bool keys_only) {
  // An empty prefix is every key: etcd's "\0" to "\0" (an empty key is refused).
  r.set_key(prefix.empty() ? std::string(1, '\0') : prefix);
  r.set_range_end(prefix_end(prefix));
  r.set_sort_target(pb::RangeRequest::CREATE);
  r.set_sort_order(pb::RangeRequest::ASCEND);
  r.set_keys_only(keys_only);
}

std::vector<KeyValue> kvs_of(const pb::RangeResponse& r) {
  std::vector<KeyValue> out;
  out.reserve(static_cast<std::size_t>(r.kvs_size()));
  for (const auto& x : r.kvs()) out.push_back(from_pb(x));
  return out;
}

}  // namespace

namespace {

std::shared_ptr<pb::TxnRequest> join_line_request(const std::string& key, std::string value, std::int64_t lease,
                                                  const std::string& line) {
  auto req = std::make_shared<pb::TxnRequest>();
  auto* cmp = req->add_compare();
  cmp->set_key(key);
  cmp->set_target(pb::Compare::CREATE);
  cmp->set_result(pb::Compare::EQUAL);
  cmp->set_create_revision(0);
  auto* put = req->add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(std::move(value));
  put->set_lease(lease);
  for (auto* ops : {req->mutable_success(), req->mutable_failure()}) {
    ops->Add()->mutable_request_range()->set_key(key);
    line_request(*ops->Add()->mutable_request_range(), line, false);
  }
  return req;
}

Result<EtcdRpc::Line> line_of_response(const pb::TxnResponse& resp) {
  EtcdRpc::Line out;
  out.created = resp.succeeded();
  out.revision = resp.header().revision();
  const int first = out.created ? 1 : 0;  // the put's answer comes first
  if (resp.responses_size() != first + 2 || !resp.responses(first).has_response_range() ||
      !resp.responses(first + 1).has_response_range())
    return Status(Errc::protocol_error, "etcd: the lock's transaction came back in another shape");
  const auto& mine = resp.responses(first).response_range();
  if (mine.kvs_size() != 1)
    return Status(Errc::protocol_error, "etcd: the lock's transaction did not read its key back");
  out.mine = from_pb(mine.kvs(0));
  out.keys = kvs_of(resp.responses(first + 1).response_range());
  return out;
}

std::shared_ptr<pb::TxnRequest> erase_request(std::string key, std::int64_t create_revision) {
  auto req = std::make_shared<pb::TxnRequest>();
  if (create_revision > 0) {
    auto* cmp = req->add_compare();
    cmp->set_key(key);
    cmp->set_target(pb::Compare::CREATE);
    cmp->set_result(pb::Compare::EQUAL);
    cmp->set_create_revision(create_revision);
  }
  req->add_success()->mutable_request_delete_range()->set_key(std::move(key));
  return req;
}

EtcdRpc::Erased erased_of(const pb::TxnResponse& resp) {
  const bool deleted =
      resp.succeeded() && resp.responses_size() == 1 && resp.responses(0).response_delete_range().deleted() > 0;
  return {deleted, resp.header().revision()};
}

}  // namespace

void EtcdRpc::join_line(std::string key, std::string value, std::int64_t lease, std::string line, Clock::time_point by,
                        Done<Line> done) {
  impl_->invoke_async<pb::TxnRequest, pb::TxnResponse>(join_line_request(key, std::move(value), lease, line),
                                                       impl_->txn_start(), by, true,
                                                       [done = std::move(done)](Status s, pb::TxnResponse& resp) {
                                                         if (!s.ok()) return done(s);
                                                         done(line_of_response(resp));
                                                       });
}

Result<EtcdRpc::Line> EtcdRpc::join_line_now(const std::string& key, std::string value, std::int64_t lease,
                                             const std::string& line, Clock::time_point by) {
  const auto req = join_line_request(key, std::move(value), lease, line);
  pb::TxnResponse resp;
  if (Status s = impl_->txn_now(*req, resp, by); !s.ok()) return s;
  return line_of_response(resp);
}

void EtcdRpc::read_line(std::string prefix, bool keys_only, Clock::time_point by, Done<Range> done) {
  auto req = std::make_shared<pb::RangeRequest>();
  line_request(*req, prefix, keys_only);
  impl_->invoke_async<pb::RangeRequest, pb::RangeResponse>(
      std::move(req),
      [this](grpc::ClientContext* c, const pb::RangeRequest* q, pb::RangeResponse* r,
             std::function<void(grpc::Status)> f) { impl_->pick().kv->async()->Range(c, q, r, std::move(f)); },
      by, false,
      [done = std::move(done)](Status s, pb::RangeResponse& resp) {
        if (!s.ok()) return done(s);
        done(Range{resp.header().revision(), kvs_of(resp)});
      });
}

void EtcdRpc::erase_created(std::string key, std::int64_t create_revision, Clock::time_point by, Done<Erased> done) {
  impl_->invoke_async<pb::TxnRequest, pb::TxnResponse>(erase_request(std::move(key), create_revision),
                                                       impl_->txn_start(), by, true,
                                                       [done = std::move(done)](Status s, pb::TxnResponse& resp) {
                                                         if (!s.ok()) return done(s);
                                                         done(erased_of(resp));
                                                       });
}

Result<EtcdRpc::Erased> EtcdRpc::erase_created_now(std::string key, std::int64_t create_revision,
                                                   Clock::time_point by) {
  const auto req = erase_request(std::move(key), create_revision);
  pb::TxnResponse resp;
  if (Status s = impl_->txn_now(*req, resp, by); !s.ok()) return s;
  return erased_of(resp);
}

void EtcdRpc::grant_lease(std::int64_t ttl_seconds, Clock::time_point by, Done<LeaseGrant> done) {
  auto req = std::make_shared<pb::LeaseGrantRequest>();
  req->set_ttl(ttl_seconds);
  impl_->invoke_async<pb::LeaseGrantRequest, pb::LeaseGrantResponse>(
      std::move(req),
      [this](grpc::ClientContext* c, const pb::LeaseGrantRequest* q, pb::LeaseGrantResponse* r,
             std::function<void(grpc::Status)> f) { impl_->pick().lease->async()->LeaseGrant(c, q, r, std::move(f)); },
      by, true,
      [done = std::move(done)](Status s, pb::LeaseGrantResponse& resp) {
        if (!s.ok()) return done(s);
        if (!resp.error().empty()) return done(Status(Errc::server_error, "etcd: " + resp.error()));
        done(LeaseGrant{resp.id(), resp.ttl()});
      });
}

void EtcdRpc::revoke_lease(std::int64_t id, Clock::time_point by, Done<bool> done) {
  auto req = std::make_shared<pb::LeaseRevokeRequest>();
  req->set_id(id);
  impl_->invoke_async<pb::LeaseRevokeRequest, pb::LeaseRevokeResponse>(
      std::move(req),
      [this](grpc::ClientContext* c, const pb::LeaseRevokeRequest* q, pb::LeaseRevokeResponse* r,
             std::function<void(grpc::Status)> f) { impl_->pick().lease->async()->LeaseRevoke(c, q, r, std::move(f)); },
      by, true,
      [done = std::move(done)](Status s, pb::LeaseRevokeResponse&) {
        if (s.code() == Errc::not_held) return done(false);  // gone already
        if (!s.ok()) return done(s);
        done(true);
      });
}

}  // namespace dlock::etcd
