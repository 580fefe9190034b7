// Progressive enhancement only: everything works without this file.
// A form that changes something is sent once per click: its button is
// disabled while the answer is on its way (the form's idempotency key
// makes a second send harmless anyway).
document.addEventListener("submit", function (ev) {
  var form = ev.target;
  if (form.method.toLowerCase() !== "post") return;
  window.setTimeout(function () {
    form.querySelectorAll("button[type=submit]").forEach(function (b) {
      b.disabled = true;
      b.setAttribute("aria-busy", "true");
    });
  }, 0);
});
