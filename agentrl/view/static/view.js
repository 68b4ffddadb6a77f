// agentrl view: the page over one run directory. Everything a run recorded (model text, tool output, ids) goes into
// the document as text nodes (el() below); nothing is ever parsed as markup.
"use strict";

const state = { run: null, version: null, route: null, mode: "advantage" };
const $ = (selector) => document.querySelector(selector);

// --- building blocks --------------------------------------------------------------------------------------------

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = String(value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  return node;
}

async function api(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  const body = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

function fmt(x, digits = 3) {
  if (x === null || x === undefined) return "–";
  const size = Math.abs(x);
  if (size > 0 && size < 10 ** -digits) return Number(x).toExponential(1);  // a gap of 1e-7 is not 0.000
  return Number(x).toFixed(size >= 100 ? 0 : digits);
}
const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
const short = (id) => (id ? String(id).split("/").pop() : "");
const fileRef = (name) => `#/file/${encodeURIComponent(name)}`;
const stepOf = (name) => Number((name.match(/step_(\d+)/) || [0, 0])[1]);
const isEval = (name) => name.startsWith("eval_");
const fileLabel = (name) => `${isEval(name) ? "held-out" : "training"} · step ${stepOf(name)}`;

function rewardBadge(reward) {
  if (reward === null || reward === undefined) return el("span", { class: "badge warn", text: "unscored" });
  return el("span", { class: `badge ${reward >= 1 ? "good" : reward <= 0 ? "bad" : ""}`, text: `reward ${fmt(reward, 2)}` });
}

function stopBadge(stop) {
  const kind = stop === "answered" ? "" : stop === "infra_error" ? "bad" : "warn";
  return el("span", { class: `badge stop ${kind}`, text: stop || "?" });
}

function facts(pairs) {
  const list = el("dl", { class: "facts" });
  for (const [key, value] of pairs) {
    if (value === undefined || value === null || value === "") continue;
    list.append(el("dt", { text: key }), el("dd", {}, value instanceof Node ? value : String(value)));
  }
  return list;
}

function components(map) {
  const entries = Object.entries(map || {});
  return entries.length ? entries.map(([k, v]) => `${k} ${fmt(v, 3)}`).join(" · ") : null;
}

function show(...nodes) {
  $("#main").replaceChildren(...nodes);
  window.scrollTo(0, 0);
}

// --- the timeline -----------------------------------------------------------------------------------------------

const CURVE_TITLES = {
  reward: "train reward",
  heldout_success: "held-out success",
  tokens_per_s: "rollout tokens/s",
  logprob_gap: "|learner − sampler| log-prob",
};

function renderTimeline() {
  const run = state.run;
  $("#run-name").textContent = run.name;
  $("#run-facts").textContent = [run.model, run.scaffold, run.branching !== "none" ? `branching ${run.branching}` : null]
    .filter(Boolean)
    .join(" · ");
  const selected = state.route && state.route.file ? stepOf(state.route.file) : null;
  const all = run.steps.map((s) => s.step);
  const span = [Math.min(...all), Math.max(...all)];  // every curve on the same step axis
  const charts = run.curves.map((curve) => chart(curve, run.steps, selected, span));
  $("#charts").replaceChildren(...charts);
  const rows = run.steps
    .slice()
    .reverse()
    .map((s) =>
      el(
        "tr",
        { class: s.step === selected ? "selected" : "" },
        el("td", { text: s.step }),
        el("td", { text: fmt(s.reward, 2) }),
        el("td", { text: fmt(s.heldout_success, 2) }),
        el(
          "td",
          {},
          s.train_file ? el("a", { href: fileRef(s.train_file), class: "step-link", text: "training" }) : null,
          s.train_file && s.eval_file ? " · " : null,
          s.eval_file ? el("a", { href: fileRef(s.eval_file), class: "eval-link", text: "held-out" }) : null,
        ),
      ),
    );
  $("#steps tbody").replaceChildren(...rows);
}

function chart(curve, steps, selected, [x0, x1]) {
  const points = steps.filter((s) => s[curve] !== null && s[curve] !== undefined);
  const box = el("div", { class: "chart", dataset: { curve } });
  const last = points.length ? points[points.length - 1][curve] : null;
  box.append(el("div", { class: "title" }, el("span", { text: CURVE_TITLES[curve] || curve }), el("span", { text: fmt(last, 3) })));
  const width = 300, height = 64, pad = 6;
  const plot = svg("svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none" });
  if (points.length) {
    const ys = points.map((p) => p[curve]);
    const [y0, y1] = [Math.min(...ys), Math.max(...ys)];
    const X = (x) => pad + ((x - x0) / (x1 - x0 || 1)) * (width - 2 * pad);
    const Y = (y) => height - pad - ((y - y0) / (y1 - y0 || 1)) * (height - 2 * pad);
    if (selected !== null) plot.append(svg("line", { class: "marker", x1: X(selected), x2: X(selected), y1: 0, y2: height }));
    plot.append(svg("polyline", { points: points.map((p) => `${X(p.step)},${Y(p[curve])}`).join(" ") }));
    for (const p of points) {
      const target = curve === "heldout_success" ? p.eval_file || p.train_file : p.train_file || p.eval_file;
      const dot = svg("circle", { cx: X(p.step), cy: Y(p[curve]), r: 2.6, class: p.step === selected ? "selected" : "" });
      dot.append(svg("title"));
      dot.firstChild.textContent = `step ${p.step}: ${fmt(p[curve], 4)}`;
      if (target) dot.addEventListener("click", () => (location.hash = fileRef(target)));
      plot.append(dot);
    }
  }
  box.append(plot);
  return box;
}

