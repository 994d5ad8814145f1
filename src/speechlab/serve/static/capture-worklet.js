// Microphone capture: mono samples at targetRate, posted to the page in chunks of `chunk`
// samples. The page's AudioContext normally runs at the target rate already (the browser
// resamples the device); where it cannot, samples are resampled here by linear interpolation.
class Capture extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const o = options.processorOptions || {};
    this.target = o.targetRate || 16000;
    this.step = sampleRate / this.target; // input samples per output sample
    this.chunk = o.chunk || 1600;
    this.buffer = new Float32Array(this.chunk);
    this.filled = 0;
    this.t = 0; // position of the next output sample, in input samples since the last one
    this.previous = 0;
    this.port.onmessage = (event) => {
      if (event.data === "flush") {
        this.emit();
        this.port.postMessage("flushed");
      }
    };
  }

  emit() {
    if (this.filled > 0) this.port.postMessage(this.buffer.slice(0, this.filled));
    this.filled = 0;
  }

  push(sample) {
    this.buffer[this.filled++] = sample;
    if (this.filled === this.chunk) this.emit();
  }

  process(inputs) {
    const channels = inputs[0];
    if (!channels || channels.length === 0) return true;
    const n = channels[0].length;
    for (let i = 0; i < n; i++) {
      let x = 0;
      for (const channel of channels) x += channel[i];
      x /= channels.length;
      if (this.step === 1) {
        this.push(x);
        continue;
      }
      // output samples falling between the previous input sample and this one
      while (this.t <= 1) {
        this.push(this.previous + (x - this.previous) * this.t);
        this.t += this.step;
      }
      this.t -= 1;
      this.previous = x;
    }
    return true;
  }
}

registerProcessor("capture", Capture);
