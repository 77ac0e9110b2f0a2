"""LoRA adapters through the real server (issue 38): llama.cpp's GGUF adapter
format written with the gguf package (tests/reference/make_lora_adapters.py),
served with --lora-modules and /v1/load_lora_adapter.

- Greedy tokens equal llama.cpp's `--lora` output on the default model
  (fixtures/smollm2_lora_greedy.json, tests/reference/make_lora_fixture.py),
  within the reference tests' rule: a divergence only where llama.cpp's own
  margin between its two best tokens is a near-tie.
- With a strong adapter (fixtures/smollm2_lora_strong_greedy.json,
  tests/reference/make_lora_strong_fixture.py: std-b 0.2, where rounding
  inside the adapter's products moves logits by tenths of a nat) the same at a
  tighter margin: spate rounds an F16 adapter's activations as ggml does.
- Base plus two adapters in one batch equal each alone, token for token and
  logprob for logprob.
- A shape that does not fit its base is refused at load with a 400 naming the
  tensor; the routes, listing and metrics."""

import concurrent.futures
import hashlib
import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import openai
import pytest

from spate_server import REPO, SPATE_MODEL, SpateServer, post_json

FIXTURE = json.loads((REPO / "tests" / "integration" / "fixtures" / "smollm2_lora_greedy.json").read_text())
STRONG = json.loads((REPO / "tests" / "integration" / "fixtures" / "smollm2_lora_strong_greedy.json").read_text())
# llama.cpp margins at or below this are near-ties where either token is a
# correct greedy decode (SmolLM2's tie margin in test_reference_llamacpp.cpp).
TIE_MARGIN = 0.5
# The strong adapter: before spate rounded the adapter's activations to F16 as
# ggml does, it left llama.cpp at margins of 0.40 and 0.39 (english_story, step 3;
# a second prompt, step 4); now
# its divergences are at margins of 0.35 and below (json, step 5), at both ISA levels;
# what remains is attention rounding: ggml rounds q and the softmax to F16 there.
STRONG_TIE_MARGIN = 0.37


@pytest.fixture(scope="module")
def adapters(tmp_path_factory):
    d = tmp_path_factory.mktemp("lora")
    out = {}
    for name, spec in FIXTURE["adapters"].items():
        path = d / f"smollm2-{name}.gguf"
        subprocess.run([sys.executable, REPO / "tests" / "reference" / "make_lora_adapters.py", "--base", SPATE_MODEL, "--out", path,
                        "--seed", str(spec["seed"])], check=True, timeout=300)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == spec["sha256"], f"{path} differs from the fixture's adapter"
        out[name] = path
    for name, spec in STRONG["adapters"].items():
        path = d / f"smollm2-{name}.gguf"
        subprocess.run([sys.executable, REPO / "tests" / "reference" / "make_lora_adapters.py", "--base", SPATE_MODEL, "--out", path,
                        "--seed", str(spec["seed"]), "--std-b", str(spec["std_b"]), "--alpha", str(spec["alpha"])],
                       check=True, timeout=300)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == spec["sha256"], f"{path} differs from the fixture's adapter"
        out[name] = path
    bad = d / "smollm2-bad.gguf"
    subprocess.run([sys.executable, REPO / "tests" / "reference" / "make_lora_adapters.py", "--base", SPATE_MODEL, "--out", bad,
                    "--bad-shape"], check=True, timeout=300)
    out["bad"] = bad
    return out


@pytest.fixture(scope="module")
def server(adapters):
    s = SpateServer("--lora-modules", f"a1={adapters['a1']}", "--lora-modules", f"s1={adapters['s1']}", "--lora-modules", json.dumps({"name": "a2", "path": str(adapters["a2"])}),
                    "--kv-cache-memory", "256MiB", "--enable-lora-runtime-loading", "--lora-allowed-dirs", adapters["a1"].parent)
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


def complete(base_url, model, prompt, max_tokens=16, logprobs=None):
    c = openai.OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0, timeout=300)
    r = c.completions.create(model=model, prompt=prompt, max_tokens=max_tokens, temperature=0, logprobs=logprobs)
    assert r.model == model
    return r.choices[0]


def detokenize(base_url, ids):
    st, body, _ = post_json(base_url, "/detokenize", {"tokens": ids})
    assert st == 200
    return body["prompt"]


CASES = [(f, name, c) for f in (FIXTURE, STRONG) for name, a in f["adapters"].items() for c in a["cases"]]


@pytest.mark.parametrize("fixture,name,case", CASES, ids=[f"{n}-{c['name']}" for _, n, c in CASES])
def test_greedy_matches_llama_cpp_lora(server, fixture, name, case):
    n = fixture["n_gen"]
    tie_margin = STRONG_TIE_MARGIN if fixture is STRONG else TIE_MARGIN
    ids = case["generated_ids"]
    choice = complete(server.base_url, name, case["prompt_ids"], max_tokens=n)
    text = choice.text
    if len(ids) < n:  # llama.cpp stopped at an end-of-generation token, which is not text
        ids = ids[:-1]
        if text == detokenize(server.base_url, ids) and choice.finish_reason == "stop":
            return
    elif text == detokenize(server.base_url, ids):
        return
    matched = max(k for k in range(len(ids) + 1) if text.startswith(detokenize(server.base_url, ids[:k])))
    margin = case["steps"][matched][1]
    assert margin <= tie_margin, f"{name}: diverged from llama.cpp at step {matched} (llama.cpp margin {margin}): {text!r}"


