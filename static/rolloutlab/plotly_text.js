// Plotly reads the text it draws (trace names, titles, tick labels, hover names) as a subset of HTML: <a href>
// becomes a link, <b> bold. A run's config values, metric names and a task's prompts are anyone's text, so each
// is given to Plotly as its characters, never as markup.
window.plotlyText = (value) => String(value).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
