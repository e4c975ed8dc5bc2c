"""A virtual clock injected into every page: episodes never depend on wall-clock time.

MiniWoB++ tasks read the time (``new Date()``), schedule work (``setTimeout``, jQuery and d3
animations, the episode timer) and draw random numbers at load time. The init script below
runs before any page script and replaces all of it with deterministic stand-ins:

* ``Date``, ``Date.now`` and ``performance.now`` read a virtual time that starts at a fixed
  instant (:data:`EPOCH_MS`) and moves only when the harness calls ``__hgClock.advance(ms)``;
* ``setTimeout``, ``setInterval``, ``requestAnimationFrame`` and ``requestIdleCallback`` queue
  callbacks on that virtual time; ``advance`` runs the due ones in (time, id) order;
* ``Math.random`` is a fixed-seed generator until the episode calls ``Math.seedrandom(seed)``
  (MiniWoB's own seeding), so anything drawn at load time is the same on every load;
* CSS animations and transitions jump to their end state, and no text caret blinks (none is
  drawn: a capture never depends on the blink's phase).

So an episode's observations are a pure function of the task, the seed and the actions.
"""

from __future__ import annotations

#: The virtual wall-clock instant every page starts at (2017-01-01T00:00:00Z, in ms).
EPOCH_MS = 1_483_228_800_000

#: Virtual milliseconds run after every action (animations, delayed widgets, debounced
#: autocomplete searches settle within it).
SETTLE_MS = 1_000

#: Virtual milliseconds a reused document's restart runs the previous episode's queued work
#: for (animations end, one-shot timers fire) before the queue is put back as a fresh load has it.
DRAIN_MS = 60_000

INIT_SCRIPT = """
(() => {
  if (window.__hgClock) return;
  const EPOCH = __EPOCH__;
  let now = EPOCH;
  // Fixed-seed generator for code that runs before the episode seeds Math.seedrandom.
  let state = 0x2545f491;
  Math.random = function () {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const RealDate = Date;
  function FakeDate(...args) {
    if (!(this instanceof FakeDate)) return new RealDate(now).toString();
    return args.length ? new RealDate(...args) : new RealDate(now);
  }
  FakeDate.prototype = RealDate.prototype;
  FakeDate.now = () => now;
  FakeDate.parse = RealDate.parse;
  FakeDate.UTC = RealDate.UTC;
  window.Date = FakeDate;
  try {
    Object.defineProperty(performance, 'now', {value: () => now - EPOCH, configurable: true});
  } catch (e) {}
  window.__hgRealSetTimeout = window.setTimeout.bind(window);
  const timers = new Map();
  let nextId = 1;
  const errors = [];
  function add(fn, delay, args, repeat) {
    const id = nextId++;
    const ms = Math.max(0, Number(delay) || 0);
    timers.set(id, {id, fn, args, at: now + ms, every: repeat ? Math.max(1, ms) : 0});
    return id;
  }
  function cancel(id) { timers.delete(id); }
  window.setTimeout = (fn, delay, ...args) => add(fn, delay, args, false);
  window.setInterval = (fn, delay, ...args) => add(fn, delay, args, true);
  window.clearTimeout = cancel;
  window.clearInterval = cancel;
  window.requestAnimationFrame = (fn) => add(() => fn(now - EPOCH), 16, [], false);
  window.cancelAnimationFrame = cancel;
  const idle = {didTimeout: false, timeRemaining: () => 50};
  window.requestIdleCallback = (fn) => add(() => fn(idle), 1, [], false);
  window.cancelIdleCallback = cancel;
  function advance(ms) {
    const end = now + Math.max(0, ms);
    for (let n = 0; n < 100000; n++) {
      let due = null;
      for (const t of timers.values()) {
        if (t.at <= end && (due === null || t.at < due.at || (t.at === due.at && t.id < due.id))) due = t;
      }
      if (due === null) break;
      if (due.at > now) now = due.at;
      if (due.every) due.at += due.every; else timers.delete(due.id);
      try {
        if (typeof due.fn === 'function') due.fn.apply(window, due.args);
        else (0, eval)(String(due.fn));
      } catch (e) {
        errors.push(String(e && e.message || e));
      }
    }
    now = end;
    return now - EPOCH;
  }
  // What a fresh document has queued when its first episode starts (timers its load set),
  // recorded by ``mark`` at that start, for ``restart``.
  let marked = null;
  function mark() {
    if (marked === null) marked = {nextId, at: now, timers: Array.from(timers.values(), (t) => ({...t}))};
  }
  // A new episode in the same document (``reuse_page``): the previous episode's queued work run
  // to its end first (within DRAIN_MS virtual ms, so an animation library whose frame loop is
  // on the queue sees its animations finish, as it would have, and starts its loop again the
  // next time), then back to what the fresh document had: the first instant, the timers its
  // load queued (the same callbacks, ids and due times), the same next timer id.
  function restart() {
    if (timers.size) advance(DRAIN_MS);
    timers.clear();
    errors.length = 0;
    if (marked !== null) {
      for (const t of marked.timers) timers.set(t.id, {...t});
      nextId = marked.nextId;
      now = marked.at;
    } else {
      now = EPOCH;
    }
  }
  // Queued timers in the order they will run, as [due (virtual ms), interval] (the reuse tests'
  // comparison; ids are left out: no page sees them, and only their order matters).
  const schedule = () => Array.from(timers.values()).sort((a, b) => a.at - b.at || a.id - b.id)
    .map((t) => [t.at - EPOCH, t.every]);
  window.__hgClock = {advance, mark, restart, schedule, pending: () => timers.size, errors,
                      now: () => now - EPOCH};
  // No CSS motion, and no blinking text caret (its phase is wall-clock time): a capture shows
  // what the virtual clock says, and needs nothing changed in the page first (Playwright's
  // caret hiding writes a style attribute on every text field, see BrowserSession.screenshot).
  const css = '*, *::before, *::after { animation-duration: 0s !important; ' +
    'animation-delay: 0s !important; transition-duration: 0s !important; transition-delay: 0s !important; ' +
    'caret-color: transparent !important; }';
  document.addEventListener('DOMContentLoaded', () => {
    const style = document.createElement('style');
    style.setAttribute('data-hg', 'clock');
    style.textContent = css;
    (document.head || document.documentElement).appendChild(style);
  });
})();
""".replace("__EPOCH__", str(EPOCH_MS)).replace("DRAIN_MS", str(DRAIN_MS))
