// The campaign page of agentpen serve (/ui/): every campaign with its
// owner, state and why it ended, lifetime, attestation verdict, cleanup
// status and its workspaces' results; and a page of one campaign
// (#campaign=ID): its workspaces (agent ids and tasks, never base_urls:
// they are capabilities), its episodes with their rewards, how each
// ended and why its code stopped, its attestation's checks and its
// cleanup report, and the service's verification of its signatures.
// Read from the launcher API with the token the person types and
// refreshed every two seconds. Read-only: it never creates,
// attests or deletes. The token lives in this closure only.
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
  // Why a removal began (the journal's reason), in words.
  const reasons = {
    delete: "deleted (DELETE)", down: "removed by agentpen down", ttl: "expired: its ttl passed",
    idle: "idle: unused for its idle timeout", launcher_gone: "its launcher was gone",
    rollback: "rolled back: its bring-up did not finish", not_attested: "failed attestation",
    undelivered: "up could not deliver its ids", exit: "the service exited (--cleanup-on-exit)",
    orphan: "agentpen orphans --remove", reconcile: "reconciled: a generation left live",
  };
  const askedFor = new Set(["delete", "down", "exit", "orphan"]);
  const failures = new Set(["rollback", "not_attested", "undelivered"]);
  const when = (s) => (s ? new Date(s).toLocaleString() : "");
  const campaignLink = (id) => "#campaign=" + encodeURIComponent(id);

  // stateBadge is the state, with why its removal began when it is
  // being or was removed.
  function stateBadge(c) {
    const removing = c.removal_reason && ["removed", "deleting", "cleanup_failed"].includes(c.state);
    let good = okStates.has(c.state) ? true : badStates.has(c.state) ? false : undefined;
    // Removed is good when someone asked for it, bad when something
    // failed, neither when a lifetime ran out.
    if (removing && good === true) good = askedFor.has(c.removal_reason) ? true : failures.has(c.removal_reason) ? false : undefined;
    return h("span", { class: "state", "data-reason": removing ? c.removal_reason : null },
      badge(c.state + (removing ? ": " + (reasons[c.removal_reason] || c.removal_reason) : ""), good));
  }

  // facts are a campaign's owner, generation, lifetime and reports.
  function facts(c) {
    const l = c.lifetime;
    const att = c.attestation ? badge("attestation " + (c.attestation.ok ? "ok" : "failed"), c.attestation.ok) : badge("not attested");
    const cln = c.cleanup ? badge("cleanup " + c.cleanup.status, c.cleanup.status === "verified") : null;
    return h("p", { class: "facts" },
      "owner ", h("code", { class: "owner" }, c.owner || "the operator (agentpen up)"), "; generation " + c.generation,
      l ? "; created " + when(l.accepted_at) : "",
      l && l.expires_at ? h("span", { class: "expires" }, "; expires " + when(l.expires_at)) : "",
      l && l.idle_timeout_seconds ? "; idle timeout " + l.idle_timeout_seconds + " s" : "",
      "; " + (c.workspaces || []).length + " workspaces served",
      c.pool ? h("span", { class: "pool" }, "; pool: " + c.pool.warm + " warm, " + c.pool.claimed + " claimed, " + c.pool.refilling + " refilling") : "",
      " ", att, " ", cln,
      c.error ? h("span", { class: "error" }, " " + c.error) : null);
  }

  // ended is how an episode ended, with the grading failure's reason.
  const ended = (e) => e.end + (e.reason ? " (" + e.reason + ")" : "");

  // stopText says why a run's code stopped: "exited 1", "signal SIGKILL",
  // "memory (inferred from MemoryError; exited 1)".
  function stopText(s) {
    const how = s.signal ? "signal " + s.signal : "exited " + (s.status || 0);
    if (s.inferred) return s.reason + " (inferred from " + s.evidence + "; " + how + ")";
    return s.reason === "exited" || s.reason === "signal" ? how : s.reason;
  }

  // runsText counts an episode's runs by why they stopped.
  function runsText(e) {
    const r = e.runs || {};
    const parts = Object.keys(r).map((k) => r[k] + " " + k);
    return parts.length ? parts.join(", ") : "no code run";
  }

  // summary is a workspace's results: episodes, mean reward, the last.
  function summary(eps) {
    if (!eps.length) return h("span", { class: "muted" }, "no episode yet");
    const mean = eps.reduce((s, e) => s + e.reward, 0) / eps.length;
    const last = eps[eps.length - 1];
    return h("span", {}, eps.length + (eps.length === 1 ? " episode" : " episodes") + ", mean reward " + mean.toFixed(2) + "; last: ",
      badge(ended(last) + ", reward " + Number(last.reward).toFixed(2),
        last.end === "submitted" ? last.reward >= 1 : last.end === "error" ? false : undefined));
  }

  const resultsHead = h("th", { title: "What each workspace's workbench reported in its run directory, which the daemon's user can write: checked, not proven" }, "results (as the workspace reports them)");

  function workspacesTable(c, eps) {
    const byWs = new Map();
    for (const e of eps) {
      if (!byWs.has(e.workspace)) byWs.set(e.workspace, []);
      byWs.get(e.workspace).push(e);
    }
    const rows = (c.workspaces || []).map((w) => h("tr", { "data-agent": w.agent_id },
      h("td", {}, String(w.index)), h("td", {}, h("code", {}, w.agent_id)), h("td", {}, h("code", {}, w.task_id)),
      h("td", {}, w.pooled ? "claimed from the pool" : "spec"),
      h("td", { class: "results" }, summary(byWs.get(w.index) || []))));
    if (!rows.length) return h("p", { class: "muted" }, eps.length ? eps.length + " episode results (workspaces not served)" : "no workspace served");
    return h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "#"), h("th", {}, "agent id"), h("th", {}, "task"), h("th", {}, "made for"), resultsHead.cloneNode(true))),
      h("tbody", {}, rows));
  }

  function campaignCard(c, eps) {
    return h("section", { class: "campaign", "data-campaign": c.campaign_id, "data-state": c.state },
      h("h2", {}, h("a", { href: campaignLink(c.campaign_id), class: "open" }, c.campaign_id), " ", stateBadge(c)),
      facts(c), workspacesTable(c, eps));
  }

  // episodesTable is every episode of the campaign: reward, how it ended
  // and why its code stopped (inferred stops marked).
  function episodesTable(eps) {
    if (!eps.length) return h("p", { class: "muted" }, "no episode yet");
    return h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "workspace"), h("th", {}, "episode"), h("th", {}, "ended"),
      h("th", {}, "reward"), h("th", {}, "steps"), h("th", { title: "Every run of its code (the agent's, its tests', the graded cases) by why it stopped" }, "runs"),
      h("th", { title: "The last run that did not exit 0. memory and processes are inferred from the run's error output: the limits send no signal" }, "why code stopped"))),
    h("tbody", {}, eps.map((e) => h("tr", { "data-episode": e.episode_id, "data-end": e.end, "data-stop": e.stop ? e.stop.reason : "" },
      h("td", {}, String(e.workspace)), h("td", {}, h("code", {}, e.episode_id)), h("td", {}, badge(ended(e), e.end === "error" ? false : undefined)),
      h("td", {}, Number(e.reward).toFixed(2)), h("td", {}, String(e.steps)), h("td", {}, runsText(e)),
      h("td", { class: e.stop && e.stop.inferred ? "inferred" : "" }, e.stop ? stopText(e.stop) : h("span", { class: "muted" }, "every run exited 0"))))));
  }

  // value is a check's value as JSON, clipped to 160 characters (the
  // whole in its title).
  function value(v) {
    const text = v === undefined ? "" : JSON.stringify(v);
    return text.length <= 160 ? h("code", {}, text) : h("code", { title: text }, text.slice(0, 157) + "...");
  }

  // checksTable lists every check of a report's sections (each an object
  // with checks: observed, expected, pass, reason), failed ones first.
  function checksTable(rep) {
    const rows = [];
    const walk = (obj) => {
      for (const v of Object.values(obj || {})) {
        if (v && typeof v === "object" && v.checks && typeof v.checks === "object") {
          for (const [name, c] of Object.entries(v.checks)) rows.push([name, c]);
        }
      }
    };
    walk(rep);
    if (rep && rep.checks && typeof rep.checks === "object") walk({ top: rep });
    rows.sort((a, b) => (a[1].pass === b[1].pass ? a[0].localeCompare(b[0]) : a[1].pass ? 1 : -1));
    if (!rows.length) return h("p", { class: "muted" }, "no check recorded");
    return h("table", { class: "checks" }, h("thead", {}, h("tr", {}, h("th", {}, "check"), h("th", {}, ""), h("th", {}, "observed"), h("th", {}, "expected"), h("th", {}, "why it failed"))),
      h("tbody", {}, rows.map(([name, c]) => h("tr", { "data-check": name, "data-pass": String(c.pass) },
        h("td", {}, h("code", {}, name)), h("td", {}, badge(c.pass ? "pass" : "fail", c.pass)), h("td", {}, value(c.observed)),
        h("td", {}, value(c.expected)), h("td", {}, c.reason || "")))));
  }

  function attestationPart(c, att) {
    if (!c.attestation) return h("p", { class: "muted" }, "not attested");
    if (!att) return h("p", { class: "error" }, "the report cannot be read");
    return h("div", {},
      h("p", {}, badge(att.ok ? "every check passed" : "failed: " + (att.failed_checks || []).join(", "), att.ok), " attested " + when(att.attested_at),
        " (generation " + att.generation + "; report ", h("code", {}, c.attestation.path), ")", att.error ? h("span", { class: "error" }, " " + att.error) : null),
      checksTable(att));
  }

  function cleanupPart(c, cln) {
    if (!c.cleanup) return h("p", { class: "muted" }, "no cleanup of this generation");
    if (!cln) return h("p", { class: "error" }, "the report cannot be read");
    // A container's or network's id is shown as docker ps does; a
    // directory's is its path.
    const shortID = (e) => (e.kind === "dir" ? String(e.id || "") : String(e.id || "").slice(0, 12));
    const entries = (cln.removed || []).map((e) => h("li", {}, e.kind + " " + (e.role || "") + " " + e.name + " ", h("code", {}, shortID(e))));
    const reason = cln.reason || c.removal_reason;
    return h("div", {},
      h("p", {}, badge("cleanup " + cln.status, cln.status === "verified"), " written " + when(cln.written_at),
        reason ? "; removed for: " + (reasons[reason] || reason) : "", " (report ", h("code", {}, c.cleanup.path), ")",
        (cln.failed_checks || []).length ? h("span", { class: "error" }, " failed: " + cln.failed_checks.join(", ")) : null),
      h("p", {}, (cln.removed || []).length + " removed by exact id; " + (cln.already_gone || []).length + " already gone; " +
        (cln.left_alone || []).length + " left alone; " + (cln.unexpected || []).length + " unexpected"),
      entries.length ? h("ul", { class: "removed" }, entries) : null,
      checksTable(cln));
  }

  // signaturesPart is the service's verification of the campaign's
  // signed reports (agentpen verify's checks), made when the page was
  // refreshed.
  function signaturesPart(c, ver) {
    if (!ver) return h("p", { class: "error" }, "the service could not verify the reports");
    const failed = (ver.checks || []).filter((k) => !k.ok);
    return h("div", { class: "verification", "data-ok": String(ver.ok) },
      h("p", {}, badge(ver.ok ? "signatures verified" : "NOT verified", ver.ok),
        " " + (ver.reports || []).length + " reports, " + (ver.checks || []).length + " checks, key " + ver.key_id +
        " (as agentpen verify " + c.campaign_id + " does on the service's host)"),
      failed.length ? h("ul", {}, failed.map((k) => h("li", { "data-check": k.id }, h("code", {}, k.id), ": " + k.detail))) : null);
  }

  // campaignPage is one campaign: its facts, then each part, linked from
  // the top.
  function campaignPage(c, eps, att, cln, ver) {
    const parts = [["workspaces", "Workspaces", workspacesTable(c, eps)], ["episodes", "Episodes", episodesTable(eps)],
      ["attestation", "Attestation", attestationPart(c, att)], ["cleanup", "Cleanup", cleanupPart(c, cln)],
      ["signatures", "Signatures", signaturesPart(c, ver)]];
    const jump = (id) => (ev) => { ev.preventDefault(); const el = $("part-" + id); if (el) el.scrollIntoView(); };
    return h("section", { class: "campaign page", "data-campaign": c.campaign_id, "data-state": c.state },
      h("p", {}, h("a", { href: "#", class: "back" }, "all campaigns")),
      h("h2", {}, c.campaign_id, " ", stateBadge(c)), facts(c),
      h("nav", {}, parts.flatMap(([id, title]) => [h("a", { href: "#part-" + id, onclick: jump(id) }, title), " "])),
      parts.map(([id, title, body]) => h("div", { id: "part-" + id, class: "part" }, h("h3", {}, title), body)));
  }

  // chosen is the campaign the address names (#campaign=ID), or "".
  function chosen() {
    const m = /^#campaign=(.+)$/.exec(location.hash);
    return m ? decodeURIComponent(m[1]) : "";
  }

  async function episodesOf(id) {
    try { return (await api("v1/campaigns/" + encodeURIComponent(id) + "/episodes?limit=1000")).episodes || []; } catch (e) { return []; }
  }

  async function showOne(id) {
    const c = await api("v1/campaigns/" + encodeURIComponent(id));
    const path = "v1/campaigns/" + encodeURIComponent(id);
    const [eps, att, cln, ver] = await Promise.all([episodesOf(id),
      c.attestation ? api(path + "/attestation").catch(() => null) : null,
      c.cleanup ? api(path + "/cleanup").catch(() => null) : null,
      api(path + "/verification").catch(() => null)]);
    fill($("campaigns"), [campaignPage(c, eps, att, cln, ver)]);
  }

  async function showAll() {
    const list = (await api("v1/campaigns")).campaigns || [];
    const views = await Promise.all(list.map(async (c) => campaignCard(c, await episodesOf(c.campaign_id))));
    fill($("campaigns"), views.length ? views : [h("section", {}, h("p", { class: "muted" }, "No campaign in this service's state root."))]);
  }

  async function refresh() {
    try {
      const id = chosen();
      await (id ? showOne(id) : showAll());
      document.body.dataset.view = id ? "campaign" : "list";
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

  window.addEventListener("hashchange", () => {
    if (token && (location.hash === "" || location.hash === "#" || chosen())) refresh();
  });

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
