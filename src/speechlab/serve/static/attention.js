// The attention diagnosis panel: every block's attention map for one utterance, with its
// pattern (/api/attention; Sec. 3 of the local-attention paper).
import { heatmap } from "./plots.js";
import { analysisPanel } from "./source.js";
import { $, el, fillModels } from "./ui.js";

const PATTERNS = {
  vertical: "a few keys draw attention from every query",
  diagonal: "frames attend to their neighbours",
  "vertical+diagonal": "both",
  heterogeneous: "neither",
};
const ABNORMAL = ["vertical", "vertical+diagonal"];
const cls = (label) => label.replace("+", "-");

export function initAttention(models, capabilities) {
  const select = $("attention-model");
  if (!fillModels(select, models, capabilities, "attention")) return false;
  $("attention-legend").replaceChildren(...Object.entries(PATTERNS).map(([label, what]) =>
    el("span", {}, el("span", { class: `pattern ${cls(label)}`, text: label }), what)));

  function show(out) {
    const suggested = out.suggested || "none";
    $("attention-meta").replaceChildren(
      el("span", {}, el("b", { text: `${out.blocks.length}` }), " blocks"),
      el("span", {}, el("b", { text: `${out.frames}` }), " frames (20 ms)"),
      el("span", {}, "make local: ", el("b", { text: suggested })),
    );
    $("attention-maps").replaceChildren(...out.blocks.map((b) => {
      const canvas = el("canvas", { "aria-label": `attention map of block ${b.block}` });
      heatmap(canvas, b.map);
      return el("div", { class: `block${ABNORMAL.includes(b.label) ? " abnormal" : ""}`, "data-block": String(b.block) },
        el("div", { class: "head" }, `Block ${b.block}`, el("span", { class: `pattern ${cls(b.label)}`, text: b.label })),
        canvas,
        el("div", { class: "nums" },
          el("span", { title: "mass near the diagonal", text: `band ${b.band.toFixed(2)}` }),
          el("span", { title: "mass on keys every query attends to", text: `vert ${b.vertical.toFixed(2)}` }),
          el("span", { title: "row entropy / log T", text: `H ${b.entropy.toFixed(2)}` })));
    }));
  }

  analysisPanel("attention", "/api/attention", select, "analysing", show);
  return true;
}
