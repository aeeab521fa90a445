#!/usr/bin/env python3
"""The verifier's redis-py worker: redis-py's own Lock, driven line by line.

The verifier's worker (strategies_peers.cpp) connects this process to a
loopback control socket and sends "acquire WAIT_MS" or "release"; each
answer is one line: "ok", "busy", "fail TEXT" or "error TEXT". The lock is
redis-py's Lock as a service uses it (SET NX PX with its token, a 0.1 s
poll, compare-and-delete), on the key NAME: the layout dlock's
?layout=plain shares. It exits when the control socket closes (its worker
died or ended).

usage: redispy_peer.py CONTROL_PORT LOCK_PORT USER PASSWORD NAME TTL_MS
"""
import socket
import sys

import redis


def main():
    control, port, user, password, name, ttl_ms = sys.argv[1:7]
    r = redis.Redis(host="127.0.0.1", port=int(port), username=user or None, password=password or None,
                    socket_timeout=max(1.0, int(ttl_ms) / 1000.0))
    s = socket.create_connection(("127.0.0.1", int(control)))
    f = s.makefile("rw", buffering=1)
    lock = None
    for line in f:
        words = line.split()
        try:
            if words[0] == "acquire":
                lock = r.lock(name, timeout=int(ttl_ms) / 1000.0, blocking_timeout=int(words[1]) / 1000.0)
                f.write("ok\n" if lock.acquire() else "busy\n")
            elif words[0] == "release":
                try:
                    lock.release()
                    f.write("ok\n")
                except redis.exceptions.LockError as e:  # not owned any more: its lease lapsed
                    f.write("fail %s\n" % str(e).replace("\n", " "))
            else:
                f.write("error unknown command\n")
        except redis.exceptions.RedisError as e:
            f.write("error %s: %s\n" % (type(e).__name__, str(e).replace("\n", " ")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