// --- a step: its groups -----------------------------------------------------------------------------------------

async function renderGroups(name, params) {
  const query = new URLSearchParams(params);
  const data = await api(`/api/files/${encodeURIComponent(name)}/groups?${query}`);
  const step = state.run.steps.find((s) => s.step === stepOf(name)) || {};
  const tabs = el(
    "div",
    { class: "tabs" },
    step.train_file ? el("a", { href: fileRef(step.train_file), class: isEval(name) ? "" : "current", text: "training episodes" }) : null,
    step.eval_file ? el("a", { href: fileRef(step.eval_file), class: isEval(name) ? "current" : "", text: "held-out episodes" }) : null,
  );
  const form = filterForm(name, params, data.facets);
  const counts = el("div", { class: "counts", text: `${data.matching} of ${data.trajectories} trajectories, ${data.groups_matching} groups` });
  const cards = data.groups.map((group) => groupCard(name, group));
  const offset = Number(params.offset || 0), limit = Number(params.limit || 20);
  const pager = el(
    "div",
    { class: "pager" },
    offset > 0 ? el("a", { class: "prev", href: groupsRef(name, { ...params, offset: Math.max(0, offset - limit) }), text: "← previous groups" }) : null,
    el("span", { class: "muted", text: `groups ${data.groups_matching ? offset + 1 : 0}–${offset + data.groups.length} of ${data.groups_matching}` }),
    offset + limit < data.groups_matching ? el("a", { class: "next", href: groupsRef(name, { ...params, offset: offset + limit }), text: "next groups →" }) : null,
  );
  show(el("h2", { text: fileLabel(name) }), tabs, form, counts, ...cards, pager);
}

function groupsRef(name, params) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== "" && v !== undefined && v !== null));
  const text = query.toString();
  return fileRef(name) + (text ? `?${text}` : "");
}

function filterForm(name, params, facets) {
  const select = (key, label, options) =>
    el("select", { name: key, "aria-label": label }, el("option", { value: "", text: `any ${label}` }),
      options.map((o) => el("option", { value: o, text: o, selected: params[key] === o ? "selected" : false })));
  const form = el(
    "form",
    { class: "filters" },
    select("scaffold", "scaffold", facets.scaffolds),
    select("stop_reason", "stop reason", facets.stop_reasons),
    el("label", {}, "reward ", el("input", { type: "number", step: "any", name: "reward_min", placeholder: "min", value: params.reward_min || "" })),
    el("input", { type: "number", step: "any", name: "reward_max", placeholder: "max", value: params.reward_max || "" }),
    el("input", { type: "search", name: "q", placeholder: "search the text", value: params.q || "" }),
    el("button", { type: "submit", text: "filter" }),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const values = Object.fromEntries(new FormData(form).entries());
    location.hash = groupsRef(name, values);
  });
  form.addEventListener("change", (event) => {
    if (event.target.tagName === "SELECT") form.requestSubmit();
  });
  return form;
}

