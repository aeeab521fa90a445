#!/usr/bin/env node
// An npm redlock (single instance) user for the interop tests
// (interop_test.cpp): takes redlock's lock on NAME until SECONDS have
// passed, with the library's retry settings (retryDelay 200 ms, jitter),
// logging "start" and "end" of each critical section to the Redis list LOG
// (side, pid, CLOCK_MONOTONIC ns) and bumping COUNTER with a non-atomic
// GET and SET. The packages come from $DLOCK_PEERS_MODULES (redlock 5 over
// ioredis; bench/peers/package.json).
//
// usage: redlock_worker.mjs PORT NAME LOG COUNTER SECONDS TTL_MS HOLD_MS
import { createRequire } from "node:module";
import path from "node:path";

const dir = process.env.DLOCK_PEERS_MODULES;
if (!dir) {
  process.stderr.write("redlock_worker: DLOCK_PEERS_MODULES is not set\n");
  process.exit(2);
}
const require = createRequire(path.join(dir, "package.json"));
const Redis = require("ioredis");
const RedlockModule = require("redlock");
const Redlock = RedlockModule.default ?? RedlockModule;

const [port, name, log, counter, seconds, ttlMs, holdMs] = process.argv.slice(2);
const client = new Redis({ host: "127.0.0.1", port: Number(port), lazyConnect: false });
// Retries until the run's end (the library's delay and jitter kept).
const redlock = new Redlock([client], { retryCount: -1 });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const nowNs = () => process.hrtime.bigint();

const end = Date.now() + Number(seconds) * 1000;
let grants = 0;
while (Date.now() < end) {
  let lock;
  try {
    lock = await redlock.acquire([name], Number(ttlMs));
  } catch (e) {
    continue;
  }
  grants++;
  await client.rpush(log, `start redlock ${process.pid} ${nowNs()}`);
  const v = Number((await client.get(counter)) ?? 0);
  await sleep(Math.random() * Number(holdMs));
  await client.set(counter, String(v + 1));
  await client.rpush(log, `end redlock ${process.pid} ${nowNs()}`);
  await lock.release();
  await sleep(Math.random() * 20); // a service's pace between jobs
}
// A process left without a grant is redlock's 200 ms retry losing to
// waiters that are woken: the test counts grants per side.
console.log(`grants ${grants}`);
client.disconnect();
process.exit(0);
