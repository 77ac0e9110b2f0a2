"""End-to-end tests of the `spate` binary: `spate generate` and `spate tokenize`.

The product's promise for bad input is "a clear message and a nonzero exit,
never a crash or a hang": every failure case below checks a nonzero (and
non-negative, i.e. not killed by a signal) exit code, a specific message on
stderr, no crash banner, and completion within TIMEOUT seconds.

Environment:
  SPATE_BIN    the binary (default: <repo>/build/spate)
  SPATE_MODEL  the GGUF model (default: the cached SmolLM2-135M-Instruct Q4_1,
               under $SPATE_CACHE_DIR/models or ~/.cache/spate/models)

Run: python3 -m pytest -q tests/integration/test_cli.py
"""

import json
import os
import re
import struct
import subprocess
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
from spate_server import SANITIZED, SPATE_BIN, SPATE_MODEL, process_env  # noqa: E402  (shared with the server tests)

TIMEOUT = 480 if SANITIZED else 120  # seconds per spate invocation; a hang fails the test

N_VOCAB = 49152  # SmolLM2-135M

if not SPATE_BIN.is_file():
    pytest.skip(f"spate binary not found at {SPATE_BIN} (build it or set SPATE_BIN)", allow_module_level=True)

needs_model = pytest.mark.skipif(not SPATE_MODEL.is_file(),
                                 reason=f"model not found at {SPATE_MODEL} (set SPATE_MODEL)")


def run_spate(args, stdin: bytes | str = b"") -> subprocess.CompletedProcess:
    """Runs `spate ARGS` with stdin, capturing bytes; fails the test on a hang."""
    if isinstance(stdin, str):
        stdin = stdin.encode()
    try:
        return subprocess.run([str(SPATE_BIN), *map(str, args)], input=stdin, capture_output=True,
                              timeout=TIMEOUT, check=False, env=process_env())
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"spate {' '.join(map(str, args))} did not finish within {TIMEOUT}s (hang?); "
                    f"stderr so far: {(e.stderr or b'')[-2000:]!r}")


def generate(lines, *extra_args, model=None) -> subprocess.CompletedProcess:
    """`spate generate` on JSONL lines (dicts are serialized, str/bytes passed verbatim)."""
    chunks = []
    for line in lines:
        if isinstance(line, dict):
            line = json.dumps(line)
        chunks.append(line if isinstance(line, bytes) else line.encode())
    stdin = b"".join(c + b"\n" for c in chunks)
    return run_spate(["generate", "--model", model or SPATE_MODEL, "--log-level", "warn", *extra_args], stdin)


def assert_no_crash(p: subprocess.CompletedProcess):
    err = p.stderr.decode(errors="replace")
    assert p.returncode >= 0, f"killed by signal {-p.returncode}; stderr:\n{err}"
    for banner in ("Segmentation", "core dumped", "Aborted", "AddressSanitizer", "terminate called"):
        assert banner not in err, f"crash banner {banner!r} in stderr:\n{err}"


def assert_fails_with(p: subprocess.CompletedProcess, *needles: str):
    """Nonzero exit, no crash, no results on stdout, and each needle on stderr."""
    assert_no_crash(p)
    err = p.stderr.decode(errors="replace")
    assert p.returncode != 0, f"expected failure, got exit 0; stdout={p.stdout[:500]!r} stderr:\n{err}"
    for n in needles:
        assert n in err, f"expected {n!r} in stderr:\n{err}"
    assert p.stdout.strip() == b"", f"no results expected on stdout, got {p.stdout[:500]!r}"


def output_lines(p: subprocess.CompletedProcess):
    assert_no_crash(p)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return [json.loads(l) for l in p.stdout.decode().splitlines()]


def tokenize(text: str | bytes, special=False):
    args = ["tokenize", "--model", SPATE_MODEL] + (["--special"] if special else [])
    p = run_spate(args, text)
    assert_no_crash(p)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return json.loads(p.stdout)


# ------------------------------------------------------------------ happy path

