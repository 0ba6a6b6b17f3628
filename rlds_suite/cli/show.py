"""`rlds-suite show NAME_OR_DIR [--episode I] [--out FILE.gif|.mp4|.png]`: look at an episode."""

from __future__ import annotations

import json
import os
from typing import Any


def register(subparsers) -> None:
  parser = subparsers.add_parser(
      'show', help="Render an episode: image observations to a GIF/MP4 (or a PNG contact sheet), "
      'vector observations to a PNG plot.')
  parser.add_argument('source', help='registered dataset name or dataset directory')
  parser.add_argument('--episode', type=int, default=0, help='index of the (first) episode shown')
  parser.add_argument('--episodes', type=int, default=1,
                      help='number of consecutive episodes in a plot of vector observations')
  parser.add_argument('--out', default=None,
                      help='output file, .gif, .mp4 or .png (default: NAME_episodeI.gif for '
                      'image observations, .png otherwise)')
  parser.add_argument('--fps', type=float, default=10.0, help='frames per second of a GIF/MP4')
  parser.add_argument('--every', type=int, default=None,
                      help='image observations: draw every N-th step (default: spread --frames '
                      'evenly over the episode)')
  parser.add_argument('--frames', type=int, default=None,
                      help='image observations: at most this many frames (default: 40 on a .png '
                      'contact sheet, 1000 in a GIF/MP4)')
  parser.add_argument('--split', default=None, help='split to read (default: all)')
  parser.add_argument('--data_dir', default=None, help='TFDS data_dir of a registered name')
  parser.set_defaults(func=run)


def run(args) -> int:
  # pylint: disable=g-import-not-at-top
  from rlds_suite.core import errors
  from rlds_suite.core import fields
  from rlds_suite.core import progress
  from rlds_suite.inspection import rendering
  from rlds_suite.inspection import plots
  from rlds_suite.tfds import datasets
  # pylint: enable=g-import-not-at-top
  builder = datasets.load_builder(args.source, args.data_dir)
  # Whether there are images to animate, from the declared features: the output's kind is checked
  # before any episode is read.
  has_images = bool(rendering.image_paths(_observation_template(builder)))
  name = os.path.basename(os.path.normpath(args.source))
  out = args.out or f'{name}_episode{args.episode}.{"gif" if has_images else "png"}'
  if not has_images and not out.lower().endswith('.png'):
    raise errors.SchemaError('vector observations are plotted; use a .png output', path=out)
  take, stored = max(args.episodes, 1), progress.split_total(builder.info.splits, args.split)
  if stored is not None and not 0 <= args.episode < stored:
    raise errors.SchemaError(f'has no episode {args.episode} ({stored} stored)', path=args.source)
  # The bar is up while the episodes before --episode are skipped (tf.data does not count those).
  chosen = list(progress.episodes(
      datasets.read_episodes(builder, split=args.split, skip=args.episode, take=take),
      take if stored is None else min(take, stored - args.episode),
      f'show: reading episode {args.episode}'))
  if not chosen:
    raise errors.SchemaError(f'has no episode {args.episode}', path=args.source)
  first = chosen[0][fields.STEPS]
  if has_images:
    frames = args.frames or rendering.DEFAULT_FRAMES.get(os.path.splitext(out)[1].lower())
    indices = rendering.chosen_steps(len(first[fields.IS_FIRST]), args.every, frames)
    rendered = rendering.render_episode(first, indices, progress_bar=True)
    rendering.write_animation(rendered, out, fps=args.fps)
    summary = {'out': out, 'episode': args.episode, 'frames': len(rendered),
               'steps': len(first[fields.IS_FIRST]), 'size': list(rendered[0].shape[:2])}
  else:
    plots.plot_episodes(chosen, out, title=f'{args.source}: episodes {args.episode}..'
                        f'{args.episode + len(chosen) - 1}')
    summary = {'out': out, 'episodes': len(chosen),
               'steps': sum(len(e[fields.STEPS][fields.IS_FIRST]) for e in chosen)}
  print(json.dumps(summary))
  return 0


def _observation_template(builder) -> Any:
  """An all-zero observation row as the dataset's features declare it (unknown sizes as 8)."""
  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  import numpy as np
  from rlds_suite.core import fields
  # pylint: enable=g-import-not-at-top,import-outside-toplevel

  def zeros(info: Any) -> Any:
    if isinstance(info, dict):
      return {key: zeros(value) for key, value in info.items()}
    dtype = np.dtype(getattr(info.dtype, 'as_numpy_dtype', info.dtype))
    return np.zeros([8 if size is None else size for size in info.shape], dtype)

  return zeros(builder.info.features[fields.STEPS][fields.OBSERVATION].get_tensor_info())
