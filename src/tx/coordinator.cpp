// The TCC coordinator: claims a transaction in its log record, runs the
// I/O-free TccMachine, calls the participants and writes the log.
#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include "dlock/client.hpp"
#include "dlock/lease.hpp"
#include "dlock/tx.hpp"
#include "sqlite/url.hpp"
#include "tx/sqlite_log.hpp"
#if DLOCK_TX_WITH_POSTGRES
#include "tx/pg_log.hpp"
#include "tx/pg_xa.hpp"
#endif
#include "tx/call_pool.hpp"
#include "tx/claim_keeper.hpp"
#include "tx/tcc_machine.hpp"
#include "tx/tx_log.hpp"

namespace dlock::tx {

using detail::BranchProgress;
using detail::Clock;
using detail::Step;
using detail::TccMachine;

namespace {

constexpr std::size_t kMaxGid = 120;  // so that "gid:branch" stays within PostgreSQL's 200-byte gids

constexpr std::string_view kDatabasePrefix = "pg:";  // a 2PC branch's participant in the log
constexpr milliseconds kRecoveryClaimWait{100};

std::string claim_name(std::string_view gid) { return "dlock-tx/" + std::string(gid); }

double jitter_unit() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

}  // namespace

struct Coordinator::Impl {
  CoordinatorOptions options;
  std::unique_ptr<detail::TxLog> log;
  detail::ClaimKeeper keeper;  // after `log`, so that it stops first
  detail::CallPool pool;       // branch calls made at once (parallel_branches)
  // Recovery also takes the dlock lease "dlock-tx/<gid>" that coordinators
  // before claims in the record drove under, so that it never takes over a
  // transaction one of them still drives during an upgrade.
  Client claims;
  mutable std::mutex mu;
  std::map<std::string, Participant, std::less<>> participants;
#if DLOCK_TX_WITH_POSTGRES
  // 2PC: the databases by name (participant "pg:<name>" in the log), and
  // the work of the branches of transactions being run here.
  std::map<std::string, std::shared_ptr<detail::XaDatabase>, std::less<>> databases;
  std::map<std::pair<std::string, int>, std::function<Outcome(pg_conn*)>> works;
#endif
  std::atomic<std::uint64_t> started{0}, committed{0}, aborted{0}, recovered{0};
  std::atomic<std::uint64_t> branch_calls{0}, branch_failures{0}, alerts{0};

  Impl(CoordinatorOptions o, std::unique_ptr<detail::TxLog> l, Client c)
      : options(std::move(o)), log(std::move(l)), keeper(*log, options.claim_lease), claims(std::move(c)) {}

  // The dlock lease on `gid` (earlier versions' claim), waiting up to
  // `wait`: on SQLite a try answers busy while another connection holds the
  // file's write lock, so even a free one needs a moment under load.
  Result<Lease> legacy_claim(std::string_view gid, milliseconds wait) const {
    LockOptions lo;
    lo.watchdog_lease = options.claim_lease;
    lo.renew_interval = options.claim_lease / 3;
    lo.holder_label = "dlock-tx";
    return claims.acquire(claim_name(gid), wait, lo);
  }

