"""Weights in and out of vvt.

  video.convert(source, path, model_cfg=None, hf_config=None) -> Converted(params, model_fields, report)
      official / Hugging Face / scenic video checkpoints; `vvt convert` on top.
  sources.SOURCES: one record per converter source (its reader, sizes, base config, normalisation, export targets,
      what it refuses), read by `vvt convert --help`, `vvt train --init`, the export and the docs' table test.
  image_init.initialise(params, init, model) -> (params, report)       init: init_options.InitSpec, model: ModelSpec
      image ViT checkpoints (big_vision/AugReg, scenic, HF, timm) into any model family, the papers' strategies.
  export.to_safetensors(params, path) / export.from_safetensors(path)
      vvt params <-> safetensors with '/'-joined names; `vvt export` on top.
  hf_export.write(params, model_cfg, folder, class_names=None)
      vvt models -> Hugging Face transformers folders (config.json + model.safetensors); `vvt export --format hf`.
Per-source modules: scenic (ViViT Models 1-4), timesformer (official + HF), xvit, hf_vivit, hf_videomae, hf_vjepa2,
hf_videoprism (each a `convert_for(state, ask)`; each HF source also writes the Hugging Face format back: `to_hf`);
image (readers). Shared, by job: weight_files (safe file reading, flat names), conversion (what is asked, the
names taken, the report), torch_layout (PyTorch layouts both ways), hf_folder (a Hugging Face folder's files).
"""
