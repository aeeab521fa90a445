// inventory-service: seed 001's stock service. Each POST /buy/<variant>
// decrements the stock of one product kept in Redis (GET, think, SET: a
// read-modify-write that is only safe under mutual exclusion) and answers
//   200 "left N"        bought
//   409 "sold out"      no stock left
//   423 "lock busy"     a fail-fast lock was held by someone else
//   500 <message>       anything else
//
// Variants:
//   nolock     no lock at all
//   mutex      a std::mutex: excludes threads of this process only
//   setnx      seed 001 v1: SETNX key; busy -> refuse; ...; DEL key
//   dlock      dlock::Mutex, waiting for the lock (up to 10 s)
//   dlock-try  dlock::Mutex::try_lock, refusing when busy
//   dlock-sqlite  dlock::Mutex over a SQLite lock file (instances on one
//              machine, no lock server), waiting up to 10 s
//   dlock-postgres  dlock::Mutex over a PostgreSQL lock table, waiting up to 10 s
//
//   dlock-zookeeper  dlock::Mutex over a ZooKeeper lock queue, waiting up to 10 s
//   dlock-etcd  dlock::Mutex over etcd (etcd's own lock layout), waiting up to 10 s
//   inventory-service --port P --redis-port R [--think-ms 2] [--sqlite PATH] [--postgres URL] [--zookeeper URL]
//                     [--etcd URL]
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstring>
#include <dlock/dlock.hpp>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/sync_redis.hpp"

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

const std::string kStockKey = "ProductStock_10000";
const std::string kLockName = "ProductStock_10000";  // for dlock
const std::string kSetnxKey = "lock:ProductStock_10000";

struct Config {
  int port = 0;
  int redis_port = 6379;
  int think_ms = 2;
  std::string sqlite;     // lock file of the dlock-sqlite variant
  std::string postgres;   // URL of the dlock-postgres variant
  std::string zookeeper;  // URL of the dlock-zookeeper variant
  std::string etcd;       // URL of the dlock-etcd variant
};

struct Clients {
  dlock::Client redis;
  std::optional<dlock::Client> sqlite;
  std::optional<dlock::Client> postgres;
  std::optional<dlock::Client> zookeeper;
  std::optional<dlock::Client> etcd;
};

struct Reply {
  http::status status;
  std::string body;
};

// One plain Redis connection per HTTP connection (a blocking client is not
// thread-safe); the data path of the service, not the lock.
class Store {
 public:
  explicit Store(int port) : conn_("127.0.0.1", static_cast<std::uint16_t>(port), std::chrono::seconds(5)) {
    std::string why;
    if (!conn_.connect(&why)) throw std::runtime_error("cannot connect to Redis: " + why);
  }

  std::optional<long long> get_stock() {
    auto r = command({"GET", kStockKey});
    if (r.is_nil) return std::nullopt;
    return std::stoll(r.str);
  }
  void set_stock(long long v) { command({"SET", kStockKey, std::to_string(v)}); }
  bool setnx() { return command({"SETNX", kSetnxKey, "1"}).integer == 1; }
  void del() { command({"DEL", kSetnxKey}); }

 private:
  dlock::tools::Reply command(const std::vector<std::string>& args) {
    auto r = conn_.cmd(args);
    if (r.status != dlock::tools::Reply::Status::ok) throw std::runtime_error("Redis connection failed: " + r.failure);
    if (r.is_error) throw std::runtime_error("Redis error: " + r.str);
    return r;
  }
  dlock::tools::SyncRedis conn_;
};

std::mutex g_process_mutex;

// The unprotected read-modify-write every variant wraps.
Reply decrement(Store& store, int think_ms) {
  auto stock = store.get_stock();
  if (!stock) return {http::status::internal_server_error, "stock not initialised"};
  if (*stock <= 0) return {http::status::conflict, "sold out"};
  std::this_thread::sleep_for(std::chrono::milliseconds(think_ms));  // pricing, logging...
  store.set_stock(*stock - 1);
  return {http::status::ok, "left " + std::to_string(*stock - 1)};
}

Reply with_mutex(const dlock::Client& client, Store& store, const Config& cfg, bool wait) {
  dlock::Mutex m(client, kLockName);  // one owner per request
  if (wait ? !m.try_lock_for(std::chrono::seconds(10)) : !m.try_lock()) return {http::status::locked, "lock busy"};
  std::lock_guard lk(m, std::adopt_lock);
  return decrement(store, cfg.think_ms);
}

