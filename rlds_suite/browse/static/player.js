// An episode player: image fields as video (scrub, step, play/pause, speed), vector fields as
// plots with the step cursor, boundary flags and step metadata at the cursor. Plain JS, no
// dependencies: RLDSPlayer.create(container, episode) where episode is
//   {length, images: [{name, url(step)}], series: [{name, values: [[...] per step]}],
//    flags: {is_first: [0|1 per step], ...}, stepMetadata: {name: [value per step]}}.
'use strict';

const RLDSPlayer = (() => {
  const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2',
                  '#7f7f7f', '#bcbd22', '#17becf'];
  const BASE_FPS = 10;
  const MIN_HEIGHT = 320;  // Pixels: smaller frames are scaled up by an integer factor.

  function el(tag, attrs = {}, children = []) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === 'text') node.textContent = v; else if (k === 'class') node.className = v;
      else node.setAttribute(k, v);
    }
    for (const c of children) node.appendChild(c);
    return node;
  }

  function show(value) {
    if (value === null || value === undefined) return 'n/a';
    if (typeof value === 'number') return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(5)));
    if (Array.isArray(value)) return '[' + value.map(show).join(', ') + ']';
    return String(value);
  }

  // One plot: every dimension of a field as a line over the episode, a cursor at the step.
  function makePlot(series, length, seek) {
    const canvas = el('canvas', {width: 900, height: 120});
    const dims = series.values.length ? series.values[0].length : 0;
    const shown = Math.min(dims, COLORS.length);
    const legend = el('span', {class: 'legend'});
    if (dims > 1) {
      legend.append(` ${dims} dims` + (dims > shown ? ` (first ${shown} drawn)` : '') + ': ');
      for (let d = 0; d < shown; d++) legend.append(el('span', {text: `[${d}] `, style: `color: ${COLORS[d]}`}));
    }
    const box = el('div', {class: 'plot'}, [el('span', {class: 'name', text: series.name}), legend,
                                            el('span', {class: 'value'}), canvas]);
    let lo = Infinity, hi = -Infinity;
    for (const row of series.values) for (let d = 0; d < shown; d++) {
      const v = row[d]; if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    }
    if (!isFinite(lo)) { lo = 0; hi = 1; }
    if (hi === lo) { hi += 0.5; lo -= 0.5; }
    const pad = 14;
    const x = (t) => pad + (canvas.width - 2 * pad) * (length > 1 ? t / (length - 1) : 0.5);
    const y = (v) => canvas.height - 4 - (canvas.height - 8) * (v - lo) / (hi - lo);
    canvas.addEventListener('click', (event) => {
      const r = canvas.getBoundingClientRect();
      const px = (event.clientX - r.left) * canvas.width / r.width;
      seek(Math.round((px - pad) / (canvas.width - 2 * pad) * (length - 1)));
    });
    function draw(t) {
      const g = canvas.getContext('2d');
      g.clearRect(0, 0, canvas.width, canvas.height);
      g.fillStyle = '#888'; g.font = '10px sans-serif';
      g.fillText(show(hi), 2, 10); g.fillText(show(lo), 2, canvas.height - 2);
      if (lo < 0 && hi > 0) {
        g.strokeStyle = '#eee'; g.beginPath(); g.moveTo(pad, y(0)); g.lineTo(canvas.width - pad, y(0)); g.stroke();
      }
      for (let d = 0; d < shown; d++) {
        g.strokeStyle = COLORS[d]; g.lineWidth = 1.2; g.beginPath();
        let pen = false;
        series.values.forEach((row, i) => {
          const v = row[d];
          if (v === null) { pen = false; return; }
          if (!pen) g.moveTo(x(i), y(v));
          else if (series.discrete) { g.lineTo(x(i), y(series.values[i - 1][d])); g.lineTo(x(i), y(v)); }
          else g.lineTo(x(i), y(v));
          pen = true;
        });
        g.stroke();
      }
      g.strokeStyle = '#000'; g.lineWidth = 1; g.beginPath();
      g.moveTo(x(t), 0); g.lineTo(x(t), canvas.height); g.stroke();
      const row = series.values[t] || [];
      box.querySelector('.value').textContent = ` = ${show(row.length === 1 ? row[0] : row)}`;
    }
    return {box, draw};
  }

  function create(container, episode) {
    const n = episode.length;
    const state = {t: 0, playing: false, timer: null, speed: 1};
    container.innerHTML = '';
    const views = el('div', {class: 'views'});
    const imgs = episode.images.map((image) => {
      const img = el('img', {alt: image.name});
      img.addEventListener('load', () => {  // Small frames (Atari 84x84, 210x160) scaled up.
        if (img.dataset.scaled) return;
        const k = Math.max(1, Math.ceil(MIN_HEIGHT / img.naturalHeight));
        img.style.width = `${img.naturalWidth * k}px`; img.dataset.scaled = k;
      });
      views.appendChild(el('div', {class: 'view'}, [el('div', {class: 'name', text: image.name}), img]));
      return img;
    });
    const slider = el('input', {type: 'range', min: 0, max: Math.max(0, n - 1), value: 0, 'aria-label': 'step'});
    const button = (label, title, fn) => { const b = el('button', {text: label, title}); b.onclick = fn; return b; };
    const play = button('\u25B6 play', 'play/pause (space)', () => toggle());
    play.className = 'play';
    const speed = el('select', {'aria-label': 'speed', class: 'speed'});
    for (const s of [0.25, 0.5, 1, 2, 4, 8]) speed.appendChild(el('option', {value: s, text: `${s}x (${s * BASE_FPS} fps)`}));
    speed.value = '1';
    speed.onchange = () => { state.speed = Number(speed.value); if (state.playing) { stop(); start(); } };
    const stepLabel = el('span', {class: 'step-label'});
    const controls = el('div', {class: 'controls'}, [
      button('first', 'first step (Home)', () => go(0)), button('-10', 'back 10 steps', () => go(state.t - 10)),
      button('\u25C0 step', 'previous step (left arrow)', () => go(state.t - 1)), play,
      button('step \u25B6', 'next step (right arrow)', () => go(state.t + 1)),
      button('+10', 'forward 10 steps', () => go(state.t + 10)),
      button('last', 'last step (End)', () => go(n - 1)), slider, stepLabel, el('label', {text: 'speed '}, [speed])]);
    const flags = el('div', {class: 'cursor-info flags'});
    const metaTable = el('table', {id: 'step-metadata'});
    const plots = episode.series.map((s) => makePlot(s, n, (t) => go(t)));
    const plotBox = el('div', {class: 'plots'}, plots.map((p) => p.box));
    container.append(views, controls, flags, plotBox);
    if (Object.keys(episode.stepMetadata).length) {
      container.append(el('h3', {text: 'step metadata at the cursor'}), metaTable);
    }
    slider.oninput = () => go(Number(slider.value));

    function go(t) {
      state.t = Math.max(0, Math.min(n - 1, t));
      slider.value = state.t;
      stepLabel.textContent = `step ${state.t} / ${n - 1}`;
      imgs.forEach((img, i) => { img.src = episode.images[i].url(state.t); });
      flags.innerHTML = '';
      for (const [name, values] of Object.entries(episode.flags)) {
        flags.appendChild(el('span', {class: 'flag' + (values[state.t] ? ' on' : ''), text: `${name} ${values[state.t] ? 'yes' : 'no'}`}));
      }
      plots.forEach((p) => p.draw(state.t));
      metaTable.innerHTML = '';
      for (const [name, values] of Object.entries(episode.stepMetadata)) {
        metaTable.appendChild(el('tr', {}, [el('th', {text: name}), el('td', {text: show(values[state.t])})]));
      }
      if (state.t >= n - 1 && state.playing) stop();
    }
    function start() {
      if (state.t >= n - 1) go(0);
      state.playing = true; play.textContent = '\u23F8 pause';
      state.timer = setInterval(() => go(state.t + 1), 1000 / (BASE_FPS * state.speed));
    }
    function stop() {
      state.playing = false; play.textContent = '\u25B6 play';
      clearInterval(state.timer); state.timer = null;
    }
    function toggle() { if (state.playing) stop(); else start(); }
    function onKey(event) {
      if (!container.isConnected) { document.removeEventListener('keydown', onKey); return; }
      if (['INPUT', 'SELECT', 'TEXTAREA', 'BUTTON'].includes(event.target.tagName)) return;
      const keys = {ArrowLeft: () => go(state.t - 1), ArrowRight: () => go(state.t + 1), ' ': toggle,
                    Home: () => go(0), End: () => go(n - 1)};
      if (keys[event.key]) { keys[event.key](); event.preventDefault(); }
    }
    document.addEventListener('keydown', onKey);
    go(0);
    return {go, start, stop, get step() { return state.t; }, destroy() { stop(); document.removeEventListener('keydown', onKey); }};
  }

  return {create, show};
})();
