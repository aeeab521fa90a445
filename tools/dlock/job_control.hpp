// `dlock run` as a shell job: CMD runs in a process group of its own (so a
// lost lock can stop all of it without stopping dlock), and gets the
// terminal while it runs in the foreground, as flock(1)'s CMD would.
//
// Stops: a stopped dlock cannot renew, so dlock never stops. A stop signal
// to dlock (SIGTSTP, SIGTTIN, SIGTTOU) stops CMD's group instead, and
// SIGCONT to dlock resumes it; the lock is kept meanwhile. When CMD's group
// stops (Ctrl-Z at the terminal), dlock takes the terminal back, so that
// Ctrl-C reaches dlock, which then ends CMD.
#ifndef DLOCK_TOOLS_DLOCK_JOB_CONTROL_HPP_
#define DLOCK_TOOLS_DLOCK_JOB_CONTROL_HPP_

#include <signal.h>
#include <sys/types.h>

namespace dlock::cli {

// Signals dlock handles itself: blocked in every thread (before the
// client's I/O thread exists) and read from a signalfd. SIGTTOU among them
// also lets dlock write to and hand over a terminal it is in the background
// of.
sigset_t handled_signals();

// SIGTSTP, SIGTTIN or SIGTTOU.
bool is_stop_signal(int sig);

// STDIN_FILENO if stdin is a terminal whose foreground group is dlock's,
// else -1. Only stdin: a shell script's `dlock run ... &` shares the
// script's (foreground) group with its output on the terminal, but reads
// /dev/null, and must not take the terminal from the script's other jobs.
int foreground_terminal();

// Makes `pgrp` the foreground group of `tty` (no-op when tty < 0). Safe
// between fork and exec.
void give_terminal(int tty, pid_t pgrp);

}  // namespace dlock::cli

#endif  // DLOCK_TOOLS_DLOCK_JOB_CONTROL_HPP_
