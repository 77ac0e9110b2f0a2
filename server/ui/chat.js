// spate's built-in chat page. Plain JavaScript, no dependencies, nothing
// fetched from anywhere but this server.
//
// An answer streams over the Responses API WebSocket mode (GET /v1/responses
// upgraded; one {"type": "response.create", ...} message per answer) or, as the
// fallback, over SSE (POST /v1/responses with "stream": true). Both carry the
// same events: response.reasoning_text.delta (a model that reasons, with a
// reasoning parser: shown folded above the answer), response.output_text.delta,
// then response.completed, response.incomplete or response.failed (or an
// error event).
// Browsers cannot set headers on a WebSocket, so the API key travels as the
// subprotocol "openai-insecure-api-key.<key>", as OpenAI's browser clients do.
// Stop closes the socket (or aborts the fetch): the server cancels the request.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY_STORE = "spate.apiKey";
const SETTINGS_STORE = "spate.chatSettings";

const state = {
  model: null,
  apiKey: localStorage.getItem(KEY_STORE) || "",
  history: [],        // [{role, content}] of finished turns
  running: null,      // {stop(), finish(), ...} of the answer streaming now
  wsBroken: false,    // a WebSocket failed to open: use SSE from now on
};

function authHeaders() {
  return state.apiKey ? { Authorization: "Bearer " + state.apiKey } : {};
}

function settings() {
  const num = (id) => { const v = $(id).value.trim(); return v === "" ? undefined : Number(v); };
  return {
    system: $("system").value,
    temperature: num("temperature"),
    top_p: num("top-p"),
    max_output_tokens: num("max-tokens"),
    transport: $("transport-choice").value,
  };
}

function saveSettings() {
  const s = settings();
  localStorage.setItem(SETTINGS_STORE, JSON.stringify(s));
}

function loadSettings() {
  try {
    const s = JSON.parse(localStorage.getItem(SETTINGS_STORE) || "{}");
    if (typeof s.system === "string") $("system").value = s.system;
    if (s.temperature !== undefined) $("temperature").value = s.temperature;
    if (s.top_p !== undefined) $("top-p").value = s.top_p;
    if (s.max_output_tokens !== undefined) $("max-tokens").value = s.max_output_tokens;
    if (s.transport === "ws" || s.transport === "sse") $("transport-choice").value = s.transport;
  } catch (e) { /* corrupt settings: keep the defaults */ }
}

// ---- rendering ------------------------------------------------------------

// Renders text with ``` fenced code blocks and `inline code` into el, using
// text nodes only (model output is never parsed as HTML).
function renderMarkdownLite(el, text) {
  el.replaceChildren();
  const parts = text.split("```");
  parts.forEach((part, i) => {
    if (i % 2 === 1) {
      const nl = part.indexOf("\n");
      const lang = nl > 0 ? part.slice(0, nl).trim() : "";
      const code = nl >= 0 ? part.slice(nl + 1) : part;
      const pre = document.createElement("pre");
      if (lang) {
        const tag = document.createElement("span");
        tag.className = "lang";
        tag.textContent = lang;
        pre.appendChild(tag);
      }
      const c = document.createElement("code");
      c.textContent = code.replace(/\n$/, "");
      pre.appendChild(c);
      el.appendChild(pre);
      return;
    }
    part.split("`").forEach((seg, j) => {
      if (j % 2 === 1) {
        const c = document.createElement("code");
        c.className = "inline";
        c.textContent = seg;
        el.appendChild(c);
      } else if (seg) {
        el.appendChild(document.createTextNode(seg));
      }
    });
  });
}

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  const body = document.createElement("div");
  body.className = "body";
  div.appendChild(body);
  renderMarkdownLite(body, text);
  $("log").appendChild(div);
  $("log").scrollTop = $("log").scrollHeight;
  return div;
}

function setRunning(on) {
  $("send").hidden = on;
  $("stop").hidden = !on;
}

// ---- one answer -----------------------------------------------------------

