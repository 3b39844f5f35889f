// Live approval queue: the websocket only says "something changed"; we then fetch the server-rendered
// list (escaped by Django) and swap it in. A countdown shows the time left on each held request.
(function () {
  const queue = document.getElementById("queue");
  const state = document.getElementById("live-state");
  if (!queue) return;
  function setState(name, text) { state.dataset.state = name; state.textContent = "Live updates: " + text; }
  let latest = 0;
  async function refresh() {
    const mine = ++latest;  // overlapping fetches: only the newest answer is shown
    const resp = await fetch(queue.dataset.listUrl, {credentials: "same-origin", cache: "no-store"});
    if (resp.redirected) { location.reload(); return; }  // signed out: let the page go to login
    if (!resp.ok) return;
    const html = await resp.text();
    if (mine !== latest) return;
    // Keep what an approver is typing: the list is replaced, their half-written comment is not lost.
    const drafts = {};
    let focused = null;
    for (const t of queue.querySelectorAll("textarea[data-approval-id]")) {
      drafts[t.dataset.approvalId] = t.value;
      if (document.activeElement === t) focused = t.dataset.approvalId;
    }
    queue.innerHTML = html;
    for (const t of queue.querySelectorAll("textarea[data-approval-id]")) {
      if (drafts[t.dataset.approvalId]) t.value = drafts[t.dataset.approvalId];
      if (focused === t.dataset.approvalId) t.focus();
    }
    settle();
    const count = queue.querySelector("#pending-count");
    notifyIfNew();
    document.getElementById("queue-announce").textContent = count ? count.dataset.count + " pending" : "";
    tick();
  }
  // A box decides when its requests come and go, so it can slide another card's button under a cursor
  // about to click. After the list changes, its buttons ignore clicks for a moment.
  const SETTLE_MS = 1000;
  function settle() {
    const buttons = queue.querySelectorAll(".decide button");
    buttons.forEach(function (b) { b.disabled = true; });
    setTimeout(function () {
      buttons.forEach(function (b) {
        if (!b.closest("article").querySelector("time[data-done]")) b.disabled = false;  // expired stay off
      });
    }, SETTLE_MS);
  }
  function connect() {
    const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + queue.dataset.wsPath);
    ws.onopen = function () { setState("open", "on"); refresh(); };
    ws.onmessage = refresh;
    ws.onclose = function (event) {
      if (event.code === 4403) { location.reload(); return; }  // no longer allowed: signed out or role gone
      setState("closed", "reconnecting…"); setTimeout(connect, 2000);
    };
  }
  // The pages' one way to write a length of time (controlplane.core.timefmt.duration_text): the two
  // largest units, the smaller left out when 0: "12 s", "4 min 58 s", "23 h 59 min", "3 d 2 h".
  function duration(seconds) {
    const parts = [[Math.floor(seconds / 86400), "d"], [Math.floor(seconds % 86400 / 3600), "h"],
                   [Math.floor(seconds % 3600 / 60), "min"], [seconds % 60, "s"]];
    const first = parts.findIndex(function (p) { return p[0] > 0; });
    if (first < 0) return "0 s";
    return parts.slice(first, first + 2).filter(function (p) { return p[0] > 0; })
      .map(function (p) { return p[0] + " " + p[1]; }).join(" ");
  }
  function tick() {
    const now = Date.now() / 1000;
    let expired = false;
    for (const el of queue.querySelectorAll("time[data-expires]")) {
      const left = Math.max(0, Math.round(Number(el.dataset.expires) - now));
      el.textContent = left > 0 ? duration(left) : "expired";
      if (left === 0 && !el.dataset.done) {
        el.dataset.done = "1";
        expired = true;
        el.closest("article").querySelectorAll("button").forEach(function (b) { b.disabled = true; });
      }
    }
    // The box's own wait (the gateway's hold) ends first; the card stays decidable after it. At zero the
    // countdown stops for good (data-stopped) and the list is fetched again, so the card says the box
    // stopped waiting; a card the gateway let go early comes without data-box-until at all.
    let boxStopped = false;
    for (const el of queue.querySelectorAll("time[data-box-until]:not([data-stopped])")) {
      const left = Math.max(0, Math.round(Number(el.dataset.boxUntil) - now));
      el.textContent = left > 0 ? duration(left) : "stopped waiting";
      if (left === 0) { el.dataset.stopped = "1"; boxStopped = true; }
    }
    if (expired || boxStopped) setTimeout(refresh, 1000);  // the server's list says what changed
  }
  // Opt-in browser notifications: only when this tab is in the background and a held request appeared
  // that this page has not shown before. They say how many wait, never what a box wrote.
  const seen = new Set(Array.from(queue.querySelectorAll("article.approval")).map(function (a) { return a.id; }));
  const toggle = document.getElementById("notify-toggle");
  const notifyState = document.getElementById("notify-state");
  const KEY = "roster-notify";
  function notifyOn() { return "Notification" in window && Notification.permission === "granted" && localStorage.getItem(KEY) === "1"; }
  function showNotifyState() {
    if (!("Notification" in window)) return;
    toggle.hidden = false;
    toggle.textContent = notifyOn() ? "Stop background notifications" : "Tell me about new requests while this tab is in the background";
    notifyState.textContent = notifyOn() ? "Background notifications are on." : "";
  }
  if (toggle) {
    toggle.addEventListener("click", async function () {
      if (notifyOn()) { localStorage.removeItem(KEY); showNotifyState(); return; }
      const answer = await Notification.requestPermission();
      if (answer === "granted") localStorage.setItem(KEY, "1");
      else notifyState.textContent = "The browser did not allow notifications.";
      showNotifyState();
    });
    showNotifyState();
  }
  function notifyIfNew() {
    const cards = Array.from(queue.querySelectorAll("article.approval"));
    const fresh = cards.filter(function (a) { return !seen.has(a.id); });
    cards.forEach(function (a) { seen.add(a.id); });
    if (!fresh.length || !document.hidden || !notifyOn()) return;
    const note = new Notification("Roster: " + cards.length + " held request" + (cards.length === 1 ? "" : "s") + " waiting",
                                  {body: fresh.length + " new since you looked", tag: "roster-queue"});
    note.onclick = function () { window.focus(); note.close(); };
  }
  setInterval(tick, 1000);
  tick();
  connect();
})();
