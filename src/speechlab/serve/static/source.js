// The recording an analysis panel works on: a file the user picks, or the last recording made
// in any panel (sent as a 16 kHz WAV).
import { post, withQuery } from "./api.js";
import { lastRecording, wavBlob } from "./audio.js";
import { $, setStatus, showError } from "./ui.js";

/** Wire analysis panel `name` to `endpoint`: each recording chosen is posted there for the
 * model picked in `select`, and `show` gets the answer; the status pill says `busy` meanwhile
 * and errors go to the panel's error line. */
export function analysisPanel(name, endpoint, select, busy, show) {
  recordingSource(name, async (blob, filename) => {
    showError(`${name}-error`, null);
    setStatus(`${name}-status`, busy);
    try {
      const response = await post(withQuery(endpoint, { model: select.value, filename }), blob);
      show(await response.json());
      setStatus(`${name}-status`, "done");
    } catch (e) {
      setStatus(`${name}-status`, "error");
      showError(`${name}-error`, e.message);
    }
  });
}

/** Wire panel `name`'s file input and "Use last recording" button to `run(blob, filename)`. */
export function recordingSource(name, run) {
  const file = $(`${name}-file`);
  const useLast = $(`${name}-last`);
  const label = $(`${name}-source`);

  async function go(blob, filename, description) {
    label.textContent = description;
    file.disabled = useLast.disabled = true;
    try {
      await run(blob, filename);
    } finally {
      file.disabled = false;
      useLast.disabled = !lastRecording();
    }
  }

  file.addEventListener("change", () => {
    const f = file.files[0];
    file.value = "";
    if (f) go(f, f.name, f.name);
  });
  useLast.addEventListener("click", () => {
    const last = lastRecording();
    if (last) go(wavBlob(last.samples), "recording.wav", `${last.name} (${(last.samples.length / 16000).toFixed(1)} s)`);
  });
  document.addEventListener("recording", () => { useLast.disabled = false; });
}