// The view and bookkeeping of one streamed answer.
class Answer {
  constructor() {
    this.div = addMessage("assistant", "");
    this.div.classList.add("pending");
    this.body = this.div.querySelector(".body");
    this.text = "";
    this.tStart = performance.now();
    this.tFirst = null;
    this.nTokens = null;
    this.nDeltas = 0;
    this.done = false;
    this.status = "";
    this.reasoningEl = null;  // the <details> of the reasoning, once some came
    this.reasoning = "";
  }
  // Reasoning streams into a <details> above the answer, open while it grows
  // and folded once the answer starts.
  reasoningDelta(s) {
    if (this.tFirst === null) this.tFirst = performance.now();
    this.nDeltas += 1;
    if (!this.reasoningEl) {
      const d = document.createElement("details");
      d.className = "reasoning";
      d.open = true;
      const summary = document.createElement("summary");
      summary.textContent = "Reasoning";
      const text = document.createElement("div");
      text.className = "reasoning-text";
      d.append(summary, text);
      this.div.insertBefore(d, this.body);
      this.reasoningEl = d;
      this.reasoning = "";
    }
    this.reasoning += s;
    this.reasoningEl.querySelector(".reasoning-text").textContent = this.reasoning;
    $("log").scrollTop = $("log").scrollHeight;
  }
  delta(s) {
    if (this.tFirst === null) this.tFirst = performance.now();
    if (this.reasoningEl && this.text === "" && s !== "") this.reasoningEl.open = false;
    this.nDeltas += 1;
    this.text += s;
    renderMarkdownLite(this.body, this.text);
    $("log").scrollTop = $("log").scrollHeight;
  }
  // Handles one Responses event; returns true when the answer ended.
  event(ev) {
    switch (ev.type) {
      case "response.reasoning_text.delta": this.reasoningDelta(ev.delta || ""); return false;
      case "response.output_text.delta": this.delta(ev.delta || ""); return false;
      case "response.completed":
      case "response.incomplete":
        if (ev.response && ev.response.usage) this.nTokens = ev.response.usage.output_tokens;
        this.status = ev.type === "response.incomplete" ? "incomplete" : "";
        this.finish();
        return true;
      case "response.failed":
        this.fail((ev.response && ev.response.error && ev.response.error.message) || "the response failed");
        return true;
      case "error":
        this.fail(ev.message || (ev.error && ev.error.message) || "error");
        return true;
      default: return false;
    }
  }
  stats() {
    const parts = [];
    const end = performance.now();
    if (this.tFirst !== null) parts.push("TTFT " + ((this.tFirst - this.tStart) / 1000).toFixed(2) + " s");
    const n = this.nTokens !== null ? this.nTokens : this.nDeltas;
    if (this.tFirst !== null && n > 1 && end > this.tFirst) {
      parts.push(((n - 1) / ((end - this.tFirst) / 1000)).toFixed(1) + " tok/s");
    }
    parts.push(n + " tokens");
    if (this.status) parts.push(this.status);
    const s = document.createElement("span");
    s.className = "stats";
    s.textContent = parts.join(" \u00b7 ");
    this.div.appendChild(s);
  }
  finish() {
    if (this.done) return;
    this.done = true;
    this.div.classList.remove("pending");
    this.stats();
    state.history.push({ role: "assistant", content: this.text });
    endRun();
  }
  stopped() {
    if (this.done) return;
    this.status = "stopped";
    this.finish();
  }
  fail(message) {
    if (this.done) return;
    this.done = true;
    this.div.classList.remove("pending");
    const e = document.createElement("span");
    e.className = "stats error";
    e.textContent = message;
    this.div.appendChild(e);
    state.history.pop();  // the user turn that failed is not part of the conversation
    endRun();
  }
}

function endRun() {
  state.running = null;
  setRunning(false);
  $("prompt").focus();
}

function requestBody(s) {
  const body = { model: state.model, input: state.history.slice() };
  if (s.system.trim()) body.instructions = s.system;
  if (s.temperature !== undefined) body.temperature = s.temperature;
  if (s.top_p !== undefined) body.top_p = s.top_p;
  if (s.max_output_tokens !== undefined) body.max_output_tokens = s.max_output_tokens;
  return body;
}

// Streams over the WebSocket; onUnavailable() runs when it never opened.
function streamWs(answer, body, onUnavailable) {
  const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/v1/responses";
  const protocols = state.apiKey ? ["spate-chat", "openai-insecure-api-key." + state.apiKey] : [];
  let ws;
  try {
    ws = new WebSocket(url, protocols);
  } catch (e) {  // e.g. a key with characters a subprotocol cannot carry
    onUnavailable();
    return;
  }
  let opened = false;
  state.running = { stop: () => { ws.close(); answer.stopped(); } };
  ws.onopen = () => {
    opened = true;
    $("transport").textContent = "WebSocket";
    ws.send(JSON.stringify(Object.assign({ type: "response.create" }, body)));
  };
  ws.onmessage = (m) => {
    let ev;
    try { ev = JSON.parse(m.data); } catch (e) { return; }
    if (answer.event(ev)) ws.close();
  };
  ws.onerror = () => {};
  ws.onclose = () => {
    if (answer.done) return;  // stopped, or ended normally
    if (!opened) { onUnavailable(); return; }
    if (!answer.done) answer.fail("the connection closed before the answer ended");
  };
}

