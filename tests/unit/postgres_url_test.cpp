#include <gtest/gtest.h>

#include <map>

#include "postgres/schema.hpp"
#include "postgres/url.hpp"

namespace dlock::postgres {
namespace {

std::map<std::string, std::string> params(const PgUrl& c) {
  return {c.connection.params.begin(), c.connection.params.end()};
}

TEST(PostgresUrl, FieldsGoToLibpqAndThePasswordStaysOutOfTheDescription) {
  auto c = parse_postgres_url(
      "postgres://app:s%40cret@db.example:6543/orders?sslmode=verify-full&sslrootcert=/etc/"
      "ca.pem&table=my_locks&schema=ops");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto p = params(*c);
  EXPECT_EQ(p["user"], "app");
  EXPECT_EQ(p["password"], "s@cret");
  EXPECT_EQ(p["host"], "db.example");
  EXPECT_EQ(p["port"], "6543");
  EXPECT_EQ(p["dbname"], "orders");
  EXPECT_EQ(p["sslmode"], "verify-full");
  EXPECT_EQ(p["sslrootcert"], "/etc/ca.pem");
  EXPECT_EQ(c->table.table, "my_locks");
  EXPECT_EQ(c->table.qualified(), "ops.my_locks");
  EXPECT_EQ(c->connection.describe, "postgres://app@db.example:6543/orders");
  auto v6 = parse_postgres_url("postgresql://[::1]/x");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(params(*v6)["host"], "::1");
  EXPECT_EQ(params(*v6)["user"], "postgres");
  EXPECT_EQ(v6->table.qualified(), "public.dlock_locks") << "one schema, never search_path";
}

TEST(PostgresUrl, BadOnesNameWhatIsWrong) {
  struct Case {
    const char* url;
    const char* says;
  } const cases[] = {
      {"postgres://", "expected"},
      {"postgres://h:0/db", "port"},
      {"postgres://h:99999/db", "port"},
      {"postgres://[::1/db", "'['"},
      {"postgres://h/db?sslmode=sometimes", "sslmode"},
      {"postgres://h/db?table=Locks", "table"},
      {"postgres://h/db?table=a;drop", "table"},
      {"postgres://h/db?schema=a.b", "schema"},
      {"postgres://h/db?schema=", "schema"},
      {"postgres://h/db?frobnicate=1", "unknown parameter 'frobnicate'"},
      {"postgres://u:%zz@h/db", "percent"},
  };
  for (const Case& c : cases) {
    auto r = parse_postgres_url(c.url);
    ASSERT_FALSE(r.ok()) << c.url;
    EXPECT_EQ(r.status().code(), Errc::invalid_argument) << c.url;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << c.url << ": " << r.status().message();
  }
}

// The payload _line_settle builds: chr(31) 'h' fence ':' lease ':' grant ':'
// owner bytes ':' owner name (a bigint grant prints negative past 2^63).
TEST(PostgresHandOver, PayloadsParseAndPlainNamesDoNot) {
  HandOverPayload h;
  ASSERT_TRUE(parse_hand_over("\x1fh42:30000:7:5:a:b:cjobs:1", h));
  EXPECT_EQ(h.fence, 42u);
  EXPECT_EQ(h.lease_ms, 30000u);
  EXPECT_EQ(h.grant, 7u);
  EXPECT_EQ(h.owner, "a:b:c");
  EXPECT_EQ(h.name, "jobs:1");
  ASSERT_TRUE(parse_hand_over("\x1fh1:500:-1:1:ox", h));
  EXPECT_EQ(h.grant, ~std::uint64_t{0});
  EXPECT_EQ(h.name, "x");
  EXPECT_FALSE(parse_hand_over("jobs", h));
  EXPECT_FALSE(parse_hand_over("\x1fh1:9:2:9:short", h));  // owner longer than the rest
  EXPECT_FALSE(parse_hand_over("\x1fh1:9:2:3:own", h));    // no name
  EXPECT_FALSE(parse_hand_over("\x1fhx:9:2:3:ownname", h));
  EXPECT_FALSE(parse_hand_over("\x1fh1:2:3:own", h)) << "a version-3 payload (no lease) is not taken for one";
}

}  // namespace
}  // namespace dlock::postgres
