// The server's HTTP interface, with its JSON errors ({"error": message}) turned into Errors.

export async function getJSON(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(await errorOf(response));
  return response.json();
}

export async function post(url, body, type) {
  const headers = type ? { "Content-Type": type } : {};
  let response;
  try {
    response = await fetch(url, { method: "POST", body, headers });
  } catch (e) {
    throw new Error("the server did not answer (is it still running?)");
  }
  if (!response.ok) throw new Error(await errorOf(response));
  return response;
}

export async function postJSON(url, data) {
  return (await post(url, JSON.stringify(data), "application/json")).json();
}

async function errorOf(response) {
  try {
    const data = await response.json();
    if (data && data.error) return data.error;
  } catch (e) { /* not JSON */ }
  return `${response.status} ${response.statusText}`;
}

export function withQuery(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") q.set(k, v);
  }
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}
