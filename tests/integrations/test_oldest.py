"""A library older than the oldest version its adapter is tested with is refused as
docs/reference/support.md says: left on its own codec, with a RuntimeWarning, a WARNING
on the ``fastdeflate`` logger and its reason in ``fastdeflate.status()``; the version
installed here (the newest, or the oldest in .ci/steps/15-oldest-libraries.sh) is enabled.

Each case runs a fresh interpreter (an adapter checks the version as it is imported),
where the library's version attribute — what the adapter reads — is set to an older
release before ``fastdeflate.enable()`` and the application's import of the library.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType

import pytest

from _subprocess import run_python

from fastdeflate import integrations

from ._support import skip_module_without_autobahn

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]

#: Per library: the version its adapter requires (pyproject.toml's lower bound), how to
#: make the library say it is older, the application's import that makes enable() patch
#: it, and an object enable() replaces (fastdeflate's once patched, the library's if not).
CASES = {
    "websockets": ("14", "import websockets.version\nwebsockets.version.version = '13.1'",
                   "import websockets.asyncio.server",
                   "websockets.extensions.permessage_deflate.PerMessageDeflate"),
    "aiohttp": ("3.12", "import aiohttp\naiohttp.__version__ = '3.11.18'",
                "import aiohttp.web", "aiohttp._websocket.writer.ZLibCompressor"),
    "wsproto": ("1.2", "import wsproto\nwsproto.__version__ = '1.1.0'",
                "import wsproto.extensions", "type(wsproto.extensions.PerMessageDeflate())"),
    "tornado": ("6.4", "import tornado\ntornado.version = '6.3.3'\n"
                       "tornado.version_info = (6, 3, 3, 0)",
                "import tornado.websocket", "tornado.websocket._PerMessageDeflateCompressor"),
    "daphne": ("4.1", "import daphne\ndaphne.__version__ = '4.0.0'",
               "import daphne.ws_protocol", "daphne.ws_protocol.WebSocketFactory.__init__"),
}

CODE = """
import json, logging, sys, warnings
import fastdeflate

library, older = sys.argv[1], sys.argv[2] == "older"
records = []

class Keep(logging.Handler):
    def emit(self, record):
        records.append([record.levelname, record.getMessage()])

logger = logging.getLogger("fastdeflate")
logger.addHandler(Keep())
logger.setLevel(logging.INFO)
if older:
{older}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    fastdeflate.enable(libraries=[library], fallback=True)
{app_import}
hook = {hook}
print(json.dumps({{
    "warnings": [f"{{w.category.__name__}}: {{w.message}}" for w in caught],
    "log": records,
    "status": fastdeflate.status()["libraries"][library],
    "patched": hook.__module__.startswith("fastdeflate"),
    "adapter": f"fastdeflate.integrations.{{library}}" in sys.modules,
}}))
fastdeflate.disable()
"""


def run(library: str, older: bool, impl: ModuleType) -> dict:
    _, make_older, app_import, hook = CASES[library]
    indent = lambda text: "\n".join("    " + line for line in text.splitlines())
    code = CODE.format(older=indent(make_older), app_import=indent(app_import), hook=hook)
    out = run_python(code, library, "older" if older else "installed", impl=impl)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def skip_without(library: str) -> None:
    if library in ("autobahn", "daphne"):
        skip_module_without_autobahn()
    pytest.importorskip(library)


@pytest.mark.parametrize("library", list(CASES))
def test_an_older_version_is_left_stock_with_a_warning_a_log_line_and_why(
        library: str, impl: ModuleType) -> None:
    skip_without(library)
    oldest = CASES[library][0]
    facts = run(library, True, impl)
    found = {"websockets": "13.1", "aiohttp": "3.11.18", "wsproto": "1.1.0",
             "tornado": "6.3.3", "daphne": "4.0.0"}[library]
    needs = f"needs {library} >= {oldest}"
    # stock: the adapter refused to import, nothing of the library replaced
    assert not facts["patched"] and not facts["adapter"], facts
    warned = [m for m in facts["warnings"] if m.startswith("RuntimeWarning: ")]
    assert len(warned) == 1 and f"{library} left stock" in warned[0], facts["warnings"]
    assert needs in warned[0] and found in warned[0], warned
    warnings_logged = [m for level, m in facts["log"] if level == "WARNING"]
    assert len(warnings_logged) == 1, facts["log"]
    assert f"{library}" in warnings_logged[0] and "left stock" in warnings_logged[0]
    assert needs in warnings_logged[0] and found in warnings_logged[0], warnings_logged
    assert facts["status"]["state"] == "stock", facts["status"]
    assert needs in facts["status"]["why"] and found in facts["status"]["why"], facts


@pytest.mark.parametrize("library", list(CASES))
def test_the_installed_version_is_enabled(library: str, impl: ModuleType) -> None:
    skip_without(library)
    facts = run(library, False, impl)
    assert facts["patched"] and facts["adapter"], facts
    assert facts["warnings"] == [] and facts["status"]["state"] == "enabled", facts
    assert ["INFO", f"fastdeflate enabled for {library} {facts['status']['version']}"] in \
        facts["log"], facts["log"]


@pytest.mark.parametrize("library", list(CASES))
def test_the_oldest_version_is_the_same_everywhere(library: str) -> None:
    """The adapter's minimum, pyproject.toml's extra and the support page agree."""
    oldest = CASES[library][0]
    pyproject = (ROOT / "pyproject.toml").read_text()
    extra = re.search(rf"^{library} = \[(.*)\]$", pyproject, re.M)
    assert extra is not None and re.search(rf'"{library}>={re.escape(oldest)}[;"]',
                                           extra.group(1)), extra
    support = (ROOT / "docs" / "reference" / "support.md").read_text()
    assert f"{library} >={oldest} " in support or f"{library} >={oldest}|" in support
    # (read, not imported: daphne's adapter would load Twisted's flavour of autobahn)
    source = Path(integrations.__file__).with_name(f"{library}.py").read_text()
    assert f">= {oldest}" in source or f'"{oldest}"' in source, library
