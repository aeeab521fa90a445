#include "strategies_sql.hpp"

#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "history.hpp"

namespace torture {

const char* const kNaiveTableSql =
    "CREATE TABLE IF NOT EXISTS naive_lock (name text PRIMARY KEY, created_at bigint NOT NULL)";

namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
constexpr milliseconds kPollEvery{10};  // as the Redis ones: the article's do-while

// One blocking libpq connection that reconnects on the next call after a
// failure, as a plain application's data-access layer would.
class PlainPg {
 public:
  explicit PlainPg(std::string conninfo) : conninfo_(std::move(conninfo)) {}
  ~PlainPg() {
    if (conn_) PQfinish(conn_);
  }
  PlainPg(const PlainPg&) = delete;
  PlainPg& operator=(const PlainPg&) = delete;

  struct Reply {
    Outcome outcome = Outcome::fail;  // info: sent, reply lost
    std::string sqlstate;             // of an error reply
    int rows = 0;                     // affected
    std::string detail;
  };

  Reply exec(const std::string& sql, const std::vector<std::string>& params) {
    if (!connected()) return {Outcome::fail, "", 0, "not connected"};
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p.c_str());
    PGresult* res =
        PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0);
    Reply r;
    const auto st = PQresultStatus(res);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
      r.outcome = Outcome::ok;
      const char* n = PQcmdTuples(res);
      r.rows = n && *n ? std::atoi(n) : 0;
    } else if (const char* code = PQresultErrorField(res, PG_DIAG_SQLSTATE); code && PQstatus(conn_) == CONNECTION_OK) {
      r.sqlstate = code;
      r.detail = PQresultErrorMessage(res);
    } else {
      r.outcome = Outcome::info;  // the connection went: applied or not
      r.detail = PQerrorMessage(conn_);
    }
    PQclear(res);
    return r;
  }

 private:
  bool connected() {
    if (conn_ && PQstatus(conn_) == CONNECTION_OK) return true;
    if (conn_) PQfinish(conn_);
    conn_ = PQconnectdb(conninfo_.c_str());
    return PQstatus(conn_) == CONNECTION_OK;
  }
  std::string conninfo_;
  PGconn* conn_ = nullptr;
};

std::string conninfo(const StrategyConfig& c) {
  return "postgres://postgres@" + c.host + ":" + std::to_string(c.ports.at(0)) +
         "/postgres?connect_timeout=5&application_name=" + c.client_name;
}

class TableLock final : public Strategy {
 public:
  TableLock(const StrategyConfig& c, bool cleanup_job) : config_(c), db_(conninfo(c)) {
    if (cleanup_job) job_ = std::thread([this] { cleanup_loop(); });
  }
  ~TableLock() override {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (job_.joinable()) job_.join();
  }

  AcquireResult acquire(milliseconds wait, std::function<void()>) override {
    const auto deadline = Clock::now() + wait;
    for (;;) {
      auto r = db_.exec("INSERT INTO naive_lock (name, created_at) VALUES ($1, $2)",
                        {config_.key, std::to_string(wall_ms())});
      if (r.outcome == Outcome::ok) return {Outcome::ok, 0, {}};
      if (r.outcome == Outcome::info) return {Outcome::info, 0, r.detail};
      if (r.sqlstate != "23505") return {Outcome::fail, 0, r.detail};  // not "taken"
      if (Clock::now() >= deadline) return {Outcome::fail, 0, "timeout"};
      std::this_thread::sleep_for(kPollEvery);
    }
  }

  ReleaseResult release() override {
    auto r = db_.exec("DELETE FROM naive_lock WHERE name = $1", {config_.key});
    if (r.outcome != Outcome::ok) return {r.outcome, r.detail};
    return {r.rows == 1 ? Outcome::ok : Outcome::fail, r.rows == 1 ? "" : "nothing deleted"};
  }

 private:
  // The article's periodic job: delete rows created more than the timeout
  // ago by this client's clock. Each worker runs one, as each application
  // instance would.
  void cleanup_loop() {
    PlainPg db(conninfo(config_));
    std::unique_lock<std::mutex> lk(mu_);
    while (!cv_.wait_for(lk, milliseconds(std::max<std::int64_t>(10, config_.ttl_ms / 4)), [&] { return stop_; })) {
      lk.unlock();
      db.exec("DELETE FROM naive_lock WHERE created_at < $1", {std::to_string(wall_ms() - config_.ttl_ms)});
      lk.lock();
    }
  }

  StrategyConfig config_;
  PlainPg db_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread job_;
};

}  // namespace

std::unique_ptr<Strategy> make_table_lock(const std::string& name, const StrategyConfig& config) {
  if (name != "db-insert-unique" && name != "db-insert-cleanup-job")
    throw std::invalid_argument("unknown strategy '" + name + "'");
  return std::make_unique<TableLock>(config, name == "db-insert-cleanup-job");
}

}  // namespace torture
