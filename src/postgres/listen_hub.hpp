// One LISTEN connection per process and server, shared by the process's
// PostgreSQL clients. Before PostgreSQL 19 a NOTIFY signals every backend
// of the database that LISTENs to any channel, and each one reads the
// queue: with a connection per client, a crowd of 200 waiting clients made
// every hand-off wake 200 server processes. Shared, it wakes one per
// process, and a waiting client keeps no LISTEN connection of its own.
//
// The hub runs its connection on a thread of its own; each client joins
// with its loop, and its callbacks run there. The hub keeps the channels
// each client listens to and LISTENs to them again after a reconnect.
#ifndef DLOCK_POSTGRES_LISTEN_HUB_HPP_
#define DLOCK_POSTGRES_LISTEN_HUB_HPP_

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "dlock/error.hpp"
#include "postgres/pg_connection.hpp"

namespace dlock::postgres {

class ListenHub {
 public:
  // A joined client: where its callbacks run, and what they are.
  class Sink {
   public:
    using Notify = std::function<void(const std::string& channel, const std::string& payload)>;
    using State = std::function<void(Status)>;
    Sink(boost::asio::io_context& io, Notify notify, State state)
        : io_(&io), notify_(std::move(notify)), state_(std::move(state)) {}

   private:
    friend class ListenHub;
    // Runs f on the client's loop, unless it left (then never).
    void post(std::shared_ptr<Sink> self, std::function<void(Sink&)> f);

    std::mutex mu_;
    boost::asio::io_context* io_;  // guarded by mu_: null once left
    bool live_ = true;             // on the client's loop
    Notify notify_;
    State state_;
  };

  // The hub of `config`'s server and login (one per distinct config in the
  // process; made on first use, gone with its last client). `backoff_*`:
  // the reconnects' (the first client's are kept).
  static std::shared_ptr<ListenHub> of(const PgConfig& config, std::chrono::milliseconds backoff_min,
                                       std::chrono::milliseconds backoff_max);
  ~ListenHub();
  ListenHub(const ListenHub&) = delete;
  ListenHub& operator=(const ListenHub&) = delete;

  // Joins a client. `notify`: a NOTIFY on one of its channels. `state`: an
  // error once the connection dropped (releases may have been missed);
  // ok once every one of its channels is LISTENed to again.
  std::shared_ptr<Sink> join(boost::asio::io_context& io, Sink::Notify notify, Sink::State state);
  // LISTENs to `channel` for the client; `done` with the LISTEN's outcome.
  void listen(const std::shared_ptr<Sink>& sink, std::string channel, std::function<void(Status)> done);
  // UNLISTENs once no client of the hub listens to it.
  void unlisten(const std::shared_ptr<Sink>& sink, std::string channel);
  // On the client's loop: no callback of the client runs after it.
  void leave(const std::shared_ptr<Sink>& sink);

  std::uint64_t reconnects() const { return reconnects_.load(std::memory_order_relaxed); }

 private:
  struct Impl;
  ListenHub(PgConfig config, std::chrono::milliseconds backoff_min, std::chrono::milliseconds backoff_max);

  std::unique_ptr<Impl> impl_;
  std::atomic<std::uint64_t> reconnects_{0};
};

}  // namespace dlock::postgres

#endif  // DLOCK_POSTGRES_LISTEN_HUB_HPP_
