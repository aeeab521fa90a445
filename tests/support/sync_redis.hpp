// A plain blocking Redis client for tests (hiredis), independent of the
// library under test: it reads and writes the protected resources and looks
// at the lock keys from the outside.
#ifndef DLOCK_TESTS_SUPPORT_SYNC_REDIS_HPP_
#define DLOCK_TESTS_SUPPORT_SYNC_REDIS_HPP_

#include <memory>
#include <string>
#include <vector>

namespace dlock::test {

class SyncRedis {
 public:
  // Plain TCP only. Throws std::runtime_error if it cannot connect.
  explicit SyncRedis(int port, const std::string& password = {});
  ~SyncRedis();
  SyncRedis(const SyncRedis&) = delete;
  SyncRedis& operator=(const SyncRedis&) = delete;

  // Runs one command; returns the reply as text (integers in decimal, nil as
  // "(nil)", arrays joined by '\n'). Error replies come back as "ERR ..." text.
  std::string cmd(const std::vector<std::string>& args);
  long long integer(const std::vector<std::string>& args);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlock::test

#endif  // DLOCK_TESTS_SUPPORT_SYNC_REDIS_HPP_
