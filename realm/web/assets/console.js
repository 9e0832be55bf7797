// relay console: progressive enhancement only. Every page works without
// this file; with it, pages marked data-live follow /console/live and
// refresh their live regions (and every data-poll seconds besides, for
// what the stream does not hear), buttons marked data-confirm ask first,
// and buttons marked data-copy put their value on the clipboard.
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  // Copy: the clipboard where the browser allows it (a secure context),
  // else the text is selected for the operator to copy.
  function select(b) {
    var code = b.parentNode && b.parentNode.querySelector("code");
    if (!code) return;
    var r = document.createRange();
    r.selectNodeContents(code);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(r);
  }
  document.addEventListener("click", function (ev) {
    var b = ev.target.closest && ev.target.closest("button[data-copy]");
    if (!b) return;
    var said = function (text) {
      b.textContent = text;
      setTimeout(function () { b.textContent = "Copy"; }, 1500);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(b.getAttribute("data-copy")).then(
        function () { said("Copied"); },
        function () { select(b); said("Selected"); });
    } else {
      select(b);
      said("Selected");
    }
  });

  // A page restored from the back/forward cache is shown as it was left,
  // whatever Cache-Control says: one that held a secret shown once (a new
  // token's) is asked for again, and the node then says it is gone.
  window.addEventListener("pageshow", function (ev) {
    if (ev.persisted && document.querySelector("[data-once]")) window.location.reload();
  });

  // Ask before destructive actions.
  document.addEventListener("submit", function (ev) {
    var b = ev.submitter;
    var msg = (b && b.getAttribute("data-confirm")) || ev.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) ev.preventDefault();
  });

  // A refused post keeps what was typed: the text of a form's body is kept
  // for the next page that has the form, and put back there unless the
  // node took it (the page then says so, naming the form's operation):
  // after a refusal, after a login when the session had ended, or after
  // another action on a page that had lost the form meanwhile.
  function draftKey(f) { return "relay-draft " + f.getAttribute("action") + " " + location.pathname; }
  document.addEventListener("submit", function (ev) {
    var ta = ev.target.querySelector && ev.target.querySelector("textarea[name=body]");
    if (ev.defaultPrevented || !ta || !window.sessionStorage) return;
    try { sessionStorage.setItem(draftKey(ev.target), ta.value); } catch (e) { /* storage full or off */ }
  });
  if (window.sessionStorage) {
    var done = document.querySelector(".flash.ok[data-op]");
    document.querySelectorAll("form").forEach(function (f) {
      var ta = f.querySelector("textarea[name=body]");
      if (!ta) return;
      var k = draftKey(f), kept = null, op = (f.getAttribute("action") || "").split("/").pop();
      try { kept = sessionStorage.getItem(k); } catch (e) { return; }
      if (kept === null) return;
      if (done && done.getAttribute("data-op") === op) {
        try { sessionStorage.removeItem(k); } catch (e) { /* off */ }
      } else if (!ta.value) {
        ta.value = kept;
        f.setAttribute("data-dirty", "1");
        try { sessionStorage.removeItem(k); } catch (e) { /* off */ }
      }
    });
  }

  var src = document.body.getAttribute("data-live");
  if (!src || !window.EventSource || !window.fetch || !window.DOMParser) return;
  var dot = document.getElementById("livestate");

  // busy: the operator is working in a form of a live region (typing in
  // it, or it has been edited); replacing the form would lose their input.
  function busy(form) {
    var a = document.activeElement;
    if (a && form.contains(a) && /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName)) return true;
    return form.hasAttribute("data-dirty");
  }
  document.addEventListener("input", function (ev) {
    var f = ev.target.form;
    if (f) f.setAttribute("data-dirty", "1");
  });

  // formKey names a form by what it acts on: its action and the record its
  // hidden fields name, and how many forms before it in the region share
  // both. The same form in a fresh copy of the region has the same key.
  function formKeys(region) {
    var seen = {}, keys = new Map();
    region.querySelectorAll("form").forEach(function (f) {
      var k = f.getAttribute("action") || "";
      f.querySelectorAll("input[type=hidden]:not([name=csrf])").forEach(function (h) {
        k += "\u0000" + h.name + "=" + h.value;
      });
      seen[k] = (seen[k] || 0) + 1;
      keys.set(f, k + "\u0000" + seen[k]);
    });
    return keys;
  }

  // update replaces a live region with its fresh copy, keeping in place
  // every form the operator is busy with, and the focus and caret in it.
  // A busy form the fresh copy no longer has keeps the region as it is.
  function update(el, fresh) {
    var kept = [];
    var mine = formKeys(el);
    mine.forEach(function (k, f) { if (busy(f)) kept.push([f, k]); });
    if (kept.length) {
      var theirs = new Map();
      formKeys(fresh).forEach(function (k, f) { theirs.set(k, f); });
      if (!kept.every(function (p) { return theirs.has(p[1]); })) {
        // What the operator is writing in is gone from the fresh page (a
        // thread closed meanwhile, say): the page stays as it is, so the
        // text stays, and says that it has changed.
        if (!el.querySelector(".stale")) {
          var note = document.createElement("div");
          note.className = "flash err stale";
          note.setAttribute("role", "alert");
          note.innerHTML = "<span>This page has changed since you began writing here: what you are writing may no longer apply. Copy your text, then <a href=\"\">reload the page</a>.</span>";
          el.insertBefore(note, el.firstChild);
        }
        return;
      }
      var a = document.activeElement, caret = null;
      if (a && el.contains(a)) {
        try { caret = [a.selectionStart, a.selectionEnd, a.selectionDirection]; } catch (e) { caret = null; }
      } else {
        a = null;
      }
      kept.forEach(function (p) { theirs.get(p[1]).replaceWith(p[0]); });
      el.replaceWith(fresh);
      if (a && document.contains(a)) {
        a.focus({ preventScroll: true });
        if (caret && caret[0] != null) {
          try { a.setSelectionRange(caret[0], caret[1], caret[2]); } catch (e) { /* not a text field */ }
        }
      }
      return;
    }
    el.replaceWith(fresh);
  }

  var pending = false, running = false;
  function refresh() {
    if (running) { pending = true; return; }
    running = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) {
        if (r.redirected) { loggedOut(); throw new Error("logged out"); }
        if (!r.ok) throw new Error("status " + r.status);
        return r.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-live][id]").forEach(function (el) {
          var fresh = doc.getElementById(el.id);
          if (fresh) update(el, document.importNode(fresh, true));
        });
        document.body.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () { /* the next change, or a reload, tries again */ })
      .then(function () {
        running = false;
        if (pending) { pending = false; refresh(); }
      });
  }

  var every = parseInt(document.body.getAttribute("data-poll") || "0", 10);
  if (every > 0) {
    setInterval(function () { if (document.visibilityState === "visible") refresh(); }, every * 1000);
  }

  var es = new EventSource(src);
  // loggedOut: the session is over; the page says so and stops listening.
  function loggedOut() {
    es.close();
    if (dot) { dot.classList.remove("on"); dot.textContent = "logged out: reload to log in"; }
  }
  es.addEventListener("open", function () { if (dot) { dot.classList.add("on"); dot.textContent = "live"; } });
  es.addEventListener("error", function () { if (dot && es.readyState !== EventSource.CLOSED) { dot.classList.remove("on"); dot.textContent = "reconnecting"; } });
  es.addEventListener("change", refresh);
  es.addEventListener("ended", loggedOut);
})();
