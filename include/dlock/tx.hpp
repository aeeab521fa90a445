// dlock/tx.hpp: distributed transactions (TCC) driven by a coordinator
// embedded in the application, with a durable log. A separate library:
// link dlock::tx (CMake option DLOCK_WITH_TX).
//
// A TCC transaction is a list of branches; each branch names a participant
// (registered by name in every coordinator process, so that a survivor can
// finish what a dead process started) and carries a payload. The
// coordinator:
//   1. logs the transaction and all its branches (register before act);
//   2. calls Try on each branch, in order;
//   3. logs the decision: commit if every Try succeeded, abort if one failed
//      definitely or the deadline passed (the decision is durable before any
//      Confirm or Cancel is sent);
//   4. calls Confirm (commit) or Cancel (abort) on every branch until each
//      succeeds, retrying with capped exponential backoff and jitter;
//   5. logs the end.
// Presumed abort: a transaction found undecided whose coordinator is gone
// (its claim lapsed) is aborted by recovery.
//
// Exactly one coordinator drives a transaction at a time: it holds a dlock
// lease on "dlock-tx/<gid>" on the log's server, and every log write carries
// the lease's fence, so a coordinator paused past its lease cannot overwrite
// what the one that took over wrote.
//
// Participants are in-process calls or HTTP endpoints (http_participant,
// DTM's contract). They must make Confirm and Cancel idempotent, accept a Cancel with
// no Try before it (empty compensation) and refuse a Try after its Cancel
// (anti-suspension): tx::sqlite_barrier() does all three inside the
// participant's own local transaction.
//
// Guarantees: every branch whose Try may have run gets Confirm or Cancel,
// the same choice for all, and it is retried until it succeeds. Not
// guaranteed: effects a participant has outside its local transaction, and
// progress while the log is unreachable (calls then fail with its error).
//
// Thread safety: a Coordinator may be used from many threads at once.
#ifndef DLOCK_TX_HPP_
#define DLOCK_TX_HPP_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/export.hpp"

struct sqlite3;  // the participant's own connection (sqlite3.h), only by pointer
struct pg_conn;  // libpq's PGconn (libpq-fe.h), only by pointer

