// gtest matchers for dlock's Status and Result:
//   EXPECT_THAT(client.try_acquire("x"), StatusIs(Errc::busy));
//   EXPECT_THAT(lease.release(), IsOk());
// The failure message shows the whole status ("busy: the lock is held...").
#ifndef DLOCK_TESTS_SUPPORT_STATUS_MATCHERS_HPP_
#define DLOCK_TESTS_SUPPORT_STATUS_MATCHERS_HPP_

#include <gmock/gmock.h>

#include <dlock/error.hpp>

namespace dlock::test {

inline const Status& status_of(const Status& s) { return s; }
template <class T>
Status status_of(const Result<T>& r) {
  return r.status();
}

MATCHER_P(StatusIs, code, "has code " + std::string(dlock::to_string(code))) {
  const Status s = status_of(arg);
  *result_listener << "which is " << (s.ok() ? std::string("ok") : s.to_string());
  return s.code() == code;
}

MATCHER(IsOk, "is ok") {
  const Status s = status_of(arg);
  *result_listener << "which is " << (s.ok() ? std::string("ok") : s.to_string());
  return s.ok();
}

}  // namespace dlock::test

#endif  // DLOCK_TESTS_SUPPORT_STATUS_MATCHERS_HPP_
