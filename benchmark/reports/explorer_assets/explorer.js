'use strict';
// The explorer: filters, sortable columns and each row's detail over the rows of the CSV
// (embedded as JSON by benchmark/reports/explorer.py); per section the aggregates across tasks,
// the performance profile and accuracy against compute, drawn as SVG; for a suite with a budget
// its comparison at equal training compute and accuracy against training FLOPs. Nothing is fetched.
const DATA = JSON.parse(document.getElementById('data').textContent);
const SVG = 'http://www.w3.org/2000/svg';
const ROWS = DATA.rows.map((row, index) => Object.assign({}, row, {index,
  csv: Object.fromEntries(DATA.columns.map((name, i) => [name, row.csv[i]])),
  seeds: row.seeds.map(s => Object.assign({}, s, {versions: DATA.shared[s.versions]}))}));

function el(tag, attrs, ...children) {
  const node = tag.startsWith('svg:') ? document.createElementNS(SVG, tag.slice(4))
                                      : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'text') node.textContent = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat(Infinity)) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

const num = text => {  // a CSV cell as a number; null where it holds none ('', 'NA')
  const value = text === '' || text === undefined || text === null ? NaN : Number(text);
  return Number.isFinite(value) ? value : null;
};
const fixed = (value, digits) => (value === null || Number.isNaN(value) ? '' : value.toFixed(digits));
const signed = (value, digits) => {
  if (value === null) return '';
  const text = value.toFixed(digits);
  return Number(text) === 0 ? '+' + text.replace('-', '') : (value > 0 ? '+' + text : text);
};
const pValue = text => { const p = num(text); return p === null ? '' : (p < 1e-4 ? '< 0.0001' : Number(p.toPrecision(2)).toString()); };
// A training step's count (encoder passes, GFLOP per image); '—' where the records hold none.
const counted = (text, digits) => (num(text) === null ? '—' : fixed(num(text), digits));
const device = hardware => hardware.split('; ').map(h => h.split(' (')[0]).join('; ');  // CPU and cores: the detail
const main = row => row.csv.main_metric;
const mean = row => num(row.csv[main(row) + '_mean']);
const variant = row => row.csv.overrides || row.csv.variant || 'as shipped';
const section = row => row.section;
const task = row => [row.section, row.csv.eval_data, row.csv.protocol].join('|');

// Columns: key, header, the value it sorts by, the cell it shows, narrow screens keep it or not.
const COLUMNS = [
  {key: 'section', head: 'section', wide: true, uniform: true, sort: section,
   cell: r => `${r.csv.backbone} · ${r.csv.pretrain_epochs} ep · ${r.csv.pretrain_data}`},
  {key: 'eval_data', head: 'eval data', sort: r => r.csv.eval_data, cell: r => r.csv.eval_data},
  {key: 'protocol', head: 'protocol', sort: r => r.csv.protocol_label, cell: r => r.csv.protocol_label},
  {key: 'method', head: 'method', sort: r => r.csv.method_label, cell: r => r.csv.method_label},
  {key: 'status', head: 'status', wide: true, uniform: true, sort: r => r.csv.status, cell: r => r.csv.status},
  {key: 'n', head: 'n', num: true, sort: r => num(r.csv[main(r) + '_n']), cell: r => r.csv[main(r) + '_n']},
  {key: 'mean', head: 'mean', num: true, sort: mean,
   cell: r => (r.csv[main(r) + '_mean'] === 'NA' ? 'NA' : fixed(mean(r), r.digits))},
  {key: 'seeds', head: 'seeds on the interval', plot: true, cell: r => valueStrip(r)},
  {key: 'delta', head: 'paired Δ', num: true, sort: r => num(r.csv.paired_delta_mean),
   cell: r => signed(num(r.csv.paired_delta_mean), r.digits)},
  {key: 'deltaplot', head: 'Δ per seed, interval', plot: true, cell: r => deltaStrip(r)},
  {key: 'test', head: 'p (Holm)', num: true, wide: true, sort: r => num(r.csv.p_holm),
   cell: r => (r.csv.p_holm === '' ? '' : `${pValue(r.csv.p_signflip)} (${pValue(r.csv.p_holm)})`)},
  {key: 'verdict', head: 'verdict', sort: r => r.csv.verdict, cell: r => r.csv.verdict},
  {key: 'family', head: 'family', wide: true, sort: r => r.csv.family,
   cell: r => (r.csv.family ? `${r.csv.family} (${r.csv.family_size})` : '')},
  {key: 'time', head: 's/epoch', num: true, wide: true, sort: r => num(r.csv.time_s_per_epoch),
   cell: r => fixed(num(r.csv.time_s_per_epoch), 1)},
  {key: 'memory', head: 'peak GB', num: true, wide: true, sort: r => num(r.csv.peak_memory_gb),
   cell: r => fixed(num(r.csv.peak_memory_gb), 2)},
  {key: 'passes', head: 'passes', num: true, sort: r => num(r.csv.encoder_passes),
   cell: r => counted(r.csv.encoder_passes, 2), about: 'encoder passes per training image in a training step'},
  {key: 'gflop', head: 'GFLOP', num: true, sort: r => num(r.csv.gflop_per_image),
   cell: r => counted(r.csv.gflop_per_image, 3), about: 'GFLOP per training image of a training step, forward and backward'},
  {key: 'hardware', head: 'on', wide: true, sort: r => r.csv.hardware, cell: r => device(r.csv.hardware),
   about: 'the hardware the time and memory were measured on (in full in the detail)'},
];