namespace dlock::tx {

using std::chrono::milliseconds;

// What a participant's call answered (the DTM contract, for HTTP: 200 success,
// 409 failure, 425 ongoing, anything else unknown).
enum class Outcome {
  success,  // done
  failure,  // definitely not done and will not be: a Try failing aborts the
            // transaction; a Confirm or Cancel failing breaks the contract
            // (alerted, retried)
  ongoing,  // not done yet: ask again later
  unknown,  // no answer (timeout, dropped connection): may or may not be
            // done; asked again
};
DLOCK_EXPORT std::string_view to_string(Outcome outcome) noexcept;

enum class Op { try_, confirm, cancel };
DLOCK_EXPORT std::string_view to_string(Op op) noexcept;

// What a participant's call is given: enough to key a barrier, and the
// time by which the coordinator needs its answer.
struct DLOCK_EXPORT BranchContext {
  std::string gid;      // the transaction
  int branch = 0;       // its index in the transaction, from 0
  Op op = Op::try_;     // the phase being called
  std::string payload;  // the branch's payload, as given to run()
  // The call's answer is wanted by then (steady clock): the Try phase's
  // deadline for a Try, the end of finish_within (or of a recovery pass's
  // share) for a Confirm or Cancel. http_participant and 2PC branches cut
  // their call there (an unknown outcome); an in-process call should return
  // by it: the coordinator cannot interrupt it and waits for it, and a Try
  // that succeeds after the deadline still aborts the transaction.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

using Call = std::function<Outcome(const BranchContext&)>;

// One participant's three calls. They may throw: an exception is an unknown
// outcome (logged as the branch's last error, and asked again).
struct DLOCK_EXPORT Participant {
  Call try_;
  Call confirm;
  Call cancel;
};

// A participant behind HTTP, as DTM calls one: each call is a POST to the
// phase's URL with "gid", "trans_type=tcc", "branch_id" (the branch's
// index), "op" (try, confirm, cancel) and "rid" (the request's id: 16 hex
// digits from a CSPRNG, new for each call) added to its query, and the
// branch's payload as the body. The answer: 2xx success (unless the body
// says FAILURE or ONGOING), 409 failure, 425 ongoing; any other status, a
// timeout or a dropped connection is unknown and asked again, so the
// participant must be idempotent (handle_http with a barrier is).
// Interim responses (1xx) before the answer are read past, except 101
// Switching Protocols, which is unknown. An answer whose JSON body carries
// a "rid" other than the call's (handle_http echoes it) answers another
// request: unknown; one without a rid is taken as it is. Each call is
// bounded by timeout and by its BranchContext's deadline (one already
// passed: not sent, unknown). Kept connections are reused only when in
// step: a connection in doubt (bytes after an answer, in the buffer or
// waiting on the socket when it is taken again, its peer's close, an
// answer that cannot be framed, 101, another request's rid) is closed and
// never read again. One found closed before any answer is replaced once,
// which may repeat the request.
struct DLOCK_EXPORT HttpParticipant {
  std::string try_url;  // http://host[:port]/path[?query], or https://...
  std::string confirm_url;
  std::string cancel_url;
  milliseconds timeout{3000};  // per call: connecting, sending and the answer
  // Added to every request (e.g. Authorization); never logged.
  std::vector<std::pair<std::string, std::string>> headers;
  // https: the certificate must chain to this CA (PEM file; "" = the
  // system's) and name the URL's host. Not verifiable means no call.
  std::string ca_file;
  std::string content_type = "application/json";
};
// The three calls; invalid_argument for a bad URL, header, timeout or CA
// file. Register the result with Coordinator::add_participant. A call
// whose outcome is unknown throws dlock::Error (outcome_unknown; timeout
// when the deadline had passed before it was sent) saying why (the
// coordinator logs it as the branch's last error); called directly, catch it.
DLOCK_EXPORT Result<Participant> http_participant(HttpParticipant options);

// The participant's side, for any HTTP server: the request's target (path
// and query) and body as the BranchContext (invalid_argument when gid,
// branch_id or op is missing or malformed), and the answer for an outcome
// (200 SUCCESS, 409 FAILURE, 425 ONGOING, 500 for unknown).
DLOCK_EXPORT Result<BranchContext> branch_from_http(std::string_view target, std::string body);
struct DLOCK_EXPORT HttpReply {
  int status = 200;
  std::string body;  // JSON: {"dtm_result":"SUCCESS"} and so on
};
DLOCK_EXPORT HttpReply http_reply(Outcome outcome);
// The whole handler: parse, run `call` (e.g. sqlite_barrier around the
// work), answer; a malformed request answers 400, a throw 500. The query's
// last "rid" (the request id http_participant adds after the URL's own
// query), when a plain token of up to 64 letters, digits, '-' or '_', is
// echoed in the JSON body:
// {"dtm_result":"SUCCESS","rid":"..."}, so that the caller can tell its
// answer from another request's (a copy written twice, on a connection
// out of step).
DLOCK_EXPORT HttpReply handle_http(std::string_view target, std::string body,
                                   const std::function<Outcome(const BranchContext&)>& call);

struct DLOCK_EXPORT Branch {
  std::string participant;  // a name given to Coordinator::add_participant
  std::string payload;      // passed to each call; logged (keep secrets out)
};

// A 2PC branch: `work` runs on a connection to `database` (a name given to
// Coordinator::add_database) inside a transaction that the coordinator then
// prepares (PREPARE TRANSACTION) and later commits or rolls back. `work`
// returns success to vote yes; anything else (or a throw) rolls it back and
// aborts the transaction. It must leave the transaction open (no COMMIT),
// and use no temporary tables, LISTEN or NOTIFY (PostgreSQL cannot prepare
// those). The connection is pooled: use SET LOCAL, not SET, so that no
// setting outlives the transaction.
struct DLOCK_EXPORT XaBranch {
  std::string database;
  std::function<Outcome(pg_conn*)> work;
};

enum class State {
  trying,      // registered; Tries under way (undecided)
  committing,  // decided to commit: Confirms under way
  aborting,    // decided to abort: Cancels under way
  committed,   // every branch confirmed
  aborted,     // every branch cancelled
};
DLOCK_EXPORT std::string_view to_string(State state) noexcept;
inline bool decided(State s) noexcept { return s != State::trying; }
inline bool finished(State s) noexcept { return s == State::committed || s == State::aborted; }

// Called when a branch call has failed `alert_after` times in a row, and at
// every further multiple: a participant down, or breaking its contract.
struct DLOCK_EXPORT Alert {
  std::string gid;
  int branch = 0;
  Op op = Op::try_;
  int attempts = 0;
  std::string last_error;
};

struct DLOCK_EXPORT CoordinatorOptions {
  // How long the Try phase may take before the transaction aborts. Default
  // 60 s. Measured on the coordinator's steady clock.
  milliseconds timeout{60000};
  // How long run() keeps calling Confirm/Cancel after the decision before it
  // returns and leaves the rest to recovery (the decision is durable by
  // then): no call starts after it and HTTP and 2PC calls are cut at it. 0:
  // run() returns at the decision and recovery makes every call. Also what
  // one recover() pass gives each transaction, and what the decision's
  // write may take to be confirmed if its answer is lost. Default 10 s.
  milliseconds finish_within{10000};
  // Backoff between attempts of one branch call: base * 2^(n-1), capped,
  // with full jitter in [1/2, 1]. Defaults 50 ms and 30 s.
  milliseconds retry_base{50};
  milliseconds retry_cap{30000};
  // The claim's lease. The claim is kept in the transaction's log record
  // (written with it: no lock of its own) and renewed only once a
  // transaction has lasted a third of it. A dead coordinator's transactions
  // are recovered this long after it died. Default 10 s.
  milliseconds claim_lease{10000};
  // false (the default): a transaction's calls are made one after the
  // other on the driving thread (run()'s, recover()'s), the Tries in the
  // branches' order. true: each phase's calls are made at once, the first
  // on the driving thread and the others on the coordinator's own threads
  // (kept for the next transaction), and the phase waits for all of them:
  // a transaction then takes about one Try and one Confirm in time instead
  // of one per branch. For participants that do not depend on the order of
  // the Tries or on the calling thread (2PC branches never do: their work
  // runs on a connection of its own either way). A Try that fails
  // definitely aborts once the Tries called with it have answered.
  bool parallel_branches = false;
  int alert_after = 3;                         // consecutive failures before on_alert
  std::function<void(const Alert&)> on_alert;  // any thread; must not block
  // Called at every step boundary of a transaction this coordinator
  // drives, on the driving thread (a branch call's, on the thread making
  // it): "created" (logged with its branches),
  // "before try 1", "after try 1" (and confirm, cancel), "committing",
  // "aborting", "committed", "aborted" (each once durable), "saved" (progress
  // left for recovery). For tracing, and for tests that crash a coordinator
  // at each boundary. Must not block.
  std::function<void(std::string_view gid, std::string_view step)> on_step;
  // false: open() only opens a log that exists (its file and tables), and
  // creates nothing: invalid_argument otherwise ("no transaction log at
  // PATH (nothing was created)"). For tools that only read a log, where a
  // mistyped URL must not make a new, empty one; `dlock tx` opens so.
  bool create_if_missing = true;
};

// A branch as the log has it.
struct DLOCK_EXPORT BranchInfo {
  std::string participant;
  std::string payload;
  bool done = false;  // its phase-2 call (Confirm or Cancel) succeeded
  int attempts = 0;   // failed attempts of its current call
  std::string last_error;
};

struct DLOCK_EXPORT TxInfo {
  std::string gid;
  State state = State::trying;
  std::string reason;           // why it aborted ("" while committing/committed)
  std::int64_t created_ms = 0;  // the log's clock (Unix ms), for display only
  std::int64_t updated_ms = 0;
  std::vector<BranchInfo> branches;
};

// Counters since the coordinator was opened.
struct DLOCK_EXPORT TxStats {
  std::uint64_t started = 0, committed = 0, aborted = 0, recovered = 0;
  std::uint64_t branch_calls = 0, branch_failures = 0, alerts = 0;
};

class DLOCK_EXPORT Coordinator {
 public:
  // Opens the log at `url`, creating its file and tables unless
  // options.create_if_missing is false: sqlite:///path/tx.db, or
  // postgres://... (any number of coordinators may share that one).
  static Result<Coordinator> open(std::string_view url, CoordinatorOptions options = {});

