// A crowd on one lock: N clients, each its own dlock::Client and Mutex
// (plain or fair) on its own thread, spread over P processes, all on one
// name, each looping try_lock_until / hold / unlock. What one critical
// section (CS) costs as N grows, in a steady window (the first seconds,
// while the crowd connects and joins, are left out):
//
//   dlock-crowd-bench --url URL --clients N [--procs 10] [--seconds 9]
//       [--warm 3] [--hold-ms 10] [--fair 1] [--json FILE]
//
// Per CS in the window: the commands the clients sent (ClientStats::
// commands_sent, every client's, waiting ones included; read at the
// window's start and end, so connecting and the first joins are left out
// with the warm-up), the clients' wake-ups; the hand-off
// from one release to the next grant (p50, p99, across processes); how many
// grants the longest waiter waited through; how many clients got no CS in
// the window; the errors; the memory and sockets each client adds to its
// process (read mid-window, against the process before it connected).
// Everything counted by the clients: the server's
// own counts (Redis INFO commandstats, pg_stat_statements) are read beside
// it by scripts/bench.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <dlock/dlock.hpp>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "harness.hpp"

namespace dlock::bench {
namespace {

struct Cs {
  long long asked, got, rel;  // CLOCK_MONOTONIC ns: the try began, granted, released
  int client;
};

struct Totals {
  long long commands = 0, wakeups = 0, errors = 0;
  long long rss_kib = 0, sockets = 0;  // what the clients added to their processes, in the window
};

// This process's resident memory (KiB) and open sockets.
long long rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string key;
  long long v = 0;
  while (in >> key) {
    if (key == "VmRSS:") {
      in >> v;
      return v;
    }
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

long long open_sockets() {
  long long n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    std::error_code rec;
    const auto target = std::filesystem::read_symlink(e.path(), rec);
    n += !rec && target.string().rfind("socket:", 0) == 0;
  }
  return n;
}

struct Config {
  std::string url;
  int clients = 10, procs = 10;
  double seconds = 9, warm = 3;
  int hold_ms = 10;
  int fair = 0;
  std::string name;  // the lock: one of its own per run, so that runs never meet
};

// One process's share of the crowd: its clients' CS, each on a line of
// `dir`/crowd.<k>, and its totals on the last line.
// This process's clients' counters, read at any moment: the live ones'
// and those of clients already gone.
class Counters {
 public:
  struct Entry {
    Entry(Counters& counters, const Client& c) : counters_(counters), c_(&c) { counters_.add(c_); }
    ~Entry() { counters_.remove(c_); }
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;
    Counters& counters_;
    const Client* c_;
  };
  void add(const Client* c) {
    std::lock_guard lk(mu_);
    live_.push_back(c);
  }
  void remove(const Client* c) {
    std::lock_guard lk(mu_);
    const ClientStats s = c->stats();
    gone_.commands += static_cast<long long>(s.commands_sent);
    gone_.wakeups += static_cast<long long>(s.wakeups);
    std::erase(live_, c);
  }
  Totals now() {
    std::lock_guard lk(mu_);
    Totals t = gone_;
    for (const Client* c : live_) {
      const ClientStats s = c->stats();
      t.commands += static_cast<long long>(s.commands_sent);
      t.wakeups += static_cast<long long>(s.wakeups);
    }
    return t;
  }

