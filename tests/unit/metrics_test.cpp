// Metrics: the Prometheus text exposition of ClientStats and of inspected
// locks, the counters the core keeps (over the fake backend, whose faults
// and clock the test controls, and over a real SQLite file), and the
// periodic ClientOptions::on_stats callback.
#include "dlock/metrics.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client_core.hpp"
#include "dlock/dlock.hpp"
#include "support/fake_backend.hpp"
#include "support/fake_client.hpp"
#include "support/temp_dir.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using testing::connect;
using testing::eventually;
using testing::FakeServer;

// The steady clock moved forward on demand (as in core_decisions_test).
struct TestClock {
  std::atomic<std::int64_t> ahead_ns{0};
  void advance(std::chrono::nanoseconds d) { ahead_ns += d.count(); }
  detail::ClientCore::ClockFn fn() {
    return [this] { return std::chrono::steady_clock::now() + std::chrono::nanoseconds(ahead_ns.load()); };
  }
};

// The library's log lines go nowhere (the tests provoke losses on purpose).
ClientOptions quiet() {
  ClientOptions o;
  o.logger = [](LogLevel, std::string_view) {};
  return o;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool has_line(const std::string& text, const std::string& line) {
  for (const auto& l : lines_of(text))
    if (l == line) return true;
  return false;
}

// The sample lines' values by "name{labels}" (the whole text before the value).
std::map<std::string, std::string> samples_of(const std::string& text) {
  std::map<std::string, std::string> out;
  for (const auto& l : lines_of(text)) {
    if (l.empty() || l[0] == '#') continue;
    const auto space = l.rfind(' ');
    out[l.substr(0, space)] = l.substr(space + 1);
  }
  return out;
}

std::uint64_t bucket_total(const ClientStats& s) {
  std::uint64_t n = 0;
  for (auto b : s.wait_buckets) n += b;
  return n;
}

ClientStats sample_stats() {
  ClientStats s;
  s.backend = "sqlite";
  s.grants = 7;
  s.busy_answers = 3;
  s.waits_granted = 2;
  s.waits_timed_out = 1;
  s.wait_buckets[0] = 1;      // <= 1 ms
  s.wait_buckets[4] = 1;      // (25, 50] ms
  s.wait_buckets.back() = 1;  // above 300 s
  s.wait_time_us_sum = 400'040'500;
  s.lost_taken = 2;
  s.leases_lost = 2;
  s.leases_held = 4;
  s.renewals = 11;
  s.renewal_failures = 1;
  s.outcome_unknown = 5;
  return s;
}

TEST(Metrics, RendersEveryFamilyOnceWithHelpTypeAndTheBackendLabel) {
  const std::string text = to_prometheus(sample_stats());
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  EXPECT_TRUE(has_line(text, "# HELP dlock_grants_total Acquire calls granted (re-entries included)."));
  EXPECT_TRUE(has_line(text, "# TYPE dlock_grants_total counter"));
  EXPECT_TRUE(has_line(text, "dlock_grants_total{backend=\"sqlite\"} 7"));
  EXPECT_TRUE(has_line(text, "dlock_busy_answers_total{backend=\"sqlite\"} 3"));
  EXPECT_TRUE(has_line(text, "# TYPE dlock_waits_total counter"));
  EXPECT_TRUE(has_line(text, "dlock_waits_total{backend=\"sqlite\",outcome=\"granted\"} 2"));
  EXPECT_TRUE(has_line(text, "dlock_waits_total{backend=\"sqlite\",outcome=\"timeout\"} 1"));
  EXPECT_TRUE(has_line(text, "dlock_waits_total{backend=\"sqlite\",outcome=\"error\"} 0"));
  EXPECT_TRUE(has_line(text, "# TYPE dlock_leases_held gauge"));
  EXPECT_TRUE(has_line(text, "dlock_leases_held{backend=\"sqlite\"} 4"));
  EXPECT_TRUE(has_line(text, "dlock_leases_lost_total{backend=\"sqlite\",reason=\"taken\"} 2"));
  EXPECT_TRUE(has_line(text, "dlock_leases_lost_total{backend=\"sqlite\",reason=\"expired\"} 0"));
  EXPECT_TRUE(has_line(text, "dlock_leases_lost_total{backend=\"sqlite\",reason=\"unreachable\"} 0"));
  EXPECT_TRUE(has_line(text, "dlock_leases_lost_total{backend=\"sqlite\",reason=\"wrong_type\"} 0"));
  EXPECT_TRUE(has_line(text, "dlock_renewals_total{backend=\"sqlite\"} 11"));
  EXPECT_TRUE(has_line(text, "dlock_renewal_failures_total{backend=\"sqlite\"} 1"));
  EXPECT_TRUE(has_line(text, "dlock_outcome_unknown_total{backend=\"sqlite\"} 5"));

  // Each family: # HELP, then # TYPE, then only its own samples; once.
  std::set<std::string> families;
  std::string family, type;
  std::string help_of;
  for (const auto& l : lines_of(text)) {
    ASSERT_FALSE(l.empty()) << "no blank lines";
    if (l.rfind("# HELP ", 0) == 0) {
      help_of = l.substr(7, l.find(' ', 7) - 7);
      continue;
    }
    if (l.rfind("# TYPE ", 0) == 0) {
      std::istringstream in(l.substr(7));
      in >> family >> type;
      EXPECT_EQ(help_of, family) << "# HELP comes right before # TYPE";
      EXPECT_TRUE(families.insert(family).second) << family << " declared twice";
      EXPECT_TRUE(type == "counter" || type == "gauge" || type == "histogram") << l;
      if (type == "counter") {
        EXPECT_TRUE(family.ends_with("_total")) << family;
      }
      continue;
    }
    const std::string name = l.substr(0, l.find_first_of("{ "));
    if (type == "histogram")
      EXPECT_TRUE(name == family + "_bucket" || name == family + "_sum" || name == family + "_count") << l;
    else
      EXPECT_EQ(name, family) << l;
  }
  EXPECT_EQ(families, (std::set<std::string>{
                          "dlock_grants_total", "dlock_late_grants_total", "dlock_busy_answers_total",
                          "dlock_waits_total", "dlock_wait_seconds", "dlock_wakeups_total", "dlock_leases_held",
                          "dlock_leases_lost_total", "dlock_renewals_total", "dlock_renewal_failures_total",
                          "dlock_renewal_round_trips_total", "dlock_outcome_unknown_total",
                          "dlock_release_failures_total", "dlock_commands_sent_total", "dlock_reconnects_total"}));
}

TEST(Metrics, TheWaitHistogramIsCumulativeInSeconds) {
  const std::string text = to_prometheus(sample_stats());
  EXPECT_TRUE(has_line(text, "# TYPE dlock_wait_seconds histogram"));
  EXPECT_TRUE(has_line(text, "dlock_wait_seconds_bucket{backend=\"sqlite\",le=\"0.001\"} 1"));
  EXPECT_TRUE(has_line(text, "dlock_wait_seconds_bucket{backend=\"sqlite\",le=\"0.025\"} 1"));
  EXPECT_TRUE(has_line(text, "dlock_wait_seconds_bucket{backend=\"sqlite\",le=\"0.05\"} 2"));
  EXPECT_TRUE(has_line(text, "dlock_wait_seconds_bucket{backend=\"sqlite\",le=\"1\"} 2"));
  EXPECT_TRUE(has_line(text, "dlock_wait_seconds_bucket{backend=\"sqlite\",le=\"300\"} 2"));
  EXPECT_TRUE(has_line(text, "dlock_wait_seconds_bucket{backend=\"sqlite\",le=\"+Inf\"} 3"));
  EXPECT_TRUE(has_line(text, "dlock_wait_seconds_sum{backend=\"sqlite\"} 400.0405"));
  EXPECT_TRUE(has_line(text, "dlock_wait_seconds_count{backend=\"sqlite\"} 3"));
  int buckets = 0;
  for (const auto& l : lines_of(text)) buckets += l.rfind("dlock_wait_seconds_bucket", 0) == 0;
  EXPECT_EQ(buckets, static_cast<int>(ClientStats::kWaitBucketsMs.size()) + 1);
}

TEST(Metrics, LabelValuesAreEscapedAndKeptUtf8) {
  PrometheusOptions o;
  o.prefix = "svc_";
  o.labels = {{"client", "a\"b\\c\nd"}, {"zone", "Zürich \xff!"}};
  ClientStats s;
  s.backend = "re\"dis";
  s.grants = 1;
  const std::string text = to_prometheus(s, o);
  EXPECT_TRUE(has_line(text,
                       "svc_grants_total{backend=\"re\\\"dis\",client=\"a\\\"b\\\\c\\nd\",zone=\"Zürich "
                       "\xEF\xBF\xBD!\"} 1"))
      << text;
  EXPECT_TRUE(has_line(text, "# TYPE svc_grants_total counter"));
  EXPECT_EQ(text.find("dlock_"), std::string::npos);
}

TEST(Metrics, AnEmptyBackendIsAnEmptyLabelAndAnEmptyPrefixIsAllowed) {
  PrometheusOptions o;
  o.prefix = "";
  const std::string text = to_prometheus(ClientStats{}, o);
  EXPECT_TRUE(has_line(text, "grants_total{backend=\"\"} 0"));
  EXPECT_TRUE(has_line(text, "wait_seconds_bucket{backend=\"\",le=\"+Inf\"} 0"));
  EXPECT_TRUE(has_line(text, "wait_seconds_sum{backend=\"\"} 0"));
}

TEST(Metrics, BadPrefixesAndLabelNamesAreRefused) {
  const auto code = [](const PrometheusOptions& o) {
    try {
      (void)to_prometheus(ClientStats{}, o);
    } catch (const Error& e) {
      return e.code();
    }
    return Errc::ok;
  };
  PrometheusOptions o;
  for (const char* bad : {"1dlock_", "dlock-", "dl ock_", "dlöck_"}) {
    o.prefix = bad;
    EXPECT_EQ(code(o), Errc::invalid_argument) << bad;
  }
  o.prefix = "ns:dlock_";
  EXPECT_EQ(code(o), Errc::ok);
  for (const char* bad : {"", "1a", "a-b", "__x", "le", "backend", "reason", "outcome", "lock", "a:b"}) {
    o.labels = {{bad, "v"}};
    EXPECT_EQ(code(o), Errc::invalid_argument) << bad;
  }
  o.labels = {{"a", "1"}, {"a", "2"}};
  EXPECT_EQ(code(o), Errc::invalid_argument) << "a name given twice";
  o.labels = {{"_a1", ""}};
  EXPECT_EQ(code(o), Errc::ok);
}

TEST(Metrics, SeveralClientsShareEachFamilyAndMustDiffer) {
  ClientStats redis, sqlite, sqlite2;
  redis.backend = "redis";
  redis.grants = 1;
  sqlite.backend = sqlite2.backend = "sqlite";
  sqlite.grants = 2;
  sqlite2.grants = 3;
  PrometheusOptions o;
  o.labels = {{"service", "billing"}};
  const std::vector<LabeledStats> clients = {{redis, {}}, {sqlite, {{"client", "a"}}}, {sqlite2, {{"client", "b"}}}};
  const std::string text = to_prometheus(clients, o);
  int types = 0;
  for (const auto& l : lines_of(text)) types += l == "# TYPE dlock_grants_total counter";
  EXPECT_EQ(types, 1);
  const auto samples = samples_of(text);
  EXPECT_EQ(samples.at("dlock_grants_total{backend=\"redis\",service=\"billing\"}"), "1");
  EXPECT_EQ(samples.at("dlock_grants_total{backend=\"sqlite\",service=\"billing\",client=\"a\"}"), "2");
  EXPECT_EQ(samples.at("dlock_grants_total{backend=\"sqlite\",service=\"billing\",client=\"b\"}"), "3");

  const std::vector<LabeledStats> same = {{sqlite, {}}, {sqlite2, {}}};
  EXPECT_THROW((void)to_prometheus(same, o), Error) << "their samples would collide";
  const std::vector<LabeledStats> clash = {{sqlite, {{"service", "x"}}}};
  EXPECT_THROW((void)to_prometheus(clash, o), Error) << "a client label repeats an options label";
  EXPECT_TRUE(has_line(to_prometheus(std::span<const LabeledStats>{}), "# TYPE dlock_grants_total counter"));
}

TEST(Metrics, InspectedLocksAreGauges) {
  LockInfo held;
  held.held = true;
  held.fence = 42;
  held.remaining = 1500ms;
  held.holders = 1;
  held.waiters = 3;
  LockInfo free_lock;
  free_lock.waiters = std::nullopt;  // the store does not count them
  const std::vector<InspectedLock> locks = {{"orders:\"42\"", held}, {"free", free_lock}};
  PrometheusOptions o;
  o.labels = {{"service", "billing"}};
  const std::string text = locks_to_prometheus(locks, o);
  EXPECT_TRUE(has_line(text, "# TYPE dlock_lock_held gauge"));
  EXPECT_TRUE(has_line(text, "dlock_lock_held{service=\"billing\",lock=\"orders:\\\"42\\\"\"} 1"));
  EXPECT_TRUE(has_line(text, "dlock_lock_held{service=\"billing\",lock=\"free\"} 0"));
  EXPECT_TRUE(has_line(text, "dlock_lock_fence{service=\"billing\",lock=\"orders:\\\"42\\\"\"} 42"));
  EXPECT_TRUE(has_line(text, "dlock_lock_remaining_seconds{service=\"billing\",lock=\"orders:\\\"42\\\"\"} 1.5"));
  EXPECT_TRUE(has_line(text, "dlock_lock_holders{service=\"billing\",lock=\"orders:\\\"42\\\"\"} 1"));
  EXPECT_TRUE(has_line(text, "dlock_lock_waiters{service=\"billing\",lock=\"orders:\\\"42\\\"\"} 3"));
  EXPECT_EQ(text.find("dlock_lock_waiters{service=\"billing\",lock=\"free\"}"), std::string::npos)
      << "unknown waiters have no sample";
  EXPECT_TRUE(has_line(text, "# TYPE dlock_lock_waiters gauge"));

  const std::vector<InspectedLock> twice = {{"a", held}, {"a", free_lock}};
  EXPECT_THROW((void)locks_to_prometheus(twice), Error);
  const std::vector<InspectedLock> same_when_written = {{"a\xff", held}, {"a\xfe", free_lock}};
  EXPECT_THROW((void)locks_to_prometheus(same_when_written), Error) << "both are written a\uFFFD";
  const std::string plain = locks_to_prometheus(std::vector<InspectedLock>{{"x", held}});
  EXPECT_TRUE(has_line(plain, "dlock_lock_held{lock=\"x\"} 1"));
}

// --- the counters, over the fake backend ---

TEST(MetricsCounters, BusyAnswersAndAWaitTimedOut) {
  FakeServer server;
  Client client = connect(server);
  server.take("a");  // another owner, 30 s TTL
  EXPECT_EQ(client.try_acquire("a").code(), Errc::busy);
  EXPECT_EQ(client.acquire("a", 50ms).code(), Errc::timeout);
  const ClientStats s = client.stats();
  EXPECT_GE(s.busy_answers, 3u) << "the try, and the wait's first attempt and its retry once watching";
  EXPECT_EQ(s.waits_timed_out, 1u);
  EXPECT_EQ(s.waits_granted, 0u);
  EXPECT_EQ(s.waits_failed, 0u);
  EXPECT_EQ(bucket_total(s), 1u) << "the try did not wait";
  EXPECT_GE(s.wait_time_us_sum, 50'000u) << "it waited its whole 50 ms";
  for (std::size_t i = 0; i < ClientStats::kWaitBucketsMs.size() && ClientStats::kWaitBucketsMs[i] < 50; ++i)
    EXPECT_EQ(s.wait_buckets[i], 0u) << "bucket le=" << ClientStats::kWaitBucketsMs[i] << " ms";
  EXPECT_EQ(s.grants, 0u);
}

// The clock moves 3 s while the acquire waits: the histogram places it in
// (2.5 s, 5 s] without the test waiting that long.
TEST(MetricsCounters, AGrantedWaitLandsInItsBucket) {
  FakeServer server;
  TestClock clock;
  Client client = connect(server, {}, clock.fn());
  server.take("a");
  std::promise<Result<Lease>> result;
  client.async_acquire("a", 60s, {}, [&](Result<Lease> r) { result.set_value(std::move(r)); });
  // Busy, watching, and busy again: it sleeps until a release.
  ASSERT_TRUE(eventually([&] { return server.acquires() >= 2; }));
  clock.advance(3s);
  server.drop("a", true);
  auto lease = result.get_future().get();
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  const ClientStats s = client.stats();
  EXPECT_EQ(s.waits_granted, 1u);
  EXPECT_EQ(bucket_total(s), 1u);
  std::size_t bucket = 0;
  while (ClientStats::kWaitBucketsMs[bucket] != 5000) ++bucket;
  EXPECT_EQ(s.wait_buckets[bucket], 1u) << "3 s is in (2.5 s, 5 s]";
  EXPECT_GE(s.wait_time_us_sum, 3'000'000u);
  EXPECT_LT(s.wait_time_us_sum, 5'000'000u);
  EXPECT_EQ(s.grants, 1u);
  const auto samples = samples_of(to_prometheus(s));
  EXPECT_EQ(samples.at("dlock_wait_seconds_bucket{backend=\"\",le=\"2.5\"}"), "0");
  EXPECT_EQ(samples.at("dlock_wait_seconds_bucket{backend=\"\",le=\"5\"}"), "1");
  EXPECT_EQ(samples.at("dlock_wait_seconds_count{backend=\"\"}"), "1");
}

TEST(MetricsCounters, AWaitThatFailsCountsAsAnError) {
  FakeServer server;
  Client client = connect(server, quiet());
  server.take("a");
  std::promise<Result<Lease>> result;
  LockOptions o;
  o.error_retry = 0ms;
  client.async_acquire("a", 10s, o, [&](Result<Lease> r) { result.set_value(std::move(r)); });
  ASSERT_TRUE(eventually([&] { return server.acquires() >= 2; }));
  server.fail_calls(1, Status(Errc::permission_denied, "NOPERM"));
  server.drop("a", true);  // wakes it: its next attempt is refused
  auto r = result.get_future().get();
  EXPECT_EQ(r.code(), Errc::permission_denied);
  const ClientStats s = client.stats();
  EXPECT_EQ(s.waits_failed, 1u);
  EXPECT_EQ(s.waits_granted + s.waits_timed_out, 0u);
  EXPECT_EQ(bucket_total(s), 1u);
}

TEST(MetricsCounters, LossesAreCountedByReason) {
  FakeServer server;
  Client client = connect(server, quiet());
  LockOptions o;
  o.watchdog_lease = 300ms;
  o.renew_interval = 50ms;
  auto taken = client.acquire("taken", 0ms, o);
  auto expired = client.acquire("expired", 0ms, o);
  ASSERT_TRUE(taken.ok());
  ASSERT_TRUE(expired.ok());
  ASSERT_TRUE(eventually([&] { return client.stats().renewals >= 2; })) << "both renewed at least once";
  server.take("taken");           // another owner's now
  server.drop("expired", false);  // gone, as after an expiry
  ASSERT_TRUE(eventually([&] { return taken->lost() && expired->lost(); }));
  auto unreachable = client.acquire("unreachable", 0ms, o);
  ASSERT_TRUE(unreachable.ok());
  server.fail_renewals(true);
  ASSERT_TRUE(eventually([&] { return unreachable->lost(); }));
  const ClientStats s = client.stats();
  EXPECT_EQ(s.lost_taken, 1u);
  EXPECT_EQ(s.lost_expired, 1u);
  EXPECT_EQ(s.lost_unreachable, 1u);
  EXPECT_EQ(s.lost_wrong_type, 0u);
  EXPECT_EQ(s.leases_lost, 3u);
  EXPECT_GE(s.renewal_failures, 1u) << "the renewals that failed before the loss";
  const auto samples = samples_of(to_prometheus(s));
  EXPECT_EQ(samples.at("dlock_leases_lost_total{backend=\"\",reason=\"unreachable\"}"), "1");
}

TEST(MetricsCounters, LostRepliesAreOutcomesUnknown) {
  FakeServer server;
  Client client = connect(server);
  server.drop_acquire_replies(1);  // applied, but the reply never came: resent
  LockOptions o;
  o.owner = "me";
  auto lease = client.acquire("a", 0ms, o);
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  EXPECT_EQ(client.stats().outcome_unknown, 1u);
  server.drop_release_replies(1);
  EXPECT_TRUE(lease->release().ok());
  EXPECT_EQ(client.stats().outcome_unknown, 2u);
  EXPECT_EQ(client.stats().grants, 1u);
}

// --- the periodic callback ---

struct Seen {
  std::mutex mu;
  std::vector<ClientStats> calls;
  std::thread::id thread;
  std::size_t count() {
    std::lock_guard lk(mu);
    return calls.size();
  }
  ClientStats last() {
    std::lock_guard lk(mu);
    return calls.back();
  }
};

TEST(MetricsCallback, RunsOnTheIoThreadEveryIntervalAndStopsWithTheClient) {
  FakeServer server;
  auto seen = std::make_shared<Seen>();
  {
    ClientOptions options;
    options.stats_interval = 20ms;
    options.on_stats = [seen](const ClientStats& s) {
      std::lock_guard lk(seen->mu);
      seen->calls.push_back(s);
      seen->thread = std::this_thread::get_id();
    };
    Client client = connect(server, options);
    auto lease = client.acquire("a", 0ms);
    ASSERT_TRUE(lease.ok());
    ASSERT_TRUE(eventually([&] { return seen->count() >= 3 && seen->last().grants == 1; }));
    EXPECT_EQ(seen->last().leases_held, 1u);
    {
      std::lock_guard lk(seen->mu);
      EXPECT_NE(seen->thread, std::this_thread::get_id());
    }
    EXPECT_GT(seen.use_count(), 1);
  }
  // The client is gone: its I/O thread was joined and its options (the
  // callback's only owner besides this test) destroyed, so no call can
  // come any more.
  EXPECT_EQ(seen.use_count(), 1);
}

TEST(MetricsCallback, AThrowIsLoggedAndTheCallsGoOn) {
  FakeServer server;
  std::atomic<int> calls{0};
  std::mutex mu;
  std::vector<std::string> log;
  ClientOptions options;
  options.stats_interval = 10ms;
  options.on_stats = [&](const ClientStats&) {
    ++calls;
    throw std::runtime_error("exporter down");
  };
  options.logger = [&](LogLevel, std::string_view m) {
    std::lock_guard lk(mu);
    log.emplace_back(m);
  };
  Client client = connect(server, options);
  ASSERT_TRUE(eventually([&] { return calls.load() >= 3; }));
  std::lock_guard lk(mu);
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.front(), "on_stats callback threw: exporter down");
}

TEST(MetricsCallback, NeedsAPositiveInterval) {
  FakeServer server;
  ClientOptions options;
  options.on_stats = [](const ClientStats&) {};
  options.stats_interval = 0ms;
  auto core = detail::ClientCore::connect_with(server.maker(), options);
  EXPECT_EQ(core.code(), Errc::invalid_argument);
  options.on_stats = nullptr;  // no callback: the interval is not looked at
  EXPECT_TRUE(detail::ClientCore::connect_with(server.maker(), options).ok());
}

// --- a real client over a SQLite file ---

TEST(MetricsSqlite, ARealSessionCountsWhatItDid) {
  dlock::test::TempDir dir;
  auto connected = Client::try_connect("sqlite://" + dir.file("locks.db"), quiet());
  if (!connected.ok() && connected.status().message().find("unsupported URL scheme") != std::string::npos)
    GTEST_SKIP() << "built without SQLite";
  ASSERT_TRUE(connected.ok()) << connected.status().to_string();
  Client holder = *connected;
  Client other = Client::connect("sqlite://" + dir.file("locks.db"), quiet());

  auto first = holder.acquire("job", 0ms);  // grant 1
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(other.try_acquire("job").code(), Errc::busy);        // busy answer 1
  EXPECT_EQ(other.acquire("job", 100ms).code(), Errc::timeout);  // a wait that times out
  const auto busy_before = other.stats().busy_answers;
  auto waiter = std::async(std::launch::async, [&] { return other.acquire("job", 20s); });
  ASSERT_TRUE(eventually([&] { return other.stats().busy_answers > busy_before; })) << "the second wait is waiting";
  EXPECT_TRUE(first->release().ok());
  auto second = waiter.get();  // a wait that is granted
  ASSERT_TRUE(second.ok()) << second.status().to_string();

  const ClientStats h = holder.stats(), o = other.stats();
  EXPECT_EQ(h.backend, "sqlite");
  EXPECT_EQ(o.backend, "sqlite");
  EXPECT_EQ(h.grants, 1u);
  EXPECT_EQ(h.busy_answers, 0u);
  EXPECT_EQ(h.waits_granted + h.waits_timed_out + h.waits_failed, 0u);
  EXPECT_EQ(o.grants, 1u);
  EXPECT_GE(o.busy_answers, 4u);
  EXPECT_EQ(o.waits_timed_out, 1u);
  EXPECT_EQ(o.waits_granted, 1u);
  EXPECT_EQ(o.waits_failed, 0u);
  EXPECT_EQ(bucket_total(o), 2u);
  EXPECT_GE(o.wait_time_us_sum, 100'000u) << "the timed-out wait alone took its 100 ms";
  std::uint64_t below_100ms = 0;
  for (std::size_t i = 0; ClientStats::kWaitBucketsMs[i] < 100; ++i) below_100ms += o.wait_buckets[i];
  EXPECT_LE(below_100ms, 1u) << "the timed-out wait took at least 100 ms";
  EXPECT_EQ(o.leases_held, 1u);
  EXPECT_EQ(o.leases_lost, 0u);

  const auto samples = samples_of(to_prometheus(o));
  EXPECT_EQ(samples.at("dlock_waits_total{backend=\"sqlite\",outcome=\"timeout\"}"), "1");
  EXPECT_EQ(samples.at("dlock_waits_total{backend=\"sqlite\",outcome=\"granted\"}"), "1");
  EXPECT_EQ(samples.at("dlock_wait_seconds_count{backend=\"sqlite\"}"), "2");
  EXPECT_EQ(samples.at("dlock_wait_seconds_bucket{backend=\"sqlite\",le=\"+Inf\"}"), "2");
  EXPECT_EQ(samples.at("dlock_wait_seconds_bucket{backend=\"sqlite\",le=\"300\"}"), "2");
  EXPECT_EQ(samples.at("dlock_grants_total{backend=\"sqlite\"}"), "1");
  EXPECT_EQ(samples.at("dlock_leases_held{backend=\"sqlite\"}"), "1");
}

TEST(MetricsSqlite, AFixedLeaseRunningOutIsAnExpiredLoss) {
  dlock::test::TempDir dir;
  auto connected = Client::try_connect("sqlite://" + dir.file("locks.db"), quiet());
  if (!connected.ok() && connected.status().message().find("unsupported URL scheme") != std::string::npos)
    GTEST_SKIP() << "built without SQLite";
  ASSERT_TRUE(connected.ok()) << connected.status().to_string();
  Client client = *connected;
  LockOptions o;
  o.lease = 50ms;
  auto lease = client.acquire("short", 0ms, o);
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  ASSERT_TRUE(eventually([&] { return lease->lost(); }));
  const ClientStats s = client.stats();
  EXPECT_EQ(s.lost_expired, 1u);
  EXPECT_EQ(s.leases_lost, 1u);
  EXPECT_EQ(s.renewals, 0u) << "a fixed lease is never renewed";
}

}  // namespace
}  // namespace dlock
