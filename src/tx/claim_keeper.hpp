// The claims a coordinator holds on the transactions it drives (see
// TxLog::create and TxLog::claim), kept alive while it drives them. Most
// transactions end well within one lease and cost no renewal at all: a
// claim is renewed only once it has lasted a third of its lease.
#ifndef DLOCK_TX_CLAIM_KEEPER_HPP_
#define DLOCK_TX_CLAIM_KEEPER_HPP_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tx/tx_log.hpp"

namespace dlock::tx::detail {

class ClaimKeeper {
 public:
  using Clock = std::chrono::steady_clock;

  // One claim. fence() and lost() from any thread.
  class Claim {
   public:
    Claim(std::string gid, std::uint64_t fence, Clock::time_point sent_at, milliseconds lease);
    std::uint64_t fence() const { return fence_; }
    const std::string& gid() const { return gid_; }
    // True once the claim may have lapsed (its last renewal's send time
    // plus the lease, less drift) or was found taken over; it stays so.
    bool lost() const;

   private:
    friend class ClaimKeeper;
    void renewed(Clock::time_point sent_at);

    const std::string gid_;
    const std::uint64_t fence_;
    const milliseconds lease_;
    Clock::time_point renewed_at_;  // the keeper's thread only, after keep()
    std::atomic<Clock::rep> valid_until_;
    mutable std::atomic<bool> lost_{false};
  };

  // Holds a claim for as long as it lives, then stops renewing it.
  class Kept {
   public:
    Kept(ClaimKeeper* keeper, std::shared_ptr<Claim> claim) : keeper_(keeper), claim_(std::move(claim)) {}
    Kept(Kept&&) noexcept = default;
    Kept& operator=(Kept&&) = delete;
    ~Kept();
    const Claim& operator*() const { return *claim_; }
    const Claim* operator->() const { return claim_.get(); }

   private:
    ClaimKeeper* keeper_;
    std::shared_ptr<Claim> claim_;
  };

  ClaimKeeper(TxLog& log, milliseconds lease) : log_(log), lease_(lease) {}
  ClaimKeeper(const ClaimKeeper&) = delete;
  ClaimKeeper& operator=(const ClaimKeeper&) = delete;
  ~ClaimKeeper();

  // Keeps the claim on `gid` that a write sent at `sent_at` took.
  Kept keep(std::string gid, std::uint64_t fence, Clock::time_point sent_at);

  milliseconds lease() const { return lease_; }

 private:
  void forget(const Claim* claim);
  void run();
  // The claims that have lasted a third of their lease, renewed.
  void renew_due(std::unique_lock<std::mutex>& lock);

  TxLog& log_;
  const milliseconds lease_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<bool> stopping_{false};
  std::vector<std::shared_ptr<Claim>> claims_;  // under mu_
  std::thread thread_;                          // started by the first keep()
};

}  // namespace dlock::tx::detail

#endif  // DLOCK_TX_CLAIM_KEEPER_HPP_