const FILTERS = [
  ['backbone', 'backbone', r => r.csv.backbone], ['epochs', 'pretraining epochs', r => r.csv.pretrain_epochs],
  ['pretrain', 'pretraining data', r => r.csv.pretrain_data], ['eval', 'evaluation data', r => r.csv.eval_data],
  ['protocol', 'protocol', r => r.csv.protocol_label],
  ['settings', 'protocol settings', r => r.csv.protocol_settings || 'not recorded'],
  ['method', 'method', r => r.csv.method], ['variant', 'variant', variant],
  ['status', 'status', r => r.csv.status], ['source', 'source', r => r.csv.source],
];

const state = {filters: {}, sort: null, descending: false, open: new Set()};
// A column whose every row says the same (one section, every status ok) is said in the
// filters and the detail, not in a column.
for (const column of COLUMNS) {
  column.hidden = Boolean(column.uniform) && new Set(ROWS.map(r => column.cell(r))).size < 2;
}
const cls = column => [column.num ? 'num' : '', column.wide ? 'wide' : '', column.hidden ? 'hidden' : ''].join(' ').trim() || null;

// -- strips: a row's seeds on its interval, and its paired differences on theirs ---------------
const SCALES = {};
for (const row of ROWS) {  // one scale per task (section, evaluation data, protocol)
  const values = row.seeds.map(s => s.value).filter(v => v !== null);
  for (const key of ['ci_low', 'ci_high', 'range_low', 'range_high']) {
    if (num(row.csv[key]) !== null) values.push(num(row.csv[key]));
  }
  if (mean(row) !== null) values.push(mean(row));
  const scale = SCALES[task(row)] || (SCALES[task(row)] = {lo: Infinity, hi: -Infinity, d: 0});
  for (const v of values) { scale.lo = Math.min(scale.lo, v); scale.hi = Math.max(scale.hi, v); }
  for (const s of row.seeds) if (s.diff !== null) scale.d = Math.max(scale.d, Math.abs(s.diff));
  for (const key of ['paired_ci_low', 'paired_ci_high']) {
    if (num(row.csv[key]) !== null) scale.d = Math.max(scale.d, Math.abs(num(row.csv[key])));
  }
}
const W = 120, H = 18;

function strip(label, x, bar, points, centre, colour, zero) {
  const svg = el('svg:svg', {class: 'strip', width: W, height: H, viewBox: `0 0 ${W} ${H}`,
                             role: 'img', 'aria-label': label});
  if (zero !== undefined) svg.append(el('svg:line', {x1: x(zero), x2: x(zero), y1: 1, y2: H - 1, stroke: 'rgb(153,153,153)', 'stroke-dasharray': '2 2'}));
  if (bar) svg.append(el('svg:line', {x1: x(bar[0]), x2: x(bar[1]), y1: H / 2, y2: H / 2, stroke: colour, 'stroke-width': 3, 'stroke-linecap': 'round', opacity: 0.55}));
  for (const p of points) svg.append(el('svg:circle', {cx: x(p), cy: H / 2, r: 2.6, fill: 'none', stroke: 'rgb(51,51,51)'}));
  if (centre !== null) svg.append(el('svg:rect', {x: x(centre) - 1, y: 2, width: 2, height: H - 4, fill: colour}));
  return svg;
}

