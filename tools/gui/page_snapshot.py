"""The page as text: an accessibility-style outline with numbered interactive elements, and its fork state.

`SNAPSHOT_JS` walks the DOM in document order. Interactive elements (links, buttons, form fields, ...) get a
number kept in a `data-agentrl-id` attribute, so an element keeps its number for as long as the document lives
and new elements get the next free one; a new document numbers from 1 again, so the same page always reads the
same. Text blocks without interactive content are one line each, headings marked with `#`.

`outline_elements` reads the numbered elements back out of an outline (the scripted expert and `click(label=...)`
use it).

`CAPTURE_JS` / `RESTORE_JS` carry what a reload loses into a forked page: the element numbers, form values and
the scroll position, addressed by each element's path of child indices from the document root.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

ID_ATTRIBUTE = "data-agentrl-id"

SNAPSHOT_JS = r"""
(maxLines) => {
  const ATTR = 'data-agentrl-id';
  const INTERACTIVE = 'a[href], button, input:not([type=hidden]), select, textarea, summary, [role=button], '
    + '[role=link], [role=checkbox], [role=tab], [role=menuitem], [contenteditable=true], [onclick]';
  const TEXT_BLOCKS = new Set(['p', 'li', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'td', 'th', 'dt', 'dd', 'span',
    'div', 'strong', 'em', 'b', 'i', 'small', 'output', 'pre', 'caption', 'legend', 'figcaption', 'blockquote']);
  const SKIP = new Set(['script', 'style', 'noscript', 'template', 'head', 'svg']);
  let next = window.__agentrlNextId || 1;
  const lines = [];
  const clean = (s) => (s || '').replace(/\s+/g, ' ').trim();
  const quote = (s) => JSON.stringify(s.length > 120 ? s.slice(0, 117) + '...' : s);
  const visible = (el) => {
    if (el.checkVisibility && !el.checkVisibility({visibilityProperty: true})) return false;
    const style = getComputedStyle(el);
    if (style.display === 'contents') return true;
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0;
  };
  const roleOf = (el) => {
    const explicit = el.getAttribute('role');
    if (explicit) return explicit;
    const tag = el.tagName.toLowerCase();
    if (tag === 'a') return 'link';
    if (tag === 'select') return 'combobox';
    if (tag === 'textarea') return 'textbox';
    if (tag === 'summary') return 'button';
    if (tag === 'input') {
      const type = (el.getAttribute('type') || 'text').toLowerCase();
      if (['submit', 'button', 'reset', 'image'].includes(type)) return 'button';
      if (type === 'checkbox' || type === 'radio') return type;
      if (type === 'range') return 'slider';
      if (type === 'number') return 'spinbutton';
      if (type === 'password') return 'password';
      return 'textbox';
    }
    return tag === 'button' || el.hasAttribute('onclick') ? 'button' : tag;
  };
  const nameOf = (el) => {
    const aria = el.getAttribute('aria-label');
    if (aria) return clean(aria);
    const by = el.getAttribute('aria-labelledby');
    if (by) {
      const text = by.split(/\s+/).map((id) => document.getElementById(id)).filter(Boolean)
        .map((n) => n.innerText).join(' ');
      if (clean(text)) return clean(text);
    }
    if (el.labels && el.labels.length) {
      const own = (label) => Array.from(label.childNodes)
        .filter((n) => n.nodeType === Node.TEXT_NODE || !n.matches('input, select, textarea, button'))
        .map((n) => n.textContent).join(' ');
      const text = clean(Array.from(el.labels).map(own).join(' '));
      if (text) return text;
    }
    const tag = el.tagName.toLowerCase();
    if (tag === 'input' && ['submit', 'button', 'reset'].includes((el.type || '').toLowerCase())) {
      return clean(el.value);
    }
    if (!['input', 'select', 'textarea'].includes(tag) && clean(el.innerText)) return clean(el.innerText);
    return clean(el.getAttribute('placeholder') || el.getAttribute('title') || el.getAttribute('alt')
      || el.getAttribute('name') || '');
  };
  const describe = (el) => {
    if (!el.hasAttribute(ATTR)) el.setAttribute(ATTR, String(next++));
    const role = roleOf(el);
    let line = `[${el.getAttribute(ATTR)}] ${role} ${quote(nameOf(el))}`;
    const tag = el.tagName.toLowerCase();
    if (role === 'checkbox' || role === 'radio') line += el.checked ? ' checked' : ' unchecked';
    else if (tag === 'select') {
      const chosen = el.selectedOptions.length ? clean(el.selectedOptions[0].text) : '';
      const options = Array.from(el.options).map((o) => clean(o.text)).join(' | ');
      line += ` value=${quote(chosen)} options: ${options}`;
    } else if (role === 'password') line += el.value ? ' value="••••"' : ' value=""';
    else if (['textbox', 'spinbutton', 'slider'].includes(role) && 'value' in el) line += ` value=${quote(el.value)}`;
    if (el.disabled) line += ' disabled';
    return line;
  };
  // The text of a label that names a control is already the control's name: `inLabel` leaves it out.
  const walk = (node, inLabel = false) => {
    for (const child of node.childNodes) {
      if (lines.length >= maxLines) return;
      if (child.nodeType === Node.TEXT_NODE) {
        if (inLabel) continue;
        const text = clean(child.textContent);
        if (text) lines.push(text);
        continue;
      }
      if (child.nodeType !== Node.ELEMENT_NODE) continue;
      const tag = child.tagName.toLowerCase();
      if (SKIP.has(tag) || !visible(child)) continue;
      if (child.matches(INTERACTIVE)) { lines.push(describe(child)); continue; }
      if (tag === 'label' && child.control) { walk(child, true); continue; }
      if (TEXT_BLOCKS.has(tag) && !child.querySelector(INTERACTIVE)) {
        const text = clean(child.innerText);
        if (text) lines.push(/^h[1-6]$/.test(tag) ? '#'.repeat(Number(tag[1])) + ' ' + text : text);
        continue;
      }
      walk(child);
    }
  };
  if (document.body) walk(document.body);
  window.__agentrlNextId = next;
  const truncated = lines.length >= maxLines;
  return {lines, truncated, scrollY: Math.round(window.scrollY),
          height: document.documentElement.scrollHeight, viewport: window.innerHeight};
}
"""

_PATH_JS = r"""
const pathOf = (el) => {
  const path = [];
  while (el && el !== document.documentElement) {
    path.unshift(Array.prototype.indexOf.call(el.parentElement.children, el));
    el = el.parentElement;
  }
  return path;
};
"""

CAPTURE_JS = (
    "() => {"
    + _PATH_JS
    + r"""
  const elements = [];
  for (const el of document.querySelectorAll('[data-agentrl-id], input, select, textarea')) {
    const entry = {path: pathOf(el), tag: el.tagName, id: el.getAttribute('data-agentrl-id')};
    if ('value' in el && el.tagName !== 'BUTTON') entry.value = el.value;
    if ('checked' in el) entry.checked = el.checked;
    if (el.tagName === 'SELECT') entry.selectedIndex = el.selectedIndex;
    elements.push(entry);
  }
  return {elements, nextId: window.__agentrlNextId || 1, scroll: [window.scrollX, window.scrollY]};
}"""
)

RESTORE_JS = r"""
(state) => {
  let restored = 0;
  for (const entry of state.elements) {
    let el = document.documentElement;
    for (const index of entry.path) { el = el && el.children[index]; }
    if (!el || el.tagName !== entry.tag) continue;
    if (entry.id !== null) el.setAttribute('data-agentrl-id', entry.id);
    if (entry.selectedIndex !== undefined) el.selectedIndex = entry.selectedIndex;
    else if (entry.value !== undefined && el.type !== 'file') el.value = entry.value;
    if (entry.checked !== undefined) el.checked = entry.checked;
    restored += 1;
  }
  window.__agentrlNextId = state.nextId;
  window.scrollTo(state.scroll[0], state.scroll[1]);
  return restored;
}
"""


def format_snapshot(url: str, title: str, snapshot: dict[str, Any]) -> str:
    """The observation text: where the page is, then its outline."""
    head = [f"url: {url}", f"title: {title}"]
    if snapshot["height"] > snapshot["viewport"]:
        head.append(f"scroll: {snapshot['scrollY']} of {snapshot['height'] - snapshot['viewport']} px")
    body = snapshot["lines"] or ["(empty page)"]
    if snapshot["truncated"]:
        body = [*body, "[... more elements not shown]"]
    return "\n".join(head + body)


class OutlineElement(NamedTuple):
    """One numbered line of an outline: `[id] role "name"`."""

    id: int
    role: str
    name: str


_ELEMENT_LINE = re.compile(r'^\[(\d+)\] (\S+) ("(?:[^"\\]|\\.)*")', re.MULTILINE)


def outline_elements(outline: str) -> list[OutlineElement]:
    """The numbered elements of an outline, in order."""
    return [OutlineElement(int(m[1]), m[2], json.loads(m[3])) for m in _ELEMENT_LINE.finditer(outline)]
