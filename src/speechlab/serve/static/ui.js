// Small shared pieces of the panels: status pills, error lines, model menus, elements.

export const $ = (id) => document.getElementById(id);

const STATE_TEXT = {
  idle: "Idle", connecting: "Connecting", listening: "Listening", decoding: "Decoding",
  synthesizing: "Synthesizing", analysing: "Analysing", done: "Done", error: "Error",
};

/** Set a panel's status pill (idle, connecting, listening, decoding, done, error, ...). */
export function setStatus(id, state, text) {
  const pill = $(id);
  pill.dataset.state = state === "synthesizing" || state === "analysing" ? "decoding" : state;
  pill.textContent = text || STATE_TEXT[state] || state;
}

export function showError(id, message) {
  const line = $(id);
  line.hidden = !message;
  line.textContent = message || "";
}

/** Fill a <select> with the models that can do `capability`; false when there is none. */
export function fillModels(select, models, capabilities, capability) {
  select.replaceChildren();
  const usable = models.filter((m) => (capabilities[m.name] || []).includes(capability));
  for (const m of usable) select.append(new Option(m.name, m.name));
  return usable.length > 0;
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  node.append(...children);
  return node;
}

export function percent(x, digits = 1) {
  if (x > 0 && x < 0.5 * 10 ** -(digits + 2)) return `< ${(10 ** -digits).toFixed(digits)}%`;
  return `${(100 * x).toFixed(digits)}%`;
}