GREEDY_STOP = {"prompt": "The capital of France is", "temperature": 0, "max_tokens": 12, "stop": "."}
SEEDED = {"prompt": "Once upon a time, in a small village,", "temperature": 0.8, "seed": 1234, "max_tokens": 10}
SHORT = {"prompt": "List three colors:", "max_tokens": 5, "temperature": 0}
RESULT_KEYS = {"text", "token_ids", "finish_reason", "prompt_tokens", "completion_tokens"}


@needs_model
def test_generate_three_requests_in_order():
    out = output_lines(generate([GREEDY_STOP, SEEDED, SHORT]))
    assert len(out) == 3
    for r, req in zip(out, [GREEDY_STOP, SEEDED, SHORT]):
        assert set(r) == RESULT_KEYS
        assert isinstance(r["text"], str)
        assert all(isinstance(t, int) and 0 <= t < N_VOCAB for t in r["token_ids"])
        assert r["finish_reason"] in ("stop", "length")
        assert r["completion_tokens"] == len(r["token_ids"])
        assert 1 <= r["completion_tokens"] <= req["max_tokens"]
        # Output order = input order: each line reports its own prompt's length.
        assert r["prompt_tokens"] == len(tokenize(req["prompt"], special=True))
    # Greedy with stop ".": the stop string and what follows it are not returned.
    assert "." not in out[0]["text"]
    assert out[0]["finish_reason"] == "stop", out[0]
    assert out[0]["text"].strip() == "Paris", out[0]
    assert out[2]["completion_tokens"] <= 5
    if out[2]["completion_tokens"] < 5:
        assert out[2]["finish_reason"] == "stop"
    else:
        assert out[2]["finish_reason"] == "length"


@needs_model
def test_same_seed_and_greedy_are_reproducible():
    first = generate([SEEDED, GREEDY_STOP])
    second = generate([SEEDED, GREEDY_STOP])
    assert output_lines(first) == output_lines(second)
    assert first.stdout == second.stdout


@needs_model
def test_seeded_sampling_depends_on_the_seed():
    a = output_lines(generate([dict(SEEDED, seed=1), dict(SEEDED, seed=2), dict(SEEDED, seed=3)]))
    assert len({tuple(r["token_ids"]) for r in a}) > 1, "three seeds gave identical samples"


@needs_model
def test_greedy_is_batch_invariant_through_the_cli():
    target = {"prompt": "Write a short poem about the sea.", "temperature": 0, "max_tokens": 16, "ignore_eos": True}
    alone = output_lines(generate([target]))[0]
    others = [
        {"prompt": "Hi", "temperature": 0, "max_tokens": 3},
        {"prompt": "Explain gravity to a child in two sentences, please, with an example.", "max_tokens": 20,
         "temperature": 0.7, "seed": 5},
        {"prompt": "1, 2, 3, 4,", "temperature": 0, "max_tokens": 8},
    ]
    together = output_lines(generate([others[0], target, others[1], others[2]]))
    assert together[1]["token_ids"] == alone["token_ids"]
    assert together[1]["text"] == alone["text"]
    # Also with a small --max-num-seqs, so the requests run in a different mix of batches.
    staggered = output_lines(generate([others[1], others[2], target, others[0]], "--max-num-seqs", "2"))
    assert staggered[2]["token_ids"] == alone["token_ids"]


@needs_model
def test_invalid_utf8_in_the_prompt_is_replaced_not_rejected():
    line = b'{"prompt": "caf\xc3\xa9 \xff\xfe broken \xe2\x82 end", "temperature": 0, "max_tokens": 3}'
    out = output_lines(generate([line]))
    assert len(out) == 1
    # Each ill-formed sequence became U+FFFD: the prompt tokenizes like the replaced text.
    replaced = "caf\u00e9 \ufffd\ufffd broken \ufffd end"
    assert out[0]["prompt_tokens"] == len(tokenize(replaced, special=True))
    assert out[0]["completion_tokens"] == 3


@needs_model
def test_blank_lines_are_skipped_and_empty_input_gives_no_output():
    out = output_lines(generate(["", SHORT, "   "]))
    assert len(out) == 1
    p = run_spate(["generate", "--model", SPATE_MODEL, "--log-level", "warn"], b"")
    assert output_lines(p) == []


# ------------------------------------------------------------------ bad model files

@pytest.fixture(scope="module")
def model_bytes():
    if not SPATE_MODEL.is_file():
        pytest.skip(f"model not found at {SPATE_MODEL}")
    return SPATE_MODEL.read_bytes()


