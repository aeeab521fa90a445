// Three-phase commit (3PC), an experiment: the coordinator's and the
// participants' protocols as I/O-free state machines (messages in,
// messages out, time injected), with the participants' timers and a
// termination protocol among them, as the seed describes it and as Skeen
// made it non-blocking:
//
//   CanCommit -> every participant votes (yes: it is "uncertain")
//   PreCommit -> every participant acknowledges ("prepared")
//   DoCommit  -> commit
//
// A participant that hears nothing in time asks the others for their state
// and decides: any committed or prepared -> commit, any aborted or all
// uncertain -> abort, and tells the others. That is safe when processes
// only crash and every message arrives within the timeout; it is NOT safe
// under a partition: after PreCommit reached one side only, the side with a
// prepared participant commits and the other side aborts. 2PC blocks
// instead (a prepared participant waits for the coordinator). The tests
// show both; the library offers 3PC to no caller.
#ifndef DLOCK_TX_THREE_PC_HPP_
#define DLOCK_TX_THREE_PC_HPP_

#include <chrono>
#include <optional>
#include <vector>

namespace dlock::tx::detail::three_pc {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

enum class Msg {
  can_commit,  // coordinator -> participant
  pre_commit,
  do_commit,
  abort,  // coordinator (or a participant that decided abort) -> participant
  yes,    // participant -> coordinator
  no,
  ack,
  state_req,    // participant -> participant (termination protocol)
  state_reply,  // with `state`
};

enum class State { initial, uncertain, prepared, committed, aborted };
const char* to_string(State s);

// Node 0 is the coordinator; participants are 1..n.
struct Send {
  int to = 0;
  Msg msg = Msg::abort;
  State state = State::initial;  // for state_reply
};

class Participant {
 public:
  Participant(int self, int participants, milliseconds timeout, bool vote_yes)
      : self_(self), n_(participants), timeout_(timeout), vote_yes_(vote_yes) {}

  // A message from node `from`. The state it moves to must be durable
  // before the answers are sent.
  std::vector<Send> on_message(int from, Msg m, State their_state, Clock::time_point now);
  // The participant's timer; call it whenever time passes.
  std::vector<Send> on_tick(Clock::time_point now);

  State state() const { return state_; }
  bool decided() const { return state_ == State::committed || state_ == State::aborted; }

 private:
  std::vector<Send> start_termination(Clock::time_point now);
  std::vector<Send> decide(State to);

  int self_, n_;
  milliseconds timeout_;
  bool vote_yes_;
  State state_ = State::initial;
  std::optional<Clock::time_point> deadline_;  // of the current wait
  bool terminating_ = false;
  std::vector<State> heard_;  // the termination round's answers
};

class Coordinator {
 public:
  Coordinator(int participants, milliseconds timeout) : n_(participants), timeout_(timeout) {}

  std::vector<Send> start(Clock::time_point now);
  std::vector<Send> on_message(int from, Msg m, Clock::time_point now);
  std::vector<Send> on_tick(Clock::time_point now);
  State state() const { return state_; }

 private:
  std::vector<Send> to_all(Msg m);

  int n_;
  milliseconds timeout_;
  enum class Phase { idle, votes, acks, done } phase_ = Phase::idle;
  State state_ = State::initial;
  int answers_ = 0;
  Clock::time_point deadline_{};
};

}  // namespace dlock::tx::detail::three_pc

#endif  // DLOCK_TX_THREE_PC_HPP_