function valueStrip(row) {
  const scale = SCALES[task(row)];
  if (mean(row) === null || !Number.isFinite(scale.lo)) return '';
  const pad = (scale.hi - scale.lo) * 0.05 || 0.5;
  const x = v => 4 + (W - 8) * (v - scale.lo + pad) / (scale.hi - scale.lo + 2 * pad);
  const ci = num(row.csv.ci_low) !== null ? [num(row.csv.ci_low), num(row.csv.ci_high)] : null;
  const range = num(row.csv.range_low) !== null ? [num(row.csv.range_low), num(row.csv.range_high)] : null;
  const values = row.seeds.map(s => s.value).filter(v => v !== null);
  const what = ci ? `interval ${fixed(ci[0], row.digits)} to ${fixed(ci[1], row.digits)}` : range ? `seeds' range` : 'one value';
  return strip(`${values.length} seed(s), mean ${fixed(mean(row), row.digits)}, ${what}`, x, ci || range, values, mean(row), ci ? '#1f5fbf' : '#8a8a94');
}

function deltaStrip(row) {
  const delta = num(row.csv.paired_delta_mean);
  if (delta === null) return '';
  const span = SCALES[task(row)].d * 1.1 || 1;
  const x = v => W / 2 + (W / 2 - 4) * v / span;
  const diffs = row.seeds.map(s => s.diff).filter(v => v !== null);
  const ci = num(row.csv.paired_ci_low) !== null ? [num(row.csv.paired_ci_low), num(row.csv.paired_ci_high)] : null;
  return strip(`paired Δ ${signed(delta, row.digits)} over ${diffs.length} seed(s)` + (ci ? `, interval ${signed(ci[0], row.digits)} to ${signed(ci[1], row.digits)}` : ''),
               x, ci || (diffs.length > 1 ? [Math.min(...diffs), Math.max(...diffs)] : null), diffs, delta, ci ? '#1b7f3b' : '#8a8a94', 0);
}

// -- filters, sorting and the table ---------------------------------------------------------
function buildFilters() {
  const form = document.getElementById('filters');
  for (const [key, label, value] of FILTERS) {
    const options = [...new Set(ROWS.map(value))].sort((a, b) => String(a).localeCompare(String(b), undefined, {numeric: true}));
    const select = el('select', {id: `filter-${key}`, name: key, onchange: () => { state.filters[key] = select.value; render(); }},
                      el('option', {value: '', text: `all (${options.length})`}), options.map(o => el('option', {value: o, text: o})));
    form.append(el('label', {for: `filter-${key}`}, label, select));
  }
  form.append(el('button', {type: 'reset', onclick: () => { state.filters = {}; setTimeout(render); }, text: 'clear filters'}));
}

function visible() {
  let rows = ROWS.filter(r => FILTERS.every(([key, , value]) => !state.filters[key] || String(value(r)) === state.filters[key]));
  if (state.sort) {
    const column = COLUMNS.find(c => c.key === state.sort);
    const missing = v => v === null || v === undefined || v === '' || Number.isNaN(v);
    rows = rows.slice().sort((a, b) => {
      const va = column.sort(a), vb = column.sort(b);
      if (missing(va) || missing(vb)) return missing(va) - missing(vb) || a.index - b.index;
      const order = typeof va === 'number' ? va - vb : String(va).localeCompare(String(vb), undefined, {numeric: true});
      return (state.descending ? -order : order) || a.index - b.index;
    });
  }
  return rows;
}

function buildHead() {
  const head = document.getElementById('head');
  head.append(el('th', {scope: 'col'}, el('span', {class: 'skip', text: 'detail'})));
  for (const column of COLUMNS) {
    const th = el('th', {scope: 'col', class: cls(column), 'data-col': column.key});
    if (column.sort) {
      th.setAttribute('aria-sort', 'none');
      th.append(el('button', {type: 'button', onclick: () => sortBy(column.key), text: column.head, title: column.about}));
    } else th.textContent = column.head;
    head.append(th);
  }
}

function sortBy(key) {
  state.descending = state.sort === key ? !state.descending : false;
  state.sort = key;
  for (const th of document.querySelectorAll('#head th[data-col]')) {
    if (th.hasAttribute('aria-sort')) th.setAttribute('aria-sort', th.dataset.col === key ? (state.descending ? 'descending' : 'ascending') : 'none');
  }
  render();
}

