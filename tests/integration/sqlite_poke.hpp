// Statements run on a SQLite lock file directly, as another program would.
#ifndef DLOCK_TESTS_INTEGRATION_SQLITE_POKE_HPP_
#define DLOCK_TESTS_INTEGRATION_SQLITE_POKE_HPP_

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>

namespace dlock::test {

inline void poke(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  const std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << msg;
}

// The first column of the first row of `sql`; -1 if none.
inline long long query_number(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) return -1;
  sqlite3_stmt* st = nullptr;
  long long v = -1;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

}  // namespace dlock::test

#endif  // DLOCK_TESTS_INTEGRATION_SQLITE_POKE_HPP_
