// The campaign page of agentpen serve (/ui/): every campaign with its
// state, workspaces (agent ids and tasks, never base_urls: they are
// capabilities), attestation verdict, cleanup status and episode
// results, read from the launcher API with the token the person types
// and refreshed every two seconds. Read-only: it never creates, attests
// or deletes. The token lives in this closure only.
"use strict";
(() => {
  const { h, fill } = ui;
  const $ = (id) => document.getElementById(id);
  let token = "";
  let timer = null;

  class AuthError extends Error {}

  // api GETs a path of the API (relative to this page, /ui/) with the
  // token in the Authorization header.
  async function api(path) {
    const resp = await fetch("../" + path, { headers: { Authorization: "Bearer " + token }, cache: "no-store" });
    if (resp.status === 401) throw new AuthError("the service refused the token");
    const data = await resp.json().catch(() => null);
    if (!resp.ok) throw new Error((data && (data.detail || data.title)) || resp.status + " " + resp.statusText);
    return data;
  }

  const badge = (text, good) => h("span", { class: "badge" + (good === true ? " ok" : good === false ? " bad" : "") }, text);
  const okStates = new Set(["ready", "removed"]);
  const badStates = new Set(["attestation_failed", "cleanup_failed", "starting_or_failed", "unusable"]);

  // summary is a workspace's results: episodes, mean reward, the last.
  function summary(eps) {
    if (!eps.length) return h("span", { class: "muted" }, "no episode yet");
    const mean = eps.reduce((s, e) => s + e.reward, 0) / eps.length;
    const last = eps[eps.length - 1];
    return h("span", {}, eps.length + (eps.length === 1 ? " episode" : " episodes") + ", mean reward " + mean.toFixed(2) + "; last: ",
      badge(last.end + (last.reason ? " (" + last.reason + ")" : "") + ", reward " + Number(last.reward).toFixed(2),
        last.end === "submitted" ? last.reward >= 1 : last.end === "error" ? false : undefined));
  }

  function campaignView(c, eps) {
    const byWs = new Map();
    for (const e of eps) {
      if (!byWs.has(e.workspace)) byWs.set(e.workspace, []);
      byWs.get(e.workspace).push(e);
    }
    const att = c.attestation ? badge("attestation " + (c.attestation.ok ? "ok" : "failed"), c.attestation.ok) : badge("not attested");
    const cln = c.cleanup ? badge("cleanup " + c.cleanup.status, c.cleanup.status === "verified") : null;
    const workspaces = (c.workspaces || []).map((w) => h("tr", { "data-agent": w.agent_id },
      h("td", {}, String(w.index)), h("td", {}, h("code", {}, w.agent_id)), h("td", {}, h("code", {}, w.task_id)),
      h("td", { class: "results" }, summary(byWs.get(w.index) || []))));
    const rows = workspaces.length ? h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "#"), h("th", {}, "agent id"), h("th", {}, "task"), h("th", { title: "What each workspace's workbench reported in its run directory, which the daemon's user can write: checked, not proven" }, "results (as the workspace reports them)"))),
      h("tbody", {}, workspaces)) : h("p", { class: "muted" }, eps.length ? eps.length + " episode results (workspaces not served)" : "no workspace served");
    return h("section", { class: "campaign", "data-campaign": c.campaign_id, "data-state": c.state },
      h("h2", {}, c.campaign_id, " ", badge(c.state, okStates.has(c.state) ? true : badStates.has(c.state) ? false : undefined)),
      h("p", {}, "generation " + c.generation + " ", att, " ", cln, c.error ? h("span", { class: "error" }, " " + c.error) : null),
      rows);
  }

  async function refresh() {
    try {
      const list = (await api("v1/campaigns")).campaigns || [];
      const views = await Promise.all(list.map(async (c) => {
        let eps = [];
        try { eps = (await api("v1/campaigns/" + encodeURIComponent(c.campaign_id) + "/episodes?limit=1000")).episodes || []; } catch (e) { /* shown as none */ }
        return campaignView(c, eps);
      }));
      fill($("campaigns"), views.length ? views : [h("section", {}, h("p", { class: "muted" }, "No campaign in this service's state root."))]);
      $("status").textContent = "updated " + new Date().toLocaleTimeString();
      $("error").textContent = "";
      document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
    } catch (err) {
      $("error").textContent = String(err.message || err);
      if (err instanceof AuthError) {
        token = "";
        clearInterval(timer);
        $("login").hidden = false;
        $("status").textContent = "no token";
      }
    }
  }

  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    token = $("token").value.trim();
    $("token").value = "";
    if (!token) return;
    $("login").hidden = true;
    clearInterval(timer);
    refresh();
    timer = setInterval(refresh, 2000);
  });
})();
