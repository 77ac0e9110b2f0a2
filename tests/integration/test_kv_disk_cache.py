"""The prefix cache's disk tier (--kv-cache-dir, issue 40) with the real
models: a ~4k-token prefix computed by one server is reloaded from disk by the
next one (a restart) with the same greedy output as a cold server; corrupt and
truncated block files are recomputed and counted; a tiny disk bound and an
unusable directory keep the server serving; a really full disk (ENOSPC, a
small tmpfs in the server's own user+mount namespace) stops the writes but
not the reads; two models share one directory without reading each other's
blocks.

Block files are mapped to prompt blocks by the tokens in their headers
(engine/kv_disk_format.h: 72-byte header, then the block's int32 tokens)."""
import os
import shlex
import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest

import spate_server
from spate_server import SpateServer, post_json

BLOCK = 16  # --block-size default
GEMMA = Path(os.environ.get("SPATE_GEMMA_MODEL") or
             Path(os.environ.get("SPATE_CACHE_DIR") or Path.home() / ".cache" / "spate") / "models" / "gemma-3-270m-q4_k_m.gguf")
ENV = {"SPATE_SKIP_WARMUP": "1"}  # warmup changes no output; it only costs start-up time here

# About 4,000 tokens of varied text, then two different turns.
PREFIX = "A log of the warehouse inventory, one line per shelf.\n" + "".join(
    f"Shelf {i}: {['bolts', 'nuts', 'washers', 'screws', 'rivets', 'hinges', 'springs'][i % 7]} "
    f"in box {(i * 37) % 101}, count {(i * 53) % 997}, checked by {['Ana', 'Bo', 'Cy', 'Di', 'Ed'][i % 5]}.\n"
    for i in range(190))
TURN1 = "Question: which shelf holds the most bolts?\nAnswer:"
TURN2 = "Question: who checked shelf 12, and what was in it?\nAnswer:"


def start(*args, model=None):
    return SpateServer(*args, env=ENV, model=model).wait_ready()


def complete(s, prompt, max_tokens=24):
    status, body, _ = post_json(s.base_url, "/v1/completions",
                                {"model": s.model_name, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0},
                                timeout=300)
    assert status == 200, body
    usage = body["usage"]
    return body["choices"][0]["text"], (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0), usage


def tokenize(s, prompt):
    status, body, _ = post_json(s.base_url, "/tokenize", {"model": s.model_name, "prompt": prompt})
    assert status == 200, body
    return body["tokens"]


def block_files(d: Path):
    return sorted(p for p in d.rglob("*.kvb"))


def file_tokens(p: Path):
    with open(p, "rb") as f:
        head = f.read(72 + 4 * BLOCK)
    return list(struct.unpack(f"<{BLOCK}i", head[72:]))


