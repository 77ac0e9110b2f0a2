"""perf/README.md is the toolbox's index: every tool in perf/ has its row,
and the page stays short (current figures only; history goes to
docs/journal/performance.md)."""
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PERF = REPO / "perf"
INDEX = PERF / "README.md"


def tools():
    """Every runnable tool: C++ benchmarks (one executable per .cpp) and the
    shell and Python scripts, with their paths relative to perf/."""
    found = [p for p in (PERF / "bench").glob("*.cpp")]
    for folder in ("scripts", "peer", "data"):
        found += [p for p in (PERF / folder).iterdir() if p.suffix in (".sh", ".py")]
    return sorted(p.relative_to(PERF) for p in found)


def test_every_tool_is_listed():
    text = INDEX.read_text()
    assert len(tools()) >= 30, tools()
    missing = []
    for rel in tools():
        # C++ tools are listed by their executable's name, scripts by file name
        # (peer/ and data/ tools by their path under perf/).
        name = rel.stem if rel.suffix == ".cpp" else (rel.name if rel.parent.name == "scripts" else str(rel))
        if f"`{name}`" not in text:
            missing.append(str(rel))
    assert not missing, f"perf/README.md lists no row for: {missing}"


def test_index_is_short():
    n = len(INDEX.read_text().splitlines())
    assert n <= 400, f"perf/README.md has {n} lines; history belongs in docs/journal/performance.md"
