// The page: which models the server has, the tabs, and the four panels.
import { getJSON } from "./api.js";
import { initAsr } from "./asr.js";
import { initAttention } from "./attention.js";
import { initLattice } from "./lattice.js";
import { initTts } from "./tts.js";
import { $ } from "./ui.js";

const PANELS = { asr: initAsr, tts: initTts, attention: initAttention, lattice: initLattice };

function select(name) {
  for (const tab of document.querySelectorAll(".tabs button")) {
    const on = tab.dataset.panel === name;
    tab.setAttribute("aria-selected", String(on));
    $(`panel-${tab.dataset.panel}`).hidden = !on;
  }
  if (location.hash !== `#${name}`) history.replaceState(null, "", `#${name}`);
  document.dispatchEvent(new CustomEvent("panel", { detail: name }));
}

async function main() {
  let models, capabilities;
  try {
    [models, capabilities] = await Promise.all([getJSON("/api/models"), getJSON("/api/capabilities")]);
  } catch (e) {
    $("load-error").hidden = false;
    $("load-error").textContent = `Could not reach the server: ${e.message}`;
    $("server-info").textContent = "offline";
    return;
  }
  const kinds = models.map((m) => m.kind);
  const count = (k) => kinds.filter((x) => x === k).length;
  $("server-info").innerHTML = "";
  $("server-info").append(
    Object.assign(document.createElement("b"), { textContent: `${models.length} model${models.length === 1 ? "" : "s"}` }),
    ` · ${count("asr")} ASR · ${count("tts")} TTS · ${count("ssl")} SSL`,
  );
  const usable = {};
  for (const [name, init] of Object.entries(PANELS)) {
    usable[name] = init(models, capabilities);
    const tab = $(`tab-${name}`);
    tab.disabled = !usable[name];
    tab.title = usable[name] ? "" : "no model served here can do this";
    tab.addEventListener("click", () => select(name));
  }
  const wanted = location.hash.slice(1);
  const first = usable[wanted] ? wanted : Object.keys(PANELS).find((p) => usable[p]) || "asr";
  select(first);
  document.body.dataset.ready = "true";
}

main();
