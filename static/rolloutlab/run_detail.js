// A run's page: live charts over the run's websocket, progress, log tail and the sample inspector.
//
// The charts start from the downsampled series (HTTP); the websocket then sends every point
// committed after the last step each chart holds ("resume"), and keeps sending new ones.
// A reconnect resumes the same way, and a point at or before a chart's last step is dropped,
// so nothing is missed and nothing is drawn twice.
//
// A non-finite point (NaN, ±inf) arrives as [step, null, kind]: the line has a gap there and a
// red × marks it (its hover names the kind); the chart's title counts them. While PostgreSQL or
// Redis is away the server closes the socket with 4503: the page says so and retries every second.
(function () {
  const root = document.getElementById("run");
  const runId = root.dataset.runId;
  // a shared view (/share/<token>/) reads through the link's token; a member's page through the session
  const share = root.dataset.share ? `share=${encodeURIComponent(root.dataset.share)}` : "";
  const withShare = (url) => (share ? url + (url.includes("?") ? "&" : "?") + share : url);
  const FINAL = ["succeeded", "failed", "cancelled", "lost"];
  const RESUMABLE = ["failed", "cancelled", "lost"];
  const charts = new Map(); // key -> {div, lastStep}
  const pending = new Map(); // key -> points received for a chart not shown, or not drawn yet
  let livePoints = 0;
  let socket = null;
  let retry = 500;
  const UNAVAILABLE = 4503;
  const KIND_TEXT = { nan: "NaN", "+inf": "+∞", "-inf": "−∞" };

  // ------------------------------------------------------------------ charts
  async function showChart(key, container = "charts") {
    if (charts.has(key)) return;
    const div = document.createElement("div");
    div.className = "chart";
    div.dataset.key = key;
    document.getElementById(container).appendChild(div);
    // drawn: false while its series loads; a live point arriving meanwhile waits in `pending` (not drawn on a div
    // Plotly has not plotted yet, which would throw and lose the rest of that message's points)
    const chart = { div, lastStep: -1, lastValue: 0, nonfinite: 0, markerTrace: 1, drawn: false };
    charts.set(key, chart);
    const series = await loadSeries(key);
    if (charts.get(key) !== chart) return; // hidden meanwhile
    // an evaluation is a point every so many steps: markers too, so that one evaluation is already drawn
    const mode = key.startsWith("eval/") ? "lines+markers" : "lines";
    const traces = [{ x: series.step, y: series.value, mode, name: plotlyText(key), line: { width: 1.5 }, marker: { size: 5 } }];
    if (series.downsampled) {
      traces.push({ x: series.step, y: series.high, mode: "lines", line: { width: 0 }, showlegend: false, hoverinfo: "skip" });
      traces.push({ x: series.step, y: series.low, mode: "lines", line: { width: 0 }, fill: "tonexty", fillcolor: "rgba(48,86,211,0.15)", showlegend: false, hoverinfo: "skip" });
    }
    chart.markerTrace = traces.length;
    for (const v of series.value) if (v !== null) chart.lastValue = v;
    traces.push({ x: [], y: [], text: [], mode: "markers", name: "not finite", marker: { symbol: "x", color: "#c0392b", size: 9 },
      hovertemplate: "step %{x}: %{text} (not a number; not drawn)<extra></extra>" });
    Plotly.newPlot(div, traces, {
      title: { text: plotlyText(chartTitle(key)), font: { size: 13 } }, margin: { l: 50, r: 10, t: 30, b: 30 },
      xaxis: { title: { text: "step" } }, showlegend: false,
      yaxis: { exponentformat: "e" },  // 4e-8, not Plotly's SI "40n", which reads as a unit
    }, { displaylogo: false, responsive: true });
    markNonFinite(chart, (series.nonfinite || []).map(([step, kind]) => [step, null, kind]));
    chart.lastStep = series.step.length ? series.step[series.step.length - 1] : -1;
    chart.drawn = true;
    const early = pending.get(key);
    if (early) { pending.delete(key); addPoints(key, early); }
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ resume: resumePoint() }));
  }

  // an episode metric names the environment it was measured in (success in one environment is not success in another)
  function chartTitle(key) {
    const environment = root.dataset.environment;
    return key.startsWith("episodes/") && environment && environment !== "none" ? `${key} · ${environment}` : key;
  }

  // the downsampled series over HTTP; while the server answers 503 (an outage), ask again
  async function loadSeries(key) {
    const empty = { step: [], value: [], low: [], high: [], nonfinite: [] };
    for (let wait = 1000; ; wait = Math.min(wait * 2, 5000)) {
      try {
        const response = await fetch(withShare(`/api/runs/${runId}/series?keys=${encodeURIComponent(key)}&points=1000`));
        if (response.ok) return (await response.json()).series[key] || empty;
        if (response.status !== 503) return empty;
        setConnection("the server is briefly unavailable; the chart will load when it is back");
      } catch (error) {
        setConnection("the server cannot be reached; retrying");
      }
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }

  // a red × per non-finite point, at the height of the last finite value before it; the title counts them
  function markNonFinite(chart, points) {
    const marks = points.filter((p) => p[1] === null);
    if (!marks.length) return;
    Plotly.extendTraces(chart.div, {
      x: [marks.map((p) => p[0])], y: [marks.map(() => chart.lastValue)], text: [marks.map((p) => KIND_TEXT[p[2]] || p[2])],
    }, [chart.markerTrace]);
    chart.nonfinite += marks.length;
    chart.div.dataset.nonfinite = String(chart.nonfinite);
    const key = chart.div.dataset.key;
    Plotly.relayout(chart.div, { "title.text": `${key} <span style="color:#c0392b">· ${chart.nonfinite} not finite (×)</span>` });
  }

  function setConnection(text) {
    const note = document.getElementById("connection-note");
    if (!note) return;
    note.textContent = text;
    note.hidden = !text;
  }

  function hideChart(key) {
    const chart = charts.get(key);
    if (!chart) return;
    Plotly.purge(chart.div);
    chart.div.remove();
    charts.delete(key);
  }

  function addPoints(key, points) {
    const chart = charts.get(key);
    if (!chart || !chart.drawn) {
      pending.set(key, (pending.get(key) || []).concat(points).slice(-5000));
      return;
    }
    const fresh = points.filter(([step]) => step > chart.lastStep);
    if (!fresh.length) return;
    chart.lastStep = fresh[fresh.length - 1][0];
    livePoints += fresh.length;
    root.dataset.livePoints = String(livePoints);
    root.dataset.lastLiveStep = String(Math.max(Number(root.dataset.lastLiveStep || -1), chart.lastStep));
    markNonFinite(chart, fresh); // null values leave a gap in the line
    Plotly.extendTraces(chart.div, { x: [fresh.map((p) => p[0])], y: [fresh.map((p) => p[1])] }, [0]);
    for (const p of fresh) if (p[1] !== null) chart.lastValue = p[1];
  }

  // A new attempt of the run goes on from its checkpoint at `step` (a lost worker's run, or a user's resume):
  // the points drawn after it are gone from the server, and the steps after it come again.
  function rewind(step) {
    for (const [key, points] of pending) pending.set(key, points.filter(([s]) => s <= step));
    for (const chart of charts.values()) {
      if (chart.lastStep <= step) continue;
      const kept = chart.div.data.map((trace) => {
        const keep = Array.from(trace.x).filter((x) => x <= step).length; // steps ascend in every trace
        return { x: Array.from(trace.x).slice(0, keep), y: Array.from(trace.y).slice(0, keep), text: trace.text ? Array.from(trace.text).slice(0, keep) : [] };
      });
      Plotly.restyle(chart.div, { x: kept.map((t) => t.x), y: kept.map((t) => t.y), text: kept.map((t) => t.text) });
      const line = kept[0].x;
      chart.lastStep = line.length ? line[line.length - 1] : -1;
      chart.nonfinite = kept[chart.markerTrace].x.length;
      chart.div.dataset.nonfinite = String(chart.nonfinite);
    }
    root.dataset.rewoundTo = String(step);
    setProgress(Math.max(step, 0), Number(root.dataset.trainSeconds));
  }

  function resumePoint() {
    const resume = {};
    for (const [key, chart] of charts) resume[key] = chart.lastStep;
    return resume;
  }

  // ------------------------------------------------------------------ state and progress
  function setState(state, detail) {
    root.dataset.state = state;
    const badge = document.getElementById("run-state");
    badge.textContent = state;
    badge.className = "state state-" + state;
    if (detail !== undefined) document.getElementById("run-detail").textContent = detail;
    // the actions follow the state without a reload: Cancel while it may run, Delete and Resume once it ended
    const cancel = document.getElementById("cancel-button");
    if (cancel) cancel.disabled = FINAL.includes(state);
    const remove = document.getElementById("delete-button");
    if (remove) remove.disabled = !FINAL.includes(state);
    const resume = document.getElementById("resume-form");
    if (resume) resume.hidden = !RESUMABLE.includes(state);
    setProgress(Number(root.dataset.step) || 0, Number(root.dataset.trainSeconds) || 0);  // full once it ended
    refreshAttempts();
  }

  // the attempts table, read again after every state change (a resume, a lost worker's re-queue)
  async function refreshAttempts() {
    const response = await fetch(withShare(`/api/runs/${runId}`));
    if (!response.ok) return;
    const attempts = (await response.json()).attempts || [];
    document.getElementById("attempts-section").hidden = attempts.length <= 1;
    document.querySelector("#attempts tbody").replaceChildren(...attempts.map(attemptRow));
  }

  function attemptRow(a) {
    const row = document.createElement("tr");
    row.dataset.attempt = String(a.number);
    const when = (iso) => (iso ? iso.slice(0, 19).replace("T", " ") : "·");
    let resumed = "·";
    if (a.resumed_from_step) resumed = `resumed from step ${a.resumed_from_step}`;
    else if (a.number > 1) resumed = a.resumed_from_step === 0 || a.outcome ? "started over" : "reading its checkpoint…";
    const cells = [String(a.number), a.worker_host || "·", when(a.started_at), when(a.ended_at), null, resumed];
    for (const text of cells) {
      const cell = row.insertCell();
      if (text !== null) { cell.textContent = text; continue; }
      if (!a.outcome) { cell.textContent = "running"; continue; }
      const badge = document.createElement("span");
      badge.className = `state state-${a.outcome}`;
      badge.textContent = a.outcome;
      const reason = document.createElement("span");
      reason.className = "meta";
      reason.textContent = ` ${a.reason || ""}`;
      cell.append(badge, reason);
    }
    return row;
  }

  function setProgress(step, trainSeconds) {
    root.dataset.step = String(step);
    const total = Number(root.dataset.total) || 1;
    const running = !FINAL.includes(root.dataset.state);
    // the bar is full when the run has ended, not at its last step: the last evaluation and checkpoint still run
    const share = running ? Math.min(99, (100 * step) / total) : Math.min(100, (100 * step) / total);
    document.getElementById("progress-bar").style.width = share + "%";
    let text = `step ${step} / ${total}`;
    const evalEvery = Number(root.dataset.evalEvery) || 0;
    const evalSeconds = Number(root.dataset.evalSeconds) || 0;
    if (running && step >= total) {
      text += " · finishing: the last evaluation and checkpoint";
    } else if (step > 0 && trainSeconds > 0 && running) {
      // the steps left at the training seconds a step takes, and the evaluations still due at the last one's time
      const evaluations = evalEvery ? Math.floor(total / evalEvery) - Math.floor(step / evalEvery) : 0;
      const eta = ((total - step) * trainSeconds) / step + evaluations * evalSeconds;
      text += ` · ETA ${eta < 90 ? Math.round(eta) + " s" : Math.round(eta / 60) + " min"}`;
    }
    document.getElementById("progress-text").textContent = text;
  }

  function appendLog(lines) {
    const log = document.getElementById("log");
    const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.textContent += lines.join("\n") + "\n";
    if (atBottom) log.scrollTop = log.scrollHeight;
  }

  // ------------------------------------------------------------------ websocket
  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(withShare(`${scheme}://${location.host}/ws/runs/${runId}/`));
    socket.onopen = () => {
      retry = 500;
      root.dataset.socketOpens = String(Number(root.dataset.socketOpens || 0) + 1);
      socket.send(JSON.stringify({ resume: resumePoint() }));
    };
    socket.onmessage = (message) => {
      const event = JSON.parse(message.data);
      if (event.kind === "points") {
        for (const [key, points] of Object.entries(event.points)) {
          ensurePickerEntry(key);
          addPoints(key, points);
        }
      } else if (event.kind === "state") {
        // drawn past what the server holds: a new attempt rewound the run while this page was away
        if (event.step !== undefined && Math.max(-1, ...[...charts.values()].map((c) => c.lastStep)) > event.step) rewind(event.step);
        setState(event.state, event.detail);
        if (event.step !== undefined) setProgress(event.step, Number(root.dataset.trainSeconds));
        if (FINAL.includes(event.state)) loadSamples(null);
      } else if (event.kind === "progress") {
        root.dataset.trainSeconds = String(event.train_seconds);
        if (event.eval_seconds) root.dataset.evalSeconds = String(event.eval_seconds);
        setProgress(event.step, event.train_seconds);
      } else if (event.kind === "rewind") {
        rewind(event.step);
        refreshAttempts();  // the new attempt now knows the step it resumed from
      } else if (event.kind === "log") {
        appendLog(event.lines);
      } else if (event.kind === "unavailable") {
        setConnection(`${event.error}; reconnecting…`);
      }
      if (event.kind === "state") setConnection("");
    };
    socket.onclose = (event) => {
      root.dataset.socketCloses = String(Number(root.dataset.socketCloses || 0) + 1);
      if (FINAL.includes(root.dataset.state)) return;
      if (event.code === UNAVAILABLE) {
        root.dataset.unavailableCloses = String(Number(root.dataset.unavailableCloses || 0) + 1);
        setTimeout(connect, 1000); // an outage: try again every second, to resume as soon as it ends
        return;
      }
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 8000);
    };
  }

  // ------------------------------------------------------------------ metric picker
  function ensurePickerEntry(key) {
    const picker = document.getElementById("metric-picker");
    if (picker.querySelector(`input[value="${CSS.escape(key)}"]`)) return;
    const label = document.createElement("label");
    label.innerHTML = `<input type="checkbox" value=""> `;
    label.querySelector("input").value = key;
    label.append(key);
    picker.appendChild(label);
  }

  document.getElementById("metric-picker").addEventListener("change", (event) => {
    const key = event.target.value;
    if (event.target.checked) showChart(key); else hideChart(key);
    saveChartChoice();
  });

  // the choice is the user's for every run of this project (not on a shared link, which has no user)
  async function saveChartChoice() {
    if (share) return;
    const keys = [...document.querySelectorAll("#metric-picker input:checked")].map((input) => input.value);
    const csrf = document.cookie.split("; ").find((c) => c.startsWith("csrftoken="));
    const response = await fetch(`/api/runs/${runId}/charts`, {
      method: "PUT", headers: { "Content-Type": "application/json", "X-CSRFToken": csrf ? csrf.split("=")[1] : "" },
      body: JSON.stringify({ keys }),
    });
    root.dataset.chartsSaved = response.ok ? keys.join(",") : "error";
  }

  // ------------------------------------------------------------------ rollout views
  // The step's groups split into all-correct, all-wrong, other zero-variance and informative (these add up to
  // all groups), with the share the filter dropped drawn over them; the completion-length distribution per
  // step; each repeated prompt's pass rate each time it came back (from /api/runs/<id>/rollouts).
  const GROUP_SERIES = ["groups/frac_all_correct", "groups/frac_all_wrong", "groups/frac_zero_std",
    "pipeline/filter/dropped_groups", "pipeline/filter/kept_groups"];

  async function loadRolloutViews() {
    if (!document.getElementById("groups-chart")) return;  // an external run: no groups to draw
    const [seriesResponse, viewsResponse] = await Promise.all([
      fetch(withShare(`/api/runs/${runId}/series?keys=${GROUP_SERIES.join(",")}&points=500`)),
      fetch(withShare(`/api/runs/${runId}/rollouts?columns=120`)),
    ]);
    if (seriesResponse.ok) drawGroups((await seriesResponse.json()).series);
    if (viewsResponse.ok) {
      const views = await viewsResponse.json();
      drawHeatmap("length-chart", views.lengths.steps, views.lengths.lengths, views.lengths.z,
        "completion length (tokens): share of each step's samples", "length", "Blues");
      drawHeatmap("pass-rate-chart", views.pass_rates.steps, views.pass_rates.prompts.map(plotlyText), views.pass_rates.z,
        "pass rate of each prompt seen more than once", "", "RdYlGn", { zmin: 0, zmax: 1 });
      root.dataset.rolloutPrompts = String(views.pass_rates.prompts.length);
    }
  }

  function drawGroups(series) {
    const at = (key) => new Map((series[key]?.step || []).map((step, i) => [step, series[key].value[i]]));
    const [correct, wrong, zero, dropped, kept] = GROUP_SERIES.map(at);
    const steps = [...zero.keys()];
    if (!steps.length) return;
    const value = (map, step) => map.get(step) ?? 0;
    const other = steps.map((s) => Math.max(0, value(zero, s) - value(correct, s) - value(wrong, s)));
    const informative = steps.map((s) => Math.max(0, 1 - value(zero, s)));
    const area = (name, y, color) => ({ x: steps, y, name, stackgroup: "groups", line: { width: 0.5, color } });
    const traces = [
      area("all correct", steps.map((s) => value(correct, s)), "#12b76a"),
      area("all wrong", steps.map((s) => value(wrong, s)), "#f04438"),
      area("other zero-variance", other, "#fdb022"),
      area("informative", informative, "#98a2b3"),
    ];
    if (dropped.size) {
      const share = steps.map((s) => value(dropped, s) / Math.max(1, value(dropped, s) + value(kept, s)));
      traces.push({ x: steps, y: share, name: "dropped by the filter", mode: "lines", line: { color: "#101828", dash: "dot" } });
    }
    Plotly.react("groups-chart", traces, {
      title: { text: "the step's groups", font: { size: 13 } }, margin: { l: 50, r: 10, t: 30, b: 30 },
      yaxis: { range: [0, 1], title: { text: "share of groups" } }, xaxis: { title: { text: "step" } },
      legend: { orientation: "h", y: -0.2 },
    }, { displaylogo: false, responsive: true });
  }

  function drawHeatmap(id, x, y, z, title, yTitle, colorscale, range = {}) {
    if (!x.length || !y.length) {
      document.getElementById(id).textContent = `${title}: nothing recorded yet`;
      return;
    }
    Plotly.react(id, [{ type: "heatmap", x, y, z, colorscale, hoverongaps: false, ...range }], {
      title: { text: title, font: { size: 13 } }, margin: { l: 160, r: 10, t: 30, b: 30 },
      xaxis: { title: { text: "step" } }, yaxis: { title: { text: yTitle }, automargin: true },
    }, { displaylogo: false, responsive: true });
  }

  // ------------------------------------------------------------------ sample inspector
  // A step's samples grouped by prompt group (the server groups, filters and pages them); each
  // completion's tokens can be coloured by the sampling policy's log-probability or the entropy.
  const stepInput = document.getElementById("sample-step");
  const showSelect = document.getElementById("sample-show");
  const colourSelect = document.getElementById("token-colour");
  let sampleSteps = [];
  let groupPage = 1;
  let groupPages = 1;

  async function loadSamples(step) {
    const params = new URLSearchParams({ show: showSelect.value, page: String(groupPage) });
    if (step !== null && step !== "") params.set("step", step);
    const response = await fetch(withShare(`/api/runs/${runId}/samples?${params}`));
    if (!response.ok) return;
    const data = await response.json();
    sampleSteps = data.steps;
    groupPage = data.page;
    groupPages = data.pages;
    if (data.step !== null) stepInput.value = data.step;
    document.getElementById("sample-count").textContent =
      `${data.matching_samples} of ${data.samples.length} samples in ${data.matching_groups} groups · steps with samples: ${sampleSteps.length}`;
    document.getElementById("group-page").textContent = `groups page ${groupPage} / ${groupPages}`;
    renderGroups(data.groups);
  }

  function renderGroups(groups) {
    const box = document.getElementById("sample-groups");
    box.innerHTML = "";
    for (const group of groups) {
      const section = document.createElement("section");
      section.className = "sample-group" + (group.dropped ? " dropped" : "");
      const head = document.createElement("h3");
      head.textContent = `${group.prompt} → ${group.answer}`;
      const stats = document.createElement("span");
      stats.className = "meta";
      stats.textContent = ` · ${group.correct}/${group.size} correct · mean reward ${group.mean_reward.toFixed(3)}` +
        (group.dropped ? " · dropped by the filter" : "");
      head.appendChild(stats);
      section.appendChild(head);
      if (group.rendered_prompt) {  // what the model read: the question through its chat template
        const rendered = document.createElement("details");
        rendered.className = "rendered-prompt";
        const label = document.createElement("summary");
        label.textContent = "prompt as the model read it";
        const text = document.createElement("pre");
        text.textContent = group.rendered_prompt;
        rendered.append(label, text);
        section.appendChild(rendered);
      }
      const table = document.createElement("table");
      table.className = "samples";
      table.innerHTML = "<thead><tr><th>completion</th><th>reward</th><th>rewards</th><th>advantage</th><th>length</th><th>pipeline</th></tr></thead>";
      const body = table.createTBody();
      for (const s of group.samples) {
        const row = body.insertRow();
        row.className = "sample";
        const completion = row.insertCell();
        completion.className = s.correct ? "correct" : "wrong";
        completion.appendChild(s.turns && s.turns.length && s.tokens ? turnsView(s) : completionView(s));
        row.insertCell().textContent = (s.reward ?? 0).toFixed(3);
        row.insertCell().textContent = Object.entries(s.rewards || {}).map(([k, v]) => `${k}=${Number(v).toFixed(2)}`).join(" ");
        row.insertCell().textContent = s.advantage === null || s.advantage === undefined ? "—" : Number(s.advantage).toFixed(3);
        row.insertCell().textContent = `${s.length ?? ""}${s.truncated ? " · truncated" : ""}`;
        row.insertCell().textContent = Object.entries(s.stages || {}).map(([k, v]) => `${k}: ${v}`).join("\n");
      }
      section.appendChild(table);
      box.appendChild(section);
    }
  }

  // the completion as text, or (colouring on, and the engine stored them) as one span per token whose
  // shade grows with the token's surprise (-log p, up to 5 nats) or the entropy (up to 3 nats)
  const SCALES = { logprob: { field: "logprobs", of: (v) => -v, max: 5, rgb: "192,57,43" },
    entropy: { field: "entropies", of: (v) => v, max: 3, rgb: "48,86,211" } };
  function completionView(sample) {
    const scale = SCALES[colourSelect.value];
    const values = scale && sample[scale.field];
    if (!values || !sample.tokens) return document.createTextNode(sample.completion);
    const span = document.createElement("span");
    sample.tokens.forEach((token, i) => {
      const piece = document.createElement("span");
      piece.className = "token";
      piece.textContent = token;
      piece.dataset.value = String(values[i]);
      const shade = Math.max(0, Math.min(1, scale.of(values[i]) / scale.max));
      piece.style.backgroundColor = `rgba(${scale.rgb},${(0.75 * shade).toFixed(3)})`;
      piece.title = `${scale.field === "logprobs" ? "log p" : "entropy"} ${Number(values[i]).toFixed(3)}`;
      span.appendChild(piece);
    });
    return span;
  }

  // a multi-turn episode as its turns: each the policy's text (its tokens coloured as above), what the environment
  // read from it, its reward part and advantage and how many of its tokens trained; then the environment's
  // observation, which the policy read but never trained on
  function turnsView(sample) {
    const box = document.createElement("div");
    box.className = "turns";
    sample.turns.forEach((turn, k) => {
      const item = document.createElement("div");
      item.className = "turn" + (turn.well_formed === false ? " malformed" : "");
      const head = document.createElement("div");
      head.className = "turn-head";
      const advantage = turn.advantage === null || turn.advantage === undefined ? "—" : Number(turn.advantage).toFixed(3);
      const trained = turn.trained ? `${turn.trained} tokens trained` : "not trained";
      head.textContent = `turn ${k + 1} · reward ${Number(turn.reward).toFixed(2)} · advantage ${advantage} · ${trained}` +
        (turn.well_formed === false ? " · not well formed" : "") + (turn.state ? ` · state ${turn.state}` : "");
      item.appendChild(head);
      if (turn.action) {
        const action = document.createElement("code");
        action.className = "turn-action";
        action.textContent = turn.action;
        item.appendChild(action);
      }
      item.appendChild(tokenSpan(sample, turn.start, turn.end, "turn-policy"));
      if (turn.observation_end > turn.end) item.appendChild(tokenSpan(sample, turn.end, turn.observation_end, "turn-observation"));
      box.appendChild(item);
    });
    return box;
  }

  // tokens [start, end) of a sample, coloured when colouring is on; observations are never coloured (not sampled)
  function tokenSpan(sample, start, end, className) {
    const span = document.createElement("div");
    span.className = className;
    const scale = className === "turn-policy" ? SCALES[colourSelect.value] : null;
    const values = scale && sample[scale.field];
    for (let i = start; i < end && i < sample.tokens.length; i++) {
      const piece = document.createElement("span");
      piece.className = "token";
      piece.textContent = sample.tokens[i];
      if (values) {
        piece.dataset.value = String(values[i]);
        const shade = Math.max(0, Math.min(1, scale.of(values[i]) / scale.max));
        piece.style.backgroundColor = `rgba(${scale.rgb},${(0.75 * shade).toFixed(3)})`;
      }
      span.appendChild(piece);
    }
    return span;
  }

  function stepBy(direction) {
    const current = Number(stepInput.value);
    const candidates = direction < 0 ? sampleSteps.filter((s) => s < current) : sampleSteps.filter((s) => s > current);
    groupPage = 1;
    if (candidates.length) loadSamples(direction < 0 ? candidates[candidates.length - 1] : candidates[0]);
  }
  function pageBy(direction) {
    const next = Math.max(1, Math.min(groupPages, groupPage + direction));
    if (next !== groupPage) { groupPage = next; loadSamples(stepInput.value); }
  }
  document.getElementById("sample-prev").addEventListener("click", () => stepBy(-1));
  document.getElementById("sample-next").addEventListener("click", () => stepBy(1));
  document.getElementById("group-prev").addEventListener("click", () => pageBy(-1));
  document.getElementById("group-next").addEventListener("click", () => pageBy(1));
  stepInput.addEventListener("change", () => { groupPage = 1; loadSamples(stepInput.value); });
  showSelect.addEventListener("change", () => { groupPage = 1; loadSamples(stepInput.value); });
  colourSelect.addEventListener("change", () => loadSamples(stepInput.value));

  // ------------------------------------------------------------------ start
  setProgress(Number(root.dataset.step), Number(root.dataset.trainSeconds));
  const initial = JSON.parse(document.getElementById("initial-charts").textContent);
  // the charts first: the rollout views and the samples ask the server only once the charts are drawn
  // what the run cost the machine, sampled once a step by the worker: CPU, memory and GPU, below the charts
  const system = JSON.parse(document.getElementById("system-charts-keys").textContent);
  Promise.all([...initial.map((key) => showChart(key)), ...system.map((key) => showChart(key, "system-charts"))]).then(() => {
    if (!FINAL.includes(root.dataset.state)) connect();
    loadRolloutViews();
    loadSamples(null);
  });
  setInterval(() => { if (root.dataset.state === "running") loadRolloutViews(); }, 15000);
  // while the run runs, the inspector follows the newest step until the user picks one
  let followLatest = true;
  for (const id of ["sample-prev", "sample-next", "group-prev", "group-next"]) {
    document.getElementById(id).addEventListener("click", () => { followLatest = false; });
  }
  for (const input of [stepInput, showSelect]) input.addEventListener("change", () => { followLatest = false; });
  setInterval(() => { if (followLatest && root.dataset.state === "running") loadSamples(null); }, 5000);
})();
