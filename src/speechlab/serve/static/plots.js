// Canvas plots: a line plot with axes (F0) and heat maps (spectrogram, attention maps).

const INK = "#4a5567";
const GRID = "#eef0f4";
const FONT = '11px "Inter", "Segoe UI", "Liberation Sans", "DejaVu Sans", sans-serif';

// viridis, sampled at 9 points and interpolated
const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 73, 137], [49, 104, 142], [38, 130, 142],
  [31, 158, 137], [53, 183, 121], [109, 205, 89], [180, 222, 44], [253, 231, 37]];

export function viridis(t) {
  const x = Math.max(0, Math.min(1, t)) * (VIRIDIS.length - 1);
  const i = Math.min(Math.floor(x), VIRIDIS.length - 2);
  const f = x - i;
  return VIRIDIS[i].map((c, k) => Math.round(c + (VIRIDIS[i + 1][k] - c) * f));
}

/** The canvas's 2D context drawing in CSS pixels at the screen's resolution; the canvas keeps
 * the aspect ratio of its width and height attributes. */
function context(canvas) {
  if (!canvas.dataset.aspect) canvas.dataset.aspect = String(canvas.height / canvas.width);
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth || canvas.width;
  const height = Math.round(width * Number(canvas.dataset.aspect));
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);
  return { ctx, width, height };
}

function niceStep(range, ticks) {
  const raw = range / Math.max(1, ticks);
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * power >= raw) return m * power;
  return 10 * power;
}

function axes(ctx, box, x0, x1, y0, y1, xLabel, yLabel, format, grid = true) {
  ctx.font = FONT;
  ctx.fillStyle = INK;
  ctx.strokeStyle = GRID;
  ctx.lineWidth = 1;
  const ys = niceStep(y1 - y0, 4);
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (let v = Math.ceil(y0 / ys) * ys; v <= y1 + 1e-9; v += ys) {
    const y = box.y + box.h - ((v - y0) / (y1 - y0)) * box.h;
    if (grid) { ctx.beginPath(); ctx.moveTo(box.x, y + 0.5); ctx.lineTo(box.x + box.w, y + 0.5); ctx.stroke(); }
    ctx.fillText(format ? format(v) : String(Math.round(v)), box.x - 6, y);
  }
  const xs = niceStep(x1 - x0, Math.max(2, Math.floor(box.w / 80)));
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  for (let v = Math.ceil(x0 / xs) * xs; v <= x1 + 1e-9; v += xs) {
    const x = box.x + ((v - x0) / (x1 - x0)) * box.w;
    ctx.fillText(`${+v.toFixed(2)}`, x, box.y + box.h + 5);
  }
  ctx.textAlign = "right";
  ctx.fillText(xLabel, box.x + box.w, box.y + box.h + 18);
  ctx.save();
  ctx.translate(11, box.y + box.h / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textAlign = "center";
  ctx.textBaseline = "middle";
  ctx.fillText(yLabel, 0, 0);
  ctx.restore();
}

/** values[i] at time i * step; zeros (unvoiced frames) break the line. */
export function linePlot(canvas, values, step, { yLabel = "", xLabel = "s", color = "#3b5bdb" } = {}) {
  const { ctx, width, height } = context(canvas);
  const box = { x: 50, y: 10, w: width - 62, h: height - 46 };
  const voiced = values.filter((v) => v > 0);
  const duration = Math.max(values.length * step, step);
  if (!voiced.length) {
    axes(ctx, box, 0, duration, 0, 100, xLabel, yLabel);
    ctx.fillStyle = "#8a94a6";
    ctx.textAlign = "center";
    ctx.fillText("no voiced frames", box.x + box.w / 2, box.y + box.h / 2);
    return;
  }
  let lo = Math.min(...voiced);
  let hi = Math.max(...voiced);
  const pad = Math.max(10, (hi - lo) * 0.15);
  lo = Math.max(0, lo - pad);
  hi += pad;
  axes(ctx, box, 0, duration, lo, hi, xLabel, yLabel);
  ctx.strokeStyle = color;
  ctx.lineWidth = 2;
  ctx.lineJoin = "round";
  ctx.beginPath();
  let drawing = false;
  values.forEach((v, i) => {
    if (!(v > 0)) { drawing = false; return; }
    const x = box.x + ((i * step) / duration) * box.w;
    const y = box.y + box.h - ((v - lo) / (hi - lo)) * box.h;
    if (drawing) ctx.lineTo(x, y); else ctx.moveTo(x, y);
    drawing = true;
  });
  ctx.stroke();
}

/** An image of rows[r][c] coloured by viridis between lo and hi. */
function image(rows, lo, hi, flip) {
  const h = rows.length;
  const w = rows[0].length;
  const off = document.createElement("canvas");
  off.width = w;
  off.height = h;
  const octx = off.getContext("2d");
  const pixels = octx.createImageData(w, h);
  for (let r = 0; r < h; r++) {
    const row = rows[flip ? h - 1 - r : r];
    for (let c = 0; c < w; c++) {
      const [R, G, B] = viridis((row[c] - lo) / (hi - lo));
      const k = 4 * (r * w + c);
      pixels.data[k] = R; pixels.data[k + 1] = G; pixels.data[k + 2] = B; pixels.data[k + 3] = 255;
    }
  }
  octx.putImageData(pixels, 0, 0);
  return off;
}

/** Spectrogram: db[frame][bin] (bin 0 = 0 Hz), drawn with time across and 0 Hz at the bottom. */
export function spectrogram(canvas, db, frameSeconds, maxHz) {
  const { ctx, width, height } = context(canvas);
  const box = { x: 50, y: 10, w: width - 62, h: height - 46 };
  if (!db.length) return;
  const transposed = db[0].map((_, bin) => db.map((frame) => frame[bin]));
  const img = image(transposed, -80, 0, true);
  ctx.imageSmoothingEnabled = true;
  ctx.drawImage(img, box.x, box.y, box.w, box.h);
  axes(ctx, box, 0, db.length * frameSeconds, 0, maxHz / 1000, "s", "kHz", (v) => `${v}`, false);
}

/** A square map (rows are queries), each cell scaled to [0, 1]. */
export function heatmap(canvas, rows) {
  const img = image(rows, 0, 1, false);
  canvas.width = img.width;
  canvas.height = img.height;
  const ctx = canvas.getContext("2d");
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(img, 0, 0);
}
