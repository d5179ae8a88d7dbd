// Countdowns to approval deadlines: the page works without this (it shows the deadline's time);
// with it, each deadline also shows the minutes and seconds left, and "denied" once past.
(function () {
  "use strict";
  function tick() {
    var now = Date.now();
    document.querySelectorAll("time[data-countdown]").forEach(function (el) {
      var left = Math.floor((Date.parse(el.getAttribute("datetime")) - now) / 1000);
      if (left <= 0) {
        el.textContent = el.getAttribute("data-expired");
        el.removeAttribute("data-countdown");
        return;
      }
      var minutes = Math.floor(left / 60), seconds = left % 60;
      el.textContent = minutes + ":" + (seconds < 10 ? "0" : "") + seconds;
    });
  }
  document.addEventListener("DOMContentLoaded", function () { tick(); setInterval(tick, 1000); });
})();