def block_index(files, tokens):
    """{block index in tokens: file} for the files holding tokens' blocks."""
    blocks = {tuple(tokens[i * BLOCK:(i + 1) * BLOCK]): i for i in range(len(tokens) // BLOCK)}
    return {blocks[t]: p for p in files if (t := tuple(file_tokens(p))) in blocks}


@pytest.fixture(scope="module")
def cold():
    """Greedy outputs of a server without the disk tier (and prompt tokens)."""
    s = start()
    try:
        out = {"turn2": complete(s, PREFIX + TURN2)[0], "short": complete(s, PREFIX[:3000] + TURN2)[0]}
        out["tokens2"] = tokenize(s, PREFIX + TURN2)
        out["prefix_tokens"] = tokenize(s, PREFIX)
        return out
    finally:
        s.stop()


@pytest.fixture(scope="module")
def written(tmp_path_factory, cold):
    """A directory holding the blocks of request 1 (PREFIX + TURN1)."""
    d = tmp_path_factory.mktemp("kvdisk")
    s = start("--kv-cache-dir", d)
    try:
        complete(s, PREFIX + TURN1)
        m = s.metrics()
        assert m["spate:kv_disk_hits_total"] == 0
    finally:
        assert s.stop() == 0  # a clean stop writes what is still queued
    files = block_files(d)
    assert len(files) >= len(cold["prefix_tokens"]) // BLOCK, len(files)
    return d


def shared_blocks(cold):
    """Full blocks request 2 shares with request 1: the common token prefix's."""
    t2, p = cold["tokens2"], cold["prefix_tokens"]
    n = 0
    while n < min(len(t2), len(p)) and t2[n] == p[n]:
        n += 1
    return n // BLOCK


def test_a_restart_reloads_the_prefix_from_disk(written, cold, tmp_path):
    d = tmp_path / "kv"
    shutil.copytree(written, d)
    s = start("--kv-cache-dir", d)
    try:
        text, cached, usage = complete(s, PREFIX + TURN2)
        assert text == cold["turn2"]
        n_shared = shared_blocks(cold)
        assert n_shared * BLOCK >= 3500
        assert cached >= n_shared * BLOCK, usage
        m = s.metrics()
        assert m["spate:kv_disk_hits_total"] >= n_shared
        assert m["spate:kv_disk_read_bytes_total"] > 0
        assert m["spate:kv_disk_errors_total"] == 0
        assert m["spate:kv_disk_usage_bytes"] > 0
        # Again: now a memory hit, same output.
        assert complete(s, PREFIX + TURN2)[0] == cold["turn2"]
    finally:
        s.stop()


def test_corrupt_and_truncated_files_are_recomputed(written, cold, tmp_path):
    d = tmp_path / "kv"
    shutil.copytree(written, d)
    at = block_index(block_files(d), cold["tokens2"])
    assert 100 in at and 150 in at
    with open(at[100], "r+b") as f:  # one payload byte of block 100
        f.seek(72 + 4 * BLOCK + 1000)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x40]))
    os.truncate(at[150], at[150].stat().st_size // 2)
    s = start("--kv-cache-dir", d)
    try:
        text, cached, usage = complete(s, PREFIX + TURN2)
        assert text == cold["turn2"]
        assert cached == 100 * BLOCK, usage  # blocks 0..99 from disk, the rest recomputed
        m = s.metrics()
        assert m["spate:kv_disk_errors_total"] >= 2  # the truncated file at start-up, the corrupt one when read
        assert m["spate:kv_disk_hits_total"] == 100
        # Both were deleted; the recomputed blocks are written again.
        s.wait_metric(lambda m: m["spate:kv_disk_written_bytes_total"] > 0)
        assert s.log_text().count("is bad (checksum)") + s.log_text().count("of the wrong size") == 1
    finally:
        s.stop()


def test_a_block_file_replaced_by_a_fifo_is_recomputed_without_hanging(written, cold, tmp_path):
    """Issue 54: a .kvb file replaced by a FIFO (after the start-up scan) used to block its
    request's read, and then the shutdown, for good; it is refused, deleted and recomputed."""
    d = tmp_path / "kv"
    shutil.copytree(written, d)
    s = start("--kv-cache-dir", d)
    try:
        at = block_index(block_files(d), cold["tokens2"])
        assert 100 in at
        at[100].unlink()
        os.mkfifo(at[100])
        text, cached, usage = complete(s, PREFIX + TURN2)  # post_json's timeout bounds a hang
        assert text == cold["turn2"]
        assert cached == 100 * BLOCK, usage
        assert s.metrics()["spate:kv_disk_errors_total"] >= 1
        assert "is a FIFO, not a regular file" in s.log_text()
        assert not at[100].exists() or at[100].is_file(), "the FIFO is deleted (or replaced by the recomputed block)"
    finally:
        t0 = time.monotonic()
        s.stop(timeout=60)
    assert s.proc.returncode == 0 and time.monotonic() - t0 < 60


def test_a_tiny_disk_bound_evicts_and_keeps_serving(cold, tmp_path):
    d = tmp_path / "small"
    s = start("--kv-cache-dir", d, "--kv-cache-disk-bytes", "4MiB")
    try:
        assert complete(s, PREFIX[:3000] + TURN2)[0] == cold["short"]
        m = s.wait_metric(lambda m: m["spate:kv_disk_evictions_total"] > 0)
        assert 0 < m["spate:kv_disk_usage_bytes"] <= 4 << 20
    finally:
        s.stop()
    assert sum(p.stat().st_size for p in block_files(d)) <= 4 << 20


def test_a_directory_that_cannot_be_created_leaves_memory_only(cold, tmp_path):
    (tmp_path / "file").write_text("x")  # the directory's parent is a regular file
    s = start("--kv-cache-dir", tmp_path / "file" / "kv")
    try:
        assert complete(s, PREFIX[:3000] + TURN2)[0] == cold["short"]
        assert s.log_text().count("KV disk cache: cannot use") == 1
        assert s.metrics()["spate:kv_disk_written_bytes_total"] == 0
    finally:
        s.stop()


def make_read_only(sub: Path):
    """Makes sub refuse new files: chmod 0555, or for root (whom modes do not
    stop) the immutable attribute. False when neither works here."""
    if os.geteuid() != 0:
        sub.chmod(0o555)
        return True
    return subprocess.run(["chattr", "+i", str(sub)], capture_output=True).returncode == 0


def undo_read_only(sub: Path):
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(sub)], capture_output=True)
    sub.chmod(0o755)


