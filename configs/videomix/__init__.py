"""VideoMix2M configs (Kinetics-710 + Something-Something v2 + HowTo100M: V-JEPA's pretraining mixture)."""
