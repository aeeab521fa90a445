#!/usr/bin/env node
// Peer baseline: node-redisson (1.0.4, Java Redisson's RLock scripts) over
// ioredis, W1 only (one client, sequential tryLock + unlock), the layout
// dlock's ?layout=redisson shares. Output: the same JSON line as
// redlock_bench.mjs's W1 (see README.md beside this file).
//
//   node bench/peers/redisson_bench.mjs --modules DIR --port P --workload W1 \
//     [--keys distinct|same] [--seconds S] [--out FILE]
// The packages come from --modules DIR or $DLOCK_PEERS_MODULES (package.json
// beside this file). Timestamps: process.hrtime.bigint() (CLOCK_MONOTONIC).
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const KEY_PREFIX = "bench:node-redisson:";
const LEASE_MS = 30000; // a fixed lease, as the other peers' W1 (no watchdog)
const WARMUP_PAIRS = 20;

function die(msg, code = 2) {
  process.stderr.write(`redisson_bench: error: ${msg}\n`);
  process.exit(code);
}

const a = { port: null, workload: "W1", keys: "distinct", seconds: 5, out: null, modules: null, settings: "default" };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
  const [k, v] = [argv[i], argv[i + 1]];
  if (v === undefined) die(`${k} needs a value`);
  if (k === "--port") a.port = Number(v);
  else if (k === "--workload") a.workload = v;
  else if (k === "--keys") a.keys = v;
  else if (k === "--seconds") a.seconds = Number(v);
  else if (k === "--out") a.out = v;
  else if (k === "--modules") a.modules = v;
  else if (k === "--settings") a.settings = v;
  else die(`unknown option ${k}`);
}
if (!Number.isInteger(a.port) || a.port <= 0 || a.port >= 65536) die("--port missing or invalid");
if (a.workload !== "W1") die("only W1 is measured for node-redisson");
if (!["distinct", "same"].includes(a.keys)) die("--keys must be distinct or same");
if (!(a.seconds > 0 && a.seconds <= 3600)) die("--seconds must be in (0, 3600]");

const dir = a.modules ?? process.env.DLOCK_PEERS_MODULES;
if (!dir) die("give --modules DIR or set DLOCK_PEERS_MODULES");
const require = createRequire(path.join(path.resolve(dir), "package.json"));
const { Redisson, TimeUnit } = require("node-redisson");
const version = JSON.parse(fs.readFileSync(require.resolve("node-redisson/package.json"), "utf8")).version;

const redisson = new Redisson({ redis: { options: { host: "127.0.0.1", port: a.port } } });
const nowNs = () => process.hrtime.bigint();
async function pair(name) {
  const lock = redisson.getLock(name);
  if (!(await lock.tryLock(0, LEASE_MS, TimeUnit.MILLISECONDS))) throw new Error(`${name} was busy`);
  await lock.unlock();
}

const base = KEY_PREFIX + "w1:";
for (let i = 0; i < WARMUP_PAIRS; i++) await pair(`${base}warm:${i}`);
const lat = [];
const tStart = nowNs();
const deadline = tStart + BigInt(Math.round(a.seconds * 1e9));
let t1 = tStart;
for (let i = 0; ; i++) {
  const t0 = nowNs();
  await pair(a.keys === "same" ? base + "same" : `${base}d:${i}`);
  t1 = nowNs();
  lat.push(Number(t1 - t0));
  if (t1 >= deadline) break;
}
lat.sort((x, y) => x - y);
const pct = (p) => Math.round(lat[Math.max(1, Math.ceil((p / 100) * lat.length)) - 1] / 100) / 10;
const elapsed = Number(t1 - tStart) / 1e9;
const res = {
  library: "node-redisson", settings: a.settings, workload: "W1", keys: a.keys, pairs: lat.length,
  seconds: Math.round(elapsed * 1000) / 1000, pairs_per_s: Math.round((lat.length / elapsed) * 10) / 10,
  p50_us: pct(50), p99_us: pct(99), version, node_version: process.version, lock_settings: { lease_ms: LEASE_MS },
};
await redisson.quit();
const text = JSON.stringify(res);
if (a.out) fs.writeFileSync(a.out, text + "\n");
console.log(text);
process.exit(0);
