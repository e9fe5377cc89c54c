// The compare page: everything it shows comes from /api/compare with the page's own query string,
// which the controls rewrite in place, so the address bar is always a permalink to the view.
(function () {
  const root = document.getElementById("compare");
  // a shared view (/share/<token>/) reads through the link's token
  const share = root.dataset.share ? "&share=" + encodeURIComponent(root.dataset.share) : "";
  const form = document.getElementById("controls");
  const COLORS = ["#3056d3", "#d9480f", "#2b8a3e", "#862e9c", "#c92a2a", "#0b7285", "#5f3dc4", "#e67700"];
  let timer = null;
  let updates = 0;

  function query() {
    const data = new FormData(form);
    const params = new URLSearchParams();
    for (const name of ["runs", "experiment", "group", "x", "smooth", "band", "baseline", "target", "table"]) {
      const value = data.get(name);
      if (value !== null && value !== "") params.set(name, value);
    }
    params.set("metrics", data.getAll("metrics").join(","));
    if (data.get("seeds")) params.set("seeds", "1");
    return params.toString().replaceAll("%2C", ",").replaceAll("%2F", "/").replaceAll("%40", "@");
  }

  function colorOf(labels, label) { return COLORS[labels.indexOf(label) % COLORS.length]; }
  const fmt = (v, digits = 3) => (v === undefined || v === null ? "—" : Number(v).toFixed(digits));
  const big = (v) => (v === undefined || v === null ? "—" : Number(v).toLocaleString(undefined, { maximumFractionDigits: 1 }));

  function drawCharts(data) {
    const labels = data.groups.map((g) => g.label);
    const container = document.getElementById("charts");
    const wanted = data.view.metrics;
    for (const div of Array.from(container.children)) if (!wanted.includes(div.dataset.metric)) { Plotly.purge(div); div.remove(); }
    let bands = 0;
    const ends = {};
    for (const metric of wanted) {
      let div = container.querySelector(`[data-metric="${CSS.escape(metric)}"]`);
      if (!div) {
        div = document.createElement("div");
        div.className = "chart";
        div.dataset.metric = metric;
        container.appendChild(div);
      }
      const traces = [];
      for (const [label, curve] of Object.entries(data.charts[metric] || {})) {
        const color = colorOf(labels, label);
        if (curve.low) {
          traces.push({ x: curve.x, y: curve.high, mode: "lines", line: { width: 0, color }, showlegend: false, hoverinfo: "skip", legendgroup: label });
          traces.push({ x: curve.x, y: curve.low, mode: "lines", line: { width: 0, color }, fill: "tonexty", fillcolor: color + "33", showlegend: false, hoverinfo: "skip", legendgroup: label, name: plotlyText(label + " band") });
          bands += 1;
          ends[`${metric}|${label}`] = curve.x[curve.x.length - 1];
        }
        const mode = metric.startsWith("eval/") ? "lines+markers" : "lines";  // one evaluation is a point
        traces.push({ x: curve.x, y: curve.mean, mode, name: plotlyText(`${label} (${curve.runs})`), line: { color, width: 2 }, marker: { color, size: 5 }, legendgroup: label });
        for (const seed of curve.seeds || []) {
          traces.push({ x: seed.x, y: seed.y, mode: "lines", name: `#${seed.run}`, line: { color, width: 0.8, dash: "dot" }, showlegend: false, legendgroup: label, opacity: 0.6 });
        }
      }
      Plotly.react(div, traces, {
        title: { text: plotlyText(metric), font: { size: 13 } }, margin: { l: 50, r: 10, t: 30, b: 35 },
        xaxis: { title: { text: { step: "step", tokens: "rollout tokens", seconds: "training seconds" }[data.view.x] } },
        yaxis: { exponentformat: "e" },  // 4e-8, not Plotly's SI "40n"
        legend: { orientation: "h", y: -0.25 },
      }, { displaylogo: false, responsive: true, toImageButtonOptions: { filename: metric.replaceAll("/", "_") } });
      if (!div.querySelector(".image-buttons")) {
        const buttons = document.createElement("div");
        buttons.className = "image-buttons";
        for (const format of ["png", "svg"]) {
          const b = document.createElement("button");
          b.textContent = format.toUpperCase();
          b.addEventListener("click", () => Plotly.downloadImage(div, { format, filename: metric.replaceAll("/", "_") }));
          buttons.appendChild(b);
        }
        div.appendChild(buttons);
      }
    }
    root.dataset.bands = String(bands);
    root.dataset.bandEnds = JSON.stringify(ends);
  }

  function drawTable(data) {
    const body = document.querySelector("#final-table tbody");
    body.innerHTML = "";
    for (const row of data.table) {
      const tr = body.insertRow();
      tr.dataset.group = row.group;
      const cells = [
        row.group, `${row.scored}/${row.runs}${row.running ? ` (${row.running} running)` : ""}`, fmt(row.mean),
        row.iqm === undefined ? "—" : `${fmt(row.iqm)} [${fmt(row.iqm_low)}, ${fmt(row.iqm_high)}] · ${row.interval_note}`,
        row.p_improvement === undefined ? (row.group === data.view.baseline ? "baseline" : "—") : `${fmt(row.p_improvement, 2)} [${fmt(row.p_low, 2)}, ${fmt(row.p_high, 2)}]`,
      ];
      for (const text of cells) tr.insertCell().textContent = text;
    }
  }

  // rollout tokens to the target, per group: the cost a method paid to get there
  function drawReach(data) {
    const body = document.querySelector("#reach-table tbody");
    body.innerHTML = "";
    if (data.view.target === null) {
      body.insertRow().insertCell().textContent = "Type a target above.";
      return;
    }
    for (const row of data.table) {
      const tr = body.insertRow();
      tr.dataset.group = row.group;
      const reach = row.reach;
      const cells = !reach || !reach.reached
        ? [row.group, `0/${reach ? reach.of : row.runs}`, "not reached", "—", "—"]
        : [row.group, `${reach.reached}/${reach.of}`, `${big(reach.tokens)} [${big(reach.tokens_low)}, ${big(reach.tokens_high)}]`, big(reach.steps), big(reach.seconds)];
      for (const text of cells) tr.insertCell().textContent = text;
      if (reach && reach.reached) tr.dataset.tokens = String(reach.tokens);
    }
  }

  // a sweep's shape: one line per run over the knobs that differ and the final metric
  function drawParallel(data) {
    const section = document.getElementById("parallel-section");
    const div = document.getElementById("parallel");
    if (!data.parallel) { section.hidden = true; Plotly.purge(div); return; }
    section.hidden = false;
    const dims = data.parallel.dimensions.map((d) => ({ ...d, label: plotlyText(d.label), ...(d.ticktext ? { ticktext: d.ticktext.map(plotlyText) } : {}) }));
    const metric = dims[dims.length - 1].values;
    Plotly.react(div, [{
      type: "parcoords", dimensions: dims,
      line: { color: metric, colorscale: "Viridis", showscale: true, colorbar: { title: { text: dims[dims.length - 1].label } } },
    }], { margin: { l: 70, r: 70, t: 50, b: 20 } }, { displaylogo: false, responsive: true });
    const notes = [];
    if (data.parallel.unscored) notes.push(`${data.parallel.unscored} run(s) without the metric yet are left out.`);
    const hidden = data.parallel.hidden_knobs || [];
    if (hidden.length) notes.push(`${hidden.length} more knob(s) differ and are not drawn (the axes keep the knobs with the most values): ${hidden.join(", ")}.`);
    document.getElementById("parallel-unscored").textContent = notes.join(" ");
  }

  // the group-by choices are the knobs that differ among the runs, as the server computed them
  function drawGroupOptions(data) {
    const select = form.elements.group;
    const current = Array.from(select.options).map((o) => o.value);
    if (current.join("\n") === data.group_options.join("\n")) return;
    select.innerHTML = data.group_options.map(() => "<option></option>").join("");
    Array.from(select.options).forEach((option, i) => { option.value = option.textContent = data.group_options[i]; });
    select.value = data.view.group;
  }

  // Metrics the runs log after the page was served (a sweep opened while queued) join the picker and the table's
  // select as they arrive, in name order, unticked: the view changes only when the user ticks one.
  function drawMetricOptions(data) {
    const list = form.querySelector(".metric-list");
    const table = form.elements.table;
    for (const name of data.metrics) {
      const boxes = Array.from(list.querySelectorAll("input[name=metrics]"));
      if (boxes.some((box) => box.value === name)) continue;
      const label = document.createElement("label");
      const box = document.createElement("input");
      box.type = "checkbox";
      box.name = "metrics";
      box.value = name;
      label.append(box, " " + name);
      const after = boxes.find((other) => other.value > name);
      list.insertBefore(label, after ? after.closest("label") : null);
      const option = document.createElement("option");
      option.textContent = name;
      table.insertBefore(option, Array.from(table.options).find((other) => other.value > name) || null);
    }
  }

  function drawDiff(data) {
    const table = document.getElementById("config-diff");
    const labels = data.groups.map((g) => g.label);
    table.tHead.innerHTML = "<tr><th>knob</th></tr>";
    for (const label of labels) table.tHead.rows[0].insertCell().outerHTML = `<th></th>`;
    Array.from(table.tHead.rows[0].cells).slice(1).forEach((cell, i) => { cell.textContent = labels[i]; });
    const body = table.tBodies[0];
    body.innerHTML = "";
    for (const row of data.diff) {
      const tr = body.insertRow();
      tr.insertCell().textContent = row.knob + (row.within_group ? " (varies within groups)" : "");
      for (const label of labels) tr.insertCell().textContent = row.values[label];
    }
  }

  function drawRuns(data) {
    const list = document.getElementById("group-runs");
    list.innerHTML = "";
    for (const group of data.groups) {
      const item = document.createElement("li");
      item.textContent = group.label + ": ";
      for (const run of group.runs) {
        const link = document.createElement("a");
        link.href = `/runs/${run.id}/`;
        link.textContent = `#${run.id} (seed ${run.seed}, ${run.state}, ${run.step}/${run.total_steps})`;
        item.append(link, " ");
      }
      list.appendChild(item);
    }
    const baseline = form.elements.baseline;
    const chosen = baseline.value || baseline.dataset.value;
    baseline.innerHTML = '<option value="">none</option>' + data.groups.map((g) => `<option></option>`).join("");
    Array.from(baseline.options).slice(1).forEach((option, i) => { option.value = option.textContent = data.groups[i].label; });
    baseline.value = chosen && data.groups.some((g) => g.label === chosen) ? chosen : "";
  }

  let requested = 0;  // refreshes started: a response to any but the latest is stale, and is not drawn
  async function refresh() {
    clearTimeout(timer);
    const mine = ++requested;
    const q = query();
    history.replaceState(null, "", "?" + q);
    document.getElementById("permalink").href = "?" + q;
    document.getElementById("export-csv").href = `/api/compare/export?${q}&format=csv${share}`;
    document.getElementById("export-parquet").href = `/api/compare/export?${q}&format=parquet${share}`;
    const shareQuery = document.getElementById("share-query");
    if (shareQuery) shareQuery.value = q;
    const response = await fetch("/api/compare?" + q + share, { credentials: "same-origin" });
    const data = await response.json();
    // two changes in quick succession send two requests, whose answers may come back in either order
    if (mine !== requested) return;
    const status = document.getElementById("compare-status");
    if (!response.ok) { status.textContent = data.error; status.className = "error"; return; }
    status.className = "meta";
    status.textContent = data.live ? "Some runs are still running: this page updates itself." : "";
    drawGroupOptions(data);
    drawMetricOptions(data);
    const band = form.elements.band;
    document.getElementById("band-name").textContent = band.options[band.selectedIndex].textContent;
    drawRuns(data);
    drawCharts(data);
    drawTable(data);
    drawReach(data);
    drawParallel(data);
    drawDiff(data);
    updates += 1;
    root.dataset.updates = String(updates);
    root.dataset.drawn = q;  // the query the page now shows
    if (data.live) timer = setTimeout(refresh, 2000);
  }

  form.addEventListener("change", refresh);
  form.elements.smooth.addEventListener("input", () => { document.getElementById("smooth-value").textContent = form.elements.smooth.value; });
  refresh();
})();
