"""Fields from the live DOM, and the page-side half of every canonical action.

:data:`PAGE_SCRIPT` runs in every document before any page script (an init script) and
defines the page-side functions as ``window.__hgPage``; a call names one, so only a few bytes
cross the wire per call, and Chromium compiles the functions once per renderer process, not
once per call. ``__hgPage.observe`` (also the tail of every action that changes the page) is
the one round trip per observation: it optionally runs the virtual clock forward, then
returns, as JSON text (far cheaper to pass through the driver than a tree of values), the
instruction, the title, the visible element tree, MiniWoB's episode globals (done, reward)
and, off the record and only when asked (``"cdp"`` clicks), the point of every element where
a click hits it. Elements get small integer refs in document order the first time they are
seen (kept in a ``WeakMap``, so the task's own DOM is not touched) and keep them for the
episode. Hidden elements (``display: none``, ``visibility: hidden``, ``opacity: 0`` or zero
size) are left out, as in the pure-Python web suite.

Each element is a dict shaped like the web suite's page elements: ``ref``, ``tag`` (lower
case), ``text`` (its own text), ``value`` (inputs, text areas, drop-down lists), ``checked``
(check boxes, radio buttons), ``options`` (drop-down lists), ``focused`` (the element
that has the keyboard focus), ``scrolled`` (``top``, ``middle`` or ``bottom``, for a box whose
content overflows it), a few attributes (``id``, ``class``, ``type``, ``name``,
``placeholder``, ``for``, ``title``, ...; SVG shapes also ``fill``, ``stroke`` and their
geometry: ``r``, ``width``, ``height``, ``font-size``, ``points``) and ``children``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

#: Input types that take typed text.
TEXT_INPUT_TYPES = frozenset(
    {"text", "password", "email", "number", "search", "tel", "url"}
    | {"date", "time", "datetime-local", "month", "week"}
)

#: The page-side functions, as ``window.__hgPage`` (top-level documents only):
#:
#: * ``restart(args)``: ``start`` again in the same document (clock back to its first instant, no
#:   timer pending, new refs; MiniWoB's bookkeeping, jQuery UI's ids, autocompletes and date
#:   pickers put back as a fresh document has them), for ``reuse_page``;
#: * ``start(args)``: the episode start: ``Math.seedrandom(args.seed)``, MiniWoB's
#:   ``core.startEpisodeReal()`` with the task timer cancelled, then the observation (JSON,
#:   with ``html``, the body's markup without MiniWoB's overlay, for the state digest);
#: * ``observe(settle, withPoints)``: the observation (JSON);
#: * ``click(ref, settle)``: a left click on an element, then the observation (JSON), or null
#:   when the element is gone. The events are those a mouse press at the element's hit point
#:   sends (the pointer entering the element under it, move, down, focus unless the press was
#:   cancelled, up, click), dispatched at that point's topmost element;
#: * ``point(ref)``: scroll an element into view and return a point where a click hits it
#:   (its centre if nothing does), or null when the element is gone;
#: * ``focus(ref)``: focus an input and select its content, so typing replaces it; whether it
#:   exists;
#: * ``type(ref, text, settle, withPoints)``: ``focus``, then ``text`` entered from inside the
#:   page (all but the last character as one ``insertText`` edit, the last as a key press:
#:   ``keydown``, ``keypress``, ``input``, ``keyup``, with a real press's key codes), then the
#:   observation (JSON), or null when the element is gone;
#: * ``select(ref, option, settle, withPoints)``: choose the option of a drop-down list whose
#:   text matches, firing input and change, then the observation (JSON).
PAGE_SCRIPT = r"""
(() => {
  if (window.__hgPage || window !== window.top) return;
  const SKIP_IDS = new Set(['reward-display', 'sync-task-cover', 'click-canvas', 'attention-canvas',
                            'query']);
  const SKIP_TAGS = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'BR', 'LINK', 'META', 'OPTION',
                             'OPTGROUP', 'DATALIST', 'HEAD', 'TITLE']);
  const ATTRS = ['id', 'class', 'type', 'name', 'placeholder', 'for', 'title', 'role', 'alt', 'aria-label',
                 'aria-expanded', 'aria-selected', 'aria-checked', 'disabled', 'readonly', 'contenteditable'];
  // Colour and geometry of SVG shapes (a shape's size is in r, width/height, font-size or points).
  const SVG_ATTRS = ['fill', 'stroke', 'r', 'width', 'height', 'font-size', 'points'];
  const FRACTIONS = [0.5, 0.25, 0.75, 0.1, 0.9];
  const norm = (s) => (s || '').replace(/\s+/g, ' ').trim();
  const hg = {refOf: new WeakMap(), byRef: new Map(), next: 1, hover: null, uid: 0, uidStart: undefined};

  function shown(el) {
    if (!el.checkVisibility) return true;
    return el.checkVisibility({opacityProperty: true, visibilityProperty: true});
  }
  // Where a click lands on this element: the first point of a 5x5 grid over it (centre
  // first) where the element itself is hit, not something covering or clipping it.
  function hitPoint(el, rect) {
    for (const fy of FRACTIONS) {
      for (const fx of FRACTIONS) {
        const x = rect.left + rect.width * fx, y = rect.top + rect.height * fy;
        if (x < 0 || y < 0 || x >= window.innerWidth || y >= window.innerHeight) continue;
        const hit = document.elementFromPoint(x, y);
        if (hit === el || (hit !== null && el.contains(hit))) return [x, y];
      }
    }
    return null;
  }
  function refOf(el) {
    let ref = hg.refOf.get(el);
    if (ref === undefined) { ref = hg.next++; hg.refOf.set(el, ref); }
    hg.byRef.set(ref, el);
    return ref;
  }
  function element(ref) {
    const el = hg.byRef.get(ref);
    return el && el.isConnected ? el : null;
  }

  function observe(settle, withPoints) {
    if (settle > 0 && window.__hgClock) window.__hgClock.advance(settle);
    hg.byRef = new Map();
    const points = [];
    function visit(el, out) {
      if (SKIP_TAGS.has(el.tagName) || SKIP_IDS.has(el.id) || !shown(el)) return;
      const rect = el.getBoundingClientRect();
      if (rect.width === 0 || rect.height === 0) {
        for (const child of el.children) visit(child, out);
        return;
      }
      const tag = el.tagName.toLowerCase();
      const node = {ref: refOf(el), tag: tag};
      if (withPoints) {
        const point = hitPoint(el, rect);
        if (point) points.push([node.ref, point[0], point[1]]);
      }
      const kids = [];
      for (const child of el.children) visit(child, kids);
      let text = '';
      if (el.children.length === 0) text = norm(el.textContent);
      else {
        const parts = [];
        for (const child of el.childNodes) if (child.nodeType === 3) parts.push(child.data);
        text = norm(parts.join(' '));
      }
      if (tag === 'textarea' || tag === 'select') text = '';
      if (text) node.text = text;
      if (tag === 'input') {
        const type = (el.type || 'text').toLowerCase();
        if (type === 'checkbox' || type === 'radio') node.checked = el.checked;
        else if (type !== 'button' && type !== 'submit' && type !== 'reset') node.value = el.value;
        else if (el.value) node.text = el.value;
      } else if (tag === 'textarea') node.value = el.value;
      else if (tag === 'select') {
        node.options = Array.from(el.options).map((o) => norm(o.textContent));
        node.value = el.selectedIndex >= 0 ? norm(el.options[el.selectedIndex].textContent) : '';
      }
      const names = el instanceof SVGElement ? ATTRS.concat(SVG_ATTRS) : ATTRS;
      for (const name of names) {
        if (!el.hasAttribute(name)) continue;
        let value = el.getAttribute(name);
        if (name === 'class') value = norm(value);
        if (name === 'disabled' || name === 'readonly') value = 'true';
        if (value !== '' && value !== null) node[name] = value;
      }
      if (el === document.activeElement) node.focused = true;
      // What a scroll bar shows: where a scrolled box stands (only boxes whose content overflows).
      if (el.scrollHeight > el.clientHeight + 1 && el.clientHeight > 0 && (tag === 'textarea' ||
          ['auto', 'scroll'].includes(getComputedStyle(el).overflowY))) {
        const top = el.scrollTop, end = el.scrollHeight - el.clientHeight;
        node.scrolled = top <= 1 ? 'top' : top >= end - 1 ? 'bottom' : 'middle';
      }
      if (kids.length) node.children = kids;
      out.push(node);
    }
    const page = [];
    const wrap = document.getElementById('wrap');
    for (const el of document.body.children) {
      if (el === wrap) { for (const child of wrap.children) visit(child, page); }
      else visit(el, page);
    }
    let utterance = '';
    try {
      const u = core.getUtterance();
      utterance = typeof u === 'string' ? u : (u && u.utterance) || '';
    } catch (e) {
      const q = document.getElementById('query');
      utterance = q ? norm(q.textContent) : '';
    }
    const reason = window.WOB_REWARD_REASON;
    return {
      instruction: norm(utterance),
      title: norm(document.title),
      page: page,
      done: !!window.WOB_DONE_GLOBAL,
      reward: Number(window.WOB_REWARD_GLOBAL) || 0,
      raw_reward: Number(window.WOB_RAW_REWARD_GLOBAL) || 0,
      reason: reason === null || reason === undefined ? null : String(reason),
      clock_ms: window.__hgClock ? window.__hgClock.now() : null,
      points: points,
    };
  }

  // jQuery UI's stock ``uniqueId`` (ids ui-id-1, ui-id-2, ... from a private counter) replaced,
  // at the first episode start of a document, by one whose counter a restart can put back (the
  // next id is the one the stock counter would have given).
  function resettableIds() {
    const $ = window.jQuery;
    if (!$ || !$.fn || typeof $.fn.uniqueId !== 'function' || $.resetUniqueId) return;
    const probe = document.createElement('div');
    $(probe).uniqueId();
    const next = parseInt(probe.id.replace('ui-id-', ''), 10);
    if (!(next > 0)) return;
    hg.uid = next - 1;
    $.fn.uniqueId = function () {
      return this.each(function () { if (!this.id) this.id = 'ui-id-' + (++hg.uid); });
    };
  }

  // What jQuery UI's autocompletes keep from an episode, put back as they are when created:
  // the menu empty and hidden, the screen reader's live region empty, no term searched.
  function resetAutocompletes() {
    const $ = window.jQuery;
    if (!$ || !$.ui || !$.ui.autocomplete) return;
    $('.ui-autocomplete-input').each(function () {
      const widget = $(this).autocomplete('instance');
      if (!widget) return;
      if (widget.searching) clearTimeout(widget.searching);
      widget.menu.element.empty().attr('style', 'display: none;');
      widget.menu.active = null;
      widget.liveRegion.empty();
      widget.term = widget.previous = widget.selectedItem = undefined;
      widget.pending = 0;
      widget.cancelSearch = widget.cancelBlur = false;
      widget.element.removeClass('ui-autocomplete-loading');
    });
  }

  // What jQuery UI's date pickers keep from an episode, put back as they are when attached:
  // the shared calendar div empty and unstyled, nothing shown, no date drawn or chosen.
  function resetDatepickers() {
    const $ = window.jQuery;
    if (!$ || !$.datepicker || !$.datepicker.dpDiv) return;
    const dp = $.datepicker;
    $('.hasDatepicker').each(function () {
      const inst = $.data(this, 'datepicker');
      if (!inst || inst.inline) return;
      inst.selectedDay = inst.selectedMonth = inst.selectedYear = 0;
      inst.drawMonth = inst.drawYear = 0;
      for (const key of ['currentDay', 'currentMonth', 'currentYear', 'lastVal', 'yearshtml', 'rangeStart',
                         'stayOpen', 'endDay', 'endMonth', 'endYear']) delete inst[key];
    });
    dp.dpDiv.stop(true, true).empty().removeAttr('style');
    dp._curInst = null; dp._lastInput = null; dp._datepickerShowing = false; dp._inDialog = false;
    dp._keyEvent = false; dp._pos = null;
  }

  // The document as its load left it, recorded at its first episode start (before MiniWoB's
  // startEpisodeReal), so that a restart puts back exactly that: every node's attributes, child
  // list and text (the same node objects, so references the task's scripts hold stay valid),
  // every form control's value and checkedness as a fresh parse has them (a control edited by
  // the user or a script no longer follows its markup: a text area whose text changes keeps
  // showing the typed value, so it is reset, not only re-parented), and every element's scroll.
  const CONTROLS = 'input, textarea, select';
  let loaded = null;
  function recordLoad() {
    const nodes = [];
    const walker = document.createTreeWalker(document.documentElement, NodeFilter.SHOW_ALL);
    for (let n = walker.currentNode; n; n = walker.nextNode()) {
      if (n.nodeType === 1) {
        const attrs = Array.from(n.attributes, (a) => [a.namespaceURI, a.name, a.localName, a.value]);
        nodes.push({node: n, attrs, kids: Array.from(n.childNodes), top: n.scrollTop, left: n.scrollLeft});
      } else if ('data' in n) {
        nodes.push({node: n, data: n.data});
      }
    }
    const controls = Array.from(document.querySelectorAll(CONTROLS), (el) => ({
      el, value: el.value, checked: el.checked, indeterminate: el.indeterminate,
      selected: el.tagName === 'SELECT' ? Array.from(el.options, (o) => o.selected) : null,
    }));
    loaded = {nodes, controls, jq: new Map()};
    for (const rec of nodes) if (rec.kids !== undefined) loaded.jq.set(rec.node, jqueryState(rec.node));
  }
  // What jQuery keeps on an element: its data keys (jQuery UI's widget instances among them),
  // its private keys (cached display values, animation queues, ...) and its event handlers.
  function jqueryState(el) {
    const $ = window.jQuery;
    if (!$ || !$.hasData || !$._data || !$.hasData(el)) return null;
    const priv = $._data(el);
    const events = {};
    for (const [type, list] of Object.entries(priv.events || {})) events[type] = list.slice();
    return {data: Object.keys($.data(el)), priv: Object.keys(priv), events};
  }
  // jQuery's state on the elements of the load put back as the load left it: the widgets an
  // episode made on them destroyed (their own destroy forgets them and puts their markup back,
  // so the next episode's script makes them anew, as on a fresh document, instead of finding
  // them made and leaving them as they are), the data and private keys added since deleted,
  // the event handlers added since removed.
  function restoreJquery() {
    const $ = window.jQuery;
    if (!$ || !$.hasData || !$._data) return;
    for (const [el, had] of loaded.jq) {
      if (!$.hasData(el)) continue;
      const data = $.data(el), keep = had ? had.data : [];
      for (const key of Object.keys(data)) {
        if (keep.includes(key)) continue;
        const value = data[key];
        if (value && value.widgetFullName === key && typeof value.destroy === 'function') {
          try { value.destroy(); } catch (e) {}
        }
        $.removeData(el, key);
      }
      const priv = $._data(el), events = (had && had.events) || {};
      for (const [type, list] of Object.entries(priv.events || {})) {
        for (const handle of list.slice()) {
          if (!(events[type] || []).includes(handle)) {
            const name = type + (handle.namespace ? '.' + handle.namespace : '');
            $.event.remove(el, name, handle.handler, handle.selector);
          }
        }
      }
      const privKeep = had ? had.priv : [];
      for (const key of Object.keys($._data(el))) {
        if (!privKeep.includes(key) && key !== 'events' && key !== 'handle') $._removeData(el, key);
      }
    }
  }
  function restoreLoad() {
    if (loaded === null) return;
    restoreJquery();
    // Form controls first: each is reset (its dirty flags cleared, as a fresh parse has them)
    // by its form's reset, a control without a form inside a detached form made for it; the
    // tree below then puts every node back where it was.
    const spare = document.createElement('form');
    for (const {el} of loaded.controls) if (!el.form) spare.appendChild(el);
    const forms = new Set(loaded.controls.map(({el}) => el.form));
    for (const form of forms) if (form) HTMLFormElement.prototype.reset.call(form);
    for (const rec of loaded.nodes) {
      const n = rec.node;
      if (rec.kids === undefined) { if (n.data !== rec.data) n.data = rec.data; continue; }
      for (const a of Array.from(n.attributes)) {
        const kept = rec.attrs.some(([ns, name]) => ns === a.namespaceURI && name === a.name);
        if (!kept) n.removeAttributeNode(a);
      }
      for (const [ns, name, local, value] of rec.attrs) {
        if (n.getAttributeNS(ns, local) !== value) n.setAttributeNS(ns, name, value);
      }
      const kids = n.childNodes;
      const same = kids.length === rec.kids.length && rec.kids.every((k, i) => kids[i] === k);
      if (!same) n.replaceChildren(...rec.kids);
    }
    for (const c of loaded.controls) {  // what the load's scripts set apart from the markup
      const el = c.el;
      if (el.value !== c.value) el.value = c.value;
      if ('checked' in el && el.checked !== c.checked) el.checked = c.checked;
      if ('indeterminate' in el) el.indeterminate = c.indeterminate;
      if (c.selected) c.selected.forEach((on, i) => { if (el.options[i]) el.options[i].selected = on; });
    }
    for (const rec of loaded.nodes) {
      if (rec.kids === undefined) continue;
      if (rec.node.scrollTop !== rec.top) rec.node.scrollTop = rec.top;
      if (rec.node.scrollLeft !== rec.left) rec.node.scrollLeft = rec.left;
    }
  }

  function start(args) {
    if (loaded === null) {
      recordLoad();
      if (window.__hgClock) window.__hgClock.mark();
    }
    Math.seedrandom(args.seed);
    core.setDataMode(args.mode);
    if (!core.cover_div) core.startEpisode();
    if (hg.uidStart === undefined) { resettableIds(); hg.uidStart = hg.uid; }
    core.startEpisodeReal();
    if (core.EP_TIMER !== null) { clearTimeout(core.EP_TIMER); core.EP_TIMER = -1; }
    clearInterval(core.CD_TIMER);
    const obs = observe(args.settle, args.points);
    // The markup for the state digest, without MiniWoB's overlay (the last reward and the
    // episode counter it shows differ between a fresh document and a reused one).
    const body = document.body.cloneNode(true);
    for (const id of ['reward-display', 'sync-task-cover']) {
      const el = body.querySelector('#' + id);
      if (el) el.remove();
    }
    obs.html = body.innerHTML;
    return JSON.stringify(obs);
  }

  function click(ref, settle) {
    const el = element(ref);
    if (!el) return null;
    let rect = el.getBoundingClientRect();
    let point = hitPoint(el, rect);
    if (point === null) {
      el.scrollIntoView({block: 'center', inline: 'center'});
      rect = el.getBoundingClientRect();
      point = hitPoint(el, rect) || [rect.left + rect.width / 2, rect.top + rect.height / 2];
    }
    const [x, y] = point;
    const target = document.elementFromPoint(x, y) || el;
    const base = {bubbles: true, cancelable: true, composed: true, view: window, clientX: x, clientY: y,
                  screenX: x, screenY: y, button: 0};
    const mouse = (type, extra) => target.dispatchEvent(new MouseEvent(type, Object.assign({}, base, extra)));
    const pointer = (type, extra) => target.dispatchEvent(new PointerEvent(type, Object.assign(
      {pointerId: 1, pointerType: 'mouse', isPrimary: true}, base, extra)));
    if (hg.hover !== target) {
      const old = hg.hover && hg.hover.isConnected ? hg.hover : null;
      if (old) {
        old.dispatchEvent(new PointerEvent('pointerout', Object.assign({pointerType: 'mouse'}, base)));
        old.dispatchEvent(new MouseEvent('mouseout', Object.assign({relatedTarget: target}, base)));
        for (let n = old; n && !n.contains(target); n = n.parentElement) {
          n.dispatchEvent(new MouseEvent('mouseleave', Object.assign({}, base, {bubbles: false})));
        }
      }
      pointer('pointerover', {});
      mouse('mouseover', {relatedTarget: old});
      const entered = [];
      for (let n = target; n && !(old && n.contains(old)); n = n.parentElement) entered.unshift(n);
      for (const n of entered) {
        const quiet = Object.assign({}, base, {bubbles: false});
        n.dispatchEvent(new PointerEvent('pointerenter', Object.assign({pointerType: 'mouse'}, quiet)));
        n.dispatchEvent(new MouseEvent('mouseenter', quiet));
      }
      hg.hover = target;
    }
    pointer('pointermove', {});
    mouse('mousemove', {});
    pointer('pointerdown', {buttons: 1});
    if (mouse('mousedown', {buttons: 1, detail: 1})) {
      const focusable = target.closest('a[href], button, input, select, textarea, summary, [tabindex], ' +
        '[contenteditable=""], [contenteditable="true"]');
      if (focusable && !focusable.disabled) focusable.focus();
      else if (document.activeElement && document.activeElement !== document.body) {
        document.activeElement.blur();
      }
    }
    pointer('pointerup', {});
    mouse('mouseup', {detail: 1});
    mouse('click', {detail: 1});
    return JSON.stringify(observe(settle, false));
  }

  function point(ref) {
    const el = element(ref);
    if (!el) return null;
    el.scrollIntoView({block: 'center', inline: 'center'});
    const r = el.getBoundingClientRect();
    return hitPoint(el, r) || [r.left + r.width / 2, r.top + r.height / 2];
  }

  function focus(ref) {
    const el = element(ref);
    if (!el) return false;
    el.scrollIntoView({block: 'nearest', inline: 'nearest'});
    el.focus();
    try { el.select(); } catch (e) {}
    if (el.isContentEditable) {
      const range = document.createRange();
      range.selectNodeContents(el);
      const sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
    }
    return true;
  }

  // keyCode of a printable character on a US keyboard (keydown and keyup), and its code.
  const SYMBOL_KEYS = {' ': [32, 'Space'], ';': [186, 'Semicolon'], '=': [187, 'Equal'],
                       ',': [188, 'Comma'], '-': [189, 'Minus'], '.': [190, 'Period'], '/': [191, 'Slash'],
                       '`': [192, 'Backquote'], '[': [219, 'BracketLeft'], '\\': [220, 'Backslash'],
                       ']': [221, 'BracketRight'], "'": [222, 'Quote']};
  const SHIFTED = {')': '0', '!': '1', '@': '2', '#': '3', '$': '4', '%': '5', '^': '6', '&': '7', '*': '8',
                   '(': '9', ':': ';', '+': '=', '<': ',', '_': '-', '>': '.', '?': '/', '~': '`', '{': '[',
                   '|': '\\', '}': ']', '"': "'"};
  function keyOf(ch) {
    const base = SHIFTED[ch] || ch;
    const upper = base.toUpperCase();
    let keyCode = 0, code = '';
    if (/^[A-Z]$/.test(upper)) { keyCode = upper.charCodeAt(0); code = 'Key' + upper; }
    else if (/^[0-9]$/.test(base)) { keyCode = base.charCodeAt(0); code = 'Digit' + base; }
    else if (SYMBOL_KEYS[base]) [keyCode, code] = SYMBOL_KEYS[base];
    return {keyCode, code, shift: ch in SHIFTED || (ch !== base.toLowerCase() && /^[A-Z]$/.test(ch))};
  }
  // One key press of a character at the focused element, as a keyboard's: keydown, keypress,
  // the character inserted (unless either was cancelled), keyup; keyCode, which and charCode as
  // a real key press has them.
  function pressChar(ch) {
    const target = document.activeElement || document.body;
    const k = keyOf(ch), charCode = ch.codePointAt(0);
    const init = {key: ch, code: k.code, shiftKey: k.shift, bubbles: true, cancelable: true, composed: true,
                  view: window};
    const send = (type, keyCode, charCodeValue) => {
      const event = new KeyboardEvent(type, init);
      for (const [name, value] of [['keyCode', keyCode], ['which', keyCode], ['charCode', charCodeValue]]) {
        Object.defineProperty(event, name, {get: () => value});
      }
      return target.dispatchEvent(event);
    };
    if (send('keydown', k.keyCode, 0) && send('keypress', charCode, charCode)) {
      document.execCommand('insertText', false, ch);
    }
    send('keyup', k.keyCode, 0);
  }

  // ``type`` from inside the page, in one round trip: focus the field (its content selected),
  // insert all but the last character as one edit (a trusted ``input`` event, as a paste
  // gives), press the last character as a key, then the observation (JSON); null when the
  // element is gone.
  function type(ref, text, settle, withPoints) {
    if (!focus(ref)) return null;
    const chars = Array.from(text);
    const last = chars.pop();
    if (chars.length) document.execCommand('insertText', false, chars.join(''));
    if (last !== undefined) pressChar(last);
    return JSON.stringify(observe(settle, withPoints));
  }

  function select(ref, option, settle, withPoints) {
    const el = element(ref);
    const index = el ? Array.from(el.options).findIndex((o) => norm(o.textContent) === option) : -1;
    if (index >= 0) {
      el.focus();
      el.selectedIndex = index;
      el.dispatchEvent(new Event('input', {bubbles: true}));
      el.dispatchEvent(new Event('change', {bubbles: true}));
    }
    return JSON.stringify(observe(settle, withPoints));
  }

  // A new episode in this document, as Farama's env starts one (``reuse_page``): the clock back
  // to its first instant with no timer pending, new refs, no focus, then ``start``.
  function restart(args) {
    if (window.__hgClock) window.__hgClock.restart();
    if (document.activeElement && document.activeElement !== document.body) document.activeElement.blur();
    // Back to a fresh document's bookkeeping: no episode done, no reward shown, and no
    // element marked as clicked (core.js marks each clicked element data-tampered="e<id>").
    WOB_EPISODE_ID = 0;
    core.wob_latest = '-';
    core.wob_scores = [];
    for (const id of ['reward-last', 'reward-avg']) {
      const el = document.getElementById(id);
      if (el) { el.removeAttribute('style'); el.textContent = '-'; }
    }
    const episodes = document.getElementById('episode-id');
    if (episodes) episodes.textContent = '0';
    for (const el of document.querySelectorAll('[data-tampered]')) el.removeAttribute('data-tampered');
    resetAutocompletes();
    resetDatepickers();
    restoreLoad();
    if (hg.uidStart !== undefined) hg.uid = hg.uidStart;
    const selection = window.getSelection();
    if (selection) selection.removeAllRanges();
    hg.refOf = new WeakMap(); hg.byRef = new Map(); hg.next = 1; hg.hover = null;
    if (document.activeElement && document.activeElement !== document.body) document.activeElement.blur();
    window.scrollTo(0, 0);
    return start(args);
  }

  window.__hgPage = {
    start, restart, click, point, focus, type, select,
    observe: (settle, withPoints) => JSON.stringify(observe(settle, withPoints)),
  };
})();
"""


def walk(nodes: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every element of a page field, in document order."""
    for node in nodes:
        yield node
        yield from walk(node.get("children", ()))


def index(nodes: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Visible elements by ref."""
    return {node["ref"]: node for node in walk(nodes)}


#: Input types whose field is a row of segments (month, day, year; hour, minute, AM/PM) that
#: only key presses fill, one segment after another.
SEGMENTED_INPUT_TYPES = frozenset({"date", "time", "datetime-local", "month", "week"})


def is_text_input(node: dict[str, Any]) -> bool:
    """Whether ``type`` applies to this element."""
    tag = node["tag"]
    if tag == "textarea" or node.get("contenteditable") in ("true", "", "plaintext-only"):
        return True
    return tag == "input" and node.get("type", "text").lower() in TEXT_INPUT_TYPES


def all_text(node: dict[str, Any]) -> str:
    """The element's own text followed by its descendants' text, space separated."""
    parts = [n["text"] for n in walk([node]) if n.get("text")]
    return " ".join(parts)
