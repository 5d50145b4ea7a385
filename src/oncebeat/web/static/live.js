// oncebeat: the dashboard's only own script. htmx refreshes each live region (hx-get ... every N s); this skips a
// refresh while the operator is typing or choosing in the region it would replace, so no input is lost.
document.addEventListener("htmx:beforeRequest", function (event) {
  var active = document.activeElement;
  var region = event.detail && event.detail.elt;
  if (region && active && active !== document.body && region.contains(active) &&
      active.matches("input, select, textarea")) {
    event.preventDefault();
  }
});
