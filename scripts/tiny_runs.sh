#!/bin/bash
# Three tiny `vvt train` runs and one `vvt eval` from one checkout, for scripts/compare_runs.py: what a refactor
# must leave unchanged, bit for bit.
#   bash scripts/tiny_runs.sh CHECKOUT OUT DATA
# DATA: a small synthetic set, written on first use (4 classes, 24 train / 8 test clips of 16 frames, 64 px).
set -e
ROOT=$(cd "$1" && pwd); OUT=$2; D=$3
export PYTHONPATH=$ROOT JAX_PLATFORMS=cpu TF_CPP_MIN_LOG_LEVEL=2
PY=${PYTHON:-python}
if [ ! -d "$D" ]; then
  (cd "$ROOT" && $PY -c "from vvt.data.writing import synthetic; synthetic.write_synthetic('$D', num_classes=4,
      train_clips=24, test_clips=8, num_frames=16, frame_size=64, seed=1, train_shards=2, test_shards=1)")
fi
rm -rf "$OUT"; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd); D=$(cd "$D" && pwd)
COMMON="--config.dataset.train_files=$D/train-*-of-*.tfrecord --config.dataset.eval_files=$D/test-*-of-*.tfrecord
  --config.eval.batch_size=8 --no-progress"
cd "$ROOT"
# 1. divided attention, AdamW + EMA + layer decay + mixup/cutmix + accumulation, evaluation during training
$PY -m vvt train --config configs/synthetic.py:divided --workdir "$OUT/divided" $COMMON --config.num_train_steps=6 \
  --config.log_every_steps=2 --config.checkpoint.every_steps=3 --config.eval.every_steps=3 \
  --config.optimizer.ema_decay=0.9 --config.optimizer.layer_decay=0.8 --config.loss.mixup_alpha=0.8 \
  --config.loss.cutmix_alpha=1.0 --config.optimizer.accumulation_steps=2 --config.dataset.num_test_clips=2 \
  > "$OUT/divided.log" 2>&1
# 2. factorised encoder, scanned layers, SGD with a step schedule, label smoothing, softmax average, repeats
$PY -m vvt train --config configs/synthetic.py:factorised_encoder --workdir "$OUT/fe" $COMMON \
  --config.num_train_steps=4 --config.log_every_steps=1 --config.model.scan_layers=True --config.optimizer.name=sgd \
  --config.schedule.name=step --config.schedule.decay_epochs='(0.5,)' --config.schedule.base_lr=0.05 \
  --config.loss.label_smoothing=0.1 --config.eval.average=softmax --config.dataset.repeated_augmentation=2 \
  > "$OUT/fe.log" 2>&1
# 3. the README's paper config, shrunk by runlocal
$PY -m vvt train --config configs/kinetics400/vivit_b_fe.py --config.runlocal=True --workdir "$OUT/paper" $COMMON \
  --config.num_train_steps=3 --config.schedule.warmup_steps=1 > "$OUT/paper.log" 2>&1
# 4. vvt eval of run 1 with its raw params
$PY -m vvt eval --workdir "$OUT/divided" --raw_params --no-progress > "$OUT/eval.log" 2>&1
grep -h "\[done\]" "$OUT"/*.log