function render() {
  const body = document.getElementById('body');
  const rows = visible();
  body.replaceChildren();
  for (const row of rows) {
    const open = state.open.has(row.index);
    const tr = el('tr', {'data-index': row.index},
      el('td', {}, el('button', {type: 'button', class: 'open', 'aria-expanded': String(open), 'aria-controls': `detail-${row.index}`,
                                 'aria-label': `detail of ${row.csv.method_label}, ${row.csv.protocol_label} on ${row.csv.eval_data}`,
                                 onclick: () => toggle(row.index), text: open ? '−' : '+'})));
    for (const column of COLUMNS) {
      const value = column.cell(row);
      const td = el('td', {'data-col': column.key, class: cls(column), title: column.key === 'hardware' ? row.csv.hardware : null});
      if (column.key === 'verdict' && value) td.className = `verdict-${value.split(' ')[0]}`;
      td.append(value);
      tr.append(td);
    }
    body.append(tr);
    if (open) body.append(el('tr', {class: 'detail', id: `detail-${row.index}`}, el('td', {colspan: COLUMNS.length + 1}, detail(row))));
  }
  document.getElementById('count').textContent = `${rows.length} of ${ROWS.length} rows`;
}

function toggle(index) {  // the row's detail inserted or removed; the rest of the table stays
  const tr = document.querySelector(`#body tr[data-index="${index}"]`);
  const button = tr.querySelector('button.open');
  if (state.open.has(index)) {
    state.open.delete(index);
    document.getElementById(`detail-${index}`).remove();
  } else {
    state.open.add(index);
    tr.after(el('tr', {class: 'detail', id: `detail-${index}`}, el('td', {colspan: COLUMNS.length + 1}, detail(ROWS[index]))));
  }
  button.setAttribute('aria-expanded', String(state.open.has(index)));
  button.textContent = state.open.has(index) ? '−' : '+';
  button.focus();
}

// -- a row's detail --------------------------------------------------------------------------
function pairs(entries) {
  return el('dl', {}, entries.filter(([, v]) => v !== '' && v !== null && v !== undefined).map(([k, v]) => [el('dt', {text: k}), el('dd', {}, v)]));
}

function detail(row) {
  const c = row.csv;
  const links = s => Object.entries(s.links).map(([name, href], i) => [i ? ' · ' : '', el('a', {href, text: name})]);
  const seeds = el('table', {class: 'seeds'},
    el('caption', {text: `Per seed: ${c.main_metric}` + (c.delta_baseline ? `, and the paired difference with ${c.delta_baseline}` : '')}),
    el('thead', {}, el('tr', {}, ['seed', c.main_metric, 'Δ', 's/epoch', 'peak GB', 'commit', 'files'].map(h => el('th', {scope: 'col', text: h})))),
    el('tbody', {}, row.seeds.map(s => el('tr', {'data-seed': s.seed},
      el('td', {class: 'num', text: s.seed}), el('td', {class: 'num', 'data-col': 'value', text: s.value === null ? s.na : fixed(s.value, row.digits)}),
      el('td', {class: 'num', 'data-col': 'diff', text: s.diff === null || s.diff === undefined ? '' : signed(s.diff, row.digits)}),
      el('td', {class: 'num', 'data-col': 'time', text: fixed(s.time_s_per_epoch, 1)}), el('td', {class: 'num', 'data-col': 'memory', text: fixed(s.peak_memory_gb, 2)}),
      el('td', {text: s.commit ? s.commit.slice(0, 10) + (s.dirty ? ' (dirty)' : '') : ''}), el('td', {}, links(s))))));
  const overrides = Object.entries(row.overrides).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(', ');
  const versions = [...new Set(row.seeds.map(s => Object.entries(s.versions).map(([k, v]) => `${k} ${v}`).join(', ')))].join(' | ');
  return el('div', {class: 'detail-grid'}, el('div', {}, seeds),
    pairs([['section', row.section], ['row', c.method_label], ['method', c.method], ['overrides', overrides || 'none (as shipped)'],
           ['protocol', c.protocol_label], ['protocol settings', c.protocol_settings || 'not recorded'], ['status', c.status],
           ['mean ± std', mean(row) === null ? '' : fixed(mean(row), row.digits)
             + (num(c[c.main_metric + '_std']) === null ? '' : ` ± ${fixed(num(c[c.main_metric + '_std']), row.digits)}`) + ` (n=${c[c.main_metric + '_n']})`],
           ['interval', c.ci_low !== '' ? `[${fixed(num(c.ci_low), row.digits)}, ${fixed(num(c.ci_high), row.digits)}] (${(100 * num(c.ci_level)).toPrecision(3)}%)`
             : c.range_low !== '' && num(c[c.main_metric + '_n']) > 1 ? `range [${fixed(num(c.range_low), row.digits)}, ${fixed(num(c.range_high), row.digits)}]` : ''],
           ['setting', c.setting_sha256 ? c.setting_sha256.slice(0, 12) : ''], ['versions', versions], ['note', c.note]]),
    pairs([['time per epoch', c.time_s_per_epoch === '' ? '' : `${fixed(num(c.time_s_per_epoch), 1)} s`], ['peak memory', c.peak_memory_gb === '' ? '' : `${fixed(num(c.peak_memory_gb), 2)} GB`],
           ['encoder passes', num(c.encoder_passes) === null ? '— (not counted in its records)' : `${counted(c.encoder_passes, 2)} per training image, through the encoders`],
           ['GFLOP', num(c.gflop_per_image) === null ? '— (not counted in its records)' : `${counted(c.gflop_per_image, 3)} per training image, a training step (forward and backward)`],
           ['hardware', c.hardware], ['total batch', c.total_batch]]),
    pairs([['baseline', c.delta_baseline], ['paired Δ', c.paired_delta_mean === '' ? '' : `${signed(num(c.paired_delta_mean), row.digits)} over ${c.paired_delta_n} seed(s)`],
           ['Δ interval', c.paired_ci_low === '' ? '' : `[${signed(num(c.paired_ci_low), row.digits)}, ${signed(num(c.paired_ci_high), row.digits)}] (${(100 * num(c.paired_ci_level)).toPrecision(3)}%)`],
           ['sign-flip p', pValue(c.p_signflip)], ['Holm p', pValue(c.p_holm)], ['verdict', c.verdict], ['family', c.family ? `${c.family} (${c.family_size})` : ''],
           ['P(better)', c.p_improve === '' ? '' : `${fixed(num(c.p_improve), 2)} [${fixed(num(c.p_improve_low), 2)}, ${fixed(num(c.p_improve_high), 2)}]`],
           ['MDE', c.mde], ['seeds for a verdict', c.seeds_for_verdict], ['left out', row.left_out.join('; ')], ['ours − paper', c.paper_delta]]));
}

