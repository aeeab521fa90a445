// inventory-experiment: seed 001's experiment, reproduced and measured.
//
// Starts a private redis-server and two inventory-service instances, then for
// each lock variant sets the stock to 100, fires 100 concurrent purchases
// split across the instances, and compares the final stock with the number
// of successful purchases: any difference is a lost update (or an oversale).
// Prints a table, writes results.json and chart.svg, and stops everything it
// started.
//
// Exit status: 0 when the dlock variants show no anomaly (and the blocking one
// sold everything); 1 otherwise; 2 on set-up failure.
//
//   inventory-experiment [--out DIR] [--requests N] [--think-ms N]
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <latch>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/child_process.hpp"
#include "common/etcd_cluster.hpp"
#include "common/pg_cluster.hpp"
#include "common/zk_ensemble.hpp"

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace fs = std::filesystem;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
using namespace dlock::tools;

namespace {

struct Row {
  std::string variant;
  std::string label;
  int instances = 2;
  bool expected_safe = true;
  int requests = 0, succeeded = 0, sold_out = 0, busy = 0, errors = 0;
  long long final_stock = 0;
  long long anomalies = 0;  // lost updates + oversold units
  double seconds = 0;
};

// ---- HTTP and Redis --------------------------------------------------------

struct Response {
  int status = 0;  // 0: transport error
  std::string body;
};

class HttpConnection {
 public:
  explicit HttpConnection(int port) : socket_(io_) {
    socket_.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  }
  Response post(const std::string& target) {
    http::request<http::empty_body> req{http::verb::post, target, 11};
    req.set(http::field::host, "127.0.0.1");
    http::write(socket_, req);
    boost::beast::flat_buffer buf;
    http::response<http::string_body> res;
    http::read(socket_, buf, res);
    return {static_cast<int>(res.result_int()), res.body()};
  }

 private:
  asio::io_context io_;
  tcp::socket socket_;
};

// Tiny RESP over a socket: enough to set and read the stock.
std::string redis(int port, const std::vector<std::string>& args) {
  asio::io_context io;
  tcp::socket s(io);
  s.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  std::string cmd = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) cmd += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  asio::write(s, asio::buffer(cmd));
  asio::streambuf buf;
  asio::read_until(s, buf, "\r\n");
  std::istream in(&buf);
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.rfind("$", 0) == 0 && line != "$-1") {
    auto n = std::stoul(line.substr(1));
    if (buf.size() < n + 2) asio::read(s, buf, asio::transfer_exactly(n + 2 - buf.size()));
    std::string value(n, '\0');
    in.read(value.data(), static_cast<std::streamsize>(n));
    return value;
  }
  return line;
}

// ---- the experiment --------------------------------------------------------

void run_row(Row& row, const std::vector<int>& service_ports, int redis_port, int requests) {
  redis(redis_port, {"SET", "ProductStock_10000", "100"});
  redis(redis_port, {"DEL", "lock:ProductStock_10000"});
  row.requests = requests;
  std::vector<Response> results(requests);
  std::latch ready(requests + 1);
  std::vector<std::thread> threads;
  for (int i = 0; i < requests; ++i) {
    threads.emplace_back([&, i] {
      std::unique_ptr<HttpConnection> conn;
      try {
        conn = std::make_unique<HttpConnection>(service_ports[i % row.instances]);
      } catch (...) {
      }
      ready.arrive_and_wait();  // all connected: fire together
      if (!conn) return;
      try {
        results[i] = conn->post("/buy/" + row.variant);
      } catch (const std::exception& e) {
        results[i] = {0, e.what()};
      }
    });
  }
  auto t0 = std::chrono::steady_clock::now();
  ready.arrive_and_wait();
  for (auto& t : threads) t.join();
  row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& r : results) {
    if (r.status == 200)
      ++row.succeeded;
    else if (r.status == 409)
      ++row.sold_out;
    else if (r.status == 423)
      ++row.busy;
    else
      ++row.errors;
  }
  row.final_stock = std::stoll(redis(redis_port, {"GET", "ProductStock_10000"}));
  // Each success must have taken exactly one unit.
  long long expected = 100 - row.succeeded;
  row.anomalies = std::llabs(row.final_stock - expected);
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '<' ? std::string("&lt;") : c == '&' ? std::string("&amp;") : std::string(1, c);
  return out;
}

