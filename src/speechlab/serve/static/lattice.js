// The topology panel: Viterbi decoding over T∘L∘G and the lattice's best hypotheses with their
// share of its probability mass (/api/lattice; BHP is the Viterbi hypothesis's share, eq. 11).
import { analysisPanel } from "./source.js";
import { $, el, fillModels, percent } from "./ui.js";

function stat(key, value, quality) {
  return el("div", { class: "stat" }, el("div", { class: "k", text: key }),
    el("div", { class: `v${quality ? ` ${quality}` : ""}`, text: value }));
}

export function initLattice(models, capabilities) {
  const select = $("lattice-model");
  if (!fillModels(select, models, capabilities, "lattice")) return false;

  function show(out) {
    const text = $("lattice-text");
    text.className = out.text ? "transcript small" : "transcript small empty";
    text.textContent = out.text || "(no words)";
    const measured = out.bhp !== null;
    $("lattice-stats").replaceChildren(
      stat("BHP", measured ? percent(out.bhp) : "pruned", measured && out.bhp > 0.5 ? "good" : "poor"),
      stat("BPP", measured ? percent(out.bpp) : "–"),
      stat("Full-sum = Viterbi", out.fullsum_agrees ? "yes" : "no", out.fullsum_agrees ? "good" : "poor"),
      stat("Lattice states", out.lattice.states.toLocaleString("en")),
    );
    $("lattice-meta").replaceChildren(
      el("span", {}, "topology ", el("b", { text: out.topology })),
      el("span", {}, "acoustic weight ", el("b", { text: String(out.acoustic_weight) })),
      el("span", {}, el("b", { text: String(out.frames) }), " frames"),
      el("span", {}, "lattice beam ", el("b", { text: String(out.lattice.beam) })),
    );
    const rows = out.hypotheses.map((h, i) => {
      const fill = el("div", { class: "fill" });
      fill.style.width = `${100 * h.share}%`;
      return el("tr", { class: h.viterbi ? "viterbi" : "" },
        el("td", { text: String(i + 1) }),
        el("td", {}, h.text || "(no words)", ...(h.viterbi ? [el("span", { class: "tag", text: "Viterbi" })] : [])),
        el("td", { class: "num" }, el("div", { class: "share" }, el("div", { class: "track" }, fill),
          el("span", { class: "value", text: percent(h.share) }))));
    });
    $("lattice-hyps").tBodies[0].replaceChildren(...rows);
    $("lattice-hyps").dataset.states = out.lattice.states;
  }

  analysisPanel("lattice", "/api/lattice", select, "decoding", show);
  return true;
}