def test_a_read_only_directory_still_serves_its_blocks_and_stops_writing(written, cold, tmp_path):
    d = tmp_path / "kv"
    shutil.copytree(written, d)
    sub = next(p for p in d.iterdir() if p.is_dir())
    if not make_read_only(sub):
        pytest.skip("neither chmod (root) nor chattr +i can make a directory read-only here")
    try:
        s = start("--kv-cache-dir", d)
        try:
            text, cached, usage = complete(s, PREFIX + TURN2)
            assert text == cold["turn2"]
            assert cached >= shared_blocks(cold) * BLOCK, usage
            m = s.wait_metric(lambda m: m["spate:kv_disk_errors_total"] >= 1)
            assert m["spate:kv_disk_written_bytes_total"] == 0
            assert s.log_text().count("no more blocks are written") == 1
            assert complete(s, PREFIX[:3000] + TURN2)[0] == cold["short"]
            assert s.log_text().count("no more blocks are written") == 1
        finally:
            s.stop()
    finally:
        undo_read_only(sub)


@pytest.mark.skipif(not GEMMA.exists(), reason="Gemma model missing: scripts/fetch-model.sh gemma3-270m")
def test_two_models_share_a_directory_without_reading_each_others_blocks(written, cold, tmp_path):
    d = tmp_path / "kv"
    shutil.copytree(written, d)
    prompt = PREFIX[:2500] + TURN2
    g = start("--kv-cache-dir", d, model=GEMMA)
    try:
        first = complete(g, prompt)[0]
        m = g.metrics()
        assert m["spate:kv_disk_hits_total"] == 0 and m["spate:kv_disk_errors_total"] == 0
    finally:
        g.stop()
    subdirs = [p for p in d.iterdir() if p.is_dir()]
    assert len(subdirs) == 2  # one per model
    g = start("--kv-cache-dir", d, model=GEMMA)
    try:
        text, cached, usage = complete(g, prompt)
        assert text == first
        assert cached > 0 and g.metrics()["spate:kv_disk_hits_total"] > 0, usage
    finally:
        g.stop()
    s = start("--kv-cache-dir", d)
    try:
        assert complete(s, PREFIX + TURN2)[0] == cold["turn2"]
        m = s.metrics()
        assert m["spate:kv_disk_hits_total"] >= shared_blocks(cold) and m["spate:kv_disk_errors_total"] == 0
    finally:
        s.stop()


# A really full disk: a small tmpfs mounted in an unprivileged user + mount
# namespace (unshare -rm) of the server's own, so the mount needs no privilege
# and vanishes with the server. A SmolLM2 block file is 368,784 bytes (72 +
# 4 * 16 + 16 tokens of f16 KV + 8), so 2 MiB holds 5 and the 6th write fails
# with ENOSPC; --kv-cache-disk-bytes is far above that, so the size bound never
# stops a write. A small --kv-cache-memory (136 blocks) lets two other prompts
# push the first one out of memory, so its blocks come back from the full disk.
FULL_TMPFS_BYTES = 2 << 20


def diary(k, n_lines=56):
    """A prompt (about 1,100 tokens) sharing no block with PREFIX or another k."""
    return f"Diary {k} of the lighthouse keeper.\n" + "".join(
        f"Day {k}.{i}: the {['gulls', 'waves', 'ships', 'clouds', 'seals'][(i + k) % 5]} were "
        f"{['loud', 'calm', 'many', 'grey', 'late'][(i * 3 + k) % 5]}, lamp oil {(i * 29 + k) % 83} litres.\n"
        for i in range(n_lines)) + "Summary:"


