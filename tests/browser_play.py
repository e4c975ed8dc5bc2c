"""Play real MiniWoB++ tasks in a reused and a fresh document side by side, and compare all
that an agent or a reward can see (issue 42 item 1); shared by the reuse tests.

:data:`AUDIT` reads, in one call, everything of a page that an agent's observation, a
screenshot or the task's reward can depend on: every node of the document (tag, attributes,
text), each form control's live value, checkedness and selection, each scrolled box's offsets,
the focus, the window's scroll, the text selection, the virtual clock (its time and every
queued timer: id, due time, interval) and MiniWoB's episode globals. Two documents that give
the same audit show the same page and run the same queued work.

Three kinds of play (:data:`PLAYS`):

* ``oracle``: the task's scripted oracle until the episode ends;
* ``random``: uniform legal actions (a seeded generator) until the episode ends or the step
  budget (``max_steps``) cuts it;
* ``adversarial``: junk typed into every text field, then every visible element clicked and
  every drop-down set to its last option, until the episode ends or 3x the step budget.
"""

from __future__ import annotations

import difflib
import random

from harness_gym.core.task import Action
from harness_gym.envs.browser import dom
from harness_gym.envs.browser.task import BrowserTask

#: Everything an agent, a screenshot or a reward can see of the page (a JSON-able value).
AUDIT = r"""(() => {
  const lines = [];
  const where = (n) => {
    const path = [];
    for (; n && n.parentNode; n = n.parentNode) {
      path.unshift(Array.prototype.indexOf.call(n.parentNode.childNodes, n));
    }
    return path.join('/');
  };
  function visit(n, depth) {
    const pad = ' '.repeat(depth);
    if (n.nodeType === 1) {
      const attrs = Array.from(n.attributes, (a) => a.name + '=' + JSON.stringify(a.value)).sort().join(' ');
      let line = pad + '<' + n.tagName.toLowerCase() + (attrs ? ' ' + attrs : '') + '>';
      if (n.matches('input, textarea, select')) {
        line += ' value=' + JSON.stringify(n.value);
        if (n.tagName === 'INPUT') line += ' checked=' + n.checked + ' indeterminate=' + n.indeterminate;
        if (n.tagName === 'SELECT') line += ' selected=' + Array.from(n.options, (o) => +o.selected).join('');
      }
      if (n.scrollTop || n.scrollLeft) line += ' scroll=' + n.scrollTop + ',' + n.scrollLeft;
      lines.push(line);
      for (const child of n.childNodes) visit(child, depth + 1);
    } else if (n.nodeType === 3 || n.nodeType === 8) {
      lines.push(pad + (n.nodeType === 3 ? '#text ' : '#comment ') + JSON.stringify(n.data));
    }
  }
  visit(document.documentElement, 0);
  const sel = window.getSelection();
  const clock = window.__hgClock;
  lines.push('focus ' + where(document.activeElement));
  lines.push('window scroll ' + window.scrollX + ',' + window.scrollY);
  lines.push('selection ' + (sel ? sel.rangeCount + ' ' + JSON.stringify(sel.toString()) : '-'));
  lines.push('clock ' + clock.now() + ' timers ' + JSON.stringify(clock.schedule()));
  lines.push('wob ' + JSON.stringify([window.WOB_DONE_GLOBAL, window.WOB_REWARD_GLOBAL,
                                      window.WOB_RAW_REWARD_GLOBAL, window.WOB_EPISODE_ID]));
  return lines.join('\n');
})"""

PLAYS = ("oracle", "random", "adversarial")
JUNK = "zq<b>&'junk\" 42"


def audit(task: BrowserTask) -> str:
    """The page's :data:`AUDIT` text."""
    return task.session.call(task._page, AUDIT)


def difference(want: str, got: str, limit: int = 30) -> str:
    """The first lines of a unified diff (fresh, reused)."""
    diff = difflib.unified_diff(want.splitlines(), got.splitlines(), "fresh", "reused", n=1, lineterm="")
    return "\n".join(list(diff)[:limit])


