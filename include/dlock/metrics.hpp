// dlock/metrics.hpp: what a client sees, for monitoring, in the Prometheus
// text exposition format (version 0.0.4: what Prometheus scrapes, and what
// the node exporter's textfile collector reads). No dependency: the text is
// written here.
//
//   // A /metrics handler of the service:
//   std::string body = dlock::to_prometheus(client.stats());
//   // served with Content-Type: text/plain; version=0.0.4; charset=utf-8
//
//   // Or pushed every 15 s, on the client's I/O thread (must not block):
//   dlock::ClientOptions options;
//   options.stats_interval = std::chrono::seconds(15);
//   options.on_stats = [](const dlock::ClientStats& s) { store(dlock::to_prometheus(s)); };
//
// The families (names with the default prefix "dlock_"; every sample is
// labelled backend="redis" etc. (ClientStats::backend), then the caller's
// PrometheusOptions::labels; all are counters unless said otherwise):
//   dlock_grants_total                 acquire calls granted (re-entries too)
//   dlock_late_grants_total            grants whose reply came after the lease's validity (undone)
//   dlock_busy_answers_total           attempts answered "held by another owner"
//   dlock_waits_total{outcome}         waits ended: outcome="granted", "timeout", "error"
//   dlock_wait_seconds                 histogram of those waits' durations (buckets:
//                                      ClientStats::kWaitBucketsMs, as seconds)
//   dlock_wakeups_total                waiters woken by a release notification
//   dlock_leases_held                  gauge: distinct (name, owner) held now
//   dlock_leases_lost_total{reason}    losses: reason="expired", "taken", "unreachable", "wrong_type"
//   dlock_renewals_total               lease renewals confirmed
//   dlock_renewal_failures_total       lease renewals not confirmed (retried)
//   dlock_renewal_round_trips_total    renewal batches sent
//   dlock_outcome_unknown_total        requests whose reply was lost
//   dlock_release_failures_total       failed releases nobody could be told about
//   dlock_commands_sent_total          commands sent to the server(s)
//   dlock_reconnects_total             connections re-established
// See ClientStats (dlock/client.hpp) for what each counts exactly.
#ifndef DLOCK_METRICS_HPP_
#define DLOCK_METRICS_HPP_

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/export.hpp"

namespace dlock {

// Label names and values, in order.
using PrometheusLabels = std::vector<std::pair<std::string, std::string>>;

struct DLOCK_EXPORT PrometheusOptions {
  // Put before every metric name. Must match [a-zA-Z_:][a-zA-Z0-9_:]* or be
  // empty. Default: "dlock_".
  std::string prefix = "dlock_";
  // Added to every sample, after the backend label: e.g. {{"client",
  // "orders"}} to tell apart two clients of one backend. Names must match
  // [a-zA-Z_][a-zA-Z0-9_]*, must not begin with "__", and must not be one a
  // family uses (backend, outcome, reason, le, lock). Values are any text;
  // bytes that are not UTF-8 become U+FFFD.
  PrometheusLabels labels;
};

// The exposition of one client's counters: a # HELP and a # TYPE line per
// family, then its samples; ends with a newline. Throws dlock::Error
// (invalid_argument) for a bad prefix or label name.
DLOCK_EXPORT std::string to_prometheus(const ClientStats& stats, const PrometheusOptions& options = {});

// Several clients in one exposition (the format wants each family once,
// its samples together): each client's samples carry its own labels, after
// backend and PrometheusOptions::labels. Throws dlock::Error
// (invalid_argument) as above, or when two clients' label sets are the
// same (their samples would collide).
struct DLOCK_EXPORT LabeledStats {
  ClientStats stats;
  PrometheusLabels labels;
};
DLOCK_EXPORT std::string to_prometheus(std::span<const LabeledStats> clients, const PrometheusOptions& options = {});

// Gauges of locks as Client::inspect() saw them (e.g. `dlock status` for a
// textfile collector), each sample labelled lock="NAME" after
// PrometheusOptions::labels (a name's bytes that are not UTF-8 become U+FFFD):
//   dlock_lock_held                    1 when held, 0 when free
//   dlock_lock_fence                   the current grant's fence (0: free)
//   dlock_lock_remaining_seconds       lease left (0: free, or kept by a session)
//   dlock_lock_holders                 grants held now (LockInfo::holders)
//   dlock_lock_waiters                 waiters, where the store knows them (locks
//                                      whose LockInfo::waiters is nullopt have no sample)
// Throws dlock::Error (invalid_argument) as above, or for a name given twice.
struct DLOCK_EXPORT InspectedLock {
  std::string name;
  LockInfo info;
};
DLOCK_EXPORT std::string locks_to_prometheus(std::span<const InspectedLock> locks,
                                             const PrometheusOptions& options = {});

}  // namespace dlock

#endif  // DLOCK_METRICS_HPP_
