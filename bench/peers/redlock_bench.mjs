#!/usr/bin/env node
// Peer baseline: npm `redlock` (5.0.0-beta.2) over `ioredis`, driven by the
// workloads of the dlock benchmark. Workloads, settings and output formats:
// see README.md beside this file.
//
// The npm packages live OUTSIDE the repo (see package.json beside this file):
//   cp bench/peers/package.json "$DIR"/ && npm install --prefix "$DIR" --no-audit --no-fund
//   node --preserve-symlinks bench/peers/redlock_bench.mjs --modules "$DIR" --port 6399 ...
// ESM ignores NODE_PATH, so the modules are loaded with createRequire() from the
// first of: --modules DIR, $DLOCK_PEERS_MODULES, each $NODE_PATH entry, this
// script's folder, the working directory (DIR may be the prefix or its node_modules).
//
// Timestamps are process.hrtime.bigint() (libuv uv_hrtime = CLOCK_MONOTONIC on
// Linux), so W3 events from every process and harness share one clock.

import { createRequire } from "node:module";
import { fork } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const LIBRARY = "node-redlock";
const KEY_PREFIX = "bench:node-redlock:";
const HOST = "127.0.0.1"; // nothing but loopback, by design

const LEASE_MS = 30000; // redlock.acquire(resources, 30000): the lease (PX 30000)
// "default": the library's own defaults (5.0.0-beta.2: retryCount 10,
// retryDelay 200 ms, retryJitter 100 ms, driftFactor 0.01); "tuned": short polling.
const SETTINGS = {
  default: {},
  tuned: { retryDelay: 1, retryJitter: 0, retryCount: 5000 },
};
const DEFAULT_SECONDS = { W1: 5, W2: 5, W3: 10, "W3-nolock": 3, W5: 5, "W5-contended": 10 };
// W5 and W5-contended run the W1 (distinct keys) and W3 loops over one
// Redlock spanning every --ports server; the results carry "nodes".
const KIND = { W1: "W1", W2: "W2", W3: "W3", "W3-nolock": "W3-nolock", W5: "W1", "W5-contended": "W3" };
const WARMUP_PAIRS = 20; // W1/W2: untimed pairs first (script load, connection)
const MAX_PAIRS = 50_000_000; // hard bound on any loop, besides the deadline
const SCRIPT = fileURLToPath(import.meta.url);

class BenchError extends Error {}

function die(msg, code = 2) {
  process.stderr.write(`redlock_bench: error: ${msg}\n`);
  process.exit(code);
}

const nowNs = () => process.hrtime.bigint();

// ------------------------------------------------------------ CLI ----
function parseArgs(argv) {
  const a = {
    port: null, ports: null, workload: null, keys: "distinct", settings: "default",
    seconds: null, procs: 8, tasks: 64, out: null, events: null,
    modules: null, child: false, eventsPart: null,
  };
  const usage =
    "usage: redlock_bench.mjs --port P|--ports P1,P2,... --workload W1|W2|W3|W3-nolock|W5|W5-contended " +
    "[--keys distinct|same] " +
    "[--settings default|tuned] [--seconds S] [--procs N] [--tasks N] [--out FILE] " +
    "[--events FILE] [--modules DIR]";
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (k === "-h" || k === "--help") { console.log(usage); process.exit(0); }
    if (k === "--child") { a.child = true; continue; }
    const v = argv[++i];
    if (v === undefined) die(`${k} needs a value\n${usage}`);
    switch (k) {
      case "--port": a.port = Number(v); break;
      case "--ports": a.ports = v.split(",").map(Number); break;
      case "--workload": a.workload = v; break;
      case "--keys": a.keys = v; break;
      case "--settings": a.settings = v; break;
      case "--seconds": a.seconds = Number(v); break;
      case "--procs": a.procs = Number(v); break;
      case "--tasks": a.tasks = Number(v); break;
      case "--out": a.out = v; break;
      case "--events": a.events = v; break;
      case "--modules": a.modules = v; break;
      case "--events-part": a.eventsPart = v; break;
      default: die(`unknown option ${k}\n${usage}`);
    }
  }
  if (a.ports === null) a.ports = [a.port];
  else if (a.port === null) a.port = a.ports[0];
  else die(`give --port or --ports, not both\n${usage}`);
  for (const p of a.ports)
    if (!Number.isInteger(p) || p <= 0 || p >= 65536) die(`--port/--ports missing or invalid\n${usage}`);
  if (new Set(a.ports).size !== a.ports.length) die("--ports names a server twice");
  if (!(a.workload in DEFAULT_SECONDS)) die(`--workload must be W1, W2, W3, W3-nolock, W5 or W5-contended\n${usage}`);
  if (a.workload === "W5") a.keys = "distinct";
  if (!["distinct", "same"].includes(a.keys)) die("--keys must be distinct or same");
  if (!(a.settings in SETTINGS)) die("--settings must be default or tuned");
  if (a.seconds === null) a.seconds = DEFAULT_SECONDS[a.workload];
  if (!(a.seconds > 0 && a.seconds <= 3600)) die("--seconds must be in (0, 3600]");
  if (!(Number.isInteger(a.procs) && a.procs >= 1 && a.procs <= 256)) die("--procs must be in [1, 256]");
  if (!(Number.isInteger(a.tasks) && a.tasks >= 1 && a.tasks <= 4096)) die("--tasks must be in [1, 4096]");
  return a;
}

