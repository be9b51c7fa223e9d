"""Check the wheel jobs' test sets: for every wheel cibuildwheel would build, what its test
run installs, and that FASTDEFLATE_ABSENT_PEERS names exactly the optional test peers it
leaves out (so the skip check lets those, and only those, skip), and that the
free-threaded wheels, and only they, run their suite with the GIL off (PYTHON_GIL=0).

    python .ci/wheel_test_sets.py [--table]

Needs cibuildwheel (its own reading of [tool.cibuildwheel] in pyproject.toml, overrides
included). Also checks the workflow's other test runs with the skip check on (the sdist
job): the foreign peers, which no job installs, are listed absent there too. Exits
non-zero on a mismatch.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: What the wheel workflow builds: each runner's native 64-bit architectures.
TARGETS = {"linux": ("x86_64", "aarch64"), "macos": ("x86_64", "arm64"),
           "windows": ("AMD64", "ARM64")}
#: Optional test peers: distribution name -> module name (FASTDEFLATE_ABSENT_PEERS).
PEERS = {"autobahn": "autobahn", "isal": "isal", "matplotlib": "matplotlib",
         "zlib-ng": "zlib_ng"}
#: Test peers that are no Python packages (tests/integrations/test_foreign_peers.py): no
#: wheel job installs them, so every one lists them absent.
FOREIGN_PEERS = {"chromium", "node-ws"}


def name_of(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower()


def expand(extras: list[str], table: dict[str, list[str]]) -> list[str]:
    """The requirements of ``extras`` of this project, self-references followed."""
    out: list[str] = []
    for extra in extras:
        for requirement in table[extra]:
            own = re.fullmatch(r"fastdeflate\[([\w,-]+)\]", requirement)
            out += expand(own[1].split(","), table) if own else [requirement]
    return out


def python_of(identifier: str) -> tuple[int, int]:
    digits = re.match(r"cp3(\d+)", identifier)
    assert digits is not None, identifier
    return 3, int(digits[1])


def installed(requirement: str, identifier: str) -> bool:
    """False for a requirement whose marker excludes this wheel's Python (autobahn's)."""
    marker = re.search(r"python_version\s*>=\s*'3\.(\d+)'", requirement)
    return marker is None or python_of(identifier) >= (3, int(marker[1]))


def builds() -> list[tuple[str, object]]:
    """(identifier, cibuildwheel's build options) for every wheel the workflow builds."""
    from cibuildwheel.architecture import Architecture
    from cibuildwheel.options import CommandLineArguments, compute_options
    from cibuildwheel.platforms import ALL_PLATFORM_MODULES, get_build_identifiers

    found = []
    for platform, archs in TARGETS.items():
        arguments = CommandLineArguments.defaults()
        arguments.platform = platform
        arguments.package_dir = ROOT
        arguments.archs = ",".join(archs)
        options = compute_options(platform, arguments, env={})
        identifiers = get_build_identifiers(
            ALL_PLATFORM_MODULES[platform], options.globals.build_selector,
            Architecture.parse_config(",".join(archs), platform))
        found += [(identifier, options.build_options(identifier))
                  for identifier in identifiers]
    return found


def test_sets(wheels: list[tuple[str, object]]
              ) -> list[tuple[str, list[str], set[str], set[str]]]:
    """(identifier, requirements, peers installed, peers listed absent) for each wheel."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    rows = []
    for identifier, build in wheels:
        requirements = expand(build.test_extras.strip("[]").split(","), extras)
        requirements += build.test_requires
        requirements = [r for r in requirements if installed(r, identifier)]
        names = {name_of(r) for r in requirements}
        peers = {module for dist, module in PEERS.items() if dist in names}
        environment = build.test_environment.as_dictionary(prev_environment={})
        absent = set(environment.get("FASTDEFLATE_ABSENT_PEERS", "").split())
        rows.append((identifier, requirements, peers, absent))
    return rows


def gil_problems(wheels: list[tuple[str, object]]) -> list[str]:
    """Every free-threaded wheel (cp3..t) runs its suite with PYTHON_GIL=0, and no other
    does (a GIL build refuses to start with it)."""
    found = []
    for identifier, build in wheels:
        environment = build.test_environment.as_dictionary(prev_environment={})
        free_threaded = re.match(r"cp3\d+t-", identifier) is not None
        if (environment.get("PYTHON_GIL") == "0") != free_threaded:
            found.append(f"{identifier}: PYTHON_GIL={environment.get('PYTHON_GIL')!r} "
                         f"in its test run ({'free-threaded' if free_threaded else 'GIL'} build)")
    return found


def problems(rows: list[tuple[str, list[str], set[str], set[str]]]) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pinned = {name_of(r): r for r in expand(["test", "all"],
                                            project["project"]["optional-dependencies"])}
    found = []
    for identifier, requirements, peers, absent in rows:
        missing = set(PEERS.values()) - peers | FOREIGN_PEERS
        if python_of(identifier) < (3, 11):
            missing.discard("autobahn")  # fastdeflate supports none there: not a peer
            absent.discard("autobahn")
        if missing != absent:
            found.append(f"{identifier}: leaves out {sorted(missing)}, but "
                         f"FASTDEFLATE_ABSENT_PEERS lists {sorted(absent)}")
        for requirement in requirements:  # the same versions as the extras ask for
            if requirement != pinned.get(name_of(requirement), requirement):
                found.append(f"{identifier}: {requirement!r}, the extras say "
                             f"{pinned[name_of(requirement)]!r}")
    return found


def env_blocks(workflow: str) -> list[tuple[int, dict[str, str]]]:
    """(line number, variables) of every ``env:`` mapping in a workflow's text."""
    blocks = []
    lines = workflow.splitlines()
    for number, line in enumerate(lines, 1):
        if line.strip() != "env:":
            continue
        indent = len(line) - len(line.lstrip())
        variables = {}
        for item in lines[number:]:
            if item.strip() and len(item) - len(item.lstrip()) <= indent:
                break
            key, colon, value = item.strip().partition(":")
            if colon and not key.startswith("#"):
                variables[key] = value.split(" #")[0].strip().strip("\"'")
        blocks.append((number, variables))
    return blocks


def workflow_problems(workflow: str) -> list[str]:
    """A test run with the skip check on (FASTDEFLATE_CHECK_SKIPS: "1") outside
    cibuildwheel must list the foreign peers absent: no job installs them (the sdist has
    no tests/peers/node_modules), and their tests skip as a missing peer."""
    found = []
    for number, variables in env_blocks(workflow):
        if variables.get("FASTDEFLATE_CHECK_SKIPS") != "1":
            continue
        absent = set(variables.get("FASTDEFLATE_ABSENT_PEERS", "").split())
        if not FOREIGN_PEERS <= absent:
            found.append(f"wheels.yml line {number}: a test run with the skip check on lists "
                         f"{sorted(absent)} absent, not the foreign peers "
                         f"{sorted(FOREIGN_PEERS)} (no job installs them)")
    return found


def main() -> int:
    wheels = builds()
    rows = test_sets(wheels)
    if "--table" in sys.argv:
        for identifier, _, peers, absent in rows:
            print(f"{identifier:28} peers: {' '.join(sorted(peers)) or '-':36} "
                  f"absent: {' '.join(sorted(absent)) or '-'}")
    found = problems(rows) + gil_problems(wheels) + workflow_problems(
        (ROOT / ".github" / "workflows" / "wheels.yml").read_text())
    for line in found:
        print("FAIL:", line, file=sys.stderr)
    print(f"wheel test sets: {len(rows)} wheels checked, {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
