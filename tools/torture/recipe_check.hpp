// Checkers of the recipes (fair Mutex, SharedMutex, Semaphore, Election)
// over one run's history. Pure functions, like analysis.hpp's; analyze()
// calls them when RunInfo::recipe names a recipe.
//
// What each acquire records (Event::kind of its invoke and outcome): fair,
// shared or exclusive (rw), permit (semaphore), leader (election); the
// fence is the grant's (a leader's term). An acquire's invoke time is when
// its waiter began to arrive at the line.
//
// Line order (fair, election). A waiter A is *in the line* from
// A.invoke + J on (J = RunInfo::line_join_bound_ms, the client's command
// timeout: a serving server has answered its first request by then, or it
// was retried) until its acquire's outcome, or its death; only if the server
// was serving: it answered someone (a grant or a release that succeeded)
// within [A.invoke - 4J, A.invoke + J] (a server starting up, or stalled
// for longer, may not have counted A; faults of the server excuse the rest). Another acquire B *began after A joined*
// when B.invoke >= A.invoke + J. A is *overtaken* by B when B began after A joined and B was granted (B's ok) while A
// was still in the line, i.e. A's outcome (granted later, gave up, or no answer) or death came after B's ok. On a mutex
// that is sound: had the server granted A first, A would have held it until after its own ok, so B could not have been
// granted before A's ok. An overtake is excused when a fault could have dropped A from the line meanwhile (its lease in
// the line lapses when its retries stop): a pause, failpoint pause, partition, drop, reset, delay or late-reply of A's
// process or link, or a fault of the server (restart, stall, clock, failover...), overlapping [A.invoke, B.ok], or
// one of A's own process or link that ended less than the recovery bound (TTL + slack) before A.invoke (its client
// may still be reconnecting, or waiting for a new session, before it can join); an acquire of A with no known outcome
// (info) is excused too. The check is skipped for semaphores and read-write locks:
// several waiters granted at one release learn of it in any order, so an ok's time says nothing of the server's.
//
// rw: the generic overlap check judges conflicting holds only (a writer's
// with any other), the fence check only writers' fences (above every grant
// completed before the writer's acquire began); readers holding at once are
// counted, and a run with none proves nothing.
//
// semaphore: at no instant more than N holds (what the holders believe,
// as for the mutex's overlaps), unless a holder was paused, or the server
// faulted, during its hold (explained, as overlaps are). A permit lost with
// its holder (killed while holding, or stopped for longer than the lease
// while holding) is recovered when N other holds, none of them stopped
// during its hold, are held at once: its permit was granted again by then.
//
// election: two grants with one term; every fenced write made after a higher
// term was granted (deposed), and what the resource made of it.
#ifndef DLOCK_TORTURE_RECIPE_CHECK_HPP_
#define DLOCK_TORTURE_RECIPE_CHECK_HPP_

#include <vector>

#include "analysis.hpp"
#include "analysis_index.hpp"
#include "history.hpp"

namespace torture {

// True for the fault kinds that can drop a waiter from the line (when they
// hit its process, its link, or the server).
bool drops_from_line(const std::string& kind);

// Line order over the acquires (see above).
void check_line_order(const Index& ix, const std::vector<FaultWindow>& faults, std::int64_t join_bound_ns,
                      std::int64_t recovery_ns, std::int64_t run_end, RecipeFindings& r);

// Reads held at once: pairs, and the most at once.
void count_reader_overlaps(const std::vector<Hold>& holds, RecipeFindings& r);

// More than `permits` holds at once; permits lost with their holders.
void check_capacity(const std::vector<Hold>& holds, const std::vector<FaultWindow>& faults, unsigned permits,
                    std::int64_t ttl_ns, std::int64_t run_end, RecipeFindings& r);

// One term per leader; deposed leaders' fenced writes.
void check_election(const std::vector<Event>& events, const std::vector<Hold>& holds, RecipeFindings& r);

// All of the above that apply to info.recipe.
RecipeFindings check_recipe(const std::vector<Event>& events, const Index& ix, const std::vector<Hold>& holds,
                            const std::vector<FaultWindow>& faults, const RunInfo& info, std::int64_t run_end);

}  // namespace torture

#endif  // DLOCK_TORTURE_RECIPE_CHECK_HPP_
