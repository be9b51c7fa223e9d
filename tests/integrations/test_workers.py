"""Worker processes: every process that serves uses fastdeflate, however it was started.

Pre-fork and spawn servers serve from processes that never ran the application's
``fastdeflate.enable()``. Three ways to enable fastdeflate there, each tried with uvicorn
``--workers 2``, uvicorn ``--reload``, gunicorn with uvicorn's worker (``-w 2``) and
hypercorn ``-w 2``:

- ``env``: ``FASTDEFLATE_ENABLE=1`` in the environment (the ``fastdeflate-enable.pth``
  start-up hook reads it in every interpreter);
- ``run``: ``python -m fastdeflate run -- SERVER ...``;
- ``enable()``: a launcher that calls ``fastdeflate.enable()`` and then starts the server
  in-process (its workers inherit FASTDEFLATE_ENABLE from it).

Proof comes from the serving processes themselves: each worker writes at start-up
(lifespan) whether its websocket library is patched, and each reply to a stock websockets
client says which process served it, that the library is patched there, and which
fastdeflate codec objects that process holds; every message round-trips exactly.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Iterator

import pytest

from _skipcheck import POSIX_SERVERS_ONLY
from _tally import note
from fastdeflate._status import STARTUP_HOOK, startup_hook

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(os.name != "posix", reason=POSIX_SERVERS_ONLY)]

DEADLINE = 60.0  # seconds for a server to come up

APP = textwrap.dedent('''
    """A raw ASGI app: each worker notes at start-up whether fastdeflate drives its
    websocket library; each message is echoed with what the serving process runs."""
    import json, os
    import fastdeflate
    from fastdeflate import integrations


    def facts():
        return {"pid": os.getpid(), "patched": integrations.enabled(pending=False),
                "implementation": fastdeflate.IMPLEMENTATION,
                "codec": sorted({key[0] for key in fastdeflate.live_states()})}


    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                event = await receive()
                if event["type"] == "lifespan.startup":
                    path = os.path.join(os.environ["WORKER_REPORTS"], str(os.getpid()))
                    with open(path + ".tmp", "w") as f:
                        json.dump(facts(), f)
                    os.replace(path + ".tmp", path)  # whole, or not there yet
                    await send({"type": "lifespan.startup.complete"})
                elif event["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "websocket":
            return
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        while True:
            event = await receive()
            if event["type"] == "websocket.disconnect":
                return
            reply = dict(facts(), echo=event.get("text"))
            await send({"type": "websocket.send", "text": json.dumps(reply)})
''')

ENABLE_THEN_SERVE = textwrap.dedent('''
    """A launcher that enables fastdeflate, then runs the server in this process."""
    import sys
    import fastdeflate

    if __name__ == "__main__":  # (spawned workers import this module again)
        assert fastdeflate.enable(), "nothing to enable"
        server, args = sys.argv[1], sys.argv[2:]
        sys.argv = [server, *args]
        if server == "uvicorn":
            from uvicorn.main import main
            main()
        elif server == "gunicorn":
            from gunicorn.app.wsgiapp import run
            run()
        else:
            from hypercorn.__main__ import main
            sys.exit(main(args))
''')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_args(server: str, port: int) -> tuple[list[str], str, int]:
    """(the server's arguments after its name, the library it serves websockets with,
    the number of serving processes)."""
    if server == "uvicorn-workers":
        return ["app:app", "--port", str(port), "--workers", "2"], "websockets", 2
    if server == "uvicorn-reload":
        return ["app:app", "--port", str(port), "--reload"], "websockets", 1
    if server == "gunicorn":
        return ["app:app", "-k", "uvicorn_worker.UvicornWorker", "-w", "2",
                "-b", f"127.0.0.1:{port}"], "websockets", 2
    return ["app:app", "-w", "2", "-b", f"127.0.0.1:{port}"], "wsproto", 2


def command(launcher: str, server: str, port: int) -> tuple[list[str], dict[str, str]]:
    args, _, _ = server_args(server, port)
    name = server.partition("-")[0]
    module = {"uvicorn": ["-m", "uvicorn"], "gunicorn": ["-m", "gunicorn"],
              "hypercorn": ["-m", "hypercorn"]}[name]
    env = {k: v for k, v in os.environ.items() if k != "FASTDEFLATE_ENABLE"}
    if launcher == "env":
        return [sys.executable, *module, *args], dict(env, FASTDEFLATE_ENABLE="1")
    if launcher == "run":
        return [sys.executable, "-m", "fastdeflate", "run", "--", sys.executable, *module,
                *args], env
    return [sys.executable, "launcher.py", name, *args], env


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "launcher.py").write_text(ENABLE_THEN_SERVE)
    (tmp_path / "reports").mkdir()
    return tmp_path


@pytest.fixture
def serve(site: Path) -> Iterator:
    procs: list[subprocess.Popen] = []

    def start(launcher: str, server: str) -> tuple[int, int, str]:
        port = free_port()
        argv, env = command(launcher, server, port)
        env["WORKER_REPORTS"] = str(site / "reports")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
        proc = subprocess.Popen(argv, cwd=site, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        procs.append(proc)
        _, library, processes = server_args(server, port)
        deadline = time.monotonic() + DEADLINE
        while len(worker_reports(site)) < processes:
            if proc.poll() is not None or time.monotonic() > deadline:
                output = stop(proc)
                pytest.fail(f"{' '.join(argv)}: no {processes} serving processes:\n{output}")
            time.sleep(0.05)
        return port, processes, library

    yield start
    for proc in procs:
        stop(proc)


def worker_reports(site: Path) -> list[Path]:
    """The reports the serving processes have written whole (named by their pid)."""
    return [p for p in (site / "reports").iterdir() if p.name.isdigit()]


def stop(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(15)
    return proc.stdout.read() if proc.stdout else ""


def exchange(port: int, n: int) -> list[dict]:
    """A stock websockets client sends two varied JSON messages; returns the replies."""
    from websockets.sync.client import connect

    replies = []
    with connect(f"ws://127.0.0.1:{port}/", compression="deflate", open_timeout=20) as ws:
        extensions = ws.response.headers.get("Sec-WebSocket-Extensions", "")
        assert "permessage-deflate" in extensions, extensions
        for i in range(2):
            message = json.dumps({"n": n, "i": i, "data": [n * i * j % 97 for j in range(200)]})
            ws.send(message)
            reply = json.loads(ws.recv(timeout=20))
            assert reply["echo"] == message
            replies.append(reply)
    return replies


SERVERS = ["uvicorn-workers", "uvicorn-reload", "gunicorn", "hypercorn"]


# `run` only sets the variable for its command: one server shows it.
CASES = [(server, launcher) for server in SERVERS for launcher in ("env", "enable()")]
CASES.insert(0, ("uvicorn-workers", "run"))


@pytest.mark.parametrize(("server", "launcher"), CASES)
def test_every_serving_process_uses_fastdeflate(serve, site, server, launcher):
    if startup_hook() is None:  # (spawned workers need it whatever the launcher)
        pytest.skip(f"no {STARTUP_HOOK} in site-packages (an editable install): "
                    "FASTDEFLATE_ENABLE is not read at start-up here")
    port, processes, library = serve(launcher, server)
    reports = {int(p.name): json.loads(p.read_text()) for p in worker_reports(site)}
    assert len(reports) == processes
    for pid, facts in reports.items():
        assert library in facts["patched"], f"worker {pid} serves with stock {library}"
        assert facts["implementation"] == "cython"
    seen: dict[int, dict] = {}
    deadline = time.monotonic() + 30
    n = 0
    while len(seen) < processes and time.monotonic() < deadline:
        try:
            replies = exchange(port, n)
        except ConnectionRefusedError:  # a worker reports before it listens (uvicorn's
            time.sleep(0.1)             # --reload binds the socket, the worker listens)
            continue
        for reply in replies:
            seen[reply["pid"]] = reply
        n += 1
    assert set(seen) == set(reports), f"served by {sorted(seen)}, workers {sorted(reports)}"
    for pid, reply in seen.items():
        assert library in reply["patched"]
        assert {"deflate", "inflate"} <= set(reply["codec"]), (pid, reply["codec"])
    note(f"workers: {server} × {launcher}: {processes} serving processes, each {library} "
         f"patched, fastdeflate {'/'.join(sorted(seen[min(seen)]['codec']))} serving")
