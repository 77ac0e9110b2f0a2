"""`spate serve` over TLS: HTTPS and WSS with a self-signed certificate made by
`openssl`, real TLS clients (Python's ssl via the openai SDK and websockets,
and `openssl s_client`), TLS 1.2 as the floor, and garbage handshakes that
must not disturb other clients."""

import asyncio
import json
import socket
import ssl
import subprocess

import openai
import pytest
import websockets.asyncio.client as ws_client

from spate_server import MODEL_NAME, SPATE_BIN, SPATE_MODEL, SpateServer, self_signed_cert

if not SPATE_BIN.is_file() or not SPATE_MODEL.is_file():
    pytest.skip("spate binary or model missing", allow_module_level=True)


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_server(cert):
    s = SpateServer(tls=cert, env={"SPATE_SKIP_WARMUP": "1"})
    ctx = ssl.create_default_context(cafile=str(cert[0]))
    try:
        yield s.wait_ready(ssl_context=ctx)
    finally:
        assert s.stop() == 0, s.log_text()[-3000:]


def test_https_with_openai_sdk(tls_server, cert):
    http_client = openai.DefaultHttpxClient(verify=ssl.create_default_context(cafile=str(cert[0])))
    client = openai.OpenAI(base_url=tls_server.base_url + "/v1", api_key="x", http_client=http_client, max_retries=0)
    r = client.completions.create(model=MODEL_NAME, prompt="Hello", max_tokens=4, temperature=0)
    assert r.usage.completion_tokens == 4
    chunks = list(client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "Hi"}],
                                                 max_tokens=4, temperature=0, stream=True))
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


def test_wss(tls_server, cert):
    # The asyncio client: the sync one reads and writes its SSL socket from two
    # threads at once, which now and then loses the handshake response (about 1
    # in 200 connections here, client-side; a raw TLS socket saw 0 in 400).
    ctx = ssl.create_default_context(cafile=str(cert[0]))

    async def run():
        async with ws_client.connect(tls_server.base_url.replace("https", "wss", 1) + "/v1/responses", ssl=ctx) as ws:
            await ws.send(json.dumps({"type": "response.create", "input": "Hi", "max_output_tokens": 4, "temperature": 0}))
            while True:
                ev = json.loads(await asyncio.wait_for(ws.recv(), 120))
                if ev["type"] in ("response.completed", "response.incomplete", "error"):
                    return ev

    ev = asyncio.run(run())
    assert ev["type"] in ("response.completed", "response.incomplete")


def test_openssl_s_client_handshake(tls_server):
    out = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{tls_server.port}", "-brief", "-ign_eof"],
                         input=b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", capture_output=True, timeout=60)
    text = (out.stdout + out.stderr).decode(errors="replace")
    assert "TLSv1.3" in text or "TLSv1.2" in text, text
    assert "200 OK" in text, text


def test_old_tls_refused(tls_server):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    except (ValueError, ssl.SSLError):
        pytest.skip("this OpenSSL cannot even offer TLS 1.1")
    with pytest.raises((ssl.SSLError, ConnectionError)):
        with socket.create_connection(("127.0.0.1", tls_server.port), timeout=10) as raw:
            with ctx.wrap_socket(raw) as s:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                s.recv(100)


def test_garbage_handshake_keeps_serving(tls_server, cert):
    for junk in (b"\x16\x03\x01\x00\x05hello", b"GET / HTTP/1.1\r\n\r\n", bytes(range(256)) * 4):
        with socket.create_connection(("127.0.0.1", tls_server.port), timeout=10) as s:
            s.sendall(junk)
            try:
                s.recv(1024)
            except (ConnectionError, socket.timeout):
                pass
    ctx = ssl.create_default_context(cafile=str(cert[0]))
    client = openai.OpenAI(base_url=tls_server.base_url + "/v1", api_key="x",
                           http_client=openai.DefaultHttpxClient(verify=ctx), max_retries=0)
    assert client.completions.create(model=MODEL_NAME, prompt="Hello", max_tokens=2).usage.completion_tokens == 2
