// The adlnmt web page: POST /translate, show the translation, the n-best list and the source-attention heatmap;
// GET /model for the canonical ADL, training summary and architecture diagram. Plain JS, no libraries.
"use strict";

const $ = (id) => document.getElementById(id);
let withAlignments = true;  // false when GET /model says the engine gives none (CTranslate2)

function element(tag, attributes = {}, text = null) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text !== null) node.textContent = text;
  return node;
}

// White (weight 0) to dark blue (weight 1).
function colour(weight) {
  const w = Math.max(0, Math.min(1, weight));
  const r = Math.round(255 - w * (255 - 8)), g = Math.round(255 - w * (255 - 48)), b = Math.round(255 - w * (255 - 107));
  return `rgb(${r}, ${g}, ${b})`;
}

// Target pieces (rows, EOS last) × source pieces (columns); hovering a cell shows its weight.
function heatmap(result) {
  const wrapper = element("div", { class: "attention" });
  wrapper.appendChild(element("h3", {}, "Source attention (mean over layers and heads)"));
  const readout = element("div", { class: "hover-weight" }, "hover a cell to read its weight");
  const table = element("table", { class: "heatmap" });
  const head = table.createTHead().insertRow();
  head.appendChild(element("th"));
  for (const piece of result.source_pieces) head.appendChild(element("th", {}, piece));
  const body = table.createTBody();
  const rows = [...result.pieces, "</s>"];
  result.alignment.forEach((weights, i) => {
    const row = body.insertRow();
    row.appendChild(element("th", {}, rows[i] ?? ""));
    weights.forEach((weight, j) => {
      const label = `${rows[i]} ← ${result.source_pieces[j]}: ${weight.toFixed(3)}`;
      const cell = element("td", { title: label, "data-weight": weight.toFixed(4) });
      cell.style.background = colour(weight);
      cell.addEventListener("mouseenter", () => { readout.textContent = label; });
      row.appendChild(cell);
    });
  });
  wrapper.append(table, readout);
  return wrapper;
}

function showResults(response) {
  $("output").hidden = false;
  const warnings = $("warnings"), results = $("results");
  warnings.replaceChildren(...response.warnings.map((w) => element("p", { class: "warning" }, "warning: " + w)));
  results.replaceChildren();
  for (const result of response.translations) {
    if (result.source.trim() === "") continue;  // a blank line of the box
    const box = element("div", { class: "result" });
    box.appendChild(element("div", { class: "source" }, result.source));
    box.appendChild(element("div", { class: "translation" }, result.translation));
    if (result.nbest.length > 0) {
      box.appendChild(element("h3", {}, `${result.nbest.length}-best`));
      const list = element("ol", { class: "nbest" });
      for (const hyp of result.nbest) {
        const item = element("li", {}, hyp.translation);
        item.appendChild(element("span", { class: "score" }, `score ${hyp.score.toFixed(3)}, log p ${hyp.log_prob.toFixed(3)}`));
        list.appendChild(item);
      }
      box.appendChild(list);
    }
    if (result.alignment && result.source_pieces) box.appendChild(heatmap(result));
    results.appendChild(box);
  }
}

async function translate() {
  // Blank lines between sentences are sent (answered with an empty translation, not shown), so that a warning's
  // "input line N" is the box's line N; blank lines at the end are not sent.
  const lines = $("source").value.split("\n");
  while (lines.length > 0 && lines[lines.length - 1].trim() === "") lines.pop();
  const status = $("status");
  status.className = "";
  if (lines.length === 0) { status.textContent = "type a sentence first"; return; }
  const beam = parseInt($("beam").value, 10), nbest = parseInt($("nbest").value, 10);
  status.textContent = "translating…";
  $("translate").disabled = true;
  const started = performance.now();
  try {
    const reply = await fetch("/translate", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ text: lines, beam: beam, nbest: Math.min(nbest, beam), alignments: withAlignments }),
    });
    const data = await reply.json();
    if (!reply.ok) throw new Error(`${reply.status}: ${data.error ?? reply.statusText}`);
    showResults(data);
    status.textContent = `done in ${Math.round(performance.now() - started)} ms`;
  } catch (err) {
    status.textContent = String(err.message ?? err);
    status.className = "error";
  } finally {
    $("translate").disabled = false;
  }
}

async function loadModel() {
  try {
    const reply = await fetch("/model");
    const info = await reply.json();
    if (!reply.ok) throw new Error(info.error ?? reply.statusText);
    withAlignments = info.alignments !== false;
    const params = info.parameters === null ? "?" : info.parameters.toLocaleString("en");
    $("model-line").textContent = `${params} parameters, vocabularies ${info.src_vocab}/${info.tgt_vocab}, engine ${info.engine}` +
      (withAlignments ? "" : " (it gives no alignments: no attention heatmap)");
    $("adl").textContent = info.encoder === null ? "" : `encoder: ${info.encoder}\ndecoder: ${info.decoder}`;
    const t = info.training;
    if (t) {
      const parts = [`${t.updates} updates`, `${t.checkpoints} checkpoints`];
      if (t.best_valid_ppl !== undefined) parts.push(`best valid ppl ${t.best_valid_ppl.toFixed(2)} (update ${t.best_valid_ppl_update})`);
      if (t.best_valid_bleu !== undefined) parts.push(`best valid BLEU ${t.best_valid_bleu.toFixed(2)} (update ${t.best_valid_bleu_update})`);
      $("training").textContent = "Training: " + parts.join(", ");
    }
    if (info.diagram_svg) {
      $("diagram").innerHTML = info.diagram_svg;  // SVG drawn by Graphviz from the server's own model
    } else {
      $("diagram").replaceChildren(element("p", { class: "error" }, info.diagram_error ?? "no diagram"));
    }
  } catch (err) {
    $("model-line").textContent = "model description unavailable: " + (err.message ?? err);
  }
}

$("translate").addEventListener("click", translate);
$("source").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) translate();
});
loadModel();
