#include "handoff.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace dlock::bench {
namespace {

long long read_counter(const std::string& path) {
  std::ifstream in(path);
  long long v = 0;
  in >> v;
  return v;
}

// One worker's loop; it leaves its grant and release times, and its
// lock's wake-ups, in files of its own.
int worker(const std::function<std::unique_ptr<Turns>()>& make, const std::string& dir, double seconds, int k) {
  const std::string counter = dir + "/w3.counter";
  try {
    const auto m = make();
    std::ofstream ev(dir + "/w3.events." + std::to_string(k));
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
      m->lock();
      const long long got = mono_ns();
      const long long v = read_counter(counter);  // read before the write truncates it
      std::ofstream(counter, std::ios::trunc) << v + 1;
      const long long rel = mono_ns();
      m->unlock();
      ev << got << ' ' << rel << '\n';
    }
    std::ofstream(dir + "/w3.wakeups." + std::to_string(k)) << m->wakeups();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "w3 worker: %s\n", e.what());
    return 1;
  }
  return 0;
}

// dlock's Mutex on a client of its own.
class MutexTurns final : public Turns {
 public:
  MutexTurns(const std::string& url, const ClientOptions& options)
      : client_(Client::connect(url, options)), m_(client_, "w3") {}
  void lock() override { m_.lock(); }
  void unlock() override { m_.unlock(); }
  long long wakeups() const override { return static_cast<long long>(client_.stats().wakeups); }

 private:
  Client client_;
  Mutex m_;
};

struct Event {
  long long got, rel;
  int proc;
};

// Every worker's critical sections, in grant order.
std::vector<Event> read_events(const std::string& dir, int procs) {
  std::vector<Event> evs;
  for (int k = 0; k < procs; ++k) {
    std::ifstream in(dir + "/w3.events." + std::to_string(k));
    long long g = 0, r = 0;
    while (in >> g >> r) evs.push_back({g, r, k});
  }
  std::sort(evs.begin(), evs.end(), [](const Event& a, const Event& b) { return a.got < b.got; });
  return evs;
}

}  // namespace

Handoff measure_handoff(const std::string& url, const ClientOptions& options, const std::string& dir, double seconds,
                        int procs) {
  return measure_handoff([&] { return std::make_unique<MutexTurns>(url, options); }, dir, seconds, procs);
}

Handoff measure_handoff(const std::function<std::unique_ptr<Turns>()>& make, const std::string& dir, double seconds,
                        int procs) {
  std::filesystem::remove(dir + "/w3.counter");
  in_processes(
      procs, [&](int k) { return worker(make, dir, seconds, k); }, "W3 worker");
  const std::vector<Event> evs = read_events(dir, procs);
  long long wakeups = 0;
  for (int k = 0; k < procs; ++k) wakeups += read_counter(dir + "/w3.wakeups." + std::to_string(k));
  std::vector<double> gaps;
  long long same = 0;
  for (std::size_t i = 1; i < evs.size(); ++i) {
    if (evs[i].proc == evs[i - 1].proc) {
      ++same;
      continue;
    }
    gaps.push_back(static_cast<double>(evs[i].got - evs[i - 1].rel) / 1000.0);
  }
  Handoff h;
  h.cs_per_s = static_cast<double>(evs.size()) / seconds;
  h.p50_us = percentile(gaps, 0.5);
  h.p99_us = percentile(gaps, 0.99);
  h.same_holder = evs.size() > 1 ? static_cast<double>(same) / static_cast<double>(evs.size() - 1) : 0;
  // Releases that handed over to a waiter: each should wake exactly one.
  h.wakeups_per_release = gaps.empty() ? 0 : static_cast<double>(wakeups) / static_cast<double>(gaps.size());
  h.lost = static_cast<long long>(evs.size()) - read_counter(dir + "/w3.counter");
  return h;
}

void HandoffReps::add(const Handoff& h) {
  cs_.push_back(h.cs_per_s);
  p50_.push_back(h.p50_us);
  p99_.push_back(h.p99_us);
  same_.push_back(h.same_holder);
  wakeups_.push_back(h.wakeups_per_release);
  lost_ += h.lost;
}

Handoff HandoffReps::median() const {
  return {bench::median(cs_),   bench::median(p50_),     bench::median(p99_),
          bench::median(same_), bench::median(wakeups_), lost_};
}

void HandoffReps::print(int procs, bool wakeups) const {
  const Handoff m = median();
  std::printf(
      "W3, %d processes on one lock\n  %.0f critical sections/s, hand-off p50 %.0f us, p99 %.0f us, "
      "same-holder fraction %.2f, ",
      procs, m.cs_per_s, m.p50_us, m.p99_us, m.same_holder);
  if (wakeups) std::printf("wake-ups per hand-off %.2f, ", m.wakeups_per_release);
  std::printf("lost updates %lld\n", m.lost);
}

void HandoffReps::print_beside(const char* label) const {
  const Handoff m = median();
  std::printf(
      "  %s: %.0f critical sections/s, hand-off p50 %.0f us, p99 %.0f us, same-holder fraction %.2f, "
      "lost updates %lld\n",
      label, m.cs_per_s, m.p50_us, m.p99_us, m.same_holder, m.lost);
}

void HandoffReps::add_json(JsonLine& j, bool wakeups, const std::string& prefix) const {
  const Handoff m = median();
  j.num(prefix + "cs_per_s", m.cs_per_s).num(prefix + "handoff_p50_us", m.p50_us);
  j.num(prefix + "handoff_p99_us", m.p99_us).num(prefix + "same_holder", m.same_holder);
  if (wakeups) j.num(prefix + "wakeups_per_handoff", m.wakeups_per_release);
  j.num(prefix + "lost", m.lost);
}

double shared_client_pairs(const std::string& url, const ClientOptions& options, double seconds, int threads) {
  auto client = Client::connect(url, options);
  std::atomic<long long> pairs{0};
  std::atomic<bool> failed{false};
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      for (long long i = 0; Clock::now() < end; ++i) {
        auto lease = client.acquire("w2:" + std::to_string(t) + ":" + std::to_string(i), std::chrono::milliseconds(0));
        if (!lease.ok() || !lease->release().ok()) {
          failed = true;
          return;
        }
        ++pairs;
      }
    });
  for (auto& t : ts) t.join();
  if (failed) throw std::runtime_error("a W2 pair failed");
  return static_cast<double>(pairs.load()) / seconds;
}

}  // namespace dlock::bench
