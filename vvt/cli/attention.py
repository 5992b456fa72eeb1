"""`vvt attention`: attention maps of a trained checkpoint on one video, as pictures.

  vvt attention --workdir runs/divided clip.mp4 --out maps/
  vvt attention --checkpoint runs/tsf_k400 frames_dir/ --out maps/ --step 4000

The input is a video file (mp4, webm, avi, ... via PyAV) or a folder of frames; the clip is the config's
centre evaluation view (middle clip, centre crop: `vvt.data.transforms.views`, as `vvt predict`). Writes to --out:
  attention_grid.png    frames x (every stage of every layer: attention received per patch, heads averaged;
                        then the final map: class-token attention where the model has a class token, else
                        attention rollout through the residuals across layers)
  attention_heads.png   frames x heads of the last layer
  attention_frames.png  the temporal part: which temporal indices the tokens of each index attend to, per stage
  attention.gif         the final map over the frames, animated
  attention.npz         the maps (final, per_stage/<name>, frames/<name>)
Every scheme (vvt.inspection.attention_maps): the probabilities are recomputed from the model's own projections
and groupings.
"""
import os

from vvt.cli import common
from vvt.cli import predict as predict_cli


def _attention(argv):
  p = common.Parser('vvt attention', __doc__, config=True)
  p.add_argument('input', metavar='VIDEO_OR_DIR', help='a video file or a folder of frames')
  p.add_argument('--workdir', help='a training run directory (its config.json and checkpoints/)')
  p.add_argument('--checkpoint', help='a converted checkpoint: `vvt convert --output DIR` (or DIR/checkpoints/N)')
  p.add_argument('--step', type=int, default=None, help='checkpoint step (default: latest)')
  p.add_argument('--out', required=True, help='output folder')
  args, spec, overrides = common.parse(p, argv)
  workdir, step = predict_cli._locate(args)
  run = common.run_spec(spec, overrides, workdir, purpose='attention')  # needs no dataset files
  import jax
  import numpy as np

  from vvt.data import find_inputs
  from vvt.data import load_views
  from vvt.data import normalize
  from vvt.inspection import attention_maps as am
  from vvt.inspection import attention_plots as plots
  from vvt.train import checkpoints
  from vvt.train import mesh as mesh_lib
  from vvt.train import program as program_lib
  items = find_inputs([args.input])
  if len(items) != 1:
    raise common.UsageError(f'{args.input}: give one video file or one folder of frames (found {len(items)} videos)')
  _, kind, path = items[0]
  all_views = load_views(path, kind, run.data)  # uint8 (clips * crops, T, S, S, 3)
  crops = int(run.data.num_spatial_crops)
  clips = all_views.shape[0] // crops
  clip = all_views[(clips // 2) * crops + crops // 2]  # the centre view
  program = program_lib.build_program(run, mesh_lib.make_mesh(devices=jax.local_devices()[:1]))  # one device
  params, step, _ = checkpoints.load_eval_params(checkpoints.abspath(workdir), step, program.abstract_params(),
                                                 raw=run.eval.raw_params)  # EMA params where kept
  video = normalize(clip[None], program.eval_settings.normalization)
  maps = am.attention_maps(params, video, run.model)
  os.makedirs(args.out, exist_ok=True)
  out = lambda name: os.path.join(args.out, name)
  plots.grid_png(clip, maps, out('attention_grid.png'))
  plots.heads_png(clip, maps, out('attention_heads.png'))
  plots.frames_png(maps, out('attention_frames.png'))
  plots.gif(clip, maps, out('attention.gif'))
  arrays = {'final': maps.final[0]}
  arrays.update({f'per_stage/{k}': v[0] for k, v in maps.per_stage.items()})
  arrays.update({f'frames/{k}': v[0] for k, v in maps.frames.items()})
  np.savez(out('attention.npz'), **arrays)
  print(f'{args.input}: {maps.scheme} step {step}, {maps.kind} maps ({len(maps.stages)} attention stages) '
        f'-> {args.out}/attention_grid.png, attention_heads.png, attention_frames.png, attention.gif, attention.npz')
  return 0


def main(argv) -> int:
  return common.run('vvt attention', _attention, argv)