// -------------------------------------------------------- modules ----
function packageVersion(resolvedFile, name) {
  let dir = path.dirname(resolvedFile);
  for (let i = 0; i < 10; i++) {
    const pj = path.join(dir, "package.json");
    if (fs.existsSync(pj)) {
      const j = JSON.parse(fs.readFileSync(pj, "utf8"));
      // redlock 5.0.0-beta.2 spells its version "v5.0.0-beta.2"
      if (j.name === name) return String(j.version).replace(/^v/, "");
    }
    const up = path.dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  return "unknown";
}

function loadModules(modulesArg) {
  const dirs = [];
  if (modulesArg) dirs.push(modulesArg);
  else {
    if (process.env.DLOCK_PEERS_MODULES) dirs.push(process.env.DLOCK_PEERS_MODULES);
    for (const p of (process.env.NODE_PATH || "").split(path.delimiter)) if (p) dirs.push(p);
    dirs.push(path.dirname(SCRIPT), process.cwd());
  }
  const tried = [];
  for (const d of dirs) {
    const dir = path.resolve(d);
    const req = createRequire(path.join(dir, "__resolve_peers__.js"));
    try {
      const redlockFile = req.resolve("redlock");
      const ioredisFile = req.resolve("ioredis");
      const rl = req("redlock");
      return {
        dir,
        Redis: req("ioredis"),
        Redlock: rl.default ?? rl,
        ExecutionError: rl.ExecutionError,
        ResourceLockedError: rl.ResourceLockedError,
        redlockVersion: packageVersion(redlockFile, "redlock"),
        ioredisVersion: packageVersion(ioredisFile, "ioredis"),
      };
    } catch (e) {
      tried.push(`${dir} (${e.code || e.message})`);
    }
  }
  die(
    "cannot load npm modules 'redlock' and 'ioredis'. Install them outside the repo:\n" +
      '  cp bench/peers/package.json "$DIR"/ && npm install --prefix "$DIR" --no-audit --no-fund\n' +
      'and pass --modules "$DIR" (or set DLOCK_PEERS_MODULES). Tried: ' + tried.join(", "),
  );
}

// ---------------------------------------------------------- redis ----
async function connect(M, port) {
  const client = new M.Redis({
    host: HOST, port, lazyConnect: true, connectTimeout: 2000,
    maxRetriesPerRequest: 1, retryStrategy: () => null, // fail fast, no reconnect loop
  });
  let lastError = null;
  client.on("error", (e) => { lastError = e; }); // also surfaced through the rejected commands
  try {
    await client.connect();
    await client.ping();
  } catch (e) {
    client.disconnect();
    die(`cannot reach redis at ${HOST}:${port}: ${(lastError || e).message}`);
  }
  return client;
}

async function connectAll(M, ports) {
  return Promise.all(ports.map((p) => connect(M, p)));
}

// One Redlock over every client (one per server); redlock asks them all.
function makeRedlock(M, clients, settings) {
  const redlock = new M.Redlock(clients, SETTINGS[settings]);
  const state = { fatal: null };
  // redlock emits "error" for every failed attempt; without a listener the
  // EventEmitter would throw. "Resource locked" is the normal contended case.
  redlock.on("error", (e) => {
    if (!(e instanceof M.ResourceLockedError) && !state.fatal) state.fatal = e;
  });
  return { redlock, state };
}

function lockSettings(redlock) {
  const s = redlock.settings;
  return {
    ttl_ms: LEASE_MS, retryCount: s.retryCount, retryDelay: s.retryDelay,
    retryJitter: s.retryJitter, driftFactor: s.driftFactor,
  };
}

async function deletePrefix(client, prefix) {
  let cursor = "0";
  for (let i = 0; i < 1_000_000; i++) {
    const [next, keys] = await client.scan(cursor, "MATCH", prefix + "*", "COUNT", 1000);
    if (keys.length) await client.del(...keys);
    cursor = next;
    if (cursor === "0") return;
  }
  throw new BenchError(`too many keys under ${prefix}`);
}

function percentileUs(sorted, p) {
  // nearest-rank percentile of sorted ns values, in µs
  if (!sorted.length) return null;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return Math.round(sorted[rank - 1] / 100) / 10;
}

function summarizePairs(M, args, redlock, lat, elapsed) {
  lat.sort((x, y) => x - y);
  const res = {
    library: LIBRARY, settings: args.settings, workload: args.workload,
    pairs: lat.length, seconds: Math.round(elapsed * 1000) / 1000,
    pairs_per_s: elapsed > 0 ? Math.round((lat.length / elapsed) * 10) / 10 : null,
    p50_us: percentileUs(lat, 50), p99_us: percentileUs(lat, 99),
    version: M.redlockVersion,
  };
  if (KIND[args.workload] === "W1") res.keys = args.keys;
  if (args.workload === "W2") res.tasks = args.tasks;
  if (args.workload.startsWith("W5")) res.nodes = args.ports.length;
  Object.assign(res, {
    ioredis_version: M.ioredisVersion, node_version: process.version,
    lock_settings: lockSettings(redlock),
  });
  return res;
}

// W1/W2 (uncontended): a give-up is an error; report the redis error behind it.
async function withCause(state, what, promise) {
  try {
    return await promise;
  } catch (e) {
    const cause = state.fatal ? `; cause: ${state.fatal.message}` : "";
    throw new BenchError(`${what} failed: ${e.message}${cause}`);
  }
}

async function pair(redlock, state, name) {
  const lock = await withCause(state, `acquire of ${name}`, redlock.acquire([name], LEASE_MS));
  await withCause(state, `release of ${name}`, lock.release());
}

// ------------------------------------------------------------- W1 ----
async function runW1(M, clients, args) {
  const { redlock, state } = makeRedlock(M, clients, args.settings);
  const base = KEY_PREFIX + "w1:";
  for (let i = 0; i < WARMUP_PAIRS; i++) await pair(redlock, state, `${base}warm:${i}`);
  const same = base + "same";
  const lat = [];
  const tStart = nowNs();
  const deadline = tStart + BigInt(Math.round(args.seconds * 1e9));
  let t1 = tStart;
  for (let i = 0; i < MAX_PAIRS; i++) {
    const name = args.keys === "same" ? same : `${base}d:${i}`;
    const t0 = nowNs();
    await pair(redlock, state, name);
    t1 = nowNs();
    lat.push(Number(t1 - t0));
    if (t1 >= deadline) break;
  }
  if (state.fatal) throw state.fatal;
  return summarizePairs(M, args, redlock, lat, Number(t1 - tStart) / 1e9);
}

// ------------------------------------------------------------- W2 ----
async function runW2(M, clients, args) {
  // --tasks async tasks on ONE ioredis client (per server) and ONE Redlock.
  const { redlock, state } = makeRedlock(M, clients, args.settings);
  const base = KEY_PREFIX + "w2:";
  for (let i = 0; i < WARMUP_PAIRS; i++) await pair(redlock, state, `${base}warm:${i}`);
  const lats = [];
  let stop = false;
  const tStart = nowNs();
  const deadline = tStart + BigInt(Math.round(args.seconds * 1e9));
  let tLast = tStart;
  const task = async (t) => {
    const mine = [];
    lats.push(mine);
    try {
      for (let i = 0; i < MAX_PAIRS && !stop; i++) {
        const t0 = nowNs();
        await pair(redlock, state, `${base}t${t}:${i}`);
        const t1 = nowNs();
        mine.push(Number(t1 - t0));
        if (t1 >= deadline) break;
      }
    } catch (e) {
      stop = true;
      throw e;
    }
    const tEnd = nowNs();
    if (tEnd > tLast) tLast = tEnd;
  };
  await Promise.all(Array.from({ length: args.tasks }, (_, t) => task(t)));
  if (state.fatal) throw state.fatal;
  return summarizePairs(M, args, redlock, lats.flat(), Number(tLast - tStart) / 1e9);
}

// ------------------------------------------------------------- W3 ----
const LOCK_KEY = KEY_PREFIX + "w3:lock";
const CTR_KEY = KEY_PREFIX + "ctr";

async function runW3Child(M, args) {
  // One contending process with its own connection (per server); waits for
  // "go" over IPC. The counter lives on the first server.
  process.on("disconnect", () => process.exit(3)); // parent gone
  const clients = await connectAll(M, args.ports);
  const client = clients[0];
  const { redlock, state } = makeRedlock(M, clients, args.settings);
  const nolock = args.workload === "W3-nolock";
  await new Promise((resolve) => {
    process.on("message", (m) => { if (m && m.type === "go") resolve(); });
    process.send({ type: "ready" });
  });
  const events = [];
  let failures = 0;
  const tGo = nowNs();
  const deadline = tGo + BigInt(Math.round(args.seconds * 1e9));
  for (let i = 0; i < MAX_PAIRS && nowNs() < deadline; i++) {
    let tAc, tAr, tRc, tRr, lock;
    if (nolock) {
      tAc = tAr = nowNs();
    } else {
      tAc = nowNs();
      try {
        lock = await redlock.acquire([LOCK_KEY], LEASE_MS);
      } catch (e) {
        if (e instanceof M.ExecutionError && !state.fatal) { failures++; continue; } // gave up
        throw state.fatal || e;
      }
      tAr = nowNs();
    }
    const v = await client.get(CTR_KEY);
    await client.set(CTR_KEY, Number(v || 0) + 1);
    if (nolock) {
      tRc = tRr = nowNs();
    } else {
      tRc = nowNs();
      await lock.release();
      tRr = nowNs();
    }
    events.push([tAc, tAr, tRc, tRr]);
  }
  const tEnd = nowNs();
  if (state.fatal) throw state.fatal;
  const pid = process.pid;
  fs.writeFileSync(
    args.eventsPart,
    events.map(([a, b, c, d]) =>
      `{"pid": ${pid}, "acq_call": ${a}, "acq_ret": ${b}, "rel_call": ${c}, "rel_ret": ${d}}\n`).join(""),
  );
  for (const c of clients) c.disconnect();
  await new Promise((resolve) =>
    process.send({ type: "done", cs: events.length, failures, t_go: String(tGo), t_end: String(tEnd) }, resolve));
}

function waitAll(children, type, ms, what) {
  return new Promise((resolve, reject) => {
    const got = new Array(children.length).fill(null);
    let n = 0;
    const timer = setTimeout(() => reject(new BenchError(`children timed out (${what})`)), ms);
    children.forEach((c, i) => {
      c.on("message", (m) => {
        if (m && m.type === type && got[i] === null) {
          got[i] = m;
          if (++n === children.length) { clearTimeout(timer); resolve(got); }
        }
      });
      c.on("close", (code, sig) => { // after the IPC channel closed: no message left
        if (got[i] === null) {
          clearTimeout(timer);
          reject(new BenchError(`child ${c.pid} exited early (${what}): code ${code}, signal ${sig}`));
        }
      });
    });
  });
}

async function runW3(M, clients, args) {
  if (!args.events) throw new BenchError("--events FILE is required for W3, W3-nolock and W5-contended");
  const eventsPath = path.resolve(args.events);
  const client = clients[0];
  for (const c of clients) await deletePrefix(c, KEY_PREFIX);
  await client.set(CTR_KEY, 0);
  const children = [];
  const parts = [];
  const killAll = () => { for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL"); };
  const removeParts = () => { for (const part of parts) fs.rmSync(part, { force: true }); };
  process.on("exit", () => { killAll(); removeParts(); });
  process.on("SIGINT", () => process.exit(130));
  process.on("SIGTERM", () => process.exit(143));
  let summaries;
  try {
    for (let i = 0; i < args.procs; i++) {
      const part = `${eventsPath}.part${i}`;
      parts.push(part);
      children.push(fork(SCRIPT, [
        "--child", "--modules", M.dir, "--ports", args.ports.join(","), "--workload", args.workload,
        "--settings", args.settings, "--seconds", String(args.seconds), "--events-part", part,
      ], { stdio: ["ignore", "inherit", "inherit", "ipc"] }));
    }
    const done = waitAll(children, "done", (args.seconds + 90) * 1000, "run");
    done.catch(() => {}); // awaited below; avoid an unhandled rejection meanwhile
    await waitAll(children, "ready", 30000, "start");
    for (const c of children) c.send({ type: "go" });
    summaries = await done;
    await Promise.all(children.map((c) => new Promise((r) => {
      if (c.exitCode !== null || c.signalCode !== null) r(); else c.once("exit", r);
    })));
    const bad = children.find((c) => c.exitCode !== 0);
    if (bad) throw new BenchError(`child ${bad.pid} exited with ${bad.exitCode}`);
    const fd = fs.openSync(eventsPath, "w");
    try {
      for (const part of parts) fs.writeSync(fd, fs.readFileSync(part));
    } finally {
      fs.closeSync(fd);
    }
  } finally {
    killAll();
    removeParts();
  }
  const counter = Number((await client.get(CTR_KEY)) || 0);
  const cs = summaries.reduce((s, x) => s + x.cs, 0);
  const tGo = summaries.map((s) => BigInt(s.t_go)).reduce((a, b) => (a < b ? a : b));
  const tEnd = summaries.map((s) => BigInt(s.t_end)).reduce((a, b) => (a > b ? a : b));
  const elapsed = Number(tEnd - tGo) / 1e9;
  const { redlock } = makeRedlock(M, clients, args.settings);
  const res = {
    library: LIBRARY, settings: args.settings, workload: args.workload,
    procs: args.procs, seconds: args.seconds, elapsed_s: Math.round(elapsed * 1000) / 1000,
    critical_sections: cs, cs_per_s: elapsed > 0 ? Math.round((cs / elapsed) * 10) / 10 : null,
    acquire_failures: summaries.reduce((s, x) => s + x.failures, 0),
    counter, counter_ok: counter === cs,
    cs_per_proc: summaries.map((s) => s.cs),
    events: args.events, version: M.redlockVersion,
    ioredis_version: M.ioredisVersion, node_version: process.version,
    lock_settings: lockSettings(redlock),
  };
  if (args.workload.startsWith("W5")) res.nodes = args.ports.length;
  return res;
}

// ----------------------------------------------------------- main ----
async function main() {
  const args = parseArgs(process.argv.slice(2));
  const M = loadModules(args.modules);
  if (args.child) {
    await runW3Child(M, args);
    return;
  }
  const clients = await connectAll(M, args.ports);
  let res;
  try {
    const kind = KIND[args.workload];
    if (kind === "W1" || kind === "W2") {
      for (const c of clients) await deletePrefix(c, KEY_PREFIX);
      res = kind === "W1" ? await runW1(M, clients, args) : await runW2(M, clients, args);
    } else {
      res = await runW3(M, clients, args);
    }
    for (const c of clients) await deletePrefix(c, KEY_PREFIX);
  } finally {
    for (const c of clients) c.disconnect();
  }
  const text = JSON.stringify(res);
  if (args.out) fs.writeFileSync(args.out, text + "\n");
  console.log(text);
}

main().then(
  () => process.exit(0),
  (e) => die(e instanceof BenchError ? e.message : (e && e.stack) || String(e), 1),
);