function groupCard(name, group) {
  const head = el(
    "div",
    { class: "head" },
    el("h3", { text: group.task_id }),
    group.scaffold ? el("span", { class: "badge", text: group.scaffold }) : null,
    el("span", { class: "muted", text: `${group.size} trajectories · mean reward ${fmt(group.reward_mean, 2)}${group.reward_spread === 0 ? " · no signal (all equal)" : ""}` }),
    group.forks ? el("a", { class: "tree-link", href: `${fileRef(name)}/tree/${encodeURIComponent(group.group_id)}`, text: `branch tree (${group.forks} forks)` }) : null,
    el("a", { class: "compare-link", href: compareRef(group.task_id, name, null), text: "compare steps" }),
  );
  const rows = group.trajectories.map((t) => trajectoryRow(name, t));
  return el("div", { class: "card group", dataset: { group: group.group_id } }, head, el("div", { class: "body" }, el("table", { class: "trajs" }, el("tbody", {}, rows))));
}

function trajectoryRow(name, t, pick) {
  // `pick`: what a click does instead of opening the trajectory's page (the compare view shows it in place)
  const open = (event) => {
    event.preventDefault();
    if (pick) pick(t);
    else location.hash = `${fileRef(name)}/t/${t.index}`;
  };
  const row = el(
    "tr",
    { class: "traj-row", dataset: { index: t.index, trajectory: t.trajectory_id } },
    el("td", {}, el("a", { href: `${fileRef(name)}/t/${t.index}`, text: `#${short(t.trajectory_id)}`, onclick: open })),
    el("td", {}, rewardBadge(t.reward)),
    el("td", {}, stopBadge(t.stop_reason)),
    el("td", { class: "muted", text: [plural(t.turns, "turn"), plural(t.tool_calls, "tool result"), t.tool_errors ? plural(t.tool_errors, "tool error") : null, t.parse_errors ? plural(t.parse_errors, "parse error") : null].filter(Boolean).join(" · ") }),
    el("td", { class: "muted", text: t.parent_id ? `fork of #${short(t.parent_id)} at turn ${t.branch_turn}` : "" }),
    el("td", { class: "text", text: t.error ? `error: ${t.error}` : t.answer !== null && t.answer !== undefined ? `answer: ${t.answer}` : "" }),
  );
  row.addEventListener("click", (event) => {
    if (event.target.tagName !== "A") open(event);
  });
  return row;
}

// --- one trajectory ---------------------------------------------------------------------------------------------

async function renderTrajectory(name, index) {
  const t = await api(`/api/files/${encodeURIComponent(name)}/trajectories/${index}`);
  show(...trajectoryView(t, { full: true }));
}

function trajectoryView(t, { full }) {
  const nav = el(
    "div",
    { class: "pager" },
    el("a", { href: fileRef(t.file), text: `← ${fileLabel(t.file)}` }),
    t.index > 0 ? el("a", { class: "prev", href: `${fileRef(t.file)}/t/${t.index - 1}`, text: "previous" }) : null,
    el("a", { class: "next", href: `${fileRef(t.file)}/t/${t.index + 1}`, text: "next" }),
    el("a", { href: compareRef(t.task_id, t.file, null), text: "this task at another step" }),
    t.parent_id || t.summary.parent_id ? el("a", { href: `${fileRef(t.file)}/tree/${encodeURIComponent(t.group_id)}`, text: "branch tree" }) : null,
  );
  const header = facts([
    ["trajectory", t.trajectory_id],
    ["task", t.task_id],
    ["scaffold", t.scaffold],
    ["stop reason", stopBadge(t.stop_reason)],
    ["reward", rewardBadge(t.reward)],
    ["reward components", components(t.reward_components)],
    ["measurements", components(t.measurements)],
    ["answer", t.answer],
    ["error", t.error],
    ["policy version", t.policy_version],
    ["forked from", t.parent_id ? `${t.parent_id} at turn ${t.branch_turn}` : null],
    ["tokens decoded by", t.decoder.source || `nothing (${t.decoder.reason})`],
  ]);
  const mode = el(
    "select",
    { class: "mode", "aria-label": "colour tokens by" },
    [["advantage", "advantage"], ["gap", "learner − sampler log-prob"], ["entropy", "entropy"], ["none", "nothing"]].map(([value, label]) =>
      el("option", { value, text: `colour by ${label}`, selected: state.mode === value ? "selected" : false }),
    ),
  );
  const turns = el("div", { class: "turns" }, t.turns.map((turn) => turnView(turn)));
  const legend = el("span", { class: "legend" });
  const recolour = () => colourTokens(turns, t, state.mode, legend);
  mode.addEventListener("change", () => {
    state.mode = mode.value;
    recolour();
  });
  recolour();
  const prompt = el("details", { class: "prompt" },
    el("summary", { text: `rendered prompt (${t.prompt.tokens} tokens)` }),
    el("pre", { text: t.prompt.text ?? JSON.stringify(t.messages.slice(0, 2), null, 2) }));
  return [full ? nav : null, el("h2", { text: `trajectory #${short(t.trajectory_id)}` }), header, el("div", {}, mode, " ", legend), prompt, turns].filter(Boolean);
}

