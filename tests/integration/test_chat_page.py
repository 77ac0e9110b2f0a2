"""The built-in chat page (GET /) in a real browser: Debian's headless Chromium
driven by selenium (chromium-driver), against a real `spate serve`.

It types a message, waits for the streamed answer and its TTFT and tok/s
line, checks the text equals the API's answer for the same request (greedy,
so batch-invariant), stops a long answer and checks that the server cancelled
it (spate:request_cancelled_total rises), and does the same over TLS with the
SSE transport. Screenshots go to build/test-artifacts/ (SPATE_TEST_ARTIFACTS
overrides the directory)."""

import json
import os
import shutil
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from spate_server import MODEL_NAME, REPO, SPATE_BIN, SPATE_MODEL, SpateServer, self_signed_cert

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing", allow_module_level=True)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
ARTIFACTS = Path(os.environ.get("SPATE_TEST_ARTIFACTS") or REPO / "build" / "test-artifacts")
API_KEY = "sk-chat-page-test"
LONG_PROMPT = "Write a very long story about a dragon and a knight."  # greedy: over 1500 tokens


@pytest.fixture(scope="module")
def browser():
    assert Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file(), \
        "the chat page test needs Debian's chromium and chromium-driver (scripts/install-deps.sh)"
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,900",
              "--ignore-certificate-errors", "--no-first-run", "--disable-extensions"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(options=opts, service=Service(executable_path=CHROMEDRIVER))
    drv.set_page_load_timeout(60)
    try:
        yield drv
    finally:
        drv.quit()


@pytest.fixture(scope="module")
def server():
    s = SpateServer(api_key=API_KEY, env={"SPATE_SKIP_WARMUP": "1"})
    try:
        yield s.wait_ready()
    finally:
        assert s.stop() == 0, s.log_text()[-3000:]


def metric(srv, name, ssl_context=None):
    with urllib.request.urlopen(srv.base_url + "/metrics", timeout=10, context=ssl_context) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                return float(line.rpartition(" ")[2])
    raise AssertionError(f"{name} not exported")


def wait(drv, cond, timeout=120, what=""):
    return WebDriverWait(drv, timeout, poll_frequency=0.05).until(lambda d: cond(d), message=what)


def open_page(drv, srv, key=API_KEY):
    drv.get(srv.base_url + "/")
    drv.execute_script("localStorage.clear();")
    drv.refresh()
    dialog = wait(drv, lambda d: d.find_element(By.ID, "key-dialog").get_attribute("open") is not None and
                  d.find_element(By.ID, "key-dialog"), 30, "the API-key prompt")
    dialog.find_element(By.ID, "key-input").send_keys(key)
    dialog.find_element(By.ID, "key-save").click()
    wait(drv, lambda d: d.find_element(By.ID, "model").text == MODEL_NAME, 30, "the model name after the key")


def set_settings(drv, transport, temperature, max_tokens):
    drv.execute_script("""
        const set = (id, v) => { const e = document.getElementById(id); e.value = v; e.dispatchEvent(new Event('change')); };
        set('transport-choice', arguments[0]); set('temperature', arguments[1]); set('max-tokens', arguments[2]);""",
                       transport, str(temperature), str(max_tokens))


def ask(drv, text):
    n_before = len(drv.find_elements(By.CSS_SELECTOR, ".msg.assistant"))
    box = drv.find_element(By.ID, "prompt")
    box.click()  # focus first: keys sent right after the key dialog closed can get lost otherwise
    box.send_keys(text)
    box.send_keys(Keys.ENTER)
    wait(drv, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".msg.assistant")) > n_before, 10, "an answer bubble")
    return drv.find_elements(By.CSS_SELECTOR, ".msg.assistant")[-1]


def wait_stats(drv, answer, timeout=180):
    return wait(drv, lambda d: (s := answer.find_elements(By.CSS_SELECTOR, ".stats")) and s[0].text, timeout, "the stats line")


def api_answer(srv, text, max_tokens, ssl_context=None):
    body = {"model": MODEL_NAME, "input": [{"role": "user", "content": text}], "temperature": 0,
            "max_output_tokens": max_tokens}
    req = urllib.request.Request(srv.base_url + "/v1/responses", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + API_KEY})
    with urllib.request.urlopen(req, timeout=120, context=ssl_context) as r:
        return json.load(r)["output_text"]


def screenshot(drv, name):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    drv.save_screenshot(str(path))
    assert path.stat().st_size > 1000


def stop_long_answer(drv, srv, ssl_context=None):
    """Starts a long answer, clicks Stop once text streams, and checks the server cancelled it."""
    cancelled_before = metric(srv, "spate:request_cancelled_total", ssl_context)
    set_settings(drv, drv.find_element(By.ID, "transport-choice").get_attribute("value"), 0, 1500)
    answer = ask(drv, LONG_PROMPT)
    wait(drv, lambda d: len(answer.find_element(By.CSS_SELECTOR, ".body").text) > 0, 120, "streamed text")
    drv.find_element(By.ID, "stop").click()
    assert "stopped" in wait_stats(drv, answer, 10)
    deadline = time.time() + 20
    while metric(srv, "spate:request_cancelled_total", ssl_context) < cancelled_before + 1:
        assert time.time() < deadline, "Stop did not cancel the request on the server"
        time.sleep(0.1)
    while metric(srv, "spate:num_requests_running", ssl_context) != 0:  # the gauge follows at the next engine step
        assert time.time() < deadline, "the cancelled request still runs"
        time.sleep(0.1)
    assert drv.find_element(By.ID, "send").is_displayed()