def test_adapters_are_listed_with_their_base(server, adapters):
    with urllib.request.urlopen(server.base_url + "/v1/models", timeout=30) as r:
        data = {m["id"]: m for m in json.loads(r.read())["data"]}
    assert data["a1"]["parent"] == "smollm2" and data["a1"]["root"] == str(adapters["a1"])
    assert data["a1"]["status"]["value"] == "loaded" and data["smollm2"]["parent"] is None


def test_adapters_change_the_output(server):
    prompts = [c["prompt_ids"] for c in FIXTURE["adapters"]["a1"]["cases"]]
    outs = {m: [complete(server.base_url, m, p).text for p in prompts] for m in ("smollm2", "a1", "a2")}
    assert outs["a1"] != outs["smollm2"] and outs["a2"] != outs["smollm2"] and outs["a1"] != outs["a2"]


def test_base_and_two_adapters_in_one_batch_equal_each_alone(server):
    prompts = [c["prompt_ids"] for c in FIXTURE["adapters"]["a1"]["cases"][:4]]
    jobs = [(m, i) for i in range(len(prompts)) for m in ("smollm2", "a1", "a2")]

    def one(job):
        ch = complete(server.base_url, job[0], prompts[job[1]], max_tokens=12, logprobs=2)
        return ch.text, ch.logprobs.token_logprobs, ch.logprobs.top_logprobs

    alone = {job: one(job) for job in jobs}
    for _ in range(2):
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
            batched = dict(zip(jobs, pool.map(one, jobs)))
        for job in jobs:
            assert batched[job] == alone[job], job


def test_load_route_refuses_a_shape_that_does_not_fit(server, adapters):
    st, body, _ = post_json(server.base_url, "/v1/load_lora_adapter", {"lora_name": "bad", "lora_path": str(adapters["bad"])})
    assert st == 400 and "blk.0.attn_k.weight" in body["error"]["message"] and "[576, 192]" in body["error"]["message"], body
    st, body, _ = post_json(server.base_url, "/v1/completions", {"model": "bad", "prompt": "x", "max_tokens": 1})
    assert st == 404 and body["error"]["code"] == "model_not_found"
    for bad_body, code in (({"lora_name": "x"}, 400), ({"lora_name": "x", "lora_path": "/nonexistent.gguf"}, 403),
                           ({"lora_name": "x", "lora_path": str(adapters["a1"].parent / "nonexistent.gguf")}, 400),
                           ({"lora_name": "x", "lora_path": str(adapters["a1"]), "base_model_name": "nope"}, 404),
                           ({"lora_name": "a1", "lora_path": str(adapters["a1"])}, 400)):
        assert post_json(server.base_url, "/v1/load_lora_adapter", bad_body)[0] == code, bad_body
    assert complete(server.base_url, "smollm2", "Hello", max_tokens=4).text  # still serving


def test_load_and_unload_at_run_time(server, adapters):
    ref = [complete(server.base_url, "a2", c["prompt_ids"], max_tokens=12).text for c in FIXTURE["adapters"]["a2"]["cases"][:3]]
    st, body, _ = post_json(server.base_url, "/v1/load_lora_adapter", {"lora_name": "again", "lora_path": str(adapters["a2"])})
    assert st == 200 and "again" in body
    got = [complete(server.base_url, "again", c["prompt_ids"], max_tokens=12).text for c in FIXTURE["adapters"]["a2"]["cases"][:3]]
    assert got == ref
    st, body, _ = post_json(server.base_url, "/v1/unload_lora_adapter", {"lora_name": "again"})
    assert st == 200
    st, body, _ = post_json(server.base_url, "/v1/completions", {"model": "again", "prompt": "x", "max_tokens": 1})
    assert st == 404
    assert post_json(server.base_url, "/v1/unload_lora_adapter", {"lora_name": "again"})[0] == 404
    m = server.metrics(keep_model_label=True)
    assert m['spate:request_success_total{model_name="again",finished_reason="length"}'] == 3
    info = [k for k in m if k.startswith("spate:lora_requests_info{")]
    assert info and 'max_lora="4"' in info[0] and 'model_name="smollm2"' in info[0], info


def test_offline_generate_selects_adapters_per_line(server, adapters):
    from spate_server import SPATE_BIN, process_env
    prompts = [c["prompt_ids"] for c in FIXTURE["adapters"]["a1"]["cases"][:3]]
    lines, want = [], []
    for p in prompts:
        for model, key in (("smollm2", None), ("a1", "lora"), ("a2", "model")):
            line = {"prompt_token_ids": p, "max_tokens": 10, "temperature": 0}
            if key:
                line[key] = model
            lines.append(json.dumps(line))
            want.append(complete(server.base_url, model, p, max_tokens=10).text)
    r = subprocess.run([str(SPATE_BIN), "generate", "--model", str(SPATE_MODEL), "--threads", "2", "--lora-modules", f"a1={adapters['a1']}",
                        "--lora-modules", f"a2={adapters['a2']}"], input="\n".join(lines) + "\n", capture_output=True, text=True,
                       timeout=300, env=process_env())
    assert r.returncode == 0, r.stderr[-2000:]
    assert [json.loads(l)["text"] for l in r.stdout.splitlines()] == want
    bad = subprocess.run([str(SPATE_BIN), "generate", "--model", str(SPATE_MODEL), "--lora-modules", f"b={adapters['bad']}"],
                         input="{}\n", capture_output=True, text=True, timeout=300, env=process_env())
    assert bad.returncode == 2 and "blk.0.attn_k.weight" in bad.stderr