  Outcome call(const std::string& participant, const BranchContext& ctx, std::string& error) {
#if DLOCK_TX_WITH_POSTGRES
    if (participant.starts_with(kDatabasePrefix)) return call_database(participant, ctx, error);
#endif
    Call fn;
    {
      std::lock_guard lock(mu);
      auto it = participants.find(participant);
      if (it == participants.end()) {
        error = "no participant '" + participant + "' is registered in this coordinator";
        return Outcome::unknown;  // another process may know it: retried
      }
      fn = ctx.op == Op::try_ ? it->second.try_ : ctx.op == Op::confirm ? it->second.confirm : it->second.cancel;
    }
    ++branch_calls;
    if (!fn) {
      error = "participant '" + participant + "' has no " + std::string(to_string(ctx.op));
      return Outcome::unknown;
    }
    try {
      return fn(ctx);
    } catch (const Error& e) {  // every outcome it throws is unknown here: its message says why
      error = "threw: " + e.status().message();
    } catch (const std::exception& e) {
      error = std::string("threw: ") + e.what();
    } catch (...) {
      error = "threw a non-standard exception";
    }
    return Outcome::unknown;
  }

#if DLOCK_TX_WITH_POSTGRES
  // A 2PC branch: Try prepares (with the work given to run_2pc), Confirm
  // commits the prepared transaction, Cancel rolls it back.
  Outcome call_database(const std::string& participant, const BranchContext& ctx, std::string& error) {
    std::shared_ptr<detail::XaDatabase> db;
    std::function<Outcome(pg_conn*)> work;
    {
      std::lock_guard lock(mu);
      auto it = databases.find(std::string_view(participant).substr(kDatabasePrefix.size()));
      if (it == databases.end()) {
        error = "no database '" + participant.substr(kDatabasePrefix.size()) + "' is added to this coordinator";
        return Outcome::unknown;
      }
      db = it->second;
      if (auto w = works.find({ctx.gid, ctx.branch}); w != works.end()) work = w->second;
    }
    ++branch_calls;
    const std::string xid = detail::xid_of(log->id(), ctx.gid, ctx.branch);
    switch (ctx.op) {
      case Op::try_:
        if (!work) {
          error = "the branch's work is not in this process";
          return Outcome::unknown;
        }
        return db->prepare(xid, work, error, ctx.deadline);
      case Op::confirm:
        return db->commit(xid, error, ctx.deadline);
      case Op::cancel:
        return db->rollback(xid, error, ctx.deadline);
    }
    return Outcome::unknown;
  }

  // Prepared transactions of this log whose branch may have been settled
  // without them (a late PREPARE after the ROLLBACK PREPARED that found
  // nothing): one whose transaction is unknown (presumed abort), aborting or
  // aborted is rolled back, one whose transaction is committing or
  // committed is committed (the decision is fixed either way). Undecided
  // ones are left to their driver. Returns how many it ended.
  Result<int> resolve_orphans() {
    std::vector<std::shared_ptr<detail::XaDatabase>> dbs;
    {
      std::lock_guard lock(mu);
      for (const auto& [name, db] : databases) dbs.push_back(db);
    }
    int ended = 0;
    for (const auto& db : dbs) {
      auto xids = db->prepared();
      if (!xids.ok()) return xids.status();
      for (const auto& xid : *xids) {
        std::string gid, error;
        int branch = 0;
        if (!detail::parse_xid(xid, log->id(), gid, branch)) continue;  // another log's, or not ours
        auto info = log->load(gid);
        if (!info.ok() && info.code() != Errc::not_held) return info.status();
        const State state = info.ok() ? info->state : State::aborted;
        if (state == State::trying) continue;  // its driver may still prepare and decide
        const bool commit = state == State::committing || state == State::committed;
        const Outcome o = commit ? db->commit(xid, error) : db->rollback(xid, error);
        if (o == Outcome::success) ++ended;
      }
    }
    return ended;
  }
#endif

  void trace(std::string_view gid, const std::string& what) const {
    if (options.on_step) options.on_step(gid, what);
  }

