"""Written as if there were no GIL: the rules of extension/ownership.pxi ("no GIL
assumed"), each tested where a GIL build can see it break.

- A finalizer never waits for a ring lock: a codec object freed while its own thread
  holds its ring's lock (a last reference dropped inside the locked region, a garbage
  collection there, a fork hook that holds every ring lock while another thread frees
  one) leaves its stream to the next holder of that lock, and nothing hangs.
- No Python reference is released while a ring lock is held unless it is not the last
  (a leader's strong reference, taken under the lock, dies after it).
- No module-level object is rebound after import without a lock (checked in the
  sources: the extension's and the package's).
- A churn of threads on shared parameter sets (broadcasts while leaders die, parking at
  once with the sweeper, status(), set_inflate(), test hooks set and cleared) keeps
  every payload decodable by stock zlib, and ends.

The scenes that hung before run in a subprocess with a deadline: a hang fails the test
instead of the run.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from _subprocess import run_python

ROOT = Path(__file__).resolve().parents[1]
DEADLINE = 60  # seconds: each scene takes well under one when nothing hangs

# Common to the scenes: the implementation named by argv[1], a message worth sharing,
# and stock zlib as every peer.
PRELUDE = r'''
import gc, os, sys, threading, time, zlib
from fastdeflate import _fastdeflate, _pure
impl = _pure if sys.argv[1] == "python" else _fastdeflate
impl.set_live_states(16)  # idle objects keep their streams (whatever FASTDEFLATE_* says)
impl.set_park_after(10)
TAIL = b"\x00\x00\xff\xff"
MESSAGE = b"".join(b'{"id":%d,"px":%d,"side":"buy"}' % (i, i * 7) for i in range(12))

def decoded(payload, window_bits=12):
    return zlib.decompressobj(-window_bits).decompress(payload + TAIL)

def live(kind="deflate"):
    """Live streams of the (window 12, memLevel 5) parameter sets of ``kind``."""
    return sum(n for key, (n, idle) in impl.live_states().items()
               if key[0] == kind and 12 in key[1:])
'''


def scene(impl: ModuleType, code: str, *argv: str) -> str:
    """Run ``PRELUDE + code`` on ``impl`` in a fresh interpreter (``argv`` after the
    implementation's name); its output. A hang (past DEADLINE) or an error fails the
    test with what it printed."""
    name = "python" if impl.__name__.endswith("_pure") else "cython"
    try:
        done = run_python(PRELUDE + code, name, *argv, impl=impl, timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung for {DEADLINE} s (a thread waits for a lock it holds?)")
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


# --- a finalizer never waits for a ring lock ---------------------------------------------

@pytest.mark.test_build
def test_a_leader_whose_last_reference_dies_in_the_ring_lock_is_freed_after_it(impl):
    """A follower takes a strong reference to its leader under the ring lock
    (compress once's _grouped); the test drops every other one there (the hook point
    "leader held"), so the follower's is the last. On a free-threaded CPython another
    thread does that; it hung every compressor of the parameter set."""
    out = scene(impl, r'''
held = [impl.Compressor(6, 12, 5)]
follower = impl.Compressor(6, 12, 5)
assert decoded(held[0].compress(MESSAGE)) == MESSAGE
points = []
def hook(point):
    if point == "leader held" and held:
        held.clear()  # the follower's reference is the leader's last
        points.append(point)
impl._set_test_hook(hook)
try:
    payload = follower.compress(MESSAGE)
finally:
    impl._set_test_hook(None)
assert points == ["leader held"], points
peer = zlib.decompressobj(-12)
assert peer.decompress(payload + TAIL) == MESSAGE
# the follower goes on; the leader's stream was ended (its ring lock's next holder)
for i in range(3):
    message = MESSAGE + b"%d" % i
    assert peer.decompress(follower.compress(message) + TAIL) in (message,), i
print("live", live())
''')
    live = int(out.split()[-1])
    assert live <= 1  # the follower's own at most: the leader's was ended


@pytest.mark.test_build
@pytest.mark.parametrize("kind", ["compressor", "decompressor"])
@pytest.mark.parametrize("how", ["last reference", "garbage collection"])
def test_a_codec_object_freed_while_its_thread_holds_the_ring_lock(impl, kind, how):
    """At "claim locked" a call holds its ring's lock; there the test frees an idle
    object of the same parameter set (it holds a live stream, linked in the ring): by
    dropping its last reference, or by a collection of the cycle it is in (the hang
    seen with the GIL: a collection at a thread's start). Its stream is ended by the
    ring lock's next holder: no hang, no stream left counted."""
    out = scene(impl, r'''
KIND, HOW = sys.argv[2], sys.argv[3]
def make():
    obj = impl.Compressor(6, 12, 5) if KIND == "compressor" else impl.Decompressor(12)
    peers[id(obj)] = (zlib.decompressobj(-12) if KIND == "compressor"
                      else zlib.compressobj(6, zlib.DEFLATED, -12, 5))
    return obj
def use(obj, message):
    peer = peers[id(obj)]
    if KIND == "compressor":
        assert peer.decompress(obj.compress(message) + TAIL) == message
    else:
        payload = peer.compress(message) + peer.flush(zlib.Z_SYNC_FLUSH)
        assert obj.decompress(payload[:-4]) == message  # (sent without its TAIL)
peers = {}
impl.set_inflate("zlib")  # decompressors keep zlib streams (ISA-L's work is shelved)
victim, caller = make(), make()
use(victim, MESSAGE)  # idle now, holding its live stream
use(caller, MESSAGE + b"!")
KIND_OF_STREAM = "deflate" if KIND == "compressor" else "inflate"
before = live(KIND_OF_STREAM)
if HOW == "garbage collection":
    cycle = [victim]
    cycle.append(cycle)
    del cycle
box = [victim]
del victim
freed = []
def hook(point):
    if point == "claim locked" and box:
        box.clear()
        if HOW == "garbage collection":
            gc.collect()
        freed.append(point)
gc.disable()
impl._set_test_hook(hook)
try:
    use(caller, MESSAGE + b"?")
finally:
    impl._set_test_hook(None)
    gc.enable()
if impl is _fastdeflate:
    assert freed == ["claim locked"], freed
use(caller, MESSAGE + b"...")  # the same parameter set goes on
print("live", before, live(KIND_OF_STREAM))
''', kind, how)
    before, after = map(int, out.split()[-2:])
    assert after == before - 1 if impl.__name__.endswith("_fastdeflate") else after == 0


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_fork_while_a_thread_holding_the_import_lock_frees_a_codec_object(impl):
    """fork() runs fastdeflate's before-fork hook (it takes every ring lock), then
    CPython takes the import lock. A thread that holds the import lock meanwhile and
    frees a codec object must not wait for its ring lock: the fork waits for that
    thread, which would wait for the fork."""
    scene(impl, r'''
import _imp, warnings
warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads (3.12+)
box = [impl.Compressor(6, 12, 5)]
assert decoded(box[0].compress(MESSAGE)) == MESSAGE
holding = threading.Event()
def importer():
    _imp.acquire_lock()
    try:
        holding.set()
        time.sleep(0.5)  # the main thread is in fork(), past fastdeflate's hook
        box.clear()      # the object's __dealloc__: its ring lock is the fork's
    finally:
        _imp.release_lock()
thread = threading.Thread(target=importer)
thread.start()
holding.wait()
pid = os.fork()
if pid == 0:
    c = impl.Compressor(6, 12, 5)  # the child's rings work
    os._exit(0 if decoded(c.compress(MESSAGE)) == MESSAGE else 1)
_, status = os.waitpid(pid, 0)
thread.join()
assert status == 0, status
c = impl.Compressor(6, 12, 5)
assert decoded(c.compress(MESSAGE)) == MESSAGE
print("live", live())
''')


# --- no module-level object rebound after import without a lock --------------------------

# Module-level names the extension may rebind, and why that is safe: C values (the
# check reads their declarations) and these.
EXTENSION_REBOUND = {
    # rebound in a forked child only, which runs one thread
    "_sweeper_lock": "child after fork",
    "_sweeper_wake": "child after fork",
}
C_SCALAR = re.compile(
    r"^cdef\s+(?:(?:unsigned|signed|long|short|const)\s+)*"
    r"(?:bint|int|char|long|size_t|Py_ssize_t|double|float|PyTime_t)\b[^=(]*?\b(\w+)\s*(?:=|$)",
    re.M)
# (the same in Cython's pure-Python syntax: compress once's policy, which the extension
# includes)
PURE_C_SCALAR = re.compile(
    r"^(\w+)\s*=\s*cython\.declare\(cython\.(?:bint|int|long|size_t|Py_ssize_t|double"
    r"|ulonglong|longlong)\b", re.M)


def extension_sources() -> str:
    parts = sorted((ROOT / "extension").rglob("*.pxi"))
    policy = ROOT / "fastdeflate" / "_compress_once_policy.py"
    return "\n".join(p.read_text() for p in parts + ([policy] if parts else []))


def test_the_extension_rebinds_no_module_level_object():
    """Every name a function of the extension declares ``global`` is a C value (a race
    there is on a number, never on a reference count: no reader can take a reference
    to an object another thread has just freed), or listed above with its reason."""
    sources = extension_sources()
    if not sources:
        pytest.skip("the extension's sources are not in this tree")
    scalars = set(C_SCALAR.findall(sources)) | set(PURE_C_SCALAR.findall(sources))
    rebound = set()
    for line in re.findall(r"^\s+global\s+(.+)$", sources, re.M):
        rebound.update(name.strip() for name in line.split(","))
    objects = sorted(rebound - scalars - set(EXTENSION_REBOUND))
    assert not objects, f"module-level objects rebound after import: {objects}"


def _rebinds_outside_a_lock(tree: ast.AST) -> list[str]:
    """``name:line`` of each assignment to a ``global`` name that is not inside a
    ``with`` block whose context names a lock."""
    found = []

    def visit(node: ast.AST, names: set[str], locked: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = {n for child in ast.walk(node) if isinstance(child, ast.Global)
                     for n in child.names}
            locked = False
        if isinstance(node, (ast.With, ast.AsyncWith)):
            locked = locked or any("lock" in ast.unparse(item.context_expr).lower()
                                   for item in node.items)
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and names:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name) and leaf.id in names and not locked:
                        found.append(f"{leaf.id}:{node.lineno}")
        for child in ast.iter_child_nodes(node):
            visit(child, names, locked)

    visit(tree, set(), False)
    return found


# Globals of the package rebound outside a lock, and why that is safe.
PACKAGE_REBOUND = {
    ("fastdeflate/integrations/websockets.py", "_last_frame"):
        "a cache on every frame's path: read once, and what it holds is used only if "
        "its payload is the very object being sent (any frame it holds is right or unused)",
}


def test_the_package_rebinds_module_globals_under_a_lock():
    """Every assignment to a ``global`` name in the package is made inside a
    ``with ...lock...:`` block (or listed above): setters that return the previous value
    make a read and a write one step, and a no-GIL reader sees one value or the other."""
    package = ROOT / "fastdeflate"
    if not package.is_dir():
        pytest.skip("the package's sources are not in this tree")
    unlocked = {}
    for path in sorted(package.rglob("*.py")):
        where = str(path.relative_to(ROOT))
        found = [f for f in _rebinds_outside_a_lock(ast.parse(path.read_text()))
                 if (where, f.split(":")[0]) not in PACKAGE_REBOUND]
        if found:
            unlocked[where] = found
    assert not unlocked, unlocked


def test_the_rebinding_check_sees_an_unlocked_rebinding():
    """The check above is not vacuous: it finds what it looks for."""
    tree = ast.parse("x = 0\nlock = None\n"
                     "def bad(v):\n    global x\n    x = v\n"
                     "def good(v):\n    global x\n    with lock:\n        x = v\n")
    assert _rebinds_outside_a_lock(tree) == ["x:5"]
    assert C_SCALAR.findall("cdef bint _a = True\ncdef object _b = None\n"
                            "cdef unsigned long long _c\ncdef str _d = 'x'\n") == ["_a", "_c"]


# --- churn: threads on shared parameter sets ---------------------------------------------

CHURN = r'''
import fastdeflate, random
SECONDS = float(sys.argv[2])
impl._set_release_gil_always(True)  # threads interleave inside every call
impl.set_live_states(2)  # parking and lending at every turn
PARAMETERS = [(6, 12, 5), (1, 15, 8)]  # websockets' and aiohttp's sets, shared by all
MESSAGES = [b"".join(b'{"id":%d,"px":%d,"side":"%s"}' % (i * j, j, b"buy" if j % 3 else b"sell")
                     for j in range(5 + i % 40)) for i in range(24)]
stop = time.monotonic() + SECONDS
errors, counts = [], {"messages": 0, "doomed": 0, "replaced": 0}
doomed = []  # used codec objects whose last reference a hook drops inside a locked region

def doom():
    level, wbits, mem = random.choice(PARAMETERS)
    obj = impl.Compressor(level, wbits, mem) if random.random() < 0.5 else impl.Decompressor(wbits)
    if isinstance(obj, impl.Compressor):
        obj.compress(random.choice(MESSAGES))
    else:
        c = zlib.compressobj(6, zlib.DEFLATED, -wbits)
        obj.decompress((c.compress(MESSAGES[0]) + c.flush(zlib.Z_SYNC_FLUSH))[:-4])
    doomed.append(obj)

def hook(point):
    if point in ("claim locked", "leader held", "settle", "follow", "adopt") and doomed:
        try:
            doomed.pop()  # its last reference, here (a ring lock held at some points)
            counts["doomed"] += 1
        except IndexError:
            pass

class Member:
    def __init__(self, params):
        self.c = impl.Compressor(*params)
        self.peer = zlib.decompressobj(-params[1])
    def check(self, payload, message):
        assert self.peer.decompress(payload + TAIL) == message, "a peer got wrong bytes"

def room(seed):
    rng = random.Random(seed)
    params = PARAMETERS[seed % 2]
    members = [Member(params) for _ in range(6)]
    n = seed
    while time.monotonic() < stop:
        n += 1
        message = MESSAGES[n % len(MESSAGES)]  # the same objects in every room: shared
        if rng.random() < 0.5:
            payloads = fastdeflate.broadcast(message, [m.c for m in members])
        else:
            payloads = [m.c.compress(message) for m in members]
        for m, p in zip(members, payloads):
            m.check(p, message)
        counts["messages"] += len(members)
        r = rng.random()
        if r < 0.15:  # a leader (or any member) dies while other rooms follow it
            members[rng.randrange(len(members))] = Member(params)
            counts["replaced"] += 1
        elif r < 0.25:  # a private message: a straggler
            m = members[rng.randrange(len(members))]
            private = b"private %d " % n + message[:80]
            m.check(m.c.compress(private), private)

def receiver(seed):
    rng = random.Random(seed)
    pairs = []
    while time.monotonic() < stop:
        if len(pairs) < 6 or rng.random() < 0.1:
            wbits = rng.choice((12, 15))
            pairs.append((impl.Decompressor(wbits), zlib.compressobj(6, zlib.DEFLATED, -wbits)))
            if len(pairs) > 8:
                pairs.pop(rng.randrange(len(pairs)))
        d, c = pairs[rng.randrange(len(pairs))]
        message = MESSAGES[rng.randrange(len(MESSAGES))]
        payload = c.compress(message) + c.flush(zlib.Z_SYNC_FLUSH)
        assert d.decompress(payload[:-4]) == message, "a decompressor got wrong bytes"
        counts["messages"] += 1

def operator():
    rng = random.Random(7)
    while time.monotonic() < stop:
        r = rng.random()
        if r < 0.2:
            impl.set_park_after(rng.choice((0, 0.001, 10)))  # the sweeper parks meanwhile
        elif r < 0.35:
            impl.set_inflate(rng.choice(("auto", "zlib")))
        elif r < 0.6:
            report = fastdeflate.status()
            assert report["implementation"] == fastdeflate.IMPLEMENTATION
            impl.live_states()
            assert impl._kept_messages() >= 0 and impl._quiet_sets() >= 0  # (ring locks)
        elif r < 0.8:
            impl._set_test_hook(rng.choice((hook, None)))  # set and cleared while others run
        for _ in range(16 - len(doomed)):  # (bounded: the hooks pop meanwhile)
            doom()
        time.sleep(0.001)

def guarded(target, *args):
    def run():
        try:
            target(*args)
        except BaseException as exc:
            errors.append(repr(exc))
    return threading.Thread(target=run, daemon=True)

threads = ([guarded(room, seed) for seed in range(4)] + [guarded(receiver, 11)]
           + [guarded(operator)])
for t in threads:
    t.start()
for t in threads:
    t.join(SECONDS + 30)
if any(t.is_alive() for t in threads):
    import faulthandler
    faulthandler.dump_traceback(all_threads=True)
    raise AssertionError("a thread never ended")
impl._set_test_hook(None)
assert not errors, errors
threads = doomed = None
gc.collect()
impl._forget_kept()  # the spare streams nobody holds
left = {k: v for k, v in impl.live_states().items() if v[0]}
# every codec object is gone: no stream may be left counted (an orphan never released)
assert not left, left
print(counts["messages"], counts["doomed"], counts["replaced"])
'''


@pytest.mark.test_build
def test_churn_of_threads_on_shared_parameter_sets(impl):
    """Four rooms broadcast the same messages on two shared parameter sets (members
    replaced, so leaders die while others follow them; private messages make
    stragglers), a thread decompresses, and an operator thread parks at once and back
    (the sweeper running), switches the inflate engine, asks status(), live_states()
    and the test counters of kept messages, and sets and clears a test hook that drops codec objects' last
    references inside locked regions, all with the GIL released around every call.
    Every payload decodes at stock zlib, every thread ends, and once every object is
    gone no stream is left counted."""
    out = scene(impl, CHURN, "2")
    messages, doomed, replaced = map(int, out.split())
    assert messages > 100 and replaced > 0
    if impl.__name__.endswith("_fastdeflate"):
        assert doomed > 0  # the hook points of the extension were reached
