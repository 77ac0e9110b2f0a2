"""Open WebUI (PyPI open-webui, tests/requirements-openwebui.txt) against a real
`spate serve`, in Debian's headless Chromium driven by selenium.

Open WebUI's Ollama connection points at spate's /api/* and its OpenAI
connection at spate's /v1. Through each: the spate model is listed, a chat
message gets a streamed answer, a second turn hits spate's prefix cache
(spate:prefix_cache_hits_total rises), and the stop button ends a long
generation (spate:num_requests_running returns to 0).

Run by scripts/openwebui-test.sh, which installs Open WebUI in its own venv
and sets SPATE_OPENWEBUI_BIN; without it the module is skipped (with
SPATE_REQUIRE_OPENWEBUI=1 it fails instead). Nothing is fetched at run time:
Open WebUI runs with USE_SLIM_DOCKER=true (no local vector DB or embedding
model), OFFLINE_MODE and HF_HUB_OFFLINE. Screenshots go to
build/test-artifacts/openwebui-*.png."""

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from spate_server import MODEL_NAME, REPO, SPATE_BIN, SPATE_MODEL, SpateServer, free_port

OWUI_BIN = os.environ.get("SPATE_OPENWEBUI_BIN", "")
if not OWUI_BIN or not Path(OWUI_BIN).is_file():
    if os.environ.get("SPATE_REQUIRE_OPENWEBUI") == "1":
        raise RuntimeError(f"SPATE_OPENWEBUI_BIN={OWUI_BIN!r} is not an executable (scripts/openwebui-test.sh)")
    pytest.skip("Open WebUI not installed (scripts/openwebui-test.sh runs this test)", allow_module_level=True)
if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing", allow_module_level=True)

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
ARTIFACTS = Path(os.environ.get("SPATE_TEST_ARTIFACTS") or REPO / "build" / "test-artifacts")
OWUI_START_TIMEOUT = 300  # seconds: migrations and imports on a busy 2-core machine
LONG_PROMPT = "Write a very long story about a dragon and a knight."


@pytest.fixture(scope="module")
def spate():
    s = SpateServer(env={"SPATE_SKIP_WARMUP": "1"})
    try:
        yield s.wait_ready()
    finally:
        assert s.stop() == 0, s.log_text()[-3000:]


@pytest.fixture(scope="module")
def owui(spate):
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="spate-openwebui-"))
    env = dict(os.environ)
    env.update({
        "DATA_DIR": str(data), "USE_SLIM_DOCKER": "true", "OFFLINE_MODE": "true", "HF_HUB_OFFLINE": "1",
        "WEBUI_AUTH": "False", "ENABLE_SIGNUP": "False", "ENABLE_VERSION_UPDATE_CHECK": "false",
        "WEBUI_SECRET_KEY": "spate-openwebui-test", "RAG_EMBEDDING_ENGINE": "openai",
        "ENABLE_OLLAMA_API": "true", "OLLAMA_BASE_URL": spate.base_url,
        "ENABLE_OPENAI_API": "true", "OPENAI_API_BASE_URL": spate.base_url + "/v1", "OPENAI_API_KEY": "unused",
        # Prefixes keep the two connections' entries of the one spate model apart (one id each).
        "OLLAMA_API_CONFIGS": json.dumps({"0": {"prefix_id": "ollama"}}),
        "OPENAI_API_CONFIGS": json.dumps({"0": {"prefix_id": "oai"}}),
        "ENABLE_WEB_SEARCH": "false", "ENABLE_CODE_INTERPRETER": "false", "ENABLE_TITLE_GENERATION": "false",
        "ENABLE_TAGS_GENERATION": "false", "ENABLE_FOLLOW_UP_GENERATION": "false",
        "ENABLE_AUTOCOMPLETE_GENERATION": "false", "ANONYMIZED_TELEMETRY": "false", "DO_NOT_TRACK": "true",
        "SCARF_NO_ANALYTICS": "true",
    })
    log = open(data / "open-webui.log", "w+")
    proc = subprocess.Popen([OWUI_BIN, "serve", "--host", "127.0.0.1", "--port", str(port)], cwd=data, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + OWUI_START_TIMEOUT
    try:
        while True:
            assert proc.poll() is None, "Open WebUI exited:\n" + (data / "open-webui.log").read_text()[-4000:]
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "Open WebUI not up:\n" + (data / "open-webui.log").read_text()[-4000:]
            time.sleep(1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        log.close()
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="module")
def browser(owui):
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900",
              "--no-first-run", "--disable-extensions"):
        opts.add_argument(a)
    drv = webdriver.Chrome(options=opts, service=Service(executable_path=CHROMEDRIVER))
    drv.set_page_load_timeout(120)
    drv.set_script_timeout(60)
    try:
        drv.get(owui + "/")
        # WEBUI_AUTH=False: the page signs in as the admin by itself and keeps the token in localStorage.
        wait(drv, lambda d: d.execute_script("return localStorage.token || null"), 120, "no Open WebUI token")
        dismiss_release_notes(drv)
        yield drv
    finally:
        shot(drv, "last")
        drv.quit()


def dismiss_release_notes(drv):
    """A first visit shows the "What's New" dialog over the chat; its button closes it."""
    try:
        btn = WebDriverWait(drv, 15, poll_frequency=0.2).until(
            lambda d: d.find_element(By.XPATH, "//button[contains(., \"Okay, Let's Go!\")]"))
        btn.click()
    except Exception:  # no dialog: nothing to close
        pass