  Coordinator(Coordinator&&) noexcept;
  Coordinator& operator=(Coordinator&&) noexcept;
  ~Coordinator();

  // Registers the calls for participant `name`. Register every participant
  // before run() or recover() may need it. Names starting with "pg:" are
  // 2PC's (run() refuses them).
  void add_participant(std::string name, Participant participant);

  // Runs TCC transaction `gid` (1..120 bytes, new) over `branches` to its
  // decision, and finishes it if it can within finish_within.
  //   ok: committing or committed (every Try succeeded; the Confirms are
  //       or will be done). Once commit is decided this is the answer,
  //       whatever fails after it: recover() finishes the Confirms;
  //   Errc::aborted: decided to abort (why in the message); its Cancels
  //       are done or will be;
  //   Errc::invalid_argument: an empty or reused gid (logged already: run
  //       or running), no branches, an unknown participant;
  //   Errc::in_doubt: the commit decision was written but the log's answer
  //       was lost, and reading it back failed within finish_within (at
  //       least 1 s): the
  //       transaction will commit or abort, the same on every branch. Do
  //       not run it again under a new gid (that would do it twice): ask
  //       show(gid) later, or let recover() finish it;
  //   other errors (the log's, or lease_lost): no commit was decided and
  //       none will be: if the transaction was logged, recover() aborts it.
  //       Running the same gid again is safe (the log refuses a gid it has).
  // How long it takes: the record's write, the Try phase
  // (at most `timeout`: each Try's BranchContext::deadline is its end, and
  // HTTP and 2PC calls are cut there), the decision (its write and, if its
  // answer is lost, the read back: at most finish_within), then Confirms
  // until finish_within (each cut there); plus the log's own writes, each
  // bounded by the log's command timeout. In-process calls are the
  // exception: they run on this thread (or, with parallel_branches, beside
  // it) and cannot be interrupted, so run() returns only after they do (a
  // Try that succeeds late still aborts).
  Result<State> run(std::string_view gid, const std::vector<Branch>& branches);

