#include "postgres/pg_blocking.hpp"

#include <libpq-fe.h>
#include <poll.h>

#include <chrono>
#include <cstdint>
#include <cstdio>

namespace dlock::postgres {
namespace {

using Clock = PgBlocking::Clock;

std::string trimmed(const char* s) {
  std::string out = s ? s : "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// Waits for the socket until `deadline`; false on timeout or error.
bool wait_socket(pg_conn* c, short events, Clock::time_point deadline) {
  // Rounded up: poll's timeout must not end before the deadline, or a wait
  // cut short by it would look like a failure of its own.
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return false;
  pollfd p{PQsocket(c), events, 0};
  return poll(&p, 1, static_cast<int>(left)) == 1;
}

}  // namespace

PgBlocking::~PgBlocking() { drop(); }

bool PgBlocking::idle() const {
  return conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK && PQtransactionStatus(conn_) == PQTRANS_IDLE;
}

void PgBlocking::drop() {
  if (conn_ != nullptr) PQfinish(conn_);
  conn_ = nullptr;
  prepared_.clear();
}

// Nonblocking connect driven to completion with the connect timeout.
Status PgBlocking::open(Clock::time_point by) {
  conn_ = start_libpq(config_);
  if (conn_ == nullptr || PQstatus(conn_) == CONNECTION_BAD) {
    Status s(Errc::unavailable, "postgres: cannot connect to " + config_.describe);
    drop();
    return s;
  }
  // A frozen server accepts the connection (the kernel does) and never
  // answers the start-up: the caller's deadline bounds that too.
  const auto deadline = std::min(Clock::now() + config_.connect_timeout, by);
  PostgresPollingStatusType st = PGRES_POLLING_WRITING;
  while (st != PGRES_POLLING_OK) {
    if (st == PGRES_POLLING_FAILED || !wait_socket(conn_, st == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline)) {
      const bool cut_short = st != PGRES_POLLING_FAILED && Clock::now() + std::chrono::milliseconds(1) >= by;
      Status s = cut_short ? Status(Errc::timeout, "postgres: no answer from " + config_.describe +
                                                       " within the call's deadline (nothing was sent)")
                           : Status(Errc::unavailable, "postgres: cannot connect to " + config_.describe + ": " +
                                                           trimmed(PQerrorMessage(conn_)));
      drop();
      return s;
    }
    st = PQconnectPoll(conn_);
  }
  PQsetnonblocking(conn_, 1);
  return {};
}

Result<Rows> PgBlocking::exec(const std::string& sql, const std::vector<std::string>& params, Clock::time_point by) {
  if (conn_ == nullptr)
    if (Status s = open(by); !s.ok()) return s;
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p.c_str());
  if (PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr,
                        0) != 1)
    return not_sent();
  return await(by);
}

Result<Rows> PgBlocking::exec_script(const std::string& sql, Clock::time_point by) {
  if (conn_ == nullptr)
    if (Status s = open(by); !s.ok()) return s;
  if (PQsendQuery(conn_, sql.c_str()) != 1) return not_sent();
  return await(by);
}

std::string PgBlocking::name_of(const std::string& sql) {
  // FNV-1a: the same name for the same text in every process and version,
  // so that sessions a pooler shares agree on what a name means.
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : sql) h = (h ^ c) * 1099511628211ull;
  char name[24];
  std::snprintf(name, sizeof name, "dlock_%016llx", static_cast<unsigned long long>(h));
  return name;
}

Result<Rows> PgBlocking::exec_prepared(const std::string& sql, const std::vector<std::string>& params,
                                       Clock::time_point by) {
  if (unnamed_) return exec(sql, params, by);
  const std::string name = name_of(sql);
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p.c_str());
  for (int attempt = 0;; ++attempt) {
    if (conn_ == nullptr)
      if (Status s = open(by); !s.ok()) return s;
    if (Status s = prepare(name, sql, static_cast<int>(values.size()), by); !s.ok()) return s;
    if (PQsendQueryPrepared(conn_, name.c_str(), static_cast<int>(values.size()), values.data(), nullptr, nullptr, 0) !=
        1)
      return not_sent();
    auto r = await(by);
    // Refused at its Bind, before anything ran: prepared again, once; lost
    // again, the session is moved between statements (a pooler in
    // transaction mode that keeps no prepared statements): unprepared from
    // now on.
    if (!r.ok() && r.status().backend_code() == "26000") {
      prepared_.erase(name);
      if (attempt == 0) continue;
      unnamed_ = true;
      return exec(sql, params, by);
    }
    return r;
  }
}

