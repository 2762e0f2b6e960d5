// The hop map viewer (retrieval/trace/hopmap_view.py puts it in a sandboxed iframe with its data).
// One vis-network Network per page; each method's map is a set of nodes with fixed places
// (physics off), and a stage only changes their looks: what the stage added is lit, what an
// earlier stage pruned is grey and dashed, what comes later is hidden. Every string is set as
// text (vis-network draws labels on the canvas and shows string titles as text; the page's
// own elements get textContent), so a KB's titles never become markup.
(function () {
  "use strict";
  function unpack(b64) {
    const packed = atob(b64.trim());
    const bytes = new Uint8Array(packed.length);   // a plain loop: Uint8Array.from with a mapper was 3x slower
    for (let j = 0; j < packed.length; j++) bytes[j] = packed.charCodeAt(j);
    return JSON.parse(new TextDecoder().decode(bytes));
  }
  const DATA = unpack(document.getElementById("hopmap-data").textContent);
  const MIN_SCALE = DATA.min_scale, FONT = DATA.font_px;
  // Okabe–Ito colours (distinguishable with the common colour-vision deficiencies), one shape a kind.
  const KIND = {
    question: {bg: "#1f2937", fg: "#ffffff", shape: "box", name: "question"},
    subquestion: {bg: "#f3d6e8", fg: "#111", shape: "box", name: "plan step / clause"},
    query: {bg: "#f3d6e8", fg: "#111", shape: "box", name: "query / rewrite"},
    decision: {bg: "#ffffff", fg: "#111", shape: "box", name: "decision (reason, DONE / QUERY_AGAIN)"},
    triple: {bg: "#fbe3b0", fg: "#111", shape: "box", name: "triple"},
    proposition: {bg: "#cde8f7", fg: "#111", shape: "box", name: "proposition"},
    event: {bg: "#f6cdb3", fg: "#111", shape: "box", round: 0, name: "event (hyperedge hub)"},
    entity: {bg: "#bfe6d9", fg: "#111", shape: "box", round: 18, name: "entity"},
    passage: {bg: "#cfe0f3", fg: "#111", shape: "box", name: "passage"},
  };
  const BORDER = {question: "#000", subquestion: "#CC79A7", query: "#CC79A7", decision: "#CC79A7", triple: "#E69F00",
                  proposition: "#56B4E9", event: "#D55E00", entity: "#009E73", passage: "#0072B2"};
  // What a stage made of a node, as a mark before its label (named in the legend).
  const ROLE = {"seed event": "◆", "joined (E_i)": "⋈", "in memory": "▣", "LLM-selected": "✔", "PPR seed": "◉"};
  const NEW = "#0072B2", GOLD_BG = "#F0E442", GREY = "#d4d4d8", GREY_FG = "#71717a";
  const $ = (id) => document.getElementById(id);
  let cur = Math.max(0, DATA.maps.findIndex((m) => m.method === DATA.method));
  let stage = 0, expanded = false, playing = null, lastDraw = 0, drawStart = 0, drawWanted = false;

  const nodes = new vis.DataSet([]), edges = new vis.DataSet([]);
  const net = window.net = new vis.Network($("canvas"), {nodes, edges}, {
    physics: false, autoResize: true,
    interaction: {hover: true, dragNodes: false, tooltipDelay: 120, zoomView: true, navigationButtons: false},
    layout: {improvedLayout: false, hierarchical: false},
    nodes: {font: {size: FONT, face: "system-ui, sans-serif", multi: false}, margin: 6, borderWidth: 1,
            widthConstraint: {minimum: DATA.node_w, maximum: DATA.node_w}, scaling: {label: {drawThreshold: 1}}},
    edges: {smooth: false, arrows: {to: {enabled: true, scaleFactor: 0.45}}, font: {size: 0}, selectionWidth: 1},
  });

  function map() { return DATA.maps[cur]; }
  function place(n) { return expanded ? {x: n.xa, y: n.ya} : {x: n.x, y: n.y}; }
  function laneSpans() { return expanded ? map().lane_y_all : map().lane_y; }

  function tooltip(n, m) {
    const st = (i) => (i === null || i === undefined) ? "" : m.stages[i].name;
    const lines = [n.f || n.l, KIND[n.k] ? KIND[n.k].name : n.k];
    if (n.sc !== null) lines.push("score " + n.sc.toFixed(3));
    if (n.v !== null) lines.push("RankVote score " + n.v.toFixed(3) + " (the sum of its propositions' votes 1/(1+rank))");
    if (n.ro) lines.push(n.ro);
    if (n.ch) lines.push(n.ch);
    if (n.p !== null) lines.push("pruned by " + st(n.p));
    if (n.r) lines.push("final rank " + n.r);
    if (n.g) lines.push("GOLD passage" + (n.mi ? " — no stage reached it" : (n.d !== null ? " — dropped by " + st(n.d) : "")));
    if (!n.mi) lines.splice(2, 0, "added by " + st(n.a));
    return lines.join("\n");
  }

  function look(n, m, i) {
    const k = KIND[n.k] || KIND.query, p = place(n);
    const isNew = n.a === i && !n.mi, held = n.s.indexOf(i) >= 0, pruned = n.p !== null && n.p <= i;
    const dropped = (n.d !== null && n.d <= i) || n.mi;
    let label = n.l;
    if (n.ch && n.ca !== null && n.ca <= i && ROLE[n.ch]) label = ROLE[n.ch] + " " + label;
    if (n.ro && ROLE[n.ro]) label = ROLE[n.ro] + " " + label;
    if (n.g) label = "★ " + label;
    if (dropped) label = "✗ " + label;
    const o = {id: n.id, label, title: tooltip(n, m), x: p.x, y: p.y, shape: k.shape, hidden: n.a > i || (n.h && !expanded),
               borderWidth: isNew ? 4 : (n.g ? 4 : (held ? 2 : 1)),
               shapeProperties: {borderDashes: pruned ? [5, 4] : false, borderRadius: k.round === undefined ? 3 : k.round},
               font: {color: k.fg, size: FONT}, opacity: 1};
    let bg = k.bg, border = BORDER[n.k] || "#555";
    if (n.g) { bg = GOLD_BG; border = "#000"; o.font.color = "#000"; }
    if (isNew) border = NEW;
    if (pruned) { bg = GREY; border = "#a1a1aa"; o.font.color = GREY_FG; o.title += "\n(greyed: pruned by " + m.stages[n.p].name + ")"; }
    else if (!held && !isNew && n.k !== "question") o.opacity = 0.55;
    if (dropped) { border = "#b91c1c"; o.opacity = 1; }
    if (n.mi) { bg = "#fdf6c3"; o.shapeProperties.borderDashes = [6, 3]; o.borderWidth = 3; }
    o.color = {background: bg, border, highlight: {background: bg, border: "#000"}, hover: {background: bg, border: "#000"}};
    return o;
  }

  function edgeLook(e, m, i, widthOf) {
    const gone = (id) => { const n = m.byId[id]; return n.p !== null && n.p <= i; };
    const hidden = e.a > i || m.byId[e.f].a > i || m.byId[e.t].a > i || (!expanded && (m.byId[e.f].h || m.byId[e.t].h));
    const o = {id: e.id, from: e.f, to: e.t, hidden, title: e.l + (e.w !== null ? " (" + e.w.toFixed(3) + ")" : ""),
               width: widthOf(e), dashes: e.k === "same_as" || e.k.startsWith("rewrit") ? [6, 4] : false,
               color: {color: "#9ca3af", opacity: 0.7}};
    if (e.a === i) o.color = {color: NEW, opacity: 1};
    if (gone(e.f) || gone(e.t)) o.color = {color: "#d4d4d8", opacity: 0.6};
    if (e.gp) { o.width = Math.max(o.width, 5); o.color = {color: "#111111", opacity: 1}; o.dashes = false; }
    return o;
  }

  function load(mi) {
    cur = mi;
    const m = map();
    if (!m.byId) { m.byId = {}; m.nodes.forEach((n) => { m.byId[n.id] = n; }); m.more.forEach((n) => { m.byId[n.id] = n; }); }
    stage = Math.min(Math.max(DATA.method === m.method ? DATA.stage : m.stages.length - 1, 0), m.stages.length - 1);
    nodes.clear(); edges.clear();
    DATA.stage = -1;
    buildTabs(); buildStages(); buildLegend();
    $("slider").max = String(m.stages.length - 1);
    show(stage, true);
  }

  function widthFn(m) {
    const ws = m.edges.map((e) => e.w).filter((w) => w !== null && isFinite(w));
    const lo = Math.min(...ws), hi = Math.max(...ws);
    return (e) => (e.w === null || !isFinite(e.w) || hi <= lo) ? 1.5 : 1 + 5 * (e.w - lo) / (hi - lo);
  }

  function show(i, refit) {
    const m = map();
    stage = i;
    drawStart = performance.now(); window.hopmapDrawn = false;
    const w = widthFn(m);
    const ns = m.nodes.map((n) => look(n, m, i));
    m.more.forEach((mo) => ns.push({id: mo.id, label: "+" + mo.n + " more", x: mo.x, y: mo.y, shape: "box", hidden: expanded || mo.a > i,
      title: "the " + mo.n + " nodes of this cell below the top " + m.top_n + " by score; click to show every node",
      color: {background: "#ffffff", border: "#52525b"}, font: {color: "#111", size: FONT}, borderWidth: 1,
      shapeProperties: {borderDashes: [2, 2]}}));
    // A node joins the network the first time it is shown and stays (hidden when not): vis-network
    // lays out every node it holds, so a map of 150 nodes of which 40 are in view drew 3x slower.
    nodes.update(ns.filter((o) => !o.hidden || nodes.get(o.id) !== null));
    const es = m.edges.map((e) => edgeLook(e, m, i, w))
      .filter((o) => (!o.hidden && nodes.get(o.from) !== null && nodes.get(o.to) !== null) || edges.get(o.id) !== null);
    edges.update(es);
    $("slider").value = String(i);
    const st = m.stages[i];
    $("stage-name").textContent = (i + 1) + "/" + m.stages.length + " · " + st.name + " — " + st.title;
    const facts = [st.latency_ms.toFixed(1) + " ms", st.tokens + " tok", "+" + st.added + " added", "−" + st.pruned + " pruned"];
    if (st.gold_dropped.length) facts.push("✗ gold dropped: " + st.gold_dropped.join(", "));
    if (!st.has_graph) facts.push("this stage draws nothing of its own: the map as it stood");
    $("stage-facts").textContent = facts.join(" · ");
    document.querySelectorAll("#stages li").forEach((li, j) => li.classList.toggle("on", j === i));
    const li = document.querySelectorAll("#stages li")[i];
    if (li) li.scrollIntoView({block: "nearest"});
    if (refit !== false) focus(i === m.stages.length - 1 ? -1 : st.lane);
    // Counted from here: vis-network also draws while nodes are added, before the edges are in.
    drawWanted = true;
    net.redraw();
  }

  // The view follows the stage's lane, never below MIN_SCALE: labels stay at least 12 px.
  function focus(lane) {
    const m = map(), spans = laneSpans(), el = $("canvas");
    const W = el.clientWidth, H = el.clientHeight;
    const xs = m.layer_x, left = xs[0] - DATA.node_w / 2 - DATA.gutter, right = xs[xs.length - 1] + DATA.node_w / 2 + 10;
    let top, bottom;
    if (lane >= 0 && spans[lane]) { [top, bottom] = spans[lane]; top -= DATA.head; }
    else { top = spans[0][0] - DATA.head; bottom = spans[spans.length - 1][1]; }
    if (spans.length && lane === 0) top = spans[0][0] - DATA.head;
    const scale = Math.max(MIN_SCALE, Math.min(1.15, W / (right - left), H / (bottom - top)));
    // What fits is centred; what does not starts at its top left (the question, the first hop).
    const cx = (right - left) * scale <= W ? (left + right) / 2 : left + W / 2 / scale;
    const cy = (bottom - top) * scale <= H ? (top + bottom) / 2 : top + H / 2 / scale;
    net.moveTo({position: {x: cx, y: cy}, scale, animation: false});
  }

  net.on("beforeDrawing", (ctx) => {
    const m = map(), spans = laneSpans(), xs = m.layer_x;
    const left = xs[0] - DATA.node_w / 2 - DATA.gutter, right = xs[xs.length - 1] + DATA.node_w / 2 + 12;
    ctx.save();
    const here = m.stages[Math.min(stage, m.stages.length - 1)];
    spans.forEach(([t, b], li) => {
      const on = here.lane === li;
      ctx.fillStyle = on ? "#eef2ff" : (li % 2 ? "#fafafa" : "#f4f4f5");
      ctx.fillRect(left, t, right - left, b - t);
      ctx.fillStyle = "#27272a"; ctx.font = "600 15px system-ui, sans-serif"; ctx.textBaseline = "bottom";
      ctx.fillText(m.lanes[li] + (on ? "  ◀ this stage" : ""), left + 4, t - 2);
    });
    // The layers' names stay at the top of the view, wherever it is scrolled to.
    const view = net.DOMtoCanvas({x: 0, y: 0}), scale = net.getScale();
    const top = Math.max(spans.length ? spans[0][0] - 24 : 0, view.y + 22 / scale);
    ctx.font = "600 " + (15 / Math.max(scale, MIN_SCALE) * Math.max(scale, 1)).toFixed(1) + "px system-ui, sans-serif";
    ctx.textAlign = "center"; ctx.textBaseline = "bottom";
    const pitch = xs.length > 1 ? (xs[1] - xs[0]) - 8 : 400;
    m.layers.forEach((name, li) => {
      const w = Math.min(ctx.measureText(name).width + 12, pitch);
      ctx.fillStyle = "rgba(255,255,255,0.92)"; ctx.fillRect(xs[li] - w / 2, top - 20, w, 22);
      ctx.fillStyle = "#3f3f46"; ctx.fillText(name, xs[li], top, pitch - 12);   // maxWidth squeezes a long name
    });
    ctx.restore();
  });
  // Gold is a shape too: a star beside every gold passage, whatever the colours look like.
  net.on("afterDrawing", (ctx) => {
    const m = map();
    m.nodes.forEach((n) => {
      if (!n.g || n.a > stage || (n.h && !expanded)) return;
      const p = place(n), x = p.x - DATA.node_w / 2 - 2, y = p.y - 18;
      ctx.beginPath();
      for (let j = 0; j < 10; j++) {
        const r = j % 2 ? 5 : 12, a = Math.PI / 5 * j - Math.PI / 2;
        ctx.lineTo(x + r * Math.cos(a), y + r * Math.sin(a));
      }
      ctx.closePath(); ctx.fillStyle = "#000"; ctx.fill();
    });
    if (drawWanted) {
      lastDraw = performance.now() - drawStart; drawWanted = false;
      // The first stage drawn (not the empty canvas the network draws when it is made): its
      // wall-clock time for the first-view benchmark (ui/hopmap_bench.py), and a word to the page,
      // whose load events wait for it (ui/render.py FIRST_VIEW_GATE).
      if (!window.hopmapFirstDrawnAt) {
        window.hopmapFirstDrawnAt = performance.timeOrigin + performance.now();
        if (window.parent !== window) window.parent.postMessage({hopmapDrawn: true}, "*");
      }
    }
    window.hopmapDrawn = true;
  });

  net.on("click", (p) => {
    if (!p.nodes.length) return;
    const id = p.nodes[0], m = map();
    if (String(id).startsWith("more:")) { expanded = true; $("expand").checked = true; show(stage); return; }
    const n = m.byId[id];
    if (n) $("detail").textContent = tooltip(n, m).replace(/\n/g, " · ");
  });

  function buildTabs() {
    const box = $("methods"); box.textContent = "";
    DATA.maps.forEach((m, mi) => {
      const b = document.createElement("button");
      b.textContent = m.method + (m.gold_total ? " ★" + m.gold_found + "/" + m.gold_total : "");
      b.title = m.gold_total ? m.gold_found + " of " + m.gold_total + " gold passages in the final ranking" : "";
      b.className = mi === cur ? "on" : "";
      b.onclick = () => load(mi);
      box.appendChild(b);
    });
  }
  function buildStages() {
    const m = map(), ol = $("stages"); ol.textContent = "";
    m.stages.forEach((st, i) => {
      const li = document.createElement("li");
      const mark = {ok: "✓", empty: "∅", error: "✗", skipped: "–"}[st.status] || "?";
      li.textContent = mark + " " + st.name + (st.added ? " +" + st.added : "") + (st.pruned ? " −" + st.pruned : "") +
        (st.gold_dropped.length ? " ✗★" : "");
      li.title = st.title;
      li.onclick = () => { stop(); show(i); };
      ol.appendChild(li);
    });
  }
  function buildLegend() {
    const m = map(), kinds = [...new Set(m.nodes.map((n) => n.k))], box = $("legend");
    box.textContent = "";
    const item = (swatch, text) => { const s = document.createElement("span"); s.className = "lg";
      const i = document.createElement("i"); Object.assign(i.style, swatch); s.appendChild(i);
      s.appendChild(document.createTextNode(text)); box.appendChild(s); };
    kinds.forEach((k) => item({background: (KIND[k] || KIND.query).bg, borderColor: BORDER[k] || "#555",
      borderRadius: KIND[k] && KIND[k].round ? "7px" : (KIND[k] && KIND[k].round === 0 ? "0" : "2px")}, (KIND[k] || {name: k}).name));
    const roles = new Set(); m.nodes.forEach((n) => { if (ROLE[n.ro]) roles.add(n.ro); if (ROLE[n.ch]) roles.add(n.ch); });
    roles.forEach((r) => { const s = document.createElement("span"); s.className = "lg"; s.textContent = ROLE[r] + " " + r; box.appendChild(s); });
    item({background: GOLD_BG, borderColor: "#000", borderWidth: "3px"}, "★ gold passage");
    item({background: "#fff", borderColor: NEW, borderWidth: "3px"}, "added by this stage");
    item({background: GREY, borderColor: "#a1a1aa", borderStyle: "dashed"}, "pruned (greyed)");
    item({background: "#fff", borderColor: "#b91c1c", borderWidth: "2px"}, "✗ gold dropped here, or never reached (dashed)");
    item({background: "#111", height: "4px", borderColor: "#111"}, "path to gold (bold)");
    item({background: "#9ca3af", height: "3px", borderColor: "#9ca3af"}, "edge width = score, beam score or vote");
  }

  function stop() { if (playing) { clearInterval(playing); playing = null; $("play").textContent = "▶ play"; } }
  $("prev").onclick = () => { stop(); if (stage > 0) show(stage - 1); };
  $("next").onclick = () => { stop(); if (stage < map().stages.length - 1) show(stage + 1); };
  $("slider").oninput = (e) => { stop(); show(Number(e.target.value)); };
  $("play").onclick = () => {
    if (playing) return stop();
    if (stage >= map().stages.length - 1) show(0);
    $("play").textContent = "❚❚ pause";
    playing = setInterval(() => { if (stage >= map().stages.length - 1) stop(); else show(stage + 1); }, 900);
  };
  $("expand").onchange = (e) => { expanded = e.target.checked; show(stage); };
  document.addEventListener("keydown", (e) => {
    if (e.key === "ArrowRight") $("next").click();
    if (e.key === "ArrowLeft") $("prev").click();
  });

  function download(name, href) {
    const a = document.createElement("a"); a.href = href; a.download = name; document.body.appendChild(a); a.click(); a.remove();
  }
  function fileStem() { return "hopmap-" + map().method.replace(/[^A-Za-z0-9_-]+/g, "_") + "-" + map().stages[stage].name; }
  $("png").onclick = () => {
    // The canvas at twice its size, on white, for a slide or a paper.
    const c = document.querySelector("#canvas canvas"), out = document.createElement("canvas");
    out.width = c.width; out.height = c.height;
    const g = out.getContext("2d"); g.fillStyle = "#fff"; g.fillRect(0, 0, out.width, out.height); g.drawImage(c, 0, 0);
    download(fileStem() + ".png", out.toDataURL("image/png"));
  };
  $("svg").onclick = () => download(fileStem() + ".svg", "data:image/svg+xml;charset=utf-8," + encodeURIComponent(svg()));
  // The stage as SVG from the same places and looks, built as DOM nodes: text stays text.
  function svg() {
    const m = map(), NS = "http://www.w3.org/2000/svg", doc = document.implementation.createDocument(NS, "svg", null);
    const root = doc.documentElement, vis_ = nodes.get({filter: (n) => !n.hidden});
    const xs = vis_.map((n) => n.x), ys = vis_.map((n) => n.y);
    const x0 = Math.min(...xs) - DATA.node_w, y0 = Math.min(...ys) - 60, x1 = Math.max(...xs) + DATA.node_w, y1 = Math.max(...ys) + 40;
    root.setAttribute("viewBox", [x0, y0, x1 - x0, y1 - y0].join(" "));
    root.setAttribute("font-family", "system-ui, sans-serif");
    const el = (tag, attrs, text) => { const e = doc.createElementNS(NS, tag); Object.entries(attrs).forEach(([k, v]) => e.setAttribute(k, v));
      if (text !== undefined) e.textContent = text; root.appendChild(e); return e; };
    el("rect", {x: x0, y: y0, width: x1 - x0, height: y1 - y0, fill: "#fff"});
    el("text", {x: x0 + 8, y: y0 + 20, "font-size": 15, "font-weight": 600}, m.method + " · " + m.stages[stage].name + " — " + m.question);
    edges.get({filter: (e) => !e.hidden}).forEach((e) => {
      const a = nodes.get(e.from), b = nodes.get(e.to);
      el("line", {x1: a.x, y1: a.y, x2: b.x, y2: b.y, stroke: e.color.color, "stroke-width": e.width, "stroke-opacity": e.color.opacity,
                  "stroke-dasharray": e.dashes ? "6 4" : "none"});
    });
    vis_.forEach((n) => {
      const w = DATA.node_w, h = 44;
      el("rect", {x: n.x - w / 2, y: n.y - h / 2, width: w, height: h, rx: n.shapeProperties.borderRadius || 3, fill: n.color.background, stroke: n.color.border,
                       "stroke-width": n.borderWidth, "stroke-dasharray": n.shapeProperties && n.shapeProperties.borderDashes ? "5 4" : "none", opacity: n.opacity});
      const lines = String(n.label).split("\n");
      lines.forEach((line, j) => el("text", {x: n.x, y: n.y + (j - (lines.length - 1) / 2) * 16 + 5, "font-size": 13, "text-anchor": "middle",
                                              fill: n.font.color}, line));
    });
    return new XMLSerializer().serializeToString(doc);
  }

  // For the browser tests and the benchmark: what a reader sees at the current zoom, measured from
  // vis-network's own node positions and label boxes.
  window.hopmapMetrics = function () {
    // What the reader sees: the shown nodes in the view (vis-network lays out only those it draws).
    const el = $("canvas"), a = net.DOMtoCanvas({x: 0, y: 0}), z = net.DOMtoCanvas({x: el.clientWidth, y: el.clientHeight});
    const scale = net.getScale(), shown = nodes.get({filter: (n) => !n.hidden}).map((n) => n.id).filter((id) => {
      const n = net.body.nodes[id];
      return n.x + n.shape.width / 2 > a.x && n.x - n.shape.width / 2 < z.x && n.y + n.shape.height / 2 > a.y && n.y - n.shape.height / 2 < z.y;
    });
    // Label boxes as vis-network laid them out (labelModule.size), and each node's drawn shape.
    const labels = [], shapes = [];
    shown.forEach((id) => {
      const n = net.body.nodes[id], l = n.labelModule.size;
      labels.push({id, left: l.left, right: l.left + l.width, top: l.top, bottom: l.top + l.height});
      shapes.push({id, left: n.x - n.shape.width / 2, right: n.x + n.shape.width / 2, top: n.y - n.shape.height / 2,
                   bottom: n.y + n.shape.height / 2});
    });
    const count = (boxes) => {
      let k = 0; const pairs = [];
      for (let a = 0; a < boxes.length; a++) for (let b = a + 1; b < boxes.length; b++) {
        const p = boxes[a], q = boxes[b];
        if (p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom) { k++; if (pairs.length < 5) pairs.push([p.id, q.id]); }
      }
      return [k, pairs];
    };
    const [overlaps, pairs] = count(labels), [shape_overlaps] = count(shapes);
    const sizes = shown.map((id) => net.body.nodes[id].options.font.size * scale);
    return {method: map().method, stage: map().stages[stage].name, stages: map().stages.length, nodes: shown.length,
            overlaps, pairs, shape_overlaps, min_label_px: Math.min(...sizes), scale, draw_ms: lastDraw};
  };
  window.hopmapShow = function (method, st) {
    const mi = DATA.maps.findIndex((m) => m.method === method);
    if (mi < 0) return false;
    if (mi !== cur) { DATA.method = method; DATA.stage = Math.max(0, DATA.maps[mi].stages.findIndex((s) => s.name === st)); load(mi); }
    else show(Math.max(0, map().stages.findIndex((s) => s.name === st)));
    return true;
  };
  window.hopmapCount = () => DATA.maps.map((m) => ({method: m.method, stages: m.stages.length}));
  // A run being watched: the page sends each arrival's maps (hopmap_view.live_update) to this one
  // frame instead of a new document, which cost the browser ~0.24 CPU s a stage (vis-network
  // compiled and the whole request's maps parsed again) on the cores the model writes on.
  let liveSeq = -1;
  window.hopmapLive = function (b64) {
    const u = unpack(b64);
    if (u.seq <= liveSeq) return false;
    liveSeq = u.seq;
    u.maps.forEach((m) => {
      const at = DATA.maps.findIndex((o) => o.method === m.method);
      if (at >= 0) DATA.maps[at] = m; else DATA.maps.push(m);
    });
    const rank = (m) => { const r = u.order.indexOf(m.method); return r < 0 ? u.order.length : r; };
    DATA.maps.sort((a, b) => rank(a) - rank(b));
    stop();
    DATA.method = u.method; DATA.stage = u.stage;
    load(Math.max(0, DATA.maps.findIndex((m) => m.method === u.method)));
    // What it now shows, for the page's tests and the benchmark (the frame is another origin).
    if (window.parent !== window)
      window.parent.postMessage({hopmapLiveShown: {seq: u.seq, method: map().method, stages: map().stages.length}}, "*");
    return true;
  };
  window.addEventListener("message", (e) => {
    const d = e.data && e.data.hopmap;
    if (d && typeof d.method === "string" && typeof d.stage === "string") window.hopmapShow(d.method, d.stage);
    if (e.source === window.parent && e.data && typeof e.data.hopmapLive === "string") window.hopmapLive(e.data.hopmapLive);
  });
  // The page may lay the frame out after the network was made (Gradio renders the HTML first):
  // follow the canvas's size, and keep the stage's lane in view.
  let sized = "";
  new ResizeObserver(() => {
    const el = $("canvas"), now = el.clientWidth + "x" + el.clientHeight;
    if (now === sized || !el.clientWidth) return;
    sized = now;
    net.setSize(el.clientWidth + "px", el.clientHeight + "px");
    const m = map();
    focus(stage === m.stages.length - 1 ? -1 : m.stages[stage].lane);
  }).observe($("canvas"));
  load(cur);
  // The page sends a live frame its stages once it listens (ui/render.py LIVE_MAP_JS).
  if (window.parent !== window) window.parent.postMessage({hopmapReady: true}, "*");
})();
