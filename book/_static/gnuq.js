// Figures open at full size when tapped or clicked. A glued figure is a <picture> whose
// narrow rendering the browser shows on a phone (gnuq_core/repro/picture.py): the link
// wraps the whole <picture> (an <img> moved out of it would lose its narrow source) and
// opens the image the reader sees (currentSrc: the narrow one on a phone, the wide one
// elsewhere), a real file in _images/.
// A table wider than the box it scrolls in gets a visible cue above it (and a shadow at the
// edge that hides columns): on a phone nothing else says that columns are off-screen.
function markScrollingTables() {
  for (const table of document.querySelectorAll("article table")) {
    let box = table.parentElement;
    while (box && box.tagName !== "ARTICLE" && !["auto", "scroll"].includes(getComputedStyle(box).overflowX)) {
      box = box.parentElement;
    }
    if (!box || box.tagName === "ARTICLE") continue;
    const overflows = box.scrollWidth > box.clientWidth + 1;
    box.classList.toggle("gnuq-overflows", overflows);
    let hint = box.previousElementSibling;
    if (!(hint && hint.classList.contains("gnuq-scroll-hint"))) {
      if (!overflows) continue;
      hint = document.createElement("div");
      hint.className = "gnuq-scroll-hint";
      hint.textContent = "\u21c6 more columns: scroll the table sideways";
      box.before(hint);
      box.addEventListener("scroll", () => box.classList.toggle(
        "gnuq-scrolled-end", box.scrollLeft + box.clientWidth >= box.scrollWidth - 1));
    }
    hint.hidden = !overflows;
  }
}
document.addEventListener("DOMContentLoaded", markScrollingTables);
window.addEventListener("load", () => {  // after fonts and images; MathJax typesets later still
  markScrollingTables();
  const typeset = window.MathJax && window.MathJax.startup && window.MathJax.startup.promise;
  if (typeset) typeset.then(markScrollingTables);
});
window.addEventListener("resize", markScrollingTables);

document.addEventListener("DOMContentLoaded", () => {
  for (const img of document.querySelectorAll("figure img, div.cell_output img")) {
    if (img.closest("a")) continue;
    const target = img.parentElement.tagName === "PICTURE" ? img.parentElement : img;
    const link = document.createElement("a");
    const follow = () => { link.href = img.currentSrc || img.src; };
    follow();
    img.addEventListener("load", follow);  // the chosen source changes with the screen's width
    link.addEventListener("click", follow);
    link.className = "gnuq-enlarge";
    link.title = "Open the figure at full size";
    target.replaceWith(link);
    link.appendChild(target);
  }
});
