"""Weights in and out of vvt.

  video.convert(source, path, model_cfg=None, hf_config=None) -> Converted(params, model_fields, report)
      official / Hugging Face / scenic video checkpoints (sources in `video.SOURCES`); `vvt convert` on top.
  image_init.initialise(params, init_from, model_cfg) -> (params, report)
      image ViT checkpoints (big_vision/AugReg, scenic, HF, timm) into any model family, the papers' strategies.
  export.to_safetensors(params, path) / export.from_safetensors(path)
      vvt params <-> safetensors with '/'-joined names; `vvt export` on top.
  hf_export.write(params, model_cfg, folder, class_names=None)
      vvt models -> Hugging Face transformers folders (config.json + model.safetensors); `vvt export --format hf`.
Per-source modules: scenic (ViViT Models 1-4), timesformer (official + HF), xvit, hf_vivit, hf_videomae, hf_vjepa2,
hf_videoprism (each HF source also writes the Hugging Face format back: `to_hf`); image (readers); common (safe file
loading, layout helpers both ways, the report).
"""
