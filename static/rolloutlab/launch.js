// The launch form: picking a method reloads the form with that method's preset filled in.
document.getElementById("method-picker").addEventListener("change", (event) => {
  window.location.search = "?method=" + encodeURIComponent(event.target.value);
});
