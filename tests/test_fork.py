"""fork() while other threads use the codec: every child makes its first calls at once.

Pre-fork servers (gunicorn, uvicorn ``--workers``) fork. A lock of the shared state held
by another thread at that moment stays held in the child, where that thread does not
exist: the child's first call that needs it would wait forever. Each test forks children
while threads compress, decompress, park and broadcast, and gives each child a deadline
for its first calls (new and inherited objects of the parameter sets in use).
"""

from __future__ import annotations

import os
import threading

import pytest

from fastdeflate import _forksafe

from _skipcheck import NO_FORK
from _subprocess import run_python
from _tally import tally

FORKS = 30
CHILD_DEADLINE = 15.0  # seconds; a child's calls take milliseconds

FORK_UNDER_LOAD = r"""
import os, random, sys, threading, time, zlib
import fastdeflate
from fastdeflate import broadcast

forks, deadline = int(sys.argv[1]), float(sys.argv[2])
fastdeflate.set_live_states(1)
fastdeflate.set_park_after(0)  # every call parks and restores: ring locks taken often
TAIL = b"\x00\x00\xff\xff"
stop = threading.Event()
errors = []


def message(rng):
    return b"".join(b'{"n":%d}' % rng.randrange(10**6) for _ in range(rng.randrange(5, 200)))


def load(seed):
    rng = random.Random(seed)
    pairs = [(fastdeflate.Compressor(6, w, 5), fastdeflate.Decompressor(w)) for w in (12, 15)]
    room = [fastdeflate.Compressor(6, 12, 5) for _ in range(4)]
    try:
        while not stop.is_set():
            c, d = rng.choice(pairs)
            data = message(rng)
            assert d.decompress(c.compress(data)) == data
            broadcast(message(rng), room)
            fastdeflate.live_states()
    except BaseException as exc:
        errors.append(exc)


threads = [threading.Thread(target=load, args=(i,), daemon=True) for i in range(3)]
for t in threads:
    t.start()
inherited = fastdeflate.Compressor(6, 12, 5)
inherited.compress(b"from the parent " * 10)
hung = 0
for i in range(forks):
    time.sleep(random.random() * 0.02)
    pid = os.fork()
    if pid == 0:  # the child: its first calls
        import faulthandler  # (a child that hangs prints its stack before it is killed)
        faulthandler.dump_traceback_later(max(1.0, deadline - 2), exit=False)
        try:
            for w in (12, 15):
                data = b'{"child": %d, "w": %d}' % (i, w) * 20
                payload = fastdeflate.Compressor(6, w, 5).compress(data)
                assert fastdeflate.Decompressor(w).decompress(payload) == data
            payload = inherited.compress(b"after the fork")
            fastdeflate.live_states()
            broadcast(b"to everyone in the child " * 4, [fastdeflate.Compressor(6, 12, 5)])
            os._exit(0)
        except BaseException:
            os._exit(3)
    end = time.monotonic() + deadline
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if os.waitstatus_to_exitcode(status) != 0:
                print(f"child {i} failed: {status}", flush=True)
                sys.exit(1)
            break
        if time.monotonic() > end:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            hung += 1
            break
        time.sleep(0.002)
stop.set()
for t in threads:
    t.join(30)
print("hung", hung, "errors", errors)
print("ok" if hung == 0 and not errors else "FAIL")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason=NO_FORK)
@pytest.mark.timeout(600)
def test_children_forked_under_load_make_their_first_calls(impl):
    out = run_python(FORK_UNDER_LOAD, str(FORKS), str(CHILD_DEADLINE), impl=impl,
                     timeout=FORKS * CHILD_DEADLINE + 120)
    assert out.stdout.strip().endswith("ok"), out.stdout + out.stderr
    tally("children forked under load", FORKS)


FORK_WHILE_A_LOCK_IS_HELD = r"""
import os, sys, threading, time
import fastdeflate
from fastdeflate import _fastdeflate, _pure

impl = _pure if fastdeflate.IMPLEMENTATION == "python" else _fastdeflate
deadline = float(sys.argv[1])
data = b'{"shared": "a message every connection gets"}' * 4
leader = fastdeflate.Compressor(6, 12, 5)
leader.compress(data)  # kept for compress once: a follower takes the shared state's lock
arrived, released = threading.Event(), threading.Event()


def hook(point):
    # The other thread stops while it holds the lock of the shared state (a ring's in the
    # extension, the kept messages' in the fallback).
    if point == "claim locked" and threading.current_thread() is not main:
        arrived.set()
        released.wait(30)


main = threading.current_thread()
impl._set_test_hook(hook)
follower = fastdeflate.Compressor(6, 12, 5)
user = threading.Thread(target=lambda: follower.compress(data))
user.start()
assert arrived.wait(30)
impl._set_test_hook(None)
# The holder lets go a little later: fork() waits for it, or forks with the lock held.
threading.Timer(0.5, released.set).start()
pid = os.fork()
if pid == 0:
    c = fastdeflate.Compressor(6, 12, 5)
    assert fastdeflate.Decompressor(12).decompress(c.compress(data)) == data
    c.compress(data)
    os._exit(0)
