// Route for one server: every command on one pipelined connection.
#include "redis/route.hpp"

namespace dlock::redis {
namespace {

class SingleRoute final : public Route {
 public:
  SingleRoute(boost::asio::io_context& io, ConnectionConfig config) : config_(config), conn_(io, std::move(config)) {}

  void start(std::function<void(Status)> done) override {
    conn_.on_state([this](bool up) {
      if (link_) link_(up);
    });
    conn_.start(std::move(done));
  }
  void close() override { conn_.close(); }
  bool cluster() const override { return false; }
  bool moves() const override { return false; }

  void exec(int, std::vector<std::string> commands, ReplyHandler handler, milliseconds timeout) override {
    const std::size_t n = commands.size();
    conn_.exec(joined(std::move(commands)), n, std::move(handler), timeout);
  }
  std::vector<std::string> masters() const override { return {""}; }
  void exec_at(const std::string&, std::vector<std::string> commands, ReplyHandler handler) override {
    exec(-1, std::move(commands), std::move(handler), milliseconds(0));
  }
  ConnectionConfig subscriber_config(int) const override { return config_; }
  void refresh() override {}
  std::optional<ClusterNode> blocking_target(int) const override {
    return ClusterNode{config_.endpoint.host, config_.endpoint.port};
  }

  void on_link(std::function<void(bool)> handler) override { link_ = std::move(handler); }
  std::uint64_t requests_sent() const override { return conn_.requests_sent(); }
  std::uint64_t reconnects() const override { return conn_.reconnects(); }

 private:
  ConnectionConfig config_;
  Connection conn_;
  std::function<void(bool)> link_;
};

}  // namespace

std::unique_ptr<Route> make_single_route(boost::asio::io_context& io, ConnectionConfig config) {
  return std::make_unique<SingleRoute>(io, std::move(config));
}

}  // namespace dlock::redis
