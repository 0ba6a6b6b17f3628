"""An episode's image observations as annotated frames (numpy and Pillow; no TensorFlow).

Every image field of a step is drawn side by side (frame stacks as their frames in a row), each
under its field name, scaled up by one integer factor to a readable height and at least the width
of the caption (no blank band beside small frames), with the step index, action, reward and
boundary flags written under it. Long episodes are shown at chosen steps (`chosen_steps`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from tqdm import auto as tqdm_auto

from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core import nested

MIN_HEIGHT = 168  # Pixels: small frames (84x84 Atari) are scaled up to at least this.
MIN_WIDTH = 360  # Pixels: the caption's width; narrower frames are scaled up to it.
CAPTION_LINE = 14
SHEET_GAP = 6  # Pixels between the frames of a contact sheet.
# Frames shown by default: a contact sheet stays a readable page, a GIF/MP4 a watchable clip.
DEFAULT_FRAMES = {'.png': 40, '.gif': 1000, '.mp4': 1000}


def chosen_steps(num_steps: int, every: int | None = None, frames: int | None = None) -> list[int]:
  """Step indices to draw: every `every`-th step, at most `frames` of them; with no `every`, at
  most `frames` steps spread evenly from the first to the last."""
  if every is not None:
    if every < 1:
      raise errors.SchemaError(f'--every must be at least 1, got {every}', field='every')
    return list(range(0, num_steps, every))[:frames]
  if frames is None or num_steps <= frames:
    return list(range(num_steps))
  if frames < 1:
    raise errors.SchemaError(f'--frames must be at least 1, got {frames}', field='frames')
  return sorted({int(i) for i in np.linspace(0, num_steps - 1, frames).round()})


def image_paths(observation_row: Any) -> list[str]:
  """Paths of the observation leaves that are images: uint8 (H, W), (H, W, C) or (C, H, W)."""
  return [path for path, leaf in _leaves(observation_row).items()
          if _as_hwc(np.asarray(leaf)) is not None]


def _leaves(structure: Any) -> dict[str, Any]:
  """Leaves by path; a single array is the leaf 'observation'."""
  return {path or fields.OBSERVATION: leaf for path, leaf in nested.flatten_with_paths(structure)}


def _as_hwc(leaf: np.ndarray) -> np.ndarray | None:
  if leaf.dtype != np.uint8 or leaf.ndim not in (2, 3) or min(leaf.shape[:2]) < 8:
    return None
  if leaf.ndim == 2:
    return leaf[..., None]
  if leaf.shape[-1] <= 4 or leaf.shape[0] > 4:
    return leaf
  return np.moveaxis(leaf, 0, -1)  # Channels first, e.g. dm_control pixels (3, 100, 100).


def _panel(leaf: np.ndarray) -> np.ndarray:
  """One image leaf as an RGB panel; frame stacks (C not 1 or 3) become their frames in a row."""
  hwc = _as_hwc(leaf)
  if hwc.shape[-1] == 3:
    return hwc
  if hwc.shape[-1] == 1:
    return np.repeat(hwc, 3, axis=-1)
  frames = [np.repeat(hwc[..., c:c + 1], 3, axis=-1) for c in range(hwc.shape[-1])]
  return np.concatenate(_with_gaps(frames), axis=1)


def rgb_panel(leaf: np.ndarray) -> np.ndarray:
  """An image leaf of one step as the RGB picture `show` draws of it (frame stacks in a row)."""
  return _panel(leaf)


def _scale(panels: Sequence[np.ndarray], gap: int = 4) -> int:
  """The integer factor that makes the panels at least MIN_HEIGHT high and MIN_WIDTH wide."""
  height = max(p.shape[0] for p in panels)
  width = sum(p.shape[1] for p in panels) + gap * (len(panels) - 1)
  return max(1, -(-MIN_HEIGHT // height), -(-MIN_WIDTH // width))


def _scaled(panel: np.ndarray, scale: int) -> np.ndarray:
  return np.repeat(np.repeat(panel, scale, axis=0), scale, axis=1)


def _with_gaps(panels: Sequence[np.ndarray], gap: int = 4) -> list[np.ndarray]:
  out = []
  for i, panel in enumerate(panels):
    if i:
      out.append(np.full((panel.shape[0], gap, 3), 255, np.uint8))
    out.append(panel)
  return out


def caption(steps: Mapping[str, Any], index: int) -> list[str]:
  """Step index, action, reward and flags of step `index`."""
  num = len(steps[fields.IS_FIRST])
  flags = [name for name in (fields.IS_FIRST, fields.IS_LAST, fields.IS_TERMINAL)
           if bool(steps[name][index])]
  action = nested.row(steps[fields.ACTION], index)
  reward = np.asarray(steps[fields.REWARD][index]) if fields.REWARD in steps else None
  return [f'step {index}/{num - 1}  ' + ' '.join(flags),
          f'action {_short(action)}',
          f'reward {_short(reward)}  discount {_short(steps.get(fields.DISCOUNT, [None] * num)[index])}']


def _short(value: Any) -> str:
  if isinstance(value, dict):
    return '{' + ', '.join(f'{k}: {_short(v)}' for k, v in value.items()) + '}'
  array = np.asarray(value)
  if array.ndim == 0:
    return f'{array.item():.4g}' if array.dtype.kind == 'f' else str(array.item())
  text = np.array2string(array, precision=3, separator=',', threshold=6, edgeitems=2)
  return ' '.join(text.split())


def render_episode(steps: Mapping[str, Any], indices: Sequence[int] | None = None,
                   progress_bar: bool = False) -> list[np.ndarray]:
  """One annotated RGB frame per chosen step (default: every step) of an episode's numpy steps;
  `progress_bar` counts the frames drawn on a terminal."""
  observations = steps[fields.OBSERVATION]
  first = nested.row(observations, 0)
  paths = image_paths(first)
  if not paths:
    raise errors.SchemaError('the observation has no image field (uint8 HxW[xC]); use a .png '
                             'plot for vector observations', field=fields.OBSERVATION)
  flat = _leaves(observations)
  font = ImageFont.load_default()
  scale = _scale([_panel(np.asarray(flat[path][0])) for path in paths])
  frames = []
  chosen = range(len(steps[fields.IS_FIRST])) if indices is None else indices
  for index in tqdm_auto.tqdm(chosen, desc='render', unit=' frames',
                              disable=None if progress_bar else True):
    panels = [_scaled(_panel(np.asarray(flat[path][index])), scale) for path in paths]
    height = max(p.shape[0] for p in panels)
    panels = [np.pad(p, ((0, height - p.shape[0]), (0, 0), (0, 0)), constant_values=255)
              for p in panels]
    image = np.concatenate(_with_gaps(panels), axis=1)
    lines = caption(steps, index)
    canvas = Image.new('RGB', (image.shape[1], CAPTION_LINE + height +
                               CAPTION_LINE * len(lines) + 6), 'white')
    canvas.paste(Image.fromarray(image), (0, CAPTION_LINE))
    draw = ImageDraw.Draw(canvas)
    left = 0
    for path, panel in zip(paths, panels):  # Each image field's name above it.
      draw.text((left + 2, 1), path, fill='black', font=font)
      left += panel.shape[1] + 4
    for i, line in enumerate(lines):
      draw.text((4, CAPTION_LINE + height + 3 + CAPTION_LINE * i), line, fill='black', font=font)
    frames.append(np.asarray(canvas))
  return frames


def write_animation(frames: Sequence[np.ndarray], path: str, fps: float = 10.0) -> None:
  """Writes frames as an animated GIF (Pillow) or an MP4 (imageio-ffmpeg)."""
  if path.lower().endswith('.gif'):
    images = [Image.fromarray(f) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
  elif path.lower().endswith('.mp4'):
    import imageio.v2 as imageio  # pylint: disable=g-import-not-at-top
    even = [f[:f.shape[0] // 2 * 2, :f.shape[1] // 2 * 2] for f in frames]  # yuv420p needs even sizes.
    with imageio.get_writer(path, fps=fps, codec='libx264', macro_block_size=1) as writer:
      for frame in even:
        writer.append_data(frame)
  elif path.lower().endswith('.png'):
    columns = min(len(frames), 8)
    rows = -(-len(frames) // columns)
    h, w = frames[0].shape[:2]
    gap = SHEET_GAP  # A grey line between frames, so that one step's fields stay together.
    sheet = np.full((rows * (h + gap) - gap, columns * (w + gap) - gap, 3), 128, np.uint8)
    for i, frame in enumerate(frames):
      r, c = divmod(i, columns)
      top, left = r * (h + gap), c * (w + gap)
      sheet[top:top + frame.shape[0], left:left + frame.shape[1]] = frame
    Image.fromarray(sheet).save(path)
  else:
    raise errors.SchemaError('unknown output type; use .gif, .mp4 or .png', path=path)
