// rlds_suite creator page: designer (studies, episodes, download), player (play), replay.
// Plain JavaScript, no build step. Tokens live in localStorage; the server checks every call.
'use strict';

const $ = (id) => document.getElementById(id);
const STATES = ['COMPLETED', 'REJECTED', 'CANCELLED', 'ABANDONED'];
const KEYS = {ArrowUp: 'up', ArrowDown: 'down', ArrowLeft: 'left', ArrowRight: 'right',
              w: 'up', s: 'down', a: 'left', d: 'right', W: 'up', S: 'down', A: 'left', D: 'right',
              ' ': 'space'};
for (let i = 0; i <= 9; i++) KEYS[String(i)] = String(i);

function designerToken() { return localStorage.getItem('creator.designer'); }
function playerToken(studyId) { return localStorage.getItem('creator.player.' + studyId); }

async function api(method, path, body, token) {
  const headers = {'Content-Type': 'application/json'};
  if (token) headers.Authorization = 'Bearer ' + token;
  const response = await fetch(path, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
  if (!response.ok) {
    let error = response.statusText;
    try { error = (await response.json()).error; } catch (e) { /* not JSON */ }
    throw new Error(error);
  }
  return response;
}
const getJson = async (path, token) => (await api('GET', path, undefined, token)).json();

function cell(row, text) { const td = document.createElement('td'); td.textContent = text; row.appendChild(td); return td; }
function button(parent, text, onClick) {
  const b = document.createElement('button'); b.textContent = text; b.onclick = onClick; parent.appendChild(b); return b;
}
function showError(e) { const m = $('message'); if (m) m.textContent = String(e.message || e); console.error(e); }

// ---------------------------------------------------------------- designer
let currentStudy = null;

async function designerView() {
  const match = location.hash.match(/designer=([^&]+)/);
  if (match) { localStorage.setItem('creator.designer', decodeURIComponent(match[1])); history.replaceState(null, '', '/'); }
  if (!designerToken()) {
    $('login').hidden = false;
    $('token-save').onclick = () => { localStorage.setItem('creator.designer', $('token-input').value.trim()); location.reload(); };
    return;
  }
  $('designer').hidden = false;
  $('who').textContent = 'designer';
  $('study-form').environments.value = JSON.stringify(
      [{spec: 'gymnasium:CartPole-v1', options: {max_episode_steps: 200}, instructions: 'LEFT/RIGHT push the cart.'}], null, 1);
  $('study-form').onsubmit = saveStudy;
  $('study-new').onclick = () => fillForm(null);
  for (const state of STATES) {
    const label = document.createElement('label'); label.style.display = 'inline';
    label.innerHTML = `<input type="checkbox" name="state" value="${state}" ${state === 'COMPLETED' ? 'checked' : ''}> ${state} `;
    $('states').appendChild(label);
  }
  $('filter').onclick = () => listEpisodes().catch(alert);
  $('download-form').onsubmit = (e) => { e.preventDefault(); download().catch((err) => { $('download-status').textContent = err.message; }); };
  await listStudies();
}

async function listStudies() {
  let studies;
  try { studies = await getJson('/api/studies', designerToken()); } catch (e) {
    localStorage.removeItem('creator.designer'); alert(e.message); location.reload(); return;
  }
  const body = $('studies').tBodies[0]; body.innerHTML = '';
  for (const study of studies) {
    const row = body.insertRow();
    cell(row, study.id); cell(row, study.name);
    cell(row, study.environments.map((e) => e.spec).join(', '));
    cell(row, study.active ? 'running' : 'stopped'); cell(row, study.completed_episodes);
    const link = `${location.origin}/play/${study.id}?join=${study.join_code}`;
    const a = document.createElement('a'); a.href = link; a.textContent = 'study link'; a.className = 'study-link';
    cell(row, '').appendChild(a);
    const actions = cell(row, '');
    button(actions, 'edit', () => fillForm(study));
    button(actions, study.active ? 'stop' : 'start', async () => {
      await api('PUT', `/api/studies/${study.id}`, {active: !study.active}, designerToken()); await listStudies();
    });
    button(actions, 'episodes', () => showEpisodes(study));
    button(actions, 'delete', async () => {
      if (!confirm(`Delete study ${study.name} and all its episodes?`)) return;
      await api('DELETE', `/api/studies/${study.id}`, undefined, designerToken()); await listStudies();
    });
  }
}

function fillForm(study) {
  const form = $('study-form');
  $('form-title').textContent = study ? `Edit study ${study.id}` : 'New study';
  form.id.value = study ? study.id : '';
  form.name.value = study ? study.name : '';
  form.description.value = study ? study.description : '';
  form.instructions.value = study ? study.instructions : '';
  form.record_frames.checked = study ? study.record_frames : true;
  if (study) {
    form.environments.value = JSON.stringify(study.environments.map((e) => ({
      id: e.id, name: e.name, spec: e.spec, options: e.options, instructions: e.instructions,
      ...(e.keymap ? {keymap: e.keymap} : {})})), null, 1);
  }
}

async function saveStudy(event) {
  event.preventDefault();
  const form = $('study-form');
  let environments;
  try { environments = JSON.parse(form.environments.value); } catch (e) { alert('Environments: ' + e.message); return; }
  const body = {name: form.name.value, description: form.description.value, instructions: form.instructions.value,
                record_frames: form.record_frames.checked, environments};
  try {
    if (form.id.value) await api('PUT', `/api/studies/${form.id.value}`, body, designerToken());
    else await api('POST', '/api/studies', body, designerToken());
  } catch (e) { alert(e.message); return; }
  fillForm(null); await listStudies();
}

function downloadQuery() {
  const form = $('download-form');
  const list = (value) => value.split(',').map((s) => s.trim()).filter((s) => s);
  return {
    study_id: currentStudy.id,
    environment_id: form.environment_id.value ? Number(form.environment_id.value) : null,
    states: [...form.querySelectorAll('input[name=state]:checked')].map((i) => i.value),
    tags: list(form.tags.value), player_ids: list(form.player_ids.value).map(Number),
    strip_metadata: form.strip_metadata.checked, end_tags: list(form.end_tags.value),
    step_tag_fields: form.step_tag_fields.checked, format: form.format.value,
  };
}

async function showEpisodes(study) {
  currentStudy = study;
  $('episodes-panel').hidden = false;
  $('episodes-study').textContent = study.name;
  const select = $('download-form').environment_id;
  select.innerHTML = '<option value="">all</option>';
  for (const env of study.environments) select.add(new Option(`${env.name} (${env.spec})`, env.id));
  await listEpisodes();
}

async function listEpisodes() {
  const q = downloadQuery();
  const params = new URLSearchParams({study: q.study_id});
  if (q.environment_id) params.append('environment', q.environment_id);
  q.states.forEach((s) => params.append('state', s));
  q.tags.forEach((t) => params.append('tag', t));
  q.player_ids.forEach((p) => params.append('player', p));
  const episodes = await getJson('/api/episodes?' + params, designerToken());
  const envs = Object.fromEntries(currentStudy.environments.map((e) => [e.id, e.name]));
  const body = $('episodes').tBodies[0]; body.innerHTML = '';
  for (const ep of episodes) {
    const row = body.insertRow();
    const a = document.createElement('a'); a.href = `/replay/${ep.id}`; a.textContent = ep.id.slice(0, 8);
    cell(row, '').appendChild(a);
    cell(row, envs[ep.environment_id]); cell(row, ep.player_id); cell(row, ep.state); cell(row, ep.ending || '');
    cell(row, ep.num_steps); cell(row, ep.episode_return.toFixed(2)); cell(row, ep.tags.join(', '));
  }
}

async function download() {
  const q = downloadQuery();
  $('download-status').textContent = 'preparing...';
  const response = await api('POST', '/api/download', q, designerToken());
  if (q.format === 'directory') {
    const result = await response.json();
    $('download-status').textContent = 'written: ' + result.directories.join(', ');
    return;
  }
  const blob = await response.blob();
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = (response.headers.get('Content-Disposition') || '').match(/filename="(.+)"/)?.[1] || 'episodes.zip';
  document.body.appendChild(a); a.click(); a.remove();
  $('download-status').textContent = `downloaded ${response.headers.get('X-Episodes').split(',').filter((s) => s).length} episodes`;
}

// ---------------------------------------------------------------- player
const play = {ws: null, keymap: null, held: new Set(), paused: false, ended: false, studyId: null, token: null};

async function playerView(studyId) {
  play.studyId = studyId;
  $('player').hidden = false;
  const join = new URLSearchParams(location.search).get('join') || '';
  // The study link enrols a player; without one the designer plays as the study's 'designer'.
  play.token = playerToken(studyId) || (join ? null : designerToken());
  let study;
  try {
    study = await getJson(`/api/studies/${studyId}/public?join=${encodeURIComponent(join)}`, play.token);
  } catch (e) { $('study-name').textContent = e.message; return; }
  $('study-name').textContent = study.name;
  $('study-instructions').textContent = study.instructions;
  if (!play.token) {
    $('enroll').hidden = false;
    $('enroll-button').onclick = async () => {
      try {
        const r = await (await api('POST', `/api/studies/${studyId}/enroll`, {join, name: $('player-name').value})).json();
        localStorage.setItem('creator.player.' + studyId, r.token); location.reload();
      } catch (e) { alert(e.message); }
    };
    return;
  }
  $('who').textContent = playerToken(studyId) ? 'player' : 'designer (playing)';
  if (!study.active) { $('study-instructions').textContent += '\n\nThis study is not running.'; }
  $('pick').hidden = false;
  for (const env of study.environments) $('env-select').add(new Option(`${env.name} (${env.spec})`, env.id));
  $('play-button').onclick = () => startPlaying(Number($('env-select').value));
  await listMyEpisodes();
}

async function listMyEpisodes() {
  const episodes = await getJson(`/api/episodes?study=${play.studyId}`, play.token);
  const body = $('my-episodes').tBodies[0]; body.innerHTML = '';
  for (const ep of episodes.reverse()) {
    const row = body.insertRow();
    const a = document.createElement('a'); a.href = `/replay/${ep.id}`; a.textContent = ep.id.slice(0, 8);
    cell(row, '').appendChild(a); cell(row, ep.state); cell(row, ep.num_steps); cell(row, ep.episode_return.toFixed(2));
  }
  // Saved episodes turn from SAVING to their state once their steps are on disk.
  if (episodes.some((ep) => ep.state === 'SAVING')) setTimeout(() => listMyEpisodes().catch(showError), 1000);
}

function startPlaying(environmentId) {
  $('pick').hidden = true; $('game').hidden = false;
  const ws = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws/play/${play.studyId}`);
  ws.binaryType = 'arraybuffer';
  play.ws = ws;
  ws.onopen = () => { send({type: 'hello', token: play.token}); send({type: 'start', environment_id: environmentId}); };
  ws.onmessage = (event) => (typeof event.data === 'string' ? onEvent(JSON.parse(event.data)) : onFrame(event.data));
  ws.onclose = () => { $('message').textContent = 'disconnected'; };
  document.addEventListener('keydown', onKeyDown);
  document.addEventListener('keyup', onKeyUp);
  $('speed').oninput = () => { $('fps').textContent = $('speed').value; send({type: 'speed', fps: Number($('speed').value)}); };
  $('cancel-button').onclick = () => send({type: 'cancel'});
  $('accept').onclick = () => verdict(true);
  $('reject').onclick = () => verdict(false);
}

function send(message) { if (play.ws && play.ws.readyState === 1) play.ws.send(JSON.stringify(message)); }

function onEvent(event) {
  if (event.type === 'ready') {
    play.keymap = event.keymap;
    $('env-instructions').textContent = event.instructions || '';
    $('speed-box').hidden = event.keymap.synchronous;
    $('speed').value = event.fps; $('fps').textContent = event.fps;
    $('keymap').textContent = (event.keymap.synchronous ? 'One step per key press. ' : '') + 'Keys: ' +
        event.keymap.bindings.map(([keys, action]) => `${keys.join('+')} → ${JSON.stringify(action)}`).join(', ');
  } else if (event.type === 'ended') {
    play.ended = true;
    $('verdict').hidden = false;
    $('verdict-text').textContent = `Episode over (${event.ending}) after ${event.steps - 1} actions, return ${event.return.toFixed(2)}.`;
  } else if (event.type === 'saving') {
    $('message').textContent = `episode ${event.episode_id.slice(0, 8)}: ${event.outcome} (saving)`;
    setTimeout(() => listMyEpisodes().catch(showError), 1500);
  } else if (event.type === 'abandoned') {
    $('message').textContent = 'episode abandoned: ' + event.reason + '. Press ENTER for a new one.';
  } else if (event.type === 'error') {
    $('message').textContent = event.error;
  }
}

async function onFrame(buffer) {
  const view = new DataView(buffer);
  const length = view.getUint32(0);
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 4, length)));
  $('step').textContent = header.t; $('return').textContent = header.return.toFixed(2); $('keys').textContent = header.keys;
  if (header.t === 0) { play.ended = false; $('verdict').hidden = true; $('message').textContent = ''; }
  if (header.mime) {
    const bitmap = await createImageBitmap(new Blob([new Uint8Array(buffer, 4 + length)], {type: header.mime}));
    const canvas = $('screen');
    if (canvas.width !== bitmap.width || canvas.height !== bitmap.height) { canvas.width = bitmap.width; canvas.height = bitmap.height; }
    canvas.getContext('2d').drawImage(bitmap, 0, 0);
    $('state-text').textContent = '';
  } else {
    $('state-text').textContent = header.observation;
  }
}

function verdict(accept) { if (play.ended) { send({type: 'verdict', accept}); $('verdict').hidden = true; } }

function onKeyDown(event) {
  if (event.target.tagName === 'INPUT' || event.target.tagName === 'TEXTAREA') return;
  if (event.key === 'Escape') {
    play.paused = !play.paused; send({type: play.paused ? 'pause' : 'resume'});
    $('paused').textContent = play.paused ? 'PAUSED' : ''; return;
  }
  if (event.key === 'Enter') { if (!play.ended || $('verdict').hidden) send({type: 'new'}); event.preventDefault(); return; }
  if (play.ended && (event.key === 'y' || event.key === 'n')) { verdict(event.key === 'y'); return; }
  const key = KEYS[event.key];
  if (!key || !play.keymap) return;
  event.preventDefault();
  if (play.keymap.synchronous) {
    if (!event.repeat) send({type: 'step', keys: [...play.held, key]});
    play.held.add(key);
  } else if (!play.held.has(key)) {
    play.held.add(key); send({type: 'keys', keys: [...play.held]});
  }
}

function onKeyUp(event) {
  const key = KEYS[event.key];
  if (!key || !play.held.has(key)) return;
  play.held.delete(key);
  if (play.keymap && !play.keymap.synchronous) send({type: 'keys', keys: [...play.held]});
}

// ---------------------------------------------------------------- replay
const replay = {id: null, data: null, t: 0, token: null};

async function replayView(episodeId) {
  $('replay').hidden = false;
  replay.id = episodeId;
  $('replay-id').textContent = episodeId.slice(0, 8);
  const tokens = [designerToken(), ...Object.keys(localStorage).filter((k) => k.startsWith('creator.player.')).map((k) => localStorage.getItem(k))];
  for (const token of tokens.filter((t) => t)) {
    try { replay.data = await getJson(`/api/episodes/${episodeId}/steps`, token); replay.token = token; break; } catch (e) { /* next */ }
  }
  if (!replay.data) { $('replay-id').textContent += ': not available to you (or not saved yet)'; return; }
  $('replay-total').textContent = replay.data.num_steps - 1;
  $('first').onclick = () => go(0); $('last').onclick = () => go(replay.data.num_steps - 1);
  $('back').onclick = () => go(replay.t - 1); $('forward').onclick = () => go(replay.t + 1);
  $('back10').onclick = () => go(replay.t - 10); $('forward10').onclick = () => go(replay.t + 10);
  document.addEventListener('keydown', (event) => {
    if (event.target.tagName === 'INPUT' || event.target.tagName === 'TEXTAREA') return;
    const step = event.shiftKey ? 10 : 1;
    if (event.key === 'ArrowLeft') { go(replay.t - step); event.preventDefault(); }
    if (event.key === 'ArrowRight') { go(replay.t + step); event.preventDefault(); }
  });
  $('add-step-tag').onclick = () => annotate({add_step_tags: [[replay.t, $('step-tag').value.trim()]]});
  $('add-episode-tag').onclick = () => annotate({add_tags: [$('episode-tag').value.trim()]});
  $('save-notes').onclick = () => annotate({notes: $('notes').value});
  $('notes').value = replay.data.episode.notes;
  go(0);
}

async function annotate(body) {
  try {
    replay.data.episode = await (await api('POST', `/api/episodes/${replay.id}/annotate`, body, replay.token)).json();
    go(replay.t);
  } catch (e) { alert(e.message); }
}

function go(t) {
  const d = replay.data;
  replay.t = Math.max(0, Math.min(d.num_steps - 1, t));
  $('replay-step').textContent = replay.t;
  if (d.has_frames) {
    fetch(`/api/episodes/${replay.id}/frames/${replay.t}`, {headers: {Authorization: 'Bearer ' + replay.token}})
        .then((r) => r.blob()).then((b) => { $('replay-frame').src = URL.createObjectURL(b); });
  } else {
    $('replay-frame').hidden = true; $('replay-state').textContent = d.observation[replay.t];
  }
  $('replay-keys').textContent = d.keys ? (d.keys[replay.t] || '(none)') : 'not recorded';
  $('replay-action').textContent = JSON.stringify(d.action[replay.t]);
  $('replay-reward').textContent = d.reward[replay.t];
  $('replay-flags').textContent = (d.is_terminal[replay.t] ? ' TERMINAL' : '') + (d.is_last[replay.t] ? ' LAST' : '');
  const stepTags = $('step-tags'); stepTags.innerHTML = '';
  for (const label of d.episode.step_tags[String(replay.t)] || []) {
    const span = document.createElement('span'); span.className = 'tag step-tag'; span.textContent = label + ' ×';
    span.onclick = () => annotate({remove_step_tags: [[replay.t, label]]}); stepTags.appendChild(span);
  }
  const tags = $('episode-tags'); tags.innerHTML = '';
  for (const label of d.episode.tags) {
    const span = document.createElement('span'); span.className = 'tag'; span.textContent = label + ' ×';
    span.onclick = () => annotate({remove_tags: [label]}); tags.appendChild(span);
  }
}

// ---------------------------------------------------------------- routing
(function main() {
  const path = location.pathname;
  let match;
  if ((match = path.match(/^\/play\/(\d+)$/))) playerView(Number(match[1])).catch(showError);
  else if ((match = path.match(/^\/replay\/([0-9a-f]{32})$/))) replayView(match[1]).catch(showError);
  else designerView().catch(showError);
})();