  static std::vector<BranchInfo> progress_of(const TccMachine& m, const TxInfo& info) {
    std::vector<BranchInfo> out = info.branches;
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i].done = m.branches()[i].done;
      out[i].attempts = m.branches()[i].attempts;
      out[i].last_error = m.branches()[i].last_error;
    }
    return out;
  }

  // How long drive() may go on once the transaction is decided (counted
  // from the decision, or from the start if it was decided already): no
  // Confirm or Cancel starts after `calls_for`, each is cut there, and a
  // backoff ending after `waits_for` is left to recovery.
  struct Budget {
    milliseconds calls_for;
    milliseconds waits_for;
  };

  // Saves each branch's progress for recovery, due `due_in` from now.
  Status leave(TccMachine& m, const TxInfo& info, std::uint64_t fence, milliseconds due_in) {
    auto saved = log->save(info.gid, fence, m.state(), progress_of(m, info), std::max(due_in, milliseconds(0)));
    if (!saved.ok()) return saved.status();
    trace(info.gid, "saved");
    return {};
  }

  // The decision's write got no answer, or a refusal that says someone
  // else wrote the transaction. Writing the same fenced compare-and-set
  // again is safe whichever way the first one went (a write still in
  // flight can land only if this one does not, and then says the same);
  // then the log's state is the decision. nullopt: the log could not tell
  // by `by`.
  std::optional<State> settle(const TxInfo& info, std::uint64_t fence, const Step& step, Clock::time_point by) {
    for (milliseconds pause{10};; pause = std::min(pause * 2, milliseconds(200))) {
      auto moved = log->move(info.gid, fence, State::trying, step.to, step.reason, by);
      if (moved.ok() && *moved) return step.to;
      if (moved.ok()) {
        auto now = log->load(info.gid, by);
        if (now.ok()) return now->state;
      }
      if (Clock::now() + pause >= by) return std::nullopt;
      std::this_thread::sleep_for(pause);
    }
  }

  // One Try, Confirm or Cancel, cut at `by`, on any thread: its outcome,
  // and in `error` why it was not a success.
  Outcome invoke(const TxInfo& info, const Step& step, Clock::time_point by, std::string& error) {
    const auto& b = info.branches[static_cast<std::size_t>(step.branch)];
    BranchContext ctx{info.gid, step.branch, step.op, b.payload, by};
    const std::string which = std::string(to_string(step.op)) + " " + std::to_string(step.branch);
    trace(info.gid, "before " + which);
    const Outcome o = call(b.participant, ctx, error);
    trace(info.gid, "after " + which);
    return o;
  }

  // Feeds a call's outcome to the machine, on the driving thread; alerts
  // every alert_after failed attempts.
  void record(TccMachine& m, const TxInfo& info, const Step& step, Outcome o, std::string error) {
    if (o != Outcome::success) ++branch_failures;
    const int attempts = m.on_call(step.branch, step.op, o, std::move(error), Clock::now(), jitter_unit());
    if (attempts > 0 && options.alert_after > 0 && attempts % options.alert_after == 0 && options.on_alert) {
      ++alerts;
      Alert a{info.gid, step.branch, step.op, attempts, m.branches()[step.branch].last_error};
      try {
        options.on_alert(a);
      } catch (...) {
      }
    }
  }

  // The calls due now, cut at `by`: the one next() named, or with
  // parallel_branches every one due, made at once.
  void call_branches(TccMachine& m, const TxInfo& info, const Step& step, Clock::time_point now, Clock::time_point by) {
    std::vector<Step> steps = options.parallel_branches ? m.calls(now) : std::vector<Step>{};
    if (steps.size() <= 1) {
      std::string error;
      const Outcome o = invoke(info, step, by, error);
      record(m, info, step, o, std::move(error));
      return;
    }
    std::vector<Outcome> outcomes(steps.size(), Outcome::unknown);
    std::vector<std::string> errors(steps.size());
    // What the caller's on_step threw, thrown on the driving thread once
    // every call of the batch has returned (as it would be from a call
    // made there).
    std::vector<std::exception_ptr> thrown(steps.size());
    std::vector<std::function<void()>> jobs;
    for (std::size_t i = 0; i < steps.size(); ++i)
      jobs.emplace_back([&, i] {
        try {
          outcomes[i] = invoke(info, steps[i], by, errors[i]);
        } catch (...) {
          thrown[i] = std::current_exception();
        }
      });
    pool.run_all(jobs);
    for (std::size_t i = 0; i < steps.size(); ++i)
      if (!thrown[i]) record(m, info, steps[i], outcomes[i], std::move(errors[i]));
    for (const auto& e : thrown)
      if (e) std::rethrow_exception(e);
  }

  // Writes the decision. nullopt: it is logged as this coordinator's and
  // phase two begins; a state: drive() ends with it (`reason` set).
  Result<std::optional<State>> write_decision(TccMachine& m, const TxInfo& info, std::uint64_t fence, const Step& step,
                                              Budget budget, std::string& reason) {
    // The write itself is bounded by the log's command timeout (a tighter
    // bound would cut a synchronous commit short); reading it back after a
    // lost answer by finish_within, at least 1 s.
    auto moved = log->move(info.gid, fence, State::trying, step.to, step.reason);
    const auto by = Clock::now() + std::max(budget.calls_for, milliseconds(1000));
    std::optional<State> landed;
    if (moved.ok() && *moved)
      landed = step.to;
    else if (moved.ok() || moved.status().next_step() != NextStep::give_up)
      landed = settle(info, fence, step, by);
    else
      return moved.status();  // refused for good: nothing was written
    if (!landed) {
      // Abort was the only decision this coordinator could write, and
      // whoever takes an undecided transaction over aborts it too.
      if (step.to == State::aborting) {
        reason = step.reason;
        return std::optional<State>(State::aborting);
      }
      return Status(Errc::in_doubt, "transaction '" + info.gid +
                                        "': the log did not confirm the commit decision in time (" +
                                        (moved.ok() ? std::string("moved on") : moved.status().message()) +
                                        "); it may or may not be decided: do not run it again, ask show() "
                                        "later, recover() finishes it either way");
    }
    if (*landed == State::trying)
      return Status(Errc::lease_lost,
                    "transaction '" + info.gid + "' was taken over before its decision; it will be aborted");
    if (*landed != step.to) {
      // Another coordinator decided (it aborts what it takes over
      // undecided) and drives it now: its answer is the outcome.
      reason = "decided by another coordinator";
      return landed;
    }
    if (step.to == State::aborting) reason = step.reason;
    m.on_logged(step.to);
    trace(info.gid, std::string(to_string(step.to)));
    return std::optional<State>();
  }

  // Logs committed or aborted once every branch has answered.
  Status write_finish(TccMachine& m, const TxInfo& info, std::uint64_t fence, const Step& step) {
    auto moved = log->move(info.gid, fence, m.state(), step.to, step.reason);
    if (!moved.ok()) return moved.status();
    if (!*moved) return Status(Errc::lease_lost, "transaction '" + info.gid + "' moved on without this coordinator");
    m.on_logged(step.to);
    trace(info.gid, std::string(to_string(step.to)));
    if (step.to == State::committed) ++committed;
    if (step.to == State::aborted) ++aborted;
    return {};
  }

  // Drives `info` under `claim` (and `lease`, if not null) until it is
  // finished, or decided and out of `budget`; then saves the progress for
  // recovery, which ends the claim. Left unfinished otherwise (an error),
  // the claim ends here, so that recovery takes over at once (when this
  // write is lost, once the claim lapses). The Try phase is bounded by the
  // machine's deadline, each Try cut there. Returns the state reached.
  Result<State> drive(TccMachine& m, const TxInfo& info, const detail::ClaimKeeper::Claim& claim, const Lease* lease,
                      Budget budget, std::string& reason) {
    bool saved = false;
    auto state = drive_steps(m, info, claim, lease, budget, reason, saved);
    if (!saved && !finished(m.state())) (void)log->release(info.gid, claim.fence());
    return state;
  }

  Result<State> drive_steps(TccMachine& m, const TxInfo& info, const detail::ClaimKeeper::Claim& claim,
                            const Lease* lease, Budget budget, std::string& reason, bool& saved) {
    const std::uint64_t fence = claim.fence();
    Clock::time_point calls_by{}, waits_by{};
    auto start_phase_two = [&] {
      const auto now = Clock::now();
      calls_by = now + budget.calls_for;
      waits_by = now + budget.waits_for;
    };
    if (decided(m.state())) start_phase_two();
    for (;;) {
      const auto now = Clock::now();
      const Step step = m.next(now);
      // Finished is finished, even if the claim lapsed during the last write.
      if (step.kind != Step::Kind::done && (claim.lost() || (lease != nullptr && lease->lost())))
        return Status(Errc::lease_lost, "the claim on transaction '" + info.gid +
                                            "' was lost; another coordinator "
                                            "may drive it now");
      switch (step.kind) {
        case Step::Kind::done:
          return m.state();
        case Step::Kind::call:
          if (decided(m.state()) && now >= calls_by) {
            if (Status s = leave(m, info, fence, milliseconds(0)); !s.ok()) return s;
            saved = true;
            return m.state();
          }
          call_branches(m, info, step, now, decided(m.state()) ? calls_by : m.deadline());
          break;
        case Step::Kind::decide: {
          auto ended = write_decision(m, info, fence, step, budget, reason);
          if (!ended.ok()) return ended.status();
          if (*ended) return **ended;
          start_phase_two();
          break;
        }
        case Step::Kind::finish:
          if (Status s = write_finish(m, info, fence, step); !s.ok()) return s;
          break;
        case Step::Kind::wait: {
          if (decided(m.state()) && step.until > waits_by) {
            const auto due_in = std::chrono::ceil<milliseconds>(step.until - Clock::now());
            if (Status s = leave(m, info, fence, due_in); !s.ok()) return s;
            saved = true;
            return m.state();
          }
          std::this_thread::sleep_until(step.until);
          break;
        }
      }
    }
  }

  // One recovery pass over `gid`, claimed: true if it was driven (false:
  // gone or finished meanwhile).
  Result<bool> recover_one(const std::string& gid, const detail::ClaimKeeper::Claim& claim, const Lease& lease) {
    auto info = log->load(gid);  // read under the claim: nobody else writes it now
    if (!info.ok() || finished(info->state)) {
      (void)log->release(gid, claim.fence());
      if (!info.ok() && info.code() != Errc::not_held) return info.status();
      return false;
    }
    std::vector<BranchProgress> progress(info->branches.size());
    for (std::size_t i = 0; i < progress.size(); ++i) {
      progress[i].done = info->branches[i].done;
      progress[i].attempts = info->branches[i].attempts;
      progress[i].last_error = info->branches[i].last_error;
    }
    TccMachine m(info->state, std::move(progress), Clock::now(), true);
    m.set_backoff(options.retry_base, options.retry_cap);
    std::string reason;
    // One pass: every due call once, within finish_within; then the rest
    // waits for its backoff.
    auto state = drive(m, *info, claim, &lease, {options.finish_within, milliseconds(0)}, reason);
    if (!state.ok()) return state.status();
    ++recovered;
    return true;
  }
};

