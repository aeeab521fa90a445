// A first look at dlock: two owners contend for one lock; the second waits
// without polling and is woken the moment the first releases. Fences grow.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <dlock/dlock.hpp>
#include <iostream>
#include <thread>

int main(int argc, char** argv) {
  std::string url = "redis://127.0.0.1:6379";
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--url") == 0) url = argv[i + 1];
  try {
    auto client = dlock::Client::connect(url);
    dlock::Mutex a(client, "example:orders:42");
    dlock::Mutex b(client, "example:orders:42");  // another owner

    std::unique_lock la(a);
    std::cout << "A holds the lock, fence " << a.fence() << '\n';
    std::cout << "B try_lock while A holds it: " << (b.try_lock() ? "acquired (bug!)" : "busy") << '\n';

    auto t0 = std::chrono::steady_clock::now();
    std::thread tb([&] {
      std::unique_lock lb(b);  // waits for A's release notification
      auto waited = std::chrono::steady_clock::now() - t0;
      std::cout << "B got the lock after " << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()
                << " ms, fence " << b.fence() << '\n';
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    la.unlock();
    tb.join();

    auto info = client.inspect("example:orders:42").value();
    std::cout << "after both: held=" << info.held << ", fence counter at " << info.last_fence << '\n';

    const std::uint64_t result = dlock::with_lock(client, "example:report", std::chrono::seconds(5),
                                                  [](const dlock::Lease& l) { return l.fence(); });
    std::cout << "with_lock ran with fence " << result << '\n';
    return 0;
  } catch (const dlock::Error& e) {
    std::cerr << "dlock-example: " << e.what() << " (next step: " << dlock::to_string(e.next_step()) << ")\n";
    return 1;
  }
}
