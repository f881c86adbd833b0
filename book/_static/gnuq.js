// Figures open at full size when tapped or clicked: on a 390-px phone a figure is scaled
// to a third of its width, and its labels are then too small to read.
document.addEventListener("DOMContentLoaded", () => {
  for (const img of document.querySelectorAll("figure img, div.cell_output img")) {
    if (img.closest("a")) continue;
    const link = document.createElement("a");
    link.href = img.currentSrc || img.src;
    link.className = "gnuq-enlarge";
    link.title = "Open the figure at full size";
    img.replaceWith(link);
    link.appendChild(img);
  }
});
