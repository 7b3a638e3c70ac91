// The play page: the server is the game master (/play/api/*); this file only
// shows its state, animates the moves it reports, and sends the person's choices.
"use strict";

const params = new URLSearchParams(location.search);
const DELAY = Math.max(0, Number(params.get("delay") ?? 700));   // ms between shown moves
const SUITS = { s: "♠", c: "♣", d: "♦", h: "♥" };
const PATTERNS = {
  dragon: "sảnh rồng — a 10-card straight", four_twos: "tứ quý heo — all four 2s",
  same_color: "đồng màu — all one colour", three_triples: "three triples (3 sám cô)",
  five_pairs: "five pairs (5 đôi)", poor_hand: "sâm nghèo — no 10 to K", rich_hand: "sâm giàu — no 3 to 9",
};
const $ = (id) => document.getElementById(id);

const ui = { options: null, state: null, shown: 0, gameNo: 0, busy: false, selected: new Set(), view: null };
window.samloc = ui;   // for people curious in the console, and for the end-to-end test

function setBusy(b) { ui.busy = b; document.body.dataset.busy = b ? "1" : "0"; renderControls(); }
function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }
function seatName(s) { return ui.state && s === ui.state.seat ? "You" : `Seat ${s}`; }

// the engine writes the ten as "T"; the table shows "10" everywhere: on cards, in moves, in messages
function rankText(r) { return r === "T" ? "10" : r; }
// a move's engine name ("TT", "9TJ", "pass") as the cards read: "10 10", "9 10 J", "pass"
function moveName(name) { return /^[2-9TJQKA]+$/.test(name) ? [...name].map(rankText).join(" ") : name; }

function cardEl(code) {
  const el = document.createElement("div");
  const rank = code.slice(0, -1), suit = code.slice(-1).toLowerCase();
  el.className = "card" + (suit === "h" || suit === "d" ? " red" : "");
  el.dataset.card = code;
  el.innerHTML = `<span class="rank">${rankText(rank)}</span><span class="suit">${SUITS[suit]}</span>`;
  return el;
}
function cardsText(cards) { return cards.map((c) => rankText(c[0]) + SUITS[c.slice(-1).toLowerCase()]).join(" "); }

