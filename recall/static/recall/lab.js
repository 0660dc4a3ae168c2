// Draws every plotly figure a page or an htmx swap brings (its JSON rides in a <script class="plot">).
function drawPlots(root) {
  root.querySelectorAll("script.plot").forEach(function (data) {
    var figure = JSON.parse(data.textContent);
    Plotly.newPlot(data.dataset.target, figure.data, figure.layout, {displayModeBar: false, responsive: true});
  });
}
document.addEventListener("DOMContentLoaded", function () { drawPlots(document); });
document.addEventListener("htmx:afterSwap", function (event) { drawPlots(event.detail.target); });
// Picking another org reloads the page for it (a listener here: the Lab's policy allows no inline handler).
document.addEventListener("change", function (event) {
  if (event.target.id === "org-picker") { event.target.form.submit(); }
});
