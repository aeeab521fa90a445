// The order demo's coordinator process: runs orders as TCC or 2PC
// transactions, each over the stock, payment and order participants. The
// experiment starts it, kills it, pauses it and restarts it; every start
// runs the orders not yet in the log and leaves the rest to recovery.
#ifndef DLOCK_EXAMPLES_ORDERS_COORDINATOR_HPP_
#define DLOCK_EXAMPLES_ORDERS_COORDINATOR_HPP_

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace orders {

using std::chrono::milliseconds;

inline constexpr int kPrice = 7;  // money per order; one unit of stock each
inline const std::vector<std::string> kRoles = {"stock", "payment", "order"};
inline constexpr milliseconds kClaimLease{1000};  // a dead coordinator's orders recover after it

inline std::string gid_of(const std::string& protocol, int order) { return protocol + "-" + std::to_string(order); }

struct CoordinatorArgs {
  std::string protocol;  // tcc, 2pc, or naive (TCC with no log: the seed's warning)
  std::string log;       // the log's URL
  int orders = 0, concurrency = 4;
  int first = 0;              // naive: the first order to run (it has no log to ask)
  bool recover_only = false;  // a second coordinator: only recovers, until killed
  // tcc: role -> http://127.0.0.1:PORT; 2pc: role -> postgres://... of its database
  std::map<std::string, std::string> participants;
  // Where each run()'s answer is appended, one line per call: "GID TOLD
  // START_NS END_NS" (TOLD: committed, aborted, in_doubt, or the error's
  // code; the times on the steady clock, which every process of the host
  // shares), for the experiment to hold against the log. "" = nowhere.
  std::string told;
  // 2pc: every `reverse_every`-th order lists its stock and payment
  // branches the other way round, so that concurrent orders lock the two
  // rows in opposite orders (0 = never).
  int reverse_every = 0;
};

// The bound a run() is held to: the Try phase, the decision and the
// Confirms, and an allowance for the log's writes (the claim rides in the
// record's first write).
inline constexpr milliseconds kRunBound{2000 + 1000 + 1000 + 1000};

// The process's exit status: 0 once every order is logged and finished.
int run_coordinator(const CoordinatorArgs& args);

}  // namespace orders

#endif  // DLOCK_EXAMPLES_ORDERS_COORDINATOR_HPP_
