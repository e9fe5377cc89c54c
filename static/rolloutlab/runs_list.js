// The runs list keeps each row's state, phase and step current without a reload.
// (Loaded by the experiment page too, which has the rows but none of the table's tools.)
(function () {
  const rows = Array.from(document.querySelectorAll("#runs-table tr[data-run-id]"));
  if (!rows.length) return;
  const ids = rows.map((row) => row.dataset.runId).join(",");
  const fmt = (v, format) => {
    if (typeof v !== "number") return "";
    return format === "int" ? Math.round(v).toLocaleString("en-US") : v.toFixed(3);
  };
  async function refresh() {
    const response = await fetch("/api/runs?ids=" + ids, { credentials: "same-origin" });
    if (!response.ok) return;
    const { runs } = await response.json();
    for (const run of runs) {
      const row = document.querySelector(`tr[data-run-id="${run.id}"]`);
      if (!row) continue;
      const state = row.querySelector('[data-field="state"]');
      state.textContent = run.state;
      state.className = "state state-" + run.state;
      const phase = row.querySelector('[data-field="phase"]'); // what a running run is doing now
      if (phase) phase.textContent = run.state === "running" ? run.detail : "";
      row.querySelector('[data-field="step"]').textContent = `${run.step}/${run.total_steps}`;
      for (const cell of row.querySelectorAll("[data-metric]")) {
        cell.textContent = fmt(run.summary[cell.dataset.metric], cell.dataset.format);
      }
      const duration = row.querySelector('[data-column="duration"]');
      if (duration && run.started_at) duration.textContent = humanDuration(run.started_at, run.finished_at);
    }
  }
  setInterval(refresh, 3000);
})();

// As rolloutlab.runs.columns.human_duration writes it.
function humanDuration(startedAt, finishedAt) {
  const end = finishedAt ? new Date(finishedAt) : new Date();
  const whole = Math.max(0, Math.floor((end - new Date(startedAt)) / 1000));
  const hours = Math.floor(whole / 3600), minutes = Math.floor((whole % 3600) / 60), secs = whole % 60;
  const two = (n) => String(n).padStart(2, "0");
  if (hours) return `${hours}h ${two(minutes)}m`;
  return minutes ? `${minutes}m ${two(secs)}s` : `${secs}s`;
}

