// The lock store `dlock` uses when neither --url nor DLOCK_URL names one: a
// SQLite file of the user's, so `dlock run` works on one machine with no
// server at all.
#ifndef DLOCK_TOOLS_DLOCK_DEFAULT_URL_HPP_
#define DLOCK_TOOLS_DLOCK_DEFAULT_URL_HPP_

#include <string>

namespace dlock::cli {

// $XDG_STATE_HOME/dlock/locks.db, else $HOME/.local/state/dlock/locks.db,
// else /tmp/dlock-UID/locks.db.
std::string default_db_path();

// sqlite://<default_db_path()>; what --help shows.
std::string default_url();

// Creates the directory of the default file (mode 0700) if missing; an
// error message, or empty.
std::string prepare_default_dir();

}  // namespace dlock::cli

#endif  // DLOCK_TOOLS_DLOCK_DEFAULT_URL_HPP_
