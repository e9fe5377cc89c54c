// The launch form. Everything here works on the page as it stands, with no reload:
// - switching preset lays the new preset's values over every field the user has not edited, and marks the
//   knobs the preset sets apart from grpo (the page holds grpo's values and each preset's differences);
// - a switched section (a stage, the task, the model, the resources) shows only the knobs of the kind its switch
//   chooses (`name`, or resources' `executor`), with that kind's one line;
// - the schedule's warnings are asked again on every change;
// - "Edit as YAML" turns the form into its YAML (and back), checked as you type as a launch would check it.
(function () {
  const form = document.getElementById("launch-form");
  const picker = document.getElementById("method-picker");
  const { base, presets } = JSON.parse(document.getElementById("preset-values").textContent);
  const inputs = () => form.querySelectorAll("#form-fields [name]");

  // ------------------------------------------------------------------ presets
  const presetValue = (method, name) => {
    const own = presets[method] || {};
    return name in own ? own[name] : base[name];
  };
  const read = (input) => (input.type === "checkbox" ? input.checked : input.value);
  function write(input, value) {
    if (input.type === "checkbox") input.checked = Boolean(value);
    else input.value = value ?? "";
  }
  let method = picker.value;

  // a field is the user's own once it differs from what the preset gave it
  const edited = (input) => read(input) !== presetValue(method, input.name);

  function switchPreset(next) {
    for (const input of inputs()) {
      if (!edited(input)) write(input, presetValue(next, input.name));
    }
    method = next;
    markPreset();
    showComponents();
    refreshWarnings();
  }

  function markPreset() {
    const own = presets[method] || {};
    for (const field of form.querySelectorAll("#form-fields .field")) {
      const set = field.dataset.name in own;
      field.classList.toggle("preset-set", set);
      const badge = field.querySelector(".preset-badge");
      badge.hidden = !set;
      badge.textContent = set ? `set by ${method} (grpo: ${asText(base[field.dataset.name])})` : "";
    }
    for (const section of form.querySelectorAll("details.section")) {
      const count = section.querySelectorAll(".field.preset-set").length;
      section.querySelector(".preset-count").textContent = count ? `· ${count} set by ${method}` : "";
      if (count || section.querySelector(".has-error")) section.open = true;
    }
    const option = picker.selectedOptions[0];
    document.getElementById("method-help").firstChild.textContent = (option?.dataset.description || "") + " ";
    const card = document.getElementById("method-card-link");
    card.href = card.dataset.base.replace(/grpo\/?$/, `${encodeURIComponent(method)}/`);
    card.hidden = !method;
    const differing = Object.keys(presets[method] || {}).length;
    document.getElementById("preset-note").textContent = differing
      ? `${method} sets ${differing} knob${differing === 1 ? "" : "s"} apart from grpo, highlighted below.`
      : "grpo's own settings.";
    countEdits();
  }

  // grpo's value as one short line: a JSON knob's text without its line breaks, an empty one as "none"
  const asText = (value) => (typeof value === "string" ? value.replace(/\s+/g, " ").trim() || "none" : String(value));

  function countEdits() {
    const count = [...inputs()].filter(edited).length;
    document.getElementById("edit-count").textContent = count
      ? `${method || "custom"} with ${count} knob${count === 1 ? "" : "s"} changed by you`
      : `${method || "custom"} as preset`;
  }

  picker.addEventListener("change", () => switchPreset(picker.value));

  // ------------------------------------------------------------------ kinds
  // A switched section (a pipeline stage, the task, the model, the resources) shows only the knobs of the kind its
  // switch chooses; a value that names no kind (a model's directory) chooses the section's other kind.
  const switchOf = (section) => section.querySelector(`[name='${section.dataset.switch}']`);
  function chosenKind(section) {
    const value = switchOf(section).value;
    return section.dataset.kinds.split(" ").includes(value) ? value : section.dataset.otherKind || value;
  }
  function showComponents() {
    form.querySelectorAll("details.section[data-switch]").forEach((section) => {
      const kind = chosenKind(section);
      section.querySelectorAll("[data-components]").forEach((field) => {
        field.hidden = !field.dataset.components.split(" ").includes(kind);
      });
      const choice = switchOf(section);
      const help = choice.parentElement.querySelector(".choice-help");
      if (help) help.textContent = choice.selectedOptions?.[0]?.dataset.description || "";
    });
  }
  form.querySelectorAll("details.section[data-switch]").forEach((section) => {
    switchOf(section).addEventListener("change", showComponents);
    switchOf(section).addEventListener("input", showComponents);  // a model's directory, typed
  });

  // ------------------------------------------------------------------ warnings
  const warningsBox = document.getElementById("schedule-warnings");
  function showWarnings(warnings) {
    warningsBox.querySelector("ul").replaceChildren(...warnings.map((text) => {
      const item = document.createElement("li");
      item.className = "warning";
      item.textContent = text;
      return item;
    }));
    warningsBox.hidden = !warnings.length;
  }
  // the prompt a training example becomes (the chat template rendered on the server), or why there is none
  const promptPreview = document.getElementById("prompt-preview");
  function showPromptPreview(prompt) {
    if (!promptPreview) return;
    promptPreview.querySelector("pre").textContent = prompt.rendered ?? prompt.note ?? "";
    promptPreview.dataset.question = prompt.question ?? "";
    promptPreview.hidden = !(prompt.rendered || prompt.note);
  }
  let warningsAsked = 0;  // answers can come back out of order: only the latest question's answer is shown
  async function refreshWarnings() {
    if (yamlMode()) return;
    const ticket = ++warningsAsked;
    const response = await fetch(form.dataset.warnings, { method: "POST", body: new FormData(form), credentials: "same-origin" });
    if (response.ok && ticket === warningsAsked) {
      const answer = await response.json();
      showWarnings(answer.warnings);
      document.getElementById("run-estimate").textContent = answer.estimate || "";  // how long it would take
      showPromptPreview(answer.prompt || {});
    }
  }
  form.addEventListener("change", (event) => {
    if (event.target !== picker) { countEdits(); refreshWarnings(); }
  });
  form.addEventListener("input", countEdits);

  // ------------------------------------------------------------------ YAML
  const modeInput = document.getElementById("launch-mode");
  const toggle = document.getElementById("mode-toggle");
  const editor = document.getElementById("config-yaml");
  const yamlMode = () => modeInput.value === "yaml";
  let lastCheck = null;

  function setMode(yaml) {
    modeInput.value = yaml ? "yaml" : "form";
    document.getElementById("yaml-editor").hidden = !yaml;
    document.getElementById("form-fields").hidden = yaml;
    toggle.textContent = yaml ? "Edit as a form" : "Edit as YAML";
  }

  toggle.addEventListener("click", async () => {
    if (!yamlMode()) {
      const response = await fetch(form.dataset.toYaml, { method: "POST", body: new FormData(form), credentials: "same-origin" });
      const answer = await response.json();
      if (!response.ok) { showYamlErrors(answer.errors); return; }
      editor.value = answer.yaml;
      setMode(true);
      checkYaml();
      return;
    }
    const answer = await checkYaml();
    if (!answer || Object.keys(answer.errors).length) return; // fix the YAML first: the form could not hold it
    for (const input of inputs()) if (input.name in answer.values) write(input, answer.values[input.name]);
    if (answer.method && answer.method !== picker.value) { picker.value = answer.method; }
    method = picker.value;
    setMode(false);
    markPreset();
    showComponents();
    refreshWarnings();
  });

  async function checkYaml() {
    const body = new FormData();
    body.append("config_yaml", editor.value);
    body.append("csrfmiddlewaretoken", form.querySelector("[name=csrfmiddlewaretoken]").value);
    const asked = (lastCheck = Symbol("check"));
    const response = await fetch(form.dataset.check, { method: "POST", body, credentials: "same-origin" });
    if (!response.ok || asked !== lastCheck) return null; // a later keystroke's check answers instead
    const answer = await response.json();
    showYamlErrors(answer.errors);
    showWarnings(answer.warnings || []);
    return answer;
  }

  function showYamlErrors(errors) {
    const list = document.getElementById("yaml-errors");
    list.replaceChildren(...Object.entries(errors || {}).map(([field, message]) => {
      const item = document.createElement("li");
      item.textContent = `${field}: ${message}`;
      return item;
    }));
    form.dataset.yamlErrors = String(Object.keys(errors || {}).length);
  }

  let typing = null;
  editor.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(checkYaml, 300);
  });

  // ------------------------------------------------------------------ errors
  // the summary's links open the section of the field they name and put the cursor in it
  document.querySelectorAll("#error-summary a").forEach((link) => link.addEventListener("click", (event) => {
    const input = document.getElementById(`f-${link.dataset.field}`);
    if (!input) return;
    event.preventDefault();
    input.closest("details").open = true;
    input.scrollIntoView({ block: "center" });
    input.focus();
  }));

  markPreset();
  showComponents();
  if (yamlMode()) checkYaml();
  else refreshWarnings();  // the page's own config: its prompt preview
})();
