#!/usr/bin/env node
// The verifier's npm redlock worker: redlock 5 on one instance (the plain
// layout: SET NX PX with its token, compare-and-delete), driven line by line
// (line_peer.mjs). redlock retries every 200 ms ± 100 ms (its defaults)
// until the wait is spent. The packages come from $DLOCK_PEERS_MODULES
// (bench/peers/package.json).
//
// usage: redlock_peer.mjs CONTROL_PORT LOCK_PORT USER PASSWORD NAME TTL_MS
import { createRequire } from "node:module";
import path from "node:path";

import { serveLines } from "./line_peer.mjs";

const [control, port, user, password, name, ttlMs] = process.argv.slice(2);
const require = createRequire(path.join(process.env.DLOCK_PEERS_MODULES ?? ".", "package.json"));
const Redis = require("ioredis");
const RedlockModule = require("redlock");
const Redlock = RedlockModule.default ?? RedlockModule;
const { ResourceLockedError, ExecutionError } = RedlockModule;

const client = new Redis({
  host: "127.0.0.1",
  port: Number(port),
  username: user || undefined,
  password: password || undefined,
  maxRetriesPerRequest: 1,
});
client.on("error", () => {}); // told per call
let lock = null;

await serveLines(control, {
  async acquire(waitMs) {
    // As many of redlock's default 200 ms retries as fit in the wait.
    const redlock = new Redlock([client], { retryCount: Math.max(0, Math.floor(waitMs / 200)) });
    try {
      lock = await redlock.acquire([name], Number(ttlMs));
      return "ok";
    } catch (e) {
      // Every attempt found it taken: busy. An attempt that failed for
      // another reason (the connection) may have set the key: unknown.
      // (redlock 5 keeps each attempt's votes as a promise.)
      const stats = e instanceof ExecutionError ? await Promise.all(e.attempts) : [];
      const taken = stats.length > 0 &&
        stats.every((a) => [...a.votesAgainst.values()].every((v) => v instanceof ResourceLockedError));
      if (taken) return "busy";
      throw e;
    }
  },
  async release() {
    await lock.release();
    return "ok";
  },
});
client.disconnect();
process.exit(0);