 private:
  std::mutex mu_;
  std::vector<const Client*> live_;
  Totals gone_;
};

void sleep_until_ns(long long at_ns) {
  const long long left = at_ns - mono_ns();
  if (left > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(left));
}

int process(const Config& c, const std::string& dir, int k, long long start_ns) {
  const int first = k * c.clients / c.procs, last = (k + 1) * c.clients / c.procs;
  std::vector<std::vector<Cs>> logs(static_cast<std::size_t>(last - first));
  std::atomic<long long> errors{0};
  Counters counters;
  Totals at_from, at_to;
  const long long rss_before = rss_kib(), sockets_before = open_sockets();
  std::thread sampler([&] {
    sleep_until_ns(start_ns + static_cast<long long>(c.warm * 1e9));
    at_from = counters.now();
    // The crowd's size mid-window, every client connected and waiting.
    sleep_until_ns(start_ns + static_cast<long long>((c.warm + c.seconds) / 2 * 1e9));
    at_to.rss_kib = rss_kib() - rss_before;
    at_to.sockets = open_sockets() - sockets_before;
    sleep_until_ns(start_ns + static_cast<long long>(c.seconds * 1e9));
    const Totals end = counters.now();
    at_to.commands = end.commands;
    at_to.wakeups = end.wakeups;
  });
  std::vector<std::thread> threads;
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                                      c.seconds - static_cast<double>(mono_ns() - start_ns) / 1e9));
  for (int i = first; i < last; ++i) {
    threads.emplace_back([&, i] {
      auto& log = logs[static_cast<std::size_t>(i - first)];
      ClientOptions o;
      o.logger = [](LogLevel, std::string_view) {};
      o.connect_timeout = std::chrono::seconds(30);
      try {
        Client client = Client::connect(c.url, o);
        Counters::Entry counted(counters, client);  // until the client goes
        LockOptions lo;
        lo.fair = c.fair != 0;
        Mutex m(client, c.name, lo);
        while (Clock::now() < end) {
          const long long asked = mono_ns();
          bool got = false;
          try {
            got = m.try_lock_until(end);
          } catch (const Error& e) {
            // The first of each process is shown: a count alone hides why.
            if (errors.fetch_add(1) == 0) std::fprintf(stderr, "crowd client %d: %s\n", i, e.what());
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            continue;
          }
          if (!got) break;
          const long long granted = mono_ns();
          std::this_thread::sleep_for(std::chrono::milliseconds(c.hold_ms));
          const long long released = mono_ns();
          if (!m.release().ok()) ++errors;
          log.push_back({asked, granted, released, i});
        }
      } catch (const std::exception& e) {
        ++errors;
        std::fprintf(stderr, "crowd client %d: %s\n", i, e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  sampler.join();
  std::ofstream out(dir + "/crowd." + std::to_string(k));
  for (const auto& log : logs)
    for (const Cs& e : log) out << e.asked << ' ' << e.got << ' ' << e.rel << ' ' << e.client << '\n';
  out << "totals " << at_to.commands - at_from.commands << ' ' << at_to.wakeups - at_from.wakeups << ' ' << errors
      << ' ' << at_to.rss_kib << ' ' << at_to.sockets << '\n';
  return 0;
}

int run(const Config& c, const RunFlags& run_flags, const std::string& dir) {
  const long long start_ns = mono_ns();
  in_processes(
      c.procs, [&](int k) { return process(c, dir, k, start_ns); }, "crowd process");
  std::vector<Cs> all;
  Totals t;
  for (int k = 0; k < c.procs; ++k) {
    std::ifstream in(dir + "/crowd." + std::to_string(k));
    std::string first;
    while (in >> first) {
      if (first == "totals") {
        long long cm = 0, w = 0, e = 0, rss = 0, so = 0;
        in >> cm >> w >> e >> rss >> so;
        t.commands += cm, t.wakeups += w, t.errors += e, t.rss_kib += rss, t.sockets += so;
        continue;
      }
      Cs e{};
      e.asked = std::stoll(first);
      in >> e.got >> e.rel >> e.client;
      all.push_back(e);
    }
  }
  std::sort(all.begin(), all.end(), [](const Cs& a, const Cs& b) { return a.got < b.got; });
  const long long from = start_ns + static_cast<long long>(c.warm * 1e9);
  const long long to = start_ns + static_cast<long long>(c.seconds * 1e9);
  std::vector<double> gaps;
  std::vector<int> served(static_cast<std::size_t>(c.clients), 0);
  long long in_window = 0, same = 0, waited_through = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const Cs& e = all[i];
    if (e.got < from || e.got >= to) continue;
    ++in_window;
    ++served[static_cast<std::size_t>(e.client)];
    if (i > 0) {
      if (all[i - 1].client == e.client) ++same;
      gaps.push_back(static_cast<double>(e.got - all[i - 1].rel) / 1e6);
    }
    // The grants made while this one was asked for and waited.
    const auto asked_at =
        std::lower_bound(all.begin(), all.end(), e.asked, [](const Cs& x, long long v) { return x.got < v; });
    waited_through = std::max<long long>(waited_through, static_cast<long long>(all.begin() + i - asked_at));
  }
  const long long starved = std::count(served.begin(), served.end(), 0);
  // Commands and wake-ups are the window's: per CS granted in it.
  const double cs_all = std::max<double>(1, static_cast<double>(in_window));
  const double window_s = c.seconds - c.warm;
  std::printf(
      "crowd N=%d P=%d %s: %.1f CS/s, %.1f commands/CS, %.2f wake-ups/CS, hand-off p50 %.2f ms p99 %.2f ms, "
      "waited through <= %lld grants, %lld of %d clients without a CS, same holder %.0f%%, %lld errors, "
      "%.0f KiB and %.1f sockets per client\n",
      c.clients, c.procs, c.fair ? "fair" : "plain", static_cast<double>(in_window) / window_s,
      static_cast<double>(t.commands) / cs_all, static_cast<double>(t.wakeups) / cs_all, percentile(gaps, 0.5),
      percentile(gaps, 0.99), waited_through, starved, c.clients,
      in_window > 1 ? 100.0 * static_cast<double>(same) / static_cast<double>(in_window - 1) : 0.0, t.errors,
      static_cast<double>(t.rss_kib) / c.clients, static_cast<double>(t.sockets) / c.clients);
  JsonLine j;
  j.str("bench", "crowd")
      .str("lock", c.fair ? "fair" : "plain")
      .num("clients", c.clients)
      .num("procs", c.procs)
      .num("cs_per_s", static_cast<double>(in_window) / window_s)
      .num("commands_per_cs", static_cast<double>(t.commands) / cs_all)
      .num("wakeups_per_cs", static_cast<double>(t.wakeups) / cs_all)
      .num("handoff_p50_ms", percentile(gaps, 0.5))
      .num("handoff_p99_ms", percentile(gaps, 0.99))
      .num("max_waited_through", waited_through)
      .num("starved", starved)
      .num("errors", t.errors)
      .num("rss_kib_per_client", static_cast<double>(t.rss_kib) / c.clients)
      .num("sockets_per_client", static_cast<double>(t.sockets) / c.clients);
  j.write(run_flags.json);
  return 0;
}

}  // namespace
}  // namespace dlock::bench

int main(int argc, char** argv) {
  using namespace dlock::bench;
  RunFlags run_flags;
  run_flags.seconds = 9;
  Config c;
  Flags flags(run_flags);
  flags.add("--url", c.url).add("--clients", c.clients).add("--procs", c.procs).add("--warm", c.warm);
  flags.add("--hold-ms", c.hold_ms).add("--fair", c.fair);
  if (!flags.parse(argc, argv) || c.url.empty() || c.clients < 1 || c.procs < 1 || c.warm < 0 ||
      c.warm >= run_flags.seconds)
    return usage(
        "dlock-crowd-bench --url URL --clients N [--procs 10] [--seconds 9] [--warm 3] [--hold-ms 10] "
        "[--fair 1] [--json FILE]",
        2);
  c.seconds = run_flags.seconds;
  c.name = "crowd-" + std::to_string(::getpid());
  c.procs = std::min(c.procs, c.clients);
  return in_temp_dir("dlock-crowd-bench", [&](const std::string& dir) { return run(c, run_flags, dir); });
}