@pytest.fixture
def full_disk_server(tmp_path, monkeypatch):
    """start_full(*args) starts a server whose --kv-cache-dir is a
    FULL_TMPFS_BYTES tmpfs mounted in its own namespace; returns (server, the
    directory as seen from here through /proc/<pid>/root). Skips when unshare
    is missing or cannot mount a tmpfs unprivileged."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is missing: no unprivileged tmpfs to fill")
    d = tmp_path / "full"
    d.mkdir()
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", 'mount -t tmpfs -o size=64k tmpfs "$1"', "sh", str(d)],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in an unprivileged user+mount namespace (unshare -rm): "
                    f"{probe.stderr.strip() or probe.returncode}")
    # unshare and sh exec: the server keeps the pid SpateServer signals.
    wrapper = tmp_path / "spate-on-tmpfs"
    script = f'mount -t tmpfs -o size={FULL_TMPFS_BYTES} tmpfs "$1" && shift && exec "$@"'
    wrapper.write_text(f"#!/bin/sh\nexec unshare -rm sh -c {shlex.quote(script)} sh {shlex.quote(str(d))} "
                       f"{shlex.quote(str(spate_server.SPATE_BIN))} \"$@\"\n")
    wrapper.chmod(0o755)
    servers = []

    def start_full(*args):
        with monkeypatch.context() as mp:
            mp.setattr(spate_server, "SPATE_BIN", wrapper)
            s = SpateServer("--kv-cache-dir", d, *args, env=ENV)
        servers.append(s)
        s.wait_ready()
        return s, Path(f"/proc/{s.proc.pid}/root") / d.relative_to("/")

    yield start_full
    for s in servers:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


def test_a_full_disk_stops_writing_and_still_serves_the_blocks_it_holds(full_disk_server, cold):
    s, view = full_disk_server("--kv-cache-disk-bytes", "1GiB", "--kv-cache-memory", "48MiB")
    try:
        prompt = PREFIX[:3000] + TURN2
        tokens = tokenize(s, prompt)
        assert len(tokens) // BLOCK > 10  # far more blocks than the tmpfs holds
        text, cached, usage = complete(s, prompt)
        assert text == cold["short"] and cached == 0, usage
        # The I/O thread counts the failed write after deleting its temporary file.
        m = s.wait_metric(lambda m: m["spate:kv_disk_errors_total"] >= 1)
        files = block_files(view)
        n, size = len(files), files[0].stat().st_size if files else 0
        assert 2 <= n and (n + 1) * size > FULL_TMPFS_BYTES, n  # the disk, not the 1 GiB bound, stopped it
        assert all(p.stat().st_size == size for p in files)
        assert sorted(p for p in view.rglob("*") if p.is_file()) == files  # no temporary file left behind
        assert sorted(block_index(files, tokens)) == list(range(n))  # the prompt's first blocks, in order
        assert m["spate:kv_disk_errors_total"] == 1  # one failed write; the rest are dropped, not counted
        assert m["spate:kv_disk_written_bytes_total"] == m["spate:kv_disk_usage_bytes"] == n * size
        assert m["spate:kv_disk_evictions_total"] == 0
        # Two other prompts push the first out of memory (nothing more is written).
        for k in (1, 2):
            complete(s, diary(k))
        m = s.metrics()
        assert m["spate:kv_disk_written_bytes_total"] == n * size
        # The prompt's later blocks and the two prompts' full blocks are counted
        # as dropped (no copy is made for a disk that is off).
        assert m["spate:kv_disk_dropped_blocks_total"] >= len(tokens) // BLOCK - n + 2 * (1000 // BLOCK), m
        # The first prompt again: its blocks written before the disk filled come
        # back from the full disk, the rest is recomputed, the output is the same.
        text, cached, usage = complete(s, prompt)
        assert text == cold["short"]
        assert cached == n * BLOCK, usage
        m = s.metrics()
        assert m["spate:kv_disk_hits_total"] == n
        assert m["spate:kv_disk_read_bytes_total"] == n * size
        assert m["spate:kv_disk_errors_total"] == 1
        assert m["spate:kv_disk_written_bytes_total"] == m["spate:kv_disk_usage_bytes"] == n * size
        assert len(block_files(view)) == n
        log = s.log_text()
        warnings = [line for line in log.splitlines() if line.startswith("W ") and "KV disk cache" in line]
        assert len(warnings) == 1, warnings
        assert "writing a block file" in warnings[0] and "No space left on device" in warnings[0]
        assert "no more blocks are written (reads go on)" in warnings[0]
        assert s.stop() == 0  # a clean stop with writes off and the disk full
    finally:
        s.stop()
