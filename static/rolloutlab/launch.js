// The launch form: picking a method reloads the form with that method's preset filled in.
document.getElementById("method-picker").addEventListener("change", (event) => {
  window.location.search = "?method=" + encodeURIComponent(event.target.value);
});

// A pipeline stage shows only the knobs of the component chosen in its name select.
document.querySelectorAll("fieldset.section").forEach((section) => {
  const picker = section.querySelector("select[name$='.name']");
  const owned = section.querySelectorAll("[data-components]");
  if (!picker || !owned.length) return;
  const show = () => owned.forEach((field) => {
    field.hidden = !field.dataset.components.split(" ").includes(picker.value);
  });
  picker.addEventListener("change", show);
  show();
});

// Knobs the schedule leaves inert (a clip range with one pass of one minibatch...): asked again on every change.
const launchForm = document.getElementById("launch-form");
const warningsBox = document.getElementById("schedule-warnings");
launchForm.addEventListener("change", async () => {
  const response = await fetch(launchForm.dataset.warnings, {
    method: "POST", body: new FormData(launchForm), credentials: "same-origin",
  });
  if (!response.ok) return;
  const { warnings } = await response.json();
  warningsBox.querySelector("ul").replaceChildren(...warnings.map((text) => {
    const item = document.createElement("li");
    item.className = "warning";
    item.textContent = text;
    return item;
  }));
  warningsBox.hidden = !warnings.length;
});
