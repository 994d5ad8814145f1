// The speech recognition panel: the microphone or a file streamed over /ws/asr (partials as
// they come, LID bars, the decoders early stopping keeps running), or a file posted to
// /api/transcribe for models that read whole recordings.
import { post, withQuery } from "./api.js";
import { Microphone, RATE, concat, decodeFile, keepRecording, pcmBytes } from "./audio.js";
import { $, el, fillModels, percent, setStatus, showError } from "./ui.js";

const CHUNK = RATE / 10; // a file is streamed in 100 ms frames...
const AHEAD_SECONDS = 1.5; // ...at most this far ahead of what the server has decoded

/** One recognition over the WebSocket. */
class Session {
  constructor(view, params) {
    this.view = view;
    this.sent = 0; // samples
    this.decoded = 0; // seconds
    this.final = null;
    this.lastError = null;
    this.waiters = [];
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    this.ws = new WebSocket(`${proto}//${location.host}${withQuery("/ws/asr", params)}`);
    this.ws.binaryType = "arraybuffer";
    this.opened = new Promise((resolve, reject) => {
      this.ws.onopen = resolve;
      this.ws.onerror = () => reject(new Error("could not connect to the server"));
    });
    this.finished = new Promise((resolve, reject) => { this.resolve = resolve; this.reject = reject; });
    this.finished.catch(() => {}); // handled by whoever awaits it
    this.ws.onmessage = (event) => this.message(JSON.parse(event.data));
    this.ws.onclose = (event) => {
      if (this.final) return;
      const why = this.lastError || `the connection closed (code ${event.code})`;
      this.reject(new Error(why));
      this.wake();
      if (this.onclose) this.onclose(why);
    };
  }

  message(msg) {
    if (msg.type === "partial") {
      this.decoded = msg.seconds;
      this.view.partial(msg, this.sent / RATE);
    } else if (msg.type === "final" && msg.last === false) {
      this.view.utterance(msg); // an endpoint: that utterance is done, the stream goes on
    } else if (msg.type === "final") {
      this.final = msg;
      this.view.final(msg, performance.now() - this.doneAt, this.sent / RATE);
      this.resolve(msg);
    } else if (msg.type === "error") {
      this.lastError = msg.message;
      this.view.error(msg.message);
    }
    this.wake();
  }

  wake() {
    const waiters = this.waiters;
    this.waiters = [];
    waiters.forEach((w) => w());
  }

  get open() {
    return this.ws.readyState === WebSocket.OPEN;
  }

  send(samples) {
    if (!this.open) return;
    this.ws.send(pcmBytes(samples));
    this.sent += samples.length;
  }

  /** Wait until the server has decoded all but `ahead` seconds of what was sent. */
  async keepUp(ahead) {
    while (this.open && this.sent / RATE - this.decoded > ahead) {
      await new Promise((resolve) => this.waiters.push(resolve));
    }
    if (!this.open) throw new Error(this.lastError || "the connection closed");
  }

  finish() {
    this.doneAt = performance.now();
    if (this.open) this.ws.send("done");
    return this.finished;
  }

  close() {
    if (this.ws.readyState <= WebSocket.OPEN) this.ws.close();
  }
}