void write_svg(const std::vector<Row>& rows, const fs::path& path) {
  const int bar_w = 420, row_h = 46, left = 250, top = 50;
  const int height = top + static_cast<int>(rows.size()) * row_h + 60;
  std::ofstream o(path);
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << left + bar_w + 170 << "' height='" << height
    << "' font-family='sans-serif' font-size='13'>\n"
    << "<rect width='100%' height='100%' fill='white'/>\n"
    << "<text x='10' y='24' font-size='16' font-weight='bold'>Inventory experiment: 100 purchases of 100 units"
       "</text>\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    int y = top + static_cast<int>(i) * row_h;
    double scale = static_cast<double>(bar_w) / std::max(1, r.requests);
    o << "<text x='10' y='" << y + 16 << "'>" << escape(r.label) << "</text>\n"
      << "<text x='10' y='" << y + 31 << "' fill='#666'>" << r.instances << " instance" << (r.instances > 1 ? "s" : "")
      << "</text>\n";
    double x = left;
    auto seg = [&](int n, const char* color) {
      if (n <= 0) return;
      o << "<rect x='" << x << "' y='" << y + 4 << "' width='" << n * scale << "' height='16' fill='" << color
        << "'/>\n";
      x += n * scale;
    };
    seg(r.succeeded, "#2e7d32");
    seg(r.sold_out + r.busy, "#9e9e9e");
    seg(r.errors, "#ef6c00");
    if (r.anomalies > 0)
      o << "<rect x='" << left << "' y='" << y + 23 << "' width='" << static_cast<double>(r.anomalies) * scale
        << "' height='10' fill='#c62828'/>\n";
    o << "<text x='" << left + bar_w + 10 << "' y='" << y + 16 << "'>" << r.succeeded << " sold, stock "
      << r.final_stock << "</text>\n"
      << "<text x='" << left + bar_w + 10 << "' y='" << y + 32 << "' fill='"
      << (r.anomalies > 0 ? "#c62828" : "#2e7d32") << "'>" << r.anomalies << " lost updates</text>\n";
  }
  int ly = height - 30;
  o << "<rect x='10' y='" << ly << "' width='12' height='12' fill='#2e7d32'/><text x='28' y='" << ly + 11
    << "'>succeeded</text>\n"
    << "<rect x='110' y='" << ly << "' width='12' height='12' fill='#9e9e9e'/><text x='128' y='" << ly + 11
    << "'>refused (sold out / lock busy)</text>\n"
    << "<rect x='330' y='" << ly << "' width='12' height='12' fill='#ef6c00'/><text x='348' y='" << ly + 11
    << "'>errors</text>\n"
    << "<rect x='410' y='" << ly + 2 << "' width='12' height='8' fill='#c62828'/><text x='428' y='" << ly + 11
    << "'>lost updates / oversold</text>\n"
    << "</svg>\n";
}

void write_json(const std::vector<Row>& rows, const fs::path& path) {
  std::ofstream o(path);
  o << "[\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    o << "  {\"variant\": \"" << r.variant << "\", \"instances\": " << r.instances << ", \"requests\": " << r.requests
      << ", \"succeeded\": " << r.succeeded << ", \"sold_out\": " << r.sold_out << ", \"lock_busy\": " << r.busy
      << ", \"errors\": " << r.errors << ", \"final_stock\": " << r.final_stock << ", \"lost_updates\": " << r.anomalies
      << ", \"seconds\": " << r.seconds << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  o << "]\n";
}

}  // namespace

