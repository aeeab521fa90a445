#include "common/tcp_proxy.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <exception>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/syn_drop.hpp"

namespace dlock::tools {

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;
using std::chrono::milliseconds;

constexpr std::size_t kReadSize = 64 * 1024;
// Per direction: stop reading the source while this much is queued, so a
// long blackhole or delay cannot make the proxy grow without bound (the
// sender then blocks on TCP flow control, as over a real network).
constexpr std::size_t kMaxQueued = 8 * 1024 * 1024;

struct Faults {
  milliseconds delay{0};
  milliseconds hold{0};
  bool blackhole = false;
  bool drop_replies = false;
  bool refuse = false;
};

class Session;

// Everything below is touched only on the I/O thread (or before start(),
// when there is no I/O thread).
struct Link {
  Link(asio::io_context& io, std::string n) : name(std::move(n)), acceptor(io), retry(io) {}
  std::string name;
  tcp::acceptor acceptor;
  asio::steady_timer retry;  // re-arms accept after errors such as EMFILE
  Faults faults;
  Proxy::Stats stats;
  // Open pairs. Owning: a pair waiting for a partition to heal has no
  // handler in flight to keep it alive. A pair leaves when it closes.
  std::map<std::uint64_t, std::shared_ptr<Session>> sessions;
  std::uint64_t next_id = 0;
  bool closed = false;
  // Proxy::unreachable: not accepting, the listener's queue held full.
  bool unreachable = false;
  SynDrop syn_drop;
};

// Abortive close: with SO_LINGER 0, close() sends RST instead of FIN.
void reset_socket(tcp::socket& s) {
  if (!s.is_open()) return;
  error_code ignored;
  s.set_option(asio::socket_base::linger(true, 0), ignored);
  s.close(ignored);
}

struct Chunk {
  std::vector<char> data;
  Clock::time_point arrival;
  Clock::time_point due;
};

// One direction of a connection pair.
struct Pipe {
  Pipe(asio::io_context& io, tcp::socket& s, tcp::socket& d, bool down) : src(s), dst(d), is_down(down), timer(io) {}
  tcp::socket& src;
  tcp::socket& dst;
  const bool is_down;  // server -> client
  std::vector<char> buf;
  std::deque<Chunk> queue;  // FIFO: bytes keep their order whatever the due times
  std::size_t queued = 0;
  asio::steady_timer timer;  // waits for the front chunk's due time
  bool reading = false;
  bool writing = false;
  bool waiting = false;
  bool eof = false;   // the source sent FIN
  bool shut = false;  // FIN passed on to dst after the queue drained
};

// A client connection and its upstream connection. Handlers hold a
// shared_ptr, so the Session lives until the last of them has run.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(asio::io_context& io, std::shared_ptr<Link> link, std::uint64_t id, tcp::socket client,
          const std::vector<tcp::endpoint>& upstream)
      : link_(std::move(link)),
        id_(id),
        upstream_(upstream),
        client_(std::move(client)),
        server_(io),
        up_(io, client_, server_, false),
        down_(io, server_, client_, true) {}

  // Called once, right after accept.
  void begin() {
    // In a partition the server would not see the connection either.
    if (link_->faults.blackhole) {
      awaiting_heal_ = true;
      return;
    }
    connect();
  }

  // Faults changed: start what they may have held back.
  void kick() {
    if (closed_) return;
    if (awaiting_heal_) {
      if (!link_->faults.blackhole) connect();
      return;
    }
    pump(up_);
    pump(down_);
  }

  // RST to both peers; whatever is queued is lost.
  void abort() {
    if (closed_) return;
    ++link_->stats.resets;
    link_->stats.bytes_dropped += up_.queued + down_.queued;
    reset_socket(client_);
    reset_socket(server_);
    finish();
  }

  // Both FINs passed on, or the proxy stops: close without counting anything.
  void close() {
    if (closed_) return;
    error_code ignored;
    client_.close(ignored);
    server_.close(ignored);
    finish();
  }

 private:
  void connect() {
    awaiting_heal_ = false;
    auto self = shared_from_this();
    asio::async_connect(server_, upstream_,
                        [self](const error_code& ec, const tcp::endpoint&) { self->on_connected(ec); });
  }

  void on_connected(const error_code& ec) {
    if (closed_) return;
    if (ec) {  // upstream down (e.g. restarting): the client sees a reset
      abort();
      return;
    }
    error_code ignored;
    client_.set_option(tcp::no_delay(true), ignored);
    server_.set_option(tcp::no_delay(true), ignored);
    connected_ = true;
    up_.buf.resize(kReadSize);
    down_.buf.resize(kReadSize);
    read(up_);
    read(down_);
  }

  void read(Pipe& p) {
    if (closed_ || p.reading || p.eof || p.queued >= kMaxQueued) return;
    p.reading = true;
    auto self = shared_from_this();
    p.src.async_read_some(asio::buffer(p.buf),
                          [self, &p](const error_code& ec, std::size_t n) { self->on_read(p, ec, n); });
  }

  void on_read(Pipe& p, const error_code& ec, std::size_t n) {
    p.reading = false;
    if (closed_) return;
    if (ec == asio::error::eof) {
      p.eof = true;
      pump(p);
      return;
    }
    if (ec) {  // RST or another error: pass it on as a reset
      abort();
      return;
    }
    const Faults& f = link_->faults;
    Proxy::Stats& st = link_->stats;
    if (p.is_down && f.drop_replies) {
      st.bytes_dropped += n;
      abort();
      return;
    }
    const auto now = Clock::now();
    Chunk c{std::vector<char>(p.buf.begin(), p.buf.begin() + static_cast<std::ptrdiff_t>(n)), now, now};
    if (f.delay > milliseconds::zero()) {
      c.due += f.delay;
      ++st.delayed_chunks;
    }
    if (p.is_down && f.hold > milliseconds::zero()) {
      c.due += f.hold;
      ++st.held_chunks;
    }
    p.queued += n;
    p.queue.push_back(std::move(c));
    pump(p);
    read(p);
  }

  // Writes the front chunk when it is due and nothing holds it back.
  void pump(Pipe& p) {
    if (closed_ || !connected_ || p.writing || p.waiting || link_->faults.blackhole) return;
    if (p.queue.empty()) {
      if (p.eof && !p.shut) {  // pass the FIN on once everything before it went out
        p.shut = true;
        error_code ignored;
        p.dst.shutdown(tcp::socket::shutdown_send, ignored);
        if (up_.shut && down_.shut) close();
      }
      return;
    }
    auto self = shared_from_this();
    const auto now = Clock::now();
    Chunk& c = p.queue.front();
    if (c.due > now) {
      p.waiting = true;
      p.timer.expires_at(c.due);
      p.timer.async_wait([self, &p](const error_code&) {
        p.waiting = false;
        self->pump(p);
      });
      return;
    }
    if (p.is_down && link_->faults.drop_replies) {
      abort();  // counts the queued reply bytes as dropped
      return;
    }
    auto& st = link_->stats;
    st.max_delay_applied_ms =
        std::max(st.max_delay_applied_ms, std::chrono::duration_cast<milliseconds>(now - c.arrival).count());
    p.writing = true;
    asio::async_write(p.dst, asio::buffer(c.data),
                      [self, &p](const error_code& ec, std::size_t n) { self->on_written(p, ec, n); });
  }

  void on_written(Pipe& p, const error_code& ec, std::size_t n) {
    p.writing = false;
    if (closed_) return;
    if (ec) {
      abort();
      return;
    }
    (p.is_down ? link_->stats.bytes_down : link_->stats.bytes_up) += n;
    p.queued -= p.queue.front().data.size();
    p.queue.pop_front();
    read(p);  // resumes a source paused at kMaxQueued
    pump(p);
  }

  // Sockets are closed by the caller; pending handlers see closed_. The
  // queues stay until the Session dies: a cancelled write may still name them.
  void finish() {
    const auto keep_alive = shared_from_this();  // the map may hold the last reference
    closed_ = true;
    up_.timer.cancel();
    down_.timer.cancel();
    link_->sessions.erase(id_);
  }

  std::shared_ptr<Link> link_;
  const std::uint64_t id_;
  const std::vector<tcp::endpoint>& upstream_;  // owned by Proxy::Impl, fixed after start()
  tcp::socket client_;
  tcp::socket server_;
  Pipe up_;
  Pipe down_;
  bool awaiting_heal_ = false;
  bool connected_ = false;
  bool closed_ = false;
};

}  // namespace

