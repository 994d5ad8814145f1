// Audio in the page: the microphone at 16 kHz, files decoded to 16 kHz, WAV encoding, and the
// last recording (kept so that every panel can analyse what was just said).

export const RATE = 16000;

let last = null; // { samples: Float32Array, name: string }

export function keepRecording(samples, name) {
  last = { samples, name };
  document.dispatchEvent(new CustomEvent("recording", { detail: last }));
}

export function lastRecording() {
  return last;
}

export function seconds(samples) {
  return samples.length / RATE;
}

/** A file's audio as mono float samples at 16 kHz. */
export async function decodeFile(file) {
  const data = await file.arrayBuffer();
  const context = new OfflineAudioContext(1, 1, RATE);
  let buffer;
  try {
    buffer = await context.decodeAudioData(data);
  } catch (e) {
    throw new Error(`${file.name}: not an audio file this browser can read`);
  }
  const out = new Float32Array(buffer.length);
  for (let c = 0; c < buffer.numberOfChannels; c++) {
    const channel = buffer.getChannelData(c);
    for (let i = 0; i < out.length; i++) out[i] += channel[i] / buffer.numberOfChannels;
  }
  return out;
}

/** 16-bit PCM WAV of float samples. */
export function wavBlob(samples, rate = RATE) {
  const bytes = new ArrayBuffer(44 + samples.length * 2);
  const view = new DataView(bytes);
  const text = (offset, s) => { for (let i = 0; i < s.length; i++) view.setUint8(offset + i, s.charCodeAt(i)); };
  text(0, "RIFF"); view.setUint32(4, 36 + samples.length * 2, true); text(8, "WAVE");
  text(12, "fmt "); view.setUint32(16, 16, true); view.setUint16(20, 1, true); view.setUint16(22, 1, true);
  view.setUint32(24, rate, true); view.setUint32(28, rate * 2, true); view.setUint16(32, 2, true);
  view.setUint16(34, 16, true); text(36, "data"); view.setUint32(40, samples.length * 2, true);
  // x * 32768, rounded: the inverse of how decoders read 16-bit samples (x / 32768), so a
  // decoded 16-bit file comes back sample for sample.
  for (let i = 0; i < samples.length; i++) {
    view.setInt16(44 + 2 * i, Math.max(-32768, Math.min(32767, Math.round(samples[i] * 32768))), true);
  }
  return new Blob([bytes], { type: "audio/wav" });
}

/** float32 little-endian bytes of samples (what /ws/asr takes). */
export function pcmBytes(samples) {
  if (LITTLE_ENDIAN) return samples.buffer.byteLength === samples.length * 4 ? samples.buffer : samples.slice().buffer;
  const view = new DataView(new ArrayBuffer(samples.length * 4));
  samples.forEach((s, i) => view.setFloat32(4 * i, s, true));
  return view.buffer;
}
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

export function concat(chunks) {
  const out = new Float32Array(chunks.reduce((n, c) => n + c.length, 0));
  let offset = 0;
  for (const c of chunks) { out.set(c, offset); offset += c.length; }
  return out;
}

/** The microphone, as 100 ms chunks of 16 kHz samples. */
export class Microphone {
  async start(onChunk) {
    if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
      throw new Error("this browser gives no microphone here (the page must be opened from localhost or over HTTPS)");
    }
    try {
      this.context = new AudioContext({ sampleRate: RATE });
    } catch (e) {
      this.context = new AudioContext(); // resampled in the worklet instead
    }
    await this.context.audioWorklet.addModule("/static/capture-worklet.js");
    try {
      this.stream = await navigator.mediaDevices.getUserMedia({
        audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false },
      });
    } catch (e) {
      await this.context.close();
      throw new Error(`no microphone: ${e.message || e.name}`);
    }
    try {
      this.source = this.context.createMediaStreamSource(this.stream);
    } catch (e) {
      // Firefox cannot connect a device to a context of another rate: use the device's rate.
      await this.context.close();
      this.context = new AudioContext();
      await this.context.audioWorklet.addModule("/static/capture-worklet.js");
      this.source = this.context.createMediaStreamSource(this.stream);
    }
    this.node = new AudioWorkletNode(this.context, "capture", {
      processorOptions: { targetRate: RATE, chunk: RATE / 10 },
    });
    this.flushed = null;
    this.node.port.onmessage = (event) => {
      if (event.data === "flushed") { if (this.flushed) this.flushed(); return; }
      onChunk(event.data);
    };
    this.source.connect(this.node);
  }

  /** Stop capturing; the samples still buffered are handed on first. */
  async stop() {
    if (!this.node) return;
    this.source.disconnect();
    await new Promise((resolve) => { this.flushed = resolve; this.node.port.postMessage("flush"); });
    this.node.port.onmessage = null;
    for (const track of this.stream.getTracks()) track.stop();
    await this.context.close();
    this.node = null;
  }
}
