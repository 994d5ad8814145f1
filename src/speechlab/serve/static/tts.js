// The speech synthesis panel: text in, the speech with its F0 track and spectrogram out
// (/api/speech).
import { postJSON, withQuery } from "./api.js";
import { linePlot, spectrogram } from "./plots.js";
import { $, el, fillModels, setStatus, showError } from "./ui.js";

export function initTts(models, capabilities) {
  const select = $("tts-model");
  if (!fillModels(select, models, capabilities, "synthesize")) return false;
  let shown = null; // the last result, redrawn when the panel becomes visible

  function draw() {
    if (!shown || $("panel-tts").hidden) return;
    linePlot($("tts-f0"), shown.f0.hz, shown.f0.frame_seconds, { yLabel: "Hz" });
    spectrogram($("tts-spec"), shown.spectrogram.db, shown.spectrogram.frame_seconds, shown.spectrogram.max_hz);
  }
  document.addEventListener("panel", draw);
  window.addEventListener("resize", draw);

  async function speak() {
    const text = $("tts-text").value;
    if (!text.trim()) {
      showError("tts-error", "Type some text first.");
      return;
    }
    $("tts-speak").disabled = true;
    showError("tts-error", null);
    setStatus("tts-status", "synthesizing");
    const started = performance.now();
    try {
      const out = await postJSON(withQuery("/api/speech", { model: select.value }), { text });
      const took = (performance.now() - started) / 1000;
      const url = `data:audio/wav;base64,${out.wav}`;
      $("tts-audio").src = url;
      $("tts-download").href = url;
      $("tts-download").hidden = false;
      shown = out;
      $("tts-meta").replaceChildren(
        el("span", {}, "duration ", el("b", { text: `${out.seconds.toFixed(2)} s` })),
        el("span", {}, "synthesized in ", el("b", { text: `${took.toFixed(2)} s` })),
        el("span", {}, "median F0 ", el("b", { text: out.f0.median_hz ? `${Math.round(out.f0.median_hz)} Hz` : "–" })),
      );
      draw();
      setStatus("tts-status", "done");
    } catch (e) {
      setStatus("tts-status", "error");
      showError("tts-error", e.message);
    }
    $("tts-speak").disabled = false;
  }

  $("tts-speak").addEventListener("click", speak);
  $("tts-text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) speak();
  });
  return true;
}
