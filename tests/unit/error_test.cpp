#include "dlock/error.hpp"

#include <gtest/gtest.h>

namespace dlock {
namespace {

TEST(Error, NextStepFollowsTheRetryRule) {
  EXPECT_EQ(next_step(Errc::ok), NextStep::none);
  EXPECT_EQ(next_step(Errc::unavailable), NextStep::retry);
  EXPECT_EQ(next_step(Errc::busy), NextStep::retry);
  EXPECT_EQ(next_step(Errc::timeout), NextStep::retry);
  EXPECT_EQ(next_step(Errc::outcome_unknown), NextStep::unknown);
  EXPECT_EQ(next_step(Errc::in_doubt), NextStep::unknown) << "a transaction that may commit: never resubmit";
  for (Errc c : {Errc::invalid_argument, Errc::auth_failed, Errc::tls_failed, Errc::wrong_type, Errc::not_owner,
                 Errc::not_held, Errc::permission_denied, Errc::precondition_failed, Errc::aborted})
    EXPECT_EQ(next_step(c), NextStep::give_up) << to_string(c);
  EXPECT_EQ(next_step(Errc::lease_lost), NextStep::restart) << "re-acquire and redo the work";
  EXPECT_EQ(to_string(NextStep::restart), "restart");
  EXPECT_EQ(to_string(Errc::precondition_failed), "precondition_failed");
  EXPECT_EQ(to_string(Errc::aborted), "aborted");
  EXPECT_EQ(to_string(Errc::in_doubt), "in_doubt");
}

TEST(Error, StdErrorCodeIntegration) {
  std::error_code ec = Errc::outcome_unknown;
  EXPECT_EQ(ec.category().name(), std::string("dlock"));
  EXPECT_EQ(ec.message(), "outcome_unknown");
  EXPECT_EQ(ec, make_error_code(Errc::outcome_unknown));
}

TEST(Error, ResultHoldsValueOrThrowsOnAccess) {
  Result<int> good(7);
  EXPECT_TRUE(good.ok());
  EXPECT_EQ(good.value(), 7);
  Result<int> bad(Errc::wrong_type, "WRONGTYPE");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), Errc::wrong_type);
  try {
    (void)bad.value();
    FAIL() << "value() of a failed Result must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::wrong_type);
    EXPECT_EQ(e.next_step(), NextStep::give_up);
    EXPECT_NE(std::string(e.what()).find("WRONGTYPE"), std::string::npos);
  }
}

TEST(Error, FailedResultNeverLooksOk) {
  Result<int> r{Status()};  // a caller bug: no code given
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::server_error);
}

}  // namespace
}  // namespace dlock
