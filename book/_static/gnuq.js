// Figures open at full size when tapped or clicked. A glued figure is a <picture> whose
// narrow rendering the browser shows on a phone (gnuq_core/repro/picture.py): the link
// wraps the whole <picture> (an <img> moved out of it would lose its narrow source) and
// opens the image the reader sees (currentSrc: the narrow one on a phone, the wide one
// elsewhere), a real file in _images/.
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
