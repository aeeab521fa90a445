#!/usr/bin/env node
// The verifier's Redisson worker: node-redisson's RLock (Java Redisson's
// scripts and keys), driven line by line (line_peer.mjs).
//
// The lock is Redisson's RLock as a service uses it (the hash NAME, a field
// per holder, a wait on redisson_lock__channel:{NAME}, the watchdog
// renewing a lease of TTL_MS), the layout dlock's ?layout=redisson shares.
// The packages come from $DLOCK_PEERS_MODULES (bench/peers/package.json).
//
// usage: redisson_peer.mjs CONTROL_PORT LOCK_PORT USER PASSWORD NAME TTL_MS
import { createRequire } from "node:module";
import path from "node:path";

import { oneLine, serveLines } from "./line_peer.mjs";

const [control, port, user, password, name, ttlMs] = process.argv.slice(2);
const require = createRequire(path.join(process.env.DLOCK_PEERS_MODULES ?? ".", "package.json"));
const { Redisson, TimeUnit } = require("node-redisson");

const redisson = new Redisson({
  redis: {
    options: {
      host: "127.0.0.1",
      port: Number(port),
      username: user || undefined,
      password: password || undefined,
      maxRetriesPerRequest: 1,
    },
  },
  lockWatchdogTimeout: BigInt(ttlMs),
});
let lock = null;

await serveLines(control, {
  async acquire(waitMs) {
    lock = redisson.getLock(name);
    return (await lock.tryLock(waitMs, true, TimeUnit.MILLISECONDS)) ? "ok" : "busy";
  },
  async release() {
    try {
      await lock.unlock();
      return "ok";
    } catch (e) {
      // Not the holder any more (its lease lapsed): a lost lock. Any other
      // error (the connection's) leaves the outcome unknown.
      if (e?.constructor?.name === "RedissonLockError") return `fail ${oneLine(e)}`;
      throw e;
    }
  },
});
await redisson.quit().catch(() => {});
process.exit(0);