// -- sections: aggregates across tasks, the performance profile, accuracy against compute -----
function axes(svg, x, y, xs, ys, xlabel, ylabel, box) {
  const [left, top, right, bottom] = box;
  svg.append(el('svg:line', {x1: left, x2: right, y1: bottom, y2: bottom, stroke: 'rgb(51,51,51)'}), el('svg:line', {x1: left, x2: left, y1: top, y2: bottom, stroke: 'rgb(51,51,51)'}));
  for (const t of xs) svg.append(el('svg:text', {x: x(t), y: bottom + 14, 'text-anchor': 'middle', 'font-size': 10, text: Number(t.toPrecision(4))}));
  for (const t of ys) svg.append(el('svg:text', {x: left - 4, y: y(t) + 3, 'text-anchor': 'end', 'font-size': 10, text: Number(t.toPrecision(3))}));
  svg.append(el('svg:text', {x: (left + right) / 2, y: bottom + 28, 'text-anchor': 'middle', 'font-size': 11, text: xlabel}));
  svg.append(el('svg:text', {x: 12, y: (top + bottom) / 2, 'font-size': 11, 'text-anchor': 'middle', transform: `rotate(-90 12 ${(top + bottom) / 2})`, text: ylabel}));
}
const ticks = (lo, hi, n) => Array.from({length: n}, (_, i) => lo + (hi - lo) * i / (n - 1));
const COLOURS = ['#1f5fbf', '#d9730d', '#1b7f3b', '#b3261e', '#7b3fb5', '#7a5230', '#c2428f', '#5b5b66'];

function profileFigure(title, data) {
  const box = [52, 10, 500, 250], svg = el('svg:svg', {viewBox: '0 0 520 290', role: 'img', 'aria-label': `performance profile of ${title}`});
  const lo = data.taus[0], hi = data.taus[data.taus.length - 1];
  const x = v => box[0] + (box[2] - box[0]) * (v - lo) / (hi - lo), y = v => box[3] - (box[3] - box[1]) * v;
  axes(svg, x, y, ticks(lo, hi, 5), [0, 0.5, 1], 'top-1 % (τ)', 'share of seeds above τ', box);
  data.profile.forEach((m, i) => {
    const colour = COLOURS[i % COLOURS.length];
    if (m.band) svg.append(el('svg:path', {d: 'M' + data.taus.map((t, j) => `${x(t)},${y(m.band[1][j])}`).join('L') + 'L' + data.taus.map((t, j) => `${x(t)},${y(m.band[0][j])}`).reverse().join('L') + 'Z', fill: colour, opacity: 0.15}));
    svg.append(el('svg:path', {d: 'M' + data.taus.map((t, j) => `${x(t)},${y(m.share[j])}`).join('L'), fill: 'none', stroke: colour, 'stroke-width': 2}));
  });
  return el('figure', {class: 'figure'}, svg, el('figcaption', {class: 'legend'}, data.profile.map((m, i) => el('span', {style: `color:${COLOURS[i % COLOURS.length]}`, text: `— ${m.method}`}))));
}

