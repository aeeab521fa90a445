#include "job_control.hpp"

#include <termios.h>
#include <unistd.h>

#include <initializer_list>

namespace dlock::cli {

sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGTSTP, SIGTTIN, SIGTTOU, SIGCONT}) sigaddset(&set, s);
  return set;
}

bool is_stop_signal(int sig) { return sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU; }

int foreground_terminal() { return isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp() ? STDIN_FILENO : -1; }

void give_terminal(int tty, pid_t pgrp) {
  // From a background group this raises SIGTTOU, which is blocked here (and
  // in CMD until its exec), so the call goes through.
  if (tty >= 0) (void)tcsetpgrp(tty, pgrp);
}

}  // namespace dlock::cli
