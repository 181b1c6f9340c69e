// agentpen's page helpers, shared by its pages (package webui). No
// dependency, no global but `ui`; every URL is relative to the page, so
// a page works under any prefix.
"use strict";
const ui = (() => {
  // h builds an element: h("div", {class: "x", onclick: fn}, child...).
  // Children are nodes or text; text is never parsed as HTML.
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else if (k === "text") el.textContent = v;
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  // HTTPError is a call answered with a status other than 2xx; message
  // is what the server said (FastAPI's detail, an RFC 9457 problem's,
  // or the body).
  class HTTPError extends Error {
    constructor(status, message, body) { super(message); this.status = status; this.body = body; }
  }

  function detail(body, fallback) {
    if (body && typeof body === "object") {
      const d = body.detail;
      if (typeof d === "string") return d;
      if (Array.isArray(d) && d.length) return d.map((e) => e.msg || JSON.stringify(e)).join("; ");
      if (body.title) return body.title;
    }
    return fallback;
  }

  // call sends a JSON request to a path relative to the page and returns
  // the decoded answer, or throws HTTPError.
  async function call(path, body) {
    const opts = body === undefined ? {} : {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    };
    const resp = await fetch(path, opts);
    const text = await resp.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (e) { data = text; }
    if (!resp.ok) throw new HTTPError(resp.status, detail(data, resp.status + " " + resp.statusText), data);
    return data;
  }

  // schemaForm builds a form from a JSON Schema of an object: one field
  // per property (a number field for an integer, a text area for long
  // text, a text field otherwise), required ones marked. onSubmit gets
  // the values: empty optional fields left out, integers parsed.
  function schemaForm(id, title, description, schema, onSubmit) {
    const props = (schema && schema.properties) || {};
    const required = new Set((schema && schema.required) || []);
    const fields = Object.entries(props).map(([name, p]) => {
      const fid = id + "-" + name;
      const type = Array.isArray(p.type) ? p.type[0] : p.type;
      const long = type === "string" && /^(code|content)$/.test(name);
      const input = long ? h("textarea", { id: fid, name, spellcheck: "false" })
        : h("input", { id: fid, name, type: type === "integer" ? "number" : "text", autocomplete: "off" });
      return { name, type, input, label: h("label", {}, h("span", {}, name, required.has(name) ? h("b", { class: "req" }, " *") : null), input) };
    });
    const button = h("button", { id: id + "-call", type: "submit" }, "Call");
    const form = h("form", { id, onsubmit: (ev) => {
      ev.preventDefault();
      const values = {};
      for (const f of fields) {
        const v = f.input.value;
        if (v === "" && !required.has(f.name)) continue;
        values[f.name] = f.type === "integer" && v !== "" && /^-?\d+$/.test(v) ? parseInt(v, 10) : v;
      }
      onSubmit(values, button);
    } }, h("div", { class: "name" }, title), description ? h("div", { class: "desc" }, description) : null,
    fields.map((f) => f.label), button);
    return form;
  }

  // live opens a WebSocket to a path relative to the page and calls
  // onMessage with each JSON message; it reconnects after a drop, and
  // calls onStatus("open" | "closed").
  function live(path, onMessage, onStatus) {
    const url = new URL(path, location.href);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    let delay = 500;
    const open = () => {
      const ws = new WebSocket(url);
      ws.onopen = () => { delay = 500; onStatus && onStatus("open"); };
      ws.onmessage = (ev) => { try { onMessage(JSON.parse(ev.data)); } catch (e) { /* not ours */ } };
      ws.onclose = () => { onStatus && onStatus("closed"); setTimeout(open, delay); delay = Math.min(delay * 2, 10000); };
      ws.onerror = () => {}; // onclose follows and retries
    };
    open();
  }

  // fill replaces an element's children.
  function fill(el, ...children) { el.replaceChildren(); el.append(...children.flat().filter((c) => c !== null && c !== undefined)); }

  return { h, call, HTTPError, schemaForm, live, fill };
})();