const COMPUTE = {gflop: ['gflop_per_image', 'GFLOP per training image'], passes: ['encoder_passes', 'encoder passes per training image'],
                 time: ['time_s_per_epoch', 'time per epoch (s)'], memory: ['peak_memory_gb', 'peak memory (GB)']};

function computeFigure(title, rows, which) {
  const [key, label] = COMPUTE[which];
  const points = rows.filter(r => mean(r) !== null && num(r.csv[key]) !== null && r.csv.source === 'this suite' && r.csv.main_metric === 'top1');
  const box = [52, 10, 500, 250], svg = el('svg:svg', {viewBox: '0 0 520 290', role: 'img', 'aria-label': `top-1 against ${label}, ${title}`});
  if (!points.length) return el('p', {class: 'note', text: `No row here records its ${label}.`});
  const xsv = points.map(r => num(r.csv[key])), ysv = points.map(mean);
  const pad = (a, b) => (b - a) * 0.08 || Math.abs(a) * 0.05 || 0.5;
  const xlo = Math.min(...xsv) - pad(Math.min(...xsv), Math.max(...xsv)), xhi = Math.max(...xsv) + pad(Math.min(...xsv), Math.max(...xsv));
  const ylo = Math.min(...ysv) - pad(Math.min(...ysv), Math.max(...ysv)), yhi = Math.max(...ysv) + pad(Math.min(...ysv), Math.max(...ysv));
  const x = v => box[0] + (box[2] - box[0]) * (v - xlo) / (xhi - xlo), y = v => box[3] - (box[3] - box[1]) * (v - ylo) / (yhi - ylo);
  axes(svg, x, y, ticks(xlo, xhi, 5), ticks(ylo, yhi, 4), label, 'top-1 (%)', box);
  const protocols = [...new Set(points.map(r => r.csv.protocol_label))];
  for (const r of points) {
    const colour = COLOURS[protocols.indexOf(r.csv.protocol_label) % COLOURS.length];
    svg.append(el('svg:circle', {cx: x(num(r.csv[key])), cy: y(mean(r)), r: 4, fill: colour, opacity: 0.8},
                  el('svg:title', {text: `${r.csv.method_label}, ${r.csv.protocol_label} on ${r.csv.eval_data}: ${fixed(mean(r), r.digits)} at ${r.csv[key]}`})));
    if (points.length <= 12) {  // few points: each named beside it
      svg.append(el('svg:text', {x: x(num(r.csv[key])) + 6, y: y(mean(r)) + 3, 'font-size': 9, fill: 'rgb(51,51,51)', text: r.csv.method_label}));
    }
  }
  return el('figure', {class: 'figure'}, svg, el('figcaption', {class: 'legend'}, protocols.map((p, i) => el('span', {style: `color:${COLOURS[i % COLOURS.length]}`, text: `● ${p}`}))));
}

function aggregateTable(data) {
  const ci = (value, interval, digits, sign) => {
    const text = v => (sign ? signed(v, digits) : fixed(v, digits));
    if (!interval) return text(value);
    return text(value) + (text(interval[0]) === text(interval[1]) ? ' (every resample alike: no interval)'
                                                                  : ` [${text(interval[0])}, ${text(interval[1])}]`);
  };
  return el('table', {class: 'aggregates'},
    el('caption', {text: `Across tasks; Δ in top-1 points seed by seed against the baseline; 95% bootstrap intervals from ${data.min_seeds} seeds`}),
    el('thead', {}, el('tr', {}, ['method', 'vs', 'tasks', 'paired seeds', 'IQM Δ', 'mean Δ', 'P(improve)'].map(h => el('th', {scope: 'col', text: h})))),
    el('tbody', {}, data.lines.map(l => el('tr', {}, el('td', {text: l.method}), el('td', {text: l.baseline}), el('td', {text: l.tasks.join('; ')}), el('td', {class: 'num', text: l.seeds}),
      el('td', {class: 'num', text: ci(l.iqm, l.iqm_ci, 2, true)}), el('td', {class: 'num', text: ci(l.mean, l.mean_ci, 2, true)}), el('td', {class: 'num', text: ci(l.improve, l.improve_ci, 2, false)})))));
}

