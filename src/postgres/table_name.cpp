#include "postgres/table_name.hpp"

namespace dlock::postgres {

std::string TableName::qualified() const { return schema + "." + table; }

bool valid_table_name(const std::string& table) {
  if (table.empty() || table.size() > 40) return false;
  if (!(table[0] == '_' || (table[0] >= 'a' && table[0] <= 'z'))) return false;
  for (char c : table)
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  return true;
}

}  // namespace dlock::postgres
