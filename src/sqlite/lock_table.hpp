// The lock table in a SQLite file: its schema, and the rows of held locks as
// core/lock_row.hpp sees them. Every call runs inside the caller's
// WriteTransaction (or a read), on the connection's one thread.
//
//   dlock_meta(key, value)   'schema' = kSchemaVersion, 'fence' = the last
//                            fence granted (shared by every name)
//   dlock_locks(name, ...)   one row per name ever locked; owner NULL = free.
//                            expires_ms is on the host's boot clock of boot_id;
//                            pid, pid_start, pid_ns name the holding process;
//                            `releases` counts releases (waiters compare it).
#ifndef DLOCK_SQLITE_LOCK_TABLE_HPP_
#define DLOCK_SQLITE_LOCK_TABLE_HPP_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend.hpp"
#include "core/lock_row.hpp"
#include "sqlite/database.hpp"
#include "sqlite/host.hpp"

namespace dlock::sqlite {

inline constexpr std::int64_t kSchemaVersion = 1;

struct StoredRow {
  detail::LockRow row;  // meaningful when owner is set
  bool has_owner = false;
  std::string boot;
  ProcessId holder;
  std::int64_t releases = 0;
};

class LockTable {
 public:
  // Creates the schema if missing (in its own transaction) and checks its
  // version: wrong_type if the file has another dlock schema.
  static Result<std::unique_ptr<LockTable>> open(Database& db);

  Result<std::optional<StoredRow>> read(const std::string& name);
  // The row if it still holds at `now_ms`: owner set, this boot, not
  // expired, holder not known dead.
  static const detail::LockRow* live(const std::optional<StoredRow>& stored, std::int64_t now_ms);

  // Stores `row` as held by this process.
  Status write(const std::string& name, const detail::LockRow& row);
  Status set_expiry(const std::string& name, std::int64_t expires_ms);
  // Frees the name and counts a release.
  Status free(const std::string& name);
  Result<std::uint64_t> next_fence();
  Result<std::uint64_t> last_fence();
  Result<std::int64_t> releases(const std::string& name);
  // The locks `holder` holds in this file (expired or not).
  Result<std::vector<detail::HoldRef>> held_by(const ProcessId& holder);

 private:
  explicit LockTable(Database& db) : db_(db) {}
  Status prepare_all();
  Database& db_;
  Statement read_, write_, expiry_, free_, bump_fence_, fence_, releases_, held_by_;
};

}  // namespace dlock::sqlite

#endif  // DLOCK_SQLITE_LOCK_TABLE_HPP_