export function initAsr(models, capabilities) {
  const select = $("asr-model");
  if (!fillModels(select, models, capabilities, "transcribe")) return false;
  const byName = Object.fromEntries(models.map((m) => [m.name, m]));
  const current = () => byName[select.value];
  const can = (what) => (capabilities[select.value] || []).includes(what);
  let session = null;
  let mic = null;
  let chunks = [];
  let busy = false;

  // What the panel shows -------------------------------------------------------------------
  const view = {
    lines: [], // the utterances endpoints have closed, one line each
    show(current) {
      const done = this.lines.map((u) => el("div", { class: "utterance", text: u.text }));
      $("asr-text").replaceChildren(...done, el("div", { class: "current", text: current }));
    },
    reset() {
      const box = $("asr-transcript");
      box.className = "transcript partial";
      this.lines = [];
      box.dataset.utterances = "0";
      this.show("");
      $("asr-meta").replaceChildren();
      $("asr-words").replaceChildren(el("span", { class: "muted", text: "Words appear with their times as they are recognized." }));
      this.lid(null);
      this.active(current().languages);
      showError("asr-error", null);
    },
    partial(msg, sentSeconds) {
      $("asr-transcript").className = "transcript partial";
      this.show(msg.text);
      this.lid(msg.lid);
      this.active(msg.active);
      this.meta([["sent", `${sentSeconds.toFixed(1)} s`], ["decoded", `${msg.seconds.toFixed(1)} s`]]);
      // the words so far, the live ones dashed: their text and confidence may still change
      const live = msg.words || [];
      if (live.length || this.lines.length) {
        this.words([...this.lines.flatMap((u) => u.words || []), ...live.map((w) => ({ ...w, live: true }))]);
      }
    },
    final(msg, latencyMs, sentSeconds) {
      const box = $("asr-transcript");
      const said = msg.text || this.lines.length;
      box.className = said ? "transcript final" : "transcript empty";
      this.show(msg.text || (this.lines.length ? "" : "(nothing recognized)"));
      this.lid(msg.lid);
      const meta = [["language", msg.language || "–"]];
      if (sentSeconds) meta.push(["audio", `${sentSeconds.toFixed(1)} s`]);
      if (latencyMs !== null) meta.push(["final after", `${Math.round(latencyMs)} ms`]);
      this.meta(meta);
      this.words(this.lines.length ? [...this.lines.flatMap((u) => u.words || []), ...(msg.words || [])] : msg.words);
    },
    utterance(msg) {
      if (msg.text) this.lines.push(msg);
      $("asr-transcript").dataset.utterances = String(msg.segment + 1);
      this.show("");
      this.lid(msg.lid);
      this.words(this.lines.flatMap((u) => u.words || []));
    },
    error(message) {
      showError("asr-error", message);
    },
    meta(pairs) {
      $("asr-meta").replaceChildren(...pairs.map(([k, v]) => el("span", {}, `${k} `, el("b", { text: v }))));
    },
    lid(lid) {
      const languages = current().languages;
      const values = lid || Object.fromEntries(languages.map((l) => [l, 1 / languages.length]));
      const lead = lid ? Object.entries(values).sort((a, b) => b[1] - a[1])[0][0] : null;
      $("asr-lid").replaceChildren(...languages.map((l) => {
        const fill = el("div", { class: "fill" });
        fill.style.width = `${100 * (values[l] || 0)}%`;
        return el("div", { class: `bar${l === lead ? " lead" : ""}`, "data-lang": l },
          el("span", { class: "lang", text: l }), el("div", { class: "track" }, fill),
          el("span", { class: "value", text: lid ? percent(values[l] || 0) : "–" }));
      }));
    },
    active(active) {
      $("asr-active").replaceChildren(...current().languages.map((l) => el("span", {
        class: `chip ${active.includes(l) ? "on" : "off"}`, "data-lang": l,
        title: active.includes(l) ? "decoding" : "switched off by early stopping", text: l,
      })));
    },
    words(words) {
      if (!words || !words.length) {
        $("asr-words").replaceChildren(el("span", { class: "muted", text: words ? "No words." : "This decoding gives no word times." }));
        return;
      }
      $("asr-words").replaceChildren(...words.map((w) => {
        const span = el("span", { class: w.live ? "word live" : "word" }, w.word,
          el("small", { text: `${w.start.toFixed(2)}–${w.end.toFixed(2)} s` }));
        if (typeof w.confidence === "number") { // shaded by the model's confidence in it
          span.style.opacity = String(0.35 + 0.65 * w.confidence);
          span.dataset.confidence = String(w.confidence);
          span.title = `confidence ${percent(w.confidence)}`;
        }
        return span;
      }));
    },
  };

  // Settings -------------------------------------------------------------------------------
  function onModel() {
    const m = current();
    const language = $("asr-language");
    language.replaceChildren();
    if (can("early_stop")) language.append(new Option("Auto (LID head)", ""));
    for (const l of m.languages) language.append(new Option(l, l));
    language.disabled = language.options.length < 2;
    $("asr-allow-list").replaceChildren(...m.languages.map((l) => el("label", { class: "allow-lang" },
      el("input", { type: "checkbox", value: l, checked: "" }), ` ${l}`)));
    $("asr-allow").hidden = !can("early_stop");
    $("asr-hotwords-field").hidden = !can("hotwords");
    // a model without a LID head has no early stopping: its settings are not shown
    $("asr-early").hidden = !can("early_stop");
    $("asr-early").disabled = !can("early_stop");
    $("asr-lid-block").hidden = !can("early_stop");
    $("asr-model-note").textContent = m.streaming
      ? "Streams: partial results while you speak, a line per utterance."
      : "Reads whole recordings: from the microphone, each utterance once its pause ends.";
    view.lid(null);
    view.active(m.languages);
  }
  select.addEventListener("change", onModel);
  onModel();

  function params() {
    const p = { model: select.value, language: $("asr-language").value };
    // a model that reads whole recordings gives its words' confidences (the shading) with its
    // alternatives; a streaming one gives them always
    if (!current().streaming) p.nbest = 1;
    if (can("hotwords")) p.hotwords = $("asr-hotwords").value.trim();
    if (can("early_stop")) {
      p.tau = $("asr-tau").value.trim();
      p.s_th = $("asr-sth").value.trim();
      const boxes = [...document.querySelectorAll("#asr-allow-list input")];
      const allowed = boxes.filter((b) => b.checked).map((b) => b.value);
      if (!p.language && allowed.length < boxes.length) p.languages = allowed.join(",");
    }
    return p;
  }

  function lock(on) {
    busy = on;
    for (const id of ["asr-model", "asr-file", "asr-record"]) $(id).disabled = on;
    $("asr-language").disabled = on || $("asr-language").options.length < 2;
    $("asr-early").disabled = on || !can("early_stop");
    $("asr-allow").disabled = on || !can("early_stop");
  }

  function fail(error) {
    setStatus("asr-status", "error");
    showError("asr-error", error.message || String(error));
    $("asr-transcript").classList.remove("partial");
  }

  // The microphone -------------------------------------------------------------------------
  $("asr-record").addEventListener("click", async () => {
    if (busy) return;
    lock(true);
    view.reset();
    setStatus("asr-status", "connecting");
    chunks = [];
    try {
      // a model that reads whole recordings hears the microphone in utterances cut at pauses
      session = new Session(view, current().streaming ? params() : { ...params(), vad: 1 });
      session.onclose = async (why) => { // the server ended the stream while we listened
        if (mic) { await stopMic(); fail(new Error(why)); lock(false); }
      };
      await session.opened;
      mic = new Microphone();
      await mic.start((chunk) => {
        chunks.push(chunk);
        session.send(chunk);
        if (!current().streaming) view.meta([["recorded", `${(session.sent / RATE).toFixed(1)} s`]]);
      });
      setStatus("asr-status", "listening");
      $("asr-record").classList.add("on");
      $("asr-stop").disabled = false;
    } catch (e) {
      if (session) session.close();
      await stopMic();
      fail(e);
      lock(false);
    }
  });

  async function stopMic() {
    const m = mic;
    mic = null;
    $("asr-stop").disabled = true;
    $("asr-record").classList.remove("on");
    if (m) await m.stop();
    if (chunks.length) keepRecording(concat(chunks), "microphone recording");
  }

  $("asr-stop").addEventListener("click", async () => {
    if (!mic) return;
    await stopMic();
    setStatus("asr-status", "decoding");
    try {
      await session.finish();
      setStatus("asr-status", "done");
    } catch (e) {
      fail(e);
    }
    lock(false);
  });

  // A file ---------------------------------------------------------------------------------
  $("asr-file").addEventListener("change", async (event) => {
    const file = event.target.files[0];
    event.target.value = "";
    if (!file || busy) return;
    lock(true);
    view.reset();
    setStatus("asr-status", "decoding", "Reading file");
    try {
      if (current().streaming) {
        const samples = await decodeFile(file);
        keepRecording(samples, file.name);
        setStatus("asr-status", "connecting");
        session = new Session(view, params());
        await session.opened;
        setStatus("asr-status", "decoding");
        for (let i = 0; i < samples.length; i += CHUNK) {
          await session.keepUp(AHEAD_SECONDS);
          session.send(samples.slice(i, i + CHUNK));
        }
        await session.finish();
      } else {
        decodeFile(file).then((s) => keepRecording(s, file.name), () => {});
        setStatus("asr-status", "decoding");
        const p = params();
        const started = performance.now();
        const response = await post(withQuery("/api/transcribe", { ...p, filename: file.name }), file);
        view.final(await response.json(), performance.now() - started, null);
      }
      setStatus("asr-status", "done");
    } catch (e) {
      if (session) session.close();
      fail(e);
    }
    lock(false);
  });

  return true;
}
