#include "tx/pg_xa.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <charconv>
#include <chrono>

#include "postgres/pg_blocking.hpp"
#include "postgres/url.hpp"

namespace dlock::tx::detail {
namespace {

constexpr std::string_view kPrefix = "dlock:";
constexpr const char* kUndefinedObject = "42704";  // no prepared transaction by that id

Outcome outcome_of(const Status& s, std::string& error) {
  error = s.to_string();
  // A statement refused for good (an error reply) is a failure; a lost
  // reply or no connection is unknown.
  return s.next_step() == NextStep::give_up ? Outcome::failure : Outcome::unknown;
}

// An SQL string literal (PREPARE TRANSACTION takes no parameter).
std::string quoted(std::string_view text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string xid_of(std::string_view log, std::string_view gid, int branch) {
  return std::string(kPrefix) + std::string(log) + ":" + std::string(gid) + ":" + std::to_string(branch);
}

bool parse_xid(std::string_view xid, std::string_view log, std::string& gid, int& branch) {
  if (!xid.starts_with(kPrefix)) return false;
  xid.remove_prefix(kPrefix.size());
  if (log.empty() || !xid.starts_with(log) || xid.substr(log.size()).substr(0, 1) != ":") return false;
  xid.remove_prefix(log.size() + 1);
  const auto colon = xid.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  const auto digits = xid.substr(colon + 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), branch);
  if (ec != std::errc() || end != digits.data() + digits.size() || branch < 0) return false;
  gid = std::string(xid.substr(0, colon));
  return true;
}

XaDatabase::~XaDatabase() = default;

Result<std::unique_ptr<XaDatabase>> XaDatabase::open(std::string_view url) {
  auto config = postgres::parse_postgres_url(url);
  if (!config.ok()) return config.status();
  const std::string where = config->connection.describe;
  std::unique_ptr<XaDatabase> db(new XaDatabase(config->connection));
  auto max = db->pool_.take()->exec("SELECT current_setting('max_prepared_transactions')", {});
  if (!max.ok()) return max.status();
  if (max->empty() || max->front().empty() || max->front()[0].value_or("0") == "0")
    return Status(Errc::precondition_failed,
                  "max_prepared_transactions is 0 on " + where +
                      ": PREPARE TRANSACTION is off there; set it to at least the number of transactions that may be "
                      "in doubt at once (a server restart is needed)");
  return db;
}

Outcome XaDatabase::prepare(const std::string& xid, const std::function<Outcome(pg_conn*)>& work, std::string& error,
                            Clock::time_point deadline) {
  auto left = [&] { return std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()); };
  if (left().count() <= 0) {
    error = "the Try phase's deadline passed before the branch's work began";
    return Outcome::unknown;
  }
  bool retry = false;
  {
    std::lock_guard lock(tried_mu_);
    retry = !tried_.insert(xid).second;
  }
  auto conn = pool_.take();  // its own: the work may wait for locks
  if (retry) {
    auto seen =
        conn->exec("SELECT 1 FROM pg_prepared_xacts WHERE gid = $1 AND database = current_database()", {xid}, deadline);
    if (!seen.ok()) return outcome_of(seen.status(), error);
    if (!seen->empty()) return Outcome::success;
  }
  // The server ends a wait for a lock (a cycle through another run_2pc's
  // prepared transaction, which it cannot see) or a statement at the
  // deadline; the cutter ends a wait on a server that does not answer. One
  // round trip with the BEGIN.
  const std::string ms = "'" + std::to_string(std::max<std::int64_t>(left().count(), 1)) + "ms'";
  if (auto begun = conn->exec_script("BEGIN; SET LOCAL lock_timeout = " + ms + "; SET LOCAL statement_timeout = " + ms,
                                     deadline);
      !begun.ok())
    return outcome_of(begun.status(), error);
  auto native = conn->native();
  if (!native.ok()) return outcome_of(native.status(), error);
  Outcome o = Outcome::unknown;
  const std::uint64_t ticket = cutter_.arm(PQsocket(*native), deadline);
  try {
    o = work(*native);
  } catch (const std::exception& e) {
    error = std::string("the branch's work threw: ") + e.what();
  } catch (...) {
    error = "the branch's work threw";
  }
  if (cutter_.disarm(ticket)) {
    // Whatever the work made of the broken connection, nothing was
    // prepared: the server rolls the transaction back once it notices.
    (void)conn->exec("ROLLBACK", {}, Clock::now());  // fails at once; drops the connection
    error = "the branch's work was still running at the Try phase's deadline: its connection was cut";
    return Outcome::unknown;
  }
  if (o == Outcome::success && PQtransactionStatus(*native) != PQTRANS_INTRANS) {
    // PREPARE TRANSACTION would answer "ROLLBACK" (aborted) or warn and do
    // nothing (no transaction): not a vote for anything.
    error = PQtransactionStatus(*native) == PQTRANS_INERROR
                ? "the branch's work said success after a statement failed (its transaction is aborted)"
                : "the branch's work left no open transaction (did it COMMIT?)";
    o = Outcome::failure;
  }
  if (o != Outcome::success) {
    // Rolled back here, or (if that fails) by closing the connection.
    if (PQtransactionStatus(*native) != PQTRANS_IDLE) (void)conn->exec("ROLLBACK", {}, deadline);
    if (error.empty()) {
      error = "the branch's work answered " + std::string(to_string(o));
      std::string why = PQerrorMessage(*native);
      while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
      if (!why.empty()) error += " (" + why + ")";
    }
    return o;
  }
  if (left().count() <= 0) {
    // A PREPARE sent now could not be answered in time, yet might still run
    // (and hold its locks until recovery finds it): vote nothing instead.
    (void)conn->exec("ROLLBACK", {}, Clock::now() + std::chrono::milliseconds(100));
    error = "the branch's work ended past the Try phase's deadline: not prepared";
    return Outcome::unknown;
  }
  auto prepared = conn->exec("PREPARE TRANSACTION " + quoted(xid), {}, deadline);
  if (!prepared.ok()) return outcome_of(prepared.status(), error);
  return Outcome::success;
}

Outcome XaDatabase::finish(const char* verb, const std::string& xid, std::string& error, Clock::time_point by) {
  auto r = pool_.take()->exec(std::string(verb) + " PREPARED " + quoted(xid), {}, by);
  if (r.ok() || r.status().backend_code() == kUndefinedObject) {
    std::lock_guard lock(tried_mu_);
    tried_.erase(xid);
    return Outcome::success;
  }
  return outcome_of(r.status(), error);
}

Result<std::vector<std::string>> XaDatabase::prepared() {
  auto r = pool_.take()->exec(
      "SELECT gid FROM pg_prepared_xacts WHERE gid LIKE 'dlock:%' AND database = current_database()", {});
  if (!r.ok()) return r.status();
  std::vector<std::string> out;
  for (const auto& row : *r) out.push_back(row[0].value_or(""));
  return out;
}

}  // namespace dlock::tx::detail
