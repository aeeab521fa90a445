// The control loop of the verifier's Node peers (redisson_peer.mjs,
// redlock_peer.mjs): connects to the worker's loopback control socket and
// answers each "acquire WAIT_MS" and "release" with one line, as
// strategies_peers.cpp reads them. `acquire(waitMs)` resolves to "ok" or
// "busy", `release()` to "ok" or "fail TEXT"; a throw answers "error TEXT"
// (the outcome unknown). Returns when the socket closes.
import net from "node:net";
import readline from "node:readline";

export const oneLine = (e) => String(e?.message ?? e).replace(/\n/g, " ");

export async function serveLines(controlPort, { acquire, release }) {
  const socket = net.connect(Number(controlPort), "127.0.0.1");
  const lines = readline.createInterface({ input: socket });
  for await (const line of lines) {
    const words = line.trim().split(/\s+/);
    let answer;
    try {
      if (words[0] === "acquire") answer = await acquire(Number(words[1]));
      else if (words[0] === "release") answer = await release();
      else answer = "error unknown command";
    } catch (e) {
      answer = `error ${oneLine(e)}`;
    }
    socket.write(answer + "\n");
  }
}
