"""An episode's image observations as annotated frames (numpy and Pillow; no TensorFlow).

Every image field of a step is drawn side by side (frame stacks as their frames in a row), scaled
up to a readable height, with the step index, action, reward and boundary flags written under it.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core import nested

MIN_HEIGHT = 168  # Pixels: small frames (84x84 Atari) are scaled up to at least this.
CAPTION_LINE = 14


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
    rgb = hwc
  elif hwc.shape[-1] == 1:
    rgb = np.repeat(hwc, 3, axis=-1)
  else:
    frames = [np.repeat(hwc[..., c:c + 1], 3, axis=-1) for c in range(hwc.shape[-1])]
    rgb = np.concatenate(_with_gaps(frames), axis=1)
  scale = max(1, -(-MIN_HEIGHT // rgb.shape[0]))
  return np.repeat(np.repeat(rgb, scale, axis=0), scale, axis=1)


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


def render_episode(steps: Mapping[str, Any]) -> list[np.ndarray]:
  """One annotated RGB frame per step of an episode's numpy steps."""
  observations = steps[fields.OBSERVATION]
  first = nested.row(observations, 0)
  paths = image_paths(first)
  if not paths:
    raise errors.SchemaError('the observation has no image field (uint8 HxW[xC]); use a .png '
                             'plot for vector observations', field=fields.OBSERVATION)
  flat = _leaves(observations)
  font = ImageFont.load_default()
  frames = []
  for index in range(len(steps[fields.IS_FIRST])):
    panels = [_panel(np.asarray(flat[path][index])) for path in paths]
    height = max(p.shape[0] for p in panels)
    panels = [np.pad(p, ((0, height - p.shape[0]), (0, 0), (0, 0)), constant_values=255)
              for p in panels]
    image = np.concatenate(_with_gaps(panels), axis=1)
    lines = ['  '.join(paths)] + caption(steps, index)
    canvas = Image.new('RGB', (max(image.shape[1], 360), height + CAPTION_LINE * len(lines) + 6),
                       'white')
    canvas.paste(Image.fromarray(image), (0, 0))
    draw = ImageDraw.Draw(canvas)
    for i, line in enumerate(lines):
      draw.text((4, height + 3 + CAPTION_LINE * i), line, fill='black', font=font)
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
    sheet = np.full((rows * h, columns * w, 3), 255, np.uint8)
    for i, frame in enumerate(frames):
      r, c = divmod(i, columns)
      sheet[r * h:r * h + frame.shape[0], c * w:c * w + frame.shape[1]] = frame
    Image.fromarray(sheet).save(path)
  else:
    raise errors.SchemaError('unknown output type; use .gif, .mp4 or .png', path=path)
