#include "coordinator.hpp"

#include <fcntl.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <dlock/tx.hpp>
#include <iostream>
#include <map>
#include <optional>
#include <thread>
#include <vector>

namespace tx = dlock::tx;
using namespace std::chrono_literals;

namespace orders {
namespace {

tx::CoordinatorOptions options() {
  tx::CoordinatorOptions o;
  o.timeout = 2000ms;        // the Try phase: a participant down this long aborts the order
  o.finish_within = 1000ms;  // then recovery finishes the Confirms or Cancels
  o.retry_base = 20ms;
  o.retry_cap = 300ms;
  o.claim_lease = kClaimLease;
  o.alert_after = 1000000;  // the experiment counts outcomes, not alerts
  return o;
}

// Branch b's payload for order `gid`: the units of stock, the money, the
// order's id.
std::string payload(int b, const std::string& gid) { return b == 0 ? "1" : b == 1 ? std::to_string(kPrice) : gid; }

// `body` on `n` threads at once, until each returns.
template <class Body>
void on_threads(int n, const Body& body) {
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back(body);
  for (auto& t : threads) t.join();
}

// One statement of a 2PC branch's work, with at most one parameter; the
// rows it changed, -1 on error.
int pg_exec(pg_conn* conn, const std::string& sql, const std::string* param = nullptr) {
  const char* values[] = {param ? param->c_str() : nullptr};
  PGresult* r = PQexecParams(conn, sql.c_str(), param ? 1 : 0, nullptr, values, nullptr, nullptr, 0);
  const int rows = PQresultStatus(r) == PGRES_COMMAND_OK ? std::atoi(PQcmdTuples(r)) : -1;
  PQclear(r);
  return rows;
}

// The 2PC work of `role` for order `gid`, left open for the coordinator to
// prepare; every branch also records the gid in `moves`, for the checks.
tx::XaBranch xa_branch(int b, const std::string& gid) {
  const std::string& role = kRoles[b];
  return {role, [role, gid, amount = payload(b, gid)](pg_conn* conn) {
            const int n = role == "order" ? pg_exec(conn, "INSERT INTO orders (id, status) VALUES ($1, 'paid')", &gid)
                                          : pg_exec(conn, "UPDATE ledger SET available = available - " + amount +
                                                              ", done = done + " + amount + " WHERE name = '" + role +
                                                              "' AND available >= " + amount);
            if (n == 0) return tx::Outcome::failure;  // sold out, or not enough money
            if (n != 1 || pg_exec(conn, "INSERT INTO moves (gid) VALUES ($1)", &gid) != 1) return tx::Outcome::unknown;
            return tx::Outcome::success;
          }};
}

// A participant service's three calls over HTTP.
dlock::Result<tx::Participant> http_calls(const std::string& url) {
  tx::HttpParticipant p;
  p.try_url = url + "/try";
  p.confirm_url = url + "/confirm";
  p.cancel_url = url + "/cancel";
  p.timeout = 250ms;
  return tx::http_participant(p);
}

// The coordinator the seed warns about: Try, then Confirm or Cancel, each
// once, with the decision only in memory and no log. Killed between its
// calls, it leaves orders half confirmed or frozen, and nobody finishes
// them; restarted, it goes on with new orders.
int run_naive(const CoordinatorArgs& args, const std::map<std::string, tx::Participant>& calls) {
  std::atomic<int> next{args.first};
  auto worker = [&] {
    for (int k; (k = next++) < args.orders;) {
      const std::string gid = gid_of(args.protocol, k);
      auto call = [&](int b, tx::Op op) {
        const auto& p = calls.at(kRoles[b]);
        try {
          return (op == tx::Op::try_      ? p.try_
                  : op == tx::Op::confirm ? p.confirm
                                          : p.cancel)({gid, b, op, payload(b, gid)});
        } catch (const std::exception&) {
          return tx::Outcome::unknown;
        }
      };
      bool all_tried = true;
      for (int b = 0; b < 3 && all_tried; ++b) all_tried = call(b, tx::Op::try_) == tx::Outcome::success;
      for (int b = 0; b < 3; ++b) (void)call(b, all_tried ? tx::Op::confirm : tx::Op::cancel);
    }
  };
  on_threads(args.concurrency, worker);
  return 0;
}

}  // namespace

int run_coordinator(const CoordinatorArgs& args) {
  if (args.protocol == "naive") {
    if (args.recover_only) return 0;  // nothing to recover from: no log
    std::map<std::string, tx::Participant> calls;
    for (const auto& [role, url] : args.participants) {
      auto p = http_calls(url);
      if (!p.ok()) return 2;
      calls[role] = *p;
    }
    return run_naive(args, calls);
  }
  // Set-up meets the same faults as the rest (a reset link, a paused
  // server): what may succeed later is tried again for a while.
  auto set_up = [&](auto step) {
    dlock::Status s;
    for (int attempt = 0; attempt < 100; ++attempt) {
      s = step();
      if (s.ok() || s.next_step() == dlock::NextStep::give_up) break;
      std::this_thread::sleep_for(200ms);
    }
    if (!s.ok()) std::cerr << "coordinator: " << s.message() << '\n';
    return s.ok();
  };
  std::optional<tx::Coordinator> c;
  if (!set_up([&] {
        auto opened = tx::Coordinator::open(args.log, options());
        if (opened.ok()) c.emplace(std::move(*opened));
        return opened.status();
      }))
    return 2;
  for (const auto& [role, url] : args.participants) {
    if (args.protocol == "tcc") {
      auto calls = http_calls(url);
      if (!calls.ok()) {
        std::cerr << "coordinator: " << calls.status().message() << '\n';
        return 2;
      }
      c->add_participant(role, *calls);
    } else if (!set_up([&] { return c->add_database(role, url); })) {
      return 2;
    }
  }
  if (args.recover_only) {
    for (;;) {
      (void)c->recover();  // errors (the log busy, a participant down) are retried
      std::this_thread::sleep_for(100ms);
    }
  }

  // What each run() said, appended whole with one write(2): a kill cannot
  // leave half a line, nor lose one the call returned.
  const int told_fd = args.told.empty() ? -1 : ::open(args.told.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  auto told = [&](const std::string& gid, const dlock::Result<tx::State>& r, std::chrono::steady_clock::time_point t0) {
    if (told_fd < 0) return;
    const auto t1 = std::chrono::steady_clock::now();
    const std::string word = r.ok() ? "committed" : std::string(dlock::to_string(r.code()));
    const std::string line = gid + " " + word + " " + std::to_string(t0.time_since_epoch().count()) + " " +
                             std::to_string(t1.time_since_epoch().count()) + "\n";
    (void)!::write(told_fd, line.data(), line.size());
  };
  auto reverse = [&](int k) { return args.reverse_every > 0 && k % args.reverse_every == args.reverse_every - 1; };
  std::atomic<int> next{0};
  auto worker = [&] {
    for (int k; (k = next++) < args.orders;) {
      const std::string gid = gid_of(args.protocol, k);
      for (;;) {
        auto known = c->show(gid);
        if (known.ok()) break;  // logged, by this process or a dead one: recovery's
        if (known.code() == dlock::Errc::not_held) {
          const auto t0 = std::chrono::steady_clock::now();
          auto r =
              args.protocol == "tcc"
                  ? c->run(gid,
                           {{kRoles[0], payload(0, gid)}, {kRoles[1], payload(1, gid)}, {kRoles[2], payload(2, gid)}})
                  : c->run_2pc(
                        gid, reverse(k)
                                 ? std::vector<tx::XaBranch>{xa_branch(1, gid), xa_branch(0, gid), xa_branch(2, gid)}
                                 : std::vector<tx::XaBranch>{xa_branch(0, gid), xa_branch(1, gid), xa_branch(2, gid)});
          told(gid, r, t0);
          // Decided, or in doubt (never run again under a new id; recovery
          // finishes it): done here.
          if (r.ok() || r.code() == dlock::Errc::aborted || r.code() == dlock::Errc::in_doubt) break;
        }
        std::this_thread::sleep_for(50ms);  // busy, or an error before the log had it: look again
      }
    }
  };
  on_threads(args.concurrency, worker);

  // Finish what is left (this process's, or a dead one's once its claim
  // lapses) before saying done.
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto left = c->list_unfinished(1);
    if (left.ok() && left->empty()) return 0;
    (void)c->recover();
    std::this_thread::sleep_for(50ms);
  }
  std::cerr << "coordinator: transactions still unfinished after 60 s\n";
  return 3;
}

}  // namespace orders
