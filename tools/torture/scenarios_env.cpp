// Faults in a backend's surroundings rather than on its wire: a server's
// settings, the SQLite file under the holder's feet, holders in other pid
// and time namespaces, a stopped `dlock run`. Each states its expectation
// before it runs, like every scenario of the catalogue.
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <type_traits>

#include "run_ctx.hpp"
#include "scenarios_common.hpp"

namespace torture {
namespace {

namespace fs = std::filesystem;
using ms = std::chrono::milliseconds;

// ---- PostgreSQL settings -----------------------------------------------------

std::string dlock_rows(PgProc& pg) { return query_or_error(pg, "SELECT count(*) FROM public.dlock_locks"); }

// With the server's synchronous_commit off, a commit is acknowledged before
// its WAL is flushed: the server is stopped with no shutdown right after a
// grant, before the WAL writer's next flush, and restarted.
void pg_crash_after_grant(RunCtx& c) {
  c.idle(ms(500));
  while (c.running()) {
    const int w = c.holder_granted_after(mono_ns());
    if (w < 0) break;
    PgProc& pg = *c.postgres();
    const int old_pid = pg.postmaster_pid();
    const std::int64_t at = mono_ns();
    const auto granted_ms_ago = (at - c.slots->at(w).since_ns.load()) / 1'000'000;
    pg.restart("immediate");
    c.fault_start("pg-crash", "server",
                  "pg_ctl stop -m immediate of postmaster pid " + std::to_string(old_pid) + " " +
                      std::to_string(granted_ms_ago) + " ms after " + c.name(w) +
                      "'s grant (synchronous_commit=off), then start: crash recovery",
                  at);
    c.fault_end("pg-crash", "server",
                "postmaster pid " + std::to_string(pg.postmaster_pid()) + ", " + dlock_rows(pg) +
                    " rows in public.dlock_locks after " + std::to_string((mono_ns() - at) / 1'000'000) + " ms");
    c.idle(ms(c.uniform(1000, 2000)));
  }
}

// A second role whose search_path finds a schema of its own name first
// ("$user", public), as a shared server's users often have.
void pg_make_role_with_schema(RunCtx& c) {
  PgProc& pg = *c.postgres();
  pg.query("CREATE ROLE alice LOGIN SUPERUSER");
  pg.query("CREATE SCHEMA alice AUTHORIZATION alice");
  const std::string path = pg.query("SELECT setting FROM pg_settings WHERE name = 'search_path'");
  c.fault_start(
      "search-path", "all",
      "odd workers connect as role alice (schema alice exists; search_path " + path + "), even workers as postgres");
  c.fault_end("search-path", "all", "set before the workers started");
}

// Contention; at the end, which schemas hold a table named dlock_locks.
void pg_two_roles(RunCtx& c) {
  idle_to_end(c);
  const std::string where =
      query_or_error(*c.postgres(),
                     "SELECT string_agg(n.nspname, ',' ORDER BY n.nspname) FROM pg_class t "
                     "JOIN pg_namespace n ON n.oid = t.relnamespace WHERE t.relname = 'dlock_locks'");
  c.fault_start("search-path", "all", "schemas with a table dlock_locks at the end: " + where);
  c.fault_end("search-path", "all", "read");
}

// ---- SQLite file -------------------------------------------------------------

std::string inode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? std::to_string(st.st_ino) : "none";
}

// The lock file deleted (rm locks.db*) or replaced by a fresh empty one
// (moved over it) while a worker holds the lock, every 2-3 leases; then the
// other workers are restarted, as new processes of an application would
// come and open the path.
void sqlite_file_fault(RunCtx& c, bool replace) {
  const std::string db = c.procs.at(0).args.sqlite_path;
  const std::string kind = replace ? "file-replace" : "file-delete";
  c.idle(ms(500));
  while (c.running()) {
    const int w = c.find_worker(Phase::holding, ms(1000));
    if (w >= 0) {
      const std::string before = inode_of(db);
      const std::int64_t at = mono_ns();
      std::error_code ec;
      if (replace) {
        { std::ofstream fresh(db + ".fresh"); }
        fs::rename(db + ".fresh", db, ec);
      } else {
        fs::remove(db, ec);
      }
      int gone = 0;
      for (const char* suffix : {"-wal", "-shm", "-journal"}) gone += fs::remove(db + suffix, ec) ? 1 : 0;
      c.fault_start(kind, "server",
                    std::string(replace ? "a fresh empty file moved over " : "unlinked ") + db + " (inode " + before +
                        " -> " + inode_of(db) + ") and " + std::to_string(gone) + " side files while " + c.name(w) +
                        " held the lock",
                    at);
      c.fault_end(kind, "server", "done");
      // Processes that start now open the path anew; the others may keep
      // the old file open. Restart every worker but the holder.
      for (int o = 0; o < c.workers(); ++o)
        if (o != w) c.kill(o);
    }
    c.idle(ms(c.uniform(2 * c.ttl_ms(), 3 * c.ttl_ms())));
  }
}

// ---- namespaces --------------------------------------------------------------

// Odd workers run in a time namespace whose CLOCK_BOOTTIME is 100000 s ahead.
std::vector<std::string> in_time_namespace(RunCtx&, int w) {
  if (w % 2 == 0) return {};
  return {"unshare", "--time", "--boottime", "100000", "--fork", "--kill-child"};
}

// Odd workers run in a pid namespace of their own without mounting /proc:
// their getpid() is made equal to the pid of a decoy process of the
// verifier (ns_last_pid inside the namespace), so a holder that takes
// /proc/<getpid()> for itself records the decoy.
std::vector<std::string> in_pid_namespace(RunCtx& c, int w) {
  if (w % 2 == 0) return {};
  const int decoy = c.spawn_decoy(w);
  return {"unshare",
          "--pid",
          "--fork",
          "--kill-child",
          "sh",
          "-c",
          "echo $(($0 - 1)) > /proc/sys/kernel/ns_last_pid && \"$@\"; exit $?",
          std::to_string(decoy)};
}

// Kills the decoy of a holder in a pid namespace: the holder lives on.
void kill_decoys(RunCtx& c) {
  c.idle(ms(500));
  while (c.running()) {
    // A holder in a pid namespace (odd workers), for up to two leases: the
    // first holder found was even in every round of a short run often
    // enough to leave a run without a fault.
    int w = -1;
    const std::int64_t give_up = mono_ns() + 2 * c.ttl_ms() * 1'000'000;
    while (c.running() && mono_ns() < give_up) {
      const int h = c.find_worker(Phase::holding, ms(200));
      if (h >= 0 && c.procs[h].decoy > 0) {
        w = h;
        break;
      }
      c.idle(ms(20));
    }
    if (w >= 0) {
      const int decoy = c.procs[w].decoy;
      const std::int64_t at = mono_ns();
      c.kill_decoy(w);
      c.fault_start("decoy-kill", "server",
                    "SIGKILL pid " + std::to_string(decoy) + " (the getpid() of " + c.name(w) +
                        " inside its pid namespace) while " + c.name(w) + " (pid " + std::to_string(c.worker_pid(w)) +
                        ") held the lock",
                    at);
      c.fault_end("decoy-kill", "server", "reaped");
    }
    c.idle(ms(c.uniform(c.ttl_ms(), 2 * c.ttl_ms())));
  }
}

// ---- ZooKeeper ---------------------------------------------------------------

// Whether this build's ensemble can route a server's peer links through
// proxies (tools/common/zk_ensemble); without, the scenario is left out.
constexpr bool kZkPeerRoutes = std::is_constructible_v<dlock::tools::ZooKeeperEnsemble, int, const std::string&,
                                                       std::function<int(int, int, int)>>;

// A follower cut from its leader while a client of it holds the lock: the
// proxies of server 0's quorum and election links freeze (what was sent
// arrives on healing) while its client port stays up, for 3 session
// timeouts. Skipped while server 0 leads.
void zk_follower_partition(RunCtx& c) {
  c.idle(ms(1000));
  while (c.running()) {
    auto& zk = *c.zookeeper();
    const int leader = zk.leader();
    const int w = holder_of_server0(c);
    if (leader < 0 || w < 0) {  // no leader known yet (an election), or nobody holds
      c.idle(ms(200));
      continue;
    }
    // Server 0 is mostly a follower; when it leads (some elections make it
    // so), the same cut isolates a leader from its quorum: it answers its
    // clients' syncs itself until it steps down, while the other two elect
    // a new leader. Skipping that case made runs with no fault at all.
    const std::string role =
        leader == 0 ? "server 0 leads: a leader cut from its quorum" : "leader: server " + std::to_string(leader);
    const auto held = freeze_peer_links(
        c, ms(3 * c.ttl_ms()), "follower-partition", "server0",
        "proxies freeze server 0's quorum and election links (" + role + ") while " + c.name(w) +
            (w % 2 == 1 ? ", a client of server 0 only," : ", a client of servers 1-2,") + " held the lock");
    const bool serving = zk.wait_serving(ms(10000));
    c.fault_end("follower-partition", "server0",
                "healed; " + std::to_string(held) + " chunks held meanwhile; ensemble " +
                    (serving ? "serving" : "NOT serving"));
    c.idle(ms(c.uniform(1500, 2500)));
  }
}

// ---- the CLI -----------------------------------------------------------------

// SIGTSTP (Ctrl-Z's signal) to the holder's `dlock run` process only, as
// the terminal sends it to dlock's process group and not to CMD's; SIGCONT
// after 1.5-3 leases.
void tstp_dlock_run(RunCtx& c) {
  c.idle(ms(500));
  while (c.running()) {
    const int w = c.holder_granted_after(mono_ns());  // early in its hold
    const int pid = w >= 0 ? c.slots->at(w).child_pid.load() : 0;
    if (pid > 0) {
      const std::int64_t at = mono_ns();
      ::kill(pid, SIGTSTP);
      char state = '?';
      for (int i = 0; i < 100 && (state = proc_state(pid)) != 'T'; ++i) c.idle(ms(1));
      const auto d = ms(c.uniform(c.ttl_ms() * 3 / 2, c.ttl_ms() * 3));
      c.fault_start("tstp", c.name(w),
                    "SIGTSTP to dlock run pid " + std::to_string(pid) + " of " + c.name(w) + " for " +
                        std::to_string(d.count()) + " ms; state " + std::string(1, state) + " in /proc/" +
                        std::to_string(pid) + "/stat; CMD not signalled",
                    at);
      c.idle(d);
      ::kill(pid, SIGCONT);
      c.fault_end("tstp", c.name(w), "SIGCONT");
    }
    c.idle(ms(c.uniform(500, 1500)));
  }
}

// ---- the catalogue ------------------------------------------------------------

void add_postgres_setting_scenarios(std::vector<Scenario>& v) {
  {
    Scenario& s =
        add(v, "pg-async-commit-crash",
            "PostgreSQL run with synchronous_commit=off, stopped with no shutdown right after a grant, restarted",
            pg_crash_after_grant,
            safe(1,
                 "no overlap: a grant is durable before it is reported, whatever the server's "
                 "synchronous_commit"),
            kPostgres);
    s.server_settings = {"synchronous_commit=off"};
    s.think_ms = 1000;  // holders that hold across the crash
  }
  {
    Scenario& s = add(v, "pg-search-path",
                      "PostgreSQL: two roles, one with a schema of its own name first on its search_path", pg_two_roles,
                      safe(1, "no overlap: every role finds the same lock table, whatever its search_path"), kPostgres);
    s.prepare = pg_make_role_with_schema;
    s.user = [](int w) { return w % 2 == 0 ? std::string() : std::string("alice"); };
  }
}

void add_sqlite_scenarios(std::vector<Scenario>& v) {
  for (bool replace : {false, true}) {
    Scenario& s = add(
        v, replace ? "sqlite-file-replace" : "sqlite-file-delete",
        replace ? "SQLite: a fresh empty file moved over the lock file while a lock is held; the other workers restart"
                : "SQLite: the lock file and its side files deleted (rm locks.db*) while a lock is held; the other "
                  "workers restart",
        [replace](RunCtx& c) { sqlite_file_fault(c, replace); },
        safe(1,
             "no overlap: the holder notices its file is gone and reports the loss; fences restart "
             "with the new file (documented)"),
        kSqlite);
    s.dlock.fence_anomaly_allowed = true;
    s.think_ms = 500;
  }
  add(v, "sqlite-time-ns", "SQLite: odd workers in a time namespace (CLOCK_BOOTTIME +100000 s), contention",
      idle_to_end, safe(0, "no overlap: a holder in another time namespace is as alive as one in this one"), kSqlite)
      .wrap = in_time_namespace;
  {
    Scenario& s = add(v, "sqlite-pid-ns",
                      "SQLite: odd workers in pid namespaces without their own /proc; an unrelated process with the "
                      "holder's namespace pid is killed while it holds",
                      kill_decoys,
                      safe(1,
                           "no overlap: a holder is identified by itself, not by /proc/<getpid()>; one that cannot "
                           "be identified is freed only by its lease"),
                      kSqlite);
    s.wrap = in_pid_namespace;
    s.think_ms = 500;
  }
}

void add_zk_follower_scenario(std::vector<Scenario>& v) {
  Scenario& s = add(v, "zk-follower-partition",
                    "ZooKeeper: server 0 cut from its leader (quorum and election links frozen, client port up) while "
                    "a client of server 0 only holds the lock",
                    zk_follower_partition,
                    safe(1,
                         "no overlap: a holder on a partitioned follower stops believing before the leader "
                         "grants the lock to another"),
                    kZooKeeper);
  s.peer_proxies = true;
  // Holders that hold 1.5-3 leases after the grant: across the cut and
  // the leader's expiry of their session.
  s.think_min_leases = 1.5;
  s.think_leases = 3.0;
  s.dlock.min_grants = 3;
}

void add_cli_scenario(std::vector<Scenario>& v) {
  Scenario& s =
      add(v, "cli-tstp", "dlock run: SIGTSTP to the holder's dlock (not to CMD) for 1.5-3 leases, then SIGCONT",
          tstp_dlock_run, safe(1, "no overlap: a stopped dlock stops its CMD with it, or keeps renewing"), kCli);
  // CMD works on for 1.5-2.5 leases after its grant: past the lease the
  // stopped dlock no longer renews.
  s.think_min_leases = 1.5;
  s.think_leases = 2.5;
  s.dlock.min_grants = 2;
}

}  // namespace

void add_environment_scenarios(std::vector<Scenario>& v) {
  add_postgres_setting_scenarios(v);
  add_sqlite_scenarios(v);
  if (kZkPeerRoutes) add_zk_follower_scenario(v);
  add_cli_scenario(v);
}

}  // namespace torture