struct Proxy::Impl {
  Impl(std::string h, std::uint16_t p) : host(std::move(h)), port(p) {}

  // Runs f on the I/O thread and waits for it (exceptions included); before
  // start() there is no I/O thread and f runs here. call_mu serializes the
  // callers, so start() cannot begin while f runs inline.
  template <class F>
  std::invoke_result_t<F&> call(F f) {
    using R = std::invoke_result_t<F&>;
    if (io.get_executor().running_in_this_thread()) return f();  // from a handler: waiting would deadlock
    std::lock_guard lock(call_mu);
    if (!running) return f();
    std::packaged_task<R()> task(std::move(f));
    auto result = task.get_future();
    asio::post(io, [&task] { task(); });
    return result.get();
  }

  std::vector<Link*> select(const std::string& name) const {
    std::vector<Link*> out;
    if (name.empty()) {
      for (const auto& [n, l] : links) out.push_back(l.get());
    } else {
      auto it = links.find(name);
      if (it == links.end()) throw std::invalid_argument("torture::Proxy: unknown link \"" + name + "\"");
      out.push_back(it->second.get());
    }
    return out;
  }

  template <class F>
  void apply(const std::string& name, F change) {
    call([&] {
      for (Link* l : select(name)) {
        change(*l);
        for (const auto& s : snapshot(*l)) s->kick();
      }
    });
  }