Coordinator::Coordinator(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
Coordinator::Coordinator(Coordinator&&) noexcept = default;
Coordinator& Coordinator::operator=(Coordinator&&) noexcept = default;
Coordinator::~Coordinator() = default;

Result<Coordinator> Coordinator::open(std::string_view url, CoordinatorOptions options) {
  if (options.timeout <= milliseconds(0) || options.finish_within < milliseconds(0) ||
      options.retry_base <= milliseconds(0) || options.retry_cap < options.retry_base)
    return Status(Errc::invalid_argument,
                  "timeout and retry_base must be > 0, finish_within >= 0 and retry_cap >= retry_base");
  if (options.claim_lease < kMinWatchdogLease || options.claim_lease > kMaxLease)
    return Status(Errc::invalid_argument, "claim_lease must lie within [100 ms, 1 year]");
  Result<std::unique_ptr<detail::TxLog>> log = Status(Errc::invalid_argument, "no log");
  if (url.starts_with("sqlite://")) {
    auto config = sqlite::parse_sqlite_url(url);
    if (!config.ok()) return config.status();
    log = detail::open_sqlite_log(config->path, config->busy, options.create_if_missing);
#if DLOCK_TX_WITH_POSTGRES
  } else if (url.starts_with("postgres://") || url.starts_with("postgresql://")) {
    log = detail::open_pg_log(url, options.create_if_missing);
#endif
  } else {
    return Status(Errc::invalid_argument, std::string("a transaction log is at sqlite:///absolute/path") +
                                              (DLOCK_TX_WITH_POSTGRES ? " or postgres://host/db" : "") +
                                              " (in this build)");
  }
  // The log first: with create_if_missing false, a missing one is reported
  // before the claims' client could make a file or its lock table there.
  if (!log.ok()) return log.status();
  auto client = Client::try_connect(url);
  if (!client.ok()) return client.status();
  return Coordinator(std::make_unique<Impl>(std::move(options), std::move(*log), std::move(*client)));
}

void Coordinator::add_participant(std::string name, Participant participant) {
  std::lock_guard lock(impl_->mu);
  impl_->participants[std::move(name)] = std::move(participant);
}

Result<State> Coordinator::run(std::string_view gid, const std::vector<Branch>& branches) {
  if (gid.empty() || gid.size() > kMaxGid || gid.find('\0') != std::string_view::npos)
    return Status(Errc::invalid_argument, "a transaction id must be 1 to 120 bytes, without NUL");
  if (branches.empty()) return Status(Errc::invalid_argument, "a transaction needs at least one branch");
  {
    std::lock_guard lock(impl_->mu);
    for (const auto& b : branches) {
      if (b.participant.starts_with(kDatabasePrefix))
        return Status(Errc::invalid_argument, "participant names starting with 'pg:' are 2PC's (run_2pc)");
      if (!impl_->participants.contains(b.participant))
        return Status(Errc::invalid_argument, "no participant '" + b.participant + "' is registered");
    }
  }
  return run_logged(gid, branches);
}

Status Coordinator::add_database(std::string name, std::string_view url) {
#if DLOCK_TX_WITH_POSTGRES
  if (name.empty()) return {Errc::invalid_argument, "a database needs a name"};
  auto db = detail::XaDatabase::open(url);
  if (!db.ok()) return db.status();
  std::lock_guard lock(impl_->mu);
  impl_->databases[std::move(name)] = std::shared_ptr<detail::XaDatabase>(std::move(*db));
  return {};
#else
  (void)name;
  (void)url;
  return {Errc::invalid_argument, "this build has no PostgreSQL: no 2PC"};
#endif
}

Result<State> Coordinator::run_2pc(std::string_view gid, const std::vector<XaBranch>& branches) {
#if DLOCK_TX_WITH_POSTGRES
  // The id goes into PREPARE TRANSACTION '...' as a literal.
  const bool plain = std::all_of(gid.begin(), gid.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.' || c == ':';
  });
  if (gid.empty() || gid.size() > kMaxGid || !plain)
    return Status(Errc::invalid_argument, "a 2PC transaction id must be 1 to 120 of [A-Za-z0-9_.:-]");
  if (branches.empty()) return Status(Errc::invalid_argument, "a transaction needs at least one branch");
  std::vector<Branch> logged;
  {
    std::lock_guard lock(impl_->mu);
    for (std::size_t i = 0; i < branches.size(); ++i) {
      if (!impl_->databases.contains(branches[i].database))
        return Status(Errc::invalid_argument, "no database '" + branches[i].database + "' is added");
      if (!branches[i].work) return Status(Errc::invalid_argument, "a 2PC branch needs its work");
      logged.push_back({std::string(kDatabasePrefix) + branches[i].database, {}});
    }
    // Another call running the same gid here keeps its own work.
    if (impl_->works.contains({std::string(gid), 0}))
      return Status(Errc::invalid_argument, "transaction '" + std::string(gid) + "' is being run here already");
    for (std::size_t i = 0; i < branches.size(); ++i)
      impl_->works.try_emplace({std::string(gid), static_cast<int>(i)}, branches[i].work);
  }
  auto state = run_logged(gid, logged);
  std::lock_guard lock(impl_->mu);
  for (std::size_t i = 0; i < branches.size(); ++i) impl_->works.erase({std::string(gid), static_cast<int>(i)});
  return state;
#else
  (void)gid;
  (void)branches;
  return Status(Errc::invalid_argument, "this build has no PostgreSQL: no 2PC");
#endif
}

