#!/usr/bin/env python3
"""Check that no object built for a higher ISA level exports SIMD code to the rest of a binary.

Files named *_avx2.cpp and *_avx512.cpp are compiled with -mavx2/-mavx512f (CMakeLists.txt,
spate_isa_flags). An inline function or template they instantiate (a header's constexpr helper,
std::vector's destructor, a gtest matcher) is emitted as a weak (COMDAT) symbol, and the linker
keeps one copy of it for the whole binary, possibly this one. If that copy holds VEX or EVEX
instructions, baseline code calling it dies with an illegal instruction on a CPU without that
ISA. That happened: a test file named *_avx512.cpp gave test_kernels an EVEX copy of an inline
function, and the ASan build's test discovery died on an AVX2-only CPU.

Contract: every weak function an ISA object defines must hold no VEX/EVEX instruction. Give such
helpers internal linkage (an anonymous namespace or `static`) in the ISA file instead.

Usage: scripts/check_isa_objects.py BUILD_DIR...   (exit 1 and a list when violated)
"""
import pathlib
import re
import subprocess
import sys

ISA_OBJECT = re.compile(r"_(avx2|avx512)\.cpp\.o$")
# AT&T mnemonics of VEX/EVEX-encoded instructions: the v-prefixed SIMD forms and the AVX-512
# mask-register instructions. verr/verw are legacy and never emitted by the compiler.
SIMD_MNEMONIC = re.compile(r"^(v(?!err|erw)[a-z0-9]+|k(mov|and|or|xor|xnor|not|shift|test|ortest|unpck|add)[a-z]*)$")


def weak_functions(obj: pathlib.Path) -> set[str]:
    out = subprocess.run(["nm", "--defined-only", str(obj)], capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "W":
            names.add(parts[2])
    return names


def simd_weak_functions(obj: pathlib.Path) -> list[str]:
    weak = weak_functions(obj)
    if not weak:
        return []
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(obj)],
                         capture_output=True, text=True, check=True).stdout
    bad, current = set(), None
    for line in dis.splitlines():
        header = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if header:
            current = header.group(1)
            continue
        if current not in weak:
            continue
        fields = line.split("\t")
        words = fields[1].split() if len(fields) >= 2 else []
        if words and SIMD_MNEMONIC.match(words[0]):
            bad.add(current)
    return sorted(bad)


def demangle(names: list[str]) -> list[str]:
    if not names:
        return []
    return subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                          check=True).stdout.splitlines()


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    n_objects, failures = 0, []
    for build_dir in sys.argv[1:]:
        for obj in sorted(pathlib.Path(build_dir).rglob("*.o")):
            if not ISA_OBJECT.search(obj.name):
                continue
            n_objects += 1
            for name in demangle(simd_weak_functions(obj)):
                failures.append(f"{obj}: weak function with SIMD code: {name}")
    if n_objects == 0:
        print("check_isa_objects: no *_avx2/*_avx512 objects found (build first)", file=sys.stderr)
        return 1
    for f in failures:
        print(f, file=sys.stderr)
    if failures:
        print(f"check_isa_objects: {len(failures)} weak SIMD functions; give them internal linkage",
              file=sys.stderr)
        return 1
    print(f"check_isa_objects: {n_objects} ISA objects export no SIMD code")
    return 0


if __name__ == "__main__":
    sys.exit(main())