def _write(tmp_path_factory, name, data: bytes) -> Path:
    p = tmp_path_factory.mktemp("models") / name
    p.write_bytes(data)
    return p


def test_missing_model_file(tmp_path):
    missing = tmp_path / "nope.gguf"
    assert_fails_with(generate([SHORT], model=missing), "cannot open model file", str(missing),
                      "No such file or directory")


def test_directory_as_model(tmp_path):
    assert_fails_with(generate([SHORT], model=tmp_path), f"model path '{tmp_path}' is not a regular file")


def test_empty_model_file(tmp_path):
    f = tmp_path / "empty.gguf"
    f.write_bytes(b"")
    assert_fails_with(generate([SHORT], model=f), "file is 0 bytes, too small for a GGUF header")


def test_random_bytes_model(tmp_path):
    f = tmp_path / "random.gguf"
    f.write_bytes(os.urandom(1 << 16))
    assert_fails_with(generate([SHORT], model=f), "bad magic (not a GGUF file)")


def test_model_truncated_to_1mb(tmp_path_factory, model_bytes):
    f = _write(tmp_path_factory, "first_1mb.gguf", model_bytes[: 1 << 20])
    assert_fails_with(generate([SHORT], model=f), f"invalid GGUF file '{f}'", "truncated while reading")