function buildSections() {
  const host = document.getElementById('sections');
  const titles = [...new Set(ROWS.map(section))];
  for (const title of titles) {
    const rows = ROWS.filter(r => r.section === title), data = DATA.sections[title];
    const id = `section-${titles.indexOf(title)}`;
    const holder = el('div', {class: 'figure'});
    const select = el('select', {id: `${id}-compute`, onchange: () => holder.replaceChildren(computeFigure(title, rows, select.value))},
                      Object.entries(COMPUTE).map(([value, [, text]]) => el('option', {value, text})));
    select.value = rows.some(r => num(r.csv.gflop_per_image) !== null) ? 'gflop' : 'time';  // counted, else timed
    holder.append(computeFigure(title, rows, select.value));
    host.append(el('section', {'aria-labelledby': id},
      el('h2', {id, text: title}),
      data ? el('div', {class: 'scroll', tabindex: 0, 'aria-label': 'aggregates across tasks, scrollable'}, aggregateTable(data)) : el('p', {class: 'note', text: 'No method compared with its baseline over the tasks here: no aggregates.'}),
      el('div', {class: 'figures'}, data ? profileFigure(title, data) : null,
         el('div', {class: 'figure'}, el('label', {for: `${id}-compute`, text: 'Accuracy against '}, select), holder))));
  }
}

// -- at equal training compute (a suite with a budget): the leaderboard's verdicts and rows, and
// accuracy against total training FLOPs, each method's equal-epoch and equal-compute points joined
const MARKS = {'equal epochs': 'circle', 'equal compute': 'square', 'equal epochs and equal compute': 'diamond'};

function mark(kind, cx, cy, colour, title) {
  const d = kind === 'square' ? `M${cx - 4},${cy - 4}h8v8h-8Z` : kind === 'diamond' ? `M${cx},${cy - 5.5}l5.5,5.5l-5.5,5.5l-5.5,-5.5Z` : null;
  const attrs = {fill: kind === 'circle' ? colour : 'white', stroke: colour, 'stroke-width': 2, 'data-regime': kind};
  return d ? el('svg:path', Object.assign({d}, attrs), el('svg:title', {text: title}))
           : el('svg:circle', Object.assign({cx, cy, r: 4}, attrs), el('svg:title', {text: title}));
}

function tradeoffFigure(data, task) {
  const lines = data.tasks[task];
  const points = lines.flatMap(l => l.points);
  const box = [52, 10, 500, 250], svg = el('svg:svg', {viewBox: '0 0 520 290', role: 'img', 'aria-label': `top-1 against total training FLOPs, ${task}`});
  const xsv = points.map(p => p.flops).concat([data.budget_flops]), ysv = points.map(p => p.top1);
  const pad = (a, b) => (b - a) * 0.08 || Math.abs(a) * 0.05 || 0.5;
  const span = (v) => [Math.min(...v) - pad(Math.min(...v), Math.max(...v)), Math.max(...v) + pad(Math.min(...v), Math.max(...v))];
  const [xlo, xhi] = span(xsv), [ylo, yhi] = span(ysv);
  const unit = 10 ** (3 * Math.floor(Math.log10(Math.max(...xsv)) / 3)), units = {1e9: 'GFLOP', 1e12: 'TFLOP', 1e15: 'PFLOP', 1e18: 'EFLOP'};
  const name = units[unit] ? units[unit] : 'FLOP', scale = units[unit] ? unit : 1;
  const x = v => box[0] + (box[2] - box[0]) * (v - xlo) / (xhi - xlo), y = v => box[3] - (box[3] - box[1]) * (v - ylo) / (yhi - ylo);
  axes(svg, v => x(v * scale), y, ticks(xlo / scale, xhi / scale, 5), ticks(ylo, yhi, 4), `total training compute (${name})`, 'top-1 (%)', box);
  svg.append(el('svg:line', {class: 'budget', x1: x(data.budget_flops), x2: x(data.budget_flops), y1: box[1], y2: box[3], stroke: 'rgb(153,153,153)', 'stroke-dasharray': '4 3'},
                el('svg:title', {text: `the budget: ${data.budget}`})));
  lines.forEach((line, i) => {
    const colour = COLOURS[i % COLOURS.length];
    if (line.points.length > 1) svg.append(el('svg:path', {d: 'M' + line.points.map(p => `${x(p.flops)},${y(p.top1)}`).join('L'), fill: 'none', stroke: colour, 'stroke-width': 1.5}));
    for (const p of line.points) {
      svg.append(mark(MARKS[p.regime], x(p.flops), y(p.top1), colour, `${line.label} at ${p.epochs} epochs (${p.regime}): top-1 ${fixed(p.top1, 2)} over ${p.seeds} seed(s), ${p.compute}`));
    }
  });
  return el('figure', {class: 'figure'}, svg, el('figcaption', {class: 'legend'},
    lines.map((l, i) => el('span', {style: `color:${COLOURS[i % COLOURS.length]}`, text: `— ${l.label}`})),
    el('span', {text: '● equal epochs · ■ equal compute · ◆ both · dashed: the budget'})));
}