int main(int argc, char** argv) {
  fs::path out = "inventory-results";
  int requests = 100;
  std::string think_ms = "2";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--out" && i + 1 < argc)
      out = argv[++i];
    else if (a == "--requests" && i + 1 < argc)
      requests = std::atoi(argv[++i]);
    else if (a == "--think-ms" && i + 1 < argc)
      think_ms = argv[++i];
    else {
      std::cerr << "usage: inventory-experiment [--out DIR] [--requests N] [--think-ms N]\n";
      return 64;
    }
  }
  fs::create_directories(out);
  const fs::path service = fs::read_symlink("/proc/self/exe").parent_path() / "inventory-service";
  char tmpl[] = "/tmp/dlock-inventory-XXXXXX";
  const fs::path tmp = mkdtemp(tmpl);
  std::vector<Child> children;
  int rc = 2;
  try {
    const int redis_port = free_port();
    children.push_back(
        start_child({"redis-server", "--port", std::to_string(redis_port), "--bind", "127.0.0.1", "--dir", tmp.string(),
                     "--save", "", "--appendonly", "no", "--logfile", (tmp / "redis.log").string()},
                    false, (tmp / "redis.out").string()));
    for (int i = 0; i < 250 && !port_open(redis_port); ++i) std::this_thread::sleep_for(20ms);
    if (!port_open(redis_port)) throw std::runtime_error("redis-server did not start (see " + tmp.string() + ")");
    const std::string pg_url = start_postgres(tmp / "pg", children);
    // A standalone ZooKeeper for the dlock-zookeeper variant, if installed.
    std::optional<dlock::tools::ZooKeeperEnsemble> zk;
    if (dlock::tools::zookeeper_available()) zk.emplace(1, tmp.string());
    const std::string zk_url = zk ? "zk://" + zk->hosts() : "";
    // A private etcd member for the dlock-etcd variant, where this build
    // serves etcd:// and etcd is installed.
    std::optional<dlock::tools::EtcdCluster> etcd;
    if (DLOCK_WITH_ETCD && dlock::tools::etcd_available()) {
      dlock::tools::EtcdCluster::Options o;
      o.members = 1;
      o.parent = tmp.string();
      o.fsync = true;  // as deployed
      etcd.emplace(std::move(o));
    }
    const std::string etcd_url = etcd ? etcd->url() : "";
    std::vector<int> ports;
    for (int i = 0; i < 2; ++i) {
      std::vector<std::string> args = {service.string(),           "--port",     "0",      "--redis-port",
                                       std::to_string(redis_port), "--think-ms", think_ms, "--sqlite",
                                       (tmp / "locks.db").string()};
      if (!pg_url.empty()) args.insert(args.end(), {"--postgres", pg_url});
      if (!zk_url.empty()) args.insert(args.end(), {"--zookeeper", zk_url});
      if (!etcd_url.empty()) args.insert(args.end(), {"--etcd", etcd_url});
      children.push_back(start_child(args, true, (tmp / ("service" + std::to_string(i) + ".log")).string()));
      ports.push_back(read_listening_port(children.back().out_fd));
    }
    std::cout << "redis-server on 127.0.0.1:" << redis_port << ", inventory-service on ports " << ports[0] << " and "
              << ports[1] << "\n\n";

    std::vector<Row> rows = {
        {"nolock", "no lock", 2, false},
        {"mutex", "in-process std::mutex", 1, true},
        {"mutex", "in-process std::mutex", 2, false},
        {"setnx", "SETNX+DEL, fail fast (seed v1)", 2, true},
        {"dlock", "dlock::Mutex, blocking", 2, true},
        {"dlock-try", "dlock try_lock, fail fast", 2, true},
        {"dlock-sqlite", "dlock::Mutex, SQLite file", 2, true},
    };
    if (!pg_url.empty()) rows.push_back({"dlock-postgres", "dlock::Mutex, PostgreSQL", 2, true});
    if (!zk_url.empty()) rows.push_back({"dlock-zookeeper", "dlock::Mutex, ZooKeeper", 2, true});
    if (!etcd_url.empty()) rows.push_back({"dlock-etcd", "dlock::Mutex, etcd", 2, true});
    for (Row& r : rows) run_row(r, ports, redis_port, requests);

    std::cout << std::left << std::setw(32) << "variant" << std::right << std::setw(10) << "instances" << std::setw(10)
              << "requests" << std::setw(11) << "succeeded" << std::setw(21) << "refused (out+busy)" << std::setw(8)
              << "errors" << std::setw(13) << "final stock" << std::setw(16) << "lost/oversold"
              << "\n";
    for (const Row& r : rows) {
      std::cout << std::left << std::setw(32) << r.label << std::right << std::setw(10) << r.instances << std::setw(10)
                << r.requests << std::setw(11) << r.succeeded << std::setw(21)
                << (std::to_string(r.sold_out + r.busy) + " (" + std::to_string(r.sold_out) + "+" +
                    std::to_string(r.busy) + ")")
                << std::setw(8) << r.errors << std::setw(13) << r.final_stock << std::setw(16) << r.anomalies << "\n";
    }
    write_svg(rows, out / "chart.svg");
    write_json(rows, out / "results.json");
    std::cout << "\nchart: " << fs::absolute(out / "chart.svg").string()
              << "\nresults: " << fs::absolute(out / "results.json").string() << "\n";

    rc = 0;
    for (const Row& r : rows) {
      bool is_dlock = r.variant.rfind("dlock", 0) == 0;
      if (is_dlock && (r.anomalies != 0 || r.errors != 0)) {
        std::cout << "FAIL: " << r.label << " shows " << r.anomalies << " lost updates and " << r.errors << " errors\n";
        rc = 1;
      }
      const bool blocking = r.variant == "dlock" || r.variant == "dlock-sqlite" || r.variant == "dlock-postgres" ||
                            r.variant == "dlock-zookeeper" || r.variant == "dlock-etcd";
      if (blocking && r.succeeded != std::min(requests, 100)) {
        std::cout << "FAIL: dlock blocking sold " << r.succeeded << ", expected " << std::min(requests, 100) << "\n";
        rc = 1;
      }
      if (!r.expected_safe && r.anomalies == 0)
        std::cout << "note: " << r.label << " on " << r.instances
                  << " instances lost no update in this run (races are timing-dependent)\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "inventory-experiment: " << e.what() << "\n";
  }
  stop_postgres(tmp / "pg");
  for (auto it = children.rbegin(); it != children.rend(); ++it) stop_child(*it);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  return rc;
}