Result<State> Coordinator::run_logged(std::string_view gid, const std::vector<Branch>& branches) {
  const auto start = Clock::now();
  // The record carries the claim: no lock is taken, and none released.
  auto fence = impl_->log->create(gid, branches, impl_->options.claim_lease);
  if (!fence.ok()) return fence.status();
  auto claim = impl_->keeper.keep(std::string(gid), *fence, start);
  ++impl_->started;
  impl_->trace(gid, "created");
  TxInfo info;
  info.gid = std::string(gid);
  for (const auto& b : branches) info.branches.push_back({b.participant, b.payload, false, 0, {}});
  TccMachine m(State::trying, std::vector<BranchProgress>(branches.size()), start + impl_->options.timeout, false);
  m.set_backoff(impl_->options.retry_base, impl_->options.retry_cap);
  m.set_parallel_tries(impl_->options.parallel_branches);
  std::string reason;
  const milliseconds finish = impl_->options.finish_within;
  auto state = impl_->drive(m, info, *claim, nullptr, {finish, finish}, reason);
  // Once decided, the outcome is the decision, whatever went wrong after it
  // (a lost claim, a busy log): recovery finishes it. Reporting an error
  // here would invite the caller to run it again.
  if (!state.ok() && decided(m.state())) state = m.state();
  if (!state.ok()) return state;
  if (*state == State::aborting || *state == State::aborted)
    return Status(Errc::aborted, "transaction '" + info.gid + "' aborted: " + reason);
  return state;
}