def adversarial_actions(task: BrowserTask, done: set[tuple[str, int]]) -> list[Action]:
    """The adversary's next actions on the current page: junk into each text field not yet
    filled, else a click on each element not yet clicked, a drop-down set to its last option."""
    nodes = list(dom.walk(task.fields()["page"]))
    for node in nodes:
        if dom.is_text_input(node) and ("type", node["ref"]) not in done:
            done.add(("type", node["ref"]))
            return [Action.of("type", ref=node["ref"], text=JUNK)]
    for node in nodes:
        if ("click", node["ref"]) in done:
            continue
        done.add(("click", node["ref"]))
        if node["tag"] == "select" and node.get("options"):
            return [Action.of("select", ref=node["ref"], option=node["options"][-1])]
        return [Action.of("click", ref=node["ref"])]
    return []


def next_action(
    task: BrowserTask, kind: str, rng: random.Random, done: set[tuple[str, int]]
) -> Action | None:
    """The next action of a play of ``kind`` on ``task`` (None: the play has nothing left)."""
    if kind == "oracle":
        return task.oracle()
    if kind == "random":
        legal = task.legal_actions()
        return rng.choice(legal) if legal else None
    actions = adversarial_actions(task, done)
    return actions[0] if actions else None


def budget(task: BrowserTask, kind: str) -> int:
    return task.max_steps * (3 if kind == "adversarial" else 1)


def play(task: BrowserTask, kind: str, seed: int) -> None:
    """One episode of ``kind`` on ``task`` (already reset), cut at its budget."""
    rng, done = random.Random(seed), set()
    for _ in range(budget(task, kind)):
        action = None if task.done else next_action(task, kind, rng, done)
        if action is None:
            return
        task.step(action)


def compare_episode(fresh: BrowserTask, reused: BrowserTask, kind: str, seed: int) -> list[str]:
    """Reset both tasks to ``seed`` (``reused`` in its previous episode's document), play one
    episode of ``kind`` with the actions chosen on the fresh page, and return every way the
    reused page differed (empty when it was exact at the reset and after every step)."""
    fresh.begin(seed)
    reused.begin(seed)
    where = f"{fresh.subdomain} {kind} seed {seed}"
    problems = []
    if not reused.page_reused:
        problems.append(f"{where}: the reset did not reuse the page")

    def check(when: str) -> bool:
        want, got = audit(fresh), audit(reused)
        if want != got:
            problems.append(f"{where} {when}: page differs\n{difference(want, got)}")
        for name in ("fields", "state"):
            a, b = getattr(fresh, name)(), getattr(reused, name)()
            if a != b:
                keys = [k for k in a if a[k] != b.get(k)]
                problems.append(f"{where} {when}: {name} differ in {keys}")
        return not problems

    if not check("at the reset"):
        return problems
    rng, done = random.Random(seed), set()
    for step in range(budget(fresh, kind)):
        action = None if fresh.done else next_action(fresh, kind, rng, done)
        if action is None:
            break
        a, b = fresh.step(action), reused.step(action)
        if a != b:
            problems.append(f"{where} step {step} {action}: results differ: {a} vs {b}")
        if not check(f"after step {step} ({action})"):
            break
    return problems


def check_task(subdomain: str, fresh: BrowserTask, reused: BrowserTask, seeds: tuple[int, ...]) -> list[str]:
    """Every kind of play first in the reused document (an adversarial episode, then each
    compared episode leaves its state for the next), each then compared with a fresh document
    at the same seed: the problems found (empty: exact)."""
    assert fresh.subdomain == reused.subdomain == subdomain
    reused.begin(seeds[0] + 7919)
    play(reused, "adversarial", seeds[0])
    problems: list[str] = []
    for index, kind in enumerate(("oracle", "random", "adversarial", "oracle")):
        if kind == "oracle" and not fresh.has_oracle:
            kind = "random"
        problems += compare_episode(fresh, reused, kind, seeds[index % len(seeds)] + index)
    return problems