function turnView(turn) {
  const tokens = el("div", { class: "tokens" });
  const { ids, pieces, logprobs, entropies, learner_logprobs: learned } = turn.tokens;
  ids.forEach((id, i) => {
    const tok = el("span", { class: "tok", dataset: { i } }, pieces[i]);
    tok.tokenInfo = { id, piece: pieces[i], logprob: logprobs?.[i], entropy: entropies?.[i], learned: learned?.[i], advantage: turn.advantage };
    tokens.append(tok);
  });
  const credit =
    turn.advantage === null || turn.advantage === undefined
      ? el("span", { class: "badge", text: "not in the update" })
      : el("span", { class: `badge advantage ${turn.advantage > 0 ? "good" : turn.advantage < 0 ? "bad" : ""}`, text: `advantage ${fmt(turn.advantage, 4)}${turn.trained ? "" : " (not trained)"}` });
  const head = el(
    "div",
    { class: "head" },
    el("h3", { text: `turn ${turn.index}` }),
    credit,
    turn.reward !== null && turn.reward !== undefined ? el("span", { class: "badge", text: `turn reward ${fmt(turn.reward, 3)}` }) : null,
    components(turn.reward_components) ? el("span", { class: "muted", text: components(turn.reward_components) }) : null,
    el("span", { class: "muted", text: `${ids.length} sampled tokens` }),
  );
  const body = el("div", { class: "body" });
  if (turn.reasoning) body.append(el("details", { class: "reasoning" }, el("summary", { text: "reasoning" }), el("pre", { text: turn.reasoning })));
  body.append(tokens);
  if (turn.parse_error) body.append(el("div", { class: "parse-error" }, el("span", { class: "label", text: "parse error: " }), el("span", { class: "text", text: turn.parse_error })));
  for (const call of turn.tool_calls) {
    body.append(el("div", { class: "tool-call" }, el("span", { class: "label", text: `tool call ${call.id}: ` }), el("strong", { text: call.name }), el("pre", { text: JSON.stringify(call.arguments, null, 2) })));
  }
  for (const result of turn.tool_results) {
    body.append(
      el(
        "div",
        { class: `tool-result${result.is_error ? " error" : ""}` },
        el("span", { class: "label", text: `result of ${result.call_id}${result.elapsed_s !== null ? ` (${fmt(result.elapsed_s, 3)} s)` : ""}` }),
        result.is_error ? el("span", { class: "badge bad error-type", text: result.error_type || "error" }) : null,
        el("pre", { class: "content", text: result.content }),
      ),
    );
  }
  if (turn.observation_tokens) {
    body.append(el("details", { class: "observation" }, el("summary", { text: `appended after this turn (${turn.observation_tokens} tokens, as the model read them)` }), el("pre", { text: turn.observation ?? "(no tokenizer)" })));
  }
  return el("div", { class: "card turn", dataset: { turn: turn.index } }, head, body);
}

