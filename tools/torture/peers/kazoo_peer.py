#!/usr/bin/env python3
"""The verifier's kazoo worker: kazoo's own Lock, driven line by line.

The verifier's worker (strategies_peers.cpp) connects this process to a
loopback control socket and sends "acquire WAIT_MS" or "release"; each
answer is one line: "ok", "busy", "fail TEXT" or "error TEXT". The lock is
kazoo's Lock as a service uses it (an ephemeral sequential node
"<uuid>__lock__<seq>" under PATH, a watch on the contender just ahead), the
nodes dlock's ?layout=kazoo shares; the session timeout is SESSION_MS, so a
frozen or cut-off holder's node goes when its session expires. kazoo tells
its caller nothing of that. It exits when the control socket closes.

usage: kazoo_peer.py CONTROL_PORT HOSTS PATH SESSION_MS
"""
import socket
import sys

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, LockTimeout
from kazoo.handlers.threading import KazooTimeoutError


def main():
    control, hosts, path, session_ms = sys.argv[1:5]
    s = socket.create_connection(("127.0.0.1", int(control)))
    f = s.makefile("rw", buffering=1)
    zk = KazooClient(hosts=hosts, timeout=max(0.5, int(session_ms) / 1000.0))
    started = False
    lock = None
    for line in f:
        words = line.split()
        try:
            if words[0] == "acquire":
                wait = int(words[1]) / 1000.0
                if not started:
                    zk.start(timeout=max(1.0, wait))
                    started = True
                lock = zk.Lock(path, identifier="torture")
                try:
                    f.write("ok\n" if lock.acquire(timeout=wait) else "busy\n")
                except LockTimeout:  # how kazoo's acquire tells a wait that ran out
                    f.write("busy\n")
            elif words[0] == "release":
                # kazoo's release deletes its own node and answers success
                # for one already gone with its expired session: the lock was
                # lost then, and is told as lost (kazoo tells its caller
                # nothing), never as a release of whoever holds it now.
                node = lock.path + "/" + lock.node if lock.node else None
                gone = node is not None and zk.exists(node) is None
                lock.release()
                f.write("fail its node was gone (its session expired): the lock was lost\n" if gone else "ok\n")
            else:
                f.write("error unknown command\n")
        except (KazooException, KazooTimeoutError) as e:
            f.write("error %s: %s\n" % (type(e).__name__, str(e).replace("\n", " ")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
