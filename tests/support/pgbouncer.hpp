// tests/support/pgbouncer.hpp: a private PgBouncer (Debian's package) in
// front of a test's PostgreSQL, on a free loopback port, in transaction
// pooling mode with a small pool, so that a client's statements outside a
// transaction land on whichever server connection is free: what a fleet
// behind a pooler sees. Started in its own temp dir (as the postgres user
// when root: PgBouncer refuses root), stopped and removed when it goes.
#ifndef DLOCK_TESTS_SUPPORT_PGBOUNCER_HPP_
#define DLOCK_TESTS_SUPPORT_PGBOUNCER_HPP_

#include <string>

namespace dlock::test {

class PgBouncer {
 public:
  // Pools toward 127.0.0.1:`server_port`, user postgres (trust), at most
  // `pool_size` server connections per database. `discard_always`: every
  // server connection is reset (DISCARD ALL) each time a client's
  // transaction lets go of it, as some deployments configure, so that
  // nothing a session prepared outlives its statement.
  explicit PgBouncer(int server_port, int pool_size = 2, bool discard_always = false);  // throws std::runtime_error
  ~PgBouncer();
  PgBouncer(const PgBouncer&) = delete;
  PgBouncer& operator=(const PgBouncer&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& db = "postgres") const {
    return "postgres://postgres@127.0.0.1:" + std::to_string(port_) + "/" + db;
  }

 private:
  std::string dir_;
  int port_ = 0;
};

// True if PgBouncer is installed.
bool pgbouncer_available();

}  // namespace dlock::test

#endif  // DLOCK_TESTS_SUPPORT_PGBOUNCER_HPP_
