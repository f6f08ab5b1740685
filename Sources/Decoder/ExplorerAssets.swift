// The explorer page's markup, style and script (`dump --html`): hand-written, no framework,
// nothing fetched. The model (ExplorerPage) is JSON in a <script type="application/json">.
// Only the visible rows of the packet list are in the DOM (a 50 000-packet capture scrolls).
enum ExplorerAssets {
    static func page(title: String, model: String) -> String {
        var s = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        s += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        s += "<title>" + escape(title) + " — ble-hci explorer</title>\n<style>\n"
        s += css.replacingOccurrences(of: "FONTS", with: FlowSVG.fontStack)
        s += "</style></head><body>\n" + body
        s += "<script id=\"model\" type=\"application/json\">" + model + "</script>\n"
        s += "<script>\n" + script + "</script>\n</body></html>\n"
        return s
    }

    static func escape(_ s: String) -> String {
        var o = ""
        for ch in s {
            switch ch {
            case "<": o += "&lt;"
            case ">": o += "&gt;"
            case "&": o += "&amp;"
            case "\"": o += "&quot;"
            default: o.append(ch)
            }
        }
        return o
    }

    static let css = #"""
:root { --row: 22px; }
* { box-sizing: border-box; }
body { margin: 0; font: 12px FONTS; color: #222; background: #fafafa; }
header { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; padding: 6px 10px; background: #22313f; color: #fff; }
header h1 { font-size: 14px; margin: 0 12px 0 0; }
header label { display: flex; gap: 4px; align-items: center; }
header input, header select { font: inherit; padding: 2px 4px; }
header input { width: 9em; }
#status { margin-left: auto; }
#main { display: grid; grid-template-columns: minmax(0, 1fr) 430px; height: calc(100vh - 40px); }
#left { display: flex; flex-direction: column; min-width: 0; min-height: 0; border-right: 1px solid #ccc; }
#lanes { position: relative; height: 34px; background: #eef1f4; border-bottom: 1px solid #ccc; flex: none; overflow: hidden; }
#lanes div { position: absolute; top: 2px; font-weight: bold; text-align: center; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; font-size: 11px; }
#list { flex: 1; min-height: 0; overflow-y: auto; position: relative; }
#spacer { position: relative; }
.row { position: absolute; left: 0; right: 0; height: var(--row); display: flex; align-items: center; white-space: nowrap; cursor: pointer; border-bottom: 1px solid #f0f0f0; }
.row:hover { background: #eef5ff; }
.row.sel { background: #cfe3ff; }
.row .ix { width: 56px; text-align: right; color: #666; flex: none; padding-right: 6px; }
.row .tm { width: 86px; text-align: right; color: #666; flex: none; padding-right: 8px; }
.row svg { flex: none; }
.row .sm { padding-left: 8px; overflow: hidden; text-overflow: ellipsis; }
.row .ln { color: #1f6fb4; padding-left: 6px; }
.row .ll, #llstate b { color: #7a4b00; }
.row .ll { padding-left: 6px; font-size: 11px; }
#llstate { margin: 2px 0; }
.row.step { padding-left: 6px; background: #fff6d5; border-top: 1px solid #e0c060; font-weight: bold; cursor: default; }
.row.step span.cb { font-weight: normal; color: #6a5a20; padding-left: 10px; overflow: hidden; text-overflow: ellipsis; }
.row.fold, .row.rep { background: #eeeeee; font-style: italic; color: #444; }
.row.bad .sm { color: #b00020; }
#right { display: flex; flex-direction: column; min-height: 0; overflow: auto; }
#right h2 { font-size: 12px; margin: 0; padding: 4px 8px; background: #eef1f4; border-bottom: 1px solid #ccc; }
#detail { padding: 6px 8px; }
#detail .none { color: #777; }
#link { display: inline-block; margin: 4px 0; color: #1f6fb4; cursor: pointer; text-decoration: underline; }
ul.tree { list-style: none; padding-left: 14px; margin: 0; }
ul.tree li > span.f { cursor: pointer; padding: 0 2px; border-radius: 2px; }
ul.tree li > span.f:hover, ul.tree li > span.f.on { outline: 1px solid #333; }
ul.tree li > span.f.norange { cursor: default; color: #555; }
ul.tree .nt { color: #777; }
ul.tree .ex { border-bottom: 1px dotted #777; }
.layer { margin: 3px 0; }
.layer > .lt { font-weight: bold; padding: 1px 4px; border-radius: 2px; cursor: pointer; }
#hex { padding: 6px 8px; line-height: 1.5; }
#hex .ol { color: #888; padding-right: 8px; }
#hex span.b { padding: 0 2px; }
#hex span.b.hl { background: #ffd400 !important; color: #000; outline: 1px solid #a08000; }
#legend span { padding: 0 4px; margin-right: 4px; border-radius: 2px; }
.L-h4 { background: #e3e3e3; } .L-hci { background: #d6e6f7; } .L-l2cap { background: #e8d9f2; }
.L-signaling { background: #f3d7ec; } .L-att { background: #d5efd9; } .L-smp { background: #f6d5d1; }
.L-gatt { background: #e6f4d0; } .L-monitor, .L-note { background: #eeeeee; }
#gatt { padding: 6px 8px; }
#gatt li span { cursor: pointer; }
#gatt li span:hover { text-decoration: underline; }
"""#

    static let body = #"""
<header><h1 id="title"></h1>
<label>layer <select id="f-layer"><option value="">all</option><option value="hci">hci</option><option value="l2cap">l2cap</option><option value="signaling">signaling</option><option value="att">att</option><option value="smp">smp</option><option value="gatt">gatt</option></select></label>
<label>opcode <input id="f-opcode" placeholder="0x0a"></label>
<label>handle <input id="f-handle" placeholder="3"></label>
<label>text <input id="f-text" placeholder="Read"></label>
<span id="status"></span></header>
<div id="main"><div id="left"><div id="lanes"></div><div id="list"><div id="spacer"></div></div></div>
<div id="right"><h2>Packet</h2><div id="detail"><span class="none">Select a packet.</span></div>
<h2>Bytes <span id="legend"></span></h2><div id="hex"></div>
<h2>GATT database (from the capture)</h2><div id="gatt"></div></div></div>
"""#

    static let script = #"""
"use strict";
const M = JSON.parse(document.getElementById("model").textContent);
const H = 22, LANE = 92, LANE0 = 46, OVERSCAN = 10;
const COLOURS = { hci: "#1f6fb4", l2cap: "#8e44ad", signaling: "#b0489b", att: "#218a3a", smp: "#c0392b", monitor: "#7f7f7f" };
const TITLES = { h4: "H4", hci: "HCI", l2cap: "L2CAP", signaling: "L2CAP signaling", att: "ATT", smp: "SMP", gatt: "GATT", monitor: "btmon", note: "note" };
const byIndex = new Map();
M.packets.forEach((p, k) => byIndex.set(p.i, k));
// The controller's link-layer state: changes by packet, and the state after any packet.
const changeAt = new Map(M.states.map(c => [c[0], c]));
function stateAfter(i) {
  let lo = 0, hi = M.states.length;  // the first change after packet i
  while (lo < hi) { const mid = (lo + hi) >> 1; if (M.states[mid][0] <= i) lo = mid + 1; else hi = mid; }
  return lo > 0 ? M.states[lo - 1][2] : (M.states.length ? M.states[0][1] : "standby");
}
const laneCount = M.lanes.length;
const diagramWidth = LANE0 * 2 + (laneCount - 1) * LANE;
document.getElementById("title").textContent = M.title;
document.title = M.title + " — ble-hci explorer";

// Rows: the flow's steps with runs folded; with a filter on, the matching packets only.
let grouped = M.rows.map(r => r.slice());
let rows = grouped;
let selected = null, pinned = null;
const rowOf = new Map();
function reindex() { rowOf.clear(); rows.forEach((r, k) => { if (r[0] === "p") rowOf.set(r[1], k); }); }

const list = document.getElementById("list"), spacer = document.getElementById("spacer");
const lanes = document.getElementById("lanes");
lanes.innerHTML = '<div style="left:0;width:56px">#</div><div style="left:56px;width:86px">time (s)</div>';
M.lanes.forEach((t, k) => {
  const d = document.createElement("div");
  // The last lane's title (a peer's address) may run on to the right of the diagram.
  const last = k === laneCount - 1;
  d.style.left = (142 + LANE0 + k * LANE - LANE / 2) + "px";
  d.style.width = (last ? 3 * LANE : LANE) + "px";
  if (last) d.style.textAlign = "left";
  d.textContent = t;
  d.title = t;
  lanes.appendChild(d);
});

function esc(s) { return String(s).replace(/[&<>"]/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;" }[c])); }

function arrowSVG(i) {
  let s = '<svg width="' + diagramWidth + '" height="' + H + '">';
  for (let k = 0; k < laneCount; k++) { const x = LANE0 + k * LANE; s += '<line x1="' + x + '" y1="0" x2="' + x + '" y2="' + H + '" stroke="#bbb"/>'; }
  const a = M.arrows[i];
  if (a) {
    const x1 = LANE0 + a[0] * LANE, x2 = LANE0 + a[1] * LANE, c = COLOURS[a[2]] || "#444", y = H / 2;
    const dir = x2 >= x1 ? 1 : -1;
    s += '<line x1="' + x1 + '" y1="' + y + '" x2="' + (x2 - dir * 6) + '" y2="' + y + '" stroke="' + c + '" stroke-width="2"/>';
    s += '<path d="M' + x2 + ' ' + y + ' l' + (-dir * 7) + ' -4 l0 8 z" fill="' + c + '"/>';
  }
  return s + "</svg>";
}

function rowHTML(r, k) {
  const top = 'style="top:' + (k * H) + 'px"';
  if (r[0] === "s") return '<div class="row step" ' + top + '><span>' + r[1] + ". " + esc(r[2]) + '</span><span class="cb">' + esc(r[3]) + "</span></div>";
  if (r[0] === "f") return '<div class="row fold" data-k="' + k + '" ' + top + ' title="click to show the folded packets"><span class="ix"></span><span class="tm"></span>' +
    '<span class="sm">⋮ × ' + (r[1] + 2) + " in all: " + esc(r[4]) + " — " + r[1] + " repetitions folded (#" + r[2] + "–#" + r[3] + ") ▸</span></div>";
  if (r[0] === "r") return '<div class="row rep" data-k="' + k + '" ' + top + ' title="click to show the folded steps\' packets"><span class="sm">⋮ the ' +
    (r[1] === 1 ? "step" : r[1] + " steps") + " above repeat × " + r[2] + " more (packets #" + r[3] + "–#" + r[4] + ", folded) ▸</span></div>";
  const p = M.packets[byIndex.get(r[1])];
  const link = M.links[p.i] ? '<span class="ln" title="request ↔ response: #' + M.links[p.i] + '">↔ #' + M.links[p.i] + "</span>" : "";
  const c = changeAt.get(p.i);
  const ll = c ? '<span class="ll" title="link layer: ' + esc(c[1]) + " → " + esc(c[2]) + '">◆ ' + esc(c[2]) + "</span>" : "";
  return '<div class="row' + (p.i === selected ? " sel" : "") + (p.m ? " bad" : "") + '" data-i="' + p.i + '" ' + top + '><span class="ix">#' + p.i +
    '</span><span class="tm">' + p.t.toFixed(6) + "</span>" + arrowSVG(p.i) + '<span class="sm">' + esc(p.s) + "</span>" + link + ll + "</div>";
}

let drawn = "";
function render() {
  spacer.style.height = (rows.length * H) + "px";
  const first = Math.max(0, Math.floor(list.scrollTop / H) - OVERSCAN);
  const last = Math.min(rows.length, Math.ceil((list.scrollTop + list.clientHeight) / H) + OVERSCAN);
  const key = first + ":" + last + ":" + selected + ":" + rows.length;
  if (key === drawn) return;
  drawn = key;
  let html = "";
  for (let k = first; k < last; k++) html += rowHTML(rows[k], k);
  spacer.innerHTML = html;
}
let pending = false;
list.addEventListener("scroll", () => { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; render(); }); } });
window.addEventListener("resize", () => { drawn = ""; render(); });

spacer.addEventListener("click", e => {
  const row = e.target.closest(".row");
  if (!row) return;
  if (row.dataset.i) select(+row.dataset.i, false);
  else if (row.dataset.k) expand(+row.dataset.k);
});

// A folded run or repeated steps become their packets' rows.
function expand(k) {
  const r = rows[k];
  let add = [];
  if (r[0] === "f") add = r[5].map(i => ["p", i]);
  else if (r[0] === "r") add = M.packets.filter(p => p.i >= r[3] && p.i <= r[4]).map(p => ["p", p.i]);
  rows.splice(k, 1, ...add);
  reindex();
  drawn = "";
  render();
}

function reveal(i) {
  if (!rowOf.has(i)) {
    const k = rows.findIndex(r => (r[0] === "f" && r[5].includes(i)) || (r[0] === "r" && i >= r[3] && i <= r[4]));
    if (k >= 0) expand(k);
  }
  const k = rowOf.get(i);
  if (k === undefined) return;
  if (k * H < list.scrollTop || (k + 1) * H > list.scrollTop + list.clientHeight) list.scrollTop = Math.max(0, k * H - list.clientHeight / 3);
}

function select(i, scroll) {
  selected = i;
  pinned = null;
  if (scroll) reveal(i);
  drawn = "";
  render();
  showDetail(M.packets[byIndex.get(i)]);
}

function bytesOf(p) { const b = []; for (let k = 0; k < p.x.length; k += 2) b.push(p.x.substr(k, 2)); return b; }

function fieldHTML(f, layer) {
  const r = f.r ? ' data-r="' + f.r[0] + "," + f.r[1] + '"' : "";
  const tip = f.e ? ' title="' + esc(f.e) + '"' : (f.r ? ' title="octets ' + f.r[0] + "–" + (f.r[1] - 1) + '"' : "");
  let s = '<li><span class="f L-' + layer + (f.r ? "" : " norange") + (f.e ? " ex" : "") + '" data-layer="' + layer + '" data-name="' + esc(f.n) + '"' + r + tip + ">" +
    esc(f.n) + (f.v !== "" ? ": " + esc(f.v) : "") + "</span>" + (f.o ? ' <span class="nt">(' + esc(f.o) + ")</span>" : "");
  if (f.c) s += '<ul class="tree">' + f.c.map(c => fieldHTML(c, layer)).join("") + "</ul>";
  return s + "</li>";
}

function showDetail(p) {
  const d = document.getElementById("detail");
  let s = "<div><b>#" + p.i + "</b> " + esc(p.s) + "</div><div>" + p.y + (p.d ? (p.d === "s" ? ", sent" : ", received") : "") + ", " + (p.x.length / 2) + " octets, t=" + p.t.toFixed(6) + " s</div>";
  if (p.m) s += '<div style="color:#b00020">malformed: ' + esc(p.m) + "</div>";
  const c = changeAt.get(p.i);
  s += '<div id="llstate">link layer after this packet: <b>' + esc(stateAfter(p.i)) + "</b>" + (c ? " (was " + esc(c[1]) + ")" : "") + "</div>";
  const other = M.links[p.i];
  if (other) {
    const o = M.packets[byIndex.get(other)];
    s += '<span id="link" data-i="' + other + '">' + (other > p.i ? "→ answered by" : "← answers") + " #" + other + ": " + esc(o.s) + "</span>";
  }
  s += '<div class="layer"><span class="lt L-h4" data-r="0,1">H4</span><ul class="tree"><li><span class="f L-h4" data-layer="h4" data-name="packetIndicator" data-r="0,1">packetIndicator: 0x' + p.x.substr(0, 2) + "</span></li></ul></div>";
  for (const l of p.l) {
    s += '<div class="layer"><span class="lt L-' + l.n + '"' + (l.r ? ' data-r="' + l.r[0] + "," + l.r[1] + '"' : "") + ">" + esc(TITLES[l.n] || l.n) + "</span>";
    s += '<ul class="tree">' + l.f.map(f => fieldHTML(f, l.n)).join("") + "</ul></div>";
  }
  d.innerHTML = s;
  // Bands: each octet takes the colour of the innermost layer whose range holds it.
  const band = new Array(p.x.length / 2).fill("");
  band[0] = "h4";
  for (const l of p.l) if (l.r) for (let k = l.r[0]; k < l.r[1] && k < band.length; k++) band[k] = l.n;
  const b = bytesOf(p);
  let h = "";
  for (let k = 0; k < b.length; k++) {
    if (k % 16 === 0) h += (k ? "<br>" : "") + '<span class="ol">' + k.toString(16).padStart(4, "0") + "</span>";
    h += '<span class="b' + (band[k] ? " L-" + band[k] : "") + '" data-o="' + k + '">' + b[k] + "</span>";
  }
  document.getElementById("hex").innerHTML = h;
  const used = [...new Set(band.filter(x => x))];
  document.getElementById("legend").innerHTML = used.map(n => '<span class="L-' + n + '">' + esc(TITLES[n] || n) + "</span>").join("");
}

function highlight(range) {
  for (const e of document.querySelectorAll("#hex .hl")) e.classList.remove("hl");
  if (!range) return;
  const [a, z] = range.split(",").map(Number);
  for (const e of document.querySelectorAll("#hex span.b")) { const o = +e.dataset.o; if (o >= a && o < z) e.classList.add("hl"); }
}
const detail = document.getElementById("detail");
detail.addEventListener("mouseover", e => { const f = e.target.closest("[data-r]"); if (f) highlight(f.dataset.r); });
detail.addEventListener("mouseout", e => { if (e.target.closest("[data-r]")) highlight(pinned ? pinned.dataset.r : null); });
detail.addEventListener("click", e => {
  const link = e.target.closest("#link");
  if (link) { select(+link.dataset.i, true); return; }
  const f = e.target.closest("[data-r]");
  if (!f) return;
  for (const x of detail.querySelectorAll(".on")) x.classList.remove("on");
  pinned = f;
  f.classList.add("on");
  highlight(f.dataset.r);
});

// Filters: layer, opcode (any code field of the opcode kind), attribute handle, text.
const CODE_FIELDS = new Set(["opcode", "eventCode", "subeventCode", "code", "commandOpcode"]);
function walk(fields, fn) { for (const f of fields) { fn(f); if (f.c) walk(f.c, fn); } }
function hasOpcode(p, want) {
  let hit = false;
  for (const l of p.l) walk(l.f, f => { if (CODE_FIELDS.has(f.n) && parseInt(f.v, 16) === want) hit = true; });
  return hit;
}
function hasHandle(p, want) {
  let hit = false;
  for (const l of p.l) if (l.n === "att" || l.n === "gatt") walk(l.f, f => { if (/(^h|H)andle$/.test(f.n) && +f.v === want) hit = true; });
  return hit;
}
const texts = new Map();
function textOf(p) {
  let t = texts.get(p.i);
  if (t === undefined) {
    t = p.s;
    for (const l of p.l) walk(l.f, f => { t += " " + f.n + " " + f.v + (f.o ? " " + f.o : ""); });
    t = t.toLowerCase();
    texts.set(p.i, t);
  }
  return t;
}
function applyFilters() {
  const layer = document.getElementById("f-layer").value;
  const op = document.getElementById("f-opcode").value.trim();
  const hd = document.getElementById("f-handle").value.trim();
  const tx = document.getElementById("f-text").value.trim().toLowerCase();
  const opv = op ? parseInt(op.replace(/^0x/i, ""), 16) : null;
  const hdv = hd ? (/^0x/i.test(hd) ? parseInt(hd, 16) : parseInt(hd, 10)) : null;
  if (!layer && opv === null && hdv === null && !tx) {
    rows = grouped;
  } else {
    rows = M.packets.filter(p => (!layer || p.l.some(l => l.n === layer)) && (opv === null || hasOpcode(p, opv)) &&
      (hdv === null || hasHandle(p, hdv)) && (!tx || textOf(p).includes(tx))).map(p => ["p", p.i]);
  }
  const shown = rows === grouped ? M.packets.length : rows.length;
  document.getElementById("status").textContent = (rows === grouped ? "" : shown + " of ") + M.packets.length + " packets" + (rows === grouped ? ", by step" : " match");
  document.getElementById("status").dataset.shown = shown;
  reindex();
  list.scrollTop = 0;
  drawn = "";
  render();
  if (selected !== null) reveal(selected);
}
// Typing filters once it pauses: one pass over a large capture, not one per keystroke.
let typing = null;
for (const id of ["f-layer", "f-opcode", "f-handle", "f-text"]) document.getElementById(id).addEventListener("input", () => {
  clearTimeout(typing);
  typing = setTimeout(applyFilters, 150);
});

// The GATT tree: a handle filters the list.
function gattHTML() {
  if (!M.gatt.length) return '<span class="none">No ATT server traffic in the capture.</span>';
  let s = "";
  for (const srv of M.gatt) {
    s += "<div><b>Server on connection 0x" + srv.connection.toString(16).padStart(4, "0") + (srv.side ? " (" + (srv.side === "remote" ? "the capture's peer" : "this host") + ")" : "") + "</b></div><ul class=\"tree\">";
    if (!srv.services.length) s += '<li class="none">no service discovery in the capture</li>';
    for (const sv of srv.services) {
      s += '<li><span data-h="' + sv.h[0] + '">' + sv.h[0] + "–" + sv.h[1] + " " + esc(sv.n) + '</span><ul class="tree">';
      for (const c of sv.c) {
        s += '<li><span data-h="' + c.h[1] + '">' + c.h[1] + " " + esc(c.n) + '</span><ul class="tree">';
        for (const d of c.c) s += '<li><span data-h="' + d.h[0] + '">' + d.h[0] + " " + esc(d.n) + "</span></li>";
        s += "</ul></li>";
      }
      s += "</ul></li>";
    }
    s += "</ul>";
  }
  return s;
}
const gatt = document.getElementById("gatt");
gatt.innerHTML = gattHTML();
gatt.addEventListener("click", e => { const h = e.target.closest("[data-h]"); if (h) { document.getElementById("f-handle").value = h.dataset.h; applyFilters(); } });

reindex();
applyFilters();
window.explorer = { select, expand, applyFilters, rows: () => rows };
"""#
}
