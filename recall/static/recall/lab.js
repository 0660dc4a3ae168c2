// Draws every plotly figure a page or an htmx swap brings (its JSON rides in a <script class="plot">).
function drawPlots(root) {
  root.querySelectorAll("script.plot").forEach(function (data) {
    var figure = JSON.parse(data.textContent);
    Plotly.newPlot(data.dataset.target, figure.data, figure.layout, {displayModeBar: false, responsive: true});
  });
}
document.addEventListener("DOMContentLoaded", function () { drawPlots(document); });
// After the settle step, not the swap: settling puts back the attributes an element with the same id had, and
// would take plotly's class off a chart drawn in between (its legend then lands on the table below).
document.addEventListener("htmx:afterSettle", function (event) { drawPlots(event.target); });
// Picking another org reloads the page for it (a listener here: the Lab's policy allows no inline handler).
document.addEventListener("change", function (event) {
  if (event.target.id === "org-picker") { event.target.form.submit(); }
});