  // 2PC over PostgreSQL participants. add_database connects to `url`
  // (postgres://...) and checks that it takes prepared transactions
  // (max_prepared_transactions > 0: precondition_failed otherwise); register
  // every database before run_2pc() or recover() may need it. The log may be
  // anywhere. run_2pc() works as run(): every branch's work is prepared as
  // "dlock:<gid>:<branch>" (gid: 1 to 120 of [A-Za-z0-9_.:-]), the decision
  // is logged, then COMMIT PREPARED or ROLLBACK PREPARED on each. A
  // branch's work runs under lock_timeout and statement_timeout set to the
  // Try phase's time left (a lock cycle through prepared transactions of
  // two run_2pc calls, which PostgreSQL cannot see, ends at the deadline),
  // and its connection is cut at the deadline if the server does not
  // answer (a frozen server), so that run_2pc() returns in time. Presumed
  // abort: recover() also rolls back any prepared transaction of ours that
  // the log does not know or knows as aborted, so none is left holding
  // locks.
  Status add_database(std::string name, std::string_view url);
  Result<State> run_2pc(std::string_view gid, const std::vector<XaBranch>& branches);

  // One recovery pass: drives every unfinished transaction whose claim is
  // free (its coordinator died or gave up) one step further; an undecided one
  // is aborted. Each transaction gets at most finish_within (its calls are
  // cut there) plus its log writes. Returns how many it touched. Call it periodically from one or
  // more processes; they never drive the same transaction at once.
  Result<int> recover();

  // The log's record of `gid`.
  Result<TxInfo> show(std::string_view gid) const;
  // Unfinished transactions, oldest first (at most `limit`).
  Result<std::vector<TxInfo>> list_unfinished(std::size_t limit = 100) const;
  // Makes `gid` due for the next recover() now, whatever its backoff.
  Status retry_now(std::string_view gid);

  TxStats stats() const;

 private:
  struct Impl;
  explicit Coordinator(std::unique_ptr<Impl> impl) noexcept;
  Result<State> run_logged(std::string_view gid, const std::vector<Branch>& branches);
  std::unique_ptr<Impl> impl_;
};

// The participant-side barrier on SQLite: runs `work` inside one write
// transaction on `db` together with an insert into dlock_tx_barrier, so
// that:
//   - a Confirm or Cancel that already ran does nothing (idempotency);
//   - a Cancel with no Try before it succeeds without calling `work` (empty
//     compensation), and the late Try then does nothing (anti-suspension);
// decided by a unique key, never by reading first. `work` returning
// anything but success (or throwing) rolls the transaction back, barrier
// row included. `db` must not be inside a transaction; it is used by this
// call only. The table is created on first use.
DLOCK_EXPORT Outcome sqlite_barrier(sqlite3* db, const BranchContext& context,
                                    const std::function<Outcome(sqlite3*)>& work);

// The same barrier on PostgreSQL (builds with PostgreSQL): `conn` must be
// idle (no transaction open); `work` runs inside the transaction, on
// `conn`, and must leave it open (a failed statement or its own COMMIT
// makes it a failure). A COMMIT whose answer is lost is an unknown outcome.
// The table, dlock_tx_barrier, is found through the connection's
// search_path: every connection serving one participant must resolve it
// to the same schema, or a repeated call is not recognised.
DLOCK_EXPORT Outcome pg_barrier(pg_conn* conn, const BranchContext& context,
                                const std::function<Outcome(pg_conn*)>& work);

}  // namespace dlock::tx

#endif  // DLOCK_TX_HPP_
