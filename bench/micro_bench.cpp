// Micro-benchmarks of the hot pure code: RESP encoding and decoding, key
// derivation, the acquire state machine and renewal scheduling. These reach
// into src/ on purpose (they measure internals); everything end-to-end is in
// dlock_bench.cpp, on the public API.
#include <benchmark/benchmark.h>

#include "core/acquire_fsm.hpp"
#include "core/renewal_scheduler.hpp"
#include "redis/keys.hpp"
#include "redis/resp.hpp"

namespace {

using namespace std::chrono_literals;

void BM_LockKeys(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(dlock::detail::lock_keys("dlock:", "orders:42"));
}
BENCHMARK(BM_LockKeys);

void BM_FormatAcquire(benchmark::State& state) {
  std::string out;
  for (auto _ : state) {
    out.clear();
    dlock::redis::append_command(out, {"EVALSHA", "0123456789abcdef0123456789abcdef01234567", "2", "dlock:{orders:42}",
                                       "dlock:{orders:42}:fence", "5f0c2a9e8d7b6a5f4e3d2c1b0a998877", "30000", "0"});
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_FormatAcquire);

void BM_ParseGrantReply(benchmark::State& state) {
  const std::string wire = "*3\r\n:1\r\n:12345\r\n:1\r\n";
  dlock::redis::ReplyReader reader;
  dlock::Status err;
  for (auto _ : state) {
    reader.feed(wire.data(), wire.size());
    benchmark::DoNotOptimize(reader.next(err));
  }
}
BENCHMARK(BM_ParseGrantReply);

void BM_AcquireFsmUncontended(benchmark::State& state) {
  const auto now = std::chrono::steady_clock::now();
  for (auto _ : state) {
    dlock::detail::AcquireFsm fsm(now, dlock::kForever, 2s);
    benchmark::DoNotOptimize(fsm.start());
    benchmark::DoNotOptimize(fsm.on_granted(now, now, 30s, true));
  }
}
BENCHMARK(BM_AcquireFsmUncontended);

// One watchdog tick over N held leases: take the due batch, confirm it.
void BM_RenewalTick(benchmark::State& state) {
  const auto n = static_cast<dlock::detail::RenewalScheduler::Id>(state.range(0));
  dlock::detail::RenewalScheduler s;
  auto t = std::chrono::steady_clock::time_point(std::chrono::seconds(1000));
  for (dlock::detail::RenewalScheduler::Id id = 1; id <= n; ++id) s.add(id, t, 30s, 10s, true);
  for (auto _ : state) {
    t += 10s;
    auto due = s.take_due(t);
    for (auto id : due) s.renewed(id, t);
    benchmark::DoNotOptimize(s.next_wakeup());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_RenewalTick)->Arg(100)->Arg(10000);

}  // namespace

BENCHMARK_MAIN();
