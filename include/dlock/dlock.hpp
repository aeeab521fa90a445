// dlock/dlock.hpp: everything of the blocking and callback API.
//
// Start with client.hpp (connecting, URLs, acquire), then mutex.hpp (the
// std-compatible Mutex and with_lock), the recipes (shared_mutex.hpp,
// semaphore.hpp, election.hpp; fair locks are LockOptions::fair) and lease.hpp (fencing tokens and the
// loss signal). error.hpp has the one error type; options.hpp the knobs;
// metrics.hpp renders Client::stats() for Prometheus.
// asio.hpp (opt-in, needs Boost.Asio) adds Asio completion tokens.
#ifndef DLOCK_DLOCK_HPP_
#define DLOCK_DLOCK_HPP_

#include "dlock/client.hpp"
#include "dlock/election.hpp"
#include "dlock/error.hpp"
#include "dlock/lease.hpp"
#include "dlock/metrics.hpp"
#include "dlock/mutex.hpp"
#include "dlock/options.hpp"
#include "dlock/semaphore.hpp"
#include "dlock/shared_mutex.hpp"
#include "dlock/version.hpp"

#endif  // DLOCK_DLOCK_HPP_