  // Session callbacks may erase from the map while we iterate.
  static std::vector<std::shared_ptr<Session>> snapshot(const Link& l) {
    std::vector<std::shared_ptr<Session>> out;
    for (const auto& [id, s] : l.sessions) out.push_back(s);
    return out;
  }

  void accept(const std::shared_ptr<Link>& link) {
    link->acceptor.async_accept(
        [this, link](const error_code& ec, tcp::socket s) { on_accept(link, ec, std::move(s)); });
  }

  void on_accept(const std::shared_ptr<Link>& link, const error_code& ec, tcp::socket s) {
    if (link->closed || ec == asio::error::operation_aborted) return;
    if (ec) {  // e.g. out of descriptors: try again shortly instead of spinning
      link->retry.expires_after(milliseconds(50));
      link->retry.async_wait([this, link](const error_code&) {
        if (!link->closed) accept(link);
      });
      return;
    }
    if (link->faults.refuse) {
      reset_socket(s);
      ++link->stats.refused;
    } else {
      ++link->stats.connections;
      const std::uint64_t id = link->next_id++;
      auto session = std::make_shared<Session>(io, link, id, std::move(s), upstream);
      link->sessions.emplace(id, session);
      session->begin();
    }
    if (!link->unreachable) accept(link);  // else set_unreachable(false) re-arms it
  }

  void set_unreachable(const std::shared_ptr<Link>& link, bool on) {
    if (link->unreachable == on || link->closed) return;
    link->unreachable = on;
    link->faults.blackhole = on;
    const int fd = link->acceptor.native_handle();
    if (!on) {
      link->syn_drop.end(fd, asio::socket_base::max_listen_connections);
      accept(link);
      return;
    }
    error_code ignored;
    link->acceptor.cancel(ignored);  // the pending accept ends (operation_aborted), not re-armed
    link->syn_drop.begin(fd);
  }

  void close_all() {
    for (auto& [name, link] : links) {
      link->closed = true;
      error_code ignored;
      link->acceptor.close(ignored);
      link->retry.cancel();
      link->syn_drop.close();
      for (const auto& s : snapshot(*link)) s->close();
    }
  }

  void run() {
    for (;;) {
      try {
        io.run();
        return;
      } catch (const std::exception& e) {  // keep proxying; a dead thread would hang every call
        std::cerr << "torture::Proxy: " << e.what() << '\n';
      }
    }
  }