// Streams over SSE with fetch (so the Authorization header can be set).
async function streamSse(answer, body) {
  const ctl = new AbortController();
  state.running = { stop: () => { ctl.abort(); answer.stopped(); } };
  $("transport").textContent = "SSE";
  let res;
  try {
    res = await fetch("/v1/responses", {
      method: "POST",
      headers: Object.assign({ "Content-Type": "application/json" }, authHeaders()),
      body: JSON.stringify(Object.assign({ stream: true }, body)),
      signal: ctl.signal,
    });
  } catch (e) {
    if (!answer.done) answer.fail("the server cannot be reached: " + e.message);
    return;
  }
  if (!res.ok) {
    let msg = "HTTP " + res.status;
    try { msg = (await res.json()).error.message; } catch (e) { /* keep the status */ }
    if (res.status === 401) askKey("The API key was refused.");
    answer.fail(msg);
    return;
  }
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        for (const line of block.split("\n")) {
          if (!line.startsWith("data:")) continue;
          const data = line.slice(5).trim();
          if (data === "[DONE]") continue;
          try { if (answer.event(JSON.parse(data))) return; } catch (e) { /* not JSON: skip */ }
        }
      }
    }
  } catch (e) {
    if (!answer.done) answer.fail("the stream broke: " + e.message);
    return;
  }
  if (!answer.done) answer.fail("the stream ended before the answer did");
}

function send(text) {
  if (state.running || !text.trim() || !state.model) return;
  const s = settings();
  saveSettings();
  addMessage("user", text);
  state.history.push({ role: "user", content: text });
  const answer = new Answer();
  setRunning(true);
  const body = requestBody(s);
  if (s.transport === "ws" && !state.wsBroken && "WebSocket" in window) {
    streamWs(answer, body, () => {
      state.wsBroken = true;  // e.g. a proxy that does not pass upgrades
      streamSse(answer, body);
    });
  } else {
    streamSse(answer, body);
  }
}

// ---- API key and model ----------------------------------------------------

function askKey(message) {
  $("key-error").textContent = message || "";
  $("key-input").value = state.apiKey;
  if (!$("key-dialog").open) $("key-dialog").showModal();
}

async function loadModel() {
  let res;
  try {
    res = await fetch("/v1/models", { headers: authHeaders() });
  } catch (e) {
    $("model").textContent = "server unreachable";
    return;
  }
  if (res.status === 401) {
    $("model").textContent = "API key required";
    askKey(state.apiKey ? "The API key was refused." : "");
    return;
  }
  if (!res.ok) {
    $("model").textContent = "error " + res.status;
    return;
  }
  const data = await res.json();
  state.model = data.data && data.data.length ? data.data[0].id : null;
  $("model").textContent = state.model || "no model";
}

// ---- wiring ---------------------------------------------------------------

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("prompt").value;
  if (state.running || !text.trim()) return;
  $("prompt").value = "";
  send(text);
});
$("prompt").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    $("composer").requestSubmit();
  }
});
$("stop").addEventListener("click", () => { if (state.running) state.running.stop(); });
$("new-chat").addEventListener("click", () => {
  if (state.running) state.running.stop();
  state.history = [];
  $("log").replaceChildren();
});
$("settings-toggle").addEventListener("click", () => { $("settings").hidden = !$("settings").hidden; });
$("change-key").addEventListener("click", () => askKey(""));
$("key-form").addEventListener("submit", () => {
  state.apiKey = $("key-input").value.trim();
  if (state.apiKey) localStorage.setItem(KEY_STORE, state.apiKey);
  else localStorage.removeItem(KEY_STORE);
  state.wsBroken = false;
  loadModel();
});
["system", "temperature", "top-p", "max-tokens", "transport-choice"].forEach((id) => $(id).addEventListener("change", saveSettings));

loadSettings();
loadModel();