function colourTokens(container, t, mode, legend) {
  const value = (info) =>
    mode === "advantage" ? info.advantage
      : mode === "gap" ? (info.learned === null || info.learned === undefined || info.logprob === null ? null : info.learned - info.logprob)
        : mode === "entropy" ? info.entropy : null;
  const tokens = [...container.querySelectorAll(".tok")];
  const values = tokens.map((tok) => value(tok.tokenInfo)).filter((v) => v !== null && v !== undefined);
  const scale = Math.max(1e-6, ...values.map(Math.abs));
  for (const tok of tokens) {
    const v = value(tok.tokenInfo);
    tok.style.backgroundColor = v === null || v === undefined ? "" : colour(v / scale, mode === "entropy");
  }
  if (mode === "none" || !values.length) {
    const why = { advantage: "no advantages: this trajectory was not in an update", gap: "no learner log-probs: this trajectory was not in an update", entropy: "no entropies recorded" };
    return legend.replaceChildren(mode === "none" ? "" : why[mode]);
  }
  legend.replaceChildren(el("span", { class: "swatch" }), `${mode === "entropy" ? "0" : `−${fmt(scale, 4)}`} … ${fmt(scale, 4)}`);
  if (legend.firstChild instanceof HTMLElement) legend.firstChild.style.background = `linear-gradient(90deg, ${colour(mode === "entropy" ? 0 : -1, mode === "entropy")}, ${colour(1, mode === "entropy")})`;
}

function colour(x, sequential) {
  const a = Math.min(1, Math.abs(x)) * 0.55;
  if (sequential) return `rgba(161, 92, 0, ${a})`;
  return x >= 0 ? `rgba(23, 128, 61, ${a})` : `rgba(192, 54, 44, ${a})`;
}

function tooltip(event) {
  const tip = $("#tooltip");
  const info = event.target.tokenInfo;
  if (!info) return (tip.hidden = true);
  const gap = info.learned !== null && info.learned !== undefined && info.logprob !== null && info.logprob !== undefined ? info.learned - info.logprob : null;
  tip.textContent = [
    `token    ${JSON.stringify(info.piece)}`,
    `id       ${info.id}`,
    `logprob  ${fmt(info.logprob, 5)} (sampler)`,
    `learner  ${fmt(info.learned, 5)}${gap !== null ? `  gap ${gap.toExponential(2)}` : ""}`,
    `entropy  ${fmt(info.entropy, 4)}`,
    `advantage ${fmt(info.advantage, 4)}`,
  ].join("\n");
  tip.hidden = false;
  tip.style.left = `${Math.min(event.clientX + 12, window.innerWidth - 470)}px`;
  tip.style.top = `${event.clientY + 14}px`;
}

// --- a group's branch tree --------------------------------------------------------------------------------------

async function renderTree(name, group) {
  const data = await api(`/api/files/${encodeURIComponent(name)}/tree?group=${encodeURIComponent(group)}`);
  const node = (n) =>
    el(
      "li",
      { class: "node", dataset: { trajectory: n.trajectory_id } },
      el("a", { href: `${fileRef(name)}/t/${n.index}`, text: `#${short(n.trajectory_id)}` }), " ",
      rewardBadge(n.reward), " ", stopBadge(n.stop_reason),
      el("span", { class: "muted", text: ` ${n.turns} turns` }),
      n.fork ? el("span", { class: "fork", text: ` · forked after turn ${n.fork.turn - 1}: entropy ${fmt(n.fork.entropy, 3)}, ΔH ${fmt(n.fork.delta_entropy, 3)}` }) : null,
      n.children.length ? el("ul", {}, n.children.map(node)) : null,
    );
  const note = `Entropy: the summed entropy of the first ${data.entropy_tokens} tokens of the turn before the fork${data.normalised ? " over ln|V|" : ""}; ΔH against the rollout's first tool round (the rule the engine forked on).`;
  show(el("div", { class: "pager" }, el("a", { href: fileRef(name), text: `← ${fileLabel(name)}` })), el("h2", { text: `branch tree of ${data.group_id}` }), el("p", { class: "muted", text: note }), el("ul", { class: "tree" }, data.roots.map(node)));
}

// --- two steps side by side -------------------------------------------------------------------------------------

function compareRef(task, a, b) {
  return `#/compare/${encodeURIComponent(task)}/${encodeURIComponent(a)}/${encodeURIComponent(b || "")}`;
}

function otherFile(name) {
  const files = state.run.steps.flatMap((s) => [s.train_file, s.eval_file]).filter((f) => f && f !== name && isEval(f) === isEval(name));
  return files.length ? files[files.length - 1] : null;
}