def wait(drv, cond, timeout=120, what=""):
    return WebDriverWait(drv, timeout, poll_frequency=0.2).until(lambda d: cond(d), message=what)


def shot(drv, name):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    drv.save_screenshot(str(ARTIFACTS / f"openwebui-{name}.png"))


def metric(srv, name):
    with urllib.request.urlopen(srv.base_url + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                return float(line.rpartition(" ")[2])
    raise AssertionError(f"{name} not exported")


def owui_models(drv):
    """Open WebUI's own model list (/api/models), fetched by the page with its token."""
    return drv.execute_async_script("""
        const done = arguments[arguments.length - 1];
        fetch('/api/models', {headers: {Authorization: 'Bearer ' + localStorage.token}})
          .then(r => r.json()).then(j => done(JSON.stringify(j))).catch(e => done('ERR ' + e));""")


def is_spate_model(model_id):
    """ "ollama.smollm2:latest" or "oai.smollm2": the spate model through one connection."""
    return model_id.split(".", 1)[-1].split(":")[0] == MODEL_NAME


def connection_models(drv):
    raw = owui_models(drv)
    assert not raw.startswith("ERR"), raw
    data = json.loads(raw)["data"]
    ollama = [m["id"] for m in data if m.get("owned_by") == "ollama"]
    openai_ = [m["id"] for m in data if m.get("owned_by") == "openai"]
    return ollama, openai_


def assistant_texts(drv):
    return drv.execute_script("""
        return Array.from(document.querySelectorAll('#response-content-container'))
                    .map(e => e.innerText.trim());""")


def send(drv, text):
    box = wait(drv, lambda d: d.find_element(By.ID, "chat-input"), 60, "no chat input")
    box.click()
    box.send_keys(text)
    box.send_keys(Keys.ENTER)


def wait_answer(drv, n, spate, timeout=180):
    """Waits until the n-th assistant message has text and spate has no running request."""
    def done(d):
        t = assistant_texts(d)
        return len(t) >= n and t[n - 1] and metric(spate, "spate:num_requests_running") == 0
    wait(drv, done, timeout, f"no answer {n}")
    return assistant_texts(drv)[n - 1]


def test_both_connections_list_the_spate_model(browser, spate):
    ollama, openai_ = wait(browser, lambda d: (lambda o: o if o[0] and o[1] else None)(connection_models(d)),
                           60, "a connection lists no model")
    assert any(is_spate_model(m) and m.startswith("ollama.") for m in ollama), ollama
    assert any(is_spate_model(m) and m.startswith("oai.") for m in openai_), openai_


@pytest.mark.parametrize("connection", ["ollama", "openai"])
def test_chat_streams_then_second_turn_hits_prefix_cache(browser, owui, spate, connection):
    ollama, openai_ = connection_models(browser)
    model = [m for m in (ollama if connection == "ollama" else openai_) if is_spate_model(m)][0]
    browser.get(f"{owui}/?models={model}")
    gen0 = metric(spate, "spate:generation_tokens_total")
    send(browser, "What is the capital of France?")
    # Streamed: the answer's text is seen while spate is still generating it.
    saw_partial = []

    def streaming(d):
        t = assistant_texts(d)
        if t and t[0] and metric(spate, "spate:num_requests_running") > 0:
            saw_partial.append(t[0])
        return t and t[0] and metric(spate, "spate:num_requests_running") == 0
    wait(browser, streaming, 180, "no first answer")
    shot(browser, f"{connection}-turn1")
    first = assistant_texts(browser)[0]
    assert first, "empty answer"
    assert metric(spate, "spate:generation_tokens_total") > gen0
    # A shorter text was on the page while spate was still generating: the answer grew as it streamed.
    assert any(len(p) < len(first) for p in saw_partial), (saw_partial, first)
    hits0 = metric(spate, "spate:prefix_cache_hits_total")
    send(browser, "And of Germany?")
    second = wait_answer(browser, 2, spate)
    shot(browser, f"{connection}-turn2")
    assert second
    # The second turn's prompt starts with the first turn's conversation: spate serves it from the prefix cache.
    assert metric(spate, "spate:prefix_cache_hits_total") > hits0


def stop_button(drv):
    for xp in ("//button[@id='stop-response-button']", "//button[@aria-label='Stop']",
               "//button[contains(@class,'rounded-full')][.//*[local-name()='svg'][.//*[local-name()='rect']]]"):
        found = drv.find_elements(By.XPATH, xp)
        if found and found[0].is_displayed():
            return found[0]
    return None


@pytest.mark.parametrize("connection", ["ollama", "openai"])
def test_stop_button_ends_the_generation(browser, owui, spate, connection):
    ollama, openai_ = connection_models(browser)
    model = [m for m in (ollama if connection == "ollama" else openai_) if is_spate_model(m)][0]
    browser.get(f"{owui}/?models={model}")
    send(browser, LONG_PROMPT)
    wait(browser, lambda d: metric(spate, "spate:num_requests_running") > 0 and assistant_texts(d)
         and assistant_texts(d)[0], 120, "the long answer did not start")
    btn = wait(browser, stop_button, 30, "no stop button")
    shot(browser, f"{connection}-generating")
    btn.click()
    t0 = time.monotonic()
    wait(browser, lambda d: metric(spate, "spate:num_requests_running") == 0, 30, "spate still generating")
    assert time.monotonic() - t0 < 30
    shot(browser, f"{connection}-stopped")
    # Stopped long before its end: the greedy story runs over 1500 tokens.
    assert len(assistant_texts(browser)[0].split()) < 1000
