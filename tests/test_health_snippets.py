"""docs/how-to/verify.md's recipes, run as written: each health-endpoint snippet serves
``fastdeflate.status()`` as JSON from a real server of its framework (on 127.0.0.1, an
ephemeral port), on both implementations; the logging recipe prints fastdeflate's line
under a real uvicorn and a real gunicorn."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from _subprocess import PACKAGE_PARENT

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "how-to" / "verify.md"
TIMEOUT = 30  # seconds a server has to start and answer


def snippet(marker: str) -> str:
    """The Python block right after ``<!-- marker -->`` on the verify page."""
    text = PAGE.read_text(encoding="utf-8")
    found = re.search(rf"<!-- {re.escape(marker)} -->\n```python\n(.*?)^```", text,
                      re.S | re.M)
    assert found, f"docs/how-to/verify.md has no ```python block after <!-- {marker} -->"
    return found.group(1)


#: Before the snippet: what the server process runs, as an application would (enable()),
#: and a compressor with a live stream, so that status() has a parameter set to show.
PROLOGUE = """\
import fastdeflate, warnings
warnings.simplefilter("ignore")
fastdeflate.enable(fallback=True)
_compressor = fastdeflate.Compressor(6, 15, 8)
_compressor.compress(b"a live stream " * 20)
"""

#: After it: serve ``app`` on a listening socket whose port goes to stdout first.
LISTEN = """
import socket
_sock = socket.socket()
_sock.bind(("127.0.0.1", 0))
_sock.listen(64)
print(_sock.getsockname()[1], flush=True)
"""

UVICORN = LISTEN + """
import uvicorn
uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off")).run(sockets=[_sock])
"""

AIOHTTP = LISTEN + """
web.run_app(app, sock=_sock, print=None)
"""

DJANGO_SETTINGS = """\
import django
from django.conf import settings
settings.configure(ROOT_URLCONF="__main__", ALLOWED_HOSTS=["127.0.0.1"], SECRET_KEY="test")
django.setup()
"""

DJANGO = """
from django.core.asgi import get_asgi_application
app = get_asgi_application()
""" + UVICORN

FRAMEWORKS = {  # the framework's module, and the script around the snippet
    "starlette": ("starlette", PROLOGUE + "{snippet}" + UVICORN),
    "fastapi": ("fastapi", PROLOGUE + "{snippet}" + UVICORN),
    "aiohttp": ("aiohttp", PROLOGUE + "{snippet}" + AIOHTTP),
    "django": ("django", PROLOGUE + DJANGO_SETTINGS + "{snippet}" + DJANGO),
}


def environment(pure: bool) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items()
               if k not in ("FASTDEFLATE_PURE", "FASTDEFLATE_ENABLE")}
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT,
                                                          os.environ.get("PYTHONPATH")]))
    if pure:
        environ["FASTDEFLATE_PURE"] = "1"
    return environ


def read_until(process: subprocess.Popen, stream, wanted, deadline: float) -> str:
    """Lines of ``stream`` until one ``wanted(line)`` accepts (returned), the process
    ends or the deadline passes (AssertionError with what it printed)."""
    seen = []
    while time.monotonic() < deadline:
        ready, _, _ = select.select([stream], [], [], 0.2)
        if ready:
            line = stream.readline()
            if line:
                seen.append(line)
                if wanted(line):
                    return line
                continue
        if process.poll() is not None and not ready:
            break
    process.kill()
    _, rest = process.communicate(timeout=10)
    raise AssertionError(f"not seen; printed: {''.join(seen)}{rest or ''}")


@pytest.fixture
def start(tmp_path):
    processes: list[subprocess.Popen] = []

    def start(argv: list[str], script: str, pure: bool = False) -> subprocess.Popen:
        (tmp_path / "app.py").write_text(script, encoding="utf-8")
        process = subprocess.Popen(argv, cwd=tmp_path, env=environment(pure), text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        processes.append(process)
        return process

    yield start
    for process in processes:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        process.stdout.close()
        process.stderr.close()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("pure", [False, True], ids=["cython", "python"])
@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_the_health_endpoint_serves_status_as_json(framework, pure, start):
    module, script = FRAMEWORKS[framework]
    pytest.importorskip(module)
    if framework == "django":
        pytest.importorskip("uvicorn")
    if framework in ("starlette", "fastapi"):
        pytest.importorskip("uvicorn")
    server = start([sys.executable, "app.py"],
                   script.replace("{snippet}", snippet(f"health: {framework}")), pure)
    deadline = time.monotonic() + TIMEOUT
    port = int(read_until(server, server.stdout, str.strip, deadline))
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/fastdeflate",
                                timeout=TIMEOUT) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("application/json")
        status = json.load(response)
    assert status["version"] and status["implementation"] == ("python" if pure else "cython")
    assert set(status["libraries"]) >= {"websockets", "aiohttp", "wsproto"}
    states = {facts["state"] for facts in status["libraries"].values()}
    assert states <= {"enabled", "pending", "stock", "not installed"}
    if not pure:
        assert status["streams"]["deflate level 6 window 15 memLevel 8 strategy 0"]["live"] >= 1
        if framework == "aiohttp":  # aiohttp's modules are loaded: enabled in the server
            assert status["libraries"]["aiohttp"]["state"] == "enabled"
    assert status["traffic"]["sent"]["messages"] >= 1


LOGGING_APP = """\
{snippet}
import fastdeflate
fastdeflate.enable()

from aiohttp import web

app = web.Application()
"""

ENABLED_LINE = re.compile(r"^INFO:fastdeflate:fastdeflate enabled for (\w+) ")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("server", ["uvicorn", "gunicorn"])
def test_the_logging_recipe_prints_under_uvicorn_and_gunicorn(server, start):
    """The recipe before enable() in the application's module: under uvicorn (whose
    websocket library is loaded before the application) and under gunicorn (aiohttp's
    worker), fastdeflate's INFO line reaches stderr."""
    import fastdeflate

    if fastdeflate.IMPLEMENTATION != "cython":
        pytest.skip("enable() leaves the libraries stock without the compiled extension")
    pytest.importorskip(server)
    pytest.importorskip("aiohttp")
    if server == "uvicorn":
        argv = [sys.executable, "-m", "uvicorn", "app:app", "--host", "127.0.0.1",
                "--port", "0"]
        script = LOGGING_APP.replace("from aiohttp import web\n\napp = web.Application()",
                                     "async def app(scope, receive, send):\n    pass")
    else:
        if sys.platform == "win32":
            pytest.skip("gunicorn does not run on Windows")
        argv = [sys.executable, "-m", "gunicorn", "app:app", "--bind", "127.0.0.1:0",
                "--worker-class", "aiohttp.GunicornWebWorker", "--workers", "1"]
        script = LOGGING_APP
    process = start(argv, script.replace("{snippet}", snippet("snippet: logging")))
    line = read_until(process, process.stderr, ENABLED_LINE.match,
                      time.monotonic() + TIMEOUT)
    assert ENABLED_LINE.match(line).group(1) in ("websockets", "aiohttp", "wsproto")
