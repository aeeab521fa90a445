#!/usr/bin/env node
// A node-redisson user for the interop tests (redis_interop_test.cpp):
// takes Redisson's RLock on NAME until SECONDS have passed, as a service
// would (the hash NAME, field "<uuid>:<client id>" with the re-entry count,
// a wait on redisson_lock__channel:{NAME}, the watchdog's lease of TTL_MS),
// logging "start" and "end" of each critical section to the Redis list LOG
// (side, pid, CLOCK_MONOTONIC ns) and bumping COUNTER with a non-atomic GET
// and SET. The packages come from $DLOCK_PEERS_MODULES (node-redisson 1.0.4
// over ioredis; bench/peers/package.json).
//
// usage: redisson_worker.mjs PORT NAME LOG COUNTER SECONDS TTL_MS HOLD_MS
import { createRequire } from "node:module";
import path from "node:path";

const dir = process.env.DLOCK_PEERS_MODULES;
if (!dir) {
  process.stderr.write("redisson_worker: DLOCK_PEERS_MODULES is not set\n");
  process.exit(2);
}
const require = createRequire(path.join(dir, "package.json"));
const Redis = require("ioredis");
const { Redisson, TimeUnit } = require("node-redisson");

const [port, name, log, counter, seconds, ttlMs, holdMs] = process.argv.slice(2);
const client = new Redis({ host: "127.0.0.1", port: Number(port) });
const redisson = new Redisson({
  redis: { options: { host: "127.0.0.1", port: Number(port) } },
  lockWatchdogTimeout: BigInt(ttlMs),
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const nowNs = () => process.hrtime.bigint();

const end = Date.now() + Number(seconds) * 1000;
let grants = 0;
while (Date.now() < end) {
  const lock = redisson.getLock(name);
  // The watchdog's lease (leaseTime true), waiting up to the run's end.
  const left = Math.max(1000, end - Date.now() + 2000);
  if (!(await lock.tryLock(left, true, TimeUnit.MILLISECONDS))) continue;
  grants++;
  await client.rpush(log, `start redisson ${process.pid} ${nowNs()}`);
  const v = Number((await client.get(counter)) ?? 0);
  await sleep(Math.random() * Number(holdMs));
  await client.set(counter, String(v + 1));
  await client.rpush(log, `end redisson ${process.pid} ${nowNs()}`);
  await lock.unlock();
  await sleep(Math.random() * 20); // a service's pace between jobs
}
console.log(`grants ${grants}`);
client.disconnect();
await redisson.quit();
process.exit(grants > 0 ? 0 : 3);
