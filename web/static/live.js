// Live refresh: re-fetch this page every few seconds and swap in the new <main>.
// The pages work without it; it pauses while a form field has focus, while a form holds
// input not submitted yet (a filter being typed), or while the tab is hidden.
(function () {
  "use strict";
  var body = document.body;
  var seconds = parseInt(body.getAttribute("data-refresh") || "0", 10);
  var toggle = document.getElementById("live");
  if (!seconds || !toggle || !window.fetch || !window.DOMParser) { return; }
  toggle.parentNode.hidden = false;
  var busy = false;
  function editing() {
    var el = document.activeElement;
    return el && /^(INPUT|SELECT|TEXTAREA|BUTTON)$/.test(el.tagName);
  }
  function changed() {
    var fields = document.querySelectorAll("#content input, #content select, #content textarea");
    for (var i = 0; i < fields.length; i++) {
      var el = fields[i];
      if (el.type === "checkbox" || el.type === "radio") {
        if (el.checked !== el.defaultChecked) { return true; }
      } else if (el.tagName === "SELECT") {
        var first = 0;  // with no option marked selected, the browser shows the first
        for (var j = 0; j < el.options.length; j++) {
          if (el.options[j].defaultSelected) { first = j; break; }
        }
        if (el.selectedIndex !== first) { return true; }
      } else if (el.type !== "hidden" && el.value !== el.defaultValue) {
        return true;
      }
    }
    return false;
  }
  function tick() {
    if (busy || !toggle.checked || document.hidden || editing() || changed()) { return; }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Requested-With": "live" } })
      .then(function (resp) { return resp.ok ? resp.text() : null; })
      .then(function (html) {
        // typed into a form while the page was on its way: keep what the user typed
        if (!html || editing() || changed()) { return; }
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("content");
        var main = document.getElementById("content");
        if (fresh && main) { main.replaceWith(document.importNode(fresh, true)); }
      })
      .catch(function () { /* the next tick tries again */ })
      .then(function () { busy = false; });
  }
  window.setInterval(tick, seconds * 1000);
})();
