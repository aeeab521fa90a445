#!/usr/bin/env node
// Peer baseline for the recipes: npm `redis-semaphore` (5.8.0) over `ioredis`,
// on the workloads of bench/recipes_bench.cpp, each process with its own
// connection, started together once all are connected:
//   SEM  its Semaphore(limit = --permits): {acquire; read a file; release}
//   W3   its Mutex, critical section = GET/SET of a counter on the server
// Settings: "default" = the library's own (retryInterval 10 ms between
// tries, acquireTimeout 10 s, lockTimeout 10 s); "tuned" = retryInterval 1 ms.
// Both with acquireTimeout raised to 60 s so that no waiter gives up.
// The figures come from bench/peers/recipes_stats.py over the raw events,
// computed as dlock-recipes-bench computes its own.
//
//   node --preserve-symlinks bench/peers/redis_semaphore_bench.mjs --modules DIR --port P
//        --workload SEM|W3 [--procs 8] [--permits 3] [--seconds 5] [--settings default|tuned] [--out FILE]
import { createRequire } from "node:module";
import { fork, execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const SCRIPT = fileURLToPath(import.meta.url);
const HOST = "127.0.0.1";
const SETTINGS = { default: {}, tuned: { retryInterval: 1 } };

function parseArgs(argv) {
  const a = { port: null, workload: null, procs: 8, permits: 3, seconds: 5, settings: "default", out: null,
              modules: null, child: null, dir: null, key: null };
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i], v = argv[i + 1];
    if (v === undefined) throw new Error(`missing value for ${k}`);
    switch (k) {
      case "--port": a.port = Number(v); break;
      case "--workload": a.workload = v; break;
      case "--procs": a.procs = Number(v); break;
      case "--permits": a.permits = Number(v); break;
      case "--seconds": a.seconds = Number(v); break;
      case "--settings": a.settings = v; break;
      case "--out": a.out = v; break;
      case "--modules": a.modules = v; break;
      case "--child": a.child = Number(v); break;
      case "--dir": a.dir = v; break;
      case "--key": a.key = v; break;
      default: throw new Error(`unknown option ${k}`);
    }
  }
  if (!a.port || !["SEM", "W3"].includes(a.workload) || !(a.settings in SETTINGS))
    throw new Error("usage: redis_semaphore_bench.mjs --modules DIR --port P --workload SEM|W3 [--procs N] " +
                    "[--permits N] [--seconds S] [--settings default|tuned] [--out FILE]");
  return a;
}

function load(a, name) {
  const places = [a.modules, process.env.DLOCK_PEERS_MODULES, path.dirname(SCRIPT), process.cwd()].filter(Boolean);
  for (const p of places) {
    for (const base of [p, path.join(p, "node_modules")]) {
      try {
        return createRequire(path.join(base, "x.js"))(name);
      } catch {}
    }
  }
  throw new Error(`${name} not found: npm install --prefix DIR (see bench/peers/README.md)`);
}

const nowNs = () => process.hrtime.bigint();

async function child(a) {
  const Redis = load(a, "ioredis");
  const { Semaphore, Mutex } = load(a, "redis-semaphore");
  const redis = new Redis({ host: HOST, port: a.port, retryStrategy: () => null, maxRetriesPerRequest: 1 });
  const opts = { ...SETTINGS[a.settings], acquireTimeout: 60000 };
  const counter = path.join(a.dir, "counter");
  const lines = [];
  await redis.ping();
  await new Promise((resolve) => {
    process.once("message", resolve);
    process.send("ready");
  });
  const end = Date.now() + a.seconds * 1000;
  const sem = a.workload === "SEM" ? new Semaphore(redis, a.key, a.permits, opts) : null;
  const mutex = a.workload === "W3" ? new Mutex(redis, a.key, opts) : null;
  while (Date.now() < end) {
    const call = nowNs();
    if (sem) {
      await sem.acquire();
      const got = nowNs();
      try { fs.readFileSync(counter); } catch {}
      const rel = nowNs();
      await sem.release();
      lines.push(`s ${call} ${got} ${rel} ${a.child}`);
    } else {
      await mutex.acquire();
      const got = nowNs();
      const v = Number((await redis.get(a.key + ":ctr")) ?? 0);
      await redis.set(a.key + ":ctr", String(v + 1));
      const rel = nowNs();
      await mutex.release();
      lines.push(`x ${call} ${got} ${rel} ${a.child}`);
    }
  }
  fs.writeFileSync(path.join(a.dir, `ev.${a.child}`), lines.join("\n") + (lines.length ? "\n" : ""));
  await redis.quit();
}

async function parent(a) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "redis-semaphore-bench-"));
  const key = `bench:redis-semaphore:${process.pid}`;
  const kids = [];
  const exits = [];
  for (let k = 0; k < a.procs; k++) {
    const args = ["--port", a.port, "--workload", a.workload, "--permits", a.permits, "--seconds", a.seconds,
                  "--settings", a.settings, "--child", k, "--dir", dir, "--key", key];
    if (a.modules) args.push("--modules", a.modules);
    const c = fork(SCRIPT, args.map(String), { execArgv: ["--preserve-symlinks"] });
    kids.push(c);
    exits.push(new Promise((resolve) => c.on("exit", (code) => resolve(code))));
  }
  await Promise.all(kids.map((c) => new Promise((resolve) => c.once("message", resolve))));
  for (const c of kids) c.send("go");
  const timer = setTimeout(() => { for (const c of kids) c.kill("SIGKILL"); }, (a.seconds + 120) * 1000);
  const codes = await Promise.all(exits);
  clearTimeout(timer);
  if (codes.some((c) => c !== 0)) throw new Error("a worker failed");
  const events = path.join(dir, "events");
  fs.writeFileSync(events, kids.map((_, k) => fs.readFileSync(path.join(dir, `ev.${k}`), "utf8")).join(""));
  const Redis = load(a, "ioredis");
  const r = new Redis({ host: HOST, port: a.port, retryStrategy: () => null });
  const counter = Number((await r.get(key + ":ctr")) ?? 0);
  await r.del(key, key + ":ctr");
  await r.quit();
  const version = JSON.parse(fs.readFileSync(
    createRequire(path.join(a.modules ?? path.dirname(SCRIPT), "node_modules", "x.js")).resolve("redis-semaphore/package.json"),
    "utf8")).version;
  const stats = execFileSync("/usr/bin/python3", [
    path.join(path.dirname(SCRIPT), "recipes_stats.py"), "--events", events, "--workload", a.workload,
    "--seconds", String(a.seconds), ...(a.workload === "W3" ? ["--counter", String(counter)] : []),
    "--set", "library=redis-semaphore", "--set", `settings=${a.settings}`, "--set", "backend=redis",
    "--set", `procs=${a.procs}`, "--set", `version=${version}`,
    ...(a.workload === "SEM" ? ["--set", `permits=${a.permits}`] : ["--set", "fair=false"]),
  ], { encoding: "utf8" });
  fs.rmSync(dir, { recursive: true, force: true });
  if (a.out) fs.writeFileSync(a.out, stats);
  process.stdout.write(stats);
}

const a = parseArgs(process.argv.slice(2));
(a.child === null ? parent(a) : child(a)).catch((e) => {
  process.stderr.write(`redis_semaphore_bench: ${e.message}\n`);
  process.exit(1);
});