Reply handle(const std::string& variant, Store& store, const Clients& clients, const Config& cfg) {
  if (variant == "nolock") return decrement(store, cfg.think_ms);
  if (variant == "mutex") {
    std::lock_guard lk(g_process_mutex);
    return decrement(store, cfg.think_ms);
  }
  if (variant == "setnx") {
    if (!store.setnx()) return {http::status::locked, "lock busy"};
    Reply r = decrement(store, cfg.think_ms);
    store.del();
    return r;
  }
  if (variant == "dlock" || variant == "dlock-try") return with_mutex(clients.redis, store, cfg, variant == "dlock");
  if (variant == "dlock-sqlite") {
    if (!clients.sqlite) return {http::status::not_found, "started without --sqlite"};
    return with_mutex(*clients.sqlite, store, cfg, true);
  }
  if (variant == "dlock-postgres") {
    if (!clients.postgres) return {http::status::not_found, "started without --postgres"};
    return with_mutex(*clients.postgres, store, cfg, true);
  }
  if (variant == "dlock-zookeeper") {
    if (!clients.zookeeper) return {http::status::not_found, "started without --zookeeper"};
    return with_mutex(*clients.zookeeper, store, cfg, true);
  }
  if (variant == "dlock-etcd") {
    if (!clients.etcd) return {http::status::not_found, "started without --etcd"};
    return with_mutex(*clients.etcd, store, cfg, true);
  }
  return {http::status::not_found, "unknown variant '" + variant + "'"};
}

void serve(tcp::socket socket, const Clients& clients, const Config& cfg) {
  try {
    Store store(cfg.redis_port);
    boost::beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> req;
      boost::system::error_code ec;
      http::read(socket, buffer, req, ec);
      if (ec) return;  // closed
      std::string target(req.target());
      Reply reply{http::status::not_found, "use POST /buy/<variant>"};
      if (req.method() == http::verb::post && target.rfind("/buy/", 0) == 0) {
        try {
          reply = handle(target.substr(5), store, clients, cfg);
        } catch (const std::exception& e) {
          reply = {http::status::internal_server_error, e.what()};
        }
      }
      http::response<http::string_body> res{reply.status, req.version()};
      res.set(http::field::content_type, "text/plain");
      res.keep_alive(req.keep_alive());
      res.body() = reply.body;
      res.prepare_payload();
      http::write(socket, res, ec);
      if (ec || !req.keep_alive()) return;
    }
  } catch (const std::exception& e) {
    std::cerr << "inventory-service: " << e.what() << '\n';
  }
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--port") == 0)
      cfg.port = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--redis-port") == 0)
      cfg.redis_port = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--think-ms") == 0)
      cfg.think_ms = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--sqlite") == 0)
      cfg.sqlite = argv[i + 1];
    else if (std::strcmp(argv[i], "--postgres") == 0)
      cfg.postgres = argv[i + 1];
    else if (std::strcmp(argv[i], "--zookeeper") == 0)
      cfg.zookeeper = argv[i + 1];
    else if (std::strcmp(argv[i], "--etcd") == 0)
      cfg.etcd = argv[i + 1];
    else {
      std::cerr << "usage: inventory-service --port P --redis-port R [--think-ms N] [--sqlite PATH] [--postgres URL] "
                   "[--zookeeper URL] [--etcd URL]\n";
      return 64;
    }
  }
  try {
    dlock::ClientOptions opts;
    Clients clients{
        dlock::Client::connect("redis://127.0.0.1:" + std::to_string(cfg.redis_port), opts), {}, {}, {}, {}};
    if (!cfg.sqlite.empty()) clients.sqlite = dlock::Client::connect("sqlite://" + cfg.sqlite, opts);
    if (!cfg.postgres.empty()) clients.postgres = dlock::Client::connect(cfg.postgres, opts);
    if (!cfg.zookeeper.empty()) clients.zookeeper = dlock::Client::connect(cfg.zookeeper, opts);
    if (!cfg.etcd.empty()) clients.etcd = dlock::Client::connect(cfg.etcd, opts);
    asio::io_context io;
    tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(cfg.port)});
    std::cout << "listening " << acceptor.local_endpoint().port() << std::endl;
    for (;;) {
      tcp::socket s(io);
      acceptor.accept(s);
      std::thread([s = std::move(s), &clients, &cfg]() mutable { serve(std::move(s), clients, cfg); }).detach();
    }
  } catch (const std::exception& e) {
    std::cerr << "inventory-service: " << e.what() << '\n';
    return 1;
  }
}
