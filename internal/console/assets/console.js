// auditchain console: enhancements only. Every page works without this file;
// with it, times read in the viewer's zone, the activity and approvals pages
// update live, expiries count down,
// and an event's inclusion proof is checked in the browser. No request
// leaves this origin; nothing is written into the page as HTML except rows
// this server rendered (html/template escaped them).
"use strict";

(function () {
  // Times: the viewer's zone, the UTC value kept in the title.
  function localTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (t) {
      var d = new Date(t.getAttribute("datetime"));
      if (!isNaN(d)) { t.textContent = d.toLocaleString(); }
    });
  }

  // Live activity: the stream (GET /v1/events/stream, with the session)
  // says something was appended; the first page's rows are fetched again,
  // at most once a second, through the same filter on the server.
  function liveActivity() {
    var live = document.getElementById("live");
    var rows = document.getElementById("rows");
    if (!live || !rows || !live.dataset.rows || !window.EventSource) { return; }
    var url = live.dataset.rows, pending = false, busy = false;
    function refresh() {
      if (busy) { pending = true; return; }
      // Never under a person's hands: a note being typed in a row (the
      // approvals panel) waits until the focus leaves the rows.
      if (rows.contains(document.activeElement) && document.activeElement !== rows) { setTimeout(refresh, 1000); return; }
      busy = true; pending = false;
      fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.text(); })
        .then(function (html) {
          var doc = new DOMParser().parseFromString("<table><tbody>" + html + "</tbody></table>", "text/html");
          var body = doc.querySelector("tbody");
          // What a person typed in the rows (an approval's note) survives.
          var typed = {};
          rows.querySelectorAll("input[id]").forEach(function (i) { if (i.value) { typed[i.id] = i.value; } });
          rows.replaceChildren.apply(rows, Array.prototype.slice.call(body.children));
          Object.keys(typed).forEach(function (id) { var i = document.getElementById(id); if (i && rows.contains(i)) { i.value = typed[id]; } });
          localTimes(rows);
          live.textContent = "Live: updated " + new Date().toLocaleTimeString() + ".";
        })
        .catch(function (e) { live.textContent = "Live updates paused (" + e.message + "); reload the page."; })
        .finally(function () { busy = false; if (pending) { setTimeout(refresh, 1000); } });
    }
    var timer = null;
    var es = new EventSource("/v1/events/stream");
    es.addEventListener("ready", function () { live.classList.add("on"); live.textContent = live.dataset.ready || "Live: new events appear here."; });
    es.addEventListener("event", function () { if (!timer) { timer = setTimeout(function () { timer = null; refresh(); }, 300); } });
    es.addEventListener("lagged", refresh);
    es.onerror = function () { live.classList.remove("on"); };
  }

  // Countdowns (the approvals panel): the time left until data-expires,
  // every second; the server wrote the first value.
  function countdowns() {
    function tick() {
      document.querySelectorAll(".countdown[data-expires]").forEach(function (el) {
        var left = Math.floor((new Date(el.dataset.expires) - Date.now()) / 1000);
        if (isNaN(left)) { return; }
        if (left <= 0) { el.textContent = "expired"; return; }
        var h = Math.floor(left / 3600), m = Math.floor(left % 3600 / 60), sec = left % 60;
        el.textContent = "in " + (h > 0 ? h + " h " + m + " min" : m > 0 ? m + " min " + sec + " s" : sec + " s");
      });
    }
    if (document.querySelector(".countdown")) { tick(); setInterval(tick, 1000); }
  }

  // Inclusion proof (RFC 6962 / RFC 9162 2.1.3.2) with WebCrypto SHA-256.
  function b64(s) { var bin = atob(s), out = new Uint8Array(bin.length); for (var i = 0; i < bin.length; i++) { out[i] = bin.charCodeAt(i); } return out; }
  function hex(s) { var out = new Uint8Array(s.length / 2); for (var i = 0; i < out.length; i++) { out[i] = parseInt(s.substr(2 * i, 2), 16); } return out; }
  function cat(prefix, a, b) { var out = new Uint8Array(1 + a.length + (b ? b.length : 0)); out[0] = prefix; out.set(a, 1); if (b) { out.set(b, 1 + a.length); } return out; }
  function sha(bytes) { return crypto.subtle.digest("SHA-256", bytes).then(function (d) { return new Uint8Array(d); }); }
  function same(a, b) { if (a.length !== b.length) { return false; } for (var i = 0; i < a.length; i++) { if (a[i] !== b[i]) { return false; } } return true; }

  async function verifyInclusion(index, size, leaf, path, root) {
    if (index >= size) { return "the leaf index is outside the tree"; }
    var fn = index, sn = size - 1n, r = leaf;
    for (var i = 0; i < path.length; i++) {
      if (sn === 0n) { return "the audit path is longer than the tree allows"; }
      if ((fn & 1n) === 1n || fn === sn) {
        r = await sha(cat(1, path[i], r));
        if ((fn & 1n) === 0n) { while ((fn & 1n) === 0n && fn !== 0n) { fn >>= 1n; sn >>= 1n; } }
      } else {
        r = await sha(cat(1, r, path[i]));
      }
      fn >>= 1n; sn >>= 1n;
    }
    if (sn !== 0n) { return "the audit path is shorter than the tree needs"; }
    return same(r, root) ? "" : "the path leads to another root than the checkpoint's";
  }

  async function checkProof() {
    var sec = document.getElementById("proof"), out = document.getElementById("proof-result");
    if (!sec || !out) { return; }
    if (!window.crypto || !crypto.subtle) { out.textContent = "Not checked: this browser has no WebCrypto here (it needs HTTPS or localhost)."; return; }
    try {
      var d = sec.dataset;
      var payload = d.payloadHash.replace(/^sha256:/, "");
      if (!/^[0-9a-f]{64}$/.test(payload)) { throw new Error("the payload_hash is not a SHA-256"); }
      var leaf = await sha(cat(0, hex(payload)));
      if (!same(leaf, b64(d.leafHash))) { throw new Error("the leaf hash is not SHA-256(0x00 || payload_hash)"); }
      var path = Array.prototype.map.call(sec.querySelectorAll(".path code"), function (c) { return b64(c.textContent.trim()); });
      var note = sec.querySelector(".note code");
      if (note) {
        var lines = note.textContent.split("\n");
        if (lines[1] !== d.treeSize || lines[2] !== d.rootHash) { throw new Error("the signed checkpoint states another size or root"); }
      }
      var why = await verifyInclusion(BigInt(d.leafIndex), BigInt(d.treeSize), leaf, path, b64(d.rootHash));
      if (why) { throw new Error(why); }
      out.classList.add("ok");
      out.textContent = "Verified in your browser: this event is leaf " + d.leafIndex + " of the tree of " + d.treeSize +
        " events whose root the checkpoint states (SHA-256, RFC 6962). The checkpoint's signature is checked by auditchain verify, offline.";
      out.dataset.verified = "true";
    } catch (e) {
      out.classList.add("bad");
      out.textContent = "Verification failed in your browser: " + e.message + ".";
      out.dataset.verified = "false";
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    localTimes(document);
    liveActivity();
    countdowns();
    checkProof();
  });
})();
