// twinscope report: runs before any other script. Records uncaught errors, rejected promises and
// console.error calls into #ts-errors, so a reader sees them and tests read them (data-count).
(function () {
  "use strict";
  var pending = [];
  function record(text) {
    var box = document.getElementById("ts-errors");
    if (!box) { pending.push(text); return; }
    var li = document.createElement("li");
    li.textContent = String(text);
    box.querySelector("ul").appendChild(li);
    box.hidden = false;
    box.setAttribute("data-count", String(Number(box.getAttribute("data-count") || 0) + 1));
  }
  window.tsRecordError = record;
  window.addEventListener("error", function (e) {
    record("error: " + (e.message || e) + (e.filename ? " (" + e.lineno + ":" + e.colno + ")" : ""));
  });
  window.addEventListener("unhandledrejection", function (e) { record("unhandled rejection: " + e.reason); });
  var original = console.error;
  console.error = function () {
    record("console.error: " + Array.prototype.map.call(arguments, String).join(" "));
    return original.apply(console, arguments);
  };
  document.addEventListener("DOMContentLoaded", function () { pending.splice(0).forEach(record); });
})();
