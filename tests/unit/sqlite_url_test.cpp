#include <gtest/gtest.h>

#include "sqlite/url.hpp"

namespace dlock::sqlite {
namespace {

TEST(SqliteUrl, AnAbsolutePathAfterAnEmptyHost) {
  auto c = parse_sqlite_url("sqlite:///var/lib/app/locks.db");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->path, "/var/lib/app/locks.db");
  EXPECT_EQ(c->busy.count(), 5000);
  auto spaced = parse_sqlite_url("sqlite:///tmp/my%20locks.db?busy_timeout_ms=250");
  ASSERT_TRUE(spaced.ok());
  EXPECT_EQ(spaced->path, "/tmp/my locks.db");
  EXPECT_EQ(spaced->busy.count(), 250);
}

// Four slashes (SQLAlchemy's absolute form, or "sqlite:///" put before an
// absolute path) and doubled slashes inside name the same file, shown
// once-slashed (a missing directory was reported as //tmp/...).
TEST(SqliteUrl, ARunOfSlashesIsOne) {
  auto four = parse_sqlite_url("sqlite:////tmp/dlock/locks.db");
  ASSERT_TRUE(four.ok()) << four.status().to_string();
  EXPECT_EQ(four->path, "/tmp/dlock/locks.db");
  auto inside = parse_sqlite_url("sqlite:///var//lib///app/locks.db");
  ASSERT_TRUE(inside.ok()) << inside.status().to_string();
  EXPECT_EQ(inside->path, "/var/lib/app/locks.db");
}

TEST(SqliteUrl, BadOnesNameWhatIsWrong) {
  struct Case {
    const char* url;
    const char* says;
  } const cases[] = {
      {"sqlite://relative/locks.db", "absolute"},
      {"sqlite://", "absolute"},
      {"sqlite:///tmp/", "directory"},
      {"sqlite:///tmp/a%zz.db", "percent"},
      {"sqlite:///tmp/a.db?busy_timeout_ms=0", "busy_timeout_ms"},
      {"sqlite:///tmp/a.db?busy_timeout_ms=soon", "busy_timeout_ms"},
      {"sqlite:///tmp/a.db?mode=ro", "unknown parameter 'mode'"},
  };
  for (const Case& c : cases) {
    auto r = parse_sqlite_url(c.url);
    ASSERT_FALSE(r.ok()) << c.url;
    EXPECT_EQ(r.status().code(), Errc::invalid_argument) << c.url;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << c.url << ": " << r.status().message();
  }
}

}  // namespace
}  // namespace dlock::sqlite