Result<int> Coordinator::recover() {
  auto due = impl_->log->due(100);
  if (!due.ok()) return due.status();
  int touched = 0;
  Status first_error;  // one transaction's trouble does not stop the pass
  auto failed = [&](Status s) {
    if (first_error.ok()) first_error = std::move(s);
  };
  for (const auto& gid : *due) {
    auto lease = impl_->legacy_claim(gid, kRecoveryClaimWait);
    if (!lease.ok()) {
      if (lease.code() != Errc::timeout) failed(lease.status());  // timeout: its coordinator is alive
      continue;
    }
    const auto sent = Clock::now();
    auto fence = impl_->log->claim(gid, impl_->options.claim_lease);
    if (!fence.ok() || !*fence) {
      if (!fence.ok()) failed(fence.status());
      (void)lease->release();
      continue;  // finished meanwhile, or its driver's claim lives
    }
    auto claim = impl_->keeper.keep(gid, **fence, sent);
    auto driven = impl_->recover_one(gid, *claim, *lease);
    (void)lease->release();
    if (!driven.ok()) failed(driven.status());
    if (driven.ok() && *driven) ++touched;
  }
#if DLOCK_TX_WITH_POSTGRES
  auto orphans = impl_->resolve_orphans();
  if (orphans.ok())
    touched += *orphans;
  else
    failed(orphans.status());
#endif
  if (touched == 0 && !first_error.ok()) return first_error;
  return touched;
}

Result<TxInfo> Coordinator::show(std::string_view gid) const { return impl_->log->load(gid); }

Result<std::vector<TxInfo>> Coordinator::list_unfinished(std::size_t limit) const {
  return impl_->log->unfinished(limit);
}

Status Coordinator::retry_now(std::string_view gid) { return impl_->log->make_due(gid); }

TxStats Coordinator::stats() const {
  TxStats s;
  s.started = impl_->started;
  s.committed = impl_->committed;
  s.aborted = impl_->aborted;
  s.recovered = impl_->recovered;
  s.branch_calls = impl_->branch_calls;
  s.branch_failures = impl_->branch_failures;
  s.alerts = impl_->alerts;
  return s;
}

}  // namespace dlock::tx