function buildEqualCompute() {
  const data = DATA.equal_compute;
  if (!data) return;
  const rows = data.rows.map(r => Object.assign({}, r, {csv: Object.fromEntries(DATA.columns.map((name, i) => [name, r.csv[i]]))}));
  const cell = (text, numeric) => el('td', {class: numeric ? 'num' : null, text});
  const table = el('table', {class: 'equal-compute'},
    el('caption', {text: `Each method against the baseline on the same training FLOPs (the budget: ${data.budget}); Δ paired seed by seed`}),
    el('thead', {}, el('tr', {}, ['method', 'protocol', 'eval data', 'n', 'mean', 'paired Δ [interval]', 'p (Holm)', 'verdict', 'family', 'training compute'].map(h => el('th', {scope: 'col', text: h})))),
    el('tbody', {}, rows.map(r => {
      const c = r.csv, m = c.main_metric, value = num(c[m + '_mean']);
      const delta = num(c.paired_delta_mean) === null ? '' : signed(num(c.paired_delta_mean), r.digits)
        + (num(c.paired_ci_low) === null ? '' : ` [${signed(num(c.paired_ci_low), r.digits)}, ${signed(num(c.paired_ci_high), r.digits)}]`);
      const verdict = cell(c.verdict);
      if (c.verdict) verdict.className = `verdict-${c.verdict.split(' ')[0]}`;
      return el('tr', {}, cell(c.method_label), cell(c.protocol_label), cell(c.eval_data), cell(c[m + '_n'], true),
                cell(value === null ? c[m + '_mean'] : fixed(value, r.digits), true), cell(delta, true),
                cell(c.p_holm === '' ? '' : `${pValue(c.p_signflip)} (${pValue(c.p_holm)})`, true), verdict,
                cell(c.family ? `${c.family} (${c.family_size})` : ''), cell(r.compute));
    })));
  const tasks = Object.keys(data.tasks);
  const holder = el('div', {class: 'figure'});
  const select = el('select', {id: 'equal-compute-task', onchange: () => holder.replaceChildren(tradeoffFigure(data, select.value))},
                    tasks.map(t => el('option', {value: t, text: t})));
  if (tasks.length) holder.append(tradeoffFigure(data, tasks[0]));
  document.getElementById('sections').append(el('section', {id: 'equal-compute', 'aria-labelledby': 'equal-compute-title'},
    el('h2', {id: 'equal-compute-title', text: 'At equal training compute'}),
    el('p', {text: data.intro}),
    data.verdicts.length ? el('ul', {class: 'verdicts'}, data.verdicts.map(v => el('li', {text: v}))) : null,
    el('div', {class: 'scroll', tabindex: 0, 'aria-label': 'the rows at equal training compute, scrollable'}, table),
    el('div', {class: 'figures'}, tasks.length
      ? el('div', {class: 'figure'}, el('label', {for: 'equal-compute-task', text: 'Top-1 against total training compute: '}, select), holder)
      : el('p', {class: 'note', text: 'No row here records its training FLOPs: no plot.'})),
    data.not_counted.length ? el('p', {class: 'note', id: 'not-counted', text: `Training compute not counted (left out of the plot): ${data.not_counted.join('; ')}.`}) : null));
}

document.getElementById('about').textContent = `Generated ${DATA.generated} from the records; ${ROWS.length} rows, the same as leaderboard.csv.`;
buildFilters();
buildHead();
render();
buildSections();
buildEqualCompute();
