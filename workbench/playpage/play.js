// The workbench's play page: reset, a form per tool (from its JSON
// Schema, /web/metadata), the observation, the reward and the action
// log, live from /ws/ui. Every URL is relative, so the page works on a
// workspace's socket and through a launcher's base_url alike.
"use strict";
(() => {
  const { h, call, schemaForm, live, fill } = ui;
  const $ = (id) => document.getElementById(id);
  let busy = false;

  const clip = (s, n) => (s.length > n ? s.slice(0, n) + "..." : s);

  function showError(err) { $("error").textContent = err ? String(err.message || err) : ""; }

  // render shows an OpenEnv observation envelope ({observation, reward, done}).
  function render(env) {
    const obs = env.observation || {};
    if (obs.task) $("task").textContent = obs.task, $("task").classList.remove("muted");
    $("output").textContent = obs.output || "";
    $("refusal").textContent = obs.error ? "Refused: " + obs.error : "";
    $("steps-left").textContent = "steps left: " + (obs.steps_left ?? "-");
    $("done").textContent = env.done ? "done" : "running";
    $("done").className = "badge" + (env.done ? " ok" : "");
    $("reward").textContent = "reward: " + (env.done ? Number(env.reward).toFixed(1) : "-");
    $("reward").className = "badge" + (env.done ? (env.reward >= 1 ? " ok" : " bad") : "");
  }

  // renderState shows /ws/ui's episode state: the log, and the latest
  // observation after a reload.
  function renderState(st) {
    fill($("log"), (st.action_logs || []).map((l) => h("li", {},
      h("code", {}, (l.action && l.action.tool) || "?"), " ", clip(JSON.stringify((l.action && l.action.args) || {}), 160),
      l.observation && l.observation.error ? h("span", { class: "error" }, " refused") : null,
      l.done ? h("b", { class: l.reward >= 1 ? "ok" : "error" }, " done, reward " + Number(l.reward).toFixed(1)) : null)));
    $("log").dataset.steps = String((st.action_logs || []).length);
    if (st.task && $("task").classList.contains("muted")) $("task").textContent = st.task, $("task").classList.remove("muted");
  }

  async function act(path, body, button) {
    if (busy) return;
    busy = true;
    if (button) button.disabled = true;
    showError(null);
    try {
      render(await call(path, body));
    } catch (err) {
      showError(err);
    } finally {
      busy = false;
      if (button) button.disabled = false;
      // How many calls have been answered (a test or a script waits on it).
      document.body.dataset.calls = String(Number(document.body.dataset.calls || 0) + 1);
    }
  }

  $("reset-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const body = {};
    if ($("reset-task").value) body.task_id = $("reset-task").value;
    if ($("reset-seed").value) body.seed = parseInt($("reset-seed").value, 10);
    act("reset", body, $("reset"));
  });

  async function start() {
    try {
      const md = await call("metadata");
      $("name").textContent = md.name || "Workbench";
      $("description").textContent = md.description || "";
      fill($("tools"), (md.tools || []).map((t) => schemaForm("tool-" + t.name, t.name, t.description, t.input_schema,
        (args, button) => act("step", { action: { tool: t.name, args } }, button))));
      $("tools").classList.remove("muted");
    } catch (err) {
      showError(err);
    }
    live("../ws/ui", (msg) => { if (msg.type === "state_update") renderState(msg.episode_state || {}); },
      (status) => { $("status").textContent = status === "open" ? "live" : "reconnecting"; });
  }
  start();
})();
