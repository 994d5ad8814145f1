// The recording an analysis panel works on: a file the user picks, or the last recording made
// in any panel (sent as a 16 kHz WAV).
import { lastRecording, wavBlob } from "./audio.js";
import { $ } from "./ui.js";

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
