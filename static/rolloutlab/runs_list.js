// The runs list keeps each row's state and step current without a reload.
(function () {
  const button = document.getElementById("compare-selected");
  if (button) {
    const picked = () => Array.from(document.querySelectorAll("input.pick:checked")).map((box) => box.value);
    document.addEventListener("change", () => { button.disabled = picked().length === 0; });
    button.addEventListener("click", () => { window.location = "/compare/?runs=" + picked().join(","); });
  }
})();

(function () {
  const rows = Array.from(document.querySelectorAll("#runs-table tr[data-run-id]"));
  if (!rows.length) return;
  const ids = rows.map((row) => row.dataset.runId).join(",");
  const fmt = (v) => (typeof v === "number" ? v.toFixed(3) : "");
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
      row.querySelector('[data-field="step"]').textContent = `${run.step}/${run.total_steps}`;
      for (const cell of row.querySelectorAll("[data-metric]")) cell.textContent = fmt(run.summary[cell.dataset.metric]);
    }
  }
  setInterval(refresh, 3000);
})();