async function api(path, body) {
  const res = await fetch(path, body === undefined ? {} : {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  let data = null;
  try { data = await res.json(); } catch { data = { error: `the server answered ${res.status}` }; }
  if (!res.ok) throw new Error(data.error || `the server answered ${res.status}`);
  return data;
}

function message(text, error = false) {
  const m = $("message");
  // the engine names cards as "7h"; show them as on the table: "7♥"
  m.textContent = (text || "").replace(/\b([2-9TJQKA])([scdh])\b/g, (_, r, su) => rankText(r) + SUITS[su]);
  m.className = error ? "error" : "";
}

// ---- settings -------------------------------------------------------------------------
function fillSelect(sel, values, label, keep) {
  const old = keep ?? sel.value;
  sel.innerHTML = "";
  for (const v of values) {
    const o = document.createElement("option");
    o.value = String(v); o.textContent = label ? label(v) : String(v);
    sel.appendChild(o);
  }
  if (values.map(String).includes(String(old))) sel.value = String(old);
}
// a model trained on a preset with changed parameters lists it as an object: label it "preset*"
function presetName(r) { return typeof r === "string" ? r : r.preset + "*"; }
function rulesOf(label) { const s = ui.options.supports.find((x) => presetName(x.rules) === label); return s ? s.rules : label; }
function refreshSettings() {
  const sup = ui.options.supports.find((s) => presetName(s.rules) === $("preset").value) || ui.options.supports[0];
  fillSelect($("players"), sup.players, null, $("players").value || (sup.players.includes(4) ? 4 : sup.players.at(-1)));
  const n = Number($("players").value);
  fillSelect($("seat"), [...Array(n).keys()], (s) => `Seat ${s}`);
}

// ---- rendering ------------------------------------------------------------------------
function badges(el, s, v) {
  el.innerHTML = "";
  const add = (cls, text, title) => {
    const b = document.createElement("span");
    b.className = "badge " + cls; b.textContent = text; if (title) b.title = title; el.appendChild(b);
  };
  if (v.sizes[s] === 1 && !v.over) add("bao", "báo 1", "one card left");
  if (v.declarer === s) add("sam", "Sâm!", "declared Sâm");
  if (v.passed[s] && !v.over) add("passed", "passed");
  if (v.opener === s) add("opener", "opener");
}

// v is what the table shows now: the state, or a moment of the game being replayed
function renderTable(v) {
  const st = ui.state, n = st.players;
  const opp = $("opponents");
  if (opp.children.length !== n - 1) {
    opp.innerHTML = "";
    for (let k = 1; k < n; k++) {
      const s = (st.seat + k) % n;
      const p = document.createElement("div");
      p.className = "seat-panel"; p.id = `seat-${s}`;
      p.innerHTML = `<div class="seat-head"><span class="seat-name">Seat ${s} · bot</span><span class="badges"></span></div>
        <div class="seat-count"><div class="back"></div><span class="count"></span></div><div class="last-move"></div>`;
      opp.appendChild(p);
    }
  }
  for (let s = 0; s < n; s++) {
    const panel = s === st.seat ? $("me") : $(`seat-${s}`);
    panel.classList.toggle("to-act", !v.over && v.toAct === s);
    badges(s === st.seat ? $("my-badges") : panel.querySelector(".badges"), s, v);
    if (s !== st.seat) {
      panel.querySelector(".count").textContent = `${v.sizes[s]} card${v.sizes[s] === 1 ? "" : "s"}`;
      panel.querySelector(".last-move").textContent = v.lastMove[s] || "";
    }
  }
  const trick = $("trick-cards");
  trick.innerHTML = "";
  if (v.top) {
    v.top.cards.forEach((c) => trick.appendChild(cardEl(c)));
    $("trick-who").textContent = `${seatName(v.top.seat)} · ${moveName(v.top.move)}`;
  } else {
    $("trick-who").textContent = v.over || st.phase === "sam" ? "" : "new round: a lead is due";
  }
}

function moveText(e) {
  if (e.type === "sam") return e.declare ? "declares Sâm!" : "no Sâm";
  if (e.type === "pass") return "passes";
  return "plays " + cardsText(e.cards) + (e.chop ? " — chặt (chop)!" : "");
}

function logEntry(e) {
  const li = document.createElement("li");
  li.textContent = `${seatName(e.seat)}: ${moveText(e)}`;
  if (e.chop) li.className = "chop";
  else if (e.seat === ui.state.seat) li.className = "me";
  $("log").appendChild(li);
  for (const c of e.settled || []) {
    const s = document.createElement("li");
    s.className = "chop";
    s.textContent = `Chop settled: ${seatName(c.from)} pays ${seatName(c.to)} ${c.amount} lá`;
    $("log").appendChild(s);
  }
  $("log").scrollTop = $("log").scrollHeight;
}

function logSeparator(text) {
  const li = document.createElement("li");
  li.className = "sep"; li.textContent = text;
  $("log").appendChild(li);
}

function renderHand() {
  const hand = $("hand");
  hand.innerHTML = "";
  for (const c of ui.state.hand) {
    const el = cardEl(c);
    if (ui.selected.has(c)) el.classList.add("selected");
    el.addEventListener("click", () => {
      if (ui.selected.has(c)) ui.selected.delete(c); else ui.selected.add(c);
      el.classList.toggle("selected");
      message("");
    });
    hand.appendChild(el);
  }
}

function renderControls() {
  const st = ui.state;
  const mine = !!st && st.your_turn && !ui.busy;
  const samQ = mine && st.phase === "sam";
  $("sam-controls").hidden = !samQ;
  $("play-controls").hidden = samQ;
  for (const id of ["play", "pass", "clear", "sam-yes", "sam-no"]) $(id).disabled = !mine;
  $("new-game").disabled = ui.busy;
}

function renderTotals() {
  const st = ui.state, t = $("totals");
  t.innerHTML = `<tr><th>Seat</th><th class="num">Games</th><th class="num">Total</th></tr>`;
  for (let s = 0; s < st.players; s++) {
    const v = st.totals[s];
    t.insertAdjacentHTML("beforeend",
      `<tr><td>${seatName(s)}</td><td class="num">${st.played}</td><td class="num ${v > 0 ? "pos" : v < 0 ? "neg" : ""}">${v > 0 ? "+" : ""}${v}</td></tr>`);
  }
}

function resultTexts(st) {
  const r = st.result, w = r.winner, who = seatName(w);
  const did = (verb) => (w === st.seat ? `You ${verb}` : `${who} ${verb.replace(/^win/, "wins").replace(/^make/, "makes")}`);
  switch (r.end) {
    case "won": return [w === st.seat ? "You won!" : `${who} won`,
      "Played out all cards first." + (r.den != null ? ` ${seatName(r.den)} pays đền làng for everyone (báo 1 not respected).` : "")];
    case "instant_win": return [did("win instantly"), `Thắng trắng at the deal: ${PATTERNS[r.instant] || r.instant}.`];
    case "sam_success": return [did("make Sâm"), "Declared Sâm and played out the whole hand unbeaten."
      + (r.den != null ? ` ${seatName(r.den)} pays đền trắng (could have blocked).` : "")];
    case "sam_failed": return [`${seatName(st.declarer)}'s Sâm was broken`, `${who} blocked the Sâm and opens the next game.`];
    case "draw": return ["Draw", "No seat could lead (only 2s left where finishing with a 2 is forbidden)."];
    default: return [r.end, ""];
  }
}

function renderResult() {
  const st = ui.state, r = st.result;
  if (!r) { $("result").hidden = true; return; }
  const [title, detail] = resultTexts(st);
  $("result-title").textContent = title;
  $("result-detail").textContent = detail;
  let rows = `<tr><th>Seat</th><th class="num">This game</th><th class="num">Session total</th><th>Cards left</th></tr>`;
  for (let s = 0; s < st.players; s++) {
    const g = r.scores[s], t = st.totals[s];
    const left = (st.reveal && st.reveal[s]) ? cardsText(st.reveal[s]) : "";
    rows += `<tr><td>${seatName(s)}${s === r.winner ? ' <span class="badge sam">winner</span>' : ""}</td>
      <td class="num ${g > 0 ? "pos" : g < 0 ? "neg" : ""}">${g > 0 ? "+" : ""}${g}</td>
      <td class="num ${t > 0 ? "pos" : t < 0 ? "neg" : ""}">${t > 0 ? "+" : ""}${t}</td><td>${left}</td></tr>`;
  }
  $("result-table").innerHTML = rows;
  $("result-chops").innerHTML = r.chops.map((c) =>
    `<li>Chặt: ${seatName(c.from)} paid ${seatName(c.to)} ${c.amount} lá</li>`).join("");
  $("result").hidden = false;
}

function statusText(st) {
  if (st.result) return "Game over";
  if (st.your_turn) {
    if (st.phase === "sam") return "Your turn: Sâm or not?";
    return st.top ? `Your turn: beat ${moveName(st.top.move)} or pass` : "Your turn: lead any combination";
  }
  return `Seat ${st.to_act} to play…`;
}

function tableFromState(st) {
  const last = {};
  for (const e of st.events) last[e.seat] = moveText(e);
  const lastEv = st.events.at(-1);
  return { sizes: st.sizes, passed: lastEv ? lastEv.passed : Array(st.players).fill(false), top: st.top,
           toAct: st.to_act, declarer: st.declarer, opener: st.opener, over: !!st.result, lastMove: last };
}

// Show a new state: animate the moves not yet shown, one by one, then hand control over.
async function show(st) {
  const fresh = st.game !== ui.gameNo || st.session !== (ui.state && ui.state.session);
  ui.state = st;
  if (fresh) {
    ui.gameNo = st.game; ui.shown = 0; ui.selected.clear();
    $("log").innerHTML = ""; $("opponents").innerHTML = ""; $("result").hidden = true;
    const why = st.game > 1 ? ` (${seatName(st.opener)} ${st.opener === st.seat ? "open" : "opens"}: last game's winner)` : "";
    $("game-title").textContent = `Game ${st.game} · ${st.rules} · ${st.players} players${why}`;
    logSeparator(`Game ${st.game}: ${seatName(st.opener)} ${st.opener === st.seat ? "open" : "opens"}`);
  }
  $("bot-name").textContent = `bot: ${st.bot}`;
  renderTotals();
  const pending = st.events.slice(ui.shown);
  if (pending.length) {
    setBusy(true);
    const v = tableFromState(st);
    v.over = false;
    for (const e of pending) {
      v.sizes = e.sizes; v.passed = e.passed; v.top = e.top; v.lastMove[e.seat] = moveText(e);
      v.toAct = null;
      if (e.type === "sam" && e.declare) v.declarer = e.seat;
      renderTable(v);
      logEntry(e);
      ui.shown += 1;
      const panel = e.seat === st.seat ? $("me") : $(`seat-${e.seat}`);
      panel.classList.remove("flash"); void panel.offsetWidth; panel.classList.add("flash");
      $("status").className = e.chop ? "chop" : "";
      $("status").textContent = `${seatName(e.seat)} ${moveText(e)}`;
      if (e.seat === st.seat) renderHandAfter(e);
      if (DELAY) await sleep(e.seat === st.seat ? Math.min(250, DELAY) : DELAY);
    }
  }
  renderTable(tableFromState(st));
  renderHand();
  $("status").className = "";
  $("status").textContent = statusText(st);
  setBusy(false);
  if (st.result) { renderResult(); }
}

function renderHandAfter(e) {
  if (e.type !== "play") return;
  for (const c of e.cards) { ui.selected.delete(c); const el = $("hand").querySelector(`[data-card="${c}"]`); if (el) el.remove(); }
}

// ---- actions ------------------------------------------------------------------------------
async function send(body) {
  if (ui.busy || !ui.state) return;
  message("");
  setBusy(true);
  let st;
  try {
    st = await api(`/play/api/${ui.state.session}/move`, body);
  } catch (err) {
    setBusy(false);
    message(err.message, true);
    return;
  }
  ui.selected.clear();
  await show(st);
}

async function newGame(ev) {
  if (ev) ev.preventDefault();
  message("");
  setBusy(true);
  try {
    const body = { rules: rulesOf($("preset").value), players: Number($("players").value), seat: Number($("seat").value) };
    // ?seed=N replays the same deals, where the server allows it (samloc serve --allow-client-seed);
    // anything but digits is sent as given, for the server to name what is wrong with it
    const seed = params.get("seed");
    if (seed) body.seed = /^\d+$/.test(seed) ? Number(seed) : seed;
    ui.state = null;
    await show(await api("/play/api/new", body));
  } catch (err) {
    setBusy(false);
    message(err.message, true);
  }
}

async function playAgain() {
  $("result").hidden = true;
  setBusy(true);
  try { await show(await api(`/play/api/${ui.state.session}/again`, {})); }
  catch (err) { setBusy(false); message(err.message, true); }
}

async function init() {
  $("play").addEventListener("click", () => {
    if (!ui.selected.size) { message("Select the cards to play first (click them), or pass.", true); return; }
    send({ cards: [...ui.selected] });
  });
  $("pass").addEventListener("click", () => send({ move: "pass" }));
  $("clear").addEventListener("click", () => { ui.selected.clear(); renderHand(); message(""); });
  $("sam-yes").addEventListener("click", () => send({ move: "sam" }));
  $("sam-no").addEventListener("click", () => send({ move: "no_sam" }));
  $("again").addEventListener("click", playAgain);
  $("close-result").addEventListener("click", () => { $("result").hidden = true; });
  $("settings").addEventListener("submit", newGame);
  try {
    ui.options = await api("/play/api/options");
  } catch (err) { message(err.message, true); return; }
  fillSelect($("preset"), ui.options.supports.map((s) => presetName(s.rules)), null, params.get("rules") || "hoi_quan_bai");
  $("preset").addEventListener("change", refreshSettings);
  $("players").addEventListener("change", () => fillSelect($("seat"), [...Array(Number($("players").value)).keys()], (s) => `Seat ${s}`));
  refreshSettings();
  if (params.get("players")) { $("players").value = params.get("players"); $("players").dispatchEvent(new Event("change")); }
  if (params.get("seat")) $("seat").value = params.get("seat");
  await newGame();
}

init();
