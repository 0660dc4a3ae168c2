// Draws every plotly figure a page or an htmx swap brings (its JSON rides in a <script class="plot">).
function drawPlots(root) {
  root.querySelectorAll("script.plot").forEach(function (data) {
    var figure = JSON.parse(data.textContent);
    Plotly.newPlot(data.dataset.target, figure.data, figure.layout, {displayModeBar: false, responsive: true});
  });
}
document.addEventListener("DOMContentLoaded", function () { drawPlots(document); });
document.addEventListener("htmx:afterSwap", function (event) { drawPlots(event.detail.target); });