end = time.monotonic() + deadline
while not os.waitpid(pid, os.WNOHANG)[0]:
    if time.monotonic() > end:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        print("the child hung on a lock held by a thread it does not have")
        sys.exit(1)
    time.sleep(0.005)
user.join(30)
print("ok")
"""


@pytest.mark.test_build
@pytest.mark.skipif(not hasattr(os, "fork"), reason=NO_FORK)
def test_fork_while_another_thread_holds_a_lock_of_the_shared_state(impl):
    """Deterministic: a thread is stopped (test hook) while it holds the shared state's
    lock, and the main thread forks. fork() must wait for the lock; a child forked with
    it held would wait for it forever."""
    out = run_python(FORK_WHILE_A_LOCK_IS_HELD, str(CHILD_DEADLINE), impl=impl,
                     timeout=CHILD_DEADLINE + 60)
    assert out.stdout.strip() == "ok", out.stdout + out.stderr


FORK_WHILE_EACH_MODULE_LOCK_IS_HELD = r"""
import importlib, os, pkgutil, sys, threading
import fastdeflate

deadline = float(sys.argv[1])
# (not modules to import: the command line, and the policy the codecs load as source)
NOT_IMPORTED = {"fastdeflate.__main__", "fastdeflate._compress_once_policy"}
missing = []
for info in pkgutil.walk_packages(fastdeflate.__path__, "fastdeflate."):
    if info.name not in NOT_IMPORTED:
        try:
            importlib.import_module(info.name)
        except ImportError:  # (an integration whose library is not installed here)
            if not info.name.startswith("fastdeflate.integrations."):
                raise
            missing.append(info.name)
print("missing", " ".join(missing))
LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))


def owners(name, module):
    # the module, and the classes defined in it (a class may keep a lock of its own)
    yield name, module
    for attr, value in vars(module).items():
        if isinstance(value, type) and value.__module__ == name:
            yield f"{name}.{attr}", value


found = {}
for name, module in list(sys.modules.items()):
    if name == "fastdeflate" or name.startswith("fastdeflate."):
        for where, holder in owners(name, module):
            for attr, value in vars(holder).items():
                if isinstance(value, LOCK_TYPES):
                    found[f"{where}.{attr}"] = (name, where, attr)
print("locks", " ".join(sorted(found)))
stuck = []


def lock_now(name, where, attr):
    # the lock its owner has now (in the child: after the fork handlers ran)
    holder = sys.modules[name]
    for part in where[len(name):].split(".")[1:]:
        holder = getattr(holder, part)
    return getattr(holder, attr)


for full, (name, where, attr) in sorted(found.items()):
    lock = lock_now(name, where, attr)
    held, release = threading.Event(), threading.Event()

    def hold():
        with lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(30)
    # The holder lets go a little later: fork() waits for it, or forks with it held.
    threading.Timer(0.5, release.set).start()
    pid = os.fork()
    if pid == 0:  # the child takes the lock its module has now
        os._exit(0 if lock_now(name, where, attr).acquire(timeout=deadline) else 1)
    if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0:
        stuck.append(full)
    holder.join(30)
print("stuck", " ".join(stuck))
print("ok" if not stuck else "FAIL")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason=NO_FORK)
@pytest.mark.timeout(300)
def test_no_lock_of_the_package_stays_held_in_a_child():
    """Every module-level lock of the package (the extension's, the fallback's, the
    integrations'), held by another thread at fork(), is free in the child: a preforked
    worker's first message, status() or enable() never waits for a thread it does not
    have. Each lock is held in turn while the main thread forks."""
    out = run_python(FORK_WHILE_EACH_MODULE_LOCK_IS_HELD, "3", timeout=280)
    lines = dict(line.split(" ", 1) if " " in line else (line, "")
                 for line in out.stdout.splitlines())
    found = set(lines.get("locks", "").split())
    assert {"fastdeflate._fallback.parking._counts_lock", "fastdeflate._off_loop._lock",
            "fastdeflate._fallback.compress_once._lock"} <= found, out.stdout + out.stderr
    assert out.stdout.strip().endswith("ok"), out.stdout + out.stderr
    tally("module locks held at a fork", len(found))


def test_a_lock_is_kept_as_it_is_where_there_is_no_fork(monkeypatch):
    """Where ``os.register_at_fork`` is missing (Windows: no fork()), ``free_in_child``
    returns the lock as it is, so the package imports there."""
    monkeypatch.delattr(os, "register_at_fork", raising=False)
    lock = threading.Lock()
    assert _forksafe.free_in_child(lock) is lock