Result<std::vector<Rows>> PgBlocking::exec_batch(const std::vector<Statement>& statements, Clock::time_point by) {
  std::vector<std::string> names;
  for (int attempt = 0;; ++attempt) {
    if (conn_ == nullptr)
      if (Status s = open(by); !s.ok()) return s;
    names.clear();
    for (std::size_t i = 0; i < statements.size() && !unnamed_; ++i) {
      names.push_back(name_of(*statements[i].sql));
      if (Status s = prepare(names[i], *statements[i].sql, static_cast<int>(statements[i].params->size()), by); !s.ok())
        return s;
    }
    auto r = pipeline(statements, names, by);
    // A name the server lost: refused at its Bind, nothing committed. As
    // in exec_prepared, unprepared after the second time.
    if (!r.ok() && r.status().backend_code() == "26000" && !unnamed_) {
      prepared_.clear();
      if (attempt > 0) unnamed_ = true;
      continue;
    }
    return r;
  }
}

Result<std::vector<Rows>> PgBlocking::pipeline(const std::vector<Statement>& statements,
                                               const std::vector<std::string>& names, Clock::time_point by) {
  if (PQenterPipelineMode(conn_) != 1) return not_sent();
  for (std::size_t i = 0; i < statements.size(); ++i) {
    std::vector<const char*> values;
    for (const auto& p : *statements[i].params) values.push_back(p.c_str());
    const int n = static_cast<int>(values.size());
    const int sent =
        names.empty()
            ? PQsendQueryParams(conn_, statements[i].sql->c_str(), n, nullptr, values.data(), nullptr, nullptr, 0)
            : PQsendQueryPrepared(conn_, names[i].c_str(), n, values.data(), nullptr, nullptr, 0);
    if (sent != 1) return not_sent();
  }
  if (PQpipelineSync(conn_) != 1) return not_sent();
  const auto deadline = std::min(Clock::now() + config_.command_timeout, by);
  if (Status s = flush(deadline); !s.ok()) return s;
  // Each statement's results end with a null; then the sync's, which says
  // that the implicit transaction has ended (committed unless a statement
  // was refused).
  std::vector<Rows> out(statements.size());
  Status refused;
  for (std::size_t i = 0;;) {
    auto next = next_result(deadline);
    if (!next.ok()) return next.status();
    PGresult* res = *next;
    if (res == nullptr) {
      ++i;
      continue;
    }
    const ExecStatusType st = PQresultStatus(res);
    if (st == PGRES_PIPELINE_SYNC) {
      PQclear(res);
      break;
    }
    if (st != PGRES_PIPELINE_ABORTED && i < out.size()) take_result(res, out[i], refused);
    PQclear(res);
  }
  if (PQexitPipelineMode(conn_) != 1) {
    Status s(Errc::outcome_unknown, "postgres: the pipeline did not end: " + trimmed(PQerrorMessage(conn_)));
    drop();
    return s;
  }
  if (!refused.ok()) return Status(Errc::aborted, refused.message(), std::string(refused.backend_code()));
  return out;
}

Status PgBlocking::prepare(const std::string& name, const std::string& sql, int params, Clock::time_point by) {
  if (prepared_.contains(name)) return {};
  if (PQsendPrepare(conn_, name.c_str(), sql.c_str(), params, nullptr) != 1) return not_sent();
  auto r = await(by);
  // A Parse executes nothing: an unanswered one is an error, not an unknown.
  if (!r.ok() && r.code() == Errc::outcome_unknown)
    return {Errc::unavailable, r.status().message() + " (preparing a statement: nothing was run)"};
  if (!r.ok() && r.status().backend_code() != "42P05") return r.status();  // 42P05: already prepared
  prepared_.insert(name);
  return {};
}

Status PgBlocking::not_sent() {
  Status s(Errc::unavailable, "postgres: " + trimmed(PQerrorMessage(conn_)));
  drop();
  return s;
}

Status PgBlocking::flush(Clock::time_point deadline) {
  for (int f = PQflush(conn_); f != 0; f = PQflush(conn_))
    if (f < 0 || !wait_socket(conn_, POLLOUT, deadline)) {
      drop();
      return {Errc::outcome_unknown, "postgres: the statement could not be sent in time"};
    }
  return {};
}

Result<PGresult*> PgBlocking::next_result(Clock::time_point deadline) {
  while (PQisBusy(conn_) != 0)
    if (!wait_socket(conn_, POLLIN, deadline) || PQconsumeInput(conn_) != 1) {
      drop();
      return Status(Errc::outcome_unknown, "postgres: no reply within the command timeout (" +
                                               std::to_string(config_.command_timeout.count()) +
                                               " ms) or the call's deadline, or the connection dropped");
    }
  return PQgetResult(conn_);
}

Result<Rows> PgBlocking::await(Clock::time_point by) {
  const auto deadline = std::min(Clock::now() + config_.command_timeout, by);
  if (Status s = flush(deadline); !s.ok()) return s;
  Rows rows;
  Status error;
  for (;;) {
    auto next = next_result(deadline);
    if (!next.ok()) return next.status();
    if (*next == nullptr) break;
    take_result(*next, rows, error);
    PQclear(*next);
  }
  if (!error.ok()) return error;
  return rows;
}

}  // namespace dlock::postgres