  const std::string host;
  const std::uint16_t port;
  // Declared before everything holding sockets, so it is destroyed last.
  asio::io_context io{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<tcp::endpoint> upstream;
  std::map<std::string, std::shared_ptr<Link>> links;
  std::mutex call_mu;
  bool running = false;  // guarded by call_mu
  bool started = false;  // guarded by call_mu
  std::thread thread;
};

Proxy::Proxy(std::string upstream_host, std::uint16_t upstream_port)
    : impl_(std::make_unique<Impl>(std::move(upstream_host), upstream_port)) {}

Proxy::~Proxy() {
  impl_->call([this] { impl_->close_all(); });
  std::lock_guard lock(impl_->call_mu);
  if (impl_->running) {
    // Every socket and timer is closed, so their handlers finish at once and
    // run() returns when the guard goes: nothing is left in the queue.
    impl_->work.reset();
    impl_->thread.join();
    impl_->running = false;
  }
}

std::uint16_t Proxy::add_link(const std::string& name) {
  if (name.empty()) throw std::invalid_argument("torture::Proxy: a link needs a name");
  return impl_->call([&] {
    if (impl_->links.count(name) != 0) throw std::invalid_argument("torture::Proxy: link \"" + name + "\" exists");
    auto link = std::make_shared<Link>(impl_->io, name);
    const tcp::endpoint ep(asio::ip::address_v4::loopback(), 0);
    link->acceptor.open(ep.protocol());
    link->acceptor.bind(ep);
    link->acceptor.listen(asio::socket_base::max_listen_connections);
    const std::uint16_t port = link->acceptor.local_endpoint().port();
    impl_->links.emplace(name, link);
    impl_->accept(link);
    return port;
  });
}

void Proxy::start() {
  std::lock_guard lock(impl_->call_mu);
  if (impl_->started) throw std::logic_error("torture::Proxy: already started");
  // Resolved once: the upstream restarts on the same host and port.
  tcp::resolver resolver(impl_->io);
  for (const auto& entry : resolver.resolve(impl_->host, std::to_string(impl_->port), tcp::resolver::numeric_service)) {
    impl_->upstream.push_back(entry.endpoint());
  }
  impl_->work.emplace(impl_->io.get_executor());
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
  impl_->started = impl_->running = true;
}

void Proxy::set_delay(const std::string& link, std::chrono::milliseconds each_way) {
  impl_->apply(link, [=](Link& l) { l.faults.delay = std::max(each_way, milliseconds::zero()); });
}

void Proxy::hold_replies(const std::string& link, std::chrono::milliseconds d) {
  impl_->apply(link, [=](Link& l) { l.faults.hold = std::max(d, milliseconds::zero()); });
}

void Proxy::blackhole(const std::string& link, bool on) {
  impl_->apply(link, [=](Link& l) { l.faults.blackhole = on; });
}

void Proxy::drop_replies(const std::string& link, bool on) {
  impl_->apply(link, [=](Link& l) { l.faults.drop_replies = on; });
}

void Proxy::refuse(const std::string& link, bool on) {
  impl_->apply(link, [=](Link& l) { l.faults.refuse = on; });
}

void Proxy::unreachable(const std::string& link, bool on) {
  impl_->call([&] {
    for (Link* l : impl_->select(link)) {
      impl_->set_unreachable(impl_->links.at(l->name), on);
      for (const auto& s : Impl::snapshot(*l)) s->kick();
    }
  });
}

void Proxy::reset(const std::string& link) {
  impl_->call([&] {
    for (Link* l : impl_->select(link)) {
      for (const auto& s : Impl::snapshot(*l)) s->abort();
    }
  });
}

void Proxy::set_upstream_port(std::uint16_t port) {
  // Sessions copy the endpoints when they connect, so changing them here,
  // on the I/O thread, only affects later connections.
  impl_->call([&] {
    for (auto& ep : impl_->upstream) ep.port(port);
  });
}

namespace {
void add_stats(Proxy::Stats& sum, const Proxy::Stats& s) {
  sum.connections += s.connections;
  sum.bytes_up += s.bytes_up;
  sum.bytes_down += s.bytes_down;
  sum.bytes_dropped += s.bytes_dropped;
  sum.resets += s.resets;
  sum.held_chunks += s.held_chunks;
  sum.delayed_chunks += s.delayed_chunks;
  sum.refused += s.refused;
  sum.max_delay_applied_ms = std::max(sum.max_delay_applied_ms, s.max_delay_applied_ms);
}
}  // namespace

Proxy::Stats Proxy::stats(const std::string& link) const {
  return impl_->call([&] {
    Stats sum;
    for (const Link* l : impl_->select(link)) add_stats(sum, l->stats);
    return sum;
  });
}

void ProxyGroup::set_delay(const std::string& link, std::chrono::milliseconds each_way) {
  for (Proxy* p : proxies_) p->set_delay(link, each_way);
}
void ProxyGroup::hold_replies(const std::string& link, std::chrono::milliseconds d) {
  for (Proxy* p : proxies_) p->hold_replies(link, d);
}
void ProxyGroup::blackhole(const std::string& link, bool on) {
  for (Proxy* p : proxies_) p->blackhole(link, on);
}
void ProxyGroup::drop_replies(const std::string& link, bool on) {
  for (Proxy* p : proxies_) p->drop_replies(link, on);
}
void ProxyGroup::reset(const std::string& link) {
  for (Proxy* p : proxies_) p->reset(link);
}
void ProxyGroup::unreachable(const std::string& link, bool on) {
  for (Proxy* p : proxies_) p->unreachable(link, on);
}

void ProxyGroup::refuse(const std::string& link, bool on) {
  for (Proxy* p : proxies_) p->refuse(link, on);
}
Proxy::Stats ProxyGroup::stats(const std::string& link) const {
  Proxy::Stats sum;
  for (const Proxy* p : proxies_) add_stats(sum, p->stats(link));
  return sum;
}

}  // namespace dlock::tools