async function renderCompare(task, a, b) {
  b = b || otherFile(a) || a;
  const files = state.run.steps.flatMap((s) => [s.train_file, s.eval_file]).filter(Boolean);
  const column = async (name, side) => {
    const select = el("select", { class: "file", "aria-label": `${side} file` }, files.map((f) => el("option", { value: f, text: fileLabel(f), selected: f === name ? "selected" : false })));
    select.addEventListener("change", () => (location.hash = side === "left" ? compareRef(task, select.value, b) : compareRef(task, a, select.value)));
    const data = await api(`/api/files/${encodeURIComponent(name)}/task?task=${encodeURIComponent(task)}`);
    const detail = el("div", { class: "detail" });
    const pick = async (t) => {
      const full = await api(`/api/files/${encodeURIComponent(name)}/trajectories/${t.index}`);
      detail.replaceChildren(...trajectoryView(full, { full: false }));
    };
    const rows = data.trajectories.map((t) => trajectoryRow(name, t, pick));
    const mean = data.trajectories.filter((t) => t.reward !== null).map((t) => t.reward);
    const summary = data.trajectories.length ? `${data.trajectories.length} trajectories, mean reward ${fmt(mean.reduce((x, y) => x + y, 0) / (mean.length || 1), 2)}` : "this task was not played in this file";
    if (data.trajectories.length) pick(data.trajectories[0]);
    return el("div", { class: `side ${side}` }, select, el("p", { class: "muted", text: summary }), el("table", { class: "trajs" }, el("tbody", {}, rows)), detail);
  };
  const [left, right] = await Promise.all([column(a, "left"), column(b, "right")]);
  show(el("h2", { text: `task ${task}: two steps side by side` }), el("div", { class: "columns" }, left, right));
}

// --- routing and the live loop ----------------------------------------------------------------------------------

function parseRoute() {
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const params = Object.fromEntries(new URLSearchParams(query || ""));
  if (parts[0] === "file" && parts[1]) {
    if (parts[2] === "t") return { view: "trajectory", file: parts[1], index: Number(parts[3]) };
    if (parts[2] === "tree") return { view: "tree", file: parts[1], group: parts.slice(3).join("/") };
    return { view: "groups", file: parts[1], params };
  }
  if (parts[0] === "compare") return { view: "compare", task: parts[1], file: parts[2], other: parts[3] };
  return { view: "home" };
}

async function route() {
  state.route = parseRoute();
  const r = state.route;
  if (state.run) renderTimeline();
  try {
    if (r.view === "groups") await renderGroups(r.file, r.params);
    else if (r.view === "trajectory") await renderTrajectory(r.file, r.index);
    else if (r.view === "tree") await renderTree(r.file, r.group);
    else if (r.view === "compare") await renderCompare(r.task, r.file, r.other);
    else renderHome();
  } catch (error) {
    show(el("p", { class: "error-line", text: `error: ${error.message}` }));
  }
}

function renderHome() {
  const steps = state.run.steps;
  const latest = steps.filter((s) => s.train_file || s.eval_file).pop();
  show(
    el("h2", { text: state.run.name }),
    facts([["run directory", state.run.run_dir], ["model", state.run.model], ["scaffold", state.run.scaffold], ["branching", state.run.branching], ["steps", steps.length]]),
    latest ? el("p", {}, "Latest: ", el("a", { href: fileRef(latest.train_file || latest.eval_file), text: `step ${latest.step}` }), ". Click a step on the timeline or in the table.") : el("p", { class: "hint", text: "No step written yet; this page follows the run as it writes." }),
  );
}

async function poll() {
  try {
    const run = await api("/api/run");
    const changed = run.version !== state.version;
    state.run = run;
    state.version = run.version;
    $("#live").textContent = `read ${new Date().toLocaleTimeString()}`;
    if (changed) {
      renderTimeline();
      if (state.route && state.route.view === "home") renderHome();
    }
  } catch (error) {
    $("#live").textContent = `cannot read the run: ${error.message}`;
  }
}

document.addEventListener("mouseover", tooltip);
window.addEventListener("hashchange", route);
poll().then(route);
setInterval(poll, 5000);
