// rlds-suite browse: the episode list (sortable, filterable, paginated by the server), dataset
// statistics, and an episode view (#episode=ID) played by RLDSPlayer (player.js).
'use strict';

const $ = (id) => document.getElementById(id);
const list = {offset: 0, sort: 'id', order: 'asc', matching: 0, metadataKeys: []};
let player = null;
let polling = null;

async function getJson(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${response.status}: ${await response.text()}`);
  return response.json();
}

function cell(text, cls) { const td = document.createElement('td'); td.textContent = text; if (cls) td.className = cls; return td; }

function metadataText(metadata) {
  return Object.entries(metadata).map(([k, v]) => `${k}=${RLDSPlayer.show(v)}`).join('  ');
}

async function loadList() {
  const form = new FormData($('filters'));
  const params = new URLSearchParams({offset: list.offset, sort: list.sort, order: list.order});
  for (const [k, v] of form.entries()) if (v !== '') params.set(k, v);
  let page;
  try { page = await getJson('/api/episodes?' + params); } catch (e) { $('page-info').textContent = e.message; return null; }
  list.matching = page.matching;
  const body = $('episode-table').querySelector('tbody');
  body.innerHTML = '';
  for (const ep of page.episodes) {
    const tr = document.createElement('tr');
    tr.dataset.id = ep.id;
    tr.append(cell(ep.id, 'num'), cell(ep.split), cell(ep.length, 'num'),
              cell(ep.return === null ? 'n/a' : RLDSPlayer.show(ep.return), 'num'),
              cell(ep.ending, ep.ending));
    for (const key of list.metadataKeys) tr.append(cell(key in ep.metadata ? RLDSPlayer.show(ep.metadata[key]) : '', 'meta'));
    tr.title = metadataText(ep.metadata);
    tr.onclick = () => { location.hash = `episode=${ep.id}`; };
    body.appendChild(tr);
  }
  const limit = Number(form.get('limit'));
  const last = Math.min(list.offset + limit, page.matching);
  $('page-info').textContent = page.matching ? `episodes ${list.offset + 1}-${last} of ${page.matching} matching` : 'no episode matches';
  $('prev').disabled = list.offset === 0;
  $('next').disabled = last >= page.matching;
  $('progress').textContent = page.error ? `indexing failed: ${page.error}` :
      page.complete ? `${page.total} episode${page.total === 1 ? '' : 's'}` : `indexing: ${page.indexed} of ${page.total} episodes read`;
  $('progress').className = page.error ? 'error' : '';
  for (const th of document.querySelectorAll('th[data-sort]')) {
    th.className = th.dataset.sort === list.sort ? `sorted-${list.order}` : '';
  }
  return page;
}

function histogram(canvas, values) {
  const g = canvas.getContext('2d');
  g.clearRect(0, 0, canvas.width, canvas.height);
  if (!values.length) return;
  let lo = Math.min(...values), hi = Math.max(...values);
  const bins = Math.max(1, Math.min(30, new Set(values).size));
  const width = hi > lo ? (hi - lo) / bins : 1;
  const counts = new Array(bins).fill(0);
  for (const v of values) counts[Math.min(bins - 1, Math.floor((v - lo) / width))]++;
  const top = Math.max(...counts);
  const w = (canvas.width - 20) / bins;
  g.fillStyle = '#4a7ab7';
  counts.forEach((c, i) => { const h = (canvas.height - 36) * c / top; g.fillRect(10 + i * w + 1, canvas.height - 18 - h, w - 2, h); });
  g.fillStyle = '#333'; g.font = '11px sans-serif';
  g.fillText(RLDSPlayer.show(lo), 10, canvas.height - 4);
  const right = RLDSPlayer.show(hi); g.fillText(right, canvas.width - 10 - g.measureText(right).width, canvas.height - 4);
  g.fillText(`highest bar: ${top} episode${top === 1 ? '' : 's'}`, canvas.width - 140, 12);
}

async function loadStats() {
  const s = await getJson('/api/statistics');
  const mean = (a) => a.length ? RLDSPlayer.show(a.reduce((x, y) => x + y, 0) / a.length) : 'n/a';
  $('stats-summary').textContent = `${s.episodes} episodes, ${s.steps} steps; ${s.terminated} terminated (the episode ended), ` +
      `${s.truncated} truncated (cut off); mean length ${mean(s.lengths)}` +
      (s.returns.length ? `, mean return ${mean(s.returns)}` : '') + (s.complete ? '' : ' (so far: still indexing)');
  $('stats-table').textContent = s.table;
  histogram($('hist-length'), s.lengths);
  histogram($('hist-return'), s.returns);
  return s;
}

async function refreshWhileIndexing() {
  const page = await loadList();
  await loadStats();
  if (page && !page.complete && !page.error) polling = setTimeout(refreshWhileIndexing, 1500);
}

async function showEpisode(id) {
  $('list-view').hidden = true; $('episode-view').hidden = false;
  $('ep-id').textContent = id;
  $('ep-summary').textContent = '';
  $('player').textContent = 'loading...';
  let ep;
  try { ep = await getJson(`/api/episodes/${id}`); } catch (e) { $('player').innerHTML = ''; $('player').append(Object.assign(document.createElement('p'), {className: 'error', textContent: e.message})); return; }
  $('ep-summary').textContent = ` (${ep.split}): ${ep.length} steps, return ${ep.return === null ? 'n/a' : RLDSPlayer.show(ep.return)}, ${ep.ending === 'terminated' ? 'terminated (the episode ended)' : 'truncated (cut off)'}`;
  $('ep-metadata').textContent = Object.keys(ep.metadata).length ? 'episode metadata: ' + metadataText(ep.metadata) : '';
  if (player) player.destroy();
  player = RLDSPlayer.create($('player'), {
    length: ep.length,
    images: ep.images.map((im) => ({name: im.name, url: (t) => `/api/episodes/${id}/frames/${im.field}/${t}`})),
    series: ep.series, flags: ep.flags, stepMetadata: ep.step_metadata});
  window.browsePlayer = player;
}

function route() {
  const match = /^#episode=(\d+)$/.exec(location.hash);
  if (match) { showEpisode(Number(match[1])); return; }
  if (player) { player.destroy(); player = null; }
  $('list-view').hidden = false; $('episode-view').hidden = true;
}

async function init() {
  const info = await getJson('/api/dataset');
  $('dataset-name').textContent = info.name;
  list.metadataKeys = info.metadata_keys;
  const headRow = $('episode-table').querySelector('thead tr');
  for (const key of info.metadata_keys) {
    headRow.appendChild(Object.assign(document.createElement('th'), {textContent: key, title: 'episode metadata'}));
    headRow.lastChild.dataset.sort = `metadata.${key}`;
  }
  document.title = `${info.name}: rlds-suite browse`;
  for (const th of document.querySelectorAll('th[data-sort]')) {
    th.onclick = () => {
      list.order = list.sort === th.dataset.sort && list.order === 'asc' ? 'desc' : 'asc';
      list.sort = th.dataset.sort; list.offset = 0; loadList();
    };
  }
  $('filters').oninput = () => { list.offset = 0; loadList(); };
  $('prev').onclick = () => { list.offset = Math.max(0, list.offset - Number($('filters').limit.value)); loadList(); };
  $('next').onclick = () => { list.offset += Number($('filters').limit.value); loadList(); };
  $('back-to-list').onclick = (e) => { e.preventDefault(); location.hash = ''; };
  window.addEventListener('hashchange', route);
  route();
  refreshWhileIndexing();
}

init();
