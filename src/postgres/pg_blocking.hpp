// A blocking libpq connection for the fast path on a caller's thread: one
// statement at a time with a deadline (poll on libpq's socket), so a hung
// server costs at most the command timeout. Not thread-safe: the owner
// serializes calls.
#ifndef DLOCK_POSTGRES_PG_BLOCKING_HPP_
#define DLOCK_POSTGRES_PG_BLOCKING_HPP_

#include <chrono>
#include <string>
#include <unordered_set>
#include <vector>

#include "postgres/pg_connection.hpp"

namespace dlock::postgres {

class PgBlocking {
 public:
  explicit PgBlocking(PgConfig config) : config_(std::move(config)) {}
  ~PgBlocking();
  PgBlocking(const PgBlocking&) = delete;
  PgBlocking& operator=(const PgBlocking&) = delete;

  using Clock = std::chrono::steady_clock;

  // As PgConnection::query: unavailable if not sent, outcome_unknown if sent
  // and not answered in time (the connection is then dropped and made again
  // at the next call). In time: within the command timeout and by `by`;
  // timeout if a new connection was not even up by then (nothing sent).
  Result<Rows> exec(const std::string& sql, const std::vector<std::string>& params,
                    Clock::time_point by = Clock::time_point::max());
  // As exec() for statements of our own without parameters, several of them
  // separated by ';' in one round trip (the simple query protocol).
  Result<Rows> exec_script(const std::string& sql, Clock::time_point by = Clock::time_point::max());
  // As exec(), with `sql` (one statement) prepared once per connection under
  // a name made from its text: the server parses and plans it once, not at
  // every call (for the transaction log's statements, about 0.4 ms of 1).
  // A name the server lost (DISCARD ALL, a pooler that moved this session) is
  // prepared again; one another session of a pooler made is used. Lost
  // twice in a row, this connection runs its statements unprepared.
  Result<Rows> exec_prepared(const std::string& sql, const std::vector<std::string>& params,
                             Clock::time_point by = Clock::time_point::max());
  // Statements prepared as exec_prepared's are, run in one transaction and
  // one round trip (libpq's pipeline mode: the statements up to its sync
  // form one implicit transaction). ok: committed, each statement's rows in
  // order. Errc::aborted: a statement was refused and nothing was committed
  // (the first refusal's message). As exec(): unavailable if not sent,
  // outcome_unknown if sent and not answered in time.
  struct Statement {
    const std::string* sql;
    const std::vector<std::string>* params;
  };
  Result<std::vector<Rows>> exec_batch(const std::vector<Statement>& statements,
                                       Clock::time_point by = Clock::time_point::max());
  // The libpq connection, made now if there is none: for a caller that runs
  // its own statements on it between exec() calls (a 2PC branch's work).
  Result<pg_conn*> native(Clock::time_point by = Clock::time_point::max()) {
    if (conn_ == nullptr)
      if (Status s = open(by); !s.ok()) return s;
    return conn_;
  }
  // Connected, with no transaction open: fit to be pooled (never connects).
  bool idle() const;
  // Connects now if not connected (failures are left to the next exec).
  void warm() {
    if (conn_ == nullptr) (void)open(Clock::time_point::max());
  }

 private:
  Status open(Clock::time_point by);
  void drop();
  // The reply to what was just sent, by `by` (and the command timeout).
  Result<Rows> await(Clock::time_point by);
  // A statement libpq would not queue: nothing was sent (unavailable); the
  // connection is dropped.
  Status not_sent();
  // Sends what libpq holds by `deadline`; outcome_unknown (dropped) if not.
  Status flush(Clock::time_point deadline);
  // The next result of the reply (null: the end of one statement's), read
  // by `deadline`; outcome_unknown (dropped) if none comes.
  Result<pg_result*> next_result(Clock::time_point deadline);
  // The name a statement is prepared under: the same for the same text in
  // every process and version.
  static std::string name_of(const std::string& sql);
  // Sends the batch in pipeline mode and reads its answers.
  Result<std::vector<Rows>> pipeline(const std::vector<Statement>& statements, const std::vector<std::string>& names,
                                     Clock::time_point by);
  // Prepares `sql` as `name` unless it is on this connection already.
  Status prepare(const std::string& name, const std::string& sql, int params, Clock::time_point by);
  PgConfig config_;
  pg_conn* conn_ = nullptr;
  std::unordered_set<std::string> prepared_;  // names prepared on conn_
  // Statements run unprepared: a name prepared went missing twice in a row
  // (a pooler moving the session between statements, as PgBouncer before
  // 1.21 does in transaction mode). Kept across reconnections.
  bool unnamed_ = false;
};

}  // namespace dlock::postgres

#endif  // DLOCK_POSTGRES_PG_BLOCKING_HPP_
