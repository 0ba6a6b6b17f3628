// rlds_suite creator page: designer (studies, episodes, download), player (play), replay.
// Plain JavaScript, no build step. Tokens live in localStorage; the server checks every call.
'use strict';

const $ = (id) => document.getElementById(id);
const STATES = ['COMPLETED', 'REJECTED', 'CANCELLED', 'ABANDONED'];
const STICK_DEADZONE = 0.15;  // As keymaps.STICK_DEADZONE on the server.
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
let catalogue = null;  // What envs.make offers on the server: [{family, available, names, options, ...}].
const DEFAULT_ENV = {spec: 'gymnasium:CartPole-v1', options: {}, instructions: ''};

function showText(element, text) { element.textContent = text || ''; element.hidden = !text; }

async function designerView() {
  const match = location.hash.match(/designer=([^&]+)/);
  if (match) { localStorage.setItem('creator.designer', decodeURIComponent(match[1])); history.replaceState(null, '', '/'); }
  if (!designerToken()) {
    $('login').hidden = false;
    $('token-save').onclick = () => { localStorage.setItem('creator.designer', $('token-input').value.trim()); designerView().catch(showError); };
    return;
  }
  $('login').hidden = true;
  $('designer').hidden = false;
  $('who').textContent = 'designer';
  if ($('study-form').dataset.ready) { await listStudies(); return; }
  $('study-form').dataset.ready = '1';
  $('study-form').onsubmit = saveStudy;
  $('study-new').onclick = () => fillForm(null);
  $('env-add').onclick = () => $('env-rows').appendChild(envRow(DEFAULT_ENV));
  $('advanced-toggle').onchange = toggleAdvanced;
  for (const state of ['ENDED', ...STATES]) {
    const label = document.createElement('label'); label.style.display = 'inline';
    label.innerHTML = `<input type="checkbox" name="state" value="${state}" ${state === 'COMPLETED' ? 'checked' : ''}> ${state === 'ENDED' ? 'ENDED (no verdict yet)' : state} `;
    $('states').appendChild(label);
  }
  $('filter').onclick = () => listEpisodes().catch(alert);
  $('download-form').onsubmit = (e) => { e.preventDefault(); download().catch((err) => { $('download-status').textContent = err.message; }); };
  catalogue = await getJson('/api/environments', designerToken()).catch(() => []);
  setRows([DEFAULT_ENV]);  // What was typed meanwhile stays.
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

// One environment of the study form: family, then name, then the family's options as fields.
function envRow(env) {
  const row = document.createElement('div'); row.className = 'env-row';
  row.dataset.id = env.id || ''; row.keymap = env.keymap || null;
  const cut = (env.spec || '').indexOf(':');
  const family = cut > 0 ? env.spec.slice(0, cut) : 'gymnasium', name = cut > 0 ? env.spec.slice(cut + 1) : '';
  row.innerHTML = `<label>Family <select class="family"></select></label>
    <label>Environment <select class="name"></select></label>
    <label>Shown as <input class="display-name" placeholder="(the environment)"></label>
    <div class="options"></div>
    <label class="extra-box">Other options (JSON object) <input class="extra" size="50"></label>
    <label>Instructions for this environment <textarea class="env-instructions" rows="2"></textarea></label>
    <button type="button" class="check">Check and preview</button> <button type="button" class="remove">Remove</button>
    <div class="check-result"></div><img class="preview" alt="preview" hidden>`;
  const families = row.querySelector('.family');
  for (const f of catalogue || []) {
    const option = new Option(f.family + (f.available ? '' : ' (not installed)'), f.family);
    option.disabled = !f.available; option.title = f.error || ''; families.add(option);
  }
  families.value = family;
  row.querySelector('.display-name').value = env.name && env.name !== env.spec ? env.name : '';
  row.querySelector('.env-instructions').value = env.instructions || '';
  const fill = (options) => {
    const entry = (catalogue || []).find((f) => f.family === families.value) || {names: [], options: [], extra_options: true};
    const names = row.querySelector('.name'); names.innerHTML = '';
    for (const n of entry.names) names.add(new Option(n, n));
    if (name && !entry.names.includes(name)) names.add(new Option(name + ' (unknown here)', name));
    names.value = name && (families.value === family) ? name : (entry.names.includes('CartPole-v1') ? 'CartPole-v1' : entry.names[0] || '');
    const box = row.querySelector('.options'); box.innerHTML = '';
    const rest = {...options};
    for (const option of entry.options) {
      const label = document.createElement('label');
      const value = rest[option.name]; delete rest[option.name];
      let input;
      if (option.type === 'bool') {
        input = document.createElement('select');
        for (const [text, v] of [[`default (${option.default})`, ''], ['true', 'true'], ['false', 'false']]) input.add(new Option(text, v));
        input.value = value === undefined ? '' : String(value);
      } else {
        input = document.createElement('input');
        input.type = option.type === 'text' ? 'text' : 'number'; input.size = 8;
        if (option.type === 'float') input.step = 'any';
        input.placeholder = option.default === null ? '' : String(option.default);
        input.value = value === undefined || value === null ? '' : String(value);
      }
      input.name = option.name; input.dataset.type = option.type; input.className = 'option';
      label.append(option.name + ' ', input); box.appendChild(label);
    }
    row.querySelector('.extra').value = Object.keys(rest).length ? JSON.stringify(rest) : '';
    row.querySelector('.extra-box').hidden = !entry.extra_options && !Object.keys(rest).length;
  };
  families.onchange = () => fill({});
  fill(env.options || {});
  row.querySelector('.remove').onclick = () => row.remove();
  row.querySelector('.check').onclick = () => checkEnvironment(row);
  return row;
}

function rowEnvironment(row) {
  const options = {};
  for (const input of row.querySelectorAll('.option')) {
    if (input.value === '') continue;
    const type = input.dataset.type;
    options[input.name] = type === 'bool' ? input.value === 'true' : (type === 'int' || type === 'float') ? Number(input.value) : input.value;
  }
  const extra = row.querySelector('.extra').value.trim();
  if (extra) {
    let parsed;
    try { parsed = JSON.parse(extra); } catch (e) { throw new Error(`other options: not JSON (${e.message})`); }
    Object.assign(options, parsed);
  }
  const spec = `${row.querySelector('.family').value}:${row.querySelector('.name').value}`;
  const env = {spec, options, instructions: row.querySelector('.env-instructions').value};
  const name = row.querySelector('.display-name').value.trim();
  if (name) env.name = name;
  if (row.dataset.id) env.id = Number(row.dataset.id);
  if (row.keymap) env.keymap = row.keymap;
  return env;
}

async function checkEnvironment(row) {
  const result = row.querySelector('.check-result'), preview = row.querySelector('.preview');
  result.className = 'check-result'; result.textContent = 'building the environment...'; preview.hidden = true;
  try {
    const env = rowEnvironment(row);
    const checked = await (await api('POST', '/api/environments/check', {spec: env.spec, options: env.options, keymap: env.keymap || null}, designerToken())).json();
    result.textContent = `OK: ${checked.spec}. Controls: ${checked.controls.join('; ')}`;
    if (checked.preview) { preview.src = checked.preview; preview.hidden = false; }
  } catch (e) { result.className = 'check-result bad'; result.textContent = e.message; }
}

function formEnvironments() {
  if ($('advanced-toggle').checked) {
    try { return JSON.parse($('env-json').value); } catch (e) { throw new Error('Environments (JSON): ' + e.message); }
  }
  return [...$('env-rows').children].map(rowEnvironment);
}

function toggleAdvanced() {
  const advanced = $('advanced-toggle').checked;
  try {
    if (advanced) $('env-json').value = JSON.stringify([...$('env-rows').children].map(rowEnvironment), null, 1);
    else setRows(JSON.parse($('env-json').value));
  } catch (e) { $('advanced-toggle').checked = !advanced; showText($('study-error'), e.message); return; }
  $('env-json').hidden = !advanced; $('env-rows').hidden = advanced; $('env-add').hidden = advanced;
}

function setRows(environments) {
  $('env-rows').innerHTML = '';
  for (const env of environments) $('env-rows').appendChild(envRow(env));
}

function fillForm(study) {
  const form = $('study-form');
  $('form-title').textContent = study ? `Edit study ${study.id}` : 'New study';
  form.id.value = study ? study.id : '';
  form.name.value = study ? study.name : '';
  form.description.value = study ? study.description : '';
  form.instructions.value = study ? study.instructions : '';
  form.record_frames.checked = study ? study.record_frames : true;
  showText($('study-error'), '');
  const environments = study ? study.environments.map((e) => ({id: e.id, name: e.name, spec: e.spec, options: e.options,
    instructions: e.instructions, ...(e.keymap ? {keymap: e.keymap} : {})})) : [DEFAULT_ENV];
  setRows(environments);
  $('env-json').value = JSON.stringify(environments, null, 1);
}

async function saveStudy(event) {
  event.preventDefault();
  const form = $('study-form');
  showText($('study-error'), '');
  try {
    const body = {name: form.name.value, description: form.description.value, instructions: form.instructions.value,
                  record_frames: form.record_frames.checked, environments: formEnvironments()};
    $('study-save').disabled = true; $('study-save').textContent = 'Checking the environments...';
    if (form.id.value) await api('PUT', `/api/studies/${form.id.value}`, body, designerToken());
    else await api('POST', '/api/studies', body, designerToken());
  } catch (e) { showText($('study-error'), e.message); return; } finally {
    $('study-save').disabled = false; $('study-save').textContent = 'Save study';
  }
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
    cell(row, envs[ep.environment_id]); cell(row, `${ep.player_name} (${ep.player_id})`); cell(row, ep.state); cell(row, ep.ending || '');
    cell(row, ep.num_steps); cell(row, ep.episode_return.toFixed(2)); cell(row, ep.tags.join(', ')); cell(row, ep.notes);
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
const ENDINGS = {terminated: 'the game ended', truncated: 'time ran out', cancelled: 'you stopped it'};
const play = {ws: null, keymap: null, held: new Set(), pad: {keys: new Set(), axes: null}, paused: false,
              ended: false, waiting: false, studyId: null, token: null, environmentId: null, retries: 0,
              reconnecting: false};

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
  showText($('study-instructions'), study.instructions);
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
  await listMyEpisodes();
  if (!study.active) { $('not-running').hidden = false; return; }
  $('pick').hidden = false;
  for (const env of study.environments) $('env-select').add(new Option(`${env.name} (${env.spec})`, env.id));
  $('play-button').onclick = () => startPlaying(Number($('env-select').value));
}

async function listMyEpisodes() {
  const episodes = await getJson(`/api/episodes?study=${play.studyId}`, play.token);
  const body = $('my-episodes').tBodies[0]; body.innerHTML = '';
  for (const ep of episodes.reverse()) {
    const row = body.insertRow();
    const a = document.createElement('a'); a.href = `/replay/${ep.id}`; a.textContent = ep.id.slice(0, 8);
    cell(row, '').appendChild(a); cell(row, ep.state); cell(row, ENDINGS[ep.ending] || '');
    cell(row, ep.num_steps); cell(row, ep.episode_return.toFixed(2));
  }
  // Episodes stopped mid-way turn from SAVING to their state once their steps are on disk.
  if (episodes.some((ep) => ep.state === 'SAVING')) setTimeout(() => listMyEpisodes().catch(showError), 1000);
}

function startPlaying(environmentId) {
  play.environmentId = environmentId;
  $('pick').hidden = true; $('game').hidden = false;
  connect();
  document.addEventListener('keydown', onKeyDown);
  document.addEventListener('keyup', onKeyUp);
  $('speed').oninput = () => { $('fps').textContent = $('speed').value; send({type: 'speed', fps: Number($('speed').value)}); };
  $('cancel-button').onclick = () => send({type: 'cancel'});
  $('accept').onclick = () => verdict(true);
  $('reject').onclick = () => verdict(false);
  $('next-button').onclick = nextEpisode;
  setInterval(pollGamepad, 50);
}

// One WebSocket; when it drops (or the server restarts) it connects again and the server gives the
// same episode back when it can.
function connect() {
  const ws = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws/play/${play.studyId}`);
  ws.binaryType = 'arraybuffer';
  play.ws = ws;
  ws.onopen = () => { play.retries = 0; send({type: 'hello', token: play.token}); send({type: 'start', environment_id: play.environmentId}); };
  ws.onmessage = (event) => (typeof event.data === 'string' ? onEvent(JSON.parse(event.data)) : onFrame(event.data));
  ws.onclose = () => {
    if (play.ws !== ws) return;
    play.reconnecting = true;
    const delay = Math.min(10000, 500 * 2 ** play.retries++);
    $('message').textContent = `The connection was lost; connecting again in ${Math.round(delay / 1000)} s...`;
    setTimeout(connect, delay);
  };
}

function send(message) { if (play.ws && play.ws.readyState === 1) play.ws.send(JSON.stringify(message)); }

function setOverlay() {
  $('cancel-button').hidden = play.ended;
  const text = play.paused ? 'Paused: press ESC to go on' : play.waiting && !play.ended ? 'Press any key to start' : '';
  showText($('overlay'), text);
  $('paused').textContent = play.paused ? 'PAUSED' : '';
}

function onEvent(event) {
  if (event.type === 'ready') {
    play.keymap = event.keymap;
    showText($('env-instructions'), event.instructions);
    $('speed-box').hidden = event.keymap.synchronous;
    $('speed').value = event.fps; $('fps').textContent = event.fps;
    $('keymap').textContent = (event.keymap.synchronous ? 'One step per key press. ' : '') + 'Keys: ' + event.controls.join(', ');
    if (play.reconnecting) {
      $('message').textContent = event.resumed ? 'Connected again: your episode goes on (press a key).'
          : 'Connected again. The episode you were playing could not be resumed; what was kept is listed under My episodes.';
      play.reconnecting = false; listMyEpisodes().catch(showError);
    }
  } else if (event.type === 'ended') {
    play.ended = true; play.waiting = false; setOverlay();
    $('verdict').hidden = false; $('confirmation').hidden = true;
    $('verdict-text').textContent = `Episode over: ${event.ending_text || ENDINGS[event.ending] || event.ending}, after ${event.steps - 1} actions, return ${Number(event.return).toFixed(2)}. It is saved; keep it for the study?`;
  } else if (event.type === 'saved') {
    play.ended = true; play.waiting = false; setOverlay(); $('verdict').hidden = true;
    const words = {COMPLETED: 'Kept: thank you, this episode is part of the study.',
                   REJECTED: 'Rejected: this episode will not be used.',
                   CANCELLED: 'Stopped: the episode so far is saved as cancelled.'};
    $('confirmation-text').textContent = words[event.state] || `Saved as ${event.state}.`;
    $('confirmation').hidden = false;
    setTimeout(() => listMyEpisodes().catch(showError), 300);
  } else if (event.type === 'abandoned') {
    play.ended = true; play.waiting = false; setOverlay();
    $('confirmation-text').textContent = 'The episode was abandoned: ' + event.reason + '.'; $('confirmation').hidden = false;
  } else if (event.type === 'error') {
    $('message').textContent = event.error;
  }
}

function nextEpisode() {
  if (!$('verdict').hidden) return;
  $('confirmation').hidden = true; $('message').textContent = '';
  send({type: 'new'});
}

async function onFrame(buffer) {
  const view = new DataView(buffer);
  const length = view.getUint32(0);
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 4, length)));
  $('step').textContent = header.t; $('return').textContent = header.return.toFixed(2); $('keys').textContent = header.keys;
  if (header.t === 0) { play.ended = false; $('verdict').hidden = true; $('confirmation').hidden = true; }
  play.waiting = header.waiting && !header.last;
  setOverlay();
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

function verdict(accept) { if (play.ended && !$('verdict').hidden) { send({type: 'verdict', accept}); $('verdict').hidden = true; } }

function held() { return [...new Set([...play.held, ...play.pad.keys])]; }

function started() { if (play.waiting) { play.waiting = false; setOverlay(); } }

function press(key) {
  // A new key (keyboard or gamepad button): one step when synchronous, else the held set changes.
  started();
  if (play.keymap.synchronous) send({type: 'step', keys: [...held(), key]});
  else send({type: 'keys', keys: held(), axes: play.pad.axes});
}

function onKeyDown(event) {
  if (event.target.tagName === 'INPUT' || event.target.tagName === 'TEXTAREA') return;
  if (event.key === 'Escape') {
    play.paused = !play.paused; send({type: play.paused ? 'pause' : 'resume'}); setOverlay(); return;
  }
  if (event.key === 'Enter') { nextEpisode(); event.preventDefault(); return; }
  if (play.ended && (event.key === 'y' || event.key === 'n')) { verdict(event.key === 'y'); return; }
  const key = KEYS[event.key];
  if (!key || !play.keymap) {
    if (play.waiting && !play.ended) { send({type: 'resume'}); started(); }
    return;
  }
  event.preventDefault();
  if (event.repeat || play.held.has(key)) return;
  play.held.add(key);
  press(key);
}

function onKeyUp(event) {
  const key = KEYS[event.key];
  if (!key || !play.held.has(key)) return;
  play.held.delete(key);
  if (play.keymap && !play.keymap.synchronous) send({type: 'keys', keys: held(), axes: play.pad.axes});
}

// Gamepads (the browser's Gamepad API, standard layout): buttons stand for keys as the key map's
// "gamepad" says; sticks set continuous axes, or are the arrows on discrete games.
function pollGamepad() {
  if (!play.keymap || !navigator.getGamepads) return;
  const pad = [...navigator.getGamepads()].find((p) => p);
  if (!pad) return;
  $('gamepad-status').textContent = `Gamepad: ${pad.id}.`;
  const keys = new Set();
  for (const [index, key] of Object.entries(play.keymap.gamepad || {})) {
    if (pad.buttons[index] && pad.buttons[index].pressed) keys.add(key);
  }
  let axes = null;
  if (play.keymap.axes) {
    axes = [...pad.axes].map((a) => Math.max(-1, Math.min(1, Math.round(a * 100) / 100)));
  } else {
    const [x, y] = pad.axes;
    if (x < -0.5) keys.add('left'); if (x > 0.5) keys.add('right');
    if (y < -0.5) keys.add('up'); if (y > 0.5) keys.add('down');
  }
  const fresh = [...keys].filter((k) => !play.pad.keys.has(k));
  const changed = fresh.length || keys.size !== play.pad.keys.size || JSON.stringify(axes) !== JSON.stringify(play.pad.axes);
  play.pad = {keys, axes};
  if (!changed) return;
  if (play.keymap.synchronous) { for (const key of fresh) press(key); return; }
  if (fresh.length || (axes && axes.some((a) => Math.abs(a) > STICK_DEADZONE))) started();
  send({type: 'keys', keys: held(), axes});
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
  else {
    designerView().catch(showError);
    // Opening the designer link on this page logs in at once.
    window.addEventListener('hashchange', () => designerView().catch(showError));
  }
})();
