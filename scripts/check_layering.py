#!/usr/bin/env python3
"""Fails when an #include crosses a library boundary the wrong way.

The folders are libraries whose dependencies point one way (docs/architecture.md, "Layers"):

    util, kernels <- tokenizer <- model <- engine <- protocol <- server <- cli
    jinja and grammar stand alone (on util); the layers above may use them.

A source file in folder F may include "G/..." only when G is F itself or one
of F's allowed dependencies below. Above the engine, only the engine's public
API header (engine/engine_api.h) may be included: protocol and server never
see scheduler, KV manager or sampler internals. The command line wires the
runtime together and may include anything below it.

Tests mirror the sources: tests/F/ may include what F may include, plus F.
tests/integration/ and perf/ drive the whole stack and are not checked.

Usage: scripts/check_layering.py [REPO]   (exit 1 and one line per violation)
"""
import re
import sys
from pathlib import Path

ALLOWED = {
    "util": set(),
    "kernels": set(),
    "tokenizer": {"util"},
    "model": {"util", "kernels", "tokenizer"},
    "engine": {"util", "kernels", "tokenizer", "model"},
    "jinja": {"util"},
    "grammar": {"util"},
    "protocol": {"util", "tokenizer", "engine", "jinja", "grammar"},
    "server": {"util", "tokenizer", "engine", "jinja", "grammar", "protocol"},
    "cli": {"util", "kernels", "tokenizer", "model", "engine", "jinja", "grammar", "protocol", "server"},
}
# Tests that need a lower-level fixture: the tokenizer and grammar tests read
# real vocabularies out of GGUF files, whose reader lives in model/.
TEST_EXTRA = {"tokenizer": {"model"}, "grammar": {"model", "tokenizer"}}
# Folders that may include only these headers of the engine.
ENGINE_API_ONLY = {"protocol", "server"}
ENGINE_API = {"engine/engine_api.h"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def check_file(path: Path, folder: str, repo: Path, extra: set[str]) -> list[str]:
    problems = []
    text = path.read_text(encoding="utf-8", errors="replace")
    for m in INCLUDE.finditer(text):
        target = m.group(1)
        line = text.count("\n", 0, m.start()) + 1
        where = f"{path.relative_to(repo)}:{line}"
        if "/" not in target:
            continue  # a header next to the file (tests' helpers)
        lib = target.split("/", 1)[0]
        if lib not in ALLOWED:
            problems.append(f'{where}: includes "{target}", which is not a library folder')
        elif lib != folder and lib not in ALLOWED[folder] | extra:
            problems.append(f'{where}: {folder}/ may not include "{target}" ({folder} does not depend on {lib})')
        elif lib == "engine" and folder in ENGINE_API_ONLY and target not in ENGINE_API:
            problems.append(f'{where}: {folder}/ may include only engine/engine_api.h from the engine, not "{target}"')
    return problems


def main() -> int:
    repo = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
    problems = []
    n_files = 0
    for folder in ALLOWED:
        for root, extra in ((repo / folder, set()), (repo / "tests" / folder, TEST_EXTRA.get(folder, set()))):
            if not root.is_dir():
                continue
            for path in sorted(root.rglob("*")):
                if path.suffix in (".h", ".cpp") and path.is_file():
                    n_files += 1
                    problems += check_file(path, folder, repo, extra)
    for p in problems:
        print(p)
    if problems:
        print(f"check_layering: {len(problems)} include(s) cross a boundary the wrong way", file=sys.stderr)
        return 1
    print(f"check_layering: {n_files} files, all includes point down the layers", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
