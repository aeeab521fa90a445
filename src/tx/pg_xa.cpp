#include "tx/pg_xa.hpp"

#include <charconv>

#include "postgres/factory.hpp"
#include "postgres/pg_blocking.hpp"

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

}  // namespace

std::string xid_of(std::string_view gid, int branch) {
  return std::string(kPrefix) + std::string(gid) + ":" + std::to_string(branch);
}

bool parse_xid(std::string_view xid, std::string& gid, int& branch) {
  if (!xid.starts_with(kPrefix)) return false;
  xid.remove_prefix(kPrefix.size());
  const auto colon = xid.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  const auto digits = xid.substr(colon + 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), branch);
  if (ec != std::errc() || end != digits.data() + digits.size() || branch < 0) return false;
  gid = std::string(xid.substr(0, colon));
  return true;
}

XaDatabase::XaDatabase(std::unique_ptr<postgres::PgBlocking> db) : db_(std::move(db)) {}
XaDatabase::~XaDatabase() = default;

Result<std::unique_ptr<XaDatabase>> XaDatabase::open(std::string_view url) {
  auto config = postgres::parse_postgres_url(url);
  if (!config.ok()) return config.status();
  const std::string where = config->connection.describe;
  std::unique_ptr<XaDatabase> db(new XaDatabase(std::make_unique<postgres::PgBlocking>(config->connection)));
  auto max = db->db_->exec("SELECT current_setting('max_prepared_transactions')", {});
  if (!max.ok()) return max.status();
  if (max->empty() || max->front().empty() || max->front()[0].value_or("0") == "0")
    return Status(Errc::precondition_failed,
                  "max_prepared_transactions is 0 on " + where +
                      ": PREPARE TRANSACTION is off there; set it to at least the number of transactions that may be "
                      "in doubt at once (a server restart is needed)");
  return db;
}

Outcome XaDatabase::prepare(const std::string& xid, const std::function<Outcome(pg_conn*)>& work, std::string& error) {
  std::lock_guard lock(mu_);
  auto seen = db_->exec("SELECT 1 FROM pg_prepared_xacts WHERE gid = $1 AND database = current_database()", {xid});
  if (!seen.ok()) return outcome_of(seen.status(), error);
  if (!seen->empty()) return Outcome::success;
  if (auto begun = db_->exec("BEGIN", {}); !begun.ok()) return outcome_of(begun.status(), error);
  auto conn = db_->native();
  Outcome o = Outcome::unknown;
  if (conn.ok()) {
    try {
      o = work(*conn);
    } catch (const std::exception& e) {
      error = std::string("the branch's work threw: ") + e.what();
    } catch (...) {
      error = "the branch's work threw";
    }
  }
  if (o != Outcome::success) {
    (void)db_->exec("ROLLBACK", {});
    return o;
  }
  // An identifier cannot be a parameter here; it holds only [A-Za-z0-9_.:-].
  auto prepared = db_->exec("PREPARE TRANSACTION '" + xid + "'", {});
  if (!prepared.ok()) {
    (void)db_->exec("ROLLBACK", {});  // no transaction left open on the connection
    return outcome_of(prepared.status(), error);
  }
  return Outcome::success;
}

Outcome XaDatabase::finish(const char* verb, const std::string& xid, std::string& error) {
  std::lock_guard lock(mu_);
  auto r = db_->exec(std::string(verb) + " PREPARED '" + xid + "'", {});
  if (r.ok() || r.status().backend_code() == kUndefinedObject) return Outcome::success;
  return outcome_of(r.status(), error);
}

Result<std::vector<std::string>> XaDatabase::prepared() {
  std::lock_guard lock(mu_);
  auto r =
      db_->exec("SELECT gid FROM pg_prepared_xacts WHERE gid LIKE 'dlock:%' AND database = current_database()", {});
  if (!r.ok()) return r.status();
  std::vector<std::string> out;
  for (const auto& row : *r) out.push_back(row[0].value_or(""));
  return out;
}

}  // namespace dlock::tx::detail
