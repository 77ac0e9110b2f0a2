"""docs/ cannot drift from the binary and the sources.

- Every flag that `spate <command> --help` lists (for every command that
  `spate --help` lists) has a row in docs/configuration.md naming that
  command, with the default that --help prints; every flag the page names
  exists (in some command's --help, or as a hidden flag the cli/ sources
  define).
- Every key of etc/spate.conf is a flag of `spate serve`, every serve flag but
  --config and --help is a key there, and the page's key list is exactly that set.
- Every SPATE_* environment variable the sources read is on the page, and
  every SPATE_* name on the page is read somewhere in the tree.
- Every relative link in README.md and docs/*.md points at a file that
  exists, and a #fragment at a heading of that file.
- README.md stays at most 200 lines.

Runs the real binary: SPATE_BIN, else build/spate.
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
CONFIG_DOC = DOCS / "configuration.md"
SPATE_BIN = Path(os.environ.get("SPATE_BIN") or REPO / "build" / "spate")

# Trees that are not sources: build outputs, virtualenvs, VCS data.
SKIP_DIRS = {".git", "build", "build-asan", "build-tsan", "build-fuzz", "node_modules", "__pycache__", ".venv", "venv"}

FLAG_RE = re.compile(r"(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")


def run(*args) -> subprocess.CompletedProcess:
    assert SPATE_BIN.exists(), f"{SPATE_BIN} does not exist: build spate (scripts/build.sh) or set SPATE_BIN"
    return subprocess.run([str(SPATE_BIN), *args], capture_output=True, text=True, timeout=60)


def commands() -> list:
    """The commands of `spate --help` (the indented names under "commands:")."""
    p = run("--help")
    assert p.returncode == 0, p.stderr
    text = p.stdout + p.stderr
    lines = text.split("commands:", 1)[1].splitlines()
    names = [m.group(1) for line in lines if (m := re.match(r"^  ([a-z][a-z0-9-]*)\s", line))]
    assert "serve" in names and "generate" in names, text
    return names


def help_flags(command: str) -> dict:
    """{flag: default or None} of `spate COMMAND --help`: the option lines of
    Boost.Program_options' output ("  --name arg (=default)  description",
    "  -h [ --help ]  ..."). Only the definition at the start of a line counts,
    never a flag named inside a description."""
    p = run(command, "--help")
    assert p.returncode == 0, f"spate {command} --help: {p.returncode} {p.stderr}"
    out = {}
    for line in p.stdout.splitlines():
        m = re.match(r"^  (?:-[a-zA-Z] \[ )?--([a-z][a-z0-9-]*)(?: \])?( arg(?: \(=(.*?)\))?)?(?:\s|$)", line)
        if m:
            out[m.group(1)] = m.group(3)
    return out


@pytest.fixture(scope="module")
def help_by_command() -> dict:
    return {c: help_flags(c) for c in commands()}


def doc_text() -> str:
    return CONFIG_DOC.read_text()


def doc_flag_rows() -> dict:
    """{flag: (default cell, set of commands)} from the page's table rows whose
    first cell names flags ("| `--x` | default | commands | meaning |")."""
    rows = {}
    for line in doc_text().splitlines():
        if not line.startswith("| `-"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) >= 4, f"a flag row needs flag, default, commands and meaning: {line}"
        flags = FLAG_RE.findall(cells[0])
        assert flags, line
        cmds = {c.strip() for c in cells[2].split(",") if c.strip()}
        for f in flags:
            assert f not in rows, f"--{f} has two rows in {CONFIG_DOC.name}"
            rows[f] = (cells[1], cmds)
    return rows


def hidden_flags() -> set:
    """Flags the cli/ sources register in an options_description called hidden
    (not in --help): `hidden.add_options()("name", ...)`."""
    out = set()
    for src in (REPO / "cli").glob("*.cpp"):
        for m in re.finditer(r"hidden\.add_options\(\)((?:\s*\(\"[a-z0-9-]+\"[^;]*?\))+)\s*;", src.read_text()):
            out.update(re.findall(r"\(\"([a-z0-9-]+)\"", m.group(1)))
    return out


def test_every_help_flag_is_documented_with_its_commands_and_default(help_by_command):
    rows = doc_flag_rows()
    problems = []
    for cmd, flags in help_by_command.items():
        for flag, default in flags.items():
            if flag not in rows:
                problems.append(f"spate {cmd} --{flag}: no row in {CONFIG_DOC.name}")
                continue
            cell, cmds = rows[flag]
            if cmd not in cmds:
                problems.append(f"spate {cmd} --{flag}: its row lists commands {sorted(cmds)}, not {cmd}")
            if default is not None and f"`{default}`" not in cell:
                problems.append(f"spate {cmd} --{flag}: --help's default `{default}` is not in its default cell: {cell}")
    assert not problems, "\n".join(problems)


def test_every_documented_flag_exists(help_by_command):
    hidden = hidden_flags()
    assert "debug-fail-forward-at" in hidden  # the parser above still finds the hidden flags
    rows = doc_flag_rows()
    problems = []
    for flag, (_, cmds) in rows.items():
        for cmd in cmds:
            if cmd not in help_by_command:
                problems.append(f"--{flag}: row names '{cmd}', which is not a command of `spate --help`")
            elif flag not in help_by_command[cmd] and not (flag in hidden and cmd == "serve"):
                problems.append(f"--{flag}: row says `spate {cmd}` takes it, but its --help does not list it")
    # Any flag named anywhere on the page, in prose too.
    known = set().union(*help_by_command.values()) | hidden
    for flag in sorted(set(FLAG_RE.findall(doc_text())) - known):
        problems.append(f"--{flag} is named in {CONFIG_DOC.name} but no command takes it")
    assert not problems, "\n".join(problems)


def conf_keys() -> set:
    """The keys of etc/spate.conf: `name = value` lines, commented out or not."""
    keys = set()
    for line in (REPO / "etc" / "spate.conf").read_text().splitlines():
        m = re.match(r"^#? ?([a-z][a-z0-9-]*) =(?: |$)", line)
        if m:
            keys.add(m.group(1))
    return keys


def test_config_keys_match_serve_flags_and_the_doc(help_by_command):
    serve = set(help_by_command["serve"]) - {"config", "help"}
    keys = conf_keys()
    assert keys - serve == set(), f"etc/spate.conf keys that are not flags of spate serve: {sorted(keys - serve)}"
    assert serve - keys == set(), f"flags of spate serve missing from etc/spate.conf: {sorted(serve - keys)}"
    section = doc_text().split("## Config file", 1)[1].split("\n## ", 1)[0]
    listed = section.split("Keys:", 1)[1].split("\n\n", 1)[0]
    doc_keys = set(re.findall(r"`([a-z][a-z0-9-]*)`", listed))
    assert doc_keys == serve, (f"{CONFIG_DOC.name} 'Keys:' list differs from the serve flags: "
                               f"missing {sorted(serve - doc_keys)}, extra {sorted(doc_keys - serve)}")


def source_files(*suffixes):
    """Files of the checkout with one of these suffixes ("" = none), outside
    build trees and other non-source directories."""
    for root, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")]
        for name in files:
            p = Path(root) / name
            if p.suffix in suffixes:
                yield p


def env_vars_read() -> set:
    """SPATE_* variables the sources read:
    - C++ (everywhere): the string literals "SPATE_..." of a file that calls
      getenv; a literal ending in _BUCKET is a prefix to which the file appends
      its suffix literals ("_MIN", "_STEP", "_MAX");
    - Python under tests/ and scripts/: os.environ.get / os.environ[...] / os.getenv;
    - shell under scripts/ and .ci/: ${SPATE_X:-...} / ${SPATE_X-...} expansions;
    - deploy/ (HAProxy, k8s): "${SPATE_X}"."""
    names = set()
    for p in source_files(".cpp", ".h"):
        text = p.read_text(errors="replace")
        if "getenv" not in text:
            continue
        literals = set(re.findall(r'"(SPATE_[A-Z0-9_]*[A-Z0-9])"', text))
        suffixes = set(re.findall(r'"(_[A-Z]+)"', text))
        for lit in literals:
            if lit.endswith("_BUCKET") and suffixes:
                names.update(lit + s for s in suffixes)
            else:
                names.add(lit)
    for p in source_files(".py"):
        if p.relative_to(REPO).parts[0] not in {"tests", "scripts"}:
            continue
        names.update(re.findall(r'(?:environ\.get\(|environ\[|getenv\()\s*"(SPATE_[A-Z0-9_]+)"', p.read_text()))
    for p in source_files(".sh", ""):
        if p.relative_to(REPO).parts[0] not in {"scripts", ".ci"}:
            continue
        names.update(re.findall(r"\$\{(SPATE_[A-Z0-9_]+):?-", p.read_text(errors="replace")))
    for p in (REPO / "deploy").rglob("*"):
        if p.is_file():
            names.update(re.findall(r"\$\{(SPATE_[A-Z0-9_]+)\}", p.read_text(errors="replace")))
    return names


def test_env_vars_read_are_documented():
    names = env_vars_read()
    # The scanner still finds what it must (a check on the check).
    for must in ("SPATE_MAX_ISA", "SPATE_SKIP_WARMUP", "SPATE_DECODE_BLOCK_BUCKET_STEP", "SPATE_PROFILER_DIR", "SPATE_LB_BIND"):
        assert must in names, f"the scanner missed {must}"
    documented = set(re.findall(r"\bSPATE_[A-Z0-9_]*[A-Z0-9]\b", doc_text()))
    missing = sorted(names - documented)
    assert not missing, f"SPATE_* variables read by the sources but not in {CONFIG_DOC.name}: {missing}"


def test_documented_env_vars_exist():
    documented = set(re.findall(r"\bSPATE_[A-Z0-9_]*[A-Z0-9]\b", doc_text()))
    tree = "\n".join(p.read_text(errors="replace") for p in source_files(".cpp", ".h", ".py", ".sh", ".cfg", ".yaml",
                                                                             ".service", ".conf", ".txt", ".cmake"))
    tree += (REPO / ".ci" / "run").read_text()
    read = env_vars_read()
    problems = [v for v in sorted(documented) if v not in read and not re.search(rf"\b{v}\b", tree)]
    assert not problems, f"SPATE_* names in {CONFIG_DOC.name} that nothing in the tree uses: {problems}"


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces to -."""
    h = re.sub(r"`", "", heading.strip().lower())
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(md: Path) -> set:
    out, seen = set(), {}
    in_code = False
    for line in md.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        m = re.match(r"^#{1,6} (.+)$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def markdown_pages():
    return [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


def test_relative_links_resolve():
    problems = []
    for page in markdown_pages():
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        text = re.sub(r"`[^`\n]*`", "", text)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            path_part, _, fragment = target.partition("#")
            dest = page if not path_part else (page.parent / path_part).resolve()
            where = f"{page.relative_to(REPO)}: ({target})"
            if not dest.exists():
                problems.append(f"{where}: {dest.relative_to(REPO) if dest.is_relative_to(REPO) else dest} does not exist")
                continue
            if fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                problems.append(f"{where}: no heading #{fragment} in {dest.relative_to(REPO)}")
    assert not problems, "\n".join(problems)


def test_readme_is_short():
    n = len((REPO / "README.md").read_text().splitlines())
    assert n <= 200, f"README.md has {n} lines; docs/ holds the details (at most 200)"
