"""vvt: video vision transformers (ViViT, TimeSformer, X-ViT) in JAX/Flax."""
import pathlib

from setuptools import find_packages, setup

_HERE = pathlib.Path(__file__).parent


def _reqs(name):
  lines = (_HERE / name).read_text().splitlines()
  return [l.strip() for l in lines if l.strip() and not l.startswith('#')]


setup(
    name='vvt',
    version='0.1.0',
    description='Video vision transformers in JAX/Flax: ViViT, TimeSformer, X-ViT.',
    packages=find_packages(include=['vvt', 'vvt.*']),
    python_requires='>=3.10',
    install_requires=_reqs('requirements.txt'),
    extras_require={
        'test': _reqs('requirements-test.txt'),
        # TPU VMs: the libtpu that jax 0.10.2's own `tpu` extra pins (libtpu==0.0.42.*).
        'tpu': ['jax[tpu]==0.10.2', 'libtpu==0.0.42.1'],
        # NVIDIA GPUs, CUDA 12 from pip wheels: jax 0.10.2's `cuda12` extra.
        'cuda12': ['jax[cuda12]==0.10.2', 'jax-cuda12-plugin[with-cuda]==0.10.2'],
        # benchmarks/compare_hf.py: the Hugging Face (PyTorch) side of the comparison.
        'bench': ['torch==2.13.0', 'transformers==5.23.0'],
    },
    entry_points={'console_scripts': ['vvt=vvt.cli:console']},
)