def test_chat_streams_over_websocket_and_stop_cancels(browser, server):
    open_page(browser, server)
    set_settings(browser, "ws", 0, 48)
    answer = ask(browser, "What is the capital of France?")
    stats = wait_stats(browser, answer)
    assert "TTFT" in stats and "tok/s" in stats, stats
    assert browser.find_element(By.ID, "transport").text == "WebSocket"
    text = answer.find_element(By.CSS_SELECTOR, ".body").text
    expected = api_answer(server, "What is the capital of France?", 48)
    if "`" not in expected:  # code spans render into elements
        assert text.strip() == expected.strip()
    assert text.strip()
    screenshot(browser, "chat_page_ws.png")
    stop_long_answer(browser, server)


def test_chat_renders_code_blocks(browser, server):
    open_page(browser, server)
    # The renderer, fed directly: fenced blocks become <pre><code>, never HTML.
    n_pre = browser.execute_script("""
        const el = document.createElement('div');
        renderMarkdownLite(el, 'Run:\\n```python\\nprint("<b>hi</b>")\\n```\\nand `x`.');
        document.getElementById('log').appendChild(el);
        return [el.querySelectorAll('pre code').length, el.querySelectorAll('code.inline').length,
                el.querySelectorAll('b').length, el.querySelector('pre code').textContent];""")
    assert n_pre == [1, 1, 0, 'print("<b>hi</b>")']


def test_chat_shows_reasoning_folded_above_the_answer(browser):
    """With a reasoning parser (the R1 template opens <think>), the page shows
    the reasoning the Responses API returns, in a <details> of its own."""
    r1 = Path(__file__).resolve().parents[3] / "shared" / "testdata" / "chat-templates" / \
        "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"
    s = SpateServer("--chat-template", str(r1), api_key=API_KEY, env={"SPATE_SKIP_WARMUP": "1"}).wait_ready()
    try:
        open_page(browser, s)
        set_settings(browser, "ws", 0, 24)
        answer = ask(browser, "What is 2 + 2?")
        wait_stats(browser, answer)
        body = {"model": MODEL_NAME, "input": [{"role": "user", "content": "What is 2 + 2?"}], "temperature": 0,
                "max_output_tokens": 24}
        req = urllib.request.Request(s.base_url + "/v1/responses", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Authorization": "Bearer " + API_KEY})
        with urllib.request.urlopen(req, timeout=120) as r:
            out = json.load(r)["output"]
        expected = "".join(c["text"] for item in out if item["type"] == "reasoning" for c in item.get("content", []))
        assert expected.strip(), out  # the template opened <think>: the output starts as reasoning
        shown = browser.execute_script(
            "const a = [...document.querySelectorAll('.msg.assistant')].pop();"
            "const d = a.querySelector('details.reasoning');"
            "return d ? [d.querySelector('summary').textContent, d.querySelector('.reasoning-text').textContent] : null;")
        assert shown is not None, "no reasoning element"
        assert shown == ["Reasoning", expected]
        screenshot(browser, "chat_page_reasoning.png")
    finally:
        assert s.stop() == 0, s.log_text()[-3000:]


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


def test_chat_over_tls_with_sse_and_websocket(browser, cert):
    srv = SpateServer(tls=cert, api_key=API_KEY, env={"SPATE_SKIP_WARMUP": "1"})
    ctx = ssl.create_default_context(cafile=str(cert[0]))
    try:
        srv.wait_ready(ssl_context=ctx)
        open_page(browser, srv)
        set_settings(browser, "sse", 0, 32)
        answer = ask(browser, "Say hello.")
        assert "tok/s" in wait_stats(browser, answer)
        assert browser.find_element(By.ID, "transport").text == "SSE"
        assert answer.find_element(By.CSS_SELECTOR, ".body").text.strip() == api_answer(srv, "Say hello.", 32, ctx).strip()
        stop_long_answer(browser, srv, ctx)
        set_settings(browser, "ws", 0, 16)
        answer = ask(browser, "Say goodbye.")
        assert "tok/s" in wait_stats(browser, answer)
        assert browser.find_element(By.ID, "transport").text == "WebSocket"
        screenshot(browser, "chat_page_tls.png")
    finally:
        assert srv.stop() == 0, srv.log_text()[-3000:]


def test_disable_ui_removes_the_page():
    srv = SpateServer("--disable-ui", env={"SPATE_SKIP_WARMUP": "1"})
    try:
        srv.wait_ready()
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(srv.base_url + "/", timeout=10)
        # No page: GET / has no route, while TGI's POST / does (issue 54).
        assert e.value.code == 405 and e.value.headers["Allow"] == "POST"
        assert "not allowed" in json.load(e.value)["error"]["message"]
    finally:
        assert srv.stop() == 0, srv.log_text()[-3000:]