// ---- runs table: saved views, column chooser, bulk actions, rename and notes in place
(function () {
  const tools = document.getElementById("table-tools");
  if (!tools) return;
  const csrf = tools.querySelector("[name=csrfmiddlewaretoken]").value;
  const project = tools.dataset.project || null;
  const messageBox = document.getElementById("table-message");

  function say(text, isError) {
    messageBox.textContent = text;
    messageBox.classList.toggle("error", Boolean(isError));
    messageBox.hidden = !text;
  }
  // a message to show once the page has reloaded after an action
  const pending = sessionStorage.getItem("runs-table-message");
  if (pending) { say(pending); sessionStorage.removeItem("runs-table-message"); }
  function reloadSaying(text, params) {
    sessionStorage.setItem("runs-table-message", text);
    const url = new URL(window.location.href);
    for (const [key, value] of Object.entries(params || {})) url.searchParams.set(key, value);
    window.location.assign(url.toString());
  }

  async function api(method, path, body) {
    const response = await fetch("/api" + path, {
      method, credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const answer = await response.json().catch(() => ({ error: `the server answered ${response.status}` }));
    if (!response.ok) {
      const fields = Object.entries(answer.fields || {}).map(([k, v]) => `${k}: ${v}`).join("; ");
      throw new Error(answer.error + (fields ? ` (${fields})` : ""));
    }
    return answer;
  }

  // ---- saved views and the column chooser
  document.getElementById("view-select").addEventListener("change", (event) => {
    const url = new URL(window.location.href);
    if (event.target.value) url.searchParams.set("view", event.target.value); else url.searchParams.delete("view");
    window.location.assign(url.toString());
  });
  const chosen = JSON.parse(document.getElementById("chosen-columns").textContent);
  for (const box of document.querySelectorAll("input.column-pick")) {
    box.addEventListener("change", () => {
      const at = chosen.indexOf(box.value);
      if (box.checked && at < 0) chosen.push(box.value);  // a new column goes last
      if (!box.checked && at >= 0) chosen.splice(at, 1);
    });
  }
  document.getElementById("column-filter").addEventListener("input", (event) => {
    const needle = event.target.value.toLowerCase();
    for (const label of document.querySelectorAll(".column-list label")) {
      label.hidden = !label.textContent.toLowerCase().includes(needle);
    }
  });
  document.getElementById("save-view").addEventListener("click", async () => {
    const name = document.getElementById("view-name").value.trim();
    try {
      const saved = await api("PUT", "/runs/views", { name, project, columns: chosen });
      reloadSaying(`Saved the view '${saved.name}'.`, { view: saved.name });
    } catch (error) { say(error.message, true); }
  });
  const deleteView = document.getElementById("delete-view");
  if (deleteView) deleteView.addEventListener("click", async () => {
    const name = document.getElementById("view-select").value;
    if (!window.confirm(`Delete the view '${name}'?`)) return;
    const query = new URLSearchParams({ name });
    if (project) query.set("project", project);
    try {
      const answer = await api("DELETE", "/runs/views?" + query);
      const url = new URL(window.location.href);
      url.searchParams.delete("view");
      sessionStorage.setItem("runs-table-message", answer.message);
      window.location.assign(url.toString());
    } catch (error) { say(error.message, true); }
  });

  // ---- bulk actions on the selected runs, each confirmed in a dialog first
  const picked = () => Array.from(document.querySelectorAll("input.pick:checked")).map((box) => Number(box.value));
  const buttons = Array.from(tools.querySelectorAll("button.bulk-action"));
  document.addEventListener("change", () => { for (const b of buttons) b.disabled = picked().length === 0; });
  const dialog = document.getElementById("bulk-confirm");
  const these = (n) => (n === 1 ? "this run" : `these ${n} runs`);
  const QUESTIONS = {
    compare: (n) => `Compare ${these(n)} side by side?`,
    tag: (n) => `Add a tag to ${these(n)}:`,
    archive: (n) => `Archive ${these(n)}? Archived runs leave the list (tick "archived runs" to see them).`,
    unarchive: (n) => `Bring ${these(n)} back to the list?`,
    delete: (n) => `Delete ${these(n)} for good, with metrics, samples and files?`,
  };
  let action = null;
  for (const button of buttons) {
    button.addEventListener("click", () => {
      action = button.dataset.action;
      const runs = picked();
      document.getElementById("bulk-question").textContent =
        `${QUESTIONS[action](runs.length)} (${runs.map((id) => "#" + id).join(", ")})`;
      document.getElementById("bulk-tag-label").hidden = action !== "tag";
      dialog.returnValue = "";
      dialog.showModal();
    });
  }
  dialog.addEventListener("close", async () => {
    if (dialog.returnValue !== "ok" || !action) return;
    const order = { action, runs: picked(), confirm: true };
    if (action === "tag") order.tag = document.getElementById("bulk-tag").value.trim();
    try {
      const answer = await api("POST", "/runs/bulk", order);
      if (answer.url) window.location.assign(answer.url);
      else reloadSaying(answer.message);
    } catch (error) { say(error.message, true); }
  });

  // ---- rename and notes, edited in place: Enter (Ctrl+Enter for notes) saves, Escape leaves it as it was
  for (const cell of document.querySelectorAll("#runs-table td.editable")) {
    cell.querySelector("button.edit").addEventListener("click", () => editInPlace(cell));
  }
  function editInPlace(cell) {
    const field = cell.dataset.edit;
    const shown = cell.querySelector(`[data-field="${field}"]`);
    const runId = cell.closest("tr").dataset.runId;
    const input = document.createElement(field === "notes" ? "textarea" : "input");
    input.value = shown.textContent;
    input.maxLength = field === "notes" ? 5000 : 200;
    input.className = "edit-" + field;
    shown.hidden = true;
    cell.insertBefore(input, shown);
    input.focus();
    const close = () => { input.remove(); shown.hidden = false; };
    input.addEventListener("keydown", async (event) => {
      if (event.key === "Escape") return close();
      if (event.key !== "Enter" || (field === "notes" && !event.ctrlKey)) return;
      event.preventDefault();
      try {
        const run = await api("PATCH", `/runs/${runId}`, { [field]: input.value });
        shown.textContent = run[field];
        say("");
        close();
      } catch (error) { say(error.message, true); }
    });
  }
})();