def test_model_cut_in_the_middle_of_the_tensor_data(tmp_path_factory, model_bytes):
    f = _write(tmp_path_factory, "half.gguf", model_bytes[: len(model_bytes) // 2])
    assert_fails_with(generate([SHORT], model=f), "lies outside the file's data section", "truncated file?")
    g = _write(tmp_path_factory, "minus_one.gguf", model_bytes[:-1])
    assert_fails_with(generate([SHORT], model=g), "lies outside the file's data section")


def _patch_architecture(data: bytes, new_arch: bytes) -> bytes:
    """Replaces the value of general.architecture (same length) in a GGUF image."""
    key = b"general.architecture"
    i = data.find(struct.pack("<Q", len(key)) + key)
    assert i >= 0, "general.architecture not found"
    j = i + 8 + len(key)
    vtype, n = struct.unpack_from("<IQ", data, j)
    assert vtype == 8 and n == len(new_arch), (vtype, n)
    out = bytearray(data)
    out[j + 12: j + 12 + n] = new_arch
    return bytes(out)


def test_model_with_unsupported_architecture(tmp_path_factory, model_bytes):
    f = _write(tmp_path_factory, "llamb.gguf", _patch_architecture(model_bytes, b"llamb"))
    assert_fails_with(generate([SHORT], model=f), "architecture 'llamb'", "does not support",
                      "supported: llama, qwen2")


def test_tokenize_with_a_bad_model(tmp_path):
    f = tmp_path / "random.gguf"
    f.write_bytes(b"\x00" * 4096)
    p = run_spate(["tokenize", "--model", f], b"hello")
    assert_fails_with(p, "spate tokenize:", "bad magic")


# ------------------------------------------------------------------ bad requests

@needs_model
def test_malformed_jsonl_names_the_line():
    p = generate([SHORT, '{"prompt": "x",', SHORT])
    assert_fails_with(p, "line 2: malformed JSON")
    assert "line 1" not in p.stderr.decode() and "line 3" not in p.stderr.decode()


@needs_model
def test_every_bad_line_is_reported():
    p = generate(['{"prompt": "ok"}', "not json", '{"prompt": "a", "temperature": -1}'])
    assert_fails_with(p, "line 2: malformed JSON", "line 3: temperature must be in [0, 2], got -1")


@pytest.mark.parametrize("line", ["[1, 2, 3]", '"a string"', "42", "null", "true"])
@needs_model
def test_non_object_json(line):
    assert_fails_with(generate([line]), "line 1: expected a JSON object")


@pytest.mark.parametrize("fields, message", [
    ({"temperature": "hot"}, "'temperature' must be a number"),
    ({"max_tokens": 1.5}, "'max_tokens' must be an integer"),
    ({"max_tokens": "5"}, "'max_tokens' must be an integer"),
    ({"top_k": 2.5}, "'top_k' must be an integer"),
    ({"seed": "x"}, "'seed' must be an integer"),
    ({"stop": 5}, "'stop' must be a string or a list of strings"),
    ({"stop": ["a", 1]}, "'stop' must be a string or a list of strings"),
    ({"stop_token_ids": 3}, "'stop_token_ids' must be a list of integers"),
    ({"ignore_eos": 1}, "'ignore_eos' must be a boolean"),
    ({"logit_bias": [1]}, "'logit_bias' must be an object"),
    ({"logit_bias": {"x": 1}}, "'logit_bias' keys must be token ids, got 'x'"),
    ({"prompt": 5}, "'prompt' must be a string or a list of token ids"),
    ({"prompt": None}, "'prompt' must be a string or a list of token ids"),
])
@needs_model
def test_wrong_types(fields, message):
    assert_fails_with(generate([dict({"prompt": "Hello"}, **fields)]), "line 1: " + message)


@pytest.mark.parametrize("fields, message", [
    ({"temperature": -1}, "temperature must be in [0, 2], got -1"),
    ({"temperature": 2.5}, "temperature must be in [0, 2], got 2.5"),
    ({"top_p": 0}, "top_p must be in (0, 1], got 0"),
    ({"top_p": 1.5}, "top_p must be in (0, 1], got 1.5"),
    ({"top_k": -5}, "top_k must be -1 or 0 (disabled) or at least 1, got -5"),
    ({"min_p": 1.5}, "min_p must be in [0, 1], got 1.5"),
    ({"repetition_penalty": 0}, "repetition_penalty must be in (0, 2], got 0"),
    ({"presence_penalty": 3}, "presence_penalty must be in [-2, 2], got 3"),
    ({"frequency_penalty": -2.5}, "frequency_penalty must be in [-2, 2], got -2.5"),
    ({"max_tokens": 0}, "max_tokens must be at least 1, got 0"),
    ({"max_tokens": -3}, "max_tokens must be at least 1, got -3"),
    ({"min_tokens": 9, "max_tokens": 4}, "min_tokens must be at most max_tokens (4), got 9"),
    ({"stop": [""]}, "'stop' must not contain empty strings"),
    ({"stop_token_ids": [N_VOCAB]}, f"stop_token_ids entries must be in [0, {N_VOCAB - 1}], got {N_VOCAB}"),
    ({"logit_bias": {"5": 200}}, "logit_bias values must be in [-100, 100], got 200 for token 5"),
    ({"logit_bias": {"-1": 1}}, f"logit_bias token ids must be in [0, {N_VOCAB - 1}], got -1"),
    ({"logprobs": 21}, "logprobs must be in [0, 20], got 21"),
])
@needs_model
def test_invalid_sampling_values(fields, message):
    assert_fails_with(generate([dict({"prompt": "Hello"}, **fields)]), "line 1: " + message)


@needs_model
def test_prompt_longer_than_max_model_len():
    p = generate([{"prompt": "word " * 100}], "--max-model-len", "64")
    assert_fails_with(p, "line 1: prompt has 101 tokens", "more than the model length of 64")


@needs_model
def test_prompt_plus_max_tokens_over_max_model_len():
    p = generate([{"prompt": "hello there", "max_tokens": 63}], "--max-model-len", "64")
    assert_fails_with(p, "line 1: prompt (2 tokens) plus max_tokens (63) exceeds the model length of 64")


@needs_model
@needs_model
def test_max_model_len_beyond_the_model_context_is_refused():
    p = generate([{"prompt": "hi"}], "--max-model-len", "100000000")
    assert_fails_with(p, "--max-model-len 100000000 is greater than the model's context length 8192")


def test_request_that_exactly_fills_max_model_len_runs():
    out = output_lines(generate([{"prompt": "hello there", "max_tokens": 62, "ignore_eos": True,
                                  "temperature": 0}], "--max-model-len", "64"))
    assert out[0]["completion_tokens"] == 62
    assert out[0]["prompt_tokens"] + out[0]["completion_tokens"] == 64


@pytest.mark.parametrize("req, message", [
    ({"prompt": ""}, "'prompt' is empty"),
    ({"prompt": []}, "'prompt' is empty"),
    ({"prompt_token_ids": []}, "'prompt' is empty"),
    ({"max_tokens": 3}, "missing 'prompt'"),
])
@needs_model
def test_empty_or_missing_prompt(req, message):
    assert_fails_with(generate([req]), "line 1: " + message)


@pytest.mark.parametrize("ids", [[1, N_VOCAB], [-1], [2 ** 40], [1, "a"], [1.5], [[1]]])
@needs_model
def test_prompt_token_ids_out_of_range(ids):
    for key in ("prompt", "prompt_token_ids"):
        assert_fails_with(generate([{key: ids}]), f"line 1: 'prompt' token ids must be integers in [0, {N_VOCAB})")


@needs_model
def test_prompt_token_ids_in_range_run():
    out = output_lines(generate([{"prompt": [1, 4093, 198, 19556], "max_tokens": 2, "temperature": 0}]))
    assert out[0]["prompt_tokens"] == 4


# ------------------------------------------------------------------ bad options

@needs_model
def test_unknown_kv_cache_dtype():
    assert_fails_with(generate([SHORT], "--kv-cache-dtype", "q8"), "--kv-cache-dtype must be f16, f32, q8_0 or fp8_e5m2, got 'q8'")


@pytest.mark.parametrize("value", ["lots", "-5", "2XB", ""])
@needs_model
def test_bad_kv_cache_memory(value):
    assert_fails_with(generate([SHORT], "--kv-cache-memory", value),
                      f"--kv-cache-memory '{value}' is not a size like 2GiB or 512MiB, or auto")


@pytest.mark.parametrize("value", ["0", "1KiB"])
@needs_model
def test_kv_cache_memory_smaller_than_one_block(value):
    assert_fails_with(generate([SHORT], "--kv-cache-memory", value), "--kv-cache-memory is smaller than one KV block")


@needs_model
def test_kv_cache_too_small_for_the_request():
    # One 16-token block (360 KiB for this model) cannot hold a 40-token sequence.
    p = generate([{"prompt": "hello " * 10, "max_tokens": 30}], "--kv-cache-memory", "400KiB")
    assert_fails_with(p, "cannot hold request", "increase --kv-cache-memory")


@pytest.mark.parametrize("args, message", [
    (["--max-model-len", "abc"], "the argument ('abc') for option '--max-model-len' is invalid"),
    (["--max-model-len", "-1"], "--max-model-len must be >= 0"),
    (["--block-size", "0"], "--block-size must be in [1, 1024]"),
    (["--threads", "-1"], "--threads must be in [0, 1024]"),
    (["--max-num-seqs", "0"], "--max-num-seqs must be >= 1"),
    (["--log-level", "loud"], "--log-level must be one of"),
    (["--no-such-option"], "unrecognised option '--no-such-option'"),
])
@needs_model
def test_bad_generate_options(args, message):
    p = run_spate(["generate", "--model", SPATE_MODEL, *args], json.dumps(SHORT) + "\n")
    assert_fails_with(p, message)


@pytest.mark.parametrize("args, message", [
    (["--sse-keepalive", "1e-300"], "--sse-keepalive must be in [0.01, 86400] seconds, got 1e-300"),
    (["--sse-keepalive", "86401"], "--sse-keepalive must be in [0.01, 86400] seconds"),
    (["--header-timeout", "0"], "--header-timeout must be in [0.01, 86400] seconds"),
    (["--idle-timeout", "1e300"], "--idle-timeout must be in [0.01, 86400] seconds"),
    (["--shutdown-timeout", "1e300"], "--shutdown-timeout must be in [0, 86400] seconds"),
    (["--model-load-timeout", "1e-300"], "--model-load-timeout must be in [0.01, 86400] seconds"),
    (["--model-idle-unload", "1e10"], "--model-idle-unload must be in [0, 1e9] seconds"),
    (["--max-connections", "2000000"], "--max-connections must be in [1, 1048576]"),
    (["--models-dir", ""], "--models-dir must not be empty"),
    (["--served-model-name", ""], "--served-model-name must not be empty"),
    (["--speculative-config", ""], "--speculative-config must not be empty"),
    (["--host", "not-an-ip"], "--host must be an IP address"),
    (["--host", "999.0.0.1"], "--host must be an IP address"),
])
@needs_model
def test_bad_serve_options_exit_2_before_loading(args, message):
    """Every duration and count flag of `spate serve` has a range, and an empty
    name or directory is refused: exit 2 with the flag named, before the model
    loads (issue 54: --sse-keepalive 1e-300 sent 2.2 million comments in 120 s;
    a bad --host exited 1 after loading; empty flags were ignored)."""
    p = run_spate(["serve", "--model", SPATE_MODEL, "--port", "0", *args])
    assert_fails_with(p, message)
    assert p.returncode == 2, p.stderr.decode(errors="replace")


def test_unknown_subcommand():
    p = run_spate(["frobnicate"])
    assert_fails_with(p, "unknown command 'frobnicate'", "usage: spate <command>")


def test_no_subcommand():
    assert_fails_with(run_spate([]), "usage: spate <command>")


# ------------------------------------------------------------------ tokenize

def _tokenizer_vectors():
    data = json.loads((FIXTURES / "smollm2_tokenizer.json").read_text())
    return data["vectors"]


@pytest.mark.parametrize("vec", _tokenizer_vectors(), ids=lambda v: v["name"])
@needs_model
def test_tokenize_matches_the_llama_cpp_fixture(vec):
    # Plain: llama_tokenize(add_special=false, parse_special=false).
    assert tokenize(vec["text"]) == vec["ids"]
    # --special: add BOS/EOS as the model asks (SmolLM2 adds none) and parse special-token text.
    expected = vec.get("ids_add_special_parse_special", vec["ids_parse_special"])
    assert tokenize(vec["text"], special=True) == expected


@needs_model
def test_tokenize_chat_markup_with_and_without_special():
    vecs = {v["name"]: v for v in _tokenizer_vectors()}
    # Pieces taken from the fixture: '<|im_start|>' and '<|im_end|>' spelled as plain text.
    im_start_text = vecs["im_start_text"]["ids"][:7]       # '<|im_start|>'
    im_end_text = vecs["special_inline"]["ids"][1:8]       # '<|im_end|>'
    user_nl = vecs["im_start_text"]["ids_parse_special"][1:3]  # 'user\n'
    bos, eos = 1, 2                                         # <|im_start|>, <|im_end|> in SmolLM2
    hi = tokenize("hi")
    text = "<|im_start|>user\nhi<|im_end|>"
    assert tokenize(text) == im_start_text + user_nl + hi + im_end_text
    assert tokenize(text, special=True) == [bos] + user_nl + hi + [eos]
    assert tokenize("user\nhi") == user_nl + hi


@needs_model
def test_tokenize_invalid_utf8_does_not_fail():
    ids = tokenize(b"ab\xff\xfe\xe2\x82cd")
    assert ids and all(0 <= t < N_VOCAB for t in ids)


@needs_model
def test_generate_draws_a_progress_bar_only_on_a_terminal():
    import pty
    lines = "".join(json.dumps({"prompt": f"Story {i}:", "max_tokens": 96, "temperature": 0}) + "\n" for i in range(8))
    master, slave = pty.openpty()
    chunks = []

    def drain():  # read while spate runs: a full pty buffer would block its writes to stderr
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        p = subprocess.run([str(SPATE_BIN), "generate", "--model", str(SPATE_MODEL), "--log-level", "warn"], input=lines.encode(),
                           stdout=subprocess.PIPE, stderr=slave, timeout=TIMEOUT, env=process_env({"SPATE_SKIP_WARMUP": "1"}))
    finally:
        os.close(slave)
        reader.join(timeout=10)
        os.close(master)
    data = b"".join(chunks)
    assert p.returncode == 0
    text = data.decode(errors="replace")
    assert re.search(r"\[[#.]{30}\] \d/8 requests, \d+\.\d tok/s", text), text[-500:]
    assert text.endswith("\r\x1b[K") or "\r\x1b[K" in text, "the bar's line is cleared at the end"
    assert len(p.stdout.decode().splitlines()) == 8
    # Not a terminal: no bar.
    q = run_spate(["generate", "--model", SPATE_MODEL, "--log-level", "warn"], lines)
    assert q.returncode == 0 and b"requests," not in q.stderr
